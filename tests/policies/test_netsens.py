"""NetSens delay scheduling + network-sensitive preemption (``gpusched_envs/policies/netsens.py``): exact start
times, placements and victims on the toy cluster.

Toy cluster (tests/toy.py): 2 racks x 2 servers x 4 GPUs. Server s holds GPUs 4s..4s+3; servers 0, 1 are rack 0,
servers 2, 3 rack 1. Duration speed model: a job runs exactly its duration wherever it is placed; restart delay 30 s.
Background jobs are started by the test on hand-picked GPUs when they arrive; the policy schedules every other job
(and any background job it preempted). Classes are given by hand: 3 classes, class 2 is the top (most sensitive).
"""

from __future__ import annotations

import numpy as np

from gpusched_envs.policies.netsens import DelaySchedulingPolicy
from gpusched_envs.sim import SimConfig, Simulator
from tests.toy import make_workload

CONFIG = SimConfig(speed_model="duration", restart_delay=30.0)
TIMERS = [0.0, 300.0, 900.0]  # seconds per class 0, 1, 2


def drive(cluster, rows, classes, background, *, min_run=600.0, preemption=True):
    """Run to the end. ``background``: job -> GPUs it is started on when it first arrives (before the policy
    runs). Returns the simulator and every start as (time, job, sorted GPUs)."""
    sim = Simulator(cluster, make_workload(rows), CONFIG)
    policy = DelaySchedulingPolicy(np.asarray(classes), TIMERS, min_run=min_run, preemption=preemption)
    policy.reset(sim)
    starts: list[tuple[float, int, list[int]]] = []
    start = sim.start

    def recording_start(job, gpus):
        starts.append((float(sim.now), int(job), sorted(int(g) for g in gpus)))
        start(job, gpus)

    sim.start = recording_start
    pending = dict(background)
    while sim.next_decision():
        for job in [j for j in sim.queue if j in pending]:
            sim.start(job, pending.pop(job))
        policy.schedule(sim)
    return sim, starts


# five long 1-GPU class-0 jobs on GPUs 0, 4, 8, 12, 13: free per server 3, 3 | 3, 2, so no server has 4 free
BUSY = [(0, 5000, 1)] * 5
BUSY_AT = {0: [0], 1: [4], 2: [8], 3: [12], 4: [13]}


def test_a_job_waits_its_class_timer_for_consolidation_then_takes_closest(toy_cluster):
    # job 5: 4 GPUs, class 1 (timer 300 s), enters the queue at t=10. It cannot be consolidated, so it waits until
    # 10 + 300 = 310 and then takes `closest`: rack 1 (5 free, the best-fit rack; rack 0 has 6), its fullest-free
    # server 2 (GPUs 9-11) first, then GPU 14 of server 3
    sim, starts = drive(toy_cluster, [*BUSY, (10, 100, 4)], [0, 0, 0, 0, 0, 1], BUSY_AT)
    assert starts[5:] == [(310.0, 5, [9, 10, 11, 14])]
    assert sim.finish_time[5] == 410.0
    assert sim.preemptions.sum() == 0


def test_a_class_with_timer_zero_is_spread_at_once(toy_cluster):
    # the same job in class 0 (timer 0) takes `closest` as soon as it arrives
    _, starts = drive(toy_cluster, [*BUSY, (10, 100, 4)], [0] * 6, BUSY_AT)
    assert starts[5:] == [(10.0, 5, [9, 10, 11, 14])]


def test_a_server_freed_before_the_timer_consolidates_the_job(toy_cluster):
    # the job on GPU 4 ends at t=200, before the deadline 310: server 1 is then wholly free and job 5 is consolidated
    # there at 200 (the completion is a decision point)
    rows = [*BUSY, (10, 100, 4)]
    rows[1] = (0, 200, 1)
    sim, starts = drive(toy_cluster, rows, [0, 0, 0, 0, 0, 1], BUSY_AT)
    assert starts[5:] == [(200.0, 5, [4, 5, 6, 7])]
    assert sim.finish_time[5] == 300.0


