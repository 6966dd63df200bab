"""``gpusched dag-bench``: WORL-RTGS and its baselines on DAG workloads.

For every ``--dag`` spec (any ``dag:`` spec of :func:`gpusched_envs.workloads.dag.load_dag`, or a DAG file the
workload loaders read) and ``--instances`` draws of it, every agent of ``--agents`` runs with each of ``--num-seeds``
seeds on the GPU set of ``--cluster`` / ``--gpus`` (the same GPUs ``DAGSchedule-v1`` uses). Per DAG and agent the
output has the mean and standard deviation of the makespan over seeds (the std, averaged over instances, is the
run-to-run stability the paper compares), the gap to the CP-SAT optimum when CP-SAT proves one, else to the best
lower bound, the paired gap to HEFT, and wall time. ``--json FILE`` writes all of it; a Markdown table is printed
and written beside the JSON (``FILE.md``) or to ``--markdown``.

Agents (comma list; ``all`` = every one): ``heft``, ``cpop``, ``random`` (one random plan), ``ga``, ``pso``,
``woa`` (random initial population), ``ga+list``, ``pso+list``, ``woa+list`` (the same with HEFT's and CPOP's plans
in the initial population, for a fair comparison with seeded WORL-RTGS), ``ls`` (the critical-path local search
of :mod:`agents.methods.worl_rtgs.local_search` from HEFT's and CPOP's plans with the whole budget: WORL-RTGS's refinement step
alone), ``ddqn`` (best of the shipped DDQN
generator's plans: the greedy one and ``--planner-plans - 1`` samples; with ``--planner-plans 1`` the greedy plan
is rolled out once per DAG and shared by all seeds), ``ppo`` (the shipped PPO-GNN list scheduler, greedy),
``worl-rtgs`` (WOA + DDQN injection + running-time-gap strategy; its initial population also holds HEFT's and
CPOP's plans unless ``--no-seed-list``, so it is never worse than either; ``--refine`` of its budget, 0.8 by
default, goes to the local-search refinement of its best whale), ``cpsat``
(OR-Tools CP-SAT, DAGs of at most ``--cpsat-max-tasks`` tasks, ``--time-limit`` seconds per instance, run once per
instance) and ``lower-bound`` (analytic). Metaheuristics share one budget: ``--population`` × ``--iterations``
plan evaluations.

CCR. The generators' CCR is defined at a 10 GB/s reference link; ``--ccr-at gpus`` (default) rescales the bytes of
synthetic DAGs (random, alibaba, tpch) so their CCR holds on the chosen GPUs' links (hetero64's spread GPUs talk
over 0.12–1.2 GB/s links, which would otherwise multiply the CCR by up to 80). Measured DAGs keep their bytes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from gpusched_lab.agents.common import set_torch_threads
from gpusched_lab.evaluate.agents import AgentSpecError, EvalAgent
from gpusched_lab.evaluate.registry import register_agent_kind
from gpusched_lab.evaluate.report.files import machine_description, write_json, write_text
from gpusched_lab.evaluate.report.tables import md_row, md_rule
from gpusched_lab.evaluate.scenarios import file_digest

from gpusched_envs.envs.dag_schedule import SYNTHETIC_CCR_KINDS, DAGScheduleEnv, ccr_at_gpus
from gpusched_envs.policies.dag import cpop, heft
from gpusched_envs.sim.dag_eval import evaluate_plan
from gpusched_envs.validation import Float, Int, ValidationError, check_cap, check_float, check_int
from gpusched_envs.workloads.dag import load_alibaba2018, load_dag

AGENTS = (
    "heft",
    "cpop",
    "random",
    "ga",
    "pso",
    "woa",
    "ga+list",
    "pso+list",
    "woa+list",
    "ls",
    "ddqn",
    "ppo",
    "worl-rtgs",
    "cpsat",
    "lower-bound",
)
SEARCHERS = ("ga", "pso", "woa", "ga+list", "pso+list", "woa+list", "ls", "worl-rtgs")
PLANNERS = {"ddqn": "ddqn_dagschedule_gnn", "ppo": "ppo_dagschedule_gnn"}
# WORL-RTGS's budget share for the refinement, chosen on draw 1 of the README's random DAGs (draw 0 is what the
# README reports), 4 seeds: 0.5 was worse than 0.8 on 4 of 6 DAGs; 0.95 was at most 0.3 points better on 3 and equal
# on 3, and 0.8 keeps WOA running 12 of the 60 iterations
DEFAULT_REFINE = 0.8


class DagBenchError(ValueError):
    """Bad dag-bench input (one line naming the argument)."""


def parse_agents(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if "all" in names:
        return list(AGENTS)
    bad = [n for n in names if n not in AGENTS]
    if bad or not names:
        raise DagBenchError(
            f"--agents: unknown agent(s) {', '.join(bad) or '(none)'}; valid: {', '.join(AGENTS)}"
        )
    return list(dict.fromkeys(names))


def load_instance(spec: str, instance: int, env, ccr_at: str):
    """The DAG of ``spec`` (draw ``instance``), CCR-rescaled to the env's GPUs when asked."""

    if spec.startswith("dag:"):
        dag = load_dag(spec, seed=instance)
        kind = spec.split(":")[1].strip().lower()
    else:
        path = Path(spec)
        if not path.exists():
            raise DagBenchError(f"--dag {spec!r}: neither a 'dag:' spec nor an existing file")

        dags = load_alibaba2018(path)
        if not dags:
            raise DagBenchError(f"--dag {spec!r}: the file holds no DAG job")
        dag = dags[instance % len(dags)]
        kind = "file"
    if ccr_at == "gpus" and kind in SYNTHETIC_CCR_KINDS:
        dag = ccr_at_gpus(dag, env.bandwidth)
    return dag


