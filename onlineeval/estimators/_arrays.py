"""Array helpers of the off-policy estimation contract (:mod:`onlineeval.estimators.base`, which
re-exports them): the array type aliases, read-only validated copies, and the per-row
helpers of a log's derived arrays."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError
from onlineeval.estimators.derived import is_frozen

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


def _matrix(x: Any, name: str, dtype: Any, shape: tuple[int, ...] | None = None) -> NDArray[Any]:
    """``x`` as a read-only array of ``dtype``: a private copy, unless ``x`` already is an
    array of that dtype no one can write (:func:`~onlineeval.estimators.derived.is_frozen`,
    e.g. another log's array), which is kept as it is."""
    if is_frozen(x) and x.dtype == np.dtype(dtype):
        arr = x
    else:
        try:
            arr = np.array(x, dtype=dtype, copy=True)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{name}: expected numbers of dtype {np.dtype(dtype).name}") from None
        arr.setflags(write=False)
    if shape is not None and arr.shape != shape:
        raise InputError(f"{name}: expected shape {shape}, got {arr.shape}")
    return arr


def _unique_inverse(x: IntArray) -> tuple[IntArray, IntArray]:
    """``np.unique(x, return_inverse=True)`` of int ids (the same arrays), by counting when the
    ids are non-negative and at most a few times as many as the values (no sort)."""
    if x.size and 0 <= int(x.min()) and int(x.max()) < 4 * x.size + 1024:
        present = np.bincount(x) > 0
        uniq = np.flatnonzero(present)
        code = np.cumsum(present) - 1
        return uniq.astype(np.int64, copy=False), code[x].astype(np.int64, copy=False)
    uniq, inv = np.unique(x, return_inverse=True)
    return uniq, inv.reshape(-1).astype(np.int64, copy=False)


def _readonly_float(x: ArrayLike) -> FloatArray:
    """A read-only float64 view of ``x`` (a copy only when ``x`` is not float64)."""
    v = np.asarray(x, dtype=np.float64).view()
    v.setflags(write=False)
    return v


def _carry_last(w: FloatArray, valid: BoolArray) -> FloatArray:
    """``w`` with each row's empty slots carrying the row's last shown slot's value (1 for a
    row with no shown slot)."""
    n_shown = valid[:, 0].astype(np.int64)  # valid.sum(axis=1), slot by slot
    for j in range(1, valid.shape[1]):
        n_shown += valid[:, j]
    last = np.maximum(n_shown - 1, 0)
    carried = np.where(n_shown > 0, w[np.arange(w.shape[0]), last], 1.0)
    return np.where(valid, w, carried[:, None])
