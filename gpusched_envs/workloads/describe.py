"""A plain summary of a workload (JSON-ready: only str, int, float, dict, None)."""

from __future__ import annotations

import numpy as np

from gpusched_envs.sim.workload import Workload


def _counts(codes: np.ndarray, names: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    values, counts = np.unique(codes, return_counts=True)
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        out["(unset)" if v < 0 else names[v]] = int(c)
    return out


def describe(wl: Workload, num_gpus: int | None = None) -> dict:
    """Jobs, arrival span, GPU-size histogram, duration percentiles (p50/p90/p99), VC and model counts, GPU-time,
    and the offered load over ``num_gpus`` GPUs when given (every report states its offered load)."""
    n = len(wl)
    out: dict = {
        "name": wl.name,
        "source": wl.source,
        "jobs": n,
        "time_origin": wl.time_origin,
    }
    if n == 0:
        out.update({"span_s": 0.0, "gpu_hist": {}, "duration_s": {}, "gpu_seconds": 0.0})
        return out
    span = float(wl.submit_time[-1] - wl.submit_time[0])
    sizes, counts = np.unique(wl.num_gpus, return_counts=True)
    p50, p90, p99 = np.percentile(wl.duration, [50, 90, 99]).tolist()
    out.update(
        {
            "first_submit_s": float(wl.submit_time[0]),
            "last_submit_s": float(wl.submit_time[-1]),
            "span_s": span,
            "span_h": span / 3600.0,
            "arrival_rate_per_h": (n - 1) / (span / 3600.0) if span > 0 else None,
            "gpu_hist": {int(s): int(c) for s, c in zip(sizes.tolist(), counts.tolist(), strict=True)},
            "mean_gpus": float(wl.num_gpus.mean()),
            "max_gpus": int(wl.num_gpus.max()),
            "fractional_gpu_jobs": int(np.sum(wl.gpu_milli < 1000)),
            "duration_s": {
                "mean": float(wl.duration.mean()),
                "p50": float(p50),
                "p90": float(p90),
                "p99": float(p99),
                "min": float(wl.duration.min()),
                "max": float(wl.duration.max()),
            },
            "gpu_seconds": wl.gpu_seconds(),
            "gpu_hours": wl.gpu_seconds() / 3600.0,
        }
    )
    if wl.vc_names:
        out["vcs"] = _counts(wl.vc, wl.vc_names)
    if wl.model_names:
        out["models"] = _counts(wl.model, wl.model_names)
    if wl.gpu_type_names:
        out["gpu_types"] = _counts(wl.gpu_type, wl.gpu_type_names)
    if num_gpus is not None:
        out["num_gpus"] = int(num_gpus)
        load = wl.offered_load(int(num_gpus))
        out["offered_load"] = float(load) if np.isfinite(load) else None
    return out
