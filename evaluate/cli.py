"""``gpusched evaluate`` (one agent on one scenario over seeds), ``gpusched leaderboard`` (the whole grid) and
``gpusched report`` (the leaderboard's HTML page again from a results folder). Plain functions, found by the
library's command through the ``gpusched.commands`` entry points; ``python -m evaluate`` runs the same commands."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer
from gpusched_lab.evaluate.agents import AgentSpecError, expand_agent_specs, resolve_agent
from gpusched_lab.evaluate.leaderboard import _report_warm_up
from gpusched_lab.evaluate.report import _cell_text, _clean, write_outputs
from gpusched_lab.evaluate.runner import Cell, _local_stream, run_grid
from gpusched_lab.evaluate.scenarios import Scenario, SuiteError, find_scenario, load_suite, parse_seeds
from gpusched_lab.evaluate.stats import mean_ci, normalised_score
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpusched_envs.io import OutputPathError, atomic_write_text, check_output_path, dumps_json
from gpusched_envs.validation import Processes, ValidationError

console = Console()
err_console = Console(stderr=True)

app = typer.Typer(
    name="evaluate",
    help="Evaluate agents on scenarios and rank them on a leaderboard.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str) -> None:
    from gpusched_envs.cli import print_error

    print_error(message, err_console)  # escaped: a value such as "[/]" is text, not rich markup
    raise typer.Exit(code=2)


def _user_errors() -> tuple[type[Exception], ...]:

    errors: list[type[Exception]] = [AgentSpecError, SuiteError, ValidationError]
    try:
        from gpusched_envs.errors import USER_ERRORS

        errors.extend(USER_ERRORS)
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


def _print_warnings(caught) -> None:
    """The run's own warnings (cache repairs, failed cells, dropped jobs), each once; library deprecation notices
    (torch, arch) are not the user's to act on and are left out."""
    seen: set[str] = set()
    for w in caught:
        text = str(w.message)
        if (
            issubclass(w.category, DeprecationWarning | PendingDeprecationWarning | FutureWarning)
            or text in seen
        ):
            continue
        seen.add(text)
        from gpusched_envs.cli import print_error

        print_error(text, err_console, label="warning")


