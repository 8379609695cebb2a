"""Compiled per-batch kernels of the counterfactual design's logger and terms (numba).

A mixture of epsilon-greedy loggers around several rankers (intervention harvesting,
:class:`~simulations.policies.epsilon_greedy.StackedEpsilonGreedy`, the logger of ``configs/counterfactual.yaml``)
spends a batch of a few thousand impressions in some fifty NumPy calls of a few microseconds on ``(C, k, n)``
arrays: per-call overhead, not arithmetic. These kernels do the same work in one compiled loop over the rows:

- :func:`sample_lists`: the lists of :meth:`StackedEpsilonGreedy.sample` (the component of each row, each
  component's choice between its ranker's list and RandTop-n, the randomised rows' partial Fisher-Yates
  shuffles of :func:`~simulations.policies.base.shuffle_top`), drawn in the kernel from the design's
  ``Generator``: the same uniforms in the same order as the NumPy code;
- :func:`logged_propensities`: for the policy's own lists, the match with the targets' lists (``lists[query] ==
  shown`` and its running AND over the slots), the logging propensities (a row showing a target's list takes its
  row of the precomputed table, as :func:`~simulations.designs.counterfactual.serving.known_list_propensities`
  does, the others :meth:`StackedEpsilonGreedy.__call__`'s arithmetic, element by element) and the targets'
  stacked indicators (:func:`~simulations.designs.counterfactual.fused.stacked_indicators`);
- :func:`fused_terms`: the IPS family's terms of both targets
  (:meth:`~simulations.designs.counterfactual.fused.FusedTerms.compute`, lists of 1 to 7 slots).

Their random numbers are the NumPy code's: :func:`sample_lists` draws them one by one from the design's
``Generator`` (numba calls its bit generator's ``next_double``, as ``Generator.random(size)`` does for each
element), in the NumPy code's order; the others are given the uniforms the callers drew with NumPy (the design's
stream is unchanged). Every number equals the NumPy path's bit for bit: the
floating point operations are the same products and sums in the same order (``w_det p_det + w_rt p_rt`` per
component, then ``W_0 pre_0 + W_1 pre_1 + ...``; the RandTop prefix a running product slot by slot), tested against
the NumPy code (``tests/test_policy_kernels.py``).

This module imports numba; it is imported lazily by the code that runs batches (never by ``onlineeval power``,
``evaluate`` or ``--help``). Compiled on first call and cached (``cache=True``) as :mod:`simulations.kernels`.
"""

from __future__ import annotations

import numba
import numpy as np

from simulations.kernels import grade_clicks
from simulations.policies.prefetch import prefetch

__all__ = ["fused_terms", "logged_propensities", "sample_lists"]

_jit = numba.njit(cache=True, nogil=True, error_model="numpy")  # x / 0.0 is inf or NaN, as in numpy: no check


@_jit
def sample_lists(rng, draw_pick, query, mix_cdf, branch_cdf0, n_eff, tops, orders, n_queries, m, out):
    """``out`` ``(n, k)``: the lists of :meth:`StackedEpsilonGreedy.sample_numpy` (``draw_pick``: a mixture of the
    ``C`` epsilon-greedy components) or of a single epsilon-greedy policy's ``MixturePolicy._sample`` (``C = 1``
    and ``draw_pick`` False: no component draw), drawn from ``rng`` (a NumPy ``Generator``) by the same draws in
    the same order, so the lists and the generator's state afterwards are the NumPy code's:

    - with ``draw_pick``, one uniform per row, in row order: the component, the number of the normalised
      cumulative weights ``mix_cdf[:-1]`` that are ``<= u`` (what ``Generator.choice`` and
      :meth:`MixturePolicy._pick` give: the last entry is exactly 1 and ``u < 1``);
    - then component by component: one uniform per row of the component, in row order, the RandTop-n branch
      where it is ``>= branch_cdf0[c]`` (the component's normalised cumulative branch weights' first entry);
      then, for each of those rows in order, ``kk = min(k, width)`` uniforms (``width`` the largest
      ``n_eff[c, query]`` of the component's randomised rows; none when it is below 2), as ``shuffle_top``'s
      ``rng.random((rows, kk))`` draws them row by row.

    Every row shows its component's ranker's list (``tops[c * n_queries + q]``); a randomised row shows its base
    order's documents (``orders[(c * n_queries + q) * m + rank]``) at the ranks of ``shuffle_top``'s first ``kk``
    Fisher-Yates steps (slot ``j`` swapped with slot ``j + floor(u (n_eff - j))``) and the base ranks ``j`` at
    slots at or past ``kk``. One compiled call per batch: no arrays of uniforms, no per-component calls."""
    n, k = out.shape
    n_c = branch_cdf0.shape[0]
    pick = np.zeros(n, dtype=np.int64)
    counts = np.zeros(n_c, dtype=np.int64)
    if draw_pick:
        for i in range(n):
            x = rng.random()
            p = 0
            for j in range(n_c - 1):
                if x >= mix_cdf[j]:
                    p += 1
            pick[i] = p
            counts[p] += 1
    else:
        counts[0] = n
    for i in range(n):
        row = pick[i] * n_queries + query[i]
        for j in range(k):
            out[i, j] = tops[row, j]
    rows = np.empty(n, dtype=np.int64)
    perm = np.empty(max(m, 1), dtype=np.int64)
    for c in range(n_c):
        if counts[c] == 0:
            continue
        cdf0 = branch_cdf0[c]
        n_rows = 0
        width = 0
        for i in range(n):
            if pick[i] == c:
                if rng.random() >= cdf0:
                    rows[n_rows] = i
                    n_rows += 1
                    w = n_eff[c, query[i]]
                    if w > width:
                        width = w
        kk = min(k, width) if width >= 2 else 0
        for a in range(n_rows):
            i = rows[a]
            q = query[i]
            base = (q + c * n_queries) * m
            if kk:  # shuffle_top's first kk Fisher-Yates steps, one uniform each
                ne = n_eff[c, q]
                for col in range(max(ne, kk)):
                    perm[col] = col
                for j in range(kk):
                    x = j + np.int64(rng.random() * np.float64(max(ne - j, 1)))
                    held = perm[j]
                    perm[j] = perm[x]
                    perm[x] = held
                    out[i, j] = orders[base + perm[j]]
            for j in range(kk, k):
                out[i, j] = orders[base + j]


