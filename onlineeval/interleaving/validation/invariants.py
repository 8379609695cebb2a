"""Exact invariants of an interleaved list, vectorised over impressions.

Rows are impressions: ``rankings`` ``(m, n, K)`` input lists (``-1`` padded), ``shown``
and ``teams`` ``(n, k)`` (``-1`` padded), ``page`` ``(n,)`` the number of documents the
page must show. ``structure``: documents come from an input list, no duplicates, no gap
(an empty slot followed by a document), team labels are ranker indices (and, for methods
whose team names the list that supplied the document, that list holds it), and exactly
``page`` documents are shown. ``prefix_balance`` (team-draft): on every prefix, while
every list still has an unshown document, team counts differ by at most one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["distinct_lengths", "prefix_violations", "structure_violations"]


#: above this many ``m * n * k * K`` comparisons :func:`_in_lists` switches from broadcasting to sorting
BROADCAST_CELLS = 4_000_000


def _in_lists(rankings: NDArray[np.int64], shown: NDArray[np.int64]) -> NDArray[np.bool_]:
    """``(m, n, k)``: does list ``i`` of the row hold the shown document.

    Small batches broadcast (``m * n * k * K`` booleans); large ones (long rankings, long
    pages) use sorted membership on ``(row, document)`` keys, linear memory in the input.
    """
    m, n, K = rankings.shape
    k = shown.shape[1]
    if m * n * k * K <= BROADCAST_CELLS:
        hit = (rankings[:, :, None, :] == shown[None, :, :, None]) & (shown[None, :, :, None] >= 0)
        return hit.any(axis=3)
    return _in_lists_sorted(rankings, shown)


def _in_lists_sorted(rankings: NDArray[np.int64], shown: NDArray[np.int64]) -> NDArray[np.bool_]:
    """:func:`_in_lists` by sorted membership: documents compacted to ``0..U-1``, keys ``row * U + doc``."""
    m, n, K = rankings.shape
    k = shown.shape[1]
    out = np.zeros((m, n, k), dtype=bool)
    if not n or not k:
        return out
    _, inv = np.unique(np.concatenate([rankings.ravel(), shown.ravel()]), return_inverse=True)
    inv = inv.astype(np.int64).ravel()
    u = int(inv.max()) + 1
    row = np.arange(n, dtype=np.int64)[:, None] * u
    skey = row + inv[m * n * K:].reshape(n, k)
    rk = inv[: m * n * K].reshape(m, n, K)
    for i in range(m):
        out[i] = np.isin(skey, (row + rk[i])[rankings[i] >= 0])
    return out & (shown >= 0)[None]


def repeated_slots(shown: NDArray[np.int64]) -> NDArray[np.bool_]:
    """``(n, k)``: the slot repeats a document shown earlier in its row (linear memory, a stable sort)."""
    order = np.argsort(shown, axis=1, kind="stable")
    s = np.take_along_axis(shown, order, axis=1)
    dup = np.zeros(shown.shape, dtype=bool)
    dup[:, 1:] = s[:, 1:] == s[:, :-1]
    out = np.zeros(shown.shape, dtype=bool)
    np.put_along_axis(out, order, dup, axis=1)
    return out


def distinct_lengths(rankings: NDArray[np.int64]) -> NDArray[np.int64]:
    """``(m, n)`` number of distinct documents per list (a repeated id counts once)."""
    s = np.sort(rankings, axis=2)
    new = s >= 0
    new[:, :, 1:] &= s[:, :, 1:] != s[:, :, :-1]
    return new.sum(axis=2)


def union_sizes(rankings: NDArray[np.int64]) -> NDArray[np.int64]:
    """``(n,)`` number of distinct documents over all lists of each row."""
    m, n, K = rankings.shape
    flat = np.sort(np.moveaxis(rankings, 0, 1).reshape(n, m * K), axis=1)
    new = flat >= 0
    new[:, 1:] &= flat[:, 1:] != flat[:, :-1]
    return new.sum(axis=1)


def structure_violations(rankings: NDArray[np.int64], shown: NDArray[np.int64], teams: NDArray[np.int64],
                         page: NDArray[np.int64], team_holds_doc: bool,
                         bad_length: NDArray[np.bool_] | None = None) -> list[str]:
    """Per row, ``""`` when the row keeps every structural invariant, else what it breaks first."""
    m, n, _ = rankings.shape
    valid = shown >= 0
    inl = _in_lists(rankings, shown)
    rows = np.arange(n)[:, None]
    label_ok = (teams >= 0) & (teams < m)
    safe_team = np.where(label_ok, teams, 0)
    holds = inl[safe_team, rows, np.arange(shown.shape[1])[None, :]]
    s = np.sort(shown, axis=1)
    problems = [
        (np.zeros(n, dtype=bool) if bad_length is None else bad_length,
         lambda r: "the shown list and the team labels differ in length"),
        ((~valid[:, :-1] & valid[:, 1:]).any(axis=1),
         lambda r: f"empty slot before a document in {shown[r].tolist()}"),
        (((s[:, 1:] == s[:, :-1]) & (s[:, 1:] >= 0)).any(axis=1),
         lambda r: f"duplicate in {shown[r][valid[r]].tolist()}"),
        ((valid & ~inl.any(axis=0)).any(axis=1),
         lambda r: f"document {shown[r][valid[r] & ~inl.any(axis=0)[r]][0]} is in no input list"),
        ((valid & ~label_ok).any(axis=1),
         lambda r: f"team label {teams[r][valid[r] & ~label_ok[r]][0]} is not a ranker index (0..{m - 1})"),
        ((~valid & (teams != -1)).any(axis=1),
         lambda r: f"team label on an empty slot: {teams[r].tolist()}"),
        ((valid & label_ok & ~holds).any(axis=1) if team_holds_doc else np.zeros(n, dtype=bool),
         lambda r: _holds_message(shown[r], teams[r], valid[r] & label_ok[r] & ~holds[r])),
        (valid.sum(axis=1) != page,
         lambda r: f"shown {int(valid[r].sum())} documents, expected {int(page[r])}"),
    ]
    out = [""] * n
    for mask, explain in problems:
        for r in np.flatnonzero(mask):
            if not out[r]:
                out[r] = explain(int(r))
    return out


def _holds_message(shown: NDArray[np.int64], teams: NDArray[np.int64], bad: NDArray[np.bool_]) -> str:
    j = int(np.flatnonzero(bad)[0])
    return f"document {int(shown[j])} credited to ranker {int(teams[j])} whose list does not hold it"


def prefix_violations(rankings: NDArray[np.int64], shown: NDArray[np.int64], teams: NDArray[np.int64]) -> list[str]:
    """Per row, ``""`` when every prefix is team-balanced while all lists have unshown documents."""
    m, n, _ = rankings.shape
    repeat = repeated_slots(shown)                                  # (n, k) a document shown earlier in the row
    inl = _in_lists(rankings, shown) & ~repeat[None]                  # (m, n, k), a repeated document once
    shown_before = np.cumsum(inl, axis=2) - inl                       # list-i documents among slots < j
    unused = shown_before < distinct_lengths(rankings)[:, :, None]    # list i has an unshown document at slot j
    active = np.cumprod(unused.all(axis=0), axis=1).astype(bool)      # (n, k) up to the first exhausted list
    valid = shown >= 0
    label_ok = (teams >= 0) & (teams < m)
    onehot = (teams[None, :, :] == np.arange(m)[:, None, None]) & valid[None]
    counts = np.cumsum(onehot, axis=2)                                # after placing slot j
    spread = counts.max(axis=0) - counts.min(axis=0)
    bad_label = active & valid & ~label_ok
    bad_spread = active & valid & (spread > 1)
    out = [""] * n
    for r in np.flatnonzero(bad_label.any(axis=1)):
        j = int(np.flatnonzero(bad_label[r])[0])
        out[r] = f"team label {int(teams[r, j])} at position {j + 1} is not a ranker index"
    for r in np.flatnonzero(bad_spread.any(axis=1)):
        if not out[r]:
            j = int(np.flatnonzero(bad_spread[r])[0])
            out[r] = (f"prefix {shown[r, : j + 1].tolist()} has team counts "
                      f"{counts[:, r, j].tolist()}")
    return out
