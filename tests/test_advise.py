"""advise.py: every grouping ranked by the user's objective, with the numbers run_topology.py gives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from side_by_side import chosen, run_all, script

from topo.cli.advice import overloaded, pareto_front, rank, sort_key

ROOT = Path(__file__).resolve().parents[1]
FIG8 = ["--stream", "zipf:z=1.0224,keys=100000,messages=12000,seed=7", "--seed", "3"]  # Fig. 8: 10 workers, 80%


def summary(name, tps, p99, repl, exact=True):
    return {"grouping": name, "throughput_tps": tps, "latency_ms": {"p50": p99 / 2, "p99": p99},
            "replication": repl, "exact": exact, "imbalance": 0.0}


def test_objectives_order_as_they_say():
    runs = [summary("a", 100, 50, 1.0), summary("b", 200, 10, 2.0), summary("c", 300, 30, 1.5),
            summary("d", 900, 1, 1.0, exact=False)]
    assert [s["grouping"] for s in rank(runs, "p99")] == ["b", "c", "a", "d"]  # not exact: last whatever it did
    assert [s["grouping"] for s in rank(runs, "throughput")] == ["c", "b", "a", "d"]
    # memory: fewest copies among those within the bound, then the rest by p99
    assert [s["grouping"] for s in rank(runs, "memory", p99_bound_ms=55)] == ["a", "c", "b", "d"]
    assert [s["grouping"] for s in rank(runs, "memory", p99_bound_ms=40)] == ["c", "b", "a", "d"]
    assert [s["rank"] for s in rank(runs, "p99")] == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="unknown objective"):
        sort_key(runs[0], "speed")


def test_a_rate_beyond_what_the_workers_serve_is_ranked_by_throughput(tmp_path):
    """At three times what the workers serve, no grouping carries the rate and every p99 only measures how long
    the backlog took to drain: the advice says so and ranks by throughput."""
    assert overloaded(30_000.0, 10_000.0) and not overloaded(8_000.0, 10_000.0) and not overloaded(None, 1.0)
    got = advise(tmp_path, *FIG8, "--utilization", "3", "--groupings", "kg,sg", "--jobs", "1", "--out", "adv", "--json",
                 "--quiet")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout.strip().splitlines()[-1])
    assert doc["ranked_by"] == "throughput"
    assert "No grouping can carry the offered 66,000 tuples/s: the workers serve 22,000" in doc["note"]
    tps = [s["throughput_tps"] for s in doc["ranking"]]
    assert tps == sorted(tps, reverse=True) and doc["ranking"][-1]["grouping"] == "kg"
    assert "No grouping can carry" in (tmp_path / "adv/advice.md").read_text()


def test_pareto_front_keeps_only_the_undominated_exact_runs():
    runs = [summary("a", 100, 50, 1.0), summary("b", 200, 10, 2.0), summary("c", 150, 60, 2.5),
            summary("d", 900, 1, 1.0, exact=False), summary("e", 200, 10, 2.0)]
    # c is worse than b in all three; a (least memory) and b (best latency) trade off; d is wrong; e ties b
    assert pareto_front(runs) == [True, True, False, False, True]


def advise(tmp_path, *args):
    return subprocess.run([sys.executable, str(ROOT / "scripts/advise.py"), *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)


def comparable(s):
    return {k: v for k, v in s.items() if k not in ("run_dir", "wall_clock_s", "rank", "pareto")}


def test_fig8_ranks_an_adaptive_grouping_above_kg_with_run_topology_numbers(tmp_path):
    # advise.py, and the same specs through run_topology.py, side by side
    runs = run_all({
        "advise": (script("advise", "--groupings", "kg,pkg,cg", *FIG8, "--jobs", "2", "--out", "adv", "--json"),
                   tmp_path),
        **{name: (script("run_topology", "--engine", "sim", "--grouping", name, *FIG8, "--json", "--quiet",
                         "--no-plots", "--out", str(tmp_path / name)), tmp_path) for name in ("kg", "cg")},
    }, 600.0)
    got = runs["advise"]
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout.strip().splitlines()[-1])
    assert doc == json.loads((tmp_path / "adv/advice.json").read_text())
    names = [s["grouping"] for s in doc["ranking"]]
    assert doc["objective"] == "p99" and sorted(names) == ["cg", "kg", "pkg"]
    assert names.index("cg") < names.index("kg")
    assert all({"throughput_tps", "latency_ms", "imbalance", "replication", "per_worker", "exact", "pareto"}
               <= set(s) for s in doc["ranking"])
    for name in ("kg", "cg"):  # the same spec through run_topology.py gives the same summary
        ranked = next(s for s in doc["ranking"] if s["grouping"] == name)
        assert runs[name].returncode == 0, runs[name].stderr
        assert comparable(ranked) == comparable(json.loads(runs[name].stdout.strip().splitlines()[-1]))
        assert (tmp_path / "adv" / ranked["run_dir"] / "summary.json").is_file()
    assert (tmp_path / "adv/pareto.png").stat().st_size > 0 and "Use `" in (tmp_path / "adv/advice.md").read_text()


# bad input: (arguments, what the one line says)
REFUSED = [
    (["--groupings", "kg,nope"], "nope"),
    (["--groupings", "kg,kg"], "distinct"),
    (["--rate", "100", "--utilization", "0.5"], "not both"),
    (["--objective", "speed"], "objective"),
    (["--confirm", "5", "--groupings", "kg,pkg"], "only 2"),
    (["--workers", "3", "--capacities", "1,1"], "capacities"),
    (["--stream", "zipf:z=1.1,keys=10,messages=0,seed=1"], "messages"),
]


@pytest.fixture(scope="module")
def refusals(request, tmp_path_factory) -> dict[int, tuple[Path, subprocess.CompletedProcess]]:
    """The selected bad inputs, run side by side, each in its own empty directory."""
    base = tmp_path_factory.mktemp("refused")
    jobs = {}
    for case in chosen(request, "case"):
        (base / f"case-{case}").mkdir()
        jobs[case] = (script("advise", *REFUSED[case][0], "--out", "adv", "--quiet"), base / f"case-{case}")
    return {case: (jobs[case][1], got) for case, got in run_all(jobs, timeout_s=600.0).items()}


@pytest.mark.parametrize("case", range(len(REFUSED)), ids=[says for _, says in REFUSED])
def test_bad_input_is_one_line_and_writes_nothing(refusals, case):
    says = REFUSED[case][1]
    directory, got = refusals[case]
    assert got.returncode == 2 and says in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert "Traceback" not in got.stderr and not (directory / "adv").exists()


@pytest.mark.slow
def test_confirm_reruns_the_best_on_ray_side_by_side(tmp_path):
    got = advise(tmp_path, "--groupings", "kg,cg", "--stream", "zipf:z=1.0224,keys=1000,messages=4000,seed=7",
                 "--confirm", "1", "--out", "adv", "--json")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout.strip().splitlines()[-1])
    best, ray = doc["ranking"][0], doc["confirm"][0]["ray"]
    assert ray["engine"] == "ray" and ray["grouping"] == best["grouping"] and ray["exact"]
    assert ray["tuples_processed"] == best["tuples_processed"]
    assert "Confirmed on Ray actors" in (tmp_path / "adv/advice.md").read_text()
