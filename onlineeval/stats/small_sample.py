r"""A ratio metric's difference between two arms with few users: the bias-reduced (CR2) variance and Student's t with
Bell and McCaffrey's degrees of freedom.

:func:`onlineeval.stats.ratio_diff` (the delta method, Deng, Knoblich and Lu 2018) refers
:math:`(\hat R_B - \hat R_A) / \mathrm{se}` to the normal distribution. With few users, and most where activity is
heavy-tailed (a few users hold many of an arm's impressions), that interval covers less than its level: the
residuals of the heavy users are shrunk by their own weight in the ratio (their leverage), so the variance is
underestimated, and its own spread is that of a few users, not of many. :func:`ratio_diff_cr2` corrects both, as
:mod:`onlineeval.estimators.intervals` does for off-policy estimates (Bell and McCaffrey 2002; Imbens and Kolesar
2016; Pustejovsky and Tipton 2018):

- the variance is the cluster-robust CR2 one of the impression-level regression of the metric on the arm
  (clusters: users), which for a ratio of sums takes the closed form

  .. math::

      \widehat{\operatorname{Var}}(\hat R) = \frac{1}{N^2} \sum_i \frac{e_i^2}{1 - h_i},
      \qquad e_i = x_i - \hat R\, y_i, \quad h_i = y_i / N, \quad N = \sum_i y_i

  per arm (user :math:`i`'s numerator :math:`x_i` and denominator :math:`y_i`, :math:`h_i` its leverage: the
  adjustment :math:`(I - H_{ii})^{-1/2}` of its impressions' residuals, whose sum it scales by
  :math:`(1 - h_i)^{-1/2}`), unbiased when the impressions are independent with equal variance (the working
  model), where the delta method's :math:`\frac{m}{m - 1} \sum_i e_i^2 / N^2` has the expectation
  :math:`\frac{m}{m - 1} (1 - \sum_i y_i^2 / N^2)` times the variance (1 for users of equal activity, well below
  it where a few users hold the impressions);
- the reference distribution is Student's t with the Satterthwaite degrees of freedom
  :math:`\operatorname{tr}(A)^2 / \operatorname{tr}(A^2)` of that variance as a quadratic form :math:`y' A y` under
  the working model: with :math:`p_i = y_i / N` and :math:`w_i = p_i / (1 - p_i)`, an arm contributes
  :math:`1 / N` to :math:`\operatorname{tr}(A)` and
  :math:`(\sum w_i^2 - 2 \sum w_i^2 p_i + (\sum w_i p_i)^2) / N^2` to :math:`\operatorname{tr}(A^2)`. Users of one
  impression each give :math:`2m - 2` (the pooled two-sample t's) for two arms of :math:`m`; fewer where a few users
  hold the impressions.

Measured (95% intervals of A/A differences, users of lognormal activity, 20,000 replicates each, 2026-12-06):

======================================  ==========  ==========  ==========  ==========
users, activity sigma                   20, 1.0     20, 1.5     40, 1.0     40, 1.5
======================================  ==========  ==========  ==========  ==========
one click rate (the working model)      0.952       0.958       0.954       0.957
  delta method's z                      0.904       0.884       0.929       0.911
two user types (5% and 70%)             0.943       0.933       0.938       0.929
  delta method's z                      0.873       0.818       0.902       0.847
======================================  ==========  ==========  ==========  ==========

Under the working model the interval is nominal (slightly conservative); where users differ beyond it (their own
click rates) it still falls short, by a tenth to a quarter of z's shortfall. That shortfall is the working model's:
a user's impressions are correlated where the users' own rates differ, and independent impressions overstate the
degrees of freedom. With the working model of impressions correlated :math:`\rho` within a user (``icc``; the
variance stays the same, the df change: :func:`_traces`) and :math:`\rho` estimated from the users' sums of
squares (:func:`intra_user_correlation`, one-way ANOVA with the arms as fixed effects; 2026-12-07, 6,000 A/A
replicates each, the table's worlds):

======================================  ==========  ==========  ==========  ==========
users, activity sigma                   20, 1.0     20, 1.5     40, 1.0     40, 1.5
======================================  ==========  ==========  ==========  ==========
one click rate, estimated rho           0.951       0.959       0.960       0.960
two user types, estimated rho           0.941       0.933       0.956       0.948
  (the same, rho 0)                     0.919       0.905       0.930       0.898
  (the same, the true ICC 0.45)         0.949       0.949       0.954       0.955
======================================  ==========  ==========  ==========  ==========

(mean estimate 0.02-0.04 for one rate, 0.45 for two types). tests/test_ratio_cr2.py checks the closed forms against
the dense impression-level computation (with and without the correlated working model), the ANOVA estimate against
statsmodels' analysis of variance, and the coverage against the binomial band of the level.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError
from onlineeval.stats._checks import check_alpha

__all__ = ["cr2_arm", "intra_user_correlation", "intra_user_correlation_values", "ratio_diff_cr2",
           "ratio_diff_cr2_values", "ratio_mean_cr2", "ratio_mean_cr2_values"]

#: :attr:`onlineeval.stats.Estimate.method` of :func:`ratio_diff_cr2`
METHOD = "delta-cr2-t"


def cr2_arm(x: NDArray[np.float64], y: NDArray[np.float64], icc: float = 0.0) -> tuple[float, float, float, float]:
    """``(R, var, tr, tr2)`` of one arm from its users' numerators ``x`` and denominators ``y`` (1-d float64):
    the ratio of sums, its CR2 variance, and the arm's parts of :math:`\\operatorname{tr}(A)` and
    :math:`\\operatorname{tr}(A^2)` (see the module docstring) under the working model of impressions correlated
    ``icc`` within a user (0: independent; :func:`_traces`). NaN variance and traces where the denominators do not
    sum to a positive number or one user holds all of them (leverage 1: the CR2 adjustment is undefined)."""
    n_total = float(y.sum())
    if not (n_total > 0 and math.isfinite(n_total)):
        return math.nan, math.nan, math.nan, math.nan
    r = float(x.sum()) / n_total
    p = y / n_total
    keep = 1.0 - p
    if not bool((keep > 0).all()):
        return r, math.nan, math.nan, math.nan
    e = x - r * y
    var = float(np.dot(e * e, 1.0 / keep)) / (n_total * n_total)
    if icc != 0.0:
        return (r, var, *_traces(y, p, keep, n_total, icc))
    w = p / keep
    w2 = w * w
    tr2 = (float(w2.sum()) - 2.0 * float(np.dot(w2, p)) + float(np.dot(w, p)) ** 2) / (n_total * n_total)
    return r, var, 1.0 / n_total, tr2


def _traces(y: NDArray[np.float64], p: NDArray[np.float64], keep: NDArray[np.float64], n_total: float,
            icc: float) -> tuple[float, float]:
    r"""An arm's parts of :math:`\operatorname{tr}(A\Phi)` and :math:`\operatorname{tr}(A\Phi A\Phi)` where the
    working model :math:`\Phi` correlates a user's impressions by :math:`\rho` = ``icc`` (the users' denominators
    ``y`` count them: :math:`\Phi 1_i = \lambda_i 1_i`, :math:`\lambda_i = 1 - \rho + \rho\, y_i`). The CR2
    variance is :math:`\sum_i (g_i' y)^2` with :math:`g_i = c_i (1_i - p_i 1)`, :math:`c_i^2 = 1 / (N^2 (1 -
    p_i))`, so :math:`g_i' \Phi g_k = c_i c_k (\delta_{ik} a_i - p_k a_i - p_i a_k + p_i p_k S)` with
    :math:`a_i = y_i \lambda_i`, :math:`S = \sum_i a_i`: a diagonal plus a rank-2 matrix, whose trace and squared
    Frobenius norm are sums over the users (``O(m)``). At :math:`\rho = 0` they are :func:`cr2_arm`'s own forms."""
    u = 1.0 / (n_total * n_total * keep)  # c_i^2
    a = y * (1.0 - icc + icc * y)
    s = float(a.sum())
    mdiag = p * (p * s - 2.0 * a)  # the rank-2 part's diagonal
    tr = float(np.dot(u, a + mdiag))
    uu = u * u
    sup2, supa = float(np.dot(u, p * p)), float(np.dot(u, p * a))
    tr2 = (float(np.dot(uu, a * (a + 2.0 * mdiag))) + 2.0 * float(np.dot(u, a * a)) * sup2 + 2.0 * supa * supa
           - 4.0 * s * supa * sup2 + s * s * sup2 * sup2)
    return tr, tr2


