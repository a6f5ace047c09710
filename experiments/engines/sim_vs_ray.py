"""sim-vs-ray: the same specs on both engines, so that the simulator can be read as a prediction of the real actors.

Every cell runs one spec and one grouping in the simulator and on Ray actors (sleep mode). Where the Ray run reports
headroom (its bottleneck is not the engine), throughput must agree within 10% and p99 within a factor of 1.5, or
within 20 ms of each other when both are small; every other cell says why it is not compared. The simulator models
Ray's own transit between processes with the median measured here (`RAY_TRANSIT_MS`), as the command line does.
"""

from __future__ import annotations

from pathlib import Path

from experiments.common import against_paper, markdown_table, pyplot, stream, write_csv
from experiments.registry import register
from topo.results.headroom import EMULATOR
from topo.sim import simulate
from topo.spec import CLI_BATCH_SIZE, CLI_LINGER_MS, RAY_TRANSIT_MS, TopologySpec

COST_MS = 1.0
LOAD = 0.8  # offered load, as a share of what all workers together serve
TPS_AGREE = 0.10
P99_FACTOR = 1.5
P99_SMALL_MS = 20.0
FIG8 = (5.0, 5.0, 5.0) + (1.0,) * 7
# name -> (capacities, stream generator); the rate is LOAD x total capacity
SPECS = {
    "homogeneous": ((1.0,) * 4, "zipf:z=1.0224,keys=100000"),
    "deployment": ((1.0, 1.0, 0.3, 0.3), "zipf:z=1.0224,keys=100000"),
    "fig8": (FIG8, "zipf:z=1.0224,keys=100000"),
    "drift": ((1.0,) * 4, "drift:z=1.2,keys=100000,shift_every=20000"),
}
GROUPINGS = ("kg", "pkg", "sg", "cg", "fish", "lasg")


def cell_spec(name: str, grouping: str, seconds: float) -> TopologySpec:
    """One cell's topology: LOAD of the workers' total capacity for `seconds` of input, buffered as on the
    command line."""
    capacities, generator = SPECS[name]
    rate = LOAD * sum(capacities) / (COST_MS / 1e3)
    return TopologySpec(grouping=grouping, workers=len(capacities), sources=2, capacities=capacities,
                        cost_ms=COST_MS, rate=rate, stream=f"{generator},messages={int(rate * seconds)},seed=7",
                        seed=1, batch_size=CLI_BATCH_SIZE, linger_ms=CLI_LINGER_MS)


def verdict(sim: dict, ray: dict) -> str:
    """'agree', or why the cell disagrees or is not compared."""
    if ray["headroom"]["bottleneck"] in EMULATOR:  # the engine's or the host's number, not the grouping's
        return "not compared: " + ray["headroom"]["note"].split(":")[0]
    tps = ray["throughput_tps"] / sim["throughput_tps"] - 1
    a, b = sim["latency_ms"]["p99"], ray["latency_ms"]["p99"]
    p99_ok = max(a, b) / max(min(a, b), 1e-9) <= P99_FACTOR or abs(a - b) <= P99_SMALL_MS
    if abs(tps) > TPS_AGREE:
        return f"throughput differs by {tps:+.0%}"
    if not p99_ok:
        return f"p99 differs: {a:.3g} vs {b:.3g} ms"
    return "agree"


def compare(name: str, grouping: str, seconds: float) -> dict:
    """One cell on both engines, as a table row."""
    from topo.ray_engine import run_ray

    spec = cell_spec(name, grouping, seconds)
    data = stream(spec.stream)
    sim = simulate(spec.with_(engine="sim", transit_ms=RAY_TRANSIT_MS), data).summary
    ray = run_ray(spec.with_(engine="ray"), data).summary
    return {
        "spec": name, "grouping": grouping,
        "sim_tps": sim["throughput_tps"], "ray_tps": ray["throughput_tps"],
        "tps_ratio": ray["throughput_tps"] / sim["throughput_tps"],
        "sim_p50_ms": sim["latency_ms"]["p50"], "ray_p50_ms": ray["latency_ms"]["p50"],
        "sim_p99_ms": sim["latency_ms"]["p99"], "ray_p99_ms": ray["latency_ms"]["p99"],
        "sim_imbalance": sim["imbalance"], "ray_imbalance": ray["imbalance"],
        "ray_bottleneck": ray["headroom"]["bottleneck"], "verdict": verdict(sim, ray),
    }


@register(
    "sim-vs-ray",
    "all papers: the engines behind every reproduction (the simulator's predictions checked on real actors)",
    "where the Ray run has headroom, throughput agrees within 10% and p99 within 1.5x (or 20 ms)",
    on_ray=True,
)
def sim_vs_ray(out: Path, quick: bool) -> dict:
    """The grid of specs x groupings on both engines (quick: the 4-worker deployment, kg and cg, 2 s each)."""
    specs, names, seconds = (("deployment",), ("kg", "cg"), 2.0) if quick else (tuple(SPECS), GROUPINGS, 8.0)
    rows = [compare(s, g, seconds) for s in specs for g in names]
    write_csv(out / "sim_vs_ray.csv", rows)
    compared = [r for r in rows if not r["verdict"].startswith("not compared")]
    agree = [r for r in compared if r["verdict"] == "agree"]
    paper = [{"claim": "the simulator predicts the real actors",
              "paper": "the papers ran on Storm; each reproduction here runs in the simulator",
              "ours": f"{len(agree)} of {len(compared)} compared cells agree "
                      f"({len(rows) - len(compared)} not compared: the Ray engine was the bottleneck)"}]
    note = (f"\nEach cell: {LOAD:.0%} of the workers' total capacity, {COST_MS:g} ms per tuple, 2 sources, "
            f"buffers of {CLI_BATCH_SIZE} tuples flushed every {CLI_LINGER_MS:g} ms (the command line's defaults), "
            f"{seconds:g} s of input, Ray in sleep mode on this machine. A cell is compared only where the Ray run "
            "reports headroom; there throughput must agree within 10% and p99 within 1.5x (or within 20 ms of each "
            f"other when both are small). The simulator adds Ray's measured transit, {RAY_TRANSIT_MS:g} ms, to each "
            "trip of a buffer or an ack.\n")
    (out / "sim_vs_ray.md").write_text(markdown_table(rows) + against_paper(paper, note))
    plt = pyplot()
    fig, (ax_t, ax_l) = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, sim_col, ray_col, label in ((ax_t, "sim_tps", "ray_tps", "throughput (tuples/s)"),
                                        (ax_l, "sim_p99_ms", "ray_p99_ms", "p99 latency (ms)")):
        for r in rows:
            marker = "o" if r["verdict"] == "agree" else "x"
            ax.scatter(r[sim_col], r[ray_col], marker=marker, color="tab:blue" if marker == "o" else "tab:red")
            ax.annotate(f"{r['spec']}/{r['grouping']}", (r[sim_col], r[ray_col]), fontsize=6)
        top = max(max(r[sim_col], r[ray_col]) for r in rows) * 1.1
        ax.plot([0, top], [0, top], color="grey", linewidth=0.8)
        ax.set_xlabel(f"simulator: {label}")
        ax.set_ylabel(f"Ray: {label}")
        if "p99" in sim_col:
            ax.set_xscale("log")
            ax.set_yscale("log")
    fig.suptitle("the same specs on both engines (o: agree, x: differ or not compared)")
    fig.tight_layout()
    fig.savefig(out / "sim_vs_ray.png", dpi=110)
    plt.close(fig)
    return {f"{r['spec']}/{r['grouping']}": r for r in rows}
