"""DAGSchedule-v1 and DelayTuning-v1 on hand-built instances: exact masks, rewards and schedules."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.envs.dag_schedule import GPU_FEATURES, TASK_FEATURES, DAGScheduleEnv
from gpusched_envs.envs.delay_tuning import DelayTuningEnv
from gpusched_envs.sim.dag_eval import evaluate_plan
from gpusched_envs.workloads.dag import DAG
from tests.toy import make_workload, toy_cluster

# 0 -> 2 (1 GB), 1 -> 2 (0 B); work 2, 4, 1 reference-GPU seconds
TOY_DAG = DAG(
    work=np.array([2.0, 4.0, 1.0]), edges=np.array([[0, 2], [1, 2]]), edge_bytes=np.array([1e9, 0.0])
)


def test_dag_construct_exact():
    # 2 GPUs spread over the toy cluster: GPU 0 (rack 0) and GPU 15 (rack 1), 5 GB/s between them, both speed 1
    env = DAGScheduleEnv(toy_cluster(), TOY_DAG, gpus=2, obs_mode="flat", time_scale=1.0)
    obs, info = env.reset(seed=0)
    assert env.gpu_ids.tolist() == [0, 15] and env.bandwidth[0, 1] == 5e9
    # upward ranks: task 1: 4 + 1 = 5, task 0: 2 + 1e9/5e9 + 1 = 3.2, task 2: 1 -> task 1 first
    assert env.rank.tolist() == pytest.approx([3.2, 5.0, 1.0])
    assert env.current == 1 and obs["action_mask"].tolist() == [1, 1]
    tasks = obs["obs"][: 3 * len(TASK_FEATURES)].reshape(3, -1)
    assert tasks[:, TASK_FEATURES.index("ready")].tolist() == [1, 1, 0]
    assert tasks[:, TASK_FEATURES.index("current")].tolist() == [0, 1, 0]
    gpus = obs["obs"][3 * len(TASK_FEATURES) :].reshape(2, -1)
    assert gpus[:, GPU_FEATURES.index("makespan_if_here")].tolist() == [4.0, 4.0]

    obs, reward, terminated, *_ = env.step(0)  # task 1 on GPU 0: 0 -> 4
    assert (reward, terminated, env.current) == (-4.0, False, 0)
    obs, reward, *_ = env.step(1)  # task 0 on GPU 15: 0 -> 2, makespan stays 4
    assert reward == 0.0 and env.current == 2
    obs, reward, terminated, _, info = env.step(0)  # task 2 on GPU 0: inputs at 2 + 0.2 and 4; GPU free at 4
    assert reward == -1.0 and terminated
    assert env.start.tolist() == [0.0, 0.0, 4.0] and env.finish.tolist() == [2.0, 4.0, 5.0]
    assignment, priority = env.plan()
    assert assignment.tolist() == [1, 0, 0]
    assert evaluate_plan(TOY_DAG, env.speed, env.bandwidth, assignment, priority) == 5.0
    assert info["metrics"]["makespan"] == 5.0


def test_dag_improve_rewards_are_makespan_decreases():
    env = DAGScheduleEnv("hetero64", "dag:random:n=12", gpus=6, mode="improve", obs_mode="graph")
    obs, info = env.reset(seed=4)
    start = info["makespan"]
    total = 0.0
    rng = np.random.default_rng(0)
    while True:
        before = env.makespan
        predicted = env.candidates.copy()
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, reward, terminated, truncated, info = env.step(a)
        assert env.makespan == pytest.approx(predicted[a])
        assert reward == pytest.approx((before - env.makespan) / env.time_scale)
        total += reward
        if terminated or truncated:
            break
    assert terminated and not truncated and env.steps == 12  # improve: the budget's end is a termination
    assignment, priority = env.plan()
    final = evaluate_plan(env.dag, env.speed, env.bandwidth, assignment, priority, gpu_types=env.gpu_types)
    assert final == pytest.approx(info["makespan"])
    assert total == pytest.approx((start - final) / env.time_scale)


def test_delay_timers_trade_consolidation_for_waiting():
    # four 3-GPU jobs leave one free GPU per server; B (4 GPUs) arrives at t=1 and cannot be consolidated
    rows = [(0, 100, 3)] * 4 + [(1, 50, 4)]
    b_spread = 50 * (0.1 + 1.5 * 1e9 / 5e9) / (0.1 + 1.5 * 1e9 / 100e9)  # dealt over both racks
    results = {}
    for timer in (0, 4):
        env = DelayTuningEnv(
            toy_cluster(),
            make_workload(rows),
            interval=1e4,
            time_scale=1.0,
            interference=False,
            preemption=False,
        )
        obs, _ = env.reset(seed=0)
        assert env.job_class.tolist() == [1] * 5  # sensitivities 3.2 (A) and 3.5 (B): between 1.5 and 4
        action = env.action_of([0, timer, 0])
        assert env.timers_of(action).tolist() == [0.0, env.timer_levels[timer], 0.0]
        assert obs["action_mask"].all()
        obs, reward, terminated, _, info = env.step(action)
        assert terminated
        results[timer] = (env.sim.finish_time[4], reward)
    assert results[0] == pytest.approx((1 + b_spread, -(400 + b_spread)))
    assert results[4] == pytest.approx((150.0, -(400 + 149)))
