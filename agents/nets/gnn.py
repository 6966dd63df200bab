"""The hierarchical GNN over the GPU–server–rack–cluster tree of ``graph`` observations (:class:`GraphEncoder`, three
implementations of one function: dense operators built once per tree, per-sample scatter/gather, and the reference
``torch_geometric`` message passing)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from gpusched_lab.agents.nets.common import NetworkConfig, ViewsCheck, mlp, param_view, run_mlp
from gpusched_lab.agents.nets.gnn_rows import distinct_bit_rows, distinct_rows

from gpusched_envs.envs.encoding import KINDS
from gpusched_envs.graph import to_pyg


class LevelConv(nn.Module):
    """One hop of the hierarchy: ``h_dst ← h_dst + MLP([h_dst, mean_src MLP([h_src, edge])])``.

    The parameters of every implementation; :meth:`forward` is the ``torch_geometric`` message passing of
    ``impl="pyg"`` (torch_geometric's mean aggregation, imported there, so the dense and scatter paths never load it).
    """

    def __init__(self, hidden: int, edge_dim: int):
        super().__init__()
        self.message_mlp = mlp([hidden + edge_dim, hidden, hidden], last_activation=True)
        self.update_mlp = mlp([2 * hidden, hidden, hidden])
        self.norm = nn.LayerNorm(hidden)

    def forward(
        self, h: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor, dst: torch.Tensor
    ) -> torch.Tensor:
        """``dst``: the nodes with an incoming edge (only they are updated; one level is a small share of them)."""
        from torch_geometric.utils import scatter

        msg = self.message(h[edge_index[0]], edge_attr)  # source → target, as MessagePassing's default flow
        agg = scatter(msg, edge_index[1], dim=0, dim_size=h.shape[0], reduce="mean")
        delta = torch.zeros_like(h).index_copy(0, dst, self.update_mlp(torch.cat([h[dst], agg[dst]], dim=-1)))
        return self.norm(h + delta)

    def message(self, h_j: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        return self.message_mlp(torch.cat([h_j, edge_attr], dim=-1))


GNN_IMPLS = ("dense", "scatter", "pyg")
# the dense GNN's CPU batches from this size on norm per block and merge equal rows (_GpuRows)
WIDE_BATCH = 16


def tree_blocks(obs: dict[str, torch.Tensor]) -> tuple[int, int, int]:
    """Padded ``(G, S, R)`` of a graph observation, read from the observation itself (so one network runs on any
    cluster): node blocks are GPUs, servers, racks, cluster in that order, and the first server and the first rack
    are always real nodes, so their positions (from the ``kind`` one-hot of the first sample) are ``G`` and ``G+S``.
    """
    kinds = obs["node_features"][0, :, 1:3]  # server, rack columns of the kind one-hot
    n = obs["node_features"].shape[1]
    first = (kinds > 0).to(torch.uint8).argmax(dim=0).tolist()  # first server, first rack
    g, gs = int(first[0]), int(first[1])
    return g, gs - g, n - 1 - gs


def tree_index(
    edge_index: torch.Tensor, edge_features: torch.Tensor, edge_mask: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The tree of a batch of padded graph observations, read from its edges: ``(parent, link, has_parent,
    children)``, each ``(B, N, ...)``: a node's parent (0 when it has none), the features of its link to it, whether
    it has one, and its number of children. Child → parent edges are the unmasked ones whose head is the later node
    (parents always sit in a later block); masked edges go to a dummy column ``n`` that is cut off."""
    b = edge_index.shape[0]
    ei = edge_index.long()  # SB3 hands it over as float
    up = (edge_mask > 0) & (ei[:, 1] > ei[:, 0])
    child = torch.where(up, ei[:, 0], n)  # (B, E)
    parent = ei.new_zeros(b, n + 1).scatter_(1, child, ei[:, 1])[:, :n]  # (B, N)
    fe = edge_features.shape[-1]
    link = edge_features.new_zeros(b, n + 1, fe)
    link = link.scatter_(1, child.unsqueeze(-1).expand(-1, -1, fe), edge_features)[:, :n]  # (B, N, Fe)
    has_parent = edge_features.new_zeros(b, n + 1).scatter_(1, child, 1.0)[:, :n]
    children = torch.zeros_like(has_parent).scatter_add_(1, parent, has_parent)  # (B, N) child counts
    return parent, link, has_parent, children


EDGE_KEYS = ("edge_index", "edge_features", "edge_mask")
CONV_PARAMS = tuple(
    f"{mlp_name}.{i}.{kind}"
    for mlp_name in ("message_mlp", "update_mlp")
    for i in (0, 2)
    for kind in ("weight", "bias")
) + ("norm.weight", "norm.bias")


class _Tree:
    """One padded tree, shared by every sample of a batch, as the dense operators of :class:`GraphEncoder`'s
    ``"dense"`` implementation: per level ``lv`` (children in block ``lv``, parents in block ``lv + 1``) the
    ``(P, C)`` matrix that averages children into their parent, each child's parent within the parent block, and
    the masks of children with a parent and of parents with children. Built once per distinct tree (a cluster's
    edges do not change between steps), checked against every batch by value."""

    def __init__(self, obs: dict[str, torch.Tensor], g: int, s: int):
        # normal tensors even when the first batch comes in torch.inference_mode (a rollout): training's forward
        # saves them for backward, which inference tensors cannot be
        with torch.inference_mode(False):
            self._build(obs, g, s)

    def _build(self, obs: dict[str, torch.Tensor], g: int, s: int) -> None:
        nf = obs["node_features"]
        n = nf.shape[1]
        self.key = (g, s, obs["edge_index"].dtype, nf.dtype, nf.device)
        self.kinds = nf[0, :, 1:3].clone()  # what tree_blocks reads (see same_tree)
        self.edges = tuple(obs[k][0].clone() for k in EDGE_KEYS)
        self._link_cache: tuple | None = None
        with torch.no_grad():
            parent, link, has_parent, children = (
                t[0] for t in tree_index(obs["edge_index"][:1], *(obs[k][:1] for k in EDGE_KEYS[1:]), n)
            )
            self.bounds = bounds = (0, g, g + s, n - 1, n)  # GPU, server, rack, cluster blocks
            # (n-1, Fe): every child's link (the cluster, the last node, has no parent)
            self.link = link[: n - 1].to(nf.dtype)
            self.mean, self.pidx, self.mask_p, self.mask_c = [], [], [], []
            self.uniform, self.rep, self.rep0, self.src, self.inv = [], [], [], [], []
            for lv in range(3):
                c0, c1, p0, p1 = bounds[lv], bounds[lv + 1], bounds[lv + 1], bounds[lv + 2]
                # as the scatter implementation: a child's parent clamped into the parent block
                pidx = (parent[c0:c1] - p0).clamp(0, p1 - p0 - 1)
                count = children[p0:p1]
                mean = nf.new_zeros(p1 - p0, c1 - c0)
                mean[pidx, torch.arange(c1 - c0, device=nf.device)] = has_parent[c0:c1].to(nf.dtype)
                self.mean.append(mean / count.clamp(min=1.0).to(nf.dtype).unsqueeze(-1))
                self.pidx.append(pidx)
                # the masks of children with a parent and of parents with children; None: no padding, all ones
                for masks, m in ((self.mask_p, has_parent[c0:c1]), (self.mask_c, (count > 0))):
                    masks.append(None if bool(m.all()) else m.to(nf.dtype).unsqueeze(-1))
                self._groups(pidx, link[c0:c1], has_parent[c0:c1] > 0, p1 - p0)
            # k when every server has k GPUs, the GPUs of server s are rows k·s … k·s+k-1 and all links from a GPU
            # are the same (then a server's GPUs with equal inputs stay equal: see _GpuRows), else 0; the same of
            # servers in racks
            self.gpus_per_server = self._regular(0, g, s)
            self.servers_per_rack = self._regular(1, s, bounds[3] - bounds[2]) if self.gpus_per_server else 0

    def _regular(self, lv: int, c: int, p: int) -> int:
        """k when each of the p parents of level lv has the k children k·i … k·i+k-1, all real with one link."""
        k = c // p if p > 0 and c % p == 0 else 0
        regular = k > 0 and self.uniform[lv] and self.mask_p[lv] is None and self.mask_c[lv] is None
        regular = regular and bool((self.pidx[lv] == torch.arange(c, device=self.pidx[lv].device) // k).all())
        return k if regular else 0

    def _groups(self, pidx: torch.Tensor, link: torch.Tensor, real: torch.Tensor, p: int) -> None:
        """One level's children grouped by what a downward message reads, ``(parent, link)``: children of one
        group get the same message, so it is computed once per group. Children without a parent (padding: their
        update is masked out, their up message weighs 0) join group 0 and do not decide ``uniform``, whether every
        real child has the same link (then a link term is a bias). Kept per level: ``src`` (the group's parent,
        None when the groups are the parents in order), ``rep`` (a child of the group, for its link), ``inv`` (each
        child's group, None when every child is its own group) and ``uniform``."""
        c = pidx.shape[0]
        ids = torch.nonzero(real).flatten()
        if ids.numel() == 0:  # no real child: one group, messages all masked out
            ids = torch.zeros(1, dtype=torch.long, device=pidx.device)
        key = torch.cat([pidx[ids].unsqueeze(-1).to(link.dtype), link[ids]], dim=-1)
        uniq, inv_real = torch.unique(key, dim=0, return_inverse=True)
        u = uniq.shape[0]
        rep = torch.zeros(u, dtype=torch.long, device=pidx.device).scatter_(0, inv_real, ids)
        inv = torch.zeros(c, dtype=torch.long, device=pidx.device).index_copy_(0, ids, inv_real)
        src = pidx[rep]
        arange = torch.arange(max(c, p), device=pidx.device)
        self.uniform.append(bool((link[ids] == link[ids[:1]]).all()))
        self.rep.append(rep)
        self.rep0.append(int(rep[0]))
        self.src.append(None if u == p and bool((src == arange[:p]).all()) else src)
        self.inv.append(None if u == c and bool((inv == arange[:c]).all()) else inv)

    def link_terms(self, params: list[tuple], hd: int) -> tuple[torch.Tensor, list]:
        """The link part (+ bias) of every conv's first message layer for every child node, in one matmul:
        ``(n-1, convs · h)``, and per conv (conv ``k`` reads level ``k mod 3``) the row of it that is the first
        layer's bias where that level's links are all equal (None elsewhere). Outside autograd both depend only on
        the parameters' values, so they are kept until an optimizer step or ``load_state_dict`` changes them
        (their version counters)."""
        grad = torch.is_grad_enabled()
        if not grad:  # the very same detached views (rebuilt after a move), none changed since
            views = [t for p in params for t in p[:2]]
            versions = tuple(t._version for t in views)
            cache = self._link_cache
            if (
                cache is not None
                and cache[1] == versions
                and all(a is b for a, b in zip(cache[0], views, strict=True))
            ):
                return cache[2]
        weight = torch.cat([p[0][:, hd:] for p in params])
        terms = F.linear(self.link, weight, torch.cat([p[1] for p in params]))
        rows = [
            terms[self.bounds[k % 3] + self.rep0[k % 3], k * hd : (k + 1) * hd]
            if self.uniform[k % 3]
            else None
            for k in range(len(params))
        ]
        if not grad:
            self._link_cache = (views, versions, (terms, rows))
        return terms, rows

    def same_tree(self, obs: dict[str, torch.Tensor]) -> bool:
        """Is this the tree of every sample of ``obs``, with the blocks :func:`tree_blocks` reads from it (the
        kind columns of its first sample, equal to this tree's)? :meth:`matches` without reading the blocks."""
        nf = obs["node_features"]
        if nf.dtype != self.key[3] or nf.device != self.key[4] or nf.shape[1] != self.kinds.shape[0]:
            return False
        return torch.equal(nf[0, :, 1:3], self.kinds) and self._same_edges(obs)

    def matches(self, obs: dict[str, torch.Tensor], g: int, s: int) -> bool:
        """Is this the tree of every sample of ``obs``?"""
        nf = obs["node_features"]
        if self.key != (g, s, obs["edge_index"].dtype, nf.dtype, nf.device):
            return False
        return self._same_edges(obs)

    def _same_edges(self, obs: dict[str, torch.Tensor]) -> bool:
        if obs["edge_index"].dtype != self.key[2]:
            return False
        for k, mine in zip(EDGE_KEYS, self.edges, strict=True):
            t = obs[k]
            if t.shape[1:] != mine.shape or not torch.equal(t[0], mine):
                return False
            if t.shape[0] > 1 and not torch.equal(t, mine.expand_as(t)):
                return False
        return True


class _GpuRows:
    """The distinct rows of a batch on a regular tree (:attr:`_Tree.gpus_per_server`): two GPUs of one server with
    equal features and node mask get equal inputs at every layer (same parent, same link, the same per-row ops),
    so the GPU block is computed once per distinct ``(sample, server, features)`` and weighed by its count where
    GPUs are summed (a server's mean over its GPUs, the pooled GPU mean). With ``servers`` (racks regular too,
    :attr:`_Tree.servers_per_rack`) servers are merged first the same way: two servers of one rack with equal
    features and node mask and GPU by GPU equal GPUs compute the same at every layer, so the server block is one
    row per distinct server (``server_*``, sample-major; ``server_of``: each server's row, sample-major) and the
    GPU rows are those of the distinct servers only.

    GPU rows, sample-major: ``sample``; ``parent_row``, its server's row in the server block (node-major
    ``s · B + sample`` without ``servers``); ``count``, the GPUs of its server it stands for; ``weight``, the GPUs
    of its sample it stands for; ``node``, its flat index into the ``(B · N)`` nodes.

    Built by one compiled pass over the batch's memory (:func:`~gpusched_lab.agents.nets.gnn_rows.distinct_rows`,
    which says what equal means: no coordinate differs, so a NaN or infinite value equals nothing)."""

    def __init__(self, obs: dict[str, torch.Tensor], tree: _Tree, servers: bool = False):
        nf = obs["node_features"]
        mask = obs["node_mask"]
        g, k = tree.bounds[1], tree.gpus_per_server
        m = tree.servers_per_rack if servers else 0
        # the compiled loops read the batch's own memory (a CPU batch); float16/bfloat16 are compared in float64,
        # which keeps every value and every exact-zero difference
        x = nf if nf.dtype in (torch.float32, torch.float64) else nf.double()
        x = x.detach()
        out = distinct_rows(
            np.ascontiguousarray(x.numpy()),
            np.ascontiguousarray(mask.detach().to(x.dtype).numpy()),
            g,
            k,
            m,
        )
        size, sample, node, count, parent_row, weight = out[:6]
        # normal tensors even when built in torch.inference_mode (DDQN's targets): a later forward with autograd
        # on the very same batch reuses them (_gpu_rows) and saves them for backward
        with torch.inference_mode(False):
            self.servers = servers
            self.size = int(size)
            self.sample = torch.from_numpy(sample[:size])
            self.node = torch.from_numpy(node[:size])
            self.parent_row = torch.from_numpy(parent_row[:size])
            self.count = torch.from_numpy(count[:size]).to(nf.dtype)
            self.weight = torch.from_numpy(weight[:size]).to(nf.dtype) if servers else self.count
            if servers:
                server_size, server_sample, server_parent_row, server_node, server_count, server_of = out[6:]
                self.server_size = int(server_size)
                self.server_sample = torch.from_numpy(server_sample[:server_size])
                self.server_parent_row = torch.from_numpy(server_parent_row[:server_size])
                self.server_node = torch.from_numpy(server_node[:server_size])
                self.server_count = torch.from_numpy(server_count[:server_size]).to(nf.dtype)
                self.server_of = torch.from_numpy(server_of)


# the distinct rows of the last batch (one entry): two networks reading the same batch (DDQN's online and target
# networks on the next observations) build them once
_ROWS_CACHE: list[tuple] = []


def _gpu_rows(obs: dict[str, torch.Tensor], tree: _Tree, servers: bool) -> _GpuRows:
    """:class:`_GpuRows` of ``obs`` on ``tree``, reused while the batch is the very same tensors, unchanged (their
    version counters; inference tensors, which have none, are not kept)."""
    nf, mask = obs["node_features"], obs["node_mask"]
    key = (tree.bounds, tree.gpus_per_server, tree.servers_per_rack, servers, nf.shape)
    keep = not (nf.is_inference() or mask.is_inference())
    if keep and _ROWS_CACHE:
        c_nf, c_mask, versions, c_key, rows = _ROWS_CACHE[0]
        if c_nf is nf and c_mask is mask and c_key == key and versions == (nf._version, mask._version):
            return rows
    rows = _GpuRows(obs, tree, servers=servers)
    _ROWS_CACHE[:] = [(nf, mask, (nf._version, mask._version), key, rows)] if keep else []
    return rows


class _BlockGroups:
    """The rows of each block of a wide batch on a regular tree (GPUs and servers as :class:`_GpuRows`' distinct
    rows, racks and the cluster node-major) grouped by their features alone, across samples: until a block's first
    update its hidden state is a function of its own features (the node MLP, then LayerNorms), and nothing reads
    it before that update but the first upward message of the GPUs (whose one link is the level's, the same for
    every GPU), so the node MLP, that message, the LayerNorms and the node part of the first update run once per
    group. Per block ``k``: ``node[k]``, the flat ``(B · N)`` node index of each row the node MLP reads (a group's
    first row, or every row where the block is not grouped), and ``uid[k]``, each row's group (None: not grouped,
    when grouping would leave more than nine in ten rows). Rows are grouped when their features are equal bit for
    bit (:func:`~gpusched_lab.agents.nets.gnn_rows.distinct_bit_rows`)."""

    def __init__(self, nf: torch.Tensor, rows, tree: _Tree):
        b, n, f = nf.shape
        bounds = tree.bounds
        flat = nf.detach().reshape(-1, f)
        first = 2 if rows.servers else 1
        # normal tensors even when built in torch.inference_mode, as the rows' (a training forward saves them)
        with torch.inference_mode(False):
            per_row = [rows.node, rows.server_node] if rows.servers else [rows.node]
            for k in range(first, 4):  # node-major blocks: row j·B + i is node bounds[k] + j of sample i
                j = torch.arange(bounds[k], bounds[k + 1])
                per_row.append((j.unsqueeze(1) + torch.arange(b).unsqueeze(0) * n).reshape(-1))
            self.node: list[torch.Tensor] = []
            self.uid: list[torch.Tensor | None] = []
            for idx in per_row:
                x = flat.index_select(0, idx)
                u, uid, rep = distinct_bit_rows(x.view(BIT_VIEWS[x.element_size()]).numpy())
                grouped = 10 * u <= 9 * idx.shape[0]
                self.node.append(idx.index_select(0, torch.from_numpy(rep[:u])) if grouped else idx)
                self.uid.append(torch.from_numpy(uid) if grouped else None)


# an integer dtype per float width: rows compared bit for bit (distinct_bit_rows)
BIT_VIEWS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _block_groups(nf: torch.Tensor, rows, tree: _Tree) -> _BlockGroups:
    """:class:`_BlockGroups` of a batch, kept on its rows (which are kept per batch, on the same tree layout)."""
    groups = rows.__dict__.get("_groups")
    if groups is None:
        groups = rows.__dict__["_groups"] = _BlockGroups(nf, rows, tree)
    return groups


class GraphEncoder(nn.Module):
    """Hierarchical message passing over the GPU–server–rack–cluster tree.

    A sweep goes up (GPU → server, server → rack, rack → cluster, one :class:`LevelConv` per level) and back down
    (cluster → rack → server → GPU), so after one sweep every GPU has seen the whole cluster through its ancestors.
    The cluster embedding is the cluster node ⊕ the masked mean of GPU nodes ⊕ the context.

    Three implementations of the same function (same parameters, same outputs up to float rounding):

    - ``impl="dense"`` (default): the tree of a cluster does not change between steps, so its operators are built
      once (:class:`_Tree`) and each level is a few wide ops on the whole batch: the mean over a parent's children is
      one ``(P, C)`` matmul, a child reading its parent one ``index_select``; the first message layer's link part
      is computed for every level in one matmul (a bias where a level's links are all equal); a downward message is
      computed once per (parent, link), not per child, and so is the update layer's message part; the update
      layer's two inputs are two matmuls summed (no concatenation); the MLPs are called as functions (no module
      overhead). Small batches (a rollout step) norm a level's nodes in one LayerNorm call; CPU batches of 16 and
      more norm each block on its own and, on a regular tree (every server with the same number of GPUs), compute
      the GPU block once per distinct (sample, server, GPU features) row and, where racks are regular too, the
      server block once per distinct server of a rack (:class:`_GpuRows`); until a block's first update, a node's
      state depends on its features alone, so that part runs once per distinct feature row of the whole batch
      (:class:`_BlockGroups`). A batch whose samples do not all share
      one tree (several clusters in one batch) takes the scatter path.
    - ``impl="scatter"``: each level is a gather (down: every child reads its one parent) or a segment mean (up:
      ``scatter_add`` of the children's messages into their parent's row) on dense ``(B, nodes, h)`` tensors, with
      the tree read from each sample's ``edge_index`` / ``edge_features`` per forward.
    - ``impl="pyg"``: the original ``torch_geometric`` message passing over :func:`gpusched_envs.graph.to_pyg`
      batches (the first encoder, kept as the reference for tests and ``gpusched bench``).

    Nothing in the parameters depends on the cluster's size: block sizes are read from each observation
    (:func:`tree_blocks`), so a checkpoint trained on one preset runs on any other.
    """

    def __init__(
        self,
        cfg: NetworkConfig,
        node_dim: int,
        edge_dim: int,
        job_dim: int,
        context_dim: int,
        impl: str = "dense",
    ):
        super().__init__()
        if impl not in GNN_IMPLS:
            raise ValueError(f"gnn_impl must be one of {', '.join(GNN_IMPLS)}, got {impl!r}")
        h = cfg.hidden
        self.cfg = cfg
        self.impl = impl
        self.node_in = mlp([node_dim, h, h], last_activation=True)
        self.up = nn.ModuleList(LevelConv(h, edge_dim) for _ in range(3 * cfg.layers))
        self.down = nn.ModuleList(LevelConv(h, edge_dim) for _ in range(3 * cfg.layers))
        self.job_in = mlp([job_dim, h, h], last_activation=True)
        self.context_dim = context_dim
        self.out_dim = h
        self.cluster_out = mlp([2 * h + context_dim, h, h], last_activation=True)
        self._trees: list[_Tree] = []  # dense impl: the trees seen lately (not parameters, not saved)

    def forward(
        self, obs: dict[str, torch.Tensor], with_jobs: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """``(cluster (B, h), jobs (B, W, h), servers (B, S, h))``; ``with_jobs=False``: jobs is None (a caller
        that embeds the window's jobs itself, :meth:`ActionScorer.scores_and_embedding`)."""
        if self.impl == "dense" and self._trees and self._trees[0].same_tree(obs):  # the last batch's tree
            return self._forward_dense(obs, self._trees[0], with_jobs)
        g, s, _ = tree_blocks(obs)
        if self.impl == "dense":
            tree = self.tree_of(obs, g, s)
            if tree is not None:
                return self._forward_dense(obs, tree, with_jobs)
            h = self._propagate_scatter(obs, g, s)  # samples of different clusters in one batch
        elif self.impl == "scatter":
            h = self._propagate_scatter(obs, g, s)
        else:
            h = self._propagate_pyg(obs)
        node_mask = obs["node_mask"].float()
        cluster_node = h[:, -1]
        gpu_mask = node_mask[:, :g].unsqueeze(-1)
        gpu_mean = (h[:, :g] * gpu_mask).sum(1) / gpu_mask.sum(1).clamp(min=1.0)
        jobs = run_mlp(self.job_in, obs["job_features"]) if with_jobs else None  # (B, W, h)
        cluster = run_mlp(self.cluster_out, torch.cat([cluster_node, gpu_mean, obs["context"]], dim=-1))
        return cluster, jobs, h[:, g : g + s]

    def tree_of(self, obs: dict[str, torch.Tensor], g: int, s: int) -> _Tree | None:
        """The dense operators of the batch's tree (cached), or None when its samples have different trees."""
        for i, tree in enumerate(self._trees):
            if tree.matches(obs, g, s):
                if i:  # the most recent first (forward tries it before reading the blocks)
                    self._trees = [tree, *self._trees[:i], *self._trees[i + 1 :]]
                return tree
        tree = _Tree(obs, g, s)
        if not tree.matches(obs, g, s):  # the samples differ among themselves
            return None
        self._trees = [tree, *self._trees[:7]]  # a few clusters (WorkerPlacement's task clusters) stay cached
        return tree

    def _conv_params(self) -> list[tuple]:
        """Per conv (up convs, then down convs): the parameters of its two MLPs and its norm (:class:`ParamView`),
        then the column blocks of the first layers that the dense forward multiplies separately: the message
        layer's node part, the update layer's node part (transposed) and its message part. Outside autograd the
        list is kept while every conv's :class:`ParamView` stays valid (one :class:`ViewsCheck`; the slices are
        views of the same storage, so optimizer steps and ``load_state_dict`` show through)."""
        grad = torch.is_grad_enabled()
        cache = self.__dict__.get("_frozen_params")
        if not grad and cache is not None and cache[0].valid():
            return cache[1]
        views = [param_view(conv) for conv in (*self.up, *self.down)]
        hd = self.out_dim
        out = []
        for conv, view in zip((*self.up, *self.down), views, strict=True):
            p = view.live if grad else view.frozen
            t = tuple(p[name] for name in CONV_PARAMS) + (conv.norm.eps,)
            out.append(t + (t[0][:, :hd], t[4][:, :hd].t(), t[4][:, hd:]))
        if not grad:
            self.__dict__["_frozen_params"] = (ViewsCheck(views), out)
        return out

    def _forward_dense(self, obs: dict[str, torch.Tensor], tree: _Tree, with_jobs: bool = True):
        """The dense implementation, node-major: each block of the tree is a contiguous ``(rows · B, h)`` matrix
        (rows of one node are its B samples), so every layer is one 2-D matmul, the children's mean is
        ``(P, C) @ (C, B·h)``, a child reading its parent one ``index_select`` of rows, and a level's LayerNorm one
        call over the blocks concatenated (split again into views, whose backward is one concatenation) or, for a
        wide CPU batch, one call per block. With :class:`_GpuRows` the GPU block (and the server block) is its
        distinct rows (sample-major), summed into the parents by ``index_add`` (weighed by the rows' counts) and
        reading them back by ``index_select``; with :class:`_BlockGroups` each block is one row per feature group
        until its first update, when each row reads its group's."""
        nf = obs["node_features"]
        b, n, f = nf.shape
        hd = self.out_dim
        bounds = tree.bounds
        sizes = [(bounds[k + 1] - bounds[k]) * b for k in range(4)]
        params = self._conv_params()
        # (n-1, convs · h): links' part of the first message layers; per conv its bias row (uniform levels)
        link_all, link_rows = tree.link_terms(params, hd)
        # on the CPU a wide batch is bound by the work per row: each block normed on its own and the GPU block as
        # its distinct rows (:class:`_GpuRows`); an accelerator is bound by the number of kernels (and the distinct
        # rows' count needs a host sync), so it takes the fewer, wider calls of a small batch
        wide = b >= WIDE_BATCH and nf.device.type == "cpu"
        rows = None
        if wide and tree.gpus_per_server > 1:
            rows = _gpu_rows(obs, tree, servers=tree.servers_per_rack > 1)
        # pending[k]: block k holds one row per feature group (until its first update), row i reads uid[i]
        pending: list[torch.Tensor | None] = [None] * 4
        if rows is None:
            x = nf.view(n, f) if b == 1 else nf.transpose(0, 1).reshape(n * b, f)
            # GPU, server, rack, cluster blocks, each (rows · B, h)
            hs = list(run_mlp(self.node_in, x).split_with_sizes(sizes))
        else:  # the GPU block (and the server block) as distinct rows, the others node-major, all by groups
            groups = _block_groups(nf, rows, tree)
            nodes = torch.cat(groups.node)
            x = nf.reshape(b * n, f).index_select(0, nodes)
            hs = list(run_mlp(self.node_in, x).split_with_sizes([t.shape[0] for t in groups.node]))
            pending = list(groups.uid)
            sizes = [rows.size, rows.server_size if rows.servers else sizes[1], sizes[2], sizes[3]]

        def link_of(k: int, lv: int, rows: torch.Tensor | None = None) -> torch.Tensor:
            """Conv k's link terms of level lv's children (``rows``: of these children only; uniform: one row)."""
            if tree.uniform[lv]:
                return link_rows[k]
            link = link_all[bounds[lv] : bounds[lv + 1], k * hd : (k + 1) * hd]
            return link if rows is None else link.index_select(0, rows)

        def first_layer(x: torch.Tensor, k: int, lv: int, rows: torch.Tensor | None = None) -> torch.Tensor:
            """``relu(W_node · x + link terms)`` of conv k's first message layer, ``x`` a level-lv child per row
            group of B (uniform links: the link terms are the bias of the one matmul)."""
            w = params[k][11]
            if tree.uniform[lv]:
                return torch.relu(F.linear(x, w, link_of(k, lv)))
            link = link_of(k, lv, rows)
            y = F.linear(x, w)
            y = y + link if b == 1 else (y.view(-1, b, hd) + link.unsqueeze(1)).view(-1, hd)
            return torch.relu(y)

        def gather(x: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
            """Rows groups (of B) ``idx`` of ``x``, ``(rows · B, h)``."""
            return x if idx is None else x.view(-1, b * hd).index_select(0, idx).view(-1, hd)

        def update(
            p: tuple, lv: int, half: torch.Tensor, mask: torch.Tensor | None, uid: torch.Tensor | None = None
        ) -> list[torch.Tensor]:
            """``norm(h + mask · update_mlp([h_lv, other]))``, ``half`` the ``other`` part of the first layer (+ its
            bias): block lv updated, every node normed (per block, or as one call at small batches). ``uid``: block
            lv holds one row per group, row i of the update reads group ``uid[i]`` (its node part computed once per
            group)."""
            dst = hs[lv]
            if uid is None:
                u = torch.relu(torch.addmm(half, dst, p[12]))
            else:
                u = torch.relu(half + dst.mm(p[12]).index_select(0, uid))
                dst = dst.index_select(0, uid)
            delta = F.linear(u, p[6], p[7])
            if mask is not None:
                delta = (delta.view(-1, b, hd) * mask.unsqueeze(1)).view(-1, hd)
            new = dst + delta
            if wide:  # each block its own call: no concatenation, forward or backward
                return [F.layer_norm(new if k == lv else hs[k], (hd,), p[8], p[9], p[10]) for k in range(4)]
            x = torch.cat([new if k == lv else hs[k] for k in range(4)])
            return list(F.layer_norm(x, (hd,), p[8], p[9], p[10]).split_with_sizes(sizes))

        nup = len(self.up)
        for sweep in range(self.cfg.layers):
            for lv in range(3):  # up: children lv → parents lv + 1, mean over children
                k = 3 * sweep + lv
                p = params[k]
                msg = torch.relu(F.linear(first_layer(hs[lv], k, lv), p[2], p[3]))  # (C · B, h)
                if pending[lv] is not None:  # the children's messages by group (the GPUs'), one per row
                    msg = msg.index_select(0, pending[lv])
                if lv == 0 and rows is not None:  # each distinct GPU row weighs its count / GPUs per server
                    w = rows.count / tree.gpus_per_server
                    agg = msg.new_zeros(sizes[1], hd).index_add(0, rows.parent_row, msg * w)
                elif lv == 1 and rows is not None and rows.servers:  # and each distinct server row
                    w = rows.server_count / tree.servers_per_rack
                    agg = msg.new_zeros(sizes[2], hd).index_add(0, rows.server_parent_row, msg * w)
                else:  # children without a parent weigh 0
                    agg = tree.mean[lv].mm(msg.view(-1, b * hd)).view(-1, hd)
                hs = update(p, lv + 1, F.linear(agg, p[13], p[5]), tree.mask_c[lv], pending[lv + 1])
                pending[lv + 1] = None
            for lv in (2, 1, 0):  # down: every child lv reads its one parent, one message per (parent, link)
                k = 3 * sweep + lv
                p = params[nup + k]
                par = gather(hs[lv + 1], tree.src[lv])  # (groups · B, h)
                msg = torch.relu(F.linear(first_layer(par, nup + k, lv, tree.rep[lv]), p[2], p[3]))
                half = F.linear(msg, p[13], p[5])
                if lv == 0 and rows is not None:  # the groups are the servers in order
                    half = half.index_select(0, rows.parent_row)
                elif lv == 1 and rows is not None and rows.servers:  # and the racks
                    half = half.index_select(0, rows.server_parent_row)
                else:
                    half = gather(half, tree.inv[lv])  # (C · B, h)
                hs = update(p, lv, half, tree.mask_p[lv], pending[lv])  # (the parents: updated going up)
                pending[lv] = None
        for k, uid in enumerate(pending):  # no sweep (layers=0): blocks still by group
            if uid is not None:
                hs[k] = hs[k].index_select(0, uid)
        cluster_node = hs[3]
        if rows is not None and rows.servers:  # (B, S, h) from the distinct rows
            servers = hs[1].index_select(0, rows.server_of).view(b, -1, hd)
        else:
            servers = hs[1].view(-1, b, hd).transpose(0, 1)
        gpu_mask = obs["node_mask"][:, : bounds[1]].float()  # (B, G)
        if rows is None:
            gpu_sum = (hs[0].view(-1, b, hd) * gpu_mask.t().unsqueeze(-1)).sum(0)
        else:
            w = rows.weight * obs["node_mask"].reshape(-1).index_select(0, rows.node).unsqueeze(-1).float()
            gpu_sum = hs[0].new_zeros(b, hd).index_add(0, rows.sample, hs[0] * w)
        gpu_mean = gpu_sum / gpu_mask.sum(1, keepdim=True).clamp(min=1.0)
        jobs = run_mlp(self.job_in, obs["job_features"]) if with_jobs else None  # (B, W, h)
        cluster = run_mlp(self.cluster_out, torch.cat([cluster_node, gpu_mean, obs["context"]], dim=-1))
        return cluster, jobs, servers

    def _propagate_scatter(self, obs: dict[str, torch.Tensor], g: int, s: int) -> torch.Tensor:
        nf = obs["node_features"]
        n = nf.shape[1]
        parent, link, has_parent, children = tree_index(
            obs["edge_index"], obs["edge_features"], obs["edge_mask"], n
        )
        has_parent = has_parent.to(nf.dtype)
        children = children.to(nf.dtype)
        bounds = (0, g, g + s, n - 1, n)  # GPU, server, rack, cluster blocks
        blocks = [slice(bounds[k], bounds[k + 1]) for k in range(4)]
        has_p = [has_parent[:, sl, None] for sl in blocks]
        count = [children[:, sl, None] for sl in blocks]
        links = [link[:, sl] for sl in blocks]
        # parent of each child as an index into the parent block, expanded over the hidden width
        hdim = self.out_dim
        pidx = [
            (parent[:, blocks[k]] - bounds[k + 1]).clamp(0, bounds[k + 2] - bounds[k + 1] - 1)
            for k in range(3)
        ]
        pidx = [i.unsqueeze(-1).expand(-1, -1, hdim) for i in pidx]
        # h is kept as one tensor per block: LayerNorm is per node, so norming every block is norming every node
        h = self.node_in(nf)
        hs = [h[:, sl] for sl in blocks]
        for sweep in range(self.cfg.layers):
            for lv in range(3):  # up: children lv → parents lv + 1, mean over children
                conv = self.up[3 * sweep + lv]
                msg = conv.message_mlp(torch.cat([hs[lv], links[lv]], dim=-1)) * has_p[lv]
                hp = hs[lv + 1]
                agg = msg.new_zeros(hp.shape).scatter_add_(1, pidx[lv], msg) / count[lv + 1].clamp(min=1.0)
                delta = conv.update_mlp(torch.cat([hp, agg], dim=-1)) * (count[lv + 1] > 0)
                hs = [conv.norm(x + delta if k == lv + 1 else x) for k, x in enumerate(hs)]
            for lv in (2, 1, 0):  # down: every child lv reads its one parent lv + 1
                conv = self.down[3 * sweep + lv]
                src = hs[lv + 1].gather(1, pidx[lv])
                msg = conv.message_mlp(torch.cat([src, links[lv]], dim=-1))
                delta = conv.update_mlp(torch.cat([hs[lv], msg], dim=-1)) * has_p[lv]
                hs = [conv.norm(x + delta if k == lv else x) for k, x in enumerate(hs)]
        return torch.cat(hs, dim=1)

    def _propagate_pyg(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        b, n, _ = obs["node_features"].shape
        graph = to_pyg(obs, keep_padding=True)  # node i of sample s is row s·N + i
        x, edge_index, edge_attr = graph.x, graph.edge_index, graph.edge_attr
        kind = x[:, :KINDS].argmax(dim=-1)  # 0 gpu, 1 server, 2 rack, 3 cluster (padding: 0, isolated)
        level = edge_attr[:, 1:4].argmax(dim=-1)  # 0 gpu–server, 1 server–rack, 2 rack–cluster
        upward = kind[edge_index[0]] < kind[edge_index[1]]
        routes = []  # up levels 0, 1, 2 then down levels 0, 1, 2: (edge_index, edge_attr, destination nodes)
        for d in (upward, ~upward):
            for lv in range(3):
                sel = (level == lv) & d
                routes.append((edge_index[:, sel], edge_attr[sel], torch.unique(edge_index[1, sel])))
        h = self.node_in(x)
        for sweep in range(self.cfg.layers):
            for lv in range(3):
                h = self.up[3 * sweep + lv](h, *routes[lv])
            for lv in (2, 1, 0):
                h = self.down[3 * sweep + lv](h, *routes[3 + lv])
        return h.view(b, n, -1)
