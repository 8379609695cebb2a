"""Click logs: a typed record of search sessions (:class:`ClickLog`), built from sessions or arrays.

A :class:`ClickLog` holds ``n`` sessions (one result page each) as numpy arrays with one
row per session, in the layout of DESIGN.md "Data in flight": ``docs`` is ``(n, k)`` with
``-1`` for empty slots (shorter result lists are padded at the end), ``clicks`` is ``(n, k)``
bool. Queries and documents are stored as integer codes into the vocabularies
``query_vocab`` / ``doc_vocab`` (the ids as they appear in the file, as strings).

The file formats (``tsv``, ``jsonl``, ``yandex``, ``parquet``), their readers and writers and
:func:`read_click_log` are in :mod:`clickmodels.logs_files` (importable from here too).

Clicks are reduced to the per-slot indicator ``clicks`` (a document clicked twice counts
once) and ``click_order``: the 1-based rank of the slot's first click among the
session's distinct clicked slots (repeated clicks are dropped), ``0`` where not clicked.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from onlineeval.errors import InputError

__all__ = [
    "ClickLog",
    "PairIndex",
    "from_sessions",
    "from_arrays",
    "train_test_split",
]  # and the file formats' public names (below)

#: the names of :mod:`clickmodels.logs_files` (the file formats) importable from here, as before they moved there
_FILE_NAMES = frozenset(("LogFormat", "read_click_log", "read_tsv", "read_jsonl", "read_parquet", "read_yandex",
                         "write_tsv", "write_jsonl"))
__all__ += sorted(_FILE_NAMES)


def __getattr__(name: str) -> Any:
    """The file formats' names (:data:`_FILE_NAMES`) from :mod:`clickmodels.logs_files`, imported when first asked
    for (that module imports this one: a lazy import keeps either import order working)."""
    if name in _FILE_NAMES:
        from clickmodels import logs_files

        return getattr(logs_files, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: the largest (query vocabulary x document vocabulary) grid :attr:`ClickLog.pairs` indexes by a table whatever
#: the log's size (16M cells: 16 MB of flags and 128 MB of codes for a moment); larger grids when they have at
#: most 4 cells per shown slot
_DENSE_PAIRS = 1 << 24


@dataclass(frozen=True, eq=False)
class PairIndex:
    """The distinct (query, document) pairs of a log and a code for every slot.

    Attributes
    ----------
    codes:
        ``(n, k)`` int64, the pair code of each slot, ``-1`` for empty slots.
    query:
        ``(m,)`` query code of each pair (into the log's ``query_vocab``).
    doc:
        ``(m,)`` document code of each pair (into the log's ``doc_vocab``).
    """

    codes: np.ndarray
    query: np.ndarray
    doc: np.ndarray

    @property
    def n_pairs(self) -> int:
        """Number of distinct pairs ``m``."""
        return int(self.query.shape[0])


@dataclass(frozen=True, eq=False)
class ClickLog:
    """A batch of logged search sessions, one row per session (one result page).

    Attributes
    ----------
    session_ids:
        ``(n,)`` str, the session id of each row.
    query:
        ``(n,)`` int64 code into ``query_vocab``.
    docs:
        ``(n, k)`` int64 code into ``doc_vocab``; ``-1`` marks an empty slot (only at the
        end of a row).
    clicks:
        ``(n, k)`` bool, whether the slot was clicked (at least once).
    click_order:
        ``(n, k)`` int16, 1-based rank of the slot's first click among the session's
        distinct clicked slots, ``0`` when not clicked.
    query_vocab, doc_vocab:
        ``(n_queries,)`` / ``(n_docs,)`` str arrays, the original ids.
    source:
        Where the log was read from (for messages), ``None`` for in-memory logs.
    n_dropped_clicks:
        Clicks ignored while reading (Yandex format: clicked id not on the page).
    """

    session_ids: np.ndarray
    query: np.ndarray
    docs: np.ndarray
    clicks: np.ndarray
    click_order: np.ndarray
    query_vocab: np.ndarray
    doc_vocab: np.ndarray
    source: str | None = None
    n_dropped_clicks: int = 0

    def __post_init__(self) -> None:
        n = self.query.shape[0]
        if self.docs.ndim != 2 or self.docs.shape[0] != n:
            raise InputError(f"docs must have shape (n, k) with n={n}, got {self.docs.shape}", self.source)
        for name in ("clicks", "click_order"):
            if getattr(self, name).shape != self.docs.shape:
                raise InputError(
                    f"{name} must have the shape of docs {self.docs.shape}, got {getattr(self, name).shape}",
                    self.source,
                )
        if self.session_ids.shape != (n,):
            raise InputError(f"session_ids must have shape ({n},)", self.source)
        empty = self.docs < 0
        if np.any(self.clicks & empty):
            raise InputError("a click on an empty slot", self.source)
        if self.docs.shape[1] > 1 and np.any(empty[:, :-1] & ~empty[:, 1:]):
            raise InputError("empty slots must be at the end of a result list", self.source)
        if n and (self.query.min() < 0 or self.query.max() >= len(self.query_vocab)):
            raise InputError("query code outside the query vocabulary", self.source)
        if self.docs.size and self.docs.max() >= len(self.doc_vocab):
            raise InputError("document code outside the document vocabulary", self.source)

    def dropped_note(self, path: object) -> str:
        """The line reporting the clicks a Yandex-format reader ignored (``""`` when none), naming ``path``."""
        n = self.n_dropped_clicks
        if not n:
            return ""
        return (f"{path}: ignored {n:,} click{'s' if n != 1 else ''} on documents not on the page (Yandex format: "
                "such clicks are dropped, as documented for that data; a truncated last session shows up here)")

    @property
    def n_sessions(self) -> int:
        """Number of sessions ``n``."""
        return int(self.query.shape[0])

    @property
    def depth(self) -> int:
        """Number of slots per row ``k``."""
        return int(self.docs.shape[1])

    @property
    def shown(self) -> np.ndarray:
        """``(n, k)`` bool, slots that hold a document."""
        return self.docs >= 0

    @cached_property
    def last_click(self) -> np.ndarray:
        """``(n,)`` int64, 0-based rank of the lowest clicked slot, ``-1`` without clicks."""
        k = self.depth
        rev = self.clicks[:, ::-1]
        has = rev.any(axis=1)
        return np.where(has, k - 1 - rev.argmax(axis=1), -1).astype(np.int64)

    @cached_property
    def first_click(self) -> np.ndarray:
        """``(n,)`` int64, 0-based rank of the highest clicked slot, ``-1`` without clicks."""
        has = self.clicks.any(axis=1)
        return np.where(has, self.clicks.argmax(axis=1), -1).astype(np.int64)

    @cached_property
    def previous_click(self) -> np.ndarray:
        """``(n, k)`` int64, 0-based rank of the closest click above each slot, ``-1`` if none."""
        n, k = self.clicks.shape
        ranks = np.where(self.clicks, np.arange(k)[None, :], -1)
        running = np.maximum.accumulate(ranks, axis=1)
        prev = np.full((n, k), -1, dtype=np.int64)
        prev[:, 1:] = running[:, :-1]
        return prev

    @cached_property
    def pairs(self) -> PairIndex:
        """The (query, document) pair index of this log (computed once): the pairs in ascending order of
        ``query * n_docs + doc``, each slot's code its pair's position. Where that grid is at most
        :data:`_DENSE_PAIRS` cells or 4 per shown slot, by a table of the grid (one pass: 0.43 s against 3.5 s
        for ``np.unique(..., return_inverse=True)`` on 10^7 slots, the same codes)."""
        n_docs = max(len(self.doc_vocab), 1)
        key = self.query[:, None].astype(np.int64) * n_docs + self.docs
        shown = self.docs >= 0
        keys = key[shown]
        grid = max(len(self.query_vocab), 1) * n_docs
        if keys.size and grid <= max(_DENSE_PAIRS, 4 * keys.size):
            present = np.zeros(grid, dtype=bool)
            present[keys] = True
            uniq = np.flatnonzero(present)
            table = np.cumsum(present, dtype=np.int64) - 1
            inv = table[keys]
        else:
            uniq, inv = np.unique(keys, return_inverse=True)
        codes = np.full(self.docs.shape, -1, dtype=np.int64)
        codes[shown] = inv
        return PairIndex(codes=codes, query=uniq // n_docs, doc=uniq % n_docs)

    def with_pairs(self, pairs: PairIndex) -> ClickLog:
        """This log with its pair index set to ``pairs`` (which must be the one :attr:`pairs` computes: the
        caller's, e.g. :func:`~clickmodels.estimation._counts.compress` keeping every pair of the log it
        took the rows of); returns ``self``."""
        self.__dict__["pairs"] = pairs
        return self

    def take(self, rows: np.ndarray) -> ClickLog:
        """A new log with the selected rows (indices or a boolean mask); vocabularies kept."""
        rows = np.asarray(rows)
        # indexing by an index or mask array already copies (a second .copy() cost 0.9 s of a 10^6-session compress)
        return ClickLog(
            session_ids=self.session_ids[rows],
            query=self.query[rows],
            docs=self.docs[rows],
            clicks=self.clicks[rows],
            click_order=self.click_order[rows],
            query_vocab=self.query_vocab,
            doc_vocab=self.doc_vocab,
            source=self.source,
            n_dropped_clicks=0,
        )

    def recode_like(self, other: ClickLog) -> ClickLog:
        """The same sessions with codes into ``other``'s vocabularies.

        The new vocabularies start with ``other.query_vocab`` / ``other.doc_vocab`` (same
        codes) followed by the ids only this log has, so tables keyed by ``other``'s codes
        (e.g. a model fitted on ``other``) apply directly and unseen ids match nothing.
        """
        qmap, qvocab = _extend_vocab(other.query_vocab, self.query_vocab)
        dmap, dvocab = _extend_vocab(other.doc_vocab, self.doc_vocab)
        docs = np.where(self.docs >= 0, dmap[np.maximum(self.docs, 0)], -1)
        return ClickLog(
            session_ids=self.session_ids.copy(),
            query=qmap[self.query],
            docs=docs,
            clicks=self.clicks.copy(),
            click_order=self.click_order.copy(),
            query_vocab=qvocab,
            doc_vocab=dvocab,
            source=self.source,
            n_dropped_clicks=self.n_dropped_clicks,
        )

    def impressions(self) -> Any:
        """The sessions as :class:`clickmodels.Impressions` (query and document codes).

        Use with a model whose :class:`~clickmodels.ByQueryDoc` tables are keyed by this
        log's codes (see :meth:`recode_like` and :func:`clickmodels.estimation.fit`).
        """
        from clickmodels.inputs import Impressions

        return Impressions(query=self.query.copy(), docs=self.docs.copy())

    def query_ids(self) -> np.ndarray:
        """``(n,)`` str, the original query id of each session."""
        return self.query_vocab[self.query]

    def doc_ids(self) -> np.ndarray:
        """``(n, k)`` str, original document ids, ``""`` for empty slots."""
        vocab = np.append(self.doc_vocab, "").astype(str)
        return vocab[np.where(self.docs >= 0, self.docs, len(self.doc_vocab))]


def from_arrays(
    query: np.ndarray,
    docs: np.ndarray,
    clicks: np.ndarray,
    *,
    session_ids: np.ndarray | None = None,
    query_vocab: np.ndarray | None = None,
    doc_vocab: np.ndarray | None = None,
) -> ClickLog:
    """A :class:`ClickLog` from integer arrays (e.g. simulated clicks); inputs are copied.

    Parameters
    ----------
    query:
        ``(n,)`` non-negative query codes.
    docs:
        ``(n, k)`` non-negative document codes, ``-1`` for empty slots (at the end of rows).
    clicks:
        ``(n, k)`` bool (or 0/1). Click order is taken as top to bottom.
    session_ids, query_vocab, doc_vocab:
        Default to ``0..n-1`` and the codes themselves as strings.
    """
    q = np.array(query, dtype=np.int64).reshape(-1)
    d = np.array(docs, dtype=np.int64)
    c = np.asarray(clicks)
    if d.ndim != 2 or c.shape != d.shape or q.shape != (d.shape[0],):
        raise InputError(f"need query (n,), docs and clicks (n, k); got {q.shape}, {d.shape}, {c.shape}")
    if c.dtype != np.bool_:
        if not np.all((c == 0) | (c == 1)):
            raise InputError("clicks must be bool or 0/1")
    c = c.astype(bool)
    if q.size and q.min() < 0 or d.size and d.min() < -1:
        raise InputError("query codes must be >= 0 and document codes >= -1")
    qv = (np.arange(int(q.max()) + 1 if q.size else 0).astype(str) if query_vocab is None
          else np.asarray(query_vocab).astype(str))
    dv = (np.arange(int(d.max()) + 1 if d.size else 0).astype(str) if doc_vocab is None
          else np.asarray(doc_vocab).astype(str))
    sid = np.arange(q.size).astype(str) if session_ids is None else np.asarray(session_ids).astype(str)
    order = (np.cumsum(c, axis=1) * c).astype(np.int16)
    return ClickLog(sid, q, d, c, order, qv, dv)


def _extend_vocab(base: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map ``ids`` into ``base`` extended by the ids it lacks; returns (map, new vocab)."""
    base = base.astype(str)
    ids = ids.astype(str)
    order = np.argsort(base)
    sorted_base = base[order]
    if sorted_base.size:
        pos = np.minimum(np.searchsorted(sorted_base, ids), sorted_base.size - 1)
        found = sorted_base[pos] == ids
        mapping = np.where(found, order[pos], -1)
    else:
        found = np.zeros(ids.shape, dtype=bool)
        mapping = np.full(ids.shape, -1)
    n_new = int((~found).sum())
    mapping = mapping.astype(np.int64)
    mapping[~found] = base.size + np.arange(n_new)
    return mapping, np.concatenate([base, ids[~found]])


def from_sessions(
    sessions: list[tuple[str, str, list[str], list[str]]],
    *,
    source: str | None = None,
    lines: list[int] | None = None,
    strict_clicks: bool = True,
    flags_hint: str = "",
) -> ClickLog:
    """Build a :class:`ClickLog` from ``(session, query, shown docs, clicked docs in order)``.

    Parameters
    ----------
    sessions:
        One tuple per session; ids are strings.
    source, lines:
        File name and the 1-based line of each session, used in error messages.
    strict_clicks:
        If true, a click on a document not on the page raises :class:`InputError`;
        otherwise it is dropped and counted in ``n_dropped_clicks``.
    flags_hint:
        Added to the message when a refused click list looks like 0/1 flags (one ``0``/``1``
        per shown document), after "clicks are the clicked documents' ids, not 0/1 flags".
    """
    n = len(sessions)
    if n == 0:
        raise InputError("the click log holds no session", source)
    for i, s in enumerate(sessions):
        if not s[2]:
            raise InputError("a session must show at least one document", source, None if lines is None else lines[i])
    k = max(len(s[2]) for s in sessions)
    qmap: dict[str, int] = {}
    dmap: dict[str, int] = {}
    query = np.empty(n, dtype=np.int64)
    docs = np.full((n, k), -1, dtype=np.int64)
    order = np.zeros((n, k), dtype=np.int16)
    sids: list[str] = []
    dropped = 0
    for i, (sid, q, shown, clicked) in enumerate(sessions):
        line = None if lines is None else lines[i]
        sids.append(sid)
        query[i] = qmap.setdefault(q, len(qmap))
        pos: dict[str, int] = {}
        for r, d in enumerate(shown):
            if d == "":
                raise InputError(f"empty document id at rank {r + 1}", source, line)
            if d in pos:
                raise InputError(f"document {d!r} shown twice (ranks {pos[d] + 1} and {r + 1})", source, line)
            pos[d] = r
            docs[i, r] = dmap.setdefault(d, len(dmap))
        t = 0
        for d in clicked:
            r = pos.get(d)
            if r is None:
                if strict_clicks:
                    flags = len(clicked) == len(shown) and set(clicked) <= {"0", "1"}
                    hint = f"; clicks are the clicked documents' ids, not 0/1 flags{flags_hint}" if flags else ""
                    raise InputError(f"clicked document {d!r} is not among the shown documents{hint}", source, line)
                dropped += 1
                continue
            if order[i, r] == 0:
                t += 1
                order[i, r] = t
    return ClickLog(
        session_ids=np.asarray(sids, dtype=str),
        query=query,
        docs=docs,
        clicks=order > 0,
        click_order=order,
        query_vocab=np.asarray(list(qmap), dtype=str),
        doc_vocab=np.asarray(list(dmap), dtype=str),
        source=source,
        n_dropped_clicks=dropped,
    )


def train_test_split(
    log: ClickLog, test_fraction: float, rng: np.random.Generator
) -> tuple[ClickLog, ClickLog]:
    """Split sessions uniformly at random into a training and a test log.

    Parameters
    ----------
    log:
        The log to split (not modified).
    test_fraction:
        Share of sessions in the test log, in ``(0, 1)``; the test log gets
        ``round(test_fraction * n)`` sessions.
    rng:
        Source of randomness.
    """
    if not 0.0 < test_fraction < 1.0:
        raise InputError(f"test_fraction must be in (0, 1), got {test_fraction}")
    n = log.n_sessions
    n_test = int(round(test_fraction * n))
    if n_test == 0 or n_test == n:
        raise InputError(f"cannot split {n} session{'s' if n != 1 else ''} with test_fraction={test_fraction}: "
                         f"{n_test} would be held out (at least 1, and at least 1 kept for fitting); give more "
                         "sessions or a held-out log (--test-log)", log.source)
    perm = rng.permutation(n)
    test = np.zeros(n, dtype=bool)
    test[perm[:n_test]] = True
    return log.take(~test), log.take(test)
