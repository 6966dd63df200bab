"""Cold start of the compiled kernels: how long numba spends compiling them when no cache exists (a fresh clone,
a CI run), and which signatures it compiles.

    python scripts/studies/cold_jit.py [--rounds 2] [--steps 50] [--signatures] [TREE ...]

Each round runs one child process per source tree (put first on its ``PYTHONPATH``; default: this checkout), in
alternating order, twice: first with ``NUMBA_CACHE_DIR`` pointed at a new empty folder (cold: every kernel is
compiled and written there), then again with the same folder (warm: every kernel is loaded from it). The child
imports the library, makes every current env id in every obs mode it offers on ``hetero64``, resets it and takes
``--steps`` masked random steps, steps ``multi_scheduler_v1`` and the vector env of ``JobSelect-v1``, and runs the
simulator with every built-in heuristic (and every placement rule under FIFO) on a small synthetic workload. The
compile time is the cold run's wall time less the warm run's; both are printed per tree with the number of
compiled signatures. ``--signatures`` lists the signatures of every kernel that was compiled for more than one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

KERNEL_MODULES = (
    "gpusched_envs.sim.engine_kernels",
    "gpusched_envs.sim.loop_kernels",
    "gpusched_envs.sim.stepper",
    "gpusched_envs.sim.encode_state",
    "gpusched_envs.sim.place_kernels",
    "gpusched_envs.sim.kernels",
    "gpusched_envs.workloads.dag.structure",
    "gpusched_envs.multi_agent.candidate_kernels",
)


def workload(steps: int) -> dict:
    """What a first run does (see the module's help); returns the seconds of each part."""
    import numpy as np

    parts = {}
    t = time.perf_counter()
    import gymnasium as gym

    import gpusched_envs.envs  # noqa: F401 - registers the ids
    from gpusched_envs.envs import CURRENT_IDS
    from gpusched_envs.envs.encoding import OBS_MODES

    parts["import"] = time.perf_counter() - t
    rng = np.random.default_rng(0)
    for env_id in sorted(CURRENT_IDS):
        t = time.perf_counter()
        for mode in OBS_MODES:
            kwargs = {"obs_mode": mode} if "DAG" in env_id else {"obs_mode": mode, "cluster": "hetero64"}
            try:
                env = gym.make(env_id, **kwargs)
            except (TypeError, ValueError):  # an obs mode this env does not offer
                continue
            obs, _ = env.reset(seed=0)
            for _ in range(steps):
                obs, _, terminated, truncated, _ = env.step(
                    int(rng.choice(np.flatnonzero(obs["action_mask"])))
                )
                if terminated or truncated:
                    obs, _ = env.reset()
            env.close()
        parts[env_id] = time.perf_counter() - t

    t = time.perf_counter()
    from gpusched_envs.multi_agent import multi_scheduler_v1

    env = multi_scheduler_v1.parallel_env(num_agents=4, cluster="hetero64", num_jobs=100)
    obs, _ = env.reset(seed=0)
    for _ in range(steps):
        obs, _, _, _, _ = env.step(
            {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
        )
        if not env.agents:
            obs, _ = env.reset()
    parts["multi_scheduler_v1"] = time.perf_counter() - t

    t = time.perf_counter()
    venv = gym.make_vec("gpusched/JobSelect-v1", num_envs=4, cluster="hetero64", obs_mode="flat")
    venv.reset(seed=0)
    for _ in range(steps):
        masks = np.asarray(
            venv.call("action_masks") if not hasattr(venv, "action_masks") else venv.action_masks()
        )
        venv.step(np.array([int(rng.choice(np.flatnonzero(m))) for m in masks]))
    venv.close()
    parts["vector JobSelect"] = time.perf_counter() - t

    t = time.perf_counter()
    from gpusched_envs.policies import PLACEMENTS, POLICIES, make_policy
    from gpusched_envs.sim import SimConfig, Simulator, load_cluster
    from gpusched_envs.workloads import load_workload

    cluster = load_cluster("hetero64")
    jobs = load_workload("synthetic:jobs=60,load=1.0,gpus=64,max_gpus=8", seed=0)
    runs = [(name, None) for name in POLICIES] + [("fifo", placement) for placement in PLACEMENTS]
    for name, placement in runs:
        Simulator(cluster, jobs, SimConfig(seed=0)).run(make_policy(name, placement))
    parts["Simulator.run"] = time.perf_counter() - t
    return parts


def signatures() -> dict:
    """``{kernel: [signature, ...]}`` of every kernel compiled (or loaded) in this process."""
    import importlib

    from numba.core.registry import CPUDispatcher

    out = {}
    for name in KERNEL_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:  # a tree from before that module
            continue
        for attr, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.signatures and value.__module__ == name:
                out[f"{name.rsplit('.', 1)[1]}.{attr}"] = [str(s) for s in value.signatures]
    return out


class CompileTimes:
    """Numba's compile events, as seconds per kernel spent compiling it alone (the kernels it calls, compiled
    inside its compilation, are counted apart)."""

    def __init__(self) -> None:
        self.stack: list[list] = []
        self.seconds: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def install(self) -> None:
        from numba.core import event

        outer = self

        class Listener(event.Listener):
            def on_start(self, ev) -> None:
                outer.stack.append([time.perf_counter(), 0.0])

            def on_end(self, ev) -> None:
                start, inner = outer.stack.pop()
                spent = time.perf_counter() - start
                if outer.stack:
                    outer.stack[-1][1] += spent
                name = getattr(ev.data["dispatcher"], "__qualname__", str(ev.data["dispatcher"]))
                outer.seconds[name] = outer.seconds.get(name, 0.0) + spent - inner
                outer.count[name] = outer.count.get(name, 0) + 1

        event.register("numba:compile", Listener())


def child(steps: int) -> None:
    times = CompileTimes()
    times.install()
    t = time.perf_counter()
    parts = workload(steps)
    total = time.perf_counter() - t
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "total": total,
        "cpu": usage.ru_utime + usage.ru_stime,
        "parts": parts,
        "signatures": signatures(),
        "compile": {k: [v, times.count[k]] for k, v in times.seconds.items()},
    }
    print(json.dumps(out))


def run_child(tree: str, cache: str, steps: int) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=os.path.abspath(tree), OMP_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(steps)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"error: the run on {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trees", nargs="*", help="source trees to compare (default: this checkout)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--steps", type=int, default=50, help="masked random steps per env and obs mode")
    p.add_argument(
        "--signatures", action="store_true", help="list the kernels compiled for several signatures"
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.steps)
        return
    trees = a.trees or [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
    load = os.getloadavg()
    results = {tree: [] for tree in trees}
    for r in range(a.rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
                cold = run_child(tree, cache, a.steps)
                warm = run_child(tree, cache, a.steps)
            results[tree].append((cold, warm))
            compiled = sum(len(s) for s in cold["signatures"].values())
            print(
                f"round {r + 1} {tree}: cold {cold['total']:.1f} s, warm {warm['total']:.1f} s, "
                f"compile {cold['total'] - warm['total']:.1f} s (CPU {cold['cpu'] - warm['cpu']:.1f} s); "
                f"{compiled} signatures of "
                f"{len(cold['signatures'])} kernels",
                flush=True,
            )
    print(f"load average before: {load[0]:.2f}, after: {os.getloadavg()[0]:.2f}")
    for tree, runs in results.items():
        compile_s = sorted(c["total"] - w["total"] for c, w in runs)
        compile_cpu = sorted(c["cpu"] - w["cpu"] for c, w in runs)
        print(
            f"{tree}: compile seconds, median of {len(runs)}: {compile_s[len(compile_s) // 2]:.1f} wall, "
            f"{compile_cpu[len(compile_cpu) // 2]:.1f} CPU"
        )
        cold, warm = runs[0]
        for part, seconds in cold["parts"].items():
            print(f"    {part:32s} cold {seconds:6.1f} s   warm {warm['parts'][part]:6.2f} s")
        if a.signatures:
            top = sorted(cold["compile"].items(), key=lambda kv: -kv[1][0])[:25]
            print("    compile seconds per kernel (alone, all its signatures), largest first:")
            for kernel, (seconds, count) in top:
                print(f"        {kernel:40s} {seconds:6.2f} s  {count} compile(s)")
            for kernel, sigs in sorted(cold["signatures"].items()):
                if len(sigs) > 1:
                    print(f"    {kernel}: {len(sigs)} signatures")
                    for s in sigs:
                        print(f"        {s}")


if __name__ == "__main__":
    main()
