"""Throughput model of a synchronous data-parallel job on a placement.

compute time c = the slowest assigned GPU's single-GPU iteration time;
communication m = 0 on one GPU, else ring all-reduce 2(n-1)/n · S / B + 2(n-1) · hop latency, where B is the
bottleneck bandwidth and the hop latency the slowest hop the ring actually crosses:

- on one server: the intra-server link (NVLink / PCIe);
- across servers: every used server's intra-server link *and* NIC (a GPU reaches the wire through both), so B is the
  slowest of them and the latency the largest; each NIC is shared by the multi-server jobs sending through it;
- across racks also each crossed rack uplink (shared by the jobs crossing it) and the spine latency.

Sharing rule (NICs and uplinks alike): **proportional to offered traffic**. A job offers
``traffic = 2(n-1)/n · S / t_alone`` bytes/s, where ``t_alone`` is its iteration time on the placement with the
network to itself; on a link of bandwidth L used by jobs with traffic w_k, job j gets ``L · w_j / Σ_k w_k`` (two equal
jobs get half each; a light job leaves most of the link to a heavy one). Only jobs making progress count: a job
waiting out its restart delay, or on one server, holds no share.
A server whose intra-server link is host-staged (``shared_by_gpus`` in the catalogue, e.g. the Azure ND40rs_v2 VM)
gives a job with k GPUs on it bandwidth / k there; a catalogue server type's host overhead adds to c.
iteration time t = (c^γ + m^γ)^(1/γ) (Pollux's overlap model), times the co-location slowdown of jobs sharing a server,
divided by the throughput fraction left when jobs share one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gpusched_envs.sim.topology import Cluster


class IterationTime(NamedTuple):
    """Seconds per iteration and its parts."""

    compute: float
    communication: float
    total: float  # after overlap, interference and GPU sharing
    overlapped: float = float("nan")  # compute and communication overlapped, before interference and sharing

    @property
    def communication_fraction(self) -> float:
        """Share of the (interference-free) iteration that communication adds over pure compute; 0 on one GPU."""
        base = (
            self.total if self.overlapped != self.overlapped else self.overlapped
        )  # nan: no separate figure
        return 0.0 if base <= 0 else max(0.0, 1.0 - self.compute / base)


def all_reduce_time(num_gpus: int, gradient_bytes: float, bandwidth: float, hop_latency: float) -> float:
    """Ring all-reduce time: 2(n-1)/n · S / B + 2(n-1) · latency (0 on one GPU)."""
    if num_gpus <= 1:
        return 0.0
    steps = 2 * (num_gpus - 1)
    return steps / num_gpus * gradient_bytes / bandwidth + steps * hop_latency


def overlap(compute: float, communication: float, gamma: float) -> float:
    """(c^γ + m^γ)^(1/γ): γ = 1 adds the two, γ → ∞ overlaps them fully."""
    if communication <= 0.0:
        return compute
    return (compute**gamma + communication**gamma) ** (1.0 / gamma)


@dataclass(frozen=True, slots=True)
class PlacementShape:
    """What the throughput model needs to know of a placement, computed once when a job starts."""

    num_gpus: int
    compute: float  # slowest GPU's iteration time, s
    servers: tuple[int, ...]  # distinct servers used, ascending
    racks: np.ndarray  # (r,) distinct racks used
    base_bandwidth: float  # bottleneck bandwidth with the network to itself, bytes/s
    hop_latency: float  # s, the slowest hop crossed
    server_ids: np.ndarray | None = None  # (s,) the servers as an array (NIC indexing); None for one GPU
    traffic: float = 0.0  # bytes/s offered to the network alone on this placement (0 on one server)

    @property
    def crosses_racks(self) -> bool:
        return len(self.racks) > 1

    @property
    def crosses_servers(self) -> bool:
        return len(self.servers) > 1


def placement_shape(cluster: Cluster, model: int, gpus: np.ndarray) -> PlacementShape:
    gpus = np.asarray(gpus)
    if len(gpus) == 1:  # the common case, kept cheap
        g = int(gpus[0])
        s = int(cluster.gpu_server[g])
        compute = float(cluster.catalog.iteration_time[model, cluster.gpu_type[g]])
        if cluster.server_compute_overhead is not None:
            compute += float(cluster.server_compute_overhead[s, model])
        racks = cluster.server_rack[s : s + 1]
        return PlacementShape(
            1,
            compute,
            (s,),
            racks,
            float(cluster.server_intra_bandwidth[s]),
            float(cluster.server_intra_latency[s]),
        )
    compute = float(cluster.compute_time(model, gpus).max())
    servers = tuple(sorted(set(cluster.gpu_server[gpus].tolist())))
    idx = np.array(servers, dtype=np.int64)
    racks = np.unique(cluster.server_rack[idx])
    intra = cluster.server_intra_bandwidth[idx]
    if cluster.server_intra_shared is not None and cluster.server_intra_shared[idx].any():
        # a host-staged intra-server path is shared by the job's k GPUs on that server: bandwidth / k each
        k = np.bincount(cluster.gpu_server[gpus], minlength=cluster.num_servers)[idx]
        intra = np.where(cluster.server_intra_shared[idx], intra / k, intra)
    if len(servers) == 1:
        s = servers[0]
        bandwidth, latency = intra[0], cluster.server_intra_latency[s]
        return PlacementShape(len(gpus), compute, servers, racks, float(bandwidth), float(latency), idx)
    # across servers a ring step leaves a GPU through its server's intra-server link and NIC: the slowest of all
    # those links bounds the bandwidth, and the largest of their latencies is the hop latency
    bandwidth = min(cluster.server_nic_bandwidth[idx].min(), intra.min())
    latency = max(cluster.server_nic_latency[idx].max(), cluster.server_intra_latency[idx].max())
    if len(racks) > 1:
        bandwidth = min(bandwidth, cluster.rack_uplink_bandwidth[racks].min())
        latency = max(latency, cluster.spine_latency)
    bandwidth, latency = float(bandwidth), float(latency)
    gradient = float(cluster.catalog.gradient_bytes[model])
    n = len(gpus)
    alone = overlap(
        compute, all_reduce_time(n, gradient, bandwidth, latency), cluster.catalog.overlap_gamma[model]
    )
    traffic = 2 * (n - 1) / n * gradient / alone
    return PlacementShape(n, compute, servers, racks, bandwidth, latency, idx, traffic)


def communication_time(
    cluster: Cluster,
    model: int,
    shape: PlacementShape,
    uplink_jobs: np.ndarray | None = None,
    *,
    nic_load: np.ndarray | None = None,
    uplink_load: np.ndarray | None = None,
) -> float:
    """All-reduce seconds for a placement.

    Link sharing, either as traffic loads (what the engine passes): ``nic_load[s]`` / ``uplink_load[r]`` = bytes/s
    offered to server s's NIC / rack r's uplink by the jobs making progress through it (this one included); or, for
    what-if questions, ``uplink_jobs[r]`` = jobs crossing rack r's uplink, this one included, each taken to offer as
    much traffic as this one. ``None``: the job has the network to itself.
    """
    if shape.num_gpus <= 1:
        return 0.0
    bandwidth = shape.base_bandwidth
    if shape.crosses_servers:
        w = shape.traffic
        if nic_load is not None:
            load = np.maximum(nic_load[shape.server_ids], w)
            bandwidth = min(
                bandwidth, float((cluster.server_nic_bandwidth[shape.server_ids] * (w / load)).min())
            )
        if shape.crosses_racks:
            if uplink_load is not None:
                load = np.maximum(uplink_load[shape.racks], w)
                share = w / load
            elif uplink_jobs is not None:
                share = 1.0 / np.maximum(uplink_jobs[shape.racks], 1)
            else:
                share = 1.0
            bandwidth = min(bandwidth, float((cluster.rack_uplink_bandwidth[shape.racks] * share).min()))
    return all_reduce_time(
        shape.num_gpus, cluster.catalog.gradient_bytes[model], bandwidth, shape.hop_latency
    )


def iteration_time_of_shape(
    cluster: Cluster,
    model: int,
    shape: PlacementShape,
    uplink_jobs: np.ndarray | None = None,
    slowdown: float = 1.0,
    share_fraction: float = 1.0,
    *,
    nic_load: np.ndarray | None = None,
    uplink_load: np.ndarray | None = None,
) -> IterationTime:
    m = float(
        communication_time(cluster, model, shape, uplink_jobs, nic_load=nic_load, uplink_load=uplink_load)
    )
    base = float(overlap(shape.compute, m, cluster.catalog.overlap_gamma[model]))
    return IterationTime(shape.compute, m, base * slowdown / share_fraction, base)


def predict_iteration_time(
    cluster: Cluster,
    model: str | int,
    gpus,
    *,
    other_jobs_crossing_uplinks: int = 0,
    other_jobs_on_nics: int = 0,
    colocated_models: tuple[str, ...] = (),
    gpu_sharing_model: str | None = None,
) -> IterationTime:
    """What-if: seconds per iteration of ``model`` data-parallel on the GPU ids ``gpus`` of ``cluster``.

    ``other_jobs_crossing_uplinks`` / ``other_jobs_on_nics`` add that many other jobs, each offering as much traffic
    as this one, on every rack uplink / server NIC this placement crosses (a job on one server uses no NIC);
    ``colocated_models`` are models of other jobs on the same servers (co-location interference, worst pair);
    ``gpu_sharing_model`` is the model of a job sharing the same GPU(s) (fractional GPUs).

    >>> from gpusched_envs.sim.topology import load_cluster
    >>> c = load_cluster("tiny")
    >>> predict_iteration_time(c, c.catalog.model_names[0], [0]).communication
    0.0
    """
    catalog = cluster.catalog
    m = catalog.model_index(model) if isinstance(model, str) else int(model)
    gpus = np.asarray(gpus, dtype=np.int64)
    if gpus.ndim != 1 or len(gpus) == 0:
        raise ValueError("gpus must be a non-empty list of GPU ids")
    if gpus.min() < 0 or gpus.max() >= cluster.num_gpus:
        raise ValueError(f"GPU ids must be in 0..{cluster.num_gpus - 1}, got {gpus.tolist()}")
    if len(np.unique(gpus)) != len(gpus):
        raise ValueError(f"GPU ids must be distinct, got {gpus.tolist()}")
    shape = placement_shape(cluster, m, gpus)
    uplink = np.full(cluster.num_racks, (1 + other_jobs_crossing_uplinks) * shape.traffic)
    nics = np.full(cluster.num_servers, (1 + other_jobs_on_nics) * shape.traffic)
    slowdown = max(
        (catalog.colocation_slowdown[m, catalog.model_index(o)] for o in colocated_models), default=1.0
    )
    share = (
        1.0
        if gpu_sharing_model is None
        else catalog.space_sharing_by_type[
            cluster.gpu_type[gpus[0]], m, catalog.model_index(gpu_sharing_model)
        ]
    )
    return iteration_time_of_shape(
        cluster, m, shape, None, slowdown, share, nic_load=nics, uplink_load=uplink
    )


def ideal_iteration_time(
    cluster: Cluster, model: int, num_gpus: int, allowed_types: np.ndarray | None = None
) -> float:
    """Best case on this cluster: the fastest (allowed) GPU type with the fastest placement's network, no congestion
    or interference. The network part is the better of one server (fastest intra-server link among servers big
    enough; a host-staged link divided by the job's GPUs) and several servers (fastest min(NIC, intra-server link),
    smallest max(NIC, intra) latency), as in :func:`placement_shape`; on catalogue server types the compute is the
    best server's, host overhead included. A job's ideal runtime is work × this, so average JCT ≥ mean ideal runtime
    holds."""
    catalog = cluster.catalog
    types = np.unique(cluster.gpu_type) if allowed_types is None else allowed_types
    compute = float(catalog.iteration_time[model, types].min())
    if (
        cluster.server_compute_overhead is not None
    ):  # server types with host overhead: the best server instead
        ok = np.isin(cluster.server_gpu_type, types)
        compute = float(
            (
                catalog.iteration_time[model, cluster.server_gpu_type[ok]]
                + cluster.server_compute_overhead[ok, model]
            ).min()
        )
    if num_gpus <= 1:
        return compute
    gradient = catalog.gradient_bytes[model]
    options = []
    fits_one = cluster.server_num_gpus >= num_gpus
    intra = cluster.server_intra_bandwidth
    if cluster.server_intra_shared is not None:  # a shared (host-staged) path gives each of n GPUs 1/n of it
        intra = np.where(cluster.server_intra_shared, intra / num_gpus, intra)
    if fits_one.any():
        bandwidth = intra[fits_one].max()
        latency = cluster.server_intra_latency[fits_one].min()
        options.append(all_reduce_time(num_gpus, gradient, bandwidth, latency))
    # several servers (always a valid bound, even where no placement of this size exists)
    bandwidth = np.minimum(cluster.server_nic_bandwidth, cluster.server_intra_bandwidth).max()
    latency = np.maximum(cluster.server_nic_latency, cluster.server_intra_latency).min()
    options.append(all_reduce_time(num_gpus, gradient, bandwidth, latency))
    return overlap(compute, min(options), catalog.overlap_gamma[model])