def intra_user_correlation(num: ArrayLike, den: ArrayLike, num_sq: ArrayLike, groups: ArrayLike | None = None
                           ) -> float:
    r"""The correlation of a user's impressions (the intraclass correlation of the per-impression values, users as
    classes), by one-way analysis of variance from per-user sums: ``num`` the sum of a user's values, ``den`` their
    number (each impression's denominator 1: queries, comparisons), ``num_sq`` the sum of their squares; ``groups``
    (e.g. the arm of each user) are fixed effects, each with its own mean.

    .. math::

        \hat\rho = \frac{MS_B - MS_W}{MS_B + (n_0 - 1)\, MS_W}, \quad
        MS_W = \frac{\sum_i (q_i - x_i^2 / y_i)}{N - m}, \quad
        MS_B = \frac{\sum_g \big(\sum_{i \in g} x_i^2 / y_i - X_g^2 / N_g\big)}{m - G}, \quad
        n_0 = \frac{N - \sum_g \sum_{i \in g} y_i^2 / N_g}{m - G},

    over the ``m`` users with impressions in ``G`` groups, clipped to [0, 1]; 0 where the data carry no
    information on it (no user with two impressions, or fewer users than two per group). The working model of
    :func:`ratio_diff_cr2` / :func:`ratio_mean_cr2`'s degrees of freedom (``icc``): under users whose own rates
    differ (a mixture of user types) independent impressions overstate the degrees of freedom.
    :func:`intra_user_correlation_values` is the same number on trusted arrays.

    Raises
    ------
    InputError
        For arrays of other lengths, negative counts or sums of squares, or a user whose sum of squares is below
        its sum's square over its count (not the squares of the same values).
    """
    x = np.asarray(num, dtype=np.float64).ravel()
    y = np.asarray(den, dtype=np.float64).ravel()
    q = np.asarray(num_sq, dtype=np.float64).ravel()
    codes = None if groups is None else _group_codes(groups)
    n_labels = x.size if codes is None else codes.size
    if not (x.size == y.size == q.size == n_labels):
        raise InputError(f"num, den, num_sq and groups must have one value per user each; got {x.size}, {y.size}, "
                         f"{q.size} and {n_labels}")
    if not (np.isfinite(x).all() and np.isfinite(y).all() and np.isfinite(q).all()):
        raise InputError("num, den and num_sq must be finite")
    if (y < 0).any() or (q < 0).any():
        raise InputError("den and num_sq must be >= 0 (counts of impressions, sums of squares)")
    on = np.flatnonzero(y > 0)
    short = q[on] < x[on] * x[on] / y[on] * (1.0 - 1e-9) - 1e-12
    if short.any():
        raise InputError(f"num_sq: user {int(on[np.flatnonzero(short)[0]])}'s sum of squares is below its sum's "
                         "square over its count, so it is not the sum of the squares of the same values")
    return intra_user_correlation_values(x, y, q, codes)


