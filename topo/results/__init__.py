"""Results out: the run directory, metrics and summaries, the headroom verdict, plots and Grafana."""
