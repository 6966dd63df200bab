"""``gpusched bench``: the SPEC §8 speed figures, measured on this machine.

Each benchmark returns ``{"name", "value", "unit", "target", "meets", "detail"}``. Benchmarks of parts that are not
installed are skipped, never faked. Other packages add benchmarks through the ``gpusched.benchmarks`` entry-point
group (``agents`` adds training samples per second), so the library never imports them.
"""

from __future__ import annotations

import os
import platform
import time
from datetime import UTC, datetime
from importlib.metadata import entry_points

import numpy as np


def _machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        # other jobs on the machine slow every figure down: the load average says how busy it was
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }


def bench_philly_replay(quick: bool = False) -> dict:
    """Full Philly job list replayed with FIFO + closest placement on the ``philly`` preset (target ≤ 30 s)."""
    from gpusched_envs.policies import make_policy
    from gpusched_envs.sim import SimConfig, Simulator, load_cluster
    from gpusched_envs.workloads import load_workload

    spec = "philly:jobs=5000" if quick else "philly"
    t0 = time.perf_counter()
    workload = load_workload(spec, seed=0)
    cluster = load_cluster("philly")
    t1 = time.perf_counter()
    sim = Simulator(cluster, workload, SimConfig(seed=0))
    metrics = sim.run(make_policy("fifo", "closest"))
    t2 = time.perf_counter()
    return {
        "name": f"philly replay FIFO ({len(workload):,} jobs, philly preset)",
        "value": t2 - t0,
        "unit": "s",
        "target": "<= 30 s" if not quick else "",
        "meets": (t2 - t0) <= 30.0 if not quick else None,
        "detail": {
            "load_s": t1 - t0,
            "simulate_s": t2 - t1,
            "jobs": metrics["jobs"],
            "events": sim.events_processed,
            "decisions": sim.decisions,
            "avg_jct": metrics["avg_jct"],
            "avg_queueing_delay": metrics["avg_queueing_delay"],
        },
    }


def bench_dag_plans(quick: bool = False) -> dict | None:
    """Plan evaluations per second on 50-task random DAGs, populations of 1,000 (target ≥ 20,000/s)."""
    try:
        from gpusched_envs.sim import dag_eval
        from gpusched_envs.workloads.dag import load_dag
    except ImportError:
        return None
    from gpusched_envs.sim import load_cluster

    dag = load_dag("dag:random:n=50,ccr=1.0", seed=0)
    cluster = load_cluster("hetero64")
    rng = np.random.default_rng(0)
    gpus = np.arange(8)
    speed = 1.0 / cluster.catalog.iteration_time[0, cluster.gpu_type[gpus]]
    speed = speed / speed.max()
    bandwidth = cluster.bandwidth_matrix()[np.ix_(gpus, gpus)]
    population = 200 if quick else 1000
    n = dag.num_tasks
    assignments = rng.integers(0, len(gpus), size=(population, n))
    priorities = rng.random((population, n))
    dag_eval.evaluate_plans(dag, speed, bandwidth, assignments, priorities)  # warm-up
    repeats = 2 if quick else 10
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        dag_eval.evaluate_plans(dag, speed, bandwidth, assignments, priorities)
    rate = population * repeats / (time.perf_counter() - t0)
    cpu_rate = population * repeats / max(time.process_time() - c0, 1e-9)
    return {
        "name": f"DAG plan evaluations ({n}-task DAG, 8 GPUs, population {population})",
        "value": rate,
        "unit": "plans/s",
        "target": ">= 100,000 (issue 13; SPEC §8: >= 20,000)",
        "meets": rate >= 100_000,
        "detail": {
            "plans_per_cpu_s": cpu_rate
        },  # on a shared machine the CPU-time rate is the steadier figure
    }


def bench_env_steps(quick: bool = False) -> list[dict]:
    """Env steps per second with random valid actions on ``hetero64``, per env and obs mode."""
    try:
        import gymnasium as gym

        import gpusched_envs.envs  # noqa: F401
    except ImportError:
        return []
    out = []
    ids = sorted(k for k in gym.registry if k.startswith("gpusched/"))
    for env_id in ids:
        for mode in ("flat", "graph", "image"):
            try:
                env = gym.make(env_id, cluster="hetero64", obs_mode=mode)
            except (TypeError, ValueError):
                continue
            obs, _ = env.reset(seed=0)
            rng = np.random.default_rng(0)
            steps = 500 if quick else 5000
            t0 = time.perf_counter()
            for _ in range(steps):
                mask = obs["action_mask"]
                action = int(rng.choice(np.flatnonzero(mask)))
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    obs, _ = env.reset()
            rate = steps / (time.perf_counter() - t0)
            target = 5000 if mode == "flat" else 2000
            out.append(
                {
                    "name": f"{env_id} steps ({mode}, hetero64)",
                    "value": rate,
                    "unit": "steps/s",
                    "target": f">= {target:,}",
                    "meets": rate >= target,
                    "detail": {},
                }
            )
            env.close()
    return out


def bench_multi_agent(quick: bool = False) -> list[dict]:
    """multi_scheduler_v0 joint steps per second (all agents act) with random valid actions, 4 and 16 agents."""
    from gpusched_envs.multi_agent import multi_scheduler_v0

    out = []
    for k in (4, 16):
        env = multi_scheduler_v0.parallel_env(num_agents=k, cluster="hetero64", num_jobs=400)
        obs, _ = env.reset(seed=0)
        rng = np.random.default_rng(0)
        steps = 100 if quick else 1000
        t0 = time.perf_counter()
        for _ in range(steps):
            actions = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
            obs, _, _, _, _ = env.step(actions)
            if not env.agents:
                obs, _ = env.reset()
        rate = steps / (time.perf_counter() - t0)
        out.append(
            {
                "name": f"multi_scheduler_v0 joint steps ({k} agents, graph, hetero64)",
                "value": rate,
                "unit": "steps/s",
                "target": "",
                "meets": None,
                "detail": {"agent_steps_per_s": rate * k},
            }
        )
    return out


def run_benchmarks(quick: bool = False, console=None) -> dict:
    def say(msg: str) -> None:
        if console is not None:
            console.print(msg)

    load_before = _machine()["load_average"]
    results = []
    say("benchmark: Philly replay")
    results.append(bench_philly_replay(quick))
    say("benchmark: DAG plan evaluation")
    dag = bench_dag_plans(quick)
    if dag is not None:
        results.append(dag)
    say("benchmark: env steps")
    results.extend(bench_env_steps(quick))
    say("benchmark: multi-agent steps")
    results.extend(bench_multi_agent(quick))
    for ep in entry_points(group="gpusched.benchmarks"):  # e.g. training speed, from the agents package
        dist = getattr(ep, "dist", None)
        if ep.extras and dist is not None:
            from gpusched_envs.extras import missing_requirements

            if any(missing_requirements(dist, extra) for extra in ep.extras):
                say(f"benchmark: {ep.name} skipped (needs the {'/'.join(ep.extras)} extra)")
                continue
        say(f"benchmark: {ep.name}")
        results.extend(ep.load()(quick=quick))
    machine = _machine()
    return {
        "schema": "gpusched.bench/1",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            **machine,
            "load_average_before": load_before,
            "load_average_after": machine["load_average"],
        },
        "quick": quick,
        "benchmarks": results,
    }
