"""Random layered DAGs with the knobs of Topcuoglu, Hariri & Wu, "Performance-effective and low-complexity task
scheduling for heterogeneous computing", IEEE TPDS 13(3), 2002, §5.1 (the HEFT paper's random graph generator).

Knobs (paper symbol in brackets):

- ``n`` [v] number of tasks;
- ``alpha`` [alpha] shape: the number of levels is drawn around ``sqrt(n) / alpha`` and the level widths around
  ``sqrt(n) * alpha`` (alpha >> 1: short, wide graphs; alpha << 1: long, thin graphs);
- ``out_degree`` maximum out-degree: every task not on the last level gets U{1..out_degree} children on later
  levels (and every task below the first level gets at least one parent on the level just above it);
- ``ccr`` [CCR] communication-to-computation ratio: mean edge transfer time at the reference ``bandwidth``
  (bytes/s) divided by mean task work;
- ``beta`` [beta] heterogeneity: each task gets unrelated-machine cost factors ``U[1 - beta/2, 1 + beta/2]``
  (stored in ``DAG.hetero``, ``hetero_columns`` of them; 0 = related machines only);
- ``mean_work`` [w_DAG] mean task work in reference GPU-seconds; task work is ``U[0, 2 * mean_work]``
  (floored at 1 % of ``mean_work``), edge data ``U[0, 2 * ccr * mean_work * bandwidth]`` bytes.

Everything is drawn from one ``numpy.random.Generator`` seeded by ``seed``: the same arguments give an identical DAG.
"""

from __future__ import annotations

import numpy as np

from gpusched_envs.sim.defaults import sim_defaults

from .model import DAG

# bytes/s, reference bandwidth at which ``ccr`` holds: ``data/sim_defaults.yaml`` (with its source)
DEFAULT_BANDWIDTH = float(sim_defaults()["dag_reference_bandwidth_bytes_per_s"]["value"])


def _level_widths(n: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    mean_h = max(1.0, np.sqrt(n) / alpha)
    h = int(np.clip(round(rng.uniform(0.5 * mean_h, 1.5 * mean_h)), 1, n))
    mean_w = n / h  # ≈ sqrt(n) * alpha
    w = np.maximum(1, np.round(rng.uniform(0.5 * mean_w, 1.5 * mean_w, size=h))).astype(np.int64)
    # adjust to exactly n tasks, keeping every level non-empty
    while w.sum() > n:
        big = np.flatnonzero(w > 1)
        w[rng.choice(big)] -= 1
    while w.sum() < n:
        w[rng.integers(h)] += 1
    return w


def random_layered_dag(
    n: int = 50,
    *,
    alpha: float = 1.0,
    out_degree: int = 3,
    ccr: float = 1.0,
    beta: float = 0.5,
    mean_work: float = 10.0,
    bandwidth: float = DEFAULT_BANDWIDTH,
    hetero_columns: int = 64,
    seed: int = 0,
) -> DAG:
    """A Topcuoglu-style random layered DAG (see the module docstring for the knobs)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if alpha <= 0 or out_degree < 1 or ccr < 0 or not 0 <= beta < 2 or mean_work <= 0 or bandwidth <= 0:
        raise ValueError(
            "need alpha > 0, out_degree >= 1, ccr >= 0, 0 <= beta < 2, mean_work > 0, bandwidth > 0; got "
            f"alpha={alpha}, out_degree={out_degree}, ccr={ccr}, beta={beta}, mean_work={mean_work}, "
            f"bandwidth={bandwidth}"
        )
    rng = np.random.default_rng(seed)
    widths = _level_widths(n, alpha, rng)
    starts = np.concatenate([[0], np.cumsum(widths)])
    level = np.repeat(np.arange(len(widths)), widths)
    edges: set[tuple[int, int]] = set()
    for i in range(n):
        lv = level[i]
        if lv == len(widths) - 1:
            continue
        cands = np.arange(starts[lv + 1], n)
        k = int(min(rng.integers(1, out_degree + 1), len(cands)))
        # favour the next level: half of the children come from it when possible
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
            p = int(rng.integers(starts[lv - 1], starts[lv]))
            edges.add((p, i))
    e = np.asarray(sorted(edges), dtype=np.int64).reshape(-1, 2)
    work = np.maximum(rng.uniform(0.0, 2.0 * mean_work, size=n), 0.01 * mean_work)
    edge_bytes = rng.uniform(0.0, 2.0 * ccr * mean_work * bandwidth, size=len(e))
    hetero = None
    if beta > 0:
        hetero = rng.uniform(1.0 - beta / 2.0, 1.0 + beta / 2.0, size=(n, hetero_columns))
    src = (
        f"random_layered(n={n}, alpha={alpha:g}, out_degree={out_degree}, ccr={ccr:g}, beta={beta:g}, "
        f"mean_work={mean_work:g}, bandwidth={bandwidth:g}, seed={seed})"
    )
    return DAG(
        work=work,
        edges=e,
        edge_bytes=edge_bytes,
        name=f"random-n{n}-s{seed}",
        source=src,
        hetero=hetero,
        meta={"levels": len(widths), "generator": "topcuoglu2002"},
    )
