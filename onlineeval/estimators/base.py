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
impressions otherwise; :func:`onlineeval.stats.ratio_mean`; t quantiles with Bell and McCaffrey's degrees of
freedom, G - 1 for G clusters of equal weight: the rules of
:mod:`~onlineeval.estimators.intervals`), an optional seeded
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

Modules
-------
This module holds :class:`Estimator` and the registry; the rest of the contract lives in
:mod:`~onlineeval.estimators.logs` (:class:`LoggedData`), :mod:`~onlineeval.estimators.targets`
(:class:`Propensities`, :class:`PropensityModel`, :class:`Target`, :class:`DeterministicTarget`),
:mod:`~onlineeval.estimators.results` (:class:`Terms`, :class:`OffPolicyEstimate`) and
:mod:`~onlineeval.estimators._arrays` (array helpers), and is re-exported here: every name is
imported from this module as before.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, TypeVar

import numpy as np

from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.estimators._arrays import (  # noqa: F401  (re-exported: their home was this module)
    BoolArray,
    FloatArray,
    IntArray,
    _carry_last,
    _matrix,
    _readonly_float,
    _unique_inverse,
)
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
    cluster_ess,
    mean_weight,
    support_violations,
)
from onlineeval.estimators.intervals import (BOOTSTRAP_SE, DELTA_SE, FEW_CLUSTERS, clt_interval, effective_clusters,
                                             estimate_df, influence_skewness)
from onlineeval.estimators.logs import LoggedData, _propensity, _reward_key  # noqa: F401  (re-exported)
from onlineeval.estimators.results import OffPolicyEstimate, Terms
from onlineeval.estimators.rewards import REWARDS, Reward, first_click, get_reward
from onlineeval.estimators.targets import DeterministicTarget, Propensities, PropensityModel, Target

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

