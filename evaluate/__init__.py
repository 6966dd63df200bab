"""Scenario suites, agent registry and the leaderboard (grid runner with a resumable cache, tables, plots).

    from gpusched_lab.evaluate import run_leaderboard
    doc = run_leaderboard("quick", agents="heuristics,my_module:make_agent", out="results/lb")

See ``docs/leaderboard.md`` for adding a scheduler and ``evaluate/SCHEMA.md`` for the output files.
"""

from __future__ import annotations

import importlib

__all__ = [
    "EvalAgent",
    "Scenario",
    "Suite",
    "list_suites",
    "load_suite",
    "resolve_agent",
    "run_grid",
    "run_leaderboard",
]

_WHERE = {
    "EvalAgent": "gpusched_lab.evaluate.agents",
    "resolve_agent": "gpusched_lab.evaluate.agents",
    "Scenario": "gpusched_lab.evaluate.scenarios",
    "Suite": "gpusched_lab.evaluate.scenarios",
    "list_suites": "gpusched_lab.evaluate.scenarios",
    "load_suite": "gpusched_lab.evaluate.scenarios",
    "run_grid": "gpusched_lab.evaluate.runner",
    "run_leaderboard": "gpusched_lab.evaluate.leaderboard",
}


def __getattr__(name: str):
    # imported on use, so `import evaluate` (and each pool worker) stays light
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'evaluate' has no attribute {name!r}")
