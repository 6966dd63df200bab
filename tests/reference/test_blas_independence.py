"""The simulator's and the envs' results do not depend on the CPU's BLAS kernel.

numpy hands ``np.dot`` to its BLAS library (OpenBLAS in the wheels), which picks a kernel for the CPU at run time;
kernels add in different orders, so a sum of products taken there changes in its last bits from one CPU to another
(and with it a finish time, a reward, a trajectory hash). The simulator and the envs take such sums with
:func:`gpusched_envs.sim.engine.portable_dot` instead. Here the same runs go under two OpenBLAS kernels that every
x86-64 CPU runs (``OPENBLAS_CORETYPE``) and must give the same bits."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = r"""
import json, sys
from tests.reference import record_corpus as rc
metrics = rc.encode_values(rc.run_metric_case({"cluster": "openb", "policy": "fifo", "placement": None, "seed": 0}))
envs = [rc.run_env_case(json.loads(k))["dynamics"] for k in sys.argv[1:]]
print(json.dumps([metrics, envs]))
"""
ENV_CASES = [
    '{"env": "gpusched/JobSelect-v1", "obs_mode": "flat", "seed": 0}',
    '{"env": "gpusched/WorkerPlacement-v1", "obs_mode": "flat", "seed": 0}',
]


@pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="OPENBLAS_CORETYPE names x86 kernels"
)
def test_results_are_the_same_bits_under_every_blas_kernel():
    out = {}
    for core in ("Nehalem", "Haswell"):
        env = {**os.environ, "OPENBLAS_CORETYPE": core}
        run = subprocess.run(
            [sys.executable, "-c", SCRIPT, *ENV_CASES],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        out[core] = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["Nehalem"] == out["Haswell"]
