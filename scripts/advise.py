#!/usr/bin/env python3
"""Which grouping should I use? Run every grouping on one topology in the simulator and rank them; see `--help`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout without installing

from topo.cli.advise import main  # noqa: E402
from topo.cli.run import exit_process  # noqa: E402

if __name__ == "__main__":
    sys.exit(exit_process(main()))  # a local Ray's stop does not hold the user
