"""``python -m train``: the same commands as ``gpusched train``."""

from train.cli import app

if __name__ == "__main__":
    app(prog_name="python -m train")
