"""Writing the results directory and the terminal summary.

``<output>/``:

- ``summary.json``: the answers (see :func:`simulations.analysis.analyse`), the
  conventions every number was computed under, the ground truth, the seed, the package
  version and the effective config;
- ``config.effective.yaml``: the config with every default filled in;
- ``replicates.csv``: one row per replicate x design x day x metric;
- ``curves.csv``: per design x day summary over replicates (power, analytic power, ...);
- ``power_vs_days.png`` and ``offline_vs_online.png``;
- with counterfactual designs ``counterfactual_rmse.png`` (RMSE against log size per
  estimator) and, with ``analysis.assumption_sweep``, ``assumption_sweep.png``.
- ``report.html``: one self-contained page (plots embedded) of all of the above, opens from
  disk (:mod:`simulations.html_report`).

This module holds the conventions, :func:`write_results` and :func:`terminal_summary`; the texts they assemble
live in sibling modules, one job each, re-exported here for the modules and tests that import them from
:mod:`simulations.report`: how numbers are written (:mod:`simulations.report_numbers`), the ground truth's texts
(:mod:`simulations.report_truth`), sample sizes and extrapolation (:mod:`simulations.report_sizes`), the null check
(:mod:`simulations.report_null`), ratios and multileaving (:mod:`simulations.report_ratios`), the counterfactual
and monitoring blocks (:mod:`simulations.report_designs`).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import yaml

from onlineeval import __version__
from simulations.analysis import (EXTRAPOLATION_FLAG, SIZE_BOOTSTRAP, UNSTABLE_FLOOR_RATIO, UNSTABLE_REL_SE,
                                  is_biased_entry)
from simulations.analysis_sizes import FLOOR_MIN_POINTS
from simulations.report_designs import _counterfactual_lines, _coverage_cell, _monitoring_lines, aa_degenerate_note
from simulations.report_null import (
    NULL_CAUTION_LEGEND,
    _null_lines,
    biased_ratio_why,
    null_bias_evidence,
    null_biased_verdict,
    null_detectable_text,
    null_delta_text,
    null_detects_text,
    null_direction,
    null_caution,
    null_caution_keys,
    null_caution_legend,
    null_mean_caution,
    null_rate_note,
    null_unflagged_parts,
    null_unflagged_verdict,
)
from simulations.report_numbers import (
    VALUE_DIGITS,
    count_text,
    days_text,
    percent_text,
    rate_text,
    se_text,
    significant,
    value_text,
)
from simulations.report_multileaving import multileaving_block
from simulations.report_ratios import (
    INDISTINGUISHABLE_SHORT,
    _ratio_lines,
    design_labels,
    multileaving_lines,
    pair_range_text,
    ratio_uncertainty_text,
    size_mark_sets,
)
from simulations.report_sizes import (
    MAX_DAYS_SHOWN,
    OTHER_MEASURE_MARK,
    SHRINK_HEADER,
    WHOLE_POPULATION,
    _extrapolation_lines,
    _measure_lines,
    _other_measure,
    _unstable_lines,
    aa_excess_lines,
    analytic_days_text,
    extrapolated_days_text,
    extrapolated_entries,
    extrapolated_range_note,
    extrapolation_factor_text,
    extrapolation_note,
    sample_size_cells,
)
from simulations.report_truth import (
    TRUTH_PRECISION_NOTE,
    WORLD_SE_WARN,
    _truth_world_lines,
    offline_conventions_text,
    truth_precision_items,
    truth_precision_text,
    truth_world_cell,
    truth_world_items,
    truth_world_note,
    truth_world_text,
    world_sampling_text,
    world_size_factors,
)
from simulations.stream import FINISHED, STREAM_VERSION

if TYPE_CHECKING:
    from simulations.job import SimulationResult


__all__ = ["conventions", "terminal_summary", "write_results"]

#: what a run of one replicate's rates and biases are (the terminal's Online table and report.html's answer legend)
ONE_REPLICATE_NOTE = ("one replicate: power, coverage and false-positive rates below are one outcome each (0 or 1), "
                      "and an estimate's bias against its truth is one replicate's miss, with no SE and not tested "
                      "(the null check's Monte Carlo does not depend on replicates); run replicates >= 2 (the "
                      "bundled configs run 100 to 200) before reading them")


def conventions(result: SimulationResult) -> dict[str, Any]:
    """Every convention the run's numbers depend on, stated explicitly."""
    cfg = result.config
    return {
        "offline": result.world.offline.conventions,
        "user_types": [{"name": n, "share": sh, "click_model": spec} for n, sh, spec in cfg.users.mixture()],
        "seed": cfg.seed,
        "seeding": "replicate r uses SeedSequence(seed).spawn(replicates)[r] (traffic and each design get child "
        "streams keyed by name); the world uses SeedSequence((seed, 0x776F726C64)), the truth "
        "(seed, 0x7472757468, ...)",
        "randomisation_unit": "user (A/B arms by a salted SplitMix64 hash of the user id)",
        "ab_effect": {d.name: _ab_convention(d.test) + (
            f"; utility: per query sum_j w_j c_j, the clicks weighted by {cfg.offline_metric}'s static C/W/L weights"
            if d.metric == "utility" else "") for d in cfg.designs if d.type == "ab"},
        "interleaving_effect": {
            d.name: _interleaving_convention(d.method or "") + (
                "; test: delta_t: the bias-reduced (CR2) SE clustered by user and a two-sided t-test with Bell and "
                "McCaffrey's degrees of freedom (replicates.csv's df) at the estimated intra-user correlation of the "
                "comparisons' credits (one-way ANOVA) instead of the delta method's z"
                if d.test == "delta_t" else "") for d in cfg.designs if d.type == "interleaving"
        },
        "interleaving_note": "impressions without a click are not comparisons; Delta = sum over users of "
        "outcome/2 / number of compared impressions, delta-method SE clustered by user; positive favours the "
        "candidate (B, or the later ranker of a pair). Effects of different methods are on different scales: "
        "compare their sample sizes, not their effects (and only for designs the null check finds unbiased)",
        "sample_size": "se^2(N) = a/N + b fitted to the daily checkpoints (returning users give a floor b); "
        "required N solves se(N) = |true effect| / (z_(1-alpha/2) + z_power); 'not reachable' when b is above that; "
        "for t rows (df_model not null) the t-test's N: the noncentral t's power (rejections with the effect's "
        "sign) at df_model's df along N (the days' median df, linear between them, the last day's held beyond, in "
        "proportion below the first day, each day's at most a later day's) reaches the target",
        "sample_size_uncertainty": f"the (a, b) fit refitted on {SIZE_BOOTSTRAP} bootstrap resamples of the replicates "
        "(each day's mean SE and impressions over the resampled replicates; an interleaving truth drawn from its "
        "Monte Carlo error), seeded by (seed, design, metric): analytic_required_impressions_rel_se = half the "
        "16-84% range of the refits / the value (null when either is not reachable), "
        "analytic_required_impressions_range = the refits' 5% and 95% points (null = not reachable), "
        "variance_floor_to_target = b / T with T the target se^2 (the answer moves by b / (T - b) times any "
        f"relative change of b; null with variance_floor_fitted false: fewer than {FLOOR_MIN_POINTS} days with a "
        "measured SE, b = 0 "
        "assumed, not fitted, and the answer unstable); unstable ('?' in the report): b / T > "
        f"{UNSTABLE_FLOOR_RATIO} or the relative SE "
        f"above {UNSTABLE_REL_SE} (or undefined) or the 95% point not reachable, or 'not reachable' while 10% or "
        f"more of the refits reach it, or the analytic days extrapolated beyond {EXTRAPOLATION_FLAG:g}x the simulated "
        "days (analytic_required_impressions_extrapolated: the answer then depends on the a/N + b model, whose own "
        "error the range leaves out). CUPED's days needed (its own fit, seeded by 'cuped:<metric>') and the sequential "
        "plan's days (the main size's refits; floor ratio b x the information each needs, R b / T for the maximum) are "
        "refitted and flagged by the same rule (cuped.*.required.unstable, sequential.*.decision.planned.uncertainty)",
        "biased_sample_sizes": "an entry found biased (null check, its mean estimate against the exact truth, or an "
        "off-policy estimate's bias check, or its target outside the logger's support: no_support) has "
        "analytic power, analytic days, required impressions, days and users null, the reason in "
        "analytic_withheld and the values computed as if it were unbiased under analytic_if_unbiased "
        "(curves.csv keeps each day's analytic power for every design); the sequential plan of a biased primary "
        "metric is not made (planned_withheld), CUPED's days of a biased adjusted or A/B estimate are under "
        "required_if_unbiased",
        "power": "share of replicates with p < alpha and the estimate's sign equal to the true effect's",
        "alpha": cfg.analysis.alpha,
        "target_power": cfg.analysis.power,
        "truth": "A/B metrics exact from the click models (marginal and first-click probabilities), weighted by "
        "query frequency (test: delta) or as per-user means with users weighted equally (test: welch: each user's "
        "expected ratio is their type's per-query expectation, so the exact value is the share-weighted mean over "
        "types; equal to the delta value in this simulator, whose user types do not depend on activity); "
        "interleaving preferences exact for two-ranker team-draft and balanced designs with prefix credit whose "
        "users' click models are chains (metric users too), independent-click tables or UBMs, by grade "
        "(truth_method: a dynamic programme over the clicks per query, coin pattern and user type; true_effect_se "
        "0), Monte Carlo otherwise (see true_effect_se); 'no detectable effect' when an interleaving truth is "
        "within 2 of its Monte Carlo SEs of 0 (an exact one: exactly 0)",
        "null_check": "interleaving designs: expected Delta under a null user who clicks like the configured users on "
        "ranker A's list for an independently drawn query (clicks independent of relevance, every true effect 0), "
        "exact for two-ranker team-draft and balanced designs with prefix credit under chain, metric or UBM click "
        "models (lists of up to 12 slots: each filled-slot mask's distribution of click patterns mixed over the other "
        "queries and the user types, against every distinct row's outcome; exact: true, '+- SE' exact), Monte "
        "Carlo over analysis.truth_impressions impressions otherwise; rejection rate by day: the share of the "
        "design's null replicates (the design run with the null user on every replicate's traffic, rows "
        "null:<pair>) rejecting at alpha, next to the analytic rate from the null Delta and the design's mean SE; "
        "biased = null Delta more than 4 Monte Carlo SEs from 0 (an exact one: beyond 1e-12 of 0, the sums' "
        "rounding; it detects any bias), or the null replicates' last-day mean "
        "off the exact null truth 0 by a two-sided t-test (R - 1 df) at 0.01 / the run's number of null-checked "
        "pairs (Bonferroni over every pair of every interleaving design in the run, family_pairs: under no bias "
        "at most 1% of runs flag some design; biased_null_replicates, null_mean_test); without null replicates, "
        "also an analytic rejection rate above the 99% band from the smallest Delta within 2 SE. bias_rules names "
        "the rules that fired and the verdict quotes their evidence; detects |bias| >= gives each rule's bias "
        "detected with 80% power ((4 + z_0.8) x the null Delta's SE; nc x the null replicates' mean's SE, nc the "
        "noncentrality at which the noncentral t with R - 1 df exceeds t_crit in 80% of runs, noncentrality_80; "
        "the approximation t_crit + t_0.8,R-1 gives only 72-80% at 9-99 df): detectable_bias_80; the 50%-power "
        "values 4 x SE and t_crit x SE are detectable_bias). A "
        "biased design's sample size and ratios are not sensitivities. se_miscalibrated (bias or SE "
        "miscalibration?): the last day's null rejection count is above alpha in a one-sided exact binomial test "
        "at level 0.01 / the run's number of null-checked pairs (Bonferroni; rate_excess), while neither bias "
        "rule fired: a bias too small for them, or SEs "
        "too small, is in question (the sizes stay, but are sensitivities only if the SEs are right); a direction "
        "is printed only when the null Delta's z is above 2",
        "efficiency": "equal_traffic_efficiency = ((|effect| / mean SE)^2 of the design) / (the reference's) on the "
        "last simulated day: the ratio of the designs' information per impression at the simulated traffic. "
        "ratios = required impressions for the target power / the reference's: larger when the reference's SE "
        "has a floor from returning users (se^2 = a/N + b). Their uncertainty: *_rel_se = "
        "delta-method relative SEs, sqrt(rel_1^2 + rel_2^2) of the two designs' own: information's = "
        "2 sqrt((true_effect_se / effect)^2 + (the day's mean SE's relative SE)^2), a size's = its "
        "analytic_required_impressions_rel_se (refits that draw the truth from its Monte Carlo error); '?' above "
        "uncertain_rel_se; indistinguishable = pairs whose log ratios differ by less than 2 SEs of the "
        "difference (indistinguishable.rule: that SE from both designs' own relative SEs, rel_se_parts, the shared "
        "reference's term left out when both ratios use the same reference metrics). A multileaving design against "
        "a multileaving reference: the median over the pairs both have (its rel SE the median of theirs), every "
        "pair under by_pair with its sizes' extrapolated / unstable flags, which mark ('*' / '?') the median and "
        "the range's ends they come from",
        "shrinkage": "online relative improvement / offline relative gain (frequency-weighted); improvement = "
        "higher reciprocal rank, higher clicks per query, lower abandonment",
        "query_segments": "head / torso / tail = queries making up the first 50% / next 30% / last 20% of traffic",
        "sequential_decisions": "per design (designs[i].analysis.sequential, primary metric): the configured test "
        "at its looks (daily checkpoints, or after every batch of traffic.batch_hours hours with monitoring: batch; "
        "a look schedule picks K equally spaced looks or the listed days); msprt / confidence_sequence with mixing "
        "N(0, tau^2), tau planned from the mean SE at the horizon unless set; obrien_fleming / pocock: Lan-DeMets "
        "spending at the information fractions of the mean SEs by look; decision day = the day of the first "
        "rejecting look, the last day when none; days saved = the fixed horizon's day - the mean decision day at the "
        "simulated length; planned: for the target power, via the boundaries' inflation factor and expected "
        "information at stopping and the variance model se^2 = a/N + b",
        "multiple_comparisons": "per design (designs[i].analysis.multiple): the last day's tests of an A/B design's "
        "metrics or an interleaving design's pairs as one family per replicate; raw decision p < alpha, adjusted: "
        "Holm (family-wise error) or Benjamini-Hochberg (false discovery rate) adjusted p <= alpha; undefined tests "
        "left out of the family; A/A family-wise rate = share of A/A replicates with any rejection; "
        + _near_null_rule(),
        **_counterfactual_conventions(result),
    }


