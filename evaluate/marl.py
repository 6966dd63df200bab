"""``gpusched marl`` (also ``python -m gpusched_lab.evaluate.marl``): the multi-agent evaluation of HMARL.

Every scheduler runs the same held-out episodes of ``multi_scheduler_v1`` (same seeds, so differences are paired):

- ``hmarl`` / ``independent`` / ``centralised``: trained actors (:mod:`agents.methods.hmarl.agent`) — MAPPO with a central critic,
  independent learners, and one scheduler over the merged queue (the env with ``num_agents=1``);
- ``fifo-closest``, ``fifo-consolidate`` and their ``+backfill`` variants: per-agent heuristics in the env
  (:class:`~gpusched_envs.multi_agent.multi_scheduler.HeuristicMultiAgent`);
- ``sjf-consolidate+backfill``, ``sjf-closest+backfill``: clairvoyant per-agent heuristics (each agent runs the
  shortest of its oldest jobs that fits): the fair bar for actors trained with ``information="clairvoyant"``;
- ``tiresias-consolidate``, ``tiresias-closest``: Tiresias (2D-LAS, preemptive) as ONE scheduler over the merged
  queue on the same workload (``Simulator.run``); on a cluster of VC pools (``philly-vc``) that equals one Tiresias
  per VC; likewise ``srtf-consolidate`` (clairvoyant, preemptive) and ``sjf-consolidate`` (clairvoyant,
  non-preemptive with backfilling).

Every row says whether the scheduler reads the traced durations (``clairvoyant``). The leaderboard runs multi-agent
scenarios through the helpers at the end of this module (``marl-*`` agents, HMARL checkpoints).

Reported per scenario and scheduler: average JCT (mean over seeds, 95% bootstrap interval), the paired difference to
HMARL (mean and 95% interval), and the decision latency per scheduler: the wall time of one agent's decision from
its own observation (median over sampled decisions, batch of one — what a deployed scheduler computes), measured in
the same run as the heuristics' for reference (process CPU time; wall time also recorded). Scenarios:

- ``dc4``: the training data centre (4 racks × 2 servers × 4 GPUs, 4 agents), held-out Philly windows (days 85–105);
- ``dc16-K``: a generated 16-rack data centre (16 × 2 × 4 GPUs) with K = 2, 4, 8, 16 agents (scaling; the actor
  trained on ``dc4`` runs unchanged: its weights do not depend on the cluster size);
- ``philly-vc``: the Philly VC pools with one agent per VC (11 agents), Philly windows of the held-out days.

Outputs (``--out``): ``marl.json`` (everything, per seed) and ``marl.md`` (tables), written atomically.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from gpusched_lab.evaluate.agents import AgentSpecError, EvalAgent
from gpusched_lab.evaluate.episodes import finish_metrics
from gpusched_lab.evaluate.registry import register_agent_kind
from gpusched_lab.evaluate.report.files import machine_description, write_json, write_text
from gpusched_lab.evaluate.report.tables import bracket_text, md_row, md_rule
from gpusched_lab.evaluate.scenarios import MARL_ENV_ID, file_digest, make_marl_env, python_sources_digest
from gpusched_lab.evaluate.seeds import parse_seeds as parse_seed_list
from gpusched_lab.evaluate.stats import bootstrap_ci

from gpusched_envs.errors import USER_ERRORS
from gpusched_envs.multi_agent.multi_scheduler import HeuristicMultiAgent
from gpusched_envs.policies import make_policy
from gpusched_envs.sim import Simulator
from gpusched_envs.validation import Float, Int

HELDOUT = "philly-windows:first=85,last=105,jobs={jobs},load={load}"
SCENARIOS: dict[str, dict] = {
    "dc4": dict(num_agents=4, cluster="datacenter:racks=4,servers=2,gpus=4", jobs=120),
    **{
        f"dc16-{k}": dict(num_agents=k, cluster="datacenter:racks=16,servers=2,gpus=4", jobs=200)
        for k in (2, 4, 8, 16)
    },
    "philly-vc": dict(num_agents=None, cluster="philly-vc", jobs=300),
}
HEURISTICS = ("fifo-closest", "fifo-consolidate", "fifo-closest+backfill", "fifo-consolidate+backfill")
# clairvoyant (read the traced durations, as the shipped env config's agents do): the fair bar for HMARL
CLAIRVOYANT_HEURISTICS = ("sjf-consolidate+backfill", "sjf-closest+backfill")
CENTRAL_HEURISTICS = ("tiresias-consolidate", "tiresias-closest", "srtf-consolidate", "sjf-consolidate")
# per-agent preemptive heuristics (the env with preempt=PREEMPT_SLOTS running slots per agent): each agent preempts
# only its own jobs; with +coop every agent applies one priority rule to the jobs of all and yields its own
PREEMPTIVE_HEURISTICS = (
    "srtf-consolidate+backfill+preempt",
    "tiresias-consolidate+backfill+preempt",
    "srtf-consolidate+backfill+preempt+coop",
    "tiresias-consolidate+backfill+preempt+coop",
)
PREEMPT_SLOTS = 8
PREEMPT_MIN_RUN = 300.0  # seconds a job runs before it may be preempted (as train/configs/hmarl.yaml)
CLAIRVOYANT = {
    *CLAIRVOYANT_HEURISTICS,
    "srtf-consolidate",
    "sjf-consolidate",
    *(h for h in PREEMPTIVE_HEURISTICS if h.startswith("srtf")),
}
ENV_SETTING_KEYS = ("heads", "window", "preempt", "min_run", "queue_order", "coordination", "information")
"""env kwargs a trained actor brings to its evaluation episodes (its action and observation setting)."""
LEARNED = {
    "hmarl": "checkpoints/hmarl_dc4",
    "independent": "checkpoints/hmarl_independent_dc4",
    "centralised": "checkpoints/hmarl_centralised_dc4",
    # the same recipe trained on the 16-rack data centre with 4 agents (train/configs/hmarl_dc16.yaml)
    "hmarl-dc16": "checkpoints/hmarl_dc16",
    # the first recipe (no preemption, 3 oldest jobs, no coordination features), kept for comparison
    "hmarl-nopreempt": "checkpoints/hmarl_dc4_nopreempt",
}

app = typer.Typer(help=__doc__.splitlines()[0], add_completion=False, no_args_is_help=False)


def scenario_kwargs(name: str, heads: int = 8, jobs: int | None = None, load: float = 1.0) -> dict:
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    if not load > 0:
        raise ValueError(f"--load must be > 0, got {load}")
    sc = SCENARIOS[name]
    kw = dict(
        cluster=sc["cluster"],
        workload=HELDOUT.format(jobs=jobs or sc["jobs"], load=load),
        heads=heads,
        window=max(8, heads),
    )
    if sc["num_agents"] is not None:
        kw["num_agents"] = sc["num_agents"]
    return kw


def heuristic(name: str):

    return HeuristicMultiAgent.from_name(name)


def actor_env_kwargs(kw: dict, meta: dict) -> dict:
    """A scenario's env kwargs for a trained actor: the action and observation setting it was trained with
    (``ENV_SETTING_KEYS``; older checkpoints: clairvoyant), and one agent on the merged queue for the centralised
    scheduler."""
    trained = meta.get("env_kwargs") or {}
    out = {**kw, **{k: trained[k] for k in ENV_SETTING_KEYS if k in trained}}
    out.setdefault("information", "clairvoyant")
    if trained.get("num_agents") == 1:
        out.update(num_agents=1, routing="round_robin")
    return out


def heuristic_env_kwargs(name: str, kw: dict) -> dict:
    """The scenario's env kwargs for a per-agent heuristic: a preemptive one gets ``PREEMPT_SLOTS`` running slots
    and its own order as the env's queue order (so its heads are its first jobs in that order)."""
    h = heuristic(name)
    if not h.preempt:
        return dict(kw)
    order = {"srtf": "srtf", "tiresias": "las"}.get(h.order, "fifo")
    info = "clairvoyant" if h.clairvoyant else "non-clairvoyant"
    return {
        **kw,
        "preempt": PREEMPT_SLOTS,
        "min_run": PREEMPT_MIN_RUN,
        "queue_order": order,
        "information": info,
    }


