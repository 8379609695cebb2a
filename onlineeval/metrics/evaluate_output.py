"""Output of ``onlineeval evaluate``: the table, JSON and tidy csv, segment summaries.

Used by the command (:mod:`onlineeval.cli.evaluate`, which parses the options and evaluates) and by the Python
API (:func:`onlineeval.evaluate`'s comparison frames), so it lives outside the command line; every function here
formats :class:`~onlineeval.metrics.evaluate.RunEvaluation` objects and paired comparisons that are already
computed. pandas is imported only by the outputs that
build frames (csv, segments, comparisons), so a plain table or JSON of one run needs none.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from onlineeval.conventions import Conventions
    from onlineeval.metrics.base import Metric
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


#: how the paired comparisons' p-values and intervals are defined (with the run's seed and counts: reproducible)
RANDOMIZATION = ("two-sided paired randomisation (sign-flip) test of the mean difference: exact over all 2^n sign "
                 "vectors when 2^n <= n_permutations (p = count(|T*| >= |T|) / 2^n), else n_permutations random "
                 "sign vectors with p = (b + 1) / (B + 1)")
BOOTSTRAP = "paired bootstrap of the mean difference (queries resampled): BCa and percentile intervals"
STREAMS = ("each comparison's randomisation-test and bootstrap streams are children of SeedSequence(seed) keyed by "
           "the CRC-32 of its metric, system and baseline names: the same whatever else the call compares")
CORRECTION = "Holm"
CORRECTION_FAMILY = ("the systems x metrics of one segment table: all queries ('all'), and each "
                     "segment_attribute=segment_value separately")


def test_settings(seed: int, n_permutations: int, n_bootstrap: int, alpha: float, level: float) -> dict[str, Any]:
    """The settings that reproduce the paired comparisons: the seed (numpy SeedSequence; each comparison's streams
    keyed by its names, :func:`onlineeval.stats.compare.comparison_seeds`), the counts and the tests' definitions
    (JSON ``tests``; ``--comparisons`` columns)."""
    return {
        "seed": seed,
        "streams": STREAMS,
        "n_permutations": n_permutations,
        "randomization": RANDOMIZATION,
        "randomization_sides": "two-sided",
        "n_bootstrap": n_bootstrap,
        "bootstrap": BOOTSTRAP,
        "ci_level": level,
        "correction": CORRECTION,
        "correction_family": CORRECTION_FAMILY,
        "alpha": alpha,
        "t_test": "paired t-test, two-sided",
    }


def json_doc(
    evals: list[RunEvaluation],
    conv: Conventions,
    comparisons: list[PairedResult],
    common_queries: int | None,
    seg_means: pd.DataFrame | None,
    with_per_query: bool,
    tests: dict[str, Any] | None = None,
    paired: dict[str, int] | None = None,
    unpaired: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON document; ``paired`` (paired queries per metric) adds ``paired_queries_per_metric`` when the
    metrics' counts differ (``paired_queries`` is the fewest); ``unpaired`` (:func:`unpaired_rows`) are
    comparisons with ``n`` 0, null values and a ``reason``."""
    systems = []
    for ev in evals:
        entry: dict[str, Any] = {"name": ev.run_id, "counts": ev.counts.as_dict(), "metrics": {}}
        for m in ev.metrics:
            rows = ev.counted_for(m)  # the metric's own queries (relevance-free metrics: every evaluated one)
            rec: dict[str, Any] = {"mean": clean(ev.mean(m)), "n": ev.n(m)}
            if type(m).summed:  # a count: trec_eval's and ir_measures' summary is the sum
                rec["sum"] = clean(ev.total(m))
            if with_per_query:
                rec["per_query"] = {str(q): clean(float(v)) for q, v in zip(ev.queries[rows], ev.values[m][rows])}
            entry["metrics"][str(m)] = rec
        systems.append(entry)
    out: dict[str, Any] = {
        "conventions": conv.describe(),
        "metrics": [str(m) for m in evals[0].metrics],
        "systems": systems,
    }
    per_metric = queries_per_metric(evals)
    if per_metric is not None:
        out["queries_per_metric"] = per_metric
    if common_queries is not None:
        out["paired_queries"] = common_queries
        if paired and len(set(paired.values())) > 1:
            out["paired_queries_per_metric"] = paired
        if tests is not None:
            out["tests"] = tests
        out["comparisons"] = []
    differ = query_sets(evals)
    if differ is not None:  # comparisons[].mean_baseline / mean_system are the paired means
        out["query_sets_differ"] = differ
    if comparisons:
        from onlineeval.stats import results_to_frame, worst_losses_to_frame

        frame = results_to_frame(comparisons)
        out["comparisons"] = [{k: clean(v) for k, v in row.items()} for row in frame.to_dict("records")]
        worst = worst_losses_to_frame(comparisons)
        out["worst_losses"] = [{k: clean(v) for k, v in row.items()} for row in worst.to_dict("records")]
        notes = comparison_notes(comparisons)
        if unpaired:
            nulls = dict.fromkeys(frame.columns)
            out["comparisons"] += [{**nulls, **r} for r in unpaired]
            notes = notes + unpaired_notes(unpaired)
        if notes:
            out["comparison_notes"] = notes
    if seg_means is not None:
        out["segment_means"] = [{k: clean(v) for k, v in row.items()} for row in seg_means.to_dict("records")]
    return out


