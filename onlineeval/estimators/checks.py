r"""Conformance suite for off-policy estimators: ``check_estimator(cls)`` runs on every registered one.

The suite checks each estimator against the *exact* value of a target ranker in small
synthetic worlds (:class:`CheckWorld`) whose click model, logging policy and targets are
known, so the truth comes from the click model's formulas, never from simulation:

- position-based model (``"pbm"``): :math:`P(C_j = 1) = \theta_j \alpha_{q d_j}`, clicks
  independent across slots, so the first click at :math:`j` has probability
  :math:`\theta_j\alpha_{qd_j}\prod_{i<j}(1 - \theta_i\alpha_{qd_i})`;
- cascade model (``"cascade"``; Craswell et al. 2008): the user examines down to the first
  click and stops there, :math:`P(C_j = 1) = P(F_j = 1) = \alpha_{qd_j}\prod_{i<j}(1-\alpha_{qd_i})`;
- dependent click model (``"dcm"``; Guo, Liu & Wang 2009): after a click at :math:`j` the
  user goes on with probability :math:`\lambda_j`, after a skip always, so
  :math:`P(E_{j+1}) = P(E_j)\,(1 - \alpha_{qd_j}(1 - \lambda_j))`, :math:`P(C_j) = P(E_j)\alpha_{qd_j}`
  and the first click has the cascade's probability;
- ``"mixture"``: half the users (``user_type`` 0) follow the PBM, half (type 1) the cascade
  model; values are share-weighted.

The value of a target :math:`\pi` for a reward :math:`R = c_0 + \sum_j w_j r_j` (see
:class:`~onlineeval.estimators.base.Reward`) is
:math:`V(\pi) = c_0 + \sum_q P(q) \sum_j w_j P(r_j = 1 \mid q, \pi(q))`.

Logging policies are :class:`EnumeratedPolicy` objects: explicit probabilities of every
ordered :math:`k`-subset of the :math:`m` candidates of each query (uniform random
permutations, Plackett–Luce, epsilon-greedy, deterministic), so list, prefix,
item-at-position and pair marginals are exact sums over the enumeration.

Checks (each raises :class:`CheckFailed` naming the estimator and what broke):

- ``unbiased[family/kind]`` for every pair of ``cls.unbiased_under`` (``"any"``: the PBM
  and cascade worlds): over :data:`REPLICATES` seeded logs, the mean estimate lies within
  4 standard errors (:math:`\mathrm{sd}/\sqrt R`) of the exact value, for two targets and
  two rewards of the kind (estimators that fit a model: the kind's main reward only);
- ``biased[family/kind]`` for every pair of ``cls.biased_under``: the bias is visible,
  :math:`|\text{mean} - V| > 4\,\mathrm{SE}`, for at least one target with the kind's
  main reward (``clicks_per_query``, ``reciprocal_rank``);
- ``order_invariance``: permuting the log's rows gives the same estimate and CLT interval
  (to :math:`10^{-12}` relative);
- ``self_normalised_bounds`` (``cls.self_normalised`` only): on adversarial logs (wild
  propensities, random clicks, or at most one click per impression) the estimate lies in ``offset + [min, max]`` of the
  per-impression reward sums;
- ``bootstrap_seed``: the same seed gives the same bootstrap interval;
- ``clt_interval``: the CLT interval contains the estimate and the SE is finite;
- ``diagnostics``: ``ess`` in (0, number of weights], ``top1_share`` in [0, 1] for
  non-negative weights, no support violation under a full-support logger;
- ``missing_propensities``: a log without a propensity the estimator needs raises
  :class:`~onlineeval.errors.InputError` naming it (an estimator that needs none runs
  without any);
- ``support_violations``: under a deterministic logger, a target that shows other
  documents is counted as violating support (or the estimator refuses with
  ``InputError``);
- ``pickle``: a pickled copy gives the same estimate.

Estimators whose per-impression terms depend on the whole log (those that fit a model
on it: DM, DR) are detected by comparing the terms of one replicate computed alone with
the same rows inside the big log; they get :data:`FITTED_REPLICATES` replicates estimated
one by one (each fits its own model), the others :data:`REPLICATES` replicates reduced
from one call on the concatenated logs.
"""

from __future__ import annotations

