"""``gpusched adapt``: the MetaPlace adaptation evaluation on held-out ``WorkerPlacement-v1`` tasks (meta-training,
``gpusched meta-train``, is :mod:`gpusched_lab.train.meta_train`).

For each seed ``i`` (one held-out task per seed, :func:`gpusched_envs.envs.placement_tasks.heldout_tasks`, or a
drifting one with ``--drift``), every learning agent adapts for ``K`` episodes on the task (``inner_steps``
policy-gradient steps per episode and a refit of its performance model, its own workload seeds) and its greedy
policy is then evaluated on ``--eval-episodes`` workloads of the task that adaptation never saw; the heuristics run on the same evaluation workloads (FIFO order with
backfill, as the env's head job, and their placement). Reported: average JCT after 0, 1, 3, 10 adaptation
episodes, per agent, mean over seeds with a 95% percentile-bootstrap interval, and paired differences
(MetaPlace − agent, per seed) with their intervals.

Agents: ``metaplace`` (the meta-trained checkpoint, uncertainty-directed exploration on), ``metaplace-nobonus``
(the exploration ablation: the same checkpoint, plain sampling from the policy), ``metaplace-nomodel`` (the
ablation of the model-based score: the same checkpoint with ``w = 0``, the GNN's logits alone, bonus on),
``multitask`` (pre-trained on every training task without meta-learning, with its own performance model, adapted
the same way, plain sampling), ``previous`` (another MetaPlace checkpoint given by ``--previous``, e.g. the one
shipped before, adapted the same way), ``scratch`` (the same network and score from a random initialisation and an
untrained performance model, same adaptation budget), and the heuristics ``consolidate``, ``closest``, ``pack``,
``random``. The learned agents' performance models are refitted on the task's adaptation episodes only; the
evaluation workloads are scored with the model but never added to it.

    gpusched adapt --num-seeds 10 --adapt-episodes 0,1,3,10 --out results/adapt
    gpusched adapt --drift --num-seeds 10 --out results/adapt-drift
"""

from __future__ import annotations

import copy
import dataclasses
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from gpusched_lab.agents.common import fresh_simulator, seed_everything, set_torch_threads
from gpusched_lab.evaluate.report.files import write_json, write_text
from gpusched_lab.evaluate.report.tables import bracket_text, md_row, md_rule
from gpusched_lab.evaluate.stats import interval
from gpusched_lab.train.meta_train import DEFAULT_META, DEFAULT_MULTITASK, meta_train_cmd  # noqa: F401
from rich.console import Console

from gpusched_envs.envs.placement_tasks import drift_tasks, heldout_tasks
from gpusched_envs.policies.schedulers import FIFO
from gpusched_envs.validation import Float, Int, Processes, Seed, check_cap

HEURISTIC_AGENTS = ("consolidate", "closest", "pack", "random")
LEARNED_AGENTS = ("metaplace", "metaplace-nobonus", "metaplace-nomodel", "multitask", "scratch", "previous")
DEFAULT_AGENTS = tuple(a for a in LEARNED_AGENTS if a != "previous") + HEURISTIC_AGENTS


def _heuristic_jct(env, task, placement: str, seed: int) -> float:

    env.unwrapped.set_task(task)
    sim = fresh_simulator(env, seed)
    return float(sim.run(FIFO(placement, backfill=True))["avg_jct"])


def _greedy_jct(policy, env, task, seeds, perf=None, caution: float = 0.0) -> float:
    """Greedy policy (scored with ``perf``'s cautious predictions, which learns nothing here) on the evaluation
    workloads."""
    from gpusched_lab.agents.methods.metaplace.agent import rollout

    env.unwrapped.set_task(task)
    return float(
        np.mean(
            [
                rollout(policy, env, int(s), greedy=True, perf=perf, observe=False, caution=caution).metrics[
                    "avg_jct"
                ]
                for s in seeds
            ]
        )
    )


