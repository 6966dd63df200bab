"""Score a checkpoint against the heuristics of its own information class, paired on the same workloads: average JCT
per (scenario, seed), mean and 95% bootstrap interval per policy, and the paired difference agent − heuristic.

    gpusched train compare checkpoints/ppo_jobselect_gnn --num-seeds 10 --first-seed 20000
    gpusched train compare CKPT --env-kwargs '{"cluster": "hetero64", "workload": "philly:start=2017-11-06,jobs=300,load=0.9,gpus=64"}'
    gpusched train compare CKPT --suite philly_heldout --num-seeds 3 --out results.json

The heuristics are those a scheduler with the agent's information could run (``information`` in the checkpoint's
metadata; checkpoints from before the setting existed saw traced durations, so they count as clairvoyant):
non-clairvoyant FIFO, Gandiva, Tiresias; clairvoyant also SJF and SRTF. Preemptive heuristics are always included
(the strongest fair baselines), whether or not the agent may preempt. A WorkerPlacement-v1 agent chooses placements
under the env's fixed head rule (FIFO with backfill), so its class is that rule under each placement rule
(``consolidate``, ``closest``, ``pack``, ``first-fit``, ``spread``, ``random``), plus Tiresias.

Each heuristic runs on a fresh simulator holding the workload and settings of the env reset with the same seed (not on
the env's own simulator, which ``reset`` has already advanced to its first decision point), so every policy sees
exactly the workload the agent sees. ``--env-kwargs`` (or a ``--suite``'s scenarios) replace the checkpoint's env
kwargs, except those that fix the observation layout or the meaning of actions (``obs_mode``, ``placement``,
``preemption``, ``decision_interval``, ``information``; and for the CNN / MLP also ``window``), which stay the checkpoint's; a GNN checkpoint
runs on any cluster.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
import yaml
from gpusched_lab.agents.common import fresh_simulator, make_env, run_episode, set_torch_threads
from gpusched_lab.evaluate.episodes import masked_random, run_act_episodes
from gpusched_lab.evaluate.stats import bootstrap_ci

from gpusched_envs.envs.adapters import HeuristicAgent
from gpusched_envs.errors import USER_ERRORS
from gpusched_envs.io import atomic_write_text
from gpusched_envs.policies import PREEMPTIVE_POLICIES, make_policy
from gpusched_envs.policies.schedulers import FIFO, comparable_policies
from gpusched_envs.validation import Int, Seed, check_int, check_seed

# env kwargs a checkpoint's policy depends on (taken from the checkpoint, never from the scenario)
POLICY_KWARGS = (
    "obs_mode",
    "placement",
    "preemption",
    "preempt_window",
    "decision_interval",
    "min_run",
    "information",
    "task_clusters",
    "work_conserving",
    "history_features",
    "hint",
    "rules",
)
FIXED_LAYOUT_KWARGS = ("window",)  # also fixed for the CNN and MLP (their parameters depend on it)
HEURISTIC_PLACEMENT = {
    "gandiva": "pack"
}  # Gandiva's own packing placement; the others use the agent's placement
# WorkerPlacement-v1's own class: its head rule (the oldest job that fits) is FIFO with backfill, and the agent chooses
# the placement, so its heuristics are FIFO-with-backfill under each placement rule (the env's heuristic_action plays
# them exactly); preemptive Tiresias stays as the strongest scheduler outside that class
PLACEMENT_ENVS = ("gpusched/WorkerPlacement-v1",)
PLACEMENT_HEURISTICS = ("consolidate", "closest", "pack", "first-fit", "spread", "random")


def information_of(meta: dict) -> str:
    """The information class a checkpoint was trained with (legacy checkpoints saw durations: clairvoyant)."""
    return meta.get("information") or (meta.get("env_kwargs") or {}).get("information") or "clairvoyant"


# references beside the heuristics wherever FIFO is shown: FIFO that lets a later job start when the head does not
# fit, and a random policy over the valid actions (what "learned anything" is measured against)
BASELINES = ("fifo+backfill", "random-masked")


def heuristics_for(information: str) -> tuple[str, ...]:

    return comparable_policies(information, preemption=True)


def in_env_heuristics(env, names) -> tuple[str, ...]:
    """``NAME@env`` for the preemptive heuristics of ``names`` when ``env`` is JobSelect-v1 with preemption: the
    heuristic acting through the agent's own env (same window, lease ``min_run``, rounds ``decision_interval``),
    the like-for-like reference next to its Simulator.run figure."""

    u = env.unwrapped
    if not getattr(u, "preemption", False) or not hasattr(u, "running_window"):
        return ()
    if getattr(u, "rules", None) is not None:
        return ()  # a rule-choice env: a rule alone there is its Simulator.run row
    return tuple(f"{h}@env" for h in names if h in PREEMPTIVE_POLICIES)


def heuristic_in_env_jct(env, name: str, placement: str, seed: int) -> float:
    """Average JCT of heuristic ``name`` acting through ``env`` (HeuristicAgent), episode seeded by ``seed``."""

    agent = HeuristicAgent(make_policy(name, placement))
    return float(run_episode(lambda _obs: agent(env), env, seed)["metrics"]["avg_jct"])


def heuristic_jct(env, name: str, placement: str, seed: int) -> float:
    if name == "random-masked":  # acts through the agent's own env
        return float(run_episode(masked_random(seed), env, seed)["metrics"]["avg_jct"])
    if name == "fifo+backfill":
        return float(fresh_simulator(env, seed).run(FIFO(placement, backfill=True))["avg_jct"])

    if (
        name in PLACEMENT_HEURISTICS
    ):  # a placement rule: FIFO with backfill, as WorkerPlacement-v1's head rule
        return float(fresh_simulator(env, seed).run(FIFO(name, backfill=True))["avg_jct"])
    return float(fresh_simulator(env, seed).run(make_policy(name, placement))["avg_jct"])


SUITES_DIR = Path(__file__).resolve().parent / "suites"


def suite_scenarios(name_or_path: str) -> list[tuple[str, str, dict]]:
    """``(name, env_id, env_kwargs)`` of a leaderboard suite file (a path or a name in ``evaluate/suites``), read
    as data; defaults are merged as the leaderboard merges them."""

    path = Path(name_or_path)
    if not path.is_file():
        path = SUITES_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SUITES_DIR.glob("*.yaml")))
        raise ValueError(f"--suite {name_or_path!r}: neither a file nor a suite in evaluate/suites ({known})")
    doc = yaml.safe_load(path.read_text()) or {}
    defaults = doc.get("defaults") or {}
    out = []
    for i, sc in enumerate(doc.get("scenarios") or []):
        if not isinstance(sc, dict) or not isinstance(sc.get("name"), str):
            raise ValueError(f"{path}: scenarios[{i}] is not a mapping with a name")
        kwargs = {**(defaults.get("env_kwargs") or {}), **(sc.get("env_kwargs") or {})}
        out.append((sc["name"], sc.get("env_id", defaults.get("env_id")), kwargs))
    return out


def scenario_kwargs(meta: dict, env_kwargs: dict) -> dict:
    """``env_kwargs`` over the checkpoint's, with the policy-defining kwargs kept from the checkpoint."""
    trained = dict(meta.get("env_kwargs") or {})
    keep = POLICY_KWARGS + (
        () if (meta.get("network") or {}).get("encoder") == "gnn" else FIXED_LAYOUT_KWARGS
    )
    out = {**trained, **env_kwargs}
    for k in keep:
        if k in trained:
            out[k] = trained[k]
        else:
            out.pop(k, None)
    out["information"] = information_of(meta)
    return out


