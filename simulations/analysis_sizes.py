"""Sample sizes: the variance model, the required impressions and their uncertainty.

:class:`VarianceModel` fits :math:`se^2(N) = a/N + b` to the daily checkpoints (:func:`variance_model`; returning
users give the standard error a floor ``b``); :func:`required_impressions` is the N with
:math:`se(N) = |\\delta| / (z_{1-\\alpha/2} + z_{power})` (:func:`target_variance`), "not reachable" when the floor
is above it; for t rows the t-test's N (:class:`DfModel`, :func:`df_model`, :func:`t_power`), and
:func:`expected_distinct_users` the users those impressions bring. The size's own uncertainty:
the fit refitted on bootstrap resamples of the replicates (:func:`size_refits`, seeded by :func:`size_seed`, from
:func:`replicate_arrays`), each refit's size (:func:`refit_sizes`) and their spread and 'unstable' flag
(:func:`refit_spread`, :func:`size_uncertainty`, :func:`required_impressions_uncertainty`; near the floor the answer
is ill-conditioned, :data:`UNSTABLE_FLOOR_RATIO`), with the words of an unstable answer's range
(:func:`spread_text`); :func:`extrapolation_factor` and :func:`is_extrapolated` say how far a size extrapolates the
model past the simulated days (:data:`EXTRAPOLATION_FLAG`). Re-exported by :mod:`simulations.analysis`, whose
:func:`~simulations.analysis.analyse` calls :func:`size_refits` by that module's name (tests patch it there).
"""

from __future__ import annotations

import math
import zlib
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.optimize import brentq


def expected_distinct_users(impressions: float | np.ndarray, population: int, sigma: float) -> np.ndarray:
    r"""Expected number of distinct users among ``impressions`` arrivals.

    Each user's share of the traffic is :math:`a_u / \sum a` with lognormal activity
    :math:`a_u = e^{\sigma Z_u}`; for a large population :math:`\sum a \approx
    P e^{\sigma^2/2}`, and with Poisson arrivals a user is seen at least once with
    probability :math:`1 - \exp(-N a_u / (P e^{\sigma^2/2}))`. The expectation over
    :math:`Z` is taken by 80-point Gauss-Hermite quadrature.
    """
    x, w = np.polynomial.hermite_e.hermegauss(80)  # weight exp(-x^2/2)
    w = w / w.sum()
    n = np.asarray(impressions, dtype=np.float64)[..., None]
    rate = n * np.exp(sigma * x - sigma**2 / 2) / population
    return population * (w * -np.expm1(-rate)).sum(axis=-1)


#: checkpoints (days with a measured SE) the variance model needs to fit a floor ``b``; with fewer (a run of fewer
#: days, or an SE measured on the last day only, as adaptive IPS's bootstrap SD) it assumes none (se^2 = a/N), an
#: assumption, not a measurement: every size from such a fit is flagged unstable ('?') and says so
FLOOR_MIN_POINTS = 3


class VarianceModel(NamedTuple):
    r""":math:`se^2(N) = a / N + b` fitted to the daily checkpoints (mean SE over replicates).

    With a fixed population of returning users the standard error does not fall as
    :math:`1/\sqrt{N}` for ever: user-level differences do not average out beyond the
    population, so :math:`se^2` approaches a floor ``b``. Least squares of :math:`se^2` on
    :math:`1/N` over the checkpoints; ``b`` is clamped at 0 (no floor detected) and ``a`` at
    a positive value.
    """

    a: float
    b: float
    points: int

    @property
    def floor_se(self) -> float:
        return math.sqrt(self.b)

    @property
    def floor_fitted(self) -> bool:
        """False with fewer than :data:`FLOOR_MIN_POINTS` usable checkpoints: ``b = 0`` is assumed, not fitted."""
        return self.points >= FLOOR_MIN_POINTS


