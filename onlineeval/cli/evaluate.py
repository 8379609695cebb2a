"""``onlineeval evaluate``: offline metrics of one or more runs, conventions, paired tests.

Example::

    onlineeval evaluate --qrels qrels.txt --run A.txt --run B.txt --baseline A \\
        --metrics "nDCG@10,ERR@10,RBP(p=0.8),AP" --preset trec_eval --format json

LETOR input (LightGBM / XGBoost style): ``--letor test.txt --query-file test.query
--scores model_a.pred --scores model_b.pred --preset lightgbm``; ``--score-feature N`` makes
feature column ``N`` of the LETOR file a system of its own (e.g. BM25 as a baseline).

Every output states the conventions and how many queries were counted, excluded
(no relevant document), filled (judged but absent from the run) or ignored (no qrels).
``--format csv`` is one long table (system, query or ``all`` or ``segment:<attr>=<value>``,
metric, value, n, residual, err_gmax, queries_*, convention_*); the paired comparisons
go to ``--comparisons FILE``. Metric names of trec_eval and ir_measures are translated
(:mod:`onlineeval.metrics.names`) and each translation is reported.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, cast

import typer

from onlineeval.cli._common import guarded

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from onlineeval.conventions import Conventions
    from onlineeval.metrics.evaluate import RunEvaluation
    from onlineeval.stats import PairedResult

FORMATS = ("table", "json", "csv")
_NO_PAIRS = "none (no query is counted for every system)"


def _system_names(paths: list[Path]) -> list[str]:
    """A short unique name per run file: the stem (``bm25`` for ``runs/bm25.txt``), else
    the file name (``results.test``, ``results.trunc``), else the shortest distinguishing
    tail of the path (``a/run.txt``, ``b/run.txt``)."""
    from onlineeval.errors import ConfigError

    resolved = [p.resolve() for p in paths]
    if len(set(resolved)) != len(resolved):
        raise ConfigError(("run",), "the same run file is given twice")
    for candidate in ([p.stem for p in paths], [p.name for p in paths]):
        if len(set(candidate)) == len(candidate):
            return candidate
    depth = 2
    while True:
        names = ["/".join(r.parts[-depth:]) for r in resolved]
        if len(set(names)) == len(names):
            return names
        depth += 1


def _resolve_baseline(baseline: str, names: list[str], paths: list[Path]) -> str:
    """The system named ``baseline``: its short name, or the path or stem it was given by."""
    from onlineeval.errors import ConfigError

    if baseline in names:
        return baseline
    by_path = {str(p): n for p, n in zip(paths, names)} | {str(p.resolve()): n for p, n in zip(paths, names)}
    if baseline in by_path:
        return by_path[baseline]
    stems = [n for p, n in zip(paths, names) if p.stem == baseline or p.name == baseline]
    if len(stems) == 1:
        return stems[0]
    raise ConfigError(("baseline",), f"{baseline!r} is not one of the systems ({', '.join(names)})")


def _clean(value: Any) -> Any:
    """JSON-safe scalars (NaN -> None, numpy -> Python)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