class Instance:
    """One DAG on one GPU set, with the plans several agents share (HEFT, the planners' plans)."""

    def __init__(self, spec: str, index: int, dag, env, args: dict):
        from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import PlanSpace

        self.spec, self.index, self.dag, self.env, self.args = spec, index, dag, env, args
        self.speed, self.bandwidth, self.gpu_types = env.speed, env.bandwidth, env.gpu_types
        self.space = lambda: PlanSpace(dag, self.speed, self.bandwidth, gpu_types=self.gpu_types)
        self._planner_plans: dict[tuple[str, int], list] = {}
        self._cpsat = None
        self._heft = None
        self._list = None

    def heft(self):
        if self._heft is None:
            self._heft = heft(self.dag, self.speed, self.bandwidth, gpu_types=self.gpu_types)
        return self._heft

    def list_plans(self):
        """HEFT's and CPOP's plans (the list-scheduling seeds)."""
        if self._list is None:
            from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import list_scheduling_plans

            self._list = list_scheduling_plans(self.dag, self.speed, self.bandwidth, gpu_types=self.gpu_types)
        return self._list

    def planner_plans(self, which: str, seed: int, count: int):
        key = (which, seed if count > 1 else 0, count)  # one plan: the greedy one, the same for every seed
        if key not in self._planner_plans:
            planner = _planner(which, self.args.get("checkpoints"))
            self._planner_plans[key] = planner.plans(
                self.dag,
                cluster=self.args["cluster"],
                gpus=self.args["gpus"],
                count=count,
                temperature=self.args["temperature"],
                seed=seed,
            )
        return self._planner_plans[key]

    def cpsat(self):
        if self._cpsat is None:
            from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import cpsat_schedule

            self._cpsat = cpsat_schedule(
                self.dag,
                self.speed,
                self.bandwidth,
                gpu_types=self.gpu_types,
                time_limit=self.args["time_limit"],
            )
        return self._cpsat


_PLANNERS: dict[str, object] = {}


def _planner(which: str, checkpoints: str | None):
    if which not in _PLANNERS:
        from gpusched_lab.agents.methods.worl_rtgs.planner import SHIPPED, PolicyPlanner

        folder = Path(checkpoints) if checkpoints else SHIPPED
        path = folder / PLANNERS[which]
        if not (path / "meta.json").exists():
            raise DagBenchError(
                f"--agents {which}: no checkpoint at {path} (train: scripts/data/train_dag_planner.py)"
            )
        _PLANNERS[which] = PolicyPlanner(path)
    return _PLANNERS[which]


def run_agent(name: str, inst: Instance, seed: int) -> dict:
    """``{"makespan": float, ...}`` of one agent on one instance with one seed."""
    return agent_plan(name, inst, seed)[0]


