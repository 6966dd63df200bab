"""Compiled (numba) writers of the envs' observations, action masks and fit counts: the dynamic cluster columns
(:func:`cluster_dynamic`), the job block (:func:`job_block`), JobSelect's and WorkerPlacement's masks, DAGSchedule's
and DelayTuning's columns and contexts. The arithmetic is the numpy expressions' own, element by element and summed in
the same order, so the values are bit-identical; transcendental functions stay in numpy (numpy's ``log1p`` and
``math.log1p`` differ in the last bit on some inputs): the writers leave their arguments in a buffer for the caller's
one numpy call, or read tables numpy filled."""

from __future__ import annotations

import numpy as np
from numba import njit

from gpusched_envs.sim import engine_kernels as _ek
from gpusched_envs.sim import numba_cache  # noqa: F401  (one cache stamp for every kernel file)

# constant arguments of calls between kernels as numpy scalars (typed int64 / bool, not as literals that numba
# would compile the callee once more for)
_ZERO = np.int64(0)
_TRUE = np.bool_(True)
_FALSE = np.bool_(False)


class TransientCache(dict):
    """A dict of values derived from one simulator (its arrays, by name), which a pickled or copied holder does
    not carry: it starts empty and is filled again on first use."""

    def __reduce__(self):
        return (TransientCache, ())


@njit(cache=True)
def time_in_use(out, gpu_job, run_start, now):
    """(G,) seconds since the job on each GPU started its current allocation (0 on free GPUs)."""
    for g in range(len(gpu_job)):
        j = gpu_job[g]
        out[g] = now - run_start[j] if j >= 0 else 0.0
    return out


@njit(cache=True)
def gpu_time_args(out, gi, jf, now, restart_delay, clairvoyant, any_running, inv_time_scale, rack_crossing):
    """The arguments of the GPU time column's and the rack crossing column's ``log1p``, written into ``out``
    ((G + R,) float64): seconds × ``inv_time_scale`` per GPU (time in use, or remaining time when ``clairvoyant``,
    as :func:`time_in_use` and ``gpu_remaining_time`` compute them), then each rack's crossing jobs. ``gi`` and
    ``jf`` are the simulator's packed per-GPU int and per-job float state (:mod:`gpusched_envs.sim.engine_kernels`)."""
    G = gi.shape[1]
    for g in range(G):
        j = gi[_ek.G_JOB, g]
        if clairvoyant:
            s = 0.0
            if any_running and j >= 0:
                r = jf[_ek.RATE, j]
                left = jf[_ek.WORK, j] - jf[_ek.DONE, j] - r * (now - jf[_ek.LAST, j])
                s = left / r if r > 0 else restart_delay
                if not (s >= 0.0 or s != s):  # np.maximum(s, 0.0)
                    s = 0.0
        else:
            s = now - jf[_ek.RSTART, j] if j >= 0 else 0.0
        out[g] = s * inv_time_scale
    for r in range(len(rack_crossing)):
        out[G + r] = float(rack_crossing[r])


@njit(cache=True)
def server_job_count(s, gi, si, ji):
    """Jobs holding GPUs on server ``s`` (``len(sim.server_jobs[s])``): the distinct holders of its whole GPUs and
    every sharer of its shared GPUs (a fractional job holds one GPU, so sharers are never counted twice)."""
    lo = si[_ek.S_FIRST, s]
    hi = lo + si[_ek.S_NUM, s]
    n = 0
    for g in range(lo, hi):
        if gi[_ek.G_FREE, g] >= _ek.FULL_GPU:
            continue
        h = gi[_ek.G_JOB, g]
        if h >= 0 and ji[_ek.MILLI, h] >= _ek.FULL_GPU:
            seen = False
            for e in range(lo, g):
                if gi[_ek.G_JOB, e] == h and gi[_ek.G_FREE, e] < _ek.FULL_GPU:
                    seen = True
                    break
            if not seen:
                n += 1
        else:
            q = gi[_ek.G_SHHEAD, g]
            while q >= 0:
                n += 1
                q = ji[_ek.SHNEXT, q]
    return n


