"""The papers' three Storm deployments at their own sizes, on both engines: Consistent Grouping's 8 sources x 24
workers (naive Bayes; homogeneous, and with two executors capped at 30%), D-Choices' 48 x 80 (1 ms per message,
max spout pending 100, z = 1.4, 1.7, 2.0) and FISH's 32 x 128.

Every Ray run uses Storm's process model. The time scale K of a deployment's first grouping is chosen with pilots
(`--time-scale auto`: the smallest K at which the engine and the host had headroom); every other grouping starts in
real time (K = 1), as a grouping's own work decides whether it needs dilation, and a run still bounded by the engine
or the host goes again at the K its verdict suggests, until it has headroom or K reaches the largest time scale.
Numbers are in the emulated cluster's time, next to the simulator's over the same input with Ray's transit divided
by the same K. A Ray run bounded by the engine or the host is reported, and not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

import groupings
from experiments.common import markdown_table, pyplot, stream, words_stream, write_csv
from experiments.registry import register
from experiments.topologies import after_share, latency_between
from groupings.params import resolve
from topo.results.headroom import EMULATOR
from topo.results.metrics import RunResult
from topo.spec import RAY_TRANSIT_MS, TopologySpec

COST_MS = 1.0
AGREE_TPS = 0.10  # throughput within 10%
AGREE_P99 = 1.5  # p99 within 1.5x ...
AGREE_P99_MS = 20.0  # ... or within 20 ms of emulated time
RUN_WALL_S = 40.0  # a Ray run takes about this many wall seconds at its K ...
MIN_RUN_S = 1.0  # ... and at least this many emulated seconds of input
FISH_EPOCH = int(resolve("fish", groupings.registry.lookup("fish").params, 1, {})["epoch"])  # FISH's N_epoch: tuples
# a source counts before its counters decay, as the grouping takes it by default (the paper's 1000)
WARM_UP = 0.25  # the steady-state figures leave out the tuples that arrived in this first share of the input


@dataclass(frozen=True)
class Deployment:
    """One of the papers' Storm topologies: its size, its input and the groupings the paper compared on it."""

    name: str
    sources: int
    workers: int
    groupings: tuple[str, ...]
    capacities: tuple[float, ...] | None = None
    operator: str = "wordcount"
    z: float | None = None  # Zipf exponent; None: words (naive Bayes)
    load: float | None = 0.8  # share of the workers' total capacity offered; None: a closed loop
    spout_pending: int | None = None
    params: dict = field(default_factory=dict)
    epochs: int = 0  # FISH's epochs every source sees in both engines' runs (its first epoch is all warm-up)

    @property
    def rate(self) -> float | None:
        """The offered tuples/s over all sources (None: a closed loop)."""
        capacity = sum(self.capacities) if self.capacities else float(self.workers)
        return None if self.load is None else self.load * capacity / (COST_MS / 1e3)

    def messages(self, seconds: float) -> int:
        """The input's size: `seconds` of input at the offered load (10,000 messages a second in a closed loop), and
        at least `epochs` of FISH's epochs per source."""
        base = int(10_000 * seconds) if self.rate is None else int(seconds * self.rate)
        return max(base, self.epochs * FISH_EPOCH * self.sources)

    def spec(self, grouping: str, messages: int) -> TopologySpec:
        text = (words_stream(messages).meta["spec"] if self.z is None
                else f"zipf:z={self.z},keys=10000,messages={messages},seed=3")
        return TopologySpec(
            grouping=grouping, engine="sim", sources=self.sources, workers=self.workers,
            capacities=self.capacities, operator=self.operator, cost_ms=COST_MS, stream=text, rate=self.rate,
            max_spout_pending=self.spout_pending, seed=1, params=dict(self.params.get(grouping, {})),
        )


