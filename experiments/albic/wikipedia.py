"""ALBIC's Real Job 1 (004, Section 5.2), stand-in: GeoHash -> TopK -> global TopK on a drifting Zipf stream.

The paper's input is the Wikipedia edit history (article revisions); we draw article ids from a Zipf law instead,
because edit counts per article are heavy-tailed and that skew is what loads the TopK key groups unevenly. The
words stream would give the same kind of skew but a fixed vocabulary with no drift; here the popular articles
change from period to period, as edit activity does. The paper's data has no location, and it assumes GeoHash
values spread evenly over Denmark: each tuple gets a uniform random cell.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.common import against_paper, markdown_table, pyplot, write_csv
from experiments.registry import register
from groupings import collocation, flux, milp
from groupings.hashing import seeded_hashes
from topo.data.zipf import zipf_pmf

TOPK_SALT, GLOBAL_SALT, GEO_SALT = 0x544F504B, 0x474C4F42, 0x47454F48  # each stage keys by its own hash
CELLS = 1000  # GeoHash cells
TOP = 10  # K of each TopK key group's list sent to the global TopK per window (period)


class WikiStandIn:
    """Per period: key-group loads of the three stages and the traffic of their two edges."""

    def __init__(self, groups: int, articles: int, z: float, tuples: int, seed: int) -> None:
        self.groups, self.tuples = groups, tuples
        self.rng = np.random.default_rng(seed)
        self.pmf = zipf_pmf(z, articles)
        self.article_of_rank = self.rng.permutation(articles).astype(np.uint64)
        self.hot = min(articles, 500)  # ranks whose article may change from one period to the next

    def period(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """Loads (tuples, 3 stages x groups, stage after stage) and [out_geo_topk, out_topk_global] of one period."""
        g = self.groups
        churn = self.rng.choice(self.hot, size=max(1, self.hot // 50), replace=False)  # 2% of the hot ranks
        self.article_of_rank[churn] = self.rng.permutation(self.article_of_rank[churn])
        ranks = self.rng.choice(self.pmf.size, size=self.tuples, p=self.pmf)
        article = self.article_of_rank[ranks]
        cell = self.rng.integers(0, CELLS, self.tuples).astype(np.uint64)
        geo = seeded_hashes(cell, GEO_SALT, g).astype(np.int64)
        topk = seeded_hashes(article, TOPK_SALT, g).astype(np.int64)
        out1 = np.bincount(geo * g + topk, minlength=g * g).reshape(g, g).astype(float)
        # each TopK key group sends its TOP most edited articles of the window to their global TopK key group
        out2 = np.zeros((g, g))
        uniq, counts = np.unique(article, return_counts=True)
        owner = seeded_hashes(uniq, TOPK_SALT, g)
        for t in range(g):
            mine = np.flatnonzero(owner == t)
            best = mine[np.argsort(-counts[mine], kind="stable")[:TOP]]
            np.add.at(out2[t], seeded_hashes(uniq[best], GLOBAL_SALT, g).astype(np.int64), 1.0)
        loads = np.concatenate([out1.sum(axis=1), out1.sum(axis=0), out2.sum(axis=0)])
        return loads, [out1, out2]


@register(
    "albic-wikipedia",
    "Madsen et al. (004), Section 5.2, Figs. 6-7 (Real Job 1 stand-in): GeoHash -> TopK -> global TopK, 100 key "
    "groups per stage, 20 nodes, maxMigrations 13 per period; ALBIC (its MILP) against Flux, on a drifting Zipf stream",
    "the MILP keeps the load distance low and steady (paper: below 1%) while Flux with the same budget fluctuates "
    "higher (paper: up to 7%); the collocation factor stays low (paper: about 5%), full partitioning with even "
    "fan-out leaving little to collocate",
)
def wikipedia(out: Path, quick: bool) -> dict:
    """Load distance, migrations and collocation factor per period for ALBIC and Flux over the same stream."""
    if quick:
        groups, nodes, budget, periods, tuples, articles, node_limit = 20, 5, 3, 4, 4_000, 2_000, 10
    else:
        groups, nodes, budget, periods, tuples, articles, node_limit = 100, 20, 13, 30, 100_000, 50_000, 5
    z, mean_node = 1.0, 50.0
    stream = WikiStandIn(groups, articles, z, tuples, seed=17)
    total = 3 * groups
    start = np.random.default_rng(19).permutation(total) % nodes
    active, kill = np.ones(nodes, bool), np.zeros(nodes, bool)
    place = {"albic": start.copy(), "flux": start.copy()}
    rows = []
    for t in range(1, periods + 1):
        tuples_per_group, edges = stream.period()
        loads = tuples_per_group * (mean_node * nodes / tuples_per_group.sum())  # percentage points of a node
        row: dict = {"period": t}
        for name, asg in place.items():
            row[f"{name}_ld_before"] = milp.load_distance(milp.node_loads(loads, asg, nodes), active)
            if name == "albic":
                # every key group may move (the default spread for large instances left the hottest groups in
                # place, and the MILP stuck near the start); the node limit, not the time, ends each solve
                new, _ = milp.allocate(loads, asg, active, kill, None, budget, time_limit=120.0,
                                       node_limit=node_limit, max_variables=total * nodes)
            else:
                new = flux.flux(loads, asg, milp.node_loads(loads, asg, nodes), budget)
            row[f"{name}_migrations"] = int(np.count_nonzero(new != asg))
            asg[:] = new
            row[f"{name}_ld"] = milp.load_distance(milp.node_loads(loads, asg, nodes), active)
            row[f"{name}_collocation"] = collocation.collocation_factor(edges, asg)
        rows.append(row)
    write_csv(out / "wikipedia.csv", rows)

    plt = pyplot()
    fig, (ax_d, ax_m, ax_c) = plt.subplots(1, 3, figsize=(15, 4.2))
    ts = [r["period"] for r in rows]
    for name, label in (("albic", "ALBIC (MILP)"), ("flux", "Flux")):
        ax_d.plot(ts, [r[f"{name}_ld"] for r in rows], "o-", ms=3, label=label)
        ax_m.plot(ts, [r[f"{name}_migrations"] for r in rows], "o-", ms=3, label=label)
        ax_c.plot(ts, [100 * r[f"{name}_collocation"] for r in rows], "o-", ms=3, label=label)
    ax_m.axhline(budget, color="black", ls=":", lw=1, label="maxMigrations")
    ax_c.axhline(100 / nodes, color="black", ls=":", lw=1, label="1 / nodes")
    ax_d.set_ylabel("load distance after rebalancing (% points)")
    ax_m.set_ylabel("migrations per period")
    ax_c.set_ylabel("collocation factor (%)")
    for ax in (ax_d, ax_m, ax_c):
        ax.set_xlabel("period (SPL)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"GeoHash -> TopK -> global TopK, {groups} key groups per stage, {nodes} nodes, Zipf z = {z:g}")
    fig.tight_layout()
    fig.savefig(out / "wikipedia.png", dpi=110)
    plt.close(fig)

    def stat(name: str) -> dict:
        ld = np.array([r[f"{name}_ld"] for r in rows])
        return {
            "mean_ld": float(ld.mean()),
            "max_ld": float(ld.max()),
            "mean_migrations": float(np.mean([r[f"{name}_migrations"] for r in rows])),
            "max_migrations": int(max(r[f"{name}_migrations"] for r in rows)),
            "mean_collocation": float(np.mean([r[f"{name}_collocation"] for r in rows])),
        }

    numbers = {name: stat(name) for name in place}
    numbers.update(budget=budget, nodes=nodes)
    table = [{"method": name, **numbers[name]} for name in place]
    paper = [
        {"claim": "load distance (% points)", "paper": "MILP consistently < 1; Flux fluctuating up to 7",
         "ours": f"ALBIC mean {numbers['albic']['mean_ld']:.2f}, max {numbers['albic']['max_ld']:.2f}; Flux mean "
                 f"{numbers['flux']['mean_ld']:.2f}, max {numbers['flux']['max_ld']:.2f}"},
        {"claim": "migrations per period", "paper": "both within maxMigrations = 13",
         "ours": f"ALBIC max {numbers['albic']['max_migrations']}, Flux max {numbers['flux']['max_migrations']} "
                 f"(budget {budget})"},
        {"claim": "collocation factor", "paper": "about 5% (Section 5.4's remark on Job 1)",
         "ours": f"ALBIC {100 * numbers['albic']['mean_collocation']:.1f}%, Flux "
                 f"{100 * numbers['flux']['mean_collocation']:.1f}% (1/nodes = {100 / nodes:.1f}%)"},
    ]
    note = (
        f"Ours: {tuples:,} tuples per period, articles drawn from Zipf(z = {z:g}) over {articles:,} ids with 2% of "
        "the 500 most popular ranks handed to other articles each period, GeoHash cells uniform; a key group's load "
        "is the tuples it received (the global TopK gets each TopK key group's top 10 per window, so it is nearly "
        f"idle), scaled to a {mean_node:g}% mean node load. As in the paper's Figs. 6-7, ALBIC is its MILP here "
        "(no collocation constraints): with full partitioning and even fan-out no pair carries much more than "
        "another, and the collocation factor of its placement stays near 1/nodes, the paper's 'about 5%' on 20 "
        "nodes. (Run with its collocation heuristic, ALBIC pins such weak pairs at the cost of balance: maxLD "
        f"allows 10 points.) HiGHS stands in for CPLEX, stopped after {node_limit} branch-and-bound nodes per solve. "
        "No Storm, no windows' merge load, no PoTC (Section 5.2's third method), no migration latency."
    )
    (out / "wikipedia.md").write_text(markdown_table(table) + against_paper(paper, note))
    return numbers
