"""Evaluate runs against qrels under named conventions, with counted / excluded / filled queries.

:func:`evaluate_run` is the one place where the conventions meet the data:

1. the run is read only for queries in the qrels (others are *ignored* and counted);
2. each run row gets its label code (grade, not pooled, pooled-unjudged);
3. documents are ranked by score under the tie rule and cut at the run depth;
4. qrels queries absent from the run are an error, *filled* with an empty ranking
   (trec_eval ``-c``: 0 for every relevance metric) or *dropped*;
5. queries without a relevant document are *excluded*, count 1, or count with the
   metric's own value for them (``empty="zero"``: 0 for every relevance-normalised
   metric, as in trec_eval); a relevance-free metric (``Metric.relevance_free``: Judged,
   Unjudged, NumRet, RBPResidual) is defined on them and counts them under every rule,
   so under ``empty="exclude"`` its mean can be over more queries than the others';
6. every metric kernel runs once over the padded batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from onlineeval.conventions import Conventions
from onlineeval.errors import ConfigError, InputError
from onlineeval.io.ranking import _join_codes, _joint_query_codes, _layout
from onlineeval.metrics.base import EMPTY, EvalContext, LabelBatch, Metric, parse_metrics

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["QueryCounts", "RunEvaluation", "evaluate_run", "label_batch"]


@dataclass(frozen=True)
class QueryCounts:
    """How many queries were counted in the means, and why the others were not.

    Attributes
    ----------
    counted:
        Queries averaged under the ``empty`` rule (the denominator of every mean but those of the
        relevance-free metrics, :meth:`RunEvaluation.counted_for`, which also count the excluded queries).
    excluded_empty:
        Judged queries without a relevant document, excluded (``empty="exclude"``).
    scored_empty:
        Queries without a relevant document that were counted with 1 or 0.
    filled_missing:
        Qrels queries absent from the run, counted with an empty ranking (``missing="zero"``).
    dropped_missing:
        Qrels queries absent from the run, left out (``missing="drop"``).
    ignored_unjudged:
        Run queries with no qrels at all (never evaluated).
    """

    counted: int
    excluded_empty: int
    scored_empty: int
    filled_missing: int
    dropped_missing: int
    ignored_unjudged: int

    def as_dict(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class RunEvaluation:
    """Per-query values of one run for several metrics, with the conventions used.

    Attributes
    ----------
    queries:
        ``(q,)`` query ids of the evaluated rows (sorted).
    values:
        ``{metric: (q,) float}``; NaN for a query outside the metric's query set
        (:meth:`counted_for`: excluded by the ``empty`` rule, unless the metric is relevance-free).
    counted:
        ``(q,)`` bool, the query enters the means under the ``empty`` rule (every metric's but the
        relevance-free ones').
    evaluated:
        ``(q,)`` bool, every evaluated query: the query set of the relevance-free metrics
        (``Metric.relevance_free``), which are defined on queries without a relevant document. Of size 0
        when built without it: every metric then uses :attr:`counted`.
    """

    run_id: str
    queries: np.ndarray
    values: dict[Metric, np.ndarray]
    counted: np.ndarray
    counts: QueryCounts
    conventions: Conventions
    metrics: tuple[Metric, ...] = field(default=())
    evaluated: np.ndarray = field(default_factory=lambda: np.ones(0, dtype=bool))

    def _metric(self, metric: Metric | str) -> Metric:
        return metric if isinstance(metric, Metric) else parse_metrics([metric])[0]

    def counted_for(self, metric: Metric | str) -> np.ndarray:
        """``(q,)`` bool, the queries of ``metric``'s mean: :attr:`counted` (the ``empty`` rule), or
        every evaluated query for a relevance-free metric (Judged, Unjudged, NumRet, RBPResidual), whose
        value needs no relevant document (under ``empty="exclude"`` the two differ when queries were excluded)."""
        m = self._metric(metric)
        if type(m).relevance_free and self.evaluated.size == self.counted.size:
            return self.evaluated
        return self.counted

    def n(self, metric: Metric | str) -> int:
        """How many queries ``metric``'s mean is over."""
        return int(self.counted_for(metric).sum())

    def mean(self, metric: Metric | str) -> float:
        """Mean over the metric's counted queries (:meth:`counted_for`; NaN when none is counted)."""
        m = self._metric(metric)
        v = self.values[m][self.counted_for(m)]
        return float(v.mean()) if v.size else float("nan")

    def total(self, metric: Metric | str) -> float:
        """Sum over the metric's counted queries (0 when none is counted): the summary of a count such as
        NumRet (``Metric.summed``), as trec_eval's ``all`` line gives it."""
        m = self._metric(metric)
        return float(self.values[m][self.counted_for(m)].sum())

    def per_query_rows(self) -> np.ndarray:
        """``(q,)`` bool, the queries counted for at least one metric (:meth:`counted_for`)."""
        rows = self.counted.copy()
        for m in self.metrics:
            rows |= self.counted_for(m)
        return rows

    def per_query(self) -> pd.DataFrame:
        """``query`` column plus one column per metric: the queries counted for some metric, NaN where a
        query is not in that metric's set (an excluded query's relevance metrics beside its Judged@k)."""
        import pandas as pd

        rows = self.per_query_rows()
        data = {"query": self.queries[rows]}
        for m in self.metrics:
            data[str(m)] = self.values[m][rows]
        return pd.DataFrame(data)


def label_batch(
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    conventions: Conventions,
) -> tuple[LabelBatch, np.ndarray, dict[str, int]]:
    """Build the padded :class:`LabelBatch` of a run against qrels.

    Returns the batch (one row per evaluated query), the query ids of its rows and raw
    counts (``filled_missing``, ``dropped_missing``, ``ignored_unjudged``).
    """
    for frame, name, cols in ((qrels, "qrels", ("query", "doc", "grade")), (run, "run", ("query", "doc", "score"))):
        lacking = [c for c in cols if c not in frame.columns]
        if lacking:
            raise InputError(f"{name} lacks column(s) {', '.join(lacking)}; needs {', '.join(cols)}")
    run_q, qrels_q, qnames = _joint_query_codes(_ids(run["query"]), _ids(qrels["query"]))
    judged_q = np.zeros(len(qnames), dtype=bool)
    judged_q[qrels_q] = True
    in_qrels = judged_q[run_q]
    ignored = int((np.bincount(run_q[~in_qrels], minlength=len(qnames)) > 0).sum())
    run_j = run.loc[in_qrels].reset_index(drop=True) if not in_qrels.all() else run
    rq = run_q[in_qrels] if not in_qrels.all() else run_q
    grades = _join_codes(
        rq,
        qrels_q,
        _ids(run_j["doc"]),
        _ids(qrels["doc"]),
        qrels["grade"].to_numpy(),
        run.attrs.get("path"),
        qrels.attrs.get("path"),
    )
    # compact query codes of the run (sorted order is kept)
    present_q = np.bincount(rq, minlength=len(qnames)) > 0
    used = np.flatnonzero(present_q)
    compact = np.cumsum(present_q) - 1
    depth = conventions.depth
    if conventions.ties == "expected" and depth is not None:
        # the expectation is over orders of the whole tie group; a group cut by the depth
        # would need the orders of documents past the depth, so refuse that case
        full = _layout(run_j, conventions.ties, grades, None, compact[rq], qnames[used])
        check_whole_tie_groups(full.groups, full.queries, depth)
    ranked = _layout(run_j, conventions.ties, grades, depth, compact[rq], qnames[used])
    run_queries = ranked.queries
    qrel_queries = qnames[judged_q]
    missing = np.setdiff1d(np.asarray(qrel_queries, dtype=object).astype(str), run_queries.astype(str))
    if missing.size and conventions.missing == "error":
        shown = ", ".join(missing[:5]) + (", ..." if missing.size > 5 else "")
        raise InputError(
            f"{missing.size} qrels queries are not in the run ({shown}); choose --missing zero "
            "(count them as 0, as trec_eval -c does) or --missing drop (in Python: missing='zero' or 'drop')",
            run.attrs.get("path"),
        )
    codes = np.full(ranked.rows.shape, EMPTY, dtype=np.int64)
    present = ranked.rows >= 0
    codes[present] = grades[ranked.rows[present]]
    groups = ranked.groups if conventions.ties == "expected" else None
    queries = run_queries.astype(str)
    filled = 0
    if missing.size and conventions.missing == "zero":
        filled = int(missing.size)
        codes = np.concatenate([codes, np.full((filled, codes.shape[1]), EMPTY, dtype=np.int64)])
        if groups is not None:
            groups = np.concatenate([groups, np.full((filled, groups.shape[1]), -1, dtype=np.int64)])
        queries = np.concatenate([queries, missing.astype(str)])
        order = np.argsort(queries, kind="stable")
        codes, queries = codes[order], queries[order]
        if groups is not None:
            groups = groups[order]
    judged = _judged_matrix(qrels, queries, qrels_q, qnames)
    counts = {
        "filled_missing": filled,
        "dropped_missing": int(missing.size) if conventions.missing == "drop" else 0,
        "ignored_unjudged": ignored,
    }
    return LabelBatch(codes, judged, groups), queries.astype(object), counts


def _ids(column: pd.Series) -> np.ndarray:
    """Ids as an object array of str (numbers in a DataFrame compare as their text)."""
    values = column.to_numpy()
    if values.dtype == object and (values.size == 0 or isinstance(values[0], str)):
        return values
    return column.astype(str).to_numpy(dtype=object)


def _judged_matrix(
    qrels: pd.DataFrame, queries: np.ndarray, qrels_q: np.ndarray | None = None, qnames: np.ndarray | None = None
) -> np.ndarray:
    """``(q, m)`` judged grades (>= 0) per query in ``queries`` order, sorted descending.

    ``qrels_q`` (the code of each qrels row in ``qnames``) spares hashing every qrels row's
    query id: only the distinct names are looked up in ``queries``.
    """
    import pandas as pd

    g = qrels["grade"].to_numpy(dtype=np.int64)
    if qrels_q is not None and qnames is not None:
        # position of each distinct name in ``queries`` (-1 when absent), then one gather
        qi = pd.Index(queries).get_indexer(np.asarray(qnames, dtype=object))[qrels_q]
    else:
        qi = pd.Index(queries).get_indexer(_ids(qrels["query"]))
    return judged_rows(qi, g, len(queries))


def check_whole_tie_groups(groups: np.ndarray, queries: Any, depth: int) -> None:
    """Refuse a cut-off ``depth`` that splits a group of tied scores (``groups``: the full
    ranking's tie-group ids per row, -1 for padding): the 'expected' tie rule averages over the
    orders of whole groups. Raises :class:`ConfigError` at ``ties`` naming the first such query."""
    if groups.shape[1] <= depth:
        return
    cut_group = (groups[:, depth - 1] >= 0) & (groups[:, depth - 1] == groups[:, depth])
    if cut_group.any():
        q = queries[int(np.argmax(cut_group))]
        raise ConfigError(
            ("ties",),
            f"with depth={depth} a group of tied scores is cut in two (query {q}); the "
            "'expected' tie rule needs whole groups: raise the depth or pick another rule",
        )


def judged_rows(qi: np.ndarray, g: np.ndarray, nq: int) -> np.ndarray:
    """``(nq, m)`` judged grades (>= 0) from each qrels row's row index ``qi`` (``-1``: not
    evaluated) and grade ``g``, each row sorted descending with ``-1`` padding (shared by
    :func:`label_batch` and :func:`onlineeval.metrics.batch.label_batch_coded`)."""
    keep = (qi >= 0) & (g >= 0)
    qi, g = qi[keep], g[keep]
    counts = np.bincount(qi, minlength=nq)
    width = max(int(counts.max(initial=0)), 1)
    # qrels list each query's lines together, usually in sorted order: then no sort is needed
    order = np.arange(qi.size) if bool((qi[1:] >= qi[:-1]).all()) else np.argsort(qi, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    qs = qi[order]
    pos = np.arange(qi.size) - starts[qs]
    out = np.full((nq, width), -1, dtype=np.int64)
    out[qs, pos] = g[order]
    return -np.sort(-out, axis=1)  # each row descending, -1 padding last


def _typed(qrels: pd.DataFrame, run: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Frames whose grade / score columns are not already integer / finite numbers go
    through :func:`onlineeval.io.qrels_from_frame` / :func:`onlineeval.io.run_from_frame`
    (numeric text is converted; anything else is an :class:`InputError` naming the row).
    Frames from the readers pass untouched (one dtype check and one ``isfinite``)."""
    from onlineeval.io.trec import qrels_from_frame, run_from_frame

    if "grade" in qrels.columns and qrels["grade"].to_numpy().dtype.kind not in "iu":
        attrs = dict(qrels.attrs)
        qrels = qrels_from_frame(qrels)
        qrels.attrs.update(attrs)
    if "score" in run.columns:
        s = run["score"].to_numpy()
        if s.dtype.kind not in "iuf" or (s.dtype.kind == "f" and not np.isfinite(s).all()):
            attrs = dict(run.attrs)
            run = run_from_frame(run)
            run.attrs.update(attrs)
    return qrels, run


def evaluate_run(
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    metrics: str | Iterable[str | Metric],
    conventions: Conventions = Conventions(),
    run_id: str | None = None,
) -> RunEvaluation:
    """Evaluate one run on the qrels under the given conventions.

    Parameters
    ----------
    qrels, run:
        Frames from :func:`onlineeval.io.read_qrels` / :func:`onlineeval.io.read_run`
        (or validated with ``qrels_from_frame`` / ``run_from_frame``).
    metrics:
        Metric objects or names (``"nDCG@10,AP"``).
    conventions:
        Gain, empty and missing rules, tie rule, rel_min, depth.
    """
    ms: Sequence[Metric] = tuple(parse_metrics(metrics))
    qrels, run = _typed(qrels, run)
    batch, queries, raw = label_batch(qrels, run, conventions)
    # the scale's top grade from the whole qrels (ERR): not from the queries this run answers
    top = int(np.max(qrels["grade"].to_numpy(), initial=0)) if len(qrels) else 0
    return finish_evaluation(batch, queries, raw, ms, conventions, top, run_id or str(run.attrs.get("run_id", "run")))


def finish_evaluation(
    batch: LabelBatch,
    queries: np.ndarray,
    raw: dict[str, int],
    ms: Sequence[Metric],
    conventions: Conventions,
    top: int,
    run_id: str,
) -> RunEvaluation:
    """The metrics of a label batch under the empty rule, with the query counts
    (shared by :func:`evaluate_run` and :func:`onlineeval.metrics.batch.evaluate_coded`);
    ``top`` is the qrels' top grade (ERR's scale)."""
    ctx = EvalContext(int(conventions.rel_min), conventions.gain, max(1, top))
    empty = batch.num_rel(ctx.rel_min) == 0
    counted = np.ones(len(queries), dtype=bool)
    if conventions.empty == "exclude":
        counted &= ~empty
    evaluated = np.ones(len(queries), dtype=bool)
    values: dict[Metric, np.ndarray] = {}
    for m in ms:
        v = m.compute(batch, ctx).copy()
        if type(m).empty_sensitive and conventions.empty == "one":
            v[empty] = 1.0
        if not type(m).relevance_free:  # a relevance-free metric is defined on every evaluated query
            v[~counted] = np.nan
        values[m] = v
    counts = QueryCounts(
        counted=int(counted.sum()),
        excluded_empty=int((empty & ~counted).sum()),
        scored_empty=int((empty & counted).sum()),
        filled_missing=raw["filled_missing"],
        dropped_missing=raw["dropped_missing"],
        ignored_unjudged=raw["ignored_unjudged"],
    )
    return RunEvaluation(run_id, queries, values, counted, counts, conventions, tuple(ms), evaluated)
