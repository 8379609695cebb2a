"""The day-by-day curves over the replicates and what the summary reads off them.

:func:`curves` summarises each design, A/A variant, metric and daily checkpoint over the replicates: simulated power
(rejections with the true effect's sign) and rejection rate, analytic power, the mean estimate, its spread and RMSE,
the mean SE, CI coverage, users and impressions (estimates whose SE holds a data-driven choice fixed: analytic power
from the replicates' SD, power measured on the bootstrap's day only). :func:`_first_day` is the first day from which a
power stays at the target, :func:`_coverage_band` the exact binomial band of a day's coverage. Re-exported by
:mod:`simulations.analysis`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from onlineeval.stats import binomial_band

from simulations.analysis_sizes import t_power
from simulations.runner import Truth


def curves(rows: pd.DataFrame, truth: dict[tuple[str, str], Truth], alpha: float,
           held: dict[tuple[str, str], int | None] | None = None,
           sd_power: set[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Per (design, aa, metric, day) summary over replicates.

    ``held``: ``{(design, metric): the day whose p-values are valid, or None}`` for the estimates whose SE holds a
    data-driven choice fixed (:func:`simulations.designs.counterfactual.held_fixed`): their analytic power uses
    the replicates' SD of the estimates instead of the mean SE, and their power and rejection rate are NaN (not
    measured) on every other day (their p-values there come from the too-small SE). ``sd_power``: estimates whose
    reported SE runs small (:func:`simulations.analysis_held.small_se`): their analytic power uses the SD too, their
    power is measured as usual."""
    z = float(sps.norm.ppf(1 - alpha / 2))
    held = held or {}
    out = []
    # sort=False keeps the run's order: designs as configured, each design's primary metric first
    for (design, aa, metric, day), g in rows.groupby(["design", "aa", "metric", "day"], sort=False):
        t = 0.0 if aa else truth[(design, metric)].value
        reject = g["pvalue"].to_numpy() < alpha
        defined = g["pvalue"].notna().to_numpy()
        # replicates with an estimate (a subset of them may lack an SE, hence an interval and a p-value): the mean,
        # SD and RMSE of the estimates are over these, and so is the mean's SE
        estimated = np.isfinite(g["estimate"].to_numpy(dtype=np.float64))
        sign_ok = np.sign(g["estimate"].to_numpy()) == np.sign(t) if t != 0 else np.ones(len(g), bool)
        se_mean = float(g["se"].mean())  # over replicates where the estimate is defined
        r = len(g)
        sd = float(g["estimate"].std(ddof=1)) if r > 1 else float("nan")
        is_held = not aa and (design, metric) in held
        by_sd = is_held or (not aa and (design, metric) in (sd_power or ()))
        se_power = sd if by_sd else se_mean  # the SE the analytic power assumes
        # the test the rows took: Student's t of their median degrees of freedom where they are t's, else z (from
        # the replicates' SD: z, the normal power of a test whose SE were right, as the sizes take it)
        df = math.inf if by_sd else _median_df(g)
        if t == 0:
            analytic = float(alpha)  # A/A: the rejection rate either way
        elif se_power > 0:
            # rejections with the effect's sign, as the simulated power counts them: the normal power at z, the
            # noncentral t's at t rows (the sizes' power: simulations.analysis_sizes.t_power)
            analytic = (float(sps.norm.cdf(abs(t) / se_power - z)) if not math.isfinite(df)
                        else float(t_power(abs(t) / se_power, df, alpha)))
        else:
            analytic = float("nan")
        power = float(np.mean(reject & sign_ok))
        rejection = float(reject.mean())
        if is_held and held[(design, metric)] != int(day):
            power = rejection = float("nan")
        out.append(
            {
                "design": design,
                "aa": bool(aa),
                "metric": metric,
                "primary": bool(g["primary"].iloc[0]),
                "day": int(day),
                "replicates": r,
                # the median df of the day's t rows (inf: z rows, or the analytic power from the replicates' SD)
                "df": df,
                "true_effect": t,
                "power": power,
                "power_se": math.sqrt(max(power * (1 - power), 1e-12) / r) if power == power else float("nan"),
                "rejection_rate": rejection,
                # replicates without a p-value at this checkpoint (no estimate: too few users or comparisons yet;
                # or an estimate without an SE); they count as not rejecting. estimates: those with an estimate
                "undefined": float(g["pvalue"].isna().mean()),
                "estimates": int(estimated.sum()),
                "analytic_power": analytic,
                "mean_estimate": float(g["estimate"].mean()),
                "sd_estimate": sd,
                # root mean squared error about the true effect (replicates with a defined estimate, as the mean
                # and SD: it was NaN where no replicate had a p-value, beside a mean of the estimates)
                "rmse": float(np.sqrt(np.nanmean((g["estimate"].to_numpy() - t) ** 2))) if estimated.any()
                else float("nan"),
                "mean_se": se_mean,
                "coverage": float(np.mean(((g["ci_low"] <= t) & (t <= g["ci_high"]))[defined])) if defined.any()
                else float("nan"),
                "mean_users": float(g["n_users"].mean()),
                "mean_impressions": float(g["n_impressions"].mean()),
            }
        )
    return pd.DataFrame(out)