def run(env, name: str, policy, seed: int, latency_every: int = 5) -> dict:
    """One episode; every ``latency_every`` steps one random agent's decision is timed alone."""
    obs, _ = env.reset(seed=int(seed))
    rng = np.random.default_rng(seed)
    lat: list[float] = []
    steps, infos = 0, {}
    while env.agents:
        if steps % latency_every == 0:
            a = env.possible_agents[int(rng.integers(len(env.possible_agents)))]
            one = {a: obs[a]}
            w0, c0 = time.perf_counter(), time.process_time()
            policy(env, one)
            lat.append((time.process_time() - c0, time.perf_counter() - w0))
        obs, _, _, _, infos = env.step(policy(env, obs))
        steps += 1
    m = infos[env.possible_agents[0]]["metrics"]
    return {
        "seed": int(seed),
        "avg_jct": float(m["avg_jct"]),
        "lower_bound_avg_jct": float(m["lower_bound_avg_jct"]),
        "jobs": int(m["jobs"]),
        "steps": steps,
        "latency_s": lat,
    }


def run_central(env, name: str, seed: int) -> dict:
    """``POLICY-PLACEMENT`` (``tiresias-consolidate``, ``srtf-consolidate``, ...) as one scheduler over the merged
    queue on the episode's workload (``Simulator.run``)."""

    env.reset(seed=int(seed))
    sim = env.sim
    fresh = Simulator(sim.cluster, sim.workload, sim.config)
    t0 = time.perf_counter()
    policy, _, placement = name.partition("-")
    m = fresh.run(make_policy(policy, placement))
    return {
        "seed": int(seed),
        "avg_jct": float(m["avg_jct"]),
        "lower_bound_avg_jct": float(m["lower_bound_avg_jct"]),
        "jobs": int(m["jobs"]),
        "run_s": time.perf_counter() - t0,
        "latency_s": [],
    }


