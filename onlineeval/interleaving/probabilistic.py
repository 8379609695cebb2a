"""Probabilistic interleaving (Hofmann, Whiteson & de Rijke 2011), outcome marginalised exactly.

Each ranker ``i`` becomes a softmax over ranks,

.. math::

    P_i(d) = \\frac{r_i(d)^{-\\tau}}{\\sum_{d' \\in D} r_i(d')^{-\\tau}},

over the documents ``D`` not yet shown. For every slot a ranker ``a_j`` is drawn
uniformly at random, a document is drawn from ``P_{a_j}`` and removed from every
ranker's distribution. A document missing from list ``i`` gets rank
``|list_i| + 1`` in it (all such documents tie at the bottom), so every ranker can
draw every candidate.

Outcome (Hofmann et al. 2013): marginalise the assignment vector ``a`` given the shown
list ``L``. Because the set of remaining documents at slot ``j`` is fixed by ``L``,

.. math::

    P(a \\mid L) \\propto \\prod_j P_{a_j}(L_j \\mid D_j)
    \\quad\\Rightarrow\\quad
    q_{j,i} = P(a_j = i \\mid L) = \\frac{P_i(L_j \\mid D_j)}{\\sum_{i'} P_{i'}(L_j \\mid D_j)},

independently per slot. The number of clicks credited to each ranker is then a sum of
independent categorical variables, and ``P(B wins) - P(A wins)`` follows exactly from
a dynamic programme over the click-count difference (``O(k^2)`` per impression and
ranker pair) instead of enumerating all ``m^k`` assignments. The sign of that
expected outcome is the impression's outcome, with ``|E[o]| <= tie_tolerance``
reported as a tie: exact ties (identical rankers, symmetric clicks) are not turned
into wins by float rounding.

Credit per ranker is the expected number of clicks assigned to it, ``sum_j c_j q_{j,i}``.
With more than two rankers this is probabilistic multileaving (Schuth et al. 2015,
with the ranker drawn per slot as in Hofmann et al. 2011 so the marginalisation stays
exact).

Two per-impression outcomes, and which one to aggregate:

* :meth:`Probabilistic.expected_preferences` (``expected_outcome`` for two rankers) is
  the papers' outcome, the expectation over assignments given the list and the clicks,

  .. math::

      E[o_{ii'} \\mid L, c] = P(X_i > X_{i'} \\mid L, c) - P(X_i < X_{i'} \\mid L, c)
      \\in [-1, 1].

  Clicks depend on the shown list only, so its mean over impressions has the expectation
  of the outcome computed on the assignment actually drawn, with less variance (a
  Rao-Blackwellisation). Average it over impressions for a preference matrix
  (:func:`~onlineeval.interleaving.analysis.preference_matrix` accepts values in [-1, 1]).
* :meth:`~onlineeval.interleaving.base.Interleaver.preferences` / ``outcome`` are its
  *sign* per impression (``|E| <= tie_tolerance`` a tie): the win / loss / tie outcome
  that :math:`\\Delta_{AB}` and the sign test count. The sign discards the margin, so its
  mean is not unbiased for the realised-assignment outcome; with three or more rankers it
  can prefer a different ranker of a pair than the expectation does. Exact example
  (tests/test_interleaving_multileave_fidelity.py): documents 0-2, two slots, a
  navigational cascade user clicking document 2; A = [0, 1, 2], D = [1, 2, 0]. With A and
  D alone both outcomes prefer D (expectation 239989/1265040, sign 239459/1265040 per
  impression); adding X = [0, 2, 1], the expectation still prefers D (239377/2846340)
  but the sign prefers A (-3379/105420). In the simulator's four-ranker world
  (configs/multileaving.yaml) the sign prefers the noisier, offline-worse D to A while the
  expectation, 2-ranker interleaving and team-draft multileaving prefer A; there the
  expectation's standard error is also 40% (two rankers) to 60% (four) smaller.

Documented property of the method itself: a pairwise preference under multileaving is
not invariant to which other rankers take part, because each ranker's softmax is
renormalised over the documents not yet shown, and the other rankers decide which
documents are shown above a click. A clone of A added to {A, D} reverses their expected
preference (documents 0-3, two slots, a navigational user clicking document 1;
A = [0, 1, 2, 3], D = [2, 1, 3, 0]: +707616/309383855 for {A, D}, D preferred;
-5474537659/103024823715 for {A, D, A}, A preferred). Neither ranker Pareto-dominates
the other there; fidelity (Hofmann et al. 2013) only guarantees no preference under
random clicks and a preference for a ranker that ranks every clicked document higher.

References
----------
K. Hofmann, S. Whiteson, M. de Rijke. A probabilistic method for inferring
preferences from clicks. CIKM 2011.
K. Hofmann, S. Whiteson, M. de Rijke. Fidelity, soundness, and efficiency of
interleaved comparison methods. ACM TOIS 31(4), 2013.
A. Schuth, R.-J. Bruintjes, F. Buttner, J. van Doorn, C. Groenland, H. Oosterhuis,
C.-N. Tran, B. Veeling, J. van der Velde, R. Wechsler, D. Woudenberg, M. de Rijke.
Probabilistic multileave for online retrieval evaluation. SIGIR 2015.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from onlineeval.interleaving._kernels import (
    check_bool,
    check_positive_float,
    first_occurrence,
    mask_shared_prefix,
    rank_in_lists,
)
from onlineeval.interleaving.base import Interleaver, InterleavingResult, _check_clicks
from onlineeval.interleaving.registry import register_interleaver
from onlineeval.rows import distinct_rows

__all__ = ["Probabilistic", "pairwise_win_difference", "slot_posteriors", "softmax_weights"]


def _distinct(rankings: NDArray[np.int32]) -> tuple[NDArray[np.int32], NDArray[np.int64]]:
    """The distinct rows of ``(m, n, K)`` stacked rankings (``(m, g, K)``) and each impression's: what depends on an
    impression's lists only is computed once per distinct row (a simulator's impressions repeat their queries' lists),
    the same numbers row by row."""
    m, n, K = rankings.shape
    first, code = distinct_rows(np.moveaxis(rankings, 0, 1).reshape(n, m * K))
    return rankings[:, first], code


def _universe(rankings: NDArray[np.int32]) -> tuple[NDArray[np.int32], NDArray[np.bool_]]:
    """All candidate documents per row (``(n, m*K)``) and the first-occurrence mask."""
    m, n, K = rankings.shape
    cat = np.moveaxis(rankings, 0, 1).reshape(n, m * K)
    keep = first_occurrence(cat)
    return cat, keep


def softmax_weights(docs: NDArray[np.int32], rankings: NDArray[np.int32], tau: float) -> NDArray[np.float64]:
    """Unnormalised softmax weights ``r_i(d)^{-tau}`` of ``docs`` (``(n, w)``) per ranker: ``(m, n, w)``.

    Ranks are 1-based positions of first occurrence; a document missing from list ``i``
    gets rank ``|list_i| + 1``; empty slots (``-1``) get weight 0.
    """
    m, n, K = rankings.shape
    pos = rank_in_lists(docs, rankings)                      # 0-based, K when absent
    length = (rankings >= 0).sum(axis=2)                     # (m, n)
    rank = np.where(pos < K, pos + 1, length[:, :, None] + 1).astype(np.float64)
    w = rank ** (-tau)
    w[:, docs < 0] = 0.0
    return w


def slot_posteriors(result: InterleavingResult, tau: float) -> NDArray[np.float64]:
    """``q[:, j, i] = P(slot j was drawn by ranker i | shown list)``, ``(n, k, m)``.

    Empty slots get ``q = 0``.
    """
    rankings, shown = result.rankings, result.ranking
    distinct, code = _distinct(rankings)
    cat, keep = _universe(distinct)
    cat = np.where(keep, cat, -1)
    total = softmax_weights(cat, distinct, tau).sum(axis=2)[:, code]  # (m, n) over all candidates
    w = softmax_weights(shown, rankings, tau)                         # (m, n, k)
    before = np.cumsum(w, axis=2) - w                                 # weight already removed
    remaining = total[:, :, None] - before
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(w > 0, w / remaining, 0.0)                       # P_i(L_j | D_j)
        s = p.sum(axis=0)
        q = np.where(s > 0, p / s, 0.0)
    return np.moveaxis(q, 0, 2)


def pairwise_win_difference(qi: NDArray[np.float64], qj: NDArray[np.float64],
                            clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Exact ``P(X_i > X_j) - P(X_i < X_j)`` where each clicked slot adds 1 to ``X_i`` w.p. ``qi``, to ``X_j`` w.p.
    ``qj``.

    Dynamic programme over the difference ``D = X_i - X_j`` in ``[-c, c]``:

    .. math::

        P_{t}(D{=}d) = P_{t-1}(d-1)\\,q_i + P_{t-1}(d+1)\\,q_j + P_{t-1}(d)\\,(1-q_i-q_j).

    Parameters
    ----------
    qi, qj:
        ``(n, k)`` per-slot probabilities.
    clicks:
        ``(n, k)`` bool.
    """
    n, k = clicks.shape
    out = np.zeros(n, dtype=np.float64)
    count = clicks.sum(axis=1)
    # one click: the programme's one step leaves P(D = 1) = qi and P(D = -1) = qj, and the sum below is 0.0 + (qi -
    # qj) plus zeros, so that is computed directly (the same bits); no click: 0. The programme runs on the others.
    one = np.flatnonzero(count == 1)
    if one.size:
        slot = clicks[one].argmax(axis=1)
        out[one] = 0.0 + (qi[one, slot] - qj[one, slot])
    many = np.flatnonzero(count > 1)
    if many.size:
        out[many] = _win_difference_dp(qi[many], qj[many], clicks[many])
    return out


