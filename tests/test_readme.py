"""The README's Python examples run as written, in order, in one namespace (as a reader pastes them). A block that
starts with a file-name comment (``# my_scheduler.py``) is a file the reader saves and runs: its own test runs it
(tests/evaluate/test_suites_agent_specs_and_commands.py)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_examples_run(capsys):
    assert len(BLOCKS) >= 3
    namespace = {"__name__": "readme"}
    for index, block in enumerate(BLOCKS):
        if block.startswith("# ") and block.splitlines()[0].endswith(".py"):
            continue
        exec(compile(block, f"README.md[python block {index}]", "exec"), namespace)
        out = capsys.readouterr().out
        if "print(" in block:
            assert out.strip(), f"block {index} printed nothing"
