"""The dense GNN's shortcuts on wide batches against the computation they stand for: the GPU block's feature
groups of every block (:class:`~gpusched_lab.agents.nets.gnn._BlockGroups`, from the compiled
:func:`~gpusched_lab.agents.nets.gnn_rows.distinct_bit_rows`) and the split slot head of JobSelect's job scores
give the per-row forward and gradients up to float rounding; the groups are kept per batch and built again for
another one."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets import gnn, networks
from gpusched_lab.agents.nets.gnn import _GpuRows, tree_blocks
from gpusched_lab.agents.nets.gnn_rows import distinct_bit_rows

from tests.agents.test_gnn_dense_batches import dense_and_reference, encoder, observations, stack


def reference_groups(x: np.ndarray) -> tuple[int, list[int], list[int]]:
    """``distinct_bit_rows`` by its definition: rows numbered by first appearance, equal when every entry is."""
    firsts: dict[bytes, int] = {}
    uid, rep = [], []
    for i, row in enumerate(x):
        key = row.tobytes()
        if key not in firsts:
            firsts[key] = len(rep)
            rep.append(i)
        uid.append(firsts[key])
    return len(rep), uid, rep


def test_distinct_bit_rows_of_a_hand_built_array():
    """Equal rows share a number (first appearance order); ``-0.0`` and ``0.0`` differ (their bits do), a NaN
    equals the same NaN."""
    x = np.array(
        [
            [1.0, 2.0],
            [0.0, 0.0],
            [1.0, 2.0],
            [-0.0, 0.0],
            [np.nan, 1.0],
            [0.0, 0.0],
            [np.nan, 1.0],
            [2.0, 1.0],
        ],
        dtype=np.float32,
    )
    u, uid, rep = distinct_bit_rows(x.view(np.int32))
    assert u == 5
    assert uid.tolist() == [0, 1, 0, 2, 3, 1, 3, 4]
    assert rep[:u].tolist() == [0, 1, 3, 4, 7]


@pytest.mark.parametrize(
    "dtype,bits", [(np.float32, np.int32), (np.float64, np.int64), (np.float16, np.int16)]
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distinct_bit_rows_equal_the_reference(dtype, bits, seed):
    """Random arrays drawn from a few values (many duplicates, rows whose float bits differ only in their high
    bits) and from many (few duplicates): the same numbering as the reference."""
    rng = np.random.default_rng(seed)
    few = np.array([0.0, 1.0, -2.0, 0.5, 3.0e4])
    for rows, cols, pool in (
        (3000, 6, few[:3]),
        (500, 28, few[:2]),
        (800, 5, few),
        (2000, 15, np.arange(1000.0)),
        (1, 4, few),
        (0, 3, few),
    ):
        x = rng.choice(pool, size=(rows, cols)).astype(dtype)
        u, uid, rep = distinct_bit_rows(np.ascontiguousarray(x).view(bits))
        ru, ruid, rrep = reference_groups(x.view(bits))
        assert u == ru
        assert uid.tolist() == ruid and rep[:u].tolist() == rrep


def topdrl_batch(size: int, seed: int) -> tuple:
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 40, "load": 1.2}, "graph")
    return env, stack(observations(env, size, seed=seed))


def forward_and_gradients(net, batch: dict) -> tuple[torch.Tensor, dict]:
    net.zero_grad()
    out = net(batch)
    (out.square().sum() + out.sin().sum()).backward()
    gnn._ROWS_CACHE.clear()
    return out.detach(), {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}


def per_row(groups) -> SimpleNamespace:
    """The same blocks ungrouped: every row its own."""
    nodes = [
        node if uid is None else node.index_select(0, uid)
        for node, uid in zip(groups.node, groups.uid, strict=True)
    ]
    return SimpleNamespace(node=nodes, uid=[None] * 4)


@pytest.mark.parametrize("layers", [1, 2])
def test_block_groups_give_the_per_row_forward_and_gradients(layers, monkeypatch):
    """A batch of 48 real observations on topdrl (a regular tree): the GPU rows, the server rows, the racks and
    the cluster nodes fall into fewer feature groups, and scores and every gradient equal those of the per-row
    computation (groups turned off) up to float rounding; with two sweeps the second runs per row."""
    env, batch = topdrl_batch(48, seed=11)
    net, _ = dense_and_reference(env, layers=layers)
    b, n, f = batch["node_features"].shape
    g, s, _ = tree_blocks(batch)
    tree = encoder(net).tree_of(batch, g, s)
    rows = _GpuRows(batch, tree, servers=True)
    groups = gnn._block_groups(batch["node_features"], rows, tree)
    flat = batch["node_features"].reshape(-1, f)
    racks = n - 1 - g - s
    every = [rows.node, rows.server_node]
    every += [
        (torch.arange(lo, lo + c).unsqueeze(1) + torch.arange(b) * n).reshape(-1)
        for lo, c in ((g + s, racks), (n - 1, 1))
    ]
    for k in range(4):
        assert groups.uid[k] is not None and groups.node[k].shape[0] < every[k].shape[0], k
        # each row's group has its features; the groups differ
        assert torch.equal(flat[groups.node[k][groups.uid[k]]], flat[every[k]]), k
        assert torch.unique(flat[groups.node[k]], dim=0).shape[0] == groups.node[k].shape[0], k
    used = []
    real = gnn._block_groups

    def spy(nf, rows, tree):
        out = real(nf, rows, tree)
        used.append(out)
        return out

    monkeypatch.setattr(gnn, "_block_groups", spy)
    grouped = forward_and_gradients(net, batch)
    assert len(used) == 1 and all(uid is not None for uid in used[0].uid)
    monkeypatch.setattr(gnn, "_block_groups", lambda nf, rows, tree: per_row(real(nf, rows, tree)))
    ungrouped = forward_and_gradients(net, batch)
    torch.testing.assert_close(grouped[0], ungrouped[0], rtol=1e-5, atol=1e-5)
    assert grouped[1].keys() == ungrouped[1].keys()
    for name, grad in ungrouped[1].items():
        scale = float(grad.abs().max()) + 1.0
        torch.testing.assert_close(grouped[1][name], grad, rtol=1e-4, atol=1e-5 * scale, msg=name)


def test_block_groups_are_kept_per_batch_and_built_for_another():
    """The groups live on the batch's distinct rows: the very same batch reuses them, a batch changed in place
    or of another size gets its own (and the forward follows: the changed batch scores what a fresh copy of it
    scores)."""
    env, batch = topdrl_batch(32, seed=4)
    net, _ = dense_and_reference(env, layers=1)
    g, s, _ = tree_blocks(batch)
    tree = encoder(net).tree_of(batch, g, s)
    gnn._ROWS_CACHE.clear()
    with torch.no_grad():
        net(batch)
        rows = gnn._gpu_rows(batch, tree, servers=True)
        groups = gnn._block_groups(batch["node_features"], rows, tree)
        net(batch)
        assert gnn._gpu_rows(batch, tree, servers=True) is rows
        assert gnn._block_groups(batch["node_features"], rows, tree) is groups
        batch["node_features"][:, 0, -1] += 0.5  # changed in place: new rows, new groups
        changed = net(batch)
        rows2 = gnn._gpu_rows(batch, tree, servers=True)
        assert rows2 is not rows and rows2.__dict__["_groups"] is not groups
        gnn._ROWS_CACHE.clear()
        assert torch.equal(changed, net({k: v.clone() for k, v in batch.items()}))
        half = {k: v[:16] for k, v in batch.items()}  # another batch size
        rows3 = gnn._gpu_rows(half, tree, servers=True)
        groups3 = gnn._block_groups(half["node_features"], rows3, tree)
        assert groups3 is not groups and groups3.node[3].max() < 16 * half["node_features"].shape[1]
    gnn._ROWS_CACHE.clear()


def test_no_gpu_groups_when_few_gpu_rows_merge():
    """A batch whose GPUs all differ: grouping would leave every GPU row, so the GPU block runs per row (the
    other blocks still by group) and scores what the per-row computation scores."""
    env, batch = topdrl_batch(16, seed=2)
    b, n, f = batch["node_features"].shape
    g, s, _ = tree_blocks(batch)
    batch["node_features"][:, :g, -1] = torch.arange(b * g, dtype=torch.float32).view(b, g) + 1.0
    net, _ = dense_and_reference(env, layers=1)
    tree = encoder(net).tree_of(batch, g, s)
    rows = _GpuRows(batch, tree, servers=True)
    assert rows.size == b * g
    groups = gnn._block_groups(batch["node_features"], rows, tree)
    assert groups.uid[0] is None and torch.equal(groups.node[0], rows.node)
    assert groups.uid[3] is not None


def job_scorer(env):
    torch.manual_seed(0)
    net = networks.build_network(
        networks.config_for_env(env, "gnn", hidden=16, layers=1), env.observation_space
    )
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return net


def test_split_slot_head_with_masked_slots_gives_the_plain_scores(monkeypatch):
    """The job mask decides the window summary: a filled slot masked out and empty slots masked in (each adds
    the zero row's embedding) give the plain computation's scores and gradients up to float rounding."""
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 60, "load": 0.9}, "graph")
    net = job_scorer(env)
    batch = stack(observations(env, 24, seed=9))
    filled = (batch["job_features"] != 0).any(-1)
    assert 0 < int(filled.sum()) < filled.numel() // 2
    mask = batch["job_mask"].clone()
    i, j = torch.nonzero(filled)[0].tolist()
    mask[i, j] = 0  # a filled slot masked out
    empty = torch.nonzero(~filled)
    for i, j in empty[:: max(1, len(empty) // 7)].tolist():  # some empty slots masked in
        mask[i, j] = 1
    batch["job_mask"] = mask
    out = []
    for threshold in (1, 10**9):  # the split head, the plain computation
        monkeypatch.setattr(networks, "DISTINCT_JOBS_BATCH", threshold)
        net.zero_grad()
        scores, emb = net.scores_and_embedding(batch)
        (scores.square().sum() + emb.sin().sum()).backward()
        out.append((scores.detach(), {n: p.grad.clone() for n, p in net.named_parameters()}))
    torch.testing.assert_close(out[0][0], out[1][0], rtol=1e-6, atol=1e-6)
    for name, grad in out[1][1].items():
        scale = float(grad.abs().max()) + 1.0
        torch.testing.assert_close(out[0][1][name], grad, rtol=1e-4, atol=1e-5 * scale, msg=name)


def scores_of(net, obs: dict) -> torch.Tensor:
    with torch.inference_mode():
        return net(obs)


def test_inference_caches_follow_flat_adam_steps_and_replaced_parameters():
    """Outside autograd the dense encoder keeps its parameter views and link terms; a training step by FlatAdam
    (which moves every parameter into one buffer on its first step, then updates it in place) and parameters
    replaced by ``load_state_dict(assign=True)`` each show in the next inference forward: the scores equal those
    of a fresh network with the same weights, and differ from the scores before."""
    from gpusched_lab.agents.nets.common import FlatAdam

    env, batch = topdrl_batch(24, seed=8)
    net, _ = dense_and_reference(env, layers=1)
    one = {k: v[:1] for k, v in batch.items()}

    def fresh_scores(obs):
        other, _ = dense_and_reference(env, layers=1)
        other.load_state_dict(net.state_dict())
        return scores_of(other, obs)

    before = [scores_of(net, obs) for obs in (one, batch)]
    opt = FlatAdam(net.parameters(), lr=0.05)
    for step in range(3):
        opt.zero_grad()
        net(batch).square().mean().backward()
        opt.step()
        for obs, old in zip((one, batch), before, strict=True):
            now = scores_of(net, obs)
            assert not torch.equal(now, old), step
            torch.testing.assert_close(now, fresh_scores(obs), rtol=1e-6, atol=1e-6)
        before = [scores_of(net, obs) for obs in (one, batch)]
    other, _ = dense_and_reference(env, layers=1, seed=5)
    net.load_state_dict(other.state_dict(), assign=True)
    for obs in (one, batch):
        torch.testing.assert_close(scores_of(net, obs), scores_of(other, obs), rtol=1e-6, atol=1e-6)
    with torch.no_grad():  # an in-place change of one parameter outside any optimizer (its version counter)
        encoder(net).up[0].message_mlp[0].bias.add_(1.0)
    torch.testing.assert_close(scores_of(net, one), fresh_scores(one), rtol=1e-6, atol=1e-6)


def test_the_last_tree_is_reused_only_for_its_own_cluster():
    """One network reading observations of two clusters in turn (topdrl: a regular tree; hetero64: padded, other
    block sizes) and a topdrl observation whose edges differ from its cluster's (a link masked out): each forward
    uses its own tree and equals the scatter implementation's."""
    top = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 30, "load": 1.0}, "graph")
    het = make_env("gpusched/JobSelect-v1", {"cluster": "hetero64", "num_jobs": 30, "load": 1.0}, "graph")
    net, _ = dense_and_reference(top, layers=1)
    scatter = networks.build_network(
        networks.config_for_env(top, "gnn", hidden=16, layers=1), top.observation_space, "scatter"
    )
    scatter.load_state_dict(net.state_dict())
    a = stack(observations(top, 3, seed=1))
    b = stack(observations(het, 3, seed=1))
    cut = {k: v.clone() for k, v in a.items()}
    cut["edge_mask"][:, 0] = 0
    assert tree_blocks(a) != tree_blocks(b)
    enc = encoder(net)
    for obs in (a, b, a, a, b, cut, a, {k: v[:1] for k, v in b.items()}):
        torch.testing.assert_close(scores_of(net, obs), scores_of(scatter, obs), rtol=1e-5, atol=1e-5)
        assert enc._trees[0].same_tree(obs)  # the tree just used is tried first next time
    assert len(enc._trees) == 3  # topdrl, hetero64, topdrl with a link cut


