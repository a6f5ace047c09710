"""D-Choices and W-Choices (002): imbalance, head and memory sweeps, Figs. 8-12, and the Storm deployment."""
