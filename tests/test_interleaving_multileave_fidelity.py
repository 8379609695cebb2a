"""Probabilistic multileaving against an exact brute-force reference, and its documented
pairwise behaviour when rankers are added (Schuth et al. 2015; Hofmann et al. 2011).

The reference below is independent of the implementation: it enumerates every
assignment of slots to rankers together with every list the generative process can
produce, with exact fractions, so ``P(L, a)`` is known exactly. From it follow the
list distribution, the per-impression credit ``E[X_i | L, c]`` and the per-impression
expected pairwise outcome ``E[sign(X_i - X_j) | L, c]`` (``X_i``: clicks on slots
ranker ``i`` drew), and, with an exact cascade user, the expected outcome of a whole
experiment.

Two documented behaviours are pinned with exact numbers:

* the paper's expected outcome itself is not invariant to adding rankers: a clone of A
  reverses the A-vs-D preference (4 documents, 2 slots);
* the per-impression *sign* of that expectation (``preferences()`` / ``outcome()``, the
  win / loss / tie outcome) reverses already on 3 documents, 2 slots, in a case where the
  expectation does not.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from onlineeval.interleaving import InterleavingResult, get_interleaver, stack_rankings

Key = tuple[tuple[int, ...], tuple[int, ...]]


# ------------------------------------------------------------------ exact reference
def _weights(lst: list[int], docs: list[int], tau: int) -> dict[int, Fraction]:
    """``r(d)^-tau`` with the rank of first occurrence, ``|list| + 1`` when absent."""
    rank: dict[int, int] = {}
    for pos, d in enumerate(lst):
        rank.setdefault(d, pos + 1)
    return {d: Fraction(1, rank.get(d, len(lst) + 1) ** tau) for d in docs}


def exact_joint(lists: list[list[int]], k: int, tau: int = 3) -> dict[Key, Fraction]:
    """``{(L, a): P(L, a)}``: per slot a ranker is drawn uniformly, then a document from its
    softmax over the documents not yet shown."""
    docs = list(dict.fromkeys(d for lst in lists for d in lst))
    w = [_weights(lst, docs, tau) for lst in lists]
    m = len(lists)
    out: dict[Key, Fraction] = {}

    def grow(shown: tuple[int, ...], assign: tuple[int, ...], p: Fraction, remaining: tuple[int, ...]) -> None:
        if len(shown) == k or not remaining:
            out[(shown, assign)] = out.get((shown, assign), Fraction(0)) + p
            return
        for i in range(m):
            total = sum(w[i][x] for x in remaining)
            for d in remaining:
                grow(shown + (d,), assign + (i,), p * Fraction(1, m) * w[i][d] / total,
                     tuple(x for x in remaining if x != d))

    grow((), (), Fraction(1), tuple(docs))
    return out


def exact_lists(joint: dict[Key, Fraction]) -> dict[tuple[int, ...], Fraction]:
    """``P(L)``, marginalising the assignments."""
    out: dict[tuple[int, ...], Fraction] = {}
    for (shown, _), p in joint.items():
        out[shown] = out.get(shown, Fraction(0)) + p
    return out


def by_list(joint: dict[Key, Fraction]) -> dict[tuple[int, ...], list[tuple[tuple[int, ...], Fraction]]]:
    """``{L: [(a, P(L, a)), ...]}``."""
    out: dict[tuple[int, ...], list[tuple[tuple[int, ...], Fraction]]] = {}
    for (shown, assign), p in joint.items():
        out.setdefault(shown, []).append((assign, p))
    return out


def exact_impression(grouped: dict[tuple[int, ...], list[tuple[tuple[int, ...], Fraction]]],
                     shown: tuple[int, ...], clicks: tuple[bool, ...],
                     m: int) -> tuple[list[Fraction], list[list[Fraction]]]:
    """``credit[i] = E[X_i | L, c]`` and ``pref[i][j] = E[sign(X_i - X_j) | L, c]`` (``grouped``: :func:`by_list`)."""
    total = Fraction(0)
    credit = [Fraction(0)] * m
    pref = [[Fraction(0)] * m for _ in range(m)]
    for assign, p in grouped[shown]:
        total += p
        x = [sum(1 for s, c in enumerate(clicks) if c and assign[s] == i) for i in range(m)]
        for i in range(m):
            credit[i] += p * x[i]
            for j in range(i + 1, m):
                pref[i][j] += p * ((x[i] > x[j]) - (x[i] < x[j]))
    for i in range(m):
        for j in range(i + 1, m):
            pref[j][i] = -pref[i][j]
    return [c / total for c in credit], [[v / total for v in row] for row in pref]


def cascade_patterns(shown: tuple[int, ...], attract: dict[int, Fraction],
                     stop: Fraction) -> dict[tuple[bool, ...], Fraction]:
    """Exact click-pattern distribution of the cascade user: scan top-down, click
    document ``d`` with probability ``attract[d]``, stop after a click with probability ``stop``."""
    out: dict[tuple[bool, ...], Fraction] = {}
    k = len(shown)

    def scan(j: int, pattern: tuple[bool, ...], p: Fraction) -> None:
        if j == k:
            out[pattern] = out.get(pattern, Fraction(0)) + p
            return
        a = attract.get(shown[j], Fraction(0))
        if a < 1:
            scan(j + 1, pattern + (False,), p * (1 - a))
        if a > 0:
            if stop > 0:
                done = pattern + (True,) + (False,) * (k - j - 1)
                out[done] = out.get(done, Fraction(0)) + p * a * stop
            if stop < 1:
                scan(j + 1, pattern + (True,), p * a * (1 - stop))

    scan(0, (), Fraction(1))
    return out


def _sign(x: Fraction) -> int:
    return (x > 0) - (x < 0)


def exact_experiment(lists: list[list[int]], k: int, attract: dict[int, Fraction], stop: Fraction,
                     i: int, j: int) -> tuple[Fraction, Fraction]:
    """Expected per-impression preference of ranker ``j`` over ``i`` over lists and cascade clicks:
    ``(E[E[sign(X_j - X_i) | L, c]], E[sign E[sign(X_j - X_i) | L, c]])`` (no click counts 0)."""
    joint = exact_joint(lists, k)
    grouped = by_list(joint)
    paper = binary = Fraction(0)
    for shown, p_list in exact_lists(joint).items():
        for clicks, p_click in cascade_patterns(shown, attract, stop).items():
            if not any(clicks):
                continue
            e = exact_impression(grouped, shown, clicks, len(lists))[1][j][i]
            paper += p_list * p_click * e
            binary += p_list * p_click * _sign(e)
    return paper, binary


def exact_realised_assignment(lists: list[list[int]], k: int, attract: dict[int, Fraction], stop: Fraction,
                              i: int, j: int) -> Fraction:
    """``E[sign(X_j - X_i)]`` with ``X`` counted on the assignment the process actually drew
    (what team-draft-style credit would see)."""
    out = Fraction(0)
    for (shown, assign), p in exact_joint(lists, k).items():
        for clicks, p_click in cascade_patterns(shown, attract, stop).items():
            xi = sum(1 for s, c in enumerate(clicks) if c and assign[s] == i)
            xj = sum(1 for s, c in enumerate(clicks) if c and assign[s] == j)
            out += p * p_click * _sign(Fraction(xj - xi))
    return out


# ------------------------------------------------------------------ helpers
def _batch(lists: list[list[int]], shown: list[tuple[int, ...]]) -> InterleavingResult:
    """Every row: the same input lists, one given shown list."""
    n = len(shown)
    width = max(len(lst) for lst in lists)
    mats = [np.tile(np.array(lst + [-1] * (width - len(lst))), (n, 1)) for lst in lists]
    ranking = np.array(shown, dtype=np.int32).reshape(n, -1)
    return InterleavingResult(ranking, np.zeros(ranking.shape, dtype=np.int8), stack_rankings(mats))


def _implementation_experiment(lists: list[list[int]], k: int, attract: dict[int, Fraction], stop: Fraction,
                               i: int, j: int) -> tuple[float, float]:
    """The same experiment with the implementation's per-impression outcomes, weighted by exact
    ``P(L) P(c | L)`` (the sampler is checked separately)."""
    il = get_interleaver("probabilistic_multileave")
    rows, weights = [], []
    for shown, p_list in exact_lists(exact_joint(lists, k)).items():
        for clicks, p_click in cascade_patterns(shown, attract, stop).items():
            rows.append((shown, clicks))
            weights.append(float(p_list * p_click))
    res = _batch(lists, [r[0] for r in rows])
    clicks = np.array([r[1] for r in rows], dtype=bool)
    w = np.array(weights)
    expected = il.expected_preferences(res, clicks)[:, j, i]
    signs = il.preferences(res, clicks)[:, j, i].astype(np.float64)
    return float(w @ expected), float(w @ signs)


# ------------------------------------------------------------------ tests: reference vs implementation
FOUR = [[1, 2, 3, 4], [4, 3, 2, 1], [2, 5, 1], [3, 1, 3, 5]]   # unequal lengths, absent docs, a duplicate
THREE = [[1, 2, 3, 4], [2, 4, 1, 3], [4, 1]]


@pytest.mark.parametrize("lists", [THREE, FOUR], ids=["three", "four"])
def test_credit_and_pairwise_preferences_equal_brute_force(lists: list[list[int]]) -> None:
    """Every list the process can produce (3 slots) with every click pattern."""
    m, k = len(lists), 3
    joint = exact_joint(lists, k)
    grouped = by_list(joint)
    shown_lists = sorted(grouped)
    rows = [(s, c) for s in shown_lists for c in itertools.product([False, True], repeat=k)]
    il = get_interleaver("probabilistic_multileave")
    res = _batch(lists, [r[0] for r in rows])
    clicks = np.array([r[1] for r in rows], dtype=bool)
    credit = il.credit(res, clicks)
    expected = il.expected_preferences(res, clicks)
    prefs = il.preferences(res, clicks)
    n_exact_ties = 0
    for r, (shown, pattern) in enumerate(rows):
        ex_credit, ex_pref = exact_impression(grouped, shown, pattern, m)
        np.testing.assert_allclose(credit[r], [float(c) for c in ex_credit], rtol=0, atol=1e-12)
        np.testing.assert_allclose(expected[r], [[float(v) for v in row] for row in ex_pref], rtol=0, atol=1e-12)
        assert prefs[r].tolist() == [[_sign(v) for v in row] for row in ex_pref]
        n_exact_ties += sum(v == 0 for a, row in enumerate(ex_pref) for b, v in enumerate(row)
                            if a < b and any(pattern))
    assert n_exact_ties > 0          # exact ties with clicks are exercised (and not turned into wins)


def test_sampler_list_and_assignment_distribution_four_rankers() -> None:
    """Frequencies of shown lists and of slot-to-ranker assignments agree with exact P within 4 SE."""
    k, n = 3, 100_000
    joint = exact_joint(FOUR, k)
    p_list = exact_lists(joint)
    p_assign: dict[tuple[int, ...], Fraction] = {}
    for (_, a), p in joint.items():
        p_assign[a] = p_assign.get(a, Fraction(0)) + p
    width = max(len(lst) for lst in FOUR)
    mats = [np.tile(np.array(lst + [-1] * (width - len(lst))), (n, 1)) for lst in FOUR]
    res = get_interleaver("probabilistic_multileave").interleave(mats, np.random.default_rng(11), length=k)
    for observed, exact in ((res.ranking, p_list), (res.team, p_assign)):
        keys, counts = np.unique(observed, axis=0, return_counts=True)
        freq = {tuple(int(x) for x in key): c / n for key, c in zip(keys, counts)}
        assert set(freq) <= set(exact)
        for key, p in exact.items():
            pf = float(p)
            assert abs(freq.get(key, 0.0) - pf) <= 4 * np.sqrt(pf * (1 - pf) / n) + 1e-12, key


# ------------------------------------------------------------------ tests: documented behaviour
NAVIGATIONAL = Fraction(1)   # stop after the click


def test_a_clone_of_a_reverses_the_paper_preference_between_a_and_d() -> None:
    """Documented property of probabilistic multileaving itself (expected outcome, as in the paper).

    Documents 0-3, 2 slots, a navigational cascade user who clicks document 1 whenever shown.
    A and D both rank document 1 second. With A and D only, D is (slightly) preferred; adding
    a third ranker identical to A makes lists that start with A's top document more likely,
    after which A (whose top weight is spent) draws document 1 far more likely than D does,
    so A is preferred.
    """
    a, d = [0, 1, 2, 3], [2, 1, 3, 0]
    click = {1: Fraction(1)}
    two = exact_experiment([a, d], 2, click, NAVIGATIONAL, 0, 1)
    three = exact_experiment([a, d, list(a)], 2, click, NAVIGATIONAL, 0, 1)
    assert two[0] == Fraction(707616, 309383855)              # +0.00229: D preferred
    assert three[0] == Fraction(-5474537659, 103024823715)    # -0.0531: A preferred
    for lists, exact in (([a, d], two), ([a, d, list(a)], three)):
        got_expected, got_sign = _implementation_experiment(lists, 2, click, NAVIGATIONAL, 0, 1)
        assert got_expected == pytest.approx(float(exact[0]), abs=1e-13)
        assert got_sign == pytest.approx(float(exact[1]), abs=1e-13)


def test_sign_outcome_reverses_where_the_expected_outcome_does_not() -> None:
    """Documented property of the per-impression sign (``preferences()``), not of the paper.

    Documents 0-2, 2 slots, a navigational user who clicks document 2 whenever shown;
    A = [0, 1, 2], D = [1, 2, 0] (D ranks the clicked document higher), X = [0, 2, 1].
    The expected outcome prefers D with and without X. The sign prefers D for two rankers
    but A once X is added: after X (or A) shows document 0 first, A's posterior for
    document 2 slightly exceeds D's (A's top weight is spent, D's is not), a small margin
    that the sign turns into a full win, while D's large margins after ``[1, 2]`` count no more.
    """
    a, d, x = [0, 1, 2], [1, 2, 0], [0, 2, 1]
    click = {2: Fraction(1)}
    two = exact_experiment([a, d], 2, click, NAVIGATIONAL, 0, 1)
    three = exact_experiment([a, d, x], 2, click, NAVIGATIONAL, 0, 1)
    assert two == (Fraction(239989, 1265040), Fraction(239459, 1265040))      # both > 0: D preferred
    assert three == (Fraction(239377, 2846340), Fraction(-3379, 105420))      # expectation > 0, sign < 0
    for lists, exact in (([a, d], two), ([a, d, x], three)):
        got_expected, got_sign = _implementation_experiment(lists, 2, click, NAVIGATIONAL, 0, 1)
        assert got_expected == pytest.approx(float(exact[0]), abs=1e-13)
        assert got_sign == pytest.approx(float(exact[1]), abs=1e-13)


def test_end_to_end_sampled_experiment_matches_exact_expectation() -> None:
    """Sampler + cascade clicks + expected_preferences, averaged over impressions, within 4 SE of
    the exact experiment value (clone example, three rankers), and of the outcome computed on
    the team labels the sampler drew."""
    a, d = [0, 1, 2, 3], [2, 1, 3, 0]
    n = 100_000
    rng = np.random.default_rng(5)
    il = get_interleaver("probabilistic_multileave")
    res = il.interleave([np.tile(a, (n, 1)), np.tile(d, (n, 1)), np.tile(a, (n, 1))], rng, length=2)
    clicks = res.ranking == 1                      # navigational user: clicks document 1 when shown
    e = il.expected_preferences(res, clicks)[:, 1, 0]
    exact = -5474537659 / 103024823715
    assert abs(e.mean() - exact) <= 4 * e.std(ddof=1) / np.sqrt(n)
    assert e.mean() < 0
    # the outcome on the drawn team labels has the same expectation (paired difference within 4 SE)
    realised = np.sign((clicks & (res.team == 1)).sum(1) - (clicks & (res.team == 0)).sum(1))
    diff = e - realised
    assert abs(diff.mean()) <= 4 * diff.std(ddof=1) / np.sqrt(n)


@pytest.mark.parametrize("lists,k,doc", [
    ([[0, 1, 2], [1, 2, 0], [0, 2, 1]], 2, 2),
    ([[0, 1, 2, 3], [2, 1, 3, 0], [0, 1, 2, 3]], 2, 1),
    ([[0, 1, 2], [1, 2, 0]], 3, 2),
])
def test_expected_outcome_is_unbiased_for_the_realised_assignment_and_the_sign_is_not(
        lists: list[list[int]], k: int, doc: int) -> None:
    """Clicks depend on the list only, so ``E_{L,c}[E[o | L, c]] = E_{L,a,c}[o(a, c)]``: the
    paper's marginalised outcome has the expectation of the outcome on the drawn assignment
    (with less variance). The per-impression sign has not; this is why its average can
    reverse when rankers are added while the expectation follows the realised assignments."""
    paper, binary = exact_experiment(lists, k, {doc: Fraction(1)}, NAVIGATIONAL, 0, 1)
    assert paper == exact_realised_assignment(lists, k, {doc: Fraction(1)}, NAVIGATIONAL, 0, 1)
    assert binary != paper
