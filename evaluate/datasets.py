"""``gpusched dataset``: episodes of any leaderboard agent on any scenario, recorded as a Minari dataset for
offline RL (behaviour cloning, CQL: ``gpusched train bc|cql --dataset NAME``).

A dataset is one agent on one scenario over a list of seeds, each seed one episode of the scenario's env (the same
``env.reset(seed=seed)`` the leaderboard uses). Every step stores the observation in the env's observation mode
(``flat``, ``graph`` or ``image``: Dict spaces of Boxes, the action mask included as ``obs["action_mask"]``), the
action, reward, termination and truncation, and the env's info (its fixed schema: ``invalid_action``,
``forced_action``, ``episode_done`` and the episode ``metrics``, which hold the final values at the last step;
a nested key is stored flat as ``metrics/avg_jct``).
Each episode's metadata holds its seed and the leaderboard's metrics of the episode (average JCT, quantiles, ...).
The dataset's metadata (``gpusched`` key) names the env id and kwargs, the agent spec and name, the seeds, the
information class, the package version and the command that wrote it. Storage: Minari's ``parquet`` format (the
``arrow`` columns, compressed), in ``--root`` or ``$MINARI_DATASETS_PATH`` (default ``~/.minari/datasets``); a
dataset is written locally only, never downloaded.

How each agent acts step by step in the env:

- a heuristic (``srtf``, ``las``, ``tiresias+closest``, ...) on ``JobSelect-v1``: the scheduler picks the job to
  start or preempt (:class:`gpusched_envs.envs.adapters.HeuristicAgent`), the env's placer (set to the heuristic's
  placement) places it; a clairvoyant heuristic (SRTF, SJF) records a clairvoyant env (``information``), so its
  observations show what it saw, and a preemptive one (SRTF, LAS, Tiresias, ...) an env that lets it preempt
  (:data:`PREEMPTIVE` unless ``env_kwargs`` say otherwise);
- ``random``, a checkpoint (its own observation layout: ``obs_mode``, ``preemption``, ...), a user's
  ``module:callable`` (``act(obs)``, or ``schedule(sim)`` on ``JobSelect-v1`` like a heuristic);
- a DAG agent (``dag-heft``, ``dag-cpsat``, ``dag-worl-rtgs``, ...) on ``DAGSchedule-v1``: it plans the seed's DAG
  as ``gpusched dag-bench`` does, then each step places the env's current task on the plan's GPU. The env lists
  the tasks in its own order (HEFT rank), so the episode's makespan can differ from the plan's; the plan's own
  makespan is in the episode metadata (``plan_makespan``). ``dag-cpsat`` records only the seeds whose DAG CP-SAT
  solves to proven optimality (at most 30 tasks, 10 s); the others are listed in the metadata (``skipped``).

Multi-agent scenarios (PettingZoo) and MetaPlace checkpoints (their greedy rollout reads the simulator) are not
recorded. A dataset is written into a temporary folder beside the target and renamed at the end, so an error, a
full disk or an interrupt leaves no half-written dataset.

``--recipe standard`` records the recipe set: every ``JobSelect-v1`` scenario of the ``standard`` suite with SRTF
(clairvoyant), LAS and Tiresias (non-clairvoyant), all with preemption (:data:`PREEMPTIVE`: the shipped preemptive
checkpoints' setting, 15-minute scheduling rounds and lease); every cluster scenario with the best shipped
checkpoint of its env in the checkpoint's own setting; and every DAG scenario with CP-SAT (where it proves
optimality) and WORL-RTGS.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from gpusched_lab.evaluate.agents import (
    AgentSpecError,
    CheckpointEvalAgent,
    EvalAgent,
    HeuristicEvalAgent,
    MetaPlaceEvalAgent,
    RandomEvalAgent,
    UserEvalAgent,
    default_checkpoint_dir,
    resolve_agent,
)
from gpusched_lab.evaluate.episodes import finish_metrics, masked_random
from gpusched_lab.evaluate.scenarios import MARL_ENV_ID, Scenario, SuiteError, find_scenario, load_suite
from gpusched_lab.train.offline import (  # noqa: F401 - re-exported: the names datasets are read by
    ROOT_ENV,
    DatasetError,
    dataset_id,
    dataset_path,
    datasets_root,
)

from gpusched_envs.validation import Name, Seeds, Text, ValidationError

DATA_FORMAT = "parquet"
JOB_SELECT = "gpusched/JobSelect-v1"
DAG_ENV = "gpusched/DAGSchedule-v1"
DAG_CPSAT_MAX_TASKS = 30
RECIPES = ("standard",)
# the preemptive setting of the shipped preemptive checkpoints: scheduling rounds every 15 minutes and a 15-minute
# lease before a started job may be preempted again (no preempt-restart loops at one instant)
PREEMPTIVE = {"preemption": True, "decision_interval": 900.0, "min_run": 900.0}
RECIPE_HEURISTICS = (  # (agent spec, env kwargs): the experts of both information classes, preemptive
    ("srtf", {"information": "clairvoyant", **PREEMPTIVE}),
    ("las", dict(PREEMPTIVE)),
    ("tiresias", dict(PREEMPTIVE)),
)
# the best shipped checkpoint of each cluster env (by the quick suite's leaderboard), run in its own setting
RECIPE_CHECKPOINTS = {
    JOB_SELECT: "ppo_jobselect_gnn_clairvoyant",
    "gpusched/WorkerPlacement-v1": "ddqn_workerplacement_gnn",
    "gpusched/DelayTuning-v1": "ppo_delaytuning_mlp",
}
RECIPE_DAG_AGENTS = ("dag-cpsat", "dag-worl-rtgs")
UNFINISHED_FACTOR = 20
RECIPE_SEEDS = (0, 1, 2)
"""Seeds of each recipe dataset (the held-out seeds of ``docs/datasets.md`` start at 100)."""


class NoEpisodesError(DatasetError):
    """The agent left every seed out (CP-SAT proved no optimum): nothing to record."""


# ---------------------------------------------------------------------------------------------- names and places
def package_version() -> str:
    try:
        return version("gpusched-envs")
    except PackageNotFoundError:  # pragma: no cover - a source tree without an install
        return "0"


# ---------------------------------------------------------------------------------------------- how agents act
@dataclass
class Recorder:
    """How one agent acts step by step in one scenario's env: the env (the scenario's kwargs with ``overrides``)
    and, per episode, ``act(obs) -> action``."""

    agent: EvalAgent
    scenario: Scenario
    overrides: dict = field(default_factory=dict)

    @property
    def env_kwargs(self) -> dict:
        return {**self.scenario.env_kwargs, **self.overrides}

    def make_env(self):
        return self.scenario.make_env(**self.overrides)

    def actor(self, env, seed: int):
        """``(act, extra)``: the episode's policy (called after ``env.reset``) and metadata of the episode
        (``{"skipped": reason}`` to leave the seed out)."""
        agent = self.agent
        if isinstance(agent, RandomEvalAgent):
            return masked_random(seed), {}
        if isinstance(agent, CheckpointEvalAgent):
            return agent.policy().act, {}
        if isinstance(agent, HeuristicEvalAgent):
            from gpusched_envs.policies import make_policy

            return _scheduler_actor(make_policy(agent.policy, agent.placement), env), {}
        if isinstance(agent, UserEvalAgent):
            made = agent.factory()
            if agent.mode == "schedule":
                return _scheduler_actor(made, env), {}
            if hasattr(made, "reset"):
                made.reset()
            return made.act, {}
        if getattr(agent, "kind", None) == "dag":
            return _dag_actor(agent.agent, env, seed)
        raise AgentSpecError(f"{agent.name}: cannot be recorded step by step")


def _scheduler_actor(policy, env):
    from gpusched_envs.envs.adapters import HeuristicAgent

    expert = HeuristicAgent(policy)
    return lambda obs: expert(env)


def _dag_actor(name: str, env, seed: int):
    """The plan of DAG agent ``name`` for the env's current DAG (after reset), as an ``act`` placing each task on
    the plan's GPU."""
    from gpusched_lab.evaluate.dag_bench import Instance, scenario_args

    u = env.unwrapped
    inst = Instance("dataset", 0, u.dag, u, {**scenario_args(env), "cpsat_max_tasks": DAG_CPSAT_MAX_TASKS})
    extra: dict = {}
    plan = _dag_plan(name, inst, int(seed), extra)
    if plan is None:
        return None, extra
    assignment = np.asarray(plan[0], dtype=np.int64)
    from gpusched_envs.sim.dag_eval import evaluate_plan

    extra["plan_makespan"] = float(
        evaluate_plan(inst.dag, inst.speed, inst.bandwidth, *plan, gpu_types=inst.gpu_types)
    )

    def act(obs) -> int:
        return int(assignment[u.current])

    return act, extra


