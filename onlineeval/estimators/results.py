"""The results of the off-policy estimation contract (:mod:`onlineeval.estimators.base`, which
re-exports them): an estimator hook's per-impression :class:`Terms` and the
:class:`OffPolicyEstimate` with its intervals and diagnostics."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from onlineeval.estimators._arrays import FloatArray
from onlineeval.estimators.diagnostics import Diagnostics
from onlineeval.estimators.intervals import (
    BOOTSTRAP_SE,
    DELTA_SE,
    again_text,
    bootstrap_se_text,
    few_clusters_text,
    held_fixed_text,
    lopsided_text,
    measured_text,
)


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


def refused_bootstrap_text(fixed: str, n_boot: int, se: float) -> str:
    """The warning of an estimate whose delta method holds ``fixed`` (a data-driven choice) fixed and whose bootstrap
    of ``n_boot`` replicates was asked for but could not run on the log (the reason is the ``no bootstrap interval``
    warning that follows it): no advice to ask for a bootstrap, and nothing about the standard error ``se`` unless it
    is finite (one cluster has none)."""
    text = (f"the bootstrap asked for ({n_boot} resamples; it {again_text(fixed)} in each) could not be run on "
            "this log (see 'no bootstrap interval' below)")
    if math.isfinite(se):
        text += (f", so its standard error, CLT interval and p-values are the delta method's: they hold {fixed} "
                 f"fixed and are too small{measured_text(fixed)}")
    return text


@dataclass(frozen=True)
class OffPolicyEstimate:
    """An off-policy estimate of a target's value with intervals and diagnostics.

    ``ci_low, ci_high``: the CLT interval ``value -+ t_df(1 - alpha/2) x se`` with ``df`` Bell and McCaffrey's
    degrees of freedom (``clusters - 1`` for clusters of equal weight; :func:`~onlineeval.estimators.intervals.
    working_df`, :func:`~onlineeval.estimators.intervals.clt_interval`); ``boot_low, boot_high``: the cluster
    bootstrap's
    percentile interval (NaN without one). ``se_source``: ``"delta method"`` or, for an estimator whose delta method
    holds a data-driven choice fixed (``held_fixed`` names it; ``None`` for the others) estimated with a bootstrap,
    :data:`~onlineeval.estimators.intervals.BOOTSTRAP_SE`: ``se`` (and the CLT interval) is then the SD of the
    bootstrap's estimates, ``delta_se`` the delta method's. ``n_boot``: the bootstrap replicates asked for; an
    estimator holding a choice fixed with ``n_boot`` > 0 and ``se_source`` still the delta method's is one whose
    bootstrap was asked for and refused on this log (``onlineeval estimate``'s fallback to the estimate without
    one), see :meth:`warnings`. ``effective_clusters``: the clusters' effective number by
    impressions (:func:`~onlineeval.estimators.intervals.effective_clusters`). :meth:`warnings` says what of this
    makes the interval approximate, with the diagnostics' warnings. ``skewness``: the clusters' influence values'
    skewness (:func:`~onlineeval.estimators.intervals.influence_skewness`; NaN with fewer than 3 clusters or an
    undefined standard error), whose lopsided interval :meth:`warnings` names.
    """

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
    se_source: str = DELTA_SE
    delta_se: float = math.nan
    held_fixed: str | None = None
    n_boot: int = 0
    effective_clusters: float = math.nan
    df: float = math.nan
    skewness: float = math.nan

    def warnings(self, bootstrap_option: str = "n_boot=N", *, clusters: bool = True) -> list[str]:
        """Every warning of the estimate: a standard error holding a data-driven choice fixed without a bootstrap
        (:func:`~onlineeval.estimators.intervals.held_fixed_text`, ``bootstrap_option`` spelling how to ask for one;
        a bootstrap asked for and refused on this log: :func:`refused_bootstrap_text` instead, which does not advise
        one), the diagnostics' (:meth:`Diagnostics.warnings`), a standard error taken from the bootstrap
        (:func:`~onlineeval.estimators.intervals.bootstrap_se_text`) and, with ``clusters``, fewer than
        :data:`~onlineeval.estimators.intervals.FEW_CLUSTERS` effective clusters (the estimate command says that
        once per log instead)."""
        out = []
        if self.held_fixed is not None and self.se_source == DELTA_SE:
            out.append(refused_bootstrap_text(self.held_fixed, self.n_boot, self.se) if self.n_boot else
                       held_fixed_text(self.held_fixed, bootstrap_option))
        if not math.isfinite(self.se) and self.clusters >= 2 and math.isfinite(self.value):
            out.append("standard error and intervals undefined: fewer than two clusters (users) carry weight, or every "
                       "weighted impression has the same reward (e.g. one matched impression without clicks), so the "
                       "delta method's standard error is 0, a zero-width interval that says nothing about the target")
        out.extend(self.diagnostics.warnings())
        lopsided = (lopsided_text(self.skewness, self.clusters, df=self.df, alpha=self.alpha)
                    if self.se_source == DELTA_SE and math.isfinite(self.se) else None)
        if lopsided:
            out.append(lopsided)
        if self.held_fixed is not None and self.se_source == BOOTSTRAP_SE:
            out.append(bootstrap_se_text(self.held_fixed, self.n_boot, self.se, self.delta_se))
        few = few_clusters_text(clusters=self.clusters, effective=self.effective_clusters) if clusters else None
        if few:
            out.append(few)
        return out

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def warning_lines(
    warnings: list[str], results: list[dict[str, Any]], differences: list[dict[str, Any]]
) -> list[str]:
    """Every warning the table prints, in its order: the log's and targets' ``warnings``, each estimate's (prefixed
    ``"<estimator> <target>: "``) and each undefined difference's error (prefixed ``"<estimator> <target> -
    <baseline>: "``): what ``onlineeval estimate`` prints and :attr:`onlineeval.Estimates.warnings` holds, from
    :class:`~onlineeval.estimators.log_estimates.LogEstimates`' lists (or their JSON)."""
    return list(warnings) + [
        f"{r['estimator']} {r['target']}: {w}" for r in results for w in (r.get("warnings") or ())
    ] + [f"{r['estimator']} {r['target']} - {r['baseline']}: {r['error']}" for r in differences if r.get("error")]
