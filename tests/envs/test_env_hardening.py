"""Env side of bad input: bad arguments and malformed actions get a ValueError / InvalidActionError naming them, a
finished episode refuses further steps, TimeLimit truncation fills info["metrics"], the flat layout is named column
by column, and the spaces have finite bounds (Gymnasium's checker is silent)."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs.envs  # noqa: F401  (registers the ids)
from gpusched_envs.envs.base import EpisodeEndedError, InvalidActionError
from gpusched_envs.envs.job_select import JobSelectEnv
from tests.toy import make_workload, toy_cluster

CLUSTER_IDS = ["gpusched/JobSelect-v1", "gpusched/WorkerPlacement-v1", "gpusched/DelayTuning-v1"]


def first_valid(obs) -> int:
    return int(np.flatnonzero(obs["action_mask"])[0])


def run_to_end(env, obs):
    for _ in range(10_000):
        obs, _, terminated, truncated, info = env.step(first_valid(obs))
        if terminated:
            return obs, info
    raise AssertionError("episode did not end")


@pytest.mark.parametrize("env_id", CLUSTER_IDS)
def test_step_after_termination_raises_and_step_before_reset_too(env_id):
    env = gym.make(env_id, cluster="tiny", num_jobs=6).unwrapped
    with pytest.raises(gym.error.ResetNeeded, match="reset"):
        env.step(0)
    obs, _ = env.reset(seed=0)
    obs, info = run_to_end(env, obs)
    assert info["metrics"]["jobs"] == 6
    with pytest.raises(EpisodeEndedError, match="call reset"):
        env.step(first_valid(obs))
    obs, _ = env.reset(seed=1)  # and a reset starts over
    env.step(first_valid(obs))


@pytest.mark.parametrize("env_id", CLUSTER_IDS)
def test_time_limit_truncation_fills_metrics(env_id):
    extra = {"interval": 60.0} if env_id == "gpusched/DelayTuning-v1" else {}
    env = gym.make(env_id, cluster="tiny", num_jobs=30, load=2.0, max_episode_steps=3, **extra)
    obs, _ = env.reset(seed=0)
    for i in range(3):
        obs, _, terminated, truncated, info = env.step(first_valid(obs))
        assert info["episode_done"] == (i == 2)
        assert (info["metrics"]["jobs"] == 0.0) == (i < 2)  # 0.0 placeholders until the episode ends
    assert truncated and not terminated
    m = info["metrics"]
    assert m == env.unwrapped.sim.metrics() and m["jobs"] < 30  # the jobs finished so far
    assert m == env.unwrapped.episode_metrics()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"window": "5"}, "window"),
        ({"window": 2.0}, "window"),
        ({"window": True}, "window"),
        ({"num_jobs": 2.5}, "num_jobs"),
        ({"load": float("nan")}, "load"),
        ({"load": "high"}, "load"),
        ({"time_scale": float("nan")}, "time_scale"),
        ({"time_scale": float("inf")}, "time_scale"),
        ({"time_scale": 0}, "time_scale"),
        ({"invalid_penalty": float("nan")}, "invalid_penalty"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_steps": "10"}, "max_steps"),
        ({"interference": "no"}, "interference"),
        ({"workload_seed": -1}, "workload_seed"),
        ({"information": "oracle"}, "information"),
        ({"speed_model": "fast"}, "speed_model"),
    ],
)
@pytest.mark.parametrize("env_id", CLUSTER_IDS)
def test_bad_arguments_name_themselves(env_id, kwargs, name):
    if env_id == "gpusched/WorkerPlacement-v1" and name in ("interference", "speed_model"):
        kwargs, name = {"interference_scale": float("nan")}, "interference_scale"
    if env_id == "gpusched/DelayTuning-v1" and name == "speed_model":
        kwargs, name = {"min_run": float("inf")}, "min_run"
    with pytest.raises(ValueError, match=name):
        gym.make(env_id, cluster="tiny", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"preemption": "yes"}, "preemption"),
        ({"preemption": True, "preempt_window": 0}, "preempt_window"),
        ({"preempt_window": 4}, "preempt_window"),
    ],
)
def test_bad_job_select_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        JobSelectEnv("tiny", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"interval": float("nan")}, "interval"), ({"timer_levels": (0.0, float("nan"))}, "timer_levels")],
)
def test_bad_delay_tuning_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        gym.make("gpusched/DelayTuning-v1", cluster="tiny", **kwargs)


@pytest.mark.parametrize(
    "action", [float("nan"), float("inf"), 0.7, -1, "n", np.array([0, 1]), np.zeros((2, 2)), "1", None, True]
)
@pytest.mark.parametrize("env_id", CLUSTER_IDS)
def test_malformed_actions_raise_naming_the_action(env_id, action):
    env = gym.make(env_id, cluster="tiny", num_jobs=6).unwrapped  # invalid_action="penalize": still raises
    env.reset(seed=0)
    if isinstance(action, str) and action == "n":
        action = env.action_space.n  # one past the last
    with pytest.raises(InvalidActionError, match="action"):
        env.step(action)


@pytest.mark.parametrize("action", [np.int64(0), np.array(0), np.array([0]), 0.0, np.float32(0.0)])
def test_well_formed_actions_of_other_types_are_accepted(action):
    env = JobSelectEnv("tiny", num_jobs=6)
    env.reset(seed=0)
    assert env.action_masks()[0]
    env.step(action)
    assert len(env.sim.running) == 1


def test_flat_feature_names_name_every_column():
    env = JobSelectEnv(
        toy_cluster(),
        make_workload([(0, 100, 2), (0, 200, 4), (10, 50, 12)]),
        window=2,
        time_scale=1.0,
        interference=False,
        obs_mode="flat",
    )
    names = env.flat_feature_names()
    obs, _ = env.reset(seed=0)
    assert len(names) == len(set(names)) == obs["obs"].shape[0]
    obs, *_ = env.step(0)  # job 0 on GPUs 0, 1
    flat = dict(zip(names, obs["obs"].tolist(), strict=True))
    assert flat["gpu0.busy"] == flat["gpu1.busy"] == 1.0 and flat["gpu2.busy"] == 0.0
    assert flat["gpu0.time_in_use"] == 0.0  # started now
    assert flat["server0.free"] == pytest.approx(0.5)
    assert flat["cluster.free"] == pytest.approx(14 / 16)
    assert flat["job0.gpus"] == pytest.approx(4 / 16) and flat["job0.present"] == 1.0
    assert flat["job1.present"] == 0.0
    assert flat["context.arrival_rate"] == pytest.approx(math.log1p(2))
    pre = JobSelectEnv("tiny", preemption=True, window=2, preempt_window=3, obs_mode="flat")
    pnames = pre.flat_feature_names()
    assert "running2.speed" in pnames and "job1.running" in pnames and "running3.speed" not in pnames
    assert len(pnames) == pre.observation_space["obs"].shape[0]


@pytest.mark.parametrize("env_id", CLUSTER_IDS)
@pytest.mark.parametrize("mode", ["graph", "image", "flat"])
def test_finite_bounds_and_a_silent_gymnasium_checker(env_id, mode):
    from gymnasium.utils.env_checker import check_env

    if env_id == "gpusched/DelayTuning-v1" and mode == "image":
        pytest.skip("image observations are not offered by DelayTuning-v1")
    env = gym.make(env_id, cluster="tiny", num_jobs=10, obs_mode=mode).unwrapped
    for space in env.observation_space.spaces.values():
        assert np.isfinite(space.low).all() and np.isfinite(space.high).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, skip_render_check=True)


def test_fractional_jobs_fit_by_their_share():
    """A half-GPU job fits on a GPU another half-GPU job holds, although no GPU is wholly free."""
    rows = [(0, 100, 1, 0, 500), (0, 100, 15, 0, 1000), (0, 100, 1, 0, 500)]
    env = JobSelectEnv(toy_cluster(), make_workload(rows), window=3, interference=False)
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(0)  # the half-GPU job
    obs, *_ = env.step(0)  # the 15-GPU job: no GPU is wholly free now
    assert env.sim.free_gpus() == 0
    assert obs["action_mask"].tolist() == [1, 0, 0, 1]  # the second half-GPU job still fits
    gpu = int(env.sim.job_gpus[0][0])
    assert env.sim.free_mask(2).tolist() == [g == gpu for g in range(16)]
    env.step(0)
    assert env.sim.first_start[2] == 0.0  # started at once, sharing the first one's GPU


def test_delay_tuning_action_space_is_capped_before_it_is_built():
    """timer_levels ** classes actions: 10 levels and 9 thresholds would be 10**10 actions; refused, naming both
    arguments and how to raise the cap."""
    import gymnasium as gym

    with pytest.raises(ValueError, match=r"10 timer_levels \*\* 10 classes.*GPUSCHED_MAX_ACTION_SPACE"):
        gym.make(
            "gpusched/DelayTuning-v1",
            cluster="tiny",
            timer_levels=tuple(float(i) for i in range(10)),
            sensitivity_thresholds=tuple(1.0 + i / 10 for i in range(9)),
        )
    with pytest.raises(ValueError, match="sensitivity_thresholds must be a list of finite numbers"):
        gym.make("gpusched/DelayTuning-v1", cluster="tiny", sensitivity_thresholds=(1.2, float("nan")))


def test_multi_agent_count_is_capped():
    from gpusched_envs.multi_agent import multi_scheduler_v1

    with pytest.raises(ValueError, match=r"num_agents: 100,000 agents, more than the limit of 256"):
        multi_scheduler_v1.parallel_env(num_agents=100_000, cluster="tiny")
    with pytest.raises(ValueError, match="num_agents must be an integer >= 1"):
        multi_scheduler_v1.parallel_env(num_agents=2.5, cluster="tiny")
