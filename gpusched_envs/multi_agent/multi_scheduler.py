"""``multi_scheduler_v1``: K scheduler agents (e.g. one per virtual cluster) share one GPU cluster (HMARL setting).

Each job belongs to one agent (its VC, its tenant, or round-robin). At every step each agent sees the hierarchical
cluster graph with its own queue and chooses, for its head job (its oldest waiting job), one of a few candidate
placements produced by the placement heuristics, or waits. Actions are simultaneous; two placements that want the
same GPUs are arbitrated by a seeded random order of the agents: the first wins, the losers keep their job and choose
again at the next step (``infos[agent]["conflict"]``). After a step in which some job started, the clock stays put
while any agent can still place its head; otherwise the simulator runs to the next instant at which one can.

## Action Space (per agent)
``Discrete(H · C + P + 1)`` with ``H = heads`` (default 1) and ``P = preempt`` (default 0): action ``h · C + c``
places the agent's h-th waiting job in ``queue_order`` (default ``fifo``: oldest first; h = 0: its head job) with
the c-th candidate placement; ``H · C + p`` (``first_preempt_action + p``) preempts the agent's own running job in
slot p (its running jobs, most attained service first; :meth:`running_slots`); ``H · C + P`` waits. ``heads > 1``
lets an agent start a later job of its queue when its head does not fit (backfilling learnt instead of fixed FIFO).
``queue_order="srtf"`` (clairvoyant) or ``"las"`` shows and offers the agent's shortest-remaining / least-attained
waiting jobs instead of its oldest. Preemption: a slot is valid while some job of any agent waits (an agent may yield
its GPUs to another's job) and its job has run ``min_run`` seconds (> 0) since it (re)started; a job preempted at
one instant is offered for placement again at a later one (unless waiting would deadlock); a preempted job keeps
its progress and pays the simulator's restart delay. An agent never stops another agent's job.
Candidates: :data:`BASE_CANDIDATES` (``closest``, ``consolidate``, ``first-fit``, ``pack``, ``spread``), then one
per rack (``rack-r``: the closest placement inside rack r). A candidate is valid when it exists now and differs
from every earlier candidate of the same job; waiting is valid except when nothing runs and nothing is still to arrive:
then the agent owning the first job in ``queue_order`` that some candidate can place must place a job (the others may
wait, so their small jobs do not take a large job's GPUs).

## Observation Space (per agent)
The padded Dict of :mod:`gpusched_envs.envs.encoding` (``obs_mode`` ``"graph"`` or ``"flat"``) with the agent's own
queue as the job window, plus ``candidate_features (H · C, 5)`` = (valid, servers spanned ÷ max server count, racks
spanned ÷ racks, log of the predicted iteration time ÷ ideal, log1p of jobs already on the candidate's servers),
``context (3,)`` = (share of own jobs finished, log1p own queue length, agent index ÷ K) and ``action_mask``.
With ``preempt = P`` the job block gains P rows for the running slots (the single-agent JobSelect's preemption
columns). With ``coordination=True``, ``coordination_features (H + P, 6)``: for each head job and running slot,
:data:`COORDINATION_FEATURES` — where the job stands in one ``queue_order`` over every agent's head jobs and
running jobs, filled greedily into the cluster's GPUs as a preemptive priority scheduler would (GPUs claimed before
it, whether it is claimed, claimed waiting GPUs before it that cannot be placed now, running GPUs after it; its GPUs;
filled): what the schedulers of one data centre publish to each other.
``information`` (``"non-clairvoyant"`` default | ``"clairvoyant"``) sets the time columns as the single-agent envs
(table in :mod:`gpusched_envs.envs.encoding`); non-clairvoyant, ``context[0]`` is log1p of own jobs finished (the
share would reveal how many are still to arrive), and :meth:`state`'s too.
:meth:`state` is one flat vector for a central critic: the flat cluster encoding with every agent's head job.

## Rewards
Shared (cooperative): ``−(jobs in system × elapsed) / time_scale`` between two steps, so the return of a full
episode is ``−Σ JCT / time_scale``; with ``agent_share = α`` each agent gets ``(1 − α) · shared + α · own``, own being
the same integral over its own jobs.

## Invalid Actions
``invalid_action="penalize"`` (default): an invalid action gives ``−invalid_penalty`` to that agent and is a wait;
for the agent that must place (nothing runs and nothing is to arrive, so its wait is masked) it is its first valid
action (``infos[agent]["forced_action"]``), so the simulator is never advanced with nothing to run. ``"raise"``:
an :class:`InvalidActionError` naming the agent. Why an agent's last action was refused: ``last_invalid_reason``.

## Episode End
All agents terminate when every job has finished; all truncate after ``max_cycles`` steps (``max_steps`` is
accepted as an alias).

## Info (per agent)
The same keys and dtypes at ``reset`` and at every step: ``time`` (float64), ``queued`` (int64, the agent's
waiting jobs), ``conflict`` (bool_, lost the arbitration), ``invalid_action`` (bool_), ``forced_action`` (int64,
-1 when none), ``episode_done`` (bool_), ``metrics`` (the simulator's ``METRIC_KEYS``, float64) and
``agent_metrics`` (:data:`AGENT_METRIC_KEYS` of the agent's own jobs, float64): the episode's values once
``episode_done``, 0.0 before; :meth:`episode_metrics` at any time.

## Arguments
``num_agents`` (None: one per pool of the cluster, else one per VC of the workload, else 4), ``cluster``,
``workload`` (spec string, Workload or callable; None: Philly-fitted synthetic at ``load``), ``num_jobs``, ``load``,
``routing`` (``"auto"`` | ``"vc"`` | ``"tenant"`` | ``"round_robin"``), ``window`` (own jobs shown), ``heads`` (jobs an
agent may choose among, oldest first), ``obs_mode``,
``agent_share``, ``interference`` (True: co-located jobs of different agents slow each other), ``speed_model``,
``max_cycles``, ``time_scale``, ``invalid_action``, ``invalid_penalty``, ``workload_seed``, ``information``,
``preempt`` (running slots per agent), ``queue_order`` (``fifo`` | ``srtf`` | ``las``), ``coordination``, ``min_run``.

## Version History
- v1: an invalid action of the agent that must place is its first valid placement (no deadlock); fixed per-agent
  info keys; synthetic workload specs sized to the cluster.
- v0: initial version.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from gpusched_envs.envs.core import (
    NON_IMAGE_OBS_MODES,
    EnvCore,
    EpisodeEndedError,
    EpisodeSpec,
    InvalidActionError,
    RewardIntegral,
    check_action_value,
    check_choice,
    metrics_info,
)
from gpusched_envs.envs.core import RENDER_MODES as _ENV_RENDER_MODES
from gpusched_envs.envs.encoding import ClusterEncoder, Layout
from gpusched_envs.envs.features import RunningTotals, gpu_relative_speed
from gpusched_envs.envs.render import render_ansi, render_rgb
from gpusched_envs.multi_agent import candidate_kernels as _ck
from gpusched_envs.policies.multi_agent import (
    BASE_CANDIDATES,
    CLAIRVOYANT_ORDERS,
    HEURISTIC_ORDERS,
    HeuristicMultiAgent,
)
from gpusched_envs.policies.placement import closest_in_rack, get_placement
from gpusched_envs.sim import Simulator
from gpusched_envs.sim import engine_kernels as _ek
from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.sim import throughput as tp
from gpusched_envs.sim.datacenter import DATACENTER_KEYS, datacenter_cluster, resolve_multi_cluster
from gpusched_envs.sim.engine import DONE, FULL_GPU, RESTARTING, RUNNING
from gpusched_envs.sim.metrics import METRIC_KEYS
from gpusched_envs.sim.sensitivity import job_sensitivities
from gpusched_envs.sim.workload import Workload
from gpusched_envs.validation import check_cap
from gpusched_envs.workloads.windows import PhillyWindows, resolve_multi_workload

# the keys of infos[agent]["agent_metrics"] (float64, NaN until the episode ends): the agent's own jobs
AGENT_METRIC_KEYS = ("jobs", "avg_jct", "p95_jct")
CANDIDATE_FEATURES = ("valid", "servers", "racks", "log_slowdown", "colocated_jobs")
ROUTINGS = ("auto", "vc", "tenant", "round_robin")
OBS_MODES = NON_IMAGE_OBS_MODES
RENDER_MODES = ("human", *_ENV_RENDER_MODES)
CONTEXT = 3
RUNNING_STATES = (RUNNING, RESTARTING)
QUEUE_ORDERS = ("fifo", "srtf", "las")
# per head job, then per running slot, with ``coordination=True``, over every agent's head jobs and running jobs in one
# queue_order, filled greedily into the cluster's GPUs (a job is "claimed" when its GPUs fit beside those of the
# claimed jobs before it: the set a preemptive priority scheduler runs): GPUs (÷ cluster GPUs) claimed before the job,
# 1 if the job is claimed, GPUs of claimed waiting jobs before it that cannot be placed now, GPUs of running jobs
# after it, the job's own GPUs, and 1 on a filled row
COORDINATION_FEATURES = ("claimed_before", "claimed", "blocked_before", "running_after", "gpus", "filled")


_NO_MASK = np.zeros(0, dtype=bool)  # every GPU allowed (engine_kernels.check_gpus)


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only, as the cluster's arrays are: the compiled placement loops then run the variant the
    placement rules compile (numba types a read-only array apart from a writeable one)."""
    a.setflags(write=False)
    return a


