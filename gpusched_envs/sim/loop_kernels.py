"""Compiled (numba) event loop of the engine for the built-in non-preemptive queue policies.

:meth:`gpusched_envs.sim.engine.Simulator.run` hands a fresh simulator driven by FIFO, FIFO with backfill, SJF, Gandiva or the
plain queue policy with the ``closest``, ``consolidate`` or ``pack`` placement to :func:`run_queue`: arrivals, completions,
the policy's pass over the queue, its placements and the starts and releases of jobs all run here, on the engine's
packed state arrays (:mod:`gpusched_envs.sim.engine_kernels`), with the same floating-point operations in the same
order as the Python engine. The engine rebuilds its Python-side state (queue, running jobs, per-server and per-link
job dicts, event heap) from these arrays when the loop returns.

Order of simultaneous completions. The Python engine pushes the completion events of the jobs refreshed by one
start or release in the iteration order of a Python ``set``; an event's sequence number only breaks ties between
equal times, so that order matters only when two events of one such batch have exactly the same time. The loop
pushes a batch in any order, and when two of its times are equal it logs the batch (the dicts the set was built
from, in their insertion order, which for a non-preemptive run is the jobs' start order) and returns before the next
event is taken from the heap; the engine then rebuilds the very set in Python, gives the batch's events the
sequence numbers that order gives them (:func:`reseq`) and resumes the loop.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpusched_envs.sim import engine_kernels as _ek
from gpusched_envs.sim import place_kernels as _pk

FULL_GPU = 1000
QUEUED, RUNNING, DONE, DROPPED = 1, 2, 4, 5  # gpusched_envs.sim.status

# entries of the float state vector
F_NOW, F_DEMAND, F_DINT, F_FINT, F_UINT, F_ALLOC, F_LAST, F_FRAG, F_MAXT = range(9)
F_SIZE = 9
# entries of the int state vector
(
    I_SEQ, I_NEXT, I_EVENTS, I_DECISIONS, I_FINISHED, I_TOFINISH, I_FREE, I_GOFF, I_HLEN, I_QLEN, I_QN, I_PHASE,
    I_STAMP, I_LOG, I_BATCHES, I_CHANGED,
) = range(16)  # fmt: skip
I_SIZE = 16
# entries of the option vector
O_BACKFILL, O_SPREAD, O_RANK, O_FRACTIONAL, O_MAXSERVER, O_NPOOLS, O_AFFINITY = range(7)
O_SIZE = 7
# phases of the loop (where it resumes)
PH_DECIDE, PH_INSTANT, PH_POP = 0, 1, 2
# return codes
RUN_DONE, RUN_TIES, RUN_DEADLOCK = 0, 1, 2
# tie-log operations: the set ``neighbours | {job}`` (a start) or ``neighbours`` less the job (a release)
OP_OR, OP_DISCARD = 0, 1


# ------------------------------------------------------------------ the event heap: (4, capacity) time, seq, job, version
@njit(cache=True)
def _before(h, a, b):
    return h[0, a] < h[0, b] or (h[0, a] == h[0, b] and h[1, a] < h[1, b])


@njit(cache=True)
def _swap(h, a, b):
    for r in range(4):
        x = h[r, a]
        h[r, a] = h[r, b]
        h[r, b] = x


@njit(cache=True)
def _sift_down(h, i, n):
    while True:
        left = 2 * i + 1
        if left >= n:
            return
        m = left
        if left + 1 < n and _before(h, left + 1, left):
            m = left + 1
        if _before(h, m, i):
            _swap(h, m, i)
            i = m
        else:
            return


@njit(cache=True)
def heap_push(h, n, t, seq, job, version):
    """Push an event; returns the heap (a larger copy when it was full)."""
    if n == h.shape[1]:
        bigger = np.empty((4, 2 * n + 64))
        bigger[:, :n] = h[:, :n]
        h = bigger
    h[0, n] = t
    h[1, n] = seq
    h[2, n] = job
    h[3, n] = version
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if _before(h, i, p):
            _swap(h, i, p)
            i = p
        else:
            break
    return h


@njit(cache=True)
def _heap_pop(h, n):
    """Remove the first event (read it before); returns the new size."""
    n -= 1
    if n > 0:
        for r in range(4):
            h[r, 0] = h[r, n]
        _sift_down(h, 0, n)
    return n


@njit(cache=True)
def heapify(h, n):
    for i in range(n // 2 - 1, -1, -1):
        _sift_down(h, i, n)


@njit(cache=True)
def reseq(h, n, seq0, new_seq):
    """Give the events pushed with sequence numbers ``seq0 + 1 + i`` the numbers ``new_seq[i]`` (heapify after)."""
    k = len(new_seq)
    for i in range(n):
        s = np.int64(h[1, i]) - seq0 - 1
        if 0 <= s < k:
            h[1, i] = new_seq[s]


# ------------------------------------------------------------------ small helpers
@njit(cache=True)
def _integrate(st_f):
    """``Simulator._integrate_to_now``."""
    dt = st_f[F_NOW] - st_f[F_LAST]
    if dt > 0:
        st_f[F_DINT] += st_f[F_DEMAND] * dt
        st_f[F_FINT] += st_f[F_FRAG] * dt
        st_f[F_UINT] += st_f[F_ALLOC] * dt
        st_f[F_LAST] = st_f[F_NOW]


@njit(cache=True)
def _servers_of(job, ji, gi, si, gbuf, srv, rck):
    """Distinct servers and racks (ascending) of a job's GPUs into ``srv`` / ``rck``; returns their counts."""
    goff, n = ji[_ek.GOFF, job], ji[_ek.GLEN, job]
    ns = 0
    for i in range(goff, goff + n):
        s = gi[_ek.G_SERVER, gbuf[i]]
        seen = False
        for q in range(ns):
            if srv[q] == s:
                seen = True
                break
        if not seen:
            srv[ns] = s
            ns += 1
    srv[:ns] = np.sort(srv[:ns])
    nr = 0
    for i in range(ns):
        r = si[_ek.S_RACK, srv[i]]
        seen = False
        for q in range(nr):
            if rck[q] == r:
                seen = True
                break
        if not seen:
            rck[nr] = r
            nr += 1
    rck[:nr] = np.sort(rck[:nr])
    return ns, nr


