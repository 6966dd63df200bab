"""Synthetic DAG jobs shaped like Alibaba cluster-trace-v2018 batch jobs.

Samples from statistics fitted by ``scripts/fit_alibaba_dag.py`` and bundled as
``gpusched_envs/data/fits/alibaba2018_dag_fit.yaml`` (no trace rows are bundled). Per job:

1. the task count ``n`` (given, or drawn from the fitted tasks-per-job distribution restricted to ``n >= min_tasks``);
2. the depth: ``1 + round(f * (n - 1))`` with ``f`` drawn from the size bucket's depth-fraction quantiles;
3. the level widths: one task per level plus the rest spread over the levels by the bucket's level profile (share
   of tasks by normalised level position);
4. parents: every task below level 0 draws an in-degree from the bucket's in-degree distribution; one parent is on
   the level just above, each further one is on the level above with probability ``1 - skip_edge_fraction`` and on a
   uniformly drawn higher level otherwise; tasks left without a child (other than on the last level) get one child
   on the next level, which makes the DAG converge like the trace's jobs (median one sink);
5. work: task durations, zero with the fitted probability, else log-normal with the fitted parameters (seconds).

The trace has no data sizes; ``ccr`` > 0 gives every edge ``ccr * mean(work) * bandwidth`` bytes.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import yaml

from .model import DAG
from .random_layered import DEFAULT_BANDWIDTH

FIT_FILE = "alibaba2018_dag_fit.yaml"


@lru_cache(maxsize=1)
def load_fit() -> dict[str, Any]:
    """The bundled fitted statistics (parsed YAML)."""
    text = resources.files("gpusched_envs").joinpath("data", "fits", FIT_FILE).read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _pmf(d: dict) -> tuple[np.ndarray, np.ndarray]:
    k = np.array(sorted(int(x) for x in d), dtype=np.int64)
    p = np.array([float(d[int(x)] if int(x) in d else d[str(x)]) for x in k])
    return k, p / p.sum()


def _bucket(fit: dict, n: int) -> dict:
    for b in fit["size_buckets"]:
        if b["min_tasks"] <= n <= b["max_tasks"]:
            return b
    return fit["size_buckets"][-1] if n > 2 else fit["size_buckets"][0]


def sample_num_tasks(rng: np.random.Generator, *, min_tasks: int = 2, max_tasks: int | None = None) -> int:
    """A task count from the fitted tasks-per-job distribution, restricted to ``[min_tasks, max_tasks]``."""
    k, p = _pmf(load_fit()["tasks_per_job_pmf"])
    keep = (k >= min_tasks) & (k <= (max_tasks if max_tasks is not None else k.max()))
    if not keep.any():
        raise ValueError(f"no fitted job sizes in [{min_tasks}, {max_tasks}]")
    return int(rng.choice(k[keep], p=p[keep] / p[keep].sum()))


def alibaba_like_dag(
    n: int | None = None,
    *,
    seed: int = 0,
    min_tasks: int = 2,
    ccr: float = 0.0,
    bandwidth: float = DEFAULT_BANDWIDTH,
) -> DAG:
    """One synthetic Alibaba-like DAG job (see the module docstring)."""
    fit = load_fit()
    rng = np.random.default_rng(seed)
    if n is None:
        n = sample_num_tasks(rng, min_tasks=min_tasks)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    b = _bucket(fit, n)
    # depth
    q = np.asarray(b["depth_fraction_quantiles"], dtype=np.float64)
    f = float(np.interp(rng.random(), np.linspace(0, 1, len(q)), q))
    depth = int(np.clip(1 + round(f * (n - 1)), 1, n))
    # level widths
    widths = np.ones(depth, dtype=np.int64)
    if n > depth:
        prof = np.asarray(b["level_profile"], dtype=np.float64)
        pos = np.arange(depth) / max(depth - 1, 1)
        w = prof[np.minimum((pos * len(prof)).astype(int), len(prof) - 1)] + 1e-9
        widths += rng.multinomial(n - depth, w / w.sum())
    starts = np.concatenate([[0], np.cumsum(widths)])
    level = np.repeat(np.arange(depth), widths)
    kd, pd = _pmf(b["in_degree_pmf"])
    skip = float(b["skip_edge_fraction"])
    edges: set[tuple[int, int]] = set()
    for i in range(int(starts[1]), n):
        lv = int(level[i])
        k = int(min(rng.choice(kd, p=pd), starts[lv]))
        prev = np.arange(starts[lv - 1], starts[lv])
        chosen = {int(rng.choice(prev))}
        tries = 0
        while len(chosen) < k and tries < 20 * k:
            tries += 1
            if lv >= 2 and rng.random() < skip:
                chosen.add(int(rng.integers(0, starts[lv - 1])))
            else:
                chosen.add(int(rng.choice(prev)))
            if len(chosen) == len(prev) and lv < 2:
                break
        edges.update((p, i) for p in chosen)
    has_child = np.zeros(n, dtype=bool)
    for s, _ in edges:
        has_child[s] = True
    for i in range(int(starts[-2]) if depth > 1 else 0):
        if not has_child[i]:
            lv = int(level[i])
            edges.add((i, int(rng.integers(starts[lv + 1], starts[lv + 2]))))
    e = np.asarray(sorted(edges), dtype=np.int64).reshape(-1, 2)
    dur = fit["duration_s"]
    work = rng.lognormal(dur["lognormal_mu"], dur["lognormal_sigma"], size=n)
    work[rng.random(n) < dur["zero_fraction"]] = 0.0
    eb = np.full(len(e), ccr * float(work.mean()) * bandwidth) if ccr > 0 else np.zeros(len(e))
    return DAG(
        work=work,
        edges=e,
        edge_bytes=eb,
        name=f"alibaba-like-n{n}-s{seed}",
        source=f"alibaba_like(n={n}, seed={seed}, ccr={ccr:g}, bandwidth={bandwidth:g}; fit={FIT_FILE})",
        meta={"generator": "alibaba_like", "levels": depth},
    )