import itertools
import math
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError, must_be_one_of
from onlineeval.estimators.base import (
    DeterministicTarget,
    Estimator,
    LoggedData,
    Propensities,
    Reward,
    estimator_class,
    first_click,
    get_reward,
)

__all__ = [
    "FAMILIES",
    "FITTED_REPLICATES",
    "REPLICATES",
    "REPLICATE_SIZE",
    "CheckFailed",
    "CheckWorld",
    "EnumeratedPolicy",
    "check_estimator",
    "check_rewards",
    "check_world",
    "deterministic_policy",
    "epsilon_greedy_policy",
    "estimator_checks",
    "exact_event_probabilities",
    "plackett_luce_policy",
    "replicate_log",
    "sample_clicks",
    "sample_log",
    "uniform_policy",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: click-model families of the check worlds ("any" in a declaration expands to pbm and cascade)
FAMILIES = ("pbm", "cascade", "dcm", "mixture")
#: replicates of the unbiasedness / bias checks for estimators whose terms are per-impression
REPLICATES = 200
#: replicates for estimators that fit a model on the whole log (each replicate estimated alone)
FITTED_REPLICATES = 24
#: impressions per replicate
REPLICATE_SIZE = 2500
#: tolerance in standard errors
Z = 4.0


class CheckFailed(AssertionError):
    """An estimator failed a conformance check."""


def _fail(cls: type[Estimator], check: str, message: str) -> CheckFailed:
    return CheckFailed(f"estimator {cls.name!r} ({cls.__name__}) failed {check}: {message}")


# ------------------------------------------------------------------------ logging policies
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


# ------------------------------------------------------------------------------ worlds
def _exclusive_cumprod(x: FloatArray) -> FloatArray:
    out = np.ones_like(x)
    if x.shape[1] > 1:
        out[:, 1:] = np.cumprod(x[:, :-1], axis=1)
    return out


def exact_event_probabilities(
    family: str, alpha: FloatArray, examination: FloatArray | None = None, continuation: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Exact ``(click, first_click)`` probabilities ``(n, k)`` of lists with attraction ``alpha``.

    See the module docstring for the formulas of each family (``pbm``, ``cascade``, ``dcm``).
    """
    a = np.asarray(alpha, dtype=np.float64)
    if family == "pbm":
        if examination is None:
            raise InputError("pbm needs examination probabilities")
        click = a * np.asarray(examination, dtype=np.float64)[None, : a.shape[1]]
        return click, click * _exclusive_cumprod(1.0 - click)
    first = a * _exclusive_cumprod(1.0 - a)
    if family == "cascade":
        return first, first
    if family == "dcm":
        if continuation is None:
            raise InputError("dcm needs continuation probabilities")
        lam = np.asarray(continuation, dtype=np.float64)[None, : a.shape[1]]
        exam = _exclusive_cumprod(1.0 - a * (1.0 - lam))
        return exam * a, first
    raise InputError(must_be_one_of(("pbm", "cascade", "dcm"), family, "click family"))


def sample_clicks(
    family: str,
    alpha: FloatArray,
    rng: np.random.Generator,
    examination: FloatArray | None = None,
    continuation: FloatArray | None = None,
) -> NDArray[np.bool_]:
    """Clicks ``(n, k)`` of one family for attraction ``alpha`` (vectorised; loops over slots only).

    Two uniforms per slot are always drawn (attraction, continuation), so the random
    stream does not depend on the family.
    """
    a = np.asarray(alpha, dtype=np.float64)
    u = rng.random(a.shape)
    v = rng.random(a.shape)
    if family == "pbm":
        if examination is None:
            raise InputError("pbm needs examination probabilities")
        return u < a * np.asarray(examination)[None, : a.shape[1]]
    hit = u < a
    if family == "cascade":
        return hit & (np.cumsum(hit, axis=1) - hit == 0)
    if family == "dcm":
        if continuation is None:
            raise InputError("dcm needs continuation probabilities")
        clicks = np.zeros(a.shape, dtype=bool)
        examined = np.ones(a.shape[0], dtype=bool)
        for j in range(a.shape[1]):
            clicks[:, j] = examined & hit[:, j]
            examined &= ~clicks[:, j] | (v[:, j] < continuation[j])
        return clicks
    raise InputError(must_be_one_of(("pbm", "cascade", "dcm"), family, "click family"))


def _frozen(x: ArrayLike | None) -> FloatArray | None:
    if x is None:
        return None
    arr = np.array(x, dtype=np.float64, copy=True)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class CheckWorld:
    """A small synthetic world with exact target values (see the module docstring).

    Attributes
    ----------
    family:
        ``"pbm"``, ``"cascade"``, ``"dcm"`` or ``"mixture"`` (users of ``type_families``).
    attraction:
        ``(Q, m)`` :math:`\\alpha_{qd}` of candidate ``d`` (= document id) of query ``q``.
    k:
        Shown slots.
    examination:
        ``(k,)`` PBM examination :math:`\\theta_j` (when a user type is PBM), else ``None``.
    continuation:
        ``(k,)`` DCM continuation :math:`\\lambda_j` (when a user type is DCM), else ``None``.
    logger:
        The logging policy (``propensities``, ``sample``; exact).
    targets:
        Deterministic target rankers (``targets[0]`` orders by attraction: the ideal list).
    query_probs:
        ``(Q,)`` query distribution.
    type_families, type_shares:
        Behaviour family and share of each user type (``user_type`` in the logs).
    name:
        For messages.
    """

    family: str
    attraction: FloatArray
    k: int
    examination: FloatArray | None
    continuation: FloatArray | None
    logger: Any
    targets: tuple[DeterministicTarget, ...]
    query_probs: FloatArray
    type_families: tuple[str, ...]
    type_shares: FloatArray
    name: str = "world"

    def __post_init__(self) -> None:
        for name in ("attraction", "examination", "continuation", "query_probs", "type_shares"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        if self.family not in FAMILIES:
            raise InputError(must_be_one_of(FAMILIES, self.family, "world family"))
        if len(self.type_families) != len(self.type_shares) or abs(float(np.sum(self.type_shares)) - 1) > 1e-12:
            raise InputError("type_families and type_shares must have one entry per type, shares summing to 1")

    @property
    def m(self) -> int:
        return int(self.attraction.shape[1])

    @property
    def n_queries(self) -> int:
        return int(self.attraction.shape[0])

    def event_probabilities(self, query: ArrayLike, lists: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Exact share-weighted ``(click, first_click)`` probabilities of ``lists`` for ``query``."""
        q = np.asarray(query, dtype=np.int64)
        s = np.asarray(lists, dtype=np.int64)
        alpha = np.where(s >= 0, self.attraction[q[:, None], np.maximum(s, 0)], 0.0)
        click = np.zeros(alpha.shape)
        first = np.zeros(alpha.shape)
        for fam, share in zip(self.type_families, self.type_shares, strict=True):
            c, f = exact_event_probabilities(fam, alpha, self.examination, self.continuation)
            click += share * c
            first += share * f
        return click, first

    def list_values(self, query: ArrayLike, lists: ArrayLike, reward: Reward | str) -> FloatArray:
        """``(n,)`` exact expected reward of each list: :math:`c_0 + \\sum_j w_j P(r_j)`."""
        s = np.asarray(lists, dtype=np.int64)
        rw = get_reward(reward, s.shape[1]) if isinstance(reward, str) else reward
        click, first = self.event_probabilities(query, s)
        base = click if rw.kind == "additive" else first
        return rw.offset + base @ rw.position_weights(s.shape[1])

    def truth(self, target: DeterministicTarget | int, reward: Reward | str) -> float:
        """Exact value :math:`V(\\pi)` of a deterministic target (or ``targets[i]``)."""
        t = self.targets[target] if isinstance(target, int) else target
        q = np.arange(self.n_queries)
        return float(self.query_probs @ self.list_values(q, t.rankings(q), reward))

    def policy_value(self, policy: EnumeratedPolicy, reward: Reward | str) -> float:
        """Exact value of a stochastic :class:`EnumeratedPolicy` target (sum over all lists)."""
        total = 0.0
        for q in range(self.n_queries):
            v = self.list_values(np.full(policy.lists.shape[0], q), policy.lists, reward)
            total += float(self.query_probs[q] * (policy.probs[q] @ v))
        return total


#: attraction of the check worlds: a very attractive document for every query (so the
#: cascade stops early for the ideal list while a random list is examined deeper)
_ATTRACTION = (
    (0.85, 0.60, 0.35, 0.15, 0.05),
    (0.05, 0.70, 0.20, 0.90, 0.30),
    (0.40, 0.10, 0.80, 0.25, 0.55),
    (0.20, 0.50, 0.05, 0.65, 0.95),
)
_EXAMINATION = (1.0, 0.6, 0.3)
_CONTINUATION = (0.5, 0.6, 0.7)
_QUERY_PROBS = (0.4, 0.3, 0.2, 0.1)


@cache
def check_world(family: str, logger: str = "plackett_luce") -> CheckWorld:
    r"""The suite's world of ``family`` (4 queries, 5 candidates, 3 slots).

    ``logger``: ``"plackett_luce"`` (default; scores :math:`e^{-1.2\alpha}`, so the ideal
    list is logged less often than under uniform logging and the item propensities vary
    by slot and document), ``"uniform"``, or ``"deterministic"`` (always the three least
    attractive documents, worst first: the targets are outside its support).

    Targets: ``ideal`` (by attraction, descending) and ``shuffled`` (candidates 2, 4, 0
    of the attraction order: a mediocre list).
    """
    alpha = np.array(_ATTRACTION)
    q, m = alpha.shape
    k = len(_EXAMINATION)
    order = np.argsort(-alpha, axis=1, kind="stable")
    targets = (DeterministicTarget(order[:, :k], "ideal"), DeterministicTarget(order[:, [2, 4, 0]], "shuffled"))
    if logger == "plackett_luce":
        pol = plackett_luce_policy(np.exp(-1.2 * alpha), k)
    elif logger == "uniform":
        pol = uniform_policy(q, m, k)
    elif logger == "deterministic":
        pol = deterministic_policy(order[:, ::-1][:, :k], m)
    else:
        raise InputError(must_be_one_of(("plackett_luce", "uniform", "deterministic"), logger, "check logger"))
    if family == "mixture":
        types: tuple[str, ...] = ("pbm", "cascade")
    elif family in FAMILIES:
        types = (family,)
    else:
        raise InputError(must_be_one_of(FAMILIES, family, "world family"))
    shares = np.full(len(types), 1.0 / len(types))
    return CheckWorld(
        family, alpha, k,
        np.array(_EXAMINATION) if "pbm" in types else None,
        np.array(_CONTINUATION) if "dcm" in types else None,
        pol, targets, np.array(_QUERY_PROBS), types, shares, f"{family}/{logger}",
    )


def sample_log(
    world: CheckWorld, n: int, rng: np.random.Generator, *, logger: Any = None, users: bool = True
) -> LoggedData:
    """``n`` impressions logged in ``world``: queries by ``query_probs``, lists by the logger,
    user types by share, clicks by each type's model; exact ``p_list``, ``p_prefix``,
    ``p_item`` and the logger attached. ``users``: cluster ids (about three impressions
    per user, independent of everything else), else ``None``."""
    pol = world.logger if logger is None else logger
    query = np.searchsorted(np.cumsum(world.query_probs), rng.random(n) * world.query_probs.sum(), side="right")
    query = np.minimum(query, world.n_queries - 1).astype(np.int64)
    shown = pol.sample(query, rng)
    types = np.minimum(
        np.searchsorted(np.cumsum(world.type_shares), rng.random(n), side="right"), len(world.type_families) - 1
    ).astype(np.int64)
    alpha = world.attraction[query[:, None], shown]
    clicks = np.zeros(shown.shape, dtype=bool)
    for t, fam in enumerate(world.type_families):
        c = sample_clicks(fam, alpha, rng, world.examination, world.continuation)
        clicks[types == t] = c[types == t]
    p = pol.propensities(query, shown)
    user = rng.integers(0, max(2, n // 3), size=n) if users else None
    return LoggedData(query, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item, user=user,
                      user_type=types, logger=pol, source=f"check world {world.name}")


@lru_cache(maxsize=16)
def replicate_log(family: str, replicates: int = REPLICATES, size: int = REPLICATE_SIZE, seed: int = 2026) -> LoggedData:
    """``replicates`` independent logs of ``size`` impressions of :func:`check_world` (``family``)
    as one log: replicate ``r`` is rows ``r*size .. (r+1)*size - 1``."""
    return sample_log(check_world(family), replicates * size, np.random.default_rng(seed))


def check_rewards(kind: str, k: int) -> tuple[Reward, ...]:
    """The rewards of ``kind`` the suite checks (the first is the kind's main reward)."""
    if kind == "additive":
        return (get_reward("clicks_per_query", k), Reward("dcg_clicks", "additive", 1.0 / np.log2(np.arange(2, k + 2))))
    if kind == "first_click":
        return (get_reward("reciprocal_rank", k), get_reward("abandonment", k))
    raise InputError(f"unknown reward kind {kind!r}")


# ------------------------------------------------------------------------------ helpers
def _expand(pairs: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for fam, kind in pairs:
        for f in (("pbm", "cascade") if fam == "any" else (fam,)):
            if (f, kind) not in out:
                out.append((f, kind))
    return out


def _is_local(est: Estimator, log: LoggedData, size: int, target: DeterministicTarget, reward: Reward) -> bool:
    """Whether the terms of the first replicate equal those of the same rows inside the big log."""
    big = est.terms(log.take(np.arange(2 * size)), target, reward)
    alone = est.terms(log.take(np.arange(size)), target, reward)
    den_big = np.ones(2 * size) if big.den is None else big.den
    den_alone = np.ones(size) if alone.den is None else alone.den
    return bool(np.allclose(big.num[:size], alone.num, rtol=1e-12, atol=1e-14)
                and np.allclose(den_big[:size], den_alone, rtol=1e-12, atol=1e-14))


def _replicate_values(
    cls: type[Estimator], est: Estimator, log: LoggedData, replicates: int, size: int,
    target: DeterministicTarget, reward: Reward, local: bool, check: str,
) -> FloatArray:
    if local:
        t = est.terms(log, target, reward)
        num = t.num.reshape(replicates, size).sum(axis=1)
        den = (np.full(replicates, float(size)) if t.den is None
               else t.den.reshape(replicates, size).sum(axis=1))
        if np.any(den <= 0):
            raise _fail(cls, check, f"undefined in {int(np.sum(den <= 0))} of {replicates} replicates "
                        f"(no positive weight) in world {log.source}")
        values = reward.offset + num / den
        one = est.estimate(log.take(np.arange(size)), target, reward).value
        if not math.isclose(one, values[0], rel_tol=1e-9, abs_tol=1e-12):
            raise _fail(cls, check, f"estimate() {one!r} differs from offset + sum(num)/sum(den) {values[0]!r}")
        return values
    out = np.empty(replicates)
    for r in range(replicates):
        out[r] = est.estimate(log.take(np.arange(r * size, (r + 1) * size)), target, reward).value
    return out


def _mc_summary(values: FloatArray, truth: float) -> tuple[float, float]:
    mean = float(values.mean())
    se = float(values.std(ddof=1) / math.sqrt(values.size))
    return mean - truth, se


def _family_runs(cls: type[Estimator], family: str, check: str) -> Iterator[tuple[Estimator, LoggedData, int, int, bool]]:
    """Instances of ``cls`` in ``family``'s world with the replicate log and whether terms are local."""
    world = check_world(family)
    instances = cls.check_instances(world)
    if not instances:
        raise _fail(cls, check, "check_instances returned no instance")
    full = replicate_log(family)
    probe = check_rewards(cls.rewards[0], world.k)[0]
    for est in instances:
        local = _is_local(est, full, REPLICATE_SIZE, world.targets[0], probe)
        if local:
            yield est, full, REPLICATES, REPLICATE_SIZE, True
        else:
            yield est, full.take(np.arange(FITTED_REPLICATES * REPLICATE_SIZE)), FITTED_REPLICATES, REPLICATE_SIZE, False


# ------------------------------------------------------------------------------ checks
def check_unbiased(cls: type[Estimator], family: str, kind: str) -> None:
    """Mean over replicates within 4 SE of the exact value (two targets, two rewards)."""
    check = f"unbiased[{family}/{kind}]"
    if kind not in cls.rewards:
        raise _fail(cls, check, f"declares {kind} rewards unbiased but supports only {cls.rewards}")
    world = check_world(family)
    for est, log, reps, size, local in _family_runs(cls, family, check):
        rewards = check_rewards(kind, world.k) if local else check_rewards(kind, world.k)[:1]
        for target in world.targets:
            for rw in rewards:
                truth = world.truth(target, rw)
                values = _replicate_values(cls, est, log, reps, size, target, rw, local, check)
                bias, se = _mc_summary(values, truth)
                if not abs(bias) <= Z * se + 1e-12:
                    raise _fail(cls, check, f"{est!r} on target {target.name!r}, reward {rw.name}: mean "
                                f"{truth + bias:.5f} vs exact {truth:.5f} (bias {bias:+.5f}, SE {se:.2g} over "
                                f"{reps} replicates of {size}; tolerance {Z:g} SE)")


def check_biased(cls: type[Estimator], family: str, kind: str) -> None:
    """The declared bias is visible: |mean - exact| > 4 SE for at least one target."""
    check = f"biased[{family}/{kind}]"
    if kind not in cls.rewards:
        raise _fail(cls, check, f"declares bias for {kind} rewards but supports only {cls.rewards}")
    world = check_world(family)
    for est, log, reps, size, local in _family_runs(cls, family, check):
        rw = check_rewards(kind, world.k)[0]
        seen = []
        for target in world.targets:
            values = _replicate_values(cls, est, log, reps, size, target, rw, local, check)
            bias, se = _mc_summary(values, world.truth(target, rw))
            seen.append(f"{target.name}: bias {bias:+.4f} (SE {se:.2g})")
            if abs(bias) > Z * se:
                break
        else:
            raise _fail(cls, check, f"{est!r}: bias not visible with {rw.name} ({'; '.join(seen)}; "
                        f"{reps} replicates of {size})")


def _home(cls: type[Estimator]) -> tuple[str, str]:
    """A (family, kind) the estimator runs in for the generic checks."""
    pairs = _expand(cls.unbiased_under) or _expand(cls.biased_under)
    for fam, kind in pairs:
        if kind in cls.rewards:
            return fam, kind
    return "pbm", cls.rewards[0]


def _small_log(family: str, n: int = 3000, seed: int = 5) -> LoggedData:
    return sample_log(check_world(family), n, np.random.default_rng(seed))


def _instance(cls: type[Estimator], family: str) -> Estimator:
    inst = cls.check_instances(check_world(family))
    if not inst:
        raise CheckFailed(f"estimator {cls.name!r}: check_instances returned no instance")
    return inst[0]


def _close(a: float, b: float) -> bool:
    if math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b))


def check_order_invariance(cls: type[Estimator]) -> None:
    """Permuting the log's rows changes neither the estimate nor its CLT interval."""
    fam, _ = _home(cls)
    est = _instance(cls, fam)
    log = _small_log(fam)
    perm = np.random.default_rng(3).permutation(log.n)
    world = check_world(fam)
    for kind in cls.rewards:
        rw = check_rewards(kind, world.k)[0]
        a = est.estimate(log, world.targets[0], rw)
        b = est.estimate(log.take(perm), world.targets[0], rw)
        for attr in ("value", "se", "ci_low", "ci_high"):
            if not _close(getattr(a, attr), getattr(b, attr)):
                raise _fail(cls, "order_invariance", f"{rw.name}: {attr} {getattr(a, attr)!r} becomes "
                            f"{getattr(b, attr)!r} when the rows are permuted")


def _adversarial_log(world: CheckWorld, rng: np.random.Generator, n: int = 60, single: bool = False) -> LoggedData:
    """Target lists in half the rows, random propensities spanning six decades, random clicks
    (``single``: at most one click per impression, as under the cascade model)."""
    base = sample_log(world, n, rng)
    shown = np.array(base.shown)
    half = rng.random(n) < 0.5
    shown[half] = world.targets[0].rankings(base.query[half])
    k = shown.shape[1]
    prefix = np.cumprod(10.0 ** rng.uniform(-2.0, 0.0, size=(n, k)), axis=1)
    item = 10.0 ** rng.uniform(-3.0, 0.0, size=(n, k))
    clicks = rng.random((n, k)) < 0.5
    if single:
        clicks = first_click(clicks).astype(bool)
    return LoggedData(base.query, shown, clicks, p_list=prefix[:, -1].copy(), p_prefix=prefix, p_item=item,
                      user=base.user, user_type=base.user_type, logger=world.logger, source="adversarial log")


def check_self_normalised_bounds(cls: type[Estimator]) -> None:
    """Self-normalised estimates lie in ``offset + [min, max]`` of the per-impression reward sums."""
    if not cls.self_normalised:
        return
    fam, _ = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    rewards = [rw for kind in cls.rewards for rw in check_rewards(kind, world.k)]
    if "additive" in cls.rewards:
        rewards.append(Reward("signed", "additive", np.array([1.0, -2.0, 0.5])))
    rng = np.random.default_rng(17)
    for trial in range(8):
        log = _adversarial_log(world, rng, single=trial % 2 == 1)
        for rw in rewards:
            sums = rw.slot_rewards(log.clicks).sum(axis=1)
            lo, hi = rw.offset + sums.min(), rw.offset + sums.max()
            try:
                v = est.estimate(log, world.targets[0], rw).value
            except InputError:
                continue  # undefined on this log (no positive weight): refused, not a number
            if not lo - 1e-12 <= v <= hi + 1e-12:
                raise _fail(cls, "self_normalised_bounds", f"adversarial log {trial}, {rw.name}: estimate {v!r} "
                            f"outside the reward range [{lo:g}, {hi:g}]")


def check_bootstrap_seed(cls: type[Estimator]) -> None:
    """Same seed, same cluster-bootstrap interval; finite and ordered."""
    fam, kind = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam, n=6000)
    rw = check_rewards(kind, world.k)[0]
    a = est.estimate(log, world.targets[0], rw, n_boot=200, rng=np.random.default_rng(11))
    b = est.estimate(log, world.targets[0], rw, n_boot=200, rng=np.random.default_rng(11))
    if (a.boot_low, a.boot_high) != (b.boot_low, b.boot_high):
        raise _fail(cls, "bootstrap_seed", f"same seed, different intervals {(a.boot_low, a.boot_high)} "
                    f"and {(b.boot_low, b.boot_high)}")
    if not (math.isfinite(a.boot_low) and math.isfinite(a.boot_high) and a.boot_low <= a.boot_high):
        raise _fail(cls, "bootstrap_seed", f"bootstrap interval {(a.boot_low, a.boot_high)} not finite and ordered")


def check_clt_interval(cls: type[Estimator]) -> None:
    """The CLT interval contains the estimate; the SE is finite and positive."""
    fam, _ = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam)
    for kind in cls.rewards:
        rw = check_rewards(kind, world.k)[0]
        for target in world.targets:
            e = est.estimate(log, target, rw)
            if not (math.isfinite(e.se) and e.se > 0 and e.ci_low <= e.value <= e.ci_high):
                raise _fail(cls, "clt_interval", f"{target.name}/{rw.name}: value {e.value!r}, SE {e.se!r}, "
                            f"interval [{e.ci_low!r}, {e.ci_high!r}]")
            if e.n != log.n or e.clusters != np.unique(log.user).size:
                raise _fail(cls, "clt_interval", f"n {e.n} / clusters {e.clusters} do not match the log")


def check_diagnostics(cls: type[Estimator]) -> None:
    """Weight diagnostics finite and in range; no support violation under full support."""
    fam, _ = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam)
    for kind in cls.rewards:
        rw = check_rewards(kind, world.k)[0]
        for target in world.targets:
            terms = est.terms(log, target, rw)
            d = est.estimate(log, target, rw).diagnostics
            where = f"{target.name}/{rw.name}"
            if terms.weights is not None:
                w = np.asarray(terms.weights)
                size = w.size if w.ndim == 1 else int(log.valid.sum())
                if not (0 < d.ess <= size * (1 + 1e-12)):
                    raise _fail(cls, "diagnostics", f"{where}: ess {d.ess!r} outside (0, {size}]")
                if not math.isfinite(d.max_weight):
                    raise _fail(cls, "diagnostics", f"{where}: max_weight {d.max_weight!r}")
                if np.all(w >= 0) and not 0.0 <= d.top1_share <= 1.0 + 1e-12:
                    raise _fail(cls, "diagnostics", f"{where}: top1_share {d.top1_share!r} outside [0, 1]")
                if not math.isfinite(d.top1_share):
                    raise _fail(cls, "diagnostics", f"{where}: top1_share {d.top1_share!r} not finite")
                if not 0.0 <= d.zero_weight_share <= 1.0:
                    raise _fail(cls, "diagnostics", f"{where}: zero_weight_share {d.zero_weight_share!r}")
            if d.support_violations not in (0, None):
                raise _fail(cls, "diagnostics", f"{where}: {d.support_violations} support violations "
                            "under a logger with full support")


