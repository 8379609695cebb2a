r"""The Python API: every job of the command line as one call on DataFrames, dicts or files.

``import onlineeval.api`` is cheap (numpy, pandas, scipy.stats, matplotlib and SimPy are
imported by the calls that use them); ``onlineeval.evaluate`` etc. resolve here lazily.

* :func:`evaluate`: offline metrics of runs on qrels (pandas DataFrames with ir_measures'
  columns ``query_id, doc_id, relevance`` / ``score``, pytrec_eval's dicts of dicts
  ``{qid: {docid: value}}``, or TREC files) under named conventions, with the paired
  comparisons against a baseline; the same names, presets, conventions and numbers as
  ``onlineeval evaluate``.
* :func:`simulate`: the online simulation of ``onlineeval simulate`` from a config path, a
  dict or a validated :class:`simulations.config.Config`, in memory unless ``output`` is
  given; tables as DataFrames, plots as matplotlib figures.
* :func:`fit_clicks`, :func:`evaluate_clicks`, :func:`sample_clicks`: click models on a
  DataFrame of sessions (``session, query, docs, clicks``) or a click-log file.
* :func:`validate`, :func:`assert_valid_interleaver`: the interleaving validation battery
  of ``onlineeval validate`` as a report object, and a pytest helper.
* :func:`estimate`: off-policy estimates of ``onlineeval estimate`` on a logged DataFrame
  (``query, shown, clicks`` and propensity columns) or a JSON-lines log.

Bad input raises the typed errors the CLI reports: :class:`~onlineeval.errors.ConfigError`
(with the key path of the option, e.g. ``ties``) and :class:`~onlineeval.errors.InputError`
(with the file and line, or the DataFrame row).

Example
-------
>>> import onlineeval
>>> qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}
>>> runs = {"A": {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 0.5}},
...         "B": {"q1": {"d2": 2.0, "d1": 1.0}, "q2": {"d3": 0.5}}}
>>> res = onlineeval.evaluate(qrels, runs, "P@1,RR", permutations=200, bootstrap=200)
>>> res.mean("A", "RR"), res.mean("B", "RR")
(1.0, 0.75)
>>> res.aggregate[["system", "metric", "value", "n"]].to_string(index=False)
'system metric  value  n\n     A    P@1   1.00  2\n     A     RR   1.00  2\n     B    P@1   0.50  2\n     B     RR   0.75  2'
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from onlineeval.errors import ConfigError, InputError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd
    from matplotlib.figure import Figure

    from clickmodels.base import ClickModel, ClickSample
    from clickmodels.estimation.base import ClickModelFit
    from clickmodels.logs import ClickLog
    from onlineeval.conventions import Conventions
    from onlineeval.interleaving.validation import ValidationReport
    from onlineeval.metrics.evaluate import RunEvaluation
    from onlineeval.metrics.names import Translation
    from onlineeval.stats import PairedResult
    from simulations.config import Config
    from simulations.job import SimulationResult
    from simulations.sweep import SweepResult

__all__ = [
    "ConfigError",
    "Estimates",
    "Evaluation",
    "InputError",
    "Simulation",
    "Sweep",
    "assert_valid_interleaver",
    "estimate",
    "evaluate",
    "evaluate_clicks",
    "evaluate_letor",
    "fit_clicks",
    "sample_clicks",
    "simulate",
    "sweep",
    "validate",
]

PathLike = Union[str, "os.PathLike[str]"]
#: a qrels or run: a DataFrame, a pytrec_eval dict of dicts, or a TREC file
TableLike = Union["pd.DataFrame", Mapping[str, Mapping[str, float]], PathLike]

#: ir_measures' column names -> onlineeval's (qrels: relevance, runs: score)
IR_MEASURES_COLUMNS = {"query_id": "query", "doc_id": "doc", "relevance": "grade"}


# ----------------------------------------------------------------------------- inputs
def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


def _frame(table: Any, kind: str, value: str, name: str) -> pd.DataFrame:
    """A qrels (``value`` = grade) or run (``value`` = score) frame from any accepted form."""
    import pandas as pd

    from onlineeval.io import qrels_from_frame, read_qrels, read_run, run_from_frame

    if _is_path(table):
        path = Path(table)
        return read_qrels(path, check_unique=False) if kind == "qrels" else read_run(path, check_unique=False)
    if isinstance(table, pd.DataFrame):
        frame = table.rename(columns={k: v for k, v in IR_MEASURES_COLUMNS.items() if k in table.columns})
        if kind == "run" and "grade" in frame.columns and "score" not in frame.columns:
            frame = frame.rename(columns={"grade": "score"})
    elif isinstance(table, Mapping):
        q: list[str] = []
        d: list[str] = []
        v: list[Any] = []
        for qid, docs in table.items():
            if not isinstance(docs, Mapping):
                raise InputError(f"{name}: query {qid!r} maps to {type(docs).__name__}, expected a dict "
                                 f"{{doc_id: {value}}} (pytrec_eval form)")
            for doc, x in docs.items():
                q.append(str(qid))
                d.append(str(doc))
                v.append(x)
        frame = pd.DataFrame({"query": q, "doc": d, "grade" if kind == "qrels" else "score": v})
    else:
        raise InputError(f"{name}: expected a pandas DataFrame (columns query_id, doc_id, {value}), a dict of dicts "
                         f"{{query_id: {{doc_id: {value}}}}} or a file path; got {type(table).__name__}")
    try:
        return qrels_from_frame(frame) if kind == "qrels" else run_from_frame(frame)
    except InputError as exc:
        message = exc.message if name == kind else f"{name}: {exc.message}"
        line = exc.line
        if isinstance(table, Mapping) and line is not None:  # a dict has no rows: name the entry
            message += f" (query {frame['query'].iloc[line - 1]!r}, document {frame['doc'].iloc[line - 1]!r})"
            line = None
        raise InputError(message, exc.path, line) from None


def _is_single_table(x: Any) -> bool:
    """A run itself (not a dict of named runs): a frame, a path, or ``{qid: {docid: score}}``."""
    import pandas as pd

    if _is_path(x) or isinstance(x, pd.DataFrame):
        return True
    if isinstance(x, Mapping):
        first = next(iter(x.values()), None)
        return isinstance(first, Mapping) and all(not isinstance(v, Mapping) for v in first.values())
    return False


def _named_runs(runs: Any) -> dict[str, Any]:
    """``{name: run}``: a dict of runs as given; a sequence of files named as the CLI names them
    (stem, else file name, else the shortest distinguishing path tail); one run is ``run``
    (a file: its name as the CLI gives it)."""
    if isinstance(runs, Mapping) and not _is_single_table(runs):
        if not runs:
            raise ConfigError(("runs",), "give at least one run")
        return {str(k): v for k, v in runs.items()}
    items = [runs] if _is_single_table(runs) else list(runs) if isinstance(runs, Iterable) else [runs]
    if not items:
        raise ConfigError(("runs",), "give at least one run")
    if all(_is_path(r) for r in items):
        from onlineeval.cli.evaluate import _system_names

        return dict(zip(_system_names([Path(r) for r in items]), items))
    if len(items) == 1:
        return {"run": items[0]}
    return {f"run{i + 1}": r for i, r in enumerate(items)}


def _conventions(
    metrics: str | Sequence[str], preset_name: str, overrides: dict[str, Any]
) -> tuple[list[str], list[Translation], Conventions]:
    """Metric names (trec_eval / ir_measures names translated) and the conventions, as the CLI builds them."""
    from onlineeval.conventions import Gain, preset
    from onlineeval.metrics.names import common_rel_min, resolve_metric_list

    text = metrics if isinstance(metrics, str) else ",".join(str(m) for m in metrics)
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


# ------------------------------------------------------------------------- evaluate
@dataclass(frozen=True)
class Evaluation:
    """Offline metrics of one or more systems, with the conventions and the paired comparisons.

    Attributes
    ----------
    per_query:
        One row per counted query, system and metric: ``system, query, metric, value``.
    aggregate:
        One row per system and metric: ``system, metric, value`` (mean over counted
        queries), ``n`` (counted queries), ``residual`` (RBP's residual: the value is the
        lower end of ``[RBP, RBP + residual]``), ``err_gmax`` (ERR's scale top from the
        qrels), ``sum`` (a count's sum over counted queries, NumRet, NumRel, NumRelRet, as
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
        Queries counted for every system (``None`` for one system).
    translations:
        trec_eval / ir_measures names that were translated (``P_10 -> P@10``).
    runs:
        The :class:`~onlineeval.metrics.evaluate.RunEvaluation` of each system.
    segment_means:
        With ``segments``: ``segment_attribute, segment_value, segment_queries, system,
        metric, mean, count`` per segment (queries without attributes form ``<missing>``);
        the comparisons then hold one row per segment too.
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
        """The paired comparisons as one row each (the columns of ``--comparisons FILE``)."""
        import pandas as pd

        if not self.comparisons:
            return pd.DataFrame(columns=["segment_attribute", "segment_value", "metric", "system", "baseline", "n"])
        from onlineeval.stats import results_to_frame

        return results_to_frame(list(self.comparisons))

    def comparison(self, system: str, metric: str) -> PairedResult:
        """The paired comparison of ``system`` against the baseline on ``metric``."""
        for r in self.comparisons:
            if r.system == system and r.metric == metric and r.segment_attribute is None:
                return r
        raise ConfigError(("system",), f"no comparison of {system!r} on {metric!r} against {self.baseline!r}")


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
    )

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
    if len(evals) > 1:
        long_c, paired = common_queries(long, len(evals))
        if paired:
            from onlineeval.stats import compare_systems

            comparisons = compare_systems(long_c, baseline, seed=seed, n_permutations=permutations,
                                          n_bootstrap=bootstrap, alpha=alpha)
            if seg is not None:
                from onlineeval.stats import compare_segments

                comparisons = comparisons + compare_segments(long_c, seg, baseline, seed=seed,
                                                             n_permutations=permutations, n_bootstrap=bootstrap,
                                                             alpha=alpha)
    seg_means = None
    if seg is not None:
        from onlineeval.stats import by_segment

        def table(f: pd.DataFrame) -> pd.DataFrame:
            return f.groupby(["system", "metric"], sort=False)["value"].agg(["mean", "count"]).reset_index()

        seg_means = by_segment(long, seg, table)
    rows = []
    for ev in evals:
        counts = {f"queries_{k}": v for k, v in ev.counts.as_dict().items()}
        for m in ev.metrics:
            res = residuals.get((ev.run_id, str(m)))
            rows.append({"system": ev.run_id, "metric": str(m), "value": float(ev.mean(m)),
                         "n": int(ev.counted.sum()),
                         "residual": float(res.mean()) if res is not None and len(res) else math.nan,
                         "err_gmax": gmax.get(str(m)),
                         "sum": ev.total(m) if type(m).summed else math.nan} | counts)
    aggregate = pd.DataFrame(rows)
    aggregate["err_gmax"] = aggregate["err_gmax"].astype("Int64")
    per_query = long[["system", "query", "metric", "value"]].copy()
    return Evaluation(per_query, aggregate, conv, tuple(comparisons), baseline, paired, tuple(translations),
                      dict(zip(names, evals)), seg_means)


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

    from onlineeval.io import read_letor
    from onlineeval.io.letor import read_scores

    if isinstance(scores, Mapping):
        named: dict[str, Any] = {str(k): v for k, v in scores.items()}
    else:
        paths = [Path(p) for p in scores]
        named = dict(zip(_named_runs(paths), paths)) if paths else {}
    for f in features:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1:
            raise ConfigError(("features",), f"feature columns are integers >= 1, got {f!r}")
        if f"feature{f}" in named:
            raise ConfigError(("features",), f"two systems share the name feature{f}")
    if not named and not features:
        raise ConfigError(("scores",), "give at least one score file (or array) or a feature column")
    data = read_letor(letor, query_file=query_file)
    qrels = data.qrels
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
        runs[f"feature{f}"] = read_letor(letor, score_feature=int(f), query_file=query_file).run
    return evaluate(qrels, runs, metrics, preset=preset, **options)


