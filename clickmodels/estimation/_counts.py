"""Vectorised counting helpers over (query, document) pair codes and ranks."""

from __future__ import annotations

import numpy as np

from clickmodels.logs import ClickLog

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
    codes of the result equal those of ``log`` (the same set of pairs occurs).
    """
    key = np.concatenate([log.pairs.codes, log.clicks.astype(np.int64)], axis=1)
    _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    return log.take(first), counts.astype(float)
