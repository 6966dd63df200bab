"""HMARL (Zhao & Wu, IEEE TNSM 2022): K schedulers of one data centre learn cooperatively — a MAPPO-style trainer on
``multi_scheduler_v0``.

- **Actor** (shared by every agent: parameter sharing): the hierarchical GNN of :mod:`agents.nets.networks`
  (:class:`~agents.nets.networks.GraphEncoder`, GPU → server → rack → cluster and back) over the agent's own observation
  gives a cluster embedding and the head job's embedding; each candidate placement is scored by one shared MLP from
  its features (``candidate_features`` ⊕ the interference model's predicted slowdown, see
  :mod:`agents.methods.hmarl.interference`) ⊕ those two embeddings, the wait action by its own head; invalid actions are masked
  (categorical over the valid ones). No weight depends on the cluster's size, so a policy trained on a small data
  centre runs on a larger one (:func:`load` rebuilds the layout for the env it is given).
- **Critic**: ``critic="central"`` (MAPPO): an MLP on ``env.state()`` (the global flat encoding with every agent's head
  job) ⊕ the agent's context; ``critic="local"`` (independent learners, IPPO): a head on the actor's own embedding.
- **PPO**: rollouts over ``num_envs`` env copies stepped together (one batched forward for all agents of all copies),
  GAE(λ), clipped surrogate, entropy bonus, value loss, gradient clipping; samples where the agent had a single valid
  action (nothing to decide) are left out of the policy loss.
- The **centralised** baseline is the same learner on the env with ``num_agents=1`` and ``routing="round_robin"``: one
  scheduler over the merged queue.
- **Imitation warm start** (a config's ``imitation:`` block, :class:`ImitationArgs`): DAgger towards a per-agent
  heuristic (:class:`~gpusched_envs.multi_agent.multi_scheduler.HeuristicMultiAgent`, e.g.
  ``sjf-consolidate+backfill``) before PPO: every decisive agent state is labelled with the expert's action, the actor
  fitted by cross-entropy on its masked logits and the critic on the discounted returns (:func:`imitate`).

Run folder (``train(..., out=...)``, ``gpusched train hmarl --config hmarl``)::

    config.json        resolved configuration
    tb/                TensorBoard: episode/return, episode/avg_jct, train/{policy_loss,value_loss,entropy,clip_frac},
                       train/steps_per_second, eval/avg_jct
    checkpoint/        model.pt (actor), meta.json, resume.pt (actor, critic, optimiser, step counter)
    best/              the actor with the lowest eval avg JCT (step 0: the imitation warm start)
    imitation/         the actor right after the imitation warm start; imitation.json: one record per DAgger round

Checkpoints: ``model.pt`` is the actor's ``state_dict`` (``torch.load(weights_only=True)``); ``meta.json`` as the
other agents' (:mod:`agents.checkpoint`) with ``algorithm: "hmarl"``, ``env_id`` the PettingZoo module, the env
kwargs and the interference model's folder. Resume continues the parameters, optimiser and step counter; fresh
episodes are seeded from ``seed`` + the step count (reproducible, not identical to an uninterrupted run).
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
from gpusched_lab.agents.common import (
    REPO_ROOT,
    discounted_returns,
    resolve_device,
    seed_everything,
    set_torch_threads,
)
from gpusched_lab.agents.nets.networks import GraphEncoder, NetworkConfig, config_for_layout, masked, mlp

from gpusched_envs.io import atomic_write_bytes, atomic_write_text

ENV_ID = "gpusched_envs.multi_agent.multi_scheduler_v0"
INTERFERENCE_KEY = "candidate_interference"
CRITICS = ("central", "local")


@dataclass
class HMARLArgs:
    critic: str = "central"
    """central (MAPPO: critic on env.state()) | local (independent learners: critic on the agent's observation)"""
    hidden: int = 32
    """width of the GNN and heads"""
    layers: int = 1
    """GNN up/down sweeps"""
    learning_rate: float = 5e-4
    """Adam step size"""
    num_envs: int = 4
    """env copies stepped together"""
    n_steps: int = 32
    """rollout length per env copy (each step gives one sample per agent)"""
    n_epochs: int = 4
    """passes over each rollout"""
    batch_size: int = 256
    """minibatch size (agent samples)"""
    gamma: float = 0.995
    """discount"""
    gae_lambda: float = 0.95
    """GAE λ"""
    clip_range: float = 0.2
    """PPO clip"""
    ent_coef: float = 0.01
    """entropy bonus"""
    vf_coef: float = 0.5
    """value-loss weight"""
    max_grad_norm: float = 0.5
    """gradient clipping"""
    reward_scale: float = 0.1
    """rewards are multiplied by this before learning"""
    wait_logit_init: float = -2.0
    """initial bias of the wait logit: the policy starts near work-conserving"""
    interference_model: str | None = None
    """folder of an agents.methods.hmarl.interference model: its predicted slowdown becomes a candidate feature (None: zeros)"""
    seed: int = 0
    """seeds python, numpy, torch and the envs"""
    device: str = "auto"
    """auto | cpu | cuda[:N]"""
    torch_threads: int = 1
    """CPU threads for torch (0: torch's default)"""

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------------------- networks
def network_config(env, hidden: int, layers: int) -> NetworkConfig:
    """The GraphEncoder layout of a ``multi_scheduler_v0`` env (padded sizes; the weights do not depend on them)."""
    return config_for_layout(env.encoder.layout, "gnn", env.wait_action + 1, "none", hidden, layers)


def obs_dims(env) -> dict[str, int]:
    sp = env.observation_space(env.possible_agents[0]).spaces
    return {
        "node": sp["node_features"].shape[1],
        "edge": sp["edge_features"].shape[1],
        "job": sp["job_features"].shape[1],
        "context": sp["context"].shape[0],
        "candidate": sp["candidate_features"].shape[1] + 1,  # + the interference model's prediction
        "heads": env.heads,
        # the env's preemption slots and coordination features (absent from older checkpoints: 0)
        "window": env.window,
        "preempt": env.preempt,
        "coordination": sp["coordination_features"].shape[1] if "coordination_features" in sp else 0,
    }


class HMARLActor(nn.Module):
    """Shared actor: hierarchical GNN embeddings → one logit per candidate placement (shared MLP), one per
    preemptible running slot (env ``preempt > 0``: from the running job's row embedding) + the wait logit. With the
    env's ``coordination`` features, each placement and preemption also reads its job's row of them."""

    def __init__(self, cfg: NetworkConfig, dims: dict[str, int], wait_logit_init: float = -2.0):
        super().__init__()
        h = cfg.hidden
        self.cfg, self.dims = cfg, dims
        coord = dims.get("coordination", 0)
        self.encoder = GraphEncoder(cfg, dims["node"], dims["edge"], dims["job"], dims["context"])
        self.candidate_in = mlp([dims["candidate"], h, h], last_activation=True)
        self.candidate_head = mlp([3 * h + coord, h, 1])
        if dims.get("preempt", 0):
            self.preempt_head = mlp([2 * h + coord, h, 1])
        self.wait_head = mlp([2 * h, h, 1])
        with torch.no_grad():
            self.wait_head[-1].bias.fill_(wait_logit_init)

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, H·C + P + 1)`` logits (unmasked) and the ``(B, 2h)`` embedding (cluster ⊕ head job)."""
        cluster, jobs, _ = self.encoder(obs)
        heads = self.dims["heads"]
        emb = torch.cat([cluster, jobs[:, 0]], dim=-1)
        cand = torch.cat([obs["candidate_features"], obs[INTERFERENCE_KEY]], dim=-1)
        c = self.candidate_in(cand)  # (B, H·C, h)
        per_head = c.shape[1] // heads
        job_of = jobs[:, :heads].repeat_interleave(per_head, dim=1)  # the job each action would place
        ctx = cluster.unsqueeze(1).expand(-1, c.shape[1], -1)
        parts = [c, job_of, ctx]
        coord = obs.get("coordination_features")
        if coord is not None:
            parts.append(coord[:, :heads].repeat_interleave(per_head, dim=1))
        out = [self.candidate_head(torch.cat(parts, dim=-1)).squeeze(-1)]
        p = self.dims.get("preempt", 0)
        if p:
            w = self.dims["window"]
            run = [jobs[:, w : w + p], cluster.unsqueeze(1).expand(-1, p, -1)]
            if coord is not None:
                run.append(coord[:, heads : heads + p])
            out.append(self.preempt_head(torch.cat(run, dim=-1)).squeeze(-1))
        out.append(self.wait_head(emb))
        return torch.cat(out, dim=-1), emb

    def with_layout(self, cfg: NetworkConfig) -> HMARLActor:
        """The same weights on another env's layout (another cluster size or candidate count)."""
        other = HMARLActor(cfg, self.dims)
        other.load_state_dict(self.state_dict())
        return other


