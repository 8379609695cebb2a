"""Shared base of every interleaving / multileaving method.

An interleaver maps ``m`` input rankings (one matrix per ranker, one row per
impression) to the shown list and the team of each slot, and maps
``(result, clicks)`` to credit per ranker and to an outcome. The public methods
validate once; an implementation overrides two small hooks, ``_interleave`` and
``_credit`` (and optionally ``_preferences``).

Conventions (see ``DESIGN.md``, "Data in flight"):

* ``rankings[i]`` is an ``(n, k_i)`` integer matrix of document ids, ``-1`` marks
  an empty slot; empty slots may only trail (a list shorter than ``k_i``).
  A document repeated inside one list counts at its first position.
* ``ranking`` (``(n, k)`` int32) is the shown list, ``team`` (``(n, k)`` int8) the
  index of the ranker credited for the slot (``-1``: empty slot).
* ``outcome`` (two rankers): ``+1`` = ``rankings[1]`` (B, the candidate) preferred,
  ``-1`` = ``rankings[0]`` (A) preferred, ``0`` = tie (including no click).
* ``preferences`` (any number of rankers): ``(n, m, m)`` int8 with
  ``pref[:, i, j] = +1`` when ranker ``i`` beats ranker ``j`` on the impression,
  ``-1`` when it loses, ``0`` for a tie; antisymmetric.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import ConfigError, InputError

__all__ = [
    "Interleaver",
    "InterleavingResult",
    "SingleInterleaving",
    "rankings_from_scores",
    "stack_rankings",
]

_INT32_MAX = np.iinfo(np.int32).max


@dataclass(frozen=True)
class InterleavingResult:
    """A batch of interleaved impressions.

    Attributes
    ----------
    ranking:
        ``(n, k)`` int32 shown document ids, ``-1`` = empty slot.
    team:
        ``(n, k)`` int8 index of the ranker credited for each slot, ``-1`` = none.
    rankings:
        ``(m, n, K)`` int32 input rankings padded with ``-1`` to a common width
        (needed by methods whose credit depends on the input lists).
    """

    ranking: NDArray[np.int32]
    team: NDArray[np.int8]
    rankings: NDArray[np.int32]

    @property
    def n(self) -> int:
        """Number of impressions."""
        return int(self.ranking.shape[0])

    @property
    def k(self) -> int:
        """Length of the shown lists."""
        return int(self.ranking.shape[1])

    @property
    def m(self) -> int:
        """Number of rankers."""
        return int(self.rankings.shape[0])


@dataclass(frozen=True)
class SingleInterleaving:
    """One interleaved impression (the production, single-impression API).

    Attributes
    ----------
    ranking:
        Shown document ids, without empty slots.
    team:
        Ranker credited for each shown slot (same length as ``ranking``).
    """

    ranking: tuple[int, ...]
    team: tuple[int, ...]


def stack_rankings(rankings: Sequence[ArrayLike] | np.ndarray, *, min_rankers: int = 2,
                   max_rankers: int | None = None) -> NDArray[np.int32]:
    """Validate input rankings and stack them into an ``(m, n, K)`` int32 array.

    Parameters
    ----------
    rankings:
        One ``(n, k_i)`` integer matrix per ranker (``-1`` = empty, trailing only),
        or an already stacked ``(m, n, K)`` array.
    min_rankers, max_rankers:
        Allowed number of rankers ``m``.

    Returns
    -------
    numpy.ndarray
        A new ``(m, n, max k_i)`` int32 array padded with ``-1``; the caller's
        arrays are never modified.

    Raises
    ------
    InputError
        When shapes, dtypes or values are not as described.
    """
    if isinstance(rankings, np.ndarray) and rankings.ndim == 3:
        mats = [rankings[i] for i in range(rankings.shape[0])]
    else:
        try:
            mats = list(rankings)
        except TypeError:
            raise InputError("rankings must be a sequence of (n, k) integer matrices, one per ranker") from None
    m = len(mats)
    if m < min_rankers or (max_rankers is not None and m > max_rankers):
        allowed = f"exactly {min_rankers}" if max_rankers == min_rankers else (
            f"at least {min_rankers}" if max_rankers is None else f"{min_rankers} to {max_rankers}")
        raise InputError(f"this method needs {allowed} rankings, got {m}")
    arrays: list[np.ndarray] = []
    n: int | None = None
    for i, mat in enumerate(mats):
        arr = np.asarray(mat)
        if arr.ndim != 2:
            raise InputError(f"rankings[{i}] must be a 2-D (n, k) matrix, got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"rankings[{i}] must hold integer document ids, got dtype {arr.dtype}")
        if n is None:
            n = arr.shape[0]
        elif arr.shape[0] != n:
            raise InputError(f"rankings[{i}] has {arr.shape[0]} rows but rankings[0] has {n}; one row per impression")
        if arr.size:
            lo, hi = arr.min(), arr.max()
            if lo < -1 or hi > _INT32_MAX:
                raise InputError(f"rankings[{i}]: document ids must be in [0, {_INT32_MAX}] (-1 = empty), "
                                 f"got values in [{lo}, {hi}]")
            if arr.shape[1] > 1:
                gap = (arr[:, :-1] < 0) & (arr[:, 1:] >= 0)
                if gap.any():
                    row, col = np.argwhere(gap)[0]
                    raise InputError(f"rankings[{i}] row {row}: empty slot (-1) at position {col} is followed by "
                                     "a document; empty slots may only trail")
        arrays.append(arr)
    if n is None:
        raise InputError("no rankings given")
    width = max(a.shape[1] for a in arrays)
    out = np.full((m, n, width), -1, dtype=np.int32)
    for i, arr in enumerate(arrays):
        out[i, :, : arr.shape[1]] = arr
    return out


def rankings_from_scores(scores: ArrayLike, rng: np.random.Generator | None = None, *,
                         ties: str = "random", doc_ids: ArrayLike | None = None) -> NDArray[np.int32]:
    """Turn a score matrix into a ranking matrix, breaking score ties as asked.

    Parameters
    ----------
    scores:
        ``(n, d)`` float scores of ``d`` candidate documents per impression (higher
        is better); ``nan`` marks a document that is not a candidate.
    rng:
        Generator for random tie breaking (required when ``ties="random"``).
    ties:
        ``"random"`` (default): documents with equal scores are ordered uniformly at
        random, so no ranker gains from an arbitrary document order; ``"first"``:
        the lower column index first (deterministic).
    doc_ids:
        ``(n, d)`` or ``(d,)`` document ids of the columns; default ``0..d-1``.

    Returns
    -------
    numpy.ndarray
        ``(n, d)`` int32 ranking, ``-1`` after the last candidate.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise InputError(f"scores must be a 2-D (n, d) matrix, got shape {s.shape}")
    if ties not in ("random", "first"):
        raise ConfigError(("ties",), f"must be 'random' or 'first', got {ties!r}")
    n, d = s.shape
    key = np.where(np.isnan(s), np.inf, -s)
    if ties == "random":
        if rng is None:
            raise ConfigError(("rng",), "random tie breaking needs an np.random.Generator")
        tiebreak = rng.random((n, d))
        order = np.lexsort((tiebreak, key), axis=1)
    else:
        order = np.argsort(key, axis=1, kind="stable")
    ids = np.broadcast_to(np.arange(d) if doc_ids is None else np.asarray(doc_ids), (n, d))
    ranked = np.take_along_axis(ids, order, axis=1).astype(np.int32)
    valid = np.take_along_axis(~np.isnan(s), order, axis=1)
    return np.where(valid, ranked, -1).astype(np.int32)


