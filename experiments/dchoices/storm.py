"""D-Choices on a Storm cluster (Nasir et al., ICDE 2016, paper 002, Figs. 13 and 14): throughput and latency of
kg, pkg, sg, dc and wc with 1 ms of work per message, on both engines.

The paper's deployment: 48 sources, 80 workers, Zipf z in {1.4, 1.7, 2.0} over 10^4 keys, 2M messages. Storm
bounds what a spout has in flight with max spout pending, so the run is a closed loop (`--max-spout-pending`):
each source keeps SPOUT_PENDING tuples routed and not acked, and a tuple's latency is that population over the
throughput (Little's law). Three views:

* ideal, simulator, full size: the workers are the only bound; kg and pkg are capped by the workers that hold the
  hottest key (1 and 2 of them), sg, dc and wc by all 80;
* capped, simulator, full size: the sources together emit at most C tuples/s, with C fitted to the paper's
  ratios, to show what bound the paper's cluster must have had (`ratio_analysis`);
* scaled, both engines: 4 sources and 8 workers on this machine's Ray actors (sleep mode), next to the simulator
  with Ray's own transit, so that the two can be compared.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.common import markdown_table, pyplot, run, stream, write_csv
from experiments.registry import register
from topo.results.metrics import RunResult
from topo.spec import RAY_TRANSIT_MS, TopologySpec

GROUPINGS = ("kg", "pkg", "sg", "dc", "wc")
ZS = (1.4, 1.7, 2.0)
KEYS = 10_000  # the paper's |K|
COST_MS = 1.0  # the paper's fixed delay per message
FULL = {"sources": 48, "workers": 80, "spout_pending": 100}  # the paper's topology; 4,800 tuples in flight
SCALED = {"sources": 4, "workers": 8, "spout_pending": 60}  # this machine: the same 60 tuples in flight per worker
# dc recomputes its d every this many messages of a source. At full size a source sees 833 of the 40,000 messages:
# the default, 10,000, would leave dc at two choices for the whole run, and even 200 left it there for a quarter
# of the stream, whose hot key then held pkg's two workers long after (dc at 14k-25k tuples/s in such a run)
DC_PARAMS = {"refresh": 20}
PAPER = {"over_pkg": 1.5, "over_kg": 2.3, "p99_cut_vs_pkg": 0.60, "p99_cut_vs_kg": 0.75}


def spec(grouping: str, z: float, size: dict, messages: int, engine: str = "sim", rate: float | None = None,
         transit_ms: float = 0.0) -> TopologySpec:
    """One run of the deployment: Storm-like one-tuple messages at full size, batches of 10 when scaled down."""
    batch = 1 if size is FULL else 10
    return TopologySpec(
        grouping=grouping, engine=engine, workers=size["workers"], sources=size["sources"], cost_ms=COST_MS,
        stream=f"zipf:z={z},keys={KEYS},messages={messages},seed=3", rate=rate, batch_size=batch,
        linger_ms=0.0 if batch == 1 else 1.0, max_pending=100, max_spout_pending=size["spout_pending"], seed=1,
        transit_ms=transit_ms, params=dict(DC_PARAMS) if grouping == "dc" else {},
    )


def row(result: RunResult, **label) -> dict:
    """Throughput and latency of a run, as Fig. 14 reports it: the maximum of the per-worker mean latencies and
    the 50th/95th/99th percentiles of all tuples' latencies."""
    s, log = result.summary, result.log
    lat = log.latency_ms
    counts = np.bincount(log.worker, minlength=s["workers"])
    per_worker = np.bincount(log.worker, weights=lat, minlength=s["workers"])[counts > 0] / counts[counts > 0]
    return {
        **label,
        "throughput_tps": s["throughput_tps"],
        "mean_ms": s["latency_ms"]["mean"], "p50_ms": s["latency_ms"]["p50"], "p95_ms": s["latency_ms"]["p95"],
        "p99_ms": s["latency_ms"]["p99"], "max_worker_mean_ms": float(per_worker.max()),
        "imbalance": s["imbalance"], "bottleneck": s["headroom"]["bottleneck"], "exact": s["exact"],
    }


def ratios(rows: list[dict], key: str = "throughput_tps") -> dict:
    """Per skew: wc's and dc's throughput over pkg's and kg's, and the p99 cut of wc against pkg and kg."""
    out = {}
    for z in sorted({r["z"] for r in rows}):
        by = {r["grouping"]: r for r in rows if r["z"] == z}
        if not {"kg", "pkg", "wc"} <= set(by):
            continue
        best = max(by["wc"][key], by.get("dc", by["wc"])[key])
        out[z] = {
            "over_pkg": best / by["pkg"][key], "over_kg": best / by["kg"][key],
            "pkg_over_kg": by["pkg"][key] / by["kg"][key],
            "p99_cut_vs_pkg": 1 - by["wc"]["p99_ms"] / by["pkg"]["p99_ms"],
            "p99_cut_vs_kg": 1 - by["wc"]["p99_ms"] / by["kg"]["p99_ms"],
            "pkg_p99_share_of_kg": by["pkg"]["p99_ms"] / by["kg"]["p99_ms"],
        }
    return out