def _near_null_rule() -> str:
    """:data:`simulations.multiple.NEAR_NULL_RULE`, imported when called (as this module's other uses of it)."""
    from simulations.multiple import NEAR_NULL_RULE

    return NEAR_NULL_RULE


def _counterfactual_conventions(result: SimulationResult) -> dict[str, Any]:
    designs = [d for d in result.config.designs if d.type == "counterfactual"]
    if not designs:
        return {}
    from onlineeval.estimators import catalogue
    from simulations.designs.counterfactual.bias_check import CHECK_METHOD

    cat = catalogue()
    return {
        "counterfactual_effect": "per estimator: V(B) - V(A) of the design's metric, the difference of the two "
        "targets' ratio estimates from the same log (sum of per-impression terms over users / sum of "
        "denominators), delta-method SE of the paired difference from per-user influence values; interval "
        "estimate +- t_df(1-alpha/2) x se and two-sided t-test, df Bell and McCaffrey's degrees of freedom of the "
        "difference (from per-user sums of the two targets' weights' products), on every day what onlineeval "
        "estimate prints for that day's log (export_log), so coverage and power are those of the command's "
        "intervals and tests (the daily monitoring's fixed-horizon and peeking rules take the same t, its mSPRT and "
        "O'Brien-Fleming rules each look's t as the normal deviate of the same tail probability); with "
        "bootstrap > 0 the last day's interval is a cluster (user) bootstrap percentile interval (the "
        "same resamples of the users for every estimator; adaptive IPS's data-driven choice is run again in each: "
        "its delta-method interval holds the choice fixed and covers less than the nominal level). With the "
        "bootstrap, an estimator whose delta-method SE holds a data-driven choice fixed (adaptive IPS's behaviours, "
        "a DM whose click model is fitted on the log) takes its last-day SE (the resamples' SD) and p-value "
        "(percentile bootstrap, min(1, 2 min(1 + #(<= 0), 1 + #(>= 0)) / (B + 1))) from the resamples, so its "
        "power@end counts that test; its analytic power and sizes use the replicates' SD of its estimates; without "
        "the bootstrap its simulated power is withheld (summary entries' se_measure, power_measure)",
        "counterfactual_truth": "exact V(B) - V(A) from the click models (as the A/B truth)",
        "counterfactual_cost": "per impression: one logger draw, the shown list's propensities, clicks, and each "
        "incremental estimator's terms for two targets; a checkpoint is O(users) per estimator; estimators that "
        "fit a model on the whole log are recomputed on the last day (and every refit_days days)",
        "counterfactual_aa": "A/A: both targets are the baseline, so the paired difference is identically 0 "
        "(reported as estimate 0, SE 0: cannot reject)",
        "counterfactual_logging_cost": "the logger's online metrics observed on the traffic it served (mean over "
        "replicates on the last day) against ranker A's exact values",
        "counterfactual_bias_check": (f"analysis.bias_check = {result.config.analysis.bias_check:,} impressions: "
                                      + CHECK_METHOD + "; summary entries' bias_check"
                                      if result.config.analysis.bias_check else
                                      "none (analysis.bias_check = 0): the replicates' test alone finds biases"),
        "estimator_catalogue": {
            spec.name: cat.get(spec.name, {}) for d in designs for spec in d.estimators
        },
    }


