"""The HTML report of one ``onlineeval sweep`` folder.

A view of what :func:`simulations.sweep.run_sweep` wrote: the sweep's ``summary.json``
(axes, points, one row per point and design, and the ``shrinkage`` study when present),
its PNG plots, and each point's own results folder (``summary.json`` for the users
needed, the A/A and null checks and the biased marks; ``curves.csv`` for power by day;
``config.effective.yaml``). It computes no numbers of its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simulations.html_report.page import (
    Html,
    biased_mark,
    breakable,
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
from simulations.html_report.simulate import is_biased, population_of, sample_size_html
from simulations.report import (EXTRAPOLATION_FLAG, MAX_DAYS_SHOWN, null_bias_evidence, null_mean_caution,
                                WHOLE_POPULATION)
from simulations.report_null import NULL_CAUTION_LEGEND, null_caution
from simulations.report_ratios import estimated_metric
from simulations.shrinkage_text import mde_cell
from simulations.sweep_null import WEAK, WEAK_WHY, mark_of, null_family, null_family_text, sized_entry

__all__ = ["point_summaries", "sweep_header", "sweep_sections"]

#: plots of the sweep folder shown in their own place (any other PNG is a shrinkage plot)
EFFECT_PLOT = "effect.png"


def point_summaries(folder: Path, summary: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """Each point's own ``summary.json`` (points whose file is missing or unreadable are left out)."""
    out: dict[int, dict[str, Any]] = {}
    for p in summary.get("points") or []:
        try:
            out[int(p["point"])] = read_json(folder / str(p["folder"]) / "summary.json")
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _entry(points: Mapping[int, Mapping[str, Any]], row: Mapping[str, Any]) -> dict[str, Any]:
    s = points.get(int(row.get("point", -1))) or {}
    return ((s.get("designs") or {}).get(row.get("design")) or {}).get(row.get("metric")) or {}


def _cautioned(summary: Mapping[str, Any], points: Mapping[int, Mapping[str, Any]]) -> bool:
    """Whether a row of the answer table carries the '~' null caution (a point's own entry: :func:`null_caution`,
    as :func:`sample_size_html` marks it), so the legend explains it."""
    return any(null_caution(_entry(points, row)) for row in summary.get("rows") or [])


def _axis_value(v: Any) -> str:
    return fmt(v, "g") if isinstance(v, float) else ("-" if v is None else str(v))


def _row_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a row of the sweep's summary.json (= points.csv) holds of a point's summary entry, for a point
    whose own summary.json cannot be read (no users needed then, no population)."""
    def value(key: str) -> Any:
        v = row.get(key)
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return int(v) if key == "days_to_target_power" and isinstance(v, float) and v.is_integer() else v

    return {"final_day": {}, "days_to_target_power": value("days_to_target_power"),
            "analytic_required_days": value("analytic_required_days"),
            "analytic_required_impressions": value("analytic_required_impressions"),
            "analytic_required_impressions_unstable": bool(value("analytic_required_impressions_unstable")),
            "detectable": value("detectable") is not False, "biased_estimate": bool(value("analytic_withheld"))}


def _target(points: Mapping[int, Mapping[str, Any]]) -> tuple[Any, Any]:
    for s in points.values():
        conv = s.get("conventions") or {}
        return conv.get("target_power"), conv.get("alpha")
    return None, None


def point_reports(folder: Path, summary: Mapping[str, Any]) -> dict[int, str]:
    """Relative links to the points' own report.html files that exist."""
    out = {}
    for p in summary.get("points") or []:
        rel = f"{p.get('folder')}/report.html"
        if (folder / rel).is_file():
            out[int(p["point"])] = rel
    return out


