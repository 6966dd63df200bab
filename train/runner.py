"""Training runs: envs, TensorBoard scalars, periodic evaluation on held-out seeds, atomic checkpoints, resume.

Run folder (``--out``)::

    config.json             the resolved configuration and the command
    tb/                     TensorBoard events
    checkpoint/model.pt     the latest policy weights (torch.load(weights_only=True))
    checkpoint/meta.json    its metadata (agents.checkpoint)
    checkpoint/resume.pt    DDQN / TopDRL: full training state (pickled envs, replay, RNGs, optimiser)
    checkpoint/sb3.zip      PPO: SB3's save (policy, optimiser, step counter)
    best/model.pt, meta.json  the policy with the lowest evaluation objective so far (avg JCT; makespan on
                              DAGSchedule-v1), on the eval seeds

TensorBoard scalars: ``episode/return``, ``episode/length``, ``episode/avg_jct`` (from ``info["metrics"]`` at
episode end), ``train/loss``, ``train/epsilon`` (DDQN), ``train/steps_per_second``, ``eval/return``,
``eval/avg_jct`` (``eval/makespan`` on DAGSchedule-v1).

Resume guarantees. DDQN / TopDRL: bit-for-bit — a run resumed from a checkpoint ends with the same parameters as an
uninterrupted run (the envs are pickled mid-episode, with every RNG). PPO: the policy, optimiser state and step
counter continue exactly; the collected-but-unused part of a rollout is dropped (checkpoints are taken at rollout
boundaries, so nothing is lost there) and the envs restart with fresh episodes seeded from ``seed`` + the step
count (a curriculum at the stage of the run's step count), so a resumed PPO run is reproducible but not identical
to an uninterrupted one.
"""

from __future__ import annotations

import copy
import json
import os
import time
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from gpusched_lab.agents import checkpoint as ckpt
from gpusched_lab.agents.common import (
    make_env,
    make_vec_env,
    make_vector_env,
    resolve_device,
    set_torch_threads,
)
from gpusched_lab.agents.nets.networks import OBS_MODE_OF_ENCODER
from gpusched_lab.train import trust
from gpusched_lab.train.config import RunConfig
from stable_baselines3.common.callbacks import BaseCallback

from gpusched_envs.io import atomic_write_text

CHECKPOINT_DIR = "checkpoint"
BEST_DIR = "best"
RESUME_FILE = "resume.pt"
SB3_FILE = "sb3.zip"


class ScaleReward(gym.RewardWrapper):
    """Multiply rewards by a constant (a class, not a lambda, so the env pickles)."""

    def __init__(self, env, scale: float):
        super().__init__(env)
        self.scale = float(scale)

    def reward(self, reward):
        return reward * self.scale


def obs_mode_for(cfg: RunConfig) -> str:
    encoder = cfg.args.get("encoder", "cnn" if cfg.algorithm == "topdrl" else "gnn")
    if encoder not in OBS_MODE_OF_ENCODER:
        raise ValueError(f"encoder: {encoder!r} is not one of {', '.join(OBS_MODE_OF_ENCODER)}")
    mode = OBS_MODE_OF_ENCODER[encoder]
    given = cfg.env_kwargs.get("obs_mode")
    if given is not None and given != mode:
        raise ValueError(
            f"encoder {encoder!r} reads obs_mode {mode!r}, but env_kwargs set obs_mode={given!r}"
        )
    return mode


def make_train_env(
    env_id: str,
    env_kwargs: dict,
    obs_mode: str,
    reward_scale: float = 1.0,
    curriculum: list | None = None,
    num_envs: int = 1,
):
    """A training env: the config's env, or a :class:`~train.curriculum.CurriculumEnv` over its stages."""
    if curriculum:
        from gpusched_lab.train.curriculum import CurriculumEnv

        env = CurriculumEnv(env_id, env_kwargs, curriculum, obs_mode, num_envs)
    else:
        env = make_env(env_id, env_kwargs, obs_mode)
    return ScaleReward(env, reward_scale) if reward_scale != 1.0 else env


def curriculum_copies(env_id: str, env_kwargs: dict, obs_mode: str, num_envs: int, curriculum: list | None):
    """A factory of one vector-env copy per call, a :class:`~train.curriculum.CurriculumEnv` (None without a
    curriculum: the vector env's own copies)."""
    if not curriculum:
        return None
    from gpusched_lab.train.curriculum import CurriculumEnv

    return partial(CurriculumEnv, env_id, env_kwargs, curriculum, obs_mode, num_envs)


