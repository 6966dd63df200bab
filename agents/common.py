"""What every learning agent shares: device choice, seeding in one place, env construction, episode rollouts, a fresh
simulator for the heuristics, and reading a YAML run configuration.

torch is imported only by the functions that use it, so :mod:`evaluate` can use :func:`fresh_simulator` without
loading it.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from gpusched_lab.agents.algos.pg import discounted_returns  # noqa: F401 - re-exported (train.bc)

# The repository's folders, for an editable install (the shipped checkpoints and configs live there)
REPO_ROOT = Path(__file__).resolve().parents[1]
SHIPPED_CHECKPOINTS = REPO_ROOT / "checkpoints"

if TYPE_CHECKING:
    import torch

    from gpusched_envs.sim import Simulator


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"``: CUDA when available, else CPU. ``"cuda"`` (or ``"cuda:N"``) without CUDA falls back to CPU with a
    warning, so a config written for a GPU box still runs on a laptop."""
    import torch

    name = str(device)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        warnings.warn(
            f"device {name!r} requested but CUDA is not available; using the CPU",
            RuntimeWarning,
            stacklevel=2,
        )
        return torch.device("cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    """Seed python, numpy's global generator and torch (the only place the agents seed them)."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - libraries (SB3, gymnasium spaces) may draw from it
    torch.manual_seed(seed)


def set_torch_threads(threads: int) -> None:
    """Small networks on a shared CPU run fastest single-threaded (threads fight otherwise); 0 keeps the default."""
    import torch

    if threads > 0 and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def make_env(env_id: str, env_kwargs: dict | None = None, obs_mode: str | None = None):
    """``gym.make`` with the project's envs registered; ``obs_mode`` overrides the kwargs' one."""
    import gymnasium as gym

    import gpusched_envs.envs  # registers the ids

    if not isinstance(env_id, str) or env_id not in gym.registry:
        # never let gym.make import the module of a "module:Env-v0" id taken from a config or checkpoint
        raise ValueError(
            f"env id {env_id!r} is not registered (this package's: {', '.join(gpusched_envs.envs.ENTRY_POINTS)})"
        )
    kwargs = dict(env_kwargs or {})
    if obs_mode is not None:
        kwargs["obs_mode"] = obs_mode
    return gym.make(env_id, **kwargs)


def make_vector_env(
    env_id: str,
    env_kwargs: dict | None,
    obs_mode: str | None,
    num_envs: int,
    *,
    copy_factory: Callable[[], object] | None = None,
    reward_scale: float = 1.0,
    autoreset_mode: str = "disabled",
):
    """The native vector env (:class:`gpusched_envs.envs.vector.GpuschedVectorEnv`) of ``num_envs`` copies of
    ``env_id``; ``obs_mode`` overrides the kwargs' one. ``copy_factory()``, when given, builds each copy instead
    (same spaces; a training run's ``CurriculumEnv``); ``reward_scale`` multiplies each copy's rewards
    (:class:`ScaledReward`). Autoresets are disabled by default: DDQN resets the ended copies itself
    (``reset(options={"reset_mask": ...})``), without a seed, so each copy's own generator seeds its next
    episode."""
    import gymnasium as gym

    import gpusched_envs.envs  # registers the ids
    from gpusched_envs.envs.vector import GpuschedVectorEnv

    if not isinstance(env_id, str) or env_id not in gym.registry:
        raise ValueError(
            f"env id {env_id!r} is not registered (this package's: {', '.join(gpusched_envs.envs.ENTRY_POINTS)})"
        )
    if gym.registry[env_id].vector_entry_point is None:
        raise ValueError(f"env id {env_id!r} has no native vector env (the -v1 ids have one)")
    kwargs = dict(env_kwargs or {})
    if obs_mode is not None:
        kwargs["obs_mode"] = obs_mode
    venv = GpuschedVectorEnv(env_id, int(num_envs), autoreset_mode=autoreset_mode, **kwargs)
    if copy_factory is not None:
        copies = [copy_factory() for _ in venv.envs]
        for i, env in enumerate(copies):
            if (
                env.observation_space != venv.single_observation_space
                or env.action_space != venv.single_action_space
            ):
                raise ValueError(f"copy_factory: copy {i} has other spaces than {env_id} with these kwargs")
        for env in venv.envs:
            env.close()
        venv.envs = copies
    if reward_scale != 1.0:
        venv.envs = [ScaledReward(env, reward_scale) for env in venv.envs]
    return venv


def make_vec_env(
    env_id: str,
    env_kwargs: dict | None,
    obs_mode: str | None,
    num_envs: int,
    seed: int | None = None,
    *,
    reward_scale: float = 1.0,
    copy_factory: Callable[[], object] | None = None,
):
    """An SB3 ``VecEnv`` (:class:`gpusched_envs.integrations.sb3.SB3VecEnv`) over the native vector env of
    ``num_envs`` copies of ``env_id``, with what a training env applies (``reward_scale``; a curriculum's copies
    through ``copy_factory``, see :func:`make_vector_env`), for ``sb3_contrib.MaskablePPO``: one call steps every
    copy, and its ``action_masks()`` are one ``(N, A)`` array. It returns what SB3's ``DummyVecEnv`` over the same
    single envs returns. ``seed``: copy ``i``'s first episode is seeded ``seed + i`` (SB3's ``VecEnv.seed``)."""
    from gpusched_envs.integrations.sb3 import SB3VecEnv

    vec = make_vector_env(
        env_id,
        env_kwargs,
        obs_mode,
        num_envs,
        copy_factory=copy_factory,
        reward_scale=reward_scale,
        autoreset_mode="same_step",
    )
    venv = SB3VecEnv(vec)
    if seed is not None:
        venv.seed(int(seed))
    return venv


class ScaledReward:
    """A copy of a vector env whose rewards are multiplied by ``scale`` (in float64, before SB3 stores them as
    float32, as a ``gymnasium.RewardWrapper`` on the single env does); every other attribute is the env's."""

    def __init__(self, env, scale: float):
        self.env, self.scale = env, float(scale)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward * self.scale, terminated, truncated, info

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


def env_obs_mode(env) -> str:
    return getattr(env.unwrapped, "obs_mode", "flat")


def run_episode(act: Callable[[dict], int], env, seed: int) -> dict:
    """One episode with ``act(obs) -> action``; returns the return, the step count and ``info["metrics"]``."""
    obs, info = env.reset(seed=seed)
    total, steps = 0.0, 0
    while True:
        obs, reward, terminated, truncated, info = env.step(act(obs))
        total += float(reward)
        steps += 1
        if terminated or truncated:
            return {"seed": seed, "return": total, "steps": steps, "metrics": info.get("metrics", {})}


def evaluate(act: Callable[[dict], int], env, seeds) -> list[dict]:
    """:func:`run_episode` on each seed (held-out seeds: evaluate on seeds never used in training)."""
    return [run_episode(act, env, int(s)) for s in seeds]


class NoSimulatorError(ValueError):
    """An env without a cluster simulator (no workload to hand to a heuristic)."""


def fresh_simulator(env, seed: int) -> Simulator:
    """A new :class:`~gpusched_envs.sim.Simulator` with the cluster, workload and settings ``env`` uses after
    ``env.reset(seed=seed)``.

    Fresh, because ``reset`` has already advanced the env's own simulator to its first decision point; a heuristic run
    on it from there would skip that decision. Raises :class:`NoSimulatorError` for an env without a cluster simulator.
    """
    from gpusched_envs.sim import Simulator

    env.reset(seed=int(seed))
    sim = getattr(env.unwrapped, "sim", None)
    if sim is None or not hasattr(sim, "workload"):
        spec = getattr(env, "spec", None)
        raise NoSimulatorError(
            f"{spec.id if spec else type(env.unwrapped).__name__} has no cluster simulator"
        )
    return Simulator(sim.cluster, sim.workload, sim.config)


def resolve_config_path(name: str | Path, config_dir: Path) -> Path:
    """A path, or the name of a file in ``config_dir`` (with or without ``.yaml``)."""
    p = Path(name)
    if p.exists():
        return p
    for candidate in (config_dir / p, config_dir / f"{p}.yaml"):
        if candidate.exists():
            return candidate
    known = ", ".join(sorted(c.stem for c in config_dir.glob("*.yaml")))
    raise FileNotFoundError(f"config {name!s} not found (neither a path nor one of {config_dir}: {known})")


def read_config(name: str | Path, config_dir: Path, known) -> tuple[Path, dict]:
    """A YAML run configuration (:func:`resolve_config_path`) read with
    :func:`gpusched_envs.safety.load_yaml` (limits on size and alias expansion): a mapping whose keys are all in
    ``known`` (an empty file is ``{}``). Returns the file's path and the mapping; anything else raises one
    ``ValueError`` naming the file."""
    from gpusched_envs.safety import load_yaml

    path = resolve_config_path(name, config_dir)
    doc = load_yaml(path.read_bytes(), str(path)) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: a config is a mapping of keys to values")
    unknown = sorted(map(str, set(doc) - set(known)))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(f"{path}: unknown keys {unknown}{hint} (known: {sorted(known)})")
    return path, doc
