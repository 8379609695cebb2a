"""Evaluate a run read by the byte-level reader, on integer-coded ids, without pandas.

:func:`evaluate_coded` is :func:`onlineeval.metrics.evaluate.evaluate_run` for a
:class:`~onlineeval.io.trec_bytes.CodedRun` and :class:`~onlineeval.io.trec_bytes.CodedQrels`:
the same steps under the same conventions (see that module), on ids held as integer words:

* query ids get joint sorted codes from their blocks of consecutive equal ids (files list
  each query's lines together, so only one id per block is compared and sorted);
* each run row finds its qrels grade by looking its 64-bit (query, doc hash) key up in a
  hash table of the qrels keys (:class:`_KeyTable`); every match is then checked on the
  full ids, so a hash collision cannot give a wrong grade;
* ranking is :func:`onlineeval.io.ranking.layout_arrays` (the same code as the pandas path),
  ties between documents broken on the doc ids' words (their byte order).

It returns ``None`` where the pandas path would raise an error located in a file (a
(query, doc) pair twice in the qrels or in the run) or where two distinct (query, doc) pairs share a key:
the caller then evaluates through the pandas path, which reports it (or, for a collision,
computes the same result). Every other outcome, including the configuration errors and
the missing-queries error, is the pandas path's, word for word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from onlineeval.conventions import Conventions
from onlineeval.errors import InputError
from onlineeval.io.ranking import layout_arrays
from onlineeval.io.trec_bytes import ByteIds, CodedQrels, CodedRun
from onlineeval.metrics.base import EMPTY, LabelBatch, Metric, parse_metrics
from onlineeval.metrics.evaluate import RunEvaluation, check_whole_tie_groups, finish_evaluation, judged_rows

__all__ = ["evaluate_coded", "label_batch_coded"]

_U = np.uint64
#: multipliers of splitmix64's finaliser (S. Vigna), a well-mixing 64-bit hash
_M1, _M2, _GOLDEN = _U(0xBF58476D1CE4E5B9), _U(0x94D049BB133111EB), 0x9E3779B97F4A7C15
_S30, _S27, _S31 = _U(30), _U(27), _U(31)


def _lex_order(words: np.ndarray) -> np.ndarray:
    """Row order of ``(n, k)`` words sorted lexicographically (first word first)."""
    if words.shape[1] == 1:
        return np.argsort(words[:, 0], kind="stable")
    return np.lexsort(words.T[::-1])


def _block_heads(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First row of each block of consecutive equal rows, and each block's length."""
    n = words.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    if words.shape[1] == 1:
        change[1:] = words[1:, 0] != words[:-1, 0]
    else:
        change[1:] = (words[1:] != words[:-1]).any(axis=1)
    heads = np.flatnonzero(change)
    return heads, np.diff(np.append(heads, n))


def _pad_words(a: np.ndarray, k: int) -> np.ndarray:
    if a.shape[1] == k:
        return a
    out = np.zeros((a.shape[0], k), dtype=np.uint64)
    out[:, : a.shape[1]] = a
    return out


