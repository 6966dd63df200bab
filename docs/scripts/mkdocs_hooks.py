"""MkDocs hook: make the ``gpusched_lab`` packages visible to mkdocstrings' static analysis.

The repository keeps agents/, train/ and evaluate/ at its top level and the build maps them under the import root
``gpusched_lab``; an editable install exposes that mapping through an import hook that static analysis does not
read. This hook builds, for the duration of the build, a folder ``gpusched_lab/`` of symbolic links to the three
folders and adds it to the Python handler's search paths.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents", "train", "evaluate")


@event_priority(100)  # before mkdocstrings reads its handlers' options
def on_config(config):
    folder = Path(tempfile.mkdtemp(prefix="gpusched-docs-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    lab = folder / "gpusched_lab"
    lab.mkdir()
    for name in PACKAGES:
        (lab / name).symlink_to(ROOT / name, target_is_directory=True)
    handlers = config.plugins["mkdocstrings"].config.handlers
    python = handlers.setdefault("python", {})
    python["paths"] = [*python.get("paths", ["."]), str(folder)]
    return config
