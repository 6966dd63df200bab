"""HMARL's networks and acting: the shared actor (:class:`HMARLActor`, the hierarchical GNN of
:mod:`agents.nets.gnn` and one MLP scoring each candidate placement), the central and local critics, a trained actor
acting for every agent of an env (:class:`HMARLPolicy`), the env (:func:`make_env`) and one episode
(:func:`run_episode`)."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn as nn
from gpusched_lab.agents.nets.common import NetworkConfig, config_for_layout, masked, mlp
from gpusched_lab.agents.nets.gnn import GraphEncoder

ENV_ID = "gpusched_envs.multi_agent.multi_scheduler_v1"
INTERFERENCE_KEY = "candidate_interference"


def network_config(env, hidden: int, layers: int) -> NetworkConfig:
    """The GraphEncoder layout of a ``multi_scheduler_v1`` env (padded sizes; the weights do not depend on them)."""
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
    """A trained actor acting for every agent of a ``multi_scheduler_v1`` env: ``policy(env, observations)`` →
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


def make_env(env_kwargs: dict):
    from gpusched_envs.multi_agent import multi_scheduler_v1

    kwargs = dict(env_kwargs)
    kwargs.setdefault("obs_mode", "graph")
    if kwargs["obs_mode"] != "graph":
        raise ValueError(
            f"env_kwargs.obs_mode: HMARL's actor reads graph observations, got {kwargs['obs_mode']!r}"
        )
    return multi_scheduler_v1.parallel_env(**kwargs)


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
