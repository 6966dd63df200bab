"""ML-training DAGs from the measured PipeDream layer graphs (MIT; Narayanan et al., SOSP'19).

The bundled profiles (``gpusched_envs/data/dags/pipedream_*``, see PROVENANCE.md there) give, per model layer, the
forward and backward time (ms, one mini-batch, one GPU), the output activation bytes and the parameter bytes, plus
the layer graph. Times become ``work`` in reference GPU-seconds (the profiling GPU is the reference). The Input
node's "forward" time (data loading) is set to 0.

Two training-step DAGs:

``mode="data"`` (synchronous data parallelism, ``gpus`` replicas, weak scaling: every replica processes one profiled
mini-batch):
  per replica ``r`` and layer ``l``: ``F[r,l]`` (forward) and ``B[r,l]`` (backward); edges ``F[r,u] -> F[r,v]`` and
  ``B[r,v] -> B[r,u]`` for each layer edge ``u -> v`` carrying ``act[u]`` bytes (activation / its gradient), and
  ``F[r,l] -> B[r,l]`` carrying ``act[l]`` (stashed activations). With ``gpus > 1`` each layer with parameters gets
  a zero-work gradient-aggregation task ``S[l]`` (edges ``B[r,l] -> S[l]``, ``param[l]`` bytes) and each replica a
  zero-work update task ``U[r]`` (edges ``S[l] -> U[r]``, ``param[l]`` bytes): a parameter-server view of the
  all-reduce. Tasks: ``2 * L * gpus`` (+ ``L_param + gpus`` when ``gpus > 1``).

``mode="pipeline"`` (GPipe-style pipeline parallelism, ``gpus`` stages, ``microbatches`` micro-batches, default
``gpus``): layers are cut into ``gpus`` contiguous stages of a topological order with balanced forward+backward time;
per stage ``s`` and micro-batch ``j``: ``F[s,j]`` and ``B[s,j]`` with the stage's time divided by the micro-batch
count; edges ``F[s,j] -> F[t,j]`` and ``B[t,j] -> B[s,j]`` for stages ``s < t`` joined by a layer edge (bytes = the
activations of the distinct ``s`` layers feeding ``t``, divided by the micro-batch count), ``F[s,j] -> B[s,j]``
(the stage's stashed activations), and a zero-work weight update ``U[s]`` after all ``B[s,j]`` (edges carry the
stage's parameter bytes). Tasks: ``2 * gpus * microbatches + gpus``.
"""

from __future__ import annotations

import csv
import gzip
import io
from functools import lru_cache
from importlib import resources

import numpy as np

from .model import DAG

MODES = ("data", "pipeline")


def _bytes(text: str) -> float:
    """A size field: a number, or ``[a; b; c]`` for a layer with several outputs (summed)."""
    text = text.strip().strip("[]")
    return float(sum(float(x) for x in text.split(";") if x.strip()))


@lru_cache(maxsize=1)
def _tables() -> dict[str, dict]:
    base = resources.files("gpusched_envs").joinpath("data", "dags")

    def rows(name: str):
        raw = base.joinpath(name).read_bytes()
        return list(csv.DictReader(io.StringIO(gzip.decompress(raw).decode("utf-8"))))

    models: dict[str, dict] = {}
    for r in rows("pipedream_layer_nodes.csv.gz"):
        m = models.setdefault(
            r["model"], {"ids": [], "layer": [], "fwd": [], "bwd": [], "act": [], "param": []}
        )
        m["ids"].append(r["node_id"])
        m["layer"].append(r["layer"])
        fwd = float(r["forward_compute_time_ms"])
        m["fwd"].append(0.0 if r["layer"].startswith("Input") else fwd)
        m["bwd"].append(float(r["backward_compute_time_ms"]))
        m["act"].append(_bytes(r["activation_size_bytes"]))
        m["param"].append(_bytes(r["parameter_size_bytes"]))
    edges: dict[str, list[tuple[str, str]]] = {}
    for r in rows("pipedream_layer_edges.csv.gz"):
        edges.setdefault(r["model"], []).append((r["src_node_id"], r["dst_node_id"]))
    out = {}
    for name, m in models.items():
        ids = m["ids"]
        # order layers by numeric node id ("node12" -> 12) for a stable, readable order
        perm = sorted(range(len(ids)), key=lambda i: int("".join(c for c in ids[i] if c.isdigit()) or 0))
        pos = {ids[i]: k for k, i in enumerate(perm)}
        e = np.array([(pos[s], pos[d]) for s, d in edges.get(name, [])], dtype=np.int64).reshape(-1, 2)
        out[name] = {
            "ids": [ids[i] for i in perm],
            "layer": [m["layer"][i] for i in perm],
            **{k: np.array([m[k][i] for i in perm]) for k in ("fwd", "bwd", "act", "param")},
            "edges": e,
        }
    return out


def pipedream_models() -> list[str]:
    """Names of the 14 profiled models."""
    return sorted(_tables())


def layer_graph(model: str) -> DAG:
    """The model's layer graph as a DAG: ``work`` = forward + backward seconds, edges carry activation bytes."""
    t = _get(model)
    return DAG(
        work=(t["fwd"] + t["bwd"]) / 1000.0,
        edges=t["edges"],
        edge_bytes=t["act"][t["edges"][:, 0]],
        name=f"pipedream-{model}-layers",
        source=f"pipedream:{model} (msr-fiddle/pipedream@11c40c0, MIT)",
        task_names=tuple(t["ids"]),
    )


