r"""CUPED: variance reduction of A/B differences with pre-experiment data (regression adjustment).

Estimand and assumption
-----------------------
The estimand is unchanged: the difference ``B - A`` of a per-user mean or of a ratio metric
:math:`\sum x / \sum y`. Each user also has a covariate measured *before* the experiment (the
same metric in a pre-period, when both arms ran A), which the treatment cannot affect and
whose distribution is therefore the same in both arms. Subtracting its (expectation-zero)
arm difference times a coefficient :math:`\theta` leaves the estimate unbiased and removes
the part of the variance the covariate explains (Deng, Xu, Kohavi and Walker 2013, "Improving
the sensitivity of online controlled experiments by utilizing pre-experiment data", WSDM):

.. math::

    \hat\Delta_{cv} = (\bar Y_B - \bar Y_A) - \theta^\top(\bar X_B - \bar X_A),\qquad
    \operatorname{Var}(\hat\Delta_{cv}) = (1 - \rho^2)\operatorname{Var}(\bar Y_B - \bar Y_A)

for one covariate with correlation :math:`\rho`, at the optimal
:math:`\theta = \operatorname{Cov}(Y, X)/\operatorname{Var}(X)`.

Conventions
-----------
* :math:`\theta` is pooled over the arms: the least-squares slope of the within-arm centred
  outcome on the within-arm centred covariates, which is exactly the coefficient of the
  covariates in the OLS regression ``y ~ 1 + arm + covariates`` (so the adjusted difference
  equals that regression's arm coefficient, Lin 2013 / ANCOVA).
* **Users without pre-period activity** (new users): their pre value is set to 0 and an
  indicator "has pre-period activity" is added as a second covariate (Deng et al. 2013,
  sec. 3.4, missing pre-period data). The indicator's arm difference also has expectation 0,
  so the estimate stays unbiased, and users without history are adjusted only by their
  group mean instead of being treated as "pre value 0". When every user (or no user) of a
  row has pre-period activity the indicator is constant and drops out (pseudo-inverse); when
  no user has pre-period data the estimate is the unadjusted one.
* Ratio metrics use the delta method: the per-user influence values
  :math:`e_i = (x_i - \hat R_j y_i)/\bar y_j` of the arm's ratio (Deng, Knoblich and Lu 2018)
  are regressed on the influence values of the pre-period ratio; the adjusted difference is
  :math:`(\hat R_B - \hat R_A) - \theta^\top(\hat R^{pre}_B - \hat R^{pre}_A, \ \bar m_B - \bar m_A)`.
* Per-user means (:func:`cuped_mean`): a Welch-type t with the slope's own error, leverage-corrected arm
  variances and Satterthwaite df (:mod:`onlineeval.stats.cuped_welch`); the unadjusted half is Welch's test.
  Ratio metrics: the delta method's standard errors of the adjusted influence values, :math:`\theta` held
  known (its estimation error is :math:`O(1/n)`), with normal tests and intervals (``df = inf``).
* ``variance_reduction`` is :math:`1 - \mathrm{se}^2_{cv}/\mathrm{se}^2` (estimated; it can be
  slightly negative for an uninformative covariate in a small sample).
* **A covariate that is constant up to rounding drops out** like an exactly constant one
  (:math:`\theta = 0` for it): its pooled within-arm sum of squares at most
  :data:`NOISE_SHARE` of its scale, i.e. a root-mean-square variation below about 1.5e-11 of
  its level. Centring values that are equal in exact arithmetic (every user's pre-period value
  0.3, or every user's pre-period ratio the arm's, not exactly representable) leaves rounding
  residuals of about 1e-17 whose regression coefficient would be about 1e13 and their
  correlation with the outcome arbitrary. Scale: the covariate's sum of squares for
  :func:`cuped_mean`; for ratio metrics :math:`\sum_j n_j (\hat R^{pre}_j)^2`, the size of
  the terms :math:`\hat R^{pre}_j q_i / \bar q_j` whose rounding the influence values carry
  (their variation beyond it is real: below it only for a pre-period denominator spread by a
  factor of more than about 3e4 in the root-mean-square).

Everything is vectorised: users on the last axis, any leading shape (replicates x daily
checkpoints); the caller's arrays are never modified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError
from onlineeval.stats._checks import check_alpha
from onlineeval.stats.online import EstimateValues, Estimates, _as_batch, _tests, _welch_kernel, _z_values

__all__ = ["CupedResult", "cuped_mean", "cuped_ratio", "cuped_ratio_adjusted"]


@dataclass(frozen=True)
class CupedResult:
    """CUPED-adjusted and unadjusted estimates of a difference ``B - A``.

    Attributes
    ----------
    adjusted:
        The CUPED estimate (``method="cuped-welch"`` or ``"cuped-delta"``), batch shape ``(...)``.
    unadjusted:
        The plain difference: Welch's test (:func:`cuped_mean`) or the delta method's z (ratios).
    theta:
        Shape ``(..., 2)``: the coefficients of the pre-period value and of the indicator of
        pre-period activity (0 where the indicator is constant).
    variance_reduction:
        Shape ``(...)``: :math:`1 - \\mathrm{se}^2_{cv}/\\mathrm{se}^2`.
    n_without_pre:
        Shape ``(...)``: users (both arms) without pre-period activity.
    """

    adjusted: Estimates
    unadjusted: Estimates
    theta: NDArray[np.float64]
    variance_reduction: NDArray[np.float64]
    n_without_pre: NDArray[np.int64]


def _active(mask: ArrayLike | None, shape: tuple[int, ...], name: str) -> NDArray[np.bool_]:
    if mask is None:
        return np.ones(shape, dtype=bool)
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise InputError(f"{name}: expected a boolean array (True = the user has pre-period activity)")
    try:
        return np.broadcast_to(m, shape)
    except ValueError:
        raise InputError(f"{name}: shape {m.shape} does not match the users' shape {shape}") from None


def _same_users(a: NDArray[np.float64], b: NDArray[np.float64], names: str) -> None:
    if a.shape[-1] != b.shape[-1]:
        raise InputError(
            f"{names} must have one value per user (the same last axis); got {a.shape[-1]} and {b.shape[-1]} users"
        )


def _wmean(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return x.mean(axis=-1)


def _dot(u: NDArray[np.float64], v: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.einsum("...i,...i->...", u, v)


def _centre(v: NDArray[np.float64]) -> NDArray[np.float64]:
    return v - v.mean(axis=-1, keepdims=True)


def _adjust(
    ya: NDArray[np.float64],
    x1a: NDArray[np.float64],
    x2a: NDArray[np.float64] | None,
    yb: NDArray[np.float64],
    x1b: NDArray[np.float64],
    x2b: NDArray[np.float64] | None,
    diff: NDArray[np.float64],
    xdiff1: NDArray[np.float64],
    xdiff2: NDArray[np.float64] | None,
    x2c: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]] | None = None,
    raw: bool = True,
    floor1: Any = 0.0,
    welch: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], Any, Any]:
    """Pooled within-arm theta, adjusted difference, adjusted and unadjusted variances, adjusted df (``None``).

    Arrays have users on the last axis; ``x2*`` (the activity indicator) may be ``None``.
    ``diff`` is the unadjusted difference, ``xdiff*`` the arm differences of the covariates'
    estimators. The 2 x 2 normal equations are solved in closed form; a covariate without
    within-arm variance, or collinear with the other, drops out (theta 0 for it). ``x2c``: the
    indicator's centred values and ``d`` (:func:`_centred_indicator`) when the caller has them;
    ``raw=False`` leaves the unadjusted variance out (None). ``floor1``: the first covariate's pooled
    sum of squares up to which it counts as without variance (rounding noise, module notes). ``welch``: the
    variance and df of :func:`onlineeval.stats.cuped_welch.welch_adjusted` instead of the large-sample variance.
    """
    yca, ycb = _centre(ya), _centre(yb)
    x1ca, x1cb = _centre(x1a), _centre(x1b)
    a = _dot(x1ca, x1ca) + _dot(x1cb, x1cb)
    s1 = _dot(x1ca, yca) + _dot(x1cb, ycb)
    varies = a > floor1  # (NaN floor: no variance)
    safe_a = np.where(varies, a, 1.0)
    if x2a is None or x2b is None or xdiff2 is None:
        theta1 = np.where(varies, s1 / safe_a, 0.0)
        theta2 = np.zeros_like(theta1)
        ra = yca - theta1[..., None] * x1ca
        rb = ycb - theta1[..., None] * x1cb
        est = diff - theta1 * xdiff1
        zs = ([x1ca], [x1cb], [[np.where(varies, 1.0 / safe_a, 0.0)]], [xdiff1])
    else:
        x2ca, x2cb, d = _centred_indicator(x2a, x2b) if x2c is None else x2c
        b = _dot(x1ca, x2ca) + _dot(x1cb, x2cb)
        s2 = _dot(x2ca, yca) + _dot(x2cb, ycb)
        det = a * d - b * b
        full = varies & (d > 0) & (det > 1e-10 * a * d)
        safe_det = np.where(full, det, 1.0)
        safe_d = np.where(d > 0, d, 1.0)
        theta1 = np.where(full, (d * s1 - b * s2) / safe_det, np.where(varies, s1 / safe_a, 0.0))
        theta2 = np.where(full, (a * s2 - b * s1) / safe_det, np.where(~varies & (d > 0), s2 / safe_d, 0.0))
        ra = yca - theta1[..., None] * x1ca - theta2[..., None] * x2ca
        rb = ycb - theta1[..., None] * x1cb - theta2[..., None] * x2cb
        est = diff - theta1 * xdiff1 - theta2 * xdiff2
        m11 = np.where(full, d / safe_det, np.where(varies, 1.0 / safe_a, 0.0))  # the sums of squares' pinv
        m22, m12 = np.where(full, a / safe_det, np.where(~varies & (d > 0), 1.0 / safe_d, 0.0)), -b * full / safe_det
        zs = ([x1ca, x2ca], [x1cb, x2cb], [[m11, m12], [m12, m22]], [xdiff1, xdiff2])
    na, nb = ya.shape[-1], yb.shape[-1]
    df = None
    if welch:
        from onlineeval.stats.cuped_welch import welch_adjusted

        var_adj, df = welch_adjusted(ra, rb, *zs)
    else:
        var_adj = _dot(ra, ra) / ((na - 1) * na) + _dot(rb, rb) / ((nb - 1) * nb)
    var_raw = _dot(yca, yca) / ((na - 1) * na) + _dot(ycb, ycb) / ((nb - 1) * nb) if raw else None
    return np.stack([theta1, theta2], axis=-1), est, var_adj, var_raw, df


def _centred_indicator(
    x2a: NDArray[np.float64], x2b: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The second covariate's within-arm centred values and their pooled sum of squares ``d`` (:func:`_adjust`)."""
    x2ca, x2cb = _centre(x2a), _centre(x2b)
    return x2ca, x2cb, _dot(x2ca, x2ca) + _dot(x2cb, x2cb)


