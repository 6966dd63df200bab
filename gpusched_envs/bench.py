"""``gpusched bench``: the project's speed figures, measured on this machine.

Each benchmark returns ``{"name", "value", "unit", "target", "meets", "detail"}``. Benchmarks of parts that are not
installed are skipped, never faked. Other packages add benchmarks through the ``gpusched.benchmarks`` entry-point
group (``agents`` adds training samples per second), so the library never imports them.
"""

from __future__ import annotations

import json
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


def warm_up() -> None:
    """Load (or compile, the first time) the compiled loops of the engine and the placement rules: a small run on
    the ``tiny`` preset, so that numba's start-up cost is not counted in a replay's time (it is reported apart)."""
    from gpusched_envs.policies import make_policy
    from gpusched_envs.sim import SimConfig, Simulator, load_cluster
    from gpusched_envs.workloads import load_workload

    workload = load_workload("synthetic:jobs=20,load=1.0,gpus=16,max_gpus=8", seed=0)
    Simulator(load_cluster("tiny"), workload, SimConfig(seed=0)).run(make_policy("fifo", "closest"))


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
        "target": ">= 100,000",
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
    from gpusched_envs.envs import CURRENT_IDS

    ids = sorted(k for k in CURRENT_IDS if k in gym.registry)  # the refused -v0 ids are left out
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
    """multi_scheduler_v1 joint steps per second (all agents act) with random valid actions, 4 and 16 agents."""
    from gpusched_envs.multi_agent import multi_scheduler_v1

    out = []
    for k in (4, 16):
        env = multi_scheduler_v1.parallel_env(num_agents=k, cluster="hetero64", num_jobs=400)
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
                "name": f"multi_scheduler_v1 joint steps ({k} agents, graph, hetero64)",
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


# ---------------------------------------------------------------------------------------------------------- A/B
# ``python -m gpusched_envs.bench --against REV``: each figure measured on the code of commit REV (extracted with
# ``git archive`` into a temporary folder) and on the working tree, in alternating subprocesses of one run, printed
# as new / old. The load average is sampled beside each figure (a shared machine slows both sides).

_PREEMPTIVE_JOBSELECT = {
    "id": "gpusched/JobSelect-v1",
    "obs_mode": "graph",
    "cluster": "topdrl",
    "num_jobs": 300,
    "window": 32,
    "information": "non-clairvoyant",
    "preemption": True,
    "decision_interval": 900.0,
}
AB_FIGURES = {
    # name: (kind, arguments)
    "JobSelect flat": ("env", {"id": "gpusched/JobSelect-v1", "obs_mode": "flat", "cluster": "hetero64"}),
    "JobSelect graph": ("env", {"id": "gpusched/JobSelect-v1", "obs_mode": "graph", "cluster": "hetero64"}),
    # the preemptive, non-clairvoyant JobSelect of the research configs (15-minute rounds), without and with their
    # min_run and runtime-history features (ppo_jobselect_gnn_nc_wide)
    "JobSelect graph, preemptive with rounds": ("env", _PREEMPTIVE_JOBSELECT),
    "JobSelect graph, research config": (
        "env",
        {**_PREEMPTIVE_JOBSELECT, "min_run": 900.0, "history_features": True},
    ),
    "WorkerPlacement flat": (
        "env",
        {"id": "gpusched/WorkerPlacement-v1", "obs_mode": "flat", "cluster": "hetero64"},
    ),
    "WorkerPlacement graph": (
        "env",
        {"id": "gpusched/WorkerPlacement-v1", "obs_mode": "graph", "cluster": "hetero64"},
    ),
    "DAGSchedule flat": ("env", {"id": "gpusched/DAGSchedule-v1", "obs_mode": "flat"}),
    "DAGSchedule graph": ("env", {"id": "gpusched/DAGSchedule-v1", "obs_mode": "graph"}),
    "DelayTuning flat": ("env", {"id": "gpusched/DelayTuning-v1", "obs_mode": "flat", "cluster": "hetero64"}),
    "DelayTuning graph": (
        "env",
        {"id": "gpusched/DelayTuning-v1", "obs_mode": "graph", "cluster": "hetero64"},
    ),
    "multi_scheduler_v1 graph (4 agents)": (
        "multi",
        {"num_agents": 4, "cluster": "hetero64", "num_jobs": 400},
    ),
    # the vector env against the pinned code's single env (which is all that code has): env steps/s of all copies
    # together in one process, resets included on both sides
    "JobSelect flat, vector env N=64": (
        "vector",
        {"id": "gpusched/JobSelect-v1", "obs_mode": "flat", "cluster": "hetero64", "num_envs": 64},
    ),
    "JobSelect flat, vector env N=256": (
        "vector",
        {"id": "gpusched/JobSelect-v1", "obs_mode": "flat", "cluster": "hetero64", "num_envs": 256},
    ),
    "Philly replay, 5,000 jobs": ("replay", {"spec": "philly:jobs=5000"}),
    "Philly replay, full": ("replay", {"spec": "philly"}),
    # a preemptive heuristic (priority queues, preemptions, restart delays): no plain reference replayer for it
    "Philly replay, 5,000 jobs, Tiresias": ("replay", {"spec": "philly:jobs=5000", "policy": "tiresias"}),
    # training, samples per CPU-second, the shipped hyperparameters of agents.bench on both sides: the pinned code
    # with 8 envs in SB3's DummyVecEnv (PPO) or a list of 8 envs (DDQN), the new code with its vector env
    "PPO-GNN rollout collection": ("train", {"algorithm": "ppo", "part": "rollout", "num_envs": 8}),
    "PPO-GNN rollout collection, vector env N=256": (
        "train",
        {"algorithm": "ppo", "part": "rollout", "num_envs": 8, "num_envs_vector": 256},
    ),
    "PPO-GNN end to end": ("train", {"algorithm": "ppo", "part": "all", "num_envs": 8}),
    "DDQN-GNN end to end": ("train", {"algorithm": "ddqn", "part": "all", "num_envs": 8}),
    # `make run`'s grid: the quick suite, 2 workers, no cache; the agents both codes rank by default (heuristics and
    # shipped checkpoints, by name), so that both sides run the same cells
    "Quick leaderboard (make run)": ("leaderboard", {"suite": "quick", "workers": 2}),
}

