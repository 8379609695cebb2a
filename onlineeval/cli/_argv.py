"""Plain command-line options parsed as typer's click layer parses them, from a table of options.

The one argv loop and value parser of the direct command-line paths: :mod:`onlineeval.cli._direct`
builds the table from a command's own typer declarations (``onlineeval power ...``), and
:mod:`onlineeval.cli.evaluate_direct` keeps a static table for ``onlineeval evaluate``, whose
start-up must not import typer (tests check that table equals the one read from the declarations).
This module imports only ``re``, ``pathlib`` and ``typing`` (all three already imported by any
process that reaches it); its own cost is one small class (about 0.2 ms; the patterns compile at first
use). Measured on whole ``onlineeval evaluate`` processes of a tiny qrels and run against the former
separate parser (2026-12-01, loaded 2-core machine, 8-30 alternated pairs): time unchanged within noise
(per-pair median ratios 0.98-1.00).

:func:`parse_options` returns the keyword arguments typer would pass the command, or ``None`` for
anything it does not plainly understand (the caller then goes through typer, which parses and
reports errors itself). Handled: ``--name value``, ``--name=value`` and a declared short name
``-n value`` (each at most once, unless repeatable); values of kind ``"float"``, ``"int"``,
``"str"``, ``"path"``; repeatable options (typer passes a list, or the default when none is
given); ``"flag"`` options that default to ``False``; ``min``/``max`` bounds, closed or open.
``None``: an unknown or repeated option, an option of kind ``None``, a value missing, empty or
starting with ``-`` for a text or path, a number that is not plainly one (signs, leading zeros
and exponents are accepted, as by Python's ``int`` / ``float`` which click calls; ``nan``,
``inf``, ``1_000``, blanks and more than 18 integer digits are left to typer), a value out of
its bounds, an attached short value (``-fjson``), a positional argument, or a required option
not given.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["REQUIRED", "Option", "parse_options"]

# patterns, not compiled at import: most commands give no number (re caches them at first use)
_FLOAT = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_INT = r"[+-]?[0-9]{1,18}"


class _Required:
    """The default of a required option (no default): :func:`parse_options` then needs it given."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class Option(NamedTuple):
    """How to parse one option (every name of an option maps to the same entry)."""

    param: str  # the command's keyword argument
    kind: str | None  # "float", "int", "str", "path", "flag"; None: declared, only its default used here
    multiple: bool = False  # list[T]: repeatable, typer passes a list (or the default when not given)
    default: Any = None  # REQUIRED when the option must be given
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False


def _value(spec: Option, text: str) -> Any:
    """The value typer would pass for ``text``, or ``None`` when it is not plainly valid."""
    if spec.kind in ("str", "path"):
        if not text or text.startswith("-"):
            return None
        return text if spec.kind == "str" else Path(text)
    if spec.kind == "int" and re.fullmatch(_INT, text):
        value: float = int(text)
    elif spec.kind == "float" and re.fullmatch(_FLOAT, text):
        value = float(text)
    else:
        return None
    if spec.low is not None and (value < spec.low or (spec.low_open and value == spec.low)):
        return None
    if spec.high is not None and (value > spec.high or (spec.high_open and value == spec.high)):
        return None
    return value


def parse_options(options: dict[str, Option], args: list[str]) -> dict[str, Any] | None:
    """The command's keyword arguments from ``args`` exactly as typer would pass them, or ``None``.

    ``options`` maps every option name (``--name``, ``-n``) to its :class:`Option`; every parameter
    in it and not given in ``args`` gets its default."""
    params: dict[str, Any] = {}
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        spec = options.get(name)
        if spec is None or spec.kind is None or (spec.param in params and not spec.multiple):
            return None
        if spec.kind == "flag":
            if eq:
                return None
            params[spec.param] = True
            i += 1
            continue
        if eq:
            text, i = attached, i + 1
        elif i + 1 < len(args):
            text, i = args[i + 1], i + 2
        else:
            return None
        value = _value(spec, text)
        if value is None:
            return None
        if spec.multiple:
            params.setdefault(spec.param, []).append(value)
        else:
            params[spec.param] = value
    for spec in options.values():
        if spec.param not in params:
            if spec.default is REQUIRED:
                return None
            params[spec.param] = spec.default
    return params
