"""SenseTime Helios job logs (Hu et al., SC'21): ``cluster_log.csv`` of S-Lab-System-Group/HeliosData.

Users bring the file (one per cluster: Earth, Saturn, Uranus, Venus). Its header is
``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue`` (some processed
copies add ``jobname``); columns are found by name, so either works. ``submit_time`` is a local date-time
(``YYYY-MM-DD HH:MM:SS``), ``duration`` the run time in seconds (``end_time - start_time``; computed from them when the
column is absent). CPU-only jobs (``gpu_num == 0``), jobs that never ran (empty or zero duration) and jobs whose
``state`` is not in ``states`` are left out and counted in ``meta["dropped"]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpusched_envs.sim.workload import Workload

from ._io import read_table
from .errors import WorkloadError

HELIOS_COLUMNS = ("submit_time", "gpu_num")
HELIOS_OPTIONAL = ("job_id", "vc", "state", "duration", "start_time", "end_time", "jobname")
HELIOS_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL")


def load_helios(
    path: str | Path,
    *,
    max_gpus: int | None = None,
    states: tuple[str, ...] | None = None,
    gpu_only: bool = True,
    name: str = "helios",
) -> Workload:
    """Load a Helios ``cluster_log.csv`` (gz or plain)."""
    path = Path(path)
    t = read_table(path, required=HELIOS_COLUMNS, optional=HELIOS_OPTIONAL)
    n = len(t)
    submit_dt = t.datetimes("submit_time")
    gpus = t.ints("gpu_num")
    t.check_nonnegative("gpu_num", gpus)
    if t.has("duration"):
        duration = t.floats("duration", allow_empty=True)
        t.check_durations("duration", duration)
    elif t.has("start_time") and t.has("end_time"):
        s = t.datetimes("start_time")
        e = t.datetimes("end_time")
        duration = ((e - s) / np.timedelta64(1, "s")).astype(np.float64)
        bad = np.flatnonzero(duration < 0)
        if len(bad):
            raise t.error(bad[0], "end_time", "is before start_time: negative duration")
    else:
        raise WorkloadError(
            "missing column (need duration, or start_time and end_time)",
            file=t.file,
            row="header",
            field="duration",
        )
    keep = (gpus >= 1) if gpu_only else np.ones(n, dtype=bool)
    dropped = {"cpu_only": int(n - keep.sum())}
    if states is not None and t.has("state"):
        ok = np.isin(np.array([s.strip() for s in t.strings("state")]), list(states))
        dropped["state"] = int((keep & ~ok).sum())
        keep &= ok
    t.check_max_gpus("gpu_num", gpus, max_gpus, keep)
    ran = ~np.isnan(duration) & (duration > 0)
    dropped["no_run"] = int((keep & ~ran).sum())
    keep &= ran
    idx = np.flatnonzero(keep)
    if not len(idx):
        raise WorkloadError("no GPU job with a positive duration", file=t.file, row=1, field="duration")
    vc = None
    vc_names: tuple[str, ...] = ()
    if t.has("vc"):
        names, codes = np.unique(np.array([v.strip() for v in t.strings("vc")]), return_inverse=True)
        vc, vc_names = codes[idx], tuple(str(v) for v in names)
    origin = submit_dt[idx].min()
    job_names = None
    if t.has("job_id"):
        ids = t.strings("job_id")
        job_names = [ids[i].strip() for i in idx]
    return Workload.from_columns(
        name,
        (submit_dt[idx] - origin).astype(np.float64),
        duration[idx],
        np.maximum(gpus[idx], 1),
        vc=vc,
        vc_names=vc_names,
        job_names=job_names,
        source=str(path),
        time_origin=str(origin),
        meta={"trace": "helios", "dropped": dropped},
    )
