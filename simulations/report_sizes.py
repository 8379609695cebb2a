"""The sample-size and extrapolation texts of the main table.

The days, impressions and users needed (:func:`sample_size_cells`, :func:`analytic_days_text`), the unstable sizes'
ranges ('?'), the sizes extrapolated beyond the simulated days ('*', '!': :func:`extrapolated_entries`,
:func:`extrapolated_days_text`, :func:`extrapolation_note`) and the rows whose estimator measures another quantity
('^'). Re-exported by :mod:`simulations.report`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulations.analysis import EXTRAPOLATION_FLAG, SIZE_BOOTSTRAP, is_biased_entry, spread_text
from simulations.report_null import NULL_CAUTION_MARK, null_caution
from simulations.report_numbers import _count, _number, count_text, days_text, rate_text


#: the main table's shrinkage column: online relative improvement / the *frequency-weighted* offline gain (the
#: decomposition's total divides by the uniform one: review 2026-12-02, 3.4)
SHRINK_HEADER = "shrink(freq-wtd)"


#: users needed at or above this share of the population print as 'whole population'
WHOLE_POPULATION = 0.99


#: analytic days beyond this print as '> 1 year'
MAX_DAYS_SHOWN = 365


#: the impressions cell of an entry with no measured SE on any day (summary.json ``no_se``): nothing to size from
NO_SE = "no SE"


def sample_size_cells(e: dict[str, Any], population: int) -> dict[str, str]:
    """The main table's analytic power, days->pwr, impressions and users needed of one summary entry
    (shared by the terminal and report.html): 'biased' ('no support' when its target leaves the logger's support)
    / '-' for a biased entry, 'no detectable effect',
    :data:`NO_SE` (days and users '-') where no day has a measured SE,
    '> 1 year' beyond :data:`MAX_DAYS_SHOWN` analytic days, 'whole population' from
    :data:`WHOLE_POPULATION` of the users, '?' after an unstable analytic size and '~' after the days and the
    impressions of a design whose unflagged null check has notable evidence of a bias (:func:`null_caution`)."""
    fd = e["final_day"]
    if is_biased_entry(e):
        # an off-policy estimate whose target leaves the logger's support says so (review 3, F-E)
        return {"analytic": "-", "days": "-", "impressions": "no support" if e.get("no_support") else "biased",
                "users": "-"}
    analytic = rate_text(fd.get("analytic_power"))
    if not e.get("detectable", True):
        return {"analytic": analytic, "days": "-", "impressions": "no detectable effect", "users": "-"}
    if e.get("no_se"):
        # not 'never' / 'not reachable': those say the SE floor is above the target, which nothing measured here
        return {"analytic": analytic, "days": "-", "impressions": NO_SE, "users": "-"}
    unstable = bool(e.get("analytic_required_impressions_unstable"))
    # '~': an unflagged null check with notable evidence of a bias (review 12, F2)
    caution = NULL_CAUTION_MARK if null_caution(e) else ""
    mark = ("?" if unstable else "") + caution
    days = e.get("days_to_target_power")
    if days is not None:
        days_s = str(days)
    else:  # '*': analytic, beyond the simulated days
        days_s = analytic_days_text(e.get("analytic_required_days"), unstable, lambda d: f"~{days_text(d)}*")
    users = e.get("analytic_required_users")
    users_s = "whole population" if users is not None and users >= WHOLE_POPULATION * population else _count(users)
    return {"analytic": analytic, "days": days_s + caution,
            "impressions": _count(e.get("analytic_required_impressions")) + mark, "users": users_s}


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
            caution = NULL_CAUTION_MARK if null_caution(e) else ""  # review 12, F2: as the table's cell

            def marked(v: float, caution: str = caution) -> str:
                return count_text(v) + caution

            text = spread_text(
                e.get("analytic_required_impressions_range"), marked, e.get("analytic_required_impressions_rel_se"),
                e.get("variance_floor_to_target"), e.get("analytic_required_impressions_unreachable_share"),
                floor_fitted=e.get("variance_floor_fitted", True))
            factor = e.get("analytic_required_days_extrapolation")
            if e.get("analytic_required_impressions_extrapolated") and _number(factor):
                text += extrapolated_range_note(factor)
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


def caution_of(s: dict[str, Any], design: str, metric: str) -> str:
    """'~' (:data:`NULL_CAUTION_MARK`) when the summary's entry carries the main table's null-caution mark, else ''
    (review 12, F2: every line quoting its size carries it)."""
    e = ((s.get("designs") or {}).get(design) or {}).get(metric)
    return NULL_CAUTION_MARK if isinstance(e, dict) and null_caution(e) else ""


def extrapolated_days_text(days: float) -> str:
    """'~42.5 days' ('> 1 year' beyond :data:`MAX_DAYS_SHOWN`) for the extrapolation lines."""
    return analytic_days_text(days, False, lambda x: f"~{days_text(x)} days")


def extrapolation_factor_text(factor: float) -> str:
    """An extrapolation factor (analytic days / simulated days) as the report writes it: '8.8x', with '!' beyond
    :data:`EXTRAPOLATION_FLAG` ('8.8x!'); the main table's extrapolation lines, report.html's and CUPED's days."""
    return f"{factor:.1f}x" + ("!" if factor > EXTRAPOLATION_FLAG else "")


def extrapolated_range_note(factor: float) -> str:
    """After an unstable size's 90% range when the size is extrapolated beyond :data:`EXTRAPOLATION_FLAG`:
    ' [extrapolated 8.8x the simulated days: model-dependent]' (the main table's and CUPED's '?' lines)."""
    return f" [extrapolated {factor:.1f}x the simulated days: model-dependent]"


def extrapolation_note(simulated_days: Any) -> str:
    """What a '*' size's extrapolation factor means, and the flag beyond :data:`EXTRAPOLATION_FLAG`."""
    return (f"factor = analytic days / the {simulated_days} simulated days; '!' beyond {EXTRAPOLATION_FLAG:g}x: "
            "se^2 = a/N + b fitted to the simulated days is used far past them, and its error grows with the "
            "factor (e.g. 9-14% too many days at 9x on configs/ab.yaml), which the 90% ranges leave out: "
            "simulate at least that many days (traffic.days) before relying on it")


def _extrapolation_lines(s: dict[str, Any], simulated_days: int) -> list[str]:
    """Under the main table: how far past the simulated days each analytic '*' size is extrapolated."""
    items = [f"{d}/{m} {extrapolated_days_text(days)}{caution_of(s, d, m)} = {extrapolation_factor_text(factor)}"
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


def no_se_entries(s: dict[str, Any]) -> list[str]:
    """``design/metric`` of the detectable, unbiased entries with no measured SE on any day (:data:`NO_SE`)."""
    return [f"{design}/{metric}" for design, metrics in s["designs"].items() for metric, e in metrics.items()
            if e.get("no_se") and e.get("detectable", True) and not is_biased_entry(e)]


#: what :data:`NO_SE` means (the terminal's line under the table and the HTML legend)
NO_SE_NOTE = ("no day of the run has a measured standard error for it (every replicate's SE undefined: too few "
              "users or impressions drawn by a target; or, sized from the replicates' SD, a single replicate), so no "
              "analytic power, days or size can be computed: run more replicates or more traffic")


def no_se_lines(s: dict[str, Any]) -> list[str]:
    """The line under the main table naming the entries marked :data:`NO_SE`."""
    items = no_se_entries(s)
    return [f"  '{NO_SE}' {', '.join(items)}: {NO_SE_NOTE}"] if items else []


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
    lines += no_se_lines(s)
    if unsupported:
        lines.append("  'no support': " + ", ".join(unsupported) + " of the last day's impressions have a target list "
                     "with an event of logging probability 0 (counted exactly by the simulation): the estimator "
                     "cannot see the target's value there and is biased whatever the t-test of its bias says; its "
                     "analytic power, days and sizes are withheld (summary.json: analytic_if_unbiased)")
    return lines


def aa_excess_text(design: str, metric: str, aa: dict[str, Any] | None, alpha: float,
                   delta_ab: bool = False) -> str | None:
    r"""Why an A/A false-positive rate is above its 99% band, as far as the run measures it (None when it is not
    above): the A/A replicates' mean SE over their estimates' SD (``aa["se_sd_ratio"]``,
    :func:`simulations.analysis_held.se_sd_ratio`), the users the last day's estimate rests on, and the rate a
    two-sided z test at ``alpha`` would have with normal estimates and an SE at that ratio of their spread
    (:math:`2\,\Phi(-z_{1-\alpha/2}\,\text{ratio})`): the part of the excess the small SE explains, the rest
    being the SE's spread over the replicates and the estimates' tails. A delta-method SE over users runs small, and
    its z test's tails are heavy, where few users (or a few heavy ones) carry the estimate; both shrink as users
    grow. ``delta_ab``: the design is an A/B or interleaving design with ``test: delta``, whose small-sample
    analysis ``test: delta_t`` (:func:`onlineeval.stats.ratio_diff_cr2`, :func:`~onlineeval.stats.ratio_mean_cr2`)
    the text then names."""
    if not aa or aa.get("degenerate") or aa.get("within_band") is not False:
        return None
    band = aa.get("binomial_99_band") or [None, None]
    rate = aa.get("false_positive_rate")
    if not (_number(rate) and _number(band[1]) and rate > band[1]):
        return None
    from scipy.stats import norm

    from simulations.analysis_held import se_sd_ratio_text

    q = aa.get("se_sd_ratio")
    users = aa.get("mean_users")
    on = f", on {users:,.0f} users (the A/A replicates' last day, mean)" if _number(users) else ""
    head = f"{design}/{metric} {rate:.3f} (band {band[0]:.3f}-{band[1]:.3f})"
    if q is None or q.get("se") is None:
        return f"{head}: the A/A replicates' mean SE over their estimates' SD is {se_sd_ratio_text(q)}{on}"
    normal = float(2.0 * norm.sf(norm.isf(alpha / 2.0) * q["ratio"]))
    text = (f"{head}: the A/A replicates' mean SE is {q['ratio']:.2f} of their estimates' SD (+- {q['se']:.2f}, "
            f"{q['replicates']} replicates){on}; ")
    if q["ratio"] + 2 * q["se"] < 1:
        return text + (f"the SE runs small (below 1 by more than 2 of its SEs): with normal estimates an SE at "
                       f"{q['ratio']:.2f} of their spread would reject {normal:.3f}, the rest is the SE's "
                       "spread over the replicates and the estimates' tails. A delta-method SE over users runs small, "
                       "and its z test's tails are heavy, where few users (or a few heavy ones: users.activity) carry "
                       "the estimate; more users (users.population) bring both towards alpha"
                       + ("; test: delta_t (the bias-reduced SE and Student's t with Bell and McCaffrey's degrees of "
                          "freedom) is the analysis made for few users" if delta_ab else ""))
    return text + ("the SE is not measurably small, so the excess is in the estimates' tails (a z test reads "
                   "them as normal; skewed where few users carry the estimate)")


#: how the report and the HTML page introduce each :func:`aa_excess_texts` item
AA_EXCESS_LEAD = "A/A FPR above its band: "


def aa_excess_texts(s: dict[str, Any], delta_ab: set[str] | None = None) -> list[str]:
    """:func:`aa_excess_text` of every entry of the summary ``s`` whose A/A rate is above its band (at the summary's
    ``conventions.alpha``); ``delta_ab`` the A/B and interleaving designs with ``test: delta`` (by default read from
    the summary's ``config``)."""
    alpha = float((s.get("conventions") or {}).get("alpha", 0.05))
    if delta_ab is None:
        delta_ab = {d.get("name") for d in (s.get("config") or {}).get("designs") or []
                    if isinstance(d, dict) and d.get("type") in ("ab", "interleaving")
                    and d.get("test") in (None, "delta")}
    return [text for design, metrics in (s.get("designs") or {}).items() for metric, e in metrics.items()
            if (text := aa_excess_text(design, metric, e.get("aa"), alpha, design in delta_ab))]


def aa_excess_lines(s: dict[str, Any], delta_ab: set[str] | None = None) -> list[str]:
    """Under the main table: one line per :func:`aa_excess_texts` item."""
    return [f"  {AA_EXCESS_LEAD}{text}" for text in aa_excess_texts(s, delta_ab)]