class CentralCritic(nn.Module):
    """V(state ⊕ agent context): MAPPO's centralised value function."""

    def __init__(self, state_dim: int, context_dim: int, hidden: int):
        super().__init__()
        self.net = mlp([state_dim + context_dim, 2 * hidden, hidden, 1])

    def forward(self, state: torch.Tensor, obs: dict[str, torch.Tensor], emb: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([state, obs["context"]], dim=-1)).squeeze(-1)


class LocalCritic(nn.Module):
    """V(own observation): the independent learners' value function (reads the actor's embedding)."""

    def __init__(self, hidden: int, context_dim: int):
        super().__init__()
        self.net = mlp([2 * hidden + context_dim, hidden, 1])

    def forward(self, state: torch.Tensor, obs: dict[str, torch.Tensor], emb: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([emb, obs["context"]], dim=-1)).squeeze(-1)


# ---------------------------------------------------------------------------------------------------------- acting
def stack_agents(observations: dict, agents: list[str], interference: np.ndarray) -> dict[str, np.ndarray]:
    """The agents' observations as one batch ``(K, ...)`` with the interference feature added."""
    keys = observations[agents[0]].keys()
    out = {k: np.stack([observations[a][k] for a in agents]) for k in keys}
    out[INTERFERENCE_KEY] = interference[..., None].astype(np.float32)
    return out


