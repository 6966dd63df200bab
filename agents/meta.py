"""The metadata of checkpoints (``meta.json``): reading it, checking it field by field before anything is built,
and the errors a bad checkpoint raises. Imports neither torch nor the networks, so code that only inspects a
checkpoint (the leaderboard's planning, ``gpusched evaluate``'s checks) stays light; :mod:`.checkpoint` re-exports
every name here and loads the weights."""

from __future__ import annotations

import json
import re
from dataclasses import fields as dataclass_fields
from pathlib import Path

from gpusched_lab.agents.nets.config import NetworkConfig

FORMAT = 1
MODEL_FILE = "model.pt"
META_FILE = "meta.json"


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded: missing or malformed ``meta.json``, unreadable ``model.pt``, or a field
    that would name code or files outside the package. One line naming the file."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint used with an env (id or observation mode) other than the one it was trained on."""


class CheckpointCorruptError(CheckpointError):
    """``model.pt`` is not the file ``meta.json`` describes (a save interrupted between the two files), or is not a
    readable weights file."""


POLICY_KINDS = ("q", "logits")
OBS_MODES = ("graph", "image", "flat")
# spec keys whose value is a file path (a fit is a file when its value looks like one, else a bundled fit name)
_PATH_KEY = re.compile(r"(?:^|[:,])\s*(?:path|job_table)\s*=[^,]*")
_FIT_FILE = re.compile(r"(?:^|[:,])\s*fit\s*=\s*[^,]*(?:[/\\]|\.ya?ml)[^,]*", re.IGNORECASE)
_JSON_SCALARS = (str, int, float, bool, type(None))


def _check_type(meta: dict, key: str, types, where: str, required: bool = True) -> None:
    if key not in meta:
        if required:
            raise CheckpointError(f"{where}: missing field {key!r}")
        return
    value = meta[key]
    types = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        names = "/".join("null" if t is type(None) else t.__name__ for t in types)
        raise CheckpointError(f"{where}: field {key!r} must be {names}, got {type(value).__name__}")


def check_env_id(env_id: str, where: str, allowed_env_ids=()) -> None:
    """Refuse an env id this package does not register (before ``gym.make`` could import a module it names)."""
    from gpusched_envs.envs import ENTRY_POINTS

    if env_id in ENTRY_POINTS or env_id in tuple(allowed_env_ids):
        return
    from gpusched_envs.envs import V0_IDS

    if env_id in V0_IDS:
        raise CheckpointError(
            f"{where}: env_id {env_id!r} is the previous version of {V0_IDS[env_id]!r}, which changed invalid-action "
            f"handling and the info keys (masked trajectories are the same): set env_id to {V0_IDS[env_id]!r} in "
            "meta.json to load it, or retrain"
        )
    raise CheckpointError(
        f"{where}: env_id {env_id!r} is not an env of this package ({', '.join(ENTRY_POINTS)}); "
        "pass allowed_env_ids=[...] to load a checkpoint of another env"
    )


def _check_env_kwargs(kwargs: dict, where: str, allow_paths: bool) -> None:
    for key, value in kwargs.items():
        ok = isinstance(value, _JSON_SCALARS) or (
            isinstance(value, list) and all(isinstance(v, _JSON_SCALARS) for v in value)
        )
        if not isinstance(key, str) or not ok:
            raise CheckpointError(
                f"{where}: env_kwargs[{key!r}] must be a number, string, bool or list of them"
            )
    if allow_paths:
        return
    cluster = kwargs.get("cluster")
    if cluster is not None:
        from gpusched_envs.sim.topology import PRESETS

        if cluster not in PRESETS:
            raise CheckpointError(
                f"{where}: env_kwargs['cluster'] = {cluster!r} is not a bundled preset ({', '.join(PRESETS)}); "
                "a checkpoint may not name a file (pass allow_paths=True to trust it)"
            )
    for key, value in kwargs.items():  # workload / dag specs (any string): no path=, job_table=, fit=<file>
        hit = isinstance(value, str) and (_PATH_KEY.search(value) or _FIT_FILE.search(value))
        if hit:
            raise CheckpointError(
                f"{where}: env_kwargs[{key!r}] names a file ({hit.group(0).strip(':, ')}); a checkpoint may not "
                "name files (pass allow_paths=True to trust it)"
            )


def check_known_fields(values: dict, known, where: str, block: str) -> None:
    """Refuse names in ``values`` that the config it builds does not have (a checkpoint written by another
    version): :class:`CheckpointMismatchError` naming the block and the first unknown field, with a did-you-mean."""
    import difflib

    unknown = sorted(str(k) for k in set(values) - set(known))
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise CheckpointMismatchError(
            f"{where}: {block} has unknown field(s) {', '.join(map(repr, unknown))}{hint}; this checkpoint was "
            "written by another version"
        )


def build_config(config_type, values, where: str, block: str):
    """``config_type(**values)`` for a dataclass named in a checkpoint's metadata: unknown fields are a
    :class:`CheckpointMismatchError` naming them, a constructor's complaint one :class:`CheckpointError` line."""
    from dataclasses import fields

    if not isinstance(values, dict):
        raise CheckpointError(f"{where}: {block} must be an object, got {type(values).__name__}")
    check_known_fields(values, {f.name for f in fields(config_type)}, where, block)
    try:
        return config_type(**values)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{where}: {block}: {' '.join(str(exc).split())}") from None


