"""The Python examples of docs/*.md run as written: each page's blocks in order, in one namespace (as a reader pastes
them). A block preceded by ``<!-- docs-test: slow -->`` runs only with ``-m slow`` (``make test-all``); one preceded by
``<!-- docs-test: skip -->`` never runs (a file the reader saves, for instance). Also checks what the strict site
build cannot: every page is in the navigation, and no page carries development history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "scripts" not in p.parts)
BLOCK = re.compile(r"(<!-- docs-test: (slow|skip) -->\s*\n)?```python\n(.*?)```", re.S)
HISTORY = re.compile(r"\bissue \d+|SPEC §|\bsession\b|\bwave \d|\b20\d\d-\d\d-\d\d \d\d:\d\d|dev VM", re.I)


def blocks(page: Path, marker: str | None) -> list[str]:
    return [code for _, mark, code in BLOCK.findall(page.read_text()) if (mark or None) == marker]


def run_page(page: Path, marker: str | None) -> None:
    namespace = {"__name__": "docs"}
    for index, code in enumerate(blocks(page, marker)):
        exec(compile(code, f"{page.relative_to(ROOT)}[python block {index}]", "exec"), namespace)


FAST = [p for p in PAGES if blocks(p, None)]
SLOW = [p for p in PAGES if blocks(p, "slow")]


@pytest.mark.parametrize("page", FAST, ids=lambda p: str(p.relative_to(DOCS)))
def test_docs_python_examples_run(page, capsys):
    run_page(page, None)


@pytest.mark.slow
@pytest.mark.parametrize("page", SLOW, ids=lambda p: str(p.relative_to(DOCS)))
def test_docs_long_python_examples_run(page):
    run_page(page, "slow")


def test_docs_have_examples_to_run():
    assert len(FAST) >= 10


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [str(p.relative_to(DOCS)) for p in PAGES if str(p.relative_to(DOCS)) not in nav]
    assert not missing


@pytest.mark.parametrize(
    "path",
    [*PAGES, ROOT / "README.md", ROOT / "checkpoints" / "README.md"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_development_history(path):
    hits = HISTORY.findall(path.read_text())
    assert not hits, f"{path.relative_to(ROOT)}: {hits}"


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
