"""The structure of a :class:`~gpusched_envs.workloads.dag.DAG`: validation of the edge list, parent/child lists in
CSR form and the wave-by-wave topological order, in one pass over the edges (:func:`dag_structure`). Small DAGs go
through plain Python lists, large ones through a compiled (numba) kernel: the two give the same arrays and the same
findings, and a process that only builds small DAGs never starts the compiler."""

from __future__ import annotations

import numpy as np
from numba import njit

from gpusched_envs.sim import numba_cache  # noqa: F401  (one cache stamp for every kernel file)

# what :func:`dag_structure` found (its first return value)
OK = 0
OUT_OF_RANGE = 1  # an edge names a task outside 0..N-1 (second value: the first such edge's row)
SELF_LOOP = 2  # an edge from a task to itself (second value: the first such edge's row)
DUPLICATE = 3  # an edge given twice (second and third values: the lowest such (src, dst))
CYCLE = 4  # a cycle (``level`` is -1 on the tasks Kahn's algorithm never reaches)

# DAGs with more edges than this go through the compiled kernel
COMPILED_ABOVE_EDGES = 1024


def dag_structure(n: int, edges: np.ndarray) -> tuple:
    """Check ``edges`` ((E, 2) int64 rows ``src, dst``, C-ordered and read-only) of an ``n``-task DAG and build its
    structure: ``(status, a, b, in_ptr, by_dst, out_ptr, by_src, order, level)``. ``by_dst`` / ``by_src`` are the
    edge rows stably sorted by ``dst`` / ``src`` (``numpy.argsort(kind="stable")``), ``in_ptr`` / ``out_ptr`` the
    (N + 1,) offsets of each task's rows in them; ``level`` is each task's longest-path depth and ``order`` the tasks
    by (level, index): Kahn's algorithm wave by wave, lowest index first within a wave. ``status`` is :data:`OK`
    or the first problem found (checked in the order range, self-loops, duplicates, cycles; see the constants),
    and the arrays are only complete with :data:`OK` (with :data:`CYCLE`, ``level`` marks the tasks on or after
    a cycle)."""
    if len(edges) > COMPILED_ABOVE_EDGES:
        return structure_compiled(n, edges)
    return structure_lists(n, edges)


def structure_lists(n: int, edges: np.ndarray) -> tuple:
    """:func:`dag_structure` with numpy's stable sorts for the CSR lists and plain Python lists for the rest."""
    e_n = len(edges)
    in_ptr = np.zeros(n + 1, dtype=np.int64)
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    order = np.zeros(n, dtype=np.int64)
    level = np.zeros(n, dtype=np.int64)
    by_src = by_dst = np.zeros(e_n, dtype=np.int64)
    src, dst = edges[:, 0], edges[:, 1]
    if e_n:
        if edges.min() < 0 or edges.max() >= n:
            bad = (src < 0) | (src >= n) | (dst < 0) | (dst >= n)
            return OUT_OF_RANGE, int(bad.argmax()), 0, in_ptr, by_dst, out_ptr, by_src, order, level
        loops = src == dst
        if loops.any():
            return SELF_LOOP, int(loops.argmax()), 0, in_ptr, by_dst, out_ptr, by_src, order, level
    keys = (src * n + dst).tolist()
    if len(set(keys)) != e_n:
        seen: set[int] = set()
        twice: list[int] = []
        for k in keys:
            if k in seen:
                twice.append(k)
            seen.add(k)
        dup = min(twice)  # the lowest (src, dst) given twice
        return DUPLICATE, dup // n, dup % n, in_ptr, by_dst, out_ptr, by_src, order, level
    by_dst = np.argsort(dst, kind="stable")
    by_src = np.argsort(src, kind="stable")
    parents = np.bincount(dst, minlength=n)
    np.cumsum(parents, out=in_ptr[1:])
    np.cumsum(np.bincount(src, minlength=n), out=out_ptr[1:])
    # Kahn's algorithm: a task's level is one more than its deepest parent's
    ptr, kids = out_ptr.tolist(), dst[by_src].tolist()
    indeg = parents.tolist()
    depth = [0] * n
    queue = [i for i in range(n) if indeg[i] == 0]
    for u in queue:  # the queue grows while it is read
        nxt = depth[u] + 1
        for d in kids[ptr[u] : ptr[u + 1]]:
            if nxt > depth[d]:
                depth[d] = nxt
            indeg[d] -= 1
            if indeg[d] == 0:
                queue.append(d)
    level[:] = depth
    if len(queue) < n:
        level[np.array(indeg) > 0] = -1
        return CYCLE, len(queue), 0, in_ptr, by_dst, out_ptr, by_src, order, level
    order = np.argsort(level, kind="stable")  # by level, then index
    return OK, 0, 0, in_ptr, by_dst, out_ptr, by_src, order, level