@njit(cache=True)
def _add(job, mark, bid, buf, k):
    if mark[job] != bid:
        mark[job] = bid
        buf[k] = job
        k += 1
    return k


@njit(cache=True)
def _server_jobs(s, gi, si, ji, on_network, net_only, mark, bid, buf, k):
    """Add the jobs on server ``s`` (only those on the network when ``net_only``) to ``buf[k:]``."""
    lo = si[_ek.S_FIRST, s]
    for g in range(lo, lo + si[_ek.S_NUM, s]):
        if gi[_ek.G_FREE, g] >= FULL_GPU:
            continue
        h = gi[_ek.G_JOB, g]
        if h >= 0 and ji[_ek.MILLI, h] >= FULL_GPU:
            if not net_only or on_network[h]:
                k = _add(h, mark, bid, buf, k)
        else:
            q = gi[_ek.G_SHHEAD, g]
            while q >= 0:
                if not net_only or on_network[q]:
                    k = _add(q, mark, bid, buf, k)
                q = ji[_ek.SHNEXT, q]
    return k


@njit(cache=True)
def _rack_crossers(r, gi, si, ji, on_network, jnr, rack_first, rack_servers, mark, bid, buf, k):
    """Add the jobs on the network whose ring crosses racks and uses rack ``r`` to ``buf[k:]``."""
    for i in range(rack_first[r], rack_first[r + 1]):
        s = rack_servers[i]
        lo = si[_ek.S_FIRST, s]
        for g in range(lo, lo + si[_ek.S_NUM, s]):
            if gi[_ek.G_FREE, g] >= FULL_GPU:
                continue
            h = gi[_ek.G_JOB, g]
            if h >= 0 and ji[_ek.MILLI, h] >= FULL_GPU and on_network[h] and jnr[h] > 1:
                k = _add(h, mark, bid, buf, k)
    return k