@guarded
def evaluate_cmd(
    qrels: Annotated[
        Optional[Path], typer.Option("--qrels", "-q", help="TREC qrels file (query iter doc grade).")
    ] = None,
    run: Annotated[
        Optional[list[Path]], typer.Option("--run", "-r", help="TREC run file; repeat for several systems.")
    ] = None,
    letor: Annotated[
        Optional[Path],
        typer.Option("--letor", help="LETOR/SVMlight file (label qid:Q ...) instead of --qrels; systems via --scores."),
    ] = None,
    scores: Annotated[
        Optional[list[Path]],
        typer.Option("--scores", help="Score file for --letor (one number per line); repeat for several systems."),
    ] = None,
    score_feature: Annotated[
        Optional[list[int]],
        typer.Option(
            "--score-feature", min=0,
            help="Use this feature column of the --letor file as a system's score (named feature<N>); repeatable.",
        ),
    ] = None,
    query_file: Annotated[
        Optional[Path], typer.Option("--query-file", help="Group sizes for a LETOR file without qid: (LightGBM .query).")
    ] = None,
    metrics: Annotated[
        str, typer.Option("--metrics", "-m", help='Comma-separated metrics, e.g. "nDCG@10,ERR@10,RBP(p=0.8),AP".')
    ] = "nDCG@10,AP,RR,P@10",
    baseline: Annotated[
        Optional[str], typer.Option("--baseline", "-b", help="System the others are compared with (file stem, or feature<N>); default the first system.")
    ] = None,
    preset_name: Annotated[
        str, typer.Option("--preset", help="Conventions preset: default, trec_eval, lightgbm or xgboost.")
    ] = "default",
    gain: Annotated[Optional[str], typer.Option("--gain", help="exponential, linear or a table '1=1,2=3'.")] = None,
    ties: Annotated[
        Optional[str],
        typer.Option("--ties", help="docno_desc, input_order, pessimistic, optimistic or expected."),
    ] = None,
    empty: Annotated[
        Optional[str], typer.Option("--empty", help="Queries without relevant documents: exclude, one or zero.")
    ] = None,
    missing: Annotated[
        Optional[str], typer.Option("--missing", help="Qrels queries absent from a run: error, zero or drop.")
    ] = None,
    rel_min: Annotated[Optional[int], typer.Option("--rel-min", help="Smallest relevant grade for binary metrics.")] = None,
    depth: Annotated[Optional[int], typer.Option("--depth", min=1, help="Read at most this many documents per query.")] = None,
    per_query: Annotated[
        Optional[Path], typer.Option("--per-query", help="Write per-query values (query,system,metric,value,convention_*) to this CSV.")
    ] = None,
    with_per_query: Annotated[
        bool, typer.Option("--with-per-query", help="Include per-query values in the JSON output and the csv table.")
    ] = False,
    segments: Annotated[
        Optional[Path], typer.Option("--segments", help="Per-query attribute TSV (header: query<TAB>attr...).")
    ] = None,
    output_format: Annotated[
        str,
        typer.Option(
            "--format", "-f",
            help="table, json or csv (one long table: system, query or 'all', metric, value, n, residual, "
            "convention_*).",
        ),
    ] = "table",
    comparisons_file: Annotated[
        Optional[Path],
        typer.Option(
            "--comparisons",
            help="Write the paired comparisons (one row per segment x metric x system) to this CSV; any --format.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the randomisation test and bootstrap.")] = 0,
    permutations: Annotated[int, typer.Option("--permutations", min=1, help="Randomisation-test permutations.")] = 10_000,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=100, help="Bootstrap replicates.")] = 10_000,
    alpha: Annotated[float, typer.Option("--alpha", min=0.0, max=1.0, help="Significance level.")] = 0.05,
) -> None:
    """Offline metrics of runs under explicit conventions, with paired significance tests."""
    from onlineeval.errors import ConfigError

    if output_format not in FORMATS:  # before the imports: a typo costs no start-up
        raise ConfigError(("format",), f"must be one of {', '.join(FORMATS)}; got {output_format!r}")
    import pandas as pd

    from onlineeval.conventions import Gain, preset
    from onlineeval.io import read_qrels, read_run
    from onlineeval.metrics import parse_metrics
    from onlineeval.metrics.evaluate import evaluate_run
    from onlineeval.metrics.tables import common_queries as _common
    from onlineeval.metrics.tables import err_scales as _err_scales
    from onlineeval.metrics.tables import long_frame as _long_frame
    from onlineeval.metrics.tables import rbp_residuals as _rbp_residuals

    if output_format not in FORMATS:
        raise ConfigError(("format",), f"must be one of {', '.join(FORMATS)}; got {output_format!r}")
    if (qrels is None) == (letor is None):
        raise ConfigError(("qrels",), "give either --qrels with --run, or --letor with --scores")
    if (qrels is not None and scores) or (letor is not None and run):
        raise ConfigError(("run",), "--run goes with --qrels, --scores with --letor")
    if qrels is not None and score_feature:
        raise ConfigError(("score-feature",), "--score-feature goes with --letor")
    features = list(score_feature or [])
    paths = list(run or []) if qrels is not None else list(scores or [])
    if not paths and not features:
        raise ConfigError(("run",) if qrels is not None else ("scores",), "give at least one system")
    from onlineeval.metrics.names import common_rel_min, resolve_metric_list

    metric_names, translations = resolve_metric_list(metrics)
    base_conv = preset(preset_name)
    asked_rel = common_rel_min(
        translations, len(metric_names), rel_min if rel_min is not None else base_conv.rel_min, rel_min is not None
    )
    conv = base_conv.with_(
        gain=Gain.parse(gain) if gain is not None else None,
        ties=ties,
        empty=empty,
        missing=missing,
        rel_min=rel_min if rel_min is not None or asked_rel == base_conv.rel_min else asked_rel,
        depth=depth,
    )
    ms = parse_metrics(metric_names)
    names_note = "names: " + "; ".join(t.describe() for t in translations) if translations else ""
    for option, target in (("per-query", per_query), ("comparisons", comparisons_file)):
        if target is not None and not target.parent.is_dir():
            raise ConfigError((option,), f"the folder {target.parent} does not exist")
    names = _system_names(paths) + [f"feature{f}" for f in features]
    if len(set(names)) != len(names):
        raise ConfigError(("score-feature",), f"two systems share a name: {', '.join(names)}")
    baseline = names[0] if baseline is None else _resolve_baseline(baseline, names, paths)
    runs: list[pd.DataFrame] = []
    if qrels is not None:
        q = read_qrels(qrels, check_unique=False)  # evaluate_run checks repeated pairs
        runs = [read_run(path, check_unique=False) for path in paths]
    elif letor is not None:
        from onlineeval.io import read_letor
        from onlineeval.io.letor import read_scores

        q = read_letor(letor, query_file=query_file).qrels  # the LETOR file is parsed once for score files
        for path in paths:
            frame = pd.DataFrame(
                {"query": q["query"].to_numpy(), "doc": q["doc"].to_numpy(), "score": read_scores(path, len(q))}
            )
            frame.attrs["path"] = str(path)
            runs.append(frame)
        for f in features:
            runs.append(cast("pd.DataFrame", read_letor(letor, score_feature=f, query_file=query_file).run))
    evals = [evaluate_run(q, r, ms, conv, run_id=name) for name, r in zip(names, runs)]
    residual_values = _rbp_residuals(q, runs, names, ms, conv)
    residuals = {key: float(v.mean()) if len(v) else math.nan for key, v in residual_values.items()}
    err_gmax = _err_scales(q, ms)

    long = _long_frame(evals)
    if per_query is not None:
        long.assign(**{f"convention_{k}": v for k, v in conv.describe().items()}).to_csv(per_query, index=False)
    comparisons: list[PairedResult] = []
    common_queries: int | None = None
    seg_frame = None
    if segments is not None:
        from onlineeval.stats import read_segments

        seg_frame = read_segments(segments)
    # the csv stream is one table: comparisons are computed only where they are written
    want_comparisons = output_format != "csv" or comparisons_file is not None
    if len(evals) > 1:
        long_c, common_queries = _common(long, len(evals))
        if common_queries and want_comparisons:
            # (no query counted for every system: nothing to pair)
            from onlineeval.stats import compare_segments, compare_systems

            options = dict(n_permutations=permutations, n_bootstrap=bootstrap, alpha=alpha)
            comparisons = compare_systems(long_c, baseline, seed=seed, **options)
            if seg_frame is not None:
                comparisons = comparisons + compare_segments(long_c, seg_frame, baseline, seed=seed, **options)
    coverage = _segment_coverage(segments, seg_frame, long) if segments is not None and seg_frame is not None else None
    seg_means = _segment_means(long, seg_frame) if seg_frame is not None else None

    if comparisons_file is not None:
        _comparisons_frame(comparisons, conv).to_csv(comparisons_file, index=False)
    if output_format == "json":
        doc = _json(evals, conv, comparisons, common_queries, seg_means, with_per_query)
        if err_gmax:
            doc["err_gmax"] = err_gmax
        if translations:
            doc["names"] = [
                {"given": t.given, "metrics": list(t.metrics), "source": t.source, "rel_min": t.rel_min}
                for t in translations
            ]
        if coverage is not None:
            doc["segments"] = coverage
        for entry in doc["systems"]:
            for metric, rec in entry["metrics"].items():
                if (entry["name"], metric) in residuals and rec["mean"] is not None:
                    res = residuals[(entry["name"], metric)]
                    rec["residual"] = _clean(res)
                    rec["interval"] = [rec["mean"], _clean(rec["mean"] + res)]
        typer.echo(json.dumps(doc, indent=2))
    elif output_format == "csv":
        tidy = _tidy(evals, conv, seg_means, residual_values, err_gmax, with_per_query)
        typer.echo(tidy.to_csv(index=False), nl=False)
        if names_note:
            typer.echo(f"note: {names_note}", err=True)
        if common_queries == 0:
            typer.echo(f"note: {_NO_PAIRS}", err=True)
        elif len(evals) > 1 and comparisons_file is None:
            typer.echo("note: paired comparisons are not in the csv table; write them with --comparisons FILE", err=True)
        if coverage is not None and (coverage["not_evaluated"] or coverage["evaluated_without_attributes"]):
            typer.echo("note: " + _coverage_text(coverage), err=True)
    else:
        text = _table(evals, conv, comparisons, common_queries, seg_means, baseline)
        if names_note:
            first, sep, rest = text.partition("\n")
            text = first + "\n" + names_note + sep + rest
        if err_gmax:
            first, sep, rest = text.partition("\n")
            notes = "\n".join(f"{m}: gmax = {g} (top grade of the qrels)" for m, g in err_gmax.items())
            text = first + "\n" + notes + sep + rest
        if coverage is not None:
            text += "\n\n" + _coverage_text(coverage)
        if residuals:
            lines = ["", "RBP as an interval [RBP, RBP + residual] (unjudged and unseen documents):"]
            for ev in evals:
                for m in ev.metrics:
                    if (ev.run_id, str(m)) in residuals:
                        low = ev.mean(m)
                        high = low + residuals[(ev.run_id, str(m))]
                        lines.append(f"  {ev.run_id} {m}: [{_fmt(low)}, {_fmt(high)}]")
            text += "\n" + "\n".join(lines)
        typer.echo(text)


