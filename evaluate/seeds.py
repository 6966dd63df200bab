"""The one seed-list grammar of the evaluation commands: ``"0-9"``, ``"0,3,5"``, ``"0-2,7"``, an int, or a list of
those, giving a tuple of distinct seeds in order. Suites (``seeds:``), ``gpusched evaluate --seeds`` and
``gpusched netsens-compare --seeds`` accept all of it; ``gpusched marl --seeds`` one form at a time (a range
``A-B`` or a list ``A,B,C``)."""

from __future__ import annotations

from gpusched_envs.safety import check_seed_count


def parse_seeds(value, error: type[Exception] = ValueError, single_form: bool = False) -> tuple[int, ...]:
    """The seeds ``value`` names (see the module docstring); bad input raises ``error`` with one line naming it.
    ``single_form``: a string is one range ``A-B`` or one comma list, not both, and names its option ``--seeds``."""
    if single_form:
        if not isinstance(value, str) or ("-" in value and "," in value):
            raise error(f"--seeds: expected 'A-B' or 'A,B,C' (integers), got {value!r}")
        try:
            return _parse(value, error)
        except Exception as exc:
            if not isinstance(exc, error):
                raise
            raise error(f"--seeds: need 'A-B' or 'A,B,C' with integers >= 0, got {value!r} ({exc})") from None
    return _parse(value, error)


def _parse(value, error: type[Exception]) -> tuple[int, ...]:
    if isinstance(value, bool):
        raise error(f"seeds: expected ints or a range like '0-9', got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise error(f"seeds: {value} is negative (a seed is an integer >= 0)")
        return (value,)
    if isinstance(value, list | tuple):
        items: list[int] = []
        for v in value:
            items.extend(_parse(v, error))
        return tuple(dict.fromkeys(items))
    if isinstance(value, str):
        out: list[int] = []
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            lo, dash, hi = part.partition("-")
            try:
                a, b = (int(lo), int(hi)) if dash else (int(part), int(part))
            except ValueError:
                raise error(f"seeds: {part!r} is not an int or a range like '0-9'") from None
            if b < a:
                raise error(f"seeds: empty range {part!r}")
            check_seed_count(len(out) + b - a + 1, f"seeds {value!r}", error)  # before allocating
            out.extend(range(a, b + 1))
        if not out:
            raise error(f"seeds: no seed in {value!r}")
        return tuple(dict.fromkeys(out))
    raise error(f"seeds: expected ints or a range like '0-9', got {value!r}")
