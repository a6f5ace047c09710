"""How close every headline result of the five papers comes to ours: one row per headline, its status computed from
the committed results, never typed.

A row (`Row`) names the paper's value (or None when the paper states only a direction) and where our number comes
from: an experiment and an expression over its `results/NAME/numbers.json`, evaluated as the docs' quoted numbers are
(`experiments.quoted.evaluate`). Its status:

- `reproduced`: ours within 10% of the paper's value (|ours / paper - 1| <= 0.10), or, for a direction, its `check`
  (an expression over the same experiment's numbers) is true; where our number depends on a hash, the row's
  `spread` gives its [min, max] over several hash seeds, and the paper's value must lie inside it or within 10%
  of it;
- `explained`: not reproduced, but an `ablation` (another expression, of any experiment, whose value moves ours
  toward the paper's) comes within 10% of the paper's value, or a `bound` (a bool expression of an experiment that
  computes that no setting of the model reaches the paper's value) is true;
- `open`: neither; the row's note then says what was tried, naming the experiments.

The registered experiment `fidelity` reads every results folder the rows name (quick and full alike) and writes
`fidelity.csv`, `fidelity.md` (the table, a count per status and per paper above it), `fidelity.png` and its
numbers. The rows themselves are in `experiments/fidelity_rows.py`.
"""

from __future__ import annotations

import math
from pathlib import Path

from experiments.common import pyplot, write_csv
from experiments.fidelity_rows import PAPERS, Row, rows
from experiments.quoted import ROOT, QuoteError, evaluate
from experiments.registry import register

STATUSES = ("reproduced", "explained", "open")
TOLERANCE = 0.10  # relative: |ours / paper - 1| at most this is a match
COLUMNS = ("paper", "where", "claim", "paper_value", "ours", "ratio", "status", "evidence", "note")


def close(value: object, paper_value: float) -> bool:
    """`value` within TOLERANCE of `paper_value` (relative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    return abs(value / paper_value - 1) <= TOLERANCE + 1e-12


def inside(spread: object, paper_value: float) -> bool:
    """`paper_value` inside [min, max] of `spread`, or within TOLERANCE of either end."""
    lo, hi = spread
    return lo <= paper_value <= hi or close(lo, paper_value) or close(hi, paper_value)


def status(row: Row, ours: object, checked: bool | None, ablated: object, bounded: bool | None,
           spread: object = None) -> str:
    """The row's status from its evaluated parts (see the module's docstring)."""
    if row.paper_value is None:
        if checked:
            return "reproduced"
    elif close(ours, row.paper_value) or (spread is not None and inside(spread, row.paper_value)):
        return "reproduced"
    if row.paper_value is not None and ablated is not None and close(ablated, row.paper_value):
        return "explained"
    if bounded:
        return "explained"
    return "open"


def _num(value: object) -> object:
    """A number as the table keeps it: floats as floats, anything else (a bool, a count) as it is."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _value(row: Row, name: str, expr: str, root: Path) -> object:
    """`expr` over experiment `name`'s results; a QuoteError that names the row if it does not evaluate."""
    try:
        return evaluate(name, expr, root)
    except QuoteError as exc:
        raise QuoteError(f"{row.paper} {row.where} {row.claim!r}: {exc}") from None
    except Exception as exc:
        raise QuoteError(f"{row.paper} {row.where} {row.claim!r}: {name} {expr!r}: {type(exc).__name__}: {exc}") \
            from None


def evaluated(row: Row, root: Path = ROOT) -> dict:
    """The row with our value, the ratio, its status and the evidence, evaluated over the results under `root`."""
    name, expr = row.ours
    ours = _num(_value(row, name, expr, root))
    checked = bool(_value(row, name, row.check, root)) if row.check else None
    ablated = _num(_value(row, *row.ablation, root)) if row.ablation else None
    bounded = bool(_value(row, *row.bound, root)) if row.bound else None
    spread = [_num(v) for v in _value(row, *row.spread, root)] if row.spread else None
    evidence = [f"{name}: `{expr}`"]
    if row.spread:
        evidence.append(f"over hash seeds {row.spread[0]}: `{row.spread[1]}` = {fmt(spread[0])} to {fmt(spread[1])}")
    if row.check:
        evidence.append(f"check: `{row.check}` = {checked}")
    if row.ablation:
        evidence.append(f"ablation {row.ablation[0]}: `{row.ablation[1]}` = {fmt(ablated)}")
    if row.bound:
        evidence.append(f"bound {row.bound[0]}: `{row.bound[1]}` = {bounded}")
    ratio = ours / row.paper_value if row.paper_value is not None and isinstance(ours, float) else None
    return {"paper": row.paper, "where": row.where, "claim": row.claim, "paper_value": row.paper_value,
            "ours": ours, "ratio": ratio, "status": status(row, ours, checked, ablated, bounded, spread),
            "evidence": "; ".join(evidence), "note": row.note}


