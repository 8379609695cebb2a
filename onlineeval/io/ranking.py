"""Turn a run (query, doc, score rows) into ranked lists under a named tie rule.

The five tie rules are described in :mod:`onlineeval.conventions`. Sorting is one
:func:`numpy.lexsort` over all rows (query, score descending, then the tie key), and the
ranked lists come back as padded ``(queries x depth)`` arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from onlineeval.conventions import TIE_RULES
from onlineeval.errors import ConfigError, InputError, must_be_one_of

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

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
    import pandas as pd

    codes, _ = pd.factorize(values, sort=True)
    return -codes.astype(np.int64)


#: rows (documents) per block of :func:`_segment_sort`'s sort of equally long lists
SORT_ROWS = 1 << 16


def _segment_sort(
    qcodes: np.ndarray, scores: np.ndarray, nq: int, stable: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Row order by (query code, score descending), ties in input order, and sorted codes.

    When the padded (queries x longest list) matrix is small, each query's list is sorted
    on its own row (``argsort(axis=1)``), which is much faster than one global sort of all
    rows; otherwise :func:`numpy.lexsort`.
    """
    n = qcodes.size
    counts = np.bincount(qcodes, minlength=nq)
    width = int(counts.max(initial=0))
    if n == 0 or nq * width > 4 * n + 1024:
        order = np.lexsort((-scores, qcodes))
        return order, qcodes[order]
    change = np.flatnonzero(qcodes[1:] != qcodes[:-1]) + 1
    present = np.count_nonzero(counts)
    if change.size == present - 1 and present * width == n:
        # each query's rows are contiguous and every list is equally long (e.g. 1000 documents
        # a query): sort the blocks in place, then put them in query order (no padded copy).
        # The lists are sorted on blocks of about SORT_ROWS rows, whose arrays stay in the
        # processor's cache (each list is sorted on its own either way: the same order).
        block_q = qcodes[::width]
        lists = scores.reshape(present, width)
        perm = np.empty((present, width), dtype=np.intp)
        step = max(1, SORT_ROWS // width)
        for a in range(0, present, step):
            b = min(a + step, present)
            part = np.argsort(-lists[a:b], axis=1, kind="stable" if stable else None)
            part += (np.arange(a, b, dtype=np.intp) * width)[:, None]
            perm[a:b] = part
        if bool((block_q[1:] > block_q[:-1]).all()):
            # the blocks are in query order already (files sorted by query id): ``qcodes``
            # is the sorted codes (returned as it is; callers only read it)
            return perm.ravel(), qcodes
        by_q = np.argsort(block_q, kind="stable")
        return perm[by_q].ravel(), np.repeat(block_q[by_q], width)
    if change.size == present - 1:
        # each query's rows are contiguous (the usual file layout): no sort needed
        by_query = np.arange(n)
        qs = qcodes
        block_start = np.zeros(n, dtype=np.int64)
        block_start[change] = change
        pos = np.arange(n) - np.maximum.accumulate(block_start)
    else:
        by_query = np.argsort(qcodes, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        qs = qcodes[by_query]
        pos = np.arange(n) - starts[qs]
    keys = np.full((nq, width), np.inf)
    keys[qs, pos] = -scores[by_query]
    rows = np.full((nq, width), -1, dtype=np.int64)
    rows[qs, pos] = by_query
    # an unstable sort is enough when ties are re-sorted afterwards by their own rule
    perm = np.argsort(keys, axis=1, kind="stable" if stable else None)
    sorted_rows = np.take_along_axis(rows, perm, axis=1)
    valid = np.arange(width)[None, :] < counts[:, None]
    return sorted_rows[valid], np.repeat(np.arange(nq), counts)


def _tie_order(
    scores: np.ndarray,
    doc_key: Callable[[np.ndarray], np.ndarray],
    ties: str,
    grades: np.ndarray | None,
    qcodes: np.ndarray,
    nq: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row order (query, score descending, tie rule) plus sorted query codes and scores.

    Documents are sorted by (query, -score) once; only rows inside a tie are then re-sorted
    by the tie key (``doc_key(rows)``: integers ordering those rows' documents by id,
    descending), so an untied run never pays for comparing document ids.
    """
    order, qs = _segment_sort(np.asarray(qcodes, dtype=np.int64), scores, nq, stable=ties == "input_order")
    ss = scores[order]
    if ties != "input_order" and len(order) > 1:
        tied = (qs[1:] == qs[:-1]) & (ss[1:] == ss[:-1])
        if tied.any():
            in_tie = np.zeros(len(order), dtype=bool)
            in_tie[1:] |= tied
            in_tie[:-1] |= tied
            idx = np.flatnonzero(in_tie)
            rows = order[idx]
            starts = np.ones(idx.size, dtype=bool)
            starts[1:] = ~tied[idx[1:] - 1]
            segment = np.cumsum(starts)
            key = doc_key(rows)
            if ties in ("pessimistic", "optimistic"):
                g = np.asarray(grades, dtype=np.float64)[rows]
                g = np.where(g < 0, -1.0, g)
                perm = np.lexsort((key, g if ties == "pessimistic" else -g, segment))
            else:
                perm = np.lexsort((key, segment))
            order[idx] = rows[perm]  # (within a tie of one query: the sorted scores stay as they are)
    return order, qs, ss


class _Layout(NamedTuple):
    queries: np.ndarray
    rows: np.ndarray
    groups: np.ndarray
    lengths: np.ndarray


def _check_ties(ties: str, grades: np.ndarray | None) -> None:
    if ties not in TIE_RULES:
        raise ConfigError(("ties",), must_be_one_of(TIE_RULES, ties))
    if ties in ("pessimistic", "optimistic") and grades is None:
        raise ConfigError(("ties",), f"the {ties} tie rule needs the grades of the run's documents")


def _layout(
    run: pd.DataFrame,
    ties: str,
    grades: np.ndarray | None,
    depth: int | None,
    qcodes: np.ndarray | None = None,
    qnames: np.ndarray | None = None,
) -> _Layout:
    """Padded ``(q, d)`` row indices and tie groups of the ranked run (no object arrays)."""
    _check_ties(ties, grades)
    for col in ("query", "doc", "score"):
        if col not in run.columns:
            raise InputError(f"run lacks column {col!r}; needs query, doc, score")
    if qcodes is None or qnames is None:
        import pandas as pd

        qcodes, qnames = pd.factorize(run["query"].to_numpy(), sort=True)
    docs = run["doc"].to_numpy()
    return layout_arrays(
        run["score"].to_numpy(dtype=np.float64),
        lambda rows: _descending_rank(docs[rows]),
        ties,
        grades,
        depth,
        np.asarray(qcodes, dtype=np.int64),
        np.asarray(qnames, dtype=object),
    )


def layout_arrays(
    scores: np.ndarray,
    doc_key: Callable[[np.ndarray], np.ndarray],
    ties: str,
    grades: np.ndarray | None,
    depth: int | None,
    qcodes: np.ndarray,
    qnames: np.ndarray,
    with_groups: bool = True,
) -> _Layout:
    """:func:`_layout` on arrays: ``scores`` and query codes (into ``qnames``) per row, and
    ``doc_key(rows)``, integers ordering the documents of ``rows`` by id, descending.
    ``with_groups=False`` leaves the tie groups out (``groups`` is then ``-1`` everywhere,
    shape ``(q, 0)``): only the ``expected`` tie rule needs them."""
    _check_ties(ties, grades)
    n = scores.size
    nq = len(qnames)
    order, qs, sorted_scores = _tie_order(scores, doc_key, ties, grades, qcodes, nq)
    counts = np.bincount(qs, minlength=nq)
    full = int(counts.max(initial=0))
    if nq and not with_groups and int(counts.min()) == full and (depth is None or depth >= full):
        # every query has the same number of rows, all kept: ``order`` is the matrix row by
        # row (its rows are sorted by query), with no padding to scatter into
        lengths = counts.astype(np.int64)
        return _Layout(qnames, order.reshape(nq, full), np.full((nq, 0), -1, dtype=np.int64), lengths)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    pos = np.arange(n) - starts[qs]
    if depth is not None:
        keep = pos < depth
        lengths = np.minimum(counts, depth)
    else:
        keep = slice(None)
        lengths = counts
    width = int(lengths.max(initial=0))
    qk, pk = qs[keep], pos[keep]
    rows_mat = np.full((nq, width), -1, dtype=np.int64)
    rows_mat.ravel()[qk * width + pk] = order[keep]
    if not with_groups:
        return _Layout(qnames, rows_mat, np.full((nq, 0), -1, dtype=np.int64), lengths.astype(np.int64))
    new_group = np.ones(n, dtype=bool)
    if n > 1:
        new_group[1:] = (qs[1:] != qs[:-1]) | (sorted_scores[1:] != sorted_scores[:-1])
    gid = np.cumsum(new_group) - 1
    groups = np.full((nq, width), -1, dtype=np.int64)
    groups[qk, pk] = gid[keep]
    return _Layout(qnames, rows_mat, groups, lengths.astype(np.int64))


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
    lay = _layout(run, ties, grades, depth)
    present = lay.rows >= 0
    docs = run["doc"].to_numpy()
    scores = run["score"].to_numpy(dtype=np.float64)
    doc_mat = np.full(lay.rows.shape, None, dtype=object)
    doc_mat[present] = docs[lay.rows[present]]
    score_mat = np.full(lay.rows.shape, np.nan)
    score_mat[present] = scores[lay.rows[present]]
    return RankedRun(lay.queries, doc_mat, score_mat, lay.lengths, lay.groups, lay.rows)


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
    rq, qq, _ = _joint_codes(run["query"].to_numpy(), qrels["query"].to_numpy(), sort=False)
    return _join_codes(rq, qq, run["doc"].to_numpy(), qrels["doc"].to_numpy(), qrels["grade"].to_numpy())


def _duplicate_error(dup: np.ndarray, path: str | None, what: str, verb: str) -> None:
    from onlineeval.io.trec import locate_qrels_problem, locate_run_problem

    if path is not None:
        try:
            (locate_run_problem if what == "run" else locate_qrels_problem)(path)
        except FileNotFoundError:
            pass
    row = int(np.argmax(dup))
    raise InputError(f"a document is {verb} for one query in the {what} (row {row + 1})", path)


def _joint_codes(a: np.ndarray, b: np.ndarray, sort: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes of ``a`` and ``b`` in one shared factorization (and the uniques)."""
    import pandas as pd

    codes, uniques = pd.factorize(np.concatenate([np.asarray(a, dtype=object), np.asarray(b, dtype=object)]), sort=sort)
    return codes[: len(a)].astype(np.int64), codes[len(a) :].astype(np.int64), np.asarray(uniques, dtype=object)


def _blocks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heads of runs of equal consecutive values and the run index of every element."""
    n = len(values)
    if n == 0:
        return values[:0], np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts = np.concatenate([[0], change])
    lengths = np.diff(np.append(starts, n))
    return values[starts], np.repeat(np.arange(starts.size), lengths)


def _joint_query_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_joint_codes` (sorted) for query ids, hashing only one id per block of
    consecutive equal ids (runs and qrels list each query's lines together)."""
    a = np.asarray(a, dtype=object)
    b = np.asarray(b, dtype=object)
    heads_a, block_a = _blocks(a)
    heads_b, block_b = _blocks(b)
    ca, cb, uniques = _joint_codes(heads_a, heads_b, sort=True)
    return ca[block_a], cb[block_b], uniques


def _join_codes(
    run_q: np.ndarray,
    qrels_q: np.ndarray,
    run_docs: np.ndarray,
    qrels_docs: np.ndarray,
    qrels_grades: np.ndarray,
    run_path: str | None = None,
    qrels_path: str | None = None,
) -> np.ndarray:
    """Grades of run rows from shared integer codes; also rejects repeated (query, doc) pairs."""
    rd, qd, uniq = _joint_codes(run_docs, qrels_docs, sort=False)
    nd = max(len(uniq), 1)
    qrels_key = qrels_q * nd + qd
    run_key = run_q * nd + rd
    # sort-merge on integer keys: files list each query's lines together, so the keys are
    # nearly sorted already and a stable (run-aware) sort beats hashing millions of keys
    q_order, q_sorted = _sorted_keys(qrels_key)
    if q_sorted.size > 1 and (q_sorted[1:] == q_sorted[:-1]).any():
        import pandas as pd

        _duplicate_error(pd.Index(qrels_key).duplicated(), qrels_path, "qrels", "judged twice")
    r_order, r_sorted = _sorted_keys(run_key)
    if r_sorted.size > 1 and (r_sorted[1:] == r_sorted[:-1]).any():
        import pandas as pd

        _duplicate_error(pd.Index(run_key).duplicated(), run_path, "run", "listed twice")
    g = np.asarray(qrels_grades, dtype=np.int64)
    out = np.full(run_key.size, -1, dtype=np.int64)
    if q_sorted.size and r_sorted.size:
        pos = np.minimum(np.searchsorted(q_sorted, r_sorted), q_sorted.size - 1)
        found = q_sorted[pos] == r_sorted
        grade = g[q_order[pos[found]]]
        out[r_order[found]] = np.where(grade < 0, -2, grade)
    return out


def _sorted_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable sorting order of ``keys`` and the sorted keys (no sort when already sorted)."""
    keys = np.asarray(keys, dtype=np.int64)
    if keys.size < 2 or bool((keys[1:] >= keys[:-1]).all()):
        return np.arange(keys.size), keys
    order = np.argsort(keys, kind="stable")
    return order, keys[order]
