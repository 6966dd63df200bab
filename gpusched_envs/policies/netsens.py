"""NetSens-style scheduling (Sharma, Bhasi et al., arXiv 2401.16492) with delay timers set from outside: the policy
that DelayTuning-v0 runs inside the env, usable on its own with fixed timers.

- FIFO order with backfill. A job that can be consolidated (``consolidate`` placement: one server, or whole servers of
  one rack) starts at once. One that cannot waits for consolidation up to the delay timer of its network-sensitivity
  class, counted from when it (re-)entered the queue; after that it takes the ``closest`` placement (spread).
- Network-sensitive preemption: a waiting job of the most sensitive class that cannot be consolidated may preempt
  running jobs of the least sensitive class that have run at least ``min_run`` seconds, on the one server where the
  fewest such preemptions free enough GPUs for it; it then starts there.

Used standalone (``make_policy("netsens")``), the job classes come from the jobs' network sensitivities and the
thresholds and fixed timers in ``data/sim_defaults.yaml``; ``DelayTuning-v0`` passes its own and retunes the timers.
"""

from __future__ import annotations

import math

import numpy as np

from gpusched_envs.policies.base import Policy
from gpusched_envs.policies.placement import closest, consolidate
from gpusched_envs.policies.schedulers import policy_defaults
from gpusched_envs.sim.engine import FULL_GPU, RUNNING
from gpusched_envs.sim.sensitivity import job_sensitivities, sensitivity_classes


