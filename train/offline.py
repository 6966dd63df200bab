"""Offline learning from recorded datasets (``gpusched dataset``): behaviour cloning and discrete CQL.

``gpusched train bc --dataset NAME`` fits a policy to the dataset's actions (cross-entropy of the masked scores,
Pomerleau 1991); ``gpusched train cql --dataset NAME`` learns Q-values from the dataset's rewards alone with
Conservative Q-Learning for discrete actions (Kumar, Zhou, Tucker & Levine, "Conservative Q-Learning for Offline
Reinforcement Learning", NeurIPS 2020, the CQL(H) objective): a Double-DQN TD loss plus
``alpha * (logsumexp_a Q(s, a) - Q(s, a_data))`` over the valid actions, which pushes down the Q-values of actions
the data does not take. Both use the project's networks (:mod:`gpusched_lab.agents.nets`: the MLP for ``flat``
observations, the GNN for ``graph``, the CNN for ``image``) and write the project's checkpoint
(:mod:`gpusched_lab.agents.checkpoint`: ``model.pt`` + ``meta.json``, policy kind ``q``: the action is the masked
argmax of the network's scores), so ``agents.load``, ``gpusched evaluate`` and the leaderboard run them in the
dataset's env setting (its env id and kwargs: observation mode, information class, preemption, placement).

This module reads datasets (Minari's format, in ``--root``, else ``$MINARI_DATASETS_PATH``, else
``~/.minari/datasets``); it does not import the evaluation package, which writes them.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT_ENV = "MINARI_DATASETS_PATH"
ALGORITHMS = ("bc", "cql")


class DatasetError(ValueError):
    """A dataset that cannot be written or read: the message names the dataset and the reason."""


def datasets_root(root: str | Path | None = None) -> Path:
    """Where datasets live: ``root``, else ``$MINARI_DATASETS_PATH``, else ``~/.minari/datasets`` (Minari's own
    default, so ``minari.load_dataset(NAME)`` finds them)."""
    if root is not None:
        return Path(root)
    env = os.environ.get(ROOT_ENV)
    return Path(env) if env else Path.home() / ".minari" / "datasets"


def dataset_id(name: str, where: str = "--name") -> str:
    """A Minari dataset id from a name: letters, digits, ``_`` and ``-``, ending in ``-vN`` (``-v0`` is added when
    absent)."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,119}", name):
        raise DatasetError(
            f"{where}: {name!r} is not a dataset name (letters, digits, '_' and '-', starting with a letter or digit, "
            "at most 120 characters; Minari ids have no '.', '/' or spaces)"
        )
    return name if re.search(r"-v\d+$", name) else f"{name}-v0"


def dataset_path(name: str, root: str | Path | None = None, where: str = "--name") -> Path:
    return datasets_root(root) / dataset_id(name, where)


def load_dataset(name: str, root: str | Path | None = None, where: str = "--dataset"):
    """The :class:`minari.MinariDataset` ``name`` under ``root``; one :class:`DatasetError` line when it is absent
    or unreadable."""
    path = dataset_path(name, root, where)
    if not (path / "data" / "metadata.json").is_file():
        raise DatasetError(
            f"{where}: no dataset {dataset_id(name, where)} in {path.parent} (record one with `gpusched dataset`)"
        )
    try:
        from minari.dataset.minari_dataset import MinariDataset
    except ImportError:
        raise DatasetError("reading datasets needs Minari: pip install 'gpusched-envs[datasets]'") from None
    try:
        return MinariDataset(path / "data")
    except (OSError, ValueError, KeyError) as exc:
        raise DatasetError(
            f"{where}: dataset {dataset_id(name, where)} at {path} is unreadable ({exc})"
        ) from None


@dataclass
class Transitions:
    """Every step of a dataset as arrays: ``obs[k][i]`` → ``actions[i]``, ``rewards[i]``, ``next_obs[k][i]``,
    ``dones[i]`` (a termination: no bootstrap; a truncation still bootstraps)."""

    obs: dict
    next_obs: dict
    actions: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    meta: dict
    episodes: int

    def __len__(self) -> int:
        return len(self.actions)


def read_transitions(dataset) -> Transitions:
    """The transitions of a :class:`minari.MinariDataset` written by ``gpusched dataset`` (its ``gpusched``
    metadata names the env)."""
    meta = dataset.storage.metadata.get("gpusched")
    if not isinstance(meta, dict) or "env_id" not in meta:
        raise DatasetError(
            f"dataset {dataset.spec.dataset_id}: not written by `gpusched dataset` (no gpusched metadata)"
        )
    obs, nxt, actions, rewards, dones = {}, {}, [], [], []
    count = 0
    for ep in dataset.iterate_episodes():
        count += 1
        o = ep.observations
        if not isinstance(o, dict) or "action_mask" not in o:
            raise DatasetError(f"dataset {dataset.spec.dataset_id}: observations without an action mask")
        for k, v in o.items():
            obs.setdefault(k, []).append(np.asarray(v[:-1]))
            nxt.setdefault(k, []).append(np.asarray(v[1:]))
        actions.append(np.asarray(ep.actions, dtype=np.int64))
        rewards.append(np.asarray(ep.rewards, dtype=np.float32))
        dones.append(np.asarray(ep.terminations, dtype=bool))
    if not count:
        raise DatasetError(f"dataset {dataset.spec.dataset_id}: no episodes")
    cat = lambda d: {k: np.concatenate(v) for k, v in d.items()}  # noqa: E731
    return Transitions(
        cat(obs),
        cat(nxt),
        np.concatenate(actions),
        np.concatenate(rewards),
        np.concatenate(dones),
        meta,
        count,
    )


