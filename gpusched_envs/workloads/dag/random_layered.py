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

import math

import numpy as np

from gpusched_envs.sim.defaults import sim_defaults

from .model import DAG

# bytes/s, reference bandwidth at which ``ccr`` holds: ``data/sim_defaults.yaml`` (with its source)
DEFAULT_BANDWIDTH = float(sim_defaults()["dag_reference_bandwidth_bytes_per_s"]["value"])


def _level_widths(n: int, alpha: float, rng: np.random.Generator) -> list[int]:
    mean_h = max(1.0, math.sqrt(n) / alpha)
    h = min(max(round(rng.uniform(0.5 * mean_h, 1.5 * mean_h)), 1), n)
    mean_w = n / h  # ≈ sqrt(n) * alpha
    w = np.maximum(1, np.round(rng.uniform(0.5 * mean_w, 1.5 * mean_w, size=h))).astype(np.int64).tolist()
    # adjust to exactly n tasks, keeping every level non-empty
    total = sum(w)
    while total > n:
        big = [lv for lv in range(h) if w[lv] > 1]
        w[big[rng.choice(len(big))]] -= 1
        total -= 1
    while total < n:
        w[rng.integers(h)] += 1
        total += 1
    return w


def _layered_edges(n: int, widths: list[int], out_degree: int, rng: np.random.Generator) -> np.ndarray:
    """The (E, 2) int64 edges, sorted by (src, dst): every task not on the last level gets ``U{1..out_degree}``
    children on later levels (about half of them on the next level), every task below the first level without a
    parent then gets one on the level just above it."""
    h = len(widths)
    starts = [0]
    for width in widths:
        starts.append(starts[-1] + width)
    keys: set[int] = set()  # edge src -> dst as src * n + dst
    has_parent = [False] * n
    for lv in range(h - 1):
        a, b = starts[lv + 1], starts[lv + 2]  # the next level's tasks are a..b-1, the candidates a..n-1
        n_next, n_cands = b - a, n - a
        for i in range(starts[lv], a):
            k = int(min(rng.integers(1, out_degree + 1), n_cands))
            # favour the next level: half of the children come from it when possible
            k_next = min(n_next, max(1, k // 2 + k % 2))
            chosen = sorted(rng.choice(n_next, size=k_next, replace=False).tolist())
            for j in range(k_next):
                chosen[j] += a
            n_rest = n_cands - k_next  # the candidates not chosen yet, in increasing order
            if k - k_next > 0 and n_rest:
                for j in rng.choice(n_rest, size=min(k - k_next, n_rest), replace=False).tolist():
                    c = a + j  # the j-th candidate not in chosen
                    for x in chosen:
                        if x > c:
                            break
                        c += 1
                    keys.add(i * n + c)
                    has_parent[c] = True
            for c in chosen:
                keys.add(i * n + c)
                has_parent[c] = True
    for lv in range(1, h):
        for i in range(starts[lv], starts[lv + 1]):
            if not has_parent[i]:
                keys.add(int(rng.integers(starts[lv - 1], starts[lv])) * n + i)
    flat = np.array(sorted(keys), dtype=np.int64)
    e = np.empty((len(flat), 2), dtype=np.int64)
    np.floor_divide(flat, n, out=e[:, 0])
    np.remainder(flat, n, out=e[:, 1])
    return e


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
    e = _layered_edges(n, widths, out_degree, rng)
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
