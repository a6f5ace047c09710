"""FISH (003), memory against the stream's length: the paper's figures come from 50M tuples over 10^5 keys, ours from
2M to 10M, and per-key state depends on how often each key recurs.

Shuffle grouping keeps a key on every worker it reached, so its state over key grouping's is the mean over keys of
min(count, n) (nearly): bounded by the messages per key. FISH and its W-C strategy spread only hot keys, whose
copies do not grow with the stream once every worker has seen them. So SG's memory over FG's (paper: 15.52x to
88.32x at 128 workers), FISH's share of SG's (paper: as low as 3.34% at z = 1) and CHK's saving over W-C's strategy
(paper: up to 25.23% at 64 workers, 45.34% at 128) all move with the stream's length. Here the paper's ZF stream
(10^5 keys, blocks reading) is routed whole at 2M, 10M and 50M tuples, at 64 and 128 workers, and each grouping's
memory (distinct key-worker pairs per distinct key, FG = 1) is measured. Routing only, as `fish-workers`' memory.
"""

from __future__ import annotations

from pathlib import Path

from experiments.common import against_paper, markdown_table, pyplot, stream, write_csv
from experiments.fish.exec_time import zf_spec
from experiments.registry import register
from experiments.routing import DRIFT_SOURCES as SOURCES
from experiments.routing import replication, route

VARIANTS = {"sg": ("sg", {}), "fish": ("fish", {}), "w/W-C": ("fish", {"chk": False})}
LENGTHS = (2_000_000, 10_000_000, 50_000_000)
PAPER = {"sg_over_fg": 88.32, "fish_share_of_sg_pct": 3.34, "chk_saving_64_pct": 25.23, "chk_saving_128_pct": 45.34}


@register(
    "fish-memory-length",
    "FISH (003), RQ1/RQ3/RQ5 memory: SG's copies over FG's, FISH's share of SG's and CHK's saving over W-C's "
    "strategy, on the paper's ZF stream at 2M, 10M and 50M tuples (the paper's length), 64 and 128 workers",
    "sg's memory grows with the stream's length and fish's share of it falls; fish's memory stays far below sg's",
)
def memory_length(out: Path, quick: bool) -> dict:
    lengths = (100_000, 500_000) if quick else LENGTHS
    zs = (1.0,) if quick else (1.0, 1.5, 2.0)
    ns = (128,) if quick else (64, 128)
    rows = []
    for m in lengths:
        for z in zs:
            keys = stream(zf_spec(z, m)).key_hash
            for n in ns:
                mem = {name: replication(keys, route(scheme, keys, n, SOURCES, **params), n)
                       for name, (scheme, params) in VARIANTS.items()}
                rows.append({"messages": m, "z": z, "workers": n, "sg_over_fg": mem["sg"],
                             "fish_over_fg": mem["fish"], "wc_strategy_over_fg": mem["w/W-C"],
                             "fish_share_of_sg_pct": 100 * mem["fish"] / mem["sg"],
                             "chk_saving_pct": 100 * (1 - mem["fish"] / mem["w/W-C"])})
    write_csv(out / "memory_length.csv", rows)
    longest = [r for r in rows if r["messages"] == lengths[-1]]
    top = {
        "sg_over_fg": max(r["sg_over_fg"] for r in longest),
        "fish_share_of_sg_pct": min(r["fish_share_of_sg_pct"] for r in longest if r["z"] == 1.0),
        "chk_saving_64_pct": max((r["chk_saving_pct"] for r in longest if r["workers"] == 64), default=None),
        "chk_saving_128_pct": max(r["chk_saving_pct"] for r in longest if r["workers"] == 128),
    }
    paper = [{"claim": k.replace("_", " "), "paper": f"{PAPER[k]:.4g}",
              "ours": "(full run only)" if top[k] is None else f"{top[k]:.4g} at {lengths[-1]:,} tuples"}
             for k in PAPER]
    note = ("\nOurs at the longest stream (the paper's 50M in a full run): SG's largest factor over FG, FISH's "
            "smallest share of SG's at z = 1, CHK's largest saving over the W-C strategy.\n")
    (out / "memory_length.md").write_text(markdown_table(rows) + against_paper(paper, note))
    _plot(out / "memory_length.png", rows)
    return {"rows": rows, "longest": lengths[-1], "top": top}


def _plot(path: Path, rows: list[dict]) -> None:
    plt = pyplot()
    fig, (ax_m, ax_s) = plt.subplots(1, 2, figsize=(11, 4))
    n = max(r["workers"] for r in rows)
    for z in sorted({r["z"] for r in rows}):
        got = [r for r in rows if r["z"] == z and r["workers"] == n]
        ms = [r["messages"] for r in got]
        ax_m.plot(ms, [r["sg_over_fg"] for r in got], "o-", label=f"sg, z = {z:g}")
        ax_m.plot(ms, [r["fish_over_fg"] for r in got], "s--", label=f"fish, z = {z:g}")
        ax_s.plot(ms, [r["fish_share_of_sg_pct"] for r in got], "o-", label=f"z = {z:g}")
    for ax in (ax_m, ax_s):
        ax.set_xscale("log")
        ax.set_xlabel("tuples in the ZF stream")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax_m.set_yscale("log")
    ax_m.set_ylabel(f"memory over key grouping's ({n} workers)")
    ax_s.set_ylabel("fish's memory as % of sg's")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
