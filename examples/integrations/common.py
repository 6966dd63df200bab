"""Settings the integration examples share: the env, its size for a full and a smoke run, and the comparison."""

from __future__ import annotations

import argparse

ENV_ID = "gpusched/JobSelect-v1"
FULL = {
    "cluster": "tiny",
    "num_jobs": 60,
    "load": 1.5,
    "obs_mode": "flat",
    "preemption": True,
}  # a contended 16-GPU cluster
SMOKE = {"cluster": "tiny", "num_jobs": 12, "load": 1.5, "obs_mode": "flat", "preemption": True}
EVAL_SEEDS = [20000, 20001, 20002]


def parse(description: str, steps: int) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps, help="environment steps of training")
    p.add_argument("--smoke", action="store_true", help="a seconds-long run on a small episode")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    args.env_kwargs = dict(SMOKE if args.smoke else FULL)
    args.seeds = EVAL_SEEDS[:1] if args.smoke else EVAL_SEEDS
    if args.smoke:
        args.steps = min(args.steps, 256)
    return args


def report(make_env, policy, seeds, title: str) -> dict:
    """Print and return the mean average JCT of ``policy`` and of the baselines on the same episodes."""
    from gpusched_envs.integrations.baselines import compare, format_table

    results = compare(make_env, policy, seeds)
    print(format_table(results, title))
    return results
