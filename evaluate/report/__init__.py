"""Reports of the leaderboard and the benches in one place.

- :mod:`.files`: JSON-safe values, JSON, Markdown and CSV text, atomic writes;
- :mod:`.tables`: Markdown rows and rules, numbers with their intervals;
- :mod:`.plots`: one style per agent (20 distinct colours, line styles after each 10 agents), the leaderboard's figures as PNG or
  inline SVG;
- :mod:`.document`: the schema name, table columns and score of ``leaderboard.json``;
- :mod:`.leaderboard`: the leaderboard's document, tables, CSV files and :func:`write_outputs`;
- :mod:`.html`: ``leaderboard.html``, the self-contained page (and :func:`~.html.rebuild` from a results folder).

Every file is written through :mod:`gpusched_envs.io` (``atomic_write_text`` / ``atomic_write_bytes``, via
:mod:`.files`), so each output path is checked and no reader ever sees half a file. Summary statistics (means with
bootstrap intervals, IQM, performance profiles) are :mod:`gpusched_lab.evaluate.stats`.
"""

from __future__ import annotations

from gpusched_lab.evaluate.report.files import clean, csv_text, json_text, write_json, write_text
from gpusched_lab.evaluate.report.leaderboard import (
    NORMALISATION,
    REPORT_SCHEMA,
    TABLE_METRICS,
    _cell_text,
    _clean,
    _num,
    _seed_text,
    aggregate,
    build_document,
    csv_files,
    markdown,
    summarise,
    write_outputs,
)
from gpusched_lab.evaluate.report.tables import cell_text, md_row, md_rule, md_table, num, seed_text


def plots(doc: dict, quantiles: dict, folder):
    """The leaderboard's PNG plots under ``folder`` (:func:`.plots.plots`; matplotlib imported on use)."""
    from gpusched_lab.evaluate.report.plots import plots as _plots

    return _plots(doc, quantiles, folder)


__all__ = [
    "NORMALISATION",
    "REPORT_SCHEMA",
    "TABLE_METRICS",
    "_cell_text",
    "_clean",
    "_num",
    "_seed_text",
    "aggregate",
    "build_document",
    "cell_text",
    "clean",
    "csv_files",
    "csv_text",
    "json_text",
    "markdown",
    "md_row",
    "md_rule",
    "md_table",
    "num",
    "plots",
    "seed_text",
    "summarise",
    "write_json",
    "write_outputs",
    "write_text",
]