def leaderboard(
    suite: Annotated[
        str, typer.Option(help="Bundled suite (quick | standard | full) or a suite YAML path.")
    ] = "quick",
    agents: Annotated[
        str | None,
        typer.Option(
            help="Comma list: heuristic names (fifo, sjf+consolidate, ...), checkpoint paths, module:callable, "
            "and the groups all (default), heuristics, checkpoints."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Output folder (default results/leaderboard/SUITE).")
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            parser=Processes(),
            help="Processes (local) or CPUs of a local Ray instance (at most one per CPU unless raised).",
        ),
    ] = 1,
    backend: Annotated[str, typer.Option(help="local | ray")] = "local",
    address: Annotated[
        str | None, typer.Option(help="Ray cluster address (ray backend); default: local.")
    ] = None,
    scenarios: Annotated[str | None, typer.Option(help="Comma list of the suite's scenarios to run.")] = None,
    checkpoints: Annotated[
        Path | None, typer.Option(help="Folder of shipped checkpoints (default: the repository's).")
    ] = None,
    plots: Annotated[bool, typer.Option(help="Write the PNG plots.")] = True,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Run every agent on every scenario and seed of a suite (resuming from cached cells) and rank them."""

    try:
        s = load_suite(suite)
        chosen = list(s.scenarios)
        if scenarios:
            chosen = [s.scenario(n.strip()) for n in scenarios.split(",") if n.strip()]
        specs = expand_agent_specs(agents, checkpoints)
        if not specs:
            _fail("no agents to evaluate")
        out = out or Path("results") / "leaderboard" / s.name
        _check_output_folder(out)  # before the grid runs, not after
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run_grid(
                chosen,
                specs,
                out,
                workers=workers,
                backend=backend,
                address=address,
                progress=progress,
                on_tail=_report_warm_up if plots else None,
            )
            doc = write_outputs(result, out, s.name, s.description, make_plots=plots)
        _print_warnings(caught)
    except _user_errors() as exc:
        _fail(str(exc))
    except (ValueError, RuntimeError) as exc:
        _fail(str(exc))
    print_summary(doc)
    total = len(result.cells) + len(result.failed)
    console.print(
        f"{total} cells: {result.computed} computed, {result.cached} cached, {result.recomputed} recomputed "
        f"(corrupt or stale cache), {len(result.failed)} failed, {len(doc['skipped'])} agent-scenario pairs not "
        f"applicable; {result.wall_s:.1f} s. Wrote {out}/leaderboard.html, leaderboard.md, leaderboard.json, *.csv"
        + (", plots/*.png" if plots else ""),
        highlight=False,
        markup=False,
    )
    if result.failed and not result.cells:
        from gpusched_envs.cli import print_error

        print_error(
            f"all {total} cells failed (the warnings above say why); no agent was ranked", err_console
        )
    if result.failed:
        raise typer.Exit(code=1)


def print_summary(doc: dict) -> None:
    """Overall ranking and per-scenario average JCT (means; the intervals are in leaderboard.md)."""

    n = len(doc["scenarios"])
    table = Table(
        title=f"leaderboard {escape(doc['suite']['name'])}: overall (score = lower-bound avg JCT ÷ avg JCT)"
    )
    for col in ("rank", "agent", "scenarios", "IQM score (95% CI)", "mean rank"):
        # long checkpoint names fold onto a second line instead of ending in "…" (they differ in their tails)
        table.add_column(col, overflow="fold" if col == "agent" else "ellipsis")
    for r in doc["aggregate"]:
        table.add_row(
            str(r["rank"] or "—"),
            escape(r["agent"]),
            f"{r['scenarios']}/{n}",
            _cell_text(r["iqm_score"], "score"),
            "—" if r.get("mean_rank") is None else f"{r['mean_rank']:.1f}",
        )
    console.print(table)
    table = Table(title="average JCT (h), mean over seeds")
    table.add_column("agent", overflow="fold")
    for sc in doc["scenarios"]:
        load = sc["measured_offered_load"]["mean"]
        table.add_column(
            escape(f"{sc['name']}\n(load {load:.2f})" if load is not None else sc["name"]), justify="right"
        )
    nowhere = []  # agents of another env (DAG, multi-agent, ...) that apply to no scenario of this suite
    failed = {(f["agent"], f["scenario"]) for f in doc.get("failed", [])}
    for a in doc["agents"]:
        cells = []
        for sc in doc["scenarios"]:
            row = next(
                (r for r in doc["summary"] if r["scenario"] == sc["name"] and r["agent"] == a["name"]), None
            )
            if row is not None:
                cells.append(f"{_hours(row['avg_jct']['mean'])} (#{row['rank'] or '—'})")
            else:
                cells.append("failed" if (a["name"], sc["name"]) in failed else "n/a")
        if all(c == "n/a" for c in cells):
            nowhere.append(a["name"])
            continue
        table.add_row(escape(a["name"]), *cells)
    table.add_row("lower bound", *[_hours(sc["lower_bound_avg_jct"]["mean"]) for sc in doc["scenarios"]])
    console.print(table)
    if nowhere:
        console.print(
            f"not applicable to any scenario of this suite ({len(nowhere)}): {', '.join(nowhere)}",
            markup=False,
        )


def _hours(seconds) -> str:
    """Seconds as hours with two decimals; "—" where there is no value (every cell of it failed)."""
    if seconds is None or (isinstance(seconds, float) and not math.isfinite(seconds)):
        return "—"
    return f"{seconds / 3600:,.2f}"


EVALUATE_SCHEMA = "gpusched.evaluate/1"


def evaluate(
    agent: Annotated[str, typer.Option(help="Heuristic name, checkpoint path or module:callable.")],
    scenario: Annotated[str | None, typer.Option(help="Bundled scenario name, or SUITE/NAME.")] = None,
    env: Annotated[str | None, typer.Option(help="Env id (instead of --scenario).")] = None,
    env_kwargs: Annotated[str | None, typer.Option(help="Env kwargs as a JSON object (with --env).")] = None,
    seeds: Annotated[str, typer.Option(help="Seeds: 0-9, 0,3,5 or 0-2,7.")] = "0-9",
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write per-seed and mean metrics here.")
    ] = None,
    workers: Annotated[
        int, typer.Option(parser=Processes(), help="Processes (at most one per CPU unless raised).")
    ] = 1,
) -> None:
    """Evaluate one agent on one scenario: metrics per seed, mean and 95% interval over seeds."""

    try:
        if (scenario is None) == (env is None):
            _fail("give either --scenario NAME or --env ID [--env-kwargs JSON]")
        if scenario is not None:
            sc = find_scenario(scenario)
            if env_kwargs:
                _fail("--env-kwargs goes with --env")
        else:
            try:
                kwargs = json.loads(env_kwargs) if env_kwargs else {}
            except json.JSONDecodeError as exc:
                _fail(f"--env-kwargs is not valid JSON: {exc}")
            if not isinstance(kwargs, dict):
                _fail("--env-kwargs must be a JSON object")
            sc = Scenario(name=env, env_id=env, env_kwargs=kwargs)
        seed_list = parse_seeds(seeds, "--seeds")
        if json_out is not None:
            from gpusched_envs.io import check_output_path

            check_output_path(json_out)
        _check_scenario_env(sc)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            doc = evaluate_agent(agent, sc, seed_list, workers=workers)
        _print_warnings(caught)
    except _user_errors() as exc:
        _fail(str(exc))

    table = Table(title=escape(f"{doc['agent']['name']} on {sc.name} ({len(doc['per_seed'])} seeds)"))
    for col in ("metric", "mean", "95% interval"):
        table.add_column(col, justify="right" if col != "metric" else "left")
    for key, mean in doc["mean"].items():
        lo, hi = doc["ci95"][key]
        table.add_row(key, _fmt(mean), f"[{_fmt(lo)}, {_fmt(hi)}]")
    console.print(table)
    for f in doc["failed"]:
        err_console.print(f"[red]seed {f['seed']} failed:[/] {escape(str(f['error']))}", highlight=False)
    if json_out is not None:
        atomic_write_text(json_out, dumps_json(doc))
        console.print(f"wrote {json_out}", markup=False, highlight=False)
    if doc["failed"]:
        raise typer.Exit(code=1)


def _check_output_folder(out: Path) -> None:
    """The leaderboard's output folder: absent or a folder, whose result files are absent or regular files."""

    if out.exists() and not out.is_dir():
        raise OutputPathError(f"{out}: --out must be a folder, this is a file")
    for name in ("leaderboard.md", "leaderboard.json"):
        check_output_path(out / name)


def _check_scenario_env(sc) -> None:
    """Build the scenario's env once, so an unregistered id or bad kwargs is one line before any table (not one
    failure per seed)."""

    try:
        env = sc.make_env()
    except SuiteError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise SuiteError(f"{sc.env_id} with env kwargs {json.dumps(sc.env_kwargs)}: {exc}") from None
    env.close()


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:,.4g}" if isinstance(x, float) else f"{x:,}"


