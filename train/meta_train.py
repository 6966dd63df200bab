"""``gpusched meta-train``: meta-training (Reptile / FOMAML) of the MetaPlace worker-placement policy, or the
multi-task baseline, on the training tasks of ``WorkerPlacement-v1`` (:func:`agents.methods.metaplace.agent.meta_train`).
``gpusched adapt`` (:mod:`gpusched_lab.evaluate.adapt`) evaluates the checkpoints it writes.

    gpusched meta-train --config train/configs/meta.yaml --out checkpoints/workerplacement_gnn
    gpusched meta-train --config train/configs/meta.yaml --mode multitask --out checkpoints/multitask_gnn
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from gpusched_envs.validation import Int, Seed

DEFAULT_META = "checkpoints/workerplacement_gnn"
DEFAULT_MULTITASK = "checkpoints/multitask_gnn"


def _fail(message: str) -> None:
    from gpusched_envs.cli import print_error

    print_error(message)  # escaped: a value echoed back is text, not markup
    raise typer.Exit(code=2)


def read_meta_config(config: Path) -> dict:
    """A YAML file of MetaArgs fields, read with the safe loader's limits; every field checked (known name with a
    did-you-mean, range); one ``ValueError`` line naming the file and field otherwise."""
    from gpusched_lab.agents.methods.metaplace.agent import MetaArgs

    from gpusched_envs.safety import load_yaml
    from gpusched_envs.validation import check_fields, rules_of

    if not config.is_file():
        raise ValueError(f"--config {config}: no such file")
    kv = load_yaml(config.read_bytes(), str(config)) or {}
    if not isinstance(kv, dict):
        raise ValueError(f"{config}: expected a mapping of MetaArgs fields")
    check_fields(kv, str(config), rules_of(MetaArgs), known=[f.name for f in dataclasses.fields(MetaArgs)])
    return kv


def meta_train_cmd(
    out: Annotated[Path, typer.Option(help="Checkpoint folder (resumed when it exists).")] = Path(
        DEFAULT_META
    ),
    mode: Annotated[str, typer.Option(help="meta (Reptile / FOMAML) | multitask (baseline)")] = "meta",
    config: Annotated[
        Path | None, typer.Option(help="YAML of MetaArgs fields (e.g. train/configs/meta.yaml).")
    ] = None,
    iterations: Annotated[
        int | None,
        typer.Option(
            parser=Int(min=1, cap="evaluations"), help="Outer iterations, >= 1 (overrides the config)."
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(parser=Seed(), help="Seed, >= 0 (overrides the config).")
    ] = None,
    resume: Annotated[bool, typer.Option(help="Resume from OUT when it holds a checkpoint.")] = True,
) -> None:
    """Meta-train the MetaPlace worker-placement policy (or the multi-task baseline) on the training tasks."""
    from gpusched_lab.agents.methods.metaplace.agent import MetaArgs, meta_train

    from gpusched_envs.validation import ValidationError, check_cap, check_fields, rules_of

    if mode not in ("meta", "multitask"):
        _fail(f"--mode: expected meta or multitask, got {mode!r}")
    kv: dict = {}
    if config is not None:
        try:
            kv = read_meta_config(config)
        except ValueError as exc:
            _fail(str(exc))
    if iterations is not None:
        kv["iterations"] = iterations
    if seed is not None:
        kv["seed"] = seed
    args = MetaArgs(**kv)
    where = str(config) if config is not None else "MetaArgs"
    try:
        check_fields(args, where, rules_of(MetaArgs))
        # tasks adapted over the run: meta_batch x iterations, each with its inner episodes
        check_cap("evaluations", args.meta_batch * args.iterations, f"{where}: meta_batch x iterations")
    except ValidationError as exc:
        _fail(str(exc))
    if args.outer not in ("reptile", "fomaml"):
        _fail(f"{where}: outer must be reptile or fomaml, got {args.outer!r}")
    meta_train(args, out, mode=mode, resume=resume, log=lambda m: typer.echo(m))
