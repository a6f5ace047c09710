"""The committed quick numbers hold on another machine of this kind: a CPU without AVX-512 or AVX2, so that numpy
dispatches other kernels, numba compiles for a generic x86-64, and OpenBLAS runs its most basic kernel."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_every_deterministic_experiment_gives_its_committed_numbers_on_another_cpu(tmp_path):
    # about 7 minutes on 2 cores: numba compiles every kernel anew for the generic CPU, then `--check` runs them all
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the stand-in CPU is an x86-64 one")
    if os.environ.get("OPENBLAS_CORETYPE"):
        pytest.skip("this machine chooses its OpenBLAS kernel itself (OPENBLAS_CORETYPE is set)")
    env = dict(os.environ, OPENBLAS_CORETYPE="Prescott", NUMBA_CPU_NAME="generic",
               NUMBA_CACHE_DIR=str(tmp_path / "numba"), NPY_DISABLE_CPU_FEATURES=_numpy_features_above_baseline())
    done = subprocess.run([sys.executable, "scripts/reproduce.py", "--check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "DIFFERS" not in done.stdout


def _numpy_features_above_baseline() -> str:
    """The SIMD extensions numpy found on this CPU beyond the ones it was built for (disabling those is allowed)."""
    from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__

    return " ".join(f for f in __cpu_dispatch__ if __cpu_features__.get(f) and f not in __cpu_baseline__)
