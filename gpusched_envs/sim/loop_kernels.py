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
from gpusched_envs.sim import numba_cache  # noqa: F401  (one cache stamp for every kernel file)
from gpusched_envs.sim import place_kernels as _pk

FULL_GPU = 1000
QUEUED, RUNNING, RESTARTING, DONE, DROPPED = 1, 2, 3, 4, 5  # gpusched_envs.sim.status
COMPLETION, RESTART_DONE, TIMER = 0, 1, 2

# entries of the float state vector
F_NOW, F_DEMAND, F_DINT, F_FINT, F_UINT, F_ALLOC, F_LAST, F_FRAG, F_MAXT, F_RESTART, F_TIMER = range(11)
F_SIZE = 11
# entries of the int state vector
(
    I_SEQ, I_NEXT, I_EVENTS, I_DECISIONS, I_FINISHED, I_TOFINISH, I_FREE, I_GOFF, I_HLEN, I_QLEN, I_QN, I_PHASE,
    I_STAMP, I_LOG, I_BATCHES, I_CHANGED, I_JSTAMP, I_QSTAMP, I_TVER, I_TFIRED,
) = range(20)  # fmt: skip
I_SIZE = 20
# entries of the option vector
O_BACKFILL, O_SPREAD, O_RANK, O_FRACTIONAL, O_MAXSERVER, O_NPOOLS, O_AFFINITY, O_PREEMPT, O_PRIO = range(9)
O_SIZE = 9
# priorities of the preemptive policies
PRIO_SRTF, PRIO_LEVEL, PRIO_GITTINS = range(3)
# phases of the loop (where it resumes)
PH_DECIDE, PH_INSTANT, PH_POP = 0, 1, 2
# return codes
RUN_DONE, RUN_TIES, RUN_DEADLOCK = 0, 1, 2
# tie-log operations: the set ``neighbours | {job}`` (a start) or ``neighbours`` less the job (a release)
OP_OR, OP_DISCARD, OP_PLAIN = 0, 1, 2
# constant arguments of the calls between kernels, as numpy scalars: numba types a plain ``0`` or ``True`` passed
# to a compiled function as a literal and compiles that function once more for it; these are typed int64 / bool,
# as the variables passed elsewhere, so every kernel is compiled once
_ZERO = np.int64(0)
_ONE = np.int64(1)
_TRUE = np.bool_(True)
_FALSE = np.bool_(False)


class Packed:
    """The engine's state as the compiled loops hold it beside the simulator's own arrays (event heap, queue,
    stamps, the policy's options and the cluster's look-up tables); built by ``Simulator._pack``."""

    def loop_args(self, sim) -> tuple:
        """The arguments of :func:`run_queue` for simulator ``sim``."""
        c = sim.cluster
        cat = c.catalog
        return (
            self.st_f, self.st_i, self.opts, self.heap, self.log, self.queue, sim.status, sim._jf, sim._ji,
            sim._gi, sim._si, sim._sf, sim._rf, sim._mf, cat.iteration_time, sim._overhead,
            cat.colocation_slowdown, cat.space_sharing_by_type, sim._params, sim._gbuf, sim._places, self.submit,
            self.share, sim.demand_at_arrival, sim.finish_time, sim._demand_at_finish, self.stamp, self.jstamp,
            self.qstamp, self.jnr, sim.on_network, sim.rack_crossing, sim.needs_restart, sim.preemptions,
            sim.job_gpus_n, sim.job_milli, sim.job_allowed, sim.job_pool, self.rank, sim.job_ideal_iter,
            self.allowed, self.server_ok, self.server_ok_valid, self.largest, c.server_rows_i64, c.num_racks,
            c.gpu_server_i64, self.rack_first, self.rack_servers, self.pool_first, self.pool_list, self.capacity,
            self.thresholds, self.gittins, self.gittins_bounds, self.mark, self.mark_state,
        )  # fmt: skip


# ------------------------------------------------------------------ the event heap: (5, capacity) time, seq, job, version, kind
@njit(cache=True, no_cpython_wrapper=True)
def _before(h, a, b):
    return h[0, a] < h[0, b] or (h[0, a] == h[0, b] and h[1, a] < h[1, b])


@njit(cache=True, no_cpython_wrapper=True)
def _swap(h, a, b):
    for r in range(5):
        x = h[r, a]
        h[r, a] = h[r, b]
        h[r, b] = x


@njit(cache=True, no_cpython_wrapper=True)
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
def heap_push(h, n, t, seq, job, version, kind):
    """Push an event; returns the heap (a larger copy when it was full)."""
    if n == h.shape[1]:
        bigger = np.empty((5, 2 * n + 64))
        for r in range(5):
            for i in range(n):
                bigger[r, i] = h[r, i]
        h = bigger
    h[0, n] = t
    h[1, n] = seq
    h[2, n] = job
    h[3, n] = version
    h[4, n] = kind
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if _before(h, i, p):
            _swap(h, i, p)
            i = p
        else:
            break
    return h


@njit(cache=True, no_cpython_wrapper=True)
def _heap_pop(h, n):
    """Remove the first event (read it before); returns the new size."""
    n -= 1
    if n > 0:
        for r in range(5):
            h[r, 0] = h[r, n]
        _sift_down(h, _ZERO, n)
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
@njit(cache=True, no_cpython_wrapper=True)
def _integrate(st_f):
    """``Simulator._integrate_to_now``."""
    dt = st_f[F_NOW] - st_f[F_LAST]
    if dt > 0:
        st_f[F_DINT] += st_f[F_DEMAND] * dt
        st_f[F_FINT] += st_f[F_FRAG] * dt
        st_f[F_UINT] += st_f[F_ALLOC] * dt
        st_f[F_LAST] = st_f[F_NOW]


@njit(cache=True, no_cpython_wrapper=True)
def _servers_of(job, ji, gi, si, gbuf, srv, rck):
    """Distinct servers and racks (ascending) of a job's GPUs into ``srv`` / ``rck``; returns their counts."""
    goff, n = ji[_ek.GOFF, job], ji[_ek.GLEN, job]
    ns = _ZERO
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
    _ek.sort_ints(srv, ns)
    nr = _ZERO
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
    _ek.sort_ints(rck, nr)
    return ns, nr


@njit(cache=True, no_cpython_wrapper=True)
def _add(job, mark, bid, buf, k):
    if mark[job] != bid:
        mark[job] = bid
        buf[k] = job
        k += 1
    return k


@njit(cache=True, no_cpython_wrapper=True)
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


@njit(cache=True, no_cpython_wrapper=True)
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


@njit(cache=True, no_cpython_wrapper=True)
def _by_stamp(buf, k, stamp):
    """``buf[:k]`` in start order (a copy)."""
    keys = np.empty(k, dtype=np.int64)
    for i in range(k):
        keys[i] = stamp[buf[i]]
    order = np.empty(k, dtype=np.int64)
    part = np.empty(k, dtype=np.int64)
    _ek.stable_order(keys, k, order, part)
    for i in range(k):
        part[i] = buf[order[i]]
    return part


@njit(cache=True, no_cpython_wrapper=True)
def _sum_traffic(members, jf):
    """A link's load: its users' traffic summed in their insertion order (``Simulator._sum_load``)."""
    acc = 0.0
    for j in members:
        acc += jf[_ek.TRAF, j]
    return acc