@njit(cache=True)
def cluster_dynamic(
    gpu_base, server_base, rack_base, blocks, cluster, image, gpu_slot, logs, gi, si, ji, inv_server_gpus,
    inv_rack_gpus, in_placement, has_placement, cluster_free, cluster_queued, cluster_running, cluster_beyond,
):  # fmt: skip
    """Write every dynamic cluster column: per GPU busy, time (``logs[:G]``, already ``log1p``-ed) and
    in_placement; per server free, jobs and in_placement; per rack free and crossing jobs (``logs[G:]``); the
    cluster's four columns; and, when ``image`` has channels, the image's busy, time and in_placement
    channels. The arithmetic is that of the numpy expressions it replaces, element by element. The GPU, server
    and rack blocks are ``base[r0:r1, c0:c1]`` of their (C-ordered) base arrays, with ``blocks`` holding
    ``r0, r1, c0, c1`` of each in turn: one compiled version serves the blocks of a flat vector and the column
    ranges of a graph's node features."""
    gpu = gpu_base[blocks[0] : blocks[1], blocks[2] : blocks[3]]
    server = server_base[blocks[4] : blocks[5], blocks[6] : blocks[7]]
    rack = rack_base[blocks[8] : blocks[9], blocks[10] : blocks[11]]
    free_milli, gpu_server = gi[_ek.G_FREE], gi[_ek.G_SERVER]
    server_free, server_rack = si[_ek.S_FREE], si[_ek.S_RACK]
    G, S, R = gi.shape[1], si.shape[1], len(inv_rack_gpus)
    placed = np.zeros(S)
    img = image.shape[0] > 0
    for g in range(G):
        busy = 1.0 - free_milli[g] * 1e-3
        gpu[g, 1] = busy
        gpu[g, 2] = logs[g]
        p = in_placement[g] if has_placement else 0.0
        gpu[g, 3] = p
        if has_placement:
            placed[gpu_server[g]] += p
        if img:
            s, k = gpu_server[g], gpu_slot[g]
            image[0, s, k] = gpu[g, 1]
            image[1, s, k] = logs[g]
            image[4, s, k] = p
    rack_free = np.zeros(R)
    for s in range(S):
        server[s, 3] = server_free[s] * inv_server_gpus[s]
        server[s, 4] = server_job_count(s, gi, si, ji)
        server[s, 5] = placed[s] * inv_server_gpus[s] if has_placement else 0.0
        rack_free[server_rack[s]] += float(server_free[s])
    for r in range(R):
        rack[r, 1] = rack_free[r] * inv_rack_gpus[r]
        rack[r, 2] = logs[G + r]
    cluster[0] = cluster_free
    cluster[1] = cluster_queued
    cluster[2] = cluster_running
    cluster[3] = cluster_beyond


@njit(cache=True, no_cpython_wrapper=True)
def job_rows(
    jf, job_mask, first, jobs, fits, running, clairvoyant, running_cols, now, inv_g, inv_time_scale, state,
    job_gpus_n, submit, duration, job_ideal_iter, needs_restart, preemptions, log_sensitivity, log2_table,
    log1p_table,
):  # fmt: skip
    """Write the rows ``first ..`` of the job block for ``jobs``: the columns of ``JOB_FEATURES`` (and the running
    columns when ``running_cols``), the time columns (2..4) scaled by ``inv_time_scale`` in float32 and left for the
    caller's ``log1p``. ``state`` is the simulator's packed per-job float state (``Simulator._jf``). Returns -1, or
    a job size / preemption count the tables do not reach (the caller grows them and calls again)."""
    done_work, rate, last_update = state[_ek.DONE], state[_ek.RATE], state[_ek.LAST]
    job_work, attained, run_start = state[_ek.WORK], state[_ek.ATT], state[_ek.RSTART]
    k = len(jobs)
    for i in range(k):
        j = jobs[i]
        n = job_gpus_n[j]
        if n >= len(log2_table):
            return n
        if not clairvoyant and preemptions[j] >= len(log1p_table):
            return preemptions[j]
    its = np.float32(inv_time_scale)
    for i in range(k):
        j = jobs[i]
        row = first + i
        job_mask[row] = 1
        n = job_gpus_n[j]
        jf[row, 0] = n * inv_g
        jf[row, 1] = log2_table[n]
        jf[row, 2] = now - submit[j]
        if clairvoyant:
            jf[row, 3] = duration[j]
            done = done_work[j]
            if running:
                done = done + rate[j] * (now - last_update[j])
            left = job_work[j] - done
            if not (left >= 0.0 or left != left):  # np.maximum(left, 0.0)
                left = 0.0
            jf[row, 4] = left * job_ideal_iter[j]
            jf[row, 6] = 1.0 if needs_restart[j] else 0.0
        else:
            a = attained[j]
            if running:
                since = run_start[j]
                a = a + n * (now - since)
            elif preemptions[j] > 0:
                since = last_update[j]
            else:
                since = submit[j]
            jf[row, 3] = a
            jf[row, 4] = now - since
            jf[row, 6] = log1p_table[preemptions[j]]
        for c in range(2, 5):
            jf[row, c] = jf[row, c] * its
        jf[row, 5] = log_sensitivity[j]
        jf[row, 7] = 1.0 if fits[i] else 0.0
        if running_cols:
            jf[row, 8] = 1.0 if running else 0.0
            if running:
                jf[row, 9] = rate[j] * job_ideal_iter[j]
    return -1