def _segments(segments: Any, evaluated: set[str]) -> pd.DataFrame:
    """Per-query attributes indexed by query id (strings), as :func:`onlineeval.stats.read_segments` gives them.

    Raises
    ------
    InputError
        A frame without a query column, a query twice (its row), or no evaluated query
        among its queries (ids of another collection would all be ``<missing>``).
    """
    import pandas as pd

    from onlineeval.stats import read_segments

    where = None
    if _is_path(segments):
        where = str(segments)
        seg = read_segments(segments)
    elif isinstance(segments, pd.DataFrame):
        cols = {str(c).lower(): c for c in segments.columns}
        key = next((cols[k] for k in ("query", "query_id", "qid") if k in cols), None)
        frame = segments.set_index(key) if key is not None else segments
        if key is None and frame.index.name is None:
            raise InputError("segments: needs a query column (query, query_id or qid) or an index of query ids")
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


# ------------------------------------------------------------------------- simulate
@dataclass(frozen=True)
class Simulation:
    """A finished simulation: :class:`simulations.job.SimulationResult` with its tables as
    DataFrames and its plots as matplotlib figures (drawn on demand).

    Attributes
    ----------
    result:
        The job's result (config, world, ground truth, replicate rows, curves, summary).
    """

    result: SimulationResult

    @property
    def config(self) -> Config:
        """The validated, effective config."""
        return self.result.config

    @property
    def rows(self) -> pd.DataFrame:
        """One row per replicate x design x day x metric (``replicates.csv``)."""
        return self.result.rows

    @property
    def curves(self) -> pd.DataFrame:
        """Power and analytic power per design, metric and day over the replicates (``curves.csv``)."""
        return self.result.curves

    @property
    def summary(self) -> dict[str, Any]:
        """Every number of the report (``summary.json`` without the file-only parts)."""
        return self.result.summary

    @property
    def output(self) -> Path | None:
        """The results directory, or ``None`` when nothing was written."""
        return self.result.output

    def designs(self) -> pd.DataFrame:
        """One row per design and metric: true effect, relative effect, shrinkage, power on the
        last day (simulated and analytic), estimator bias, A/A false-positive rate and the
        analytic impressions needed for the target power.

        ``shrinkage`` is the online relative improvement divided by the offline relative
        gain (``shrinkage_vs_offline`` of ``summary.json``; missing for interleaving, whose
        preference has no relative scale).
        """
        import pandas as pd

        rows = []
        for design, metrics in self.summary["designs"].items():
            for metric, e in metrics.items():
                last = e.get("final_day") or {}
                aa = e.get("aa") or {}
                rows.append({
                    "design": design, "metric": metric, "primary": e.get("primary"),
                    "true_effect": e.get("true_effect"), "true_effect_se": e.get("true_effect_se"),
                    "relative_effect": e.get("relative_effect"), "shrinkage": e.get("shrinkage_vs_offline"),
                    "power": last.get("power"), "analytic_power": last.get("analytic_power"),
                    "estimator_bias": e.get("estimator_bias"), "estimator_bias_se": e.get("estimator_bias_se"),
                    "days_to_target_power": e.get("days_to_target_power"),
                    "required_impressions": e.get("analytic_required_impressions"),
                    "aa_false_positive_rate": aa.get("false_positive_rate"),
                })
        return pd.DataFrame(rows)

    @property
    def shrinkage(self) -> pd.DataFrame:
        """The A/B metrics' shrinkage: ``design, metric, relative_effect, shrinkage`` (online relative
        improvement / offline relative gain)."""
        d = self.designs()
        return d[d["shrinkage"].notna()][["design", "metric", "relative_effect", "shrinkage"]].reset_index(drop=True)

    def figures(self) -> dict[str, Figure]:
        """The report's figures, by the name of the PNG ``onlineeval simulate`` writes for each
        (``power_vs_days``, ``offline_vs_online``, with counterfactual designs
        ``counterfactual_rmse`` and ``assumption_sweep``): new figures, not shown, not saved
        (:mod:`simulations.plots`)."""
        from simulations.plots import figures

        return figures(self.result)

    def power_figure(self) -> Figure:
        """A compact power-versus-days panel of every design's primary metric: simulated (solid,
        with +-1 SE) and analytic (dashed), with the target power; a new figure (not shown, not
        saved). The report's own figures are :meth:`figures`."""
        from matplotlib.figure import Figure

        c = self.curves
        c = c[(~c["aa"].astype(bool)) & c["primary"].astype(bool)]
        fig = Figure(figsize=(7, 4.5), constrained_layout=True)
        ax = fig.add_subplot()
        for design, g in c.groupby("design", sort=False):
            g = g.sort_values("day")
            (line,) = ax.plot(g["day"], g["power"], marker="o", label=f"{design} ({g['metric'].iloc[0]})")
            ax.fill_between(g["day"], g["power"] - g["power_se"], g["power"] + g["power_se"],
                            color=line.get_color(), alpha=0.15)
            ax.plot(g["day"], g["analytic_power"], linestyle="--", color=line.get_color())
        ax.axhline(self.config.analysis.power, color="grey", linewidth=0.8, linestyle=":")
        ax.set(xlabel="day", ylabel="power (solid: simulated, dashed: analytic)", ylim=(0, 1.02))
        ax.legend(loc="lower right", fontsize="small")
        return fig

    def shrinkage_figure(self) -> Figure:
        """The offline relative gain (frequency-weighted) next to each A/B metric's online relative
        effect (B - A) / A, labelled with its shrinkage; a new figure (not shown, not saved)."""
        from matplotlib.figure import Figure

        off = self.summary["offline"]
        labels = [f"offline {off['metric']} (freq-weighted)"]
        values = [100 * off["relative_gain_weighted"]]
        notes = [""]
        for row in self.shrinkage.itertuples():
            labels.append(f"online {row.design}: {row.metric}")
            values.append(100 * row.relative_effect)
            notes.append(f"shrink {row.shrinkage:.2f}")
        fig = Figure(figsize=(7, 0.5 * len(labels) + 1.5), constrained_layout=True)
        ax = fig.add_subplot()
        y = list(range(len(labels)))[::-1]
        ax.barh(y, values, color=["grey"] + ["C0"] * (len(values) - 1))
        for yi, v, note in zip(y, values, notes):
            ax.annotate(note, (v, yi), xytext=(4, 0), textcoords="offset points", va="center", fontsize="small")
        ax.set_yticks(y, labels)
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel("relative difference B vs A (%)")
        return fig

    def text(self, source: str = "") -> str:
        """The terminal report of ``onlineeval simulate``."""
        from simulations.report import terminal_summary

        return terminal_summary(self.result, source)


