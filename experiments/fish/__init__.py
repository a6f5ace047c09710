"""FISH (003): RQ1-RQ5 through routing and the simulator's execution time, drift, and the ablations."""