def run_seed(job: dict) -> dict:
    """One seed of the evaluation: every agent on the seed's task; ``{agent: {K: avg JCT}}``."""

    import torch
    from gpusched_lab.agents.methods.metaplace.agent import (
        adapt,
        load_meta,
        make_env,
        make_policy,
        new_perf_model,
    )

    set_torch_threads(1)
    i, ks = int(job["seed"]), sorted(int(k) for k in job["ks"])
    policy0, perf0, meta = load_meta(job["meta"])
    from gpusched_lab.agents.methods.metaplace.agent import MetaArgs

    args = MetaArgs(**{k: v for k, v in meta["args"].items() if k in MetaArgs.__dataclass_fields__})
    args = dataclasses.replace(args, **(job.get("overrides") or {}))  # adaptation settings under study
    env = make_env(args)
    pick = drift_tasks if job["drift"] else heldout_tasks
    task = pick(i + 1, args.task_seed, args.num_jobs, (args.cluster,))[i]
    adapt_seeds = np.random.default_rng([i, 100]).integers(2**31, size=max(ks))
    eval_seeds = np.random.default_rng([i, 200]).integers(2**31, size=int(job["eval_episodes"]))
    out: dict = {"seed": i, "task": repr(task), "agents": {}}
    for name in job["agents"]:
        if name in HEURISTIC_AGENTS:
            jct = float(np.mean([_heuristic_jct(env, task, name, int(s)) for s in eval_seeds]))
            out["agents"][name] = {str(k): jct for k in ks}
            continue
        seed_everything(1000 + i)
        perf = None
        bonus = 0.0
        if name.startswith("metaplace"):
            policy, perf = copy.deepcopy(policy0), copy.deepcopy(perf0)
            bonus = args.bonus if name == "metaplace" else 0.0
            if name == "metaplace-nomodel":  # the ablation of the model-based score: the GNN's logits alone
                with torch.no_grad():
                    policy.model_weight.fill_(0.0)
        elif name == "multitask":
            policy, perf, _ = load_meta(job["multitask"])
        elif name == "previous":  # another MetaPlace checkpoint (e.g. the one shipped before), adapted alike
            policy, perf, _ = load_meta(job["previous"])
            bonus = args.bonus
        elif name == "scratch":
            torch.manual_seed(1000 + i)
            policy, perf = make_policy(env, args), new_perf_model(env, 1000 + i)
        else:
            raise ValueError(f"unknown agent {name!r}; valid: {', '.join(LEARNED_AGENTS + HEURISTIC_AGENTS)}")
        curve: dict[str, float] = {}
        if 0 in ks:
            curve["0"] = _greedy_jct(policy, env, task, eval_seeds, perf, args.caution)

        def note(k, phi, curve=curve, perf=perf):
            if k in ks:
                curve[str(k)] = _greedy_jct(phi, env, task, eval_seeds, perf, args.caution)
                env.unwrapped.set_task(task)

        if max(ks) > 0:
            rng = np.random.default_rng([i, 300])
            adapt(policy, env, task, adapt_seeds, args, perf=perf, bonus=bonus, rng=rng, callback=note)
        out["agents"][name] = curve
    env.close()
    return out


def summarise(results: list[dict], ks: list[int], reference: str = "metaplace") -> dict:
    """Mean and 95% interval per agent and K; paired differences ``reference − agent`` per seed."""

    agents = list(results[0]["agents"]) if results else []
    table: dict = {}
    for a in agents:
        table[a] = {}
        for k in ks:
            vals = [r["agents"][a][str(k)] for r in results]
            row = {**interval(vals), "n": len(vals)}
            if reference in agents and a != reference:
                row["paired_diff"] = interval(
                    [r["agents"][reference][str(k)] - r["agents"][a][str(k)] for r in results]
                )
            table[a][str(k)] = row
    return table


