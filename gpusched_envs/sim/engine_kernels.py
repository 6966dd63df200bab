"""Compiled (numba) per-event work of the discrete-event engine (:mod:`gpusched_envs.sim.engine`).

The engine keeps its per-job, per-GPU, per-server and per-rack state in a few packed arrays (their rows are the
arrays policies and envs read, ``sim.done_work``, ``sim.gpu_free_milli``, ``sim.nic_load`` ...); these loops
allocate and release a job's GPUs, compute its placement's shape (:func:`gpusched_envs.sim.throughput.placement_shape`)
and recompute the rate and completion time of the jobs whose speed changed. Each computes the same floating-point
operations in the same order as the Python code of :mod:`gpusched_envs.sim.throughput` it replaces (sums in the
same order, min / max where the order does not matter), so results are bit-identical. Argument checks stay in the
engine's Python code, before any of these runs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpusched_envs.sim import numba_cache  # noqa: F401  (one cache stamp for every kernel file)

FULL_GPU = 1000
RUNNING = 2  # gpusched_envs.sim.status.RUNNING

# rows of the packed per-job float state (``Simulator._jf``)
DONE, RATE, COMM, LAST, RUNT, COMMT, WORK, CMP, BW, LAT, TRAF, RSTART, FSTART, ATT, ALLOC = range(15)
JF_ROWS = 15
# rows of the packed per-job int state (``Simulator._ji``)
VER, MODEL, MILLI, GOFF, GLEN, SHNEXT = range(6)
JI_ROWS = 6
# rows of the per-GPU int state (``Simulator._gi``)
G_FREE, G_JOB, G_SERVER, G_TYPE, G_SHHEAD = range(5)
GI_ROWS = 5
# rows of the per-server int state (``Simulator._si``)
S_FIRST, S_NUM, S_RACK, S_FREE, S_STAMP = range(5)
SI_ROWS = 5
# rows of the per-server float state (``Simulator._sf``)
S_NICBW, S_NICLOAD, S_INTRABW, S_INTRALAT, S_NICLAT, S_SHARED = range(6)
SF_ROWS = 6
# rows of the per-rack float state (``Simulator._rf``)
R_UPBW, R_UPLOAD = range(2)
RF_ROWS = 2
# entries of the settings vector (``Simulator._params``)
P_SPINE, P_UNIFORM, P_INTERFERENCE, P_DURATION, P_OVERHEAD, P_STAMP = range(6)
P_SIZE = 6
# an integer constant as a numpy scalar: a counter started from it is typed int64 from the start, so the kernels it
# is passed to are not compiled once more for a literal 0 while numba infers its type
_ZERO = np.int64(0)
# the host-overhead table of a cluster without one: read-only like every cluster array, so the kernels that take it
# are compiled once for both kinds of cluster (numba types read-only and writable arrays apart)
NO_OVERHEAD = np.zeros((0, 0))
NO_OVERHEAD.flags.writeable = False


# ------------------------------------------------------------------ orders shared by the kernels
# Small explicit sorts: numba's np.sort / np.argsort compile a large generic implementation into every kernel that
# calls them; these give the same results (a stable order is unique, and so is a sorted list of integers).
@njit(cache=True, no_cpython_wrapper=True)
def _key_before(a, b):
    """numpy's sort order: ``a < b``, NaN after every number."""
    return a < b or (b != b and a == a)


