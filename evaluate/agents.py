"""Every kind of agent the leaderboard ranks, behind one interface (:class:`EvalAgent`): the classical heuristics,
shipped or user checkpoints, and user agents given as ``module:callable``.

Agent specs (:func:`resolve_agent`):

- ``fifo``, ``sjf``, ``srtf``, ``tiresias``, ``gandiva``, ``las``, ``fifo-backfill`` (their default placement,
  :data:`HEURISTICS`), or ``POLICY+PLACEMENT`` (``sjf+consolidate``): a heuristic of :mod:`gpusched_envs.policies`;
- ``random``: a seeded uniform choice among the valid actions in the scenario's env (:class:`RandomEvalAgent`);
- a checkpoint folder (``model.pt`` + ``meta.json``) or its ``model.pt``: loaded with ``agents.load``, evaluated
  only on scenarios with its env id and observation layout; a MetaPlace checkpoint (``meta_rl`` in its meta) runs as ``gpusched adapt`` evaluates it at K = 0 (:class:`MetaPlaceEvalAgent`: GNN logits minus ``w`` × its
  performance model's cautious score), and the ``checkpoints`` group lists ``checkpoints/*/``;
- ``module:callable`` or ``path/to/file.py:callable``: ``callable()`` returns either an agent with
  ``act(obs) -> action`` (optional ``reset()`` before each episode; optional attributes ``env_ids`` — the env ids
  it runs on — and ``obs_mode``) or a scheduler with ``schedule(sim)`` (the :class:`~gpusched_envs.policies.Policy`
  interface). It is called once per episode, so an episode never sees another's state.

How an episode runs: a scheduler (heuristic or user) runs on a fresh :class:`~gpusched_envs.sim.Simulator` built
from the scenario env's workload and simulator settings after ``env.reset(seed=seed)`` — the same workload and
simulator seed an ``act`` agent meets in the env, so metrics are comparable (for FIFO with the env's placer the two
paths give identical metrics, tested). The scheduler sees the whole queue, as in the papers.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import sys
from abc import ABC, abstractmethod
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import gymnasium as gym
from gpusched_lab.agents.common import NoSimulatorError, fresh_simulator
from gpusched_lab.evaluate import episodes, registry
from gpusched_lab.evaluate.episodes import (  # noqa: F401 - re-exported: the names this module had
    JCT_QUANTILES,
    MAX_CONSECUTIVE_INVALID,
    finish_metrics,
    jct_quantiles,
    masked_random,
    run_act_episode,
)
from gpusched_lab.evaluate.scenarios import (
    Scenario,
    canonical_json,
    file_digest,
    python_sources_digest,
    sha256_hex,
)

import gpusched_envs
from gpusched_envs.envs import ENTRY_POINTS
from gpusched_envs.policies import PLACEMENTS, POLICIES, make_policy

HEURISTICS: dict[str, str] = {
    "fifo": "closest",
    "sjf": "closest",
    "srtf": "closest",
    "tiresias": "closest",
    "gandiva": "pack",  # Gandiva's own affinity/packing placement
    "las": "closest",  # many-queue LAS: Tiresias without its single threshold
    "fifo-backfill": "closest",  # a reference beside strict FIFO: a later job starts when the head does not fit
}
"""Default heuristics of the leaderboard: policy → placement."""

# env kwargs that fix a learned policy's observation layout or the meaning of its actions: taken from the checkpoint
LAYOUT_KWARGS = (
    "obs_mode",
    "window",
    "placement",
    "task_clusters",
    "information",
    "preemption",
    "preempt_window",
    "decision_interval",  # when the agent is asked (a periodic scheduling round)
    "min_run",  # the preemption lease
    "work_conserving",  # whether waiting is allowed while a job fits (the action mask)
    "history_features",  # the runtime-history feature columns
    "hint",  # the heuristic whose action the policy reads (obs["hint"])
    "rules",  # the rules the policy's actions choose among (a rule-choice env)
)
EVAL_TORCH_THREADS = 1


class AgentSpecError(ValueError):
    """An agent spec that names nothing usable; the message says what was tried."""


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def default_checkpoint_dir() -> Path:
    return repo_root() / "checkpoints"


@lru_cache(maxsize=1)
def code_version() -> str:
    """Version + digest of the code that determines a cell's result (the library, this module and the episode
    runner): a cached cell computed by other code is recomputed."""
    h = hashlib.sha256()
    base = Path(gpusched_envs.__file__).resolve().parent
    files = [p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for p in sorted(files) + [Path(__file__).resolve(), Path(episodes.__file__).resolve()]:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    try:
        v = version("gpusched-envs")
    except PackageNotFoundError:
        v = "0"
    return f"{v}+{h.hexdigest()[:12]}"


# ---------------------------------------------------------------------------------------------- episode helpers
_finish = finish_metrics  # the name the bench modules used before finish_metrics was public


def scenario_simulator(scenario: Scenario, seed: int):
    """A fresh simulator with the workload and settings the scenario's env uses after ``reset(seed=seed)``
    (:func:`agents.common.fresh_simulator`)."""
    env = scenario.make_env()
    try:
        return fresh_simulator(env, seed)
    except NoSimulatorError:
        raise AgentSpecError(
            f"scenario {scenario.name}: {scenario.env_id} has no cluster simulator"
        ) from None
    finally:
        env.close()


def run_scheduler_episode(scheduler, scenario: Scenario, seed: int) -> dict:
    sim = scenario_simulator(scenario, seed)
    return finish_metrics(sim.run(scheduler), sim)


# ---------------------------------------------------------------------------------------------- agents
class EvalAgent(ABC):
    """An agent the leaderboard can run: ``run_episode(scenario, seed) -> metrics``."""

    kind: str = "agent"
    batches_seeds: bool = False
    """Whether :meth:`run_episodes` steps several seeds together (the grid then runs them as one task)."""

    def __init__(self, spec: str, name: str):
        self.spec = spec
        self.name = name

    @abstractmethod
    def identity(self) -> dict:
        """What the agent's results depend on (hashed into the cache key)."""

    def identity_hash(self) -> str:
        return sha256_hex(canonical_json(self.identity()))[:16]

    def applies_to(self, scenario: Scenario) -> str | None:
        """``None`` if the agent runs on the scenario, else the reason it does not."""
        return None

    @abstractmethod
    def run_episode(self, scenario: Scenario, seed: int) -> dict:
        """Metrics of one episode (keys of :mod:`gpusched_envs.sim.metrics`, plus ``jct_quantiles``)."""

    def run_episodes(self, scenario: Scenario, seeds: list[int]) -> list[dict | Exception]:
        """:meth:`run_episode` of each seed: its metrics, or the exception it raised."""
        out: list[dict | Exception] = []
        for seed in seeds:
            try:
                out.append(self.run_episode(scenario, int(seed)))
            except Exception as exc:  # noqa: BLE001 - one seed's failure is that cell's result
                out.append(exc)
        return out

    def check_loadable(self) -> None:
        """Load what the agent needs (a checkpoint's weights) once, so a file that cannot be used is one
        :class:`AgentSpecError` before any episode runs, not one failure per seed. Nothing to load by default."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class HeuristicEvalAgent(EvalAgent):
    kind = "heuristic"

    def __init__(self, policy: str, placement: str, spec: str | None = None):
        if policy not in POLICIES:
            raise AgentSpecError(f"unknown heuristic {policy!r}; valid: {', '.join(POLICIES)}")
        if placement not in PLACEMENTS:
            raise AgentSpecError(f"unknown placement {placement!r}; valid: {', '.join(PLACEMENTS)}")
        super().__init__(spec or f"{policy}+{placement}", f"{policy}+{placement}")
        self.policy, self.placement = policy, placement

    def identity(self) -> dict:
        return {"kind": self.kind, "policy": self.policy, "placement": self.placement}

    def applies_to(self, scenario: Scenario) -> str | None:
        if scenario.env_id == "gpusched/DAGSchedule-v1":  # no job queue: the dag-* agents schedule DAGs
            return "a cluster scheduler; DAG scenarios are ranked with the dag-* agents"
        return None

    def run_episode(self, scenario: Scenario, seed: int) -> dict:
        return run_scheduler_episode(make_policy(self.policy, self.placement), scenario, seed)


class RandomEvalAgent(EvalAgent):
    """``random``: a seeded uniform choice among the valid actions (``obs["action_mask"]``), acting through the
    scenario's env: the floor a learned agent is measured against. The episode seed seeds the choice too."""

    kind = "random"
    ENVS = ("gpusched/JobSelect-v1", "gpusched/WorkerPlacement-v1", "gpusched/DelayTuning-v1")

    def __init__(self, spec: str = "random"):
        super().__init__(spec, "random")

    def identity(self) -> dict:
        return {"kind": self.kind, "rule": "uniform over the action mask, numpy default_rng(seed)"}

    def applies_to(self, scenario: Scenario) -> str | None:
        if scenario.env_id not in self.ENVS:
            return f"runs on {', '.join(self.ENVS)}"
        return None

    def run_episode(self, scenario: Scenario, seed: int) -> dict:
        env = scenario.make_env()
        try:
            return run_act_episode(masked_random(seed), env, seed)
        finally:
            env.close()