def variance_model(impressions: np.ndarray, se: np.ndarray) -> VarianceModel:
    """:class:`VarianceModel` of one series of checkpoints (``impressions`` and mean ``se`` by day): the row
    of :func:`_fit_rows`, which also refits the bootstrap resamples (:func:`size_refits`)."""
    a, b, points = _fit_rows(np.asarray(impressions, dtype=np.float64)[None, :],
                             np.asarray(se, dtype=np.float64)[None, :])
    return VarianceModel(float(a[0]), float(b[0]), int(points[0]))


def _fit_rows(n: np.ndarray, se: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The variance model of every row of ``n`` and ``se`` (series x checkpoints): ``(a, b, points)``.

    A row's usable checkpoints have a finite positive SE and positive impressions; with none, ``a = b = NaN``.
    With 3 or more at distinct ``1/N``, least squares of :math:`v = se^2` on :math:`x = 1/N` over them
    (closed form: slope :math:`\sum (x - \bar x)(v - \bar v) / \sum (x - \bar x)^2`, intercept
    :math:`\bar v - slope\,\bar x`), kept when the slope is positive and the intercept not negative.
    Otherwise no usable floor: :math:`se^2 = a / N` through the last usable checkpoint, ``b = 0``."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(se) & (se > 0) & (n > 0)
    points = ok.sum(axis=1)
    a = np.full(n.shape[0], np.nan)
    b = np.full(n.shape[0], np.nan)
    some = points > 0
    if not some.any():
        return a, b, points
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(ok, 1.0 / n, 0.0)
        v = np.where(ok, se * se, 0.0)
        m = np.maximum(points, 1)
        x_bar, v_bar = x.sum(axis=1) / m, v.sum(axis=1) / m
        xc = np.where(ok, x - x_bar[:, None], 0.0)
        sxx = (xc * xc).sum(axis=1)
        slope = (xc * (v - v_bar[:, None])).sum(axis=1) / sxx
        intercept = v_bar - slope * x_bar
    spread = np.where(ok, x, -np.inf).max(axis=1) > np.where(ok, x, np.inf).min(axis=1)  # distinct 1/N
    good = some & (points >= FLOOR_MIN_POINTS) & spread & (sxx > 0) & (slope > 0) & (intercept >= 0)
    last = n.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)  # the last usable checkpoint
    rows = np.arange(n.shape[0])
    through_last = v[rows, last] * np.where(ok, n, 0.0)[rows, last]
    a = np.where(good, slope, np.where(some, through_last, np.nan))
    b = np.where(good, intercept, np.where(some, 0.0, np.nan))
    return a, b, points