def simulate(
    config: PathLike | Mapping[str, Any] | Config,
    *,
    overrides: Mapping[str, Any] | None = None,
    output: PathLike | None = None,
    workers: int | None = None,
    fresh: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
    **key_path_overrides: Any,
) -> Simulation:
    """Run the online simulation of ``onlineeval simulate``; in memory unless ``output`` is given.

    Parameters
    ----------
    config:
        A YAML file (relative collection paths are relative to it), a mapping of the same
        keys (relative paths relative to the working directory) or a validated
        :class:`simulations.config.Config`.
    overrides:
        Key paths to set, dotted with list indices in brackets, e.g. ``{"traffic.days": 7,
        "designs[0].analysis.sequential": "msprt"}`` (as ``onlineeval simulate --set``).
    output:
        Results directory to write (``summary.json``, CSVs, plots) as the CLI does;
        ``None`` writes nothing. Relative to the working directory.
    workers:
        Processes for replicates (default the config's; 0 = all cores). The numbers do not
        depend on it.
    fresh:
        With ``output``: ignore finished replicates of an interrupted run into it.
    on_progress, log:
        Called with (finished replicates, total) as replicates finish, and with one-line
        progress messages (the CLI's progress bar and stderr lines come from these).
    **key_path_overrides:
        Top-level keys (``replicates=20``, ``seed=3``) or key paths with ``__`` for the dot
        (``traffic__days=7``).

    Returns
    -------
    Simulation

    Raises
    ------
    ConfigError
        Naming the key path of the first problem (e.g. ``traffic.days: ...``).
    """
    from simulations.config import Config, config_from_mapping, load_config, set_key_path
    from simulations.job import simulate as run_job

    sets = dict(overrides or {})
    sets.update({k.replace("__", "."): v for k, v in key_path_overrides.items()})
    if isinstance(config, Config):
        cfg = config
        if sets:
            data = cfg.model_dump()
            for key, value in sets.items():
                set_key_path(data, key, value)
            cfg = config_from_mapping(data)
    elif isinstance(config, Mapping):
        data = copy.deepcopy(dict(config))
        for key, value in sets.items():
            set_key_path(data, key, value)
        cfg = config_from_mapping(data)
    elif _is_path(config):
        cfg = load_config(Path(config), sets)
    else:
        raise ConfigError((), f"config must be a path, a mapping or a simulations.config.Config, got "
                          f"{type(config).__name__}")
    out = None if output is None else Path(output)
    return Simulation(run_job(cfg, out, workers, fresh, on_progress, log))