def _segment_coverage(path: Path, seg: pd.DataFrame, long: pd.DataFrame) -> dict[str, Any]:
    """How the attribute file's queries meet the evaluated (counted) queries.

    Raises
    ------
    InputError
        When no query of the file is evaluated (ids of another collection, a prefix
        mismatch, ...): every segment would silently be ``<missing>``.
    """
    from onlineeval.errors import InputError
    from onlineeval.stats import MISSING_SEGMENT

    in_file = set(seg.index.astype(str))
    evaluated = set(long["query"].astype(str))
    both = in_file & evaluated
    if evaluated and not both:
        raise InputError(
            f"none of its {len(in_file)} queries is an evaluated query (file ids e.g. {sorted(in_file)[0]!r}; "
            f"evaluated ids e.g. {sorted(evaluated)[0]!r})",
            str(path),
        )
    return {
        "file": str(path),
        "attributes": [str(c) for c in seg.columns],
        "queries_in_file": len(in_file),
        "not_evaluated": len(in_file - evaluated),
        "evaluated_without_attributes": len(evaluated - in_file),
        "missing_value": MISSING_SEGMENT,
    }


def _coverage_text(c: dict[str, Any]) -> str:
    return (
        f"segments from {c['file']} ({', '.join(c['attributes'])}): {c['queries_in_file']} queries in the file, "
        f"{c['not_evaluated']} of them not evaluated; {c['evaluated_without_attributes']} evaluated queries "
        f"without attributes form the segment {c['missing_value']}"
    )


