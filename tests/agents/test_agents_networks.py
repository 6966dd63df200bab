"""Networks: every encoder scores every action of JobSelect-v1 and WorkerPlacement-v1 from padded batches."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets.networks import (
    ENCODERS,
    OBS_MODE_OF_ENCODER,
    build_network,
    config_for_env,
    masked,
    obs_to_tensors,
)

TINY = {"cluster": "tiny", "num_jobs": 12, "load": 0.9}
ENVS = {"gpusched/JobSelect-v1": "jobs", "gpusched/WorkerPlacement-v1": "servers"}


def two_observations(env):
    obs, _ = env.reset(seed=0)
    nxt, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    return obs, nxt


@pytest.mark.parametrize("env_id", list(ENVS))
@pytest.mark.parametrize("encoder", ENCODERS)
def test_scores_every_action_single_and_batched(env_id, encoder):
    torch.manual_seed(0)
    env = make_env(env_id, TINY, OBS_MODE_OF_ENCODER[encoder])
    cfg = config_for_env(env, encoder, hidden=16)
    assert cfg.slots == ("none" if encoder == "mlp" else ENVS[env_id])
    net = build_network(cfg, env.observation_space)
    a, b = two_observations(env)
    batch = obs_to_tensors({k: np.stack([a[k], b[k]]) for k in a})
    scores = net(batch)
    assert scores.shape == (2, env.action_space.n)
    torch.testing.assert_close(scores[:1], net(obs_to_tensors(a)), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(scores[1:], net(obs_to_tensors(b)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("encoder", ["gnn", "cnn"])
def test_job_scores_follow_the_job_not_the_slot(encoder):
    """Swapping two window jobs swaps their scores (one shared head over job embedding ⊕ cluster embedding)."""
    torch.manual_seed(0)
    env = make_env(
        "gpusched/JobSelect-v1", {**TINY, "num_jobs": 40, "load": 1.5}, OBS_MODE_OF_ENCODER[encoder]
    )
    net = build_network(config_for_env(env, encoder, hidden=16), env.observation_space)
    obs, _ = env.reset(seed=1)
    while obs["job_mask"].sum() < 2:
        obs, *_ = env.step(
            env.unwrapped.wait_action if obs["action_mask"][-1] else int(np.argmax(obs["action_mask"]))
        )
    key = "job_features" if encoder == "gnn" else "queue"
    swapped = {k: v.copy() for k, v in obs.items()}
    swapped[key][[0, 1]] = obs[key][[1, 0]]
    s, t = net(obs_to_tensors(obs))[0], net(obs_to_tensors(swapped))[0]
    torch.testing.assert_close(t[[1, 0]], s[[0, 1]], rtol=1e-5, atol=1e-6)


def test_to_pyg_keep_padding_offsets_edges_and_drops_padded_edges():
    from gpusched_envs.graph import to_pyg

    env = make_env("gpusched/JobSelect-v1", TINY, "graph")
    a, b = two_observations(env)
    obs = obs_to_tensors({k: np.stack([a[k], b[k]]) for k in a})
    g = to_pyg(obs, keep_padding=True)
    x, edge_index, edge_attr, batch = g.x, g.edge_index, g.edge_attr, g.batch
    n = a["node_features"].shape[0]
    e = int(a["edge_mask"].sum())
    assert x.shape == (2 * n, a["node_features"].shape[1])
    assert edge_index.shape == (2, 2 * e) and edge_attr.shape == (2 * e, 4)
    assert torch.equal(edge_index[:, e:] - n, edge_index[:, :e])
    assert torch.equal(batch, torch.tensor([0] * n + [1] * n))


def test_masked_sets_invalid_actions_to_minus_infinity():
    scores = torch.tensor([[1.0, 5.0, 2.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 0, 1], [0, 0, 0]])
    out = masked(scores, mask)
    assert out[0].tolist() == [1.0, float("-inf"), 2.0]
    assert out[1].tolist() == [0.0, 0.0, 0.0]  # no valid action: left as is


# ------------------------------------------------------------------ fast GNN
SIXTEEN_RACKS = """name: racks16
description: 16 racks x 2 servers x 4 GPUs (a cluster no shipped checkpoint was trained on)
racks:
  - count: 16
    oversubscription: 2.0
    servers:
      - {count: 2, gpus: 4, gpu_type: V100, intra_link: pcie3, nic: eth25}