@njit(cache=True)
def stable_order(keys, n, order, tmp):
    """Write to ``order[:n]`` the indices of ``keys[:n]`` in ascending order, equal keys in index order: what
    ``np.argsort(keys[:n], kind="stable")`` gives (NaN last). ``tmp`` is scratch space of at least ``n``. A
    bottom-up merge sort of insertion-sorted runs (two runs already in order are copied without comparing)."""
    width = 8  # runs of this length by insertion, then merged pairwise
    passes = 0
    w = width
    while w < n:
        passes += 1
        w *= 2
    # start in the buffer that makes the last merge write into ``order``
    src, dst = (order, tmp) if passes % 2 == 0 else (tmp, order)
    for i in range(n):
        lo = i - i % width
        j = i
        while j > lo and _key_before(keys[i], keys[src[j - 1]]):
            src[j] = src[j - 1]
            j -= 1
        src[j] = i
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            if mid < hi and _key_before(keys[src[mid]], keys[src[mid - 1]]):  # else the two runs are in order
                while i < mid and j < hi:
                    if _key_before(keys[src[j]], keys[src[i]]):
                        dst[k] = src[j]
                        j += 1
                    else:
                        dst[k] = src[i]
                        i += 1
                    k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        width *= 2


@njit(cache=True)
def sort_ints(a, n):
    """Sort the integers ``a[:n]`` ascending in place (``a[:n] = np.sort(a[:n])``): a Shell sort (gaps 1, 4, 13,
    ...), small code and no scratch space."""
    h = 1
    while h < n // 3:
        h = 3 * h + 1
    while h >= 1:
        for i in range(h, n):
            v = a[i]
            j = i
            while j >= h and v < a[j - h]:
                a[j] = a[j - h]
                j -= h
            a[j] = v
        h //= 3


@njit(cache=True)
def pairwise_sum(a, lo, n):
    """``a[lo:lo + n].sum()`` with numpy's own summation order (the reduction's identity 0.0 plus its pairwise sum
    of a contiguous float64 array: blocks of at most 128 summed in eight interleaved lanes, halves above that), so
    the same bits as numpy's ``.sum()`` (and as ``engine.portable_dot`` over the products) on every CPU."""
    return 0.0 + _pairwise(a, lo, n)


@njit(cache=True, no_cpython_wrapper=True)
def _pairwise(a, lo, n):
    """numpy's pairwise sum of ``a[lo:lo + n]``: a block of at most 128 directly, else the sum of its two halves
    (the first a multiple of 8 long), evaluated with an explicit stack (numba's cache does not take recursive
    functions)."""
    if n <= 128:
        return _block_sum(a, lo, n)
    los = np.empty(64, dtype=np.int64)  # a frame: its range, whether its left half is summed, that sum
    ns = np.empty(64, dtype=np.int64)
    left_done = np.zeros(64, dtype=np.bool_)
    left = np.empty(64)
    top = 0
    los[0], ns[0], left_done[0] = lo, n, False
    while True:
        m = ns[top]
        half = m // 2
        half -= half % 8
        if m <= 128:  # a leaf: hand its sum up until a frame still needs its right half
            value = _block_sum(a, los[top], m)
            top -= 1
            while top >= 0 and left_done[top]:
                value = left[top] + value
                top -= 1
            if top < 0:
                return value
            left[top] = value
            left_done[top] = True
            m = ns[top]
            half = m // 2
            half -= half % 8
            los[top + 1], ns[top + 1], left_done[top + 1] = los[top] + half, m - half, False
        else:  # descend into the left half
            los[top + 1], ns[top + 1], left_done[top + 1] = los[top], half, False
        top += 1


@njit(cache=True, no_cpython_wrapper=True)
def _block_sum(a, lo, n):
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    end = lo + n - n % 8
    i = lo + 8
    while i < end:
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += a[i]
        i += 1
    return res


@njit(cache=True, no_cpython_wrapper=True)
def _overlap(compute, communication, gamma):
    if communication <= 0.0:
        return compute
    return (compute**gamma + communication**gamma) ** (1.0 / gamma)


@njit(cache=True, no_cpython_wrapper=True)
def _all_reduce(n, gradient, bandwidth, latency):
    if n <= 1:
        return 0.0
    steps = 2 * (n - 1)
    return steps / n * gradient / bandwidth + steps * latency


