"""GPU-type, link and DL-model catalogue: the measured numbers the throughput model runs on.

Every number lives in ``gpusched_envs/data/catalog.yaml`` with its source (see ``data/CATALOG_PROVENANCE.md``);
this module only loads and indexes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

GIGA = 1e9


class CatalogError(ValueError):
    """A catalogue file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class LinkSpec:
    name: str
    bandwidth: float  # bytes/s usable by an all-reduce
    latency: float  # seconds per hop
    # True: the GPUs of a job on one server share this link (a host-staged path: each ring step of k GPUs on the
    # server moves k chunks through it), so a job with k GPUs there gets bandwidth / k. False: per-GPU links (NVLink,
    # a PCIe switch with peer-to-peer), the bandwidth is each GPU's.
    shared_by_gpus: bool = False


@dataclass(frozen=True)
class ServerType:
    """A measured server / VM type whose host adds work beyond its GPU type's single-GPU time (catalogue
    ``server_types``): a cluster server with ``server_type: <name>`` takes these defaults."""

    name: str
    gpu_type: str
    gpus: int
    intra_link: str
    nic: str
    host_s_per_sample: (
        float  # seconds of host-side work per training sample, added to the GPU's iteration time
    )
    measured_models: tuple[
        str, ...
    ]  # models whose single-GPU time was measured on this type (overhead included)
    source: str = ""

    def compute_overhead(self, catalog: Catalog) -> np.ndarray:
        """(M,) seconds per iteration added to each model's single-GPU time on this server type."""
        extra = self.host_s_per_sample * catalog.batch_size
        return np.where(np.isin(np.array(catalog.model_names), self.measured_models), 0.0, extra)


