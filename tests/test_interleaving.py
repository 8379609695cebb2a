"""Team-draft and balanced interleaving: hand-worked examples, invariants, fidelity."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.errors import ConfigError, InputError
from onlineeval.interleaving import available_interleavers, get_interleaver
from onlineeval.interleaving.balanced import BALANCED_COUNTER_EXAMPLE


# ---------------------------------------------------------------- helpers
def classic_team_draft(a: list[int], b: list[int], coins: list[int], k: int) -> tuple[list[int], list[int]]:
    """Radlinski et al. (2008) written the textbook way, one impression, given coins.

    ``coins[j]`` is consulted at slot ``j`` when both teams have the same size
    (1 = B picks first), which is the coin schedule of the vectorised version.
    """
    shown: list[int] = []
    team: list[int] = []
    na = nb = 0
    while len(shown) < k:
        rest_a = [d for d in a if d not in shown]
        rest_b = [d for d in b if d not in shown]
        if not rest_a and not rest_b:
            break
        j = len(shown)
        if rest_a and (not rest_b or na < nb or (na == nb and coins[j] == 0)):
            shown.append(rest_a[0])
            team.append(0)
            na += 1
        else:
            shown.append(rest_b[0])
            team.append(1)
            nb += 1
    return shown, team


def random_lists(rng: np.random.Generator, n: int, k: int, pool: int) -> np.ndarray:
    """``n`` random lists of ``k`` distinct documents drawn from ``range(pool)``."""
    return np.argsort(rng.random((n, pool)), axis=1)[:, :k].astype(np.int32)


def cascade_clicks(ranking: np.ndarray, rel: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Navigational cascade user: scans top-down, clicks with P(rel), stops after a click."""
    p = np.where(ranking >= 0, rel[np.maximum(ranking, 0)], 0.0)
    u = rng.random(ranking.shape)
    attempt = u < p
    first = np.argmax(attempt, axis=1)
    clicks = np.zeros(ranking.shape, dtype=bool)
    has = attempt.any(axis=1)
    clicks[np.flatnonzero(has), first[has]] = True
    return clicks


# ---------------------------------------------------------------- registry
def test_registry_and_unknown_name() -> None:
    names = available_interleavers()
    assert {"team_draft", "balanced"} <= set(names)
    with pytest.raises(ConfigError) as exc:
        get_interleaver("team-draft")
    assert "team_draft" in str(exc.value) and "balanced" in str(exc.value)
    with pytest.raises(ConfigError) as exc2:
        get_interleaver("team_draft", tau=3)
    assert "prefix_credit" in str(exc2.value)
    with pytest.raises(ConfigError):
        get_interleaver("team_draft", prefix_credit="yes")


def test_bad_inputs_raise_clear_errors() -> None:
    il = get_interleaver("team_draft")
    rng = np.random.default_rng(0)
    a = np.array([[1, 2, 3]])
    with pytest.raises(InputError, match="rows"):
        il.interleave([a, np.array([[1, 2], [3, 4]])], rng)
    with pytest.raises(InputError, match="trail"):
        il.interleave([a, np.array([[1, -1, 3]])], rng)
    with pytest.raises(InputError, match="integer"):
        il.interleave([a, np.array([[1.0, 2.0, 3.0]])], rng)
    with pytest.raises(InputError, match="2-D"):
        il.interleave([a, np.array([1, 2, 3])], rng)
    with pytest.raises(InputError, match="rankings"):
        get_interleaver("balanced").interleave([a, a, a], rng)
    with pytest.raises(ConfigError, match="length"):
        il.interleave([a, a], rng, length=0)
    res = il.interleave([a, a], rng)
    with pytest.raises(InputError, match="shape"):
        il.outcome(res, np.zeros((1, 2), dtype=bool))


