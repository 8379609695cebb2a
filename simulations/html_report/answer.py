"""The simulate report's answer section: days, users and impressions per design at the target power.

The answer table (:func:`answer_rows`, :func:`answer_section`) with its sample-size cells (:func:`sample_size_html`,
the terminal's :func:`simulations.report.sample_size_cells`), the offline line and its world note, the ratios
between designs and multileaving's pairs. Part of :mod:`simulations.html_report.simulate`, which re-exports it.
"""

from __future__ import annotations

from typing import Any

from simulations.analysis import is_biased_entry as is_biased
from simulations.html_report.page import Html, biased_mark, count, esc, fmt, join, note, table, tag, tag_void
from simulations.report_null import (
    NULL_CAUTION_MARK,
    null_caution,
    null_caution_keys,
    null_caution_legend,
    null_delta_text,
)
from simulations.report_ratios import (
    caution_pairs,
    design_labels,
    estimated_metric,
    ratio_caution,
    ratio_size_marks,
    size_mark_sets,
)
from simulations.report_sizes import NO_SE, NO_SE_NOTE, caution_of, no_se_entries
from simulations.report_sizes import _unstable_lines as unstable_size_lines  # the terminal's own text
from simulations.report import (
    EXTRAPOLATION_FLAG,
    INDISTINGUISHABLE_SHORT,
    ONE_REPLICATE_NOTE,
    TRUTH_PRECISION_NOTE,
    biased_ratio_why,
    extrapolated_days_text,
    extrapolated_entries,
    extrapolation_factor_text,
    extrapolation_note,
    offline_conventions_text,
    pair_range_text,
    percent_text,
    rate_text,
    ratio_uncertainty_text,
    sample_size_cells,
    truth_precision_items,
    truth_world_cell,
    truth_world_items,
    truth_world_note,
    value_text,
    world_sampling_text,
)



