"""The integration examples run with --smoke and print the comparison: the agent and every baseline (the
heuristics of the information class, FIFO with backfilling, the random masked policy). Each starts a fresh
interpreter (10-45 s), so they run with the slow tests."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "integrations"
BASELINES = ("agent", "random", "fifo", "gandiva", "tiresias", "las", "fifo+backfill")


def run_smoke(script: str, needs: str) -> str:
    if importlib.util.find_spec(needs) is None:
        pytest.skip(f"{needs} is not installed")
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--smoke"], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    assert set(BASELINES) <= rows, out.stdout
    return out.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "script,needs",
    [("sb3_maskable_ppo.py", "sb3_contrib"), ("cleanrl_ppo.py", "torch"), ("torchrl_ppo.py", "torchrl")],
)
def test_example_smoke(script, needs):
    run_smoke(script, needs)


@pytest.mark.slow
def test_rllib_example_smoke():
    run_smoke("rllib_ppo.py", "ray")
