"""The leaderboard grid (scenario × agent × seed): plan it against the cache, compute the missing cells on a
backend (in process, a process pool, or Ray tasks), and write each finished cell at once — so an interrupted run
resumes where it stopped.

Workers receive only plain data (the scenario as a dict, the agent spec, the seeds) and resolve the agent
themselves (once per process); the driver alone writes cache files. The missing seeds of one (scenario, agent) whose
agent steps several envs together (a checkpoint: one batched forward pass per step, the same actions as one pass
per env) are one task; other cells are a task each. Tasks start longest first (checkpoint groups by their estimated
cost, then the rest), so the workers finish together.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gpusched_lab.evaluate.agents import EVAL_TORCH_THREADS, EvalAgent, code_version, resolve_agent
from gpusched_lab.evaluate.cache import cell_key, cell_path, read_cell, write_cell
from gpusched_lab.evaluate.scenarios import Scenario
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from gpusched_envs.envs.encoding import NON_CLAIRVOYANT

BACKENDS = ("local", "ray")


class CacheWarning(UserWarning):
    """A cached cell that could not be used (corrupt, partial or stale); it is recomputed."""


@dataclass
class Cell:
    scenario: Scenario
    agent: EvalAgent
    seed: int
    key: str
    path: Path


@dataclass
class GridResult:
    """What a grid run produced: valid cell payloads in grid order, and what was skipped or failed."""

    scenarios: list[Scenario]
    agents: list[EvalAgent]
    cells: list[dict] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (scenario, agent, reason)
    failed: list[tuple[str, str, int, str]] = field(default_factory=list)  # (scenario, agent, seed, error)
    computed: int = 0
    cached: int = 0
    recomputed: int = 0  # cached files found unusable (corrupt, partial or stale) and recomputed
    wall_s: float = 0.0


def run_cell(scenario_doc: dict, agent_spec: str, seed: int) -> dict:
    """Worker side: one episode; ``{"metrics", "jct_quantiles", "wall_s"}`` or ``{"error"}`` (never raises)."""
    try:
        # the to_dict() of a scenario checked where it was made (a suite file's, or gpusched evaluate --env's)
        scenario = Scenario(**{**scenario_doc, "seeds": tuple(scenario_doc["seeds"])})
        agent = resolve_agent(agent_spec)
        start = time.perf_counter()
        metrics = agent.run_episode(scenario, int(seed))
        wall = time.perf_counter() - start
        quantiles = metrics.pop("jct_quantiles", [])
        return {"metrics": metrics, "jct_quantiles": quantiles, "wall_s": wall, "pid": os.getpid()}
    except Exception as exc:  # a failing agent must not stop the other cells
        tail = traceback.format_exc(limit=-3).strip().splitlines()[-1]
        return {"error": f"{type(exc).__name__}: {exc}", "trace": tail}


def _error(exc: BaseException) -> dict:
    return {
        "error": f"{type(exc).__name__}: {exc}",
        "trace": traceback.format_exception_only(type(exc), exc)[-1].strip(),
    }


def run_cells(scenario_doc: dict, agent_spec: str, seeds: list[int]) -> list[dict]:
    """Worker side: the cells of several seeds of one (scenario, agent), stepped together when the agent
    ``batches_seeds``; one :func:`run_cell` result per seed, in order (never raises). A cell's ``wall_s`` is its
    share of the group's time. Should the batched run itself fail, every seed runs on its own."""
    seeds = [int(s) for s in seeds]
    try:
        scenario = Scenario(**{**scenario_doc, "seeds": tuple(scenario_doc["seeds"])})
        agent = resolve_agent(agent_spec)
        if len(seeds) < 2 or not agent.batches_seeds:
            return [run_cell(scenario_doc, agent_spec, s) for s in seeds]
        start = time.perf_counter()
        outs = agent.run_episodes(scenario, seeds)
        wall = (time.perf_counter() - start) / len(seeds)
    except Exception:  # noqa: BLE001 - the cells one by one, each with its own result or error
        return [run_cell(scenario_doc, agent_spec, s) for s in seeds]
    results = []
    for out in outs:
        if isinstance(out, BaseException):
            results.append(_error(out))
            continue
        quantiles = out.pop("jct_quantiles", [])
        results.append({"metrics": out, "jct_quantiles": quantiles, "wall_s": wall, "pid": os.getpid()})
    return results


