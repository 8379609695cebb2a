"""The HTML report of one ``onlineeval simulate`` results folder.

A view of what :func:`simulations.report.write_results` wrote (``summary.json``,
``curves.csv``, ``config.effective.yaml``, the PNG plots): it formats those numbers and
computes none of its own. Sections, answer first: the answer (days, users and impressions
per design at the target power, shrinkage of the offline gain), power versus days, the
offline-to-online shrinkage, A/A calibration and the null (bias) check with daily
monitoring and the designs' own sequential and multiple-comparison decisions (their
terminal text, from :mod:`simulations.sequential` and :mod:`simulations.multiple`), the
counterfactual estimators when present, any other result as it is, the conventions every
number was computed under and the effective config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulations.analysis import is_biased_entry as is_biased
from simulations.report import (
    biased_ratio_why,
    days_text,
    EXTRAPOLATION_FLAG,
    extrapolated_days_text,
    INDISTINGUISHABLE_SHORT,
    extrapolated_entries,
    extrapolation_factor_text,
    extrapolation_note,
    null_biased_verdict,
    null_detectable_text,
    null_rate_note,
    null_unflagged_parts,
    offline_conventions_text,
    pair_range_text,
    percent_text,
    rate_text,
    ratio_uncertainty_text,
    sample_size_cells,
    se_text,
    TRUTH_PRECISION_NOTE,
    truth_precision_items,
    truth_world_cell,
    truth_world_items,
    truth_world_note,
    value_text,
    world_sampling_text,
)
from simulations.html_report.page import (
    Html,
    biased_mark,
    count,
    esc,
    fmt,
    image,
    join,
    note,
    read_json,
    table,
    tag,
    tag_void,
    tree,
)

__all__ = ["answer_rows", "is_biased", "population_of", "sample_size_html", "simulate_sections"]

#: top-level keys of summary.json rendered by their own section (any other key is shown
#: under "Other results", so a new result is never silently left out)
KNOWN_KEYS = frozenset({
    "onlineeval_version", "stream_version", "config_fingerprint", "conventions", "world", "truth", "offline", "designs",
    "required_impressions_ratio", "monitoring", "truth_by_segment", "config", "counterfactual",
    "assumption_sweep", "sequential", "multiple", "decomposition", "cuped", "srm",
})


def _cells_without_population(e: dict[str, Any]) -> dict[str, str]:
    """:func:`simulations.report.sample_size_cells` for a summary without its config (no population to cap
    the users needed by)."""
    cells = sample_size_cells(e, 0)
    if cells["users"] == "whole population":
        cells["users"] = count(e.get("analytic_required_users"))
    return cells


def population_of(summary: dict[str, Any]) -> Any:
    """The user population of a simulate summary (its config), None when it has none."""
    return ((summary.get("config") or {}).get("users") or {}).get("population")


def sample_size_html(e: dict[str, Any], population: Any) -> dict[str, Any]:
    """The answer table's analytic power, days, impressions and users needed of one summary entry: the
    terminal's :func:`simulations.report.sample_size_cells` ('?' when unstable, '> 1 year', 'whole population',
    '-' when biased), with the biased mark as the impressions of a biased entry. Shared by the simulate report
    and the sweep report's per-point table."""
    cells: dict[str, Any] = dict(sample_size_cells(e, population) if population else _cells_without_population(e))
    if is_biased(e):
        cells["impressions"] = biased_mark("no support") if e.get("no_support") else biased_mark()
    return cells


def _aa(e: dict[str, Any]) -> Html:
    aa = e.get("aa")
    if aa is None:
        return esc("-")
    if aa.get("degenerate"):
        return esc("0 (ties)")
    rate = esc(rate_text(aa.get("false_positive_rate")))
    return rate if aa.get("within_band") else join([rate, tag("span", " outside band", cls="flag")])


