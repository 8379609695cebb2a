"""Offline evaluation in the Python API: :func:`evaluate`, :func:`evaluate_letor` and their :class:`Evaluation`.

The numbers of ``onlineeval evaluate`` (and ``--letor``) on DataFrames, pytrec_eval dicts or TREC files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onlineeval.api._inputs import PathLike, TableLike, _frame, _is_path, _named_runs, check_unique_columns
from onlineeval.errors import ConfigError, InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from onlineeval.conventions import Conventions
    from onlineeval.metrics.evaluate import RunEvaluation
    from onlineeval.metrics.names import Translation
    from onlineeval.stats import PairedResult


def _conventions(
    metrics: str | Sequence[str], preset_name: str, overrides: dict[str, Any]
) -> tuple[list[str], list[Translation], Conventions]:
    """Metric names (trec_eval / ir_measures names translated) and the conventions, as the CLI builds them."""
    from onlineeval.conventions import Gain, preset
    from onlineeval.metrics.names import common_rel_min, resolve_metric_list

    from onlineeval.api._inputs import names_text

    text = names_text(metrics, "metrics", "metric names")
    names, translations = resolve_metric_list(text, trec_eval_preset=preset_name == "trec_eval")
    base = preset(preset_name)
    rel_min = overrides.get("rel_min")
    asked = common_rel_min(translations, len(names), rel_min if rel_min is not None else base.rel_min,
                           rel_min is not None)
    gain = overrides.get("gain")
    conv = base.with_(
        gain=Gain.parse(gain) if isinstance(gain, str) else gain,
        ties=overrides.get("ties"),
        empty=overrides.get("empty"),
        missing=overrides.get("missing"),
        rel_min=rel_min if rel_min is not None or asked == base.rel_min else asked,
        depth=overrides.get("depth"),
    )
    return names, list(translations), conv


@dataclass(frozen=True)
class Evaluation:
    """Offline metrics of one or more systems, with the conventions and the paired comparisons.

    Attributes
    ----------
    per_query:
        One row per counted query, system and metric: ``system, query, metric, value`` (each metric's own
        queries: under ``empty="exclude"`` Judged@k, Unjudged@k, NumRet and RBPResidual also count the queries
        without a relevant document, which they do not depend on).
    aggregate:
        One row per system and metric: ``system, metric, value`` (mean over counted
        queries), ``n`` (counted queries of the metric), ``residual`` (RBP's residual: the value is the
        lower end of ``[RBP, RBP + residual]``), ``err_gmax`` (ERR's scale top from the
        qrels), ``sum`` (a count's sum over counted queries, NumQ, NumRet, NumRel, NumRelRet, NumNonRelJudgedRet, as
        trec_eval's ``all`` line; NaN for other metrics) and the query counts ``queries_*``
        (as ``onlineeval evaluate --format csv``).
    conventions:
        The :class:`~onlineeval.conventions.Conventions` in force.
    comparisons:
        :class:`~onlineeval.stats.PairedResult` of every system against ``baseline`` on
        every metric (randomisation test, paired bootstrap BCa CI, t-test, Holm, effect
        size, wins/losses/ties, worst losses); empty for one system.
    baseline:
        The system the others are compared with.
    paired_queries:
        Queries counted for every system, for every metric: the fewest over the metrics, 0 when one metric has
        none (``None`` for one system); under ``empty="exclude"`` a relevance-free metric (Judged@k) is paired on
        more queries, its comparison's ``n``.
    translations:
        trec_eval / ir_measures names that were translated (``P_10 -> P@10``).
    runs:
        The :class:`~onlineeval.metrics.evaluate.RunEvaluation` of each system.
    segment_means:
        With ``segments``: ``segment_attribute, segment_value, segment_queries, system,
        metric, mean, count`` per segment (queries without attributes form ``<missing>``);
        the comparisons then hold one row per segment too.
    paired_queries_per_metric:
        Paired queries of each metric (``None`` for one system).
    inputs, fingerprint:
        Each input's digest (``{"qrels": ..., "runs": {name: ...}, "segments": ...}``) and the fingerprint of
        those with the metrics, conventions and test options (:mod:`onlineeval.io.digest`): a file's path, size
        and SHA-256 (for files only, the CLI's fingerprint for the same files, names and options); an input in
        memory its type (``in_memory``) and the SHA-256 of its content (a DataFrame's Arrow table, a dict of dicts'
        canonical JSON: :func:`~onlineeval.io.digest.memory_entry`), so the same content and options give the same
        fingerprint; ``None`` when an input has no such form.
    unpaired:
        The (segment, metric, system) comparisons without a paired query while another metric of the segment has
        some (e.g. P@2 when no query has a relevant document under ``empty="exclude"``, Judged@2 paired): dicts
        with ``segment_attribute, segment_value, metric, system, baseline``, ``n`` 0 and ``reason``.
        :meth:`comparisons_frame` lists them (empty values, a ``reason`` column); :meth:`comparison` raises with
        the reason.
    """

    per_query: pd.DataFrame
    aggregate: pd.DataFrame
    conventions: Conventions
    comparisons: tuple[PairedResult, ...]
    baseline: str
    paired_queries: int | None
    translations: tuple[Translation, ...]
    runs: Mapping[str, RunEvaluation] = field(repr=False)
    segment_means: pd.DataFrame | None = None
    paired_queries_per_metric: dict[str, int] | None = None
    unpaired: tuple[dict[str, Any], ...] = ()
    inputs: Mapping[str, Any] | None = None
    fingerprint: str | None = None

    @property
    def systems(self) -> list[str]:
        """System names in the order given."""
        return list(self.runs)

    @property
    def metrics(self) -> list[str]:
        """Metric names (canonical, e.g. ``nDCG@10``)."""
        return [str(m) for m in next(iter(self.runs.values())).metrics]

    def mean(self, system: str, metric: str) -> float:
        """The mean of ``metric`` for ``system`` over its counted queries."""
        rows = self.aggregate[(self.aggregate["system"] == system) & (self.aggregate["metric"] == metric)]
        if rows.empty and metric not in self.metrics:  # a trec_eval / ir_measures name: its translation
            from onlineeval.metrics.names import resolve_metric_list

            try:
                names, _ = resolve_metric_list(metric, self.conventions.name.split("+")[0] == "trec_eval")
            except ConfigError:
                names = []
            if len(names) == 1:
                rows = self.aggregate[(self.aggregate["system"] == system) & (self.aggregate["metric"] == names[0])]
        if rows.empty:
            raise ConfigError(("metric",), f"no value for system {system!r} and metric {metric!r}; systems: "
                              f"{', '.join(self.systems)}; metrics: {', '.join(self.metrics)}")
        return float(rows["value"].iloc[0])

    def comparisons_frame(self) -> pd.DataFrame:
        """The paired comparisons as one row each (the columns of ``--comparisons FILE``); the metrics without a
        paired query (:attr:`unpaired`) as rows with n 0, empty values and a ``reason`` column."""
        from onlineeval.metrics.evaluate_output import comparisons_frame

        frame = comparisons_frame(list(self.comparisons), self.conventions, None, list(self.unpaired))
        return frame[[c for c in frame.columns if not c.startswith("convention_")]]

    def comparison(self, system: str, metric: str) -> PairedResult:
        """The paired comparison of ``system`` against the baseline on ``metric``."""
        for r in self.comparisons:
            if r.system == system and r.metric == metric and r.segment_attribute is None:
                return r
        for u in self.unpaired:
            if u["system"] == system and u["metric"] == metric and u["segment_attribute"] is None:
                raise ConfigError(("metric",), f"no comparison of {system!r} on {metric!r} against "
                                  f"{self.baseline!r}: {u['reason']}")
        raise ConfigError(("system",), f"no comparison of {system!r} on {metric!r} against {self.baseline!r}")


def _check_test_options(seed: Any, permutations: Any, bootstrap: Any, alpha: Any) -> None:
    """The paired tests' options of :func:`evaluate` (a :class:`~onlineeval.errors.ConfigError` naming the
    argument): a seed >= 0, whole numbers of permutations and resamples in [1, MAX_RESAMPLES], a level in
    [MIN_ALPHA, 1)."""
    import numbers

    from onlineeval.errors import MAX_RESAMPLES, ConfigError, check_seed, significance_level

    check_seed(seed)
    for key, value in (("permutations", permutations), ("bootstrap", bootstrap)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= MAX_RESAMPLES:
            raise ConfigError((key,), f"must be a whole number in [1, {MAX_RESAMPLES:,}], got {value!r}")
    significance_level(alpha)


def evaluate(
    qrels: TableLike,
    runs: TableLike | Mapping[str, TableLike] | Sequence[PathLike],
    metrics: str | Sequence[str] = "nDCG@10,AP,RR,P@10",
    *,
    preset: str = "default",
    gain: str | None = None,
    ties: str | None = None,
    empty: str | None = None,
    missing: str | None = None,
    rel_min: int | None = None,
    depth: int | None = None,
    baseline: str | None = None,
    seed: int = 0,
    permutations: int = 10_000,
    bootstrap: int = 10_000,
    alpha: float = 0.05,
    segments: pd.DataFrame | PathLike | None = None,
) -> Evaluation:
    """Offline metrics of runs on qrels under explicit conventions, with paired comparisons.

    The numbers are those of ``onlineeval evaluate`` with the same options (the same
    evaluator, :func:`onlineeval.metrics.evaluate.evaluate_run`, and the same paired
    tests, :func:`onlineeval.stats.compare_systems`, on the queries every system counts).

    Parameters
    ----------
    qrels:
        A DataFrame with columns ``query_id, doc_id, relevance`` (ir_measures) or
        ``query, doc, grade``; a dict ``{query_id: {doc_id: grade}}`` (pytrec_eval); or a
        TREC qrels file.
    runs:
        One run (a DataFrame with ``query_id, doc_id, score`` or ``query, doc, score``; a
        dict ``{query_id: {doc_id: score}}``; a TREC run file), a dict ``{name: run}``, or
        a list of run files (named as the CLI names them: the file stem). One run that is
        not a file is named ``run``; a list of in-memory runs ``run1, run2, ...``.
    metrics:
        Comma-separated names or a list (``"nDCG@10,ERR@10,RBP(p=0.8),AP"``; trec_eval and
        ir_measures names are translated and listed in ``translations``).
    preset:
        Conventions preset: ``default``, ``trec_eval``, ``lightgbm`` or ``xgboost``.
    gain, ties, empty, missing, rel_min, depth:
        Conventions overriding the preset (``gain``: ``exponential``, ``linear`` or
        ``'1=1,2=3'``; ``ties``: ``docno_desc``, ``input_order``, ``pessimistic``,
        ``optimistic``, ``expected``; ``empty``: ``exclude``, ``one``, ``zero``;
        ``missing``: ``error``, ``zero``, ``drop``). Score ties of ``input_order`` follow
        the row order of a DataFrame or the insertion order of a dict.
    baseline:
        The system the others are compared with (default: the first).
    seed, permutations, bootstrap, alpha:
        Seed of the randomisation test and bootstrap, their sizes, and the level.
    segments:
        Per-query attributes for segment analysis (``--segments``): a DataFrame with a
        ``query`` / ``query_id`` / ``qid`` column (or indexed by query id) and one column
        per attribute, or the CLI's tab-separated file.

    Returns
    -------
    Evaluation

    Raises
    ------
    ConfigError
        An unknown metric, preset or convention, or a baseline that is not a system.
    InputError
        A malformed file (file and line) or DataFrame (row): missing columns, a
        non-integer grade, a non-finite score, a document twice for a query.
    """
    import pandas as pd

    from onlineeval.metrics import parse_metrics
    from onlineeval.metrics.evaluate import evaluate_run
    from onlineeval.metrics.tables import (
        common_queries,
        err_scales,
        long_frame,
        rbp_residuals,
        summary_row,
    )

    _check_test_options(seed, permutations, bootstrap, alpha)
    conv_opts = {"gain": gain, "ties": ties, "empty": empty, "missing": missing, "rel_min": rel_min, "depth": depth}
    names_list, translations, conv = _conventions(metrics, preset, conv_opts)
    ms = parse_metrics(names_list)
    named = _named_runs(runs)
    names = list(named)
    if baseline is None:
        baseline = names[0]
    elif baseline not in names:
        raise ConfigError(("baseline",), f"{baseline!r} is not one of the systems ({', '.join(names)})")
    q = _frame(qrels, "qrels", "relevance", "qrels")
    frames = [_frame(r, "run", "score", f"run {n!r}") for n, r in named.items()]
    evals = [evaluate_run(q, r, ms, conv, run_id=n) for n, r in zip(names, frames)]
    residuals = rbp_residuals(q, frames, names, ms, conv)
    gmax = err_scales(q, ms)
    long = long_frame(evals)
    seg = None if segments is None else _segments(segments, set(long["query"]))
    comparisons: list[PairedResult] = []
    paired: int | None = None
    per_metric: dict[str, int] | None = None
    unpaired: list[dict[str, Any]] = []
    if len(evals) > 1:
        from onlineeval.metrics.tables import paired_counts

        long_c, paired = common_queries(long, len(evals))  # each metric paired on its own queries
        counts = paired_counts(long_c)
        per_metric = {str(m): counts.get(str(m), 0) for m in evals[0].metrics}  # 0: a metric with no pair
        paired = min(per_metric.values())
        if len(long_c):  # (Judged@k can be paired where, under empty=exclude, no relevance metric is)
            from onlineeval.stats import compare_systems

            comparisons = compare_systems(long_c, baseline, seed=seed, n_permutations=permutations,
                                          n_bootstrap=bootstrap, alpha=alpha)
            if seg is not None:
                from onlineeval.stats import compare_segments

                comparisons = comparisons + compare_segments(long_c, seg, baseline, seed=seed,
                                                             n_permutations=permutations, n_bootstrap=bootstrap,
                                                             alpha=alpha)
            from onlineeval.metrics.evaluate_output import unpaired_rows

            unpaired = unpaired_rows(evals, conv, long, long_c, baseline, comparisons, seg)
    seg_means = None
    if seg is not None:
        from onlineeval.stats import by_segment

        def table(f: pd.DataFrame) -> pd.DataFrame:
            return f.groupby(["system", "metric"], sort=False)["value"].agg(["mean", "count"]).reset_index()

        seg_means = by_segment(long, seg, table)
    aggregate = pd.DataFrame([summary_row(ev, m, residuals, gmax) for ev in evals for m in ev.metrics])
    aggregate["err_gmax"] = aggregate["err_gmax"].astype("Int64")
    per_query = long[["system", "query", "metric", "value"]].copy()
    from onlineeval.io.digest import evaluate_settings

    inputs, fp = _digests(qrels, named, segments, evaluate_settings(ms, conv.describe(), [], baseline, seed,
                                                                     permutations, bootstrap, alpha))
    return Evaluation(per_query, aggregate, conv, tuple(comparisons), baseline, paired, tuple(translations),
                      dict(zip(names, evals)), seg_means, per_metric, tuple(unpaired), inputs, fp)


def _digests(qrels: Any, named: Mapping[str, Any], segments: Any,
             settings: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """``(inputs, fingerprint)`` as ``onlineeval evaluate`` makes them for files; an input in memory is digested by
    :func:`onlineeval.io.digest.memory_entry`; ``(None, None)`` when one has no canonical form."""
    from onlineeval.io.digest import fingerprint, input_entry, memory_entry

    def entry(x: Any) -> dict[str, Any] | None:
        return input_entry(x) if _is_path(x) else memory_entry(x)

    inputs: dict[str, Any] = {"qrels": entry(qrels), "runs": {n: entry(r) for n, r in named.items()}}
    if segments is not None:
        inputs["segments"] = entry(segments)
    if any(e is None for e in (inputs["qrels"], inputs.get("segments", {}), *inputs["runs"].values())):
        return None, None
    return inputs, fingerprint(inputs, settings)


def evaluate_letor(
    letor: PathLike,
    scores: Mapping[str, PathLike | Sequence[float]] | Sequence[PathLike] = (),
    metrics: str | Sequence[str] = "nDCG@10,AP,RR,P@10",
    *,
    features: Sequence[int] = (),
    query_file: PathLike | None = None,
    preset: str = "lightgbm",
    **options: Any,
) -> Evaluation:
    """Offline metrics of rankers' scores on a LETOR / SVMlight file, as ``onlineeval evaluate --letor``.

    The labels of ``letor`` are the qrels (one query per ``qid:``, or per group of
    ``query_file``); each system scores the file's lines in order.

    Parameters
    ----------
    letor:
        ``label [qid:Q] idx:value ... [# docid = D]`` lines (:func:`onlineeval.io.read_letor`).
    scores:
        ``{name: score file or array}`` (one number per LETOR line), or a list of score
        files named as the CLI names them (the file stem).
    metrics:
        As :func:`evaluate`.
    features:
        Feature columns used as systems of their own, named ``feature<N>`` (e.g. BM25 as a
        baseline); sparse lines without the feature score 0.
    query_file:
        Group sizes for a file without ``qid:`` (LightGBM's ``.query``).
    preset:
        Conventions preset; ``lightgbm`` by default (ties in input order, as the learners
        that write these files evaluate them). Pass ``"default"`` for onlineeval's own.
    options:
        Every other keyword of :func:`evaluate` (``gain``, ``ties``, ``baseline``, ``seed``, ...).

    Returns
    -------
    Evaluation
    """
    import numpy as np
    import pandas as pd

    from onlineeval.io.letor import read_letor_features, read_scores

    if isinstance(scores, Mapping):
        named: dict[str, Any] = {str(k): v for k, v in scores.items()}
    else:
        if isinstance(scores, (str, bytes)) or not isinstance(scores, Sequence) or not all(
                _is_path(p) for p in scores):
            raise ConfigError(("scores",), "must be a mapping of system name to score file or array, or a list of "
                              f"score files, got {type(scores).__name__}")
        paths = [Path(p) for p in scores]
        named = dict(zip(_named_runs(paths), paths)) if paths else {}
    if isinstance(features, (str, bytes)) or not isinstance(features, Sequence):
        raise ConfigError(("features",), f"must be a list of feature columns (integers >= 1), got "
                          f"{type(features).__name__}")
    for f in features:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1:
            raise ConfigError(("features",), f"feature columns are integers >= 1, got {f!r}")
        if f"feature{f}" in named:
            raise ConfigError(("features",), f"two systems share the name feature{f}")
    if not named and not features:
        raise ConfigError(("scores",), "give at least one score file (or array) or a feature column")
    qrels, by_feature = read_letor_features(letor, [int(f) for f in features], query_file=query_file)  # one pass
    runs: dict[str, pd.DataFrame] = {}
    for name, value in named.items():
        if _is_path(value):
            s = read_scores(value, len(qrels))
        else:
            s = np.asarray(value, dtype=np.float64)
            if s.shape != (len(qrels),):
                raise InputError(f"scores {name!r}: {s.size} values for {len(qrels)} LETOR lines", str(letor))
            if not np.isfinite(s).all():
                raise InputError(f"scores {name!r}: value {int(np.argmax(~np.isfinite(s))) + 1} is not finite",
                                 str(letor))
        runs[name] = pd.DataFrame({"query": qrels["query"].to_numpy(), "doc": qrels["doc"].to_numpy(), "score": s})
    for f in features:
        runs[f"feature{f}"] = by_feature[int(f)]
    return evaluate(qrels, runs, metrics, preset=preset, **options)


def _segments(segments: Any, evaluated: set[str]) -> pd.DataFrame:
    """Per-query attributes indexed by query id (strings), as :func:`onlineeval.stats.read_segments` gives them.

    Raises
    ------
    InputError
        A frame without a query column, a query twice (its row), a missing query id or value (its row), or no
        evaluated query among its queries (ids of another collection would all be ``<missing>``).
    """
    import numpy as np
    import pandas as pd

    from onlineeval.stats import read_segments

    where = None
    if _is_path(segments):
        where = str(segments)
        seg = read_segments(segments)
    elif isinstance(segments, pd.DataFrame):
        check_unique_columns(segments, "segments")
        cols = {str(c).lower(): c for c in segments.columns}
        key = next((cols[k] for k in ("query", "query_id", "qid") if k in cols), None)
        frame = segments.set_index(key) if key is not None else segments
        if key is None and frame.index.name is None:
            raise InputError("segments: needs a query column (query, query_id or qid) or an index of query ids")
        # a missing query id or value (None, NaN) is refused as the segments file refuses an empty one: under
        # pandas 3 it stayed missing through astype(str) and the segments' sort raised a TypeError
        na_index = pd.isna(frame.index.to_numpy())
        if na_index.any():
            raise InputError("segments: a query id is missing (None or NaN)", None, int(na_index.argmax()) + 1)
        na = frame.isna().to_numpy()
        if na.any():
            row, col = (int(x[0]) for x in np.nonzero(na))
            raise InputError(f"segments: the value of {str(frame.columns[col])!r} is missing (None or NaN) for query "
                             f"{str(frame.index[row])!r}", None, row + 1)
        seg = frame.astype(str)
        seg.index = seg.index.astype(str).rename("query")
        dup = seg.index.duplicated()
        if dup.any():
            row = int(dup.argmax())
            raise InputError(f"segments: query {seg.index[row]!r} is listed twice", None, row + 1)
        if seg.shape[1] == 0:
            raise InputError("segments: no attribute column")
    else:
        raise InputError(f"segments: expected a DataFrame or a file path, got {type(segments).__name__}")
    if evaluated and not evaluated & set(seg.index):
        raise InputError(f"none of its {len(seg)} queries is an evaluated query (ids e.g. {min(seg.index)!r}; "
                         f"evaluated ids e.g. {min(evaluated)!r})", where)
    return seg
