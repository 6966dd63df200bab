"""``multi_scheduler_v0``: K scheduler agents (e.g. one per virtual cluster) share one GPU cluster (HMARL setting).

Each job belongs to one agent (its VC, its tenant, or round-robin). At every step each agent sees the hierarchical
cluster graph with its own queue and chooses, for its head job (its oldest waiting job), one of a few candidate
placements produced by the placement heuristics, or waits. Actions are simultaneous; two placements that want the
same GPUs are arbitrated by a seeded random order of the agents: the first wins, the losers keep their job and choose
again at the next step (``infos[agent]["conflict"]``). After a step in which some job started, the clock stays put
while any agent can still place its head; otherwise the simulator runs to the next instant at which one can.

## Action Space (per agent)
``Discrete(C + 1)``: candidate ``c < C`` places the head job with the c-th candidate placement, ``C`` waits.
Candidates: :data:`BASE_CANDIDATES` (``closest``, ``consolidate``, ``first-fit``, ``pack``, ``spread``), then one
per rack (``rack-r``: the closest placement inside rack r). A candidate is valid when it exists now and differs
from every earlier candidate; waiting is valid unless nothing runs and nothing is still to arrive while this agent
could place its head.

## Observation Space (per agent)
The padded Dict of :mod:`gpusched_envs.envs.encoding` (``obs_mode`` ``"graph"`` or ``"flat"``) with the agent's own
queue as the job window, plus ``candidate_features (C, 5)`` = (valid, servers spanned ÷ max server count, racks
spanned ÷ racks, log of the predicted iteration time ÷ ideal, log1p of jobs already on the candidate's servers),
``context (3,)`` = (share of own jobs finished, log1p own queue length, agent index ÷ K) and ``action_mask``.
``information`` (``"non-clairvoyant"`` default | ``"clairvoyant"``) sets the time columns as the single-agent envs
(table in :mod:`gpusched_envs.envs.encoding`); non-clairvoyant, ``context[0]`` is log1p of own jobs finished (the
share would reveal how many are still to arrive), and :meth:`state`'s too.
:meth:`state` is one flat vector for a central critic: the flat cluster encoding with every agent's head job.

## Rewards
Shared (cooperative): ``−(jobs in system × elapsed) / time_scale`` between two steps, so the return of a full
episode is ``−Σ JCT / time_scale``; with ``agent_share = α`` each agent gets ``(1 − α) · shared + α · own``, own being
the same integral over its own jobs. An invalid action (``invalid_action="penalize"``) is a wait plus
``−invalid_penalty`` for that agent.

## Episode End
All agents terminate when every job has finished (``infos[agent]["metrics"]`` then holds the global metrics and
``infos[agent]["agent_metrics"]`` those of the agent's own jobs); all truncate after ``max_steps`` steps.

## Arguments
``num_agents`` (None: one per pool of the cluster, else one per VC of the workload, else 4), ``cluster``,
``workload`` (spec string, Workload or callable; None: Philly-fitted synthetic at ``load``), ``num_jobs``, ``load``,
``routing`` (``"auto"`` | ``"vc"`` | ``"tenant"`` | ``"round_robin"``), ``window`` (own jobs shown), ``obs_mode``,
``agent_share``, ``interference`` (True: co-located jobs of different agents slow each other), ``speed_model``,
``max_steps``, ``time_scale``, ``invalid_action``, ``invalid_penalty``, ``workload_seed``, ``information``.

## Version History
- v0: initial version.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from gpusched_envs.envs.base import check_choice, make_workload, resolve_cluster
from gpusched_envs.envs.encoding import INFORMATION, ClusterEncoder, Layout
from gpusched_envs.envs.features import RunningTotals, gpu_relative_speed
from gpusched_envs.policies.placement import get_placement
from gpusched_envs.sim import SimConfig, Simulator
from gpusched_envs.sim import throughput as tp
from gpusched_envs.sim.engine import FULL_GPU
from gpusched_envs.sim.sensitivity import job_sensitivities
from gpusched_envs.sim.workload import Workload

BASE_CANDIDATES = ("closest", "consolidate", "first-fit", "pack", "spread")
CANDIDATE_FEATURES = ("valid", "servers", "racks", "log_slowdown", "colocated_jobs")
ROUTINGS = ("auto", "vc", "tenant", "round_robin")
OBS_MODES = ("graph", "flat")
CONTEXT = 3


def spread_placement(sim, job: int) -> np.ndarray | None:
    """The most spread placement: free GPUs dealt round-robin over racks, then over servers within a rack."""
    free = sim.free_mask(job)
    n = 1 if sim.job_milli[job] < FULL_GPU else int(sim.job_gpus_n[job])
    idx = np.flatnonzero(free)
    if len(idx) < n:
        return None
    c = sim.cluster
    server = c.gpu_server[idx]
    first = np.r_[True, server[1:] != server[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(idx)), 0))
    slot = np.arange(len(idx)) - start  # rank of each free GPU among the free GPUs of its server
    rack = c.gpu_rack[idx]
    server_rank = np.zeros(len(idx), dtype=np.int64)
    for r in np.unique(rack):
        in_rack = rack == r
        _, server_rank[in_rack] = np.unique(server[in_rack], return_inverse=True)
    order = np.lexsort((rack, server_rank, slot))
    return np.sort(idx[order[:n]])


def rack_placement(sim, job: int, rack: int) -> np.ndarray | None:
    """Closest placement restricted to one rack: best-fit server, else the rack's fullest-free servers."""
    c = sim.cluster
    if rack >= c.num_racks:
        return None
    free = sim.free_mask(job) & (c.gpu_rack == rack)
    if sim.job_milli[job] < FULL_GPU:
        idx = np.flatnonzero(free)
        if not len(idx):
            return None
        return idx[np.lexsort((idx, sim.gpu_free_milli[idx]))][:1]
    n = int(sim.job_gpus_n[job])
    if np.count_nonzero(free) < n:
        return None
    counts = np.bincount(c.gpu_server[free], minlength=c.num_servers)
    fits = np.flatnonzero(counts >= n)
    if len(fits):
        servers = [int(fits[np.argmin(counts[fits])])]
    else:
        in_rack = np.flatnonzero(counts > 0)
        servers = in_rack[np.argsort(-counts[in_rack], kind="stable")].tolist()
    out, need = [], n
    for s in servers:
        lo = c.server_first_gpu[s]
        got = lo + np.flatnonzero(free[lo : lo + c.server_num_gpus[s]])[:need]
        out.append(got)
        need -= len(got)
        if not need:
            break
    return np.concatenate(out)


