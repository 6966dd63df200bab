"""The dense GNN at training batch sizes (16 and more): per-block LayerNorm, one downward message per (parent,
link) group and, on a regular tree, the GPU block computed once per distinct row; the same function as the
``torch_geometric`` reference on real observations (forward and gradients), and shipped checkpoints pick the
same greedy actions on a few hundred observations."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets.gnn import GraphEncoder, _GpuRows, tree_blocks
from gpusched_lab.agents.nets.networks import build_network, config_for_env, masked, obs_to_tensors

GRAPH_ENVS = ["gpusched/JobSelect-v1", "gpusched/WorkerPlacement-v1", "gpusched/DelayTuning-v1"]


def observations(env, steps: int, seed: int = 0) -> list[dict]:
    """A rollout of varied valid actions (resets on episode end)."""
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


def dense_and_reference(env, hidden: int = 16, layers: int = 2, seed: int = 0):
    cfg = config_for_env(env, "gnn", hidden=hidden, layers=layers)
    torch.manual_seed(seed)
    dense = build_network(cfg, env.observation_space, "dense")
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # far from the init (LayerNorm affine included), so every term matters
        for p in dense.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    ref = build_network(cfg, env.observation_space, "pyg")
    ref.load_state_dict(dense.state_dict())
    return dense, ref


def encoder(net) -> GraphEncoder:
    return next(m for m in net.modules() if isinstance(m, GraphEncoder))


@pytest.mark.parametrize("env_id", GRAPH_ENVS)
@pytest.mark.parametrize("cluster", ["topdrl", "hetero64"])
def test_dense_batch_equals_the_reference_forward_and_gradients(env_id, cluster):
    """Batches of 40 real observations: topdrl is a regular tree (4 GPUs per server: the distinct-row path runs,
    with fewer rows than GPUs), hetero64 is not (mixed server sizes, padding); scores and every parameter's
    gradient equal the reference's."""
    env = make_env(env_id, {"cluster": cluster, "num_jobs": 40, "load": 1.2}, "graph")
    dense, ref = dense_and_reference(env)
    batch = stack(observations(env, 40))
    g, s, _ = tree_blocks(batch)
    tree = encoder(dense).tree_of(batch, g, s)
    assert tree is not None
    if cluster == "topdrl":
        assert tree.gpus_per_server == 4
        assert _GpuRows(batch, tree).size < 40 * g  # equal GPUs of a server share a row
    else:
        assert tree.gpus_per_server == 0
    a, b = dense(batch), ref(batch)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    a.square().sum().backward()
    b.square().sum().backward()
    named = dict(ref.named_parameters())
    for name, p in dense.named_parameters():
        q = named[name]
        if q.grad is None:  # a part the env's head does not read (DelayTuning has no slots)
            assert p.grad is None, name
            continue
        scale = float(q.grad.abs().max()) + 1.0  # float32 rounding grows with the gradient's size
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5 * scale, msg=name)


