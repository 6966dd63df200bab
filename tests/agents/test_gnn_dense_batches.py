"""The dense GNN at training batch sizes (16 and more): per-block LayerNorm, one downward message per (parent,
link) group and, on a regular tree, the server and GPU blocks computed once per distinct row; the same function as the
``torch_geometric`` reference on real observations (forward and gradients), and shipped checkpoints pick the
same greedy actions on a few hundred observations."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets import gnn
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
    """Batches of 40 real observations: topdrl is a regular tree (4 GPUs per server, 4 servers per rack: the
    distinct-row path runs, with fewer rows than GPUs), hetero64 is not (mixed server sizes, padding); scores and every parameter's
    gradient equal the reference's."""
    env = make_env(env_id, {"cluster": cluster, "num_jobs": 40, "load": 1.2}, "graph")
    dense, ref = dense_and_reference(env)
    batch = stack(observations(env, 40))
    g, s, _ = tree_blocks(batch)
    tree = encoder(dense).tree_of(batch, g, s)
    assert tree is not None
    if cluster == "topdrl":
        assert (tree.gpus_per_server, tree.servers_per_rack) == (4, 4)
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


def test_two_networks_on_one_batch_build_its_distinct_rows_once(monkeypatch):
    """DDQN's online and target networks read the same next observations: the second forward reuses the first's
    distinct rows (same outputs as rows built afresh); another batch, or the same one changed in place, gets its
    own."""
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 40, "load": 1.2}, "graph")
    dense, _ = dense_and_reference(env)
    other = copy.deepcopy(dense)
    batch = stack(observations(env, 24, seed=5))
    built = []
    real = gnn._GpuRows

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gnn, "_GpuRows", counting)
    with torch.no_grad():
        a = dense(batch)
        b = other(batch)
        assert len(built) == 1
        assert torch.equal(a, b)
        fresh = {k: v.clone() for k, v in batch.items()}
        assert torch.equal(dense(fresh), a)
        assert len(built) == 2
        fresh["node_features"][:, 0, 0] += 1.0  # changed in place: its rows are built again
        dense(fresh)
        assert len(built) == 3
    gnn._ROWS_CACHE.clear()


def test_rows_built_in_inference_mode_serve_a_later_training_forward_on_the_same_batch():
    """Rows first built inside torch.inference_mode (DDQN's targets, a rollout step) are normal tensors: a forward
    with autograd on the very same batch reuses them, trains, and gives the scores and gradients of rows built
    afresh."""
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 40, "load": 1.2}, "graph")
    dense, _ = dense_and_reference(env)
    batch = stack(observations(env, 24, seed=6))
    gnn._ROWS_CACHE.clear()
    with torch.inference_mode():
        first = dense(batch)
    reused = dense(batch)
    reused.square().sum().backward()
    grads = [p.grad.clone() for p in dense.parameters()]
    dense.zero_grad()
    gnn._ROWS_CACHE.clear()
    fresh = dense({k: v.clone() for k, v in batch.items()})
    fresh.square().sum().backward()
    assert torch.equal(first, fresh.detach()) and torch.equal(reused.detach(), fresh.detach())
    assert all(torch.equal(a, p.grad) for a, p in zip(grads, dense.parameters(), strict=True))
    gnn._ROWS_CACHE.clear()


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


def test_distinct_server_rows_stand_for_every_server_and_gpu_once():
    """With servers merged: every server equals (features, node mask, GPU by GPU) the row that stands for it, a
    server of its own sample and rack; the server counts add up to every server, the GPU weights to every GPU, and
    every GPU of a kept server equals the GPU row of its server that stands for it."""
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 40, "load": 1.2}, "graph")
    batch = stack(observations(env, 24, seed=5))
    b, n, f = batch["node_features"].shape
    g, s, _ = tree_blocks(batch)
    tree = encoder(build_network(config_for_env(env, "gnn", hidden=8), env.observation_space)).tree_of(
        batch, g, s
    )
    k, m = tree.gpus_per_server, tree.servers_per_rack
    assert (k, m) == (4, 4)
    rows = _GpuRows(batch, tree, servers=True)
    assert rows.server_size < b * s
    assert int(rows.server_count.sum()) == b * s and int(rows.weight.sum()) == b * g
    feats = torch.cat([batch["node_features"], batch["node_mask"].unsqueeze(-1)], dim=-1)  # (B, N, F + 1)
    sig = torch.cat([feats[:, g : g + s], feats[:, :g].reshape(b, s, k * (f + 1))], dim=-1)  # (B, S, ·)
    for i in range(b):
        for srv in range(s):
            r = int(rows.server_of[i * s + srv])
            other = int(rows.server_node[r]) - g  # its row's server: same sample, same rack, equal
            assert int(rows.server_sample[r]) == i and (other - i * n) // m == srv // m
            assert torch.equal(sig[i, srv], sig[i, other - i * n])
    flat = feats.view(b * n, f + 1)
    for r in range(rows.size):  # each GPU row: a GPU of its server row's server
        node = int(rows.node[r])
        assert int(rows.server_node[rows.parent_row[r]]) == (node // n) * n + g + (node % n) // k
    for srv in range(rows.server_size):
        base = int(rows.server_node[srv]) - g
        gpus = [base // n * n + ((base % n) * k + j) for j in range(k)]
        mine = torch.nonzero(rows.parent_row == srv).flatten()
        assert sum(int(rows.count[r]) for r in mine) == k
        for node in gpus:
            assert sum(bool(torch.equal(flat[node], flat[int(rows.node[r])])) for r in mine) == 1


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
    assert rows.weight.flatten().tolist() == rows.count.flatten().tolist()


def test_distinct_server_rows_of_a_hand_built_batch():
    """The same tree, two samples: in sample 0 both servers (and all four GPUs) are equal, so one server row and
    one GPU row stand for them; in sample 1 the servers differ in their second GPU only."""
    n, f = 8, 5
    nf = torch.zeros(2, n, f)
    nf[:, :4, 0] = 1.0
    nf[:, 4:6, 1] = 1.0
    nf[:, 6, 2] = 1.0
    nf[:, 7, 3] = 1.0
    nf[1, 3, 4] = 0.5  # sample 1: GPU 3 (server 1's second) differs from the others
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
    from gpusched_lab.agents.nets.gnn import _Tree

    tree = _Tree(obs, 4, 2)
    assert (tree.gpus_per_server, tree.servers_per_rack) == (2, 2)
    rows = _GpuRows(obs, tree, servers=True)
    # servers: sample 0 one row (node 4, for both), sample 1 two rows (nodes 12, 13)
    assert rows.server_node.tolist() == [4, 12, 13]
    assert rows.server_count.flatten().tolist() == [2.0, 1.0, 1.0]
    assert rows.server_of.tolist() == [0, 0, 1, 2]
    assert rows.server_parent_row.tolist() == [0, 1, 1]  # rack 0 of sample i is row i
    # GPUs: sample 0 GPU 0 (for its server's two, of two servers); sample 1 GPU 0 (server 0), GPUs 2, 3 (server 1)
    assert rows.node.tolist() == [0, 8, 10, 11]
    assert rows.parent_row.tolist() == [0, 1, 2, 2]
    assert rows.count.flatten().tolist() == [2.0, 2.0, 1.0, 1.0]
    assert rows.weight.flatten().tolist() == [4.0, 2.0, 1.0, 1.0]


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
