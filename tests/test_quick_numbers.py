"""Results that cannot drift from the code: every deterministic experiment's quick numbers, made by this session's
quick runs, equal those committed under results/quick/ (`reproduce.py --check` does the same on its own)."""

from __future__ import annotations

import json
import sys

import pytest

import experiments
from experiments import provenance

DETERMINISTIC = [n for n in experiments.names() if experiments.get(n).deterministic]


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_quick_numbers_are_the_committed_ones(outputs, name):
    _, numbers = outputs[name]
    assert provenance.check(name, numbers, experiments.get(name).volatile) == [], (
        f"{name}'s quick numbers changed ({provenance.cause(name)}): if the change meant to, rerun it and record "
        f"them with `python scripts/reproduce.py --check --update {name}`")


def test_every_committed_quick_file_belongs_to_a_deterministic_experiment():
    recorded = sorted(p.stem for p in provenance.QUICK_DIR.glob("*.json"))
    assert recorded == sorted(DETERMINISTIC)


def test_the_comparison_finds_what_changed_and_ignores_what_may():
    before = {"a": 1, "b": [1.0, 2.0], "c": {"x_s": 0.2, "x_evals": 7}, "d": "pkg"}
    assert provenance.differences(before, json.loads(json.dumps(before))) == []
    assert provenance.differences(before, {**before, "b": [1.0, 2.0 * (1 + 1e-12)]}) == []  # the last bits only
    assert provenance.differences(before, {**before, "b": [1.0, 2.001]}) == ["b[1]: committed 2.0, now 2.001"]
    assert provenance.differences(before, {**before, "a": 1.0}) == []  # an int that became the same float
    assert provenance.differences(before, {**before, "a": True}) == ["a: committed 1, now true"]
    assert provenance.differences(before, {**before, "e": 3}) == ["e: new"]
    assert provenance.differences(before, {k: v for k, v in before.items() if k != "d"}) == ["d: missing now"]
    assert provenance.differences(before, {**before, "b": [1.0]}) == ["b: committed [1.0, 2.0], now [1.0]"]
    # a wall-clock time may differ, a count may not
    timed = {**before, "c": {"x_s": 0.9, "x_evals": 7}}
    assert provenance.differences(provenance.without(before, ("_s",)), provenance.without(timed, ("_s",))) == []
    assert provenance.differences(before, timed) == ["c.x_s: committed 0.2, now 0.9"]


def test_a_folder_written_by_reproduce_says_what_ran_it(tmp_path):
    text = provenance.command_text("cg-eps", True, provenance.ROOT / "results", 12.3)
    first, second, third = text.splitlines()
    assert first == "python scripts/reproduce.py cg-eps --quick --out results"
    assert second.startswith("# at commit ") and " UTC; took 12 s wall on a " in second
    assert third.startswith("# with python ") and "; machine: " in third  # the versions and machine it ran with
    assert provenance.commit().split("+")[0] in second
    # a folder outside the checkout is named by its last part only: no path of the machine that ran it
    assert "--out " + tmp_path.name + "\n" in provenance.command_text("cg-eps", False, tmp_path, 1.0)


def test_record_keeps_a_commands_output_with_its_provenance(tmp_path, capsys):
    record = _record_script()
    folder = tmp_path / "bench"
    assert record.main([str(folder), "--", sys.executable, "-c", "print('3.2 M tuples/s')"]) == 0
    assert (folder / "output.txt").read_text() == "3.2 M tuples/s\n"
    first, second, _ = (folder / "COMMAND").read_text().splitlines()
    assert first == "python -c 'print('\"'\"'3.2 M tuples/s'\"'\"')'"  # the interpreter's path is not shown
    assert second.startswith(f"# at commit {provenance.commit().split('+')[0]}")
    # its own options come before --, the command's after it (an option of the command's is never taken)
    assert record.main([str(folder), "--output", "log.txt", "--", sys.executable, "-c", "print(1)", "--output"]) == 0
    assert (folder / "log.txt").read_text() == "1\n" and (folder / "output.txt").exists()
    # a command that fails changes nothing, and a folder made for it goes again
    assert record.main([str(folder), "--", sys.executable, "-c", "print('other'); raise SystemExit(3)"]) == 3
    assert (folder / "output.txt").read_text() == "3.2 M tuples/s\n"
    assert record.main([str(tmp_path / "new"), "--", sys.executable, "-c", "raise SystemExit(1)"]) == 1
    assert not (tmp_path / "new").exists()
    capsys.readouterr()
    # bad input is one line and status 2
    assert record.main([str(folder)]) == 2
    (tmp_path / "file").write_text("")
    assert record.main([str(tmp_path / "file" / "x"), "--", "true"]) == 2
    assert record.main([str(folder), "--", str(tmp_path / "no-such-program")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("record.py: error: ") for line in err)


def test_record_keeps_a_benchmarks_json_line_as_its_numbers(tmp_path, capsys):
    record = _record_script()
    folder = tmp_path / "bench"
    table = "print('kg 1.5 s'); print('{\"wall_s\": 1.5}')"
    assert record.main([str(folder), "--numbers", "--", sys.executable, "-c", table]) == 0
    assert (folder / "output.txt").read_text() == "kg 1.5 s\n"  # the JSON line is the numbers, not the output
    assert json.loads((folder / "numbers.json").read_text()) == {"wall_s": 1.5}
    # a last line that is not a JSON object: one line, status 2, and the earlier record stays whole
    capsys.readouterr()
    for last in ("print('kg 2 s')", "print('[1, 2]')"):
        assert record.main([str(folder), "--numbers", "--", sys.executable, "-c", last]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("record.py: error: ") for line in err)
    assert (folder / "output.txt").read_text() == "kg 1.5 s\n"
    assert json.loads((folder / "numbers.json").read_text()) == {"wall_s": 1.5}


def _record_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("record", provenance.ROOT / "scripts" / "record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