def test_distinct_gpu_rows_stand_for_every_gpu_once():
    """Each distinct row is a GPU of its own sample; the counts add up to every GPU of every sample; every GPU
    equals (features and node mask) the row of its server that stands for it; no two rows of one server are
    equal."""
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 40, "load": 1.2}, "graph")
    batch = stack(observations(env, 24, seed=3))
    b, n, f = batch["node_features"].shape
    g, s, _ = tree_blocks(batch)
    tree = encoder(build_network(config_for_env(env, "gnn", hidden=8), env.observation_space)).tree_of(
        batch, g, s
    )
    rows = _GpuRows(batch, tree)
    k = tree.gpus_per_server
    assert int(rows.count.sum()) == b * g
    feats = torch.cat([batch["node_features"], batch["node_mask"].unsqueeze(-1)], dim=-1).view(b * n, f + 1)
    kept = feats[rows.node]  # (U, F + 1)
    server = (rows.node % n) // k
    assert torch.equal(rows.parent_row, server * b + rows.sample)
    assert torch.equal(rows.sample, rows.node // n)
    for i in range(b):
        for gpu in range(g):
            mine = (rows.sample == i) & (server == gpu // k)
            match = mine & (kept == feats[i * n + gpu]).all(-1)
            assert int(match.sum()) == 1, (i, gpu)
    key = torch.cat([rows.sample.unsqueeze(-1).float(), server.unsqueeze(-1).float(), kept], dim=-1)
    assert torch.unique(key, dim=0).shape[0] == rows.size


def test_distinct_gpu_rows_of_a_hand_built_batch():
    """Two samples of a 2-server, 2-GPUs-per-server tree: sample 0 has both GPUs of server 0 equal, sample 1 none
    equal; rows, counts and parents are exact."""
    # nodes: GPUs 0-3, servers 4-5, rack 6, cluster 7; kind one-hot in columns 0-3
    n, f = 8, 5
    nf = torch.zeros(2, n, f)
    nf[:, :4, 0] = 1.0
    nf[:, 4:6, 1] = 1.0
    nf[:, 6, 2] = 1.0
    nf[:, 7, 3] = 1.0
    nf[1, 0, 4] = 0.5  # sample 1: GPU 0 differs from GPU 1
    nf[0, 2, 4] = 0.25  # sample 0: GPU 2 differs from GPU 3
    nf[1, 3, 4] = 0.75  # sample 1: GPU 3 differs from GPU 2
    edges = [(0, 4), (1, 4), (2, 5), (3, 5), (4, 6), (5, 6), (6, 7)]
    ei = torch.tensor(
        [[c for c, _ in edges] + [p for _, p in edges], [p for _, p in edges] + [c for c, _ in edges]]
    )
    level = [0, 0, 0, 0, 1, 1, 2] * 2
    ef = torch.zeros(len(level), 4)
    ef[torch.arange(len(level)), 1 + torch.tensor(level)] = 1.0
    obs = {
        "node_features": nf,
        "node_mask": torch.ones(2, n),
        "edge_index": ei.unsqueeze(0).expand(2, -1, -1).clone(),
        "edge_features": ef.unsqueeze(0).expand(2, -1, -1).clone(),
        "edge_mask": torch.ones(2, len(level)),
    }
    assert tree_blocks(obs) == (4, 2, 1)
    from gpusched_lab.agents.nets.gnn import _Tree

    tree = _Tree(obs, 4, 2)
    assert tree.gpus_per_server == 2
    rows = _GpuRows(obs, tree)
    # sample 0: GPUs 0 (for 0, 1), 2, 3; sample 1: GPUs 0, 1, 2, 3
    assert rows.node.tolist() == [0, 2, 3, 8, 9, 10, 11]
    assert rows.count.flatten().tolist() == [2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert rows.sample.tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert rows.parent_row.tolist() == [0, 2, 2, 1, 1, 3, 3]  # server s of sample i is row 2 s + i


# the shipped single-agent GNN checkpoints (all on topdrl, a regular tree: the distinct-row path)
GNN_AGENTS = [
    "ppo_jobselect_gnn",
    "ppo_jobselect_gnn_nc",
    "ppo_jobselect_gnn_clairvoyant",
    "ddqn_workerplacement_gnn",
]


@pytest.mark.parametrize("name", GNN_AGENTS)
def test_shipped_gnn_checkpoint_greedy_actions_on_batches(name):
    """256 observations of the checkpoint's own env, scored in batches of 64 (the training path): the dense
    encoder's scores equal the reference's, and so does every greedy action except on a near-tie of the
    reference's two best scores (closer than 1e-5: float rounding picks either; ddqn_workerplacement_gnn has one,
    1.7e-7 apart, which the dense encoder before the distinct-row path resolved the same way)."""
    from pathlib import Path

    from gpusched_lab import agents

    agent = agents.load(Path(__file__).resolve().parents[2] / "checkpoints" / name)
    reference = copy.deepcopy(agent.module)
    for m in reference.modules():
        if isinstance(m, GraphEncoder):
            m.impl = "pyg"
    env = agent.make_env(num_jobs=60)
    seen = observations(env, 256, seed=1)
    ties = 0
    for start in range(0, len(seen), 64):
        t = stack(seen[start : start + 64])
        with torch.no_grad():
            fast, slow = agent.module(t), reference(t)
        torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
        fast, slow = masked(fast, t["action_mask"]), masked(slow, t["action_mask"])
        differ = fast.argmax(dim=-1) != slow.argmax(dim=-1)
        top2 = slow.topk(2, dim=-1).values
        assert bool((top2[differ, 0] - top2[differ, 1] < 1e-5).all())
        ties += int(differ.sum())
    assert ties <= 1