def evaluate_scenario(
    name: str,
    seeds: list[int],
    schedulers: list[str],
    checkpoints: dict,
    log=print,
    jobs: int | None = None,
    load: float = 1.0,
    heads: int = 8,
) -> dict:
    from gpusched_lab.agents.methods.hmarl.agent import load as load_actor
    from gpusched_lab.agents.methods.hmarl.agent import make_env

    kw = scenario_kwargs(name, heads=heads, jobs=jobs, load=load)
    results: dict[str, dict] = {}
    bound: list[float] | None = None
    for sched in schedulers:
        if sched in checkpoints:
            path = checkpoints[sched]
            if not Path(path).exists():
                log(f"  {sched}: no checkpoint at {path}, skipped")
                continue
            policy = load_actor(path)
            env = make_env(actor_env_kwargs(kw, policy.meta))
            eps = [run(env, sched, policy, s) for s in seeds]
        elif sched in CENTRAL_HEURISTICS:
            env = make_env(kw)
            eps = [run_central(env, sched, s) for s in seeds]
        else:
            env = make_env(heuristic_env_kwargs(sched, kw))
            eps = [run(env, sched, heuristic(sched), s) for s in seeds]
        jct = [e["avg_jct"] for e in eps]
        if bound is None:  # the workload's (every scheduler's episodes finish every job of the same windows)
            bound = [e["lower_bound_avg_jct"] for e in eps]
        mean, lo, hi = bootstrap_ci(jct)
        lat = np.asarray([x for e in eps for x in e["latency_s"]]).reshape(-1, 2)  # (CPU s, wall s)
        has = len(lat) > 0
        results[sched] = {
            "avg_jct": mean,
            "ci95": [lo, hi],
            "per_seed": jct,
            "latency_ms_median": float(np.median(lat[:, 0]) * 1e3) if has else None,
            "latency_ms_p95": float(np.percentile(lat[:, 0], 95) * 1e3) if has else None,
            "latency_wall_ms_median": float(np.median(lat[:, 1]) * 1e3) if has else None,
            "num_agents": len(env.possible_agents),
            "clairvoyant": bool(
                sched in CLAIRVOYANT
                if sched not in checkpoints
                else getattr(env, "information", "") == "clairvoyant"
            ),
        }
        log(
            f"  {name} {sched}: avg JCT {mean:,.0f} s [{lo:,.0f}, {hi:,.0f}]"
            + (f", decision {results[sched]['latency_ms_median']:.2f} ms CPU" if has else "")
        )
    if "hmarl" in results:
        ref = np.asarray(results["hmarl"]["per_seed"])
        for r in results.values():
            diff = np.asarray(r["per_seed"]) - ref  # > 0: HMARL is better
            m, lo, hi = bootstrap_ci(diff)
            r["minus_hmarl"] = {"mean": m, "ci95": [lo, hi]}
    out = {"env_kwargs": kw, "seeds": seeds, "results": results}
    if bound is not None:
        mean, lo, hi = bootstrap_ci(bound)
        out["lower_bound"] = {"avg_jct": mean, "ci95": [lo, hi], "per_seed": bound}
        for r in results.values():
            r["over_bound"] = float(r["avg_jct"] / mean)
    return out


