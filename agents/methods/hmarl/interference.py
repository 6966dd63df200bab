"""HMARL's interference model: a small regressor that predicts how much a job's iterations slow down because of the
jobs placed around it, trained on simulator samples (Zhao & Wu, TNSM 2022, use such a model to score candidate
placements; here it gives one extra candidate feature to the HMARL actor).

What "around it" means in the simulator (``gpusched_envs/sim``): jobs on the same servers (pairwise co-location
factors of the catalogue) and jobs whose all-reduce ring crosses the same rack uplinks (shared uplink bandwidth);
fractional GPU sharing is left out (the multi-agent envs place whole GPUs). The target is
``log(iteration time with the neighbours ÷ iteration time alone on the same GPUs)``.

Features of a (job, placement) pair (:func:`placement_features`, all O(1) aggregates so a candidate is scored in
microseconds): the job's log GPU count, log compute time, log gradient bytes, overlap γ, whether it crosses racks,
servers and racks spanned; the co-located jobs' count, GPUs and largest log gradient bytes on its servers; the
other jobs on its most crowded crossed uplink and their summed gradient bytes.

Samples (:func:`collect_samples`): episodes of ``multi_scheduler_v1`` driven by random valid candidate choices (so
spread and cross-rack placements occur), one sample per running job at each decision; train and held-out samples
come from disjoint episode seeds. ``python -m gpusched_lab.agents.methods.hmarl.interference`` fits the model, prints the held-out error beside
the "no slowdown" predictor and writes ``model.pt`` + ``meta.json``.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from gpusched_envs.io import atomic_write_bytes, atomic_write_text
from gpusched_envs.sim import throughput as tp

FEATURES = (
    "log_gpus",
    "log_compute",
    "log_gradient_bytes",
    "overlap_gamma",
    "crosses_racks",
    "servers",
    "racks",
    "server_neighbours",
    "log1p_server_neighbour_gpus",
    "max_server_neighbour_log_gradient",
    "uplink_neighbours",
    "log1p_uplink_neighbour_gradient_gb",
)


def placement_features(
    sim, job: int, gpus: np.ndarray, shape=None, out: np.ndarray | None = None
) -> np.ndarray:
    """(F,) features of ``job`` on ``gpus`` with the other jobs running now (``job`` itself excluded)."""
    c = sim.cluster
    cat = c.catalog
    m = int(sim.job_model[job])
    if shape is None:
        shape = tp.placement_shape(c, m, gpus)
    out = np.zeros(len(FEATURES), dtype=np.float32) if out is None else out
    out[0] = np.log(shape.num_gpus)
    out[1] = np.log(shape.compute)
    out[2] = np.log(cat.gradient_bytes[m])
    out[3] = cat.overlap_gamma[m]
    out[4] = float(shape.crosses_racks)
    out[5] = len(shape.servers)
    out[6] = len(shape.racks)
    neighbours = set()
    for s in shape.servers:
        neighbours.update(sim.server_jobs[s])
    neighbours.discard(job)
    out[7] = len(neighbours)
    if neighbours:
        nb = np.fromiter(neighbours, dtype=np.int64)
        out[8] = np.log1p(sim.job_gpus_n[nb].sum())
        out[9] = np.log(cat.gradient_bytes[sim.job_model[nb]].max())
    else:
        out[8] = out[9] = 0.0
    out[10] = out[11] = 0.0
    if shape.crosses_racks and shape.num_gpus > 1:
        best, grad = 0, 0.0
        for r in shape.racks:
            others = [o for o in sim.rack_crossers[int(r)] if o != job]
            if len(others) > best:
                best = len(others)
                grad = float(cat.gradient_bytes[sim.job_model[others]].sum())
        out[10] = best
        out[11] = np.log1p(grad / 1e9)
    return out


def observed_log_slowdown(sim, job: int) -> float:
    """log(actual iteration time ÷ iteration time alone on the same GPUs) of a running job (whole GPUs)."""
    m = int(sim.job_model[job])
    shape = sim._shape[job]  # the engine's cached placement shape (read-only use)
    alone = tp.iteration_time_of_shape(sim.cluster, m, shape, None, 1.0, 1.0).total
    return float(np.log(max((1.0 / sim.rate[job]) / alone, 1e-9)))


def collect_samples(env_kwargs: dict, seeds, max_per_episode: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, F), y (n,)) from episodes of ``multi_scheduler_v1(**env_kwargs)`` under random valid actions."""
    from gpusched_envs.multi_agent import multi_scheduler_v1

    xs, ys = [], []
    for seed in seeds:
        env = multi_scheduler_v1.parallel_env(**env_kwargs)
        rng = np.random.default_rng(int(seed) + 7919)
        obs, _ = env.reset(seed=int(seed))
        n = 0
        while env.agents and n < max_per_episode:
            actions = {a: int(rng.choice(np.flatnonzero(o["action_mask"]))) for a, o in obs.items()}
            obs, *_ = env.step(actions)
            sim = env.sim
            for j in list(sim.running):
                if sim.rate[j] <= 0 or sim.job_gpus[j] is None:
                    continue
                xs.append(placement_features(sim, j, sim.job_gpus[j], sim._shape[j]))
                ys.append(observed_log_slowdown(sim, j))
                n += 1
    if not xs:
        return np.zeros((0, len(FEATURES)), np.float32), np.zeros(0, np.float32)
    return np.stack(xs).astype(np.float32), np.asarray(ys, dtype=np.float32)


