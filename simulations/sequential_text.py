"""The terminal text of the designs' sequential tests (:func:`simulations.sequential.sequential_summary`):
:func:`sequential_lines`, and the 'null' rate that stands in for an identically-0 A/A rate in the monitoring and
sequential tables (:func:`null_rate_text`, :func:`null_rate_note`). Reads the summary's JSON-ready dictionary only.
Importable as :mod:`simulations.sequential`'s names too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["null_rate_note", "null_rate_text", "sequential_lines"]

def _fmt_days(x: float | None) -> str:
    from simulations.report import days_text

    return days_text(x)


def sequential_lines(summary: dict[str, Any], batch_hours: int) -> list[str]:
    """The terminal block of :func:`simulations.sequential.sequential_summary`: each design's decision rule next to the
    fixed horizon, with the days it saves (or costs)."""
    from simulations.report import rate_text, value_text

    seq = {d: e for d, e in (summary.get("sequential") or {}).items()
           if "decision" in e and (e["rule"] != "none" or e["monitoring"] != "daily")}
    if not seq:
        return []
    lines = ["", ("Sequential decisions (designs[i].analysis on the primary metric; A/A: share of replicates that ever "
                  "reject, '!' above its 99% band; power: rejections with the right sign; day: mean day of the "
                  "decision, the last day when none):"),
             (f"  {'design':14s} {'rule':26s} {'looks':>12s} {'A/A FPR':>12s} {'power':>6s} {'day':>5s}   "
              "against the fixed horizon")]
    unstable: list[tuple[str, str, dict[str, Any]]] = []
    degenerate: list[str] = []
    for design, e in seq.items():
        d = e["decision"]
        fixed = e["rules"]["fixed"]
        rule = e["rule"] + (f" (tau {value_text(e['tau'])})" if e.get("tau") is not None else "")
        looks = f"{e['looks']} " + ("daily" if e["monitoring"] == "daily" else f"per {batch_hours} h")
        if d.get("aa_degenerate"):
            # identically 0: says nothing about the rule under a real null (review 3, M6); review 6, F3: the rule's
            # rate on the design's null-variant replicates instead
            aa = null_rate_text(d) or "-"
            degenerate.append(design)
        elif "aa_false_positive_rate" in d:
            aa = f"{d['aa_false_positive_rate']:.3f}" + ("" if d["aa_within_band_or_below"] else "!")
        else:
            aa = "-"
        plan = d.get("planned")
        shown: tuple[str, ...] = ()
        if plan and plan.get("fixed_days") is not None:
            shown = tuple(_PLANNED_KEYS) if plan.get("expected_days_effect") is not None else ("fixed_days", "max_days")
        marks = {k: "?" if k in shown and ((plan.get("uncertainty") or {}).get(k) or {}).get("unstable") else ""
                 for k in _PLANNED_KEYS}
        unstable += [(design, k, plan["uncertainty"][k]) for k in _PLANNED_KEYS if marks[k]]
        # review 6, F4: lead with the comparison at equal (target) power
        if d.get("planned_withheld"):
            verdict = "planned for the target power: not given (biased: see the main table)"
        elif plan and plan.get("fixed_days") is not None and plan.get("expected_days_effect") is not None:
            ds = plan["days_saved_effect"]
            verdict = (f"planned for the target power: {_fmt_days(plan['expected_days_effect'])}"
                       f"{marks['expected_days_effect']} days expected (max {_fmt_days(plan['max_days'])}"
                       f"{marks['max_days']}, {_fmt_days(plan['expected_days_null'])}{marks['expected_days_null']} "
                       f"under H0) vs {_fmt_days(plan['fixed_days'])}{marks['fixed_days']} fixed: "
                       f"{'saves' if ds >= 0 else 'costs'} {_fmt_days(abs(ds))}"
                       + ("?" if marks["fixed_days"] or marks["expected_days_effect"] else ""))
        elif plan and plan.get("fixed_days") is not None:
            verdict = (f"planned for the target power: fixed horizon {_fmt_days(plan['fixed_days'])}"
                       f"{marks['fixed_days']} days, the sequential maximum "
                       f"({value_text(plan['inflation_factor'])}x the "
                       f"information) beyond this population's SE floor{marks['max_days']}")
        elif e["rule"] != "none":
            verdict = "planned for the target power: not reachable with this population"
        else:
            verdict = "no sequential rule"
        # a biased design's power is not a sensitivity: no comparison at equal power
        simulated = "" if d.get("planned_withheld") else _simulated_text(e, d, fixed)
        verdict += ("; " + simulated) if simulated else ""
        lines.append(f"  {design:14s} {rule:26s} {looks:>12s} {aa:>12s} {rate_text(d['power']):>6s} "
                     f"{_fmt_days(d['mean_decision_day']):>5s}   {verdict}")
    lines.append("  (tau planned from the mean SE at the horizon unless set; spending boundaries at the information "
                 "fractions of the mean SEs by look; planned: the fixed")
    lines.append("  horizon and the design sized for the target power (its inflation factor), expected days from its "
                 "exact stopping probabilities by look,")
    lines.append("  information turned into days with the variance model se^2 = a/N + b; simulated: the share of "
                 "replicates that decided and their mean day; at equal")
    lines.append("  power: the first look from which the fixed horizon's simulated power (each look as the horizon, "
                 "as the curves) stays at the rule's, against")
    lines.append("  the rule's mean day (the last day when no decision); see summary.json 'sequential')")
    nulls = {x: seq[x]["decision"] for x in degenerate if null_rate_text(seq[x]["decision"])}
    if nulls:
        biased = [x for x in nulls if (seq[x].get("null_monitoring") or {}).get("biased")]
        lines.append(null_rate_note(nulls, biased))
    if set(degenerate) - set(nulls):
        from simulations.report import aa_degenerate_note

        lines.append(aa_degenerate_note([x for x in degenerate if x not in nulls]))
    if unstable:
        from simulations.analysis import SIZE_BOOTSTRAP

        lines.append(f"  '?' unstable planned days (90% range of the a/N + b fit on {SIZE_BOOTSTRAP} bootstrap "
                     "resamples of the replicates, as the main table's sizes): " + "; ".join(
                         f"{design} {_PLANNED_KEYS[k]} {_range_days(u)}" for design, k, u in unstable))
    return lines


def null_rate_text(rec: dict[str, Any]) -> str:
    """'null 0.100' ('!' above its 99% band): a rule's rate on the design's null-variant replicates (``null_*``
    keys of a rule record, or a :func:`simulations.sequential._null_rate` record); 'truth 0.100' for its rate on the
    design's own replicates tested at their exact truth (``kind`` ``truth``); '' when there is none."""
    r = rec.get("null_false_positive_rate", rec.get("false_positive_rate"))
    ok = rec.get("null_within_band_or_below", rec.get("within_band_or_below"))
    if r is None or not math.isfinite(r):
        return ""
    return f"{_kind(rec)} {r:.3f}" + ("" if ok else "!")