def _env_id_of(env) -> str | None:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else None


def _shapes(space) -> dict:
    return {k: tuple(s.shape) for k, s in getattr(space, "spaces", {}).items()}


_LOADED: dict[str, object] = {}
_SPACES: dict[str, tuple] = {}


def _spaces(key: tuple, make) -> tuple:
    """``(observation_space, action_space)`` of the env ``make()`` builds, built once per ``key`` (plain data that
    names the env and every kwarg it is built with): the layout checks of several checkpoints on one scenario,
    or of one checkpoint on several scenarios, build each distinct env once."""
    k = canonical_json(list(key))
    if k not in _SPACES:
        env = make()
        try:
            _SPACES[k] = (env.observation_space, env.action_space)
        finally:
            env.close()
    return _SPACES[k]


def _gym_ids() -> tuple[str, ...]:
    return tuple(ENTRY_POINTS)


class CheckpointEvalAgent(EvalAgent):
    """A trained policy folder; runs on scenarios with its env id and observation layout (its ``obs_mode``,
    ``window`` and ``placement`` replace the scenario's)."""

    kind = "checkpoint"
    batches_seeds = True

    def __init__(self, path: str | Path, spec: str | None = None):
        path = Path(path)
        folder = path if path.is_dir() else path.parent
        meta_path = folder / "meta.json"
        if not meta_path.is_file() or not (folder / "model.pt").is_file():
            raise AgentSpecError(f"{folder}: not a checkpoint (expected model.pt + meta.json)")
        from gpusched_lab.agents.meta import CheckpointError, read_meta, validate_meta

        try:
            self.meta = read_meta(folder)
            # a policy of one of the package's gym envs: every field checked (no file paths, types) before anything
            # is built; a "module:Env" id is refused; other kinds of checkpoint (an HMARL actor of the PettingZoo
            # env, an interference model) run on no scenario
            env_id = self.meta.get("env_id")
            self._other_kind = None
            if not isinstance(env_id, str) or (env_id not in _gym_ids() and ":" not in env_id):
                self._other_kind = f"a {self.meta['algorithm']} checkpoint, not a policy of a gym env"
            else:
                validate_meta(self.meta, str(meta_path))
        except CheckpointError as exc:
            raise AgentSpecError(str(exc)) from None
        self.folder = folder.resolve()
        super().__init__(spec or str(path), f"ckpt:{folder.name}")
        self._applies: dict[str, str | None] = {}

    def env_overrides(self) -> dict:
        kwargs = self.meta.get("env_kwargs") or {}
        out = {k: kwargs[k] for k in LAYOUT_KWARGS if k in kwargs}
        out["obs_mode"] = self.meta["obs_mode"]
        return out

    def identity(self) -> dict:
        return {"kind": self.kind, "files": file_digest(self.folder), "agents_code": _agents_code_digest()}

    def applies_to(self, scenario: Scenario) -> str | None:
        if self._other_kind is not None:
            return self._other_kind
        key = scenario.content_hash()
        if key not in self._applies:
            self._applies[key] = self._check(scenario)
        return self._applies[key]

    def _check(self, scenario: Scenario) -> str | None:
        if scenario.env_id != self.meta["env_id"]:
            return f"trained on {self.meta['env_id']}"
        overrides = self.env_overrides()
        env_obs, env_act = _spaces(
            ("scenario", scenario.content_hash(), overrides), lambda: scenario.make_env(**overrides)
        )
        kwargs = {**(self.meta.get("env_kwargs") or {}), **overrides}
        trained_obs, trained_act = _spaces(
            ("env", self.meta["env_id"], kwargs), lambda: gym.make(self.meta["env_id"], **kwargs)
        )
        encoder = (self.meta.get("network") or {}).get("encoder")
        if encoder == "gnn":  # size-agnostic: any cluster and window with the same feature columns
            from gpusched_lab.agents.nets.config import layout_mismatch

            reason = layout_mismatch(
                encoder, trained_obs, env_obs, fixed_actions=self.meta.get("policy") == "logits"
            )
            return None if reason is None else f"observation layout differs ({reason})"
        if _shapes(trained_obs) != _shapes(env_obs) or trained_act != env_act:
            return "observation layout differs (another cluster size or window)"
        return None

    def check_loadable(self) -> None:
        from gpusched_lab.agents.checkpoint import CheckpointError

        try:
            self.policy()
        except (CheckpointError, OSError) as exc:
            raise AgentSpecError(str(exc)) from None

    def policy(self):
        key = str(self.folder)
        if key not in _LOADED:
            import torch
            from gpusched_lab import agents

            # one small forward pass per decision: a single thread is several times faster than two threads
            # fighting on a busy CPU, and the grid parallelises across processes instead
            torch.set_num_threads(EVAL_TORCH_THREADS)
            _LOADED[key] = agents.load(self.folder)
        return _LOADED[key]

    def run_episode(self, scenario: Scenario, seed: int) -> dict:
        reason = self.applies_to(scenario)
        if reason is not None:
            raise AgentSpecError(f"{self.name} does not run on {scenario.name}: {reason}")
        policy = self.policy()
        env = scenario.make_env(**self.env_overrides())
        try:
            return run_act_episode(policy.act, env, seed)
        finally:
            env.close()

    def run_episodes(self, scenario: Scenario, seeds: list[int]) -> list[dict | Exception]:
        """:meth:`run_episode` of every seed, the seeds' envs stepped together with one batched forward pass per
        step (:meth:`agents.checkpoint.Agent.act_many`, which gives the actions :meth:`act` gives): each seed's
        metrics, or the exception its episode raised. An error of the batched pass itself is raised."""
        reason = self.applies_to(scenario)
        if reason is not None:
            raise AgentSpecError(f"{self.name} does not run on {scenario.name}: {reason}")
        policy = self.policy()
        envs = [scenario.make_env(**self.env_overrides()) for _ in seeds]
        try:
            return episodes.run_act_episodes(policy.act_many, envs, [int(s) for s in seeds])
        finally:
            for env in envs:
                env.close()


