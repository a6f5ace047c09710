"""A Ray run's fixed cost: what a whole `run_topology.py` process takes beyond its input's duration, for the
default spec (`make run`'s topology, 50k messages, about 2.8 s of input), with Ray started by the run, with a
Ray that stays up (`--address auto` after `ray start --head`), and in the simulator; and what an experiment of
many Ray runs in one process spends against the sum of its runs' input durations plus one Ray start.

python benchmarks/bench_fixed_cost.py                 # 3 processes each way, an experiment of 20 runs (~5 minutes)
python benchmarks/bench_fixed_cost.py --repeat 1 --runs 5

It also times a cost-0 word count of 2M messages (pkg, 2 sources, 2 workers, saturating input) as a whole process on
Ray (its own, and one that stays up), in the simulator and on Flink (`--engine flink`: a real Flink 2.3 job on a local
MiniCluster, its JVM's own wall time reported apart), side by side; Flink's row needs `make flink`.

Each figure is the median of `--repeat` processes. A Ray start is timed alone too: a child process that starts a
local Ray as a run does (`topo.ray_engine.local.LocalRay`) and waits until it takes actors.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.provenance import add_numbers_option
from topo.ray_engine.nodes import local_cluster

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, str(ROOT / "scripts" / "run_topology.py"), "--no-plots", "--json", "--quiet"]

RAY_START = """
import time
clock = time.perf_counter()
from topo.ray_engine.local import LocalRay
ray = LocalRay()
ray.ready()
print(time.perf_counter() - clock)
ray.join()
"""

EXPERIMENT = """
import json, sys, time
from topo import runner
from topo.cli.run import build_parser, exit_process, spec_from_args

clock = time.perf_counter()
inputs = []
for n in range(int(sys.argv[1])):
    spec = spec_from_args(build_parser().parse_args(["--engine", "ray", "--seed", str(n)]))  # the default
    runner.begin_engine(spec)  # the first starts a local Ray while the stream loads; the others find it up
    result = runner.execute(runner.prepare(spec), progress=False)
    assert result.summary["exact"], n
    inputs.append(result.summary["tuples_in"] / result.summary["config"]["rate"])
print(json.dumps({"wall_s": time.perf_counter() - clock, "inputs_s": inputs}))
exit_process(0)
"""


def timed(args: list[str], env: dict | None = None) -> tuple[float, dict]:
    """(seconds of the whole process, summary) of one run_topology.py with `args`."""
    with tempfile.TemporaryDirectory() as tmp:
        clock = time.perf_counter()
        done = subprocess.run([*RUN, "--out", f"{tmp}/run", *args], capture_output=True, text=True, env=env,
                              cwd=ROOT)
        wall = time.perf_counter() - clock
    if done.returncode:
        raise SystemExit(f"bench_fixed_cost.py: run_topology.py {' '.join(args)}: "
                         f"{(done.stderr.strip().splitlines() or ['failed'])[-1]}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def whole(extra: list[str], env: dict | None = None) -> tuple[float, float]:
    """(seconds of the whole process, seconds of its input) of one default run with `extra` options."""
    wall, s = timed(extra, env)
    return wall, s["tuples_in"] / s["config"]["rate"]


COST0 = ["--grouping", "pkg", "--sources", "2", "--workers", "2", "--cost-ms", "0", "--rate", "max",
         "--stream", "zipf:z=1.2,keys=100000,messages=2000000,seed=7"]


def child(script: str, *args: str) -> str:
    """The last line a Python child process running `script` printed."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode:
        raise SystemExit(f"bench_fixed_cost.py: {(done.stderr.strip().splitlines() or ['a child failed'])[-1]}")
    return done.stdout.strip().splitlines()[-1]


def row(label: str, runs: list[tuple[float, float]]) -> dict:
    """The median process and input of `runs`, printed."""
    process = statistics.median(w for w, _ in runs)
    seconds = statistics.median(i for _, i in runs)
    print(f"{label:38s} {process:6.2f} s whole process, {seconds:5.2f} s of input: fixed cost "
          f"{process - seconds:5.2f} s  ({', '.join(f'{w:.2f}' for w, _ in runs)})", flush=True)
    return {"layout": label, "process_s": process, "input_s": seconds, "fixed_s": process - seconds,
            "processes_s": [w for w, _ in runs]}


