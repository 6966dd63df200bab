"""The ``gpusched`` command.

Subcommands of the library itself: ``simulate``, ``bench``, ``clusters``, ``workloads``, ``envs``. Other packages add
subcommands (``train``, ``evaluate``, ``leaderboard``) through the ``gpusched.commands`` entry-point group, so the
library never imports them: an entry point names a ``typer.Typer`` app or a plain function.
"""

from __future__ import annotations

import json
import sys
import warnings
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpusched_envs.extras import missing_requirements
from gpusched_envs.io import atomic_write_text, check_output_path, dumps_json
from gpusched_envs.validation import Float, Int, Seed, Text, ValidationError, check_float, check_seed

app = typer.Typer(
    name="gpusched",
    help="GPU-cluster scheduling: simulate, benchmark, list clusters, workloads and environments.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


class UserError(Exception):
    """Bad input from the command line: printed as one line, exit code 2."""


def one_line(message) -> str:
    """An error or warning as one line of plain text: whitespace runs (newlines) collapsed."""
    return " ".join(str(message).split())


def print_error(message, console: Console | None = None, label: str = "error") -> None:
    """``error: message`` on stderr, the message escaped (a value such as ``[/]`` is text, not rich markup)."""
    from rich.markup import escape

    style = "bold red" if label == "error" else "yellow"
    (console or err_console).print(
        f"[{style}]{label}:[/] {escape(one_line(message))}", highlight=False, soft_wrap=True
    )


def fail(message: str) -> None:
    print_error(message)
    raise typer.Exit(code=2)


def __getattr__(name: str):
    # the sizing rule of workload specs lives in gpusched_envs.workloads.sizing (the envs apply it too); importable
    # from here as before, without importing the workload loaders with the command line
    if name == "fit_workload_to_cluster":
        from gpusched_envs.workloads.sizing import fit_workload_to_cluster

        return fit_workload_to_cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _named(flag: str, function, *args):
    """``function(*args)``; a user error it raises is re-raised as a :class:`UserError` starting with ``flag``."""
    from gpusched_envs.errors import USER_ERRORS

    try:
        return function(*args)
    except UserError:
        raise
    except USER_ERRORS as exc:
        text = one_line(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
        raise UserError(text if text.startswith(flag) else f"{flag}: {text}") from None


def check_choices(**values) -> None:
    """Each ``--name value`` (policy, placement, speed_model) against the library's names, before anything is
    loaded; a near miss gets a did-you-mean."""
    import difflib

    from gpusched_envs.policies.placement import PLACEMENTS
    from gpusched_envs.policies.schedulers import POLICIES

    known = {
        "policy": tuple(POLICIES),
        "placement": tuple(PLACEMENTS),
        "speed_model": ("throughput", "duration"),
    }
    for name, value in values.items():
        choices = known[name]
        if value not in choices:
            close = difflib.get_close_matches(value, choices, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise UserError(
                f"--{name.replace('_', '-')}: unknown {name} {value!r}; choose one of: {', '.join(choices)}{hint}"
            )


def _load_workload(spec: str, seed: int):
    from gpusched_envs.workloads import load_workload

    return load_workload(spec, seed=seed)


def run_simulation(
    cluster: str,
    workload: str,
    policy: str,
    placement: str,
    seed: int = 0,
    speed_model: str = "throughput",
    interference: bool = True,
    restart_delay: float | None = None,
    progress: bool = False,
) -> dict:
    """One simulation from names, as the CLI runs it; returns the ``--json`` document."""
    from gpusched_envs.policies import make_policy
    from gpusched_envs.sim import SimConfig, Simulator, load_cluster

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"--seed must be an integer >= 0, got {seed!r}")
    from gpusched_envs.workloads.sizing import fit_workload_to_cluster

    c = _named("--cluster", load_cluster, cluster)
    w = _named("--workload", lambda spec: _load_workload(fit_workload_to_cluster(spec, c), seed), workload)
    if not len(w):
        raise UserError(f"workload {workload!r} has no jobs; nothing to simulate")
    pol = _named("--policy", make_policy, policy, placement)
    oversize = "drop" if c.pool_names else "error"
    config = SimConfig(
        speed_model=speed_model,
        interference=interference,
        restart_delay=restart_delay,
        seed=seed,
        oversize=oversize,
    )
    sim = Simulator(c, w, config)
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("simulating"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        ) as bar:
            task = bar.add_task("jobs", total=sim.to_finish)
            sim.on_progress = lambda s: bar.update(task, completed=s.finished)
            metrics = sim.run(pol)
    else:
        metrics = sim.run(pol)
    if not metrics.get("jobs"):
        raise UserError(
            f"no job of workload {workload!r} ran on cluster {c.name!r} ({len(w)} loaded, all dropped); "
            "nothing to report"
        )
    return {
        "schema": "gpusched.simulate/1",
        "cluster": c.name,
        "cluster_gpus": c.num_gpus,
        "workload": workload,
        "workload_fingerprint": w.fingerprint(),
        "policy": policy,
        "placement": placement,
        "seed": seed,
        "speed_model": speed_model,
        "interference": interference,
        "restart_delay": sim.restart_delay,
        "metrics": metrics,
        **{k: metrics[k] for k in ("jobs", "avg_jct", "p95_jct", "makespan", "avg_queueing_delay")},
    }


def metrics_table(title: str, metrics: dict):
    from rich.table import Table

    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("lower bound", justify="right")
    bounds = {"avg_jct": "lower_bound_avg_jct", "makespan": "lower_bound_makespan"}
    for key, value in metrics.items():
        if key.startswith("lower_bound"):
            continue
        text = f"{value:,.4g}" if isinstance(value, float) else f"{value:,}"
        bound = metrics.get(bounds.get(key, ""), None)
        table.add_row(key, text, "" if bound is None else f"{bound:,.4g}")
    return table


@app.command()
def simulate(
    cluster: Annotated[str, typer.Option(help="Preset name or path to a cluster YAML.")] = "tiny",
    workload: Annotated[
        str, typer.Option(help="Named workload spec, e.g. philly:start=2017-10-01,end=2017-10-07.")
    ] = ("synthetic:jobs=200"),
    policy: Annotated[
        str,
        typer.Option(help="fifo | sjf | srtf | tiresias | las | gittins | gandiva | netsens | netsens-auto"),
    ] = "fifo",
    placement: Annotated[
        str, typer.Option(help="closest | consolidate | first-fit | pack | spread | random")
    ] = "closest",
    seed: Annotated[
        int, typer.Option(parser=Seed(), help="Seed of the workload and the simulator (>= 0).")
    ] = 0,
    speed_model: Annotated[str, typer.Option(help="throughput | duration")] = "throughput",
    interference: Annotated[bool, typer.Option(help="Co-located jobs slow each other.")] = True,
    restart_delay: Annotated[
        float | None,
        typer.Option(parser=Float(min=0), help="Seconds >= 0; default from data/sim_defaults.yaml."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write metrics as JSON here (atomic).")
    ] = None,
    describe: Annotated[bool, typer.Option(help="Only describe the workload, do not simulate.")] = False,
) -> None:
    """Replay a workload on a cluster with a heuristic policy and print the metrics. A synthetic workload's jobs are
    capped at the cluster's size unless the spec gives max_gpus."""
    check_seed(seed, "--seed")
    if restart_delay is not None:
        check_float(restart_delay, "--restart-delay", min=0)
    check_choices(policy=policy, placement=placement, speed_model=speed_model)
    if json_out is not None:
        check_output_path(json_out)  # refuse a FIFO or device before simulating
    if describe:
        workloads(spec=workload, seed=seed, cluster=cluster)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doc = run_simulation(
            cluster,
            workload,
            policy,
            placement,
            seed,
            speed_model,
            interference,
            restart_delay,
            progress=True,
        )
    for w in caught:
        print_error(w.message, label="warning")
    title = (
        f"{doc['policy']} + {doc['placement']} on {doc['cluster']} ({doc['cluster_gpus']} GPUs), {workload}"
    )
    console.print(metrics_table(title, doc["metrics"]))
    if json_out is not None:
        atomic_write_text(json_out, dumps_json(doc))
        console.print(f"wrote {json_out}")


def fitted_table(
    title: str, headers: list[str], rows: list[list[str]], right: tuple[str, ...] = (), wide=False
):
    """A rich table whose last column (a description) is cut to what the terminal leaves of its width, so the
    other columns never wrap (``wide``: nothing is cut and the lines may be long)."""
    from rich.markup import escape
    from rich.table import Table

    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers[:-1])]
    room = max(12, console.width - sum(w + 3 for w in widths) - 4)
    table = Table(title=title)
    for header in headers:
        table.add_column(header, no_wrap=True, justify="right" if header in right else "left")
    for row in rows:
        last = one_line(row[-1]) if wide else first_sentence(row[-1], room)
        table.add_row(*(escape(cell) for cell in [*row[:-1], last]))
    return table


def first_sentence(text: str, limit: int = 80) -> str:
    """The first sentence of ``text`` on one line, at most ``limit`` characters (an ellipsis when cut)."""
    text = one_line(text)
    cut = text.find(". ")
    text = text if cut < 0 else text[: cut + 1]
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@app.command()
def clusters(
    wide: Annotated[bool, typer.Option("--wide", help="Full descriptions (long lines).")] = False,
) -> None:
    """List the cluster presets with their sizes (one line each; --wide for the full descriptions)."""
    from gpusched_envs.sim import list_presets, load_cluster

    rows = []
    for name in list_presets():
        c = load_cluster(name)
        s = c.summary()
        types = ", ".join(f"{k}×{v}" for k, v in s["gpu_types"].items())
        rows.append(
            [
                name,
                str(s["racks"]),
                str(s["servers"]),
                str(s["gpus"]),
                types,
                str(len(s["pools"])),
                c.description,
            ]
        )
    headers = ["name", "racks", "servers", "GPUs", "GPU types", "pools", "description"]
    table = fitted_table(
        "cluster presets", headers, rows, right=("racks", "servers", "GPUs", "pools"), wide=wide
    )
    (Console(width=10_000, soft_wrap=True) if wide else console).print(table)


@app.command()
def workloads(
    spec: Annotated[
        str | None, typer.Argument(help="A workload spec to describe; omit to list the names.")
    ] = None,
    seed: Annotated[int, typer.Option(parser=Seed(), help="Seed for generated workloads (>= 0).")] = 0,
    cluster: Annotated[str | None, typer.Option(help="State the offered load on this cluster.")] = None,
) -> None:
    """List named workloads, or summarise one (jobs, span, GPU sizes, duration percentiles, offered load)."""
    check_seed(seed, "--seed")
    from rich.table import Table

    from gpusched_envs.workloads import describe as describe_workload
    from gpusched_envs.workloads import list_workloads

    if spec is None:
        table = Table(title="named workloads")
        for col in ("name", "keys", "description"):
            table.add_column(col)
        for name, description, keys in list_workloads():
            table.add_row(name, ", ".join(keys), description)
        console.print(table)
        return
    if spec.startswith("dag:"):
        from gpusched_envs.workloads.dag import load_dag

        summary = load_dag(spec, seed=seed).summary()
        table = Table(title=f"DAG workload {spec}")
        table.add_column("field")
        table.add_column("value")
        for key, value in summary.items():
            table.add_row(str(key), json.dumps(value) if isinstance(value, dict | list) else str(value))
        console.print(table)
        return
    w = _load_workload(spec, seed)
    num_gpus = None
    if cluster is not None:
        from gpusched_envs.sim import load_cluster

        num_gpus = load_cluster(cluster).num_gpus
    summary = describe_workload(w, num_gpus=num_gpus)
    table = Table(title=f"workload {spec}")
    table.add_column("field")
    table.add_column("value")
    for key, value in summary.items():
        table.add_row(str(key), json.dumps(value) if isinstance(value, dict | list) else str(value))
    console.print(table)


@app.command()
def envs(
    details: Annotated[
        bool, typer.Option("--details", help="Print the full action and observation spaces.")
    ] = False,
) -> None:
    """List the registered environments: id, observation modes, action-space size and what each is (--details for
    the full spaces)."""
    import gymnasium as gym
    from rich.markup import escape

    from gpusched_envs.envs import list_env_specs
    from gpusched_envs.multi_agent import multi_scheduler_v1

    ma = multi_scheduler_v1.parallel_env(num_agents=4, cluster="tiny", num_jobs=10)
    agent = ma.possible_agents[0]
    if details:
        for env_id, action_space, observation_space in list_env_specs():
            console.print(
                f"[bold]{escape(env_id)}[/]\n  action: {escape(str(action_space))}\n"
                f"  observation: {escape(str(observation_space))}"
            )
        console.print(
            "[bold]gpusched_envs.multi_agent.multi_scheduler_v1[/] (PettingZoo ParallelEnv, 4 agents on 'tiny')\n"
            f"  action (per agent): {escape(str(ma.action_space(agent)))}\n"
            f"  observation (per agent): {escape(str(ma.observation_space(agent)))}\n"
            f"  state: {escape(str(ma.state_space))}"
        )
        return
    rows = []
    for env_id, action_space, _ in list_env_specs():
        cls = gym.spec(env_id).entry_point
        if isinstance(cls, str):
            import importlib

            module, _, attr = cls.partition(":")
            cls = getattr(importlib.import_module(module), attr)
        modes = ", ".join(getattr(cls, "obs_modes_offered", ()) or ("-",))
        size = getattr(action_space, "n", None)
        rows.append(
            [env_id, modes, f"{int(size):,}" if size is not None else str(action_space), cls.__doc__ or ""]
        )
    size = getattr(ma.action_space(agent), "n", None)
    rows.append(
        [
            "multi_scheduler_v1",
            "graph",
            f"{int(size):,} per agent" if size is not None else "",
            "Several schedulers, one per agent, share one cluster (PettingZoo ParallelEnv; 4 agents on 'tiny').",
        ]
    )
    headers = ["id", "obs modes", "actions", "description"]
    console.print(fitted_table("environments (--details for the spaces)", headers, rows, right=("actions",)))


@app.command()
def bench(
    out: Annotated[Path | None, typer.Option(help="Write the figures as JSON here.")] = None,
    quick: Annotated[bool, typer.Option(help="Smaller sizes (for a smoke test).")] = False,
    against: Annotated[
        str | None,
        typer.Option(
            parser=Text(max_len=200),
            help="A git commit (hash, tag or branch): time each figure on its code and on this code in the same "
            "run and print the ratios (needs a git checkout of the project).",
        ),
    ] = None,
    figure: Annotated[
        list[str] | None,
        typer.Option(help="With --against: only this figure (repeatable); --figure list shows the names."),
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            parser=Int(min=1, max=15, cap=None), help="With --against: processes per side (median)."
        ),
    ] = 3,
    warm_up: Annotated[
        bool,
        typer.Option(
            help="With --against: run each figure once per side untimed first, so that no timed run includes "
            "numba compiling into an empty cache (the pinned code starts with one)."
        ),
    ] = True,
) -> None:
    """Measure simulator, env and training speed (events/s, steps/s, samples/s) and print them."""
    if out is not None:
        check_output_path(out)
    if against is None and (figure or repeats != 3 or not warm_up) and figure != ["list"]:
        fail("--figure, --repeats and --no-warm-up go with --against REV")
    if against is not None or figure == ["list"]:
        _bench_against(against, figure, repeats, quick, out, warm_up)
        return
    from gpusched_envs.bench import run_benchmarks

    results = run_benchmarks(quick=quick, console=err_console)
    from rich.table import Table

    table = Table(title="gpusched bench")
    for col in ("benchmark", "figure", "unit", "target", "meets"):
        table.add_column(col)
    for r in results["benchmarks"]:
        meets = "" if r.get("meets") is None else ("yes" if r["meets"] else "NO")
        table.add_row(r["name"], f"{r['value']:,.4g}", r["unit"], r.get("target", ""), meets)
    console.print(table)
    m = results["machine"]
    console.print(
        f"machine: {m['cpus']} CPUs ({m['processor']}, {m['platform']}); 1-min load average "
        f"{(m['load_average_before'] or ['?'])[0]} before, {(m['load_average_after'] or ['?'])[0]} after"
    )
    if out is not None:
        atomic_write_text(out, dumps_json(results))
        console.print(f"wrote {out}")