# figures that need the agents extra (torch, stable-baselines3) on both sides
_AB_NEEDS_AGENTS = {"train", "leaderboard", "agents"}

# what of the pinned commit the figures run: the library, the upper packages, the reference replayer
_AB_PATHS = (
    "gpusched_envs",
    "agents",
    "train",
    "evaluate",
    "checkpoints",
    "tests/sim/test_crossvalidation.py",
)

_AB_RUNNER = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
kind, args, steps = sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
import gpusched_envs
assert gpusched_envs.__file__.startswith(sys.argv[1]), gpusched_envs.__file__
u = np.random.default_rng(0).random(steps + 1)  # the masked random actions' draws, made before timing
def pick(mask, i):
    ok = np.flatnonzero(mask)
    return int(ok[int(u[i] * len(ok))])
def env_id(name):
    import gymnasium as gym
    import gpusched_envs.envs
    # code pinned before the -v1 ids registers the same envs as -v0 (the step costs the same work)
    return name if name in gym.registry and gym.registry[name].entry_point else name.replace("-v1", "-v0")
def make(args):
    import gymnasium as gym
    return gym.make(env_id(args["id"]), **{k: v for k, v in args.items() if k not in ("id", "num_envs")})
if kind == "env":
    env = make(args)
    obs, _ = env.reset(seed=0)
    spent = 0.0
    for i in range(steps):
        a = pick(obs["action_mask"], i)
        t0 = time.perf_counter()
        obs, _, term, trunc, _ = env.step(a)
        spent += time.perf_counter() - t0
        if term or trunc:
            obs, _ = env.reset()
    out = {"value": steps / spent, "unit": "steps/s"}