#: ``report(what, done, total)``, called after each resample by the bootstraps that fit a model again on every
#: resample (the direct method's: seconds to minutes on large logs); ``None`` (default): nothing reported. The
#: estimate command sets it to a progress line on stderr.
BOOTSTRAP_PROGRESS: ContextVar[Callable[[str, int, int], None] | None] = ContextVar("bootstrap_progress",
                                                                                     default=None)


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

    def bias_families(self) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
        """``(unbiased_under, biased_under)`` of this instance: the class's declarations, which the conformance suite
        checks on its instances; an estimator whose assumption an option changes (the direct method's click model)
        gives its own (:func:`onlineeval.estimators.bias_advice.metric_bias_warning` reads these)."""
        return self.unbiased_under, self.biased_under

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
        boot_reps: np.ndarray | None = None,
    ) -> OffPolicyEstimate:
        """Estimate ``target``'s value of ``reward`` from ``data``.

        The CLT interval is ``value -+ t_df(1 - alpha/2) x se`` with ``se`` the delta method's over clusters (users;
        impressions without user ids) and ``df`` Bell and McCaffrey's degrees of freedom of that variance (``G - 1``
        for ``G`` clusters of equal weight, fewer where a few hold the weight; ``df`` of the result;
        :mod:`~onlineeval.estimators.intervals`). ``n_boot``
        > 0 adds a cluster-bootstrap percentile interval (needs ``rng``); for an estimator whose delta method holds
        a data-driven choice fixed (:meth:`clt_holds_fixed`) and that makes it again in every resample
        (:meth:`bootstrap_estimates`), the SD of the bootstrap's estimates is then ``se`` (``se_source``) and the
        CLT interval is built from it. ``boot_reps`` ``(n_boot,)``: those estimates computed by the caller (without
        the reward's offset), instead of :meth:`bootstrap_estimates` (a refitting estimator's resamples, fitted once
        for every target: :func:`onlineeval.estimators.log_estimates.estimate_targets`). The result's
        :meth:`~OffPolicyEstimate.warnings` say when the interval rests on fewer than 30 effective clusters or on a
        standard error holding a choice fixed.
        Raises :class:`InputError` when a needed propensity is missing, the reward kind is
        not supported, or the estimate is undefined (e.g. no positive weight).
        """
        from onlineeval.estimators.assumption_check import assumption_check
        from onlineeval.stats import cluster_bootstrap_ratio, ratio_mean

        rw = self._reward(reward, data.k)
        terms = self.terms(data, target, rw)
        num_u, den_u, clusters = self._cluster_sums(data, terms)
        check_cluster_sums(self.name, num_u, den_u, data.source)
        if den_u.sum() <= 0:
            raise InputError(
                f"estimator {self.name!r}: undefined, the log gives the target no positive weight "
                "(no logged impression agrees with the target where this estimator needs it)",
                data.source,
            )
        # fewer than two clusters carrying weight, or a delta-method se of exactly 0 (every weighted impression with
        # the same reward: one matched impression without clicks): an interval of zero width would claim certainty,
        # so the se and both intervals are undefined (NaN; OffPolicyEstimate.warnings says why), as for differences
        # (weighted estimators only: a direct method's constant prediction has a delta se of 0 and its uncertainty
        # in the model fit, which its bootstrap resamples)
        weighted = terms.weights is not None
        degenerate = weighted and clusters >= 2 and _weighted_clusters(data, terms) < 2
        if clusters >= 2:
            est = ratio_mean(num_u, den_u, alpha=alpha)
            value, se, lo, hi = est.estimate, est.se, est.ci_low, est.ci_high
            if degenerate or (weighted and se == 0):
                degenerate, se, lo, hi = True, math.nan, math.nan, math.nan
        else:
            value, se, lo, hi = float(num_u.sum() / den_u.sum()), math.nan, math.nan, math.nan
        fixed = self.clt_holds_fixed(rw)
        delta_se, se_source = se, DELTA_SE
        blo = bhi = math.nan
        if n_boot and not degenerate:
            if rng is None and (boot_reps is None or clusters < 2):
                raise ValueError("n_boot > 0 needs rng (a numpy Generator)")
            if int(n_boot) < 100:
                raise ValueError(f"n_boot must be >= 100, got {n_boot}")
            # one cluster: every resample is the log itself; cluster_bootstrap_ratio refuses it (InputError)
            if clusters < 2:
                reps = None
            elif boot_reps is not None:  # the caller's resamples (a refitting estimator's, shared by targets)
                reps = np.asarray(boot_reps, dtype=np.float64).reshape(int(n_boot), 1)
            else:
                reps = self.bootstrap_estimates(data, [target], rw, n_boot, rng)
            if reps is None:
                b = cluster_bootstrap_ratio(num_u, den_u, n_boot, rng, alpha=alpha)
                blo, bhi = b.ci_low + rw.offset, b.ci_high + rw.offset
            else:
                blo, bhi = (float(v) + rw.offset for v in np.quantile(reps[:, 0], [alpha / 2, 1 - alpha / 2]))
                if fixed is not None:  # the delta method holds the choice fixed: the bootstrap's SD is the se
                    se, se_source = float(np.std(reps[:, 0], ddof=1)), BOOTSTRAP_SE
        if math.isfinite(se):  # checks that need the value and its se (a DR fitted on the log it corrects)
            extra = self.value_checks(data, target, rw, value, se, terms)
            checked = assumption_check(self, data, target, rw, terms)  # a stronger assumption against rips's
            more = checked.pop("warnings", [])
            extra = {**extra, **checked, **({"warnings": [*extra.get("warnings", []), *more]} if more else {})}
            if extra:
                warned = [*terms.notes.get("warnings", []), *extra.pop("warnings", [])]
                terms = replace(terms, notes={**terms.notes, **extra, **({"warnings": warned} if warned else {})})
        value += rw.offset
        # the interval's degrees of freedom; none where the interval is undefined
        df = estimate_df(data, terms.weights, den_u) if clusters >= 2 and math.isfinite(se) else math.nan
        skewness = math.nan
        if math.isfinite(se):
            lo, hi = clt_interval(value, se, df=df, alpha=alpha)
            skewness = influence_skewness(num_u - (value - rw.offset) * den_u)
        else:
            lo, hi = lo + rw.offset, hi + rw.offset
        return OffPolicyEstimate(
            self.name, getattr(target, "name", "target"), rw.name, value, se, lo, hi, blo, bhi, float(alpha), data.n,
            clusters, self.assumption, self.diagnostics(data, target, terms), se_source, delta_se, fixed, int(n_boot),
            effective_clusters(data)[1], df, skewness,
        )

    @property
    def chooses_from_log(self) -> bool:
        """Whether the terms come from a choice made on the whole log (adaptive IPS's data-driven behaviours):
        the CLT interval then holds the choice fixed and covers below the nominal level, and
        :meth:`bootstrap_estimates` makes the choice again in every resample. False by default."""
        return False

    def value_checks(self, data: LoggedData, target: Target, reward: Reward, value: float,
                     se: float, terms: Terms) -> dict[str, Any]:
        """Notes from checks that need the estimate's ``value`` (without the reward's offset), its standard error
        ``se`` (finite) and its ``terms``, merged into the estimate's diagnostics; warnings under ``"warnings"``.
        None by default (:meth:`estimate` only: the simulator's designs measure bias against the exact truth
        instead); a doubly robust estimator fitted on the log it corrects compares its value with the cross-fitted
        one (:meth:`~onlineeval.estimators.model_based.ClickModelEstimator.value_checks`), the direct method with
        ``dr``'s (:mod:`~onlineeval.estimators.dm_dr_check`)."""
        return {}

    def clt_holds_fixed(self, reward: Reward) -> str | None:
        """What this estimator's CLT interval holds fixed that the estimate itself takes from the log (its
        :meth:`bootstrap_estimates` does it again in every resample), or ``None``: adaptive IPS's data-driven choice
        of behaviours here; the direct method adds its click model fitted on the log."""
        from onlineeval.estimators.intervals import CHOICE_HELD

        return CHOICE_HELD if self.chooses_from_log else None

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
        level, per, mean, mean_se, users = None, math.nan, math.nan, math.nan, math.nan
        if terms.weights is not None:
            w = np.asarray(terms.weights, dtype=np.float64)
            if is_frozen(w):  # a log's own weight array (shared by estimators): its mean once
                hit = data.cached(("mean_weight", id(w)), lambda: (w, mean_weight(data, w), cluster_ess(data, w)),
                                  target=target)
                (level, per, mean, mean_se), users = hit[1:] if hit[0] is w else (mean_weight(data, w),
                                                                                 cluster_ess(data, w))
            else:
                level, per, mean, mean_se = mean_weight(data, w)
                users = cluster_ess(data, w)
        if effective_clusters(data)[1] < FEW_CLUSTERS:  # the log itself has few users: its own warning says so
            users = math.nan
        return Diagnostics(ess, mx, top, zero, violations, checked, dict(terms.notes), level, per, mean, mean_se,
                           self.weights_expectation if level is not None else None, users)

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


