"""multi_scheduler: an invalid action never crashes or hangs an episode. It is a wait with ``-invalid_penalty``;
for the agent that must place (nothing runs, nothing is to arrive) it is that agent's first valid placement, so the
simulator is never advanced with nothing left to run."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.multi_agent import multi_scheduler_v1

KWARGS = [
    {"obs_mode": "flat"},
    {"obs_mode": "graph"},
    {"obs_mode": "flat", "heads": 2, "preempt": 2, "min_run": 60.0},
]


def run_unmasked(env, policy: str, seed: int) -> tuple[int, dict, dict]:
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    n = env.action_space(env.possible_agents[0]).n
    steps = 0
    while env.agents:
        if policy == "random":
            actions = {a: int(rng.integers(n)) for a in env.agents}
        else:
            actions = dict.fromkeys(env.agents, 0 if policy == "first" else n - 1)
        _, rewards, terminations, truncations, _ = env.step(actions)
        assert all(np.isfinite(r) for r in rewards.values())
        steps += 1
        assert steps < 20_000
    return steps, terminations, truncations


@pytest.mark.parametrize("kw", KWARGS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
@pytest.mark.parametrize("policy", ["random", "first", "last"])
def test_unmasked_policies_always_terminate(kw, policy):
    env = multi_scheduler_v1.parallel_env(num_jobs=8, **kw)
    for seed in range(3):
        _, terminations, truncations = run_unmasked(env, policy, seed)
        assert all(terminations.values()) and not any(truncations.values())


def test_invalid_action_of_the_agent_that_must_place_is_its_first_placement():
    # every agent always waits: once every job has arrived and the running ones finish, nothing runs and nothing
    # is to arrive, and the agent owning the first placeable job must place
    env = multi_scheduler_v1.parallel_env(num_agents=2, num_jobs=6, obs_mode="flat")
    env.reset(seed=0)
    seen = 0
    while env.agents:
        masks = {a: env.action_masks(a) for a in env.agents}
        must = [a for a in env.agents if not masks[a][env.wait_action]]
        actions = dict.fromkeys(env.agents, env.wait_action)
        if must:  # the agent that must place sends the (invalid) wait
            assert len(must) == 1
            first = int(np.flatnonzero(masks[must[0]])[0])
            running = set(env.sim.running)
            _, rewards, _, _, infos = env.step(actions)
            assert infos[must[0]]["invalid_action"] and infos[must[0]]["forced_action"] == first
            assert set(env.sim.running) != running or env.sim.finished  # a job started: time moves on
            seen += 1
        else:
            env.step(actions)
    assert seen == 6  # every job was started by the agent that had to


@pytest.mark.slow
@pytest.mark.parametrize("kw", KWARGS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_unmasked_policies_always_terminate_many_seeds(kw):
    env = multi_scheduler_v1.parallel_env(num_jobs=20, **kw)
    for seed in range(30):
        for policy in ("random", "first", "last"):
            _, terminations, truncations = run_unmasked(env, policy, seed)
            assert all(terminations.values()) and not any(truncations.values())