def answer_rows(summary: dict[str, Any]) -> tuple[list[list[Any]], list[str | None]]:
    """One row per design and metric of the answer table, and the rows' classes."""
    rows: list[list[Any]] = []
    classes: list[str | None] = []
    population = population_of(summary)
    for design, metrics in (summary.get("designs") or {}).items():
        for metric, e in metrics.items():
            fd = e.get("final_day") or {}
            biased = is_biased(e)
            rel = e.get("relative_effect")
            power: Any = rate_text(fd.get("power"))
            if e.get("power_measure"):  # an estimate whose SE holds a data-driven choice fixed (review 3, F-A)
                power = join([power, tag("sup", "b" if str(e["power_measure"]).startswith("last day") else "w")])
            null = e.get("null")
            cells = sample_size_html(e, population)
            days, impr, users = cells["days"], cells["impressions"], cells["users"]
            name: Any = join([design, " ", biased_mark()]) if biased else design
            null_s: Any = "-" if null is None else value_text(null.get("delta"), True)
            if null is not None and null.get("biased"):
                null_s = join([null_s, " ", biased_mark()])
            effect: Any = value_text(e.get("true_effect"), True)
            world = truth_world_cell(e.get("true_effect"), e.get("true_effect_world_se"))
            if world is not None:  # review 4, F1: its SE over drawn worlds (the legend gives what it does to sizes)
                effect = join([effect, tag_void("br"), tag("small", world)])
            precision = e.get("truth_precision") or {}
            if precision and not precision.get("adequate"):  # review 4, F3: its Monte Carlo SE is not small
                share = f"MC 4 SE {100 * precision['four_se_share']:.0f}%!"
                effect = join([effect, tag_void("br"), tag("small", share)])
            rows.append([
                name, metric, effect, percent_text(rel),
                value_text(e.get("shrinkage_vs_offline")),
                power, cells["analytic"], days, impr, users,
                _aa(e), null_s,
            ])
            classes.append("primary" if e.get("primary") else "secondary")
    return rows, classes


def _ratios(summary: dict[str, Any]) -> list[Html]:
    r = summary.get("required_impressions_ratio") or {}
    ref = r.get("reference")
    if not ref:
        return []
    biased = r.get("biased") or {}
    target = (summary.get("conventions") or {}).get("target_power")
    items = []
    for d, need in (r.get("ratios") or {}).items():
        if d == ref:
            continue
        eff = (r.get("equal_traffic_efficiency") or {}).get(d)
        if d in biased:
            b = biased[d]
            why = biased_ratio_why(b)
            items.append(tag("li", d, ": ", biased_mark(), f" ({why}): its ratios are not sensitivities"))
            continue
        pairs = (r.get("by_pair") or {}).get(d)
        text = (f"{d}: information per impression {value_text(eff)}x"
                f"{ratio_uncertainty_text((r.get('equal_traffic_efficiency_rel_se') or {}).get(d))}"
                f"{pair_range_text(pairs, 'efficiency')} {ref}'s")
        if isinstance(need, (int, float)):
            text += ((f"; impressions needed for {fmt(100 * target, '.0f')}% power " if target else "; impressions "
                      "needed ") + f"{value_text(need)}x{ratio_uncertainty_text((r.get('ratios_rel_se') or {}).get(d))}"
                     f"{pair_range_text(pairs, 'ratio')} {ref}'s"
                     + (f" ({value_text(1 / need)}x fewer)" if 0 < need < 1 else ""))
        items.append(tag("li", text))
    if not items:
        return []
    for key, what in (("equal_traffic_efficiency", "information per impression"), ("ratios", "impressions needed")):
        same = (r.get("indistinguishable") or {}).get(key) or []
        if same:
            items.append(tag("li", f"not distinguishable ({what}; {INDISTINGUISHABLE_SHORT}): "
                                   + ", ".join(f"{a} ~ {b}" for a, b in same)))
    return [tag("p", f"Relative to {ref} (last simulated day {r.get('last_day')}; +-: 1 relative SE by the delta "
                     "method from the truths' Monte Carlo SEs and the SEs' or sizes' own, '?' above 25%"
                     + ("; multileaving: median over the pairs, their range in brackets, an end marked '?' / '*' "
                        f"when its pair's size is unstable / extrapolated beyond {EXTRAPOLATION_FLAG:g}x the "
                        "simulated days" if r.get("by_pair") else "") + "):",
                cls="lead"), tag("ul", *items)]


