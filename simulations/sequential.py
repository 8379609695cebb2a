"""What daily monitoring does to each design: the peeking false-positive rate and two
always-valid alternatives, from the daily checkpoints the designs already record.

For every design's primary metric the replicates' daily (estimate, SE) series are tested
four ways (:func:`onlineeval.stats.sequential.sequential_test`):

- ``fixed``: the fixed-horizon z-test on the last day only (what the main table reports);
- ``peeking``: the same test every day, stopping at the first p < alpha;
- ``msprt``: the mixture SPRT's always-valid p-values (Johari et al. 2017), with the mixture
  scale tau planned from the mean standard error on the last day
  (:func:`onlineeval.stats.sequential.mixture_tau`);
- ``obrien_fleming``: Lan-DeMets O'Brien-Fleming spending boundaries at the information
  fractions of the planned (mean) daily standard errors, ``se_K^2 / se_k^2``.

Under A/A (B replaced by A) the share of replicates that ever reject is the false-positive
rate under daily monitoring, with its exact 99% binomial band around alpha; on the real
pair, power counts rejections whose estimate has the sign of the true effect, and the
mean day of the decision (days to decision, the last day when no decision) is compared
with the fixed horizon's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MONITORING", "monitoring_summary"]

MONITORING = ("fixed", "peeking", "msprt", "obrien_fleming")


def _series(rows: pd.DataFrame, aa: bool) -> tuple[np.ndarray, np.ndarray]:
    """(replicates, days) estimate and SE matrices (NaN where undefined)."""
    sub = rows[rows["aa"] == aa]
    est = sub.pivot_table(index="replicate", columns="day", values="estimate", aggfunc="first", dropna=False)
    se = sub.pivot_table(index="replicate", columns="day", values="se", aggfunc="first", dropna=False)
    return est.sort_index(axis=1).to_numpy(dtype=float), se.sort_index(axis=1).to_numpy(dtype=float)


def _test(est: np.ndarray, se: np.ndarray, design: str, alpha: float, tau: float,
          fractions: np.ndarray) -> Any:
    from onlineeval.stats.sequential import sequential_test

    kind = "none" if design == "fixed" else design
    return sequential_test(est, se, kind, alpha=alpha, tau=tau if design == "msprt" else None,
                           fractions=fractions if design == "obrien_fleming" else None)


def monitoring_summary(rows: pd.DataFrame, designs: dict[str, Any], alpha: float) -> dict[str, Any]:
    """Per design (primary metric): A/A false-positive rate, power and mean day of decision
    under each monitoring rule of :data:`MONITORING`."""
    from onlineeval.stats import binomial_band
    from onlineeval.stats.sequential import mixture_tau

    out: dict[str, Any] = {}
    for design, metrics in designs.items():
        metric = next((m for m, e in metrics.items() if e["primary"]), None)
        if metric is None:
            continue
        mine = rows[(rows["design"] == design) & (rows["metric"] == metric)]
        est, se = _series(mine, aa=False)
        if est.size == 0 or est.shape[1] < 2:
            continue
        days = est.shape[1]
        mean_se = np.nanmean(np.where(se > 0, se, np.nan), axis=0)
        if not np.all(np.isfinite(mean_se)):
            continue
        tau = float(mixture_tau(mean_se[-1], alpha))
        fractions = np.clip(mean_se[-1] ** 2 / mean_se ** 2, 1e-9, 1.0)
        fractions = np.maximum.accumulate(fractions)
        fractions[-1] = 1.0
        truth = metrics[metric]["true_effect"]
        aa_est, aa_se = _series(mine, aa=True)
        entry: dict[str, Any] = {"metric": metric, "tau": tau, "fractions": fractions.tolist(), "rules": {}}
        for rule in MONITORING:
            res = _test(est, se, rule, alpha, tau, fractions)
            stop = np.where(res.reject, res.stop_look, days - 1)
            first = np.take_along_axis(est, np.clip(res.stop_look, 0, days - 1)[:, None], axis=1)[:, 0]
            right_sign = res.reject & (np.sign(first) == np.sign(truth)) if truth != 0 else res.reject
            rec: dict[str, Any] = {
                "power": float(np.mean(right_sign)),
                "mean_decision_day": float(np.mean(stop + 1)),
            }
            if aa_est.size:
                aa_res = _test(aa_est, aa_se, rule, alpha, tau, fractions)
                r = aa_res.reject.size
                band = binomial_band(r, alpha, 0.99)
                fpr = float(np.mean(aa_res.reject))
                degenerate = bool(np.all(np.nan_to_num(aa_est) == 0) and np.all(np.nan_to_num(aa_se) == 0))
                rec["aa_false_positive_rate"] = fpr
                rec["aa_binomial_99_band"] = [band.lo_rate, band.hi_rate]
                rec["aa_within_band_or_below"] = None if degenerate else bool(round(fpr * r) <= band.hi)
                rec["aa_degenerate"] = degenerate
                rec["aa_by_day"] = [float(x) for x in aa_res.rejected_by_look.mean(axis=0)]
            entry["rules"][rule] = rec
        fixed_day = entry["rules"]["fixed"]["mean_decision_day"]
        for rule in ("msprt", "obrien_fleming"):
            entry["rules"][rule]["days_saved_vs_fixed"] = fixed_day - entry["rules"][rule]["mean_decision_day"]
        entry["replicates"] = int(est.shape[0])
        entry["days"] = days
        if not math.isfinite(tau):
            continue
        out[design] = entry
    return out