def _segment_means(long: pd.DataFrame, seg: pd.DataFrame) -> pd.DataFrame:
    from onlineeval.stats import by_segment

    def table(f: pd.DataFrame) -> pd.DataFrame:
        return f.groupby(["system", "metric"], sort=False)["value"].agg(["mean", "count"]).reset_index()

    return by_segment(long, seg, table)


def _json(
    evals: list[RunEvaluation],
    conv: Conventions,
    comparisons: list[PairedResult],
    common_queries: int | None,
    seg_means: pd.DataFrame | None,
    with_per_query: bool,
) -> dict[str, Any]:
    from onlineeval.stats import results_to_frame, worst_losses_to_frame

    systems = []
    for ev in evals:
        entry: dict[str, Any] = {"name": ev.run_id, "counts": ev.counts.as_dict(), "metrics": {}}
        for m in ev.metrics:
            rec: dict[str, Any] = {"mean": _clean(ev.mean(m)), "n": int(ev.counted.sum())}
            if with_per_query:
                rec["per_query"] = {
                    str(q): _clean(float(v)) for q, v in zip(ev.queries[ev.counted], ev.values[m][ev.counted])
                }
            entry["metrics"][str(m)] = rec
        systems.append(entry)
    out: dict[str, Any] = {
        "conventions": conv.describe(),
        "metrics": [str(m) for m in evals[0].metrics],
        "systems": systems,
    }
    if common_queries is not None:
        out["paired_queries"] = common_queries
        out["comparisons"] = []
    if comparisons:
        frame = results_to_frame(comparisons)
        out["comparisons"] = [{k: _clean(v) for k, v in row.items()} for row in frame.to_dict("records")]
        worst = worst_losses_to_frame(comparisons)
        out["worst_losses"] = [{k: _clean(v) for k, v in row.items()} for row in worst.to_dict("records")]
    if seg_means is not None:
        out["segment_means"] = [{k: _clean(v) for k, v in row.items()} for row in seg_means.to_dict("records")]
    return out


