"""Sequential tests on data: estimates and standard errors (or p-values) with **looks on the last axis** and any
leading shape (replicates, designs, ...); the caller's arrays are never modified.

:func:`msprt` (always-valid p-values), :func:`confidence_sequence`, :func:`group_sequential_test` on
:class:`~onlineeval.stats.sequential.Boundaries`, :func:`peeking_test` and :func:`sequential_test` (one design by
name). Estimand, assumptions and references: :mod:`onlineeval.stats.sequential`, which computes the boundaries and
re-exports these names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError, must_be_one_of
from onlineeval.stats._recursion import _sf
from onlineeval.stats.sequential import (
    SEQUENTIAL_DESIGNS,
    Boundaries,
    _check_alpha,
    _check_fractions,
    _z,
    equal_fractions,
    spending_boundaries,
)

__all__ = [
    "SequentialResult",
    "confidence_sequence",
    "group_sequential_test",
    "msprt",
    "peeking_test",
    "sequential_test",
    "z_equivalent",
]


@dataclass(frozen=True)
class SequentialResult:
    """Outcome of a sequential test on data with looks on the last axis.

    Attributes
    ----------
    reject:
        Shape ``(...)``: :math:`H_0` rejected at some look.
    stop_look:
        Shape ``(...)``: 0-based index of the first rejecting look, ``-1`` if none.
    rejected_by_look:
        Shape ``(..., K)``: rejected at or before each look (the A/A false-positive rate by
        day is its mean over replicates).
    pvalue:
        Shape ``(..., K)``: always-valid p-values (:func:`msprt`), the fixed-horizon
        p-values given (:func:`peeking_test`), or ``None`` (group-sequential tests).
    ci_low, ci_high:
        Shape ``(..., K)``: the confidence sequence (:func:`msprt`, :func:`confidence_sequence`)
        or ``None``.
    method:
        ``"msprt"``, ``"confidence_sequence"``, ``"peeking"`` or the boundaries' kind.
    alpha:
        The level.
    """

    reject: NDArray[np.bool_]
    stop_look: NDArray[np.int64]
    rejected_by_look: NDArray[np.bool_]
    pvalue: NDArray[np.float64] | None
    ci_low: NDArray[np.float64] | None
    ci_high: NDArray[np.float64] | None
    method: str
    alpha: float


def _first(cross: NDArray[np.bool_]) -> tuple[NDArray[np.bool_], NDArray[np.int64], NDArray[np.bool_]]:
    by = np.logical_or.accumulate(cross, axis=-1)
    reject = by[..., -1]
    stop = np.where(reject, np.argmax(cross, axis=-1), -1).astype(np.int64)
    return reject, stop, by


def _as_looks(x: ArrayLike, name: str, *, allow_nan: bool = True) -> NDArray[np.float64]:
    try:
        arr = np.array(x, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected an array of numbers with looks on the last axis") from None
    if arr.ndim == 0:
        raise InputError(f"{name}: expected an array with looks on the last axis, got a scalar")
    bad = np.isinf(arr) if allow_nan else ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"{name}: value at index {where} is {arr[where]!r}; only finite numbers are allowed")
    return arr


def _estimates(estimate: ArrayLike, se: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    est = _as_looks(estimate, "estimate")
    s = _as_looks(se, "se")
    if (s < 0).any():
        raise InputError("se: standard errors must be >= 0")
    try:
        est, s = np.broadcast_arrays(est, s)
    except ValueError:
        raise InputError(f"estimate and se: shapes {est.shape} and {s.shape} do not broadcast") from None
    return est, s


def _looks_df(df: ArrayLike | None, shape: tuple[int, ...]) -> NDArray[np.float64] | None:
    """Each look's degrees of freedom broadcast to the looks' ``shape``, or ``None`` where every look is a z's (no
    ``df``, or every entry ``inf`` / NaN). Finite entries must be > 0."""
    if df is None:
        return None
    try:
        d = np.broadcast_to(np.asarray(df, dtype=np.float64), shape)
    except ValueError:
        raise InputError(f"df: shape {np.shape(df)} does not broadcast to the looks' {shape}") from None
    fin = np.isfinite(d)
    if (d[fin] <= 0).any():
        raise InputError("df: degrees of freedom must be > 0 (inf or NaN: that look's statistic is a z)")
    return d if fin.any() else None


def z_equivalent(t: ArrayLike, df: ArrayLike) -> NDArray[np.float64]:
    r"""Student t statistics as the normal deviates of the same tail probability (the sign kept):
    :math:`z = -\Phi^{-1}(F_{\nu}(-|t|))\,\mathrm{sign}(t)`; ``df`` ``inf`` or NaN leaves ``t`` as it is.

    A normal-theory sequential rule applied to these deviates rejects at a look exactly when the t-test's p-value
    is below the rule's nominal level there: Jennison and Turnbull's *significance level approach* to group
    sequential t-tests (Group Sequential Methods, 2000, ch. 3), which keeps the error rate of a rule planned with
    z close to its level where the looks' t have few degrees of freedom (z on such t exceeds it: O'Brien-Fleming's
    0.096 and the mSPRT's 0.078 at alpha 0.05 on five looks of 4 to 20 observations, against 0.053 and 0.008)."""
    from scipy.special import ndtri, stdtr

    x = np.asarray(t, dtype=np.float64)
    d = _looks_df(df, x.shape)
    if d is None:
        return x.copy()
    fin = np.isfinite(d) & np.isfinite(x)
    with np.errstate(divide="ignore"):
        tail = stdtr(np.where(fin, d, 1.0), -np.abs(np.where(fin, x, 0.0)))  # one-sided tail, in (0, 0.5]
        z = -ndtri(tail)  # >= 0; inf where the tail underflows
    return np.where(fin, np.copysign(z, x), x)