class MultiSchedulerEnv(ParallelEnv):
    """K schedulers sharing one cluster (see the module docstring for spaces, rewards and arguments)."""

    metadata = {"name": "multi_scheduler_v0", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(
        self,
        num_agents: int | None = None,
        cluster="tiny",
        workload=None,
        num_jobs: int = 100,
        load: float = 0.9,
        routing: str = "auto",
        window: int = 8,
        obs_mode: str = "graph",
        agent_share: float = 0.0,
        interference: bool = True,
        speed_model: str = "throughput",
        max_steps: int | None = None,
        time_scale: float = 3600.0,
        invalid_action: str = "penalize",
        invalid_penalty: float = 1.0,
        workload_seed: int | None = None,
        render_mode: str | None = None,
        information: str = "non-clairvoyant",
    ):
        check_choice("routing", routing, ROUTINGS)
        check_choice("information", information, INFORMATION)
        self.information = information
        check_choice("obs_mode", obs_mode, OBS_MODES)
        check_choice("invalid_action", invalid_action, ("penalize", "raise"))
        check_choice("render_mode", render_mode, (None, "ansi"))
        if not 0.0 <= agent_share <= 1.0:
            raise ValueError(f"agent_share must be in [0, 1], got {agent_share}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.cluster = resolve_cluster(cluster)
        self.workload_arg, self.num_jobs, self.load = workload, int(num_jobs), float(load)
        self.window, self.obs_mode, self.agent_share = int(window), obs_mode, float(agent_share)
        self.interference, self.speed_model = bool(interference), speed_model
        self.max_steps, self.time_scale = max_steps, float(time_scale)
        self.invalid_action, self.invalid_penalty = invalid_action, float(invalid_penalty)
        self.workload_seed, self.render_mode = workload_seed, render_mode

        # agents are fixed at construction: per pool, per VC of the (seed-0 or fixed) workload, or a given count
        self.vc_agents: tuple[str, ...] = ()
        if num_agents is None:
            if self.cluster.pool_names:
                self.vc_agents = self.cluster.pool_names
            else:
                probe = make_workload(workload, self.cluster, workload_seed or 0, self.num_jobs, self.load)
                self.vc_agents = tuple(probe.vc_names)
            num_agents = len(self.vc_agents) or 4
        if num_agents < 1:
            raise ValueError(f"num_agents must be >= 1, got {num_agents}")
        if routing == "auto":
            routing = "vc" if self.vc_agents else "round_robin"
        if routing == "vc" and not self.vc_agents:
            raise ValueError("routing='vc' needs num_agents=None and a pooled cluster or a workload with VCs")
        self.routing = routing
        self.possible_agents = [f"scheduler_{i}" for i in range(num_agents)]
        self.agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        self.agents: list[str] = []

        self.candidate_names = BASE_CANDIDATES + tuple(f"rack-{r}" for r in range(self.cluster.num_racks))
        self.num_candidates = len(self.candidate_names)
        self.wait_action = self.num_candidates
        self._placers = [get_placement(n) if n != "spread" else spread_placement for n in BASE_CANDIDATES]
        layout = Layout.for_clusters([self.cluster], self.window, CONTEXT, self.num_candidates + 1)
        self.encoder = ClusterEncoder(layout, obs_mode, self.time_scale, information)
        self.encoder.set_cluster(self.cluster, gpu_relative_speed(self.cluster))
        self.state_encoder = ClusterEncoder(
            Layout.for_clusters([self.cluster], num_agents, CONTEXT, 1), "flat", self.time_scale, information
        )
        self.state_encoder.set_cluster(self.cluster, gpu_relative_speed(self.cluster))
        obs_space = self.encoder.observation_space()
        obs_space.spaces["candidate_features"] = spaces.Box(
            -np.inf, np.inf, shape=(self.num_candidates, len(CANDIDATE_FEATURES)), dtype=np.float32
        )
        self._observation_space = obs_space
        self._action_space = spaces.Discrete(self.num_candidates + 1)
        self.state_space = spaces.Box(
            -np.inf, np.inf, shape=self.state_encoder.buffers["obs"].shape, dtype=np.float32
        )
        self._candidate_buf = np.zeros(
            (num_agents, self.num_candidates, len(CANDIDATE_FEATURES)), dtype=np.float32
        )
        self.sim: Simulator | None = None
        self._rng = np.random.default_rng()

    # ------------------------------------------------------------------ PettingZoo API
    @functools.cache  # noqa: B019 - one space object per agent, as PettingZoo expects
    def observation_space(self, agent: str) -> spaces.Dict:
        return self._observation_space

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_space

    def state(self) -> np.ndarray:
        sim, enc = self.sim, self.state_encoder
        heads = np.array([h for h in self._heads if h >= 0], dtype=np.int64)
        enc.encode_cluster(sim, self.sim.free_gpus(), None, None, 0)
        enc.encode_jobs(sim, heads, np.zeros(len(heads), dtype=bool), self.log_sensitivity)
        clairvoyant = self.information == "clairvoyant"
        enc.context[0] = sim.finished / max(sim.to_finish, 1) if clairvoyant else np.log1p(sim.finished)
        enc.context[1] = np.log1p(len(sim.queue))
        enc.context[2] = np.log1p(len(sim.running))
        return enc.buffers["obs"].copy()

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None or self.sim is None:
            self._rng = np.random.default_rng(seed)
        rng = self._rng
        wl_seed = int(rng.integers(2**31)) if self.workload_seed is None else int(self.workload_seed)
        sim_seed = int(rng.integers(2**31))
        workload = make_workload(self.workload_arg, self.cluster, wl_seed, self.num_jobs, self.load)
        config = SimConfig(
            seed=sim_seed,
            interference=self.interference,
            speed_model=self.speed_model,
            oversize="drop" if self.cluster.pool_names else "error",  # a job larger than its VC's quota
        )
        self.sim = Simulator(self.cluster, workload, config)
        self.owner = self._route(workload)  # (J,) agent index of every job
        sim = self.sim
        self.sensitivity = job_sensitivities(self.cluster, sim.job_model, sim.job_gpus_n)
        self.log_sensitivity = np.log(self.sensitivity)
        k = len(self.possible_agents)
        self.totals = RunningTotals(sim)
        self.own_totals = [RunningTotals(sim, (self.owner == i).astype(np.float64)) for i in range(k)]
        self.own_count = np.bincount(self.owner[~sim.initially_dropped], minlength=k)
        self.agents = list(self.possible_agents)
        self.steps = 0
        self._heads = np.full(k, -1, dtype=np.int64)
        self._candidates: list[list[np.ndarray | None]] = [[] for _ in range(k)]
        self._advance(force=True)
        infos = {a: {"time": sim.now} for a in self.agents}
        return self._observations(), infos

    def step(self, actions: dict[str, int]):
        sim = self.sim
        k = len(self.possible_agents)
        mark = self._mark()
        rewards = dict.fromkeys(self.agents, 0.0)
        infos: dict[str, dict[str, Any]] = {a: {"conflict": False} for a in self.agents}
        placed = False
        for i in self._rng.permutation(k):
            agent = self.possible_agents[i]
            action = actions.get(agent, self.wait_action)
            a = int(np.asarray(action).reshape(()))
            if not 0 <= a <= self.num_candidates or not self._masks[i, a]:
                if self.invalid_action == "raise":
                    raise ValueError(
                        f"{agent}: invalid action {a} (valid: {np.flatnonzero(self._masks[i]).tolist()})"
                    )
                rewards[agent] -= self.invalid_penalty
                infos[agent]["invalid_action"] = True
                continue
            if a == self.wait_action:
                continue
            job, gpus = int(self._heads[i]), self._candidates[i][a]
            if sim.free_mask(job)[gpus].all():
                sim.start(job, gpus)
                placed = True
            else:
                infos[agent]["conflict"] = True  # lost the arbitration: retries at the next step
        self.steps += 1
        self._advance(force=not placed)
        shared = self._reward_since(mark, self.totals)
        for i, agent in enumerate(self.possible_agents):
            own = self._reward_since(mark, self.own_totals[i]) if self.agent_share else 0.0
            rewards[agent] += (1 - self.agent_share) * shared + self.agent_share * own
        terminated = sim.drained
        truncated = not terminated and self.max_steps is not None and self.steps >= self.max_steps
        observations = self._observations()
        for i, agent in enumerate(self.possible_agents):
            infos[agent].update(
                time=sim.now, queued=int(np.sum(self.owner[list(sim.queue)] == i)) if sim.queue else 0
            )
        if terminated or truncated:
            metrics = sim.metrics()
            for i, agent in enumerate(self.possible_agents):
                infos[agent]["metrics"] = metrics
                infos[agent]["agent_metrics"] = self._agent_metrics(i)
        terminations = dict.fromkeys(self.agents, terminated)
        truncations = dict.fromkeys(self.agents, truncated)
        if terminated or truncated:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def render(self):
        if self.render_mode != "ansi" or self.sim is None:
            return None
        sim = self.sim
        lines = [
            f"t={sim.now:,.0f}s  running={len(sim.running)}  queued={len(sim.queue)}  done={sim.finished}"
        ]
        for i, agent in enumerate(self.possible_agents):
            head = int(self._heads[i])
            what = "idle" if head < 0 else f"head job {head} ({sim.job_gpus_n[head]} GPUs)"
            lines.append(f"  {agent}: {what}, valid {np.flatnonzero(self._masks[i]).tolist()}")
        return "\n".join(lines)

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

    def _mark(self) -> tuple[float, float, list[float]]:
        return (self.sim.now, self.totals.weighted_time(), [t.weighted_time() for t in self.own_totals])

    def _reward_since(self, mark, totals: RunningTotals) -> float:
        if totals is self.totals:
            return -(totals.weighted_time() - mark[1]) / self.time_scale
        i = self.own_totals.index(totals)
        return -(totals.weighted_time() - mark[2][i]) / self.time_scale

    def _compute_candidates(self) -> None:
        """Heads, candidate placements and masks of every agent at the current instant."""
        sim = self.sim
        k = len(self.possible_agents)
        self._heads[:] = -1
        if sim.queue:
            queued = np.fromiter(sim.queue, dtype=np.int64, count=len(sim.queue))
            owners = self.owner[queued]
            for i in range(k):
                mine = queued[owners == i]
                if len(mine):
                    self._heads[i] = mine.min()  # oldest waiting job of the agent
        masks = np.zeros((k, self.num_candidates + 1), dtype=bool)
        feats = self._candidate_buf
        feats[...] = 0.0
        stuck = not sim.running and sim.next_arrival >= sim.num_jobs
        for i in range(k):
            job = int(self._heads[i])
            cands: list[np.ndarray | None] = [None] * self.num_candidates
            if job >= 0:
                seen: set[bytes] = set()
                for c in range(self.num_candidates):
                    if c < len(BASE_CANDIDATES):
                        gpus = self._placers[c](sim, job)
                    else:
                        gpus = rack_placement(sim, job, c - len(BASE_CANDIDATES))
                    if gpus is None:
                        continue
                    key = np.sort(gpus).tobytes()
                    if key in seen:
                        continue
                    seen.add(key)
                    cands[c] = gpus
                    masks[i, c] = True
                    self._candidate_features(job, gpus, feats[i, c])
            self._candidates[i] = cands
            can_place = masks[i, : self.num_candidates].any()
            masks[i, self.wait_action] = not (stuck and can_place)
        self._masks = masks

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
        out[4] = np.log1p(colocated)

    def _advance(self, force: bool) -> None:
        """Stay at this instant if some agent can still place its head (and ``force`` is off); otherwise run the
        simulator to the next decision point at which one can."""
        sim = self.sim
        if not force:
            self._compute_candidates()
            if self._masks[:, : self.num_candidates].any():
                return
        while True:
            more = sim.next_decision()
            self.totals.sync()
            for t in self.own_totals:
                t.sync()
            if not more:
                self._compute_candidates()
                return
            self._compute_candidates()
            if self._masks[:, : self.num_candidates].any():
                return

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        sim, enc = self.sim, self.encoder
        enc.encode_cluster(sim, self.sim.free_gpus(), None, None, 0)
        k = len(self.possible_agents)
        queued = (
            np.fromiter(sim.queue, dtype=np.int64, count=len(sim.queue))
            if sim.queue
            else np.zeros(0, np.int64)
        )
        owners = self.owner[queued]
        out = {}
        for i, agent in enumerate(self.possible_agents):
            mine = np.sort(queued[owners == i])
            window = mine[: self.window]
            fits = np.zeros(len(window), dtype=bool)
            if len(window) and window[0] == self._heads[i]:
                fits[0] = self._masks[i, : self.num_candidates].any()
            enc.cluster[3] = np.log1p(max(0, len(mine) - len(window)))
            enc.encode_jobs(sim, window, fits, self.log_sensitivity)
            enc.context[0] = self._own_finished(i, self.information == "clairvoyant")
            enc.context[1] = np.log1p(len(mine))
            enc.context[2] = i / k
            enc.action_mask[:] = self._masks[i]
            obs = enc.observation()
            obs["candidate_features"] = self._candidate_buf[i].copy()
            out[agent] = obs
        return out

    def _own_finished(self, i: int, share: bool = True) -> float:
        total = self.own_count[i]
        done = np.count_nonzero((self.owner == i) & (self.sim.status == 4))
        if not share:  # non-clairvoyant: the count (the share reveals how many jobs are still to arrive)
            return float(np.log1p(done))
        if not total:
            return 1.0
        return done / total

    def action_masks(self, agent: str) -> np.ndarray:
        """(C + 1,) bool valid actions of one agent now."""
        return self._masks[self.agent_index[agent]].copy()

    def _agent_metrics(self, i: int) -> dict:
        sim = self.sim
        mine = self.owner == i
        jct = (sim.finish_time - sim.workload.submit_time)[mine & (sim.status == 4)]
        return {
            "jobs": int(len(jct)),
            "avg_jct": float(jct.mean()) if len(jct) else float("nan"),
            "p95_jct": float(np.percentile(jct, 95)) if len(jct) else float("nan"),
        }


class HeuristicMultiAgent:
    """Every agent places its head job with one named candidate (default ``closest``) whenever it is valid, else
    waits: per-agent FIFO with that placement. On a cluster whose pools are the agents' VCs this reproduces
    ``Simulator.run(make_policy("fifo", placement))`` exactly."""

    def __init__(self, placement: str = "closest"):
        if placement not in BASE_CANDIDATES:
            raise ValueError(f"placement must be one of {', '.join(BASE_CANDIDATES)}, got {placement!r}")
        self.candidate = BASE_CANDIDATES.index(placement)

    def __call__(self, env: MultiSchedulerEnv, observations: dict) -> dict[str, int]:
        actions = {}
        for agent, obs in observations.items():
            mask = obs["action_mask"]
            actions[agent] = self.candidate if mask[self.candidate] else env.wait_action
        return actions
