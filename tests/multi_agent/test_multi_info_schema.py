"""multi_scheduler: every agent's info has the same keys and dtypes at ``reset`` and at every step, with
``metrics`` / ``agent_metrics`` always present (0.0 until ``episode_done``)."""

from __future__ import annotations

import numpy as np
from pettingzoo.test import parallel_api_test

from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.multi_agent.multi_scheduler import AGENT_METRIC_KEYS
from gpusched_envs.sim.metrics import METRIC_KEYS

SCALARS = {
    "time": np.float64,
    "queued": np.int64,
    "conflict": np.bool_,
    "invalid_action": np.bool_,
    "forced_action": np.int64,
    "episode_done": np.bool_,
}
WANT = {
    **SCALARS,
    "metrics": dict.fromkeys(METRIC_KEYS, np.float64),
    "agent_metrics": dict.fromkeys(AGENT_METRIC_KEYS, np.float64),
}


def schema(info: dict) -> dict:
    return {k: schema(v) if isinstance(v, dict) else type(v) for k, v in info.items()}


def test_per_agent_info_schema_at_reset_and_every_step():
    env = multi_scheduler_v1.parallel_env(num_agents=3, num_jobs=10, obs_mode="flat")
    _, infos = env.reset(seed=1)
    assert set(infos) == set(env.possible_agents)
    assert all(schema(i) == WANT and not i["episode_done"] for i in infos.values())
    rng = np.random.default_rng(1)
    n = env.action_space("scheduler_0").n
    flags = set()
    while env.agents:
        _, _, terms, _, infos = env.step({a: int(rng.integers(n)) for a in env.agents})
        for info in infos.values():
            assert schema(info) == WANT
            flags.add((bool(info["invalid_action"]), bool(info["conflict"])))
    assert all(terms.values()) and all(i["episode_done"] for i in infos.values())
    assert sum(i["agent_metrics"]["jobs"] for i in infos.values()) == 10
    assert all(i["metrics"]["jobs"] == 10 for i in infos.values())
    assert infos["scheduler_0"]["metrics"] == env.episode_metrics()
    assert (True, False) in flags and (False, False) in flags


def test_parallel_api_test_with_the_fixed_schema():
    parallel_api_test(
        multi_scheduler_v1.parallel_env(num_agents=2, num_jobs=6, obs_mode="flat"), num_cycles=200
    )
