"""Classical job schedulers by name: FIFO, SJF, Gandiva-style packing (here), SRTF and Tiresias 2D-LAS
(:mod:`gpusched_envs.policies.preemptive`), LAS and Gittins (:mod:`gpusched_envs.policies.gittins`), NetSens delay
scheduling (:mod:`gpusched_envs.policies.netsens`); :func:`make_policy` builds one.

Each combines a queue order with a placement rule (:mod:`gpusched_envs.policies.placement`).
Non-preemptive policies start waiting jobs in their order; FIFO is strict (a head job that cannot be placed blocks
the jobs behind it in its pool), the others skip a job that does not fit and try the next (``backfill``).
"""

from __future__ import annotations

from gpusched_envs.policies.base import Policy, policy_defaults
from gpusched_envs.policies.gittins import LAS, Gittins
from gpusched_envs.policies.netsens import AutoDelaySchedulingPolicy, DelaySchedulingPolicy
from gpusched_envs.policies.placement import closest, consolidate, get_placement, pack
from gpusched_envs.policies.preemptive import SRTF, PreemptivePolicy, Tiresias


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

    def compiled_spec(self) -> dict | None:
        """How the engine's compiled loop (:mod:`gpusched_envs.sim.loop_kernels`) runs this policy in
        :meth:`Simulator.run <gpusched_envs.sim.engine.Simulator.run>`, or None where it cannot (a subclass, a
        placement other than ``closest`` / ``consolidate`` / ``pack``, an overridden method): ``backfill``,
        ``spread`` (closest, pack), ``affinity`` (pack) and ``order`` ("submit": by job, "duration": SJF's key)."""
        order = _COMPILED_ORDER.get(type(self))
        if order is None or "schedule" in vars(self) or "key" in vars(self):
            return None
        rule = {closest: (True, False), consolidate: (False, False), pack: (True, True)}.get(self.place)
        if rule is None:
            return None
        return {"backfill": bool(self.backfill), "spread": rule[0], "affinity": rule[1], "order": order}

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


class FIFOBackfill(FIFO):
    """FIFO order with backfill: when the head job does not fit, a later job that fits starts (the reference beside
    strict FIFO)."""

    name = "fifo-backfill"
    backfill = True


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


# the queue policies the engine's compiled loop runs, and the order each takes the queue in
_COMPILED_ORDER = {
    QueuePolicy: "submit",
    FIFO: "submit",
    FIFOBackfill: "submit",
    SJF: "duration",
    Gandiva: "submit",
}

POLICIES = {
    "fifo": FIFO,
    "fifo-backfill": FIFOBackfill,
    "sjf": SJF,
    "srtf": SRTF,
    "tiresias": Tiresias,
    "las": LAS,
    "gittins": Gittins,
    "gandiva": Gandiva,
    "netsens": DelaySchedulingPolicy,
    "netsens-auto": AutoDelaySchedulingPolicy,
}


# which heuristics an agent is compared with, by the information it sees: a non-clairvoyant agent
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


# PreemptivePolicy, SRTF, Tiresias (gpusched_envs.policies.preemptive) and policy_defaults (gpusched_envs.policies.base)
# are re-exported here, where they were defined before
__all__ = [
    "CLAIRVOYANT_POLICIES",
    "FIFO",
    "NON_CLAIRVOYANT_POLICIES",
    "POLICIES",
    "PREEMPTIVE_POLICIES",
    "SJF",
    "SRTF",
    "Gandiva",
    "PreemptivePolicy",
    "QueuePolicy",
    "Tiresias",
    "comparable_policies",
    "is_clairvoyant",
    "make_policy",
    "policy_defaults",
]
