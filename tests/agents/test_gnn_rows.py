"""The compiled distinct rows of the dense GNN (``_GpuRows``, :mod:`gpusched_lab.agents.nets.gnn_rows`) against a
plain torch reference of the same definition (pairwise exact equality through ``torch.cdist(p=0)``): every attribute
equal, dtype and order included, on real observations, hand-built batches (duplicates, all distinct, padding, NaN,
infinities, signed zeros), float32 and float64, and generated batches drawn from a few values; the GNN's scores and
gradients are the very same with either."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from gpusched_lab.agents.common import make_env
from gpusched_lab.agents.nets import gnn
from gpusched_lab.agents.nets.gnn import _GpuRows, tree_blocks
from gpusched_lab.agents.nets.networks import build_network, config_for_env
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.agents.test_gnn_dense_batches import dense_and_reference, encoder, observations, stack


class ReferenceRows:
    """The distinct rows in torch ops: an item's first equal item of its group from ``cdist(p=0) == 0`` (no
    coordinate differs; ``argmax`` of no match is 0), kept when it is its own first; servers (with ``servers``)
    compared on their features, node mask and their GPUs' features and masks."""

    def __init__(self, obs: dict[str, torch.Tensor], tree, servers: bool = False):
        nf = obs["node_features"]
        b, n, f = nf.shape
        g, k = tree.bounds[1], tree.gpus_per_server
        s = g // k
        with torch.inference_mode(False), torch.no_grad():
            mask = obs["node_mask"].to(nf.dtype).unsqueeze(-1)
            feats = torch.cat([nf[:, :g], mask[:, :g]], dim=-1).view(b, s, k, f + 1)
            first, keep, _ = self._firsts(feats)  # (B, S, k)
            self.servers = servers
            in_kept = torch.ones_like(keep)  # the GPUs of the servers kept
            if servers:
                m = tree.servers_per_rack
                sig = torch.cat([nf[:, g : g + s], mask[:, g : g + s], feats.view(b, s, k * (f + 1))], dim=-1)
                _, srv_keep, srv_row = self._firsts(sig.view(b, s // m, m, -1))
                srv = torch.nonzero(srv_keep.view(-1)).flatten()  # sample-major flat server index
                self.server_size = srv.numel()
                self.server_sample = srv // s
                self.server_parent_row = (srv % s) // m * b + self.server_sample
                self.server_node = self.server_sample * n + g + srv % s
                self.server_count = (
                    torch.bincount(srv_row, minlength=self.server_size).to(nf.dtype).unsqueeze(-1)
                )
                self.server_of = srv_row
                in_kept = srv_keep.view(b, s, 1).expand(-1, -1, k)
                keep = keep & in_kept
            rank = keep.view(-1).cumsum(0) - 1
            row = rank.view(b, s, k).gather(-1, first)  # each GPU's row (those of kept servers)
            gpu = torch.nonzero(keep.view(-1)).flatten()  # sample-major flat GPU index of each distinct row
            self.size = gpu.numel()
            self.sample = gpu // g
            server = self.sample * s + (gpu % g) // k  # sample-major flat server index
            self.node = self.sample * n + gpu % g
            self.count = torch.bincount(row[in_kept], minlength=self.size).to(nf.dtype).unsqueeze(-1)
            if servers:
                self.parent_row = self.server_of.index_select(0, server)
                self.weight = self.count * self.server_count.index_select(0, self.parent_row)
            else:
                self.parent_row = (server % s) * b + self.sample
                self.weight = self.count

    @staticmethod
    def _first_of(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, *x.shape[-2:])
        same = torch.cdist(flat, flat, p=0) == 0
        return same.view(*x.shape[:-1], x.shape[-2]).to(torch.uint8).argmax(-1)

    @classmethod
    def _firsts(cls, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        first = cls._first_of(x)
        kept = first == torch.arange(x.shape[-2], device=x.device)
        rank = kept.view(-1).cumsum(0) - 1
        row = rank.view(kept.shape).gather(-1, first).view(-1)
        return first, kept, row


GPU_ATTRS = ("sample", "node", "count", "weight", "parent_row")
SERVER_ATTRS = ("server_sample", "server_parent_row", "server_node", "server_count", "server_of")


def assert_same_rows(obs: dict, tree, servers: bool) -> _GpuRows:
    """The compiled rows of ``obs`` equal the reference's: sizes, and every tensor with its dtype and shape."""
    rows, ref = _GpuRows(obs, tree, servers=servers), ReferenceRows(obs, tree, servers=servers)
    assert rows.servers is servers
    assert type(rows.size) is int and rows.size == ref.size
    names = GPU_ATTRS + (SERVER_ATTRS if servers else ())
    if servers:
        assert type(rows.server_size) is int and rows.server_size == ref.server_size
    for name in names:
        a, b = getattr(rows, name), getattr(ref, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, b.dtype, a.shape, b.shape)
        assert torch.equal(a, b), name
        assert not a.is_inference() and not a.requires_grad, name
    return rows


def tree_of(g: int, k: int, m: int):
    """The parts of a tree that the distinct rows read: the GPU block's end, GPUs per server, servers per rack."""
    return SimpleNamespace(bounds=(0, g), gpus_per_server=k, servers_per_rack=m)


def batch(nf: torch.Tensor, mask: torch.Tensor | None = None) -> dict:
    return {"node_features": nf, "node_mask": torch.ones(nf.shape[:2]) if mask is None else mask}


def real_batch(size: int, seed: int) -> dict:
    env = make_env("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 40, "load": 1.2}, "graph")
    return stack(observations(env, size, seed=seed))


@pytest.mark.parametrize("servers", [False, True])
@pytest.mark.parametrize(
    "env_id,cluster",
    [
        ("gpusched/JobSelect-v1", "topdrl"),
        ("gpusched/WorkerPlacement-v1", "topdrl"),
        ("gpusched/JobSelect-v1", "hetero64"),
    ],
)
def test_rows_of_real_batches_equal_the_reference(env_id, cluster, servers):
    """Rollouts of real envs (64 samples, and the first 16, 17 of them). topdrl is the regular tree the GNN uses
    them on (4 GPUs per server, 4 servers per rack); hetero64 is not regular (the GNN does not build them there),
    its first 64 nodes read as 16 servers of 4 GPUs, 4 per rack."""
    env = make_env(env_id, {"cluster": cluster, "num_jobs": 40, "load": 1.2}, "graph")
    obs = stack(observations(env, 64, seed=2))
    g, s, _ = tree_blocks(obs)
    tree = encoder(build_network(config_for_env(env, "gnn", hidden=8), env.observation_space)).tree_of(
        obs, g, s
    )
    if cluster == "topdrl":
        assert (tree.gpus_per_server, tree.servers_per_rack) == (4, 4)
    else:
        assert tree.gpus_per_server == 0
        tree = tree_of(g, 4, 4)
    for size in (16, 17, 64):
        part = {k: v[:size] for k, v in obs.items()}
        rows = assert_same_rows(part, tree, servers)
        assert rows.size < size * g  # real observations do have equal GPUs


def test_rows_of_a_large_batch_in_float64_equal_the_reference():
    """256 real samples, node features and mask in float64."""
    obs = real_batch(256, seed=4)
    obs = {k: v.double() if k.startswith("node") else v for k, v in obs.items()}
    g, _, _ = tree_blocks(obs)
    for servers in (False, True):
        rows = assert_same_rows(obs, tree_of(g, 4, 4), servers)
        assert rows.count.dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("b", [16, 17, 64, 256])
def test_rows_of_hand_built_batches_equal_the_reference(b, dtype):
    """All equal (one row per sample), all distinct (every GPU a row), and padded: some nodes masked out (a
    masked node differs from an unmasked one with the same features, equals a masked one)."""
    g, k, m, n, f = 16, 4, 2, 24, 5
    tree = tree_of(g, k, m)
    same = torch.zeros(b, n, f, dtype=dtype)
    for servers in (False, True):
        rows = assert_same_rows(batch(same), tree, servers)
        if servers:
            assert (rows.size, rows.server_size) == (b * g // (k * m), b * g // (k * m))
            assert rows.weight.flatten().tolist() == [float(k * m)] * rows.size
        else:
            assert rows.size == b * g // k
    gen = torch.Generator().manual_seed(b)
    distinct = torch.randn(b, n, f, generator=gen, dtype=dtype)
    for servers in (False, True):
        rows = assert_same_rows(batch(distinct), tree, servers)
        assert rows.size == b * g
        assert rows.node.tolist() == [i * n + j for i in range(b) for j in range(g)]
    padded = torch.zeros(b, n, f, dtype=dtype)
    mask = torch.ones(b, n, dtype=dtype)
    mask[:, 3] = 0.0  # the last GPU of server 0: same features, masked out
    mask[1::2, 4:8] = 0.0  # server 1 of odd samples: all masked out
    mask[::3, 17] = 0.0  # a server node (server 1) masked out
    padded[:, 8:12, 0] = torch.arange(4, dtype=dtype)  # server 2: distinct GPUs
    for servers in (False, True):
        rows = assert_same_rows(batch(padded, mask), tree, servers)
        assert rows.node[:2].tolist() == [0, 3]  # sample 0, server 0: GPUs 0 (for 0-2), 3 (masked)
        assert rows.count[:2].flatten().tolist() == [3.0, 1.0]


def test_nan_infinite_and_signed_zero_values():
    """A GPU with a NaN or an infinite value equals nothing, not even itself: it is no row of its own but counts
    for its server's first GPU (the reference's no-match rule); -0.0 equals 0.0."""
    n, f = 12, 3
    tree = tree_of(8, 4, 2)  # GPUs 0-7 (servers 8, 9), one rack
    nf = torch.zeros(2, n, f)
    nf[0, 1, 0] = float("nan")  # sample 0, server 0: GPU 1 NaN
    nf[0, 2, 1] = -0.0  # GPU 2 equals GPU 0
    nf[0, 3, 2] = float("inf")  # GPU 3 infinite
    nf[0, 4, 0] = float("nan")  # server 1's first GPU NaN: a row of its own (first of its server)
    nf[0, 5, 0] = float("nan")
    nf[1, 0, 0] = float("-inf")  # sample 1: server 0's first GPU infinite, its other GPUs equal
    for dtype in (torch.float32, torch.float64):
        obs = batch(nf.to(dtype))
        rows = assert_same_rows(obs, tree, servers=False)
        assert rows.node.tolist() == [0, 4, 6, 12, 13, 16]
        assert rows.count.flatten().tolist() == [4.0, 2.0, 2.0, 1.0, 3.0, 4.0]
        rows = assert_same_rows(obs, tree, servers=True)
        # sample 0: the servers hold NaN, so they equal nothing: server 1 counts for server 0 and is no row
        assert rows.server_node.tolist() == [8, 20, 21]
        assert rows.server_of.tolist() == [0, 0, 1, 2]
        assert rows.server_count.flatten().tolist() == [2.0, 1.0, 1.0]
        assert rows.node.tolist() == [0, 12, 13, 16]
        assert rows.weight.flatten().tolist() == [8.0, 1.0, 3.0, 4.0]


def test_half_precision_rows_equal_the_float64_rows():
    """float16 / bfloat16 node features are compared at full value: the rows of the float64 copy, counts in the
    batch's dtype."""
    obs = real_batch(16, seed=1)
    g, _, _ = tree_blocks(obs)
    for dtype in (torch.float16, torch.bfloat16):
        low = {k: v.to(dtype) if k.startswith("node") else v for k, v in obs.items()}
        wide = {k: v.double() if k.startswith("node") else v for k, v in low.items()}
        for servers in (False, True):
            a, b = _GpuRows(low, tree_of(g, 4, 4), servers), _GpuRows(wide, tree_of(g, 4, 4), servers)
            assert a.count.dtype == dtype and a.size == b.size
            assert torch.equal(a.node, b.node) and torch.equal(a.count.double(), b.count)


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    b=st.integers(1, 4),
    k=st.integers(1, 3),
    m=st.integers(1, 3),
    racks=st.integers(1, 2),
    f=st.integers(1, 2),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_rows_of_generated_batches_equal_the_reference(data, b, k, m, racks, f, dtype):
    """Small batches whose nodes are drawn from a palette of a few (features, mask) rows over a few values (NaN,
    infinity and signed zeros among them), so equal GPUs and servers are frequent."""
    s = m * racks
    g = s * k
    n = g + s + 2
    value = st.sampled_from([0.0, -0.0, 1.0, 0.5, float("nan"), float("inf")])
    palette = data.draw(
        st.lists(
            st.tuples(st.lists(value, min_size=f, max_size=f), st.sampled_from([0.0, 1.0])),
            min_size=1,
            max_size=3,
        )
    )
    picks = data.draw(st.lists(st.integers(0, len(palette) - 1), min_size=b * n, max_size=b * n))
    nf = torch.tensor([palette[i][0] for i in picks], dtype=dtype).view(b, n, f)
    mask = torch.tensor([palette[i][1] for i in picks]).view(b, n)
    tree = tree_of(g, k, m)
    assert_same_rows(batch(nf, mask), tree, servers=False)
    assert_same_rows(batch(nf, mask), tree, servers=True)


def forward_and_gradients(net, obs: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    gnn._ROWS_CACHE.clear()
    net.zero_grad()
    out = net(obs)
    out.square().sum().backward()
    grads = [p.grad.clone() for p in net.parameters() if p.grad is not None]
    gnn._ROWS_CACHE.clear()
    return out.detach(), grads


@pytest.mark.parametrize(
    "env_id,cluster",
    [
        ("gpusched/JobSelect-v1", "topdrl"),
        ("gpusched/WorkerPlacement-v1", "topdrl"),
        ("gpusched/JobSelect-v1", "hetero64"),
    ],
)
def test_gnn_scores_and_gradients_are_those_of_the_reference_rows(env_id, cluster, monkeypatch):
    """Batches of 16, 40 and 64 real observations: the dense GNN's scores and every gradient are bit-identical
    whether its distinct rows come from the compiled loops or from the reference (hetero64 is not regular: the
    GNN builds no rows there)."""
    env = make_env(env_id, {"cluster": cluster, "num_jobs": 40, "load": 1.2}, "graph")
    dense, _ = dense_and_reference(env)
    other = copy.deepcopy(dense)
    seen = observations(env, 64, seed=7)
    built = []

    def reference(*args, **kwargs):
        built.append(1)
        return ReferenceRows(*args, **kwargs)

    for size in (16, 40, 64):
        obs = stack(seen[:size])
        fast = forward_and_gradients(dense, obs)
        monkeypatch.setattr(gnn, "_GpuRows", reference)
        slow = forward_and_gradients(other, obs)
        monkeypatch.undo()
        assert torch.equal(fast[0], slow[0])
        assert len(fast[1]) == len(slow[1]) > 0
        assert all(torch.equal(a, b) for a, b in zip(fast[1], slow[1], strict=True))
    assert len(built) == (3 if cluster == "topdrl" else 0)


def test_rows_read_the_batch_in_place_and_never_write_it():
    """The compiled loops leave the batch unchanged; a non-contiguous batch (a strided view) gives the rows of its
    contiguous copy."""
    obs = real_batch(32, seed=3)
    g, _, _ = tree_blocks(obs)
    before = {k: v.clone() for k, v in obs.items()}
    rows = _GpuRows(obs, tree_of(g, 4, 4), servers=True)
    assert all(torch.equal(obs[k], before[k]) for k in obs)
    strided = {k: v[::2] for k, v in obs.items()}
    assert not strided["node_features"].is_contiguous()
    a = _GpuRows(strided, tree_of(g, 4, 4), servers=True)
    b = _GpuRows({k: v.contiguous() for k, v in strided.items()}, tree_of(g, 4, 4), servers=True)
    assert a.size == b.size and torch.equal(a.node, b.node) and torch.equal(a.server_of, b.server_of)
    assert rows.size > a.size
    np.testing.assert_array_equal(a.count.numpy(), b.count.numpy())