@njit(cache=True, no_cpython_wrapper=True)
def _next_bid(mark_state):
    mark_state[0] += 1
    return mark_state[0]


@njit(cache=True, no_cpython_wrapper=True)
def _network(job, join, srv, ns, rck, nr, jf, gi, si, sf, rf, ji, on_network, jnr, rack_crossing, rack_first,
             rack_servers, stamp, mark, mark_state, buf):  # fmt: skip
    """``Simulator._join_network`` / ``_leave_network``: the loads of the job's NICs and uplinks summed afresh over
    their users (on the network, in the order they joined it: ``stamp`` is the join stamp)."""
    on_network[job] = join
    for i in range(ns):
        s = srv[i]
        bid = _next_bid(mark_state)
        k = _server_jobs(s, gi, si, ji, on_network, _TRUE, mark, bid, buf, _ZERO)
        sf[_ek.S_NICLOAD, s] = _sum_traffic(_by_stamp(buf, k, stamp), jf)
    if nr > 1:
        for i in range(nr):
            r = rck[i]
            rack_crossing[r] += 1 if join else -1
            bid = _next_bid(mark_state)
            k = _rack_crossers(
                r, gi, si, ji, on_network, jnr, rack_first, rack_servers, mark, bid, buf, _ZERO
            )
            rf[_ek.R_UPLOAD, r] = _sum_traffic(_by_stamp(buf, k, stamp), jf)


@njit(cache=True, no_cpython_wrapper=True)
def _neighbours(job, srv, ns, rck, nr, net, interference, own_gpu, gi, si, ji, on_network, jnr, rack_first,
                rack_servers, mark, bid, buf, k):  # fmt: skip
    """Add the jobs whose speed depends on ``job`` (``Simulator._neighbours``, any order) to ``buf[k:]``."""
    if interference:
        for i in range(ns):
            k = _server_jobs(srv[i], gi, si, ji, on_network, _FALSE, mark, bid, buf, k)
    if own_gpu >= 0:
        q = gi[_ek.G_SHHEAD, own_gpu]
        while q >= 0:
            k = _add(q, mark, bid, buf, k)
            q = ji[_ek.SHNEXT, q]
    if net:
        for i in range(ns):
            k = _server_jobs(srv[i], gi, si, ji, on_network, _TRUE, mark, bid, buf, k)
        if nr > 1:
            for i in range(nr):
                k = _rack_crossers(
                    rck[i], gi, si, ji, on_network, jnr, rack_first, rack_servers, mark, bid, buf, k
                )
    return k


@njit(cache=True, no_cpython_wrapper=True)
def _log_put(log, pos, v):
    if pos >= len(log):
        bigger = np.empty(2 * len(log) + 1024, dtype=np.int64)
        for i in range(len(log)):
            bigger[i] = log[i]
        log = bigger
    log[pos] = v
    return log, pos + 1


@njit(cache=True, no_cpython_wrapper=True)
def _log_segment(log, pos, members):
    log, pos = _log_put(log, pos, len(members))
    for j in members:
        log, pos = _log_put(log, pos, j)
    return log, pos


@njit(cache=True, no_cpython_wrapper=True)
def _log_batch(log, st_i, op, job, srv, ns, rck, nr, net, interference, own_gpu, batch, k, times, seq0, gi, si,
               ji, on_network, jnr, rack_first, rack_servers, stamp, jstamp, mark, mark_state, buf):  # fmt: skip
    """Append a batch with tied completion times to the log: the dicts the engine's neighbour set is built from
    (``Simulator._neighbours``, each in insertion order, as they were when the set was built: jobs on a server or a
    GPU in start order, on a NIC or uplink in the order they joined the network), the batch's jobs, which
    of them were pushed, and the sequence number before its pushes. For a release (``OP_DISCARD``) the job has
    already left its GPUs and the network: it is put back where the dicts still held it."""
    pos = st_i[I_LOG]
    log, pos = _log_put(log, pos, op)
    log, pos = _log_put(log, pos, job)
    segments = _ZERO
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
            m = _server_jobs(srv[i], gi, si, ji, on_network, _FALSE, mark, bid, buf, _ZERO)
            if back:
                m = _add(job, mark, bid, buf, m)
            log, pos = _log_segment(log, pos, _by_stamp(buf, m, stamp))
    if own_gpu >= 0:
        bid = _next_bid(mark_state)
        m = _ZERO
        q = gi[_ek.G_SHHEAD, own_gpu]
        while q >= 0:
            m = _add(q, mark, bid, buf, m)
            q = ji[_ek.SHNEXT, q]
        log, pos = _log_segment(log, pos, _by_stamp(buf, m, stamp))
    if net:
        for i in range(ns):
            bid = _next_bid(mark_state)
            m = _server_jobs(srv[i], gi, si, ji, on_network, _TRUE, mark, bid, buf, _ZERO)
            if back:
                m = _add(job, mark, bid, buf, m)
            log, pos = _log_segment(log, pos, _by_stamp(buf, m, jstamp))
        if nr > 1:
            for i in range(nr):
                bid = _next_bid(mark_state)
                m = _rack_crossers(
                    rck[i], gi, si, ji, on_network, jnr, rack_first, rack_servers, mark, bid, buf, _ZERO
                )
                if back:
                    m = _add(job, mark, bid, buf, m)
                log, pos = _log_segment(log, pos, _by_stamp(buf, m, jstamp))
    log, pos = _log_put(log, pos, k)
    for i in range(k):
        log, pos = _log_put(log, pos, batch[i])
    for i in range(k):
        log, pos = _log_put(log, pos, _ONE if times[i] == times[i] else _ZERO)
    log, pos = _log_put(log, pos, seq0)
    st_i[I_LOG] = pos
    st_i[I_BATCHES] += 1
    return log


@njit(cache=True, no_cpython_wrapper=True)
def _has_tie(times, k):
    m = _ZERO
    vals = np.empty(k)
    for i in range(k):
        if times[i] == times[i]:
            vals[m] = times[i]
            m += 1
    if m < 2:
        return False
    order = np.empty(m, dtype=np.int64)
    _ek.stable_order(vals, m, order, np.empty(m, dtype=np.int64))
    for i in range(1, m):
        if vals[order[i]] == vals[order[i - 1]]:
            return True
    return False


@njit(cache=True, no_cpython_wrapper=True)
def _push_batch(h, st_i, ji, batch, k, times):
    """``Simulator._push_completions``: the batch's completion events, in its order."""
    n = st_i[I_HLEN]
    seq = st_i[I_SEQ]
    for i in range(k):
        t = times[i]
        if t == t:
            seq += 1
            job = batch[i]
            h = heap_push(h, n, t, seq, job, ji[_ek.VER, job], np.int64(COMPLETION))
            n += 1
    st_i[I_SEQ] = seq
    st_i[I_HLEN] = n
    return h


# ------------------------------------------------------------------ the policy's pass and its placements
@njit(cache=True, no_cpython_wrapper=True)
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


