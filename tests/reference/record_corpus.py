"""Reference corpus: exact results of the simulator and the envs, recorded once and compared by
``tests/reference/test_reference_corpus.py`` so that a change of implementation can be shown to change no result.

Parts (each one file ``corpus_<part>.json`` beside this script; re-record one with one command)::

    python tests/reference/record_corpus.py metrics   # every preset x every heuristic policy x seeds: run metrics
    python tests/reference/record_corpus.py replays   # full Philly replay, the quick 5,000-job replay, the
                                                      # philly-vc cross-check (Helios VC sizes) and its reference
    python tests/reference/record_corpus.py envs      # sha256 of masked random-action trajectories of every env
    python tests/reference/record_corpus.py           # all three

Floats are stored as ``repr`` (full precision); trajectories as the sha256 of a canonical byte stream of every
observation, reward, termination flag, mask and info dict.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PARTS = ("metrics", "replays", "envs")
SEEDS = (0, 1, 2)
JOBS = 60  # synthetic jobs per run: small, sized to the cluster by its GPU count
ENV_STEPS = 300
# env kwargs of the history-features cases (non-clairvoyant, preemptive, scheduling rounds, as the research configs)
HISTORY_KWARGS = {
    "history_features": True,
    "information": "non-clairvoyant",
    "preemption": True,
    "decision_interval": 900.0,
    "min_run": 900.0,
    "window": 32,
}
ENV_SEEDS = (0, 1)


def corpus_path(part: str) -> Path:
    return HERE / f"corpus_{part}.json"


# ---------------------------------------------------------------------------------------------------------- metrics
def metric_cases() -> list[dict]:
    """Every (cluster preset, policy, placement, seed, config) run of the metrics part."""
    from gpusched_envs.policies import PLACEMENTS, POLICIES
    from gpusched_envs.sim import list_presets

    cases = []
    for cluster in list_presets():
        for seed in SEEDS:
            for policy in POLICIES:
                cases.append({"cluster": cluster, "policy": policy, "placement": None, "seed": seed})
            for placement in PLACEMENTS:  # every placement rule under a strict and a backfilling order
                for policy in ("fifo", "tiresias"):
                    cases.append({"cluster": cluster, "policy": policy, "placement": placement, "seed": seed})
    # engine settings off the default path, on a mixed cluster
    for config in (
        {"speed_model": "duration"},
        {"trace_speed": "ideal"},
        {"interference": False},
        {"restart_delay": 0.0},
        {"restart_delay": 120.0},
    ):
        for policy in ("fifo", "srtf", "tiresias", "gandiva"):
            cases.append(
                {"cluster": "hetero64", "policy": policy, "placement": None, "seed": 0, "config": config}
            )
    # fractional GPUs (GPU sharing): the openb pod list on its own cluster
    for policy in ("fifo", "sjf", "tiresias", "gandiva"):
        for placement in (None, "pack", "spread"):
            cases.append(
                {
                    "cluster": "openb",
                    "policy": policy,
                    "placement": placement,
                    "seed": 0,
                    "workload": "openb:jobs=300,load=4.0,gpus=64",
                }
            )
    return cases


def case_key(case: dict) -> str:
    return json.dumps(case, sort_keys=True)


def _workload_for(case: dict):
    from gpusched_envs.sim import load_cluster
    from gpusched_envs.workloads import load_workload

    cluster = load_cluster(case["cluster"])
    if "workload" in case:
        spec = case["workload"]
    elif cluster.pool_names:  # pools take jobs of their VCs only: a window of the trace they come from
        spec = f"philly:start=2017-10-01,jobs={2 * JOBS}"
    else:
        cap = min(int(cluster.num_gpus), 64)
        spec = f"synthetic:jobs={JOBS},load=1.3,gpus={min(cluster.num_gpus, 256)},max_gpus={cap}"
    return cluster, load_workload(spec, seed=case["seed"])


def run_metric_case(case: dict) -> dict:
    from gpusched_envs.policies import make_policy
    from gpusched_envs.sim import SimConfig, Simulator

    cluster, workload = _workload_for(case)
    config = SimConfig(seed=case["seed"], oversize="drop", **case.get("config", {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = Simulator(cluster, workload, config)
        metrics = sim.run(make_policy(case["policy"], case["placement"]))
    metrics["events"] = sim.events_processed
    metrics["decisions"] = sim.decisions
    metrics["finish_time_sha256"] = hashlib.sha256(
        np.ascontiguousarray(sim.finish_time).tobytes()
    ).hexdigest()
    return metrics


def record_metrics() -> dict:
    return {case_key(c): encode_values(run_metric_case(c)) for c in metric_cases()}


# ---------------------------------------------------------------------------------------------------------- replays
def replay_cases() -> list[str]:
    return ["philly_full", "philly_quick", "philly_vc_crosscheck"]


def run_replay(name: str) -> dict:
    from gpusched_envs.policies import make_policy
    from gpusched_envs.sim import SimConfig, Simulator, load_cluster
    from gpusched_envs.workloads import load_workload

    if name in ("philly_full", "philly_quick"):  # what `gpusched bench` replays
        spec = "philly" if name == "philly_full" else "philly:jobs=5000"
        sim = Simulator(load_cluster("philly"), load_workload(spec, seed=0), SimConfig(seed=0))
        out = sim.run(make_policy("fifo", "closest"))
    else:  # tests/sim/test_crossvalidation.py's setting: the VCs of the Helios simulator's philly_vc_nodes.csv
        from gpusched_envs.workloads import philly_vc_nodes

        sys.path.insert(0, str(HERE.parent.parent))
        from tests.sim.test_crossvalidation import reference_replay

        workload = load_workload("philly:start=2017-10-01,end=2017-11-30")
        vcs = [workload.vc_names[v] for v in workload.vc]
        finish = reference_replay(
            workload.submit_time, workload.duration, workload.num_gpus.tolist(), vcs, philly_vc_nodes()
        )
        kept = ~np.isnan(finish)
        config = SimConfig(speed_model="duration", oversize="drop", seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sim = Simulator(load_cluster("philly-vc"), workload, config)
        out = sim.run(make_policy("fifo", "consolidate"))
        out["reference_avg_jct"] = float(np.mean(finish[kept] - workload.submit_time[kept]))
        out["reference_makespan"] = float(np.max(finish[kept]) - workload.submit_time[kept].min())
    out["events"] = sim.events_processed
    out["decisions"] = sim.decisions
    out["finish_time_sha256"] = hashlib.sha256(np.ascontiguousarray(sim.finish_time).tobytes()).hexdigest()
    return out


def record_replays() -> dict:
    return {name: encode_values(run_replay(name)) for name in replay_cases()}


# ---------------------------------------------------------------------------------------------------------- envs
def env_cases() -> list[dict]:
    """Every single-agent env id in every obs mode it offers, and multi_scheduler_v1 (graph and flat)."""
    import gymnasium as gym

    import gpusched_envs.envs  # noqa: F401  (registers the ids)
    from gpusched_envs.envs import CURRENT_IDS

    cases = []
    for env_id in CURRENT_IDS:
        for mode in ("graph", "flat", "image"):
            try:
                gym.make(env_id, obs_mode=mode).close()
            except (TypeError, ValueError):
                continue
            for seed in ENV_SEEDS:
                cases.append({"env": env_id, "obs_mode": mode, "seed": seed})
    for mode in ("graph", "flat"):
        for seed in ENV_SEEDS:
            cases.append({"env": "multi_scheduler_v1", "obs_mode": mode, "seed": seed, "num_agents": 4})
    for mode in ("graph", "flat"):  # the opt-in runtime-history features, on the preemptive JobSelect
        for seed in ENV_SEEDS:
            cases.append(
                {"env": "gpusched/JobSelect-v1", "obs_mode": mode, "seed": seed, "kwargs": HISTORY_KWARGS}
            )
    return cases


def _feed(h, value) -> None:
    """A canonical byte stream of nested dicts / lists / arrays / scalars (types, shapes and exact bits)."""
    if isinstance(value, dict):
        h.update(b"{")
        for k in sorted(value, key=str):
            h.update(repr(str(k)).encode())
            _feed(h, value[k])
        h.update(b"}")
    elif isinstance(value, (list, tuple)):
        h.update(b"[" if isinstance(value, list) else b"(")
        for v in value:
            _feed(h, v)
        h.update(b"]")
    elif isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        h.update(f"nd{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    elif isinstance(value, (bool, np.bool_)):
        h.update(b"T" if value else b"F")
    elif isinstance(value, (int, np.integer)):
        h.update(f"i{int(value)}".encode())
    elif isinstance(value, (float, np.floating)):
        h.update(f"f{float(value).hex()}".encode())
    elif value is None:
        h.update(b"N")
    elif isinstance(value, str):
        h.update(f"s{value!r}".encode())
    else:
        h.update(f"o{type(value).__name__}{value!r}".encode())


def _mask(env, obs) -> np.ndarray:
    if isinstance(obs, dict) and "action_mask" in obs:
        return np.asarray(obs["action_mask"]).astype(bool)
    return np.asarray(env.unwrapped.action_masks()).astype(bool)


def run_env_case(case: dict) -> dict[str, str]:
    """Two hashes of one seeded masked-random-action trajectory: ``dynamics`` (actions, masks, observations,
    rewards, terminations, truncations) and ``infos`` (the info dicts), kept apart so that a deliberate change of
    the info schema is re-recorded alone while the dynamics stay pinned."""
    dyn, inf = hashlib.sha256(), hashlib.sha256()
    rng = np.random.default_rng(1000 + case["seed"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if case["env"] == "multi_scheduler_v1":
            from gpusched_envs.multi_agent import multi_scheduler_v1

            env = multi_scheduler_v1.parallel_env(num_agents=case["num_agents"], obs_mode=case["obs_mode"])
            obs, info = env.reset(seed=case["seed"])
            _feed(dyn, obs)
            _feed(inf, info)
            for _ in range(ENV_STEPS):
                actions = {
                    a: int(rng.choice(np.flatnonzero(np.asarray(obs[a]["action_mask"])))) for a in sorted(obs)
                }
                obs, rew, term, trunc, info = env.step(actions)
                _feed(dyn, (actions, obs, rew, term, trunc))
                _feed(inf, info)
                if not env.agents:
                    obs, info = env.reset()
                    _feed(dyn, obs)
                    _feed(inf, info)
        else:
            import gymnasium as gym

            import gpusched_envs.envs  # noqa: F401

            env = gym.make(case["env"], obs_mode=case["obs_mode"], **case.get("kwargs", {}))
            obs, info = env.reset(seed=case["seed"])
            _feed(dyn, obs)
            _feed(inf, info)
            for _ in range(ENV_STEPS):
                mask = _mask(env, obs)
                action = int(rng.choice(np.flatnonzero(mask)))
                obs, rew, term, trunc, info = env.step(action)
                _feed(dyn, (action, mask, obs, rew, term, trunc))
                _feed(inf, info)
                if term or trunc:
                    obs, info = env.reset()
                    _feed(dyn, obs)
                    _feed(inf, info)
        env.close()
    return {"dynamics": dyn.hexdigest(), "infos": inf.hexdigest()}


def record_envs() -> dict:
    return {case_key(c): run_env_case(c) for c in env_cases()}


# ---------------------------------------------------------------------------------------------------------- values
def encode_values(d: dict) -> dict:
    """Floats as their repr (full precision, nan and inf included); ints and strings as they are."""
    out = {}
    for k, v in d.items():
        if isinstance(v, (bool, np.bool_)):
            out[k] = bool(v)
        elif isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = repr(float(v))
        else:
            out[k] = v
    return out


def values_match(key: str, expected, actual, rel: float = 1e-9) -> bool:
    """Equal ints and strings (hashes); floats (stored as repr) equal to ``rel`` relative, nan equal to nan."""
    if key.endswith("_sha256") or not isinstance(expected, str) or not isinstance(actual, str):
        return expected == actual
    e, a = float(expected), float(actual)
    if math.isnan(e) or math.isnan(a):
        return math.isnan(e) and math.isnan(a)
    return e == a or abs(e - a) <= rel * max(abs(e), abs(a))


RECORDERS = {"metrics": record_metrics, "replays": record_replays, "envs": record_envs}


def main(argv: list[str]) -> None:
    parts = argv or list(PARTS)
    for part in parts:
        if part not in RECORDERS:
            raise SystemExit(f"unknown part {part!r}; choose from: {', '.join(PARTS)}")
    for part in parts:
        data = RECORDERS[part]()
        corpus_path(part).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{corpus_path(part).name}: {len(data)} entries")


if __name__ == "__main__":
    main(sys.argv[1:])