def _bench_against(
    rev: str, figures: list[str] | None, repeats: int, quick: bool, out: Path | None, warm: bool = True
) -> None:
    """``gpusched bench --against REV``: each figure on the pinned commit's code and on this code, one run."""
    from gpusched_envs.bench import AB_FIGURES, compare_with_commit

    if figures and figures != ["list"]:
        unknown = [f for f in figures if f not in AB_FIGURES]
        if unknown:
            fail(f"--figure {unknown[0]!r}: not a figure (one of: {', '.join(AB_FIGURES)})")
    if figures == ["list"]:
        for name, (kind, _) in AB_FIGURES.items():
            console.print(f"{name}  [dim]({kind})[/dim]")
        return
    try:
        results = compare_with_commit(rev, quick, figures, repeats, say=err_console.print, warm=warm)
    except ValueError as exc:
        fail(str(exc))
    except FileNotFoundError:
        fail("--against needs git and a git checkout of the project")
    from rich.table import Table

    table = Table(title=f"gpusched bench --against {rev}")
    for col in ("figure", "pinned", "this code", "unit", "ratio"):
        table.add_column(col)
    for r in results["figures"]:
        if "error" in r:
            table.add_row(r["name"], "", "", "", "not measured")
            continue
        a, b = r["old"], r["new"]
        table.add_row(r["name"], f"{a['value']:,.4g}", f"{b['value']:,.4g}", b["unit"], f"{r['ratio']:.2f}x")
    console.print(table)
    m = results["machine"]
    console.print(
        f"machine: {m['cpus']} CPUs ({m['processor']}, {m['platform']}); ratio > 1 means this code is faster"
    )
    if out is not None:
        atomic_write_text(out, dumps_json(results))
        console.print(f"wrote {out}")


