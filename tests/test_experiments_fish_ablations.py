"""FISH paper (003) ablations in quick mode (RQ3, RQ4) and the w/D-C switch (`d_hot`) they need."""

from __future__ import annotations

import numpy as np
import pytest

import groupings

NAME = "fish-ablations"
HOT = np.uint64(4242)


def _cell(rows: list[dict], **match) -> dict:
    return next(r for r in rows if all(r[k] == v for k, v in match.items()))


def _pairs(numbers: dict, key: str, *cols: str) -> list[tuple]:
    """Every distinct combination of `cols` in the rows of one ablation."""
    return sorted({tuple(r[c] for c in cols) for r in numbers[key]})


# --- the experiment -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_files_and_paper_comparison(outputs):
    out, numbers = outputs[NAME]
    for f in ("ablations.csv", "ablations.png", "ablations.md"):
        assert (out / f).exists() and (out / f).stat().st_size > 0, f
    md = (out / "ablations.md").read_text()
    assert "Against the paper" in md
    for paper_number in ("11.91", "25.23", "2.61"):  # the paper's figures sit next to ours
        assert paper_number in md
    header = (out / "ablations.csv").read_text().splitlines()[0]
    assert header.startswith("ablation,variant") and "mem_vs_fg" in header
    for key in ("epoch", "strategies", "hwa", "ch", "epoch_zf"):
        assert numbers[key], key


@pytest.mark.slow
def test_lifetime_counting_in_simulated_execution_time_on_the_papers_zf(outputs):
    numbers = outputs[NAME][1]
    rows = numbers["epoch_zf"]
    for z in numbers["epoch_zf_zs"]:
        for n in numbers["epoch_zf_workers"]:
            fish = _cell(rows, z=z, workers=n, variant="fish")
            lifetime = _cell(rows, z=z, workers=n, variant="w/o epoch")
            assert fish["blocked_s"] == lifetime["blocked_s"] == 0.0  # unbounded queues, as the paper's
            assert lifetime["exec_vs_sg"] > fish["exec_vs_sg"]
            assert lifetime["mean_vs_sg"] > 5 * fish["mean_vs_sg"]


@pytest.mark.slow
def test_epochs_beat_lifetime_counting_on_drifting_data(outputs):
    numbers = outputs[NAME][1]
    for z, n in _pairs(numbers, "epoch", "z", "workers"):
        fish = _cell(numbers["epoch"], z=z, workers=n, variant="fish")
        life = _cell(numbers["epoch"], z=z, workers=n, variant="w/o epoch")
        assert fish["exec_vs_sg"] < 1.02  # as fast as shuffle grouping
        assert life["exec_vs_sg"] > fish["exec_vs_sg"] + 0.02  # stale hot sets leave a queue to work off
        assert life["p99_ms"] > 2 * fish["p99_ms"]
        assert life["imbalance"] > 10 * fish["imbalance"]


@pytest.mark.slow
def test_chk_keeps_less_memory_than_wc_at_many_workers(outputs):
    numbers = outputs[NAME][1]
    rows, ns = numbers["strategies"], numbers["workers"]
    for z in numbers["zs"]:
        saving = [1 - _cell(rows, z=z, workers=n, variant="fish")["mem_vs_fg"]
                  / _cell(rows, z=z, workers=n, variant="w/W-C")["mem_vs_fg"] for n in ns]
        assert saving[-1] > 0.2  # CHK gives cooler hot keys fewer workers
        assert saving[-1] > saving[0]  # and the saving grows with the workers
        for n in ns:  # at no cost in balance
            assert _cell(rows, z=z, workers=n, variant="fish")["exec_vs_sg"] < 1.02


@pytest.mark.slow
def test_dc_with_a_small_d_trades_balance_for_memory(outputs):
    numbers = outputs[NAME][1]
    rows = numbers["strategies"]
    for z, n in _pairs(numbers, "strategies", "z", "workers"):
        fish = _cell(rows, z=z, workers=n, variant="fish")
        stale = _cell(rows, z=z, workers=n, variant="w/D-C, stream d")
        recent = _cell(rows, z=z, workers=n, variant="w/D-C")
        assert stale["d_hot"] < recent["d_hot"] <= n
        assert stale["mem_vs_fg"] < fish["mem_vs_fg"]  # less memory than CHK
        assert stale["exec_vs_sg"] > fish["exec_vs_sg"] + 0.1  # but the current top key overloads its d workers
        assert recent["exec_vs_sg"] < 1.02  # a d from the recent head is enough to balance


