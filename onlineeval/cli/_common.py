"""Shared pieces of the command-line tools: error reporting and output helpers.

Every command is wrapped with :func:`guarded`, which turns a user-facing
:class:`~onlineeval.errors.OnlineEvalError` into one line on stderr and exit code 2.
Heavy imports stay inside command bodies so ``onlineeval --help`` is instant.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from onlineeval.errors import OnlineEvalError
from onlineeval.formatting import FIXED_LIMIT, fixed  # the commands' and the API's one rule, importable from here


class LazyTyper:
    """``typer`` imported on first attribute access (``typer.echo``, ``typer.Option(...)``).

    A module that binds ``typer = LazyTyper()`` reads, uses and has its annotations
    evaluated (typer's ``inspect.signature(eval_str=True)``) exactly as with ``import
    typer``, but a process that never touches it (``onlineeval evaluate``'s direct path
    when nothing fails) does not import typer and click (about 35 to 50 ms).
    """

    def __getattr__(self, name: str) -> Any:
        import typer

        return getattr(typer, name)


if TYPE_CHECKING:  # pragma: no cover
    import typer
else:
    typer = LazyTyper()

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["FIXED_LIMIT", "effect_text", "fail", "fixed", "guarded"]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` to stderr and return the exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def effect_text(x: float, digits: int = 3) -> str:
    """A signed effect to ``digits`` significant figures, keeping the zeros that carry them: ``+0.100``,
    ``+0.0200``, ``-0.0228`` (``%g`` prints ``+0.1`` and ``+0.02``, which read as less precise than their
    neighbours). At least ``10 ** (digits - 1)`` in size: a whole number with thousands separators
    (``+1,235``); below 1e-4: scientific (``+1.00e-05``); exactly 0: ``0``."""
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    size = abs(x)
    if size >= 10 ** (digits - 1):
        return f"{x:+,.0f}"
    if size < 1e-4:
        return f"{x:+.{digits - 1}e}"
    return f"{x:+#.{digits}g}".rstrip(".")  # '#' keeps trailing zeros; 99.96 -> '+100.' loses its point


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Report :class:`OnlineEvalError` (and file-system errors) as one clear line, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except OnlineEvalError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            name = getattr(exc, "filename", None) or ""
            raise fail(f"{name}: {exc.strerror or exc}") from None
        except KeyboardInterrupt as exc:
            # Ctrl-C: 130; a run stopped by SIGTERM raises a KeyboardInterrupt carrying 143
            code = int(getattr(exc, "exit_code", 130))
            typer.echo(f"interrupted ({exc or 'SIGINT'}); finished work is kept", err=True)
            sys.exit(code)

    return wrapper
