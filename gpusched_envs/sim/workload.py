"""The job list a simulation replays: one structure-of-arrays record shared by every loader and generator."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

NO_INDEX = -1


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job as a user reads it (``Workload.job(i)``)."""

    job_id: int
    name: str
    submit_time: float  # seconds from the workload's time origin
    num_gpus: int
    duration: float  # traced run time (s) at the speed the job had where it ran (SimConfig.trace_speed)
    model: str | None
    vc: str | None
    gpu_milli: int  # share of each GPU in thousandths (1000 = a whole GPU; openb fractional GPUs)
    gpu_type: str | None  # required GPU type, or None for any


@dataclass(frozen=True)
class Workload:
    """A list of jobs sorted by submit time, stored as parallel numpy arrays.

    ``model``, ``vc`` and ``gpu_type`` are indices into the matching ``*_names`` tuples, ``-1`` when unset
    (a model of ``-1`` is drawn by the seeded rule of :func:`gpusched_envs.sim.catalog.Catalog.assign_models`).
    """

    name: str
    submit_time: np.ndarray  # (J,) float64, non-decreasing, seconds
    duration: np.ndarray  # (J,) float64 > 0, seconds
    num_gpus: np.ndarray  # (J,) int32 >= 1
    model: np.ndarray  # (J,) int16, index into model_names or -1
    vc: np.ndarray  # (J,) int16, index into vc_names or -1
    gpu_milli: np.ndarray  # (J,) int32 in 1..1000
    gpu_type: np.ndarray  # (J,) int16, index into gpu_type_names or -1
    model_names: tuple[str, ...] = ()
    vc_names: tuple[str, ...] = ()
    gpu_type_names: tuple[str, ...] = ()
    job_names: tuple[str, ...] | None = None
    source: str = ""  # where the jobs came from (file path, generator and seed)
    time_origin: str | None = None  # wall-clock time of t=0 (ISO 8601) when the trace has one
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.submit_time)
        for key in ("duration", "num_gpus", "model", "vc", "gpu_milli", "gpu_type"):
            if len(getattr(self, key)) != n:
                raise ValueError(
                    f"workload {self.name!r}: field {key!r} has {len(getattr(self, key))} rows, expected {n}"
                )
        if n and np.any(np.diff(self.submit_time) < 0):
            raise ValueError(f"workload {self.name!r}: submit times must be sorted")
        for key, bad, rule in (
            ("num_gpus", self.num_gpus < 1, ">= 1"),
            ("gpu_milli", (self.gpu_milli < 1) | (self.gpu_milli > 1000), "in 1..1000"),
            ("duration", ~(self.duration >= 0), ">= 0"),
        ):
            if np.any(bad):
                row = int(np.flatnonzero(bad)[0])
                value = getattr(self, key)[row]
                raise ValueError(f"workload {self.name!r}: row {row}, field {key!r}: {value} must be {rule}")

    @classmethod
    def from_columns(
        cls,
        name: str,
        submit_time,
        duration,
        num_gpus,
        *,
        model=None,
        vc=None,
        gpu_milli=None,
        gpu_type=None,
        model_names: tuple[str, ...] = (),
        vc_names: tuple[str, ...] = (),
        gpu_type_names: tuple[str, ...] = (),
        job_names=None,
        source: str = "",
        time_origin: str | None = None,
        meta: dict | None = None,
    ) -> Workload:
        """Build a workload from columns in any order; rows are stably sorted by submit time."""
        submit = np.asarray(submit_time, dtype=np.float64)
        n = len(submit)
        order = np.argsort(submit, kind="stable")

        def col(values, dtype, default):
            if values is None:
                return np.full(n, default, dtype=dtype)
            arr = np.asarray(values, dtype=dtype)
            if arr.shape != (n,):
                raise ValueError(f"workload {name!r}: column has shape {arr.shape}, expected ({n},)")
            return arr[order]

        names = None if job_names is None else tuple(str(job_names[i]) for i in order)
        return cls(
            name=name,
            submit_time=submit[order],
            duration=col(duration, np.float64, 0.0),
            num_gpus=col(num_gpus, np.int32, 1),
            model=col(model, np.int16, NO_INDEX),
            vc=col(vc, np.int16, NO_INDEX),
            gpu_milli=col(gpu_milli, np.int32, 1000),
            gpu_type=col(gpu_type, np.int16, NO_INDEX),
            model_names=tuple(model_names),
            vc_names=tuple(vc_names),
            gpu_type_names=tuple(gpu_type_names),
            job_names=names,
            source=source,
            time_origin=time_origin,
            meta=dict(meta or {}),
        )

    def __len__(self) -> int:
        return len(self.submit_time)

    def job(self, i: int) -> JobSpec:
        def name_of(names: tuple[str, ...], idx: int) -> str | None:
            return None if idx < 0 else names[idx]

        return JobSpec(
            job_id=i,
            name=self.job_names[i] if self.job_names is not None else f"job-{i}",
            submit_time=float(self.submit_time[i]),
            num_gpus=int(self.num_gpus[i]),
            duration=float(self.duration[i]),
            model=name_of(self.model_names, int(self.model[i])),
            vc=name_of(self.vc_names, int(self.vc[i])),
            gpu_milli=int(self.gpu_milli[i]),
            gpu_type=name_of(self.gpu_type_names, int(self.gpu_type[i])),
        )

    def subset(self, mask_or_index, name: str | None = None) -> Workload:
        """Rows selected by a boolean mask or an index array (order kept)."""
        idx = np.asarray(mask_or_index)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        return Workload(
            name=name or self.name,
            submit_time=self.submit_time[idx],
            duration=self.duration[idx],
            num_gpus=self.num_gpus[idx],
            model=self.model[idx],
            vc=self.vc[idx],
            gpu_milli=self.gpu_milli[idx],
            gpu_type=self.gpu_type[idx],
            model_names=self.model_names,
            vc_names=self.vc_names,
            gpu_type_names=self.gpu_type_names,
            job_names=None if self.job_names is None else tuple(self.job_names[i] for i in idx),
            source=self.source,
            time_origin=self.time_origin,
            meta=dict(self.meta),
        )

    def shifted(self) -> Workload:
        """The same jobs with time measured from the first submission."""
        if not len(self):
            return self
        t0 = self.submit_time[0]
        return self._replace_arrays(submit_time=self.submit_time - t0)

    def _replace_arrays(self, **arrays) -> Workload:
        fields = {
            k: getattr(self, k)
            for k in (
                "name",
                "submit_time",
                "duration",
                "num_gpus",
                "model",
                "vc",
                "gpu_milli",
                "gpu_type",
                "model_names",
                "vc_names",
                "gpu_type_names",
                "job_names",
                "source",
                "time_origin",
            )
        }
        fields.update(arrays)
        return Workload(**fields, meta=dict(self.meta))

    def gpu_seconds(self) -> float:
        """Total traced GPU-time asked for: duration × GPUs, fractional GPUs counted by their share."""
        return float(np.sum(self.duration * self.num_gpus * (self.gpu_milli / 1000.0)))

    def offered_load(self, num_gpus: int) -> float:
        """Traced GPU-time ÷ (``num_gpus`` × arrival span) (every report states it; ``load=`` sets it).

        The one definition of offered load: GPU-time the jobs need at the speed they get in their typical placement
        (the simulator's default ``trace_speed="typical"`` reads a traced duration as exactly that), over the GPU
        capacity of the arrival span. It needs no cluster, and the simulator's ``offered_load`` metric measures the
        same quantity (sim/metrics.py), so a run that drains with no job dropped measures this value. Under
        ``trace_speed="ideal"`` durations are ideal runtimes and the measured load is higher by typical ÷ ideal."""
        if len(self) < 2:
            return 0.0
        span = float(self.submit_time[-1] - self.submit_time[0])
        if span <= 0:
            return float("inf")
        return self.gpu_seconds() / (num_gpus * span)

    def fingerprint(self) -> str:
        """A digest of every field; equal fingerprints mean byte-identical workloads."""
        h = hashlib.sha256()
        for key in ("submit_time", "duration", "num_gpus", "model", "vc", "gpu_milli", "gpu_type"):
            h.update(np.ascontiguousarray(getattr(self, key)).tobytes())
        h.update(repr((self.model_names, self.vc_names, self.gpu_type_names, self.job_names)).encode())
        return h.hexdigest()