#: why a metric has no paired comparison (the ``reason`` of :func:`unpaired_rows`)
NO_RELEVANT = "no queries to compare (empty=exclude: no query has a relevant document)"
NO_RELEVANT_SEGMENT = "no queries to compare (empty=exclude: no query of this segment has a relevant document)"
NOT_SHARED = "no queries to compare (no query is counted for every system)"


def unpaired_rows(
    evals: list[RunEvaluation],
    conv: Conventions,
    long: pd.DataFrame,
    long_c: pd.DataFrame,
    baseline: str,
    comparisons: list[PairedResult],
    seg_frame: pd.DataFrame | None = None,
) -> list[dict[str, Any]]:
    """The (segment, metric, system) comparisons that have no paired query while another metric of the same
    segment has some: one record each with ``n`` 0 and ``reason``, so that no metric leaves the comparisons
    silently. ``long`` is every system's counted rows, ``long_c`` the paired ones."""
    metrics = [str(m) for m in evals[0].metrics]
    systems = [ev.run_id for ev in evals if ev.run_id != baseline]
    exclude = conv.describe().get("empty") == "exclude"
    views: list[tuple[str | None, str | None, Any]] = [(None, None, None)]
    if seg_frame is not None:
        from onlineeval.stats.segments import iter_segments

        views += [(v.attribute, v.value, set(v.queries)) for v in iter_segments(seg_frame, long["query"].unique())]
    done = {(r.segment_attribute, r.segment_value, r.metric) for r in comparisons}
    present = {(r.segment_attribute, r.segment_value) for r in comparisons}
    rows: list[dict[str, Any]] = []
    for attribute, value, queries in views:
        if (attribute, value) not in present:
            continue  # no metric paired here: the whole table is empty, said elsewhere
        for m in metrics:
            if (attribute, value, m) in done:
                continue
            own = long[long["metric"] == m]
            if queries is not None:
                own = own[own["query"].isin(queries)]
            if exclude and not len(own):
                reason = NO_RELEVANT if attribute is None else NO_RELEVANT_SEGMENT
            else:
                reason = NOT_SHARED
            rows.extend({"segment_attribute": attribute, "segment_value": value, "metric": m, "system": s,
                         "baseline": baseline, "n": 0, "reason": reason} for s in systems)
    return rows


def unpaired_notes(unpaired: list[dict[str, Any]]) -> list[str]:
    """One note per (segment, metric) without paired queries."""
    seen: dict[tuple[Any, Any, str], str] = {}
    for r in unpaired:
        seen.setdefault((r["segment_attribute"], r["segment_value"], r["metric"]), r["reason"])
    return [f"{m}{'' if a is None else f' ({a}={v})'}: {reason}; it has no paired comparison (n = 0)"
            for (a, v, m), reason in seen.items()]


