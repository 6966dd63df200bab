"""Learning curves (PNG) from training runs' TensorBoard events: episode average JCT (smoothed) and the evaluation
objective against env steps, one line per run (e.g. the seeds of one configuration), and per run a summary: the
samples and wall time it took, its best evaluation, and whether the evaluation curve has plateaued (no gain of more
than ``--tolerance`` in its last third over the best before it).

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


def run_summary(run: Path, tag: str = "eval/avg_jct", tolerance: float = 0.01) -> dict:
    """Samples (last logged step), wall time (first to last event of any scalar), the best evaluation and its step,
    and the plateau test: ``plateaued`` when the best value of the last third of the evaluations (by step) is not
    below ``(1 - tolerance) ×`` the best before it (None with fewer than three evaluations)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run / "tb"))
    ea.Reload()
    events = [e for t in ea.Tags()["scalars"] for e in ea.Scalars(t)]
    out = {
        "run": run.name,
        "samples": max((e.step for e in events), default=0),
        "wall_s": (max(e.wall_time for e in events) - min(e.wall_time for e in events)) if events else 0.0,
        "evaluations": 0,
        "best": None,
        "best_step": None,
        "plateaued": None,
    }
    steps, values = read_scalars(run, tag)
    if not len(values):
        return out
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    i = int(np.argmin(values))
    out.update(evaluations=len(values), best=float(values[i]), best_step=int(steps[i]))
    if len(values) >= 3:
        cut = steps[-1] - (steps[-1] - steps[0]) / 3.0
        before, last = values[steps < cut], values[steps >= cut]
        if len(before) and len(last):
            out["plateaued"] = bool(last.min() >= (1.0 - tolerance) * before.min())
    return out


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
    if axes[0].get_legend_handles_labels()[0]:
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
    parser.add_argument(
        "--tolerance", type=float, default=0.01, help="relative gain the last third must beat (default 0.01)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the per-run summaries here")
    a = parser.parse_args(argv)
    missing = [str(r) for r in a.runs if not (r / "tb").is_dir()]
    if missing:
        parser.error(f"not a training run (no tb/ folder): {', '.join(missing)}")
    if not 0.0 <= a.tolerance < 1.0:
        parser.error(f"--tolerance: expected a fraction in [0, 1), got {a.tolerance}")
    print(plot(a.runs, a.out, a.title))
    rows = [run_summary(r, tolerance=a.tolerance) for r in a.runs]
    for r in rows:
        best = (
            "no evaluation" if r["best"] is None else f"best eval {r['best']:,.0f} at step {r['best_step']:,}"
        )
        flat = {None: "too few evaluations", True: "plateaued", False: "still improving"}[r["plateaued"]]
        print(f"{r['run']}: {r['samples']:,} samples in {r['wall_s'] / 60:.1f} min; {best}; {flat}")
    if a.json is not None:
        import json

        from gpusched_envs.io import atomic_write_text

        atomic_write_text(a.json, json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
