"""Microsoft Philly jobs (Jeon et al., ATC'19): the CSV ``timestamp,duration,num_gpus,gpu_time,cluster``.

The bundled file is the 82,247-job list used by Sia (SOSP'23), derived from the CC-BY-4.0 Philly trace
(see ``gpusched_envs/data/traces/PROVENANCE.md``). Users may load their own file in the same format, gzipped or plain.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import numpy as np

from gpusched_envs.sim.workload import Workload

from ._io import data_path, read_table
from .errors import WorkloadError

PHILLY_JOBS = data_path("philly", "philly_jobs_sia.csv.gz")
PHILLY_MACHINES = data_path("philly", "philly_machine_list_original.csv")
PHILLY_VC_NODES = data_path("philly", "philly_vc_nodes.csv")
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")


def load_philly(
    path: str | Path | None = None,
    *,
    max_gpus: int | None = None,
    name: str = "philly",
    return_rows: bool = False,
):
    """Load a Philly job list; ``path=None`` loads the bundled file.

    Submit times are seconds from the first submission, whose wall-clock time is ``time_origin``. Each job's
    ``vc`` is its ``cluster`` (hashed VC id); ``model`` stays -1 (the engine assigns models by its seeded rule).
    Jobs with a zero duration are dropped and counted in ``meta["dropped"]``; a negative duration, a GPU count below 1
    or above ``max_gpus`` is an error. With ``return_rows`` also the 1-based data row of each job (in the
    workload's order), so a later check can name the row.
    """
    path = Path(path) if path is not None else PHILLY_JOBS
    try:
        st = path.stat()
        identity = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    except OSError:  # read_table names the missing or unreadable file
        identity = (str(path), -1, -1)
    stamps, duration, gpus, vc, vc_names, rows, dropped = (
        x.copy() if isinstance(x, np.ndarray) else x for x in _parse_philly(path, identity, max_gpus)
    )
    origin = stamps.min()
    submit = (stamps - origin).astype(np.float64)
    wl = Workload.from_columns(
        name,
        submit,
        duration,
        gpus,
        vc=vc,
        vc_names=vc_names,
        source=str(path),
        time_origin=str(origin),
        meta={"trace": "philly", "dropped": {"zero_duration": dropped}},
    )
    if return_rows:
        return wl, rows[np.argsort(submit, kind="stable")]  # from_columns sorts stably by submit time
    return wl


@functools.lru_cache(maxsize=4)
def _parse_philly(path: Path, identity: tuple, max_gpus: int | None) -> tuple:
    """The checked columns of a Philly file (kept jobs only), parsed once per file version (``identity``: its
    resolved path, modification time and size): an env that resets on Philly windows reads the trace once per
    process, not once per episode. Callers copy the arrays."""
    t = read_table(path, required=PHILLY_COLUMNS, optional=("gpu_time",))
    stamps = t.datetimes("timestamp")
    duration = t.floats("duration")
    t.check_durations("duration", duration)
    gpus = t.ints("num_gpus")
    bad = np.flatnonzero(gpus < 1)
    if len(bad):
        raise t.error(bad[0], "num_gpus", f"{t.strings('num_gpus')[bad[0]]} is not a GPU count >= 1")
    t.check_max_gpus("num_gpus", gpus, max_gpus)
    keep = duration > 0
    dropped = int(len(keep) - keep.sum())
    vc_names, vc = np.unique(np.array(t.strings("cluster")), return_inverse=True)
    rows = np.asarray(t.rows, dtype=np.int64)
    if not keep.all():
        stamps, duration, gpus, vc, rows = stamps[keep], duration[keep], gpus[keep], vc[keep], rows[keep]
    if not len(stamps):
        raise WorkloadError("no job with a duration > 0", file=t.file, field="duration")
    return stamps, duration, gpus, vc, tuple(str(v) for v in vc_names), rows, dropped


def _read_small_csv(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return [[c.strip() for c in row] for row in csv.reader(fh) if row]


def philly_machines(path: str | Path | None = None) -> list[tuple[str, int, int]]:
    """The 552 Philly machines: ``(machine_id, gpus, gpu_memory_gb)`` from ``philly_machine_list_original.csv``."""
    path = Path(path) if path is not None else PHILLY_MACHINES
    rows = _read_small_csv(path)
    out = []
    for i, row in enumerate(rows[1:], start=1):
        try:
            out.append((row[0], int(row[1]), int(row[2].upper().removesuffix("GB"))))
        except (IndexError, ValueError):
            raise WorkloadError(f"bad machine row {row!r}", file=path.name, row=i) from None
    return out


def philly_vc_nodes(path: str | Path | None = None) -> dict[str, int]:
    """Nodes per Philly VC (11 VCs) from ``philly_vc_nodes.csv`` (Helios QSSF simulator's VC sizes)."""
    path = Path(path) if path is not None else PHILLY_VC_NODES
    rows = _read_small_csv(path)
    out = {}
    for i, row in enumerate(rows[1:], start=1):
        try:
            out[row[0]] = int(row[1])
        except (IndexError, ValueError):
            raise WorkloadError(f"bad VC row {row!r}", file=path.name, row=i) from None
    return out