def make_train_vector_env(
    env_id: str, env_kwargs: dict, obs_mode: str, num_envs: int, curriculum: list | None = None
):
    """``num_envs`` training envs as one native vector env (autoresets disabled; DDQN steps it directly): the
    config's env, or a :class:`~train.curriculum.CurriculumEnv` per copy."""
    factory = curriculum_copies(env_id, env_kwargs, obs_mode, num_envs, curriculum)
    return make_vector_env(env_id, env_kwargs, obs_mode, num_envs, copy_factory=factory)


def make_train_vec_env(
    env_id: str,
    env_kwargs: dict,
    obs_mode: str,
    num_envs: int,
    reward_scale: float = 1.0,
    curriculum: list | None = None,
):
    """:func:`make_train_vector_env` as an SB3 ``VecEnv`` (PPO), rewards scaled by ``reward_scale``: what SB3's
    ``DummyVecEnv`` over ``num_envs`` :func:`make_train_env` envs returns, stepped in one call."""
    factory = curriculum_copies(env_id, env_kwargs, obs_mode, num_envs, curriculum)
    return make_vec_env(
        env_id, env_kwargs, obs_mode, num_envs, reward_scale=reward_scale, copy_factory=factory
    )


def summarize(episodes: list[dict]) -> dict:
    """Evaluation figures; ``objective`` (lower is better) is the average JCT, or the makespan on envs without jobs
    (DAGSchedule-v1), and selects the best policy."""
    name = "avg_jct" if not episodes or "avg_jct" in episodes[0]["metrics"] else "makespan"
    jct = [e["metrics"].get("avg_jct", np.nan) for e in episodes]
    values = [e["metrics"].get(name, np.nan) for e in episodes]
    return {
        "seeds": [e["seed"] for e in episodes],
        "avg_jct": float(np.nanmean(jct)) if episodes and not np.all(np.isnan(jct)) else float("nan"),
        "avg_jct_per_seed": [float(x) for x in jct],
        "objective_name": name,
        "objective": float(np.nanmean(values)) if episodes else float("nan"),
        "return": float(np.mean([e["return"] for e in episodes])) if episodes else float("nan"),
    }


def eval_status(evaluation: dict) -> str:
    label = "JCT" if evaluation["objective_name"] == "avg_jct" else evaluation["objective_name"]
    return f" eval {label}={evaluation['objective']:,.0f}s"


class GreedyAct:
    """``act(obs) -> int``: the masked argmax of a policy module; :meth:`many` gives the same decisions for several
    observations of one shape from one batched forward pass. Both are :class:`agents.checkpoint.Agent`'s
    (``torch.inference_mode``: the numbers of ``no_grad``), so the module must not be one still being trained
    (pass a copy)."""

    def __init__(self, module: torch.nn.Module, device):
        self.agent = ckpt.Agent(module, {}, None, "the policy being trained", device)

    def __call__(self, obs: dict) -> int:
        return self.agent.act(obs)

    def many(self, observations: list[dict]) -> list[int]:
        """``[self(obs) for obs in observations]``, exactly (a near tie is decided one observation at a time)."""
        return self.agent.act_many(observations)


def shape_key(env) -> tuple:
    """What decides whether two envs' observations can share a batch: each key's shape (a non-``Dict`` space: the
    env itself, batched with no other)."""
    space = env.observation_space
    if not isinstance(space, gym.spaces.Dict):
        return ("env", id(env))
    return tuple((k, sp.shape) for k, sp in space.spaces.items())