@njit(cache=True)
def _by_stamp(buf, k, stamp):
    """``buf[:k]`` in start order (a copy)."""
    part = buf[:k].copy()
    keys = np.empty(k, dtype=np.int64)
    for i in range(k):
        keys[i] = stamp[part[i]]
    return part[np.argsort(keys)]


@njit(cache=True)
def _sum_traffic(members, jf):
    """A link's load: its users' traffic summed in their insertion order (``Simulator._sum_load``)."""
    acc = 0.0
    for j in members:
        acc += jf[_ek.TRAF, j]
    return acc


@njit(cache=True)
def _next_bid(mark_state):
    mark_state[0] += 1
    return mark_state[0]


@njit(cache=True)
def _network(job, join, srv, ns, rck, nr, jf, gi, si, sf, rf, ji, on_network, jnr, rack_crossing, rack_first,
             rack_servers, stamp, mark, mark_state, buf):  # fmt: skip
    """``Simulator._join_network`` / ``_leave_network``: the loads of the job's NICs and uplinks summed afresh over
    their users (on the network, in start order)."""
    on_network[job] = join
    for i in range(ns):
        s = srv[i]
        bid = _next_bid(mark_state)
        k = _server_jobs(s, gi, si, ji, on_network, True, mark, bid, buf, 0)
        sf[_ek.S_NICLOAD, s] = _sum_traffic(_by_stamp(buf, k, stamp), jf)
    if nr > 1:
        for i in range(nr):
            r = rck[i]
            rack_crossing[r] += 1 if join else -1
            bid = _next_bid(mark_state)
            k = _rack_crossers(r, gi, si, ji, on_network, jnr, rack_first, rack_servers, mark, bid, buf, 0)
            rf[_ek.R_UPLOAD, r] = _sum_traffic(_by_stamp(buf, k, stamp), jf)


@njit(cache=True)
def _neighbours(job, srv, ns, rck, nr, net, interference, own_gpu, gi, si, ji, on_network, jnr, rack_first,
                rack_servers, mark, bid, buf, k):  # fmt: skip
    """Add the jobs whose speed depends on ``job`` (``Simulator._neighbours``, any order) to ``buf[k:]``."""
    if interference:
        for i in range(ns):
            k = _server_jobs(srv[i], gi, si, ji, on_network, False, mark, bid, buf, k)
    if own_gpu >= 0:
        q = gi[_ek.G_SHHEAD, own_gpu]
        while q >= 0:
            k = _add(q, mark, bid, buf, k)
            q = ji[_ek.SHNEXT, q]
    if net:
        for i in range(ns):
            k = _server_jobs(srv[i], gi, si, ji, on_network, True, mark, bid, buf, k)
        if nr > 1:
            for i in range(nr):
                k = _rack_crossers(
                    rck[i], gi, si, ji, on_network, jnr, rack_first, rack_servers, mark, bid, buf, k
                )
    return k


@njit(cache=True)
def _log_put(log, pos, v):
    if pos >= len(log):
        bigger = np.empty(2 * len(log) + 1024, dtype=np.int64)
        bigger[: len(log)] = log
        log = bigger
    log[pos] = v
    return log, pos + 1


@njit(cache=True)
def _log_segment(log, pos, members):
    log, pos = _log_put(log, pos, len(members))
    for j in members:
        log, pos = _log_put(log, pos, j)
    return log, pos


