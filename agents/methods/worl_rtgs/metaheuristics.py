"""Search over DAG scheduling plans (WORL-RTGS): the random-key plan encoding every metaheuristic shares,
GA and PSO baselines, the analytic makespan lower bound and the CP-SAT optimum for small DAGs.

Random keys. A plan of an ``N``-task DAG on ``G`` GPUs is a vector ``x`` in ``[0, 1)^{2N}``: ``x[:N]`` are the
task priorities (the list-scheduling evaluator dispatches the ready task of highest priority) and ``x[N:]`` choose
each task's GPU among those its affinity allows, ``allowed[floor(x * count)]``. Every vector decodes to a valid
plan, so GA / PSO / WOA move freely in the unit box and score whole populations with one call of
:class:`gpusched_envs.sim.dag_eval.PlanEvaluator`. :meth:`PlanSpace.encode` maps any plan (HEFT's, a DDQN plan)
back into a key vector that decodes to the same dispatch order and GPUs.

All searchers take an evaluation budget ``population * iterations`` and a seed, and return a :class:`SearchResult`
(best plan, its makespan, the best-so-far curve). Equal budgets make the comparison fair.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpusched_envs.policies.dag import topological_order
from gpusched_envs.sim.dag_eval import DAGLike, PlanEvaluator, inverse_bandwidth, runtime_matrix

KEY_HIGH = np.nextafter(1.0, 0.0)  # keys live in [0, 1)


class PlanSpace:
    """One DAG on one GPU set: random-key decoding/encoding and batched evaluation (counts evaluations)."""

    def __init__(self, dag: DAGLike, speed, bandwidth, *, gpu_types=None):
        self.dag = dag
        self.speed = np.asarray(speed, dtype=np.float64)
        self.bandwidth = np.asarray(bandwidth, dtype=np.float64)
        self.gpu_types = gpu_types
        self.evaluator = PlanEvaluator(dag, self.speed, self.bandwidth, gpu_types=gpu_types)
        self.runtime = self.evaluator.runtime  # (N, G)
        self.num_tasks, self.num_gpus = self.runtime.shape
        self.dim = 2 * self.num_tasks
        allowed = np.isfinite(self.runtime)
        self.counts = allowed.sum(axis=1)  # (N,)
        if np.any(self.counts == 0):
            raise ValueError(
                f"DAG {dag.name!r}: task {int(np.argmin(self.counts))} may run on none of the GPUs"
            )
        self.allowed_cols = np.argsort(~allowed, axis=1, kind="stable")  # allowed GPUs first, in index order
        self.slot_of = np.argsort(self.allowed_cols, axis=1)  # (N, G) GPU -> its position among the allowed
        self.evaluations = 0

    # ------------------------------------------------------------------ encoding
    def decode(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(assignments (P, N), priorities (P, N))`` of key vectors ``x`` (P, 2N) (or one (2N,) vector)."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        n = self.num_tasks
        k = np.minimum((np.clip(x[:, n:], 0.0, KEY_HIGH) * self.counts).astype(np.int64), self.counts - 1)
        a = self.allowed_cols[np.arange(n)[None, :], k]
        return a, x[:, :n]

    def encode(self, assignment, priority) -> np.ndarray:
        """Key vectors (P, 2N) decoding to the given plans: priorities become their rank (ties: the lower index
        ranks higher, as the evaluator breaks them) scaled into (0, 1), GPUs the middle of their key slot."""
        a = np.atleast_2d(np.asarray(assignment, dtype=np.int64))
        p = np.atleast_2d(np.asarray(priority, dtype=np.float64))
        n = self.num_tasks
        by = (n - 1) - np.argsort(p[:, ::-1], axis=1, kind="stable")  # ascending rank
        rank = np.empty_like(by)
        np.put_along_axis(rank, by, np.arange(n)[None, :], axis=1)
        slot = self.slot_of[np.arange(n)[None, :], a]
        return np.concatenate([(rank + 0.5) / n, (slot + 0.5) / self.counts], axis=1)

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """(P,) makespans of key vectors ``x`` (P, 2N)."""
        a, p = self.decode(x)
        self.evaluations += len(a)
        return self.evaluator.evaluate(a, p)

    def random(self, count: int, rng: np.random.Generator) -> np.ndarray:
        return rng.random((count, self.dim))


@dataclass
class SearchResult:
    """What a searcher found: the best plan, its makespan and the best-so-far makespan after each iteration."""

    assignment: np.ndarray
    priority: np.ndarray
    makespan: float
    curve: list[float] = field(default_factory=list)
    evaluations: int = 0
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)  # searcher-specific counters (WORL-RTGS: injections, steering)

    @property
    def plan(self) -> tuple[np.ndarray, np.ndarray]:
        return self.assignment, self.priority


def _result(space: PlanSpace, x: np.ndarray, f: float, curve: list[float], t0: float) -> SearchResult:
    a, p = space.decode(x)
    return SearchResult(a[0], p[0], float(f), curve, space.evaluations, time.perf_counter() - t0)


def list_scheduling_plans(dag: DAGLike, speed, bandwidth, *, gpu_types=None) -> list[tuple]:
    """HEFT's and CPOP's plans ``(assignment, priority)``: their priority order and GPU choice, which
    :meth:`PlanSpace.encode` turns into random keys. A searcher whose initial population holds them (and which,
    like all here, keeps the best plan it has scored) is never worse than either."""
    from gpusched_envs.policies.dag import cpop, heft

    return [
        heft(dag, speed, bandwidth, gpu_types=gpu_types),
        cpop(dag, speed, bandwidth, gpu_types=gpu_types),
    ]


def initial_population(
    space: PlanSpace, population: int, rng: np.random.Generator, seeds: list[tuple] | None = None
) -> np.ndarray:
    """``population`` random key vectors, the first rows replaced by the encoded ``seeds`` plans (if any)."""
    x = space.random(population, rng)
    if seeds:
        enc = np.concatenate([space.encode(a, p) for a, p in seeds])[:population]
        x[: len(enc)] = enc
    return x


# ---------------------------------------------------------------------------------------------------------- GA
def genetic_algorithm(
    space: PlanSpace,
    *,
    population: int = 50,
    iterations: int = 100,
    seed: int = 0,
    crossover_rate: float = 0.9,
    bias: float = 0.7,
    mutation_rate: float | None = None,
    elite: int = 2,
    tournament: int = 3,
    seeds: list[tuple] | None = None,
) -> SearchResult:
    """Random-key GA: tournament selection, biased uniform crossover (a gene from the fitter parent with
    probability ``bias``), per-gene reset mutation (rate ``1 / (2N)`` by default), ``elite`` best kept."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    d = space.dim
    mut = 1.0 / d if mutation_rate is None else mutation_rate
    x = initial_population(space, population, rng, seeds)
    f = space.evaluate(x)
    curve = [float(f.min())]
    for _ in range(iterations - 1):
        order = np.argsort(f, kind="stable")
        kids = population - elite
        cand = rng.integers(0, population, size=(2 * kids, tournament))
        winners = cand[np.arange(2 * kids), np.argmin(f[cand], axis=1)]
        pa, pb = winners[:kids], winners[kids:]
        fitter = np.where((f[pa] <= f[pb])[:, None], x[pa], x[pb])
        other = np.where((f[pa] <= f[pb])[:, None], x[pb], x[pa])
        take = rng.random((kids, d)) < bias
        child = np.where(take, fitter, other)
        no_cross = rng.random(kids) >= crossover_rate
        child[no_cross] = fitter[no_cross]
        m = rng.random((kids, d)) < mut
        child[m] = rng.random(int(m.sum()))
        x = np.concatenate([x[order[:elite]], child])
        f = np.concatenate([f[order[:elite]], space.evaluate(child)])
        curve.append(float(min(curve[-1], f.min())))
    b = int(np.argmin(f))
    return _result(space, x[b], f[b], curve, t0)


