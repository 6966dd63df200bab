"""Placement rules: which free GPUs a job gets. Each takes (sim, job) and returns GPU ids or None (cannot place now).

- ``first-fit``: the lowest-numbered free GPUs.
- ``consolidate`` (best-fit consolidated): a job that fits one server goes to the fitting server with the fewest free
  GPUs; a larger job takes wholly free servers, in one rack if possible (the fitting rack with the fewest such
  servers), else across racks. It waits rather than spread a small job over servers.
- ``closest`` (topology-aware): one server if possible (best fit), else one rack (the fitting rack with the fewest
  free GPUs, fullest-free servers first), else the fewest racks: it always places when enough GPUs are free.
- ``pack`` (Gandiva-style): like ``closest`` but prefers servers already running jobs of the same size (affinity),
  and packs fractional-GPU jobs onto the most-used GPU that still has room.
- ``spread``: the most spread placement: free GPUs dealt round-robin over racks, then over the servers of a rack
  (the opposite of ``consolidate``; a candidate of the multi-agent env).
- ``random``: uniformly random free GPUs (seeded by the simulator).

:func:`closest_in_rack` is ``closest`` restricted to one rack (the multi-agent env offers one such candidate per rack).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpusched_envs.sim import place_kernels as _pk
from gpusched_envs.sim.engine import FULL_GPU

Placer = Callable[..., "np.ndarray | None"]


def _fractional(sim, job: int, prefer_used: bool, within: np.ndarray | None = None) -> np.ndarray | None:
    """One GPU for a fractional job: best fit on the remaining share."""
    free = sim.free_mask(job) if within is None else sim.free_mask(job) & within
    if not free.any():
        return None
    idx = np.flatnonzero(free)
    left = sim.gpu_free_milli[idx]
    order = np.lexsort((idx, left)) if prefer_used else np.arange(len(idx))
    return idx[order[:1]]


def _server_free_counts(sim, free: np.ndarray) -> np.ndarray:
    """(S,) GPUs of each server in the ``free`` mask."""
    return np.bincount(sim.cluster.gpu_server[free], minlength=sim.cluster.num_servers)


def _take_from_servers(sim, free: np.ndarray, servers, n: int) -> np.ndarray:
    """The first n free GPUs of the listed servers, in the listed order."""
    c = sim.cluster
    out: list[np.ndarray] = []
    need = n
    for s in servers:
        lo = c.server_first_gpu[s]
        hi = lo + c.server_num_gpus[s]
        got = lo + np.flatnonzero(free[lo:hi])[:need]
        out.append(got)
        need -= len(got)
        if need == 0:
            break
    return np.concatenate(out)


def _best_fit_server(counts: np.ndarray, n: int, prefer: np.ndarray | None = None) -> int:
    fits = np.flatnonzero(counts >= n)
    if not len(fits):
        return -1
    if prefer is not None and prefer[fits].any():
        fits = fits[prefer[fits]]
    return int(fits[np.argmin(counts[fits])])  # argmin keeps the lowest index on ties


def first_fit(sim, job: int) -> np.ndarray | None:
    if sim.job_milli[job] < FULL_GPU:
        return _fractional(sim, job, prefer_used=False)
    idx = np.flatnonzero(sim.free_mask(job))
    n = int(sim.job_gpus_n[job])
    return idx[:n] if len(idx) >= n else None


def random_placement(sim, job: int) -> np.ndarray | None:
    idx = np.flatnonzero(sim.free_mask(job))
    n = 1 if sim.job_milli[job] < FULL_GPU else int(sim.job_gpus_n[job])
    if len(idx) < n:
        return None
    return np.sort(sim.rng.choice(idx, size=n, replace=False))


def _multi_rack(sim, free: np.ndarray, counts: np.ndarray, n: int, whole_servers: bool) -> np.ndarray | None:
    """Spread over servers: one rack if some rack can hold the job (best-fit rack), else the fewest racks."""
    c = sim.cluster
    usable = counts
    if whole_servers:
        usable = np.where(counts == c.server_num_gpus, counts, 0)
    rack_free = np.bincount(c.server_rack, weights=usable, minlength=c.num_racks)
    if rack_free.sum() < n:
        return None
    fitting = np.flatnonzero(rack_free >= n)
    if len(fitting):
        racks = [int(fitting[np.argmin(rack_free[fitting])])]
    else:
        racks = list(np.argsort(-rack_free, kind="stable"))
    servers: list[int] = []
    for r in racks:
        in_rack = np.flatnonzero((c.server_rack == r) & (usable > 0))
        servers.extend(in_rack[np.argsort(-usable[in_rack], kind="stable")])
    mask = free if not whole_servers else free & (usable[c.gpu_server] > 0)
    gpus = _take_from_servers(sim, mask, servers, n)
    return np.sort(gpus) if len(gpus) == n else None


def _largest_usable_server(sim, job: int) -> int:
    """GPUs of the largest server the job may use (its pool / GPU type): the size up to which it can be consolidated."""
    k = sim.job_allowed[job]
    if k < 0:
        return sim.cluster.max_server_gpus
    largest = getattr(sim, "allowed_largest_server", None)
    if largest is not None:
        return largest[k]
    return int(np.bincount(sim.cluster.gpu_server[sim.allowed_masks[k]]).max(initial=0))


_ALL = np.zeros(0, dtype=bool)  # "no mask" for the compiled loops


def _server_mask(sim, job: int, within: np.ndarray | None) -> np.ndarray | None:
    """(S,) the servers the job may use when its allowed GPUs (and ``within``) are whole servers; ``_ALL`` when
    every GPU is allowed; None when some server is only partly allowed."""
    k = sim.job_allowed[job]
    ok = None
    if k >= 0:
        masks = getattr(sim, "allowed_server_masks", None)
        ok = masks[k] if masks is not None else _whole_servers(sim.cluster, sim.allowed_masks[k])
        if ok is None:
            return None
    if within is not None:
        known = _RACK_INSIDE.get(id(within))
        inside = known[1] if known is not None and known[0] is within else _whole_servers(sim.cluster, within)
        if inside is None:
            return None
        ok = inside if ok is None else ok & inside
    return _ALL if ok is None else ok


_RACK_MASKS: dict[int, tuple] = {}  # id(cluster) -> (the cluster, its racks' GPU masks)
_RACK_INSIDE: dict[int, tuple] = {}  # id(a rack's GPU mask) -> (the mask, its servers: _whole_servers)


def _rack_mask(cluster, rack: int) -> np.ndarray:
    """(G,) the GPUs of ``rack`` (``cluster.gpu_rack == rack``), made once per cluster with the servers wholly in
    it, which :func:`_server_mask` then looks up instead of counting again. At most 16 clusters are kept."""
    entry = _RACK_MASKS.get(id(cluster))
    if entry is None or entry[0] is not cluster:
        if len(_RACK_MASKS) >= 16:
            for mask in _RACK_MASKS.pop(next(iter(_RACK_MASKS)))[1]:
                _RACK_INSIDE.pop(id(mask), None)
        masks = [cluster.gpu_rack == r for r in range(cluster.num_racks)]
        for mask in masks:
            _RACK_INSIDE[id(mask)] = (mask, _whole_servers(cluster, mask))
        entry = _RACK_MASKS[id(cluster)] = (cluster, masks)
    return entry[1][rack]


def _whole_servers(cluster, mask: np.ndarray) -> np.ndarray | None:
    """(S,) bool of the servers wholly in the GPU ``mask``, or None when some server is partly in it."""
    per = np.add.reduceat(mask.astype(np.int64), cluster.server_first_gpu)
    whole = per == cluster.server_num_gpus
    return whole if np.array_equal(whole, per > 0) else None


def _compiled_whole(sim, job: int, n: int, spread: bool, affinity: bool, within) -> np.ndarray | None:
    """:func:`_topology_aware` for a whole-GPU job, through the compiled loops (the same choices)."""
    c = sim.cluster
    try_server = spread or n <= _largest_usable_server(sim, job)
    rows = c.server_rows_i64
    ok = _server_mask(sim, job, within)
    if ok is not None and not affinity:
        gpus = _pk.by_servers(
            sim.gpu_free_milli, sim.server_free, ok, rows, c.num_racks, n, spread, try_server, _ALL
        )
        return gpus if len(gpus) else None
    k = sim.job_allowed[job]
    allowed = _ALL if k < 0 else sim.allowed_masks[k]
    inside = _ALL if within is None else within
    free = np.empty(c.num_gpus, dtype=bool)
    counts = np.empty(c.num_servers, dtype=np.int64)
    _pk.free_counts(sim.gpu_free_milli, allowed, inside, c.gpu_server_i64, c.num_servers, free, counts)
    prefer = _ALL
    if affinity and try_server:
        prefer = np.zeros(c.num_servers, dtype=bool)
        for s in np.flatnonzero(counts >= n).tolist():  # same size = same GPU count, whole GPUs
            prefer[s] = any(
                sim.job_gpus_n[o] == n and sim.job_milli[o] >= FULL_GPU for o in sim.server_jobs[s]
            )
    gpus = _pk.whole_gpus(
        free,
        sim.gpu_free_milli,
        counts,
        n,
        spread,
        try_server,
        prefer,
        rows[0],
        rows[1],
        rows[2],
        c.num_racks,
    )
    return gpus if len(gpus) else None


def _topology_aware(
    sim, job: int, *, spread: bool, affinity: bool, within: np.ndarray | None = None
) -> np.ndarray | None:
    """Best-fit server when one holds the job; else several servers (whole free ones unless ``spread``), one rack
    if possible. ``affinity`` prefers servers already running jobs of the same size (Gandiva); ``within`` (a GPU
    mask) restricts the choice."""
    if sim.job_milli[job] < FULL_GPU:
        return _fractional(sim, job, prefer_used=True, within=within)
    n = int(sim.job_gpus_n[job])
    if n >= 1:
        return _compiled_whole(sim, job, n, spread, affinity, within)
    return _whole_reference(sim, job, spread=spread, affinity=affinity, within=within)


def _whole_reference(
    sim, job: int, *, spread: bool, affinity: bool, within: np.ndarray | None = None
) -> np.ndarray | None:
    """:func:`_topology_aware` for a whole-GPU job in numpy: the definition the compiled loops follow (kept for
    the tests that compare the two)."""
    n = int(sim.job_gpus_n[job])
    free = sim.free_mask(job) if within is None else sim.free_mask(job) & within
    counts = _server_free_counts(sim, free)
    if spread or n <= _largest_usable_server(sim, job):
        prefer = None
        if affinity:
            prefer = np.zeros(sim.cluster.num_servers, dtype=bool)
            for s in np.flatnonzero(
                counts >= n
            ):  # same size = same GPU count, whole GPUs (not fractional jobs)
                prefer[s] = any(
                    sim.job_gpus_n[o] == n and sim.job_milli[o] >= FULL_GPU for o in sim.server_jobs[s]
                )
        s = _best_fit_server(counts, n, prefer=prefer)
        if s >= 0:
            return _take_from_servers(sim, free, [s], n)
        if not spread:
            return None
    return _multi_rack(sim, free, counts, n, whole_servers=not spread)


def consolidate(sim, job: int) -> np.ndarray | None:
    return _topology_aware(sim, job, spread=False, affinity=False)


def closest(sim, job: int) -> np.ndarray | None:
    return _topology_aware(sim, job, spread=True, affinity=False)


def pack(sim, job: int) -> np.ndarray | None:
    return _topology_aware(sim, job, spread=True, affinity=True)


def closest_in_rack(sim, job: int, rack: int) -> np.ndarray | None:
    """``closest`` inside one rack: the best-fit server of the rack, else its fullest-free servers."""
    c = sim.cluster
    if not 0 <= rack < c.num_racks:
        return None
    return _topology_aware(sim, job, spread=True, affinity=False, within=_rack_mask(c, rack))


def spread(sim, job: int) -> np.ndarray | None:
    """The most spread placement: free GPUs dealt round-robin over racks, then over the servers within a rack
    (compiled: :func:`_spread_reference` is its definition)."""
    free = sim.free_mask(job)
    n = 1 if sim.job_milli[job] < FULL_GPU else int(sim.job_gpus_n[job])
    if n < 1:
        return _spread_reference(sim, job)
    c = sim.cluster
    gpus = _pk.spread_gpus(free, c.gpu_server, c.gpu_rack, c.num_servers, c.num_racks, n)
    return gpus if len(gpus) else None


def _spread_reference(sim, job: int) -> np.ndarray | None:
    """:func:`spread` in numpy: the definition the compiled loop follows (kept for the tests that compare the two)."""
    free = sim.free_mask(job)
    n = 1 if sim.job_milli[job] < FULL_GPU else int(sim.job_gpus_n[job])
    idx = np.flatnonzero(free)
    if len(idx) < n:
        return None
    c = sim.cluster
    server = c.gpu_server[idx]
    first = np.r_[True, server[1:] != server[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(idx)), 0))
    slot = np.arange(len(idx)) - start  # rank of each free GPU among the free GPUs of its server
    rack = c.gpu_rack[idx]
    server_rank = np.zeros(
        len(idx), dtype=np.int64
    )  # rank of its server among the rack's servers with free GPUs
    for r in np.unique(rack):
        in_rack = rack == r
        _, server_rank[in_rack] = np.unique(server[in_rack], return_inverse=True)
    order = np.lexsort((rack, server_rank, slot))
    return np.sort(idx[order[:n]])


PLACEMENTS: dict[str, Placer] = {
    "first-fit": first_fit,
    "consolidate": consolidate,
    "closest": closest,
    "pack": pack,
    "spread": spread,
    "random": random_placement,
}


def get_placement(name: str) -> Placer:
    try:
        return PLACEMENTS[name]
    except KeyError:
        raise ValueError(f"unknown placement {name!r}; choose one of: {', '.join(PLACEMENTS)}") from None