@njit(cache=True)
def _log_batch(log, st_i, op, job, srv, ns, rck, nr, net, interference, own_gpu, batch, k, times, seq0, gi, si,
               ji, on_network, jnr, rack_first, rack_servers, stamp, mark, mark_state, buf):  # fmt: skip
    """Append a batch with tied completion times to the log: the dicts the engine's neighbour set is built from
    (``Simulator._neighbours``, each in insertion order, as they were when the set was built), the batch's jobs, which
    of them were pushed, and the sequence number before its pushes. For a release (``OP_DISCARD``) the job has
    already left its GPUs and the network: it is put back where the dicts still held it."""
    pos = st_i[I_LOG]
    log, pos = _log_put(log, pos, op)
    log, pos = _log_put(log, pos, job)
    segments = 0
    if interference:
        segments += ns
    if own_gpu >= 0:
        segments += 1
    if net:
        segments += ns + (nr if nr > 1 else 0)
    log, pos = _log_put(log, pos, segments)
    back = op == OP_DISCARD
    if interference:
        for i in range(ns):
            bid = _next_bid(mark_state)
            m = _server_jobs(srv[i], gi, si, ji, on_network, False, mark, bid, buf, 0)
            if back:
                m = _add(job, mark, bid, buf, m)
            log, pos = _log_segment(log, pos, _by_stamp(buf, m, stamp))
    if own_gpu >= 0:
        bid = _next_bid(mark_state)
        m = 0
        q = gi[_ek.G_SHHEAD, own_gpu]
        while q >= 0:
            m = _add(q, mark, bid, buf, m)
            q = ji[_ek.SHNEXT, q]
        log, pos = _log_segment(log, pos, _by_stamp(buf, m, stamp))
    if net:
        for i in range(ns):
            bid = _next_bid(mark_state)
            m = _server_jobs(srv[i], gi, si, ji, on_network, True, mark, bid, buf, 0)
            if back:
                m = _add(job, mark, bid, buf, m)
            log, pos = _log_segment(log, pos, _by_stamp(buf, m, stamp))
        if nr > 1:
            for i in range(nr):
                bid = _next_bid(mark_state)
                m = _rack_crossers(
                    rck[i], gi, si, ji, on_network, jnr, rack_first, rack_servers, mark, bid, buf, 0
                )
                if back:
                    m = _add(job, mark, bid, buf, m)
                log, pos = _log_segment(log, pos, _by_stamp(buf, m, stamp))
    log, pos = _log_put(log, pos, k)
    for i in range(k):
        log, pos = _log_put(log, pos, batch[i])
    for i in range(k):
        log, pos = _log_put(log, pos, 1 if times[i] == times[i] else 0)
    log, pos = _log_put(log, pos, seq0)
    st_i[I_LOG] = pos
    st_i[I_BATCHES] += 1
    return log


@njit(cache=True)
def _has_tie(times, k):
    m = 0
    vals = np.empty(k)
    for i in range(k):
        if times[i] == times[i]:
            vals[m] = times[i]
            m += 1
    if m < 2:
        return False
    vals = np.sort(vals[:m])
    for i in range(1, m):
        if vals[i] == vals[i - 1]:
            return True
    return False


@njit(cache=True)
def _push_batch(h, st_i, ji, batch, k, times):
    """``Simulator._push_completions``: the batch's completion events, in its order."""
    n = st_i[I_HLEN]
    seq = st_i[I_SEQ]
    for i in range(k):
        t = times[i]
        if t == t:
            seq += 1
            job = batch[i]
            h = heap_push(h, n, t, seq, job, ji[_ek.VER, job])
            n += 1
    st_i[I_SEQ] = seq
    st_i[I_HLEN] = n
    return h


