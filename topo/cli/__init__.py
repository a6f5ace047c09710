"""The command line: `run_topology.py`, the advisor and the summary table."""
