"""leaderboard.html in a real browser (headless Chromium): the tables render, a ``#sort=`` fragment sorts a table,
every plot is drawn, and nothing is fetched from the network (no http(s) source or link in the page, every request
sent to a dead proxy, and the browser's network log holds no http(s) request). Skipped where no Chromium is
installed (Debian: ``apt-get install chromium``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from gpusched_lab.evaluate import run_leaderboard
from gpusched_lab.evaluate.scenarios import suite_from_dict

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no Chromium on PATH (Debian: apt-get install chromium); the page is not browser-tested",
)

SUITE = {
    "name": "page",
    "description": "two tiny contended scenarios for the page test",
    "defaults": {"env_id": "gpusched/JobSelect-v1", "seeds": "0-1", "env_kwargs": {"obs_mode": "flat"}},
    "scenarios": [
        {
            "name": "tiny-a",
            "offered_load": 0.9,
            "env_kwargs": {"cluster": "tiny", "workload": "synthetic:jobs=30,load=0.9,gpus=16,max_gpus=16"},
        },
        {
            "name": "tiny-b",
            "offered_load": 1.2,
            "env_kwargs": {"cluster": "tiny", "workload": "synthetic:jobs=24,load=1.2,gpus=16,max_gpus=16"},
        },
    ],
}
AGENTS = ["fifo", "sjf", "srtf"]
TIMEOUT = 30


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("page")
    run_leaderboard(suite_from_dict(SUITE, "page.yaml"), AGENTS, out, plots=True)
    return out


def chromium(*args: str, cwd=None) -> subprocess.CompletedProcess:
    cmd = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-spell-checking",
        "--no-default-browser-check",
        "--proxy-server=127.0.0.1:9",  # any fetch of the page would fail
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd)


class Dom(HTMLParser):
    """The tables (id, data-sorted, header keys, rows of data-value), figures with an <svg>, the root's attrs."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, dict] = {}
        self.figures: list[tuple[str, bool]] = []
        self.root: dict = {}
        self._table = None
        self._row = None
        self._section = None
        self._figure = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        elif tag == "table":
            self._table = {"sorted": a.get("data-sorted"), "keys": [], "rows": []}
            self.tables[a.get("id", f"t{len(self.tables)}")] = self._table
        elif tag in ("thead", "tbody", "tfoot"):
            self._section = tag
        elif tag == "th" and self._table is not None and self._section == "thead":
            self._table["keys"].append(a.get("data-key"))
        elif tag == "tr" and self._table is not None and self._section == "tbody":
            self._row = []
            self._table["rows"].append(self._row)
        elif tag == "td" and self._row is not None:
            self._row.append(a.get("data-value"))
        elif tag == "figure":
            self._figure = [a.get("data-plot"), False]
        elif tag == "svg" and self._figure is not None:
            self._figure[1] = True

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = self._row = None
        elif tag == "tr":
            self._row = None
        elif tag == "figure" and self._figure is not None:
            self.figures.append(tuple(self._figure))
            self._figure = None


def dump(page, fragment: str = "") -> Dom:
    r = chromium("--dump-dom", (page / "leaderboard.html").as_uri() + fragment)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = Dom()
    dom.feed(r.stdout)
    return dom


def test_page_is_self_contained(page):
    html = (page / "leaderboard.html").read_text()
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert not re.search(
        r"<(?:link|iframe|object|embed)\b|<script[^>]*\bsrc=|<img[^>]*\bsrc=\"(?!data:)", html, re.I
    )
    assert not re.search(r"@import|url\(\s*['\"]?(?:https?:)?//", html, re.I)
    pngs = sorted(p.name for p in (page / "plots").glob("*.png"))
    assert sorted(re.findall(r'data-plot="([^"]+)"', html)) == pngs  # every plot of the run is in the page


def test_tables_render_and_the_sort_fragment_sorts(page):
    dom = dump(page, "#sort=sc-tiny-b:p95_jct:desc")
    assert dom.root.get("data-ready") == "1"  # the inline script ran
    assert set(dom.tables) == {"overall", "sc-tiny-a", "sc-tiny-b", "settings"}
    overall = dom.tables["overall"]
    assert len(overall["rows"]) == len(AGENTS)
    assert [int(r[0]) for r in overall["rows"]] == [1, 2, 3]  # ranked by IQM
    assert len(dom.tables["settings"]["rows"]) == 2
    for name in ("sc-tiny-a", "sc-tiny-b"):
        t = dom.tables[name]
        assert t["keys"][:3] == ["rank", "agent", "avg_jct"] and len(t["rows"]) == len(AGENTS)
    t = dom.tables["sc-tiny-b"]
    assert t["sorted"] == "p95_jct:desc"
    col = t["keys"].index("p95_jct")
    values = [float(r[col]) for r in t["rows"]]
    assert values == sorted(values, reverse=True)
    assert dom.tables["sc-tiny-a"]["sorted"] is None  # the other tables keep their order
    ranks = [int(r[0]) for r in dom.tables["sc-tiny-a"]["rows"]]
    assert ranks == sorted(ranks)
    # every plot is drawn: a figure with an inline <svg> for each PNG of the run
    plots = sorted(p.name for p in (page / "plots").glob("*.png"))
    assert sorted(name for name, has_svg in dom.figures if has_svg) == plots


def test_sorting_by_text_ascending(page):
    dom = dump(page, "#sort=overall:agent:asc")
    t = dom.tables["overall"]
    names = [r[t["keys"].index("agent")] for r in t["rows"]]
    assert t["sorted"] == "agent:asc" and names == sorted(names) and len(names) == len(AGENTS)


def test_nothing_is_fetched_and_the_screenshot_is_drawn(page, tmp_path):
    from PIL import Image

    log, shot = tmp_path / "net.json", tmp_path / "page.png"
    r = chromium(
        f"--log-net-log={log}",
        f"--screenshot={shot}",
        "--window-size=1366,900",
        "--hide-scrollbars",
        (page / "leaderboard.html").as_uri(),
        cwd=tmp_path,
    )
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    text = log.read_text()
    try:
        urls = re.findall(r'"url":"([^"]+)"', json.dumps(json.loads(text)))
    except json.JSONDecodeError:  # a log cut short by the browser's exit: read what is there
        urls = re.findall(r'"url":"([^"]+)"', text)
    assert not [u for u in urls if u.startswith(("http:", "https:", "ws:", "wss:"))]
    with Image.open(shot) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 50  # text, tables and plots, not a blank page
