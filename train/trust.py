"""Resume files that hold pickled state are loaded only when this user's own runs wrote them.

A bit-for-bit DDQN resume pickles the envs mid-episode, and SB3's PPO zip holds cloudpickled objects: loading
either executes whatever a crafted file contains. So every such file is signed when a run writes it (HMAC-SHA256
with a key kept in the user's config folder, created on first use, readable by the user only), and ``--resume``
verifies the signature before anything is unpickled. A run folder copied from elsewhere is refused with one line;
``--trust-resume`` (``trust=True``) loads it anyway, for files the user knows to be safe.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from gpusched_envs.io import atomic_write_text

KEY_FILE_ENV = "GPUSCHED_RESUME_KEY"  # override of the key file's path (tests, shared machines)
SIGNATURE_SUFFIX = ".hmac"


class UntrustedResumeError(ValueError):
    """A resume file without a valid signature from this user's key."""


def key_path() -> Path:
    return Path(os.environ.get(KEY_FILE_ENV) or Path.home() / ".config" / "gpusched" / "resume.key")


def _key() -> bytes:
    path = key_path()
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    except ValueError:
        raise UntrustedResumeError(f"{path}: not a gpusched resume key (expected hex)") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # O_EXCL: two runs starting at once agree on one key
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    return bytes.fromhex(path.read_text().strip())


def _digest(path: Path) -> str:
    mac = hmac.new(_key(), digestmod=hashlib.sha256)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            mac.update(block)
    return mac.hexdigest()


def signature_path(path: Path) -> Path:
    return path.with_name(path.name + SIGNATURE_SUFFIX)


def sign(path: str | Path) -> None:
    """Record that this user's run wrote ``path`` (call after the file is in place)."""
    path = Path(path)
    atomic_write_text(signature_path(path), _digest(path) + "\n")


def verify(path: str | Path, trust: bool = False) -> None:
    """Raise :class:`UntrustedResumeError` unless ``path`` carries this user's signature (or ``trust``)."""
    path = Path(path)
    if trust:
        return
    sig = signature_path(path)
    advice = "resume files hold pickled state, so only files written by your own runs are loaded; pass --trust-resume if you know this one is safe"
    if not sig.is_file():
        raise UntrustedResumeError(f"{path}: no signature ({sig.name}) from this user's runs — {advice}")
    if not hmac.compare_digest(sig.read_text().strip(), _digest(path)):
        raise UntrustedResumeError(
            f"{path}: signature does not match (written elsewhere or modified) — {advice}"
        )