def sweep_null_family(summary: Mapping[str, Any], points: Mapping[int, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The sweep's family of null checks (review 9, F1): its summary.json's ``null_family``, or for a sweep written
    before it, :func:`simulations.sweep_null.null_family` of the points' summaries."""
    family = summary.get("null_family")
    return dict(family) if isinstance(family, Mapping) else null_family(points)


def _weak_mark() -> Html:
    return tag("span", WEAK, cls="flag", title=WEAK_WHY)


def answer_rows(summary: Mapping[str, Any], points: Mapping[int, Mapping[str, Any]],
                reports: Mapping[int, str] | None = None) -> list[list[Any]]:
    """One row per point and design (the design's primary metric), biased ones marked ('BIASED?' with the sizes its
    point withheld when only its run's null family flags it: review 9, F1); the point number links to the point's
    own report when it has one."""
    axes = list(summary.get("axes") or [])
    family = sweep_null_family(summary, points)
    out = []
    for row in summary.get("rows") or []:
        e = _entry(points, row)
        weak = mark_of(family, row.get("point"), row.get("design"), row.get("metric")) == WEAK
        if weak and e:
            e = sized_entry(e)
        te, te_se = row.get("true_effect"), row.get("true_effect_se")
        truth = fmt(te, ".3g", True) + (f" +- {fmt(te_se, '.1g')}" if isinstance(te_se, float) and te_se > 0 else "")
        if e.get("final_day") is not None:  # the point's own entry: the point report's cells exactly
            population = population_of(points.get(int(row.get("point", -1))) or {})
            cells = sample_size_html(e, population)
        else:
            e = _row_entry(row)
            cells = {**sample_size_html(e, None), "users": "-"}
        biased = is_biased(e)
        days, impr, users = cells["days"], cells["impressions"], cells["users"]
        design: Any = join([row.get("design"), " ", biased_mark()]) if biased else (
            join([row.get("design"), " ", _weak_mark()]) if weak else row.get("design"))
        point = row.get("point")
        link = (reports or {}).get(point) if isinstance(point, int) else None
        metric: Any = row.get("metric")
        of = estimated_metric(points.get(int(row.get("point", -1))) or {}, row.get("design"))
        if of:  # a counterfactual design's row is an estimator of its metric (as the point's own answer table)
            metric = join([metric, tag_void("br"), tag("small", f"of {of}")])
        out.append([
            tag("a", str(point), href=link) if link else str(point), *(_axis_value(row.get(a)) for a in axes), design,
            metric,
            fmt(row.get("offline_delta"), ".4f", True), truth, fmt(row.get("shrinkage_vs_offline"), ".2f"),
            fmt(row.get("power_last_day"), ".2f"), days, impr, users,
            fmt(row.get("aa_false_positive_rate"), ".3f"),
        ])
    return out


def _ci(ci: Any, spec: str = ".3g") -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        return f"[{fmt(ci[0], spec, True)}, {fmt(ci[1], spec, True)}]"
    return "-"


def _relations(shrink: Mapping[str, Any], primary_only: bool) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    out = []
    for g in shrink.get("groups") or []:
        for r in g.get("relations") or []:
            if isinstance(r, Mapping) and (r.get("primary") or not primary_only):
                out.append((g, r))
    return out


def _mde_at_days(group: Mapping[str, Any], relation: Mapping[str, Any]) -> str:
    """The offline MDE at the simulated days of the group's MDE entries for this design
    (one value per traffic level)."""
    vals = []
    for m in group.get("mde") or []:
        if m.get("design") == relation.get("design") and m.get("metric") == relation.get("metric"):
            days = list(m.get("days") or [])
            at = m.get("simulated_days")
            cell = mde_cell(m, days.index(at)) if at in days else "-"
            vals.append(f"{cell} ({count(m.get('queries_per_day'))}/day, {at} d)")
    return "; ".join(vals) or "-"


def shrinkage_headline(shrink: Any) -> list[Html]:
    """The study's answer (primary metrics): the relation in a sentence, the slope, how often
    the online sign disagrees with the offline one, Kendall's tau and the offline MDE."""
    if not isinstance(shrink, Mapping) or not shrink.get("groups"):
        return []
    level = shrink.get("level")
    pct = f"{fmt(100 * level, '.0f')}% " if isinstance(level, (int, float)) else ""
    rows, sentences = [], []
    for g, r in _relations(shrink, primary_only=True):
        fit = r.get("through_origin") or {}
        sign = r.get("sign_agreement") or {}
        truth, dec = sign.get("truth") or {}, sign.get("decision_mean") or {}
        tau = r.get("kendall_tau") or {}
        exp = [f"- ({e['note']})" if e.get("note") else f"{fmt(e.get('mean'), '.2f')} +- {fmt(e.get('sd'), '.2f')}"
               for e in tau.get("experiment") or []]
        rows.append([
            g.get("label", "-"), r.get("design"), r.get("metric"), str(r.get("n_systems", "-")),
            f"{fmt(fit.get('slope'), '.3g')} {_ci(fit.get('slope_ci'))}" if fit else "too few systems",
            f"{truth.get('disagree', '-')} of {int(truth.get('agree') or 0) + int(truth.get('disagree') or 0)}",
            f"{fmt(dec.get('share_opposite_sign'), '.2f')} / {fmt(dec.get('analytic_opposite_sign'), '.2f')}",
            fmt(tau.get("truth"), ".2f") + (f" +- {fmt(tau['truth_mc_sd'], '.2f')}" if tau.get("truth_mc_sd") else ""),
            "; ".join(exp) or "-", _mde_at_days(g, r),
        ])
        if r.get("sentence"):
            sentences.append(tag("li", f"{g.get('label')}: {r.get('design')} ({r.get('metric')}): {r['sentence']}"))
    if not rows:
        return []
    warnings = [tag("li", tag("span", "warning", cls="flag"), ": ", w)
                for g in shrink.get("groups") or [] for w in g.get("warnings") or []]
    return [
        table(["group", "design", "metric", "systems", f"slope (online per offline unit) {pct}CI",
               "true sign disagrees", "experiments with the other sign (sim. / analytic)", "Kendall tau (truth)",
               "Kendall tau (one experiment per system)",
               f"offline MDE ({shrink.get('offline_metric', 'offline')})"], rows,
              cls="answer", id_="shrinkage-headline", text_columns=(0, 1, 2, 9),
              caption=f"Offline to online across the points (shrinkage study, primary metrics; {pct}intervals)"),
        tag("ul", *warnings, *sentences, cls="sentences") if warnings or sentences else esc(""),
        note("systems: distinct ranker pairs (A, B, collection) of the group; "
             "slope: online effect (improvement direction) per unit of offline delta, fitted through the origin; "
             "true sign disagrees: systems whose true online effect has the other sign than their offline delta; "
             "experiments with the other sign: share of the simulated experiments (the point's days) whose estimate "
             "has the other sign, simulated / normal theory, mean over the group's points; Kendall tau: offline "
             "against online order of the group's systems, for the truth and for one experiment per system, each "
             "system's estimate from another replicate as separate experiments would give them (the points share "
             "their seed: one replicate of every point shares its draws; mean +- SD over the sets); offline MDE: "
             "the smallest offline gain detectable with the target power in the simulated days [its interval from "
             "the slope's CI; unbounded and the MDE flagged '!' when that CI includes 0]. "
             "Conventions in full: ", tag("a", "the shrinkage study", href="#shrinkage"), "."),
    ]


def answer_section(summary: Mapping[str, Any], points: Mapping[int, Mapping[str, Any]],
                   reports: Mapping[int, str] | None = None) -> Html:
    target, alpha = _target(points)
    axes = list(summary.get("axes") or [])
    family = sweep_null_family(summary, points)
    days_head = f"days to {fmt(100 * target, '.0f')}% power" if isinstance(target, (int, float)) else "days to target"
    header = ["point", *(breakable(a) for a in axes), "design", "metric", "offline delta", "true effect", "shrinkage",
              "power at end", days_head, "impressions needed", "users needed", "A/A FPR"]
    caption = "Per point and design (the design's primary metric)" + (
        f": days, users and impressions for {fmt(100 * target, '.0f')}% power at alpha {fmt(alpha, 'g')}"
        if isinstance(target, (int, float)) else "")
    parts: list[Any] = [
        *shrinkage_headline(summary.get("shrinkage")),
        table(header, answer_rows(summary, points, reports), cls="answer", caption=caption, id_="answer-table",
              text_columns=(0, *range(1, len(axes) + 3))),
        *worlds_table(summary),
        tag("ul",
            tag("li", "offline delta: B - A of the offline metric, frequency-weighted; true effect: population value "
                      "of the design's statistic, B - A (+- its Monte Carlo SE where the interleaving truth is not "
                      "exact; methods differ in scale); shrinkage: online relative improvement / offline relative gain."),
            tag("li", "power at end: share of the point's replicates rejecting at alpha with the right sign on the "
                      "last day; days: first simulated day from which power stays >= target, ~N*: analytic (se^2 = "
                      f"a/N + b fitted to the daily checkpoints), '> 1 year': more than {MAX_DAYS_SHOWN} analytic "
                      "days, never / not reachable: the SE floor is above the target, no SE: no day with a measured "
                      "SE, "
                      "nothing to size from; impressions and users needed: "
                      "analytic for the target power (users: expected distinct users; 'whole population': at least "
                      f"{WHOLE_POPULATION:.0%} of the point's users). '?': unstable, the fitted floor b is near the "
                      "target se^2 or the size is loosely determined by the replicates, or extrapolated beyond "
                      f"{EXTRAPOLATION_FLAG:g}x the simulated days (model-dependent; its 90% range, "
                      "in the point's report, leaves out the "
                      "a/N + b model's own error). The same cells as each point's own report."),
            tag("li", "A/A FPR: rejection rate with B replaced by A; ", biased_mark(),
                ": the point's null check (or the exact truth) finds the design biased there, at the sweep's level "
                "(the null replicates' mean test at 0.01 / every point's null-checked pairs) or by the 4-SE rule; "
                "its power and sample size are not sensitivities; ", _weak_mark(), ": ", WEAK_WHY,
                ". Each point's folder has its own report.html with every metric (linked from the point number)."),
            *([tag("li", null_family_text(family))] if family else []),
            *([tag("li", NULL_CAUTION_LEGEND + ", each point by its own run's family (the point's report shows the "
                         "same cells).")] if _cautioned(summary, points) else []),
            cls="legend"),
    ]
    return join(parts)


def worlds_table(summary: Mapping[str, Any]) -> list[Html]:
    """The spread across the seed axis's worlds (review 4, F1; :func:`simulations.sweep_outputs.world_spread` as
    the sweep's summary.json keeps it), in the terminal's cells; [] without a seed axis."""
    from simulations.sweep_outputs import _kinds, _spread_cell, world_spread_heading
    from simulations.report import count_text, days_text, value_text

    worlds = summary.get("worlds")
    if not isinstance(worlds, Mapping) or not worlds.get("spread"):
        return []
    spread = list(worlds["spread"])
    kinds = _kinds(spread)  # review 7, F3: what a seed redraws (on a trec collection, no world)
    fixed = ("design", "metric", "worlds", "no_size", "seed_draws")
    prefixes = ("true_effect_", "offline_delta_", "impressions_", "days_")
    extra = [k for k in spread[0] if k not in fixed and not k.startswith(prefixes)]
    extra += ["seed_draws"] if len(kinds) > 1 else []

    def num(x: Any) -> float:
        return math.nan if x is None else float(x)

    def size(f: Any) -> Any:
        return lambda x: "never" if math.isinf(x) else f(x)

    rows = []
    for r in spread:
        # summary.json keeps 'never' (infinite) as null: a size's missing min/median/max within a sized world
        cells = {k: (math.inf if v is None and k.startswith(("impressions_", "days_")) and r["no_size"] < r["worlds"]
                     else num(v) if k.startswith(prefixes) else v) for k, v in r.items()}
        rows.append([r["design"], r["metric"], *(r.get(k) for k in extra), r["worlds"],
                     _spread_cell(cells, "true_effect", lambda x: value_text(x, True)),
                     _spread_cell(cells, "offline_delta", lambda x: value_text(x, True)),
                     _spread_cell(cells, "impressions", size(count_text)),
                     _spread_cell(cells, "days", size(days_text)), r["no_size"]])
    header = ["design", "metric", *(breakable(k) for k in extra), "worlds" if kinds == ["world"] else "seeds",
              "true effect", "offline delta",
              "impressions needed", "days needed", "no size"]
    heading = world_spread_heading(kinds)
    return [table(header, rows, caption=heading[0].upper() + heading[1:], id_="worlds-table", text_columns=(0, 1)),
            note(str(worlds.get("legend") or ""))]


def shrinkage_section(folder: Path, summary: Mapping[str, Any]) -> Html:
    """Every relation of the study (all metrics), the MDE curves, the study's plots and
    conventions, and the whole study as it is in summary.json."""
    shrink = summary.get("shrinkage")
    named = [str(v) for v in ((shrink or {}).get("plots") or {}).values()] if isinstance(shrink, Mapping) else []
    others = sorted(p.name for p in folder.glob("*.png") if p.name not in (EFFECT_PLOT, *named))
    parts: list[Any] = []
    if not isinstance(shrink, Mapping):
        parts.append(note("This sweep's summary.json has no shrinkage study."))
    else:
        for name in named:
            parts.append(image(folder / name, f"shrinkage study: {name}", name))
        rows = []
        for g, r in _relations(shrink, primary_only=False):
            fit, icpt = r.get("through_origin") or {}, r.get("with_intercept") or {}
            truth = (r.get("sign_agreement") or {}).get("truth") or {}
            rows.append([
                g.get("label", "-"), r.get("design"), r.get("metric"), r.get("truth", "-"),
                str(r.get("n_points", "-")), str(r.get("n_systems", "-")),
                f"{fmt(fit.get('slope'), '.3g')} +- {fmt(fit.get('slope_se'), '.2g')} {_ci(fit.get('slope_ci'))}"
                if fit else "-",
                f"{fmt(icpt.get('intercept'), '.2g', True)} {_ci(icpt.get('intercept_ci'), '.2g')}" if icpt else "-",
                fmt(fit.get("tau2"), ".2g") if fit else "-",
                fmt(truth.get("share_disagree"), ".2f"),
                fmt((r.get("kendall_tau") or {}).get("truth"), ".2f"),
            ])
        if rows:
            parts.append(table(["group", "design", "metric", "truth", "points", "systems", "slope +- SE [CI]",
                                "intercept [CI]", "tau^2", "share of true signs disagreeing", "Kendall tau (truth)"],
                               rows, caption="Every relation (through the origin; the intercept from the fit with one)",
                               text_columns=(0, 1, 2, 3), id_="shrinkage-relations"))
        parts.append(_mde_table(shrink))
        if shrink.get("conventions"):
            parts += [tag("h3", "Conventions of the shrinkage study"), tree(shrink["conventions"])]
        parts.append(tag("details", tag("summary", "All numbers of the study (summary.json \"shrinkage\")"),
                         tree({k: v for k, v in shrink.items() if k != "conventions"})))
    for name in others:
        parts.append(image(folder / name, f"sweep plot {name}", name))
    return join(parts)


def _mde_table(shrink: Mapping[str, Any]) -> Html:
    rows, days_all = [], []
    entries = [(g, m) for g in shrink.get("groups") or [] for m in g.get("mde") or [] if isinstance(m, Mapping)]
    for _, m in entries:
        days_all += list(m.get("days") or [])
    days = sorted(set(days_all))
    for g, m in entries:
        own = list(m.get("days") or [])
        rows.append([g.get("label", "-"), m.get("design"), m.get("metric"), count(m.get("queries_per_day")),
                     *(mde_cell(m, own.index(d)) if d in own else "-" for d in days), m.get("note") or ""])
    if not rows:
        return esc("")
    return table(["group", "design", "metric", "queries/day", *(f"{d} d" for d in days), "note"], rows,
                 caption=f"Minimum detectable offline gain ({shrink.get('offline_metric', 'offline metric')}) by days "
                         "of experiment [interval from the slope's CI; unbounded, and the MDE flagged '!', when that "
                         "CI includes 0]", text_columns=(0, 1, 2, len(days) + 4))


def effect_section(folder: Path, summary: Mapping[str, Any], points: Mapping[int, Mapping[str, Any]]) -> Html:
    return join([
        image(folder / EFFECT_PLOT, "true online effect and mean estimate per design against the swept axis",
              "One panel per design, each on its own y axis (the designs' effects are on different scales: "
              "compare designs by their sample sizes, not their effects): its true online effect (line; on a "
              "categorical axis a bar per value, no line) and mean estimate (dots) of its primary metric against "
              "the plotted axis; one series per combination of the other axes."),
        _power_table(folder, summary),
    ])


def _power_table(folder: Path, summary: Mapping[str, Any]) -> Html:
    """Simulated power by day per point and design (primary metric), from each point's curves.csv."""
    import pandas as pd

    rows: list[list[Any]] = []
    days_all: list[int] = []
    series: list[tuple[str, Any, dict[Any, float]]] = []
    for p in summary.get("points") or []:
        try:
            curves = pd.read_csv(folder / str(p["folder"]) / "curves.csv")
            c = curves[(~curves["aa"].astype(bool)) & curves["primary"].astype(bool)]
        except (OSError, ValueError, KeyError):
            continue
        for design, g in c.groupby("design", sort=False):
            by_day = dict(zip(g["day"].tolist(), g["power"].tolist(), strict=True))
            days_all += list(by_day)
            series.append((p, design, by_day))
    if not series:
        return note("No point's curves.csv could be read.")
    days = sorted(set(days_all))
    axes = [str(a) for a in summary.get("axes") or []]  # review 12, F7: which point each row is
    for p, design, by_day in series:
        values = p.get("labels") or p.get("overrides") or {}
        rows.append([str(p.get("point")), *(_axis_value(values.get(a)) for a in axes), design,
                     *(fmt(by_day.get(d), ".2f") for d in days)])
    return table(["point", *(breakable(a) for a in axes), "design", *(f"day {d}" for d in days)], rows,
                 text_columns=tuple(range(len(axes) + 2)),
                 caption="Power versus days: simulated power by day (primary metrics; share of replicates rejecting "
                         "at alpha with the right sign)")


def calibration_section(summary: Mapping[str, Any], points: Mapping[int, Mapping[str, Any]]) -> Html:
    rows: list[list[Any]] = []
    family = sweep_null_family(summary, points)
    for row in summary.get("rows") or []:
        e = _entry(points, row)
        aa, n = e.get("aa"), e.get("null")
        if aa is None and not n:
            continue
        band = (aa or {}).get("binomial_99_band") or [None, None]
        if aa is None:
            within: Any = "-"
        elif aa.get("degenerate"):
            within = "ties: cannot reject"
        else:
            within = "yes" if aa.get("within_band") else tag("span", "no", cls="flag")
        verdict: Any = "-"
        if n:
            # review 8, F2: a BIASED verdict quotes the evidence that fired (the null replicates' mean test or the
            # null Delta), as the simulate report's
            caution = null_mean_caution(n)  # review 9, F3: a notable null replicates' mean test, unflagged
            weak = mark_of(family, row.get("point"), row.get("design"), row.get("metric")) == WEAK
            if weak:  # review 9, F1: flagged at its run's level only, not at the sweep's
                f = family or {}
                verdict = join([_weak_mark(), f" ({null_bias_evidence(n)}; not < {fmt(f.get('level'), '.2g')} = "
                                f"0.01 / {f.get('checks')} null-checked pairs of the sweep: sizes kept)"])
            elif n.get("biased"):
                verdict = join([biased_mark("BIASED"), f" ({null_bias_evidence(n)})"])
            else:
                verdict = (f"no bias {'flagged' if caution else 'detected'} (null Delta "
                           f"{fmt(n.get('delta'), '.5f', True)}, z {fmt(n.get('z'), '.1f')})")
            if caution:
                verdict = join([verdict, "; ", tag("span", caution, cls="flag")])
            if n.get("se_miscalibrated") and not n.get("biased"):
                x = n.get("rate_excess") or {}
                verdict = join([verdict, f"; bias or SE miscalibration? {x.get('rejections')}/{x.get('replicates')} "
                                f"null replicates reject (one-sided p {fmt(x.get('pvalue'), '.2g')} < "
                                f"{fmt(x.get('threshold'), '.2g')}, Bonferroni over {x.get('pairs')} pairs)"])
        elif e.get("no_support"):
            verdict = join([biased_mark("BIASED"), " (no support: the target leaves the logger's support)"])
        elif is_biased(e):
            verdict = join([biased_mark("BIASED"),
                            " (mean estimate misses the exact truth beyond chance: t-test at the level of 4 normal "
                            "SEs)"])
        rows.append([str(row.get("point")), row.get("design"), row.get("metric"),
                     fmt((aa or {}).get("false_positive_rate"), ".3f"),
                     f"{fmt(band[0], '.3f')} - {fmt(band[1], '.3f')}", within, verdict])
    if not rows:
        return note("No A/A runs or null checks in this sweep (analysis.aa and analysis.null off, or the points' "
                    "summary.json files are missing).")
    conv = next(iter(points.values()), {}).get("conventions") or {}
    return join([
        table(["point", "design", "metric", "A/A FPR", "99% binomial band of alpha", "within band", "null check"],
              rows, caption="A/A calibration and the null (bias) check per point", text_columns=(0, 1, 2, 5),
              wrap_columns=(6,)),
        *([note(null_family_text(family), ". Across the sweep: ", family.get("rule", ""), ".")] if family else []),
        note("Null check: ", conv.get("null_check", "-")),
    ])


def _differing(points: Mapping[int, Mapping[str, Any]], key: str) -> list[str]:
    """Entries of ``key`` (a mapping in each point's summary) that are not the same at every point."""
    values = [s.get(key) or {} for s in points.values()]
    names = list(dict.fromkeys(k for v in values for k in v))
    return [k for k in names if len({json.dumps(v.get(k), sort_keys=True, default=str) for v in values}) > 1]


def conventions_section(summary: Mapping[str, Any], points: Mapping[int, Mapping[str, Any]]) -> Html:
    if not points:
        return note("No point's summary.json could be read.")
    first = min(points)
    differ = _differing(points, "conventions")
    return join([
        note(f"The conventions of point {first}; "
             + (("entries that differ between points: " + ", ".join(differ) + " (see each point's report.html)")
                if differ else "the same at every point") + "."),
        tree(points[first].get("conventions") or {}),
    ])


def config_section(folder: Path, summary: Mapping[str, Any], points: Mapping[int, Mapping[str, Any]]) -> Html:
    axes = list(summary.get("axes") or [])
    rows = []
    for p in summary.get("points") or []:
        over = p.get("overrides") or {}
        s = points.get(int(p.get("point", -1))) or {}
        rows.append([str(p.get("point")), *(_axis_value(over.get(a)) for a in axes), p.get("folder"),
                     s.get("config_fingerprint", "-")])
    parts: list[Any] = [table(["point", *axes, "folder", "fingerprint"], rows, caption="Points and their overrides",
                              text_columns=range(len(axes) + 3))]
    if points:
        first = min(points)
        entry = next((p for p in summary.get("points") or [] if p.get("point") == first), None)
        text = None
        if entry is not None:
            try:
                text = (folder / str(entry["folder"]) / "config.effective.yaml").read_text(encoding="utf-8")
            except OSError:
                text = None
        if text is not None:
            parts += [tag("p", f"Effective config of point {first} (every default filled in; the other points "
                               "differ only by their overrides above):"), tag("pre", text)]
    if summary.get("sweep_fingerprint"):
        parts.append(note(f"Sweep fingerprint {summary['sweep_fingerprint']}."))
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != "report.html"
                   and not p.name.startswith(".") and not p.name.endswith(".partial.jsonl"))
    parts.append(note("Files in the sweep folder: " + ", ".join(files) + "; one results folder per point in points/."))
    return join(parts)


def sweep_header(folder: Path, summary: Mapping[str, Any], title: str) -> Html:
    points = summary.get("points") or []
    axes = list(summary.get("axes") or [])
    values = {a: list(dict.fromkeys(_axis_value((p.get("overrides") or {}).get(a)) for p in points)) for a in axes}
    reps = sorted({r.get("replicates") for r in summary.get("rows") or [] if r.get("replicates") is not None})
    designs = list(dict.fromkeys(str(r.get("design")) for r in summary.get("rows") or []))
    lines = [f"{len(points)} points" + (f", {', '.join(map(str, reps))} replicates per point" if reps else "")
             + (f"; designs: {', '.join(designs)}" if designs else "")]
    lines += [f"{a}: {', '.join(v)}" for a, v in values.items()]
    if summary.get("shrinkage_by"):
        lines.append("shrinkage study per group of: " + ", ".join(map(str, summary["shrinkage_by"])))
    return join([tag("h1", title), *(tag("p", line) for line in lines),
                 tag("p", f"sweep folder: {folder}", cls="note")])


def sweep_sections(folder: Path, summary: Mapping[str, Any]) -> list[tuple[str, str, Html]]:
    """The sweep report's sections ``(id, title, body)``, answer first."""
    points = point_summaries(folder, summary)
    return [
        ("answer", "The answer", answer_section(summary, points, point_reports(folder, summary))),
        ("power", "Effect and power across the sweep", effect_section(folder, summary, points)),
        ("shrinkage", "Offline to online: the shrinkage study", shrinkage_section(folder, summary)),
        ("calibration", "A/A calibration and the null (bias) check", calibration_section(summary, points)),
        ("conventions", "Conventions", conventions_section(summary, points)),
        ("config", "Points and config", config_section(folder, summary, points)),
    ]