def to_tensors(batch: dict[str, np.ndarray], device) -> dict[str, torch.Tensor]:
    return {
        k: torch.as_tensor(v, device=device).long()
        if k == "edge_index"
        else torch.as_tensor(v, device=device).float()
        for k, v in batch.items()
    }


class HMARLPolicy:
    """A trained actor acting for every agent of a ``multi_scheduler_v0`` env: ``policy(env, observations)`` →
    actions (deterministic masked argmax, or sampled with ``deterministic=False``)."""

    def __init__(self, actor: HMARLActor, interference=None, device="cpu", meta: dict | None = None):
        self.actor = actor.eval().to(device)
        self.interference = interference
        self.device = torch.device(device)
        self.meta = meta or {}
        self._layout_of: object | None = None

    def _actor_for(self, env) -> HMARLActor:
        if self._layout_of is not env:
            cfg = network_config(env, self.actor.cfg.hidden, self.actor.cfg.layers)
            if cfg != self.actor.cfg:
                self.actor = self.actor.with_layout(cfg).eval().to(self.device)
            self._layout_of = env
        return self.actor

    def batch(self, env, observations: dict) -> dict[str, np.ndarray]:
        agents = list(observations)
        interference = (
            self.interference.candidate_scores(env, agents)
            if self.interference is not None
            else np.zeros((len(agents), env.num_choices), np.float32)
        )
        return stack_agents(observations, agents, interference)

    @torch.no_grad()
    def __call__(self, env, observations: dict, deterministic: bool = True) -> dict[str, int]:
        if not observations:
            return {}
        actor = self._actor_for(env)
        t = to_tensors(self.batch(env, observations), self.device)
        logits = masked(actor(t)[0], t["action_mask"])
        if deterministic:
            a = logits.argmax(-1)
        else:
            a = torch.distributions.Categorical(logits=logits).sample()
        return {agent: int(x) for agent, x in zip(observations, a.tolist(), strict=True)}

    @torch.no_grad()
    def act_one(self, env, agent: str, observation: dict) -> int:
        """One scheduler's decision from its own observation (what a deployed scheduler computes; its latency is
        the decision latency per scheduler)."""
        return self(env, {agent: observation})[agent]


def load_interference(path: str | None):
    if not path:
        return None
    from gpusched_lab.agents.methods.hmarl.interference import InterferenceModel

    return InterferenceModel.load(path)


# ---------------------------------------------------------------------------------------------------------- training
@dataclass
class HMARLConfig:
    """A training run (``gpusched train hmarl --config ...``; YAML keys as here)."""

    env_kwargs: dict = field(default_factory=dict)
    steps: int = 20_000  # env steps summed over the env copies (each gives one sample per agent)
    eval_every: int = 0  # env steps between evaluations (0: only at the end)
    eval_seeds: list[int] = field(default_factory=lambda: [10_000, 10_001, 10_002])
    eval_env_kwargs: dict = field(
        default_factory=dict
    )  # merged over env_kwargs for evaluation (validation data)
    checkpoint_every: int = 0
    args: dict = field(default_factory=dict)
    imitation: dict | None = None  # an ImitationArgs mapping: DAgger warm start before PPO (None: none)

    def to_dict(self) -> dict:
        return asdict(self)