def _with_conventions(frame: pd.DataFrame, conv: Conventions) -> pd.DataFrame:
    for k, v in conv.describe().items():
        frame[f"convention_{k}"] = v
    return frame


def _comparisons_frame(comparisons: list[PairedResult], conv: Conventions) -> pd.DataFrame:
    """The paired comparisons (``--comparisons FILE``), one ``convention_*`` column per convention."""
    import pandas as pd

    if comparisons:
        from onlineeval.stats import results_to_frame

        frame = results_to_frame(comparisons)
    else:
        frame = pd.DataFrame(columns=["segment_attribute", "segment_value", "metric", "system", "baseline", "n"])
    return _with_conventions(frame, conv)


#: columns of the ``--format csv`` table, in order (then ``queries_*`` and ``convention_*``)
TIDY_COLUMNS = ("system", "query", "metric", "value", "n", "residual", "err_gmax")


def _tidy(
    evals: list[RunEvaluation],
    conv: Conventions,
    seg_means: pd.DataFrame | None,
    residuals: dict[tuple[str, str], pd.Series],
    err_gmax: dict[str, int],
    with_per_query: bool,
) -> pd.DataFrame:
    """One long table: per system and metric the mean (``query`` = ``all``), each segment's
    mean (``query`` = ``segment:<attr>=<value>``) and, with ``--with-per-query``, every
    counted query's value; ``n`` is the number of queries in the value. ``residual`` is the
    RBP residual (the value is the lower end of [RBP, RBP + residual]), ``err_gmax`` the
    ERR scale top taken from the qrels, ``queries_*`` the query counts (on ``all`` rows)."""
    import numpy as np
    import pandas as pd

    parts: list[pd.DataFrame] = []
    for ev in evals:
        n_counted = int(ev.counted.sum())
        counts = {f"queries_{k}": v for k, v in ev.counts.as_dict().items()}
        queries = ev.queries[ev.counted].astype(str)
        if with_per_query:
            clash = [q for q in queries if q == "all" or q.startswith("segment:")]
            if clash:
                from onlineeval.errors import ConfigError

                raise ConfigError(
                    ("with-per-query",),
                    f"query id {str(clash[0])!r} reads as a summary row of the csv table (all, segment:...); "
                    "write per-query values with --per-query FILE or use --format json",
                )
        for m in ev.metrics:
            key = (ev.run_id, str(m))
            res = residuals.get(key)
            row = {"system": ev.run_id, "query": "all", "metric": str(m), "value": ev.mean(m), "n": n_counted}
            row["residual"] = float(res.mean()) if res is not None and len(res) else math.nan
            parts.append(pd.DataFrame([row | counts]))
            if with_per_query and len(queries):
                pq = pd.DataFrame(
                    {"system": ev.run_id, "query": queries, "metric": str(m),
                     "value": ev.values[m][ev.counted].astype(np.float64), "n": 1}
                )
                pq["residual"] = res.reindex(queries).to_numpy() if res is not None else math.nan
                parts.append(pq)
    if seg_means is not None and len(seg_means):
        seg = pd.DataFrame(
            {
                "system": seg_means["system"].to_numpy(),
                "query": [f"segment:{a}={v}" for a, v in zip(seg_means["segment_attribute"], seg_means["segment_value"])],
                "metric": seg_means["metric"].to_numpy(),
                "value": seg_means["mean"].to_numpy(dtype=np.float64),
                "n": seg_means["count"].to_numpy(dtype=np.int64),
            }
        )
        seg["residual"] = math.nan  # the RBP residual is reported for the whole set of queries
        parts.append(seg)
    frame = pd.concat(parts, ignore_index=True)
    frame["err_gmax"] = frame["metric"].map(err_gmax).astype("Int64")
    frame["n"] = frame["n"].astype("Int64")
    for col in frame.columns:
        if col.startswith("queries_"):
            frame[col] = frame[col].astype("Int64")
    rest = [c for c in frame.columns if c not in TIDY_COLUMNS]
    return _with_conventions(frame[[*TIDY_COLUMNS, *rest]].copy(), conv)


