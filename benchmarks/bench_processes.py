"""The papers' topologies on the Ray engine: Storm's process model against the separate layout, and the simulator,
all measured in the same run.

python benchmarks/bench_processes.py                         # 2 x 10 (make run), 8 x 24 and 8 x 64 at 80% load
python benchmarks/bench_processes.py --topology 48x80 --rate 8000 --grouping pkg --messages 64000

For each topology it runs the separate layout (every source an actor of its own, the workers in one process) and
Storm's process model at each --processes value, then the simulator with Ray's transit, and prints throughput,
the delivered share of the requested rate, p50 and p99 latency, the engine's transit p99 and its workers' ack
lateness p99 (how long after a batch's deadline its ack left; sleep mode's scheduler only), the actors' start-up
time, the peak resident memory of every Ray process of the run (Ray's own included, sampled every 0.25 s) and the
verdict. Ratios are against the separate layout of the same run (or its first row, with --no-separate).
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import psutil

from experiments.provenance import add_numbers_option
from topo.data.dataset import load_stream
from topo.ray_engine import run_ray
from topo.sim import simulate
from topo.spec import CLI_BATCH_SIZE, CLI_LINGER_MS, RAY_TRANSIT_MS, TopologySpec

RAY_NAMES = ("raylet", "gcs_server", "ray::", "dashboard", "log_monitor", "runtime_env", "monitor.py")


class MemoryWatch:
    """The largest sum of resident memory of this process and every Ray process on the machine, while it runs."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.peak_mb = 0.0
        self._every = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(self._every):
            total = 0
            for proc in psutil.process_iter(["cmdline", "memory_info"]):
                line = " ".join(proc.info["cmdline"] or ())
                if proc.pid == psutil.Process().pid or any(n in line for n in RAY_NAMES):
                    total += proc.info["memory_info"].rss if proc.info["memory_info"] else 0
            self.peak_mb = max(self.peak_mb, total / 2**20)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def row(label: str, summary: dict, memory_mb: float | None) -> dict:
    room = summary["headroom"]
    return {"layout": label, "tps": summary["throughput_tps"], "delivered": room["delivered_share"],
            "p50": summary["latency_ms"]["p50"], "p99": summary["latency_ms"]["p99"],
            "transit_p99": (summary.get("ray") or {}).get("transit_ms", {}).get("p99"),
            "late_p99": (summary.get("ray") or {}).get("ack_late_ms", {}).get("p99"),
            "setup_s": (summary.get("wall_clock_s") or {}).get("setup"), "memory_mb": memory_mb,
            "verdict": room["bottleneck"]}


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--topology", action="append", default=None, metavar="SxW",
                   help="sources x workers, repeatable (default: 2x10 with Fig. 8's capacities, 8x24 and 8x64)")
    p.add_argument("--processes", type=int, action="append", default=None, metavar="N",
                   help="Storm's process model with N processes, repeatable (default: 1 and 2)")
    p.add_argument("--grouping", default="cg", help="grouping (default cg)")
    p.add_argument("--cost-ms", type=float, default=1.0, help="milliseconds per tuple at capacity 1 (default 1)")
    p.add_argument("--rate", type=float, default=None,
                   help="tuples/s over all sources (default: 80%% of what the workers serve together)")
    p.add_argument("--messages", type=int, default=160_000, help="messages of the Zipf stream (default 160k)")
    p.add_argument("--time-scale", type=float, default=1.0, help="time dilation K of every Ray run (default 1)")
    p.add_argument("--max-spout-pending", type=int, default=None, help="Storm's max spout pending (default none)")
    p.add_argument("--separate", action=argparse.BooleanOptionalAction, default=True,
                   help="run the separate layout too, the baseline of the ratios (default yes; at 48 x 80 it starts "
                        "about 44 processes and needs about 8 GB); without it, ratios are against the first row")
    add_numbers_option(p, "every row")
    args = p.parse_args()
    topologies = args.topology or ["2x10", "8x24", "8x64"]
    measured = {}
    for text in topologies:
        sources, workers = (int(v) for v in text.lower().split("x"))
        capacities = (5.0, 5.0, 5.0) + (1.0,) * 7 if (sources, workers) == (2, 10) else None
        total = sum(capacities) if capacities else float(workers)
        rate = args.rate or 0.8 * total / (args.cost_ms / 1e3)
        z = 1.0224 if capacities else 1.2
        stream = load_stream(f"zipf:z={z},keys=100000,messages={args.messages},seed=5")
        base = TopologySpec(grouping=args.grouping, engine="ray", sources=sources, workers=workers,
                            capacities=capacities, cost_ms=args.cost_ms, rate=rate, batch_size=CLI_BATCH_SIZE,
                            linger_ms=CLI_LINGER_MS, max_spout_pending=args.max_spout_pending,
                            time_scale=args.time_scale)
        rows = []
        layouts = [("separate", base.with_(worker_processes=1))] if args.separate else []
        layouts += [(f"processes={n}", base.with_(processes=n)) for n in (args.processes or [1, 2])]
        for label, spec in layouts:
            with MemoryWatch() as memory:
                summary = run_ray(spec, stream).summary
            rows.append(row(label, summary, memory.peak_mb))
            time.sleep(1.0)  # let the last run's processes go
        sim = simulate(base.with_(engine="sim", transit_ms=RAY_TRANSIT_MS), stream).summary
        rows.append(row("simulator", sim, None))
        print(f"\n{sources} x {workers}, {args.grouping}, {rate:,.0f} tuples/s requested, K = {args.time_scale:g}")
        print(f"{'layout':13s} {'tuples/s':>9s} {'x sep':>6s} {'deliv':>6s} {'p50 ms':>8s} {'p99 ms':>8s} "
              f"{'transit':>8s} {'ack late':>8s} {'setup s':>7s} {'mem MB':>7s}  verdict")
        first = rows[0]["tps"]
        for r in rows:
            print(f"{r['layout']:13s} {r['tps']:9,.0f} {r['tps'] / first:6.2f} {fmt(r['delivered'], '6.1%')} "
                  f"{r['p50']:8.1f} {r['p99']:8.1f} {fmt(r['transit_p99'], '8.1f')} {fmt(r['late_p99'], '8.1f')} "
                  f"{fmt(r['setup_s'], '7.1f')} "
                  f"{fmt(r['memory_mb'], '7.0f')}  {r['verdict']}")
        measured[f"{sources}x{workers}"] = {"rate": rate, "rows": rows}
    if args.json:
        print(json.dumps({"grouping": args.grouping, "topologies": measured}))


if __name__ == "__main__":
    main()