def _read_json(path: Path) -> dict | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def is_metaplace_checkpoint(path: str | Path) -> bool:
    """A checkpoint written by MetaPlace's trainer (:func:`agents.methods.metaplace.agent.save_meta`: ``meta_rl`` in its meta)."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    meta = _read_json(folder / "meta.json")
    return meta is not None and isinstance(meta.get("meta_rl"), dict)


class MetaPlaceEvalAgent(CheckpointEvalAgent):
    """A MetaPlace checkpoint run as ``gpusched adapt`` reports it at K = 0: the greedy policy of
    :func:`agents.methods.metaplace.agent.rollout`, its GNN logits minus ``w`` × the performance model's cautious score (``Δ + c σ``,
    ``c`` the checkpoint's ``caution``), not the GNN logits alone that ``agents.load`` gives (that score reads the
    env's simulator, so it cannot be a function of the observation). The performance model only scores here: it
    learns nothing from the leaderboard's episodes."""

    kind = "metaplace"
    batches_seeds = False  # its rollout scores each step with the performance model, one env at a time
    run_episodes = EvalAgent.run_episodes

    def __init__(self, path: str | Path, spec: str | None = None):
        super().__init__(path, spec)
        from gpusched_lab.agents.methods.metaplace.config import PERF_FILE

        if not (self.folder / PERF_FILE).is_file():
            raise AgentSpecError(
                f"{self.folder}: a MetaPlace checkpoint without {PERF_FILE} (its performance model, which scores "
                "every placement); copy the whole checkpoint folder"
            )
        self.name = f"{self.meta.get('algorithm', 'metaplace')}:{self.folder.name}"
        self.caution = self._caution()

    def _caution(self) -> float:
        from gpusched_lab.agents.methods.metaplace.config import MetaArgs

        args = self.meta.get("args") or {}
        return float(
            args.get("caution", MetaArgs.caution)
        )  # the default adapt uses when the meta predates it

    def identity(self) -> dict:
        return {**super().identity(), "caution": self.caution}

    def policy(self):
        """(placement policy, performance model), loaded once per process with :func:`agents.methods.metaplace.agent.load_meta`
        (every file checked against its sha256, ``torch.load(weights_only=True)``)."""
        key = f"metaplace:{self.folder}"
        if key not in _LOADED:
            import torch
            from gpusched_lab.agents.methods.metaplace.agent import load_meta

            torch.set_num_threads(EVAL_TORCH_THREADS)
            try:
                policy, perf, _ = load_meta(self.folder)
            except (OSError, ValueError, RuntimeError) as exc:
                raise AgentSpecError(f"{self.folder}: cannot load the MetaPlace checkpoint ({exc})") from None
            policy.eval()
            _LOADED[key] = (policy, perf)
        return _LOADED[key]

    def run_episode(self, scenario: Scenario, seed: int) -> dict:
        reason = self.applies_to(scenario)
        if reason is not None:
            raise AgentSpecError(f"{self.name} does not run on {scenario.name}: {reason}")
        policy, perf = self.policy()
        return run_metaplace_episode(
            policy, perf, scenario.make_env(**self.env_overrides()), seed, self.caution
        )


