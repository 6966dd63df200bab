"""Every PettingZoo API test on multi_scheduler_v1 at 2 and 8 agents (parallel and AEC, seeds, state, max_cycles,
render), and the errors of a misused env (step after the end, malformed actions)."""

from __future__ import annotations

import functools
import types

import numpy as np
import pytest
from pettingzoo.test import (
    api_test,
    max_cycles_test,
    parallel_api_test,
    parallel_seed_test,
    render_test,
    seed_test,
    state_test,
)

from gpusched_envs.envs.base import InvalidActionError
from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.multi_agent.multi_scheduler import EpisodeEndedError, resolve_multi_cluster

AGENTS = [2, 8]


def kwargs_for(k: int) -> dict:
    return dict(num_agents=k, cluster="tiny", num_jobs=24, window=4)


def module_for(k: int):
    """A PettingZoo-style module (``env`` / ``parallel_env``) whose envs have ``k`` agents."""
    return types.SimpleNamespace(
        env=functools.partial(multi_scheduler_v1.env, **kwargs_for(k)),
        parallel_env=functools.partial(multi_scheduler_v1.parallel_env, **kwargs_for(k)),
    )


aec_warnings = [
    pytest.mark.filterwarnings("ignore:Observation is not a NumPy array"),  # Dict observations, by design
    pytest.mark.filterwarnings("ignore:Observation space for each agent probably should be"),
]


@pytest.mark.parametrize("k", AGENTS)
def test_parallel_api_and_seed(k):
    parallel_api_test(multi_scheduler_v1.parallel_env(**kwargs_for(k)), num_cycles=50)
    parallel_seed_test(module_for(k).parallel_env, num_cycles=30)


@pytest.mark.parametrize("k", AGENTS)
@pytest.mark.filterwarnings("ignore:Observation is not a NumPy array")
@pytest.mark.filterwarnings("ignore:Observation space for each agent probably should be")
def test_aec_api_and_seed(k):
    api_test(multi_scheduler_v1.env(**kwargs_for(k)), num_cycles=30)
    seed_test(module_for(k).env, num_cycles=30)


@pytest.mark.parametrize("k", AGENTS)
def test_state(k):
    state_test(multi_scheduler_v1.env(**kwargs_for(k)), multi_scheduler_v1.parallel_env(**kwargs_for(k)), 20)


@pytest.mark.parametrize("k", AGENTS)
def test_max_cycles(k):
    max_cycles_test(module_for(k))
    env = multi_scheduler_v1.parallel_env(max_steps=3, **kwargs_for(k))  # the single-agent envs' name
    assert env.max_cycles == env.max_steps == 3
    with pytest.raises(ValueError, match="max_cycles"):
        multi_scheduler_v1.parallel_env(max_cycles=3, max_steps=4)
    with pytest.raises(ValueError, match="max_cycles"):
        multi_scheduler_v1.parallel_env(max_cycles=0)


@pytest.mark.parametrize("k", AGENTS)
def test_render(k, capsys):
    render_test(module_for(k).env)
    env = multi_scheduler_v1.parallel_env(render_mode="human", **kwargs_for(k))
    env.reset(seed=0)
    assert env.render() is None
    assert "scheduler_0" in capsys.readouterr().out  # human mode prints the text map
    env = multi_scheduler_v1.parallel_env(render_mode="rgb_array", **kwargs_for(k))
    env.reset(seed=0)
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3


def test_step_after_the_end_and_before_reset_raise_clearly():
    env = multi_scheduler_v1.parallel_env(max_cycles=2, **kwargs_for(2))
    with pytest.raises(EpisodeEndedError, match="reset"):
        env.step({})
    env.reset(seed=0)
    for _ in range(2):
        env.step({a: env.wait_action for a in env.agents})
    assert not env.agents
    with pytest.raises(EpisodeEndedError, match="episode has ended"):
        env.step({"scheduler_0": 0})
    assert issubclass(EpisodeEndedError, ValueError)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"scheduler_0": 0.7}, r"actions\['scheduler_0'\]: expected an integer"),
        ({"scheduler_0": float("nan")}, r"actions\['scheduler_0'\]"),
        ({"scheduler_1": [0, 1]}, r"actions\['scheduler_1'\]: expected one integer"),
        ({"scheduler_0": "1"}, r"actions\['scheduler_0'\]"),
        ({"nobody": 0}, "unknown agents"),
        ([0, 1], "must be a dict"),
    ],
)
def test_malformed_actions_name_the_agent(bad, match):
    env = multi_scheduler_v1.parallel_env(**kwargs_for(2))
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match=match):
        env.step(bad)
    env.step({"scheduler_0": np.int64(env.wait_action), "scheduler_1": 2.0})  # integral values are fine


def test_datacenter_cluster_spec():
    c = resolve_multi_cluster("datacenter:racks=16,servers=2,gpus=8")
    assert (c.num_racks, c.num_servers, c.num_gpus) == (16, 32, 256)
    with pytest.raises(ValueError, match="racks='x'"):
        resolve_multi_cluster("datacenter:racks=x")
    with pytest.raises(ValueError, match="bad item 'floors=2'"):
        resolve_multi_cluster("datacenter:floors=2")
    env = multi_scheduler_v1.parallel_env(num_agents=16, cluster="datacenter:racks=16", num_jobs=40)
    obs, _ = env.reset(seed=0)
    assert len(obs) == 16 and env.num_candidates == 5 + 16


def test_philly_windows_and_heads_arguments():
    from gpusched_envs.multi_agent.multi_scheduler import PhillyWindows, resolve_multi_workload

    w = resolve_multi_workload("philly-windows:first=85,last=90,jobs=20,load=1.5")
    assert isinstance(w, PhillyWindows) and (w.first, w.last, w.jobs, w.load) == (85.0, 90.0, 20, 1.5)
    with pytest.raises(ValueError, match="bad item 'days=3'"):
        resolve_multi_workload("philly-windows:days=3")
    with pytest.raises(ValueError, match="first <= last"):
        PhillyWindows(first=9, last=3)
    with pytest.raises(ValueError, match="heads must be an integer in 1..window"):
        multi_scheduler_v1.parallel_env(window=2, heads=3)
    env = multi_scheduler_v1.parallel_env(num_agents=2, cluster="tiny", num_jobs=20, heads=2)
    assert env.action_space("scheduler_0").n == 2 * env.num_candidates + 1 == env.wait_action + 1
    obs, _ = env.reset(seed=0)
    assert obs["scheduler_0"]["candidate_features"].shape == (2 * env.num_candidates, 5)