def fitted_caps(ideal: list[dict]) -> dict[str, float]:
    """The total emission rates C at which the paper's best ratios would appear at the highest skew: with
    sg, dc and wc carrying C and kg, pkg their worker-bound rates, C = 2.3 x kg's rate and C = 1.5 x pkg's."""
    z = max(r["z"] for r in ideal)
    by = {r["grouping"]: r["throughput_tps"] for r in ideal if r["z"] == z}
    return {"fits_kg": PAPER["over_kg"] * by["kg"], "fits_pkg": PAPER["over_pkg"] * by["pkg"]}


def run_ray(sp: TopologySpec) -> RunResult:
    """One run on Ray actors (sleep mode: the paper's fixed delay is a wait, not CPU)."""
    from topo.ray_engine import run_ray as ray_run

    return ray_run(sp, stream(sp.stream), work="sleep")


def scaled_rows(zs: tuple[float, ...], names: tuple[str, ...], messages: int, ray: bool) -> list[dict]:
    """The scaled topology in the simulator with Ray's transit and, if `ray`, on Ray actors too."""
    rows = []
    for z in zs:
        for g in names:
            if ray:
                rows.append(row(run_ray(spec(g, z, SCALED, messages, engine="ray")), engine="ray", z=z, grouping=g))
            rows.append(row(run(spec(g, z, SCALED, messages, transit_ms=RAY_TRANSIT_MS)), engine="sim", z=z,
                            grouping=g))
    return rows


@register(
    "dchoices-storm",
    "D-Choices (002), Figs. 13 and 14: Storm deployment in the simulator at full size (48 sources, 80 workers, "
    "z 1.4/1.7/2.0, 1 ms per message, a closed loop as Storm's max spout pending), ideal and with the sources' "
    "rate capped to fit the paper's ratios",
    "dc and wc match sg's throughput, above pkg's and far above kg's, more so at higher skew; their p99 is far "
    "below pkg's and kg's, pkg's about half of kg's",
)
def storm(out: Path, quick: bool) -> dict:
    """Quick: the scaled topology at z = 2.0, 2,000 messages, no sg (it equals wc). Full: ideal and capped at full
    size, 40,000 messages per run (eight times the closed loop's population: the rates are steady long before)."""
    if quick:
        scaled = scaled_rows((2.0,), ("kg", "pkg", "dc", "wc"), 2_000, ray=False)
        write_csv(out / "scaled.csv", scaled)
        (out / "storm.md").write_text("## Scaled (simulator)\n\n" + markdown_table(scaled))
        _plot(out, [], scaled, [])
        return {"scaled_sim": ratios(scaled)}
    messages = 40_000
    ideal = [row(run(spec(g, z, FULL, messages)), z=z, grouping=g) for z in ZS for g in GROUPINGS]
    caps = fitted_caps(ideal)
    capped = [row(run(spec(g, max(ZS), FULL, messages, rate=c)), z=max(ZS), grouping=g, cap=name, rate=c)
              for name, c in caps.items() for g in GROUPINGS]
    write_csv(out / "ideal.csv", ideal)
    write_csv(out / "capped.csv", capped)
    _plot(out, ideal, [], [])
    numbers = {"ideal": ratios(ideal), "runs": ideal, "caps": caps,
               "capped": {name: ratios([r for r in capped if r["cap"] == name]) for name in caps}}
    (out / "storm.md").write_text(report(ideal, capped, numbers, messages))
    return numbers


@register(
    "dchoices-storm-ray",
    "D-Choices (002), Figs. 13 and 14 scaled to this machine: 4 sources, 8 workers, on Ray actors and in the "
    "simulator side by side",
    "on both engines dc and wc reach about sg's throughput, above pkg's and kg's, with a far lower p99; the engines "
    "agree on throughput where the Ray run has headroom",
    on_ray=True,
)
def storm_ray(out: Path, quick: bool) -> dict:
    """Quick: kg, pkg and wc at z = 2.0, 3,000 messages. Full: every grouping and skew, 16,000 messages per run."""
    zs, names, messages = ((2.0,), ("kg", "pkg", "wc"), 3_000) if quick else (ZS, GROUPINGS, 16_000)
    rows = scaled_rows(zs, names, messages, ray=True)
    write_csv(out / "scaled.csv", rows)
    sim, ray = [r for r in rows if r["engine"] == "sim"], [r for r in rows if r["engine"] == "ray"]
    _plot(out, [], sim, ray)
    (out / "storm_ray.md").write_text(side_by_side(rows))
    return {"scaled_sim": ratios(sim), "scaled_ray": ratios(ray), "pairs": _pairs(rows)}


