"""The env core both env families share: the episode spec's seed draws, one error class for a finished episode,
one action parser, and the moved names still importable from their old module."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpusched_envs.envs.base import EpisodeEndedError as SingleAgentEnded
from gpusched_envs.envs.core import EpisodeSpec, InvalidActionError, check_action_value, resolve_cluster
from gpusched_envs.envs.job_select import JobSelectEnv
from gpusched_envs.multi_agent import multi_scheduler, multi_scheduler_v0, multi_scheduler_v1
from gpusched_envs.policies import multi_agent as policies_multi_agent
from gpusched_envs.sim import datacenter
from gpusched_envs.workloads import windows


def spec(**changes) -> EpisodeSpec:
    base = EpisodeSpec.checked(resolve_cluster("tiny"), None, None, 6, 0.9, True, "throughput")
    return dataclasses.replace(base, **changes)


def test_the_spec_draws_the_workload_seed_then_the_simulator_seed():
    rng = np.random.default_rng(5)
    wl_seed, sim_seed = (int(rng.integers(2**31)) for _ in range(2))
    sim = spec().simulator(np.random.default_rng(5))
    assert sim.config.seed == sim_seed
    assert np.array_equal(sim.workload.submit_time, spec().workload(wl_seed).submit_time)
    # a fixed workload seed is not drawn: the simulator seed is the first draw
    first = int(np.random.default_rng(5).integers(2**31))
    assert spec(workload_seed=3).simulator(np.random.default_rng(5)).config.seed == first


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((2.5, 0.9, True, "throughput"), "num_jobs"),
        ((6, 0.0, True, "throughput"), "load"),
        ((6, 0.9, "no", "throughput"), "interference"),
        ((6, 0.9, True, "warp"), "speed_model"),
    ],
)
def test_the_spec_names_a_bad_argument(args, name):
    with pytest.raises(ValueError, match=name):
        EpisodeSpec.checked(resolve_cluster("tiny"), None, None, *args)


def test_both_env_families_hold_a_spec_and_raise_one_error_class():
    single = JobSelectEnv("tiny", num_jobs=6, workload_seed=2)
    multi = multi_scheduler_v1.parallel_env(num_agents=2, cluster="tiny", num_jobs=6, workload_seed=2)
    assert single.episode == spec(workload_seed=2) == multi.episode
    assert (multi.cluster, multi.num_jobs, multi.workload_seed) == (single.cluster, 6, 2)
    assert multi_scheduler.EpisodeEndedError is SingleAgentEnded
    assert issubclass(SingleAgentEnded, ValueError)


def test_one_action_parser_names_where():
    assert check_action_value(np.array([3.0]), 4) == 3
    assert check_action_value(70) == 70  # no bound: the multi-agent env treats it as an invalid choice
    with pytest.raises(InvalidActionError, match=r"action 4 outside 0\.\.3"):
        check_action_value(4, 4)
    with pytest.raises(InvalidActionError, match=r"actions\['a'\]: expected an integer, got 0\.5"):
        check_action_value(0.5, where="actions['a']")
    with pytest.raises(InvalidActionError, match=r"action: expected one integer in 0\.\.3, got True"):
        check_action_value(True, 4)


def test_moved_names_are_the_same_objects_at_the_old_path():
    for name in ("HeuristicMultiAgent", "HEURISTIC_ORDERS", "CLAIRVOYANT_ORDERS", "BASE_CANDIDATES"):
        assert getattr(multi_scheduler, name) is getattr(policies_multi_agent, name)
    for name in ("datacenter_cluster", "resolve_multi_cluster", "DATACENTER_KEYS"):
        assert getattr(multi_scheduler, name) is getattr(datacenter, name)
    for name in ("PhillyWindows", "resolve_multi_workload"):
        assert getattr(multi_scheduler, name) is getattr(windows, name)


def test_multi_scheduler_v0_is_refused_naming_v1():
    import gymnasium as gym

    for make in (multi_scheduler_v0.parallel_env, multi_scheduler_v0.env, multi_scheduler_v0.raw_env):
        with pytest.raises(gym.error.DeprecatedEnv, match="use gpusched_envs.multi_agent.multi_scheduler_v1"):
            make(num_agents=2)
    assert multi_scheduler_v1.MultiSchedulerEnv.metadata["name"] == "multi_scheduler_v1"