def _ab_convention(test: str | None) -> str:
    """What an A/B design's estimate is, by its ``test``."""
    if test == "welch":
        return ("difference B - A of the arms' means of per-user ratios (each user's sum / their queries; users "
                "weighted equally), Welch's unequal-variance t-test, two-sided (with CUPED, its cuped: rows: a "
                "Welch-type t carrying the coefficient's error, onlineeval.stats.cuped_welch)")
    if test == "delta_t":
        return ("difference B - A of ratio metrics (sum over users / sum over users; queries weighted equally), "
                "bias-reduced (CR2) SE over users and a two-sided t-test with Bell and McCaffrey's degrees of "
                "freedom (replicates.csv's df) at the estimated intra-user correlation of the per-query values "
                "(one-way ANOVA, the arms as groups); with CUPED, its cuped: rows: the same for the regression on "
                "the arm and the users' pre-period ratio and activity (onlineeval.stats.cuped_ratio_cr2)")
    return ("difference B - A of ratio metrics (sum over users / sum over users; queries weighted equally), "
            "delta-method SE over users, two-sided z-test")


def _interleaving_convention(method: str) -> str:
    """What one impression contributes to Delta for ``method``."""
    if method.startswith("probabilistic"):
        return ("expected outcome over the hidden assignment of slots to rankers given the shown list and the "
                "clicks (Hofmann et al. 2011; Schuth et al. 2015), in [-1, 1]")
    if method == "optimized":
        return ("credit difference normalised by its largest possible value for the input lists, in [-1, 1] "
                "(the quantity Radlinski & Craswell 2013's LP makes unbiased)")
    return "win / loss / tie of the credited clicks: +1 / -1 / 0 (Delta = (wins + ties/2)/N - 1/2)"


