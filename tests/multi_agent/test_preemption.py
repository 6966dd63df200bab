"""multi_scheduler_v1 with preemption slots, queue orders and coordination features, and the per-agent preemptive
heuristics: exact hand cases, the one-agent equality with the single SRTF scheduler, PettingZoo's API
tests on the preemptive env at 2 and 8 agents, and the HMARL actor's preempt logits."""

from __future__ import annotations

import functools
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, state_test

from gpusched_envs.envs.base import InvalidActionError
from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.multi_agent.multi_scheduler import COORDINATION_FEATURES, HeuristicMultiAgent
from gpusched_envs.policies import make_policy
from gpusched_envs.sim import Simulator
from gpusched_envs.sim.engine import QUEUED
from tests.toy import make_workload
from tests.toy import play_marl as play

PREEMPTIVE = dict(preempt=2, coordination=True, heads=2, window=4, queue_order="las")


def test_action_layout_and_argument_errors():
    env = multi_scheduler_v1.parallel_env(num_agents=2, cluster="tiny", num_jobs=8, heads=2, preempt=3)
    c = env.num_candidates
    assert env.first_preempt_action == 2 * c and env.wait_action == 2 * c + 3
    assert env.action_space("scheduler_0").n == 2 * c + 3 + 1
    obs, _ = env.reset(seed=0)
    assert obs["scheduler_0"]["action_mask"].shape == (2 * c + 4,)
    assert "coordination_features" not in obs["scheduler_0"]  # only with coordination=True
    with pytest.raises(ValueError, match="preempt"):
        multi_scheduler_v1.parallel_env(cluster="tiny", preempt=-1)
    with pytest.raises(ValueError, match="queue_order"):
        multi_scheduler_v1.parallel_env(cluster="tiny", queue_order="lifo")
    with pytest.raises(ValueError, match="clairvoyant"):
        multi_scheduler_v1.parallel_env(cluster="tiny", queue_order="srtf")  # reads the traced durations
    with pytest.raises(ValueError, match="coop"):
        HeuristicMultiAgent.from_name("srtf-consolidate+coop")  # yielding needs preemption


def two_agent_env(rows, **kw):
    """tiny (16 GPUs), jobs dealt round-robin: even jobs are scheduler_0's, odd ones scheduler_1's."""
    workload = make_workload(rows, model_names=("resnet50",))
    args = dict(num_agents=2, cluster="tiny", workload=workload, heads=2, window=4, preempt=2)
    args.update(routing="round_robin", information="clairvoyant", invalid_action="raise", **kw)
    return multi_scheduler_v1.parallel_env(**args)


def test_an_agent_preempts_its_own_running_job_and_the_slot_rules():
    # job 0 (scheduler_0) holds the whole cluster from t = 0; job 1 (scheduler_1) and job 2 (scheduler_0) arrive later
    env = two_agent_env([(0, 5000, 16), (100, 300, 8), (200, 300, 8)])
    obs, _ = env.reset(seed=0)
    first = env.first_preempt_action
    # t = 0: job 0 waits; nobody runs yet, so no running slot is offered
    assert not obs["scheduler_0"]["action_mask"][first : first + 2].any()
    obs, *_ = env.step(
        {"scheduler_0": env.candidate_action("scheduler_0", "consolidate"), "scheduler_1": env.wait_action}
    )
    # same instant: job 0 started now and is not preemptible at it; nothing waits, so the clock runs to t = 100
    assert env.sim.now == 100.0
    assert env.running_slots("scheduler_0").tolist() == [0, -1] and env.running_slots(
        "scheduler_1"
    ).tolist() == [-1, -1]
    # job 1 (scheduler_1's) waits: scheduler_0 may yield its running job 0 to it; scheduler_1 has nothing to preempt
    assert obs["scheduler_0"]["action_mask"][first] and not obs["scheduler_1"]["action_mask"][first]
    with pytest.raises(InvalidActionError, match="invalid action"):
        env.step({"scheduler_1": first})  # no running job of its own in slot 0
    obs, *_ = env.step({"scheduler_0": first, "scheduler_1": env.wait_action})
    assert env.sim.status[0] == QUEUED and env.sim.preemptions[0] == 1 and env.sim.now == 100.0
    # the freed GPUs: job 1 starts at the same instant
    obs, *_ = env.step(
        {"scheduler_1": env.candidate_action("scheduler_1", "consolidate"), "scheduler_0": env.wait_action}
    )
    assert 1 in env.sim.running


