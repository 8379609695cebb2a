"""The null check: is an interleaving design biased when no ranker is better?

The null-variant replicates (the same traffic with the null user, whose clicks ignore relevance: every true effect
0) give each design's null Delta with its Monte Carlo SE (:func:`null_check`), the rejection rate that Delta causes
day by day (:func:`null_rejection_rate`), the null replicates' mean test (:func:`null_mean_test`) and the rules that
flag a bias (:data:`NULL_BIAS_SE`, :func:`null_bias_rules`); :func:`t_noncentrality` sizes the smallest detectable
bias. Re-exported by :mod:`simulations.analysis`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from onlineeval.stats import binomial_band
from simulations.runner import Truth


#: a null-user Delta this many Monte Carlo SEs from 0 marks a design as biased
NULL_BIAS_SE = 4.0


#: an exact null Delta (SE 0: :mod:`simulations.truth_null_exact`) within this of 0 is 0, the sums' rounding (about
#: 1e-17 on the bundled configs' unbiased designs); beyond it the value is the method's bias, however small
NULL_EXACT_ZERO = 1e-12


#: two-sided false-alarm probability of the bias flag: that of NULL_BIAS_SE normal standard errors
NULL_BIAS_P = 2 * 0.5 * math.erfc(NULL_BIAS_SE / math.sqrt(2))


#: family-wise level of the null check's tests (review 6, F2; review 9, F1): the null replicates' mean test (a bias
#: flag) and the 'bias or SE miscalibration?' note (a one-sided binomial test of the last day's null rejection count
#: against alpha), each Bonferroni over every null-checked pair of the run (all its interleaving designs' pairs)
NULL_RATE_FAMILY_LEVEL = 0.01


#: the power at which the null check quotes each rule's smallest detectable bias (review 9, F4): (4 + z_0.8) x SE
#: for the 4-SE rule, nc x SE for the null replicates' mean test with nc the noncentral t's (:func:`t_noncentrality`;
#: t_crit x SE is the bias flagged only half the time, and (t_crit + t_0.8,df) x SE 72-80% of the time at 9-99 df)
NULL_DETECTABLE_POWER = 0.8


@functools.lru_cache(maxsize=512)
def t_noncentrality(level: float, df: int, power: float = NULL_DETECTABLE_POWER) -> float:
    """The noncentrality nc at which a two-sided one-sample t-test at ``level`` with ``df`` degrees of freedom
    rejects with probability ``power``: P(|T| > t_crit) = power for T noncentral t (df, nc). A mean of nc x the
    true SE of the mean is detected with that power (review 9, F4)."""
    import warnings

    from scipy.optimize import brentq

    crit = float(sps.t.isf(level / 2.0, df))

    def excess(nc: float) -> float:
        # the lower tail as the upper tail of -nc: scipy's nct.cdf(-crit) is NaN for large nc
        return float(sps.nct.sf(crit, df, nc) + sps.nct.sf(crit, df, -nc)) - power

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's series warning at 1 df and a tiny level
        hi = crit + 1.0
        while excess(hi) < 0:
            hi *= 2.0
        return float(brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-12))


def null_rejection_rate(bias: float | np.ndarray, se: float | np.ndarray, alpha: float) -> np.ndarray:
    r"""Probability that a two-sided z-test at ``alpha`` rejects when the estimator's
    expectation is ``bias`` (the true effect being 0) and its standard error ``se``:
    :math:`\Phi(b/se - z_{1-\alpha/2}) + \Phi(-b/se - z_{1-\alpha/2})` (``alpha`` at ``b = 0``)."""
    z = float(sps.norm.ppf(1 - alpha / 2))
    ratio = np.asarray(bias, dtype=np.float64) / np.asarray(se, dtype=np.float64)
    return sps.norm.cdf(ratio - z) + sps.norm.cdf(-ratio - z)


def null_bias_rules(n: dict[str, Any]) -> list[str]:
    """Which rules set a null check's ``biased`` (review 8, F2): ``null_replicates_mean`` (the null replicates'
    last-day mean against 0, :func:`null_mean_test`), ``null_delta`` (the Monte Carlo null Delta beyond
    :data:`NULL_BIAS_SE` SEs), ``analytic_rate`` (no null replicates: the analytic rejection rate of the smallest
    Delta within 2 SE above the band); [] when unbiased."""
    if not n.get("biased"):
        return []
    rules = []
    if n.get("biased_null_replicates"):
        rules.append("null_replicates_mean")
    z = n.get("z")
    if isinstance(z, (int, float)) and z > NULL_BIAS_SE:
        rules.append("null_delta")
    return rules or ["analytic_rate"]


def null_check(
    null: Truth, c: pd.DataFrame, alpha: float, replicates: int, null_rows: pd.DataFrame | None = None,
    pairs: int = 1,
) -> dict[str, Any]:
    """An interleaving design's behaviour under the null user (clicks independent of
    relevance, every true effect 0; :func:`simulations.truth_interleaving.null_interleaving_truth`).

    ``delta`` +- ``se``: the expected Delta under the null (Monte Carlo over the truth's
    impressions). ``rejection_rate`` by day: the share of the design's null replicates
    (``null_rows``: the design run on the same traffic with the null user) rejecting at
    ``alpha`` (an undefined estimate does not reject), with the exact binomial 99% band of
    ``alpha``; ``rejection_rate_analytic``: the rate a two-sided z-test has with the null
    Delta as its mean and the design's mean SE of the day (:func:`null_rejection_rate`).
    ``biased``: the null Delta is more than :data:`NULL_BIAS_SE` Monte Carlo SEs from 0, or the null replicates'
    mean estimate of the last day misses 0 by :func:`null_mean_test` at :data:`NULL_RATE_FAMILY_LEVEL` / ``pairs``
    (the run's null-checked pairs; ``biased_null_replicates``, details in ``null_mean_test``); without null
    replicates, also when the analytic rate of the smallest bias within 2 SE of the null Delta is above the band (a
    rule on the Delta too). A simulated
    null rejection rate above alpha alone does not set ``biased`` (review 6, F2: team-draft and probabilistic
    multileaving are unbiased under the null user by symmetry): ``rate_excess`` tests it one-sided (``pvalue`` =
    P(X >= k), X ~ Binomial(replicates, alpha)) at :data:`NULL_RATE_FAMILY_LEVEL` / ``pairs`` (Bonferroni over the
    run's ``pairs`` null checks) and ``se_miscalibrated`` says whether it is below that threshold (a bias the
    mean test missed, or the SE's calibration, is in question). ``detectable_bias``: the smallest
    |null Delta| the SE flag catches (:data:`NULL_BIAS_SE` x ``se``; the mean test's is in ``null_mean_test``);
    ``pvalue``: two-sided, of ``z`` under no bias; ``bias_rules``: the rules that set ``biased``
    (:func:`null_bias_rules`). ``pairs`` is the family of the run (review 9, F1): every null-checked pair of every
    interleaving design in it, so that under no bias the run flags some design with probability at most 0.01 (kept
    as ``family_pairs``). ``detectable_bias_80``: the |null Delta| the 4-SE rule flags with
    :data:`NULL_DETECTABLE_POWER` ((4 + z_0.8) x ``se``; ``detectable_bias`` is flagged half the time).
    ``exact``: the null Delta is exact (SE 0, :mod:`simulations.truth_null_exact`): a value within
    :data:`NULL_EXACT_ZERO` of 0 is 0 (``z`` 0), any other is the method's bias (``z`` inf, flagged), and both
    detectable biases of the Delta's rule are 0 (it sees any bias)."""
    se_days = c["mean_se"].to_numpy(dtype=np.float64)
    exact = null.se == 0.0 and null.method.startswith("exact")  # no Monte Carlo error: any value is a bias
    if exact and abs(null.value) <= NULL_EXACT_ZERO:
        null = replace(null, value=0.0)
    low_bias = max(abs(null.value) - 2 * null.se, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        analytic = null_rejection_rate(null.value, se_days, alpha)
        analytic_low = null_rejection_rate(low_bias, se_days, alpha)
    z = abs(null.value) / null.se if null.se > 0 else (math.inf if null.value else 0.0)
    out: dict[str, Any] = {
        "delta": null.value,
        "se": null.se,
        "z": z,
        "method": null.method,
        "exact": exact,
        "rejection_rate_analytic": [float(x) for x in analytic],
    }
    if null_rows is not None and len(null_rows):
        by_day = null_rows.groupby("day", sort=True)
        rates = by_day["pvalue"].apply(lambda p: float(np.mean(p.to_numpy(dtype=np.float64) < alpha)))
        r_null = int(by_day.size().iloc[-1])
        last = null_rows[null_rows["day"] == null_rows["day"].max()]["estimate"].to_numpy(dtype=np.float64)
        last = last[np.isfinite(last)]
        band = binomial_band(r_null, alpha, 0.99)
        # review 6, F2: an excess rejection rate is a note (bias or SE calibration), not a bias flag; the null
        # replicates' own mean against 0 is a test of the mean. Its truth is exactly 0 (no Monte Carlo error to
        # guard against, unlike estimate_is_biased's 6.3e-5 level), so it runs at NULL_RATE_FAMILY_LEVEL / pairs:
        # at 6.3e-5 a balanced design's 10 null replicates at t = -6.8 passed as unbiased (review 8, F1); pairs is
        # the run's family (review 9, F1: at 0.01 per design, a run of three unbiased designs flagged one 3% of runs)
        level = NULL_RATE_FAMILY_LEVEL / max(int(pairs), 1)
        mean_test = null_mean_test(last, level)
        over = bool(mean_test is not None and mean_test["biased"])
        out["biased_null_replicates"] = over
        out["null_mean_test"] = mean_test
        k = int(round(float(rates.iloc[-1]) * r_null))
        p_excess = float(sps.binom.sf(k - 1, r_null, alpha))
        out["rate_excess"] = {"rejections": k, "replicates": r_null, "pvalue": p_excess, "pairs": max(int(pairs), 1),
                              "threshold": level, "family_level": NULL_RATE_FAMILY_LEVEL,
                              "test": "one-sided exact binomial P(X >= rejections | alpha), Bonferroni over the "
                                      "run's null-checked pairs"}
        out["se_miscalibrated"] = bool(p_excess < level)
        out.update({
            "rejection_rate": [float(x) for x in rates],
            "rejection_rate_method": f"simulated: share of {r_null} null replicates rejecting at alpha",
            "replicates": r_null,
            "mean_estimate_last_day": float(last.mean()) if last.size else None,
            "mean_estimate_last_day_se": float(last.std(ddof=1) / math.sqrt(last.size)) if last.size > 1 else None,
        })
    else:
        band = binomial_band(replicates, alpha, 0.99)
        over = bool(analytic_low.size and analytic_low[-1] > band.hi_rate)
        out.update({
            "rejection_rate": [float(x) for x in analytic],
            "rejection_rate_method": "analytic: two-sided z-test with the null Delta as the estimator's mean and "
            "the design's mean SE of each day (no null replicates)",
        })
    out["binomial_99_band"] = [band.lo_rate, band.hi_rate]
    out["biased"] = bool(z > NULL_BIAS_SE or over)
    out["bias_rules"] = null_bias_rules(out)
    # review 4, F3: how small a bias the NULL_BIAS_SE flag can see, and the null Delta's two-sided p-value under
    # no bias (a z below the flag is not 'no bias')
    out["detectable_bias"] = float(NULL_BIAS_SE * null.se)
    out["detectable_bias_80"] = float((NULL_BIAS_SE + sps.norm.ppf(NULL_DETECTABLE_POWER)) * null.se)
    out["family_pairs"] = max(int(pairs), 1)
    out["pvalue"] = float(math.erfc(z / math.sqrt(2.0))) if math.isfinite(z) else 0.0
    return out


def null_mean_test(last: np.ndarray, level: float) -> dict[str, Any] | None:
    """Two-sided t-test (Student's t, R - 1 degrees of freedom) of the null replicates' last-day estimates ``last``
    against the exact null truth 0 at ``level``: ``{"mean", "se", "t", "df", "pvalue", "level", "biased"}``, with
    ``critical_t`` (two-sided at ``level``) and ``detectable_bias`` = critical_t x se (review 8, F2: the |mean|
    flagged about half the time), ``detectable_bias_80`` = ``noncentrality_80`` x se (review 9, F4: flagged with
    :data:`NULL_DETECTABLE_POWER`, :func:`t_noncentrality`); ``None`` with fewer than 2 finite estimates. Identical
    estimates (SE 0) are biased when their mean is not 0."""
    x = np.asarray(last, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return None
    mean = float(x.mean())
    se = float(x.std(ddof=1) / math.sqrt(x.size))
    if se > 0:
        t = mean / se
        p = float(2.0 * sps.t.sf(abs(t), x.size - 1))
    else:
        t = math.copysign(math.inf, mean) if mean else 0.0
        p = 0.0 if mean else 1.0
    crit = float(sps.t.isf(level / 2.0, x.size - 1))
    nc = t_noncentrality(float(level), int(x.size - 1))
    return {"mean": mean, "se": se, "t": t, "df": int(x.size - 1), "pvalue": p, "level": float(level),
            "biased": bool(p < level), "critical_t": crit, "detectable_bias": crit * se,
            "noncentrality_80": nc, "detectable_bias_80": nc * se,
            "test": "two-sided t-test of the null replicates' last-day mean against the exact null truth 0, at "
                    "0.01 / the run's null-checked pairs (every interleaving design's)"}