@pytest.mark.slow
def test_hwa_beats_fewest_sent_on_heterogeneous_workers(outputs):
    numbers = outputs[NAME][1]
    for n, load in _pairs(numbers, "hwa", "workers", "load"):
        fish = _cell(numbers["hwa"], workers=n, load=load, variant="fish")
        fewest = _cell(numbers["hwa"], workers=n, load=load, variant="w/o hwa")
        assert fewest["duration_s"] > 1.2 * fish["duration_s"]
        assert fewest["p99_ms"] > 5 * fish["p99_ms"]
        assert fewest["imbalance"] > 0.25 > fish["imbalance"]  # capacity-relative: even counts are uneven work


@pytest.mark.slow
def test_consistent_hashing_keeps_less_memory_after_a_resize(outputs):
    numbers = outputs[NAME][1]
    rows = numbers["ch"]
    low, high = min(numbers["ch_zs"]), max(numbers["ch_zs"])
    for n in numbers["ch_workers"]:
        for z in (low, high):  # without a resize the two hashings cost the same
            same = _cell(rows, z=z, workers=n, change="none", variant="w/o CH")["mem_vs_fg"]
            assert same == pytest.approx(_cell(rows, z=z, workers=n, change="none", variant="fish")["mem_vs_fg"],
                                         rel=0.02)
        for change in ("+1", "-1"):
            gap = {z: _cell(rows, z=z, workers=n, change=change, variant="w/o CH")["mem_vs_fg"]
                   / _cell(rows, z=z, workers=n, change=change, variant="fish")["mem_vs_fg"] for z in (low, high)}
            assert gap[low] > 1.08  # mod n moved almost every recurring key
            assert gap[low] > gap[high] + 0.05  # few keys recur at high skew


# --- d_hot: FISH with D-Choices' fixed d ----------------------------------------------------------------------


def _hot_stream() -> np.ndarray:
    """A warm-up epoch of distinct keys, then HOT half of the time: HOT is the hot key by far."""
    cold = np.arange(10_000, 12_000, dtype=np.uint64)
    mixed = np.empty(4000, dtype=np.uint64)
    mixed[0::2], mixed[1::2] = HOT, cold
    return np.concatenate([np.arange(1, 101, dtype=np.uint64), mixed])


@pytest.mark.parametrize("d_hot", [1, 3, 5])
def test_d_hot_gives_a_hot_key_exactly_d_hot_workers(d_hot):
    g = groupings.make("fish", 16, seed=0, epoch=100, chk=False, d_hot=d_hot)
    keys = _hot_stream()
    out = g.route(keys)
    assert g.choices(int(HOT)) == d_hot
    late = out[1000:][keys[1000:] == HOT]  # once HOT is hot it keeps to its d_hot candidates
    assert set(late.tolist()) == set(g.candidates(int(HOT)).tolist())
    assert len(set(late.tolist())) == d_hot
    assert g.choices(np.uint64(999_999)) == 2  # cold keys keep two choices


def test_d_hot_zero_is_wc_and_large_d_hot_is_capped():
    keys = _hot_stream()
    wc = groupings.make("fish", 16, seed=0, epoch=100, chk=False)
    wc.route(keys)
    assert wc.params["d_hot"] == 0 and wc.choices(int(HOT)) == 16
    big = groupings.make("fish", 8, seed=0, epoch=100, chk=False, d_hot=50)
    big.route(keys)
    assert big.choices(int(HOT)) == 8
    big.resize(6)
    assert big.choices(int(HOT)) == 6


def test_d_hot_needs_chk_off():
    with pytest.raises(ValueError, match="chk"):
        groupings.make("fish", 16, d_hot=4)
    with pytest.raises(ValueError, match="d_hot"):
        groupings.make("fish", 16, chk=False, d_hot=-1)
    assert groupings.make("fish", 16).params["d_hot"] == 0  # the default keeps CHK as it was
