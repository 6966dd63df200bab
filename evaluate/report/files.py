"""Result files written the same way by the leaderboard and every bench: JSON-safe values, JSON and Markdown text,
CSV text; each file written atomically (:mod:`gpusched_envs.io`), so an interrupted run never leaves half a file."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from gpusched_envs.io import atomic_write_bytes, atomic_write_text


def clean(x):
    """JSON-safe: NaN and infinities become null, numpy scalars plain numbers, tuples lists."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean(v) for v in x]
    if isinstance(x, np.floating | np.integer):
        return clean(x.item())
    return x


def json_text(doc, *, indent: int = 2, sort_keys: bool = False, default=None) -> str:
    """``doc`` as JSON text with a final newline."""
    return json.dumps(doc, indent=indent, sort_keys=sort_keys, default=default) + "\n"


def write_json(path: str | Path, doc, *, indent: int = 2, sort_keys: bool = False, default=None) -> Path:
    """Write ``doc`` as JSON (:func:`json_text`) atomically; returns the path."""
    path = Path(path)
    atomic_write_text(path, json_text(doc, indent=indent, sort_keys=sort_keys, default=default))
    return path


def write_text(path: str | Path, text: str) -> Path:
    """Write text (a Markdown table, a page) atomically; returns the path."""
    path = Path(path)
    atomic_write_text(path, text)
    return path


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write bytes (a PNG) atomically; returns the path."""
    path = Path(path)
    atomic_write_bytes(path, data)
    return path


def csv_text(rows: list[dict], columns: list[str], *, line_end: str = "\n") -> str:
    """CSV with a header row of ``columns`` (keys of a row not among them are left out; missing and non-finite
    values are empty cells)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, columns, extrasaction="ignore", lineterminator=line_end)
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if v is None else v) for k, v in clean(row).items()})
    return buf.getvalue()


def machine_description() -> str:
    """The machine a result was measured on, for the ``machine`` field of a report: CPUs, architecture, system."""
    import os
    import platform

    return f"{os.cpu_count() or '?'}-CPU {platform.machine() or 'unknown'} {platform.system() or 'machine'}"
