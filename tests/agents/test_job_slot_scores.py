"""JobSelect's GNN scorer on wide batches embeds and scores only the filled window slots (plus one empty slot per
sample): the same scores and embeddings as embedding every slot, and gradients equal up to float rounding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets import networks
from gpusched_lab.agents.nets.networks import build_network, config_for_env, obs_to_tensors


def observations(env, steps: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    while len(seen) < steps:
        obs, _, terminated, truncated, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        if terminated or truncated:
            obs, _ = env.reset(seed=seed + len(seen))
        seen.append(obs)
    return seen


def stack(seen: list[dict]) -> dict:
    return obs_to_tensors({k: np.stack([o[k] for o in seen]) for k in seen[0]}, batched=True)


def scorer(env, impl: str):
    torch.manual_seed(0)
    net = build_network(config_for_env(env, "gnn", hidden=16, layers=1), env.observation_space, impl)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # parameters far from their init: every term matters
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return net


def scores_and_grads(net, batch: dict, distinct: bool, monkeypatch) -> tuple:
    monkeypatch.setattr(networks, "DISTINCT_JOBS_BATCH", 1 if distinct else 10**9)
    net.zero_grad()
    scores, emb = net.scores_and_embedding(batch)
    (scores.square().sum() + emb.sin().sum()).backward()
    return scores.detach(), emb.detach(), {n: p.grad.clone() for n, p in net.named_parameters()}


@pytest.mark.parametrize("impl", ["dense", "scatter"])
def test_filled_slots_only_give_the_scores_and_gradients_of_every_slot(impl, monkeypatch):
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 60, "load": 0.9}, "graph")
    net = scorer(env, impl)
    batch = stack(observations(env, 40))
    filled = (batch["job_features"] != 0).any(-1)
    # some slots filled, most empty: the distinct rows apply
    assert 0 < int(filled.sum()) < filled.numel() // 2
    calls = []
    real = networks.ActionScorer._job_scores_distinct

    def spy(self, obs, cluster):
        out = real(self, obs, cluster)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(networks.ActionScorer, "_job_scores_distinct", spy)
    s0, e0, g0 = scores_and_grads(net, batch, False, monkeypatch)
    assert calls == []
    s1, e1, g1 = scores_and_grads(net, batch, True, monkeypatch)
    assert calls == [True]
    torch.testing.assert_close(s1, s0, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(e1, e0, rtol=0, atol=0)
    for name, grad in g0.items():
        scale = float(grad.abs().max()) + 1.0  # float32 rounding of sums over rows grows with their size
        torch.testing.assert_close(g1[name], grad, rtol=1e-4, atol=1e-5 * scale, msg=name)
    # an empty slot scores what a zero job row ⊕ its sample's cluster embedding scores
    empty = torch.nonzero(~filled)[0].tolist()
    with torch.no_grad():
        cluster = net.encoder(batch)[0][empty[0]]
        zero = networks.run_mlp(net.encoder.job_in, torch.zeros(1, batch["job_features"].shape[-1]))[0]
        alone = networks.run_mlp(net.slot_head, torch.cat([zero, cluster]).unsqueeze(0))[0, 0]
    torch.testing.assert_close(s1[empty[0], empty[1]], alone, rtol=1e-6, atol=1e-6)


def test_a_batch_of_mostly_filled_slots_embeds_every_slot(monkeypatch):
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 60, "load": 0.9}, "graph")
    net = scorer(env, "dense")
    batch = stack(observations(env, 20, seed=2))
    batch["job_features"] = batch["job_features"] + 0.5  # every slot filled
    calls = []
    real = networks.ActionScorer._job_scores_distinct

    def spy(self, obs, cluster):
        out = real(self, obs, cluster)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(networks.ActionScorer, "_job_scores_distinct", spy)
    s0, e0, g0 = scores_and_grads(net, batch, False, monkeypatch)
    s1, e1, g1 = scores_and_grads(net, batch, True, monkeypatch)
    assert calls == [False]  # tried, declined: the plain computation
    assert torch.equal(s1, s0) and torch.equal(e1, e0)
    assert all(torch.equal(g1[n], g) for n, g in g0.items())
