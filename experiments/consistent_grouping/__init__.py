"""Consistent Grouping (001): Table 1, the sweeps of Figs. 5-11, adaptation (Figs. 8, 12) and its Storm runs."""