def make_env(env_kwargs: dict):
    from gpusched_envs.multi_agent import multi_scheduler_v0

    kwargs = dict(env_kwargs)
    kwargs.setdefault("obs_mode", "graph")
    if kwargs["obs_mode"] != "graph":
        raise ValueError(
            f"env_kwargs.obs_mode: HMARL's actor reads graph observations, got {kwargs['obs_mode']!r}"
        )
    return multi_scheduler_v0.parallel_env(**kwargs)


def run_episode(env, policy, seed: int, deterministic: bool = True) -> dict:
    """One episode: the shared return, the global metrics and per-decision latency (seconds per agent decision)."""
    obs, _ = env.reset(seed=int(seed))
    total, steps, infos, spent, decisions = 0.0, 0, {}, 0.0, 0
    while env.agents:
        t0 = time.perf_counter()
        actions = policy(env, obs, deterministic) if isinstance(policy, HMARLPolicy) else policy(env, obs)
        spent += time.perf_counter() - t0
        decisions += len(obs)
        obs, rewards, _, _, infos = env.step(actions)
        total += rewards[env.possible_agents[0]]
        steps += 1
    metrics = infos[env.possible_agents[0]]["metrics"] if infos else {}
    return {
        "seed": int(seed),
        "return": total,
        "steps": steps,
        "metrics": metrics,
        "seconds_per_agent_decision": spent / max(decisions, 1),
    }


class Trainer:
    """MAPPO / IPPO over ``num_envs`` copies of ``multi_scheduler_v0``."""

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
            parts = [self._batch(i) for i in range(n)]
            batch = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
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
        parts = [self._batch(i) for i in range(n)]
        last = to_tensors({key: np.concatenate([p[key] for p in parts]) for key in parts[0]}, self.device)
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
            adv = (adv - adv[dec].mean()) / (adv[dec].std() + 1e-8)
        rng = np.random.default_rng(a.seed + self.steps)
        stats = {"policy_loss": [], "value_loss": [], "entropy": [], "clip_frac": []}
        for _ in range(a.n_epochs):
            perm = rng.permutation(n)
            for lo in range(0, n, a.batch_size):
                idx = perm[lo : lo + a.batch_size]
                t = to_tensors({key: v[idx] for key, v in obs.items()}, self.device)
                logits, emb = self.actor(t)
                dist = torch.distributions.Categorical(logits=masked(logits, t["action_mask"]))
                act = torch.as_tensor(flat["action"][idx], device=self.device)
                logp = dist.log_prob(act)
                old = torch.as_tensor(flat["logp"][idx], device=self.device)
                ad = torch.as_tensor(adv[idx], device=self.device, dtype=torch.float32)
                w = torch.as_tensor(dec[idx], device=self.device, dtype=torch.float32)
                ratio = torch.exp(logp - old)
                surr = torch.min(ratio * ad, torch.clamp(ratio, 1 - a.clip_range, 1 + a.clip_range) * ad)
                denom = w.sum().clamp(min=1.0)
                policy_loss = -(surr * w).sum() / denom
                entropy = (dist.entropy() * w).sum() / denom
                value = self.critic(torch.as_tensor(flat["state"][idx], device=self.device), t, emb)
                ret = torch.as_tensor(flat["return"][idx], device=self.device, dtype=torch.float32)
                value_loss = torch.nn.functional.mse_loss(value, ret)
                loss = policy_loss + a.vf_coef * value_loss - a.ent_coef * entropy
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(
                    list(self.actor.parameters()) + list(self.critic.parameters()), a.max_grad_norm
                )
                self.optimizer.step()
                stats["policy_loss"].append(policy_loss.item())
                stats["value_loss"].append(value_loss.item())
                stats["entropy"].append(entropy.item())
                stats["clip_frac"].append(
                    float(((ratio - 1).abs() > a.clip_range).float().mul(w).sum() / denom)
                )
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


