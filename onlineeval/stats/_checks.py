"""Input checks shared by the statistics modules (validate once, at the public entry)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import InputError, must_be_one_of

__all__ = ["as_values", "check_alpha", "check_level", "check_alternative", "ALTERNATIVES"]

ALTERNATIVES = ("two-sided", "larger", "smaller")


def as_values(x: Any, name: str, *, min_size: int = 1) -> NDArray[np.float64]:
    """``x`` as a new read-only 1-d float64 array of finite values.

    Raises
    ------
    InputError
        When ``x`` is not 1-d, has fewer than ``min_size`` values, is not numeric or
        holds NaN / infinity.
    """
    try:
        arr = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a 1-d array of numbers") from None
    if arr.ndim != 1:
        raise InputError(f"{name}: expected a 1-d array, got shape {arr.shape}")
    if arr.size < min_size:
        raise InputError(f"{name}: needs at least {min_size} value(s), got {arr.size}")
    bad = ~np.isfinite(arr)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}: value at index {first} is {float(arr[first])}; only finite numbers are allowed")
    arr.flags.writeable = False
    return arr


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """``alpha`` as a float in the open interval (0, 1)."""
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {alpha}")
    return a


def check_level(level: float, name: str = "level") -> float:
    """A confidence level in (0, 1)."""
    return check_alpha(level, name)


def check_alternative(alternative: str) -> str:
    """One of ``two-sided``, ``larger``, ``smaller``."""
    if alternative not in ALTERNATIVES:
        raise ValueError(must_be_one_of(ALTERNATIVES, alternative, "alternative"))
    return alternative