def build(root: Path = ROOT, table: tuple[Row, ...] | None = None) -> list[dict]:
    """Every row of `table` (default: every headline row) evaluated over the results under `root`."""
    return [evaluated(row, root) for row in (rows() if table is None else table)]


def counts(built: list[dict]) -> tuple[dict, dict]:
    """(rows per status, rows per status of each paper)."""
    total = {s: sum(1 for r in built if r["status"] == s) for s in STATUSES}
    by_paper = {p: {s: sum(1 for r in built if r["paper"] == p and r["status"] == s) for s in STATUSES}
                for p in PAPERS}
    return total, by_paper


def fmt(value: object) -> str:
    """A number to 3 significant digits (as the results' tables print them); anything else as it is."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def csv_rows(built: list[dict]) -> list[dict]:
    """The rows as `fidelity.csv` holds them: numbers in full, an empty cell for no value."""
    return [{c: ("" if r[c] is None else r[c]) for c in COLUMNS} for r in built]


def markdown(built: list[dict]) -> str:
    """`fidelity.md`: the counts, one line per status and per paper, then the table (numbers to 3 digits)."""
    total, by_paper = counts(built)
    lines = [f"{len(built)} headline results of the five papers against ours: "
             + ", ".join(f"{total[s]} {s}" for s in STATUSES) + ".", ""]
    lines += [f"- {p}: " + ", ".join(f"{by_paper[p][s]} {s}" for s in STATUSES) for p in PAPERS]
    head = ("paper", "where", "claim", "paper's value", "ours", "ours / paper", "status", "evidence", "note")
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in built:
        cells = [r["paper"], r["where"], r["claim"], fmt(r["paper_value"]), fmt(r["ours"]), fmt(r["ratio"]),
                 f"**{r['status']}**", r["evidence"], r["note"]]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    lines += ["", "Each status is computed from the committed results by `experiments/fidelity.py` "
              "(`python scripts/reproduce.py fidelity`); the paper's value is none where it states a direction only."]
    return "\n".join(lines) + "\n"


def plot(built: list[dict], path: Path) -> None:
    """Ours over the paper's value per row (log scale), coloured by status; directions at the right edge."""
    plt = pyplot()
    colours = {"reproduced": "tab:green", "explained": "tab:orange", "open": "tab:red"}
    fig, ax = plt.subplots(figsize=(8, 0.16 * len(built) + 1.5))
    for i, r in enumerate(built):
        x = abs(r["ratio"]) if r["ratio"] else None
        if x is None or x == 0:
            ax.scatter([300], [i], marker="s", color=colours[r["status"]], s=14, zorder=3)
        else:
            ax.scatter([min(max(x, 1e-3), 200)], [i], color=colours[r["status"]], s=14, zorder=3)
    ax.axvspan(1 - TOLERANCE, 1 + TOLERANCE, color="0.85", zorder=0)
    ax.set_ylim(len(built), -1)
    ax.set_xscale("log")
    ax.set_yticks(range(len(built)), [f"{r['paper'].split()[1]} {r['where']}" for r in built], fontsize=5)
    ax.set_xlabel("ours / paper's value (|ratio|, clipped to [1e-3, 200]; squares at 300: direction rows)")
    for s, c in colours.items():
        ax.scatter([], [], color=c, label=s)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@register(
    "fidelity",
    paper="all five papers: every headline result against ours",
    claim="every headline row of the five papers has a status computed from the committed results (reproduced: "
          "within 10% or the direction holds; explained: an ablation within 10% or a computed bound; open "
          "otherwise, its note naming what was tried)",
)
def run(out_dir: Path, quick: bool) -> dict:
    """Read the committed results (quick and full alike) and write the table."""
    built = build()
    write_csv(out_dir / "fidelity.csv", csv_rows(built))
    (out_dir / "fidelity.md").write_text(markdown(built))
    plot(built, out_dir / "fidelity.png")
    total, by_paper = counts(built)
    return {"rows": built, "counts": total, "by_paper": by_paper}
