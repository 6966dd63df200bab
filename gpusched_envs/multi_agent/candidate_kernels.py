"""Compiled (numba) candidate placements of ``multi_scheduler_v1``: every agent's head jobs in one call.

:func:`joint_candidates` gives, for each head job, what the env's Python path computes candidate by candidate:
the placements of :data:`~gpusched_envs.policies.multi_agent.BASE_CANDIDATES` (``closest``, ``consolidate``,
``first-fit``, ``pack``, ``spread``, in that order) and of ``closest`` inside each rack, the map of duplicates to
the first identical candidate, the action mask and the candidate features except the two that take a logarithm
(the ratio of the predicted to the ideal iteration time and the count of jobs already on the candidate's servers
are returned; the env takes numpy's ``log`` / ``log1p`` of them, as the Python path does). The placements come from
the compiled placement loops the placement rules themselves call (:mod:`gpusched_envs.sim.place_kernels`), with the
same arguments, so the GPUs picked are the same (``pack`` finds the servers running a whole-GPU job of the same
size from the GPUs' holders, ``Simulator.gpu_job``, as the rule does from ``Simulator.server_jobs``); the
iteration time follows :func:`gpusched_envs.sim.throughput.placement_shape` and
:func:`~gpusched_envs.sim.throughput.iteration_time_of_shape` (the uplinks shared by the jobs crossing them, each
taken to offer as much traffic as this one) in the same floating-point operations and order.

Covered: whole-GPU jobs of one or more GPUs and fractional-GPU jobs, GPU type / pool constraints (whole-server
masks and masks that split a server), host-staged intra-server links, servers' host overhead, both speed models.
Not covered (the env takes its Python path for that head job): a whole-GPU job asking for no GPU (the placement
rules' numpy definition then decides). The env also keeps its Python path for a candidate list other than
``BASE_CANDIDATES`` followed by one ``closest`` per rack, and for a cluster whose GPU racks are not their
servers' racks.

:func:`fifo_windows` gives every agent's oldest waiting jobs (its window in ``fifo`` order) and its queue length.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpusched_envs.sim import engine_kernels as _ek
from gpusched_envs.sim import numba_cache  # noqa: F401  (one cache stamp for every kernel file)
from gpusched_envs.sim import place_kernels as _pk

FULL_GPU = 1000
# the base candidates the kernel places, in this order; ``closest`` inside rack r is candidate NUM_BASE + r
BASE_ORDER = ("closest", "consolidate", "first-fit", "pack", "spread")
CLOSEST, CONSOLIDATE, FIRST_FIT, PACK, SPREAD = range(5)
NUM_BASE = 5
# rows of the per-server (and per-rack: T_UPBW) float table (:func:`network_table`)
T_INTRABW, T_INTRALAT, T_NICBW, T_NICLAT, T_SHARED, T_UPBW = range(6)
T_ROWS = 6
# rows of the per-job int table (:func:`job_table`)
J_GPUS, J_MILLI, J_ALLOWED, J_MODEL = range(4)
# rows of the per-constraint int table: 1 where its GPUs are whole servers, its largest server
A_WHOLE, A_LARGEST = range(2)
# entries of the settings vector: spine latency, 1.0 under the duration speed model, GPUs of the largest server
P_SPINE, P_DURATION, P_MAXSERVER = range(3)
P_SIZE = 3
# rows of the int outputs: first identical candidate (-1: none), GPUs placed (0: none), jobs on its servers
O_SAME, O_NUM, O_COLOCATED = range(3)
# a head job's status: placed by the kernel, not offered at this instant (set by the caller), left to Python
H_DONE, H_SKIP, H_PYTHON = range(3)


def network_table(cluster) -> np.ndarray:
    """(T_ROWS, max(S, R)) float64: the servers' intra-server bandwidth and latency, NIC bandwidth and latency,
    1.0 where the intra-server link is host-staged (shared by the job's GPUs on the server), and the racks' uplink
    bandwidth."""
    c = cluster
    t = np.zeros((T_ROWS, max(c.num_servers, c.num_racks)))
    S = c.num_servers
    t[T_INTRABW, :S] = c.server_intra_bandwidth
    t[T_INTRALAT, :S] = c.server_intra_latency
    t[T_NICBW, :S] = c.server_nic_bandwidth
    t[T_NICLAT, :S] = c.server_nic_latency
    if c.server_intra_shared is not None:
        t[T_SHARED, :S] = c.server_intra_shared
    t[T_UPBW, : c.num_racks] = c.rack_uplink_bandwidth
    return t


def job_table(sim) -> np.ndarray:
    """(4, J) int64: each job's GPUs, milli-GPUs, constraint (-1: none) and model."""
    return np.stack([sim.job_gpus_n, sim.job_milli, sim.job_allowed, sim.job_model]).astype(np.int64)


@njit(cache=True)
def fifo_windows(queued, owner, window, jobs, counts):
    """Every agent's ``window`` smallest waiting job ids ascending in ``jobs`` (K, window) (-1 pads) and its
    number of waiting jobs in ``counts`` (K,): the agent's oldest jobs, what ``np.sort`` of its queue starts with."""
    K = jobs.shape[0]
    for i in range(K):
        counts[i] = 0
        for w in range(window):
            jobs[i, w] = -1
    for q in range(len(queued)):
        j = queued[q]
        i = owner[j]
        m = counts[i]
        counts[i] = m + 1
        if m > window:
            m = window
        # insert j among the m kept (ascending), dropping the largest when full
        if m == window:
            if window == 0 or j > jobs[i, window - 1]:
                continue
            m = window - 1
        p = m
        while p > 0 and jobs[i, p - 1] > j:
            jobs[i, p] = jobs[i, p - 1]
            p -= 1
        jobs[i, p] = j


@njit(cache=True, no_cpython_wrapper=True)
def _fractional(free_milli, milli, allowed_row, rack_row, first):
    """One GPU of a fractional job: the first free one (``first``), else the one with the least share left
    (lowest index on ties); ``rack_row`` (length 0: all) restricts it. -1: none."""
    has_allowed = len(allowed_row) > 0
    has_rack = len(rack_row) > 0
    best = -1
    for g in range(len(free_milli)):
        if free_milli[g] < milli:
            continue
        if has_allowed and not allowed_row[g]:
            continue
        if has_rack and not rack_row[g]:
            continue
        if first:
            return g
        if best < 0 or free_milli[g] < free_milli[best]:
            best = g
    return best


@njit(cache=True, no_cpython_wrapper=True)
def _free_by_share(free_milli, need, allowed_row, free):
    """``free`` (G,) = the GPUs with ``need`` milli-GPUs free and allowed (``Simulator.free_mask``); returns how
    many."""
    has_allowed = len(allowed_row) > 0
    total = 0
    for g in range(len(free_milli)):
        ok = free_milli[g] >= need
        if ok and has_allowed:
            ok = allowed_row[g]
        free[g] = ok
        if ok:
            total += 1
    return total


@njit(cache=True, no_cpython_wrapper=True)
def _features(
    gpus, n, model, ideal, gpu_st, rows, scratch, stamp, iteration_time, overhead, net, params, model_f,
    rack_crossing, server_jobs, feat,
):  # fmt: skip
    """Candidate features 0-2 of the placement ``gpus[:n]`` written to ``feat``; returns (predicted over ideal
    iteration time, jobs already on its servers). ``scratch`` (3, max(S, R)): row 0 marks the servers seen with
    ``stamp``, rows 1 and 2 hold the distinct servers and racks."""
    S = rows.shape[1]
    num_racks = rack_crossing.shape[0]
    ns = _ek._ZERO  # typed int64, as the engine passes it: no second compile of shape_terms for a literal 0
    for i in range(n):
        s = gpu_st[0, gpus[i]]
        if scratch[0, s] != stamp:
            scratch[0, s] = stamp
            scratch[1, ns] = s
            ns += 1
    nr = _ek._ZERO
    for i in range(ns):
        r = rows[2, scratch[1, i]]
        seen = False
        for q in range(nr):
            if scratch[2, q] == r:
                seen = True
                break
        if not seen:
            scratch[2, nr] = r
            nr += 1
    compute, bandwidth, latency = _ek.shape_terms(
        gpus, n, scratch[1], ns, scratch[2], nr, model, gpu_st[0], gpu_st[1], iteration_time, overhead,
        overhead.shape[0] > 0, net[T_INTRABW], net[T_SHARED], net[T_INTRALAT], net[T_NICBW], net[T_NICLAT],
        net[T_UPBW], params[P_SPINE],
    )  # fmt: skip
    colocated = 0
    for i in range(ns):
        colocated += server_jobs[scratch[1, i]]
    if n <= 1:
        total = compute  # no communication: the overlap is the compute time
    else:
        if nr > 1:
            # each crossed uplink shared by the jobs crossing it and this one (throughput.communication_time)
            shared = np.inf
            for q in range(nr):
                r = scratch[2, q]
                v = net[T_UPBW, r] * (1.0 / max(rack_crossing[r] + 1, 1))
                if v < shared:
                    shared = v
            bandwidth = min(bandwidth, shared)
        m = _ek._all_reduce(n, model_f[0, model], bandwidth, latency)
        total = _ek._overlap(compute, m, model_f[1, model])
    feat[0] = 1.0
    feat[1] = ns / S
    feat[2] = nr / num_racks
    return total / (total if params[P_DURATION] > 0.0 else ideal), colocated


@njit(cache=True)
def joint_candidates(
    heads, status, nc, gi, si, free_total, rack_crossing, server_jobs, jobs, ideal, gpu_sr, gpu_st, rows, net,
    rack_gpus, iteration_time, overhead, model_f, allowed, server_ok, allowed_i, params, masks, feats, ratio, out,
    place,
):  # fmt: skip
    """Candidate placements of the head jobs ``heads`` (K, H) (-1: none; ``status`` ``H_SKIP``: not offered at
    this instant) with ``nc`` candidates each, over the engine's GPU and server state ``gi`` / ``si`` (read only;
    the cluster's layout as the placement rules pass it: ``gpu_sr`` the GPUs' servers and racks, ``gpu_st`` their
    servers and types as int64, ``rows`` ``Cluster.server_rows_i64``):
    ``place[i, a, :out[O_NUM, i, a]]`` the GPUs of action ``a = h · nc + c`` of agent ``i`` (0 GPUs: no placement,
    or a duplicate), ``out[O_SAME]`` the first identical candidate of the same head (-1: none), ``masks[i, a]``
    valid (cleared first; columns from ``H · nc`` on kept), ``feats`` (cleared, then columns 0-2 of each valid
    candidate), ``ratio`` and ``out[O_COLOCATED]`` (the other two features before their logarithm; 1.0 and 0
    where no candidate is, whose logarithms are 0). A head job left to the Python path gets ``status``
    ``H_PYTHON``. Returns (head jobs left to Python, valid candidates)."""
    K, H = heads.shape
    S = si.shape[1]
    G = gi.shape[1]
    num_racks = rack_crossing.shape[0]
    free_milli = gi[_ek.G_FREE]
    server_free = si[_ek.S_FREE]
    no_bool = np.zeros(0, dtype=np.bool_)
    one = np.int64(1)
    free = np.empty(G, dtype=np.bool_)
    counts = np.empty(S, dtype=np.int64)
    prefer = np.empty(S, dtype=np.bool_)
    scratch = np.zeros((3, max(S, num_racks)), dtype=np.int64)
    keys = np.empty((nc, G), dtype=np.int64)  # each candidate's GPUs, sorted, for the duplicate test
    got = np.empty(G, dtype=np.int64)
    max_server = np.int64(params[P_MAXSERVER])
    stamp = 0
    left = 0
    valid = 0
    for i in range(K):
        for a in range(H * nc):
            masks[i, a] = False
            out[O_SAME, i, a] = -1
            out[O_NUM, i, a] = 0
            out[O_COLOCATED, i, a] = 0
            ratio[i, a] = 1.0
            for f in range(feats.shape[2]):
                feats[i, a, f] = 0.0
    for i in range(K):
        for h in range(H):
            j = heads[i, h]
            if j < 0:
                break
            if status[i, h] == H_SKIP:
                continue
            milli = jobs[J_MILLI, j]
            n = jobs[J_GPUS, j]
            k = jobs[J_ALLOWED, j]
            whole = milli >= FULL_GPU
            if whole and n < 1:
                status[i, h] = H_PYTHON
                left += 1
                continue
            allowed_row = no_bool if k < 0 else allowed[k]
            need = np.int64(FULL_GPU) if whole else milli
            # fewer free GPUs than the job asks for: no candidate can place it (the env's _may_fit)
            if k < 0 and whole:
                if n > free_total:
                    continue
            elif _free_by_share(free_milli, need, allowed_row, free) < (n if whole else 1):
                continue
            for c in range(nc):
                a = h * nc + c
                rack = c - NUM_BASE
                num = 0
                if c == SPREAD:
                    _free_by_share(free_milli, need, allowed_row, free)
                    gpus = _pk.spread_gpus(free, gpu_sr[0], gpu_sr[1], S, num_racks, n if whole else one)
                    num = len(gpus)
                    for q in range(num):
                        got[q] = gpus[q]
                elif not whole:
                    rack_row = rack_gpus[rack] if rack >= 0 else no_bool
                    g = _fractional(free_milli, need, allowed_row, rack_row, c == FIRST_FIT)
                    if g >= 0:
                        got[0] = g
                        num = 1
                elif c == FIRST_FIT:
                    for g in range(G):
                        if free_milli[g] >= FULL_GPU and (k < 0 or allowed_row[g]):
                            got[num] = g
                            num += 1
                            if num == n:
                                break
                    if num < n:
                        num = 0
                else:  # placement._compiled_whole
                    spread = c != CONSOLIDATE
                    affinity = c == PACK
                    try_server = spread or n <= (max_server if k < 0 else allowed_i[A_LARGEST, k])
                    prefer_arg = no_bool
                    if (k < 0 or allowed_i[A_WHOLE, k] > 0) and not affinity:
                        # the allowed GPUs are whole servers: place_kernels.by_servers' counts (the engine's
                        # wholly free GPUs of the allowed servers) and no GPU mask
                        for s in range(S):
                            ok = (k < 0 or server_ok[k, s]) and (rack < 0 or rows[2, s] == rack)
                            counts[s] = server_free[s] if ok else 0
                        free_arg = no_bool
                    else:
                        inside = rack_gpus[rack] if rack >= 0 else no_bool
                        _pk.free_counts(free_milli, allowed_row, inside, gpu_st[0], S, free, counts)
                        free_arg = free
                        if affinity and try_server:
                            # servers already running a whole-GPU job of the same size (the GPUs' holders)
                            for s in range(S):
                                prefer[s] = False
                                if counts[s] >= n:
                                    lo = rows[0, s]
                                    for g in range(lo, lo + rows[1, s]):
                                        o = gi[_ek.G_JOB, g]
                                        if o >= 0 and jobs[J_MILLI, o] >= FULL_GPU and jobs[J_GPUS, o] == n:
                                            prefer[s] = True
                                            break
                            prefer_arg = prefer
                    gpus = _pk.whole_gpus(
                        free_arg, free_milli, counts, n, spread, try_server, prefer_arg, rows[0], rows[1], rows[2],
                        num_racks,
                    )  # fmt: skip
                    num = len(gpus)
                    for q in range(num):
                        got[q] = gpus[q]
                if num == 0:
                    continue
                # the same GPUs as an earlier candidate of this head: a duplicate of it
                for q in range(num):
                    keys[c, q] = got[q]
                _ek.sort_ints(keys[c], num)
                first = -1
                for b in range(c):
                    e = h * nc + b
                    if out[O_SAME, i, e] != e or out[O_NUM, i, e] != num:
                        continue
                    equal = True
                    for q in range(num):
                        if keys[b, q] != keys[c, q]:
                            equal = False
                            break
                    if equal:
                        first = e
                        break
                if first >= 0:
                    out[O_SAME, i, a] = first
                    continue
                out[O_SAME, i, a] = a
                out[O_NUM, i, a] = num
                masks[i, a] = True
                valid += 1
                for q in range(num):
                    place[i, a, q] = got[q]
                stamp += 1
                r, col = _features(
                    got, num, jobs[J_MODEL, j], ideal[j], gpu_st, rows, scratch, stamp, iteration_time, overhead,
                    net, params, model_f, rack_crossing, server_jobs, feats[i, a],
                )  # fmt: skip
                ratio[i, a] = r
                out[O_COLOCATED, i, a] = col
    return left, valid
