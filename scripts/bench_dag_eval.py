"""Plan evaluations per second (SPEC §8: >= 20,000/s on 50-task DAGs, 2-core CPU).

Usage::

    .venv/bin/python scripts/bench_dag_eval.py [--tasks 50] [--population 1000] [--gpus 8] [--repeats 30]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpusched_envs.policies.dag import random_plans  # noqa: E402
from gpusched_envs.sim.dag_eval import PlanEvaluator, uniform_bandwidth  # noqa: E402
from gpusched_envs.workloads.dag import random_layered_dag  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--population", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=5, help="number of random DAGs")
    args = ap.parse_args()
    rates = []
    for seed in range(args.seeds):
        dag = random_layered_dag(args.tasks, seed=seed)
        speed = np.random.default_rng(seed).uniform(0.5, 2.0, args.gpus)
        ev = PlanEvaluator(dag, speed, uniform_bandwidth(args.gpus, 10e9))
        a, p = random_plans(dag, args.gpus, args.population, seed=seed)
        ev.evaluate(a, p)  # warm-up
        t0 = time.perf_counter()
        for _ in range(args.repeats):
            ev.evaluate(a, p)
        rates.append(args.repeats * args.population / (time.perf_counter() - t0))
    print(
        f"{args.tasks}-task random layered DAGs, {args.gpus} GPUs, P={args.population}: "
        f"{np.median(rates):,.0f} plan evaluations/s (median of {args.seeds} DAGs; min {min(rates):,.0f})"
    )


if __name__ == "__main__":
    main()