CAPPED = (0.3, 0.3) + (1.0,) * 22  # two executors at 30% CPU, as cpulimit capped them in the paper
DEPLOYMENTS = (
    Deployment("cg-8x24", 8, 24, ("kg", "pkg", "sg", "cg"), operator="naivebayes"),
    Deployment("cg-8x24-capped", 8, 24, ("kg", "pkg", "sg", "cg"), capacities=CAPPED, operator="naivebayes"),
    *(Deployment(f"dc-48x80-z{z}", 48, 80, ("kg", "pkg", "dc", "wc", "sg"), z=z, load=None, spout_pending=100,
                 params={"dc": {"refresh": 20}}) for z in (1.4, 1.7, 2.0)),
    Deployment("fish-32x128", 32, 128, ("kg", "pkg", "dc", "wc", "fish", "sg"), z=1.2, load=0.1, epochs=20),
)
QUICK = {"cg-8x24-capped": ("cg",), "dc-48x80-z1.4": ("pkg",), "fish-32x128": ("fish",)}


def measure(deployment: Deployment, grouping: str, messages: int, k: float | None = None) -> dict:
    """One grouping of one deployment on both engines at time scale `k` (None: chosen by pilots), over as much of
    the input as the Ray run carries in about RUN_WALL_S wall seconds at that K, but never less than the
    deployment's FISH epochs per source. A Ray run still bounded by the engine or the host goes again at the K its
    verdict suggests, until it has headroom or K is MAX_TIME_SCALE. Latency is reported over the whole run and in
    the steady state (the tuples that arrived after the first WARM_UP of the input)."""
    from topo.ray_engine import run_ray
    from topo.ray_engine.dilation import MAX_TIME_SCALE, choose_time_scale, prefix

    spec = deployment.spec(grouping, messages)
    data = words_stream(messages) if deployment.z is None else stream(spec.stream)
    pilots = "-"
    again_because = []  # why each run that went again at a larger K was the emulator's
    if k is None:
        k, choice = choose_time_scale(spec.with_(engine="ray"), data, lambda sp, st: run_ray(sp, st))
        pilots = ",".join(f"{p['time_scale']:g}:{p['bottleneck']}" for p in choice["pilots"])
    while True:
        # the simulator's throughput sizes the run: RUN_WALL_S of wall time at K, at least MIN_RUN_S emulated
        tps = _simulate(spec.with_(time_scale=k), data).summary["throughput_tps"]
        part = prefix(data, max(int(tps * max(MIN_RUN_S, RUN_WALL_S / k)),
                                deployment.epochs * FISH_EPOCH * deployment.sources))
        ray_run = run_ray(spec.with_(engine="ray", time_scale=k), part)
        ray = ray_run.summary
        suggested = ray["headroom"]["suggested_time_scale"]
        if ray["headroom"]["bottleneck"] not in EMULATOR or not suggested or k >= MAX_TIME_SCALE:
            break
        pilots += f",again at {min(suggested, MAX_TIME_SCALE):g}"
        again_because.append(f"K = {k:g}: {ray['headroom']['note']}")
        k = min(suggested, MAX_TIME_SCALE)
    sim_run = _simulate(spec.with_(transit_ms=RAY_TRANSIT_MS, time_scale=k), part)
    sim = sim_run.summary
    processes = ray["ray"]["recovery"]["processes"]
    compared = ray["headroom"]["bottleneck"] not in EMULATOR
    row = {
        "deployment": deployment.name, "grouping": grouping, "time_scale": k, "pilots": pilots,
        "messages": part.messages, "epochs_per_source": part.messages / deployment.sources / FISH_EPOCH,
        "ray_tps": ray["throughput_tps"], "sim_tps": sim["throughput_tps"],
        "ray_p50_ms": ray["latency_ms"]["p50"], "sim_p50_ms": sim["latency_ms"]["p50"],
        "ray_p99_ms": ray["latency_ms"]["p99"], "sim_p99_ms": sim["latency_ms"]["p99"],
        "ray_p99_steady_ms": steady_p99(ray_run), "sim_p99_steady_ms": steady_p99(sim_run),
        "ray_mean_ms": ray["latency_ms"]["mean"], "sim_mean_ms": sim["latency_ms"]["mean"],
        "ray_bottleneck": ray["headroom"]["bottleneck"], "sim_bottleneck": sim["headroom"]["bottleneck"],
        # the largest share of the run a process's scheduler thread was on the CPU (the engine's own margin)
        "stepping_busy": ray["headroom"]["stepping_busy_max"],
        "processes": len(processes), "memory_mb": sum(p["peak_rss_mb"] for p in processes)
        + ray["ray"]["recovery"]["peak_rss_mb"]["aggregator"], "setup_s": ray["wall_clock_s"]["setup"],
        "exact": ray["exact"] and sim["exact"], "compared": compared, "again_because": again_because,
    }
    tps_agree, p99_agree = agreement(ray, sim)
    row["tps_agree"] = tps_agree if compared else None
    row["p99_agree"] = p99_agree if compared else None
    return row