def _check_clicks(result: InterleavingResult, clicks: ArrayLike) -> NDArray[np.bool_]:
    if not isinstance(result, InterleavingResult):
        raise InputError(f"expected an InterleavingResult from interleave(), got {type(result).__name__}")
    c = np.asarray(clicks)
    if c.shape != result.ranking.shape:
        raise InputError(f"clicks must have the shape of the shown ranking {result.ranking.shape}, got {c.shape}")
    if c.dtype != np.bool_:
        if c.size and not np.isin(c, (0, 1)).all():
            raise InputError("clicks must be boolean (or 0/1)")
        c = c.astype(bool)
    return c & (result.ranking >= 0)


class Interleaver(ABC):
    """Base of all interleaving and multileaving methods.

    Subclasses set :attr:`name` (the registry key), :attr:`min_rankers` and
    :attr:`max_rankers`, take their options as keyword arguments in ``__init__``,
    and implement :meth:`_interleave` and :meth:`_credit`. Methods whose outcome is
    not the sign of a credit difference override :meth:`_preferences`.
    """

    name: ClassVar[str] = ""
    min_rankers: ClassVar[int] = 2
    max_rankers: ClassVar[int | None] = 2

    # ----------------------------------------------------------------- hooks
    @abstractmethod
    def _interleave(self, rankings: NDArray[np.int32], rng: np.random.Generator,
                    length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
        """Return ``(ranking, team)`` for validated ``(m, n, K)`` rankings."""

    @abstractmethod
    def _credit(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
        """Return ``(n, m)`` credit per ranker for validated clicks."""

    def _preferences(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.int8]:
        """Pairwise preferences: by default the sign of the credit difference."""
        credit = self._credit(result, clicks)
        diff = credit[:, :, None] - credit[:, None, :]
        return np.sign(diff).astype(np.int8)

    def _outcome(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.int8]:
        """Two-ranker outcome: by default ``preferences[:, 1, 0]``."""
        return self._preferences(result, clicks)[:, 1, 0].copy()

    # ------------------------------------------------------------ public API
    @property
    def options(self) -> dict[str, Any]:
        """The options this interleaver was built with (for reports and configs)."""
        return {}

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({opts})"

    def interleave(self, rankings: Sequence[ArrayLike] | np.ndarray, rng: np.random.Generator,
                   length: int | None = None) -> InterleavingResult:
        """Interleave a batch of impressions.

        Parameters
        ----------
        rankings:
            One ``(n, k_i)`` int matrix per ranker (row = impression, ``-1`` = empty).
        rng:
            The random generator (the only source of randomness).
        length:
            Length ``k`` of the shown list; default ``max k_i``.

        Returns
        -------
        InterleavingResult
        """
        if not isinstance(rng, np.random.Generator):
            raise ConfigError(("rng",), f"must be an np.random.Generator, got {type(rng).__name__}")
        stacked = stack_rankings(rankings, min_rankers=self.min_rankers, max_rankers=self.max_rankers)
        if length is None:
            length = stacked.shape[2]
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
            raise ConfigError(("length",), f"must be a positive integer, got {length!r}")
        ranking, team = self._interleave(stacked, rng, int(length))
        return InterleavingResult(ranking, team, stacked)

    def credit(self, result: InterleavingResult, clicks: ArrayLike) -> NDArray[np.float64]:
        """Credit per ranker, ``(n, m)`` float, from ``(n, k)`` boolean clicks."""
        return self._credit(result, _check_clicks(result, clicks))

    def preferences(self, result: InterleavingResult, clicks: ArrayLike) -> NDArray[np.int8]:
        """``(n, m, m)`` int8 pairwise preferences (``+1``: row ranker beats column ranker)."""
        return self._preferences(result, _check_clicks(result, clicks))

    def outcome(self, result: InterleavingResult, clicks: ArrayLike) -> NDArray[np.int8]:
        """``(n,)`` int8 outcome of a two-ranker comparison: ``+1`` B wins, ``-1`` A wins, ``0`` tie."""
        if result.m != 2:
            raise InputError(f"outcome() compares two rankers; this result has {result.m}, use preferences()")
        return self._outcome(result, _check_clicks(result, clicks))

    # --------------------------------------------------- single impression
    def interleave_one(self, lists: Sequence[Sequence[int]], rng: np.random.Generator,
                       length: int | None = None) -> SingleInterleaving:
        """Interleave one impression (production API): lists of document ids in, shown list out."""
        width = max((len(lst) for lst in lists), default=0)
        if width == 0:
            raise InputError("every input list is empty; nothing to interleave")
        mats = []
        for i, lst in enumerate(lists):
            row = np.full((1, width), -1, dtype=np.int64)
            try:
                row[0, : len(lst)] = np.asarray(lst, dtype=np.int64)
            except (TypeError, ValueError):
                raise InputError(f"lists[{i}] must contain integer document ids") from None
            mats.append(row)
        res = self.interleave(mats, rng, length)
        keep = res.ranking[0] >= 0
        return SingleInterleaving(tuple(int(d) for d in res.ranking[0][keep]),
                                  tuple(int(t) for t in res.team[0][keep]))

    def outcome_one(self, lists: Sequence[Sequence[int]], shown: SingleInterleaving,
                    clicked: Sequence[bool] | Sequence[int]) -> int:
        """Outcome of one impression: ``clicked`` is a boolean per shown slot, or the clicked document ids."""
        width = max(max((len(lst) for lst in lists), default=0), 1)
        rk = np.full((len(lists), 1, width), -1, dtype=np.int64)
        for i, lst in enumerate(lists):
            try:
                rk[i, 0, : len(lst)] = np.asarray(lst, dtype=np.int64)
            except (TypeError, ValueError, OverflowError):
                raise InputError(f"lists[{i}] must contain integer document ids") from None
        stacked = stack_rankings(rk, min_rankers=self.min_rankers, max_rankers=self.max_rankers)
        k = len(shown.ranking)
        res = InterleavingResult(np.asarray([shown.ranking], dtype=np.int32).reshape(1, k),
                                 np.asarray([shown.team], dtype=np.int8).reshape(1, k), stacked)
        arr = np.asarray(clicked)
        if arr.dtype == np.bool_ and arr.shape == (k,):
            c = arr[None, :]
        else:
            c = np.isin(res.ranking, arr.astype(np.int64))
        return int(self.outcome(res, c)[0])