def _pairs(rows: list[dict]) -> list[dict]:
    """One row per (z, grouping) with both engines' numbers."""
    out = []
    for r in rows:
        if r["engine"] != "ray":
            continue
        sim = next(x for x in rows if x["engine"] == "sim" and x["z"] == r["z"] and x["grouping"] == r["grouping"])
        out.append({"z": r["z"], "grouping": r["grouping"], "sim_tps": sim["throughput_tps"],
                    "ray_tps": r["throughput_tps"], "ray/sim": r["throughput_tps"] / sim["throughput_tps"],
                    "sim_p99_ms": sim["p99_ms"], "ray_p99_ms": r["p99_ms"], "ray_bottleneck": r["bottleneck"],
                    "exact": sim["exact"] and r["exact"]})
    return out


def side_by_side(rows: list[dict]) -> str:
    """The scaled runs' markdown: both engines per grouping and skew, and the ratios on each."""
    pairs = _pairs(rows)
    lines = [f"# D-Choices on Storm, scaled: {SCALED['sources']} sources, {SCALED['workers']} workers, "
             f"{COST_MS:g} ms per message (sleep), max spout pending {SCALED['spout_pending']}\n",
             "The simulator adds Ray's own transit between processes to each trip "
             f"({RAY_TRANSIT_MS:g} ms) so that it predicts the actors.\n", markdown_table(pairs)]
    for engine in ("sim", "ray"):
        got = ratios([r for r in rows if r["engine"] == engine])
        lines.append(f"- {engine}: " + "; ".join(f"z = {z}: dc/wc {_fmt(v)}, pkg/kg {v['pkg_over_kg']:.2f}"
                                                  for z, v in got.items()))
    held = [p for p in pairs if p["ray_bottleneck"] == "engine" and p["grouping"] in ("sg", "dc", "wc")]
    free = [p for p in pairs if p["ray_bottleneck"] != "engine"]
    lines.append(f"\nThe paper's best case is 1.5x pkg and 2.3x kg. With {SCALED['workers']} workers sg can "
                 f"serve at most {SCALED['workers'] * 1e3 / COST_MS:,.0f} tuples/s, close to what the paper's "
                 "80-worker cluster delivered (see dchoices-storm).")
    if held:
        lines.append(f"On the actors, {len(held)} of the sg, dc and wc runs were held by the Ray engine itself "
                     f"(the headroom verdict `engine`: {min(p['ray_tps'] for p in held):,.0f} to "
                     f"{max(p['ray_tps'] for p in held):,.0f} tuples/s, where the simulator predicts "
                     f"{min(p['sim_tps'] for p in held):,.0f}), while kg and pkg stay held by their hottest "
                     "workers (kg's hottest worker is busy just under the 90% that the verdict calls saturated, so "
                     "its closed loop reads `engine` too): an emulator's own limit compresses the ratios the way the "
                     "paper's cluster did, and the run says so.")
    if free:
        lines.append("Where the Ray run was not the engine's limit, the engines agree: "
                     + ", ".join(f"{p['grouping']} at z = {p['z']} {p['ray/sim']:.2f}" for p in free) + ".")
    lines.append("")
    return "\n".join(lines)


def _fmt(r: dict) -> str:
    return f"{r['over_pkg']:.2f}x pkg, {r['over_kg']:.2f}x kg"


