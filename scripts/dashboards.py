#!/usr/bin/env python3
"""Generate, check, upload or render the topology's Grafana dashboards; see `--help`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from topo.results.dashboards import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
