"""Synthetic workloads: Poisson or diurnal arrivals, job sizes and durations drawn from a fit to a real trace.

The fit (``gpusched_envs/data/fits/<name>_fit.yaml``, written by ``scripts/fit_philly.py``) holds the empirical GPU-size
distribution, per-size-class duration quantile functions and the arrival rate with a 24-hour diurnal profile.
Every column is drawn from its own child of ``SeedSequence(seed)``, so changing e.g. the model mix leaves the sizes,
durations and arrivals unchanged; the same arguments give a byte-identical workload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from gpusched_envs.safety import LimitError, load_yaml
from gpusched_envs.sim.workload import Workload

from .errors import WorkloadError
from .select import scale_to_load

FITS_DIR = Path(__file__).resolve().parent.parent / "data" / "fits"
ARRIVALS = ("poisson", "diurnal")


@lru_cache(maxsize=8)
def _read_fit(path: str) -> dict:
    p = Path(path)
    try:
        text = p.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"cannot read fit ({exc.strerror})", file=p.name) from None
    try:
        doc = load_yaml(text, p.name)  # safe_load with limits on alias expansion
    except LimitError as exc:
        raise WorkloadError(str(exc).removeprefix(f"{p.name}: "), file=p.name) from None
    for key in ("gpu_sizes", "duration", "arrivals"):
        if not isinstance(doc, dict) or not isinstance(doc.get(key), dict):
            raise WorkloadError("missing section (a mapping)", file=p.name, field=key)
    _check_fit(doc, p.name)
    return doc


def _numbers(
    value, file: str, field: str, *, positive: bool = False, length: int | None = None
) -> np.ndarray:
    """A non-empty list of finite numbers (> 0 with ``positive``, else >= 0) from a fit file, or one clear error."""
    ok = (
        isinstance(value, list)
        and value
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    )
    arr = np.asarray(value, dtype=np.float64) if ok else None
    if arr is None or not np.all(np.isfinite(arr)) or np.any(arr <= 0 if positive else arr < 0):
        kind = "positive" if positive else "non-negative"
        raise WorkloadError(f"must be a non-empty list of finite {kind} numbers", file=file, field=field)
    if length is not None and len(arr) != length:
        raise WorkloadError(f"has {len(arr)} values, expected {length}", file=file, field=field)
    return arr


def _check_fit(doc: dict, file: str) -> None:
    """The shapes and ranges :func:`generate_synthetic` relies on (a malformed fit is one line, not a traceback)."""
    sizes = _numbers(doc["gpu_sizes"].get("sizes"), file, "gpu_sizes.sizes", positive=True)
    if np.any(sizes != np.round(sizes)) or np.any(sizes > 2**20):
        raise WorkloadError("GPU sizes must be whole numbers <= 2^20", file=file, field="gpu_sizes.sizes")
    probs = _numbers(doc["gpu_sizes"].get("probs"), file, "gpu_sizes.probs", length=len(sizes))
    if probs.sum() <= 0:
        raise WorkloadError("probabilities are all zero", file=file, field="gpu_sizes.probs")
    q = _numbers(doc["duration"].get("probs"), file, "duration.probs")
    if np.any(np.diff(q) < 0) or q[-1] > 1:
        raise WorkloadError("must be increasing probabilities in [0, 1]", file=file, field="duration.probs")
    classes = doc["duration"].get("classes")
    if not isinstance(classes, list) or not classes:
        raise WorkloadError("must be a non-empty list of size classes", file=file, field="duration.classes")
    for i, cls in enumerate(classes):
        where = f"duration.classes[{i}]"
        if not isinstance(cls, dict):
            raise WorkloadError("must be a mapping", file=file, field=where)
        for key in ("min_gpus", "max_gpus"):
            if isinstance(cls.get(key), bool) or not isinstance(cls.get(key), int):
                raise WorkloadError("must be an integer", file=file, field=f"{where}.{key}")
        _numbers(cls.get("quantiles_s"), file, f"{where}.quantiles_s", positive=True, length=len(q))
    rate = doc["arrivals"].get("rate_per_hour")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not np.isfinite(rate) or rate <= 0:
        raise WorkloadError(
            f"must be a positive number, got {rate!r}", file=file, field="arrivals.rate_per_hour"
        )
    if "diurnal_profile" in doc["arrivals"]:
        prof = _numbers(doc["arrivals"]["diurnal_profile"], file, "arrivals.diurnal_profile", length=24)
        if prof.sum() <= 0:
            raise WorkloadError("is all zero", file=file, field="arrivals.diurnal_profile")


def _is_job_fit(path: Path) -> bool:
    """A job-workload fit (not e.g. a DAG-shape fit sharing the folder)."""
    try:
        return "gpu_sizes:" in path.read_text()
    except OSError:
        return False


def load_fit(fit: str | Path = "philly") -> dict:
    """A fit by name (``philly`` → ``data/fits/philly_fit.yaml``) or from a YAML path."""
    p = Path(fit)
    if p.suffix not in (".yaml", ".yml"):
        p = FITS_DIR / f"{fit}_fit.yaml"
        if not p.is_file():
            known = sorted(
                q.name.removesuffix("_fit.yaml") for q in FITS_DIR.glob("*_fit.yaml") if _is_job_fit(q)
            )
            raise WorkloadError(f"unknown fit {str(fit)!r}; valid: {', '.join(known)}", field="fit")
    return _read_fit(str(p.resolve()))


def parse_model_mix(models) -> tuple[tuple[str, ...], np.ndarray]:
    """Model names and probabilities from ``"a+b@2"``, a list of names, or a ``{name: weight}`` mapping."""
    if isinstance(models, str):
        items = []
        for part in models.split("+"):
            nm, _, w = part.strip().partition("@")
            try:
                items.append((nm.strip(), float(w) if w else 1.0))
            except ValueError:
                raise WorkloadError(f"bad weight {w!r} for model {nm!r}", field="models") from None
    elif isinstance(models, Mapping):
        items = [(str(k), float(v)) for k, v in models.items()]
    elif isinstance(models, Sequence):
        items = [(str(m), 1.0) for m in models]
    else:
        raise WorkloadError(
            f"models must be a string, list or mapping, got {type(models).__name__}", field="models"
        )
    names = tuple(n for n, _ in items)
    weights = np.array([w for _, w in items], dtype=np.float64)
    if not names or any(not n for n in names) or len(set(names)) != len(names):
        raise WorkloadError(f"model mix {models!r} needs distinct non-empty names", field="models")
    if np.any(weights < 0) or not np.all(np.isfinite(weights)) or weights.sum() <= 0:
        raise WorkloadError(f"model weights must be >= 0 and not all 0, got {models!r}", field="models")
    return names, weights / weights.sum()


def _sample_durations(fit: dict, gpus: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    probs = np.asarray(fit["duration"]["probs"], dtype=np.float64)
    out = np.empty(len(gpus), dtype=np.float64)
    u = rng.random(len(gpus))
    assigned = np.zeros(len(gpus), dtype=bool)
    for cls in fit["duration"]["classes"]:
        sel = (gpus >= cls["min_gpus"]) & (gpus <= cls["max_gpus"]) & ~assigned
        logq = np.log(np.asarray(cls["quantiles_s"], dtype=np.float64))
        out[sel] = np.exp(np.interp(u[sel], probs, logq))
        assigned |= sel
    if not assigned.all():  # sizes above every class: use the largest class
        logq = np.log(np.asarray(fit["duration"]["classes"][-1]["quantiles_s"], dtype=np.float64))
        out[~assigned] = np.exp(np.interp(u[~assigned], probs, logq))
    return np.round(out)  # whole seconds, like the trace; never below the trace minimum (>= 1 s)


def _arrivals(n: int, rate_per_s: float, arrival: str, profile, rng: np.random.Generator) -> np.ndarray:
    """n arrival times of a Poisson process (homogeneous, or with a piecewise-constant hourly diurnal rate)."""
    # cumulative intensity (expected arrivals so far) of each event: sums of unit exponentials
    s = np.cumsum(rng.exponential(1.0, size=n))
    if arrival == "poisson":
        return s / rate_per_s
    prof = np.asarray(profile, dtype=np.float64)
    prof = prof / prof.mean()
    per_hour = rate_per_s * 3600.0 * prof
    knots = np.concatenate([[0.0], np.cumsum(per_hour)])  # expected arrivals by each hour of the day
    per_day = knots[-1]
    days = np.floor(s / per_day)
    within = np.interp(s - days * per_day, knots, np.arange(len(prof) + 1) * 3600.0)
    return days * 86400.0 + within


def generate_synthetic(
    jobs: int = 1000,
    *,
    seed: int = 0,
    rate: float | None = None,
    load: float | None = None,
    gpus: int | None = None,
    arrival: str = "poisson",
    fit: str | Path = "philly",
    models=None,
    max_gpus: int | None = None,
    name: str | None = None,
) -> Workload:
    """A synthetic workload of ``jobs`` jobs.

    Arrival rate: ``rate`` jobs/hour, or ``load`` + ``gpus`` (offered load over that many GPUs, hit exactly by
    rescaling the arrival times), or the fit's mean rate. ``arrival="diurnal"`` modulates the rate by the fit's
    24-hour profile (t = 0 is midnight). ``models`` (``"resnet50+bert@2"``, a list or a mapping of weights) draws a
    catalogue model per job; without it models stay -1 for the engine's seeded rule. ``max_gpus`` caps job sizes by
    redrawing from the size distribution restricted to sizes <= ``max_gpus``.
    """
    jobs = int(jobs)
    if jobs < 1:
        raise WorkloadError(f"jobs must be >= 1, got {jobs}", field="jobs")
    if arrival not in ARRIVALS:
        raise WorkloadError(
            f"unknown arrival process {arrival!r}; valid: {', '.join(ARRIVALS)}", field="arrival"
        )
    if rate is not None and load is not None:
        raise WorkloadError("give either rate or load+gpus, not both", field="rate")
    if (load is None) != (gpus is None):
        raise WorkloadError("load and gpus go together (offered load over that many GPUs)", field="load")
    doc = load_fit(fit)
    r_size, r_dur, r_arr, r_model = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))

    sizes = np.asarray(doc["gpu_sizes"]["sizes"], dtype=np.int64)
    probs = np.asarray(doc["gpu_sizes"]["probs"], dtype=np.float64)
    if max_gpus is not None:
        ok = sizes <= int(max_gpus)
        if not ok.any():
            raise WorkloadError(f"no job size of the fit fits in max_gpus={max_gpus}", field="max_gpus")
        sizes, probs = sizes[ok], probs[ok]
    num_gpus = r_size.choice(sizes, size=jobs, p=probs / probs.sum())
    duration = _sample_durations(doc, num_gpus, r_dur)

    if load is not None:
        # rate that gives the target load in expectation; the exact value is set by rescaling below
        work = float(np.sum(duration * num_gpus))
        rate_per_s = max(jobs - 1, 1) * float(load) * int(gpus) / work
    else:
        per_hour = float(rate) if rate is not None else float(doc["arrivals"]["rate_per_hour"])
        if not np.isfinite(per_hour) or per_hour <= 0:
            raise WorkloadError(f"rate must be > 0 jobs/hour, got {rate}", field="rate")
        rate_per_s = per_hour / 3600.0
    submit = _arrivals(jobs, rate_per_s, arrival, doc["arrivals"].get("diurnal_profile", [1.0]), r_arr)

    model = None
    model_names: tuple[str, ...] = ()
    if models is not None:
        model_names, mix = parse_model_mix(models)
        model = r_model.choice(len(model_names), size=jobs, p=mix).astype(np.int16)

    fit_name = str(fit)
    label = name or f"synthetic-{Path(fit_name).stem.removesuffix('_fit')}-{arrival}"
    wl = Workload.from_columns(
        label,
        submit,
        duration,
        num_gpus,
        model=model,
        model_names=model_names,
        source=f"synthetic(fit={fit_name}, arrival={arrival}, jobs={jobs}, seed={seed})",
        meta={
            "generator": "synthetic",
            "fit": fit_name,
            "seed": int(seed),
            "arrival": arrival,
            "rate_per_hour": rate_per_s * 3600.0,
        },
    )
    if load is not None:
        wl = scale_to_load(wl, float(load), int(gpus))
    return wl