# ---------------------------------------------------------------------------- sweeps
@dataclass(frozen=True)
class Sweep:
    """A finished sweep (:func:`sweep`): one row per point and design, and the shrinkage study.

    Attributes
    ----------
    result:
        :class:`simulations.sweep.SweepResult` (the validated sweep, rows, output folder,
        the points this call computed, the study).
    kept:
        Whether the sweep folder was asked for (``output``); otherwise it lived in a
        temporary folder, now removed, and :attr:`output` is ``None``.
    """

    result: SweepResult
    kept: bool = True

    @property
    def points(self) -> pd.DataFrame:
        """One row per point and design: the point's axis values, the design's primary metric,
        offline delta, true effect, power, required days and the shrinkage columns
        (``points.csv``)."""
        return self.result.rows

    @property
    def shrinkage(self) -> dict[str, Any]:
        """The shrinkage study across the points (``summary.json['shrinkage']``; structure in
        :mod:`simulations.shrinkage`)."""
        return self.result.shrinkage

    @property
    def axes(self) -> list[str]:
        """The swept key paths."""
        return list(self.result.sweep.axes)

    @property
    def output(self) -> Path | None:
        """The sweep folder, when kept."""
        return self.result.output if self.kept else None

    def text(self) -> str:
        """The study as ``onlineeval sweep`` prints it: relation, sign agreement, Kendall's tau,
        the offline MDE."""
        from simulations.shrinkage import format_shrinkage

        return format_shrinkage(self.result.shrinkage)


