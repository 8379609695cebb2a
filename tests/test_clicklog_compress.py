"""ClickLog.pairs (a table of the (query, document) grid where it is small enough, else np.unique) and compress
(rows grouped by a 64-bit hash, checked row by row, np.unique(axis=0) on a collision) against np.unique itself."""

from __future__ import annotations

import numpy as np
import pytest

from clickmodels import logs
from clickmodels.estimation import _counts
from clickmodels.logs import from_arrays


def _log(seed: int, n: int = 3000, k: int = 5, docs: int = 6, queries: int = 4):
    """Few distinct lists and clicks, so rows repeat; some lists cut short (empty lower slots)."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, queries, n)
    start = rng.integers(0, docs - k + 1, n)  # a window of the query's documents: few distinct lists
    ids = q[:, None] * docs + start[:, None] + np.arange(k)[None, :]
    clicks = rng.random((n, k)) < 0.2
    depth = rng.integers(3, k + 1, n)
    cut = np.arange(k)[None, :] >= depth[:, None]
    return from_arrays(q, np.where(cut, -1, ids), clicks & ~cut)


def _reference_pairs(log):
    n_docs = max(len(log.doc_vocab), 1)
    key = log.query[:, None].astype(np.int64) * n_docs + log.docs
    shown = log.docs >= 0
    uniq, inv = np.unique(key[shown], return_inverse=True)
    codes = np.full(log.docs.shape, -1, dtype=np.int64)
    codes[shown] = inv
    return codes, uniq // n_docs, uniq % n_docs


@pytest.mark.parametrize("dense", [True, False])
def test_pairs_equal_np_unique(dense, monkeypatch):
    log = _log(1) if dense else _log(1, n=300, docs=40, queries=150)
    grid = len(log.query_vocab) * len(log.doc_vocab)
    if not dense:  # a grid over 4 cells per shown slot and above the limit: np.unique's path
        monkeypatch.setattr(logs, "_DENSE_PAIRS", 0)
        assert grid > 4 * int((log.docs >= 0).sum())
    else:
        assert grid <= logs._DENSE_PAIRS
    codes, query, doc = _reference_pairs(log)
    p = log.pairs
    np.testing.assert_array_equal(p.codes, codes)
    np.testing.assert_array_equal(p.query, query)
    np.testing.assert_array_equal(p.doc, doc)


def _rows_with_counts(log, counts):
    key = np.concatenate([log.pairs.codes, log.clicks.astype(np.int64)], axis=1)
    return sorted((tuple(row), float(c)) for row, c in zip(key.tolist(), counts))


@pytest.mark.parametrize("collide", [False, True])
def test_compress_equals_np_unique_rows(collide, monkeypatch):
    log = _log(2)
    key = np.concatenate([log.pairs.codes, log.clicks.astype(np.int64)], axis=1)
    uniq, counts = np.unique(key, axis=0, return_counts=True)
    assert uniq.shape[0] < log.n_sessions  # rows repeat
    if collide:  # every row one hash: the exact fallback
        monkeypatch.setattr(_counts, "_row_hash", lambda k: np.zeros(k.shape[0], dtype=np.uint64))
    out, weight = _counts.compress(log)
    assert weight.sum() == log.n_sessions
    assert _rows_with_counts(out, weight) == sorted((tuple(r), float(c)) for r, c in zip(uniq.tolist(), counts))
    # the carried pair index is the one the compressed log would compute
    codes, query, doc = _reference_pairs(out)
    np.testing.assert_array_equal(out.pairs.codes, codes)
    np.testing.assert_array_equal(out.pairs.query, query)