def _get(model: str) -> dict:
    tabs = _tables()
    key = model.lower()
    if key not in tabs:
        raise ValueError(f"unknown PipeDream model {model!r}; valid: {', '.join(sorted(tabs))}")
    return tabs[key]


def pipedream_dag(model: str, *, mode: str = "data", gpus: int = 1, microbatches: int | None = None) -> DAG:
    """A training-step DAG of ``model`` (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    if gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {gpus}")
    t = _get(model)
    if mode == "data":
        return _data_parallel(model.lower(), t, gpus)
    return _pipeline(model.lower(), t, gpus, microbatches or gpus)


def _data_parallel(model: str, t: dict, k: int) -> DAG:
    n_l = len(t["ids"])
    le = t["edges"]
    act, param = t["act"], t["param"]
    work, names, edges, eb = [], [], [], []
    for r in range(k):
        base = 2 * n_l * r  # F[r,l] = base + l, B[r,l] = base + n_l + l
        work += list(t["fwd"] / 1000.0) + list(t["bwd"] / 1000.0)
        names += [f"F{r}:{i}" for i in t["ids"]] + [f"B{r}:{i}" for i in t["ids"]]
        for u, v in le:
            edges += [(base + u, base + v), (base + n_l + v, base + n_l + u)]
            eb += [act[u], act[u]]
        for l_ in range(n_l):
            edges.append((base + l_, base + n_l + l_))
            eb.append(act[l_])
    if k > 1:
        with_p = np.flatnonzero(param > 0)
        s0 = 2 * n_l * k
        u0 = s0 + len(with_p)
        work += [0.0] * (len(with_p) + k)
        names += [f"S:{t['ids'][l_]}" for l_ in with_p] + [f"U{r}" for r in range(k)]
        for j, l_ in enumerate(with_p):
            for r in range(k):
                edges.append((2 * n_l * r + n_l + l_, s0 + j))
                eb.append(param[l_])
                edges.append((s0 + j, u0 + r))
                eb.append(param[l_])
    return DAG(
        work=np.asarray(work),
        edges=np.asarray(edges, dtype=np.int64),
        edge_bytes=np.asarray(eb, dtype=np.float64),
        name=f"pipedream-{model}-data{k}",
        source=f"pipedream:{model}, mode=data, gpus={k} (msr-fiddle/pipedream@11c40c0, MIT)",
        task_names=tuple(names),
        meta={"model": model, "mode": "data", "gpus": k},
    )


def _pipeline(model: str, t: dict, k: int, m: int) -> DAG:
    n_l = len(t["ids"])
    if k > n_l:
        raise ValueError(f"{model} has {n_l} layers: cannot cut it into {k} pipeline stages")
    if m < 1:
        raise ValueError(f"microbatches must be >= 1, got {m}")
    layers = DAG(work=t["fwd"] + t["bwd"], edges=t["edges"], edge_bytes=np.zeros(len(t["edges"])), name=model)
    order = layers.topological_order
    cost = (t["fwd"] + t["bwd"])[order]
    cum = np.cumsum(cost)
    total = cum[-1] if cum[-1] > 0 else 1.0
    # cut the topological order into k contiguous, non-empty stages of balanced cumulative cost
    cuts = np.searchsorted(cum, total * np.arange(1, k) / k, side="left") + 1
    for j in range(k - 1):
        lo = cuts[j - 1] + 1 if j else 1
        cuts[j] = min(max(cuts[j], lo), n_l - (k - 1 - j))
    stage_pos = np.searchsorted(cuts, np.arange(n_l), side="right")
    stage = np.empty(n_l, dtype=np.int64)
    stage[order] = stage_pos
    fwd_s = np.bincount(stage, weights=t["fwd"], minlength=k) / 1000.0 / m
    bwd_s = np.bincount(stage, weights=t["bwd"], minlength=k) / 1000.0 / m
    act_s = np.bincount(stage, weights=t["act"], minlength=k) / m
    par_s = np.bincount(stage, weights=t["param"], minlength=k)
    cross: dict[tuple[int, int], set[int]] = {}
    for u, v in t["edges"]:
        if stage[u] != stage[v]:
            cross.setdefault((int(stage[u]), int(stage[v])), set()).add(int(u))

    def f_(s, j):
        return 2 * (s * m + j)

    def b_(s, j):
        return 2 * (s * m + j) + 1

    work, names = np.zeros(2 * k * m + k), []
    for s in range(k):
        for j in range(m):
            work[f_(s, j)], work[b_(s, j)] = fwd_s[s], bwd_s[s]
            names += [f"F{s}.{j}", f"B{s}.{j}"]
    names += [f"U{s}" for s in range(k)]
    edges, eb = [], []
    for j in range(m):
        for (s, d), srcs in sorted(cross.items()):
            by = float(t["act"][sorted(srcs)].sum()) / m
            edges += [(f_(s, j), f_(d, j)), (b_(d, j), b_(s, j))]
            eb += [by, by]
        for s in range(k):
            edges.append((f_(s, j), b_(s, j)))
            eb.append(act_s[s])
            edges.append((b_(s, j), 2 * k * m + s))
            eb.append(par_s[s])
    return DAG(
        work=work,
        edges=np.asarray(edges, dtype=np.int64),
        edge_bytes=np.asarray(eb, dtype=np.float64),
        name=f"pipedream-{model}-pipeline{k}x{m}",
        source=f"pipedream:{model}, mode=pipeline, gpus={k}, microbatches={m} (msr-fiddle/pipedream@11c40c0, MIT)",
        task_names=tuple(names),
        meta={
            "model": model,
            "mode": "pipeline",
            "gpus": k,
            "microbatches": m,
            "layer_stage": stage.tolist(),
        },
    )
