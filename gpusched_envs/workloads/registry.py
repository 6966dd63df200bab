"""Named workload specs: ``NAME[:key=value,key=value...]`` → :class:`~gpusched_envs.sim.workload.Workload`.

Examples::

    load_workload("philly")                                        # the bundled 82,247 Philly jobs
    load_workload("philly:start=2017-10-01,end=2017-11-30")        # a window; end date inclusive
    load_workload("philly:vc=6214e9,jobs=2000,load=1.2,gpus=64")   # busy VC, first 2000 jobs, offered load 1.2
    load_workload("openb")                                         # Alibaba 2023 default pod list
    load_workload("helios:path=data/Venus/cluster_log.csv")
    load_workload("synthetic:jobs=5000,load=0.9,gpus=64,arrival=diurnal,models=resnet50+bert@2", seed=3)

Several values go in one key with ``+`` (``vc=6214e9+b436b2``). Windows and scaling apply in this order:
``start``/``end``/``vc`` → ``jobs`` (first N) → ``load`` + ``gpus``. The same spec and seed give a byte-identical
workload (equal :meth:`Workload.fingerprint`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpusched_envs.sim.workload import Workload

from .errors import WorkloadError
from .helios import load_helios
from .openb import OPENB_PODS, load_openb
from .pai2020 import load_pai2020
from .philly import load_philly
from .select import scale_to_load, select
from .sia import load_sia
from .synthetic import generate_synthetic

_WINDOW_KEYS = {
    "jobs": "first N jobs (after the other filters)",
    "load": "target offered load (needs gpus); arrivals are rescaled",
    "gpus": "GPU count for load",
    "max_gpus": "largest job (GPUs); larger jobs fail, naming file and row (or see oversize)",
    "oversize": "error|drop: jobs above max_gpus fail (default) or are dropped and counted in meta['dropped']",
}
_TIME_KEYS = {
    "start": "window start (YYYY-MM-DD or date-time)",
    "end": "window end (a date is inclusive)",
    "vc": "virtual cluster(s), '+'-separated",
}


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    description: str
    keys: dict[str, str]  # key -> one-line help
    loader: Callable[[dict, int], Workload]


# upper bounds of integer keys: a typo such as jobs=1000000000000 must not try to allocate terabytes
_INT_LIMITS = {"jobs": 10_000_000, "gpus": 2**31 - 1, "max_gpus": 2**31 - 1}


def _int(key: str, value: str) -> int:
    try:
        out = int(value)
    except ValueError:
        raise WorkloadError(f"{key}={value!r} is not an integer", field=key) from None
    limit = _INT_LIMITS.get(key)
    if limit is not None and out > limit:
        raise WorkloadError(f"{key}={value} is more than the limit of {limit:,}", field=key)
    return out


def _float(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise WorkloadError(f"{key}={value!r} is not a number", field=key) from None


def _require_path(name: str, kv: dict) -> str:
    if "path" not in kv:
        raise WorkloadError(
            f"{name} traces are not bundled; give path=... to the file you downloaded", field="path"
        )
    return kv["path"]


def _oversize(kv: dict) -> str:
    mode = kv.get("oversize", "error")
    if mode not in ("error", "drop"):
        raise WorkloadError(f"oversize={mode!r}; expected error or drop", field="oversize")
    if "oversize" in kv and "max_gpus" not in kv:
        raise WorkloadError("oversize goes with max_gpus (the largest job kept)", field="oversize")
    return mode


def _window(wl: Workload, kv: dict, rows=None) -> Workload:
    """``start``/``end``/``vc`` → oversize jobs (``max_gpus``, ``oversize``) → ``jobs`` → ``load`` + ``gpus``.

    Oversize jobs are checked inside the window only (a window of small jobs of a trace with large ones loads);
    dropped ones are counted in ``meta["dropped"]["oversize"]`` (those inside the time/VC window)."""
    vc = kv["vc"].split("+") if "vc" in kv else None
    max_gpus, mode = _max_gpus(kv), _oversize(kv)
    jobs = _int("jobs", kv["jobs"]) if "jobs" in kv else None
    windowed = any(k in kv for k in ("start", "end")) or vc is not None or jobs is not None
    dropped = 0
    if max_gpus is not None and mode == "drop":
        over = wl.num_gpus > max_gpus
        if over.any():
            big = wl.subset(over)
            if any(k in kv for k in ("start", "end")) or vc is not None:
                big = select(big, start=kv.get("start"), end=kv.get("end"), vc=vc)
            dropped = len(big)
            wl = wl.subset(~over)
            if not len(wl):
                raise WorkloadError(f"every job is larger than max_gpus={max_gpus}", field="max_gpus")
    idx = np.arange(len(wl))
    if windowed:
        wl, idx = select(wl, start=kv.get("start"), end=kv.get("end"), vc=vc, jobs=jobs, return_index=True)
        if not len(wl):
            given = ",".join(f"{k}={kv[k]}" for k in ("start", "end", "vc", "jobs") if k in kv)
            raise WorkloadError(f"the window {given} leaves no jobs", field=next(k for k in kv if k in given))
    if max_gpus is not None:
        if mode == "error":
            bad = np.flatnonzero(wl.num_gpus > max_gpus)
            if len(bad):
                b = int(bad[0])
                file = Path(wl.source).name if wl.source else None
                row = int(rows[idx[b]]) if rows is not None else f"job {b} of the workload"
                raise WorkloadError(
                    f"job asks for {int(wl.num_gpus[b])} GPUs, more than max_gpus={max_gpus} "
                    "(add oversize=drop to drop such jobs)",
                    file=file,
                    row=row,
                    field="num_gpus",
                )
        wl.meta["dropped"] = {**wl.meta.get("dropped", {}), "oversize": dropped}
    if "load" in kv or "gpus" in kv:
        if "load" not in kv or "gpus" not in kv:
            raise WorkloadError("load and gpus go together (offered load over that many GPUs)", field="load")
        wl = scale_to_load(wl, _float("load", kv["load"]), _int("gpus", kv["gpus"]))
    return wl


def _max_gpus(kv: dict) -> int | None:
    return _int("max_gpus", kv["max_gpus"]) if "max_gpus" in kv else None


def _philly(kv: dict, seed: int) -> Workload:
    wl, rows = load_philly(kv.get("path"), return_rows=True)
    return _window(wl, kv, rows)


def _openb(kv: dict, seed: int) -> Workload:
    return _window(load_openb(kv.get("path"), pods=kv.get("pods", "default")), kv)


def _pai2020(kv: dict, seed: int) -> Workload:
    return _window(load_pai2020(_require_path("pai2020", kv), kv.get("job_table")), kv)


def _helios(kv: dict, seed: int) -> Workload:
    return _window(load_helios(_require_path("helios", kv)), kv)


def _sia(kv: dict, seed: int) -> Workload:
    return _window(load_sia(_require_path("sia", kv)), kv)


def _synthetic(kv: dict, seed: int) -> Workload:
    if ("load" in kv) != ("gpus" in kv):
        raise WorkloadError("load and gpus go together (offered load over that many GPUs)", field="load")
    return generate_synthetic(
        _int("jobs", kv.get("jobs", "1000")),
        seed=seed,
        rate=_float("rate", kv["rate"]) if "rate" in kv else None,
        load=_float("load", kv["load"]) if "load" in kv else None,
        gpus=_int("gpus", kv["gpus"]) if "gpus" in kv else None,
        arrival=kv.get("arrival", "poisson"),
        fit=kv.get("fit", "philly"),
        models=kv.get("models"),
        max_gpus=_max_gpus(kv),
    )


_SPECS: dict[str, WorkloadSpec] = {
    s.name: s
    for s in (
        WorkloadSpec(
            "philly",
            "Microsoft Philly, 82,247 jobs 2017-09-04..12-22 (bundled, CC-BY-4.0)",
            {**_TIME_KEYS, **_WINDOW_KEYS, "path": "your own file in the same CSV format"},
            _philly,
        ),
        WorkloadSpec(
            "openb",
            "Alibaba 2023 GPU pods with fractional GPUs and type constraints (bundled default pods)",
            {
                "pods": f"bundled pod list: {'|'.join(OPENB_PODS)}",
                "path": "your own pod list",
                **_WINDOW_KEYS,
            },
            _openb,
        ),
        WorkloadSpec(
            "pai2020",
            "Alibaba PAI 2020 job/task tables (bring them: path=task table or folder)",
            {"path": "pai_task_table.csv or its folder", "job_table": "pai_job_table.csv", **_WINDOW_KEYS},
            _pai2020,
        ),
        WorkloadSpec(
            "helios",
            "SenseTime Helios cluster_log.csv (bring it: path=...)",
            {"path": "cluster_log.csv", **_TIME_KEYS, **_WINDOW_KEYS},
            _helios,
        ),
        WorkloadSpec(
            "sia",
            "Sia/Pollux workload CSV with models cifar10/deepspeech2/bert/yolov3/imagenet (bring it: path=...)",
            {"path": "workload CSV", **_WINDOW_KEYS},
            _sia,
        ),
        WorkloadSpec(
            "synthetic",
            "Poisson or diurnal arrivals with sizes and durations fitted to Philly (seeded)",
            {
                "jobs": "number of jobs (default 1000)",
                "rate": "arrivals per hour (default: the fit's rate)",
                "load": "target offered load (needs gpus)",
                "gpus": "GPU count for load",
                "arrival": "poisson|diurnal",
                "fit": "fit name (philly) or YAML path",
                "models": "model mix, e.g. resnet50+bert@2 (default: engine's seeded rule)",
                "max_gpus": "largest job size",
            },
            _synthetic,
        ),
    )
}


def list_workloads() -> list[tuple[str, str, tuple[str, ...]]]:
    """``(name, one-line description, keys)`` of every named workload (plus ``dag``, loaded elsewhere)."""
    out = [(s.name, s.description, tuple(s.keys)) for s in _SPECS.values()]
    out.append(("dag", "DAG workloads (WORL-RTGS); loaded by gpusched_envs.workloads.dag", ()))
    return out


def workload_keys(name: str) -> dict[str, str]:
    """Key → help text of one named workload."""
    if name not in _SPECS:
        raise WorkloadError(f"unknown workload {name!r}; valid: {', '.join(_SPECS)}", field="spec")
    return dict(_SPECS[name].keys)


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"name:k=v,k2=v2"`` → ``("name", {"k": "v", "k2": "v2"})`` (checked against the name's keys)."""
    if not isinstance(spec, str) or not spec.strip():
        raise WorkloadError(f"empty workload spec; valid names: {', '.join(_SPECS)}", field="spec")
    name, _, rest = spec.strip().partition(":")
    name = name.strip()
    if name == "dag":
        raise WorkloadError(
            "DAG workloads are loaded by gpusched_envs.workloads.dag, not by load_workload", field="spec"
        )
    if name not in _SPECS:
        raise WorkloadError(f"unknown workload {name!r}; valid: {', '.join(_SPECS)}", field="spec")
    valid = _SPECS[name].keys
    kv: dict[str, str] = {}
    for part in rest.split(",") if rest.strip() else []:
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key:
            raise WorkloadError(f"{part!r} in {spec!r} is not key=value", field="spec")
        if key not in valid:
            raise WorkloadError(f"unknown key {key!r} for {name}; valid: {', '.join(valid)}", field=key)
        if key in kv:
            raise WorkloadError(f"key {key!r} given twice in {spec!r}", field=key)
        kv[key] = value
    return name, kv


def load_workload(spec: str, *, seed: int = 0) -> Workload:
    """Build the workload a spec names (see the module docstring); bad specs raise :class:`WorkloadError`."""
    name, kv = parse_spec(spec)
    wl = _SPECS[name].loader(kv, int(seed))
    wl.meta["spec"] = spec
    wl.meta["seed"] = int(seed)
    return wl