def run_metaplace_episode(policy, perf, env, seed: int, caution: float) -> dict:
    """One greedy episode of :func:`agents.methods.metaplace.agent.rollout` (no learning: ``observe=False``) in ``env`` (closed
    after); the metrics :func:`run_act_episode` returns (``episode_return``, ``steps``, ``invalid_actions`` counted
    by a wrapper, since the rollout keeps only the decisions that had a choice)."""
    from gpusched_lab.agents.methods.metaplace.agent import rollout

    class _Tally(gym.Wrapper):
        def __init__(self, inner):
            super().__init__(inner)
            self.total, self.steps, self.invalid = 0.0, 0, 0

        def step(self, action):
            out = self.env.step(action)
            self.total += float(out[1])
            self.steps += 1
            self.invalid += int(bool(out[4].get("invalid_action")))
            return out

    tally = _Tally(env)
    try:
        ep = rollout(policy, tally, int(seed), greedy=True, perf=perf, observe=False, caution=caution)
        metrics = dict(ep.metrics)
        metrics.update(episode_return=tally.total, steps=tally.steps, invalid_actions=tally.invalid)
        return finish_metrics(metrics, getattr(env.unwrapped, "sim", None))
    finally:
        env.close()


@lru_cache(maxsize=1)
def _agents_code_digest() -> str:
    """Digest of the learning agents' code: every ``.py`` file of ``agents/`` and its sub-packages (``nets/``,
    ``algos/``, ``methods/...``), so an edit anywhere in them invalidates cached checkpoint cells."""
    folder = repo_root() / "agents"
    return python_sources_digest(folder)[:12] if folder.is_dir() else hashlib.sha256().hexdigest()[:12]