# ------------------------------------------------------------------ the policy's pass and its placements
@njit(cache=True)
def _place(job, opts, none, gi, si, job_n, job_milli, job_allowed, allowed, server_ok, server_ok_valid, largest, rows,
           num_racks, gpu_server, pool_first, pool_servers, free_buf, counts):  # fmt: skip
    """``closest`` (``opts[O_SPREAD]``) or ``consolidate`` of :mod:`gpusched_envs.policies.placement`: the GPU ids,
    empty when the job cannot be placed now."""
    free_milli = gi[_ek.G_FREE]
    milli = job_milli[job]
    k = job_allowed[job]
    if milli < FULL_GPU:  # best fit on the remaining share, lowest index on ties
        best = -1
        for g in range(len(free_milli)):
            if free_milli[g] >= milli and (k < 0 or allowed[k, g]):
                if best < 0 or free_milli[g] < free_milli[best]:
                    best = g
        if best < 0:
            return np.zeros(0, dtype=np.int64)
        one = np.empty(1, dtype=np.int64)
        one[0] = best
        return one
    n = job_n[job]
    spread = opts[O_SPREAD] > 0
    try_server = spread or n <= (opts[O_MAXSERVER] if k < 0 else largest[k])
    if opts[O_AFFINITY] > 0:  # pack: prefer the fitting servers already running a whole-GPU job of this size
        _pk.free_counts(
            free_milli, none if k < 0 else allowed[k], none, gpu_server, len(counts), free_buf, counts
        )
        prefer = none
        if try_server:
            prefer = np.zeros(len(counts), dtype=np.bool_)
            for s in range(len(counts)):
                if counts[s] >= n:
                    lo = si[_ek.S_FIRST, s]
                    for g in range(lo, lo + si[_ek.S_NUM, s]):
                        h = gi[_ek.G_JOB, g]
                        if free_milli[g] < FULL_GPU and h >= 0 and job_milli[h] >= FULL_GPU and job_n[h] == n:
                            prefer[s] = True
                            break
        return _pk.whole_gpus(
            free_buf, free_milli, counts, n, spread, try_server, prefer, rows[0], rows[1], rows[2], num_racks
        )
    if k < 0:
        return _pk.by_servers(free_milli, si[_ek.S_FREE], none, rows, num_racks, n, spread, try_server, none)
    if server_ok_valid[k]:
        if (
            try_server
        ):  # the best-fit server among the allowed ones (by_servers' choice, fewer servers to scan)
            best = -1
            for i in range(pool_first[k], pool_first[k + 1]):
                s = pool_servers[i]
                c = si[_ek.S_FREE, s]
                if c >= n and (best < 0 or c < si[_ek.S_FREE, best]):
                    best = s
            if best >= 0:
                out = np.empty(n, dtype=np.int64)
                got = 0
                lo = si[_ek.S_FIRST, best]
                for g in range(lo, lo + si[_ek.S_NUM, best]):
                    if free_milli[g] >= FULL_GPU:
                        out[got] = g
                        got += 1
                        if got == n:
                            break
                return out
            if not spread:
                return np.zeros(0, dtype=np.int64)
        return _pk.by_servers(
            free_milli, si[_ek.S_FREE], server_ok[k], rows, num_racks, n, spread, try_server, none
        )
    _pk.free_counts(free_milli, allowed[k], none, gpu_server, len(counts), free_buf, counts)
    return _pk.whole_gpus(
        free_buf, free_milli, counts, n, spread, try_server, none, rows[0], rows[1], rows[2], num_racks
    )