def _query_blocks(run: ByteIds, qrels: ByteIds) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The run's blocks of consecutive equal query ids (each block's code and length), the
    qrels' query code of each row, and the distinct ids (``str``, sorted) the codes index:
    one sorted factorisation of both files' query ids."""
    k = max(run.words.shape[1], qrels.words.shape[1])
    heads_r, size_r = _block_heads(run.words)
    heads_q, size_q = _block_heads(qrels.words)
    heads = np.concatenate([_pad_words(run.words[heads_r], k), _pad_words(qrels.words[heads_q], k)])
    order = _lex_order(heads)
    ordered = heads[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    code = np.empty(len(order), dtype=np.int64)
    code[order] = np.cumsum(new) - 1
    names = ByteIds(ordered[new]).decode()
    return code[: heads_r.size], size_r, np.repeat(code[heads_r.size :], size_q), names


#: rows per block of :func:`_keys`'s hash: the block's arrays (512 KiB each) stay in the processor's cache
HASH_ROWS = 1 << 16


def _hash(words: np.ndarray) -> np.ndarray:
    """64-bit hash of each row of id words (splitmix64's finaliser after xoring in each
    word), computed in place with one scratch array: the same values as the whole-array
    expressions, without a temporary per step (:func:`_keys` calls it on blocks of
    :data:`HASH_ROWS` rows)."""
    h = np.full(words.shape[0], _GOLDEN, dtype=np.uint64)
    t = np.empty_like(h)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            np.bitwise_xor(h, words[:, j], out=h)
            for shift, mult in ((_S30, _M1), (_S27, _M2)):
                np.right_shift(h, shift, out=t)
                np.bitwise_xor(h, t, out=h)
                np.multiply(h, mult, out=h)
            np.right_shift(h, _S31, out=t)
            np.bitwise_xor(h, t, out=h)
    return h


def _join(
    run_q: np.ndarray, run_docs: np.ndarray, qrels_q: np.ndarray, qrels_docs: np.ndarray, grades: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Grade code of each run row (qrels grade, ``-2`` for a negative one, ``-1`` not in the
    qrels) and the rows' 64-bit (query, doc) keys, or ``None`` when a (query, doc) pair
    repeats in the qrels or two distinct pairs share a key.

    A key is the query's rank of first appearance in the run (high bits) and the doc id's
    hash (low bits); each run key is looked up in a hash table of the qrels keys with a
    region per query (:class:`_KeyTable`), laid out in the run's query order, so that the
    lookups of consecutive run rows stay in the processor's cache. Every match is checked
    on the full doc ids."""
    k = max(run_docs.shape[1], qrels_docs.shape[1])
    run_docs, qrels_docs = _pad_words(run_docs, k), _pad_words(qrels_docs, k)
    n_codes = int(max(qrels_q.max(initial=-1), run_q.max(initial=-1))) + 1
    q_bits = max(1, (n_codes - 1).bit_length())
    if q_bits > 40:  # (more than 2**40 queries: leave it to the pandas path)
        return None
    # rank of each query code by first appearance in the run (qrels-only queries after)
    change = np.ones(run_q.size, dtype=bool)
    change[1:] = run_q[1:] != run_q[:-1]
    block_codes = run_q[change]
    _, first_block = np.unique(block_codes, return_index=True)
    firsts = block_codes[np.sort(first_block)]
    rank = np.full(n_codes, -1, dtype=np.int64)
    rank[firsts] = np.arange(firsts.size)
    rest = rank < 0
    rank[rest] = firsts.size + np.arange(int(rest.sum()))
    run_keys = _keys(rank, run_q, run_docs, q_bits)
    qrels_keys = _keys(rank, qrels_q, qrels_docs, q_bits)
    table = _KeyTable.build(qrels_keys, q_bits, n_codes)
    if table is None:
        return None  # two qrels rows share a key
    if qrels_keys.size == 0 or run_q.size == 0:
        return np.full(run_q.size, -1, dtype=np.int64), run_keys
    out = table.find(run_keys)  # qrels row of each run row, -1 none
    del table, qrels_keys
    hit = np.flatnonzero(out >= 0)
    match = out[hit]
    # equal keys have equal queries (the query's rank is the key's high bits): only the docs
    # are compared
    if not (qrels_docs[match] == run_docs[hit]).all():
        return None  # two distinct pairs share a key
    g = grades[match]
    out[hit] = np.where(g < 0, -2, g)  # (the other rows hold -1 already)
    return out, run_keys


def _keys(rank: np.ndarray, q: np.ndarray, docs: np.ndarray, q_bits: int) -> np.ndarray:
    """64-bit (query, doc hash) keys: ``rank[q]`` in the high ``q_bits`` bits and the doc
    ids' hash in the rest, computed in place on blocks of :data:`HASH_ROWS` rows (no
    full-size hash array; ``rank`` holds no negative value, so its uint64 view is its
    uint64 cast)."""
    keys = rank.view(np.uint64)[q]
    np.left_shift(keys, _U(64 - q_bits), out=keys)
    for a in range(0, q.size, HASH_ROWS):
        h = _hash(docs[a : a + HASH_ROWS])
        np.right_shift(h, _U(q_bits), out=h)
        np.bitwise_or(keys[a : a + HASH_ROWS], h, out=keys[a : a + HASH_ROWS])
    return keys


#: slots of a query's region of :class:`_KeyTable` per qrels row of the query (at least;
#: rounded up to a power of two): at most 1 in 4 slots is used
SLOTS_PER_KEY = 4


class _KeyTable:
    """Qrels keys (distinct 64-bit (query rank, doc hash) keys, see :func:`_join`) in a hash
    table of rows, for :meth:`find`'s lookups without binary searches.

    Each query rank ``r`` owns a region of ``size[r]`` slots (the power of two at least
    :data:`SLOTS_PER_KEY` times its number of qrels rows); a key's slot is the region's
    start plus the key's low bits (bits of the doc hash). Every slot holds ``0`` (empty)
    or ``row + 1`` of one qrels row with that slot, negated when other rows share the slot
    ("crowded"); those other rows (about 1 in 9 at the usual 20-40 judged documents a
    query) are kept aside, their keys sorted. A key is then found by one table read and a
    comparison, plus a binary search among the rows kept aside for keys that land on a
    crowded slot without matching its row (about 1 in 40).
    """

    def __init__(self, keys: np.ndarray, shift: int, base: np.ndarray, mask: np.ndarray, table: np.ndarray,
                 aside_keys: np.ndarray, aside_rows: np.ndarray) -> None:
        self.keys, self.shift, self.base, self.mask, self.table = keys, _U(shift), base, mask, table
        self.aside_keys, self.aside_rows = aside_keys, aside_rows

    @classmethod
    def build(cls, keys: np.ndarray, q_bits: int, n_ranks: int) -> _KeyTable | None:
        """The table of ``keys`` (uint64; ranks ``< n_ranks`` in the high ``q_bits`` bits),
        or ``None`` when two keys are equal."""
        shift = 64 - q_bits
        counts = np.bincount((keys >> _U(shift)).view(np.int64), minlength=n_ranks)
        # the power of two >= SLOTS_PER_KEY * count (frexp's exponent of x is x's bit length)
        bits = np.frexp(np.maximum(SLOTS_PER_KEY * counts - 1, 1).astype(np.float64))[1]
        size = np.left_shift(np.int64(1), bits.astype(np.int64))
        base = np.zeros(n_ranks, dtype=np.int64)
        np.cumsum(size[:-1], out=base[1:])
        mask = (size - 1).view(np.uint64)
        n = keys.size
        dtype = np.int32 if n < 2**31 - 1 else np.int64
        table = np.zeros(int(base[-1] + size[-1]) if n_ranks else 0, dtype=dtype)
        self = cls(keys, shift, base, mask, table, np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))
        slot = self._slots(keys)
        row = np.arange(1, n + 1, dtype=dtype)
        table[slot] = row  # (one of the rows of a shared slot is kept, whichever numpy writes last)
        aside = np.flatnonzero(table[slot] != row)
        if aside.size:
            a_keys, a_slot = keys[aside], slot[aside]
            if bool((keys[table[a_slot] - 1] == a_keys).any()):
                return None  # a key equal to its slot's row's
            order = np.argsort(a_keys)
            self.aside_keys, self.aside_rows = a_keys[order], aside[order]
            if bool((self.aside_keys[1:] == self.aside_keys[:-1]).any()):
                return None  # two equal keys, both kept aside
            table[a_slot] = -np.abs(table[a_slot])  # crowded
        return self

    def _slots(self, keys: np.ndarray) -> np.ndarray:
        """Each key's slot: its rank's region start plus its low bits."""
        rank = (keys >> self.shift).view(np.int64)
        slot = (keys & self.mask[rank]).view(np.int64)
        slot += self.base[rank]
        return slot

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The row of each of ``keys`` (``-1``: none), looked up on blocks of
        :data:`HASH_ROWS` keys whose arrays stay in the processor's cache."""
        out = np.empty(keys.size, dtype=np.int64)
        crowded: list[np.ndarray] = []
        for a in range(0, keys.size, HASH_ROWS):
            block = keys[a : a + HASH_ROWS]
            held = self.table[self._slots(block)].astype(np.int64)
            row = np.abs(held)
            row -= 1  # -1: an empty slot
            same = self.keys[np.maximum(row, 0)] == block
            same &= row >= 0
            out[a : a + HASH_ROWS] = np.where(same, row, -1)
            if self.aside_keys.size:
                crowded.append(np.flatnonzero((held < 0) & ~same) + a)
        if crowded:
            rest = np.concatenate(crowded)
            pos = np.searchsorted(self.aside_keys, keys[rest])
            np.minimum(pos, self.aside_keys.size - 1, out=pos)
            hit = self.aside_keys[pos] == keys[rest]
            out[rest[hit]] = self.aside_rows[pos[hit]]
        return out


def _repeats_in_rows(rows: np.ndarray, keys: np.ndarray) -> bool:
    """Whether some ``(q, d)`` row of ``rows`` (``-1`` padding) holds two equal keys."""
    if rows.size == 0:
        return False
    valid = rows >= 0
    mat = np.where(valid, keys[np.maximum(rows, 0)], _U(2**64 - 1))
    mat.sort(axis=1)
    # padding sorts last (a key equal to the filler is interchangeable with it)
    same = (mat[:, 1:] == mat[:, :-1]) & valid[:, 1:]
    return bool(same.any())


def _repeated_keys_in_equal_blocks(keys: np.ndarray, q: np.ndarray) -> bool | None:
    """Whether two rows share a (query, doc) key, when each query's rows are one block and
    every block is equally long (the usual run file: the same number of documents a
    query); ``None`` (not looked at) for any other layout. Equal keys have equal queries
    (the key's high bits), so within such blocks is everywhere: each block of ``keys`` is
    sorted in place (``keys`` is left sorted block by block) and neighbours compared, the
    same answer as :func:`_repeats_in_rows` on the ranked lists without their gather."""
    n = q.size
    if n < 2:
        return False if n else None
    heads = np.flatnonzero(q[1:] != q[:-1]) + 1
    width = int(heads[0]) if heads.size else n
    if n % width or heads.size != n // width - 1 or not (heads == np.arange(1, n // width) * width).all():
        return None
    if int(np.bincount(q[::width]).max()) > 1:  # (np.unique would import numpy.ma: 15 ms)
        return None  # a query in two blocks
    blocks = keys.reshape(n // width, width)
    blocks.sort(axis=1)
    return bool((blocks[:, 1:] == blocks[:, :-1]).any())


def _doc_key(words: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    def key(rows: np.ndarray) -> np.ndarray:
        w = words[rows]
        order = _lex_order(w)
        ordered = w[order]
        new = np.ones(len(rows), dtype=bool)
        new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
        rank = np.empty(len(rows), dtype=np.int64)
        rank[order] = np.cumsum(new) - 1
        return -rank  # descending id order

    return key


def label_batch_coded(
    qrels: CodedQrels, run: CodedRun, conventions: Conventions
) -> tuple[LabelBatch, np.ndarray, dict[str, int]] | None:
    """:func:`onlineeval.metrics.evaluate.label_batch` for byte-read files (``None``: see
    the module docstring)."""
    block_q, block_size, qrels_q, qnames = _query_blocks(run.query, qrels.query)
    judged_q = np.zeros(len(qnames), dtype=bool)
    judged_q[qrels_q] = True
    in_qrels = judged_q[block_q]  # (per block of the run's rows)
    # (not np.unique, which imports numpy.ma: 15-20 ms of the process)
    ignored = int(np.count_nonzero(np.bincount(block_q[~in_qrels], minlength=len(qnames))))
    if in_qrels.all():
        docs, scores = run.doc.words, run.score
    else:
        keep = np.repeat(in_qrels, block_size)
        docs, scores = run.doc.words[keep], run.score[keep]
        block_q, block_size = block_q[in_qrels], block_size[in_qrels]
        del keep
    rq = np.repeat(block_q, block_size)
    present_q = np.zeros(len(qnames), dtype=bool)
    present_q[block_q] = True
    used = np.flatnonzero(present_q)
    keep_groups = conventions.ties == "expected"
    if used.size == len(qnames):  # every query code is in the run: the codes are compact already
        compact_q = rq
    else:
        compact_q = (np.cumsum(present_q) - 1)[rq]
    del in_qrels
    missing = np.flatnonzero(judged_q & ~present_q)  # codes, in sorted name order
    filled = int(missing.size) if conventions.missing == "zero" else 0
    evaluated = used
    if filled:
        evaluated = np.concatenate([used, missing])
        fill_order = np.argsort(evaluated, kind="stable")
        evaluated = evaluated[fill_order]

    joined = _join(rq, docs, qrels_q, qrels.doc.words, qrels.grade)
    if joined is None:
        return None
    grades, run_keys = joined
    del joined
    repeated = _repeated_keys_in_equal_blocks(run_keys, rq)
    if repeated:
        return None  # a document listed twice for a query: the pandas path names the line
    if repeated is not None:
        del run_keys  # (checked: sorted in place, not needed any more)
    del rq
    full = layout_arrays(
        scores, _doc_key(docs), conventions.ties, grades, None, compact_q, qnames[used], with_groups=keep_groups
    )
    del compact_q, scores
    if repeated is None:
        if _repeats_in_rows(full.rows, run_keys):
            return None  # a document listed twice for a query: the pandas path names the line
        del run_keys
    depth = conventions.depth
    if conventions.ties == "expected" and depth is not None:
        check_whole_tie_groups(full.groups, full.queries, depth)
    rows, groups = full.rows, full.groups
    if depth is not None and rows.shape[1] > depth:
        rows, groups = rows[:, :depth], groups[:, :depth]
    if missing.size and conventions.missing == "error":
        shown = ", ".join(qnames[missing[:5]]) + (", ..." if missing.size > 5 else "")
        raise InputError(
            f"{missing.size} qrels queries are not in the run ({shown}); choose --missing zero "
            "(count them as 0, as trec_eval -c does) or --missing drop (in Python: missing='zero' or 'drop')",
            run.path,
        )
    del full
    if rows.size and int(rows.min()) >= 0:  # no padding (every list equally long): one gather
        codes = grades[rows]
    else:
        codes = np.full(rows.shape, EMPTY, dtype=np.int64)
        present = rows >= 0
        codes[present] = grades[rows[present]]
        del present
    del rows, grades
    judged = _judged_matrix(qrels_q, qrels.grade, evaluated, len(qnames))
    if filled:
        codes = np.concatenate([codes, np.full((filled, codes.shape[1]), EMPTY, dtype=np.int64)])[fill_order]
        if keep_groups:
            groups = np.concatenate([groups, np.full((filled, groups.shape[1]), -1, dtype=np.int64)])[fill_order]
    counts = {
        "filled_missing": filled,
        "dropped_missing": int(missing.size) if conventions.missing == "drop" else 0,
        "ignored_unjudged": ignored,
    }
    return LabelBatch(codes, judged, groups if keep_groups else None), qnames[evaluated], counts


def _judged_matrix(qrels_q: np.ndarray, grades: np.ndarray, evaluated: np.ndarray, n_codes: int) -> np.ndarray:
    """``(q, m)`` judged grades (>= 0) of each evaluated query code, sorted descending."""
    row_of = np.full(n_codes, -1, dtype=np.int64)
    row_of[evaluated] = np.arange(evaluated.size)
    return judged_rows(row_of[qrels_q], np.asarray(grades, dtype=np.int64), evaluated.size)


def evaluate_coded(
    qrels: CodedQrels,
    run: CodedRun,
    metrics: str | Iterable[str | Metric],
    conventions: Conventions,
    run_id: str | None = None,
) -> RunEvaluation | None:
    """:func:`onlineeval.metrics.evaluate.evaluate_run` for byte-read files; ``None`` when the
    pandas path must take over (a repeated pair, to be reported with its line; a hash
    collision). Same values, counts and errors as that function on the same files."""
    ms: Sequence[Metric] = tuple(parse_metrics(metrics))
    got = label_batch_coded(qrels, run, conventions)
    if got is None:
        return None
    batch, queries, raw = got
    top = int(np.max(qrels.grade, initial=0))
    return finish_evaluation(batch, queries, raw, ms, conventions, top, run_id or run.run_id)
