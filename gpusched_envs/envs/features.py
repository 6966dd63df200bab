"""What the envs observe and reward on beyond the simulator's state: relative GPU speed, and the running integrals
behind the −Σ JCT and throughput rewards (exact across every event between two decisions). Network sensitivity
lives in :mod:`gpusched_envs.sim.sensitivity`."""

from __future__ import annotations

import itertools

import numpy as np

from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.sim.engine import DONE, RUNNING
from gpusched_envs.sim.engine import portable_dot as _dot
from gpusched_envs.sim.topology import Cluster


def gpu_relative_speed(cluster: Cluster) -> np.ndarray:
    """(G,) speed of each GPU relative to the catalogue's reference GPU: geometric mean over models of
    ``iteration_time[model, reference] / iteration_time[model, type]`` (1.0 = reference, 2.0 = twice as fast)."""
    cat = cluster.catalog
    ref = cat.gpu_index(cat.reference_gpu)
    log_ratio = np.log(cat.iteration_time[:, [ref]] / cat.iteration_time).mean(axis=0)  # (T,)
    return np.exp(log_ratio)[cluster.gpu_type]


class RunningTotals:
    """Exact integrals over the whole run, read at decision points.

    ``weighted_time(now)`` = Σ over arrived jobs of ``weight_j · (min(now, finish_j) − submit_j)``: with weight 1 it is
    the total JCT accrued so far (∫ jobs-in-system dt), with weight 1/ideal runtime the accrued slowdown.
    ``goodput(now)`` = ideal GPU-seconds of training progress made so far (work done × ideal iteration time × GPUs).
    Call :meth:`sync` after every ``sim.next_decision()``: jobs finish only inside it, and a job that arrives there
    cannot finish before the next decision point, so the jobs in the system at the previous sync are the only
    candidates for having finished.
    """

    def __init__(self, sim, weight: np.ndarray | None = None):
        self.sim = sim
        n = sim.num_jobs
        self.weight = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
        self.submit = sim.workload.submit_time
        share = sim.job_gpus_n * sim.job_milli / 1000.0  # GPUs x share of each (1..1000 milli, validated)
        self.gpu_seconds_per_unit = sim.job_ideal_iter * share  # ideal GPU-seconds per unit of work
        self.live = np.zeros(0, dtype=np.int64)
        self._one = np.zeros(2)  # the banked terms of a single finished job
        self.done_weighted = 0.0
        self.done_goodput = 0.0
        self.sync()

    def sync(self, now_live: np.ndarray | None = None) -> None:
        """Bank the jobs that finished since the last sync; ``now_live`` (optional): the jobs in the system now, in
        queue then running order, as another total of the same simulator computed them at this instant."""
        sim = self.sim
        if len(self.live):
            self.bank(self.live)
        if now_live is not None:
            self.live = now_live
            return
        self.live = np.fromiter(
            itertools.chain(sim.queue, sim.running), dtype=np.int64, count=len(sim.queue) + len(sim.running)
        )

    def bank(self, jobs: np.ndarray) -> None:
        """Bank those of ``jobs`` (in their order) that have finished."""
        sim = self.sim
        one = self._one
        args = (
            jobs,
            sim.status,
            DONE,
            self.weight,
            sim.finish_time,
            self.submit,
            sim._jf,
            self.gpu_seconds_per_unit,
        )
        finished = _kernels.one_finished(*args, one)
        if finished == 1:  # the usual case: one job finished since the last sync
            self.done_weighted += float(one[0])
            self.done_goodput += float(one[1])
        elif finished:
            newly = jobs[sim.status[jobs] == DONE]
            self.done_weighted += _dot(self.weight[newly], sim.finish_time[newly] - self.submit[newly])
            self.done_goodput += _dot(sim.job_work[newly], self.gpu_seconds_per_unit[newly])

    def weighted_time(self) -> float:
        live = self.live
        return self.done_weighted + _dot(self.weight[live], self.sim.now - self.submit[live])

    def goodput(self) -> float:
        sim, live = self.sim, self.live
        done = sim.done_work[live] + np.where(
            sim.status[live] == RUNNING, sim.rate[live] * (sim.now - sim.last_update[live]), 0.0
        )
        done = np.minimum(done, sim.job_work[live])
        return self.done_goodput + _dot(done, self.gpu_seconds_per_unit[live])
