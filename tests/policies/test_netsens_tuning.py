"""NetSens on hand-built cases: when waiting for consolidation beats spreading and when it loses, what
network-sensitive preemption frees and how the preempted job resumes, the preemption bound, and the auto-tuner's
direction (``TimerTuner``, ``netsens-auto``, the DelayTuning-v1 agent).

Toy cluster (tests/toy.py): 2 racks x 2 servers x 4 GPUs (server s holds GPUs 4s..4s+3; servers 0, 1 are rack 0),
intra-server link 100 GB/s, NIC 10 GB/s, rack uplink 5 GB/s; model ``additive``: 0.1 s compute per iteration,
1 GB gradients, iteration = compute + communication. A 4-GPU job consolidated on one server takes
0.1 + 2·3/4·1e9/100e9 = 0.115 s per iteration; dealt over both racks, its ring crosses the 5 GB/s uplinks:
0.1 + 1.5·1e9/5e9 = 0.4 s. Interference is off, so these are the only speeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.envs.delay_tuning import DelayTuningEnv
from gpusched_envs.policies import make_policy
from gpusched_envs.policies.netsens import (
    CONSOLIDATED,
    PREEMPTED_FOR,
    SPREAD,
    AutoDelaySchedulingPolicy,
    DelaySchedulingPolicy,
    StartRecord,
    TimerTuner,
)
from gpusched_envs.sim import SimConfig, Simulator
from tests.toy import make_workload, toy_cluster

THROUGHPUT = SimConfig(interference=False, restart_delay=30.0)
DURATION = SimConfig(speed_model="duration", restart_delay=30.0)
CONSOLIDATED_ITER, SPREAD_ITER = 0.115, 0.4

# four 3-GPU jobs A (one per server: consolidate's best fit) leave one free GPU per server; B (4 GPUs, class 1)
# arrives at t=1 and cannot be consolidated until some A finishes


def rows_with_a_lasting(a_duration: float):
    return [(0, a_duration, 3)] * 4 + [(1, 50, 4)]


CLASSES = [0, 0, 0, 0, 1]


def run(rows, classes, timers, *, config=THROUGHPUT, policy=None, **kwargs):
    sim = Simulator(toy_cluster(), make_workload(rows), config)
    policy = policy or DelaySchedulingPolicy(np.asarray(classes), timers, **kwargs)
    sim.run(policy)
    return sim, policy


def b_spread_runtime() -> float:
    return 50 * SPREAD_ITER / CONSOLIDATED_ITER  # B's work is 50 s at the consolidated speed


def test_waiting_for_consolidation_beats_spreading():
    # A ends at t=100. With a 300 s timer B waits, is consolidated on A's server at 100 and ends at 150; spread at
    # once (timer 0) it runs at the uplink-bound speed and ends at 1 + 50 * 0.4 / 0.115 = 174.9
    waited, policy = run(rows_with_a_lasting(100), CLASSES, [0.0, 300.0, 300.0], preemption=False)
    spread, _ = run(rows_with_a_lasting(100), CLASSES, [0.0, 0.0, 0.0], preemption=False)
    assert waited.finish_time[4] == pytest.approx(150.0)
    assert spread.finish_time[4] == pytest.approx(1 + b_spread_runtime())
    assert waited.finish_time[4] < spread.finish_time[4]
    assert waited.metrics()["communication_overhead"] < spread.metrics()["communication_overhead"]
    record = policy.start_log[-1]
    assert (record.job, record.how, record.waited) == (4, CONSOLIDATED, pytest.approx(99.0))


def test_waiting_for_consolidation_loses_when_nothing_frees_up():
    # A runs 1000 s: B waits its whole 300 s timer for nothing, then is spread at 301 and ends 300 s later than if
    # spread at once; the log records a timed-out wait and the spread slowdown 0.4 / 0.115
    waited, policy = run(rows_with_a_lasting(1000), CLASSES, [0.0, 300.0, 300.0], preemption=False)
    spread, _ = run(rows_with_a_lasting(1000), CLASSES, [0.0, 0.0, 0.0], preemption=False)
    assert spread.finish_time[4] == pytest.approx(1 + b_spread_runtime())
    assert waited.finish_time[4] == pytest.approx(301 + b_spread_runtime())
    record = policy.start_log[-1]
    assert (record.job, record.how, record.waited) == (4, SPREAD, pytest.approx(300.0))
    assert record.slowdown == pytest.approx(SPREAD_ITER / CONSOLIDATED_ITER)


# duration model (a job runs exactly its duration): jobs 0, 1 class 0 on GPUs 0, 1 from t=0; jobs 2, 3 class 1 on
# GPUs 8, 12; job 4 class 0 on GPU 4 from t=500; job 5: 4 GPUs, top class, arrives at 700 (free per server 2, 3, 3, 3)
PREEMPT_ROWS = [(0, 5000, 1), (0, 5000, 1), (0, 5000, 1), (0, 5000, 1), (500, 5000, 1), (700, 100, 4)]
PREEMPT_CLASSES = [0, 0, 1, 1, 0, 2]
PREEMPT_AT = {0: [0], 1: [1], 2: [8], 3: [12], 4: [4]}


def drive_with_background(rows, classes, background, **kwargs):
    sim = Simulator(toy_cluster(), make_workload(rows), DURATION)
    policy = DelaySchedulingPolicy(np.asarray(classes), [0.0, 300.0, 900.0], **kwargs)
    policy.reset(sim)
    pending = dict(background)
    progress_at_preemption = {}
    preempt = sim.preempt

    def recording_preempt(job):
        preempt(job)
        progress_at_preemption[int(job)] = (
            float(sim.now),
            float(sim.done_work[job] * sim.job_ideal_iter[job]),
        )

    sim.preempt = recording_preempt
    while sim.next_decision():
        for job in [j for j in sim.queue if j in pending]:
            sim.start(job, pending.pop(job))
        policy.schedule(sim)
    return sim, policy, progress_at_preemption


def test_preemption_frees_exactly_the_slot_needed_and_the_victim_resumes_with_its_progress():
    # min_run 150: job 4 (ran 200 s) is eligible; server 1 has 3 free GPUs, so preempting job 4 alone frees the one
    # GPU job 5 lacks. Job 4 keeps its 200 s of progress, restarts at 700 on GPU 2 (best fit), pays the 30 s restart
    # delay and ends at 700 + 30 + 4800
    sim, policy, preempted = drive_with_background(PREEMPT_ROWS, PREEMPT_CLASSES, PREEMPT_AT, min_run=150.0)
    assert sim.preemptions.tolist() == [0, 0, 0, 0, 1, 0]
    assert preempted == {4: (700.0, pytest.approx(200.0))}
    by_job = {r.job: r for r in policy.start_log}
    assert by_job[5].how == PREEMPTED_FOR and by_job[5].time == 700.0
    assert sim.finish_time[5] == pytest.approx(800.0)
    assert by_job[4].time == 700.0
    assert sim.finish_time[4] == pytest.approx(700.0 + 30.0 + 4800.0)
    assert sim.finish_time[:4].tolist() == [5000.0] * 4  # nobody else was touched


def test_max_preemptions_zero_disables_victims():
    sim, _, preempted = drive_with_background(
        PREEMPT_ROWS, PREEMPT_CLASSES, PREEMPT_AT, min_run=150.0, max_preemptions=0
    )
    assert preempted == {} and sim.preemptions.sum() == 0


def random_rows(rng, n=40):
    submit = np.sort(rng.uniform(0, 4000, n))
    gpus = rng.choice([1, 1, 1, 2, 4], n)
    return [(float(s), float(rng.uniform(200, 3000)), int(g)) for s, g in zip(submit, gpus, strict=True)]


@pytest.mark.parametrize("bound", [1, 2])
def test_no_job_is_preempted_more_than_the_bound(bound):
    # many top-class 4-GPU jobs against long one-GPU jobs, min_run 0: without a bound some job is preempted more
    # often than `bound` (so the check can fail); with it, never
    worst_unbounded = 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        rows = random_rows(rng)
        classes = [0 if g == 1 else 2 for *_, g in rows]
        unbounded, _ = run(
            rows, classes, [0.0, 0.0, 600.0], config=DURATION, min_run=0.0, max_preemptions=10**6
        )
        bounded, _ = run(
            rows, classes, [0.0, 0.0, 600.0], config=DURATION, min_run=0.0, max_preemptions=bound
        )
        worst_unbounded = max(worst_unbounded, int(unbounded.preemptions.max()))
        assert bounded.preemptions.max() <= bound
        assert bounded.drained
    assert worst_unbounded > bound


# ------------------------------------------------------------------ the auto-tuner
LEVELS = [0.0, 100.0, 400.0]


def record(cls, waited, how, slowdown=1.0):
    return StartRecord(0.0, 0, cls, waited, how, slowdown)


def test_tuner_raises_a_timer_when_spreading_costs_more_than_the_next_level():
    # jobs have run 100 s on average so far: a 2.5x slowdown costs 150 s, a 1.5x one 50 s
    tuner = TimerTuner(LEVELS, [0, 0, 0])
    tuner.update([record(1, 0.0, SPREAD, 2.5), record(2, 0.0, SPREAD, 1.5)], expected_runtime=100.0)
    assert tuner.level.tolist() == [0, 1, 0]  # class 1: 150 > 100 -> up; class 2: 50 < 100 -> stays
    assert tuner.timers.tolist() == [0.0, 100.0, 0.0]
    # before any job has finished there is no runtime to weigh the slowdown by: no move
    tuner.update([record(1, 0.0, SPREAD, 9.0)], expected_runtime=float("nan"))
    assert tuner.level.tolist() == [0, 1, 0]


def test_tuner_lowers_a_timer_when_waits_time_out_and_spreading_is_cheap():
    tuner = TimerTuner(LEVELS, [2, 2, 2])
    timed_out = [record(1, 400.0, SPREAD, 1.5)] * 3
    tuner.update([*timed_out, record(1, 30.0, CONSOLIDATED)], 100.0)  # 3 timed out > 1 paid off, 50 s < 400
    assert tuner.level.tolist() == [2, 1, 2]
    # waits that paid off more often than they timed out: no step down, and 50 s of cost is no reason to go up
    paid = [record(1, 30.0, CONSOLIDATED), record(1, 60.0, PREEMPTED_FOR)]
    tuner.update([record(1, 400.0, SPREAD, 1.5), *paid], 100.0)
    assert tuner.level.tolist() == [2, 1, 2]
    assert [h.tolist() for h in tuner.history] == [[2, 2, 2], [2, 1, 2], [2, 1, 2]]


def test_tuner_rejects_bad_levels():
    with pytest.raises(ValueError, match="increasing"):
        TimerTuner([0.0, 0.0], [0])
    with pytest.raises(ValueError, match="initial levels"):
        TimerTuner(LEVELS, [3])


def test_netsens_auto_policy_raises_the_timer_after_a_costly_spread():
    # B (class 1, timer 0) is spread at t=1, slowed 0.4 / 0.115 = 3.48x. A later one-GPU job makes t=160 a decision
    # point after the first 150 s period; the four A jobs have finished by then after running 100 s each, so the
    # spread cost 2.48 * 100 = 248 s exceeds the next level (100 s): the tuner moves class 1 up one level
    rows = [*rows_with_a_lasting(100), (160, 10, 1)]
    policy = AutoDelaySchedulingPolicy(
        np.asarray([*CLASSES, 0]), levels=LEVELS, initial_level=[0, 0, 0], period=150.0, preemption=False
    )
    sim, _ = run(rows, None, None, policy=policy)
    assert sim.finish_time[4] == pytest.approx(1 + b_spread_runtime())
    assert [h.tolist() for h in policy.tuner.history][:2] == [[0, 0, 0], [0, 1, 0]]
    assert policy.timers.tolist() == [0.0, 100.0, 0.0]


def test_netsens_auto_is_a_registered_policy():
    policy = make_policy("netsens-auto")
    assert isinstance(policy, AutoDelaySchedulingPolicy) and policy.name == "netsens-auto"


def test_auto_agent_on_delay_tuning_raises_the_timer_after_a_costly_spread():
    from gpusched_lab.agents.methods.netsens.agent import NetSensAutoAgent

    rows = [*rows_with_a_lasting(100), (160, 10, 1)]
    env = DelayTuningEnv(
        toy_cluster(),
        make_workload(rows),
        interval=150.0,
        timer_levels=LEVELS,
        interference=False,
        preemption=False,
        time_scale=1.0,
    )
    agent = NetSensAutoAgent(env, initial_level=[0, 0, 0])
    obs, _ = env.reset(seed=0)
    actions = []
    while True:
        a = agent.act(obs)
        actions.append(env.timers_of(a).tolist())
        obs, _, terminated, truncated, _ = env.step(a)
        if terminated or truncated:
            break
    assert env.job_class.tolist()[4] == 1
    assert actions[0] == [0.0, 0.0, 0.0]  # B is spread in the first interval at timer 0
    assert actions[1] == [0.0, 100.0, 0.0]  # the agent then raises class 1's timer


def test_tuner_climbs_even_after_a_timed_out_wait_when_spreading_costs_more_than_the_next_level():
    # a wait of 100 s ended in spreading with a 6x slowdown: 500 s lost, more than the next level (400 s) -> up
    tuner = TimerTuner(LEVELS, [0, 1, 0])
    tuner.update([record(1, 100.0, SPREAD, 6.0)], 100.0)
    assert tuner.level.tolist() == [0, 2, 0]
