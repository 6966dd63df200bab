"""Compiled (numba) loops of the placement rules (:mod:`gpusched_envs.policies.placement`): the free-GPU mask, the
per-server free counts, the best-fit server, the rack choice and the GPU picks of ``consolidate``, ``closest`` and
``pack`` in one pass over the cluster's arrays. Each loop makes the same choices, ties included, as the numpy
expressions it replaces (lowest index on ties, stable orders), so the GPUs picked are the same."""

from __future__ import annotations

import numpy as np
from numba import njit

from gpusched_envs.sim import engine_kernels as _ek
from gpusched_envs.sim import numba_cache  # noqa: F401  (one cache stamp for every kernel file)

FULL_GPU = 1000
# constant arguments of calls between kernels as numpy scalars (typed int64, not as literals that numba would
# compile the callee once more for)
_ZERO = np.int64(0)
_ONE = np.int64(1)


@njit(cache=True)
def free_counts(free_milli, allowed, within, gpu_server, num_servers, free, counts):
    """Fill ``free`` (G,) with the GPUs wholly free, allowed (``allowed`` of length 0: all) and inside ``within``
    (length 0: all), and ``counts`` (S,) with each server's number of them."""
    has_allowed = len(allowed) > 0
    has_within = len(within) > 0
    for s in range(num_servers):
        counts[s] = 0
    for g in range(len(free_milli)):
        ok = free_milli[g] >= FULL_GPU
        if ok and has_allowed:
            ok = allowed[g]
        if ok and has_within:
            ok = within[g]
        free[g] = ok
        if ok:
            counts[gpu_server[g]] += 1


@njit(cache=True, no_cpython_wrapper=True)
def _take(free, free_milli, servers, num, server_first, server_num, n, out):
    """The first ``n`` free GPUs of ``servers[:num]`` in that order, written to ``out``; returns how many. Free:
    ``free[g]``, or where ``free`` is empty, ``free_milli[g]`` a whole GPU."""
    by_milli = len(free) == 0
    got = 0
    for i in range(num):
        s = servers[i]
        lo = server_first[s]
        for g in range(lo, lo + server_num[s]):
            if (free_milli[g] >= FULL_GPU) if by_milli else free[g]:
                out[got] = g
                got += 1
                if got == n:
                    return got
    return got


@njit(cache=True)
def whole_gpus(
    free, free_milli, counts, n, spread, try_server, prefer, server_first, server_num, server_rack, num_racks
):  # fmt: skip
    """GPUs of a whole-GPU job of ``n`` GPUs (``n`` >= 1) given the free mask and counts of
    :func:`free_counts` (``free`` empty: the wholly free GPUs of ``free_milli``): the best-fit server (fewest free GPUs among those holding ``n``, restricted to the
    ``prefer`` servers when one of them fits; ``prefer`` of length 0: none) when ``try_server``; else, or when
    none fits and ``spread``, several servers: whole free ones unless ``spread``, in the best-fit rack if one holds
    the job, else over the racks by decreasing free GPUs; in each rack its servers by decreasing free GPUs.
    Returns the GPU ids (empty: cannot place now)."""
    S = len(counts)
    out = np.empty(n, dtype=np.int64)
    if try_server:
        best = -1
        has_prefer = False
        if len(prefer) > 0:
            for s in range(S):
                if counts[s] >= n and prefer[s]:
                    has_prefer = True
                    break
        for s in range(S):
            if counts[s] >= n and (not has_prefer or prefer[s]):
                if best < 0 or counts[s] < counts[best]:
                    best = s
        if best >= 0:
            one = np.empty(1, dtype=np.int64)
            one[0] = best
            _take(free, free_milli, one, _ONE, server_first, server_num, n, out)
            return out
        if not spread:
            return out[:0]
    # several servers
    usable = np.empty(S, dtype=np.int64)
    for s in range(S):
        if spread or counts[s] == server_num[s]:
            usable[s] = counts[s]
        else:
            usable[s] = 0
    rack_free = np.zeros(num_racks, dtype=np.int64)
    for s in range(S):
        rack_free[server_rack[s]] += usable[s]
    total = 0
    for r in range(num_racks):
        total += rack_free[r]
    if total < n:
        return out[:0]
    best_rack = -1
    for r in range(num_racks):
        if rack_free[r] >= n and (best_rack < 0 or rack_free[r] < rack_free[best_rack]):
            best_rack = r
    # scratch: sort keys, orders and a copy of the servers being reordered
    size = max(S, num_racks)
    keys = np.empty(size, dtype=np.int64)
    order = np.empty(size, dtype=np.int64)
    tmp = np.empty(size, dtype=np.int64)
    if best_rack >= 0:
        racks = np.empty(1, dtype=np.int64)
        racks[0] = best_rack
    else:  # by decreasing free GPUs, lowest index on ties
        for r in range(num_racks):
            keys[r] = -rack_free[r]
        racks = np.empty(num_racks, dtype=np.int64)
        _ek.stable_order(keys, num_racks, racks, tmp)
    servers = np.empty(S, dtype=np.int64)
    num = _ZERO
    for r in racks:
        start = num
        for s in range(S):
            if server_rack[s] == r and usable[s] > 0:
                servers[num] = s
                num += 1
        m = num - start
        if m > 1:  # the rack's servers by decreasing usable GPUs, lowest index on ties
            for i in range(m):
                keys[i] = -usable[servers[start + i]]
            _ek.stable_order(keys, m, order, tmp)
            for i in range(m):
                tmp[i] = servers[start + order[i]]
            for i in range(m):
                servers[start + i] = tmp[i]
    # whole free servers only (unless spread): _take visits only the listed servers, all with usable > 0
    got = _take(free, free_milli, servers, num, server_first, server_num, n, out)
    if got < n:
        return out[:0]
    _ek.sort_ints(out, n)
    return out


