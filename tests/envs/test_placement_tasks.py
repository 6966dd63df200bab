"""The MetaPlace task distribution: seeded train / held-out sets, the job-size mix, drift mode, and the iteration
times WorkerPlacement-v1 reports for the performance model."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import gpusched_envs.envs  # noqa: F401
from gpusched_envs.envs.placement_tasks import (
    HELDOUT_MODEL_MIXES,
    DriftTask,
    DriftWorkload,
    SizedTask,
    drift_tasks,
    heldout_tasks,
    train_tasks,
)
from gpusched_envs.sim.topology import load_cluster


def test_task_sets_are_fixed_by_seed_and_disjoint():
    assert train_tasks(6, seed=3) == train_tasks(6, seed=3)
    assert train_tasks(6, seed=3) != train_tasks(6, seed=4)
    held = heldout_tasks(20, seed=3)
    assert held == heldout_tasks(20, seed=3)
    assert not set(held) & set(train_tasks(64, seed=3))
    assert {t.models for t in train_tasks(64, seed=3)}.isdisjoint(HELDOUT_MODEL_MIXES)
    assert any(t.models in HELDOUT_MODEL_MIXES for t in held)  # unseen model mixes are in the held-out pool
    for t in held:
        assert 0.6 <= t.load <= 1.2 and 1.0 <= t.interference <= 2.0 and t.max_gpus in (2, 4, 8)


def test_size_mix_caps_job_sizes():
    from gpusched_envs.workloads import load_workload

    w = load_workload(SizedTask(num_jobs=200, max_gpus=2, models="bert").workload_spec(32), seed=0)
    assert w.num_gpus.max() <= 2 and set(w.model_names) == {"bert"}


def test_drift_workload_switches_model_mix_mid_episode():
    a = SizedTask(num_jobs=40, load=0.8, models="resnet50", max_gpus=2)
    b = SizedTask(num_jobs=40, load=1.1, models="bert+lm", max_gpus=8)
    w = DriftWorkload(a, b, 0.25)(load_cluster("tiny"), np.random.default_rng(0))
    assert len(w) == 40 and np.all(np.diff(w.submit_time) >= 0)
    names = np.array(w.model_names)[w.model]
    assert set(names[:10]) == {"resnet50"} and set(names[10:]) <= {"bert", "lm"}
    assert w.num_gpus[:10].max() <= 2


def test_drift_task_runs_in_the_env_and_is_seeded():
    (task,) = drift_tasks(1, seed=0, num_jobs=12, clusters=("tiny",))
    assert isinstance(task, DriftTask) and task.models != task.then.models
    env = gym.make("gpusched/WorkerPlacement-v1", cluster="tiny", num_jobs=12)
    env.unwrapped.set_task(task)

    def run():
        obs, _ = env.reset(seed=5)
        while True:
            obs, _, term, trunc, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
            if term or trunc:
                return info["metrics"]["avg_jct"], env.unwrapped.sim.workload.meta["drift_job"]

    assert run() == run()
    assert run()[1] == 6


def test_iteration_times_report_started_jobs():
    env = gym.make("gpusched/WorkerPlacement-v1", cluster="tiny", num_jobs=10)
    env.unwrapped.set_task(SizedTask(cluster="tiny", num_jobs=10, models="vgg16", max_gpus=4))
    obs, info = env.reset(seed=0)
    seen = {}
    while True:
        obs, _, term, trunc, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        jobs, secs, ideal = env.unwrapped.iteration_times()
        sim = env.unwrapped.sim
        last = dict(zip(jobs.tolist(), secs.tolist(), strict=True))  # a job noted twice: its latest time
        assert np.all(secs >= ideal * (1 - 1e-9))  # never faster than ideal
        for j, t in last.items():
            if sim.status[j] == 2:  # still running: the reported time is the simulator's current one
                assert np.isclose(t, 1.0 / sim.rate[j])
        seen.update(last)
        if term or trunc:
            break
    assert len(seen) == 10  # every job reported, at least when it started
