"""Errors that reach the user: each names where the problem is and what is allowed.

The CLI turns every :class:`OnlineEvalError` into one clear message and exit code 2,
never a traceback. Library code raises these (not ``assert``) for bad input.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["MAX_RESAMPLES", "MIN_ALPHA", "OnlineEvalError", "InputError", "ConfigError", "OutputError", "check_seed",
           "finite_number", "format_key_path", "must_be_one_of", "significance_level"]


class OnlineEvalError(Exception):
    """Base class of all user-facing errors (bad input, bad config)."""

    exit_code = 2


class InputError(OnlineEvalError, ValueError):
    """A problem in an input file (or data frame), located by file and line.

    Parameters
    ----------
    message:
        What is wrong, in words a user can act on.
    path:
        The file (``None`` for in-memory input such as a DataFrame).
    line:
        1-based line number (or row number for a DataFrame), when known.
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        super().__init__(str(self))

    def __reduce__(self) -> tuple[type, tuple[str, str | None, int | None]]:
        # rebuilt from its fields when it crosses a process boundary (a worker of the local executor or Dask)
        return type(self), (self.message, self.path, self.line)

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
        elif self.line is not None:
            where = f"row {self.line}"
        return f"{where}: {self.message}" if where else self.message


def format_key_path(path: Sequence[str | int]) -> str:
    """Render a key path like ``("users", "click_model", "stop", 2)`` as ``users.click_model.stop[2]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class ConfigError(OnlineEvalError, ValueError):
    """A problem in a configuration, located by its key path.

    ``ConfigError(("users", "click_model", "stop", 2), "must be in [0, 1], got 1.5")``
    renders as ``users.click_model.stop[2]: must be in [0, 1], got 1.5``.
    """

    def __init__(
        self, key_path: Sequence[str | int], message: str, source: str | None = None
    ) -> None:
        self.key_path = tuple(key_path)
        self.message = message
        self.source = source
        # args are the constructor's: SimPy re-raises an exception from a process as type(exc)(*exc.args), which
        # with the rendered text alone lost the error in a TypeError (str() renders it either way)
        super().__init__(self.key_path, message, source)

    def __reduce__(self) -> tuple[type, tuple[tuple[str | int, ...], str, str | None]]:
        # rebuilt from its fields when it crosses a process boundary: pickle's default calls the class with
        # ``args`` (the rendered message alone), which this constructor does not take, and a worker's error
        # then reached the caller as a broken process pool
        return type(self), (self.key_path, self.message, self.source)

    def prefixed(self, *prefix: str | int) -> ConfigError:
        """The same error with ``prefix`` put in front of its key path."""
        return ConfigError((*prefix, *self.key_path), self.message, self.source)

    def __str__(self) -> str:
        key = format_key_path(self.key_path)
        head = f"{self.source}: " if self.source else ""
        return f"{head}{key}: {self.message}" if key else f"{head}{self.message}"


#: pydantic's bound errors: (context key, words), e.g. ``ge`` -> "must be at least 2"
_BOUNDS = {"greater_than_equal": ("ge", "at least"), "greater_than": ("gt", "greater than"),
           "less_than_equal": ("le", "at most"), "less_than": ("lt", "less than")}  # fmt: skip
#: pydantic's type errors in the tool's words ("must be an integer")
_KINDS = {"int_parsing": "an integer", "int_type": "an integer", "int_from_float": "an integer",
          "float_parsing": "a number", "float_type": "a number", "finite_number": "a finite number",
          "bool_parsing": "true or false", "bool_type": "true or false", "string_type": "text",
          "list_type": "a list", "tuple_type": "a list", "path_type": "a path (text)"}  # fmt: skip


def must_be(kind: str, ctx: dict, got: str) -> str | None:
    """One pydantic error of type ``kind`` (context ``ctx``) in the tool's words, ``got`` appended (``must be at
    least 2, got 1``; ``must be an integer, got 'x'``), or ``None`` for other kinds. Shared by the config's
    messages and the CLI's usage errors, so both say a bound or a type the same way."""
    if kind in _BOUNDS and _BOUNDS[kind][0] in ctx:
        key, words = _BOUNDS[kind]
        bound = ctx[key]
        return f"must be {words} {f'{bound:g}' if isinstance(bound, float) else bound}{got}"
    if kind in _KINDS:
        return f"must be {_KINDS[kind]}{got}"
    return None


def must_be_one_of(allowed: Iterable[object], got: object, key: str | None = None, note: str = "") -> str:
    """The message for a value outside its allowed values: ``must be one of table, json; got 'xml'``.

    Parameters
    ----------
    allowed:
        The allowed values, listed as written (``str``), in their order.
    got:
        The value given, shown with ``repr``.
    key:
        The key or option as the user typed it, when the message carries it (``alternative must be one of
        ...``); ``None`` when the error's key path names it (``ConfigError(("--format",), must_be_one_of(...))``).
    note:
        Words on the allowed values, put right after them (``" (runs are ranked without qrels)"``).
    """
    head = f"{key} must" if key else "must"
    return f"{head} be one of {', '.join(map(str, allowed))}{note}; got {got!r}"


def check_seed(seed: object, key: str = "seed") -> int:
    """``seed`` as an int: a :class:`ConfigError` naming ``key`` unless a non-negative integer (NumPy's seeds are
    non-negative; not a bool)."""
    import numbers

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ConfigError((key,), f"must be a non-negative integer, got {seed!r}")
    return int(seed)


#: the most resamples (bootstrap replicates, randomisation-test permutations) a command or API call takes: each
#: keeps one float64 per resample and metric (80 MB at the limit); 10**20 failed inside NumPy ("maximum allowed
#: dimension exceeded")
MAX_RESAMPLES = 10_000_000


#: the smallest significance level evaluate and power take: the tests use 1 - alpha and 1 - alpha / 2, which
#: round to 1 (an infinite quantile) below about 1e-16; at 1e-12 they are exact to about 1e-4 relative
MIN_ALPHA = 1e-12


def significance_level(value: object, key: str = "alpha") -> float:
    """``value`` as a significance level in [MIN_ALPHA, 1), else a :class:`ConfigError` naming ``key``."""
    x = finite_number(value)
    if x is None or not MIN_ALPHA <= x < 1.0:
        raise ConfigError((key,), f"must be in [{MIN_ALPHA:g}, 1), got {value!r}")
    return x


def finite_number(value: object) -> float | None:
    """``value`` as a finite float when it is a real number (not a bool) within float64's range, else ``None``
    (text, a bool, NaN, an infinity, or an integer such as 10**400 that ``float`` refuses with an OverflowError):
    for options checked as "a finite number"."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


class OutputError(OnlineEvalError):
    """A result could not be written (read-only folder, full disk, folder in use), or an
    input could not be read; names the path and says what was kept."""

    def __init__(self, message: str, path: str | None = None) -> None:
        self.message = message
        self.path = path
        super().__init__(str(self))

    def __reduce__(self) -> tuple[type, tuple[str, str | None]]:
        return type(self), (self.message, self.path)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message
