"""The numbers the docs quote from experiments are filled in from the committed results, and say what they hold."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from experiments import quoted


def test_every_quoted_number_says_what_its_results_hold():
    assert quoted.marked() >= 20
    assert quoted.stale() == []


def _checkout(tmp_path, doc: str, numbers: dict):
    (tmp_path / "results" / "toy").mkdir(parents=True)
    (tmp_path / "results" / "toy" / "numbers.json").write_text(json.dumps(numbers))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "toy.md").write_text(doc)
    quoted.numbers.cache_clear()
    return tmp_path / "docs" / "toy.md"


def test_a_rerun_that_moves_a_result_moves_the_quoted_number(tmp_path):
    doc = ("pkg reaches 0.29<!--= toy max(r['pkg'] for r in rows) | .2f --> at most, and kg "
           "1,234<!--= toy n['kg'] | ,.0f --> tuples/s; 3e-06<!--= toy rows[0]['wc'] | .0e --> for wc, "
           "0.2<!--= toy pick(rows, wc=1e-6)['pkg'] | .1f --> where wc is lowest, "
           "2<!--= toy max(r['pkg'] / pick(rows, wc=1e-6)['pkg'] for r in rows) | .0f -->x at most.\n")
    path = _checkout(tmp_path, doc, {"rows": [{"pkg": 0.31, "wc": 2e-6}, {"pkg": 0.2, "wc": 1e-6}], "kg": 1234.4})
    assert [(str(d), line, says, now) for d, line, says, now in quoted.stale(tmp_path)] == [
        ("docs/toy.md", 1, "0.29", "0.31"), ("docs/toy.md", 1, "3e-06", "2e-06")]
    assert quoted.quote(tmp_path) == [path]
    assert path.read_text() == doc.replace("0.29<", "0.31<").replace("3e-06<", "2e-06<")  # markers kept
    assert quoted.stale(tmp_path) == [] and quoted.quote(tmp_path) == []


def test_a_marker_that_names_nothing_is_one_clear_error(tmp_path):
    _checkout(tmp_path, "x 1.0<!--= toy rows[5]['pkg'] | .1f --> y\n", {"rows": []})
    with pytest.raises(quoted.QuoteError, match=r"toy \"rows\[5\]\['pkg'\]\".*IndexError"):
        quoted.stale(tmp_path)
    _checkout(tmp_path / "c", "x 1.0<!--= toy pick(rows, z=9)['pkg'] | .1f --> y\n", {"rows": [{"z": 1}]})
    with pytest.raises(quoted.QuoteError, match=r"LookupError: no row with \{'z': 9\}"):
        quoted.stale(tmp_path / "c")
    _checkout(tmp_path / "b", "x 1.0<!--= nothing a | .1f --> y\n", {})
    with pytest.raises(quoted.QuoteError, match="no results/nothing/numbers.json"):
        quoted.stale(tmp_path / "b")


def test_a_run_s_wall_time_is_quoted_from_its_command(tmp_path):
    doc = "a run takes 9<!--= toy took_s | .0f --> s, 2<!--= toy took_s / k | .0f -->x\n"
    path = _checkout(tmp_path, doc, {"k": 6})
    (tmp_path / "results" / "toy" / "COMMAND").write_text("python x.py\n# at commit abc on 2026-11-28 09:00 UTC; "
                                                          "took 12 s wall on a 2-core machine\n")
    assert quoted.quote(tmp_path) == [path] and path.read_text().startswith("a run takes 12<")
    # a folder with a COMMAND and no numbers.json still has its wall time
    (tmp_path / "results" / "toy" / "numbers.json").unlink()
    quoted.numbers.cache_clear()
    assert quoted.evaluate("toy", "took_s", tmp_path) == 12.0
    (tmp_path / "results" / "toy" / "COMMAND").unlink()
    quoted.numbers.cache_clear()
    with pytest.raises(quoted.QuoteError, match="nor a COMMAND"):
        quoted.evaluate("toy", "took_s", tmp_path)


def test_every_experiment_s_wall_time_sums_over_the_registered_experiments_only(tmp_path):
    import experiments

    first, second, *rest = experiments.names()
    doc = "--all takes 1.0<!--= experiments took_s / 3600 | .1f --> hours, 0<!--= experiments len(missing) | d -->\n"
    path = _checkout(tmp_path, doc, {})
    for name, seconds in ((first, 5400), (second, 1800), ("bench-toy", 99_999)):  # a benchmark's folder: not counted
        (tmp_path / "results" / name).mkdir()
        (tmp_path / "results" / name / "COMMAND").write_text(
            f"python x.py\n# at commit abc on 2026-11-28 09:00 UTC; took {seconds} s wall on a 2-core machine\n")
    (tmp_path / "results" / rest[0]).mkdir()
    (tmp_path / "results" / rest[0] / "COMMAND").write_text("python x.py\n")  # no wall time recorded: missing
    assert quoted.evaluate("experiments", "took", tmp_path) == {first: 5400.0, second: 1800.0}
    assert quoted.evaluate("experiments", "missing", tmp_path) == rest
    assert quoted.quote(tmp_path) == [path]
    assert path.read_text() == doc.replace("1.0<", "2.0<").replace(" 0<", f" {len(rest)}<")


def test_the_command_checks_without_writing():
    done = subprocess.run([sys.executable, "scripts/quote_numbers.py", "--check"], capture_output=True, text=True,
                          cwd=quoted.ROOT, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("0 stale")


def test_a_copied_output_follows_its_file(tmp_path):
    doc = ("It prints:\n\n<!--copy results/toy/output.txt-->\n```\nkg 1.5 s\n```\n\n"
           "and 1.5<!--= toy n['s'] | .1f --> s.\n")
    path = _checkout(tmp_path, doc, {"s": 1.5})
    (tmp_path / "results" / "toy" / "output.txt").write_text("kg 1.5 s   \n")  # trailing spaces are not copied
    assert quoted.stale(tmp_path) == [] and quoted.marked(tmp_path) == 2
    (tmp_path / "results" / "toy" / "output.txt").write_text("kg 1.7 s\nsg 1.2 s\n")
    assert [(str(d), line, says) for d, line, says, _ in quoted.stale(tmp_path)] == [
        ("docs/toy.md", 5, "a copy of results/toy/output.txt")]
    assert quoted.quote(tmp_path) == [path]
    assert path.read_text() == doc.replace("kg 1.5 s\n", "kg 1.7 s\nsg 1.2 s\n")
    (tmp_path / "results" / "toy" / "output.txt").unlink()
    with pytest.raises(quoted.QuoteError, match="no results/toy/output.txt"):
        quoted.stale(tmp_path)


def test_a_copied_table_follows_its_file(tmp_path):
    doc = ("The table:\n\n<!--table results/toy/table.md-->\n| a | b |\n|---|---|\n| 1 | 2 |\n<!--/table-->\n\n"
           "and 1.5<!--= toy n['s'] | .1f --> s.\n")
    path = _checkout(tmp_path, doc, {"s": 1.5})
    (tmp_path / "results" / "toy" / "table.md").write_text("| a | b |  \n|---|---|\n| 1 | 2 |\n\n")
    assert quoted.stale(tmp_path) == [] and quoted.marked(tmp_path) == 2  # trailing spaces and lines are not copied
    (tmp_path / "results" / "toy" / "table.md").write_text("3 rows.\n\n| a | b |\n|---|---|\n| 1 | 3 |\n")
    assert [(str(d), line, says) for d, line, says, _ in quoted.stale(tmp_path)] == [
        ("docs/toy.md", 4, "a copy of results/toy/table.md")]
    assert quoted.quote(tmp_path) == [path]
    assert path.read_text() == doc.replace("| a | b |\n|---|---|\n| 1 | 2 |\n",
                                           "3 rows.\n\n| a | b |\n|---|---|\n| 1 | 3 |\n")
    assert quoted.stale(tmp_path) == [] and quoted.quote(tmp_path) == []
    (tmp_path / "results" / "toy" / "table.md").unlink()
    with pytest.raises(quoted.QuoteError, match="no results/toy/table.md"):
        quoted.stale(tmp_path)