def _needs_extra(name: str, dist_name: str, extras: list[str], missing: list[str]):
    """A stand-in command for one whose extra is not installed: it says which extra to install."""
    spec = f"{dist_name}[{','.join(extras)}]"

    def command(ctx: typer.Context) -> None:
        fail(
            f"`gpusched {name}` needs the {'/'.join(extras)} extra (missing: {', '.join(missing)}): pip install '{spec}'"
        )

    command.__doc__ = f"(needs the {'/'.join(extras)} extra: pip install '{spec}')"
    return command


def _add_plugin_commands() -> None:
    """Subcommands from other packages (``train``, ``evaluate``, ``leaderboard``), found by entry point. A command
    whose extra (``[agents]``, ``[eval]``) is not installed is listed, and says which extra to install when called."""
    for ep in entry_points(group="gpusched.commands"):
        dist = getattr(ep, "dist", None)
        if ep.extras and dist is not None:
            missing = sorted({m for extra in ep.extras for m in missing_requirements(dist, extra)})
            if missing:
                stub = _needs_extra(ep.name, dist.metadata["Name"], list(ep.extras), missing)
                app.command(
                    name=ep.name, context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
                )(stub)
                continue
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin must not break the library's own commands
            warnings.warn(f"gpusched: cannot load command {ep.name!r} ({ep.value}): {exc}", stacklevel=2)
            continue
        if isinstance(obj, typer.Typer):
            app.add_typer(obj, name=ep.name)
        else:
            app.command(name=ep.name)(obj)


