"""The simulate report's counterfactual section: the off-policy estimators against the exact truth.

:func:`counterfactual_section`: every design's estimation error with its coverage and support, the cost of
logging and the assumption sweep. Part of :mod:`simulations.html_report.simulate`, which re-exports it.
"""

from __future__ import annotations

from typing import Any

from pathlib import Path
from types import SimpleNamespace

from simulations.analysis import is_biased_entry as is_biased
from simulations.html_report.page import Html, biased_mark, count, esc, fmt, image, join, note, table, tag
from simulations.plots import swept_parameter_label
from simulations.report import rate_text, se_text, value_text
from simulations.report_designs import (
    UNDEFINED_NOTE,
    _counterfactual_lines,
    _coverage_cell,
    check_cell,
    check_lines,
    logging_cost_text,
)
from simulations.report_sizes import OTHER_MEASURE_MARK, _other_measure, sample_size_cells


def _coverage(e: dict[str, Any]) -> Html:
    """An estimator's interval coverage, flagged outside the 99% binomial band of a valid interval's."""
    cov = esc(rate_text(e.get("coverage")))
    if e.get("coverage_within_band") is not False:
        return cov
    lo, hi = e.get("coverage_band") or (None, None)
    return join([cov, tag("span", f" outside {rate_text(lo)}-{rate_text(hi)}", cls="flag")])


def _support_cell(e: dict[str, Any]) -> Html:
    """The terminal's support column of one estimator ('B 20,104 (72%)' per target), flagged where a target
    has events of logging probability 0."""
    sv = e.get("support_violations") or {}
    text = ", ".join(f"{t} {count(v.get('violations_mean'))} ({fmt(100 * v['share'], '.0f')}%)"
                     for t, v in sv.items() if isinstance(v.get("share"), (int, float))) or "-"
    bad = [t for t, v in sv.items() if (v.get("violations_mean") or 0) > 0]
    if not bad:
        return esc(text)
    return join([text, tag("span", f" cannot evaluate {', '.join(bad)} where its logging probability is 0",
                           cls="flag")])


def _logging_cost(cost: dict[str, Any]) -> Html | None:
    """The cost of logging line: the logger's own metrics observed on the traffic it served against ranker A's
    exact values, as the terminal prints it."""
    if not cost:
        return None
    items = [logging_cost_text(m, c) for m, c in cost.items()]
    return tag("p", tag("strong", "Cost of logging: "), "the logger's own metrics observed on the traffic it served "
               "(mean over replicates) vs ranker A's exact values (+-: the mean's SE over the replicates): "
               + "; ".join(items), cls="lead")


def _swept_label(sweep: dict[str, Any], summary: dict[str, Any]) -> str:
    """The swept parameter as the plot labels it (:func:`simulations.plots.swept_parameter_label`: a user
    type's share names the type), from the summary's effective config."""
    types = (((summary.get("config") or {}).get("users") or {}).get("types")) or []
    users = SimpleNamespace(types=[SimpleNamespace(name=t.get("name"), click_model=t.get("click_model") or {})
                                   for t in types if isinstance(t, dict)])
    return swept_parameter_label(str(sweep.get("parameter")), SimpleNamespace(users=users))


def _sweep_table(sweep: dict[str, Any], summary: dict[str, Any]) -> Html:
    """The assumption sweep's numbers as the terminal prints them: the exact truth and each estimator's error
    +- SE at every value, labelled as one log's error (review 3, M5)."""
    values = sweep.get("values") or []
    rows: list[list[Any]] = [["truth (exact)", *(value_text(t, True) for t in sweep.get("truth") or [])]]
    for label, e in (sweep.get("estimators") or {}).items():
        rows.append([label, *(f"{value_text(b, True)} +- {se_text(se)}"
                              for b, se in zip(e.get("bias") or [], e.get("se") or [], strict=False))])
    label = sweep.get("error_label") or (f"estimate - exact truth of one {count(sweep.get('impressions'))}-impression "
                                         "log per value, +- that log's SE")
    return table([_swept_label(sweep, summary), *(fmt(v, "g") for v in values)], rows,
                 caption=f"Assumption sweep ({sweep.get('design')}, {sweep.get('metric')}): {label}")


class _Present(dict):  # type: ignore[type-arg]
    """An empty mapping that tests true (``if not cf`` passes, no item to read)."""

    def __bool__(self) -> bool:
        return True


