r"""CUPED for few users: a ratio metric's difference adjusted by pre-period covariates, with the bias-reduced (CR2)
variance and Student's t with Bell and McCaffrey's degrees of freedom (the ``test: delta_t`` form of CUPED).

:func:`onlineeval.stats.ratio_diff_cr2` is the impression-level regression of the metric on the arm, clustered by
user. Its CUPED form adds user-level covariates :math:`z_i` (the user's pre-period ratio, 0 without pre-period
activity, and the indicator of pre-period activity) to that regression, every impression of user :math:`i`
carrying :math:`z_i`; the arm coefficient is the adjusted difference

.. math::

    \hat\Delta = \hat R_B - \hat R_A - \hat\theta^\top (\bar z^{w}_B - \bar z^{w}_A),\qquad
    \hat\theta = S^{+} \sum_i \tilde z_i (x_i - \hat R_{j(i)} y_i),\quad S = \sum_i y_i \tilde z_i \tilde z_i^\top,

with :math:`\bar z^w_j` the arm's impression-weighted covariate means and :math:`\tilde z_i = z_i - \bar
z^w_{j(i)}` (regression adjustment as in Deng et al. 2013, Lin 2013; the covariates are fixed before the
experiment, so the adjustment's expectation is 0 and the estimand is the ratio difference's). It is linear in the
users' sums, :math:`\hat\Delta = \sum_i a_i x_i` with :math:`a_i = \pm 1 / N_{j(i)} - g^\top S^{+} \tilde z_i`
(:math:`g = \bar z^w_B - \bar z^w_A`), and a user's impressions share one regressor row, so the CR2 adjustment of
a cluster is the scalar :math:`(1 - h_i)^{-1/2}` on its residual sum, :math:`h_i = y_i (1 / N_{j(i)} + \tilde
z_i^\top S^{+} \tilde z_i)` its leverage:

.. math::

    \widehat{\operatorname{Var}}(\hat\Delta) = \sum_i \frac{a_i^2 E_i^2}{1 - h_i},\qquad
    E_i = x_i - y_i (\hat R_{j(i)} + \hat\theta^\top \tilde z_i).

Its degrees of freedom are Satterthwaite's :math:`\operatorname{tr}(A\Omega)^2 / \operatorname{tr}((A\Omega)^2)`
of that variance as a quadratic form in the users' sums, :math:`A = M^\top B M` with :math:`B =
\operatorname{diag}(a_i^2 / (1 - h_i))`, :math:`M = I - Y F \Gamma F^\top` the residual maker
(:math:`F = [\text{arm indicators}, \tilde z]`, :math:`\Gamma = \operatorname{diag}(1/N_A, 1/N_B, S^{+})`), under
the working model :math:`\Omega = \operatorname{diag}(y_i (1 - \rho + \rho\, y_i))` of impressions correlated
:math:`\rho` within a user (as :func:`onlineeval.stats.ratio_diff_cr2`'s ``icc``): :math:`M \Omega M^\top` is a
diagonal plus a low-rank matrix, so both traces are sums over the users (``O(m q^2)`` for ``q`` regressors). With no
covariate fitted it is :func:`~onlineeval.stats.ratio_diff_cr2` exactly. tests/test_cuped_cr2.py checks it against
the dense impression-level computation (each cluster's :math:`(I - H_{gg})^{-1/2}`, the quadratic form's traces
from full matrices) and statsmodels' OLS, and its coverage.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError
from onlineeval.stats._checks import check_alpha
from onlineeval.stats.cuped import NOISE_SHARE  # a covariate constant up to rounding drops out, as CUPED's rule

__all__ = ["covariates", "cuped_ratio_cr2", "cuped_ratio_cr2_values", "explained_share"]

F = NDArray[np.float64]

#: a user whose leverage is within this of 1 has leverage 1 (up to rounding: its residual is 0 whatever its sum)
LEVERAGE_ONE = 1e-9

#: eigenvalues of the covariates' correlation matrix below this share of the largest are collinearity: their
#: direction drops out of the pseudo-inverse
COLLINEAR = 1e-10


def _pinv(s: F, noise: F) -> F:
    """Pseudo-inverse of the covariates' ``(p, p)`` within-arm sum of squares ``s``: columns whose diagonal is at
    most ``noise`` drop out, and directions of the rest's correlation matrix below :data:`COLLINEAR`."""
    p = s.shape[0]
    out = np.zeros((p, p))
    keep = np.flatnonzero(np.diag(s) > noise)
    if keep.size:
        sk = s[np.ix_(keep, keep)]
        scale = np.sqrt(np.diag(sk))
        w, v = np.linalg.eigh(sk / scale[:, None] / scale[None, :])
        inv_w = np.where(w > COLLINEAR * w.max(), 1.0 / np.where(w > 0, w, 1.0), 0.0)
        out[np.ix_(keep, keep)] = (v * inv_w) @ v.T / scale[:, None] / scale[None, :]
    return out


