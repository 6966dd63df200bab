"""Network sensitivity of a job: iteration time spread across racks ÷ consolidated on one server."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gpusched_envs.sim import throughput as tp
from gpusched_envs.sim.topology import Cluster


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


# clusters hash by identity; every episode reset asks for the same few (model, size) pairs
@lru_cache(maxsize=4096)
def network_sensitivity(cluster: Cluster, model: int, num_gpus: int) -> float:
    """Iteration time of ``model`` on ``num_gpus`` GPUs spread across racks ÷ consolidated, both at the
    fastest GPU's compute time so that only the network differs; 1.0 for one GPU."""
    if num_gpus <= 1 or num_gpus > cluster.num_gpus:
        return 1.0
    cat = cluster.catalog
    consolidated = tp.ideal_iteration_time(cluster, model, num_gpus)
    compute = tp.ideal_iteration_time(
        cluster, model, 1
    )  # the fastest GPU's compute (server host overhead included)
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


def sensitivity_classes(sensitivity: np.ndarray, thresholds) -> np.ndarray:
    """(J,) class of each job: how many of the (sorted) thresholds its sensitivity reaches or exceeds."""
    return np.searchsorted(np.sort(np.asarray(thresholds, dtype=np.float64)), sensitivity, side="right")