class MultiSchedulerEnv(EnvCore, ParallelEnv):
    """K schedulers sharing one cluster (see the module docstring for spaces, rewards and arguments)."""

    metadata = {"name": "multi_scheduler_v1", "render_modes": list(RENDER_MODES), "is_parallelizable": True}
    obs_modes_offered = OBS_MODES

    def __init__(
        self,
        num_agents: int | None = None,
        cluster="tiny",
        workload=None,
        num_jobs: int = 100,
        load: float = 0.9,
        routing: str = "auto",
        window: int = 8,
        heads: int = 1,
        obs_mode: str = "graph",
        agent_share: float = 0.0,
        interference: bool = True,
        speed_model: str = "throughput",
        max_cycles: int | None = None,
        time_scale: float = 3600.0,
        invalid_action: str = "penalize",
        invalid_penalty: float = 1.0,
        workload_seed: int | None = None,
        render_mode: str | None = None,
        information: str = "non-clairvoyant",
        max_steps: int | None = None,
        preempt: int = 0,
        queue_order: str = "fifo",
        coordination: bool = False,
        min_run: float = 0.0,
    ):
        check_choice("routing", routing, ROUTINGS)
        self._set_common_args(
            obs_mode, render_mode, invalid_action, information, window, time_scale, invalid_penalty
        )
        check_choice("queue_order", queue_order, QUEUE_ORDERS)
        if queue_order == "srtf" and information != "clairvoyant":
            raise ValueError(
                "queue_order='srtf' reads the traced durations: it needs information='clairvoyant'"
            )
        self.queue_order = queue_order
        if not 0.0 <= agent_share <= 1.0:
            raise ValueError(f"agent_share must be in [0, 1], got {agent_share}")
        if (
            isinstance(heads, bool)
            or not isinstance(heads, (int, np.integer))
            or not 1 <= heads <= self.window
        ):
            raise ValueError(f"heads must be an integer in 1..window ({self.window}), got {heads!r}")
        if isinstance(preempt, bool) or not isinstance(preempt, (int, np.integer)) or not 0 <= preempt <= 64:
            raise ValueError(
                f"preempt must be an integer in 0..64 (running jobs an agent may preempt), got {preempt!r}"
            )
        if max_steps is not None and max_cycles is not None and max_steps != max_cycles:
            raise ValueError(
                f"max_cycles={max_cycles} and its alias max_steps={max_steps} disagree: give one"
            )
        max_cycles = (
            max_cycles if max_cycles is not None else max_steps
        )  # PettingZoo's name; max_steps: alias
        if max_cycles is not None and (
            isinstance(max_cycles, bool) or int(max_cycles) != max_cycles or max_cycles < 1
        ):
            raise ValueError(f"max_cycles must be an integer >= 1 or None, got {max_cycles!r}")
        self.episode = EpisodeSpec.checked(
            resolve_multi_cluster(cluster),
            resolve_multi_workload(workload),
            workload_seed,
            num_jobs,
            load,
            interference,
            speed_model,
        )
        self.agent_share = float(agent_share)
        self.heads = int(heads)
        self.preempt = int(preempt)
        self.coordination = bool(coordination)
        if not np.isfinite(min_run) or min_run < 0:
            raise ValueError(f"min_run must be a finite number of seconds >= 0, got {min_run!r}")
        self.min_run = float(min_run)
        self.max_cycles = None if max_cycles is None else int(max_cycles)

        # agents are fixed at construction: per pool, per VC of the (seed-0 or fixed) workload, or a given count
        self.vc_agents: tuple[str, ...] = ()
        if num_agents is None:
            if self.cluster.pool_names:
                self.vc_agents = self.cluster.pool_names
            else:
                probe = self.episode.workload(self.workload_seed or 0)
                self.vc_agents = tuple(probe.vc_names)
            num_agents = len(self.vc_agents) or 4
        if isinstance(num_agents, bool) or not isinstance(num_agents, (int, np.integer)) or num_agents < 1:
            raise ValueError(f"num_agents must be an integer >= 1, got {num_agents!r}")
        check_cap("agents", int(num_agents), "multi_scheduler_v1: num_agents")
        if routing == "auto":
            routing = "vc" if self.vc_agents else "round_robin"
        if routing == "vc" and not self.vc_agents:
            raise ValueError("routing='vc' needs num_agents=None and a pooled cluster or a workload with VCs")
        self.routing = routing
        self.possible_agents = [f"scheduler_{i}" for i in range(num_agents)]
        self.agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        self.agents: list[str] = []

        self.candidate_names = BASE_CANDIDATES + tuple(f"rack-{r}" for r in range(self.cluster.num_racks))
        self.num_candidates = len(self.candidate_names)  # C, per head job
        self.num_choices = self.heads * self.num_candidates  # (head h, candidate c) is action h·C + c
        self.first_preempt_action = self.num_choices  # then one action per running slot (preempt > 0)
        self.wait_action = self.num_choices + self.preempt
        self._placers = [get_placement(n) for n in BASE_CANDIDATES]
        c = self.cluster
        # the compiled candidates (candidate_kernels.joint_candidates) where they cover this env, else the Python path
        self.compiled_candidates = tuple(BASE_CANDIDATES) == _ck.BASE_ORDER and bool(
            np.array_equal(c.gpu_rack, c.server_rack[c.gpu_server])
        )
        self._log1p_table = np.log1p(np.arange(64, dtype=np.int64))  # np.log1p of the counts, as log1p_count
        layout = Layout.for_clusters(
            [self.cluster], self.window + self.preempt, CONTEXT, self.wait_action + 1
        )
        self.encoder = ClusterEncoder(
            layout, obs_mode, self.time_scale, information, running_rows=self.preempt
        )
        self.encoder.set_cluster(self.cluster, gpu_relative_speed(self.cluster))
        self.state_encoder = ClusterEncoder(
            Layout.for_clusters([self.cluster], num_agents, CONTEXT, 1), "flat", self.time_scale, information
        )
        self.state_encoder.set_cluster(self.cluster, gpu_relative_speed(self.cluster))
        obs_space = self.encoder.observation_space()
        obs_space.spaces["candidate_features"] = spaces.Box(
            -np.inf, np.inf, shape=(self.num_choices, len(CANDIDATE_FEATURES)), dtype=np.float32
        )
        if self.coordination:
            obs_space.spaces["coordination_features"] = spaces.Box(
                -np.inf,
                np.inf,
                shape=(self.heads + self.preempt, len(COORDINATION_FEATURES)),
                dtype=np.float32,
            )
        self._observation_space = obs_space
        self._action_space = spaces.Discrete(self.wait_action + 1)
        self.state_space = spaces.Box(
            -np.inf, np.inf, shape=self.state_encoder.buffers["obs"].shape, dtype=np.float32
        )
        self._candidate_buf = np.zeros(
            (num_agents, self.num_choices, len(CANDIDATE_FEATURES)), dtype=np.float32
        )
        self._coordination_buf = np.zeros(
            (num_agents, self.heads + self.preempt, len(COORDINATION_FEATURES)), dtype=np.float32
        )
        self.sim: Simulator | None = None
        self._rng = np.random.default_rng()
        self.last_invalid_reason: dict[str, str] = {}  # per agent: why its last invalid action was refused

    @property
    def max_steps(self) -> int | None:
        """Alias of ``max_cycles`` (the name the single-agent envs use)."""
        return self.max_cycles

    # ------------------------------------------------------------------ PettingZoo API
    @functools.cache  # noqa: B019 - one space object per agent, as PettingZoo expects
    def observation_space(self, agent: str) -> spaces.Dict:
        return self._observation_space

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_space

    def state(self) -> np.ndarray:
        if self.sim is None:
            raise EpisodeEndedError("state() called before reset()")
        sim, enc = self.sim, self.state_encoder
        heads = np.array([h for h in self._heads if h >= 0], dtype=np.int64)
        enc.encode_cluster(sim, self.sim.free_gpus(), None, None, 0)
        enc.encode_jobs(sim, heads, np.zeros(len(heads), dtype=bool), self.log_sensitivity)
        clairvoyant = self.information == "clairvoyant"
        enc.context[0] = (
            sim.finished / max(sim.to_finish, 1) if clairvoyant else enc.log1p_count(sim.finished)
        )
        enc.context[1] = enc.log1p_count(len(sim.queue))
        enc.context[2] = enc.log1p_count(len(sim.running))
        return enc.buffers["obs"].copy()

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None or self.sim is None:
            self._rng = np.random.default_rng(seed)
        self.sim = sim = self.episode.simulator(self._rng)  # as the single-agent envs' episodes
        self.owner = self._route(sim.workload)  # (J,) agent index of every job
        self.sensitivity = job_sensitivities(self.cluster, sim.job_model, sim.job_gpus_n)
        self.log_sensitivity = np.log(self.sensitivity)
        k = len(self.possible_agents)
        self.totals = RunningTotals(sim)
        # each agent's own integral, for agent_share > 0 (none otherwise: the rewards are the shared one's)
        self.own_totals = [
            RunningTotals(sim, (self.owner == i).astype(np.float64))
            for i in range(k if self.agent_share else 0)
        ]
        # the shared reward, then each agent's own: the "jct" integral of the single-agent envs
        self._rewards = [RewardIntegral(t, "jct", self.time_scale) for t in (self.totals, *self.own_totals)]
        self.own_count = np.bincount(self.owner[~sim.initially_dropped], minlength=k)
        self.agents = list(self.possible_agents)
        self.steps = 0
        self._head_jobs = np.full((k, self.heads), -1, dtype=np.int64)  # the jobs each agent may place now
        self._heads = self._head_jobs[:, 0]  # (K,) view: the oldest waiting job of each agent
        self._preempted_now: set[int] = set()  # jobs preempted at the current instant
        self._running_slots = np.full(
            (k, self.preempt), -1, dtype=np.int64
        )  # own running jobs it may preempt
        # the GPUs of each (agent, action): _place[i, a, :_place_n[i, a]] (0: no placement there); as many
        # columns as the largest job asks for GPUs
        width = max(1, int(sim.job_gpus_n.max(initial=0)))
        self._place = np.zeros((k, self.num_choices, width), dtype=np.int64)
        self._kernel_out = np.zeros((3, k, self.num_choices), dtype=np.int64)  # candidate_kernels.O_* rows
        self._kernel_out[_ck.O_SAME] = -1
        self._place_n = self._kernel_out[_ck.O_NUM]
        # the first identical candidate of each action (-1: none)
        self._same_as = self._kernel_out[_ck.O_SAME]
        # each agent's first waiting jobs in queue_order (-1 pads) and its number of waiting jobs
        self._window_jobs = np.full((k, self.window), -1, dtype=np.int64)
        self._queued_n = np.zeros(k, dtype=np.int64)
        self._kernel_args = self._static_kernel_args(sim)
        self._advance(force=True)
        infos = {a: self._agent_info(i, False) for i, a in enumerate(self.possible_agents)}
        return self._observations(), infos

    def _agent_info(
        self, i: int, done: bool, metrics: dict | None = None, queued: np.ndarray | None = None
    ) -> dict[str, Any]:
        """Agent ``i``'s info: the same keys and dtypes at ``reset`` and every ``step`` (module docstring, Info);
        ``queued`` (optional): every agent's waiting jobs now (``_queued_n``)."""
        sim = self.sim
        if queued is not None:
            queued = queued[i]
        else:
            queued = np.count_nonzero(self.owner[list(sim.queue)] == i) if sim.queue else 0
        return {
            "time": np.float64(sim.now),
            "queued": np.int64(queued),
            "conflict": np.bool_(False),
            "invalid_action": np.bool_(False),
            "forced_action": np.int64(-1),
            "episode_done": np.bool_(done),
            "metrics": metrics_info(metrics, METRIC_KEYS),
            "agent_metrics": metrics_info(self._agent_metrics(i) if done else None, AGENT_METRIC_KEYS),
        }

    def _agent_infos(self, done: bool, metrics: dict | None, queued: np.ndarray) -> dict[str, dict[str, Any]]:
        """Every agent's :meth:`_agent_info` (the same dicts) in one pass."""
        if done:
            return {a: self._agent_info(i, done, metrics, queued) for i, a in enumerate(self.possible_agents)}
        base = {
            "time": np.float64(self.sim.now),
            "queued": None,
            "conflict": np.bool_(False),
            "invalid_action": np.bool_(False),
            "forced_action": np.int64(-1),
            "episode_done": np.bool_(False),
            "metrics": None,
            "agent_metrics": None,
        }
        infos = {}
        for agent, n in zip(self.possible_agents, queued.tolist(), strict=True):
            info = infos[agent] = base.copy()
            info["queued"] = np.int64(n)
            info["metrics"] = metrics_info(None, METRIC_KEYS)
            info["agent_metrics"] = metrics_info(None, AGENT_METRIC_KEYS)
        return infos

    def episode_metrics(self) -> dict[str, np.float64]:
        """The simulator's metrics (float64) of the episode so far: what ``infos[agent]["metrics"]`` holds once
        the episode ends."""
        if self.sim is None:
            raise EpisodeEndedError("episode_metrics() called before reset()")
        return metrics_info(self.sim.metrics(), METRIC_KEYS)

    def _parse_actions(self, actions) -> np.ndarray:
        """(K,) integer actions (a missing agent waits); a malformed one raises :class:`InvalidActionError` naming
        the agent, whatever ``invalid_action`` says (it is a programming error, not a policy's choice)."""
        if not isinstance(actions, dict):
            raise InvalidActionError(
                f"actions must be a dict of agent -> action, got {type(actions).__name__}"
            )
        unknown = set(actions) - set(self.agent_index)
        if unknown:
            raise InvalidActionError(
                f"actions: unknown agents {sorted(map(str, unknown))} (agents: {', '.join(self.possible_agents)})"
            )
        out = np.full(len(self.possible_agents), self.wait_action, dtype=np.int64)
        for agent, action in actions.items():
            out[self.agent_index[agent]] = check_action_value(action, where=f"actions[{agent!r}]")
        return out

    def step(self, actions: dict[str, int]):
        if not self.agents:
            raise EpisodeEndedError(
                "step() called with no live agents: the episode has ended (or reset() was never called); "
                "call reset() first"
            )
        parsed = self._parse_actions(actions)
        sim = self.sim
        k = len(self.possible_agents)
        mark = self._mark()
        rewards = dict.fromkeys(self.agents, 0.0)
        flags: dict[str, dict[str, Any]] = {}  # conflict, invalid_action, forced_action
        placed = False
        for i in self._rng.permutation(k):
            agent = self.possible_agents[i]
            a = int(parsed[i])
            if not 0 <= a <= self.wait_action or not self._masks[i, a]:
                if self.invalid_action == "raise":
                    raise InvalidActionError(
                        f"actions[{agent!r}]: invalid action {a} "
                        f"(valid now: {np.flatnonzero(self._masks[i]).tolist()})"
                    )
                rewards[agent] -= self.invalid_penalty
                flags.setdefault(agent, {})["invalid_action"] = np.bool_(True)
                self.last_invalid_reason[agent] = (
                    f"invalid action {a} (valid then: {np.flatnonzero(self._masks[i]).tolist()})"
                )
                if self._masks[i, self.wait_action]:
                    continue  # resolves to waiting
                # the agent must place (nothing runs, nothing is to arrive): its first valid placement
                a = int(np.flatnonzero(self._masks[i])[0])
                flags.setdefault(agent, {})["forced_action"] = np.int64(a)
            if a == self.wait_action:
                continue
            if a >= self.first_preempt_action:
                victim = int(self._running_slots[i, a - self.first_preempt_action])
                if sim.status[victim] in RUNNING_STATES:  # (the slot was validated on this step's state)
                    sim.preempt(victim)
                    self._preempted_now.add(victim)
                    placed = True
                continue
            job = int(self._head_jobs[i, a // self.num_candidates])
            # (a copy: the simulator keeps the array it is given)
            gpus = self._place[i, a, : self._place_n[i, a]].copy()
            if self._gpus_free(job, gpus):
                sim.start(job, gpus)
                placed = True
            else:
                # lost the arbitration: retries at the next step
                flags.setdefault(agent, {})["conflict"] = np.bool_(True)
        self.steps += 1
        self._advance(force=not placed)
        shared = self._rewards[0].since(mark[0])
        for i, agent in enumerate(self.possible_agents):
            own = self._rewards[i + 1].since(mark[i + 1]) if self.agent_share else 0.0
            rewards[agent] += (1 - self.agent_share) * shared + self.agent_share * own
        terminated = sim.drained
        truncated = not terminated and self.max_cycles is not None and self.steps >= self.max_cycles
        observations = self._observations()
        done = terminated or truncated
        metrics = sim.metrics() if done else None
        queued = self._queued_n  # every agent's waiting jobs at this instant (_order_windows)
        infos = self._agent_infos(done, metrics, queued)
        for agent, f in flags.items():
            infos[agent].update(f)
        terminations = dict.fromkeys(self.agents, terminated)
        truncations = dict.fromkeys(self.agents, truncated)
        if terminated or truncated:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def render(self):
        """``"ansi"``: the cluster map and every agent's head job as text; ``"human"``: that text printed (returns
        None); ``"rgb_array"``: the occupancy image of the single-agent envs."""
        if self.render_mode is None or self.sim is None:
            return None
        sim = self.sim
        heads = [int(h) for h in self._heads if h >= 0]
        if self.render_mode == "rgb_array":
            return render_rgb(sim, heads, self.cluster.max_server_gpus)
        lines = []
        for i, agent in enumerate(self.possible_agents):
            head = int(self._heads[i])
            what = "idle" if head < 0 else f"head job {head} ({sim.job_gpus_n[head]} GPUs)"
            lines.append(f"  {agent}: {what}, valid {np.flatnonzero(self._masks[i]).tolist()}")
        text = render_ansi(sim, heads, "multi_scheduler_v1", "\n".join(lines))
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ internals
    def _route(self, workload: Workload) -> np.ndarray:
        k = len(self.possible_agents)
        n = len(workload)
        if self.routing == "round_robin":
            return np.arange(n) % k
        if self.routing == "tenant":
            return np.where(workload.vc >= 0, workload.vc, np.arange(n)).astype(np.int64) % k
        lookup = {name: i for i, name in enumerate(self.vc_agents)}
        table = np.array([lookup.get(v, -1) for v in workload.vc_names] + [-1], dtype=np.int64)
        owner = table[workload.vc.astype(np.int64)]
        unknown = owner < 0
        owner[unknown] = np.flatnonzero(unknown) % k  # jobs of other VCs: round-robin
        return owner

    def _gpus_free(self, job: int, gpus: np.ndarray) -> bool:
        """Whether ``job`` may start on ``gpus`` now (``sim.free_mask(job)[gpus].all()``)."""
        sim = self.sim
        milli = sim.job_milli[job]
        k = sim.job_allowed[job]
        need = FULL_GPU if milli >= FULL_GPU else int(milli)
        return bool(
            _ek.check_gpus(gpus, need, sim.gpu_free_milli, _NO_MASK if k < 0 else sim.allowed_masks[k])
        )

    def _mark(self) -> list[tuple[float, float, float]]:
        """The marks of the shared reward and of every agent's own, now."""
        return [r.mark() for r in self._rewards]  # (only the shared one when agent_share is 0)

    def _static_kernel_args(self, sim) -> tuple:
        """The arguments of :func:`candidate_kernels.joint_candidates` fixed for one simulator."""
        c = self.cluster
        masks = sim.allowed_masks
        allowed = np.stack(masks) if masks else np.zeros((1, c.num_gpus), dtype=bool)
        server_ok = np.zeros((max(1, len(masks)), c.num_servers), dtype=bool)
        allowed_i = np.zeros((2, max(1, len(masks))), dtype=np.int64)
        for k, m in enumerate(sim.allowed_server_masks):
            if m is not None:
                server_ok[k], allowed_i[_ck.A_WHOLE, k] = m, 1
        allowed_i[_ck.A_LARGEST, : len(masks)] = sim.allowed_largest_server
        params = np.zeros(_ck.P_SIZE)
        params[_ck.P_SPINE] = c.spine_latency
        params[_ck.P_DURATION] = float(self.speed_model == "duration")
        params[_ck.P_MAXSERVER] = c.max_server_gpus
        cat = c.catalog
        model_f = np.stack([np.asarray(cat.gradient_bytes, float), np.asarray(cat.overlap_gamma, float)])
        overhead = c.server_compute_overhead if c.server_compute_overhead is not None else _ek.NO_OVERHEAD
        return (
            _ck.job_table(sim),
            sim.job_ideal_iter,
            _read_only(np.stack([c.gpu_server, c.gpu_rack])),
            _read_only(np.stack([c.gpu_server, c.gpu_type]).astype(np.int64)),
            c.server_rows_i64,
            _ck.network_table(c),
            np.stack([c.gpu_rack == r for r in range(c.num_racks)]),
            cat.iteration_time,
            overhead,
            model_f,
            allowed,
            server_ok,
            allowed_i,
            params,
        )

    def _order_windows(self) -> None:
        """Each agent's first ``window`` waiting jobs in ``queue_order`` (``_window_jobs``), its number of waiting
        jobs (``_queued_n``) and its head jobs (the window's first ``heads``)."""
        sim = self.sim
        queued = (
            np.fromiter(sim.queue, dtype=np.int64, count=len(sim.queue))
            if sim.queue
            else np.zeros(0, np.int64)
        )
        if self.queue_order == "fifo":
            _ck.fifo_windows(queued, self.owner, self.window, self._window_jobs, self._queued_n)
        else:
            self._window_jobs[...] = -1
            owners = self.owner[queued]
            for i in range(len(self.possible_agents)):
                mine = self._ordered(queued[owners == i])
                self._queued_n[i] = len(mine)
                self._window_jobs[i, : min(len(mine), self.window)] = mine[: self.window]
        self._head_jobs[...] = self._window_jobs[:, : self.heads]

    def _compute_candidates(self, compiled: bool | None = None) -> None:
        """Heads, candidate placements and masks of every agent at the current instant; ``compiled`` (None: where
        the compiled kernel covers this env) picks the kernel or the Python path (the same results)."""
        sim = self.sim
        k = len(self.possible_agents)
        self._order_windows()
        masks = np.zeros((k, self.wait_action + 1), dtype=bool)
        stuck = not sim.running and sim.next_arrival >= sim.num_jobs
        if self.compiled_candidates if compiled is None else compiled:
            self._kernel_candidates(masks, stuck)
        else:
            self._candidate_buf[...] = 0.0
            self._same_as[...] = -1
            self._place_n[...] = 0
            for i in range(k):
                for h in range(self.heads):
                    job = int(self._head_jobs[i, h])
                    if job < 0:
                        break
                    if job in self._preempted_now and not stuck:
                        continue  # preempted at this instant: it restarts at a later one (unless that deadlocks)
                    self._python_candidates(i, h, job, masks)
        nc = self.num_candidates
        masks[:, self.wait_action] = True
        if stuck:
            # nothing runs and nothing is to arrive: ONE agent must place a job, the owner of the first placeable head
            # job in queue_order (forcing every agent that could place would let small jobs take the GPUs of a large
            # one, start one job at a time, and starve the large one until its agent wins the arbitration)
            placeable = masks[:, : self.num_choices].reshape(k, self.heads, nc).any(-1)
            agent_of, head_of = np.nonzero(placeable)
            if len(agent_of):
                jobs = self._head_jobs[agent_of, head_of]
                first = int(np.lexsort((jobs, self._order_keys(jobs)))[0])
                masks[agent_of[first], self.wait_action] = False
        if self.preempt:
            self._preempt_slots(masks)
        self._masks = masks
        if self.coordination:
            self._coordination_features()

    def _kernel_candidates(self, masks: np.ndarray, stuck: bool) -> None:
        """The candidates of every head job through :func:`candidate_kernels.joint_candidates`; a head job it leaves
        (``H_PYTHON``) through :meth:`_python_candidates`."""
        sim = self.sim
        heads = self._head_jobs
        status = np.zeros(heads.shape, dtype=np.int64)
        if self._preempted_now and not stuck:
            status[np.isin(heads, list(self._preempted_now))] = _ck.H_SKIP
        ratio = np.empty(self._place_n.shape)
        server_jobs = np.fromiter(map(len, sim.server_jobs), dtype=np.int64, count=len(sim.server_jobs))
        feats, out = self._candidate_buf, self._kernel_out
        left, valid = _ck.joint_candidates(
            heads, status, self.num_candidates, sim._gi, sim._si, sim.free_gpus(), sim.rack_crossing, server_jobs,
            *self._kernel_args, masks, feats, ratio, out, self._place,
        )  # fmt: skip
        if valid:
            # the two features after their logarithm (ratio 1 and no job where no candidate is: 0.0 there)
            np.maximum(ratio, 1e-9, out=ratio)
            feats[..., 3] = np.log(ratio, out=ratio)
            col = out[_ck.O_COLOCATED]
            table = self._log1p_table
            most = int(col.max())
            if most >= len(table):
                table = self._log1p_table = np.log1p(np.arange(2 * most + 1, dtype=np.int64))
            feats[..., 4] = table[col]
        if left:
            for i, h in np.argwhere(status == _ck.H_PYTHON).tolist():
                self._python_candidates(i, h, int(heads[i, h]), masks)

    def _python_candidates(self, i: int, h: int, job: int, masks: np.ndarray) -> None:
        """Agent ``i``'s candidates for its ``h``-th head ``job``, placement rule by placement rule (the definition
        the compiled kernel follows)."""
        if not self._may_fit(job):
            return  # fewer free GPUs than it asks for: no candidate can place it
        sim, nc = self.sim, self.num_candidates
        feats = self._candidate_buf
        seen: dict[bytes, int] = {}
        for c in range(nc):
            if c < len(BASE_CANDIDATES):
                gpus = self._placers[c](sim, job)
            else:
                gpus = closest_in_rack(sim, job, c - len(BASE_CANDIDATES))
            if gpus is None:
                continue
            key = np.sort(gpus).tobytes()
            a = h * nc + c
            if key in seen:
                self._same_as[i, a] = seen[key]  # a duplicate: the earlier candidate places the same
                continue
            seen[key] = a
            self._same_as[i, a] = a
            self._place[i, a, : len(gpus)] = gpus
            self._place_n[i, a] = len(gpus)
            masks[i, a] = True
            self._candidate_features(job, gpus, feats[i, a])

    def _may_fit(self, job: int) -> bool:
        """Whether enough GPUs are free for ``job`` (in its pool / type, with its share): otherwise every candidate
        placement (each one deterministic) finds none."""
        sim = self.sim
        if sim.job_allowed[job] < 0 and sim.job_milli[job] >= FULL_GPU:
            return bool(sim.job_gpus_n[job] <= sim.free_gpus())
        need = 1 if sim.job_milli[job] < FULL_GPU else int(sim.job_gpus_n[job])
        return np.count_nonzero(sim.free_mask(job)) >= need

    def _order_keys(self, jobs: np.ndarray) -> np.ndarray:
        """The ``queue_order`` key of waiting or running jobs (smaller first): submit time, remaining time at ideal
        speed (in-flight progress included) or attained GPU-seconds (current allocation included)."""
        sim = self.sim
        if self.queue_order == "fifo":
            return sim.workload.submit_time[jobs].astype(np.float64)
        running = np.isin(sim.status[jobs], RUNNING_STATES)
        if self.queue_order == "srtf":
            done = sim.done_work[jobs] + np.where(
                sim.status[jobs] == RUNNING, sim.rate[jobs] * (sim.now - sim.last_update[jobs]), 0.0
            )
            return np.maximum(sim.job_work[jobs] - done, 0.0) * sim.job_ideal_iter[jobs]
        return sim.attained[jobs] + np.where(
            running, sim.job_gpus_n[jobs] * (sim.now - sim.run_start[jobs]), 0.0
        )

    def _coordination_features(self) -> None:
        """:data:`COORDINATION_FEATURES` of every agent's head jobs and running slots (what the agents publish to
        each other: where each of their jobs stands in one queue order over all agents)."""
        sim, nc, k = self.sim, self.num_candidates, len(self.possible_agents)
        buf = self._coordination_buf
        buf[...] = 0.0
        heads = self._head_jobs
        waiting = heads[heads >= 0]
        running = (
            np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
            if sim.running
            else np.zeros(0, np.int64)
        )
        jobs = np.concatenate([waiting, running])
        if not len(jobs):
            return
        placeable = self._masks[:, : self.num_choices].reshape(k, self.heads, nc).any(-1)[heads >= 0]
        blocked = np.concatenate([~placeable, np.zeros(len(running), bool)])
        need = sim.job_gpus_n[jobs].astype(np.float64) / self.cluster.num_gpus
        order = np.lexsort((jobs, self._order_keys(jobs)))
        claimed = np.zeros(len(jobs), bool)
        budget = 1.0 + 1e-9
        for n in order:  # greedy fill in priority order
            if need[n] <= budget:
                budget -= need[n]
                claimed[n] = True
        is_running = np.concatenate([np.zeros(len(waiting), bool), np.ones(len(running), bool)])

        def before(x):  # sum of x over the jobs before each one in the order
            out = np.empty(len(jobs))
            out[order] = np.cumsum(x[order]) - x[order]
            return out

        claimed_before = before(need * claimed)
        blocked_before = before(need * (claimed & blocked))
        rn = need * is_running
        running_after = np.empty(len(jobs))
        running_after[order] = rn.sum() - np.cumsum(rn[order])
        row = {
            int(j): (claimed_before[n], float(claimed[n]), blocked_before[n], running_after[n], need[n])
            for n, j in enumerate(jobs)
        }
        for i in range(k):
            for r, j in enumerate([*heads[i], *self._running_slots[i]]):
                if j >= 0:
                    buf[i, r, :5] = row[int(j)]
                    buf[i, r, 5] = 1.0

    def _preempt_slots(self, masks: np.ndarray) -> None:
        """Each agent's running slots: its own running jobs, most attained service first (what a non-clairvoyant
        scheduler observes); slot p is preemptible when it holds a job that did not start at this instant (which
        bounds the actions at one instant) and has run at least ``min_run`` seconds since it (re)started, while some
        job (of any agent: an agent may yield GPUs to another's job) waits. A job preempted at this instant is not
        offered for placement again before the clock moves (unless waiting would deadlock)."""
        sim = self.sim
        self._running_slots[...] = -1
        if not sim.running or not sim.queue:
            return
        running = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
        attained = sim.attained[running] + sim.job_gpus_n[running] * (sim.now - sim.run_start[running])
        order = np.lexsort((running, -attained))
        running, owners = running[order], self.owner[running[order]]
        first = self.first_preempt_action
        for i in range(len(self.possible_agents)):
            mine = running[owners == i][: self.preempt]
            self._running_slots[i, : len(mine)] = mine
            ran = sim.now - sim.run_start[mine]
            masks[i, first : first + len(mine)] = (ran > 0) & (ran >= self.min_run)

    def _candidate_features(self, job: int, gpus: np.ndarray, out: np.ndarray) -> None:
        sim, c = self.sim, self.cluster
        m = int(sim.job_model[job])
        shape = tp.placement_shape(c, m, gpus)
        it = tp.iteration_time_of_shape(c, m, shape, sim.rack_crossing + 1 if shape.crosses_racks else None)
        ideal = sim.job_ideal_iter[job] if self.speed_model == "throughput" else it.total
        colocated = sum(len(sim.server_jobs[s]) for s in shape.servers)
        out[0] = 1.0
        out[1] = len(shape.servers) / c.num_servers
        out[2] = len(shape.racks) / c.num_racks
        out[3] = np.log(max(it.total / ideal, 1e-9))
        out[4] = self.encoder.log1p_count(colocated)

    def _advance(self, force: bool) -> None:
        """Stay at this instant if some agent can still place its head (and ``force`` is off); otherwise run the
        simulator to the next decision point at which one can."""
        sim = self.sim
        if not force:
            self._compute_candidates()
            if self._masks[:, : self.wait_action].any():
                return
        while True:
            more = sim.next_decision()
            self._preempted_now.clear()
            self.totals.sync()
            for t in self.own_totals:
                t.sync(self.totals.live)  # the same jobs in the system
            if not more:
                self._compute_candidates()
                return
            self._compute_candidates()
            if self._masks[:, : self.wait_action].any():
                return

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        sim, enc = self.sim, self.encoder
        enc.encode_cluster(sim, self.sim.free_gpus(), None, None, 0)
        k = len(self.possible_agents)
        nc = self.num_candidates
        # the window rows whose job some candidate places now (the heads' rows)
        fits = np.zeros((k, self.window), dtype=bool)
        fits[:, : self.heads] = self._masks[:, : self.num_choices].reshape(k, self.heads, nc).any(-1)
        queued_n = self._queued_n.tolist()
        finished = np.bincount(self.owner[sim.status == DONE], minlength=k).tolist()
        clairvoyant = self.information == "clairvoyant"
        out = {}
        for i, agent in enumerate(self.possible_agents):
            n = queued_n[i]
            shown = min(n, self.window)
            window = self._window_jobs[i, :shown]  # the agent's waiting jobs in queue_order, its heads first
            enc.cluster[3] = enc.log1p_count(n - shown)
            if self.preempt:
                slots = self._running_slots[i]
                slots = slots[slots >= 0]
                first = self.first_preempt_action
                preemptible = self._masks[i, first : first + len(slots)]
                enc.encode_jobs(sim, window, fits[i, :shown], self.log_sensitivity, slots, preemptible)
            else:
                enc.encode_jobs(sim, window, fits[i, :shown], self.log_sensitivity)
            enc.context[0] = self._own_finished(i, clairvoyant, finished[i])
            enc.context[1] = enc.log1p_count(n)
            enc.context[2] = i / k
            enc.action_mask[:] = self._masks[i]
            obs = enc.observation()
            obs["candidate_features"] = self._candidate_buf[i].copy()
            if self.coordination:
                obs["coordination_features"] = self._coordination_buf[i].copy()
            out[agent] = obs
        return out

    def _ordered(self, jobs: np.ndarray) -> np.ndarray:
        """Waiting jobs in ``queue_order``: oldest first (``fifo``), least remaining time at ideal speed first
        (``srtf``, clairvoyant) or least attained GPU-seconds first (``las``); ties: oldest."""
        if self.queue_order == "fifo" or len(jobs) < 2:
            return np.sort(jobs)
        return jobs[np.lexsort((jobs, self._order_keys(jobs)))]

    def _own_finished(self, i: int, share: bool = True, done: int | None = None) -> float:
        """Agent ``i``'s finished jobs: their share of its jobs, or (``share`` off) log1p of their count; ``done``
        (optional): that count."""
        total = self.own_count[i]
        if done is None:
            done = _kernels.count_owned(self.owner, self.sim.status, i, DONE)
        if not share:  # non-clairvoyant: the count (the share reveals how many jobs are still to arrive)
            return float(self.encoder.log1p_count(done))
        if not total:
            return 1.0
        return done / total

    def head_job(self, agent: str) -> int:
        """The job the agent places now (its oldest waiting job), -1 when its queue is empty."""
        return int(self._heads[self.agent_index[agent]])

    def head_jobs(self, agent: str) -> np.ndarray:
        """(heads,) the jobs the agent may place now, oldest first (-1 pads)."""
        return self._head_jobs[self.agent_index[agent]].copy()

    def candidate_placements(self, agent: str) -> list[np.ndarray | None]:
        """(heads · C,) the GPUs of each (head job, candidate) action now (None where not valid); the job of
        action ``a`` is ``head_jobs(agent)[a // num_candidates]``."""
        i = self.agent_index[agent]
        return [self._place[i, a, :n].copy() if n else None for a, n in enumerate(self._place_n[i].tolist())]

    def candidate_action(self, agent: str, name: str, head: int = 0) -> int:
        """The action that places the agent's ``head``-th waiting job (0: its head job) as candidate ``name`` would
        (``closest``, ``rack-2``, ...; a duplicate maps to the earlier identical candidate), or the wait action when
        that candidate cannot place it now."""
        try:
            c = self.candidate_names.index(name)
        except ValueError:
            raise ValueError(
                f"unknown candidate {name!r}; candidates: {', '.join(self.candidate_names)}"
            ) from None
        if not 0 <= head < self.heads:
            raise ValueError(f"head must be in 0..{self.heads - 1}, got {head}")
        same = int(self._same_as[self.agent_index[agent], head * self.num_candidates + c])
        return same if same >= 0 else self.wait_action

    def running_slots(self, agent: str) -> np.ndarray:
        """(preempt,) the agent's running jobs that actions ``first_preempt_action + p`` preempt (-1 pads), most
        attained service first."""
        return self._running_slots[self.agent_index[agent]].copy()

    def action_masks(self, agent: str) -> np.ndarray:
        """(H·C + P + 1,) bool valid actions of one agent now."""
        return self._masks[self.agent_index[agent]].copy()

    def _agent_metrics(self, i: int) -> dict:
        sim = self.sim
        mine = self.owner == i
        jct = (sim.finish_time - sim.workload.submit_time)[mine & (sim.status == DONE)]
        return {
            "jobs": int(len(jct)),
            "avg_jct": float(jct.mean()) if len(jct) else float("nan"),
            "p95_jct": float(np.percentile(jct, 95)) if len(jct) else float("nan"),
        }


# the public names of this module, with those that moved (re-exported here for one release): the data-centre
# cluster builder (gpusched_envs.sim.datacenter), the Philly-window workloads (gpusched_envs.workloads.windows), the
# per-agent heuristics (gpusched_envs.policies.multi_agent), the envs' shared errors (gpusched_envs.envs.core)
__all__ = [
    "BASE_CANDIDATES",
    "CANDIDATE_FEATURES",
    "CLAIRVOYANT_ORDERS",
    "CONTEXT",
    "COORDINATION_FEATURES",
    "DATACENTER_KEYS",
    "HEURISTIC_ORDERS",
    "OBS_MODES",
    "QUEUE_ORDERS",
    "RENDER_MODES",
    "ROUTINGS",
    "EpisodeEndedError",
    "HeuristicMultiAgent",
    "InvalidActionError",
    "MultiSchedulerEnv",
    "PhillyWindows",
    "datacenter_cluster",
    "resolve_multi_cluster",
    "resolve_multi_workload",
]