@njit(cache=True, no_cpython_wrapper=True)
def _release_job(job, complete, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf,
                 share, stamp, jstamp, jnr, on_network, rack_crossing, job_milli, rack_first, rack_servers, mark,
                 mark_state, buf, batch, times, srv, rck):  # fmt: skip
    """``Simulator._release``: the job leaves its GPUs (its work done when it ``complete``s), its neighbours are
    refreshed and their completions pushed. Returns (heap, log)."""
    now = st_f[F_NOW]
    duration = params[_ek.P_DURATION] > 0.0
    interference = params[_ek.P_INTERFERENCE] > 0.0
    ns, nr = _servers_of(job, ji, gi, si, gbuf, srv, rck)
    own_gpu = gbuf[ji[_ek.GOFF, job]] if job_milli[job] < FULL_GPU else -1
    if own_gpu >= 0:  # the GPU's holder: its first remaining sharer
        first = -1
        q = gi[_ek.G_SHHEAD, own_gpu]
        while q >= 0:
            if q != job and (first < 0 or stamp[q] < stamp[first]):
                first = q
            q = ji[_ek.SHNEXT, q]
        gi[_ek.G_JOB, own_gpu] = first
    st_f[F_ALLOC] -= share[job]
    net = on_network[job]
    k = _ZERO
    if not duration:
        bid = _next_bid(mark_state)
        mark[job] = bid  # left out (discarded)
        k = _neighbours(job, srv, ns, rck, nr, net, interference, own_gpu, gi, si, ji, on_network, jnr,
                        rack_first, rack_servers, mark, bid, batch, _ZERO)  # fmt: skip
    if net:
        _network(job, _FALSE, srv, ns, rck, nr, jf, gi, si, sf, rf, ji, on_network, jnr, rack_crossing,
                 rack_first, rack_servers, jstamp, mark, mark_state, buf)  # fmt: skip
    st_i[I_FREE] += _ek.release_job(
        job, complete, now, batch[:k], status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, times
    )
    if k > 1 and _has_tie(times, k):
        log = _log_batch(log, st_i, np.int64(OP_DISCARD), job, srv, ns, rck, nr, net, interference, own_gpu, batch, k,
                         times, st_i[I_SEQ], gi, si, ji, on_network, jnr, rack_first, rack_servers, stamp, jstamp,
                         mark, mark_state, buf)  # fmt: skip
    h = _push_batch(h, st_i, ji, batch, k, times)
    return h, log


@njit(cache=True, no_cpython_wrapper=True)
def _join_refresh(job, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, stamp,
                  jstamp, jnr, on_network, rack_crossing, job_milli, rack_first, rack_servers, mark, mark_state, buf,
                  batch, times, srv, rck, ns, nr, op):  # fmt: skip
    """A job that now runs (``op`` OP_OR) joins the network when it spans servers and it and its neighbours are
    refreshed; a job waiting out its restart delay (``OP_PLAIN``) refreshes its neighbours only. Returns (heap,
    log)."""
    now = st_f[F_NOW]
    duration = params[_ek.P_DURATION] > 0.0
    interference = params[_ek.P_INTERFERENCE] > 0.0
    net = op == OP_OR and ns > 1 and not duration
    if net:
        st_i[I_JSTAMP] += 1
        jstamp[job] = st_i[I_JSTAMP]
        _network(job, _TRUE, srv, ns, rck, nr, jf, gi, si, sf, rf, ji, on_network, jnr, rack_crossing, rack_first,
                 rack_servers, jstamp, mark, mark_state, buf)  # fmt: skip
    own_gpu = gbuf[ji[_ek.GOFF, job]] if job_milli[job] < FULL_GPU else -1
    bid = _next_bid(mark_state)
    k = _ZERO
    if not duration:
        k = _neighbours(job, srv, ns, rck, nr, net, interference, own_gpu, gi, si, ji, on_network, jnr, rack_first,
                        rack_servers, mark, bid, batch, _ZERO)  # fmt: skip
    if op == OP_OR:
        k = _add(job, mark, bid, batch, k)
    _ek.refresh(batch[:k], now, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, times)
    if k > 1 and _has_tie(times, k):
        # (two jobs or more: not the duration model)
        log = _log_batch(log, st_i, op, job, srv, ns, rck, nr, net, interference, own_gpu, batch, k, times,
                         st_i[I_SEQ], gi, si, ji, on_network, jnr, rack_first, rack_servers, stamp, jstamp, mark,
                         mark_state, buf)  # fmt: skip
    h = _push_batch(h, st_i, ji, batch, k, times)
    return h, log


@njit(cache=True, no_cpython_wrapper=True)
def _live(qj, qs, i, status, qstamp):
    """Whether queue entry ``i`` is a waiting job (not one that left since, nor an earlier entry of a job that came
    back)."""
    j = qj[i]
    return status[j] == QUEUED and qs[i] == qstamp[j]


@njit(cache=True, no_cpython_wrapper=True)
def _next_instant(h, st_f, st_i, submit, num_jobs):
    """``Simulator.next_decision``'s clock: (-1, the time of the next arrival or event); (``RUN_DONE``, 0) when every
    job has finished or that time is past ``max_time`` (the integrals brought up to the end); (``RUN_DEADLOCK``, 0)
    when nothing is pending."""
    if st_i[I_FINISHED] >= st_i[I_TOFINISH]:
        _integrate(st_f)
        return np.int64(RUN_DONE), 0.0
    t_event = h[0, 0] if st_i[I_HLEN] > 0 else np.inf
    nxt = st_i[I_NEXT]
    t_arrival = submit[nxt] if nxt < num_jobs else np.inf
    t = min(t_event, t_arrival)
    if t == np.inf:
        return np.int64(RUN_DEADLOCK), 0.0
    if t > st_f[F_MAXT]:
        st_f[F_NOW] = max(st_f[F_NOW], st_f[F_MAXT])
        _integrate(st_f)
        return np.int64(RUN_DONE), 0.0
    return np.int64(-1), t


@njit(cache=True, no_cpython_wrapper=True)
def _oldest_waiting(q, st_i, status, qstamp, num_jobs):
    """The oldest waiting job: the smallest row in the queue (a preempted job re-enters it at the end)."""
    qj = q[0]
    qs = q[1]
    head = num_jobs
    for i in range(st_i[I_QLEN]):
        if _live(qj, qs, i, status, qstamp) and qj[i] < head:
            head = qj[i]
    return head


@njit(cache=True, no_cpython_wrapper=True)
def _compact_queue(q, st_i, status, qstamp):
    """Drop the entries of jobs that left the queue (its order kept); returns its new length."""
    qj = q[0]
    qs = q[1]
    kept = 0
    for i in range(st_i[I_QLEN]):
        if _live(qj, qs, i, status, qstamp):
            qj[kept] = qj[i]
            qs[kept] = qs[i]
            kept += 1
    st_i[I_QLEN] = kept
    return kept


@njit(cache=True, no_cpython_wrapper=True)
def _queue_put(job, q, st_i, status, qstamp):
    """The job (re)enters the queue at its end (``q``: the jobs and the stamps of their entries)."""
    qj = q[0]
    qs = q[1]
    if st_i[I_QLEN] == len(qj):  # full of jobs that left: keep the waiting ones
        _compact_queue(q, st_i, status, qstamp)
    status[job] = QUEUED
    st_i[I_QSTAMP] += 1
    qstamp[job] = st_i[I_QSTAMP]
    qj[st_i[I_QLEN]] = job
    qs[st_i[I_QLEN]] = st_i[I_QSTAMP]
    st_i[I_QLEN] += 1
    st_i[I_QN] += 1