# ---------------------------------------------------------------- team draft
def test_team_draft_hand_worked() -> None:
    il = get_interleaver("team_draft")
    a = np.array([[1, 2, 3, 4]])
    b = np.array([[2, 3, 4, 5]])
    seen = {}
    for seed in range(40):
        res = il.interleave([a, b], np.random.default_rng(seed))
        seen[(tuple(res.ranking[0]), tuple(res.team[0]))] = True
    # round 1: A takes 1, B takes 2 (either order); round 2: the first picker takes 3, the other 4
    expected = {
        ((1, 2, 3, 4), (0, 1, 0, 1)), ((1, 2, 3, 4), (0, 1, 1, 0)),
        ((2, 1, 3, 4), (1, 0, 0, 1)), ((2, 1, 3, 4), (1, 0, 1, 0)),
    }
    assert set(seen) == expected
    # clicks on 3 and 4: one each -> tie; click on 3 only: credit to 3's team
    res = il.interleave([a, b], np.random.default_rng(1))
    clicks = np.isin(res.ranking, [3, 4])
    assert il.outcome(res, clicks)[0] == 0
    clicks3 = res.ranking == 3
    team3 = res.team[0][res.ranking[0] == 3][0]
    assert il.outcome(res, clicks3)[0] == (1 if team3 == 1 else -1)
    np.testing.assert_array_equal(il.credit(res, clicks3)[0], [team3 == 0, team3 == 1])
    # no click: tie
    assert il.outcome(res, np.zeros_like(clicks))[0] == 0


def test_team_draft_matches_textbook_algorithm_with_same_coins() -> None:
    rng = np.random.default_rng(7)
    n, k = 400, 8
    a = random_lists(rng, n, k, 12)
    b = random_lists(rng, n, k, 12)
    # shorter lists, duplicates inside a list, identical rows
    a[:50, 5:] = -1
    b[50:100, 3:] = -1
    b[100:120] = a[100:120]
    a[120:140, 1] = a[120:140, 0]
    seed = 99
    res = get_interleaver("team_draft").interleave([a, b], np.random.default_rng(seed))
    coins = np.random.default_rng(seed).integers(0, 2, size=(k, n), dtype=np.int8)
    for r in range(n):
        la = [int(d) for d in a[r] if d >= 0]
        lb = [int(d) for d in b[r] if d >= 0]
        shown, team = classic_team_draft(la, lb, list(coins[:, r]), k)
        got = [int(d) for d in res.ranking[r] if d >= 0]
        assert got == shown, r
        assert [int(t) for t in res.team[r][: len(got)]] == team, r
        assert (res.ranking[r][len(got):] == -1).all() and (res.team[r][len(got):] == -1).all()


def test_team_draft_prefix_balance_and_structure() -> None:
    rng = np.random.default_rng(3)
    n, k = 5000, 10
    a = random_lists(rng, n, k, 15)
    b = random_lists(rng, n, k, 15)
    res = get_interleaver("team_draft").interleave([a, b], rng)
    counts_a = np.cumsum(res.team == 0, axis=1)
    counts_b = np.cumsum(res.team == 1, axis=1)
    assert np.abs(counts_a - counts_b).max() <= 1
    # every shown document comes from its team's list, no duplicates
    for r in range(0, n, 50):
        row = res.ranking[r]
        assert len(set(row.tolist())) == k
        for d, t in zip(row, res.team[r]):
            assert d in (a[r] if t == 0 else b[r])


def test_team_draft_does_not_mutate_inputs() -> None:
    rng = np.random.default_rng(0)
    a = random_lists(rng, 20, 5, 8)
    b = random_lists(rng, 20, 5, 8)
    a0, b0 = a.copy(), b.copy()
    il = get_interleaver("team_draft")
    res = il.interleave([a, b], rng)
    clicks = rng.random(res.ranking.shape) < 0.3
    c0 = clicks.copy()
    il.outcome(res, clicks)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
    np.testing.assert_array_equal(clicks, c0)


def test_team_draft_random_clicks_zero_mean() -> None:
    rng = np.random.default_rng(11)
    n, k = 100_000, 10
    a = random_lists(rng, n, k, 30)
    b = np.sort(a, axis=1)  # a systematically different ranker
    il = get_interleaver("team_draft")
    res = il.interleave([a, b], rng)
    clicks = rng.random((n, k)) < 0.15
    out = il.outcome(res, clicks).astype(float)
    se = out.std(ddof=1) / np.sqrt(n)
    assert abs(out.mean()) < 4 * se


def test_team_draft_pareto_better_ranker_wins_for_cascade_user() -> None:
    rng = np.random.default_rng(5)
    n, k = 50_000, 10
    rel = np.linspace(0.9, 0.0, 40)             # document d has click probability rel[d], decreasing in d
    b = np.sort(random_lists(rng, n, k, 20), axis=1)
    a = np.where(rng.random((n, k)) < 0.5, b + 20, b)   # some slots swapped for a worse document
    assert (rel[b] >= rel[a]).all() and (rel[b] > rel[a]).any(axis=1).mean() > 0.99
    il = get_interleaver("team_draft")
    res = il.interleave([a, b], rng)
    out = il.outcome(res, cascade_clicks(res.ranking, rel, rng)).astype(float)
    se = out.std(ddof=1) / np.sqrt(n)
    assert out.mean() > 4 * se