class DfModel(NamedTuple):
    r"""The degrees of freedom of a design's t rows along the impressions: each day's median df (the t critical
    value :func:`simulations.analysis_curves.curves` takes) at the day's mean impressions (:func:`df_model`).

    :meth:`at` interpolates linearly between the days, holds the last day's df beyond it (a fixed population's df
    stop growing; where new users keep arriving this is conservative) and scales the first day's in proportion
    below it (every impression a new user: df grow with N there), never below 1 (the t's own limit: fewer
    df are no test anyone runs, and scipy's noncentral t is not accurate there). The days' df are made
    non-decreasing along N, so power grows with N and the size is one root: each day's is at most any later day's
    (a running minimum from the last day; conservative where they fall, as a fixed population's clustered df do
    when its users come back more often: tests/test_t_sizes.py)."""

    impressions: tuple[float, ...]
    df: tuple[float, ...]

    def at(self, n: Any) -> Any:
        """The df at ``n`` impressions (a number, or an array: elementwise)."""
        x = np.asarray(self.impressions, dtype=np.float64)
        d = np.asarray(self.df, dtype=np.float64)
        n_ = np.asarray(n, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.maximum(np.where(n_ < x[0], d[0] * n_ / x[0], np.interp(n_, x, d)), 1.0)
        return float(out) if np.ndim(out) == 0 else out

    @property
    def limit(self) -> float:
        """The df as N grows without bound (the last day's: :meth:`at` holds it)."""
        return float(self.df[-1])


def df_model(impressions: Any, df: Any) -> DfModel | None:
    """:class:`DfModel` of one series of checkpoints (``impressions`` and median ``df`` by day); ``None`` (the
    z test's sizes) when no day has a finite positive df at positive impressions: z rows, or estimates sized
    from the replicates' SD (whose analytic power takes z)."""
    n = np.asarray(impressions, dtype=np.float64)
    d = np.asarray(df, dtype=np.float64)
    ok = np.isfinite(n) & (n > 0) & np.isfinite(d) & (d > 0)  # df below 1 are read as 1 (DfModel.at)
    if not ok.any():
        return None
    order = np.argsort(n[ok], kind="stable")
    n_ok, d_ok = n[ok][order], np.maximum(d[ok][order], 1.0)
    d_ok = np.minimum.accumulate(d_ok[::-1])[::-1]  # no day's df above a later day's
    return DfModel(tuple(float(v) for v in n_ok), tuple(float(v) for v in d_ok))


def t_power(nc: Any, df: Any, alpha: float) -> Any:
    r"""The power of a two-sided t-test at ``alpha`` with ``df`` degrees of freedom, counting rejections with the
    effect's sign (as the simulated power counts them): :math:`P(T > t_{df}(1 - \alpha/2))` for a noncentral t
    of noncentrality ``nc`` :math:`= |\delta| / se` (elementwise over arrays)."""
    df_ = np.asarray(df, dtype=np.float64)
    crit = sps.t.ppf(1 - alpha / 2, df_)
    out = sps.nct.sf(crit, df_, np.asarray(nc, dtype=np.float64))
    return float(out) if np.ndim(out) == 0 else out


#: geometric bisection steps of the t sizes (:func:`_t_sizes`): from a bracket of 10^15 to a relative 10^-17
_T_SIZE_STEPS = 64
#: doublings of the bracket's upper end before a size is taken as not reachable
_T_SIZE_DOUBLINGS = 200


def _t_sizes(a: np.ndarray, b: np.ndarray, effect: np.ndarray, alpha: float, power: float,
             dfm: DfModel) -> np.ndarray:
    r"""The impressions at which :func:`t_power` of :math:`|\delta| / se(N)` at :meth:`DfModel.at`\ (N) reaches
    ``power``, for every ``(a, b, effect)`` (:math:`se(N)^2 = a/N + b`): the power grows with N (se falls, the df
    do not), so the root is bracketed from the z size (doubled until the t power reaches the target) and found by
    geometric bisection; ``inf`` where even the floor's limit (:math:`se = \sqrt b` at the last day's df) falls
    short, the effect is 0 or ``a`` is not finite."""
    a, b, eff = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                                    np.abs(np.asarray(effect, dtype=np.float64)))
    out = np.full(a.shape, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = np.isfinite(a) & (a > 0) & np.isfinite(b) & (b >= 0) & (eff > 0)
        nc_limit = np.where(b > 0, eff / np.sqrt(np.where(b > 0, b, 1.0)), np.inf)
    finite_limit = ok & np.isfinite(nc_limit)  # b = 0: se falls to 0, every power is reached
    ok &= ~finite_limit | (t_power(np.where(finite_limit, nc_limit, 0.0), dfm.limit, alpha) >= power)
    if not ok.any():
        return out
    a_, b_, e_ = a[ok], b[ok], eff[ok]

    def short(n: np.ndarray) -> np.ndarray:
        return t_power(e_ / np.sqrt(a_ / n + b_), dfm.at(n), alpha) < power

    z_target = target_variance(e_, alpha, power)
    with np.errstate(divide="ignore", invalid="ignore"):
        hi = np.where(z_target > b_, a_ / (z_target - b_), a_ / np.maximum(z_target, 1e-300))
    hi = np.where(np.isfinite(hi) & (hi > 0), hi, 1.0)
    need = short(hi)
    for _ in range(_T_SIZE_DOUBLINGS):
        if not need.any():
            break
        hi = np.where(need, 2.0 * hi, hi)
        need = need & short(hi)
    lo = hi * 1e-15
    for _ in range(_T_SIZE_STEPS):
        mid = np.sqrt(lo * hi)
        below = short(mid)
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    out[ok] = np.where(need, np.inf, hi)
    return out


def required_impressions(fit: VarianceModel, effect: float, alpha: float, power: float,
                         dfm: DfModel | None = None) -> float:
    r"""Impressions for ``power`` (rejections with the effect's sign) at two-sided ``alpha``:
    the N with :math:`se(N) = |\delta| / (z_{1-\alpha/2} + z_{power})`; ``inf`` when the
    variance floor is above that (the population cannot reach the power) or the effect is 0.

    With ``dfm`` (t rows: :func:`df_model`) the t-test's size: the N at which :func:`t_power` of
    :math:`|\delta| / se(N)` at the df :meth:`DfModel.at` (N) reaches ``power`` (:func:`_t_sizes`), the power the
    curves' analytic column takes, so the size and the analytic days agree."""
    if effect == 0 or not np.isfinite(fit.a):
        return float("inf")
    if dfm is not None:
        return float(_t_sizes(np.array([fit.a]), np.array([fit.b]), np.array([effect]), alpha, power, dfm)[0])
    target = target_variance(effect, alpha, power)
    if target <= fit.b:
        return float("inf")
    return float(fit.a / (target - fit.b))


#: bootstrap resamples of the replicates behind the analytic sample size's uncertainty
SIZE_BOOTSTRAP = 200


#: SeedSequence entropy tag of the sample size's bootstrap ("sizeboot")
_SIZE_SEED_TAG = 0x73697A65626F6F74


#: an analytic sample size is flagged unstable when the fitted SE floor ``b`` is above this share of the
#: target :math:`se^2 = T = (|\delta| / (z_{1-\alpha/2} + z_{power}))^2` (the answer's sensitivity to ``b`` is
#: :math:`b / (T - b)`: 4 at 0.8) ...
UNSTABLE_FLOOR_RATIO = 0.8


#: an analytic size whose days (analytic days / simulated days) are extrapolated beyond this factor is unstable ('?'):
#: se^2 = a/N + b is then used far past the simulated days and the answer depends on that model (review 4, F2: 9-14%
#: too many days at 9x on configs/ab.yaml), an error the refits' 90% range leaves out
EXTRAPOLATION_FLAG = 3.0


#: ... or when its relative standard error over the refits is above this
UNSTABLE_REL_SE = 0.25


def extrapolation_factor(impressions: float, queries_per_day: float, simulated_days: Any) -> float | None:
    """How far an analytic size extrapolates the variance model past the simulated days: its days
    (``impressions / queries_per_day``) over the simulated days; ``None`` when the size is not finite. The one rule
    of the main table's '*' sizes and CUPED's days needed (:mod:`simulations.cuped`)."""
    return impressions / queries_per_day / float(simulated_days) if math.isfinite(impressions) else None


def is_extrapolated(factor: float | None) -> bool:
    """A factor of :func:`extrapolation_factor` beyond :data:`EXTRAPOLATION_FLAG` (the size is model-dependent)."""
    return bool(factor is not None and factor > EXTRAPOLATION_FLAG)


def target_variance(effect: Any, alpha: float, power: float, df: float = math.inf) -> Any:
    r"""The :math:`se^2` at which a two-sided test at ``alpha`` has ``power`` for ``effect`` (a number, or an
    array: elementwise): :math:`(|\delta| / (z_{1-\alpha/2} + z_{power}))^2`; with finite ``df`` the t-test's,
    :math:`(|\delta| / \lambda)^2` with :math:`\lambda` the noncentrality at which :func:`t_power` is ``power``."""
    if math.isfinite(df):
        lam = float(brentq(lambda x: t_power(x, df, alpha) - power, 0.0, 1e3, xtol=1e-14, rtol=1e-14))
    else:
        lam = float(sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power))
    t = (np.abs(effect) / lam) ** 2
    return float(t) if np.ndim(t) == 0 else t