def evaluate_agent(agent_spec: str, scenario, seeds, workers: int = 1) -> dict:
    """The ``--json`` document of ``gpusched evaluate`` (schema in ``evaluate/SCHEMA.md``)."""

    agent = resolve_agent(agent_spec)
    reason = agent.applies_to(scenario)
    if reason is not None:
        raise AgentSpecError(f"{agent.name} does not run on {scenario.name}: {reason}")
    agent.check_loadable()  # a checkpoint that cannot be loaded is one line, not one failure per seed
    cells = [Cell(scenario, agent, int(s), "", Path()) for s in seeds]
    per_seed, failed = {}, []
    for cell, res in _local_stream(cells, workers):
        if "error" in res:
            failed.append({"seed": cell.seed, "error": res["error"]})
        else:
            metrics = {**res["metrics"], "score": normalised_score(res["metrics"])}
            per_seed[cell.seed] = metrics
    rows = [{"seed": s, "metrics": per_seed[s]} for s in seeds if s in per_seed]
    keys = [k for k in (rows[0]["metrics"] if rows else {}) if isinstance(rows[0]["metrics"][k], int | float)]
    mean, ci = {}, {}
    for k in keys:
        m, lo, hi = mean_ci([r["metrics"][k] for r in rows])
        mean[k], ci[k] = m, [lo, hi]
    return _clean(
        {
            "schema": EVALUATE_SCHEMA,
            "agent": {"name": agent.name, "spec": agent.spec, "kind": agent.kind},
            "scenario": scenario.to_dict(),
            "seeds": [int(s) for s in seeds],
            "per_seed": rows,
            "mean": mean,
            "ci95": ci,
            "failed": sorted(failed, key=lambda f: f["seed"]),
        }
    )


def report(
    folder: Annotated[Path, typer.Argument(help="Results folder of a leaderboard run (its --out).")],
    out: Annotated[
        Path | None, typer.Option(help="Where to write the page (default FOLDER/leaderboard.html).")
    ] = None,
    plots: Annotated[bool, typer.Option(help="Draw the plots into the page.")] = True,
) -> None:
    """Rebuild leaderboard.html (tables, plots, settings, provenance in one self-contained page) from a results
    folder."""
    from gpusched_lab.evaluate.report.html import ReportError, rebuild

    try:
        if out is not None:
            check_output_path(out)
        path = rebuild(folder, out, plots=plots)
    except (ReportError, OutputPathError) as exc:
        _fail(str(exc))
    console.print(f"wrote {path}", markup=False, highlight=False)


app.command(name="leaderboard")(leaderboard)
app.command(name="report")(report)
app.command(name="evaluate")(evaluate)


def main(argv: list[str] | None = None) -> None:
    """``python -m gpusched_lab.evaluate``: the commands with the CLI's error contract (one line, exit 2)."""
    from gpusched_envs.cli import run_command

    run_command(typer.main.get_command(app), argv if argv is not None else sys.argv[1:], prog_name="evaluate")