@njit(cache=True)
def check_gpus(gpus, need, free_milli, allowed):
    """Whether every GPU has ``need`` milli-GPUs free and is allowed (``allowed`` of length 0: all)."""
    for g in gpus:
        if free_milli[g] < need:
            return False
        if len(allowed) > 0 and not allowed[g]:
            return False
    return True


@njit(cache=True, no_cpython_wrapper=True)
def shape_terms(
    gpus, n, servers, ns, racks, nr, model, gpu_server, gpu_type, iteration_time, overhead, has_overhead, intra_bw,
    shared_link, intra_lat, nic_bw, nic_lat, up_bw, spine,
):  # fmt: skip
    """``(compute, bandwidth, latency)`` of the placement ``gpus[:n]`` on its ``ns`` distinct servers and ``nr``
    distinct racks (any order): the slowest GPU's iteration time (plus its server's host overhead when
    ``has_overhead``), the bottleneck bandwidth and the slowest hop of :func:`gpusched_envs.sim.throughput.placement_shape`,
    in its floating-point operations. A host-staged intra-server link (``shared_link`` > 0) is shared by the job's
    GPUs on that server. One GPU: its server's intra-server bandwidth and latency. The engine's start
    (:func:`allocate`) and the multi-agent candidate features both call this."""
    compute = 0.0
    for i in range(n):
        g = gpus[i]
        t = iteration_time[model, gpu_type[g]]
        if has_overhead:
            t = t + overhead[gpu_server[g], model]
        if i == 0 or t > compute:
            compute = t
    if n == 1:
        s = servers[0]
        return compute, intra_bw[s], intra_lat[s]
    intra_min = np.inf
    intra_lat_max = -np.inf
    nic_min = np.inf
    nic_lat_max = -np.inf
    for i in range(ns):
        s = servers[i]
        intra = intra_bw[s]
        if shared_link[s] > 0.0:
            k = 0
            for q in range(n):
                if gpu_server[gpus[q]] == s:
                    k += 1
            intra = intra / k
        if intra < intra_min:
            intra_min = intra
        if intra_lat[s] > intra_lat_max:
            intra_lat_max = intra_lat[s]
        if nic_bw[s] < nic_min:
            nic_min = nic_bw[s]
        if nic_lat[s] > nic_lat_max:
            nic_lat_max = nic_lat[s]
    if ns == 1:
        return compute, intra_min, intra_lat[servers[0]]
    bandwidth = min(nic_min, intra_min)
    latency = max(nic_lat_max, intra_lat_max)
    if nr > 1:
        up_min = np.inf
        for k in range(nr):
            if up_bw[racks[k]] < up_min:
                up_min = up_bw[racks[k]]
        bandwidth = min(bandwidth, up_min)
        latency = max(latency, spine)
    return compute, bandwidth, latency