class SizeRefits(NamedTuple):
    """The variance model refitted on bootstrap resamples of the replicates (:func:`size_refits`): one
    ``(a, b)`` per resample and the true effect it was drawn with."""

    a: np.ndarray
    b: np.ndarray
    effect: np.ndarray


def size_seed(seed: Any, design: str, metric: str) -> tuple[Any, ...]:
    """The entropy of the size bootstrap of one design and metric (the config's seed, the tag, the names'
    CRC-32), so the main table's size, CUPED's and the sequential plan's draw reproducibly."""
    return (seed, _SIZE_SEED_TAG, zlib.crc32(design.encode()), zlib.crc32(metric.encode()))


def replicate_arrays(rows: pd.DataFrame, days: Any = None, values: str = "se") -> tuple[np.ndarray, np.ndarray]:
    """(replicates, days) arrays of each replicate's SE (NaN where undefined; ``values="estimate"``: its
    estimate) and impressions by day of one design and metric's rows (columns ``replicate, day, se,
    n_impressions``), days in ``days`` order (default: sorted)."""
    days = sorted(rows["day"].unique()) if days is None else list(days)
    wide_se = rows.pivot_table(index="replicate", columns="day", values=values, aggfunc="first", dropna=False)
    wide_n = rows.pivot_table(index="replicate", columns="day", values="n_impressions", aggfunc="first",
                              dropna=False)
    return (wide_se.reindex(columns=days).to_numpy(dtype=np.float64),
            wide_n.reindex(columns=days).to_numpy(dtype=np.float64))


