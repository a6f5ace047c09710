"""D-Choices on Storm (Figs. 13, 14) in quick mode: the paper's directions in the closed loop of max spout
pending, in the simulator and on Ray actors (both slow: the quick runs take several seconds each)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_dc_and_wc_beat_pkg_and_kg_on_throughput_and_p99(outputs):
    _, numbers = outputs["dchoices-storm"]
    r = numbers["scaled_sim"][2.0]
    assert r["over_pkg"] > 1.5 and r["over_kg"] > 2.3  # at least the paper's best case, at 8 workers and z = 2.0
    assert 1.7 < r["pkg_over_kg"] < 2.5  # two workers share the hottest key under pkg, one under kg
    assert r["p99_cut_vs_pkg"] > 0.6 and r["p99_cut_vs_kg"] > 0.75
    assert 0.3 < r["pkg_p99_share_of_kg"] < 0.7  # the paper: about half


def test_ray_agrees_with_the_simulator_and_keeps_the_direction(outputs):
    _, numbers = outputs["dchoices-storm-ray"]
    ray, sim = numbers["scaled_ray"][2.0], numbers["scaled_sim"][2.0]
    assert ray["over_kg"] > 2.3 and sim["over_kg"] > 2.3
    # kg is held by its hottest worker on both engines: there the two agree; where Ray itself was the limit, the
    # run must say so, and Ray is then slower than the simulator's prediction, never faster
    pairs = {p["grouping"]: p for p in numbers["pairs"]}
    assert 0.8 < pairs["kg"]["ray/sim"] < 1.2
    for p in numbers["pairs"]:
        assert p["exact"] and (0.8 < p["ray/sim"] < 1.2 or (p["ray_bottleneck"] == "engine" and p["ray/sim"] < 1))