# ---------------------------------------------------------------------------------------------------------- imitation
@dataclass
class ImitationArgs:
    """DAgger warm start (Ross et al., AISTATS'11; as :mod:`train.bc` for JobSelect): a config's ``imitation``
    block. Round 0 rolls out the expert; round r acts per agent with the expert's action with probability
    ``beta_decay**r``, else the actor's own (argmax), and every agent's state is labelled with the expert's action."""

    expert: str = "sjf-consolidate+backfill"
    """per-agent heuristic to imitate (HeuristicMultiAgent.from_name: ORDER-PLACEMENT[+backfill])"""
    rounds: int = 3
    """DAgger rounds (1 = plain behaviour cloning)"""
    episodes: int = 4
    """episodes collected per round"""
    epochs: int = 4
    """passes over all the data collected so far, after each round"""
    batch_size: int = 256
    learning_rate: float = 1e-3
    value_coef: float = 0.5
    """weight of the critic's regression on the discounted returns (scaled by their variance)"""
    beta_decay: float = 0.5
    max_steps: int = 5_000
    """cap on one collected episode's steps"""

    @classmethod
    def from_dict(cls, doc: dict) -> ImitationArgs:
        if not isinstance(doc, dict):
            raise ValueError(
                f"imitation: expected a mapping (e.g. {{expert: sjf-consolidate+backfill}}), got {doc!r}"
            )
        unknown = sorted(set(doc) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"imitation: unknown key(s) {', '.join(unknown)}; known: {', '.join(cls.__dataclass_fields__)}"
            )
        args = cls(**doc)
        for name in ("rounds", "episodes", "epochs", "batch_size", "max_steps"):
            value = getattr(args, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"imitation.{name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= float(args.beta_decay) <= 1.0:
            raise ValueError(f"imitation.beta_decay must be in [0, 1], got {args.beta_decay!r}")
        from gpusched_envs.multi_agent.multi_scheduler import HeuristicMultiAgent

        HeuristicMultiAgent.from_name(args.expert)  # a bad name fails here, before any rollout
        return args


def collect_dagger(trainer: Trainer, expert, seed: int, beta: float, max_steps: int, data: dict) -> dict:
    """One episode on ``trainer.envs[0]``: every agent acts as the expert with probability ``beta`` (per agent and
    step), else as the actor (masked argmax). Every decisive agent state (more than one valid action) is appended to
    ``data`` with the expert's action as its label, the global state and the discounted shared return."""
    env, a = trainer.envs[0], trainer.args
    obs, _ = env.reset(seed=int(seed))
    coin = np.random.default_rng(seed)
    agents = trainer.agents
    steps, agree, decisive, rewards, rows, infos = 0, 0, 0, [], [], {}
    while env.agents and steps < max_steps:
        labels = expert(env, obs)
        batch = trainer.policy.batch(env, obs)
        mine = trainer.policy(env, obs)
        keep = batch["action_mask"].sum(-1) > 1
        state = env.state()
        for j, agent in enumerate(agents):
            if keep[j]:
                decisive += 1
                agree += int(mine[agent] == labels[agent])
                rows.append(({k: v[j] for k, v in batch.items()}, labels[agent], state, steps))
        actions = {ag: labels[ag] if coin.random() < beta else mine[ag] for ag in agents}
        obs, rew, _, _, infos = env.step(actions)
        rewards.append(float(rew[agents[0]]) * a.reward_scale)
        steps += 1
    returns = discounted_returns(rewards, a.gamma)
    for ob, label, state, t in rows:
        for k, v in ob.items():
            data.setdefault("obs", {}).setdefault(k, []).append(v)
        data.setdefault("action", []).append(int(label))
        data.setdefault("state", []).append(state)
        data.setdefault("return", []).append(float(returns[t]))
    metrics = infos[agents[0]].get("metrics", {}) if infos and not env.agents else {}
    return {
        "steps": steps,
        "agreement": agree / max(decisive, 1),
        "avg_jct": metrics.get("avg_jct"),
        "done": not env.agents,
    }


def fit_imitation(trainer: Trainer, data: dict, args: ImitationArgs, rng: np.random.Generator) -> dict:
    """Cross-entropy of the actor's masked distribution to the expert's labels, plus the critic's regression on the
    discounted returns (divided by their variance, so it neither swamps nor vanishes next to the cross-entropy)."""
    obs = {k: np.stack(v) for k, v in data["obs"].items()}
    actions = np.asarray(data["action"], dtype=np.int64)
    states = np.stack(data["state"]).astype(np.float32)
    returns = np.asarray(data["return"], dtype=np.float32)
    value_norm = float(returns.var()) + 1e-8
    params = list(trainer.actor.parameters()) + list(trainer.critic.parameters())
    optimiser = torch.optim.Adam(params, lr=args.learning_rate)
    dev = trainer.device
    trainer.actor.train(True)
    losses, accs = [], []
    n = len(actions)
    for _ in range(args.epochs):
        order = rng.permutation(n)
        for lo in range(0, n, args.batch_size):
            idx = order[lo : lo + args.batch_size]
            t = to_tensors({k: v[idx] for k, v in obs.items()}, dev)
            logits, emb = trainer.actor(t)
            logits = masked(logits, t["action_mask"])
            act = torch.as_tensor(actions[idx], device=dev)
            ce = torch.nn.functional.cross_entropy(logits, act)
            value = trainer.critic(torch.as_tensor(states[idx], device=dev), t, emb)
            value_loss = torch.nn.functional.mse_loss(value, torch.as_tensor(returns[idx], device=dev))
            loss = ce + args.value_coef * value_loss / value_norm
            optimiser.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 1.0)
            optimiser.step()
            losses.append(ce.item())
            accs.append(float((logits.argmax(-1) == act).float().mean()))
    trainer.actor.train(False)
    return {"cross_entropy": float(np.mean(losses[-10:])), "train_accuracy": float(np.mean(accs[-10:]))}