def _with_conventions(frame: pd.DataFrame, conv: Conventions) -> pd.DataFrame:
    for k, v in conv.describe().items():
        frame[f"convention_{k}"] = v
    return frame


def system_digests(inputs: dict[str, Any]) -> dict[str, str]:
    """Each system's input SHA-256 from a command's ``inputs`` (:mod:`onlineeval.io.digest`): its run or score
    file's; a LETOR feature's (``--score-feature``) is the LETOR file's, whose column it is."""
    own = inputs.get("runs", inputs.get("scores", {}))
    letor = inputs.get("letor", {}).get("sha256")
    out = {str(name): entry["sha256"] for name, entry in own.items()}
    return out | ({"*": letor} if letor is not None else {})


def with_digests(frame: pd.DataFrame, digests: dict[str, str], fingerprint: str,
                 columns: tuple[str, ...] = ("system",)) -> pd.DataFrame:
    """``frame`` with a ``<column>_sha256`` for each of ``columns`` (the SHA-256 of that system's input file,
    :func:`system_digests`) and the command's ``fingerprint``: what a CSV's numbers come from, on every row."""
    for column in columns:
        frame[f"{column}_sha256"] = [digests.get(str(name), digests.get("*", "")) for name in frame[column]]
    frame["fingerprint"] = fingerprint
    return frame


def comparisons_frame(
    comparisons: list[PairedResult],
    conv: Conventions,
    tests: dict[str, Any] | None = None,
    unpaired: list[dict[str, Any]] | None = None,
) -> pd.DataFrame:
    """The paired comparisons (``--comparisons FILE``), then the test settings (``seed``, ``randomization``,
    ``randomization_sides``, ``bootstrap``, ``correction``, ``correction_family``: :func:`test_settings`) and one
    ``convention_*`` column per convention; with ``unpaired`` (:func:`unpaired_rows`) their rows and a ``reason``
    column."""
    import pandas as pd

    if comparisons:
        from onlineeval.stats import results_to_frame

        frame = results_to_frame(comparisons)
    else:
        frame = pd.DataFrame(columns=["segment_attribute", "segment_value", "metric", "system", "baseline", "n"])
    if unpaired:  # the metrics without paired queries: n 0, empty values, a reason (a column only then)
        ints = [c for c in frame.columns if pd.api.types.is_integer_dtype(frame[c])]
        frame = pd.concat([frame.assign(reason=""), pd.DataFrame(unpaired)], ignore_index=True)
        frame = frame.astype({c: "Int64" for c in ints})  # the counts stay integers beside the empty cells
    if tests is not None:
        for key in ("seed", "randomization", "randomization_sides", "bootstrap", "correction", "correction_family"):
            frame[key] = tests[key]
    return _with_conventions(frame, conv)


