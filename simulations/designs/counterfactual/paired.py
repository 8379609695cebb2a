r"""The paired difference of two ratio estimates from the same users (what each
counterfactual checkpoint row holds), with its delta-method standard error.

.. math::

    \hat\Delta = \hat R_B - \hat R_A, \quad \hat R_t = \frac{\sum_u x_{tu}}{\sum_u y_{tu}},
    \quad e_{tu} = \frac{x_{tu} - \hat R_t y_{tu}}{\bar y_t}, \quad
    \widehat{\mathrm{se}}^2 = \frac{\sum_u (d_u - \bar d)^2}{n(n-1)}, \; d_u = e_{Bu} - e_{Au}

(Deng, Knoblich and Lu 2018; :func:`onlineeval.stats.ratio_linearization`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special as _spc

__all__ = ["PairedEstimate", "paired_difference", "paired_differences", "ratio_means"]


#: the two-sided normal quantile of each significance level asked for (the same float each time)
_Z: dict[float, float] = {}


class PairedEstimate:
    """An estimate with its interval and two-sided test (what a checkpoint row holds): z, or Student's t with ``df``
    degrees of freedom where given (:meth:`with_df`: the design's differences take Bell and McCaffrey's, as
    ``onlineeval estimate`` does; the interval :func:`onlineeval.estimators.intervals.clt_interval`'s, the p-value
    ``2 t_df.sf(|estimate| / se)``).

    A standard error of 0 for a difference of 0 is a tie on every user (the A/A design's): a zero-width interval
    and p 1. For any other difference it measured no spread (every user's linearised term the same, as where one
    user holds all of a side's weight), not a certain difference: the SE, interval and p-value are undefined
    (NaN; a replicate counted as not rejecting, outside the coverage), the estimate kept, as ``onlineeval
    estimate`` reports it (it gave p 0, a rejection in power and in the truth rates). ``zero_se_certain``: the
    former rule (a zero-width interval, p 0 unless the estimate is 0), which the logger's own metrics keep
    (:func:`ratio_means`: :func:`onlineeval.stats.ratio_mean`'s numbers exactly)."""

    __slots__ = ("ci_high", "ci_low", "df", "estimate", "pvalue", "se")

    def __init__(self, estimate: float, se: float, alpha: float, zero_se_certain: bool = False) -> None:
        self.estimate, self.se = float(estimate), float(se)
        self.df = math.inf  # z (with_df: Student's t of these degrees of freedom)
        if not (math.isfinite(self.estimate) and math.isfinite(self.se)):
            self.ci_low = self.ci_high = self.pvalue = math.nan
            self.estimate = self.se = math.nan
        elif self.se > 0:
            z = _Z.get(alpha)
            if z is None:
                z = _Z[alpha] = float(-_spc.ndtri(alpha / 2.0))
            self.ci_low, self.ci_high = self.estimate - z * self.se, self.estimate + z * self.se
            self.pvalue = float(min(1.0, 2.0 * _spc.ndtr(-abs(self.estimate) / self.se)))
        elif self.estimate == 0 or zero_se_certain:  # a tie on every user: the interval is the point
            self.ci_low = self.ci_high = self.estimate
            self.pvalue = 1.0 if self.estimate == 0 else 0.0
        else:  # no spread measured for a difference: undefined, not certain
            self.se = self.ci_low = self.ci_high = self.pvalue = math.nan

    def with_df(self, df: float, alpha: float) -> PairedEstimate:
        """The interval and two-sided test with Student's t of ``df`` degrees of freedom in place of z (``onlineeval
        estimate``'s: ``estimate -+ t_df(1 - alpha/2) x se``, ``p = 2 t_df.sf(|estimate| / se)``); unchanged where
        the standard error is not a positive number or ``df`` is below 1 or not finite (undefined: fewer than two
        clusters). Returns ``self``."""
        if self.se > 0 and math.isfinite(self.se) and math.isfinite(df) and df >= 1:
            q = float(_spc.stdtrit(df, 1.0 - alpha / 2.0))
            self.ci_low, self.ci_high = self.estimate - q * self.se, self.estimate + q * self.se
            self.pvalue = float(min(1.0, 2.0 * _spc.stdtr(df, -abs(self.estimate) / self.se)))
            self.df = float(df)
        return self


def paired_difference(
    num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray, alpha: float
) -> PairedEstimate:
    r"""``R_B - R_A`` of two ratio estimates from the *same* users, with the delta-method
    SE of the paired difference (see the module docstring). Undefined (NaN) with fewer
    than two users or a denominator summing to 0."""
    from onlineeval.stats import ratio_linearization

    n = num_a.shape[0]
    if n < 2 or not den_a.sum() > 0 or not den_b.sum() > 0:
        return PairedEstimate(math.nan, math.nan, alpha)
    if not (np.isfinite(num_a).all() and np.isfinite(num_b).all()):
        return PairedEstimate(math.nan, math.nan, alpha)
    r_a, e_a = _linearization(num_a, den_a, ratio_linearization)
    r_b, e_b = _linearization(num_b, den_b, ratio_linearization)
    d = e_b - e_a
    d = d - d.mean()
    return PairedEstimate(r_b - r_a, math.sqrt(float(d @ d) / (n * (n - 1))), alpha)


def _linearization(num: np.ndarray, den: np.ndarray, checked: Any) -> tuple[float, np.ndarray]:
    """``ratio_linearization(num, den)`` (the same expressions) without its input copies
    when the inputs are plain float vectors (``num`` is checked finite by the caller);
    anything else goes to ``checked``, which raises its errors."""
    if (num.dtype == np.float64 and den.dtype == np.float64 and num.ndim == den.ndim == 1
            and num.size == den.size and num.size >= 2 and np.isfinite(den).all() and not (den < 0).any()):
        r = float(num.sum() / den.sum())
        return r, (num - r * den) / den.mean()
    return checked(num, den)  # type: ignore[no-any-return]



def paired_differences(num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray,
                       alpha: float) -> list[PairedEstimate]:
    """:func:`paired_difference` of each row of ``(E, n)`` matrices (one row per estimator,
    users on the last axis), with the same numbers: the sums and means of a row of a
    C-contiguous matrix are numpy's pairwise sums of that row (tested), every other step is
    elementwise, and each row's ``d @ d`` is its own dot product. Rows whose inputs the fast
    path does not take (a non-finite or negative denominator) go to :func:`paired_difference`."""
    arrays = [np.ascontiguousarray(a, dtype=np.float64) for a in (num_a, den_a, num_b, den_b)]
    if any(a.ndim != 2 or a.shape != arrays[0].shape for a in arrays):
        raise ValueError("paired_differences: four (E, n) matrices of one shape expected")
    na, da, nb, db = arrays
    e, n = na.shape
    if n < 2 or e == 0:
        return [PairedEstimate(math.nan, math.nan, alpha) for _ in range(e)]
    # the sums the estimates need decide the fast rows too: a finite sum has only finite
    # terms (a NaN or an infinity makes the sum non-finite), a minimum >= 0 no negative one
    xa, xb, sa, sb = na.sum(axis=1), nb.sum(axis=1), da.sum(axis=1), db.sum(axis=1)
    fast = np.isfinite(xa) & np.isfinite(xb) & np.isfinite(sa) & np.isfinite(sb) & (sa > 0) & (sb > 0)
    fast &= (da.min(axis=1) >= 0) & (db.min(axis=1) >= 0)
    out: list[PairedEstimate | None] = [None] * e
    rows = np.flatnonzero(fast)
    if rows.size:
        whole = rows.size == e  # no row left out: no gather
        pick = (lambda a: a) if whole else (lambda a: a[rows])
        ra, ea = _rows_linearized(pick(na), pick(da), pick(xa), pick(sa), n)
        rb, eb = _rows_linearized(pick(nb), pick(db), pick(xb), pick(sb), n)
        d = eb - ea
        d -= d.mean(axis=1, keepdims=True)
        for i, row in enumerate(rows.tolist()):
            out[row] = PairedEstimate(rb[i] - ra[i], math.sqrt(float(d[i] @ d[i]) / (n * (n - 1))), alpha)
    for row in range(e):
        if out[row] is None:  # undefined, or inputs only the checked path handles (its errors)
            out[row] = paired_difference(na[row], da[row], nb[row], db[row], alpha)
    return out  # type: ignore[return-value]


def _rows_linearized(num: np.ndarray, den: np.ndarray, num_sum: np.ndarray, den_sum: np.ndarray,
                     n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row by row ``r = num.sum() / den.sum()`` and ``(num - r den) / den.mean()`` (the
    expressions of :func:`_linearization`, elementwise on rows; ``den.mean()`` is numpy's
    ``den.sum() / n``, the same division)."""
    r = num_sum / den_sum
    return r, (num - r[:, None] * den) / (den_sum / n)[:, None]


def ratio_means(num: np.ndarray, den: np.ndarray, alpha: float) -> list[PairedEstimate]:
    """:func:`onlineeval.stats.ratio_mean` of each row of ``num`` ``(E, n)`` over the common
    denominators ``den`` ``(n,)`` (finite, non-negative: per-user sums the design keeps):
    the same kernel (:func:`onlineeval.stats.online._delta_kernel`, so the same ratio and
    variance) and the same z-test and interval (``PairedEstimate`` computes them as
    ``ratio_mean``'s test does for an infinite df), without its input copies and checks."""
    from onlineeval.stats.online import _delta_kernel

    x = np.ascontiguousarray(num, dtype=np.float64)
    d = np.asarray(den, dtype=np.float64)
    if d.ndim == 1 and d.size and float(d.min()) >= 0 and float(d.sum()) < 2.0**53 and np.array_equal(d, np.floor(d)):
        # counts (the design's impressions): every sum of them is exact in any order, so
        # the rows laid out one after another give ratio_mean_batch's numbers (its copy of
        # a broadcast denominator is column-major, slow to sum along the users)
        y = np.broadcast_to(d, x.shape).copy()
    else:
        y = np.array(np.broadcast_to(den, x.shape), dtype=np.float64)  # ratio_mean_batch's own copy
    r, var = _delta_kernel(x, y)
    se = np.sqrt(var)
    return [PairedEstimate(r[i], se[i], alpha, zero_se_certain=True) for i in range(x.shape[0])]