def size_refits(se: np.ndarray, impressions: np.ndarray, effect: float, effect_se: float, seed: Any,
                resamples: int = SIZE_BOOTSTRAP, spread: bool = False) -> SizeRefits | None:
    r"""The variance model :math:`se^2 = a/N + b` refitted on ``resamples`` bootstrap resamples of the
    replicates (each day's mean SE and mean impressions over the resampled replicates, as :func:`curves`),
    with the true effect drawn from :math:`N(\delta, se_\delta^2)` when it has a Monte Carlo error; ``None``
    with fewer than 2 replicates or no effect. ``se`` and ``impressions``: (replicates, days) arrays
    (:func:`replicate_arrays`); ``seed``: entropy for :class:`numpy.random.SeedSequence`
    (:func:`size_seed`). With ``spread``, ``se`` holds the replicates' *estimates* and each resample's day SE is
    their SD (ddof 1) over the resampled replicates, as the point fit of an estimate sized from its replicates'
    SD (:func:`analyse`).

    A plug-in bootstrap of :math:`r` replicates gives a mean the variance :math:`(r-1)/r \cdot s^2/r`, short of
    :math:`s^2/r` (a relative spread 0.983 of the true one at 30 replicates). Each resample's day values (mean SE,
    mean impressions) are therefore moved away from the replicates' own by :math:`\sqrt{r/(r-1)}` times their
    resampled deviation (:math:`r` the day's finite replicates), which restores the variance of every smooth
    function of them to first order (the sequential plan and CUPED read these refits too). With ``spread`` the
    day's SD is moved so on the log scale, :math:`s (s_b/s)^{\sqrt{r/(r-1)}}`: the same first-order variance, and
    never a sign change (the additive form made an SD below :math:`(1 - \sqrt{(r-1)/r})\,s` non-positive, 34% of
    the resamples at 3 replicates in review 16's F3, which :func:`_fit_rows` then dropped as unusable). The means
    keep the additive form, exact for a mean's variance; it could make one non-positive only with a replicate below
    that share of the day's mean (18% at 3 replicates, 5% at 10), far from how one day's SEs or impressions vary
    over replicates. For an SD
    the factor is asymptotic only: at few replicates the bootstrap of an SD falls short by more than
    :math:`(r-1)/r`, the plug-in kurtosis being biased low. Measured with
    tests/test_report_sample_sizes.py's model (30 replicates, far from the floor; 10 master seeds x 600 runs
    against the 16-84% half-range of 20,000 independent answers each): :func:`required_impressions_uncertainty`'s
    ``rel_se`` averaged 0.975 +- 0.003 of the true spread without it (geometric mean 0.960) and 0.992 +- 0.003
    with it (geometric 0.976, root mean square 1.007 +- 0.003)."""
    se = np.asarray(se, dtype=np.float64)
    impressions = np.asarray(impressions, dtype=np.float64)
    r = se.shape[0]
    if r < 2 or not effect:
        return None
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    idx = rng.integers(0, r, size=(resamples, r))
    eff = effect + (effect_se * rng.standard_normal(resamples) if effect_se > 0 else 0.0)
    n_b = _inflated(np.nanmean(impressions[idx], axis=1), np.nanmean(impressions, axis=0), impressions)
    if spread:
        se_b = _inflated(_nansd(se[idx], axis=1), _nansd(se, axis=0), se, log=True)
    else:
        se_b = _inflated(_nanmean0(se[idx], axis=1), _nanmean0(se, axis=0), se)
    a, b, _ = _fit_rows(n_b, se_b)
    return SizeRefits(a, b, np.broadcast_to(np.asarray(eff, dtype=np.float64), a.shape).copy())