def _result(
    theta: NDArray[np.float64],
    est: NDArray[np.float64],
    var_adj: NDArray[np.float64],
    diff: NDArray[np.float64],
    var_raw: NDArray[np.float64],
    ref: NDArray[np.float64],
    n: int,
    n_missing: NDArray[np.int64],
    alpha: float,
    null: float,
    method: str,
    raw_method: str,
    dfs: tuple[Any, Any] = (math.inf, math.inf),
) -> CupedResult:
    out = []
    for e, v, m, d in ((est, var_adj, method, dfs[0]), (diff, var_raw, raw_method, dfs[1])):
        se = np.sqrt(v)
        df = np.broadcast_to(np.asarray(d, dtype=np.float64), np.shape(e)).copy()
        stat, p, lo, hi = _tests(np.asarray(e), se, null, alpha, df)
        out.append(Estimates(e, se, lo, hi, p, np.full(np.shape(e), n, dtype=np.int64), stat, df, m, alpha, null, ref))
    with np.errstate(divide="ignore", invalid="ignore"):
        vr = np.where(var_raw > 0, 1.0 - var_adj / np.where(var_raw > 0, var_raw, 1.0), 0.0)
    vr = np.where(np.isnan(var_raw) | np.isnan(var_adj), np.nan, vr)
    return CupedResult(out[0], out[1], theta, np.asarray(vr, dtype=np.float64), np.asarray(n_missing, dtype=np.int64))