#: columns of the ``--format csv`` table, in order (then ``queries_*`` and ``convention_*``)
TIDY_COLUMNS = ("system", "query", "metric", "value", "n", "residual", "err_gmax", "sum")


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
    counted query's value; ``n`` is the number of queries in the value (under ``empty=exclude`` a
    relevance-free metric such as Judged@k also counts the queries without a relevant document). ``residual`` is the
    RBP residual (the value is the lower end of [RBP, RBP + residual]), ``err_gmax`` the
    ERR scale top taken from the qrels, ``sum`` a count's sum over the counted queries (on
    ``all`` rows of the counts, NumQ ... NumNonRelJudgedRet: what trec_eval's ``all`` line prints; the
    value is the mean), ``queries_*`` the query counts (on ``all`` rows)."""
    import numpy as np
    import pandas as pd

    from onlineeval.metrics.tables import summary_row

    parts: list[pd.DataFrame] = []
    for ev in evals:
        if with_per_query:
            queries = ev.queries[ev.per_query_rows()].astype(str)
            clash = [q for q in queries if q == "all" or q.startswith("segment:")]
            if clash:
                from onlineeval.errors import ConfigError

                raise ConfigError(
                    ("with-per-query",),
                    f"query id {str(clash[0])!r} reads as a summary row of the csv table (all, segment:...); "
                    "write per-query values with --per-query FILE or use --format json",
                )
        for m in ev.metrics:
            parts.append(pd.DataFrame([{"query": "all"} | summary_row(ev, m, residuals, err_gmax)]))
            res = residuals.get((ev.run_id, str(m)))
            rows = ev.counted_for(m)  # the metric's own queries
            if with_per_query and rows.any():
                queries = ev.queries[rows].astype(str)
                pq = pd.DataFrame(
                    {"system": ev.run_id, "query": queries, "metric": str(m),
                     "value": ev.values[m][rows].astype(np.float64), "n": 1}
                )
                pq["residual"] = res.reindex(queries).to_numpy() if res is not None else math.nan
                parts.append(pq)
    if seg_means is not None and len(seg_means):
        seg = pd.DataFrame(
            {
                "system": seg_means["system"].to_numpy(),
                "query": [f"segment:{a}={v}"
                          for a, v in zip(seg_means["segment_attribute"], seg_means["segment_value"])],
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
    from onlineeval.formatting import fixed

    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else fixed(x, digits)


def _defined(r: PairedResult, x: float, digits: int = 4) -> str:
    """``undef`` for the t-test's 0/0 (n >= 2, every difference 0), else :func:`fmt`."""
    return "undef" if r.n >= 2 and math.isnan(x) else fmt(x, digits)


def summary(ev: RunEvaluation, m: Metric) -> str:
    """The table's value of a metric: the mean, or a count's sum (``Metric.summed``), as trec_eval prints it."""
    if not type(m).summed:
        return fmt(ev.mean(m))
    total = ev.total(m)
    return f"{total:.0f}" if total == round(total) else fmt(total)


#: below this many paired queries the output warns that the bootstrap interval is too narrow
FEW_QUERIES = 20


def _percentile_coverage(n: int, level: float) -> float:
    """Large-sample coverage of the bootstrap interval of a mean of ``n`` normal differences:
    mean +- z * (plug-in SE), the plug-in SE being sqrt((n-1)/n) times the usual one, so the
    coverage is P(|t_{n-1}| < z sqrt((n-1)/n)) (Hesterberg 2015; see PairedResult)."""
    from scipy import special

    z = float(special.ndtri(0.5 + level / 2.0))
    return float(1.0 - 2.0 * special.stdtr(n - 1, -z * math.sqrt((n - 1) / n)))


def comparison_notes(comparisons: list[PairedResult]) -> list[str]:
    """Warnings and explanations the paired comparisons need: few queries (the bootstrap
    interval too narrow, the exact test perhaps unable to reject), rows of one query (NaN),
    identical values (p_t and d_z undefined, printed ``undef``)."""
    notes: list[str] = []
    few = [r.n for r in comparisons if 2 <= r.n < FEW_QUERIES]
    if few:
        n, r = min(few), comparisons[0]
        cover = _percentile_coverage(n, r.ci_level)
        text = (
            f"warning: paired comparisons on fewer than {FEW_QUERIES} queries (n = {n}"
            f"{'' if len(set(few)) == 1 else ' at the fewest'}): the bootstrap interval is too narrow at this "
            f"size (a nominal {100 * r.ci_level:g}% interval covers about {100 * cover:.0f}% at n = {n} for "
            "normal differences, less for skewed ones) and can exclude 0 where the exact randomisation test "
            "cannot reject; read p_rand"
        )
        exact = all(c.randomization_exact for c in comparisons if c.n == n)  # else p_rand >= 1/(B+1)
        if exact and 2.0 ** (1 - n) >= r.alpha:
            text += f" (with {n} queries p_rand is at least {2.0 ** (1 - n):g}: nothing can be significant)"
        notes.append(text)
    if any(r.n == 1 for r in comparisons):
        notes.append("n = 1: a single paired query has no spread; its tests, intervals and d_z are undefined (nan)")
    if any(r.n >= 2 and math.isnan(r.p_t) for r in comparisons):
        notes.append("undef: every paired difference is 0 (identical values), so t and d_z are 0/0; p_rand is 1")
    return notes


