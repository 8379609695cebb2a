"""The simulate report's A/A calibration, null (bias) check and decision sections.

:func:`calibration_section` (A/A false-positive rates, the null check, daily monitoring: :func:`_monitoring`) and
:func:`checks_section` (the designs' sequential and multiple-comparison decisions, SRM and CUPED as their terminal
text). Part of :mod:`simulations.html_report.simulate`, which re-exports it.
"""

from __future__ import annotations

from typing import Any

from simulations.analysis import is_biased_entry as is_biased
from simulations.html_report.page import Html, biased_mark, esc, fmt, join, note, table, tag, tree
from simulations.report import (
    days_text,
    null_biased_verdict,
    null_delta_text,
    null_detects_text,
    null_rate_note,
    null_unflagged_parts,
    rate_text,
    se_text,
)
from simulations.report_sizes import AA_EXCESS_LEAD, aa_excess_texts


def calibration_section(summary: dict[str, Any]) -> Html:
    """A/A false-positive rates, the null check of interleaving designs and daily monitoring."""
    conv = summary.get("conventions") or {}
    rows, null_rows = [], []
    for design, metrics in (summary.get("designs") or {}).items():
        for metric, e in metrics.items():
            aa = e.get("aa")
            if aa is not None:
                band = aa.get("binomial_99_band") or [None, None]
                within = "ties: cannot reject" if aa.get("degenerate") else (
                    "yes" if aa.get("within_band") else tag("span", "no", cls="flag"))
                rows.append([design, metric, rate_text(aa.get("false_positive_rate")), str(aa.get("replicates")),
                             f"{rate_text(band[0])} - {rate_text(band[1])}", within])
            n = e.get("null")
            if n:
                rate, analytic = n.get("rejection_rate") or [], n.get("rejection_rate_analytic") or []
                simulated = "replicates" in n
                if n.get("biased"):
                    verdict: Any = join([biased_mark("BIASED"), null_biased_verdict(n, metric)[len("BIASED"):]])
                else:
                    # review 9, F3: a notable null replicates' mean test is quoted next to an unflagged z
                    verdict, caution = null_unflagged_parts(n)
                    if caution:
                        verdict = join([verdict, "; ", tag("span", caution, cls="flag")])
                if null_rate_note(n, metric):
                    verdict = join([verdict, "; ", tag("span", null_rate_note(n, metric), cls="flag")])
                verdict = join([verdict, "; detects " + null_detects_text(n, e.get("true_effect"))])
                exact = bool(n.get("exact"))
                null_rows.append([design, metric, null_delta_text(n),
                                  "exact" if exact else se_text(n.get("se")), "-" if exact else fmt(n.get("z"), ".1f"),
                                  rate_text(rate[0] if rate and simulated else None),
                                  rate_text(rate[-1] if rate and simulated else None),
                                  rate_text(analytic[-1] if analytic else None), verdict])
    parts: list[Any] = []
    if rows:
        parts.append(table(["design", "metric", "A/A FPR (last day)", "replicates", "99% binomial band of alpha",
                            "within band"], rows, caption="A/A calibration (B replaced by A)", text_columns=(0, 1, 5)))
        parts += [note(AA_EXCESS_LEAD, text) for text in aa_excess_texts(summary)]
    else:
        parts.append(note("No A/A runs in this simulation (analysis.aa: false)."))
    if null_rows:
        parts.append(table(["design", "metric", "null Delta", "+- SE", "z", "rejects day 1", "rejects last day",
                            "analytic last day", "verdict"], null_rows,
                           caption="Null check: clicks that do not depend on relevance (every true effect 0)",
                           text_columns=(0, 1), wrap_columns=(8,)))  # review 12, F4: the verdict wraps
        parts.append(note("Null check: ", conv.get("null_check", "-")))
    parts.append(_monitoring(summary))
    parts.append(_decision_blocks(summary))
    return join(parts)


def _decision_blocks(summary: dict[str, Any]) -> Html:
    """Each design's own sequential rule and the multiple-comparison corrections, as the
    terminal summary prints them (their own formatters, from the same summary.json)."""
    from simulations.multiple import multiple_lines
    from simulations.sequential import sequential_lines

    batch_hours = ((summary.get("config") or {}).get("traffic") or {}).get("batch_hours", 24)
    parts: list[Any] = []
    for key, title, lines in (("sequential", "Sequential decisions", sequential_lines),
                              ("multiple", "Multiple comparisons", multiple_lines)):
        if not summary.get(key):
            continue
        try:
            text = lines(summary, batch_hours) if key == "sequential" else lines(summary)
        except (KeyError, TypeError, ValueError):  # a newer summary than its formatter: show it as it is
            parts += [tag("h3", title), tree(summary[key])]
            continue
        if text:
            parts += [tag("h3", title), tag("pre", "\n".join(line for line in text if line.strip()))]
    return join(parts)