def test_when_nothing_runs_only_the_owner_of_the_first_job_must_place():
    # every job has arrived at t = 0 and nothing runs: scheduler_0 holds a long 1-GPU job, scheduler_1 a short job
    # on all 16 GPUs, first in SRTF order. Only scheduler_1 must place (its wait is masked); scheduler_0 may wait,
    # so its small job does not take the large job's GPUs (which would start one job at a time)
    env = two_agent_env([(0, 1000, 1), (0, 100, 16)], queue_order="srtf", coordination=True)
    obs, _ = env.reset(seed=0)
    wait = env.wait_action
    assert obs["scheduler_0"]["action_mask"][wait] and not obs["scheduler_1"]["action_mask"][wait]
    metrics = play(env, 0, HeuristicMultiAgent.from_name("srtf-consolidate+backfill+preempt+coop"))
    # the large short job first, then the small one
    assert env.sim.finish_time[1] == pytest.approx(100, rel=0.02)
    assert metrics["avg_jct"] == pytest.approx((100 + 1100) / 2, rel=0.02)
    # with the order reversed (FIFO: job 0 is older) scheduler_0 is the one that must place
    env = two_agent_env([(0, 1000, 1), (0, 100, 16)])
    obs, _ = env.reset(seed=0)
    assert not obs["scheduler_0"]["action_mask"][wait] and obs["scheduler_1"]["action_mask"][wait]


def test_coordination_features_on_a_hand_case():
    """One SRTF order over every agent's jobs: what comes before each head job and running slot, in GPUs ÷ 16."""
    env = two_agent_env(
        [(0, 5000, 8), (0, 400, 4), (10, 300, 16), (10, 200, 4)], coordination=True, queue_order="srtf"
    )
    obs, _ = env.reset(seed=0)
    h = HeuristicMultiAgent.from_name("srtf-consolidate+backfill")
    while env.sim.now < 10.0:  # t = 0: both agents place their job (8 + 4 GPUs)
        obs, *_ = env.step(h(env, obs))
    assert sorted(env.sim.running) == [0, 1]
    f0, f1 = obs["scheduler_0"]["coordination_features"], obs["scheduler_1"]["coordination_features"]
    assert f0.shape == (2 + 2, len(COORDINATION_FEATURES))
    # remaining at ideal speed at t = 10: job 3 200 s (4 GPUs, waiting, fits the 4 free GPUs), job 2 300 s (16 GPUs,
    # waiting, blocked), job 1 390 s (4, running), job 0 4,990 s (8, running): the SRTF order is 3, 2, 1, 0, and the
    # greedy fill into 16 GPUs claims 3 (4), skips 2 (16 > 12 left), claims 1 (4) and 0 (8)
    assert [round(env.sim.remaining_ideal_time(j)) for j in range(4)] == [4990, 390, 300, 200]
    # rows: (GPUs claimed before it, claimed, claimed blocked waiting GPUs before it, running GPUs after it,
    # own GPUs, filled), GPUs ÷ 16
    empty = [0] * 6
    np.testing.assert_allclose(f0, [[4 / 16, 0, 0, 12 / 16, 1, 1], empty, [8 / 16, 1, 0, 0, 0.5, 1], empty])
    np.testing.assert_allclose(f1, [[0, 1, 0, 12 / 16, 0.25, 1], empty, [4 / 16, 1, 0, 0.5, 0.25, 1], empty])


def test_one_agent_cooperative_srtf_is_the_srtf_scheduler():
    """One agent whose heads and running slots cover every job: the cooperative per-agent SRTF (one preemption per
    step, placements one per step) makes exactly the single preemptive SRTF scheduler's schedule."""
    rows = [(0, 3000, 8), (0, 2000, 8), (50, 100, 8), (60, 400, 4), (70, 200, 16), (80, 50, 2), (500, 900, 8)]
    workload = make_workload(rows, model_names=("resnet50",))
    env = multi_scheduler_v1.parallel_env(
        num_agents=1,
        cluster="tiny",
        workload=workload,
        heads=7,
        window=7,
        preempt=7,
        queue_order="srtf",
        routing="round_robin",
        information="clairvoyant",
    )
    multi = play(env, 0, HeuristicMultiAgent.from_name("srtf-consolidate+backfill+preempt+coop"))
    fresh = Simulator(env.cluster, workload, env.sim.config)
    single = fresh.run(make_policy("srtf", "consolidate"))
    assert multi == single
    assert env.sim.preemptions.sum() == fresh.preemptions.sum() > 0  # the case does preempt


