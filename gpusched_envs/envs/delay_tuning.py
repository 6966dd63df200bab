"""``gpusched/DelayTuning-v1``: NetSens's setting, an auto-tuner of delay-scheduling timers per network-sensitivity
class, with delay scheduling and network-sensitive preemption running inside the env."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from gpusched_envs.envs.base import (
    DEFAULT_MAX_INVALID_REPEATS,
    ClusterEnv,
    WorkloadArg,
    check_bool,
    check_number,
)
from gpusched_envs.envs.encoding import NON_CLAIRVOYANT
from gpusched_envs.policies.netsens import DelaySchedulingPolicy
from gpusched_envs.policies.schedulers import policy_defaults
from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.sim.sensitivity import sensitivity_classes
from gpusched_envs.sim.topology import Cluster
from gpusched_envs.validation import check_cap


class DelayTuningEnv(ClusterEnv):
    """Every ``interval`` seconds of simulated time, set the delay timer of each network-sensitivity class; a
    :class:`~gpusched_envs.policies.netsens.DelaySchedulingPolicy` schedules with them until the next interval
    (NetSens, Sharma, Bhasi et al. 2024).

    A job's class is the number of ``sensitivity_thresholds`` its network sensitivity (iteration time spread
    across racks ÷ consolidated) reaches: class 0 hardly cares where it runs, the last class the most.
    A job that cannot be consolidated waits up to its class's timer for consolidation before it is spread; waiting
    jobs of the last class may preempt running class-0 jobs to be consolidated.

    ## Action Space
    ``Discrete(L ** K)`` for ``K`` classes and ``L = len(timer_levels)``: action ``a`` sets class ``k``'s timer
    to ``timer_levels[(a // L**k) % L]`` (:meth:`timers_of` / :meth:`action_of` convert). One flat index keeps the
    action usable by DQN-style agents and by action masks (all actions are always valid).

    ## Observation Space
    ``obs_mode="graph"`` (default) or ``"flat"``, as :class:`~gpusched_envs.envs.job_select.JobSelectEnv`; image
    observations are not offered. ``context (3K,)``: the current timers ÷ the largest level, log1p of the waiting
    jobs per class, log1p of their mean wait ÷ ``time_scale`` per class. ``information``
    (``"non-clairvoyant"`` default | ``"clairvoyant"``) sets the time columns as JobSelect-v1's (table in
    :mod:`gpusched_envs.envs.encoding`); the context carries nothing clairvoyant in either setting.

    ## Rewards
    ``−(jobs in system × elapsed time) / time_scale`` over the interval, exact over every event, so the return of a
    full episode is ``−Σ JCT / time_scale``.

    ## Episode End
    Terminates when every job has finished (a further ``step`` raises); truncates after ``max_steps`` intervals or
    ``max_episode_steps``. ``info["metrics"]`` at the end.

    ## Info
    The same keys and dtypes at ``reset`` and at every ``step`` (vector envs, TorchRL, Minari and PettingZoo
    wrappers need a fixed structure): ``time`` (float64, simulated seconds), ``queued`` / ``running`` (int64, jobs
    waiting / running), ``invalid_action`` (bool_, this step's action was invalid), ``forced_action`` (int64: the
    action the env took for it after ``max_invalid_repeats`` invalid ones in a row, else -1), ``episode_done``
    (bool_, the episode ended at this step: terminated or truncated), ``metrics`` (a dict of the simulator's
    :data:`~gpusched_envs.sim.metrics.METRIC_KEYS`, each float64: the episode's metrics once ``episode_done``, 0.0
    before). ``env.unwrapped.episode_metrics()`` gives them at any time, e.g. after a hand-added ``TimeLimit``
    (or wrap it: ``EpisodeMetrics(TimeLimit(env, n))``; ``gym.make``'s own ``max_episode_steps`` is covered).
    Why the last invalid action was refused: ``env.unwrapped.last_invalid_reason``.

    ## Arguments
    ``cluster`` (``"topdrl"``), ``workload``, ``num_jobs`` (200), ``load`` (0.9) as JobSelect-v1; ``interval``
    (900 s); ``timer_levels``, ``sensitivity_thresholds`` and ``min_run`` (seconds a job runs before it may be
    preempted), each ``None`` for the ``netsens`` defaults in ``data/sim_defaults.yaml`` (with their sources);
    ``preemption`` (True); ``window`` (16); ``information``; ``obs_mode``; ``max_steps``; ``time_scale``
    (3600 s); ``interference`` (True); ``workload_seed``; ``render_mode``. ``invalid_action`` /
    ``invalid_penalty`` apply to out-of-range actions only.

    ## Version History
    - v1: invalid actions resolve to :meth:`safe_action` after ``max_invalid_repeats`` in a row (episodes always
      end); fixed info keys and dtypes (section Info); synthetic workload specs sized to the cluster. ``-v0``
      still makes the same env for now.
    - v0: initial version.
    """

    heuristic_setting = "delay"  # which heuristics act here (gpusched_envs.policies.playable)

    obs_modes_offered = ("graph", "flat")

    def __init__(
        self,
        cluster: str | Cluster = "topdrl",
        workload: WorkloadArg = None,
        *,
        num_jobs: int = 200,
        load: float = 0.9,
        interval: float = 900.0,
        timer_levels: tuple[float, ...] | None = None,
        sensitivity_thresholds: tuple[float, ...] | None = None,
        preemption: bool = True,
        min_run: float | None = None,
        window: int = 16,
        information: str = NON_CLAIRVOYANT,
        obs_mode: str = "graph",
        max_steps: int | None = None,
        time_scale: float = 3600.0,
        invalid_action: str = "penalize",
        invalid_penalty: float = 1.0,
        max_invalid_repeats: int = DEFAULT_MAX_INVALID_REPEATS,
        interference: bool = True,
        workload_seed: int | None = None,
        render_mode: str | None = None,
    ):
        interval = check_number("interval", interval, positive=True)
        preemption = check_bool("preemption", preemption)
        defaults = policy_defaults()["netsens"]  # each with its source
        if timer_levels is None:
            timer_levels = defaults["timer_levels_s"]["value"]
        if sensitivity_thresholds is None:
            sensitivity_thresholds = defaults["sensitivity_thresholds"]["value"]
        if min_run is None:
            min_run = defaults["min_run_s"]["value"]
        min_run = check_number("min_run", min_run, low=0.0)
        levels = np.asarray(timer_levels, dtype=np.float64)
        if levels.ndim != 1 or len(levels) < 1 or not np.all(np.isfinite(levels) & (levels >= 0)):
            raise ValueError(
                f"timer_levels must be a non-empty list of finite seconds >= 0, got {timer_levels!r}"
            )
        self.timer_levels = levels
        self._top_level = float(levels.max())
        thresholds = np.asarray(sensitivity_thresholds, dtype=np.float64)
        if thresholds.ndim != 1 or not np.all(np.isfinite(thresholds)):
            raise ValueError(
                f"sensitivity_thresholds must be a list of finite numbers, got {sensitivity_thresholds!r}"
            )
        self.thresholds = np.sort(thresholds)
        self.num_classes = len(self.thresholds) + 1
        # the action space is L ** K: refuse a size that would not fit in memory before building anything
        num_actions = len(levels) ** self.num_classes
        check_cap(
            "action_space",
            num_actions,
            f"DelayTuning: {len(levels)} timer_levels ** {self.num_classes} classes (sensitivity_thresholds + 1)",
        )
        self.context_names = tuple(
            f"{what}_{k}" for what in ("timer", "waiting", "mean_wait") for k in range(self.num_classes)
        )
        super().__init__(
            cluster=cluster,
            workload=workload,
            num_jobs=num_jobs,
            load=load,
            window=window,
            obs_mode=obs_mode,
            reward="jct",
            max_steps=max_steps,
            time_scale=time_scale,
            invalid_action=invalid_action,
            invalid_penalty=invalid_penalty,
            max_invalid_repeats=max_invalid_repeats,
            interference=interference,
            speed_model="throughput",
            workload_seed=workload_seed,
            render_mode=render_mode,
            context_size=3 * self.num_classes,
            num_actions=num_actions,
            information=information,
        )
        self.interval = float(interval)
        self.preemption, self.min_run = bool(preemption), float(min_run)
        self.action_space = spaces.Discrete(num_actions)
        self.timers = np.zeros(self.num_classes)
        # every action's timers (row a: timer_levels[(a // L**k) % L] for each class k), for these timer levels
        digits = (np.arange(num_actions)[:, None] // len(levels) ** np.arange(self.num_classes)) % len(levels)
        self._timer_table = (levels, levels[digits])

    # ------------------------------------------------------------------ actions
    def timers_of(self, action: int) -> np.ndarray:
        """(K,) seconds per class that ``action`` sets."""
        a = int(action)
        levels = self.timer_levels
        table = self._timer_table
        if table[0] is levels and 0 <= a < len(table[1]):
            return table[1][a].copy()  # the row the digits below give, made once per env
        L = len(levels)
        digits = (a // L ** np.arange(self.num_classes)) % L
        return levels[digits]

    def action_of(self, level_indices) -> int:
        """The action setting class ``k`` to ``timer_levels[level_indices[k]]``."""
        L = len(self.timer_levels)
        return int(np.dot(np.asarray(level_indices, dtype=np.int64), L ** np.arange(self.num_classes)))

    # ------------------------------------------------------------------ episode
    def _new_episode(self) -> None:
        self.timers = np.zeros(self.num_classes)
        super()._new_episode()
        self.job_class = sensitivity_classes(self.sensitivity, self.thresholds)
        self._context_logs = np.zeros(2 * self.num_classes)  # the arguments of the context's log1p
        self.policy = DelaySchedulingPolicy(
            self.job_class, self.timers, preemption=self.preemption, min_run=self.min_run
        )
        self.policy.reset(self.sim)

    def _observe(self) -> dict:
        enc, sim = self.encoder, self.sim
        enc.action_mask[:] = 1
        k = self.num_classes
        q = np.fromiter(sim.queue, dtype=np.int64, count=len(sim.queue))
        jobs = q[: self.window]  # the window: the queue's first jobs
        logs = self._context_logs
        _kernels.delay_context(
            enc.context,
            logs,
            q,
            self.job_class,
            float(sim.now),
            sim.workload.submit_time,
            self.timers,
            self._top_level,
            self.time_scale,
        )
        np.log1p(logs, out=logs)  # numpy's log1p of the counts and mean waits
        enc.context[k:] = logs
        return self._encode(jobs, self._count_fits(jobs))

    def _first_decision(self) -> None:
        self._advance()  # the first decision point is left pending for the first action's timers

    def _apply(self, a: int) -> None:
        sim, policy = self.sim, self.policy
        self.timers = self.timers_of(a)
        policy.timers = self.timers
        end = sim.now + self.interval
        policy.horizon = end
        policy.schedule(sim)
        while self._advance() and sim.now < end:
            policy.schedule(sim)

    def _render_extra(self) -> str:
        return "timers per class: " + ", ".join(f"{t:.0f}s" for t in self.timers)
