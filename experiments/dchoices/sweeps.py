"""D-Choices / W-Choices (Nasir et al., ICDE 2016, paper 002): imbalance, head size and d, memory, on Zipf streams.

Only the routing matters for these figures, so no simulator runs: `experiments.routing` deals the stream over
s = 5 sources (shuffle grouping into the sources, as in the paper), each source routes its share with its own
grouping instance and its own local load vector, and the per-worker message counts and the (key, worker) pairs
are counted afterwards. Imbalance is the paper's I = max_w L_w - 1/n with L_w the fraction of all messages on w.
The paper's Wikipedia and Twitter traces are not available offline: they are replaced by bounded Zipf streams
whose most frequent key has the same share p1.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

import groupings
from experiments.common import markdown_table, pyplot, write_csv
from experiments.registry import register
from experiments.routing import TRACE_P1, excess_share, pairs, route_stream, trace_z, zipf_stream
from topo.data.zipf import zipf_pmf

SOURCES = 5  # the paper's s
SCHEMES = ("pkg", "dc", "wc", "rr")
KEYS = 10_000  # the paper's |K| for the ZF figures
TRACES = TRACE_P1  # p1 of the paper's Wikipedia and Twitter traces (Table I)
TRACE_KEYS = 100_000
EPS = 1e-4  # the paper's default imbalance target of FindOptimalChoices


@cache
def _route(z: float, keys: int, messages: int, scheme: str, n: int, theta: float | None = None) -> dict:
    """Route one Zipf stream over SOURCES sources with `scheme` to n workers; imbalance, memory, head facts."""
    s = zipf_stream(z, keys, messages, seed=3)
    r = route_stream(scheme, s.key_hash, n, SOURCES, **({} if theta is None else {"theta": theta}))
    return {
        "imbalance": excess_share(r.workers, n),
        "pairs": pairs(s.key_hash, r.workers, n),  # worker memory: one unit of state per (key, worker) pair
        "head_size": float(np.mean([st.get("head_size", 0) for st in r.stats])),
        "d": float(np.mean([st.get("d", 0) for st in r.stats])),
    }


def _exact_head(z: float, n: int, theta: float) -> tuple[int, int]:
    """|H| and FindOptimalChoices' d on the exact Zipf law (the paper's Figs. 3-4 assume it is known)."""
    p = zipf_pmf(z, KEYS)
    head = p[p >= theta]
    d = groupings.find_optimal_choices(head, float(1.0 - head.sum()), n, EPS) if head.size else 2
    return int(head.size), int(d)


# ---------------------------------------------------------------------------------------------------------------
# imbalance: Fig. 10 (ZF, vs skew per n) and Figs. 1 / 11 (WP- and TW-like, vs n)


@register(
    "dchoices-imbalance",
    "D-Choices (002), Figs. 1, 10, 11: imbalance of pkg, dc, wc, rr vs skew and vs number of workers, 5 sources",
    "pkg's imbalance grows with skew and with the number of workers; dc and wc stay near zero, wc <= dc << pkg at "
    "high skew and many workers; rr is close to dc",
)
def imbalance(out: Path, quick: bool) -> dict:
    messages = 200_000 if quick else 2_000_000
    zs = (0.8, 1.4, 2.0) if quick else (0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
    ns = (5, 50) if quick else (5, 10, 20, 50, 100)
    zf = []
    for n in ns:
        for z in zs:
            row: dict = {"workers": n, "z": z}
            for sc in SCHEMES:
                row[sc] = _route(z, KEYS, messages, sc, n)["imbalance"]
            zf.append(row)
    write_csv(out / "imbalance_zf.csv", zf)

    traces = []
    for trace, p1 in TRACES.items():
        z = trace_z(p1, TRACE_KEYS)
        for n in ns:
            row = {"trace": f"{trace}-like", "z": round(z, 4), "workers": n}
            for sc in SCHEMES:
                row[sc] = _route(z, TRACE_KEYS, messages, sc, n)["imbalance"]
            traces.append(row)
    write_csv(out / "imbalance_traces.csv", traces)

    plt = pyplot()
    floor = 1e-7  # zero imbalance has no place on a log axis
    fig, axes = plt.subplots(1, len(ns) + len(TRACES), figsize=(3.3 * (len(ns) + len(TRACES)), 3.6), sharey=True)
    for ax, n in zip(axes, ns, strict=False):
        rows = [r for r in zf if r["workers"] == n]
        for sc in SCHEMES:
            ax.plot([r["z"] for r in rows], [max(r[sc], floor) for r in rows], "o-", ms=3, label=sc)
        ax.set_title(f"ZF, n = {n}")
        ax.set_xlabel("skew z")
    for ax, trace in zip(axes[len(ns):], TRACES, strict=True):
        rows = [r for r in traces if r["trace"] == f"{trace}-like"]
        for sc in SCHEMES:
            ax.plot([r["workers"] for r in rows], [max(r[sc], floor) for r in rows], "o-", ms=3, label=sc)
        ax.axhline(SOURCES * EPS, color="black", ls=":", lw=1)  # s * eps, the paper's dotted line
        ax.set_xscale("log")
        ax.set_title(f"{trace}-like (p1 = {TRACES[trace]:.2%})")
        ax.set_xlabel("workers n")
    for ax in axes:
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("imbalance I = max L_w - 1/n")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "imbalance.png", dpi=110)
    plt.close(fig)

    hi = [r for r in zf if r["z"] == max(zs) and r["workers"] == max(ns)][0]
    lo = [r for r in zf if r["z"] == min(zs) and r["workers"] == min(ns)][0]
    wp = {r["workers"]: r for r in traces if r["trace"] == "WP-like"}
    paper = [
        {"setting": "ZF, z and n large (Fig. 10)", "paper": "pkg far above all; wc lowest; dc ~ rr",
         "ours": f"pkg {hi['pkg']:.3g}, dc {hi['dc']:.3g}, wc {hi['wc']:.3g}, rr {hi['rr']:.3g} "
                 f"(z = {hi['z']}, n = {hi['workers']})"},
        {"setting": "ZF, z and n small (Fig. 10)", "paper": "all schemes about equal and low",
         "ours": f"pkg {lo['pkg']:.3g}, dc {lo['dc']:.3g}, wc {lo['wc']:.3g}, rr {lo['rr']:.3g} "
                 f"(z = {lo['z']}, n = {lo['workers']})"},
        {"setting": f"WP, n = {min(ns)} (Figs. 1, 11)", "paper": "pkg balanced; dc, wc balanced",
         "ours": f"pkg {wp[min(ns)]['pkg']:.3g}, dc {wp[min(ns)]['dc']:.3g}, wc {wp[min(ns)]['wc']:.3g}"},
        {"setting": f"WP, n = {max(ns)} (Figs. 1, 11)", "paper": "pkg near 10%; dc, wc below 0.1%",
         "ours": f"pkg {wp[max(ns)]['pkg']:.3g}, dc {wp[max(ns)]['dc']:.3g}, wc {wp[max(ns)]['wc']:.3g}"},
    ]
    (out / "imbalance.md").write_text(
        "## Imbalance vs skew (ZF, |K| = 10^4)\n\n" + markdown_table(zf)
        + "\n## Imbalance vs workers (WP-like and TW-like Zipf)\n\n" + markdown_table(traces)
        + "\n## Against the paper\n\n" + markdown_table(paper)
        + f"\nDifferences: m = {messages:,} messages instead of 10^7; the WP and TW traces are replaced by Zipf "
        f"streams over {TRACE_KEYS:,} keys with the same p1 (the real traces have 2.9M and 31M keys and are not "
        "Zipf in the tail), so the absolute numbers differ while the ranking is the paper's.\n"
    )
    return {"zf": zf, "traces": traces, "zs": list(zs), "workers": list(ns)}


# ---------------------------------------------------------------------------------------------------------------
# head size and d: Figs. 3 and 4


@register(
    "dchoices-head",
    "D-Choices (002), Figs. 3, 4: head size |H| at theta = 2/n and 1/(5n), and d/n of D-Choices, vs skew, n = 50, 100",
    "the head is small (at most 5n keys, far fewer at high skew), larger for theta = 1/(5n) than for 2/n; it first "
    "grows with skew and then shrinks; d grows with skew and stays below n",
)
def head(out: Path, quick: bool) -> dict:
    messages = 200_000 if quick else 2_000_000
    zs = (0.4, 0.8, 1.2, 2.0) if quick else tuple(round(0.1 * i, 1) for i in range(1, 21))
    ns = (50, 100)
    rows = []
    for n in ns:
        for z in zs:
            h_hi, _ = _exact_head(z, n, 2.0 / n)
            h_lo, d_exact = _exact_head(z, n, 1.0 / (5 * n))
            run = _route(z, KEYS, messages, "dc", n)
            run_hi = _route(z, KEYS, messages, "dc", n, theta=2.0 / n)
            rows.append({
                "workers": n, "z": z,
                "head_2/n_exact": h_hi, "head_2/n_run": run_hi["head_size"],
                "head_1/5n_exact": h_lo, "head_1/5n_run": run["head_size"],
                "d_exact": d_exact, "d_run": run["d"], "d/n_exact": d_exact / n, "d/n_run": run["d"] / n,
            })
    write_csv(out / "head.csv", rows)

    plt = pyplot()
    fig, (ax_h, ax_d) = plt.subplots(1, 2, figsize=(11, 4))
    for i, n in enumerate(ns):
        r = [x for x in rows if x["workers"] == n]
        z = [x["z"] for x in r]
        ax_h.plot(z, [x["head_1/5n_exact"] for x in r], "o-", color=f"C{i}", ms=3, label=f"n={n}, theta=1/(5n)")
        ax_h.plot(z, [x["head_2/n_exact"] for x in r], "s--", color=f"C{i}", ms=3, label=f"n={n}, theta=2/n")
        ax_h.plot(z, [x["head_1/5n_run"] for x in r], "x", color=f"C{i}")
        ax_d.plot(z, [x["d/n_exact"] for x in r], "o-", color=f"C{i}", ms=3, label=f"n={n} (exact p)")
        ax_d.plot(z, [x["d/n_run"] for x in r], "x", color=f"C{i}", label=f"n={n} (run, SpaceSaving)")
    ax_h.set_yscale("symlog", linthresh=1)
    ax_h.set_ylabel("|H| (keys in the head); x = measured in the run")
    ax_d.set_ylabel("d / n of D-Choices")
    ax_d.axhline(1.0, color="black", ls=":", lw=1)
    for ax in (ax_h, ax_d):
        ax.set_xlabel("skew z")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Zipf, |K| = {KEYS:,}, eps = {EPS:g}, {SOURCES} sources")
    fig.tight_layout()
    fig.savefig(out / "head.png", dpi=110)
    plt.close(fig)

    max_h = {n: max(x["head_1/5n_exact"] for x in rows if x["workers"] == n) for n in ns}
    max_dn = max(max(x["d/n_exact"], x["d/n_run"]) for x in rows)
    paper = [
        {"claim": "head at theta = 1/(5n) is at most 5n keys (Fig. 3)",
         "ours": ", ".join(f"max |H| = {max_h[n]} at n = {n}" for n in ns)},
        {"claim": "theta = 2/n gives a much smaller head than 1/(5n) (Fig. 3)",
         "ours": f"max |H| at 2/n: {max(x['head_2/n_exact'] for x in rows)}"},
        {"claim": "d < n for every z at n = 50, 100 (Fig. 4)", "ours": f"max d/n = {max_dn:.3g}"},
    ]
    (out / "head.md").write_text(
        markdown_table(rows) + "\n## Against the paper\n\n" + markdown_table(paper)
        + f"\nDifferences: the paper uses m = 10^7 and the exact distribution; `_exact` columns use the exact Zipf "
        f"law too, `_run` columns are the mean over the {SOURCES} sources of what D-Choices saw through "
        f"SpaceSaving on a {messages:,}-message stream.\n"
    )
    return {"rows": rows, "zs": list(zs), "workers": list(ns)}


# ---------------------------------------------------------------------------------------------------------------
# memory: Figs. 5 and 6


def _estimated_memory(z: float, n: int, m: float) -> dict:
    """The paper's memory estimates on the exact Zipf law with expected counts f_k = m p_k: min(f_k, replicas)."""
    p = zipf_pmf(z, KEYS)
    f = m * p
    in_head = p >= 1.0 / (5 * n)
    head = p[in_head]
    d = groupings.find_optimal_choices(head, float(1.0 - head.sum()), n, EPS) if head.size else 2
    tail = float(np.minimum(f[~in_head], 2).sum())
    return {
        "pkg": float(np.minimum(f, 2).sum()),
        "dc": float(np.minimum(f[in_head], d).sum()) + tail,
        "wc": float(np.minimum(f[in_head], n).sum()) + tail,
        "sg": float(np.minimum(f, n).sum()),
    }


