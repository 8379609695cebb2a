r"""Paired significance tests on per-query differences :math:`d_q = v_{\text{system},q} - v_{\text{baseline},q}`.

* randomisation (sign-flip) test of :math:`H_0`: the sign of every :math:`d_q` is
  equally likely + or - (Fisher 1935; Smucker, Allan and Carterette 2007, CIKM):
  :func:`randomization_test`;
* paired bootstrap confidence interval of the mean difference, percentile and BCa
  (Efron and Tibshirani 1993, ch. 13-14): :func:`paired_bootstrap`;
* paired t-test: :func:`paired_t_test`;
* Holm's step-down correction: :func:`holm`.

The comparison of systems with a baseline on every metric built on these tests
(:func:`compare_systems`, :class:`PairedResult`, its tables) is in :mod:`onlineeval.stats.compare`, the
segment analysis (:func:`read_segments`, :func:`by_segment`, :func:`compare_segments`) in
:mod:`onlineeval.stats.segments`; both are importable from here too, as when this module held them.
"""

from __future__ import annotations

import importlib
import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special as _spc

from onlineeval.stats._checks import as_values, check_alpha, check_level
from onlineeval.stats.online import Estimate

if TYPE_CHECKING:  # pragma: no cover
    from onlineeval.stats.compare import (
        PairedResult,
        QueryDiff,
        compare_systems,
        results_to_frame,
        worst_losses_to_frame,
    )
    from onlineeval.stats.segments import (
        MISSING_SEGMENT,
        SegmentView,
        by_segment,
        compare_segments,
        iter_segments,
        read_segments,
    )

__all__ = [
    "RandomizationResult",
    "BootstrapCI",
    "QueryDiff",
    "PairedResult",
    "SegmentView",
    "paired_t_test",
    "randomization_test",
    "paired_bootstrap",
    "holm",
    "compare_systems",
    "results_to_frame",
    "worst_losses_to_frame",
    "read_segments",
    "iter_segments",
    "by_segment",
    "compare_segments",
    "MISSING_SEGMENT",
]

#: Upper bound on the number of cells (resamples x queries) held in memory at once.
_BLOCK_CELLS = 1 << 22
#: Relative tolerance (of sum |d|) under which a resampled statistic counts as equal to the
#: observed one, so that mathematically tied arrangements are not lost to rounding.
_TIE_RTOL = 1e-10
_U64_MAX = np.iinfo(np.uint64).max

#: names that moved to :mod:`onlineeval.stats.compare` and :mod:`onlineeval.stats.segments`, still importable
#: from here (loaded on first access: those modules import this one)
_MOVED = {
    "QueryDiff": "compare",
    "PairedResult": "compare",
    "compare_systems": "compare",
    "results_to_frame": "compare",
    "worst_losses_to_frame": "compare",
    "MISSING_SEGMENT": "segments",
    "SegmentView": "segments",
    "read_segments": "segments",
    "iter_segments": "segments",
    "by_segment": "segments",
    "compare_segments": "segments",
}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"onlineeval.stats.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MOVED))


# ----------------------------------------------------------------------------- records


class RandomizationResult(NamedTuple):
    """Outcome of :func:`randomization_test`.

    ``pvalue`` is two-sided; ``n_permutations`` is the number of sign vectors used
    (``2**n`` when ``exact``); ``statistic`` the observed mean difference.
    """

    pvalue: float
    statistic: float
    n_permutations: int
    exact: bool


class BootstrapCI(NamedTuple):
    """Outcome of :func:`paired_bootstrap`: mean difference and its bootstrap intervals.

    ``z0`` is the bias correction and ``acceleration`` the jackknife acceleration of the
    BCa interval; ``se`` the standard deviation of the bootstrap means.
    """

    mean: float
    se: float
    percentile_low: float
    percentile_high: float
    bca_low: float
    bca_high: float
    level: float
    n_bootstrap: int
    z0: float
    acceleration: float



# ----------------------------------------------------------------------------- primitives