def _win_difference_dp(qi: NDArray[np.float64], qj: NDArray[np.float64], clicks: NDArray[np.bool_]
                       ) -> NDArray[np.float64]:
    """:func:`pairwise_win_difference`'s dynamic programme over every row."""
    n, k = clicks.shape
    width = 2 * k + 1
    dist = np.zeros((n, width + 2), dtype=np.float64)   # one zero guard column each side
    dist[:, k + 1] = 1.0
    for j in range(k):
        c = clicks[:, j]
        if not c.any():
            continue
        rows = np.flatnonzero(c)
        d = dist[rows]
        a = qi[rows, j][:, None]
        b = qj[rows, j][:, None]
        new = np.zeros_like(d)
        new[:, 1:-1] = d[:, :-2] * a + d[:, 2:] * b + d[:, 1:-1] * (1.0 - a - b)
        dist[rows] = new
    # P(D = d) - P(D = -d) summed over d = 1..k, each pair subtracted first: with qi == qj (identical rankers, an
    # A/A test) the distribution is symmetric bit for bit and every term is exactly 0, where summing the wins and
    # the losses separately, in opposite orders, left rounding noise (~1e-17 per impression; with an SE of the
    # same size an A/A test of probabilistic multileaving then 'rejected')
    out = np.zeros(n, dtype=np.float64)
    for d in range(1, k + 1):
        out += dist[:, k + 1 + d] - dist[:, k + 1 - d]
    return out


