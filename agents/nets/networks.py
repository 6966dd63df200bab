"""Policy / Q-networks over the envs' padded Dict observations: a hierarchical GNN for ``graph`` (dense per-level
scatter/gather message passing; size-agnostic: one set of parameters reads any cluster and window, see
:class:`GraphEncoder`), TopDRL's multi-branch CNN for ``image`` and an MLP for ``flat``.

Every network takes a batch of observations (a dict of tensors with a leading batch dimension, exactly the env's
keys) and returns one score per action, ``(B, A)`` with ``A = action_mask.shape[-1]``. Slot-indexed actions are
scored by one shared head from the slot's embedding ⊕ the cluster embedding (so a job's score does not depend on
the slot it sits in), the last action (wait / defer) by its own head:

- ``slots="jobs"`` (``JobSelect-v1``: action ``i < W`` starts window job ``i``): slot embeddings from job features;
- ``slots="servers"`` (``WorkerPlacement-v1``: action ``s`` puts a worker on server ``s``): slot embeddings from the
  server nodes (GNN) or the server rows of the image (CNN);
- ``slots="rules"`` (``JobSelect-v1(rules=...)``: action ``k`` lets rule ``k`` schedule): an MLP over the cluster
  embedding and the mean and max of the job rows' embeddings gives one score per rule;
- ``slots="none"``: a generic linear head on the pooled embedding (any other discrete action space).

Masking is left to the caller (:func:`masked`), so the same network serves Q-learning and policy gradients.

The pieces live by job: :mod:`agents.nets.common` (:class:`NetworkConfig`, :func:`mlp`, :func:`masked`,
:func:`obs_to_tensors`), :mod:`agents.nets.gnn` (:class:`GraphEncoder`), :mod:`agents.nets.cnn`
(:class:`MultiBranchCNN`); this module holds the flat encoder, the action heads and the factory, and re-exports the
others' names.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from gpusched_lab.agents.nets.cnn import MultiBranchCNN
from gpusched_lab.agents.nets.common import (
    ENCODERS,
    OBS_MODE_OF_ENCODER,
    SLOT_KINDS,
    NetworkConfig,
    ParamView,
    config_for_env,
    config_for_layout,
    masked,
    mlp,
    obs_to_tensors,
    param_view,
    run_mlp,
)
from gpusched_lab.agents.nets.config import GNN_FEATURE_KEYS, layout_mismatch
from gpusched_lab.agents.nets.gnn import (
    BIT_VIEWS,
    CONV_PARAMS,
    EDGE_KEYS,
    GNN_IMPLS,
    GraphEncoder,
    LevelConv,
    _Tree,
    tree_blocks,
    tree_index,
)
from gpusched_lab.agents.nets.gnn_rows import distinct_bit_rows

__all__ = [
    "CONV_PARAMS",
    "EDGE_KEYS",
    "ENCODERS",
    "GNN_FEATURE_KEYS",
    "GNN_IMPLS",
    "OBS_MODE_OF_ENCODER",
    "SLOT_KINDS",
    "ActionScorer",
    "FlatMLP",
    "GraphEncoder",
    "LevelConv",
    "MultiBranchCNN",
    "NetworkConfig",
    "ParamView",
    "_Tree",
    "build_network",
    "config_for_env",
    "config_for_layout",
    "for_env",
    "layout_mismatch",
    "masked",
    "mlp",
    "obs_to_tensors",
    "param_view",
    "run_mlp",
    "tree_blocks",
    "tree_index",
]


# batches of at least this many observations embed and score only the filled window slots of JobSelect's GNN
# network, plus one empty slot per sample (:meth:`ActionScorer._job_scores_distinct`)
DISTINCT_JOBS_BATCH = 16


# ---------------------------------------------------------------------------------------------------------- MLP
class FlatMLP(nn.Module):
    """An MLP over the ``flat`` observation ⊕ context."""

    def __init__(self, cfg: NetworkConfig, obs_dim: int, context_dim: int):
        super().__init__()
        self.net = mlp([obs_dim + context_dim] + [cfg.hidden] * (cfg.layers + 1), last_activation=True)
        self.out_dim = cfg.hidden

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, None, None]:
        return run_mlp(self.net, torch.cat([obs["obs"], obs["context"]], dim=-1)), None, None


# ---------------------------------------------------------------------------------------------------------- heads
class ActionScorer(nn.Module):
    """Encoder + head: observations → ``(B, A)`` scores (Q-values or logits), unmasked."""

    def __init__(self, cfg: NetworkConfig, obs_space, gnn_impl: str = "dense"):
        super().__init__()
        self.cfg = cfg
        sh = {k: tuple(s.shape) for k, s in obs_space.spaces.items()}
        ctx = sh["context"][0]
        if sh["action_mask"][0] != cfg.num_actions:
            raise ValueError(
                f"network expects {cfg.num_actions} actions, observation space has {sh['action_mask'][0]}"
            )
        if cfg.encoder == "gnn":
            self.encoder = GraphEncoder(
                cfg, sh["node_features"][1], sh["edge_features"][1], sh["job_features"][1], ctx, gnn_impl
            )
        elif cfg.encoder == "cnn":
            self.encoder = MultiBranchCNN(
                cfg, sh["cluster_image"][0], sh["queue"][1], sh["cluster_features"][0], ctx
            )
        elif cfg.encoder == "mlp":
            self.encoder = FlatMLP(cfg, sh["obs"][0], ctx)
        else:
            raise ValueError(f"encoder must be one of {', '.join(ENCODERS)}, got {cfg.encoder!r}")
        h = self.encoder.out_dim
        self.num_slots = cfg.num_actions - 1
        if cfg.slots == "none":
            self.generic = nn.Linear(h, cfg.num_actions)
        elif cfg.slots == "rules":
            if cfg.encoder == "mlp":
                raise ValueError(
                    "slots='rules' reads the job rows of a gnn or cnn encoder; with encoder=mlp use 'none'"
                )
            self.rule_head = mlp([3 * h, h, cfg.num_actions])
        else:
            n = cfg.window if cfg.slots == "jobs" else cfg.num_servers
            if n != self.num_slots:
                raise ValueError(
                    f"slots={cfg.slots!r} gives {n} slots but the env has {self.num_slots} + 1 actions"
                )
            self.slot_head = mlp([2 * h, h, 1])
            self.last_head = mlp([2 * h, h, 1])
            self.head_job = cfg.slots == "servers" and cfg.encoder != "mlp"
        self.hint_weight = None
        if cfg.hint_logit:
            if "hint" not in sh:
                raise ValueError(
                    f"the network adds obs['hint'] to its scores (hint_logit={cfg.hint_logit}) but the observation "
                    "space has no hint: make the env with hint=<the heuristic it was trained with>"
                )
            self.hint_weight = nn.Parameter(torch.tensor(float(cfg.hint_logit)))

    def embed(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(B, h)`` pooled embedding (the PPO value branch reads it)."""
        return self.encoder(obs)[0]

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.scores_and_embedding(obs)[0]

    def scores_and_embedding(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(scores (B, A), cluster embedding (B, h))``; with ``hint_logit`` the scores include
        ``hint_weight · obs["hint"]``."""
        scores, cluster = self._scores_and_embedding(obs)
        if self.hint_weight is not None:
            scores = scores + self.hint_weight * obs["hint"]
        return scores, cluster

    def _scores_and_embedding(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        if (
            self.cfg.slots == "jobs"
            and isinstance(self.encoder, GraphEncoder)
            and obs["job_features"].shape[0] >= DISTINCT_JOBS_BATCH
        ):
            cluster, _, _ = self.encoder(obs, with_jobs=False)
            out = self._job_scores_distinct(obs, cluster)
            if out is not None:
                return out
            jobs, servers = run_mlp(self.encoder.job_in, obs["job_features"]), None
        else:
            cluster, jobs, servers = self.encoder(obs)
        if self.cfg.slots == "none":
            return self.generic(cluster), cluster
        if self.cfg.slots == "rules":  # one score per rule from the cluster and the job rows' mean and max
            jm = obs["job_mask"].float().unsqueeze(-1)
            mean = (jobs * jm).sum(1) / jm.sum(1).clamp(min=1.0)
            peak = jobs.masked_fill(jm == 0, -1e4).amax(1) * (jm.sum(1) > 0)
            return run_mlp(self.rule_head, torch.cat([cluster, mean, peak], dim=-1)), cluster
        if self.cfg.slots == "jobs":
            slots = jobs
            jm = obs.get("job_mask", obs["action_mask"][:, :-1]).float().unsqueeze(-1)
            summary = (jobs * jm).sum(1) / jm.sum(1).clamp(min=1.0)
        else:
            slots = servers + jobs[:, :1]  # the head job (window slot 0) joins every server's embedding
            summary = jobs[:, 0]
        ctx = cluster.unsqueeze(1).expand(-1, slots.shape[1], -1)
        slot_scores = run_mlp(self.slot_head, torch.cat([slots, ctx], dim=-1)).squeeze(-1)  # (B, K)
        last = run_mlp(self.last_head, torch.cat([cluster, summary], dim=-1))  # (B, 1)
        return torch.cat([slot_scores, last], dim=-1), cluster

    def _job_scores_distinct(
        self, obs: dict[str, torch.Tensor], cluster: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The ``slots="jobs"`` scores of a GNN batch with the window's empty slots computed once per sample: a
        slot whose features are all zero (padding) embeds to ``job_in(0)`` whatever its sample, and scores
        ``slot_head([job_in(0), cluster])`` in every empty slot of its sample, so the job MLP runs on the
        filled slots and one zero row, the slot head on the filled slots and one row per sample, gathered back
        into ``(B, W)``. The slot head's first layer is split by its two inputs, ``W_job · job + W_ctx · cluster +
        b``: the job part once per job row (the zero row's once), the cluster part once per sample, read by each
        of its slots. On the CPU, equal filled rows (the same job seen at several steps, bit for bit equal
        features) are embedded once (:func:`distinct_jobs`). The window summary (the masked mean of the job embeddings) sums the filled rows into their
        sample and adds the zero row's embedding once per masked-in empty slot. Every number is the plain
        computation's up to float rounding (sums in another order, a matmul over fewer rows). None when most
        slots are filled (then the plain computation costs no more)."""
        view = param_view(self.slot_head)
        if view.layers != [("0.weight", "0.bias"), None, ("2.weight", "2.bias")]:  # not an mlp([2h, h, 1])
            return None
        x = obs["job_features"]
        b, w, f = x.shape
        flat = x.reshape(b * w, f)
        jm = obs.get("job_mask", obs["action_mask"][:, :-1]).float()  # (B, W)
        with torch.no_grad():
            filled = torch.nonzero((flat != 0).any(-1)).squeeze(1)  # flat (sample, slot) of the filled slots
            r = filled.numel()
            if 2 * r > b * w:
                return None
            sample = torch.div(filled, w, rounding_mode="floor")
            # each slot's row among [filled slots, one empty-slot row per sample] (scores)
            score_row = r + torch.arange(b, device=x.device).repeat_interleave(w)
            score_row[filled] = torch.arange(r, device=x.device)
            jm_filled = jm.reshape(-1).index_select(0, filled)  # (r,)
            # per sample: the mask of its empty slots summed (each embeds to the zero row's embedding)
            filled_sum = torch.zeros(b, dtype=jm.dtype, device=x.device).index_add_(0, sample, jm_filled)
            jm_empty = jm.sum(1) - filled_sum
        h = cluster.shape[-1]
        jobs, uid = distinct_jobs(flat.index_select(0, filled))  # (q, F): the filled rows, or their groups
        q = jobs.shape[0]
        emb = run_mlp(self.encoder.job_in, torch.cat([jobs, flat.new_zeros(1, f)]))  # (q + 1, h)
        emb_filled = emb[:r] if uid is None else emb.index_select(0, uid)  # (r, h)
        total = emb.new_zeros(b, h).index_add(0, sample, emb_filled * jm_filled.unsqueeze(-1))
        summary = (total + jm_empty.unsqueeze(-1) * emb[q]) / jm.sum(1, keepdim=True).clamp(min=1.0)
        p = view.live if torch.is_grad_enabled() else view.frozen
        w1 = p["0.weight"]
        job_part = F.linear(emb, w1[:, :h])  # (q + 1, h)
        ctx_part = F.linear(cluster, w1[:, h:], p["0.bias"])  # (B, h)
        job_filled = job_part[:r] if uid is None else job_part.index_select(0, uid)
        hidden = torch.cat([job_filled + ctx_part.index_select(0, sample), job_part[q:] + ctx_part])
        scores = F.linear(torch.relu(hidden), p["2.weight"], p["2.bias"]).squeeze(-1)  # (r + B,)
        slot_scores = scores.index_select(0, score_row).view(b, w)
        last = run_mlp(self.last_head, torch.cat([cluster, summary], dim=-1))  # (B, 1)
        return torch.cat([slot_scores, last], dim=-1), cluster


def distinct_jobs(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(groups, uid)``: the distinct rows of the job feature rows ``rows`` (R, F) (equal bit for bit,
    :func:`~gpusched_lab.agents.nets.gnn_rows.distinct_bit_rows`) in order of first appearance and each row's
    group; ``(rows, None)`` off the CPU or when grouping leaves more than nine in ten rows."""
    if rows.device.type != "cpu" or rows.shape[0] == 0 or rows.element_size() not in BIT_VIEWS:
        return rows, None
    u, uid, rep = distinct_bit_rows(rows.detach().contiguous().view(BIT_VIEWS[rows.element_size()]).numpy())
    if 10 * u > 9 * rows.shape[0]:
        return rows, None
    return rows.index_select(0, torch.from_numpy(rep[:u])), torch.from_numpy(uid)


def build_network(cfg: NetworkConfig, obs_space, gnn_impl: str = "dense") -> ActionScorer:
    """The scorer for ``cfg``; ``gnn_impl`` picks the GNN's implementation (``"dense"``, the default, ``"scatter"``
    or the reference ``"pyg"``; same parameters and outputs, see :class:`GraphEncoder`). DAGSchedule-v1's config
    (``slots="dag"``) gets the task-DAG + GPU network of :mod:`agents.nets.dag` (same interface)."""
    if cfg.slots == "dag":
        from gpusched_lab.agents.nets.dag import DAGScorer

        return DAGScorer(cfg, obs_space)
    return ActionScorer(cfg, obs_space, gnn_impl)


# the GNN's parameters depend only on these feature widths (last dimension), not on node, edge or window counts
def for_env(cfg: NetworkConfig, env) -> NetworkConfig:
    """``cfg`` (a trained network's config) resized to another env's layout: the GNN's parameters do not depend on
    the cluster's or the window's size, so a GNN checkpoint runs on any preset with the same feature columns."""
    if cfg.encoder != "gnn":
        return cfg
    return config_for_env(env, cfg.encoder, cfg.hidden, cfg.layers, cfg.slots, cfg.hint_logit)