def imitate(trainer: Trainer, args: ImitationArgs, seed: int = 0, log=None) -> list[dict]:
    """DAgger warm start of ``trainer``'s actor and critic towards the per-agent heuristic ``args.expert``; one
    record per round (``agreement``: the share of decisive agent states where the actor's argmax equals the
    expert's action, measured on the round's rollouts before that round's fit)."""
    from gpusched_envs.multi_agent.multi_scheduler import HeuristicMultiAgent

    expert = HeuristicMultiAgent.from_name(args.expert)
    rng = np.random.default_rng(seed)
    data: dict = {}
    history = []
    for rnd in range(args.rounds):
        beta = args.beta_decay**rnd
        episodes = [
            collect_dagger(
                trainer, expert, seed * 100_003 + 50_021 + rnd * 1_009 + i, beta, args.max_steps, data
            )
            for i in range(args.episodes)
        ]
        stats = fit_imitation(trainer, data, args, rng)
        done = [e["avg_jct"] for e in episodes if e["avg_jct"] is not None]
        record = {
            "round": rnd,
            "samples": len(data.get("action", [])),
            "beta": beta,
            "agreement": float(np.mean([e["agreement"] for e in episodes])),
            "avg_jct": float(np.mean(done)) if done else None,
            **stats,
        }
        history.append(record)
        if log is not None:
            log(record)
    return history


