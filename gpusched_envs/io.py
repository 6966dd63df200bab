"""Atomic file writes: a result file is either the old one or the complete new one, never a torn write.

The new file is swapped into place with ``os.replace``, which would also replace a FIFO, a device node (``--json
/dev/full`` run as root replaced the device) or a socket; so a target that exists and is not a regular file (after
following symlinks) is refused with :class:`OutputPathError` before anything is written.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path


class OutputPathError(ValueError):
    """An output path that cannot be written safely (a directory, FIFO, device or socket)."""


def check_output_path(path: str | Path) -> Path:
    """``path`` if it is absent or a regular file (a symlink to one counts); :class:`OutputPathError` otherwise.
    Every writer calls it up front, so a bad ``--json``/``--out`` is refused before any work is done."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise OutputPathError(f"{path}: is a dangling symlink; refusing to replace it") from None
        return path
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot be written ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        raise OutputPathError(f"{path}: is a directory, expected a file path")
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        raise OutputPathError(f"{path}: is {kind}; refusing to replace it (write to a regular file)")
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = check_output_path(path)
    if path.parent.exists() and not path.parent.is_dir():
        raise OutputPathError(f"{path}: {path.parent} is not a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and hasattr(value, "dtype"):  # numpy scalar
        return _finite(value.item())
    return value


def dumps_json(doc, indent: int = 2) -> str:
    """Strict JSON text (``allow_nan=False``): NaN and infinities become ``null``, never bare ``NaN`` (which JSON
    parsers other than Python's reject)."""
    return json.dumps(_finite(doc), indent=indent, sort_keys=True, allow_nan=False) + "\n"
