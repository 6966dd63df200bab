"""``gpusched meta-train``: meta-training (Reptile / FOMAML) of the MetaPlace worker-placement policy, or the
multi-task baseline, on the training tasks of ``WorkerPlacement-v0`` (:func:`agents.methods.metaplace.agent.meta_train`).
``gpusched adapt`` (:mod:`gpusched_lab.evaluate.adapt`) evaluates the checkpoints it writes.

    gpusched meta-train --config train/configs/meta.yaml --out checkpoints/workerplacement_gnn
    gpusched meta-train --config train/configs/meta.yaml --mode multitask --out checkpoints/multitask_gnn
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_META = "checkpoints/workerplacement_gnn"
DEFAULT_MULTITASK = "checkpoints/multitask_gnn"


def _fail(message: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def meta_train_cmd(
    out: Annotated[Path, typer.Option(help="Checkpoint folder (resumed when it exists).")] = Path(
        DEFAULT_META
    ),
    mode: Annotated[str, typer.Option(help="meta (Reptile / FOMAML) | multitask (baseline)")] = "meta",
    config: Annotated[
        Path | None, typer.Option(help="YAML of MetaArgs fields (e.g. train/configs/meta.yaml).")
    ] = None,
    iterations: Annotated[
        int | None, typer.Option(min=1, help="Outer iterations (overrides the config).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (overrides the config).")] = None,
    resume: Annotated[bool, typer.Option(help="Resume from OUT when it holds a checkpoint.")] = True,
) -> None:
    """Meta-train the MetaPlace worker-placement policy (or the multi-task baseline) on the training tasks."""
    import yaml
    from gpusched_lab.agents.methods.metaplace.agent import MetaArgs, meta_train

    if mode not in ("meta", "multitask"):
        _fail(f"--mode: expected meta or multitask, got {mode!r}")
    kv: dict = {}
    if config is not None:
        if not config.exists():
            _fail(f"--config {config}: no such file")
        kv = yaml.safe_load(config.read_text()) or {}
        if not isinstance(kv, dict):
            _fail(f"--config {config}: expected a mapping of MetaArgs fields")
        fields = {f.name for f in dataclasses.fields(MetaArgs)}
        unknown = sorted(set(kv) - fields)
        if unknown:
            _fail(
                f"--config {config}: unknown field(s) {', '.join(unknown)}; valid: {', '.join(sorted(fields))}"
            )
    if iterations is not None:
        kv["iterations"] = iterations
    if seed is not None:
        kv["seed"] = seed
    try:
        args = MetaArgs(**kv)
    except TypeError as exc:
        _fail(f"--config {config}: {exc}")
    if args.outer not in ("reptile", "fomaml"):
        _fail(f"outer must be reptile or fomaml, got {args.outer!r}")
    meta_train(args, out, mode=mode, resume=resume, log=lambda m: typer.echo(m))
