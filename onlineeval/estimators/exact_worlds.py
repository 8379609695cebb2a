r"""Small synthetic worlds with exact target values: what the conformance suite checks against.

Each :class:`CheckWorld` has a known click model, logging policy and target rankers, so the
truth comes from the click model's formulas, never from simulation:

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

Logging policies are :class:`~onlineeval.estimators.enumerated_policies.EnumeratedPolicy`
objects (exact propensities). :func:`check_world` builds the suite's worlds, :func:`sample_log`
and :func:`replicate_log` draw logs from them. The checks are in
:mod:`onlineeval.estimators.checks`, which re-exports every public name here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError, must_be_one_of
from onlineeval.estimators.base import DeterministicTarget, LoggedData, Reward, get_reward
from onlineeval.estimators.enumerated_policies import (
    EnumeratedPolicy,
    deterministic_policy,
    plackett_luce_policy,
    uniform_policy,
)

__all__ = [
    "FAMILIES",
    "REPLICATES",
    "REPLICATE_SIZE",
    "CheckWorld",
    "check_world",
    "click_pattern_probabilities",
    "enumerated_log",
    "exact_event_probabilities",
    "replicate_log",
    "sample_clicks",
    "sample_log",
]

FloatArray = NDArray[np.float64]

#: click-model families of the check worlds ("any" in a declaration expands to pbm and cascade)
FAMILIES = ("pbm", "cascade", "dcm", "mixture")
#: replicates of the unbiasedness / bias checks for estimators whose terms are per-impression
REPLICATES = 200
#: impressions per replicate
REPLICATE_SIZE = 2500


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


def click_patterns(k: int) -> NDArray[np.bool_]:
    """``(2^k, k)`` every click pattern of ``k`` slots (row ``i``: the bits of ``i``, slot 0 the lowest)."""
    return (np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1 == 1


def click_pattern_probabilities(
    family: str, alpha: FloatArray, examination: FloatArray | None = None, continuation: FloatArray | None = None
) -> FloatArray:
    r"""Exact ``(n, 2^k)`` probability of every click pattern (:func:`click_patterns`) of lists with attraction
    ``alpha`` ``(n, k)``: the joint law of the clicks, where :func:`exact_event_probabilities` gives its margins.

    - ``pbm``: independent slots, :math:`\prod_j (\theta_j\alpha_j)^{c_j}(1 - \theta_j\alpha_j)^{1 - c_j}`;
    - ``cascade``: a pattern with one click at :math:`j` has :math:`\alpha_j\prod_{i<j}(1 - \alpha_i)`, no click
      :math:`\prod_i (1 - \alpha_i)`, two or more clicks 0;
    - ``dcm``: the slots read top-down with the user's hidden state (still examining or gone): an examined slot is
      clicked with :math:`\alpha_j`; after a click the user goes on with :math:`\lambda_j`, after a skip always; a
      slot after the user left is never clicked. The pattern's probability sums over the hidden states.
    """
    a = np.asarray(alpha, dtype=np.float64)
    n, k = a.shape
    pats = click_patterns(k)
    out = np.empty((n, pats.shape[0]))
    if family == "pbm":
        if examination is None:
            raise InputError("pbm needs examination probabilities")
        c = a * np.asarray(examination, dtype=np.float64)[None, :k]
        for i, pat in enumerate(pats):
            out[:, i] = np.prod(np.where(pat[None, :], c, 1.0 - c), axis=1)
        return out
    if family == "cascade":
        lam = np.zeros(k)
    elif family == "dcm":
        if continuation is None:
            raise InputError("dcm needs continuation probabilities")
        lam = np.asarray(continuation, dtype=np.float64)[:k]
    else:
        raise InputError(must_be_one_of(("pbm", "cascade", "dcm"), family, "click family"))
    # the cascade model is the DCM that never goes on after a click
    for i, pat in enumerate(pats):
        examining = np.ones(n)  # P(pattern so far, still examining)
        gone = np.zeros(n)  # P(pattern so far, left)
        for j in range(k):
            if pat[j]:
                clicked = examining * a[:, j]
                examining, gone = clicked * lam[j], clicked * (1.0 - lam[j])  # a left user never clicks
            else:
                examining = examining * (1.0 - a[:, j])
        out[:, i] = examining + gone
    return out


def enumerated_log(world: CheckWorld, logger: Any = None) -> tuple[LoggedData, FloatArray]:
    r"""Every impression ``world`` can log, once, with its exact probability: ``(log, probability)``.

    One row per query, list the logger shows with positive probability, user type and click pattern of positive
    probability, the probability :math:`P(q)\,\mu(\mathbf s \mid q)\,P(t)\,P(\mathbf c \mid q, \mathbf s, t)`
    (they sum to 1). The expectation of any per-impression quantity under the world's log is then an exact sum:
    ``probability @ values``. ``logger``: an :class:`EnumeratedPolicy` other than the world's. Each row is its own
    user (cluster)."""
    pol = world.logger if logger is None else logger
    pats = click_patterns(world.k)
    queries, lists, probs = [], [], []
    for q in range(world.n_queries):
        keep = pol.probs[q] > 0
        lists.append(pol.lists[keep])
        queries.append(np.full(int(keep.sum()), q, dtype=np.int64))
        probs.append(world.query_probs[q] * pol.probs[q][keep])
    query, shown, p_shown = np.concatenate(queries), np.concatenate(lists), np.concatenate(probs)
    alpha = world.attraction[query[:, None], shown]
    rows_q, rows_s, rows_t, rows_c, rows_p = [], [], [], [], []
    for t, (fam, share) in enumerate(zip(world.type_families, world.type_shares, strict=True)):
        pp = click_pattern_probabilities(fam, alpha, world.examination, world.continuation)
        for i in range(pats.shape[0]):
            keep = pp[:, i] > 0
            rows_q.append(query[keep])
            rows_s.append(shown[keep])
            rows_t.append(np.full(int(keep.sum()), t, dtype=np.int64))
            rows_c.append(np.broadcast_to(pats[i], (int(keep.sum()), world.k)))
            rows_p.append(p_shown[keep] * share * pp[keep, i])
    q_all, s_all = np.concatenate(rows_q), np.concatenate(rows_s)
    p = pol.propensities(q_all, s_all)
    log = LoggedData(q_all, s_all, np.concatenate(rows_c), p_list=p.list, p_prefix=p.prefix, p_item=p.item,
                     user=np.arange(q_all.size), user_type=np.concatenate(rows_t), logger=pol,
                     source=f"every impression of check world {world.name}")
    return log, np.concatenate(rows_p)


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
def replicate_log(
    family: str, replicates: int = REPLICATES, size: int = REPLICATE_SIZE, seed: int = 2026
) -> LoggedData:
    """``replicates`` independent logs of ``size`` impressions of :func:`check_world` (``family``)
    as one log: replicate ``r`` is rows ``r*size .. (r+1)*size - 1``."""
    return sample_log(check_world(family), replicates * size, np.random.default_rng(seed))