@_jit
def _own_row(i, q, shown, rank_of, n_eff, w_det, w_rt, det_tab, rt_tab, weights, m, n_queries, recip, pre, item):
    """Row ``i`` (query ``q``) of :func:`logged_propensities`'s rows that show no target's list: the logging
    propensities of its own list by :meth:`StackedEpsilonGreedy.__call__`'s arithmetic (``recip[x] = 1.0 / x``),
    the prefix and item propensities into ``pre`` and ``item`` ``(k,)``."""
    k = shown.shape[1]
    n_c = weights.shape[0]
    size = (m + 1) * k
    for c in range(n_c):
        ne = n_eff[c, q]
        ok = True
        run_det = True
        p_rt = 1.0
        for j in range(k):
            d = shown[i, j]
            looked = rank_of[c * n_queries * m + q * m + max(d, 0)]
            known = d >= 0 and looked >= 0
            ok = ok and known
            rk = looked if known else 0
            at_base = rk == j
            run_det = run_det and at_base
            if j < ne:
                f = recip[max(ne - j, 1)] if rk < ne else 0.0
            else:
                f = 1.0 if at_base else 0.0
            p_rt = f if j == 0 else f * p_rt
            okf = 1.0 if ok else 0.0
            p_det = (1.0 if run_det else 0.0) * okf
            x = w_det[c] * p_det + w_rt[c] * (p_rt * okf)
            rr = looked if known else m
            at = rr * k + j + c * size
            y = w_det[c] * det_tab[at] + w_rt[c] * rt_tab[at]
            if c == 0:
                pre[j] = weights[0] * x
                item[j] = weights[0] * y
            else:
                pre[j] = pre[j] + weights[c] * x
                item[j] = item[j] + weights[c] * y


def reciprocals(n_eff):
    """``recip[x] = 1.0 / x`` for ``x = 1 .. max(n_eff)`` (``recip[0] = 1.0``): the RandTop factors of
    :func:`_own_row`, the same bits as dividing each time."""
    top = max(1, int(np.max(n_eff)) if n_eff.size else 1)
    recip = np.empty(top + 1, dtype=np.float64)
    recip[1:] = 1.0 / np.arange(1, top + 1, dtype=np.float64)
    recip[0] = 1.0
    return recip