@njit(cache=True, no_cpython_wrapper=True)
def _attained(job, now, status, jf, job_n):
    """``Simulator.attained_service``."""
    a = jf[_ek.ATT, job]
    if status[job] == RUNNING or status[job] == RESTARTING:
        a += job_n[job] * (now - jf[_ek.RSTART, job])
    return a


@njit(cache=True, no_cpython_wrapper=True)
def _level(a, thresholds):
    """``Tiresias.queue_level``: ``np.searchsorted(thresholds, a, side="right")``, numpy's binary search (a NaN
    ``a`` after every threshold)."""
    lo = _ZERO
    hi = np.int64(len(thresholds))
    nan = a != a
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if nan or thresholds[mid] <= a:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, no_cpython_wrapper=True)
def _class_of(bounds, n):
    """``min(np.searchsorted(bounds, n, side="left"), len(bounds) - 1)`` for integers, numpy's binary search."""
    lo = _ZERO
    hi = np.int64(len(bounds))
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if bounds[mid] < n:
            lo = mid + 1
        else:
            hi = mid
    return min(lo, len(bounds) - 1)


@njit(cache=True, no_cpython_wrapper=True)
def _head_fragmentation(head, st_f, st_i, gi, si, job_n, job_milli, job_allowed, allowed, server_ok_valid,
                        pool_first, pool_servers, none):  # fmt: skip
    """``Simulator._note_fragmentation`` for the head job: the free GPUs it cannot use while it waits (``F_FRAG``
    was reset to 0 by the caller)."""
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


@njit(cache=True, no_cpython_wrapper=True)
def _pop_instant(now, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf, share,
                 finish, at_finish, stamp, jstamp, jnr, on_network, rack_crossing, needs_restart, job_milli,
                 rack_first, rack_servers, mark, mark_state, buf, batch, times, srv, rck, done):  # fmt: skip
    """Every event due at ``now``, in (time, seq) order (``Simulator.next_decision``'s inner loop); stops with
    ``RUN_TIES`` before an event when a batch of tied completions waits for the engine to order it. The jobs that
    complete are appended to ``done`` (its entry 0: their count) when it is not empty. Returns (code, heap, log),
    code -1 when every due event was processed."""
    code = np.int64(-1)
    while st_i[I_HLEN] > 0 and h[0, 0] <= now:
        if st_i[I_BATCHES] > 0:
            code = RUN_TIES
            break
        job = np.int64(h[2, 0])
        version = np.int64(h[3, 0])
        kind = np.int64(h[4, 0])
        st_i[I_HLEN] = _heap_pop(h, st_i[I_HLEN])
        st_i[I_EVENTS] += 1
        if kind == TIMER:
            if version == st_i[I_TVER]:
                st_i[I_TFIRED] = 1
                st_f[F_TIMER] = np.inf
            continue
        if version != ji[_ek.VER, job]:
            continue
        if kind == COMPLETION:  # Simulator._complete
            h, log = _release_job(job, _TRUE, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo,
                                  spsh, params, gbuf, share, stamp, jstamp, jnr, on_network, rack_crossing,
                                  job_milli, rack_first, rack_servers, mark, mark_state, buf, batch, times, srv,
                                  rck)  # fmt: skip
            status[job] = DONE
            finish[job] = now
            at_finish[job] = st_f[F_DINT]
            st_i[I_FINISHED] += 1
            st_f[F_DEMAND] -= share[job]
            if len(done):
                done[0] += 1
                done[done[0]] = job
        else:  # RESTART_DONE
            status[job] = RUNNING
            needs_restart[job] = False
            jf[_ek.LAST, job] = now
            ns, nr = _servers_of(job, ji, gi, si, gbuf, srv, rck)
            h, log = _join_refresh(job, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo, spsh,
                                   params, gbuf, stamp, jstamp, jnr, on_network, rack_crossing, job_milli,
                                   rack_first, rack_servers, mark, mark_state, buf, batch, times, srv, rck, ns,
                                   nr, np.int64(OP_OR))  # fmt: skip
        st_i[I_CHANGED] = 1
    return code, h, log


@njit(cache=True, no_cpython_wrapper=True)
def _start_placed(job, gpus, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead,
                  colo, spsh, params, gbuf, places, share, stamp, jstamp, jnr, on_network, rack_crossing,
                  needs_restart, job_milli, rack_first, rack_servers, mark, mark_state, buf, batch, times, srv,
                  rck):  # fmt: skip
    """``Simulator.start`` of a queued job on ``gpus`` (the queue entry becomes stale). Returns (heap, log, GPU-list
    buffer)."""
    now = st_f[F_NOW]
    _integrate(st_f)
    st_i[I_STAMP] += 1
    stamp[job] = st_i[I_STAMP]
    st_i[I_QN] -= 1
    st_f[F_ALLOC] += share[job]
    goff = st_i[I_GOFF]
    st_i[I_GOFF] = goff + len(gpus)
    if goff + len(gpus) > len(gbuf):  # every start's GPU list is appended: a larger buffer
        bigger = np.empty(2 * len(gbuf) + len(gpus), dtype=np.int64)
        for c in range(len(gbuf)):
            bigger[c] = gbuf[c]
        gbuf = bigger
    restart = needs_restart[job] and st_f[F_RESTART] > 0
    if restart:
        status[job] = RESTARTING
        jf[_ek.RATE, job] = 0.0
        ji[_ek.VER, job] += 1
        st_i[I_SEQ] += 1
        h = heap_push(h, st_i[I_HLEN], now + st_f[F_RESTART], st_i[I_SEQ], job, ji[_ek.VER, job],
                      np.int64(RESTART_DONE))  # fmt: skip
        st_i[I_HLEN] += 1
    else:
        status[job] = RUNNING
        needs_restart[job] = False
    ns, nr, lost = _ek.allocate(job, gpus, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead, params, gbuf,
                                goff, places)  # fmt: skip
    for c in range(ns):
        srv[c] = places[0, c]
    for c in range(nr):
        rck[c] = places[1, c]
    jf[_ek.RSTART, job] = now
    if jf[_ek.FSTART, job] != jf[_ek.FSTART, job]:
        jf[_ek.FSTART, job] = now
    jf[_ek.LAST, job] = now
    st_i[I_FREE] -= lost
    jnr[job] = nr
    op = OP_OR
    if restart:
        op = OP_PLAIN
    h, log = _join_refresh(job, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo, spsh, params, gbuf,
                           stamp, jstamp, jnr, on_network, rack_crossing, job_milli, rack_first, rack_servers, mark,
                           mark_state, buf, batch, times, srv, rck, ns, nr, op)  # fmt: skip
    return h, log, gbuf