def _inflated(resampled: np.ndarray, whole: np.ndarray, values: np.ndarray, log: bool = False) -> np.ndarray:
    """(resamples, days) values moved away from the replicates' own (``whole``, per day) by sqrt(r / (r - 1)) times
    their deviation, r = each day's finite ``values`` (unchanged below 2): :func:`size_refits`' correction of the
    plug-in bootstrap's spread. With ``log`` (non-negative values: SDs) the deviation of the log,
    ``whole * (resampled / whole) ** factor``, which keeps a positive value positive and 0 at 0 (a ``whole`` of 0:
    unchanged)."""
    count = np.sum(np.isfinite(values), axis=0)
    factor = np.sqrt(count / np.maximum(count - 1, 1)) * (count > 1) + (count <= 1)
    if not log:
        return whole + factor * (resampled - whole)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(whole > 0, whole * (resampled / whole) ** factor, resampled)


def refit_spread(point: float, refits: np.ndarray, floor_ratio: float | None,
                 floor_fitted: bool = True) -> dict[str, Any]:
    """The spread of an answer computed from the variance model over its refits (:func:`size_refits`; ``inf``
    = not reachable) and whether it is unstable, by one rule for every such answer (sizes, days, planned
    sequential days): ``rel_se`` = half the 16-84% range over the point value (None when the point or the
    84th percentile is not reachable), ``range`` = the 5% and 95% points, ``unreachable_share``, and
    ``unstable``: a finite answer with ``floor_ratio > UNSTABLE_FLOOR_RATIO`` (the answer moves by
    ``f / (1 - f)`` times a relative change of ``b``) or ``rel_se > UNSTABLE_REL_SE`` (or undefined) or a
    95% point not reachable, or from a model whose floor was not fitted (``floor_fitted`` False: fewer than
    :data:`FLOOR_MIN_POINTS` checkpoints, ``b = 0`` assumed, so the refits' spread leaves out the floor the
    answer depends on most; ``floor_ratio`` is then ``None``); a 'not reachable' answer that at least 10% of the
    refits reach."""
    q05, q16, q84, q95 = np.quantile(refits, [0.05, 0.16, 0.84, 0.95], method="inverted_cdf")
    unreachable = float(np.mean(np.isinf(refits)))
    rel_se = float((q84 - q16) / 2 / point) if math.isfinite(point) and np.isfinite(q84) else None
    if not floor_fitted:
        floor_ratio = None
    if math.isfinite(point):
        unstable = ((floor_ratio or 0.0) > UNSTABLE_FLOOR_RATIO or rel_se is None or rel_se > UNSTABLE_REL_SE
                    or not np.isfinite(q95) or not floor_fitted)
    else:
        unstable = unreachable < 0.9
    return {"rel_se": rel_se, "range": [float(q05), float(q95)], "unreachable_share": unreachable,
            "floor_ratio": floor_ratio, "floor_fitted": bool(floor_fitted), "unstable": bool(unstable)}