# ---------------------------------------------------------------------------------------------------------- PSO
def particle_swarm(
    space: PlanSpace,
    *,
    population: int = 50,
    iterations: int = 100,
    seed: int = 0,
    inertia: float = 0.72,
    c_personal: float = 1.49,
    c_global: float = 1.49,
    max_velocity: float = 0.2,
    seeds: list[tuple] | None = None,
) -> SearchResult:
    """Global-best PSO (Clerc–Kennedy constants) in the key box; positions clipped to [0, 1)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    x = initial_population(space, population, rng, seeds)
    v = rng.uniform(-max_velocity, max_velocity, x.shape)
    f = space.evaluate(x)
    pbest, pf = x.copy(), f.copy()
    g = int(np.argmin(pf))
    curve = [float(pf[g])]
    for _ in range(iterations - 1):
        r1, r2 = rng.random(x.shape), rng.random(x.shape)
        v = inertia * v + c_personal * r1 * (pbest - x) + c_global * r2 * (pbest[g] - x)
        np.clip(v, -max_velocity, max_velocity, out=v)
        x = np.clip(x + v, 0.0, KEY_HIGH)
        f = space.evaluate(x)
        better = f < pf
        pbest[better], pf[better] = x[better], f[better]
        g = int(np.argmin(pf))
        curve.append(float(pf[g]))
    return _result(space, pbest[g], pf[g], curve, t0)


def random_search(
    space: PlanSpace, *, population: int = 50, iterations: int = 1, seed: int = 0
) -> SearchResult:
    """Random list scheduling: the best of ``population * iterations`` uniformly random plans (1 x 1: one plan)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    best_x, best_f, curve = None, np.inf, []
    for _ in range(iterations):
        x = space.random(population, rng)
        f = space.evaluate(x)
        i = int(np.argmin(f))
        if f[i] < best_f:
            best_x, best_f = x[i], float(f[i])
        curve.append(best_f)
    return _result(space, best_x, best_f, curve, t0)