@njit(cache=True)
def by_servers(free_milli, server_free, server_ok, servers, num_racks, n, spread, try_server, prefer):
    """:func:`whole_gpus` where the allowed GPUs are whole servers (``server_ok`` (S,), length 0: all): the
    per-server counts are the engine's wholly-free counts ``server_free``, so no pass over the GPUs is needed."""
    S = servers.shape[1]
    counts = np.empty(S, dtype=np.int64)
    has_ok = len(server_ok) > 0
    for s in range(S):
        counts[s] = server_free[s] if (not has_ok or server_ok[s]) else 0
    # the GPUs are taken from servers with counts > 0 only, all allowed: a GPU there is free if wholly free
    return whole_gpus(
        np.zeros(0, dtype=np.bool_), free_milli, counts, n, spread, try_server, prefer, servers[0], servers[1],
        servers[2], num_racks,
    )  # fmt: skip


@njit(cache=True)
def spread_gpus(free, gpu_server, gpu_rack, num_servers, num_racks, n):
    """The GPUs of ``spread``: the free GPUs ordered by (rank among the free GPUs of its run of one server, rank
    of its server by index among the rack's servers with free GPUs, rack), the first ``n`` of them ascending;
    empty when fewer than ``n`` are free."""
    total = _ZERO
    for g in range(len(free)):
        if free[g]:
            total += 1
    if total < n:
        return np.empty(0, dtype=np.int64)
    has_free = np.zeros(num_servers, dtype=np.bool_)
    server_rack = np.zeros(num_servers, dtype=np.int64)
    for g in range(len(free)):
        if free[g]:
            has_free[gpu_server[g]] = True
            server_rack[gpu_server[g]] = gpu_rack[g]
    server_rank = np.zeros(num_servers, dtype=np.int64)
    per_rack = np.zeros(num_racks, dtype=np.int64)
    for s in range(num_servers):
        if has_free[s]:
            server_rank[s] = per_rack[server_rack[s]]
            per_rack[server_rack[s]] += 1
    idx = np.empty(total, dtype=np.int64)
    key = np.empty(total, dtype=np.int64)
    k = 0
    slot = 0
    prev = -1
    for g in range(len(free)):
        if free[g]:
            s = gpu_server[g]
            slot = 0 if k == 0 or s != prev else slot + 1
            prev = s
            idx[k] = g
            key[k] = (slot * (num_servers + 1) + server_rank[s]) * (num_racks + 1) + gpu_rack[g]
            k += 1
    order = np.empty(total, dtype=np.int64)
    _ek.stable_order(key, total, order, np.empty(total, dtype=np.int64))
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = idx[order[i]]
    _ek.sort_ints(out, n)
    return out
