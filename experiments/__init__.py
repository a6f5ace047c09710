"""Named experiments that reproduce the papers' results: each writes a CSV, a PNG and a markdown table.

`scripts/reproduce.py --list` shows them; `scripts/reproduce.py NAME [--quick]` runs one.
"""

from experiments.registry import EXPERIMENTS, Experiment, get, names, register

__all__ = ["EXPERIMENTS", "Experiment", "get", "names", "register"]