"""


def rollout_batch(env, steps: int = 12, seed: int = 0) -> dict:
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    for _ in range(steps - 1):
        obs, _, terminated, truncated, _ = env.step(
            int(np.flatnonzero(obs["action_mask"])[-1 if len(seen) % 3 else 0])
        )
        if terminated or truncated:
            obs, _ = env.reset(seed=seed + len(seen))
        seen.append(obs)
    return obs_to_tensors({k: np.stack([o[k] for o in seen]) for k in obs})


@pytest.mark.parametrize("env_id", list(ENVS))
def test_scatter_gnn_equals_the_pyg_reference(env_id):
    """The dense scatter GNN computes the torch_geometric reference's function with the same parameters, on a
    heterogeneous cluster with padding (hetero64: mixed server sizes), forward and gradients."""
    env = make_env(env_id, {"cluster": "hetero64", "num_jobs": 40, "load": 1.2}, "graph")
    cfg = config_for_env(env, "gnn", hidden=16, layers=2)
    torch.manual_seed(0)
    fast = build_network(cfg, env.observation_space, "scatter")
    ref = build_network(cfg, env.observation_space, "pyg")
    ref.load_state_dict(fast.state_dict())
    batch = rollout_batch(env)
    a, b = fast(batch), ref(batch)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    a.square().sum().backward()
    b.square().sum().backward()
    for (name, p), q in zip(fast.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_tree_blocks_read_the_padded_layout_from_the_observation():
    from gpusched_lab.agents.nets.networks import tree_blocks

    # tiny padded to the layout of topdrl and hetero64 (WorkerPlacement's task clusters): padding in every block
    env = make_env(
        "gpusched/WorkerPlacement-v1",
        {"cluster": "tiny", "task_clusters": ["tiny", "topdrl", "hetero64"], "num_jobs": 8},
        "graph",
    )
    lo = env.unwrapped.layout
    assert env.unwrapped.cluster.num_gpus < lo.num_gpus
    obs, _ = env.reset(seed=0)
    assert tree_blocks(obs_to_tensors(obs)) == (lo.num_gpus, lo.num_servers, lo.num_racks)


@pytest.mark.parametrize("env_id", list(ENVS))
def test_one_gnn_runs_on_any_cluster_size(env_id, tmp_path):
    """A GNN built for topdrl scores every action of hetero64 and of a 16-rack cluster with the same parameters;
    its scores there equal those of a network built for that cluster with the same weights."""
    from gpusched_lab.agents.nets.networks import for_env, layout_mismatch

    (tmp_path / "racks16.yaml").write_text(SIXTEEN_RACKS)
    train_env = make_env(env_id, {"cluster": "topdrl", "num_jobs": 20}, "graph")
    cfg = config_for_env(train_env, "gnn", hidden=16)
    torch.manual_seed(0)
    net = build_network(cfg, train_env.observation_space)
    for cluster in ("hetero64", str(tmp_path / "racks16.yaml")):
        env = make_env(env_id, {"cluster": cluster, "num_jobs": 30, "load": 1.0}, "graph")
        assert layout_mismatch("gnn", train_env.observation_space, env.observation_space) is None
        assert layout_mismatch("cnn", train_env.observation_space, env.observation_space) is not None
        batch = rollout_batch(env, steps=6)
        scores = net(batch)
        assert scores.shape == (6, env.action_space.n) and torch.isfinite(scores).all()
        resized = build_network(for_env(cfg, env), env.observation_space)
        resized.load_state_dict(net.state_dict())
        torch.testing.assert_close(resized(batch), scores)


def test_flat_mlp_equals_its_module_call_bit_for_bit():
    """The flat encoder runs its Linear/ReLU layers as plain function calls: the same numbers as calling the
    ``nn.Sequential``, with and without autograd, and after an optimiser step changed the weights in place."""
    from gpusched_lab.agents.nets.common import NetworkConfig
    from gpusched_lab.agents.nets.networks import FlatMLP

    torch.manual_seed(0)
    cfg = NetworkConfig("mlp", 9, "jobs", 8, 2, 1, 4, 8, hidden=16, layers=2)
    net = FlatMLP(cfg, 11, 3)
    obs = {"obs": torch.randn(5, 11), "context": torch.randn(5, 3)}
    x = torch.cat([obs["obs"], obs["context"]], dim=-1)
    out = net(obs)[0]
    assert torch.equal(out, net.net(x))
    out.sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    net.net(x).sum().backward()
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, net.parameters(), strict=True))
    torch.optim.SGD(net.parameters(), lr=0.1).step()
    with torch.no_grad():
        assert torch.equal(net(obs)[0], net.net(x))
    with torch.inference_mode():
        assert torch.equal(net(obs)[0], net.net(x))