def write_results(result: SimulationResult, fingerprint: str) -> None:
    out = result.output
    if out is None:
        raise ValueError("write_results needs a result with an output directory")
    out.mkdir(parents=True, exist_ok=True)
    effective = result.config.effective()
    (out / "config.effective.yaml").write_text(
        f"# onlineeval {__version__}, effective config (defaults filled in)\n"
        + yaml.safe_dump(effective, sort_keys=False),
        encoding="utf-8",
    )
    result.rows.to_csv(out / "replicates.csv", index=False)
    result.curves.to_csv(out / "curves.csv", index=False)
    summary = {
        "onlineeval_version": __version__,
        "stream_version": STREAM_VERSION,  # the version of the numbers a seed gives (part of the fingerprint)
        "config_fingerprint": fingerprint,
        "conventions": conventions(result),
        "world": {
            "queries": result.world.n_queries,
            "depth": result.world.depth,
            "grades": result.world.n_grades,
            **{k: v for k, v in result.world.notes.items()},
        },
        "truth": [asdict(t) for t in result.truths],
        **result.summary,
        "config": effective,
    }
    (out / "summary.json").write_text(json.dumps(_clean(summary), indent=2), encoding="utf-8")
    from simulations.plots import figures, save_png

    for name, fig in figures(result).items():
        save_png(fig, out / f"{name}.png", dpi=110)
    from simulations.html_report import write_simulate_report

    write_simulate_report(out)  # report.html: a self-contained view of the files above