elif kind == "vector":
    import gymnasium as gym
    n = args["num_envs"]
    name = env_id(args["id"])
    if gym.registry[name].vector_entry_point is None:  # no vector env in this code: its single env
        env = make(args)
        obs, _ = env.reset(seed=0)
        spent = 0.0
        for i in range(steps):
            a = pick(obs["action_mask"], i)
            t0 = time.perf_counter()
            obs, _, term, trunc, _ = env.step(a)
            if term or trunc:  # timed too: the vector env's steps include its autoresets
                obs, _ = env.reset()
            spent += time.perf_counter() - t0
        out = {"value": steps / spent, "unit": "env steps/s, all copies", "num_envs": 1}
    else:
        kw = {k: v for k, v in args.items() if k not in ("id", "num_envs")}
        venv = gym.make_vec(name, num_envs=n, vectorization_mode="vector_entry_point", **kw)
        venv.reset(seed=0)
        rounds = max(1, steps // n) * 4
        draws = np.random.default_rng(0).random((rounds, n))
        spent = 0.0
        for i in range(rounds):
            masks = venv.call("action_masks") if not hasattr(venv, "action_masks") else venv.action_masks()
            masks = np.asarray(masks, dtype=bool)
            counts = masks.sum(axis=1)
            k = (draws[i] * counts).astype(np.int64)  # the k-th valid action of each env, drawn before timing
            acts = np.argmax(np.cumsum(masks, axis=1) > k[:, None], axis=1)
            t0 = time.perf_counter()
            venv.step(acts)
            spent += time.perf_counter() - t0
        out = {"value": rounds * n / spent, "unit": "env steps/s, all copies", "num_envs": n}
elif kind == "multi":
    try:
        from gpusched_envs.multi_agent import multi_scheduler_v1 as multi
    except ImportError:
        from gpusched_envs.multi_agent import multi_scheduler_v0 as multi
    env = multi.parallel_env(**args)
    obs, _ = env.reset(seed=0)
    spent = 0.0
    for i in range(steps):
        actions = {a: pick(o["action_mask"], (i * 7 + k) % len(u)) for k, (a, o) in enumerate(sorted(obs.items()))}
        t0 = time.perf_counter()
        obs, _, _, _, _ = env.step(actions)
        spent += time.perf_counter() - t0
        if not env.agents:
            obs, _ = env.reset()
    out = {"value": steps / spent, "unit": "joint steps/s"}
elif kind == "train":
    import torch
    torch.set_num_threads(1)
    from gpusched_lab.agents import bench as ab
    from gpusched_lab.agents import common as ac
    assert ab.__file__.startswith(sys.argv[1]), ab.__file__
    kw = dict(ab.DEFAULT_ENV_KWARGS)
    eid = env_id(ab.DEFAULT_ENV.replace("-v0", "-v1"))
    if args["part"] == "rollout":
        from gpusched_lab.agents.algos.ppo import PPOArgs, make_ppo
        from gpusched_lab.agents.nets.networks import config_for_env
        n = args["num_envs"]
        if hasattr(ac, "make_vec_env"):  # the vector env, as training uses it (as many copies as the figure says)
            n = args.get("num_envs_vector", n)
            venv = ac.make_vec_env(eid, kw, "graph", n)
        else:
            from stable_baselines3.common.vec_env import DummyVecEnv
            venv = DummyVecEnv([lambda: ac.make_env(eid, kw, "graph") for _ in range(n)])
        pargs = PPOArgs(encoder="gnn", device="cpu", seed=0, n_steps=256, batch_size=64, n_epochs=4)
        env1 = ac.make_env(eid, kw, "graph")
        model = make_ppo(venv, config_for_env(env1, "gnn", pargs.hidden, pargs.layers), pargs)
        total, callback = model._setup_learn(10**9, None)
        callback.on_training_start(locals(), globals())
        per_env = min(model.n_steps, max(8, steps // n))
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=8)  # warm
        c0 = time.process_time()
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=per_env)
        cpu = time.process_time() - c0
        out = {"value": per_env * n / cpu, "unit": "samples/CPU-s", "num_envs": n}
    else:
        rec = ab.training_samples_per_second(args["algorithm"], "gnn", steps=steps, env_id=eid,
                                             num_envs=args["num_envs"])
        out = {"value": rec["detail"]["samples_per_cpu_second"], "unit": "samples/CPU-s",
               "num_envs": args["num_envs"], "samples_per_s": rec["value"]}
elif kind == "agents":  # the agents this code ranks by default, by name (checkpoints by folder name)
    import os.path
    from gpusched_lab.evaluate.agents import expand_agent_specs
    names = [os.path.basename(p.rstrip("/")) if os.sep in p else p for p in expand_agent_specs("all")]
    out = {"value": 0.0, "unit": "", "agents": sorted(names)}
elif kind == "leaderboard":
    import os.path
    import tempfile
    from gpusched_lab.evaluate.agents import expand_agent_specs
    from gpusched_envs.cli import main
    by_name = {os.path.basename(p.rstrip("/")) if os.sep in p else p: p for p in expand_agent_specs("all")}
    agents = [by_name[a] for a in args["agents"]] if args.get("agents") else None
    with tempfile.TemporaryDirectory() as out_dir:
        argv = ["leaderboard", "--suite", args["suite"], "--workers", str(args["workers"]), "--out", out_dir]
        argv += ["--agents", ",".join(agents)] if agents else []
        t0 = time.perf_counter()
        try:
            main(argv)
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
        out = {"value": time.perf_counter() - t0, "unit": "s", "agents": len(agents or [])}
        out["cells"] = sum(1 for _ in os.popen(f"find {out_dir}/cells -name 'seed-*.json'"))
else:
    from gpusched_envs.policies import make_policy
    from gpusched_envs.sim import SimConfig, Simulator, load_cluster
    from gpusched_envs.workloads import load_workload
    w, c = load_workload(args["spec"], seed=0), load_cluster("philly")
    t0 = time.perf_counter()
    try:  # load the compiled loops first (numba's cache), where the code has them: reported apart
        from gpusched_envs.bench import warm_up
    except ImportError:
        warm_up = None
    if warm_up is not None:
        warm_up()
    t1 = time.perf_counter()
    m = Simulator(c, w, SimConfig(seed=0)).run(make_policy(args.get("policy", "fifo"), "closest"))
    out = {"value": time.perf_counter() - t1, "unit": "s", "avg_jct": m["avg_jct"], "load_compiled_s": t1 - t0}
print(json.dumps(out))
"""

_REFERENCE_RUNNER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tests.sim.test_crossvalidation import reference_replay
from gpusched_envs.workloads import load_workload, philly_vc_nodes
w = load_workload(sys.argv[2], seed=0)
vcs = [w.vc_names[v] for v in w.vc]
args = (w.submit_time, w.duration, w.num_gpus.tolist(), vcs, philly_vc_nodes())
t0 = time.perf_counter()
reference_replay(*args)
print(json.dumps({"value": time.perf_counter() - t0, "unit": "s"}))
"""


def _run_json(code: str, *argv: str) -> dict:
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_run(runs: list[dict]) -> dict:
    """The median of one side's timed processes: the middle run's record, or for an even count the lower middle
    run's record with ``value`` the mean of the two middle values. ``values`` keeps every run's value."""
    ordered = sorted(runs, key=lambda r: r["value"])
    mid = len(ordered) // 2
    out = dict(ordered[mid] if len(ordered) % 2 else ordered[mid - 1])
    if len(ordered) % 2 == 0:
        out["value"] = (ordered[mid - 1]["value"] + ordered[mid]["value"]) / 2
    out["values"] = [r["value"] for r in runs]
    return out


def _warm_steps(kind: str, n: int) -> int:
    """The size of a figure's untimed warm-up process: enough to call every compiled kernel the figure calls."""
    if kind in ("env", "multi", "vector"):
        return min(n, 200)
    return (
        n  # a training figure, a replay or the leaderboard: the same work (their compiles sit on first calls)
    )


def compare_with_commit(
    rev: str,
    quick: bool = False,
    figures: list[str] | None = None,
    repeats: int = 3,
    say=print,
    warm: bool = True,
) -> dict:
    """Each figure of :data:`AB_FIGURES` on commit ``rev`` and on the working tree, in one run (the median of
    ``repeats`` fresh processes per side, taking turns); replays also against the plain reference replayer of
    ``tests/sim/test_crossvalidation.py`` on the same jobs. The load average before and after each figure is kept.

    With ``warm`` (the default) each side first runs the figure once untimed, so that neither side's timed runs
    include numba compiling into an empty cache (the pinned tree is extracted fresh, so its cache starts empty)."""
    import subprocess
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent.parent  # the folder holding gpusched_envs (the repository root)
    top = subprocess.run(
        ["git", "-C", str(here), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
    ).stdout.strip()
    names = figures or list(AB_FIGURES)
    if any(AB_FIGURES[n][0] in _AB_NEEDS_AGENTS for n in names):
        try:
            import stable_baselines3  # noqa: F401
            import torch  # noqa: F401
        except ImportError:
            say("training figures skipped: they need the agents extra (pip install 'gpusched-envs[agents]')")
            names = [n for n in names if AB_FIGURES[n][0] not in _AB_NEEDS_AGENTS]
    if quick:
        names = [n for n in names if n not in ("Philly replay, full", "Quick leaderboard (make run)")]
    steps = 1000 if quick else 5000
    rows = []
    known = subprocess.run(
        ["git", "-C", top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if known.returncode != 0:
        raise ValueError(f"--against {rev!r}: no such commit in {top}")
    with tempfile.TemporaryDirectory(prefix="gpusched-ab-") as old:
        archive = subprocess.run(
            ["git", "-C", top, "archive", rev, *_AB_PATHS],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
        lab = Path(old) / "gpusched_lab"  # the upper packages under their import root, as the build maps them
        lab.mkdir()
        for part in ("agents", "train", "evaluate"):
            if (Path(old) / part).is_dir():  # a link: the packages still find the checkpoints beside them
                (lab / part).symlink_to(Path("..") / part, target_is_directory=True)
        (Path(old) / "tests" / "__init__.py").touch()
        (Path(old) / "tests" / "sim" / "__init__.py").touch()
        for name in names:
            kind, args = AB_FIGURES[name]
            if kind == "leaderboard":  # the same grid on both sides: the agents both codes rank by default
                both = [
                    set(_run_json(_AB_RUNNER, tree, "agents", "{}", "1")["agents"])
                    for tree in (old, str(here))
                ]
                args = {**args, "agents": sorted(both[0] & both[1])}
            n = steps // 5 if kind == "multi" else (max(512, steps // 2) if kind == "train" else steps)
            runs: dict[str, list[dict]] = {"old": [], "new": []}
            try:
                if warm:  # untimed, once per side: numba's cache is filled before any timed process
                    for tree in (old, str(here)):
                        _run_json(_AB_RUNNER, tree, kind, json.dumps(args), str(_warm_steps(kind, n)))
                load = [round(x, 2) for x in os.getloadavg()]
                for _ in range(repeats):  # taking turns, so that a burst of load hits both sides
                    runs["old"].append(_run_json(_AB_RUNNER, old, kind, json.dumps(args), str(n)))
                    runs["new"].append(_run_json(_AB_RUNNER, str(here), kind, json.dumps(args), str(n)))
            except RuntimeError as exc:  # one figure that cannot run on one side does not stop the others
                say(f"{name}: not measured ({str(exc).strip().splitlines()[-1]})")
                rows.append({"name": name, "error": str(exc)[-2000:]})
                continue
            a, b = (median_run(runs[k]) for k in ("old", "new"))
            load = [load, [round(x, 2) for x in os.getloadavg()]]
            row = {
                "name": name,
                "old": a,
                "new": b,
                "load_average": load,
                "repeats": repeats,
                "warm_up": warm,
            }
            if kind == "leaderboard":
                row["ratio"] = a["value"] / b["value"]  # shorter by
                say(
                    f"{name}: old {a['value']:.0f} s, new {b['value']:.0f} s, {row['ratio']:.2f}x shorter (load {load})"
                )
            elif kind == "replay" and "policy" in args:
                row["ratio"] = a["value"] / b["value"]  # speed-up
                say(
                    f"{name}: old {a['value']:.2f} s, new {b['value']:.2f} s, speed-up {row['ratio']:.2f}x "
                    f"(load {load})"
                )
            elif kind == "replay":
                ref = _run_json(_REFERENCE_RUNNER, old, args["spec"])
                row["reference"] = ref
                row["ratio"] = a["value"] / b["value"]  # speed-up
                row["vs_reference"] = b["value"] / ref["value"]
                say(
                    f"{name}: old {a['value']:.2f} s, new {b['value']:.2f} s, speed-up {row['ratio']:.2f}x; "
                    f"reference replayer {ref['value']:.2f} s, new / reference {row['vs_reference']:.2f}x; "
                    f"loading the compiled loops before: old {a.get('load_compiled_s', 0.0):.2f} s, "
                    f"new {b.get('load_compiled_s', 0.0):.2f} s (load {load})"
                )
            else:
                row["ratio"] = b["value"] / a["value"]
                say(
                    f"{name}: old {a['value']:,.0f} {a['unit']}, new {b['value']:,.0f} {b['unit']}, "
                    f"speed-up {row['ratio']:.2f}x (load {load})"
                )
            rows.append(row)
    return {"schema": "gpusched.bench-ab/1", "against": rev, "machine": _machine(), "figures": rows}


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m gpusched_envs.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--against", metavar="REV", help="compare with the code of this git commit, same run")
    parser.add_argument("--quick", action="store_true", help="fewer steps, no full Philly replay")
    parser.add_argument("--figure", action="append", choices=list(AB_FIGURES), help="only these figures")
    parser.add_argument("--repeats", type=int, default=3, help="processes per side and figure (median)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    ns = parser.parse_args(argv)
    if ns.against:
        out = compare_with_commit(ns.against, ns.quick, ns.figure, ns.repeats)
    else:
        out = run_benchmarks(ns.quick)
        for r in out["benchmarks"]:
            print(f"{r['name']}: {r['value']:,.2f} {r['unit']}")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
