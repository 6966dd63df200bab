"""One JSON file per leaderboard cell (scenario × agent × seed), written atomically, validated when read.

A cell's ``key`` hashes what its result depends on (scenario content, agent identity, seed, code version) and its
``checksum`` hashes the file's own content; a file that does not parse, has another schema, key or checksum, or
lacks a field is reported (with the reason) and recomputed, never used. Layout: ``OUT/cells/SCENARIO/AGENT/seed-N.json``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpusched_lab.evaluate.scenarios import canonical_json, sha256_hex

from gpusched_envs.io import atomic_write_text

CELL_SCHEMA = "gpusched.leaderboard.cell/1"
REQUIRED = ("schema", "key", "scenario", "agent", "seed", "code_version", "metrics", "checksum")


def cell_key(scenario_hash: str, agent_hash: str, seed: int, code_version: str) -> str:
    doc = {"scenario": scenario_hash, "agent": agent_hash, "seed": int(seed), "code": code_version}
    return sha256_hex(canonical_json(doc))[:32]


def slug(name: str) -> str:
    """A file-name-safe form of a name; a name that had to change gets a short hash so two never collide."""
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", name).strip(".") or "_"
    return safe if safe == name else f"{safe}-{sha256_hex(name)[:6]}"


def cell_path(out: str | Path, scenario: str, agent: str, seed: int) -> Path:
    return Path(out) / "cells" / slug(scenario) / slug(agent) / f"seed-{int(seed)}.json"


def checksum(payload: dict) -> str:
    return sha256_hex(canonical_json({k: v for k, v in payload.items() if k != "checksum"}))


def write_cell(path: Path, payload: dict) -> dict:
    """Write a cell atomically (temporary file + ``os.replace``); returns the payload as written."""
    payload = {**payload, "schema": CELL_SCHEMA}
    payload["checksum"] = checksum(payload)
    atomic_write_text(path, json.dumps(payload, indent=1, sort_keys=True) + "\n")
    return payload


def read_cell(path: Path, key: str) -> tuple[dict | None, str | None]:
    """``(payload, None)`` for a valid cell with this key; ``(None, reason)`` otherwise (``reason`` is ``None``
    when the file does not exist)."""
    if not path.exists():
        return None, None
    try:
        payload = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"corrupt (not JSON: {exc})"
    if not isinstance(payload, dict):
        return None, "corrupt (not a JSON object)"
    missing = [k for k in REQUIRED if k not in payload]
    if missing:
        return None, f"corrupt (missing {', '.join(missing)})"
    if payload["schema"] != CELL_SCHEMA:
        return None, f"other schema {payload['schema']!r}"
    if payload.get("checksum") != checksum(payload):
        return None, "corrupt (checksum mismatch)"
    if payload["key"] != key:
        return None, "stale (scenario, agent or code changed)"
    if not isinstance(payload["metrics"], dict) or "avg_jct" not in payload["metrics"]:
        return None, "corrupt (no metrics)"
    return payload, None
