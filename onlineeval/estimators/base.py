r"""The off-policy (counterfactual) estimation contract: logs, targets, rewards, results.

A *log* (:class:`LoggedData`) holds impressions shown by a randomised logging policy:
the query, the shown list, the clicks and the logging propensities each estimator
needs. A *target* (:class:`Target`) is the ranker whose online value is estimated. A
*reward* (:class:`Reward`) says which online metric that value is: every supported
metric is a function of the click vector written as per-slot rewards

.. math::

    R = c_0 + \sum_{j=0}^{k-1} r_j(\mathbf c), \qquad
    V(\pi) = \mathbb E_{q}\,\mathbb E_{\mathbf s \sim \pi(q)}\,\mathbb E[R \mid q, \mathbf s],

with ``offset`` :math:`c_0` (1 for abandonment) and per-slot rewards :math:`r_j`:
clicks (:math:`r_j = c_j`), position-weighted clicks (:math:`r_j = w_j c_j`), the
reciprocal rank of the first click (:math:`r_j = f_j/(j+1)` with :math:`f_j` the
first-click indicator) or minus the first-click indicator (abandonment).

Estimators never know whether a log was simulated or read from a file: the
``counterfactual`` simulation design and ``onlineeval estimate`` share them.

Estimators
----------
An estimator is a frozen dataclass whose fields are its options. The public method
:meth:`Estimator.estimate` validates once and calls one hook, :meth:`Estimator._terms`,
which returns per-impression numerators and (for self-normalised estimators)
denominators, so that

.. math::

    \hat V = c_0 + \frac{\sum_i \mathrm{num}_i}{\sum_i \mathrm{den}_i}

(``den = 1`` for the plain estimators). The base class turns the terms into the
estimate, a CLT interval (delta method over clusters: users when the log has them,
impressions otherwise; :func:`onlineeval.stats.ratio_mean`), an optional seeded
cluster-bootstrap percentile interval, and the weight diagnostics. Adding an estimator
is one file: subclass, set ``name`` and ``assumption``, implement ``_terms``, decorate
with :func:`register_estimator`, and import the module in
:mod:`onlineeval.estimators` (the conformance suite in
:mod:`onlineeval.estimators.checks` then runs on it).

Conventions
-----------
- Slots are 0-based; ``shown[i, j] == -1`` is an empty slot (never clicked).
- Propensities are probabilities in (0, 1] of what was *shown*: ``p_list[i]`` of the
  whole shown list, ``p_prefix[i, j]`` of its top ``j+1`` slots, ``p_item[i, j]`` of the
  document ``shown[i, j]`` being at slot ``j``. Empty slots carry propensity 1.
- Nothing mutates the caller's arrays; every random result takes an explicit
  ``np.random.Generator``.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators.derived import (  # noqa: F401
    LogCache,
    _top_k_sum,
    block_rows,
    is_frozen,
    row_sum,
    weight_statistics,
    weighted_row_sum,
)
from onlineeval.estimators.diagnostics import (  # noqa: F401  (re-exported: their home was this module)
    MEAN_WEIGHT_TOLERANCE,
    MEAN_WEIGHT_Z,
    Diagnostics,
    mean_weight,
    support_violations,
)
from onlineeval.estimators.rewards import REWARDS, Reward, first_click, get_reward

__all__ = [
    "BOOTSTRAP_PROGRESS",
    "REWARDS",
    "DeterministicTarget",
    "Diagnostics",
    "Estimator",
    "LoggedData",
    "OffPolicyEstimate",
    "Propensities",
    "PropensityModel",
    "Reward",
    "Target",
    "Terms",
    "available_estimators",
    "estimator_class",
    "first_click",
    "get_estimator",
    "get_reward",
    "register_estimator",
    "support_violations",
    "weight_statistics",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: the warning of an estimate whose CLT interval holds a data-driven choice fixed (adaptive IPS's behaviours) when no
#: bootstrap was asked for: 0.835-0.904 coverage for 0.95 in the coverage audit of 2026-12-02 and over 1,000
#: replicates of ``configs/counterfactual.yaml``
CHOICE_HELD_FIXED = ("the CLT interval holds the data-driven choice of behaviours fixed and covers below the nominal "
                     "level; a bootstrap interval (n_boot; the estimate command's --bootstrap N, e.g. 1000) makes the "
                     "choice again in every resample")

#: ``report(what, done, total)``, called after each resample by the bootstraps that fit a model again on every
#: resample (the direct method's: seconds to minutes on large logs); ``None`` (default): nothing reported. The
#: estimate command sets it to a progress line on stderr.
BOOTSTRAP_PROGRESS: ContextVar[Callable[[str, int, int], None] | None] = ContextVar("bootstrap_progress",
                                                                                     default=None)


# --------------------------------------------------------------------------------- logs
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


def _propensity(x: Any, name: str, shape: tuple[int, ...]) -> FloatArray | None:
    if x is None:
        return None
    arr = _matrix(x, name, np.float64, shape)
    # two reductions decide the common case (a NaN makes min() NaN, which fails the test)
    if arr.size and not (arr.min() > 0.0 and arr.max() <= 1.0 + 1e-12):
        bad = ~np.isfinite(arr) | (arr <= 0.0) | (arr > 1.0 + 1e-12)
        idx = np.argwhere(bad)[0]
        raise InputError(f"{name}: propensities must be in (0, 1], found {arr[tuple(idx)]!r} at impression "
                         f"{int(idx[0])}")
    return arr


@dataclass(frozen=True, eq=False)
class LoggedData:
    """A batch of logged impressions (one row each) with the logging propensities.

    Parameters
    ----------
    query:
        ``(n,)`` int query index (into the target's rankings).
    shown:
        ``(n, k)`` int document ids shown, ``-1`` = empty slot (empty slots only trail).
    clicks:
        ``(n, k)`` bool clicks (never on an empty slot).
    p_list, p_prefix, p_item:
        Logging propensities of what was shown (see the module conventions); each may be
        ``None`` when the log does not carry it (an estimator that needs it says so).
    user:
        ``(n,)`` int cluster ids for intervals (the randomisation unit); ``None``: each
        impression is its own cluster.
    user_type:
        ``(n,)`` int behaviour type of the user (adaptive IPS); ``None`` when unknown.
    logger:
        The logging policy as a :class:`PropensityModel`, when known: it gives the
        propensities of the *target's* lists, for support diagnostics.
    source:
        Where the log came from (file name), for messages.
    features:
        ``(n, k, p)`` float feature vectors :math:`x_{qd}` of the shown documents (one per
        (query, document); empty slots ignored), for regression EM's relevance model
        (:func:`onlineeval.estimators.position_bias.estimate_em`); ``None``: no features.

    Notes
    -----
    The arrays are read-only private copies (arrays that are already read-only and own their
    memory, such as another log's, are kept without a copy), so a log never changes, and
    what estimators derive from it is computed once and shared by every estimate of the log
    (:meth:`cached`, :meth:`importance_weights`, :meth:`slot_rewards`; see
    :mod:`onlineeval.estimators.derived`).
    """

    query: IntArray
    shown: IntArray
    clicks: BoolArray
    p_list: FloatArray | None = None
    p_prefix: FloatArray | None = None
    p_item: FloatArray | None = None
    user: IntArray | None = None
    user_type: IntArray | None = None
    logger: PropensityModel | None = None
    source: str | None = None
    features: FloatArray | None = None

    def __post_init__(self) -> None:
        shown = _matrix(self.shown, "shown", np.int64)
        if shown.ndim != 2 or shown.shape[0] == 0 or shown.shape[1] == 0:
            raise InputError(f"shown: expected a non-empty (n, k) matrix, got shape {shown.shape}", self.source)
        n, k = shown.shape
        object.__setattr__(self, "shown", shown)
        object.__setattr__(self, "query", _matrix(self.query, "query", np.int64, (n,)))
        clicks = np.asarray(self.clicks)
        if clicks.shape != (n, k):
            raise InputError(f"clicks: expected shape {(n, k)}, got {clicks.shape}", self.source)
        if clicks.dtype != bool and not np.all(np.isin(clicks, (0, 1))):
            raise InputError("clicks: must be 0/1 or bool", self.source)
        clicks = _matrix(clicks, "clicks", bool, (n, k))
        if (clicks & (shown < 0)).any():
            raise InputError("clicks on empty slots", self.source)
        object.__setattr__(self, "clicks", clicks)
        object.__setattr__(self, "p_list", _propensity(self.p_list, "p_list", (n,)))
        object.__setattr__(self, "p_prefix", _propensity(self.p_prefix, "p_prefix", (n, k)))
        object.__setattr__(self, "p_item", _propensity(self.p_item, "p_item", (n, k)))
        for name in ("user", "user_type"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _matrix(value, name, np.int64, (n,)))
        if self.features is not None:
            feats = _matrix(self.features, "features", np.float64)
            if feats.ndim != 3 or feats.shape[:2] != (n, k):
                raise InputError(f"features: expected shape ({n}, {k}, p), got {feats.shape}", self.source)
            if not np.isfinite(feats[shown >= 0]).all():
                raise InputError("features: must be finite on shown slots", self.source)
            object.__setattr__(self, "features", feats)

    @functools.cached_property
    def user_groups(self) -> tuple[IntArray, int]:
        """``(index of each impression's cluster, number of clusters)``; computed once per log
        (every estimate of the log reuses it)."""
        if self.user is None:
            return np.arange(self.n, dtype=np.int64), self.n
        uniq, inv = _unique_inverse(self.user)
        return inv, int(uniq.size)

    @functools.cached_property
    def query_groups(self) -> tuple[IntArray, IntArray]:
        """``(distinct queries, index of each impression's query among them)``, computed once."""
        return _unique_inverse(self.query)

    @property
    def n(self) -> int:
        return int(self.shown.shape[0])

    @property
    def k(self) -> int:
        return int(self.shown.shape[1])

    @functools.cached_property
    def valid(self) -> BoolArray:
        """``(n, k)`` read-only: ``shown >= 0`` (computed once)."""
        v = self.shown >= 0
        v.setflags(write=False)
        return v

    @functools.cached_property
    def all_valid(self) -> bool:
        """True when no slot of the log is empty."""
        return bool(self.valid.all())

    # ------------------------------------------------------------------ derived arrays
    @functools.cached_property
    def _cache(self) -> LogCache:
        return LogCache()

    def cached(self, key: Any, compute: Callable[[], Any], *, target: Any = None) -> Any:
        """``compute()``, computed once per log (per log and ``target`` when given) and kept.

        Estimators share what they derive from a log through it: the target's propensities
        and importance weights (:meth:`target_propensities`, :meth:`importance_weights`),
        slot and list rewards (:meth:`slot_rewards`, :meth:`list_rewards`), their products
        (:meth:`slot_weighted_rewards`). ``key`` is any hashable naming the quantity and
        everything it depends on besides the log (and the target); targets are told apart by
        identity, and only the :data:`~onlineeval.estimators.derived.CACHED_TARGETS` most
        recently used targets keep their entries. Arrays in the result are made read-only
        (``compute`` must return fresh arrays it does not keep). Valid because a log, its
        targets and rewards are immutable.
        """
        return self._cache.get(key, compute, target)

    def clear_cache(self) -> None:
        """Drop every kept derived array (:meth:`cached`), e.g. to free memory."""
        self._cache.clear()

    def __getstate__(self) -> dict[str, Any]:
        # derived arrays are not pickled (they are recomputed on demand)
        return {key: value for key, value in self.__dict__.items() if key != "_cache"}

    def target_propensities(self, target: Target) -> Propensities:
        """``target.propensities(query, shown)`` of the logged lists as float arrays, asked
        once per log and target (read-only views; the target's own arrays are not changed)."""
        def compute() -> Propensities:
            p = target.propensities(self.query, self.shown)
            return Propensities(*(_readonly_float(x) for x in (p.list, p.prefix, p.item)))
        return self.cached("propensities", compute, target=target)  # type: ignore[no-any-return]

    def importance_weights(self, target: Target, level: str) -> FloatArray:
        r"""The importance weights of ``target`` against the logging propensities, computed
        once per log, target and level (read-only):

        - ``"list"``: ``(n,)`` :math:`\pi(\mathbf s_i)/\mu(\mathbf s_i)` (``p_list``);
        - ``"item"``: ``(n, k)`` :math:`\pi(s_{ij} \text{ at } j)/\mu(\cdot)` (``p_item``),
          0 at empty slots;
        - ``"prefix"``: ``(n, k)`` :math:`\pi(\mathbf s_{i,0..j})/\mu(\cdot)` (``p_prefix``),
          0 at empty slots;
        - ``"list_slots"``: ``(n, k)`` the list weight at every shown slot, 0 at empty slots;
        - ``"prefix_carried"``: the prefix weights with empty slots carrying the weight of the
          last shown slot (the whole list); the ``"prefix"`` array itself when no slot is empty.

        The log must carry the propensity (:meth:`require`).
        """
        if level in ("list", "item", "prefix"):
            return self._base_weights(target, level)
        if level == "list_slots":
            return self.cached(("weights", "list_slots"),  # type: ignore[no-any-return]
                               lambda: np.where(self.valid, self.importance_weights(target, "list")[:, None], 0.0),
                               target=target)
        if level == "prefix_carried":
            w = self.importance_weights(target, "prefix")
            if self.all_valid:
                return w
            return self.cached(("weights", "prefix_carried"), lambda: _carry_last(w, self.valid),  # type: ignore
                               target=target)
        raise ValueError(f"unknown weight level {level!r}; allowed: list, item, prefix, list_slots, prefix_carried")

    def _base_weights(self, target: Target, level: str) -> FloatArray:
        def compute() -> FloatArray:
            num: Any
            if type(target) is DeterministicTarget:
                # its propensities are 0 or 1: kept as booleans (True / p is 1.0 / p, the same number)
                same, run = self.cached("indicators", lambda: target.indicators(self.query, self.shown),
                                        target=target)
                num = run[:, -1] if level == "list" else (same if level == "item" else run)
            else:
                p = self.target_propensities(target)
                num = p.list if level == "list" else (p.item if level == "item" else p.prefix)
            if level == "list":
                return np.divide(num, self.p_list)
            return self._on_shown(np.divide(num, self.p_item if level == "item" else self.p_prefix))
        w = self.cached(("weights", level), compute, target=target)
        # the target's propensities are kept only until every weight the log allows is derived
        sec = self._cache.section(target)
        if ("propensities" in sec or "indicators" in sec) and all(
                ("weights", lv) in sec for lv, p in (("list", self.p_list), ("item", self.p_item),
                                                     ("prefix", self.p_prefix)) if p is not None):
            sec.pop("propensities", None)
            sec.pop("indicators", None)
        return w  # type: ignore[no-any-return]

    def _on_shown(self, x: FloatArray) -> FloatArray:
        """``x`` at shown slots, 0 at empty ones (``x`` itself when no slot is empty)."""
        return x if self.all_valid else np.where(self.valid, x, 0.0)

    def slot_weighted_rewards(self, target: Target, level: str, reward: Reward) -> FloatArray:
        r"""``(n,)`` :math:`\sum_j w_{ij} r_{ij}` with the slot weights of ``level``
        (``"item"``, ``"prefix"`` or ``"list_slots"``, see :meth:`importance_weights`) and
        :meth:`slot_rewards`, computed once per log, target, level and reward definition."""
        def compute() -> FloatArray:
            return weighted_row_sum(self.importance_weights(target, level), self.slot_rewards(reward))
        key = _reward_key(reward)
        if key is None:
            return compute()
        return self.cached(("slot_weighted_rewards", level, *key), compute, target=target)  # type: ignore

    def slot_rewards(self, reward: Reward) -> FloatArray:
        """``reward.slot_rewards(clicks)``, computed once per log and reward definition
        (read-only; a reward of another type than :class:`Reward` is asked every time)."""
        key = _reward_key(reward)
        if key is None:
            return reward.slot_rewards(self.clicks)
        return self.cached(("slot_rewards", *key), lambda: reward.slot_rewards(self.clicks))  # type: ignore

    def list_rewards(self, reward: Reward) -> FloatArray:
        r"""``(n,)`` the list reward :math:`\sum_j r_{ij}` of each impression (the reward's own
        ``list_rewards`` when it keeps one, as the simulation's per-batch reward does), the
        row sums of :meth:`slot_rewards`; computed once per log and reward definition."""
        own = getattr(reward, "list_rewards", None)
        if callable(own):
            return own(self.clicks)  # type: ignore[no-any-return]
        key = _reward_key(reward)
        if key is None:
            return row_sum(reward.slot_rewards(self.clicks))
        return self.cached(("list_rewards", *key), lambda: row_sum(self.slot_rewards(reward)))  # type: ignore

    def take(self, rows: ArrayLike) -> LoggedData:
        """The sub-log of ``rows`` (an index array or boolean mask), same logger."""
        idx = np.asarray(rows)

        def part(x: NDArray[Any] | None) -> NDArray[Any] | None:
            if x is None:
                return None
            out = x[idx]
            if not np.may_share_memory(out, x):  # a fresh copy: made read-only, the new log keeps it
                out.setflags(write=False)
            return out

        opt = {name: part(getattr(self, name))
               for name in ("p_list", "p_prefix", "p_item", "user", "user_type", "features")}
        return LoggedData(part(self.query), part(self.shown), part(self.clicks), logger=self.logger,
                          source=self.source, **opt)

    def require(self, *names: str, estimator: str = "") -> None:
        """Raise :class:`InputError` when a propensity an estimator needs is missing."""
        missing = [nm for nm in names if getattr(self, nm) is None]
        if missing:
            who = f"estimator {estimator!r} " if estimator else ""
            raise InputError(f"{who}needs logging propensities {', '.join(missing)}; the log does not carry them",
                             self.source)


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


def _reward_key(reward: Any) -> tuple[Any, ...] | None:
    """What a :class:`Reward`'s slot rewards depend on (its kind and weights); ``None`` for
    other reward types, whose results are not kept."""
    if type(reward) is not Reward:
        return None
    return (reward.kind, None if reward.weights is None else reward.weights.tobytes())


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


# ------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class Terms:
    """What an estimator's hook returns.

    Attributes
    ----------
    num, den:
        ``(n,)`` per-impression numerator and denominator: :math:`\\hat V - c_0 =
        \\sum num / \\sum den` (``den = None``: all ones).
    weights:
        The importance weights the estimate rests on, ``(n,)`` (list-level) or ``(n, k)``
        (slot-level; empty slots 0), for the diagnostics; ``None`` for the direct method.
    notes:
        Estimator-specific diagnostics (e.g. ``clipping_bias_bound``), JSON-able.
    """

    num: FloatArray
    den: FloatArray | None = None
    weights: FloatArray | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OffPolicyEstimate:
    """An off-policy estimate of a target's value with intervals and diagnostics."""

    estimator: str
    target: str
    reward: str
    value: float
    se: float
    ci_low: float
    ci_high: float
    boot_low: float
    boot_high: float
    alpha: float
    n: int
    clusters: int
    assumption: str
    diagnostics: Diagnostics

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


# ------------------------------------------------------------------------------ estimators
@dataclass(frozen=True)
class Estimator(ABC):
    """Base class of every off-policy estimator (a frozen dataclass of options).

    Class attributes each subclass sets: ``name`` (registry key), ``assumption`` (the
    behaviour/reward assumption under which it is unbiased, printed next to its
    numbers), ``needs`` (the logging propensities it reads), ``rewards`` (the reward
    kinds it supports), ``self_normalised``, ``unbiased_under`` and ``biased_under``
    (what the conformance suite checks).
    """

    name: ClassVar[str] = ""
    assumption: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ()
    rewards: ClassVar[tuple[str, ...]] = ("additive", "first_click")
    self_normalised: ClassVar[bool] = False
    #: ``(click-model family, reward kind)`` pairs under which the estimator is unbiased
    #: (self-normalised and fitted ones: consistent) given full support; families are
    #: ``"pbm"`` (position-based, independent clicks), ``"cascade"`` (cascade model:
    #: examine down to the first click, stop there), ``"dcm"`` (cascade that may continue
    #: after a click), ``"any"`` (every click model); reward kinds as in :class:`Reward`.
    unbiased_under: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: pairs under which the estimator is known to be biased (the suite shows the bias)
    biased_under: ClassVar[tuple[tuple[str, str], ...]] = ()

    @classmethod
    def check_instances(cls, world: Any) -> list[Estimator]:
        """The instances the conformance suite runs in ``world``
        (:class:`onlineeval.estimators.checks.CheckWorld`: its click family, slots and, for
        position-based worlds, the true examination probabilities). Default ``[cls()]``;
        an estimator that needs known quantities (PBM-IPS's examination probabilities)
        overrides this to build instances from ``world``."""
        return [cls()]

    def estimate(
        self,
        data: LoggedData,
        target: Target,
        reward: Reward | str = "clicks_per_query",
        *,
        alpha: float = 0.05,
        n_boot: int = 0,
        rng: np.random.Generator | None = None,
    ) -> OffPolicyEstimate:
        """Estimate ``target``'s value of ``reward`` from ``data``.

        ``n_boot`` > 0 adds a cluster-bootstrap percentile interval (needs ``rng``).
        Raises :class:`InputError` when a needed propensity is missing, the reward kind is
        not supported, or the estimate is undefined (e.g. no positive weight).
        """
        from onlineeval.stats import cluster_bootstrap_ratio, ratio_mean

        rw = self._reward(reward, data.k)
        terms = self.terms(data, target, rw)
        num_u, den_u, clusters = self._cluster_sums(data, terms)
        if not np.isfinite(num_u).all() or not np.isfinite(den_u).all():
            raise InputError(f"estimator {self.name!r}: non-finite terms (a propensity of 0?)", data.source)
        if den_u.sum() <= 0:
            raise InputError(
                f"estimator {self.name!r}: undefined, the log gives the target no positive weight "
                "(no logged impression agrees with the target where this estimator needs it)",
                data.source,
            )
        if clusters >= 2:
            est = ratio_mean(num_u, den_u, alpha=alpha)
            value, se, lo, hi = est.estimate, est.se, est.ci_low, est.ci_high
        else:
            value, se, lo, hi = float(num_u.sum() / den_u.sum()), math.nan, math.nan, math.nan
        blo = bhi = math.nan
        if n_boot:
            if rng is None:
                raise ValueError("n_boot > 0 needs rng (a numpy Generator)")
            if int(n_boot) < 100:
                raise ValueError(f"n_boot must be >= 100, got {n_boot}")
            # one cluster: every resample is the log itself; cluster_bootstrap_ratio refuses it (InputError)
            reps = self.bootstrap_estimates(data, [target], rw, n_boot, rng) if clusters >= 2 else None
            if reps is None:
                b = cluster_bootstrap_ratio(num_u, den_u, n_boot, rng, alpha=alpha)
                blo, bhi = b.ci_low + rw.offset, b.ci_high + rw.offset
            else:
                blo, bhi = (float(v) + rw.offset for v in np.quantile(reps[:, 0], [alpha / 2, 1 - alpha / 2]))
        diag = self.diagnostics(data, target, terms)
        if self.chooses_from_log and not n_boot:  # the CLT interval alone: say what it leaves out
            diag.notes["warnings"] = [*diag.notes.get("warnings", []), CHOICE_HELD_FIXED]
        return OffPolicyEstimate(
            self.name, getattr(target, "name", "target"), rw.name, value + rw.offset, se,
            lo + rw.offset, hi + rw.offset, blo, bhi, float(alpha), data.n, clusters, self.assumption, diag,
        )

    @property
    def chooses_from_log(self) -> bool:
        """Whether the terms come from a choice made on the whole log (adaptive IPS's data-driven behaviours):
        the CLT interval then holds the choice fixed and covers below the nominal level, and
        :meth:`bootstrap_estimates` makes the choice again in every resample. False by default."""
        return False

    def clt_holds_fixed(self, reward: Reward) -> str | None:
        """What this estimator's CLT interval holds fixed that the estimate itself takes from the log (its
        :meth:`bootstrap_estimates` does it again in every resample), or ``None``: adaptive IPS's data-driven choice
        of behaviours here; the direct method adds its click model fitted on the log."""
        return "the data-driven choice of behaviours" if self.chooses_from_log else None

    def bootstrap_estimates(self, data: LoggedData, targets: list[Target], reward: Reward | str, n_boot: int,
                            rng: np.random.Generator) -> FloatArray | None:
        """``(n_boot, len(targets))`` cluster-bootstrap estimates (without the reward's offset) for an estimator
        whose terms depend on the whole log (adaptive IPS's data-driven choice: each resample runs it again);
        ``None`` (default): the terms are fixed per row and the callers resample their per-cluster sums."""
        return None

    def terms(self, data: LoggedData, target: Target, reward: Reward | str = "clicks_per_query") -> Terms:
        """Validated per-impression terms (the hook's output, checked for shape)."""
        rw = self._reward(reward, data.k)
        data.require(*self.needs, estimator=self.name)
        t = self._terms(data, target, rw)
        if t.num.shape != (data.n,) or (t.den is not None and t.den.shape != (data.n,)):
            raise RuntimeError(f"estimator {self.name!r} returned terms of the wrong shape")
        return t

    def _reward(self, reward: Reward | str, k: int) -> Reward:
        rw = get_reward(reward, k) if isinstance(reward, str) else reward
        if rw.kind not in self.rewards:
            raise ConfigError(
                ("reward",),
                f"estimator {self.name!r} cannot estimate {rw.name!r} ({rw.kind} rewards); it supports "
                + ", ".join(self.rewards) + " rewards",
            )
        return rw

    @staticmethod
    def _cluster_sums(data: LoggedData, terms: Terms) -> tuple[FloatArray, FloatArray, int]:
        if data.user is None:
            return terms.num, (np.ones(data.n) if terms.den is None else terms.den), data.n
        inv, g = data.user_groups
        if terms.den is None:  # each cluster's impression count, the same for every estimate of the log
            den_u = data.cached("cluster_sizes", lambda: np.bincount(inv, np.ones(data.n), g))
        else:
            den_u = np.bincount(inv, terms.den, g)
        return np.bincount(inv, terms.num, g), den_u, g

    def diagnostics(self, data: LoggedData, target: Target, terms: Terms) -> Diagnostics:
        """Weight diagnostics and support violations (see :class:`Diagnostics`)."""
        ess = mx = top = zero = math.nan
        if terms.weights is not None:
            w = np.asarray(terms.weights, dtype=np.float64)
            if is_frozen(w):  # a log's own weight array (shared by estimators): its statistics once
                key = ("weight_stats", id(w))
                hit = data.cached(key, lambda: (w, weight_statistics(w, data.valid, data.all_valid)), target=target)
                if hit[0] is not w:  # cannot happen while the entry holds w; recomputed for safety
                    hit = (w, weight_statistics(w, data.valid, data.all_valid))
                ess, mx, top, zero = hit[1]
            else:
                ess, mx, top, zero = weight_statistics(w, data.valid, data.all_valid)
        violations, checked = support_violations(data, target, self.support_level)
        level, per, mean, mean_se = None, math.nan, math.nan, math.nan
        if terms.weights is not None:
            w = np.asarray(terms.weights, dtype=np.float64)
            if is_frozen(w):  # a log's own weight array (shared by estimators): its mean once
                hit = data.cached(("mean_weight", id(w)), lambda: (w, mean_weight(data, w)), target=target)
                level, per, mean, mean_se = hit[1] if hit[0] is w else mean_weight(data, w)
            else:
                level, per, mean, mean_se = mean_weight(data, w)
        return Diagnostics(ess, mx, top, zero, violations, checked, dict(terms.notes), level, per, mean, mean_se,
                           self.weights_expectation if level is not None else None)

    #: the expectation of each importance weight under the logging policy with full support (1 for weights that are
    #: ratios pi/mu of the target's and the logger's probabilities of the same event), ``None`` when it has no known
    #: value (clipped weights, PBM-IPS's click-propensity ratios): :class:`Diagnostics` checks the mean weight
    #: against it
    weights_expectation: ClassVar[float | None] = None

    def logger_needs(self) -> tuple[str, ...]:
        """Methods of the logging policy (``data.logger``, a :class:`PropensityModel`) this estimator, with its
        options, cannot run without, e.g. the pseudoinverse's ``pair_marginals``; ``()`` (default): recorded
        propensities (:attr:`needs`) suffice."""
        return ()

    #: which propensity the support check uses: "list", "prefix", "item" or "any" (the
    #: target's documents must be showable somewhere in the top k: PBM-IPS, DM)
    support_level: ClassVar[str] = "item"

    @abstractmethod
    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        """Per-impression terms for validated ``data`` and a supported ``reward``."""


# ------------------------------------------------------------------------------ registry
_REGISTRY: dict[str, type[Estimator]] = {}
E = TypeVar("E", bound=type[Estimator])


def register_estimator(cls: E) -> E:
    """Class decorator: register ``cls`` under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no registry name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"estimator name {cls.name!r} is already registered by {_REGISTRY[cls.name].__name__}")
    _REGISTRY[cls.name] = cls
    return cls


def available_estimators() -> tuple[str, ...]:
    """Names of all registered estimators, sorted."""
    return tuple(sorted(_REGISTRY))


def estimator_class(name: str) -> type[Estimator]:
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ConfigError(("estimator",), f"unknown estimator {name!r}; allowed: " + ", ".join(available_estimators()))
    return _REGISTRY[name]


def get_estimator(name: str, **options: Any) -> Estimator:
    """Build the estimator ``name`` with its options (``ConfigError`` naming unknown options)."""
    cls = estimator_class(name)
    allowed = {f.name for f in fields(cls)}
    for key in options:
        if key not in allowed:
            raise ConfigError(("estimator", key), f"unknown option for {name!r}; allowed: "
                              + (", ".join(sorted(allowed)) or "none"))
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(("estimator",), f"{name}: {exc}") from None