def _multileaving(summary: dict[str, Any]) -> list[Html]:
    """The rankers' exact online values and the pairwise error rates by day (review 6, F5), as the terminal's."""
    from simulations.report import multileaving_lines

    lines = multileaving_lines(summary)
    if not lines:
        return []
    return [tag("p", lines[1].strip(), cls="lead"), tag("p", lines[2].strip()),
            tag("ul", *(tag("li", ln.strip()) for ln in lines[3:]))]


def _offline_line(summary: dict[str, Any]) -> Html:
    off = summary.get("offline") or {}
    if not off:
        return esc("")
    a, b, d = off.get("A") or {}, off.get("B") or {}, off.get("delta") or {}
    rel = off.get("relative_gain_weighted")
    return tag(
        "p",
        tag("strong", f"Offline {off.get('metric')}: "),
        f"A {value_text(a.get('weighted'))}, B {value_text(b.get('weighted'))}, "
        f"delta {value_text(d.get('weighted'), True)}"
        + (f" ({percent_text(rel)})" if isinstance(rel, (int, float)) else "")
        + f" frequency-weighted; uniform over queries: delta {value_text(d.get('uniform'), True)}"
        + _offline_conventions(summary, off)
        + _world_note(summary, off),
        cls="lead",
    )


def _world_note(summary: dict[str, Any], off: dict[str, Any]) -> str:
    """'. One drawn world: ...' (review 4, F1: the terminal's note under the Offline line), '' when not known."""
    note = world_sampling_text(off, _collection_type(summary) != "trec")
    return f". {note[0][0].upper()}{note[0][1:]} {note[1]}." if note else ""


def _collection_type(summary: dict[str, Any]) -> Any:
    """The run's collection type ('synthetic', 'trec') from its effective config."""
    return ((summary.get("config") or {}).get("collection") or {}).get("type")


def _offline_conventions(summary: dict[str, Any], off: dict[str, Any]) -> str:
    """' (gain ..., cut-off ...)' of the offline metric (review 4, F4), '' when not known."""
    depth = ((summary.get("config") or {}).get("rankers") or {}).get("depth")
    text = offline_conventions_text(str(off.get("metric")), depth)
    return f" ({text})" if text else ""


ANSWER_HEADER = ["design", "metric", "true effect", "rel.", "shrinkage (freq-wtd)", "power at end", "analytic power",
                 "days to target power", "impressions needed", "users needed", "A/A FPR", "null Delta"]


