"""Loader for the Alibaba cluster-trace-v2018 ``batch_task`` table as DAG jobs.

Official layout (``alibaba/clusterdata`` ``cluster-trace-v2018/trace_2018.md``): headerless CSV, 9 columns

    task_name, instance_num, job_name, task_type, status, start_time, end_time, plan_cpu, plan_mem

(a header line with these names is accepted and skipped; ``.gz`` files are read transparently).
The DAG is encoded in ``task_name``: letter(s) + task id + ``_``-separated parent ids (``M1`` is a root, ``R4_2``
depends on 2, ``J5_3_4`` on 3 and 4). Names like ``task_XXXX==`` are independent non-DAG tasks. A child starts after
all instances of every parent finished.

**Truncated names.** The trace cuts ``task_name`` at 50 characters, so a name exactly 50 characters long may have
lost parent ids, and its last id may itself be cut short (``..._100`` stored as ``..._1``), which can create a
spurious edge or even a cycle. Such tasks are always *flagged* (``DAG.meta["truncated_tasks"]``) and handled by the
``truncated`` policy: ``"drop_last"`` (default) drops the possibly-cut last parent id when the name ends in a digit,
``"keep"`` keeps it, ``"skip_job"`` drops the whole job. Parent ids that do not exist in the job are dropped and
listed in ``meta["missing_parents"]``.

Each task becomes a DAG task whose ``work`` is its duration ``end_time - start_time`` in seconds (all instances run
in parallel; tasks with a missing or negative duration get the job's median valid duration, listed in
``meta["imputed_work"]``). The trace has no data sizes: every edge carries ``edge_bytes`` bytes (default 0; see
:meth:`DAG.with_ccr`).

Bad input (wrong column count, unparsable number) raises :class:`~gpusched_envs.workloads.errors.WorkloadError`
naming file, row and field.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpusched_envs.workloads.errors import WorkloadError

from .model import DAG, DAGError

COLUMNS = (
    "task_name",
    "instance_num",
    "job_name",
    "task_type",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
)
NAME_LIMIT = 50  # the trace cuts task_name at this many characters
_DAG_NAME = re.compile(r"^([A-Za-z]+)(\d+)((?:_\d+)*)(_?)$")
TRUNCATED_POLICIES = ("drop_last", "keep", "skip_job")


@dataclass(frozen=True)
class TaskName:
    """A parsed ``task_name``."""

    name: str
    task_id: int | None  # None for independent (non-DAG) tasks
    parents: tuple[int, ...]
    truncated: bool  # the name is NAME_LIMIT characters long: its parent list may be wrong
    last_may_be_cut: bool  # truncated and ending in a digit: the last parent id may be a cut-short number

    @property
    def is_dag(self) -> bool:
        return self.task_id is not None


def parse_task_name(name: str) -> TaskName:
    """Parse a ``batch_task`` task name (``M1``, ``R2_1``, ``J3_1_2``, ``task_XXXX==``)."""
    name = name.strip()
    truncated = len(name) >= NAME_LIMIT
    m = _DAG_NAME.match(name)
    if not m:
        return TaskName(name, None, (), truncated, False)
    parents = tuple(int(x) for x in m.group(3).split("_") if x)
    cut = truncated and not m.group(4) and len(parents) > 0
    return TaskName(name, int(m.group(2)), parents, truncated, cut)


@dataclass(frozen=True)
class BatchTask:
    """One ``batch_task`` row. Missing numbers are ``nan``."""

    task_name: str
    instance_num: float
    job_name: str
    task_type: str
    status: str
    start_time: float
    end_time: float
    plan_cpu: float
    plan_mem: float
    row: int  # 1-based data row in the file (header not counted)

    @property
    def duration(self) -> float:
        s, e = self.start_time, self.end_time
        if not (np.isfinite(s) and np.isfinite(e)) or s <= 0 or e <= 0 or e < s:
            return float("nan")
        return float(e - s)


def _open_text(path: Path) -> io.TextIOBase:
    """gzip or plain text by content (not by the ``.gz`` name), UTF-8 with an optional BOM."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    if gz:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _num(text: str, file: str, row: int, field: str) -> float:
    text = text.strip()
    if text == "":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        raise WorkloadError(f"{text!r} is not a number", file=file, row=row, field=field) from None