def _dag_plan(name: str, inst, seed: int, extra: dict):
    """``(assignment, priority)`` of DAG agent ``name`` (``dag-bench``'s settings and code), or None
    (``extra["skipped"]`` says why): CP-SAT only where it proves optimality."""
    from gpusched_lab.evaluate.dag_bench import AGENTS, agent_plan

    if name not in AGENTS or name == "lower-bound":
        raise AgentSpecError(f"dag-{name}: cannot be recorded")
    if name == "cpsat" and inst.dag.num_tasks > DAG_CPSAT_MAX_TASKS:
        extra["skipped"] = f"{inst.dag.num_tasks} tasks (CP-SAT runs on at most {DAG_CPSAT_MAX_TASKS})"
        return None
    record, plan = agent_plan(name, inst, seed)
    if name == "cpsat" and not record["optimal"]:
        extra["skipped"] = "CP-SAT did not prove optimality in 10 s"
        return None
    return plan


def recorder_for(
    agent_spec: str, scenario: Scenario, env_kwargs: dict | None = None, obs_mode: str | None = None
) -> Recorder:
    """The :class:`Recorder` of an agent spec on a scenario; ``env_kwargs`` replace the scenario's (a checkpoint's
    layout kwargs replace both). One :class:`AgentSpecError` / :class:`DatasetError` line when the agent cannot be
    recorded there."""
    if scenario.env_id == MARL_ENV_ID:
        raise DatasetError(f"scenario {scenario.name}: a multi-agent env; datasets record single-agent envs")
    agent = resolve_agent(agent_spec)
    overrides = dict(env_kwargs or {})
    if obs_mode is not None:
        overrides["obs_mode"] = obs_mode
    if isinstance(agent, MetaPlaceEvalAgent):
        raise DatasetError(
            f"{agent.name}: a MetaPlace checkpoint (its rollout scores placements on the simulator); record "
            "another agent"
        )
    if isinstance(agent, CheckpointEvalAgent):
        reason = agent.applies_to(scenario)
        if reason is not None:
            raise DatasetError(f"{agent.name} does not run on {scenario.name}: {reason}")
        agent.check_loadable()
        layout = agent.env_overrides()
        clash = sorted(k for k in layout if k in overrides and overrides[k] != layout[k])
        if clash:
            raise DatasetError(
                f"{agent.name} runs in its own setting: {', '.join(f'{k}={layout[k]!r}' for k in clash)} "
                "(drop those env kwargs)"
            )
        overrides.update(layout)
    elif isinstance(agent, HeuristicEvalAgent) or (
        isinstance(agent, UserEvalAgent) and agent.mode == "schedule"
    ):
        if scenario.env_id != JOB_SELECT:
            raise DatasetError(
                f"{agent.name}: a scheduler is recorded on {JOB_SELECT} (it picks the job to start or preempt); "
                f"scenario {scenario.name} is {scenario.env_id}"
            )
        if isinstance(agent, HeuristicEvalAgent):
            from gpusched_envs.policies import PREEMPTIVE_POLICIES, make_policy
            from gpusched_envs.policies.schedulers import is_clairvoyant

            overrides.setdefault("placement", agent.placement)
            if agent.policy in PREEMPTIVE_POLICIES and overrides.get("preemption", True) is not False:
                # it preempts: the env must let it (the recipe's setting, unless the env kwargs say otherwise)
                for key, value in PREEMPTIVE.items():
                    overrides.setdefault(key, value)
            if is_clairvoyant(make_policy(agent.policy, agent.placement)):
                if overrides.setdefault("information", "clairvoyant") != "clairvoyant":
                    raise DatasetError(
                        f"{agent.name} is clairvoyant (it reads traced durations): record it with "
                        "information=clairvoyant"
                    )
    else:
        reason = agent.applies_to(scenario)
        if reason is not None:
            raise DatasetError(f"{agent.name} does not run on {scenario.name}: {reason}")
        if getattr(agent, "kind", None) == "dag" and agent.agent == "lower-bound":
            raise DatasetError("dag-lower-bound is a bound, not an agent")
        if isinstance(agent, UserEvalAgent) and agent.obs_mode:
            overrides.setdefault("obs_mode", agent.obs_mode)
    rec = Recorder(agent, scenario, overrides)
    try:
        env = rec.make_env()
    except SuiteError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise DatasetError(f"{scenario.env_id} with env kwargs {json.dumps(rec.env_kwargs)}: {exc}") from None
    env.close()
    return rec