def answer_section(summary: dict[str, Any]) -> Html:
    conv = summary.get("conventions") or {}
    alpha, target = conv.get("alpha"), conv.get("target_power")
    rows, classes = answer_rows(summary)
    header = list(ANSWER_HEADER)
    if isinstance(target, (int, float)):
        header[header.index("days to target power")] = f"days to {fmt(100 * target, '.0f')}% power"
    caption = (f"Per design: days, users and impressions for {fmt(100 * target, '.0f')}% power at alpha "
               f"{fmt(alpha, 'g')}" if isinstance(target, (int, float)) else "Per design")
    legend = [
        [("true effect: population value of the design's statistic, B - A (interleaving: Delta_AB, + favours B; "
         "methods differ in scale: compare their sample sizes); rel.: relative to A; shrinkage (freq-wtd): online "
         "relative improvement / offline relative gain, the frequency-weighted gain as the terminal's "
         "shrink(freq-wtd) (the decomposition's total divides by the uniform one); lower abandonment counts as "
         "better; unstable when the metric's base rate is tiny.")],
        [("power at end: share of replicates rejecting at alpha with the sign of the true effect on the last day; "
         "analytic: the same from the true effect and the mean SE.")],
        [("days to target power: first simulated day from which power stays >= target; ~N*: analytic, from "
         "se^2 = a/N + b "
         "fitted to the daily checkpoints, beyond the simulated days ('> 1 year': more than 365 days); never / not "
         "reachable: the SE floor of this user population is above what the target needs. impressions / users "
         "needed: analytic for the target power, for A/B designs totals over both arms (not per arm; "
         "interleaving has no arms: every impression and user counts; users: expected distinct users; 'whole "
         "population': at least 99% of them). '?': unstable, the fitted floor b is above 80% of the target se^2 "
         "or the size's relative SE "
         "(refits on bootstrap resamples of the replicates) above 25%, or the analytic days are extrapolated "
         f"beyond {EXTRAPOLATION_FLAG:g}x the simulated days (model-dependent); summary.json "
         "analytic_required_impressions_range gives the refits' 90% range, which leaves out the a/N + b model's "
         "own error.")],
        [("A/A FPR: rejection rate with B replaced by A ('outside band': outside its 99% binomial band; '0 (ties)': "
         "every comparison is a tie, so A/A cannot reject). null Delta: expected Delta when clicks do not depend on "
         "relevance (every true effect 0).")],
        [biased_mark(), (": the null check (or, for any estimate, the exact truth: the mean misses it beyond chance, "
                          "a t-test at the level of 4 normal SEs) finds "
         "it biased on these rankers; its power measures its bias as much as the effect, so its analytic power, "
         "days and sizes are not given ('-'; summary.json keeps them under analytic_if_unbiased).")],
    ]
    designs = summary.get("designs") or {}
    if any(e.get("no_support") for m in designs.values() for e in m.values()):
        legend.append([biased_mark("no support"), (": an off-policy estimate whose target shows, on part of the log, "
                       "lists the logger never shows (logging probability 0, counted exactly by the simulation): "
                       "biased whatever the t-test of its bias says, so its sizes are withheld; see the "
                       "counterfactual section's support column.")])
    imprecise = truth_precision_items(summary)
    if imprecise:  # review 4, F3
        legend.append(["MC 4 SE under a true effect: " + "; ".join(f"{d} / {m} {text}" for d, m, text in imprecise)
                       + f" ({TRUTH_PRECISION_NOTE})."])
    world_items = truth_world_items(summary)
    if world_items:  # review 4, F1; a trec collection's SE is over query samples (review 7, F3)
        over, world_note = truth_world_note(_collection_type(summary) != "trec")
        legend.append([f"+- under a true effect, over {over}: " + "; ".join(
            f"{d} / {m} {text}" for d, m, text in world_items) + f" ({world_note})."])
    extrapolated = extrapolated_entries(summary)
    if extrapolated:  # review 4, F2
        sim_days = ((summary.get("config") or {}).get("traffic") or {}).get("days", "-")
        legend.append(["~N* extrapolated: " + "; ".join(
            f"{d} / {m} {extrapolated_days_text(days)} = {extrapolation_factor_text(factor)}"
            for d, m, days, factor in extrapolated) + " (" + extrapolation_note(sim_days) + ")."])
    held = [(d, m, e) for d, ms in designs.items() for m, e in ms.items() if str(e.get("se_measure") or "").startswith(
        "replicates'")]
    for d, m, e in held:
        legend.append([f"{d} / {m}: analytic power, days and sizes from the {e['se_measure']}; power at end ",
                       tag("sup", "b" if str(e.get("power_measure", "")).startswith("last day") else "w"), ": ",
                       str(e.get("power_measure")) + "."])
    body: list[Any] = [
        _offline_line(summary),
        table(header, rows, cls="answer", row_classes=classes, caption=caption, id_="answer-table",
              text_columns=(0, 1)),
        *_ratios(summary),
        *_multileaving(summary),
        tag("ul", *(tag("li", *item) for item in legend), cls="legend"),
        note("Conventions: power - ", conv.get("power", "-"), "; sample size - ", conv.get("sample_size", "-"),
             "; truth - ", conv.get("truth", "-")),
    ]
    return join(body)