def test_team_draft_prefix_credit_option() -> None:
    a = np.array([[1, 2, 3, 4]])
    b = np.array([[1, 2, 4, 3]])
    rng = np.random.default_rng(0)
    with_prefix = get_interleaver("team_draft")
    without = get_interleaver("team_draft", prefix_credit=False)
    res = with_prefix.interleave([a, b], rng)
    assert tuple(res.ranking[0][:2]) == (1, 2)
    clicks = np.array([[True, False, False, False]])
    assert with_prefix.credit(res, clicks).sum() == 1
    assert without.credit(res, clicks).sum() == 0
    assert without.outcome(res, clicks)[0] == 0


def test_team_draft_multileaving_balance_and_uniform_first_pick() -> None:
    rng = np.random.default_rng(2)
    n, k, m = 30_000, 9, 3
    lists = [random_lists(rng, n, k, 12) for _ in range(m)]
    il = get_interleaver("team_draft")
    res = il.interleave(lists, rng)
    counts = np.stack([np.cumsum(res.team == i, axis=1) for i in range(m)])
    assert (counts.max(axis=0) - counts.min(axis=0)).max() <= 1
    first = np.bincount(res.team[:, 0], minlength=m) / n
    se = np.sqrt(first * (1 - first) / n)
    assert (np.abs(first - 1 / m) < 4 * se).all()
    clicks = rng.random((n, k)) < 0.2
    pref = il.preferences(res, clicks)
    assert pref.shape == (n, m, m)
    np.testing.assert_array_equal(pref, -pref.transpose(0, 2, 1))
    with pytest.raises(InputError, match="preferences"):
        il.outcome(res, clicks)


def test_single_impression_api() -> None:
    il = get_interleaver("team_draft")
    one = il.interleave_one([[1, 2, 3], [3, 2, 1]], np.random.default_rng(0))
    assert sorted(one.ranking) == [1, 2, 3]
    clicked_doc = one.ranking[0]
    expect = 1 if one.team[0] == 1 else -1
    assert il.outcome_one([[1, 2, 3], [3, 2, 1]], one, [clicked_doc]) == expect
    assert il.outcome_one([[1, 2, 3], [3, 2, 1]], one, np.array([True, False, False])) == expect


# ---------------------------------------------------------------- balanced
def test_balanced_hand_worked() -> None:
    il = get_interleaver("balanced")
    a = np.array([[1, 2, 3]])
    b = np.array([[2, 3, 4]])
    lists = set()
    for seed in range(30):
        res = il.interleave([a, b], np.random.default_rng(seed))
        lists.add((tuple(res.ranking[0]), tuple(res.team[0])))
    # A first: A1=1, B1=2, A2=2 (skip), B2=3, A3=3 (skip), B3=4; B first: 2, 1, 3, (2 skip), (3 skip), 4
    assert lists == {((1, 2, 3), (0, 1, 1)), ((2, 1, 3), (1, 0, 1))}
    res = il.interleave([a, b], np.random.default_rng(0), length=4)
    assert res.ranking[0][3] == 4
    # Joachims credit, shown 1 2 3 4 (A first): click on 2 only -> kappa = 1 (rank of 2 in B) -> h_A = 0, h_B = 1
    shown = np.array([[1, 2, 3, 4]], dtype=np.int32)
    from onlineeval.interleaving import InterleavingResult, stack_rankings

    r = InterleavingResult(shown, np.array([[0, 1, 1, 1]], dtype=np.int8), stack_rankings([a, b]))
    np.testing.assert_array_equal(il.credit(r, shown == 2)[0], [0, 1])
    # click on 1 only -> kappa = 1 -> h_A = 1, h_B = 0
    np.testing.assert_array_equal(il.credit(r, shown == 1)[0], [1, 0])
    # clicks on 1 and 3: lowest click 3, rank 3 in A, 2 in B -> kappa = 2: A top-2 {1,2} has 1 click, B {2,3} has 1
    np.testing.assert_array_equal(il.credit(r, np.isin(shown, [1, 3]))[0], [1, 1])
    assert il.outcome(r, np.isin(shown, [1, 3]))[0] == 0