@njit(cache=True)
def run_queue(
    st_f, st_i, opts, h, log, q, status, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead, colo, spsh, params,
    gbuf, places, submit, share, at_arrival, finish, at_finish, stamp, jstamp, qstamp, jnr, on_network,
    rack_crossing, needs_restart, preemptions, job_n, job_milli, job_allowed, job_pool, rank, ideal_iter, allowed,
    server_ok, server_ok_valid, largest, rows, num_racks, gpu_server, rack_first, rack_servers, pool_first,
    pool_servers, capacity, thresholds, gittins, gittins_bounds, mark, mark_state,
):  # fmt: skip
    """Run the simulation under a built-in policy until it drains, reaches ``max_time``, deadlocks or has a batch
    of tied completions for the engine to order (the return code); resumes where it stopped (the phase in
    ``st_i``). Returns (code, heap, log, GPU-list buffer)."""
    num_jobs = len(status)
    qj = q[0]  # the queue: its jobs and the stamps of their entries
    qs = q[1]
    num_gpus = gi.shape[1]
    backfill = opts[O_BACKFILL] > 0
    fractional = opts[O_FRACTIONAL] > 0
    preemptive = opts[O_PREEMPT] > 0
    prio = opts[O_PRIO]
    buf = np.empty(num_jobs + 1, dtype=np.int64)
    batch = np.empty(num_jobs + 1, dtype=np.int64)
    times = np.empty(num_jobs + 1)
    srv = np.empty(max(1, si.shape[1]), dtype=np.int64)
    rck = np.empty(max(1, rf.shape[1]), dtype=np.int64)
    free_buf = np.empty(num_gpus, dtype=np.bool_)
    counts = np.empty(si.shape[1], dtype=np.int64)
    none = np.zeros(0, dtype=np.bool_)
    no_done = np.zeros(0, dtype=np.int64)  # _pop_instant lists no completed jobs
    # per pool (pool -1: the last entry): blocked in this pass, waiting jobs, waiting jobs not yet visited
    top_pool = job_pool[0] if num_jobs else 0  # job_pool.max()
    for j in range(1, num_jobs):
        if job_pool[j] > top_pool:
            top_pool = job_pool[j]
    blocked = np.zeros(top_pool + 2, dtype=np.bool_)
    pool_waiting = np.zeros(len(blocked), dtype=np.int64)
    for i in range(st_i[I_QLEN]):
        if _live(qj, qs, i, status, qstamp):
            pool_waiting[job_pool[qj[i]]] += 1
    left = np.zeros(len(blocked), dtype=np.int64)
    qhead = _ZERO  # every queue entry before it has left the queue (a queue without preemption)
    # strict FIFO: the queue of each pool, in queue order (the pass merges their first waiting jobs)
    merge = not backfill and opts[O_RANK] == 0 and not preemptive
    pq_end = np.zeros(len(blocked), dtype=np.int64)
    for j in range(num_jobs):
        pq_end[job_pool[j]] += 1
    pq_head = np.zeros(len(blocked), dtype=np.int64)
    for p in range(1, len(blocked)):
        pq_head[p] = pq_head[p - 1] + pq_end[p - 1]
    for p in range(len(blocked)):
        pq_end[p] = pq_head[p]
    pq_store = np.empty(max(1, num_jobs), dtype=np.int64)
    if merge:
        for i in range(st_i[I_QLEN]):
            if _live(qj, qs, i, status, qstamp):
                p = job_pool[qj[i]]
                pq_store[pq_end[p]] = qj[i]
                pq_end[p] += 1
    # one exit, after the loop (each return point would release every live array on its own path)
    code = np.int64(-1)
    while code < 0:
        phase = st_i[I_PHASE]
        if phase == PH_DECIDE:
            # Simulator._note_fragmentation
            _integrate(st_f)
            st_f[F_FRAG] = 0.0
            if st_i[I_QN] > 0:
                if preemptive:
                    head = _oldest_waiting(q, st_i, status, qstamp, num_jobs)
                else:
                    while not _live(qj, qs, qhead, status, qstamp):
                        qhead += 1
                    head = qj[qhead]
                _head_fragmentation(head, st_f, st_i, gi, si, job_n, job_milli, job_allowed, allowed,
                                    server_ok_valid, pool_first, pool_servers, none)  # fmt: skip
            st_i[I_CHANGED] = 0
            st_i[I_PHASE] = PH_INSTANT
            continue
        if phase == PH_INSTANT:
            end, t = _next_instant(h, st_f, st_i, submit, num_jobs)
            if end >= 0:
                code = end
                continue
            st_f[F_NOW] = t
            _integrate(st_f)
            st_i[I_TFIRED] = 0
            j = st_i[I_NEXT]
            while j < num_jobs and submit[j] <= t:
                if status[j] != DROPPED:
                    _queue_put(j, q, st_i, status, qstamp)
                    pool_waiting[job_pool[j]] += 1
                    if merge:
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
        code, h, log = _pop_instant(now, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo, spsh,
                                    params, gbuf, share, finish, at_finish, stamp, jstamp, jnr, on_network,
                                    rack_crossing, needs_restart, job_milli, rack_first, rack_servers, mark,
                                    mark_state, buf, batch, times, srv, rck, no_done)  # fmt: skip
        if code >= 0:
            continue
        if not (st_i[I_QN] > 0 and (st_i[I_CHANGED] != 0 or st_i[I_TFIRED] != 0)):
            st_i[I_CHANGED] = 0
            st_i[I_PHASE] = PH_INSTANT
            continue
        st_i[I_CHANGED] = 0
        st_i[I_DECISIONS] += 1
        st_i[I_PHASE] = PH_DECIDE
        # the policy's pass: the jobs to start, in order (and, when preemptive, the running jobs to make room)
        m = st_i[I_QLEN]
        if 2 * st_i[I_QN] <= m:
            m = _compact_queue(q, st_i, status, qstamp)
            qhead = _ZERO
        chosen = qj
        num_chosen = m
        victims = qj  # running jobs outside the chosen set, lowest priority first
        num_victims = 0
        if preemptive:  # PreemptivePolicy.schedule: priority order over the waiting and running jobs
            cand = np.empty(m + num_gpus + 1, dtype=np.int64)
            nc = _ZERO
            for i in range(m):
                if _live(qj, qs, i, status, qstamp):
                    cand[nc] = qj[i]
                    nc += 1
            for j in range(num_jobs):
                if status[j] == RUNNING or status[j] == RESTARTING:
                    if nc == len(cand):
                        bigger = np.empty(2 * nc, dtype=np.int64)
                        for i in range(nc):
                            bigger[i] = cand[i]
                        cand = bigger
                    cand[nc] = j
                    nc += 1
            k1 = np.empty(nc)
            k2 = np.empty(nc)
            for i in range(nc):
                j = cand[i]
                if prio == PRIO_SRTF:  # (remaining ideal time, job)
                    done = jf[_ek.DONE, j]
                    if status[j] == RUNNING:
                        done += jf[_ek.RATE, j] * (now - jf[_ek.LAST, j])
                    rem = jf[_ek.WORK, j] - done
                    k1[i] = (rem if rem > 0.0 else 0.0) * ideal_iter[j]
                    k2[i] = 0.0
                else:
                    level = _level(_attained(j, now, status, jf, job_n), thresholds)
                    if prio == PRIO_GITTINS:  # (-index, submit, job)
                        cls = _class_of(gittins_bounds, job_n[j])
                        k1[i] = -gittins[cls, level]
                    else:  # (queue level, submit, job)
                        k1[i] = float(level)
                    k2[i] = submit[j]
            # by (k1, k2, job): stable sorts by the job, then k2, then k1
            order = np.empty(nc, dtype=np.int64)
            step = np.empty(nc, dtype=np.int64)
            tmp = np.empty(nc, dtype=np.int64)
            fkeys = np.empty(nc)
            _ek.stable_order(cand, nc, order, tmp)
            for key in (k2, k1):
                for i in range(nc):
                    fkeys[i] = key[order[i]]
                _ek.stable_order(fkeys, nc, step, tmp)
                for i in range(nc):
                    tmp[i] = order[step[i]]
                for i in range(nc):
                    order[i] = tmp[i]
            ranked = np.empty(nc, dtype=np.int64)
            for i in range(nc):
                ranked[i] = cand[order[i]]
            budget = capacity.copy()
            chosen = np.empty(nc, dtype=np.int64)
            num_chosen = 0
            bid = _next_bid(mark_state)
            for i in range(nc):
                j = ranked[i]
                pool = job_pool[j]
                need = (job_n[j] * min(job_milli[j], FULL_GPU)) / 1000.0
                if budget[pool] >= need:
                    budget[pool] -= need
                    chosen[num_chosen] = j
                    num_chosen += 1
                    mark[j] = bid
            victims = np.empty(nc, dtype=np.int64)
            for i in range(nc - 1, -1, -1):
                j = ranked[i]
                if status[j] != QUEUED and mark[j] != bid:
                    victims[num_victims] = j
                    num_victims += 1
        elif opts[O_RANK] > 0:
            keys = np.empty(m, dtype=np.int64)
            for i in range(m):
                keys[i] = rank[qj[i]]
            order = np.empty(m, dtype=np.int64)
            _ek.stable_order(keys, m, order, np.empty(m, dtype=np.int64))
            chosen = np.empty(m, dtype=np.int64)
            for i in range(m):
                chosen[i] = qj[order[i]]
        if not preemptive and st_i[I_FREE] == 0 and not fractional:
            continue  # QueuePolicy.schedule: nothing can start
        # pools with waiting jobs not yet visited and not blocked: the pass ends when none is left
        blocked[:] = False
        for p in range(len(left)):
            left[p] = pool_waiting[p]
        open_pools = 0
        for p in range(len(left)):
            if left[p] > 0:
                open_pools += 1
        if merge:  # each pool's first waiting job (strict FIFO visits no other)
            for p in range(len(left)):
                while pq_head[p] < pq_end[p] and status[pq_store[pq_head[p]]] != QUEUED:
                    pq_head[p] += 1
        i = qhead if (not preemptive and opts[O_RANK] == 0) else 0
        while True:
            if not preemptive and st_i[I_FREE] == 0 and not fractional:
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
                if i >= num_chosen:
                    break
                job = chosen[i]
                i += 1
                if status[job] != QUEUED:
                    continue
                pool = job_pool[job]
                if not preemptive:
                    if blocked[pool]:
                        continue
                    left[pool] -= 1
            gpus = _place(job, opts, none, gi, si, job_n, job_milli, job_allowed, allowed, server_ok,
                          server_ok_valid, largest, rows, num_racks, gpu_server, pool_first, pool_servers,
                          free_buf, counts)  # fmt: skip
            if preemptive:
                k = job_allowed[job]
                while len(gpus) == 0:
                    useful = -1
                    for v in range(num_victims):
                        cand_v = victims[v]
                        if cand_v < 0 or job_pool[cand_v] != pool:
                            continue
                        ok = k < 0
                        if not ok:
                            goff = ji[_ek.GOFF, cand_v]
                            for g in range(goff, goff + ji[_ek.GLEN, cand_v]):
                                if allowed[k, gbuf[g]]:
                                    ok = True
                                    break
                        if ok:
                            useful = v
                            break
                    if useful < 0:
                        break
                    victim = victims[useful]
                    victims[useful] = -1
                    # Simulator.preempt
                    _integrate(st_f)
                    _ek._bank(victim, now, status, jf)
                    h, log = _release_job(victim, _FALSE, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf,
                                          colo, spsh, params, gbuf, share, stamp, jstamp, jnr, on_network,
                                          rack_crossing, job_milli, rack_first, rack_servers, mark, mark_state, buf,
                                          batch, times, srv, rck)  # fmt: skip
                    _queue_put(victim, q, st_i, status, qstamp)
                    pool_waiting[job_pool[victim]] += 1
                    preemptions[victim] += 1
                    needs_restart[victim] = True
                    gpus = _place(job, opts, none, gi, si, job_n, job_milli, job_allowed, allowed, server_ok,
                                  server_ok_valid, largest, rows, num_racks, gpu_server, pool_first, pool_servers,
                                  free_buf, counts)  # fmt: skip
                if len(gpus) == 0:
                    continue
            elif len(gpus) == 0:
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
            elif not preemptive and left[pool] == 0:
                open_pools -= 1
            pool_waiting[pool] -= 1
            h, log, gbuf = _start_placed(job, gpus, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf,
                                         iteration_time, overhead, colo, spsh, params, gbuf, places, share, stamp,
                                         jstamp, jnr, on_network, rack_crossing, needs_restart, job_milli,
                                         rack_first, rack_servers, mark, mark_state, buf, batch, times, srv,
                                         rck)  # fmt: skip
            if not merge and not preemptive and open_pools == 0:
                break
        if preemptive and prio != PRIO_SRTF and st_i[I_QN] > 0:
            # Tiresias.after_schedule: a timer when the first running job reaches its next threshold
            soonest = np.inf
            for j in range(num_jobs):
                if status[j] == RUNNING or status[j] == RESTARTING:
                    a = _attained(j, now, status, jf, job_n)
                    level = _level(a, thresholds)
                    if level < len(thresholds):
                        gap = thresholds[level] - a
                        at = now + (0.0 if 0.0 > gap else gap) / job_n[j] + 1e-6
                        if at < soonest:
                            soonest = at
            if np.isfinite(soonest):  # Simulator.set_timer
                st_i[I_TVER] += 1
                st_f[F_TIMER] = soonest
                st_i[I_SEQ] += 1
                h = heap_push(
                    h, st_i[I_HLEN], soonest, st_i[I_SEQ], np.int64(-1), st_i[I_TVER], np.int64(TIMER)
                )
                st_i[I_HLEN] += 1
    return code, h, log, gbuf


