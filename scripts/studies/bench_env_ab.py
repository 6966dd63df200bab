"""Env steps per second of several versions of the code, timed in the same run (paired, CPU time).

One worker process per source tree (put on its ``PYTHONPATH``) steps the env with random valid actions on
``hetero64`` (resets included, as ``gpusched bench``); the coordinator hands the workers chunks of steps in turn
(alternating the order each round), so every version sees the same machine load. Reported per tree: steps/s over
all its chunks (CPU time) and the median per-round speed ratio to the first tree with a bootstrap 95% interval.
On a shared machine the ratio is the figure that carries.

Usage::

    git worktree add /tmp/old 5172800
    .venv/bin/python scripts/studies/bench_env_ab.py gpusched/WorkerPlacement-v1 --mode flat --rounds 40 --chunk 500 \\
        /tmp/old "$PWD"
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np


def worker(env_id: str, mode: str) -> None:
    """Read a step count per line on stdin, step that many times, print the CPU seconds it took."""
    import gymnasium as gym

    import gpusched_envs.envs  # noqa: F401 - registers the ids

    env = gym.make(env_id, cluster="hetero64", obs_mode=mode)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)

    def run(steps: int) -> None:
        nonlocal obs
        for _ in range(steps):
            obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
            if terminated or truncated:
                obs, _ = env.reset()

    run(300)  # warm-up (caches, first reset)
    print("ready", flush=True)
    for line in sys.stdin:
        t = time.process_time()
        run(int(line))
        print(time.process_time() - t, flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("env_id")
    p.add_argument("trees", nargs="+", help="source trees (the first is the reference)")
    p.add_argument("--mode", default="flat")
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--chunk", type=int, default=500)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        worker(a.env_id, a.mode)
        return
    procs = []
    for tree in a.trees:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), OMP_NUM_THREADS="1")
        cmd = [sys.executable, os.path.abspath(__file__), a.env_id, tree, "--mode", a.mode, "--worker"]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        if proc.stdout.readline().strip() != "ready":
            sys.exit(f"error: the worker for {tree} did not start")
        procs.append(proc)
    times = np.zeros((len(a.trees), a.rounds))
    for r in range(a.rounds):
        order = range(len(procs)) if r % 2 == 0 else reversed(range(len(procs)))
        for i in order:
            procs[i].stdin.write(f"{a.chunk}\n")
            procs[i].stdin.flush()
            times[i, r] = float(procs[i].stdout.readline())
    for proc in procs:
        proc.stdin.close()
        proc.wait()
    rng = np.random.default_rng(0)
    for tree, ts in zip(a.trees, times, strict=True):
        ratio = times[0] / ts  # > 1: faster than the reference
        boot = np.median(rng.choice(ratio, size=(2000, len(ratio))), axis=1)
        print(
            f"{a.env_id} {a.mode} {tree}: {a.rounds * a.chunk / ts.sum():,.0f} steps/s "
            f"(CPU time, {a.rounds} x {a.chunk} steps); vs the first: median {np.median(ratio):.3f} "
            f"[{np.quantile(boot, 0.025):.3f}, {np.quantile(boot, 0.975):.3f}]"
        )


if __name__ == "__main__":
    main()
