"""Statistics of online experiments, computed on per-user (per-cluster) values.

In an A/B test the randomisation unit is the user, not the query: one user's queries are
correlated, so every function here takes one value (or one numerator/denominator pair) per
user and treats users as the independent units. Query-level metrics such as clicks per
query are *ratio metrics* ``R = sum(num) / sum(den)`` over users, analysed with the delta
method (Deng, Knoblich and Lu 2018) or a cluster bootstrap.

All functions are vectorised over users (no Python loop over users or replicates) and
never modify the caller's arrays. Each scalar function (returning an :class:`Estimate`)
has a ``*_batch`` twin that takes arrays with users on the last axis and any leading
shape (replicates x daily checkpoints, say) and returns :class:`Estimates`; the scalar
functions are the batch kernels applied to one row, so both give identical numbers.

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
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import special as _spc

from onlineeval.errors import InputError
from onlineeval.stats._checks import as_values, check_alpha

__all__ = [
    "percentile_pvalue",
    "Estimate",
    "Estimates",
    "welch_diff",
    "welch_diff_batch",
    "ratio_mean_batch",
    "ratio_diff_batch",
    "ratio_mean",
    "ratio_diff",
    "EstimateValues",
    "ratio_mean_values",
    "ratio_diff_values",
    "cluster_bootstrap_ratio",
    "cluster_resample_counts",
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
        relative change; ``None`` for one-sample methods.
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
    reference: float | None = None

    @property
    def significant(self) -> bool:
        """Whether ``pvalue < alpha``."""
        return self.pvalue < self.alpha

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python dict (for JSON output)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Estimates:
    """Many estimates at once: the batch counterpart of :class:`Estimate`.

    Every array field has the batch shape (the leading shape of the inputs); ``method``,
    ``alpha`` and ``null`` are shared. Rows whose ratio is undefined (denominators summing
    to 0) hold NaN. ``est[i]`` (or ``est[i, j]``) gives one :class:`Estimate`.
    """

    estimate: NDArray[np.float64]
    se: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    pvalue: NDArray[np.float64]
    n: NDArray[np.int64]
    statistic: NDArray[np.float64]
    df: NDArray[np.float64]
    method: str
    alpha: float
    null: float
    reference: NDArray[np.float64] | None

    def __post_init__(self) -> None:
        for name in ("estimate", "se", "ci_low", "ci_high", "pvalue", "statistic", "df"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        if self.reference is not None:
            object.__setattr__(self, "reference", np.asarray(self.reference, dtype=np.float64))
        object.__setattr__(self, "n", np.asarray(self.n, dtype=np.int64))

    @property
    def shape(self) -> tuple[int, ...]:
        """The batch shape."""
        return tuple(self.estimate.shape)

    @property
    def significant(self) -> NDArray[np.bool_]:
        """``pvalue < alpha`` (False where the p-value is NaN)."""
        with np.errstate(invalid="ignore"):
            return self.pvalue < self.alpha

    def __getitem__(self, index: int | tuple[int, ...]) -> Estimate:
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != len(self.shape):
            raise IndexError(f"index {index!r} does not address one estimate of a batch of shape {self.shape}")
        return Estimate(
            float(self.estimate[idx]), float(self.se[idx]), float(self.ci_low[idx]), float(self.ci_high[idx]),
            float(self.pvalue[idx]), int(self.n[idx]), float(self.statistic[idx]), float(self.df[idx]),
            self.method, self.alpha, self.null,
            None if self.reference is None else float(self.reference[idx]),
        )  # fmt: skip

    def to_frame(self) -> pd.DataFrame:
        """One row per estimate (batch flattened in C order)."""
        cols = ("estimate", "se", "ci_low", "ci_high", "pvalue", "n", "statistic", "df")
        out = pd.DataFrame({c: np.ravel(getattr(self, c)) for c in cols})
        if self.reference is not None:
            out["reference"] = np.ravel(self.reference)
        out["method"], out["alpha"], out["null"] = self.method, self.alpha, self.null
        return out


def _tests(
    est: NDArray[np.float64],
    se: NDArray[np.float64],
    null: float,
    alpha: float,
    df: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Statistic, p-value and interval of t (finite ``df``) or z (``df = inf``) tests, elementwise.

    ``se == 0`` follows the module convention; NaN estimates give NaN everywhere.
    """
    est, se, df = np.broadcast_arrays(est, se, df)
    finite_df = np.isfinite(df)
    safe_df = np.where(finite_df, df, 1.0)
    pos = se > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(pos, (est - null) / np.where(pos, se, 1.0), 0.0)
    p_t = 2.0 * _spc.stdtr(safe_df, -np.abs(stat))
    p_z = 2.0 * _spc.ndtr(-np.abs(stat))
    q = np.where(finite_df, -_spc.stdtrit(safe_df, alpha / 2.0), -_spc.ndtri(alpha / 2.0))
    p = np.minimum(np.where(finite_df, p_t, p_z), 1.0)
    same = est == null
    stat = np.where(pos, stat, np.where(same, 0.0, np.copysign(np.inf, est - null)))
    p = np.where(pos, p, np.where(same, 1.0, 0.0))
    lo = np.where(pos, est - q * se, est)
    hi = np.where(pos, est + q * se, est)
    undefined = np.isnan(est) | np.isnan(se)
    if undefined.any():
        stat, p, lo, hi = (np.where(undefined, np.nan, a) for a in (stat, p, lo, hi))
    return stat, p, lo, hi


