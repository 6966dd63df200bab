"""TopDRL (Ayadi, An et al., JPDC 2025): a multi-branch CNN picks the next job of the queue window, a heuristic
places it on the closest free GPUs (``JobSelect-v1`` with ``placement="closest"``, ``obs_mode="image"``).

Training algorithm: Double DQN (:mod:`agents.algos.ddqn`). The selector's outputs are per-slot values over a small masked
action set, and every decision costs a simulator step on the CPU, so off-policy replay (each decision reused in many
updates) gets more out of a fixed simulation budget than on-policy PPO; the PPO variant of the same CNN is
``python -m gpusched_lab.train ppo --set encoder=cnn``.
"""

from __future__ import annotations

from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs, is_vector_env

ENV_ID = "gpusched/JobSelect-v1"
OBS_MODE = "image"
PLACEMENT = "closest"


def topdrl_env_kwargs(**overrides) -> dict:
    """The TopDRL setting: the paper's 2 racks × 4 machines × 4 GPUs cluster, the closest-GPU placer, CNN images.
    ``overrides`` may change the workload, reward, window, ...; placement and obs mode are fixed."""
    kwargs = {"cluster": "topdrl", "reward": "jct", **overrides}
    for key, value in (("placement", PLACEMENT), ("obs_mode", OBS_MODE)):
        if kwargs.get(key, value) != value:
            raise ValueError(f"TopDRL uses {key}={value!r}, got {kwargs[key]!r}")
        kwargs[key] = value
    return kwargs


def topdrl_args(**overrides) -> DDQNArgs:
    """DDQN arguments with the CNN selector."""
    if overrides.get("encoder", "cnn") != "cnn":
        raise ValueError(f"TopDRL's selector is the CNN, got encoder={overrides['encoder']!r}")
    return DDQNArgs(**{"encoder": "cnn", **overrides})


def _check_env(env, where: str, copy: bool = False) -> None:
    """Raise unless ``env`` is TopDRL's: ``ENV_ID`` with image observations and the closest-GPU placer. A vector
    env's ``copy`` may be the bare env class without a spec (the vector env holds the id)."""
    u = env.unwrapped
    spec = getattr(env, "spec", None)
    if (
        (spec is None and not copy)
        or (spec is not None and spec.id != ENV_ID)
        or getattr(u, "obs_mode", None) != OBS_MODE
        or getattr(u, "placement", None) != PLACEMENT
    ):
        raise ValueError(
            f"TopDRL runs on {ENV_ID} with obs_mode={OBS_MODE!r}, placement={PLACEMENT!r} ({where} is not)"
        )


def check_topdrl_envs(envs) -> None:
    """Raise a ``ValueError`` naming the offending env unless every env TopDRL would train on is its setting:
    each env of a list, or the native vector env's id and each of its copies (a curriculum's copy is checked
    on the env it currently steps; ``train.runner.check_topdrl_choices`` checks that no stage changes the placer
    or the observations)."""
    if is_vector_env(envs):
        env_id = getattr(envs, "env_id", None) or getattr(getattr(envs, "spec", None), "id", None)
        if env_id != ENV_ID:
            raise ValueError(
                f"TopDRL runs on {ENV_ID} with obs_mode={OBS_MODE!r}, placement={PLACEMENT!r} "
                f"(the vector env is {env_id!r})"
            )
        for i, env in enumerate(envs.envs):
            _check_env(env, f"copy {i} of the vector env", copy=True)
        return
    if not isinstance(envs, (list, tuple)) or not envs:
        raise ValueError(f"TopDRL trains on a non-empty list of envs or a native vector env, got {envs!r}")
    for i, env in enumerate(envs):
        _check_env(env, f"env {i}")


class TopDRL(DDQN):
    """DDQN with TopDRL's CNN selector on ``JobSelect-v1`` (image observations, closest-GPU placement), over a list
    of envs or a native vector env (:func:`agents.common.make_vector_env`) of such copies."""

    algorithm = "topdrl"

    def __init__(self, args: DDQNArgs, envs, total_steps: int | None = None):
        check_topdrl_envs(envs)
        if args.encoder != "cnn":
            raise ValueError(f"TopDRL's selector is the CNN, got encoder={args.encoder!r}")
        super().__init__(args, envs, total_steps)