def read_meta(path: str | Path, algorithms: tuple[str, ...]) -> tuple[Path, dict]:
    """(folder, ``meta.json``) of an HMARL-side checkpoint whose ``algorithm`` is one of ``algorithms``; any problem
    is one :class:`~agents.checkpoint.CheckpointError` line naming the file."""
    from gpusched_lab.agents.checkpoint import CheckpointError

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    folder = path if path.is_dir() else path.parent
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path}: no checkpoint metadata (expected model.pt + meta.json)")
    try:
        meta = json.loads(meta_path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{meta_path}: not a valid JSON checkpoint description ({exc})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{meta_path}: expected a JSON object, got {type(meta).__name__}")
    if meta.get("algorithm") not in algorithms:
        raise CheckpointError(
            f"{meta_path}: field 'algorithm' is {meta.get('algorithm')!r}; expected one of {', '.join(algorithms)}"
        )
    if not isinstance(meta.get("model_sha256", ""), str):
        raise CheckpointError(f"{meta_path}: field 'model_sha256' must be a string")
    return folder, meta


def read_state(folder: Path, meta: dict) -> dict:
    """``model.pt`` checked against the metadata's sha256 and loaded with ``torch.load(weights_only=True)``."""
    from gpusched_lab.agents.checkpoint import load_state, read_model_bytes

    return load_state(folder, read_model_bytes(folder, meta))


@dataclass
class InterferenceArgs:
    hidden: int = 32
    epochs: int = 300
    learning_rate: float = 3e-3
    weight_decay: float = 1e-5
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


class InterferenceModel:
    """``predict(X) -> log slowdown`` (an MLP on standardised features, clipped at 0: neighbours never speed a job
    up); :meth:`candidate_scores` scores every candidate of every agent of a ``multi_scheduler_v1`` env."""

    def __init__(self, net, mean: np.ndarray, std: np.ndarray, meta: dict | None = None):
        self.net = net.eval()
        self.mean, self.std = mean.astype(np.float32), std.astype(np.float32)
        self.meta = meta or {}

    @staticmethod
    def build(hidden: int):
        import torch.nn as nn

        return nn.Sequential(
            nn.Linear(len(FEATURES), hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 1),
        )

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, args: InterferenceArgs | None = None) -> InterferenceModel:
        import torch

        args = args or InterferenceArgs()
        torch.manual_seed(args.seed)
        mean, std = X.mean(0), X.std(0) + 1e-6
        net = cls.build(args.hidden)
        xt = torch.as_tensor((X - mean) / std, dtype=torch.float32)
        yt = torch.as_tensor(y, dtype=torch.float32).unsqueeze(-1)
        opt = torch.optim.Adam(net.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
        gen = torch.Generator().manual_seed(args.seed)
        batch = 512
        for _ in range(args.epochs):
            perm = torch.randperm(len(xt), generator=gen)
            for i in range(0, len(xt), batch):
                idx = perm[i : i + batch]
                loss = torch.nn.functional.mse_loss(net(xt[idx]), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        return cls(net, mean, std, {"args": args.to_dict(), "train_samples": int(len(X))})

    def predict(self, X: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            xt = torch.as_tensor((np.asarray(X, np.float32) - self.mean) / self.std)
            return np.maximum(self.net(xt).squeeze(-1).numpy(), 0.0)

    def candidate_scores(self, env, agents: list[str] | None = None) -> np.ndarray:
        """(K, H·C) predicted log slowdown of the job of each agent's action (of ``agents``, default all) on its
        placement (0 where invalid)."""
        return self.candidate_scores_many([env], [agents])[0]

    def candidate_scores_many(self, envs: list, agents: list[list[str] | None]) -> list[np.ndarray]:
        """:meth:`candidate_scores` of each env (with its agents), the candidates of all of them scored in one
        forward of the regressor."""
        outs, rows, where = [], [], []
        for e, (env, names) in enumerate(zip(envs, agents, strict=True)):
            names = list(env.possible_agents) if names is None else names
            outs.append(np.zeros((len(names), env.num_choices), dtype=np.float32))
            for i, agent in enumerate(names):
                heads = env.head_jobs(agent)
                for ci, gpus in enumerate(env.candidate_placements(agent)):
                    if gpus is not None:
                        rows.append(placement_features(env.sim, int(heads[ci // env.num_candidates]), gpus))
                        where.append((e, i, ci))
        if rows:
            pred = self.predict(np.stack(rows))
            for (e, i, ci), p in zip(where, pred, strict=True):
                outs[e][i, ci] = p
        return outs

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path, evaluation: dict | None = None) -> Path:
        import torch

        path = Path(path)
        buf = io.BytesIO()
        state = {k: v.detach().cpu() for k, v in self.net.state_dict().items()}
        state["feature_mean"] = torch.as_tensor(self.mean)
        state["feature_std"] = torch.as_tensor(self.std)
        torch.save(state, buf)
        data = buf.getvalue()
        atomic_write_bytes(path / "model.pt", data)
        meta = {
            "format": 1,
            "algorithm": "interference-mlp",
            "features": list(FEATURES),
            "target": "log(iteration time with neighbours / alone on the same GPUs)",
            "hidden": int(self.net[0].out_features),
            "evaluation": evaluation,
            "model_sha256": hashlib.sha256(data).hexdigest(),
            **{k: v for k, v in self.meta.items() if k not in ("evaluation",)},
        }
        atomic_write_text(path / "meta.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> InterferenceModel:
        folder, meta = read_meta(path, ("interference-mlp",))
        if meta.get("features") != list(FEATURES) or not isinstance(meta.get("hidden"), int):
            raise ValueError(
                f"{folder / 'meta.json'}: not an interference model of this version (features differ)"
            )
        state = read_state(folder, meta)
        if "feature_mean" not in state or "feature_std" not in state:
            raise ValueError(f"{folder / 'model.pt'}: no feature_mean / feature_std tensors")
        mean, std = state.pop("feature_mean").numpy(), state.pop("feature_std").numpy()
        net = cls.build(meta["hidden"])
        net.load_state_dict(state)
        return cls(net, mean, std, meta)


def evaluate_model(model: InterferenceModel, X: np.ndarray, y: np.ndarray) -> dict:
    """Held-out error in slowdown units (exp of the log target) beside the "no slowdown" predictor."""
    pred = model.predict(X)
    true_s, pred_s = np.exp(y), np.exp(pred)
    slowed = y > 0.01  # more than 1% slower (the catalogue's default server factor is 1.002)
    return {
        "samples": int(len(y)),
        "share_slowed": float(slowed.mean()) if len(y) else float("nan"),
        "mae_slowdown": float(np.abs(pred_s - true_s).mean()),
        "mae_slowdown_no_model": float(np.abs(1.0 - true_s).mean()),
        "mae_slowdown_slowed_only": float(np.abs(pred_s - true_s)[slowed].mean()) if slowed.any() else 0.0,
        "mae_slowdown_slowed_only_no_model": float(np.abs(1.0 - true_s)[slowed].mean())
        if slowed.any()
        else 0.0,
        "mean_slowdown": float(true_s.mean()),
    }


DEFAULT_ENV = dict(
    num_agents=4,
    cluster="datacenter:racks=4,servers=2,gpus=4",
    workload="philly-windows:first=20,last=80,jobs=120,load=1.0",
    heads=3,
)
HELDOUT_WORKLOAD = "philly-windows:first=85,last=105,jobs=120,load=1.0"


def main(argv: list[str] | None = None) -> None:
    """``python -m gpusched_lab.agents.methods.hmarl.interference --out checkpoints/hmarl_interference [--train-seeds 30]``"""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--train-seeds", type=int, default=30)
    p.add_argument("--test-seeds", type=int, default=10)
    p.add_argument("--env-kwargs", default=json.dumps(DEFAULT_ENV), help="multi_scheduler_v1 kwargs (JSON)")
    p.add_argument("--heldout-workload", default=HELDOUT_WORKLOAD, help="workload of the held-out episodes")
    a = p.parse_args(argv)
    env_kwargs = json.loads(a.env_kwargs)
    X, y = collect_samples(env_kwargs, range(a.train_seeds))
    heldout_kwargs = {**env_kwargs, "workload": a.heldout_workload}
    Xt, yt = collect_samples(heldout_kwargs, range(100_000, 100_000 + a.test_seeds))
    model = InterferenceModel.fit(X, y)
    ev = evaluate_model(model, Xt, yt)
    ev.update(
        env_kwargs=env_kwargs,
        heldout_workload=a.heldout_workload,
        train_seeds=[0, a.train_seeds - 1],
        heldout_seeds=[100_000, 100_000 + a.test_seeds - 1],
        command=f"python -m gpusched_lab.agents.methods.hmarl.interference --out {a.out} --train-seeds {a.train_seeds} "
        f"--test-seeds {a.test_seeds}",
    )
    model.save(a.out, ev)
    print(json.dumps(ev, indent=2))


if __name__ == "__main__":
    main()