def _tasks(todo: list[Cell]) -> list[list[Cell]]:
    """The cells to compute, as tasks: the seeds of one (scenario, agent) together when its agent batches them,
    every other cell alone; longest first (groups by their :func:`_cost`, then single cells in grid order)."""
    groups: dict[tuple[int, int], list[Cell]] = {}
    single: list[list[Cell]] = []
    for cell in todo:
        if cell.agent.batches_seeds:
            groups.setdefault((id(cell.scenario), id(cell.agent)), []).append(cell)
        else:
            single.append([cell])
    batched = sorted(groups.values(), key=lambda g: (-_cost(g[0].scenario, g[0].agent), -len(g)))
    return batched + single


def _weight(agent: EvalAgent) -> int:
    """A rough relative cost of one step of the agent (graph networks cost most)."""
    meta = getattr(agent, "meta", None) or {}
    return 4 if meta.get("obs_mode") == "graph" else 1


# the rounds of an agent that does not see the jobs' durations count this many times: its queue drains slower than
# a clairvoyant one's, so the cluster stays busy (and the agent is asked) longer than the GPU time alone says
NON_CLAIRVOYANT_ROUNDS = 2.0


def _cost(scenario: Scenario, agent: EvalAgent) -> float:
    """A rough relative cost of one episode of the agent on the scenario: its cost per step (:func:`_weight`) times
    its decisions, about one per job, plus, for an agent asked in periodic rounds, one per round while the jobs'
    GPU time keeps the cluster busy (:func:`_busy_seconds`), :data:`NON_CLAIRVOYANT_ROUNDS` per round for a
    non-clairvoyant agent (:func:`_information`). A long trace at a short interval is many rounds: such a group can
    take as long as all the other cells together, so it must start first."""
    meta = getattr(agent, "meta", None) or {}
    interval = (meta.get("env_kwargs") or {}).get("decision_interval")
    jobs, busy = _busy_seconds(scenario)
    rounds = busy / float(interval) if interval and busy > 0 else 0.0
    if rounds and _information(scenario, agent) == NON_CLAIRVOYANT:
        rounds *= NON_CLAIRVOYANT_ROUNDS
    return _weight(agent) * (jobs + rounds)


def _information(scenario: Scenario, agent: EvalAgent) -> str:
    """What the agent's env shows of the jobs: a checkpoint's own ``information`` setting (it replaces the
    scenario's), else the scenario's, else the env's default (non-clairvoyant)."""
    meta = getattr(agent, "meta", None) or {}
    for kwargs in (meta.get("env_kwargs") or {}, scenario.env_kwargs or {}):
        if "information" in kwargs:
            return str(kwargs["information"])
    return NON_CLAIRVOYANT


_BUSY: dict[str, tuple[int, float]] = {}


def _busy_seconds(scenario: Scenario) -> tuple[int, float]:
    """(jobs, GPU time of the jobs ÷ the cluster's GPUs) of the scenario's workload for its first seed, from the
    env's episode spec (no simulator is built); (0, 0.0) when the env has none (cached per scenario)."""
    key = scenario.content_hash()
    if key not in _BUSY:
        jobs, busy = 0, 0.0
        try:
            env = scenario.make_env()
            try:
                episode = env.unwrapped.episode
                workload = episode.workload(int(scenario.seeds[0]))
                gpus = float(episode.cluster.num_gpus)
                jobs = len(workload.duration)
                busy = float(np.sum(np.asarray(workload.duration) * np.asarray(workload.num_gpus))) / gpus
            finally:
                env.close()
        except Exception:  # noqa: BLE001 - an estimate only: the order, never a result, depends on it
            jobs, busy = 0, 0.0
        _BUSY[key] = (jobs, busy)
    return _BUSY[key]


def _run_task(scenario_doc: dict, agent_spec: str, seeds: list[int]) -> list[dict]:
    if len(seeds) == 1:
        return [run_cell(scenario_doc, agent_spec, seeds[0])]
    return run_cells(scenario_doc, agent_spec, seeds)


def _task_args(task: list[Cell]) -> tuple[dict, str, list[int]]:
    return task[0].scenario.to_dict(), task[0].agent.spec, [c.seed for c in task]


