"""Small or huge memory pages for the simulator's arrays, measured in one run: the same simulations, taking turns,
once with numpy's default (transparent huge pages asked for every array of 4 MB or more) and once with small pages
(`topo.sim.pages.small_pages`, what `simulate` does).

python benchmarks/bench_pages.py                      # kg and gedik, 10M messages over 100 workers, 3 runs each way
python benchmarks/bench_pages.py --messages 1000000 --grouping cg --repeat 5

Each line: the median wall time of `simulate` (the stream made beforehand) and the process's user and kernel CPU
seconds over the same run (the kernel's share is mostly the first touch of fresh memory). Cost 0.1 ms per tuple,
1 source, saturating input, the spec's default buffering; Zipf z = 1.2 over 100,000 keys.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from experiments.provenance import add_numbers_option  # noqa: E402
from topo.data.dataset import load_stream  # noqa: E402
from topo.sim.pages import hugepage_switch, small_pages  # noqa: E402
from topo.sim.simulator import Simulation  # noqa: E402
from topo.spec import TopologySpec  # noqa: E402


@contextmanager
def huge_pages():
    """numpy's default: huge pages asked for large arrays."""
    toggle = hugepage_switch()
    before = toggle(True)
    try:
        yield
    finally:
        toggle(before)


def one(spec: TopologySpec, stream, pages) -> tuple[float, float, float]:
    """Wall, user and kernel seconds of one simulation under `pages`."""
    r0, clock = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with pages():
        Simulation(spec, stream).run()
    wall, r1 = time.perf_counter() - clock, resource.getrusage(resource.RUSAGE_SELF)
    return wall, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime


def main(argv: list[str] | None = None) -> int:
    """Run each grouping with both page sizes, taking turns, and print the medians."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--messages", type=int, default=10_000_000, help="messages in the stream (default 10,000,000)")
    p.add_argument("--workers", type=int, default=100, help="workers (default 100)")
    p.add_argument("--grouping", action="append", help="grouping, repeatable (default: kg and gedik)")
    p.add_argument("--repeat", type=int, default=3, help="runs with each page size (default 3)")
    add_numbers_option(p, "every median")
    args = p.parse_args(argv)
    if args.messages < 1 or args.workers < 1 or args.repeat < 1:
        p.error("--messages, --workers and --repeat must be at least 1")
    if hugepage_switch() is None:
        p.error("this numpy cannot switch its huge pages at run time")
    stream = load_stream(f"zipf:z=1.2,keys=100000,messages={args.messages},seed=7")
    print(f"simulator, {args.messages:,} messages over {args.workers:,} workers, 1 source, cost 0.1 ms, "
          f"median of {args.repeat} runs each way, taking turns")
    modes = {"huge pages (numpy's default)": huge_pages, "small pages (simulate's)": small_pages}
    rows = []
    for grouping in args.grouping or ["kg", "gedik"]:
        spec = TopologySpec(grouping=grouping, engine="sim", workers=args.workers, sources=1, cost_ms=0.1)
        runs: dict[str, list] = {mode: [] for mode in modes}
        for _ in range(args.repeat):
            for mode, pages in modes.items():
                runs[mode].append(one(spec, stream, pages))
        for mode, times in runs.items():
            wall, user, kernel = (statistics.median(t[i] for t in times) for i in range(3))
            print(f"{grouping:>6} | {mode:<29} | wall {wall:6.2f} s (runs {', '.join(f'{t[0]:.2f}' for t in times)})"
                  f" | user {user:5.2f} s | kernel {kernel:5.2f} s", flush=True)
            rows.append({"grouping": grouping, "pages": mode.split()[0], "wall_s": wall, "user_s": user,
                         "kernel_s": kernel})
    if args.json:
        print(json.dumps({"messages": args.messages, "workers": args.workers, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
