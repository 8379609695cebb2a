"""Vectorised building blocks shared by several interleaving methods (private)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError

__all__ = [
    "check_bool",
    "check_positive_float",
    "first_occurrence",
    "mask_shared_prefix",
    "rank_in_lists",
    "shared_prefix_length",
]


def check_bool(method: str, key: str, value: Any) -> bool:
    """Validate a boolean option."""
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError(("interleaver", key), f"{method}: must be true or false, got {value!r}")
    return bool(value)


def check_positive_float(method: str, key: str, value: Any, *, allow_zero: bool = False) -> float:
    """Validate a positive (or non-negative) finite float option."""
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):  # (an integer beyond float64's range)
        raise ConfigError(("interleaver", key), f"{method}: must be a number, got {value!r}") from None
    if not np.isfinite(v) or v < 0 or (v == 0 and not allow_zero) or isinstance(value, bool):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(("interleaver", key), f"{method}: must be a finite number {bound}, got {value!r}")
    return v


def shared_prefix_length(rankings: NDArray[np.int32]) -> NDArray[np.intp]:
    """Length of the top prefix shared by all ``m`` input rankings, per impression.

    Parameters
    ----------
    rankings:
        ``(m, n, K)`` stacked rankings.
    """
    agree = np.all(rankings == rankings[0], axis=0) & (rankings[0] >= 0)
    return np.cumprod(agree, axis=1, dtype=np.int8).sum(axis=1, dtype=np.intp)


def mask_shared_prefix(clicks: NDArray[np.bool_], rankings: NDArray[np.int32]) -> NDArray[np.bool_]:
    """Clicks with those on the shared top prefix removed (the prefix is shown first, in order)."""
    plen = shared_prefix_length(rankings)
    pos = np.arange(clicks.shape[1])
    return clicks & (pos[None, :] >= plen[:, None])


def rank_in_lists(docs: NDArray[np.int32], rankings: NDArray[np.int32]) -> NDArray[np.intp]:
    """0-based rank of each ``docs[r, j]`` in each ranker's list (first occurrence).

    Returns ``(m, n, k)``; a document absent from list ``i`` (or an empty slot) gets
    rank ``K`` (one past the end of the padded list).
    """
    m, n, K = rankings.shape
    out = np.full((m,) + docs.shape, K, dtype=np.intp)
    if K == 0:
        return out
    valid = docs[:, :, None] >= 0
    for i in range(m):
        eq = docs[:, :, None] == rankings[i][:, None, :]
        eq &= valid
        idx = eq.argmax(axis=2)                                   # first match (0 when none)
        found = np.take_along_axis(eq, idx[:, :, None], axis=2)[:, :, 0]
        out[i] = np.where(found, idx, K)
    return out


def first_occurrence(values: NDArray[np.int32]) -> NDArray[np.bool_]:
    """``True`` where ``values[r, j] >= 0`` and does not occur earlier in row ``r``."""
    # stable sort per row: among equal values the earliest column comes first, the rest are repeats
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    repeat_sorted = np.zeros(values.shape, dtype=bool)
    np.equal(ordered[:, 1:], ordered[:, :-1], out=repeat_sorted[:, 1:])
    repeat = np.empty_like(repeat_sorted)
    np.put_along_axis(repeat, order, repeat_sorted, axis=1)
    return ~repeat & (values >= 0)