# jobs 0, 1: class 0, 1 GPU each on GPUs 0 and 1 from t=0; jobs 2, 3: class 1 on GPUs 8 and 12; job 4: class 0,
# 1 GPU on GPU 4, arrives at t=500 (job ids follow submission order); job 5: 4 GPUs, top class 2, arrives at t=700
# and cannot be consolidated (free per server 2, 3, 3, 3)
PREEMPT_ROWS = [(0, 5000, 1), (0, 5000, 1), (0, 5000, 1), (0, 5000, 1), (500, 5000, 1), (700, 100, 4)]
PREEMPT_CLASSES = [0, 0, 1, 1, 0, 2]
PREEMPT_AT = {0: [0], 1: [1], 2: [8], 3: [12], 4: [4]}


def test_preemption_skips_jobs_that_ran_less_than_min_run(toy_cluster):
    # at t=700 jobs 0 and 1 have run 700 s >= 600 and may be preempted; job 4 has run 200 s and may not; jobs 2, 3
    # are not least-sensitive. The only server where preemption frees 4 GPUs is server 0 (2 free + jobs 0 and 1):
    # both are preempted at 700 and job 5 starts there at once, without waiting for its 900 s timer
    sim, starts = drive(toy_cluster, PREEMPT_ROWS, PREEMPT_CLASSES, PREEMPT_AT, min_run=600.0)
    assert starts[5] == (700.0, 5, [0, 1, 2, 3])
    assert sim.preemptions.tolist() == [1, 1, 0, 0, 0, 0]
    assert sim.finish_time[5] == 800.0


def test_preemption_picks_the_server_needing_the_fewest_victims(toy_cluster):
    # with min_run 150 job 4 (ran 200 s) is eligible too: server 1 needs one preemption (job 4), server 0 two, so
    # job 4 alone is preempted at 700 and job 5 takes server 1
    sim, starts = drive(toy_cluster, PREEMPT_ROWS, PREEMPT_CLASSES, PREEMPT_AT, min_run=150.0)
    assert starts[5] == (700.0, 5, [4, 5, 6, 7])
    assert sim.preemptions.tolist() == [0, 0, 0, 0, 1, 0]


def test_no_preemption_when_disabled(toy_cluster):
    # without preemption job 5 waits its 900 s timer (until 1600) and is spread by `closest`: no rack holds 4 free
    # GPUs in one server; rack 0 has 5 free (2 + 3), rack 1 has 6: best fit rack 0, fullest-free server 1 first
    # (GPUs 5, 6, 7), then GPU 2 of server 0
    _, starts = drive(toy_cluster, PREEMPT_ROWS, PREEMPT_CLASSES, PREEMPT_AT, preemption=False)
    assert starts[5] == (1600.0, 5, [2, 5, 6, 7])


def test_a_preempted_job_is_rescheduled_at_once(toy_cluster):
    # job 4 (class 0, timer 0) is preempted at 700; 8 GPUs stay free, so it should restart at 700 on the best-fit
    # server for 1 GPU: server 0 (2 free: GPUs 2, 3) -> GPU 2; it runs after the 30 s restart delay
    _, starts = drive(toy_cluster, PREEMPT_ROWS, PREEMPT_CLASSES, PREEMPT_AT, min_run=150.0)
    assert starts[6] == (700.0, 4, [2])


def test_preemption_happens_when_victims_reach_min_run(toy_cluster):
    # job 5 (4 GPUs, top class, timer 900) enters at t=100; no server has 4 free (2, 3, 3, 3). The class-0 jobs 0, 1
    # on server 0 reach min_run = 600 s at t=600; preempting both then consolidates job 5 on server 0 (jobs 2-4 are
    # class 1). A timer at 600 (when the first class-0 job reaches min_run) makes it happen then.
    rows = [(0, 5000, 1)] * 5 + [(100, 100, 4)]
    _, starts = drive(toy_cluster, rows, [0, 0, 1, 1, 1, 2], {0: [0], 1: [1], 2: [8], 3: [12], 4: [4]})
    assert starts[5] == (600.0, 5, [0, 1, 2, 3])