def _t_radius(h: NDArray[np.float64], df: NDArray[np.float64] | None) -> NDArray[np.float64]:
    """A normal radius ``h`` (in SEs) as the t radius of the same tail probability at each look's ``df``."""
    if df is None:
        return h
    from scipy.special import ndtr, stdtrit

    fin = np.isfinite(df) & np.isfinite(h)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = -stdtrit(np.where(fin, df, 1.0), ndtr(-np.where(fin, h, 0.0)))
    return np.where(fin, r, h)


def _mixture(
    estimate: ArrayLike, se: ArrayLike, tau: ArrayLike, alpha: float, null: float, method: str,
    df: ArrayLike | None = None,
) -> SequentialResult:
    a = _check_alpha(alpha)
    est, s = _estimates(estimate, se)
    t_df = _looks_df(df, est.shape)
    tau_arr = np.asarray(tau, dtype=np.float64)
    if not np.isfinite(tau_arr).all() or (tau_arr <= 0).any():
        raise InputError("tau: the mixture scale must be finite and > 0 (see mixture_tau)")
    if tau_arr.ndim > 0:
        tau_arr = tau_arr[..., None]  # one tau per leading row, shared by its looks
    tau2 = tau_arr**2
    v = s * s
    d = est - float(null)
    pos = v > 0
    if t_df is not None:  # each look's t as the normal deviate of its tail probability (z_equivalent)
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(pos, z_equivalent(np.where(pos, d / np.where(pos, s, 1.0), 0.0), t_df) * s, d)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        vv = np.where(pos, v, 1.0)
        log_lr = 0.5 * np.log(vv / (vv + tau2)) + tau2 * d * d / (2.0 * vv * (vv + tau2))
        log_lr = np.where(pos, log_lr, np.where(d == 0, 0.0, np.inf))
        p_now = np.minimum(1.0, np.exp(-log_lr))
        half = np.sqrt(2.0 * vv * (vv + tau2) / tau2 * (0.5 * np.log((vv + tau2) / vv) - math.log(a)))
        half = np.where(pos, _t_radius(half / np.sqrt(vv), t_df) * np.sqrt(vv), 0.0)
    nan = np.isnan(d) | np.isnan(v)
    p_now = np.where(nan, np.nan, p_now)
    pvalue = np.fmin.accumulate(p_now, axis=-1)
    lo = np.fmax.accumulate(np.where(nan, np.nan, est - half), axis=-1)
    hi = np.fmin.accumulate(np.where(nan, np.nan, est + half), axis=-1)
    with np.errstate(invalid="ignore"):
        cross = p_now <= a
    reject, stop, by = _first(cross)
    return SequentialResult(reject, stop, by, pvalue, lo, hi, method, a)