def sweep(
    config: PathLike | Mapping[str, Any],
    *,
    output: PathLike | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    fresh: bool = False,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
    writers: int | None = None,
) -> Sweep:
    """Run (or resume) a sweep of simulations, as ``onlineeval sweep``.

    Parameters
    ----------
    config:
        A sweep YAML file or a mapping of the same keys (``base``, ``grid`` or ``points``,
        ``replicates``, ``seed``, ``chunk``, ``executor``, ``shrinkage_by``, ...); relative
        paths in a mapping are relative to the working directory.
    output:
        The sweep folder to write (per-point results, ``points.csv``/``.parquet``,
        ``summary.json``, plots, ``report.html``), where an interrupted sweep resumes.
        ``None``: the config's ``output`` for a file that names one; otherwise a
        temporary folder, removed when the sweep is done.
    workers, scheduler:
        Local processes (0 = all cores), or a Dask scheduler (``tcp://host:8786`` or
        ``local:N``); the numbers depend on neither.
    fresh:
        Recompute every point (ignore finished work in ``output``).
    progress, log:
        Progress lines on stderr; a callback for one-line messages.
    writers:
        Processes that write the finished points' folders while the tasks go on, as
        ``onlineeval sweep --writers``: ``None`` (default) 2, or 0 on a single core
        (:func:`simulations.sweep_writers.default_writers`); 0 writes them in this process.
        The folders (and the numbers) do not depend on it.

    Returns
    -------
    Sweep

    Raises
    ------
    ConfigError
        At the sweep key (``grid.<axis>``, ``points[j].<axis>``, ...) with the key path of
        the problem in the point's config; every point is validated before anything runs;
        at ``writers`` for a value that is not ``None`` or a whole number >= 0.
    """
    import shutil
    import tempfile

    from simulations.sweep import load_sweep, run_sweep, sweep_from_mapping

    if writers is not None and (isinstance(writers, bool) or not isinstance(writers, int) or writers < 0):
        raise ConfigError(("writers",), f"must be a whole number >= 0 of writer processes (0: write the points' "
                          f"folders in this process) or None (the default: 2, or 0 on one core), got {writers!r}")
    temp: str | None = None
    if _is_path(config):
        text = Path(config)
        if output is None:
            from simulations.yaml_safe import load_yaml

            if text.is_file() and isinstance(data := load_yaml(text), dict) and not data.get("output"):
                temp = tempfile.mkdtemp(prefix="onlineeval-sweep-")
        spec = load_sweep(text, output if temp is None else temp)
    elif isinstance(config, Mapping):
        data = copy.deepcopy(dict(config))
        if output is not None:
            data["output"] = str(output)
        elif not data.get("output"):
            temp = tempfile.mkdtemp(prefix="onlineeval-sweep-")
            data["output"] = temp
        spec = sweep_from_mapping(data, Path.cwd(), "sweep")
    else:
        raise ConfigError((), f"config must be a path or a mapping, got {type(config).__name__}")
    try:
        result = run_sweep(spec, workers=workers, scheduler=scheduler, fresh=fresh, progress=progress, log=log,
                           writers=writers)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
    return Sweep(result, kept=temp is None)


# --------------------------------------------------------------------------- clicks
SessionsLike = Union["pd.DataFrame", "ClickLog", PathLike]


def _id_list(value: Any, row: int, column: str) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",")] if value.strip() else []
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    try:
        return [str(v) for v in value]
    except TypeError:
        raise InputError(f"column {column!r}: expected a list of ids or a comma-separated string, got "
                         f"{type(value).__name__}", None, row) from None


def _click_log(sessions: Any, fmt: str | None = None, name: str = "sessions") -> ClickLog:
    """A :class:`clickmodels.logs.ClickLog` from a DataFrame of sessions, a ClickLog or a file."""
    import pandas as pd

    from clickmodels.logs import ClickLog, from_sessions, read_click_log

    if isinstance(sessions, ClickLog):
        return sessions
    if _is_path(sessions):
        return read_click_log(sessions, fmt)  # type: ignore[arg-type]
    if not isinstance(sessions, pd.DataFrame):
        raise InputError(f"{name}: expected a DataFrame (session, query, docs, clicks), a ClickLog or a click-log "
                         f"file; got {type(sessions).__name__}")
    need = ("query", "docs", "clicks")
    lacking = [c for c in need if c not in sessions.columns]
    if lacking:
        raise InputError(f"{name} lacks column(s) {', '.join(lacking)}; needs session (optional), query, docs "
                         "(shown ids in rank order), clicks (clicked ids, or 0/1 aligned with docs)")
    sids = sessions["session"].astype(str).tolist() if "session" in sessions.columns else \
        [str(i) for i in range(len(sessions))]
    out = []
    for i, (sid, query, docs, clicks) in enumerate(zip(sids, sessions["query"], sessions["docs"],
                                                       sessions["clicks"]), start=1):
        shown = _id_list(docs, i, "docs")
        if isinstance(clicks, str):
            clicked = _id_list(clicks, i, "clicks")
        else:
            values = list(clicks) if clicks is not None and not isinstance(clicks, float) else []
            binary = len(values) == len(shown) and all(isinstance(v, (bool, int)) and v in (0, 1) for v in values)
            clicked = [d for d, c in zip(shown, values) if c] if binary and values else [str(v) for v in values]
        out.append((sid, str(query), shown, clicked))
    return from_sessions(out, lines=list(range(1, len(out) + 1)))