def queries_per_metric(evals: list[RunEvaluation]) -> dict[str, dict[str, int]] | None:
    """``{system: {metric: queries in its mean}}`` when some metric's mean is over another number of queries
    than the ``counted`` of the queries line (``empty=exclude`` with queries excluded: a relevance-free metric
    such as Judged@k counts them); ``None`` when every mean is over the counted queries."""
    if not any(ev.n(m) != ev.counts.counted for ev in evals for m in ev.metrics):
        return None
    return {ev.run_id: {str(m): ev.n(m) for m in ev.metrics} for ev in evals}


def per_metric_lines(evals: list[RunEvaluation]) -> list[str]:
    """One line per system whose relevance-free metrics (Judged@k, Unjudged@k, NumRet, RBPResidual) are
    averaged over more queries than the others (``empty=exclude`` excluded queries without a relevant
    document: those metrics need none, and ir_measures' means count those queries)."""
    lines = []
    for ev in evals:
        more = [m for m in ev.metrics if ev.n(m) != ev.counts.counted]
        if not more:
            continue
        sizes = sorted({ev.n(m) for m in more})
        extra = sizes[0] - ev.counts.counted
        n_text = "/".join(str(n) for n in sizes)
        who = ", ".join(str(m) for m in more)
        one = len(more) == 1
        text = (
            f"queries per mean [{ev.run_id}]: {n_text} for {who} ({'it does' if one else 'they do'} not depend on "
            f"relevance, so {'its mean counts' if one else 'their means count'} the {extra} "
            f"{'query' if extra == 1 else 'queries'} without a relevant document too, as ir_measures' means do)"
        )
        if len(more) < len(ev.metrics):
            text += f", {ev.counts.counted} for the other metrics (empty=exclude)"
        lines.append(text)
    return lines


def no_query_notes(evals: list[RunEvaluation]) -> list[str]:
    """A note per system with metrics averaged over no query (their means print nan): which, and why."""
    lines = []
    for ev in evals:
        empty = [str(m) for m in ev.metrics if ev.n(m) == 0 and not type(m).summed]
        if not empty:
            continue
        c = ev.counts
        why = []
        if c.excluded_empty:
            why.append(f"{c.excluded_empty} judged {'query has' if c.excluded_empty == 1 else 'queries have'} no "
                       f"relevant document and empty=exclude leaves {'it' if c.excluded_empty == 1 else 'them'} out "
                       f"(--empty zero, as trec_eval, or one counts {'it' if c.excluded_empty == 1 else 'them'})")
        if c.dropped_missing:
            why.append(f"{c.dropped_missing} judged {'query is' if c.dropped_missing == 1 else 'queries are'} "
                       f"missing from the run and missing=drop leaves {'it' if c.dropped_missing == 1 else 'them'} out")
        lines.append(f"note: {ev.run_id}: {', '.join(empty)} averaged over no query, so undefined (nan)"
                     + (f": {'; '.join(why)}" if why else ""))
    return lines