def _kind(rec: Mapping[str, Any]) -> str:
    return str(rec.get("null_kind", rec.get("kind", "null")))


def null_rate_note(designs: Any, biased: Any = ()) -> str:
    """What a 'null' or 'truth' rate in place of a degenerate A/A rate is (review 6, F3): the monitoring and
    sequential tables. ``designs``: name -> the rule record shown (a mapping), or names (read as null-variant
    rates). One line per kind shown, joined by newlines."""
    records = designs if isinstance(designs, Mapping) else dict.fromkeys(designs, {})
    lines = []
    for kind in ("null", "truth"):
        names = [d for d, rec in records.items() if _kind(rec or {}) == kind]
        if not names:
            continue
        some = records[names[0]] or {}
        band = some.get("null_binomial_99_band") or some.get("binomial_99_band")
        band_text = f" {band[0]:.3f}-{band[1]:.3f}" if band else ""
        if kind == "null":
            text = (f"  null ({', '.join(names)}): the design's A/A compares A with itself and is identically 0 (every "
                    "comparison a tie), so it cannot reject under any rule; in its place the same rule on the design's "
                    "null-variant replicates (the same traffic with the null user, whose clicks ignore relevance: "
                    "every true effect 0), share that ever reject either way, '!' above the 99% binomial band of alpha"
                    + band_text + ": the rule's false-positive rate under a real null")
        else:
            text = (f"  truth ({', '.join(names)}): the design's A/A compares A with itself and is identically 0 (the "
                    "off-policy paired difference 0), so it cannot reject under any rule; in its place the same rule "
                    "on the design's own replicates testing their exact true effect (H0: B - A = the truth from the "
                    "click models, true in every replicate: the rule on estimate - truth with the same SEs), share "
                    "that ever reject either way, '!' above the 99% binomial band of alpha" + band_text + ": the "
                    "rule's false-positive rate when its null holds (the fixed-horizon rule's: 1 - its coverage of "
                    "the truth; fixed and peeking take each look's t, with the difference's degrees of freedom, the "
                    "mSPRT and O'Brien-Fleming rules that t as the normal deviate of the same tail probability), "
                    "with the estimator's bias and its SE's "
                    "error by look")
        mine = [d for d in biased if d in names]
        if mine:
            text += (f"; {', '.join(mine)} biased ({'null check' if kind == 'null' else 'see the main table'}): its "
                     f"{kind} rate counts its bias as well, not only false positives")
        lines.append(text)
    return "\n".join(lines)