def _power_mark(e: dict[str, Any]) -> str:
    """The superscript after an entry's power at end that another measure gives (its ``power_measure``, named in
    the legend): 'b' the last day's bootstrap test, 'w' withheld, 'se' the replicates' p-values from a reported
    SE that runs small (their power overstated)."""
    measure = str(e.get("power_measure") or "")
    return "b" if measure.startswith("last day") else "w" if measure.startswith("withheld") else "se"

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
        of = estimated_metric(summary, design)
        for metric, e in metrics.items():
            label: Any = metric
            if of:  # the row is an estimator of the design's metric
                label = join([metric, tag_void("br"), tag("small", f"of {of}")])
            fd = e.get("final_day") or {}
            biased = is_biased(e)
            rel = e.get("relative_effect")
            power: Any = rate_text(fd.get("power"))
            if e.get("power_measure"):  # an estimate whose SE holds a data-driven choice fixed (review 3, F-A)
                power = join([power, tag("sup", _power_mark(e))])
            null = e.get("null")
            cells = sample_size_html(e, population)
            days, impr, users = cells["days"], cells["impressions"], cells["users"]
            analytic: Any = cells["analytic"]
            if str(e.get("se_measure") or "").startswith("replicates'") and analytic != "-":
                # review 12, F3: the terminal marks it '^' too; its measure is named in the legend
                analytic = join([analytic, tag("sup", "sd")])
            name: Any = join([design, " ", biased_mark()]) if biased else design
            null_s: Any = "-" if null is None else null_delta_text(null)
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
                name, label, effect, percent_text(rel),
                value_text(e.get("shrinkage_vs_offline")),
                power, analytic, days, impr, users,
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
    caution = null_caution_keys(summary)  # review 12, F2: '~' as the terminal's ratio lines
    unstable, far = size_mark_sets(summary)  # '?' / '*' on a size ratio, as the terminal's ratio lines
    marked = starred = False
    items = []
    labels = design_labels(summary)
    for d, need in (r.get("ratios") or {}).items():
        if d == ref:
            continue
        label = labels.get(d, d)
        eff = (r.get("equal_traffic_efficiency") or {}).get(d)
        if d in biased:
            b = biased[d]
            why = biased_ratio_why(b)
            items.append(tag("li", label, ": ", biased_mark(), f" ({why}): its ratios are not sensitivities"))
            continue
        pairs = (r.get("by_pair") or {}).get(d)
        cp = caution_pairs(d, ref, pairs, caution)
        tilde_e, tilde_r = (ratio_caution(d, ref, pairs, k, caution) for k in ("efficiency", "ratio"))
        span_e, span_r = pair_range_text(pairs, "efficiency", cp), pair_range_text(pairs, "ratio", cp)
        text = (f"{label}: information per impression {value_text(eff)}x"
                f"{ratio_uncertainty_text((r.get('equal_traffic_efficiency_rel_se') or {}).get(d))}"
                f"{tilde_e}{span_e} {ref}'s")
        marked |= bool(tilde_e or NULL_CAUTION_MARK in span_e)
        if isinstance(need, (int, float)):
            r_rel = (r.get("ratios_rel_se") or {}).get(d)
            q, star = ratio_size_marks(d, ref, pairs, r_rel, unstable, far)
            starred |= bool(star or "*" in span_r)
            text += ((f"; impressions needed for {fmt(100 * target, '.0f')}% power " if target else "; impressions "
                      "needed ") + f"{value_text(need)}x{ratio_uncertainty_text(r_rel)}{q}{star}"
                     f"{span_r} {ref}'s" + (f" ({value_text(1 / need)}x fewer)" if 0 < need < 1 else "") + tilde_r)
            marked |= bool(tilde_r or NULL_CAUTION_MARK in span_r)
        items.append(tag("li", text))
    if not items:
        return []
    for key, what in (("equal_traffic_efficiency", "information per impression"), ("ratios", "impressions needed")):
        same = (r.get("indistinguishable") or {}).get(key) or []
        if same:
            items.append(tag("li", f"not distinguishable ({what}; {INDISTINGUISHABLE_SHORT}): "
                                   + ", ".join(f"{labels.get(a, a)} ~ {labels.get(b, b)}" for a, b in same)))
    return [tag("p", f"Relative to {labels.get(ref, ref)} (last simulated day {r.get('last_day')}; +-: 1 relative "
                     "SE by the delta method from the truths' Monte Carlo SEs and the SEs' or sizes' own, '?' above "
                     "25% or on a "
                     "size ratio whose either size is unstable"
                     + (f"; '*': a size ratio from a size extrapolated beyond {EXTRAPOLATION_FLAG:g}x the simulated "
                        "days (the answer table's '!')" if starred else "")
                     + (f"; '{NULL_CAUTION_MARK}': its or the reference's size carries the answer table's "
                        f"'{NULL_CAUTION_MARK}' (bias not excluded, see the legend)" if marked else "")
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
                          "a t-test at the level of 4 normal SEs; for an off-policy estimate also its bias check, one "
                          "direct log against the exact truth, in the counterfactual section) finds "
         "it biased on these rankers; its power measures its bias as much as the effect, so its analytic power, "
         "days and sizes are not given ('-'; summary.json keeps them under analytic_if_unbiased).")],
    ]
    if ((summary.get("config") or {}).get("replicates") or 2) < 2:
        legend.insert(0, [ONE_REPLICATE_NOTE[0].upper() + ONE_REPLICATE_NOTE[1:] + "."])
    designs = summary.get("designs") or {}
    if any(e.get("no_support") for m in designs.values() for e in m.values()):
        legend.append([biased_mark("no support"), (": an off-policy estimate whose target shows, on part of the log, "
                       "lists the logger never shows (logging probability 0, counted exactly by the simulation): "
                       "biased whatever the t-test of its bias says, so its sizes are withheld; see the "
                       "counterfactual section's support column.")])
    utility = summary.get("utility")
    no_se = no_se_entries(summary)
    if no_se:
        legend.append([f"{NO_SE}: {', '.join(no_se)}: {NO_SE_NOTE}."])
    if utility:  # what an A/B design's 'utility' row measures, as the terminal's line under the table
        weights = ", ".join(f"{w:.3g}" for w in utility.get("rank_weights") or [])
        legend.append([f"utility ({', '.join(utility.get('designs') or [])}): {utility.get('definition')}; "
                       f"w = {weights}."])
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
            f"{d} / {m} {extrapolated_days_text(days)}{caution_of(summary, d, m)} = {extrapolation_factor_text(factor)}"
            for d, m, days, factor in extrapolated) + " (" + extrapolation_note(sim_days) + ")."])
    if any(null_caution(e) and not is_biased(e) for ms in designs.values() for e in ms.values()):
        legend.append([null_caution_legend(summary) + "."])  # review 12, F2: as the terminal's
    for line in unstable_size_lines(summary, population_of(summary)) if designs else []:
        legend.append([line.strip() + "."])  # review 12, F3: the ranges the terminal prints
    held = [(d, m, e) for d, ms in designs.items() for m, e in ms.items() if str(e.get("se_measure") or "").startswith(
        "replicates'")]
    for d, m, e in held:
        legend.append([f"{d} / {m}: analytic power ", tag("sup", "sd"),
                       f", days and sizes from the {e['se_measure']}; power at end ",
                       tag("sup", _power_mark(e)), ": ",
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
