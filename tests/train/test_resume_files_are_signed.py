"""``--resume`` never unpickles a file that this user's runs did not write (no code runs from a
checkpoint): resume files are signed with a per-user key and verified before loading."""

from __future__ import annotations

import pickle

import pytest
from gpusched_lab.train import trust
from gpusched_lab.train.cli import app
from typer.testing import CliRunner

runner_cli = CliRunner()


class _Payload:
    """A pickle that creates a marker file when loaded (what a crafted resume file would do)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _train(out, *extra):
    args = ["ddqn", "--config", "smoke_ddqn", "--set", "encoder=mlp", "--steps", "64", "--out", str(out)]
    return runner_cli.invoke(app, [*args, *extra, "--no-progress"])


def test_crafted_resume_file_is_refused_before_unpickling(tmp_path):
    out = tmp_path / "run"
    first = _train(out)
    assert first.exit_code == 0, first.output
    resume = out / "checkpoint" / "resume.pt"
    assert trust.signature_path(resume).is_file()  # the run signed its own file
    marker = tmp_path / "pwned"
    resume.write_bytes(pickle.dumps(_Payload(marker)))  # replaced by someone else's file
    result = _train(out, "--resume")
    assert result.exit_code == 2 and not marker.exists()
    lines = [line for line in result.output.strip().splitlines() if line]
    assert (
        len(lines) == 1 and "resume.pt: signature does not match" in lines[0] and "--trust-resume" in lines[0]
    )
    trust.signature_path(resume).unlink()  # no signature at all
    result = _train(out, "--resume")
    assert result.exit_code == 2 and "no signature" in result.output and not marker.exists()


def test_own_resume_file_verifies_and_a_changed_one_does_not(tmp_path):
    path = tmp_path / "state.bin"
    path.write_bytes(b"state")
    trust.sign(path)
    trust.verify(path)
    path.write_bytes(b"state!")
    with pytest.raises(trust.UntrustedResumeError, match="signature does not match"):
        trust.verify(path)
    trust.verify(path, trust=True)  # the user's explicit override


def test_key_file_is_private(tmp_path, monkeypatch):
    key = tmp_path / "k" / "resume.key"
    monkeypatch.setenv(trust.KEY_FILE_ENV, str(key))
    path = tmp_path / "f"
    path.write_bytes(b"x")
    trust.sign(path)
    assert key.stat().st_mode & 0o077 == 0