_BLOCK_FORMATTERS = {
    "decomposition": ("simulations.decomposition", "decomposition_lines"),
    "srm": ("simulations.srm", "srm_lines"),
    "cuped": ("simulations.cuped", "cuped_lines"),
}


def _terminal_block(summary: dict[str, Any], key: str, title: str) -> Html:
    """The summary's ``key`` block as the terminal summary prints it (its own formatter, from
    the same summary.json; its first line, the heading, becomes ``title``); empty when absent."""
    import importlib

    if not summary.get(key):
        return join([])
    module, name = _BLOCK_FORMATTERS[key]
    try:
        lines = getattr(importlib.import_module(module), name)(summary)
    except (KeyError, TypeError, ValueError):  # a newer summary than its formatter: show it as it is
        return join([tag("h3", title), tree(summary[key])])
    body = [ln for ln in lines if ln.strip()]
    if not body:
        return join([])
    head, rest = body[0], body[1:]
    return join([tag("h3", title), tag("p", head, cls="note"), tag("pre", "\n".join(rest))])


def checks_section(summary: dict[str, Any]) -> Html | None:
    """Sample ratio mismatch checks and CUPED variance reduction of the A/B designs (when configured)."""
    if not summary.get("srm") and not summary.get("cuped"):
        return None
    return join([_terminal_block(summary, "srm", "Sample ratio mismatch"),
                 _terminal_block(summary, "cuped", "CUPED: variance reduction from a pre-period")])


_RULES = (("fixed", "fixed horizon"), ("peeking", "peeking (p < alpha daily)"), ("msprt", "mSPRT (always valid)"),
          ("obrien_fleming", "O'Brien-Fleming"))


def _monitoring(summary: dict[str, Any]) -> Html:
    from simulations.report import aa_degenerate_note
    from simulations.sequential import null_rate_note as null_rate_legend, null_rate_text

    mon = summary.get("monitoring") or {}
    if not mon:
        return esc("")
    rows = []
    # review 6, F3 (as the terminal's table): a design whose A/A is identically 0 shows each rule's rate on its
    # null-variant replicates, read from summary.json sequential[design].null_monitoring
    seq = summary.get("sequential") or {}
    nulls: dict[str, Any] = {}
    degenerate: list[str] = []
    for design, e in mon.items():
        entry = (summary.get("designs") or {}).get(design, {}).get(e.get("metric"), {})
        metric: Any = join([e.get("metric"), " ", biased_mark()]) if is_biased(entry) else e.get("metric")
        cells: list[Any] = [design, metric]
        null_rules = ((seq.get(design) or {}).get("null_monitoring") or {}).get("rules") or {}
        for rule, _ in _RULES:
            r = (e.get("rules") or {}).get(rule) or {}
            null = null_rate_text(null_rules.get(rule) or {}) if r.get("aa_degenerate") else ""
            if null:  # 'null 0.160!': '!' above alpha's 99% band
                aa: Any = join([null.rstrip("!"), tag("span", "!", cls="flag") if null.endswith("!") else ""])
                nulls[design] = null_rules[rule]
            elif r.get("aa_degenerate"):
                aa = "-"  # review 3, M6: identical arms cannot show what the rule does under a real null
                degenerate.append(design)
            elif "aa_false_positive_rate" in r:
                aa = rate_text(r["aa_false_positive_rate"])
                if not r.get("aa_within_band_or_below"):
                    aa = join([aa, " ", tag("span", "above band", cls="flag")])
            else:
                aa = "-"
            cells.append(join([aa, f" / {rate_text(r.get('power'))} / {days_text(r.get('mean_decision_day'))}"]))
        rows.append(cells)
    days = next(iter(mon.values())).get("days")
    notes = [note("A/A: share of A/A replicates that ever reject under the rule; power: rejections with the right "
                  "sign; day: mean day of the decision (the last day when none). mSPRT's mixture scale and "
                  "O'Brien-Fleming's information fractions are planned from the mean SEs by day.")]
    if nulls:
        biased = [d for d in nulls if seq[d]["null_monitoring"].get("biased")]
        notes += [note(line.strip() + ".") for line in null_rate_legend(nulls, biased).splitlines()]
    if degenerate:
        notes.append(note(aa_degenerate_note(dict.fromkeys(degenerate)).strip() + "."))
    return join([
        table(["design", "metric", *(f"{label}: A/A / power / day" for _, label in _RULES)], rows,
              caption=f"Daily monitoring ({days} looks, primary metrics)", text_columns=(0, 1)),
        *notes,
    ])
