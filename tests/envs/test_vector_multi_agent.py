"""N parallel episodes of multi_scheduler_v1 in one call (gpusched_envs.multi_agent.vector) against N independent
envs: the same seeds and the same random valid actions give bit-identical observations, rewards, terminations,
masks and metrics, across autoresets, in NEXT_STEP and SAME_STEP modes; malformed actions name the copy and the
agent."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from gpusched_envs.envs.core import InvalidActionError
from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.multi_agent.vector import MultiSchedulerVectorEnv

KW = {"num_agents": 2, "cluster": "tiny", "num_jobs": 8, "obs_mode": "flat"}
N = 3


def assert_same(batch_obs, batch_info, i, obs, infos, agents):
    for a in agents:
        for k, v in obs[a].items():
            assert batch_obs[a][k].dtype == v.dtype
            np.testing.assert_array_equal(batch_obs[a][k][i], v, err_msg=f"{a} {k}")
        for k, v in infos[a].items():
            if k in ("metrics", "agent_metrics"):
                if not infos[a]["episode_done"]:
                    assert k not in batch_info[a] or not batch_info[a]["_" + k][i]
                    continue
                assert batch_info[a]["_" + k][i]
                for name, value in v.items():
                    np.testing.assert_array_equal(batch_info[a][k][name][i], value, err_msg=name)
            else:
                assert batch_info[a][k][i] == v and batch_info[a]["_" + k][i], k


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.name)
@pytest.mark.parametrize("kw", [KW, {**KW, "obs_mode": "graph", "preempt": 2}], ids=["flat", "graph-preempt"])
def test_batched_episodes_equal_independent_envs(mode, kw):
    vec = MultiSchedulerVectorEnv(N, autoreset_mode=mode, **kw)
    singles = [multi_scheduler_v1.parallel_env(**kw) for _ in range(N)]
    agents = vec.possible_agents
    obs, info = vec.reset(seed=3)
    for i, env in enumerate(singles):
        assert_same(obs, info, i, *env.reset(seed=3 + i), agents)
    rng = np.random.default_rng(0)
    pending, ended = [False] * N, 0
    for _ in range(40):
        masks = vec.action_masks()
        assert masks.shape == (N, len(agents), vec.num_actions)
        for i, env in enumerate(singles):
            for j, a in enumerate(agents):
                expected = np.ones(vec.num_actions, bool) if pending[i] else env.action_masks(a)
                np.testing.assert_array_equal(masks[i, j], expected)
        actions = np.array([[rng.choice(np.flatnonzero(m)) for m in row] for row in masks])
        obs, rewards, terms, truncs, info = vec.step(actions)
        for i, env in enumerate(singles):
            if pending[i]:
                o, inf = env.reset()
                r, te = dict.fromkeys(agents, 0.0), dict.fromkeys(agents, False)
                pending[i] = False
            else:
                o, r, te, tr, inf = env.step({a: int(actions[i, j]) for j, a in enumerate(agents)})
                if te[agents[0]] or tr[agents[0]]:
                    ended += 1
                    if mode == AutoresetMode.SAME_STEP:
                        for a in agents:
                            assert info[a]["_final_obs"][i]
                            for k, v in o[a].items():
                                np.testing.assert_array_equal(info[a]["final_obs"][i][k], v)
                            for name, value in inf[a]["metrics"].items():
                                np.testing.assert_array_equal(
                                    info[a]["final_info"]["metrics"][name][i], value
                                )
                        o, inf = env.reset()
                    else:
                        pending[i] = True
            for a in agents:
                assert rewards[a][i] == r[a] and terms[a][i] == te[a]
            assert_same(obs, info, i, o, inf, agents)
    assert ended >= N


def test_seed_list_and_dict_actions():
    vec = MultiSchedulerVectorEnv(2, **KW)
    env = multi_scheduler_v1.parallel_env(**KW)
    obs, info = vec.reset(seed=[7, 1])
    assert_same(obs, info, 1, *env.reset(seed=1), vec.possible_agents)
    masks = vec.action_masks()
    by_agent = {a: masks[:, j].argmax(axis=1) for j, a in enumerate(vec.possible_agents)}
    other = MultiSchedulerVectorEnv(2, **KW)
    other.reset(seed=[7, 1])
    a, *_ = vec.step(by_agent)
    b, *_ = other.step(np.stack([by_agent[x] for x in vec.possible_agents], axis=1))
    for agent in a:
        assert all(np.array_equal(a[agent][k], b[agent][k]) for k in a[agent])


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (np.zeros((3, 2), dtype=np.int64), r"expected an \(2, 2\) array"),
        (np.array([[0, 0], [0, 99]]), r"actions\[1\]\['scheduler_1'\] 99 outside"),
        (np.array([[0.0, np.nan], [0.0, 0.0]]), r"actions\[0\]\['scheduler_1'\]: expected an integer"),
        ({"scheduler_0": [0, 0]}, r"missing \['scheduler_1'\]"),
    ],
)
def test_malformed_actions_name_the_copy_and_the_agent(actions, match):
    vec = MultiSchedulerVectorEnv(2, **KW)
    vec.reset(seed=0)
    steps = [env.steps for env in vec.envs]
    with pytest.raises(InvalidActionError, match=match):
        vec.step(actions)
    assert [env.steps for env in vec.envs] == steps