def cuped_ratio_cr2_values(x: F, y: F, in_b: NDArray[np.bool_], z: F, alpha: float = 0.05, *, null: float = 0.0,
                           icc: float = 0.0) -> tuple[tuple[float, float, float, float, float], float, F, float]:
    r"""``((estimate, se, ci_low, ci_high, pvalue), df, theta, explained)`` on trusted arrays (nothing checked): the
    users' numerators ``x`` and denominators ``y`` (1-d), ``in_b`` their arm (True: B), ``z`` their covariates
    ``(m, p)``. ``explained``: :math:`1 - \sum_i E_i^2 / \sum_i e_i^2`, the share of the users' residual sums of
    squares (:math:`e_i = x_i - \hat R_{j(i)} y_i`, pooled within the arms) the covariates remove, the plug-in of
    the adjustment's variance reduction (the :math:`R^2` of CUPED's theory; NaN without residuals).

    A covariate that would give some user leverage 1 (one user of an arm alone without, or alone with, pre-period
    activity: the covariate is that user's own indicator, and the CR2 adjustment is undefined) drops out, the
    last covariate first (``theta`` 0 for it); NaN where undefined even so: an arm without denominators, or one
    user holding an arm's denominators (:func:`onlineeval.stats.ratio_diff_cr2`'s own limit)."""
    p = z.shape[1]
    for used in range(p, -1, -1):
        vals, df, theta, explained, full_rank = _fit(x, y, in_b, z[:, :used], alpha, float(null), icc)
        if full_rank or used == 0:
            return vals, df, np.r_[theta, np.zeros(p - used)], explained
    raise AssertionError("unreachable")


def _fit(x: F, y: F, in_b: NDArray[np.bool_], z: F, alpha: float, null: float, icc: float
         ) -> tuple[tuple[float, float, float, float, float], float, F, float, bool]:
    """:func:`cuped_ratio_cr2_values` with the covariates ``z``, and whether every user's leverage is below 1."""
    nan5 = (math.nan,) * 5
    fit = _slope(x, y, in_b, z)
    if fit is None:
        return nan5, math.nan, np.full(z.shape[1], math.nan), math.nan, True
    arm, n_arm, ratio, zbar, zc, s_inv, theta = fit
    g = zbar[1] - zbar[0]
    est = float(ratio[1] - ratio[0] - g @ theta)
    sign = np.where(in_b, 1.0, -1.0)
    a = sign / n_arm[arm] - zc @ (s_inv @ g)
    h = y * (1.0 / n_arm[arm] + np.einsum("ik,kl,il->i", zc, s_inv, zc))
    keep = 1.0 - h
    if not bool((keep > LEVERAGE_ONE).all()):
        return (est, *nan5[1:]), math.nan, theta, math.nan, False
    e, explained = _residuals(x, y, arm, ratio, zc, theta)
    b = a * a / keep
    var = float(np.dot(b, e * e))
    tr, tr2 = _traces(y, arm, n_arm, zc, s_inv, b, float(icc))
    from onlineeval.stats.small_sample import _values_of

    vals, df, _ = _values_of(est, var, tr, tr2, float(null), alpha)
    return vals, df, theta, explained, True