def run_episodes(act: GreedyAct, envs: list, seeds: list[int]) -> list[dict]:
    """:func:`agents.common.run_episode` of ``act`` on each env with its seed, the episodes stepped in lockstep: the
    unfinished envs whose observations share their shapes are decided by one :meth:`GreedyAct.many` call per step,
    which gives the actions ``act`` gives one observation at a time, so each episode (return, steps, metrics) is
    the one :func:`~agents.common.run_episode` plays."""
    groups: dict[tuple, list[int]] = {}
    for i, env in enumerate(envs):
        groups.setdefault(shape_key(env), []).append(i)
    obs = [env.reset(seed=int(seed))[0] for env, seed in zip(envs, seeds, strict=True)]
    total, steps = [0.0] * len(envs), [0] * len(envs)
    out: list[dict] = [{}] * len(envs)
    live = [list(g) for g in groups.values()]
    while live:
        still = []
        for group in live:
            actions = act.many([obs[i] for i in group]) if len(group) > 1 else [act(obs[group[0]])]
            left = []
            for i, action in zip(group, actions, strict=True):
                obs[i], reward, terminated, truncated, info = envs[i].step(action)
                total[i] += float(reward)
                steps[i] += 1
                if terminated or truncated:
                    metrics = info.get("metrics", {})
                    out[i] = {
                        "seed": int(seeds[i]),
                        "return": total[i],
                        "steps": steps[i],
                        "metrics": metrics,
                    }
                else:
                    left.append(i)
            if left:
                still.append(left)
        live = still
    return out


class Progress:
    """A rich progress bar (or nothing)."""

    def __init__(self, total: int, start: int, enabled: bool, label: str):
        self.bar = None
        if enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(
                TextColumn(f"[bold]{label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[status]}"),
                transient=False,
            )
            self.task = self.bar.add_task(label, total=total, completed=start, status="")
            self.bar.start()

    def update(self, step: int, status: str = "") -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=step, status=status)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


class Writer:
    """TensorBoard scalars (a thin SummaryWriter holder; ``purge_step`` drops events past a resumed step)."""

    def __init__(self, log_dir: Path, purge_step: int | None):
        from torch.utils.tensorboard import SummaryWriter

        self.w = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)

    def scalar(self, tag: str, value: float, step: int) -> None:
        if value is not None and np.isfinite(value):
            self.w.add_scalar(tag, float(value), step)

    def episodes(self, episodes: list[dict], step: int) -> None:
        for e in episodes:
            self.scalar("episode/return", e["return"], step)
            self.scalar("episode/length", e["length"], step)
            self.scalar("episode/avg_jct", e["metrics"].get("avg_jct", np.nan), step)

    def close(self) -> None:
        self.w.flush()
        self.w.close()


def write_config(out: Path, cfg: RunConfig, command: str) -> None:
    atomic_write_text(
        out / "config.json", json.dumps({"config": cfg.to_dict(), "command": command}, indent=2) + "\n"
    )


def read_config(out: Path) -> tuple[RunConfig, str]:
    doc = json.loads((out / "config.json").read_text())
    return RunConfig(**doc["config"]), doc["command"]


def _due(before: int, after: int, every: int) -> bool:
    return every > 0 and after // every > before // every


def best_objective(out: Path) -> float:
    """The objective (avg JCT or makespan) of the best policy saved so far; inf when there is none."""
    try:
        evaluation = json.loads((out / BEST_DIR / ckpt.META_FILE).read_text())["evaluation"]
        return float(evaluation.get("objective", evaluation["avg_jct"]))
    except (OSError, KeyError, TypeError, ValueError):
        return float("inf")


class PolicySaver:
    """Writes a policy checkpoint (``model.pt`` + ``meta.json``) of one run: everything but the module, the step
    and the evaluation is fixed when the run starts."""

    def __init__(
        self, out: Path, cfg: RunConfig, policy: str, network, obs_mode: str, command: str, args: dict
    ):
        self.out, self.cfg, self.policy, self.network = out, cfg, policy, network
        self.obs_mode, self.command, self.args = obs_mode, command, args

    def save(self, module, step: int, evaluation: dict | None, folder: str = CHECKPOINT_DIR) -> None:
        ckpt.save(
            self.out / folder,
            module,
            algorithm=self.cfg.algorithm,
            policy=self.policy,
            env_id=self.cfg.env,
            env_kwargs=self.cfg.env_kwargs,
            obs_mode=self.obs_mode,
            network=self.network,
            steps=step,
            seed=self.cfg.seed,
            command=self.command,
            evaluation=evaluation,
            args=self.args,
        )


