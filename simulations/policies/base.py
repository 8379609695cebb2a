r"""Randomised logging policies: the contract, the registry and the shared machinery.

A logging policy serves a ranking for each impression and knows the *exact* probability
of anything it can show, so the off-policy estimators in :mod:`onlineeval.estimators`
can reweight its log. Every policy here satisfies
:class:`onlineeval.estimators.base.PropensityModel`.

Input and conventions
---------------------
``scores`` is a ``(Q, m)`` float matrix: one row per query, one column per candidate
document (the candidate id is the column index); ``-inf`` marks "not a candidate"
(padding). The *base ranking* of a query is its candidates by descending score, ties
broken by the lower candidate index (a stable sort). ``k`` is the number of slots shown;
a query with :math:`c < k` candidates shows ``-1`` (empty) in its trailing ``k - c``
slots. Slots are 0-based.

For a list :math:`\mathbf s = (s_0, \dots, s_{k-1})` of a query the propensities are

.. math::

    p_{\mathrm{list}} = P(\text{top } k = \mathbf s), \quad
    p_{\mathrm{prefix}, j} = P(\text{top } j{+}1 = (s_0, \dots, s_j)), \quad
    p_{\mathrm{item}, j} = P(\text{slot } j \text{ shows } s_j),

0 where impossible (a non-candidate, a repeated document, an empty slot where the query
has a candidate to show); an empty slot at :math:`j \ge c` carries 1 in ``item`` and
leaves the prefix probability unchanged. Marginals are
:math:`M_{d j} = P(\text{slot } j \text{ shows } d)`, the shown probability is
:math:`\sum_j M_{dj}` (the slots are disjoint events) and the pair marginals
:math:`P_{j a l b} = P(\text{slot } j \text{ shows } a,\ \text{slot } l \text{ shows } b)`
(with :math:`P_{jaj b} = \delta_{ab} M_{aj}`).

API (every policy)
------------------
``sample(query, rng)`` draws ``(n, k)`` lists; ``propensities(query, rankings)`` gives
list, prefix and item probabilities of *any* lists; ``shown_probability(query, docs)``,
``item_position_marginals(query)`` ``(n, m, k)`` and ``pair_marginals(query_one)``
``(k, m, k, m)``; ``describe()`` and ``conventions()`` say what they are. Where item
marginals are Monte Carlo (Plackett-Luce above its DP budget with ``item_method: monte_carlo``)
``marginals_exact(query)`` is False and ``marginal_se``, ``item_se`` and ``shown_se`` give their standard errors
(0 where exact); ``with_mc_seed(seed)`` gives an independent re-draw.

*Rank policies* (deterministic, epsilon-greedy, RandTop-n, swap, RandPair) randomise
only the *positions* of the base ranking: slot :math:`j` shows the document of base rank
:math:`\sigma(j)` for a random permutation :math:`\sigma` whose law depends on the query
only through its number of candidates :math:`c`. They implement four small hooks on
ranks (sampling, prefix probabilities, rank marginals, pair marginals) and the base
class maps ranks to documents.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators.base import Propensities
from simulations.policies.settings import PROPENSITY_PROGRESS, PROPENSITY_THREADS, propensity_settings

__all__ = [
    "POLICIES",
    "PROPENSITY_PROGRESS",
    "PROPENSITY_THREADS",
    "propensity_settings",
    "LoggingPolicy",
    "RankPolicy",
    "SpecReader",
    "TopNRankPolicy",
    "available_policies",
    "policy_class",
    "register_policy",
    "repeated_by_slot",
    "repeated_entries",
    "running_and",
    "running_product",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: the candidate-level status of a shown entry: a valid candidate has its base rank >= 0
EMPTY = -1
INVALID = -2


# ------------------------------------------------------------------------------ spec reading
class SpecReader:
    """Reads one policy spec (a mapping) with clear :class:`ConfigError` messages.

    Every option read is remembered; :meth:`finish` refuses any other key, naming the
    allowed ones. ``path`` is the key path of the spec inside its configuration.
    """

    def __init__(self, spec: Mapping[str, Any], path: Sequence[str | int]) -> None:
        if not isinstance(spec, Mapping):
            raise ConfigError(tuple(path), f"a policy spec must be a mapping like {{'policy': 'randtop', 'n': 10}}, "
                                           f"got {type(spec).__name__}")
        self.spec = spec
        self.path = tuple(path)
        self.read: set[str] = {"policy"}

    def _get(self, key: str, default: Any) -> Any:
        self.read.add(key)
        return self.spec.get(key, default)

    def number(self, key: str, default: float, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ConfigError((*self.path, key), f"must be a number, got {value!r}")
        try:
            x = float(value)
        except OverflowError:  # an integer beyond float64's range: not finite either
            x = math.inf
        lo_ok = low is None or (x > low if low_open else x >= low)
        hi_ok = high is None or (x < high if high_open else x <= high)
        if not math.isfinite(x) or not lo_ok or not hi_ok:
            lo = "-inf" if low is None else f"{low:g}"
            hi = "inf" if high is None else f"{high:g}"
            band = ("(" if low_open else "[") + f"{lo}, {hi}" + (")" if high_open else "]")
            raise ConfigError((*self.path, key), f"must be a finite number in {band}, got {value!r}")
        return x

    def integer(self, key: str, default: int, *, low: int, high: int | None = None) -> int:
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ConfigError((*self.path, key), f"must be an integer, got {value!r}")
        v = int(value)
        if v < low or (high is not None and v > high):
            band = f">= {low}" if high is None else f"in {low}..{high}"
            raise ConfigError((*self.path, key), f"must be an integer {band}, got {v}")
        return v

    def choice(self, key: str, allowed: Sequence[str], default: str) -> str:
        value = self._get(key, default)
        if value not in allowed:
            raise ConfigError((*self.path, key), f"got {value!r}; allowed: {', '.join(allowed)}")
        return str(value)

    def raw(self, key: str, default: Any = None) -> Any:
        return self._get(key, default)

    def scores(self, scores: Any) -> Any:
        """The score matrix this spec uses: ``scores`` itself, or, when ``scores`` is a
        mapping of named matrices (rankers ``A``, ``B``), the one named by the spec's
        ``scores`` key (optional when the mapping has exactly one entry)."""
        if not isinstance(scores, Mapping):
            if "scores" in self.spec:
                raise ConfigError((*self.path, "scores"), "names a score matrix, but only one unnamed matrix was given")
            return scores
        name = self._get("scores", None)
        if name is None:
            if len(scores) == 1:
                return next(iter(scores.values()))
            raise ConfigError((*self.path, "scores"), "required: which ranker's scores; allowed: "
                              + ", ".join(map(str, scores)))
        if not isinstance(name, str) or name not in scores:
            raise ConfigError((*self.path, "scores"),
                              f"unknown scores {name!r}; allowed: " + ", ".join(map(str, scores)))
        return scores[name]

    def finish(self) -> None:
        extra = sorted(str(key) for key in self.spec if key not in self.read)
        if extra:
            raise ConfigError((*self.path, extra[0]), f"unknown option for policy {self.spec.get('policy')!r}; "
                                                      f"allowed: {', '.join(sorted(self.read))}")


# ------------------------------------------------------------------------------ base class
def _scores_matrix(scores: ArrayLike) -> FloatArray:
    try:
        s = np.array(scores, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise InputError("scores: expected a (queries, candidates) matrix of numbers") from None
    if s.ndim != 2 or s.shape[1] == 0:
        raise InputError(f"scores: expected a (queries, candidates) matrix with at least one column, got shape "
                         f"{s.shape}")
    if np.isnan(s).any():
        q, d = np.argwhere(np.isnan(s))[0]
        raise InputError(f"scores: NaN for query row {q}, candidate {d}; use -inf to mark a non-candidate")
    if np.isposinf(s).any():
        q, d = np.argwhere(np.isposinf(s))[0]
        raise InputError(f"scores: +inf for query row {q}, candidate {d}; scores must be finite or -inf (padding)")
    s.setflags(write=False)
    return s


def int_option(name: str, value: Any, low: int, high: int) -> int:
    """A policy constructor's integer option, checked (``ConfigError`` naming ``name``)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= int(value) <= high:
        raise ConfigError((name,), f"must be an integer in {low}..{high}, got {value!r}")
    return int(value)


