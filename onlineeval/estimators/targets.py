"""Propensities and targets of the off-policy estimation contract (:mod:`onlineeval.estimators.base`,
which re-exports them): the propensities of given lists under a policy, the logging-policy and
target protocols, and the deterministic ranker as a target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from onlineeval.errors import InputError
from onlineeval.estimators._arrays import BoolArray, FloatArray, IntArray, _matrix
from onlineeval.estimators.derived import block_rows


# ------------------------------------------------------------------------- propensities
@dataclass(frozen=True)
class Propensities:
    """Probabilities of given lists under a policy: whole list (n,), prefixes (n, k),
    item-at-position (n, k). Empty slots carry 1."""

    list: FloatArray
    prefix: FloatArray
    item: FloatArray


@runtime_checkable
class PropensityModel(Protocol):
    """A policy that can give the propensities of any lists for given queries
    (logging policies in :mod:`simulations.policies` implement it).

    Logging policies may also offer ``shown_probability(query, docs) -> (n, k)``: the
    probability that each document is shown anywhere in the top ``k`` (used for the
    support check of estimators that only need a document to be shown somewhere, such as
    PBM-IPS), and ``item_position_marginals(query) -> (n, m, k)`` (pseudoinverse).
    """

    def propensities(self, query: IntArray, rankings: IntArray) -> Propensities: ...


# ------------------------------------------------------------------------------ targets
@runtime_checkable
class Target(Protocol):
    """The policy being evaluated.

    ``propensities(query, shown)`` gives the target's probabilities of the logged lists
    (for a deterministic ranker: indicators); ``rankings(query)`` its lists for the
    queries (deterministic targets; the direct method and DR need them).
    """

    name: str

    def propensities(self, query: IntArray, rankings: IntArray) -> Propensities: ...

    def rankings(self, query: IntArray) -> IntArray: ...


@dataclass(frozen=True, eq=False)
class DeterministicTarget:
    """A deterministic ranker: ``lists[q]`` is its list for query index ``q``.

    Parameters
    ----------
    lists:
        ``(Q, k)`` int document ids, ``-1`` = empty slot.
    name:
        Display name (``"B"``, a run file's name).
    """

    lists: IntArray
    name: str = "target"

    def __post_init__(self) -> None:
        arr = _matrix(self.lists, "target lists", np.int64)
        if arr.ndim != 2:
            raise InputError(f"target lists: expected a (queries, k) matrix, got shape {arr.shape}")
        if arr.shape[1] > 1:  # a document twice in a ranking (its second slot was estimated as another document's)
            srt = np.sort(arr, axis=1)
            twice = (srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] >= 0)
            if twice.any():
                q = int(np.flatnonzero(twice.any(axis=1))[0])
                doc = int(srt[q, 1:][twice[q]][0])
                raise InputError(f"target {self.name!r}: the list of query index {q} holds document {doc} twice (a "
                                 "ranking shows each document once; -1 marks an empty slot)")
        object.__setattr__(self, "lists", arr)

    def rankings(self, query: IntArray) -> IntArray:
        q = np.asarray(query, dtype=np.int64)
        self._check_queries(q)
        return self.lists[q]

    def _check_queries(self, q: IntArray) -> None:
        if q.size and (q.min() < 0 or q.max() >= self.lists.shape[0]):
            raise InputError(f"target {self.name!r}: query index outside 0..{self.lists.shape[0] - 1}")

    def propensities(self, query: IntArray, rankings: IntArray) -> Propensities:
        same, run = self.indicators(query, rankings)
        prefix = run.astype(np.float64)
        return Propensities(prefix[:, -1].copy(), prefix, same.astype(np.float64))

    def indicators(self, query: IntArray, rankings: IntArray) -> tuple[BoolArray, BoolArray]:
        """``(same, run)``, ``(n, k)`` booleans: the target's list agrees with ``rankings`` at slot
        ``j`` (its item propensity, 0 or 1), and at every slot ``0..j`` (its prefix propensity);
        the list propensity is ``run[:, -1]``. Empty slots (-1) agree with empty slots. One
        query per row is compared block by block of rows (no ``(n, k)`` copy of the lists)."""
        r = np.asarray(rankings, dtype=np.int64)
        q = np.asarray(query, dtype=np.int64)
        k = r.shape[1]
        lists = self.lists
        if lists.shape[1] < k:
            lists = np.concatenate([lists, np.full((lists.shape[0], k - lists.shape[1]), -1, dtype=np.int64)], axis=1)
        self._check_queries(q)
        if q.ndim != 1 or q.shape[0] != r.shape[0]:  # numpy's broadcasting, as it always was
            same = lists[q][:, :k] == r
            run = same.copy()  # running AND over the slots (np.cumprod's 0/1 values), slot by slot
            for j in range(1, k):
                run[:, j] &= run[:, j - 1]
            return same, run
        lists = lists[:, :k]
        n = r.shape[0]
        same = np.empty((n, k), dtype=bool)
        run = np.empty((n, k), dtype=bool)
        rows = block_rows(k)
        for s in range(0, n, rows):
            e = min(n, s + rows)
            np.equal(lists[q[s:e]], r[s:e], out=same[s:e])
            blk = run[s:e]
            np.copyto(blk, same[s:e])
            for j in range(1, k):  # running AND over the slots, slot by slot
                blk[:, j] &= blk[:, j - 1]
        return same, run
