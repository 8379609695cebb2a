"""Compiled per-batch kernels of the simulator (numba).

A batch step of a design is about 1,500 impressions; in NumPy it is some twenty calls of 2 to 20 us on
arrays of that size, so its cost is call overhead, not arithmetic. These kernels do the same work in one
compiled loop over the impressions. They never draw random numbers: the callers draw them with NumPy's
``Generator`` in the same calls and order as the NumPy code they replace (the designs' streams are
unchanged), and the kernels only do the comparisons, table lookups, running ANDs, bit masks, outcomes and
per-user additions. Every number equals the NumPy path's bit for bit (tests keep the NumPy code as reference:
``tests/test_simulation_kernels.py``); the only float additions are of exact halves and integers, whose sums do
not depend on the order.

This module imports numba (about 0.35 s); it is imported lazily by the code that runs batches
(:meth:`simulations.users.UserModels.sample`, the interleaving design's batch step), never by ``onlineeval power``,
``evaluate`` or ``--help``. The kernels are compiled on first call (``cache=True``: once per machine and
argument types, into ``__pycache__`` next to this file, or numba's user cache directory when that is read-only;
``NUMBA_CACHE_DIR`` moves it); a process then loads them from the cache on its first call. Measured on the 2-core
machine (``benchmarks/bench_simulation.py --compile-cost``): compiling them for a replicate of ``configs/ab.yaml``
4.4 s of CPU (9.1 s with :mod:`simulations.stat_kernels`'s), loading them from the cache about 0.3-0.4 s per process
(numba's code generator starting; 0.6 s with the statistics), once per process (sweep workers keep them for every
task: this module is in ``simulations.executors.TASK_MODULES``).
``NUMBA_DISABLE_JIT=1`` runs them as plain Python (slow, same numbers).

Conventions (:class:`simulations.users._GradeChains`): the threshold tables ``thresholds = (t1, t2, t3)`` of the
user types' click chains, one block of ``k * width`` entries per type, rank ``r`` and grade ``g`` of type ``t`` at
``t * k * width + r * width + g + 1`` (an empty slot, grade ``-1``, at column 0). Uniforms: for each type in turn,
for each block of ``b <= BLOCK`` of its rows (ascending), ``k * b`` doubles in rank-major order (what
``rng.random((k, b))`` gives).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["row_counts", "grade_clicks", "interleaving_step", "ab_step", "add_ones", "cdf_draw", "cdf_tables",
           "shown_row_counts"]

_jit = numba.njit(cache=True, nogil=True)


@_jit
def add_ones(sums, user):
    """``sums[user[i]] += 1.0`` for ``i = 0 .. n - 1`` in order: ``np.add.at(sums, user, 1.0)`` (every design's
    impression count per user, every partial sum an exact integer) without its per-call cost (about 15 us a
    batch of 1,500 impressions, 8 designs a batch)."""
    for i in range(user.shape[0]):
        sums[user[i]] += 1.0


@_jit
def cdf_tables(cdf, scale, m, lo, width):
    """:class:`simulations.traffic.CdfDraw`'s bucket tables of ``cdf`` (finite, >= 0) into ``lo`` (int64, ``m + 1``)
    and ``width`` (int8, ``m + 1``), both all zeros on entry: with ``x = cdf * scale`` (exact: a power of two),
    ``lo[j]`` the entries with ``ceil(x) <= j`` (``ceil(x)`` clipped to ``m``), ``width[j]`` the entries with
    ``j < x < j + 1`` (``j < m``), at most 2, and ``width[m] = 2``. One pass over the CDF, one over the buckets."""
    for i in range(cdf.shape[0]):
        x = cdf[i] * scale
        down = np.floor(x)
        lo[np.int64(min(np.ceil(x), m))] += 1  # the counts, summed up below
        if down != x and down < m:
            j = np.int64(down)
            width[j] = min(width[j] + 1, 2)
    width[m] = 2  # u >= 1 (not drawn by rng.random): searched
    for j in range(1, m + 1):
        lo[j] += lo[j - 1]


@_jit
def cdf_draw(u, scale, top, lo, width, cdf, out):
    """:class:`simulations.traffic.CdfDraw`'s indices of uniforms ``u >= 0`` into ``out`` (intp): the bucket
    ``j = min(int(u * scale), top)``, ``lo[j]`` plus one if the bucket holds one CDF entry and it is ``<= u``, a
    binary search (the number of entries ``<= u``) where it holds two or more, clipped to the last category.
    The CDF entry is read only where the bucket holds one: with the tables out of cache (as in a replicate, between
    the designs' steps) 45 us for 1,500 uniforms on 20,000 users' CDF against 70 us branch-free (always read) and
    105 us for the former NumPy passes; an int32 ``lo`` made no difference."""
    last = cdf.shape[0] - 1
    for i in range(u.shape[0]):
        x = u[i]
        j = top if x >= 1.0 else np.intp(x * scale)  # u * scale < top below 1 (no cast of a large double)
        idx = lo[j]
        w = width[j]
        if w > 1:
            a, b = 0, cdf.shape[0]  # the first entry > x (numpy.searchsorted(cdf, x, side="right"))
            while a < b:
                mid = (a + b) >> 1
                if cdf[mid] <= x:
                    a = mid + 1
                else:
                    b = mid
            idx = a
        elif w == 1 and cdf[min(idx, last)] <= x:
            idx += 1
        out[i] = min(idx, last)


@_jit
def row_counts(labels, user_type, n, n_types, grades):
    """``(n_types + 1,)`` int64: the number of the ``n`` rows of each user type, then a count that is not 0 when
    the kernels cannot sample some row (a user type outside ``0 .. n_types - 1``, or a label of ``labels`` outside
    ``-1 .. grades - 1``). With one type every row is of type 0 (whatever ``user_type`` says); with several,
    ``user_type`` must have ``n`` entries (else every row counts as unknown). ``labels`` may have no rows (only
    the types are counted)."""
    counts = np.zeros(n_types + 1, dtype=np.int64)
    if n_types == 1:
        counts[0] = n
    elif user_type.shape[0] != n:
        counts[n_types] = n
    else:
        for i in range(n):
            t = user_type[i]
            if t >= 0 and t < n_types:
                counts[t] += 1
            else:
                counts[n_types] += 1
    if labels.size:  # the smallest and largest label (a reduction the compiler vectorises)
        lo = hi = labels[0, 0]
        for i in range(labels.shape[0]):
            for r in range(labels.shape[1]):
                g = labels[i, r]
                lo = min(lo, g)
                hi = max(hi, g)
        if lo < -1 or hi >= grades:
            counts[n_types] += 1
    return counts


@_jit
def shown_row_counts(shown, m, user_type, n_types):
    """:func:`row_counts` of the rows of the lists ``shown`` ``(n, k)`` for a grades table of ``m`` columns whose
    every grade the chains know (so only the types are counted, as for labels with no rows), with a row the kernels
    cannot sample counted where a document is past the last column (where :func:`simulations.world.shown_labels`
    raises its ``IndexError``: the caller then takes the general path, which raises it)."""
    n = shown.shape[0]
    counts = row_counts(np.empty((0, 0), dtype=np.int8), user_type, n, n_types, 0)
    flat = shown.reshape(-1)  # one flat loop (a reduction the compiler vectorises; rows of k slots do not)
    past = 0
    for i in range(flat.shape[0]):
        past |= np.int64(flat[i] >= m)
    if past:
        counts[n_types] += 1
    return counts


@_jit
def _type_order(user_type, counts, n):
    """The ``n`` rows ordered by type, ascending within a type (the order in which the uniforms are drawn)."""
    n_types = counts.shape[0] - 1
    order = np.empty(n, dtype=np.int64)
    if n_types == 1:
        for i in range(n):
            order[i] = i
        return order
    at = np.zeros(n_types, dtype=np.int64)
    for t in range(1, n_types):
        at[t] = at[t - 1] + counts[t - 1]
    for i in range(n):
        t = user_type[i]
        order[at[t]] = i
        at[t] += 1
    return order


@_jit
def _sample(grades, order, counts, u, thresholds, width, independent, use_t1, use_t3, block, out):
    """Clicks ``out`` ``(n, k)`` of the rows with grades ``grades`` ``(n, k)`` in ``order`` (:func:`_type_order`).
    For each type, for each block of ``b <= block`` of its rows, rank by rank (the uniform of the block's row ``j``
    at rank ``r`` is the block's ``r * b + j``-th): the chain's comparisons of :meth:`_GradeChains._block`, click iff
    ``u < t2``; the user goes on iff not clicked or ``u < t1``, and clicked or ``u < t3`` (an independent-click type
    always goes on); a rank's click counts iff the user went on at every rank above. No branch on the draws: the
    rows of a block are independent iterations of the inner loop."""
    n, k = grades.shape
    n_types = counts.shape[0] - 1
    alive = np.empty(min(block, n), dtype=np.uint8)
    t1v, t2v, t3v = thresholds[0], thresholds[1], thresholds[2]
    at_u = 0
    lo = 0
    for t in range(n_types):
        size = counts[t]
        offset = t * k * width + 1
        go_on = np.uint8(1 if independent[t] else 0)
        for first in range(0, size, block):
            b = min(block, size - first)
            rows = order[lo + first:lo + first + b]
            alive[:b] = 1
            for r in range(k):
                ur = u[at_u + r * b:at_u + (r + 1) * b]
                base = offset + r * width
                for j in range(b):
                    i = rows[j]
                    x = ur[j]
                    idx = np.uint64(base + np.int64(grades[i, r]))
                    c = np.uint8(x < t2v[idx])
                    a = alive[j]
                    out[i, r] = (c & a) != 0
                    go = np.uint8(1) - c
                    if use_t1:
                        go |= np.uint8(x < t1v[idx])
                    if use_t3:
                        go &= c | np.uint8(x < t3v[idx])
                    alive[j] = a & (go | go_on)
            at_u += k * b
        lo += size


@_jit
def grade_clicks(labels, user_type, counts, u, thresholds, width, independent, use_t1, use_t3, block, out):
    """Clicks ``out`` ``(n, k)`` bool of the rows ``labels`` ``(n, k)`` (grades, ``-1`` empty) of users of types
    ``user_type`` (``counts``: :func:`row_counts`, which must have found every row samplable), from the
    uniforms ``u`` drawn type by type and block by block of ``block`` rows."""
    order = _type_order(user_type, counts, labels.shape[0])
    _sample(labels, order, counts, u, thresholds, width, independent, use_t1, use_t3, block, out)


@_jit
def _row_bits(clicks, i):
    """Row ``i``'s clicked slots as a bit mask (bit ``r`` = slot ``r``)."""
    bits = 0
    for r in range(clicks.shape[1]):
        if clicks[i, r]:
            bits |= 1 << r
    return bits


@_jit
def interleaving_step(coins, coin_step, half, combos, query, grades, other, null_labels, valid,
                      user_type, counts, u, thresholds, width, independent, use_t1, use_t3, block,
                      balanced, team_bits, valid_bits, kappa, n_set, highest, user, num, compared, square):
    """One batch step of a two-ranker team-draft or balanced interleaving design with prefix credit on a
    :class:`~simulations.designs.interleaving.DrawTable` of lists of ``k <= 16`` slots: each impression's table
    row from its coins and query (:meth:`DrawTable.draw_keys`), its shown grades (the table's, or under the null
    user the grades of ranker A's list of the query ``other`` at the table row's filled slots, ``valid``), its
    clicks (:func:`grade_clicks`), their bit mask, the outcome (:meth:`DrawTable.outcome_bits`) and the per-user
    sums ``num += outcome / 2`` and ``compared += (any click)``; with a non-empty ``square`` (``test: delta_t``)
    also ``square += (outcome / 2) ** 2`` (0 or 1/4: exact).

    ``coins`` ``(m, n)`` uint8: row ``coin_step * i`` holds bit ``i`` of the coin pattern, ``i < half``;
    the key is that pattern plus ``query * combos``. ``other`` has no rows unless under the null user
    (``null_labels`` ``(Q, k)``; ``valid`` ``(rows, k)`` bool, or no rows when every slot is filled). Team-draft:
    ``team_bits`` ``(rows, 2)`` uint16 (A's slots, B's slots). Balanced: ``valid_bits`` ``(rows,)`` (no entries:
    every slot filled) and ``kappa`` ``(rows * k, 2)`` (the slots A and B rank at kappa or above, by row and
    lowest clicked slot). ``n_set`` and ``highest``: the set bits and the highest set bit of every uint16."""
    n = query.shape[0]
    k = grades.shape[1]
    keys = np.empty(n, dtype=np.int64)
    shown = np.empty((n, k), dtype=np.int8)  # the rows' shown grades
    null = other.shape[0] > 0
    masked = valid.shape[0] > 0
    with_square = square.shape[0] > 0
    for i in range(n):
        key = 0
        for c in range(half):
            key |= np.int64(coins[coin_step * c, i]) << c
        key += np.int64(query[i]) * combos
        keys[i] = key
        if null:
            q = other[i]
            for r in range(k):
                shown[i, r] = null_labels[q, r] if (not masked or valid[key, r]) else -1
        else:
            for r in range(k):
                shown[i, r] = grades[key, r]
    clicks = np.empty((n, k), dtype=np.bool_)
    grade_clicks(shown, user_type, counts, u, thresholds, width, independent, use_t1, use_t3, block, clicks)
    for i in range(n):
        key = keys[i]
        clicked = _row_bits(clicks, i)
        if balanced:
            c = clicked & np.int64(valid_bits[key]) if valid_bits.shape[0] > 0 else clicked
            row = key * k + highest[c]  # lowest clicked slot (0 without a click: no credit either way)
            won = np.int64(n_set[c & np.int64(kappa[row, 1])])
            lost = np.int64(n_set[c & np.int64(kappa[row, 0])])
        else:
            won = np.int64(n_set[clicked & np.int64(team_bits[key, 1])])
            lost = np.int64(n_set[clicked & np.int64(team_bits[key, 0])])
        outcome = 0.5 if won > lost else (-0.5 if won < lost else 0.0)
        who = user[i]
        num[who] += outcome
        compared[who] += 1.0 if clicked != 0 else 0.0
        if with_square:
            square[who] += outcome * outcome


@_jit
def ab_step(grades, query, user, in_b, b_rows, user_type, counts, u, thresholds, width, independent, use_t1, use_t3,
            block, n_clicks, abandoned, rr, sum_clicks, sum_abandoned, sum_rr, scratch, utility, sum_utility,
            scratch_utility, squares, scratch_squares):
    """One batch step of an A/B design on lists of ``k <= 16`` slots: each impression's shown grades (row
    ``query + b_rows * in_b[user]`` of ``grades``: arm A's rows then, ``b_rows`` further, arm B's; ``b_rows = 0``
    in an A/A test), its clicks (:func:`grade_clicks`), its click pattern (bit ``r`` = rank ``r`` clicked) and
    the pattern's ``n_clicks``, ``abandoned`` and ``rr`` (:func:`simulations.designs.ab._click_patterns`) added to
    the user's sums: clicks and abandonment impression by impression (``np.add.at``'s order; integers, exact),
    reciprocal ranks as ``sum_rr += np.bincount(user, weights=rr)`` adds them (each user's batch total summed in
    impression order from 0.0 in ``scratch``, all zeros before and after, then added to the user's sum). With a
    ``utility`` table (one value per pattern; empty: none), each pattern's utility is added to ``sum_utility`` as
    the reciprocal ranks are (through ``scratch_utility``). With ``squares`` of rows (``test: delta_t``; no rows:
    none), the values' squares are added up too, row 0 the clicks' (integers, impression by impression), row 1 the
    reciprocal ranks' and row 2 (with the utility) the utilities' as ``np.bincount(user, weights=v * v)`` adds them
    (through the same rows of ``scratch_squares``, all zeros before and after)."""
    n = query.shape[0]
    k = grades.shape[1]
    shown = np.empty((n, k), dtype=np.int8)
    for i in range(n):
        row = np.int64(query[i]) + (b_rows if in_b[user[i]] else 0)
        for r in range(k):
            shown[i, r] = grades[row, r]
    clicks = np.empty((n, k), dtype=np.bool_)
    grade_clicks(shown, user_type, counts, u, thresholds, width, independent, use_t1, use_t3, block, clicks)
    with_utility = utility.shape[0] > 0
    n_squares = squares.shape[0]
    for i in range(n):
        pattern = _row_bits(clicks, i)
        who = user[i]
        sum_clicks[who] += n_clicks[pattern]
        sum_abandoned[who] += abandoned[pattern]
        scratch[who] += rr[pattern]
        if with_utility:
            scratch_utility[who] += utility[pattern]
        if n_squares > 0:
            c = np.float64(n_clicks[pattern])
            squares[0, who] += c * c
            scratch_squares[1, who] += rr[pattern] * rr[pattern]
            if n_squares > 2:
                scratch_squares[2, who] += utility[pattern] * utility[pattern]
    for i in range(n):
        who = user[i]
        total = scratch[who]
        if total != 0.0:  # the user's first impression in the batch (adding 0.0 would change no sum)
            sum_rr[who] += total
            scratch[who] = 0.0
        if with_utility:
            total = scratch_utility[who]
            if total != 0.0:
                sum_utility[who] += total
                scratch_utility[who] = 0.0
        for j in range(1, n_squares):
            total = scratch_squares[j, who]
            if total != 0.0:
                squares[j, who] += total
                scratch_squares[j, who] = 0.0
