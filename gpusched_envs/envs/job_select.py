"""``gpusched/JobSelect-v0``: TopDRL's setting, an online job queue on a rack/server/GPU tree."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from gymnasium import spaces

from gpusched_envs.envs.base import ClusterEnv, WorkloadArg
from gpusched_envs.policies.placement import PLACEMENTS, get_placement
from gpusched_envs.sim.topology import Cluster

# placers that always place a job when enough GPUs (of its pool, type and share) are free: for them the action mask
# is exact from free-GPU counts; any other placer is called once per window job to build the mask
COUNT_EXACT_PLACEMENTS = ("closest", "first-fit", "pack", "random")


class JobSelectEnv(ClusterEnv):
    """Pick the next job to start from a window of the queue; a placer picks its GPUs (TopDRL, Ayadi et al. 2025).

    The simulator runs to a decision point (an arrival, a completion, ...) at which at least one job of the window
    can be placed; after a job starts the agent is asked again at the same instant, until it waits or nothing more
    fits. Instants at which nothing in the window fits are skipped (waiting is the only choice there).

    ## Action Space
    ``Discrete(window + 1)``: action ``i < window`` starts the ``i``-th job of the window (the first ``window``
    waiting jobs in queue order, oldest first); action ``window`` waits for the next decision point. Valid actions
    are in ``obs["action_mask"]`` and :meth:`action_masks`: a window slot is valid when its job can be placed now;
    waiting is valid unless nothing runs and no job is still to arrive (it would deadlock).

    ## Observation Space
    A ``Dict`` of fixed-shape Boxes (see :mod:`gpusched_envs.envs.encoding` for every column):
    ``obs_mode="graph"``: ``node_features (N, F)``, ``node_mask (N,)``, ``edge_index (2, E)``, ``edge_features (E, 4)``,
    ``edge_mask (E,)`` for the GPU/server/rack/cluster tree, ``job_features (W, 8)`` and ``job_mask (W,)`` for the
    window, ``context (2,)``, ``action_mask (W + 1,)``. ``"image"``: ``cluster_image (5, servers, max GPUs per
    server)`` (busy share, remaining time, speed, slot exists, in placement), ``cluster_features`` (the flat GPU,
    server, rack and cluster columns), ``queue (W, 8)``, ``job_mask``, ``context``, ``action_mask``. ``"flat"``:
    ``obs`` (one vector: all of the above without the topology) and ``action_mask``.
    ``context`` = (share of the jobs finished, log1p of jobs still to arrive).

    ## Rewards
    Between two decisions at times ``t0 < t1`` (0 for a decision at the same instant):
    - ``"throughput"`` (default): ``(goodput − G·(t1 − t0)) / (G · time_scale)``, where goodput is the ideal
      GPU-seconds of training progress made by all jobs in the interval (iterations done × ideal iteration time ×
      GPUs) and ``G`` the cluster's GPU count. It is the normalised throughput (≤ 1) minus 1, times the interval:
      ≤ 0, and 0 only when every GPU makes ideal progress. The return is ``total ideal GPU-work / (G·time_scale) −
      elapsed / time_scale``, so maximising it finishes the work sooner.
    - ``"jct"``: ``−(jobs in system × elapsed time) / time_scale``, integrated exactly over every event in the
      interval (Decima's reward), so the undiscounted return of a full episode is ``−Σ JCT / time_scale``.
    - ``"slowdown"``: ``−Σ over jobs in system of elapsed / ideal runtime``; the return is ``−Σ slowdown``.
    An invalid action (``invalid_action="penalize"``) changes nothing and gives ``−invalid_penalty``.

    ## Episode End
    Terminates when every job of the workload has finished; truncates after ``max_steps`` actions (if set).
    ``info["metrics"]`` then carries the simulator's metrics (:mod:`gpusched_envs.sim.metrics`).

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
    - ``reward``: ``"throughput"`` | ``"jct"`` | ``"slowdown"``; ``time_scale`` (3600 s): seconds per reward unit
      and per observed time unit.
    - ``obs_mode``: ``"graph"`` | ``"image"`` | ``"flat"``; ``render_mode``: ``"ansi"`` | ``"rgb_array"`` | None.
    - ``max_steps`` (None): truncation. ``invalid_action``: ``"penalize"`` | ``"raise"``; ``invalid_penalty`` (1.0).
    - ``interference`` (True), ``speed_model`` (``"throughput"`` | ``"duration"``): simulator settings.
    - the seed comes from ``reset(seed=...)``.

    ## Version History
    - v0: initial version.
    """

    def __init__(
        self,
        cluster: str | Cluster = "topdrl",
        workload: WorkloadArg = None,
        *,
        num_jobs: int = 200,
        load: float = 0.9,
        window: int = 16,
        placement: str | Callable = "closest",
        reward: str = "throughput",
        obs_mode: str = "graph",
        max_steps: int | None = None,
        time_scale: float = 3600.0,
        invalid_action: str = "penalize",
        invalid_penalty: float = 1.0,
        interference: bool = True,
        speed_model: str = "throughput",
        workload_seed: int | None = None,
        render_mode: str | None = None,
    ):
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
            interference=interference,
            speed_model=speed_model,
            workload_seed=workload_seed,
            render_mode=render_mode,
            context_size=2,
            num_actions=window + 1,
        )
        if isinstance(placement, str):
            self.place = get_placement(placement)
            self.exact_from_counts = placement in COUNT_EXACT_PLACEMENTS
        elif callable(placement):
            self.place, self.exact_from_counts = placement, False
        else:
            raise TypeError(f"placement must be one of {', '.join(PLACEMENTS)} or a callable")
        self.placement = placement
        self.action_space = spaces.Discrete(window + 1)
        self.wait_action = window

    # ------------------------------------------------------------------ decisions
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

    def _settle(self) -> None:
        """Advance until some window job can start (or the run drains)."""
        while not self.drained:
            if self.sim.queue:
                self._valid_jobs()
                if self._fits.any():
                    return
            self._advance()
        self._jobs, self._fits = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)

    def _observe(self) -> dict:
        enc, sim = self.encoder, self.sim
        k = len(self._jobs)
        mask = enc.action_mask
        mask[:] = 0
        mask[:k] = self._fits
        mask[self.wait_action] = self.drained or self._can_wait() or not self._fits.any()
        enc.context[0] = sim.finished / max(sim.to_finish, 1)
        enc.context[1] = np.log1p(sim.num_jobs - sim.next_arrival)
        return self._encode(self._jobs, self._fits)

    # ------------------------------------------------------------------ gymnasium API
    def _first_decision(self) -> None:
        self._settle()

    def step(self, action):
        a = self._check_action(action)
        if self.drained:
            return self._invalid(a, "the episode has ended; call reset()")
        if not self.encoder.action_mask[a]:
            why = (
                "waiting now would deadlock" if a == self.wait_action else f"window slot {a} cannot start now"
            )
            return self._invalid(a, why)
        mark = self._mark()
        if a == self.wait_action:
            self._advance()
        else:
            job = int(self._jobs[a])
            gpus = self._placements.get(job) if not self.exact_from_counts else self.place(self.sim, job)
            self.sim.start(job, gpus)
        self._settle()
        reward = self._reward_since(mark)
        self.steps += 1
        terminated = self.drained
        truncated = not terminated and self.max_steps is not None and self.steps >= self.max_steps
        obs = self._observe()
        return obs, reward, terminated, truncated, self._info(terminated, truncated)

    def job_at(self, slot: int) -> int:
        """Job id in window slot ``slot`` (-1 if empty)."""
        return int(self._jobs[slot]) if 0 <= slot < len(self._jobs) else -1

    def slot_of(self, job: int) -> int:
        """Window slot of a job id, or -1 if it is not in the window."""
        hits = np.flatnonzero(self._jobs == job)
        return int(hits[0]) if len(hits) else -1
