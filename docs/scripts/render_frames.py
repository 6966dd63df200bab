"""Render one ``rgb_array`` frame of every environment into docs/img/ (the pictures of the env cards).

Run from the repository root: ``python docs/scripts/render_frames.py``. Each env is reset with seed 0 and stepped
with valid actions drawn by a seeded generator a fixed number of times, so the frames are the same on every run.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import gymnasium as gym
import numpy as np

import gpusched_envs.envs  # noqa: F401  (registers the ids)
from gpusched_envs.multi_agent import multi_scheduler_v1

OUT = Path(__file__).resolve().parents[1] / "img"

SINGLE = {
    "job-select": ("gpusched/JobSelect-v1", {"cluster": "topdrl", "num_jobs": 60}, 40),
    "worker-placement": ("gpusched/WorkerPlacement-v1", {"cluster": "topdrl", "num_jobs": 60}, 60),
    "delay-tuning": ("gpusched/DelayTuning-v1", {"cluster": "topdrl", "num_jobs": 60}, 6),
    "dag-schedule": ("gpusched/DAGSchedule-v1", {"dag": "dag:random:n=20,ccr=1.0"}, 20),
}


def write_png(path: Path, rgb: np.ndarray) -> None:
    """Write an (H, W, 3) uint8 array as a PNG file (no imaging library needed)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    height, width, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def upscale(rgb: np.ndarray, min_width: int = 480) -> np.ndarray:
    """Nearest-neighbour upscaling so that small frames stay readable in a browser."""
    factor = max(1, -(-min_width // rgb.shape[1]))
    return rgb.repeat(factor, axis=0).repeat(factor, axis=1)


def pick(mask: np.ndarray, rng: np.random.Generator) -> int:
    """A valid action drawn by the seeded generator (so the frame shows a varied, reproducible state)."""
    return int(rng.choice(np.flatnonzero(mask)))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (env_id, kwargs, steps) in SINGLE.items():
        env = gym.make(env_id, render_mode="rgb_array", **kwargs)
        obs, _ = env.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(steps):
            obs, _, terminated, truncated, _ = env.step(pick(obs["action_mask"], rng))
            if terminated or truncated:
                break
        write_png(OUT / f"{name}.png", upscale(env.render()))
        env.close()
        print(f"wrote {OUT / name}.png")
    env = multi_scheduler_v1.parallel_env(
        num_agents=4, cluster="hetero64", num_jobs=40, render_mode="rgb_array"
    )
    observations, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(15):
        if not env.agents:
            break
        actions = {a: pick(o["action_mask"], rng) for a, o in observations.items()}
        observations, *_ = env.step(actions)
    write_png(OUT / "multi-scheduler.png", upscale(env.render()))
    print(f"wrote {OUT / 'multi-scheduler'}.png")


if __name__ == "__main__":
    main()