def _clean(x: Any) -> Any:
    """JSON-safe: non-finite floats become null."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if hasattr(x, "item") and callable(x.item):
        return _clean(x.item())
    return x


def terminal_summary(result: SimulationResult, source: str = "") -> str:
    cfg = result.config
    s = result.summary
    off = s["offline"]
    lines = [
        f"onlineeval {__version__} simulate {source}".rstrip(),
        f"  seed {cfg.seed}, {cfg.replicates} replicate{'' if cfg.replicates == 1 else 's'} x {cfg.traffic.days} "
        f"day{'' if cfg.traffic.days == 1 else 's'} x "
        f"~{cfg.traffic.queries_per_day:,} queries/day, {cfg.users.population:,} users",
        *[f"  users{'' if n == 'all' else ' ' + n} ({sh:.0%}): click model {json.dumps(spec)}"
          for n, sh, spec in cfg.users.mixture()],
        "",
        f"Offline {off['metric']}: A {value_text(off['A']['weighted'])}  B {value_text(off['B']['weighted'])}  "
        f"delta {value_text(off['delta']['weighted'], True)} ({percent_text(off['relative_gain_weighted'])}) "
        f"frequency-weighted; uniform over queries: delta {value_text(off['delta']['uniform'], True)}",
    ]
    world_note = world_sampling_text(off, result.world.notes.get("collection") != "trec")
    if world_note:
        lines += [f"  {world_note[0]}", f"    {world_note[1]}"]
    offline_conv = offline_conventions_text(off["metric"], result.world.depth)
    if offline_conv:
        lines.append(f"  {off['metric']}: {offline_conv}")
    others = [r for r in result.world.offline.weighted if r not in ("A", "B")]
    if others:
        w, u = result.world.offline.weighted, result.world.offline.uniform
        lines.append("  other rankers: " + ", ".join(
            f"{r} {value_text(w[r])} (uniform {value_text(u[r])})" for r in others))
    notes = result.world.notes
    if notes.get("collection") == "trec":
        for r in [n for n in cfg.ranker_names() if f"shown_{n}" in notes]:  # A, B and rankers.others (multileaving)
            shown = int(notes.get(f"shown_{r}", 0))
            unj = int(notes.get(f"unjudged_shown_{r}", 0))
            lines.append(
                f"  run {r}: {unj} of {shown} shown documents unjudged ({unj / max(shown, 1):.1%}, counted as "
                f"non-relevant); {notes.get(f'queries_missing_from_run_{r}', 0)} judged queries missing from the "
                f"run (shown an empty list); {notes.get(f'queries_short_in_run_{r}', 0)} judged queries ranked to "
                f"fewer than {result.world.depth} documents (a shorter page there); "
                f"{notes.get(f'queries_only_in_run_{r}', 0)} run queries without judgments (left out); "
                f"ties: {notes.get('ties')}"
            )
        if "frequencies_queries_counted" in notes:
            missing = int(notes["frequencies_queries_without_count"])
            lines.append(
                f"  query frequencies (collection.frequencies): {notes['frequencies_queries_counted']} judged queries "
                f"counted, {missing} without a positive count (never drawn{'!' if missing else ''}), "
                f"{notes['frequencies_lines_not_judged']} lines for queries not judged (left out)"
            )
    seg_truth = s.get("truth_by_segment", {})
    # the online metric of the segments' line: the first A/B design's, else the first counterfactual design's (a
    # config of counterfactual designs alone printed reciprocal_rank beside a design of clicks_per_query)
    known = {m for v in seg_truth.values() for m in v}
    ab_metric = next((d.metric for kind in ("ab", "counterfactual") for d in cfg.designs
                      if d.type == kind and d.metric in known), "reciprocal_rank")
    for seg, v in off["by_segment"].items():
        online = seg_truth.get(seg, {}).get(ab_metric)
        tail = "" if online is None else (
            f"; online {ab_metric} {value_text(online['delta'], True)} ("
            + (percent_text(online['delta'] / online['A']) if online["A"] else f"no relative change: A's {ab_metric} "
               "is 0 here") + ", exact)")
        n_q = round(v["queries"])
        lines.append(f"  {seg:5s} ({v['traffic_share']:.0%} of traffic, {n_q} {'query' if n_q == 1 else 'queries'}): "
                     f"delta {value_text(v['B'] - v['A'], True)}"
                     + (f" ({percent_text((v['B'] - v['A']) / v['A'])})" if v["A"] else
                        f" (no relative change: A's {off['metric']} is 0 here)") + tail)
    lines += ["", f"Online (alpha {cfg.analysis.alpha}, target power {cfg.analysis.power:.0%}):"]
    if cfg.replicates < 2:
        lines.append(f"  ({ONE_REPLICATE_NOTE})")
    header = (f"  {'design':14s} {'metric':18s} {'true effect':>13s} {'rel':>7s} {SHRINK_HEADER:>16s} "
              f"{'power@end':>9s} {'analytic':>8s} {'days->pwr':>9s} {'impr. needed':>19s} {'users needed':>16s} "
              f"{'A/A FPR':>8s} {'null Delta':>10s}")
    lines.append(header)
    population = cfg.users.population
    for design, metrics in s["designs"].items():
        for metric, e in metrics.items():
            fd = e["final_day"]
            rel = e.get("relative_effect")
            shrink = e.get("shrinkage_vs_offline")
            aa = e.get("aa")
            if aa is None:
                fpr = "-"
            elif aa["degenerate"]:
                fpr = "0 (ties)"
            else:
                fpr = f"{aa['false_positive_rate']:.3f}{'' if aa['within_band'] else '!'}"
            null = e.get("null")
            null_s = "-" if null is None else null_delta_text(null)
            cells = sample_size_cells(e, population)
            power, analytic = rate_text(fd["power"]), cells["analytic"]
            if _other_measure(e):  # review 3, F-A: its power and sizes come from another measure, named below
                power += OTHER_MEASURE_MARK
                analytic += OTHER_MEASURE_MARK if analytic != "-" else ""
            lines.append(
                f"  {design if e['primary'] else '':14s} {metric:18s} {value_text(e['true_effect'], True):>13s} "
                f"{percent_text(rel):>7s} "
                f"{value_text(shrink):>16s} {power:>9s} {analytic:>8s} {cells['days']:>9s} "
                f"{cells['impressions']:>19s} {cells['users']:>16s} {fpr:>8s} {null_s:>10s}"
            )
    for design, c in (s.get("counterfactual") or {}).items():
        lines.append(f"  {design}: each row an off-policy estimator of {c.get('metric')} (V(B) - V(A) from the "
                     "logger's log; the counterfactual section below)")
    utility = s.get("utility")
    if utility:
        weights = ", ".join(f"{w:.3g}" for w in utility["rank_weights"])
        lines.append(f"  utility ({', '.join(utility['designs'])}): {utility['definition']}; w = {weights}")
    lines += _truth_world_lines(s, result.world.notes.get("collection") != "trec")
    lines += _unstable_lines(s, population)
    lines += _extrapolation_lines(s, cfg.traffic.days)
    lines += _measure_lines(s)
    delta_ab = {d.name for d in cfg.designs if d.type in ("ab", "interleaving") and d.test in (None, "delta")}
    lines += aa_excess_lines(s, delta_ab)
    undefined = [f"{d}/{m} ({e['final_day']['undefined']:.0%})" for d, ms in s["designs"].items()
                 for m, e in ms.items() if e["final_day"]["undefined"] > 0]
    if undefined:
        lines.append("  undefined on the last day in some replicates (too few users or comparisons, or an off-policy "
                     "difference with no spread measured; counted as not rejecting): " + ", ".join(undefined))
    lines += _null_lines(result)
    ref_design = next((d for d in cfg.designs if d.name == s["required_impressions_ratio"]["reference"]), None)
    unstable, far = size_mark_sets(s)
    lines += _ratio_lines(s["required_impressions_ratio"], cfg.analysis.power,
                          ref_design is not None and ref_design.type == "ab", unstable, far, null_caution_keys(s),
                          design_labels(s))
    lines += multileaving_block(s)  # review 12, F3: with the rankers' offline values and gains
    lines += [
        "",
        "  true effect: population value (B - A; interleaving: Delta_AB, + favours B; methods differ in scale,",
        f"  see summary.json conventions); rel: relative to A; {SHRINK_HEADER}: online relative *improvement*",
        "  (lower abandonment counts as better) / offline relative gain weighted by query frequency (the Offline",
        "  line's first delta), unstable when the metric's base rate is tiny; the decomposition's 'total vs",
        "  uniform W0' divides by the gain uniform over queries instead, a different number;",
        "  power: share of replicates rejecting at alpha with the right sign, analytic: the same from the true",
        f"  effect and the mean SE ('{OTHER_MEASURE_MARK}': power, analytic power and sizes from another measure, "
        "named under the table);",
        "  days->pwr: first day from which simulated power stays >= target (* analytic, from",
        "  se^2 = a/N + b fitted to the days, beyond the simulated days; '> 1 year': more than 365 days; never:",
        "  the SE floor of this user population is above the target); impr./users needed: analytic for the",
        "  target power, for A/B designs totals over both arms (not per arm; interleaving has no arms: every",
        "  impression and user counts; users: expected distinct users among that many impressions; 'whole",
        f"  population': at least {WHOLE_POPULATION:.0%} of the users); '?' = unstable: the fitted floor b is above "
        f"{UNSTABLE_FLOOR_RATIO:.0%} of the target se^2, or",
        f"  the size's relative SE (refits on bootstrap resamples of the replicates) above {UNSTABLE_REL_SE:.0%}, "
        "or the refits'",
        "  90% range reaches 'not reachable' (or, for 'never', 10% of them reach the target), or the analytic days",
        f"  are extrapolated beyond {EXTRAPOLATION_FLAG:g}x the simulated days (model-dependent): ranges below the "
        "table, which leave",
        "  out the a/N + b model's own error;",
        "  'no detectable effect': the interleaving truth is 0 (exact) or within 2 Monte Carlo SEs of 0; '!' = A/A "
        "FPR",
        "  outside its 99% band; '0 (ties)': with B replaced by A every comparison of this design is a tie, so",
        "  A/A cannot reject; null Delta: expected Delta when clicks do not depend on relevance (every true",
        "  effect 0; exact or Monte Carlo, as the null check says); 'biased' = the design is biased on these",
        "  rankers (null check) or its estimate's mean over replicates misses the exact truth beyond chance (a",
        "  t-test at the level of 4 normal SEs, p < 6.3e-5, on the replicates' SD and the truth's Monte Carlo",
        "  error; an off-policy estimate also by its bias check, one direct log against the exact truth, the",
        "  counterfactual section's 'check'): its power measures its bias as much as the effect, so its analytic",
        "  power, days and sizes are not given ('-'; summary.json keeps them under analytic_if_unbiased); 'no",
        "  support': biased the same way because an off-policy estimate's target leaves the logger's support",
        "  (named under the table).",
    ]
    if any(null_caution(e) and not is_biased_entry(e) for ms in s["designs"].values() for e in ms.values()):
        import textwrap

        lines += textwrap.wrap(null_caution_legend(s), width=112, initial_indent="  ", subsequent_indent="  ")
    from simulations.decomposition import decomposition_lines

    lines += decomposition_lines(s)
    lines += _monitoring_lines(result)
    from simulations.multiple import multiple_lines
    from simulations.sequential import sequential_lines

    lines += sequential_lines(result.summary, cfg.traffic.batch_hours)
    lines += multiple_lines(result.summary)
    from simulations.cuped import cuped_lines
    from simulations.srm import srm_lines

    lines += srm_lines(result.summary)
    lines += cuped_lines(result.summary)
    lines += _counterfactual_lines(result)
    if result.output is not None:
        lines.append(f"  results in {result.output}: " + ", ".join(written_files(result)))
    return "\n".join(lines)


def written_files(result: SimulationResult) -> list[str]:
    """The files :func:`write_results` writes into the results directory, in order, and the finished replicates'
    records the run keeps for a later run with another number of replicates (:data:`simulations.job.FINISHED`,
    when it is there)."""
    files = ["summary.json", "config.effective.yaml", "replicates.csv", "curves.csv", "power_vs_days.png",
             "offline_vs_online.png"]
    if result.summary.get("counterfactual"):
        files.append("counterfactual_rmse.png")
    if result.summary.get("assumption_sweep"):
        files.append("assumption_sweep.png")
    files.append("report.html")
    if result.output is not None and (result.output / FINISHED).is_file():
        files.append(FINISHED)
    return files