def required_impressions_uncertainty(
    fit: VarianceModel, se: np.ndarray, impressions: np.ndarray, effect: float, effect_se: float, alpha: float,
    power: float, seed: Any, resamples: int = SIZE_BOOTSTRAP, dfm: DfModel | None = None,
) -> dict[str, Any]:
    r"""How well the replicates determine :func:`required_impressions`: the variance model
    :math:`se^2 = a/N + b` refitted on ``resamples`` bootstrap resamples of the replicates
    (:func:`size_refits`), the size computed from each refit, spread and flag by :func:`refit_spread`.

    ``fit``: the variance model of the replicates' daily means (:func:`variance_model`, the point value's);
    ``se`` and ``impressions``: (replicates, days) arrays, each replicate's SE (NaN where undefined) and
    impressions by day; ``seed``: entropy for :class:`numpy.random.SeedSequence` (the config's seed and
    the design and metric, so a config always gives the same numbers). Near the floor the answer moves
    by :math:`b / (T - b)` times any relative change of ``b``, hence ``floor_ratio`` :math:`= b / T`.

    Returns ``rel_se`` (half the 16-84% range of the refits over the point value, a normal SE for a
    symmetric spread; None when the point value is not reachable or the 84th percentile of the refits
    is not), ``range`` (the refits' 5% and 95% points, ``inf`` = not reachable), ``unreachable_share``
    (refits whose floor is above the target), ``floor_ratio`` and ``unstable``: a finite answer with
    ``floor_ratio > UNSTABLE_FLOOR_RATIO`` or ``rel_se > UNSTABLE_REL_SE`` (or undefined) or a 90% range
    reaching 'not reachable', or a 'not reachable' answer that at least 10% of the refits reach.

    ``rel_se`` is a noisy estimate of the answer's spread: with :func:`size_refits`' correction of the plug-in
    bootstrap's (r - 1) / r its root mean square over simulated runs is 1.007 +- 0.003 of the true spread and its
    mean 0.992 +- 0.003 (30 replicates, far from the floor), the mean's shortfall Jensen's (an estimate whose square
    is right on average is low on average); without the correction it was 0.975 (geometric mean 0.957-0.960)."""
    return size_uncertainty(fit, size_refits(se, impressions, effect, effect_se, seed, resamples), effect, alpha,
                            power, dfm)


def size_uncertainty(fit: VarianceModel, refits: SizeRefits | None, effect: float, alpha: float,
                     power: float, dfm: DfModel | None = None) -> dict[str, Any]:
    """:func:`required_impressions_uncertainty` from refits already drawn (:func:`size_refits`; ``None``: fewer
    than 2 replicates or no effect), so the main table and the sequential plan read the same refits. ``dfm``:
    the t rows' degrees of freedom (:func:`df_model`), held as they are in every refit; the floor ratio's target
    is then the t-test's at their limit (:func:`target_variance`)."""
    if fit.points == 0:
        # no day with a measured SE: the refits have nothing to fit either, so no share of them is 'not
        # reachable' (every one was, and 100% said the floor is above the target, which nothing measured)
        return {"rel_se": None, "range": None, "unreachable_share": None, "floor_ratio": None, "floor_fitted": False,
                "unstable": False, "resamples": 0}
    point = required_impressions(fit, effect, alpha, power, dfm)
    target = target_variance(effect, alpha, power, dfm.limit if dfm is not None else math.inf) if effect else 0.0
    fitted = fit.floor_fitted
    floor_ratio = float(fit.b / target) if target > 0 and np.isfinite(fit.b) and fitted else None
    if refits is None:
        return {"rel_se": None, "range": None, "unreachable_share": None, "floor_ratio": floor_ratio,
                "floor_fitted": fitted,
                "unstable": bool(math.isfinite(point) and ((floor_ratio or 0.0) > UNSTABLE_FLOOR_RATIO
                                                           or not fitted)),
                "resamples": 0}
    return {**refit_spread(point, refit_sizes(refits, alpha, power, dfm), floor_ratio, fitted),
            "resamples": int(refits.a.size)}


