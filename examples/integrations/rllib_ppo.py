"""RLlib: PPO with the action-masking RLModule on JobSelect-v1 (gpusched_envs.integrations.rllib), then the
comparison with the heuristics of its information class, FIFO with backfilling and a random masked policy on
the same episodes. ``--multi-agent`` trains multi_scheduler_v1 (shared policy) instead and prints its returns.

    python examples/integrations/rllib_ppo.py            # a few minutes
    python examples/integrations/rllib_ppo.py --smoke    # under a minute (Ray's start-up)
"""

from __future__ import annotations

import sys

import numpy as np
import ray
import torch
from common import ENV_ID, parse, report

from gpusched_envs.integrations.common import EnvFactory
from gpusched_envs.integrations.rllib import masking_layout, ppo_config


def main():
    multi = "--multi-agent" in sys.argv
    if multi:
        sys.argv.remove("--multi-agent")
    args = parse(__doc__.splitlines()[0], steps=20_000)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    kwargs = {**args.env_kwargs, "num_agents": 2} if multi else args.env_kwargs
    batch = 128 if args.smoke else 1000
    config = ppo_config(
        ENV_ID, kwargs, multi_agent=multi, train_batch_size=batch, minibatch_size=64, seed=args.seed
    )
    algo = config.build_algo() if hasattr(config, "build_algo") else config.build()
    for i in range(max(1, args.steps // batch)):
        result = algo.train()
        print(
            f"iteration {i}: episode return mean {result['env_runners'].get('episode_return_mean', np.nan):.2f}"
        )
    if not multi:
        module = algo.get_module()

        def policy(obs, env):
            batch = {"obs": {k: torch.as_tensor(v)[None] for k, v in obs.items()}}
            with torch.no_grad():
                logits = module.forward_inference(batch)["action_dist_inputs"][0]
            return int(logits.argmax())

        def make():
            return EnvFactory(ENV_ID, args.env_kwargs, (masking_layout,))()

        report(make, policy, args.seeds, f"RLlib PPO, {args.steps} steps ({args.env_kwargs})")
    algo.stop()
    ray.shutdown()


if __name__ == "__main__":
    main()
