"""The documented placement rules (``gpusched_envs/policies/placement.py``) on the toy cluster with hand-set occupancy.

Toy cluster (tests/toy.py): 2 racks x 2 servers x 4 GPUs. Server s holds GPUs 4s..4s+3; servers 0, 1 are rack 0
(GPUs 0-7), servers 2, 3 are rack 1 (GPUs 8-15). Every job is submitted at t=0; the test starts the background jobs
on the GPUs it names with ``sim.start`` and then asks a placement rule where the last job (the probe) would go.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.policies.placement import closest, consolidate, first_fit, pack
from gpusched_envs.sim import SimConfig, Simulator
from tests.toy import make_workload

DURATION = SimConfig(speed_model="duration")


def occupied(cluster, background, probe_gpus, probe_milli=1000):
    """A simulator at t=0 with each (gpus, milli) of ``background`` running on exactly those GPUs and a queued
    probe job (the last one) asking for ``probe_gpus`` GPUs at ``probe_milli``."""
    rows = [(0, 1000, len(g), 0, milli) for g, milli in background]
    rows.append((0, 1000, probe_gpus, 0, probe_milli))
    sim = Simulator(cluster, make_workload(rows), DURATION)
    assert sim.next_decision() and sim.now == 0.0
    for job, (gpus, _) in enumerate(background):
        sim.start(job, gpus)
    return sim, len(background)


def whole(*gpu_lists):
    return [(list(g), 1000) for g in gpu_lists]


def placed(gpus):
    return None if gpus is None else np.asarray(gpus).tolist()


def test_consolidate_waits_and_closest_takes_the_best_fit_rack(toy_cluster):
    # 1-GPU jobs on GPUs 0, 4, 8 and 12, 13: free per server = 3, 3 | 3, 2; no server has 4 free
    sim, probe = occupied(toy_cluster, whole([0], [4], [8], [12], [13]), 4)
    # consolidate never spreads a job that fits one server: it waits
    assert consolidate(sim, probe) is None
    # closest: no server fits, so one rack. Rack 0 has 6 free, rack 1 has 5: both fit 4, best fit = rack 1.
    # Inside it the fullest-free server first: server 2 (GPUs 9, 10, 11), then server 3 (GPU 14; 15 is not needed)
    assert placed(closest(sim, probe)) == [9, 10, 11, 14]
    # first-fit: the lowest-numbered free GPUs, wherever they are
    assert placed(first_fit(sim, probe)) == [1, 2, 3, 5]


def test_consolidate_best_fit_server_for_a_job_that_fits_one(toy_cluster):
    # free per server: 3 (GPUs 1-3), 2 (GPUs 6, 7), 1 (GPU 11), 4. A 2-GPU job goes to the fitting server with
    # the fewest free GPUs: server 1 (server 2 has only 1 free, so it does not fit)
    sim, probe = occupied(toy_cluster, whole([0], [4, 5], [8, 9, 10]), 2)
    assert placed(consolidate(sim, probe)) == [6, 7]
    assert placed(closest(sim, probe)) == [6, 7]
    assert placed(first_fit(sim, probe)) == [1, 2]


def test_consolidate_takes_whole_servers_of_one_rack_for_a_large_job(toy_cluster):
    # GPU 0 busy: rack 0 has one wholly free server (1), rack 1 has two (2, 3). An 8-GPU job needs 2 whole
    # servers; only rack 1 holds them
    sim, probe = occupied(toy_cluster, whole([0]), 8)
    assert placed(consolidate(sim, probe)) == list(range(8, 16))
    # GPUs 0 and 8 busy: no rack has two whole free servers; consolidate takes the whole servers 1 and 3 across
    # racks rather than use the partly busy servers 0 and 2
    sim, probe = occupied(toy_cluster, whole([0], [8]), 8)
    assert placed(consolidate(sim, probe)) == [4, 5, 6, 7, 12, 13, 14, 15]
    # closest may use partly busy servers. No rack has 8 free (7 and 7): the fewest racks, the rack with more free
    # GPUs first (tie: rack 0), inside it the fullest-free server first: server 1 (4-7), server 0 (1-3); the last
    # GPU from rack 1's fullest-free server 3 (GPU 12)
    assert sorted(placed(closest(sim, probe))) == [1, 2, 3, 4, 5, 6, 7, 12]


def test_pack_prefers_a_server_running_a_job_of_the_same_size(toy_cluster):
    # server 0: two 1-GPU jobs (GPUs 0, 1) -> 2 free; server 1: one 2-GPU job (GPUs 6, 7) -> 2 free;
    # server 2: a 2-GPU job and a 1-GPU job (GPUs 8-10) -> 1 free; server 3 empty
    sim, probe = occupied(toy_cluster, whole([0], [1], [6, 7], [8, 9], [10]), 2)
    # closest: best fit among servers 0 and 1 (2 free each) keeps the lowest index, server 0
    assert placed(closest(sim, probe)) == [2, 3]
    # pack: server 1 runs a 2-GPU job and fits -> preferred (server 2 also runs one but has 1 free)
    assert placed(pack(sim, probe)) == [4, 5]
    # a 3-GPU probe: no fitting server runs a 3-GPU job, so pack falls back to best fit: server 3 is the only
    # server with 3 free GPUs
    sim, probe = occupied(toy_cluster, whole([0], [1], [6, 7], [8, 9], [10]), 3)
    assert placed(pack(sim, probe)) == [12, 13, 14]


@pytest.mark.parametrize(
    ("milli", "expected"),
    [
        # shares left: GPU 3 -> 500, GPU 5 -> 700, GPU 9 -> 300, every other GPU 1000
        (250, 9),  # all fit; the smallest share left is GPU 9's 300
        (400, 3),  # GPU 9 (300) is too small; next best fit GPU 3 (500)
        (600, 5),  # only GPU 5 (700) and the wholly free GPUs fit; best fit GPU 5
        (800, 0),  # only wholly free GPUs fit: ties keep the lowest id, GPU 0
    ],
)
def test_fractional_jobs_take_the_most_used_gpu_that_fits(toy_cluster, milli, expected):
    background = [([3], 500), ([5], 300), ([9], 700)]
    sim, probe = occupied(toy_cluster, background, 1, probe_milli=milli)
    assert placed(pack(sim, probe)) == [expected]
    assert placed(closest(sim, probe)) == [expected]
    # first-fit does not look at the shares: the lowest-numbered GPU with room, GPU 0 (wholly free)
    assert placed(first_fit(sim, probe)) == [0]


def test_first_fit_takes_the_lowest_numbered_wholly_free_gpus(toy_cluster):
    # GPUs 0, 2 and 5 run whole jobs; GPU 1 holds a 0.3-GPU job, so it is not free for a whole-GPU job
    sim, probe = occupied(toy_cluster, [([0], 1000), ([2], 1000), ([5], 1000), ([1], 300)], 3)
    assert placed(first_fit(sim, probe)) == [3, 4, 6]
    # 12 GPUs are wholly free (all but 0, 1, 2, 5): a 12-GPU job takes all of them, a 13-GPU one waits
    background = [([0], 1000), ([2], 1000), ([5], 1000), ([1], 300)]
    sim, probe = occupied(toy_cluster, background, 12)
    assert placed(first_fit(sim, probe)) == [3, 4, *range(6, 16)]
    sim, probe = occupied(toy_cluster, background, 13)
    assert first_fit(sim, probe) is None