#: the range note of an answer whose variance model could not fit a floor (:func:`spread_notes`)
FLOOR_NOT_FITTED = (f"floor b not fitted (fewer than {FLOOR_MIN_POINTS} days with a measured SE: a short run, or an "
                    "SE measured on the last day only): se^2 = a/N assumed, too small beyond them if returning users "
                    "give the SE a floor")


def spread_notes(rel_se: float | None, floor_ratio: float | None, unreachable_share: float | None,
                 floor_of: str = "the target se^2", floor_fitted: bool | None = True) -> list[str]:
    """The notes of an unstable answer's range line (:func:`refit_spread`'s fields as written to summary.json):
    its relative SE, the floor ratio ('floor b = f x <floor_of>'; :data:`FLOOR_NOT_FITTED` where ``floor_fitted``
    is False) and the share of refits not reachable (from 0.05%)."""
    from simulations.report_numbers import value_text

    notes = []
    if rel_se is not None:
        notes.append(f"relative SE {rel_se:.0%}")
    if floor_fitted is False:
        notes.append(FLOOR_NOT_FITTED)
    elif floor_ratio is not None:
        notes.append(f"floor b = {value_text(floor_ratio)} x {floor_of}")
    if (unreachable_share or 0.0) >= 0.0005:
        notes.append(f"{unreachable_share:.1%} of refits not reachable")
    return notes


def spread_text(span: Any, fmt: Any, rel_se: float | None, floor_ratio: float | None,
                unreachable_share: float | None, floor_of: str = "the target se^2",
                floor_fitted: bool | None = True) -> str:
    """'lo to hi (notes)': an unstable answer's 90% range over the refits (``span``, ``None`` ends = not reachable:
    summary.json's null for inf; ``-`` without a range), each end by ``fmt``, then :func:`spread_notes`."""
    def cell(v: float | None) -> str:
        return "not reachable" if v is None or math.isinf(v) else fmt(v)

    lo, hi = span or (None, None)
    text = "-" if span is None else f"{cell(lo)} to {cell(hi)}"
    notes = spread_notes(rel_se, floor_ratio, unreachable_share, floor_of, floor_fitted)
    return text + (f" ({', '.join(notes)})" if notes else "")


def refit_sizes(refits: SizeRefits, alpha: float, power: float, dfm: DfModel | None = None) -> np.ndarray:
    """:func:`required_impressions` of every refit (``inf``: not reachable); with ``dfm`` the t-test's sizes."""
    if dfm is not None:
        return _t_sizes(refits.a, refits.b, refits.effect, alpha, power, dfm)
    t_b = target_variance(refits.effect, alpha, power)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((t_b > refits.b) & np.isfinite(refits.a) & (refits.effect != 0),
                        refits.a / (t_b - refits.b), np.inf)


def _nanmean0(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """The mean over ``axis`` ignoring NaN; NaN (no warning) where every value is NaN."""
    count = np.sum(~np.isnan(x), axis=axis)
    total = np.nansum(x, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _nansd(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """The SD (ddof 1) over ``axis`` ignoring NaN; NaN (no warning) with fewer than 2 values; exactly 0 where the
    values are all equal (a resample drawing one replicate r times: the mean's rounding would otherwise leave an SD
    of ~1e-17, a usable day with a near-zero SE and so a near-zero size; 0 is not usable, see :func:`_fit_rows`)."""
    count = np.sum(~np.isnan(x), axis=axis)
    mean = _nanmean0(x, axis=axis)
    dev = np.where(np.isnan(x), 0.0, x - np.expand_dims(mean, axis))
    same = np.nanmax(np.where(np.isnan(x), -np.inf, x), axis=axis) == np.nanmin(np.where(np.isnan(x), np.inf, x),
                                                                                axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.sqrt((dev * dev).sum(axis=axis) / np.maximum(count - 1, 1))
    return np.where(count > 1, np.where(same, 0.0, sd), np.nan)
