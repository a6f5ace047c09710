"""ALBIC's MILP allocation against Flux, period by period, on the paper's synthetic workload (004)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.common import markdown_table, pyplot, write_csv
from experiments.registry import register
from groupings import flux, milp

# --- ALBIC (004): load distance and migrations per period against Flux -----------------------------------------------


def _drift(loads: np.ndarray, assignment: np.ndarray, nodes: int, rng: np.random.Generator, change: float) -> None:
    """The paper's synthetic change (in place): on 20% of the nodes, half gain and half lose `change` percentage
    points of load, spread over their key groups in proportion to the groups' loads (the load stays with them)."""
    picked = rng.choice(nodes, size=max(2, nodes // 5), replace=False)
    node = milp.node_loads(loads, assignment, nodes)
    for i, n in enumerate(picked):
        on = assignment == n
        sign = 1.0 if i % 2 == 0 else -1.0
        factor = max(0.0, 1.0 + sign * change / max(node[n], 1e-9))
        loads[on] *= factor


MEAN_NODE = 50.0  # percentage points of the bottleneck resource
CHANGE = 5.0  # points gained or lost per changing node and period
METHODS = ("albic", "flux", "none")


def periods_run(nodes: int, per_node: int, budget: int, count: int, node_limit: int,
                max_variables: int = milp.MAX_VARIABLES, methods: tuple[str, ...] = METHODS
                ) -> list[dict]:
    """Per period, for each method: the load distance before and after rebalancing and the migrations, on the
    synthetic drifting workload (ALBIC's MILP with at most about `max_variables` placement variables)."""
    groups = nodes * per_node
    rng = np.random.default_rng(7)
    base = MEAN_NODE / per_node * (1.0 + rng.uniform(-0.05, 0.05, groups))
    start = np.arange(groups) % nodes
    active, kill = np.ones(nodes, bool), np.zeros(nodes, bool)
    state = {name: (base.copy(), start.copy()) for name in methods}
    drift_seed = np.random.SeedSequence(11)
    rngs = {name: np.random.default_rng(drift_seed) for name in state}  # the same changes for every method
    rows = []
    for t in range(1, count + 1):
        row: dict = {"period": t}
        for name, (loads, asg) in state.items():
            _drift(loads, asg, nodes, rngs[name], CHANGE)
            before = milp.load_distance(milp.node_loads(loads, asg, nodes), active)
            if name == "albic":
                new, _ = milp.allocate(loads, asg, active, kill, None, budget, time_limit=900.0,
                                      node_limit=node_limit, max_variables=max_variables)
            elif name == "flux":
                new = flux.flux(loads, asg, milp.node_loads(loads, asg, nodes), budget)
            else:
                new = asg
            moved = int((new != asg).sum())
            asg[:] = new
            row[f"{name}_ld_before"] = before
            row[f"{name}_ld"] = milp.load_distance(milp.node_loads(loads, asg, nodes), active)
            row[f"{name}_migrations"] = moved
        rows.append(row)
    return rows


@register(
    "albic-periods",
    "Madsen et al. (004), Sections 5.1-5.2: synthetic key groups (mean +-5%), 20% of nodes change load each period, "
    "maxMigrations per period shared with Flux",
    "the MILP allocation at ALBIC's core keeps the load distance low and steady (paper: below 1%) within the "
    "migration budget, while Flux with the same budget leaves a larger, fluctuating load distance (paper: up to 7%)",
)
def periods(out: Path, quick: bool) -> dict:
    """Run the same drifting workload under ALBIC's MILP, Flux and no rebalancing; load distance and migrations."""
    # a node limit, not a time limit, ends each solve, so the numbers do not depend on the machine's speed
    nodes, per_node, budget, count, node_limit = (8, 8, 10, 6, 100) if quick else (20, 20, 13, 40, 100)
    groups = nodes * per_node
    rows = periods_run(nodes, per_node, budget, count, node_limit, max_variables=groups * nodes)  # no cap: albic-cap
    write_csv(out / "periods.csv", rows)

    plt = pyplot()
    fig, (ax_d, ax_m) = plt.subplots(1, 2, figsize=(12, 4.2))
    ts = [r["period"] for r in rows]
    for name, label in (("albic", "ALBIC (MILP)"), ("flux", "Flux"), ("none", "no rebalancing")):
        ax_d.plot(ts, [r[f"{name}_ld"] for r in rows], "o-", ms=3, label=label)
    width = 0.4
    ax_m.bar(np.array(ts) - width / 2, [r["albic_migrations"] for r in rows], width, label="ALBIC (MILP)")
    ax_m.bar(np.array(ts) + width / 2, [r["flux_migrations"] for r in rows], width, label="Flux")
    ax_m.axhline(budget, color="black", ls=":", lw=1, label="maxMigrations")
    ax_d.set_ylabel("load distance after rebalancing (% points)")
    ax_m.set_ylabel("migrations per period")
    for ax in (ax_d, ax_m):
        ax.set_xlabel("period (SPL)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"{nodes} nodes, {groups} key groups, mean node load {MEAN_NODE:g}%, maxMigrations = {budget}")
    fig.tight_layout()
    fig.savefig(out / "periods.png", dpi=110)
    plt.close(fig)

    def stat(name: str) -> dict:
        ld = np.array([r[f"{name}_ld"] for r in rows])
        mig = np.array([r[f"{name}_migrations"] for r in rows])
        return {
            "mean_ld": float(ld.mean()),
            "max_ld": float(ld.max()),
            "mean_migrations": float(mig.mean()),
            "max_migrations": int(mig.max()),
        }

    numbers = {name: stat(name) for name in METHODS}
    numbers["budget"] = budget
    paper = {
        "albic": "load distance consistently < 1% (Job 1, 13 migrations/SPL)",
        "flux": "load distance fluctuating up to 7%",
        "none": "(not in the paper)",
    }
    table = [
        {
            "method": name,
            "mean load distance": numbers[name]["mean_ld"],
            "max load distance": numbers[name]["max_ld"],
            "mean migrations/period": numbers[name]["mean_migrations"],
            "max migrations/period": numbers[name]["max_migrations"],
            "paper": paper[name],
        }
        for name in METHODS
    ]
    note = (
        f"\nOurs: the paper's synthetic workload (key group loads at the mean +-5%, 20% of nodes gaining or losing "
        f"{CHANGE:g} points per period) on {nodes} nodes, not the Storm/Wikipedia job, so the absolute load distances "
        "are not comparable; the direction is: the MILP stays lower and steadier than Flux under the same "
        "maxMigrations. The workload has no communicating key groups, so ALBIC adds no collocation constraints "
        f"and reduces to its MILP (maxPL = 0); HiGHS stands in for CPLEX, stopped after {node_limit} branch-and-bound "
        "nodes per period so that the numbers do not depend on the machine's speed, with every key group movable "
        "(no cap on the MILP's variables; `albic-cap` shows what the cap did here).\n"
    )
    (out / "periods.md").write_text(markdown_table(table) + note)
    return numbers
