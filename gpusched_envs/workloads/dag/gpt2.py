"""GPT-2 operator DAGs from DAGBench (Apache-2.0; ANRGUSC/dagbench ``gpt2_tensor_sh12_{prefill,decode}``).

327 operator tasks (embedding, per-layer QKV, 12 attention shards, merges, MLP shards, ...) and 614 edges each,
with compute cost measured on Hugging Face GPT-2 (ms -> ``work`` in reference GPU-seconds) and edge sizes in bytes.
Inference DAGs (prefill: prompt of 128 tokens; decode: one token), see ``gpusched_envs/data/dags/PROVENANCE.md``.
"""

from __future__ import annotations

import gzip
import json
from functools import lru_cache
from importlib import resources

import numpy as np

from .model import DAG

PHASES = ("prefill", "decode")


@lru_cache(maxsize=2)
def _raw(phase: str) -> dict:
    name = f"dagbench_gpt2_tensor_sh12_{phase}.json.gz"
    data = resources.files("gpusched_envs").joinpath("data", "dags", name).read_bytes()
    return json.loads(gzip.decompress(data).decode("utf-8"))


def gpt2_dag(phase: str = "prefill") -> DAG:
    """The DAGBench GPT-2 tensor-sharded (12 shards) operator DAG of ``phase`` (``prefill`` or ``decode``)."""
    if phase not in PHASES:
        raise ValueError(f"unknown GPT-2 phase {phase!r}; valid: {', '.join(PHASES)}")
    g = _raw(phase)["task_graph"]
    names = [t["name"] for t in g["tasks"]]
    idx = {n: i for i, n in enumerate(names)}
    work = np.array([float(t["cost"]) for t in g["tasks"]]) / 1000.0
    deps = g["dependencies"]
    edges = np.array([(idx[d["source"]], idx[d["target"]]) for d in deps], dtype=np.int64).reshape(-1, 2)
    eb = np.array([float(d["size"]) for d in deps], dtype=np.float64)
    return DAG(
        work=work,
        edges=edges,
        edge_bytes=eb,
        name=f"gpt2-{phase}",
        source=f"dagbench:gpt2_tensor_sh12_{phase} (ANRGUSC/dagbench@e69984f, Apache-2.0)",
        task_names=tuple(names),
        meta={"phase": phase},
    )
