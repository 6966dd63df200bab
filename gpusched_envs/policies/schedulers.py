"""Classical job schedulers: FIFO, SJF, SRTF (clairvoyant), Tiresias 2D-LAS and Gandiva-style packing.

Each combines a queue order with a placement rule (:mod:`gpusched_envs.policies.placement`).
Non-preemptive policies start waiting jobs in their order; FIFO is strict (a head job that cannot be placed blocks
the jobs behind it in its pool), the others skip a job that does not fit and try the next (``backfill``).
Preemptive policies (SRTF, Tiresias) choose, at every decision point, the highest-priority set of jobs whose GPU
demand fits each pool, and start its waiting jobs in priority order; a waiting job that cannot be placed preempts
running jobs outside the set, lowest priority first, one at a time until it can be placed (so no job is preempted
for nothing, except when even all candidates free too little for its placement rule).
"""

from __future__ import annotations

import numpy as np

from gpusched_envs.policies.base import Policy
from gpusched_envs.policies.placement import get_placement
from gpusched_envs.sim.defaults import sim_defaults

policy_defaults = sim_defaults  # the policies' defaults live in data/sim_defaults.yaml too


class QueuePolicy(Policy):
    """Non-preemptive list scheduling in the order given by :meth:`key` (smaller first)."""

    name = "queue"
    backfill = True

    def __init__(self, placement: str = "closest", backfill: bool | None = None):
        self.placement = placement
        self.place = get_placement(placement)
        if backfill is not None:
            self.backfill = backfill

    def key(self, sim, job: int):
        return job

    def schedule(self, sim) -> None:
        if not sim.free_gpus() and not (sim.job_milli < 1000).any():
            return
        blocked: set[int] = set()
        for job in sorted(sim.queue, key=lambda j: self.key(sim, j)):
            pool = int(sim.job_pool[job])
            if pool in blocked:
                continue
            gpus = self.place(sim, job)
            if gpus is None:
                if not self.backfill:
                    blocked.add(pool)
                continue
            sim.start(job, gpus)


class FIFO(QueuePolicy):
    """First in, first out by submit time; strict (no backfill) unless ``backfill=True``."""

    name = "fifo"
    backfill = False


class SJF(QueuePolicy):
    """Shortest job first by traced duration (clairvoyant), non-preemptive, with backfill."""

    name = "sjf"
    clairvoyant = True

    def key(self, sim, job: int):
        return (sim.workload.duration[job], job)


class Gandiva(QueuePolicy):
    """Gandiva-style: FIFO order with backfill and the ``pack`` placement (affinity by job size, GPU packing for
    fractional jobs). Gandiva's time-slicing and migration are not modelled."""

    name = "gandiva"

    def __init__(self, placement: str = "pack", backfill: bool | None = None):
        super().__init__(placement, backfill)


class PreemptivePolicy(Policy):
    """Priority scheduling with preemption; subclasses give :meth:`priority` (smaller first)."""

    name = "preemptive"
    preemptive = True

    def __init__(self, placement: str = "closest"):
        self.placement = placement
        self.place = get_placement(placement)

    def priority(self, sim, job: int):
        raise NotImplementedError

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

    def priority(self, sim, job: int):
        return (sim.remaining_ideal_time(job), job)


class Tiresias(PreemptivePolicy):
    """Tiresias 2D-LAS (Gu et al., NSDI'19): discretised least attained service in GPU-seconds, FIFO inside a queue,
    preemptive. Thresholds default to ``data/sim_defaults.yaml``. A timer fires when a running job crosses a
    threshold while others wait, so demotion takes effect at that instant."""

    name = "tiresias"

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


def _netsens(**kwargs):
    from gpusched_envs.policies.netsens import DelaySchedulingPolicy

    return DelaySchedulingPolicy(**kwargs)


def _netsens_auto(**kwargs):
    from gpusched_envs.policies.netsens import AutoDelaySchedulingPolicy

    return AutoDelaySchedulingPolicy(**kwargs)


def _las(**kwargs):
    from gpusched_envs.policies.gittins import LAS

    return LAS(**kwargs)


def _gittins(**kwargs):
    from gpusched_envs.policies.gittins import Gittins

    return Gittins(**kwargs)


POLICIES = {
    "fifo": FIFO,
    "sjf": SJF,
    "srtf": SRTF,
    "tiresias": Tiresias,
    "las": _las,
    "gittins": _gittins,
    "gandiva": Gandiva,
    "netsens": _netsens,
    "netsens-auto": _netsens_auto,
}


# which heuristics an agent is compared with, by the information it sees (issue 10): a non-clairvoyant agent
# against the schedulers that do not read durations, a clairvoyant one against those too and SJF / SRTF.
# ``las`` (many-queue Tiresias) is the strongest non-clairvoyant rule found on the held-in Philly windows
# (scripts/nc_heuristic_study.py); ``gittins`` is a named heuristic too but weaker there, so not a comparison row
CLAIRVOYANT_POLICIES = ("sjf", "srtf")
NON_CLAIRVOYANT_POLICIES = ("fifo", "gandiva", "tiresias", "las")
PREEMPTIVE_POLICIES = ("srtf", "tiresias", "las", "gittins")


def is_clairvoyant(policy) -> bool:
    """Whether a policy (a name of :data:`POLICIES` or a :class:`Policy`) reads traced durations / remaining work."""
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of: {', '.join(POLICIES)}")
        return policy in CLAIRVOYANT_POLICIES
    return bool(getattr(policy, "clairvoyant", False))


def comparable_policies(information: str = "non-clairvoyant", preemption: bool = True) -> tuple[str, ...]:
    """The heuristics of an agent's own class: non-clairvoyant FIFO, Gandiva, Tiresias, LAS; clairvoyant adds SJF
    and SRTF. ``preemption=False`` leaves out the preemptive ones (SRTF, Tiresias, LAS)."""
    if information not in ("non-clairvoyant", "clairvoyant"):
        raise ValueError(f"information must be 'non-clairvoyant' or 'clairvoyant', got {information!r}")
    names = NON_CLAIRVOYANT_POLICIES + (CLAIRVOYANT_POLICIES if information == "clairvoyant" else ())
    return tuple(n for n in names if preemption or n not in PREEMPTIVE_POLICIES)


def make_policy(name: str, placement: str | None = None, **kwargs) -> Policy:
    """A heuristic by name (``fifo``, ``sjf``, ``srtf``, ``tiresias``, ``las``, ``gittins``, ``gandiva``, ``netsens``,
    ``netsens-auto``)
    with a placement rule (NetSens picks its own: consolidate, then closest after the delay)."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}") from None
    if placement is not None:
        kwargs["placement"] = placement
    return cls(**kwargs)
