"""``python -m gpusched_lab.train``: the same commands as ``gpusched train``."""

from gpusched_lab.train.cli import app

if __name__ == "__main__":
    app(prog_name="python -m gpusched_lab.train")
