"""Plans on demand from a policy trained on ``gpusched/DAGSchedule-v1`` (construct mode, graph observations): the
DDQN plan generator of WORL-RTGS and the PPO-GNN list scheduler baseline.

:class:`PolicyPlanner` loads a checkpoint (``model.pt`` + ``meta.json`` of :mod:`agents.checkpoint`) and, for any DAG
and GPU set, rolls ``count`` construct episodes in lock-step with one batched forward pass per step: the first
plan is the greedy one (masked argmax), the others sample actions from ``softmax(scores / temperature)`` (scores
standardised per state), which gives WORL-RTGS a diverse set of good plans to inject. The DAG network's weights do
not depend on the DAG's size, so the envs are built with padding that fits the DAG at hand; a DDQN checkpoint also
works for any GPU count, a PPO one only for the GPU count it was trained on (its action head is sized by it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gpusched_lab.agents.checkpoint import (
    NetworkConfig,
    load_state,
    policy_module,
    read_meta,
    read_model_bytes,
)
from gpusched_lab.agents.common import SHIPPED_CHECKPOINTS
from gpusched_lab.agents.nets.networks import masked, obs_to_tensors

ENV_ID = "gpusched/DAGSchedule-v1"
SHIPPED = SHIPPED_CHECKPOINTS


class PolicyPlanner:
    """A trained DAGSchedule-v1 policy producing ``(assignment, priority)`` plans."""

    def __init__(self, path: str | Path, device: str = "cpu"):
        folder = Path(path)
        self.meta = read_meta(folder)
        if self.meta.get("env_id") != ENV_ID or self.meta.get("obs_mode") != "graph":
            raise ValueError(
                f"checkpoint {folder} was trained on {self.meta.get('env_id')} (obs_mode="
                f"{self.meta.get('obs_mode')!r}); a DAG planner needs {ENV_ID} with obs_mode='graph'"
            )
        self.folder = folder if folder.is_dir() else folder.parent
        self.state = load_state(self.folder, read_model_bytes(self.folder, self.meta))  # weights_only=True
        self.cfg = NetworkConfig(**self.meta["network"])
        self.device = torch.device(device)
        self._modules: dict[tuple, torch.nn.Module] = {}

    def _module(self, env) -> torch.nn.Module:
        key = tuple((k, tuple(s.shape)) for k, s in env.observation_space.spaces.items())
        mod = self._modules.get(key)
        if mod is None:
            g = int(env.observation_space["action_mask"].shape[0])
            if self.meta["policy"] != "q" and g != self.cfg.num_actions:
                raise ValueError(
                    f"checkpoint {self.folder} ({self.meta['algorithm']}) schedules on {self.cfg.num_actions} GPUs; "
                    f"this GPU set has {g}"
                )
            cfg = NetworkConfig(**{**self.cfg.to_dict(), "num_actions": g, "num_gpus": g})
            mod = policy_module(self.meta["policy"], cfg, env.observation_space)
            mod.load_state_dict(self.state)
            mod.eval().to(self.device)
            self._modules[key] = mod
        return mod

    def make_env(self, dag, *, cluster="hetero64", gpus: int | None = 8):
        from gpusched_envs.envs.dag_schedule import DAGScheduleEnv

        n, e = dag.num_tasks, dag.num_edges
        return DAGScheduleEnv(
            cluster, dag, gpus=gpus, mode="construct", obs_mode="graph", max_tasks=n, max_edges=e
        )

    @torch.no_grad()
    def plans(
        self,
        dag,
        *,
        cluster="hetero64",
        gpus: int | None = 8,
        count: int = 1,
        temperature: float = 0.5,
        seed: int = 0,
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """``count`` plans for ``dag`` on the GPU set (``cluster``, ``gpus``): the greedy one first, then samples."""
        envs = [self.make_env(dag, cluster=cluster, gpus=gpus) for _ in range(count)]
        module = self._module(envs[0])
        rng = np.random.default_rng(seed)
        obs = [env.reset(seed=seed)[0] for env in envs]
        done = [False] * count
        while not all(done):
            live = [i for i in range(count) if not done[i]]
            batch = obs_to_tensors(
                {k: np.stack([obs[i][k] for i in live]) for k in obs[0]}, self.device, True
            )
            scores = masked(module(batch), batch["action_mask"]).cpu().numpy()
            for row, i in enumerate(live):
                s = scores[row]
                ok = np.isfinite(s)
                if i == 0 or temperature <= 0:
                    a = int(np.argmax(s))
                else:
                    z = (s[ok] - s[ok].mean()) / (s[ok].std() + 1e-8) / temperature
                    p = np.exp(z - z.max())
                    a = int(np.flatnonzero(ok)[rng.choice(ok.sum(), p=p / p.sum())])
                obs[i], _, terminated, truncated, _ = envs[i].step(a)
                done[i] = terminated or truncated
        return [env.plan() for env in envs]


def shipped_planner(name: str = "ddqn_dagschedule_gnn") -> PolicyPlanner:
    """The planner shipped in ``checkpoints/<name>`` (DDQN plan generator, or ``ppo_dagschedule_gnn``)."""
    path = SHIPPED / name
    if not (path / "meta.json").exists():
        raise FileNotFoundError(
            f"{path}: no shipped checkpoint (train one with scripts/data/train_dag_planner.py)"
        )
    return PolicyPlanner(path)