def _estimation_error_table(summary: dict[str, Any]) -> Html:
    """The terminal's 'Estimation error on the last day' block (every design: A/B, interleaving and each
    estimator) as a table: its title is the terminal's, its cells the terminal's own helpers' (review 12, F3)."""
    population = ((summary.get("config") or {}).get("users") or {}).get("population")
    # the terminal's title line: the block's helper on no rows (a non-empty-looking empty counterfactual
    # mapping), so a summary the terminal helper cannot read (an older or partial one) still gets its title
    bare = {"designs": {}, "counterfactual": _Present()}
    result = SimpleNamespace(summary=bare, config=SimpleNamespace(users=SimpleNamespace(population=population)))
    title = _counterfactual_lines(result)[1].rstrip(":")  # type: ignore[arg-type]
    rows = []
    for design, metrics in (summary.get("designs") or {}).items():
        for metric, e in metrics.items():
            fd = e.get("final_day") or {}
            rows.append([design if e.get("primary") else "", metric, value_text(e.get("true_effect"), True),
                         value_text(e.get("estimator_bias"), True), se_text(e.get("estimator_bias_se")),
                         se_text(fd.get("sd_estimate")), se_text(fd.get("rmse")),
                         _coverage_cell(fd.get("coverage"), e.get("coverage_within_band")),
                         rate_text(fd.get("power")) + (OTHER_MEASURE_MARK if _other_measure(e) else ""),
                         sample_size_cells(e, population)["impressions"] if e.get("detectable", True) else "-"])
    return table(["design", "metric", "true effect", "bias", "+-", "SD", "RMSE", "coverage", "power@end",
                  "impr. needed"], rows, text_columns=(0, 1), caption=title, id_="estimation-error")


def counterfactual_section(folder: Path, summary: dict[str, Any]) -> Html | None:
    cf = summary.get("counterfactual") or {}
    sweep = summary.get("assumption_sweep")
    if not cf and not sweep:
        return None
    parts: list[Any] = [_estimation_error_table(summary)] if cf else []
    for name, d in cf.items():
        rows = []
        entries = (summary.get("designs") or {}).get(name) or {}
        for label, e in (d.get("estimators") or {}).items():
            entry = entries.get(label) or {}
            mark = biased_mark("no support") if entry.get("no_support") else biased_mark()
            shown: Any = join([label, " ", mark]) if is_biased(entry) else label
            rows.append([shown, value_text(e.get("bias"), True), se_text(e.get("bias_se")), se_text(e.get("rmse")),
                         _coverage(e), fmt(e.get("undefined_share"), ".0%"), _support_cell(e),
                         check_cell(e.get("bias_check")), e.get("assumption", "-")])
        parts.append(table(["estimator", "bias", "+- SE", "RMSE", "coverage", "undef.", "support violated (impr.)",
                            "check", "assumption"], rows,
                           text_columns=(0, 6, 7), wrap_columns=(8,),
                           caption=f"{name}: V({(d.get('targets') or ['A', 'B'])[-1]}) - "
                                   f"V({(d.get('targets') or ['A'])[0]}) of {d.get('metric')}, exact truth "
                                   f"{value_text(d.get('true_effect'), True)}"))
        parts.append(note("support violated: mean impressions per replicate on the last day whose target list has an "
                          "event of logging probability 0 at the estimator's level (counted exactly); where it is not "
                          "0 the estimator cannot evaluate that target there and is biased (marked 'no support', its "
                          "sizes withheld) whatever the t-test of its bias says. " + UNDEFINED_NOTE[0].upper()
                          + UNDEFINED_NOTE[1:] + ". " + (d.get("whole_log_refit") or "").capitalize() + "."))
        for line in check_lines(d.get("estimators") or {}):
            parts.append(note(line.strip()[0].upper() + line.strip()[1:] + "."))
        held = [(label, e) for label, e in (d.get("estimators") or {}).items() if e.get("se_measure")
                and str(e["se_measure"]).startswith("replicates'")]
        for label, e in held:
            parts.append(note(f"{label}: sizes and analytic power from the {e['se_measure']}; power: "
                              f"{e.get('power_measure')}."))
        cost = _logging_cost(d.get("logging_cost") or {})
        if cost is not None:
            parts.append(cost)
    if cf:
        parts.append(image(folder / "counterfactual_rmse.png", "RMSE against log size per estimator",
                           "RMSE of each estimator against the number of logged impressions (daily checkpoints)."))
    if sweep:
        parts.append(image(folder / "assumption_sweep.png", "bias of each estimator across the swept assumption",
                           f"One log's error +-2 SE of each estimator as {sweep.get('parameter')} moves."))
        parts.append(_sweep_table(sweep, summary))
    conv = summary.get("conventions") or {}
    if cf:
        parts.append(note("coverage: share of replicates whose interval holds the exact truth on the last day; "
                          "flagged outside the exact 99% binomial band of a valid interval's (below: the intervals "
                          "under-cover or the estimate is biased; above: conservative); a Monte Carlo truth's own "
                          "error widens its lower end."))
    parts.append(note("Counterfactual effect: ", conv.get("counterfactual_effect", "-")))
    return join(parts)
