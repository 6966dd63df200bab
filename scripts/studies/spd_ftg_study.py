"""Empirical study of Scheduling Plan Distance vs Finish Time Gap (WORL-RTGS's premise).

For each bundled DAG set, plan pairs are sampled two ways:

- ``around-heft``: HEFT's plan and a perturbation of it at a level ``q ~ U[0, 1]`` (each task's GPU key redrawn
  with probability ``q``, each priority key moved the share ``q`` towards a uniform draw): the neighbourhood the
  running-time-gap strategy moves in;
- ``random``: two independent uniformly random plans.

For each set and way: the Pearson and Spearman correlation between SPD and FTG with 95% bootstrap intervals
(resampling pairs). Synthetic DAGs get their CCR on the GPU set (``ccr_at_gpus``), as in ``gpusched dag-bench``.

Usage::

    OMP_NUM_THREADS=1 python scripts/studies/spd_ftg_study.py [--pairs 400] [--json results/spd_ftg.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import PlanSpace  # noqa: E402
from gpusched_lab.agents.methods.worl_rtgs.plan_metrics import finish_time_gap, spd_matrix_to  # noqa: E402

from gpusched_envs.envs.dag_schedule import DAGScheduleEnv, ccr_at_gpus  # noqa: E402
from gpusched_envs.io import atomic_write_text  # noqa: E402
from gpusched_envs.policies.dag import heft  # noqa: E402
from gpusched_envs.workloads.dag import load_dag  # noqa: E402

SETS = {
    "random layered n=50, CCR 1": ("dag:random:n=50,ccr=1.0", True),
    "random layered n=50, CCR 10": ("dag:random:n=50,ccr=10.0", True),
    "Alibaba-like n=30, CCR 1": ("dag:alibaba:n=30,ccr=1.0", True),
    "TPC-H q9, CCR 1": ("dag:tpch:q=9,ccr=1.0", True),
    "PipeDream VGG-16 pipeline, 4 stages": ("dag:pipedream:model=vgg16,mode=pipeline,gpus=4", False),
}


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def with_ci(x: np.ndarray, y: np.ndarray, fn, rng: np.random.Generator, boots: int = 1000) -> dict:
    est = fn(x, y)
    idx = rng.integers(0, len(x), (boots, len(x)))
    samples = np.array([fn(x[i], y[i]) for i in idx])
    samples = samples[np.isfinite(samples)]
    lo, hi = np.percentile(samples, [2.5, 97.5]) if len(samples) else (np.nan, np.nan)
    return {"r": est, "ci95": [float(lo), float(hi)]}


def pairs_for(dag, env, mode: str, count: int, rng: np.random.Generator):
    space = PlanSpace(dag, env.speed, env.bandwidth, gpu_types=env.gpu_types)
    if mode == "around-heft":
        ref = space.encode(*heft(dag, env.speed, env.bandwidth, gpu_types=env.gpu_types))
        x_ref = np.repeat(ref, count, axis=0)
        q = rng.random((count, 1))
        n = space.num_tasks
        x = x_ref.copy()
        x[:, :n] = (1 - q) * x[:, :n] + q * rng.random((count, n))
        redraw = rng.random((count, n)) < q
        x[:, n:][redraw] = rng.random(int(redraw.sum()))
    else:
        x_ref, x = space.random(count, rng), space.random(count, rng)
    f_ref, f = space.evaluate(x_ref), space.evaluate(x)
    a_ref, p_ref = space.decode(x_ref)
    a, p = space.decode(x)
    o_ref = space.evaluator.dispatch_order(a_ref, p_ref)
    o = space.evaluator.dispatch_order(a, p)
    spd = np.array([spd_matrix_to(a[i : i + 1], o[i : i + 1], a_ref[i], o_ref[i])[0] for i in range(count)])
    return spd, finish_time_gap(f, f_ref)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=400)
    ap.add_argument("--instances", type=int, default=3, help="draws of each generated DAG set")
    ap.add_argument("--cluster", default="hetero64")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    env = DAGScheduleEnv(args.cluster, "dag:random:n=4", gpus=args.gpus)
    rng = np.random.default_rng(args.seed)
    results = []
    print("| DAG set | pairs | Pearson r [95% CI] | Spearman ρ [95% CI] |")
    print("|---|---|---|---|")
    for label, (spec, synthetic) in SETS.items():
        for mode in ("around-heft", "random"):
            spd, ftg = [], []
            for i in range(args.instances):
                dag = load_dag(spec, seed=i)
                dag = ccr_at_gpus(dag, env.bandwidth) if synthetic else dag
                s, f = pairs_for(dag, env, mode, args.pairs // args.instances, rng)
                spd.append(s)
                ftg.append(f)
            spd, ftg = np.concatenate(spd), np.concatenate(ftg)
            pear = with_ci(spd, ftg, lambda a, b: float(np.corrcoef(a, b)[0, 1]), rng)
            spear = with_ci(spd, ftg, spearman, rng)
            results.append(
                {"set": label, "spec": spec, "pairs": mode, "n": len(spd), "pearson": pear, "spearman": spear}
            )
            print(
                f"| {label} ({mode}) | {len(spd)} | {pear['r']:.2f} [{pear['ci95'][0]:.2f}, {pear['ci95'][1]:.2f}] | "
                f"{spear['r']:.2f} [{spear['ci95'][0]:.2f}, {spear['ci95'][1]:.2f}] |",
                flush=True,
            )
    if args.json is not None:
        meta = {"cluster": args.cluster, "gpus": args.gpus, "seed": args.seed, "instances": args.instances}
        atomic_write_text(args.json, json.dumps({"meta": meta, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