def agent_plan(name: str, inst: Instance, seed: int) -> tuple[dict, tuple | None]:
    """One agent on one instance with one seed: its record (``{"makespan": float, ...}``, or ``{"skipped": why}``)
    and the ``(assignment, priority)`` plan it chose (None for the lower bound and a skipped run)."""
    from gpusched_lab.agents.methods.worl_rtgs.agent import worl_rtgs
    from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import (
        genetic_algorithm,
        lower_bound,
        particle_swarm,
        random_search,
    )
    from gpusched_lab.agents.methods.worl_rtgs.woa import whale_optimization

    a = inst.args
    budget = {"population": a["population"], "iterations": a["iterations"], "seed": seed}
    ev = lambda plan: float(  # noqa: E731
        evaluate_plan(inst.dag, inst.speed, inst.bandwidth, *plan, gpu_types=inst.gpu_types)
    )

    def searched(r) -> tuple[dict, tuple]:
        return {"makespan": r.makespan}, (r.assignment, r.priority)

    if name == "heft":
        plan = inst.heft()
        return {"makespan": ev(plan)}, plan
    if name == "cpop":
        plan = cpop(inst.dag, inst.speed, inst.bandwidth, gpu_types=inst.gpu_types)
        return {"makespan": ev(plan)}, plan
    if name == "random":
        return searched(random_search(inst.space(), population=1, iterations=1, seed=seed))
    if name == "ga":
        return searched(genetic_algorithm(inst.space(), **budget))
    if name == "pso":
        return searched(particle_swarm(inst.space(), **budget))
    if name == "woa":
        return searched(whale_optimization(inst.space(), **budget))
    if name in ("ga+list", "pso+list", "woa+list"):
        search = {"ga+list": genetic_algorithm, "pso+list": particle_swarm, "woa+list": whale_optimization}[
            name
        ]
        return searched(search(inst.space(), seeds=inst.list_plans(), **budget))
    if name == "ls":
        from gpusched_lab.agents.methods.worl_rtgs.local_search import local_search

        total = a["population"] * a["iterations"]
        return searched(local_search(inst.space(), inst.list_plans(), budget=total, seed=seed))
    if name == "ddqn":
        plans = inst.planner_plans("ddqn", seed, a["planner_plans"])
        spans = [ev(p) for p in plans]
        best = min(range(len(plans)), key=spans.__getitem__)
        return {"makespan": spans[best], "greedy_makespan": spans[0]}, plans[best]
    if name == "ppo":
        plan = inst.planner_plans("ppo", 0, 1)[0]
        return {"makespan": ev(plan)}, plan
    if name == "worl-rtgs":
        plans = list(inst.planner_plans("ddqn", seed, a["planner_plans"]))
        seeds = inst.list_plans() if a.get("seed_list", True) else None
        res = worl_rtgs(
            inst.space(),
            plans,
            injection_rate=a["injection_rate"],
            list_plans=seeds,
            refine=a.get("refine", DEFAULT_REFINE),
            **budget,
        )
        st = res.stats
        out = {"makespan": res.makespan, "injected": st["injected"], "steered": st["steered"]}
        if "refined_from" in st:
            out["before_refine"] = st["refined_from"]
        return out, (res.assignment, res.priority)
    if name == "cpsat":
        if inst.dag.num_tasks > a["cpsat_max_tasks"]:
            return {"skipped": f"more than --cpsat-max-tasks={a['cpsat_max_tasks']} tasks"}, None
        r = inst.cpsat()
        rec = {"makespan": r.makespan, "optimal": r.optimal, "bound": r.lower_bound, "status": r.status}
        return rec, (r.assignment, r.priority)
    if name == "lower-bound":
        return {"makespan": lower_bound(inst.dag, inst.speed, inst.bandwidth, gpu_types=inst.gpu_types)}, None
    raise DagBenchError(f"unknown agent {name!r}")


def scenario_args(env) -> dict:
    """The settings a DAG agent runs with on a leaderboard scenario's env (after reset): ``dag-bench``'s defaults
    on the env's cluster (the env's GPU subset when it uses one)."""
    u = env.unwrapped
    return {
        "cluster": u.cluster,
        "gpus": u.num_gpus if len(u.gpu_ids) < u.cluster.num_gpus else None,
        "time_limit": 10.0,
        "population": 40,
        "iterations": 60,
        "injection_rate": 0.1,
        "refine": DEFAULT_REFINE,
        "planner_plans": 8,
        "temperature": 0.5,
        "cpsat_max_tasks": 30,
        "checkpoints": None,
    }


