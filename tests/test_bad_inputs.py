"""Bad input, as a new user types it, into every command: one line on stderr, exit status 2, no traceback, and
nothing written anywhere (an output directory appears whole or not at all).

The cases here are the ones the other test files do not already cover (tests/test_cli.py, test_advise.py,
test_make_stream.py, test_analyze_runs.py, test_dashboards.py); all are refused before Spark or Ray starts, except
the one Spark case at the end.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from ahead import AHEAD
from side_by_side import chosen, run_all, script

STREAM = "zipf:z=1.2,keys=200,messages=500,seed=1"
FORBIDDEN = "/proc/forbidden/out"  # a directory nobody can make, root included
GOOD = pa.table({"seq": pa.array([0, 1, 2], pa.int64()), "key": ["a", "b", "a"]})

pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")


def _dataset(root: Path, table: pa.Table) -> None:
    root.mkdir()
    pq.write_table(table, root / "part-00000.parquet")
    (root / "_meta.json").write_text("{}\n")


def _with_column(path: Path, name: str, change) -> None:
    table = pq.read_table(path)
    i = table.schema.get_field_index(name)
    pq.write_table(table.set_column(i, name, change(table.column(name))), path)


def _inputs(root: Path) -> Path:
    """Every bad input of the table, built once: datasets, files, and broken copies of a real run directory."""
    from topo.cli.run import main

    root.mkdir(parents=True)
    _dataset(root / "truncated", GOOD)
    part = root / "truncated" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:40])
    _dataset(root / "null-keys", pa.table({"seq": pa.array([0, 1, 2], pa.int64()), "key": ["a", None, "a"]}))
    _dataset(root / "nan-ts", GOOD.append_column("ts", pa.array([0.0, float("nan"), 1.0])))
    _dataset(root / "negative-ts", GOOD.append_column("ts", pa.array([-5.0, 0.0, 1.0])))
    _dataset(root / "no-messages", GOOD.slice(0, 0))
    (root / "empty.csv").write_text("")
    (root / "a-file").write_text("not a directory\n")

    run = root / "run"
    assert main(["--engine", "sim", "--grouping", "kg", "--workers", "2", "--stream", STREAM, "--out", str(run),
                 "--quiet", "--no-plots", "--json"]) == 0
    for name in ("run-truncated", "run-negative-ts", "run-nan-ts", "run-no-rows", "run-list-summary"):
        shutil.copytree(run, root / name)
    log = root / "run-truncated" / "latency.parquet"
    log.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    _with_column(root / "run-negative-ts" / "latency.parquet", "arrival_s", lambda c: pc.subtract(c, 100.0))
    _with_column(root / "run-nan-ts" / "timeseries.parquet", "t_s",
                 lambda c: pa.array([float("nan")] + c.to_pylist()[1:], pa.float64()))
    pq.write_table(pq.read_table(root / "run-no-rows" / "latency.parquet").slice(0, 0),
                   root / "run-no-rows" / "latency.parquet")
    (root / "run-list-summary" / "summary.json").write_text(json.dumps([1, 2]))
    return root


def _mute_port() -> tuple[socket.socket, str]:
    """A local port that takes connections (the kernel's backlog) and never says a word: (its socket, address)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s, f"127.0.0.1:{s.getsockname()[1]}"


def _closed_port() -> str:
    """A local port nothing listens on (just freed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


SIM = ["--engine", "sim", "--stream", STREAM, "--quiet"]

# (script, argv, what the line must mention); {in} is the inputs directory, {out} a fresh output path in an empty
# working directory
CASES = [
    ("run_topology", [*SIM, "--seed", "-1", "--out", "{out}"], "--seed"),
    ("run_topology", [*SIM, "--out", FORBIDDEN], "--out /proc/forbidden/out"),
    ("run_topology", [*SIM, "--out", "{in}/a-file/run"], "is not a directory"),
    ("run_topology", ["--engine", "sim", "--stream", "{in}/truncated", "--out", "{out}"], "part-00000.parquet"),
    ("run_topology", ["--engine", "sim", "--stream", "{in}/null-keys", "--out", "{out}"], "null values"),
    ("run_topology", ["--engine", "sim", "--stream", "{in}/nan-ts", "--out", "{out}"], "NaN"),
    ("run_topology", ["--engine", "sim", "--stream", "{in}/negative-ts", "--out", "{out}"], "negative"),
    ("run_topology", ["--engine", "sim", "--stream", "{in}/no-messages", "--out", "{out}"], "no messages"),
    ("run_topology", ["--engine", "sim", "--stream", "", "--out", "{out}"], "empty stream name"),
    # on Ray the stream loads while the run's actors start: a stream that fails then still ends in one line
    ("run_topology", ["--engine", "ray", "--stream", "{in}/truncated", "--out", "{out}"], "part-00000.parquet"),
    ("run_topology", [*SIM, "--sources", "0", "--out", "{out}"], "--sources"),
    ("run_topology", [*SIM, "--rate", "inf", "--out", "{out}"], "--rate"),
    ("run_topology", [*SIM, "--net-delay-ms", "inf", "--out", "{out}"], "--net-delay-ms"),
    ("run_topology", [*SIM, "--sample-interval", "0", "--out", "{out}"], "--sample-interval"),
    ("run_topology", ["--engine", "ray", "--stream", STREAM, "--address", "nonsense", "--out", "{out}"],
     "--address nonsense"),
    ("run_topology", ["--engine", "ray", "--stream", STREAM, "--address", "{closed}", "--out", "{out}"],
     "--address {closed}: no Ray cluster answers"),  # Ray itself would retry for minutes; the address as typed
    ("run_topology", ["--engine", "ray", "--stream", STREAM, "--address", "{mute}", "--out", "{out}"],
     "--address {mute}: no Ray cluster answers"),  # a port that takes connections and never speaks
    ("advise", [*SIM[2:], "--seed", "-1", "--out", "{out}"], "--seed"),
    ("advise", [*SIM[2:], "--out", FORBIDDEN], "--out /proc/forbidden/out"),
    ("advise", [*SIM[2:], "--p99-bound-ms", "nan", "--out", "{out}"], "--p99-bound-ms"),
    ("make_stream", ["zipf", "--messages", "100", "--seed", "-1", "--out", "{out}"], "--seed"),
    ("make_stream", ["zipf", "--messages", "100", "--out", FORBIDDEN], "--out /proc/forbidden/out"),
    ("make_stream", ["zipf", "--messages", "0", "--out", "{out}"], "--messages"),
    ("make_stream", ["poisson", "--messages", "100", "--out", "{out}"], "poisson"),
    ("make_stream", ["import", "{in}/empty.csv", "--key-col", "user", "--out", "{out}"], "empty file"),
    ("analyze_runs", ["{in}/run-truncated", "--out", "{out}"], "latency.parquet: not a readable Parquet file"),
    ("analyze_runs", ["{in}/run-negative-ts", "--out", "{out}"], "negative"),
    ("analyze_runs", ["{in}/run", "--out", FORBIDDEN], "--out /proc/forbidden/out"),
    ("dashboards", ["--render", "{in}/run-truncated", "--out", "{out}"], "cannot read run logs"),
    ("dashboards", ["--render", "{in}/run-list-summary", "--out", "{out}"], "expected a JSON object"),
    ("dashboards", ["--render", "{in}/run-no-rows", "--out", "{out}"], "no rows"),
    ("dashboards", ["--render", "{in}/run-nan-ts", "--out", "{out}"], "NaN"),
    ("dashboards", ["--render", "{in}/run", "--out", FORBIDDEN], "--out /proc/forbidden/out"),
    ("dashboards", ["--out", FORBIDDEN], "--out /proc/forbidden/out"),
    ("dashboards", ["--check", "--out", "{out}"], "no such directory"),
    ("dashboards", ["--timeout", "nan", "--out", "{out}"], "--timeout"),
]


def _snapshot(root: Path) -> list[tuple[str, int]]:
    """Every path under `root`, hidden ones included, with its size: what a command must leave as it was."""
    return sorted((str(p.relative_to(root)), p.stat().st_size if p.is_file() else -1) for p in root.rglob("*"))


def _fill(text: str, fill: dict[str, str]) -> str:
    for key, value in fill.items():
        text = text.replace(key, value)
    return text


@dataclass
class Outcome:
    """One case as it ran: in its own copy of the inputs (`root/in`) and an empty working directory (`root/cwd`)."""

    root: Path
    fill: dict[str, str]
    before: list[tuple[str, int]]
    got: subprocess.CompletedProcess | None = None
    after: list[tuple[str, int]] | None = None  # the inputs' snapshot once the command ended
    left: list[str] | None = None  # what the command left in its working directory


def run_cases(cases: list[int]) -> tuple[Path, dict[int, Outcome]]:
    """The cases, each in its own copy of the inputs, run side by side: (the directory holding them, outcomes)."""
    base = Path(tempfile.mkdtemp(prefix="bad-inputs-"))
    inputs = _inputs(base / "inputs")
    done: dict[int, Outcome] = {}
    mute, mute_address = _mute_port()
    for i in cases:
        root = base / f"case-{i}"
        shutil.copytree(inputs, root / "in")
        (root / "cwd").mkdir()
        fill = {"{in}": str(root / "in"), "{out}": str(root / "cwd" / "out"), "{closed}": _closed_port(),
                "{mute}": mute_address}
        done[i] = Outcome(root, fill, _snapshot(root / "in"))
    jobs = {i: (script(CASES[i][0], *(_fill(a, o.fill) for a in CASES[i][1])), o.root / "cwd") for i, o in done.items()}
    with mute:
        # a generous limit: made ahead, the cases may be stopped for a while by a test that measures time
        for i, got in run_all(jobs, timeout_s=300.0).items():
            done[i].got = got
            done[i].after = _snapshot(done[i].root / "in")
            done[i].left = sorted(p.name for p in (done[i].root / "cwd").iterdir())
    return base, done


def ahead(items) -> list:
    """The selected cases, run in the background while the other files run (tests/ahead.py): some 35 commands
    that each start an interpreter, which on two cores is half a minute."""
    cases = sorted({item.callspec.params["case"] for item in items
                    if "case" in getattr(getattr(item, "callspec", None), "params", {})})
    return [(("bad-inputs", tuple(cases)), run_cases, (cases,))] if cases else []


@pytest.fixture(scope="module")
def outcomes(request) -> Iterator[dict[int, Outcome]]:
    """The selected cases as they ran: made ahead, or now if they were not."""
    cases = chosen(request, "case")
    base, done = AHEAD.take(("bad-inputs", tuple(cases))) or run_cases(cases)
    yield done
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{s}:{' '.join(a).replace(STREAM, 'S')}" for s, a, _ in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(outcomes, case):
    script, argv, says = CASES[case]
    if FORBIDDEN in argv and not Path("/proc/self").exists():
        pytest.skip("needs Linux's /proc for a directory nobody can make")
    outcome = outcomes[case]
    got = outcome.got
    lines = [line for line in got.stderr.splitlines() if line.strip()]
    assert got.returncode == 2, got.stderr[-3000:]
    assert "Traceback" not in got.stderr + got.stdout
    assert len(lines) == 1, got.stderr
    assert lines[0].startswith(f"{script}.py: error: ") and _fill(says, outcome.fill) in lines[0], lines[0]
    assert outcome.left == []  # no output directory, no hidden temporary one beside it
    assert outcome.after == outcome.before  # and nothing added to or changed in the inputs


def test_imported_nan_times_are_refused(spark, tmp_path, capsys):
    """NaN or infinite arrival times in a user's log are found by the Spark job (numbers parse only there); in
    process, on the session's shared Spark, since a fresh one costs about 20 s."""
    from spark.streams_cli import main

    (tmp_path / "log.csv").write_text("user,ts\na,1\nb,NaN\nc,Infinity\n")
    status = main(["import", str(tmp_path / "log.csv"), "--key-col", "user", "--ts-col", "ts",
                   "--out", str(tmp_path / "ds")])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "log.csv: --ts-col column 'ts' has 2 NaN or infinite values" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.csv"]
