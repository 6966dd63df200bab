"""``gpusched netsens-compare``: the NetSens comparison (Sharma, Bhasi et al., arXiv 2401.16492) across congestion
levels — what waiting for consolidation, network-sensitive preemption and timer tuning buy as rack uplinks get more
oversubscribed, against FIFO and Tiresias with the ``consolidate`` and ``closest`` placements.

Scenario family (one per congestion level): the ``congested-1x`` / ``-4x`` / ``-16x`` cluster presets (4 racks x 2
servers x 4 V100, rack uplinks oversubscribed 1:1, 4:1, 16:1) and ``congested-nic`` (1:1 uplinks, 10 GbE NICs shared
by the multi-server jobs crossing them), the distributed-job Philly fit (``fit=netsens``: half
the jobs use 2-8 GPUs) with a communication-heavy model mix, on ``gpusched/DelayTuning-v1`` (timer levels 0 s .. 1 day,
one decision an hour). Every variant of a seed meets the same workload and simulator seed: the schedulers run on a
fresh simulator built from the env after ``reset(seed)`` (as the leaderboard does), the RL tuner in the env itself.

Variants: ``consolidation-only`` (delay scheduling with every timer 0: consolidate when possible, else spread at once),
``delay (fixed timers)`` (no preemption), ``delay + preemption``, ``+ auto-tuner`` (``netsens-auto``), ``+ RL tuner``
(a PPO checkpoint on DelayTuning-v1, when given), and ``fifo`` / ``tiresias`` with ``consolidate`` / ``closest``.

Metrics per seed: makespan, average JCT, communication-overhead fraction, preemptions per job. The summary gives each
variant's mean and, for the headline comparison, the paired relative change of ``+ auto-tuner`` (and ``+ RL tuner``)
against the best FIFO/Tiresias baseline of each metric and level, against ``fifo+closest`` (network-agnostic) and
against ``delay + preemption`` (the same scheduler with fixed timers), with percentile-bootstrap 95% intervals over
the paired seeds.

    gpusched netsens-compare --seeds 0-9 --out results/netsens
    python -m gpusched_lab.evaluate.netsens_compare --seeds 0-9 --rl-checkpoint checkpoints/ppo_delaytuning_mlp
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import gymnasium as gym
import numpy as np
import typer
from gpusched_lab.agents.common import fresh_simulator
from gpusched_lab.evaluate.report.files import csv_text, write_json, write_text
from gpusched_lab.evaluate.report.tables import md_row, md_rule
from gpusched_lab.evaluate.scenarios import SuiteError, parse_seeds
from gpusched_lab.evaluate.stats import paired_relative_change
from rich.console import Console

from gpusched_envs.policies import make_policy
from gpusched_envs.policies.netsens import AutoDelaySchedulingPolicy, DelaySchedulingPolicy
from gpusched_envs.validation import Float, Int

# the scenario family; numbers are assumptions of this comparison (stated in the README's NetSens section)
LEVELS: dict[str, str] = {
    "1:1": "congested-1x",
    "4:1": "congested-4x",
    "16:1": "congested-16x",
    "1:1 10GbE-NIC": "congested-nic",  # NIC-bound: the shared server NICs are the bottleneck
}
MODEL_MIX = "vgg16+bert+transformer+deepspeech2+yolov3+lm+resnet50+resnet18"  # large gradients: comm-heavy
TIMER_LEVELS = (0.0, 900.0, 3600.0, 14400.0, 86400.0)  # jobs run hours (Philly): timers up to a day
FIXED_LEVELS = (0, 2, 3)  # fixed timers per class: 0 s, 1 h, 4 h (also the auto-tuner's start)
INTERVAL = 3600.0
JOBS, LOAD = (
    200,
    0.6,
)  # moderate load: GPUs free up often but fragmented, where waiting for consolidation matters

METRICS = ("makespan", "avg_jct", "communication_overhead", "preemptions_per_job")
BASELINES = ("fifo+consolidate", "fifo+closest", "tiresias+consolidate", "tiresias+closest")
NETSENS = ("consolidation-only", "delay (fixed timers)", "delay + preemption", "+ auto-tuner")
RL = "+ RL tuner"
HEADLINE = ("+ auto-tuner", RL)
AGNOSTIC = "fifo+closest"  # the network-agnostic reference: FIFO, spread to wherever GPUs are free
FIXED = "delay + preemption"  # what the tuners must beat: the same scheduler with fixed timers


def env_kwargs(cluster: str, jobs: int = JOBS, load: float = LOAD) -> dict:
    """DelayTuning-v1 keyword arguments of one congestion level."""
    return {
        "cluster": cluster,
        "workload": f"synthetic:jobs={jobs},load={load},gpus=32,max_gpus=8,fit=netsens,models={MODEL_MIX}",
        "interval": INTERVAL,
        "timer_levels": list(TIMER_LEVELS),
        "obs_mode": "flat",
        "time_scale": 3600.0,
    }


def _schedulers() -> dict[str, Callable]:

    fixed = [TIMER_LEVELS[i] for i in FIXED_LEVELS]
    out: dict[str, Callable] = {b: (lambda b=b: make_policy(*b.split("+"))) for b in BASELINES}
    out["consolidation-only"] = lambda: DelaySchedulingPolicy(timers=[0.0] * len(fixed), preemption=False)
    out["delay (fixed timers)"] = lambda: DelaySchedulingPolicy(timers=fixed, preemption=False)
    out["delay + preemption"] = lambda: DelaySchedulingPolicy(timers=fixed, preemption=True)
    out["+ auto-tuner"] = lambda: AutoDelaySchedulingPolicy(
        levels=TIMER_LEVELS, initial_level=FIXED_LEVELS, period=INTERVAL, preemption=True
    )
    return out


def _row(level: str, variant: str, seed: int, m: dict) -> dict:
    jobs = max(int(m.get("jobs", 0)), 1)
    return {
        "level": level,
        "variant": variant,
        "seed": int(seed),
        "makespan": float(m["makespan"]),
        "avg_jct": float(m["avg_jct"]),
        "communication_overhead": float(m["communication_overhead"]),
        "preemptions_per_job": float(m["preemptions"]) / jobs,
        "jobs": int(m.get("jobs", 0)),
        "unfinished": int(m.get("unfinished", 0)),
    }


def run_comparison(
    levels: dict[str, str] | None = None,
    seeds=range(10),
    *,
    jobs: int = JOBS,
    load: float = LOAD,
    rl_checkpoint: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (level, variant, seed) with the four metrics."""

    import gpusched_envs.envs  # noqa: F401 - registers the ids

    levels = LEVELS if levels is None else levels
    schedulers = _schedulers()
    rl_policy = None
    if rl_checkpoint is not None:
        from gpusched_lab import agents

        rl_policy = agents.load(rl_checkpoint)
    rows: list[dict] = []
    for level, cluster in levels.items():
        env = gym.make("gpusched/DelayTuning-v1", **env_kwargs(cluster, jobs, load))
        for seed in seeds:
            for name, make in schedulers.items():
                sim = fresh_simulator(env, int(seed))
                rows.append(_row(level, name, seed, sim.run(make())))
            if rl_policy is not None:
                obs, info = env.reset(seed=int(seed))
                while True:
                    obs, _, terminated, truncated, info = env.step(rl_policy.act(obs))
                    if terminated or truncated:
                        break
                rows.append(_row(level, RL, seed, info["metrics"]))
            if progress is not None:
                progress(f"{level} seed {seed}")
        env.close()
    return rows


