"""Alibaba GPU cluster trace 2023 ("openb", Weng et al., ATC'23): node list and pod list.

Pod list columns: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,
scheduled_time`` (seconds from the trace start). A pod is one job: submitted at ``creation_time``, running for
``deletion_time - scheduled_time`` (``deletion_time - creation_time`` for a pod that was never scheduled, i.e. its
requested lifetime). ``gpu_milli`` is the share of each GPU (fractional GPUs, ``num_gpu == 1``); ``gpu_spec`` lists
the allowed GPU types separated by ``|`` and becomes the job's ``gpu_type`` name (empty: any type). CPU-only pods
(``num_gpu == 0``) are dropped unless ``gpu_only=False``; ``meta["qos"]``/``meta["pod_phase"]`` keep those columns
per job (aligned with the workload's rows).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from gpusched_envs.sim.workload import Workload

from ._io import data_path, read_table
from .errors import WorkloadError

OPENB_NODES = data_path("openb", "openb_node_list_gpu_node.csv")
OPENB_PODS = {"default": data_path("openb", "openb_pod_list_default.csv.gz")}
POD_COLUMNS = ("name", "num_gpu", "gpu_milli", "creation_time", "deletion_time")
POD_OPTIONAL = ("gpu_spec", "qos", "pod_phase", "scheduled_time")


def openb_pod_path(pods: str = "default") -> Path:
    """Path of a bundled pod list (only ``default`` is bundled; bring the resampled variants with ``path=``)."""
    if pods not in OPENB_PODS:
        raise WorkloadError(f"pod list {pods!r} is not bundled; valid: {', '.join(OPENB_PODS)}", field="pods")
    return OPENB_PODS[pods]


def load_openb(
    path: str | Path | None = None,
    *,
    pods: str = "default",
    max_gpus: int | None = None,
    gpu_only: bool = True,
    name: str | None = None,
    known_gpus: tuple[str, ...] | None = None,
) -> Workload:
    """Load an openb pod list (``path``, or the bundled list named by ``pods``).

    Every name in a ``gpu_spec`` (``V100M16|V100M32``) must be a GPU model of ``known_gpus`` (default: the bundled
    openb node list's models and the catalogue's GPU types); an unknown one is an error naming it and the row."""
    path = Path(path) if path is not None else openb_pod_path(pods)
    t = read_table(path, required=POD_COLUMNS, optional=POD_OPTIONAL)
    n = len(t)
    gpus = t.ints("num_gpu")
    t.check_nonnegative("num_gpu", gpus)
    milli = t.ints("gpu_milli")
    t.check_nonnegative("gpu_milli", milli)
    created = t.floats("creation_time")
    deleted = t.floats("deletion_time")
    started = t.floats("scheduled_time", allow_empty=True) if t.has("scheduled_time") else np.full(n, np.nan)
    begin = np.where(np.isnan(started), created, started)
    duration = deleted - begin
    bad = np.flatnonzero(duration < 0)
    if len(bad):
        i = bad[0]
        raise t.error(
            i, "deletion_time", f"{deleted[i]:g} is before the pod started ({begin[i]:g}): negative duration"
        )
    bad = np.flatnonzero((gpus >= 1) & ((milli < 1) | (milli > 1000)))
    if len(bad):
        raise t.error(bad[0], "gpu_milli", f"{milli[bad[0]]} is not a GPU share in 1..1000")
    keep = (gpus >= 1) if gpu_only else np.ones(n, dtype=bool)
    t.check_max_gpus("num_gpu", gpus, max_gpus, keep)
    zero = keep & (duration <= 0)
    dropped = {"cpu_only": int(n - (gpus >= 1).sum()) if gpu_only else 0, "zero_duration": int(zero.sum())}
    keep &= ~zero
    idx = np.flatnonzero(keep)
    if not len(idx):
        raise WorkloadError(
            "no GPU pod with a duration > 0; nothing to simulate", file=t.file, field="num_gpu"
        )

    spec = t.strings("gpu_spec") if t.has("gpu_spec") else [""] * n
    known = set(known_gpus) if known_gpus is not None else _known_gpus()
    for i in idx:
        unknown = [g for g in spec[i].strip().split("|") if spec[i].strip() and g.strip() not in known]
        if unknown:
            raise t.error(
                i, "gpu_spec", f"unknown GPU model {unknown[0].strip()!r}; known: {', '.join(sorted(known))}"
            )
    spec_names = sorted({spec[i].strip() for i in idx} - {""})
    spec_code = {s: k for k, s in enumerate(spec_names)}
    gpu_type = np.array([spec_code.get(spec[i].strip(), -1) for i in idx], dtype=np.int16)
    milli_kept = np.where(gpus[idx] >= 1, milli[idx], 1000)
    meta = {"trace": "openb_v2023", "dropped": dropped}
    order = np.argsort(created[idx], kind="stable")
    for col in ("qos", "pod_phase"):
        if t.has(col):
            vals = t.strings(col)
            meta[col] = tuple(vals[i] for i in idx[order])
    names = t.strings("name")
    if name is None:
        name = f"openb-{pods}" if path == OPENB_PODS.get(pods) else "openb"
    return Workload.from_columns(
        name,
        created[idx],
        duration[idx],
        np.maximum(gpus[idx], 1),
        gpu_milli=milli_kept,
        gpu_type=gpu_type,
        gpu_type_names=tuple(spec_names),
        job_names=[names[i] for i in idx],
        source=str(path),
        meta=meta,
    )


@lru_cache(maxsize=1)
def _known_gpus() -> frozenset[str]:
    from gpusched_envs.sim.catalog import default_catalog

    return frozenset(openb_nodes()["model"].tolist()) | frozenset(default_catalog().gpu_types)


def openb_nodes(path: str | Path | None = None) -> dict[str, np.ndarray]:
    """The openb GPU node list (1,213 nodes): arrays ``sn``, ``cpu_milli``, ``memory_mib``, ``gpu``, ``model``."""
    path = Path(path) if path is not None else OPENB_NODES
    t = read_table(path, required=("sn", "cpu_milli", "memory_mib", "gpu", "model"))
    return {
        "sn": np.array(t.strings("sn")),
        "cpu_milli": t.ints("cpu_milli"),
        "memory_mib": t.ints("memory_mib"),
        "gpu": t.ints("gpu"),
        "model": np.array([m.strip() for m in t.strings("model")]),
    }