def report(ideal: list[dict], capped: list[dict], numbers: dict, messages: int) -> str:
    """The markdown page: ideal and capped runs, our ratios next to the paper's, and what bounds the paper's
    figures."""
    ide, caps = numbers["ideal"], numbers["caps"]
    zmax = max(ide)
    vs = [{"claim": "best throughput of dc/wc over pkg (Fig. 13)", "paper": "1.5x",
           **{f"z={z}": f"{ide[z]['over_pkg']:.2f}x" for z in ide}},
          {"claim": "best throughput of dc/wc over kg (Fig. 13)", "paper": "2.3x",
           **{f"z={z}": f"{ide[z]['over_kg']:.2f}x" for z in ide}},
          {"claim": "pkg's p99 as a share of kg's (Fig. 14)", "paper": "about 50% at the highest skew",
           **{f"z={z}": f"{ide[z]['pkg_p99_share_of_kg']:.0%}" for z in ide}},
          {"claim": "wc's p99 below pkg's (Fig. 14)", "paper": "60% lower at best",
           **{f"z={z}": f"{ide[z]['p99_cut_vs_pkg']:.0%} lower" for z in ide}},
          {"claim": "wc's p99 below kg's (Fig. 14)", "paper": "more than 75% lower",
           **{f"z={z}": f"{ide[z]['p99_cut_vs_kg']:.0%} lower" for z in ide}}]
    capped_rows = [{"cap": name, "C (tuples/s)": caps[name], "share of the 80 workers' capacity":
                    caps[name] / (FULL["workers"] * 1e3 / COST_MS),
                    "result at z=2.0": _fmt(numbers["capped"][name][zmax])} for name in caps]
    return (
        f"# D-Choices on Storm (Figs. 13, 14)\n\n## Ideal: full size in the simulator\n\n{FULL['sources']} "
        f"sources, {FULL['workers']} workers, {messages:,} messages per run, {COST_MS:g} ms per message, "
        f"max spout pending {FULL['spout_pending']} per source (a closed loop of "
        f"{FULL['sources'] * FULL['spout_pending']:,} tuples).\n\n" + markdown_table(ideal)
        + "\n## Against the paper\n\n" + markdown_table(vs)
        + "\n## Capped: the sources' total rate fitted to the paper's ratios (full size, z = 2.0)\n\n"
        + markdown_table(capped_rows) + "\n" + markdown_table(capped)
        + "\n## What bounds the paper's figures\n\n"
        f"- In the ideal runs kg and pkg are held by the workers of the hottest key (p1 of z = {zmax} over "
        f"{KEYS:,} keys is about 61%: one worker serves it under kg, two under pkg), so pkg/kg is "
        f"{ide[zmax]['pkg_over_kg']:.2f} at z = {zmax}, while sg, dc and wc use all {FULL['workers']} workers: "
        f"{_fmt(ide[zmax])}, far above the paper's 1.5x and 2.3x.\n"
        f"- A cap on what the sources emit in total compresses the ratios. C = {caps['fits_kg']:,.0f} tuples/s "
        f"gives the paper's 2.3x over kg and then {_fmt(numbers['capped']['fits_kg'][zmax])}; C = "
        f"{caps['fits_pkg']:,.0f} gives 1.5x over pkg and then {_fmt(numbers['capped']['fits_pkg'][zmax])}. "
        "No single cap gives both: whatever bounds sg, a bound that leaves kg's and pkg's hot workers saturated "
        f"keeps pkg/kg at 2 (measured {ide[zmax]['pkg_over_kg']:.2f} here), while the paper's pair implies "
        f"{PAPER['over_kg'] / PAPER['over_pkg']:.2f}. The paper's cluster therefore delivered about 4k to 5k "
        "tuples/s in all (5-6% of what 80 workers at 1 ms serve), and its pkg ran about a quarter below its "
        "two-worker bound; the paper gives nothing to tell which part of the cluster did this.\n"
        "- The latency claims fit a closed loop (Little's law: latency is the population over the throughput): "
        "pkg's p99 near half of kg's, as the paper says, because pkg's rate is twice kg's.\n"
    )


def _plot(out: Path, ideal: list[dict], sim: list[dict], ray: list[dict]) -> None:
    """Throughput (Fig. 13) and p99 latency (Fig. 14) per grouping and skew, one column per view."""
    plt = pyplot()
    views = [(name, rows) for name, rows in (("full size, simulator", ideal), ("scaled, simulator", sim),
                                             ("scaled, Ray actors", ray)) if rows]
    fig, axes = plt.subplots(2, len(views), figsize=(4.2 * len(views), 6.5), squeeze=False)
    for col, (name, rows) in enumerate(views):
        zs = sorted({r["z"] for r in rows})
        names = [g for g in GROUPINGS if any(r["grouping"] == g for r in rows)]
        width = 0.8 / len(names)
        for i, g in enumerate(names):
            got = {r["z"]: r for r in rows if r["grouping"] == g}
            x = np.arange(len(zs)) + i * width
            axes[0, col].bar(x, [got[z]["throughput_tps"] if z in got else 0 for z in zs], width, label=g)
            axes[1, col].bar(x, [got[z]["p99_ms"] if z in got else 0 for z in zs], width, label=g)
        for ax in axes[:, col]:
            ax.set_xticks(np.arange(len(zs)) + 0.4 - width / 2, [f"z={z}" for z in zs])
            ax.grid(alpha=0.3, axis="y")
        axes[0, col].set_title(name)
        axes[1, col].set_yscale("log")
    axes[0, 0].set_ylabel("throughput (tuples/s)")
    axes[1, 0].set_ylabel("p99 latency (ms)")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "storm.png", dpi=110)
    plt.close(fig)
