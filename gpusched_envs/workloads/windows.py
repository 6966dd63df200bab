"""Philly windows: workloads of the first jobs of the Philly trace after a start day drawn per episode, rescaled
to an offered load (the multi-agent env's train and held-out workloads), and the ``"philly-windows:..."`` spec."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from gpusched_envs.sim.topology import Cluster
from gpusched_envs.sim.workload import Workload


class PhillyWindows:
    """Workload generator ``f(cluster, rng)``: the first ``jobs`` Philly jobs (that fit the cluster) submitted after a
    start drawn uniformly between day ``first`` and day ``last`` of the trace, arrivals rescaled to offered load
    ``load`` on the cluster's GPUs. Disjoint day ranges give disjoint train and held-out workloads.

    Spec string (the env's ``workload`` argument): ``"philly-windows:first=20,last=80,jobs=150,load=1.0"``."""

    KEYS = {"first": float, "last": float, "jobs": int, "load": float}

    def __init__(self, first: float = 20.0, last: float = 80.0, jobs: int = 150, load: float = 1.0):
        if not 0 <= first <= last:
            raise ValueError(
                f"philly-windows: need 0 <= first <= last (days), got first={first}, last={last}"
            )
        if jobs < 2 or not np.isfinite(load) or load <= 0:
            raise ValueError(f"philly-windows: need jobs >= 2 and load > 0, got jobs={jobs}, load={load}")
        self.first, self.last, self.jobs, self.load = float(first), float(last), int(jobs), float(load)

    @classmethod
    def parse(cls, spec: str) -> PhillyWindows:
        kwargs: dict[str, Any] = {}
        for item in filter(None, spec.split(":", 1)[1].split(",") if ":" in spec else []):
            key, _, value = item.partition("=")
            if key not in cls.KEYS or not value:
                raise ValueError(f"workload {spec!r}: bad item {item!r} (keys: {', '.join(cls.KEYS)})")
            try:
                kwargs[key] = cls.KEYS[key](value)
            except ValueError:
                raise ValueError(f"workload {spec!r}: {key}={value!r} is not a number") from None
        return cls(**kwargs)

    def __call__(self, cluster: Cluster, rng: np.random.Generator) -> Workload:
        from gpusched_envs.workloads.select import scale_to_load, select

        trace = _philly_trace()
        start = float(rng.uniform(self.first, self.last)) * 86400.0
        window = select(trace, start=start)
        window = window.subset(np.flatnonzero(window.num_gpus <= cluster.num_gpus)[: self.jobs])
        return scale_to_load(window, self.load, cluster.num_gpus)


@functools.cache
def _philly_trace() -> Workload:
    from gpusched_envs.workloads.registry import load_workload

    return load_workload("philly", seed=0)


def resolve_multi_workload(workload):
    """``"philly-windows:..."`` becomes a :class:`PhillyWindows`; anything else is the envs' workload argument."""
    if isinstance(workload, str) and workload.split(":", 1)[0] == "philly-windows":
        return PhillyWindows.parse(workload)
    return workload
