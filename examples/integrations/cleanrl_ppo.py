"""CleanRL-style masked PPO in one file: a Gymnasium vector env (SyncVectorEnv, autoreset_mode=SAME_STEP) of the
picklable env factory, invalid actions' logits set to -inf, then the comparison with the heuristics of the
information class, FIFO with backfilling and a random masked policy on the same episodes.

    python examples/integrations/cleanrl_ppo.py            # about two minutes
    python examples/integrations/cleanrl_ppo.py --smoke    # seconds
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from common import ENV_ID, parse, report
from gymnasium.vector import AutoresetMode
from torch import nn

from gpusched_envs.integrations.common import EnvFactory
from gpusched_envs.wrappers import FlattenFeatures


class Agent(nn.Module):
    def __init__(self, n_in: int, n_actions: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.pi, self.v = nn.Linear(64, n_actions), nn.Linear(64, 1)

    def dist(self, x, mask):
        logits = self.pi(self.body(x)).masked_fill(~mask, -1e9)
        return torch.distributions.Categorical(logits=logits)

    def value(self, x):
        return self.v(self.body(x)).squeeze(-1)


def main():
    args = parse(__doc__.splitlines()[0], steps=30_000)
    torch.manual_seed(args.seed)
    n_envs, n_steps, gamma, lam, clip = 4, 64 if args.smoke else 256, 0.99, 0.95, 0.2
    factory = EnvFactory(ENV_ID, args.env_kwargs, (FlattenFeatures,))
    envs = gym.vector.SyncVectorEnv([factory] * n_envs, autoreset_mode=AutoresetMode.SAME_STEP)
    n_in, n_act = envs.single_observation_space["obs"].shape[0], envs.single_action_space.n
    agent = Agent(n_in, n_act)
    opt = torch.optim.Adam(agent.parameters(), lr=3e-4)
    obs, _ = envs.reset(seed=args.seed)
    scale = 1.0  # rewards are negative time integrals: scaled by their running magnitude
    for _ in range(max(1, args.steps // (n_envs * n_steps))):
        buf = {k: [] for k in ("x", "m", "a", "logp", "v", "r", "d")}
        for _ in range(n_steps):
            x, m = torch.as_tensor(obs["obs"]), torch.as_tensor(obs["action_mask"].astype(bool))
            with torch.no_grad():
                d = agent.dist(x, m)
                a = d.sample()
                buf["logp"].append(d.log_prob(a))
                buf["v"].append(agent.value(x))
            obs, r, term, trunc, info = envs.step(a.numpy())
            scale = 0.99 * scale + 0.01 * max(float(np.abs(r).mean()), 1e-8)
            for k, val in (("x", x), ("m", m), ("a", a)):
                buf[k].append(val)
            buf["r"].append(torch.as_tensor(r / scale, dtype=torch.float32))
            # SAME_STEP: obs already starts the next episode where one ended; no bootstrap across the boundary
            buf["d"].append(torch.as_tensor(term | trunc, dtype=torch.float32))
        with torch.no_grad():
            nxt = agent.value(torch.as_tensor(obs["obs"]))
        adv, last = [], torch.zeros(n_envs)
        for t in reversed(range(n_steps)):
            v_next = nxt if t == n_steps - 1 else buf["v"][t + 1]
            delta = buf["r"][t] + gamma * v_next * (1 - buf["d"][t]) - buf["v"][t]
            last = delta + gamma * lam * (1 - buf["d"][t]) * last
            adv.append(last)
        adv = torch.stack(adv[::-1]).flatten()
        ret = adv + torch.stack(buf["v"]).flatten()
        x, m, a = (torch.cat(buf[k]) for k in ("x", "m", "a"))
        old_logp = torch.cat(buf["logp"])
        for _ in range(4):
            for idx in torch.randperm(len(a)).split(64):
                d = agent.dist(x[idx], m[idx])
                ratio = (d.log_prob(a[idx]) - old_logp[idx]).exp()
                norm = (adv[idx] - adv[idx].mean()) / (adv[idx].std() + 1e-8)
                pg = -torch.min(ratio * norm, ratio.clamp(1 - clip, 1 + clip) * norm).mean()
                loss = pg + 0.5 * (agent.value(x[idx]) - ret[idx]).pow(2).mean() - 0.01 * d.entropy().mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                opt.step()
    envs.close()

    def policy(o, env):
        with torch.no_grad():
            x = torch.as_tensor(o["obs"])[None]
            m = torch.as_tensor(o["action_mask"].astype(bool))[None]
            return int(agent.dist(x, m).probs.argmax())

    report(
        lambda: factory(), policy, args.seeds, f"CleanRL-style PPO, {args.steps} steps ({args.env_kwargs})"
    )


if __name__ == "__main__":
    main()