# ---------------------------------------------------------------------------------------------------------- bounds
def lower_bound(dag: DAGLike, speed, bandwidth=None, *, gpu_types=None) -> float:
    """Analytic lower bound on any plan's makespan: the largest of

    - the critical path with every task at its fastest allowed GPU and free communication;
    - the total of each task's fastest runtime divided by the GPU count (total busy time ≥ that sum);
    - without heterogeneity factors or affinities: total work ÷ total speed (a GPU of speed ``s`` does at most
      ``s · C`` reference-seconds of work by time ``C``).
    """
    rt = runtime_matrix(dag, speed, gpu_types)
    n, g = rt.shape
    if n == 0:
        return 0.0
    fastest = rt.min(axis=1)
    edges = np.asarray(dag.edges, dtype=np.int64).reshape(-1, 2)
    parents: list[list[int]] = [[] for _ in range(n)]
    for s, d in edges:
        parents[d].append(int(s))
    longest = fastest.copy()
    for i in topological_order(n, edges, parents):
        if parents[i]:
            longest[i] = fastest[i] + max(longest[p] for p in parents[i])
    bounds = [float(longest.max()), float(fastest.sum() / g)]
    if getattr(dag, "hetero", None) is None and np.all(np.isfinite(rt)):
        bounds.append(float(np.asarray(dag.work).sum() / np.asarray(speed, dtype=np.float64).sum()))
    return max(bounds)


# ---------------------------------------------------------------------------------------------------------- CP-SAT
@dataclass
class ExactResult:
    """CP-SAT's answer: the best plan found (scored by the exact evaluator), whether it is proven optimal, and a
    lower bound valid for the exact (unrounded) problem."""

    assignment: np.ndarray
    priority: np.ndarray
    makespan: float
    lower_bound: float
    optimal: bool
    status: str
    seconds: float

    @property
    def plan(self) -> tuple[np.ndarray, np.ndarray]:
        return self.assignment, self.priority