def test_cooperation_lets_a_short_job_of_another_agent_through():
    """scheduler_0's long job holds the cluster; scheduler_1's short job arrives. Per-agent SRTF (own jobs only)
    cannot help it; cooperative SRTF has scheduler_0 yield, and the average JCT drops."""
    rows = [(0, 5000, 16), (100, 100, 16)]
    own = play(two_agent_env(rows), 0, HeuristicMultiAgent.from_name("srtf-consolidate+backfill+preempt"))
    env = two_agent_env(rows)
    coop = play(env, 0, HeuristicMultiAgent.from_name("srtf-consolidate+backfill+preempt+coop"))
    assert env.sim.preemptions.tolist() == [1, 0]
    assert own["avg_jct"] == pytest.approx(((5000 + 4900 + 100) / 2), rel=0.02)  # job 1 waits for job 0
    assert coop["avg_jct"] < 0.6 * own["avg_jct"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), k=st.sampled_from([2, 3]))
def test_random_valid_actions_preempt_only_the_actor_s_own_jobs(seed, k):
    """Whatever valid actions the agents take, a preempt action stops exactly the acting agent's slot job."""
    env = multi_scheduler_v1.parallel_env(
        num_agents=k, cluster="tiny", num_jobs=20, max_cycles=150, **PREEMPTIVE
    )
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    first = env.first_preempt_action
    while env.agents:
        actions = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
        expected = {
            int(env.running_slots(a)[x - first]): env.agent_index[a]
            for a, x in actions.items()
            if first <= x < env.wait_action
        }
        before = env.sim.preemptions.copy()
        obs, *_ = env.step(actions)
        stopped = np.flatnonzero(env.sim.preemptions > before)
        assert set(stopped.tolist()) == set(expected)
        assert all(env.owner[j] == expected[j] for j in stopped)


def play_waiting(seed: int, k: int, order: str) -> int:
    """One episode of agents that wait whenever they may, checking at every step that waiting is masked for exactly
    one agent, one that can place, when nothing runs and nothing is to arrive (for none otherwise), and that the
    episode finishes every job; how many such stuck steps it met."""
    env = multi_scheduler_v1.parallel_env(
        num_agents=k, cluster="tiny", num_jobs=16, max_cycles=5_000, **{**PREEMPTIVE, "queue_order": order}
    )
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    wait, stuck_seen = env.wait_action, 0
    while env.agents:
        sim = env.sim
        stuck = not sim.running and sim.next_arrival >= sim.num_jobs
        forced = [a for a, o in obs.items() if not o["action_mask"][wait]]
        can_place = [a for a, o in obs.items() if o["action_mask"][: env.first_preempt_action].any()]
        if stuck and can_place:
            stuck_seen += 1
            assert len(forced) == 1 and forced[0] in can_place
        else:
            assert forced == []
        actions = {
            a: wait
            if o["action_mask"][wait] and rng.random() < 0.8
            else int(rng.choice(np.flatnonzero(o["action_mask"])))
            for a, o in obs.items()
        }
        obs, _, terminations, truncations, infos = env.step(actions)
    assert all(terminations.values()) and not any(truncations.values())
    assert infos["scheduler_0"]["metrics"]["jobs"] == 16
    return stuck_seen


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), k=st.sampled_from([2, 3, 8]), order=st.sampled_from(["fifo", "las"]))
def test_exactly_one_agent_must_place_when_nothing_runs_and_episodes_end(seed, k, order):
    play_waiting(seed, k, order)


@pytest.mark.parametrize("k, order", [(2, "fifo"), (8, "las")])
def test_the_waiting_agents_reach_the_end_of_window_state(k, order):
    """The property above is exercised: these fixed episodes do reach steps where nothing runs or arrives (not every
    random episode does)."""
    assert play_waiting(0, k, order) > 0


