"""Vectorised counting helpers over (query, document) pair codes and ranks."""

from __future__ import annotations

import numpy as np

from clickmodels.logs import ClickLog, PairIndex

__all__ = ["pair_sum", "rank_sum", "ranks_grid", "compress"]


def pair_sum(log: ClickLog, weights: np.ndarray | float, mask: np.ndarray | None = None) -> np.ndarray:
    """``(m,)`` sum of ``weights`` over the slots of each pair (shown slots, and ``mask``)."""
    codes = log.pairs.codes
    sel = codes >= 0 if mask is None else (codes >= 0) & mask
    w = np.broadcast_to(np.asarray(weights, dtype=float), codes.shape)[sel]
    return np.bincount(codes[sel], weights=w, minlength=log.pairs.n_pairs)


def rank_sum(log: ClickLog, weights: np.ndarray | float, mask: np.ndarray | None = None) -> np.ndarray:
    """``(k,)`` sum of ``weights`` per rank over shown slots (and ``mask``)."""
    sel = log.shown if mask is None else log.shown & mask
    w = np.broadcast_to(np.asarray(weights, dtype=float), sel.shape)
    return np.where(sel, w, 0.0).sum(axis=0)


def ranks_grid(log: ClickLog) -> np.ndarray:
    """``(1, k)`` 0-based ranks, for broadcasting against ``(n, k)`` arrays."""
    return np.arange(log.depth)[None, :]


def compress(log: ClickLog) -> tuple[ClickLog, np.ndarray]:
    """Identical sessions merged: ``(log of distinct rows, (n_distinct,) multiplicities)``.

    Rows are identical when they show the same (query, document) pairs at every rank and
    have the same clicks; EM on the distinct rows weighted by their multiplicities is
    exactly EM on the full log (the E-step of a row depends only on that row). The pair
    codes of the result equal those of ``log`` (the same set of pairs occurs), and its
    pair index is ``log``'s (not computed again).

    The rows are grouped by a 64-bit hash of each row (one sort of ``n`` integers), then every row is compared
    with its group's first row; a collision (two different rows with one hash) falls back to
    ``np.unique(axis=0)``, whose row-wise sort took 7.8 of a 10^6-session DCM fit's 12.5 s. The distinct rows come
    in the order of their hashes (the fits depend on the order only through rounding).
    """
    codes = log.pairs.codes
    key = np.concatenate([codes, _click_bits(log.clicks)], axis=1)
    first, counts = _hash_groups(key)
    if first is None:
        _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    out = log.take(first).with_pairs(PairIndex(codes=codes[first], query=log.pairs.query, doc=log.pairs.doc))
    return out, counts.astype(float)


def _click_bits(clicks: np.ndarray) -> np.ndarray:
    """The click columns of the rows' key: ``(n, 1)`` the clicks as the bits of one int64, rank 0 the highest
    (the rows' lexicographic order kept: np.unique's fallback order unchanged), for up to 62 ranks; else ``(n, k)``
    0/1 columns. One column instead of ``k`` halves a top-10 log's hashing and row comparisons."""
    n, k = clicks.shape
    if k > 62:
        return clicks.astype(np.int64)
    bits = np.zeros(n, dtype=np.int64)
    for r in range(k):
        bits <<= 1
        bits |= clicks[:, r]
    return bits[:, None]


_MIX = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)


def _row_hash(key: np.ndarray) -> np.ndarray:
    """``(n,)`` uint64: a multiply-xorshift hash of each row of the int64 ``key`` (wrapping arithmetic)."""
    h = np.full(key.shape[0], np.uint64(_MIX[0]))
    for j in range(key.shape[1]):
        h ^= key[:, j].astype(np.uint64) + np.uint64(_MIX[0]) + (h << np.uint64(6)) + (h >> np.uint64(2))
        h *= np.uint64(_MIX[1 + j % 2])
        h ^= h >> np.uint64(31)
    return h


def _hash_groups(key: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """``(first, counts)``: each distinct row's first index and multiplicity, by :func:`_row_hash`; ``(None,
    ...)`` when two different rows share a hash."""
    n = key.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = _row_hash(key)
    _, first, inverse, counts = np.unique(h, return_index=True, return_inverse=True, return_counts=True)
    rep = first[inverse]
    for j in range(key.shape[1]):  # exact: every row equal to its group's first row, column by column
        col = key[:, j]
        if not np.array_equal(col[rep], col):
            return None, counts
    return first, counts