def markdown(table: dict, ks: list[int], title: str, reference: str = "metaplace") -> str:
    head = ["agent", *(f"K={k}" for k in ks)]
    lines = [f"### {title}", "", md_row(head), md_rule("l" * len(head))]
    for a, row in table.items():
        cells = [bracket_text(row[str(k)]["mean"], row[str(k)]["low"], row[str(k)]["high"]) for k in ks]
        lines.append(md_row([a, *cells]))
    lines += [
        "",
        f"Paired difference {reference} − agent (s; negative: {reference} better), 95% interval:",
        "",
    ]
    lines += [md_row(head), md_rule("l" * len(head))]
    for a, row in table.items():
        if "paired_diff" not in row[str(ks[0])]:
            continue
        diffs = [row[str(k)]["paired_diff"] for k in ks]
        lines.append(md_row([a, *(bracket_text(d["mean"], d["low"], d["high"], "+,.0f") for d in diffs)]))
    return "\n".join(lines) + "\n"


def run_adaptation(
    meta: str | Path,
    multitask: str | Path | None,
    agents: list[str],
    seeds: int,
    ks: list[int],
    eval_episodes: int = 2,
    drift: bool = False,
    workers: int = 1,
    log=print,
    previous: str | Path | None = None,
    overrides: dict | None = None,
    first_seed: int = 0,
) -> tuple[list[dict], dict]:
    """Every seed of the evaluation (:func:`run_seed`), seeds ``first_seed .. first_seed + seeds - 1``;
    ``overrides``: MetaArgs fields of the adaptation (e.g. ``max_kl``, ``caution``, ``perf_prior``) replacing the
    checkpoint's. Returns (per-seed results, summary)."""
    jobs = [
        {
            "seed": i,
            "ks": ks,
            "meta": str(meta),
            "multitask": str(multitask) if multitask else None,
            "previous": str(previous) if previous else None,
            "agents": agents,
            "eval_episodes": eval_episodes,
            "drift": drift,
            "overrides": dict(overrides or {}),
        }
        for i in range(first_seed, first_seed + seeds)
    ]
    results: list[dict] = []
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            for r in pool.map(run_seed, jobs):
                results.append(r)
                log(f"seed {r['seed']} done")
    else:
        for j in jobs:
            results.append(run_seed(j))
            log(f"seed {j['seed']} done")
    return results, summarise(results, ks)


def _fail(message: str) -> None:
    from gpusched_envs.cli import print_error

    print_error(message, Console(stderr=True))  # escaped: a value such as "[/]" is text, not rich markup
    raise typer.Exit(code=2)


def _int_list(text: str, what: str) -> list[int]:
    try:
        vals = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        _fail(f"--{what}: expected a comma list of integers, got {text!r}")
    if not vals or min(vals) < 0:
        _fail(f"--{what}: expected non-negative integers, got {text!r}")
    check_cap("episodes", max(vals), f"--{what}")
    return vals


