"""Stable-Baselines3: MaskablePPO (sb3-contrib) on JobSelect-v1 with the features flattened and normalised
(gpusched_envs.wrappers), then compared with the heuristics of its information class, FIFO with backfilling and a
random masked policy on the same episodes.

    python examples/integrations/sb3_maskable_ppo.py            # about two minutes
    python examples/integrations/sb3_maskable_ppo.py --smoke    # seconds
"""

from __future__ import annotations

import gymnasium as gym
from common import ENV_ID, parse, report
from sb3_contrib import MaskablePPO

import gpusched_envs  # noqa: F401  (registers the ids)
from gpusched_envs.wrappers import FlattenFeatures, NormalizeFeatures


def make(env_kwargs):
    return NormalizeFeatures(FlattenFeatures(gym.make(ENV_ID, **env_kwargs), with_mask=False))


def main():
    args = parse(__doc__.splitlines()[0], steps=20_000)
    env = make(args.env_kwargs)
    model = MaskablePPO(
        "MlpPolicy", env, n_steps=128 if args.smoke else 512, batch_size=64, seed=args.seed, device="cpu"
    )
    model.learn(args.steps)

    def make_eval():  # the training statistics, frozen
        e = make(args.env_kwargs)
        e.rms, e.update_running_mean = env.rms, False
        return e

    def policy(obs, e):
        action, _ = model.predict(obs, action_masks=e.action_masks(), deterministic=True)
        return int(action)

    report(make_eval, policy, args.seeds, f"MaskablePPO, {args.steps} steps ({args.env_kwargs})")


if __name__ == "__main__":
    main()
