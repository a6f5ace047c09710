#!/usr/bin/env python3
"""Precompute a stream dataset with Spark (zipf, drift, words, or your own logs); see `--help`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from spark.streams_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