def compare(
    checkpoint: str | Path,
    seeds: list[int],
    heuristics=None,
    progress=None,
    env_kwargs: dict | None = None,
    suite: str | None = None,
    in_env_references: bool = True,
    only: list[str] | None = None,
) -> dict:
    """Average JCT of the checkpoint's deterministic policy and of each heuristic on every (scenario, seed).

    Scenarios: the checkpoint's own env (with ``env_kwargs`` over its kwargs), or every JobSelect / WorkerPlacement
    scenario of ``suite`` with the checkpoint's env id (``seeds`` then replace the suite's). With
    ``in_env_references`` a preemptive JobSelect agent is also paired with each preemptive heuristic acting through
    its own env (``tiresias@env``: same window, lease and scheduling rounds as the agent)."""
    from gpusched_lab import agents

    set_torch_threads(1)
    agent = agents.load(checkpoint)
    meta = agent.meta
    information = information_of(meta)
    if heuristics is not None:
        names = tuple(heuristics)
    elif agent.env_id in PLACEMENT_ENVS:
        names = (*PLACEMENT_HEURISTICS, "tiresias")
    else:
        names = (*heuristics_for(information), *BASELINES)
    if suite is not None:
        scenarios = [(n, kw) for n, env_id, kw in suite_scenarios(suite) if env_id == agent.env_id]
        if not scenarios:
            raise ValueError(f"suite {suite!r} has no scenario on {agent.env_id}")
        if only is not None:
            unknown = sorted(set(only) - {n for n, _ in scenarios})
            if unknown:
                raise ValueError(
                    f"--scenarios: {', '.join(unknown)} not in suite {suite!r} "
                    f"({', '.join(n for n, _ in scenarios)})"
                )
            scenarios = [(n, kw) for n, kw in scenarios if n in only]
    else:
        scenarios = [("checkpoint-env" if not env_kwargs else "env-kwargs", dict(env_kwargs or {}))]
    placement = meta["env_kwargs"].get("placement", "closest")
    if not isinstance(placement, str):
        placement = "closest"
    rows: list[dict] = []
    t0 = time.perf_counter()
    all_names = names
    for name, kwargs in scenarios:
        env = make_env(agent.env_id, scenario_kwargs(meta, kwargs), agent.obs_mode)
        agent.check_env(env)  # one clear line when the layout cannot be read (CNN / MLP on another cluster)
        in_env = in_env_heuristics(env, names) if in_env_references else ()
        all_names = names + in_env
        agent_jct = agent_avg_jcts(agent, env, scenario_kwargs(meta, kwargs), seeds)
        for s, jct in zip(seeds, agent_jct, strict=True):
            row = {"scenario": name, "seed": int(s)}
            row["agent"] = jct
            for h in names:
                row[h] = heuristic_jct(env, h, HEURISTIC_PLACEMENT.get(h, placement), s)
            for h in in_env:
                row[h] = heuristic_in_env_jct(env, h.split("@")[0], placement, s)
            rows.append(row)
            if progress:
                progress(
                    f"{name} seed {s}: agent {row['agent']:,.0f} s, "
                    + ", ".join(f"{h} {row[h]:,.0f}" for h in all_names)
                )
        env.close()
    return {
        "checkpoint": str(checkpoint),
        "env_id": agent.env_id,
        "env_kwargs": meta["env_kwargs"],
        "information": information,
        "placement": placement,
        "suite": suite,
        "scenarios": [{"name": n, "env_kwargs": scenario_kwargs(meta, k)} for n, k in scenarios],
        "seeds": list(map(int, seeds)),
        "rows": rows,
        "summary": summarize_pairs(rows, all_names),
        "summary_by_scenario": summarize_by_scenario(rows, all_names),
        "seconds": time.perf_counter() - t0,
    }


