"""``gpusched/JobSelect-v1``: TopDRL's setting, an online job queue on a rack/server/GPU tree."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
from gymnasium import spaces

from gpusched_envs.envs.base import (
    DEFAULT_MAX_INVALID_REPEATS,
    ClusterEnv,
    WorkloadArg,
    check_bool,
    check_int,
    check_number,
)
from gpusched_envs.envs.encoding import CLAIRVOYANT, NON_CLAIRVOYANT
from gpusched_envs.envs.history import (
    HISTORY_CONTEXT_FEATURES,
    HISTORY_JOB_FEATURES,
    RuntimeHistory,
    gpu_buckets,
    write_context,
)
from gpusched_envs.policies.placement import PLACEMENTS, get_placement
from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.sim import loop_kernels as _lk
from gpusched_envs.sim.topology import Cluster

# placers that always place a job when enough GPUs (of its pool, type and share) are free: for them the action mask
# is exact from free-GPU counts; any other placer is called once per window job to build the mask
COUNT_EXACT_PLACEMENTS = ("closest", "first-fit", "pack", "random")
# placers the compiled stepper runs (as a policy's ``compiled_spec()`` names them)
STEPPED_PLACEMENTS = {
    "closest": {"spread": True, "affinity": False},
    "pack": {"spread": True, "affinity": True},
}
CONTEXT_NAMES = {
    CLAIRVOYANT: ("finished_share", "to_arrive"),
    NON_CLAIRVOYANT: ("finished", "arrival_rate"),
}


class JobSelectEnv(ClusterEnv):
    """Pick the next job to start from a window of the queue; a placer picks its GPUs (TopDRL, Ayadi et al. 2025).

    The simulator runs to a decision point (an arrival, a completion, ...) at which at least one job of the window
    can be placed; after a job starts the agent is asked again at the same instant, until it waits or nothing more
    fits. Instants at which nothing in the window fits are skipped (waiting is the only choice there). With
    ``preemption=True`` the agent is asked at every decision point of the simulator (whenever jobs wait), as
    ``Simulator.run`` calls a heuristic, and may also preempt running jobs.

    ## Action Space
    ``Discrete(window + 1)``: action ``i < window`` starts the ``i``-th job of the window (the first ``window``
    waiting jobs in queue order: arrival order, a preempted job re-enters at the back); action ``window`` waits for
    the next decision point. With ``preemption=True``: ``Discrete(window + P + 1)`` with ``P = preempt_window``
    (default ``window``): actions ``window + i`` preempt the ``i``-th running job (in start order; it keeps its
    progress, returns to the queue and pays the restart delay when it starts again), the last action waits.
    With ``rules=[...]`` (a rule-choice env): ``Discrete(len(rules))``; at every decision point of the simulator
    action ``k`` lets rule ``k`` (:func:`gpusched_envs.policies.portfolio.make_rule`) schedule, exactly as
    ``Simulator.run`` calls it, then the simulator runs to its next decision point; every action is valid.
    Valid actions are in ``obs["action_mask"]`` and :meth:`action_masks`: a window slot is valid when its job can
    be placed now; a running slot when its job did not start at this instant (and a job preempted at this instant
    restarts only if waiting would deadlock), which bounds the actions per instant; waiting is valid unless nothing
    runs and no job is still to arrive (it would deadlock).

    ## Observation Space
    A ``Dict`` of fixed-shape Boxes (see :mod:`gpusched_envs.envs.encoding` for every column, and
    :meth:`flat_feature_names` for the ``flat`` vector):
    ``obs_mode="graph"``: ``node_features (N, F)``, ``node_mask (N,)``, ``edge_index (2, E)``, ``edge_features (E, 4)``,
    ``edge_mask (E,)`` for the GPU/server/rack/cluster tree, ``job_features (W, 8)`` and ``job_mask (W,)`` for the
    window, ``context (2,)``, ``action_mask (W + 1,)``. ``"image"``: ``cluster_image (5, servers, max GPUs per
    server)`` (busy share, GPU time column, speed, slot exists, in placement), ``cluster_features`` (the flat GPU,
    server, rack and cluster columns), ``queue (W, 8)``, ``job_mask``, ``context``, ``action_mask``. ``"flat"``:
    ``obs`` (one vector: all of the above without the topology) and ``action_mask``. With ``preemption=True`` the
    job block has ``W + P`` rows (the running window after the queue window) and two more columns
    (``running``, ``speed``: progress rate ÷ ideal rate).

    ``information="non-clairvoyant"`` (default) shows only what a real scheduler knows: GPUs asked, age, attained
    service (GPU-seconds), time since the job entered the queue / started its allocation, preemptions, the model's
    network sensitivity, the GPUs' time in use, queue lengths; ``context`` = (log1p jobs finished, log1p arrivals
    per ``time_scale`` so far). ``"clairvoyant"`` is the v0 layout: the job's traced ``duration`` and ``remaining``
    ideal time, the GPUs' remaining time, ``context`` = (share of the workload's jobs finished, log1p jobs still to
    arrive). Both have the same shapes; the table of columns is in :mod:`gpusched_envs.envs.encoding`.

    ``history_features=True`` adds what a non-clairvoyant scheduler can learn from the episode so far
    (:mod:`gpusched_envs.envs.history`), in every obs mode and both information settings. Five job columns after
    the others, on queued and running rows: ``history_level`` (which kind the statistics come from: 0 the jobs of
    the same VC and GPU count, 1 of the same GPU count, 2 all jobs, 3 none finished yet), ``history_samples``
    (log1p of that kind's finished jobs), ``history_median`` (log1p of their median runtime / ``time_scale``),
    ``history_survival`` (share of them that ran longer than this job's attained time) and ``history_remaining``
    (log1p of the expected remaining time given the attained time under that empirical distribution /
    ``time_scale``; 0 when none ran longer). A runtime is the seconds a finished job held GPUs; only jobs
    finished by now count, never an unfinished job's duration. Six context entries after the two above:
    ``queued_gpus_1``, ``queued_gpus_2_4``, ``queued_gpus_5_8``, ``queued_gpus_9_plus`` (share of the queued
    jobs by GPUs asked), ``free_fragmented`` (share of the wholly free GPUs on servers with a busy GPU) and
    ``largest_free_server`` (the most wholly free GPUs on one server ÷ the largest server's GPUs).

    ``hint="<heuristic>"`` adds ``hint (A,)``: 1.0 at the action the named heuristic of
    :mod:`gpusched_envs.policies` (``srtf``, ``las``, ``gittins``, ...) would take now, acting through this env
    (:class:`~gpusched_envs.envs.adapters.HeuristicAgent`), 0.0 elsewhere (all zeros once the episode has ended).
    A policy can add it to its logits and learn only where to depart from the rule (``hint_logit`` of the PPO
    networks). It changes nothing in the simulation; a clairvoyant rule needs ``information="clairvoyant"``.

    ## Rewards
    Between two decisions at times ``t0 < t1`` (0 for a decision at the same instant):
    - ``"jct"`` (default, the leaderboard's metric): ``−∫ (jobs in system) dt / time_scale`` over ``[t0, t1]``,
      integrated exactly over every arrival and completion in the interval (Decima's reward), so the undiscounted
      return of a full episode is exactly ``−Σ JCT / time_scale`` (the time jobs waited before the first decision
      goes to the first step).
    - ``"throughput"``: ``(goodput − G·(t1 − t0)) / (G · time_scale)``, where goodput is the ideal GPU-seconds of
      training progress made by all jobs in the interval (iterations done × ideal iteration time × GPUs) and ``G``
      the cluster's GPU count: ≤ 0, and 0 only when every GPU makes ideal progress. The return is ``total ideal
      GPU-work / (G·time_scale) − elapsed / time_scale``: it rewards finishing the work sooner (makespan), not a
      low average JCT.
    - ``"slowdown"``: ``−Σ over jobs in system of elapsed / ideal runtime``; the return is ``−Σ slowdown``.
    An invalid action (``invalid_action="penalize"``) changes nothing and gives ``−invalid_penalty``.

    ## Episode End
    Terminates when every job of the workload has finished (a further ``step`` raises
    :class:`~gpusched_envs.envs.base.EpisodeEndedError`); truncates after ``max_steps`` actions (if set) or
    ``gym.make(..., max_episode_steps=n)``. ``info["metrics"]`` then carries the simulator's metrics
    (:mod:`gpusched_envs.sim.metrics`).

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

    ## Invalid Actions
    ``invalid_action="penalize"`` (default): an action the mask forbids changes nothing and gives
    ``−invalid_penalty``, until ``max_invalid_repeats`` (default 8) of them come in a row: that one is replaced by
    :meth:`safe_action` (wait / defer when valid, else the first valid action), taken with the penalty, so
    simulated time always moves on and every episode ends. ``"raise"``: an :class:`InvalidActionError`.

    ## Arguments
    - ``cluster``: preset name (``"topdrl"``, ``"tiny"``, ``"hetero64"``, ...), YAML path or a ``Cluster``.
    - ``workload``: spec string (``"philly:jobs=500,load=0.9,gpus=64"``), a ``Workload``, or a callable
      ``(cluster, rng) -> Workload``; ``None`` (default): Philly-fitted synthetic jobs, ``num_jobs`` of them at
      offered load ``load`` on this cluster. Spec strings and callables are re-drawn every reset from the reset
      seed unless ``workload_seed`` fixes it.
    - ``num_jobs`` (200), ``load`` (0.9): the default workload's size and offered load.
    - ``window`` (16): queue jobs visible and selectable.
    - ``placement`` (``"closest"``): a placement name of :mod:`gpusched_envs.policies.placement` or a callable
      ``(sim, job) -> GPU ids | None``.
    - ``reward``: ``"jct"`` | ``"throughput"`` | ``"slowdown"``; ``time_scale`` (3600 s): seconds per reward unit
      and per observed time unit.
    - ``information``: ``"non-clairvoyant"`` | ``"clairvoyant"``.
    - ``preemption`` (False), ``preempt_window`` (None: ``window``): running jobs visible and preemptible.
    - ``min_run`` (None): seconds; a running job may be preempted only once its current allocation has held this
      long (a lease, as Gandiva's time slices): it bounds preempt-and-restart churn to one restart per lease. None:
      any job not started at this instant (what the preemptive heuristics assume).
    - ``work_conserving`` (False): waiting is masked while a window job can start (the agent only orders jobs,
      as a work-conserving scheduler; with ``preemption=True`` it may still preempt).
    - ``history_features`` (False): the runtime-history job columns and queue / fragmentation context entries
      described under Observation Space (off: the observations are exactly those without it).
    - ``hint`` (None): a heuristic's name; adds its action now as ``obs["hint"]`` (Observation Space).
    - ``rules`` (None): two or more rule names (``srtf``, ``srtf-nopreempt``, ``srsf``, ``las``, ...); the action
      picks which rule schedules at each decision point (Action Space). A clairvoyant rule needs
      ``information="clairvoyant"``, a preemptive one ``preemption=True``; ``hint``, ``min_run``,
      ``work_conserving`` and a callable ``placement`` are refused with it.
    - ``decision_interval`` (None): seconds; when the agent waits while jobs run, it is asked again at the latest
      this long after (a periodic scheduling round, as Tiresias' demotion timer gives the heuristic). None: only
      at arrivals, completions and the timers a heuristic sets.
    - ``obs_mode``: ``"graph"`` | ``"image"`` | ``"flat"``; ``render_mode``: ``"ansi"`` | ``"rgb_array"`` | None.
    - ``max_steps`` (None): truncation. ``invalid_action``: ``"penalize"`` | ``"raise"``; ``invalid_penalty`` (1.0);
      ``max_invalid_repeats`` (8): invalid actions in a row before the env takes :meth:`safe_action`.
    - ``interference`` (True), ``speed_model`` (``"throughput"`` | ``"duration"``): simulator settings.
    - the seed comes from ``reset(seed=...)``.

    ## Version History
    - v1: invalid actions resolve to :meth:`safe_action` after ``max_invalid_repeats`` in a row (episodes always
      end); fixed info keys and dtypes (section Info); synthetic workload specs sized to the cluster. ``-v0``
      still makes the same env for now. Later opt-in additions: ``work_conserving``, ``hint``, ``rules``.
    - v0: initial version. Later additions kept the id: ``information`` (default non-clairvoyant; the clairvoyant
      layout is v0's), ``preemption``, and the default reward ``"jct"`` (was ``"throughput"``).
    """

    heuristic_setting = "queue"  # which heuristics act here (gpusched_envs.policies.playable)

    def __init__(
        self,
        cluster: str | Cluster = "topdrl",
        workload: WorkloadArg = None,
        *,
        num_jobs: int = 200,
        load: float = 0.9,
        window: int = 16,
        placement: str | Callable = "closest",
        reward: str = "jct",
        information: str = NON_CLAIRVOYANT,
        preemption: bool = False,
        preempt_window: int | None = None,
        decision_interval: float | None = None,
        min_run: float | None = None,
        work_conserving: bool = False,
        history_features: bool = False,
        hint: str | None = None,
        rules: Sequence[str] | None = None,
        obs_mode: str = "graph",
        max_steps: int | None = None,
        time_scale: float = 3600.0,
        invalid_action: str = "penalize",
        invalid_penalty: float = 1.0,
        max_invalid_repeats: int = DEFAULT_MAX_INVALID_REPEATS,
        interference: bool = True,
        speed_model: str = "throughput",
        workload_seed: int | None = None,
        render_mode: str | None = None,
    ):
        window = check_int("window", window, 1)
        self.preemption = check_bool("preemption", preemption)
        self.work_conserving = check_bool("work_conserving", work_conserving)
        if not self.preemption:
            if preempt_window is not None:
                raise ValueError("preempt_window is only used with preemption=True")
            running = 0
        else:
            running = window if preempt_window is None else check_int("preempt_window", preempt_window, 1)
        self.preempt_window = running
        self.min_run = None if min_run is None else check_number("min_run", min_run, positive=True)
        if self.min_run is not None and not self.preemption:
            raise ValueError("min_run is only used with preemption=True")
        self.decision_interval = (
            None
            if decision_interval is None
            else check_number("decision_interval", decision_interval, positive=True)
        )
        self.history_features = check_bool("history_features", history_features)
        self.rules = None if rules is None else self._rule_names(rules, placement, information, hint, min_run)
        num_actions = window + running + 1 if self.rules is None else len(self.rules)
        self.context_names = CONTEXT_NAMES.get(information, ())
        if self.history_features:
            self.context_names += HISTORY_CONTEXT_FEATURES
        super().__init__(
            cluster=cluster,
            workload=workload,
            num_jobs=num_jobs,
            load=load,
            window=window,
            obs_mode=obs_mode,
            reward=reward,
            max_steps=max_steps,
            time_scale=time_scale,
            invalid_action=invalid_action,
            invalid_penalty=invalid_penalty,
            max_invalid_repeats=max_invalid_repeats,
            interference=interference,
            speed_model=speed_model,
            workload_seed=workload_seed,
            render_mode=render_mode,
            context_size=2 + (len(HISTORY_CONTEXT_FEATURES) if self.history_features else 0),
            num_actions=num_actions,
            information=information,
            running_rows=running,
            extra_job_features=HISTORY_JOB_FEATURES if self.history_features else (),
        )
        if isinstance(placement, str):
            self.place = get_placement(placement)
            self.exact_from_counts = placement in COUNT_EXACT_PLACEMENTS
        elif callable(placement):
            self.place, self.exact_from_counts = placement, False
        else:
            raise TypeError(f"placement must be one of {', '.join(PLACEMENTS)} or a callable")
        self.placement = placement
        self.action_space = spaces.Discrete(num_actions)
        self._rule_policies = None
        if self.rules is not None:
            from gpusched_envs.policies.portfolio import make_rule

            self._rule_policies = [make_rule(name, placement) for name in self.rules]
        self.wait_action = window + running
        self.first_preempt_action = window
        self.hint = None if hint is None else self._hint_rule(hint, placement)
        if self.hint is not None:
            n = window + running + 1
            self.observation_space = spaces.Dict(
                {**self.observation_space.spaces, "hint": spaces.Box(0.0, 1.0, (n,), np.float32)}
            )
            self._hint_buffer = np.zeros(n, dtype=np.float32)

    def _rule_names(self, rules, placement, information, hint, min_run) -> tuple[str, ...]:
        """``rules`` checked: two or more distinct rule names this env's information and preemption allow."""
        from gpusched_envs.policies.portfolio import RULES, rule_is_clairvoyant, rule_preempts

        if isinstance(rules, str) or not isinstance(rules, Sequence):
            raise ValueError(f"rules must be None or a list of two or more rule names, got {rules!r}")
        names = tuple(rules)
        if len(names) < 2:
            raise ValueError(
                f"rules must name two or more rules (one is a fixed heuristic), got {list(names)}"
            )
        for name in names:
            if not isinstance(name, str) or name not in RULES:
                raise ValueError(f"rules: unknown rule {name!r}; choose among: {', '.join(RULES)}")
            if rule_is_clairvoyant(name) and information != CLAIRVOYANT:
                raise ValueError(
                    f"rules: {name!r} reads traced durations, which this non-clairvoyant env hides: use "
                    "information='clairvoyant', or non-clairvoyant rules (las, gittins, tiresias, fifo, ...)"
                )
            if rule_preempts(name) and not self.preemption:
                raise ValueError(
                    f"rules: {name!r} preempts jobs: use preemption=True, or its {name}-nopreempt form"
                )
        if len(set(names)) != len(names):
            raise ValueError(f"rules: each rule once, got {list(names)}")
        for arg, value in (("hint", hint), ("min_run", min_run)):
            if value is not None:
                raise ValueError(
                    f"{arg} is not used with rules (the rules decide what starts and what is preempted)"
                )
        if self.work_conserving:
            raise ValueError("work_conserving is not used with rules (the rules decide what starts)")
        if not isinstance(placement, str):
            raise ValueError("rules need a placement name (a rule places its jobs itself), not a callable")
        return names

    def _hint_rule(self, hint, placement):
        """The :class:`~gpusched_envs.envs.adapters.HeuristicAgent` behind ``obs["hint"]``, checked now."""
        from gpusched_envs.envs.adapters import HeuristicAgent
        from gpusched_envs.policies.schedulers import (
            CLAIRVOYANT_POLICIES,
            NON_CLAIRVOYANT_POLICIES,
            PREEMPTIVE_POLICIES,
            make_policy,
        )

        names = sorted(set(NON_CLAIRVOYANT_POLICIES) | set(CLAIRVOYANT_POLICIES) | set(PREEMPTIVE_POLICIES))
        if not isinstance(hint, str) or hint not in names:
            raise ValueError(f"hint must be None or one of {', '.join(names)}, got {hint!r}")
        if hint in CLAIRVOYANT_POLICIES and not self.clairvoyant:
            raise ValueError(
                f"hint={hint!r} reads traced durations, which this non-clairvoyant env hides from the agent: use "
                "information='clairvoyant', or a non-clairvoyant rule (las, gittins, tiresias, fifo)"
            )
        if hint in PREEMPTIVE_POLICIES and not self.preemption:
            raise ValueError(
                f"hint={hint!r} preempts jobs: use preemption=True, or a rule that does not (fifo, sjf)"
            )
        return HeuristicAgent(make_policy(hint, placement if isinstance(placement, str) else None))

    # ------------------------------------------------------------------ decisions
    def _new_episode(self) -> None:
        super()._new_episode()
        self._started_now: set[int] = set()  # jobs started / preempted at the current instant
        self._preempted_now: set[int] = set()
        self._stepped_by = None  # the compiled stepper of the last step (its marks, if it hands the run back)
        self._running = np.zeros(0, dtype=np.int64)
        self._preemptible = np.zeros(0, dtype=bool)
        if self.history_features:
            self.history = RuntimeHistory(self.sim)
            self._gpu_bucket = gpu_buckets(self.sim.job_gpus_n)
        if self._rule_policies is not None:
            for rule in self._rule_policies:
                rule.reset(self.sim)

    def _valid_jobs(self) -> None:
        """Window, which of its jobs can start now, and (for non-count placers) their placements."""
        jobs = self._window_jobs()
        fits = self._count_fits(jobs)
        self._placements: dict[int, np.ndarray] = {}
        if not self.exact_from_counts:
            for i in np.flatnonzero(fits):
                gpus = self.place(self.sim, int(jobs[i]))
                fits[i] = gpus is not None
                if gpus is not None:
                    self._placements[int(jobs[i])] = gpus
        self._jobs, self._fits = jobs, fits

    def _running_window(self) -> None:
        r = self.sim.running
        k = min(len(r), self.preempt_window)
        self._running = np.fromiter(itertools.islice(r, k), dtype=np.int64, count=k)
        # a job started at this instant is not preempted at it (and a job preempted now restarts only when waiting
        # would deadlock): this bounds the actions at one instant
        self._preemptible = np.array([j not in self._started_now for j in self._running.tolist()], dtype=bool)
        if self.min_run is not None and k:
            self._preemptible &= self.sim.now - self.sim.run_start[self._running] >= self.min_run

    def _settle(self) -> None:
        """Advance to the agent's next decision: without preemption, until some window job can start; with it, at
        every decision point of the simulator (the queue is not empty), as ``Simulator.run`` calls a policy."""
        while not self.drained:
            if self.sim.queue:
                self._valid_jobs()
                if self.preemption:
                    self._running_window()
                    return
                if np.count_nonzero(self._fits):
                    return
            self._advance()
            self._started_now.clear()
            self._preempted_now.clear()
        self._empty_windows()

    def _empty_windows(self) -> None:
        """No window and no running window: the run has drained."""
        self._jobs, self._fits = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        self._running, self._preemptible = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)

    def _settle_rules(self) -> None:
        """With ``rules``: the window and running window at the simulator's decision point just reached."""
        if self.drained:
            self._empty_windows()
            return
        self._valid_jobs()
        if self.preemption:
            self._running_window()

    def _schedule_round(self) -> None:
        """With ``decision_interval``, while jobs run: a decision point at the latest that long from now (an
        earlier timer, a rule's, is kept)."""
        sim = self.sim
        if self.decision_interval is not None and sim.running:
            at = sim.now + self.decision_interval
            if not sim.now < sim.timer_at <= at:
                sim.set_timer(at)

    def _observe(self) -> dict:
        enc, sim = self.encoder, self.sim
        startable = self._fits
        if sim.stepper is not None and not self.drained:
            startable = self._startable  # the kernel cleared the jobs preempted at this instant
        if self.rules is not None:
            enc.action_mask[:] = not self.drained  # every rule may decide at a decision point
        else:
            can_wait = sim.num_running() > 0 or sim.next_arrival < sim.num_jobs  # _can_wait
            if self._preempted_now and can_wait:
                startable = startable & np.array(
                    [j not in self._preempted_now for j in self._jobs.tolist()], dtype=bool
                )
            args = (
                enc.action_mask,
                startable,
                self._preemptible,
                self.first_preempt_action,
                self.wait_action,
                self.drained,
                can_wait,
                self.work_conserving,
            )
            _kernels.job_select_mask(*args)
        ctx = enc.context
        if self.clairvoyant:  # v0 context: reveals how many jobs the workload still holds
            ctx[0] = sim.finished / max(sim.to_finish, 1)
            ctx[1] = enc.log1p_count(sim.num_jobs - sim.next_arrival)
        else:
            ctx[0] = enc.log1p_count(sim.finished)
            arrived = sim.next_arrival
            elapsed = sim.now - sim.workload.submit_time[0] if arrived else 0.0
            ctx[1] = np.log1p(arrived * self.time_scale / max(elapsed, self.time_scale))
        if not self.history_features:
            return self._with_hint(
                self._encode(self._jobs, startable, None, self._running, self._preemptible)
            )
        self.history.sync()
        write_context(ctx[2:], sim, self._gpu_bucket, self.layout.max_server_gpus)
        beyond = max(0, sim.num_queued() - len(self._jobs))
        enc.encode(
            sim, self._jobs, startable, self.log_sensitivity, self._running, self._preemptible, None, beyond
        )
        first, scale = enc.extra_job_column, self.time_scale
        self.history.write_rows(enc.job_features, first, self._jobs, 0, False, scale)
        if self.preemption:
            self.history.write_rows(enc.job_features, first, self._running, enc.queue_rows, True, scale)
        return self._with_hint(enc.observation())

    def _with_hint(self, obs: dict, fresh: bool = True) -> dict:
        """``obs`` with ``obs["hint"]`` added when the env has a hint (``fresh=False``: the last one, the state has
        not moved)."""
        if self.hint is None:
            return obs
        out = self._hint_buffer
        if fresh:
            out[:] = 0.0
            if not self.drained:
                out[self.hint.decide(self)[0]] = 1.0
        obs["hint"] = out.copy()
        return obs

    def _unchanged_observation(self) -> dict:
        return self._with_hint(self.encoder.observation(), fresh=False)

    # ------------------------------------------------------------------ actions
    def _first_decision(self) -> None:
        if self.rules is not None:
            self._advance()
            self._settle_rules()
            return
        totals = self.totals
        if self._steppable() and self.sim.start_stepping(
            STEPPED_PLACEMENTS[self.placement],
            self.window,
            totals.weight,
            totals.gpu_seconds_per_unit,
            self.reward_kind == "throughput",
            self.preempt_window if self.preemption else 0,
            self.min_run,
            self.decision_interval,
        ):
            self._took_compiled_step(self.sim.step_compiled(_lk.ACT_SETTLE))
            return
        self._settle()

    # the compiled stepper: on (the default), an episode without rules or hint, placed by closest or pack, runs its
    # steps in one compiled call each (the same results, bit for bit); anything that reads the
    # simulator's queue or job dicts mid-episode hands the state back to the Python engine, which goes on from there
    compiled_steps = True

    def _steppable(self) -> bool:
        return (
            self.compiled_steps
            and self.rules is None
            and self.hint is None
            and isinstance(self.placement, str)
            and self.placement in STEPPED_PLACEMENTS
        )

    def __getstate__(self) -> dict:
        # a pickled (or deep-copied) env continues in the Python engine: the simulator hands its run back, and the
        # marks of this instant become the Python path's sets first
        if self._stepped_by_now():
            self.sim.stop_stepping()
            self._resume_in_python()
        return self.__dict__.copy()

    def _stepped_by_now(self) -> bool:
        return getattr(self, "_stepped_by", None) is not None

    def _resume_in_python(self) -> None:
        """The simulator handed the run back mid-episode: the jobs started or preempted at this instant, from the
        stepper's marks, as the Python path keeps them."""
        p, self._stepped_by = self._stepped_by, None
        inst = int(p.sc[_lk.SC_INSTANT])
        self._started_now = {int(j) for j in np.flatnonzero(p.preempting[1] == inst)}
        if p.sc[_lk.SC_PREEMPTED]:
            self._preempted_now = {int(j) for j in np.flatnonzero(p.preempting[2] == inst)}

    def _took_compiled_step(self, code: int) -> None:
        """After a compiled step: the running totals as ``_advance``'s syncs left them, the mark now (the kernel
        computed both, with numpy's sums), and the window (or the end of the run)."""
        p = self._stepped_by = self.sim.stepper
        totals = self.totals
        totals.done_weighted, totals.done_goodput, weighted, goodput = p.totals_now
        if p.syncs:
            totals.live = p.live[: p.live_len].copy()
        now = self.sim.now
        if self._last_mark is None or self._last_mark[0] != now:
            self._last_mark = (now, weighted, goodput)
        if code == _lk.STEP_DRAINED:
            self.drained = True
            self._empty_windows()
            return
        k = p.window_len
        self._jobs, self._fits = p.window[:k].copy(), p.fits[:k].copy()
        self._startable = p.startable[:k].copy()
        if self.preemption:
            r = p.running_len
            self._running, self._preemptible = p.running_window[:r].copy(), p.preemptible[:r].copy()
        self._placements = {}

    def _why_invalid(self, action: int) -> str:
        if action == self.wait_action:
            return "waiting now would deadlock"
        if action < self.window:
            return f"window slot {action} cannot start now"
        return f"running slot {action - self.first_preempt_action} cannot be preempted now"

    def _apply(self, a: int) -> None:
        sim = self.sim
        if self.rules is not None:  # rule a schedules at this decision point, as Simulator.run calls a policy
            self._rule_policies[a].schedule(sim)
            self._schedule_round()
            self._advance()
            self._settle_rules()
            return
        if self._stepped_by is not None and sim.stepper is None:
            self._resume_in_python()
        if sim.stepper is not None:
            if a == self.wait_action:
                action = _lk.ACT_WAIT
            elif a < self.window:
                action = int(self._jobs[a])
            else:
                action = _lk.ACT_PREEMPT - int(self._running[a - self.first_preempt_action])
            self._took_compiled_step(sim.step_compiled(action))
            return
        if a == self.wait_action:
            self._schedule_round()
            self._advance()
            self._started_now.clear()
            self._preempted_now.clear()
        elif a < self.window:
            job = int(self._jobs[a])
            gpus = self._placements.get(job) if not self.exact_from_counts else self.place(sim, job)
            sim.start(job, gpus)
            self._started_now.add(job)
        else:
            job = int(self._running[a - self.first_preempt_action])
            sim.preempt(job)
            self._preempted_now.add(job)
        self._settle()

    def job_at(self, slot: int) -> int:
        """Job id in window slot ``slot`` (-1 if empty)."""
        return int(self._jobs[slot]) if 0 <= slot < len(self._jobs) else -1

    def slot_of(self, job: int) -> int:
        """Window slot of a job id, or -1 if it is not in the window."""
        hits = np.flatnonzero(self._jobs == job)
        return int(hits[0]) if len(hits) else -1

    def preempt_action_of(self, job: int) -> int:
        """The action preempting running job ``job``, or -1 if it is not in the running window."""
        hits = np.flatnonzero(self._running == job)
        return self.first_preempt_action + int(hits[0]) if len(hits) else -1

    def running_window(self) -> np.ndarray:
        """Ids of the running jobs an action may preempt (empty without preemption)."""
        return self._running.copy()
