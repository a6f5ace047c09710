"""The fidelity table: every headline result of the five papers against ours, its status computed from the committed
results, and the committed table what the results make now."""

from __future__ import annotations

import json
import re

import pytest

import experiments
from experiments import fidelity, quoted
from experiments.common import write_csv
from experiments.fidelity import Row

# what makes the table again from the results: its folder, its quick numbers and the copy in docs/fidelity.md
RERUN = ("python scripts/reproduce.py fidelity`, `python scripts/reproduce.py --check --update fidelity` and "
         "`python scripts/quote_numbers.py")


def _names_in(text: str) -> list[str]:
    """The registered experiments a sentence names."""
    return [n for n in experiments.names() if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]


def test_the_committed_table_is_what_the_committed_results_make(tmp_path):
    write_csv(tmp_path / "fidelity.csv", fidelity.csv_rows(fidelity.build()))
    committed = (quoted.ROOT / "results" / "fidelity" / "fidelity.csv").read_text()
    now = (tmp_path / "fidelity.csv").read_text()
    moved = [line for line in now.splitlines() if line not in committed.splitlines()]
    assert now == committed, (f"results moved {len(moved)} row(s) of the fidelity table since it was made (first: "
                              f"{moved[:1]}): rerun `{RERUN}")


def test_every_row_has_a_status_and_says_what_stands_behind_it():
    built = fidelity.build()
    names = set(experiments.names())
    assert "fidelity" in names
    assert len(built) >= 45
    assert {r["paper"] for r in built} == set(fidelity.PAPERS)
    assert {r["status"] for r in built} <= set(fidelity.STATUSES)
    for row, got in zip(fidelity.rows(), built, strict=True):
        assert row.ours[0] in names, row.claim
        if got["status"] == "open":
            assert _names_in(row.note), f"{row.claim!r} is open: its note must name what was tried"
        if got["status"] == "explained":
            assert {e[0] for e in (row.ablation, row.bound) if e} & names, row.claim
    total, by_paper = fidelity.counts(built)
    assert sum(total.values()) == len(built) == sum(sum(c.values()) for c in by_paper.values())


def _toy(tmp_path, numbers: dict):
    (tmp_path / "results" / "toy").mkdir(parents=True)
    (tmp_path / "results" / "toy" / "numbers.json").write_text(json.dumps(numbers))
    quoted.numbers.cache_clear()


def test_a_status_is_computed_from_the_results(tmp_path):
    _toy(tmp_path, {"a": 1.1, "b": 0.5, "c": 1.11, "flag": True, "rows": [{"x": 2, "y": 3.0}]})

    def row(value, ours, **kw):
        return Row("001 CG", "Fig. 0", "a toy", value, ("toy", ours), "toy was run", **kw)

    table = (
        row(1.0, "a"),  # 10% off: reproduced
        row(1.0, "c"),  # 11% off: open
        row(3.0, 'pick(rows, x=2)["y"]'),
        row(1.0, "b", ablation=("toy", "a")),  # the ablation within 10%: explained
        row(1.0, "b", ablation=("toy", "c")),  # the ablation too far off: open
        row(1.0, "b", bound=("toy", "flag")),  # a bound that holds: explained
        row(1.0, "b", bound=("toy", "not flag")),
        row(None, "b", check="flag and b < 1"),  # a direction that holds: reproduced
        row(None, "b", check="b > 1"),
        row(None, "b", check="b > 1", bound=("toy", "flag")),
    )
    built = fidelity.build(tmp_path, table)
    assert [r["status"] for r in built] == ["reproduced", "open", "reproduced", "explained", "open", "explained",
                                           "open", "reproduced", "open", "explained"]
    assert built[0]["ours"] == 1.1 and built[0]["ratio"] == pytest.approx(1.1) and built[7]["ratio"] is None
    assert "ablation toy: `a` = 1.1" in built[3]["evidence"] and "bound toy: `flag` = True" in built[5]["evidence"]
    markdown = fidelity.markdown(built)
    assert markdown.startswith("10 headline results of the five papers against ours: 3 reproduced, 3 explained, "
                               "4 open.")
    assert "- 001 CG: 3 reproduced, 3 explained, 4 open" in markdown and "| **explained** |" in markdown
    # a rerun that moves a number moves the status
    (tmp_path / "results" / "toy" / "numbers.json").write_text(json.dumps({"a": 2.0, "b": 0.5, "c": 1.11,
                                                                           "flag": True, "rows": []}))
    quoted.numbers.cache_clear()
    assert fidelity.build(tmp_path, table[:1])[0]["status"] == "open"
    # an expression that no longer evaluates names its row
    with pytest.raises(quoted.QuoteError, match=r"001 CG Fig. 0 'a toy': toy 'pick\(rows, .*LookupError"):
        fidelity.build(tmp_path, table[2:3])
    quoted.numbers.cache_clear()


def test_a_row_is_either_a_value_or_a_direction():
    with pytest.raises(ValueError, match="exactly one"):
        Row("001 CG", "Fig. 0", "both", 1.0, ("cg-eps", "kg"), "cg-eps", check="True")
    with pytest.raises(ValueError, match="exactly one"):
        Row("001 CG", "Fig. 0", "neither", None, ("cg-eps", "kg"), "cg-eps")
    with pytest.raises(ValueError, match="not one of"):
        Row("005 Other", "Fig. 0", "a paper of its own", 1.0, ("cg-eps", "kg"), "cg-eps")


def test_a_hash_dependent_row_is_reproduced_when_the_paper_lies_inside_its_spread(tmp_path):
    _toy(tmp_path, {"b": 0.5, "lo": 0.5, "hi": 1.2})

    def row(value, spread):
        return Row("001 CG", "Table 1", "a toy", value, ("toy", "b"), "toy was run", spread=("toy", spread))

    built = fidelity.build(tmp_path, (row(0.8, "(lo, hi)"), row(1.3, "(lo, hi)"), row(2.0, "(lo, hi)")))
    # inside the spread, within 10% of its end, and beyond: one seed's value alone (0.5) would say open
    assert [r["status"] for r in built] == ["reproduced", "reproduced", "open"]
    assert "over hash seeds toy: `(lo, hi)` = 0.5 to 1.2" in built[0]["evidence"]
