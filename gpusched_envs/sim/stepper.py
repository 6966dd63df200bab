"""The compiled stepper's state as one numba struct (a ``StructRef``): a call of a compiled function with one
struct costs about half a microsecond however many arrays it holds, where a call with the same arrays as arguments
costs about 75 ns per array (a JobSelect step passes 74). :func:`new_state` packs the arrays once per episode
(they stay the engine's own: the struct holds references, not copies); :func:`step` is
:func:`gpusched_envs.sim.loop_kernels.step_jobs` on them."""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.experimental import structref

from gpusched_envs.sim import loop_kernels as _lk
from gpusched_envs.sim import numba_cache  # noqa: F401  (one cache stamp for every kernel file)

_F1, _F2, _F3 = types.float64[::1], types.float64[:, ::1], types.float64[:, :, ::1]
_I1, _I2 = types.int64[::1], types.int64[:, ::1]
_B1, _B2 = types.bool_[::1], types.bool_[:, ::1]
_I8 = types.int8[::1]


@structref.register
class StepStateType(types.StructRef):
    pass


class StepState(structref.StructRefProxy):
    """A compiled stepper's arrays (opaque from Python)."""


structref.define_boxing(StepStateType, StepState)

# the arguments of loop_kernels.step_jobs after the action, in order, with their types (C-contiguous and writable:
# ``writable`` copies the read-only ones)
FIELDS = (
    ("st_f", _F1), ("st_i", _I1), ("opts", _I1), ("h", _F2), ("log", _I1), ("q", _I2), ("status", _I8), ("jf",
    _F2), ("ji", _I2), ("gi", _I2), ("si", _I2), ("sf", _F2), ("rf", _F2), ("mf", _F2), ("iteration_time", _F2),
    ("overhead", _F2), ("colo", _F2), ("spsh", _F3), ("params", _F1), ("gbuf", _I1), ("places", _I2), ("share",
    _F1), ("submit", _F1), ("at_arrival", _F1), ("finish", _F1), ("at_finish", _F1), ("stamp", _I1), ("jstamp",
    _I1), ("qstamp", _I1), ("jnr", _I1), ("on_network", _B1), ("rack_crossing", _I1), ("needs_restart", _B1),
    ("job_n", _I1), ("job_milli", _I1), ("job_allowed", _I1), ("allowed", _B2), ("server_ok", _B2),
    ("server_ok_valid", _B1), ("largest", _I1), ("rows", _I2), ("num_racks", types.int64), ("gpu_server", _I1),
    ("rack_first", _I1), ("rack_servers", _I1), ("pool_first", _I1), ("pool_servers", _I1), ("mark", _I1),
    ("mark_state", _I1), ("run_list", _I1), ("window", _I1), ("fits", _B1), ("live", _I1), ("sc", _I1),
    ("weight", _F1), ("per_unit", _F1), ("tot", _F1), ("prod", _F1), ("goodput", types.bool_), ("buf", _I1),
    ("batch", _I1), ("times", _F1), ("srv", _I1), ("rck", _I1), ("free_buf", _B1), ("counts", _I1), ("done",
    _I1), ("preemptions", _I1), ("js", _F1), ("start_mark", _I1), ("preempt_mark", _I1), ("running", _I1),
    ("preemptible", _B1), ("startable", _B1),
)  # fmt: skip
NAMES = tuple(name for name, _ in FIELDS)
# what step returns after the code and the growth flag
OUT = (
    "now", "next_arrival", "finished", "free", "events", "decisions", "running", "window", "syncs", "live",
    "done_weighted", "done_goodput", "weighted", "goodput", "running_window",
)  # fmt: skip
_STATE = StepStateType(list(FIELDS))


def writable(a):
    """``a`` as a writable C-contiguous array (a copy only when it is read-only or not contiguous)."""
    if isinstance(a, np.ndarray) and (not a.flags.writeable or not a.flags.c_contiguous):
        return np.array(a, order="C")
    return a


