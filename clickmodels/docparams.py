"""The click models' per-document parameters (:mod:`clickmodels.base`, layer 2): :class:`DocParam`, by grade
(:class:`ByGrade`) or per (query, document) pair (:class:`ByQueryDoc`)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from clickmodels.inputs import FloatArray, Impressions, _restore_frozen, frozen_array
from onlineeval.errors import InputError


class DocParam(ABC):
    """A per-document parameter (attractiveness, satisfaction) looked up per slot."""

    @abstractmethod
    def lookup(self, imp: Impressions) -> FloatArray:
        """(n, k) float values for every slot, 0.0 in empty slots."""

    @abstractmethod
    def check(self, imp: Impressions, name: str) -> None:
        """Raise :class:`InputError` when ``imp`` cannot be parameterised (e.g. label too high)."""

    @property
    @abstractmethod
    def n_grades(self) -> int | None:
        """Number of grades for a :class:`ByGrade` table, else ``None``."""


@dataclass(frozen=True)
class ByGrade(DocParam):
    """A parameter given by relevance grade: slot value ``values[label]``.

    Parameters
    ----------
    values:
        ``values[g]`` for grades ``g = 0 .. G-1``; each in [0, 1].
    """

    values: tuple[float, ...]

    def __post_init__(self) -> None:
        vals = tuple(float(v) for v in self.values)
        object.__setattr__(self, "values", vals)
        for g, v in enumerate(vals):
            if not (0.0 <= v <= 1.0) or math.isnan(v):
                raise ValueError(f"ByGrade values[{g}] must be in [0, 1], got {v}")

    @property
    def n_grades(self) -> int:
        return len(self.values)

    def table(self, empty: float = 0.0) -> FloatArray:
        """``values`` with ``empty`` appended, so ``table[labels]`` maps label -1 to ``empty``."""
        return np.array((*self.values, empty), dtype=np.float64)

    def check(self, imp: Impressions, name: str) -> None:
        if imp.labels is None:
            raise InputError(f"{name} is given by relevance grade, so impressions need labels")
        if imp.labels.size:
            top = int(imp.labels.max())
            if top >= len(self.values):
                raise InputError(
                    f"label {top} is above this model's grades 0..{len(self.values) - 1} "
                    f"({name} has {len(self.values)} grades); use a preset or table with more grades"
                )

    def lookup(self, imp: Impressions) -> FloatArray:
        assert imp.labels is not None
        out = self.table(0.0)[imp.labels]
        if imp.docs is not None:
            out[imp.docs < 0] = 0.0
        return out


def _pair_keys(query: NDArray[Any], doc: NDArray[Any]) -> NDArray[np.int64]:
    return (np.asarray(query, dtype=np.int64) << 32) | np.asarray(doc, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class ByQueryDoc(DocParam):
    """A parameter per (query, document) pair, as fitted on click logs.

    Parameters
    ----------
    query, doc:
        (m,) int ids of the pairs (0 <= id < 2**31); need not be sorted.
    values:
        (m,) float values in [0, 1].
    default:
        Value for pairs not in the table (e.g. the prior or the global mean).
    """

    query: NDArray[np.int64]
    doc: NDArray[np.int64]
    values: FloatArray
    default: float = 0.5
    _keys: NDArray[np.int64] = field(init=False, repr=False)
    _sorted: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        q = np.asarray(self.query, dtype=np.int64)
        d = np.asarray(self.doc, dtype=np.int64)
        v = np.asarray(self.values, dtype=np.float64)
        if not (q.shape == d.shape == v.shape) or q.ndim != 1:
            raise ValueError("ByQueryDoc query, doc and values must be 1-d arrays of one length")
        if q.size and (q.min() < 0 or d.min() < 0 or q.max() >= 2**31 or d.max() >= 2**31):
            raise ValueError("ByQueryDoc ids must be in [0, 2**31)")
        if v.size and (np.any(~np.isfinite(v)) or v.min() < 0 or v.max() > 1):
            raise ValueError("ByQueryDoc values must be in [0, 1]")
        if not (0.0 <= float(self.default) <= 1.0):
            raise ValueError(f"ByQueryDoc default must be in [0, 1], got {self.default}")
        keys = _pair_keys(q, d)
        order = np.argsort(keys, kind="stable")
        if keys.size > 1 and np.any(np.diff(keys[order]) == 0):
            raise ValueError("ByQueryDoc has a (query, doc) pair twice")
        object.__setattr__(self, "query", frozen_array(q, np.int64))
        object.__setattr__(self, "doc", frozen_array(d, np.int64))
        object.__setattr__(self, "values", frozen_array(v))
        object.__setattr__(self, "default", float(self.default))
        object.__setattr__(self, "_keys", frozen_array(keys[order], np.int64))
        object.__setattr__(self, "_sorted", frozen_array(v[order]))

    @property
    def n_grades(self) -> None:
        return None

    def __setstate__(self, state: dict[str, Any]) -> None:
        _restore_frozen(self, state)

    def check(self, imp: Impressions, name: str) -> None:
        if imp.query is None or imp.docs is None:
            raise self._needs_ids(name)

    @staticmethod
    def _needs_ids(name: str) -> InputError:
        return InputError(
            f"{name} is fitted per (query, document), so impressions need query and docs; "
            "for grade labels (as in a simulate config) build the model with "
            "{'name': ..., 'fitted': 'params.json', 'click': [P(click) by grade]}, which keeps "
            "the fitted structural parameters (examination, continuation, ...)"
        )

    def lookup(self, imp: Impressions) -> FloatArray:
        docs, query = imp.docs, imp.query
        if docs is None or query is None:
            raise self._needs_ids("a (query, document) parameter")
        keys = _pair_keys(np.broadcast_to(query[:, None], docs.shape), np.maximum(docs, 0))
        pos = np.searchsorted(self._keys, keys)
        pos_c = np.minimum(pos, max(self._keys.size - 1, 0))
        if self._keys.size:
            found = self._keys[pos_c] == keys
            out = np.where(found, self._sorted[pos_c], self.default)
        else:
            out = np.full(docs.shape, self.default)
        out[~imp.valid] = 0.0
        return out