def _fmt(x: float | None, digits: int = 4) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _table(
    evals: list[RunEvaluation],
    conv: Conventions,
    comparisons: list[PairedResult],
    common_queries: int | None,
    seg_means: pd.DataFrame | None,
    baseline: str,
) -> str:
    lines: list[str] = []
    desc = conv.describe()
    lines.append("conventions: " + ", ".join(f"{k}={v}" for k, v in desc.items()))
    for ev in evals:
        c = ev.counts
        lines.append(
            f"queries [{ev.run_id}]: counted {c.counted}, excluded (no relevant) {c.excluded_empty}, "
            f"counted though empty {c.scored_empty}, filled (missing from run) {c.filled_missing}, "
            f"dropped (missing) {c.dropped_missing}, ignored (not in qrels) {c.ignored_unjudged}"
        )
    metrics = [str(m) for m in evals[0].metrics]
    width = max(8, *(len(ev.run_id) for ev in evals))
    cols = [max(8, len(m)) for m in metrics]
    lines.append("")
    lines.append("system".ljust(width) + "  " + "  ".join(m.rjust(w) for m, w in zip(metrics, cols)))
    for ev in evals:
        vals = [_fmt(ev.mean(m)).rjust(w) for m, w in zip(ev.metrics, cols)]
        lines.append(ev.run_id.ljust(width) + "  " + "  ".join(vals))
    if common_queries == 0:
        lines.append("")
        lines.append(f"paired comparisons vs {baseline}: {_NO_PAIRS}")
    if comparisons:
        lines.append("")
        level = f"{100 * comparisons[0].ci_level:g}%"
        lines.append(
            f"paired comparisons vs {baseline} ({common_queries} queries): diff = system - baseline; "
            f"BCa low/high = paired bootstrap BCa {level} CI;\n"
            "  p_rand = randomisation (sign-flip) test; p_holm = p_rand Holm-corrected within each segment "
            f"table over systems x metrics (* = significant at alpha {comparisons[0].alpha:g});\n"
            "  p_t = paired t-test; W/L/T = wins/losses/ties; d_z = mean diff / sd of diffs"
        )
        header = ["segment", "metric", "system", "n", "diff", "BCa low", "BCa high", "p_rand", "p_holm", "p_t",
                  "W/L/T", "d_z"]
        rows: list[list[str]] = []
        for r in comparisons:
            seg = "all" if r.segment_attribute is None else f"{r.segment_attribute}={r.segment_value}"
            rows.append(
                [
                    seg,
                    r.metric,
                    r.system,
                    str(r.n),
                    _fmt(r.mean_diff),
                    _fmt(r.ci_bca_low),
                    _fmt(r.ci_bca_high),
                    _fmt(r.p_randomization),
                    _fmt(r.p_randomization_holm) + ("*" if r.significant else ""),
                    _fmt(r.p_t),
                    f"{r.wins}/{r.losses}/{r.ties}",
                    _fmt(r.effect_size, 3),
                ]
            )
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for row in rows:
            lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths)))
        worst = [r for r in comparisons if r.segment_attribute is None and r.worst]
        if worst:
            lines.append("")
            lines.append("worst per-query losses:")
            for r in worst:
                items = ", ".join(f"{w.query} ({_fmt(w.diff)})" for w in r.worst)
                lines.append(f"  {r.metric} {r.system}: {items}")
    if seg_means is not None and len(seg_means):
        lines.append("")
        lines.append("means per segment:")
        for _, row in seg_means.iterrows():
            lines.append(
                f"  {row['segment_attribute']}={row['segment_value']} ({row['segment_queries']} queries) "
                f"{row['system']} {row['metric']}: {_fmt(row['mean'])}"
            )
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add the ``evaluate`` command to the main app."""
    app.command("evaluate")(evaluate_cmd)


#: option -> (parameter, kind, bounds) of :func:`evaluate_cmd`, for :func:`run_direct`
#: (tests check this table against typer's own parameters)
_DIRECT_OPTIONS: dict[str, tuple[str, str, tuple[float | None, float | None]]] = {}
for _names, _param, _kind, _bounds in (
    (("--qrels", "-q"), "qrels", "path", (None, None)),
    (("--run", "-r"), "run", "paths", (None, None)),
    (("--letor",), "letor", "path", (None, None)),
    (("--scores",), "scores", "paths", (None, None)),
    (("--score-feature",), "score_feature", "ints", (0, None)),
    (("--query-file",), "query_file", "path", (None, None)),
    (("--metrics", "-m"), "metrics", "str", (None, None)),
    (("--baseline", "-b"), "baseline", "str", (None, None)),
    (("--preset",), "preset_name", "str", (None, None)),
    (("--gain",), "gain", "str", (None, None)),
    (("--ties",), "ties", "str", (None, None)),
    (("--empty",), "empty", "str", (None, None)),
    (("--missing",), "missing", "str", (None, None)),
    (("--rel-min",), "rel_min", "int", (None, None)),
    (("--depth",), "depth", "int", (1, None)),
    (("--per-query",), "per_query", "path", (None, None)),
    (("--with-per-query",), "with_per_query", "flag", (None, None)),
    (("--segments",), "segments", "path", (None, None)),
    (("--format", "-f"), "output_format", "str", (None, None)),
    (("--comparisons",), "comparisons_file", "path", (None, None)),
    (("--seed",), "seed", "int", (0, None)),
    (("--permutations",), "permutations", "int", (1, None)),
    (("--bootstrap",), "bootstrap", "int", (100, None)),
    (("--alpha",), "alpha", "float", (0.0, 1.0)),
):
    for _name in _names:
        _DIRECT_OPTIONS[_name] = (_param, _kind, _bounds)


def _direct_value(kind: str, text: str, bounds: tuple[float | None, float | None]) -> Any:
    """The option value typer would pass, or ``None`` when the text is not plainly valid."""
    import re

    if not text or text.startswith("-"):
        return None
    if kind in ("path", "paths"):
        return Path(text)
    if kind == "str":
        return text
    if kind in ("int", "ints"):
        if not re.fullmatch(r"0|[1-9][0-9]{0,17}", text):
            return None
        value: float = int(text)
    else:  # float
        if not re.fullmatch(r"(0|[1-9][0-9]{0,8})(\.[0-9]{1,15})?|\.[0-9]{1,15}", text):
            return None
        value = float(text)
    low, high = bounds
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


def direct_params(args: list[str]) -> dict[str, Any] | None:
    """Parameters of :func:`evaluate_cmd` from plain ``evaluate`` arguments, exactly as typer
    would pass them, or ``None`` for anything else (help, an unknown, repeated, attached or
    malformed option, a value out of range): typer then parses, and reports errors, itself."""
    params: dict[str, Any] = {}
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        spec = _DIRECT_OPTIONS.get(name)
        if spec is None:
            return None
        param, kind, bounds = spec
        if kind == "flag":
            if eq or param in params:
                return None
            params[param] = True
            i += 1
            continue
        if eq:
            text = attached
            i += 1
        elif i + 1 < len(args):
            text = args[i + 1]
            i += 2
        else:
            return None
        value = _direct_value(kind, text, bounds)
        if value is None:
            return None
        if kind in ("paths", "ints"):
            params.setdefault(param, []).append(value)
        elif param in params:
            return None
        else:
            params[param] = value
    defaults = {
        "qrels": None, "run": (), "letor": None, "scores": (), "score_feature": (), "query_file": None,
        "metrics": "nDCG@10,AP,RR,P@10", "baseline": None, "preset_name": "default", "gain": None,
        "ties": None, "empty": None, "missing": None, "rel_min": None, "depth": None, "per_query": None,
        "with_per_query": False, "segments": None, "output_format": "table", "comparisons_file": None,
        "seed": 0, "permutations": 10_000, "bootstrap": 10_000, "alpha": 0.05,
    }
    return defaults | params


def run_direct(args: list[str]) -> bool:
    """Run ``evaluate`` without building the typer app when :func:`direct_params` can parse
    ``args``; ``False`` (nothing done) otherwise. Exits like typer: 0, or the error's code."""
    import sys

    params = direct_params(args)
    if params is None:
        return False
    _keep_freed_memory()
    try:
        evaluate_cmd(**params)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    return True


def _keep_freed_memory() -> None:
    """Let glibc's allocator keep freed memory for reuse (this process only).

    Reading and ranking millions of rows allocate and free many arrays of tens of MB; by
    default glibc returns each to the system (``munmap`` / heap trimming) and the next one
    is page-faulted in afresh, which costs more system time than the numpy work itself
    (about 3.5 of 9 CPU seconds at 10M rows). Larger mmap and trim thresholds keep that
    memory in the process (peak memory about 10% higher). No effect on any result; a C
    library without ``mallopt`` (not glibc) is left alone.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD
    for option, value in ((-1, 2**31 - 1), (-2, 1 << 30), (-3, 1 << 30)):
        mallopt(option, value)