MARL_COLUMNS = (
    "scheduler",
    "agents",
    "sees durations",
    "avg JCT (s)",
    "95% CI",
    "× bound",
    "Δ vs HMARL (s)",
    "decision latency (ms CPU)",
)


def markdown(report: dict) -> str:
    lines = [
        "# Multi-agent evaluation (HMARL)",
        "",
        f"Machine: {report['machine']}. Seeds: held-out Philly windows (days 85–105 of the trace), "
        "offered load as in each scenario's workload (`load=`) on its cluster's GPUs. Avg JCT: mean over seeds "
        "[95% bootstrap interval]; "
        "Δ vs HMARL: paired difference (positive = HMARL lower) [95% interval]; decision latency: median process CPU "
        "time of one scheduler's decision from its own observation (batch of one; wall time, inflated by the other "
        "jobs on the shared machine, is in marl.json); the heuristics' figures in the same run are the reference. "
        "Tiresias runs as one preemptive scheduler over the merged queue (a batch run: no per-decision timing), as do "
        "SRTF (preemptive) and SJF (non-preemptive, backfilling); `sees durations`: the scheduler reads the traced "
        "job durations (clairvoyant: SJF, SRTF, and the learned actors trained with `information: clairvoyant`) — "
        "the fair bar for a clairvoyant learner is the best of those rows. *Lower bound*: the mean of the jobs' ideal "
        "runtimes (no queueing, no preemption, the fastest placement); no scheduler goes below it. `× bound`: a "
        "scheduler's avg JCT ÷ the bound, so a scheduler at 1.10 can be beaten by at most 1 − 1/1.10 = 9%.",
        "",
    ]
    for name, sc in report["scenarios"].items():
        lines += [
            f"## {name}",
            "",
            f"env: `{json.dumps(sc['env_kwargs'])}`, seeds {sc['seeds']}",
            "",
            md_row(MARL_COLUMNS),
            md_rule("lrlrlrlr"),
        ]
        for sched, r in sorted(sc["results"].items(), key=lambda kv: kv[1]["avg_jct"]):
            d = r.get("minus_hmarl")
            dtxt = bracket_text(d["mean"], *d["ci95"], fmt="+,.0f") if d and sched != "hmarl" else ""
            lat = f"{r['latency_ms_median']:.2f}" if r["latency_ms_median"] is not None else "n/a (batch run)"
            seen = {True: "yes", False: "no"}.get(r.get("clairvoyant"), "?")
            over = f"{r['over_bound']:.3f}" if "over_bound" in r else ""
            ci = f"[{r['ci95'][0]:,.0f}, {r['ci95'][1]:,.0f}]"
            lines.append(md_row([sched, r["num_agents"], seen, f"{r['avg_jct']:,.0f}", ci, over, dtxt, lat]))
        if "lower_bound" in sc:
            b = sc["lower_bound"]
            lines.append(
                f"| *lower bound* | — | — | {b['avg_jct']:,.0f} | [{b['ci95'][0]:,.0f}, {b['ci95'][1]:,.0f}] | 1.000 | "
                "| |"
            )
        lines.append("")
    return "\n".join(lines)


def parse_seeds(text: str) -> list[int]:
    """``--seeds``: a range ``A-B`` or a list ``A,B,C`` of integers >= 0 (:func:`gpusched_lab.evaluate.seeds.parse_seeds`)."""
    return list(parse_seed_list(text, single_form=True))


