"""Gedik's builds against hashing under other resource functions (000, Fig. 3) and thresholds sigma (Fig. 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.common import markdown_table, pyplot, write_csv
from experiments.gedik.figs import span, than, tracked_count, uniform_fit
from experiments.gedik.scaling import grow_steps
from experiments.gedik.skew import GEDIK_METHODS, grow_means
from experiments.registry import register
from groupings.adaptive import gedik_build as gb
from groupings.adaptive import gedik_cost as gcost
from topo.data.zipf import zipf_pmf

RESOURCE_SETS = ("CCL", "LCL", "LLL", "LQL")  # beta_s beta_c beta_n, as in the paper's Table 1
HASHES = ("uniform", "consistent")


def _keys(count: int, seed: int) -> np.ndarray:
    """`count` random 64-bit key hashes; one seed per run (seed 5 gives gedik-skew's keys)."""
    return np.random.default_rng(seed).integers(0, 2**64 - 1, count, dtype=np.uint64, endpoint=True)


def _yes(ok: bool) -> str:
    return "yes" if ok else "no"


# --- Fig. 3: resource functions at z = 1 -----------------------------------------------------------------------------


def resource_scores(keys_count: int, top: int, runs: int) -> dict[str, dict[str, dict[str, float]]]:
    """Per resource functions and method: b, m and b_s, b_c, b_n averaged over the growth steps N = 2..top, the
    same at N = top, each then averaged over `runs` key sets (the paper reports means of 5 runs)."""
    pmf = zipf_pmf(1.0, keys_count)
    acc: dict[str, dict[str, dict[str, float]]] = {
        res: {name: {} for name in GEDIK_METHODS} for res in RESOURCE_SETS
    }
    for run in range(runs):
        keys = _keys(keys_count, 5 + run)
        for res in RESOURCE_SETS:
            steps = grow_steps(pmf, keys, top, gcost.parse_resources(res))
            for name, rows in steps.items():
                got = {k: float(np.mean([r[k] for r in rows])) for k in ("b", "m", "b_s", "b_c", "b_n")}
                got |= {f"{k}_at_top": float(rows[-1][k]) for k in ("b", "m", "b_c")}
                for k, v in got.items():
                    acc[res][name][k] = acc[res][name].get(k, 0.0) + v / runs
    return acc


def _bars(path: Path, scores: dict, title: str) -> None:
    """Grouped bars: b (left) and m on a log scale (right), one group per resource functions, one bar per method."""
    plt = pyplot()
    fig, (ax_b, ax_m) = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.8 / len(GEDIK_METHODS)
    xs = np.arange(len(RESOURCE_SETS))
    for i, name in enumerate(GEDIK_METHODS):
        at = xs - 0.4 + width * (i + 0.5)
        ax_b.bar(at, [scores[res][name]["b"] for res in RESOURCE_SETS], width, label=name)
        ax_m.bar(at, [scores[res][name]["m"] for res in RESOURCE_SETS], width, label=name)
    ax_b.axhline(1.0, color="black", ls=":", lw=1)
    ax_m.axhline(1.0, color="black", ls=":", lw=1)
    ax_b.set_ylabel("relative imbalance b (1 = within the targets)")
    ax_b.set_yscale("log")  # LQL's b is several times the others'; a log axis keeps CCL..LLL readable
    ax_m.set_ylabel("relative migration m (1 = ideal)")
    ax_m.set_yscale("log")
    for ax in (ax_b, ax_m):
        ax.set_xticks(xs, RESOURCE_SETS)
        ax.set_xlabel("resource functions (beta_s beta_c beta_n)")
        ax.grid(alpha=0.3, axis="y")
    ax_b.legend(fontsize=8, loc="upper left")  # one legend: the m panel's tall uniform bars leave it no room
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@register(
    "gedik-resources",
    "Gedik (000), Fig. 3: resource functions CCL, LCL, LLL, LQL at Zipf z = 1, N grown to 10",
    "uniform hashing migrates several times the ideal on every resource combination while the builds and "
    "consistent hashing stay near it; every build balances better than both hashes; Scan and Redist are "
    "indistinguishable; balance gets harder from CCL to LCL, LLL and LQL, where the relative computation imbalance "
    "stays far above 1 for every method",
)
def resources(out: Path, quick: bool) -> dict:
    """b and m (means over the growth steps and runs) per resource functions for the builds and both hashes."""
    keys_count, top, runs = (20_000, 8, 5) if quick else (1_000_000, 10, 5)
    scores = resource_scores(keys_count, top, runs)
    rows = [{"resources": res, "method": name, **scores[res][name]} for res in RESOURCE_SETS for name in GEDIK_METHODS]
    write_csv(out / "resources.csv", rows)
    _bars(out / "resources.png", scores,
          f"Zipf z = 1 over {keys_count:,} keys, N grown 1..{top}, alpha = 1.2, sigma = 0.1 "
          f"(means over the steps and {runs} runs)")

    (out / "resources.md").write_text(resources_report(scores, keys_count, top, runs))
    return {
        "keys": keys_count,
        "top": top,
        "runs": runs,
        **{res: {name: dict(scores[res][name]) for name in GEDIK_METHODS} for res in RESOURCE_SETS},
    }


def resources_report(scores: dict, keys_count: int, top: int, runs: int) -> str:
    """resources.md: the table against Fig. 3, the checks and the note, every comparison in them taken from `scores`
    (per resource functions and method, as numbers.json holds them), so that it can be rewritten from the committed
    numbers."""
    rows = [{"resources": res, "method": name, **scores[res][name]} for res in RESOURCE_SETS for name in GEDIK_METHODS]
    paper = {  # Fig. 3's numbers as the text states them (LLL); the other cells are only drawn in the radar charts
        ("LLL", "scan"): "b 1.32, m 1.23",
        ("LLL", "redist"): "b 1.32, m 1.23",
        ("LLL", "readj"): "b ~1.2 (lowest), m 1.34",
        ("LLL", "uniform"): "b 1.55, m > 8",
        ("LLL", "consistent"): "b 1.75 (worst), lowest m",
        ("LQL", "scan"): "b_c in the 30s",
        ("LQL", "redist"): "b_c in the 30s",
        ("LQL", "readj"): "b_c in the 30s",
        ("LQL", "consistent"): "b_c out of control",
    }
    table = [
        {
            "resources": r["resources"],
            "method": r["method"],
            "b": r["b"],
            "m": r["m"],
            f"b at N={top}": r["b_at_top"],
            f"m at N={top}": r["m_at_top"],
            f"b_c at N={top}": r["b_c_at_top"],
            "paper (Fig. 3)": paper.get((r["resources"], r["method"]), ""),
        }
        for r in rows
    ]

    def s(res: str, name: str, k: str = "b") -> float:
        return scores[res][name][k]

    builds_lead = all(s(res, b) < min(s(res, h) for h in HASHES) for res in RESOURCE_SETS for b in gb.BUILDS)
    harder = all(s("CCL", n) < s("LCL", n) < s("LLL", n) < s("LQL", n) for n in GEDIK_METHODS)
    least_m = {res: min(GEDIK_METHODS, key=lambda n, res=res: s(res, n, "m")) for res in RESOURCE_SETS}
    linear = [res for res in RESOURCE_SETS if res != "LQL"]
    readj_low = [res for res in linear if s(res, "readj") <= min(s(res, "scan"), s(res, "redist"))]
    lql_gap = s("LQL", "readj") / min(s("LQL", "scan"), s("LQL", "redist")) - 1
    twins = max(abs(s(res, "scan", k) / s(res, "redist", k) - 1) for res in RESOURCE_SETS for k in ("b", "m"))
    readj_m, redist_m = s("LLL", "readj", "m_at_top"), s("LLL", "redist", "m_at_top")
    checks = [
        {"paper": "uniform hash migrates > 8x the ideal",
         "ours": f"uniform m {span([s(r, 'uniform', 'm') for r in RESOURCE_SETS])} (mean over steps), "
                 f"{s('LCL', 'uniform', 'm_at_top'):.2f} at N = {top}",
         "matches": "direction (see note)"},
        {"paper": "consistent hash: lowest m, sometimes < 1",
         "ours": ", ".join(f"{r} {s(r, 'consistent', 'm'):.2f} (lowest: {least_m[r]} {s(r, least_m[r], 'm'):.2f})"
                           for r in RESOURCE_SETS),
         "matches": _yes(all(n == "consistent" for n in least_m.values()))
         + f"; consistent m < 1 on {sum(s(r, 'consistent', 'm') < 1 for r in RESOURCE_SETS)} of 4"},
        {"paper": "consistent hash balances worst: LLL b 1.75 vs 1.55 for uniform",
         "ours": f"LLL b {s('LLL', 'consistent'):.2f} vs {s('LLL', 'uniform'):.2f}",
         "matches": _yes(s("LLL", "consistent") > s("LLL", "uniform")) + " (the order varies with the key set)"},
        {"paper": "the builds balance better than both hashes",
         "ours": ", ".join(f"{r} {span([s(r, b) for b in gb.BUILDS])} vs "
                           f"{min(s(r, h) for h in HASHES):.2f}" for r in RESOURCE_SETS),
         "matches": _yes(builds_lead)},
        {"paper": "linear and quadratic resources are harder to balance",
         "ours": "b rises CCL < LCL < LLL < LQL for " + ("every method" if harder else "not every method"),
         "matches": _yes(harder)},
        {"paper": "Readj has the lowest b (LLL ~1.2 vs 1.32); on LQL 1-2% worse (Fig. 4)",
         "ours": ", ".join(f"{r} {s(r, 'readj'):.3f} vs {min(s(r, 'scan'), s(r, 'redist')):.3f}"
                           for r in RESOURCE_SETS) + f"; LQL {100 * lql_gap:+.1f}%",
         "matches": (f"yes on {', '.join(readj_low)}" if readj_low else "no")
         + (f", no on {', '.join(r for r in linear if r not in readj_low)}" if 0 < len(readj_low) < len(linear)
            else "")},
        {"paper": "Readj migrates more (LLL 1.34 vs 1.23)",
         "ours": f"LLL at N = {top}: {readj_m:.2f} vs {redist_m:.2f} "
                 f"(means over the steps {s('LLL', 'readj', 'm'):.2f} vs {s('LLL', 'redist', 'm'):.2f})",
         "matches": _yes(readj_m > redist_m)},
        {"paper": "Redist and Scan indistinguishable",
         "ours": f"b and m within {100 * twins:.1f}% of each other", "matches": _yes(twins < 0.03)},
        {"paper": "LQL at z = 1: computation imbalance in the 30s for all methods",
         "ours": f"b_c at N = {top}: builds {span([s('LQL', b, 'b_c_at_top') for b in gb.BUILDS], '.0f')}, hashes "
                 f"{span([s('LQL', h, 'b_c_at_top') for h in HASHES], '.0f')}",
         "matches": _yes(min(s("LQL", name, "b_c_at_top") for name in GEDIK_METHODS) > 5)},
    ]
    size_note = "the paper's |D| = 10^6" if keys_count == 1_000_000 else f"{keys_count:,} keys (paper: 10^6, quick run)"
    lll = {name: scores["LLL"][name] for name in GEDIK_METHODS}
    twins_at = {k: [lll[b][f"{k}_at_top"] for b in ("scan", "redist")] for k in ("b", "m")}
    twins_mean = {k: [lll[b][k] for b in ("scan", "redist")] for k in ("b", "m")}
    fig3 = {"b": 1.32, "m": 1.23}  # the paper's LLL b and m of Scan and Redist

    def off(got: dict) -> float:  # the largest relative distance from the paper's two numbers
        return max(abs(v / fig3[k] - 1) for k in fig3 for v in got[k])

    closer = off(twins_at) < off(twins_mean)
    means_lower = all(max(twins_mean[k]) < min(twins_at[k]) for k in ("b", "m"))
    law, fit = uniform_fit([s(r, "uniform", "m") for r in RESOURCE_SETS], top)
    uni_top = [s(r, "uniform", "m_at_top") for r in RESOURCE_SETS]
    why = ("our uniform hash is Lemire's multiply-shift over a 64-bit hash, which moves about half of the keys when "
           "the N-th channel joins" if law == "N / 2" else "our uniform hash moves nearly all of the keys when the "
           "N-th channel joins, as a modulo hash does")
    cons_m = [s(r, "consistent", "m") for r in RESOURCE_SETS]
    below = [r for r in RESOURCE_SETS if s(r, "consistent", "m") < 1]
    hashes_above = min(s("LLL", h) for h in HASHES) > max(s("LLL", b) for b in gb.BUILDS)
    lql_bc = [scores["LQL"][b]["b_c_at_top"] for b in gb.BUILDS]
    lql_bc_mean = [scores["LQL"][b]["b_c"] for b in gb.BUILDS]
    pmf = zipf_pmf(1.0, keys_count)
    top_share = float(pmf[0] ** 2 / (pmf**2).sum())  # the top key's share of the quadratic load
    tracked = {res: tracked_count(pmf, gcost.parse_resources(res), 0.1, top) for res in ("LCL", "LQL")}
    same = tracked["LQL"] == tracked["LCL"]
    note = (
        f"\nOurs: {size_note}, Zipf z = 1, N grown 1..{top} one channel at a time with a rebuild each step, "
        f"alpha = 1.2, sigma = 0.1, U^APM, {runs} runs (different key hashes) averaged like the paper's 5. b and m "
        f"are means over the growth steps N = 2..{top}; the `at N={top}` columns are the last step. b_c is the "
        "relative computation imbalance r_c / alpha_c (the radar charts' computation axis).\n\n"
        f"For Scan and Redist the paper's LLL numbers (b 1.32, m 1.23) compare with our last step, N = {top}: "
        f"b {twins_at['b'][0]:.2f} / {twins_at['b'][1]:.2f} and m {twins_at['m'][0]:.2f} / {twins_at['m'][1]:.2f}, "
        f"at most {off(twins_at):.1%} from the paper's, against {off(twins_mean):.1%} for our means over the steps "
        f"(b {twins_mean['b'][0]:.2f} / {twins_mean['b'][1]:.2f}, m {twins_mean['m'][0]:.2f} / "
        f"{twins_mean['m'][1]:.2f})"
        + (f", which suggests Fig. 3 shows the function after growing to N = {top}" if closer else "")
        + ("; the means are lower than the last step because small N is easier to balance.\n\n" if means_lower
           else ".\n\n")
        + f"Where and why ours differs: (1) {fit}, and at N = {top} it is {span(uni_top)} (N / 2 = {top / 2:g}, "
        f"N - 1 = {top - 1}): {why}, while the paper's > 8x at N = 10 fits a hash that moves nearly all of them "
        "(m about N - 1); both are far above the ideal. (2) Readj starts from the old mapping "
        "and applies, among the moves and swaps that improve the balance, the one of best utility gain per "
        "frequency moved, until none improves the balance; the gain may be negative (an earlier version stopped at "
        "the first negative gain, which left Readj less balanced than Scan and Redist). Here Readj has the lowest b "
        "of the builds on "
        + ("every one" if readj_low == linear else ", ".join(readj_low) if readj_low else "none")
        + f" of the combinations without a quadratic resource ({', '.join(linear)}; Fig. 3: lowest on LLL), and Readj "
        f"migrates {than(readj_m, redist_m, 'more', 'less', 'as much')} than Redist at N = {top} on LLL "
        f"({readj_m:.2f} against {redist_m:.2f}; means over the steps {s('LLL', 'readj', 'm'):.2f} against "
        f"{s('LLL', 'redist', 'm'):.2f}), where Fig. 3 has Readj migrating more (1.34 against 1.23). (3) The "
        "hashes' b depends on where the few heaviest keys land, so whether consistent or uniform hashing balances "
        f"worse on LLL changes between sets of key hashes (ours: consistent {lll['consistent']['b']:.2f} vs uniform "
        f"{lll['uniform']['b']:.2f} on the mean; paper 1.75 vs 1.55); both stay "
        + ("above every build, which we assert" if hashes_above else "not above every build")
        + f". Consistent hashing's m is {span(cons_m)}, below 1 on "
        + (", ".join(below) if below else "none of the combinations")
        + f". (4) LQL at z = 1: the refined threshold delta' tracks {tracked['LQL']} keys at N = {top}, "
        + ("the same as" if same else "against")
        + f" LCL's {tracked['LCL']}, but the top key alone carries {top_share:.0%} of the quadratic load, so no "
        f"placement brings the computation imbalance near alpha: the builds' b_c is {span(lql_bc, '.0f')} at N = "
        f"{top} (paper: in the 30s at N = 10), {than(min(lql_bc), max(lql_bc_mean), 'above', 'below', 'at', 0)} "
        f"their means over the steps, {span(lql_bc_mean, '.0f')}; we keep z = 1 as Fig. 3 does (Fig. 4 "
        "restricts LQL to z in [0.25, 0.5] for that reason).\n"
    )
    return markdown_table(table) + "\n" + markdown_table(checks) + note


# --- Fig. 5: the tracking threshold scaler sigma ---------------------------------------------------------------------


def sigma_scores(keys_count: int, top: int, sigmas: tuple[float, ...], sets: tuple[str, ...], seed: int = 5) -> dict:
    """Per resource functions and method: b and m (means over the growth steps) at each sigma, z = 1."""
    pmf, keys = zipf_pmf(1.0, keys_count), _keys(keys_count, seed)
    out: dict = {}
    for res in sets:
        kinds = gcost.parse_resources(res)
        per = [grow_means(pmf, keys, top, kinds, sigma=s) for s in sigmas]
        out[res] = {name: {"b": [p[name][0] for p in per], "m": [p[name][1] for p in per]} for name in GEDIK_METHODS}
    return out


def _sigma_plot(path: Path, sigmas: tuple[float, ...], scores: dict, title: str) -> None:
    """One row per resource functions: b and m (log) of the builds against sigma (log), hashes as flat lines."""
    plt = pyplot()
    sets = list(scores)
    fig, axes = plt.subplots(len(sets), 2, figsize=(12, 4 * len(sets)), squeeze=False)
    for (ax_b, ax_m), res in zip(axes, sets, strict=True):
        for name in gb.BUILDS:
            ax_b.plot(sigmas, scores[res][name]["b"], "o-", ms=3, label=name)
            ax_m.plot(sigmas, scores[res][name]["m"], "o-", ms=3, label=name)
        for name, style in zip(HASHES, ("--", "-."), strict=True):  # they do not track keys: sigma cannot move them
            ax_b.axhline(scores[res][name]["b"][0], color="gray", ls=style, lw=1, label=f"{name} hash")
            ax_m.axhline(scores[res][name]["m"][0], color="gray", ls=style, lw=1, label=f"{name} hash")
        ax_b.axhline(1.0, color="black", ls=":", lw=1)
        ax_b.set_ylabel(f"{res}: relative imbalance b")
        ax_m.set_ylabel(f"{res}: relative migration m (1 = ideal)")
        ax_m.set_yscale("log")
        for ax in (ax_b, ax_m):
            ax.set_xscale("log")
            ax.set_xlabel("frequency threshold scaler sigma")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@register(
    "gedik-sigma",
    "Gedik (000), Fig. 5: sigma from 0.01 to 1, z = 1, N grown to 10, LCL and LQL",
    "lower sigma gives lower imbalance (every build) but higher migration (Scan and Redist); Redist migrates "
    "less than Scan; on LQL the imbalance rises through sigma in [0.25, 0.5]; whether Readj loses its balance edge "
    "at the lowest sigma (the paper: it balances worse than both there) is checked in the table, not claimed",
)
def sigma(out: Path, quick: bool) -> dict:
    """b and m of Scan, Redist and Readj against sigma for LCL and LQL; the hashes as reference lines."""
    if quick:
        keys_count, top, sigmas = 20_000, 8, (0.02, 0.1, 0.25, 0.5, 1.0)
    else:
        keys_count, top, sigmas = 1_000_000, 10, (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0)
    sets = ("LCL", "LQL")
    scores = sigma_scores(keys_count, top, sigmas, sets)
    rows = [
        {"resources": res, "sigma": s, **{f"{name}_{k}": scores[res][name][k][i]
                                          for name in GEDIK_METHODS for k in ("b", "m")}}
        for res in sets
        for i, s in enumerate(sigmas)
    ]
    write_csv(out / "sigma.csv", rows)
    _sigma_plot(out / "sigma.png", sigmas, scores,
                f"Zipf z = 1 over {keys_count:,} keys, N grown 1..{top}, alpha = 1.2 (means over the steps)")

    (out / "sigma.md").write_text(sigma_report(scores, keys_count, top, sigmas, sets))
    return {"keys": keys_count, "top": top, "sigma": list(sigmas), **scores}


def sigma_report(scores: dict, keys_count: int, top: int, sigmas: tuple[float, ...] | list[float],
                 sets: tuple[str, ...] | list[str]) -> str:
    """sigma.md: the table against Fig. 5, the checks and the note, every comparison in them taken from `scores`
    (per resource functions and method, b and m per sigma, as numbers.json holds them)."""
    mid = sigmas.index(0.25)
    show = sorted({0, sigmas.index(0.1), mid, sigmas.index(0.5), len(sigmas) - 1})
    paper = {
        "scan": "b falls, m rises as sigma falls; worst m of the three",
        "redist": "b falls, m rises as sigma falls; best m of the three",
        "readj": "slightly lowest b mid-range (LCL); loses that at very low sigma",
        "uniform": "unaffected; worst m",
        "consistent": "unaffected; best m",
    }
    table = []
    for res in sets:
        for name in GEDIK_METHODS:
            row: dict = {"resources": res, "method": name}
            for k in ("b", "m"):
                row |= {f"{k} at sigma={sigmas[i]:g}": scores[res][name][k][i] for i in show}
            row["paper (Fig. 5)"] = paper[name]
            table.append(row)

    def at(res: str, name: str, k: str, i: int) -> float:
        return scores[res][name][k][i]

    lo, hi = 0, len(sigmas) - 1
    # Readj's balance against Redist's per sigma: below 1 where Readj has the edge
    readj_vs = [at("LCL", "readj", "b", i) / at("LCL", "redist", "b", i) for i in range(len(sigmas))]
    falls = all(at(r, b, "b", lo) < at(r, b, "b", hi) for r in sets for b in gb.BUILDS)
    rises = all(at(r, b, "m", lo) > at(r, b, "m", hi) for r in sets for b in ("scan", "redist"))
    readj_rises = all(at(r, "readj", "m", lo) > at(r, "readj", "m", hi) for r in sets)
    redist_m = float(np.mean(scores["LCL"]["redist"]["m"][:mid + 1]))
    scan_m = float(np.mean(scores["LCL"]["scan"]["m"][:mid + 1]))
    readj_m = float(np.mean(scores["LCL"]["readj"]["m"][:mid + 1]))
    jump = [at("LQL", b, "b", sigmas.index(0.5)) / at("LQL", b, "b", mid) for b in gb.BUILDS]
    top_step = {b: int(np.argmax(np.diff(scores["LQL"][b]["b"]))) for b in gb.BUILDS}  # b rises most after this
    inside = all(0.25 <= sigmas[i] and sigmas[i + 1] <= 0.5 for i in top_step.values())
    biggest = {b: f"{sigmas[i]:g}->{sigmas[i + 1]:g}" for b, i in top_step.items()}
    checks = [
        {"paper": "lower sigma: lower imbalance (all builds)",
         "ours": ", ".join(f"{r} {b} {at(r, b, 'b', lo):.2f} -> {at(r, b, 'b', hi):.2f}"
                           for r in sets for b in gb.BUILDS),
         "matches": _yes(falls)},
        {"paper": "lower sigma: higher migration",
         "ours": ", ".join(f"{r} {b} {at(r, b, 'm', lo):.2f} -> {at(r, b, 'm', hi):.2f}"
                           for r in sets for b in gb.BUILDS),
         "matches": _yes(rises) + " for Scan and Redist, " + _yes(readj_rises) + " for Readj"},
        {"paper": "Redist best m, Scan worst (of the builds)",
         "ours": f"LCL mean m for sigma <= 0.25: redist {redist_m:.3f}, scan {scan_m:.3f}, readj {readj_m:.3f}",
         "matches": _yes(redist_m <= scan_m) + " for Redist vs Scan; Readj "
                    + ("migrates least here" if readj_m < redist_m else "migrates more than Redist")},
        {"paper": "Readj slightly lowest b mid-range (LCL)",
         "ours": f"sigma 0.25: readj {at('LCL', 'readj', 'b', mid):.3f} vs "
                 f"{min(at('LCL', b, 'b', mid) for b in ('scan', 'redist')):.3f}",
         "matches": _yes(at("LCL", "readj", "b", mid) < min(at("LCL", b, "b", mid) for b in ("scan", "redist")))},
        {"paper": "Readj loses its advantage at very low sigma",
         "ours": f"sigma {sigmas[lo]:g}: readj {at('LCL', 'readj', 'b', lo):.3f} vs "
                 f"{min(at('LCL', b, 'b', lo) for b in ('scan', 'redist')):.3f}; readj / redist b "
                 f"{readj_vs[lo]:.3f} there, {min(readj_vs):.3f} at best (sigma {sigmas[int(np.argmin(readj_vs))]:g})",
         "matches": _yes(at("LCL", "readj", "b", lo) > max(at("LCL", b, "b", lo) for b in ("scan", "redist"))
                         and readj_vs[lo] == max(readj_vs))},
        {"paper": "LQL: imbalance jumps for sigma in [0.25, 0.5]",
         "ours": "b(0.5) / b(0.25): " + ", ".join(f"{b} {j:.2f}" for b, j in zip(gb.BUILDS, jump, strict=True))
                 + "; largest step " + ", ".join(f"{b} {v}" for b, v in biggest.items()),
         "matches": ("yes, the largest step of b lies inside" if inside else "rises, but the largest step is not "
                     "inside") if min(jump) > 1.0 else "no"},
    ]
    size_note = "the paper's |D| = 10^6" if keys_count == 1_000_000 else f"{keys_count:,} keys (paper: 10^6, quick run)"
    pmf = zipf_pmf(1.0, keys_count)
    tracked = {r: [tracked_count(pmf, gcost.parse_resources(r), x, top) for x in sigmas] for r in ("LCL", "LQL")}
    same = [x for x, a, b in zip(sigmas, tracked["LCL"], tracked["LQL"], strict=True) if a == b]
    other = [f"{x:g} (LQL {b}, LCL {a})" for x, a, b in zip(sigmas, tracked["LCL"], tracked["LQL"], strict=True)
             if b != a]
    twins_fall = all(at(r, b, "b", lo) < at(r, b, "b", hi) for r in sets for b in ("scan", "redist"))
    fig5 = "holds" if twins_fall and rises else "does not hold"
    half = sigmas.index(0.5)
    note = (
        f"\nOurs: {size_note}, Zipf z = 1, N grown 1..{top} one channel at a time with a rebuild each step, "
        f"alpha = 1.2, U^APM, one run (paper: mean of 5; the sweep over {len(sigmas)} sigmas and two resource "
        "combinations is the cost), b and m means over the growth steps. Uniform and consistent hashing track "
        "no keys, so sigma leaves them unchanged (the flat lines in the figure).\n\n"
        f"How ours differs: the direction of Fig. 5 {fig5} for Scan and Redist (lower sigma: lower b and higher m, "
        "the checks' first two rows); for Readj the checks above say which of the paper's directions hold at these "
        "sizes (Readj keeps balancing while a move or swap improves the balance, see gedik-resources). For LQL the "
        f"refined delta' tracks the same keys as LCL at N = {top} for sigma = "
        + (", ".join(f"{x:g}" for x in same) if same else "none")
        + (f" but not at sigma = {', '.join(other)}" if other else "")
        + " (the paper also saw equal explicit-hash sizes), so sigma changes LQL's balance only through the "
        f"heaviest keys; from sigma 0.25 to 0.5 LQL's explicit hash at N = {top} "
        f"{than(tracked['LQL'][half], tracked['LQL'][mid], 'grows', 'shrinks', 'stays', 0)} from "
        f"{tracked['LQL'][mid]} to {tracked['LQL'][half]} keys and the builds' b "
        + ("rises" if min(jump) > 1 else "falls" if max(jump) < 1 else "changes")
        + f" by a factor {span(jump)}.\n\n"
    )
    return markdown_table(table) + "\n" + markdown_table(checks) + note