def intra_user_correlation_values(num: NDArray[np.float64], den: NDArray[np.float64], num_sq: NDArray[np.float64],
                                  groups: NDArray[np.integer] | None = None) -> float:
    """:func:`intra_user_correlation` on trusted 1-d float64 arrays (nothing checked), ``groups`` None (one group) or
    non-negative integer codes (a group's users share its code): the simulator's designs, at every checkpoint and
    per-batch look."""
    x, y, q, g = num, den, num_sq, groups
    on = y > 0
    if not on.all():  # users without impressions carry nothing
        x, y, q = x[on], y[on], q[on]
        g = None if g is None else g[on]
    between = x * x / y  # each user's share of the between-users sum of squares
    m, n_total = x.size, float(y.sum())
    if g is None:  # one group
        n_groups = 1 if m else 0
        gx, gy, gyy = np.array([x.sum()]), np.array([n_total]), np.array([np.dot(y, y)])
    else:
        present = np.bincount(g) > 0  # the groups with users who have impressions
        n_groups = int(present.sum())
        # each group's sums (X_g, N_g and the sum of y_i^2) in one pass each
        gx, gy = np.bincount(g, weights=x)[present], np.bincount(g, weights=y)[present]
        gyy = np.bincount(g, weights=y * y)[present]
    df_b, df_w = m - n_groups, n_total - m
    if df_b <= 0 or df_w <= 0:
        return 0.0
    ssb = float(between.sum()) - float((gx * gx / gy).sum())
    n0_sum = float((gyy / gy).sum())
    msb, msw = ssb / df_b, max(float((q - between).sum()), 0.0) / df_w
    n0 = (n_total - n0_sum) / df_b
    den_rho = msb + (n0 - 1.0) * msw
    if not den_rho > 0:
        return 0.0
    return float(min(1.0, max(0.0, (msb - msw) / den_rho)))