def import_callable(spec: str):
    """``package.module:attr.attr`` or ``path/to/file.py:attr``; the current directory is importable."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise AgentSpecError(f"{spec!r}: expected module:callable")
    if target.endswith(".py") or os.sep in target:
        path = Path(target).resolve()
        if not path.is_file():
            raise AgentSpecError(f"{spec!r}: no file {path}")
        mod_name = f"_gpusched_user_{path.stem}_{sha256_hex(str(path))[:8]}"
        module = sys.modules.get(mod_name)
        if module is None:
            mod_spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[mod_name] = module
            mod_spec.loader.exec_module(module)
    else:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise AgentSpecError(f"{spec!r}: cannot import {target!r} ({exc})") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AgentSpecError(f"{spec!r}: {target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise AgentSpecError(f"{spec!r}: {attr} is not callable")
    return obj, module


class UserEvalAgent(EvalAgent):
    """``module:callable`` whose result has ``act(obs)`` (run in the env) or ``schedule(sim)`` (run on the
    simulator)."""

    kind = "user"

    def __init__(self, spec: str):
        self.factory, module = import_callable(spec)
        super().__init__(spec, spec)
        sample = self.factory()
        if hasattr(sample, "act"):
            self.mode = "act"
        elif hasattr(sample, "schedule"):
            self.mode = "schedule"
        else:
            raise AgentSpecError(f"{spec!r}: {type(sample).__name__} has neither act(obs) nor schedule(sim)")
        env_ids = getattr(sample, "env_ids", None)
        self.env_ids = (env_ids,) if isinstance(env_ids, str) else (tuple(env_ids) if env_ids else None)
        self.obs_mode = getattr(sample, "obs_mode", None)
        name = getattr(sample, "name", None)
        if isinstance(name, str) and name and name not in ("policy", "queue", "preemptive"):
            self.name = name
        source = getattr(module, "__file__", None)
        self._source = file_digest(Path(source)) if source and Path(source).is_file() else ""

    def identity(self) -> dict:
        return {"kind": self.kind, "spec": self.spec, "source": self._source}

    def applies_to(self, scenario: Scenario) -> str | None:
        if self.env_ids is not None and scenario.env_id not in self.env_ids:
            return f"runs on {', '.join(self.env_ids)}"
        return None

    def run_episode(self, scenario: Scenario, seed: int) -> dict:
        agent = self.factory()
        if self.mode == "schedule":
            return run_scheduler_episode(agent, scenario, seed)
        env = scenario.make_env(**({"obs_mode": self.obs_mode} if self.obs_mode else {}))
        try:
            return run_act_episode(agent.act, env, seed, getattr(agent, "reset", None))
        finally:
            env.close()


# ---------------------------------------------------------------------------------------------- resolution
# MetaPlace's multi-task baseline is compared against it in ``gpusched adapt``, not ranked on its own (the DAG plan
# generators are parts of the dag-* agents: their module registers them)
registry.register_component_checkpoints("multitask_gnn")


def shipped_checkpoints(folder: str | Path | None = None) -> list[str]:
    """Checkpoint folders under ``folder`` (default: the repository's ``checkpoints/``), sorted: every
    ``*/meta.json`` beside a ``model.pt``, except the parts of other agents
    (:func:`~gpusched_lab.evaluate.registry.component_checkpoints`)."""
    folder = Path(folder) if folder is not None else default_checkpoint_dir()
    if not folder.is_dir():
        return []
    parts = registry.component_checkpoints()
    found = [
        p.parent
        for p in folder.glob("*/meta.json")
        if (p.parent / "model.pt").is_file() and p.parent.name not in parts
    ]
    return [str(p) for p in sorted(found)]


def expand_agent_specs(specs: list[str] | str | None, checkpoints: str | Path | None = None) -> list[str]:
    """Comma lists and the groups ``all`` (default), ``heuristics`` and ``checkpoints`` → agent specs."""
    if specs is None:
        specs = ["all"]
    if isinstance(specs, str):
        specs = [specs]
    out: list[str] = []
    for item in specs:
        for spec in (s.strip() for s in item.split(",")):
            if not spec:
                continue
            if spec in ("all", "heuristics"):
                out.extend(HEURISTICS)
                out.append("random")
                out.extend(registry.group_agents())  # DAG heuristics and searchers, per-agent heuristics
            if spec in ("all", "checkpoints"):
                out.extend(shipped_checkpoints(checkpoints))
            if spec not in ("all", "heuristics", "checkpoints"):
                out.append(spec)
    return list(dict.fromkeys(out))


_RESOLVED: dict[str, EvalAgent] = {}


def resolve_agent(spec: str) -> EvalAgent:
    """An :class:`EvalAgent` from a spec (see the module docstring); cached per process."""
    spec = spec.strip()
    if spec in _RESOLVED:
        return _RESOLVED[spec]
    policy, plus, placement = spec.partition("+")
    kind = registry.kind_of(spec)  # the bench modules' kinds: dag-*, marl-* and HMARL checkpoints
    if kind is not None:
        agent: EvalAgent = kind.factory(spec)
    elif spec == "random":
        agent = RandomEvalAgent(spec)
    elif policy in POLICIES and ":" not in spec:
        agent = HeuristicEvalAgent(policy, placement if plus else HEURISTICS.get(policy, "closest"), spec)
    elif Path(spec).exists() and is_metaplace_checkpoint(spec):  # logits − w · model score
        agent = MetaPlaceEvalAgent(spec)
    elif Path(spec).exists():
        agent = CheckpointEvalAgent(spec)
    elif ":" in spec:
        agent = UserEvalAgent(spec)
    else:
        raise AgentSpecError(
            f"unknown agent {spec!r}: not a heuristic ({', '.join(POLICIES)}, or POLICY+PLACEMENT), an existing "
            "checkpoint path, nor module:callable"
        )
    _RESOLVED[spec] = agent
    return agent