@njit(cache=True)
def structure_compiled(n, edges):
    """:func:`dag_structure` compiled."""
    e_n = edges.shape[0]
    in_ptr = np.zeros(n + 1, dtype=np.int64)
    by_dst = np.empty(e_n, dtype=np.int64)
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    by_src = np.empty(e_n, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    level = np.zeros(n, dtype=np.int64)
    for r in range(e_n):
        s, d = edges[r, 0], edges[r, 1]
        if s < 0 or s >= n or d < 0 or d >= n:
            return OUT_OF_RANGE, r, 0, in_ptr, by_dst, out_ptr, by_src, order, level
    for r in range(e_n):
        if edges[r, 0] == edges[r, 1]:
            return SELF_LOOP, r, 0, in_ptr, by_dst, out_ptr, by_src, order, level
    # counting sorts by dst and by src, stable in the row order
    for r in range(e_n):
        out_ptr[edges[r, 0] + 1] += 1
        in_ptr[edges[r, 1] + 1] += 1
    for i in range(n):
        out_ptr[i + 1] += out_ptr[i]
        in_ptr[i + 1] += in_ptr[i]
    fill_out = out_ptr[:n].copy()
    fill_in = in_ptr[:n].copy()
    for r in range(e_n):
        s, d = edges[r, 0], edges[r, 1]
        by_src[fill_out[s]] = r
        fill_out[s] += 1
        by_dst[fill_in[d]] = r
        fill_in[d] += 1
    # duplicates: the lowest src with a child listed twice, and its lowest such child
    seen = np.full(n, -1, dtype=np.int64)
    for s in range(n):
        dup = n
        for k in range(out_ptr[s], out_ptr[s + 1]):
            d = edges[by_src[k], 1]
            if seen[d] == s:
                if d < dup:
                    dup = d
            else:
                seen[d] = s
        if dup < n:
            return DUPLICATE, s, dup, in_ptr, by_dst, out_ptr, by_src, order, level
    # Kahn's algorithm: a task's level is one more than its deepest parent's
    indeg = np.empty(n, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    tail = 0
    for i in range(n):
        indeg[i] = in_ptr[i + 1] - in_ptr[i]
        if indeg[i] == 0:
            queue[tail] = i
            tail += 1
    head = 0
    depth = 0
    while head < tail:
        u = queue[head]
        head += 1
        nxt = level[u] + 1
        if level[u] >= depth:
            depth = level[u] + 1
        for k in range(out_ptr[u], out_ptr[u + 1]):
            d = edges[by_src[k], 1]
            if nxt > level[d]:
                level[d] = nxt
            indeg[d] -= 1
            if indeg[d] == 0:
                queue[tail] = d
                tail += 1
    if tail < n:
        for i in range(n):
            if indeg[i] > 0:
                level[i] = -1
        return CYCLE, tail, 0, in_ptr, by_dst, out_ptr, by_src, order, level
    # the order: tasks by level, then index (a counting sort by level)
    at = np.zeros(depth + 1, dtype=np.int64)
    for i in range(n):
        at[level[i] + 1] += 1
    for v in range(depth):
        at[v + 1] += at[v]
    for i in range(n):
        order[at[level[i]]] = i
        at[level[i]] += 1
    return OK, 0, 0, in_ptr, by_dst, out_ptr, by_src, order, level
