"""MetaPlace's policy and acting: the placement policy (:class:`PlacementPolicy`, GNN logits per server + defer and a
value head), its env, the performance model's cautious score (:func:`model_slowdown`), one episode
(:func:`rollout`) and the policy's log-probabilities at recorded decisions (:func:`policy_logp`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from gpusched_lab.agents.methods.metaplace.config import MetaArgs
from gpusched_lab.agents.methods.metaplace.perf_model import PerformanceModel
from gpusched_lab.agents.nets.common import NetworkConfig, config_for_env, masked, obs_to_tensors
from gpusched_lab.agents.nets.networks import build_network

ENV_ID = "gpusched/WorkerPlacement-v1"


class PlacementPolicy(nn.Module):
    """GNN scorer (logits per server + defer) and a value head on the pooled embedding."""

    def __init__(self, cfg: NetworkConfig, obs_space, model_score: float = 0.0):
        super().__init__()
        self.cfg = cfg
        self.scorer = build_network(cfg, obs_space)
        self.value = nn.Linear(cfg.hidden, 1)
        # w of the model-based score (logits − w · Δ, Δ the performance model's predicted marginal log slowdown):
        # learned with the rest (meta-trained, adapted); 0 switches the score off
        self.model_weight = nn.Parameter(torch.tensor(float(model_score)))

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        scores, emb = self.scorer.scores_and_embedding(obs)
        return scores, self.value(emb).squeeze(-1)


def make_env(args: MetaArgs):
    import gymnasium as gym

    import gpusched_envs.envs  # noqa: F401 - registers the ids

    return gym.make(ENV_ID, cluster=args.cluster, num_jobs=args.num_jobs, obs_mode="graph")


def make_policy(env, args: MetaArgs) -> PlacementPolicy:
    cfg = config_for_env(env, "gnn", hidden=args.hidden, layers=args.layers, slots="servers")
    return PlacementPolicy(cfg, env.observation_space, args.model_score)


@dataclass
class Episode:
    obs: list[dict]
    actions: list[int]
    bonus: list[np.ndarray]
    slowdown: list[np.ndarray]  # the performance model's Δ per action per decision (0 without a model)
    rewards: list[float]  # reward after each recorded decision (forced decisions' rewards folded in)
    metrics: dict


def _copy_obs(obs: dict) -> dict:
    return {k: np.array(v, copy=True) for k, v in obs.items()}


def model_slowdown(
    perf: PerformanceModel, env, mask: np.ndarray, caution: float
) -> tuple[np.ndarray, np.ndarray]:
    """(A,) cautious predicted marginal log slowdown ``Δ + c σ`` of each valid server relative to the best one
    (0 on masked actions and on defer), and the ensemble spread σ.

    Relative to the best server: the model ranks servers; whether to defer stays the GNN's call (a raw Δ pushes
    every server below defer on a task where the refitted model predicts large slowdowns, and the policy then
    defers jobs for ever). Cautious: a placement the model is unsure of is not preferred on a hopeful mean."""
    d, u = perf.candidate_slowdown(env)
    if caution:
        d = d + caution * u
    valid = np.flatnonzero(mask)
    servers = valid[valid < len(d) - 1]
    if len(servers):
        d = (d - d[servers].min()).astype(np.float32)
        d[mask == 0] = 0.0
        d[-1] = 0.0  # defer
    return d, u


@torch.no_grad()
def rollout(
    policy: PlacementPolicy,
    env,
    seed: int,
    *,
    greedy: bool,
    rng: np.random.Generator | None = None,
    perf: PerformanceModel | None = None,
    bonus: float = 0.0,
    expert=None,
    observe: bool = True,
    caution: float = 0.0,
) -> Episode:
    """One episode. Scores: ``logits − w Δ`` (``w`` the policy's model weight, ``Δ`` the performance model's
    predicted marginal log slowdown of each server made cautious, ``Δ + c σ`` with ``c`` = ``caution`` and σ
    the ensemble's spread, when ``perf`` is given and ``w ≠ 0``). ``greedy``: masked argmax of the scores; else
    sampled from ``softmax(scores + b)``, the exploration bonus ``b = β w σ`` (β = ``bonus``: optimism in the
    model score's own units, so β = c makes an exploratory choice judge a server by its mean prediction) or,
    without a model score, ``b = β σ / mean σ``. ``perf`` also records the iteration times the env reports unless ``observe`` is false (evaluation
    episodes). ``expert(env) -> action``: act by it (and record it) instead of the policy, for behaviour cloning."""
    obs, info = env.reset(seed=int(seed))
    ep = Episode([], [], [], [], [], {})
    use_model = perf is not None and perf.trained and float(policy.model_weight.detach()) != 0.0
    w = float(policy.model_weight.detach())
    if perf is not None and observe:
        perf.observe(env, info)
    pending = 0.0
    while True:
        mask = obs["action_mask"]
        valid = np.flatnonzero(mask)
        b = np.zeros(len(mask), dtype=np.float32)
        d = np.zeros(len(mask), dtype=np.float32)
        if expert is not None:
            a = int(expert(env))
            record = len(valid) > 1
        elif len(valid) == 1:
            a, record = int(valid[0]), False
        else:
            record = True
            logits, _ = policy(obs_to_tensors(obs, batched=False))
            u = None
            if use_model:
                d, u = model_slowdown(perf, env, mask, caution)
                logits = logits - w * torch.as_tensor(d)
            logits = masked(logits, torch.as_tensor(mask).unsqueeze(0))[0]
            if greedy:
                a = int(logits.argmax())
            else:
                if perf is not None and bonus > 0 and perf.trained:
                    if u is None:
                        u = perf.candidate_uncertainty(env)
                    mean_u = float(u[valid].mean())
                    if use_model:
                        b = (bonus * w * u).astype(np.float32)
                    elif mean_u > 0:
                        b = (bonus * u / mean_u).astype(np.float32)
                    b[mask == 0] = 0.0
                p = torch.softmax(logits + torch.as_tensor(b), -1).numpy().astype(np.float64)
                a = int(rng.choice(len(p), p=p / p.sum()))
        if record:
            if ep.actions:
                ep.rewards[-1] += pending
            elif pending:
                pass  # rewards before the first recorded decision do not depend on the policy
            pending = 0.0
            ep.obs.append(_copy_obs(obs))
            ep.actions.append(a)
            ep.bonus.append(b)
            ep.slowdown.append(d)
            ep.rewards.append(0.0)
        obs, r, terminated, truncated, info = env.step(a)
        if perf is not None and observe:
            perf.observe(env, info)
        pending += float(r)
        if terminated or truncated:
            if ep.actions:
                ep.rewards[-1] += pending
            ep.metrics = dict(info.get("metrics") or {})
            return ep


def _batch(obs: list[dict]) -> dict:
    return obs_to_tensors({k: np.stack([o[k] for o in obs]) for k in obs[0]}, batched=True)


def policy_logp(policy: PlacementPolicy, episodes: list[Episode]) -> torch.Tensor | None:
    """(N, A) log-probabilities of the (non-exploring) policy ``softmax(logits − w Δ)`` at every recorded decision
    of ``episodes`` (−inf on masked actions); None without decisions."""
    obs = [o for ep in episodes for o in ep.obs]
    if not obs:
        return None
    t = _batch(obs)
    logits, _ = policy(t)
    slow = torch.as_tensor(np.stack([d for ep in episodes for d in ep.slowdown]))
    return torch.log_softmax(masked(logits - policy.model_weight * slow, t["action_mask"]), -1)


def new_perf_model(env, seed: int) -> PerformanceModel:
    return PerformanceModel(len(env.unwrapped.cluster.catalog.model_names), seed=seed)
