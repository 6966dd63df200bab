"""The one error every loader and generator raises on bad input.

The message is always one line that names the file, the row (1-based data row, the header not counted) and the field,
for example ``philly_jobs.csv: row 17, field 'duration': -5 is negative``.
"""

from __future__ import annotations


class WorkloadError(ValueError):
    """Bad workload input or spec. ``file``, ``row`` and ``field`` are kept as attributes for programs."""

    def __init__(
        self, message: str, *, file: str | None = None, row: int | str | None = None, field: str | None = None
    ):
        self.file = file
        self.row = row
        self.field = field
        self.reason = " ".join(str(message).split())  # one line, always
        parts = []
        if row is not None:
            parts.append(row if isinstance(row, str) else f"row {row}")
        if field is not None:
            parts.append(f"field {field!r}")
        where = ", ".join(parts)
        text = self.reason
        if where:
            text = f"{where}: {text}"
        if file is not None:
            text = f"{file}: {text}"
        super().__init__(text)
