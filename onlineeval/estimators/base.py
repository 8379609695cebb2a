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
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import ConfigError, InputError

__all__ = [
    "LoggedData",
    "Reward",
    "REWARDS",
    "get_reward",
    "Target",
    "DeterministicTarget",
    "PropensityModel",
    "Propensities",
    "Terms",
    "Diagnostics",
    "OffPolicyEstimate",
    "Estimator",
    "register_estimator",
    "available_estimators",
    "estimator_class",
    "get_estimator",
    "first_click",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


# ------------------------------------------------------------------------------ rewards
def first_click(clicks: NDArray[np.bool_]) -> FloatArray:
    """``(n, k)`` float indicator of the first clicked slot of each impression."""
    c = np.asarray(clicks, dtype=bool)
    before = np.cumsum(c, axis=1) - c  # clicks strictly above slot j
    return (c & (before == 0)).astype(np.float64)


@dataclass(frozen=True, eq=False)
class Reward:
    r"""An online metric as ``offset + sum_j slot_rewards(clicks)[:, j]``.

    Attributes
    ----------
    name:
        ``clicks_per_query``, ``reciprocal_rank``, ``abandonment`` or a user-given name.
    kind:
        ``"additive"``: :math:`r_j = w_j c_j` (each slot's reward depends on its own click
        only); ``"first_click"``: :math:`r_j = w_j f_j` with :math:`f_j` the first-click
        indicator (depends on the clicks above ``j``, so on the documents above it).
    weights:
        ``(k,)`` position weights :math:`w_j`, or ``None`` for all ones (any ``k``).
    offset:
        The constant :math:`c_0`.
    """

    name: str
    kind: str = "additive"
    weights: FloatArray | None = None
    offset: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("additive", "first_click"):
            raise ConfigError(("reward", "kind"), f"must be 'additive' or 'first_click', got {self.kind!r}")
        if self.weights is not None:
            w = np.array(self.weights, dtype=np.float64, copy=True)
            if w.ndim != 1 or not np.all(np.isfinite(w)):
                raise ConfigError(("reward", "weights"), "must be a 1-d array of finite numbers")
            w.setflags(write=False)
            object.__setattr__(self, "weights", w)

    def position_weights(self, k: int) -> FloatArray:
        """``(k,)`` weights for lists of ``k`` slots."""
        if self.weights is None:
            return np.ones(k)
        if self.weights.size < k:
            raise InputError(f"reward {self.name!r} has {self.weights.size} position weights, lists have {k} slots")
        return np.asarray(self.weights[:k], dtype=np.float64)

    def slot_rewards(self, clicks: ArrayLike) -> FloatArray:
        """``(n, k)`` per-slot rewards of observed clicks (empty slots give 0)."""
        c = np.asarray(clicks, dtype=bool)
        w = self.position_weights(c.shape[1])
        base = c.astype(np.float64) if self.kind == "additive" else first_click(c)
        return base * w[None, :]

    def value(self, clicks: ArrayLike) -> FloatArray:
        """``(n,)`` the metric of each impression: ``offset + slot_rewards.sum(1)``."""
        return self.offset + self.slot_rewards(clicks).sum(axis=1)

    @property
    def bounds_per_slot(self) -> tuple[float, float]:
        """Range of one slot's reward (for the SN-bounded checks)."""
        w = np.asarray(self.weights) if self.weights is not None else np.ones(1)
        return float(min(0.0, w.min())), float(max(0.0, w.max()))

    def describe(self) -> str:
        w = "1" if self.weights is None else "w_j (" + ", ".join(f"{x:g}" for x in self.weights[:4]) + ", ...)"
        base = "c_j" if self.kind == "additive" else "f_j (first click)"
        off = f"{self.offset:g} + " if self.offset else ""
        return f"{self.name}: {off}sum_j {w} * {base}"


REWARDS: dict[str, Callable[[int], Reward]] = {
    "clicks_per_query": lambda k: Reward("clicks_per_query", "additive"),
    "reciprocal_rank": lambda k: Reward("reciprocal_rank", "first_click", 1.0 / np.arange(1, k + 1)),
    "abandonment": lambda k: Reward("abandonment", "first_click", -np.ones(k), offset=1.0),
}


def get_reward(name: str, k: int) -> Reward:
    """The built-in reward ``name`` for lists of ``k`` slots (``ConfigError`` listing the names)."""
    if name not in REWARDS:
        raise ConfigError(("reward",), f"unknown reward {name!r}; allowed: {', '.join(REWARDS)}")
    return REWARDS[name](k)


# --------------------------------------------------------------------------------- logs
def _matrix(x: Any, name: str, dtype: Any, shape: tuple[int, ...] | None = None) -> NDArray[Any]:
    try:
        arr = np.array(x, dtype=dtype, copy=True)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{name}: expected numbers of dtype {np.dtype(dtype).name}") from None
    if shape is not None and arr.shape != shape:
        raise InputError(f"{name}: expected shape {shape}, got {arr.shape}")
    arr.setflags(write=False)
    return arr


def _propensity(x: Any, name: str, shape: tuple[int, ...]) -> FloatArray | None:
    if x is None:
        return None
    arr = _matrix(x, name, np.float64, shape)
    bad = ~np.isfinite(arr) | (arr <= 0.0) | (arr > 1.0 + 1e-12)
    if bad.any():
        idx = np.argwhere(bad)[0]
        raise InputError(f"{name}: propensities must be in (0, 1], found {arr[tuple(idx)]!r} at impression {int(idx[0])}")
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
        if clicks.dtype != bool:
            if not np.all(np.isin(clicks, (0, 1))):
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
        _, inv = np.unique(self.user, return_inverse=True)
        return inv.astype(np.int64, copy=False), int(inv.max()) + 1

    @functools.cached_property
    def query_groups(self) -> tuple[IntArray, IntArray]:
        """``(distinct queries, index of each impression's query among them)``, computed once."""
        uq, inv = np.unique(self.query, return_inverse=True)
        return uq, inv.astype(np.int64, copy=False)

    @property
    def n(self) -> int:
        return int(self.shown.shape[0])

    @property
    def k(self) -> int:
        return int(self.shown.shape[1])

    @property
    def valid(self) -> BoolArray:
        return self.shown >= 0

    def take(self, rows: ArrayLike) -> LoggedData:
        """The sub-log of ``rows`` (an index array or boolean mask), same logger."""
        idx = np.asarray(rows)
        opt = {
            name: (None if getattr(self, name) is None else getattr(self, name)[idx])
            for name in ("p_list", "p_prefix", "p_item", "user", "user_type", "features")
        }
        return LoggedData(self.query[idx], self.shown[idx], self.clicks[idx], logger=self.logger,
                          source=self.source, **opt)

    def require(self, *names: str, estimator: str = "") -> None:
        """Raise :class:`InputError` when a propensity an estimator needs is missing."""
        missing = [nm for nm in names if getattr(self, nm) is None]
        if missing:
            who = f"estimator {estimator!r} " if estimator else ""
            raise InputError(f"{who}needs logging propensities {', '.join(missing)}; the log does not carry them",
                             self.source)


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
        if q.size and (q.min() < 0 or q.max() >= self.lists.shape[0]):
            raise InputError(f"target {self.name!r}: query index outside 0..{self.lists.shape[0] - 1}")
        return self.lists[q]

    def propensities(self, query: IntArray, rankings: IntArray) -> Propensities:
        r = np.asarray(rankings, dtype=np.int64)
        t = self.rankings(query)
        k = r.shape[1]
        if t.shape[1] < k:
            t = np.concatenate([t, np.full((t.shape[0], k - t.shape[1]), -1, dtype=np.int64)], axis=1)
        same = t[:, :k] == r
        item = same.astype(np.float64)
        prefix = np.cumprod(same, axis=1).astype(np.float64)
        return Propensities(prefix[:, -1].copy(), prefix, item)


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
class Diagnostics:
    """Weight diagnostics of one estimate.

    ``ess``: effective sample size :math:`(\\sum w)^2/\\sum w^2` of the (flattened,
    non-empty-slot) weights; ``max_weight``; ``top1_share``: share of the total weight
    held by the largest 1% of weights; ``zero_weight_share``: share of impressions whose
    weights are all 0 (the log says nothing about the target there);
    ``support_violations``: impressions where the target shows something the logger
    could never show (``None``: unknown, no logger given); ``notes``: the estimator's own
    (a list of strings under ``notes["warnings"]`` is passed on by :meth:`warnings`).
    """

    ess: float
    max_weight: float
    top1_share: float
    zero_weight_share: float
    support_violations: int | None
    support_checked: int
    notes: dict[str, Any] = field(default_factory=dict)

    def warnings(self) -> list[str]:
        out = []
        if self.support_violations:
            out.append(
                f"support violated on {self.support_violations} of {self.support_checked} impressions: the target "
                "shows documents at positions the logging policy never uses, so the estimate is biased there"
            )
        if self.ess < 100 and self.ess == self.ess:
            out.append(f"effective sample size {self.ess:.1f} (< 100): the interval is unreliable")
        extra = self.notes.get("warnings")
        if isinstance(extra, (list, tuple)):
            out.extend(str(w) for w in extra)
        return out


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
            b = cluster_bootstrap_ratio(num_u, den_u, n_boot, rng, alpha=alpha)
            blo, bhi = b.ci_low + rw.offset, b.ci_high + rw.offset
        diag = self.diagnostics(data, target, terms)
        return OffPolicyEstimate(
            self.name, getattr(target, "name", "target"), rw.name, value + rw.offset, se,
            lo + rw.offset, hi + rw.offset, blo, bhi, float(alpha), data.n, clusters, self.assumption, diag,
        )

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
        den = np.ones(data.n) if terms.den is None else terms.den
        if data.user is None:
            return terms.num, den, data.n
        inv, g = data.user_groups
        return np.bincount(inv, terms.num, g), np.bincount(inv, den, g), g

    def diagnostics(self, data: LoggedData, target: Target, terms: Terms) -> Diagnostics:
        """Weight diagnostics and support violations (see :class:`Diagnostics`)."""
        ess = mx = top = zero = math.nan
        if terms.weights is not None:
            w = np.asarray(terms.weights, dtype=np.float64)
            flat = w[data.valid] if w.ndim == 2 else w
            if flat.size:
                s, s2 = flat.sum(), np.square(flat).sum()
                ess = float(s * s / s2) if s2 > 0 else 0.0
                mx = float(flat.max())
                k = max(1, int(math.ceil(0.01 * flat.size)))
                # the largest 1% of the weights: only positive weights can be among them with a
                # positive share (most slot weights of a deterministic target are 0), so partition those
                pos = flat[flat > 0]
                if s <= 0:
                    top = math.nan
                elif pos.size >= k:
                    top = float(_top_k_sum(pos, k) / s)
                else:  # fewer positive weights than 1%: the rest of the top 1% are zeros, then negatives
                    rest = k - pos.size - int(np.count_nonzero(flat == 0))
                    neg = np.sort(flat[flat < 0])[-rest:].sum() if rest > 0 else 0.0
                    top = float((pos.sum() + neg) / s)
            row = w if w.ndim == 1 else np.where(data.valid, w, 0.0).sum(axis=1)
            zero = float(np.mean(row == 0))
        violations, checked = support_violations(data, target, self.support_level)
        return Diagnostics(ess, mx, top, zero, violations, checked, dict(terms.notes))

    #: which propensity the support check uses: "list", "prefix", "item" or "any" (the
    #: target's documents must be showable somewhere in the top k: PBM-IPS, DM)
    support_level: ClassVar[str] = "item"

    @abstractmethod
    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        """Per-impression terms for validated ``data`` and a supported ``reward``."""


def _top_k_sum(values: FloatArray, k: int) -> float:
    """Exact sum of the ``k`` largest ``values`` in linear time.

    ``np.partition`` of millions of slot weights can take a second (introselect meets its bad
    cases on such data), so for large inputs the ``k``-th largest value is bracketed between
    two values ``a <= t < b`` of an evenly spaced subsample by counting (a bisection over the
    sorted subsample); the sum is every value ``>= b`` plus the largest of the few values in
    ``[a, b)``.
    """
    n = values.size
    if n <= 400_000:
        return float(np.partition(values, n - k)[n - k:].sum())
    sample = np.unique(values[:: max(1, n // 100_000)])
    lo, hi = 0, sample.size  # invariant: count(values >= sample[lo]) >= k (lo = 0: the minimum); hi: < k
    if np.count_nonzero(values >= sample[0]) < k:  # cannot happen (sample[0] >= min), kept for safety
        return float(np.partition(values, n - k)[n - k:].sum())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if np.count_nonzero(values >= sample[mid]) >= k:
            lo = mid
        else:
            hi = mid
    a = sample[lo]
    above = values[values >= sample[hi]] if hi < sample.size else values[:0]
    between = values[(values >= a) & ((values < sample[hi]) if hi < sample.size else True)]
    need = k - above.size  # 1 <= need <= between.size
    return float(above.sum() + np.partition(between, between.size - need)[between.size - need:].sum())


def support_violations(data: LoggedData, target: Target, level: str) -> tuple[int | None, int]:
    """Impressions (distinct queries weighted by their count) where the target's list has
    an event of logging probability 0 at ``level``; ``(None, 0)`` without a logger."""
    if data.logger is None or not hasattr(target, "rankings"):
        return None, 0
    uq, inv = data.query_groups
    t = np.asarray(target.rankings(uq), dtype=np.int64)[:, : data.k]
    p = data.logger.propensities(uq, t)
    valid = t >= 0
    if level == "list":
        bad = p.list <= 0
    elif level == "prefix":
        bad = (np.where(valid, p.prefix, 1.0) <= 0).any(axis=1)
    elif level == "any":
        # every target document must have a positive probability of being shown at some slot
        shown_anywhere = getattr(data.logger, "shown_probability", None)
        if shown_anywhere is None:
            return None, 0
        bad = (np.where(valid, np.asarray(shown_anywhere(uq, t)), 1.0) <= 0).any(axis=1)
    else:
        bad = (np.where(valid, p.item, 1.0) <= 0).any(axis=1)
    counts = np.bincount(inv, minlength=uq.size)
    return int(counts[bad].sum()), data.n


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