_paired_change = paired_relative_change  # the name this module had (evaluate.stats holds the statistics)


def summarise(rows: list[dict]) -> dict:
    """Means per (level, variant) and the paired changes of the headline variants vs the best baseline."""
    levels = list(dict.fromkeys(r["level"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    out: dict = {"levels": levels, "variants": variants, "means": {}, "headline": {}, "seeds": {}}
    for level in levels:
        at = [r for r in rows if r["level"] == level]
        seeds = sorted({r["seed"] for r in at})
        out["seeds"][level] = seeds

        def series(variant, metric, at=at, seeds=seeds):
            by_seed = {r["seed"]: r[metric] for r in at if r["variant"] == variant}
            return np.array([by_seed[s] for s in seeds if s in by_seed], dtype=np.float64)

        out["means"][level] = {
            v: {m: float(series(v, m).mean()) for m in METRICS} for v in variants if len(series(v, "avg_jct"))
        }
        out["headline"][level] = {}
        for metric in ("makespan", "avg_jct", "communication_overhead"):
            present = [b for b in BASELINES if b in out["means"][level]]
            if not present:
                continue
            best = min(present, key=lambda b: out["means"][level][b][metric])
            for v in HEADLINE:
                if v not in out["means"][level]:
                    continue
                for ref in dict.fromkeys((best, AGNOSTIC, FIXED)):
                    if ref not in out["means"][level]:
                        continue
                    change, lo, hi = _paired_change(series(v, metric), series(ref, metric))
                    out["headline"][level].setdefault(v, {}).setdefault(metric, []).append(
                        {"vs": ref, "best_baseline": ref == best, "change": change, "ci95": [lo, hi]}
                    )
    return out


def markdown(summary: dict) -> str:
    """The README table: one block of rows per congestion level."""
    head = ["uplink oversubscription", "variant", "makespan (h)", "avg JCT (h)", "comm. overhead"]
    lines = [md_row([*head, "preemptions / job"]), md_rule("llrrrr")]
    for level in summary["levels"]:
        for v, m in summary["means"][level].items():
            values = (m["makespan"] / 3600, m["avg_jct"] / 3600, m["communication_overhead"])
            lines.append(
                md_row(
                    [
                        level,
                        v,
                        f"{values[0]:,.1f}",
                        f"{values[1]:,.2f}",
                        f"{values[2]:.3f}",
                        f"{m['preemptions_per_job']:.3f}",
                    ]
                )
            )
    lines += [
        "",
        md_row(["oversubscription", "variant", "metric", "vs", "change [95% CI]"]),
        md_rule("lllll"),
    ]
    for level in summary["levels"]:
        for v, per in summary["headline"][level].items():
            for metric, refs in per.items():
                for h in refs:
                    lo, hi = h["ci95"]
                    vs = h["vs"] + (" (best)" if h["best_baseline"] else "")
                    change = f"{h['change']:+.1%} [{lo:+.1%}, {hi:+.1%}]"
                    lines.append(md_row([level, v, metric, vs, change]))
    return "\n".join(lines) + "\n"


def write_outputs(rows: list[dict], summary: dict, out: Path) -> list[Path]:
    """``netsens_compare.csv`` (one row per level, variant and seed), ``.json`` (the summary) and ``.md``."""
    return [
        write_text(out / "netsens_compare.csv", csv_text(rows, list(rows[0]), line_end="\r\n")),
        write_json(out / "netsens_compare.json", summary, indent=2),
        write_text(out / "netsens_compare.md", markdown(summary)),
    ]


def netsens_compare(
    seeds: Annotated[
        str, typer.Option(help="Seeds: '0-9', '0,3,5' (at least 10 for the README figures).")
    ] = "0-9",
    levels: Annotated[
        str, typer.Option(help=f"Comma list of oversubscription levels among {', '.join(LEVELS)}.")
    ] = ",".join(LEVELS),
    jobs: Annotated[int, typer.Option(parser=Int(min=1), help="Jobs per episode.")] = JOBS,
    load: Annotated[float, typer.Option(parser=Float(min=0.01), help="Offered load on the 32 GPUs.")] = LOAD,
    rl_checkpoint: Annotated[
        Path | None, typer.Option(help="PPO checkpoint on DelayTuning-v1 (the RL tuner); none: left out.")
    ] = None,
    out: Annotated[
        Path, typer.Option(help="Output folder (CSV per seed, JSON summary, Markdown table).")
    ] = Path("results/netsens"),
) -> None:
    """NetSens comparison across rack-uplink congestion levels: consolidation-only, delay with fixed timers,
    + preemption, + auto-tuner, + RL tuner vs FIFO / Tiresias with consolidate and closest placement."""

    console, err = Console(), Console(stderr=True)

    def fail(message: str):
        from gpusched_envs.cli import print_error

        print_error(message, err)  # escaped: a value such as "[/]" is text, not rich markup
        raise typer.Exit(code=2)

    try:
        seed_list = parse_seeds(seeds, "--seeds")
    except SuiteError as exc:
        fail(str(exc))
    chosen = {}
    for name in (s.strip() for s in levels.split(",") if s.strip()):
        if name not in LEVELS:
            fail(f"--levels: unknown level {name!r}; valid: {', '.join(LEVELS)}")
        chosen[name] = LEVELS[name]
    if not chosen:
        fail("--levels: no level given")
    if rl_checkpoint is not None and not (Path(rl_checkpoint) / "meta.json").is_file():
        fail(f"--rl-checkpoint: {rl_checkpoint} is not a checkpoint folder (model.pt + meta.json)")
    with console.status("netsens-compare") as status:
        rows = run_comparison(
            chosen,
            seed_list,
            jobs=jobs,
            load=load,
            rl_checkpoint=rl_checkpoint,
            progress=lambda msg: status.update(f"netsens-compare: {msg}"),
        )
    summary = summarise(rows)
    summary["settings"] = {
        "levels": chosen,
        "seeds": list(seed_list),
        "jobs": jobs,
        "load": load,
        "env_kwargs": {k: env_kwargs(c, jobs, load) for k, c in chosen.items()},
        "rl_checkpoint": None if rl_checkpoint is None else str(rl_checkpoint),
    }
    for p in write_outputs(rows, summary, out):
        console.print(f"wrote {p}", markup=False, highlight=False)
    console.print(markdown(summary), highlight=False, markup=False)


def main() -> None:  # pragma: no cover - python -m gpusched_lab.evaluate.netsens_compare
    typer.run(netsens_compare)


if __name__ == "__main__":  # pragma: no cover
    main()
