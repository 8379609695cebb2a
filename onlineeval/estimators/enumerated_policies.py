r"""Logging policies given by the exact probability of every list: the conformance suite's loggers.

An :class:`EnumeratedPolicy` holds explicit probabilities of every ordered :math:`k`-subset
of the :math:`m` candidates of each query, so list, prefix, item-at-position and pair
marginals are exact sums over the enumeration. The constructors build the suite's loggers
and stochastic targets: uniformly random permutations (:func:`uniform_policy`),
Plackett–Luce (:func:`plackett_luce_policy`), epsilon-greedy around given lists
(:func:`epsilon_greedy_policy`) and deterministic (:func:`deterministic_policy`).

The worlds that use them are in :mod:`onlineeval.estimators.exact_worlds`, the checks in
:mod:`onlineeval.estimators.checks` (which re-exports every public name here).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError
from onlineeval.estimators.base import Propensities

__all__ = [
    "EnumeratedPolicy",
    "deterministic_policy",
    "epsilon_greedy_policy",
    "plackett_luce_policy",
    "uniform_policy",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _ordered_subsets(m: int, k: int) -> IntArray:
    return np.array(list(itertools.permutations(range(m), k)), dtype=np.int64).reshape(-1, k)


@dataclass(frozen=True, eq=False)
class EnumeratedPolicy:
    r"""A stochastic ranking policy given by the exact probability of every list.

    For each query the policy shows one of the :math:`P = m!/(m-k)!` ordered
    :math:`k`-subsets of the candidates ``0 .. m-1`` (document id = candidate index).
    Every propensity is an exact sum over that enumeration:

    .. math::

        \mu(d_1..d_j \mid q) = \sum_{\mathbf s:\, s_{1..j} = d_{1..j}} \mu(\mathbf s \mid q),\qquad
        \mu(s_j = d \mid q) = \sum_{\mathbf s:\, s_j = d} \mu(\mathbf s \mid q).

    It implements the :class:`~onlineeval.estimators.base.PropensityModel` protocol
    (``propensities``), ``shown_probability``, ``item_position_marginals``,
    ``pair_marginals`` and ``sample``; as a stochastic target it also has ``rankings``
    (which raises: it has no single list).

    Parameters
    ----------
    probs:
        ``(Q, P)`` probabilities of the lists :meth:`lists` for each query (rows sum to 1).
    m, k:
        Candidates per query and shown slots.
    name:
        Display name.
    """

    probs: FloatArray
    m: int
    k: int
    name: str = "logger"
    lists: IntArray = field(init=False, repr=False)
    _prefix: tuple[FloatArray, ...] = field(init=False, repr=False)
    _item: FloatArray = field(init=False, repr=False)
    _cdf: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not (1 <= self.k <= self.m):
            raise InputError(f"policy: need 1 <= k <= m, got k={self.k}, m={self.m}")
        lists = _ordered_subsets(self.m, self.k)
        p = np.array(self.probs, dtype=np.float64, copy=True)
        if p.ndim != 2 or p.shape[1] != lists.shape[0]:
            raise InputError(f"policy probs: expected shape (queries, {lists.shape[0]}), got {p.shape}")
        if np.any(~np.isfinite(p)) or p.min() < 0 or not np.allclose(p.sum(axis=1), 1.0, atol=1e-9):
            raise InputError("policy probs: each row must be a probability distribution over the lists")
        nq = p.shape[0]
        prefix = []
        code = np.zeros(lists.shape[0], dtype=np.int64)
        for j in range(self.k):
            code = code * self.m + lists[:, j]
            size = self.m ** (j + 1)
            table = np.zeros((nq, size))
            for q in range(nq):
                table[q] = np.bincount(code, p[q], size)
            prefix.append(table)
        item = np.zeros((nq, self.k, self.m))
        for j in range(self.k):
            for q in range(nq):
                item[q, j] = np.bincount(lists[:, j], p[q], self.m)
        cdf = np.cumsum(p, axis=1)
        for name, value in (("probs", p), ("lists", lists), ("_item", item), ("_cdf", cdf)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        for t in prefix:
            t.setflags(write=False)
        object.__setattr__(self, "_prefix", tuple(prefix))

    @property
    def n_queries(self) -> int:
        return int(self.probs.shape[0])

    def _queries(self, query: ArrayLike) -> IntArray:
        q = np.asarray(query, dtype=np.int64)
        if q.size and (q.min() < 0 or q.max() >= self.n_queries):
            raise InputError(f"policy {self.name!r}: query index outside 0..{self.n_queries - 1}")
        return q

    def propensities(self, query: ArrayLike, rankings: ArrayLike) -> Propensities:
        """Exact list, prefix and item-at-position probabilities of ``rankings`` (n, k')."""
        q = self._queries(query)
        r = np.asarray(rankings, dtype=np.int64)
        n, kk = r.shape
        valid = r >= 0
        inside = valid & (r < self.m)
        prefix = np.ones((n, kk))
        item = np.ones((n, kk))
        code = np.zeros(n, dtype=np.int64)
        alive = np.ones(n, dtype=bool)
        for j in range(kk):
            if j >= self.k:
                prefix[:, j] = np.where(valid[:, j], 0.0, prefix[:, j - 1] if j else 1.0)
                item[:, j] = np.where(valid[:, j], 0.0, 1.0)
                alive &= ~valid[:, j]
                continue
            d = np.where(inside[:, j], r[:, j], 0)
            code = code * self.m + d
            alive &= inside[:, j] | ~valid[:, j]
            p = np.where(alive & valid[:, j], self._prefix[j][q, code], 0.0)
            prefix[:, j] = np.where(valid[:, j], p, 1.0)
            item[:, j] = np.where(valid[:, j], np.where(inside[:, j], self._item[q, j, d], 0.0), 1.0)
        # the policy always shows k documents: a list with an empty slot has probability 0
        full = valid[:, : min(kk, self.k)].all(axis=1) & (kk >= self.k) & ~valid[:, self.k :].any(axis=1)
        plist = np.where(full, prefix[:, min(kk, self.k) - 1], 0.0)
        return Propensities(plist, prefix, item)

    def shown_probability(self, query: ArrayLike, docs: ArrayLike) -> FloatArray:
        """``(n, k')`` probability that each document is shown at some slot (0 for ids outside)."""
        q = self._queries(query)
        d = np.asarray(docs, dtype=np.int64)
        inside = (d >= 0) & (d < self.m)
        anywhere = self._item.sum(axis=1)  # (Q, m)
        return np.where(inside, anywhere[q[:, None], np.where(inside, d, 0)], 0.0)

    def item_position_marginals(self, query: ArrayLike) -> FloatArray:
        """``(n, m, k)``: :math:`P(s_j = d \\mid q)` for each query of ``query``."""
        return np.ascontiguousarray(self._item[self._queries(query)].transpose(0, 2, 1))

    def pair_marginals(self, query_index: int) -> FloatArray:
        """``(k, m, k, m)``: :math:`P(s_j = a, s_l = b \\mid q)` (the diagonal ``j = l, a = b``
        holds the item marginals)."""
        q = int(self._queries(np.array([query_index]))[0])
        onehot = np.zeros((self.lists.shape[0], self.k, self.m))
        onehot[np.arange(self.lists.shape[0])[:, None], np.arange(self.k)[None, :], self.lists] = 1.0
        flat = onehot.reshape(self.lists.shape[0], -1)
        return ((flat * self.probs[q][:, None]).T @ flat).reshape(self.k, self.m, self.k, self.m)

    def sample(self, query: ArrayLike, rng: np.random.Generator) -> IntArray:
        """``(n, k)`` lists drawn for ``query`` (one uniform per impression, inverse CDF)."""
        q = self._queries(query)
        u = rng.random(q.size)
        idx = np.empty(q.size, dtype=np.int64)
        for qq in np.unique(q):
            rows = np.flatnonzero(q == qq)
            cdf = self._cdf[qq]
            idx[rows] = np.minimum(np.searchsorted(cdf, u[rows] * cdf[-1], side="right"), cdf.size - 1)
        return self.lists[idx]

    def rankings(self, query: ArrayLike) -> IntArray:
        raise InputError(f"policy {self.name!r} is stochastic: it has no single list per query")


def uniform_policy(n_queries: int, m: int, k: int, name: str = "uniform") -> EnumeratedPolicy:
    """Uniformly random ordered ``k``-subsets: :math:`\\mu(\\mathbf s) = (m-k)!/m!`."""
    size = math.perm(m, k)
    return EnumeratedPolicy(np.full((n_queries, size), 1.0 / size), m, k, name)


def plackett_luce_policy(scores: ArrayLike, k: int, name: str = "plackett_luce") -> EnumeratedPolicy:
    r"""Plackett–Luce over ``scores`` (Q, m) > 0 (Plackett 1975; Luce 1959):

    .. math:: \mu(\mathbf s \mid q) = \prod_{j=1}^{k} \frac{v_{q s_j}}{\sum_{d \notin s_{<j}} v_{qd}}.
    """
    v = np.asarray(scores, dtype=np.float64)
    if v.ndim != 2 or np.any(~(v > 0)):
        raise InputError("plackett_luce_policy: scores must be a (queries, m) array of positive numbers")
    m = v.shape[1]
    lists = _ordered_subsets(m, k)
    chosen = v[:, lists]  # (Q, P, k)
    remaining = v.sum(axis=1)[:, None, None] - np.concatenate(
        [np.zeros(chosen.shape[:2] + (1,)), np.cumsum(chosen, axis=2)[:, :, :-1]], axis=2
    )
    probs = np.prod(chosen / remaining, axis=2)
    return EnumeratedPolicy(probs / probs.sum(axis=1, keepdims=True), m, k, name)


def _list_index(lists: ArrayLike, m: int, k: int) -> IntArray:
    all_lists = _ordered_subsets(m, k)
    code_all = (all_lists * (m ** np.arange(k - 1, -1, -1))).sum(axis=1)
    want = np.asarray(lists, dtype=np.int64)
    code = (want * (m ** np.arange(k - 1, -1, -1))).sum(axis=1)
    pos = np.searchsorted(code_all, code)  # permutations() yields lists in lexicographic order
    if np.any(pos >= code_all.size) or np.any(code_all[np.minimum(pos, code_all.size - 1)] != code):
        raise InputError("policy lists: each must hold k distinct candidates 0..m-1")
    return pos


def epsilon_greedy_policy(lists: ArrayLike, m: int, epsilon: float, name: str = "epsilon_greedy") -> EnumeratedPolicy:
    """With probability ``1 - epsilon`` the list ``lists[q]``, else a uniformly random one."""
    want = np.asarray(lists, dtype=np.int64)
    k = want.shape[1]
    size = math.perm(m, k)
    probs = np.full((want.shape[0], size), epsilon / size)
    probs[np.arange(want.shape[0]), _list_index(want, m, k)] += 1.0 - epsilon
    return EnumeratedPolicy(probs, m, k, name)


def deterministic_policy(lists: ArrayLike, m: int, name: str = "deterministic") -> EnumeratedPolicy:
    """Always the list ``lists[q]`` (no randomisation: no support beyond it)."""
    return epsilon_greedy_policy(lists, m, 0.0, name)