@dataclass
class OfflineArgs:
    """Arguments of ``train bc`` / ``train cql``."""

    encoder: str | None = None
    """mlp | gnn | cnn (default: the one of the dataset's observation mode)"""
    hidden: int = 128
    layers: int = 2
    steps: int = 4000
    """gradient steps"""
    batch_size: int = 256
    learning_rate: float = 1e-3
    seed: int = 0
    torch_threads: int = 1
    # CQL only
    gamma: float = 0.99
    alpha: float = 1.0
    """weight of the conservative term (CQL's alpha)"""
    reward_scale: float = 0.01
    target_update: int = 500
    """gradient steps between copies of the Q-network into the target network"""

    def to_dict(self) -> dict:
        return asdict(self)


def _torch():
    import torch

    return torch


def _network(meta: dict, args: OfflineArgs):
    """``(scorer, NetworkConfig, env)`` for the dataset's env."""
    from gpusched_lab.agents.common import make_env
    from gpusched_lab.agents.nets.common import OBS_MODE_OF_ENCODER
    from gpusched_lab.agents.nets.networks import build_network, config_for_env

    env = make_env(meta["env_id"], meta.get("env_kwargs") or {}, meta.get("obs_mode"))
    obs_mode = getattr(env.unwrapped, "obs_mode", meta.get("obs_mode"))
    encoder = args.encoder or {v: k for k, v in OBS_MODE_OF_ENCODER.items()}.get(obs_mode, "mlp")
    if OBS_MODE_OF_ENCODER.get(encoder) != obs_mode:
        raise DatasetError(
            f"--encoder {encoder} reads {OBS_MODE_OF_ENCODER.get(encoder)} observations; the dataset has {obs_mode}"
        )
    cfg = config_for_env(env, encoder, args.hidden, args.layers)
    return build_network(cfg, env.observation_space), cfg, env


def _batch(arrays: dict, idx, device) -> dict:
    from gpusched_lab.agents.nets.networks import obs_to_tensors

    return obs_to_tensors({k: v[idx] for k, v in arrays.items()}, device, batched=True)


def fit(data: Transitions, algorithm: str, args: OfflineArgs, log=None, progress: bool = False):
    """Train a BC policy or a CQL Q-network on ``data``; returns ``(module, NetworkConfig, history)`` where
    ``history`` holds the loss (and the agreement with the data's actions) every few hundred steps."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown offline algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    torch = _torch()
    import copy

    import torch.nn.functional as F
    from gpusched_lab.agents.common import set_torch_threads
    from gpusched_lab.agents.nets.networks import masked

    set_torch_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    module, cfg, env = _network(data.meta, args)
    env.close()
    device = torch.device("cpu")
    opt = torch.optim.Adam(module.parameters(), lr=args.learning_rate)
    target = copy.deepcopy(module).eval() if algorithm == "cql" else None
    actions = torch.as_tensor(data.actions)
    rewards = torch.as_tensor(data.rewards) * args.reward_scale
    dones = torch.as_tensor(data.dones, dtype=torch.float32)
    n = len(data)
    history, window = [], []
    every = max(1, args.steps // 20)
    bar = _progress(progress, f"{algorithm} on {n:,} transitions", args.steps)
    with bar as update:
        for step in range(1, args.steps + 1):
            idx = rng.integers(0, n, size=min(args.batch_size, n))
            obs = _batch(data.obs, idx, device)
            a = actions[idx]
            scores = masked(module(obs), obs["action_mask"])
            if algorithm == "bc":
                loss = F.cross_entropy(scores, a)
                extra = {}
            else:
                q_data = scores.gather(1, a[:, None]).squeeze(1)
                with torch.no_grad():
                    nxt = _batch(data.next_obs, idx, device)
                    best = masked(module(nxt), nxt["action_mask"]).argmax(1, keepdim=True)  # Double DQN
                    q_next = target(nxt).gather(1, best).squeeze(1)
                    y = rewards[idx] + args.gamma * (1.0 - dones[idx]) * q_next
                td = F.smooth_l1_loss(q_data, y)
                conservative = (torch.logsumexp(scores, dim=1) - q_data).mean()
                loss = td + args.alpha * conservative
                extra = {"td": float(td.detach()), "conservative": float(conservative.detach())}
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), 10.0)
            opt.step()
            if target is not None and step % args.target_update == 0:
                target.load_state_dict(module.state_dict())
            agree = float((scores.detach().argmax(1) == a).float().mean())
            window.append((float(loss.detach()), agree, extra))
            if step % every == 0 or step == args.steps:
                record = {
                    "step": step,
                    "loss": float(np.mean([w[0] for w in window])),
                    "agreement": float(np.mean([w[1] for w in window])),
                }
                for key in window[-1][2]:
                    record[key] = float(np.mean([w[2][key] for w in window]))
                history.append(record)
                window = []
                if log is not None:
                    log(record)
            update(step)
    module.eval()
    return module, cfg, history


class _progress:
    """A rich progress bar over gradient steps (a no-op when disabled); the context yields ``update(step)``."""

    def __init__(self, enabled: bool, label: str, total: int):
        self.enabled, self.label, self.total, self.bar = enabled, label, total, None

    def __enter__(self):
        if not self.enabled:
            return lambda step: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=True,
        )
        self.bar.__enter__()
        task = self.bar.add_task(self.label, total=self.total)
        return lambda step: (
            self.bar.update(task, completed=step) if step % 50 == 0 or step == self.total else None
        )

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False


def run_policy(agent, env_id: str, env_kwargs: dict, obs_mode: str, seeds) -> list[dict]:
    """The env's episode metrics of a loaded checkpoint (``act(obs)``) on each seed (plus ``episode_return``)."""
    from gpusched_lab.agents.common import make_env

    out = []
    env = make_env(env_id, env_kwargs, obs_mode)
    try:
        for seed in seeds:
            obs, info = env.reset(seed=int(seed))
            total, done = 0.0, False
            while not done:
                obs, reward, terminated, truncated, info = env.step(agent.act(obs))
                total += float(reward)
                done = terminated or truncated
            metrics = {k: float(v) for k, v in (info.get("metrics") or {}).items()}
            out.append({"seed": int(seed), "episode_return": total, **metrics})
    finally:
        env.close()
    return out


