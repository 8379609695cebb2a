"""Output of ``onlineeval evaluate``: the table, JSON and tidy csv, segment summaries.

Split from :mod:`onlineeval.cli.evaluate` (which parses the options and evaluates); every
function here formats :class:`~onlineeval.metrics.evaluate.RunEvaluation` objects and
paired comparisons that are already computed. pandas is imported only by the outputs that
build frames (csv, segments, comparisons), so a plain table or JSON of one run needs none.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from onlineeval.conventions import Conventions
    from onlineeval.metrics.evaluate import RunEvaluation
    from onlineeval.stats import PairedResult

NO_PAIRS = "none (no query is counted for every system)"


def clean(value: Any) -> Any:
    """JSON-safe scalars (NaN -> None, numpy -> Python)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return clean(value.item())
    return value


def segment_coverage(path: Path, seg: pd.DataFrame, long: pd.DataFrame) -> dict[str, Any]:
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


def coverage_text(c: dict[str, Any]) -> str:
    return (
        f"segments from {c['file']} ({', '.join(c['attributes'])}): {c['queries_in_file']} queries in the file, "
        f"{c['not_evaluated']} of them not evaluated; {c['evaluated_without_attributes']} evaluated queries "
        f"without attributes form the segment {c['missing_value']}"
    )


def segment_means(long: pd.DataFrame, seg: pd.DataFrame) -> pd.DataFrame:
    from onlineeval.stats import by_segment

    def table(f: pd.DataFrame) -> pd.DataFrame:
        return f.groupby(["system", "metric"], sort=False)["value"].agg(["mean", "count"]).reset_index()

    return by_segment(long, seg, table)


def json_doc(
    evals: list[RunEvaluation],
    conv: Conventions,
    comparisons: list[PairedResult],
    common_queries: int | None,
    seg_means: pd.DataFrame | None,
    with_per_query: bool,
) -> dict[str, Any]:
    systems = []
    for ev in evals:
        entry: dict[str, Any] = {"name": ev.run_id, "counts": ev.counts.as_dict(), "metrics": {}}
        for m in ev.metrics:
            rec: dict[str, Any] = {"mean": clean(ev.mean(m)), "n": int(ev.counted.sum())}
            if with_per_query:
                rec["per_query"] = {
                    str(q): clean(float(v)) for q, v in zip(ev.queries[ev.counted], ev.values[m][ev.counted])
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
        from onlineeval.stats import results_to_frame, worst_losses_to_frame

        frame = results_to_frame(comparisons)
        out["comparisons"] = [{k: clean(v) for k, v in row.items()} for row in frame.to_dict("records")]
        worst = worst_losses_to_frame(comparisons)
        out["worst_losses"] = [{k: clean(v) for k, v in row.items()} for row in worst.to_dict("records")]
    if seg_means is not None:
        out["segment_means"] = [{k: clean(v) for k, v in row.items()} for row in seg_means.to_dict("records")]
    return out


def _with_conventions(frame: pd.DataFrame, conv: Conventions) -> pd.DataFrame:
    for k, v in conv.describe().items():
        frame[f"convention_{k}"] = v
    return frame


def comparisons_frame(comparisons: list[PairedResult], conv: Conventions) -> pd.DataFrame:
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


def tidy(
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


def fmt(x: float | None, digits: int = 4) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def table(
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
        vals = [fmt(ev.mean(m)).rjust(w) for m, w in zip(ev.metrics, cols)]
        lines.append(ev.run_id.ljust(width) + "  " + "  ".join(vals))
    if common_queries == 0:
        lines.append("")
        lines.append(f"paired comparisons vs {baseline}: {NO_PAIRS}")
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
                    fmt(r.mean_diff),
                    fmt(r.ci_bca_low),
                    fmt(r.ci_bca_high),
                    fmt(r.p_randomization),
                    fmt(r.p_randomization_holm) + ("*" if r.significant else ""),
                    fmt(r.p_t),
                    f"{r.wins}/{r.losses}/{r.ties}",
                    fmt(r.effect_size, 3),
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
                items = ", ".join(f"{w.query} ({fmt(w.diff)})" for w in r.worst)
                lines.append(f"  {r.metric} {r.system}: {items}")
    if seg_means is not None and len(seg_means):
        lines.append("")
        lines.append("means per segment:")
        for _, row in seg_means.iterrows():
            lines.append(
                f"  {row['segment_attribute']}={row['segment_value']} ({row['segment_queries']} queries) "
                f"{row['system']} {row['metric']}: {fmt(row['mean'])}"
            )
    return "\n".join(lines)