def read_batch_task(path: str | Path) -> Iterator[BatchTask]:
    """Rows of a ``batch_task`` file in the official 9-column layout, in file order."""
    path = Path(path)
    fname = path.name
    if not path.is_file():
        raise WorkloadError("file not found", file=str(path))
    last = 0  # data row of the last good record: a decoding error is named at the row after it
    try:
        for task in _batch_task_rows(path, fname):
            last = task.row
            yield task
    except (EOFError, zlib.error) as exc:
        raise WorkloadError(
            f"file is truncated or not valid gzip ({type(exc).__name__}: {exc})", file=fname, row=last + 1
        ) from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"not UTF-8 text ({exc.reason})", file=fname, row=last + 1) from None
    except csv.Error as exc:
        raise WorkloadError(f"malformed CSV ({exc})", file=fname, row=last + 1) from None
    except OSError as exc:  # gzip.BadGzipFile and read errors
        raise WorkloadError(f"cannot read ({type(exc).__name__}: {exc})", file=fname, row=last + 1) from None


def _batch_task_rows(path: Path, fname: str) -> Iterator[BatchTask]:
    with _open_text(path) as fh:
        row = 0
        for rec in csv.reader(fh):
            if not rec or (len(rec) == 1 and not rec[0].strip()):
                continue
            if row == 0 and rec[0].strip() == "task_name":
                if [c.strip() for c in rec] != list(COLUMNS):
                    raise WorkloadError(
                        f"header {rec} is not the official {list(COLUMNS)}", file=fname, row="header"
                    )
                continue
            row += 1
            if len(rec) != len(COLUMNS):
                raise WorkloadError(
                    f"expected {len(COLUMNS)} columns ({', '.join(COLUMNS)}), got {len(rec)}",
                    file=fname,
                    row=row,
                )
            if not rec[0].strip():
                raise WorkloadError("empty task name", file=fname, row=row, field="task_name")
            if not rec[2].strip():
                raise WorkloadError("empty job name", file=fname, row=row, field="job_name")
            yield BatchTask(
                task_name=rec[0].strip(),
                instance_num=_num(rec[1], fname, row, "instance_num"),
                job_name=rec[2].strip(),
                task_type=rec[3].strip(),
                status=rec[4].strip(),
                start_time=_num(rec[5], fname, row, "start_time"),
                end_time=_num(rec[6], fname, row, "end_time"),
                plan_cpu=_num(rec[7], fname, row, "plan_cpu"),
                plan_mem=_num(rec[8], fname, row, "plan_mem"),
                row=row,
            )


def group_jobs(rows: Iterable[BatchTask]) -> dict[str, list[BatchTask]]:
    """Rows grouped by ``job_name`` (insertion order = first appearance)."""
    jobs: dict[str, list[BatchTask]] = {}
    for r in rows:
        jobs.setdefault(r.job_name, []).append(r)
    return jobs


