"""Optimized interleaving (Radlinski & Craswell 2013), and optimized multileaving (Schuth et al. 2014).

Allowed lists obey the prefix constraint: every shown document is the highest-ranked
not-yet-shown document of one of the input rankings. A click on ``d`` gives ranker
``i`` the credit ``f(r_i(d))`` with ``f(r) = 1/r`` (``credit="inverse"``, default) or
``f(r) = -r`` (``credit="linear"``); a document missing from list ``i`` has rank
``|list_i| + 1``. The distribution ``p`` over the allowed lists ``\\mathcal{L}`` solves
the linear programme

.. math::

    \\min_p \\sum_{L} p_L\\, s(L) \\quad\\text{s.t.}\\quad
    \\sum_L p_L \\sum_{t \\le j} \\big(f(r_i(L_t)) - f(r_{i+1}(L_t))\\big) = 0
    \\;\\; \\forall j \\le k,\\ \\forall i < m,
    \\qquad \\sum_L p_L = 1,\\ p \\ge 0,

so a user who clicks independently of the documents (any position-dependent click
probabilities) gives every ranker the same expected credit. The insensitivity ``s(L)``
is the spread of the rankers' expected credit on ``L`` under clicks with probability
``1/t`` at rank ``t`` (Schuth et al. 2014):
``s(L) = \\sum_i (e_i(L) - \\bar e(L))^2``, ``e_i(L) = \\sum_t f(r_i(L_t))/t``.
The programme is solved with ``scipy.optimize.linprog`` (HiGHS). When the
constraints cannot all be met (rare; e.g. lists of unequal length) the distribution
with the smallest total violation is used and :meth:`Optimized.distribution` reports it.

Two per-impression outcomes, and which one is unbiased. The LP's guarantee is on the
credit scale: the credit difference :math:`\\Delta_{ij} = c_i - c_j` has expectation
zero under document-independent clicks (Radlinski & Craswell 2013, the constraint
above). Its *sign* has no such guarantee; it can be strongly biased. Example (pinned
in tests/test_interleaving_optimized.py): A = (0..7), B = (9, 8, 0, 1, ..., 5), every
slot clicked with probability 0.3 independently of the document: the mean sign
outcome is about -0.15 (A "wins" on noise, z of about -49 on 10^5 impressions) while
the mean credit difference is zero.

* :meth:`Optimized.expected_preferences` (``expected_outcome`` for two rankers) is the
  per-impression outcome to average, as for probabilistic interleaving: the credit
  difference scaled into [-1, 1] by its largest possible magnitude ``M`` for the
  impression's input lists,

  .. math::

      o_{ij} = \\Delta_{ij} / M, \\qquad
      M = \\begin{cases} s & \\text{inverse credit} \\\\ s \\cdot \\max_i |\\text{list}_i| & \\text{linear credit}
      \\end{cases}

  with ``s`` the number of shown documents (``M`` depends on the input lists only, so
  ``E[o_ij] = E[Delta_ij] / M = 0`` under document-independent clicks). It equals the
  expectation given (list, clicks) of the randomised win / loss / tie that lets ``j``
  win with probability ``max(o, 0)``, ``i`` with ``max(-o, 0)``, so it plugs into
  :math:`\\Delta_{AB}`; this is the outcome that meets the "zero expected outcome under
  random clicks" requirement and the one the simulator aggregates.
* ``outcome()`` / ``preferences()`` keep the int8 win / loss / tie contract shared by
  every method: the sign of the credit difference (``|diff| <= tie_tolerance`` a tie),
  what "the ranker with more credit wins" counts. It is biased under random clicks as
  above; the validation harness reports that as documented behaviour.

Shared top prefix: a document that every input list ranks at the same position gets the
same credit from every ranker, so clicks on the shared prefix never change a credit
difference, an outcome or a preference; no ``prefix_credit`` option is needed.

Solutions are cached per distinct input pair, so repeated queries cost one LP each.

References
----------
F. Radlinski, N. Craswell. Optimized interleaving for online retrieval evaluation.
WSDM 2013.
A. Schuth, F. Sietsma, S. Whiteson, D. Lefortier, M. de Rijke. Multileaved
comparisons for fast online evaluation. CIKM 2014.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import linprog

from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.interleaving._kernels import check_positive_float, rank_in_lists
from onlineeval.interleaving.base import Interleaver, InterleavingResult
from onlineeval.interleaving.registry import register_interleaver
from onlineeval.rows import distinct_rows

__all__ = ["Optimized", "OptimizedDistribution"]

_CREDITS = ("inverse", "linear")


@dataclass(frozen=True)
class OptimizedDistribution:
    """The solved distribution for one tuple of input lists.

    Attributes
    ----------
    lists:
        ``(L, k)`` int32 allowed shown lists (``-1`` padded).
    teams:
        ``(L, k)`` int8 the ranker whose top unused document filled each slot.
    probabilities:
        ``(L,)`` the LP solution (sums to one).
    constraints:
        ``(C, L)`` unbiasedness constraint matrix (rows must be zero against ``probabilities``).
    violation:
        ``max |constraints @ probabilities|`` (0 up to solver tolerance when feasible).
    """

    lists: NDArray[np.int32]
    teams: NDArray[np.int8]
    probabilities: NDArray[np.float64]
    constraints: NDArray[np.float64]
    violation: float


def _credit_fn(kind: str, rank: NDArray[np.float64]) -> NDArray[np.float64]:
    return 1.0 / rank if kind == "inverse" else -rank


def _enumerate(lists: list[list[int]], length: int, max_lists: int) -> tuple[list[list[int]], list[list[int]]]:
    """All prefix-constrained lists (depth-first), with the team that filled each slot."""
    out: list[list[int]] = []
    teams: list[list[int]] = []
    stack: list[tuple[list[int], list[int]]] = [([], [])]
    while stack:
        shown, team = stack.pop()
        used = set(shown)
        options: dict[int, int] = {}
        if len(shown) < length:
            for i, lst in enumerate(lists):
                for d in lst:
                    if d not in used:
                        options.setdefault(d, i)
                        break
        if not options:
            out.append(shown)
            teams.append(team)
            if len(out) > max_lists:
                raise InputError(f"optimized interleaving: more than {max_lists} allowed lists for one query; "
                                 "use a shorter length or another method")
            continue
        for d, i in options.items():
            stack.append((shown + [d], team + [i]))
    return out, teams


@register_interleaver
class Optimized(Interleaver):
    """Optimized interleaving (two rankers) or optimized multileaving (more).

    Parameters
    ----------
    credit:
        ``"inverse"`` (default, ``1/rank``) or ``"linear"`` (``-rank``).
    tie_tolerance:
        Credit differences with ``|diff| <= tie_tolerance`` are ties; default ``1e-9``.
    max_lists:
        Refuse queries with more allowed lists than this (default 50000).
    cache_size:
        Number of solved input tuples kept (default 100000).
    """

    name = "optimized"
    min_rankers = 2
    max_rankers: int | None = None

    def __init__(self, *, credit: str = "inverse", tie_tolerance: float = 1e-9, max_lists: int = 50_000,
                 cache_size: int = 100_000) -> None:
        if credit not in _CREDITS:
            raise ConfigError(("interleaver", "credit"), f"optimized: {must_be_one_of(_CREDITS, credit)}")
        self.credit_kind = credit
        self.tie_tolerance = check_positive_float(self.name, "tie_tolerance", tie_tolerance, allow_zero=True)
        for key, val in (("max_lists", max_lists), ("cache_size", cache_size)):
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
                raise ConfigError(("interleaver", key), f"optimized: must be a positive integer, got {val!r}")
        self.max_lists = int(max_lists)
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[bytes, OptimizedDistribution] = OrderedDict()

    @property
    def options(self) -> dict[str, object]:
        return {"credit": self.credit_kind, "tie_tolerance": self.tie_tolerance, "max_lists": self.max_lists,
                "cache_size": self.cache_size}

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        return state

    # -------------------------------------------------------------- the LP
    def distribution(self, lists: list[list[int]], length: int) -> OptimizedDistribution:
        """Solve (or fetch) the distribution over allowed lists for one tuple of input lists."""
        clean = [[int(d) for d in lst if d >= 0] for lst in lists]
        key = repr((clean, length)).encode()
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        dist = self._solve(clean, length)
        self._cache[key] = dist
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return dist

    def _solve(self, lists: list[list[int]], length: int) -> OptimizedDistribution:
        shown, teams = _enumerate(lists, length, self.max_lists)
        n_lists = len(shown)
        m = len(lists)
        mat = np.full((n_lists, length), -1, dtype=np.int32)
        tm = np.full((n_lists, length), -1, dtype=np.int8)
        for r, (s, t) in enumerate(zip(shown, teams)):
            mat[r, : len(s)] = s
            tm[r, : len(t)] = t
        width = max(1, max(len(lst) for lst in lists))
        stacked = np.full((m, 1, width), -1, dtype=np.int32)
        for i, lst in enumerate(lists):
            stacked[i, 0, : len(lst)] = lst
        cred = self._doc_credit(mat, np.broadcast_to(stacked, (m, n_lists, width)))   # (m, L, k)
        cum = np.cumsum(cred, axis=2)                                                 # (m, L, k)
        cons = np.concatenate([(cum[i] - cum[i + 1]).T for i in range(m - 1)], axis=0)  # (C, L)
        depth = 1.0 / np.arange(1, length + 1)
        e = (cred * depth).sum(axis=2)                                                # (m, L)
        insens = ((e - e.mean(axis=0)) ** 2).sum(axis=0)
        if n_lists == 1:
            p1 = np.ones(1)
            return OptimizedDistribution(mat, tm, p1, cons, float(np.abs(cons @ p1).max()) if cons.size else 0.0)
        a_eq = np.vstack([np.ones((1, n_lists)), cons])
        b_eq = np.concatenate([[1.0], np.zeros(cons.shape[0])])
        res = linprog(insens, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
        if res.status == 0:
            p = np.clip(res.x, 0.0, None)
        else:
            # infeasible: smallest total violation (slacks u+ - u- per constraint)
            c = cons.shape[0]
            a2 = np.hstack([a_eq, np.vstack([np.zeros((1, 2 * c)), np.hstack([np.eye(c), -np.eye(c)])])])
            obj = np.concatenate([np.zeros(n_lists), np.ones(2 * c)])
            res2 = linprog(obj, A_eq=a2, b_eq=b_eq, bounds=(0, None), method="highs")
            if res2.status != 0:  # pragma: no cover - the slack problem is always feasible
                raise InputError(f"optimized interleaving: LP failed ({res2.message})")
            p = np.clip(res2.x[:n_lists], 0.0, None)
        p = p / p.sum()
        violation = float(np.abs(cons @ p).max()) if cons.size else 0.0
        return OptimizedDistribution(mat, tm, p, cons, violation)

    def _doc_credit(self, docs: NDArray[np.int32], rankings: NDArray[np.int32]) -> NDArray[np.float64]:
        """``(m, n, k)`` credit ``f(r_i(d))`` of each document (0 for empty slots)."""
        K = rankings.shape[2]
        pos = rank_in_lists(docs, rankings)
        length = (rankings >= 0).sum(axis=2)
        rank = np.where(pos < K, pos + 1, length[:, :, None] + 1).astype(np.float64)
        return np.where(docs[None] >= 0, _credit_fn(self.credit_kind, rank), 0.0)

    # -------------------------------------------------------------- hooks
    def _interleave(self, rankings: NDArray[np.int32], rng: np.random.Generator,
                    length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
        m, n, K = rankings.shape
        flat = np.moveaxis(rankings, 0, 1).reshape(n, m * K)
        first, inverse = distinct_rows(flat)  # np.unique(flat, axis=0, return_inverse=True)'s groups, unsorted rows
        uniq = flat[first]
        shown = np.full((n, length), -1, dtype=np.int32)
        team = np.full((n, length), -1, dtype=np.int8)
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(uniq.shape[0] + 1))
        for g in range(uniq.shape[0]):
            rows = order[bounds[g]: bounds[g + 1]]
            lists = [uniq[g, i * K: (i + 1) * K].tolist() for i in range(m)]
            dist = self.distribution(lists, length)
            pick = rng.choice(dist.probabilities.size, size=rows.size, p=dist.probabilities)
            shown[rows] = dist.lists[pick]
            team[rows] = dist.teams[pick]
        return shown, team

    def _credit(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
        cred = self._doc_credit(result.ranking, result.rankings)        # (m, n, k)
        return np.einsum("mnk,nk->nm", cred, clicks.astype(np.float64))

    def credit_bound(self, result: InterleavingResult) -> NDArray[np.float64]:
        """``(n,)`` largest possible ``|c_i - c_j|`` per impression, ``M`` in the module docstring.

        Depends on the input lists only (number of shown documents ``s = min(k, |union|)``
        and, for linear credit, the longest input list), never on the clicks.
        """
        shown = np.count_nonzero(result.ranking >= 0, axis=1).astype(np.float64)
        bound = np.maximum(shown, 1.0)
        if self.credit_kind == "linear":
            bound = bound * np.maximum((result.rankings >= 0).sum(axis=2).max(axis=0), 1)
        return bound

    def expected_preferences(self, result: InterleavingResult, clicks: ArrayLike) -> NDArray[np.float64]:
        """``(n, m, m)`` credit differences ``(c_i - c_j) / M`` in [-1, 1] (unbiased under random clicks).

        See the module docstring: the per-impression outcome whose mean is zero when clicks
        do not depend on the documents; :meth:`preferences` is its sign.
        """
        c = self.credit(result, clicks) / self.credit_bound(result)[:, None]
        return c[:, :, None] - c[:, None, :]

    def expected_outcome(self, result: InterleavingResult, clicks: ArrayLike) -> NDArray[np.float64]:
        """``(n,)`` ``(c_B - c_A) / M`` for two rankers (see :meth:`expected_preferences`)."""
        if result.m != 2:
            raise InputError(f"expected_outcome() compares two rankers; this result has {result.m}, "
                             "use expected_preferences()")
        return self.expected_preferences(result, clicks)[:, 1, 0]

    def _preferences(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.int8]:
        c = self._credit(result, clicks)
        diff = c[:, :, None] - c[:, None, :]
        return np.where(np.abs(diff) <= self.tie_tolerance, 0, np.sign(diff)).astype(np.int8)
