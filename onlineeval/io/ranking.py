"""Turn a run (query, doc, score rows) into ranked lists under a named tie rule.

The five tie rules are described in :mod:`onlineeval.conventions`. Sorting is one
:func:`numpy.lexsort` over all rows (query, score descending, then the tie key), and the
ranked lists come back as padded ``(queries x depth)`` arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from onlineeval.conventions import TIE_RULES
from onlineeval.errors import ConfigError, InputError

__all__ = ["RankedRun", "rank_run", "ranked_doc_lists"]


class RankedRun(NamedTuple):
    """Ranked lists of a run in padded arrays (one row per query, sorted by query id).

    Attributes
    ----------
    queries:
        ``(q,)`` query ids (str, object array), sorted.
    docs:
        ``(q, d)`` document ids in rank order (object array, ``None`` past the end).
    scores:
        ``(q, d)`` scores (NaN past the end).
    lengths:
        ``(q,)`` number of ranked documents per query.
    groups:
        ``(q, d)`` tie-group id of each slot (equal for tied scores, ``-1`` past the end).
    rows:
        ``(q, d)`` index of each slot's row in the input frame (``-1`` past the end).
    """

    queries: np.ndarray
    docs: np.ndarray
    scores: np.ndarray
    lengths: np.ndarray
    groups: np.ndarray
    rows: np.ndarray

    def to_lists(self) -> dict[str, list[str]]:
        """``{query: [doc, ...]}`` in rank order."""
        return {str(q): list(self.docs[i, : self.lengths[i]]) for i, q in enumerate(self.queries)}


def _descending_rank(values: np.ndarray) -> np.ndarray:
    """Integer keys that sort ``values`` (strings) in descending byte order."""
    codes, _ = pd.factorize(values, sort=True)
    return -codes.astype(np.int64)


def rank_run(
    run: pd.DataFrame,
    ties: str = "docno_desc",
    grades: np.ndarray | None = None,
    depth: int | None = None,
) -> RankedRun:
    """Rank each query's documents by score, breaking ties by the named rule.

    Parameters
    ----------
    run:
        Columns ``query``, ``doc``, ``score`` (e.g. from :func:`onlineeval.io.read_run`);
        row order is the input order.
    ties:
        ``"docno_desc"`` (trec_eval), ``"input_order"`` (LightGBM, XGBoost),
        ``"pessimistic"`` / ``"optimistic"`` (least / most relevant first within a tie;
        they need ``grades``), or ``"expected"`` (ranked as ``docno_desc``; ``groups``
        marks the ties so metrics can take the expectation over their orders).
        Pessimistic and optimistic break remaining ties (equal grades) by docno descending.
    grades:
        ``(n,)`` grade of each run row (negative for unjudged), for the
        pessimistic / optimistic rules.
    depth:
        Keep at most this many documents per query (trec_eval ``-M``).
    """
    if ties not in TIE_RULES:
        raise ConfigError(("ties",), f"must be one of {', '.join(TIE_RULES)}; got {ties!r}")
    for col in ("query", "doc", "score"):
        if col not in run.columns:
            raise InputError(f"run lacks column {col!r}; needs query, doc, score")
    n = len(run)
    qcodes, qnames = pd.factorize(run["query"].to_numpy(), sort=True)
    scores = run["score"].to_numpy(dtype=np.float64)
    docs = run["doc"].to_numpy()
    if ties == "input_order":
        key = np.arange(n)
        keys: tuple[np.ndarray, ...] = (key, -scores, qcodes)
    elif ties in ("docno_desc", "expected"):
        keys = (_descending_rank(docs), -scores, qcodes)
    else:
        if grades is None:
            raise ConfigError(("ties",), f"the {ties} tie rule needs the grades of the run's documents")
        g = np.asarray(grades, dtype=np.float64)
        g = np.where(g < 0, -1.0, g)
        gkey = g if ties == "pessimistic" else -g
        keys = (_descending_rank(docs), gkey, -scores, qcodes)
    order = np.lexsort(keys)
    qs = qcodes[order]
    nq = len(qnames)
    counts = np.bincount(qs, minlength=nq)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(n) - starts[qs]
    keep = pos < depth if depth is not None else np.ones(n, dtype=bool)
    lengths = np.minimum(counts, depth) if depth is not None else counts
    width = int(lengths.max(initial=0))
    qk, pk, ok = qs[keep], pos[keep], order[keep]
    doc_mat = np.full((nq, width), None, dtype=object)
    doc_mat[qk, pk] = docs[ok]
    score_mat = np.full((nq, width), np.nan)
    score_mat[qk, pk] = scores[ok]
    row_mat = np.full((nq, width), -1, dtype=np.int64)
    row_mat[qk, pk] = ok
    sorted_scores = scores[order]
    new_group = np.ones(n, dtype=bool)
    if n > 1:
        new_group[1:] = (qs[1:] != qs[:-1]) | (sorted_scores[1:] != sorted_scores[:-1])
    gid = np.cumsum(new_group) - 1
    group_mat = np.full((nq, width), -1, dtype=np.int64)
    group_mat[qk, pk] = gid[keep]
    return RankedRun(np.asarray(qnames, dtype=object), doc_mat, score_mat, lengths.astype(np.int64), group_mat, row_mat)


def ranked_doc_lists(
    run: pd.DataFrame,
    ties: str = "docno_desc",
    qrels: pd.DataFrame | None = None,
    depth: int | None = None,
) -> dict[str, list[str]]:
    """``{query: [doc, ...]}`` ranked by score under the named tie rule.

    ``qrels`` (columns query, doc, grade) is needed for the pessimistic and optimistic
    rules; ``"expected"`` is not a single ranking and is refused here.
    """
    if ties == "expected":
        raise ConfigError(("ties",), "'expected' averages over tie orders; it has no single ranked list")
    grades = None
    if ties in ("pessimistic", "optimistic"):
        if qrels is None:
            raise ConfigError(("ties",), f"the {ties} tie rule needs qrels")
        grades = join_grades(run, qrels)
    return rank_run(run, ties, grades, depth).to_lists()


def join_grades(run: pd.DataFrame, qrels: pd.DataFrame) -> np.ndarray:
    """``(n,)`` int64 grade of each run row: the qrels grade, ``-1`` when not in the qrels,
    and ``-2`` for a qrels entry with a negative grade (pooled but unjudged)."""
    left = pd.DataFrame({"query": run["query"].to_numpy(), "doc": run["doc"].to_numpy()})
    right = pd.DataFrame(
        {"query": qrels["query"].to_numpy(), "doc": qrels["doc"].to_numpy(), "grade": qrels["grade"].to_numpy()}
    )
    merged = left.merge(right, on=["query", "doc"], how="left", sort=False)
    g = merged["grade"].to_numpy(dtype=np.float64)
    out = np.where(np.isnan(g), -1, np.where(g < 0, -2, g)).astype(np.int64)
    return out
