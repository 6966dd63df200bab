"""NetSens-style scheduling (Sharma, Bhasi et al., arXiv 2401.16492) with delay timers set from outside: the policy
that DelayTuning-v1 runs inside the env, usable on its own with fixed timers.

- FIFO order with backfill. A job that can be consolidated (``consolidate`` placement: one server, or whole servers of
  one rack) starts at once. One that cannot waits for consolidation up to the delay timer of its network-sensitivity
  class, counted from when it (re-)entered the queue; after that it takes the ``closest`` placement (spread).
- Network-sensitive preemption: a waiting job of the most sensitive class that cannot be consolidated may preempt
  running jobs of the least sensitive class that have run at least ``min_run`` seconds, on the one server where the
  fewest such preemptions free enough GPUs for it; it then starts there. A job already preempted
  ``max_preemptions`` times is never chosen again (starvation guard).
- Every start is logged in :attr:`DelaySchedulingPolicy.start_log` (how it was placed, how long it waited, what
  spreading cost it): the feedback of the auto-tuner (:class:`TimerTuner`, :class:`AutoDelaySchedulingPolicy`,
  ``make_policy("netsens-auto")``) and of the DelayTuning-v1 agent built on it (``agents/netsens_auto.py``).

Used standalone (``make_policy("netsens")``), the job classes come from the jobs' network sensitivities and the
thresholds and fixed timers in ``data/sim_defaults.yaml``; ``DelayTuning-v1`` passes its own and retunes the timers.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from gpusched_envs.policies.base import Policy, policy_defaults
from gpusched_envs.policies.placement import closest, consolidate
from gpusched_envs.sim import throughput as tp
from gpusched_envs.sim.engine import DONE, FULL_GPU, RUNNING
from gpusched_envs.sim.sensitivity import job_sensitivities, sensitivity_classes

CONSOLIDATED, SPREAD, PREEMPTED_FOR = 0, 1, 2
HOW_NAMES = ("consolidated", "spread", "by preemption")


class StartRecord(NamedTuple):
    """One start made by the delay-scheduling policy (the auto-tuner's feedback)."""

    time: float
    job: int
    cls: int
    waited: float  # seconds since the job (re-)entered the queue
    how: int  # CONSOLIDATED, SPREAD or PREEMPTED_FOR
    slowdown: float  # iteration time on the spread placement ÷ the ideal (consolidated) one; 1 unless SPREAD


class DelaySchedulingPolicy(Policy):
    """Delay scheduling for consolidation + network-sensitive preemption.

    ``job_class`` (J,) sensitivity class of each job (0 = least sensitive; None: computed at :meth:`reset` from the
    thresholds in ``data/sim_defaults.yaml``); ``timers`` (K,) seconds per class (None: the fixed defaults there);
    ``horizon``: the policy also asks for a decision point at this time (the env's interval end). ``placement`` is
    accepted for a uniform ``make_policy`` signature: the policy always consolidates, then spreads with ``closest``.
    ``max_preemptions`` (None: the default in ``data/sim_defaults.yaml``): a job preempted that many times is not
    preempted again. :attr:`start_log` lists every start (:class:`StartRecord`).
    """

    name = "netsens"

    def __init__(
        self,
        job_class: np.ndarray | None = None,
        timers=None,
        *,
        preemption: bool = True,
        min_run: float | None = None,
        max_preemptions: int | None = None,
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
        self.preemptive = bool(preemption)  # Policy flag: may call sim.preempt
        self.min_run = float(min_run)
        if max_preemptions is None:
            max_preemptions = defaults["max_preemptions"]["value"]
        if int(max_preemptions) < 0:
            raise ValueError(f"netsens: max_preemptions must be >= 0, got {max_preemptions}")
        self.max_preemptions = int(max_preemptions)
        self.horizon = math.inf
        self.enqueued: dict[int, float] = {}
        self.start_log: list[StartRecord] = []
        self.top_class = len(self.timers) - 1

    def reset(self, sim) -> None:
        self.enqueued = {}
        self.start_log = []
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
            how = CONSOLIDATED
            if gpus is None and preemptive:
                if victims is None:
                    victims = self._any_preemptible(sim)
                if victims:
                    running_before = len(sim.running)
                    gpus = self._preempt_for(sim, job)
                    preempted |= len(sim.running) < running_before
                    how = PREEMPTED_FOR
                    if gpus is not None:
                        victims = None
                else:  # ask again when the first running job becomes preemptible
                    soonest = min(soonest, self._next_preemptible(sim))
            if gpus is None:
                deadline = since + self.timers[cls]
                if now >= deadline:
                    gpus = closest(sim, job) if may_fit else None
                    how = SPREAD
                else:
                    soonest = min(soonest, deadline)
            if gpus is not None:
                slowdown = self._spread_slowdown(sim, job, gpus) if how == SPREAD else 1.0
                sim.start(job, gpus)
                del self.enqueued[job]
                self.start_log.append(StartRecord(now, int(job), cls, now - since, how, slowdown))
                free = sim.free_gpus()
        return preempted, soonest

    @staticmethod
    def _spread_slowdown(sim, job: int, gpus) -> float:
        """Iteration time of ``job`` on ``gpus`` (uplinks shared with the jobs crossing them now, this one counted)
        ÷ its ideal, consolidated iteration time; interference is left out (consolidation meets it too). Known to a
        real scheduler from the model's profile and the topology: nothing clairvoyant."""
        c = sim.cluster
        shape = tp.placement_shape(c, int(sim.job_model[job]), np.asarray(gpus))
        crossing = sim.rack_crossing.copy()
        if shape.crosses_racks:
            crossing[shape.racks] += 1
        it = tp.iteration_time_of_shape(c, int(sim.job_model[job]), shape, crossing)
        return float(max(1.0, it.overlapped / sim.job_ideal_iter[job]))

    def _eligible(self, sim, v: int) -> bool:
        """Whether running job ``v`` may be preempted now."""
        return bool(
            self.job_class[v] == 0
            and sim.status[v] == RUNNING
            and sim.job_milli[v] >= FULL_GPU
            and sim.now - sim.run_start[v] >= self.min_run
            and sim.preemptions[v] < self.max_preemptions
        )

    def _next_preemptible(self, sim) -> float:
        """When the earliest least-sensitive running job reaches ``min_run`` (inf if none will)."""
        if not sim.running:
            return math.inf
        running = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
        ok = (
            (self.job_class[running] == 0)
            & (sim.job_milli[running] >= FULL_GPU)
            & (sim.preemptions[running] < self.max_preemptions)
        )
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
                & (sim.preemptions[running] < self.max_preemptions)
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
                (v for v in sim.server_jobs[s] if self._eligible(sim, v)),
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


class TimerTuner:
    """Hill climbing over timer levels, one level per class, one step per period, from the starts of the period.

    For each class, over the starts since the last update:

    - *timed out*: jobs that waited their whole timer for consolidation and were spread anyway (waiting wasted);
    - *paid off*: jobs that waited and were then consolidated (or placed by preemption);
    - *spread cost* P: the seconds spreading adds to a job, estimated without clairvoyance as (mean slowdown of the
      spread jobs, :attr:`StartRecord.slowdown`, − 1) × ``expected_runtime``, the mean running time of the jobs
      finished so far (:func:`observed_runtime`).

    Step up one level when spread jobs lost more than the next level's timer (P > next level): even a wait that
    ends in spreading anyway costs less than that, so a longer timer cannot lose much and wins whenever consolidation
    comes in time. Step down when waiting mostly failed (timed out > paid off) and the wasted wait exceeds what
    spreading costs (P < current level). Otherwise stay.
    A class without spread jobs in the period, or a period before any job has finished, keeps its level.
    """

    def __init__(self, levels, initial_level):
        self.levels = np.asarray(levels, dtype=np.float64)
        if self.levels.ndim != 1 or not len(self.levels) or np.any(np.diff(self.levels) <= 0):
            raise ValueError(f"timer levels must be increasing seconds, got {levels}")
        self.level = np.asarray(initial_level, dtype=np.int64).copy()
        if np.any(self.level < 0) or np.any(self.level >= len(self.levels)):
            raise ValueError(f"initial levels must be in 0..{len(self.levels) - 1}, got {initial_level}")
        self.history: list[np.ndarray] = [self.level.copy()]

    @property
    def timers(self) -> np.ndarray:
        return self.levels[self.level]

    def feedback(self, records, cls: int, expected_runtime: float) -> tuple[int, int, float]:
        """(timed out, paid off, spread cost in seconds or nan) of class ``cls`` in ``records``."""
        timed_out = paid_off = 0
        slowdowns = []
        for r in records:
            if r.cls != cls:
                continue
            if r.how == SPREAD:
                slowdowns.append(r.slowdown)
                timed_out += r.waited > 0
            elif r.waited > 0:
                paid_off += 1
        if not slowdowns or not expected_runtime > 0:
            return timed_out, paid_off, math.nan
        return timed_out, paid_off, (float(np.mean(slowdowns)) - 1.0) * float(expected_runtime)

    def update(self, records, expected_runtime: float) -> np.ndarray:
        """Move each class's level from the period's ``records``; returns the new timers (seconds per class)."""
        top = len(self.levels) - 1
        for k in range(len(self.level)):
            timed_out, paid_off, cost = self.feedback(records, k, expected_runtime)
            i = int(self.level[k])
            if math.isnan(cost):
                continue
            if i < top and cost > self.levels[i + 1]:
                self.level[k] = i + 1
            elif i > 0 and timed_out > paid_off and cost < self.levels[i]:
                self.level[k] = i - 1
        self.history.append(self.level.copy())
        return self.timers


def observed_runtime(sim) -> float:
    """Mean running time (seconds making progress) of the jobs finished so far; nan before the first finishes."""
    done = sim.status == DONE
    return float(sim.running_time[done].mean()) if done.any() else math.nan


class AutoDelaySchedulingPolicy(DelaySchedulingPolicy):
    """``netsens-auto``: :class:`DelaySchedulingPolicy` whose timers a :class:`TimerTuner` retunes every ``period``
    seconds from the starts of the last period (no learning; a NetSens-style auto-tuner baseline).

    ``levels`` / ``initial_level`` / ``period``: None for the ``netsens`` defaults in ``data/sim_defaults.yaml``
    (the DelayTuning-v1 timer levels, starting at the fixed timers, every 900 s).
    """

    name = "netsens-auto"

    def __init__(
        self,
        job_class: np.ndarray | None = None,
        *,
        levels=None,
        initial_level=None,
        period: float | None = None,
        preemption: bool = True,
        min_run: float | None = None,
        max_preemptions: int | None = None,
        placement: str = "consolidate",
    ):
        defaults = policy_defaults()["netsens"]
        self.levels = np.asarray(
            defaults["timer_levels_s"]["value"] if levels is None else levels, dtype=np.float64
        )
        self.initial_level = np.asarray(
            defaults["auto_tuner"]["initial_level"]["value"] if initial_level is None else initial_level,
            dtype=np.int64,
        )
        self.period = float(defaults["auto_tuner"]["period_s"]["value"] if period is None else period)
        if not self.period > 0:
            raise ValueError(f"netsens-auto: period must be > 0 seconds, got {period}")
        super().__init__(
            job_class,
            self.levels[self.initial_level],
            preemption=preemption,
            min_run=min_run,
            max_preemptions=max_preemptions,
            placement=placement,
        )
        self.tuner = TimerTuner(self.levels, self.initial_level)

    def reset(self, sim) -> None:
        super().reset(sim)
        self.tuner = TimerTuner(self.levels, self.initial_level)
        self.timers = self.tuner.timers
        self._seen = 0
        self.next_tune = sim.now + self.period

    def schedule(self, sim) -> None:
        if not hasattr(self, "next_tune"):
            self.reset(sim)
        if sim.now >= self.next_tune:
            self.timers = self.tuner.update(self.start_log[self._seen :], observed_runtime(sim))
            self._seen = len(self.start_log)
            self.next_tune += self.period * math.floor((sim.now - self.next_tune) / self.period + 1)
        self.horizon = self.next_tune  # wake up when the next period starts (if jobs wait)
        super().schedule(sim)