@app.callback(invoke_without_command=True)
def marl(
    scenarios: Annotated[
        str, typer.Option("--scenarios", help=f"Comma-separated: {', '.join(SCENARIOS)}.")
    ] = "dc4",
    seeds: Annotated[str, typer.Option("--seeds", help="Held-out seeds, 'A-B' or 'A,B'.")] = "20000-20009",
    schedulers: Annotated[
        str, typer.Option("--schedulers", help="Comma-separated scheduler names.")
    ] = ",".join(
        [*LEARNED, *HEURISTICS, *CLAIRVOYANT_HEURISTICS, *CENTRAL_HEURISTICS, *PREEMPTIVE_HEURISTICS]
    ),
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", parser=Int(min=1), help="Jobs per episode (default: per scenario)."),
    ] = None,
    load: Annotated[
        float,
        typer.Option(
            "--load",
            parser=Float(min=0.0, min_open=True),
            help="Offered load of the held-out windows on the cluster's GPUs (> 0).",
        ),
    ] = 1.0,
    heads: Annotated[
        int,
        typer.Option(
            "--heads",
            parser=Int(min=1, cap="heads"),
            help="Waiting jobs each per-agent heuristic may choose among (trained actors use their own setting).",
        ),
    ] = 8,
    out: Annotated[Path, typer.Option("--out", help="Output folder (marl.json, marl.md).")] = Path(
        "results/marl"
    ),
    checkpoint: Annotated[
        list[str] | None,
        typer.Option(
            "--checkpoint",
            help="NAME=FOLDER: a trained actor (repeatable; defaults: checkpoints/hmarl*_dc4).",
        ),
    ] = None,
) -> None:
    """Evaluate HMARL against independent learners, a centralised scheduler and per-agent heuristics."""

    try:
        names = [s for s in scenarios.split(",") if s]
        for n in names:
            scenario_kwargs(n, load=load)
        seed_list = parse_seeds(seeds)
        ckpts = dict(LEARNED)
        for item in checkpoint or []:
            key, sep, path = item.partition("=")
            if not sep:
                raise ValueError(f"--checkpoint takes NAME=FOLDER, got {item!r}")
            ckpts[key] = path
        scheds = [s for s in schedulers.split(",") if s]
        known = (
            set(ckpts)
            | set(HEURISTICS)
            | set(CLAIRVOYANT_HEURISTICS)
            | set(CENTRAL_HEURISTICS)
            | set(PREEMPTIVE_HEURISTICS)
        )
        bad = [s for s in scheds if s not in known]
        if bad:
            raise ValueError(f"--schedulers: unknown {bad}; known: {', '.join(sorted(known))}")
        import torch

        torch.set_num_threads(1)
        report = {"machine": f"{machine_description()} (CPU, torch 1 thread)", "scenarios": {}}
        for n in names:
            typer.echo(f"{n}:", err=True)
            report["scenarios"][n] = evaluate_scenario(
                n,
                seed_list,
                scheds,
                ckpts,
                log=lambda m: typer.echo(m, err=True),
                jobs=jobs,
                load=load,
                heads=heads,
            )
            write_json(out / "marl.json", report, indent=2)
            write_text(out / "marl.md", markdown(report) + "\n")
    except USER_ERRORS as exc:
        from gpusched_envs.cli import one_line

        typer.echo(f"error: {one_line(exc)}", err=True)
        raise typer.Exit(2) from None
    typer.echo(markdown(report))


# ---------------------------------------------------------------------------------------------- leaderboard
# ``gpusched leaderboard`` runs multi-agent scenarios (``env_id: <this>`` in a suite, e.g. ``standard``'s
# ``dc4-multi-agent``): the env is the PettingZoo ParallelEnv; the merged-queue heuristics (fifo, sjf, srtf, tiresias,
# gandiva) run on a fresh simulator of its workload as on any scenario, the per-agent heuristics (``marl-...``) and
# HMARL checkpoints (``checkpoints/hmarl*``) in the env.
LEADERBOARD_AGENTS = (
    "marl-fifo-consolidate+backfill",
    "marl-sjf-consolidate+backfill",
    "marl-srtf-consolidate+backfill+preempt+coop",
)
"""Leaderboard specs of the per-agent heuristics (``marl-`` + a HeuristicMultiAgent name); multi-agent scenarios
only."""