def _slope(x: F, y: F, in_b: NDArray[np.bool_], z: F) -> tuple[Any, ...] | None:
    """``(arm, N by arm, ratio by arm, covariate means by arm, centred covariates, S^+, theta)`` of the regression
    (module notes), or ``None`` where an arm has no denominators."""
    p = z.shape[1]
    arm = in_b.astype(np.intp)
    n_arm = np.bincount(arm, weights=y, minlength=2)
    if not (n_arm > 0).all():
        return None
    ratio = np.bincount(arm, weights=x, minlength=2) / n_arm
    zbar = np.stack([np.bincount(arm, weights=y * z[:, k], minlength=2) for k in range(p)], axis=1) / n_arm[:, None]
    zc = z - zbar[arm]
    s_inv = _pinv((zc * y[:, None]).T @ zc, NOISE_SHARE * ((z * z) * y[:, None]).sum(axis=0))
    theta = s_inv @ (zc.T @ (x - ratio[arm] * y))
    return arm, n_arm, ratio, zbar, zc, s_inv, theta


def _residuals(x: F, y: F, arm: NDArray[np.intp], ratio: F, zc: F, theta: F) -> tuple[F, float]:
    r"""The users' residual sums :math:`E_i` and the share of :math:`\sum_i e_i^2` the covariates remove."""
    raw = x - y * ratio[arm]
    e = raw - y * (zc @ theta)
    ss_raw = float(np.dot(raw, raw))
    return e, (1.0 - float(np.dot(e, e)) / ss_raw if ss_raw > 0 else math.nan)


def explained_share(x: F, y: F, in_b: NDArray[np.bool_], z: F) -> tuple[float, F]:
    """``(explained, theta)`` of :func:`cuped_ratio_cr2_values` without its variance and degrees of freedom (the
    fit alone; NaN without denominators in an arm)."""
    fit = _slope(x, y, in_b, z)
    if fit is None:
        return math.nan, np.full(z.shape[1], math.nan)
    arm, _, ratio, _, zc, _, theta = fit
    return _residuals(x, y, arm, ratio, zc, theta)[1], theta


def _traces(y: F, arm: NDArray[np.intp], n_arm: F, zc: F, s_inv: F, b: F, icc: float) -> tuple[float, float]:
    r""":math:`\operatorname{tr}(A\Omega)` and :math:`\operatorname{tr}((A\Omega)^2)` (module notes). With
    :math:`Q = M \Omega M^\top = \Omega + L` and :math:`L = \mathbf A \mathbf B^\top`, :math:`\mathbf A =
    [YF, \Omega F]`, :math:`\mathbf B = \mathbf A K`, :math:`K = [[\Gamma W \Gamma, -\Gamma], [-\Gamma, 0]]`,
    :math:`W = F^\top \Omega F`, the traces are :math:`\sum_i b_i Q_{ii}` and :math:`\sum_i b_i^2 \omega_i^2 +
    2 \sum_i b_i^2 \omega_i L_{ii} + \operatorname{tr}(G K^\top G K)` for :math:`G = \mathbf A^\top D_b
    \mathbf A` (:math:`\mathbf B^\top D_b \mathbf B = K^\top G K`): one pass over the users for
    :math:`\mathbf A`, one for its product with :math:`K` and one for :math:`G`."""
    m, p = zc.shape
    q = 2 + p
    omega = y * (1.0 - icc + icc * y)
    big_a = np.zeros((m, 2 * q))  # [Y F, Omega F], F = [the arm's indicator, the centred covariates]
    rows = np.arange(m)
    big_a[rows, arm] = y
    big_a[rows, q + arm] = omega
    big_a[:, 2:q] = zc * y[:, None]
    big_a[:, q + 2 :] = zc * omega[:, None]
    gamma = np.zeros((q, q))
    gamma[0, 0], gamma[1, 1] = 1.0 / n_arm[0], 1.0 / n_arm[1]
    gamma[2:, 2:] = s_inv
    f = np.zeros((m, q))
    f[rows, arm] = 1.0
    f[:, 2:] = zc
    w = big_a[:, q:].T @ f  # F' Omega F (the second half of A is Omega F)
    k = np.zeros((2 * q, 2 * q))
    k[:q, :q] = gamma @ w @ gamma
    k[:q, q:] = -gamma
    k[q:, :q] = -gamma
    l_diag = np.einsum("ic,ic->i", big_a, big_a @ k)
    g = (big_a * b[:, None]).T @ big_a
    bo = b * omega
    tr = float(np.dot(b, omega + l_diag))
    tr2 = float(np.dot(bo, bo) + 2.0 * np.dot(b * bo, l_diag) + np.sum(g * (k.T @ g @ k).T))
    return tr, tr2