def query_sets(evals: list[RunEvaluation]) -> dict[str, Any] | None:
    """How many queries each system's means are over, and how many every system shares (the paired
    comparisons' queries), when the systems' query sets of a metric differ (``--missing drop`` with runs that
    answer different queries); ``None`` when they are the same (or there is one system).

    ``counted`` and ``shared`` are those of the first metric whose sets differ; unless every metric's sets
    differ alike (under ``empty=exclude`` the relevance-free ones, Judged@k, count more queries), ``by_metric``
    gives ``{metric: {"counted": ..., "shared": ...}}`` for every metric whose sets differ."""
    if len(evals) < 2:
        return None
    groups: dict[tuple[frozenset[str], ...], list[str]] = {}
    for m in evals[0].metrics:
        sets = tuple(frozenset(str(q) for q in ev.queries[ev.counted_for(m)]) for ev in evals)
        if len(set(sets)) > 1:
            groups.setdefault(sets, []).append(str(m))
    if not groups:
        return None
    found = []
    for sets, names in groups.items():
        counted = {ev.run_id: len(q) for ev, q in zip(evals, sets)}
        found.append((names, counted, len(frozenset.intersection(*sets))))
    names, counted, shared = found[0]
    every_metric = len(found) == 1 and len(names) == len(evals[0].metrics)
    if every_metric:
        each = ", ".join(f"{k}: {v}" for k, v in counted.items())
        paired = f"the {shared} {'query' if shared == 1 else 'queries'} counted for every system"
    else:  # the metrics' own query sets (empty=exclude: the relevance-free ones count more)
        each = "; ".join(f"{', '.join(n)}: " + ", ".join(f"{k}: {v}" for k, v in c.items()) for n, c, _ in found)
        paired = "the queries counted for every system (" + "; ".join(
            f"{sh} for {', '.join(n)}" for n, _, sh in found) + ")"
    note = (
        f"the systems' means are over different queries ({each}); the paired comparisons use {paired}, whose "
        "means are the comparisons' "
        "base mean and sys mean (diff = sys mean - base mean), so a diff and the means above can differ, even in sign"
    )
    out: dict[str, Any] = {"counted": counted, "shared": shared, "note": note}
    if not every_metric:
        out["by_metric"] = {m: {"counted": c, "shared": sh} for n, c, sh in found for m in n}
    return out


def _by_value(counts: dict[str, int]) -> dict[int, list[str]]:
    """``{n: [metric, ...]}`` from ``{metric: n}`` (first-appearance order)."""
    out: dict[int, list[str]] = {}
    for m, n in counts.items():
        out.setdefault(n, []).append(m)
    return out


def _bootstrap_text(comparisons: list[PairedResult], seed: int | None) -> str:
    """`` (10,000 resamples of the queries, seed 0)``: what the BCa columns were computed from (comparisons on one
    query have no interval: left out)."""
    counts = sorted({r.n_bootstrap for r in comparisons if r.n_bootstrap > 0})
    if not counts:
        return ""
    what = "/".join(f"{c:,}" for c in counts)
    return f" ({what} resamples of the queries{'' if seed is None else f', seed {seed}'})"


def _randomization_text(comparisons: list[PairedResult], seed: int | None) -> str:
    """How the randomisation p-values were computed: exact over all 2^n sign vectors, or ``B`` random ones (with
    the seed and the largest Monte Carlo SE of a p-value, 0.5 / sqrt(B)), or each where it applies (comparisons on
    one query have no test: left out)."""
    exact = any(r.randomization_exact for r in comparisons)
    counts = sorted({r.n_permutations for r in comparisons if not r.randomization_exact and r.n_permutations > 0})
    if not counts:
        return " (exact: all 2^n sign vectors)" if exact else ""
    b = max(counts)
    drawn = (f"{'/'.join(f'{c:,}' for c in counts)} random sign vectors{'' if seed is None else f', seed {seed}'}, "
             f"Monte Carlo SE of p at most {0.5 / math.sqrt(b):.2g}")
    return f" (exact over all 2^n sign vectors where 2^n <= {b:,}, else {drawn})" if exact else f" ({drawn})"


