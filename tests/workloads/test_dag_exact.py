"""The random layered generator and the DAG structure equal plain numpy implementations of the same definitions
exactly: the same DAGs from the same seeds (every array bit for bit, the generator left in the same state), the same
CSR lists, topological order and levels, and the same error for every kind of invalid edge list."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.workloads.dag import DAG, DAGError, random_layered_dag, structure
from gpusched_envs.workloads.dag import random_layered as rl


def _reference_widths(n, alpha, rng):
    mean_h = max(1.0, np.sqrt(n) / alpha)
    h = int(np.clip(round(rng.uniform(0.5 * mean_h, 1.5 * mean_h)), 1, n))
    mean_w = n / h
    w = np.maximum(1, np.round(rng.uniform(0.5 * mean_w, 1.5 * mean_w, size=h))).astype(np.int64)
    while w.sum() > n:
        big = np.flatnonzero(w > 1)
        w[rng.choice(big)] -= 1
    while w.sum() < n:
        w[rng.integers(h)] += 1
    return w


def _reference_edges(n, alpha, out_degree, rng):
    """The generator's draws with numpy set operations on index arrays: widths, children, missing parents."""
    widths = _reference_widths(n, alpha, rng)
    starts = np.concatenate([[0], np.cumsum(widths)])
    level = np.repeat(np.arange(len(widths)), widths)
    edges = set()
    for i in range(n):
        lv = level[i]
        if lv == len(widths) - 1:
            continue
        cands = np.arange(starts[lv + 1], n)
        k = int(min(rng.integers(1, out_degree + 1), len(cands)))
        nxt = np.arange(starts[lv + 1], starts[lv + 2])
        k_next = min(len(nxt), max(1, k // 2 + k % 2))
        chosen = list(rng.choice(nxt, size=k_next, replace=False))
        rest = np.setdiff1d(cands, chosen)
        if k - k_next > 0 and len(rest):
            chosen += list(rng.choice(rest, size=min(k - k_next, len(rest)), replace=False))
        edges.update((i, int(c)) for c in chosen)
    have_parent = np.zeros(n, dtype=bool)
    for _, d in edges:
        have_parent[d] = True
    for i in range(starts[1] if len(widths) > 1 else n, n):
        if not have_parent[i]:
            lv = level[i]
            edges.add((int(rng.integers(starts[lv - 1], starts[lv])), i))
    return len(widths), np.asarray(sorted(edges), dtype=np.int64).reshape(-1, 2)


def _reference_csr(n, edges):
    src, dst = edges[:, 0], edges[:, 1]
    in_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=in_ptr[1:])
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=out_ptr[1:])
    return in_ptr, np.argsort(dst, kind="stable"), out_ptr, np.argsort(src, kind="stable")


def _reference_kahn(n, edges):
    """Kahn's algorithm wave by wave on numpy arrays: (order, level); on a cycle the order lacks some tasks."""
    _, _, out_ptr, by_src = _reference_csr(n, edges)
    indeg = np.bincount(edges[:, 1], minlength=n).astype(np.int64)
    dst_sorted = edges[by_src, 1]
    level = np.zeros(n, dtype=np.int64)
    frontier = np.flatnonzero(indeg == 0)
    order, wave = [], 0
    while len(frontier):
        order.append(frontier)
        level[frontier] = wave
        wave += 1
        kids = np.concatenate([dst_sorted[out_ptr[f] : out_ptr[f + 1]] for f in frontier])
        np.subtract.at(indeg, kids, 1)
        kids = np.unique(kids)
        frontier = kids[indeg[kids] == 0]
    return (np.concatenate(order) if order else np.zeros(0, dtype=np.int64)), level


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


GRID = [
    (n, alpha, out_degree)
    for n in (1, 2, 3, 4, 7, 20, 33, 90)
    for alpha in (0.25, 1.0, 3.0)
    for out_degree in (1, 2, 3, 5, 9)
]


@pytest.mark.parametrize(("n", "alpha", "out_degree"), GRID)
def test_generator_equals_the_set_operations_reference(n, alpha, out_degree):
    for seed in range(25):
        levels, edges = _reference_edges(n, alpha, out_degree, ref := np.random.default_rng(seed))
        d = random_layered_dag(n, alpha=alpha, out_degree=out_degree, seed=seed, hetero_columns=3)
        assert _same(d.edges, edges), (n, alpha, out_degree, seed)
        assert d.meta["levels"] == levels
        # the draws after the edges (work, bytes, hetero) are the same values: the stream was left where it was
        work = np.maximum(ref.uniform(0.0, 20.0, size=n), 0.1)
        assert _same(d.work, work)
        assert _same(d.edge_bytes, ref.uniform(0.0, 2.0 * 10.0 * rl.DEFAULT_BANDWIDTH, size=len(edges)))
        assert _same(d.hetero, ref.uniform(0.75, 1.25, size=(n, 3)))


def test_generator_edges_are_exact_on_a_known_seed():
    d = random_layered_dag(8, seed=3, beta=0.0)
    assert d.edges.dtype == np.int64 and d.edges.flags.c_contiguous
    assert d.edges.tolist() == _reference_edges(8, 1.0, 3, np.random.default_rng(3))[1].tolist()
    assert d.hetero is None


def _random_edge_lists(rng, count):
    for _ in range(count):
        n = int(rng.integers(0, 14))
        e = int(rng.integers(0, 3 * n + 2)) if n else 0
        edges = rng.integers(0, max(n, 1), size=(e, 2))
        kind = rng.random()
        if (
            n and kind < 0.5
        ):  # acyclic: point every edge from the lower to the higher index, drop loops/duplicates
            edges = np.unique(np.sort(edges, axis=1), axis=0)
            edges = edges[edges[:, 0] != edges[:, 1]]
            edges = edges[rng.permutation(len(edges))]
            relabel = rng.permutation(n)
            edges = relabel[edges]
        yield n, np.asarray(edges, dtype=np.int64).reshape(-1, 2)