def merge_summaries(parts: list[dict]) -> dict:
    """One evaluation summary from several (one per eval env): means of the means, per-seed lists concatenated."""
    out = dict(parts[0])
    for key, value in parts[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = float(np.mean([p[key] for p in parts]))
        elif isinstance(value, list):
            out[key] = [v for p in parts for v in p[key]]
    return out


class Evaluator:
    """Periodic evaluation on the held-out eval seeds (SB3's ``EvalCallback`` in spirit): logs ``eval/*`` and keeps
    the best policy so far (lowest objective) in ``best/``. ``last`` holds the latest evaluation.

    ``env_kwargs``: one env's kwargs per evaluated setting (the run's env, or one per ``eval_choices`` entry), every
    seed played on each; the figures are the means over the settings of each setting's means over the seeds. The
    envs (one per setting and seed) are built at the first evaluation, and every episode is played in lockstep
    (:func:`run_episodes`): the same episodes as one after the other."""

    def __init__(
        self, env_id: str, env_kwargs: list[dict], obs_mode: str, seeds: list[int], writer, saver: PolicySaver
    ):
        self.env_id, self.env_kwargs, self.obs_mode = env_id, list(env_kwargs), obs_mode
        self.seeds, self.writer, self.saver = list(seeds), writer, saver
        self.envs: list | None = None  # setting-major: setting c, seed k at c * len(seeds) + k
        self.last: dict | None = None

    def __call__(self, module, step: int, device) -> dict:
        """Evaluate ``module`` (the greedy policy; not a module still being trained: pass a copy)."""
        if self.envs is None:
            self.envs = [
                make_env(self.env_id, kw, self.obs_mode) for kw in self.env_kwargs for _ in self.seeds
            ]
        was_training = module.training
        try:
            episodes = run_episodes(GreedyAct(module, device), self.envs, self.seeds * len(self.env_kwargs))
        finally:
            module.train(was_training)
        n = len(self.seeds)
        parts = [summarize(episodes[c * n : (c + 1) * n]) for c in range(len(self.env_kwargs))]
        self.last = parts[0] if len(parts) == 1 else merge_summaries(parts)
        self.writer.scalar(f"eval/{self.last['objective_name']}", self.last["objective"], step)
        self.writer.scalar("eval/return", self.last["return"], step)
        if self.last["objective"] < best_objective(self.saver.out):
            self.saver.save(module, step, self.last, folder=BEST_DIR)
        return self.last

    def status(self) -> str:
        return eval_status(self.last) if self.last else ""


def eval_settings(cfg: RunConfig) -> list[dict]:
    """The env kwargs an evaluation plays: one per ``eval_choices`` entry (merged over the run's), else the run's."""
    return [{**cfg.env_kwargs, **c} for c in cfg.eval_choices] or [cfg.env_kwargs]


def resumed_config(cfg: RunConfig, out: Path) -> tuple[RunConfig, str]:
    """On ``--resume`` the run's own saved configuration and command hold; only the step budget may change."""
    saved, command = read_config(out)
    saved.steps, saved.progress = cfg.steps, cfg.progress
    return saved, command


# ------------------------------------------------------------------------------------------------------ DDQN
class DDQNCallback:
    """Called by :meth:`agents.algos.ddqn.DDQN.learn` after every step: episode scalars, progress, periodic evaluation
    and checkpoints (policy + full training state for a bit-for-bit resume)."""

    def __init__(self, algo, cfg: RunConfig, writer: Writer, bar: Progress, evaluator: Evaluator, saver):
        self.algo, self.cfg, self.writer, self.bar = algo, cfg, writer, bar
        self.evaluator, self.saver = evaluator, saver
        self.t0, self.s0 = time.perf_counter(), algo.global_step
        self.pretrain_logged = False

    def steps_per_second(self) -> float:
        return (self.algo.global_step - self.s0) / max(time.perf_counter() - self.t0, 1e-9)

    def __call__(self, a) -> None:
        cfg = self.cfg
        step, before = a.global_step, a.global_step - cfg.num_envs
        if a.pretrain_stats is not None and not self.pretrain_logged:  # the warm-started policy, before RL
            self.pretrain_logged = True
            self.writer.scalar("bc/loss", a.pretrain_stats["loss"], 0)
            self.writer.scalar("bc/demo_steps", a.pretrain_stats["demo_steps"], 0)
            if cfg.eval_every > 0:
                self.evaluator(copy.deepcopy(a.q), 0, a.device)
        if a.finished_episodes:
            self.writer.episodes(a.finished_episodes, step)
            a.finished_episodes.clear()
        if _due(before, step, 100):
            sps = self.steps_per_second()
            self.writer.scalar("train/loss", a.last_loss, step)
            self.writer.scalar("train/epsilon", a.epsilon, step)
            self.writer.scalar("train/steps_per_second", sps, step)
            self.bar.update(
                step, f"{sps:,.0f} steps/s ε={a.epsilon:.2f} loss={a.last_loss:.3g}" + self.evaluator.status()
            )
        if _due(before, step, cfg.eval_every) and step < cfg.steps:
            self.evaluator(copy.deepcopy(a.q), step, a.device)
        if _due(before, step, cfg.checkpoint_every) and step < cfg.steps:
            self.save(step)

    def save(self, step: int) -> None:
        self.saver.save(self.algo.q, step, self.evaluator.last)
        path = self.saver.out / CHECKPOINT_DIR / RESUME_FILE
        save_training_state(self.algo.training_state(), path)
        trust.sign(path)


def save_training_state(state: dict, path: Path) -> None:
    """Write a DDQN training state to ``path`` atomically (a temporary file beside it, then a rename). The replay
    buffer's arrays go in as tensors sharing their memory, which ``torch.save`` writes straight into the file: a
    numpy array would be pickled through several in-memory copies of itself, several GiB for a large image buffer.
    :meth:`DictReplayBuffer.load_state` reads either form, so the state loads back the same."""
    buffer = state.get("buffer")
    if isinstance(buffer, dict):

        def tensor(value):
            if isinstance(value, dict):
                return {k: tensor(v) for k, v in value.items()}
            return torch.from_numpy(value) if isinstance(value, np.ndarray) else value

        state = {**state, "buffer": tensor(buffer)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_topdrl_choices(cfg: RunConfig) -> None:
    """TopDRL's placement and observations hold in every env of the run: a curriculum stage or a held-in
    evaluation window may change the workload, load or window length, not ``placement`` or ``obs_mode``."""
    from gpusched_lab.agents.methods.topdrl.agent import topdrl_env_kwargs

    places = []
    for i, stage in enumerate(cfg.curriculum or []):
        if isinstance(stage, dict):
            places.append((f"curriculum[{i}].env_kwargs", stage.get("env_kwargs") or {}))
            choices = stage.get("choices") or []
            places += [(f"curriculum[{i}].choices[{j}]", c) for j, c in enumerate(choices)]
    places += [(f"eval_choices[{j}]", c) for j, c in enumerate(cfg.eval_choices or [])]
    for where, kwargs in places:
        if not isinstance(kwargs, dict):
            continue  # the curriculum's and the evaluator's own checks name it
        try:
            topdrl_env_kwargs(**kwargs)  # TopDRL's own check of its placer and observations
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def run_ddqn(
    cfg: RunConfig, out: Path, command: str, resume: bool = False, trust_resume: bool = False
) -> dict:
    """Train DDQN (or TopDRL) per ``cfg`` into ``out``; returns the final evaluation."""
    from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs
    from gpusched_lab.agents.methods.topdrl.agent import TopDRL, topdrl_env_kwargs
    from gpusched_lab.train.config import build_args

    resume_path = out / CHECKPOINT_DIR / RESUME_FILE
    resume = resume and resume_path.exists()
    if resume:
        cfg, command = resumed_config(cfg, out)
    if cfg.algorithm == "topdrl":
        cfg.env_kwargs = topdrl_env_kwargs(**{k: v for k, v in cfg.env_kwargs.items() if k != "obs_mode"})
        cfg.args.setdefault("encoder", "cnn")
        check_topdrl_choices(cfg)
    args = build_args(DDQNArgs, {**cfg.args, "seed": cfg.seed})
    mode = obs_mode_for(cfg)
    cfg.env_kwargs = {**cfg.env_kwargs, "obs_mode": mode}
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
        write_config(out, cfg, command)
    cls = TopDRL if cfg.algorithm == "topdrl" else DDQN
    if cfg.num_envs > 1:  # one vector env: every copy stepped in one call, acted on as a batch
        envs = make_train_vector_env(cfg.env, cfg.env_kwargs, mode, cfg.num_envs, cfg.curriculum)
    else:  # DDQN scales rewards itself
        envs = [
            make_train_env(cfg.env, cfg.env_kwargs, mode, 1.0, cfg.curriculum, cfg.num_envs)
            for _ in range(cfg.num_envs)
        ]
    algo = cls(args, envs, total_steps=cfg.steps)
    if resume:  # pickled envs: weights_only cannot read it, so the file must carry this user's signature
        trust.verify(resume_path, trust_resume)
        algo.load_training_state(torch.load(resume_path, map_location=algo.device, weights_only=False))
    writer = Writer(out / "tb", purge_step=algo.global_step if resume else None)
    bar = Progress(cfg.steps, algo.global_step, cfg.progress, cfg.algorithm)
    saver = PolicySaver(out, cfg, "q", algo.net_config, mode, command, args.to_dict())
    evaluator = Evaluator(cfg.env, eval_settings(cfg), mode, cfg.eval_seeds, writer, saver)
    callback = DDQNCallback(algo, cfg, writer, bar, evaluator, saver)
    try:
        algo.learn(cfg.steps, callback)
        evaluator(copy.deepcopy(algo.q), algo.global_step, algo.device)
        callback.save(algo.global_step)
    finally:
        bar.close()
        writer.close()
    return {
        "steps": algo.global_step,
        "evaluation": evaluator.last,
        "steps_per_second": callback.steps_per_second(),
    }


# ------------------------------------------------------------------------------------------------------ PPO
class PPOCallback(BaseCallback):
    """SB3 callback of a MaskablePPO run: episode and loss scalars, progress, periodic evaluation of the
    deterministic policy, checkpoints at rollout boundaries (nothing collected is lost there)."""

    def __init__(self, cfg: RunConfig, network, writer: Writer, bar: Progress, evaluator: Evaluator, saver):
        super().__init__()
        self.cfg, self.network, self.writer, self.bar = cfg, network, writer, bar
        self.evaluator, self.saver = evaluator, saver

    def policy_copy(self):
        from gpusched_lab.agents.checkpoint import PPOPolicy

        return PPOPolicy.from_sb3(self.model, self.network).to(self.model.device)

    def save(self, step: int) -> None:
        self.saver.save(self.policy_copy(), step, self.evaluator.last)
        sb3_path = self.saver.out / CHECKPOINT_DIR / SB3_FILE
        tmp = sb3_path.with_name(".sb3.tmp.zip")
        self.model.save(tmp)
        tmp.replace(sb3_path)
        trust.sign(sb3_path)

    def evaluate(self, step: int) -> None:
        self.evaluator(self.policy_copy(), step, self.model.device)

    def _on_training_start(self) -> None:
        self.t0, self.s0 = time.perf_counter(), self.model.num_timesteps
        self.last_ckpt = self.model.num_timesteps

    def _on_step(self) -> bool:
        step, cfg = self.model.num_timesteps, self.cfg
        for info, done in zip(self.locals["infos"], self.locals["dones"], strict=True):
            ep = info.get("episode")
            if done and ep is not None:
                self.writer.episodes(
                    [{"return": ep["r"], "length": ep["l"], "metrics": info.get("metrics", {})}], step
                )
        before = step - cfg.num_envs
        if _due(before, step, 100):
            sps = (step - self.s0) / max(time.perf_counter() - self.t0, 1e-9)
            self.writer.scalar("train/steps_per_second", sps, step)
            self.bar.update(step, f"{sps:,.0f} steps/s" + self.evaluator.status())
        if _due(before, step, cfg.eval_every) and step < cfg.steps:
            self.evaluate(step)
        return True

    def _on_rollout_start(self) -> None:
        step, cfg = self.model.num_timesteps, self.cfg
        values = self.model.logger.name_to_value
        for tag in ("loss", "entropy_loss", "approx_kl", "explained_variance", "clip_fraction"):
            if f"train/{tag}" in values:  # SB3's logger keys
                self.writer.scalar(f"train/{tag}", values[f"train/{tag}"], step)
        self.writer.scalar("train/learning_rate", self.model.policy.optimizer.param_groups[0]["lr"], step)
        if cfg.checkpoint_every > 0 and step // cfg.checkpoint_every > self.last_ckpt // cfg.checkpoint_every:
            self.save(step)
            self.last_ckpt = step


def imitate(model, cfg: RunConfig, mode: str, args, network, writer, evaluator, out: Path) -> None:
    """The ``bc`` warm start (train/bc.py) before PPO: DAgger rounds towards a heuristic, logged to TensorBoard
    (``bc/*``) and ``bc.json``, then one evaluation (step 0) so ``best/`` starts from the imitated policy."""
    from gpusched_lab.agents.checkpoint import PPOPolicy
    from gpusched_lab.train.bc import BCArgs, pretrain

    bc_args = BCArgs.from_dict(cfg.bc)
    done: list[dict] = []

    def log(record: dict) -> None:
        done.append(record)
        atomic_write_text(out / "bc.json", json.dumps({"args": bc_args.to_dict(), "rounds": done}, indent=2))
        for key in ("loss", "agreement", "p_expert_gt_half"):
            if record[key] is not None:
                writer.scalar(f"bc/{key}", record[key], record["round"])
        if record["avg_jct"] is not None:
            writer.scalar("bc/avg_jct", record["avg_jct"], record["round"])
        if cfg.progress:
            print(f"bc round {record['round']}: " + json.dumps(record), flush=True)

    pretrain(model, cfg.env, cfg.env_kwargs, mode, bc_args, args.gamma, args.reward_scale, cfg.seed, log=log)
    evaluator(PPOPolicy.from_sb3(model, network).to(model.device), 0, model.device)


def run_ppo(
    cfg: RunConfig, out: Path, command: str, resume: bool = False, trust_resume: bool = False
) -> dict:
    """Train MaskablePPO per ``cfg`` into ``out``; returns the final evaluation."""
    from gpusched_lab.agents.algos.ppo import FlatMaskablePPO, PPOArgs, make_ppo
    from gpusched_lab.agents.nets.networks import config_for_env
    from gpusched_lab.train.config import build_args
    from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor

    sb3_path = out / CHECKPOINT_DIR / SB3_FILE
    resume = resume and sb3_path.exists()
    if resume:
        cfg, command = resumed_config(cfg, out)
    args = build_args(PPOArgs, {**cfg.args, "seed": cfg.seed})
    mode = obs_mode_for(cfg)
    cfg.env_kwargs = {**cfg.env_kwargs, "obs_mode": mode}
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
        write_config(out, cfg, command)
    if cfg.num_envs > 1:  # one vector env: every copy stepped in one call, one policy forward per step
        inner = make_train_vec_env(
            cfg.env, cfg.env_kwargs, mode, cfg.num_envs, args.reward_scale, cfg.curriculum
        )
    else:
        factory = partial(
            make_train_env, cfg.env, cfg.env_kwargs, mode, args.reward_scale, cfg.curriculum, cfg.num_envs
        )
        inner = DummyVecEnv([factory])
    venv = VecMonitor(inner)  # episode returns/lengths in info["episode"]
    probe = make_env(cfg.env, cfg.env_kwargs, mode)
    network = config_for_env(probe, args.encoder, args.hidden, args.layers, hint_logit=args.hint_logit)
    probe.close()
    if resume:  # SB3's zip holds cloudpickled objects: signed by this user's runs only
        trust.verify(sb3_path, trust_resume)
        set_torch_threads(args.torch_threads)  # what make_ppo sets for a new run
        model = FlatMaskablePPO.load(sb3_path, env=venv, device=resolve_device(args.device))
        if cfg.curriculum:  # the stages follow the run's step count, not the resumed process's
            from gpusched_lab.train.curriculum import resume_at

            resume_at(inner.vec_env.envs if hasattr(inner, "vec_env") else inner.envs, model.num_timesteps)
        model.set_random_seed(cfg.seed + model.num_timesteps)
        venv.seed(cfg.seed + model.num_timesteps)
    else:
        venv.seed(cfg.seed)
        model = make_ppo(venv, network, args)
    writer = Writer(out / "tb", purge_step=model.num_timesteps if resume else None)
    bar = Progress(cfg.steps, model.num_timesteps, cfg.progress, cfg.algorithm)
    saver = PolicySaver(out, cfg, "logits", network, mode, command, args.to_dict())
    evaluator = Evaluator(cfg.env, eval_settings(cfg), mode, cfg.eval_seeds, writer, saver)
    callback = PPOCallback(cfg, network, writer, bar, evaluator, saver)
    if cfg.bc and not resume:
        imitate(model, cfg, mode, args, network, writer, callback.evaluator, out)
    try:
        model.learn(
            max(cfg.steps - model.num_timesteps, 0), callback=callback, reset_num_timesteps=not resume
        )
        callback.evaluate(model.num_timesteps)
        callback.save(model.num_timesteps)
    finally:
        bar.close()
        writer.close()
        venv.close()
    return {"steps": model.num_timesteps, "evaluation": callback.evaluator.last}