# ---------------------------------------------------------------------------------------------- one episode
def _leaves(info: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in info.items():
        if isinstance(v, dict):
            out.update(_leaves(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _schema(info: dict) -> dict:
    return {k: np.asarray(v).dtype.str for k, v in _leaves(info).items()}


def _stack_infos(infos: list[dict]) -> dict:
    """A list of per-step infos (same keys) as Minari's info columns: one flat dict (a nested key is
    ``outer/inner``: ``metrics/avg_jct``; Minari's parquet reader does not rebuild nested info dicts) of lists of
    Python scalars, or arrays for array-valued entries."""
    flat = [_leaves(i) for i in infos]
    out: dict = {}
    for key in flat[0]:
        arr = np.asarray([f[key] for f in flat])
        out[key] = arr if arr.ndim > 1 else arr.tolist()
    return out


def record_episode(recorder: Recorder, seed: int, env=None, max_steps: int | None = None, keep: bool = True):
    """One episode: ``(EpisodeBuffer | None, episode metadata)``; the metadata holds the seed, the leaderboard's
    metrics of the episode and the actor's extras (None and ``skipped`` when the agent leaves the seed out).
    ``max_steps``: stop there (``unfinished`` in the metadata, no buffer); ``keep=False``: metrics only."""
    from minari.data_collector.episode_buffer import EpisodeBuffer

    own = env is None
    env = env if env is not None else recorder.make_env()
    try:
        obs, info = env.reset(seed=int(seed))
        act, extra = recorder.actor(env, int(seed))
        meta = {"seed": int(seed), **extra}
        if act is None:
            return None, meta
        schema = _schema(info)
        observations, actions, rewards, terms, truncs, infos = [obs], [], [], [], [], [info]
        total, invalid = 0.0, 0
        while True:
            action = act(obs)
            obs, reward, terminated, truncated, info = env.step(action)
            if _schema(info) != schema:
                raise DatasetError(
                    f"{recorder.scenario.env_id}: the info keys or dtypes changed at step {len(actions) + 1} "
                    "(Minari needs one info schema per episode)"
                )
            observations.append(obs)
            actions.append(int(action))
            rewards.append(float(reward))
            terms.append(bool(terminated))
            truncs.append(bool(truncated))
            infos.append(info)
            total += float(reward)
            invalid += int(bool(info.get("invalid_action")))
            if terminated or truncated:
                break
            if max_steps is not None and len(actions) >= max_steps:
                meta["unfinished"] = f"stopped after {max_steps:,} steps"
                return None, meta
            if not keep:
                observations, infos = observations[-1:], infos[-1:]
        metrics = dict(info.get("metrics") or {})
        metrics.update(episode_return=total, steps=len(actions), invalid_actions=invalid)
        meta["metrics"] = finish_metrics(metrics, getattr(env.unwrapped, "sim", None))
        if not keep:
            return None, meta
        buffer = EpisodeBuffer(
            seed=int(seed),
            observations={k: np.stack([o[k] for o in observations]) for k in observations[0]},
            actions=np.asarray(actions, dtype=np.int64),
            rewards=rewards,
            terminations=terms,
            truncations=truncs,
            infos=_stack_infos(infos),
        )
        return buffer, meta
    finally:
        if own:
            env.close()


# ---------------------------------------------------------------------------------------------- whole datasets
def _jsonable(value):
    return json.loads(json.dumps(value, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def record(
    name: str,
    agent_spec: str,
    scenario: Scenario,
    seeds,
    *,
    root: str | Path | None = None,
    force: bool = False,
    env_kwargs: dict | None = None,
    obs_mode: str | None = None,
    command: str = "",
    progress=None,
) -> Path:
    """Record ``agent_spec`` on ``scenario`` with each of ``seeds`` into the dataset ``name`` under ``root``;
    returns the dataset's folder. ``progress(done, total, steps)`` is called after each episode.

    Refuses an existing dataset unless ``force``. Writes into a temporary folder beside the target and renames it
    at the end: on any error nothing is left behind (an existing dataset replaced with ``force`` stays intact until
    the new one is complete)."""
    did = dataset_id(name)
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise DatasetError("no seeds to record")
    base = datasets_root(root)
    target = base / did
    if target.exists() and not force:
        raise DatasetError(f"dataset {did} already exists at {target} (--force replaces it)")
    recorder = recorder_for(agent_spec, scenario, env_kwargs, obs_mode)
    tmp = base / f".{did}.partial-{uuid.uuid4().hex[:8]}"
    try:
        base.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        dataset = _write(tmp, did, recorder, seeds, command, progress)
        del dataset
        if target.exists():  # --force: the old dataset goes only once the new one is complete
            old = base / f".{did}.old-{uuid.uuid4().hex[:8]}"
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DatasetError(f"dataset {did}: cannot write {base} ({exc.strerror or exc})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _write(folder: Path, did: str, recorder: Recorder, seeds: list[int], command: str, progress):
    from minari.dataset.minari_dataset import MinariDataset
    from minari.dataset.minari_storage import MinariStorage

    env = recorder.make_env()
    try:
        storage = MinariStorage.new(
            folder / "data",
            observation_space=env.observation_space,
            action_space=env.action_space,
            env_spec=env.spec,
            data_format=DATA_FORMAT,
            jpeg_encoding=False,  # image observations stay exact
        )
        recorded, skipped, steps = [], [], 0
        for i, seed in enumerate(seeds):
            buffer, meta = record_episode(recorder, seed, env)
            if buffer is None:
                skipped.append({"seed": seed, "reason": meta.get("skipped", "")})
            else:
                episode = len(recorded)
                storage.update_episodes([buffer.__class__(**{**buffer.__dict__, "id": episode})])
                storage.update_episode_metadata([_jsonable(meta)], [episode])
                recorded.append(seed)
                steps += len(buffer.rewards)
            if progress is not None:
                progress(i + 1, len(seeds), steps)
        if not recorded:
            reasons = "; ".join(f"seed {s['seed']}: {s['reason']}" for s in skipped)
            raise NoEpisodesError(f"dataset {did}: no episode recorded ({reasons})")
        agent = recorder.agent
        info_class = recorder.env_kwargs.get("information")
        if info_class is None and recorder.scenario.env_id != DAG_ENV:
            info_class = getattr(env.unwrapped, "information", None)
        storage.update_metadata(
            {
                "dataset_id": did,
                "algorithm_name": agent.name,
                "author": {"gpusched"},
                "code_permalink": "https://github.com/gpusched/gpusched-envs",
                "minari_version": _minari_version(),
                "description": f"{agent.name} on {recorder.scenario.name} ({recorder.scenario.env_id}), "
                f"{len(recorded)} episodes",
                "gpusched": _jsonable(
                    {
                        "format": 1,
                        "env_id": recorder.scenario.env_id,
                        "env_kwargs": recorder.env_kwargs,
                        "scenario": recorder.scenario.name,
                        "agent": {"spec": agent.spec, "name": agent.name, "kind": agent.kind},
                        "seeds": recorded,
                        "skipped": skipped,
                        "information": info_class,
                        "obs_mode": recorder.env_kwargs.get(
                            "obs_mode", getattr(env.unwrapped, "obs_mode", None)
                        ),
                        "package_version": package_version(),
                        "command": command,
                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                ),
            }
        )
        return MinariDataset(folder / "data")
    finally:
        env.close()


def _minari_version() -> str:
    try:
        return version("minari")
    except PackageNotFoundError:  # pragma: no cover
        return "0"


def load(name: str, root: str | Path | None = None):
    """The :class:`minari.MinariDataset` of ``name`` under ``root`` (or ``$MINARI_DATASETS_PATH``); one
    :class:`DatasetError` line when it is absent or unreadable."""
    from gpusched_lab.train.offline import load_dataset

    return load_dataset(name, root, where="--name")


def score(name: str, checkpoints: list[str], seeds, root: str | Path | None = None, progress=None) -> dict:
    """Each checkpoint against the agent that recorded dataset ``name``, on held-out ``seeds`` (none of the
    dataset's): every policy acts in the dataset's env (its env id and kwargs) through :func:`record_episode`, so
    the expert runs exactly as it did when recording. Per policy: mean average JCT with a 95% bootstrap interval
    over seeds and, for the checkpoints, the paired relative change against the expert (seeds resampled together,
    :func:`gpusched_lab.evaluate.stats.paired_relative_change`)."""
    from gpusched_lab.evaluate.stats import mean_ci, paired_relative_change

    meta = load(name, root).storage.metadata.get("gpusched") or {}
    if "env_id" not in meta:
        raise DatasetError(
            f"dataset {dataset_id(name)}: not written by `gpusched dataset` (no gpusched metadata)"
        )
    seeds = [int(s) for s in seeds]
    overlap = sorted(set(seeds).intersection(meta.get("seeds") or []))
    if overlap:
        raise DatasetError(
            f"--seeds {', '.join(map(str, overlap[:5]))} are in dataset {dataset_id(name)}; score on held-out seeds"
        )
    scenario = Scenario(
        name=meta.get("scenario", meta["env_id"]), env_id=meta["env_id"], env_kwargs=meta["env_kwargs"]
    )
    key = "makespan" if meta["env_id"] == DAG_ENV else "avg_jct"
    specs = [meta["agent"]["spec"], *checkpoints]
    rows, base, cap = [], None, {}
    total = len(specs) * len(seeds)
    for spec in specs:
        rec = recorder_for(spec, scenario)
        values, unfinished = [], []
        for seed in seeds:
            # a policy that thrashes (preempting and restarting jobs) could run for ever: it is stopped at
            # UNFINISHED_FACTOR x the expert's steps on that seed and reported unfinished
            _, ep = record_episode(rec, seed, max_steps=cap.get(seed), keep=False)
            if "metrics" in ep:
                values.append(float(ep["metrics"][key]))
                cap.setdefault(seed, UNFINISHED_FACTOR * max(int(ep["metrics"].get("steps", 0)), 1000))
            else:
                values.append(float("nan"))
                unfinished.append(seed)
            if progress is not None:
                progress(len(rows) * len(seeds) + len(values), total, 0)
        m, lo, hi = mean_ci(values)
        row = {"agent": rec.agent.name, "spec": spec, "values": values, "mean": m, "low": lo, "high": hi}
        row["unfinished"] = unfinished
        if base is None:
            base = np.asarray(values)
            row["role"] = "expert (recorded the dataset)"
        else:
            x = np.asarray(values)
            ok = np.isfinite(x) & np.isfinite(base)  # pairs where both finished
            ch, clo, chi = paired_relative_change(x[ok], base[ok])
            row.update(change=ch, change_low=clo, change_high=chi)
        rows.append(row)
    return {"dataset": dataset_id(name), "metric": key, "seeds": seeds, "rows": rows}


def score_markdown(result: dict) -> str:
    """The Markdown table of :func:`score` (hours; the change against the expert in %)."""
    lines = [
        f"| policy | {result['metric'].replace('_', ' ')} (h), mean (95% CI) | vs expert, paired (95% CI) |",
        "|---|---|---|",
    ]
    for r in result["rows"]:
        cell = f"{r['mean'] / 3600:,.3f} ({r['low'] / 3600:,.3f}–{r['high'] / 3600:,.3f})"
        change = (
            "—"
            if "change" not in r
            else f"{r['change']:+.1%} ({r['change_low']:+.1%} to {r['change_high']:+.1%})"
        )
        if r.get("unfinished"):
            cell += f"; {len(r['unfinished'])} of {len(r['values'])} seeds unfinished (left out)"
        lines.append(f"| {r['agent']} | {cell} | {change} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- the recipe
def recipe_jobs(recipe: str, checkpoints: str | Path | None = None) -> list[tuple[str, str, Scenario, dict]]:
    """``(dataset name, agent spec, scenario, env kwargs)`` of every dataset of a recipe."""
    if recipe not in RECIPES:
        raise DatasetError(f"--recipe: unknown recipe {recipe!r}; known: {', '.join(RECIPES)}")
    suite = load_suite(recipe)
    folder = Path(checkpoints) if checkpoints is not None else default_checkpoint_dir()
    jobs = []
    for sc in suite.scenarios:
        stem = f"{recipe}-{sc.name.replace('.', '_')}"
        if sc.env_id == JOB_SELECT:
            for spec, kwargs in RECIPE_HEURISTICS:
                jobs.append((f"{stem}-{spec}-v0", spec, sc, dict(kwargs)))
        if sc.env_id in RECIPE_CHECKPOINTS:
            ckpt = RECIPE_CHECKPOINTS[sc.env_id]
            path = folder / ckpt
            # a checkpoint whose observation layout does not fit the scenario (an MLP sized for another cluster)
            # is left out of the recipe
            if (path / "meta.json").is_file() and resolve_agent(str(path)).applies_to(sc) is None:
                jobs.append((f"{stem}-{ckpt}-v0", str(path), sc, {}))
        if sc.env_id == DAG_ENV:
            for spec in RECIPE_DAG_AGENTS:
                if spec == "dag-cpsat" and _dag_tasks(sc) > DAG_CPSAT_MAX_TASKS:
                    continue  # beyond CP-SAT's reach: no proven optimum to record
                jobs.append((f"{stem}-{spec}-v0", spec, sc, {}))
    return jobs


def _dag_tasks(scenario: Scenario, seed: int = 0) -> int:
    env = scenario.make_env()
    try:
        env.reset(seed=seed)
        return int(env.unwrapped.dag.num_tasks)
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------- the command
def _fail(message: str) -> None:
    from rich.console import Console

    from gpusched_envs.cli import print_error

    print_error(message, Console(stderr=True))
    raise typer.Exit(code=2)


def _progress_bar(enabled: bool, label: str):
    """A rich progress bar over episodes (a no-op when disabled): ``(context, callback)``."""
    import contextlib

    if not enabled:
        return contextlib.nullcontext(), None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[steps]:,} steps"),
        TimeElapsedColumn(),
        transient=True,
    )
    task = bar.add_task(label, total=None, steps=0)

    def update(done: int, total: int, steps: int) -> None:
        bar.update(task, completed=done, total=total, steps=steps)

    return bar, update


def dataset_cmd(
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            parser=Name(),
            help="Dataset name (letters, digits, '_', '-'; '-v0' is added without a '-vN' suffix).",
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="Agent to record: a heuristic (srtf, las+closest, ...), random, a checkpoint path, "
            "dag-<agent> or module:callable."
        ),
    ] = None,
    scenario: Annotated[
        str | None, typer.Option(help="Scenario: a bundled name or SUITE/NAME (see `gpusched leaderboard`).")
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(
            help="Record the agent on every scenario of this suite it runs on (datasets NAME-SCENARIO-v0)."
        ),
    ] = None,
    seeds: Annotated[
        str | None,
        typer.Option(
            "--seeds",
            parser=Seeds(),
            help="Seeds, one episode each: 0-9, 0,3,5 or 0:10 (default 0-4; the recipe: 0-2).",
        ),
    ] = None,
    env_kwargs: Annotated[
        str | None,
        typer.Option(
            "--env-kwargs",
            parser=Text(),
            help="Env kwargs replacing the scenario's, as a JSON object (e.g. '{\"preemption\": true}').",
        ),
    ] = None,
    obs_mode: Annotated[
        str | None,
        typer.Option(help="Observation mode recorded: flat | graph | image (default: the scenario's)."),
    ] = None,
    recipe: Annotated[
        str | None,
        typer.Option(help="Record a recipe set instead: standard (see docs/datasets.md)."),
    ] = None,
    score_: Annotated[
        str | None,
        typer.Option(
            "--score",
            help="Instead of recording: run these checkpoints (comma list) and the agent that recorded dataset "
            "--name on held-out --seeds in the dataset's env, and print average JCT with paired 95% intervals.",
        ),
    ] = None,
    root: Annotated[
        Path | None, typer.Option(help=f"Datasets folder (default: ${ROOT_ENV}, else ~/.minari/datasets).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing dataset of the same name.")
    ] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
) -> None:
    """Record episodes of a leaderboard agent on a scenario as a Minari dataset (offline RL: `gpusched train bc
    --dataset NAME`)."""
    command = shlex.join(["gpusched", "dataset", *sys.argv[2:]]) if len(sys.argv) > 1 else "gpusched dataset"
    try:
        seed_list = list(seeds) if seeds is not None else [0, 1, 2, 3, 4]
        kwargs = _parse_env_kwargs(env_kwargs)
        if obs_mode is not None and obs_mode not in ("flat", "graph", "image"):
            raise DatasetError(f"--obs-mode: {obs_mode!r}; expected flat, graph or image")
        if score_ is not None:
            if name is None or seeds is None:
                raise DatasetError("--score needs the dataset (--name) and held-out --seeds")
            ckpts = [c.strip() for c in score_.split(",") if c.strip()]
            ctx, update = _progress_bar(progress, f"scoring on {dataset_id(name)}")
            with ctx:
                result = score(name, ckpts, seed_list, root, update)
            typer.echo(score_markdown(result), nl=False)
            return
        if recipe is not None:
            if any(v is not None for v in (name, agent, scenario, suite, env_kwargs)):
                raise DatasetError(
                    "--recipe records its own set: give no --name, --agent, --scenario, --suite or "
                    "--env-kwargs"
                )
            jobs = recipe_jobs(recipe)
            if seeds is None:
                seed_list = list(RECIPE_SEEDS)
        else:
            if agent is None:
                raise DatasetError("--agent is required (or --recipe)")
            if (scenario is None) == (suite is None):
                raise DatasetError("give either --scenario NAME or --suite NAME")
            if scenario is not None:
                if name is None:
                    raise DatasetError("--name is required with --scenario")
                jobs = [(name, agent, find_scenario(scenario), kwargs)]
            else:
                stem = name or f"{load_suite(suite).name}-{Path(agent).name.replace('+', '_')}"
                jobs = []
                for sc in load_suite(suite).scenarios:
                    try:
                        recorder_for(agent, sc, kwargs, obs_mode)
                    except (DatasetError, AgentSpecError):
                        continue
                    jobs.append((f"{stem}-{sc.name.replace('.', '_')}", agent, sc, kwargs))
                if not jobs:
                    raise DatasetError(f"{agent} runs on no scenario of suite {suite}")
            dataset_id(jobs[0][0])
        base = datasets_root(root)
        for job_name, _, _, _ in jobs:
            target = base / dataset_id(job_name)
            if target.exists() and not force:
                raise DatasetError(
                    f"dataset {dataset_id(job_name)} already exists at {target} (--force replaces it)"
                )
        for job_name, spec, sc, kw in jobs:
            label = f"{dataset_id(job_name)}"
            start = time.perf_counter()
            ctx, update = _progress_bar(progress, label)
            with ctx, _skip_empty(recipe is not None, label) as skipped:
                path = record(
                    job_name,
                    spec,
                    sc,
                    seed_list,
                    root=root,
                    force=force,
                    env_kwargs=kw,
                    obs_mode=obs_mode,
                    command=command,
                    progress=update,
                )
            if skipped:
                continue
            size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
            typer.echo(f"wrote {path} ({size / 2**20:,.1f} MiB, {time.perf_counter() - start:,.1f} s)")
    except (DatasetError, AgentSpecError, SuiteError, ValidationError) as exc:
        _fail(str(exc))
    except Exception as exc:
        from gpusched_envs.errors import USER_ERRORS

        if isinstance(exc, USER_ERRORS):
            _fail(str(exc))
        raise


class _skip_empty:
    """In a recipe, a dataset the agent left every seed out of is skipped with a line (the recipe goes on); the
    context's value is true once skipped."""

    def __init__(self, enabled: bool, label: str):
        self.enabled, self.label, self.skipped = enabled, label, []

    def __enter__(self):
        return self.skipped

    def __exit__(self, kind, exc, tb):
        if self.enabled and isinstance(exc, NoEpisodesError):
            typer.echo(f"skipped {self.label}: {exc}")
            self.skipped.append(True)
            return True
        return False


def _parse_env_kwargs(text: str | None) -> dict:
    if not text:
        return {}
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"--env-kwargs is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise DatasetError("--env-kwargs must be a JSON object")
    return doc
