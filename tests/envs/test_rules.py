"""``JobSelect-v1(rules=[...])``: the action picks which rule schedules at a decision point of the simulator, each
rule acting exactly as it does in ``Simulator.run``."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gpusched_lab.agents.common import fresh_simulator
from gymnasium.utils.env_checker import check_env

import gpusched_envs  # noqa: F401
from gpusched_envs.policies import make_policy
from gpusched_envs.policies.portfolio import RULES, SRSF, NoPreempt, make_rule, rule_is_clairvoyant

RULE_SET = ("srtf", "srtf-nopreempt", "srsf", "las")
KW = {
    "cluster": "tiny",
    "num_jobs": 40,
    "load": 1.2,
    "window": 8,
    "information": "clairvoyant",
    "preemption": True,
}


def play(env, actions, seed: int) -> tuple[float, int, float]:
    """(avg JCT, steps, return) of the episode in which step ``i`` takes ``actions(i)``."""
    env.reset(seed=seed)
    steps, ret = 0, 0.0
    while True:
        _, reward, terminated, truncated, info = env.step(actions(steps))
        steps += 1
        ret += reward
        if terminated or truncated:
            return info["metrics"]["avg_jct"], steps, ret


def native(env, rules, choose, seed: int) -> tuple[float, int]:
    """(avg JCT, decisions) of ``Simulator.run``'s loop on the env's episode, rule ``choose(i)`` deciding at the
    ``i``-th decision point."""
    sim = fresh_simulator(env, seed)
    policies = [make_rule(r, "closest") for r in rules]
    for p in policies:
        p.reset(sim)
    n = 0
    while sim.next_decision():
        policies[choose(n)].schedule(sim)
        n += 1
    return sim.metrics()["avg_jct"], n


def test_each_rule_alone_is_exactly_that_rule_run_by_the_simulator():
    env = gym.make("gpusched/JobSelect-v1", rules=RULE_SET, **KW)
    assert env.action_space.n == len(RULE_SET)
    jcts = {}
    for k, rule in enumerate(RULE_SET):
        for seed in (0, 1):
            jct, steps, _ = play(env, lambda i, k=k: k, seed)
            alone = fresh_simulator(env, seed).run(make_rule(rule, "closest"))["avg_jct"]
            assert jct == alone
            jcts[rule, seed] = jct
    # the instance tells the rules apart, so the equalities above are not all one number
    assert len({round(v, 6) for v in jcts.values()}) >= 4
    assert jcts["srtf", 0] == fresh_simulator(env, 0).run(make_policy("srtf", "closest"))["avg_jct"]


def test_a_mix_of_rules_is_the_simulators_loop_with_those_rules_and_the_return_is_minus_the_jcts():
    env = gym.make("gpusched/JobSelect-v1", rules=RULE_SET, **KW)
    rng = np.random.default_rng(7)
    picks = rng.integers(0, len(RULE_SET), 10_000)
    for seed in (0, 1):
        jct, steps, ret = play(env, lambda i: int(picks[i]), seed)
        assert (jct, steps) == native(env, RULE_SET, lambda i: int(picks[i]), seed)
        assert -ret * 3600.0 == pytest.approx(jct * KW["num_jobs"], rel=1e-9)
        # and a mix is not one of the rules alone
        assert jct not in {play(env, lambda i, k=k: k, seed)[0] for k in range(len(RULE_SET))}


@pytest.mark.parametrize("obs_mode", ["graph", "image", "flat"])
def test_the_rule_choice_env_passes_gymnasiums_checker(obs_mode):
    env = gym.make("gpusched/JobSelect-v1", rules=RULE_SET, obs_mode=obs_mode, **KW)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].shape == (len(RULE_SET),) and obs["action_mask"].all()


def test_the_vector_env_runs_the_rule_choice_env_as_single_envs():
    vec = gym.make_vec("gpusched/JobSelect-v1", num_envs=3, rules=RULE_SET, **KW)
    vec.reset(seed=[0, 1, 2])
    singles = [gym.make("gpusched/JobSelect-v1", rules=RULE_SET, **KW) for _ in range(3)]
    for i, env in enumerate(singles):
        env.reset(seed=i)
    for t in range(30):
        actions = np.array([(t + i) % len(RULE_SET) for i in range(3)])
        _, rewards, *_ = vec.step(actions)
        for i, env in enumerate(singles):
            _, r, terminated, truncated, _ = env.step(int(actions[i]))
            assert r == rewards[i]
            assert not (terminated or truncated)
    vec.close()


def test_a_non_clairvoyant_portfolio_needs_no_durations_and_each_rule_alone_is_that_rule():
    kw = {**KW, "information": "non-clairvoyant"}
    rules = ("las", "gittins", "tiresias", "las-nopreempt", "fifo")
    env = gym.make("gpusched/JobSelect-v1", rules=rules, **kw)
    assert not any(rule_is_clairvoyant(r) for r in rules)
    for k, rule in enumerate(rules):
        for seed in (0, 1):
            alone = fresh_simulator(env, seed).run(make_rule(rule, "closest"))["avg_jct"]
            assert play(env, lambda i, k=k: k, seed)[0] == alone, (rule, seed)


def test_srsf_orders_by_remaining_gpu_service_and_nopreempt_never_preempts():
    env = gym.make("gpusched/JobSelect-v1", **KW)
    sim = fresh_simulator(env, 1)
    rule = make_rule("srsf", "closest")
    assert isinstance(rule, SRSF) and rule.clairvoyant
    rule.reset(sim)
    sim.next_decision()
    jobs = list(sim.queue)
    keys = [rule.priority(sim, j) for j in jobs]
    assert keys == [(sim.remaining_ideal_time(j) * sim.job_gpus_n[j], j) for j in jobs]
    quiet = fresh_simulator(env, 1)
    nopre = make_rule("srtf-nopreempt", "closest")
    assert isinstance(nopre, NoPreempt) and nopre.name == "srtf-nopreempt"
    quiet.run(nopre)
    assert int(quiet.preemptions.sum()) == 0
    busy = fresh_simulator(env, 1)
    busy.run(make_rule("srtf", "closest"))
    assert int(busy.preemptions.sum()) > 0  # the instance does preempt under SRTF


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"rules": ["srtf"]}, "two or more"),
        ({"rules": "srtf"}, "list of two or more"),
        ({"rules": ["srtf", "srtf"]}, "each rule once"),
        ({"rules": ["srtf", "nope"]}, "unknown rule 'nope'"),
        ({"rules": ["las", "srsf"], "information": "non-clairvoyant"}, "'srsf' reads traced durations"),
        ({"rules": ["las", "fifo"], "preemption": False}, "'las' preempts jobs"),
        ({"rules": ["srtf", "las"], "hint": "srtf"}, "hint is not used with rules"),
        ({"rules": ["srtf", "las"], "min_run": 60.0}, "min_run is not used with rules"),
        ({"rules": ["srtf", "las"], "work_conserving": True}, "work_conserving is not used with rules"),
        ({"rules": ["srtf", "las"], "placement": lambda sim, job: None}, "placement name"),
    ],
)
def test_bad_rules_are_refused_when_the_env_is_made(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gym.make("gpusched/JobSelect-v1", **{**KW, **kwargs})


def test_make_rule_knows_every_policy_and_refuses_others():
    for name in RULES:
        assert make_rule(name, "closest").name == name
    with pytest.raises(ValueError, match="unknown rule 'fifo-nopreempt'"):
        make_rule("fifo-nopreempt")


def test_a_heuristic_agent_is_told_that_a_rule_choice_env_takes_rules():
    from gpusched_envs.envs.adapters import HeuristicAgent
    from gpusched_envs.policies import NotPlayableError

    env = gym.make("gpusched/JobSelect-v1", rules=RULE_SET, **KW)
    env.reset(seed=0)
    with pytest.raises(NotPlayableError, match="srtf is action 0"):
        HeuristicAgent(make_policy("srtf", "closest"))(env)
    with pytest.raises(NotPlayableError, match="gittins is none of its actions"):
        HeuristicAgent(make_policy("gittins", "closest"))(env)


def test_a_decision_interval_adds_periodic_decision_points_while_jobs_run():
    plain = gym.make("gpusched/JobSelect-v1", rules=RULE_SET, **KW)
    rounds = gym.make("gpusched/JobSelect-v1", rules=RULE_SET, decision_interval=600.0, **KW)
    _, steps, _ = play(plain, lambda i: 0, 1)
    jct, steps_rounds, ret = play(rounds, lambda i: 0, 1)
    assert steps_rounds > steps
    assert -ret * 3600.0 == pytest.approx(jct * KW["num_jobs"], rel=1e-9)