def test_balanced_documented_bias_under_random_clicks() -> None:
    a_list, b_list, p_b = BALANCED_COUNTER_EXAMPLE
    rng = np.random.default_rng(8)
    n = 100_000
    a = np.tile(np.array(a_list), (n, 1))
    b = np.tile(np.array(b_list), (n, 1))
    il = get_interleaver("balanced")
    res = il.interleave([a, b], rng, length=4)
    pos = rng.integers(0, 4, size=n)
    clicks = np.zeros((n, 4), dtype=bool)
    clicks[np.arange(n), pos] = True
    out = il.outcome(res, clicks)
    assert set(np.unique(out)) <= {-1, 1}
    # the documented 3/4 re-derived from Joachims' definition: both coin outcomes show 4 documents
    shown_lists = [[1, 2, 3, 4], [2, 1, 3, 4]]
    derived = np.mean([np.sign(np.subtract(*joachims_credit(list(a_list), list(b_list), s,
                                                          [i == c for i in range(4)])[::-1])) > 0
                       for s in shown_lists for c in range(4)])
    assert derived == p_b == 0.75
    assert {tuple(r) for r in res.ranking[:50].tolist()} == {tuple(x) for x in shown_lists}
    wins = (out == 1).mean()
    se = np.sqrt(p_b * (1 - p_b) / n)
    assert abs(wins - p_b) < 4 * se            # the documented bias: B wins 3/4 of the time
    # team-draft on the same pair is unbiased while both lists have documents left (k = 3);
    # at k = 4 A has run out and B fills the last slot, so B collects more random clicks
    td = get_interleaver("team_draft")
    res2 = td.interleave([a, b], rng, length=3)
    clicks3 = np.zeros((n, 3), dtype=bool)
    clicks3[np.arange(n), rng.integers(0, 3, size=n)] = True
    out2 = td.outcome(res2, clicks3).astype(float)
    assert abs(out2.mean()) < 4 * out2.std(ddof=1) / np.sqrt(n)


# ---------------------------------------------------------------- options every team asks about
def test_length_longer_than_union_and_disjoint_lists() -> None:
    il = get_interleaver("team_draft")
    a = np.array([[1, 2, -1], [1, 2, 3]])
    b = np.array([[2, 1, -1], [4, 5, 6]])
    res = il.interleave([a, b], np.random.default_rng(0), length=7)
    assert sorted(res.ranking[0][:2].tolist()) == [1, 2] and (res.ranking[0][2:] == -1).all()
    assert (res.team[0][2:] == -1).all()
    assert sorted(res.ranking[1][:6].tolist()) == [1, 2, 3, 4, 5, 6] and res.ranking[1][6] == -1


def test_rankings_from_scores_breaks_ties_uniformly() -> None:
    from onlineeval.interleaving import rankings_from_scores

    scores = np.array([[0.5, 0.9, 0.5, np.nan]])
    first = rankings_from_scores(scores, ties="first")
    assert first.tolist() == [[1, 0, 2, -1]]
    n = 20_000
    rng = np.random.default_rng(0)
    rk = rankings_from_scores(np.repeat(scores, n, axis=0), rng)
    assert (rk[:, 0] == 1).all() and (rk[:, 3] == -1).all()
    share = (rk[:, 1] == 0).mean()
    assert abs(share - 0.5) < 4 * np.sqrt(0.25 / n)
    ids = rankings_from_scores(scores, ties="first", doc_ids=np.array([10, 11, 12, 13]))
    assert ids.tolist() == [[11, 10, 12, -1]]
    with pytest.raises(ConfigError):
        rankings_from_scores(scores, ties="random")
    with pytest.raises(ConfigError):
        rankings_from_scores(scores, rng, ties="middle")


def test_single_impression_errors() -> None:
    il = get_interleaver("team_draft")
    with pytest.raises(InputError, match="empty"):
        il.interleave_one([[], []], np.random.default_rng(0))
    with pytest.raises(InputError, match="integer"):
        il.interleave_one([["a"], [1]], np.random.default_rng(0))


