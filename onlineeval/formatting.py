"""How the tables of the commands and of the Python API print a number (:func:`fixed`): one rule, outside the
command line (:mod:`onlineeval.cli._common` imports it from here), so the API's outputs do not depend on the CLI."""

from __future__ import annotations

import math

__all__ = ["FIXED_LIMIT", "fixed"]

#: from this size on, :func:`fixed` prints in scientific notation (an estimate resting on a weight of 1e89, or a DCG
#: of exponential gains of grade 900, would otherwise print its 90 or 270 digits and widen its table's column)
FIXED_LIMIT = 1e6


def fixed(x: float, digits: int = 4, *, signed: bool = False) -> str:
    """A table's number with ``digits`` decimals (``0.6700``, ``+0.6318`` with ``signed``); from
    :data:`FIXED_LIMIT` in size in scientific notation with as many (``3.3500e+89``); ``inf`` and ``nan`` as
    Python prints them."""
    sign = "+" if signed else ""
    if math.isfinite(x) and abs(x) >= FIXED_LIMIT:
        return f"{x:{sign}.{digits}e}"
    return f"{x:{sign}.{digits}f}"
