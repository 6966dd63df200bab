"""Learning curves (PNG) from training runs' TensorBoard events: episode average JCT (smoothed) and the evaluation
objective against env steps, one line per run (e.g. the seeds of one configuration).

    python -m gpusched_lab.train.curves runs/ppo_nc_s0 runs/ppo_nc_s1 runs/ppo_nc_s2 --out checkpoints/curves/ppo_nc.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

PANELS = (("episode/avg_jct", "training episodes: avg JCT (s)"), ("eval/avg_jct", "evaluation: avg JCT (s)"))


def read_scalars(run: Path, tag: str) -> tuple[np.ndarray, np.ndarray]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run / "tb"))
    ea.Reload()
    if tag not in ea.Tags()["scalars"]:
        return np.zeros(0), np.zeros(0)
    events = ea.Scalars(tag)
    return np.array([e.step for e in events]), np.array([e.value for e in events])


def smooth(values: np.ndarray, window: int = 10) -> np.ndarray:
    if len(values) < window:
        return values
    kernel = np.ones(window) / window
    return np.convolve(values, kernel, mode="valid")


def plot(runs: list[Path], out: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpusched_envs.io import atomic_write_bytes

    fig, axes = plt.subplots(1, len(PANELS), figsize=(11, 3.6))
    for ax, (tag, label) in zip(axes, PANELS, strict=True):
        for run in runs:
            steps, values = read_scalars(run, tag)
            if tag.startswith("episode/") and len(values):
                values = smooth(values)
                steps = steps[len(steps) - len(values) :]
            if len(values):
                ax.plot(steps, values, marker="o" if tag.startswith("eval/") else None, label=run.name)
        ax.set_xlabel("env steps")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    atomic_write_bytes(out, buf.getvalue())
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs", nargs="+", type=Path, help="run folders (--out of python -m gpusched_lab.train)"
    )
    parser.add_argument("--out", type=Path, required=True, help="PNG file to write")
    parser.add_argument("--title", default="")
    a = parser.parse_args(argv)
    missing = [str(r) for r in a.runs if not (r / "tb").is_dir()]
    if missing:
        parser.error(f"not a training run (no tb/ folder): {', '.join(missing)}")
    print(plot(a.runs, a.out, a.title))


if __name__ == "__main__":
    main()
