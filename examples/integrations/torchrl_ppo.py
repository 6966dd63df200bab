"""TorchRL: PPO (ClipPPOLoss, GAE, Collector) on a batched JobSelect-v1 built by
gpusched_envs.integrations.torchrl.make_env (specs, fixed info, the ActionMask transform; the policy samples from
logits of invalid actions at -1e9), then the comparison with the heuristics of its information class, FIFO with backfilling
and a random masked policy on the same episodes.

    python examples/integrations/torchrl_ppo.py            # about two minutes
    python examples/integrations/torchrl_ppo.py --smoke    # seconds
"""

from __future__ import annotations

import torch
from common import ENV_ID, parse, report
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from gpusched_envs.integrations.common import EnvFactory
from gpusched_envs.integrations.torchrl import make_env
from gpusched_envs.wrappers import FlattenFeatures


def mlp(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_out))


class MaskedLogits(nn.Module):
    """Logits of the MLP with the invalid actions' set to -1e9 (the env's actions are one-hot)."""

    def __init__(self, n_in, n_act):
        super().__init__()
        self.net = mlp(n_in, n_act)

    def forward(self, obs, mask):
        return self.net(obs).masked_fill(~mask.bool(), -1e9)


def main():
    args = parse(__doc__.splitlines()[0], steps=30_000)
    torch.manual_seed(args.seed)
    env = make_env(ENV_ID, num_envs=4, wrappers=[FlattenFeatures], **args.env_kwargs)
    n_in, n_act = env.observation_spec["obs"].shape[-1], env.action_spec.shape[-1]
    actor = ProbabilisticActor(
        TensorDictModule(MaskedLogits(n_in, n_act), in_keys=["obs", "action_mask"], out_keys=["logits"]),
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        spec=env.action_spec,
        return_log_prob=True,
    )
    critic = ValueOperator(mlp(n_in, 1), in_keys=["obs"])
    frames = 64 * 4 if args.smoke else 1024
    collector = Collector(env, actor, frames_per_batch=frames, total_frames=max(args.steps, frames))
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=critic)
    loss = ClipPPOLoss(actor, critic, entropy_coeff=0.01)
    opt = torch.optim.Adam(loss.parameters(), lr=3e-4)
    for data in collector:
        data["next", "reward"] = data["next", "reward"] / data["next", "reward"].abs().mean().clamp_min(1e-8)
        with torch.no_grad():
            gae(data)
        flat = data.reshape(-1)
        for _ in range(4):
            for idx in torch.randperm(flat.shape[0]).split(64):
                out = loss(flat[idx])
                total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                opt.zero_grad()
                total.backward()
                opt.step()
    collector.shutdown()

    def policy(obs, _env):
        with torch.no_grad():
            logits = actor.module[0].module(torch.as_tensor(obs["obs"]), torch.as_tensor(obs["action_mask"]))
        return int(logits.argmax())

    def make():
        return EnvFactory(ENV_ID, args.env_kwargs, (FlattenFeatures,))()

    report(make, policy, args.seeds, f"TorchRL PPO, {args.steps} steps ({args.env_kwargs})")


if __name__ == "__main__":
    main()