def summarise(rows: list[dict], agents: list[str]) -> list[dict]:
    """Per DAG spec and agent: mean/std over seeds (std averaged over instances), gaps to HEFT and the reference."""
    out = []
    specs = list(dict.fromkeys(r["dag"] for r in rows))
    for spec in specs:
        mine = [r for r in rows if r["dag"] == spec]
        instances = sorted({r["instance"] for r in mine})
        ref_by_inst, heft_by_inst, ref_kind = {}, {}, {}
        for i in instances:
            cell = {r["agent"]: r for r in mine if r["instance"] == i and r["seed"] == r["first_seed"]}
            lb = cell.get("lower-bound", {}).get("makespan")
            cp = cell.get("cpsat", {})
            if cp.get("optimal"):
                ref_by_inst[i], ref_kind[i] = cp["makespan"], "optimum"
            else:
                bounds = [b for b in (lb, cp.get("bound")) if b is not None]
                if bounds:
                    ref_by_inst[i], ref_kind[i] = max(bounds), "lower bound"
            if "heft" in cell:
                heft_by_inst[i] = cell["heft"]["makespan"]
        for agent in agents:
            cells = [r for r in mine if r["agent"] == agent and r.get("makespan") is not None]
            if not cells:
                continue
            ms = np.array([c["makespan"] for c in cells])
            stds = [
                float(np.std([c["makespan"] for c in cells if c["instance"] == i]))
                for i in instances
                if any(c["instance"] == i for c in cells)
            ]
            vs_heft = [
                c["makespan"] / heft_by_inst[c["instance"]] - 1
                for c in cells
                if c["instance"] in heft_by_inst
            ]
            gap = [
                c["makespan"] / ref_by_inst[c["instance"]] - 1 for c in cells if c["instance"] in ref_by_inst
            ]
            kinds = sorted({ref_kind[c["instance"]] for c in cells if c["instance"] in ref_kind})
            out.append(
                {
                    "dag": spec,
                    "agent": agent,
                    "tasks": int(np.mean([c["tasks"] for c in cells])),
                    "runs": len(cells),
                    "makespan_mean": float(ms.mean()),
                    "makespan_std_over_seeds": float(np.mean(stds)),
                    "vs_heft_mean": float(np.mean(vs_heft)) if vs_heft else None,
                    "gap_to_reference_mean": float(np.mean(gap)) if gap else None,
                    "reference": "/".join(kinds) if kinds else None,
                    "optimal_proven": [bool(c.get("optimal")) for c in cells] if agent == "cpsat" else None,
                    "wall_s_mean": float(np.mean([c["wall_s"] for c in cells])),
                }
            )
    return out


def markdown_table(summary: list[dict], agents: list[str], meta: dict) -> str:
    """Rows: DAG specs; columns: agents; cells ``mean ± std`` of the makespan (seconds) and the gap to HEFT."""
    specs = list(dict.fromkeys(s["dag"] for s in summary))
    by = {(s["dag"], s["agent"]): s for s in summary}
    shown = [a for a in agents if any((d, a) in by for d in specs)]
    refine_note = (
        f" (WORL-RTGS: {meta['refine']:.0%} of them on the local-search refinement)"
        if "worl-rtgs" in shown and meta.get("refine")
        else ""
    )
    lines = [
        f"Makespan (s), mean ± std over {meta['seeds']} seeds (std: run-to-run, averaged over "
        f"{meta['instances']} instance(s)); in brackets the paired gap to HEFT. Cluster {meta['cluster']}, "
        f"{meta['gpus']} GPUs, CCR at {meta['ccr_at']}; searchers {meta['population']} x {meta['iterations']} plans"
        f"{refine_note}; CP-SAT {meta['time_limit']} s. Machine: {meta['machine']}.",
        "",
        md_row(["DAG (tasks)", *shown]),
        md_rule("l" * (len(shown) + 1)),
    ]
    for d in specs:
        any_row = next(s for s in summary if s["dag"] == d)
        cells = []
        for a in shown:
            s = by.get((d, a))
            if s is None:
                cells.append("–")
                continue
            std = s["makespan_std_over_seeds"]
            std = 0.0 if std <= 1e-9 * abs(s["makespan_mean"]) else std  # float noise of identical runs
            txt = f"{s['makespan_mean']:,.4g} ± {std:.2g}"
            if a == "cpsat" and s.get("optimal_proven"):
                txt += " ✓" if all(s["optimal_proven"]) else (" (✓ some)" if any(s["optimal_proven"]) else "")
            if s["vs_heft_mean"] is not None and a != "heft":
                txt += f" ({100 * s['vs_heft_mean']:+.1f}%)"
            cells.append(txt)
        lines.append(md_row([f"`{d}` ({any_row['tasks']})", *cells]))
    lines.append("")
    lines.append(
        "Gap to the reference (CP-SAT optimum where proven, else the best lower bound), mean over runs: "
        + "; ".join(
            f"`{s['dag']}` {s['agent']} {100 * s['gap_to_reference_mean']:+.1f}% ({s['reference']})"
            for s in summary
            if s["gap_to_reference_mean"] is not None and s["agent"] in ("worl-rtgs", "cpsat", "heft")
        )
    )
    return "\n".join(lines) + "\n"


