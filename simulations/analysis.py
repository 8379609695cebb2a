"""From replicate rows to the answers: power versus days, sample size, false positives.

For each design and metric, at every daily checkpoint over the R replicates:

- ``power``: share of replicates that reject H0 at ``alpha`` (two-sided) *and* estimate
  the effect with the sign of the true effect; ``rejection_rate``: rejections either way;
- ``analytic_power``: the normal-approximation power for the true effect and the mean
  standard error at that checkpoint, counted like ``power`` (rejections with the effect's
  sign): :math:`\\Phi(|\\delta|/se - z_{1-\\alpha/2})`, or where the rows are t rows (the counterfactual
  design's differences, ``test: welch`` and ``delta_t``) and the mean SE is the measure the noncentral t's
  :math:`P(T > t_{df}(1-\\alpha/2))` of noncentrality :math:`|\\delta|/se` at their median degrees of freedom
  (:func:`~simulations.analysis_sizes.t_power`; z where the replicates' SD stands in for the SE);
- the mean estimate, its spread across replicates, the mean standard error, CI coverage
  of the true value, users and impressions;
- for A/A variants, the false-positive rate with its exact binomial 99% band around alpha;
- for interleaving designs, the null check (:func:`null_check`): the expected Delta when
  clicks do not depend on relevance (every true effect 0) with its Monte Carlo SE, the
  analytic rejection rate it causes day by day, and whether the design is biased;
- ``detectable``: false when the true effect is 0 or within 2 Monte Carlo SEs of 0 (no
  required size is given then).

Sample size: the first day from which the simulated power stays at or above the target, and an
analytic extrapolation from :math:`se^2(N) = a/N + b` fitted to the daily checkpoints
(:class:`VarianceModel`; returning users give the standard error a floor ``b``):
:math:`N_{req} = a / ((|\\delta| / (z_{1-\\alpha/2} + z_{power}))^2 - b)`, or "not
reachable" when the floor is above the target; for t rows the t-test's size at the days' degrees of
freedom along N (:class:`~simulations.analysis_sizes.DfModel`), the power the analytic column takes. Between
designs: the ratio of required impressions to the first design's, and the efficiency at equal traffic, the ratio of
:math:`(\\delta / se)^2` on the last simulated day (the two differ when the reference's
standard error has a floor); biased designs are listed apart.

The analytic size's own uncertainty (:func:`required_impressions_uncertainty`): the fit refitted on
bootstrap resamples of the replicates, seeded by the config's seed, design and metric; near the floor
(``b`` close to the target :math:`se^2`) the answer is ill-conditioned and flagged unstable. A design
or estimate found biased gets no analytic power, days or sizes (null, kept apart under
``analytic_if_unbiased``): computed as if it were unbiased they would measure nothing. An off-policy estimate
whose target leaves the logger's support on part of the log (the design's ``support:<estimator>:<target>`` side
rows count events of logging probability 0 exactly) is biased whatever the t-test of its bias says: marked
``no_support`` and withheld alike, with that reason.

An off-policy estimate whose SE holds a data-driven choice fixed (adaptive IPS's behaviours, a click model fitted
on the log: :func:`simulations.designs.counterfactual.serving.held_fixed`) reports an SE known to be too small
(adaptive IPS: 0.70 of its replicates' SD, review 3 F-A). Its analytic power, variance model and sizes use the
replicates' SD of its estimates (the estimator's sampling SD) instead of the mean SE; its simulated power counts
the last day's bootstrap test (the design's ``bootstrap``: SE and p-value from the resamples, the choice made
again in each), other days' power is not measured, and without the bootstrap it is withheld. The entry says which
measure it used (``se_measure``, ``power_measure``).

The parts live in sibling modules, re-exported here: the day-by-day curves (:mod:`simulations.analysis_curves`),
the null check (:mod:`simulations.analysis_null`), the ground truth's precision (:mod:`simulations.analysis_truth`),
the sample sizes with their uncertainty (:mod:`simulations.analysis_sizes`), the bias tests with the withholding of
biased entries' numbers (:mod:`simulations.analysis_bias`), the measures of estimates whose SE holds a choice fixed
(:mod:`simulations.analysis_held`), the ratios between designs (:mod:`simulations.analysis_ratios`) and the
multileaving designs' rankers (:mod:`simulations.analysis_multileaving`). This module builds the summary from them
(:func:`analyse`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from onlineeval.stats import binomial_band

from simulations.analysis_bias import (
    NO_SUPPORT_REASON,
    WITHHELD_REASON,
    _SIZE_KEYS,
    _no_support_reason,
    _support_violations,
    _withhold_analytic,
    estimate_is_biased,
    is_biased_entry,
)
from simulations.analysis_curves import (
    _coverage_band,
    _first_day,
    curves,
)
from simulations.analysis_held import (
    HELD_POWER_BOOTSTRAP,
    HELD_POWER_WITHHELD,
    HELD_SE_MEASURE,
    SMALL_SE_MEASURE,
    SMALL_SE_POWER,
    SMALL_SE_SES,
    sd_precision_text,
    se_sd_ratio,
    se_sd_ratio_text,
    small_se,
)
from simulations.analysis_multileaving import (
    MULTILEAVING_ORDER_METRIC,
    multileaving_offline,
    multileaving_summary,
    pair_rankers,
    pairwise_error_rates,
    ranker_online_values,
)
from simulations.analysis_null import (
    NULL_BIAS_P,
    NULL_BIAS_SE,
    NULL_DETECTABLE_POWER,
    NULL_RATE_FAMILY_LEVEL,
    null_bias_rules,
    null_check,
    null_mean_test,
    null_rejection_rate,
    t_noncentrality,
)
from simulations.analysis_ratios import (
    INDISTINGUISHABLE_RULE,
    RATIO_UNCERTAIN_REL_SE,
    design_ratios,
    indistinguishable,
    information_rel_se,
    ratio_interval,
    ratio_rel_se,
)
from simulations.analysis_sizes import (
    EXTRAPOLATION_FLAG,
    SIZE_BOOTSTRAP,
    UNSTABLE_FLOOR_RATIO,
    UNSTABLE_REL_SE,
    DfModel,
    SizeRefits,
    VarianceModel,
    df_model,
    expected_distinct_users,
    extrapolation_factor,
    is_extrapolated,
    refit_sizes,
    refit_spread,
    replicate_arrays,
    required_impressions,
    required_impressions_uncertainty,
    size_refits,
    size_seed,
    size_uncertainty,
    spread_text,
    t_power,
    target_variance,
    variance_model,
)
from simulations.analysis_truth import (
    MONTE_CARLO_WORLD_NOTE,
    TRUTH_MC_SE,
    TRUTH_MC_SHARE,
    _round_up,
    exact_truth_per_query,
    truth_precision,
    truth_world_se,
)
from simulations.config import Config
from simulations.designs.counterfactual.metric import reward_name
from simulations.runner import NULL_PREFIX, Truth
from simulations.world import World, world_sampling


__all__ = ["analyse", "curves", "improvement_sign", "expected_distinct_users", "variance_model", "required_impressions",
           "VarianceModel", "IMPROVEMENT_SIGN", "null_check", "null_rejection_rate", "NULL_BIAS_SE",
           "required_impressions_uncertainty", "target_variance", "UNSTABLE_FLOOR_RATIO", "UNSTABLE_REL_SE",
           "SIZE_BOOTSTRAP", "WITHHELD_REASON", "SizeRefits", "size_refits", "size_seed", "replicate_arrays",
           "refit_spread", "refit_sizes", "size_uncertainty", "NO_SUPPORT_REASON", "HELD_SE_MEASURE",
           "EXTRAPOLATION_FLAG", "exact_truth_per_query", "extrapolation_factor", "is_extrapolated", "truth_precision",
           "TRUTH_MC_SE", "TRUTH_MC_SHARE", "truth_world_se", "MONTE_CARLO_WORLD_NOTE", "NULL_RATE_FAMILY_LEVEL",
           "NULL_DETECTABLE_POWER", "t_noncentrality", "RATIO_UNCERTAIN_REL_SE", "information_rel_se", "ratio_rel_se",
           "ratio_interval", "indistinguishable", "INDISTINGUISHABLE_RULE", "null_bias_rules", "multileaving_summary",
           "pairwise_error_rates", "ranker_online_values", "MULTILEAVING_ORDER_METRIC", "DfModel", "df_model",
           "t_power"]


def _small_se_entries(rows: pd.DataFrame, held: dict[tuple[str, str], Any],
                      day: int) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(design, metric): its se_sd_ratio}`` of the entries (not A/A, not held fixed) whose reported SE runs
    small on ``day``, the last (:func:`simulations.analysis_held.small_se`)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    last = rows[(~rows["aa"]) & (rows["day"] == day)]
    for key, g in last.groupby(["design", "metric"], sort=False):
        if key not in held:
            q = small_se(g["estimate"].to_numpy(dtype=np.float64), g["se"].to_numpy(dtype=np.float64))
            if q is not None:
                out[(str(key[0]), str(key[1]))] = q
    return out


def side_row_mask(rows: pd.DataFrame) -> pd.Series:
    """Rows that are not a design's effect estimates: metric ``"<kind>:<name>"`` (null variants,
    per-batch looks, SRM checks, CUPED rows, counterfactual side records)."""
    if not len(rows):
        return pd.Series([], dtype=bool)
    return rows["metric"].astype(str).str.contains(":", regex=False)


#: +1 where a higher value of the online metric is an improvement, -1 where lower is
IMPROVEMENT_SIGN = {"reciprocal_rank": 1, "clicks_per_query": 1, "abandonment": -1, "delta_ab": 1}


def improvement_sign(summary: Any, design: str, metric: str) -> int:
    """:data:`IMPROVEMENT_SIGN` of a summary's ``designs[design][metric]`` entry: of the online metric it estimates.
    A counterfactual design's entries are named by estimator (``snips``, ``rips``, ...), not by metric: their sign
    is the design's metric's (its entry's ``improvement_sign``, or for a summary written without it the design's
    ``counterfactual`` section's ``metric``); looking the estimator's label up gave +1 for abandonment, so its
    improvement read as a loss."""
    entry = ((summary.get("designs") or {}).get(design) or {}).get(metric)
    if isinstance(entry, dict) and entry.get("improvement_sign") in (1, -1):
        return int(entry["improvement_sign"])
    cf = (summary.get("counterfactual") or {}).get(design)
    online = cf.get("metric", metric) if isinstance(cf, dict) else metric
    return IMPROVEMENT_SIGN.get(online, 1)


def analyse(
    rows: pd.DataFrame,
    truths: list[Truth],
    world: World,
    config: Config,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The summary dictionary (as saved in ``summary.json``) and the curves table."""
    alpha, target_power = config.analysis.alpha, config.analysis.power
    queries_per_day = config.traffic.queries_per_day
    truth = {(t.design, t.metric): t for t in truths}
    # counterfactual designs' side records (the logger's own metrics, support counts) are
    # not estimates of the design's effect: reported apart (counterfactual_summary)
    side = side_row_mask(rows)
    side_rows, rows = rows[side], rows[~side]
    # off-policy estimates whose SE holds a data-driven choice fixed (adaptive IPS): sized from the replicates' SD,
    # their power counted only from the last day's bootstrap test (None: no bootstrap, power withheld)
    from simulations.designs.counterfactual.serving import held_fixed

    held_what = held_fixed(config)
    boot = {d.name: int(getattr(d, "bootstrap", 0) or 0) for d in config.designs}
    final_day = int(rows["day"].max()) if len(rows) else 0
    held = {key: (final_day if boot.get(key[0]) else None) for key in held_what}
    # estimates whose reported SE runs small on the last day (review of the off-policy sizes): sized from the
    # replicates' SD as the held-fixed ones, their simulated power kept and marked
    small = _small_se_entries(rows, held, final_day)
    table = curves(rows, truth, alpha, held, sd_power=set(small))
    designs: dict[str, Any] = {}
    offline = world.offline
    offline_rel = offline.delta("weighted") / offline.weighted["A"] if offline.weighted["A"] else float("nan")
    n_eff, world_se = world_sampling(world.frequency, offline.per_query["B"] - offline.per_query["A"])
    # review 4, F1: each exact online truth's SE over drawn worlds, as the offline delta's
    truth_world = truth_world_se(config, world, truths)
    by_replicate = {key: g for key, g in rows[~rows["aa"]].groupby(["design", "metric"], sort=False)}
    # each entry's variance model refitted on bootstrap resamples of its replicates: its size's spread here, the
    # sequential plan's days' there (sequential_summary)
    refits: dict[tuple[str, str], SizeRefits | None] = {}
    # review 9, F1: the null check's family is every null-checked pair of every design of the run
    run_null_pairs = sum(1 for (_, m_) in truth if m_.startswith(NULL_PREFIX))
    # the online metric each entry estimates: a counterfactual design's entries are its estimators
    online_metric = {d.name: d.metric for d in config.designs if d.type == "counterfactual"}
    # each off-policy estimator against the exact truth on one large direct log, whatever the replicates' count
    from simulations.designs.counterfactual.bias_check import bias_checks

    checks = bias_checks(config, world)
    for (design, metric), c in table[~table["aa"]].groupby(["design", "metric"], sort=False):
        c = c.sort_values("day")
        last = c.iloc[-1]
        t = truth[(design, metric)]
        is_held = (design, metric) in held
        by_sd = is_held or (design, metric) in small
        # the SE the sizes assume: the replicates' SD of the estimates where the reported SE is too small
        se_col = "sd_estimate" if by_sd else "mean_se"
        fit = variance_model(c["mean_impressions"].to_numpy(), c[se_col].to_numpy())
        # t rows: the sizes are the t-test's at the days' df (those of the analytic power), not z's
        dfm = None if by_sd else df_model(c["mean_impressions"].to_numpy(), c["df"].to_numpy())
        n_req = required_impressions(fit, t.value, alpha, target_power, dfm)
        # the fit's own uncertainty: refits on bootstrap resamples of the replicates (seeded by the config)
        g = by_replicate[(design, metric)]
        wide_se, wide_n = replicate_arrays(g, sorted(c["day"]), "estimate" if by_sd else "se")
        refits[(design, metric)] = size_refits(wide_se, wide_n, t.value, t.se, size_seed(config.seed, design, metric),
                                               spread=by_sd)
        size_unc = size_uncertainty(fit, refits[(design, metric)], t.value, alpha, target_power, dfm)
        # review 4, F2: analytic days / simulated days; beyond EXTRAPOLATION_FLAG the size is model-dependent
        extrapolation = extrapolation_factor(n_req, queries_per_day, config.traffic.days)
        extrapolated = is_extrapolated(extrapolation)
        day_sim = _first_day(c, "power", target_power)
        at = c[c["day"] == day_sim].iloc[0] if day_sim is not None else None
        r = int(last["replicates"])
        # the replicates with an estimate on the last day: the mean estimate and its SD are over them, so the
        # bias's SE is over them too (it divided the SD by all replicates' root, too small where some were undefined)
        r_est = int(last["estimates"])
        bias = float(last["mean_estimate"] - t.value)
        # undefined with one replicate (no spread to measure; it was printed as the truth's SE alone, 0 for an exact
        # truth, so a single replicate's miss looked like a bias measured exactly)
        bias_se = float(math.hypot(last["sd_estimate"] / math.sqrt(r_est), t.se)) if r_est > 1 else None
        z = float(sps.norm.ppf(1 - alpha / 2))
        coverage_band = _coverage_band(last, alpha, t.se)
        entry = {
            "metric": metric,
            # +1 when a larger value of the online metric (a counterfactual design's: its design's) is better
            "improvement_sign": IMPROVEMENT_SIGN.get(online_metric.get(design, metric), 1),
            "primary": bool(last["primary"]),
            "true_effect": t.value,
            "true_effect_se": t.se,
            "truth_method": t.method,
            # review 4, F1: the truth's SE over independently drawn worlds (exact truths: world_sampling of its
            # per-query values); None with a note for a Monte Carlo truth
            "true_effect_world_se": _jsonable(truth_world.get((design, metric))),
            "relative_effect": (t.value / t.baseline) if t.baseline else None,
            "final_day": {k: _jsonable(last[k]) for k in ("day", "power", "power_se", "analytic_power",
                                                            "mean_estimate", "sd_estimate", "rmse", "mean_se",
                                                            "coverage", "mean_users", "mean_impressions",
                                                            "undefined", "replicates", "estimates")},
            # the exact 99% binomial band of the coverage of a valid (1 - alpha) interval over the replicates with
            # a defined interval (its lower end widened by a Monte Carlo truth's own error: _coverage_band), and
            # whether the coverage is inside it (None: no defined interval)
            "coverage_band": None if coverage_band is None else [coverage_band.lo_rate, coverage_band.hi_rate],
            "coverage_within_band": None if coverage_band is None else bool(
                coverage_band.lo_rate <= float(last["coverage"]) <= coverage_band.hi_rate),
            # what one experiment of this length reports: mean estimate +- z * typical SE
            "typical_ci_last_day": [float(last["mean_estimate"] - z * last[se_col]),
                                    float(last["mean_estimate"] + z * last[se_col])],
            "estimator_bias": bias,
            "estimator_bias_se": bias_se,
            "days_to_target_power": day_sim,
            "analytic_days_to_target_power": _first_day(c, "analytic_power", target_power),
            "impressions_at_target_power": None if at is None else float(at["mean_impressions"]),
            "users_at_target_power": None if at is None else float(at["mean_users"]),
            "variance_model": fit._asdict(),
            # t rows: the df along the impressions the sizes take (DfModel: the days' median df, interpolated,
            # the last day's held beyond); None for z rows
            "df_model": None if dfm is None else {k: list(v) for k, v in dfm._asdict().items()},
            # no day has a measured SE (every replicate's SE undefined; or, sized from the replicates' SD, one
            # replicate): no power, days or size can be computed, and None below means that, not 'not reachable'
            "no_se": fit.points == 0,
            "analytic_required_impressions": n_req,
            # the uncertainty of n_req from the replicates (the (a, b) fit refitted on bootstrap resamples of
            # them) and the truth's Monte Carlo error: see required_impressions_uncertainty
            "analytic_required_impressions_rel_se": size_unc["rel_se"],
            "analytic_required_impressions_range": size_unc["range"],
            "analytic_required_impressions_unreachable_share": size_unc["unreachable_share"],
            # '?': the refits' rule (size_uncertainty), or extrapolated beyond EXTRAPOLATION_FLAG x the simulated days
            "analytic_required_impressions_unstable": bool(size_unc["unstable"] or extrapolated),
            "analytic_required_impressions_extrapolated": extrapolated,
            "variance_floor_to_target": size_unc["floor_ratio"],
            # False with fewer than FLOOR_MIN_POINTS days: b = 0 assumed, not fitted (the size is flagged '?')
            "variance_floor_fitted": size_unc["floor_fitted"],
            "analytic_required_days": n_req / queries_per_day if math.isfinite(n_req) else None,
            # review 4, F2: how far past the simulated days the a/N + b fit is extrapolated (analytic days /
            # simulated days); its error grows with this (9-14% measured at 9x)
            "analytic_required_days_extrapolation": extrapolation,
            "analytic_required_users": float(
                expected_distinct_users(n_req, config.users.population, config.users.activity.sigma)
            ) if math.isfinite(n_req) else None,
        }
        if (design, metric) not in truth_world and t.se > 0:
            entry["true_effect_world_note"] = MONTE_CARLO_WORLD_NOTE
        # an estimator whose replicates miss the truth by more than NULL_BIAS_SE standard errors
        # (e.g. IIPS under cascade users, clipped IPS): its power and sample size measure its bias
        # as much as the effect, so the report marks them instead of presenting them as sensitivity
        entry["biased_estimate"] = estimate_is_biased(bias, float(last["sd_estimate"]), r_est, t.se)
        if (design, metric) in checks:
            entry["bias_check"] = checks[(design, metric)]
        if abs(t.value) <= 2 * t.se:
            # the truth is 0 or within its Monte Carlo error of 0 (e.g. identical rankers): no effect
            # to detect, so no sample size is given
            entry["detectable"] = False
            for key in _SIZE_KEYS:
                entry[key] = None
        else:
            entry["detectable"] = True
        # review 4, F3: is a Monte Carlo truth's SE small against the effect (4 SE <= 10% of it)?
        precision = truth_precision(t.value, t.se, config.analysis.truth_impressions)
        if precision is not None and entry["detectable"]:
            entry["truth_precision"] = precision
        se_last = float(last[se_col])
        # (|effect| / SE)^2 on the last day: the information one experiment of the simulated
        # length has about the effect; ratios between designs on the same traffic are their
        # relative efficiency per impression at that traffic
        entry["information_last_day"] = (t.value / se_last) ** 2 if se_last > 0 and np.isfinite(se_last) else None
        # review 6, F1: its delta-method relative SE from the truth's Monte Carlo SE and the day's SE's own
        entry["information_last_day_rel_se"] = information_rel_se(t.value, t.se, wide_se[:, -1], spread=by_sd)
        null = truth.get((design, NULL_PREFIX + metric))
        if null is not None:
            null_rows = side_rows[(side_rows["design"] == design) & (side_rows["metric"] == NULL_PREFIX + metric)]
            entry["null"] = null_check(null, c, alpha, r, null_rows, pairs=run_null_pairs)
        if is_held:
            what = held_what[(design, metric)]
            # the ratio with its precision (review 11, F5: 0.86 at 60 replicates and 0.83 at 100 said nothing alone)
            estimates_last = wide_se[:, -1]  # held: the replicates' estimates (replicate_arrays 'estimate')
            ses_last = replicate_arrays(g, sorted(c["day"]), "se")[0][:, -1]
            entry["se_sd_ratio"] = se_sd_ratio(estimates_last, ses_last)
            ratio = se_sd_ratio_text(entry["se_sd_ratio"])
            se_is = "its se column is the bootstrap SD" if held[(design, metric)] is not None else \
                "its se column is the delta-method SE"
            n_sd = int(np.isfinite(estimates_last).sum())
            entry["se_measure"] = HELD_SE_MEASURE.format(what=what, se_is=se_is, ratio=ratio,
                                                         precision=sd_precision_text(n_sd, estimates_last))
            if held[(design, metric)] is None:
                entry["power_measure"] = HELD_POWER_WITHHELD.format(what=what)
                entry["power_if_delta_method"] = entry["final_day"]["power"]
                entry["final_day"]["power"] = entry["final_day"]["power_se"] = None
                for key in ("days_to_target_power", "impressions_at_target_power", "users_at_target_power"):
                    entry[key] = None
            else:
                entry["power_measure"] = HELD_POWER_BOOTSTRAP.format(b=boot[design])
        elif by_sd:
            q = entry["se_sd_ratio"] = small[(design, metric)]
            n_sd = int(np.isfinite(wide_se[:, -1]).sum())
            entry["se_measure"] = SMALL_SE_MEASURE.format(
                ratio=f"{q['ratio']:.2f} +- {q['se']:.2f} over {q['replicates']} replicates", k=SMALL_SE_SES,
                precision=sd_precision_text(n_sd, wide_se[:, -1]))
            entry["power_measure"] = SMALL_SE_POWER
        else:
            entry["se_measure"] = "mean reported SE over the replicates"
        no_support = _support_violations(side_rows, design, metric)
        if no_support:
            entry["no_support"] = no_support
        if is_biased_entry(entry):
            _withhold_analytic(entry, _no_support_reason(no_support) if no_support else WITHHELD_REASON)
        if t.baseline:
            # online relative *improvement* (lower abandonment is better) / offline relative gain
            improvement = entry["improvement_sign"] * t.value / t.baseline + 0.0  # (+ 0.0: no -0.0 of a 0 effect)
            entry["shrinkage_vs_offline"] = improvement / offline_rel + 0.0 if offline_rel else None
        aa = table[(table["aa"]) & (table["design"] == design) & (table["metric"] == metric)].sort_values("day")
        if len(aa):
            r_aa = int(aa["replicates"].iloc[-1])
            band = binomial_band(r_aa, alpha, 0.99)
            fpr = float(aa["rejection_rate"].iloc[-1])
            last_aa = rows[(rows["aa"]) & (rows["design"] == design) & (rows["metric"] == metric)
                           & (rows["day"] == aa["day"].iloc[-1])]
            # e.g. balanced interleaving of a list with itself: every comparison is a tie
            degenerate = bool(np.all(last_aa["estimate"] == 0) and np.all(last_aa["se"] == 0))
            entry["aa"] = {
                "false_positive_rate": fpr,
                "replicates": r_aa,
                "binomial_99_band": [band.lo_rate, band.hi_rate],
                "degenerate": degenerate,
                "within_band": None if degenerate else band.contains(round(fpr * r_aa)),
                "by_day": [float(x) for x in aa["rejection_rate"]],
                # what a rate above the band comes from (the report's note): the A/A replicates' mean SE over their
                # estimates' SD (with its jackknife SE) and the users the last day's estimate rests on
                "se_sd_ratio": None if degenerate else se_sd_ratio(last_aa["estimate"], last_aa["se"]),
                "mean_users": float(last_aa["n_users"].mean()) if len(last_aa) else None,
            }
        designs.setdefault(design, {})[metric] = entry
    # sample-size ratios between designs (primary metrics), relative to the first design
    ref_name = next(iter(designs), None)
    comparison = design_ratios(designs, ref_name)
    counterfactual = counterfactual_summary(side_rows, table, truths, config, designs)
    summary = {
        "offline": {
            "metric": offline.metric,
            "A": {"uniform": offline.uniform["A"], "weighted": offline.weighted["A"]},
            "B": {"uniform": offline.uniform["B"], "weighted": offline.weighted["B"]},
            "delta": {"uniform": offline.delta("uniform"), "weighted": offline.delta("weighted")},
            "relative_gain_weighted": offline_rel,
            # one drawn world (review 4, F1): 1 / sum f^2 and the weighted delta's SE over worlds
            "effective_queries": n_eff,
            "delta_world_se": world_se,
            "by_segment": offline.by_segment,
            "conventions": offline.conventions,
            # review 12, F3: every other ranker's offline value (the terminal's 'other rankers' line)
            "others": {r: {"uniform": offline.uniform[r], "weighted": offline.weighted[r]}
                       for r in offline.weighted if r not in ("A", "B")},
        },
        "designs": designs,
        "required_impressions_ratio": {
            "reference": ref_name,
            **comparison,
            "last_day": config.traffic.days,
        },
    }
    if counterfactual:
        summary["counterfactual"] = counterfactual
    utility = [d.name for d in config.designs if d.type == "ab" and d.metric == "utility"]
    if utility:  # what an A/B design's 'utility' row measures
        from simulations.designs.ab import utility_weights

        depth = world.ranked_labels("A").shape[1]
        summary["utility"] = {
            "designs": utility, "offline_metric": offline.metric,
            "rank_weights": [float(w) for w in utility_weights(world, depth)],
            "definition": f"per query sum_j w_j c_j: the clicks c_j weighted by {offline.metric}'s static C/W/L "
                          "weights w_j (its metric user's utility; the counterfactual designs' 'utility')",
        }
    from simulations.sequential import monitoring_summary

    # daily monitoring: peeking's false-positive rate and two always-valid rules (primary metrics)
    summary["monitoring"] = monitoring_summary(rows, designs, alpha)
    # each design's own sequential test (designs[i].analysis; daily or per-batch looks) and its
    # multiple-comparison correction across its metrics / pairs
    from simulations.multiple import multiple_summary
    from simulations.sequential import sequential_summary

    summary["sequential"] = sequential_summary(rows, side_rows, designs, config, refits)
    summary["multiple"] = multiple_summary(rows, designs, config, side_rows)
    # A/B designs: SRM checks of the split (side rows srm:*) and, with a pre-period, CUPED (cuped:*)
    from simulations.cuped import cuped_summary
    from simulations.srm import srm_summary

    srm = srm_summary(side_rows, designs, config)
    if srm:
        summary["srm"] = srm
    cuped = cuped_summary(rows, side_rows, designs, truth, config)
    if cuped:
        summary["cuped"] = cuped
    # review 6, F5: multileaving designs against the rankers' exact online values
    ml = multileaving_summary(rows, designs, truth, world, config)
    if ml:
        summary["multileaving"] = ml
    if config.analysis.assumption_sweep is not None:
        from simulations.designs.counterfactual import assumption_sweep

        summary["assumption_sweep"] = assumption_sweep(config, world)
    return summary, table


def counterfactual_summary(
    side_rows: pd.DataFrame,
    table: pd.DataFrame,
    truths: list[Truth],
    config: Config,
    designs: dict[str, Any],
) -> dict[str, Any]:
    """Per counterfactual design: each estimator's assumption, error on the last day (bias
    with its SE, SD, RMSE, interval coverage), RMSE by log size, support violations, and the
    cost of logging (the logger's observed online metrics against ranker A's exact values)."""
    from onlineeval.estimators import estimator_class

    truth = {(t.design, t.metric): t for t in truths}
    out: dict[str, Any] = {}
    for design in config.designs:
        if design.type != "counterfactual" or design.name not in designs:
            continue
        entries = designs[design.name]
        mine = side_rows[(side_rows["design"] == design.name) & (~side_rows["aa"])]
        last_day = int(mine["day"].max()) if len(mine) else None
        last = mine[mine["day"] == last_day]
        estimators: dict[str, Any] = {}
        for spec in design.estimators:
            e = entries.get(spec.label)
            if e is None:
                continue
            cls = estimator_class(spec.name)
            fd = e["final_day"]
            c = table[(table["design"] == design.name) & (~table["aa"]) & (table["metric"] == spec.label)]
            c = c.sort_values("day")
            support = {}
            for target in design.targets:
                counts = last[last["metric"] == f"support:{spec.label}:{target}"]
                if len(counts):
                    mean_count = float(counts["estimate"].mean())
                    n_impr = float(counts["n_impressions"].mean())
                    support[target] = {"violations_mean": mean_count, "impressions_mean": n_impr,
                                       "share": mean_count / n_impr if n_impr else None}
            estimators[spec.label] = {
                "estimator": spec.name,
                "options": dict(spec.options),
                # the instance's (its options may change it: adaptive IPS's fixed or cross-fitted choice)
                "assumption": _assumption(cls, spec.options),
                "needs": list(cls.needs),
                "self_normalised": bool(cls.self_normalised),
                "bias": e["estimator_bias"],
                "bias_se": e["estimator_bias_se"],
                "sd": fd["sd_estimate"],
                "rmse": float(c["rmse"].iloc[-1]) if len(c) else None,
                "coverage": fd["coverage"],
                "coverage_band": e["coverage_band"],
                "coverage_within_band": e["coverage_within_band"],
                "mean_se": fd["mean_se"],
                # replicates whose estimate is undefined on the last day (a target without weight: its list never
                # drawn); bias, SD and RMSE are over the others. interval_undefined_share: without an interval
                # (these, and estimates without an SE), counted as not rejecting, left out of the coverage
                "undefined_share": 1.0 - fd["estimates"] / fd["replicates"] if fd["replicates"] else None,
                "interval_undefined_share": fd["undefined"],
                "support_violations": support,
                # which measure its sizes and power come from (review 3, F-A), and why its sizes are withheld
                "se_measure": e.get("se_measure"),
                "power_measure": e.get("power_measure"),
                "no_support": bool(e.get("no_support")),
                "bias_check": e.get("bias_check"),
                "biased_in_main_table": is_biased_entry(e),
                "analytic_withheld": e.get("analytic_withheld"),
                "by_day": [
                    {"day": int(r.day), "impressions": float(r.mean_impressions),
                     "mean_estimate": float(r.mean_estimate), "sd": float(r.sd_estimate), "rmse": float(r.rmse),
                     "coverage": float(r.coverage), "undefined": float(r.undefined)}
                    for r in c.itertuples()
                ],
            }
        cost: dict[str, Any] = {}
        for metric in ("clicks_per_query", "abandonment", "reciprocal_rank"):
            g = last[last["metric"] == f"logging:{metric}"]
            ref = truth.get((design.name, f"logging:{metric}"))
            if not len(g) or ref is None:
                continue
            obs = g["estimate"].to_numpy(dtype=np.float64)
            r = obs.size
            mean = float(obs.mean())
            sd = float(obs.std(ddof=1)) if r > 1 else float("nan")
            diff = mean - ref.value
            cost[metric] = {
                "logger_observed": mean,
                "logger_observed_sd": sd,
                "ranker_A_exact": ref.value,
                "cost": diff,
                "cost_se": sd / math.sqrt(r) if r > 1 else float("nan"),
                "relative": diff / ref.value if ref.value else None,
                "improvement_sign": IMPROVEMENT_SIGN.get(metric, 1),
            }
        t = truth.get((design.name, design.estimators[0].label))
        out[design.name] = {
            "metric": reward_name(design.metric, config.offline_metric),  # utility: utility:<offline metric>
            "targets": list(design.targets),
            "logger": design.logger.model_dump() if design.logger is not None else None,
            "true_effect": None if t is None else t.value,
            "last_day": last_day,
            "estimators": estimators,
            "logging_cost": cost,
            "whole_log_refit": "estimators fitting a model on the whole log are computed on the last day"
            + (f" and every {design.refit_days} days, a refit on a log the estimator cannot use undefined"
               if design.refit_days else " only"),
        }
    return out


def _assumption(cls: Any, options: Any) -> str:
    """The assumption the catalogue prints for an estimator of ``cls`` with the config's ``options``: the instance's
    (adaptive IPS's says whether its behaviours are fixed, chosen on the whole log or cross-fitted), the class's where
    the options do not build one (the design, which built it, would have stopped)."""
    try:
        return str(cls(**dict(options)).assumption)
    except (TypeError, ValueError):
        return str(cls.assumption)


def _jsonable(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return x
