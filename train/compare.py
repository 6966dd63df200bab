"""Score a checkpoint against the classical heuristics on held-out seeds: average JCT per seed, mean and 95% bootstrap
confidence interval per policy, plus the paired per-seed difference to FIFO.

    python -m train compare checkpoints/topdrl_jobselect_cnn --seeds 20 --first-seed 20000 --out results.json

The heuristics run on a fresh simulator holding the workload and settings of the env reset with the same seed (not
on the env's own simulator, which ``reset`` has already advanced to its first decision point), so FIFO, SJF and
Tiresias (which preempts) see exactly the workload the agent sees, with the same placement.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from agents.common import bootstrap_ci, fresh_simulator, run_episode

HEURISTICS = ("fifo", "sjf", "tiresias")


def heuristic_jct(env, name: str, placement: str, seed: int) -> float:
    from gpusched_envs.policies import make_policy

    return float(fresh_simulator(env, seed).run(make_policy(name, placement))["avg_jct"])


def compare(checkpoint: str | Path, seeds: list[int], heuristics=HEURISTICS, progress=None) -> dict:
    """Average JCT of the checkpoint's deterministic policy and of each heuristic on ``seeds``."""
    import agents
    from agents.common import set_torch_threads

    set_torch_threads(1)
    agent = agents.load(checkpoint)
    env = agent.make_env()
    placement = agent.meta["env_kwargs"].get("placement", "closest")
    if not isinstance(placement, str):
        placement = "closest"
    per_seed: dict[str, list[float]] = {"agent": []}
    t0 = time.perf_counter()
    for s in seeds:
        per_seed["agent"].append(float(run_episode(agent.act, env, s)["metrics"]["avg_jct"]))
        if progress:
            progress(f"agent seed {s}: {per_seed['agent'][-1]:,.0f} s")
    agent_seconds = time.perf_counter() - t0
    for name in heuristics:
        per_seed[name] = [heuristic_jct(env, name, placement, s) for s in seeds]
    summary = {}
    for name, values in per_seed.items():
        mean, lo, hi = bootstrap_ci(values)
        summary[name] = {"mean": mean, "ci95": [lo, hi]}
    if "fifo" in per_seed:
        diff = np.asarray(per_seed["agent"]) - np.asarray(per_seed["fifo"])
        mean, lo, hi = bootstrap_ci(diff)
        summary["agent_minus_fifo"] = {"mean": mean, "ci95": [lo, hi]}
    return {
        "checkpoint": str(checkpoint),
        "env_id": agent.env_id,
        "env_kwargs": agent.meta["env_kwargs"],
        "placement": placement,
        "seeds": list(map(int, seeds)),
        "avg_jct_per_seed": per_seed,
        "summary": summary,
        "agent_seconds": agent_seconds,
    }


def markdown_table(result: dict) -> str:
    rows = ["| policy | mean avg JCT (s) | 95% CI |", "|---|---:|---|"]
    for name, s in result["summary"].items():
        rows.append(f"| {name} | {s['mean']:,.0f} | [{s['ci95'][0]:,.0f}, {s['ci95'][1]:,.0f}] |")
    return "\n".join(rows)


def write_result(result: dict, out: Path) -> None:
    from gpusched_envs.io import atomic_write_text

    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