@njit(cache=True)
def run_queue(
    st_f, st_i, opts, h, log, q, status, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead, colo, spsh, params,
    gbuf, places, submit, share, at_arrival, finish, at_finish, stamp, jnr, on_network, rack_crossing, job_n,
    job_milli, job_allowed, job_pool, rank, allowed, server_ok, server_ok_valid, largest, rows, num_racks,
    gpu_server, rack_first, rack_servers, pool_first, pool_servers, mark, mark_state,
):  # fmt: skip
    """Run the simulation under a non-preemptive queue policy until it drains, reaches ``max_time``, deadlocks or
    has a batch of tied completions for the engine to order (the return code); resumes where it stopped (the phase
    in ``st_i``). Returns (code, heap, log)."""
    num_jobs = len(status)
    num_gpus = gi.shape[1]
    duration = params[_ek.P_DURATION] > 0.0
    interference = params[_ek.P_INTERFERENCE] > 0.0
    backfill = opts[O_BACKFILL] > 0
    fractional = opts[O_FRACTIONAL] > 0
    max_time = st_f[F_MAXT]
    buf = np.empty(num_jobs + 1, dtype=np.int64)
    batch = np.empty(num_jobs + 1, dtype=np.int64)
    times = np.empty(num_jobs + 1)
    srv = np.empty(max(1, si.shape[1]), dtype=np.int64)
    rck = np.empty(max(1, rf.shape[1]), dtype=np.int64)
    free_buf = np.empty(num_gpus, dtype=np.bool_)
    counts = np.empty(si.shape[1], dtype=np.int64)
    none = np.zeros(0, dtype=np.bool_)
    # per pool (pool -1: the last entry): blocked in this pass, waiting jobs, waiting jobs not yet visited
    blocked = np.zeros((job_pool.max() if num_jobs else 0) + 2, dtype=np.bool_)
    pool_waiting = np.zeros(len(blocked), dtype=np.int64)
    for i in range(st_i[I_QLEN]):
        if status[q[i]] == QUEUED:
            pool_waiting[job_pool[q[i]]] += 1
    left = np.zeros(len(blocked), dtype=np.int64)
    qhead = 0  # every queue entry before it has left the queue
    # strict FIFO: the queue of each pool, in queue order (the pass merges their first waiting jobs)
    merge = not backfill and opts[O_RANK] == 0
    pq_end = np.zeros(len(blocked), dtype=np.int64)
    for j in range(num_jobs):
        pq_end[job_pool[j]] += 1
    pq_head = np.zeros(len(blocked), dtype=np.int64)
    for p in range(1, len(blocked)):
        pq_head[p] = pq_head[p - 1] + pq_end[p - 1]
    pq_end[:] = pq_head
    pq_store = np.empty(max(1, num_jobs), dtype=np.int64)
    for i in range(st_i[I_QLEN]):
        if status[q[i]] == QUEUED:
            p = job_pool[q[i]]
            pq_store[pq_end[p]] = q[i]
            pq_end[p] += 1
    while True:
        phase = st_i[I_PHASE]
        if phase == PH_DECIDE:
            # Simulator._note_fragmentation
            _integrate(st_f)
            st_f[F_FRAG] = 0.0
            if st_i[I_QN] > 0:
                while status[q[qhead]] != QUEUED:
                    qhead += 1
                head = q[qhead]
                milli = job_milli[head]
                k = job_allowed[head]
                if milli >= FULL_GPU and k < 0:
                    if st_i[I_FREE] >= job_n[head]:
                        st_f[F_FRAG] = float(st_i[I_FREE])
                elif milli >= FULL_GPU and server_ok_valid[k]:
                    # whole servers: the wholly free GPUs are the servers' free counts
                    whole = 0
                    for i in range(pool_first[k], pool_first[k + 1]):
                        whole += si[_ek.S_FREE, pool_servers[i]]
                    if whole >= job_n[head]:
                        st_f[F_FRAG] = float(whole)
                else:
                    usable, whole = _ek.fragmentation(
                        gi[_ek.G_FREE],
                        FULL_GPU if milli >= FULL_GPU else milli,
                        none if k < 0 else allowed[k],
                    )
                    if usable >= job_n[head]:
                        st_f[F_FRAG] = float(whole)
            st_i[I_CHANGED] = 0
            st_i[I_PHASE] = PH_INSTANT
            continue
        if phase == PH_INSTANT:
            if st_i[I_FINISHED] >= st_i[I_TOFINISH]:
                _integrate(st_f)
                return RUN_DONE, h, log
            t_event = h[0, 0] if st_i[I_HLEN] > 0 else np.inf
            nxt = st_i[I_NEXT]
            t_arrival = submit[nxt] if nxt < num_jobs else np.inf
            t = min(t_event, t_arrival)
            if t == np.inf:
                return RUN_DEADLOCK, h, log
            if t > max_time:
                st_f[F_NOW] = max(st_f[F_NOW], max_time)
                _integrate(st_f)
                return RUN_DONE, h, log
            st_f[F_NOW] = t
            _integrate(st_f)
            j = nxt
            while j < num_jobs and submit[j] <= t:
                if status[j] != DROPPED:
                    status[j] = QUEUED
                    q[st_i[I_QLEN]] = j
                    st_i[I_QLEN] += 1
                    st_i[I_QN] += 1
                    pool_waiting[job_pool[j]] += 1
                    pq_store[pq_end[job_pool[j]]] = j
                    pq_end[job_pool[j]] += 1
                    st_f[F_DEMAND] += share[j]
                    at_arrival[j] = st_f[F_DINT]
                    st_i[I_EVENTS] += 1
                    st_i[I_CHANGED] = 1
                j += 1
            st_i[I_NEXT] = j
            st_i[I_PHASE] = PH_POP
        # PH_POP: every event at this instant, in (time, seq) order
        now = st_f[F_NOW]
        while st_i[I_HLEN] > 0 and h[0, 0] <= now:
            if st_i[I_BATCHES] > 0:
                return RUN_TIES, h, log
            job = np.int64(h[2, 0])
            version = np.int64(h[3, 0])
            st_i[I_HLEN] = _heap_pop(h, st_i[I_HLEN])
            st_i[I_EVENTS] += 1
            if version != ji[_ek.VER, job]:
                continue
            # Simulator._complete -> _release(complete=True)
            ns, nr = _servers_of(job, ji, gi, si, gbuf, srv, rck)
            milli = job_milli[job]
            own_gpu = gbuf[ji[_ek.GOFF, job]] if milli < FULL_GPU else -1
            if own_gpu >= 0:  # the GPU's holder: its first remaining sharer
                first = -1
                s_q = gi[_ek.G_SHHEAD, own_gpu]
                while s_q >= 0:
                    if s_q != job and (first < 0 or stamp[s_q] < stamp[first]):
                        first = s_q
                    s_q = ji[_ek.SHNEXT, s_q]
                gi[_ek.G_JOB, own_gpu] = first
            st_f[F_ALLOC] -= share[job]
            net = on_network[job]
            k = 0
            if not duration:
                bid = _next_bid(mark_state)
                mark[job] = bid  # left out (discarded)
                k = _neighbours(job, srv, ns, rck, nr, net, interference, own_gpu, gi, si, ji, on_network, jnr,
                                rack_first, rack_servers, mark, bid, batch, 0)  # fmt: skip
            if net:
                _network(job, False, srv, ns, rck, nr, jf, gi, si, sf, rf, ji, on_network, jnr, rack_crossing,
                         rack_first, rack_servers, stamp, mark, mark_state, buf)  # fmt: skip
            st_i[I_FREE] += _ek.release_job(
                job, True, now, batch[:k], status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, times
            )
            if k > 1 and _has_tie(times, k):
                log = _log_batch(log, st_i, OP_DISCARD, job, srv, ns, rck, nr, net, interference, own_gpu, batch,
                                 k, times, st_i[I_SEQ], gi, si, ji, on_network, jnr, rack_first, rack_servers,
                                 stamp, mark, mark_state, buf)  # fmt: skip
            h = _push_batch(h, st_i, ji, batch, k, times)
            status[job] = DONE
            finish[job] = now
            at_finish[job] = st_f[F_DINT]
            st_i[I_FINISHED] += 1
            st_f[F_DEMAND] -= share[job]
            st_i[I_CHANGED] = 1
        if st_i[I_QN] > 0 and st_i[I_CHANGED] != 0:
            st_i[I_CHANGED] = 0
            st_i[I_DECISIONS] += 1
            st_i[I_PHASE] = PH_DECIDE
            # the policy's pass (QueuePolicy.schedule)
            if st_i[I_FREE] == 0 and not fractional:
                continue
            m = st_i[I_QLEN]
            if 2 * st_i[I_QN] <= m:  # drop the jobs started since (the queue keeps its order)
                live = 0
                for i in range(m):
                    if status[q[i]] == QUEUED:
                        q[live] = q[i]
                        live += 1
                m = live
                st_i[I_QLEN] = m
                qhead = 0
            order = q
            if opts[O_RANK] > 0:
                order = q[:m].copy()
                keys = np.empty(m, dtype=np.int64)
                for i in range(m):
                    keys[i] = rank[order[i]]
                order = order[np.argsort(keys)]
            # pools with waiting jobs not yet visited and not blocked: the pass ends when none is left
            blocked[:] = False
            left[:] = pool_waiting
            open_pools = 0
            for p in range(len(left)):
                if left[p] > 0:
                    open_pools += 1
            if merge:  # each pool's first waiting job (strict FIFO visits no other)
                for p in range(len(left)):
                    while pq_head[p] < pq_end[p] and status[pq_store[pq_head[p]]] != QUEUED:
                        pq_head[p] += 1
            i = 0 if opts[O_RANK] > 0 else qhead
            while True:
                if st_i[I_FREE] == 0 and not fractional:
                    break  # no whole GPU is free: no later job can be placed
                if merge:  # the next job in queue order among the pools not blocked
                    job = -1
                    pool = 0
                    for p in range(len(left)):
                        if not blocked[p] and pq_head[p] < pq_end[p]:
                            j = pq_store[pq_head[p]]
                            if job < 0 or j < job:
                                job = j
                                pool = p
                    if job < 0:
                        break
                else:
                    if i >= m:
                        break
                    job = order[i]
                    i += 1
                    if status[job] != QUEUED:
                        continue
                    pool = job_pool[job]
                    if blocked[pool]:
                        continue
                    left[pool] -= 1
                gpus = _place(job, opts, none, gi, si, job_n, job_milli, job_allowed, allowed, server_ok,
                              server_ok_valid, largest, rows, num_racks, gpu_server, pool_first, pool_servers,
                              free_buf, counts)  # fmt: skip
                if len(gpus) == 0:
                    if not backfill:
                        blocked[pool] = True
                        open_pools -= 1
                        if open_pools == 0:
                            break  # every pool with waiting jobs is blocked
                    elif left[pool] == 0:
                        open_pools -= 1
                        if open_pools == 0:
                            break
                    continue
                if merge:
                    pq_head[pool] += 1  # the job starts: the pool's next waiting job follows it
                    while pq_head[pool] < pq_end[pool] and status[pq_store[pq_head[pool]]] != QUEUED:
                        pq_head[pool] += 1
                elif left[pool] == 0:
                    open_pools -= 1
                # Simulator.start
                _integrate(st_f)
                st_i[I_STAMP] += 1
                stamp[job] = st_i[I_STAMP]
                st_i[I_QN] -= 1
                pool_waiting[pool] -= 1
                st_f[F_ALLOC] += share[job]
                goff = st_i[I_GOFF]
                st_i[I_GOFF] = goff + len(gpus)
                status[job] = RUNNING
                ns, nr, lost = _ek.allocate(job, gpus, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead,
                                            params, gbuf, goff, places)  # fmt: skip
                srv[:ns] = places[0, :ns]
                rck[:nr] = places[1, :nr]
                jf[_ek.RSTART, job] = now
                if jf[_ek.FSTART, job] != jf[_ek.FSTART, job]:
                    jf[_ek.FSTART, job] = now
                jf[_ek.LAST, job] = now
                st_i[I_FREE] -= lost
                jnr[job] = nr
                net = ns > 1 and not duration
                if net:
                    _network(job, True, srv, ns, rck, nr, jf, gi, si, sf, rf, ji, on_network, jnr,
                             rack_crossing, rack_first, rack_servers, stamp, mark, mark_state, buf)  # fmt: skip
                own_gpu = gpus[0] if job_milli[job] < FULL_GPU else -1
                bid = _next_bid(mark_state)
                k = 0
                if not duration:
                    k = _neighbours(job, srv, ns, rck, nr, net, interference, own_gpu, gi, si, ji, on_network, jnr,
                                    rack_first, rack_servers, mark, bid, batch, 0)  # fmt: skip
                k = _add(job, mark, bid, batch, k)
                _ek.refresh(
                    batch[:k], now, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, times
                )
                if k > 1 and _has_tie(times, k):
                    log = _log_batch(log, st_i, OP_OR, job, srv, ns, rck, nr, net, interference, own_gpu, batch,
                                     k, times, st_i[I_SEQ], gi, si, ji, on_network, jnr, rack_first,
                                     rack_servers, stamp, mark, mark_state, buf)  # fmt: skip
                h = _push_batch(h, st_i, ji, batch, k, times)
                if not merge and open_pools == 0:
                    break
        else:
            st_i[I_CHANGED] = 0
            st_i[I_PHASE] = PH_INSTANT