def cpsat_schedule(
    dag: DAGLike,
    speed,
    bandwidth,
    *,
    gpu_types=None,
    time_limit: float = 10.0,
    resolution: float = 1e-4,
    hints: list[tuple] | None = None,
    workers: int = 1,
    seed: int = 0,
) -> ExactResult:
    """The makespan-optimal schedule of a (small) DAG by OR-Tools CP-SAT (``pip install gpusched-envs[solver]``).

    Model: task ``i`` picks one GPU ``g`` (Boolean ``x[i, g]``, optional interval of length ``runtime[i, g]``);
    one task at a time per GPU (``NoOverlap``); each edge ``p -> c``: ``start[c] >= end[p]``, plus
    ``start[c] >= end[p] + bytes / bandwidth[g, h]`` when ``x[p, g]`` and ``x[c, h]`` with ``g != h``. Times are
    integers in units of ``resolution × (the best hint's makespan, else the serial makespan on the fastest GPU)``,
    rounded *up*, so CP-SAT's schedule is feasible for the exact times. The returned plan is scored by the exact
    evaluator (dispatching in CP-SAT's start order reproduces the schedule or starts earlier). ``hints``: plans
    given to CP-SAT as a starting solution (default: HEFT's and CPOP's); the result is never worse than the best
    hint. ``lower_bound``: the
    solver's bound minus the rounding any path can carry, or the analytic bound, whichever is larger.
    ``optimal`` is True when CP-SAT proved its rounded problem optimal and the exact makespan lies within the
    rounding of the bound.
    """
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "the CP-SAT baseline needs OR-Tools: pip install 'gpusched-envs[solver]' (or ortools)"
        ) from exc
    t0 = time.perf_counter()
    speed = np.asarray(speed, dtype=np.float64)
    rt = runtime_matrix(dag, speed, gpu_types)
    inv = inverse_bandwidth(bandwidth, len(speed))
    n, g = rt.shape
    ev = PlanEvaluator(dag, speed, bandwidth, gpu_types=gpu_types)
    edges = np.asarray(dag.edges, dtype=np.int64).reshape(-1, 2)
    eb = np.asarray(dag.edge_bytes, dtype=np.float64)
    if (
        hints is None
    ):  # HEFT and CPOP bound the horizon (CP-SAT struggles with a loose one) and seed the search
        from gpusched_envs.policies.dag import cpop, heft

        hints = [
            heft(dag, speed, bandwidth, gpu_types=gpu_types),
            cpop(dag, speed, bandwidth, gpu_types=gpu_types),
        ]
    hint_plans = [(np.asarray(a, dtype=np.int64), np.asarray(p, dtype=np.float64)) for a, p in hints]
    hint_ms = [float(ev.evaluate(a, p)[0]) for a, p in hint_plans]
    lb_analytic = lower_bound(dag, speed, bandwidth, gpu_types=gpu_types)
    if n == 0:
        return ExactResult(np.zeros(0, np.int64), np.zeros(0), 0.0, 0.0, True, "OPTIMAL", 0.0)
    scale_ref = min(hint_ms) if hint_ms else float(np.where(np.isfinite(rt), rt, np.inf).min(axis=1).sum())
    unit = max(scale_ref, 1e-12) * resolution
    dur = np.where(np.isfinite(rt), np.ceil(rt / unit), -1).astype(np.int64)
    horizon = int(np.where(dur >= 0, dur, 0).max(axis=1).sum() + np.ceil(eb * inv.max() / unit).sum() + 1)
    if hint_ms:
        horizon = min(horizon, int(np.ceil(min(hint_ms) / unit)) + 2 * n + 1)
    m = cp_model.CpModel()
    start = [m.NewIntVar(0, horizon, f"s{i}") for i in range(n)]
    end = [m.NewIntVar(0, horizon, f"e{i}") for i in range(n)]
    x = {}
    per_gpu: list[list] = [[] for _ in range(g)]
    for i in range(n):
        lits = []
        for q in range(g):
            if dur[i, q] < 0:
                continue
            b = m.NewBoolVar(f"x{i}_{q}")
            x[i, q] = b
            lits.append(b)
            per_gpu[q].append(m.NewOptionalFixedSizeIntervalVar(start[i], int(dur[i, q]), b, f"iv{i}_{q}"))
            m.Add(end[i] == start[i] + int(dur[i, q])).OnlyEnforceIf(b)
        m.AddExactlyOne(lits)
    for q in range(g):
        m.AddNoOverlap(per_gpu[q])
    for e, (p, c) in enumerate(edges):
        m.Add(start[c] >= end[p])
        if eb[e] <= 0:
            continue
        for gp in range(g):
            for gc in range(g):
                if gp == gc or (p, gp) not in x or (c, gc) not in x:
                    continue
                d = int(np.ceil(eb[e] * inv[gp, gc] / unit))
                if d > 0:
                    m.Add(start[c] >= end[p] + d).OnlyEnforceIf([x[p, gp], x[c, gc]])
    makespan = m.NewIntVar(0, horizon, "makespan")
    m.AddMaxEquality(makespan, end)
    m.Minimize(makespan)
    if hint_plans:
        best = hint_plans[int(np.argmin(hint_ms))]
        sched = ev.schedule(*best)
        for i in range(n):
            for q in range(g):
                if (i, q) in x:
                    m.AddHint(x[i, q], int(best[0][i] == q))
        # the hint's start times re-timed on the rounded durations (dispatch order kept)
        free = np.zeros(g, dtype=np.int64)
        s_int = np.zeros(n, dtype=np.int64)
        e_int = np.zeros(n, dtype=np.int64)
        for i in sched.order:
            q = int(best[0][i])
            st = int(free[q])
            for e in np.flatnonzero(edges[:, 1] == i):
                p = int(edges[e, 0])
                d = 0 if best[0][p] == q else int(np.ceil(eb[e] * inv[best[0][p], q] / unit))
                st = max(st, int(e_int[p]) + d)
            s_int[i], e_int[i] = st, st + int(dur[i, q])
            free[q] = e_int[i]
        for i in range(n):
            m.AddHint(start[i], int(s_int[i]))
            m.AddHint(end[i], int(e_int[i]))
        m.AddHint(makespan, int(e_int.max()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_search_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    status = solver.Solve(m)
    name = solver.StatusName(status)
    candidates = list(zip(hint_plans, hint_ms, strict=True))
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        assign = np.array(
            [next(q for q in range(g) if (i, q) in x and solver.Value(x[i, q])) for i in range(n)],
            dtype=np.int64,
        )
        starts = np.array([solver.Value(start[i]) for i in range(n)], dtype=np.float64)
        prio = -np.argsort(np.argsort(starts, kind="stable"), kind="stable").astype(np.float64)
        candidates.append(((assign, prio), float(ev.evaluate(assign, prio)[0])))
    if not candidates:
        raise RuntimeError(
            f"CP-SAT found no schedule for DAG {dag.name!r} within {time_limit}s (status {name})"
        )
    (a_best, p_best), ms = min(candidates, key=lambda c: c[1])
    bound = (
        (solver.BestObjectiveBound() - 2 * n) * unit if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else 0
    )
    lb = max(lb_analytic, float(bound))
    optimal = status == cp_model.OPTIMAL and ms <= (solver.ObjectiveValue() * unit) + 1e-9
    return ExactResult(a_best, p_best, ms, min(lb, ms), bool(optimal), name, time.perf_counter() - t0)


Searcher = Callable[..., SearchResult]
