"""Per-agent heuristics of the multi-scheduler env (``multi_scheduler_v1``): every agent places its own jobs with
one named candidate placement in a queue order, optionally backfilling, preempting its own jobs, or cooperating on
one priority rule over the jobs of all agents. They act only through the env's per-agent actions, so an actor can
imitate them."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from gpusched_envs.policies.preemptive import Tiresias

# the candidate placements every agent may choose among (then one per rack: ``rack-r``)
BASE_CANDIDATES = ("closest", "consolidate", "first-fit", "pack", "spread")


class MultiAgentView(Protocol):
    """What a per-agent heuristic reads from the multi-scheduler env (``MultiSchedulerEnv`` provides it): the
    simulator and cluster, each agent's head jobs and running slots, and the action of a named candidate."""

    sim: Any
    cluster: Any
    preempt: int
    wait_action: int
    first_preempt_action: int

    def head_jobs(self, agent: str) -> np.ndarray: ...

    def running_slots(self, agent: str) -> np.ndarray: ...

    def candidate_action(self, agent: str, name: str, head: int = 0) -> int: ...


HEURISTIC_ORDERS = ("fifo", "sjf", "srtf", "tiresias")
CLAIRVOYANT_ORDERS = ("sjf", "srtf")


class HeuristicMultiAgent:
    """Every agent places its head job with one named candidate (default ``closest``) whenever it is valid, else
    waits: per-agent FIFO with that placement; with ``backfill`` (and ``heads > 1``) the first of its later
    head jobs (in the order) that the candidate can place goes instead. On a cluster whose pools are the agents'
    VCs, ``fifo`` reproduces ``Simulator.run(make_policy("fifo", placement))`` exactly.

    Orders (smaller first, ties: oldest): ``fifo`` (submit time); ``sjf`` (traced duration; clairvoyant);
    ``srtf`` (remaining time at ideal speed; clairvoyant); ``tiresias`` (2D-LAS queue level of the attained
    GPU-seconds, then submit time, with the thresholds of the single-agent Tiresias). With ``preempt`` (and an env
    built with ``preempt > 0``) an agent whose first job in the order cannot be placed preempts its own running job
    of lowest priority below that job's (one per step; only when the freed GPUs and the free ones could hold it),
    then places it at the next step: per-agent SRTF / Tiresias. An agent never preempts another agent's jobs, and
    reconsiders at the simulator's events (arrivals, completions), not at Tiresias' threshold crossings. With
    ``coop`` (needs ``preempt``) the agents apply one priority rule to the jobs of all and yield their own running
    jobs to any agent's (:meth:`_coop`). Every action is one of the agent's own actions (``candidate_action``): an
    actor can imitate it.

    Names (:meth:`from_name`): ``ORDER-PLACEMENT[+backfill][+preempt][+coop]``, e.g.
    ``srtf-consolidate+backfill+preempt+coop``."""

    def __init__(
        self,
        placement: str = "closest",
        backfill: bool = False,
        order: str = "fifo",
        preempt: bool = False,
        coop: bool = False,
    ):
        if placement not in BASE_CANDIDATES:
            raise ValueError(f"placement must be one of {', '.join(BASE_CANDIDATES)}, got {placement!r}")
        if order not in HEURISTIC_ORDERS:
            raise ValueError(f"order must be one of {', '.join(map(repr, HEURISTIC_ORDERS))}, got {order!r}")
        self.placement, self.backfill, self.order = placement, bool(backfill), order
        self.preempt, self.coop = bool(preempt), bool(coop)
        if self.coop and not self.preempt:
            raise ValueError(
                "coop (agents yield their running jobs to any agent's waiting ones) needs preempt"
            )
        self.clairvoyant = order in CLAIRVOYANT_ORDERS
        self._tiresias = Tiresias() if order == "tiresias" else None

    @classmethod
    def from_name(cls, name: str) -> HeuristicMultiAgent:
        """``fifo-closest``, ``sjf-consolidate+backfill``, ``srtf-consolidate+backfill+preempt``, ...
        (`ORDER-PLACEMENT[+backfill][+preempt][+coop]`)."""
        base, *extras = str(name).split("+")
        order, _, placement = base.partition("-")
        if (
            order not in HEURISTIC_ORDERS
            or placement not in BASE_CANDIDATES
            or len(set(extras)) != len(extras)
            or not set(extras) <= {"backfill", "preempt", "coop"}
            or ("coop" in extras and "preempt" not in extras)
        ):
            raise ValueError(
                f"unknown per-agent heuristic {name!r}: expected ORDER-PLACEMENT[+backfill][+preempt][+coop] (+coop "
                f"needs +preempt) with ORDER one of {', '.join(HEURISTIC_ORDERS)} and PLACEMENT one of "
                f"{', '.join(BASE_CANDIDATES)}"
            )
        return cls(
            placement,
            backfill="backfill" in extras,
            order=order,
            preempt="preempt" in extras,
            coop="coop" in extras,
        )

    @property
    def name(self) -> str:
        return (
            f"{self.order}-{self.placement}"
            + ("+backfill" if self.backfill else "")
            + ("+preempt" if self.preempt else "")
            + ("+coop" if self.coop else "")
        )

    def key(self, sim, job: int) -> tuple:
        """The job's priority in this order (smaller first)."""
        if self.order == "sjf":
            return (float(sim.workload.duration[job]), job)
        if self.order == "srtf":
            return (float(sim.remaining_ideal_time(job)), job)
        if self.order == "tiresias":
            return self._tiresias.priority(sim, job)
        return (float(sim.workload.submit_time[job]), job)

    def _heads_in_order(self, env: MultiAgentView, agent: str) -> list[int]:
        jobs = env.head_jobs(agent)
        heads = [h for h in range(len(jobs)) if jobs[h] >= 0]
        if self.order != "fifo":
            heads.sort(key=lambda h: self.key(env.sim, int(jobs[h])))
        return heads

    def _victim(self, env: MultiAgentView, agent: str, job: int, mask: np.ndarray) -> int | None:
        """The preempt action freeing GPUs for ``job``: the agent's lowest-priority preemptible running job below
        ``job``'s priority, when the GPUs of all such jobs and the free ones could hold it; else None."""
        sim, first = env.sim, env.first_preempt_action
        mine = self.key(sim, job)
        slots = env.running_slots(agent)
        keyed = [(self.key(sim, int(v)), p) for p, v in enumerate(slots) if v >= 0 and mask[first + p]]
        worse = [(k, p) for k, p in keyed if k > mine]
        if not worse:
            return None
        gpus = sum(int(sim.job_gpus_n[slots[p]]) for _, p in worse)
        if gpus + sim.free_gpus() < sim.job_gpus_n[job]:
            return None
        return first + max(worse)[1]

    def _coop(self, env: MultiAgentView, observations: dict) -> dict[str, int]:
        """``coop``: the agents apply one priority rule to the jobs of all (the single-scheduler ``PreemptivePolicy``
        decided in a decentralised way): the highest-priority jobs, waiting or running, whose GPUs fit the cluster
        are chosen; each agent places its own highest-priority chosen waiting job that it can place; for the
        highest-priority chosen job that cannot be placed, the lowest-priority running job outside the chosen set
        is preempted by its owner (one preemption per step). Other waiting jobs do not start."""
        sim, first = env.sim, env.first_preempt_action
        waiting = [
            (self.key(sim, int(j)), a, h, int(j))
            for a in observations
            for h, j in enumerate(env.head_jobs(a))
            if j >= 0
        ]
        slot = {
            int(v): (a, first + p) for a in observations for p, v in enumerate(env.running_slots(a)) if v >= 0
        }
        running = [(self.key(sim, int(v)), *slot.get(int(v), (None, -1)), int(v)) for v in sim.running]
        budget = env.cluster.num_gpus
        chosen: set[int] = set()
        for _key, _, _, job in sorted(waiting + running, key=lambda r: (r[0], r[3])):
            need = int(sim.job_gpus_n[job])
            if need <= budget:
                budget -= need
                chosen.add(job)
        actions: dict[str, int] = {}
        preempted = False
        for _key, agent, h, job in sorted(waiting):
            if job not in chosen or agent in actions:
                continue
            a = env.candidate_action(agent, self.placement, head=h)
            if a != env.wait_action:
                actions[agent] = a
            elif not preempted:
                victims = [
                    r
                    for r in running
                    if r[3] not in chosen
                    and r[1] is not None  # in one of its owner's running slots
                    and observations[r[1]]["action_mask"][r[2]]
                    and r[1] not in actions
                ]
                if victims:
                    _, owner, action, _ = max(victims, key=lambda r: (r[0], r[3]))
                    actions[owner] = action
                preempted = True
        return actions

    def __call__(self, env: MultiAgentView, observations: dict) -> dict[str, int]:
        actions = {}
        preempt = self.preempt and env.preempt > 0
        if preempt and self.coop:
            actions = self._coop(env, observations)
            for agent, obs in observations.items():  # waiting is masked only for the agent that must place
                a = actions.get(agent, env.wait_action)
                actions[agent] = a if obs["action_mask"][a] else int(np.flatnonzero(obs["action_mask"])[0])
            return actions
        for agent, obs in observations.items():
            a = env.wait_action
            order = self._heads_in_order(env, agent)
            jobs = env.head_jobs(agent)
            for n, h in enumerate(order if self.backfill else order[:1]):
                a = env.candidate_action(agent, self.placement, head=h)
                if a != env.wait_action:
                    break
                if n == 0 and preempt:  # the first job does not fit: free GPUs for it if that can help
                    victim = self._victim(env, agent, int(jobs[h]), obs["action_mask"])
                    if victim is not None:
                        a = victim
                        break
            # waiting is masked only for the agent that must place (nothing runs or arrives): place anything
            if not obs["action_mask"][a]:
                a = int(np.flatnonzero(obs["action_mask"])[0])
            actions[agent] = a
        return actions
