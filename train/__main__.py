"""``python -m gpusched_lab.train``: the same commands as ``gpusched train``."""

import typer
from gpusched_lab.train.cli import app

from gpusched_envs.cli import run_command

if __name__ == "__main__":
    run_command(typer.main.get_command(app), prog_name="python -m gpusched_lab.train")
