#!/usr/bin/env python3
"""Compare run directories with Spark (latency percentiles, throughput, load and imbalance over time); see `--help`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from spark.analyze_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
