"""What the MILP's cap on placement variables does to ALBIC's plans (004), on the settings of the three experiments
that ran under it: `albic-periods`, `albic-scale-in` and `albic-cola`.

Above `milp.MAX_VARIABLES` placement variables only an evenly spaced spread of each node's key groups may move (two
per node at these sizes), which keeps HiGHS's problem small. Each setting runs its first periods twice, capped and
with every key group movable, with the same node limit per solve; the load distance after each period, the
migrations and the solver's wall time show which plans the cap changes and which way.
"""

from __future__ import annotations

import time
from pathlib import Path

from experiments.albic.chain import albic_vs_cola, scale_in
from experiments.albic.periods import periods_run
from experiments.common import against_paper, markdown_table, write_csv
from experiments.registry import register
from groupings import milp


def _settings(quick: bool) -> list[tuple[str, int, int, object]]:
    """(experiment, key groups, nodes, run(max_variables) -> rows with `ld` and `migrations` per period)."""
    if quick:
        per, sc, co = (8, 8, 10, 2, 100), (6, 4, 1, 1, 2, 2, 10), (6, 24, 0.5, 2, 6, 10)
    else:
        per, sc, co = (20, 20, 13, 2, 100), (60, 20, 10, 1, 20, 2, 30), (40, 400, 0.5, 1, 20, 30)

    def periods(cap: int) -> list[dict]:
        rows = periods_run(*per, max_variables=cap, methods=("albic",))
        return [{"period": r["period"], "ld": r["albic_ld"], "migrations": r["albic_migrations"]} for r in rows]

    def scaling_in(cap: int) -> list[dict]:
        nodes, per_node, removed, overloaded, budget, count, node_limit = sc
        return scale_in(nodes, per_node, removed, overloaded, budget, count, node_limit, True, max_variables=cap)

    def collocating(cap: int) -> list[dict]:
        rows = albic_vs_cola(*co, max_variables=cap)
        return [{"period": r["period"], "ld": r["albic_ld"], "migrations": r["albic_migrations"]} for r in rows]

    return [("albic-periods", per[0] * per[1], per[0], periods),
            ("albic-scale-in (1OL, integrated)", sc[0] * sc[1], sc[0], scaling_in),
            ("albic-cola (x = 50%)", 2 * co[1], co[0], collocating)]


@register(
    "albic-cap",
    "Madsen et al. (004): ALBIC's MILP with every key group movable, as in the paper, against the cap on placement "
    "variables (milp.MAX_VARIABLES) that albic-periods, albic-scale-in and albic-cola ran under before",
    "with the same node limit the capped MILP never leaves a lower load distance, and a far higher one where a node "
    "must shed more key groups than the cap lets move (scale-in's overloaded node), at a fraction of the solver's "
    "time",
    volatile=("_s",),
)
def cap(out: Path, quick: bool) -> dict:
    rows = []
    for name, groups, nodes, run in _settings(quick):
        for label, cap_ in (("capped", milp.MAX_VARIABLES), ("every key group", groups * nodes)):
            clock = time.perf_counter()
            trace = run(cap_)
            wall = time.perf_counter() - clock
            for r in trace:
                rows.append({"setting": name, "milp": label, "variables": min(cap_, groups * nodes),
                             "period": r["period"], "ld": r["ld"], "migrations": r["migrations"],
                             "wall_s": wall / len(trace)})
    write_csv(out / "cap.csv", rows)
    settings = list(dict.fromkeys(r["setting"] for r in rows))

    def last(setting: str, label: str) -> dict:
        return [r for r in rows if r["setting"] == setting and r["milp"] == label][-1]

    summary = {s: {"capped_ld": last(s, "capped")["ld"], "uncapped_ld": last(s, "every key group")["ld"],
                   "capped_wall_s": last(s, "capped")["wall_s"],
                   "uncapped_wall_s": last(s, "every key group")["wall_s"]} for s in settings}
    paper = [{"claim": f"{s}: load distance after period {last(s, 'capped')['period']}, capped / every key group",
              "paper": "CPLEX, every key group movable",
              "ours": f"{v['capped_ld']:.3g} / {v['uncapped_ld']:.3g} points"} for s, v in summary.items()]
    note = ("Each solve stops after the setting's node limit (the experiments' own), so the plans do not depend on "
            "the machine. Wall time is per period, solver and all (it varies with the machine, unlike the rest). "
            f"The cap is {milp.MAX_VARIABLES} placement variables; above it only a spread of key groups per node may "
            "move (`milp._movable`).")
    (out / "cap.md").write_text(markdown_table(rows) + against_paper(paper, note))
    return {"rows": rows, "summary": summary, "cap": milp.MAX_VARIABLES,
            "worse_capped": sorted(s for s, v in summary.items() if v["capped_ld"] > v["uncapped_ld"] + 1e-9)}
