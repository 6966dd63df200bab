"""Checked values for commands and configs: typed, range-checked numbers, seeds, names and resource caps.

One layer used three ways:

* plain checks (:func:`check_int`, :func:`check_float`, :func:`check_seed`, :func:`check_name`,
  :func:`parse_seeds`) that raise :class:`ValidationError` with one line naming what was wrong and where;
* parsers for typer options (``typer.Option(parser=Int(min=1, cap="steps"))``): a bad value is refused while the
  command line is parsed, before the command runs, and the message names the flag;
* rules for configuration fields (:class:`Rule`, attached as dataclass field metadata with :func:`checked` or kept
  in a table by field name, :data:`FIELD_RULES`), checked by :func:`check_fields` with the file and field named.

Resource caps (:data:`CAPS`) bound what one command may ask for. Each is checked before anything is allocated, and
its message says how to raise it: the environment variable ``GPUSCHED_MAX_<NAME>`` (e.g.
``GPUSCHED_MAX_PROCESSES=64``).

================  =====================  ==================================================================
cap               default                what it bounds
================  =====================  ==================================================================
seeds             100,000                seeds in one range or list
steps             10^9                   env steps of one training run
processes         os.cpu_count()         worker processes
envs              1,024                  env copies one vector env steps in one process
episodes          100,000                episodes of one evaluation or adaptation
evaluations       10^7                   population × iterations of a search, seeds × episodes of a bench
agents            256                    agents of a multi-agent env
heads             64                     attention heads
tasks             100,000                tasks of one DAG
action_space      10^6                   actions of a discrete action space (e.g. L^K timer levels)
size              10^8                   any other count (jobs, network width, buffer sizes)
================  =====================  ==================================================================

This module imports neither torch nor the simulator.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass

MAX_SEED = 2**63 - 1


class ValidationError(ValueError):
    """A value refused by a check: one line naming the flag, or the file and field."""


@dataclass(frozen=True)
class Cap:
    """A resource cap: ``default`` (an int, or a function of the machine), raised by the environment variable."""

    name: str
    default: int | Callable[[], int]
    what: str

    @property
    def env(self) -> str:
        return f"GPUSCHED_MAX_{self.name.upper()}"

    def limit(self) -> int:
        raw = os.environ.get(self.env)
        if raw is not None:
            try:
                value = int(raw)
            except ValueError:
                raise ValidationError(f"{self.env}: expected an integer, got {raw!r}") from None
            if value < 1:
                raise ValidationError(f"{self.env}: expected an integer >= 1, got {value}")
            return value
        return int(self.default() if callable(self.default) else self.default)

    def check(self, amount: int, where: str) -> None:
        """Refuse ``amount`` above the limit, naming ``where`` and how to raise the limit."""
        limit = self.limit()
        if amount > limit:
            raise ValidationError(
                f"{where}: {amount:,} {self.what}, more than the limit of {limit:,} "
                f"(set {self.env}={amount} to allow it)"
            )


def _cpus() -> int:
    return os.cpu_count() or 1


CAPS: dict[str, Cap] = {
    cap.name: cap
    for cap in (
        Cap("seeds", 100_000, "seeds"),
        Cap("steps", 10**9, "env steps"),
        Cap("processes", _cpus, "processes (one per CPU by default)"),
        Cap("envs", 1024, "env copies"),
        Cap("episodes", 100_000, "episodes"),
        Cap("evaluations", 10**7, "evaluations"),
        Cap("agents", 256, "agents"),
        Cap("heads", 64, "heads"),
        Cap("tasks", 100_000, "tasks"),
        Cap("action_space", 10**6, "actions"),
        Cap("size", 10**8, "(size)"),
    )
}


def check_cap(name: str, amount: int, where: str) -> None:
    """``CAPS[name].check(amount, where)``."""
    CAPS[name].check(amount, where)


# --------------------------------------------------------------------------------------------- plain checks


def _describe_range(lo, hi, lo_open: bool = False, hi_open: bool = False) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {hi:g}"
    return "finite"


def check_int(
    value, where: str, *, min: int | None = None, max: int | None = None, cap: str | None = None
) -> int:
    """An integer (not a bool, not a float with a fraction) in ``[min, max]`` and under ``CAPS[cap]``."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{where}: expected an integer, got {value!r}")
    if (min is not None and value < min) or (max is not None and value > max):
        raise ValidationError(f"{where} must be {_describe_range(min, max)} (an integer), got {value}")
    if cap is not None:
        check_cap(cap, value, where)
    return value