def adapt_cmd(
    adapt_episodes: Annotated[
        str, typer.Option(help="Comma list of adaptation budgets K (episodes) to report.")
    ] = "0,1,3,10",
    seeds: Annotated[
        int,
        typer.Option(
            "--num-seeds", parser=Int(min=1, cap="seeds"), help="How many seeds (one held-out task each)."
        ),
    ] = 10,
    first_seed: Annotated[
        int,
        typer.Option(parser=Seed(), help="First seed (tasks first_seed .. first_seed + num_seeds - 1)."),
    ] = 0,
    agents: Annotated[
        str, typer.Option(help="Comma list of agents: " + ", ".join(LEARNED_AGENTS + HEURISTIC_AGENTS))
    ] = ",".join(DEFAULT_AGENTS),
    checkpoint: Annotated[Path, typer.Option(help="MetaPlace checkpoint folder.")] = Path(DEFAULT_META),
    multitask: Annotated[Path, typer.Option(help="Multi-task baseline checkpoint folder.")] = Path(
        DEFAULT_MULTITASK
    ),
    previous: Annotated[
        Path | None,
        typer.Option(help="Another MetaPlace checkpoint, agent 'previous' (e.g. the one shipped before)."),
    ] = None,
    eval_episodes: Annotated[
        int, typer.Option(parser=Int(min=1, cap="episodes"), help="Evaluation workloads per seed and K.")
    ] = 2,
    drift: Annotated[bool, typer.Option(help="Drift experiment: the task changes mid-episode.")] = False,
    max_kl: Annotated[
        float | None,
        typer.Option(
            parser=Float(min=0.0),
            help="Trust region of the inner policy-gradient steps (mean KL per episode; 0: none).",
        ),
    ] = None,
    caution: Annotated[
        float | None,
        typer.Option(
            parser=Float(min=0.0), help="c of the cautious model score Δ + c·σ (0: the mean alone)."
        ),
    ] = None,
    perf_prior: Annotated[
        float | None,
        typer.Option(
            parser=Float(min=0.0),
            help="Prior strength of the performance-model refits (0: the task's samples alone).",
        ),
    ] = None,
    workers: Annotated[
        int, typer.Option(parser=Processes(), help="Processes (at most one per CPU unless raised).")
    ] = 1,
    out: Annotated[Path, typer.Option(help="Output folder (adapt.json, adapt.md).")] = Path("results/adapt"),
) -> None:
    """Average JCT on held-out WorkerPlacement tasks after K adaptation episodes, per agent (MetaPlace)."""

    ks = _int_list(adapt_episodes, "adapt-episodes")
    # the tasks 0 .. first_seed + seeds - 1 are drawn, and every seed runs every K's evaluation episodes
    check_cap("seeds", first_seed + seeds, "--first-seed + --num-seeds")
    check_cap(
        "evaluations", seeds * len(ks) * eval_episodes, "--num-seeds × --adapt-episodes × --eval-episodes"
    )
    names = [a.strip() for a in agents.split(",") if a.strip()]
    bad = [a for a in names if a not in LEARNED_AGENTS + HEURISTIC_AGENTS]
    if bad:
        _fail(f"--agents: unknown {', '.join(bad)}; valid: {', '.join(LEARNED_AGENTS + HEURISTIC_AGENTS)}")
    for flag, path, needed in (
        ("--checkpoint", checkpoint, True),
        ("--multitask", multitask, "multitask" in names),
        ("--previous", previous, "previous" in names),
    ):
        if needed and path is None:
            _fail(f"agent 'previous' needs {flag} CHECKPOINT")
        if needed and not (Path(path) / "meta.json").exists():
            _fail(f"{flag} {path}: no MetaPlace checkpoint there (meta.json missing)")
    results, table = run_adaptation(
        checkpoint,
        multitask if "multitask" in names else None,
        names,
        seeds,
        ks,
        eval_episodes,
        drift,
        workers,
        previous=previous if "previous" in names else None,
        overrides={
            k: v
            for k, v in (("max_kl", max_kl), ("caution", caution), ("perf_prior", perf_prior))
            if v is not None
        },
        first_seed=first_seed,
    )
    span = f"seeds {first_seed}-{first_seed + seeds - 1}"
    title = f"{'Drift' if drift else 'Held-out'} tasks: average JCT (s) after K adaptation episodes, {span}"
    md = markdown(table, ks, title)
    doc = {
        "ks": ks,
        "seeds": seeds,
        "first_seed": first_seed,
        "drift": drift,
        "eval_episodes": eval_episodes,
        "table": table,
    }
    doc["adaptation"] = {"max_kl": max_kl, "caution": caution, "perf_prior": perf_prior}  # None: checkpoint's
    doc["per_seed"] = results
    write_json(Path(out) / "adapt.json", doc, indent=2, sort_keys=True)
    write_text(Path(out) / "adapt.md", md)
    typer.echo(md)
    typer.echo(f"wrote {out}/adapt.json, {out}/adapt.md")