def check_missing_propensities(cls: type[Estimator]) -> None:
    """A log without a needed propensity raises InputError naming it."""
    fam, kind = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam, n=500)
    rw = check_rewards(kind, world.k)[0]
    props = ("p_list", "p_prefix", "p_item")

    def without(names: tuple[str, ...]) -> LoggedData:
        keep = {nm: (None if nm in names else getattr(log, nm)) for nm in props}
        return LoggedData(log.query, log.shown, log.clicks, user=log.user, user_type=log.user_type,
                          logger=log.logger, **keep)

    if not cls.needs:
        est.estimate(without(props), world.targets[0], rw)
        return
    for name in cls.needs:
        try:
            est.estimate(without((name,)), world.targets[0], rw)
        except InputError as exc:
            if name not in str(exc):
                raise _fail(cls, "missing_propensities", f"the error for missing {name} does not name it: {exc}")
        else:
            raise _fail(cls, "missing_propensities", f"no InputError without {name}")


def check_support_violations(cls: type[Estimator]) -> None:
    """Under a deterministic logger, a target showing other documents violates support."""
    fam, kind = _home(cls)
    world = check_world(fam)
    det = check_world(fam, "deterministic").logger
    est = _instance(cls, fam)
    log = sample_log(world, 400, np.random.default_rng(8), logger=det)
    rw = check_rewards(kind, world.k)[0]
    target = world.targets[0]
    try:
        terms = est.terms(log, target, rw)
    except InputError:
        return  # refused with a clear error: acceptable
    d = est.diagnostics(log, target, terms)
    if d.support_violations is None or d.support_violations <= 0:
        raise _fail(cls, "support_violations", f"a deterministic logger and a target showing other documents "
                    f"gave support_violations={d.support_violations!r}")


