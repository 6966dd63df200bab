"""Compiled (numba) loops of the simulator's observation encoders: the per-GPU, per-server and per-rack columns of
:meth:`ClusterEncoder.encode_cluster` in one pass. The arithmetic is the numpy expressions' own, element by element
and summed in the same order, so the values are bit-identical; transcendental functions stay in numpy."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def cluster_columns(
    gpu, server, rack, free_milli, server_free, inv_server_gpus, gpu_server, server_rack, inv_rack_gpus,
    in_placement, busy_col, free_col, placement_col, server_placement_col, rack_free_col,
):  # fmt: skip
    """Write busy, in_placement (GPUs), free and in_placement (servers) and free (racks); ``in_placement`` of length
    0 means none (zeros)."""
    G, S, R = len(free_milli), len(server_free), len(inv_rack_gpus)
    placed = np.zeros(S)
    has_placement = len(in_placement) > 0
    for g in range(G):
        gpu[g, busy_col] = 1.0 - free_milli[g] * 1e-3
        if has_placement:
            gpu[g, placement_col] = in_placement[g]
            placed[gpu_server[g]] += in_placement[g]
        else:
            gpu[g, placement_col] = 0.0
    rack_free = np.zeros(R)
    for s in range(S):
        server[s, free_col] = server_free[s] * inv_server_gpus[s]
        server[s, server_placement_col] = placed[s] * inv_server_gpus[s] if has_placement else 0.0
        rack_free[server_rack[s]] += float(server_free[s])
    for r in range(R):
        rack[r, rack_free_col] = rack_free[r] * inv_rack_gpus[r]


@njit(cache=True)
def time_in_use(out, gpu_job, run_start, now):
    """(G,) seconds since the job on each GPU started its current allocation (0 on free GPUs)."""
    for g in range(len(gpu_job)):
        j = gpu_job[g]
        out[g] = now - run_start[j] if j >= 0 else 0.0
    return out