def msprt(
    estimate: ArrayLike, se: ArrayLike, *, tau: ArrayLike, alpha: float = 0.05, null: float = 0.0,
    df: ArrayLike | None = None,
) -> SequentialResult:
    r"""Mixture sequential probability ratio test with always-valid p-values.

    Parameters
    ----------
    estimate, se:
        Estimates :math:`\hat\Delta_k` and standard errors at each look, looks on the last
        axis (e.g. ``Estimates.estimate`` and ``Estimates.se`` of shape (replicates, days)).
        NaN marks a look where the estimate is undefined (it neither rejects nor updates).
    tau:
        Standard deviation of the normal mixing distribution of the effect, on the scale of
        ``estimate``: a scalar, or one value per leading row (shape ``estimate.shape[:-1]``).
        :func:`mixture_tau` gives the value tightest at a planned horizon.
    alpha:
        Level. Default 0.05.
    null:
        :math:`\Delta_0`. Default 0.
    df:
        Each look's degrees of freedom (shape of ``estimate``, or broadcast to it) where the looks' statistics
        :math:`(\hat\Delta_k - \Delta_0) / s_k` are Student t's (a t interval's estimate): each is taken as the
        normal deviate of the same tail probability (:func:`z_equivalent`) and the interval's radius as the t
        radius of the normal one's tail; ``inf`` / NaN entries and ``None`` (default) keep the normal theory.

    Returns
    -------
    SequentialResult
        ``pvalue`` are the always-valid p-values, ``ci_low``/``ci_high`` the confidence
        sequence (identical to :func:`confidence_sequence`), ``reject`` when some
        :math:`p_k \le \alpha`.

    Notes
    -----
    Mixing the likelihood ratio of :math:`\hat\Delta_k \sim N(\Delta, s_k^2)` against
    :math:`\Delta_0` over :math:`\Delta \sim N(\Delta_0, \tau^2)` (Johari et al. 2017, eq. (11))
    gives

    .. math::

        \Lambda_k = \sqrt{\frac{s_k^2}{s_k^2 + \tau^2}}
            \exp\!\left(\frac{\tau^2 (\hat\Delta_k - \Delta_0)^2}{2 s_k^2 (s_k^2 + \tau^2)}\right),
        \qquad p_k = \min\bigl(1, p_{k-1}, 1/\Lambda_k\bigr),

    a non-negative martingale under :math:`H_0`, so
    :math:`P_0(\exists k: p_k \le \alpha) \le \alpha` by Ville's inequality for any number of
    looks; with estimated :math:`s_k` this holds asymptotically (Waudby-Smith et al. 2023).
    ``se == 0`` gives :math:`p = 1` if the estimate equals the null and 0 otherwise.
    """
    return _mixture(estimate, se, tau, alpha, null, "msprt", df)


def confidence_sequence(
    estimate: ArrayLike, se: ArrayLike, *, tau: ArrayLike, alpha: float = 0.05, null: float = 0.0,
    df: ArrayLike | None = None,
) -> SequentialResult:
    r"""Two-sided normal-mixture confidence sequence (running intersection) and its test.

    The interval at look :math:`k` is

    .. math::

        \hat\Delta_k \pm \sqrt{2 s_k^2\left(1 + \frac{s_k^2}{\tau^2}\right)
            \log\frac{\sqrt{1 + \tau^2/s_k^2}}{\alpha}}

    (Howard et al. 2021, eq. (14), two-sided normal mixture; in the parametrisation of
    Waudby-Smith et al. 2023, Thm. 2.2, :math:`\rho^2 = \tau^2/\hat\sigma^2`), intersected
    with all earlier ones; it covers :math:`\Delta` at all looks simultaneously with
    probability at least :math:`1 - \alpha` (asymptotically with estimated :math:`s_k`).
    It is the inversion of :func:`msprt`: :math:`\Delta_0` leaves the sequence exactly when
    the always-valid p-value drops to :math:`\le\alpha`, so ``reject`` is identical.
    Parameters as in :func:`msprt`.
    """
    return _mixture(estimate, se, tau, alpha, null, "confidence_sequence", df)


def group_sequential_test(statistic: ArrayLike, boundaries: Boundaries) -> SequentialResult:
    r"""Apply group-sequential boundaries to z-statistics, looks on the last axis.

    ``statistic[..., k]`` is :math:`Z_k = (\hat\Delta_k - \Delta_0)/\mathrm{se}_k` at the look
    with information fraction ``boundaries.fractions[k]`` (the last axis must have
    ``boundaries.n_looks`` entries). Rejects at the first look with :math:`Z_k \ge u_k` or
    :math:`Z_k \le l_k`; NaN statistics never reject.
    """
    z = _as_looks(statistic, "statistic")
    if z.shape[-1] != boundaries.n_looks:
        raise InputError(
            f"statistic: the last axis has {z.shape[-1]} looks but the boundaries have {boundaries.n_looks}"
        )
    with np.errstate(invalid="ignore"):
        cross = (z >= boundaries.upper) | (z <= boundaries.lower)
    reject, stop, by = _first(cross)
    return SequentialResult(reject, stop, by, None, None, None, boundaries.kind, boundaries.alpha)


def peeking_test(pvalues: ArrayLike, alpha: float = 0.05) -> SequentialResult:
    """The naive rule: reject at the first look whose fixed-horizon p-value is below ``alpha``.

    ``pvalues`` has looks on the last axis (NaN never rejects). Its false-positive rate is
    inflated (:func:`peeking_fpr`); report it next to the fixed-horizon rate, do not use it.
    """
    a = _check_alpha(alpha)
    p = _as_looks(pvalues, "pvalues")
    if ((p < 0) | (p > 1)).any():
        raise InputError("pvalues: p-values must lie in [0, 1]")
    with np.errstate(invalid="ignore"):
        cross = p < a
    reject, stop, by = _first(cross)
    return SequentialResult(reject, stop, by, p, None, None, "peeking", a)



