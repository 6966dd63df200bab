"""Scenarios and suites of the leaderboard: a scenario is an env id, its keyword arguments and the seeds to run;
a suite is a YAML file of scenarios (``evaluate/suites/*.yaml`` or a path of your own).

Suite file format (``yaml.safe_load``)::

    name: quick
    description: one line
    defaults:                      # merged into every scenario (env_kwargs merged key by key)
      env_id: gpusched/JobSelect-v1
      seeds: 0-4                   # "0-4", "0,2,7" or a list
      env_kwargs: {obs_mode: flat}
    scenarios:
      - name: topdrl-synthetic
        description: one line
        offered_load: 0.9          # the load the workload is scaled to (stated in every report)
        env_kwargs: {cluster: topdrl, workload: "synthetic:jobs=300,load=0.9,gpus=32"}
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import gymnasium as gym
from gpusched_lab.evaluate.seeds import parse_seeds as parse_seed_list

from gpusched_envs.multi_agent import multi_scheduler_v1
from gpusched_envs.safety import load_yaml

SUITES_PACKAGE = "gpusched_lab.evaluate"  # the bundled suites: package data of this package
MARL_ENV_ID = "gpusched_envs.multi_agent.multi_scheduler_v1"  # multi-agent scenarios (evaluate.marl)
SUITES_FOLDER = "suites"


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_name(value, where: str) -> str:
    """A suite or scenario name from a file: output folders and file names are derived from it, so it must stay one
    plain path component (no separators, no '..', no absolute path)."""
    if not isinstance(value, str) or not NAME.fullmatch(value) or ".." in value:
        raise SuiteError(
            f"{where}: {value!r} is not a valid name (1-100 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit; no path separators)"
        )
    return value


class SuiteError(ValueError):
    """A suite file or scenario that cannot be used; the message names the file and the field."""


SCENARIO_FIELDS = ("name", "env_id", "env_kwargs", "seeds", "description", "offered_load")
SUITE_FIELDS = ("name", "description", "defaults", "scenarios")


def _check_fields(doc: dict, known, where: str) -> None:
    """Every key of ``doc`` is one of ``known``; else one line with the closest known field (did you mean)."""
    from gpusched_envs.validation import ValidationError, check_key

    for key in doc:
        try:
            check_key(key, known, where, "field")
        except ValidationError as exc:
            raise SuiteError(str(exc)) from None


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def sha256_hex(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files (names and contents, sorted)."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        h.update(str(p.relative_to(path) if path.is_dir() else p.name).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def python_sources_digest(folder: Path) -> str:
    """sha256 of every ``.py`` file under ``folder``, sub-folders included (relative names and contents, sorted;
    ``__pycache__`` left out): the code of a package whose edit must invalidate cached results."""
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*.py") if "__pycache__" not in q.parts):
        h.update(p.relative_to(folder).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def input_file_hashes(env_kwargs: dict) -> dict[str, str]:
    """Digests of the user files a scenario reads (so an edited file invalidates cached results)."""
    paths: list[str] = []
    for value in env_kwargs.values():
        if not isinstance(value, str):
            continue
        if value.endswith((".yaml", ".yml")):
            paths.append(value)
        for part in value.partition(":")[2].split(","):
            key, _, path = part.partition("=")
            if key.strip() in ("path", "job_table", "fit") and path.strip():
                paths.append(path.strip())
    return {p: file_digest(Path(p)) for p in paths if Path(p).exists()}


def parse_seeds(value, where: str | None = None) -> tuple[int, ...]:
    """``"0-9"``, ``"0,3,5"``, ``"0-2,7"``, an int or a list of ints → a tuple of distinct seeds in order
    (:func:`gpusched_lab.evaluate.seeds.parse_seeds`; bad input raises :class:`SuiteError`, its message starting
    with ``where`` when given)."""
    if where is None:
        return parse_seed_list(value, SuiteError)
    try:
        return parse_seed_list(value, SuiteError)
    except SuiteError as exc:
        text = str(exc)
        raise SuiteError(f"{where}: {text.removeprefix('seeds:').strip()}") from None


def make_marl_env(env_kwargs: dict):
    """A multi-agent scenario's env (``multi_scheduler_v1.parallel_env``)."""

    return multi_scheduler_v1.parallel_env(**env_kwargs)


