"""The HTML report of one ``onlineeval simulate`` results folder.

A view of what :func:`simulations.report.write_results` wrote (``summary.json``,
``curves.csv``, ``config.effective.yaml``, the PNG plots): it formats those numbers and
computes none of its own. Sections, answer first: the answer (days, users and impressions
per design at the target power, shrinkage of the offline gain), the multileaving designs' rankers
offline against online (:mod:`simulations.html_report.multileaving`), power versus days, the
offline-to-online shrinkage, A/A calibration and the null (bias) check with daily
monitoring and the designs' own sequential and multiple-comparison decisions (their
terminal text, from :mod:`simulations.sequential` and :mod:`simulations.multiple`), the
counterfactual estimators when present, any other result as it is, the conventions every
number was computed under and the effective config.

The answer, calibration (with the decisions) and counterfactual sections are built in
:mod:`simulations.html_report.answer`, :mod:`simulations.html_report.calibration` and
:mod:`simulations.html_report.counterfactual`, re-exported here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulations.analysis import is_biased_entry as is_biased
from simulations.html_report.answer import (
    _multileaving,
    _offline_line,
    _ratios,
    answer_rows,
    answer_section,
    population_of,
    sample_size_html,
)
from simulations.html_report.calibration import _terminal_block, calibration_section, checks_section
from simulations.html_report.counterfactual import counterfactual_section
from simulations.html_report.multileaving import multileaving_section
from simulations.html_report.page import Html, biased_mark, count, fmt, image, join, note, read_json, table, tag, tree
from simulations.report import percent_text, rate_text, se_text, value_text


__all__ = ["answer_rows", "is_biased", "population_of", "sample_size_html", "simulate_sections"]


#: top-level keys of summary.json rendered by their own section (any other key is shown
#: under "Other results", so a new result is never silently left out)
KNOWN_KEYS = frozenset({
    "onlineeval_version", "stream_version", "analysis_version", "config_fingerprint", "conventions", "world", "truth",
    "offline", "designs",
    "required_impressions_ratio", "monitoring", "truth_by_segment", "config", "counterfactual",
    "assumption_sweep", "sequential", "multiple", "decomposition", "cuped", "srm",
})


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
    at_truth = [name for name, rec in (summary.get("sequential") or {}).items()
                if ((rec or {}).get("null_monitoring") or {}).get("kind") == "truth"]
    truth_text = (f" For {', '.join(at_truth)}, whose A/A is identically 0: the rate of rejecting the exact truth "
                  "(H0: B - A = truth, true in every replicate) with each day as the horizon." if at_truth else "")
    return join([
        image(folder / "power_vs_days.png", "power versus days for every design; A/A and null-user rejection rates",
              "Left: simulated power by day (band: +-2 SE), dotted line: the target power. Right: rejection rate when "
              "no ranker is better (A/A and the null user), grey band: the 99% binomial band of alpha." + truth_text),
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
                 f"{summary.get('stream_version', '?')}, analysis version "
                 f"{summary.get('analysis_version', '?')}), config fingerprint "
                 f"{summary.get('config_fingerprint', '?')}; the config with every default filled in "
                 "(config.effective.yaml):"),
        tag("pre", text),
        note("Files in the results folder: " + ", ".join(files)),
    ])


def sweep_points(folder: Path) -> list[dict[str, Any]]:
    """The points listed by a sweep folder's ``summary.json`` ([] when it has none or cannot be read)."""
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    points = summary.get("points") if isinstance(summary, dict) else None
    return [p for p in points if isinstance(p, dict)] if isinstance(points, list) else []


def sweep_point_of(folder: Path, summary: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
    """(the sweep's entry for this results folder, the sweep's number of points) when the folder is a point
    of a sweep (``<sweep>/points/<name>``, listed by the sweep's summary with this run's config fingerprint),
    else None."""
    if folder.parent.name != "points":
        return None
    points = sweep_points(folder.parent.parent)
    for point in points:
        if (point.get("folder") == f"points/{folder.name}"
                and point.get("fingerprint") == summary.get("config_fingerprint")):
            return point, len(points)
    return None


def header(folder: Path, summary: dict[str, Any], title: str) -> Html:
    cfg = summary.get("config") or {}
    traffic, users = cfg.get("traffic") or {}, cfg.get("users") or {}
    conv = summary.get("conventions") or {}
    mix = "; ".join(f"{u.get('name')} ({fmt(100 * u['share'], '.0f')}%)"
                    for u in conv.get("user_types") or [] if isinstance(u.get("share"), (int, float)))
    parts = [
        (f"seed {cfg.get('seed')}, {cfg.get('replicates')} replicate{'' if cfg.get('replicates') == 1 else 's'} x "
         f"{traffic.get('days')} day{'' if traffic.get('days') == 1 else 's'} x "
         f"~{count(traffic.get('queries_per_day'))} queries/day, {count(users.get('population'))} users"),
    ]
    if mix:
        parts.append(f"user types: {mix}")
    found = sweep_point_of(folder, summary)
    if found is not None:  # review 12, F7: which point of which sweep, and the way back
        point, n_points = found
        values = ", ".join(f"{k} = {v}" for k, v in (point.get("labels") or point.get("overrides") or {}).items())
        parts.append(join([tag("strong", f"sweep point {point.get('point')} of {n_points}: {values}"), " (",
                           tag("a", "the sweep's report", href="../../report.html"), ")"]))
    return join([tag("h1", title), *(tag("p", p) for p in parts),
                 tag("p", f"results folder: {folder}", cls="note")])


def other_section(summary: dict[str, Any]) -> Html | None:
    other = {k: v for k, v in summary.items() if k not in KNOWN_KEYS}
    return tree(other) if other else None


def simulate_sections(folder: Path, summary: dict[str, Any]) -> list[tuple[str, str, Html]]:
    """The report's sections ``(id, title, body)``, answer first."""
    sections = [("answer", "The answer", answer_section(summary))]
    ml = multileaving_section(summary)
    if ml is not None:  # review 12, F3: every ranker's offline value next to the online outcome
        sections.append(("multileaving", "Multileaving: offline gain against online outcome", ml))
    sections += [
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
