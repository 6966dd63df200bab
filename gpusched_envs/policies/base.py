"""The scheduler interface shared by heuristics, envs and learned agents.

At each decision point the simulator calls ``policy.schedule(sim)``; a policy reads the simulator's state
(``sim.queue``, ``sim.running``, ``sim.free_mask(job)``, ...) and acts only through ``sim.start(job, gpus)`` and
``sim.preempt(job)``; returning without acting is "wait".
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from gpusched_envs.sim.defaults import sim_defaults

policy_defaults = sim_defaults  # the policies' defaults live in data/sim_defaults.yaml too


class Policy(ABC):
    """A scheduler. Subclasses implement :meth:`schedule`; :meth:`reset` is called once before a run."""

    name: str = "policy"
    clairvoyant: bool = (
        False  # reads traced durations or remaining work (SJF, SRTF): not a real scheduler's view
    )
    preemptive: bool = False  # may call ``sim.preempt``

    def reset(self, sim) -> None:  # noqa: B027 - optional hook
        """Called once when a run starts."""

    @abstractmethod
    def schedule(self, sim) -> None:
        """Act at a decision point through ``sim.start`` / ``sim.preempt``."""
