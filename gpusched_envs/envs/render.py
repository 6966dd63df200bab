"""Rendering for the envs, kept apart from the dynamics: a text cluster map and an occupancy heat map drawn with numpy
(no plotting library needed)."""

from __future__ import annotations

import numpy as np

CELL = 8  # pixels per GPU slot
GAP = 2


def _job_colours(jobs: np.ndarray) -> np.ndarray:
    """(k, 3) uint8 stable pseudo-random colours per job id (bright enough to read on a dark background)."""
    h = (jobs.astype(np.uint64) * np.uint64(2654435761)) & np.uint64(0xFFFFFF)
    rgb = np.stack([(h >> np.uint64(s)) & np.uint64(0xFF) for s in (16, 8, 0)], axis=-1).astype(np.int64)
    return (80 + rgb * 175 // 255).astype(np.uint8)


def gpu_owner(sim) -> np.ndarray:
    """(G,) id of a job holding each GPU, -1 where free."""
    owner = np.full(sim.cluster.num_gpus, -1, dtype=np.int64)
    for j in sim.running:
        owner[sim.job_gpus[j]] = j
    return owner


def render_ansi(sim, window: list[int], title: str = "", extra: str = "") -> str:
    """Text map: one line per server (``.`` free GPU, a letter per job), then the queue window."""
    c = sim.cluster
    owner = gpu_owner(sim)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    lines = [
        f"{title} t={sim.now:.1f}s queued={len(sim.queue)} running={len(sim.running)} "
        f"free={sim.free_gpus()}/{c.num_gpus} GPUs done={sim.finished}/{sim.to_finish}"
    ]
    for s in range(c.num_servers):
        lo, n = int(c.server_first_gpu[s]), int(c.server_num_gpus[s])
        cells = "".join("." if owner[g] < 0 else letters[owner[g] % len(letters)] for g in range(lo, lo + n))
        lines.append(
            f"rack {c.server_rack[s]} server {s:3d} {c.catalog.gpu_types[c.server_gpu_type[s]]:>9} [{cells}]"
        )
    if window:
        jobs = " ".join(
            f"#{j}({sim.job_gpus_n[j]}g,{sim.now - sim.workload.submit_time[j]:.0f}s)" for j in window
        )
        lines.append(f"queue: {jobs}")
    if extra:
        lines.append(extra)
    return "\n".join(lines) + "\n"


def render_rgb(sim, window: list[int], max_server_gpus: int | None = None) -> np.ndarray:
    """(H, W, 3) uint8 heat map: a row of GPU cells per server coloured by job (dark grey = free, black = no
    slot), and below it the queue window as bars of width ∝ GPUs asked."""
    c = sim.cluster
    m = max_server_gpus or c.max_server_gpus
    width = max(m, 16) * CELL
    rows = c.num_servers + 2
    img = np.zeros((rows * CELL, width, 3), dtype=np.uint8)
    owner = gpu_owner(sim)
    slot = np.arange(c.num_gpus) - c.server_first_gpu[c.gpu_server]
    colour = np.full((c.num_gpus, 3), 40, dtype=np.uint8)
    busy = owner >= 0
    if busy.any():
        colour[busy] = _job_colours(owner[busy])
    for g in range(c.num_gpus):
        y, x = int(c.gpu_server[g]) * CELL, int(slot[g]) * CELL
        img[y : y + CELL - GAP, x : x + CELL - GAP] = colour[g]
    y0 = (c.num_servers + 1) * CELL
    x = 0
    for j in window:
        w = max(1, int(sim.job_gpus_n[j])) * CELL // 2
        if x + w > width:
            break
        img[y0 : y0 + CELL - GAP, x : x + w - GAP] = _job_colours(np.array([j]))[0]
        x += w
    return img
