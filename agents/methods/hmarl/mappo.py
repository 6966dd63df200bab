"""HMARL's learner: MAPPO (central critic) / IPPO (local critics) over ``num_envs`` copies of
``multi_scheduler_v1`` stepped together (:class:`Trainer`: rollouts, GAE(λ), clipped-surrogate updates, evaluation,
resume state)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
from gpusched_lab.agents.algos.pg import (
    clip_fraction,
    clipped_surrogate,
    gae,
    gradient_step,
    minibatches,
    normalise_advantages,
)
from gpusched_lab.agents.common import resolve_device, seed_everything, set_torch_threads
from gpusched_lab.agents.methods.hmarl.checkpoint import save_actor
from gpusched_lab.agents.methods.hmarl.config import CRITICS, HMARLArgs
from gpusched_lab.agents.methods.hmarl.policy import (
    CentralCritic,
    HMARLActor,
    HMARLPolicy,
    LocalCritic,
    load_interference,
    make_env,
    network_config,
    obs_dims,
    run_episode,
    stack_agents,
    to_tensors,
)
from gpusched_lab.agents.nets.common import masked

from gpusched_envs.io import atomic_write_bytes


class Trainer:
    """MAPPO / IPPO over ``num_envs`` copies of ``multi_scheduler_v1``."""

    def __init__(self, env_kwargs: dict, args: HMARLArgs):
        if args.critic not in CRITICS:
            raise ValueError(f"critic must be one of {', '.join(CRITICS)}, got {args.critic!r}")
        if args.num_envs < 1 or args.n_steps < 1 or args.batch_size < 1 or args.n_epochs < 1:
            raise ValueError("num_envs, n_steps, batch_size and n_epochs must be >= 1")
        seed_everything(args.seed)
        set_torch_threads(args.torch_threads)
        self.args, self.env_kwargs = args, dict(env_kwargs)
        self.device = resolve_device(args.device)
        self.envs = [make_env(env_kwargs) for _ in range(args.num_envs)]
        env = self.envs[0]
        self.agents = list(env.possible_agents)
        self.cfg = network_config(env, args.hidden, args.layers)
        dims = obs_dims(env)
        self.actor = HMARLActor(self.cfg, dims, args.wait_logit_init).to(self.device)
        if args.critic == "central":
            self.critic: nn.Module = CentralCritic(env.state_space.shape[0], dims["context"], args.hidden)
        else:
            self.critic = LocalCritic(args.hidden, dims["context"])
        self.critic.to(self.device)
        params = list(self.actor.parameters()) + list(self.critic.parameters())
        self.optimizer = torch.optim.Adam(params, lr=args.learning_rate)
        self.interference = load_interference(args.interference_model)
        self.policy = HMARLPolicy(self.actor, self.interference, self.device)
        self.steps = 0
        self.episodes: list[dict] = []
        self._obs: list[dict] | None = None
        self._ep_return = np.zeros(args.num_envs)
        self._ep_len = np.zeros(args.num_envs, dtype=np.int64)

    # -------------------------------------------------------------- rollout
    def _reset_all(self) -> None:
        self._obs = [
            env.reset(seed=self.args.seed * 100_003 + self.steps + i)[0] for i, env in enumerate(self.envs)
        ]
        self._ep_return[:] = 0.0
        self._ep_len[:] = 0

    def _batch(self, i: int) -> dict[str, np.ndarray]:
        return self.policy.batch(self.envs[i], self._obs[i])

    def _batches(self) -> dict[str, np.ndarray]:
        """The agents' observations of every env copy as one batch ``(N·K, ...)``, copy by copy; with an
        interference model, the candidates of all copies are scored in one forward of it."""
        if self.interference is None:
            parts = [self._batch(i) for i in range(len(self.envs))]
        else:
            names = [list(o) for o in self._obs]
            scores = self.interference.candidate_scores_many(self.envs, names)
            parts = [stack_agents(o, a, s) for o, a, s in zip(self._obs, names, scores, strict=True)]
        return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}

    @torch.no_grad()
    def collect(self) -> dict[str, np.ndarray]:
        """One rollout: ``n_steps`` steps of every env copy; arrays with leading dims ``(T, N·K)``."""
        a = self.args
        if self._obs is None:
            self._reset_all()
        n, k = len(self.envs), len(self.agents)
        buf: dict[str, list] = {
            "obs": [],
            "state": [],
            "action": [],
            "logp": [],
            "value": [],
            "reward": [],
            "done": [],
            "decisive": [],
        }
        self.actor.train(False)
        for _ in range(a.n_steps):
            batch = self._batches()  # one actor forward below serves every agent of every copy
            state = np.repeat(np.stack([env.state() for env in self.envs]), k, axis=0)
            t = to_tensors(batch, self.device)
            logits, emb = self.actor(t)
            dist = torch.distributions.Categorical(logits=masked(logits, t["action_mask"]))
            action = dist.sample()
            value = self.critic(torch.as_tensor(state, device=self.device), t, emb)
            acts = action.cpu().numpy().reshape(n, k)
            rewards = np.zeros((n, k), np.float32)
            dones = np.zeros((n, k), np.float32)
            for i, env in enumerate(self.envs):
                obs, rew, _, _, infos = env.step({ag: int(acts[i, j]) for j, ag in enumerate(self.agents)})
                rewards[i] = [rew[ag] for ag in self.agents]
                self._ep_return[i] += rew[self.agents[0]]
                self._ep_len[i] += 1
                if not env.agents:
                    dones[i] = 1.0
                    m = infos[self.agents[0]].get("metrics", {})
                    self.episodes.append(
                        {"return": float(self._ep_return[i]), "length": int(self._ep_len[i]), **m}
                    )
                    obs, _ = env.reset(seed=a.seed * 100_003 + self.steps + 7 * i + 1)
                    self._ep_return[i], self._ep_len[i] = 0.0, 0
                self._obs[i] = obs
            self.steps += n
            buf["obs"].append(batch)
            buf["state"].append(state)
            buf["action"].append(action.cpu().numpy())
            buf["logp"].append(dist.log_prob(action).cpu().numpy())
            buf["value"].append(value.cpu().numpy())
            buf["reward"].append(rewards.reshape(-1) * a.reward_scale)
            buf["done"].append(dones.reshape(-1))
            buf["decisive"].append(batch["action_mask"].sum(-1) > 1)
        last = to_tensors(self._batches(), self.device)
        last_state = np.repeat(np.stack([env.state() for env in self.envs]), k, axis=0)
        last_value = (
            self.critic(torch.as_tensor(last_state, device=self.device), last, self.actor(last)[1])
            .cpu()
            .numpy()
        )
        out = {
            key: np.stack(buf[key])
            for key in ("state", "action", "logp", "value", "reward", "done", "decisive")
        }
        out["obs"] = {key: np.stack([b[key] for b in buf["obs"]]) for key in buf["obs"][0]}
        out["advantage"], out["return"] = gae(
            out["reward"], out["value"], out["done"], last_value, a.gamma, a.gae_lambda
        )
        return out

    # -------------------------------------------------------------- update
    def update(self, roll: dict) -> dict[str, float]:
        a = self.args
        self.actor.train(True)
        flat = {key: v.reshape(-1, *v.shape[2:]) for key, v in roll.items() if key != "obs"}
        obs = {key: v.reshape(-1, *v.shape[2:]) for key, v in roll["obs"].items()}
        n = len(flat["action"])
        adv = flat["advantage"]
        dec = flat["decisive"]
        if dec.any():
            adv = normalise_advantages(adv, dec)
        rng = np.random.default_rng(a.seed + self.steps)
        stats = {"policy_loss": [], "value_loss": [], "entropy": [], "clip_frac": []}
        params = list(self.actor.parameters()) + list(self.critic.parameters())
        for idx in minibatches(rng, n, a.batch_size, a.n_epochs):
            t = to_tensors({key: v[idx] for key, v in obs.items()}, self.device)
            logits, emb = self.actor(t)
            dist = torch.distributions.Categorical(logits=masked(logits, t["action_mask"]))
            act = torch.as_tensor(flat["action"][idx], device=self.device)
            logp = dist.log_prob(act)
            old = torch.as_tensor(flat["logp"][idx], device=self.device)
            ad = torch.as_tensor(adv[idx], device=self.device, dtype=torch.float32)
            w = torch.as_tensor(dec[idx], device=self.device, dtype=torch.float32)
            policy_loss, ratio, denom = clipped_surrogate(logp, old, ad, a.clip_range, w)
            entropy = (dist.entropy() * w).sum() / denom
            value = self.critic(torch.as_tensor(flat["state"][idx], device=self.device), t, emb)
            ret = torch.as_tensor(flat["return"][idx], device=self.device, dtype=torch.float32)
            value_loss = torch.nn.functional.mse_loss(value, ret)
            loss = policy_loss + a.vf_coef * value_loss - a.ent_coef * entropy
            gradient_step(self.optimizer, loss, params, a.max_grad_norm)
            stats["policy_loss"].append(policy_loss.item())
            stats["value_loss"].append(value_loss.item())
            stats["entropy"].append(entropy.item())
            stats["clip_frac"].append(clip_fraction(ratio, a.clip_range, w, denom))
        self.actor.train(False)
        return {key: float(np.mean(v)) for key, v in stats.items()}

    def evaluate(self, seeds, env_kwargs: dict | None = None) -> dict:
        env = make_env({**self.env_kwargs, **(env_kwargs or {})})
        eps = [run_episode(env, self.policy, s) for s in seeds]
        jct = [e["metrics"].get("avg_jct", float("nan")) for e in eps]
        return {
            "seeds": [int(s) for s in seeds],
            "avg_jct": float(np.mean(jct)),
            "return": float(np.mean([e["return"] for e in eps])),
            "per_seed_avg_jct": jct,
        }

    # -------------------------------------------------------------- persistence
    def save(self, folder: Path, evaluation: dict | None = None, command: str = "") -> None:
        save_actor(folder, self.actor, self.env_kwargs, self.args, self.steps, evaluation, command)
        buf = io.BytesIO()
        torch.save(
            {
                "actor": self.actor.state_dict(),
                "critic": self.critic.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "steps": torch.tensor(self.steps),
            },
            buf,
        )
        atomic_write_bytes(folder / "resume.pt", buf.getvalue())

    def resume(self, folder: Path) -> bool:
        path = folder / "resume.pt"
        if not path.exists():
            return False
        state = torch.load(path, map_location=self.device, weights_only=True)
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps = int(state["steps"])
        return True