# ------------------------------------------------------------------ the compiled stepper of a job-choice env
# what a call of step_jobs does first: start a queued job (its row, >= 0), or one of these
ACT_WAIT, ACT_SETTLE, ACT_RESUME = -1, -2, -3
# preempting running job j is the action ACT_PREEMPT - j
ACT_PREEMPT = -4
# where step_jobs resumes (beside PH_DECIDE, PH_INSTANT and PH_POP: next_decision's start and its two stages)
PH_SETTLE = 3
# what step_jobs returns
STEP_DECIDE, STEP_DRAINED, STEP_TIES, STEP_DEADLOCK, STEP_UNPLACED = 0, 1, 2, 3, 4
# entries of its int scratch vector
SC_RUNNING, SC_WINDOW, SC_LIVE, SC_SYNCS, SC_DRAINED, SC_INSTANT, SC_PREEMPTED, SC_RUNWIN = range(8)
SC_SIZE = 8
# entries of its float settings: preemption (1.0 / 0.0), min_run (NaN: none), decision_interval (inf: none)
J_PREEMPT, J_MIN_RUN, J_INTERVAL = range(3)
J_SIZE = 3
# entries of its running totals (``RunningTotals``): banked weighted time and goodput of the finished jobs, then
# the mark after the call (accrued weighted time and goodput of every job so far)
T_DONE_WEIGHTED, T_DONE_GOODPUT, T_WEIGHTED, T_GOODPUT = range(4)
T_SIZE = 4