def validate_meta(meta, where: str, allowed_env_ids=(), allow_paths: bool = False) -> dict:
    """Check ``meta.json``'s fields (types, known values, env id, file-naming kwargs) and return it."""
    if not isinstance(meta, dict):
        raise CheckpointError(f"{where}: expected a JSON object, got {type(meta).__name__}")
    _check_type(meta, "format", int, where)
    if meta["format"] != FORMAT:
        raise CheckpointError(f"{where}: checkpoint format {meta['format']!r}, this version reads {FORMAT}")
    _check_type(meta, "algorithm", str, where)  # a label (ddqn, ppo, metaplace, ...): it selects no code
    for key, choices in (("policy", POLICY_KINDS), ("obs_mode", OBS_MODES)):
        _check_type(meta, key, str, where)
        if meta[key] not in choices:
            raise CheckpointError(
                f"{where}: field {key!r} is {meta[key]!r}; expected one of {', '.join(choices)}"
            )
    _check_type(meta, "env_id", str, where)
    check_env_id(meta["env_id"], where, allowed_env_ids)
    _check_type(meta, "env_kwargs", dict, where)
    _check_env_kwargs(meta["env_kwargs"], where, allow_paths)
    _check_type(meta, "network", dict, where)
    fields = {f.name: f.type for f in dataclass_fields(NetworkConfig)}
    net = meta["network"]
    check_known_fields(net, fields, where, "network")
    for key, value in net.items():
        kind = fields[key] if isinstance(fields[key], str) else fields[key].__name__
        if kind == "float":  # a starting logit weight (hint_logit): finite, of a sensible size
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1e3 <= value <= 1e3:
                raise CheckpointError(
                    f"{where}: network.{key} must be a number in [-1000, 1000], got {value!r}"
                )
            continue
        want = str if kind == "str" else int
        if (
            isinstance(value, bool)
            or not isinstance(value, want)
            or (want is int and not 0 <= value <= 1_000_000)
        ):
            raise CheckpointError(
                f"{where}: network.{key} must be a {want.__name__} (sensible size), got {value!r}"
            )
    for key in ("steps", "seed"):
        _check_type(meta, key, int, where, required=False)
    _check_type(meta, "model_sha256", str, where, required=False)
    for key in ("args", "evaluation"):
        _check_type(meta, key, (dict, type(None)), where, required=False)
    return meta


def meta_path_of(path: str | Path) -> Path:
    path = Path(path)
    return path / META_FILE if path.is_dir() else path.parent / META_FILE


def read_meta(path: str | Path) -> dict:
    """``meta.json`` of a checkpoint folder (or of the folder holding the given ``model.pt``): a JSON object with
    ``format`` 1, a string ``algorithm`` and (when present) a string ``model_sha256``. Every kind of checkpoint of
    the project (single-agent policies, HMARL actors, interference models) reads its metadata here; a single-agent
    policy's fields are checked further by :func:`validate_meta` (:func:`read_policy_meta`)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint")
    meta_path = path / META_FILE if path.is_dir() else path.parent / META_FILE
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path}: no checkpoint metadata (expected {MODEL_FILE} + {META_FILE})")
    try:
        meta = json.loads(meta_path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{meta_path}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{meta_path}: invalid JSON ({exc})") from None
    except RecursionError:
        raise CheckpointError(f"{meta_path}: JSON nested too deeply") from None
    where = str(meta_path)
    if not isinstance(meta, dict):
        raise CheckpointError(f"{where}: expected a JSON object, got {type(meta).__name__}")
    _check_type(meta, "format", int, where)
    if meta["format"] != FORMAT:
        raise CheckpointError(f"{where}: checkpoint format {meta['format']!r}, this version reads {FORMAT}")
    _check_type(meta, "algorithm", str, where)
    _check_type(meta, "model_sha256", str, where, required=False)
    return meta


def read_policy_meta(path: str | Path, allowed_env_ids=(), allow_paths: bool = False) -> dict:
    """:func:`read_meta` of a single-agent policy checkpoint (what :func:`load` reads), every field checked by
    :func:`validate_meta` before anything is imported or built."""
    return validate_meta(read_meta(path), str(meta_path_of(path)), allowed_env_ids, allow_paths)


def check_compatible(meta: dict, where: str, env_id: str | None, obs_mode: str | None) -> None:
    """One clear error naming both sides when the env id or observation mode differs."""
    bad_id = env_id is not None and env_id != meta["env_id"]
    bad_mode = obs_mode is not None and obs_mode != meta["obs_mode"]
    if bad_id or bad_mode:
        raise CheckpointMismatchError(
            f"checkpoint {where} was trained on {meta['env_id']} (obs_mode={meta['obs_mode']!r}) but is used with "
            f"{env_id or meta['env_id']} (obs_mode={obs_mode or meta['obs_mode']!r})"
        )