def _draw(cat: NDArray[np.int32], remaining: NDArray[np.bool_], w: NDArray[np.float64], rng: np.random.Generator,
          length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """``(shown, team)``: ``length`` slots drawn for each impression from its candidates ``cat`` ``(n, W)`` (``-1``:
    none) not yet drawn (``remaining``, updated) with the rankers' softmax weights ``w`` ``(m, n, W)``: at each slot
    a ranker drawn uniformly, then one of its remaining candidates by weight (:meth:`Probabilistic._interleave`)."""
    m, n, _ = w.shape
    shown = np.full((n, length), -1, dtype=np.int32)
    team = np.full((n, length), -1, dtype=np.int8)
    rows = np.arange(n)
    chooser = rng.integers(0, m, size=(length, n), dtype=np.int8)
    uniform = rng.random((length, n))
    for j in range(length):
        a = chooser[j]
        probs = w[a, rows] * remaining
        cum = np.cumsum(probs, axis=1)
        tot = cum[:, -1]
        live = tot > 0
        if not live.any():
            break
        # first index whose cumulative weight exceeds u * total (zero-weight entries are skipped)
        idx = (cum <= (uniform[j] * tot)[:, None]).sum(axis=1)
        idx = np.minimum(idx, cum.shape[1] - 1)
        # u * total rounded up to the total: take the last candidate with positive weight
        bad = live & ~(probs[rows, idx] > 0)
        if bad.any():
            pos = probs[bad] > 0
            idx[bad] = pos.shape[1] - 1 - pos[:, ::-1].argmax(axis=1)
        doc = np.where(live, cat[rows, idx], -1)
        shown[:, j] = doc
        team[:, j] = np.where(live, a, -1)
        remaining[rows[live], idx[live]] = False
    return shown, team


@register_interleaver
class Probabilistic(Interleaver):
    """Probabilistic interleaving (two rankers) or multileaving (more), exact marginalised outcome.

    Parameters
    ----------
    tau:
        Softmax temperature over ranks, ``P(d) \\propto r(d)^{-tau}``; default 3 (Hofmann et al. 2011).
    tie_tolerance:
        Expected outcomes with ``|P(win) - P(loss)| <= tie_tolerance`` are ties; default ``1e-9``.
    prefix_credit:
        If ``True`` (default, as in Hofmann et al. 2011) clicks on the top prefix that all
        input lists share are marginalised like any other; if ``False`` they are ignored
        (the prefix is shown whatever the draws; the clicks left are still blind to the
        assignment, so fidelity is kept).
    """

    name = "probabilistic"
    min_rankers = 2
    max_rankers: int | None = None

    def __init__(self, *, tau: float = 3.0, tie_tolerance: float = 1e-9, prefix_credit: bool = True) -> None:
        self.tau = check_positive_float(self.name, "tau", tau)
        self.tie_tolerance = check_positive_float(self.name, "tie_tolerance", tie_tolerance, allow_zero=True)
        self.prefix_credit = check_bool(self.name, "prefix_credit", prefix_credit)

    @property
    def options(self) -> dict[str, object]:
        return {"tau": self.tau, "tie_tolerance": self.tie_tolerance, "prefix_credit": self.prefix_credit}

    def _counted(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """The clicks that count: all, or those below the shared prefix (``prefix_credit=False``)."""
        return clicks if self.prefix_credit else mask_shared_prefix(clicks, result.rankings)

    def _interleave(self, rankings: NDArray[np.int32], rng: np.random.Generator,
                    length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
        distinct, code = _distinct(rankings)
        cat, keep = _universe(distinct)
        if keep.size:
            # the candidates first, in their order, the repeats (weight 0) dropped: each slot's cumulative weights
            # and the candidate drawn are the same (adding +0.0 leaves a running sum as it is), over fewer columns
            order = np.argsort(~keep, axis=1, kind="stable")
            width = max(int(keep.sum(axis=1).max()), 1)
            cat = np.take_along_axis(cat, order, axis=1)[:, :width]
            keep = np.take_along_axis(keep, order, axis=1)[:, :width]
        cat = np.where(keep, cat, -1)
        w = softmax_weights(cat, distinct, self.tau)[:, code]         # (m, n, W)
        return _draw(cat[code], keep[code], w, rng, length)

    def _credit(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
        q = slot_posteriors(result, self.tau)                         # (n, k, m)
        return np.einsum("nk,nkm->nm", self._counted(result, clicks).astype(np.float64), q)

    def expected_preferences(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
        """``(n, m, m)`` exact ``P(i beats j) - P(j beats i)`` marginalised over assignments.

        This is the per-impression outcome of Hofmann et al. (2011) and Schuth et al. (2015)
        to average over impressions; :meth:`preferences` is its sign (see the module docstring).
        """
        clicks = self._counted(result, _check_clicks(result, clicks))
        q = slot_posteriors(result, self.tau)
        m = result.m
        out = np.zeros((result.n, m, m), dtype=np.float64)
        for i in range(m):
            for j in range(i + 1, m):
                d = pairwise_win_difference(q[:, :, i], q[:, :, j], clicks)
                out[:, i, j] = d
                out[:, j, i] = -d
        return out

    def expected_outcome(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
        """``(n,)`` exact ``P(B wins) - P(A wins)`` for two rankers (Hofmann et al. 2013)."""
        return self.expected_preferences(result, clicks)[:, 1, 0]

    def _preferences(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.int8]:
        # win / loss / tie: the sign of the expected outcome (not the papers' aggregate for m > 2)
        e = self.expected_preferences(result, clicks)
        return np.where(np.abs(e) <= self.tie_tolerance, 0, np.sign(e)).astype(np.int8)

    def _outcome(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.int8]:
        q = slot_posteriors(result, self.tau)
        e = pairwise_win_difference(q[:, :, 1], q[:, :, 0], self._counted(result, clicks))
        return np.where(np.abs(e) <= self.tie_tolerance, 0, np.sign(e)).astype(np.int8)
