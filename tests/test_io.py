"""Atomic writes: complete files with the usual permissions, no temporary files left behind."""

from __future__ import annotations

import os
import stat

import pytest

from gpusched_envs.io import atomic_write_text


def test_atomic_write_replaces_whole_file_with_normal_permissions(tmp_path):
    path = tmp_path / "sub" / "out.json"
    atomic_write_text(path, "first")
    atomic_write_text(path, "second")
    assert path.read_text() == "second"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "out.txt"
    atomic_write_text(path, "old")

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