def _leading(*arrays: NDArray[np.float64]) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*(a.shape[:-1] for a in arrays))
    except ValueError:
        raise InputError("the arrays' leading (batch) shapes do not broadcast") from None


def cuped_mean(
    y_a: ArrayLike,
    x_a: ArrayLike,
    y_b: ArrayLike,
    x_b: ArrayLike,
    *,
    pre_active_a: ArrayLike | None = None,
    pre_active_b: ArrayLike | None = None,
    alpha: float = 0.05,
    null: float = 0.0,
) -> CupedResult:
    r"""CUPED-adjusted difference of per-user means ``mean(y_b) - mean(y_a)``.

    Parameters
    ----------
    y_a, y_b:
        Per-user metric in the experiment, shape ``(..., n_a)`` and ``(..., n_b)``.
    x_a, x_b:
        The same users' pre-period values: the same users on the last axis; leading shapes
        broadcast (e.g. ``(replicates, n)`` against ``y`` of shape ``(replicates, days, n)``
        needs ``x[:, None, :]``).
    pre_active_a, pre_active_b:
        Boolean masks (broadcast to the users' shape): True where the user had pre-period
        activity. Users with False get pre value 0 and the indicator covariate (module
        notes). Default ``None``: every user has a pre-period value.
    alpha:
        Two-sided level of the intervals. Default 0.05.
    null:
        Difference under :math:`H_0`. Default 0.

    Returns
    -------
    CupedResult

    Notes
    -----
    With covariates :math:`X_i = (x_i, a_i)` (:math:`a_i` the activity indicator),
    within-arm centred values and :math:`\theta = S_{XX}^{+} S_{XY}` pooled over arms,

    :math:`\hat\Delta_{cv} = \bar y_B - \bar y_A - \theta^\top(\bar X_B - \bar X_A)`; its variance and
    degrees of freedom: :func:`onlineeval.stats.cuped_welch.welch_adjusted` (a Welch-type t).
    """
    alpha = check_alpha(alpha)
    ya, yb = _as_batch(y_a, "y_a"), _as_batch(y_b, "y_b")
    xa, xb = _as_batch(x_a, "x_a"), _as_batch(x_b, "x_b")
    _same_users(ya, xa, "y_a and x_a")
    _same_users(yb, xb, "y_b and x_b")
    lead = _leading(ya, yb, xa, xb)
    ya, xa = (np.broadcast_to(v, (*lead, v.shape[-1])) for v in (ya, xa))
    yb, xb = (np.broadcast_to(v, (*lead, v.shape[-1])) for v in (yb, xb))
    diff = _wmean(yb) - _wmean(ya)
    if pre_active_a is None and pre_active_b is None:  # everyone has a pre-period value: no indicator
        floor = NOISE_SHARE * (_dot(xa, xa) + _dot(xb, xb))
        theta, est, var_adj, var_raw, df = _adjust(ya, xa, None, yb, xb, None, diff, _wmean(xb) - _wmean(xa), None,
                                                   floor1=floor, welch=True)
        missing = np.zeros(diff.shape, dtype=np.int64)
    else:
        ma = _active(pre_active_a, ya.shape, "pre_active_a")
        mb = _active(pre_active_b, yb.shape, "pre_active_b")
        x1a, x1b = np.where(ma, xa, 0.0), np.where(mb, xb, 0.0)
        x2a, x2b = ma.astype(np.float64), mb.astype(np.float64)
        floor = NOISE_SHARE * (_dot(x1a, x1a) + _dot(x1b, x1b))
        theta, est, var_adj, var_raw, df = _adjust(
            ya, x1a, x2a, yb, x1b, x2b, diff, _wmean(x1b) - _wmean(x1a), _wmean(x2b) - _wmean(x2a), floor1=floor,
            welch=True,
        )
        missing = (~ma).sum(axis=-1) + (~mb).sum(axis=-1)
    n = ya.shape[-1] + yb.shape[-1]
    raw_df = _welch_kernel(ya, yb)[2]  # the unadjusted difference: Welch's test (welch_diff's numbers)
    return _result(theta, est, var_adj, diff, var_raw, _wmean(ya), n, missing, alpha, float(null), "cuped-welch",
                   "welch", (df, raw_df))