@njit(cache=True, no_cpython_wrapper=True)
def allocate(job, gpus, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead, params, gbuf, goff, places):
    """Give ``gpus`` to ``job``: the GPUs' free shares, holder and sharer list, the servers' free counts, the GPU
    list at ``gbuf[goff:]`` and the placement's shape (compute, bandwidth, latency, traffic). Writes the distinct
    servers (ascending) to ``places[0]`` and racks (ascending) to ``places[1]``; returns (servers, racks, GPUs that
    stopped being wholly free)."""
    milli = ji[MILLI, job]
    take = milli if milli < FULL_GPU else FULL_GPU
    n = len(gpus)
    lost = 0
    for i in range(n):
        g = gpus[i]
        gbuf[goff + i] = g
        gi[G_FREE, g] -= take
        gi[G_JOB, g] = job
    if milli >= FULL_GPU:
        for i in range(n):
            si[S_FREE, gi[G_SERVER, gpus[i]]] -= 1
        lost = n
    else:
        g = gpus[0]
        if gi[G_FREE, g] + milli == FULL_GPU:
            si[S_FREE, gi[G_SERVER, g]] -= 1
            lost = 1
        ji[SHNEXT, job] = gi[G_SHHEAD, g]
        gi[G_SHHEAD, g] = job
    ji[GOFF, job] = goff
    ji[GLEN, job] = n
    # distinct servers and racks, ascending (a stamp per call marks the servers seen)
    params[P_STAMP] += 1.0
    stamp = np.int64(params[P_STAMP])
    ns = _ZERO
    for i in range(n):
        s = gi[G_SERVER, gpus[i]]
        if si[S_STAMP, s] != stamp:
            si[S_STAMP, s] = stamp
            places[0, ns] = s
            ns += 1
    srv = places[0]
    sort_ints(srv, ns)
    nr = _ZERO
    for i in range(ns):
        r = si[S_RACK, srv[i]]
        seen = False
        for k in range(nr):
            if places[1, k] == r:
                seen = True
                break
        if not seen:
            places[1, nr] = r
            nr += 1
    sort_ints(places[1], nr)
    # the placement's shape (throughput.placement_shape, the same arithmetic)
    model = ji[MODEL, job]
    compute, bandwidth, latency = shape_terms(
        gpus, n, srv, ns, places[1], nr, model, gi[G_SERVER], gi[G_TYPE], iteration_time, overhead,
        params[P_OVERHEAD] > 0.0, sf[S_INTRABW], sf[S_SHARED], sf[S_INTRALAT], sf[S_NICBW], sf[S_NICLAT],
        rf[R_UPBW], params[P_SPINE],
    )  # fmt: skip
    traffic = 0.0
    if n != 1 and ns > 1:  # the all-reduce's share of the NICs (and uplinks) it crosses
        gradient = mf[0, model]
        alone = _overlap(compute, _all_reduce(n, gradient, bandwidth, latency), mf[1, model])
        traffic = 2 * (n - 1) / n * gradient / alone
    jf[CMP, job] = compute
    jf[BW, job] = bandwidth
    jf[LAT, job] = latency
    jf[TRAF, job] = traffic
    return ns, nr, lost


@njit(cache=True, no_cpython_wrapper=True)
def _bank(job, now, status, jf):
    """Credit progress at the current rate up to now (``Simulator._bank``)."""
    dt = now - jf[LAST, job]
    if dt > 0 and status[job] == RUNNING:
        jf[DONE, job] = min(jf[WORK, job], jf[DONE, job] + jf[RATE, job] * dt)
        jf[RUNT, job] += dt
        jf[COMMT, job] += dt * jf[COMM, job]
    jf[LAST, job] = now


@njit(cache=True)
def release(job, complete, now, status, jf, ji, gi, si, gbuf):
    """Take ``job``'s GPUs back (after banking its progress and marking its work done when it ``complete``s):
    the time held added to its allocated time and attained GPU-seconds, the GPUs' free shares, holder (whole GPUs; a shared GPU's holder is the engine's to set) and sharer list, the
    servers' free counts; the job's rate and communication share drop to 0 and its version moves on. Returns the
    GPUs wholly free again."""
    if complete:
        _bank(job, now, status, jf)
        jf[DONE, job] = jf[WORK, job]
    held = now - jf[RSTART, job]
    jf[ALLOC, job] += held
    jf[ATT, job] += ji[GLEN, job] * held
    milli = ji[MILLI, job]
    goff, n = ji[GOFF, job], ji[GLEN, job]
    gained = 0
    if milli >= FULL_GPU:
        for i in range(goff, goff + n):
            g = gbuf[i]
            gi[G_FREE, g] += FULL_GPU
            gi[G_JOB, g] = -1
            si[S_FREE, gi[G_SERVER, g]] += 1
        gained = n
    else:
        g = gbuf[goff]
        gi[G_FREE, g] += milli
        if gi[G_FREE, g] == FULL_GPU:
            si[S_FREE, gi[G_SERVER, g]] += 1
            gained = 1
        # unlink from the GPU's sharer list
        prev = -1
        k = gi[G_SHHEAD, g]
        while k >= 0 and k != job:
            prev = k
            k = ji[SHNEXT, k]
        if k == job:
            if prev < 0:
                gi[G_SHHEAD, g] = ji[SHNEXT, job]
            else:
                ji[SHNEXT, prev] = ji[SHNEXT, job]
        ji[SHNEXT, job] = -1
    ji[GLEN, job] = 0
    jf[RATE, job] = 0.0
    jf[COMM, job] = 0.0
    ji[VER, job] += 1
    return gained


