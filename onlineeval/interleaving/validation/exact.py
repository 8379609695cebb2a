"""Exact reference distributions of a method's draw on the battery's small scenarios.

The equivalence checks compare a candidate's draws with onlineeval's reference method. A second
*sampled* reference doubles the variance of every comparison (two samples of ``n`` have the
power of one sample of ``n / 2``); on the battery's lists of at most six slots the reference's
distribution is known exactly, so the candidate's counts are tested against exact probabilities
(a goodness-of-fit test, :func:`~onlineeval.interleaving.validation.stattests.goodness_of_fit`).

How each method's randomness is enumerated (from the method's definition, independently of the
vectorised kernels; tests/test_validate_exact.py checks every distribution against the kernels,
by brute force and by Monte Carlo):

* team-draft and team-draft multileaving: at every slot the rankers with an unused document and
  the fewest picks so far are equally likely to pick (the two-ranker round coin is this rule);
  a tree of at most ``m!`` branches per round, every complete draw with its probability;
* balanced: one fair coin (which list leads), two draws;
* probabilistic and probabilistic multileaving: each slot's ranker uniform over the ``m``
  rankers, its document drawn from the ranker's softmax ``r^-tau`` over the documents not yet
  shown. The per-position marginals come from a dynamic programme over the *set* of shown
  documents (the next slot depends on nothing else); the distribution of whole shown lists
  (for the end-to-end outcome check) is enumerated when there are at most
  :data:`MAX_LISTS` of them;
* optimized: the reference's own distribution over allowed lists (its linear programme's
  solution, the distribution its draw samples from).

A method without an enumeration here (or a scenario too large) keeps the sampled reference.
For ``--log`` (every impression has its own lists and page length), :func:`team_probabilities` gives one
impression's per-slot team probabilities, up to :data:`MAX_LOG_DRAWS` team-draft pick orders.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.interleaving.balanced import Balanced
from onlineeval.interleaving.base import Interleaver
from onlineeval.interleaving.optimized import Optimized
from onlineeval.interleaving.probabilistic import Probabilistic
from onlineeval.interleaving.team_draft import TeamDraft

__all__ = ["MAX_LISTS", "MAX_LOG_DRAWS", "ExactDraws", "exact_draws", "team_probabilities"]

Lists = tuple[tuple[int, ...], ...]

#: largest number of distinct shown lists enumerated for the end-to-end outcome check (each is
#: credited under all ``2^k`` click vectors); beyond it that scenario's outcome check is sampled
MAX_LISTS = 1000
#: probabilistic methods: the per-position programme runs over subsets of the documents (``2^U`` states);
#: above this many distinct documents the battery samples the reference instead
MAX_DP_DOCUMENTS = 12
#: largest number of pick orders enumerated for one logged impression (``--log``): team-draft and team-draft
#: multileaving have at most ``(m!)^ceil(k/m)`` on a page of ``k`` slots (two rankers: pages of up to 24 slots;
#: three: 12; four: 8); an impression above it is tested against a sampled reference
MAX_LOG_DRAWS = 4096


@dataclass(frozen=True)
class ExactDraws:
    """The exact distribution of one method's draw on one tuple of input lists.

    Attributes
    ----------
    length:
        Number of shown slots ``k`` of the reference.
    teams_marginal, docs_marginal:
        Per position ``j < k``, ``{label: probability}`` of the team label and of the shown
        document (``-1``: empty slot); probabilities sum to one.
    shown, teams, probs:
        ``(L, k)`` every distinct draw (shown list and team labels) with its probability, or
        ``None`` when there are more than :data:`MAX_LISTS` (marginals only). For probabilistic
        methods ``teams`` is ``-1`` (the reference's outcome depends on the shown list alone).
    how:
        One phrase saying how the distribution was obtained (shown in the report).
    """

    length: int
    teams_marginal: tuple[dict[int, float], ...]
    docs_marginal: tuple[dict[int, float], ...]
    shown: NDArray[np.int64] | None
    teams: NDArray[np.int64] | None
    probs: NDArray[np.float64] | None
    how: str

    def marginal(self, kind: str, j: int) -> dict[int, float]:
        """``{label: probability}`` of position ``j`` (``kind`` ``"team"`` or ``"doc"``); past ``k``: empty."""
        if j >= self.length:
            return {-1: 1.0}
        return (self.teams_marginal if kind == "team" else self.docs_marginal)[j]


def _marginals(shown: NDArray[np.int64], teams: NDArray[np.int64],
               probs: NDArray[np.float64]) -> tuple[tuple[dict[int, float], ...], tuple[dict[int, float], ...]]:
    out: list[tuple[dict[int, float], ...]] = []
    for arr in (teams, shown):
        cols = []
        for j in range(arr.shape[1]):
            d: dict[int, float] = {}
            for v, p in zip(arr[:, j].tolist(), probs.tolist()):
                d[v] = d.get(v, 0.0) + p
            cols.append(d)
        out.append(tuple(cols))
    return out[0], out[1]


def _from_rows(rows: list[tuple[list[int], list[int], float]], length: int, how: str) -> ExactDraws:
    """Merge identical draws, pad to ``length``, and build the marginals."""
    merged: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}
    for s, t, p in rows:
        key = (tuple(s) + (-1,) * (length - len(s)), tuple(t) + (-1,) * (length - len(t)))
        merged[key] = merged.get(key, 0.0) + p
    keys = sorted(merged)
    shown = np.asarray([k[0] for k in keys], dtype=np.int64).reshape(len(keys), length)
    teams = np.asarray([k[1] for k in keys], dtype=np.int64).reshape(len(keys), length)
    probs = np.asarray([merged[k] for k in keys], dtype=np.float64)
    tm, dm = _marginals(shown, teams, probs)
    return ExactDraws(length, tm, dm, shown, teams, probs, how)


def _team_draft_orders(lists: Lists, length: int) -> Iterator[tuple[list[int], list[int], float]]:
    """Every team-draft pick order as ``(shown, team, probability)``: the available rankers with the fewest picks are
    equally likely to pick next, each its highest document not yet shown; a draw ends when the page is full or every
    list is used up."""
    m = len(lists)
    stack: list[tuple[list[int], set[int], list[int], tuple[int, ...], float]] = [([], set(), [], (0,) * m, 1.0)]
    while stack:
        shown, seen, team, picks, p = stack.pop()
        nxt = [next((d for d in lst if d not in seen), None) for lst in lists]
        avail = [i for i in range(m) if nxt[i] is not None]
        if len(shown) == length or not avail:
            yield shown, team, p
            continue
        low = min(picks[i] for i in avail)
        elig = [i for i in avail if picks[i] == low]
        for i in elig:
            d = nxt[i]
            assert d is not None
            stack.append((shown + [d], seen | {d}, team + [i], tuple(c + (j == i) for j, c in enumerate(picks)),
                          p / len(elig)))


def _team_draft(lists: Lists, length: int) -> ExactDraws:
    """Every team-draft draw (:func:`_team_draft_orders`)."""
    return _from_rows(list(_team_draft_orders(lists, length)), length,
                      "enumerated: every pick order of the fewest-picks rule")


def _balanced(lists: Lists, length: int) -> ExactDraws:
    """Both balanced draws: the leading list alternates with the other, documents already shown skipped."""
    rows: list[tuple[list[int], list[int], float]] = []
    width = max(len(x) for x in lists)
    for lead in (0, 1):
        shown: list[int] = []
        team: list[int] = []
        for r in range(width):
            for i in (lead, 1 - lead):
                if r < len(lists[i]) and lists[i][r] not in shown and len(shown) < length:
                    shown.append(lists[i][r])
                    team.append(i)
        rows.append((shown, team, 0.5))
    return _from_rows(rows, length, "enumerated: the two equally likely leading lists")


def _softmax(lists: Lists, tau: float) -> tuple[list[int], NDArray[np.float64]]:
    """The documents (first occurrence order) and their weights ``r_i(d)^-tau`` per ranker, ``(m, U)``."""
    docs: list[int] = []
    for lst in lists:
        for d in lst:
            if d not in docs:
                docs.append(d)
    w = np.empty((len(lists), len(docs)))
    for i, lst in enumerate(lists):
        for u, d in enumerate(docs):
            rank = lst.index(d) + 1 if d in lst else len(lst) + 1
            w[i, u] = float(rank) ** (-tau)
    return docs, w


def _probabilistic(lists: Lists, length: int, tau: float) -> ExactDraws:
    """Per-position marginals by a programme over the set of shown documents; whole lists when few."""
    m = len(lists)
    docs, w = _softmax(lists, tau)
    n_docs = len(docs)
    full = (1 << n_docs) - 1

    def step(mask: int) -> NDArray[np.float64]:
        """P(next document = u | documents in ``mask`` shown), over ``u``."""
        rest = np.asarray([(mask >> u) & 1 == 0 for u in range(n_docs)])
        wr = w * rest
        return (wr / wr.sum(axis=1, keepdims=True)).mean(axis=0)

    states: dict[int, float] = {0: 1.0}
    teams_m: list[dict[int, float]] = []
    docs_m: list[dict[int, float]] = []
    for _ in range(length):
        nxt: dict[int, float] = {}
        dm: dict[int, float] = {}
        empty = 0.0
        for mask, p in states.items():
            if mask == full:
                empty += p
                nxt[mask] = nxt.get(mask, 0.0) + p
                continue
            q = step(mask)
            for u in range(n_docs):
                if q[u] > 0:
                    dm[docs[u]] = dm.get(docs[u], 0.0) + p * q[u]
                    nxt[mask | (1 << u)] = nxt.get(mask | (1 << u), 0.0) + p * q[u]
        tm = {i: (1.0 - empty) / m for i in range(m)}
        if empty > 0:
            tm[-1] = empty
            dm[-1] = empty
        teams_m.append(tm)
        docs_m.append(dm)
        states = nxt
    n_lists = 1
    for j in range(min(length, n_docs)):
        n_lists *= n_docs - j
    shown = teams = probs = None
    if n_lists <= MAX_LISTS:
        rows: list[tuple[list[int], list[int], float]] = []
        stack: list[tuple[list[int], int, float]] = [([], 0, 1.0)]
        while stack:
            seq, mask, p = stack.pop()
            if len(seq) == length or mask == full:
                rows.append(([docs[u] for u in seq], [], p))
                continue
            q = step(mask)
            for u in range(n_docs):
                if q[u] > 0:
                    stack.append((seq + [u], mask | (1 << u), p * q[u]))
        ex = _from_rows(rows, length, "")
        shown, teams, probs = ex.shown, ex.teams, ex.probs
    how = (f"enumerated: each slot's ranker uniform, its document from its softmax over ranks (temperature {tau:g}) "
           "over the documents not yet shown")
    return ExactDraws(length, tuple(teams_m), tuple(docs_m), shown, teams, probs, how)


def _optimized(il: Optimized, lists: Lists, length: int) -> ExactDraws:
    dist = il.distribution([list(x) for x in lists], length)
    rows = [(s.tolist(), t.tolist(), float(p)) for s, t, p in zip(dist.lists.astype(np.int64),
                                                                    dist.teams.astype(np.int64), dist.probabilities)
            if p > 0]
    return _from_rows(rows, length, f"the reference's linear programme: {len(rows)} allowed lists with "
                                    "positive probability")


def exact_draws(interleaver: Interleaver, lists: Sequence[Sequence[int]],
                length: int | None = None) -> ExactDraws | None:
    """The exact distribution of ``interleaver``'s draw on ``lists`` with a page of ``length`` slots.

    ``length`` defaults to the longest list. ``None`` for an interleaver this module cannot enumerate,
    and for probabilistic methods on more than :data:`MAX_DP_DOCUMENTS` distinct documents (the
    battery then samples the reference).
    """
    key = tuple(tuple(int(d) for d in x) for x in lists)
    length = max(len(x) for x in key) if length is None else int(length)
    opts = tuple(sorted((k, repr(v)) for k, v in interleaver.options.items()))
    if isinstance(interleaver, Optimized):
        return _optimized(interleaver, key, length)        # cached by the interleaver itself
    return _cached(type(interleaver), opts, key, length, _tau(interleaver))


def _tau(il: Interleaver) -> float | None:
    return float(il.tau) if isinstance(il, Probabilistic) else None


@lru_cache(maxsize=256)
def _cached(cls: type, opts: Any, lists: Lists, length: int, tau: float | None) -> ExactDraws | None:
    if issubclass(cls, TeamDraft):
        return _team_draft(lists, length)
    if issubclass(cls, Balanced):
        return _balanced(lists, length)
    if issubclass(cls, Probabilistic) and tau is not None:
        if len({d for x in lists for d in x}) > MAX_DP_DOCUMENTS:
            return None
        return _probabilistic(lists, length, tau)
    return None


def team_probabilities(interleaver: Interleaver, lists: Sequence[Sequence[int]], length: int,
                       max_draws: int = MAX_LOG_DRAWS) -> NDArray[np.float64] | None:
    """Exact ``P(team label of slot j = i)`` of ``interleaver``'s draw on ``lists`` with a page of ``length`` slots.

    A ``(length, m + 1)`` array, column ``m``: the slot is left empty. ``None`` where this module cannot
    enumerate the method, or team-draft's pick orders number more than ``max_draws`` (bound
    ``(m!)^ceil(length/m)``). Probabilistic methods need no enumeration: each slot's ranker is uniform
    whatever the lists, so slot ``j`` is ``1/m`` per ranker while the lists hold more than ``j`` distinct
    documents. Team-draft's slots are ``1/m`` per ranker when every list holds at least ``length``
    documents (each round's pick order is uniform over the ``m`` rankers and none runs out before the page is
    full); otherwise its pick orders are enumerated on the lists cut to ``length`` (a ranker never reaches
    deeper: its next document is its first unshown one, and a page holds ``length``).
    """
    key = tuple(tuple(int(d) for d in x) for x in lists)
    m = len(key)
    out = np.zeros((length, m + 1))
    if isinstance(interleaver, Probabilistic):
        live = min(length, len({d for x in key for d in x}))
        out[:live, :m] = 1.0 / m
        out[live:, m] = 1.0
        return out
    if isinstance(interleaver, TeamDraft):
        if min(len(x) for x in key) >= length:      # no ranker runs out before the page is full: every round
            out[:, :m] = 1.0 / m                     # is a uniform order of all m rankers (the last, partial
            return out                               # round's slots are the first of such an order)
        if math.factorial(m) ** -(-length // m) > max_draws:
            return None
        return _team_draft_teams(tuple(x[:length] for x in key), length)
    if isinstance(interleaver, Balanced):
        return _balanced_teams(key, length)
    if isinstance(interleaver, Optimized):
        ex = _optimized(interleaver, key, length)
    else:
        return None
    for j, probs in enumerate(ex.teams_marginal):
        for t, p in probs.items():
            out[j, m if t < 0 else t] += p
    return out


def _team_draft_teams(lists: Lists, length: int) -> NDArray[np.float64]:
    """:func:`_team_draft`'s team marginals alone, ``(length, m + 1)``: the same tree, no draws kept."""
    m = len(lists)
    out = np.zeros((length, m + 1))
    for _, team, p in _team_draft_orders(lists, length):
        out[np.arange(len(team)), team] += p
        out[len(team):, m] += p
    return out


def _balanced_teams(lists: Lists, length: int) -> NDArray[np.float64]:
    """:func:`_balanced`'s team marginals alone, ``(length, 3)``: the two leads, documents shown once."""
    out = np.zeros((length, 3))
    width = max(len(x) for x in lists)
    for lead in (0, 1):
        seen: set[int] = set()
        j = 0
        for r in range(width):
            for i in (lead, 1 - lead):
                if j < length and r < len(lists[i]) and lists[i][r] not in seen:
                    seen.add(lists[i][r])
                    out[j, i] += 0.5
                    j += 1
            if j == length:
                break
        out[j:, 2] += 0.5
    return out
