"""Rules for a rule portfolio: the named heuristics plus SRSF and the non-preemptive form of a preemptive rule.

A portfolio is what a scheduler that picks a rule per decision chooses among (``JobSelect-v1(rules=...)``, the
rollout search of ``scripts/studies/jobselect_headroom.py``). :func:`make_rule` makes one by name:

- a name of :data:`~gpusched_envs.policies.schedulers.POLICIES` (``srtf``, ``las``, ``gittins``, ...);
- ``srsf``: shortest remaining GPU-service first (remaining ideal time × GPUs), preemptive, clairvoyant;
- ``<preemptive rule>-nopreempt`` (``srtf-nopreempt``, ``srsf-nopreempt``, ``las-nopreempt``, ...): the rule's
  order applied to the waiting jobs on the free GPUs only, with backfill; it preempts nothing.
"""

from __future__ import annotations

from gpusched_envs.policies.preemptive import PreemptivePolicy
from gpusched_envs.policies.schedulers import (
    POLICIES,
    PREEMPTIVE_POLICIES,
    QueuePolicy,
    is_clairvoyant,
    make_policy,
)

NOPREEMPT = "-nopreempt"


class SRSF(PreemptivePolicy):
    """Shortest remaining GPU-service (remaining ideal time × GPUs) first, preemptive (clairvoyant)."""

    name = "srsf"
    clairvoyant = True

    def priority(self, sim, job):
        return (sim.remaining_ideal_time(job) * sim.job_gpus_n[job], job)


class NoPreempt(QueuePolicy):
    """A preemptive rule's order applied to the waiting jobs on the free GPUs only (list scheduling with backfill):
    it preempts nothing."""

    def __init__(self, inner: PreemptivePolicy):
        super().__init__(inner.placement)
        self.inner = inner
        self.name = f"{inner.name}{NOPREEMPT}"
        self.clairvoyant = bool(getattr(inner, "clairvoyant", False))

    def reset(self, sim) -> None:
        self.inner.reset(sim)

    def key(self, sim, job):
        return self.inner.priority(sim, job)


PREEMPTIVE_RULES = (*PREEMPTIVE_POLICIES, "srsf")
RULES = (*POLICIES, "srsf", *(f"{n}{NOPREEMPT}" for n in PREEMPTIVE_RULES))


def _preemptive(name: str, placement: str | None) -> PreemptivePolicy:
    if name == "srsf":
        return SRSF(placement) if placement is not None else SRSF()
    return make_policy(name, placement)


def make_rule(name: str, placement: str | None = None):
    """The rule ``name`` (module docstring) with placement ``placement`` (None: the rule's default)."""
    if not isinstance(name, str) or name not in RULES:
        raise ValueError(f"unknown rule {name!r}; choose one of: {', '.join(RULES)}")
    if name.endswith(NOPREEMPT):
        return NoPreempt(_preemptive(name[: -len(NOPREEMPT)], placement))
    if name == "srsf":
        return _preemptive(name, placement)
    return make_policy(name, placement)


def rule_is_clairvoyant(name: str) -> bool:
    """Whether rule ``name`` reads traced durations / remaining work."""
    base = name[: -len(NOPREEMPT)] if name.endswith(NOPREEMPT) else name
    return base == "srsf" or is_clairvoyant(base)


def rule_preempts(name: str) -> bool:
    """Whether rule ``name`` may preempt running jobs."""
    return name in PREEMPTIVE_RULES


__all__ = ["NOPREEMPT", "RULES", "SRSF", "NoPreempt", "make_rule", "rule_is_clairvoyant", "rule_preempts"]