def _worker_init(preload: tuple[str, ...] = ()) -> None:
    """A worker's start: one thread per process and, when ``preload`` names checkpoints, the imports their
    episodes need (torch and the checkpoint loader), done while the driver still plans the grid. Each checkpoint is
    loaded by the first task that runs it (a worker loads only the ones it runs). Best effort: an import that fails
    here fails in the cells that need it, with its own error."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if not preload:
        return
    try:
        import torch
        from gpusched_lab.agents import checkpoint  # noqa: F401 - imported for the tasks

        torch.set_num_threads(EVAL_TORCH_THREADS)
    except Exception:  # noqa: BLE001, S110 - reported by the cells that need it
        pass


def _noop() -> None:
    return None


def _start_pool(workers: int, agent_specs: list[str]) -> ProcessPoolExecutor:
    """The local backend's worker processes, started at once (their imports overlap the driver's planning); with
    checkpoint specs (existing paths) among the agents, torch is imported too (:func:`_worker_init`)."""
    preload = tuple(s for s in agent_specs if Path(s.strip()).exists())
    pool = ProcessPoolExecutor(
        workers, mp_context=mp.get_context("spawn"), initializer=_worker_init, initargs=(preload,)
    )
    for _ in range(workers):  # one task per worker spawns every process now
        pool.submit(_noop)
    return pool


def plan(
    scenarios: list[Scenario], agent_specs: list[str], out: str | Path
) -> tuple[list[EvalAgent], list[Cell], list[tuple[str, str, str]]]:
    """Agents, every applicable cell, and the (scenario, agent, reason) pairs skipped as not applicable."""
    agents = [resolve_agent(s) for s in agent_specs]
    names = [a.name for a in agents]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"two agents share the name(s) {', '.join(sorted(dup))}")
    version = code_version()
    cells, skipped = [], []
    for scenario in scenarios:
        s_hash = scenario.content_hash()
        for agent in agents:
            reason = agent.applies_to(scenario)
            if reason is not None:
                skipped.append((scenario.name, agent.name, reason))
                continue
            a_hash = agent.identity_hash()
            for seed in scenario.seeds:
                key = cell_key(s_hash, a_hash, seed, version)
                cells.append(
                    Cell(scenario, agent, int(seed), key, cell_path(out, scenario.name, agent.name, seed))
                )
    return agents, cells, skipped


def _payload(cell: Cell, result: dict, backend: str) -> dict:
    return {
        "key": cell.key,
        "scenario": cell.scenario.name,
        "scenario_hash": cell.scenario.content_hash(),
        "agent": cell.agent.name,
        "agent_spec": cell.agent.spec,
        "agent_kind": cell.agent.kind,
        "agent_hash": cell.agent.identity_hash(),
        "seed": cell.seed,
        "code_version": code_version(),
        "metrics": result["metrics"],
        "jct_quantiles": result["jct_quantiles"],
        "wall_s": result["wall_s"],
        "backend": backend,
    }


def _local_stream(
    todo: list[Cell],
    workers: int = 1,
    pool: ProcessPoolExecutor | None = None,
    on_tail: Callable[[], None] | None = None,
):
    """Yield ``(cell, result)`` as cells finish: on ``pool``'s processes, else on a pool of ``workers`` processes
    started here, or in process (one worker). ``on_tail()`` is called once, when fewer tasks remain than workers
    (a process would otherwise idle until the last task ends)."""
    tasks = _tasks(todo)
    if not tasks:
        return
    if pool is None and workers > 1:
        with _start_pool(workers, sorted({c.agent.spec for c in todo})) as own:
            yield from _local_stream(todo, workers, own, on_tail)
        return
    if pool is None:
        for task in tasks:
            yield from zip(task, _run_task(*_task_args(task)), strict=True)
        return
    pending = {pool.submit(_run_task, *_task_args(t)): t for t in tasks}
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                task = pending.pop(fut)
                if on_tail is not None and len(pending) < workers:  # a worker has nothing left to do
                    on_tail()
                    on_tail = None
                yield from zip(task, fut.result(), strict=True)
    finally:
        for fut in pending:
            fut.cancel()


def _ray_stream(todo: list[Cell], workers: int, address: str | None):
    """Yield ``(cell, result)`` as Ray tasks finish; starts a local Ray instance unless one is running or
    ``address`` names a cluster (which must have this package installed)."""
    try:
        import ray
    except ImportError:
        raise RuntimeError('the ray backend needs ray: pip install "gpusched-envs[ray]"') from None
    started = False
    if not ray.is_initialized():
        kwargs: dict = {"include_dashboard": False, "ignore_reinit_error": True, "log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["num_cpus"] = max(1, workers)
        ray.init(**kwargs)
        started = True
    try:
        remote = ray.remote(num_cpus=1)(_run_task)
        refs = {remote.remote(*_task_args(t)): t for t in _tasks(todo)}
        try:
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                for ref in done:
                    yield from zip(refs.pop(ref), ray.get(ref), strict=True)
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)
    finally:
        if started:
            ray.shutdown()


def run_grid(
    scenarios: list[Scenario],
    agent_specs: list[str],
    out: str | Path,
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    progress: bool = True,
    on_cell: Callable[[Cell, dict], None] | None = None,
    on_tail: Callable[[], None] | None = None,
) -> GridResult:
    """Run every missing cell and return all valid cells. ``on_cell(cell, payload)`` is called after each computed
    cell is written (an exception there stops the run; finished cells stay cached). ``on_tail()``: called once on
    the local backend with several workers, when fewer tasks remain than workers (work for the idle processor:
    the report's warm-up). The pool's processes are handed back without waiting for them to exit: they leave
    while the caller goes on (the report)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    start = time.perf_counter()
    # the local backend's processes; started before planning when no cell can be cached yet (a fresh folder), so
    # that their imports overlap the planning, else once some cell is missing
    pools: list[ProcessPoolExecutor] = []
    if backend == "local" and workers > 1 and not (Path(out) / "cells").exists():
        pools.append(_start_pool(workers, agent_specs))
    try:
        result = _run_grid(
            scenarios, agent_specs, out, pools, workers, backend, address, progress, on_cell, on_tail
        )
    except BaseException:
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
        raise
    for pool in pools:
        pool.shutdown(wait=False)
    result.wall_s = time.perf_counter() - start
    return result


def _run_grid(
    scenarios: list[Scenario],
    agent_specs: list[str],
    out: str | Path,
    pools: list[ProcessPoolExecutor],
    workers: int,
    backend: str,
    address: str | None,
    progress: bool,
    on_cell: Callable[[Cell, dict], None] | None,
    on_tail: Callable[[], None] | None = None,
) -> GridResult:
    agents, cells, skipped = plan(scenarios, agent_specs, out)
    result = GridResult(list(scenarios), agents, skipped=skipped)
    have: dict[str, dict] = {}
    todo: list[Cell] = []
    for cell in cells:
        payload, reason = read_cell(cell.path, cell.key)
        if payload is not None:
            have[cell.key] = payload
            continue
        if reason is not None:
            result.recomputed += 1
            warnings.warn(f"{cell.path}: {reason}; recomputing", CacheWarning, stacklevel=3)
        todo.append(cell)
    result.cached = len(have)

    if backend == "local" and workers > 1 and todo and not pools:
        pools.append(_start_pool(workers, agent_specs))
    pool = pools[0] if pools else None
    stream = (
        _ray_stream(todo, workers, address)
        if backend == "ray"
        else _local_stream(todo, workers, pool, on_tail)
    )
    bar = None
    if progress and todo:
        bar = Progress(
            TextColumn("[bold]leaderboard[/] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        bar.start()
        task = bar.add_task(f"({result.cached} cached)", total=len(todo))
    try:
        for cell, res in stream:
            if "error" in res:
                result.failed.append((cell.scenario.name, cell.agent.name, cell.seed, res["error"]))
            else:
                payload = write_cell(cell.path, _payload(cell, res, backend))
                have[cell.key] = payload
                result.computed += 1
                if on_cell is not None:
                    on_cell(cell, payload)
            if bar is not None:
                bar.update(task, advance=1, description=escape(f"{cell.scenario.name} · {cell.agent.name}"))
    finally:
        stream.close()
        if bar is not None:
            bar.stop()
    result.cells = [have[c.key] for c in cells if c.key in have]
    seen: set[tuple[str, str, str]] = set()
    for scenario, agent, _, error in result.failed:
        if (scenario, agent, error) not in seen:
            seen.add((scenario, agent, error))
            warnings.warn(f"{agent} on {scenario} failed: {error}", RuntimeWarning, stacklevel=3)
    return result