@njit(cache=True)
def count_fits(fits, jobs, job_gpus_n, job_allowed, job_milli, free, full_gpu):
    """``fits[i]``: job ``jobs[i]`` asks for at most ``free`` GPUs; returns how many jobs have a pool / type
    constraint or a GPU share (their ``fits`` the caller decides from the simulator's ``free_mask``)."""
    special = 0
    for i in range(len(jobs)):
        j = jobs[i]
        fits[i] = job_gpus_n[j] <= free
        if job_allowed[j] >= 0 or job_milli[j] < full_gpu:
            special += 1
    return special


@njit(cache=True)
def one_finished(jobs, status, state, weight, finish, submit, jf, per_unit, out):
    """How many of ``jobs`` have ``status == state``; when exactly one, ``out[0] = weight * (finish - submit)`` and
    ``out[1] = work * per_unit`` of it (the sum of products over a single entry; ``work`` is the ``WORK`` row of
    the simulator's packed per-job state ``jf``)."""
    n = 0
    last = -1
    for i in range(len(jobs)):
        if status[jobs[i]] == state:
            n += 1
            last = jobs[i]
    if n == 1:
        out[0] = weight[last] * (finish[last] - submit[last])
        out[1] = jf[_ek.WORK, last] * per_unit[last]
    return n


@njit(cache=True)
def job_select_mask(mask, fits, preemptible, first_preempt, wait, drained, can_wait, work_conserving):
    """JobSelect's action mask: the window jobs that can start (``fits``, already cleared of the jobs preempted at
    this instant), the running jobs that may be preempted, and waiting (when it cannot deadlock, or when nothing
    else is valid; never while a job can start under ``work_conserving``)."""
    mask[:] = 0
    k = len(fits)
    any_valid = False
    any_start = False
    for i in range(k):
        if fits[i]:
            mask[i] = 1
            any_valid = True
            any_start = True
    for i in range(len(preemptible)):
        if preemptible[i]:
            mask[first_preempt + i] = 1
            any_valid = True
    mask[wait] = 1 if (drained or can_wait or not any_valid) else 0
    if work_conserving and any_start:
        mask[wait] = 0


@njit(cache=True, no_cpython_wrapper=True)
def _may_take(g, free_milli, need_milli, allowed, taken):
    """GPU ``g`` has the share ``need_milli`` free, is allowed (``allowed`` empty: every GPU) and not taken."""
    return free_milli[g] >= need_milli and (len(allowed) == 0 or allowed[g]) and taken[g] == 0


@njit(cache=True)
def server_mask(mask, free_milli, need_milli, allowed, taken, gpu_server):
    """``mask[s] = 1`` for every server with a GPU the job may take (``mask`` zeroed by the caller)."""
    for g in range(len(free_milli)):
        if _may_take(g, free_milli, need_milli, allowed, taken):
            mask[gpu_server[g]] = 1


@njit(cache=True)
def worker_gpu(free_milli, need_milli, allowed, taken, lo, hi, best_fit):
    """The GPU of ``lo..hi-1`` the job's next worker takes: the first it may take, or with ``best_fit`` the one with
    the least free share (the lowest index on ties); -1 if none."""
    best = -1
    for g in range(lo, hi):
        if _may_take(g, free_milli, need_milli, allowed, taken):
            if not best_fit:
                return g
            if best < 0 or free_milli[g] < free_milli[best]:
                best = g
    return best


@njit(cache=True)
def window_with_head(queued, queued_fits, head, jobs, fits):
    """The window of WorkerPlacement, written into ``jobs`` and ``fits`` (the window's length): the head, then the
    first other jobs among the queue's first ``len(jobs)``; and their fits (the head's True). Returns its length."""
    window = len(jobs)
    k = min(len(queued), window)
    jobs[0] = head
    fits[0] = True
    n = 1
    for i in range(k):
        if queued[i] != head and n < window:
            jobs[n] = queued[i]
            fits[n] = queued_fits[i]
            n += 1
    return n


@njit(cache=True)
def changed_iterations(run, status, version, reported, running_state):
    """The running jobs of ``run`` whose version differs from ``reported`` (noted there now)."""
    out = np.empty(len(run), dtype=np.int64)
    n = 0
    for i in range(len(run)):
        j = run[i]
        if status[j] == running_state and version[j] != reported[j]:
            out[n] = j
            n += 1
    for i in range(n):
        reported[out[i]] = version[out[i]]
    return out[:n]