def _click_exceptions():
    """The exception classes of the click that typer runs on (its own copy in recent typer versions)."""
    import importlib

    return importlib.import_module(typer.BadParameter.__module__)


def run_command(command, argv: list[str] | None = None, prog_name: str | None = None) -> None:
    """Run a click command (the ``gpusched`` group, or one of its apps) as the console does, with the CLI's error
    contract: bad input, whether refused while the command line is parsed (a flag's type or range) or while the
    command runs (:class:`UserError` and the library's user errors), is one line ``error: ...`` on stderr and
    exit code 2. ``--help`` and a group called without arguments print the help."""
    from gpusched_envs.errors import USER_ERRORS

    exc_mod = _click_exceptions()
    no_args = getattr(exc_mod, "NoArgsIsHelpError", ())
    try:
        rv = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except no_args as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        sys.exit(2)
    except exc_mod.ClickException as exc:
        message = exc.format_message()
        param = getattr(exc, "param", None)
        if isinstance(exc, exc_mod.BadParameter) and getattr(param, "opts", None):
            text = one_line(exc.message).removeprefix("Value error, ")
            flag = max(param.opts, key=len)
            message = f"{flag} {text}" if text.startswith("must") else f"{flag}: {text}"
        elif isinstance(exc, exc_mod.UsageError) and not isinstance(exc, exc_mod.BadParameter) and exc.ctx:
            message = f"{message} (see {exc.ctx.command_path} --help)"
        print_error(message)
        sys.exit(2)
    except typer.Abort:
        print_error("aborted")
        sys.exit(1)
    except (*USER_ERRORS, UserError, ValidationError) as exc:
        print_error(exc)
        sys.exit(2)
    sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


def main(argv: list[str] | None = None) -> None:
    _add_plugin_commands()
    run_command(typer.main.get_command(app), argv, prog_name="gpusched")


if __name__ == "__main__":
    main()