def check_float(
    value,
    where: str,
    *,
    min: float | None = None,
    max: float | None = None,
    min_open: bool = False,
    max_open: bool = False,
) -> float:
    """A finite number (never NaN or infinity) in the range; ``min_open`` / ``max_open`` exclude the bound."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{where}: expected a number, got {value!r}")
    value = float(value)
    bad = not math.isfinite(value)
    bad = bad or (min is not None and (value < min or (min_open and value == min)))
    bad = bad or (max is not None and (value > max or (max_open and value == max)))
    if bad:
        raise ValidationError(
            f"{where} must be a finite number {_describe_range(min, max, min_open, max_open)}, got {value!r}"
        )
    return value


def check_seed(value, where: str) -> int:
    """A seed: an integer in ``[0, 2**63 - 1]``."""
    value = check_int(value, where)
    if not 0 <= value <= MAX_SEED:
        raise ValidationError(f"{where} must be >= 0 (a seed is an integer below 2**63), got {value}")
    return value


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]*$")


def check_name(value, where: str) -> str:
    """A single name (a run, suite or agent label): letters, digits and ``. _ + = -``; no path separators, no
    whitespace, not ``.`` or ``..``, at most 128 characters."""
    if not isinstance(value, str) or not _NAME.match(value) or value in (".", "..") or len(value) > 128:
        raise ValidationError(
            f"{where}: {value!r} is not a plain name (letters, digits, '.', '_', '-', '+', '='; no path "
            "separators or spaces)"
        )
    return value


def parse_seeds(text: str, where: str = "--seeds") -> list[int]:
    """``A-B`` (inclusive), ``A:B`` (B excluded) or ``A,B,C``: seeds >= 0, a non-empty range, at most
    ``CAPS['seeds']`` of them (counted before the list is built)."""
    text = str(text).strip()
    if not text:
        raise ValidationError(f"{where}: empty seed list")
    for sep, inclusive in (("-", True), (":", False)):
        if sep in text and "," not in text:
            lo_text, _, hi_text = text.partition(sep)
            try:
                lo, hi = int(lo_text), int(hi_text)
            except ValueError:
                raise ValidationError(
                    f"{where}: expected A{sep}B with integers A, B >= 0, got {text!r}"
                ) from None
            count = hi - lo + (1 if inclusive else 0)
            if lo < 0 or count < 1:
                raise ValidationError(f"{where}: {text!r} is an empty or negative seed range")
            check_cap("seeds", count, where)
            check_seed(hi - (0 if inclusive else 1), where)
            return list(range(lo, lo + count))
    parts = text.split(",")
    check_cap("seeds", len(parts), where)
    try:
        seeds = [int(p) for p in parts]
    except ValueError:
        raise ValidationError(f"{where}: expected integers separated by commas, got {text!r}") from None
    return [check_seed(s, where) for s in seeds]


# --------------------------------------------------------------------------------------------- typer parsers


class _Checked:
    """A typer option parser (``typer.Option(parser=Int(min=1))``): it converts the command-line text and checks
    it with one of the plain checks, so a bad value is refused while the command line is parsed and the message
    names the flag. ``kind`` says what the option holds (read by the tests that walk the command tree)."""

    kind = "text"

    def __call__(self, value):
        text = value.strip() if isinstance(value, str) else value
        try:
            return self.check(self.parse(text), "value")
        except ValidationError as exc:
            raise ValueError(str(exc).removeprefix("value").removeprefix(":").strip()) from None

    def parse(self, text):
        return text

    def check(self, value, where):
        return value


class Int(_Checked):
    """An integer option in ``[min, max]`` and under ``CAPS[cap]``."""

    kind = "int"

    def __init__(self, min: int | None = None, max: int | None = None, cap: str | None = "size"):
        self.min, self.max, self.cap = min, max, cap

    def parse(self, text):
        if isinstance(text, int):
            return text
        try:
            return int(text)
        except (TypeError, ValueError):
            raise ValidationError(f"value: {text!r} is not an integer") from None

    def check(self, value, where):
        return check_int(value, where, min=self.min, max=self.max, cap=self.cap)

    def __repr__(self) -> str:
        return f"Int(min={self.min}, max={self.max}, cap={self.cap})"


class Float(_Checked):
    """A finite number option in the range (NaN and infinity are refused)."""

    kind = "float"

    def __init__(self, min=None, max=None, min_open: bool = False, max_open: bool = False):
        self.min, self.max, self.min_open, self.max_open = min, max, min_open, max_open

    def parse(self, text):
        if isinstance(text, int | float) and not isinstance(text, bool):
            return text
        try:
            return float(text)
        except (TypeError, ValueError):
            raise ValidationError(f"value: {text!r} is not a number") from None

    def check(self, value, where):
        return check_float(
            value, where, min=self.min, max=self.max, min_open=self.min_open, max_open=self.max_open
        )


class Seed(Int):
    """A seed option: an integer >= 0."""

    kind = "seed"

    def __init__(self):
        super().__init__(min=0, max=MAX_SEED, cap=None)

    def check(self, value, where):
        return check_seed(value, where)


class Processes(Int):
    """A count of processes or env copies: >= 1, at most ``CAPS['processes']`` (one per CPU by default)."""

    def __init__(self, min: int = 1):
        super().__init__(min=min, max=None, cap="processes")


class Name(_Checked):
    """A plain name option (:func:`check_name`)."""

    kind = "name"

    def check(self, value, where):
        return check_name(value, where)


class Seeds(_Checked):
    """A seed list option (:func:`parse_seeds`)."""

    kind = "seeds"

    def check(self, value, where):
        if isinstance(value, list):
            return value
        return parse_seeds(value, where)


class Text(_Checked):
    """Free text without control characters, at most ``max_len`` characters."""

    def __init__(self, max_len: int = 4096):
        self.max_len = max_len

    def check(self, value, where):
        if not isinstance(value, str) or len(value) > self.max_len or any(ord(c) < 32 for c in value):
            raise ValidationError(
                f"{where}: expected text of at most {self.max_len} characters without control characters"
            )
        return value


def parser_of(param):
    """The :class:`_Checked` parser of a typer option of a built command, or None."""
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    candidate = getattr(info, "parser", None) or getattr(getattr(param, "type", None), "func", None)
    return candidate if isinstance(candidate, _Checked) else None


# ----------------------------------------------------------------------------------------- config field rules


@dataclass(frozen=True)
class Rule:
    """What a config field holds: ``kind`` (int | float | str | bool | seed | name) and its range; ``optional``
    allows None (null in YAML)."""

    kind: str
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    cap: str | None = None
    optional: bool = False
    choices: tuple = ()

    def check(self, value, where: str):
        if value is None and self.optional:
            return None
        if self.kind in ("int", "seed"):
            if self.kind == "seed":
                return check_seed(value, where)
            return check_int(value, where, min=self.min, max=self.max, cap=self.cap or "size")
        if self.kind == "float":
            return check_float(
                value, where, min=self.min, max=self.max, min_open=self.min_open, max_open=self.max_open
            )
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValidationError(f"{where}: expected true or false, got {value!r}")
            return value
        if self.kind == "name":
            return check_name(value, where)
        if not isinstance(value, str):
            raise ValidationError(f"{where}: expected a string, got {value!r}")
        if self.choices and value not in self.choices:
            raise ValidationError(f"{where}: {value!r} is not one of {', '.join(map(str, self.choices))}")
        return value


def positive_int(cap: str = "size") -> Rule:
    return Rule("int", min=1, cap=cap)


def nonneg_int(cap: str = "size") -> Rule:
    return Rule("int", min=0, cap=cap)


def positive(max: float | None = None) -> Rule:
    return Rule("float", min=0.0, min_open=True, max=max)


def nonneg(max: float | None = None) -> Rule:
    return Rule("float", min=0.0, max=max)


def unit(min_open: bool = False) -> Rule:
    """A fraction in [0, 1] (``min_open``: (0, 1], e.g. a discount)."""
    return Rule("float", min=0.0, max=1.0, min_open=min_open)


FINITE = Rule("float")
SEED = Rule("seed")
TEXT = Rule("str")


def checked(default, rule: Rule, **kwargs):
    """A dataclass field with a default and its :class:`Rule` in the metadata (read by :func:`check_fields`)."""
    return field(default=default, metadata={"check": rule}, **kwargs)


# Rules of the argument names the learners share, by name (fields of dataclasses outside this package).
FIELD_RULES: dict[str, Rule] = {
    "gamma": unit(min_open=True),
    "gae_lambda": unit(),
    "tau": unit(min_open=True),
    "learning_rate": positive(),
    "inner_lr": positive(),
    "outer_lr": positive(),
    "bc_learning_rate": nonneg(),
    "lr_final_fraction": unit(),
    "target_kl": Rule("float", min=0.0, min_open=True, optional=True),
    "clip_range": positive(),
    "ent_coef": nonneg(),
    "entropy": nonneg(),
    "vf_coef": nonneg(),
    "value_coef": nonneg(),
    "max_grad_norm": positive(),
    "reward_scale": positive(),
    "start_epsilon": unit(),
    "end_epsilon": unit(),
    "exploration_fraction": unit(),
    "bc_margin": nonneg(),
    "bc_weight": nonneg(),
    "beta_decay": unit(),
    "wait_logit_init": FINITE,
    "rule_logit_init": FINITE,
    "hidden": positive_int(),
    "layers": positive_int(),
    "batch_size": positive_int(),
    "buffer_size": positive_int(),
    "n_steps": positive_int(),
    "n_epochs": positive_int(),
    "n_step": positive_int(),
    "num_envs": Rule("int", min=1, cap="envs"),
    "target_update_interval": positive_int(),
    "learning_starts": nonneg_int(),
    "train_frequency": positive_int(),
    "gradient_steps": positive_int(),
    "torch_threads": nonneg_int("processes"),
    "bc_steps": nonneg_int("steps"),
    "bc_demo_steps": nonneg_int("steps"),
    "seed": SEED,
    "task_seed": SEED,
    "steps": positive_int("steps"),
    "eval_every": nonneg_int("steps"),
    "checkpoint_every": nonneg_int("steps"),
    "iterations": positive_int("evaluations"),
    "meta_batch": positive_int(),
    "inner_episodes": positive_int("episodes"),
    "inner_steps": positive_int(),
    "imitation_episodes": nonneg_int("episodes"),
    "perf_fit_steps": nonneg_int("steps"),
    "train_tasks": positive_int(),
    "num_jobs": positive_int(),
    "rounds": positive_int(),
    "episodes": positive_int("episodes"),
    "epochs": positive_int(),
    "max_steps": positive_int("steps"),
}


def rules_of(dataclass_type) -> dict[str, Rule]:
    """The rules of a dataclass's fields: its field metadata first, else :data:`FIELD_RULES` by name, else one
    inferred from the annotation (int / float / str / bool)."""
    out = {}
    for f in fields(dataclass_type):
        rule = f.metadata.get("check") or FIELD_RULES.get(f.name)
        if rule is None:
            t = str(f.type).replace(" ", "")
            optional = "None" in t or "Optional" in t
            base = t.replace("|None", "").replace("None|", "")
            kind = {"int": "int", "float": "float", "str": "str", "bool": "bool"}.get(base)
            if kind == "int":
                rule = Rule("int", min=0, optional=optional)
            elif kind is not None:
                rule = Rule(kind, optional=optional)
        if rule is not None:
            out[f.name] = rule
    return out


def check_fields(
    values, where: str, rules: Mapping[str, Rule], known: Iterable[str] | None = None, prefix: str = ""
) -> None:
    """Check a mapping (or a dataclass instance) field by field: unknown names (with a did-you-mean) when
    ``known`` is given, then each value with its rule. Messages read ``{where}: {prefix}{field}: ...``."""
    if is_dataclass(values) and not isinstance(values, type):
        values = {f.name: getattr(values, f.name) for f in fields(values)}
    if known is not None:
        for key in values:
            check_key(key, known, where, f"{prefix.rstrip('.')} key" if prefix else "key")
    for key, value in values.items():
        rule = rules.get(key)
        if rule is not None:
            rule.check(value, f"{where}: {prefix}{key}")


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def parse_set_value(key: str, raw: str):
    """The value of a ``--set key=value`` item: a YAML scalar (``1e-4``, which YAML 1.1 reads as text, is the
    number); an empty value is None. Invalid YAML is one line naming the key."""
    import yaml

    if not raw:
        return None
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ValidationError(f"--set {key}: {raw!r} is not a YAML value") from None
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        return float(value)
    return value


def check_key(key, known: Iterable[str], where: str, what: str = "key") -> str:
    """``key`` if it is one of ``known``; else one line with the closest known names (difflib)."""
    import difflib

    known = sorted(known)
    if isinstance(key, str) and key in known and not key.startswith("_"):
        return key
    close = difflib.get_close_matches(str(key), known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else f"; known: {', '.join(known)}"
    raise ValidationError(f"{where}: unknown {what} {key!r}{hint}")


__all__ = [
    "CAPS",
    "FIELD_RULES",
    "MAX_SEED",
    "Cap",
    "Float",
    "Int",
    "Name",
    "Processes",
    "Rule",
    "Seed",
    "Seeds",
    "Text",
    "ValidationError",
    "check_cap",
    "check_fields",
    "check_float",
    "check_int",
    "check_key",
    "check_name",
    "check_seed",
    "checked",
    "nonneg",
    "nonneg_int",
    "parser_of",
    "parse_seeds",
    "parse_set_value",
    "positive",
    "positive_int",
    "rules_of",
    "unit",
]