def cost0(engine: list[str], repeat: int, env: dict | None = None) -> dict:
    """The 2M-message cost-0 word count as `repeat` whole processes with the `engine` options, printed."""
    runs = [timed([*engine, *COST0], env) for _ in range(repeat)]
    wall = statistics.median(w for w, _ in runs)
    flink = engine == ["--engine", "flink"]
    job = statistics.median(s.get("flink", {}).get("job_wall_s") for _, s in runs) if flink else None
    extra = f", of which the Flink job's JVM {job:.2f} s" if flink else ""
    print(f"2M messages at cost 0, {' '.join(engine[1:]):20s} {wall:6.2f} s whole process{extra}  "
          f"({', '.join(f'{w:.2f}' for w, _ in runs)})", flush=True)
    return {"process_s": wall, "processes_s": [w for w, _ in runs], "exact": all(s["exact"] for _, s in runs),
            "job_s": job}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--repeat", type=int, default=3, help="whole processes per layout, whose median counts (default 3)")
    p.add_argument("--runs", type=int, default=20, help="Ray runs of the experiment in one process (default 20)")
    add_numbers_option(p, "every figure")
    args = p.parse_args(argv)
    if args.repeat < 1 or args.runs < 1:
        p.exit(2, "bench_fixed_cost.py: --repeat and --runs must be at least 1\n")
    sim = [whole(["--engine", "sim"])[0] for _ in range(args.repeat)]
    print(f"{'simulator':38s} {statistics.median(sim):6.2f} s whole process (its clock is not the wall's)", flush=True)
    rows = [row("ray, a local Ray started by the run", [whole(["--engine", "ray"]) for _ in range(args.repeat)])]
    side = {}
    with local_cluster([{}], cpus=2) as cluster:  # `ray start --head`, token authentication on
        env = {**cluster.env, "RAY_ADDRESS": cluster.address}  # what `auto` finds after `ray start --head`
        rows.append(row("ray --address auto (ray start --head)",
                        [whole(["--engine", "ray", "--address", "auto"], env) for _ in range(args.repeat)]))
        side["ray --address auto"] = cost0(["--engine", "ray", "--address", "auto"], args.repeat, env)
    starts = [float(child(RAY_START)) for _ in range(args.repeat)]
    start = statistics.median(starts)
    print(f"{'a Ray start alone':38s} {start:6.2f} s  ({', '.join(f'{s:.2f}' for s in starts)})", flush=True)
    got = json.loads(child(EXPERIMENT, str(args.runs)))
    inputs = sum(got["inputs_s"])
    bound = 1.5 * (inputs + start)
    print(f"an experiment of {args.runs} Ray runs in one process: {got['wall_s']:.1f} s against {inputs:.1f} s of "
          f"input + {start:.1f} s for a Ray start: {got['wall_s'] / (inputs + start):.2f}x (at most 1.5x: "
          f"{'yes' if got['wall_s'] <= bound else 'no'}); {(got['wall_s'] - inputs - start) / args.runs:.2f} s "
          "beyond its input per run")
    for engine in ("sim", "ray", "flink"):
        side[engine] = cost0(["--engine", engine], args.repeat)
    for ray in ("ray", "ray --address auto"):
        print(f"{ray}: its whole process = {side[ray]['process_s'] / side['flink']['process_s']:.2f}x Flink's "
              f"(at most 1.5x: {'yes' if side[ray]['process_s'] <= 1.5 * side['flink']['process_s'] else 'no'}), "
              f"{side[ray]['process_s'] / side['flink']['job_s']:.2f}x the Flink job's JVM alone")
    if args.json:
        print(json.dumps({"rows": rows, "sim_process_s": statistics.median(sim), "ray_start_s": start,
                          "ray_starts_s": starts,
                          "cost0": side, "experiment": {"runs": args.runs, "wall_s": got["wall_s"], "inputs_s": inputs,
                                         "ratio": got["wall_s"] / (inputs + start)}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
