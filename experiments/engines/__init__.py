"""The engines against each other and against Flink, the papers' Storm deployments at their sizes, recovery, and
the production groupings against the papers'."""
