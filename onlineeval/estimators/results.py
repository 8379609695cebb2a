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
    bootstrap_se_text,
    few_clusters_text,
    held_fixed_text,
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


@dataclass(frozen=True)
class OffPolicyEstimate:
    """An off-policy estimate of a target's value with intervals and diagnostics.

    ``ci_low, ci_high``: the CLT interval ``value -+ t_(G-1)(1 - alpha/2) x se`` with ``G = clusters``
    (:func:`~onlineeval.estimators.intervals.clt_interval`); ``boot_low, boot_high``: the cluster bootstrap's
    percentile interval (NaN without one). ``se_source``: ``"delta method"`` or, for an estimator whose delta method
    holds a data-driven choice fixed (``held_fixed`` names it; ``None`` for the others) estimated with a bootstrap,
    :data:`~onlineeval.estimators.intervals.BOOTSTRAP_SE`: ``se`` (and the CLT interval) is then the SD of the
    bootstrap's estimates, ``delta_se`` the delta method's. ``effective_clusters``: the clusters' effective number by
    impressions (:func:`~onlineeval.estimators.intervals.effective_clusters`). :meth:`warnings` says what of this
    makes the interval approximate, with the diagnostics' warnings.
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

    def warnings(self, bootstrap_option: str = "n_boot=N", *, clusters: bool = True) -> list[str]:
        """Every warning of the estimate: a standard error holding a data-driven choice fixed without a bootstrap
        (:func:`~onlineeval.estimators.intervals.held_fixed_text`, ``bootstrap_option`` spelling how to ask for one),
        the diagnostics' (:meth:`Diagnostics.warnings`), a standard error taken from the bootstrap
        (:func:`~onlineeval.estimators.intervals.bootstrap_se_text`) and, with ``clusters``, fewer than
        :data:`~onlineeval.estimators.intervals.FEW_CLUSTERS` effective clusters (the estimate command says that
        once per log instead)."""
        out = []
        if self.held_fixed is not None and self.se_source == DELTA_SE and not self.n_boot:
            out.append(held_fixed_text(self.held_fixed, bootstrap_option))
        out.extend(self.diagnostics.warnings())
        if self.held_fixed is not None and self.se_source == BOOTSTRAP_SE:
            out.append(bootstrap_se_text(self.held_fixed, self.n_boot, self.se, self.delta_se))
        few = few_clusters_text(clusters=self.clusters, effective=self.effective_clusters) if clusters else None
        if few:
            out.append(few)
        return out

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)