def _influence(
    num: NDArray[np.float64], den: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ratio per row and influence values ``(x - R y)/ybar``; rows with no denominator give R = NaN, e = 0."""
    sy = den.sum(axis=-1)
    ok = sy > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(ok, num.sum(axis=-1) / np.where(ok, sy, 1.0), np.nan)
        ybar = np.where(ok, sy / den.shape[-1], 1.0)
        e = np.where(ok[..., None], (num - np.where(ok, r, 0.0)[..., None] * den) / ybar[..., None], 0.0)
    return r, e


def cuped_ratio(
    num_a: ArrayLike,
    den_a: ArrayLike,
    num_b: ArrayLike,
    den_b: ArrayLike,
    pre_num_a: ArrayLike,
    pre_den_a: ArrayLike,
    pre_num_b: ArrayLike,
    pre_den_b: ArrayLike,
    *,
    alpha: float = 0.05,
    null: float = 0.0,
) -> CupedResult:
    r"""CUPED-adjusted difference of ratio metrics :math:`\hat R_B - \hat R_A` (delta method).

    Parameters
    ----------
    num_a, den_a, num_b, den_b:
        Per-user numerators and denominators in the experiment (e.g. clicks and queries),
        shape ``(..., n_a)`` / ``(..., n_b)``; denominators >= 0.
    pre_num_a, pre_den_a, pre_num_b, pre_den_b:
        The same users' pre-period numerators and denominators (same users on the last axis,
        leading shapes broadcast). A user with ``pre_den == 0`` has no pre-period activity
        (indicator covariate, module notes).
    alpha:
        Two-sided level. Default 0.05.
    null:
        Difference under :math:`H_0`. Default 0.

    Returns
    -------
    CupedResult
        ``reference`` of the estimates is :math:`\hat R_A`. Rows where an arm's experiment
        denominators sum to 0 give NaN.

    Notes
    -----
    With :math:`e_i = (x_i - \hat R_j y_i)/\bar y_j`, :math:`f_i = (x^{pre}_i - \hat R^{pre}_j
    y^{pre}_i)/\bar y^{pre}_j` and the activity indicator :math:`a_i`, :math:`\theta` is the pooled
    within-arm regression of :math:`e` on :math:`(f, a)` and

    .. math::

        \hat\Delta_{cv} = \hat R_B - \hat R_A - \theta_1(\hat R^{pre}_B - \hat R^{pre}_A)
            - \theta_2(\bar a_B - \bar a_A),\qquad
        \mathrm{se}^2 = \sum_j \frac{\widehat{\operatorname{Var}}_j(e - \theta_1 f - \theta_2 a)}{n_j}.

    (An arm without any pre-period denominator contributes :math:`f = 0` and a pre-ratio
    difference of 0.)
    """
    alpha = check_alpha(alpha)
    arrays = {}
    for name, val in (
        ("num_a", num_a), ("den_a", den_a), ("num_b", num_b), ("den_b", den_b),
        ("pre_num_a", pre_num_a), ("pre_den_a", pre_den_a), ("pre_num_b", pre_num_b), ("pre_den_b", pre_den_b),
    ):  # fmt: skip
        arrays[name] = _as_batch(val, name)
        if name.startswith(("den", "pre_den")) and (arrays[name] < 0).any():
            raise InputError(f"{name}: denominators must be >= 0 (e.g. a count of queries)")
    for arm in ("a", "b"):
        base = arrays[f"num_{arm}"]
        for other in (f"den_{arm}", f"pre_num_{arm}", f"pre_den_{arm}"):
            _same_users(base, arrays[other], f"num_{arm} and {other}")
    lead = _leading(*arrays.values())
    for name, arr in arrays.items():
        arrays[name] = np.broadcast_to(arr, (*lead, arr.shape[-1]))
    ra, ea = _influence(arrays["num_a"], arrays["den_a"])
    rb, eb = _influence(arrays["num_b"], arrays["den_b"])
    pa, fa = _influence(arrays["pre_num_a"], arrays["pre_den_a"])
    pb, fb = _influence(arrays["pre_num_b"], arrays["pre_den_b"])
    ma = arrays["pre_den_a"] > 0
    mb = arrays["pre_den_b"] > 0
    x2a, x2b = ma.astype(np.float64), mb.astype(np.float64)
    pre_diff = np.where(np.isnan(pa) | np.isnan(pb), 0.0, pb - pa)
    diff = rb - ra
    floor = _ratio_noise_floor(pa, fa.shape[-1], pb, fb.shape[-1])
    theta, est, var_adj, var_raw, _ = _adjust(ea, fa, x2a, eb, fb, x2b, diff, pre_diff, _wmean(x2b) - _wmean(x2a),
                                              floor1=floor)
    undefined = np.isnan(diff)
    est, var_adj, var_raw = (np.where(undefined, np.nan, v) for v in (est, var_adj, var_raw))
    missing = (~ma).sum(axis=-1) + (~mb).sum(axis=-1)
    n = ea.shape[-1] + eb.shape[-1]
    return _result(theta, est, var_adj, diff, var_raw, ra, n, missing, alpha, float(null), "cuped-delta", "delta")


def cuped_ratio_adjusted(
    num_a: NDArray[np.float64],
    den_a: NDArray[np.float64],
    num_b: NDArray[np.float64],
    den_b: NDArray[np.float64],
    pre_num_a: NDArray[np.float64],
    pre_den_a: NDArray[np.float64],
    pre_num_b: NDArray[np.float64],
    pre_den_b: NDArray[np.float64],
    *,
    alpha: float = 0.05,
    null: float = 0.0,
) -> EstimateValues:
    """The adjusted estimate of :func:`cuped_ratio` as ``(estimate, se, ci_low, ci_high, pvalue)``: a lean
    path for a caller's repeated calls on trusted data (the simulator's checkpoints use a stacked form of the
    same arithmetic, :mod:`simulations.designs.ab`, and the tests check it against this function).

    The arrays must be 1-d float64 arrays of finite values with denominators >= 0 (one row; the
    users of each arm on the only axis); nothing is checked or copied, the unadjusted estimate and
    the :class:`CupedResult` are not built. The arithmetic is :func:`cuped_ratio`'s (the same
    functions), so the numbers are bit-identical to ``cuped_ratio(...).adjusted`` (tested); about
    half its time on arms of 7500 users.
    """
    values, _, _ = _cuped_ratio_parts(num_a, den_a, num_b, den_b, pre_num_a, pre_den_a, pre_num_b, pre_den_b,
                                      alpha=alpha, null=null)
    return values


def _influence_1d(num: NDArray[np.float64], den: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """:func:`_influence` of one row (1-d): the same operations on the same values, scalar branches."""
    sy = den.sum()
    if not sy > 0:
        return np.nan, np.zeros_like(num)
    r = num.sum() / sy
    return r, (num - r * den) / (sy / den.shape[-1])


def _cuped_ratio_parts(
    num_a: NDArray[np.float64],
    den_a: NDArray[np.float64],
    num_b: NDArray[np.float64],
    den_b: NDArray[np.float64],
    pre_num_a: NDArray[np.float64],
    pre_den_a: NDArray[np.float64],
    pre_num_b: NDArray[np.float64],
    pre_den_b: NDArray[np.float64],
    *,
    alpha: float = 0.05,
    null: float = 0.0,
    shared: dict[str, tuple[NDArray[np.float64], ...]] | None = None,
) -> tuple[EstimateValues, tuple[NDArray[np.float64], ...], tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """:func:`cuped_ratio_adjusted` with its by-products: ``(values, (e_a, f_a, e_b, f_b), (m_a, m_b))``, the
    experiment's and the pre-period's influence values of each arm and the 0/1 pre-activity indicators (float).

    The arithmetic of :func:`cuped_ratio` on 1-d arrays (:func:`_influence_1d`; the unadjusted variance
    left out), so the same bits (tested). ``shared``: a dict kept by a caller whose successive calls have the
    same ``pre_den_a`` and ``pre_den_b`` (several metrics of one checkpoint): the indicators and their centred
    values are computed on the first call and reused.
    """
    ra, ea = _influence_1d(num_a, den_a)
    rb, eb = _influence_1d(num_b, den_b)
    pa, fa = _influence_1d(pre_num_a, pre_den_a)
    pb, fb = _influence_1d(pre_num_b, pre_den_b)
    if shared is None or "indicator" not in shared:
        x2a, x2b = (pre_den_a > 0).astype(np.float64), (pre_den_b > 0).astype(np.float64)
        indicator = (x2a, x2b, *_centred_indicator(x2a, x2b), _wmean(x2b) - _wmean(x2a))
        if shared is not None:
            shared["indicator"] = indicator
    else:
        indicator = shared["indicator"]
    x2a, x2b, x2ca, x2cb, d, xdiff2 = indicator
    pre_diff = 0.0 if np.isnan(pa) or np.isnan(pb) else pb - pa
    diff = rb - ra
    _, est, var_adj, _, _ = _adjust(ea, fa, x2a, eb, fb, x2b, diff, pre_diff, xdiff2, x2c=(x2ca, x2cb, d),
                                    raw=False)
    if np.isnan(diff):
        est = var_adj = np.nan
    values = _z_values(np.asarray(est), np.sqrt(var_adj), float(null), check_alpha(alpha))
    return values, (ea, fa, eb, fb), (x2a, x2b)


class _RatioArm(NamedTuple):
    """One arm's part of :func:`_cuped_ratio_stacked` (``k`` metrics sharing the denominators)."""

    n: int
    ratio: NDArray[np.float64]  # (k,) experiment ratios (NaN without denominators)
    var: list[Any]  # k delta-method variances of the ratios, :func:`_delta_1d`'s numbers
    ybar: float  # mean experiment denominator
    pre_ratio: NDArray[np.float64]  # (k,) pre-period ratios (NaN without pre-period denominators)
    qbar: float  # mean pre-period denominator (1.0 without: the influence values are then 0)
    active_mean: Any  # share of users with pre-period activity (np.float64, the mean of the 0/1 indicator)
    n_active: int
    #: (2k + 1, n): centred x - R y (k rows), pre-period p - R' q (k), indicator (1); None from the compiled kernels
    rows: NDArray[np.float64] | None
    #: per metric m the dot products of its rows u (experiment), v (pre-period) and the indicator a:
    #: (u.u, u.v, u.a, v.v, v.a), and a.a; empty without a pre-period
    cross: list[tuple[float, float, float, float, float]]
    aa: float