def _mean_sd(d: NDArray[np.float64]) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof=1``) of ``d`` computed on ``d - d[0]``
    (variance is shift-invariant): identical differences give exactly ``sd = 0`` instead of
    the rounding noise of the naive formula (``0.4 - 0.2`` on every query gave 1e-17)."""
    shifted = d - d[0]
    return float(d[0] + shifted.mean()), float(shifted.std(ddof=1))


def paired_t_test(diffs: ArrayLike, alpha: float = 0.05) -> Estimate:
    r"""Paired t-test of :math:`H_0: E[d] = 0` on per-query differences.

    .. math:: t = \frac{\bar d}{s_d/\sqrt n},\qquad \nu = n - 1,

    with the ``1 - alpha`` interval :math:`\bar d \pm t_{\nu,1-\alpha/2}\, s_d/\sqrt n`
    (Student 1908). When :math:`s_d = 0` and :math:`\bar d \ne 0`, :math:`t = \pm\infty`
    and the p-value is 0; when every difference is 0, :math:`t = 0/0` is undefined and the
    statistic and p-value are NaN (as ``scipy.stats.ttest_rel``). Needs at least 2
    differences. ``alpha`` defaults to 0.05.
    """
    d = as_values(diffs, "diffs", min_size=2)
    alpha = check_alpha(alpha)
    n = d.size
    mean, sd = _mean_sd(d)
    se = sd / math.sqrt(n)
    df = float(n - 1)
    if se > 0:
        stat = mean / se
        p = min(1.0, float(2.0 * _spc.stdtr(df, -abs(stat))))
        q = float(-_spc.stdtrit(df, alpha / 2.0))
        lo, hi = mean - q * se, mean + q * se
    else:
        stat = math.nan if mean == 0 else math.copysign(math.inf, mean)  # 0/0: undefined
        p = math.nan if mean == 0 else 0.0
        lo = hi = mean
    return Estimate(mean, se, lo, hi, p, n, stat, df, "paired-t", alpha)


def _check_rng(rng: np.random.Generator) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed))")
    return rng


def _check_count(value: int, name: str, minimum: int) -> int:
    out = int(value)
    if out != value or out < minimum:
        shown = value.item() if isinstance(value, np.generic) else value  # not numpy 2's np.int64(...) repr
        raise ValueError(f"{name} must be an integer >= {minimum}, got {shown!r}")
    return out


def randomization_test(
    diffs: ArrayLike, rng: np.random.Generator, n_permutations: int = 10_000
) -> RandomizationResult:
    r"""Two-sided paired randomisation (sign-flip) test of the mean difference.

    Under :math:`H_0` each difference is equally likely to have either sign, so the
    reference distribution of :math:`T = \sum_q s_q d_q` is over sign vectors
    :math:`s \in \{-1, +1\}^n` (Fisher 1935; Smucker, Allan and Carterette 2007).

    * When :math:`2^n \le` ``n_permutations`` every sign vector is enumerated (in blocks of
      ``_BLOCK_CELLS / n`` vectors: memory stays bounded whatever ``n``) and the
      p-value is exact: :math:`p = \#\{s : |T(s)| \ge |T_{obs}|\} / 2^n`.
    * Otherwise ``n_permutations`` random sign vectors are drawn (uniform bits, in
      blocks, no Python loop over queries) and :math:`p = (b + 1)/(B + 1)` with
      :math:`b = \#\{|T^*| \ge |T_{obs}|\}`, which is a valid p-value
      (Phipson and Smyth 2010).

    Comparisons use a tolerance of ``1e-10 * sum|d|`` so arrangements that tie the
    observed statistic mathematically are counted despite rounding.

    Parameters
    ----------
    diffs:
        Per-query differences (at least 1).
    rng:
        Random generator (unused when the enumeration is exact).
    n_permutations:
        Number of random sign vectors, >= 1. Default 10,000.
    """
    d = as_values(diffs, "diffs", min_size=1)
    _check_rng(rng)
    n_perm = _check_count(n_permutations, "n_permutations", 1)
    n = d.size
    total = float(d.sum())
    obs = abs(total)
    threshold = obs - _TIE_RTOL * float(np.abs(d).sum())
    mean = total / n
    count = 0
    block = max(1, min(n_perm, _BLOCK_CELLS // n))
    if n < 63 and (1 << n) <= n_perm:
        # every sign vector, in blocks of codes whose little-endian bits are the signs (bounded memory: about
        # 9 x _BLOCK_CELLS bytes, where one 2^n x n matrix took 16 n 2^n: 1.4 GiB at n = 23)
        for start in range(0, 1 << n, block):
            codes = np.arange(start, min(start + block, 1 << n), dtype="<u8")
            bits = np.unpackbits(codes[:, None].view(np.uint8), axis=1, count=n, bitorder="little")
            count += int(np.count_nonzero(np.abs(2.0 * (bits.astype(np.float64) @ d) - total) >= threshold))
        return RandomizationResult(count / (1 << n), mean, 1 << n, True)
    n_words = (n + 63) // 64
    for start in range(0, n_perm, block):
        m = min(block, n_perm - start)
        # whole 64-bit words (one generator output each), so the stream does not depend
        # on the block size; unpacked little-endian into sign bits
        words = rng.integers(0, _U64_MAX, size=(m, n_words), dtype=np.uint64, endpoint=True)
        packed = words.astype("<u8", copy=False).view(np.uint8)
        bits = np.unpackbits(packed, axis=1, count=n, bitorder="little").astype(np.float64)
        count += int(np.count_nonzero(np.abs(2.0 * (bits @ d) - total) >= threshold))
    return RandomizationResult((count + 1) / (n_perm + 1), mean, n_perm, False)


def paired_bootstrap(
    diffs: ArrayLike, rng: np.random.Generator, n_bootstrap: int = 10_000, level: float = 0.95
) -> BootstrapCI:
    r"""Bootstrap confidence intervals (percentile and BCa) of the mean difference.

    Queries are resampled with replacement (index matrices drawn in blocks, no Python
    loop over queries); each replicate is the mean of the resampled differences.

    Percentile: the :math:`\alpha/2` and :math:`1-\alpha/2` quantiles of the replicates
    (linear interpolation), :math:`\alpha = 1 -` ``level``.

    BCa (Efron and Tibshirani 1993, sec. 14.3): the quantiles at

    .. math::

        \alpha_{1,2} = \Phi\!\left(\hat z_0 + \frac{\hat z_0 + z_{\alpha/2,\,1-\alpha/2}}
                       {1 - \hat a(\hat z_0 + z_{\alpha/2,\,1-\alpha/2})}\right),\qquad
        \hat z_0 = \Phi^{-1}\!\left(\frac{\#\{\theta^* < \hat\theta\}
                   + \#\{\theta^* \le \hat\theta\}}{2B}\right),

    (replicates equal to :math:`\hat\theta` count half) and the jackknife acceleration,
    which for the mean has the closed form (eq. 14.15 with
    :math:`\hat\theta_{(\cdot)} - \hat\theta_{(i)} = (d_i - \bar d)/(n-1)`)

    .. math:: \hat a = \frac{\sum_i (d_i - \bar d)^3}{6\left(\sum_i (d_i - \bar d)^2\right)^{3/2}}.

    When every difference is equal both intervals collapse to the mean. When no
    replicate lies on one side of :math:`\hat\theta` (tiny ``n``), :math:`\hat z_0` uses
    the proportion clipped to ``[1/(2B), 1 - 1/(2B)]``.

    Parameters
    ----------
    diffs:
        Per-query differences (at least 2).
    rng:
        Random generator.
    n_bootstrap:
        Number of replicates, >= 100. Default 10,000.
    level:
        Confidence level. Default 0.95.
    """
    d = as_values(diffs, "diffs", min_size=2)
    _check_rng(rng)
    n_boot = _check_count(n_bootstrap, "n_bootstrap", 100)
    level = check_level(level)
    n = d.size
    mean = float(d.mean())
    reps = np.empty(n_boot)
    block = max(1, min(n_boot, _BLOCK_CELLS // n))
    for start in range(0, n_boot, block):
        stop = min(start + block, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))
        reps[start:stop] = d[idx].mean(axis=1)
    centred = d - mean
    ss = float(centred @ centred)
    alpha = 1.0 - level
    se = float(reps.std(ddof=1))
    if ss == 0.0:
        return BootstrapCI(mean, 0.0, mean, mean, mean, mean, level, n_boot, 0.0, 0.0)
    p_lo, p_hi = np.quantile(reps, [alpha / 2.0, 1.0 - alpha / 2.0])
    below = np.count_nonzero(reps < mean) + np.count_nonzero(reps <= mean)
    frac = min(max(below / (2.0 * n_boot), 1.0 / (2 * n_boot)), 1.0 - 1.0 / (2 * n_boot))
    z0 = float(_spc.ndtri(frac))
    acc = float((centred**3).sum() / (6.0 * ss**1.5))
    z = _spc.ndtri(np.array([alpha / 2.0, 1.0 - alpha / 2.0]))
    adj = _spc.ndtr(z0 + (z0 + z) / (1.0 - acc * (z0 + z)))
    b_lo, b_hi = np.quantile(reps, adj)
    return BootstrapCI(
        mean, se, float(p_lo), float(p_hi), float(b_lo), float(b_hi), level, n_boot, z0, acc
    )


def holm(pvalues: ArrayLike) -> NDArray[np.float64]:
    r"""Holm's step-down adjusted p-values (Holm 1979, Scand. J. Statist. 6:65-70).

    With the finite p-values sorted ascending, :math:`p_{(1)} \le \dots \le p_{(m)}`,

    .. math:: \tilde p_{(j)} = \min\!\left(1, \max_{i \le j} (m - i + 1)\, p_{(i)}\right).

    NaN entries (undefined tests) stay NaN and do not count in :math:`m`. Returns a new
    array in the input order.
    """
    p = np.array(pvalues, dtype=np.float64, copy=True).ravel()
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if ok.size == 0:
        return out
    vals = p[ok]
    if ((vals < 0) | (vals > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(vals, kind="stable")
    m = vals.size
    adj = np.minimum(np.maximum.accumulate((m - np.arange(m)) * vals[order]), 1.0)
    res = np.empty(m)
    res[order] = adj
    out[ok] = res
    return out
