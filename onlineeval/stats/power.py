r"""Analytic power and sample size (normal approximation), and binomial bands.

Every function broadcasts over array arguments (numpy rules) and returns a float64
``numpy.ndarray`` (0-d when all inputs are scalars; ``float(...)`` gives a Python float).

A test of a difference :math:`\Delta` with standard error :math:`\sigma_\Delta` has, under
the normal approximation with :math:`z_q = \Phi^{-1}(q)` (e.g. Chow, Shao and Wang 2008,
*Sample Size Calculations in Clinical Research*, sec. 3.2),

.. math::

    \text{two-sided:}\quad 1-\beta = \Phi\!\left(\frac{\Delta}{\sigma_\Delta} - z_{1-\alpha/2}\right)
        + \Phi\!\left(-\frac{\Delta}{\sigma_\Delta} - z_{1-\alpha/2}\right),
    \qquad
    \text{larger:}\quad 1-\beta = \Phi\!\left(\frac{\Delta}{\sigma_\Delta} - z_{1-\alpha}\right),

and ``smaller`` mirrors ``larger``. Sample sizes solve these equations exactly (both
tails for two-sided, by bisection to machine precision) and are returned unrounded:
apply ``np.ceil`` for a count of units.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special as _spc
from scipy import stats as _sps

from onlineeval.stats._checks import check_alpha, check_alternative, check_level

__all__ = [
    "power_two_sample",
    "required_n_two_sample",
    "mde_two_sample",
    "power_one_sample",
    "required_n_one_sample",
    "power_one_sample_t",
    "required_n_one_sample_t",
    "BinomialBand",
    "binomial_band",
]

_BISECT_STEPS = 80


def _positive(x: ArrayLike, name: str, *, allow_zero: bool = False) -> NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64)
    bad = ~np.isfinite(arr) | ((arr < 0) if allow_zero else (arr <= 0))
    if bad.any():
        what = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be finite and {what}; got {float(arr[bad].ravel()[0])}")
    return arr


def _finite(x: ArrayLike, name: str) -> NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite")
    return arr


def _power_from_u(u: NDArray[np.float64], alpha: float, alternative: str) -> NDArray[np.float64]:
    """Power as a function of the standardised effect ``u = Delta / se``."""
    if alternative == "two-sided":
        z = -_spc.ndtri(alpha / 2.0)
        return _spc.ndtr(u - z) + _spc.ndtr(-u - z)
    z = -_spc.ndtri(alpha)
    return _spc.ndtr(u - z) if alternative == "larger" else _spc.ndtr(-u - z)


def _required_u(power: float, alpha: float, alternative: str) -> float:
    """Standardised effect ``|Delta| / se`` at which the test reaches ``power``.

    Returns 0 when ``power <= alpha`` (two-sided) or ``power <= alpha`` (one-sided), where
    any sample size suffices.
    """
    if alternative != "two-sided":
        return float(max(0.0, -_spc.ndtri(alpha) + _spc.ndtri(power)))
    if power <= alpha:
        return 0.0
    lo, hi = 0.0, float(-_spc.ndtri(alpha / 2.0) + _spc.ndtri(power))
    for _ in range(_BISECT_STEPS):  # monotone in u >= 0; 80 halvings reach machine precision
        mid = 0.5 * (lo + hi)
        if _power_from_u(np.asarray(mid), alpha, alternative) < power:
            lo = mid
        else:
            hi = mid
    return hi


def _effective(effect: NDArray[np.float64], alternative: str) -> NDArray[np.float64]:
    """The effect in the direction the test looks for (negative: never detected)."""
    if alternative == "two-sided":
        return np.abs(effect)
    return effect if alternative == "larger" else -effect


def power_two_sample(
    effect: ArrayLike,
    sd_a: ArrayLike,
    sd_b: ArrayLike,
    n_a: ArrayLike,
    n_b: ArrayLike,
    alpha: float = 0.05,
    alternative: str = "two-sided",
) -> NDArray[np.float64]:
    r"""Power of a two-sample z-test of a difference in means (normal approximation).

    Parameters
    ----------
    effect:
        True difference :math:`\Delta = \mu_B - \mu_A`.
    sd_a, sd_b:
        Per-unit standard deviations in A and B (> 0).
    n_a, n_b:
        Units (users) per arm (> 0, need not be integers).
    alpha:
        Significance level. Default 0.05.
    alternative:
        ``"two-sided"`` (default), ``"larger"`` (:math:`H_1: \Delta > 0`) or ``"smaller"``.

    Notes
    -----
    :math:`\sigma_\Delta = \sqrt{\sigma_A^2/n_A + \sigma_B^2/n_B}`; see the module notes.
    """
    alpha = check_alpha(alpha)
    alternative = check_alternative(alternative)
    eff = _finite(effect, "effect")
    se = np.sqrt(
        _positive(sd_a, "sd_a") ** 2 / _positive(n_a, "n_a") + _positive(sd_b, "sd_b") ** 2 / _positive(n_b, "n_b")
    )
    return np.asarray(_power_from_u(eff / se, alpha, alternative), dtype=np.float64)


def required_n_two_sample(
    effect: ArrayLike,
    sd: ArrayLike,
    alpha: float = 0.05,
    power: float = 0.8,
    share_b: float = 0.5,
    alternative: str = "two-sided",
) -> NDArray[np.float64]:
    r"""Total number of units (both arms) for a two-sample test to reach ``power``.

    Parameters
    ----------
    effect:
        True difference :math:`\Delta`; ``0`` (or the wrong sign for a one-sided test)
        gives ``inf``.
    sd:
        Per-unit standard deviation, common to both arms (> 0).
    alpha:
        Significance level. Default 0.05.
    power:
        Target power in (0, 1). Default 0.8.
    share_b:
        Share of units in arm B, in (0, 1). Default 0.5.
    alternative:
        ``"two-sided"`` (default), ``"larger"`` or ``"smaller"``.

    Returns
    -------
    numpy.ndarray
        Unrounded total :math:`N` (``n_B = share_b N``); solves

        .. math:: \frac{|\Delta|\sqrt{N s(1-s)}}{\sigma} = u^*(\alpha, 1-\beta),

        where :math:`u^*` is the standardised effect with the target power (for one-sided
        tests :math:`u^* = z_{1-\alpha} + z_{1-\beta}`).
    """
    alpha = check_alpha(alpha)
    power = check_level(power, "power")
    share = check_level(share_b, "share_b")
    alternative = check_alternative(alternative)
    eff = _effective(_finite(effect, "effect"), alternative)
    sdv = _positive(sd, "sd")
    u = _required_u(power, alpha, alternative)
    with np.errstate(divide="ignore"):
        n = np.where(eff > 0, (u * sdv / np.where(eff > 0, eff, 1.0)) ** 2 / (share * (1.0 - share)), np.inf)
    return np.asarray(n, dtype=np.float64)


def mde_two_sample(
    sd: ArrayLike,
    n_total: ArrayLike,
    alpha: float = 0.05,
    power: float = 0.8,
    share_b: float = 0.5,
    alternative: str = "two-sided",
) -> NDArray[np.float64]:
    r"""Minimum detectable effect: the :math:`|\Delta|` with ``power`` at ``n_total`` units.

    The inverse of :func:`required_n_two_sample`:
    :math:`\Delta = u^*\,\sigma / \sqrt{N s (1-s)}`. Parameters as there; defaults
    ``alpha=0.05``, ``power=0.8``, ``share_b=0.5``, ``alternative="two-sided"``.
    """
    alpha = check_alpha(alpha)
    power = check_level(power, "power")
    share = check_level(share_b, "share_b")
    alternative = check_alternative(alternative)
    u = _required_u(power, alpha, alternative)
    sdv = _positive(sd, "sd")
    n = _positive(n_total, "n_total")
    return np.asarray(u * sdv / np.sqrt(n * share * (1.0 - share)), dtype=np.float64)


def power_one_sample(
    effect: ArrayLike,
    sd: ArrayLike,
    n: ArrayLike,
    alpha: float = 0.05,
    alternative: str = "two-sided",
) -> NDArray[np.float64]:
    r"""Power of a one-sample z-test of :math:`H_0: \mu = 0` (normal approximation).

    Parameters
    ----------
    effect:
        True mean :math:`\mu` (e.g. an interleaving preference :math:`\Delta_{AB}`).
    sd:
        Per-unit standard deviation (> 0).
    n:
        Number of units (> 0).
    alpha:
        Significance level. Default 0.05.
    alternative:
        ``"two-sided"`` (default), ``"larger"`` or ``"smaller"``.

    Notes
    -----
    :math:`\sigma_\Delta = \sigma/\sqrt{n}`; see the module notes.
    """
    alpha = check_alpha(alpha)
    alternative = check_alternative(alternative)
    eff = _finite(effect, "effect")
    se = _positive(sd, "sd") / np.sqrt(_positive(n, "n"))
    return np.asarray(_power_from_u(eff / se, alpha, alternative), dtype=np.float64)


def required_n_one_sample(
    effect: ArrayLike,
    sd: ArrayLike,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
) -> NDArray[np.float64]:
    r"""Units needed for a one-sample z-test to reach ``power``: :math:`n = (u^*\sigma/\mu)^2`.

    Parameters as in :func:`power_one_sample`; ``power`` default 0.8. An effect of 0
    (or of the wrong sign for a one-sided test) gives ``inf``. Unrounded.
    """
    alpha = check_alpha(alpha)
    power = check_level(power, "power")
    alternative = check_alternative(alternative)
    eff = _effective(_finite(effect, "effect"), alternative)
    sdv = _positive(sd, "sd")
    u = _required_u(power, alpha, alternative)
    n = np.where(eff > 0, (u * sdv / np.where(eff > 0, eff, 1.0)) ** 2, np.inf)
    return np.asarray(n, dtype=np.float64)


def power_one_sample_t(
    effect: float,
    sd: float,
    n: int,
    alpha: float = 0.05,
    alternative: str = "two-sided",
) -> float:
    r"""Power of a one-sample Student t-test of :math:`H_0: \mu = 0` on ``n`` normal units (exact).

    With :math:`\nu = n - 1` degrees of freedom and noncentrality :math:`\lambda = \mu\sqrt n/\sigma`, the
    statistic is noncentral t: two-sided power :math:`P(T > t_{1-\alpha/2,\nu}) + P(T < -t_{1-\alpha/2,\nu})`,
    ``larger`` :math:`P(T > t_{1-\alpha,\nu})`, ``smaller`` :math:`P(T < -t_{1-\alpha,\nu})` (statsmodels'
    ``TTestPower``). Below about 100 units it is visibly lower than :func:`power_one_sample`'s z-test, whose
    normal approximation ignores that the SD is estimated. ``n`` at least 2.
    """
    alpha = check_alpha(alpha)
    alternative = check_alternative(alternative)
    mu = float(_finite(effect, "effect"))
    sigma = float(_positive(sd, "sd"))
    if isinstance(n, bool) or int(n) != n or n < 2:
        raise ValueError(f"n must be an integer of at least 2, got {n!r}")
    df = float(int(n) - 1)
    nc = mu * math.sqrt(float(n)) / sigma
    # both tails as upper tails (P(T < -c | nc) = P(T > c | -nc)): scipy's nct.cdf gives NaN far in the lower tail
    # (df 1, nc 70.7 at -12.7), its sf does not
    if alternative == "two-sided":
        crit = _sps.t.ppf(1.0 - alpha / 2.0, df)
        return float(_sps.nct.sf(crit, df, nc) + _sps.nct.sf(crit, df, -nc))
    crit = _sps.t.ppf(1.0 - alpha, df)
    return float(_sps.nct.sf(crit, df, nc if alternative == "larger" else -nc))


def required_n_one_sample_t(
    effect: float,
    sd: float,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
) -> float:
    r"""The fewest units (an integer, at least 2) with which a one-sample t-test reaches ``power``
    (:func:`power_one_sample_t`, by bisection on ``n``: power rises with ``n`` for an effect in the tested
    direction); ``inf`` for an effect of 0 or of the wrong sign for a one-sided test. The z-test's size
    (:func:`required_n_one_sample`) starts the search."""
    alpha = check_alpha(alpha)
    power = check_level(power, "power")
    alternative = check_alternative(alternative)
    z_n = float(required_n_one_sample(effect, sd, alpha, power, alternative))
    if not np.isfinite(z_n):
        return float("inf")
    lo, hi = 1, max(2, int(np.ceil(z_n)))  # lo = 1: below the smallest t-test
    while power_one_sample_t(effect, sd, hi, alpha, alternative) < power:
        lo, hi = hi, 2 * hi
    while hi - lo > 1:  # power_t(lo) < power <= power_t(hi), lo = 1 meaning "below 2 units"
        mid = (lo + hi) // 2
        if mid >= 2 and power_one_sample_t(effect, sd, mid, alpha, alternative) >= power:
            hi = mid
        else:
            lo = mid
    return float(hi)


class BinomialBand(NamedTuple):
    """Equal-tailed exact band of a Binomial(n, p) count.

    ``P(X < lo) <= (1 - level)/2`` and ``P(X > hi) <= (1 - level)/2``, with ``lo`` as large
    and ``hi`` as small as these allow, so ``P(lo <= X <= hi) >= level``.
    """

    lo: int
    hi: int
    n: int
    p: float
    level: float

    @property
    def lo_rate(self) -> float:
        """``lo / n``."""
        return self.lo / self.n

    @property
    def hi_rate(self) -> float:
        """``hi / n``."""
        return self.hi / self.n

    def contains(self, count: int) -> bool:
        """Whether an observed count (e.g. of A/A rejections) lies in the band."""
        return self.lo <= int(count) <= self.hi


def binomial_band(n: int, p: float, level: float = 0.99) -> BinomialBand:
    """Exact equal-tailed band for the number of successes in ``n`` Bernoulli(``p``) trials.

    Use it to check a false-positive rate: over ``n`` A/A replicates at level ``alpha``,
    the count of rejections should fall in ``binomial_band(n, alpha)`` (99% by default).

    Parameters
    ----------
    n:
        Number of trials (>= 1).
    p:
        Success probability in [0, 1].
    level:
        Coverage of the band, in (0, 1). Default 0.99.
    """
    n_i = int(n)
    if n_i < 1 or n_i != n:
        raise ValueError(f"n must be a positive integer, got {n}")
    pf = float(p)
    if not 0.0 <= pf <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    lev = check_level(level)
    lo, hi = _sps.binom.interval(lev, n_i, pf)
    return BinomialBand(int(lo), int(hi), n_i, pf, lev)
