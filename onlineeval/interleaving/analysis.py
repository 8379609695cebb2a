"""Aggregation and statistics of interleaving outcomes.

Per impression an interleaver gives ``o in {-1, 0, +1}`` (``+1``: B preferred). Over
``N`` impressions with ``w`` wins of B, ``l`` losses and ``t`` ties

.. math::

    \\Delta_{AB} = \\frac{w + t/2}{w + l + t} - \\frac12 = \\frac{w - l}{2N} = \\tfrac12\\,\\bar o,

positive when B is preferred (Chapelle et al. 2012). Convention: ``N`` counts the
impressions passed in. Chapelle et al. count only impressions with at least one click
(an impression without a click is not a comparison), and so does the simulator; pass
``outcomes[clicks.any(axis=1)]`` to follow them. Impressions without a click passed in
count as ties and shrink :math:`\\Delta_{AB}` toward 0 (its sign is unchanged).
Impressions of one user (or one query) are not independent, so the standard error is clustered: with per-cluster sums
``s_c = \\sum o`` and counts ``n_c``, ``\\Delta = \\sum s_c / (2 \\sum n_c)`` is a ratio
of cluster totals and its delta-method (linearisation) variance is

.. math::

    \\widehat{\\operatorname{Var}}(\\Delta) = \\frac{G}{G-1}
    \\frac{\\sum_c (s_c - \\bar o\\, n_c)^2}{4\\,(\\sum_c n_c)^2},

the cluster-robust (CR1) variance of a mean. A cluster bootstrap (resample whole
clusters) is offered as an alternative, and the sign test is the exact binomial test of
``w`` against ``w + l`` at 1/2. For multileaving the same is done for every ordered pair
of rankers, giving the preference matrix with confidence intervals.

References
----------
O. Chapelle, T. Joachims, F. Radlinski, Y. Yue. Large-scale validation and analysis of
interleaved search evaluation. ACM TOIS 30(1), 2012.
A. C. Cameron, D. L. Miller. A practitioner's guide to cluster-robust inference.
J. Human Resources 50(2), 2015.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from onlineeval.errors import ConfigError, InputError
from onlineeval.stats.online import ratio_mean, ratio_mean_batch

__all__ = [
    "DeltaEstimate",
    "OutcomeCounts",
    "PreferenceMatrix",
    "cluster_bootstrap_delta",
    "delta_ab",
    "delta_ab_test",
    "outcome_counts",
    "preference_matrix",
    "sign_test",
]


@dataclass(frozen=True)
class OutcomeCounts:
    """Wins of B, losses of B (wins of A) and ties."""

    wins: int
    losses: int
    ties: int

    @property
    def n(self) -> int:
        """Number of impressions."""
        return self.wins + self.losses + self.ties


@dataclass(frozen=True)
class DeltaEstimate:
    """``Delta_AB`` with its clustered standard error, confidence interval and tests.

    Attributes
    ----------
    delta, se, ci_low, ci_high:
        The estimate, its standard error and the ``1 - alpha`` interval.
    p_value:
        Two-sided p-value of ``Delta_AB = 0`` from the same (clustered) method.
    sign_p_value:
        Exact two-sided sign test of wins against losses (impressions treated as independent).
    counts:
        Wins, losses, ties.
    n_clusters:
        Number of clusters (users or queries; ``n`` when unclustered).
    method:
        ``"delta"`` (cluster-robust linearisation) or ``"bootstrap"`` (cluster bootstrap).
    """

    delta: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float
    sign_p_value: float
    counts: OutcomeCounts
    n_clusters: int
    alpha: float
    method: str


@dataclass(frozen=True)
class PreferenceMatrix:
    """Pairwise ``Delta`` of every ranker pair (row beats column when positive).

    All arrays are ``(m, m)``; ``delta`` is antisymmetric with zero diagonal.
    """

    delta: NDArray[np.float64]
    se: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    p_value: NDArray[np.float64]
    wins: NDArray[np.int64]
    losses: NDArray[np.int64]
    ties: NDArray[np.int64]
    n_clusters: int
    alpha: float


def _outcomes(outcomes: ArrayLike) -> NDArray[np.float64]:
    o = np.asarray(outcomes)
    if o.ndim != 1:
        raise InputError(f"outcomes must be a 1-D array (one per impression), got shape {o.shape}")
    if o.size == 0:
        raise InputError("no outcomes: need at least one impression")
    of = o.astype(np.float64)
    if not np.isfinite(of).all() or (np.abs(of) > 1).any():
        raise InputError("outcomes must lie in [-1, 1] (+1 = B preferred, -1 = A preferred, 0 = tie)")
    return of


def _clusters(clusters: ArrayLike | None, n: int) -> NDArray[np.intp]:
    if clusters is None:
        return np.arange(n)
    c = np.asarray(clusters)
    if c.shape != (n,):
        raise InputError(f"clusters must have one id per impression, shape ({n},), got {c.shape}")
    return np.unique(c, return_inverse=True)[1].reshape(-1)


def _alpha(alpha: float) -> float:
    if not 0.0 < alpha < 1.0:
        raise ConfigError(("alpha",), f"must be in (0, 1), got {alpha!r}")
    return float(alpha)


def outcome_counts(outcomes: ArrayLike) -> OutcomeCounts:
    """Count wins (``o > 0``), losses (``o < 0``) and ties."""
    o = _outcomes(outcomes)
    return OutcomeCounts(int((o > 0).sum()), int((o < 0).sum()), int((o == 0).sum()))


def delta_ab(outcomes: ArrayLike) -> float:
    """``Delta_AB = (wins + ties/2) / N - 1/2`` (for fractional outcomes: half the mean outcome)."""
    return float(_outcomes(outcomes).mean() / 2.0)


def sign_test(outcomes: ArrayLike) -> float:
    """Exact two-sided binomial (sign) test of wins against losses at 1/2; ties are dropped.

    Returns 1.0 when there are no wins and no losses.
    """
    c = outcome_counts(outcomes)
    if c.wins + c.losses == 0:
        return 1.0
    return float(stats.binomtest(c.wins, c.wins + c.losses, 0.5).pvalue)


def _cluster_sums(o: NDArray[np.float64], cl: NDArray[np.intp]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    g = int(cl.max()) + 1
    return np.bincount(cl, weights=o, minlength=g), np.bincount(cl, minlength=g).astype(np.float64)


def cluster_bootstrap_delta(outcomes: ArrayLike, clusters: ArrayLike | None, rng: np.random.Generator,
                            n_boot: int = 2000) -> NDArray[np.float64]:
    """Bootstrap replicates of ``Delta_AB``, resampling whole clusters with replacement.

    Parameters
    ----------
    outcomes:
        ``(n,)`` per-impression outcomes.
    clusters:
        ``(n,)`` cluster ids (user or query); ``None`` resamples impressions.
    rng:
        Random generator.
    n_boot:
        Number of replicates (default 2000).
    """
    o = _outcomes(outcomes)
    cl = _clusters(clusters, o.size)
    if n_boot < 1:
        raise ConfigError(("n_boot",), f"must be a positive integer, got {n_boot!r}")
    s, cnt = _cluster_sums(o, cl)
    g = s.size
    out = np.empty(n_boot, dtype=np.float64)
    chunk = max(1, 2_000_000 // g)
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        w = rng.multinomial(g, np.full(g, 1.0 / g), size=b).astype(np.float64)
        out[start: start + b] = (w @ s) / (2.0 * (w @ cnt))
    return out


def delta_ab_test(outcomes: ArrayLike, clusters: ArrayLike | None = None, *, alpha: float = 0.05,
                  method: Literal["delta", "bootstrap"] = "delta", n_boot: int = 2000,
                  rng: np.random.Generator | None = None) -> DeltaEstimate:
    """``Delta_AB`` with a CI and p-value clustered by user or query.

    Parameters
    ----------
    outcomes:
        ``(n,)`` outcomes in ``[-1, 1]`` (``+1``: B preferred).
    clusters:
        ``(n,)`` user (or query) id per impression; ``None``: impressions independent.
    alpha:
        Significance level; the interval is ``1 - alpha`` (default 0.05).
    method:
        ``"delta"`` (default): cluster-robust normal interval and z-test;
        ``"bootstrap"``: percentile interval and two-sided bootstrap p-value from
        :func:`cluster_bootstrap_delta`.
    n_boot, rng:
        Bootstrap replicates and generator (``rng`` required for ``"bootstrap"``).
    """
    alpha = _alpha(alpha)
    o = _outcomes(outcomes)
    cl = _clusters(clusters, o.size)
    s, cnt = _cluster_sums(o, cl)
    counts = outcome_counts(o)
    sign_p = sign_test(o)
    # Delta_AB is a ratio of per-cluster sums: (sum of outcomes / 2) / (impressions)
    est = ratio_mean(s / 2.0, cnt, alpha) if s.size >= 2 else None
    delta = float(s.sum() / cnt.sum() / 2.0)
    if method == "delta":
        if est is None:
            nan = float("nan")
            return DeltaEstimate(delta, nan, nan, nan, nan, sign_p, counts, s.size, alpha, "delta")
        return DeltaEstimate(delta, est.se, est.ci_low, est.ci_high, est.pvalue, sign_p, counts, s.size, alpha,
                             "delta")
    if method == "bootstrap":
        if rng is None:
            raise ConfigError(("rng",), "the bootstrap needs an np.random.Generator")
        boot = cluster_bootstrap_delta(o, cl, rng, n_boot)
        lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
        p = float(min(1.0, 2 * min((boot <= 0).mean(), (boot >= 0).mean())))
        return DeltaEstimate(delta, float(boot.std(ddof=1)), float(lo), float(hi), p, sign_p, counts, s.size,
                             alpha, "bootstrap")
    raise ConfigError(("method",), f"must be 'delta' or 'bootstrap', got {method!r}")


def preference_matrix(preferences: ArrayLike, clusters: ArrayLike | None = None, *,
                      alpha: float = 0.05) -> PreferenceMatrix:
    """Pairwise preference matrix of a multileaving experiment, with clustered CIs.

    Parameters
    ----------
    preferences:
        ``(n, m, m)`` per-impression pairwise outcomes (``+1``: row ranker beats column).
    clusters:
        ``(n,)`` user or query ids; ``None``: impressions independent.
    alpha:
        Level of the normal ``1 - alpha`` intervals and two-sided z-tests (default 0.05).

    Returns
    -------
    PreferenceMatrix
        ``delta[i, j] = (wins_ij + ties_ij/2)/N - 1/2`` with its cluster-robust SE.
    """
    alpha = _alpha(alpha)
    p = np.asarray(preferences)
    if p.ndim != 3 or p.shape[1] != p.shape[2] or p.shape[0] == 0:
        raise InputError(f"preferences must be an (n, m, m) array with n >= 1, got shape {p.shape}")
    pf = p.astype(np.float64)
    if not np.isfinite(pf).all() or (np.abs(pf) > 1).any():
        raise InputError("preferences must lie in [-1, 1]")
    n, m, _ = p.shape
    cl = _clusters(clusters, n)
    g = int(cl.max()) + 1
    cnt = np.bincount(cl, minlength=g).astype(np.float64)
    s = np.stack([np.bincount(cl, weights=col, minlength=g) for col in pf.reshape(n, m * m).T])  # (m*m, g)
    delta = (s.sum(axis=1) / cnt.sum() / 2.0).reshape(m, m)
    if g >= 2:
        # every cell is a ratio of per-cluster sums, as in delta_ab_test
        est = ratio_mean_batch(s / 2.0, np.broadcast_to(cnt, s.shape), alpha)
        se, lo, hi, pval = (np.asarray(x).reshape(m, m) for x in (est.se, est.ci_low, est.ci_high, est.pvalue))
    else:
        se = lo = hi = pval = np.full((m, m), np.nan)
    return PreferenceMatrix(
        delta=delta, se=se, ci_low=lo, ci_high=hi, p_value=pval,
        wins=(p > 0).sum(axis=0).astype(np.int64), losses=(p < 0).sum(axis=0).astype(np.int64),
        ties=(p == 0).sum(axis=0).astype(np.int64), n_clusters=g, alpha=alpha,
    )