@pytest.mark.parametrize("method", ["team_draft", "balanced", "probabilistic", "optimized"])
def test_pareto_better_ranker_wins_with_the_cascade_click_model(method: str) -> None:
    """B Pareto-dominates A (grade at every rank >= A's); the navigational cascade user prefers B."""
    import clickmodels

    user = clickmodels.build({"name": "cascade", "preset": "navigational"})
    rng = np.random.default_rng(12)
    top = np.repeat(np.arange(4, -1, -1), 8)             # documents 0..39, grade decreasing with the id
    grade = np.concatenate([top, np.maximum(top - 2, 0)])  # document d + 40 is a worse twin of d
    n, k, queries = 20_000, 8, 30
    b_pool = np.sort(random_lists(rng, queries, k, 24), axis=1)
    a_pool = np.where(rng.random((queries, k)) < 0.5, b_pool + 40, b_pool)
    assert (grade[b_pool] >= grade[a_pool]).all()
    q = rng.integers(0, queries, size=n)
    il = get_interleaver(method)
    res = il.interleave([a_pool[q], b_pool[q]], rng)
    labels = np.where(res.ranking >= 0, grade[np.maximum(res.ranking, 0)], -1)
    clicks = user.sample(labels, rng).clicks
    out = il.outcome(res, clicks).astype(float)
    assert out.mean() > 4 * out.std(ddof=1) / np.sqrt(n)


# ---------------------------------------------------------------- shared kernels against their plain definitions
def test_kernels_against_plain_python() -> None:
    from onlineeval.interleaving._kernels import first_occurrence, rank_in_lists

    rng = np.random.default_rng(21)
    n, k, big_k = 300, 7, 9
    docs = rng.integers(-1, 12, size=(n, k)).astype(np.int32)          # repeats and empty slots
    lists = rng.integers(-1, 12, size=(2, n, big_k)).astype(np.int32)
    first = first_occurrence(docs)
    ranks = rank_in_lists(docs, lists)
    for r in range(n):
        row = docs[r].tolist()
        assert first[r].tolist() == [d >= 0 and d not in row[:j] for j, d in enumerate(row)]
        for i in range(2):
            lst = lists[i, r].tolist()
            assert ranks[i, r].tolist() == [lst.index(d) if d >= 0 and d in lst else big_k for d in row]
    assert rank_in_lists(docs, lists[:, :, :0]).shape == (2, n, k)


def joachims_credit(a: list[int], b: list[int], shown: list[int], clicks: list[bool]) -> tuple[int, int]:
    """Joachims (2003) credit written directly from the definition, one impression."""
    clicked = [d for d, c in zip(shown, clicks) if c]
    if not clicked:
        return 0, 0
    low = clicked[-1]
    big = max(len(a), len(b))
    ra = a.index(low) if low in a else big
    rb = b.index(low) if low in b else big
    kappa = min(ra, rb)
    return sum(d in a[: kappa + 1] for d in clicked), sum(d in b[: kappa + 1] for d in clicked)


def test_balanced_credit_against_the_definition() -> None:
    rng = np.random.default_rng(17)
    n, k = 600, 6
    a = random_lists(rng, n, k, 10)
    b = random_lists(rng, n, k, 10)
    b[:60] = a[:60]                       # identical
    b[60:120, :2] = a[60:120, :2]         # shared prefix
    b[120:180, 4:] = -1                   # shorter list
    il = get_interleaver("balanced")
    res = il.interleave([a, b], rng, length=k)
    clicks = rng.random((n, k)) < 0.35
    got = il.credit(res, clicks)
    for r in range(n):
        la = [int(d) for d in a[r] if d >= 0]
        lb = [int(d) for d in b[r] if d >= 0]
        shown = res.ranking[r].tolist()
        c = [bool(x) and d >= 0 for x, d in zip(clicks[r], shown)]
        assert tuple(got[r]) == joachims_credit(la, lb, shown, c), r


def test_team_draft_blocks_do_not_change_the_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    import onlineeval.interleaving.team_draft as td

    rng = np.random.default_rng(23)
    a = random_lists(rng, 1000, 6, 9)
    b = random_lists(rng, 1000, 6, 9)
    b[:100, 3:] = -1
    il = get_interleaver("team_draft")
    whole = il.interleave([a, b], np.random.default_rng(4))
    monkeypatch.setattr(td, "BLOCK_ROWS", 97)
    blocks = il.interleave([a, b], np.random.default_rng(4))
    np.testing.assert_array_equal(whole.ranking, blocks.ranking)
    np.testing.assert_array_equal(whole.team, blocks.team)
