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
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import yaml

from onlineeval import __version__
from simulations.analysis import (
    EXTRAPOLATION_FLAG,
    NULL_BIAS_SE,
    RATIO_UNCERTAIN_REL_SE,
    SIZE_BOOTSTRAP,
    UNSTABLE_FLOOR_RATIO,
    UNSTABLE_REL_SE,
    is_biased_entry,
    spread_text,
)
from simulations.stream import FINISHED, STREAM_VERSION

if TYPE_CHECKING:
    from simulations.job import SimulationResult

__all__ = ["conventions", "terminal_summary", "write_results"]


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
        "ab_effect": {d.name: _ab_convention(d.test) for d in cfg.designs if d.type == "ab"},
        "interleaving_effect": {
            d.name: _interleaving_convention(d.method or "") for d in cfg.designs if d.type == "interleaving"
        },
        "interleaving_note": "impressions without a click are not comparisons; Delta = sum over users of "
        "outcome/2 / number of compared impressions, delta-method SE clustered by user; positive favours the "
        "candidate (B, or the later ranker of a pair). Effects of different methods are on different scales: "
        "compare their sample sizes, not their effects (and only for designs the null check finds unbiased)",
        "sample_size": "se^2(N) = a/N + b fitted to the daily checkpoints (returning users give a floor b); "
        "required N solves se(N) = |true effect| / (z_(1-alpha/2) + z_power); 'not reachable' when b is above that",
        "sample_size_uncertainty": f"the (a, b) fit refitted on {SIZE_BOOTSTRAP} bootstrap resamples of the replicates "
        "(each day's mean SE and impressions over the resampled replicates; an interleaving truth drawn from its "
        "Monte Carlo error), seeded by (seed, design, metric): analytic_required_impressions_rel_se = half the "
        "16-84% range of the refits / the value (null when either is not reachable), "
        "analytic_required_impressions_range = the refits' 5% and 95% points (null = not reachable), "
        "variance_floor_to_target = b / T with T the target se^2 (the answer moves by b / (T - b) times any "
        f"relative change of b); unstable ('?' in the report): b / T > {UNSTABLE_FLOOR_RATIO} or the relative SE "
        f"above {UNSTABLE_REL_SE} (or undefined) or the 95% point not reachable, or 'not reachable' while 10% or "
        f"more of the refits reach it, or the analytic days extrapolated beyond {EXTRAPOLATION_FLAG:g}x the simulated "
        "days (analytic_required_impressions_extrapolated: the answer then depends on the a/N + b model, whose own "
        "error the range leaves out). CUPED's days needed (its own fit, seeded by 'cuped:<metric>') and the sequential "
        "plan's days (the main size's refits; floor ratio b x the information each needs, R b / T for the maximum) are "
        "refitted and flagged by the same rule (cuped.*.required.unstable, sequential.*.decision.planned.uncertainty)",
        "biased_sample_sizes": "an entry found biased (null check, or its mean estimate against the exact truth) has "
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
        "interleaving preferences Monte Carlo (see true_effect_se); 'no detectable effect' when an interleaving "
        "truth is within 2 of its Monte Carlo SEs of 0",
        "null_check": "interleaving designs: expected Delta under a null user who clicks like the configured users on "
        "ranker A's list for an independently drawn query (clicks independent of relevance, every true effect 0), "
        "Monte Carlo over analysis.truth_impressions impressions; rejection rate by day: the share of the "
        "design's null replicates (the design run with the null user on every replicate's traffic, rows "
        "null:<pair>) rejecting at alpha, next to the analytic rate from the null Delta and the design's mean SE; "
        "biased = null Delta more than 4 Monte Carlo SEs from 0, or the null replicates' last-day mean "
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
        "has a floor from returning users (se^2 = a/N + b). Their uncertainty (review 6, F1): *_rel_se = "
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

    cat = catalogue()
    return {
        "counterfactual_effect": "per estimator: V(B) - V(A) of the design's metric, the difference of the two "
        "targets' ratio estimates from the same log (sum of per-impression terms over users / sum of "
        "denominators), delta-method SE of the paired difference from per-user influence values, two-sided "
        "z-test; with bootstrap > 0 the last day's interval is a cluster (user) bootstrap percentile interval (the "
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
        "estimator_catalogue": {
            spec.name: cat.get(spec.name, {}) for d in designs for spec in d.estimators
        },
    }


def _ab_convention(test: str | None) -> str:
    """What an A/B design's estimate is, by its ``test``."""
    if test == "welch":
        return ("difference B - A of the arms' means of per-user ratios (each user's sum / their queries; users "
                "weighted equally), Welch's unequal-variance t-test, two-sided")
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