def _frozen(a: NDArray[Any]) -> NDArray[Any]:
    a.setflags(write=False)
    return a


class LoggingPolicy(ABC):
    """Base class of every logging policy (see the module docstring for conventions).

    Parameters
    ----------
    scores:
        ``(Q, m)`` candidate scores, ``-inf`` = not a candidate.
    k:
        Slots shown, ``1 <= k <= m``.

    Attributes
    ----------
    order:
        ``(Q, m)`` the base ranking: ``order[q, r]`` is the candidate of base rank ``r``
        (``-1`` for ``r >= n_candidates[q]``).
    rank_of:
        ``(Q, m)`` the base rank of each candidate (``-1`` for non-candidates).
    n_candidates:
        ``(Q,)`` the number of candidates of each query.
    """

    name: ClassVar[str] = ""
    #: True when item marginals may be Monte Carlo estimates (Plackett-Luce above the DP budget with
    #: item_method: monte_carlo)
    may_be_monte_carlo: ClassVar[bool] = False

    def __init__(self, scores: ArrayLike, k: int) -> None:
        self.scores = _scores_matrix(scores)
        self.Q, self.m = (int(x) for x in self.scores.shape)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= self.m:
            raise ConfigError(("k",), f"must be an integer in 1..{self.m} (the number of candidate columns), got {k!r}")
        self.k = int(k)
        cand = np.isfinite(self.scores)
        self.n_candidates: IntArray = _frozen(cand.sum(axis=1).astype(np.int64))
        order = np.argsort(-self.scores, axis=1, kind="stable").astype(np.int64)
        pos = np.arange(self.m)[None, :]
        order[pos >= self.n_candidates[:, None]] = EMPTY
        self.order: IntArray = _frozen(order)
        rank_of = np.full((self.Q, self.m), EMPTY, dtype=np.int64)
        rows = np.repeat(np.arange(self.Q), self.m).reshape(self.Q, self.m)
        ok = order >= 0
        rank_of[rows[ok], order[ok]] = np.broadcast_to(pos, order.shape)[ok]
        self.rank_of: IntArray = _frozen(rank_of)

    # ------------------------------------------------------------------ validation
    def _queries(self, query: ArrayLike) -> IntArray:
        try:
            q = np.array(query, dtype=np.int64, copy=True).reshape(-1) if np.ndim(query) <= 1 else None
        except (TypeError, ValueError, OverflowError):
            q = None
        if q is None:
            raise InputError("query: expected a 1-d array of integer query indices")
        raw = np.asarray(query)
        if raw.size and raw.dtype.kind == "f" and not np.all(raw == np.round(raw)):
            raise InputError("query: expected integer query indices, got fractional numbers")
        if q.size and (q.min() < 0 or q.max() >= self.Q):
            bad = q[(q < 0) | (q >= self.Q)][0]
            raise InputError(f"query: index {int(bad)} outside 0..{self.Q - 1} (the rows of the scores matrix)")
        return q

    def _query_one(self, query_one: Any) -> int:
        if isinstance(query_one, bool) or not isinstance(query_one, (int, np.integer)):
            raise InputError(f"query_one: expected one integer query index, got {query_one!r}")
        return int(self._queries(np.array([query_one]))[0])

    def _lists(self, q: IntArray, rankings: ArrayLike, name: str = "rankings") -> IntArray:
        try:
            r = np.array(rankings, dtype=np.int64, copy=True)
        except (TypeError, ValueError, OverflowError):
            raise InputError(f"{name}: expected an (n, k) matrix of integer document ids") from None
        if r.shape != (q.size, self.k):
            raise InputError(f"{name}: expected shape {(q.size, self.k)} (one row per query, k = {self.k} slots), "
                             f"got {r.shape}")
        if r.size and (r.min() < EMPTY or r.max() >= self.m):
            raise InputError(f"{name}: document ids must be -1 (empty) or in 0..{self.m - 1} (candidate columns)")
        return r

    def _ranks(self, q: IntArray, r: IntArray, repeat: BoolArray | None = None
               ) -> tuple[IntArray, BoolArray, BoolArray]:
        """Base ranks of shown docs (``-1`` empty, ``-2`` non-candidate), the validity of
        each prefix (a possible shape: no repeat, no non-candidate, empty exactly at
        ``j >= c``) and the legitimately empty slots. ``repeat`` is
        :func:`repeated_entries` of ``r`` when the caller has it (it does not depend on the
        policy)."""
        c = self.n_candidates[q][:, None]
        j = np.arange(self.k)[None, :]
        shown = r >= 0
        looked = self.rank_of[q[:, None], np.maximum(r, 0)]
        ranks = np.where(shown, np.where(looked < 0, INVALID, looked), EMPTY)
        should_be_empty = j >= c
        is_empty = ~shown
        empty_ok = is_empty & should_be_empty
        good = np.where(should_be_empty, is_empty, ranks >= 0)
        if self.k > 1:
            good &= ~(repeated_entries(r) if repeat is None else repeat)
        ok_prefix = running_and(good)
        return ranks, ok_prefix, empty_ok

    def _checked_propensities(self, q: IntArray, r: IntArray, repeat: BoolArray | None = None) -> Propensities:
        """:meth:`propensities` of validated queries and lists."""
        ranks, ok_prefix, empty_ok = self._ranks(q, r, repeat)
        prefix = self._prefix(q, r, ranks) * ok_prefix
        item = np.where(empty_ok, 1.0, np.where(ranks >= 0, self._item(q, r, ranks), 0.0))
        return Propensities(prefix[:, -1].copy(), prefix, item)

    # ------------------------------------------------------------------ public API
    def sample(self, query: ArrayLike, rng: np.random.Generator) -> IntArray:
        """Draw one shown list per impression: ``(n, k)`` int64 document ids (``-1`` empty)."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy Generator (np.random.default_rng(seed))")
        q = self._queries(query)
        out = self._sample(q, rng)
        return out

    def propensities(self, query: ArrayLike, rankings: ArrayLike) -> Propensities:
        """Exact list, prefix and item-position probabilities of ``rankings`` (any lists,
        not only sampled ones); item probabilities are Monte Carlo only where
        :meth:`marginals_exact` says so (Plackett-Luce above its DP budget)."""
        q = self._queries(query)
        r = self._lists(q, rankings)
        return self._checked_propensities(q, r)

    def shown_probability(self, query: ArrayLike, docs: ArrayLike) -> FloatArray:
        """``(n, k)`` probability that each document of ``docs`` is shown anywhere in the top
        ``k`` (:math:`\\sum_j M_{dj}`); ``-1`` entries give 1, non-candidates 0."""
        q = self._queries(query)
        d = self._lists(q, docs, "docs")
        valid = (d >= 0) & (self.rank_of[q[:, None], np.maximum(d, 0)] >= 0)
        p = self._shown(q, d, valid)
        return np.where(d == EMPTY, 1.0, np.where(valid, p, 0.0))

    def item_position_marginals(self, query: ArrayLike) -> FloatArray:
        """``(n, m, k)``: ``[i, d, j]`` = P(slot ``j`` shows candidate ``d``) for query ``query[i]``."""
        q = self._queries(query)
        uq, inv = np.unique(q, return_inverse=True)
        return self._marginals(uq)[inv]

    def pair_marginals(self, query_one: int) -> FloatArray:
        """``(k, m, k, m)``: ``[j, a, l, b]`` = P(slot ``j`` shows ``a`` and slot ``l`` shows ``b``)
        for one query (``[j, a, j, b] = 1[a = b] M[a, j]``)."""
        return self._pairs(self._query_one(query_one))

    def marginals_exact(self, query: ArrayLike) -> BoolArray:
        """``(n,)`` True where the item marginals of the query are exact (False: Monte Carlo)."""
        q = self._queries(query)
        return np.ones(q.size, dtype=bool)

    def marginal_se(self, query: ArrayLike) -> FloatArray:
        """``(n, m, k)`` standard errors of :meth:`item_position_marginals` (0 where exact)."""
        q = self._queries(query)
        return np.zeros((q.size, self.m, self.k))

    def item_se(self, query: ArrayLike, rankings: ArrayLike) -> FloatArray:
        """``(n, k)`` standard errors of ``propensities(query, rankings).item`` (0 where exact)."""
        q = self._queries(query)
        r = self._lists(q, rankings)
        se = self.marginal_se(q)
        return np.where(r >= 0, se[np.arange(q.size)[:, None], np.maximum(r, 0), np.arange(self.k)[None, :]], 0.0)

    def shown_se(self, query: ArrayLike, docs: ArrayLike) -> FloatArray:
        """``(n, k)`` standard errors of :meth:`shown_probability` (0 where exact)."""
        q = self._queries(query)
        return np.zeros(self._lists(q, docs, "docs").shape)

    def with_mc_seed(self, seed: int) -> LoggingPolicy:
        """The same policy whose Monte Carlo marginals use ``seed`` (itself when all exact)."""
        return self

    @abstractmethod
    def describe(self) -> str:
        """One line: the policy, its parameters and its reference."""

    def conventions(self) -> dict[str, Any]:
        """What the propensities are (JSON-able)."""
        return {
            "policy": self.name,
            "description": self.describe(),
            "k": self.k,
            "candidates": self.m,
            "base_ranking": "candidates by descending score, ties by lower candidate index; -inf = not a candidate",
            "list": "exact P(top k = list)",
            "prefix": "exact P(top j+1 = list[:j+1]) for each slot j",
            "item": "exact P(slot j shows list[j])",
            "empty_slots": "-1 where the query has fewer than k candidates; propensity 1",
            "impossible": "0 (non-candidate, repeated document, empty slot with a candidate left)",
        }

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _sample(self, q: IntArray, rng: np.random.Generator) -> IntArray: ...

    @abstractmethod
    def _prefix(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        """Prefix probabilities assuming every prefix is a possible shape (the caller
        multiplies by the validity mask)."""

    @abstractmethod
    def _item(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        """Item probabilities where ``ranks >= 0`` (other entries are ignored)."""

    @abstractmethod
    def _marginals(self, uq: IntArray) -> FloatArray:
        """``(len(uq), m, k)`` marginals of distinct queries."""

    @abstractmethod
    def _shown(self, q: IntArray, d: IntArray, valid: BoolArray) -> FloatArray:
        """Shown probabilities where ``valid`` (other entries are ignored)."""

    @abstractmethod
    def _pairs(self, q: int) -> FloatArray: ...


# ------------------------------------------------------------------------------ rank policies
class RankPolicy(LoggingPolicy):
    """A policy that shows the base ranking under a random permutation of positions whose
    law depends on the query only through its candidate count ``c``.

    Subclasses implement :meth:`_sample_ranks`, :meth:`_prefix_ranks`,
    :meth:`_rank_marginals` and either :meth:`_rank_support` (the permutations with
    positive probability, for pair marginals) or :meth:`_rank_pairs`.
    """

    def __init__(self, scores: ArrayLike, k: int) -> None:
        super().__init__(scores, k)
        self._rank_cache: dict[int, FloatArray] = {}
        self._c_max = int(self.n_candidates.max()) if self.Q else 0

    # hooks on ranks ---------------------------------------------------------
    @abstractmethod
    def _sample_ranks(self, c: IntArray, rng: np.random.Generator) -> IntArray:
        """``(n, k)`` base ranks per slot (entries at slots ``>= c`` are ignored)."""

    @abstractmethod
    def _prefix_ranks(self, ranks: IntArray, c: IntArray) -> FloatArray:
        """``(n, k)`` prefix probabilities of valid, distinct ranks (slots ``< min(c, k)``)."""

    @abstractmethod
    def _rank_marginals(self, c: int) -> FloatArray:
        """``(c, k)``: P(slot j shows base rank r) for a query with ``c`` candidates."""

    def _rank_support(self, c: int) -> tuple[IntArray, FloatArray]:
        """``(S, k)`` base ranks per slot of each permutation with positive probability
        (``-1`` at slots ``>= c``) and their ``(S,)`` probabilities. A policy implements this
        hook or overrides :meth:`_rank_pairs` itself (every registered policy does one)."""
        raise TypeError(f"{type(self).__name__} defines neither _rank_support nor _rank_pairs")

    def _rank_pairs(self, c: int) -> FloatArray:
        """``(k, c, k, c)`` pair marginals over ranks (default: summed over the support)."""
        perms, probs = self._rank_support(c)
        out = np.zeros((self.k, c, self.k, c))
        kk = min(self.k, c)
        if kk == 0:
            return out
        j, l_ = np.meshgrid(np.arange(kk), np.arange(kk), indexing="ij")
        for p, w in zip(perms, probs):
            out[j, p[j], l_, p[l_]] += w
        return out

    # shared machinery -------------------------------------------------------
    def _marg_table(self, c: int) -> FloatArray:
        if c not in self._rank_cache:
            self._rank_cache[c] = _frozen(np.asarray(self._rank_marginals(c), dtype=np.float64))
        return self._rank_cache[c]

    def _padded_tables(self, cs: IntArray) -> tuple[FloatArray, IntArray]:
        """Rank-marginal tables ``(U, m+1, k)`` for the distinct counts in ``cs`` (row ``m``
        all zeros, for non-candidates) and the index of each entry of ``cs``."""
        uc, inv = np.unique(cs, return_inverse=True)
        tab = np.zeros((uc.size, self.m + 1, self.k))
        for i, c in enumerate(uc):
            tab[i, : int(c)] = self._marg_table(int(c))
        return tab, inv

    def _sample(self, q: IntArray, rng: np.random.Generator) -> IntArray:
        c = self.n_candidates[q]
        ranks = self._sample_ranks(c, rng)
        j = np.arange(self.k)[None, :]
        shown = ranks < c[:, None]
        docs = self.order[q[:, None], np.where(shown, ranks, 0)]
        return np.where((j < c[:, None]) & shown, docs, EMPTY).astype(np.int64)

    def _prefix(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        c = self.n_candidates[q]
        raw = self._prefix_ranks(np.where(ranks >= 0, ranks, 0), c)
        # beyond the candidates the list is empty: the prefix probability stays at the last filled slot
        j = np.arange(self.k)[None, :]
        last = np.clip(c - 1, 0, self.k - 1)
        full = raw[np.arange(q.size), last]
        out = np.where(j < c[:, None], raw, np.where(c[:, None] > 0, full[:, None], 1.0))
        return out

    def _all_tables(self) -> tuple[FloatArray, IntArray]:
        """:meth:`_padded_tables` of every query, built once: ``(U, m+1, k)`` and ``(Q,)``."""
        cached = getattr(self, "_all_tables_cache", None)
        if cached is None:
            uc, inv = np.unique(self.n_candidates, return_inverse=True)
            tab = np.zeros((uc.size, self.m + 1, self.k))
            for i, c in enumerate(uc):
                if c > 0:  # a query without candidates has only zeros (its table is empty)
                    tab[i, : int(c)] = self._marg_table(int(c))
            cached = (_frozen(tab), _frozen(inv.astype(np.int64).reshape(-1)))
            self._all_tables_cache = cached
        return cached

    def _item(self, q: IntArray, r: IntArray, ranks: IntArray) -> FloatArray:
        tab, inv_all = self._all_tables()
        rr = np.where(ranks >= 0, ranks, self.m)
        if tab.shape[0] == 1:  # every query has the same candidate count
            return tab[0, rr, np.arange(self.k)[None, :]]
        return tab[inv_all[q][:, None], rr, np.arange(self.k)[None, :]]

    def _marginals(self, uq: IntArray) -> FloatArray:
        tab, inv = self._padded_tables(self.n_candidates[uq])
        rr = np.where(self.rank_of[uq] >= 0, self.rank_of[uq], self.m)  # (U, m) rank of each candidate
        return tab[inv[:, None], rr]  # (U, m, k)

    def _shown(self, q: IntArray, d: IntArray, valid: BoolArray) -> FloatArray:
        tab, inv = self._padded_tables(self.n_candidates[q])
        shown = tab.sum(axis=2)  # (U, m+1)
        rr = np.where(valid, self.rank_of[q[:, None], np.maximum(d, 0)], self.m)
        return shown[inv[:, None], rr]

    def _pairs(self, q: int) -> FloatArray:
        c = int(self.n_candidates[q])
        out = np.zeros((self.k, self.m, self.k, self.m))
        if c == 0:
            return out
        docs = self.order[q, :c]
        out[np.ix_(np.arange(self.k), docs, np.arange(self.k), docs)] = self._rank_pairs(c)
        return out


# ------------------------------------------------------------------------------ helpers
class TopNRankPolicy(RankPolicy):
    """A rank policy randomising within the base ranking's top ``n`` (RandTop-n, RandPair):
    the option ``n`` (default ``max(k, 2)``, ``2 <= n <= m``), its spec reading and
    conventions; a query with fewer candidates randomises all of them (``_n_eff``)."""

    def __init__(self, scores: Any, k: int, n: int | None = None) -> None:
        super().__init__(scores, k)
        self.n = int_option("n", max(self.k, 2) if n is None else n, 2, max(self.m, 2))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], scores: Any, k: int,
                  path: Sequence[str | int] = ()) -> TopNRankPolicy:
        rd = SpecReader(spec, path)
        s = rd.scores(scores)
        m = int(np.shape(s)[1]) if np.ndim(s) == 2 else 0
        n = rd.integer("n", max(k, 2), low=2, high=max(m, 2))
        rd.finish()
        return cls(s, k, n)

    def conventions(self) -> dict[str, Any]:
        return {**super().conventions(), "n": self.n}

    def _n_eff(self, c: Any) -> Any:
        return np.minimum(self.n, c)


def repeated_entries(r: IntArray) -> BoolArray:
    """``(n, k)`` True where a document id ``>= 0`` already appears in an earlier slot of
    its row (one comparison per pair of slots, on the slots-first layout: numpy's
    operations over a short last axis cost more than a loop over slots)."""
    return repeated_by_slot(np.ascontiguousarray(r.T)).T


def repeated_by_slot(rt: IntArray) -> BoolArray:
    """:func:`repeated_entries` in the slots-first layout: ``rt`` and the result are ``(k, n)``."""
    k, n = rt.shape
    out = np.zeros((k, n), dtype=bool)
    for j in range(1, k):
        col = rt[j]
        hit = rt[0] == col
        for i in range(1, j):
            hit |= rt[i] == col
        hit &= col >= 0
        out[j] = hit
    return out


def running_product(x: FloatArray) -> FloatArray:
    """``np.cumprod(x, axis=1)`` of a float ``(n, k)`` matrix, slot by slot (the same
    products in the same order; faster for short rows)."""
    out = np.array(x, dtype=np.float64, copy=True)
    for j in range(1, out.shape[1]):
        out[:, j] *= out[:, j - 1]
    return out


def running_and(b: BoolArray) -> BoolArray:
    """``np.logical_and.accumulate(b, axis=1)`` slot by slot."""
    out = np.array(b, dtype=bool, copy=True)
    for j in range(1, out.shape[1]):
        out[:, j] &= out[:, j - 1]
    return out


def identity_ranks(n: int, k: int) -> IntArray:
    """``(n, k)`` the base ranks ``0..k-1`` in every row."""
    return np.broadcast_to(np.arange(k, dtype=np.int64), (n, k)).copy()


def shuffle_top(c_top: IntArray, k: int, rng: np.random.Generator) -> IntArray:
    """``(n, k)`` ranks: a uniformly random permutation of base ranks ``0..c_top[i]-1`` in
    the first ``c_top[i]`` slots of row ``i``, the base order after them.

    The first ``kk = min(k, width)`` steps of a Fisher-Yates shuffle (``width = max(c_top)``):
    ``rng.random((n, kk))`` draws ``kk`` uniforms per row (row by row; a row whose ``c_top[i]`` is
    below ``kk`` leaves its last ones unused), and step ``j`` swaps the rank at slot ``j`` with the
    one at slot ``j + floor(u_ij (c_top[i] - j))`` (itself once ``j >= c_top[i] - 1``): each
    ordered choice of the first ``min(k, c_top[i])`` ranks is equally likely, up to the rounding of
    a 53-bit uniform to ``c_top[i] - j`` values (a relative error below ``c_top[i] / 2**53``). No
    draws when ``width < 2`` (nothing to shuffle). :func:`simulations.policies.kernels.sample_lists`
    draws the epsilon-greedy loggers' lists by the same steps from the same uniforms.

    (Before: ``width`` uniform keys per row and the ``k`` smallest of them in order; 4 times the
    uniforms at ``k = 5`` of 20 and a selection pass per slot: the compiled draw of
    ``configs/counterfactual.yaml`` took 0.084 against 0.040 us per impression.)"""
    n = c_top.size
    width = int(c_top.max()) if n else 0
    if width < 2:
        return identity_ranks(n, k)
    kk = min(k, width)
    u = rng.random((n, kk))
    perm = np.broadcast_to(np.arange(width, dtype=np.int64), (n, width)).copy()
    rows = np.arange(n)
    span = c_top.astype(np.float64)
    for j in range(kk):
        pick = j + (u[:, j] * np.maximum(span - j, 1.0)).astype(np.int64)
        held = perm[:, j].copy()
        perm[:, j] = perm[rows, pick]
        perm[rows, pick] = held
    if width >= k:  # every slot comes from the permutation
        return np.ascontiguousarray(perm[:, :k])
    ranks = identity_ranks(n, k)
    ranks[:, :width] = perm
    return ranks


# ------------------------------------------------------------------------------ registry
POLICIES: dict[str, type[LoggingPolicy]] = {}
P = TypeVar("P", bound=type[LoggingPolicy])


def register_policy(cls: P) -> P:
    """Class decorator: register ``cls`` under ``cls.name`` (it must define ``from_spec``)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no registry name")
    if cls.name in POLICIES and POLICIES[cls.name] is not cls:
        raise ValueError(f"policy name {cls.name!r} is already registered by {POLICIES[cls.name].__name__}")
    if not callable(getattr(cls, "from_spec", None)):
        raise TypeError(f"{cls.__name__} has no from_spec classmethod")
    POLICIES[cls.name] = cls
    return cls


def available_policies() -> tuple[str, ...]:
    """Names of the registered policies, sorted."""
    return tuple(sorted(POLICIES))


def policy_class(name: Any, path: Sequence[str | int] = ()) -> type[LoggingPolicy]:
    if not isinstance(name, str) or name not in POLICIES:
        raise ConfigError((*path, "policy"), f"unknown logging policy {name!r}; allowed: "
                          + ", ".join(available_policies()))
    return POLICIES[name]


@dataclass(frozen=True)
class MarginalTable:
    """Item-position marginals of one query: ``mean`` ``(m, k)``, their standard errors
    ``se`` (0 when exact), the shown probabilities ``shown`` ``(m,)`` with ``shown_se``,
    and whether they are exact."""

    mean: FloatArray
    se: FloatArray
    shown: FloatArray
    shown_se: FloatArray
    exact: bool
    method: str

