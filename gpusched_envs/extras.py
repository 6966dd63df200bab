"""Which optional extras of the installed project are present: the core install is the env library alone, and
each command or benchmark of the upper packages names the extra it needs (``[agents]``, ``[eval]``)."""

from __future__ import annotations


def missing_requirements(dist, extra: str, _seen: set | None = None) -> list[str]:
    """The distributions an extra of ``dist`` (an ``importlib.metadata.Distribution``) needs that are not installed,
    following the extra's references to the project's other extras (``gpusched-envs[agents]``)."""
    import re
    from importlib.metadata import PackageNotFoundError, version

    seen = _seen if _seen is not None else set()
    if extra in seen:
        return []
    seen.add(extra)
    missing = []
    own = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
    for req in dist.requires or []:
        spec, _, marker = req.partition(";")
        if not re.search(r"""extra\s*==\s*["']""" + re.escape(extra) + r"""["']""", marker):
            continue
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", spec)
        if m is None:
            continue
        name = re.sub(r"[-_.]+", "-", m[1]).lower()
        if name == own:  # e.g. "gpusched-envs[agents]": that extra's own requirements
            for sub in (m[2] or "").split(","):
                if sub.strip():
                    missing += missing_requirements(dist, sub.strip(), seen)
            continue
        try:
            version(name)
        except PackageNotFoundError:
            missing.append(name)
    return missing