def _fmt(x: float | None, spec: str = ".4f", signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return format(x, ("+" if signed else "") + spec)


# ------------------------------------------------------------------------ how each kind of number is written
# One rule per kind of number, for the terminal summary, report.html and the blocks both print (sequential, CUPED):
# - metric values and their differences (offline and online values, effects, deltas, biases, null Deltas, costs of
#   logging) and ratios of them (shrinkage, efficiency, size ratios, inflation factors): VALUE_DIGITS significant
#   figures, trailing zeros kept (+0.0220 next to +0.0228, never +0.022): value_text;
# - the standard error, SD or RMSE of such a value: SE_DIGITS significant figures: se_text;
# - counts (impressions, users, queries): whole numbers with thousands separators: count_text;
# - rates and shares over replicates or users (power, false-positive and rejection rates, coverage, variance
#   reductions): 3 decimals: rate_text;
# - relative changes (B over A): percentages to 0.1%: percent_text (composition shares of traffic or user types:
#   whole percentages);
# - days: simulated checkpoints whole, analytic and planned days 1 decimal: days_text (and analytic_days_text).

#: significant figures of metric values, effects, deltas, biases and ratios
VALUE_DIGITS = 3
#: significant figures of a standard error, SD or RMSE
SE_DIGITS = 2


def _number(x: Any) -> bool:
    return x is not None and not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def significant(x: Any, digits: int, signed: bool = False) -> str:
    """``x`` to ``digits`` significant figures with its trailing zeros (``0.0220``, ``1.50e-05``, ``250``);
    ``-`` when missing or not finite."""
    if not _number(x):
        return "-"
    text = format(float(x), ("+" if signed else "") + f"#.{digits}g")
    return text[:-1] if text.endswith(".") else text.replace(".e", "e")


def value_text(x: Any, signed: bool = False) -> str:
    """A metric value, an effect, a delta, a bias or a ratio: :data:`VALUE_DIGITS` significant figures."""
    return significant(x, VALUE_DIGITS, signed)


def se_text(x: Any) -> str:
    """The standard error, SD or RMSE of a value: :data:`SE_DIGITS` significant figures."""
    return significant(x, SE_DIGITS)


def rate_text(x: Any, signed: bool = False) -> str:
    """A rate or share over replicates or users (power, false-positive rate, coverage): 3 decimals."""
    return format(float(x), ("+" if signed else "") + ".3f") if _number(x) else "-"


#: how the Offline line names a DCG-family metric's gain (review 4, F4: trec_eval's nDCG uses linear gains)
GAIN_TEXT = {"exponential": "gain 2^g - 1 (exponential; trec_eval's nDCG uses linear g)",
             "linear": "gain g (linear, as trec_eval)"}


#: the world-sampling note's '!': the frequency-weighted offline delta's SE over worlds above this share of |delta|
WORLD_SE_WARN = 0.25


def world_sampling_text(off: dict[str, Any], synthetic: bool = True) -> tuple[str, str] | None:
    """The Offline line's one-drawn-world note (review 4, F1) as (first half, second half); ``None`` when the
    summary has no ``effective_queries`` / ``delta_world_se``. '!' when the SE is above :data:`WORLD_SE_WARN`
    of |delta| (or the delta is 0 and the SE is not). A trec collection's queries are not drawn from the seed:
    its note speaks of the query sample instead."""
    n_eff, se = off.get("effective_queries"), off.get("delta_world_se")
    delta = (off.get("delta") or {}).get("weighted")
    if not (_number(n_eff) and _number(se) and _number(delta)):
        return None
    if delta:
        share = abs(se) / abs(delta)
        rel = f"{100.0 * share:.0f}% of it" + (f" > {WORLD_SE_WARN:.0%}!" if share > WORLD_SE_WARN else "")
    else:
        rel = "the delta is 0" + ("!" if se > 0 else "")
    if not synthetic:
        return (f"one query sample: {float(n_eff):,.1f} effective queries (1 / sum f^2); the frequency-weighted "
                f"delta's SE over query samples {se_text(se)} ({rel}):",
                "every number below is conditional on these queries and judgments")
    return (f"one drawn world: {float(n_eff):,.1f} effective queries (1 / sum f^2); the frequency-weighted delta's SE "
            f"over worlds {se_text(se)} ({rel}):",
            "every number below is conditional on this world; another seed draws another world")


def world_size_factors(effect: Any, se: Any) -> tuple[float, float] | None:
    """How the analytic sizes move if the true effect were one SE over worlds larger or smaller in size: they scale
    with 1 / effect^2, so ``(1 / (1 + r)^2, 1 / (1 - r)^2)`` with ``r = se / |effect|`` (the second infinite when
    ``r >= 1``: the effect's sign is not settled across worlds); ``None`` without both numbers or for a 0 effect."""
    if not (_number(effect) and _number(se)) or not effect:
        return None
    r = abs(float(se)) / abs(float(effect))
    return 1.0 / (1.0 + r) ** 2, (1.0 / (1.0 - r) ** 2 if r < 1.0 else math.inf)


def truth_world_text(effect: Any, se: Any, with_value: bool = True) -> str | None:
    """'+0.00275 +- 0.0059 (213% > 25%!; sizes x0.1 to unbounded)': an exact truth with its SE over drawn worlds
    (review 4, F1), '!' above :data:`WORLD_SE_WARN` of |effect| as the Offline line's note; the sizes' factors at
    one SE either way (:func:`world_size_factors`); ``with_value=False`` leaves out the effect ('+- 0.0059 (...)').
    ``None`` when the summary has no SE for it."""
    if not (_number(effect) and _number(se)):
        return None
    if effect:
        share = abs(float(se)) / abs(float(effect))
        rel = f"{100.0 * share:.0f}%" + (f" > {WORLD_SE_WARN:.0%}!" if share > WORLD_SE_WARN else "")
    else:
        rel = "the effect is 0" + ("!" if se > 0 else "")
    factors = world_size_factors(effect, se)
    if factors is not None:
        hi = "unbounded" if math.isinf(factors[1]) else f"x{factors[1]:.2g}"
        rel += f"; sizes x{factors[0]:.2g} to {hi}"
    return (f"{value_text(effect, True)} " if with_value else "") + f"+- {se_text(se)} ({rel})"


def truth_world_cell(effect: Any, se: Any) -> str | None:
    """report.html's short form of :func:`truth_world_text` under the true effect: '+- 0.0059 (213%!)'."""
    if not (_number(effect) and _number(se)):
        return None
    if not effect:
        return f"+- {se_text(se)}" + ("!" if se > 0 else "")
    share = abs(float(se)) / abs(float(effect))
    return f"+- {se_text(se)} ({100.0 * share:.0f}%{'!' if share > WORLD_SE_WARN else ''})"


#: what the true effects' SE over worlds means (terminal under the main table, report.html legend)
TRUTH_WORLD_NOTE = (
    "SE over independently drawn worlds of the exact truths (their per-query B - A weighted by query frequency, as "
    f"the Offline delta's; '!' above {WORLD_SE_WARN:.0%} of the effect); every size above scales with 1 / effect^2, "
    "so 'sizes xL to xH' is how far impressions, users and days move if the effect were one such SE larger or "
    "smaller in size ('unbounded': its sign is not settled across worlds). Interleaving truths are Monte Carlo "
    "over impressions and have none (the same world); see a sweep over seed for the spread across worlds")

#: :data:`TRUTH_WORLD_NOTE` for a trec collection (review 7, F3): its queries are not drawn from the seed, so the SE
#: is over query samples and a seed sweep cannot show it
TRUTH_QUERY_SAMPLE_NOTE = (
    "SE over query samples of the exact truths (this collection's queries regarded as a sample from its query "
    "population: their per-query B - A weighted by query frequency, as the Offline delta's; '!' above "
    f"{WORLD_SE_WARN:.0%} of the effect); every size above scales with 1 / effect^2, so 'sizes xL to xH' is how far "
    "impressions, users and days move if the effect were one such SE larger or smaller in size ('unbounded': its "
    "sign is not settled across query samples). Interleaving truths are Monte Carlo over impressions and have none; "
    "every number is conditional on these queries and judgments, which a seed does not redraw (it only re-permutes "
    "the query popularity, or nothing with collection.frequencies)")


def truth_world_note(synthetic: bool = True) -> tuple[str, str]:
    """(what the SE is over, its note): ('worlds', :data:`TRUTH_WORLD_NOTE`) for a synthetic collection,
    ('query samples', :data:`TRUTH_QUERY_SAMPLE_NOTE`) for a trec one (review 7, F3)."""
    return ("worlds", TRUTH_WORLD_NOTE) if synthetic else ("query samples", TRUTH_QUERY_SAMPLE_NOTE)


def truth_world_items(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(design, metric, :func:`truth_world_text`) of every entry with an SE over worlds; a design's metrics with the
    same text (a counterfactual design's estimators share one truth) are one item, 'snips, ips, rips'."""
    merged: dict[tuple[str, str], list[str]] = {}
    for design, metrics in s.get("designs", {}).items():
        for metric, e in metrics.items():
            text = truth_world_text(e.get("true_effect"), e.get("true_effect_world_se"))
            if text is not None:
                merged.setdefault((design, text), []).append(metric)
    return [(design, ", ".join(names), text) for (design, text), names in merged.items()]


def truth_precision_text(e: dict[str, Any]) -> str | None:
    """A Monte Carlo truth whose 4 SE exceed 10% of its effect (review 4, F3; summary.json ``truth_precision``):
    '+0.00626 +- 0.00045 (4 SE = 29% of it > 10%!: set analysis.truth_impressions to about 1,700,000, now 200,000;
    its SE scales as 1 / sqrt(n))'; ``None`` when it is precise enough or not Monte Carlo."""
    p = e.get("truth_precision")
    if not isinstance(p, dict) or p.get("adequate") or not _number(p.get("four_se_share")):
        return None
    from simulations.analysis import TRUTH_MC_SHARE

    return (f"{value_text(e.get('true_effect'), True)} +- {se_text(e.get('true_effect_se'))} (4 SE = "
            f"{100.0 * p['four_se_share']:.0f}% of it > {TRUTH_MC_SHARE:.0%}!: set {p['key']} to about "
            f"{count_text(p['suggested_truth_impressions'])}, now {count_text(p['truth_impressions'])}; its SE scales "
            "as 1 / sqrt(n))")


def truth_precision_items(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(design, metric, :func:`truth_precision_text`) of every Monte Carlo truth not precise enough."""
    return [(d, m, text) for d, ms in s.get("designs", {}).items() for m, e in ms.items()
            if (text := truth_precision_text(e)) is not None]


#: why a Monte Carlo truth's precision matters (terminal and report.html)
TRUTH_PRECISION_NOTE = (
    "the truth's Monte Carlo error enters the sizes (they scale with 1 / effect^2), the bias test and the null "
    "check, whose 4-SE rule flags a bias only beyond 4 SE of its own Monte Carlo over as many impressions")


def _truth_world_lines(s: dict[str, Any], synthetic: bool = True) -> list[str]:
    """Under the main table: each exact truth with its SE over drawn worlds (review 4, F1), over query samples for
    a trec collection (``synthetic=False``; review 7, F3)."""
    import textwrap

    items = [f"{d}/{m} {text}" for d, m, text in truth_world_items(s)]
    lines = []
    if items:
        over, legend = truth_world_note(synthetic)
        lines += textwrap.wrap(f"true effect over {over}: " + "; ".join(items) + " (" + legend + ")",
                               width=112, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    imprecise = [f"{d}/{m} {text}" for d, m, text in truth_precision_items(s)]
    if imprecise:  # review 4, F3
        lines += textwrap.wrap("true effect's Monte Carlo: " + "; ".join(imprecise) + " (" + TRUTH_PRECISION_NOTE
                               + ")", width=112, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    return lines


def offline_conventions_text(metric_name: str, depth: Any = None) -> str:
    """The offline metric's gain (DCG-family metrics: its own ``gain`` or the default of
    :class:`onlineeval.conventions.Conventions`) and cut-off (its ``@k``, else the shown lists' ``depth``), as the
    Offline line names them; '' when the metric cannot be parsed."""
    from onlineeval.conventions import Conventions, Gain
    from onlineeval.metrics import parse_metric

    try:
        m = parse_metric(str(metric_name))
    except Exception:  # noqa: BLE001 - an old summary's metric name: the line simply goes without it
        return ""
    parts = []
    if hasattr(m, "gain"):
        gain = Conventions().gain if m.gain is None else Gain.parse(m.gain)
        parts.append(GAIN_TEXT.get(str(gain), f"gain table {gain}"))
    if m.k is not None:
        parts.append(f"cut-off {m.k}")
    elif depth is not None:
        parts.append(f"no cut-off: the shown lists' {depth} documents")
    return ", ".join(parts)


def percent_text(x: Any, signed: bool = True) -> str:
    """A relative change given as a fraction (0.047) as a percentage to 0.1% (``+4.7%``)."""
    return format(100.0 * float(x), ("+" if signed else "") + ".1f") + "%" if _number(x) else "-"


def count_text(x: Any) -> str:
    """A count (impressions, users) as ``1,234``; ``not reachable`` when missing or infinite."""
    return f"{float(x):,.0f}" if _number(x) else "not reachable"


def days_text(x: Any) -> str:
    """Analytic or planned days (or a mean day of decision): 1 decimal; ``-`` when missing or infinite."""
    return f"{float(x):.1f}" if _number(x) else "-"


_count = count_text


#: the main table's shrinkage column: online relative improvement / the *frequency-weighted* offline gain (the
#: decomposition's total divides by the uniform one: review 2026-12-02, 3.4)
SHRINK_HEADER = "shrink(freq-wtd)"
#: users needed at or above this share of the population print as 'whole population'
WHOLE_POPULATION = 0.99
#: analytic days beyond this print as '> 1 year'
MAX_DAYS_SHOWN = 365


def sample_size_cells(e: dict[str, Any], population: int) -> dict[str, str]:
    """The main table's analytic power, days->pwr, impressions and users needed of one summary entry
    (shared by the terminal and report.html): 'biased' ('no support' when its target leaves the logger's support)
    / '-' for a biased entry, 'no detectable effect',
    '> 1 year' beyond :data:`MAX_DAYS_SHOWN` analytic days, 'whole population' from
    :data:`WHOLE_POPULATION` of the users, and '?' after an unstable analytic size."""
    fd = e["final_day"]
    if is_biased_entry(e):
        # an off-policy estimate whose target leaves the logger's support says so (review 3, F-E)
        return {"analytic": "-", "days": "-", "impressions": "no support" if e.get("no_support") else "biased",
                "users": "-"}
    analytic = rate_text(fd.get("analytic_power"))
    if not e.get("detectable", True):
        return {"analytic": analytic, "days": "-", "impressions": "no detectable effect", "users": "-"}
    unstable = bool(e.get("analytic_required_impressions_unstable"))
    mark = "?" if unstable else ""
    days = e.get("days_to_target_power")
    if days is not None:
        days_s = str(days)
    else:  # '*': analytic, beyond the simulated days
        days_s = analytic_days_text(e.get("analytic_required_days"), unstable, lambda d: f"~{days_text(d)}*")
    users = e.get("analytic_required_users")
    users_s = "whole population" if users is not None and users >= WHOLE_POPULATION * population else _count(users)
    return {"analytic": analytic, "days": days_s, "impressions": _count(e.get("analytic_required_impressions")) + mark,
            "users": users_s}


def analytic_days_text(days: Any, unstable: bool = False, number: Callable[[float], str] = days_text) -> str:
    """The cell of an analytic number of days to the target power: 'never' when there is none (missing or infinite:
    the SE floor of the user population is above the target), '> 1 year' beyond :data:`MAX_DAYS_SHOWN` days, else
    ``number(days)`` (:func:`days_text`); '?' after it when the size behind it is unstable. The one rule of
    simulate's days->pwr cell (:func:`sample_size_cells`) and of the sweep's analytic_required_days cell."""
    if not _number(days):
        text = "never"
    elif days > MAX_DAYS_SHOWN:
        text = "> 1 year"
    else:
        text = number(float(days))
    return text + ("?" if unstable else "")


def _unstable_lines(s: dict[str, Any], population: int) -> list[str]:
    """The unstable analytic sample sizes ('?'), each with the refits' 90% range."""
    items = []
    for design, metrics in s["designs"].items():
        for metric, e in metrics.items():
            if is_biased_entry(e) or not e.get("analytic_required_impressions_unstable"):
                continue
            text = spread_text(
                e.get("analytic_required_impressions_range"), count_text, e.get("analytic_required_impressions_rel_se"),
                e.get("variance_floor_to_target"), e.get("analytic_required_impressions_unreachable_share"))
            factor = e.get("analytic_required_days_extrapolation")
            if e.get("analytic_required_impressions_extrapolated") and _number(factor):
                text += f" [extrapolated {factor:.1f}x the simulated days: model-dependent]"
            items.append(f"{design}/{metric}: {text}")
    if not items:
        return []
    return [f"  '?' unstable impressions needed (90% range of the a/N + b fit on {SIZE_BOOTSTRAP} bootstrap resamples "
            "of the replicates; it leaves out the a/N + b model's own error): " + "; ".join(items)]


def extrapolated_entries(s: dict[str, Any]) -> list[tuple[str, str, float, float]]:
    """(design, metric, analytic days, factor = analytic days / simulated days) of every entry whose days->pwr is
    the analytic '*' value (not reached in the simulated days), biased and undetectable entries left out."""
    out = []
    for design, metrics in s["designs"].items():
        for metric, e in metrics.items():
            if is_biased_entry(e) or not e.get("detectable", True) or e.get("days_to_target_power") is not None:
                continue
            days, factor = e.get("analytic_required_days"), e.get("analytic_required_days_extrapolation")
            if _number(days) and _number(factor):
                out.append((design, metric, float(days), float(factor)))
    return out


def extrapolated_days_text(days: float) -> str:
    """'~42.5 days' ('> 1 year' beyond :data:`MAX_DAYS_SHOWN`) for the extrapolation lines."""
    return analytic_days_text(days, False, lambda x: f"~{days_text(x)} days")


def extrapolation_note(simulated_days: Any) -> str:
    """What a '*' size's extrapolation factor means, and the flag beyond :data:`EXTRAPOLATION_FLAG`."""
    return (f"factor = analytic days / the {simulated_days} simulated days; '!' beyond {EXTRAPOLATION_FLAG:g}x: "
            "se^2 = a/N + b fitted to the simulated days is used far past them, and its error grows with the "
            "factor (e.g. 9-14% too many days at 9x on configs/ab.yaml), which the 90% ranges leave out: "
            "simulate at least that many days (traffic.days) before relying on it")


def _extrapolation_lines(s: dict[str, Any], simulated_days: int) -> list[str]:
    """Under the main table: how far past the simulated days each analytic '*' size is extrapolated."""
    items = [f"{d}/{m} {extrapolated_days_text(days)} = {factor:.1f}x{'!' if factor > EXTRAPOLATION_FLAG else ''}"
             for d, m, days, factor in extrapolated_entries(s)]
    if not items:
        return []
    import textwrap

    return textwrap.wrap("'*' extrapolated: " + "; ".join(items) + " (" + extrapolation_note(simulated_days) + ")",
                         width=112, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)


#: after the main table's power@end and analytic cells of an entry whose power or sizes do not come from the mean
#: reported SE (an off-policy estimate whose SE holds a data-driven choice fixed: review 3, F-A)
OTHER_MEASURE_MARK = "^"


def _other_measure(e: dict[str, Any]) -> bool:
    """Whether a summary entry's analytic power and sizes (``se_measure``) or simulated power (``power_measure``)
    come from another measure than the mean reported SE and the replicates' p-values."""
    return str(e.get("se_measure") or "").startswith("replicates'") or bool(e.get("power_measure"))


def _measure_lines(s: dict[str, Any]) -> list[str]:
    """Under the main table: the measure of each entry marked :data:`OTHER_MEASURE_MARK`, and the entries marked
    'no support' (target outside the logger's support) with the share of the last day's impressions."""
    lines = []
    for design, metrics in s["designs"].items():
        for metric, e in metrics.items():
            if _other_measure(e):
                se_measure = e.get("se_measure") or "mean reported SE over the replicates"
                power_measure = e.get("power_measure") or "the replicates' p-values"
                lines.append(f"  '{OTHER_MEASURE_MARK}' {design}/{metric}: analytic power, days and sizes from the "
                             f"{se_measure}; power@end: {power_measure}")
    unsupported = [f"{design}/{metric} (" + ", ".join(
        f"{t}: {v['share']:.0%}" if _number(v.get("share")) else f"{t}: some" for t, v in e["no_support"].items()) + ")"
        for design, metrics in s["designs"].items() for metric, e in metrics.items() if e.get("no_support")]
    if unsupported:
        lines.append("  'no support': " + ", ".join(unsupported) + " of the last day's impressions have a target list "
                     "with an event of logging probability 0 (counted exactly by the simulation): the estimator "
                     "cannot see the target's value there and is biased whatever the t-test of its bias says; its "
                     "analytic power, days and sizes are withheld (summary.json: analytic_if_unbiased)")
    return lines


def terminal_summary(result: SimulationResult, source: str = "") -> str:
    cfg = result.config
    s = result.summary
    off = s["offline"]
    lines = [
        f"onlineeval {__version__} simulate {source}".rstrip(),
        f"  seed {cfg.seed}, {cfg.replicates} replicates x {cfg.traffic.days} days x "
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
        for r in ("A", "B"):
            shown = int(notes.get(f"shown_{r}", 0))
            unj = int(notes.get(f"unjudged_shown_{r}", 0))
            lines.append(
                f"  run {r}: {unj} of {shown} shown documents unjudged ({unj / max(shown, 1):.1%}, counted as "
                f"non-relevant); {notes.get(f'queries_missing_from_run_{r}', 0)} judged queries missing from the "
                f"run (shown an empty list); {notes.get(f'queries_only_in_run_{r}', 0)} run queries without "
                f"judgments (left out); ties: {notes.get('ties')}"
            )
    ab_metric = next((d.metric for d in cfg.designs if d.type == "ab"), "reciprocal_rank")
    seg_truth = s.get("truth_by_segment", {})
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
            null_s = "-" if null is None else value_text(null["delta"], True)
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
    lines += _truth_world_lines(s, result.world.notes.get("collection") != "trec")
    lines += _unstable_lines(s, population)
    lines += _extrapolation_lines(s, cfg.traffic.days)
    lines += _measure_lines(s)
    undefined = [f"{d}/{m} ({e['final_day']['undefined']:.0%})" for d, ms in s["designs"].items()
                 for m, e in ms.items() if e["final_day"]["undefined"] > 0]
    if undefined:
        lines.append("  undefined on the last day in some replicates (too few users or comparisons; counted as "
                     "not rejecting): " + ", ".join(undefined))
    lines += _null_lines(result)
    ref_design = next((d for d in cfg.designs if d.name == s["required_impressions_ratio"]["reference"]), None)
    unstable = {d for d, ms in s["designs"].items() for e in ms.values()
                if e["primary"] and e.get("analytic_required_impressions_unstable")}
    far = {d for d, ms in s["designs"].items() for e in ms.values()
           if e["primary"] and e.get("analytic_required_impressions_extrapolated")}
    lines += _ratio_lines(s["required_impressions_ratio"], cfg.analysis.power,
                          ref_design is not None and ref_design.type == "ab", unstable, far)
    lines += multileaving_lines(s)
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
        "  'no detectable effect': the interleaving truth is within 2 Monte Carlo SEs of 0; '!' = A/A FPR",
        "  outside its 99% band; '0 (ties)': with B replaced by A every comparison of this design is a tie, so",
        "  A/A cannot reject; null Delta: expected Delta when clicks do not depend on relevance (every true",
        "  effect 0); 'biased' = the design is biased on these rankers (null check) or its estimate's mean over",
        "  replicates misses the exact truth beyond chance (a t-test at the level of 4 normal SEs, p < 6.3e-5,",
        "  on the replicates' SD and the truth's Monte Carlo error): its power measures its bias as much as",
        "  the effect, so its analytic power, days and sizes are not given ('-'; summary.json keeps them under",
        "  analytic_if_unbiased); 'no support': biased the same way because an off-policy estimate's target leaves",
        "  the logger's support (named under the table).",
    ]
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


#: above this |z| an unflagged null Delta is not called 'no bias detected' (review 4, F3)
NULL_NOTABLE_Z = 2.0


def _p_text(p: float) -> str:
    """A small p-value as '3e-4', a larger one to 2 significant figures."""
    if p >= 0.01:
        return f"{p:.2g}"
    mant, exp = f"{p:.0e}".split("e")
    return f"{mant}e{int(exp)}"


#: below this p-value an unflagged null check's null replicates' mean test is quoted: bias not excluded (review 9,
#: F3; its flag level is 0.01 / the run's null-checked pairs)
NULL_MEAN_NOTABLE_P = 0.05


def null_mean_caution(n: dict[str, Any]) -> str | None:
    """An unflagged null check's null replicates' mean test when its p-value is below :data:`NULL_MEAN_NOTABLE_P`
    but not below its flag level (review 9, F3): "null replicates' mean +0.00174 +- 0.00067, t 2.6, p 0.018: bias
    not excluded"; None when the check is flagged, has no mean test or its p is at least NULL_MEAN_NOTABLE_P."""
    t = n.get("null_mean_test")
    if n.get("biased") or n.get("biased_null_replicates") or not isinstance(t, dict) or not _number(t.get("pvalue")):
        return None
    if not float(t["pvalue"]) < NULL_MEAN_NOTABLE_P:
        return None
    return (f"null replicates' mean {value_text(t.get('mean'), True)} +- {se_text(t.get('se'))}, "
            f"t {_t_text(t.get('t'))}, p {_p_text(float(t['pvalue']))}: bias not excluded")


def null_unflagged_parts(n: dict[str, Any]) -> tuple[str, str | None]:
    """(verdict from the null Delta's z, :func:`null_mean_caution`) of a null check the bias flag did not fire on:
    'no bias detected (z = 0.4)' only when |z| <= :data:`NULL_NOTABLE_Z` and the mean test is not notable ('no bias
    flagged (z = 0.4)' when it is), else how far below the flag z is and its p-value under no bias."""
    caution = null_mean_caution(n)
    z = n.get("z")
    none = "no bias flagged" if caution else "no bias detected"
    if not isinstance(z, (int, float)) or not math.isfinite(z):
        return none, caution
    if z <= NULL_NOTABLE_Z:
        return f"{none} (z = {z:.1f})", caution
    p = n.get("pvalue")
    p = float(p) if isinstance(p, (int, float)) else math.erfc(z / math.sqrt(2.0))
    return f"z = {z:.1f}: below the {NULL_BIAS_SE:g}-SE flag, but unlikely under no bias (p = {_p_text(p)})", caution


def null_unflagged_verdict(n: dict[str, Any]) -> str:
    """The verdict of a null check the bias flag did not fire on (:func:`null_unflagged_parts`, joined by '; ')."""
    verdict, caution = null_unflagged_parts(n)
    return f"{verdict}; {caution}" if caution else verdict


def null_direction(n: dict[str, Any], metric: str) -> str | None:
    """Which ranker a null Delta favours ('B' / 'A' for delta_ab, 'the later' / 'the earlier ranker' for a
    multileaving pair), or None when its z is at most :data:`NULL_NOTABLE_Z` (review 6, F2: no direction from noise);
    from the null replicates' mean when that is what the bias test flags."""
    z, d = n.get("z"), n.get("delta")
    if n.get("biased_null_replicates") and isinstance(n.get("mean_estimate_last_day"), (int, float)):
        z, d = math.inf, n["mean_estimate_last_day"]  # the null replicates' mean is off 0 beyond the bias t-test
    if not isinstance(z, (int, float)) or not isinstance(d, (int, float)) or not z > NULL_NOTABLE_Z or d == 0:
        return None
    if metric == "delta_ab":
        return "B" if d > 0 else "A"
    return "the " + ("later" if d > 0 else "earlier") + " ranker"


def null_rate_note(n: dict[str, Any], metric: str) -> str:
    """The 'bias or SE miscalibration?' note of a null check whose last-day rejection count is above alpha beyond a
    one-sided binomial test at the family level / pairs while no bias rule fired (review 6, F2; review 8, F2: an
    excess rate is a bias too small for the rules or SEs too small), or ''."""
    x = n.get("rate_excess")
    if n.get("biased") or not n.get("se_miscalibrated") or not isinstance(x, dict):
        return ""  # a bias explains the excess rejections
    pairs = int(x.get("pairs") or 1)
    where = (f"{x['threshold']:.2g} = {x['family_level']:g} / {pairs} null-checked pairs of the run" if pairs > 1
             else f"{x['threshold']:.2g}")
    favours = null_direction(n, metric)
    return (f"bias or SE miscalibration? {x['rejections']}/{x['replicates']} null replicates reject (one-sided p = "
            f"{_p_text(x['pvalue'])} < {where})" + (f", Delta favours {favours}" if favours else ""))


def null_mean_detectable(n: dict[str, Any]) -> tuple[float, float, float, int] | None:
    """(bias, noncentrality, t_crit, df) of the null replicates' mean test: the |mean| it flags with
    :data:`simulations.analysis.NULL_DETECTABLE_POWER`, nc x the mean's SE with nc the noncentral t's
    (:func:`simulations.analysis.t_noncentrality`; review 9, F4: t_crit x SE alone is flagged half the time), or
    None without the test."""
    from scipy import stats as sps

    from simulations.analysis import t_noncentrality

    t = n.get("null_mean_test")
    if not isinstance(t, dict) or not _number(t.get("se")):
        return None
    df = int(t["df"])
    crit = float(t["critical_t"]) if _number(t.get("critical_t")) else float(sps.t.isf(float(t["level"]) / 2.0, df))
    nc = float(t["noncentrality_80"]) if _number(t.get("noncentrality_80")) else t_noncentrality(float(t["level"]), df)
    d = t.get("detectable_bias_80")
    return (float(d) if _number(d) else nc * float(t["se"])), nc, crit, df


def null_detectable_text(n: dict[str, Any], effect: Any) -> str:
    """The |bias| each rule of the null check detects with 80% power, with its share of |effect| (review 8, F2:
    naming the rule; review 9, F4: at 80% power, not the 50% of 4 x SE and t_crit x SE): '0.00823 (89% of the
    effect) with 80% power by the 4-SE rule on the null Delta ((4 + z_0.8 0.84) x its SE); >= 0.00111 (12% of the
    effect) with 80% power by the null replicates' mean test (3.47 x its SE, noncentral t; t_crit 2.6, 99 df)'."""
    from scipy import stats as sps

    from simulations.analysis import NULL_DETECTABLE_POWER

    def share(d: float) -> str:
        return (f" ({abs(d / effect):.0%} of the effect)"
                if isinstance(effect, (int, float)) and effect and math.isfinite(effect) else "")

    z_power = float(sps.norm.ppf(NULL_DETECTABLE_POWER))
    power = f"{NULL_DETECTABLE_POWER:.0%} power"
    se = n.get("se")
    d = n.get("detectable_bias_80")
    if not _number(d):
        d = (NULL_BIAS_SE + z_power) * se if isinstance(se, (int, float)) else None
    text = (value_text(d) + share(d) if isinstance(d, (int, float)) and math.isfinite(d) else "-") + (
        f" with {power} by the {NULL_BIAS_SE:g}-SE rule on the null Delta (({NULL_BIAS_SE:g} + z_0.8 "
        f"{z_power:.2f}) x its SE)")
    m = null_mean_detectable(n)
    if m is not None and math.isfinite(m[0]):
        text += (f"; >= {value_text(m[0])}{share(m[0])} with {power} by the null replicates' mean test "
                 f"({m[1]:.2f} x its SE, noncentral t; t_crit {m[2]:.2g}, {m[3]} df)")
    return text


def _t_text(t: Any) -> str:
    """A t or z statistic: '-17' from 10 on, '-3.6' below."""
    if not isinstance(t, (int, float)) or not math.isfinite(t):
        return str(t)
    return f"{t:.0f}" if abs(t) >= 10 else f"{t:.1f}"


def null_level_text(n: dict[str, Any]) -> str:
    """' < 0.0033 = 0.01 / 3 null-checked pairs of the run': the level the null replicates' mean test was flagged at
    (review 9, F1: the run's family), '' for a summary from before family_pairs."""
    t, pairs = n.get("null_mean_test"), n.get("family_pairs")
    if not isinstance(t, dict) or not _number(t.get("level")) or not isinstance(pairs, int):
        return ""
    if pairs == 1:
        return f" < {float(t['level']):.2g} (the run's one null-checked pair)"
    return f" < {float(t['level']):.2g} = 0.01 / {pairs} null-checked pairs of the run"


def null_bias_evidence(n: dict[str, Any]) -> str:
    """The evidence behind a null check's BIASED (review 8, F2), each rule that fired: "null replicates' mean
    -0.00557 +- 0.00032, t -17, p 2e-31", "null Delta -0.00120 +- 0.00020, z 6.0", or the analytic-rate rule."""
    rules = n.get("bias_rules")
    if rules is None:  # a summary from before bias_rules
        from simulations.analysis import null_bias_rules

        rules = null_bias_rules({**n, "biased": True})
    parts = []
    t = n.get("null_mean_test")
    if "null_replicates_mean" in rules and isinstance(t, dict):
        parts.append(f"null replicates' mean {value_text(t.get('mean'), True)} +- {se_text(t.get('se'))}, "
                     f"t {_t_text(t.get('t'))}, p {_p_text(float(t.get('pvalue')))}" + null_level_text(n))
    delta = f"null Delta {value_text(n.get('delta'), True)} +- {se_text(n.get('se'))}, z {_t_text(n.get('z'))}"
    if "null_delta" in rules:
        parts.append(delta)
    if "analytic_rate" in rules:
        parts.append(delta + ": the analytic rejection rate of the smallest Delta within 2 SE is above the band")
    return "; ".join(parts) or delta


def biased_ratio_why(b: Any) -> str:
    """Why a design's ratios are withheld (summary.json required_impressions_ratio.biased[d]): the null check's
    evidence that fired (:func:`null_bias_evidence`), 'bias ... +- ... against the truth', or a bare null Delta (a
    summary from before review 8)."""
    if isinstance(b, dict) and "bias" in b:
        return f"bias {value_text(b.get('bias'), True)} +- {se_text(b.get('se'))} against the truth"
    if isinstance(b, dict):
        return null_bias_evidence(b)
    return f"null Delta {value_text(b, True)}"


def null_biased_verdict(n: dict[str, Any], metric: str) -> str:
    """'BIASED (<evidence>; favours A when no ranker is better)' (review 8, F2: the test that fired)."""
    favours = null_direction(n, metric)
    return (f"BIASED ({null_bias_evidence(n)}"
            + (f"; favours {favours} when no ranker is better)" if favours else ")"))


def _null_lines(result: SimulationResult) -> list[str]:
    """The null check of every interleaving design next to its A/A rate."""
    s = result.summary
    rows = [(d, m, e) for d, ms in s["designs"].items() for m, e in ms.items() if e.get("null")]
    if not rows:
        return []
    days = result.config.traffic.days
    band = rows[0][2]["null"]["binomial_99_band"]
    lines = ["", ("Null check (clicks that do not depend on relevance: the users' clicks on ranker A's list for "
                  "another query,"),
             ("  so every true effect is 0; null Delta by Monte Carlo; rejects: share of the null replicates "
              f"rejecting (99% band of alpha {band[0]:.3f}-{band[1]:.3f}), analytic: from the null Delta and the "
              "day's SE):"),
             (f"  {'design':14s} {'metric':18s} {'null Delta':>10s} {'+- SE':>8s} {'z':>6s} {'rejects day 1':>13s} "
              f"{f'day {days}':>7s} {'analytic':>8s} {'A/A FPR':>8s}  verdict")]
    for design, metric, e in rows:
        n = e["null"]
        aa = e.get("aa")
        fpr = "-" if aa is None else ("0 (ties)" if aa["degenerate"] else f"{aa['false_positive_rate']:.3f}")
        verdict = null_biased_verdict(n, metric) if n["biased"] else null_unflagged_verdict(n)
        note = null_rate_note(n, metric)
        verdict += f"; {note}" if note else ""
        verdict += f"; detects |bias| >= {null_detectable_text(n, e.get('true_effect'))}"
        rate, analytic = n["rejection_rate"], n["rejection_rate_analytic"]
        simulated = "replicates" in n
        lines.append(f"  {design:14s} {metric:18s} {value_text(n['delta'], True):>10s} {se_text(n['se']):>8s} "
                     f"{_fmt(n['z'], '.1f'):>6s} {rate_text(rate[0] if rate and simulated else None):>13s} "
                     f"{rate_text(rate[-1] if rate and simulated else None):>7s} "
                     f"{rate_text(analytic[-1] if analytic else None):>8s} {fpr:>8s}  {verdict}")
    return lines


#: the 'not distinguishable' rule in the legend (review 8, F4; summary.json indistinguishable.rule in full)
INDISTINGUISHABLE_SHORT = ("|log ratio difference| < 2 SE of the difference, from both designs' own relative SEs "
                           "and the reference's, which cancel only where both ratios use the same reference pair(s)")


def _ratio_lines(ratios: dict[str, Any], power: float, ref_is_ab: bool,
                 unstable: set[str] | frozenset[str] = frozenset(),
                 extrapolated: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Efficiency at equal traffic and the ratio of required impressions, biased designs marked, and
    '?' on a ratio whose either size is unstable (``unstable``: designs whose primary size is), '*' on one whose
    either size is extrapolated beyond :data:`EXTRAPOLATION_FLAG` x the simulated days (``extrapolated``; review 6,
    F1: the main table's '!')."""
    ref = ratios.get("reference")
    if not ref:
        return []
    biased = ratios.get("biased", {})
    eff, need = [], []
    for d in ratios["ratios"]:
        if d == ref:
            continue
        b = biased.get(d)
        mark = None if b is None else f"biased ({biased_ratio_why(b)})"
        e, r = ratios.get("equal_traffic_efficiency", {}).get(d), ratios["ratios"][d]
        e_rel = (ratios.get("equal_traffic_efficiency_rel_se") or {}).get(d)
        r_rel = (ratios.get("ratios_rel_se") or {}).get(d)
        pairs = (ratios.get("by_pair") or {}).get(d)
        if e is not None:
            eff.append(f"{d} {mark}" if mark else f"{d} {value_text(e)}x{ratio_uncertainty_text(e_rel)}"
                       + pair_range_text(pairs, "efficiency"))
        if r is not None or mark:
            if pairs:  # review 8, F5: a multileaving median's marks from the pairs it is the median of
                mid = median_pairs(pairs, "ratio")
                is_unstable = any(p.get("unstable") for p in mid)
                is_far = any(p.get("extrapolated") for p in mid)
            else:
                is_unstable, is_far = ref in unstable or d in unstable, ref in extrapolated or d in extrapolated
            q = "?" if is_unstable and not ratio_uncertain(r_rel) else ""
            star = "*" if is_far else ""
            unc = ratio_uncertainty_text(r_rel) + q + star + pair_range_text(pairs, "ratio")
            need.append(f"{d} {mark}" if mark else f"{d} {value_text(r)}x{unc} ({value_text(1 / r)}x fewer)" if r < 1
                        else f"{d} {value_text(r)}x{unc}")
    lines = []
    if eff:
        lines.append(f"  information per impression at equal traffic ((effect/SE)^2 on day {ratios.get('last_day')}) "
                     f"relative to {ref}: " + ", ".join(eff))
    if need:
        lines.append(f"  impressions needed for {power:.0%} power relative to {ref}: " + ", ".join(need)
                     + (f" ('*': from a size extrapolated beyond {EXTRAPOLATION_FLAG:g}x the simulated days, "
                        "the main table's '!')" if any("*" in n for n in need) else ""))
    if eff or need:
        lines.append(f"  (+-: 1 relative SE by the delta method, from the truths' Monte Carlo SEs and the SEs' own "
                     f"(sizes: their refits'); '?': above {RATIO_UNCERTAIN_REL_SE:.0%}, or an unstable size"
                     + ("; multileaving: median over the pairs, their range in brackets, '?' / '*' on the median "
                        "or a bracket end from a pair with such a size" if ratios.get("by_pair") else "") + ")")
    for key, what in (("equal_traffic_efficiency", "information per impression"), ("ratios", "impressions needed")):
        same = (ratios.get("indistinguishable") or {}).get(key) or []
        if same:
            lines.append(f"  not distinguishable ({what}; {INDISTINGUISHABLE_SHORT}): "
                         + ", ".join(f"{a} ~ {b}" for a, b in same))
    if eff and need and ref_is_ab:
        lines += [(f"  (the first is the efficiency over the simulated days; the second holds at the target power "
                   f"only: {ref}'s SE"),
                  ("  has a floor from returning users, se^2 = a/N + b, so near the target its required impressions "
                   "grow faster than 1/N)")]
    return lines


def multileaving_lines(s: dict[str, Any]) -> list[str]:
    """The rankers' exact online values and each multileaving design's pairwise error rate by day (review 6, F5)."""
    ml = s.get("multileaving")
    if not ml:
        return []
    key, values = ml["order_metric"], ml["online_values"]
    names = list(values)
    first = names[0]
    agree = all(v["signs_agree"] for e in ml["designs"].values() for v in e["pairs"].values())
    lines = ["", f"Multileaving: the rankers' exact online {key} (what an A/B test of each measures): "
             + ", ".join(f"{r} {value_text(values[r][key])}" for r in names)
             + f" (from {first}: " + ", ".join(f"{r} {value_text(values[r][key] - values[first][key], True)}"
                                            for r in names[1:]) + ") -> " + " > ".join(ml["order"]),
             "  pairwise error rate by day (share of replicate x pair whose estimate has the wrong sign; 0 or "
             "undefined counts as wrong) against that order"
             + (" (each method's own truth has the same sign on every pair):" if agree else
                " / against the method's own truth:")]
    for d, e in ml["designs"].items():
        exact, own = e["error_rate_exact"], {r["day"]: r["error_rate"] for r in e["error_rate_own_truth"]}
        cells = [f"day {r['day']} {rate_text(r['error_rate'])}" + ("" if agree else f"/{rate_text(own.get(r['day']))}")
                 for r in exact]
        disagree = [p for p, v in e["pairs"].items() if not v["signs_agree"]]
        differs = f"; own truth's sign differs from the exact order on {', '.join(disagree)}" if disagree else ""
        lines.append(f"  {d:14s} " + ", ".join(cells) + differs)
    return lines


def ratio_uncertain(rel: Any) -> bool:
    """A ratio whose relative SE is unknown or above :data:`RATIO_UNCERTAIN_REL_SE` (review 6, F1)."""
    return not isinstance(rel, (int, float)) or not math.isfinite(rel) or rel > RATIO_UNCERTAIN_REL_SE


def ratio_uncertainty_text(rel: Any) -> str:
    """' +-9%' (1 relative SE), with '?' when above :data:`RATIO_UNCERTAIN_REL_SE`; ' +-?' when unknown."""
    if not isinstance(rel, (int, float)) or not math.isfinite(rel):
        return " +-?"
    pct = f"{100 * rel:.0f}%" if rel < 10 else f"{rel:.0f}x"
    return f" +-{pct}" + ("?" if rel > RATIO_UNCERTAIN_REL_SE else "")


def pair_size_marks(p: dict[str, Any]) -> str:
    """A multileaving pair's size marks in a ratio range (review 8, F5): '?' when either size is unstable, '*' when
    either is extrapolated beyond :data:`EXTRAPOLATION_FLAG` x the simulated days (by_pair's flags)."""
    return ("?" if p.get("unstable") else "") + ("*" if p.get("extrapolated") else "")


def median_pairs(pairs: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The pair(s) a median over ``pairs[*][key]`` is taken from: the middle one, or the middle two of an even
    count."""
    have = sorted((p for p in pairs.values() if isinstance(p.get(key), (int, float))), key=lambda p: p[key])
    if not have:
        return []
    k = len(have)
    return have[(k - 1) // 2: k // 2 + 1]


def pair_range_text(pairs: Any, key: str) -> str:
    """' [0.75-3.08 over 6 pairs]': the range of a multileaving design's per-pair ratios, or ''; a ratio range's
    end carries its pair's '?' / '*' (:func:`pair_size_marks`; review 8, F5: an end from a size extrapolated 54x
    was shown bare)."""
    if not isinstance(pairs, dict):
        return ""
    have = [p for p in pairs.values() if isinstance(p.get(key), (int, float))]
    if not have:
        return ""
    lo, hi = min(have, key=lambda p: p[key]), max(have, key=lambda p: p[key])

    def end(p: dict[str, Any]) -> str:
        return value_text(p[key]) + (pair_size_marks(p) if key == "ratio" else "")

    return f" [{end(lo)}-{end(hi)} over {len(have)} pairs]"


def _coverage_cell(coverage: Any, within: bool | None) -> str:
    """The coverage with '!' when it is outside the binomial band of a valid interval's."""
    return rate_text(coverage) + ("!" if within is False else "")


def _counterfactual_lines(result: SimulationResult) -> list[str]:
    """Estimation error of every design's effect (A/B, interleaving and off-policy rows in
    one table), the estimator catalogue with support violations, the cost of logging and
    the assumption sweep."""
    s = result.summary
    cf = s.get("counterfactual")
    if not cf:
        return []
    population = result.config.users.population
    lines = ["", ("Estimation error on the last day (every design; bias = mean estimate - true effect, +-: its SE; "
                  "coverage: share of replicates whose CI holds the truth, '!' outside the 99% binomial band of a "
                  f"valid interval's; '{OTHER_MEASURE_MARK}', 'no support': see the main table):"),
             (f"  {'design':14s} {'metric':22s} {'true effect':>12s} {'bias':>10s} {'+-':>8s} {'SD':>9s} "
              f"{'RMSE':>9s} {'coverage':>8s} {'power@end':>9s} {'impr. needed':>13s}")]
    for design, metrics in s["designs"].items():
        for metric, e in metrics.items():
            fd = e["final_day"]
            rmse = fd.get("rmse")
            lines.append(
                f"  {design if e['primary'] else '':14s} {metric[:22]:22s} {value_text(e['true_effect'], True):>12s} "
                f"{value_text(e['estimator_bias'], True):>10s} {se_text(e['estimator_bias_se']):>8s} "
                f"{se_text(fd['sd_estimate']):>9s} {se_text(rmse):>9s} "
                f"{_coverage_cell(fd['coverage'], e.get('coverage_within_band')):>8s} "
                f"{rate_text(fd['power']) + (OTHER_MEASURE_MARK if _other_measure(e) else ''):>9s} "
                f"{sample_size_cells(e, population)['impressions'] if e.get('detectable', True) else '-':>13s}"
            )
    for name, d in cf.items():
        logger = dict(d["logger"] or {})
        lines += ["", (f"Counterfactual design {name}: logger {json.dumps(logger)}; metric {d['metric']}, "
                       f"V({d['targets'][1]}) - V({d['targets'][0]}) = {value_text(d['true_effect'], True)} (exact)")]
        lines.append(f"  {'estimator':22s} {'bias':>10s} {'+-':>8s} {'RMSE':>9s} {'undef.':>6s} "
                     f"{'support violated (impr.)':>26s}  assumption")
        for label, e in d["estimators"].items():
            sv = e["support_violations"]
            support = ", ".join(f"{t} {v['violations_mean']:,.0f} ({v['share']:.0%})" for t, v in sv.items()
                                if v["share"] is not None) or "-"
            flag = ""
            if any(v["violations_mean"] > 0 for v in sv.values()):
                bad = [t for t, v in sv.items() if v["violations_mean"] > 0]
                flag = f"  [cannot evaluate {', '.join(bad)} where its logging probability is 0]"
            lines.append(f"  {label[:22]:22s} {value_text(e['bias'], True):>10s} {se_text(e['bias_se']):>8s} "
                         f"{se_text(e['rmse']):>9s} {_fmt(e['undefined_share'], '.0%'):>6s} {support:>26s}  "
                         f"{e['assumption']}{flag}")
        lines.append(f"  ({d['whole_log_refit']}; support: mean impressions per replicate on the last day whose "
                     "target list has an event of logging probability 0 at the estimator's level; A/A: both targets "
                     "are A, the paired difference is identically 0, shown as '0 (ties)')")
        cost = d["logging_cost"]
        if cost:
            lines.append("  cost of logging (the logger's own metrics observed on the traffic it served, mean over "
                         "replicates, vs ranker A's exact values): "
                         + "; ".join(f"{m} {value_text(c['logger_observed'])} vs {value_text(c['ranker_A_exact'])} "
                                     f"({percent_text(c['relative'])}"
                                     f"{', lower is better' if c['improvement_sign'] < 0 else ''})"
                                     for m, c in cost.items()))
    sweep = s.get("assumption_sweep")
    if sweep:
        # what each cell is: one log's error, not a mean over logs (review 3, M5)
        label = sweep.get("error_label") or (f"estimate - exact truth of one {sweep['impressions']:,}-impression log "
                                             "per value, +- that log's SE")
        lines += ["", (f"Assumption sweep ({sweep['design']}, {sweep['metric']}) of each estimator as "
                       f"{sweep['parameter']} moves: {label}")]
        lines.append(f"  {'estimator':22s} " + " ".join(f"{v:>19g}" for v in sweep["values"]))
        lines.append(f"  {'truth':22s} " + " ".join(f"{value_text(t, True):>19s}" for t in sweep["truth"]))
        for label, e in sweep["estimators"].items():
            cells = [f"{value_text(b, True)} +- {se_text(se)}" for b, se in zip(e["bias"], e["se"], strict=True)]
            lines.append(f"  {label[:22]:22s} " + " ".join(f"{c:>19s}" for c in cells))
    return lines


def _monitoring_lines(result: SimulationResult) -> list[str]:
    """What daily monitoring does to each design's primary metric (see simulations.sequential)."""
    mon = result.summary.get("monitoring") or {}
    if not mon:
        return []
    first = next(iter(mon.values()))
    band = first["rules"]["fixed"].get("aa_binomial_99_band")
    lines = ["", f"Daily monitoring ({first['days']} looks, primary metrics; A/A: share of replicates that ever reject"
             + (f", 99% band of alpha {band[0]:.3f}-{band[1]:.3f}" if band else "") + "; power with the right sign;"
             " day: mean day of the decision):"]
    lines.append(f"  {'design':14s} {'metric':18s} " + "  ".join(f"{r:>28s}" for r in
                                                            ("fixed horizon", "peeking (p<alpha daily)",
                                                             "mSPRT (always valid)", "O'Brien-Fleming")))
    from simulations.sequential import null_rate_note, null_rate_text

    degenerate: list[str] = []
    # review 6, F3: a design whose A/A is identically 0 shows each rule's rate on its null-variant replicates
    # (simulations.sequential puts them under summary.json sequential[design].null_monitoring)
    nulls: dict[str, Any] = {}
    seq = result.summary.get("sequential") or {}
    for design, e in mon.items():
        cells = []
        null_rules = ((seq.get(design) or {}).get("null_monitoring") or {}).get("rules") or {}
        for rule in ("fixed", "peeking", "msprt", "obrien_fleming"):
            r = e["rules"][rule]
            label = "A/A"
            if r.get("aa_degenerate") and null_rate_text(null_rules.get(rule) or {}):
                label, aa = "null", null_rate_text(null_rules[rule]).split(" ", 1)[1]
                nulls[design] = null_rules[rule]
            elif r.get("aa_degenerate"):
                aa = "-"  # identically 0: says nothing about the rule under a real null (review 3, M6)
                degenerate.append(design)
            elif "aa_false_positive_rate" in r:
                aa = f"{r['aa_false_positive_rate']:.3f}" + ("" if r["aa_within_band_or_below"] else "!")
            else:
                aa = "-"
            cells.append(f"{label} {aa:>{11 - len(label)}s} pw {rate_text(r['power'])} "
                         f"d {days_text(r['mean_decision_day']):>4s}")
        d = result.summary["designs"].get(design, {}).get(e["metric"], {})
        biased = is_biased_entry(d)
        metric = e["metric"] + (" [biased]" if biased else "")
        lines.append(f"  {design:14s} {metric:18s} " + "  ".join(f"{c:>28s}" for c in cells))
    lines.append("  ('!' = A/A rate above its band; [biased]: see the null check, its power is not a sensitivity; "
                 "mSPRT's mixture scale and O'Brien-Fleming's")
    lines.append("  information fractions are planned from the mean SEs by day; see summary.json 'monitoring')")
    if nulls:
        lines.append(null_rate_note(nulls, [d for d in nulls if seq[d]["null_monitoring"].get("biased")]))
    if degenerate:
        lines.append(aa_degenerate_note(dict.fromkeys(degenerate)))
    return lines


def aa_degenerate_note(designs: Any) -> str:
    """Why an A/A rate is printed '-' for ``designs`` (an iterable of names) in the monitoring and sequential
    tables (review 3, M6)."""
    return (f"  A/A '-' ({', '.join(designs)}): the design's A/A compares A with itself and is identically 0 (every "
            "comparison a tie, or the off-policy paired difference 0), so it cannot reject under any rule and says "
            "nothing about peeking: under a real null (two different rankers of equal value) daily peeking at its "
            "z-test inflates false positives like the other designs'")