@_jit
def logged_propensities(query, shown, lists, t_list, t_prefix, t_item, rank_of, n_eff, w_det, w_rt, det_tab,
                        rt_tab, weights, m, n_queries):
    """The logging propensities of the policy's own lists ``shown`` ``(n, k)`` of queries ``query``, the match with
    the targets' lists and the targets' indicators.

    ``lists`` ``(T, Q, k)``: the targets' lists; ``t_list``, ``t_prefix``, ``t_item``: their logging propensities
    stacked (row ``t Q + q``). A row showing target ``t``'s list (the first such ``t``) takes that row; every other
    row gets :meth:`StackedEpsilonGreedy.__call__`'s numbers for its own list (``rank_of`` ``(C Q m,)`` the
    components' base ranks, ``n_eff`` ``(C, Q)``, ``w_det``, ``w_rt`` ``(C,)`` the components' branch weights,
    ``det_tab``, ``rt_tab`` ``(C (m+1) k,)`` their item tables, ``weights`` ``(C,)`` the mixture's): per component
    the prefix ``w_det p_det + w_rt p_rt`` and item ``w_det det_tab + w_rt rt_tab`` (invalid prefixes, a document
    that is not the component's candidate, masked as there), mixed ``W_0 x_0 + W_1 x_1 + ...`` in component order.

    Returns ``same``, ``runs`` ``(T, n, k)`` bool (``lists[t, query] == shown``, its running AND over the slots),
    ``p_list`` ``(n,)``, ``p_prefix``, ``p_item`` ``(n, k)`` and the targets' indicators as float64: ``tp_list``
    ``(T, n)``, ``tp_prefix``, ``tp_item`` ``(T, n, k)``."""
    n, k = shown.shape
    n_t = lists.shape[0]
    n_c = weights.shape[0]
    same = np.empty((n_t, n, k), dtype=np.bool_)
    runs = np.empty((n_t, n, k), dtype=np.bool_)
    tp_list = np.empty((n_t, n), dtype=np.float64)
    tp_prefix = np.empty((n_t, n, k), dtype=np.float64)
    tp_item = np.empty((n_t, n, k), dtype=np.float64)
    p_list = np.empty(n, dtype=np.float64)
    p_prefix = np.empty((n, k), dtype=np.float64)
    p_item = np.empty((n, k), dtype=np.float64)
    # pass 1: the match with every target's list (no branch on the data: the running AND as a product of 0/1)
    which = np.full(n, -1, dtype=np.int64)
    for t in range(n_t - 1, -1, -1):  # the first target whose list a row shows wins
        for i in range(n):
            q = query[i]
            run = np.uint8(1)
            for j in range(k):
                eq = np.uint8(lists[t, q, j] == shown[i, j])
                run &= eq
                same[t, i, j] = eq != 0
                runs[t, i, j] = run != 0
                tp_prefix[t, i, j] = np.float64(run)
                tp_item[t, i, j] = np.float64(eq)
            tp_list[t, i] = np.float64(run)
            if run:
                which[i] = t
    # pass 2: a row showing a target's list takes its row of the table; pass 3: the others are computed
    rest = np.empty(n, dtype=np.int64)
    n_rest = 0
    for i in range(n):
        t = which[i]
        if t >= 0:
            row = t * n_queries + query[i]
            p_list[i] = t_list[row]
            for j in range(k):
                p_prefix[i, j] = t_prefix[row, j]
                p_item[i, j] = t_item[row, j]
        else:
            rest[n_rest] = i
            n_rest += 1
    top = 1
    for c in range(n_c):
        for q in range(n_queries):
            top = max(top, n_eff[c, q])
    recip = np.empty(top + 1, dtype=np.float64)  # 1.0 / x, the same bits as dividing each time
    for x in range(1, top + 1):
        recip[x] = 1.0 / x
    recip[0] = 1.0
    for a in range(n_rest):
        i = rest[a]
        _own_row(i, query[i], shown, rank_of, n_eff, w_det, w_rt, det_tab, rt_tab, weights, m, n_queries, recip,
                 p_prefix[i], p_item[i])
        p_list[i] = p_prefix[i, k - 1]
    return same, runs, p_list, p_prefix, p_item, tp_list, tp_prefix, tp_item


@_jit
def _ht(w, wr, c0):
    """IPS's Horvitz-Thompson numerator of one row (:func:`onlineeval.estimators.ips.ht_numerator`) from its weight
    ``w`` and ``wr = w R``: ``wr + c0 (w - 1)``, ``wr`` itself when the reward's offset ``c0`` is 0 (the same
    operations in the same order)."""
    return wr + c0 * (w - 1.0) if c0 != 0.0 else wr


@_jit
def _clipped(w, cap):
    """Clipped IPS's weight ``w - maximum(w - cap, 0)`` in numpy's operations (``maximum``: ``w - cap`` when it is
    at least 0 or NaN, else 0.0)."""
    e = w - cap
    if not (e >= 0.0 or e != e):
        e = 0.0
    return w - e


@_jit
def _slot_sums(num, den, r, valid, masked, out):
    """``out[t, i] = row_sum(on_shown(num[t] / den) * r)[i]`` for ``num`` ``(T, n * k)``, ``den``, ``r``, ``valid``
    ``(n * k,)`` (flat rows of ``k < 8`` slots): the products in one flat loop the compiler vectorises (the
    divisions dominate), then each row's sum left to right from its first slot, plus 0.0 (numpy's order,
    :func:`~onlineeval.estimators.derived.row_sum`)."""
    n_t, n = out.shape
    size = den.shape[0]
    k = size // n if n else 1
    buf = np.empty(size, dtype=np.float64)
    for t in range(n_t):
        if masked:
            for idx in range(size):
                v = num[t, idx] / den[idx]
                buf[idx] = (v if valid[idx] else 0.0) * r[idx]
        else:
            for idx in range(size):
                buf[idx] = (num[t, idx] / den[idx]) * r[idx]
        for i in range(n):
            s = buf[i * k]
            for j in range(1, k):
                s += buf[i * k + j]
            out[t, i] = s + 0.0


