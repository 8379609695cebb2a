"""How each kind of number is written, for the terminal summary, report.html and the blocks both print.

One rule per kind of number (see the comment above :data:`VALUE_DIGITS`): metric values, effects and ratios
(:func:`value_text`), their standard errors (:func:`se_text`), rates over replicates (:func:`rate_text`), relative
changes (:func:`percent_text`), counts (:func:`count_text`) and days (:func:`days_text`). Re-exported by
:mod:`simulations.report`.
"""

from __future__ import annotations

import math
from typing import Any


def _fmt(x: float | None, spec: str = ".4f", signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, ("+" if signed else "") + spec)


#: significant figures of metric values, effects, deltas, biases and ratios
VALUE_DIGITS = 3


#: significant figures of a standard error, SD or RMSE
SE_DIGITS = 2


def _number(x: Any) -> bool:
    return x is not None and not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def significant(x: Any, digits: int, signed: bool = False) -> str:
    """``x`` to ``digits`` significant figures with its trailing zeros (``0.0220``, ``1.50e-05``, ``250``);
    ``-`` when missing or not finite."""
    if not _number(x):
        return "-"
    text = format(float(x), ("+" if signed else "") + f"#.{digits}g")
    return text[:-1] if text.endswith(".") else text.replace(".e", "e")


def value_text(x: Any, signed: bool = False) -> str:
    """A metric value, an effect, a delta, a bias or a ratio: :data:`VALUE_DIGITS` significant figures."""
    return significant(x, VALUE_DIGITS, signed)


def se_text(x: Any) -> str:
    """The standard error, SD or RMSE of a value: :data:`SE_DIGITS` significant figures."""
    return significant(x, SE_DIGITS)


def rate_text(x: Any, signed: bool = False) -> str:
    """A rate or share over replicates or users (power, false-positive rate, coverage): 3 decimals."""
    return format(float(x), ("+" if signed else "") + ".3f") if _number(x) else "-"


def percent_text(x: Any, signed: bool = True) -> str:
    """A relative change given as a fraction (0.047) as a percentage to 0.1% (``+4.7%``); one below 0.05% but not 0
    to one significant digit (``+0.003%``), where 0.1% would print a change as ``+0.0%``."""
    if not _number(x):
        return "-"
    v = 100.0 * float(x)
    sign = "+" if signed else ""
    return format(v, sign + ".1f") + "%" if v == 0 or abs(v) >= 0.05 else format(v, sign + ".1g") + "%"


def count_text(x: Any) -> str:
    """A count (impressions, users) as ``1,234``; ``not reachable`` when missing or infinite."""
    return f"{float(x):,.0f}" if _number(x) else "not reachable"


def days_text(x: Any) -> str:
    """Analytic or planned days (or a mean day of decision): 1 decimal; ``-`` when missing or infinite."""
    return f"{float(x):.1f}" if _number(x) else "-"


_count = count_text