def _ratio_arm(num: NDArray[np.float64], den: NDArray[np.float64], pre_num: NDArray[np.float64] | None = None,
               pre_den: NDArray[np.float64] | None = None) -> _RatioArm:
    """An arm's ratios, delta-method variances, centred linearised values and their dot products, the ``k``
    metrics as rows of 2-d arrays (one numpy call per step for all of them).

    ``num`` (k, n) and ``pre_num`` (k, n) are C-contiguous, ``den`` and ``pre_den`` (n,). The experiment rows
    ``x - R y`` are computed and centred by :func:`onlineeval.stats.online._delta_1d`'s operations row by row
    (a row's sum and mean of a C-contiguous 2-d array are the 1-d array's bits; the variance is the 1-d
    ``einsum`` of each row), so ``ratio`` and ``var`` are its numbers bit for bit (tested). Without a
    pre-period (``pre_num`` None) only those: ``rows`` holds the k experiment rows and ``cross`` is empty."""
    k, n = num.shape
    rows = np.empty((k if pre_num is None else 2 * k + 1, n))
    u = rows[:k]
    sy = den.sum()
    if sy > 0:
        ratio = num.sum(axis=1) / sy
        np.multiply(ratio[:, None], den, out=u)
        np.subtract(num, u, out=u)  # x - R y, as in _delta_1d
        u -= u.mean(axis=1, keepdims=True)
        ybar = np.asarray(sy / n)  # ** 2 of an array: np.square, as in _delta_1d
        sq_n = (n - 1) * n * ybar**2
        uu = [np.einsum("...i,...i->...", u[m], u[m]) for m in range(k)]
        var: list[Any] = [s / sq_n for s in uu]
    else:
        ratio = np.full(k, np.nan)
        u[:] = 0.0
        uu = [0.0] * k
        var = [math.nan] * k
        ybar = np.asarray(1.0)
    if pre_num is None or pre_den is None:
        nan = np.full(k, np.nan)
        return _RatioArm(n, ratio, var, float(ybar), nan, 1.0, math.nan, 0, rows, [], math.nan)
    v, act = rows[k:2 * k], rows[2 * k]
    sq = pre_den.sum()
    if sq > 0:
        pre_ratio = pre_num.sum(axis=1) / sq
        np.multiply(pre_ratio[:, None], pre_den, out=v)
        np.subtract(pre_num, v, out=v)
        v -= v.mean(axis=1, keepdims=True)
        qbar = float(sq / n)
    else:
        pre_ratio = np.full(k, np.nan)
        v[:] = 0.0
        qbar = 1.0
    np.greater(pre_den, 0.0, out=act, casting="unsafe")
    n_act = act.sum()
    active_mean = n_act / n  # act.mean(): the sum / n
    act -= active_mean
    # the dot products each metric needs, row-wise by einsum: no BLAS call (a (2k + 1, n) Gram matrix by BLAS
    # costs 4x more on these shapes, and OpenBLAS's threads, woken for each product of a few thousand users
    # between the simulator's other work, cost milliseconds on a loaded machine)
    uv, vv = np.einsum("ij,ij->i", u, v).tolist(), np.einsum("ij,ij->i", v, v).tolist()
    ua, va = np.einsum("ij,j->i", u, act).tolist(), np.einsum("ij,j->i", v, act).tolist()
    cross = [(float(uu[m]), uv[m], ua[m], vv[m], va[m]) for m in range(k)]
    return _RatioArm(n, ratio, var, float(ybar), pre_ratio, qbar, active_mean, int(n_act), rows, cross,
                     float(np.einsum("i,i->", act, act)))