@njit(cache=True, no_cpython_wrapper=True)
def _slowdown_and_share(job, model, jf, ji, gi, si, colo, spsh, uniform, interference, gbuf):
    """Co-location slowdown (worst pair with the other jobs on the job's servers; a fractional job's GPU sharers
    count through space sharing only) and the throughput share left by its GPU sharers."""
    milli = ji[MILLI, job]
    goff, n = ji[GOFF, job], ji[GLEN, job]
    own = gbuf[goff]  # a fractional job's one GPU
    slowdown = 1.0
    if interference:
        found = False
        worst = 0.0
        # the job's servers: those of its GPUs (a server seen twice is scanned twice: max does not mind)
        for i in range(goff, goff + n):
            s = gi[G_SERVER, gbuf[i]]
            seen = False
            for q in range(goff, i):
                if gi[G_SERVER, gbuf[q]] == s:
                    seen = True
                    break
            if seen:
                continue
            lo = si[S_FIRST, s]
            for g in range(lo, lo + si[S_NUM, s]):
                if gi[G_FREE, g] >= FULL_GPU:
                    continue
                if milli < FULL_GPU and g == own:
                    continue  # the job's own GPU: its sharers count through space sharing
                h = gi[G_JOB, g]
                if h >= 0 and ji[MILLI, h] >= FULL_GPU:
                    if h != job:
                        v = colo[model, ji[MODEL, h]]
                        if not found or v > worst:
                            worst = v
                        found = True
                else:
                    k = gi[G_SHHEAD, g]
                    while k >= 0:
                        if k != job:
                            v = colo[model, ji[MODEL, k]]
                            if not found or v > worst:
                                worst = v
                            found = True
                        k = ji[SHNEXT, k]
        if found:
            slowdown = uniform if uniform != 0.0 else worst
    share = 1.0
    if milli < FULL_GPU:
        found = False
        best = 0.0
        t = gi[G_TYPE, own]
        k = gi[G_SHHEAD, own]
        while k >= 0:
            if k != job:
                v = spsh[t, model, ji[MODEL, k]]
                if not found or v < best:
                    best = v
                found = True
            k = ji[SHNEXT, k]
        if found:
            share = best
    return slowdown, share


@njit(cache=True)
def refresh(jobs, now, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, out):
    """Bank progress and recompute rate, communication share and version of each running job of ``jobs``
    (``Simulator._refresh_rates``); ``out[i]`` is the new completion time of ``jobs[i]``, nan when it is not
    running."""
    duration = params[P_DURATION] > 0.0
    interference = params[P_INTERFERENCE] > 0.0
    uniform = params[P_UNIFORM]
    for i in range(len(jobs)):
        job = jobs[i]
        if status[job] != RUNNING:
            out[i] = np.nan
            continue
        _bank(job, now, status, jf)
        if duration:
            rate, comm = 1.0, 0.0
        else:
            model = ji[MODEL, job]
            slowdown, share = _slowdown_and_share(
                job, model, jf, ji, gi, si, colo, spsh, uniform, interference, gbuf
            )
            n = ji[GLEN, job]
            compute = jf[CMP, job]
            if n <= 1:
                base = compute
                rate = 1.0 / (base * slowdown / share)
                comm = 0.0 if base <= 0 else max(0.0, 1.0 - compute / base)
            else:
                rate, comm = _multi_gpu_rate(
                    job, model, n, compute, slowdown, share, jf, ji, gi, si, sf, rf, mf, gbuf
                )
        jf[RATE, job] = rate
        jf[COMM, job] = comm
        ji[VER, job] += 1
        remaining = jf[WORK, job] - jf[DONE, job]
        out[i] = now + max(0.0, remaining) / rate