def agent_avg_jcts(agent, env, env_kwargs: dict, seeds: list[int]) -> list[float]:
    """The average JCT of ``agent``'s deterministic policy on each seed of ``env``'s scenario.

    With more than one seed and an agent that decides a batch (``act_many``), the episodes are played in lockstep, one
    env per seed and one batched forward pass per step (:func:`~gpusched_lab.evaluate.episodes.run_act_episodes`);
    ``act_many`` gives exactly ``act``'s actions, so the figures are those of one episode at a time."""
    act_many = getattr(agent, "act_many", None)
    if len(seeds) < 2 or act_many is None:
        return [float(run_episode(agent.act, env, int(s))["metrics"]["avg_jct"]) for s in seeds]
    envs = [env] + [make_env(agent.env_id, env_kwargs, agent.obs_mode) for _ in seeds[1:]]
    try:
        results = run_act_episodes(act_many, envs, [int(s) for s in seeds])
    finally:
        for other in envs[1:]:
            other.close()
    for res in results:
        if isinstance(res, Exception):
            raise res
    return [float(res["avg_jct"]) for res in results]


def summarize_pairs(rows: list[dict], heuristics) -> dict:
    """Per policy: mean avg JCT with its 95% bootstrap interval; per heuristic h: the paired difference agent − h
    (negative: the agent is better) with its interval and as a share of h's mean."""
    summary = {}
    for name in ("agent", *heuristics):
        mean, lo, hi = bootstrap_ci([r[name] for r in rows])
        summary[name] = {"mean": mean, "ci95": [lo, hi]}
    for h in heuristics:
        diff = np.asarray([r["agent"] - r[h] for r in rows])
        mean, lo, hi = bootstrap_ci(diff)
        base = summary[h]["mean"]
        summary[f"agent_minus_{h}"] = {
            "mean": mean,
            "ci95": [lo, hi],
            "relative": mean / base if base else float("nan"),
            "pairs": len(diff),
            "agent_better_in": int((diff < 0).sum()),
        }
    return summary


