"""Markdown tables and the numbers in them, shared by the leaderboard and the benches: one row format, one
alignment rule, one way to print a mean with its interval."""

from __future__ import annotations

import math


def md_row(cells) -> str:
    """``| a | b | c |``."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def md_rule(align: str) -> str:
    """The rule under a header: one letter per column, ``l`` (left, ``---``) or ``r`` (right, ``---:``)."""
    bad = set(align) - {"l", "r"}
    if bad:
        raise ValueError(f"md_rule: alignment letters are 'l' and 'r', got {''.join(sorted(bad))!r}")
    return "|" + "".join("---:|" if a == "r" else "---|" for a in align)


def md_table(header, rows, align: str) -> list[str]:
    """Header, rule and rows as Markdown lines; ``align`` has one letter per column (:func:`md_rule`)."""
    header = list(header)
    if len(align) != len(header):
        raise ValueError(f"md_table: {len(header)} columns but {len(align)} alignment letters")
    return [md_row(header), md_rule(align), *(md_row(r) for r in rows)]


def scale(unit: str, x: float) -> float:
    """A stored value in a column's unit: seconds to hours (``"h"``), fractions to percent (``"%"``)."""
    return x / 3600.0 if unit == "h" else (100.0 * x if unit == "%" else x)


def num(x: float | None, unit: str = "") -> str:
    """``unit``: ``"%"`` (one decimal and a sign), ``"pct"`` (one decimal), ``"score"`` (three decimals), or
    ``""`` (precision by magnitude); missing or non-finite: ``—``."""
    if x is None or not math.isfinite(x):
        return "—"
    if unit in ("%", "pct"):
        return f"{x:.1f}" + ("%" if unit == "%" else "")
    if unit == "score":
        return f"{x:.3f}"
    ax = abs(x)
    return f"{x:,.0f}" if ax >= 1000 else (f"{x:.1f}" if ax >= 10 else f"{x:.2f}")


def cell_text(stat: dict, unit: str) -> str:
    """``mean (low–high)`` of a ``{"mean", "low", "high"}`` statistic in the column's unit (``"h"``, ``"%"``,
    ``"score"`` or ``""``)."""
    m, lo, hi = (float("nan") if stat[k] is None else scale(unit, stat[k]) for k in ("mean", "low", "high"))
    shown = "score" if unit == "score" else ("%" if unit == "%" else "")
    if not math.isfinite(m):
        return "—"
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
        return num(m, shown)
    bare = "pct" if unit == "%" else shown
    return f"{num(m, shown)} ({num(lo, bare)}–{num(hi, bare)})"


def bracket_text(mean: float, low: float, high: float, fmt: str = ",.0f") -> str:
    """``mean [low, high]`` with one format for the three numbers (``"+,.0f"`` for signed differences)."""
    return f"{mean:{fmt}} [{low:{fmt}}, {high:{fmt}}]"


def seed_text(seeds: list[int]) -> str:
    """``0–9`` for a run of three or more consecutive seeds, else ``1, 5, 7``."""
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))
