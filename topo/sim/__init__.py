"""The simulator: the shared model (`topo.model`) driven by an event loop in simulated time."""

from topo.sim.simulator import simulate

__all__ = ["simulate"]
