"""Statistics of online experiments, computed on per-user (per-cluster) values.

In an A/B test the randomisation unit is the user, not the query: one user's queries are
correlated, so every function here takes one value (or one numerator/denominator pair) per
user and treats users as the independent units. Query-level metrics such as clicks per
query are *ratio metrics* ``R = sum(num) / sum(den)`` over users, analysed with the delta
method (Deng, Knoblich and Lu 2018) or a cluster bootstrap.

All functions are vectorised over users (no Python loop over users or replicates) and
never modify the caller's arrays.

Conventions
-----------
* Differences are always ``B - A`` (treatment minus control).
* ``alpha`` is the two-sided level: the confidence interval has coverage ``1 - alpha``.
* When the estimated standard error is exactly 0 (every user has the same value, for
  example no clicks at all yet), the p-value is 1 if the estimate equals the null value
  and 0 otherwise, and the interval collapses to the point estimate; a t/z statistic of
  0/0 is reported as 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as _sps

from onlineeval.errors import InputError
from onlineeval.stats._checks import as_values, check_alpha

__all__ = [
    "Estimate",
    "welch_diff",
    "ratio_mean",
    "ratio_diff",
    "cluster_bootstrap_ratio",
    "ratio_linearization",
]


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with its uncertainty.

    Attributes
    ----------
    estimate:
        The point estimate (a difference ``B - A`` for two-sample methods).
    se:
        Its estimated standard error.
    ci_low, ci_high:
        The ``1 - alpha`` confidence interval.
    pvalue:
        Two-sided p-value of ``H0: estimate == null``.
    n:
        Number of clusters (users) that entered the computation (both arms together
        for two-sample methods).
    statistic:
        The test statistic ``(estimate - null) / se`` (t or z; for the bootstrap the same
        ratio with the bootstrap standard error, for information only).
    df:
        Degrees of freedom of the reference t distribution; ``inf`` for normal-based methods.
    method:
        Name of the method, e.g. ``"welch"``, ``"delta"``, ``"cluster-bootstrap-percentile"``.
    alpha:
        The level used for the interval.
    null:
        The value under the null hypothesis.
    reference:
        For two-sample methods the control (A) value, so ``estimate / reference`` is the
        relative change; for one-sample methods ``nan``.
    """

    estimate: float
    se: float
    ci_low: float
    ci_high: float
    pvalue: float
    n: int
    statistic: float
    df: float
    method: str
    alpha: float
    null: float = 0.0
    reference: float = math.nan

    @property
    def significant(self) -> bool:
        """Whether ``pvalue < alpha``."""
        return self.pvalue < self.alpha

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict (for JSON output)."""
        return asdict(self)


def _test_from_se(
    est: float, se: float, null: float, alpha: float, df: float
) -> tuple[float, float, float, float]:
    """Statistic, p-value and interval of a t (finite ``df``) or z (``df = inf``) test."""
    dist = _sps.norm if math.isinf(df) else _sps.t(df)
    if se > 0.0:
        stat = (est - null) / se
        p = float(2.0 * dist.sf(abs(stat)))
        q = float(dist.isf(alpha / 2.0))
        return stat, min(p, 1.0), est - q * se, est + q * se
    if est == null:
        return 0.0, 1.0, est, est
    return math.copysign(math.inf, est - null), 0.0, est, est


def welch_diff(x_a: ArrayLike, x_b: ArrayLike, alpha: float = 0.05, *, null: float = 0.0) -> Estimate:
    r"""Difference of means ``mean(x_b) - mean(x_a)`` with Welch's unequal-variance t-test.

    Parameters
    ----------
    x_a, x_b:
        One value per user in arm A (control) and B (treatment), at least 2 each.
    alpha:
        Two-sided level; the interval has coverage ``1 - alpha``. Default 0.05.
    null:
        Difference under the null hypothesis. Default 0.

    Returns
    -------
    Estimate
        ``method="welch"``, ``df`` the Welch-Satterthwaite degrees of freedom.

    Notes
    -----
    With sample variances :math:`s^2_A, s^2_B` (ddof 1) and sizes :math:`n_A, n_B`

    .. math::

        \hat\Delta = \bar x_B - \bar x_A,\qquad
        \mathrm{se} = \sqrt{s^2_A/n_A + s^2_B/n_B},\qquad
        \nu = \frac{(s^2_A/n_A + s^2_B/n_B)^2}
                   {\frac{(s^2_A/n_A)^2}{n_A-1} + \frac{(s^2_B/n_B)^2}{n_B-1}}

    and :math:`t = (\hat\Delta - \Delta_0)/\mathrm{se}` is referred to Student's t with
    :math:`\nu` degrees of freedom (Welch 1947, Biometrika 34:28-35).
    """
    a = as_values(x_a, "x_a", min_size=2)
    b = as_values(x_b, "x_b", min_size=2)
    alpha = check_alpha(alpha)
    na, nb = a.size, b.size
    va, vb = a.var(ddof=1) / na, b.var(ddof=1) / nb
    est = float(b.mean() - a.mean())
    se = math.sqrt(va + vb)
    denom = va * va / (na - 1) + vb * vb / (nb - 1)
    df = float((va + vb) ** 2 / denom) if denom > 0 else float(na + nb - 2)
    stat, p, lo, hi = _test_from_se(est, se, float(null), alpha, df)
    return Estimate(est, se, lo, hi, p, na + nb, stat, df, "welch", alpha, float(null), float(a.mean()))


def _pairs(num: ArrayLike, den: ArrayLike, arm: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    sfx = f"_{arm}" if arm else ""
    x = as_values(num, f"num{sfx}", min_size=2)
    y = as_values(den, f"den{sfx}", min_size=2)
    if x.size != y.size:
        raise InputError(f"num{sfx} and den{sfx} must have one value per user each; got {x.size} and {y.size}")
    if (y < 0).any():
        raise InputError(f"den{sfx}: denominators must be >= 0 (e.g. a count of queries)")
    if y.sum() <= 0:
        raise InputError(f"den{sfx}: the denominators sum to 0, so the ratio is undefined")
    return x, y


def ratio_linearization(num: ArrayLike, den: ArrayLike) -> tuple[float, NDArray[np.float64]]:
    r"""Ratio :math:`R = \sum x_i / \sum y_i` and its per-user influence values.

    Returns ``(R, e)`` with :math:`e_i = (x_i - R\,y_i)/\bar y`, the linearisation of
    :math:`R` used by the delta method: :math:`\operatorname{Var}(\hat R) \approx
    \operatorname{Var}(e)/n`. Per-user influence values let callers combine ratio metrics
    with any user-level analysis (e.g. a t-test on ``e``).
    """
    x, y = _pairs(num, den, "")
    r = float(x.sum() / y.sum())
    return r, (x - r * y) / y.mean()


def _delta_var(x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, float]:
    """Ratio and its delta-method variance (sample moments with ddof 1)."""
    n = x.size
    r = float(x.sum() / y.sum())
    ybar = float(y.mean())
    e = x - r * y  # mean exactly 0 up to rounding
    e = e - e.mean()
    var = float(e @ e) / ((n - 1) * n * ybar * ybar)
    return r, var


def ratio_mean(
    num: ArrayLike, den: ArrayLike, alpha: float = 0.05, *, null: float = 0.0
) -> Estimate:
    r"""A ratio metric :math:`R = \sum_i x_i / \sum_i y_i` over users with its delta-method SE.

    Parameters
    ----------
    num, den:
        Per-user numerator (e.g. the user's clicks) and denominator (e.g. the user's
        queries), at least 2 users; denominators must be >= 0 with a positive sum.
        Users with ``den == 0`` (and ``num == 0``) may be included: they count as clusters.
    alpha:
        Two-sided level of the normal-based interval. Default 0.05.
    null:
        Value of :math:`R` under the null hypothesis. Default 0 (e.g. for an interleaving
        preference ``Delta_AB`` with ``num = (wins - losses)/2`` and ``den`` = impressions
        with a click).

    Returns
    -------
    Estimate
        ``method="delta"``, ``df = inf``.

    Notes
    -----
    With per-user means :math:`\bar x, \bar y`, :math:`R = \bar x/\bar y` and the delta
    method (Deng, Knoblich and Lu 2018, "Applying the delta method in metric analytics",
    KDD, eq. 4):

    .. math::

        \widehat{\operatorname{Var}}(\hat R) = \frac{1}{n\,\bar y^2}
            \left(s_x^2 - 2 R\, s_{xy} + R^2 s_y^2\right)
            = \frac{1}{n(n-1)\,\bar y^2}\sum_i (x_i - R y_i)^2,

    with sample (co)variances of ddof 1. When every ``den`` is 1 this is the ordinary
    mean and its standard error :math:`s_x/\sqrt n`. It equals the cluster-robust
    (clustered by user, small-sample factor :math:`G/(G-1)`) standard error of the
    mean of the query-level values.
    """
    x, y = _pairs(num, den, "")
    alpha = check_alpha(alpha)
    r, var = _delta_var(x, y)
    se = math.sqrt(var)
    stat, p, lo, hi = _test_from_se(r, se, float(null), alpha, math.inf)
    return Estimate(r, se, lo, hi, p, x.size, stat, math.inf, "delta", alpha, float(null))


def ratio_diff(
    num_a: ArrayLike,
    den_a: ArrayLike,
    num_b: ArrayLike,
    den_b: ArrayLike,
    alpha: float = 0.05,
    *,
    null: float = 0.0,
) -> Estimate:
    r"""Difference :math:`R_B - R_A` of a ratio metric between two arms (delta method).

    Parameters
    ----------
    num_a, den_a, num_b, den_b:
        Per-user numerators and denominators of arm A (control) and B (treatment), at
        least 2 users per arm; see :func:`ratio_mean`.
    alpha:
        Two-sided level of the normal-based interval. Default 0.05.
    null:
        Difference under the null hypothesis. Default 0.

    Returns
    -------
    Estimate
        ``method="delta"``, ``df = inf``, ``reference`` = :math:`R_A`.

    Notes
    -----
    The arms are independent (users are randomised), so

    .. math::

        \widehat{\operatorname{Var}}(\hat R_B - \hat R_A) =
            \widehat{\operatorname{Var}}(\hat R_A) + \widehat{\operatorname{Var}}(\hat R_B),

    each from the delta method of :func:`ratio_mean` (Deng, Knoblich and Lu 2018), and
    :math:`z = (\hat R_B - \hat R_A - \Delta_0)/\mathrm{se}` is referred to N(0, 1).
    """
    xa, ya = _pairs(num_a, den_a, "a")
    xb, yb = _pairs(num_b, den_b, "b")
    alpha = check_alpha(alpha)
    ra, va = _delta_var(xa, ya)
    rb, vb = _delta_var(xb, yb)
    est = rb - ra
    se = math.sqrt(va + vb)
    stat, p, lo, hi = _test_from_se(est, se, float(null), alpha, math.inf)
    return Estimate(est, se, lo, hi, p, xa.size + xb.size, stat, math.inf, "delta", alpha, float(null), ra)


#: Upper bound on the number of resampled indices held in memory at once.
_BOOT_BLOCK_CELLS = 1 << 22


def cluster_bootstrap_ratio(
    num: ArrayLike,
    den: ArrayLike,
    n_boot: int,
    rng: np.random.Generator,
    alpha: float = 0.05,
    *,
    null: float = 0.0,
) -> Estimate:
    r"""Ratio :math:`R = \sum x_i/\sum y_i` with a cluster (per-user) percentile bootstrap.

    Users are resampled with replacement; the ratio is recomputed from the resampled
    users' sums. Resampling is vectorised: index matrices of at most
    ``2**22`` cells are drawn per block, so there is no Python loop over users or
    replicates within a block.

    Parameters
    ----------
    num, den:
        Per-user numerator and denominator (see :func:`ratio_mean`), at least 2 users.
    n_boot:
        Number of bootstrap replicates (>= 100), e.g. 10,000.
    rng:
        The random generator; the result is a deterministic function of its state.
    alpha:
        Two-sided level: the interval is the ``alpha/2`` and ``1 - alpha/2`` quantiles of
        the replicates (linear interpolation). Default 0.05.
    null:
        Value of :math:`R` under the null hypothesis. Default 0.

    Returns
    -------
    Estimate
        ``method="cluster-bootstrap-percentile"``; ``se`` is the standard deviation of the
        replicates; the p-value is the percentile-bootstrap two-sided p-value

        .. math::

            p = \min\left(1,\; 2\min\left(\frac{1 + \#\{R^*_b \le R_0\}}{B + 1},
                \frac{1 + \#\{R^*_b \ge R_0\}}{B + 1}\right)\right),

        consistent with the interval (Efron and Tibshirani 1993, ch. 13 and 16).

    Raises
    ------
    InputError
        When a replicate has no positive denominator (too few users with ``den > 0``).
    """
    x, y = _pairs(num, den, "")
    alpha = check_alpha(alpha)
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed))")
    n_boot = int(n_boot)
    if n_boot < 100:
        raise ValueError(f"n_boot must be >= 100, got {n_boot}")
    n = x.size
    r = float(x.sum() / y.sum())
    reps = np.empty(n_boot)
    block = max(1, min(n_boot, _BOOT_BLOCK_CELLS // n))
    for start in range(0, n_boot, block):
        stop = min(start + block, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))
        sy = y[idx].sum(axis=1)
        if (sy <= 0).any():
            raise InputError(
                "cluster bootstrap: a resample has no user with a positive denominator; "
                "too few users with den > 0 for a bootstrap"
            )
        reps[start:stop] = x[idx].sum(axis=1) / sy
    lo, hi = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    se = float(reps.std(ddof=1))
    null = float(null)
    below = int(np.count_nonzero(reps <= null))
    above = int(np.count_nonzero(reps >= null))
    p = min(1.0, 2.0 * (1 + min(below, above)) / (n_boot + 1))
    stat = (r - null) / se if se > 0 else (0.0 if r == null else math.copysign(math.inf, r - null))
    return Estimate(
        r, se, float(lo), float(hi), p, n, stat, math.inf, "cluster-bootstrap-percentile", alpha, null
    )
