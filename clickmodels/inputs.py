"""The click models' batches (:mod:`clickmodels.base`, layer 1): :class:`Impressions` in, :class:`ClickSample`
out, and the read-only arrays models keep their parameters in (:func:`frozen_array`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.int64]


def _restore_frozen(obj: object, state: dict[str, Any]) -> None:
    """Unpickle into a frozen dataclass, keeping its arrays read-only."""
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
        object.__setattr__(obj, key, value)


def frozen_array(values: ArrayLike, dtype: Any = np.float64) -> NDArray[Any]:
    """A read-only copy of ``values`` (so a model's parameters cannot change by use)."""
    out = np.array(values, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class Impressions:
    """A batch of result lists, one row per impression.

    Parameters
    ----------
    labels:
        (n, k) int graded relevance, ``-1`` for an empty slot; ``None`` for log data.
    query:
        (n,) int query ids; needed by models with :class:`ByQueryDoc` parameters.
    docs:
        (n, k) int document ids, ``-1`` for an empty slot.
    """

    labels: NDArray[np.int64] | None = None
    query: NDArray[np.int64] | None = None
    docs: NDArray[np.int64] | None = None

    def __post_init__(self) -> None:
        if self.labels is None and self.docs is None:
            raise InputError("impressions need labels (n, k) or docs (n, k)")
        for name in ("labels", "docs"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _int_matrix(value, name))
        if self.query is not None:
            q = np.asarray(self.query)
            if q.ndim != 1 or (q.size and not np.issubdtype(q.dtype, np.integer)):
                raise InputError(f"query must be a 1-d integer array, got shape {q.shape} dtype {q.dtype}")
            object.__setattr__(self, "query", q)
        shapes = [a.shape for a in (self.labels, self.docs) if a is not None]
        if len(shapes) == 2 and shapes[0] != shapes[1]:
            raise InputError(f"labels {shapes[0]} and docs {shapes[1]} must have the same shape")
        if len(shapes[0]) != 2:
            raise InputError(f"labels/docs must be a 2-d array (n, k), got shape {shapes[0]}")
        if self.query is not None and self.query.shape != (shapes[0][0],):
            raise InputError(f"query must have shape ({shapes[0][0]},), got {self.query.shape}")

    @property
    def shape(self) -> tuple[int, int]:
        """(n, k): impressions and slots per impression."""
        arr = self.labels if self.labels is not None else self.docs
        assert arr is not None  # guaranteed by __post_init__ (not input validation)
        return (int(arr.shape[0]), int(arr.shape[1]))

    @property
    def valid(self) -> BoolArray:
        """(n, k) bool: ``True`` where the slot holds a document."""
        if self.labels is not None:
            out = self.labels >= 0
            if self.docs is not None:
                out &= self.docs >= 0
            return out
        assert self.docs is not None
        return self.docs >= 0


def _int_matrix(values: ArrayLike, name: str) -> NDArray[np.int64]:
    arr = np.asarray(values)
    if arr.ndim != 2:
        raise InputError(f"{name} must be a 2-d array (n, k), got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(np.equal(np.mod(arr, 1), 0)):
            raise InputError(f"{name} must hold integers (-1 for an empty slot), got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
    if arr.size and arr.min() < -1:
        raise InputError(f"{name} must be >= -1 (-1 marks an empty slot), found {int(arr.min())}")
    return arr


def as_impressions(batch: Impressions | ArrayLike) -> Impressions:
    """Coerce a bare label matrix to :class:`Impressions` (values are checked there)."""
    if isinstance(batch, Impressions):
        return batch
    return Impressions(labels=np.asarray(batch))


def impressions(
    labels: ArrayLike | None = None, query: ArrayLike | None = None, docs: ArrayLike | None = None
) -> Impressions:
    """Build checked :class:`Impressions` from array-likes (labels, query ids, doc ids)."""
    return Impressions(
        labels=None if labels is None else np.asarray(labels),
        query=None if query is None else np.asarray(query),
        docs=None if docs is None else np.asarray(docs),
    )


class ClickSample(NamedTuple):
    """Sampled clicks of a batch, with what counterfactual estimators need.

    Attributes
    ----------
    clicks:
        (n, k) bool sampled clicks.
    propensity:
        (n, k) float exact marginal examination probability of each slot given the
        impression (0 in empty slots); independent of the random draw.
    examined:
        (n, k) bool realised examination in this draw (the user's path).

    The arrays may be transposed views of rank-major work arrays (Fortran order); use
    ``np.ascontiguousarray`` where C order matters.
    """

    clicks: BoolArray
    propensity: FloatArray
    examined: BoolArray
