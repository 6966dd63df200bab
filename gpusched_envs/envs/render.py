"""Rendering for the envs, kept apart from the dynamics: a text cluster map (``ansi``) and a labelled picture
(``rgb_array``) drawn with Pillow: racks and servers with their GPUs coloured by job, the time and counts in a
header, a legend of the running jobs and the queue; and a Gantt chart with axes for DAG plans."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

FREE = (52, 56, 64)  # a free GPU
BACKGROUND = (18, 20, 24)
PANEL = (30, 33, 40)
TEXT = (230, 232, 236)
MUTED = (150, 156, 168)
SEPARATOR = (95, 100, 112)

# Twenty well-separated colours (Kelly's list, minus black and white, and a few of Glasbey's): job k gets
# PALETTE[k % 20], so jobs with neighbouring ids never share a colour.
PALETTE = np.array(
    [
        (230, 159, 0),
        (86, 180, 233),
        (0, 158, 115),
        (240, 228, 66),
        (0, 114, 178),
        (213, 94, 0),
        (204, 121, 167),
        (166, 206, 57),
        (255, 127, 127),
        (141, 211, 199),
        (190, 186, 218),
        (251, 128, 114),
        (128, 177, 211),
        (253, 180, 98),
        (179, 222, 105),
        (252, 205, 229),
        (188, 128, 189),
        (204, 235, 197),
        (255, 237, 111),
        (217, 217, 217),
    ],
    dtype=np.uint8,
)


def _job_colours(jobs: np.ndarray) -> np.ndarray:
    """(k, 3) uint8 colour of each job id (:data:`PALETTE`, cycling)."""
    return PALETTE[np.asarray(jobs, dtype=np.int64) % len(PALETTE)]


def gpu_owner(sim) -> np.ndarray:
    """(G,) id of a job holding each GPU, -1 where free."""
    owner = np.full(sim.cluster.num_gpus, -1, dtype=np.int64)
    for j in sim.running:
        owner[sim.job_gpus[j]] = j
    return owner


def duration(seconds: float) -> str:
    """``3725`` → ``"1h02m"``; ``95`` → ``"1m35s"``; ``7.5`` → ``"7.5s"``; days past 48 hours."""
    s = float(seconds)
    if not math.isfinite(s):
        return str(s)
    if s < 60:
        return f"{s:.1f}s" if s < 10 else f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    if s < 48 * 3600:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    return f"{int(s // 86400)}d{int(s % 86400 // 3600):02d}h"


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


# ---------------------------------------------------------------------------------------------- drawing helpers


@lru_cache(maxsize=8)
def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def _text_width(draw, text: str, size: int) -> int:
    return int(draw.textlength(text, font=_font(size)))


def _fit(draw, text: str, size: int, width: int) -> str:
    """``text`` cut (with an ellipsis) to fit ``width`` pixels."""
    if _text_width(draw, text, size) <= width:
        return text
    while text and _text_width(draw, text + "…", size) > width:
        text = text[:-1]
    return text + "…" if text else ""


def _legend_rows(
    draw, x: int, y: int, width: int, bottom: int, rows: list[tuple[int, str]], size: int
) -> int:
    """Colour swatch + label per row (``(job, label)``) from ``y`` down to ``bottom``; returns the next ``y``."""
    line = size + 5
    shown = 0
    for job, label in rows:
        if y + line > bottom - line and shown < len(rows) - 1:
            draw.text((x, y), f"+{len(rows) - shown} more", fill=MUTED, font=_font(size))
            return y + line
        draw.rectangle([x, y + 2, x + size, y + size + 1], fill=tuple(int(v) for v in _job_colours([job])[0]))
        draw.text((x + size + 6, y), _fit(draw, label, size, width - size - 6), fill=TEXT, font=_font(size))
        y += line
        shown += 1
    return y


def render_rgb(sim, window: list[int], max_server_gpus: int | None = None, title: str = "") -> np.ndarray:
    """(H, W, 3) uint8 picture of the cluster now.

    - header: ``title``, the simulated time and the counts of queued, running, free GPUs and finished jobs;
    - left: one row per server (its id and GPU type), grouped under a label per rack with a separator line, each
      GPU a cell in its job's colour (free GPUs dark grey), the job id written in the cell when it fits; large
      clusters wrap into several columns and, past a few hundred servers, drop the per-server labels;
    - right: a legend of the running jobs (colour, id, GPUs, time running) and the queue window in order (id, GPUs
      asked, time waiting).
    """
    from PIL import Image, ImageDraw

    c = sim.cluster
    m = int(max_server_gpus or c.max_server_gpus)
    owner = gpu_owner(sim)
    racks = np.asarray(c.server_rack)
    n_servers = int(c.num_servers)
    # rows: a rack label before each rack's first server, then one per server
    items: list[tuple[str, int]] = []
    for s in range(n_servers):
        if s == 0 or racks[s] != racks[s - 1]:
            items.append(("rack", int(racks[s])))
        items.append(("server", s))

    size = 12
    header_h, pad = 26, 8
    max_panel_h = 600
    row_h = 16
    per_col = max(1, (max_panel_h - 2 * pad) // row_h)
    n_cols = math.ceil(len(items) / per_col)
    if n_cols > 4:  # large cluster: smaller rows, no per-server labels
        per_col = math.ceil(len(items) / 4)
        row_h = max(2, (max_panel_h - 2 * pad) // per_col)
        n_cols = math.ceil(len(items) / per_col)
    labels = row_h >= 12
    label_w = 92 if labels else 0
    cell = max(4, min(22, (300 - label_w) // max(m, 1))) if labels else max(2, min(10, 120 // max(m, 1)))
    col_w = label_w + m * cell + 14
    side_w = 300
    rows_in_col = min(per_col, len(items))
    width = pad + n_cols * col_w + side_w + pad
    height = max(header_h + pad + rows_in_col * row_h + pad, 360)

    img = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)

    # header
    head = (
        f"{title + '   ' if title else ''}t = {duration(sim.now)}   queued {len(sim.queue)}   "
        f"running {len(sim.running)}   free {sim.free_gpus()}/{c.num_gpus} GPUs   "
        f"done {sim.finished}/{sim.to_finish}"
    )
    draw.rectangle([0, 0, width, header_h - 4], fill=PANEL)
    draw.text((pad, 5), _fit(draw, head, size + 1, width - 2 * pad), fill=TEXT, font=_font(size + 1))

    # cluster
    gpu_types = c.catalog.gpu_types
    for k, (kind, value) in enumerate(items):
        col, r = divmod(k, per_col)
        x0 = pad + col * col_w
        y = header_h + pad + r * row_h
        if kind == "rack":
            if r > 0:
                draw.line([x0, y + 1, x0 + col_w - 14, y + 1], fill=SEPARATOR)
            if labels:
                draw.text((x0, y + 2), f"rack {value}", fill=MUTED, font=_font(size - 1))
            continue
        s = value
        if labels:
            name = f"s{s}  {gpu_types[c.server_gpu_type[s]]}"
            draw.text(
                (x0 + 6, y + 1), _fit(draw, name, size - 1, label_w - 8), fill=TEXT, font=_font(size - 1)
            )
        lo, n = int(c.server_first_gpu[s]), int(c.server_num_gpus[s])
        for i in range(n):
            j = int(owner[lo + i])
            fill = FREE if j < 0 else tuple(int(v) for v in _job_colours([j])[0])
            cx = x0 + label_w + i * cell
            draw.rectangle([cx, y + 1, cx + cell - 2, y + row_h - 2], fill=fill)
            if j >= 0 and labels and _text_width(draw, str(j), 9) <= cell - 3 and row_h >= 14:
                draw.text((cx + 1, y + 2), str(j), fill=(10, 10, 10), font=_font(9))

    # side panel: running jobs, then the queue window
    sx = width - side_w - pad + 6
    draw.rectangle([sx - 6, header_h, width, height], fill=PANEL)
    y = header_h + pad
    running = sorted(int(j) for j in sim.running)
    draw.text((sx, y), f"Running ({len(running)})", fill=TEXT, font=_font(size + 1))
    y += size + 8
    starts = getattr(sim, "run_start", None)  # start of each job's current allocation
    rows = []
    for j in running:
        since = f"  {duration(sim.now - starts[j])}" if starts is not None and np.isfinite(starts[j]) else ""
        rows.append((j, f"#{j}  {int(sim.job_gpus_n[j])} GPU{'s' if sim.job_gpus_n[j] != 1 else ''}{since}"))
    half = header_h + (height - header_h) // 2
    y = _legend_rows(draw, sx, y, side_w - 12, half, rows, size) + 6
    draw.text((sx, y), f"Queue ({len(sim.queue)} waiting)", fill=TEXT, font=_font(size + 1))
    y += size + 8
    rows = [
        (
            int(j),
            f"#{j}  {int(sim.job_gpus_n[j])} GPU{'s' if sim.job_gpus_n[j] != 1 else ''}  "
            f"waiting {duration(sim.now - sim.workload.submit_time[j])}",
        )
        for j in window
    ]
    _legend_rows(draw, sx, y, side_w - 12, height - pad, rows, size)
    return np.asarray(img, dtype=np.uint8)


def render_gantt(
    start: np.ndarray,
    finish: np.ndarray,
    assignment: np.ndarray,
    gpu_labels: list[str],
    makespan: float,
    title: str = "",
) -> np.ndarray:
    """(H, W, 3) uint8 Gantt chart of a DAG plan: one lane per GPU (labelled), a bar per placed task (coloured by
    task, its id written when it fits), a time axis with ticks in seconds and the makespan marked."""
    from PIL import Image, ImageDraw

    size = 12
    n = len(gpu_labels)
    lane = 22 if n <= 24 else max(8, 528 // max(n, 1))
    label_w, pad, header_h, axis_h = 120, 10, 26, 30
    plot_w = 720
    width = label_w + plot_w + 2 * pad
    height = header_h + n * lane + axis_h + pad
    img = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    draw.rectangle([0, 0, width, header_h - 4], fill=PANEL)
    draw.text((pad, 5), title or f"makespan {makespan:.3f} s", fill=TEXT, font=_font(size + 1))
    span = max(float(makespan), 1e-9)
    x0 = pad + label_w

    def x_of(t: float) -> int:
        return int(x0 + (plot_w - 1) * t / span)

    top = header_h
    for q, label in enumerate(gpu_labels):
        y = top + q * lane
        if lane >= 12:
            draw.text(
                (pad, y + (lane - size) // 2),
                _fit(draw, label, size - 1, label_w - 8),
                fill=TEXT,
                font=_font(size - 1),
            )
        draw.line([x0, y + lane - 1, x0 + plot_w, y + lane - 1], fill=PANEL)
    colours = _job_colours(np.arange(len(start)))
    for t in np.flatnonzero(np.asarray(assignment) >= 0).tolist():
        q = int(assignment[t])
        a, b = x_of(float(start[t])), max(x_of(float(finish[t])), x_of(float(start[t])) + 1)
        y = top + q * lane
        draw.rectangle([a, y + 2, b - 1, y + lane - 3], fill=tuple(int(v) for v in colours[t]))
        if lane >= 14 and _text_width(draw, str(t), 9) <= b - a - 2:
            draw.text((a + 2, y + (lane - 9) // 2 - 1), str(t), fill=(10, 10, 10), font=_font(9))
    # axis
    ya = top + n * lane + 2
    draw.line([x0, ya, x0 + plot_w, ya], fill=SEPARATOR)
    step = 10 ** math.floor(math.log10(span / 5)) if span > 0 else 1.0
    for mult in (1, 2, 5, 10):
        if span / (step * mult) <= 8:
            step *= mult
            break
    tick = 0.0
    while tick <= span * (1 + 1e-9):
        x = x_of(tick)
        draw.line([x, ya, x, ya + 4], fill=SEPARATOR)
        draw.text((x - 8, ya + 6), f"{tick:g}", fill=MUTED, font=_font(size - 2))
        tick += step
    draw.text((x0 + plot_w - 40, ya + 16), "time (s)", fill=MUTED, font=_font(size - 2))
    draw.line([x_of(span), top, x_of(span), ya], fill=(240, 80, 80))
    return np.asarray(img, dtype=np.uint8)