def sequential_test(
    estimate: ArrayLike,
    se: ArrayLike,
    design: str,
    *,
    alpha: float = 0.05,
    null: float = 0.0,
    tau: ArrayLike | None = None,
    fractions: ArrayLike | None = None,
    df: ArrayLike | None = None,
) -> SequentialResult:
    r"""One entry point for every design, on estimates and standard errors with looks on the last axis.

    Parameters
    ----------
    estimate, se:
        :math:`\hat\Delta_k` and :math:`\mathrm{se}_k`, shape ``(..., K)`` (e.g. replicates x days).
    design:
        ``"none"`` (the fixed-horizon two-sided z-test at the last look only), ``"peeking"``
        (the same test at every look, stop at the first rejection), ``"msprt"``,
        ``"confidence_sequence"`` (both need ``tau``), ``"obrien_fleming"`` or ``"pocock"``
        (Lan-DeMets spending boundaries at ``fractions``).
    alpha:
        Two-sided level. Default 0.05.
    null:
        :math:`\Delta_0`. Default 0.
    tau:
        Mixture scale for ``msprt`` / ``confidence_sequence`` (see :func:`mixture_tau`; choose it
        from the planned horizon, not from the data being tested).
    fractions:
        Information fractions of the looks for the spending designs; default ``k/K``
        (equally spaced). With unequal traffic use the planned :math:`\mathrm{se}_K^2/\mathrm{se}_k^2`.
    df:
        Each look's degrees of freedom (shape of ``estimate``, or broadcast to it) where the looks' statistics are
        Student t's (an estimate whose interval is a t interval, e.g. Bell and McCaffrey's for a clustered ratio);
        ``inf`` or NaN entries, and ``None``, keep z. ``"none"`` and ``"peeking"`` then test with the t's
        p-values; the mixture and spending designs apply their normal-theory rule to each t taken as the normal
        deviate of the same tail probability (:func:`z_equivalent`: Jennison and Turnbull's significance level
        approach; the confidence sequence's radius likewise).

    Returns
    -------
    SequentialResult
        For ``"none"``, ``stop_look`` is ``K - 1`` when the final test rejects.
    """
    if design not in SEQUENTIAL_DESIGNS:
        raise InputError(must_be_one_of(SEQUENTIAL_DESIGNS, design, "design"))
    a = _check_alpha(alpha)
    if design in ("msprt", "confidence_sequence"):
        if tau is None:
            raise InputError(f"design {design}: needs tau, the mixture scale (e.g. mixture_tau(planned_se, alpha))")
        fn = msprt if design == "msprt" else confidence_sequence
        return fn(estimate, se, tau=tau, alpha=a, null=null, df=df)
    est, s = _estimates(estimate, se)
    d = est - float(null)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(s > 0, d / np.where(s > 0, s, 1.0), np.where(d == 0, 0.0, np.copysign(np.inf, d)))
    z = np.where(np.isnan(d) | np.isnan(s), np.nan, z)
    k = z.shape[-1]
    t_df = _looks_df(df, z.shape)
    if design == "peeking":
        p = np.minimum(1.0, 2.0 * _sf(np.abs(z)))
        if t_df is not None:
            from scipy.special import stdtr

            fin = np.isfinite(t_df)
            p = np.where(fin, np.minimum(1.0, 2.0 * stdtr(np.where(fin, t_df, 1.0), -np.abs(z))), p)
        return peeking_test(np.where(np.isnan(z), np.nan, p), a)
    if design == "none":
        crit = _z(1.0 - a / 2.0)
        if t_df is not None:
            from scipy.special import stdtrit

            last_df = t_df[..., -1]
            fin = np.isfinite(last_df)
            crit = np.where(fin, stdtrit(np.where(fin, last_df, 1.0), 1.0 - a / 2.0), crit)
        with np.errstate(invalid="ignore"):
            last = np.abs(z[..., -1]) >= crit
        cross = np.zeros(z.shape, dtype=bool)
        cross[..., -1] = last
        reject, stop, by = _first(cross)
        return SequentialResult(reject, stop, by, None, None, None, "fixed", a)
    t = equal_fractions(k) if fractions is None else _check_fractions(fractions)
    if t.size != k:
        raise InputError(f"fractions: {t.size} fractions for {k} looks")
    # a zero se's infinite z (the convention above: the estimate off the null is certain) crosses every boundary
    # on its side; group_sequential_test refuses infinities (a simulated look with two users failed the analysis
    # of a whole run), and +-1e300 crosses the same finite boundaries
    if t_df is not None:
        z = z_equivalent(z, t_df)
    return group_sequential_test(np.clip(z, -1e300, 1e300), spending_boundaries(t, a, design))
