"""The observation writers' constant arguments as one numba struct (a ``StructRef``, as
:mod:`gpusched_envs.sim.stepper` does for the engine's): the encoder's buffers and the simulator's arrays it reads
stay the same objects through an episode, so :func:`new_state` packs them once and each observation passes only
what changes (the window, the clock, the counts). The writers are those of :mod:`gpusched_envs.sim.kernels`,
unchanged."""

from __future__ import annotations

from numba import njit, types
from numba.experimental import structref

from gpusched_envs.sim import kernels as _k
from gpusched_envs.sim import numba_cache  # noqa: F401  (one cache stamp for every kernel file)

_F1, _F2 = types.float64[::1], types.float64[:, ::1]
_S1, _S2, _S3 = types.float32[::1], types.float32[:, ::1], types.float32[:, :, ::1]
_I1, _I2 = types.int64[::1], types.int64[:, ::1]
_B1, _I8 = types.bool_[::1], types.int8[::1]


@structref.register
class EncodeStateType(types.StructRef):
    pass


class EncodeState(structref.StructRefProxy):
    """An encoder's constant arguments for one simulator (opaque from Python)."""


structref.define_boxing(EncodeStateType, EncodeState)

FIELDS = (
    ("gpu_base", _S2), ("server_base", _S2), ("rack_base", _S2), ("blocks", _I1), ("cluster", _S1),
    ("image", _S3), ("gpu_slot", _I1), ("logs", _F1), ("gi", _I2), ("si", _I2), ("ji", _I2),
    ("inv_server_gpus", _F1), ("inv_rack_gpus", _F1), ("job_features", _S2), ("job_mask", _I8),
    ("flat_mask", _S1), ("queue_rows", types.int64), ("clairvoyant", types.bool_), ("running_cols", types.bool_),
    ("inv_g", types.float64), ("inv_time_scale", types.float64), ("state", _F2), ("job_gpus_n", _I1),
    ("submit", _F1), ("duration", _F1), ("job_ideal_iter", _F1), ("needs_restart", _B1), ("preemptions", _I1),
    ("log_sensitivity", _F1), ("log2_table", _F1), ("log1p_table", _F1), ("restart_delay", types.float64),
    ("rack_crossing", _I1),
)  # fmt: skip
_STATE = EncodeStateType(list(FIELDS))


@njit(cache=True)
def new_state(
    gpu_base, server_base, rack_base, blocks, cluster, image, gpu_slot, logs, gi, si, ji, inv_server_gpus,
    inv_rack_gpus, job_features, job_mask, flat_mask, queue_rows, clairvoyant, running_cols, inv_g, inv_time_scale,
    state, job_gpus_n, submit, duration, job_ideal_iter, needs_restart, preemptions, log_sensitivity, log2_table,
    log1p_table, restart_delay, rack_crossing,
):  # fmt: skip
    s = structref.new(_STATE)
    s.gpu_base = gpu_base
    s.server_base = server_base
    s.rack_base = rack_base
    s.blocks = blocks
    s.cluster = cluster
    s.image = image
    s.gpu_slot = gpu_slot
    s.logs = logs
    s.gi = gi
    s.si = si
    s.ji = ji
    s.inv_server_gpus = inv_server_gpus
    s.inv_rack_gpus = inv_rack_gpus
    s.job_features = job_features
    s.job_mask = job_mask
    s.flat_mask = flat_mask
    s.queue_rows = queue_rows
    s.clairvoyant = clairvoyant
    s.running_cols = running_cols
    s.inv_g = inv_g
    s.inv_time_scale = inv_time_scale
    s.state = state
    s.job_gpus_n = job_gpus_n
    s.submit = submit
    s.duration = duration
    s.job_ideal_iter = job_ideal_iter
    s.needs_restart = needs_restart
    s.preemptions = preemptions
    s.log_sensitivity = log_sensitivity
    s.log2_table = log2_table
    s.log1p_table = log1p_table
    s.restart_delay = restart_delay
    s.rack_crossing = rack_crossing
    return s


@njit(cache=True)
def time_args(s, now, any_running):
    """:func:`gpusched_envs.sim.kernels.gpu_time_args` into the struct's ``logs``."""
    _k.gpu_time_args(
        s.logs,
        s.gi,
        s.state,
        now,
        s.restart_delay,
        s.clairvoyant,
        any_running,
        s.inv_time_scale,
        s.rack_crossing,
    )


@njit(cache=True)
def blocks(s, in_placement, has_placement, free, queued, running_count, beyond, jobs, fits, running, preemptible,
           now):  # fmt: skip
    """:func:`gpusched_envs.sim.kernels.encode_blocks` with the struct's arguments; returns what it returns."""
    return _k.encode_blocks(
        s.gpu_base, s.server_base, s.rack_base, s.blocks, s.cluster, s.image, s.gpu_slot, s.logs, s.gi, s.si, s.ji,
        s.inv_server_gpus, s.inv_rack_gpus, in_placement, has_placement, free, queued, running_count, beyond,
        s.job_features, s.job_mask, s.flat_mask, s.queue_rows, jobs, fits, running, preemptible, s.clairvoyant,
        s.running_cols, now, s.inv_g, s.inv_time_scale, s.state, s.job_gpus_n, s.submit, s.duration,
        s.job_ideal_iter, s.needs_restart, s.preemptions, s.log_sensitivity, s.log2_table, s.log1p_table,
    )  # fmt: skip
