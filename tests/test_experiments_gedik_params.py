"""Gedik's resource functions (000, Fig. 3) and sigma sweep (Fig. 5), in quick mode, through `outputs`."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from experiments.gedik.params import HASHES, RESOURCE_SETS
from groupings.adaptive import gedik_build as gb

METHODS = (*gb.BUILDS, *HASHES)


def _files(out, stem: str) -> None:
    for ext in ("csv", "png", "md"):
        assert (out / f"{stem}.{ext}").stat().st_size > 0
    md = (out / f"{stem}.md").read_text()
    assert "paper" in md and "Fig." in md


def test_gedik_resources_builds_beat_hashing_on_every_resource_combination(outputs):
    out, n = outputs["gedik-resources"]
    _files(out, "resources")
    with (out / "resources.csv").open() as f:
        assert len(list(csv.DictReader(f))) == len(RESOURCE_SETS) * len(METHODS)
    for res in RESOURCE_SETS:
        got = n[res]
        for build in gb.BUILDS:
            # every build balances better than both hashes
            assert got[build]["b"] < min(got[h]["b"] for h in HASHES), (res, build)
            assert got[build]["m"] < 1.5  # and migrates near the ideal, like consistent hashing
        assert got["consistent"]["m"] < 1.2
        # uniform hashing migrates several times the ideal, far above everything else
        assert got["uniform"]["m"] > 2.0
        assert got["uniform"]["m"] > 1.8 * max(got[name]["m"] for name in METHODS if name != "uniform")
        # Scan and Redist are indistinguishable
        for k in ("b", "m"):
            assert abs(got["scan"][k] / got["redist"][k] - 1) < 0.03, (res, k)


def test_gedik_resources_linear_and_quadratic_are_harder_to_balance(outputs):
    _, n = outputs["gedik-resources"]
    for name in METHODS:
        bs = [n[res][name]["b"] for res in RESOURCE_SETS]
        assert bs == sorted(bs) and bs[0] < bs[-1], (name, bs)  # CCL < LCL < LLL < LQL
    # LQL at z = 1: the computation imbalance stays far above alpha for every method, the hashes' worst
    lql = n["LQL"]
    assert min(lql[name]["b_c_at_top"] for name in METHODS) > 10
    assert min(lql[h]["b_c_at_top"] for h in HASHES) > 2 * max(lql[b]["b_c_at_top"] for b in gb.BUILDS)


@pytest.mark.slow  # gedik-sigma's quick run takes about 5 s (tests/conftest.py)
def test_gedik_sigma_trades_balance_for_migration(outputs):
    out, n = outputs["gedik-sigma"]
    _files(out, "sigma")
    sigmas = n["sigma"]
    assert sigmas == sorted(sigmas) and sigmas[0] <= 0.02 and sigmas[-1] == 1.0 and 0.25 in sigmas
    with (out / "sigma.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 2 * len(sigmas)
    for res in ("LCL", "LQL"):
        got = n[res]
        for build in gb.BUILDS:
            assert got[build]["b"][0] < got[build]["b"][-1], (res, build)  # lower sigma, lower imbalance
        for build in ("scan", "redist"):
            assert got[build]["m"][0] > 1.15 * got[build]["m"][-1], (res, build)  # ... but higher migration
        for h in HASHES:  # hashing tracks no keys: sigma cannot move it
            assert np.ptp(got[h]["b"]) == 0 and np.ptp(got[h]["m"]) == 0
    # Redist migrates less than Scan over the useful range sigma <= 0.25
    upto = sigmas.index(0.25) + 1
    assert np.mean(n["LCL"]["redist"]["m"][:upto]) < np.mean(n["LCL"]["scan"]["m"][:upto])


@pytest.mark.slow  # gedik-sigma's quick run takes about 5 s (tests/conftest.py)
def test_gedik_sigma_lql_rises_mid_range_and_the_table_judges_readj_at_low_sigma(outputs):
    out, n = outputs["gedik-sigma"]
    lcl = n["LCL"]
    # Readj's edge at the lowest sigma is the paper's claim, not ours (quick and full runs have it within 1% of the
    # better of Scan and Redist): the table's verdict must follow the numbers, whichever way they go
    lo = [lcl[b]["b"][0] for b in ("readj", "scan", "redist")]
    vs_redist = [r / d for r, d in zip(lcl["readj"]["b"], lcl["redist"]["b"], strict=True)]
    verdict = "yes" if lo[0] > max(lo[1:]) and vs_redist[0] == max(vs_redist) else "no"
    row = next(line for line in (out / "sigma.md").read_text().splitlines() if "loses its advantage" in line)
    assert row.rstrip(" |").endswith(verdict)
    # LQL: the imbalance of every build rises through sigma in [0.25, 0.5]
    i, j = n["sigma"].index(0.25), n["sigma"].index(0.5)
    for build in gb.BUILDS:
        assert n["LQL"][build]["b"][j] > n["LQL"][build]["b"][i], build