def _power_table(folder: Path, summary: dict[str, Any]) -> Html:
    """Simulated power by day of every primary metric and every interleaving pair (curves.csv)."""
    import pandas as pd

    path = folder / "curves.csv"
    try:
        curves = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        return note(f"curves.csv could not be read ({exc}); the plot above has the same numbers")
    need = {"design", "metric", "aa", "primary", "day", "power"}
    if not need <= set(curves.columns):
        return note("curves.csv lacks the columns " + ", ".join(sorted(need - set(curves.columns))))
    kinds = {d.get("name"): d.get("type") for d in (summary.get("config") or {}).get("designs") or []}
    real = curves[~curves["aa"].astype(bool)]
    days = sorted(real["day"].unique().tolist())
    rows, classes = [], []
    for (design, metric), c in real.groupby(["design", "metric"], sort=False):
        if not (kinds.get(design) == "interleaving" or bool(c["primary"].iloc[0])):
            continue
        by_day = dict(zip(c["day"].tolist(), c["power"].tolist(), strict=True))
        entry = (summary.get("designs") or {}).get(design, {}).get(metric, {})
        label: Any = join([f"{design}: {metric} ", biased_mark()]) if is_biased(entry) else f"{design}: {metric}"
        rows.append([label, *(rate_text(by_day.get(d)) for d in days)])
        classes.append(None)
    return table(["design: metric", *(f"day {d}" for d in days)], rows, row_classes=classes,
                 caption="Simulated power by day (share of replicates rejecting with the right sign)")


def power_section(folder: Path, summary: dict[str, Any]) -> Html:
    conv = summary.get("conventions") or {}
    return join([
        image(folder / "power_vs_days.png", "power versus days for every design; A/A and null-user rejection rates",
              "Left: simulated power by day (band: +-2 SE), dotted line: the target power. Right: rejection rate when "
              "no ranker is better (A/A and the null user), grey band: the 99% binomial band of alpha."),
        _power_table(folder, summary),
        note("Power: ", conv.get("power", "-"), f"; alpha {fmt(conv.get('alpha'), 'g')}."),
    ])


def shrinkage_section(folder: Path, summary: dict[str, Any]) -> Html:
    off = summary.get("offline") or {}
    seg = off.get("by_segment") or {}
    online = summary.get("truth_by_segment") or {}
    metrics = list(dict.fromkeys(m for s in online.values() for m in s))
    rows = []
    for name, v in seg.items():
        a, b = v.get("A"), v.get("B")
        d = (b - a) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
        rel = (d / a) if d is not None and a else None
        rows.append([name, fmt(100 * v["traffic_share"], ".0f") + "%" if isinstance(v.get("traffic_share"), float)
                     else "-", count(v.get("queries")), value_text(a), value_text(b), value_text(d, True),
                     percent_text(rel),
                     *(value_text((online.get(name, {}).get(m) or {}).get("delta"), True) for m in metrics)])
    parts: list[Any] = [
        image(folder / "offline_vs_online.png", "offline relative gains and every online statistic in SE units",
              "Left: offline relative gains of B over A. Right: every online statistic in standard errors of one "
              "experiment of the simulated length (true effect / SE, replicates' mean +-2 SD; x: the null user's "
              "Delta / SE)."),
    ]
    if rows:
        parts.append(table(
            ["segment", "traffic", "queries", f"offline A ({off.get('metric')})", "offline B", "delta", "rel.",
             *(f"online {m} B - A (exact)" for m in metrics)], rows,
            caption="Offline and online differences by query segment", text_columns=(0,)))
    parts.append(_terminal_block(summary, "decomposition", "Why the online effect shrinks"))
    conv = summary.get("conventions") or {}
    parts.append(note("Shrinkage: ", conv.get("shrinkage", "-"), ". Segments: ", conv.get("query_segments", "-"),
                      ". The offline metric's conventions (gain, ties, cut-off, unjudged documents) are under ",
                      tag("a", "Conventions", href="#conventions"), "."))
    return join(parts)


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
                verdict = join([verdict, "; detects |bias| >= " + null_detectable_text(n, e.get("true_effect"))])
                null_rows.append([design, metric, value_text(n.get("delta"), True), se_text(n.get("se")),
                                  fmt(n.get("z"), ".1f"), rate_text(rate[0] if rate and simulated else None),
                                  rate_text(rate[-1] if rate and simulated else None),
                                  rate_text(analytic[-1] if analytic else None), verdict])
    parts: list[Any] = []
    if rows:
        parts.append(table(["design", "metric", "A/A FPR (last day)", "replicates", "99% binomial band of alpha",
                            "within band"], rows, caption="A/A calibration (B replaced by A)", text_columns=(0, 1, 5)))
    else:
        parts.append(note("No A/A runs in this simulation (analysis.aa: false)."))
    if null_rows:
        parts.append(table(["design", "metric", "null Delta", "+- SE", "z", "rejects day 1", "rejects last day",
                            "analytic last day", "verdict"], null_rows,
                           caption="Null check: clicks that do not depend on relevance (every true effect 0)",
                           text_columns=(0, 1, 8)))
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
        notes.append(note(null_rate_legend(nulls, biased).strip() + "."))
    if degenerate:
        notes.append(note(aa_degenerate_note(dict.fromkeys(degenerate)).strip() + "."))
    return join([
        table(["design", "metric", *(f"{label}: A/A / power / day" for _, label in _RULES)], rows,
              caption=f"Daily monitoring ({days} looks, primary metrics)", text_columns=(0, 1)),
        *notes,
    ])


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
    items = [f"{m} {value_text(c.get('logger_observed'))} vs {value_text(c.get('ranker_A_exact'))} "
             f"({percent_text(c.get('relative'))}{', lower is better' if (c.get('improvement_sign') or 1) < 0 else ''})"
             for m, c in cost.items()]
    return tag("p", tag("strong", "Cost of logging: "), "the logger's own metrics observed on the traffic it served "
               "(mean over replicates) vs ranker A's exact values: " + "; ".join(items), cls="lead")


