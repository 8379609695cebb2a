"""A sweep's outputs, from its points' ``summary.json`` and ``replicates.csv``.

- ``points.csv`` and ``points.parquet`` (the same table): one row per point and design,
  the design's primary metric: the axes' values, the offline delta, the truth and the
  simulated results, the flags ``analytic_withheld`` (the point found the design or its estimate
  biased: its analytic days and sizes are NaN, kept as if unbiased in the point's summary.json),
  ``analytic_required_impressions_unstable`` and ``detectable``, ``null_mark`` (the sweep's mark of the null
  check: 'BIASED?' rows keep their sizes, :mod:`simulations.sweep_null`), and the shrinkage study's
  per-point columns (:func:`simulations.shrinkage.point_columns`);
- ``summary.json``: the axes, the points (overrides, folders, fingerprints), the sweep's
  fingerprint (over every point's, so over every input file's contents), the rows,
  the shrinkage study under ``"shrinkage"`` (structure in :mod:`simulations.shrinkage`) and the null
  checks' family over the points under ``"null_family"`` (:func:`simulations.sweep_null.null_family`);
- ``effect.png`` (each design's true effect and mean estimate against the plot axis, one panel per design:
  their effects are on different scales),
  ``shrinkage.png`` (offline delta against true online effect with the fitted relation)
  and ``mde.png`` (the smallest detectable offline gain against days).
- ``report.html``: one self-contained page of all of the above (plots embedded; opens from
  disk; :mod:`simulations.html_report`), linking each point's own ``report.html``.

Nothing here computes a number of its own beyond reading and arranging: the study is
:func:`simulations.shrinkage.shrinkage_study`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from simulations.sweep import SweepConfig

__all__ = ["days_cell", "observations", "point_rows", "sweep_fingerprint", "terminal_table", "write_outputs",
           "SEED_DRAWS", "seed_draws", "TERMINAL_LEGEND", "WORLD_AXIS", "world_spread", "world_spread_heading",
           "world_spread_legend", "world_spread_text"]

#: per-design columns of points.csv (from each point's summary.json, the design's primary metric)
_COLUMNS = (
    ("true_effect", ("true_effect",)),
    ("true_effect_se", ("true_effect_se",)),
    ("true_effect_world_se", ("true_effect_world_se",)),
    ("truth_method", ("truth_method",)),
    ("shrinkage_vs_offline", ("shrinkage_vs_offline",)),
    ("power_last_day", ("final_day", "power")),
    ("power_se", ("final_day", "power_se")),
    ("mean_estimate", ("final_day", "mean_estimate")),
    ("sd_estimate", ("final_day", "sd_estimate")),
    ("coverage", ("final_day", "coverage")),
    ("mean_impressions", ("final_day", "mean_impressions")),
    ("days_to_target_power", ("days_to_target_power",)),
    ("analytic_required_days", ("analytic_required_days",)),
    ("analytic_required_impressions", ("analytic_required_impressions",)),
    ("analytic_required_impressions_unstable", ("analytic_required_impressions_unstable",)),
    ("analytic_withheld", ("analytic_withheld",)),
    ("detectable", ("detectable",)),
    ("no_se", ("no_se",)),
    ("aa_false_positive_rate", ("aa", "false_positive_rate")),
)

#: flags of points.csv, read as booleans: analytic_withheld (the design or its estimate is biased, so the point's
#: analytic days and sizes are null; its summary.json gives the reason and keeps them under analytic_if_unbiased),
#: the analytic size's instability ('?'), detectable (false: the truth is within 2 Monte Carlo SEs of 0) and no_se
#: (true: no day of the point has a measured SE, so nothing to size from)
_FLAGS = {"analytic_withheld": False, "analytic_required_impressions_unstable": False, "detectable": True,
          "no_se": False}


def days_cell(row: Mapping[str, Any]) -> str:
    """The terminal's analytic days of one row of points.csv: 'biased' when the point withheld them (the
    design or its estimate is biased), 'no effect' when the truth is within 2 Monte Carlo SEs of 0, else
    'no SE' when no day of the point has a measured SE, else
    :func:`simulations.report.analytic_days_text` (simulate's rule: 'never', '> 1 year', or the days to 1 decimal;
    with '?' when the analytic size is unstable)."""
    from simulations.report import analytic_days_text

    if _flag(row.get("analytic_withheld"), False):
        return "biased"
    if not _flag(row.get("detectable"), True):
        return "no effect"
    if _flag(row.get("no_se"), False):
        return "no SE"  # not 'never': nothing measured says the SE floor is above the target
    text = analytic_days_text(row.get("analytic_required_days"),
                              _flag(row.get("analytic_required_impressions_unstable"), False))
    return f"{text} BIASED?" if row.get("null_mark") == "BIASED?" else text


def _flag(value: Any, missing: bool) -> bool:
    """A flag of points.csv (bool, numpy bool, or None / NaN for ``missing``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return bool(value)


#: the terminal table's legend of its analytic_required_days cells
TERMINAL_LEGEND = (
    "(analytic_required_days: 'biased' = the design or its estimate is biased on this point (null check, its mean "
    "against the exact truth, an off-policy estimate's bias check, or its target outside the logger's support), so "
    "no analytic days or sizes are given (points.csv: analytic_withheld true, NaN "
    "days; the point's summary.json keeps the values computed as if unbiased under analytic_if_unbiased); "
    "'BIASED?' after the days = flagged only by its null replicates' mean test at its run's level (0.01 / the run's "
    "null-checked pairs), not at the sweep's (0.01 / every point's): its sizes are kept (points.csv null_mark); "
    "'never' = the SE floor of returning users is above the target; '> 1 year' = more than 365 days; 'no effect' = "
    "the truth is within 2 Monte "
    "Carlo SEs of 0; 'no SE' = no day of the point has a measured SE (points.csv no_se), nothing to size from; "
    "'?' = unstable: the se^2 = a/N + b fit behind it is near its floor or loosely determined by "
    "the replicates, or extrapolated beyond 3x the simulated days (model-dependent; 90% range in the point's "
    "report, without the model's own error))"
)


def terminal_table(rows: pd.DataFrame, cols: Sequence[str], axes: Sequence[str] | None = None) -> str:
    """``rows[cols]`` as the sweep prints it: numbers to 4 significant digits, analytic_required_days by
    :func:`days_cell` (never a bare NaN). When :data:`WORLD_AXIS` is an axis (``axes``; default the columns between
    ``point`` and ``design``), the per-design spread across worlds follows (:func:`world_spread_text`)."""
    shown = rows[list(cols)].copy()
    if "metric" in shown.columns and "estimated_metric" in rows.columns:  # an estimator: 'snips of clicks_per_query'
        shown["metric"] = [m if not isinstance(e, str) or not e else f"{m} of {e}"
                           for m, e in zip(rows["metric"], rows["estimated_metric"])]
    if "analytic_required_days" in shown.columns:
        shown["analytic_required_days"] = [days_cell(r) for r in rows.to_dict(orient="records")]
    text = shown.to_string(index=False, float_format=lambda v: f"{v:.4g}")
    if axes is None and "point" in cols and "design" in cols:
        axes = list(cols)[list(cols).index("point") + 1: list(cols).index("design")]
    spread = world_spread_text(world_spread(rows, axes or []))
    from simulations.sweep_null import null_family_text

    family = null_family_text(rows.attrs.get("null_family"))  # review 9, F1: the sweep's family of null checks
    return text + ("\n\n" + family if family else "") + ("\n\n" + spread if spread else "")


#: the sweep axis whose points are independently drawn worlds (review 4, F1): each seed draws its own queries,
#: labels, rankers' noise and query frequencies (and its own replicates and Monte Carlo truths) of a synthetic
#: collection; a trec collection's queries, judgments and runs are fixed (review 7, F3: see :func:`seed_draws`)
WORLD_AXIS = "seed"

#: points.csv's seed_draws: what a point's seed redraws of its world (review 7, F3; :func:`seed_draws`)
SEED_DRAWS = {"world": "the world (queries, labels, rankers' noise, popularity)",
              "popularity": "only the query popularity (a trec collection's Zipf frequencies over its queries)",
              "nothing": "nothing of the world (a trec collection with collection.frequencies)"}


def seed_draws(config: Any) -> str:
    """What a point's seed redraws of its world (:data:`SEED_DRAWS`), besides its replicates and Monte Carlo
    truths: 'world' for a synthetic collection; for a trec collection (its queries, judgments and runs are files)
    'popularity' (the seed permutes the Zipf frequencies over the queries, simulations.world._trec) or 'nothing'
    (collection.frequencies gives them)."""
    coll = getattr(config, "collection", None)
    if getattr(coll, "type", "synthetic") != "trec":
        return "world"
    return "nothing" if getattr(coll, "frequencies", None) is not None else "popularity"

#: the statistics of :func:`world_spread` (column prefix, points.csv column)
_SPREAD = (("true_effect", "true_effect"), ("offline_delta", "offline_delta"),
           ("impressions", "analytic_required_impressions"), ("days", "analytic_required_days"))


def world_spread(rows: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame | None:
    """Per design, metric and value of the other axes, the spread across the :data:`WORLD_AXIS` axis (review 4,
    F1: one seed's numbers belong to one drawn world): ``worlds`` (points), the median, min and max of the true
    effect, the offline delta and the analytic impressions and days needed. The sizes are over the worlds that
    have one: ``no_size`` counts the others (biased or no effect there); 'never' (the SE floor is above the
    target) counts as infinitely many. ``None`` without a seed axis."""
    if WORLD_AXIS not in axes or rows.empty:
        return None
    others = [a for a in axes if a != WORLD_AXIS]
    out = []
    for key, g in rows.groupby(["design", "metric", *others], sort=False, dropna=False):
        rec: dict[str, Any] = dict(zip(["design", "metric", *others], key if isinstance(key, tuple) else (key,)))
        rec["worlds"] = int(len(g))
        draws = g["seed_draws"].dropna().unique() if "seed_draws" in g else []
        rec["seed_draws"] = ", ".join(sorted(map(str, draws))) or "world"  # before review 7: synthetic only
        sized = g[[not _flag(w, False) and _flag(d, True)
                   for w, d in zip(g["analytic_withheld"], g["detectable"])]]
        rec["no_size"] = int(len(g) - len(sized))
        for name, col in _SPREAD:
            if name in ("impressions", "days"):
                v = pd.to_numeric(sized[col], errors="coerce").fillna(math.inf)  # 'never': no finite size
            else:
                v = pd.to_numeric(g[col], errors="coerce").dropna()
            rec[f"{name}_median"] = float(v.median()) if len(v) else math.nan
            rec[f"{name}_min"] = float(v.min()) if len(v) else math.nan
            rec[f"{name}_max"] = float(v.max()) if len(v) else math.nan
        out.append(rec)
    return pd.DataFrame(out)


def _spread_cell(row: Mapping[str, Any], name: str, fmt: Any) -> str:
    lo, mid, hi = (row[f"{name}_{k}"] for k in ("min", "median", "max"))
    if any(isinstance(x, float) and math.isnan(x) for x in (lo, mid, hi)):
        return "-"
    return f"{fmt(mid)} [{fmt(lo)}, {fmt(hi)}]"


def world_spread_text(spread: pd.DataFrame | None) -> str:
    """The terminal's block of :func:`world_spread`: median [min, max] across the seeds."""
    if spread is None or spread.empty:
        return ""
    from simulations.report import count_text, days_text, value_text

    def size(fmt: Any) -> Any:
        return lambda x: "never" if math.isinf(x) else fmt(x)

    kinds = _kinds(spread.to_dict(orient="records"))
    extra = [c for c in spread.columns if c not in ("design", "metric", "worlds", "no_size", "seed_draws")
             and not any(c.startswith(n + "_") for n, _ in _SPREAD)] + (["seed_draws"] if len(kinds) > 1 else [])
    shown = pd.DataFrame({
        "design": spread["design"], "metric": spread["metric"], **{c: spread[c] for c in extra},
        ("worlds" if kinds == ["world"] else "seeds"): spread["worlds"],  # review 7, F3: a trec seed is no world
        "true_effect": [_spread_cell(r, "true_effect", lambda x: value_text(x, True)) for _, r in spread.iterrows()],
        "offline_delta": [_spread_cell(r, "offline_delta", lambda x: value_text(x, True))
                          for _, r in spread.iterrows()],
        "impressions_needed": [_spread_cell(r, "impressions", size(count_text)) for _, r in spread.iterrows()],
        "days_needed": [_spread_cell(r, "days", size(days_text)) for _, r in spread.iterrows()],
        "no_size": spread["no_size"],
    })
    return (world_spread_heading(kinds) + ":\n" + shown.to_string(index=False) + "\n" + world_spread_legend(kinds))


def _kinds(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The :data:`SEED_DRAWS` kinds of a spread's rows (a row without one, from before review 7: 'world')."""
    out = {k.strip() for r in records for k in str(r.get("seed_draws") or "world").split(",")}
    return sorted(out, key=list(SEED_DRAWS).index) if out <= set(SEED_DRAWS) else sorted(out)


def world_spread_heading(kinds: Sequence[str]) -> str:
    """The spread's heading (terminal and report.html) for the :data:`SEED_DRAWS` kinds of its rows (review 7, F3:
    on a trec collection a seed draws no world)."""
    if list(kinds) in ([], ["world"]):
        return "across worlds (the seed axis: each seed draws its own world; median [min, max] over the seeds)"
    if list(kinds) == ["popularity"]:
        return ("across seeds (the seed axis on a trec collection: its queries, judgments and runs are the same at "
                "every seed, which only re-permutes the query popularity; median [min, max] over the seeds)")
    if list(kinds) == ["nothing"]:
        return ("across seeds (the seed axis on a trec collection with collection.frequencies: a seed redraws "
                "nothing of the world, only the replicates and Monte Carlo truths; median [min, max] over the seeds)")
    return ("across seeds (the seed axis; seed_draws: what a seed redraws of each row's world, "
            + "; ".join(f"{k}: {SEED_DRAWS.get(k, k)}" for k in kinds) + "; median [min, max] over the seeds)")


def world_spread_legend(kinds: Sequence[str]) -> str:
    """:data:`WORLD_SPREAD_LEGEND`, with :data:`TREC_SPREAD_LEGEND` when some rows are on a trec collection."""
    trec = [k for k in kinds if k != "world"]
    if not trec:
        return WORLD_SPREAD_LEGEND
    return TREC_SPREAD_LEGEND if "world" not in kinds else WORLD_SPREAD_LEGEND + " " + TREC_SPREAD_LEGEND


#: the legend of the terminal's and report.html's spread across worlds
WORLD_SPREAD_LEGEND = (
    "(one seed's numbers belong to the world it draws (queries, labels, rankers' noise, popularity), and every "
    "range a point reports is conditional on it; this is the spread of the truth and of the analytic sizes across "
    "the swept worlds, for the same config otherwise; impressions/days needed over the worlds with a size, "
    "'never' = the SE floor is above the target; no_size: worlds where the design was biased or had no effect)")

#: the spread's legend for a trec collection (review 7, F3): a seed draws no world there
TREC_SPREAD_LEGEND = (
    "(a trec collection's queries, judgments and runs are the same at every seed: a seed only re-permutes the "
    "query popularity (the Zipf frequencies over the queries; with collection.frequencies not even that, and "
    "only the replicates and the Monte Carlo truths differ), so this spread is not over worlds or query samples; "
    "how much the answers depend on the queries themselves is each point's SE over query samples (its report's "
    "Offline line and true effects); impressions/days needed over the seeds with a size, 'never' = the SE floor "
    "is above the target; no_size: seeds where the design was biased or had no effect)")


def _get(d: Any, path: Sequence[str]) -> Any:
    for k in path:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _metrics(summary: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(design, metric, entry) of every estimated metric of a point's summary, in order."""
    out = []
    for design, metrics in (summary.get("designs") or {}).items():
        if not isinstance(metrics, dict):
            continue
        for name, entry in metrics.items():
            if isinstance(entry, dict) and entry.get("true_effect") is not None:
                out.append((design, name, entry))
    return out


def point_rows(sweep: SweepConfig, summaries: Mapping[int, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per point and design: the axes' values (a file axis shows the file's name),
    the offline delta and the design's primary metric's truth and simulated results (``estimated_metric``: the
    online metric a counterfactual design's primary estimator estimates, None for other designs). ``null_mark`` is
    the sweep's mark of the null check (:func:`simulations.sweep_null.null_family`): a 'BIASED?' row has the sizes
    its point
    withheld (review 9, F1), 'BIASED' keeps them withheld; ``rows.attrs["null_family"]`` is the family."""
    from simulations.report_ratios import estimated_metric
    from simulations.sweep_null import WEAK, mark_of, null_family, sized_entry

    family = null_family(summaries)
    out = []
    for point in sweep.points:
        s = summaries[point.index]
        offline = _get(s, ("offline", "delta", "weighted"))
        for design, metrics in (s.get("designs") or {}).items():
            if not isinstance(metrics, dict) or not metrics:
                continue
            primary = (m for m, v in metrics.items() if isinstance(v, dict) and v.get("primary"))
            name = next(primary, next(iter(metrics)))
            mark = mark_of(family, point.index, design, name)
            m = sized_entry(metrics[name]) if mark == WEAK else metrics[name]
            row: dict[str, Any] = {"point": point.index, "folder": f"points/{point.folder_name}"}
            row.update({a: point.label(a) for a in sweep.axes})
            # the online metric a counterfactual design's estimator estimates (None for other designs, whose
            # metric is their own)
            row.update(design=design, metric=name, estimated_metric=estimated_metric(s, design),
                       replicates=_get(s, ("config", "replicates")), offline_delta=offline)
            row.update({col: _get(m, path) for col, path in _COLUMNS})
            for col, missing in _FLAGS.items():  # a reason string or a flag; null: the flag's default
                row[col] = missing if row[col] is None else bool(row[col])
            row["null_mark"] = mark or None
            row["fingerprint"] = s.get("config_fingerprint")
            row["seed_draws"] = seed_draws(point.config)  # review 7, F3: a trec seed draws no world
            out.append(row)
    rows = pd.DataFrame(out)
    rows.attrs["null_family"] = family
    return rows


def observations(
    sweep: SweepConfig, summaries: Mapping[int, Mapping[str, Any]], root: Path
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The shrinkage study's inputs: one row per point, design and metric
    (:data:`simulations.shrinkage.OBSERVATION_COLUMNS`), and the simulated experiments'
    last-day estimates and p-values (from each point's ``replicates.csv``)."""
    from simulations.analysis import improvement_sign
    from simulations.report_ratios import estimated_metric
    from simulations.sweep_null import WEAK, mark_of, null_family

    family = null_family(summaries)  # review 9, F1: a 'BIASED?' entry stays in the study, as its sizes stay shown
    obs, est = [], []
    for point in sweep.points:
        s = summaries[point.index]
        traffic, analysis = _get(s, ("config", "traffic")) or {}, _get(s, ("config", "analysis")) or {}
        kept = set()
        for design, metric, entry in _metrics(s):
            sign = improvement_sign(s, design, metric)
            vm = entry.get("variance_model") or {}
            final = entry.get("final_day") or {}
            obs.append({
                "point": point.index, "design": design, "metric": metric, "primary": bool(entry.get("primary")),
                # the online metric the effect is of: a counterfactual design's rows are estimators of its metric
                "unit": estimated_metric(s, design) or metric,
                "improvement_sign": sign, "offline_delta": float(_get(s, ("offline", "delta", "weighted"))),
                "online_effect": sign * float(entry["true_effect"]),
                "online_effect_se": float(entry.get("true_effect_se") or 0.0),
                "queries_per_day": float(traffic.get("queries_per_day", float("nan"))),
                "days": int(final.get("day") or traffic.get("days") or 0),
                "impressions": float(final.get("mean_impressions") or 0.0),
                "alpha": float(analysis.get("alpha", 0.05)), "power": float(analysis.get("power", 0.8)),
                "var_a": float(vm["a"]) if vm.get("a") is not None else float("nan"),
                "var_b": float(vm["b"]) if vm.get("b") is not None else 0.0,
                "analytic_withheld": entry.get("analytic_withheld") is not None
                and mark_of(family, point.index, design, metric) != WEAK,
                "system": system_key(s),
            })
            kept.add((design, metric))
        path = root / "points" / point.folder_name / "replicates.csv"
        if kept and path.is_file():
            reps = pd.read_csv(path, usecols=["replicate", "design", "aa", "day", "metric", "estimate", "pvalue"])
            reps = reps[~reps["aa"].astype(bool)]
            reps = reps[[(d, m) in kept for d, m in zip(reps["design"], reps["metric"])]]
            last = reps.groupby(["design", "metric"])["day"].transform("max")
            reps = reps[reps["day"] == last].drop(columns=["aa", "day"])
            reps.insert(0, "point", point.index)
            est.append(reps)
    estimates = pd.concat(est, ignore_index=True) if est else pd.DataFrame(
        columns=["point", "replicate", "design", "metric", "estimate", "pvalue"])
    from simulations.shrinkage import OBSERVATION_COLUMNS, OPTIONAL_OBSERVATION_COLUMNS

    return pd.DataFrame(obs, columns=[*OBSERVATION_COLUMNS, *OPTIONAL_OBSERVATION_COLUMNS]), estimates


#: the sections of a point's effective config that make its ranker pair (A, B, collection) and its offline delta
SYSTEM_KEYS = ("seed", "collection", "rankers", "offline_metric")


def system_key(summary: Mapping[str, Any]) -> str:
    """The ranker pair (A, B, collection) a point observes: its effective config's rankers, collection, seed
    and offline metric. Points with the same key differ only in the users, traffic, designs or analysis,
    so they are one system of the shrinkage study, whatever their online truths."""
    config = summary.get("config") or {}
    return json.dumps({k: config.get(k) for k in SYSTEM_KEYS}, sort_keys=True, default=str)


def sweep_fingerprint(fingerprints: Mapping[int, str]) -> str:
    """SHA-256 over the points' fingerprints (each covers its config and its input files' contents)."""
    body = json.dumps([[int(k), fingerprints[k]] for k in sorted(fingerprints)])
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def write_outputs(
    sweep: SweepConfig,
    summaries: Mapping[int, Mapping[str, Any]],
    root: Path,
    fingerprints: Mapping[int, str],
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Write the sweep's tables, summary and plots; return the rows and the shrinkage study."""
    from simulations.report import _clean
    from simulations.shrinkage import point_columns, shrinkage_study
    from simulations.shrinkage_plots import plot_mde, plot_relation

    rows = point_rows(sweep, summaries)
    family = rows.attrs.get("null_family")
    obs, estimates = observations(sweep, summaries, root)
    groups = {p.index: {a: p.label(a) for a in sweep.shrinkage_by} for p in sweep.points}
    offline_metric = str(_get(summaries[sweep.points[0].index], ("offline", "metric")) or "offline metric")
    labels = {p.index: {a: p.label(a) for a in sweep.axes} for p in sweep.points}
    study = shrinkage_study(obs, estimates, groups, sweep.shrinkage_by, offline_metric, labels=labels)
    extra = point_columns(study, obs)
    if len(rows) and len(extra):
        rows = rows.merge(extra, on=["point", "design"], how="left", validate="one_to_one")
    else:
        for col in extra.columns.drop(["point", "design"]):
            rows[col] = None
    for col in rows.columns[rows.dtypes == object]:
        values = rows[col].dropna()
        if len(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            rows[col] = rows[col].astype(float)  # None -> NaN: one numeric column in CSV and Parquet alike
    rows.attrs["null_family"] = family  # the merge above need not keep it
    rows.to_csv(root / "points.csv", index=False)
    rows.to_parquet(root / "points.parquet", index=False)
    summary = {
        "axes": sweep.axes,
        "shrinkage_by": list(sweep.shrinkage_by),
        "sweep_fingerprint": sweep_fingerprint(fingerprints),
        "points": [{"point": p.index, "folder": f"points/{p.folder_name}", "overrides": p.overrides,
                    "labels": {a: p.label(a) for a in p.overrides}, "fingerprint": fingerprints.get(p.index)}
                   for p in sweep.points],
        "rows": rows.to_dict(orient="records"),
        "shrinkage": study,
    }
    if family is not None:  # review 9, F1: the null checks' family over every point (simulations.sweep_null)
        summary["null_family"] = family
    spread = world_spread(rows, sweep.axes)
    if spread is not None:  # review 4, F1: a seed axis's points are independently drawn worlds
        summary["worlds"] = {"axis": WORLD_AXIS, "legend": world_spread_legend(_kinds(spread.to_dict("records"))),
                             "spread": spread.to_dict(orient="records")}
    (root / "summary.json").write_text(json.dumps(_clean(summary), indent=2), encoding="utf-8")
    _plot(sweep, rows, root / "effect.png")
    plot_relation(study, root / "shrinkage.png")
    plot_mde(study, root / "mde.png")
    from simulations.html_report import write_sweep_report

    write_sweep_report(root)  # report.html: a self-contained view of the files above and the points'
    return rows, study


def _plot(sweep: SweepConfig, rows: pd.DataFrame, path: Path) -> None:
    """One panel per design, each with its own y axis (the designs' effects are on different scales: an A/B
    metric's difference and an interleaving Delta_AB cannot be compared on one axis): the design's true effect
    (line) and mean estimate (markers) of its primary metric against the plot axis, one line per combination
    of the other axes. A categorical plot axis (e.g. the click model's preset) gets markers only, the truth as
    a bar: a line between categories would suggest a trend. Axes with one value at every point are neither the
    default x nor part of the lines' labels; long labels (a logger spec's JSON text) are wrapped."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # axes whose value is the same at every point neither make a good x nor tell lines apart (their long labels,
    # a logger spec or an estimator list, squeezed the panels to nothing)
    varying = [a for a in sweep.axes if a in rows and rows[a].map(str).nunique() > 1] or list(sweep.axes)
    x = sweep.plot_x
    if x is None:
        numeric = [a for a in varying if pd.to_numeric(rows[a], errors="coerce").notna().all()]
        x = numeric[0] if numeric else varying[0]
    others = [a for a in varying if a != x]
    categorical = not pd.to_numeric(rows[x], errors="coerce").notna().all() if len(rows) else False
    designs = list(dict.fromkeys(rows["design"])) if len(rows) else []
    ncols = min(max(len(designs), 1), 3)
    nrows = max(1, math.ceil(len(designs) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(1 + 5.2 * ncols, 4.2 * nrows), squeeze=False,
                             layout="constrained")
    truth = "bars" if categorical else "line"
    for ax, design in zip(axes.flat, designs):
        mine = rows[rows["design"] == design]
        groups = mine.groupby(others, sort=False, dropna=False) if others else [((), mine)]
        for key, group in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = textwrap.fill(", ".join(f"{a}={v}" for a, v in zip(others, key)), 60) or None
            g = group if categorical else group.sort_values(x)
            xs = g[x].map(lambda v: textwrap.fill(str(v), 28)) if categorical else g[x]
            if categorical:  # no line between categories: the truth as a bar-shaped marker
                line, = ax.plot(xs, g["true_effect"], ls="none", marker="_", ms=16, mew=2, label=label)
            else:
                line, = ax.plot(xs, g["true_effect"], "-", label=label)
            ax.plot(xs, g["mean_estimate"], "o", color=line.get_color())
        ax.axhline(0.0, color="grey", lw=0.5)
        metric = ", ".join(str(m) for m in dict.fromkeys(mine["metric"])) if "metric" in mine else "primary metric"
        ax.set_title(f"{design}: {metric}", fontsize=10)
        ax.set_xlabel(x)
        ax.set_ylabel(f"online effect, {metric}\n({truth}: truth, dots: mean estimate)")
        if others:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(designs):]:
        ax.set_visible(False)
    if len(designs) > 1:
        fig.suptitle("one panel per design, each on its own scale: compare designs by their sample sizes, "
                     "not their effects", fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