def _group_codes(groups: ArrayLike) -> NDArray[np.int64]:
    """Non-negative integer codes of ``groups`` (equal labels, equal codes): integer labels (and booleans) by
    :func:`onlineeval.rows.distinct_rows`, others by their sorted unique values."""
    a = np.asarray(groups).ravel()
    if a.dtype.kind in "biu":
        from onlineeval.rows import distinct_rows

        return distinct_rows(a.astype(np.int64)[:, None])[1]
    return np.unique(a, return_inverse=True)[1].ravel().astype(np.int64)


def _check_icc(icc: float) -> float:
    value = float(icc)
    if not 0.0 <= value <= 1.0:
        raise InputError(f"icc: the intra-user correlation must be in [0, 1], got {icc!r}")
    return value


def _combine(a: tuple[float, float, float, float], b: tuple[float, float, float, float]
             ) -> tuple[float, float, float, float]:
    """``(difference, var, tr, tr2)`` of arms ``a`` (A) and ``b`` (B) from :func:`cr2_arm` (independent arms:
    the variances and the traces add)."""
    return b[0] - a[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]


def ratio_diff_cr2_values(num_a: NDArray[np.float64], den_a: NDArray[np.float64], num_b: NDArray[np.float64],
                          den_b: NDArray[np.float64], alpha: float = 0.05, *, null: float = 0.0, icc: float = 0.0
                          ) -> tuple[tuple[float, float, float, float, float], float]:
    """:func:`ratio_diff_cr2`'s ``(estimate, se, ci_low, ci_high, pvalue)`` and degrees of freedom on trusted 1-d
    float64 arrays (nothing checked; NaN where undefined: see :func:`cr2_arm`)."""
    vals, df, _ = _values_of(*_combine(cr2_arm(num_a, den_a, icc), cr2_arm(num_b, den_b, icc)), float(null), alpha)
    return vals, df


def _values_of(est: float, var: float, tr: float, tr2: float, null: float, alpha: float
               ) -> tuple[tuple[float, float, float, float, float], float, float]:
    """``((estimate, se, ci_low, ci_high, pvalue), df, statistic)`` of an estimate with CR2 variance ``var`` and the
    traces ``tr``, ``tr2`` of its quadratic form (NaN where the variance is undefined)."""
    from onlineeval.stats.online import _tests

    if not (tr2 > 0 and math.isfinite(var)):
        return (est, math.nan, math.nan, math.nan, math.nan), math.nan, math.nan
    se, df = math.sqrt(var), tr * tr / tr2
    stat, p, lo, hi = _tests(np.asarray(est), np.asarray(se), float(null), check_alpha(alpha), np.asarray(df))
    return (est, se, float(lo), float(hi), float(p)), df, float(stat)


def ratio_mean_cr2_values(num: NDArray[np.float64], den: NDArray[np.float64], alpha: float = 0.05, *,
                          null: float = 0.0, icc: float = 0.0
                          ) -> tuple[tuple[float, float, float, float, float], float]:
    """:func:`ratio_mean_cr2`'s five numbers and degrees of freedom on trusted 1-d float64 arrays (nothing checked;
    NaN where undefined: see :func:`cr2_arm`)."""
    vals, df, _ = _values_of(*cr2_arm(num, den, icc), float(null), alpha)
    return vals, df


