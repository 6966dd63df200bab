"""``python -m gpusched_lab.train {ddqn,ppo,topdrl,hmarl}`` (also ``gpusched train ...`` through the ``gpusched.commands`` entry point).

    python -m gpusched_lab.train ddqn --env gpusched/JobSelect-v1 --steps 20000 --seed 0 --out runs/ddqn-gnn
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

from gpusched_envs.validation import Float, Int, Name, Seed, Seeds, Text

app = typer.Typer(
    help="Train learning schedulers (DDQN, MaskablePPO, TopDRL, HMARL) on the gpusched envs, or offline from a "
    "recorded dataset (bc, cql); `compare` (registered by the evaluation package) scores a checkpoint against the heuristics of its information class.",
    no_args_is_help=True,
    add_completion=False,
)

EnvOpt = Annotated[str | None, typer.Option("--env", help="Env id, e.g. gpusched/JobSelect-v1.")]
EnvKwargsOpt = Annotated[
    str | None, typer.Option("--env-kwargs", parser=Text(), help="Env keyword arguments as a JSON object.")
]
StepsOpt = Annotated[
    int | None, typer.Option("--steps", parser=Int(min=1, cap="steps"), help="Total env steps (>= 1).")
]
SeedOpt = Annotated[
    int | None, typer.Option("--seed", parser=Seed(), help="Seed (python, numpy, torch, envs; >= 0).")
]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="auto | cpu | cuda[:N].")]
OutOpt = Annotated[Path, typer.Option("--out", help="Run folder (TensorBoard, checkpoint, config).")]
NumEnvsOpt = Annotated[
    int | None,
    typer.Option(
        "--num-envs",
        parser=Int(min=1, cap="envs"),
        help="Env copies stepped together in one process by the vector env (>= 1; at most 1,024, "
        "GPUSCHED_MAX_ENVS raises the cap).",
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue from OUT/checkpoint if there is one, to the run's own step budget unless --steps, "
        "--set steps=N or --config gives one.",
    ),
]
TrustResumeOpt = Annotated[
    bool,
    typer.Option(
        "--trust-resume",
        help="Load a resume file that this user's runs did not sign (it holds pickled state: only for safe files).",
    ),
]
ConfigOpt = Annotated[str | None, typer.Option("--config", help="YAML file or a name in train/configs.")]

# the keys --set takes, by trainer (tests/train check them against the configs' fields)
RUN_KEYS = "steps, seed, num_envs, eval_every, eval_seeds, eval_choices, checkpoint_every, env, curriculum"
SHARED_ARGS = (
    "encoder, hidden, layers, gnn_impl, learning_rate, batch_size, gamma, max_grad_norm, reward_scale, seed, "
    "device, torch_threads"
)
SET_KEYS = {
    "ddqn": f"{SHARED_ARGS}, buffer_size, n_step, tau, target_update_interval, start_epsilon, end_epsilon, "
    "exploration_fraction, learning_starts, train_frequency, gradient_steps, bc_from, bc_steps, bc_demo_steps, "
    "bc_margin, bc_weight, bc_learning_rate",
    "ppo": f"{SHARED_ARGS}, lr_final_fraction, target_kl, n_steps, n_epochs, gae_lambda, clip_range, ent_coef, "
    "vf_coef, wait_logit_init, hint_logit, rule_logit_init",
}
SET_KEYS["topdrl"] = SET_KEYS["ddqn"]


def set_option(algorithm: str):
    """The ``--set`` option of a trainer, its help listing the keys it takes."""
    extra = "; bc.NAME (imitation warm start)" if algorithm == "ppo" else ""
    return Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help=f"key=value override, repeatable; the value is read as YAML. Run keys: {RUN_KEYS}. "
            f"{algorithm} arguments (NAME or args.NAME): {SET_KEYS[algorithm]}. Env arguments: env_kwargs.NAME{extra}.",
        ),
    ]


SetOpt = set_option("ppo")
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")]
BCFromOpt = Annotated[
    str | None,
    typer.Option(
        "--bc-from",
        help="DDQN warm start: behaviour-clone this expert first (a placement rule of WorkerPlacement-v1's "
        "heuristic_action: consolidate, closest, pack, ...); same as --set bc_from=RULE.",
    ),
]
BCStepsOpt = Annotated[
    int | None,
    typer.Option("--bc-steps", help="DDQN warm start: pre-training gradient steps, >= 0 (--set bc_steps=N)."),
]


def invoked_command(algorithm: str, **options) -> str:
    """The command line that reproduces this run (the given options, in canonical form)."""
    parts = ["gpusched", "train", algorithm]
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

    from gpusched_lab.train.config import RunConfig, apply_set, args_rules, args_type, load_yaml, validate

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
    fields = {f.name for f in dataclasses.fields(args_type(algorithm))} - {"seed"}
    apply_set(cfg, set_ or [], fields, args_rules(algorithm))
    cfg.progress = progress
    validate(cfg)
    if cfg.num_envs < 1 or cfg.steps < 1:
        raise ValueError("--num-envs and --steps must be >= 1")
    return cfg


def steps_given(steps, config, set_) -> bool:
    """Whether the command sets the step budget: ``--steps``, ``--set steps=N`` or a ``steps`` key of ``--config``."""
    from gpusched_lab.train.config import load_yaml

    if steps is not None or any(item.split("=", 1)[0].strip() == "steps" for item in set_ or []):
        return True
    return bool(config) and "steps" in load_yaml(config)


def keep_saved_budget(cfg, out: Path) -> None:
    """``--resume`` without a step budget continues to the run's own budget (saved in OUT/config.json), not to the
    default one."""
    from gpusched_lab.train.runner import read_config

    if (out / "config.json").is_file():
        cfg.steps = read_config(out)[0].steps


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
        if bc_steps is not None:
            from gpusched_envs.validation import check_int

            check_int(bc_steps, "--bc-steps", min=0, cap="steps")
        bc_set = [f"bc_from={bc_from}"] if bc_from is not None else []
        bc_set += [f"bc_steps={bc_steps}"] if bc_steps is not None else []
        merged = [*bc_set, *(set_ or [])] or None  # --set, given later, has the last word
        cfg = build_config(
            algorithm, env, env_kwargs, steps, seed, device, num_envs, config, merged, progress
        )
        if resume and not steps_given(steps, config, set_):
            keep_saved_budget(cfg, out)
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
    "topdrl": "TopDRL: CNN job selector + closest-GPU placer on JobSelect-v1 (image observations), trained with DDQN.",
}


def trainer_command(algorithm: str):
    """The ``train ALGORITHM`` command: the trainers share their options and run :func:`_train`; the DDQN-based
    ones (ddqn, topdrl) also take the behaviour-cloning warm start, ddqn only its flags."""

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
        bc_from: Annotated[str | None, typer.Option("--bc-from", hidden=True)] = None,
        bc_steps: Annotated[int | None, typer.Option("--bc-steps", hidden=True)] = None,
    ) -> None:
        # --bc-from / --bc-steps are ddqn's: hidden here, and refused with a line saying so
        options = {k: v for k, v in locals().items() if k != "algorithm"}
        _train(algorithm, **options)

    def ddqn_command(
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
        options = {k: v for k, v in locals().items() if k != "algorithm"}
        _train(algorithm, **options)

    chosen = ddqn_command if algorithm == "ddqn" else command
    chosen.__doc__ = TRAINERS[algorithm]
    chosen.__annotations__["set_"] = set_option(algorithm)  # the help lists this trainer's keys
    return chosen


for _name in TRAINERS:
    app.command(_name)(trainer_command(_name))


def imitation_budget(block: dict | None, steps: int) -> list[str]:
    """``--set`` items that bound HMARL's imitation warm start to ``steps`` env steps: rounds x episodes x
    max_steps <= steps (rounds, then episodes per round, then steps per episode are lowered as needed); 0 turns
    the warm start off."""
    from gpusched_lab.agents.methods.hmarl.config import ImitationArgs

    if block is None:
        return []
    if steps == 0:
        return ["imitation=null"]
    args = ImitationArgs(**{k: v for k, v in block.items() if k in ImitationArgs.__dataclass_fields__})
    rounds = min(args.rounds, steps)
    episodes = min(args.episodes, max(1, steps // rounds))
    max_steps = min(args.max_steps, max(1, steps // (rounds * episodes)))
    return [
        f"imitation.rounds={rounds}",
        f"imitation.episodes={episodes}",
        f"imitation.max_steps={max_steps}",
    ]


@app.command()
def hmarl(
    config: Annotated[str, typer.Option("--config", help="YAML file or a name in train/configs.")] = "hmarl",
    steps: Annotated[
        int | None,
        typer.Option(
            "--steps",
            parser=Int(min=1, cap="steps"),
            help="Env steps of the MAPPO updates (>= 1); the imitation warm start before them is bounded by "
            "--imitation-steps.",
        ),
    ] = None,
    imitation_steps: Annotated[
        int | None,
        typer.Option(
            "--imitation-steps",
            parser=Int(min=0, cap="steps"),
            help="Env steps of the imitation warm start at most (its rounds, episodes and episode length are "
            "lowered to fit; 0 skips it). Default: the config's imitation block, rounds x episodes x max_steps.",
        ),
    ] = None,
    seed: SeedOpt = None,
    device: DeviceOpt = None,
    out: OutOpt = Path("runs/hmarl"),
    resume: ResumeOpt = False,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="key=value override, repeatable; the value is read as YAML. Run keys: steps, eval_every, "
            "eval_seeds, checkpoint_every, imitation (null: none). Learner arguments (NAME or args.NAME): critic, "
            "hidden, layers, learning_rate, num_envs, n_steps, n_epochs, batch_size, gamma, gae_lambda, clip_range, "
            "ent_coef, vf_coef, max_grad_norm, reward_scale, wait_logit_init, interference_model, seed, device, "
            "torch_threads. Imitation: imitation.NAME (expert, rounds, episodes, epochs, batch_size, "
            "learning_rate, value_coef, beta_decay, max_steps). Env arguments: env_kwargs.NAME, eval_env_kwargs.NAME.",
        ),
    ] = None,
) -> None:
    """HMARL: MAPPO with a hierarchical-GNN shared actor on the multi-agent env multi_scheduler_v1 (configs
    hmarl*), after an optional imitation warm start (the config's imitation block)."""
    from gpusched_envs.errors import USER_ERRORS

    command = invoked_command(
        "hmarl",
        config=config,
        steps=steps,
        imitation_steps=imitation_steps,
        seed=seed,
        device=device,
        set=set_,
        out=out,
    )
    try:
        from gpusched_lab.agents.methods.hmarl.agent import train_command
        from gpusched_lab.agents.methods.hmarl.config import apply_overrides, load_config

        cfg = load_config(config)  # checked before anything runs: a bad file or --set key is one line
        apply_overrides(cfg, list(set_ or []))
        items = [
            *(set_ or []),
            *(imitation_budget(cfg.imitation, imitation_steps) if imitation_steps is not None else []),
        ]
        result = train_command(config, out, steps, seed, device, resume, items, command, log=typer.echo)
    except USER_ERRORS as exc:
        typer.echo(f"error: {user_error_message(exc)}", err=True)
        raise typer.Exit(2) from None
    ev = result.get("evaluation") or {}
    typer.echo(
        f"hmarl: {result['steps']} steps; eval avg JCT {ev.get('avg_jct', float('nan')):,.0f} s on seeds "
        f"{ev.get('seeds')}; checkpoint {out / 'checkpoint'}"
    )


OFFLINE = {
    "bc": "Behaviour cloning from a recorded dataset (`gpusched dataset`): the policy imitates the dataset's actions.",
    "cql": "Discrete Conservative Q-Learning (Kumar et al., NeurIPS 2020) from a recorded dataset's rewards, offline.",
}


def offline_command(algorithm: str):
    """The ``train bc`` / ``train cql`` command (:mod:`gpusched_lab.train.offline`)."""

    def command(
        dataset: Annotated[
            str,
            typer.Option(
                "--dataset",
                parser=Name(),
                help="Dataset name (`gpusched dataset --name`), e.g. srtf-topdrl-v0.",
            ),
        ],
        root: Annotated[
            Path | None,
            typer.Option(help="Datasets folder (default: $MINARI_DATASETS_PATH, else ~/.minari/datasets)."),
        ] = None,
        out: OutOpt = Path(f"runs/{algorithm}"),
        steps: Annotated[
            int, typer.Option("--steps", parser=Int(min=1, cap="steps"), help="Gradient steps (>= 1).")
        ] = 4000,
        seed: Annotated[int, typer.Option("--seed", parser=Seed(), help="Seed (torch, batches; >= 0).")] = 0,
        encoder: Annotated[
            str | None, typer.Option(help="mlp | gnn | cnn (default: the dataset's observation mode's).")
        ] = None,
        hidden: Annotated[
            int, typer.Option("--hidden", parser=Int(min=1, max=4096), help="Hidden width (>= 1).")
        ] = 128,
        batch_size: Annotated[
            int, typer.Option("--batch-size", parser=Int(min=1, max=65536), help="Batch size (>= 1).")
        ] = 256,
        learning_rate: Annotated[
            float,
            typer.Option(
                "--learning-rate", parser=Float(min=0, min_open=True, max=1), help="Adam step size."
            ),
        ] = 1e-3,
        alpha: Annotated[
            float,
            typer.Option(
                "--alpha", parser=Float(min=0), help="CQL: weight of the conservative term (>= 0; cql only)."
            ),
        ] = 1.0,
        eval_seeds: Annotated[
            str | None,
            typer.Option(
                "--eval-seeds",
                parser=Seeds(),
                help="Held-out seeds (not in the dataset) to run the trained policy on, e.g. 100-109.",
            ),
        ] = None,
        progress: ProgressOpt = True,
    ) -> None:
        from gpusched_envs.errors import USER_ERRORS

        command_line = invoked_command(
            algorithm,
            dataset=dataset,
            root=root,
            steps=steps,
            seed=seed,
            encoder=encoder,
            hidden=hidden,
            batch_size=batch_size,
            learning_rate=learning_rate,
            alpha=alpha if algorithm == "cql" else None,
            eval_seeds=",".join(map(str, eval_seeds)) if eval_seeds else None,
            out=out,
        )
        try:
            from gpusched_lab.train.offline import DatasetError, OfflineArgs, train_offline

            if algorithm == "bc" and alpha != 1.0:
                raise DatasetError("--alpha is an option of train cql")
            args = OfflineArgs(
                encoder=encoder,
                hidden=hidden,
                steps=steps,
                batch_size=batch_size,
                learning_rate=learning_rate,
                seed=seed,
                alpha=alpha,
            )
            result = train_offline(
                algorithm,
                dataset,
                out,
                args,
                root=root,
                eval_seeds=eval_seeds or (),
                command=command_line,
                progress=progress,
            )
        except (*USER_ERRORS, DatasetError) as exc:
            typer.echo(f"error: {user_error_message(exc)}", err=True)
            raise typer.Exit(2) from None
        final = result["history"][-1]
        line = (
            f"{algorithm}: {result['transitions']:,} transitions of {result['episodes']} episodes, {steps} steps, "
            f"loss {final['loss']:.4g}, agreement with the data {final['agreement']:.1%}"
        )
        ev = result["evaluation"]
        if ev:
            line += f"; avg JCT {ev['mean'].get('avg_jct', float('nan')):,.0f} s on seeds {ev['seeds']}"
        typer.echo(f"{line}; checkpoint {out}")

    command.__doc__ = OFFLINE[algorithm]
    return command


for _name in OFFLINE:
    app.command(_name)(offline_command(_name))


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
