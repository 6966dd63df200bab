"""Invalid actions never crash or hang an episode: an invalid action is a no-op with ``-invalid_penalty`` until
``max_invalid_repeats`` of them come in a row; that one resolves to the env's safe action (wait / defer when valid,
else the first valid action), so simulated time always moves on. Random UNMASKED and constant-action policies,
every env and observation mode, several seeds: no exception, and every episode terminates (never truncated)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.envs.base import InvalidActionError
from tests.envs.test_env_job_select import toy_env

SMALL = {"cluster": "tiny", "num_jobs": 10}
CASES = [
    ("gpusched/JobSelect-v1", ("graph", "image", "flat"), SMALL),
    ("gpusched/JobSelect-v1", ("flat",), {**SMALL, "preemption": True}),
    ("gpusched/JobSelect-v1", ("flat",), {**SMALL, "work_conserving": True}),
    ("gpusched/WorkerPlacement-v1", ("graph", "image", "flat"), SMALL),
    ("gpusched/DelayTuning-v1", ("graph", "flat"), SMALL),
    ("gpusched/DAGSchedule-v1", ("graph", "flat"), {"dag": "dag:random:n=10", "gpus": 4}),
    ("gpusched/DAGSchedule-v1", ("flat",), {"dag": "dag:random:n=10", "gpus": 4, "mode": "improve"}),
]
PARAMS = [(env_id, mode, kw) for env_id, modes, kw in CASES for mode in modes]
POLICIES = ("random", "first", "last", "middle")
STEP_BOUND = 20_000


def run_unmasked(env, policy: str, seed: int) -> tuple[int, bool, bool]:
    """One episode of an unmasked policy; (steps, terminated, truncated)."""
    env.reset(seed=seed)
    n_actions = env.action_space.n
    rng = np.random.default_rng(seed)
    constant = {"first": 0, "last": n_actions - 1, "middle": n_actions // 2}.get(policy)
    for step in range(1, STEP_BOUND + 1):
        a = int(rng.integers(n_actions)) if constant is None else constant
        _, reward, terminated, truncated, _ = env.step(a)
        assert np.isfinite(reward)
        if terminated or truncated:
            return step, terminated, truncated
    return STEP_BOUND, False, False


def ids(p):
    return f"{p[0].split('/')[1]}-{p[1]}-{'-'.join(f'{k}={v}' for k, v in p[2].items() if k not in SMALL)}"


@pytest.mark.parametrize("param", PARAMS, ids=[ids(p) for p in PARAMS])
@pytest.mark.parametrize("policy", POLICIES)
def test_unmasked_policies_always_terminate(param, policy):
    env_id, mode, kw = param
    env = gym.make(env_id, obs_mode=mode, disable_env_checker=True, **kw)
    for seed in range(2):
        steps, terminated, truncated = run_unmasked(env, policy, seed)
        assert terminated and not truncated, (env_id, mode, policy, seed, steps)
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("param", PARAMS, ids=[ids(p) for p in PARAMS])
def test_unmasked_policies_always_terminate_many_seeds(param):
    env_id, mode, kw = param
    env = gym.make(env_id, obs_mode=mode, disable_env_checker=True, **{**kw, "max_invalid_repeats": 2})
    for seed in range(25):
        for policy in POLICIES:
            steps, terminated, truncated = run_unmasked(env, policy, seed)
            assert terminated and not truncated, (env_id, mode, policy, seed, steps)


def test_repeated_invalid_action_resolves_to_the_first_valid_action():
    env = toy_env(max_invalid_repeats=3)
    env.reset(seed=0)
    env.step(2)  # wait: C arrives at t=10; nothing runs and nothing is to arrive, so waiting is masked
    assert env.sim.now == 10.0 and env.action_masks().tolist() == [True, True, False]
    for _ in range(2):  # no-ops with the penalty
        obs, reward, terminated, truncated, info = env.step(2)
        assert reward == -1.0 and info["invalid_action"] and info.get("forced_action", -1) == -1
        assert env.sim.now == 10.0 and not env.sim.running
    job_a = env.job_at(0)
    obs, reward, terminated, truncated, info = env.step(
        2
    )  # the third in a row: the first valid action, slot 0
    assert info["invalid_action"] and info["forced_action"] == 0 and reward == -1.0  # no time passed
    assert job_a in env.sim.running and not terminated and not truncated
    assert env._invalid_run == 0  # the count starts again after an action that acted


def test_safe_action_is_wait_when_waiting_is_valid():
    env = toy_env(max_invalid_repeats=1)
    env.reset(seed=0)
    env.step(0)  # start A (2 GPUs); B (4 GPUs) still fits, C is still to arrive: waiting is valid
    assert env.safe_action() == 2


def test_max_invalid_repeats_is_checked_and_raise_still_raises():
    with pytest.raises(ValueError, match="max_invalid_repeats must be >= 1"):
        toy_env(max_invalid_repeats=0)
    strict = toy_env(invalid_action="raise", max_invalid_repeats=1)
    strict.reset(seed=0)
    strict.step(2)
    with pytest.raises(InvalidActionError, match="invalid action 2: waiting now would deadlock"):
        strict.step(2)


def test_dag_improve_safe_action_keeps_the_plan():
    env = gym.make(
        "gpusched/DAGSchedule-v1", dag="dag:random:n=10", gpus=4, mode="improve", max_invalid_repeats=1
    ).unwrapped
    env.reset(seed=0)
    assert env.safe_action() == int(env.assignment[env.current])


def test_work_conserving_masks_waiting_while_a_job_fits():
    env = toy_env(work_conserving=True)
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].tolist() == [1, 1, 0]  # A and B fit: waiting is masked (default: [1, 1, 1])
    assert toy_env().reset(seed=0)[0]["action_mask"].tolist() == [1, 1, 1]
    obs, *_ = env.step(0)  # A starts; B still fits
    assert obs["action_mask"].tolist() == [1, 0, 0]  # B only (C has not arrived: its slot is empty)
    with pytest.raises(ValueError, match="work_conserving must be True or False"):
        toy_env(work_conserving=1)
