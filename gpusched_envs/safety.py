"""Limits on untrusted input: YAML that expands (anchors and aliases), seed ranges, env ids that name code.

Every YAML file a user can hand to the package (cluster presets and custom clusters, train configs, evaluation
suites, fit files, catalogues) goes through :func:`load_yaml`: ``yaml.SafeLoader`` (no Python objects), a size cap
on the text, and a cap on the size of the document *after* alias expansion, counted on the node graph before any
Python object is built. A "billion laughs" document is a few hundred bytes whose nine nested aliases expand to 10^9
nodes; an anchored list of servers repeated by aliases builds 10^8 servers. Both are refused with one line before
anything is allocated for them. Recursive aliases (a node that contains itself) are refused too.

This module imports neither gymnasium nor the simulator, so :mod:`gpusched_envs.sim` may use it.
"""

from __future__ import annotations

import yaml

MAX_YAML_BYTES = 16 * 2**20  # 16 MiB of text
MAX_YAML_NODES = 1_000_000  # scalars + collections after alias expansion
MAX_YAML_CHARS = 64 * 2**20  # scalar characters after alias expansion
MAX_SEEDS = 100_000  # seeds in one --seeds range or list


class LimitError(ValueError):
    """Input refused because it would expand past a safety limit (one line naming what and where)."""


def _expanded_size(root: yaml.Node, where: str, error: type[Exception]) -> tuple[int, int]:
    """(nodes, scalar characters) of the document with every alias expanded, without expanding it: each node's size
    is computed once and reused by every alias to it. Raises ``error`` past a limit or on a recursive alias."""
    sizes: dict[int, tuple[int, int]] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> tuple[int, int]:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise error(f"{where}: recursive YAML alias (a node that contains itself) at line {_line(node)}")
        if isinstance(node, yaml.ScalarNode):
            out = (1, len(node.value))
        else:
            active.add(key)
            children = (
                [c for pair in node.value for c in pair]
                if isinstance(node, yaml.MappingNode)
                else list(node.value)
            )
            n, chars = 1, 0
            for child in children:
                cn, cc = size(child)
                n, chars = n + cn, chars + cc
                if n > MAX_YAML_NODES or chars > MAX_YAML_CHARS:
                    raise error(
                        f"{where}: YAML expands past the limit of {MAX_YAML_NODES:,} nodes / "
                        f"{MAX_YAML_CHARS:,} characters (anchors and aliases near line {_line(node)}); refused"
                    )
            active.discard(key)
            out = (n, chars)
        sizes[key] = out
        return out

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        return size(root)
    except RecursionError:
        raise error(f"{where}: YAML nested too deeply; refused") from None
    finally:
        sys.setrecursionlimit(limit)


def _line(node: yaml.Node) -> int:
    mark = getattr(node, "start_mark", None)
    return mark.line + 1 if mark is not None else 0


def load_yaml(text: str | bytes, where: str, error: type[Exception] = LimitError):
    """``yaml.safe_load`` with limits: the text's size, and the document's size after alias expansion (checked
    before it is built). Invalid YAML and refused documents raise ``error`` with one line starting with ``where``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise error(f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    if len(text) > MAX_YAML_BYTES:
        raise error(f"{where}: {len(text):,} characters of YAML, more than the limit of {MAX_YAML_BYTES:,}")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, where, error)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise error(f"{where}: invalid YAML ({first})") from None
    finally:
        loader.dispose()


def check_seed_count(count: int, what: str = "seeds", error: type[Exception] = LimitError) -> None:
    """Refuse more than :data:`MAX_SEEDS` seeds before a range is materialised."""
    if count > MAX_SEEDS:
        raise error(f"{what}: {count:,} seeds, more than the limit of {MAX_SEEDS:,}")


__all__ = ["MAX_SEEDS", "MAX_YAML_BYTES", "MAX_YAML_NODES", "LimitError", "check_seed_count", "load_yaml"]