def _simulated_text(e: dict[str, Any], d: dict[str, Any], fixed: dict[str, Any]) -> str:
    """The rule at the simulated length (review 6, F4): the share of replicates that decided and their mean day,
    then the comparison at equal power: the day from which the fixed horizon's simulated power stays at the rule's
    (not the last day, where the fixed horizon has more power)."""
    from simulations.report import rate_text

    if "no_decision" not in d or not e.get("look_days") or "fixed_day_at_power" not in d:
        return ""  # a summary from before review 6
    last = e["look_days"][-1]
    decided = 1.0 - d["no_decision"]
    text = f"simulated {_fmt_days(last)} days: decided in {rate_text(decided)}"
    if d.get("mean_decision_day_decided") is not None:
        text += f" on day {_fmt_days(d['mean_decision_day_decided'])} on average"
    if e["rule"] == "none":
        return text
    power, at = d["power"], d.get("fixed_day_at_power")
    if power <= 0:
        return text + f", power 0 (fixed horizon: {rate_text(fixed['power'])} on day {_fmt_days(last)})"
    if at is None:
        return text + (f"; power {rate_text(power)}, above the fixed horizon's {rate_text(fixed['power'])} on day "
                       f"{_fmt_days(last)}")
    saved = d["days_saved_at_equal_power"]
    return text + (f"; the fixed horizon's power is at least {rate_text(power)} from day {_fmt_days(at)} "
                   f"({rate_text(fixed['power'])} on day {_fmt_days(last)}): at equal power the rule's mean "
                   f"{_fmt_days(d['mean_decision_day'])} days {'save' if saved >= 0 else 'cost'} "
                   f"{_fmt_days(abs(saved))}")


#: the planned numbers with a '?' when unstable, and how the range line names them
_PLANNED_KEYS = {"expected_days_effect": "expected", "max_days": "max", "expected_days_null": "under H0",
                 "fixed_days": "fixed"}


def _range_days(u: dict[str, Any]) -> str:
    """A planned number's 90% range over the refits, with its relative SE, floor ratio and unreachable share."""
    from simulations.analysis import spread_text

    return spread_text(u.get("range"), _fmt_days, u.get("rel_se"), u.get("floor_ratio"), u.get("unreachable_share"),
                       floor_of="the se^2 it needs", floor_fitted=u.get("floor_fitted", True))
