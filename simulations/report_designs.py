"""The terminal summary's per-design blocks: counterfactual estimation and daily monitoring.

:func:`_counterfactual_lines` (every design's estimation error, the estimator catalogue, the cost of logging and
the assumption sweep), :func:`_monitoring_lines` (what daily looks do to each primary metric) and
:func:`aa_degenerate_note`. Re-exported by :mod:`simulations.report`.
"""

from __future__ import annotations

import json
import math
from typing import Any, TYPE_CHECKING

from simulations.analysis import is_biased_entry
from simulations.designs.counterfactual.bias_check import MAX_SKEW, MIN_ESS
from simulations.report_numbers import _fmt, days_text, percent_text, rate_text, se_text, value_text
from simulations.report_sizes import OTHER_MEASURE_MARK, _other_measure, sample_size_cells

if TYPE_CHECKING:
    from simulations.job import SimulationResult


#: the counterfactual table's undef. column (summary.json ``undefined_share``)
UNDEFINED_NOTE = ("undef.: share of replicates whose estimate is undefined on the last day (a target with no weight "
                  "in the log, e.g. its list never drawn; bias, its +-, RMSE and SD are over the others)")


def _coverage_cell(coverage: Any, within: bool | None) -> str:
    """The coverage with '!' when it is outside the binomial band of a valid interval's."""
    return rate_text(coverage) + ("!" if within is False else "")


def check_cell(check: Any) -> str:
    """An estimator's bias check (summary ``bias_check``) in one cell: ``z +6.4!`` (``!``: biased), ``z -0.1``, why
    it is inconclusive (``heavy tail``: the estimate's skewness; ``not drawn``: the log has hardly drawn a target's
    weights; ``no support``: a target's list has events of logging probability 0), ``undefined``, or ``-`` (no
    check)."""
    if not check:
        return "-"
    if not check.get("reliable"):
        reason = check.get("inconclusive")
        if reason is None:  # a summary written before the reasons were kept
            return "undefined" if str(check.get("note") or "").startswith("undefined") else "inconclusive"
        return str(reason)
    return f"z {check['z']:+.1f}" + ("!" if check.get("biased") else "")


