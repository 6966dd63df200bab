"""Windows over a workload: time range, VC, first N jobs, and arrival-rate scaling to a target offered load.

Scenarios for learning and ranking need contention, so a window can be compressed in time until its offered
load (:meth:`Workload.offered_load`: traced GPU-time ÷ (GPUs × arrival span), the GPU-time the jobs need at their
typical-placement speed, which the simulator's ``offered_load`` metric measures the same way) reaches a stated value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from gpusched_envs.sim.workload import Workload

from .errors import WorkloadError

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DAY = np.timedelta64(1, "D")


def _to_datetime(value: str, what: str) -> np.datetime64:
    try:
        t = np.datetime64(str(value).strip().replace(" ", "T"), "s")
    except ValueError:
        t = None
    if t is None or np.isnat(t):
        raise WorkloadError(f"{value!r} is not a date (YYYY-MM-DD) or date-time", field=what)
    return t


def resolve_time(wl: Workload, value, *, end: bool = False, what: str = "start") -> float:
    """Seconds from ``wl``'s origin for a bound given as seconds, ``YYYY-MM-DD`` or an ISO date-time.

    A date-only ``end`` is inclusive: ``end=2017-11-30`` means up to (not including) 2017-12-01 00:00:00.
    """
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    if wl.time_origin is None:
        raise WorkloadError(
            f"workload {wl.name!r} has no wall-clock origin; give {what} in seconds", field=what
        )
    t = _to_datetime(text, what)
    if end and _DATE.match(text):
        t = t + _DAY
    origin = np.datetime64(wl.time_origin, "s")
    return float((t - origin) / np.timedelta64(1, "s"))


def select(
    wl: Workload,
    *,
    start=None,
    end=None,
    vc: str | Iterable[str] | None = None,
    jobs: int | None = None,
    name: str | None = None,
    return_index: bool = False,
):
    """Jobs submitted in ``[start, end)`` of the given VCs, then the first ``jobs`` of them (with ``return_index``
    also the indices of the kept jobs in ``wl``).

    ``start``/``end`` are seconds from the origin, dates (``end`` inclusive) or ISO date-times. When ``start`` is
    given, times are re-measured from it and ``time_origin`` moves there, so a window starts at t = 0.
    """
    mask = np.ones(len(wl), dtype=bool)
    t0 = None
    if start is not None:
        t0 = resolve_time(wl, start, what="start")
        mask &= wl.submit_time >= t0
    if end is not None:
        t1 = resolve_time(wl, end, end=True, what="end")
        mask &= wl.submit_time < t1
    if vc is not None:
        wanted = [vc] if isinstance(vc, str) else list(vc)
        codes = []
        for v in wanted:
            if v not in wl.vc_names:
                valid = ", ".join(wl.vc_names) or "(this workload has no VCs)"
                raise WorkloadError(f"unknown VC {v!r}; valid: {valid}", field="vc")
            codes.append(wl.vc_names.index(v))
        mask &= np.isin(wl.vc, codes)
    idx = np.flatnonzero(mask)
    if jobs is not None:
        if int(jobs) < 1:
            raise WorkloadError(f"jobs must be >= 1, got {jobs}", field="jobs")
        idx = idx[: int(jobs)]
    out = wl.subset(idx, name=name or wl.name)
    if t0 is not None and t0 != 0.0:
        origin = None
        if wl.time_origin is not None:
            origin = str(np.datetime64(wl.time_origin, "s") + np.timedelta64(int(round(t0)), "s"))
        out = out._replace_arrays(submit_time=out.submit_time - t0, time_origin=origin)
    out.meta["window"] = {"start": start, "end": end, "vc": vc, "jobs": jobs}
    return (out, idx) if return_index else out


def scale_arrivals(wl: Workload, factor: float, *, name: str | None = None) -> Workload:
    """Stretch (factor > 1) or compress (factor < 1) the gaps between arrivals; the first arrival stays put.

    The result has no wall-clock origin any more (``time_origin=None``); ``meta["arrival_scale"]`` records the factor.
    """
    if not np.isfinite(factor) or factor <= 0:
        raise WorkloadError(f"arrival scale factor must be > 0, got {factor}", field="load")
    if not len(wl):
        return wl
    first = wl.submit_time[0]
    submit = first + (wl.submit_time - first) * float(factor)
    out = wl._replace_arrays(submit_time=submit, time_origin=None, name=name or wl.name)
    out.meta["arrival_scale"] = float(factor) * float(wl.meta.get("arrival_scale", 1.0))
    return out


def scale_to_load(wl: Workload, load: float, num_gpus: int, *, name: str | None = None) -> Workload:
    """Rescale the arrival rate so that ``wl.offered_load(num_gpus) == load`` (durations and sizes unchanged).

    ``num_gpus`` is the GPU count of the cluster the workload will run on; no cluster is needed: the load is traced
    GPU-time, which the default simulator reads as GPU-time at each job's typical speed on whatever cluster it runs
    (heterogeneous ones included), so the run's measured ``offered_load`` is ``load`` when every job finishes."""
    if num_gpus is None or int(num_gpus) < 1:
        raise WorkloadError(f"gpus must be a GPU count >= 1, got {num_gpus}", field="gpus")
    if not np.isfinite(load) or load <= 0:
        raise WorkloadError(f"load must be > 0, got {load}", field="load")
    if len(wl) < 2:
        raise WorkloadError(f"need at least 2 jobs to set an offered load, have {len(wl)}", field="load")
    current = wl.offered_load(int(num_gpus))
    if not np.isfinite(current):
        raise WorkloadError("all jobs arrive at the same time; the offered load is undefined", field="load")
    out = scale_arrivals(wl, current / float(load), name=name)
    out.meta["offered_load"] = {"target": float(load), "gpus": int(num_gpus), "before": current}
    return out