def module_for(k: int):
    kw = dict(num_agents=k, cluster="tiny", num_jobs=24, **PREEMPTIVE)
    return types.SimpleNamespace(
        env=functools.partial(multi_scheduler_v1.env, **kw),
        parallel_env=functools.partial(multi_scheduler_v1.parallel_env, **kw),
    )


@pytest.mark.parametrize("k", [2, 8])
@pytest.mark.filterwarnings("ignore:Observation is not a NumPy array")
@pytest.mark.filterwarnings("ignore:Observation space for each agent probably should be")
def test_pettingzoo_api_tests_on_the_preemptive_env(k):
    m = module_for(k)
    parallel_api_test(m.parallel_env(), num_cycles=50)
    parallel_seed_test(m.parallel_env, num_cycles=30)
    api_test(m.env(), num_cycles=30)
    state_test(m.env(), m.parallel_env(), 20)


def test_the_actor_scores_preempt_slots_and_reads_coordination():
    import torch
    from gpusched_lab.agents.methods.hmarl.agent import (
        HMARLActor,
        network_config,
        obs_dims,
        stack_agents,
        to_tensors,
    )

    env = multi_scheduler_v1.parallel_env(num_agents=2, cluster="tiny", num_jobs=24, **PREEMPTIVE)
    obs, _ = env.reset(seed=1)
    dims = obs_dims(env)
    assert (dims["preempt"], dims["window"], dims["coordination"]) == (2, 4, len(COORDINATION_FEATURES))
    torch.manual_seed(0)
    actor = HMARLActor(network_config(env, 16, 1), dims)
    batch = to_tensors(stack_agents(obs, env.possible_agents, np.zeros((2, env.num_choices))), "cpu")
    logits, _ = actor(batch)
    assert logits.shape == (2, env.wait_action + 1)
    # the preempt logits come from the running rows: changing a running row's coordination features moves them only
    batch2 = {k: v.clone() for k, v in batch.items()}
    batch2["coordination_features"][:, env.heads :] += 1.0
    logits2, _ = actor(batch2)
    first = env.first_preempt_action
    assert torch.equal(logits[:, :first], logits2[:, :first])
    assert not torch.equal(logits[:, first : env.wait_action], logits2[:, first : env.wait_action])


def test_min_run_and_no_restart_at_the_instant_of_preemption():
    # job 0 (scheduler_0) runs from t = 0; job 1 (scheduler_1) arrives at t = 100 and job 3 at t = 400
    rows = [(0, 5000, 16), (100, 300, 8), (200, 300, 8), (400, 100, 8), (9000, 100, 1)]
    env = two_agent_env(rows, min_run=300.0)
    obs, _ = env.reset(seed=0)
    first = env.first_preempt_action
    obs, *_ = env.step({"scheduler_0": env.candidate_action("scheduler_0", "consolidate")})
    # t = 100 and 200 (jobs 1 and 2 arrive): job 0 has run less than min_run, nobody can act, the clock runs on;
    # min_run passes at t = 300 without an event: the next decision is job 3's arrival
    assert env.sim.now == 400.0 and env.running_slots("scheduler_0")[0] == 0
    assert obs["scheduler_0"]["action_mask"][first]
    env_no_min = two_agent_env(rows)
    env_no_min.reset(seed=0)
    env_no_min.step({"scheduler_0": env_no_min.candidate_action("scheduler_0", "consolidate")})
    assert (
        env_no_min.sim.now == 100.0
    )  # without min_run, job 1's arrival is a decision (job 0 is preemptible)
    obs, *_ = env.step({"scheduler_0": first})
    assert env.sim.status[0] == QUEUED and env.sim.now == 400.0
    # job 0 waits again but may not restart at this instant (job 2 of scheduler_0 may)
    assert 0 in env.head_jobs("scheduler_0")
    placeable = {
        int(env.head_jobs("scheduler_0")[a // env.num_candidates])
        for a in np.flatnonzero(obs["scheduler_0"]["action_mask"][: env.num_choices])
    }
    assert placeable == {2}
    with pytest.raises(ValueError, match="min_run"):
        two_agent_env(rows, min_run=-1.0)