@register(
    "dchoices-memory",
    "D-Choices (002), Figs. 5, 6: memory of dc and wc relative to pkg and to sg vs skew, n = 50, 100",
    "dc and wc use at most ~30% more memory than pkg and at least 80% less than sg; dc uses no more than wc, "
    "much less at moderate skew, about the same at very high skew",
)
def memory(out: Path, quick: bool) -> dict:
    messages = 200_000 if quick else 2_000_000
    zs = (0.8, 1.4, 2.0) if quick else (0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
    ns = (50, 100)
    rows = []
    for n in ns:
        for z in zs:
            est = _estimated_memory(z, n, 1e7)
            mem = {sc: _route(z, KEYS, messages, sc, n)["pairs"] for sc in ("pkg", "dc", "wc", "rr", "sg")}
            row: dict = {"workers": n, "z": z}
            for a in ("dc", "wc"):
                for b in ("pkg", "sg"):
                    row[f"{a}/{b}_est"] = est[a] / est[b]
            row.update({f"mem_{sc}_run": v for sc, v in mem.items()})
            for a in ("dc", "wc"):
                for b in ("pkg", "sg"):
                    row[f"{a}/{b}_run"] = mem[a] / mem[b]
            rows.append(row)
    write_csv(out / "memory.csv", rows)

    plt = pyplot()
    fig, (ax_p, ax_s) = plt.subplots(1, 2, figsize=(11, 4))
    for i, n in enumerate(ns):
        r = [x for x in rows if x["workers"] == n]
        z = [x["z"] for x in r]
        for sc, style in (("dc", "o-"), ("wc", "s--")):
            ax_p.plot(z, [x[f"{sc}/pkg_est"] - 1.0 for x in r], style, color=f"C{2 * i + (sc == 'wc')}", ms=3,
                      label=f"{sc}, n={n}")
            ax_p.plot(z, [x[f"{sc}/pkg_run"] - 1.0 for x in r], "x", color=f"C{2 * i + (sc == 'wc')}")
            ax_s.plot(z, [x[f"{sc}/sg_est"] for x in r], style, color=f"C{2 * i + (sc == 'wc')}", ms=3,
                      label=f"{sc}, n={n}")
            ax_s.plot(z, [x[f"{sc}/sg_run"] for x in r], "x", color=f"C{2 * i + (sc == 'wc')}")
    ax_p.set_yscale("log")
    ax_p.set_ylim(1e-2, None)  # as the paper, overheads below 1% are not shown
    ax_p.set_ylabel("memory overhead w.r.t. pkg (mem/mem_pkg - 1)")
    ax_s.set_ylabel("memory w.r.t. sg (mem/mem_sg)")
    ax_s.set_yscale("log")
    ax_s.axhline(0.2, color="black", ls=":", lw=1)
    for ax in (ax_p, ax_s):
        ax.set_xlabel("skew z")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"Zipf, |K| = {KEYS:,}: lines = paper's estimate (m = 10^7), x = measured (key, worker) pairs "
                 f"({messages:,} messages, {SOURCES} sources)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "memory.png", dpi=110)
    plt.close(fig)

    worst = {k: max(x[k] for x in rows) for k in rows[0] if "/" in k}
    mid = [x for x in rows if x["z"] == zs[len(zs) // 2] or x["z"] == zs[-1]]
    paper = [
        {"claim": "at n = 100, wc uses up to 25% more memory than pkg; dc and wc at most 30% more (Fig. 5)",
         "estimate (m = 10^7)": f"max dc/pkg {worst['dc/pkg_est']:.3g}, max wc/pkg {worst['wc/pkg_est']:.3g}",
         "measured": f"max dc/pkg {worst['dc/pkg_run']:.3g}, max wc/pkg {worst['wc/pkg_run']:.3g}"},
        {"claim": "dc and wc use at least 80% less memory than sg (Fig. 6)",
         "estimate (m = 10^7)": f"max dc/sg {worst['dc/sg_est']:.3g}, max wc/sg {worst['wc/sg_est']:.3g}",
         "measured": f"max dc/sg {worst['dc/sg_run']:.3g}, max wc/sg {worst['wc/sg_run']:.3g}"},
        {"claim": "dc below wc at moderately high skew, the two meet at very high skew (Fig. 5)",
         "estimate (m = 10^7)": "; ".join(
             f"n={x['workers']} z={x['z']}: {x['dc/pkg_est']:.3g} vs {x['wc/pkg_est']:.3g}" for x in mid),
         "measured": "; ".join(
             f"n={x['workers']} z={x['z']}: {x['dc/pkg_run']:.3g} vs {x['wc/pkg_run']:.3g}" for x in mid)},
    ]
    (out / "memory.md").write_text(
        markdown_table(rows) + "\n## Against the paper\n\n" + markdown_table(paper)
        + "\nDifferences: `_est` columns follow the paper's estimate, sum over keys of min(f_k, replicas) with the "
        "expected count f_k = 10^7 p_k, replicas 2 for pkg and the tail, d (FindOptimalChoices on the exact law, "
        "theta = 1/(5n)) or n for the head of dc or wc, n for sg. `_run` columns count the distinct (key, worker) "
        f"pairs after routing {messages:,} messages from {SOURCES} sources: with so few messages the tail holds "
        "few messages per key, pkg's own memory is small and the head's replicas weigh more, so the measured "
        "ratios to pkg are larger than the paper's, while the ranking (dc <= wc, both far below sg) holds.\n"
    )
    return {"rows": rows, "worst": worst, "zs": list(zs), "workers": list(ns)}