def train_offline(
    algorithm: str,
    dataset: str,
    out: Path,
    args: OfflineArgs,
    *,
    root: str | Path | None = None,
    eval_seeds=(),
    command: str = "",
    log=None,
    progress: bool = False,
) -> dict:
    """Load ``dataset``, fit, save a checkpoint in ``out``; with ``eval_seeds``, run it there (the dataset's env)
    and store the mean metrics in the checkpoint's ``evaluation``. Returns a summary."""
    from gpusched_lab.agents import checkpoint

    start = time.perf_counter()
    data = read_transitions(load_dataset(dataset, root))
    seen = set(data.meta.get("seeds") or [])
    overlap = sorted(seen.intersection(int(s) for s in eval_seeds))
    if overlap:
        raise DatasetError(
            f"--eval-seeds {', '.join(map(str, overlap[:5]))} are in the dataset; evaluate on held-out seeds"
        )
    module, cfg, history = fit(data, algorithm, args, log, progress)
    env_kwargs = dict(data.meta.get("env_kwargs") or {})
    obs_mode = data.meta.get("obs_mode") or env_kwargs.get("obs_mode") or "flat"
    env_kwargs["obs_mode"] = obs_mode
    extra = {
        **args.to_dict(),
        "dataset": dataset_id(dataset, "--dataset"),
        "dataset_agent": (data.meta.get("agent") or {}).get("name"),
        "dataset_seeds": sorted(seen),
        "transitions": len(data),
        "final": history[-1] if history else None,
    }
    checkpoint.save(
        out,
        module,
        algorithm=algorithm,
        policy="q",
        env_id=data.meta["env_id"],
        env_kwargs=env_kwargs,
        obs_mode=obs_mode,
        network=cfg,
        steps=args.steps,
        seed=args.seed,
        command=command,
        evaluation=None,
        args=extra,
    )
    evaluation = None
    if eval_seeds:
        agent = checkpoint.load(out)
        runs = run_policy(agent, data.meta["env_id"], env_kwargs, obs_mode, eval_seeds)
        keys = [k for k in runs[0] if k != "seed"]
        mean = {k: float(np.mean([r[k] for r in runs])) for k in keys}
        objective = "makespan" if "makespan" in mean and "avg_jct" not in mean else "avg_jct"
        evaluation = {  # the fields the other trainers' checkpoints hold, plus every metric's mean
            objective: mean.get(objective),
            f"{objective}_per_seed": [r.get(objective) for r in runs],
            "objective": mean.get(objective),
            "objective_name": objective,
            "return": mean["episode_return"],
            "seeds": [r["seed"] for r in runs],
            "mean": mean,
        }
        meta_path = Path(out) / checkpoint.META_FILE
        meta = json.loads(meta_path.read_text())
        meta["evaluation"] = evaluation
        from gpusched_envs.io import atomic_write_text

        atomic_write_text(meta_path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return {
        "algorithm": algorithm,
        "transitions": len(data),
        "episodes": data.episodes,
        "history": history,
        "evaluation": evaluation,
        "checkpoint": str(out),
        "seconds": time.perf_counter() - start,
    }