def _reference_error(n, edges):
    """The error the numpy definitions give, or None."""
    if len(edges):
        out = (edges < 0) | (edges >= n)
        if out.any():
            row = int(np.flatnonzero(out.any(axis=1))[0])
            return f"edge {row} {edges[row].tolist()} has a task index outside 0..{n - 1}"
        loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
        if len(loops):
            return f"cycle: task {int(edges[loops[0], 0])} depends on itself"
        key = edges[:, 0] * n + edges[:, 1]
        uniq, counts = np.unique(key, return_counts=True)
        if np.any(counts > 1):
            k = int(uniq[counts > 1][0])
            return f"duplicate edge {k // n} -> {k % n}"
    done, _ = _reference_kahn(n, edges)
    if len(done) != n:
        left = np.setdiff1d(np.arange(n), done)
        return f"not acyclic: a cycle runs through tasks {left[:10].tolist()}"
    return None


# every DAG through the plain-lists path, or every DAG through the compiled kernel
PATHS = {"lists": 10**9, "compiled": -1}


@pytest.mark.parametrize("path", PATHS)
def test_structure_and_errors_equal_the_numpy_definitions(path, monkeypatch):
    monkeypatch.setattr(structure, "COMPILED_ABOVE_EDGES", PATHS[path])
    rng = np.random.default_rng(0)
    checked = {"ok": 0, "error": 0}
    for n, edges in _random_edge_lists(rng, 1500):
        expected = _reference_error(n, edges)
        if expected is not None:
            with pytest.raises(DAGError) as info:
                DAG(work=np.ones(n), edges=edges, edge_bytes=np.ones(len(edges)), name="x")
            assert str(info.value) == f"DAG 'x': {expected}"
            checked["error"] += 1
            continue
        d = DAG(work=np.ones(n), edges=edges, edge_bytes=np.ones(len(edges)))
        for got, want in zip(d._csr, _reference_csr(n, d.edges), strict=True):
            assert _same(got, want)
        order, level = _reference_kahn(n, d.edges)
        assert _same(d.topological_order, order.astype(np.int64))
        assert _same(d.level, level)
        assert all(not a.flags.writeable for a in (*d._csr, d.topological_order, d.level))
        checked["ok"] += 1
    assert checked["ok"] > 500 and checked["error"] > 500


@pytest.mark.parametrize("path", PATHS)
def test_each_error_kind_on_a_hand_built_list(path, monkeypatch):
    monkeypatch.setattr(structure, "COMPILED_ABOVE_EDGES", PATHS[path])

    def error(n, edges):
        with pytest.raises(DAGError) as info:
            DAG(work=np.ones(n), edges=edges, edge_bytes=np.ones(len(edges)))
        return str(info.value).removeprefix("DAG 'dag': ")

    assert error(3, [[0, 1], [1, 3], [0, -1]]) == "edge 1 [1, 3] has a task index outside 0..2"
    assert error(3, [[0, 1], [2, 2], [1, 1]]) == "cycle: task 2 depends on itself"
    assert error(4, [[2, 3], [2, 1], [0, 1], [2, 1], [0, 1]]) == "duplicate edge 0 -> 1"
    assert (
        error(5, [[0, 1], [1, 2], [2, 1], [3, 4], [2, 4]])
        == "not acyclic: a cycle runs through tasks [1, 2, 4]"
    )


def test_the_callers_edge_array_stays_writable_after_an_edge_error():
    edges = np.array([[0, 1], [0, 1]], dtype=np.int64)
    with pytest.raises(DAGError, match="duplicate"):
        DAG(work=np.ones(2), edges=edges, edge_bytes=np.ones(2))
    assert edges.flags.writeable


def test_large_dags_take_the_compiled_path_with_the_same_structure():
    d = random_layered_dag(700, seed=0, beta=0.0)
    assert d.num_edges > structure.COMPILED_ABOVE_EDGES
    lists = structure.structure_lists(d.num_tasks, d.edges)
    compiled = structure.structure_compiled(d.num_tasks, d.edges)
    assert lists[:3] == compiled[:3] == (structure.OK, 0, 0)
    for a, b, c in zip(lists[3:], compiled[3:], (*d._csr, d.topological_order, d.level), strict=True):
        assert _same(a, b) and _same(b, c)
    order, level = _reference_kahn(d.num_tasks, d.edges)
    assert _same(d.topological_order, order) and _same(d.level, level)


def test_ranks_of_a_dag_equal_those_of_a_plain_record_with_its_arrays():
    """A ``DAG`` lends the policies its own topological order, a plain record gets Kahn's: the same ranks."""
    from types import SimpleNamespace

    from gpusched_envs.policies.dag import downward_rank, upward_rank

    speed = np.array([1.0, 0.5, 2.0])
    bandwidth = np.array([[0.0, 1e9, 2e9], [1e9, 0.0, 5e8], [2e9, 5e8, 0.0]])
    for seed in range(20):
        d = random_layered_dag(30, alpha=0.5 + seed / 10, seed=seed, hetero_columns=3)
        plain = SimpleNamespace(
            work=d.work, edges=d.edges, edge_bytes=d.edge_bytes, affinity=None, hetero=d.hetero, name="plain"
        )
        for rank in (upward_rank, downward_rank):
            assert rank(d, speed, bandwidth).tobytes() == rank(plain, speed, bandwidth).tobytes()
