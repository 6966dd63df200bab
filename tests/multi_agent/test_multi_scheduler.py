"""multi_scheduler_v1: PettingZoo API and seed tests, a hand-built conflict, equivalence with the single-scheduler
simulator, rewards, and the SB3 parameter-sharing bridge."""

from __future__ import annotations

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test

from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.multi_agent.multi_scheduler import HeuristicMultiAgent
from gpusched_envs.policies import make_policy
from gpusched_envs.sim import Simulator, load_cluster
from gpusched_envs.workloads import load_workload
from tests.toy import make_workload

CONFIGS = [
    dict(num_agents=2, cluster="tiny", num_jobs=30),
    dict(num_agents=8, cluster="tiny", num_jobs=40, obs_mode="flat"),
    dict(num_agents=2, cluster="philly", workload="philly:jobs=40,load=0.9,gpus=64", window=4),
    dict(
        num_agents=8, cluster="philly", workload="philly:jobs=40,load=0.9,gpus=64", window=4, agent_share=0.5
    ),
]


@pytest.mark.parametrize("kwargs", CONFIGS, ids=lambda k: f"{k['num_agents']}-{k['cluster']}")
def test_parallel_api(kwargs):
    parallel_api_test(multi_scheduler_v1.parallel_env(**kwargs), num_cycles=60)


@pytest.mark.parametrize("kwargs", CONFIGS[:2], ids=lambda k: f"{k['num_agents']}-{k['cluster']}")
def test_parallel_seed(kwargs):
    parallel_seed_test(lambda: multi_scheduler_v1.parallel_env(**kwargs), num_cycles=40)


@pytest.mark.filterwarnings("ignore:Observation is not a NumPy array")  # Dict observations, by design
@pytest.mark.filterwarnings("ignore:Observation space for each agent probably should be")
@pytest.mark.parametrize("kwargs", [CONFIGS[0], CONFIGS[2]], ids=["2-tiny", "2-philly"])
def test_aec_api(kwargs):
    api_test(multi_scheduler_v1.env(**kwargs), num_cycles=40)


def run_episode(env, seed, choose):
    obs, _ = env.reset(seed=seed)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    infos = {}
    while env.agents:
        obs, rewards, _, _, infos = env.step(choose(env, obs))
        for a, r in rewards.items():
            returns[a] += r
    return returns, infos


def test_two_agent_conflict_is_arbitrated_by_the_seeded_order():
    # both agents' head jobs want all 16 GPUs of 'tiny' at t=0 for 100 s
    workload = make_workload([(0, 100, 16), (0, 100, 16)], model_names=("resnet50",))
    env = multi_scheduler_v1.parallel_env(
        num_agents=2, cluster="tiny", workload=workload, routing="round_robin", speed_model="duration"
    )
    seed = 7
    rng = np.random.default_rng(seed)
    rng.integers(2**31), rng.integers(2**31)  # the env draws the workload and simulator seeds first
    winner = int(rng.permutation(2)[0])
    loser = 1 - winner
    obs, _ = env.reset(seed=seed)
    closest = 0
    assert all(o["action_mask"][closest] for o in obs.values())
    obs, rewards, _, _, infos = env.step({a: closest for a in env.agents})
    sim = env.sim
    assert sim.first_start[winner] == 0.0 and np.isnan(sim.first_start[loser])
    assert infos[f"scheduler_{loser}"]["conflict"] and not infos[f"scheduler_{winner}"]["conflict"]
    # nothing fits until the winner finishes: the clock ran to t=100, where the loser can place
    assert sim.now == 100.0
    assert obs[f"scheduler_{loser}"]["action_mask"][closest]
    assert rewards["scheduler_0"] == pytest.approx(-(2 * 100) / 3600)
    obs, rewards, _, _, infos = env.step({a: closest for a in env.agents})
    assert sim.first_start[loser] == 100.0
    assert not env.agents  # drained: finish at 200
    assert sim.finish_time.tolist() == ([100.0, 200.0] if winner == 0 else [200.0, 100.0])
    assert infos["scheduler_0"]["metrics"]["avg_jct"] == 150.0


def test_heuristic_agents_equal_the_single_scheduler_on_vc_pools():
    """One agent per Philly VC on the philly-vc pools, each doing FIFO + closest on its own queue, gives exactly the
    metrics of the single FIFO + closest scheduler on the merged workload."""
    workload = load_workload("philly:start=2017-10-02,end=2017-10-02", seed=0)
    env = multi_scheduler_v1.parallel_env(cluster="philly-vc", workload=workload)
    assert len(env.possible_agents) == 11
    agent = HeuristicMultiAgent("closest")
    _, infos = run_episode(env, 3, lambda e, o: agent(e, o))
    multi = infos["scheduler_0"]["metrics"]
    single = Simulator(load_cluster("philly-vc"), workload, env.sim.config).run(
        make_policy("fifo", "closest")
    )
    assert multi == single
    assert multi["jobs"] > 500


def test_return_is_minus_total_jct_and_agent_share():
    kwargs = dict(num_agents=3, cluster="tiny", num_jobs=30)
    rng = np.random.default_rng(0)

    def random_valid(env, obs):
        return {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}

    env = multi_scheduler_v1.parallel_env(**kwargs)
    returns, infos = run_episode(env, 1, random_valid)
    m = infos["scheduler_0"]["metrics"]
    total_jct = m["avg_jct"] * m["jobs"]
    assert all(r == pytest.approx(-total_jct / 3600) for r in returns.values())
    # fully selfish rewards: each agent's return is minus its own jobs' total JCT
    env = multi_scheduler_v1.parallel_env(agent_share=1.0, **kwargs)
    returns, infos = run_episode(env, 1, random_valid)
    for a, r in returns.items():
        own = infos[a]["agent_metrics"]
        assert r == pytest.approx(-own["avg_jct"] * own["jobs"] / 3600)
    assert sum(infos[a]["agent_metrics"]["jobs"] for a in returns) == 30


def test_state_and_spaces_are_cached_and_fixed():
    env = multi_scheduler_v1.parallel_env(num_agents=4, cluster="hetero64", num_jobs=20)
    obs, _ = env.reset(seed=0)
    assert env.observation_space("scheduler_0") is env.observation_space("scheduler_0")
    assert env.action_space("scheduler_1") is env.action_space("scheduler_1")
    assert env.state().shape == env.state_space.shape
    for a, o in obs.items():
        assert env.observation_space(a).contains(o)


def test_bad_arguments_fail_clearly():
    with pytest.raises(ValueError, match="routing"):
        multi_scheduler_v1.parallel_env(routing="telepathy")
    with pytest.raises(ValueError, match="agent_share"):
        multi_scheduler_v1.parallel_env(agent_share=2.0)
    env = multi_scheduler_v1.parallel_env(num_agents=2, cluster="tiny", num_jobs=10, invalid_action="raise")
    obs, _ = env.reset(seed=0)
    bad = {
        a: int(np.flatnonzero(o["action_mask"] == 0)[0])
        for a, o in obs.items()
        if (o["action_mask"] == 0).any()
    }
    if bad:
        with pytest.raises(ValueError, match="invalid action"):
            env.step({**{a: env.wait_action for a in env.agents}, **bad})