#: a covariate's pooled within-arm sum of squares at most this share of its scale is rounding noise: the covariate
#: drops out (module notes); (2**16 eps)**2, about 2.1e-22
NOISE_SHARE = (2.0**16 * float(np.finfo(np.float64).eps)) ** 2


def _ratio_noise_floor(pre_ratio_a: Any, n_a: int, pre_ratio_b: Any, n_b: int) -> Any:
    """:data:`NOISE_SHARE` of the ratio covariate's scale ``n_a R_a^2 + n_b R_b^2`` (pre-period ratios; an arm
    without pre-period denominators, NaN, adds 0)."""
    ra, rb = np.nan_to_num(pre_ratio_a, nan=0.0), np.nan_to_num(pre_ratio_b, nan=0.0)
    return NOISE_SHARE * (n_a * ra * ra + n_b * rb * rb)


#: below this share of the outcome's sum of squares, an arm's adjusted sum of squares is recomputed from its
#: residuals instead of the quadratic form of its dot products (which would lose about log10(1/share) digits)
_CANCEL = 0.1


def _cuped_ratio_stacked(
    num_a: NDArray[np.float64],
    den_a: NDArray[np.float64],
    num_b: NDArray[np.float64],
    den_b: NDArray[np.float64],
    pre_num_a: NDArray[np.float64],
    pre_den_a: NDArray[np.float64],
    pre_num_b: NDArray[np.float64],
    pre_den_b: NDArray[np.float64],
    *,
    alpha: float = 0.05,
    null: float = 0.0,
) -> tuple[list[EstimateValues], list[EstimateValues], list[list[list[float]]], int]:
    r"""``k`` ratio metrics sharing their denominators (the A/B checkpoint's three metrics over the queries)
    together, the metrics as rows: ``(unadjusted, adjusted, pooled, n_active)``.

    ``num_*`` and ``pre_num_*`` are C-contiguous ``(k, n_arm)`` float64 arrays, the denominators ``(n_arm,)``
    (trusted, as the other lean paths: finite, denominators >= 0, nothing checked). Per metric ``m``:

    - ``unadjusted[m]``: :func:`onlineeval.stats.online.ratio_diff_values` of row ``m``, bit for bit (tested);
    - ``adjusted[m]``: ``cuped_ratio(...).adjusted`` of row ``m`` to rounding (tested to 1e-12 relative, 1e-15
      absolute near zero): the pooled within-arm sums of squares and cross-products of the influence values
      :math:`e = (x - \hat R y)/\bar y`, :math:`f` (the same of the pre-period) and the pre-activity indicator
      are each arm's dot products of its centred rows (``x - R y`` of the delta method, ``p - R' q``, the
      indicator; row-wise ``einsum`` for all metrics, no BLAS call) scaled by the mean
      denominators; then the closed form and the branches of :func:`_adjust` (a covariate without within-arm
      variance, or collinear with the other, drops out), and each arm's adjusted sum of squares from those
      dot products, or from its residuals themselves when the quadratic form would cancel (residual sum of
      squares below 10% of the outcome's: R^2 > 0.9 within the arm). Near R^2 = 1 the adjusted SE is
      ill-conditioned (kappa = unadjusted / adjusted SE): this and ``cuped_ratio`` then both lose about
      log10(kappa) digits (tested against extended precision, kappa up to 1e5);
    - ``pooled[m]``: the 3 x 3 pooled within-arm cross-products of ``[e, f, indicator]`` (the matrix
      ``centred.T @ centred`` of ``simulations.cuped.pooled_correlations``);

    and ``n_active``: the users with pre-period activity (``pre_den > 0``), both arms. On the arms of a day-14
    checkpoint of ``configs/ab.yaml`` (7.7k users each) about 0.2 ms per arm for the three metrics.
    """
    alpha = check_alpha(alpha)
    arm_a = _ratio_arm(num_a, den_a, pre_num_a, pre_den_a)
    arm_b = _ratio_arm(num_b, den_b, pre_num_b, pre_den_b)
    return _cuped_from_arms(arm_a, arm_b, alpha, null)


