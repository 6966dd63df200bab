"""MaskedDiscretePolicy: sb3_contrib's masked policy, the same numbers and random draws from fewer ops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpusched_lab.agents.algos.ppo import MaskedDiscretePolicy, PPOArgs, make_ppo
from gpusched_lab.agents.common import make_env, make_vec_env
from gpusched_lab.agents.nets.networks import config_for_env
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy as Sb3Policy
from stable_baselines3.common.utils import obs_as_tensor

KW = {"cluster": "topdrl", "num_jobs": 40, "load": 1.2}


@pytest.mark.parametrize("encoder", ["gnn", "mlp"])
def test_masked_policy_equals_sb3s_forward_and_evaluate_actions(encoder):
    mode = {"gnn": "graph", "mlp": "flat"}[encoder]
    venv = make_vec_env("gpusched/JobSelect-v1", KW, mode, 6, seed=0)
    args = PPOArgs(encoder=encoder, device="cpu", seed=0, n_steps=16, batch_size=32, n_epochs=1)
    model = make_ppo(
        venv,
        config_for_env(make_env("gpusched/JobSelect-v1", KW, mode), encoder, args.hidden, args.layers),
        args,
    )
    policy = model.policy
    assert isinstance(policy, MaskedDiscretePolicy)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # weights far from the identity start, so every logit differs
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)
    obs = obs_as_tensor(venv.reset(), policy.device)
    masks = venv.action_masks()
    masks[0] = False
    masks[0, -1] = True  # one row with a single valid action
    for deterministic in (False, True):
        torch.manual_seed(7)
        with torch.no_grad():
            ours = policy(obs, deterministic=deterministic, action_masks=masks)
        torch.manual_seed(7)
        with torch.no_grad():
            theirs = Sb3Policy.forward(policy, obs, deterministic=deterministic, action_masks=masks)
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b)
    assert int(ours[0][0]) == masks.shape[1] - 1
    actions = torch.as_tensor(np.argmax(masks[:, ::-1], axis=1))  # a valid action of each row
    float_masks = torch.as_tensor(masks, dtype=torch.float32)
    results = []
    for fn in (policy.evaluate_actions, lambda *a, **k: Sb3Policy.evaluate_actions(policy, *a, **k)):
        policy.zero_grad()
        values, log_prob, entropy = fn(obs, masks.shape[1] - 1 - actions, action_masks=float_masks)
        (values.sum() + log_prob.sum() - entropy.sum()).backward()
        results.append((values, log_prob, entropy, [p.grad.clone() for p in policy.parameters()]))
    for a, b in zip(results[0][:3], results[1][:3], strict=True):
        assert torch.equal(a, b)
    for a, b in zip(results[0][3], results[1][3], strict=True):
        assert torch.equal(a, b)
    # no masks: sb3_contrib's own path
    torch.manual_seed(3)
    with torch.no_grad():
        a = policy(obs)
    torch.manual_seed(3)
    with torch.no_grad():
        b = Sb3Policy.forward(policy, obs)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("max_grad_norm", [0.5, 1e-3])
def test_flat_update_equals_sb3_contribs_update(max_grad_norm):
    """FlatMaskablePPO's update (gradients clipped through FlatAdam) gives sb3_contrib's weights, optimizer state
    and logged losses bit for bit, whether the clip binds (a tiny max norm) or not."""
    from gpusched_lab.agents.algos.ppo import FlatMaskablePPO
    from sb3_contrib import MaskablePPO

    env = make_env("gpusched/JobSelect-v1", KW, "graph")
    runs = []
    for plain in (False, True):
        venv = make_vec_env("gpusched/JobSelect-v1", KW, "graph", 4, seed=0)
        args = PPOArgs(
            encoder="gnn",
            device="cpu",
            seed=0,
            n_steps=16,
            batch_size=16,
            n_epochs=2,
            max_grad_norm=max_grad_norm,
        )
        model = make_ppo(venv, config_for_env(env, "gnn", args.hidden, args.layers), args)
        assert isinstance(model, FlatMaskablePPO)
        if plain:
            model.train = lambda m=model: MaskablePPO.train(m)
        model.learn(128)
        logged = dict(model.logger.name_to_value)
        runs.append((model.policy.state_dict(), model.policy.optimizer.state_dict(), logged))
    (w0, o0, l0), (w1, o1, l1) = runs
    assert w0.keys() == w1.keys() and all(torch.equal(w0[k], w1[k]) for k in w0)
    for a, b in zip(o0["state"].values(), o1["state"].values(), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert l0 == l1 and "train/loss" in l0


def test_the_one_copy_rollout_buffer_gives_sb3_contribs_minibatches_without_aliasing_the_buffer():
    """The same minibatches, bit for bit, as sb3-contrib's masked dict buffer on the same rollout and shuffle;
    no minibatch tensor shares memory with the buffer (changing the buffer afterwards leaves it as it was); and
    PPO on dict observations, fresh or loaded, keeps its rollouts in it."""
    from gpusched_lab.agents.algos.ppo import FlatMaskablePPO, OneCopyDictRolloutBuffer
    from sb3_contrib.common.maskable.buffers import MaskableDictRolloutBuffer

    env = make_env("gpusched/JobSelect-v1", KW, "graph")
    batches = []
    for cls in (MaskableDictRolloutBuffer, OneCopyDictRolloutBuffer):
        buf = cls(8, env.observation_space, env.action_space, device="cpu", n_envs=2)
        env.observation_space.seed(0)
        gen = np.random.default_rng(1)
        for _ in range(8):
            obs = {
                k: np.stack([space.sample() for _ in range(2)]) for k, space in env.observation_space.items()
            }
            buf.add(
                obs,
                gen.integers(0, env.action_space.n, (2, 1)),
                gen.random(2),
                np.zeros(2, dtype=bool),
                torch.as_tensor(gen.random(2)),
                torch.as_tensor(gen.random(2)),
                action_masks=gen.random((2, env.action_space.n)) < 0.5,
            )
        buf.compute_returns_and_advantage(torch.as_tensor(gen.random(2)), np.zeros(2, dtype=bool))
        np.random.seed(3)  # noqa: NPY002 - the buffer shuffles with numpy's global generator
        out = list(buf.get(5))
        batches.append(out)
        if cls is OneCopyDictRolloutBuffer:
            kept = [{k: v.clone() for k, v in b.observations.items()} for b in out]
            for arr in buf.observations.values():
                arr += 1
            buf.advantages += 1
            assert all(
                torch.equal(b.observations[k], c[k]) for b, c in zip(out, kept, strict=True) for k in c
            )
    for a, b in zip(*batches, strict=True):
        assert a.observations.keys() == b.observations.keys()
        assert all(torch.equal(a.observations[k], b.observations[k]) for k in a.observations)
        for field in ("actions", "old_values", "old_log_prob", "advantages", "returns", "action_masks"):
            x, y = getattr(a, field), getattr(b, field)
            assert x.dtype == y.dtype and torch.equal(x, y), field
    venv = make_vec_env("gpusched/JobSelect-v1", KW, "graph", 2, seed=0)
    args = PPOArgs(encoder="gnn", device="cpu", seed=0, n_steps=8, batch_size=8, n_epochs=1)
    model = make_ppo(venv, config_for_env(env, "gnn", args.hidden, args.layers), args)
    assert type(model.rollout_buffer) is OneCopyDictRolloutBuffer
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(tmp) / "m.zip")
        loaded = FlatMaskablePPO.load(Path(tmp) / "m.zip", env=venv, device="cpu")
    assert type(loaded.rollout_buffer) is OneCopyDictRolloutBuffer