@dataclass(frozen=True)
class Catalog:
    """Indexed catalogue. Arrays are indexed [model, gpu_type]."""

    gpu_types: tuple[str, ...]
    model_names: tuple[str, ...]
    iteration_time: np.ndarray  # (M, T) float64 seconds per iteration on one GPU of each type
    gradient_bytes: np.ndarray  # (M,) float64 bytes exchanged by one all-reduce
    overlap_gamma: np.ndarray  # (M,) float64 >= 1; 1 = no overlap (c + m), large = full overlap (max)
    links: dict[str, LinkSpec]
    reference_gpu: str
    colocation_slowdown: (
        np.ndarray
    )  # (M, M) float64 >= 1: factor on model i's iteration time when sharing a server with j
    space_sharing: np.ndarray  # (M, M) float64 in (0, 1]: i's throughput fraction when sharing one GPU with j
    model_weights: np.ndarray  # (M,) float64, mix used when a trace gives no model (sums to 1)
    gpu_memory_gb: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (T,)
    # (T, M, M): the same per GPU type; types without measurements use the untyped (reference-GPU) matrix
    space_sharing_by_type: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)))
    source: str = ""
    batch_size: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (M,) per-GPU batch of the times
    server_types: dict[str, ServerType] = field(default_factory=dict)

    def model_index(self, name: str) -> int:
        try:
            return self.model_names.index(name)
        except ValueError:
            raise KeyError(f"unknown model {name!r}; known: {', '.join(self.model_names)}") from None

    def gpu_index(self, name: str) -> int:
        try:
            return self.gpu_types.index(name)
        except ValueError:
            raise KeyError(f"unknown GPU type {name!r}; known: {', '.join(self.gpu_types)}") from None

    def link(self, name: str) -> LinkSpec:
        try:
            return self.links[name]
        except KeyError:
            raise KeyError(f"unknown link {name!r}; known: {', '.join(self.links)}") from None

    def assign_models(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The seeded rule for traces that give only a duration: models drawn i.i.d. from the catalogue mix."""
        return rng.choice(len(self.model_names), size=n, p=self.model_weights).astype(np.int16)


def _require(mapping: dict, key: str, where: str):
    if not isinstance(mapping, dict) or key not in mapping:
        raise CatalogError(f"{where}: missing field {key!r}")
    return mapping[key]


def _positive(value, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise CatalogError(f"{where}: {value!r} is not a number") from None
    if not np.isfinite(v) or v <= 0:
        raise CatalogError(f"{where}: must be a positive number, got {value!r}")
    return v


def parse_catalog(doc: dict, where: str = "catalog") -> Catalog:
    """Build a :class:`Catalog` from the YAML document's dict (schema in ``data/CATALOG_PROVENANCE.md``)."""
    gpu_doc = _require(doc, "gpu_types", where)
    gpu_types = tuple(gpu_doc)
    memory = np.array([float(gpu_doc[g].get("memory_gb", 0) or 0) for g in gpu_types])
    links = {}
    for name, spec in _require(doc, "links", where).items():
        w = f"{where}: links.{name}"
        links[name] = LinkSpec(
            name=name,
            bandwidth=_positive(_require(spec, "bandwidth_gbytes_per_s", w), f"{w}.bandwidth_gbytes_per_s")
            * GIGA,
            latency=float(_require(spec, "latency_s", w)),
            shared_by_gpus=bool(spec.get("shared_by_gpus", False)),
        )
    models_doc = _require(doc, "models", where)
    model_names = tuple(models_doc)
    n_models, n_types = len(model_names), len(gpu_types)
    iteration_time = np.full((n_models, n_types), np.nan)
    gradient_bytes = np.zeros(n_models)
    gamma = np.ones(n_models)
    weights = np.zeros(n_models)
    batch = np.ones(n_models)
    for i, m in enumerate(model_names):
        w = f"{where}: models.{m}"
        spec = models_doc[m]
        times = _require(spec, "iteration_time_s", w)
        for g, t in times.items():
            if g not in gpu_types:
                raise CatalogError(f"{w}.iteration_time_s: unknown GPU type {g!r}")
            iteration_time[i, gpu_types.index(g)] = _positive(t, f"{w}.iteration_time_s.{g}")
        if np.isnan(iteration_time[i]).any():
            missing = [g for j, g in enumerate(gpu_types) if np.isnan(iteration_time[i, j])]
            raise CatalogError(f"{w}.iteration_time_s: no time for GPU type(s) {', '.join(missing)}")
        gradient_bytes[i] = _positive(_require(spec, "gradient_bytes", w), f"{w}.gradient_bytes")
        gamma[i] = _positive(_require(spec, "overlap_gamma", w), f"{w}.overlap_gamma")
        if gamma[i] < 1:
            raise CatalogError(f"{w}.overlap_gamma: must be >= 1, got {gamma[i]}")
        weights[i] = float(spec.get("mix_weight", 1.0))
        batch[i] = _positive(spec.get("batch_size", 1), f"{w}.batch_size")
    if weights.sum() <= 0:
        raise CatalogError(f"{where}: models: mix_weight values sum to zero")
    weights = weights / weights.sum()

    inter = doc.get("interference", {}) or {}
    default_slow = float(inter.get("default_server_slowdown", 1.0))
    colocation = np.full((n_models, n_models), default_slow)
    for entry in inter.get("pairs", []) or []:
        a, b = model_names.index(entry["model"]), model_names.index(entry["other"])
        colocation[a, b] = float(entry["slowdown"])
    default_share = float(inter.get("default_gpu_share_fraction", 0.5))
    by_type_default = inter.get("default_gpu_share_fraction_by_type", {}) or {}
    share = np.full((n_models, n_models), default_share)
    typed: dict[int, np.ndarray] = {}
    for entry in inter.get("gpu_sharing", []) or []:
        a, b = model_names.index(entry["model"]), model_names.index(entry["other"])
        gpu = entry.get("gpu_type")
        if gpu is None:
            share[a, b] = float(entry["fraction"])
            continue
        if gpu not in gpu_types:
            raise CatalogError(f"{where}: interference.gpu_sharing: unknown GPU type {gpu!r}")
        t = gpu_types.index(gpu)
        if t not in typed:
            typed[t] = np.full((n_models, n_models), float(by_type_default.get(gpu, default_share)))
        typed[t][a, b] = float(entry["fraction"])
    share_by_type = np.stack([typed.get(t, share) for t in range(n_types)]) if n_types else share[None]
    if (colocation < 1).any():
        raise CatalogError(
            f"{where}: interference: co-location slowdowns must be >= 1 (a factor on iteration time)"
        )
    if ((share <= 0) | (share > 1)).any() or ((share_by_type <= 0) | (share_by_type > 1)).any():
        raise CatalogError(f"{where}: interference: GPU-sharing throughput fractions must be in (0, 1]")
    server_types = {}
    for name, spec in (doc.get("server_types", {}) or {}).items():
        w = f"{where}: server_types.{name}"
        gpu = _require(spec, "gpu_type", w)
        if gpu not in gpu_types:
            raise CatalogError(f"{w}.gpu_type: unknown GPU type {gpu!r}")
        for key in ("intra_link", "nic"):
            if _require(spec, key, w) not in links:
                raise CatalogError(f"{w}.{key}: unknown link {spec[key]!r}")
        measured = tuple(spec.get("measured_models", []) or [])
        unknown = [m for m in measured if m not in model_names]
        if unknown:
            raise CatalogError(f"{w}.measured_models: unknown model(s) {', '.join(map(str, unknown))}")
        host = float(spec.get("host_s_per_sample", 0.0))
        if not np.isfinite(host) or host < 0:
            raise CatalogError(f"{w}.host_s_per_sample: must be a number >= 0, got {host!r}")
        server_types[name] = ServerType(
            name=name,
            gpu_type=gpu,
            gpus=int(_positive(_require(spec, "gpus", w), f"{w}.gpus")),
            intra_link=spec["intra_link"],
            nic=spec["nic"],
            host_s_per_sample=host,
            measured_models=measured,
            source=str(spec.get("source", "")),
        )
    reference = _require(doc, "reference_gpu", where)
    if reference not in gpu_types:
        raise CatalogError(f"{where}: reference_gpu {reference!r} is not among gpu_types")
    return Catalog(
        gpu_types=gpu_types,
        model_names=model_names,
        iteration_time=iteration_time,
        gradient_bytes=gradient_bytes,
        overlap_gamma=gamma,
        links=links,
        reference_gpu=reference,
        colocation_slowdown=colocation,
        space_sharing=share,
        space_sharing_by_type=share_by_type,
        model_weights=weights,
        gpu_memory_gb=memory,
        source=where,
        batch_size=batch,
        server_types=server_types,
    )


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load the bundled catalogue (default) or a user's YAML file in the same schema."""
    if path is None:
        return default_catalog()
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read catalogue: {exc}") from None
    from gpusched_envs.safety import load_yaml  # limits on alias expansion (YAML bombs)

    return parse_catalog(load_yaml(text, str(path), CatalogError), str(path))


@lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    text = resources.files("gpusched_envs").joinpath("data/catalog.yaml").read_text()
    return parse_catalog(yaml.safe_load(text), "gpusched_envs/data/catalog.yaml")