@njit(cache=True)
def dag_place(task, gpu, gpu_free, in_ptr, in_edges, edges, edge_bytes, inv_bw, finish, assignment):
    """List-schedule ``task`` on ``gpu`` after everything placed so far: the time its inputs have all arrived and the
    GPU is free (``max`` over its in-edges in order, as Python's ``max``)."""
    arrive = gpu_free[gpu]
    for i in range(in_ptr[task], in_ptr[task + 1]):
        e = in_edges[i]
        p = edges[e, 0]
        x = finish[p] + edge_bytes[e] * inv_bw[assignment[p], gpu]
        if x > arrive:
            arrive = x
    return arrive


@njit(cache=True)
def dag_log_args(out, start, finish, gpu_free, makespan, ts):
    """The arguments of the DAG observation's ``log1p`` into ``out``: start and finish times of every task, each
    GPU's free time and the makespan, each divided by the time scale ``ts``."""
    n, g = len(start), len(gpu_free)
    for i in range(n):
        out[i] = start[i] / ts
        out[n + i] = finish[i] / ts
    for q in range(g):
        out[2 * n + q] = gpu_free[q] / ts
    out[2 * n + g] = makespan / ts


@njit(cache=True)
def dag_observe(
    task_base, gpu_base, blocks, ctx, mask, logs, ready, construct, cur, done, assignment, speed, allowed, candidates, makespan, ts,
    steps, runtime, gpu_free, in_ptr, in_edges, edges, edge_bytes, inv_bw, finish, edge_index, edge_mask,
    max_edges, max_tasks,
):  # fmt: skip
    """Write DAGSchedule's dynamic task and GPU columns, context, action mask and (graph) task-GPU edges, as the
    numpy expressions they replace; ``logs`` holds the ``log1p`` of :func:`dag_log_args`' values. The task and
    GPU blocks are ``base[r0:r1, c0:c1]`` of their (C-ordered) base arrays, ``blocks`` holding ``r0, r1, c0, c1``
    of each (one compiled version for the flat vector's blocks and the graph's node-feature columns)."""
    tv = task_base[blocks[0] : blocks[1], blocks[2] : blocks[3]]
    gv = gpu_base[blocks[4] : blocks[5], blocks[6] : blocks[7]]
    n, g = len(assignment), len(gpu_free)
    counts = np.zeros(g)
    placed_n = 0
    for i in range(n):
        a = assignment[i]
        placed = a >= 0
        if placed:
            placed_n += 1
            counts[a] += 1.0
        tv[i, 2] = (1.0 if placed else 0.0) if construct else 1.0
        tv[i, 3] = 0.0
        tv[i, 4] = 0.0
        tv[i, 5] = logs[i] if placed else 0.0
        tv[i, 6] = logs[n + i] if placed else 0.0
        tv[i, 7] = speed[a if a > 0 else 0] if placed else 0.0
    if construct:
        for k in range(len(ready)):
            tv[ready[k], 3] = 1.0
    if cur >= 0:
        tv[cur, 4] = 1.0
    for q in range(g):
        gv[q, 1] = logs[2 * n + q]
        gv[q, 2] = counts[q] / max(n, 1)
    if cur >= 0 and not done:
        for q in range(g):
            mask[q] = 1 if allowed[cur, q] else 0
            if not construct:
                gv[q, 3] = (candidates[q] - makespan) / ts
            elif allowed[cur, q]:
                f = dag_place(
                    cur, q, gpu_free, in_ptr, in_edges, edges, edge_bytes, inv_bw, finish, assignment
                )
                gv[q, 3] = ((f + runtime[cur, q]) - makespan) / ts
            else:
                gv[q, 3] = 0.0
    else:
        for q in range(g):
            mask[q] = 1  # episode over: any action is a no-op
            gv[q, 3] = 0.0
    big = np.float32(1e6)
    low = np.float32(-3.4028234663852886e38)
    for q in range(g):  # np.nan_to_num(posinf=1e6) of the float32 column
        v = gv[q, 3]
        if v != v:
            gv[q, 3] = 0.0
        elif v == np.inf:
            gv[q, 3] = big
        elif v == -np.inf:
            gv[q, 3] = low
    ctx[0] = placed_n / n
    ctx[1] = logs[2 * n + g]
    ctx[2] = steps / max(n, 1)
    ctx[3] = 0.0 if construct else 1.0
    if len(edge_mask):
        for i in range(n):
            a = assignment[i]
            edge_index[1, max_edges + i] = max_tasks + (a if a > 0 else 0)
            edge_mask[max_edges + i] = 1 if a >= 0 else 0