@dataclass(frozen=True)
class Scenario:
    """One setting to evaluate on: ``gym.make(env_id, **env_kwargs)`` reset with each of ``seeds``."""

    name: str
    env_id: str
    env_kwargs: dict = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)
    description: str = ""
    offered_load: float | None = None  # stated target; the measured one is in every cell's metrics

    def content_hash(self) -> str:
        """What the results depend on: env id, kwargs and the content of the files they name (a cluster YAML, a
        workload ``path=``); not the name, description or seed list."""
        doc = {
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "files": input_file_hashes(self.env_kwargs),
        }
        return sha256_hex(canonical_json(doc))[:16]

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "env_id": self.env_id,
            "env_kwargs": dict(self.env_kwargs),
            "seeds": list(self.seeds),
            "description": self.description,
            "offered_load": self.offered_load,
        }

    @classmethod
    def from_dict(cls, doc: dict, where: str = "scenario") -> Scenario:
        if not isinstance(doc, dict):
            raise SuiteError(f"{where}: a scenario is a mapping, got {type(doc).__name__}")
        _check_fields(doc, SCENARIO_FIELDS, where)
        for key in ("name", "env_id"):
            if not isinstance(doc.get(key), str) or not doc[key]:
                raise SuiteError(f"{where}: field {key!r} must be a non-empty string")
        check_name(doc["name"], f"{where}: name")
        kwargs = doc.get("env_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise SuiteError(f"{where}: env_kwargs must be a mapping, got {type(kwargs).__name__}")
        if not all(isinstance(k, str) for k in kwargs):
            raise SuiteError(f"{where}: env_kwargs: keys must be strings")
        load = doc.get("offered_load")
        if load is not None:
            from gpusched_envs.validation import ValidationError, check_float

            try:
                check_float(load, f"{where}: offered_load", min=0.0, min_open=True)
            except ValidationError as exc:
                raise SuiteError(str(exc)) from None
        description = doc.get("description", "")
        if not isinstance(description, str):
            raise SuiteError(f"{where}: description must be text, got {type(description).__name__}")
        return cls(
            name=doc["name"],
            env_id=doc["env_id"],
            env_kwargs=dict(kwargs),
            seeds=parse_seeds(doc.get("seeds", 0), f"{where}: seeds"),
            description=description,
            offered_load=None if load is None else float(load),
        )

    def make_env(self, **overrides):
        """The scenario's env (``overrides`` replace kwargs, e.g. a checkpoint's ``obs_mode``)."""

        import gpusched_envs.envs  # noqa: F401 - registers the ids

        if self.env_id == MARL_ENV_ID:  # a multi-agent scenario: the PettingZoo ParallelEnv
            return make_marl_env({**self.env_kwargs, **overrides})
        if self.env_id not in gym.registry:
            raise SuiteError(f"scenario {self.name}: env id {self.env_id!r} is not registered")
        return gym.make(self.env_id, **{**self.env_kwargs, **overrides})


@dataclass(frozen=True)
class Suite:
    name: str
    scenarios: tuple[Scenario, ...]
    description: str = ""
    source: str = ""

    def scenario(self, name: str) -> Scenario:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise SuiteError(f"suite {self.name}: no scenario {name!r}; valid: {', '.join(self.names())}")

    def names(self) -> list[str]:
        return [s.name for s in self.scenarios]


def _merge(defaults: dict, doc: dict, where: str) -> dict:
    kwargs = doc.get("env_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise SuiteError(f"{where}: env_kwargs must be a mapping, got {type(kwargs).__name__}")
    out = {**defaults, **doc}
    out["env_kwargs"] = {**(defaults.get("env_kwargs") or {}), **(doc.get("env_kwargs") or {})}
    return out


def suite_from_dict(doc: dict, where: str) -> Suite:
    """A suite from its YAML document (``where``: the file, named by every message)."""
    if not isinstance(doc, dict):
        raise SuiteError(
            f"{where}: a suite is a mapping ({', '.join(SUITE_FIELDS)}), got {type(doc).__name__}"
        )
    _check_fields(doc, SUITE_FIELDS, where)
    if not isinstance(doc.get("scenarios"), list) or not doc["scenarios"]:
        raise SuiteError(f"{where}: scenarios: expected a non-empty list of scenarios")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SuiteError(f"{where}: defaults must be a mapping, got {type(defaults).__name__}")
    _check_fields(defaults, [f for f in SCENARIO_FIELDS if f != "name"], f"{where}: defaults")
    _merge({}, defaults, f"{where}: defaults")  # its env_kwargs: a mapping
    if not isinstance(doc.get("description", ""), str):
        raise SuiteError(f"{where}: description must be text")
    scenarios = []
    for i, s in enumerate(doc["scenarios"]):
        if not isinstance(s, dict):
            raise SuiteError(f"{where}: scenarios[{i}] is not a mapping")
        at = f"{where}: scenarios[{i}]"
        scenarios.append(Scenario.from_dict(_merge(defaults, s, at), at))
    names = [s.name for s in scenarios]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SuiteError(f"{where}: duplicate scenario name(s) {', '.join(sorted(dup))}")
    name = check_name(doc["name"], f"{where}: name") if "name" in doc else check_name(Path(where).stem, where)
    return Suite(name, tuple(scenarios), str(doc.get("description", "")), where)


def list_suites() -> list[str]:
    """Names of the bundled suites."""
    folder = resources.files(SUITES_PACKAGE).joinpath(SUITES_FOLDER)
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_suite(name_or_path: str | Path) -> Suite:
    """A bundled suite by name (``quick``, ``standard``, ``full``) or a YAML file of your own."""
    text = str(name_or_path)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.exists():
            raise SuiteError(f"{path}: no such suite file")
        if not path.is_file():
            raise SuiteError(f"{path}: a suite file must be a regular file")
        source, raw = str(path), path.read_bytes()
    else:
        res = resources.files(SUITES_PACKAGE).joinpath(SUITES_FOLDER, f"{text}.yaml")
        if not res.is_file():
            raise SuiteError(
                f"unknown suite {text!r}; bundled: {', '.join(list_suites())}, or a path to a YAML file"
            )
        source, raw = f"suites/{text}.yaml", res.read_bytes()
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    doc = load_yaml(content, source, SuiteError)  # safe_load with limits on alias expansion
    return suite_from_dict(doc, source)


def find_scenario(name: str) -> Scenario:
    """A scenario by ``suite/name`` or by a name unique across the bundled suites."""
    if "/" in name and not Path(name).exists():
        suite, _, scenario = name.rpartition("/")
        return load_suite(suite).scenario(scenario)
    hits = [s for suite in list_suites() for s in load_suite(suite).scenarios if s.name == name]
    if not hits:
        raise SuiteError(f"no bundled scenario {name!r}; use SUITE/NAME or --env/--env-kwargs")
    if len({h.content_hash() for h in hits}) > 1:
        raise SuiteError(f"scenario {name!r} differs between suites; name it as SUITE/{name}")
    return hits[0]