@njit(cache=True, no_cpython_wrapper=True)
def _sync_live(status, q, st_i, qstamp, run_list, live, sc, weight, per_unit, submit, finish, jf, tot, prod):
    """``RunningTotals.sync`` after an advance: the jobs of the last live set that have finished since are banked
    (in its order, with numpy's sums), and the live set becomes the queue, then the running jobs, each in its order."""
    c = _ZERO  # an int64 from the start: a literal 0 would compile the sums once more for it
    last = -1
    for i in range(sc[SC_LIVE]):
        if status[live[i]] == DONE:
            c += 1
            last = live[i]
    if c == 1:  # RunningTotals.bank's one-job case: the single product
        tot[T_DONE_WEIGHTED] += weight[last] * (finish[last] - submit[last])
        tot[T_DONE_GOODPUT] += jf[_ek.WORK, last] * per_unit[last]
    elif c > 1:  # portable_dot over the finished jobs, in live order
        k = 0
        for i in range(sc[SC_LIVE]):
            j = live[i]
            if status[j] == DONE:
                prod[k] = weight[j] * (finish[j] - submit[j])
                k += 1
        tot[T_DONE_WEIGHTED] += _ek.pairwise_sum(prod, _ZERO, c)
        k = 0
        for i in range(sc[SC_LIVE]):
            j = live[i]
            if status[j] == DONE:
                prod[k] = jf[_ek.WORK, j] * per_unit[j]
                k += 1
        tot[T_DONE_GOODPUT] += _ek.pairwise_sum(prod, _ZERO, c)
    qj = q[0]
    qs = q[1]
    n = 0
    for i in range(st_i[I_QLEN]):
        if _live(qj, qs, i, status, qstamp):
            live[n] = qj[i]
            n += 1
    for i in range(sc[SC_RUNNING]):
        live[n] = run_list[i]
        n += 1
    sc[SC_LIVE] = n
    sc[SC_SYNCS] += 1


@njit(cache=True, no_cpython_wrapper=True)
def _mark(now, status, jf, live, sc, weight, per_unit, submit, tot, prod, goodput):
    """``RewardIntegral.mark``'s totals now: ``RunningTotals.weighted_time`` and (``goodput``) ``goodput``."""
    n = sc[SC_LIVE]
    for i in range(n):
        j = live[i]
        prod[i] = weight[j] * (now - submit[j])
    tot[T_WEIGHTED] = tot[T_DONE_WEIGHTED] + _ek.pairwise_sum(prod, _ZERO, n)
    if goodput:
        for i in range(n):
            j = live[i]
            extra = jf[_ek.RATE, j] * (now - jf[_ek.LAST, j]) if status[j] == RUNNING else 0.0
            done = jf[_ek.DONE, j] + extra
            work = jf[_ek.WORK, j]
            prod[i] = (work if work < done else done) * per_unit[j]
        tot[T_GOODPUT] = tot[T_DONE_GOODPUT] + _ek.pairwise_sum(prod, _ZERO, n)
    else:
        tot[T_GOODPUT] = 0.0


@njit(cache=True, no_cpython_wrapper=True)
def _drop_running(job, run_list, sc):
    """The job leaves the running list (which keeps its order)."""
    kept = 0
    for i in range(sc[SC_RUNNING]):
        if run_list[i] != job:
            run_list[kept] = run_list[i]
            kept += 1
    sc[SC_RUNNING] = kept


@njit(cache=True, no_cpython_wrapper=True)
def _decision_windows(now, st_i, status, jf, num_jobs, window, fits, sc, js, start_mark, preempt_mark, run_list,
                      running, preemptible, startable):  # fmt: skip
    """At a decision: the window's jobs that may start (``JobSelect._observe``: not one preempted at this instant
    while waiting is possible) and, with preemption, the running window (``JobSelect._running_window``)."""
    can_wait = sc[SC_RUNNING] > 0 or st_i[I_NEXT] < num_jobs
    inst = sc[SC_INSTANT]
    for i in range(sc[SC_WINDOW]):
        startable[i] = fits[i] and not (sc[SC_PREEMPTED] > 0 and can_wait and preempt_mark[window[i]] == inst)
    r = 0
    if js[J_PREEMPT] > 0.0:
        r = min(sc[SC_RUNNING], len(running))
        min_run = js[J_MIN_RUN]
        for i in range(r):
            j = run_list[i]
            running[i] = j
            ok = start_mark[j] != inst
            if min_run == min_run:  # a min_run is set
                ok = ok and now - jf[_ek.RSTART, j] >= min_run
            preemptible[i] = ok
    sc[SC_RUNWIN] = r