def check_bench_args(
    dags: list[str],
    *,
    gpus: int | None,
    seeds: int,
    instances: int,
    time_limit: float,
    population: int,
    iterations: int,
    injection_rate: float,
    refine: float,
    planner_plans: int,
    cpsat_max_tasks: int,
) -> None:
    """Each setting in its range and the whole grid under the caps (:data:`gpusched_envs.validation.CAPS`), before
    a DAG is loaded: one line naming the flag (:class:`DagBenchError`)."""
    try:
        if gpus is not None:
            check_int(gpus, "--gpus", min=0)
        check_int(seeds, "--num-seeds", min=1, cap="seeds")
        check_int(instances, "--instances", min=1)
        check_float(time_limit, "--time-limit", min=0.0, min_open=True)
        check_int(population, "--population", min=1, cap="evaluations")
        check_int(iterations, "--iterations", min=1, cap="evaluations")
        check_float(injection_rate, "--injection-rate", min=0.0, max=1.0)
        if not (isinstance(refine, int | float) and 0.0 <= refine <= 1.0):  # NaN fails both comparisons
            raise ValidationError(f"--refine must lie in [0, 1], got {refine}")
        check_int(planner_plans, "--planner-plans", min=1, cap="episodes")
        check_int(cpsat_max_tasks, "--cpsat-max-tasks", min=0, cap="tasks")
        runs = max(1, len(dags)) * instances * seeds
        check_cap("evaluations", population * iterations, "--population × --iterations")
        check_cap("evaluations", runs, "--dag × --instances × --num-seeds")
        check_cap("evaluations", population * iterations * runs, "--population × --iterations × runs")
    except ValidationError as exc:
        raise DagBenchError(str(exc)) from None


def run_bench(
    dags: list[str],
    *,
    cluster: str = "hetero64",
    gpus: int | None = 8,
    agents: list[str] | None = None,
    seeds: int = 10,
    instances: int = 1,
    time_limit: float = 10.0,
    population: int = 40,
    iterations: int = 60,
    injection_rate: float = 0.1,
    refine: float = DEFAULT_REFINE,
    planner_plans: int = 8,
    temperature: float = 0.5,
    cpsat_max_tasks: int = 30,
    ccr_at: str = "gpus",
    checkpoints: str | None = None,
    seed_list: bool = True,
    progress=None,
) -> dict:
    """Run the grid; returns ``{"meta": ..., "rows": per-run records, "summary": per DAG x agent}``."""

    agents = list(agents or AGENTS)
    check_bench_args(
        dags,
        gpus=gpus,
        seeds=seeds,
        instances=instances,
        time_limit=time_limit,
        population=population,
        iterations=iterations,
        injection_rate=injection_rate,
        refine=refine,
        planner_plans=planner_plans,
        cpsat_max_tasks=cpsat_max_tasks,
    )
    if ccr_at not in ("gpus", "reference"):
        raise DagBenchError(f"--ccr-at must be 'gpus' or 'reference', got {ccr_at!r}")
    set_torch_threads(1)
    args = {
        "cluster": cluster,
        "gpus": gpus,
        "time_limit": time_limit,
        "population": population,
        "iterations": iterations,
        "injection_rate": injection_rate,
        "refine": refine,
        "planner_plans": planner_plans,
        "temperature": temperature,
        "cpsat_max_tasks": cpsat_max_tasks,
        "checkpoints": checkpoints,
        "seed_list": seed_list,
    }
    env = DAGScheduleEnv(cluster, "dag:random:n=4", gpus=gpus)  # the GPU set (speeds, links, types)
    rows = []
    for spec in dags:
        for i in range(instances):
            try:
                dag = load_instance(spec, i, env, ccr_at)
            except ValueError as exc:
                raise DagBenchError(f"--dag {spec!r}: {exc}") from None
            inst = Instance(spec, i, dag, env, args)
            for name in agents:
                deterministic = name in ("heft", "cpop", "ppo", "cpsat", "lower-bound")
                for s in range(seeds):
                    if deterministic and s > 0:
                        rows.append({**rows[-1], "seed": s})  # same answer for every seed (wall time: once)
                        continue
                    t0 = time.perf_counter()
                    rec = run_agent(name, inst, s)
                    rows.append(
                        {
                            "dag": spec,
                            "instance": i,
                            "tasks": dag.num_tasks,
                            "agent": name,
                            "seed": s,
                            "first_seed": 0,
                            "wall_s": time.perf_counter() - t0,
                            **rec,
                        }
                    )
                    if progress is not None:
                        progress(f"{spec} #{i} {name} seed {s}: {rec.get('makespan', rec.get('skipped'))}")
    meta = {
        "cluster": cluster,
        "gpus": env.num_gpus,
        "seeds": seeds,
        "instances": instances,
        "ccr_at": ccr_at,
        "population": population,
        "iterations": iterations,
        "injection_rate": injection_rate,
        "refine": refine,
        "planner_plans": planner_plans,
        "seed_list": seed_list,
        "time_limit": time_limit,
        "machine": machine_description(),
        "agents": agents,
        "dags": dags,
    }
    return {"meta": meta, "rows": rows, "summary": summarise(rows, agents)}


