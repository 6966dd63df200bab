"""TopDRL (Ayadi, An et al., JPDC 2025): a multi-branch CNN picks the next job of the queue window, a heuristic
places it on the closest free GPUs (``JobSelect-v1`` with ``placement="closest"``, ``obs_mode="image"``).

Training algorithm: Double DQN (:mod:`agents.algos.ddqn`). The selector's outputs are per-slot values over a small masked
action set, and every decision costs a simulator step on the CPU, so off-policy replay (each decision reused in many
updates) gets more out of a fixed simulation budget than on-policy PPO; the PPO variant of the same CNN is
``python -m gpusched_lab.train ppo --set encoder=cnn``.
"""

from __future__ import annotations

from gpusched_lab.agents.algos.ddqn import DDQN, DDQNArgs

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


class TopDRL(DDQN):
    """DDQN with TopDRL's CNN selector on ``JobSelect-v1`` (image observations, closest-GPU placement)."""

    algorithm = "topdrl"

    def __init__(self, args: DDQNArgs, envs: list, total_steps: int | None = None):
        for env in envs:
            u = env.unwrapped
            if (
                env.spec is None
                or env.spec.id != ENV_ID
                or u.obs_mode != OBS_MODE
                or u.placement != PLACEMENT
            ):
                raise ValueError(
                    f"TopDRL runs on {ENV_ID} with obs_mode={OBS_MODE!r}, placement={PLACEMENT!r}"
                )
        if args.encoder != "cnn":
            raise ValueError(f"TopDRL's selector is the CNN, got encoder={args.encoder!r}")
        super().__init__(args, envs, total_steps)