def fit_clicks(
    sessions: SessionsLike,
    model: str = "pbm",
    *,
    method: str | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    pseudo: float | None = None,
    format: str | None = None,
) -> ClickModelFit:
    """Fit a click model to sessions, as ``onlineeval clicks fit``.

    Parameters
    ----------
    sessions:
        A DataFrame with columns ``query``, ``docs`` (shown document ids in rank order: a
        list or a comma-separated string), ``clicks`` (the clicked ids, or 0/1 aligned with
        ``docs``) and optionally ``session``; a :class:`clickmodels.logs.ClickLog`; or a
        click-log file (tsv, jsonl, yandex).
    model:
        A model name of ``onlineeval clicks`` (gctr, rctr, dctr, cm, dcm, sdbn, pbm, ubm,
        dbn, ccm, or an alias such as ``cascade``).
    method, max_iter, tol, pseudo:
        ``closed_form`` or ``em``; EM's stopping rule; the Beta(a, a) pseudo-count.
    format:
        The file's format (default from its suffix).

    Returns
    -------
    clickmodels.estimation.base.ClickModelFit
        Its ``save(path)`` writes the JSON of ``clicks fit --out``.

    Example
    -------
    >>> import pandas as pd
    >>> sessions = pd.DataFrame({"query": ["q"] * 4, "docs": [["a", "b"]] * 4,
    ...                          "clicks": [["a"], [], ["a", "b"], ["b"]]})
    >>> fit = fit_clicks(sessions, "rctr")
    >>> [round(float(p), 2) for p in fit.p]
    [0.5, 0.5]
    """
    from clickmodels.estimation import fit_log
    from onlineeval.cli.clicks import fit_name

    key = fit_name(model, "model")
    opts = {k: v for k, v in {"method": method, "max_iter": max_iter, "tol": tol, "pseudo": pseudo}.items()
            if v is not None}
    return fit_log(key, _click_log(sessions, format), **opts)


def evaluate_clicks(
    sessions: SessionsLike,
    models: str | Sequence[str] | Mapping[str, Any] = ("rctr", "pbm", "ubm", "dbn"),
    *,
    test: SessionsLike | None = None,
    test_fraction: float = 0.25,
    seed: int = 0,
    format: str | None = None,
) -> pd.DataFrame:
    """Fit click models on sessions and compare them on held-out sessions, as ``onlineeval clicks evaluate``.

    Parameters
    ----------
    sessions:
        Training sessions (see :func:`fit_clicks`).
    models:
        Model names (``name:em`` for the EM fit of dcm / sdbn) and fitted-parameter ``.json``
        files (labelled ``model (file name)`` as by the CLI), or ``{label: fitted model}``.
    test:
        Held-out sessions; default a random split of ``sessions`` with ``test_fraction``
        held out, drawn with ``numpy.random.default_rng(seed)`` (the CLI's split).

    Returns
    -------
    pandas.DataFrame
        One row per model: ``log_likelihood``, ``perplexity``, ``conditional_perplexity``
        and ``perplexity@r`` per rank (:func:`clickmodels.evaluation.compare`).
    """
    import numpy as np

    from clickmodels.estimation import fit_log
    from clickmodels.evaluation import compare
    from clickmodels.logs import train_test_split
    from onlineeval.cli.clicks import fit_name

    train = _click_log(sessions, format)
    if test is None:
        if not 0 < test_fraction < 1:
            raise ConfigError(("test_fraction",), f"must be in (0, 1), got {test_fraction}")
        train, held = train_test_split(train, test_fraction, np.random.default_rng(seed))
    else:
        held = _click_log(test, format, "test")
    if isinstance(models, Mapping):
        fits = dict(models)
    else:
        names = [m.strip() for m in models.split(",")] if isinstance(models, str) else list(models)
        if not names:
            raise ConfigError(("models",), "give at least one model name")
        fits = {}
        for name in names:
            if str(name).endswith(".json"):  # parameters saved by fit_clicks(...).save / clicks fit --out
                from clickmodels.estimation import load_fit

                fitted = load_fit(name)
                fits[f"{fitted.name} ({Path(name).name})"] = fitted
                continue
            base, _, method = name.partition(":")
            if method not in ("", "em"):
                raise ConfigError(("models",), f"{name}: the only suffix is ':em' (EM fit of dcm, sdbn)")
            fits[name] = fit_log(fit_name(base, "models"), train, **({"method": "em"} if method else {}))
    return compare(fits, held)


def sample_clicks(
    model: str | Mapping[str, Any] | ClickModel, labels: Any, rng: np.random.Generator
) -> ClickSample:
    """Sample clicks of a click model for a label matrix.

    Parameters
    ----------
    model:
        A click model, a spec such as ``{"name": "cascade", "preset": "navigational"}``
        (:func:`clickmodels.build`) or a name whose model needs no parameters.
    labels:
        ``(n, k)`` relevance grades of the shown lists, ``-1`` for empty slots.
    rng:
        The random generator (the same state gives the same clicks).

    Returns
    -------
    clickmodels.base.ClickSample
        ``clicks`` (n, k), the exact ``propensity`` of each slot and ``examined``.

    Example
    -------
    >>> import numpy as np
    >>> s = sample_clicks({"name": "cascade", "preset": "perfect"}, [[0, 4, 0], [0, 0, 0]],
    ...                   np.random.default_rng(0))
    >>> s.clicks.astype(int).tolist()
    [[0, 1, 0], [0, 0, 0]]
    """
    import clickmodels

    m = clickmodels.build({"name": model} if isinstance(model, str) else model) if isinstance(
        model, (str, Mapping)) else model
    return m.sample(labels, rng)


