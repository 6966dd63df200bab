"""Fast, strict CSV reading shared by the trace loaders.

A file is read once with the ``csv`` module (gzip or plain, detected from the magic bytes) and kept as lists of strings
per column; columns are converted with numpy in one call each. Only when a conversion fails does a slow per-row pass run
to find the first bad row, so every error names the file, the 1-based data row and the field.
Blank lines are skipped but counted, so ``row N`` is line ``N + 1`` of a file with a header.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .errors import WorkloadError

MAX_ABS_VALUE = 1e15  # no time stamp (s or ms since 1970), duration or size in a trace comes near it
MAX_DURATION_S = 1e9  # ~32 years
MAX_COUNT = 2**31 - 1  # GPU counts, batch sizes, ...: int32 range (the simulator stores them as int32)

_DATA_ROOT = Path(__file__).resolve().parent.parent / "data" / "traces"


def data_path(*parts: str) -> Path:
    """Path of a bundled trace file under ``gpusched_envs/data/traces``."""
    return _DATA_ROOT.joinpath(*parts)


def display_name(path: str | Path) -> str:
    return Path(path).name


def _open_text(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


class Table:
    """Columns of one CSV file as lists of strings, with strict converters that raise :class:`WorkloadError`."""

    def __init__(self, file: str, columns: dict[str, list[str]], rows: list[int]):
        self.file = file
        self.columns = columns
        self.rows = rows  # 1-based data row number of each kept record (blank lines counted)

    def __len__(self) -> int:
        return len(self.rows)

    def has(self, name: str) -> bool:
        return name in self.columns

    def error(self, index: int | None, field: str | None, message: str) -> WorkloadError:
        row = None if index is None else self.rows[int(index)]
        return WorkloadError(message, file=self.file, row=row, field=field)

    def strings(self, name: str) -> list[str]:
        return self.columns[name]

    def floats(self, name: str, *, allow_empty: bool = False) -> np.ndarray:
        """A float column; empty cells become NaN when ``allow_empty`` and are an error otherwise."""
        raw = self.columns[name]
        values = [v if v.strip() else "nan" for v in raw] if allow_empty else raw
        try:
            arr = np.array(values, dtype=np.float64)
        except ValueError:
            arr = None
        # an empty cell (allowed) is NaN; anything else must be a finite number of sane magnitude (1e308 "durations"
        # overflow the simulator's clock, inf becomes int64 min when cast)
        if arr is None or not np.all((np.abs(arr) <= MAX_ABS_VALUE) | (allow_empty and np.isnan(arr))):
            for i, v in enumerate(raw):
                if allow_empty and not v.strip():
                    continue
                try:
                    x = float(v)
                except ValueError:
                    shown = repr(v) if v.strip() else "empty value"
                    raise self.error(i, name, f"{shown} is not a number") from None
                if not np.isfinite(x):
                    raise self.error(i, name, f"{v.strip()!r} is not a finite number")
                if abs(x) > MAX_ABS_VALUE:
                    raise self.error(i, name, f"{v.strip()} is out of range (|value| > {MAX_ABS_VALUE:.0e})")
        return arr

    def ints(
        self, name: str, *, allow_empty: bool = False, empty_value: int = 0, maximum: int = MAX_COUNT
    ) -> np.ndarray:
        """An integer column (``"4"`` or ``"4.0"``) of values ``<= maximum``; fractions are an error."""
        arr = self.floats(name, allow_empty=allow_empty)
        if allow_empty:
            arr = np.where(np.isnan(arr), float(empty_value), arr)
        bad = np.flatnonzero(arr != np.round(arr))
        if len(bad):
            raise self.error(bad[0], name, f"{self.columns[name][bad[0]]!r} is not a whole number")
        bad = np.flatnonzero(arr > maximum)
        if len(bad):
            raise self.error(
                bad[0], name, f"{self.columns[name][bad[0]].strip()} is out of range (> {maximum:,})"
            )
        return arr.astype(np.int64)

    def check_durations(self, name: str, arr: np.ndarray) -> None:
        """Non-negative, at most :data:`MAX_DURATION_S`, and not all zero (NaN = unknown is allowed)."""
        self.check_nonnegative(name, arr)
        bad = np.flatnonzero(arr > MAX_DURATION_S)
        if len(bad):
            raise self.error(
                bad[0],
                name,
                f"{self.columns[name][bad[0]].strip()} s is more than {MAX_DURATION_S:.0e} s (~32 years)",
            )
        if len(arr) and not np.any(arr > 0):
            raise WorkloadError(
                "every duration is zero (or unknown); nothing to simulate", file=self.file, field=name
            )

    def datetimes(self, name: str) -> np.ndarray:
        """A ``YYYY-MM-DD HH:MM:SS`` column as ``datetime64[s]``."""
        values = self.columns[name]
        try:
            arr = np.array(values, dtype="datetime64[s]")
        except ValueError:
            arr = None
        if arr is None or np.any(np.isnat(arr)):
            for i, v in enumerate(values):
                try:
                    ok = not np.isnat(np.datetime64(v, "s"))
                except ValueError:
                    ok = False
                if not ok:
                    shown = repr(v) if v.strip() else "empty value"
                    raise self.error(i, name, f"{shown} is not a date-time (expected YYYY-MM-DD HH:MM:SS)")
        return arr

    def check_nonnegative(self, name: str, arr: np.ndarray) -> None:
        bad = np.flatnonzero(arr < 0)
        if len(bad):
            raise self.error(bad[0], name, f"{self.columns[name][bad[0]].strip()} is negative")

    def check_max_gpus(
        self, name: str, gpus: np.ndarray, max_gpus: int | None, keep: np.ndarray | None = None
    ):
        if max_gpus is None:
            return
        over = gpus > max_gpus
        if keep is not None:
            over &= keep
        bad = np.flatnonzero(over)
        if len(bad):
            raise self.error(
                bad[0], name, f"job asks for {int(gpus[bad[0]])} GPUs, more than the cluster's {max_gpus}"
            )


def read_table(
    path: str | Path,
    *,
    required: Sequence[str],
    optional: Sequence[str] = (),
    layout: Sequence[str] | None = None,
) -> Table:
    """Read a CSV file into a :class:`Table`.

    ``layout`` gives the column names of a headerless file (its official layout); a first row equal to the layout is
    then taken as a header and skipped. Without ``layout`` the first row is the header (names are stripped).
    Raises :class:`WorkloadError` for a missing file, an empty file, a missing column, a short row or a corrupt gzip.
    """
    path = Path(path)
    file = display_name(path)
    if not path.is_file():
        raise WorkloadError("file not found", file=str(path))
    records: list[list[str]] = []
    rows: list[int] = []
    header: list[str] | None = None
    n = 0
    try:
        with _open_text(path) as fh:
            reader = csv.reader(fh)
            if layout is None:
                for first in reader:
                    if any(c.strip() for c in first):
                        header = [c.strip() for c in first]
                        break
            for rec in reader:
                n += 1
                if rec and (len(rec) > 1 or rec[0].strip()):
                    records.append(rec)
                    rows.append(n)
    except (EOFError, OSError, zlib.error) as exc:
        raise WorkloadError(
            f"file is truncated or not valid gzip ({type(exc).__name__}: {exc})", file=file, row=n + 1
        ) from None
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"not UTF-8 text ({exc.reason})", file=file, row=n + 1) from None
    except csv.Error as exc:
        raise WorkloadError(f"malformed CSV ({exc})", file=file, row=n + 1) from None

    if layout is not None:
        header = list(layout)
        if records and [c.strip() for c in records[0]] == header:
            records.pop(0)
            rows.pop(0)
            rows = [r - 1 for r in rows]
    expected = ", ".join(list(required) + [c for c in optional if c not in required])
    if header is None:
        raise WorkloadError(f"empty file, expected a header with columns {expected}", file=file, row="header")
    if not records:
        raise WorkloadError(f"no data rows (expected columns {expected})", file=file, row=1)
    index = {name: i for i, name in enumerate(header)}
    for name in required:
        if name not in index:
            raise WorkloadError(
                f"missing column; the header has {', '.join(header)}", file=file, row="header", field=name
            )
    wanted = [c for c in list(required) + list(optional) if c in index]
    width = max(index[c] for c in wanted) + 1
    if min(map(len, records)) < width:
        for i, rec in enumerate(records):
            if len(rec) < width:
                missing = next(c for c in wanted if index[c] >= len(rec))
                raise WorkloadError(
                    f"row has {len(rec)} fields, expected {len(header)} (truncated line?)",
                    file=file,
                    row=rows[i],
                    field=missing,
                )
    columns = {c: [rec[index[c]] for rec in records] for c in wanted}
    return Table(file, columns, rows)