@njit(cache=True)
def step_jobs(
    action, st_f, st_i, opts, h, log, q, status, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead, colo, spsh,
    params, gbuf, places, share, submit, at_arrival, finish, at_finish, stamp, jstamp, qstamp, jnr, on_network,
    rack_crossing, needs_restart, job_n, job_milli, job_allowed, allowed, server_ok, server_ok_valid, largest,
    rows, num_racks, gpu_server, rack_first, rack_servers, pool_first, pool_servers, mark, mark_state, run_list,
    window, fits, live, sc, weight, per_unit, tot, prod, goodput, buf, batch, times, srv, rck, free_buf, counts,
    done, preemptions, js, start_mark, preempt_mark, running, preemptible, startable,
):  # fmt: skip
    """One step of a job-choice env (``JobSelect``) on the engine's packed state: start queued job ``action`` where
    the placement puts it, preempt running job ``ACT_PREEMPT - action``, or wait (``ACT_WAIT`` runs to the next
    decision point, after asking for a timer one ``js[J_INTERVAL]`` ahead; ``ACT_SETTLE`` does neither); then
    advance from decision point to decision point (``Simulator.next_decision``, with the running totals' sync after
    each) until one of the first ``len(window)`` queued jobs fits on the free GPUs (with preemption: until a
    decision point with a queue), or the run drains. Fills ``window[:sc[SC_WINDOW]]``, ``fits``, ``startable``,
    the running window and ``tot`` (the running totals and the mark); returns (code, heap, log, GPU-list buffer).
    ``STEP_TIES``: tied completions wait for the engine to order them, then a call with ``ACT_RESUME`` goes on."""
    num_jobs = len(status)
    qj = q[0]
    qs = q[1]
    none = np.zeros(0, dtype=np.bool_)
    code = np.int64(-1)
    preemptive = js[J_PREEMPT] > 0.0
    if action != ACT_RESUME:
        sc[SC_SYNCS] = 0
        st_i[I_PHASE] = PH_DECIDE if action == ACT_WAIT else PH_SETTLE
    if action == ACT_WAIT and js[J_INTERVAL] < np.inf and sc[SC_RUNNING] > 0:
        # JobSelect._schedule_round: a decision point at the latest one interval from now (an earlier timer stays)
        now = st_f[F_NOW]
        at = now + js[J_INTERVAL]
        if not (now < st_f[F_TIMER] <= at):  # Simulator.set_timer
            st_i[I_TVER] += 1
            st_f[F_TIMER] = at
            st_i[I_SEQ] += 1
            h = heap_push(h, st_i[I_HLEN], at, st_i[I_SEQ], np.int64(-1), st_i[I_TVER], np.int64(TIMER))
            st_i[I_HLEN] += 1
    if action <= ACT_PREEMPT:  # Simulator.preempt
        job = ACT_PREEMPT - action
        if status[job] != RUNNING and status[job] != RESTARTING:
            code = STEP_UNPLACED
        else:
            _integrate(st_f)
            _ek._bank(job, st_f[F_NOW], status, jf)
            h, log = _release_job(job, _FALSE, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo, spsh,
                                  params, gbuf, share, stamp, jstamp, jnr, on_network, rack_crossing, job_milli,
                                  rack_first, rack_servers, mark, mark_state, buf, batch, times, srv, rck)  # fmt: skip
            _queue_put(job, q, st_i, status, qstamp)
            preemptions[job] += 1
            needs_restart[job] = True
            _drop_running(job, run_list, sc)
            preempt_mark[job] = sc[SC_INSTANT]
            sc[SC_PREEMPTED] += 1
    if action >= 0:
        job = np.int64(action)
        gpus = _place(job, opts, none, gi, si, job_n, job_milli, job_allowed, allowed, server_ok, server_ok_valid,
                      largest, rows, num_racks, gpu_server, pool_first, pool_servers, free_buf, counts)  # fmt: skip
        if len(gpus) == 0 or status[job] != QUEUED:
            code = STEP_UNPLACED
        else:
            h, log, gbuf = _start_placed(job, gpus, h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf,
                                         iteration_time, overhead, colo, spsh, params, gbuf, places, share, stamp,
                                         jstamp, jnr, on_network, rack_crossing, needs_restart, job_milli,
                                         rack_first, rack_servers, mark, mark_state, buf, batch, times, srv,
                                         rck)  # fmt: skip
            run_list[sc[SC_RUNNING]] = job
            sc[SC_RUNNING] += 1
            start_mark[job] = sc[SC_INSTANT]
    while code < 0:
        phase = st_i[I_PHASE]
        if phase == PH_SETTLE:  # JobSelect._settle
            if sc[SC_DRAINED] != 0:
                sc[SC_WINDOW] = 0
                code = STEP_DRAINED
                continue
            if st_i[I_QN] > 0:
                m = st_i[I_QLEN]
                if 2 * st_i[I_QN] <= m:
                    m = _compact_queue(q, st_i, status, qstamp)
                k = 0
                any_fit = False
                free_total = st_i[I_FREE]
                free_milli = gi[_ek.G_FREE]
                for i in range(m):
                    if k == len(window):
                        break
                    if not _live(qj, qs, i, status, qstamp):
                        continue
                    j = qj[i]
                    window[k] = j
                    # JobSelect._count_fits: free GPUs in all, or those the job may use when it has a pool / type
                    # constraint or asks for a share
                    n = job_n[j]
                    a = job_allowed[j]
                    milli = job_milli[j]
                    if a >= 0 or milli < FULL_GPU:
                        need = FULL_GPU if milli >= FULL_GPU else milli
                        usable = 0
                        for g in range(len(free_milli)):
                            if free_milli[g] >= need and (a < 0 or allowed[a, g]):
                                usable += 1
                        ok = usable >= n
                    else:
                        ok = n <= free_total
                    fits[k] = ok
                    any_fit = any_fit or ok
                    k += 1
                sc[SC_WINDOW] = k
                if any_fit or preemptive:
                    code = STEP_DECIDE
                    continue
            st_i[I_PHASE] = PH_DECIDE
            continue
        if phase == PH_DECIDE:  # next_decision's start: Simulator._note_fragmentation
            sc[SC_INSTANT] += 1  # the jobs started or preempted at the last instant are forgotten
            sc[SC_PREEMPTED] = 0
            _integrate(st_f)
            st_f[F_FRAG] = 0.0
            if st_i[I_QN] > 0:
                head = _oldest_waiting(q, st_i, status, qstamp, num_jobs)
                _head_fragmentation(head, st_f, st_i, gi, si, job_n, job_milli, job_allowed, allowed,
                                    server_ok_valid, pool_first, pool_servers, none)  # fmt: skip
            st_i[I_CHANGED] = 0
            st_i[I_PHASE] = PH_INSTANT
            continue
        if phase == PH_INSTANT:
            end, t = _next_instant(h, st_f, st_i, submit, num_jobs)
            if end == RUN_DEADLOCK:
                code = STEP_DEADLOCK
                continue
            if end == RUN_DONE:  # next_decision returns False: the run has drained
                _sync_live(
                    status,
                    q,
                    st_i,
                    qstamp,
                    run_list,
                    live,
                    sc,
                    weight,
                    per_unit,
                    submit,
                    finish,
                    jf,
                    tot,
                    prod,
                )
                sc[SC_DRAINED] = 1
                st_i[I_PHASE] = PH_SETTLE
                continue
            st_f[F_NOW] = t
            _integrate(st_f)
            st_i[I_TFIRED] = 0
            j = st_i[I_NEXT]
            while j < num_jobs and submit[j] <= t:
                if status[j] != DROPPED:
                    _queue_put(j, q, st_i, status, qstamp)
                    st_f[F_DEMAND] += share[j]
                    at_arrival[j] = st_f[F_DINT]
                    st_i[I_EVENTS] += 1
                    st_i[I_CHANGED] = 1
                j += 1
            st_i[I_NEXT] = j
            st_i[I_PHASE] = PH_POP
        # PH_POP: every event at this instant
        done[0] = 0
        code, h, log = _pop_instant(st_f[F_NOW], h, log, st_f, st_i, status, jf, ji, gi, si, sf, rf, mf, colo,
                                    spsh, params, gbuf, share, finish, at_finish, stamp, jstamp, jnr, on_network,
                                    rack_crossing, needs_restart, job_milli, rack_first, rack_servers, mark,
                                    mark_state, buf, batch, times, srv, rck, done)  # fmt: skip
        if done[0] > 0:  # the completed jobs leave the running list (which keeps its order)
            kept = 0
            for i in range(sc[SC_RUNNING]):
                j = run_list[i]
                if status[j] != DONE:
                    run_list[kept] = j
                    kept += 1
            sc[SC_RUNNING] = kept
        if code >= 0:
            code = STEP_TIES
            continue
        if st_i[I_QN] > 0 and (st_i[I_CHANGED] != 0 or st_i[I_TFIRED] != 0):  # a decision point
            st_i[I_CHANGED] = 0
            st_i[I_DECISIONS] += 1
            _sync_live(
                status, q, st_i, qstamp, run_list, live, sc, weight, per_unit, submit, finish, jf, tot, prod
            )
            st_i[I_PHASE] = PH_SETTLE
        else:
            st_i[I_CHANGED] = 0
            st_i[I_PHASE] = PH_INSTANT
    if code != STEP_TIES:
        _mark(st_f[F_NOW], status, jf, live, sc, weight, per_unit, submit, tot, prod, goodput)
    if code == STEP_DECIDE:
        _decision_windows(st_f[F_NOW], st_i, status, jf, num_jobs, window, fits, sc, js, start_mark, preempt_mark,
                          run_list, running, preemptible, startable)  # fmt: skip
    return code, h, log, gbuf