@_jit
def fused_terms(tp_list, tp_prefix, tp_item, p_list, p_prefix, p_item, r, big_r, valid, need_prefix, need_item,
                need_std, caps, c0):
    """The IPS family's terms of :meth:`simulations.designs.counterfactual.fused.FusedTerms.compute` for the ``T``
    targets of a batch of ``n`` lists of ``k < 8`` slots, element by element in the same operations: the list
    weights ``w = tp_list / p_list``; ``w R`` (SNIPS; ``R = big_r`` the list rewards without the reward's offset
    ``c0``); IPS's Horvitz-Thompson numerator ``w R + c0 (w - 1)`` (:func:`onlineeval.estimators.ips.ht_numerator`:
    ``w R`` when ``c0`` is 0; the estimate ``c0 + mean`` is then ``mean(w (c0 + R))``); for each ``cap``, the same
    with ``wc = w - max(w - cap, 0)`` for ``w`` (clipped IPS, numpy's ``maximum``: ``w - cap`` unless it is below
    0); with ``need_prefix`` / ``need_item`` the slot sums of ``on_shown(tp / p) * r`` of the prefix / item propensities
    (RIPS, IIPS; ``r`` the slot rewards; ``on_shown`` 0.0 at an empty slot); with ``need_std`` the slot sums of
    ``on_shown(w) * r`` (adaptive IPS's standard behaviour). A slot sum is
    :func:`~onlineeval.estimators.derived.row_sum`'s: left to right, then ``+ 0.0``. The 2-d and 3-d arrays are
    C-contiguous and flattened by the caller: ``tp_prefix``, ``tp_item`` ``(T, n * k)``, ``p_prefix``, ``p_item``,
    ``r`` and ``valid`` (bool, no entries when every slot is shown) ``(n * k,)``.

    Returns ``w``, ``ips`` (``w R``), ``ht`` ``(T, n)``, ``clipped`` ``(len(caps), T, n)``, ``pre``, ``item``,
    ``std`` ``(T, n)`` (not computed ones have no rows)."""
    n_t, n = tp_list.shape
    size = r.shape[0]
    k = size // n if n else 1
    masked = valid.shape[0] > 0
    w = np.empty((n_t, n), dtype=np.float64)
    ips = np.empty((n_t, n), dtype=np.float64)
    ht = np.empty((n_t, n), dtype=np.float64)
    clipped = np.empty((caps.shape[0], n_t, n), dtype=np.float64)
    pre = np.empty((n_t if need_prefix else 0, n), dtype=np.float64)
    item = np.empty((n_t if need_item else 0, n), dtype=np.float64)
    std = np.empty((n_t if need_std else 0, n), dtype=np.float64)
    for t in range(n_t):
        for i in range(n):
            w[t, i] = tp_list[t, i] / p_list[i]
        for i in range(n):
            ips[t, i] = w[t, i] * big_r[i]
        for i in range(n):
            ht[t, i] = _ht(w[t, i], ips[t, i], c0)
        for c in range(caps.shape[0]):
            cap = caps[c]
            for i in range(n):
                wc = _clipped(w[t, i], cap)
                clipped[c, t, i] = _ht(wc, wc * big_r[i], c0)
    if need_prefix:
        _slot_sums(tp_prefix, p_prefix, r, valid, masked, pre)
    if need_item:
        _slot_sums(tp_item, p_item, r, valid, masked, item)
    if need_std:
        for t in range(n_t):
            for i in range(n):
                wl = w[t, i]
                s = 0.0
                for j in range(k):
                    x = (wl if not masked or valid[i * k + j] else 0.0) * r[i * k + j]
                    s = x if j == 0 else s + x
                std[t, i] = s + 0.0
    return w, ips, ht, clipped, pre, item, std


#: the values of a row for one target in :func:`counterfactual_step` (entry ``VAL_CLIPPED + c``: clipped IPS with
#: cap ``caps[c]``); ``adds`` looks them up by ``t * (VAL_CLIPPED + len(caps)) + entry``
VAL_IPS, VAL_PREFIX, VAL_ITEM, VAL_WEIGHT, VAL_HT, VAL_CLIPPED = 0, 1, 2, 3, 4, 5
#: the kinds of weights of :func:`counterfactual_step`'s ``specs`` (``W_CLIPPED + c``: clipped IPS with cap
#: ``caps[c]``; :data:`W_LIST` and the clipped kinds are list weights, the others slot weights)
W_LIST, W_STD, W_PREFIX, W_ITEM, W_CLIPPED = 0, 1, 2, 3, 4


