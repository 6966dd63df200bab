"""Preemptive priority schedulers: SRTF (clairvoyant) and Tiresias 2D-LAS, on :class:`PreemptivePolicy`.

A preemptive policy chooses, at every decision point, the highest-priority set of jobs whose GPU demand fits each
pool, and starts its waiting jobs in priority order; a waiting job that cannot be placed preempts running jobs
outside the set, lowest priority first, one at a time until it can be placed (so no job is preempted for nothing,
except when even all candidates free too little for its placement rule).
"""

from __future__ import annotations

import numpy as np

from gpusched_envs.policies.base import Policy, policy_defaults
from gpusched_envs.policies.placement import closest, consolidate, get_placement, pack


class PreemptivePolicy(Policy):
    """Priority scheduling with preemption; subclasses give :meth:`priority` (smaller first)."""

    name = "preemptive"
    preemptive = True

    def __init__(self, placement: str = "closest"):
        self.placement = placement
        self.place = get_placement(placement)

    def priority(self, sim, job: int):
        raise NotImplementedError

    def compiled_spec(self) -> dict | None:
        """How the engine's compiled loop (:mod:`gpusched_envs.sim.loop_kernels`) runs this policy in
        :meth:`Simulator.run <gpusched_envs.sim.engine.Simulator.run>` (after :meth:`reset`), or None where it
        cannot (a subclass, an overridden method, a placement other than ``closest`` / ``consolidate`` / ``pack``):
        the placement (``spread``, ``affinity``), the ``priority`` rule ("srtf", "level": Tiresias / LAS, "gittins"
        with its ``index`` and ``bounds``), the ``thresholds`` and the pools' ``capacity``."""
        kind = type(self).__dict__.get("_compiled_priority")  # the built-in classes' own, not a subclass's
        own = {"schedule", "priority", "after_schedule", "queue_level", "reset"}
        if kind is None or own & set(vars(self)) or not hasattr(self, "_capacity"):
            return None
        rule = {closest: (True, False), consolidate: (False, False), pack: (True, True)}.get(self.place)
        if rule is None:
            return None
        spec = {
            "backfill": True,
            "spread": rule[0],
            "affinity": rule[1],
            "order": "priority",
            "priority": kind,
        }
        spec["capacity"] = {int(p): int(c) for p, c in self._capacity.items()}
        if kind != "srtf":
            spec["thresholds"] = np.asarray(self.thresholds, dtype=float)
        if kind == "gittins":
            spec["index"], spec["bounds"] = self.index, self.bounds
        return spec

    def reset(self, sim) -> None:
        c = sim.cluster
        pools = c.server_pool[c.gpu_server]
        self._capacity = {int(p): int(np.sum(pools == p)) for p in np.unique(pools)}

    def schedule(self, sim) -> None:
        if not hasattr(self, "_capacity"):
            self.reset(sim)
        order = sorted([*sim.queue, *sim.running], key=lambda j: self.priority(sim, j))
        budget = dict(self._capacity)
        chosen: list[int] = []
        for job in order:
            pool = int(sim.job_pool[job])
            need = sim.job_gpus_n[job] * min(sim.job_milli[job], 1000) / 1000.0
            if budget.get(pool, 0) >= need:
                budget[pool] -= need
                chosen.append(job)
        chosen_set = set(chosen)
        # running jobs outside the chosen set, lowest priority first: preempted only when a chosen job needs them
        victims = [j for j in reversed(order) if j in sim.running and j not in chosen_set]
        for job in chosen:
            if job not in sim.queue:
                continue
            gpus = self.place(sim, job)
            k = sim.job_allowed[job]
            while gpus is None:
                useful = [
                    v
                    for v in victims
                    if sim.job_pool[v] == sim.job_pool[job]
                    and (k < 0 or sim.allowed_masks[k][sim.job_gpus[v]].any())
                ]
                if not useful:
                    break
                victims.remove(useful[0])
                sim.preempt(useful[0])
                gpus = self.place(sim, job)
            if gpus is not None:
                sim.start(job, gpus)
        self.after_schedule(sim)

    def after_schedule(self, sim) -> None:  # noqa: B027 - optional hook
        pass


class SRTF(PreemptivePolicy):
    """Shortest remaining time first (clairvoyant: remaining work at ideal speed), preemptive."""

    name = "srtf"
    clairvoyant = True
    _compiled_priority = "srtf"

    def priority(self, sim, job: int):
        return (sim.remaining_ideal_time(job), job)


class Tiresias(PreemptivePolicy):
    """Tiresias 2D-LAS (Gu et al., NSDI'19): discretised least attained service in GPU-seconds, FIFO inside a queue,
    preemptive. Thresholds default to ``data/sim_defaults.yaml``. A timer fires when a running job crosses a
    threshold while others wait, so demotion takes effect at that instant."""

    name = "tiresias"
    _compiled_priority = "level"

    def __init__(self, placement: str = "closest", thresholds: list[float] | None = None):
        super().__init__(placement)
        if thresholds is None:
            thresholds = policy_defaults()["tiresias"]["queue_thresholds_gpu_s"]["value"]
        self.thresholds = np.asarray(sorted(thresholds), dtype=float)

    def queue_level(self, sim, job: int) -> int:
        return int(np.searchsorted(self.thresholds, sim.attained_service(job), side="right"))

    def priority(self, sim, job: int):
        return (self.queue_level(sim, job), sim.workload.submit_time[job], job)

    def after_schedule(self, sim) -> None:
        if not sim.queue:
            return
        soonest = np.inf
        for job in sim.running:
            level = self.queue_level(sim, job)
            if level < len(self.thresholds):
                gap = self.thresholds[level] - sim.attained_service(job)
                soonest = min(soonest, sim.now + max(gap, 0.0) / sim.job_gpus_n[job] + 1e-6)
        if np.isfinite(soonest):
            sim.set_timer(soonest)
