"""Non-clairvoyant priority from the history of job sizes: discretised LAS and a 2D-Gittins index (Tiresias).

Neither reads a job's own duration. :class:`LAS` is Tiresias' discretised least-attained-service with many queues
(geometric thresholds on attained GPU-seconds, FIFO inside a queue). :class:`Gittins` ranks jobs by the Gittins
index of their attained GPU-service (Gu et al., NSDI'19, §3.2 "2D-Gittins"; Gittins index: Aalto et al., 2009):
for a job that has received ``a`` GPU-seconds,

    G(a) = sup_Δ  P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a]

where ``S`` is the GPU-service (duration × GPUs) of a job from the cluster's *history*: the chance of finishing
within the next quantum per unit of service spent. The distribution is knowledge a real scheduler has from past
jobs, not the job's own future; the bundled table (``data/fits/philly_gittins.yaml``) is fitted by
``scripts/fit_gittins.py`` on Philly jobs submitted **before 2017-11-01** only, so the held-out windows after that
date are never seen. The index is evaluated on a geometric grid of attained service (piecewise constant between
grid points, like Tiresias' queues), with one table per GPU-count class (the requested GPU count is known at
submission), and a timer fires when a running job reaches the next grid point while others wait.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import numpy as np

from gpusched_envs.policies.preemptive import Tiresias


def gittins_index(service, grid) -> np.ndarray:
    """Gittins index of a job that has attained ``grid[k]`` units of service, for every ``k``, under the empirical
    distribution of ``service`` (samples > 0). 0 where no sample exceeds ``grid[k]`` (no history beyond it)."""
    s = np.sort(np.asarray(service, dtype=float))
    if s.size == 0 or not np.all(s > 0):
        raise ValueError("gittins_index: service samples must be a non-empty array of values > 0")
    out = np.zeros(len(grid))
    for k, a in enumerate(np.asarray(grid, dtype=float)):
        r = s[s > a] - a  # residual service of the jobs that survive to a, sorted
        m = r.size
        if m == 0:
            continue
        # quantum Δ = r_i (the supremum is reached at a support point): P(r ≤ r_i) = (i+1)/m,
        # E[min(r, r_i)] = (Σ_{j≤i} r_j + (m−i−1) r_i) / m
        i = np.arange(m)
        expected = (np.cumsum(r) + (m - i - 1) * r) / m
        out[k] = float(np.max(((i + 1) / m) / expected))
    return out


def gpu_class_of(num_gpus: int, bounds) -> int:
    """Index of the GPU-count class of a job (``bounds``: upper GPU counts of the classes, ascending)."""
    return min(int(np.searchsorted(bounds, num_gpus, side="left")), len(bounds) - 1)


@lru_cache(maxsize=4)
def load_gittins_table(name: str = "philly_gittins.yaml") -> dict:
    """The bundled Gittins table: ``grid`` (attained GPU-seconds), ``class_max_gpus`` and ``index`` (one row per
    class), read from ``gpusched_envs/data/fits``."""
    import yaml

    doc = yaml.safe_load(resources.files("gpusched_envs").joinpath("data/fits", name).read_text())
    grid = np.asarray(doc["grid_gpu_s"], dtype=float)
    bounds = np.asarray([c["max_gpus"] for c in doc["classes"]], dtype=int)
    index = np.asarray([c["index"] for c in doc["classes"]], dtype=float)
    if index.shape != (len(bounds), len(grid)):
        raise ValueError(
            f"data/fits/{name}: index table has shape {index.shape}, expected {(len(bounds), len(grid))}"
        )
    return {"grid": grid, "bounds": bounds, "index": index}


class LAS(Tiresias):
    """Discretised least attained service with many queues: Tiresias 2D-LAS with geometric thresholds
    ``first × factor**k`` GPU-seconds (k < levels), FIFO by submit time inside a queue, preemptive."""

    name = "las"
    _compiled_priority = (
        "level"  # the engine's compiled loop: Tiresias' rule (PreemptivePolicy.compiled_spec)
    )

    def __init__(
        self, placement: str = "closest", first: float = 900.0, factor: float = 4.0, levels: int = 7
    ):
        if not first > 0 or not factor > 1 or levels < 1:
            raise ValueError(
                f"las: need first > 0, factor > 1, levels >= 1 (got {first}, {factor}, {levels})"
            )
        super().__init__(placement, thresholds=[first * factor**k for k in range(levels)])


class Gittins(Tiresias):
    """2D-Gittins: highest Gittins index of attained GPU-service first (from a table fitted on past jobs, per
    GPU-count class), FIFO by submit time among equal indices, preemptive. Non-clairvoyant."""

    name = "gittins"
    _compiled_priority = "gittins"  # the engine's compiled loop: the index table's rule

    def __init__(self, placement: str = "closest", table: dict | None = None, per_class: bool = True):
        table = load_gittins_table() if table is None else table
        grid = np.asarray(table["grid"], dtype=float)
        super().__init__(placement, thresholds=list(grid[1:]))  # level k ⇔ attained in [grid[k], grid[k+1])
        self.index = np.asarray(table["index"], dtype=float)
        self.bounds = np.asarray(table["bounds"], dtype=int)
        self.per_class = bool(per_class)
        if not self.per_class:  # one table for every job: the class holding most jobs (row 0, 1-GPU jobs)
            self.index = self.index[:1]
            self.bounds = self.bounds[-1:]

    def priority(self, sim, job: int):
        level = self.queue_level(sim, job)
        cls = gpu_class_of(int(sim.job_gpus_n[job]), self.bounds)
        return (-self.index[cls, level], sim.workload.submit_time[job], job)