def agreement(ray: dict, sim: dict) -> tuple[bool, bool]:
    """Whether two runs' summaries agree in throughput (within AGREE_TPS) and in p99 (within AGREE_P99 times, or
    AGREE_P99_MS)."""
    tps = abs(ray["throughput_tps"] / sim["throughput_tps"] - 1) <= AGREE_TPS
    low, high = sorted((ray["latency_ms"]["p99"], sim["latency_ms"]["p99"]))
    return tps, high <= AGREE_P99 * low or high - low <= AGREE_P99_MS


def _simulate(spec: TopologySpec, data) -> RunResult:
    from topo.sim import simulate

    return simulate(spec, data)


def steady_p99(run: RunResult) -> float:
    """p99 latency (ms, emulated) of the tuples that arrived after the first WARM_UP of the run's input: every
    grouping past its warm-up (FISH's first epochs treat every key as cold)."""
    late = latency_between(run, after_share(run, WARM_UP))
    return float(np.percentile(late, 99)) if late.size else float("nan")


@register(
    "storm-deployments",
    "The papers' Storm topologies at their sizes (CG 8 x 24, D-Choices 48 x 80, FISH 32 x 128) on Ray actors, "
    "with Storm's process model and time dilation, next to the simulator",
    "every Ray run has headroom at the time scale its pilots chose, and agrees with the simulator: throughput "
    "within 10%, p99 within 1.5x or 20 ms",
    on_ray=True,
)
def storm_deployments(out: Path, quick: bool) -> dict:
    """Full: every grouping of every deployment, up to 4 emulated seconds of input at the offered load (40,000
    messages in the closed loops), as much of it as a Ray run at its K carries in about RUN_WALL_S wall seconds;
    FISH's 32 x 128 the whole of 20 epochs per source (640,000 messages, 50 s at its load). Quick: one grouping of
    three deployments, half of that (cg needs its first second to learn the capped workers; FISH: 2 epochs per
    source)."""
    rows = []
    for deployment in DEPLOYMENTS:
        names = QUICK.get(deployment.name, ()) if quick else deployment.groupings
        if quick:
            deployment = replace(deployment, epochs=deployment.epochs // 10)
        messages = deployment.messages(2.0 if quick else 4.0)
        k = None  # pilots choose K with the deployment's first grouping; the others start in real time
        for grouping in names:
            rows.append(measure(deployment, grouping, messages, k))
            k = 1.0
    write_csv(out / "deployments.csv", rows)
    (out / "deployments.md").write_text(markdown_table([{k: v for k, v in r.items() if k != "again_because"}
                                                        for r in rows]) + "\n")
    _plot(out / "deployments.png", rows)
    compared = [r for r in rows if r["compared"]]
    return {"rows": rows, "compared": len(compared),
            "agree": sum(1 for r in compared if r["tps_agree"] and r["p99_agree"]),
            "time_scales": sorted({r["time_scale"] for r in rows})}


def _plot(path: Path, rows: list[dict]) -> None:
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(7.0, 0.45 * len(rows)), 6.0), sharex=True)
    x = np.arange(len(rows))
    labels = [f"{r['deployment']}\n{r['grouping']} K={r['time_scale']:g}" for r in rows]
    for ax, key, unit in ((top, "tps", "tuples/s"), (bottom, "p99_ms", "p99 latency (ms, emulated)")):
        ax.bar(x - 0.2, [r[f"sim_{key}"] for r in rows], 0.4, label="simulator")
        ax.bar(x + 0.2, [r[f"ray_{key}"] for r in rows], 0.4, label="Ray actors",
               color=["tab:orange" if r["compared"] else "tab:red" for r in rows])
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3, axis="y")
    bottom.set_yscale("log")
    bottom.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
    top.legend(fontsize=8)
    top.set_title("the papers' Storm deployments (red: Ray bounded by the engine or host at the K it ran)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