# ------------------------------------------------------------------------- validate
def validate(
    candidate: Any,
    method: str = "team_draft",
    *,
    n: int = 60_000,
    alpha: float = 0.01,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    timeout: float | None = 10.0,
) -> ValidationReport:
    """Run the interleaving validation battery of ``onlineeval validate`` on ``candidate``.

    Parameters
    ----------
    candidate:
        ``"package.module:Class"`` / ``"file.py:Class"`` (as ``--interleaver``), an object
        with ``interleave(lists, rng)`` and ``credit(shown, teams, clicks[, lists])``, or an
        :class:`onlineeval.interleaving.Interleaver` (batch API).
    method:
        The method the candidate claims to implement (``team_draft``, ``balanced``,
        ``probabilistic``, ``team_draft_multileave``, ...).
    n, alpha, seed, options, timeout:
        Impressions per statistical check, the battery's level, the seed, options of the
        reference method, and seconds one candidate call may take (None: no limit).

    Returns
    -------
    onlineeval.interleaving.validation.ValidationReport
        ``passed``, ``exit_code``, ``format()`` (the CLI's table) and ``to_json()``. A
        candidate that raises or returns malformed output gives a failed report (not an
        exception), as the CLI does.
    """
    from onlineeval.interleaving.validation import (
        Candidate,
        CandidateError,
        _from_object,
        load_candidate,
        validate_interleaver,
    )

    opts = dict(options or {})
    if isinstance(candidate, str):
        cand = load_candidate(candidate, timeout=timeout)
    elif isinstance(candidate, Candidate):
        cand = candidate
    else:
        cand = _from_object(type(candidate).__name__, candidate)
    try:
        return validate_interleaver(cand, method, n=n, alpha=alpha, seed=seed, options=opts, timeout=timeout)
    except CandidateError as exc:
        if exc.report is None:  # pragma: no cover - the battery always attaches one
            raise
        return exc.report


def assert_valid_interleaver(candidate: Any, method: str = "team_draft", **kwargs: Any) -> ValidationReport:
    """Fail the calling test with the report's text unless every validation check passes.

    For a team's own test suite::

        def test_our_team_draft():
            assert_valid_interleaver("our_pkg.interleaving:TeamDraft", "team_draft", n=20_000)

    ``kwargs`` go to :func:`validate`. Uses ``pytest.fail`` (an ``AssertionError`` without
    pytest); returns the report when it passes.
    """
    report = validate(candidate, method, **kwargs)
    if not report.passed:
        text = f"interleaver {candidate!r} fails validation as {method}:\n{report.format()}"
        try:
            import pytest
        except ImportError:  # pragma: no cover - pytest is how this is meant to be used
            raise AssertionError(text) from None
        pytest.fail(text, pytrace=False)
    return report


# ------------------------------------------------------------------------- estimate
@dataclass(frozen=True)
class Estimates:
    """Off-policy estimates of targets' online metric (:func:`estimate`).

    Attributes
    ----------
    results:
        One row per estimator and target (the baseline included): ``estimator, target, estimate, se, ci_low,
        ci_high, ...`` (the fields of ``onlineeval estimate --format json``'s results, the
        diagnostics flattened with a ``diag_`` prefix) and ``error`` when undefined.
    differences:
        With a baseline: one row per estimator and target, the target minus the baseline
        paired on the same impressions.
    warnings:
        What the CLI prints as warnings.
    conventions:
        The metric and its reward, the level, the cluster unit, where the propensities come
        from, the tie rule of the runs and the bootstrap (keys of the CLI's ``conventions``).
    """

    results: pd.DataFrame
    differences: pd.DataFrame
    warnings: tuple[str, ...]
    conventions: Mapping[str, Any] = field(default_factory=dict)

    def value(self, estimator: str, target: str) -> float:
        """The estimate of ``target`` by ``estimator``."""
        r = self.results[(self.results["estimator"] == estimator) & (self.results["target"] == target)]
        if r.empty:
            raise ConfigError(("target",), f"no estimate of {target!r} by {estimator!r}")
        return float(r["estimate"].iloc[0])


#: DataFrame column -> JSON key of a logged impression (:mod:`onlineeval.io.logged`)
_LOG_COLUMNS = ("query", "user", "user_type", "shown", "clicks", "propensities", "logger")
_PROPENSITY_COLUMNS = {"p_list": "list", "p_prefix": "prefix", "p_item": "item"}


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as Python values (the JSON reader's types)."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars (np.str_, np.float64, ...)
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _logged(log: Any, policies: Any) -> Any:
    """A :class:`onlineeval.io.logged.LoggedLog` from a DataFrame of impressions or a JSON-lines file."""
    import pandas as pd

    from onlineeval.io.logged import logged_from_records, read_logged

    if _is_path(log):
        return read_logged(log, policies=policies)
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"log: expected a DataFrame (query, shown, clicks, p_list / p_prefix / p_item or "
                         f"propensities or logger) or a JSON-lines file; got {type(log).__name__}")
    p_columns = [c for c in _PROPENSITY_COLUMNS if c in log.columns]

    def records() -> Iterator[dict[str, Any]]:
        for rec in log.to_dict("records"):
            obj: dict[str, Any] = {}
            for col in _LOG_COLUMNS:
                if col in rec and not (isinstance(rec[col], float) and math.isnan(rec[col])) and rec[col] is not None:
                    obj[col] = _plain(rec[col])
            if p_columns:
                obj["propensities"] = {_PROPENSITY_COLUMNS[c]: _plain(rec[c]) for c in p_columns}
            yield obj

    return logged_from_records(records(), policies, "DataFrame")


