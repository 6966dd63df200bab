"""Plan evaluations per second (targets: >= 20,000/s on 50-task DAGs on a 2-core CPU, >= 100,000/s batched).

Usage::

    .venv/bin/python scripts/studies/bench_dag_eval.py [--tasks 50] [--population 1000] [--gpus 8] [--repeats 30]
    # against another version of the evaluator, timed in the same run (interleaved, CPU time):
    git show REV:gpusched_envs/sim/dag_eval.py > /tmp/old_dag_eval.py
    .venv/bin/python scripts/studies/bench_dag_eval.py --reference /tmp/old_dag_eval.py
    # exactly `gpusched bench`'s DAG, GPUs and plans:
    .venv/bin/python scripts/studies/bench_dag_eval.py --cluster hetero64 --seeds 1 --repeats 50 --reference ...
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpusched_envs.policies.dag import random_plans  # noqa: E402
from gpusched_envs.sim import dag_eval, load_cluster  # noqa: E402
from gpusched_envs.workloads.dag import random_layered_dag  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--population", type=int, default=1000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=5, help="number of random DAGs")
    ap.add_argument(
        "--reference", type=Path, default=None, help="another dag_eval.py to time in the same run"
    )
    ap.add_argument(
        "--cluster",
        default=None,
        help="take the GPUs' speeds and links from this preset's first --gpus GPUs, as `gpusched bench` does "
        "(hetero64 with --seeds 1: exactly its DAG, GPUs and plans); default: random speeds, 10 GB/s links",
    )
    args = ap.parse_args()
    versions = {"current": dag_eval}
    if args.reference is not None:
        spec = importlib.util.spec_from_file_location("reference_dag_eval", args.reference)
        ref = importlib.util.module_from_spec(spec)
        sys.modules["reference_dag_eval"] = ref  # dataclasses look their module up
        spec.loader.exec_module(ref)
        versions["reference"] = ref
    rates: dict[str, list[float]] = {k: [] for k in versions}
    # the fastest single call: least disturbed by load
    best: dict[str, list[float]] = {k: [] for k in versions}
    for seed in range(args.seeds):
        dag = random_layered_dag(args.tasks, seed=seed)
        if args.cluster is None:
            speed = np.random.default_rng(seed).uniform(0.5, 2.0, args.gpus)
            bw = dag_eval.uniform_bandwidth(args.gpus, 10e9)
            a, p = random_plans(dag, args.gpus, args.population, seed=seed)
        else:  # gpusched_envs.bench.bench_dag_plans's setup
            cluster = load_cluster(args.cluster)
            gpus = np.arange(args.gpus)
            speed = 1.0 / cluster.catalog.iteration_time[0, cluster.gpu_type[gpus]]
            speed = speed / speed.max()
            bw = cluster.bandwidth_matrix()[np.ix_(gpus, gpus)]
            rng = np.random.default_rng(seed)
            a = rng.integers(0, args.gpus, size=(args.population, dag.num_tasks))
            p = rng.random((args.population, dag.num_tasks))
        evs = {k: m.PlanEvaluator(dag, speed, bw) for k, m in versions.items()}
        results = {k: ev.evaluate(a, p) for k, ev in evs.items()}  # warm-up, and the versions must agree
        if "reference" in results and not np.array_equal(results["current"], results["reference"]):
            raise SystemExit("the two evaluators disagree")
        spent = dict.fromkeys(evs, 0.0)
        fastest = dict.fromkeys(evs, np.inf)
        for _ in range(args.repeats):  # the versions take turns, so both see the same load
            for k, ev in evs.items():
                t0 = time.process_time()
                ev.evaluate(a, p)
                dt = time.process_time() - t0
                spent[k] += dt
                fastest[k] = min(fastest[k], dt)
        for k in evs:
            rates[k].append(args.repeats * args.population / spent[k])
            best[k].append(args.population / max(fastest[k], 1e-9))
    for k, r in rates.items():
        print(
            f"{k}: {args.tasks}-task random layered DAGs, {args.gpus} GPUs"
            f"{' of ' + args.cluster if args.cluster else ''}, P={args.population}: "
            f"{np.median(r):,.0f} plan evaluations per CPU-second (median of {args.seeds} DAGs; min {min(r):,.0f}; "
            f"fastest call {np.median(best[k]):,.0f})"
        )


if __name__ == "__main__":
    main()
