"""The leaderboard's driver plans the grid without torch: checking a checkpoint's metadata and its observation
layout against a scenario imports neither torch nor the networks (the workers load them)."""

from __future__ import annotations

import subprocess
import sys


def test_checkpoint_checks_do_not_import_torch():
    code = """
import sys
from gpusched_lab.evaluate.agents import resolve_agent
from gpusched_lab.evaluate.scenarios import load_suite
suite = load_suite("quick")
checked = 0
for spec in ("checkpoints/ppo_jobselect_gnn_nc", "checkpoints/ddqn_workerplacement_gnn",
             "checkpoints/workerplacement_gnn"):
    agent = resolve_agent(spec)
    for scenario in suite.scenarios:
        agent.applies_to(scenario)
        checked += 1
assert checked, "nothing checked"
print("torch" in sys.modules, "gpusched_lab.agents.nets.networks" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"], out.stdout + out.stderr
