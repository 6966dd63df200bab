"""TPC-H on Spark stage DAGs (Decima, SIGCOMM'19; distributed MIT via Park): 22 queries x 7 input sizes.

Bundled reduced by ``scripts/bundle_tpch.py`` (see ``gpusched_envs/data/dags/tpch/PROVENANCE.md``). One DAG task per
Spark stage; ``work`` = ``num_tasks * mean_task_duration_ms / 1000``, the stage's total task-seconds (its runtime on
one reference executor). The data has no transfer sizes: edges carry 0 bytes unless ``ccr`` > 0, which gives every
edge ``ccr * mean(work) * bandwidth`` bytes. ``meta`` keeps each stage's task count and mean task duration.
"""

from __future__ import annotations

import csv
import io
from functools import lru_cache
from importlib import resources

import numpy as np

from .model import DAG
from .random_layered import DEFAULT_BANDWIDTH

SIZES = ("2g", "5g", "10g", "20g", "50g", "80g", "100g")
QUERIES = tuple(range(1, 23))


@lru_cache(maxsize=1)
def _tables() -> tuple[dict, dict]:
    base = resources.files("gpusched_envs").joinpath("data", "dags", "tpch")
    stages: dict[tuple[str, int], list[tuple[int, int, float]]] = {}
    for r in csv.DictReader(io.StringIO(base.joinpath("tpch_stages.csv").read_text(encoding="utf-8"))):
        key = (r["query_size"], int(r["query_id"]))
        stages.setdefault(key, []).append(
            (int(r["stage"]), int(r["num_tasks"]), float(r["mean_task_duration_ms"]))
        )
    edges: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for r in csv.DictReader(io.StringIO(base.joinpath("tpch_edges.csv").read_text(encoding="utf-8"))):
        key = (r["query_size"], int(r["query_id"]))
        edges.setdefault(key, []).append((int(r["parent_stage"]), int(r["child_stage"])))
    return stages, edges


def tpch_dag(query: int, size: str = "10g", *, ccr: float = 0.0, bandwidth: float = DEFAULT_BANDWIDTH) -> DAG:
    """TPC-H query ``query`` (1..22) at input size ``size`` (one of :data:`SIZES`) as a stage DAG."""
    size = str(size).lower()
    if size not in SIZES:
        raise ValueError(f"unknown TPC-H size {size!r}; valid: {', '.join(SIZES)}")
    if int(query) not in QUERIES:
        raise ValueError(f"unknown TPC-H query {query!r}; valid: 1..22")
    stages, edges = _tables()
    rows = sorted(stages[(size, int(query))])
    pos = {s: i for i, (s, _, _) in enumerate(rows)}
    ntasks = np.array([n for _, n, _ in rows], dtype=np.int64)
    mean_ms = np.array([d for _, _, d in rows])
    work = ntasks * mean_ms / 1000.0
    e = np.array([(pos[p], pos[c]) for p, c in edges.get((size, int(query)), [])], dtype=np.int64).reshape(
        -1, 2
    )
    eb = np.full(len(e), ccr * float(work.mean()) * bandwidth) if ccr > 0 else np.zeros(len(e))
    return DAG(
        work=work,
        edges=e,
        edge_bytes=eb,
        name=f"tpch-q{int(query)}-{size}",
        source=f"tpch:q={int(query)},size={size} (Decima/Park TPC-H, MIT)",
        task_names=tuple(f"stage{s}" for s, _, _ in rows),
        meta={"num_tasks": ntasks.tolist(), "mean_task_duration_ms": mean_ms.tolist()},
    )
