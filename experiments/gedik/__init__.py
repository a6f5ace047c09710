"""Gedik et al. (000), partitioning functions for stateful data parallelism: Figs. 3-14 and Scan's readings."""