def check_pickle(cls: type[Estimator]) -> None:
    """A pickled copy of the estimator gives the same estimate."""
    fam, kind = _home(cls)
    world = check_world(fam)
    est = _instance(cls, fam)
    log = _small_log(fam, n=800)
    rw = check_rewards(kind, world.k)[0]
    copy = pickle.loads(pickle.dumps(est))
    a = est.estimate(log, world.targets[0], rw).value
    b = copy.estimate(log, world.targets[0], rw).value
    if not _close(a, b):
        raise _fail(cls, "pickle", f"a pickled copy estimates {b!r} instead of {a!r}")


_GENERIC: tuple[Callable[[type[Estimator]], None], ...] = (
    check_order_invariance,
    check_self_normalised_bounds,
    check_bootstrap_seed,
    check_clt_interval,
    check_diagnostics,
    check_missing_propensities,
    check_support_violations,
    check_pickle,
)


def estimator_checks(cls: type[Estimator] | str) -> Iterator[tuple[str, Callable[[], None]]]:
    """Yield ``(check name, zero-argument callable)`` for ``cls`` (nothing runs until called)."""
    c = estimator_class(cls) if isinstance(cls, str) else cls
    for fam, kind in _expand(c.unbiased_under):
        yield f"unbiased[{fam}/{kind}]", (lambda f=fam, k=kind: check_unbiased(c, f, k))
    for fam, kind in _expand(c.biased_under):
        yield f"biased[{fam}/{kind}]", (lambda f=fam, k=kind: check_biased(c, f, k))
    for fn in _GENERIC:
        if fn is check_self_normalised_bounds and not c.self_normalised:
            continue
        yield fn.__name__.removeprefix("check_"), (lambda fn=fn: fn(c))


def check_estimator(cls: type[Estimator] | str) -> list[str]:
    """Run every conformance check on ``cls`` (a class or registry name); return the names passed.

    Raises
    ------
    CheckFailed
        On the first failing check, naming the estimator and the problem.
    """
    passed = []
    for name, run in estimator_checks(cls):
        run()
        passed.append(name)
    return passed