def summarize_by_scenario(rows: list[dict], heuristics) -> dict:
    """Per heuristic h: the paired difference agent − h averaged over the seeds of each scenario first, then the
    mean over scenarios with a 95% bootstrap interval that resamples scenarios. Within a trace window the seeds
    change only the simulator's seeded choices, so the windows, not the (window, seed) pairs, are the independent
    units: this interval is the conservative reading when there are several seeds per window."""
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    out = {}
    for h in heuristics:
        per = []
        for sc in scenarios:
            mine = [r for r in rows if r["scenario"] == sc]
            per.append(
                (float(np.mean([r["agent"] - r[h] for r in mine])), float(np.mean([r[h] for r in mine])))
            )
        diff = np.asarray([d for d, _ in per])
        mean, lo, hi = bootstrap_ci(diff)
        base = float(np.mean([b for _, b in per]))
        out[f"agent_minus_{h}"] = {
            "mean": mean,
            "ci95": [lo, hi],
            "relative": mean / base if base else float("nan"),
            "scenarios": len(diff),
            "agent_better_in": int((diff < 0).sum()),
        }
    return out


def markdown_table(result: dict) -> str:
    rows = [
        f"information: {result['information']}; {len(result['rows'])} paired (scenario, seed) episodes",
        "",
        "| policy | mean avg JCT (s) | 95% CI | agent − policy (s) [95% CI] | relative |",
        "|---|---:|---|---|---:|",
    ]
    s = result["summary"]
    for name, v in s.items():
        if name.startswith("agent_minus_"):
            continue
        d = s.get(f"agent_minus_{name}")
        diff = f"{d['mean']:+,.0f} [{d['ci95'][0]:+,.0f}, {d['ci95'][1]:+,.0f}]" if d else "—"
        rel = f"{d['relative']:+.1%}" if d else "—"
        rows.append(
            f"| {name} | {v['mean']:,.0f} | [{v['ci95'][0]:,.0f}, {v['ci95'][1]:,.0f}] | {diff} | {rel} |"
        )
    by = result.get("summary_by_scenario") or {}
    if by and len(result["rows"]) > len(result.get("scenarios") or ()):  # several seeds per scenario
        rows += [
            "",
            "Over scenarios (seeds averaged per scenario first; the interval resamples scenarios):",
            "",
        ]
        rows += [
            "| policy | agent − policy (s) [95% CI] | relative | agent better in |",
            "|---|---|---:|---:|",
        ]
        for key, d in by.items():
            rows.append(
                f"| {key.removeprefix('agent_minus_')} | {d['mean']:+,.0f} [{d['ci95'][0]:+,.0f}, "
                f"{d['ci95'][1]:+,.0f}] | {d['relative']:+.1%} | {d['agent_better_in']}/{d['scenarios']} |"
            )
    return "\n".join(rows)


