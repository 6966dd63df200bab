"""Learning curves (PNG) from training runs' TensorBoard events: episode average JCT (smoothed) and the evaluation
objective against env steps, one line per run (e.g. the seeds of one configuration), and per run a summary: the
samples and wall time it took, its best evaluation, and whether the evaluation curve has plateaued (no gain of more
than ``--tolerance`` in its last third over the best before it).

A resumed run has one event file per process. Its curve is the history that survives: where a process restarted
from a checkpoint earlier than the last step the previous one logged, the previous one's later points are a
discarded branch (drawn as hollow markers, not joined). The best evaluation is taken over every evaluation logged,
discarded branches included, as the run's ``best/`` checkpoint is; the wall time is the sum of the processes' spans
(first to last event of each file), not counting the time the run was stopped.

    python -m gpusched_lab.train.curves runs/ppo_nc_s0 runs/ppo_nc_s1 runs/ppo_nc_s2 --out checkpoints/curves/ppo_nc.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

PANELS = (("episode/avg_jct", "training episodes: avg JCT (s)"), ("eval/avg_jct", "evaluation: avg JCT (s)"))


def _file_scalars(path: Path) -> list[tuple[int, float, str, float]]:
    """(step, wall time, tag, value) of every scalar in one event file, in the order written."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out = []
    for ev in EventFileLoader(str(path)).Load():
        if not ev.HasField("summary"):
            continue
        for v in ev.summary.value:
            kind = v.WhichOneof("value")
            if kind == "simple_value":
                value = float(v.simple_value)
            elif kind == "tensor":
                arr = tensor_util.make_ndarray(v.tensor)
                if arr.size != 1 or arr.dtype.kind not in "fiu":
                    continue
                value = float(arr.reshape(()))
            else:
                continue
            out.append((int(ev.step), float(ev.wall_time), v.tag, value))
    return out


def read_history(run: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], float]:
    """Per tag ``(steps, values, kept)`` over the run's event files, sorted by step (``kept`` False for points of a
    branch a resumed process discarded), and the summed wall time of the processes."""
    files = sorted((run / "tb").glob("events.out.tfevents.*"))
    per_file = [f for f in (_file_scalars(p) for p in files) if f]
    # a file that starts before the files after it end (a resumed process) discards their later points
    per_file.sort(key=lambda f: min(r[1] for r in f))
    wall = sum(max(r[1] for r in f) - min(r[1] for r in f) for f in per_file)
    rows: dict[str, list[tuple[int, float, bool]]] = {}
    for i, f in enumerate(per_file):
        restart = [min(r[0] for r in g) for g in per_file[i + 1 :]]
        for step, _, tag, value in f:
            kept = all(step < s for s in restart)
            rows.setdefault(tag, []).append((step, value, kept))
    out = {}
    for tag, r in rows.items():
        order = sorted(range(len(r)), key=lambda k: r[k][0])
        out[tag] = (
            np.array([r[k][0] for k in order], dtype=np.int64),
            np.array([r[k][1] for k in order], dtype=np.float64),
            np.array([r[k][2] for k in order], dtype=bool),
        )
    return out, wall


def read_scalars(run: Path, tag: str, discarded: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Steps and values of ``tag`` in step order: the surviving history, or with ``discarded`` every point."""
    history, _ = read_history(run)
    if tag not in history:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    steps, values, kept = history[tag]
    return (steps, values) if discarded else (steps[kept], values[kept])


def run_summary(run: Path, tag: str = "eval/avg_jct", tolerance: float = 0.01) -> dict:
    """Samples (last step of the surviving history), wall time (the processes' spans summed), the best evaluation
    and its step (over every evaluation logged, discarded branches included), and the plateau test:
    ``plateaued`` when the best value of the last third of the evaluations (by step) is not below
    ``(1 - tolerance) ×`` the best before it (None with fewer than three evaluations)."""
    history, wall = read_history(run)
    kept_steps = [int(s[k].max()) for s, _, k in history.values() if k.any()]
    out = {
        "run": run.name,
        "samples": max(kept_steps, default=0),
        "wall_s": wall,
        "evaluations": 0,
        "discarded_evaluations": 0,
        "best": None,
        "best_step": None,
        "plateaued": None,
    }
    if tag not in history:
        return out
    steps, values, kept = history[tag]
    i = int(np.argmin(values))
    out.update(
        evaluations=int(kept.sum()),
        discarded_evaluations=int((~kept).sum()),
        best=float(values[i]),
        best_step=int(steps[i]),
    )
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
    histories = {run: read_history(run)[0] for run in runs}  # each run's event files read once
    for ax, (tag, label) in zip(axes, PANELS, strict=True):
        for run in runs:
            if tag not in histories[run]:
                continue
            all_steps, all_values, kept = histories[run][tag]
            steps, values = all_steps[kept], all_values[kept]
            if tag.startswith("episode/") and len(values):
                values = smooth(values)
                steps = steps[len(steps) - len(values) :]
            if len(values):
                (line,) = ax.plot(
                    steps, values, marker="o" if tag.startswith("eval/") else None, label=run.name
                )
                if tag.startswith("eval/") and not kept.all():  # a discarded branch: hollow, not joined
                    ax.plot(all_steps[~kept], all_values[~kept], "o", mfc="none", color=line.get_color())
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
        gone = r["discarded_evaluations"]
        note = f" ({gone} evaluation{'s' if gone != 1 else ''} of a discarded branch)" if gone else ""
        print(f"{r['run']}: {r['samples']:,} samples in {r['wall_s'] / 60:.1f} min; {best}{note}; {flat}")
    if a.json is not None:
        import json

        from gpusched_envs.io import atomic_write_text

        atomic_write_text(a.json, json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