def table(
    evals: list[RunEvaluation],
    conv: Conventions,
    comparisons: list[PairedResult],
    common_queries: int | None,
    seg_means: pd.DataFrame | None,
    baseline: str,
    paired: dict[str, int] | None = None,
    unpaired: list[dict[str, Any]] | None = None,
    seed: int | None = None,
) -> str:
    """The terminal table; ``paired`` (paired queries per metric) names the metrics paired on other numbers of
    queries than ``common_queries`` (the fewest) in the comparisons' header; ``unpaired``
    (:func:`unpaired_rows`) are rows with n 0 and their reason."""
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
    lines.extend(per_metric_lines(evals))
    metrics = [str(m) for m in evals[0].metrics]
    width = max(8, *(len(ev.run_id) for ev in evals))
    cols = [max(8, len(m)) for m in metrics]
    lines.append("")
    lines.append("system".ljust(width) + "  " + "  ".join(m.rjust(w) for m, w in zip(metrics, cols)))
    for ev in evals:
        vals = [summary(ev, m).rjust(w) for m, w in zip(ev.metrics, cols)]
        lines.append(ev.run_id.ljust(width) + "  " + "  ".join(vals))
    lines.extend(no_query_notes(evals))
    counts = [str(m) for m in evals[0].metrics if type(m).summed]
    if counts:
        lines.append(
            f"({', '.join(counts)}: sum over the counted queries, as trec_eval's all line and ir_measures "
            "report counts; every other column is a mean)"
        )
    differ = query_sets(evals)
    if differ is not None:
        lines.append(f"note: {differ['note']}")
    if common_queries == 0 and not comparisons:
        lines.append("")
        lines.append(f"paired comparisons vs {baseline}: {NO_PAIRS}")
    if comparisons:
        lines.append("")
        level = f"{100 * comparisons[0].ci_level:g}%"
        if common_queries == 0:  # not everyone's count: name the metrics without a paired query
            n_pairs = "no query for " + ", ".join(m for m, n in (paired or {}).items() if n == 0)
        else:
            n_pairs = f"{common_queries} {'query' if common_queries == 1 else 'queries'}"
        other = {m: n for m, n in (paired or {}).items() if n != common_queries}
        n_pairs += "".join(f"; {', '.join(ms)}: {n}" for n, ms in _by_value(other).items())
        lines.append(
            f"paired comparisons vs {baseline} ({n_pairs}): "
            "diff = system - baseline; "
            f"BCa low/high = paired bootstrap BCa {level} CI{_bootstrap_text(comparisons, seed)};\n"
            f"  p_rand = randomisation (sign-flip) test{_randomization_text(comparisons, seed)}; "
            "p_holm = p_rand Holm-corrected within each segment "
            f"table over systems x metrics (* = significant at alpha {comparisons[0].alpha:g});\n"
            "  p_t = paired t-test; W/L/T = wins/losses/ties; d_z = mean diff / sd of diffs"
        )
        header = ["segment", "metric", "system", "n", *(["base mean", "sys mean"] if differ else []), "diff",
                  "BCa low", "BCa high", "p_rand", "p_holm", "p_t", "W/L/T", "d_z"]
        rows: list[list[str]] = []
        for r in comparisons:
            seg = "all" if r.segment_attribute is None else f"{r.segment_attribute}={r.segment_value}"
            rows.append(
                [
                    seg,
                    r.metric,
                    r.system,
                    str(r.n),
                    *([fmt(r.mean_baseline), fmt(r.mean_system)] if differ else []),
                    fmt(r.mean_diff),
                    fmt(r.ci_bca_low),
                    fmt(r.ci_bca_high),
                    fmt(r.p_randomization),
                    fmt(r.p_randomization_holm) + ("*" if r.significant else ""),
                    _defined(r, r.p_t),
                    f"{r.wins}/{r.losses}/{r.ties}",
                    _defined(r, r.effect_size, 3),
                ]
            )
        reasons = [""] * len(rows)
        for u in unpaired or []:
            seg = "all" if u["segment_attribute"] is None else f"{u['segment_attribute']}={u['segment_value']}"
            rows.append([seg, u["metric"], u["system"], "0", *(["-"] * (len(header) - 4))])
            reasons.append(u["reason"])
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
        lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for row, why in zip(rows, reasons):
            lines.append(("  ".join(v.ljust(w) for v, w in zip(row, widths)) + "  " + why).rstrip()
                         if why else "  ".join(v.ljust(w) for v, w in zip(row, widths)))
        lines.extend(comparison_notes(comparisons))
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
            n_seg, n_mean = int(row["segment_queries"]), int(row["count"])
            inside = "" if n_mean == n_seg else f", {n_mean} in this mean"  # Judged@k and AP: other queries
            lines.append(
                f"  {row['segment_attribute']}={row['segment_value']} ({n_seg} queries{inside}) "
                f"{row['system']} {row['metric']}: {fmt(row['mean'])}"
            )
    return "\n".join(lines)