@njit(cache=True)
def delay_context(ctx, logs, queued, job_class, now, submit, timers, top, time_scale):
    """DelayTuning's context before its ``log1p``: ``ctx[:k]`` the timers over the top level (0 without levels);
    ``logs`` (2k,) the waiting jobs per class and their mean wait over ``time_scale`` (``np.bincount``'s sums, in
    queue order)."""
    k = len(timers)
    for c in range(k):
        ctx[c] = timers[c] / top if top > 0 else 0.0
        logs[c] = 0.0
        logs[k + c] = 0.0
    for i in range(len(queued)):
        j = queued[i]
        c = job_class[j]
        logs[c] += 1.0
        logs[k + c] += now - submit[j]
    for c in range(k):
        logs[k + c] = logs[k + c] / max(logs[c], 1.0) / time_scale


@njit(cache=True)
def count_owned(owner, status, agent, state):
    """How many jobs ``agent`` owns whose ``status == state``."""
    n = 0
    for j in range(len(owner)):
        if owner[j] == agent and status[j] == state:
            n += 1
    return n


@njit(cache=True)
def job_block(
    jf, job_mask, flat_mask, queue_rows, jobs, fits, running, preemptible, clairvoyant, running_cols, now, inv_g,
    inv_time_scale, state, job_gpus_n, submit, duration, job_ideal_iter, needs_restart, preemptions,
    log_sensitivity, log2_table, log1p_table,
):  # fmt: skip
    """The whole job block: cleared, the queued ``jobs`` (with ``fits``) from row 0 and, when ``running_cols``, the
    ``running`` jobs (with ``preemptible``) from row ``queue_rows`` (:func:`job_rows`); ``flat_mask`` (empty: none)
    gets a float copy of ``job_mask``. Returns -1, or a count the tables do not reach (nothing is written then)."""
    for i in range(len(jobs)):
        j = jobs[i]
        if job_gpus_n[j] >= len(log2_table):
            return job_gpus_n[j]
        if not clairvoyant and preemptions[j] >= len(log1p_table):
            return preemptions[j]
    if running_cols:
        for i in range(len(running)):
            j = running[i]
            if job_gpus_n[j] >= len(log2_table):
                return job_gpus_n[j]
            if not clairvoyant and preemptions[j] >= len(log1p_table):
                return preemptions[j]
    jf[:, :] = 0.0
    job_mask[:] = 0
    job_rows(
        jf, job_mask, _ZERO, jobs, fits, _FALSE, clairvoyant, running_cols, now, inv_g, inv_time_scale, state,
        job_gpus_n, submit, duration, job_ideal_iter, needs_restart, preemptions, log_sensitivity, log2_table,
        log1p_table,
    )  # fmt: skip
    if running_cols:
        job_rows(
            jf, job_mask, queue_rows, running, preemptible, _TRUE, clairvoyant, running_cols, now, inv_g,
            inv_time_scale, state, job_gpus_n, submit, duration, job_ideal_iter, needs_restart, preemptions,
            log_sensitivity, log2_table, log1p_table,
        )  # fmt: skip
    for r in range(len(flat_mask)):
        flat_mask[r] = job_mask[r]
    return -1


@njit(cache=True)
def encode_blocks(
    gpu_base, server_base, rack_base, blocks, cluster, image, gpu_slot, logs, gi, si, ji, inv_server_gpus,
    inv_rack_gpus, in_placement, has_placement, cluster_free, cluster_queued, cluster_running, cluster_beyond,
    jf, job_mask, flat_mask, queue_rows, jobs, fits, running, preemptible, clairvoyant, running_cols, now, inv_g,
    inv_time_scale, state, job_gpus_n, submit, duration, job_ideal_iter, needs_restart, preemptions,
    log_sensitivity, log2_table, log1p_table,
):  # fmt: skip
    """:func:`cluster_dynamic` then :func:`job_block` (one call per observation); returns what the job block
    returns."""
    cluster_dynamic(
        gpu_base, server_base, rack_base, blocks, cluster, image, gpu_slot, logs, gi, si, ji, inv_server_gpus,
        inv_rack_gpus, in_placement, has_placement, cluster_free, cluster_queued, cluster_running, cluster_beyond,
    )  # fmt: skip
    return job_block(
        jf, job_mask, flat_mask, queue_rows, jobs, fits, running, preemptible, clairvoyant, running_cols, now, inv_g,
        inv_time_scale, state, job_gpus_n, submit, duration, job_ideal_iter, needs_restart, preemptions,
        log_sensitivity, log2_table, log1p_table,
    )  # fmt: skip