def _sweep_table(sweep: dict[str, Any]) -> Html:
    """The assumption sweep's numbers as the terminal prints them: the exact truth and each estimator's error
    +- SE at every value, labelled as one log's error (review 3, M5)."""
    values = sweep.get("values") or []
    rows: list[list[Any]] = [["truth (exact)", *(value_text(t, True) for t in sweep.get("truth") or [])]]
    for label, e in (sweep.get("estimators") or {}).items():
        rows.append([label, *(f"{value_text(b, True)} +- {se_text(se)}"
                              for b, se in zip(e.get("bias") or [], e.get("se") or [], strict=False))])
    label = sweep.get("error_label") or (f"estimate - exact truth of one {count(sweep.get('impressions'))}-impression "
                                         "log per value, +- that log's SE")
    return table([str(sweep.get("parameter")), *(fmt(v, "g") for v in values)], rows,
                 caption=f"Assumption sweep ({sweep.get('design')}, {sweep.get('metric')}): {label}")


def counterfactual_section(folder: Path, summary: dict[str, Any]) -> Html | None:
    cf = summary.get("counterfactual") or {}
    sweep = summary.get("assumption_sweep")
    if not cf and not sweep:
        return None
    parts: list[Any] = []
    for name, d in cf.items():
        rows = []
        entries = (summary.get("designs") or {}).get(name) or {}
        for label, e in (d.get("estimators") or {}).items():
            entry = entries.get(label) or {}
            mark = biased_mark("no support") if entry.get("no_support") else biased_mark()
            shown: Any = join([label, " ", mark]) if is_biased(entry) else label
            rows.append([shown, value_text(e.get("bias"), True), se_text(e.get("bias_se")), se_text(e.get("rmse")),
                         _coverage(e), fmt(e.get("undefined_share"), ".0%"), _support_cell(e),
                         e.get("assumption", "-")])
        parts.append(table(["estimator", "bias", "+- SE", "RMSE", "coverage", "undefined", "support violated (impr.)",
                            "assumption"], rows,
                           text_columns=(0, 6), wrap_columns=(6, 7),
                           caption=f"{name}: V({(d.get('targets') or ['A', 'B'])[-1]}) - "
                                   f"V({(d.get('targets') or ['A'])[0]}) of {d.get('metric')}, exact truth "
                                   f"{value_text(d.get('true_effect'), True)}"))
        parts.append(note("support violated: mean impressions per replicate on the last day whose target list has an "
                          "event of logging probability 0 at the estimator's level (counted exactly); where it is not "
                          "0 the estimator cannot evaluate that target there and is biased (marked 'no support', its "
                          "sizes withheld) whatever the t-test of its bias says. "
                          + (d.get("whole_log_refit") or "").capitalize() + "."))
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
        parts.append(_sweep_table(sweep))
    conv = summary.get("conventions") or {}
    if cf:
        parts.append(note("coverage: share of replicates whose interval holds the exact truth on the last day; "
                          "flagged outside the exact 99% binomial band of a valid interval's (below: the intervals "
                          "under-cover or the estimate is biased; above: conservative)."))
    parts.append(note("Counterfactual effect: ", conv.get("counterfactual_effect", "-")))
    return join(parts)


