"""``gpusched/DAGSchedule-v1``: WORL-RTGS's setting, one DAG of training tasks on heterogeneous GPUs, scheduled by
building a plan task by task (``construct``) or by improving a given plan one reassignment at a time (``improve``).
Plans are scored by the list-scheduling evaluator of :mod:`gpusched_envs.sim.dag_eval` (the DAG model)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gpusched_envs.envs.base import (
    DEFAULT_MAX_INVALID_REPEATS,
    InvalidActionError,
    check_choice,
    check_int,
    metrics_info,
    resolve_cluster,
)
from gpusched_envs.envs.features import gpu_relative_speed
from gpusched_envs.envs.render import render_gantt
from gpusched_envs.sim import kernels as _kernels
from gpusched_envs.sim.dag_eval import PlanEvaluator, inverse_bandwidth, runtime_matrix
from gpusched_envs.sim.topology import Cluster

TASK_FEATURES = ("work", "rank", "scheduled", "ready", "current", "start", "finish", "gpu_speed")
GPU_FEATURES = ("speed", "free_at", "tasks", "makespan_if_here")
EDGE_FEATURES = ("dependency", "assignment", "bytes")
MODES = ("construct", "improve")
# the keys of info["metrics"] (float64, NaN until the episode ends)
DAG_METRIC_KEYS = ("makespan", "tasks", "gpus", "initial_makespan")
# empty arguments of the compiled observation writer (no ready tasks / candidates / graph edges)
_NO_TASKS = np.zeros(0, dtype=np.int64)
_NO_CANDIDATES = np.zeros(0)
_NO_EDGE_INDEX = np.zeros((2, 0), dtype=np.int64)
_NO_EDGE_MASK = np.zeros(0, dtype=np.int8)
# the info's flags and its metrics before the end (numpy scalars are immutable: one object serves every info)
_TRUE, _FALSE, _MINUS_ONE = np.bool_(True), np.bool_(False), np.int64(-1)
_ZERO_METRICS = metrics_info(None, DAG_METRIC_KEYS)


SYNTHETIC_CCR_KINDS = ("random", "alibaba", "tpch")  # DAG spec kinds whose edge bytes come from a CCR knob


def ccr_at_gpus(dag, bandwidth: np.ndarray, reference_bandwidth: float | None = None):
    """``dag`` with its edge bytes rescaled so that its CCR, set by a generator at the reference bandwidth
    (``dag_reference_bandwidth_bytes_per_s``, 10 GB/s), holds on this GPU set instead: transfer times at the mean
    inverse bandwidth over pairs of distinct GPUs (as HEFT's mean communication cost) equal those at the reference.
    Slow links (hetero64's cross-rack 0.12 GB/s) otherwise multiply a generator's CCR by up to ~80."""
    from gpusched_envs.workloads.dag.random_layered import DEFAULT_BANDWIDTH

    inv = inverse_bandwidth(bandwidth)
    g = inv.shape[0]
    if g < 2 or dag.num_edges == 0:
        return dag
    mean_inv = float(inv[~np.eye(g, dtype=bool)].mean())
    ref = float(reference_bandwidth or DEFAULT_BANDWIDTH)
    return dag.replace(
        edge_bytes=np.asarray(dag.edge_bytes) / (ref * mean_inv),
        source=f"{dag.source}; bytes rescaled x{1 / (ref * mean_inv):.4g} for the CCR on the GPU set",
    )


def pick_gpus(cluster: Cluster, count: int | None) -> np.ndarray:
    """``count`` GPU ids spread evenly over the cluster's GPU numbering (so over servers, racks and types)."""
    if count is None or count >= cluster.num_gpus:
        return np.arange(cluster.num_gpus)
    return np.unique(np.linspace(0, cluster.num_gpus - 1, count).round().astype(np.int64))


class DAGScheduleEnv(gym.Env):
    """Schedule one DAG on a set of heterogeneous GPUs (WORL-RTGS, Du, Wu et al. 2025).

    A task runs ``work / speed`` seconds on a GPU (times the DAG's heterogeneity factor); a GPU runs one task at a
    time; a task starts when its GPU is free and every input has arrived (``bytes / bandwidth`` between the two
    GPUs, 0 on the same GPU). GPU speeds are relative to the catalogue's reference GPU, bandwidths come from the
    cluster (intra-server link, NIC, rack uplink).

    ``mode="construct"``: tasks come in list-scheduling order (among the tasks whose parents are scheduled, the
    highest HEFT upward rank first, ties to the lowest index); each action puts the current task on a GPU, where
    it starts as early as the GPU and its inputs allow (appended after the GPU's previous task).
    ``mode="improve"``: the episode starts from a plan (``initial_plan``: HEFT's, or a random one); the env visits
    the tasks in the plan's priority order, and each action moves the current task to a GPU (its own GPU keeps the
    plan); the priorities stay fixed.

    ## Action Space
    ``Discrete(GPUs)``: the GPU for the current task; GPUs its GPU-type affinity forbids are masked.

    ## Observation Space
    ``obs_mode="graph"`` (default): ``node_features (N + GPUs, 2 + 8 + 4)`` (kind one-hot task/GPU, then
    :data:`TASK_FEATURES` on task nodes and :data:`GPU_FEATURES` on GPU nodes), ``node_mask``, ``edge_index (2, E)``
    with the DAG's edges and one task→GPU edge per placed task, ``edge_features (E, 3)``, ``edge_mask``,
    ``context (4,)``, ``action_mask (GPUs,)``. ``"flat"``: ``obs`` (task and GPU features and context in one
    vector, without edges) and ``action_mask``. Times are ``log1p(seconds / time_scale)``; ``makespan_if_here`` is,
    in ``improve`` mode, (makespan if the current task moves there − current makespan) ÷ ``time_scale``, in
    ``construct`` mode (the current task's finish time there − current makespan) ÷ ``time_scale``: the makespan
    increase when positive, and ordered by finish time throughout (lowest = earliest finish). Padded to ``max_tasks`` /
    ``max_edges``. Image observations are not offered.

    ## Rewards
    ``construct``: ``−(makespan increase) / time_scale`` per placement (the makespan of the partial schedule), so
    the return is ``−makespan / time_scale``. ``improve``: ``(makespan before − after) / time_scale``, so the return
    is the total improvement over the initial plan.

    ## Episode End
    ``construct``: terminates when every task is placed. ``improve``: terminates after ``improve_steps``
    reassignments (default: one pass over the tasks); the spent share of the budget is in the context, so the
    end is part of the observed state (a termination, not a time-limit truncation). The plan so far:
    :meth:`plan` = (assignment, priority) as :func:`gpusched_envs.sim.dag_eval.evaluate_plan` takes them.

    ## Info
    The same keys and dtypes at ``reset`` and at every ``step``: ``makespan`` (float64, of the plan so far),
    ``invalid_action`` (bool_), ``forced_action`` (int64: the GPU the env took after ``max_invalid_repeats``
    invalid actions in a row, else -1), ``episode_done`` (bool_), ``metrics`` (:data:`DAG_METRIC_KEYS`, float64:
    ``makespan``, ``tasks``, ``gpus``, ``initial_makespan`` (improve mode; NaN in construct) once
    ``episode_done``, 0.0 before; :meth:`episode_metrics` at any time).

    ## Invalid Actions
    ``"penalize"`` (default): a GPU the task's affinity forbids changes nothing and gives ``−invalid_penalty``
    until ``max_invalid_repeats`` (8) come in a row: that one is replaced by :meth:`safe_action` (improve: the
    task's own GPU; construct: the first allowed GPU). ``"raise"``: an :class:`InvalidActionError`.

    ## Arguments
    - ``cluster`` (``"hetero64"``): preset, path or ``Cluster``; ``gpus`` (8): how many of its GPUs, spread evenly
      (None: all).
    - ``dag`` (``"dag:random:n=20"``): a DAG spec of :func:`gpusched_envs.workloads.dag.load_dag` (re-drawn every
      reset from the reset seed) or a ``DAG``, or a list of those (each reset draws one uniformly: training across
      DAG families); ``max_tasks`` / ``max_edges``: padding (default: from the first draw of each entry, with room
      for denser DAGs of the same size).
    - ``ccr_at``: ``"reference"`` (default: edge bytes as generated, CCR at the 10 GB/s reference bandwidth) or
      ``"gpus"``: DAGs of the synthetic spec kinds (``random``, ``alibaba``, ``tpch``) get their bytes rescaled so
      the CCR holds on this GPU set (:func:`ccr_at_gpus`); measured DAGs (PipeDream, GPT-2) keep their bytes.
    - ``mode``: ``"construct"`` | ``"improve"``; ``initial_plan``: ``"heft"`` | ``"random"``; ``improve_steps``.
    - ``obs_mode``: ``"graph"`` | ``"flat"``; ``time_scale``: seconds per reward unit (None: the DAG's total
      work ÷ GPUs, the perfectly balanced makespan without transfers); ``invalid_action``, ``invalid_penalty``,
      ``max_invalid_repeats``;
      ``render_mode``: ``"ansi"`` | ``"rgb_array"`` (Gantt chart).

    ## Version History
    - v1: invalid actions resolve to :meth:`safe_action` after ``max_invalid_repeats`` in a row (episodes always
      end); fixed info keys and dtypes (section Info); synthetic workload specs sized to the cluster. ``-v0``
      still makes the same env for now.
    - v0: initial version.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    obs_modes_offered = ("graph", "flat")

    def __init__(
        self,
        cluster: str | Cluster = "hetero64",
        dag: Any = "dag:random:n=20",
        *,
        gpus: int | None = 8,
        mode: str = "construct",
        ccr_at: str = "reference",
        initial_plan: str = "heft",
        improve_steps: int | None = None,
        max_tasks: int | None = None,
        max_edges: int | None = None,
        obs_mode: str = "graph",
        time_scale: float | None = None,
        invalid_action: str = "penalize",
        invalid_penalty: float = 1.0,
        max_invalid_repeats: int = DEFAULT_MAX_INVALID_REPEATS,
        render_mode: str | None = None,
    ):
        check_choice("mode", mode, MODES)
        check_choice("ccr_at", ccr_at, ("reference", "gpus"))
        self.ccr_at = ccr_at
        check_choice("initial_plan", initial_plan, ("heft", "random"))
        check_choice("invalid_action", invalid_action, ("penalize", "raise"))
        check_choice("render_mode", render_mode, (None, *self.metadata["render_modes"]))
        if obs_mode not in self.obs_modes_offered:
            raise ValueError(
                f"DAGScheduleEnv offers obs_mode 'graph' or 'flat', got {obs_mode!r} ('image' observations are "
                "offered by JobSelect-v1 and WorkerPlacement-v1)"
            )
        self.cluster = resolve_cluster(cluster)
        self.gpu_ids = pick_gpus(self.cluster, gpus)
        c = self.cluster
        self.speed = gpu_relative_speed(c)[self.gpu_ids]  # (G,)
        self.bandwidth = c.bandwidth_matrix()[np.ix_(self.gpu_ids, self.gpu_ids)]  # (G, G)
        self.inv_bw = inverse_bandwidth(self.bandwidth)
        self.gpu_types = [c.catalog.gpu_types[t] for t in c.gpu_type[self.gpu_ids]]
        self.dag_arg = dag
        self.mode, self.initial_plan, self.improve_steps = mode, initial_plan, improve_steps
        self.obs_mode, self.time_scale_arg = obs_mode, time_scale
        self.invalid_action, self.invalid_penalty = invalid_action, float(invalid_penalty)
        self.max_invalid_repeats = check_int("max_invalid_repeats", max_invalid_repeats, 1)
        self.render_mode = render_mode
        self.last_invalid_reason = ""  # why the last invalid action was refused
        firsts = [self._load_one(d, 0) for d in self._entries()]
        n = max(d.num_tasks for d in firsts)
        self.max_tasks = int(max_tasks or n)
        self.max_edges = int(
            max_edges
            or max(
                min(d.num_tasks * (d.num_tasks - 1) // 2, max(8 * d.num_tasks, 2 * d.num_edges))
                for d in firsts
            )
        )
        g = len(self.gpu_ids)
        self.num_gpus = g
        self.num_nodes = self.max_tasks + g
        self.num_edge_slots = self.max_edges + self.max_tasks
        f = 2 + len(TASK_FEATURES) + len(GPU_FEATURES)
        self.action_space = spaces.Discrete(g)
        inf = np.float32(np.inf)
        box = {}
        if obs_mode == "graph":
            self._nodes = np.zeros((self.num_nodes, f), dtype=np.float32)  # (N + G, F)
            self._node_mask = np.zeros(self.num_nodes, dtype=np.int8)
            self._edge_index = np.zeros((2, self.num_edge_slots), dtype=np.int64)  # (2, E + N)
            self._edge_features = np.zeros((self.num_edge_slots, len(EDGE_FEATURES)), dtype=np.float32)
            self._edge_mask = np.zeros(self.num_edge_slots, dtype=np.int8)
            self.task_view = self._nodes[: self.max_tasks, 2 : 2 + len(TASK_FEATURES)]
            self.gpu_view = self._nodes[self.max_tasks :, 2 + len(TASK_FEATURES) :]
            # the blocks as the compiled writer takes them: rows and columns of the node features
            nt, mt = len(TASK_FEATURES), self.max_tasks
            self._view_spans = np.array([0, mt, 2, 2 + nt, mt, self.num_nodes, 2 + nt, f], dtype=np.int64)
            box = {
                "node_features": spaces.Box(-inf, inf, self._nodes.shape, np.float32),
                "node_mask": spaces.Box(0, 1, (self.num_nodes,), np.int8),
                "edge_index": spaces.Box(0, self.num_nodes - 1, self._edge_index.shape, np.int64),
                "edge_features": spaces.Box(-inf, inf, self._edge_features.shape, np.float32),
                "edge_mask": spaces.Box(0, 1, (self.num_edge_slots,), np.int8),
            }
        else:
            size = self.max_tasks * len(TASK_FEATURES) + g * len(GPU_FEATURES)
            self._flat = np.zeros(size, dtype=np.float32)
            cut = self.max_tasks * len(TASK_FEATURES)
            self.task_view = self._flat[:cut].reshape(self.max_tasks, len(TASK_FEATURES))
            self.gpu_view = self._flat[cut:].reshape(g, len(GPU_FEATURES))
            nt, ng = len(TASK_FEATURES), len(GPU_FEATURES)
            self._view_spans = np.array([0, self.max_tasks, 0, nt, 0, g, 0, ng], dtype=np.int64)
            box = {"obs": spaces.Box(-inf, inf, (size,), np.float32)}
        self._context = np.zeros(4, dtype=np.float32)
        self._action_mask = np.zeros(g, dtype=np.int8)
        box["context"] = spaces.Box(-inf, inf, (4,), np.float32)
        box["action_mask"] = spaces.Box(0, 1, (g,), np.int8)
        self.observation_space = spaces.Dict(box)
        self.dag = None

    # ------------------------------------------------------------------ pickling: views are rebuilt
    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("task_view", "gpu_view")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        nt = len(TASK_FEATURES)
        if self.obs_mode == "graph":
            self.task_view = self._nodes[: self.max_tasks, 2 : 2 + nt]
            self.gpu_view = self._nodes[self.max_tasks :, 2 + nt :]
        else:
            cut = self.max_tasks * nt
            self.task_view = self._flat[:cut].reshape(self.max_tasks, nt)
            self.gpu_view = self._flat[cut:].reshape(self.num_gpus, len(GPU_FEATURES))

    # ------------------------------------------------------------------ episode
    def _entries(self) -> list:
        if isinstance(self.dag_arg, list | tuple):
            if not self.dag_arg:
                raise ValueError("dag: the list of DAG specs is empty")
            return list(self.dag_arg)
        return [self.dag_arg]

    def _load_one(self, entry, seed: int):
        if isinstance(entry, str):
            from gpusched_envs.workloads.dag import load_dag

            dag = load_dag(entry, seed=seed)
            kind = entry.split(":")[1].strip().lower() if entry.count(":") >= 1 else ""
            if self.ccr_at == "gpus" and kind in SYNTHETIC_CCR_KINDS:
                dag = ccr_at_gpus(dag, self.bandwidth)
            return dag
        return entry

    def _load_dag(self, seed: int):
        entries = self._entries()
        pick = int(np.random.default_rng(seed).integers(len(entries))) if len(entries) > 1 else 0
        return self._load_one(entries[pick], seed)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        dag = self._load_dag(int(self.np_random.integers(2**31)))
        n, e = dag.num_tasks, dag.num_edges
        if n > self.max_tasks or e > self.max_edges:
            raise ValueError(
                f"DAG {dag.name!r} has {n} tasks / {e} edges, more than max_tasks={self.max_tasks} / "
                f"max_edges={self.max_edges}; pass larger ones"
            )
        self.dag = dag
        self.runtime = runtime_matrix(dag, self.speed, self.gpu_types)  # (N, G)
        self.allowed = np.isfinite(self.runtime)
        self.time_scale = float(self.time_scale_arg or max(dag.total_work / self.num_gpus, 1e-9))
        from gpusched_envs.policies.dag import _upward_rank_of, heft_schedule, random_plan

        self.rank = _upward_rank_of(dag, self.runtime, self.inv_bw)
        # each task's in-edges, in order, for the compiled writers: task i's are in_edges[in_ptr[i] : in_ptr[i + 1]]
        # (writable copies of the DAG's lists: the writers are compiled for writable arrays)
        self._in_ptr = np.array(dag._csr[0])
        self._in_edges = np.array(dag._csr[1])
        self._logs = np.zeros(2 * n + self.num_gpus + 1)  # the arguments of the observation's log1p
        self.edges = np.asarray(dag.edges, dtype=np.int64)
        self.edge_bytes = np.asarray(dag.edge_bytes, dtype=np.float64)
        self.assignment = np.full(n, -1, dtype=np.int64)
        self.start = np.zeros(n)
        self.finish = np.zeros(n)
        self.gpu_free = np.zeros(self.num_gpus)
        self.order: list[int] = []
        self.steps = 0
        self.done = False
        self._invalid_run = 0  # invalid actions since the last one that acted
        self._write_static()
        if self.mode == "construct":
            self.makespan = 0.0
            # plain lists for the per-step bookkeeping: each task's children (in out-edge order), parents left
            out_ptr = dag._csr[2].tolist()
            kids = self.edges[dag._csr[3], 1].tolist()
            self._children = [kids[out_ptr[i] : out_ptr[i + 1]] for i in range(n)]
            self._remaining = dag.in_degree.tolist()
            self._rank_list = self.rank.tolist()
            self.ready = {i for i in range(n) if self._remaining[i] == 0}
            self.current = self._next_ready()
        else:
            if self.initial_plan == "heft":
                self.assignment, self.priority = heft_schedule(
                    dag, self.speed, self.bandwidth, gpu_types=self.gpu_types, insertion=False
                ).plan
            else:
                self.assignment, self.priority = random_plan(
                    dag, self.num_gpus, seed=self.np_random, gpu_types=self.gpu_types
                )
            self.assignment = self.assignment.copy()
            self.evaluator = PlanEvaluator(dag, self.speed, self.bandwidth, gpu_types=self.gpu_types)
            self.visit = np.argsort(-self.priority, kind="stable")  # tasks in the plan's priority order
            self.limit = self.improve_steps or n
            self._score_plan()
            self.initial_makespan = self.makespan
            self.current = int(self.visit[0])
            self._score_candidates()
        return self._observe(), self._info()

    @property
    def parent_edges(self) -> list[np.ndarray]:
        """Each task's in-edges (rows of ``edges``), in order."""
        return [self._in_edges[self._in_ptr[i] : self._in_ptr[i + 1]] for i in range(len(self._in_ptr) - 1)]

    @property
    def remaining_parents(self) -> np.ndarray:
        """(N,) int64 parents not placed yet, per task (``construct`` mode)."""
        return np.array(self._remaining, dtype=np.int64)

    def _next_ready(self) -> int:
        if not self.ready:
            return -1
        rank = self._rank_list
        return max(self.ready, key=lambda k: (rank[k], -k))

    def _place(self, task: int, gpu: int) -> float:
        """List-schedule ``task`` on ``gpu`` after everything placed so far; its finish time."""
        return _kernels.dag_place(
            task,
            gpu,
            self.gpu_free,
            self._in_ptr,
            self._in_edges,
            self.edges,
            self.edge_bytes,
            self.inv_bw,
            self.finish,
            self.assignment,
        )

    def _score_plan(self) -> None:
        sched = self.evaluator.schedule(self.assignment, self.priority)
        self.makespan = sched.makespan
        self.start, self.finish = sched.start, sched.finish
        self.gpu_free = np.zeros(self.num_gpus)
        np.maximum.at(self.gpu_free, self.assignment, self.finish)

    def _score_candidates(self) -> None:
        """Makespan of the plan with the current task moved to each GPU (one vectorised population evaluation)."""
        pop = np.repeat(self.assignment[None, :], self.num_gpus, axis=0)
        pop[:, self.current] = np.arange(self.num_gpus)
        prio = np.repeat(self.priority[None, :], self.num_gpus, axis=0)
        self.candidates = self.evaluator.evaluate(pop, prio)

    # ------------------------------------------------------------------ step
    def step(self, action):
        a = action if type(action) is int else int(np.asarray(action).reshape(()))
        if not 0 <= a < self.num_gpus:
            raise InvalidActionError(f"action {a} outside 0..{self.num_gpus - 1}")
        penalty, forced = 0.0, False
        if self.done or not self._action_mask[a]:
            why = "the episode has ended" if self.done else f"task {self.current} may not run on GPU {a}"
            if self.invalid_action == "raise":
                raise InvalidActionError(f"invalid action {a}: {why}")
            self.last_invalid_reason = f"invalid action {a}: {why}"
            self._invalid_run += 1
            if self.done or self._invalid_run < self.max_invalid_repeats:
                self.steps += 1
                return self._snapshot(), -self.invalid_penalty, False, False, self._info(invalid=True)
            # the max_invalid_repeats-th invalid action in a row: the env takes the safe action itself
            penalty, forced = self.invalid_penalty, True
            a = self.safe_action()
        self._invalid_run = 0
        self.steps += 1
        task = self.current
        if self.mode == "construct":
            start = self._place(task, a)
            finish = start + self.runtime[task, a]
            self.assignment[task], self.start[task], self.finish[task] = a, start, finish
            self.gpu_free[a] = finish
            self.order.append(task)
            before = self.makespan
            self.makespan = max(self.makespan, finish)
            reward = -(self.makespan - before) / self.time_scale
            self.ready.discard(task)
            remaining = self._remaining
            for child in self._children[task]:
                remaining[child] -= 1
                if remaining[child] == 0:
                    self.ready.add(child)
            self.current = self._next_ready()
            terminated, truncated = self.current < 0, False
        else:
            before = self.makespan
            if a != self.assignment[task]:
                self.assignment[task] = a
                self._score_plan()
            reward = (before - self.makespan) / self.time_scale
            terminated, truncated = self.steps >= self.limit, False
            self.current = int(self.visit[self.steps % len(self.visit)])
            if not terminated:
                self._score_candidates()
        self.done = terminated or truncated
        if forced:
            reward -= penalty
        info = self._info(invalid=forced, forced=a if forced else -1)
        return self._observe(), reward, terminated, truncated, info

    def safe_action(self) -> int:
        """The action an invalid one resolves to once ``max_invalid_repeats`` of them came in a row: ``improve``,
        the current task's own GPU (the plan unchanged); ``construct``, the first GPU the task may run on."""
        mask = self._action_mask
        if self.mode == "improve" and self.current >= 0 and mask[self.assignment[self.current]]:
            return int(self.assignment[self.current])
        return int(np.flatnonzero(mask)[0])

    def plan(self) -> tuple[np.ndarray, np.ndarray]:
        """The plan so far as ``(assignment, priority)`` for :func:`~gpusched_envs.sim.dag_eval.evaluate_plan`
        (construct: the placement order is the priority; unplaced tasks keep -1)."""
        if self.mode == "improve":
            return self.assignment.copy(), self.priority.copy()
        n = len(self.assignment)
        priority = np.zeros(n)
        priority[self.order] = n - np.arange(len(self.order))
        return self.assignment.copy(), priority

    def episode_metrics(self) -> dict[str, np.float64]:
        """:data:`DAG_METRIC_KEYS` of the plan so far (float64; ``initial_makespan`` NaN in ``construct`` mode):
        what ``info["metrics"]`` holds once the episode ends."""
        if self.dag is None:
            raise gym.error.ResetNeeded("call reset() before episode_metrics()")
        initial = self.initial_makespan if self.mode == "improve" else np.nan
        return metrics_info(
            {
                "makespan": self.makespan,
                "tasks": self.dag.num_tasks,
                "gpus": self.num_gpus,
                "initial_makespan": initial,
            },
            DAG_METRIC_KEYS,
        )

    def _info(self, invalid: bool = False, forced: int = -1) -> dict[str, Any]:
        """The info of every ``reset`` and ``step``: the same keys and dtypes throughout (section Info)."""
        return {
            "makespan": np.float64(self.makespan),
            "invalid_action": _TRUE if invalid else _FALSE,
            "forced_action": _MINUS_ONE if forced == -1 else np.int64(forced),
            "episode_done": _TRUE if self.done else _FALSE,
            "metrics": self.episode_metrics() if self.done else _ZERO_METRICS.copy(),
        }

    def action_masks(self) -> np.ndarray:
        return self._action_mask.astype(bool)

    # ------------------------------------------------------------------ observation
    def _write_static(self) -> None:
        dag, n = self.dag, self.dag.num_tasks
        graph = self.obs_mode == "graph"
        # everything from 0: the task and GPU blocks, in graph mode also the kind columns and the cells of the
        # other kind's features
        (self._nodes if graph else self._flat)[...] = 0.0
        self.task_view[:n, 0] = np.log1p(dag.work / self.time_scale)
        self.task_view[:n, 1] = self.rank / self.time_scale
        self.gpu_view[:, 0] = self.speed
        if not graph:
            return
        mt, me, e = self.max_tasks, self.max_edges, dag.num_edges
        self._nodes[:n, 0] = 1.0
        self._nodes[mt:, 1] = 1.0
        self._node_mask[:] = 0
        self._node_mask[:n] = 1
        self._node_mask[mt:] = 1
        self._edge_index[:] = 0
        self._edge_features[:] = 0.0
        self._edge_mask[:] = 0
        self._edge_index[:, :e] = self.edges.T
        self._edge_features[:e, 0] = 1.0
        self._edge_features[:e, 2] = np.log1p(self.edge_bytes / 1e6)
        self._edge_mask[:e] = 1
        self._edge_index[0, me : me + n] = np.arange(n)  # the task -> GPU edge slots
        self._edge_features[me : me + n, 1] = 1.0

    def _observe(self) -> dict:
        ts, logs, cur = self.time_scale, self._logs, self.current
        args = (logs, self.start, self.finish, self.gpu_free, float(self.makespan), ts)
        _kernels.dag_log_args(*args)
        np.log1p(logs, out=logs)  # numpy's log1p, as the columns always had
        construct = self.mode == "construct"
        graph = self.obs_mode == "graph"
        args = (
            self._nodes if graph else self.task_view,
            self._nodes if graph else self.gpu_view,
            self._view_spans,
            self._context,
            self._action_mask,
            logs,
            np.fromiter(self.ready, dtype=np.int64, count=len(self.ready)) if construct else _NO_TASKS,
            construct,
            cur,
            self.done,
            self.assignment,
            self.speed,
            self.allowed,
            _NO_CANDIDATES if construct or cur < 0 or self.done else self.candidates,
            float(self.makespan),
            ts,
            self.steps,
            self.runtime,
            self.gpu_free,
            self._in_ptr,
            self._in_edges,
            self.edges,
            self.edge_bytes,
            self.inv_bw,
            self.finish,
            self._edge_index if graph else _NO_EDGE_INDEX,
            self._edge_mask if graph else _NO_EDGE_MASK,
            self.max_edges,
            self.max_tasks,
        )
        _kernels.dag_observe(*args)
        return self._snapshot()

    def _snapshot(self) -> dict:
        if self.obs_mode == "graph":
            return {
                "node_features": self._nodes.copy(),
                "node_mask": self._node_mask.copy(),
                "edge_index": self._edge_index.copy(),
                "edge_features": self._edge_features.copy(),
                "edge_mask": self._edge_mask.copy(),
                "context": self._context.copy(),
                "action_mask": self._action_mask.copy(),
            }
        return {
            "obs": self._flat.copy(),
            "context": self._context.copy(),
            "action_mask": self._action_mask.copy(),
        }

    # ------------------------------------------------------------------ rendering
    def render(self):
        if self.render_mode is None or self.dag is None:
            return None
        placed = np.flatnonzero(self.assignment >= 0)
        if self.render_mode == "ansi":
            lines = [
                f"DAGSchedule ({self.mode}) makespan={self.makespan:.3f}s placed={len(placed)}/{self.dag.num_tasks}"
            ]
            for q in range(self.num_gpus):
                tasks = sorted((t for t in placed if self.assignment[t] == q), key=lambda t: self.start[t])
                cells = " ".join(f"{t}[{self.start[t]:.1f}-{self.finish[t]:.1f}]" for t in tasks)
                lines.append(f"gpu {q:2d} ({self.gpu_types[q]:>5}, x{self.speed[q]:.2f}): {cells}")
            return "\n".join(lines) + "\n"
        labels = [f"GPU {q}  {self.gpu_types[q]}  ×{self.speed[q]:.2f}" for q in range(self.num_gpus)]
        title = f"DAGSchedule ({self.mode})   makespan {self.makespan:.3f} s   placed {len(placed)}/{self.dag.num_tasks}"
        return render_gantt(self.start, self.finish, self.assignment, labels, self.makespan, title)