class DelaySchedulingPolicy(Policy):
    """Delay scheduling for consolidation + network-sensitive preemption.

    ``job_class`` (J,) sensitivity class of each job (0 = least sensitive; None: computed at :meth:`reset` from the
    thresholds in ``data/sim_defaults.yaml``); ``timers`` (K,) seconds per class (None: the fixed defaults there);
    ``horizon``: the policy also asks for a decision point at this time (the env's interval end). ``placement`` is
    accepted for a uniform ``make_policy`` signature: the policy always consolidates, then spreads with ``closest``.
    """

    name = "netsens"

    def __init__(
        self,
        job_class: np.ndarray | None = None,
        timers=None,
        *,
        preemption: bool = True,
        min_run: float | None = None,
        placement: str = "consolidate",
    ):
        defaults = policy_defaults()["netsens"]
        self._given_class = job_class
        self.job_class = (
            np.zeros(0, dtype=np.int64) if job_class is None else np.asarray(job_class, dtype=np.int64)
        )
        self.thresholds = defaults["sensitivity_thresholds"]["value"]
        self.timers = np.asarray(
            defaults["delay_timers_s"]["value"] if timers is None else timers, dtype=np.float64
        )
        min_run = defaults["min_run_s"]["value"] if min_run is None else min_run
        self.preemption = preemption
        self.min_run = float(min_run)
        self.horizon = math.inf
        self.enqueued: dict[int, float] = {}
        self.top_class = len(self.timers) - 1

    def reset(self, sim) -> None:
        self.enqueued = {}
        if self._given_class is None:
            sensitivity = job_sensitivities(sim.cluster, sim.job_model, sim.job_gpus_n)
            self.job_class = sensitivity_classes(sensitivity, self.thresholds)
            if len(self.timers) != len(self.thresholds) + 1:
                raise ValueError(
                    f"netsens: {len(self.thresholds) + 1} classes need as many timers, got {self.timers}"
                )

    def schedule(self, sim) -> None:
        now = sim.now
        soonest = math.inf
        requeued = True
        while requeued:  # jobs preempted in a pass are reconsidered at once (their GPUs may sit free)
            requeued, soonest = self._pass(sim, now)
        at = min(soonest, self.horizon)
        if sim.queue and math.isfinite(at) and at > now:
            sim.set_timer(at)

    def _pass(self, sim, now: float) -> tuple[bool, float]:
        """One sweep over the queue; returns (whether it preempted someone, the next time worth a decision)."""
        soonest = math.inf
        free = (
            sim.free_gpus()
        )  # wholly free GPUs: a whole-GPU job needing more cannot be placed without preemption
        victims: bool | None = (
            None  # whether any running job may be preempted now (computed once, when needed)
        )
        preempted = False
        for job in list(sim.queue):
            since = self.enqueued.setdefault(job, now)
            may_fit = sim.job_milli[job] < FULL_GPU or sim.job_gpus_n[job] <= free
            gpus = consolidate(sim, job) if may_fit else None
            cls = int(self.job_class[job])
            preemptive = (  # consolidating by preemption needs a whole-GPU job that one server can hold
                self.preemption
                and cls == self.top_class > 0
                and sim.job_milli[job] >= FULL_GPU
                and sim.job_gpus_n[job] <= sim.cluster.max_server_gpus
            )
            if gpus is None and preemptive:
                if victims is None:
                    victims = self._any_preemptible(sim)
                if victims:
                    running_before = len(sim.running)
                    gpus = self._preempt_for(sim, job)
                    preempted |= len(sim.running) < running_before
                    if gpus is not None:
                        victims = None
                else:  # ask again when the first running job becomes preemptible
                    soonest = min(soonest, self._next_preemptible(sim))
            if gpus is None:
                deadline = since + self.timers[cls]
                if now >= deadline:
                    gpus = closest(sim, job) if may_fit else None
                else:
                    soonest = min(soonest, deadline)
            if gpus is not None:
                sim.start(job, gpus)
                del self.enqueued[job]
                free = sim.free_gpus()
        return preempted, soonest

    def _next_preemptible(self, sim) -> float:
        """When the earliest least-sensitive running job reaches ``min_run`` (inf if none will)."""
        if not sim.running:
            return math.inf
        running = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
        ok = (self.job_class[running] == 0) & (sim.job_milli[running] >= FULL_GPU)
        ready = sim.run_start[running[ok]] + self.min_run
        ready = ready[ready > sim.now]
        return float(ready.min()) if len(ready) else math.inf

    def _any_preemptible(self, sim) -> bool:
        """Whether some running job may be preempted now (least-sensitive class, whole GPUs, ran ``min_run``)."""
        if not sim.running:
            return False
        running = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
        return bool(
            (
                (self.job_class[running] == 0)
                & (sim.status[running] == RUNNING)
                & (sim.job_milli[running] >= FULL_GPU)
                & (sim.now - sim.run_start[running] >= self.min_run)
            ).any()
        )

    def _preempt_for(self, sim, job: int):
        """Preempt least-sensitive jobs on one server so that ``job`` fits there; its GPUs, or None."""
        c = sim.cluster
        n = 1 if sim.job_milli[job] < FULL_GPU else int(sim.job_gpus_n[job])
        if n > c.max_server_gpus or sim.job_milli[job] < FULL_GPU:
            return None
        free = sim.free_mask(job)
        best: tuple[int, int, list[int]] | None = None
        allowed = sim.allowed_masks[sim.job_allowed[job]] if sim.job_allowed[job] >= 0 else None
        for s in np.flatnonzero(c.server_num_gpus >= n).tolist():
            lo = int(c.server_first_gpu[s])
            if allowed is not None and not allowed[lo : lo + c.server_num_gpus[s]].all():
                continue  # another pool's (or GPU type's) server: its jobs are not ours to preempt
            have = int(np.count_nonzero(free[lo : lo + c.server_num_gpus[s]]))
            victims = sorted(
                (
                    v
                    for v in sim.server_jobs[s]
                    if self.job_class[v] == 0
                    and sim.status[v] == RUNNING
                    and sim.job_milli[v] >= FULL_GPU
                    and sim.now - sim.run_start[v] >= self.min_run
                ),
                key=lambda v: -int(np.count_nonzero(c.gpu_server[sim.job_gpus[v]] == s)),
            )
            chosen = []
            for v in victims:
                if have >= n:
                    break
                chosen.append(v)
                have += int(np.count_nonzero(c.gpu_server[sim.job_gpus[v]] == s))
            if have >= n and chosen and (best is None or len(chosen) < best[0]):
                best = (len(chosen), s, chosen)
        if best is None:
            return None
        for v in best[2]:
            sim.preempt(v)
            self.enqueued[v] = sim.now
        s = best[1]
        lo = int(c.server_first_gpu[s])
        idx = lo + np.flatnonzero(sim.free_mask(job)[lo : lo + c.server_num_gpus[s]])
        return idx[:n]
