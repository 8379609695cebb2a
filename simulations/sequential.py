"""What daily monitoring does to each design: the peeking false-positive rate and two
always-valid alternatives, from the daily checkpoints the designs already record.

For every design's primary metric the replicates' daily (estimate, SE) series are tested
four ways (:func:`onlineeval.stats.sequential.sequential_test`):

- ``fixed``: the fixed-horizon z-test on the last day only (what the main table reports; Student's t of the rows'
  degrees of freedom where their intervals are t intervals: the counterfactual design's, ``test: welch`` and
  ``delta_t``; the mSPRT and the spending boundaries then take each look's t as the normal deviate of the same
  tail probability, :func:`onlineeval.stats.z_equivalent`, Jennison and Turnbull's significance level approach);
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

Each design's own sequential test (``designs[i].analysis``: ``sequential``, ``tau``, ``looks``,
``monitoring``) is evaluated the same way by :func:`sequential_summary`: its decision, A/A
rate against the band, power, mean day of the decision, the days it saves against the fixed
horizon at the simulated length, and, planned for the target power, the expected days to a
decision against the fixed horizon's required days. With ``monitoring: batch`` its looks
are taken after every batch of impressions (:class:`BatchLooks`, rows ``batch:<metric>``
whose ``day`` column holds the look number: look ``k`` ends at hour ``k * batch_hours``).

The per-batch looks are recorded by :mod:`simulations.sequential_looks`, the terminal text is
:mod:`simulations.sequential_text`; their public names are importable from here too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from simulations.analysis_sizes import FLOOR_MIN_POINTS
from simulations.sequential_looks import BATCH_PREFIX, BatchLooks, batch_looks
from simulations.sequential_text import null_rate_note, null_rate_text, sequential_lines

__all__ = ["BATCH_PREFIX", "MONITORING", "BatchLooks", "batch_looks", "monitoring_summary", "null_rate_note",
           "null_rate_text", "sequential_lines", "sequential_summary"]

MONITORING = ("fixed", "peeking", "msprt", "obrien_fleming")


def _mean_positive(se: np.ndarray) -> np.ndarray:
    """Mean over replicates of the positive finite SEs at each look (NaN where there is none)."""
    ok = np.isfinite(se) & (se > 0)
    n = ok.sum(axis=0)
    total = np.where(ok, se, 0.0).sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def _series(rows: pd.DataFrame, aa: bool) -> tuple[np.ndarray, np.ndarray]:
    """(replicates, days) estimate and SE matrices (NaN where undefined)."""
    sub = rows[rows["aa"] == aa]
    est = sub.pivot_table(index="replicate", columns="day", values="estimate", aggfunc="first", dropna=False)
    se = sub.pivot_table(index="replicate", columns="day", values="se", aggfunc="first", dropna=False)
    return est.sort_index(axis=1).to_numpy(dtype=float), se.sort_index(axis=1).to_numpy(dtype=float)


def _df_series(rows: pd.DataFrame, aa: bool) -> np.ndarray | None:
    """(replicates, days) degrees of freedom of the rows' intervals (the counterfactual design's Student t), as
    :func:`_series` lays them out; ``None`` where every row's are z's (``inf``; rows without the column): every
    rule then tests with z."""
    if "df" not in rows.columns:
        return None
    sub = rows[rows["aa"] == aa]
    df = sub.pivot_table(index="replicate", columns="day", values="df", aggfunc="first", dropna=False)
    out = df.sort_index(axis=1).to_numpy(dtype=float)
    return out if np.isfinite(out).any() else None


def _cols(x: np.ndarray | None, idx: np.ndarray) -> np.ndarray | None:
    """``x[:, idx]`` (``None`` stays ``None``)."""
    return None if x is None else x[:, idx]


def _test(est: np.ndarray, se: np.ndarray, design: str, alpha: float, tau: float,
          fractions: np.ndarray, df: np.ndarray | None = None) -> Any:
    """One monitoring rule on (replicates, looks) series; ``df`` (:func:`_df_series`): the looks' Student t (the rows'
    own intervals' and p-values'), for the mSPRT and the spending boundaries as normal deviates of the same tail
    probability."""
    from onlineeval.stats.sequential import sequential_test

    kind = "none" if design == "fixed" else design
    return sequential_test(est, se, kind, alpha=alpha, tau=tau if design == "msprt" else None,
                           fractions=fractions if design == "obrien_fleming" else None,
                           df=df)


def _monitoring_plan(se: np.ndarray, alpha: float) -> tuple[float, np.ndarray] | None:
    """The daily monitoring rules' plan from the real pair's (replicates, days) SEs: the mixture scale tau
    (:func:`onlineeval.stats.sequential.mixture_tau` of the mean SE on the last day) and the information fractions
    of the daily mean SEs (:func:`_planned_fractions`); ``None`` when a day has no positive finite SE."""
    from onlineeval.stats.sequential import mixture_tau

    mean_se = _mean_positive(se)
    if not np.all(np.isfinite(mean_se)):
        return None
    return float(mixture_tau(mean_se[-1], alpha)), _planned_fractions(mean_se)


def monitoring_summary(rows: pd.DataFrame, designs: dict[str, Any], alpha: float) -> dict[str, Any]:
    """Per design (primary metric): A/A false-positive rate, power and mean day of decision
    under each monitoring rule of :data:`MONITORING`."""
    from onlineeval.stats import binomial_band

    out: dict[str, Any] = {}
    for design, metrics in designs.items():
        metric = next((m for m, e in metrics.items() if e["primary"]), None)
        if metric is None:
            continue
        mine = rows[(rows["design"] == design) & (rows["metric"] == metric)]
        est, se = _series(mine, aa=False)
        if est.size == 0 or est.shape[1] < 2:
            continue
        df, aa_df = _df_series(mine, aa=False), _df_series(mine, aa=True)
        days = est.shape[1]
        plan = _monitoring_plan(se, alpha)
        if plan is None:
            continue
        tau, fractions = plan
        truth = metrics[metric]["true_effect"]
        aa_est, aa_se = _series(mine, aa=True)
        entry: dict[str, Any] = {"metric": metric, "tau": tau, "fractions": fractions.tolist(), "rules": {}}
        for rule in MONITORING:
            res = _test(est, se, rule, alpha, tau, fractions, df)
            stop = np.where(res.reject, res.stop_look, days - 1)
            first = np.take_along_axis(est, np.clip(res.stop_look, 0, days - 1)[:, None], axis=1)[:, 0]
            right_sign = res.reject & (np.sign(first) == np.sign(truth)) if truth != 0 else res.reject
            rec: dict[str, Any] = {
                "power": float(np.mean(right_sign)),
                "mean_decision_day": float(np.mean(stop + 1)),
            }
            if aa_est.size:
                aa_res = _test(aa_est, aa_se, rule, alpha, tau, fractions, aa_df)
                r = aa_res.reject.size
                band = binomial_band(r, alpha, 0.99)
                fpr = float(np.mean(aa_res.reject))
                degenerate = _degenerate(aa_est, aa_se)
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


# ----------------------------------------------------------------------------- each design's own test


#: where the planned SE does not fall from one look to the next (a flat or rising mean SE, e.g. an IPS-family
#: SE underestimated early), the earlier look is planned at this share less information than the later one
FLAT_SE_STEP = 0.01


def _planned_fractions(mean_se: np.ndarray) -> np.ndarray:
    """Information fractions ``se_K^2 / se_k^2`` of the planned (mean) SEs, made strictly
    increasing (a later look never has less information: where the mean SE does not fall, the
    earlier look gets :data:`FLAT_SE_STEP` less information than the later one) and ending at 1."""
    t = np.clip(mean_se[-1] ** 2 / mean_se**2, 1e-9, 1.0)
    t = np.maximum.accumulate(t)
    t[-1] = 1.0
    for k in range(t.size - 2, -1, -1):
        t[k] = min(t[k], t[k + 1] * (1.0 - FLAT_SE_STEP))
    return t


def _schedule(looks: int | list[int] | None, n_looks: int, per_day: int) -> np.ndarray:
    """0-based indices of the scheduled looks among ``n_looks`` monitoring looks."""
    if looks is None:
        return np.arange(n_looks)
    if isinstance(looks, int):
        k = min(looks, n_looks)
        return np.unique(np.round(np.arange(1, k + 1) * n_looks / k).astype(int) - 1)
    idx = np.asarray(looks, dtype=int) * per_day - 1
    return idx[idx < n_looks]


#: scheduled looks from which ``onlineeval simulate`` says that a design's sequential analysis takes long
#: (:func:`many_looks`): its planned days integrate the crossing probabilities look by look, for several drifts
#: (2-core machine, 2026-12-04: 720 hourly looks about 40 s, 1,440 and 4,320 looks 1.5-2 min, msprt or
#: obrien_fleming)
MANY_LOOKS = 500


def many_looks(config: Any) -> list[tuple[str, int]]:
    """``(design, looks)`` of the config's designs with a sequential rule scheduled at :data:`MANY_LOOKS` looks or
    more (the analysis's slow part, announced before it runs)."""
    out = []
    for dc in config.designs:
        an = dc.analysis
        if an.sequential == "none":
            continue
        per_day = 24 // config.traffic.batch_hours if an.monitoring == "batch" else 1
        n_looks = config.traffic.days * per_day
        looks = int(_schedule(an.looks, n_looks, per_day).size)
        if looks >= MANY_LOOKS:
            out.append((dc.name, looks))
    return out


def _rule_record(est: np.ndarray, se: np.ndarray, aa_est: np.ndarray, aa_se: np.ndarray, rule: str, alpha: float,
                 tau: float, fractions: np.ndarray, day_of_look: np.ndarray, truth: float,
                 null: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None, null_kind: str = "null",
                 df: np.ndarray | None = None, aa_df: np.ndarray | None = None) -> dict[str, Any]:
    """Power, decisions and A/A rate of one rule on (replicates, looks) series; with ``null`` (the design's
    null-variant series at the same looks, or with ``null_kind`` ``truth`` its own series minus its exact truth:
    :func:`truth_null`; with their degrees of freedom) also the rule's rate on it (:func:`_null_rate`). ``df``,
    ``aa_df``: the looks' degrees of freedom (:func:`_df_series`; every rule's t, :func:`_test`)."""
    from onlineeval.stats import binomial_band
    from onlineeval.stats.sequential import sequential_test

    def run(e: np.ndarray, s: np.ndarray, d: np.ndarray | None = None) -> Any:
        kind = "none" if rule == "fixed" else rule
        return sequential_test(e, s, kind, alpha=alpha, tau=tau if kind in ("msprt", "confidence_sequence") else None,
                               fractions=fractions if kind in ("obrien_fleming", "pocock") else None,
                               df=d)

    k = est.shape[1]
    res = run(est, se, df)
    at = np.clip(res.stop_look, 0, k - 1)
    first = np.take_along_axis(est, at[:, None], axis=1)[:, 0]
    right = res.reject & (np.sign(first) == np.sign(truth)) if truth != 0 else res.reject
    day = np.where(res.reject, day_of_look[at], day_of_look[-1])
    rec: dict[str, Any] = {
        "power": float(np.mean(right)),
        "decided_right_sign": float(np.mean(right)),
        "decided_wrong_sign": float(np.mean(res.reject & ~right)),
        "no_decision": float(np.mean(~res.reject)),
        "mean_decision_day": float(np.mean(day)),
        "median_decision_day": float(np.median(day)),
        # review 6, F4: the mean day among the replicates that decided (None: none did)
        "mean_decision_day_decided": float(np.mean(day[res.reject])) if res.reject.any() else None,
        "replicates": int(est.shape[0]),
    }
    if aa_est.size:
        aa = run(aa_est, aa_se, aa_df)
        r = int(aa.reject.size)
        band = binomial_band(r, alpha, 0.99)
        fpr = float(np.mean(aa.reject))
        degenerate = _degenerate(aa_est, aa_se)
        rec.update({
            "aa_false_positive_rate": fpr,
            "aa_replicates": r,
            "aa_binomial_99_band": [band.lo_rate, band.hi_rate],
            "aa_within_band_or_below": None if degenerate else bool(int(aa.reject.sum()) <= band.hi),
            "aa_degenerate": degenerate,
        })
    if null is not None and null[0].size:
        rec.update({f"null_{k}": v for k, v in _null_rate(run(*null), alpha, null_kind).items()})
    return rec


def _null_rate(res: Any, alpha: float, kind: str = "null") -> dict[str, Any]:
    """A rule's rejection share on replicates where its null holds, any sign, with the exact 99% binomial band of
    ``alpha`` (review 6, F3). ``kind``: ``null``, the design's null-variant replicates (the null user: every true
    effect 0); ``truth``, the design's own replicates tested at their exact true effect (:func:`truth_null`)."""
    from onlineeval.stats import binomial_band

    r = int(res.reject.size)
    band = binomial_band(r, alpha, 0.99)
    k = int(res.reject.sum())
    return {"false_positive_rate": k / r if r else math.nan, "replicates": r,
            "binomial_99_band": [band.lo_rate, band.hi_rate], "within_band_or_below": bool(k <= band.hi),
            "kind": kind}


def _degenerate(aa_est: np.ndarray, aa_se: np.ndarray) -> bool:
    """Whether an A/A series is identically 0 (every comparison a tie, or the off-policy paired difference 0)."""
    return bool(aa_est.size) and bool(np.all(np.nan_to_num(aa_est) == 0) and np.all(np.nan_to_num(aa_se) == 0))


def truth_null(main: Mapping[str, Any] | None, aa_est: np.ndarray, aa_se: np.ndarray) -> float | None:
    """The exact true effect at which a design's own replicates stand in for its A/A under a monitoring rule, or
    ``None``.

    A design whose A/A is identically 0 (a counterfactual design: both targets A, the paired difference 0) cannot
    reject under any rule, so its A/A says nothing about what peeking does to it, and it has no null-variant
    replicates (those are the interleaving designs'). Its estimate of B - A has an exact truth (from the click
    models, no Monte Carlo error), so the hypothesis H0: B - A = that truth is true in every replicate: the rule
    applied to ``estimate - truth`` with the same SEs rejects a true null, and the share of replicates that ever
    reject is the rule's false-positive rate (one minus its coverage of the truth, look by look). It counts what
    the estimator's bias and an SE that is too small early on do to the rule, as a real null would. ``None`` for a
    Monte Carlo truth (its own error would count as false positives) or an A/A that is not identically 0 (the
    design's A/A rate is measured)."""
    if main is None or not _degenerate(aa_est, aa_se):
        return None
    truth, se = main.get("true_effect"), main.get("true_effect_se")
    if main.get("truth_method") != "exact" or se != 0 or truth is None or not math.isfinite(float(truth)):
        return None
    return float(truth)


def _null_monitoring(rows: pd.DataFrame, side_rows: pd.DataFrame, design: str, metric: str, alpha: float,
                     main: dict[str, Any] | None) -> dict[str, Any] | None:
    """Review 6, F3: the daily monitoring rules of :data:`MONITORING` on the design's null-variant series
    (side rows ``null:<metric>``: the design run on the same traffic with the null user), with the mixture scale
    and the information fractions :func:`monitoring_summary` plans from the real pair's daily mean SEs
    (:func:`_monitoring_plan`), so that a design whose A/A is identically 0 still gets each rule's false-positive
    rate under a real null. Without null-variant rows, the design's own series tested at its exact truth where
    :func:`truth_null` gives one (``kind``: ``truth``; else ``null``). ``None`` without either. ``biased``: the
    design's null check (or, at the truth, its bias test or support) flags it: its rate then counts its bias."""
    from simulations.analysis_bias import is_biased_entry
    from simulations.designs.interleaving import NULL_PREFIX

    mine = rows[(rows["design"] == design) & (rows["metric"] == metric)]
    null_rows = side_rows[(side_rows["design"] == design) & (side_rows["metric"] == NULL_PREFIX + metric)]
    if not len(mine):
        return None
    est, se = _series(mine, aa=False)
    if len(null_rows):
        kind, name, biased = "null", NULL_PREFIX + metric, bool(((main or {}).get("null") or {}).get("biased"))
        n_est, n_se = _series(null_rows, aa=False)
        n_df = _df_series(null_rows, aa=False)
    else:
        truth = truth_null(main, *_series(mine, aa=True))
        if truth is None:
            return None
        kind, name, biased = "truth", metric, is_biased_entry(main or {})
        n_est, n_se, n_df = est - truth, se, _df_series(mine, aa=False)
    if n_est.size == 0 or n_est.shape[1] != est.shape[1]:
        return None
    plan = _monitoring_plan(se, alpha)
    if plan is None:
        return None
    tau, fractions = plan
    return {"metric": name, "kind": kind, "replicates": int(n_est.shape[0]), "tau": tau, "biased": biased,
            "rules": {rule: _null_rate(_test(n_est, n_se, rule, alpha, tau, fractions, n_df), alpha, kind)
                      for rule in MONITORING}}


def truth_rejection_by_day(rows: pd.DataFrame, design: str, metric: str, main: Mapping[str, Any] | None,
                           alpha: float) -> tuple[np.ndarray, np.ndarray] | None:
    """``(days, rates)``: with each day as the horizon, the share of a design's replicates whose fixed-horizon test of
    H0: B - A = the exact truth rejects (one minus the coverage of the truth by day), for a design whose A/A is
    identically 0 and whose truth is exact (:func:`truth_null`, the same test as the monitoring tables' ``truth``
    rates on the last day); ``None`` otherwise. What the power figure draws in place of such a design's A/A."""
    mine = rows[(rows["design"] == design) & (rows["metric"] == metric)]
    if not len(mine):
        return None
    truth = truth_null(main, *_series(mine, aa=True))
    if truth is None:
        return None
    est, se = _series(mine, aa=False)
    if est.size == 0:
        return None
    days = np.sort(mine.loc[~mine["aa"].astype(bool), "day"].unique())
    # the simulated power curve's per-look test on estimate - truth: any rejection counts when the truth is 0
    return days, _fixed_power_by_look(est - truth, se, alpha, 0.0, _df_series(mine, aa=False))


def _fixed_power_by_look(est: np.ndarray, se: np.ndarray, alpha: float, truth: float,
                         df: np.ndarray | None = None) -> np.ndarray:
    """The fixed-horizon test's power (rejections at ``alpha`` with the sign of ``truth``; any rejection when it is
    0) with each look taken as the horizon: the simulated power curve at the looks (``df``: each look's t, as
    :func:`_test`)."""
    from onlineeval.stats.sequential import sequential_test

    # the fixed-horizon rule reads only its last look: every (replicate, look) is its own one-look test
    reject = sequential_test(est.reshape(-1, 1), se.reshape(-1, 1), "none", alpha=alpha,
                             df=None if df is None else df.reshape(-1, 1)).reject.reshape(est.shape)
    ok = reject & (np.sign(est) == np.sign(truth)) if truth != 0 else reject
    return ok.mean(axis=0)


def _first_look(power: np.ndarray, target: float) -> int | None:
    """The first look from which ``power`` stays at or above ``target`` through the last (as the main table's
    days->pwr: a simulated curve is not monotone); ``None`` when the last look is below it."""
    ok = power >= target - 1e-12
    if not ok.size or not ok[-1]:
        return None
    failed = np.flatnonzero(~ok)
    return int(failed[-1] + 1) if failed.size else 0


def _mixture_region(fractions: np.ndarray, alpha: float, x: float) -> Any:
    """The mSPRT's rejection region on the z scale at the looks, for ``x = tau^2 / se_K^2``."""
    from onlineeval.stats.sequential import Boundaries

    xt = x * fractions
    b = np.sqrt((1.0 + 1.0 / xt) * (-2.0 * math.log(alpha) + np.log1p(xt)))
    return Boundaries(fractions, b, -b, alpha, "two-sided", "msprt")


def _planned(rule: str, fractions: np.ndarray, alpha: float, power: float, x: float, fit: dict[str, float],
             effect: float, queries_per_day: float, refits: Any = None) -> dict[str, Any] | None:
    r"""Planned for the target power: the fixed horizon's required days against the sequential
    design's maximum and expected days (under the effect and under H0).

    The sequential design needs :math:`R` times the fixed horizon's information
    :math:`I^* = ((z_{1-\alpha/2} + z_{power})/\delta)^2` (as the main table plans it; :math:`R` the
    inflation factor of the design's boundaries at its fractions, from exact two-sided crossing
    probabilities; mixture designs at the simulated ratio :math:`x = \tau^2/se_K^2`), its looks
    at the information fractions :math:`t_k I_{max}`. Information is turned into impressions with
    the design's variance model :math:`se^2 = a/N + b`, :math:`N(I) = a / (1/I - b)`, and into days
    by the daily traffic; the expected days are
    :math:`\sum_k P(\text{stop at } k)\,\text{days}(t_k I_{max}) + P(\text{no stop})\,\text{days}(I_{max})`
    with the exact crossing probabilities under the effect (drift at the target power) and under
    H0. ``None`` where the information is beyond the floor ``b`` (not reachable with the population).

    With ``refits`` (:func:`simulations.analysis.size_refits`, the main table's bootstrap refits of the
    same variance model) every planned number is recomputed from each refit and ``uncertainty`` gives,
    per number, :func:`simulations.analysis.refit_spread` (range, relative SE, unstable). The fixed
    horizon's days are the main table's size / traffic, so its flag is the main table's. Its floor ratio
    is :math:`b I` at the information :math:`I` it needs (:math:`b/T` for the fixed horizon, :math:`R`
    times that for the maximum); for an expected value :math:`E = \sum_k p_k D_k` the equivalent
    :math:`f` with :math:`f/(1-f) = \sum_k (p_k D_k / E)\, b I_k / (1 - b I_k)`, the sensitivity of
    :math:`E` to a relative change of ``b``.
    """
    from onlineeval.stats.sequential import (
        crossing_probabilities,
        drift_for_power,
        peeking_boundaries,
        spending_boundaries,
    )

    a, b = fit.get("a"), fit.get("b")
    if not effect or a is None or b is None or not math.isfinite(a) or a <= 0:
        return None
    bounds = (_mixture_region(fractions, alpha, x) if rule in ("msprt", "confidence_sequence")
              else spending_boundaries(fractions, alpha, rule))
    d_seq = drift_for_power(bounds, power)
    inflation = (d_seq / drift_for_power(peeking_boundaries([1.0], alpha), power)) ** 2
    # the fixed horizon as the main table plans it: se = |effect| / (z_(1-alpha/2) + z_power)
    z = NormalDist()
    info_fixed = ((z.inv_cdf(1.0 - alpha / 2.0) + z.inv_cdf(power)) / effect) ** 2

    def days(info: float) -> float | None:
        inv = 1.0 / info - b
        return None if inv <= 0 else a / inv / queries_per_day

    max_info = inflation * info_fixed
    max_days = days(max_info)

    stops: dict[float, np.ndarray] = {}

    def expected_days(drift: float) -> tuple[float, float | None]:
        # E[days] = sum_k P(stop at look k) days(t_k I_max) + P(no stop) days(I_max)
        cross = crossing_probabilities(bounds, drift)
        stop = stops[drift] = cross.upper + cross.lower
        if max_days is None:
            return cross.expected_fraction, None
        at = np.array([days(t * max_info) for t in fractions], dtype=float)
        return cross.expected_fraction, float((stop * at).sum() + (1.0 - stop.sum()) * max_days)

    e_alt, days_alt = expected_days(d_seq)
    e_null, days_null = expected_days(0.0)
    out = {
        "inflation_factor": inflation,
        "expected_fraction_effect": e_alt,
        "expected_fraction_null": e_null,
        "fixed_days": days(info_fixed),
        "max_days": max_days,
        "expected_days_effect": days_alt,
        "expected_days_null": days_null,
    }
    f, e = out["fixed_days"], out["expected_days_effect"]
    out["days_saved_effect"] = None if f is None or e is None else f - e
    if refits is not None:
        out["uncertainty"] = _planned_uncertainty(
            out, refits, fractions, inflation, {"expected_days_effect": stops[d_seq], "expected_days_null": stops[0.0]},
            alpha, power, queries_per_day, float(b), info_fixed,
            floor_fitted=int(fit.get("points", FLOOR_MIN_POINTS)) >= FLOOR_MIN_POINTS)
    return out


def _planned_uncertainty(out: dict[str, Any], refits: Any, fractions: np.ndarray, inflation: float,
                         stops: dict[str, np.ndarray], alpha: float, power: float, queries_per_day: float,
                         b: float, info_fixed: float, floor_fitted: bool = True) -> dict[str, Any]:
    """Each planned number of :func:`_planned` from every refit of the variance model, spread and flagged
    by :func:`simulations.analysis.refit_spread` (see :func:`_planned`; ``floor_fitted`` False: the model's
    floor was assumed 0, not fitted, and every number is flagged)."""
    from simulations.analysis import refit_spread

    z = NormalDist()
    zsum = z.inv_cdf(1.0 - alpha / 2.0) + z.inv_cdf(power)
    a_r, b_r = refits.a[:, None], refits.b[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        info_r = (zsum / refits.effect) ** 2  # the fixed horizon's information of each refit's drawn effect
        levels = np.concatenate([[1.0 / inflation], np.asarray(fractions, dtype=float), [1.0]])
        inv = 1.0 / (inflation * info_r[:, None] * levels[None, :]) - b_r
        days = np.where((inv > 0) & np.isfinite(a_r), a_r / inv / queries_per_day, np.inf)
    fixed_r, at_r, max_r = days[:, 0], days[:, 1:-1], days[:, -1]

    def point(v: float | None) -> float:
        return math.inf if v is None else float(v)

    def ratio(info: float) -> float:
        return b * info

    result = {"fixed_days": refit_spread(point(out["fixed_days"]), fixed_r, ratio(info_fixed), floor_fitted),
              "max_days": refit_spread(point(out["max_days"]), max_r, ratio(inflation * info_fixed), floor_fitted)}
    max_info = inflation * info_fixed
    for key, stop in stops.items():
        refit_days = (stop[None, :] * at_r).sum(axis=1) + (1.0 - stop.sum()) * max_r
        e = out[key]
        f = None
        if e is not None and e > 0 and out["max_days"] is not None:
            # sensitivity of E = sum_k w_k D_k to a relative change of b: sum_k (w_k D_k / E) b I_k / (1 - b I_k)
            infos = np.append(np.asarray(fractions, dtype=float) * max_info, max_info)
            weights = np.append(stop, 1.0 - stop.sum())
            d_k = np.array([out["max_days"] * (1 / max_info - b) / (1 / i - b) for i in infos])
            amp = float((weights * d_k / e * (b * infos) / (1 - b * infos)).sum())
            f = amp / (1 + amp)
        result[key] = refit_spread(point(e), refit_days, f, floor_fitted)
    return result


def sequential_summary(rows: pd.DataFrame, side_rows: pd.DataFrame, designs: dict[str, Any], config: Any,
                       refits: Mapping[tuple[str, str], Any]) -> dict[str, Any]:
    """Each design's configured sequential test (``designs[i].analysis``) on its primary metric.

    Per design: ``rule``, ``monitoring``, the looks (``look_days``: the day each look ends,
    fractional for per-batch looks), ``tau`` (mixture designs) or ``fractions`` (spending
    designs, planned from the mean SE by look), and ``rules``: ``fixed`` (one test at the
    last look), ``peeking`` (the fixed test at every scheduled look) and the configured rule,
    each with power, decision shares, mean day of the decision and the A/A rate against its
    exact 99% binomial band. ``decision``: the configured rule's record with
    ``days_saved_vs_fixed`` (fixed horizon day minus the mean decision day at the simulated
    length; negative = costs days), ``power_vs_fixed`` and ``planned`` (see :func:`_planned`), whose spread is
    computed on ``refits``: the main table's bootstrap refits of the variance model by (design, metric)
    (:func:`simulations.analysis.size_refits`, made by :func:`simulations.analysis.analyse`).
    """
    from onlineeval.stats.sequential import mixture_tau

    alpha, target = config.analysis.alpha, config.analysis.power
    out: dict[str, Any] = {}
    for dc in config.designs:
        an = dc.analysis
        metrics = designs.get(dc.name)
        if metrics is None:
            continue
        metric = next((m for m, e in metrics.items() if e["primary"]), None)
        if metric is None:
            continue
        batch = an.monitoring == "batch"
        per_day = 24 // config.traffic.batch_hours if batch else 1
        src = side_rows if batch else rows
        name = BATCH_PREFIX + metric if batch else metric
        mine = src[(src["design"] == dc.name) & (src["metric"] == name)]
        est, se = _series(mine, aa=False)
        if est.size == 0:
            continue
        aa_est, aa_se = _series(mine, aa=True)
        df, aa_df = _df_series(mine, aa=False), _df_series(mine, aa=True)
        n_looks = est.shape[1]
        day_of_look = np.arange(1, n_looks + 1) / per_day
        idx = _schedule(an.looks, n_looks, per_day)
        mean_se = _mean_positive(se)
        idx = idx[np.isfinite(mean_se[idx])] if np.isfinite(mean_se[idx]).any() else idx[:0]
        if idx.size == 0 or idx[-1] != n_looks - 1:
            # no look with a defined SE on average, or the horizon itself undefined: nothing to plan from
            out[dc.name] = {"metric": metric, "rule": an.sequential, "monitoring": an.monitoring,
                            "note": "the design's standard error is undefined at the horizon; no sequential analysis"}
            continue
        est, se, day_of_look, planned_se = est[:, idx], se[:, idx], day_of_look[idx], mean_se[idx]
        df = _cols(df, idx)
        if aa_est.size:
            aa_est, aa_se, aa_df = aa_est[:, idx], aa_se[:, idx], _cols(aa_df, idx)
        # review 6, F3: the design's null-variant series (daily; per-batch looks are not recorded for it)
        from simulations.designs.interleaving import NULL_PREFIX

        null: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None
        null_kind = "null"
        if not batch:
            null_rows = side_rows[(side_rows["design"] == dc.name) & (side_rows["metric"] == NULL_PREFIX + metric)]
            n_est, n_se = _series(null_rows, aa=False)
            if n_est.size and n_est.shape[1] == n_looks:
                null = (n_est[:, idx], n_se[:, idx], _cols(_df_series(null_rows, aa=False), idx))
        at_truth = truth_null(metrics[metric], aa_est, aa_se) if null is None else None
        if at_truth is not None:
            # no null variant (a counterfactual design): its own looks tested at the exact truth
            null, null_kind = (est - at_truth, se, df), "truth"
        fractions = _planned_fractions(planned_se)
        tau = float(an.tau) if an.tau is not None else float(mixture_tau(planned_se[-1], alpha))
        truth = float(metrics[metric]["true_effect"])
        rules = ["fixed", "peeking"] + ([an.sequential] if an.sequential != "none" else [])
        entry: dict[str, Any] = {
            "metric": metric,
            "rule": an.sequential,
            "monitoring": an.monitoring,
            "looks": int(idx.size),
            "look_days": [float(d) for d in day_of_look],
            "tau": tau if an.sequential in ("msprt", "confidence_sequence") else None,
            "tau_source": None if an.sequential not in ("msprt", "confidence_sequence") else (
                "config" if an.tau is not None else "planned: mixture_tau(mean SE at the horizon, alpha)"),
            "fractions": [float(t) for t in fractions],
            "rules": {r: _rule_record(est, se, aa_est, aa_se, r, alpha, tau, fractions, day_of_look, truth, null,
                                      null_kind, df, aa_df)
                      for r in rules},
            # review 6, F3: the daily monitoring table's rules on the null-variant series
            "null_monitoring": _null_monitoring(rows, side_rows, dc.name, metric, alpha, metrics[metric]),
        }
        fixed = entry["rules"]["fixed"]
        decision = dict(entry["rules"][rules[-1] if an.sequential != "none" else "fixed"])
        decision["rule"] = an.sequential
        # against the last day whatever the powers (kept for reference; not printed: review 6, F4)
        decision["days_saved_vs_fixed"] = fixed["mean_decision_day"] - decision["mean_decision_day"]
        decision["power_vs_fixed"] = decision["power"] - fixed["power"]
        # review 6, F4: at equal power in the simulation: the fixed horizon's power with each look as the horizon
        # (the curves' power at those looks), and the day from which it stays at the rule's power
        fixed_power = _fixed_power_by_look(est, se, alpha, truth, df)
        entry["fixed_power_by_look"] = [float(x) for x in fixed_power]
        at_power = _first_look(fixed_power, decision["power"]) if decision["power"] > 0 else None
        decision["fixed_day_at_power"] = None if at_power is None else float(day_of_look[at_power])
        decision["days_saved_at_equal_power"] = (None if at_power is None else
                                                 float(day_of_look[at_power]) - decision["mean_decision_day"])
        main = metrics[metric]
        if an.sequential != "none" and main.get("analytic_withheld"):
            # a biased design or estimate: planned days would measure its bias as much as the effect
            decision["planned"] = None
            decision["planned_withheld"] = main["analytic_withheld"]
        elif an.sequential != "none" and main.get("detectable", True):
            x = tau**2 / planned_se[-1] ** 2
            decision["planned"] = _planned(an.sequential, fractions, alpha, target, x,
                                           main.get("variance_model") or {}, truth,
                                           float(config.traffic.queries_per_day), refits.get((dc.name, metric)))
        entry["decision"] = decision
        out[dc.name] = entry
    return out
