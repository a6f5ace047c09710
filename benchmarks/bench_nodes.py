"""D-Choices' 48 x 80 Storm topology across several Ray nodes of this machine, against the simulator at the same K.

python benchmarks/bench_nodes.py                       # 4 nodes, --processes 4, pkg, K chosen by pilots (~3 minutes)
python benchmarks/bench_nodes.py --nodes 2 --grouping dc --time-scale 4

A cluster of `--nodes` raylets starts on this machine (`topo/ray_engine/nodes.py`: token authentication, its own
temp dir and ports), and `run_topology.py --address` runs the topology there with one of Storm's processes per
node: each process hosts a block of the workers and every nodes-th source, and its frames to the other processes go
through Ray, as between machines. The spec is `storm-deployments`' dc-48x80-z1.4 closed loop (48 sources,
80 workers, 1 ms per tuple, max spout pending 100, Zipf z = 1.4 over 10,000 keys); `--time-scale auto` picks the
K at which a pilot had headroom, and a run still bounded by the engine goes again at the K its verdict suggests,
as `storm-deployments` does. The simulator then runs the same spec at that K, with Ray's transit, and the two
are held to the `storm-deployments` criterion: throughput within 10%, p99 within 1.5x or 20 ms. The output lists
where each process ran.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from experiments.engines.storm_deployments import agreement
from experiments.provenance import add_numbers_option
from topo.ray_engine.dilation import MAX_TIME_SCALE
from topo.ray_engine.nodes import local_cluster
from topo.results.headroom import EMULATOR

ROOT = Path(__file__).resolve().parents[1]


def spec_args(grouping: str, messages: int) -> list[str]:
    """run_topology.py's options for dc-48x80-z1.4 (`experiments/engines/storm_deployments.py`)."""
    extra = ["--set", "refresh=20"] if grouping == "dc" else []
    return ["--grouping", grouping, "--sources", "48", "--workers", "80", "--cost-ms", "1", "--rate", "max",
            "--max-spout-pending", "100", "--stream", f"zipf:z=1.4,keys=10000,messages={messages},seed=3",
            "--seed", "1", *extra]


def run(args: list[str], env: dict | None = None) -> dict:
    """One run_topology.py process's summary."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_topology.py"), *args, "--out",
                               f"{tmp}/run", "--no-plots", "--json", "--quiet"], capture_output=True, text=True,
                              env=env, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"bench_nodes.py: {(done.stderr.strip().splitlines() or ['a run failed'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--nodes", type=int, default=4, help="Ray nodes (raylets) on this machine, one CPU each (default 4)")
    p.add_argument("--grouping", default="pkg", help="grouping (default pkg)")
    p.add_argument("--messages", type=int, default=150_000, help="messages of the stream (default 150,000)")
    p.add_argument("--time-scale", default="auto", help="K of the Ray run, or auto (default: chosen by pilots)")
    add_numbers_option(p, "every figure")
    args = p.parse_args(argv)
    if args.nodes < 1 or args.messages < 1:
        p.exit(2, "bench_nodes.py: --nodes and --messages must be at least 1\n")
    spec = spec_args(args.grouping, args.messages)
    print(f"dc-48x80-z1.4, {args.grouping}, {args.messages:,} messages, {args.nodes} Ray nodes on this machine, "
          f"--processes {args.nodes}", flush=True)
    tries = []
    with local_cluster([{} for _ in range(args.nodes)], cpus=1) as cluster:
        nodes = cluster.nodes()
        scale = args.time_scale
        while True:  # as storm-deployments: a run still bounded by the engine goes again at the K it suggests
            ray = run(["--engine", "ray", "--address", cluster.address, "--processes", str(args.nodes),
                       "--time-scale", scale, *spec], cluster.env)
            room = ray["headroom"]
            tries.append({"time_scale": ray["time_scale"], "bottleneck": room["bottleneck"]})
            print(f"ray at K={ray['time_scale']:g}: {room['bottleneck']}", flush=True)
            if room["bottleneck"] not in EMULATOR or not room["suggested_time_scale"] or \
                    ray["time_scale"] >= MAX_TIME_SCALE:
                break
            scale = f"{min(room['suggested_time_scale'], MAX_TIME_SCALE):g}"
    k = ray["time_scale"]
    sim = run(["--engine", "sim", "--time-scale", f"{k:g}", *spec])
    index = {n["id"]: i for i, n in enumerate(nodes)}
    processes = ray["ray"]["recovery"]["processes"]
    print(f"{'process':>7s} {'node':>4s} {'node id':>10s} {'workers':>9s} {'sources':>7s}  frames (in process / wire / "
          "Ray)")
    for i, proc in enumerate(processes):
        node = proc["node"] or {}
        frames = proc.get("frames", {})
        print(f"{i:7d} {index.get(node.get('node_id'), -1):4d} {str(node.get('node_id'))[:10]:>10s} "
              f"{proc['workers'][0]:>4d}-{proc['workers'][-1]:<4d} {len(proc['sources']):7d}  "
              f"{frames.get('process', 0):,} / {frames.get('wire', 0):,} / {frames.get('ray', 0):,}")
    ok = all(agreement(ray, sim))  # storm-deployments' criterion
    for name, s in (("ray", ray), ("sim", sim)):
        print(f"{name:4s} K={k:g}: {s['throughput_tps']:9,.0f} tuples/s, p50 {s['latency_ms']['p50']:7.1f} ms, "
              f"p99 {s['latency_ms']['p99']:7.1f} ms, exact {s['exact']}, bottleneck {s['headroom']['bottleneck']}")
    print(f"the engines agree (throughput within 10%, p99 within 1.5x or 20 ms): {'yes' if ok else 'no'}; "
          f"{len({p['node']['node_id'] for p in processes if p['node']})} nodes hosted the {len(processes)} processes")
    if args.json:
        print(json.dumps({"nodes": args.nodes, "grouping": args.grouping, "messages": args.messages, "time_scale": k,
                          "pilots": (ray.get("time_scale_choice") or {}).get("pilots"), "tries": tries, "agree": ok,
                          "processes": processes, "cluster_nodes": nodes,
                          "ray": {"tps": ray["throughput_tps"], "p50_ms": ray["latency_ms"]["p50"],
                                  "p99_ms": ray["latency_ms"]["p99"], "exact": ray["exact"],
                                  "bottleneck": ray["headroom"]["bottleneck"], "note": ray["headroom"]["note"]},
                          "sim": {"tps": sim["throughput_tps"], "p50_ms": sim["latency_ms"]["p50"],
                                  "p99_ms": sim["latency_ms"]["p99"], "exact": sim["exact"]}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