def _cuped_from_arms(arm_a: _RatioArm, arm_b: _RatioArm, alpha: float, null: float = 0.0,
                     residual: Any = None) -> tuple[list[EstimateValues], list[EstimateValues],
                                                    list[list[list[float]]], int]:
    """:func:`_cuped_ratio_stacked` from its two arms (:func:`_ratio_arm`, or the compiled
    :func:`simulations.stat_kernels.ab_arm_parts`); ``alpha`` checked. ``residual(arm, m, theta1, theta2)``: an
    arm's (0: A, 1: B) adjusted sum of squares of metric ``m`` from its residuals, for arms without ``rows``."""
    k = len(arm_a.ratio)
    z = 2 * k
    xdiff2 = arm_b.active_mean - arm_a.active_mean
    unadjusted, adjusted, pooled = [], [], []
    for m in range(k):
        ra, rb = arm_a.ratio[m], arm_b.ratio[m]
        diff = rb - ra
        unadjusted.append(_z_values(diff, np.sqrt(arm_a.var[m] + arm_b.var[m]), float(null), alpha))
        pa, pb = arm_a.pre_ratio[m], arm_b.pre_ratio[m]
        pre_diff = 0.0 if np.isnan(pa) or np.isnan(pb) else float(pb - pa)
        # pooled within-arm cross-products of e = u / ybar, f = v / qbar and the indicator
        parts = []
        for arm in (arm_a, arm_b):
            uu, uv, ua, vv, va = arm.cross[m]
            sy, sq = arm.ybar, arm.qbar
            parts.append((uu / sy / sy, uv / sy / sq, ua / sy, vv / sq / sq, va / sq, arm.aa))
        see, s1, s2, a, b, d = (pa_ + pb_ for pa_, pb_ in zip(*parts, strict=True))
        if not a > _ratio_noise_floor(pa, arm_a.n, pb, arm_b.n):  # no variance beyond rounding: drops out
            s1 = a = b = 0.0  # (theta1 = 0: the arms' f terms then add nothing to the adjusted variance)
        det = a * d - b * b
        if a > 0 and d > 0 and det > 1e-10 * a * d:
            theta1, theta2 = (d * s1 - b * s2) / det, (a * s2 - b * s1) / det
        else:
            theta1 = s1 / a if a > 0 else 0.0
            theta2 = s2 / d if a <= 0 and d > 0 else 0.0
        est = float(diff) - theta1 * pre_diff - theta2 * float(xdiff2)
        var_adj = 0.0
        for j, (arm, (ee, ef, ea, ff, fa, aa)) in enumerate(zip((arm_a, arm_b), parts, strict=True)):
            ss = ee - 2.0 * (theta1 * ef + theta2 * ea) + theta1 * theta1 * ff + 2.0 * theta1 * theta2 * fa \
                + theta2 * theta2 * aa
            if not ss >= _CANCEL * ee:  # cancellation (or NaN): the residuals themselves
                rows = arm.rows
                if rows is None:
                    ss = residual(j, m, theta1, theta2)
                else:
                    res = rows[m] / arm.ybar - theta1 * (rows[k + m] / arm.qbar) - theta2 * rows[z]
                    ss = float(np.einsum("i,i->", res, res))
            var_adj += ss / ((arm.n - 1) * arm.n) if arm.n > 1 else math.nan  # cuped_ratio: 0 / 0 of one user
        if np.isnan(diff):
            est = var_adj = math.nan
        adjusted.append(_z_values(np.float64(est), np.sqrt(np.float64(var_adj)), float(null), alpha))
        pooled.append([[see, s1, s2], [s1, a, b], [s2, b, d]])
    return unadjusted, adjusted, pooled, arm_a.n_active + arm_b.n_active


def _ratio_diff_stacked(
    num_a: NDArray[np.float64],
    den_a: NDArray[np.float64],
    num_b: NDArray[np.float64],
    den_b: NDArray[np.float64],
    *,
    alpha: float = 0.05,
    null: float = 0.0,
) -> list[EstimateValues]:
    """The ``unadjusted`` part of :func:`_cuped_ratio_stacked` without a pre-period: per row ``m`` of the
    ``(k, n_arm)`` numerators, :func:`onlineeval.stats.online.ratio_diff_values`'s numbers bit for bit."""
    return _ratio_diff_from_arms(_ratio_arm(num_a, den_a), _ratio_arm(num_b, den_b), check_alpha(alpha), null)


def _ratio_diff_from_arms(arm_a: _RatioArm, arm_b: _RatioArm, alpha: float, null: float = 0.0
                          ) -> list[EstimateValues]:
    """:func:`_ratio_diff_stacked` from its two arms (``alpha`` checked)."""
    return [_z_values(arm_b.ratio[m] - arm_a.ratio[m], np.sqrt(arm_a.var[m] + arm_b.var[m]), float(null), alpha)
            for m in range(len(arm_a.ratio))]