def _target_lists(run: Any, ties: str, name: str) -> dict[str, list[str]]:
    """``{query: ranked doc ids}`` of a target: a run (DataFrame, dict of dicts, file) or ready lists."""
    from onlineeval.io import ranked_doc_lists

    if isinstance(run, Mapping) and run and all(isinstance(v, (list, tuple)) for v in run.values()):
        return {str(q): [str(d) for d in docs] for q, docs in run.items()}
    return ranked_doc_lists(_frame(run, "run", "score", f"target {name!r}"), ties)


def estimate(
    log: pd.DataFrame | PathLike,
    targets: Mapping[str, Any],
    estimators: str | Sequence[str] = ("ips", "snips"),
    *,
    metric: str = "clicks_per_query",
    baseline: tuple[str, Any] | None = None,
    alpha: float = 0.05,
    bootstrap: int = 0,
    seed: int = 0,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    ties: str = "docno_desc",
    allow_unseen: bool = False,
) -> Estimates:
    """Off-policy estimates of targets' online metric from a logged click log, as ``onlineeval estimate``.

    Estimates :math:`V(\\pi) = \\mathbb E_q\\,\\mathbb E_{\\mathbf s\\sim\\pi(q)}\\,\\mathbb E[R \\mid q,
    \\mathbf s]` for each target ranker with each estimator (:mod:`onlineeval.estimators`),
    under the estimator's stated assumption.

    Parameters
    ----------
    log:
        A DataFrame with one impression per row: ``query``, ``shown`` (list of doc ids),
        ``clicks`` (clicked ids or 0/1), optional ``user`` and ``user_type``, and the
        logging propensities as columns ``p_list`` / ``p_prefix`` / ``p_item`` (or a
        ``propensities`` dict, or a ``logger`` spec); or a JSON-lines file
        (:mod:`onlineeval.io.logged`).
    targets:
        ``{name: run}``: a run DataFrame / dict of dicts / TREC file (ranked by score with
        ``ties``), or ``{query: [doc ids in rank order]}``.
    estimators:
        Names (``"ips,snips"`` or a list; :func:`onlineeval.estimators.catalogue`).
    metric:
        ``clicks_per_query``, ``reciprocal_rank`` or ``abandonment``.
    baseline:
        ``(name, run)``: each target minus it, paired on the same impressions.
    alpha, bootstrap, seed, options, ties:
        Interval level, cluster-bootstrap replicates (0 or >= 100) and their seed,
        ``{estimator: {option: value}}``, the score-tie rule of the runs.
    allow_unseen:
        Targets may rank documents the log never shows for a query (counted as support
        violations, with a warning); default: refused with an :class:`InputError`.

    Returns
    -------
    Estimates
    """
    import pandas as pd

    import simulations.policies
    from onlineeval.estimators import get_estimator, get_reward
    from onlineeval.estimators.log_estimates import (
        METRICS,
        TIES,
        check_needs,
        check_rewards,
        estimate_conventions,
        estimate_targets,
        parse_estimators,
    )

    if metric not in METRICS:
        raise ConfigError(("metric",), f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}")
    if not 0 < alpha < 1:
        raise ConfigError(("alpha",), f"must be in (0, 1), got {alpha}")
    if bootstrap != 0 and bootstrap < 100:
        raise ConfigError(("bootstrap",), f"must be 0 (no bootstrap) or >= 100 replicates, got {bootstrap}")
    if ties not in TIES:
        raise ConfigError(("ties",), f"must be one of {', '.join(TIES)}; got {ties!r}")
    if not targets:
        raise ConfigError(("targets",), "give at least one target")
    names = parse_estimators(estimators if isinstance(estimators, str) else ",".join(estimators), key="estimators")
    opts = {k: dict(v) for k, v in (options or {}).items()}
    unknown = [k for k in opts if k not in names]
    if unknown:
        raise ConfigError(("options", unknown[0]), f"is not one of the estimators ({', '.join(names)})")
    ests = [get_estimator(n, **opts.get(n, {})) for n in names]
    check_rewards(ests, get_reward(metric, 1), key="metric")
    lg = _logged(log, simulations.policies)
    reward = get_reward(metric, lg.data.k)
    check_needs(lg, ests)
    if baseline is not None and baseline[0] in targets:
        raise ConfigError(("baseline",), f"{baseline[0]!r} is also a target")
    maps = {}
    for name, run in [*targets.items(), *([baseline] if baseline is not None else [])]:
        tmap = lg.target(_target_lists(run, ties, name), name)
        if not tmap.ranked.any():
            raise InputError(f"target {name!r}: no query in common with the log (log ids e.g. {lg.queries[0]!r})")
        if tmap.unseen and not allow_unseen:
            u = tmap.unseen[0]
            raise InputError(f"target {name!r} ranks document {u.doc!r} at rank {u.rank} for query {u.query!r}, "
                             "which the log never shows for that query; the estimators have no data there "
                             "(allow_unseen=True counts such slots as support violations)")
        maps[name] = tmap
    base = maps.pop(baseline[0]) if baseline is not None else None
    out = estimate_targets(lg, list(maps.values()), ests, reward, alpha=alpha, bootstrap=bootstrap, seed=seed,
                           baseline=base, sources={name: f"target {name!r}" for name in [*maps, *(
                               [baseline[0]] if baseline is not None else [])]})
    flat = []
    for r in out.results:
        row = {k: v for k, v in r.items() if k not in ("diagnostics", "warnings")}
        row |= {f"diag_{k}": v for k, v in (r.get("diagnostics") or {}).items()}
        row["warnings"] = tuple(r.get("warnings") or ())
        flat.append(row)
    conventions = estimate_conventions(lg, metric, reward, alpha, ties, bootstrap, seed)
    diffs = [{**d, "warnings": tuple(d.get("warnings") or ())} for d in out.differences]  # as the results' rows
    return Estimates(pd.DataFrame(flat), pd.DataFrame(diffs), tuple(out.warnings), conventions)