def _median_df(g: pd.DataFrame) -> float:
    """The degrees of freedom of a day's rows ``g``: the median of their finite ``df`` (the counterfactual design's
    differences, ``test: welch`` and ``delta_t``) over the rows with an SE, ``inf`` where every row is a z row
    (``df`` inf) or none has an SE."""
    if "df" not in g:
        return math.inf
    df = g["df"].to_numpy(dtype=np.float64)
    df = df[np.isfinite(df) & np.isfinite(g["se"].to_numpy(dtype=np.float64))]
    return float(np.median(df)) if df.size else math.inf


def _coverage_band(last: pd.Series, alpha: float, truth_se: float = 0.0) -> Any:
    """The exact 99% binomial band of the number of a day's ``(1 - alpha)`` intervals holding the truth, over its
    replicates with a defined interval (``replicates * (1 - undefined)``), or ``None`` when none is defined. A
    coverage below it means the intervals under-cover here (too narrow, or the estimate is biased); above it, that
    they are conservative (wider than their level needs). The band is per row: of 20 rows with exact intervals, at
    most 0.2 are flagged by chance on average.

    A Monte Carlo truth (``truth_se > 0``: interleaving's) is off by its own error ``delta``, and a valid interval of
    SD ``sigma`` (the replicates' SD of the estimates) then holds it with probability
    ``Phi(z - delta / sigma) - Phi(-z - delta / sigma)``, below ``1 - alpha`` (review 18: seed 11 of
    configs/counterfactual.yaml flagged team-draft's coverage 0.870 below a 0.92 band, its bias 2.1 SE, the truth's
    SE 37% of the SD). The band's lower end is then that of the coverage at ``|delta| = z_0.995 truth_se`` (the
    truth's own 99% range): a valid interval is flagged low with probability at most about 1.5%, not 0.5%. Its
    upper end stays that of ``1 - alpha`` (the most a valid interval covers)."""
    defined = int(round(float(last["replicates"]) * (1.0 - float(last["undefined"]))))
    if defined < 1 or not math.isfinite(float(last["coverage"])):
        return None
    band = binomial_band(defined, 1.0 - alpha, 0.99)
    sd = float(last["sd_estimate"]) if "sd_estimate" in last else math.nan
    if not (truth_se > 0 and math.isfinite(truth_se)):
        return band
    if not (sd > 0 and math.isfinite(sd)):  # no spread to compare the truth's error with: nothing is flagged low
        return band._replace(lo=0)
    z = float(sps.norm.ppf(1 - alpha / 2))
    shift = float(sps.norm.ppf(0.995)) * truth_se / sd
    low = float(sps.norm.cdf(z - shift) - sps.norm.cdf(-z - shift))
    return band._replace(lo=binomial_band(defined, low, 0.99).lo)


def _first_day(c: pd.DataFrame, column: str, target: float) -> int | None:
    """The first day from which ``column`` stays at or above ``target`` through the last day (``None``: not at
    the last day). Simulated power is not monotone in the days (Monte Carlo error: with 10 replicates it reached
    0.8 on day 6 and ended at 0.70), and a first crossing then named a day from which the experiment is not powered;
    analytic power grows with the days, so for it this is the first crossing."""
    ok = (c[column] >= target).to_numpy()  # NaN (undefined): not reached
    if not ok.size or not ok[-1]:
        return None
    failed = np.flatnonzero(~ok)
    return int(c["day"].iloc[failed[-1] + 1 if failed.size else 0])