def test_distinct_jobs_of_hand_built_rows():
    """Equal job rows form one group (first appearance order); too few equal rows, or none, leave the rows."""
    rows = torch.tensor([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [1.0, 2.0], [5.0, 6.0], [3.0, 4.0]])
    groups, uid = networks.distinct_jobs(rows)
    assert groups.tolist() == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    assert uid.tolist() == [0, 1, 0, 0, 2, 1]
    distinct = torch.arange(40.0).view(20, 2)
    distinct[19] = distinct[0]  # one repeat in twenty: not worth it
    same, none = networks.distinct_jobs(distinct)
    assert same is distinct and none is None
    empty = torch.zeros(0, 2)
    assert networks.distinct_jobs(empty)[1] is None


def test_repeated_jobs_embedded_once_give_the_plain_scores(monkeypatch):
    """A batch holding every observation twice (each filled job row at least twice): the job rows are grouped,
    and scores and gradients equal the plain computation's up to float rounding."""
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 60, "load": 0.9}, "graph")
    net = job_scorer(env)
    seen = observations(env, 16, seed=4)
    batch = stack(seen + seen)
    grouped = []
    real = networks.distinct_jobs

    def spy(rows):
        out = real(rows)
        grouped.append(out[1] is not None and 2 * out[0].shape[0] <= rows.shape[0])
        return out

    monkeypatch.setattr(networks, "distinct_jobs", spy)
    out = []
    for threshold in (1, 10**9):
        monkeypatch.setattr(networks, "DISTINCT_JOBS_BATCH", threshold)
        net.zero_grad()
        scores, emb = net.scores_and_embedding(batch)
        (scores.square().sum() + emb.sin().sum()).backward()
        out.append((scores.detach(), {n: p.grad.clone() for n, p in net.named_parameters()}))
    assert grouped == [True]
    torch.testing.assert_close(out[0][0], out[1][0], rtol=1e-6, atol=1e-6)
    for name, grad in out[1][1].items():
        scale = float(grad.abs().max()) + 1.0
        torch.testing.assert_close(out[0][1][name], grad, rtol=1e-4, atol=1e-5 * scale, msg=name)
