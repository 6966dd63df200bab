"""Per-job and per-GPU quantities the envs observe and reward on: network sensitivity, relative GPU speed, and the
running integrals behind the −Σ JCT and throughput rewards (exact across every event between two decisions)."""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from gpusched_envs.sim import throughput as tp
from gpusched_envs.sim.engine import DONE, RUNNING
from gpusched_envs.sim.topology import Cluster


def gpu_relative_speed(cluster: Cluster) -> np.ndarray:
    """(G,) speed of each GPU relative to the catalogue's reference GPU: geometric mean over models of
    ``iteration_time[model, reference] / iteration_time[model, type]`` (1.0 = reference, 2.0 = twice as fast)."""
    cat = cluster.catalog
    ref = cat.gpu_index(cat.reference_gpu)
    log_ratio = np.log(cat.iteration_time[:, [ref]] / cat.iteration_time).mean(axis=0)  # (T,)
    return np.exp(log_ratio)[cluster.gpu_type]


def _spread_gpus(cluster: Cluster, n: int) -> np.ndarray:
    """n GPUs dealt round-robin over racks (then servers), the most spread placement of that size."""
    # sort GPUs by (slot in server, server's rank in its rack, rack): one GPU per server, racks interleaved
    rank_in_rack = np.zeros(cluster.num_servers, dtype=np.int64)
    for r in range(cluster.num_racks):
        servers = np.flatnonzero(cluster.server_rack == r)
        rank_in_rack[servers] = np.arange(len(servers))
    slot = np.arange(cluster.num_gpus) - cluster.server_first_gpu[cluster.gpu_server]
    s = cluster.gpu_server
    order = np.lexsort((cluster.gpu_rack, rank_in_rack[s], slot))
    return np.sort(order[:n])


@lru_cache(
    maxsize=4096
)  # clusters hash by identity; an episode reset asks for the same few (model, size) pairs
def network_sensitivity(cluster: Cluster, model: int, num_gpus: int) -> float:
    """Iteration time of ``model`` on ``num_gpus`` GPUs spread across racks ÷ consolidated (SPEC §3), both at the
    fastest GPU's compute time so that only the network differs; 1.0 for one GPU."""
    if num_gpus <= 1 or num_gpus > cluster.num_gpus:
        return 1.0
    cat = cluster.catalog
    consolidated = tp.ideal_iteration_time(cluster, model, num_gpus)
    compute = float(cat.iteration_time[model, np.unique(cluster.gpu_type)].min())
    shape = tp.placement_shape(cluster, model, _spread_gpus(cluster, num_gpus))
    spread = tp.overlap(compute, tp.communication_time(cluster, model, shape), cat.overlap_gamma[model])
    return float(spread / consolidated)


def job_sensitivities(cluster: Cluster, job_model: np.ndarray, job_gpus: np.ndarray) -> np.ndarray:
    """(J,) network sensitivity of every job, computed once per distinct (model, size)."""
    out = np.ones(len(job_model))
    if not len(job_model):
        return out
    keys = job_model.astype(np.int64) * (cluster.num_gpus + 1) + np.minimum(job_gpus, cluster.num_gpus)
    uniq, inverse = np.unique(keys, return_inverse=True)
    values = np.array(
        [
            network_sensitivity(cluster, int(k // (cluster.num_gpus + 1)), int(k % (cluster.num_gpus + 1)))
            for k in uniq
        ]
    )
    return values[inverse]


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
        share = sim.job_gpus_n * np.minimum(sim.job_milli, 1000) / 1000.0
        self.gpu_seconds_per_unit = sim.job_ideal_iter * share  # ideal GPU-seconds per unit of work
        self.live = np.zeros(0, dtype=np.int64)
        self.done_weighted = 0.0
        self.done_goodput = 0.0
        self.sync()

    def sync(self) -> None:
        sim = self.sim
        live = self.live
        if len(live):
            newly = live[sim.status[live] == DONE]
            if len(newly):
                self.done_weighted += float(
                    np.dot(self.weight[newly], sim.finish_time[newly] - self.submit[newly])
                )
                self.done_goodput += float(np.dot(sim.job_work[newly], self.gpu_seconds_per_unit[newly]))
        self.live = np.fromiter(
            itertools.chain(sim.queue, sim.running), dtype=np.int64, count=len(sim.queue) + len(sim.running)
        )

    def weighted_time(self) -> float:
        live = self.live
        return self.done_weighted + float(np.dot(self.weight[live], self.sim.now - self.submit[live]))

    def goodput(self) -> float:
        sim, live = self.sim, self.live
        done = sim.done_work[live] + np.where(
            sim.status[live] == RUNNING, sim.rate[live] * (sim.now - sim.last_update[live]), 0.0
        )
        done = np.minimum(done, sim.job_work[live])
        return self.done_goodput + float(np.dot(done, self.gpu_seconds_per_unit[live]))
