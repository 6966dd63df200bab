"""The DAG workload record (WORL-RTGS): tasks with work, edges with data sizes.

A :class:`DAG` is immutable and validated on construction (indices in range, no duplicate edges, acyclic); every
violation raises one :class:`DAGError` naming the DAG and the offending tasks. The structure (parents/children in
CSR form, topological order, levels) is built along with the validation (:mod:`.structure`); the critical path on
request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import structure as _st


class DAGError(ValueError):
    """A DAG that breaks the model's rules (cycle, index out of range, negative work, ...)."""


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class DAG:
    """One DAG job: ``N`` tasks and ``E`` directed edges ``src -> dst`` (``dst`` needs ``src``'s output).

    ``work[i]`` is task ``i``'s runtime in seconds on the reference GPU (speed 1.0); on a GPU of relative speed ``s``
    it runs ``work[i] / s`` seconds (times ``hetero[i, g % H]`` when ``hetero`` is set, see below).
    ``edge_bytes[e]`` is the data ``src`` sends to ``dst``; the transfer takes ``bytes / bandwidth`` between two GPUs
    and nothing on the same GPU.

    ``affinity`` optionally names, per task, the GPU type the task must run on (``None`` = any type).
    ``hetero`` optionally holds unrelated-machine cost factors (Topcuoglu's heterogeneity ``beta``): task ``i`` on
    GPU ``g`` costs ``work[i] * hetero[i, g % H] / speed[g]``. The factors are i.i.d. per (task, column), so any GPU
    set of size ``<= H`` sees independent factors, as in the HEFT paper's generator.
    """

    work: np.ndarray  # (N,) float64 >= 0, reference GPU-seconds
    edges: np.ndarray  # (E, 2) int64, rows (src, dst), 0 <= src, dst < N
    edge_bytes: np.ndarray  # (E,) float64 >= 0, bytes sent along each edge
    name: str = "dag"
    source: str = ""  # where it came from: file + job, or generator + parameters + seed
    affinity: tuple[str | None, ...] | None = None  # (N,) required GPU type per task, None = any
    task_names: tuple[str, ...] | None = None  # (N,) optional human-readable names
    hetero: np.ndarray | None = None  # (N, H) float64 > 0, unrelated-machine cost factors, or None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        err = self._fail
        work = np.asarray(self.work, dtype=np.float64).reshape(-1)
        edges = np.asarray(self.edges, dtype=np.int64)
        if edges.size == 0:
            edges = np.zeros((0, 2), dtype=np.int64)
        if edges.ndim != 2 or edges.shape[1] != 2:
            err(f"edges must have shape (E, 2), got {edges.shape}")
        eb = np.asarray(self.edge_bytes, dtype=np.float64).reshape(-1)
        n, e = len(work), len(edges)
        if len(eb) != e:
            err(f"edge_bytes has {len(eb)} entries for {e} edges")
        if not np.isfinite(work).all() or (work < 0).any():
            bad = np.flatnonzero(~np.isfinite(work) | (work < 0))[:5]
            err(f"work must be finite and >= 0 (tasks {bad.tolist()})")
        if not np.isfinite(eb).all() or (eb < 0).any():
            bad = np.flatnonzero(~np.isfinite(eb) | (eb < 0))[:5]
            err(f"edge_bytes must be finite and >= 0 (edges {bad.tolist()})")
        edges = np.ascontiguousarray(edges)
        view = edges.view()  # read-only (one compiled version of the kernel), the caller's array untouched
        view.setflags(write=False)
        status, a, b, *structure = _st.dag_structure(n, view)
        if status == _st.OUT_OF_RANGE:
            err(f"edge {a} {edges[a].tolist()} has a task index outside 0..{n - 1}")
        if status == _st.SELF_LOOP:
            err(f"cycle: task {int(edges[a, 0])} depends on itself")
        if status == _st.DUPLICATE:
            err(f"duplicate edge {a} -> {b}")
        if self.affinity is not None:
            aff = tuple(self.affinity)
            if len(aff) != n:
                err(f"affinity has {len(aff)} entries for {n} tasks")
            object.__setattr__(self, "affinity", aff)
        if self.task_names is not None:
            names = tuple(str(s) for s in self.task_names)
            if len(names) != n:
                err(f"task_names has {len(names)} entries for {n} tasks")
            object.__setattr__(self, "task_names", names)
        if self.hetero is not None:
            h = np.asarray(self.hetero, dtype=np.float64)
            if h.ndim != 2 or h.shape[0] != n or h.shape[1] < 1:
                err(f"hetero must have shape (N={n}, H>=1), got {h.shape}")
            if not np.isfinite(h).all() or (h <= 0).any():
                err("hetero factors must be finite and > 0")
            object.__setattr__(self, "hetero", _frozen(h))
        object.__setattr__(self, "work", _frozen(work))
        object.__setattr__(self, "edges", _frozen(edges))
        object.__setattr__(self, "edge_bytes", _frozen(eb))
        object.__setattr__(self, "meta", dict(self.meta))
        in_ptr, by_dst, out_ptr, by_src, order, level = (_frozen(x) for x in structure)
        if status == _st.CYCLE:
            left = np.flatnonzero(level < 0)
            err(f"not acyclic: a cycle runs through tasks {left[:10].tolist()}")
        object.__setattr__(self, "_csr", (in_ptr, by_dst, out_ptr, by_src))
        object.__setattr__(self, "_kahn", (order, level))

    def _fail(self, msg: str) -> None:
        raise DAGError(f"DAG {self.name!r}: {msg}")

    # ------------------------------------------------------------------ sizes and equality
    @property
    def num_tasks(self) -> int:
        return len(self.work)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    def __len__(self) -> int:
        return self.num_tasks

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DAG):
            return NotImplemented
        if (self.hetero is None) != (other.hetero is None):
            return False
        return (
            self.name == other.name
            and self.source == other.source
            and self.affinity == other.affinity
            and self.task_names == other.task_names
            and np.array_equal(self.work, other.work)
            and np.array_equal(self.edges, other.edges)
            and np.array_equal(self.edge_bytes, other.edge_bytes)
            and (self.hetero is None or np.array_equal(self.hetero, other.hetero))
        )

    __hash__ = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ structure (cached)
    @property
    def in_degree(self) -> np.ndarray:
        """(N,) int64 number of parents per task."""
        return np.diff(self._csr[0])

    @property
    def out_degree(self) -> np.ndarray:
        """(N,) int64 number of children per task."""
        return np.diff(self._csr[2])

    def parents(self, i: int) -> np.ndarray:
        """Parent task indices of task ``i``."""
        in_ptr, by_dst = self._csr[0], self._csr[1]
        return self.edges[by_dst[in_ptr[i] : in_ptr[i + 1]], 0]

    def children(self, i: int) -> np.ndarray:
        """Child task indices of task ``i``."""
        out_ptr, by_src = self._csr[2], self._csr[3]
        return self.edges[by_src[out_ptr[i] : out_ptr[i + 1]], 1]

    def in_edges(self, i: int) -> np.ndarray:
        """Edge indices (rows of ``edges``) entering task ``i``."""
        in_ptr, by_dst = self._csr[0], self._csr[1]
        return by_dst[in_ptr[i] : in_ptr[i + 1]]

    def out_edges(self, i: int) -> np.ndarray:
        """Edge indices (rows of ``edges``) leaving task ``i``."""
        out_ptr, by_src = self._csr[2], self._csr[3]
        return by_src[out_ptr[i] : out_ptr[i + 1]]

    @property
    def topological_order(self) -> np.ndarray:
        """(N,) int64 task indices, parents before children (Kahn's algorithm wave by wave, lowest index first
        within a wave). Raises :class:`DAGError` naming tasks on a cycle."""
        return self._kahn[0]

    @property
    def level(self) -> np.ndarray:
        """(N,) int64 level of each task: 0 for roots, else 1 + max level of its parents (longest-path depth)."""
        return self._kahn[1]

    @property
    def depth(self) -> int:
        """Number of tasks on the longest path (1 for a DAG without edges, 0 when empty)."""
        return int(self.level.max()) + 1 if self.num_tasks else 0

    @property
    def roots(self) -> np.ndarray:
        return np.flatnonzero(self.in_degree == 0)

    @property
    def sinks(self) -> np.ndarray:
        return np.flatnonzero(self.out_degree == 0)

    def critical_path(self, speed: float = 1.0, bandwidth: float | None = None) -> tuple[float, np.ndarray]:
        """Longest path as ``(length_seconds, task_indices)`` with every task at ``speed`` and every edge paying
        ``bytes / bandwidth`` (``bandwidth=None``: communication ignored). With ``bandwidth=None`` the length is a
        lower bound on any plan's makespan on GPUs no faster than ``speed``."""
        n = self.num_tasks
        if n == 0:
            return 0.0, np.zeros(0, dtype=np.int64)
        cost = self.work / speed
        comm = np.zeros(self.num_edges) if bandwidth is None else self.edge_bytes / bandwidth
        best = cost.copy()  # longest path ending at i, including i
        prev = np.full(n, -1, dtype=np.int64)
        for i in self.topological_order:
            ein = self.in_edges(i)
            if len(ein):
                cand = best[self.edges[ein, 0]] + comm[ein]
                k = int(np.argmax(cand))
                best[i] = cand[k] + cost[i]
                prev[i] = self.edges[ein[k], 0]
        end = int(np.argmax(best))
        path = [end]
        while prev[path[-1]] >= 0:
            path.append(int(prev[path[-1]]))
        return float(best[end]), np.asarray(path[::-1], dtype=np.int64)

    def critical_path_length(self, speed: float = 1.0, bandwidth: float | None = None) -> float:
        """Length in seconds of the longest path (see :meth:`critical_path`)."""
        return self.critical_path(speed, bandwidth)[0]

    @property
    def total_work(self) -> float:
        return float(self.work.sum())

    def ccr(self, bandwidth: float) -> float:
        """Communication-to-computation ratio at ``bandwidth``: mean edge transfer time / mean task work."""
        if self.num_edges == 0 or self.total_work == 0:
            return 0.0
        return float((self.edge_bytes / bandwidth).mean() / self.work.mean())

    # ------------------------------------------------------------------ derived DAGs
    def with_ccr(self, ccr: float, bandwidth: float) -> DAG:
        """A copy whose edges all carry ``ccr * mean(work) * bandwidth`` bytes, i.e. the given CCR at
        ``bandwidth`` (for sources without data sizes: Alibaba, TPC-H)."""
        eb = np.full(self.num_edges, ccr * float(self.work.mean() if self.num_tasks else 0.0) * bandwidth)
        return self.replace(edge_bytes=eb, source=f"{self.source}; ccr={ccr:g}@{bandwidth:g}B/s")

    def replace(self, **changes: Any) -> DAG:
        kw = {
            k: getattr(self, k)
            for k in (
                "work",
                "edges",
                "edge_bytes",
                "name",
                "source",
                "affinity",
                "task_names",
                "hetero",
                "meta",
            )
        }
        kw.update(changes)
        return DAG(**kw)

    def runtime_matrix(self, speed: np.ndarray, gpu_types: np.ndarray | list | None = None) -> np.ndarray:
        """(N, G) float64 seconds task ``i`` takes on GPU ``g``; ``inf`` where its affinity forbids the GPU."""
        from gpusched_envs.sim.dag_eval import runtime_matrix

        return runtime_matrix(self, speed, gpu_types)

    def summary(self) -> dict[str, Any]:
        """Shape statistics (tasks, edges, depth, degrees, work, critical path)."""
        return {
            "name": self.name,
            "tasks": self.num_tasks,
            "edges": self.num_edges,
            "depth": self.depth,
            "max_in_degree": int(self.in_degree.max()) if self.num_tasks else 0,
            "max_out_degree": int(self.out_degree.max()) if self.num_tasks else 0,
            "total_work_s": self.total_work,
            "critical_path_s": self.critical_path_length(),
            "total_bytes": float(self.edge_bytes.sum()),
        }

    def __repr__(self) -> str:
        return (
            f"DAG(name={self.name!r}, tasks={self.num_tasks}, edges={self.num_edges}, source={self.source!r})"
        )