@_jit
def _row_sum(x, k, r):
    """``x[:k].sum()`` in the order of numpy's pairwise summation of a row of ``k <= 128`` values
    (:func:`onlineeval.estimators.derived.add_rows`): fewer than 8 left to right; else 8 accumulators (slot
    ``c`` plus slots ``c + 8, c + 16, ...`` of the whole groups of 8) added as ``((r0+r1)+(r2+r3))+((r4+r5)+
    (r6+r7))``, then the remaining slots one by one; then ``+ 0.0`` (numpy starts from +0.0). ``r``: 8 floats of
    scratch."""
    if k < 8:
        s = x[0]
        for j in range(1, k):
            s += x[j]
        return s + 0.0
    full = k - k % 8
    for c in range(8):
        r[c] = x[c]
    if full > 8:
        for c in range(8):
            r[c] = x[c] + x[8 + c]
        for i in range(16, full, 8):
            for c in range(8):
                r[c] += x[i + c]
    s = r[0] + r[1]
    s += r[2] + r[3]
    s += (r[4] + r[5]) + (r[6] + r[7])
    for i in range(full, k):
        s += x[i]
    return s + 0.0


@_jit
def _slot_rewards(clicks, first, w, r):
    """``r`` ``(n, k)``: :meth:`onlineeval.estimators.Reward.slot_rewards` of ``clicks`` ``(n, k)`` bool (the
    clicked slots, or with ``first`` the first clicked slot of each row, as 1.0 / 0.0, times ``w[j]``; ``w`` with
    no entries: the weights ``None``, the 1.0 / 0.0 themselves), without branches on the clicks."""
    n, k = clicks.shape
    weighted = w.shape[0] > 0
    if not first:
        c = clicks.reshape(-1)
        out = r.reshape(-1)
        if weighted:
            for x in range(n * k):
                out[x] = np.float64(c[x]) * w[x % k]
        else:
            for x in range(n * k):
                out[x] = np.float64(c[x])
        return
    for i in range(n):
        seen = np.uint8(0)
        for j in range(k):
            c_ij = np.uint8(clicks[i, j])
            base = np.float64(c_ij & (seen ^ np.uint8(1)))  # clicked, none above
            seen |= c_ij
            r[i, j] = base * w[j] if weighted else base


