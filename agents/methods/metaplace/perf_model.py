"""MetaPlace's learned performance (interference) model: a job's iteration time from its placement and the jobs
co-located with it, with an uncertainty estimate, trained online from the iteration times ``WorkerPlacement-v1``
reports through ``env.unwrapped.iteration_times()``.

Target: ``log(iteration time ÷ ideal iteration time)`` (≥ 0: the slowdown from spreading the job and from its
neighbours). Features (:func:`placement_features`): the job's model (one-hot over the catalogue), its GPU count
(log2), servers and racks spanned, whether it crosses racks, the number of jobs on its servers and their models
(counts over the catalogue), the jobs whose rings cross its racks' uplinks, and the cluster's intra-server link
bandwidth (relative). Uncertainty: the spread of a bootstrap ensemble of small MLPs (Lakshminarayanan et al.
2017), each with a fixed random prior network added to its output (Osband et al. 2018), so members agree where
data is and disagree away from it — on placements the model has not seen.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from gpusched_lab.agents.nets.networks import mlp


def feature_size(num_models: int) -> int:
    return 2 * num_models + 7


def placement_features(sim, job: int, gpus: np.ndarray) -> np.ndarray:
    """(F,) features of ``job`` holding ``gpus`` in the simulator's current state (the job itself excluded from the
    neighbours, so a running job and a candidate placement are described alike)."""
    c = sim.cluster
    nm = len(c.catalog.model_names)
    x = np.zeros(feature_size(nm), dtype=np.float32)
    m = int(sim.job_model[job])
    if m >= 0:
        x[m] = 1.0
    gpus = np.asarray(gpus, dtype=np.int64)
    servers = np.unique(c.gpu_server[gpus])
    racks = np.unique(c.server_rack[servers])
    others: set[int] = set()
    for s in servers.tolist():
        others.update(sim.server_jobs[s])
    others.discard(job)
    if others:
        models = sim.job_model[np.fromiter(others, dtype=np.int64, count=len(others))]
        x[nm : 2 * nm] = np.bincount(models[models >= 0], minlength=nm)[:nm]
    crossing = float(sim.rack_crossing[racks].sum()) if len(racks) > 1 else 0.0
    x[2 * nm :] = (
        np.log2(len(gpus)),
        len(servers),
        len(racks),
        float(len(racks) > 1),
        len(others),
        crossing,
        np.log1p(len(gpus) / max(1, len(servers))),
    )
    return x


class _Member(nn.Module):
    def __init__(self, dim: int, hidden: int, prior_scale: float):
        super().__init__()
        self.net = mlp([dim, hidden, hidden, 1])
        self.prior = mlp([dim, hidden, 1])
        for p in self.prior.parameters():
            p.requires_grad_(False)
        self.prior_scale = prior_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.net(x) + self.prior_scale * self.prior(x)).squeeze(-1)


class PerformanceModel:
    """Bootstrap ensemble predicting ``log(iteration time ÷ ideal)``; ``predict`` → (mean, std) per row.

    ``observe(env, info)`` adds the samples of one step's iteration times (features read from the env's
    simulator at that moment); ``fit()`` trains every member on its own bootstrap resample of the buffer (the
    newest ``capacity`` samples), warm-starting from its current weights, so refits during adaptation are cheap.
    """

    def __init__(
        self,
        num_models: int,
        members: int = 5,
        hidden: int = 32,
        prior_scale: float = 1.0,
        lr: float = 3e-3,
        capacity: int = 4096,
        seed: int = 0,
    ):
        gen = torch.Generator().manual_seed(seed)
        self.dim = feature_size(num_models)
        state = torch.random.get_rng_state()
        torch.manual_seed(int(torch.randint(2**31, (1,), generator=gen)))
        self.members = nn.ModuleList(_Member(self.dim, hidden, prior_scale) for _ in range(members))
        torch.random.set_rng_state(state)
        self.opt = torch.optim.Adam([p for p in self.members.parameters() if p.requires_grad], lr=lr)
        self.rng = np.random.default_rng(seed)
        self.capacity = int(capacity)
        self.x: list[np.ndarray] = []
        self.y: list[float] = []
        self.seen = 0  # samples ever added
        self.trained = False  # fitted on data (or loaded): its predictions mean something

    def __len__(self) -> int:
        return len(self.y)

    def add(self, x: np.ndarray, y: float) -> None:
        self.x.append(np.asarray(x, dtype=np.float32))
        self.y.append(float(y))
        self.seen += 1
        if len(self.y) > self.capacity:
            del self.x[0], self.y[0]

    def observe(self, env, info: dict | None = None) -> int:
        """Add the iteration times the env reports since the last call (``env.unwrapped.iteration_times()`` of
        ``WorkerPlacement-v1``; ``info["iteration_times"]`` where an info carries them); returns how many were
        added. Call it after ``reset`` and after each ``step``."""
        rep = info.get("iteration_times") if isinstance(info, dict) else None
        if rep is None:
            getter = getattr(env.unwrapped, "iteration_times", None)
            if getter is None:
                return 0
            rep = getter()
        sim = env.unwrapped.sim
        jobs, secs, ideal = rep
        added = 0
        for j, t, t0 in zip(jobs.tolist(), secs.tolist(), ideal.tolist(), strict=True):
            if sim.job_gpus[j] is None:  # finished within the step: its neighbours are gone, no features
                continue
            self.add(placement_features(sim, j, sim.job_gpus[j]), np.log(max(t / t0, 1e-6)))
            added += 1
        return added

    def anchor(self) -> list[torch.Tensor]:
        """A copy of the trainable weights: the prior's centre for :meth:`fit` (the meta-trained model)."""
        return [p.detach().clone() for p in self.members.parameters() if p.requires_grad]

    def fit(
        self,
        steps: int = 200,
        batch: int = 64,
        anchor: list[torch.Tensor] | None = None,
        prior: float = 0.0,
    ) -> float:
        """Train each member on its bootstrap resample; returns the last mean squared error.

        ``anchor`` (from :meth:`anchor`) and ``prior`` > 0 make the fit a MAP estimate under a Gaussian prior
        centred on the anchor weights: the loss is the mean squared error plus ``prior / n · Σ (θ − θ₀)²`` per
        member (``n`` the samples in the buffer). The prior counts like ``prior``-weighted pseudo-observations,
        so with a few samples of a new task the model stays near what meta-training learned, and the task's own
        data takes over as its samples grow."""
        n = len(self.y)
        if n == 0:
            return float("nan")
        self.trained = True
        params = [p for p in self.members.parameters() if p.requires_grad]
        if anchor is not None and len(anchor) != len(params):
            raise ValueError(f"anchor: expected {len(params)} tensors (from anchor()), got {len(anchor)}")
        coef = float(prior) / n if anchor is not None and prior > 0 else 0.0
        x = torch.as_tensor(np.stack(self.x))
        y = torch.as_tensor(np.asarray(self.y, dtype=np.float32))
        k = len(self.members)
        boot = torch.as_tensor(self.rng.integers(0, n, size=(k, n)))
        loss = torch.zeros(())
        for _ in range(int(steps)):
            pick = torch.as_tensor(self.rng.integers(0, n, size=(k, min(batch, n))))
            idx = torch.gather(boot, 1, pick)
            pred = torch.stack([m(x[i]) for m, i in zip(self.members, idx, strict=True)])
            loss = ((pred - y[idx]) ** 2).mean()
            total = loss
            if coef > 0:  # Σ over each member's weights, averaged over members like the squared error
                total = loss + coef / len(self.members) * sum(
                    ((p - a) ** 2).sum() for p, a in zip(params, anchor, strict=True)
                )
            self.opt.zero_grad()
            total.backward()
            self.opt.step()
        return float(loss.detach())

    @torch.no_grad()
    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std) of the ensemble's predicted log slowdown for each row of ``x (N, F)``."""
        t = torch.as_tensor(np.atleast_2d(np.asarray(x, dtype=np.float32)))
        p = torch.stack([m(t) for m in self.members])  # (K, N)
        return p.mean(0).numpy(), p.std(0).numpy()

    def candidate_uncertainty(self, env) -> np.ndarray:
        """(A,) ensemble std of the head job's predicted slowdown for each valid server action (0 elsewhere, and
        for the defer action)."""
        u = env.unwrapped
        mask = u.encoder.action_mask
        out = np.zeros(len(mask), dtype=np.float32)
        head = u.head_job
        if head < 0:
            return out
        servers = np.flatnonzero(mask[: u.defer_action])
        if not len(servers):
            return out
        feats = np.stack([placement_features(u.sim, head, u.candidate_gpus(s)) for s in servers.tolist()])
        out[servers] = self.predict(feats)[1]
        return out

    def since(self, start: int) -> PerformanceModel:
        """Keep only the samples added after the first ``start`` (the weights stay): a task's own data."""
        self.x, self.y = self.x[start:], self.y[start:]
        return self

    def absorb(self, other: PerformanceModel) -> None:
        """Add the samples ``other`` (a copy of this model) gathered since it was copied."""
        n = min(other.seen - self.seen, len(other))
        for x, y in zip(other.x[len(other) - n :], other.y[len(other) - n :], strict=True):
            self.add(x, y)

    def candidate_slowdown(self, env) -> tuple[np.ndarray, np.ndarray]:
        """(A,) predicted marginal log slowdown of each valid server action, and the ensemble spread of the head
        job's prediction there (0 elsewhere, and for the defer action).

        The marginal slowdown of putting the head job's next worker on server ``s`` is the head job's predicted
        log slowdown with that placement plus, for every running job on ``s`` that the placement does not already
        share a server with, the rise of its predicted log slowdown when the head job becomes its neighbour:
        the model's estimate of the interference and spreading cost the choice adds, the quantity MetaPlace's
        policy weighs (:class:`agents.methods.metaplace.agent.PlacementPolicy`)."""
        u = env.unwrapped
        mask = u.encoder.action_mask
        delta = np.zeros(len(mask), dtype=np.float32)
        spread = np.zeros(len(mask), dtype=np.float32)
        head = u.head_job
        if head < 0:
            return delta, spread
        servers = np.flatnonzero(mask[: u.defer_action])
        if not len(servers):
            return delta, spread
        sim, c = u.sim, u.cluster
        nm = len(c.catalog.model_names)
        mh = int(sim.job_model[head])
        rows: list[np.ndarray] = []
        owner: list[tuple[int, float]] = []  # (index into servers, sign) per row
        cache: dict[int, np.ndarray] = {}
        for i, s in enumerate(servers.tolist()):
            cand = u.candidate_gpus(s)
            rows.append(placement_features(sim, head, cand))
            owner.append((i, 1.0))
            shared = set(np.unique(c.gpu_server[cand[:-1]]).tolist())
            if s in shared:
                continue  # the head job already neighbours every job on s
            for n in sim.server_jobs[s]:
                n = int(n)
                if n == head or sim.job_gpus[n] is None:
                    continue
                if shared and shared & set(np.unique(c.gpu_server[sim.job_gpus[n]]).tolist()):
                    continue
                if n not in cache:
                    cache[n] = placement_features(sim, n, sim.job_gpus[n])
                x = cache[n]
                x2 = x.copy()
                if mh >= 0:
                    x2[nm + mh] += 1.0
                x2[2 * nm + 4] += 1.0
                rows += [x2, x]
                owner += [(i, 1.0), (i, -1.0)]
        mean, std = self.predict(np.stack(rows))
        idx = np.array([o[0] for o in owner])
        sign = np.array([o[1] for o in owner], dtype=np.float32)
        delta[servers] = np.bincount(idx, weights=sign * mean, minlength=len(servers)).astype(np.float32)
        head_rows = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]] & (sign > 0))
        spread[servers] = std[head_rows]
        return delta, spread

    def state_dict(self) -> dict:
        return {k: v for k, v in self.members.state_dict().items()}

    def load_state_dict(self, state: dict) -> None:
        self.members.load_state_dict(state)
        self.trained = True
