"""Biased entries: the tests that find them and the withholding of their analytic numbers.

:func:`is_biased_entry` is the one test behind every 'biased' mark: the design's null check, the estimate's mean
against the exact truth (:func:`estimate_is_biased`, a Welch t-test at the null check's level), an off-policy
estimate's bias check (one large direct log against the exact truth: the entry's ``bias_check``,
:mod:`simulations.designs.counterfactual.bias_check`), or an off-policy estimate whose target leaves the logger's
support (``no_support``: the design's ``support:<estimator>:<target>`` side rows, :func:`_support_violations`).
A biased entry's analytic power, days and sizes move under ``analytic_if_unbiased`` (:func:`_withhold_analytic`,
with :data:`WITHHELD_REASON` or :data:`NO_SUPPORT_REASON`).
Re-exported by :mod:`simulations.analysis`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pandas as pd

from simulations.analysis_null import NULL_BIAS_P


def is_biased_entry(entry: dict[str, Any]) -> bool:
    """A summary entry (design x metric) found biased: by its null check or, for an estimate, against the exact
    truth (:func:`estimate_is_biased`; an off-policy estimate also by its bias check on one large direct log,
    :mod:`simulations.designs.counterfactual.bias_check`), or an off-policy estimate whose target leaves the
    logger's support (``no_support``: events of logging probability 0 counted exactly on the last day; biased
    whatever the t-test says). The one test behind every 'biased' mark and withheld number."""
    return (bool((entry.get("null") or {}).get("biased")) or bool(entry.get("biased_estimate"))
            or bool((entry.get("bias_check") or {}).get("biased")) or bool(entry.get("no_support")))


def estimate_is_biased(bias: float, sd: float, replicates: int, truth_se: float = 0.0,
                       p: float = NULL_BIAS_P) -> bool:
    r"""Whether replicates' mean estimate misses the truth beyond chance: a two-sided t-test of
    ``bias = mean - truth`` at level ``p`` (by default that of 4 normal standard errors,
    6.3e-5).

    The standard error :math:`s = \sqrt{sd^2/R + se_T^2}` combines the replicates' spread
    (``sd``, ``R`` replicates) and the truth's Monte Carlo error (0 for exact truths); the
    test uses Student's t with the Welch–Satterthwaite degrees of freedom
    :math:`\nu = s^4 / ((sd^2/R)^2/(R-1))` (the truth's error counts as known), so a handful
    of replicates, whose ``sd`` is itself uncertain, does not flag an unbiased design: at
    ``R = 2`` the 4-SE rule would fire in 16% of unbiased cases, the t quantile in ``p``.
    """
    if replicates < 2 or not (sd >= 0) or not math.isfinite(bias):
        return False
    v_rep = sd * sd / replicates
    s2 = v_rep + truth_se * truth_se
    if s2 <= 0:  # no spread to judge by
        return False
    df = math.inf if v_rep == 0 else s2 * s2 / (v_rep * v_rep / (replicates - 1))
    return bool(abs(bias) / math.sqrt(s2) > _t_quantile(1 - p / 2, df))


@functools.lru_cache(maxsize=256)
def _t_quantile(q: float, df: float) -> float:
    from scipy import stats as sps

    return float(sps.t.ppf(q, df))


#: an entry's analytic sample-size keys (None when there is no effect to detect)
_SIZE_KEYS = ("analytic_required_impressions", "analytic_required_impressions_rel_se",
              "analytic_required_impressions_range", "analytic_required_impressions_unreachable_share",
              "analytic_required_impressions_unstable", "analytic_required_days", "analytic_required_users",
              "analytic_required_days_extrapolation", "analytic_required_impressions_extrapolated")


#: why a biased estimate's analytic numbers are withheld (summary.json 'analytic_withheld')
WITHHELD_REASON = ("biased: the design's null check, the estimate's mean against the exact truth or (off-policy "
                   "estimates) the bias check on one large direct log finds a bias, "
                   "so power, days and sample sizes computed as if it were unbiased would measure nothing; the "
                   "values so computed are kept under 'analytic_if_unbiased' and are not sensitivities")


#: why an off-policy estimate whose target leaves the logger's support has its numbers withheld
NO_SUPPORT_REASON = ("no support: {what} of the last day's impressions have a target list with an event of logging "
                     "probability 0 (counted exactly by the simulation): the estimator cannot see the target's value "
                     "there and is biased whatever the replicates' t-test of its bias says; power, days and sample "
                     "sizes computed as if it were unbiased are kept under 'analytic_if_unbiased' and are not "
                     "sensitivities")


def _withhold_analytic(entry: dict[str, Any], reason: str = WITHHELD_REASON) -> None:
    """A biased entry: its analytic power, days and sizes (computed as if unbiased) move under
    ``analytic_if_unbiased`` and are null in their usual places, with the reason in ``analytic_withheld``."""
    kept = {key: entry.get(key) for key in (*_SIZE_KEYS, "variance_floor_to_target", "analytic_days_to_target_power")}
    kept["analytic_power"] = entry["final_day"].get("analytic_power")
    entry["analytic_if_unbiased"] = kept
    for key in (*_SIZE_KEYS, "variance_floor_to_target", "analytic_days_to_target_power"):
        entry[key] = None
    entry["final_day"]["analytic_power"] = None
    entry["analytic_withheld"] = reason


def _support_violations(side_rows: pd.DataFrame, design: str, metric: str) -> dict[str, Any]:
    """``{target: {"violations_mean", "impressions_mean", "share"}}`` of the targets whose list has an event of
    logging probability 0 (the design's ``support:<metric>:<target>`` side rows, not A/A) on the last day in some
    replicate; empty when there is none (or the rows are not an off-policy estimator's)."""
    if not len(side_rows):
        return {}
    prefix = f"support:{metric}:"
    mine = side_rows[(side_rows["design"] == design) & (~side_rows["aa"].astype(bool))
                     & side_rows["metric"].astype(str).str.startswith(prefix)]
    if not len(mine):
        return {}
    mine = mine[mine["day"] == mine["day"].max()]
    out = {}
    for name, g in mine.groupby("metric", sort=False):
        count = float(g["estimate"].mean())
        if count > 0:
            n = float(g["n_impressions"].mean())
            out[str(name)[len(prefix):]] = {"violations_mean": count, "impressions_mean": n,
                                            "share": count / n if n else None}
    return out


def _no_support_reason(no_support: dict[str, Any]) -> str:
    """:data:`NO_SUPPORT_REASON` naming the targets and their shares of the last day's impressions."""
    what = ", ".join(f"{t}: {v['share']:.0%}" if v["share"] is not None else f"{t}: some"
                     for t, v in no_support.items())
    return NO_SUPPORT_REASON.format(what=what)