@_jit
def counterfactual_step(query, user, shown, clicks, r, labels, user_type, counts, u, thresholds, width, independent,
                        use_t1, use_t3, block, reward_kind, reward_w, lists, t_list, t_prefix, t_item, rank_of, n_eff,
                        w_det, w_rt, det_tab, rt_tab, weights, m, n_queries, recip, caps, c0, adds, units, obs, acc,
                        scratch, slot, touched, query_count, beh, specs, prow):
    """One batch of the counterfactual design's serving after the draws, in one pass over its ``n`` rows: the
    logging propensities of the logger's own lists (:func:`logged_propensities`' numbers, used and not kept: the
    design's log computes them when asked), the IPS family's terms of the ``T`` deterministic targets
    (:func:`fused_terms`' numbers), and every per-user sum of the design.

    ``clicks`` ``(n, k)`` bool, ``r`` ``(n, k)`` the slot rewards of the design's reward (the list reward is their
    sum, as every slot sum in numpy's order, :func:`_row_sum`; ``k <= 128``). With ``labels`` ``(Q, m)`` int8 (the
    world's grades, every one known to the click models; no rows: ``clicks`` are given) the shown grades are
    gathered (:func:`simulations.world.shown_labels`' values: ``-1`` at an empty slot) and the clicks sampled into
    ``clicks`` first by :func:`simulations.kernels.grade_clicks` (``user_type`` ... ``block`` its arguments,
    ``counts`` from :func:`simulations.kernels.shown_row_counts`, ``u`` the uniforms drawn by
    :meth:`simulations.users._GradeChains.uniforms`); with ``reward_kind`` 0 (additive) or 1 (first click) each
    row's slot rewards are written into ``r`` before they are read, as
    :meth:`onlineeval.estimators.Reward.slot_rewards` computes them (the clicked, or first clicked, slots as 1.0 /
    0.0, times ``reward_w[j]`` unless ``reward_w`` has no entries: the weights ``None``); ``-1``: ``r`` is given.

    For each target a row's values are ``w R`` (SNIPS), the slot sums of RIPS and IIPS, the list weight ``w``
    (SNIPS' denominator), IPS's Horvitz-Thompson numerator ``w R + c0 (w - 1)`` (``c0`` the reward's offset; ``w R``
    when it is 0) and for each cap the same with ``w - max(w - cap, 0)`` for ``w`` (clipped IPS), at the entries
    ``VAL_*`` (:func:`fused_terms`' numbers);
    ``adds`` ``(A, 2)`` int64 lists the additions: ``(row of acc, t * (VAL_CLIPPED + len(caps)) + entry)``;
    ``units`` the rows of all-ones denominators (they get the impression counts); ``obs`` the rows of the
    impression counts and the logger's clicks, abandonment and reciprocal rank. ``beh`` ``(3, T, n)`` (or no
    rows) receives adaptive IPS's behaviour terms (``independent``, ``cascade``, ``standard``), ``query_count``
    ``(Q,)`` the impressions per query. ``specs`` ``(S, 4)`` int64 (or no rows): the products of two targets'
    weights whose per-user sums go to rows ``prow`` ``(S,)`` of ``acc`` (the differences' degrees of freedom,
    :class:`~simulations.designs.counterfactual.products.ProductLayout`), each ``(kind_a, target_a, kind_b,
    target_b)`` with kinds :data:`W_LIST`, :data:`W_STD`, :data:`W_PREFIX`, :data:`W_ITEM`, ``W_CLIPPED + c``: list
    weights multiplied, slot weights (0 at empty slots) multiplied slot by slot and summed as :func:`_row_sum`
    (:func:`~simulations.designs.counterfactual.products.products_of`' numbers). ``lists`` ... ``n_queries``:
    :func:`logged_propensities`' tables (``lists``
    and ``rank_of`` of any signed integer type: the step passes its own copies in the smallest type that holds
    their values, int8 for fewer than 128 documents a query, fewer cache lines to miss).

    ``acc`` ``(V, P)``: the design's per-user sums. A batch's values are summed per user in row order from 0.0 in
    a row of ``scratch`` ``(>= n, V)`` (one per user of the batch, in order of first impression; ``slot`` ``(P,)``
    int32 or int64, all -1 on entry and on return, maps a user to it) and then added to ``acc`` once, what
    ``acc[row] += np.bincount(user, values)`` does: the same bits as the NumPy path. ``touched`` ``(n + 1,)``
    int64 work space."""
    n, k = shown.shape
    if touched.shape[0] <= n:
        raise ValueError("counterfactual_step: touched needs n + 1 entries")
    n_t = lists.shape[0]
    n_v = acc.shape[0]
    n_adds = adds.shape[0]
    n_caps = caps.shape[0]
    keep_beh = beh.shape[0] > 0
    n_specs = specs.shape[0]
    # the targets' weights by kind, flat: target t's kind x at [(t * n_kinds + x) * k, ... + k) (list kinds: the
    # first entry), with per (target, kind) whether a weight is not +0.0 and whether all are finite: a product
    # with a side of +0.0 weights and finite other side is +0.0, which adds nothing to a user's sum (its sums of
    # products of non-negative weights are never -0.0), so it is skipped (the same bits as adding it)
    n_kinds = W_CLIPPED + n_caps
    wts = np.zeros(n_t * n_kinds * k)
    nonzero = np.zeros(n_t * n_kinds, dtype=np.bool_)
    finite = np.ones(n_t * n_kinds, dtype=np.bool_)
    spec_a = np.empty(n_specs, dtype=np.int64)  # each spec's (target, kind) index on each side
    spec_b = np.empty(n_specs, dtype=np.int64)
    spec_list = np.empty(n_specs, dtype=np.bool_)
    for e in range(n_specs):
        spec_a[e] = specs[e, 1] * n_kinds + specs[e, 0]
        spec_b[e] = specs[e, 3] * n_kinds + specs[e, 2]
        spec_list[e] = specs[e, 0] == W_LIST or specs[e, 0] >= W_CLIPPED
    slot_specs = not spec_list.all()
    prod = np.empty(k, dtype=np.float64)
    vals = np.empty((n_t, VAL_CLIPPED + n_caps), dtype=np.float64)
    flat = vals.reshape(-1)  # a view: vals[t, x] is flat[t * (VAL_CLIPPED + n_caps) + x]
    same = np.empty((n_t, k), dtype=np.bool_)
    runs = np.empty((n_t, k), dtype=np.bool_)
    pp = np.empty(k, dtype=np.float64)  # the row's prefix and item propensities
    pi = np.empty(k, dtype=np.float64)
    bp = np.empty(k, dtype=np.float64)  # a slot sum's terms (lists of 8 slots or more)
    bi = np.empty(k, dtype=np.float64)
    bs = np.empty(k, dtype=np.float64)
    acc8 = np.empty(8, dtype=np.float64)
    inv_p = np.empty(k, dtype=np.float64)
    zero_p = np.empty(k, dtype=np.float64)
    inv_i = np.empty(k, dtype=np.float64)
    zero_i = np.empty(k, dtype=np.float64)
    imp_row, clicks_row, abandoned_row, rr_row = obs[0], obs[1], obs[2], obs[3]
    short = k < 8  # slot sums left to right (numpy's order for fewer than 8 values)
    if labels.shape[0] > 0:
        grades = np.empty((n, k), dtype=np.int8)
        for i in range(n):
            q = query[i]
            for j in range(k):
                d = shown[i, j]
                grades[i, j] = labels[q, d] if d >= 0 else -1
        grade_clicks(grades, user_type, counts, u, thresholds, width, independent, use_t1, use_t3, block, clicks)
    if reward_kind >= 0:
        _slot_rewards(clicks, reward_kind == 1, reward_w, r)
    n_touched = 0
    for i in range(n):
        q = query[i]
        u = user[i]
        at = slot[u]
        if at < 0:  # the user's first impression in the batch: a new row of scratch
            at = n_touched
            slot[u] = at
            n_touched += 1
            for v in range(n_v):
                scratch[at, v] = 0.0
        # the match with the targets' lists; a row showing one (the first) takes its propensities from the table
        which = -1
        for t in range(n_t - 1, -1, -1):
            run = True
            for j in range(k):
                eq = lists[t, q, j] == shown[i, j]
                run = run and eq
                same[t, j] = eq
                runs[t, j] = run
            if run:
                which = t
        if which >= 0:
            row = which * n_queries + q
            pl = t_list[row]
            for j in range(k):
                pp[j] = t_prefix[row, j]
                pi[j] = t_item[row, j]
        else:
            _own_row(i, q, shown, rank_of, n_eff, w_det, w_rt, det_tab, rt_tab, weights, m, n_queries, recip, pp, pi)
            pl = pp[k - 1]
        # the list reward and the logger's own metrics
        if short:
            big = r[i, 0]
            for j in range(1, k):
                big += r[i, j]
            big = big + 0.0
        else:
            for j in range(k):
                bp[j] = r[i, j]
            big = _row_sum(bp, k, acc8)
        n_clicks = 0
        first = -1
        for j in range(k):
            if clicks[i, j]:
                n_clicks += 1
                if first < 0:
                    first = j
        scratch[at, imp_row] += 1.0
        scratch[at, clicks_row] += np.float64(n_clicks)
        scratch[at, abandoned_row] += 1.0 if n_clicks == 0 else 0.0
        scratch[at, rr_row] += 1.0 / (first + 1.0) if n_clicks > 0 else 0.0
        query_count[q] += 1
        # the targets' weights are (1.0 or 0.0) / p: each division made once per row and slot, for every target
        # (0.0 / p is +0.0 for p > 0; otherwise divided, for its NaN or -0.0)
        inv_l = 1.0 / pl
        zero_l = 0.0 if pl > 0.0 else 0.0 / pl
        for j in range(k):
            x = pp[j]
            inv_p[j] = 1.0 / x
            zero_p[j] = 0.0 if x > 0.0 else 0.0 / x
            x = pi[j]
            inv_i[j] = 1.0 / x
            zero_i[j] = 0.0 if x > 0.0 else 0.0 / x
        fin_p = fin_i = True
        if slot_specs:  # whether every shown slot's prefix (item) weight is finite, for every target (both forms)
            for j in range(k):
                if shown[i, j] >= 0:
                    fin_p &= zero_p[j] == 0.0 and inv_p[j] - inv_p[j] == 0.0
                    fin_i &= zero_i[j] == 0.0 and inv_i[j] - inv_i[j] == 0.0
        for t in range(n_t):
            wl = inv_l if runs[t, k - 1] else zero_l
            if short:  # the slot sums left to right, from the first slot's term, then + 0.0
                sp = 0.0
                si = 0.0
                ss = 0.0
                for j in range(k):
                    ok = shown[i, j] >= 0
                    rj = r[i, j]
                    xp = ((inv_p[j] if runs[t, j] else zero_p[j]) if ok else 0.0) * rj
                    xi = ((inv_i[j] if same[t, j] else zero_i[j]) if ok else 0.0) * rj
                    xs = (wl if ok else 0.0) * rj
                    if j == 0:
                        sp = xp
                        si = xi
                        ss = xs
                    else:
                        sp += xp
                        si += xi
                        ss += xs
                sp = sp + 0.0
                si = si + 0.0
                ss = ss + 0.0
            else:
                for j in range(k):
                    ok = shown[i, j] >= 0
                    rj = r[i, j]
                    bp[j] = ((inv_p[j] if runs[t, j] else zero_p[j]) if ok else 0.0) * rj
                    bi[j] = ((inv_i[j] if same[t, j] else zero_i[j]) if ok else 0.0) * rj
                    bs[j] = (wl if ok else 0.0) * rj
                sp = _row_sum(bp, k, acc8)
                si = _row_sum(bi, k, acc8)
                ss = _row_sum(bs, k, acc8)
            if n_specs > 0:  # the target's weights by kind (the terms' above), flagged
                base = t * n_kinds
                pre, item, std = (base + W_PREFIX) * k, (base + W_ITEM) * k, (base + W_STD) * k
                nz_p = nz_i = any_ok = False
                for j in range(k if slot_specs else 0):  # (list weights alone: no slot's needed)
                    ok = shown[i, j] >= 0
                    xp = (inv_p[j] if runs[t, j] else zero_p[j]) if ok else 0.0
                    xi = (inv_i[j] if same[t, j] else zero_i[j]) if ok else 0.0
                    wts[pre + j] = xp
                    wts[item + j] = xi
                    wts[std + j] = wl if ok else 0.0
                    nz_p |= xp != 0.0
                    nz_i |= xi != 0.0
                    any_ok |= ok
                nonzero[base + W_PREFIX] = nz_p
                finite[base + W_PREFIX] = fin_p
                nonzero[base + W_ITEM] = nz_i
                finite[base + W_ITEM] = fin_i
                wl_fin = wl - wl == 0.0
                nonzero[base + W_STD] = any_ok and wl != 0.0
                finite[base + W_STD] = wl_fin or not any_ok
                wts[(base + W_LIST) * k] = wl
                nonzero[base + W_LIST] = wl != 0.0
                finite[base + W_LIST] = wl_fin
                for c in range(n_caps):
                    wc = _clipped(wl, caps[c])
                    wts[(base + W_CLIPPED + c) * k] = wc
                    nonzero[base + W_CLIPPED + c] = wc != 0.0
                    finite[base + W_CLIPPED + c] = wc - wc == 0.0
            if keep_beh:
                beh[0, t, i] = si
                beh[1, t, i] = sp
                beh[2, t, i] = ss
            x = wl * big
            vals[t, VAL_IPS] = x
            vals[t, VAL_PREFIX] = sp
            vals[t, VAL_ITEM] = si
            vals[t, VAL_WEIGHT] = wl
            vals[t, VAL_HT] = _ht(wl, x, c0)
            for c in range(n_caps):
                wc = _clipped(wl, caps[c])
                vals[t, VAL_CLIPPED + c] = _ht(wc, wc * big, c0)
        for a in range(n_adds):  # no branch: each addition's column and value were looked up once, at set-up
            scratch[at, adds[a, 0]] += flat[adds[a, 1]]
        for e in range(n_specs):  # the products of two targets' weights
            a, b = spec_a[e], spec_b[e]
            if not ((nonzero[a] or not finite[b]) and (nonzero[b] or not finite[a])):
                continue  # +0.0 (see above)
            oa, ob = a * k, b * k
            if spec_list[e]:
                v = wts[oa] * wts[ob]
            elif short:  # _row_sum's order: left to right from the first product, then + 0.0
                v = wts[oa] * wts[ob]
                for j in range(1, k):
                    v += wts[oa + j] * wts[ob + j]
                v = v + 0.0
            else:
                for j in range(k):
                    prod[j] = wts[oa + j] * wts[ob + j]
                v = _row_sum(prod, k, acc8)
            scratch[at, prow[e]] += v
    for a in range(n_touched):
        count = scratch[a, imp_row]
        for b in range(units.shape[0]):  # all-ones denominators: the impression counts (exact integers)
            scratch[a, units[b]] = count
    # the batch's sums added to acc user by user in ascending order of user: each acc[v, u] gets one addition, so
    # the order across users does not change a bit. The touched users are collected without a branch (each user
    # written at the count so far, counted when touched: n + 1 entries); the rows of acc are then each read and
    # written front to back together. (A batch of the bundled config, 2,369 of 6,000 users touched, 24 rows of acc,
    # best of 30, us per impression with warm / flushed caches: 0.013 / 0.043, against 0.034 / 0.086 for every user
    # in blocks of 64 with a branch on slot[u], 0.030 / 0.064 for the touched users in blocks of 64 row by row of
    # acc, 0.015 / 0.052 user by user in order of first impression.)
    n_users = slot.shape[0]
    c = 0
    for u in range(n_users):
        touched[c] = u
        c += slot[u] >= 0
    for a in range(n_touched):
        # acc's column of the user 4 users ahead requested (a prefetch changes no number; requesting the rows'
        # random reads ahead in the loop above too measured no faster in whole replicates)
        if a + 4 < n_touched:
            ahead = touched[a + 4]
            for v in range(n_v):
                prefetch(acc, v * n_users + ahead)
        u = touched[a]
        at = slot[u]
        slot[u] = -1
        for v in range(n_v):
            acc[v, u] += scratch[at, v]