def write_result(result: dict, out: Path) -> None:

    atomic_write_text(out, json.dumps(result, indent=2) + "\n")


# ``gpusched train compare``: registered under ``gpusched train`` by this package (entry point group
# ``gpusched.train_commands``), since the training package does not import the evaluation package
def compare_cmd(
    checkpoint: Annotated[Path, typer.Argument(help="Checkpoint folder (model.pt + meta.json).")],
    seeds: Annotated[
        int,
        typer.Option("--num-seeds", parser=Int(min=1, cap="seeds"), help="How many held-out seeds (>= 1)."),
    ] = 10,
    first_seed: Annotated[
        int, typer.Option("--first-seed", parser=Seed(), help="First held-out seed (>= 0).")
    ] = 20_000,
    env_kwargs: Annotated[
        str | None,
        typer.Option(
            "--env-kwargs",
            help="Env kwargs as JSON, over the checkpoint's (another cluster, workload, load); the kwargs that "
            "define the policy (obs_mode, placement, preemption, information) stay the checkpoint's.",
        ),
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite", help="Run on every scenario of this leaderboard suite (e.g. philly_heldout)."
        ),
    ] = None,
    scenarios: Annotated[
        str | None,
        typer.Option("--scenarios", help="With --suite: comma list of its scenarios to run (default: all)."),
    ] = None,
    in_env: Annotated[
        bool,
        typer.Option(
            "--in-env/--no-in-env",
            help="Also pair a preemptive JobSelect agent with Tiresias / SRTF acting through its own env "
            "(same window, lease and scheduling rounds): rows NAME@env.",
        ),
    ] = True,
    out: Annotated[Path | None, typer.Option("--out", help="Write the full result as JSON here.")] = None,
) -> None:
    """Average JCT of a checkpoint vs the heuristics of its information class, paired per (scenario, seed)."""
    # on use: importing gpusched_lab.train.cli registers this command, which must be defined by then
    from gpusched_lab.train.cli import parse_env_kwargs, user_error_message

    try:
        check_int(seeds, "--num-seeds", min=1, cap="seeds")
        check_seed(first_seed + seeds - 1, "--first-seed + --num-seeds - 1 (the last seed)")
        if env_kwargs is not None and suite is not None:
            raise ValueError("give --env-kwargs or --suite, not both")
        if scenarios is not None and suite is None:
            raise ValueError("--scenarios selects scenarios of a --suite")
        extra = parse_env_kwargs(env_kwargs) if env_kwargs else None
        result = compare(
            checkpoint,
            list(range(first_seed, first_seed + seeds)),
            progress=lambda msg: typer.echo(msg, err=True),
            env_kwargs=extra,
            suite=suite,
            in_env_references=in_env,
            only=None if scenarios is None else [x.strip() for x in scenarios.split(",") if x.strip()],
        )
    except USER_ERRORS as exc:
        typer.echo(f"error: {user_error_message(exc)}", err=True)
        raise typer.Exit(2) from None
    typer.echo(markdown_table(result))
    if out is not None:
        write_result(result, out)
