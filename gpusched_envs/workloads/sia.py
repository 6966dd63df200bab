"""Sia (SOSP'23) / Pollux (OSDI'21) workload CSVs: ``name,time,application,num_replicas,batch_size``.

Users bring the files (the Sia artifact has no licence, so none is bundled). ``time`` is the submission in seconds
from the start, ``application`` one of the five Sia models (it becomes the job's catalogue model), ``num_replicas``
the initial GPU count and ``batch_size`` the initial global batch size (kept in ``meta["batch_size"]``).

The files carry no run time: Sia runs each job until its model reaches a target. Sia's generator picked the
application from the Philly job's GPU-time (< 1 h cifar10, < 10 h deepspeech2 or bert, < 100 h yolov3, otherwise
imagenet, with GPU-time < 1000 h), so a job's nominal duration here is the geometric middle of its application's
GPU-time band divided by its GPUs (:data:`NOMINAL_GPU_HOURS`, read from ``data/fits/sia_nominal_gpu_hours.yaml``
with its source; overridable with ``gpu_hours=``);
``meta["duration_source"]`` says so.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from gpusched_envs.sim.workload import Workload

from ._io import read_table

SIA_COLUMNS = ("name", "time", "application", "num_replicas")
SIA_MODELS = ("cifar10", "deepspeech2", "bert", "yolov3", "imagenet")
NOMINAL_GPU_HOURS_FILE = "data/fits/sia_nominal_gpu_hours.yaml"


def _nominal_gpu_hours() -> dict[str, float]:
    """Geometric middles of Sia's GPU-time bands per application (hours), from the data file with its source."""
    doc = yaml.safe_load(resources.files("gpusched_envs").joinpath(NOMINAL_GPU_HOURS_FILE).read_text())
    hours = {str(k): float(v) for k, v in doc["gpu_hours"].items()}
    missing = set(SIA_MODELS) - set(hours)
    if missing:
        raise ValueError(f"{NOMINAL_GPU_HOURS_FILE}: no GPU-hours for {', '.join(sorted(missing))}")
    return hours


NOMINAL_GPU_HOURS = _nominal_gpu_hours()


def load_sia(
    path: str | Path,
    *,
    max_gpus: int | None = None,
    gpu_hours: dict[str, float] | None = None,
    name: str | None = None,
) -> Workload:
    """Load a Sia/Pollux workload CSV."""
    path = Path(path)
    t = read_table(path, required=SIA_COLUMNS, optional=("batch_size",))
    submit = t.floats("time")
    t.check_nonnegative("time", submit)
    gpus = t.ints("num_replicas")
    bad = np.flatnonzero(gpus < 1)
    if len(bad):
        raise t.error(
            bad[0], "num_replicas", f"{t.strings('num_replicas')[bad[0]].strip()} is not a GPU count >= 1"
        )
    t.check_max_gpus("num_replicas", gpus, max_gpus)
    apps = [a.strip() for a in t.strings("application")]
    code = {m: i for i, m in enumerate(SIA_MODELS)}
    model = np.empty(len(t), dtype=np.int16)
    for i, a in enumerate(apps):
        if a not in code:
            raise t.error(i, "application", f"unknown application {a!r}; valid: {', '.join(SIA_MODELS)}")
        model[i] = code[a]
    hours = dict(NOMINAL_GPU_HOURS)
    if gpu_hours:
        hours.update({k: float(v) for k, v in gpu_hours.items()})
    gpu_h = np.array([hours[m] for m in SIA_MODELS])[model]
    duration = np.round(gpu_h * 3600.0 / gpus)
    meta = {
        "trace": "sia",
        "duration_source": "nominal: GPU-hours per application / num_replicas",
        "gpu_hours": hours,
    }
    if t.has("batch_size"):
        batch = t.ints("batch_size", allow_empty=True)
        meta["batch_size"] = batch[np.argsort(submit, kind="stable")]
    return Workload.from_columns(
        name or f"sia-{path.stem}",
        submit,
        duration,
        gpus,
        model=model,
        model_names=SIA_MODELS,
        job_names=[s.strip() for s in t.strings("name")],
        source=str(path),
        meta=meta,
    )
