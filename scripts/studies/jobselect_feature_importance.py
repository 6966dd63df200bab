"""Which observation features does a trained JobSelect checkpoint rely on? Permutation importance on held-in windows.

A trained checkpoint runs on held-in Philly windows (submitted before 2017-11-01; the training config's checkpoint
selection windows by default) once as it is and once per feature group with that group's information destroyed, on
the same (window, seed) pairs:

- a **job** group (columns of ``job_features``): at every step its columns are shuffled among the valid job rows
  (the rows keep their marginal distribution but no longer belong to their jobs);
- a **context** group (entries of ``context``): replaced by their mean over the unperturbed episode of the same
  (window, seed), so the policy sees a typical value but no change over time.

- the **jitter** control: every job feature and context entry is multiplied by ``1 + 0.001·N(0, 1)`` at every step
  (no information is lost). Its change is what any small perturbation does to this policy's schedule (ties broken
  otherwise, a different chain of decisions): a group's change is read against it.

The importance of a group is the relative change of the mean average JCT (positive: the policy is worse without it),
with a paired 95% bootstrap interval over the pairs. This asks what *this* policy uses, not what a policy trained
without the group would reach (that is a retraining ablation). Groups name the env's own feature names; a group whose
columns the checkpoint's env does not have is skipped.

    nice -n 10 python scripts/studies/jobselect_feature_importance.py runs/ppo_nc_scale_s0/best --seeds 0-2 \\
        --out docs/data/jobselect_feature_importance.json                           # docs/headroom.md
    python scripts/studies/jobselect_feature_importance.py checkpoints/ppo_jobselect_gnn_nc --seeds 0 \\
        --windows 2017-10-13 --groups attained --out /tmp/fi.json                    # a minute
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from jobselect_learned import checkpoint_digest, paired_ratio, parse_seeds  # noqa: E402

WINDOWS = (
    "2017-10-07",
    "2017-10-13",
    "2017-10-21",
)  # held-in: the scale config's checkpoint selection windows
GROUPS = {
    "size": ("job", ("gpus", "log_gpus")),
    "age": ("job", ("age",)),
    "attained": ("job", ("attained_service", "time_in_state", "preemptions")),
    "fits": ("job", ("fits",)),
    "running": ("job", ("running", "speed")),
    "history": (
        "job",
        ("history_level", "history_samples", "history_median", "history_survival", "history_remaining"),
    ),
    "queue_mix": ("context", ("queued_gpus_1", "queued_gpus_2_4", "queued_gpus_5_8", "queued_gpus_9_plus")),
    "fragmentation": ("context", ("free_fragmented", "largest_free_server")),
    "arrivals": ("context", ("finished", "arrival_rate")),
    "jitter": ("jitter", ()),  # the control: every feature kept, each multiplied by 1 + JITTER * N(0, 1)
}
JITTER = 1e-3


class Perturbed:
    """``act(obs)`` of ``agent`` on observations with one feature group destroyed (see the module docstring)."""

    def __init__(self, agent, kind: str, columns: list[int], rng: np.random.Generator, context_mean=None):
        self.agent, self.kind, self.columns, self.rng = agent, kind, columns, rng
        self.context_mean = context_mean

    def __call__(self, obs: dict) -> int:
        obs = dict(obs)
        if self.kind == "jitter":
            for key in ("job_features", "context"):
                x = obs[key]
                obs[key] = (x * (1.0 + JITTER * self.rng.standard_normal(x.shape))).astype(x.dtype)
            return self.agent.act(obs)
        if self.kind == "job":
            jf = obs["job_features"].copy()
            rows = np.flatnonzero(obs["job_mask"] > 0)
            if len(rows) > 1:
                jf[np.ix_(rows, self.columns)] = jf[np.ix_(self.rng.permutation(rows), self.columns)]
            obs["job_features"] = jf
        else:
            ctx = obs["context"].copy()
            ctx[self.columns] = self.context_mean[self.columns]
            obs["context"] = ctx
        return self.agent.act(obs)


class Recording:
    """``act(obs)`` of ``agent`` that also sums the context vectors it sees (for the context groups' means)."""

    def __init__(self, agent):
        self.agent, self.total, self.n = agent, None, 0

    def __call__(self, obs: dict) -> int:
        ctx = np.asarray(obs["context"], dtype=np.float64)
        self.total = ctx.copy() if self.total is None else self.total + ctx
        self.n += 1
        return self.agent.act(obs)

    def mean(self) -> np.ndarray:
        return (self.total / max(self.n, 1)).astype(np.float32)


def group_columns(env, group: str) -> tuple[str, list[int]] | None:
    """``(kind, column indices)`` of a group in ``env``'s observation, or None when the env lacks any of them."""
    kind, names = GROUPS[group]
    if kind == "jitter":
        return kind, []
    u = env.unwrapped
    have = list(u.encoder.job_feature_names) if kind == "job" else list(u.context_names)
    if not all(n in have for n in names):
        return None
    return kind, [have.index(n) for n in names]


def run_window(checkpoint: str, window: str, jobs: int, seeds: list[int], groups: list[str]) -> list[dict]:
    """Rows ``{"window", "seed", "base", GROUP: avg JCT, ...}`` for one held-in window."""
    from gpusched_lab import agents
    from gpusched_lab.agents.common import make_env, run_episode, set_torch_threads

    set_torch_threads(1)
    agent = agents.load(checkpoint)
    kwargs = {**agent.meta["env_kwargs"], "workload": f"philly:start={window},jobs={jobs},load=0.9,gpus=32"}
    kwargs.pop("obs_mode", None)
    env = make_env(agent.env_id, kwargs, agent.obs_mode)
    agent.check_env(env)
    rows = []
    for s in seeds:
        rec = Recording(agent)
        row = {
            "window": window,
            "seed": int(s),
            "base": float(run_episode(rec, env, s)["metrics"]["avg_jct"]),
        }
        for g in groups:
            found = group_columns(env, g)
            if found is None:
                continue
            kind, cols = found
            act = Perturbed(agent, kind, cols, np.random.default_rng([int(s), len(g)]), rec.mean())
            row[g] = float(run_episode(act, env, s)["metrics"]["avg_jct"])
        rows.append(row)
    env.close()
    return rows


def summarize(rows: list[dict], groups: list[str]) -> dict:
    """Per group: mean avg JCT with the group destroyed ÷ as trained, paired over (window, seed)."""
    out = {}
    for g in groups:
        mine = [r for r in rows if g in r]
        if mine:
            out[g] = paired_ratio([r[g] for r in mine], [r["base"] for r in mine])
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "checkpoint", type=Path, help="checkpoint folder (model.pt + meta.json) of a JobSelect-v1 agent"
    )
    ap.add_argument("--windows", default=",".join(WINDOWS), help="held-in window starts (before 2017-11-01)")
    ap.add_argument("--jobs", type=int, default=300, help="jobs per window (default 300)")
    ap.add_argument("--seeds", default="0-2", help="simulator seeds per window (default 0-2)")
    ap.add_argument("--groups", default=",".join(GROUPS), help=f"comma list of groups ({', '.join(GROUPS)})")
    ap.add_argument("--out", type=Path, required=True, help="result JSON")
    a = ap.parse_args(argv)
    try:
        seeds = parse_seeds(a.seeds)
    except ValueError as exc:
        ap.error(str(exc))
    windows = [w.strip() for w in a.windows.split(",") if w.strip()]
    bad = [w for w in windows if not (len(w) == 10 and w[4] == w[7] == "-" and w < "2017-11-01")]
    if bad or not windows:
        ap.error(
            f"--windows: expected held-in dates YYYY-MM-DD before 2017-11-01, got {', '.join(bad) or 'none'}"
        )
    groups = [g.strip() for g in a.groups.split(",") if g.strip()]
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown or not groups:
        ap.error(f"--groups: {', '.join(unknown) or 'none given'} (groups: {', '.join(GROUPS)})")
    if a.jobs < 1:
        ap.error(f"--jobs: expected >= 1, got {a.jobs}")
    if not (a.checkpoint / "model.pt").is_file() or not (a.checkpoint / "meta.json").is_file():
        ap.error(f"{a.checkpoint}: not a checkpoint folder (model.pt and meta.json expected)")
    meta = json.loads((a.checkpoint / "meta.json").read_text())
    if meta.get("env_id") != "gpusched/JobSelect-v1":
        ap.error(f"{a.checkpoint}: a JobSelect-v1 checkpoint expected, got {meta.get('env_id')!r}")

    from gpusched_envs.io import atomic_write_text

    t0 = time.perf_counter()
    rows = []
    for w in windows:
        rows += run_window(str(a.checkpoint), w, a.jobs, seeds, groups)
        print(f"{w}: {len(seeds)} seeds ({time.perf_counter() - t0:.0f} s)", flush=True)
    result = {
        "checkpoint": str(a.checkpoint),
        "digest": checkpoint_digest(a.checkpoint),
        "windows": windows,
        "jobs": a.jobs,
        "seeds": seeds,
        "command": "python scripts/studies/jobselect_feature_importance.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "rows": rows,
        "summary": summarize(rows, groups),
        "seconds": time.perf_counter() - t0,
    }
    atomic_write_text(a.out, json.dumps(result, indent=2) + "\n")
    print("| group destroyed | avg JCT ÷ as trained | 95% CI | pairs |\n|---|---:|---|---:|")
    for g, s in result["summary"].items():
        print(f"| {g} | {s['ratio']:.3f}× | [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}] | {s['pairs']} |")
    return result


if __name__ == "__main__":
    main()
