"""TopDRL's multi-branch CNN over ``image`` observations (:class:`MultiBranchCNN`)."""

from __future__ import annotations

import torch
import torch.nn as nn
from gpusched_lab.agents.nets.common import NetworkConfig, mlp


class MultiBranchCNN(nn.Module):
    """TopDRL's multi-branch CNN over ``cluster_image (C, servers, GPUs per server)`` and the queue.

    Branches: (1) a per-machine convolution (kernel spanning one server's GPU slots) giving one embedding per
    server row; (2) a whole-cluster convolution (3×3 over the server × slot grid, capturing neighbouring machines
    of a rack); (3) a per-job 1-D convolution over the queue window (kernel 1, i.e. shared weights per job);
    (4) the flat cluster features ⊕ context. Branches (1) pooled, (2), (4) form the cluster embedding.
    """

    def __init__(self, cfg: NetworkConfig, channels: int, job_dim: int, cluster_dim: int, context_dim: int):
        super().__init__()
        h = cfg.hidden
        self.cfg = cfg
        m = cfg.max_server_gpus
        self.machine = nn.Sequential(nn.Conv2d(channels, h, kernel_size=(1, m)), nn.ReLU())  # (B, h, S, 1)
        self.grid = nn.Sequential(
            nn.Conv2d(channels, h // 2, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.Conv2d(h // 2, h // 2, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.AdaptiveMaxPool2d(1),
        )
        self.queue = nn.Sequential(nn.Conv1d(job_dim, h, 1), nn.ReLU(), nn.Conv1d(h, h, 1), nn.ReLU())
        self.flat = mlp([cluster_dim + context_dim, h, h], last_activation=True)
        self.cluster_out = mlp([h + h // 2 + h + h, h, h], last_activation=True)
        self.out_dim = h

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        img = obs["cluster_image"]
        servers = self.machine(img).squeeze(-1).transpose(1, 2)  # (B, S, h)
        grid = self.grid(img).flatten(1)  # (B, h/2)
        jobs = self.queue(obs["queue"].transpose(1, 2)).transpose(1, 2)  # (B, W, h)
        jm = obs["job_mask"].float().unsqueeze(-1)
        job_mean = (jobs * jm).sum(1) / jm.sum(1).clamp(min=1.0)
        flat = self.flat(torch.cat([obs["cluster_features"], obs["context"]], dim=-1))
        cluster = self.cluster_out(torch.cat([servers.max(dim=1).values, grid, job_mean, flat], dim=-1))
        return cluster, jobs, servers