def _episode_metrics(env, policy, seed: int) -> dict:
    r = run(env, "", policy, seed, latency_every=10**9)
    metrics = dict(env.sim.metrics())
    metrics.update(steps=r["steps"], agents=len(env.possible_agents))
    return finish_metrics(metrics, env.sim)


def is_marl_checkpoint(path: str | Path) -> bool:
    """A checkpoint folder (or its model.pt) whose meta.json names the multi-agent env."""
    p = Path(path)
    meta = (p if p.is_dir() else p.parent) / "meta.json"
    try:
        return json.loads(meta.read_text()).get("env_id") == MARL_ENV_ID
    except (OSError, ValueError, AttributeError):
        return False


def _applies(scenario) -> str | None:
    return None if scenario.env_id == MARL_ENV_ID else f"a multi-agent scheduler (runs on {MARL_ENV_ID})"


class MarlHeuristicEvalAgent(EvalAgent):
    """A per-agent heuristic (``marl-`` + a :class:`HeuristicMultiAgent` name) in the multi-agent env."""

    kind = "marl-heuristic"

    def __init__(self, spec: str):
        try:
            self.heuristic = HeuristicMultiAgent.from_name(spec[len("marl-") :])
        except ValueError as exc:
            raise AgentSpecError(str(exc)) from None
        super().__init__(spec, spec)

    def identity(self) -> dict:
        return {"kind": self.kind, "heuristic": self.heuristic.name}

    def applies_to(self, scenario) -> str | None:
        return _applies(scenario)

    def run_episode(self, scenario, seed: int) -> dict:
        env_kw = heuristic_env_kwargs(self.heuristic.name, scenario.env_kwargs)
        return _episode_metrics(make_marl_env(env_kw), self.heuristic, seed)


class HMARLEvalAgent(EvalAgent):
    """A trained HMARL actor (a checkpoint folder, or its model.pt) in the multi-agent env."""

    kind = "marl-checkpoint"

    def __init__(self, spec: str):
        self.folder = Path(spec) if Path(spec).is_dir() else Path(spec).parent
        super().__init__(spec, f"ckpt:{self.folder.name}")
        self._policy = None

    def identity(self) -> dict:
        from gpusched_lab.agents.methods import hmarl

        return {
            "kind": self.kind,
            "files": file_digest(self.folder),
            "code": python_sources_digest(Path(hmarl.__file__).parent),  # every module of the package
        }

    def applies_to(self, scenario) -> str | None:
        return _applies(scenario)

    def _load(self):
        import torch
        from gpusched_lab.agents.methods.hmarl.agent import load

        if self._policy is None:
            torch.set_num_threads(1)
            self._policy = load(self.folder)
        return self._policy

    def check_loadable(self) -> None:
        from gpusched_lab.agents.checkpoint import CheckpointError

        try:
            self._load()
        except (CheckpointError, OSError) as exc:
            raise AgentSpecError(str(exc)) from None

    def run_episode(self, scenario, seed: int) -> dict:
        self._load()
        env_kw = actor_env_kwargs({**scenario.env_kwargs, "obs_mode": "graph"}, self._policy.meta)
        return _episode_metrics(make_marl_env(env_kw), self._policy, seed)


def marl_eval_agent(spec: str) -> EvalAgent:
    """The leaderboard agent of ``marl-<per-agent heuristic>`` (``marl-sjf-consolidate+backfill``) or of an HMARL
    checkpoint folder; both run only on multi-agent scenarios."""
    return MarlHeuristicEvalAgent(spec) if spec.startswith("marl-") else HMARLEvalAgent(spec)


def _is_marl_checkpoint_spec(spec: str) -> bool:
    return Path(spec).exists() and is_marl_checkpoint(spec)


register_agent_kind(
    "marl",
    marl_eval_agent,
    prefix="marl-",
    matches=_is_marl_checkpoint_spec,
    group_agents=LEADERBOARD_AGENTS,
)


if __name__ == "__main__":
    app()