@njit(cache=True)
def new_state(
    st_f, st_i, opts, h, log, q, status, jf, ji, gi, si, sf, rf, mf, iteration_time, overhead, colo, spsh,
    params, gbuf, places, share, submit, at_arrival, finish, at_finish, stamp, jstamp, qstamp, jnr, on_network,
    rack_crossing, needs_restart, job_n, job_milli, job_allowed, allowed, server_ok, server_ok_valid, largest,
    rows, num_racks, gpu_server, rack_first, rack_servers, pool_first, pool_servers, mark, mark_state, run_list,
    window, fits, live, sc, weight, per_unit, tot, prod, goodput, buf, batch, times, srv, rck, free_buf, counts,
    done, preemptions, js, start_mark, preempt_mark, running, preemptible, startable,
):  # fmt: skip
    s = structref.new(_STATE)
    s.st_f = st_f
    s.st_i = st_i
    s.opts = opts
    s.h = h
    s.log = log
    s.q = q
    s.status = status
    s.jf = jf
    s.ji = ji
    s.gi = gi
    s.si = si
    s.sf = sf
    s.rf = rf
    s.mf = mf
    s.iteration_time = iteration_time
    s.overhead = overhead
    s.colo = colo
    s.spsh = spsh
    s.params = params
    s.gbuf = gbuf
    s.places = places
    s.share = share
    s.submit = submit
    s.at_arrival = at_arrival
    s.finish = finish
    s.at_finish = at_finish
    s.stamp = stamp
    s.jstamp = jstamp
    s.qstamp = qstamp
    s.jnr = jnr
    s.on_network = on_network
    s.rack_crossing = rack_crossing
    s.needs_restart = needs_restart
    s.job_n = job_n
    s.job_milli = job_milli
    s.job_allowed = job_allowed
    s.allowed = allowed
    s.server_ok = server_ok
    s.server_ok_valid = server_ok_valid
    s.largest = largest
    s.rows = rows
    s.num_racks = num_racks
    s.gpu_server = gpu_server
    s.rack_first = rack_first
    s.rack_servers = rack_servers
    s.pool_first = pool_first
    s.pool_servers = pool_servers
    s.mark = mark
    s.mark_state = mark_state
    s.run_list = run_list
    s.window = window
    s.fits = fits
    s.live = live
    s.sc = sc
    s.weight = weight
    s.per_unit = per_unit
    s.tot = tot
    s.prod = prod
    s.goodput = goodput
    s.buf = buf
    s.batch = batch
    s.times = times
    s.srv = srv
    s.rck = rck
    s.free_buf = free_buf
    s.counts = counts
    s.done = done
    s.preemptions = preemptions
    s.js = js
    s.start_mark = start_mark
    s.preempt_mark = preempt_mark
    s.running = running
    s.preemptible = preemptible
    s.startable = startable
    return s


@njit(cache=True)
def step(s, action):
    """:func:`~gpusched_envs.sim.loop_kernels.step_jobs` on the struct's arrays; keeps the heap, tie log and
    GPU-list buffer it may have grown. Returns (code, whether one of them grew: :func:`grown` gives them), then
    what the Python side reads after a step (:data:`OUT`), as Python scalars."""
    code, h, log, gbuf = _lk.step_jobs(
        action, s.st_f, s.st_i, s.opts, s.h, s.log, s.q, s.status, s.jf, s.ji, s.gi, s.si, s.sf, s.rf, s.mf,
        s.iteration_time, s.overhead, s.colo, s.spsh, s.params, s.gbuf, s.places, s.share, s.submit,
        s.at_arrival, s.finish, s.at_finish, s.stamp, s.jstamp, s.qstamp, s.jnr, s.on_network,
        s.rack_crossing, s.needs_restart, s.job_n, s.job_milli, s.job_allowed, s.allowed, s.server_ok,
        s.server_ok_valid, s.largest, s.rows, s.num_racks, s.gpu_server, s.rack_first, s.rack_servers,
        s.pool_first, s.pool_servers, s.mark, s.mark_state, s.run_list, s.window, s.fits, s.live, s.sc,
        s.weight, s.per_unit, s.tot, s.prod, s.goodput, s.buf, s.batch, s.times, s.srv, s.rck, s.free_buf,
        s.counts, s.done, s.preemptions, s.js, s.start_mark, s.preempt_mark, s.running, s.preemptible,
        s.startable,
    )  # fmt: skip
    grew = h.shape[1] != s.h.shape[1] or len(log) != len(s.log) or len(gbuf) != len(s.gbuf)
    if grew:
        s.h = h
        s.log = log
        s.gbuf = gbuf
    st_f, st_i, sc, tot = s.st_f, s.st_i, s.sc, s.tot
    return (
        code, grew, st_f[_lk.F_NOW], st_i[_lk.I_NEXT], st_i[_lk.I_FINISHED], st_i[_lk.I_FREE], st_i[_lk.I_EVENTS],
        st_i[_lk.I_DECISIONS], sc[_lk.SC_RUNNING], sc[_lk.SC_WINDOW], sc[_lk.SC_SYNCS], sc[_lk.SC_LIVE],
        tot[_lk.T_DONE_WEIGHTED], tot[_lk.T_DONE_GOODPUT], tot[_lk.T_WEIGHTED], tot[_lk.T_GOODPUT],
        sc[_lk.SC_RUNWIN],
    )  # fmt: skip


@njit(cache=True)
def grown(s):
    """The struct's heap, tie log and GPU-list buffer (after :func:`step` grew one of them)."""
    return s.h, s.log, s.gbuf