def check_lines(estimators: dict[str, Any]) -> list[str]:
    """What the estimator table's ``check`` column is, with the biased ones' errors and what each check detects."""
    checks = {label: e.get("bias_check") for label, e in estimators.items() if e.get("bias_check")}
    if not checks:
        return []
    n = next(iter(checks.values()))["impressions"]
    text = (f"  check: each estimator's V(B) - V(A) on one direct log of {n:,} impressions (no SimPy; the config's "
            "users; each impression its own cluster) against the exact truth, z = error / its SE, whatever the "
            f"number of replicates; '!' = |z| > 4: biased (marked so in the main table); inconclusive, the "
            f"replicates' test alone applies: 'heavy tail', the estimate's skewness is above {MAX_SKEW:g} "
            "(heavy-tailed weights: one log's z is not normal there), 'not drawn', a target's weights have an "
            f"effective sample size below {MIN_ESS:,} or a mean off its expectation (the log has hardly drawn them), "
            "'no support', a target's list has events the logger cannot draw (the estimator is biased there: the "
            "support column)")
    unseen = {label: c for label, c in checks.items() if c.get("inconclusive") == "not drawn"}
    if unseen:
        text += "; not drawn: " + ", ".join(f"{label} ({'; '.join(c.get('not_drawn') or [])})"
                                            for label, c in unseen.items())
        marked = [label for label in unseen if estimators[label].get("biased_in_main_table")]
        if marked:
            text += (f"; {', '.join(marked)} {'is' if len(marked) == 1 else 'are'} marked biased in the main table "
                     "by the replicates' test: with logs of this size the estimate misses the truth because the log "
                     "does not draw the target's large weights (too rarely shown), whether or not the estimator's "
                     "assumption holds")
    biased = [f"{label} {value_text(c['bias'], True)} +- {se_text(c['se'])}" for label, c in checks.items()
              if c.get("biased")]
    if biased:
        text += "; errors of the biased: " + ", ".join(biased)
    detects = [f"{label} {value_text(c['detects'])}" for label, c in checks.items()
               if c.get("detects") is not None and not c.get("biased")]
    if detects:
        power = next(c["detects_power"] for c in checks.values() if c.get("detects") is not None)
        text += (f"; |bias| each check finds with {power:.0%} power (4 SE + z_power SE): " + ", ".join(detects))
    return [text]


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
                  "valid interval's, its lower end widened by a Monte Carlo truth's own error; "
                  f"'{OTHER_MEASURE_MARK}', 'no support': see the main table):"),
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
                     f"{'support violated (impr.)':>26s} {'check':>13s}  assumption")
        for label, e in d["estimators"].items():
            sv = e["support_violations"]
            support = ", ".join(f"{t} {v['violations_mean']:,.0f} ({v['share']:.0%})" for t, v in sv.items()
                                if v["share"] is not None) or "-"
            flag = ""
            if any(v["violations_mean"] > 0 for v in sv.values()):
                bad = [t for t, v in sv.items() if v["violations_mean"] > 0]
                flag = f"  [cannot evaluate {', '.join(bad)} where its logging probability is 0]"
            lines.append(f"  {label[:22]:22s} {value_text(e['bias'], True):>10s} {se_text(e['bias_se']):>8s} "
                         f"{se_text(e['rmse']):>9s} {_fmt(e['undefined_share'], '.0%'):>6s} {support:>26s} "
                         f"{check_cell(e.get('bias_check')):>13s}  {e['assumption']}{flag}")
        lines.append(f"  ({d['whole_log_refit']}; {UNDEFINED_NOTE}; support: mean impressions per replicate on the "
                     "last day whose "
                     "target list has an event of logging probability 0 at the estimator's level; A/A: both targets "
                     "are A, the paired difference is identically 0, shown as '0 (ties)')")
        lines += check_lines(d["estimators"])
        cost = d["logging_cost"]
        if cost:
            lines.append("  cost of logging (the logger's own metrics observed on the traffic it served, mean over "
                         "replicates, vs ranker A's exact values; +-: the mean's SE over the replicates): "
                         + "; ".join(logging_cost_text(m, c) for m, c in cost.items()))
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
    # review 6, F3: a design whose A/A is identically 0 shows each rule's rate on its null-variant replicates, or a
    # counterfactual design's on its own replicates at the exact truth (simulations.sequential puts them under
    # summary.json sequential[design].null_monitoring)
    nulls: dict[str, Any] = {}
    seq = result.summary.get("sequential") or {}
    for design, e in mon.items():
        cells = []
        null_rules = ((seq.get(design) or {}).get("null_monitoring") or {}).get("rules") or {}
        for rule in ("fixed", "peeking", "msprt", "obrien_fleming"):
            r = e["rules"][rule]
            label = "A/A"
            if r.get("aa_degenerate") and null_rate_text(null_rules.get(rule) or {}):
                label, aa = null_rate_text(null_rules[rule]).split(" ", 1)  # 'null' or 'truth' and the rate
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
    lines.append("  ('!' = A/A (null, truth) rate above its band; [biased]: biased in the main table (null check, "
                 "bias test or no support), its power is not a sensitivity; "
                 "mSPRT's mixture scale and O'Brien-Fleming's")
    lines.append("  information fractions are planned from the mean SEs by day; see summary.json 'monitoring')")
    if nulls:
        lines.append(null_rate_note(nulls, [d for d in nulls if seq[d]["null_monitoring"].get("biased")]))
    if degenerate:
        lines.append(aa_degenerate_note(dict.fromkeys(degenerate)))
    return lines


def logging_cost_text(metric: str, c: dict[str, Any]) -> str:
    """``clicks_per_query 0.972 vs 1.05 (-7.8% +- 0.1%)``: the logger's observed metric (a Monte Carlo mean over the
    replicates) against ranker A's exact value, the relative difference with its SE (the observed mean's, over the
    replicates; left out with one replicate)."""
    rel, se, ref = c.get("relative"), c.get("cost_se"), c.get("ranker_A_exact")
    err = ""
    if isinstance(se, (int, float)) and math.isfinite(se) and isinstance(ref, (int, float)) and ref:
        err = f" +- {percent_text(se / abs(ref), signed=False)}"
    lower = ", lower is better" if (c.get("improvement_sign") or 1) < 0 else ""
    return (f"{metric} {value_text(c.get('logger_observed'))} vs {value_text(ref)} "
            f"({percent_text(rel)}{err}{lower})")


def aa_degenerate_note(designs: Any) -> str:
    """Why an A/A rate is printed '-' for ``designs`` (an iterable of names) in the monitoring and sequential
    tables (review 3, M6)."""
    return (f"  A/A '-' ({', '.join(designs)}): the design's A/A compares A with itself and is identically 0 (every "
            "comparison a tie, or the off-policy paired difference 0), so it cannot reject under any rule and says "
            "nothing about peeking: under a real null (two different rankers of equal value) daily peeking at its "
            "z-test inflates false positives like the other designs'")