def build_job_dag(
    job_name: str,
    tasks: list[BatchTask],
    *,
    truncated: str = "drop_last",
    edge_bytes: float = 0.0,
    source: str = "",
) -> DAG | None:
    """The DAG of one job's rows (``None`` when ``truncated="skip_job"`` and a name is truncated).

    Independent ``task_...`` tasks become isolated tasks. Raises :class:`WorkloadError` on a duplicate task id or a
    cycle that the truncation policy does not explain.
    """
    if truncated not in TRUNCATED_POLICIES:
        raise ValueError(f"truncated must be one of {TRUNCATED_POLICIES}, got {truncated!r}")
    parsed = [parse_task_name(t.task_name) for t in tasks]
    flagged = [p.name for p in parsed if p.truncated]
    if flagged and truncated == "skip_job":
        return None
    # order: DAG tasks by id, then independent tasks in file order
    dag_idx = sorted((i for i, p in enumerate(parsed) if p.is_dag), key=lambda i: parsed[i].task_id)
    ind_idx = [i for i, p in enumerate(parsed) if not p.is_dag]
    order = dag_idx + ind_idx
    index_of_id: dict[int, int] = {}
    for k, i in enumerate(dag_idx):
        tid = parsed[i].task_id
        if tid in index_of_id:
            other = tasks[dag_idx[index_of_id[tid]]]
            raise WorkloadError(
                f"job {job_name}: task id {tid} appears twice ({other.task_name!r} at row {other.row})",
                file=source or None,
                row=tasks[i].row,
                field="task_name",
            )
        index_of_id[tid] = k
    edges: list[tuple[int, int]] = []
    missing: list[str] = []
    dropped: list[str] = []
    for k, i in enumerate(dag_idx):
        p = parsed[i]
        pids = list(p.parents)
        if p.last_may_be_cut and truncated == "drop_last":
            dropped.append(f"{p.name}: parent {pids[-1]}")
            pids = pids[:-1]
        for pid in dict.fromkeys(pids):  # dedupe, keep order
            if pid not in index_of_id:
                missing.append(f"{p.name}: parent {pid}")
                continue
            edges.append((index_of_id[pid], k))
    dur = np.array([tasks[i].duration for i in order], dtype=np.float64)
    valid = np.isfinite(dur)
    fill = float(np.median(dur[valid])) if valid.any() else 0.0
    imputed = [tasks[order[k]].task_name for k in np.flatnonzero(~valid)]
    work = np.where(valid, dur, fill)
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    meta = {
        "job_name": job_name,
        "truncated": bool(flagged),
        "truncated_tasks": flagged,
        "dropped_parents": dropped,
        "missing_parents": missing,
        "imputed_work": imputed,
        "instance_num": [tasks[i].instance_num for i in order],
        "plan_cpu": [tasks[i].plan_cpu for i in order],
        "plan_mem": [tasks[i].plan_mem for i in order],
        "status": [tasks[i].status for i in order],
    }
    try:
        return DAG(
            work=work,
            edges=e,
            edge_bytes=np.full(len(e), float(edge_bytes)),
            name=job_name,
            source=f"alibaba2018:{source}:{job_name}" if source else f"alibaba2018:{job_name}",
            task_names=tuple(tasks[i].task_name for i in order),
            meta=meta,
        )
    except DAGError as exc:
        hint = " (truncated 50-character names present; try truncated='drop_last')" if flagged else ""
        raise WorkloadError(f"job {job_name}: {exc}{hint}", file=source or None) from None


def load_alibaba2018(
    path: str | Path,
    *,
    jobs: Iterable[str] | str | None = None,
    truncated: str = "drop_last",
    min_tasks: int = 1,
    dag_only: bool = False,
    edge_bytes: float = 0.0,
) -> list[DAG]:
    """DAG jobs of a ``batch_task`` file, in order of first appearance.

    ``jobs`` selects job names; ``min_tasks`` drops smaller jobs; ``dag_only`` drops jobs without any DAG-named task
    and removes independent ``task_...`` tasks from the others.
    """
    path = Path(path)
    wanted = {jobs} if isinstance(jobs, str) else (set(jobs) if jobs is not None else None)
    rows = (r for r in read_batch_task(path) if wanted is None or r.job_name in wanted)
    out = []
    for name, tasks in group_jobs(rows).items():
        if dag_only:
            tasks = [t for t in tasks if parse_task_name(t.task_name).is_dag]
        if len(tasks) < max(1, min_tasks):
            continue
        dag = build_job_dag(name, tasks, truncated=truncated, edge_bytes=edge_bytes, source=path.name)
        if dag is not None:
            out.append(dag)
    if wanted is not None:
        found = {d.name for d in out}
        lost = sorted(wanted - found)
        if lost and not out:
            raise WorkloadError(f"job(s) {lost[:5]} not found", file=path.name, field="job_name")
    return out


def load_alibaba2018_job(
    path: str | Path, job: str, *, truncated: str = "drop_last", edge_bytes: float = 0.0
) -> DAG:
    """One job of a ``batch_task`` file as a DAG."""
    dags = load_alibaba2018(path, jobs=job, truncated=truncated, edge_bytes=edge_bytes)
    if not dags:
        raise WorkloadError(f"job {job!r} skipped by truncated={truncated!r}", file=Path(path).name)
    return dags[0]
