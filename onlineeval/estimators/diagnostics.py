"""An off-policy estimate's diagnostics: the weights' statistics and warnings (:class:`Diagnostics`), the mean
importance weight with its standard error (:func:`mean_weight`) and the support check (:func:`support_violations`).

Moved out of :mod:`onlineeval.estimators.base` (which re-exports them): the estimators compute these through
:meth:`~onlineeval.estimators.base.Estimator.diagnostics`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from onlineeval.estimators.derived import row_sum

if TYPE_CHECKING:
    from onlineeval.estimators.base import FloatArray, LoggedData, Target

__all__ = ["FEW_WEIGHTED_CLUSTERS", "MEAN_WEIGHT_TOLERANCE", "MEAN_WEIGHT_Z", "Diagnostics", "cluster_ess",
           "mean_weight", "support_violations"]


@dataclass(frozen=True)
class Diagnostics:
    """Weight diagnostics of one estimate.

    ``ess``: effective sample size :math:`(\\sum w)^2/\\sum w^2` of the (flattened,
    non-empty-slot) weights: for slot-level weights a count of *slots*, which can exceed the
    number of impressions; ``max_weight``; ``top1_share``: share of the total weight
    held by the largest 1% of weights; ``zero_weight_share``: share of impressions whose
    weights are all 0 (the log says nothing about the target there);
    ``support_violations``: impressions where the target shows something the logger
    could never show (``None``: unknown, no logger given); ``notes``: the estimator's own
    (a list of strings under ``notes["warnings"]`` is passed on by :meth:`warnings`).

    ``weight_level``: ``"list"`` (one weight per impression), ``"slot"`` (one per shown slot)
    or ``None`` (no weights); ``weights_per_impression``: the mean number of weights per
    impression (1 for list weights, the mean number of shown slots for slot weights);
    :attr:`ess_impressions` = ``ess / weights_per_impression`` is the ESS in impressions
    (at most the number of impressions; the ``< 100`` warning reads it).

    ``mean_weight``: the mean importance weight, :math:`\\sum_i w_i / n` for list weights and
    :math:`\\sum_{ij} w_{ij} / \\#\\{\\text{shown slots}\\}` (the mean over shown slots) for slot
    weights, with ``mean_weight_se`` its delta-method standard error over clusters (users, or
    impressions without user ids; NaN with one cluster). ``mean_weight_expected`` is its
    expectation under the logging policy when the estimator's weights are ratios
    :math:`\\pi/\\mu` of the target's and the logger's probabilities (1: a list weight's
    expectation is :math:`\\sum_{\\mathbf s:\\,\\mu(\\mathbf s)>0} \\pi(\\mathbf s) = 1` under full
    support; a slot weight's, for a slot the target fills, :math:`\\sum_d \\pi(d \\text{ at } j) = 1`,
    so the mean over shown slots has expectation 1 when each query's lists always show the
    slots the target fills), ``None`` when it has no known value (clipped weights,
    PBM-IPS's click-propensity ratios). :meth:`warnings` flags a mean weight more than
    :data:`MEAN_WEIGHT_Z` of its standard errors (and more than :data:`MEAN_WEIGHT_TOLERANCE` of the
    expectation) from the expectation: the target leaves
    the logger's support, the propensities are wrong, or the sample has not yet seen the
    large weights the expectation rests on (the self-normalisation check).
    """

    ess: float
    max_weight: float
    top1_share: float
    zero_weight_share: float
    support_violations: int | None
    support_checked: int
    notes: dict[str, Any] = field(default_factory=dict)
    weight_level: str | None = None
    weights_per_impression: float = math.nan
    mean_weight: float = math.nan
    mean_weight_se: float = math.nan
    mean_weight_expected: float | None = None
    #: the weights' effective number of clusters (users): :math:`(\sum_u W_u)^2 / \sum_u W_u^2` with :math:`W_u`
    #: user u's total absolute weight (:func:`cluster_ess`); NaN without user ids (clusters are impressions: ``ess``)
    #: and in a log with fewer than ``intervals.FEW_CLUSTERS`` effective users (the log's own warning says so)
    ess_clusters: float = math.nan

    @property
    def ess_impressions(self) -> float:
        """The ESS in impressions: ``ess`` for list weights, ``ess / weights_per_impression`` for
        slot weights (NaN without weights)."""
        if self.weight_level == "slot" and self.weights_per_impression > 0:
            return self.ess / self.weights_per_impression
        return self.ess

    def mean_weight_off(self) -> bool:
        """Whether the mean weight is more than :data:`MEAN_WEIGHT_Z` standard errors and more than
        :data:`MEAN_WEIGHT_TOLERANCE` (relative) from its expectation (never when the expectation is unknown or
        the standard error is NaN). The tolerance keeps a log whose weights hardly vary (standard error near 0)
        from warning of a deviation that changes no estimate by more than 5%: IPS = SNIPS x the mean weight."""
        if self.mean_weight_expected is None or not math.isfinite(self.mean_weight_se):
            return False
        off = abs(self.mean_weight - self.mean_weight_expected)
        return off > MEAN_WEIGHT_Z * self.mean_weight_se and off > MEAN_WEIGHT_TOLERANCE * self.mean_weight_expected

    def warnings(self) -> list[str]:
        out = []
        if self.support_violations:
            out.append(
                f"support violated on {self.support_violations} of {self.support_checked} impressions: the target "
                "shows documents at positions the logging policy never uses, so the estimate is biased there"
            )
        ess = self.ess_impressions
        # (an ESS of 100 computed as 99.99999999999 by the rounding of (sum w)^2 / sum w^2 is 100: it printed as
        # "effective sample size 100.0 (< 100)")
        if ess < 100 * (1 - 1e-9) and ess == ess:
            if self.weight_level == "slot":
                out.append(f"effective sample size {ess:.1f} impressions (< 100; {self.ess:.1f} slots over "
                           f"{self.weights_per_impression:.3g} shown slots per impression): the interval is unreliable")
            else:
                out.append(f"effective sample size {ess:.1f} (< 100): the interval is unreliable")
        if ess >= 100 * (1 - 1e-9) and self.ess_clusters < FEW_WEIGHTED_CLUSTERS:
            # enough impressions carry weight, but they belong to a few users: the clustered standard error
            # averages over about that many independent units (the impressions' ESS above does not see it)
            out.append(f"the weights rest on {self.ess_clusters:.1f} effective users (clusters: (sum W_u)^2 / sum "
                       f"W_u^2 of each user's total weight; < {FEW_WEIGHTED_CLUSTERS}) although "
                       f"{ess:.0f} effective impressions carry them: a few users' clicks decide the estimate, and "
                       "the clustered standard error and its t interval are unreliable with so few (the interval's "
                       "degrees of freedom, df, allow for them only approximately)")
        if self.mean_weight_off():
            what = "per shown slot " if self.weight_level == "slot" else ""
            out.append(
                f"mean importance weight {what}{self.mean_weight:.4g} (se {self.mean_weight_se:.2g}) is more than "
                f"{MEAN_WEIGHT_Z:g} standard errors and {MEAN_WEIGHT_TOLERANCE:.0%} from its expectation "
                f"{self.mean_weight_expected:g}: the target "
                "leaves the logger's support, the propensities are wrong, or the log has not seen the large "
                "weights the estimate needs (the estimate is then far from the truth and its interval too narrow)")
        extra = self.notes.get("warnings")
        if isinstance(extra, (list, tuple)):
            out.extend(str(w) for w in extra)
        return out


#: the fewest effective users (clusters) the weights may rest on without a warning (:attr:`Diagnostics.ess_clusters`;
#: the log's own effective clusters by impressions have the same threshold, ``intervals.FEW_CLUSTERS``)
FEW_WEIGHTED_CLUSTERS = 30

#: the mean importance weight's warning: more than this many of its standard errors from its expectation
MEAN_WEIGHT_Z = 4.0
#: ... and more than this share of the expectation from it
MEAN_WEIGHT_TOLERANCE = 0.05


def cluster_ess(data: LoggedData, w: FloatArray) -> float:
    """:attr:`Diagnostics.ess_clusters` of list weights ``(n,)`` or slot weights ``(n, k)`` (shown slots only): each
    user's total absolute weight :math:`W_u`, then :math:`(\\sum W_u)^2 / \\sum W_u^2` (the number of users for equal
    totals, near 1 when one user holds the weight); NaN without user ids or without any weight."""
    if data.user is None:
        return math.nan
    a = np.abs(w)
    rows = a if a.ndim == 1 else (a @ np.ones(a.shape[1]) if data.all_valid else np.where(data.valid, a, 0.0).sum(1))
    inv, g = data.user_groups
    per_user = np.bincount(inv, rows, g)
    s2 = float(per_user @ per_user)
    return float(per_user.sum() ** 2 / s2) if s2 > 0 else math.nan


def mean_weight(data: LoggedData, w: FloatArray) -> tuple[str, float, float, float]:
    """``(weight level, weights per impression, mean weight, its standard error)`` of list weights ``(n,)`` or
    slot weights ``(n, k)`` (shown slots only; :class:`Diagnostics`): the ratio of the clusters' sums of weights to
    their counts of weights, with its delta-method standard error over the clusters
    (:func:`onlineeval.stats.ratio_mean`; NaN with one cluster)."""
    from onlineeval.stats import ratio_mean

    if w.ndim == 1:
        level, per_row, count = "list", w, None
    else:
        level = "slot"
        per_row = row_sum(w if data.all_valid else np.where(data.valid, w, 0.0))
        count = None if data.all_valid else data.cached("shown_slots", lambda: row_sum(data.valid.astype(np.float64)))
    inv, g = data.user_groups
    if data.user is None:
        x = per_row
        y = np.ones(data.n) if count is None else count
    else:
        x = np.bincount(inv, per_row, g)
        y = (data.cached("cluster_sizes", lambda: np.bincount(inv, np.ones(data.n), g)) if count is None else
             data.cached("cluster_shown_slots", lambda: np.bincount(inv, count, g)))
    if count is None and w.ndim == 2:  # every slot shown: k weights per impression
        y = y * data.k
    total = float(y.sum())
    if total <= 0:
        return level, 0.0, math.nan, math.nan
    per = total / data.n
    if not np.isfinite(x).all():
        return level, per, math.nan, math.nan
    if g < 2:
        return level, per, float(x.sum() / total), math.nan
    est = ratio_mean(x, y)
    return level, per, est.estimate, est.se


def support_violations(data: LoggedData, target: Target, level: str) -> tuple[int | None, int]:
    """Impressions (distinct queries weighted by their count) where the target's list has
    an event of logging probability 0 at ``level``; ``(None, 0)`` without a logger."""
    if data.logger is None or not hasattr(target, "rankings"):
        return None, 0
    return data.cached(("support_violations", level),  # type: ignore[no-any-return]
                       lambda: _support_violations(data, target, level), target=target)


def _support_violations(data: LoggedData, target: Target, level: str) -> tuple[int | None, int]:
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
