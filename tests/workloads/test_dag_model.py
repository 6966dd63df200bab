"""The DAG record: validation, structure helpers."""

from __future__ import annotations

import numpy as np
import pytest

from gpusched_envs.workloads.dag import DAG, DAGError


def diamond() -> DAG:
    return DAG(
        work=[1.0, 2.0, 3.0, 1.0],
        edges=[[0, 1], [0, 2], [1, 3], [2, 3]],
        edge_bytes=[10.0, 20.0, 30.0, 40.0],
        name="diamond",
    )


def test_structure_helpers():
    d = diamond()
    assert d.num_tasks == 4 and d.num_edges == 4
    assert d.topological_order.tolist() == [0, 1, 2, 3]
    assert d.level.tolist() == [0, 1, 1, 2]
    assert d.depth == 3
    assert sorted(d.parents(3).tolist()) == [1, 2]
    assert sorted(d.children(0).tolist()) == [1, 2]
    assert d.roots.tolist() == [0] and d.sinks.tolist() == [3]
    length, path = d.critical_path()
    assert length == 5.0 and path.tolist() == [0, 2, 3]
    # with communication at 10 B/s: 0 -> 2 -> 3 costs 1 + 2 + 3 + 4 + 1 = 11
    assert d.critical_path_length(bandwidth=10.0) == pytest.approx(11.0)
    assert d.critical_path_length(speed=2.0) == 2.5
    assert not d.work.flags.writeable


def test_topological_order_of_unsorted_indices():
    d = DAG(work=np.ones(4), edges=[[3, 1], [1, 0], [2, 0]], edge_bytes=np.zeros(3))
    pos = np.empty(4, dtype=int)
    pos[d.topological_order] = np.arange(4)
    assert all(pos[s] < pos[t] for s, t in d.edges)
    assert d.depth == 3


@pytest.mark.parametrize(
    ("edges", "match"),
    [
        ([[0, 1], [1, 2], [2, 0]], "not acyclic"),
        ([[0, 0]], "depends on itself"),
        ([[0, 5]], "outside 0..2"),
        ([[0, 1], [0, 1]], "duplicate edge 0 -> 1"),
    ],
)
def test_validation_errors(edges, match):
    with pytest.raises(DAGError, match=match):
        DAG(work=np.ones(3), edges=edges, edge_bytes=np.zeros(len(edges)), name="bad")


def test_other_validation():
    with pytest.raises(DAGError, match="work"):
        DAG(work=[1.0, -1.0], edges=[], edge_bytes=[])
    with pytest.raises(DAGError, match="edge_bytes has 2"):
        DAG(work=[1.0, 1.0], edges=[[0, 1]], edge_bytes=[1.0, 2.0])
    with pytest.raises(DAGError, match="affinity"):
        DAG(work=[1.0], edges=[], edge_bytes=[], affinity=("A100", None))


def test_equality_ccr_and_runtime_matrix():
    d = diamond()
    assert d == diamond() and d != diamond().replace(name="x")
    c = d.with_ccr(2.0, bandwidth=100.0)
    assert c.ccr(100.0) == pytest.approx(2.0)
    rt = d.replace(affinity=(None, "A", None, None)).runtime_matrix([1.0, 2.0], gpu_types=["A", "B"])
    assert rt[1].tolist() == [2.0, np.inf]
    assert rt[2].tolist() == [3.0, 1.5]
    with pytest.raises(ValueError, match="gpu_types"):
        d.replace(affinity=(None, "A", None, None)).runtime_matrix([1.0, 2.0])
