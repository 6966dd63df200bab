"""Graph network for ``gpusched/DAGSchedule-v1`` (``obs_mode="graph"``): message passing over the task DAG and the
GPUs, one score per GPU. The weights do not depend on the DAG's size or the GPU count, so one network trained on
20-task DAGs schedules 1,000-task DAGs (only the env's padding changes).

The observation's graph (see :class:`gpusched_envs.envs.dag_schedule.DAGScheduleEnv`) has task nodes and GPU
nodes; its edges are the DAG's dependencies (``edge_features``: dependency flag, -, log bytes) and one task → GPU
edge per placed task. Each layer passes messages along every edge in both directions (a direction flag joins the
edge features), so a task hears its parents, children and GPU, and a GPU hears the tasks on it:

    h_v ← LayerNorm(h_v + MLP([h_v, mean_{u→v} MLP([h_u, e_uv, dir])]))

Readout: the current task's embedding (the task node flagged ``current``), the masked mean of the task nodes and the
context form the state embedding; GPU ``g`` scores ``MLP([h_g, h_current, state]) − w · gap_g`` where ``gap_g`` is
the observed (finish time of the current task on ``g`` − makespan) ÷ time scale and ``w`` a learned weight (1 at
start): the untrained network is earliest-finish-time list scheduling, and learning corrects it. Masking is the caller's
(:func:`agents.nets.networks.masked`), as for the cluster networks.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from gpusched_lab.agents.nets.common import NetworkConfig, mlp
from torch_geometric.nn import MessagePassing

from gpusched_envs.envs.dag_schedule import GPU_FEATURES, TASK_FEATURES
from gpusched_envs.graph import to_pyg

# node feature layout of DAGScheduleEnv: [is_task, is_gpu, task features, GPU features]
CURRENT_COLUMN = 2 + TASK_FEATURES.index("current")
FINISH_GAP_COLUMN = 2 + len(TASK_FEATURES) + GPU_FEATURES.index("makespan_if_here")


class DAGConv(MessagePassing):
    """One message-passing layer over the (bidirected) task/GPU graph, with edge features."""

    def __init__(self, hidden: int, edge_dim: int):
        super().__init__(aggr="mean")
        self.message_mlp = mlp([hidden + edge_dim, hidden, hidden], last_activation=True)
        self.update_mlp = mlp([2 * hidden, hidden, hidden])
        self.norm = nn.LayerNorm(hidden)

    def forward(self, h: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        agg = self.propagate(edge_index, h=h, edge_attr=edge_attr)
        return self.norm(h + self.update_mlp(torch.cat([h, agg], dim=-1)))

    def message(self, h_j: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        return self.message_mlp(torch.cat([h_j, edge_attr], dim=-1))


class DAGScorer(nn.Module):
    """Observations of ``DAGSchedule-v1`` → ``(B, GPUs)`` scores; same interface as
    :class:`agents.nets.networks.ActionScorer` (``forward``, ``scores_and_embedding``, ``embed``)."""

    def __init__(self, cfg: NetworkConfig, obs_space):
        super().__init__()
        self.cfg = cfg
        sh = {k: tuple(s.shape) for k, s in obs_space.spaces.items()}
        missing = [k for k in ("node_features", "edge_features", "edge_index") if k not in sh]
        if missing:
            raise ValueError(
                f"the DAG network needs obs_mode='graph' observations (missing {', '.join(missing)})"
            )
        h = cfg.hidden
        node_dim, edge_dim, ctx = sh["node_features"][1], sh["edge_features"][1] + 2, sh["context"][0]
        self.node_in = mlp([node_dim, h, h], last_activation=True)
        self.convs = nn.ModuleList(DAGConv(h, edge_dim) for _ in range(max(1, cfg.layers) * 2))
        self.state_out = mlp([2 * h + ctx, h, h], last_activation=True)
        self.gpu_head = mlp([3 * h, h, 1])
        # prior: − w · (finish there − makespan) / time_scale, the immediate cost of a placement (w starts at 1),
        # so an untrained network already acts as earliest-finish-time list scheduling and learning corrects it
        self.prior_weight = nn.Parameter(torch.ones(()))
        with torch.no_grad():  # the correction starts at 0: exactly the prior's choices
            self.gpu_head[-1].weight.zero_()
            self.gpu_head[-1].bias.zero_()
        self.out_dim = h

    def _encode(self, obs: dict[str, torch.Tensor]):
        nf = obs["node_features"]
        b, n, _ = nf.shape
        g = obs["action_mask"].shape[-1]
        graph = to_pyg(obs, keep_padding=True)  # node i of sample s is row s·n + i
        ei, ea = graph.edge_index, graph.edge_attr
        fwd = torch.zeros(ea.shape[0], 2, dtype=ea.dtype, device=ea.device)
        fwd[:, 0] = 1.0
        rev = fwd.flip(-1)
        edge_index = torch.cat([ei, ei.flip(0)], dim=1)
        edge_attr = torch.cat([torch.cat([ea, fwd], -1), torch.cat([ea, rev], -1)], dim=0)
        h = self.node_in(graph.x)
        for conv in self.convs:
            h = conv(h, edge_index, edge_attr)
        h = h.view(b, n, -1)
        tasks = n - g
        task_mask = (nf[:, :tasks, 0] > 0.5).float().unsqueeze(-1)  # is_task flag (padding: 0)
        task_mean = (h[:, :tasks] * task_mask).sum(1) / task_mask.sum(1).clamp(min=1.0)
        current = nf[:, :tasks, CURRENT_COLUMN].unsqueeze(-1)  # one-hot (all 0 once the episode is over)
        h_cur = (h[:, :tasks] * current).sum(1)
        state = self.state_out(torch.cat([h_cur, task_mean, obs["context"]], dim=-1))
        return state, h_cur, h[:, tasks:]

    def scores_and_embedding(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        state, h_cur, gpus = self._encode(obs)
        g = gpus.shape[1]
        z = torch.cat([gpus, h_cur.unsqueeze(1).expand(-1, g, -1), state.unsqueeze(1).expand(-1, g, -1)], -1)
        prior = obs["node_features"][:, -g:, FINISH_GAP_COLUMN]
        return self.gpu_head(z).squeeze(-1) - self.prior_weight * prior, state

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.scores_and_embedding(obs)[0]

    def embed(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self._encode(obs)[0]
