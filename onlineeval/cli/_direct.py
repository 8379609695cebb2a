"""Plain options of a command parsed from its own typer declarations, without the typer app.

typer (0.29 and later) converts every option value through a pydantic adapter, and importing
and building those costs about 0.15 s per process on the development machine: more than the
whole computation of a short command such as ``onlineeval power``. :func:`run_direct` reads the
options a command function declares (``name: Annotated[T, typer.Option("--name", ...)] =
default``), parses plain arguments as typer's click layer does (:func:`onlineeval.cli._argv.parse_options`,
shared with ``onlineeval evaluate``'s direct path), and calls the function;
anything it does not plainly understand makes it return ``False`` without doing anything, and
the caller goes through typer, which then parses and reports errors itself. So the direct path
never accepts what typer would reject, and never changes what a command receives (tested
against typer on every option of the commands that use it).

Handled: options of type ``float``, ``int``, ``str`` and ``Path`` (optionally ``| None``), as
``--name value``, ``--name=value`` or a declared short name ``-n value``, each at most once;
``list[T]`` options, repeatable (typer passes a list); ``bool`` flags that default to ``False``;
``min``/``max`` bounds (closed or open). Anything else returns ``False``: help, positional
arguments, an unknown or repeated option, an option with a callback, environment variable,
prompt, custom parser, clamp or path checks, a missing required option, or a value that is not
a plain number where one is expected.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onlineeval.cli._argv import REQUIRED, Option, parse_options

__all__ = ["direct_options", "parse_direct", "run_direct"]

_KINDS = {float: "float", int: "int", str: "str", Path: "path"}


def _base_kind(annotation: Any) -> tuple[str | None, bool]:
    """(``'float'``, ``'int'``, ``'str'``, ``'path'`` or ``'flag'``, repeatable) for ``T``, ``T | None``,
    ``list[T]`` or ``list[T] | None``, ``bool`` a flag; ``(None, False)`` for anything else."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            return None, False
        annotation = args[0]
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation) or (None,)
        return _KINDS.get(item), True
    if annotation is bool:
        return "flag", False
    return _KINDS.get(annotation), False


def direct_options(func: Callable[..., Any]) -> dict[str, Option] | None:
    """Option name -> how to parse it, from ``func``'s declarations; ``None`` when some parameter
    is not an option this module handles (the command then always goes through typer)."""
    from typer.models import OptionInfo

    target = inspect.unwrap(func)
    hints = typing.get_type_hints(target, include_extras=True)
    options: dict[str, Option] = {}
    for name, parameter in inspect.signature(target).parameters.items():
        annotation = hints.get(name)
        info, default = None, parameter.default
        if typing.get_origin(annotation) is typing.Annotated:
            base, *meta = typing.get_args(annotation)
            info = next((m for m in meta if isinstance(m, OptionInfo)), None)
            if info is None:
                return None
            # inside Annotated, typer takes Option's first positional argument as the first name
            decls = [*([info.default] if isinstance(info.default, str) else []), *info.param_decls]
        elif isinstance(default, OptionInfo):
            base, info = annotation, default
            default, decls = info.default, list(info.param_decls)
        else:
            return None
        if any(
            getattr(info, attr, None)
            for attr in ("callback", "envvar", "prompt", "parser", "click_type", "clamp", "exists", "resolve_path",
                         "is_eager", "count", "default_factory")
        ):  # fmt: skip
            kind, multiple = None, False
        else:
            kind, multiple = _base_kind(base)
        if default is inspect.Parameter.empty or default is Ellipsis:
            default = REQUIRED
        if not decls:
            decls = ["--" + name.replace("_", "-")]
        if any("/" in d or not d.startswith("-") for d in decls):
            kind = None
        if kind == "flag" and default is not False:
            kind = None  # a flag that defaults to True has its --no- form only in typer
        spec = Option(name, kind, multiple, default, info.min, info.max, bool(getattr(info, "min_open", False)),
                      bool(getattr(info, "max_open", False)))  # fmt: skip
        for decl in decls:
            options[decl] = spec
    return options


def parse_direct(func: Callable[..., Any], args: list[str]) -> dict[str, Any] | None:
    """``func``'s keyword arguments from ``args`` exactly as typer would pass them, or ``None``."""
    options = direct_options(func)
    if options is None:
        return None
    return parse_options(options, args)


def run_direct(func: Callable[..., Any], args: list[str]) -> bool:
    """Call ``func`` with :func:`parse_direct`'s arguments; ``False`` (nothing done) when they
    cannot be parsed here. Exits like typer: returns normally, or ``sys.exit`` with the code of
    the ``typer.Exit`` the command raised."""
    params = parse_direct(func, args)
    if params is None:
        return False
    import typer

    try:
        func(**params)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    return True
