"""Alibaba PAI 2020 GPU trace (cluster-trace-gpu-v2020, Weng et al., NSDI'22): job and task tables.

Users bring the tables (``pai_task_table.csv``, ``pai_job_table.csv``), which come headerless in their official
column layouts (``alibaba/clusterdata`` ``cluster-trace-gpu-v2020/data/*.header``):

- ``pai_task_table``: ``job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type``
- ``pai_job_table``: ``job_name,inst_id,user,status,start_time,end_time``

Times are seconds (shifted by a constant for desensitisation); ``plan_gpu`` is a percentage per instance (50 = half a
GPU, 800 = eight GPUs). One job = all its GPU tasks: it asks for ``Σ inst_num × ceil(plan_gpu/100)`` GPUs, with a
``gpu_milli`` share of ``plan_gpu × 10`` when every GPU instance asks for at most one GPU (fractional sharing); it runs
from its earliest task start to its latest task end; it is submitted at the job table's ``start_time`` when the job
table is given (the task start otherwise); its ``gpu_type`` is the type of its first GPU task (``MISC`` included).
CPU-only jobs, tasks without start or end time, and tasks whose status is not in ``statuses`` are left out and
counted in ``meta["dropped"]``. The bundled ``pai_machine_spec.csv`` (1,897 machines) is read by
:func:`pai2020_machines`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpusched_envs.sim.workload import Workload

from ._io import data_path, read_table
from .errors import WorkloadError

TASK_LAYOUT = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
JOB_LAYOUT = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
MACHINE_LAYOUT = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
PAI_MACHINES = data_path("pai2020", "pai_machine_spec.csv")


def _find(folder: Path, stem: str) -> Path | None:
    for suffix in (".csv", ".csv.gz"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    return None


def load_pai2020(
    task_table: str | Path,
    job_table: str | Path | None = None,
    *,
    max_gpus: int | None = None,
    statuses: tuple[str, ...] | None = None,
    name: str = "pai2020",
) -> Workload:
    """Load PAI 2020 jobs from the task table (a file, or a folder holding ``pai_task_table.csv`` and optionally
    ``pai_job_table.csv``), joined with the job table for submission times when one is given or found."""
    task_path = Path(task_table)
    if task_path.is_dir():
        folder = task_path
        task_path = _find(folder, "pai_task_table")
        if task_path is None:
            raise WorkloadError("no pai_task_table.csv in this folder", file=str(folder))
        if job_table is None:
            job_table = _find(folder, "pai_job_table")
    t = read_table(task_path, required=TASK_LAYOUT, layout=TASK_LAYOUT)
    n = len(t)
    start = t.floats("start_time", allow_empty=True)
    end = t.floats("end_time", allow_empty=True)
    plan_gpu = t.floats("plan_gpu", allow_empty=True)
    inst = t.floats("inst_num", allow_empty=True)
    for field, arr in (("plan_gpu", plan_gpu), ("inst_num", inst), ("start_time", start)):
        bad = np.flatnonzero(arr < 0)
        if len(bad):
            raise t.error(bad[0], field, f"{t.strings(field)[bad[0]].strip()} is negative")
    bad = np.flatnonzero(end < start)
    if len(bad):
        i = bad[0]
        raise t.error(i, "end_time", f"{end[i]:g} is before start_time {start[i]:g}: negative duration")
    plan_gpu = np.nan_to_num(plan_gpu, nan=0.0)
    inst = np.where(np.isnan(inst), 1.0, inst)

    gpu_task = (plan_gpu > 0) & (inst > 0)
    timed = ~np.isnan(start) & ~np.isnan(end)
    status_ok = np.ones(n, dtype=bool)
    if statuses is not None:
        status_ok = np.isin(np.array([s.strip() for s in t.strings("status")]), list(statuses))
    use = gpu_task & timed & status_ok
    dropped = {
        "cpu_tasks": int((~gpu_task).sum()),
        "untimed_gpu_tasks": int((gpu_task & ~timed).sum()),
        "status_gpu_tasks": int((gpu_task & timed & ~status_ok).sum()),
    }
    rows = np.flatnonzero(use)
    if not len(rows):
        raise WorkloadError("no GPU task with a start and end time", file=t.file, row=1, field="plan_gpu")

    names = np.array(t.strings("job_name"), dtype=object)[rows].astype(str)
    job_names, first, code = np.unique(names, return_index=True, return_inverse=True)
    n_jobs = len(job_names)
    per_inst = np.where(plan_gpu[rows] <= 100.0, 1.0, np.ceil(plan_gpu[rows] / 100.0))
    gpus = np.bincount(code, weights=inst[rows] * per_inst, minlength=n_jobs)
    gpus = np.ceil(gpus - 1e-9).astype(np.int64)
    share = np.where(plan_gpu[rows] <= 100.0, np.round(plan_gpu[rows] * 10.0), 1000.0)
    milli = np.zeros(n_jobs)
    np.maximum.at(milli, code, share)
    t_start = np.full(n_jobs, np.inf)
    np.minimum.at(t_start, code, start[rows])
    t_end = np.full(n_jobs, -np.inf)
    np.maximum.at(t_end, code, end[rows])
    first_row = rows[first]  # table index of each job's first GPU task (error messages, gpu_type)
    if max_gpus is not None:
        over = np.flatnonzero(gpus > max_gpus)
        if len(over):
            j = over[np.argmin(first_row[over])]
            raise t.error(
                first_row[j], "plan_gpu", f"job asks for {gpus[j]} GPUs, more than the cluster's {max_gpus}"
            )

    types = np.array([s.strip() for s in t.strings("gpu_type")], dtype=object)[first_row].astype(str)
    type_names = sorted(set(types.tolist()) - {""})
    type_code = {s: k for k, s in enumerate(type_names)}
    gpu_type = np.array([type_code.get(s, -1) for s in types], dtype=np.int16)

    submit = t_start.copy()
    if job_table is not None:
        jt = read_table(Path(job_table), required=JOB_LAYOUT, layout=JOB_LAYOUT)
        jstart = jt.floats("start_time", allow_empty=True)
        bad = np.flatnonzero(jstart < 0)
        if len(bad):
            raise jt.error(bad[0], "start_time", f"{jt.strings('start_time')[bad[0]].strip()} is negative")
        lookup = dict(zip(jt.strings("job_name"), jstart.tolist(), strict=True))
        submitted = np.array([lookup.get(j, np.nan) for j in job_names.tolist()])
        submit = np.where(np.isnan(submitted), t_start, np.minimum(submitted, t_start))
    duration = t_end - t_start
    keep = duration > 0
    dropped["zero_duration_jobs"] = int((~keep).sum())
    if not keep.any():
        raise WorkloadError(
            "every GPU job has a zero duration; nothing to simulate", file=t.file, field="end_time"
        )
    offset = float(submit[keep].min())
    return Workload.from_columns(
        name,
        submit[keep] - offset,
        duration[keep],
        gpus[keep],
        gpu_milli=np.clip(milli[keep], 1, 1000),
        gpu_type=gpu_type[keep],
        gpu_type_names=tuple(type_names),
        job_names=job_names[keep].tolist(),
        source=str(task_path) + (f" + {job_table}" if job_table is not None else ""),
        meta={"trace": "pai_v2020", "dropped": dropped, "time_offset_s": offset},
    )


def pai2020_machines(path: str | Path | None = None) -> dict[str, np.ndarray]:
    """The PAI 2020 machine inventory: arrays ``machine``, ``gpu_type``, ``cap_cpu``, ``cap_mem``, ``cap_gpu``."""
    path = Path(path) if path is not None else PAI_MACHINES
    t = read_table(path, required=MACHINE_LAYOUT, layout=MACHINE_LAYOUT)
    return {
        "machine": np.array(t.strings("machine")),
        "gpu_type": np.array([s.strip() for s in t.strings("gpu_type")]),
        "cap_cpu": t.floats("cap_cpu"),
        "cap_mem": t.floats("cap_mem"),
        "cap_gpu": t.ints("cap_gpu"),
    }