def _one_user(den: NDArray[np.float64], name: str) -> None:
    if int(np.count_nonzero(den > 0)) < 2:
        raise InputError(f"{name}: one user holds every denominator; the bias-reduced (CR2) variance needs at "
                         "least 2 users with positive denominators (use the delta method's function)")


def ratio_mean_cr2(num: ArrayLike, den: ArrayLike, alpha: float = 0.05, *, null: float = 0.0, icc: float = 0.0
                   ) -> Any:
    r"""A ratio metric :math:`R = \sum_i x_i / \sum_i y_i` over users for few users: the CR2 variance and Student's t
    with Bell and McCaffrey's degrees of freedom (one arm of the module docstring's forms: :math:`\nu = 1 /
    (\sum w_i^2 - 2 \sum w_i^2 p_i + (\sum w_i p_i)^2)`, ``G - 1`` for ``G`` users of equal denominators; the
    interleaving designs' ``test: delta_t``).

    Parameters and errors as :func:`onlineeval.stats.ratio_mean` (at least 2 users with positive denominators);
    ``icc`` as :func:`ratio_diff_cr2`'s.

    Returns
    -------
    Estimate
        ``method="delta-cr2-t"``, ``df`` the degrees of freedom; the estimate is ``ratio_mean``'s.
    """
    from onlineeval.stats.online import Estimate, _pairs

    x, y = _pairs(num, den, "")
    _one_user(y, "den")
    alpha = check_alpha(alpha)
    (est, se, lo, hi, p), df, stat = _values_of(*cr2_arm(x, y, _check_icc(icc)), float(null), alpha)
    return Estimate(est, se, lo, hi, p, int(x.size), stat, df, METHOD, alpha, float(null), None)


def ratio_diff_cr2(num_a: ArrayLike, den_a: ArrayLike, num_b: ArrayLike, den_b: ArrayLike, alpha: float = 0.05,
                   *, null: float = 0.0, icc: float = 0.0) -> Any:
    r"""Difference :math:`R_B - R_A` of a ratio metric between two arms for few users: the CR2 variance and
    Student's t with Bell and McCaffrey's degrees of freedom (see the module docstring).

    Parameters
    ----------
    num_a, den_a, num_b, den_b:
        Per-user numerators and denominators of arm A (control) and B (treatment), as for
        :func:`onlineeval.stats.ratio_diff`; at least 2 users with positive denominators per arm.
    alpha:
        Two-sided level of the interval. Default 0.05.
    null:
        Difference under the null hypothesis. Default 0.
    icc:
        The correlation of a user's impressions under which the degrees of freedom are computed (the working model;
        the variance is the same): 0 (default) treats them as independent, which overstates the df where users'
        own rates differ; :func:`intra_user_correlation` estimates it from the users' sums of squares (with the
        arms as ``groups``), and then the interval holds its level there too (module docstring). The denominators
        must then count the impressions (each impression's denominator 1).

    Returns
    -------
    Estimate
        ``method="delta-cr2-t"``, ``df`` the degrees of freedom, ``reference`` = :math:`R_A`. The estimate is
        :func:`~onlineeval.stats.ratio_diff`'s; the interval and p-value are
        :math:`\hat\Delta \pm t_{\nu}(1 - \alpha/2)\,\mathrm{se}` and the two-sided t-test.

    Raises
    ------
    InputError
        For arrays :func:`~onlineeval.stats.ratio_diff` refuses, for an arm whose denominators are all on one
        user (its leverage is 1: the CR2 variance is undefined), and for ``icc`` outside [0, 1].
    """
    from onlineeval.stats.online import Estimate, _pairs

    xa, ya = _pairs(num_a, den_a, "a")
    xb, yb = _pairs(num_b, den_b, "b")
    _one_user(ya, "den_a")
    _one_user(yb, "den_b")
    alpha = check_alpha(alpha)
    rho = _check_icc(icc)
    arm_a = cr2_arm(xa, ya, rho)
    (est, se, lo, hi, p), df, stat = _values_of(*_combine(arm_a, cr2_arm(xb, yb, rho)), float(null), alpha)
    return Estimate(est, se, lo, hi, p, int(xa.size + xb.size), stat, df, METHOD, alpha, float(null), arm_a[0])