def dag_bench(
    dag: Annotated[
        list[str], typer.Option("--dag", help="DAG spec (dag:KIND:key=value,...) or file; repeatable.")
    ],
    cluster: Annotated[str, typer.Option(help="Cluster preset or YAML path.")] = "hetero64",
    gpus: Annotated[
        int, typer.Option(parser=Int(min=0), help="GPUs of the cluster, spread evenly (0: all).")
    ] = 8,
    agents: Annotated[str, typer.Option(help=f"Comma list of {', '.join(AGENTS)}, or all.")] = "all",
    seeds: Annotated[
        int,
        typer.Option(
            "--num-seeds", parser=Int(min=1, cap="seeds"), help="How many seeds per DAG instance (0 .. N-1)."
        ),
    ] = 10,
    instances: Annotated[
        int, typer.Option(parser=Int(min=1), help="Draws of each DAG spec (generators).")
    ] = 1,
    time_limit: Annotated[
        float, typer.Option(parser=Float(min=0.0, min_open=True), help="CP-SAT seconds per instance.")
    ] = 10.0,
    population: Annotated[
        int,
        typer.Option(parser=Int(min=1, cap="evaluations"), help="Population of GA / PSO / WOA / WORL-RTGS."),
    ] = 40,
    iterations: Annotated[
        int,
        typer.Option(parser=Int(min=1, cap="evaluations"), help="Iterations of GA / PSO / WOA / WORL-RTGS."),
    ] = 60,
    injection_rate: Annotated[
        float,
        typer.Option(
            parser=Float(min=0.0, max=1.0), help="WORL-RTGS: share of whales replaced by DDQN plans."
        ),
    ] = 0.1,
    refine: Annotated[
        float,
        typer.Option(
            parser=Float(),  # finite; [0, 1] is checked with the other settings (check_bench_args)
            help="WORL-RTGS: share of the budget for the local-search refinement (0: none).",
        ),
    ] = DEFAULT_REFINE,
    planner_plans: Annotated[
        int, typer.Option(parser=Int(min=1, cap="episodes"), help="DDQN plans per run (greedy + samples).")
    ] = 8,
    cpsat_max_tasks: Annotated[
        int, typer.Option(parser=Int(min=0, cap="tasks"), help="CP-SAT only on DAGs up to this many tasks.")
    ] = 30,
    ccr_at: Annotated[
        str, typer.Option(help="gpus: CCR holds on the GPU set's links | reference: 10 GB/s.")
    ] = "gpus",
    checkpoints: Annotated[str | None, typer.Option(help="Folder with the DDQN / PPO planners.")] = None,
    seed_list: Annotated[
        bool, typer.Option(help="WORL-RTGS: HEFT's and CPOP's plans in the initial population.")
    ] = True,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the results as JSON (and FILE.md).")
    ] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write the Markdown table here.")] = None,
    quiet: Annotated[bool, typer.Option(help="No per-run progress lines.")] = False,
) -> None:
    """WORL-RTGS and its baselines (HEFT, CPOP, random, GA, PSO, WOA, DDQN, PPO-GNN, CP-SAT, lower bound) on DAGs."""

    console = None if quiet else (lambda msg: typer.echo(msg, err=True))
    try:
        result = run_bench(
            dag,
            cluster=cluster,
            gpus=gpus or None,
            agents=parse_agents(agents),
            seeds=seeds,
            instances=instances,
            time_limit=time_limit,
            population=population,
            iterations=iterations,
            injection_rate=injection_rate,
            refine=refine,
            planner_plans=planner_plans,
            cpsat_max_tasks=cpsat_max_tasks,
            ccr_at=ccr_at,
            checkpoints=checkpoints,
            seed_list=seed_list,
            progress=console,
        )
    except (DagBenchError, FileNotFoundError) as exc:
        from gpusched_envs.cli import print_error

        print_error(exc)  # one line, escaped: a value such as "[/]" is text, not rich markup
        raise typer.Exit(code=2) from None
    table = markdown_table(result["summary"], result["meta"]["agents"], result["meta"])
    typer.echo(table)
    if json_out is not None:
        write_json(json_out, result, indent=2, sort_keys=True, default=float)
        md = markdown or json_out.with_suffix(".md")
        write_text(md, table)
        typer.echo(f"wrote {json_out} and {md}", err=True)
    elif markdown is not None:
        write_text(markdown, table)