def _as_batch(x: ArrayLike, name: str, min_users: int = 2) -> NDArray[np.float64]:
    """A float64 array with users on the last axis (copied; finite values only)."""
    try:
        arr = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected an array of numbers") from None
    if arr.ndim == 0:
        raise InputError(f"{name}: expected an array with users on the last axis, got a scalar")
    if arr.shape[-1] < min_users:
        raise InputError(f"{name}: needs at least {min_users} users on the last axis, got {arr.shape[-1]}")
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"{name}: value at index {where} is {arr[where]!r}; only finite numbers are allowed")
    arr.flags.writeable = False
    return arr


def _batch_pairs(
    num: ArrayLike, den: ArrayLike, arm: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    sfx = f"_{arm}" if arm else ""
    x = _as_batch(num, f"num{sfx}")
    y = _as_batch(den, f"den{sfx}")
    if x.shape != y.shape:
        raise InputError(f"num{sfx} and den{sfx} must have the same shape (one value per user); got {x.shape} and "
                         f"{y.shape}")
    if (y < 0).any():
        raise InputError(f"den{sfx}: denominators must be >= 0 (e.g. a count of queries)")
    return x, y


def _welch_kernel(
    a: NDArray[np.float64], b: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Difference of means, its SE, Welch df and the mean of A over the last axis."""
    na, nb = a.shape[-1], b.shape[-1]
    ma, mb = a.mean(axis=-1), b.mean(axis=-1)
    va, vb = a.var(axis=-1, ddof=1) / na, b.var(axis=-1, ddof=1) / nb
    va, vb = np.broadcast_arrays(va, vb)
    denom = va * va / (na - 1) + vb * vb / (nb - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denom > 0, (va + vb) ** 2 / np.where(denom > 0, denom, 1.0), float(na + nb - 2))
    return mb - ma, np.sqrt(va + vb), df, np.broadcast_to(ma, df.shape)


def _delta_kernel(
    x: NDArray[np.float64], y: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ratio and delta-method variance over the last axis (ddof 1); NaN where sum(den) == 0."""
    n = x.shape[-1]
    sy = y.sum(axis=-1)
    ok = sy > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(ok, x.sum(axis=-1) / np.where(ok, sy, 1.0), np.nan)
        e = x - np.where(ok, r, 0.0)[..., None] * y  # mean exactly 0 up to rounding
        e = e - e.mean(axis=-1, keepdims=True)
        ybar = sy / n
        var = np.where(ok, np.einsum("...i,...i->...", e, e) / ((n - 1) * n * np.where(ok, ybar, 1.0) ** 2), np.nan)
    return r, var


def _delta_1d(x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[Any, Any]:
    """:func:`_delta_kernel` of one row (1-d ``x``, ``y``): the same operations on the same values (so the
    same bits, tested), with scalar branches instead of ``where`` passes over 0-d arrays."""
    n = x.shape[-1]
    sy = y.sum()
    if not sy > 0:
        return math.nan, math.nan
    r = x.sum() / sy
    e = x - r * y  # mean exactly 0 up to rounding
    e = e - e.mean()
    ybar = np.asarray(sy / n)  # ** 2 of an array: np.square, as in the kernel
    return r, np.einsum("...i,...i->...", e, e) / ((n - 1) * n * ybar**2)


def _one(batch: Estimates) -> Estimate:
    """The single estimate of a batch computed from 1-d inputs."""
    return batch[()]


def welch_diff_batch(x_a: ArrayLike, x_b: ArrayLike, alpha: float = 0.05, *, null: float = 0.0) -> Estimates:
    """:func:`welch_diff` for many data sets at once.

    ``x_a`` has shape ``(..., n_a)`` and ``x_b`` shape ``(..., n_b)`` (users on the last
    axis, leading shapes broadcast), e.g. one row per replicate or checkpoint. Returns
    :class:`Estimates` of the broadcast leading shape.
    """
    a = _as_batch(x_a, "x_a")
    b = _as_batch(x_b, "x_b")
    alpha = check_alpha(alpha)
    try:
        est, se, df, ref = _welch_kernel(a, b)
    except ValueError:
        raise InputError(f"x_a and x_b: leading shapes {a.shape[:-1]} and {b.shape[:-1]} do not broadcast") from None
    stat, p, lo, hi = _tests(est, se, float(null), alpha, df)
    n = np.full(est.shape, a.shape[-1] + b.shape[-1], dtype=np.int64)
    return Estimates(est, se, lo, hi, p, n, stat, df, "welch", alpha, float(null), np.asarray(ref))


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
        ``method="welch"``, ``df`` the Welch-Satterthwaite degrees of freedom,
        ``reference`` the mean of A.

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
    return _one(welch_diff_batch(a, b, alpha, null=null))


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


def ratio_mean_batch(num: ArrayLike, den: ArrayLike, alpha: float = 0.05, *, null: float = 0.0) -> Estimates:
    """:func:`ratio_mean` for many data sets at once.

    ``num`` and ``den`` have the same shape ``(..., n_users)``; users whose denominator is
    0 (e.g. not yet seen at a checkpoint) count as clusters, which changes the variance
    only by the factor :math:`n/(n-1)`. Rows whose denominators sum to 0 give NaN.
    """
    x, y = _batch_pairs(num, den, "")
    alpha = check_alpha(alpha)
    r, var = _delta_kernel(x, y)
    se = np.sqrt(var)
    df = np.full(r.shape, np.inf)
    stat, p, lo, hi = _tests(r, se, float(null), alpha, df)
    n = np.full(r.shape, x.shape[-1], dtype=np.int64)
    return Estimates(r, se, lo, hi, p, n, stat, df, "delta", alpha, float(null), None)


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
    return _one(ratio_mean_batch(x, y, alpha, null=null))


class EstimateValues(NamedTuple):
    """The five numbers of an :class:`Estimate`, as Python floats (the lean paths' result)."""

    estimate: float
    se: float
    ci_low: float
    ci_high: float
    pvalue: float


def _z_values(est: NDArray[np.float64], se: NDArray[np.float64], null: float, alpha: float) -> EstimateValues:
    """:func:`_tests` with ``df = inf`` for one estimate, in Python floats: the same IEEE operations in the
    same order and the same special functions (so the same bits, tested against ``_tests``), without the
    elementwise ``where`` passes over 0-d arrays (about 5 us instead of 50)."""
    e, s = float(est), float(se)
    if math.isnan(e) or math.isnan(s):
        return EstimateValues(e, s, math.nan, math.nan, math.nan)
    if s > 0:
        stat = (e - null) / s
        p = min(2.0 * float(_spc.ndtr(-abs(stat))), 1.0)
        q = -float(_spc.ndtri(alpha / 2.0))
        return EstimateValues(e, s, e - q * s, e + q * s, p)
    return EstimateValues(e, s, e, e, 1.0 if e == null else 0.0)


def ratio_mean_values(
    num: NDArray[np.float64], den: NDArray[np.float64], alpha: float = 0.05, *, null: float = 0.0
) -> EstimateValues:
    """:func:`ratio_mean`'s estimate, SE, interval and p-value: a lean path for a caller's repeated calls on
    trusted data (the simulator's checkpoints and per-batch looks).

    ``num`` and ``den`` must be 1-d float64 arrays of the same size (at least 2 users), finite, with
    denominators >= 0 summing to more than 0: nothing is checked or copied (a zero sum gives NaN where
    :func:`ratio_mean` raises). The arithmetic is :func:`ratio_mean`'s (the same kernel and tests), so
    the numbers are bit-identical (tested); no :class:`Estimate` is built.
    """
    r, var = _delta_1d(num, den)
    return _z_values(r, np.sqrt(var), float(null), check_alpha(alpha))


def ratio_diff_values(
    num_a: NDArray[np.float64],
    den_a: NDArray[np.float64],
    num_b: NDArray[np.float64],
    den_b: NDArray[np.float64],
    alpha: float = 0.05,
    *,
    null: float = 0.0,
) -> EstimateValues:
    """:func:`ratio_diff`'s estimate, SE, interval and p-value on trusted 1-d float64 arrays (as
    :func:`ratio_mean_values`: nothing checked or copied; bit-identical to :func:`ratio_diff`, tested)."""
    ra, va = _delta_1d(num_a, den_a)
    rb, vb = _delta_1d(num_b, den_b)
    return _z_values(rb - ra, np.sqrt(va + vb), float(null), check_alpha(alpha))


def ratio_diff_batch(
    num_a: ArrayLike,
    den_a: ArrayLike,
    num_b: ArrayLike,
    den_b: ArrayLike,
    alpha: float = 0.05,
    *,
    null: float = 0.0,
) -> Estimates:
    """:func:`ratio_diff` for many data sets at once.

    Arrays of arm A have shape ``(..., n_a)``, of arm B ``(..., n_b)`` (leading shapes
    broadcast), e.g. cumulative per-user sums at each daily checkpoint. Rows where an
    arm's denominators sum to 0 give NaN.
    """
    xa, ya = _batch_pairs(num_a, den_a, "a")
    xb, yb = _batch_pairs(num_b, den_b, "b")
    alpha = check_alpha(alpha)
    ra, va = _delta_kernel(xa, ya)
    rb, vb = _delta_kernel(xb, yb)
    try:
        est, se, ref = np.broadcast_arrays(rb - ra, np.sqrt(va + vb), ra)
    except ValueError:
        raise InputError(f"arms A and B: leading shapes {xa.shape[:-1]} and {xb.shape[:-1]} do not broadcast") from None
    df = np.full(est.shape, np.inf)
    stat, p, lo, hi = _tests(est, se, float(null), alpha, df)
    n = np.full(est.shape, xa.shape[-1] + xb.shape[-1], dtype=np.int64)
    return Estimates(est, se, lo, hi, p, n, stat, df, "delta", alpha, float(null), np.array(ref))


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
    return _one(ratio_diff_batch(xa, ya, xb, yb, alpha, null=null))


#: Upper bound on the number of resampled indices held in memory at once.
_BOOT_BLOCK_CELLS = 1 << 22


def percentile_pvalue(reps: ArrayLike, null: float = 0.0) -> float:
    """The percentile bootstrap's two-sided p-value of ``null`` from ``B`` resampled statistics ``reps``:
    ``min(1, 2 (1 + min(#(reps <= null), #(reps >= null))) / (B + 1))`` (Davison and Hinkley 1997, eq. 4.11:
    never 0 with finitely many resamples; below ``alpha`` when the percentile interval excludes ``null``)."""
    reps = np.asarray(reps, dtype=np.float64)
    below = int(np.count_nonzero(reps <= null))
    above = int(np.count_nonzero(reps >= null))
    return min(1.0, 2.0 * (1 + min(below, above)) / (reps.size + 1))


def cluster_resample_counts(rng: np.random.Generator, n_clusters: int, n_boot: int,
                            cells: int = _BOOT_BLOCK_CELLS) -> Iterator[tuple[int, int, np.ndarray]]:
    """A cluster bootstrap's resamples as counts, in blocks of at most about ``cells`` counts:
    ``(start, stop, counts)`` with ``counts`` (stop - start, n_clusters) float64, how often each of the
    ``n_clusters`` clusters is drawn when as many are drawn with replacement: the draws of
    :func:`cluster_bootstrap_ratio` (``rng.integers(0, n_clusters, (stop - start, n_clusters))`` per block),
    counted, so that a statistic of per-cluster sums is ``counts @ sums`` (and one that is not a sum, such as
    adaptive IPS's choice, can be recomputed per resample from them)."""
    g = int(n_clusters)
    block = max(1, min(int(n_boot), int(cells) // max(g, 1)))
    for start in range(0, int(n_boot), block):
        stop = min(start + block, int(n_boot))
        m = stop - start
        idx = rng.integers(0, g, size=(m, g))
        idx += np.arange(m, dtype=idx.dtype)[:, None] * g
        yield start, stop, np.bincount(idx.ravel(), minlength=m * g).reshape(m, g).astype(np.float64)


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
    p = percentile_pvalue(reps, null)
    stat = (r - null) / se if se > 0 else (0.0 if r == null else math.copysign(math.inf, r - null))
    return Estimate(
        r, se, float(lo), float(hi), p, n, stat, math.inf, "cluster-bootstrap-percentile", alpha, null
    )