def cuped_ratio_cr2(num_a: ArrayLike, den_a: ArrayLike, num_b: ArrayLike, den_b: ArrayLike, pre_num_a: ArrayLike,
                    pre_den_a: ArrayLike, pre_num_b: ArrayLike, pre_den_b: ArrayLike, alpha: float = 0.05, *,
                    null: float = 0.0, icc: float = 0.0) -> Any:
    r"""CUPED-adjusted difference :math:`R_B - R_A` of a ratio metric for few users (module docstring): the
    covariates are each user's pre-period ratio ``pre_num / pre_den`` (0 where ``pre_den`` is 0) and, where some
    users have no pre-period activity and some have, its indicator; a covariate constant up to rounding drops out
    (then the estimate and its test are :func:`onlineeval.stats.ratio_diff_cr2`'s).

    Parameters
    ----------
    num_a, den_a, num_b, den_b:
        Per-user numerators and denominators of the experiment, as for :func:`~onlineeval.stats.ratio_diff_cr2`
        (at least 2 users with positive denominators per arm; with ``icc`` the denominators count impressions).
    pre_num_a, pre_den_a, pre_num_b, pre_den_b:
        The same users' pre-period numerators and denominators (>= 0).
    alpha, null, icc:
        As :func:`~onlineeval.stats.ratio_diff_cr2`'s (``icc``: the working model's intra-user correlation,
        :func:`onlineeval.stats.intra_user_correlation`).

    Returns
    -------
    Estimate
        ``method="cuped-cr2-t"``, ``df`` Bell and McCaffrey's degrees of freedom, ``reference`` :math:`R_A`; NaN
        SE, interval and p-value where a user's leverage is 1.

    Raises
    ------
    InputError
        For arrays :func:`~onlineeval.stats.ratio_diff_cr2` refuses, pre-period arrays of other lengths or with
        negative or non-finite values, and ``icc`` outside [0, 1].
    """
    from onlineeval.stats.online import Estimate, _pairs
    from onlineeval.stats.small_sample import _check_icc, _one_user

    xa, ya = _pairs(num_a, den_a, "a")
    xb, yb = _pairs(num_b, den_b, "b")
    _one_user(ya, "den_a")
    _one_user(yb, "den_b")
    pre = []
    for name, val, n in (("pre_num_a", pre_num_a, xa.size), ("pre_den_a", pre_den_a, xa.size),
                         ("pre_num_b", pre_num_b, xb.size), ("pre_den_b", pre_den_b, xb.size)):
        v = np.asarray(val, dtype=np.float64).ravel()
        if v.size != n:
            raise InputError(f"{name}: {v.size} values for {n} users (one per user of the arm)")
        if not np.isfinite(v).all() or (v < 0).any():
            raise InputError(f"{name}: pre-period sums must be finite and >= 0")
        pre.append(v)
    alpha = check_alpha(alpha)
    rho = _check_icc(icc)
    x, y = np.concatenate([xa, xb]), np.concatenate([ya, yb])
    in_b = np.r_[np.zeros(xa.size, bool), np.ones(xb.size, bool)]
    z = covariates(np.concatenate([pre[0], pre[2]]), np.concatenate([pre[1], pre[3]]))
    (est, se, lo, hi, pv), df, _, _ = cuped_ratio_cr2_values(x, y, in_b, z, alpha, null=float(null), icc=rho)
    stat = (est - float(null)) / se if se > 0 else math.nan
    return Estimate(est, se, lo, hi, pv, int(x.size), stat, df, METHOD, alpha, float(null),
                    float(xa.sum() / ya.sum()))


#: :attr:`onlineeval.stats.Estimate.method` of :func:`cuped_ratio_cr2`
METHOD = "cuped-cr2-t"


def covariates(pre_num: F, pre_den: F) -> F:
    """``(m, 2)``: each user's pre-period ratio (0 without pre-period activity) and the activity indicator (the
    estimate drops a column that is constant)."""
    active = pre_den > 0
    ratio = np.where(active, pre_num / np.where(active, pre_den, 1.0), 0.0)
    return np.column_stack([ratio, active.astype(np.float64)])