# ---------------------------------------------------------------------------------------------- leaderboard agents
DAG_ENV_ID = "gpusched/DAGSchedule-v1"
LEADERBOARD_AGENTS = tuple(
    f"dag-{a}" for a in AGENTS if a not in ("lower-bound", "cpsat") and not a.endswith("+list")
)
"""Leaderboard agent specs of the DAG agents (``evaluate.agents.resolve_agent`` knows them): they run on
``DAGSchedule-v1`` scenarios only (budgets: 40 x 60 plans; DDQN / PPO: the shipped planners)."""


class DAGEvalAgent(EvalAgent):
    """``dag-<agent>`` on a ``DAGSchedule-v1`` scenario: it takes the DAG and GPU set of ``env.reset(seed=seed)``
    and returns its plan's makespan (plus the analytic lower bound) as the episode's metrics."""

    kind = "dag"

    def __init__(self, spec: str):
        name = spec[len("dag-") :]
        if name not in AGENTS or name == "lower-bound":
            raise AgentSpecError(
                f"unknown DAG agent {spec!r}; valid: {', '.join(f'dag-{a}' for a in AGENTS[:-1])}"
            )
        super().__init__(spec, spec)
        self.agent = name

    def identity(self) -> dict:
        return {"kind": self.kind, "agent": self.agent, "source": file_digest(Path(__file__))}

    def applies_to(self, scenario) -> str | None:
        return None if scenario.env_id == DAG_ENV_ID else f"runs on {DAG_ENV_ID} scenarios"

    def run_episode(self, scenario, seed: int) -> dict:
        from gpusched_lab.agents.methods.worl_rtgs.metaheuristics import lower_bound

        env = scenario.make_env()
        try:
            env.reset(seed=int(seed))
            u = env.unwrapped
            args = scenario_args(env)
            inst = Instance(scenario.name, 0, u.dag, u, args)
            rec = run_agent(self.agent, inst, int(seed))
            if "makespan" not in rec:
                raise RuntimeError(rec.get("skipped", "no makespan"))
            lb = lower_bound(u.dag, u.speed, u.bandwidth, gpu_types=u.gpu_types)
            return {
                "makespan": float(rec["makespan"]),
                "lower_bound_makespan": lb,
                "tasks": u.dag.num_tasks,
            }
        finally:
            env.close()


def dag_eval_agent(spec: str) -> EvalAgent:
    """The leaderboard's :class:`~gpusched_lab.evaluate.agents.EvalAgent` for ``dag-<agent>`` (``dag-heft``,
    ``dag-worl-rtgs``, ...)."""
    return DAGEvalAgent(spec)


# the shipped DDQN / PPO planners are parts of the dag-ddqn, dag-ppo and dag-worl-rtgs agents
register_agent_kind(
    "dag",
    dag_eval_agent,
    prefix="dag-",
    group_agents=LEADERBOARD_AGENTS,
    component_checkpoints=tuple(PLANNERS.values()),
)