#: The largest per-cluster sum of an estimator's terms that its variance can square and sum in float64 (about
#: 1.8e308) for up to 10^28 clusters. The log's importance weights stop at
#: :data:`~onlineeval.estimators.logs.MAX_WEIGHT` (1e100); an estimator's own terms (a tiny examination probability,
#: a reward model's prediction) may go beyond.
MAX_CLUSTER_SUM = 1e140


def check_cluster_sums(name: str, num: FloatArray, den: FloatArray, source: str | None, what: str = "") -> None:
    """Refuse per-cluster sums of an estimator's terms (``num``, ``den``) that are not finite or beyond
    :data:`MAX_CLUSTER_SUM` in size: its value or variance would be NaN or infinite, reported as an undefined
    standard error for another reason. ``what`` names the target (`` for 'B'``)."""
    hi = max(float(np.max(np.abs(num), initial=0.0)), float(np.max(np.abs(den), initial=0.0)))
    if hi <= MAX_CLUSTER_SUM:
        return
    size = "are not finite" if not math.isfinite(hi) else f"reach {hi:.3g}, beyond {MAX_CLUSTER_SUM:.0e}"
    raise InputError(f"estimator {name!r}: undefined{what}: its terms summed per cluster {size}, where float64 "
                     "cannot hold their variance (a weight, an examination or click probability near 0, or a "
                     "reward model's prediction out of range)", source)


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
        raise ConfigError(("estimator",), must_be_one_of(available_estimators(), name))
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


def _weighted_clusters(data: LoggedData, terms: Terms) -> int:
    """How many clusters (users; impressions without user ids) hold an impression with a non-zero weight or a non-zero
    term (``terms``; a model-based estimator's terms are its model's prediction wherever the weights are 0); 2 when
    the estimator has no weights (the standard error alone decides)."""
    if terms.weights is None:
        return 2 if data.n >= 2 else data.n
    w = np.asarray(terms.weights)
    rows = np.flatnonzero(w.reshape(w.shape[0], -1).any(axis=1) | (np.asarray(terms.num) != 0))
    if data.user is None:
        return int(rows.size)
    inv, g = data.user_groups  # np.unique's inverse, computed once per log
    return int(np.count_nonzero(np.bincount(inv[rows], minlength=g)))