@njit(cache=True, no_cpython_wrapper=True)
def _multi_gpu_rate(job, model, n, compute, slowdown, share, jf, ji, gi, si, sf, rf, mf, gbuf):
    """Rate and communication share of a multi-GPU job: throughput.iteration_time_of_shape with the engine's
    NIC and uplink loads."""
    bandwidth = jf[BW, job]
    goff = ji[GOFF, job]
    w = jf[TRAF, job]
    # distinct servers of the job (in GPU order; min does not mind the order)
    first_server = gi[G_SERVER, gbuf[goff]]
    crosses_servers = False
    for i in range(goff + 1, goff + n):
        if gi[G_SERVER, gbuf[i]] != first_server:
            crosses_servers = True
            break
    if crosses_servers:
        nic = np.inf
        first_rack = si[S_RACK, first_server]
        crosses_racks = False
        for i in range(goff, goff + n):
            s = gi[G_SERVER, gbuf[i]]
            if si[S_RACK, s] != first_rack:
                crosses_racks = True
            load = max(sf[S_NICLOAD, s], w)
            v = sf[S_NICBW, s] * (w / load)
            if v < nic:
                nic = v
        bandwidth = min(bandwidth, nic)
        if crosses_racks:
            up = np.inf
            for i in range(goff, goff + n):
                r = si[S_RACK, gi[G_SERVER, gbuf[i]]]
                load = max(rf[R_UPLOAD, r], w)
                v = rf[R_UPBW, r] * (w / load)
                if v < up:
                    up = v
            bandwidth = min(bandwidth, up)
    m = _all_reduce(n, mf[0, model], bandwidth, jf[LAT, job])
    base = _overlap(compute, m, mf[1, model])
    total = base * slowdown / share
    comm = 0.0 if base <= 0 else max(0.0, 1.0 - compute / base)
    return 1.0 / total, comm


@njit(cache=True)
def start_job(
    job, gpus, goff, jobs, now, status, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead, colo, spsh, params,
    gbuf, places, out,
):  # fmt: skip
    """:func:`allocate`, the allocation's start (and the job's first start) at ``now``, then :func:`refresh` of
    ``jobs`` (the job and its neighbours, in the engine's order); returns the GPUs that stopped being wholly free."""
    lost = allocate(
        job, gpus, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead, params, gbuf, goff, places
    )[2]
    jf[RSTART, job] = now
    if jf[FSTART, job] != jf[FSTART, job]:
        jf[FSTART, job] = now
    jf[LAST, job] = now
    refresh(jobs, now, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, out)
    return lost


@njit(cache=True)
def release_job(job, complete, now, jobs, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, out):
    """:func:`release` then :func:`refresh` of ``jobs`` (its neighbours, in the engine's order); returns the GPUs
    wholly free again."""
    gained = release(job, complete, now, status, jf, ji, gi, si, gbuf)
    refresh(jobs, now, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, out)
    return gained


@njit(cache=True)
def fragmentation(free_milli, need, allowed):
    """GPUs where a job needing ``need`` milli-GPUs may start (``allowed`` of length 0: all), and how many of
    them are wholly free."""
    usable = 0
    whole = 0
    for g in range(len(free_milli)):
        if free_milli[g] >= need and (len(allowed) == 0 or allowed[g]):
            usable += 1
            if free_milli[g] == FULL_GPU:
                whole += 1
    return usable, whole