def gae(rewards, values, dones, last_value, gamma: float, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimates over ``(T, M)`` arrays; ``dones[t]`` = the episode ended at step t."""
    t_max = len(rewards)
    adv = np.zeros_like(rewards, dtype=np.float32)
    last = np.zeros(rewards.shape[1], dtype=np.float32)
    for t in reversed(range(t_max)):
        next_value = last_value if t == t_max - 1 else values[t + 1]
        live = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * live - values[t]
        last = delta + gamma * lam * live * last
        adv[t] = last
    return adv, adv + values


def save_actor(
    folder: Path,
    actor: HMARLActor,
    env_kwargs: dict,
    args: HMARLArgs,
    steps: int,
    evaluation: dict | None,
    command: str = "",
) -> Path:
    """``model.pt`` (actor ``state_dict``) then ``meta.json`` (with its sha256), each atomically."""
    from datetime import UTC, datetime

    folder = Path(folder)
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in actor.state_dict().items()}, buf)
    data = buf.getvalue()
    atomic_write_bytes(folder / "model.pt", data)
    meta = {
        "format": 1,
        "algorithm": "hmarl" if args.critic == "central" else "hmarl-independent",
        "policy": "logits",
        "env_id": ENV_ID,
        "env_kwargs": env_kwargs,
        "obs_mode": "graph",
        "network": actor.cfg.to_dict(),
        "dims": actor.dims,
        "steps": int(steps),
        "seed": int(args.seed),
        "command": command,
        "evaluation": evaluation,
        "args": args.to_dict(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "model_sha256": hashlib.sha256(data).hexdigest(),
    }
    atomic_write_text(folder / "meta.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return folder


def interference_folder(folder: Path, model_path) -> Path:
    """The interference model a checkpoint names: a relative path inside the repository (where the shipped
    checkpoints live) or beside the checkpoint. A checkpoint may not make the loader read files elsewhere."""
    root = REPO_ROOT
    where = f"{folder / 'meta.json'}: args.interference_model"
    if not isinstance(model_path, str) or Path(model_path).is_absolute() or ".." in Path(model_path).parts:
        raise ValueError(f"{where} must be a relative path without '..', got {model_path!r}")
    for base in (folder.parent, root):
        candidate = (base / model_path).resolve()
        if candidate.is_dir() and candidate.is_relative_to(base.resolve()):
            return candidate
    raise ValueError(
        f"{where}: no checkpoint folder {model_path!r} beside the checkpoint or in the repository"
    )


def load(path: str | Path, device: str = "cpu", interference: bool = True) -> HMARLPolicy:
    """A saved actor as an :class:`HMARLPolicy` (it adapts to the layout of whatever env it acts on). The
    interference model named in the metadata is loaded from its folder (relative to the repository root or absolute)."""
    from gpusched_lab.agents.methods.hmarl.interference import read_meta, read_state

    folder, meta = read_meta(path, ("hmarl", "hmarl-independent"))
    if meta.get("env_id") != ENV_ID:
        raise ValueError(
            f"{folder / 'meta.json'}: env_id {meta.get('env_id')!r}, an HMARL checkpoint has {ENV_ID}"
        )
    try:
        cfg = NetworkConfig(**meta["network"])
        dims = {k: int(v) for k, v in meta["dims"].items()}
        actor = HMARLActor(cfg, dims)
        actor.load_state_dict(read_state(folder, meta))
    except (KeyError, TypeError, AttributeError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{folder}: network description and weights do not match ({first})") from None
    model_path = meta.get("args", {}).get("interference_model")
    model = None
    if interference and model_path:
        model = load_interference(str(interference_folder(folder, model_path)))
    return HMARLPolicy(actor, model, device, meta)


def train(
    cfg: HMARLConfig, out: Path | None = None, command: str = "", resume: bool = False, log=print
) -> dict:
    """Train; with ``out`` write TensorBoard logs, checkpoints and the best actor. Returns a summary."""
    known = {f for f in HMARLArgs.__dataclass_fields__}
    unknown = set(cfg.args) - known
    if unknown:
        raise ValueError(f"args: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    args = HMARLArgs(**cfg.args)
    imitation = ImitationArgs.from_dict(cfg.imitation) if cfg.imitation is not None else None
    trainer = Trainer(cfg.env_kwargs, args)
    writer = None
    resumed = False
    best = float("inf")
    if out is not None:
        out = Path(out)
        atomic_write_text(
            out / "config.json", json.dumps({**cfg.to_dict(), "command": command}, indent=2) + "\n"
        )
        if resume and trainer.resume(out / "checkpoint"):
            resumed = True
            log(f"resumed from {out / 'checkpoint'} at step {trainer.steps}")
            if (out / "best" / "meta.json").exists():  # keep the best so far unless a later policy beats it
                prev = json.loads((out / "best" / "meta.json").read_text()).get("evaluation") or {}
                best = float(prev.get("avg_jct", best))
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(out / "tb"))
    if imitation is not None and not resumed:
        history = imitate(trainer, imitation, seed=args.seed, log=lambda r: log(f"imitation {r}"))
        evaluation = trainer.evaluate(cfg.eval_seeds, cfg.eval_env_kwargs)
        evaluation.update(steps=0, stage="imitation")
        log(f"after imitation: eval avg JCT {evaluation['avg_jct']:,.0f} s")
        if writer is not None:
            writer.add_scalar("eval/avg_jct", evaluation["avg_jct"], 0)
        if out is not None:
            atomic_write_text(out / "imitation.json", json.dumps(history, indent=2) + "\n")
            save_actor(out / "imitation", trainer.actor, cfg.env_kwargs, args, 0, evaluation, command)
            save_actor(out / "best", trainer.actor, cfg.env_kwargs, args, 0, evaluation, command)
            trainer.save(out / "checkpoint", evaluation, command)
        best = evaluation["avg_jct"]
    next_eval = trainer.steps + (cfg.eval_every or cfg.steps)
    next_ckpt = trainer.steps + (cfg.checkpoint_every or cfg.steps)
    evaluation = None
    t0, s0 = time.perf_counter(), trainer.steps
    while trainer.steps < cfg.steps:
        n_ep = len(trainer.episodes)
        roll = trainer.collect()
        stats = trainer.update(roll)
        if writer is not None:
            for key, v in stats.items():
                writer.add_scalar(f"train/{key}", v, trainer.steps)
            writer.add_scalar(
                "train/steps_per_second", (trainer.steps - s0) / (time.perf_counter() - t0), trainer.steps
            )
            for ep in trainer.episodes[n_ep:]:
                writer.add_scalar("episode/return", ep["return"], trainer.steps)
                if "avg_jct" in ep:
                    writer.add_scalar("episode/avg_jct", ep["avg_jct"], trainer.steps)
        if trainer.steps >= next_eval or trainer.steps >= cfg.steps:
            evaluation = trainer.evaluate(cfg.eval_seeds, cfg.eval_env_kwargs)
            evaluation["steps"] = trainer.steps
            recent = trainer.episodes[-20:]
            log(
                f"step {trainer.steps}: eval avg JCT {evaluation['avg_jct']:,.0f} s, recent train return "
                f"{np.mean([e['return'] for e in recent]) if recent else float('nan'):.3f}, "
                f"entropy {stats['entropy']:.3f}"
            )
            if writer is not None:
                writer.add_scalar("eval/avg_jct", evaluation["avg_jct"], trainer.steps)
            if out is not None and evaluation["avg_jct"] < best:
                best = evaluation["avg_jct"]
                save_actor(
                    out / "best", trainer.actor, cfg.env_kwargs, args, trainer.steps, evaluation, command
                )
            next_eval += cfg.eval_every or cfg.steps
        if out is not None and (trainer.steps >= next_ckpt or trainer.steps >= cfg.steps):
            trainer.save(out / "checkpoint", evaluation, command)
            next_ckpt += cfg.checkpoint_every or cfg.steps
    if writer is not None:
        writer.close()
    return {
        "steps": trainer.steps,
        "evaluation": evaluation,
        "episodes": len(trainer.episodes),
        "trainer": trainer,
    }


def load_config(path: str | Path) -> HMARLConfig:
    """A YAML run configuration (``train/configs/hmarl*.yaml`` by name, or a path), read with ``yaml.safe_load``."""
    import yaml

    p = Path(path)
    if not p.exists():
        here = REPO_ROOT / "train" / "configs"
        for cand in (here / p, here / f"{p}.yaml"):
            if cand.exists():
                p = cand
                break
        else:
            raise FileNotFoundError(f"config {path!s} not found (neither a path nor one of {here})")
    doc = yaml.safe_load(p.read_text()) or {}
    if not isinstance(doc, dict):
        raise ValueError(f"{p}: a config is a mapping of keys to values")
    known = set(HMARLConfig.__dataclass_fields__)
    unknown = set(doc) - known
    if unknown:
        raise ValueError(f"{p}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    return HMARLConfig(**doc)


def apply_overrides(cfg: HMARLConfig, items: list[str]) -> None:
    """``--set key=value``: a top-level key (``steps=1000``, ``imitation=null``), an algorithm argument
    (``critic=local`` or ``args.critic=local``), an env kwarg (``env_kwargs.num_agents=8``) or an imitation key
    (``imitation.rounds=2``); values parsed as YAML scalars."""
    import yaml

    top = set(HMARLConfig.__dataclass_fields__) - {"args", "env_kwargs", "eval_env_kwargs"}
    arg_fields = set(HMARLArgs.__dataclass_fields__)
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes key=value, got {item!r}")
        value = yaml.safe_load(raw) if raw else None
        if key.startswith("env_kwargs."):
            cfg.env_kwargs = {**cfg.env_kwargs, key.split(".", 1)[1]: value}
        elif key.startswith("eval_env_kwargs."):
            cfg.eval_env_kwargs = {**cfg.eval_env_kwargs, key.split(".", 1)[1]: value}
        elif key.startswith("imitation."):  # imitation.rounds=2 (``imitation=null`` turns the warm start off)
            cfg.imitation = {**(cfg.imitation or {}), key.split(".", 1)[1]: value}
        elif key.removeprefix("args.") in arg_fields:
            cfg.args = {**cfg.args, key.removeprefix("args."): value}
        elif key in top:
            setattr(cfg, key, value)
        else:
            raise ValueError(
                f"--set {key}: unknown key (top-level: {', '.join(sorted(top))}; env_kwargs.NAME; imitation.NAME; "
                f"args: {', '.join(sorted(arg_fields))})"
            )


def train_command(
    config: str,
    out: Path,
    steps: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    resume: bool = False,
    set_: list[str] | None = None,
    command: str = "",
    log=print,
) -> dict:
    """What ``gpusched train hmarl`` runs: config file < options < ``--set``; returns :func:`train`'s summary."""
    cfg = load_config(config)
    if steps is not None:
        cfg.steps = steps
    if seed is not None:
        cfg.args = {**cfg.args, "seed": seed}
    if device is not None:
        cfg.args = {**cfg.args, "device": device}
    apply_overrides(cfg, set_ or [])
    if not isinstance(cfg.steps, int) or cfg.steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {cfg.steps!r}")
    return train(cfg, Path(out), command=command, resume=resume, log=log)