def conventions_section(summary: dict[str, Any]) -> Html:
    truth = summary.get("truth") or []
    rows = [[t.get("design"), t.get("metric"), value_text(t.get("value"), True),
             se_text(t.get("se")), t.get("method")] for t in truth if isinstance(t, dict)]
    parts: list[Any] = [tree(summary.get("conventions") or {})]
    if rows:
        parts.append(table(["design", "metric", "true value", "SE", "method"], rows, caption="Ground truth",
                           text_columns=(0, 1, 4)))
    world = summary.get("world") or {}
    if world:
        parts.append(tag("p", tag("strong", "World: "), ", ".join(f"{k} {v}" for k, v in world.items())))
    return join(parts)


def config_section(folder: Path, summary: dict[str, Any]) -> Html:
    path = folder / "config.effective.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        import yaml

        text = yaml.safe_dump(summary.get("config") or {}, sort_keys=False)
    from simulations.job import FINISHED, PARTIAL

    names = {p.name for p in folder.iterdir() if p.is_file() and p.name != "report.html"
             and not p.name.startswith(".") and not p.name.endswith(".partial.jsonl")}
    if (folder / PARTIAL).is_file():  # the run packs its records into FINISHED once the results are written
        names.add(FINISHED)
    files = sorted(names)
    return join([
        tag("p", f"onlineeval {summary.get('onlineeval_version', '?')} (stream version "
                 f"{summary.get('stream_version', '?')}), config fingerprint "
                 f"{summary.get('config_fingerprint', '?')}; the config with every default filled in "
                 "(config.effective.yaml):"),
        tag("pre", text),
        note("Files in the results folder: " + ", ".join(files)),
    ])


def header(folder: Path, summary: dict[str, Any], title: str) -> Html:
    cfg = summary.get("config") or {}
    traffic, users = cfg.get("traffic") or {}, cfg.get("users") or {}
    conv = summary.get("conventions") or {}
    mix = "; ".join(f"{u.get('name')} ({fmt(100 * u['share'], '.0f')}%)"
                    for u in conv.get("user_types") or [] if isinstance(u.get("share"), (int, float)))
    parts = [
        (f"seed {cfg.get('seed')}, {cfg.get('replicates')} replicates x {traffic.get('days')} days x "
        f"~{count(traffic.get('queries_per_day'))} queries/day, {count(users.get('population'))} users"),
    ]
    if mix:
        parts.append(f"user types: {mix}")
    return join([tag("h1", title), *(tag("p", p) for p in parts),
                 tag("p", f"results folder: {folder}", cls="note")])


def other_section(summary: dict[str, Any]) -> Html | None:
    other = {k: v for k, v in summary.items() if k not in KNOWN_KEYS}
    return tree(other) if other else None


def simulate_sections(folder: Path, summary: dict[str, Any]) -> list[tuple[str, str, Html]]:
    """The report's sections ``(id, title, body)``, answer first."""
    sections = [
        ("answer", "The answer", answer_section(summary)),
        ("power", "Power versus days", power_section(folder, summary)),
        ("shrinkage", "Offline to online: shrinkage", shrinkage_section(folder, summary)),
        ("calibration", "A/A calibration and the null (bias) check", calibration_section(summary)),
    ]
    checks = checks_section(summary)
    if checks is not None:
        sections.append(("checks", "Split checks and CUPED", checks))
    cf = counterfactual_section(folder, summary)
    if cf is not None:
        sections.append(("counterfactual", "Counterfactual estimators", cf))
    other = other_section(summary)
    if other is not None:
        sections.append(("other", "Other results", other))
    sections += [
        ("conventions", "Conventions", conventions_section(summary)),
        ("config", "Effective config", config_section(folder, summary)),
    ]
    return sections


def load_summary(folder: Path) -> dict[str, Any]:
    return read_json(folder / "summary.json")
