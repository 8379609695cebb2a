"""Key paths into a config mapping (:mod:`simulations.config`): parse ``designs[0].analysis.looks``,
test for, set and format a path, and the swept copy of a config (an assumption sweep's point)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onlineeval.errors import ConfigError


def sweep_path(parameter: str) -> tuple[str | int, ...]:
    """``"users.types[1].share"`` -> ``("users", "types", 1, "share")``."""
    import re

    return tuple(int(tok[1:-1]) if tok.startswith("[") else tok.lstrip(".")
                 for tok in re.findall(r"\.?[A-Za-z_][A-Za-z0-9_]*|\[\d+\]", parameter))


def swept_mapping(data: Mapping[str, Any], path: Sequence[str | int], value: float) -> dict[str, Any]:
    """A deep copy of the config mapping ``data`` with ``path`` set to ``value``.

    Setting a user type's ``share`` rescales the other types' shares proportionally so
    they still sum to 1 (equal parts when they were all 0); the copy has no
    ``analysis.assumption_sweep``. Raises ``KeyError`` naming the
    first part of ``path`` that does not exist, ``TypeError`` when it is not a number.
    """
    import copy

    out = copy.deepcopy(dict(data))
    if isinstance(out.get("analysis"), dict):
        out["analysis"].pop("assumption_sweep", None)  # a point of the sweep is not a sweep
    node: Any = out
    for depth, part in enumerate(path[:-1]):
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            raise KeyError(format_path(path[: depth + 1])) from None
    last = path[-1]
    try:
        old = node[last]
    except (KeyError, IndexError, TypeError):
        raise KeyError(format_path(path)) from None
    if isinstance(old, bool) or not isinstance(old, (int, float)):
        raise TypeError(f"{format_path(path)} is {old!r}, not a number")
    # an integer setting swept over whole numbers stays an integer (config integers are strict)
    node[last] = int(value) if isinstance(old, int) and float(value).is_integer() else value
    if tuple(path[:2]) == ("users", "types") and len(path) == 4 and last == "share":
        types = out["users"]["types"]
        others = [i for i in range(len(types)) if i != path[2]]
        rest = sum(float(types[i]["share"]) for i in others)
        for i in others:
            types[i]["share"] = ((1.0 - value) * float(types[i]["share"]) / rest if rest > 0
                                 else (1.0 - value) / len(others))
    return out


def format_path(path: Sequence[str | int]) -> str:
    from onlineeval.errors import format_key_path

    return format_key_path(tuple(path))


def has_key_path(data: Any, path: Sequence[str | int]) -> bool:
    """Whether the nested mapping ``data`` (as read from YAML) has the key path ``path``."""
    node = data
    for part in path:
        if isinstance(part, str) and isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(part, int) and isinstance(node, list) and -len(node) <= part < len(node):
            node = node[part]
        else:
            return False
    return True


def set_path(data: dict[str, Any], path: Sequence[str | int], value: Any) -> None:
    """Set ``path`` in the nested mapping ``data``; missing mapping keys are created, list
    indices must exist. Raises ``KeyError`` naming the first part that cannot be reached."""
    node: Any = data
    for depth, part in enumerate(path[:-1]):
        if isinstance(part, int):
            if not isinstance(node, list) or not -len(node) <= part < len(node):
                raise KeyError(format_path(path[: depth + 1]))
            node = node[part]
        else:
            if not isinstance(node, dict):
                raise KeyError(format_path(path[: depth + 1]))
            if not isinstance(node.get(part), (dict, list)):
                node[part] = {}
            node = node[part]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or not -len(node) <= last < len(node):
            raise KeyError(format_path(path))
    elif not isinstance(node, dict):
        raise KeyError(format_path(path))
    node[last] = value


def set_key_path(data: dict[str, Any], key: str, value: Any, source: str | None = None) -> None:
    """Set the key path ``key`` of a config mapping: dotted names with list indices in brackets
    (``traffic.days``, ``designs[0].analysis.sequential``). Missing mapping keys are created;
    a list index must exist. Raises :class:`ConfigError` naming the key path."""
    path = sweep_path(key) if isinstance(key, str) else ()
    if not path or format_path(path) != key.strip():
        raise ConfigError((), f"{key!r} is not a key path (dotted names, list indices in brackets: "
                          "designs[0].analysis.sequential)", source)
    try:
        set_path(data, path, value)
    except KeyError as exc:
        raise ConfigError(path, f"cannot set {key}: {exc.args[0]} does not exist in the config (a list index "
                          "must exist)", source) from None
