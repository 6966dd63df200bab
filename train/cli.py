"""``python -m gpusched_lab.train {ddqn,ppo,topdrl,hmarl}`` (also ``gpusched train ...`` through the ``gpusched.commands`` entry point).

    python -m gpusched_lab.train ddqn --env gpusched/JobSelect-v0 --steps 20000 --seed 0 --out runs/ddqn-gnn
    python -m gpusched_lab.train topdrl --config topdrl --out runs/topdrl
    python -m gpusched_lab.train ppo --config ppo_jobselect_gnn --set learning_rate=1e-4 --set env_kwargs.load=1.0 --out runs/p
    python -m gpusched_lab.train ppo --config ppo_jobselect_gnn --out runs/p --resume     # continue from runs/p/checkpoint

Precedence: defaults < ``--config`` YAML < options on the command line < ``--set key=value``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Train learning schedulers (DDQN, MaskablePPO, TopDRL, HMARL) on the gpusched envs; `compare` (registered "
    "by the evaluation package) scores a checkpoint against the heuristics of its information class.",
    no_args_is_help=True,
    add_completion=False,
)

EnvOpt = Annotated[str | None, typer.Option("--env", help="Env id, e.g. gpusched/JobSelect-v0.")]
EnvKwargsOpt = Annotated[str | None, typer.Option("--env-kwargs", help="Env keyword arguments as JSON.")]
StepsOpt = Annotated[int | None, typer.Option("--steps", help="Total env steps.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed (python, numpy, torch, envs).")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="auto | cpu | cuda[:N].")]
OutOpt = Annotated[Path, typer.Option("--out", help="Run folder (TensorBoard, checkpoint, config).")]
NumEnvsOpt = Annotated[int | None, typer.Option("--num-envs", help="Envs stepped together.")]
ResumeOpt = Annotated[bool, typer.Option("--resume", help="Continue from OUT/checkpoint if there is one.")]
TrustResumeOpt = Annotated[
    bool,
    typer.Option(
        "--trust-resume",
        help="Load a resume file that this user's runs did not sign (it holds pickled state: only for safe files).",
    ),
]
ConfigOpt = Annotated[str | None, typer.Option("--config", help="YAML file or a name in train/configs.")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="key=value override (repeatable).")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")]
BCFromOpt = Annotated[
    str | None,
    typer.Option(
        "--bc-from",
        help="DDQN warm start: behaviour-clone this expert first (a placement rule of WorkerPlacement-v0's "
        "heuristic_action: consolidate, closest, pack, ...); same as --set bc_from=RULE.",
    ),
]
BCStepsOpt = Annotated[
    int | None,
    typer.Option("--bc-steps", help="DDQN warm start: pre-training gradient steps (--set bc_steps=N)."),
]


def invoked_command(algorithm: str, **options) -> str:
    """The command line that reproduces this run (the given options, in canonical form)."""
    parts = ["python", "-m", "train", algorithm]
    for name, value in options.items():
        flag = "--" + name.rstrip("_").replace("_", "-")
        if value is None or value is False or value == []:
            continue
        if value is True:
            parts.append(flag)
        elif isinstance(value, list):
            for v in value:
                parts += [flag, str(v)]
        else:
            parts += [flag, str(value)]
    return shlex.join(parts)


def user_error_message(exc: BaseException) -> str:
    """One line for a user error; a bare KeyError (``'bogus'``) becomes ``missing or unknown key 'bogus'``."""
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return f"missing or unknown key {exc.args[0]!r}"
    return str(exc)


def parse_env_kwargs(text: str) -> dict:
    """``--env-kwargs``: a JSON object, or one line saying why not."""
    try:
        extra = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--env-kwargs is not valid JSON: {exc}") from None
    if not isinstance(extra, dict):
        raise ValueError("--env-kwargs must be a JSON object")
    return extra


def build_config(algorithm: str, env, env_kwargs, steps, seed, device, num_envs, config, set_, progress):
    import dataclasses

    from gpusched_lab.agents.algos.ddqn import DDQNArgs
    from gpusched_lab.agents.algos.ppo import PPOArgs
    from gpusched_lab.train.config import RunConfig, apply_set, load_yaml, validate

    cfg = RunConfig(algorithm=algorithm)
    if config:
        for key, value in load_yaml(config).items():
            setattr(cfg, key, value)
    if env is not None:
        cfg.env = env
    if env_kwargs:
        cfg.env_kwargs = {**cfg.env_kwargs, **parse_env_kwargs(env_kwargs)}
    for name, value in (("steps", steps), ("seed", seed), ("num_envs", num_envs)):
        if value is not None:
            setattr(cfg, name, value)
    cfg.args = dict(cfg.args)
    if device is not None:
        cfg.args["device"] = device
    fields = {f.name for f in dataclasses.fields(PPOArgs if algorithm == "ppo" else DDQNArgs)} - {"seed"}
    apply_set(cfg, set_ or [], fields)
    cfg.progress = progress
    validate(cfg)
    if cfg.num_envs < 1 or cfg.steps < 1:
        raise ValueError("--num-envs and --steps must be >= 1")
    return cfg


def _train(
    algorithm: str,
    env,
    env_kwargs,
    steps,
    seed,
    device,
    out,
    num_envs,
    resume,
    config,
    set_,
    progress,
    trust_resume: bool = False,
    bc_from: str | None = None,
    bc_steps: int | None = None,
):
    from gpusched_envs.errors import USER_ERRORS

    try:
        if (bc_from is not None or bc_steps is not None) and algorithm != "ddqn":
            raise ValueError("--bc-from / --bc-steps are options of the ddqn trainer")
        if bc_steps is not None and bc_steps < 0:
            raise ValueError(f"--bc-steps must be >= 0, got {bc_steps}")
        bc_set = [f"bc_from={bc_from}"] if bc_from is not None else []
        bc_set += [f"bc_steps={bc_steps}"] if bc_steps is not None else []
        merged = [*bc_set, *(set_ or [])] or None  # --set, given later, has the last word
        cfg = build_config(
            algorithm, env, env_kwargs, steps, seed, device, num_envs, config, merged, progress
        )
        from gpusched_lab.train.runner import run_ddqn, run_ppo

        run = run_ppo if algorithm == "ppo" else run_ddqn
        command = invoked_command(
            algorithm,
            config=config,
            env=env,
            env_kwargs=env_kwargs,
            steps=steps,
            seed=seed,
            device=device,
            num_envs=num_envs,
            set=set_,
            bc_from=bc_from,
            bc_steps=bc_steps,
            out=out,
        )
        result = run(cfg, out, command, resume=resume, trust_resume=trust_resume)
    except USER_ERRORS as exc:
        typer.echo(f"error: {user_error_message(exc)}", err=True)
        raise typer.Exit(2) from None
    ev = result.get("evaluation") or {}
    label = {"avg_jct": "avg JCT"}.get(ev.get("objective_name", "avg_jct"), ev.get("objective_name"))
    typer.echo(
        f"{algorithm}: {result['steps']} steps; eval {label} {ev.get('objective', float('nan')):,.0f} s on "
        f"seeds {ev.get('seeds')}; checkpoint {out / 'checkpoint'}"
    )


TRAINERS = {
    "ddqn": "Double DQN (agents.algos.ddqn) with a GNN, CNN or MLP Q-network (--set encoder=gnn|cnn|mlp).",
    "ppo": "MaskablePPO (sb3-contrib) with the GNN / CNN / MLP features extractor (--set encoder=...).",
    "topdrl": "TopDRL: CNN job selector + closest-GPU placer on JobSelect-v0 (image observations), trained with DDQN.",
}


def trainer_command(algorithm: str):
    """The ``train ALGORITHM`` command: every trainer takes the same options and runs :func:`_train`."""

    def command(
        env: EnvOpt = None,
        env_kwargs: EnvKwargsOpt = None,
        steps: StepsOpt = None,
        seed: SeedOpt = None,
        device: DeviceOpt = None,
        out: OutOpt = Path(f"runs/{algorithm}"),
        num_envs: NumEnvsOpt = None,
        resume: ResumeOpt = False,
        trust_resume: TrustResumeOpt = False,
        config: ConfigOpt = None,
        set_: SetOpt = None,
        progress: ProgressOpt = True,
        bc_from: BCFromOpt = None,
        bc_steps: BCStepsOpt = None,
    ) -> None:
        options = {k: v for k, v in locals().items() if k != "algorithm"}  # this command's options, by name
        _train(algorithm, **options)

    command.__doc__ = TRAINERS[algorithm]
    return command


for _name in TRAINERS:
    app.command(_name)(trainer_command(_name))


@app.command()
def hmarl(
    config: Annotated[str, typer.Option("--config", help="YAML file or a name in train/configs.")] = "hmarl",
    steps: StepsOpt = None,
    seed: SeedOpt = None,
    device: DeviceOpt = None,
    out: OutOpt = Path("runs/hmarl"),
    resume: ResumeOpt = False,
    set_: SetOpt = None,
) -> None:
    """HMARL (agents.methods.hmarl.agent): MAPPO with a hierarchical-GNN shared actor on multi_scheduler_v0 (configs hmarl*)."""
    from gpusched_lab.agents.methods.hmarl.agent import train_command

    from gpusched_envs.errors import USER_ERRORS

    command = invoked_command(
        "hmarl", config=config, steps=steps, seed=seed, device=device, set=set_, out=out
    )
    try:
        result = train_command(config, out, steps, seed, device, resume, set_, command, log=typer.echo)
    except USER_ERRORS as exc:
        typer.echo(f"error: {user_error_message(exc)}", err=True)
        raise typer.Exit(2) from None
    ev = result.get("evaluation") or {}
    typer.echo(
        f"hmarl: {result['steps']} steps; eval avg JCT {ev.get('avg_jct', float('nan')):,.0f} s on seeds "
        f"{ev.get('seeds')}; checkpoint {out / 'checkpoint'}"
    )


def _add_plugin_commands() -> None:
    """Subcommands of ``gpusched train`` from other packages, found by entry point (group
    ``gpusched.train_commands``): ``compare`` (a checkpoint against the heuristics of its information class) is
    registered by ``gpusched_lab.evaluate``, so this package does not import the evaluation package."""
    import warnings
    from importlib.metadata import entry_points

    for ep in entry_points(group="gpusched.train_commands"):
        try:
            app.command(name=ep.name)(ep.load())
        except Exception as exc:  # a broken plugin must not break the training commands
            warnings.warn(
                f"gpusched train: cannot load command {ep.name!r} ({ep.value}): {exc}", stacklevel=2
            )


_add_plugin_commands()
