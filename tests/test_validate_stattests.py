"""The battery's tests against independent computations: exact binomial sums, calibration under the null."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from onlineeval.interleaving.validation import reference_candidate, validate_interleaver
from onlineeval.interleaving.validation.stattests import bonferroni, homogeneity, partition_key, sign_test, t_test


def test_sign_test_is_the_exact_binomial_test() -> None:
    outcomes = np.array([1] * 14 + [-1] * 4 + [0] * 9)
    p, counts = sign_test(outcomes)
    assert counts == {"wins": 14, "losses": 4, "ties": 9}
    n = 18
    tail = sum(comb(n, k) for k in range(14, n + 1)) / 2 ** n          # P(X >= 14), symmetric two-sided
    assert p == pytest.approx(2 * tail, rel=1e-12)
    p1, _ = sign_test(outcomes, "greater")
    assert p1 == pytest.approx(tail, rel=1e-12)
    assert sign_test(np.zeros(5))[0] == 1.0


def test_t_test_degenerate_samples() -> None:
    assert t_test(np.zeros(10)) == 1.0
    assert t_test(np.full(10, 0.5)) == 0.0
    assert t_test(np.full(10, 0.5), "greater") == 0.0
    assert t_test(np.full(10, -0.5), "greater") == 1.0
    x = np.array([0.1, -0.2, 0.3, 0.05, -0.1])
    se = x.std(ddof=1) / np.sqrt(x.size)
    from scipy import stats

    assert t_test(x) == pytest.approx(2 * stats.t.sf(abs(x.mean() / se), x.size - 1), rel=1e-12)


def test_homogeneity_with_sparse_categories_holds_its_level() -> None:
    """Two samples from one distribution with 50 rare categories: rejection rate at 0.05 within 4 SE."""
    rng = np.random.default_rng(0)
    p = np.r_[0.5, 0.3, 0.15, np.full(50, 0.05 / 50)]
    reps = 1000
    pv = np.array([homogeneity(rng.choice(p.size, 2000, p=p), rng.choice(p.size, 2000, p=p)) for _ in range(reps)])
    rate = float((pv < 0.05).mean())
    assert abs(rate - 0.05) <= 4 * np.sqrt(0.05 * 0.95 / reps), rate
    # and it sees a real difference
    q = np.r_[0.40, 0.40, 0.15, np.full(50, 0.05 / 50)]
    assert homogeneity(rng.choice(p.size, 5000, p=p), rng.choice(q.size, 5000, p=q)) < 1e-6


def test_bonferroni() -> None:
    assert bonferroni([0.2, 0.01, 0.5]) == pytest.approx(0.03)
    assert bonferroni([0.6, 0.7]) == 1.0 and bonferroni([]) == 1.0


def test_partition_key_identifies_one_test() -> None:
    """Columns that split the pooled impressions alike give the same key and exactly the same p-value."""
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 3, 400), rng.integers(0, 3, 450)
    relabel = np.array([17, 5, 9])                        # a bijection of the categories (documents for teams)
    assert partition_key(a, b) == partition_key(relabel[a], relabel[b])
    assert homogeneity(a, b) == homogeneity(relabel[a], relabel[b])
    bits_a, bits_b = rng.integers(0, 2, 300), rng.integers(0, 2, 300)
    assert partition_key(bits_a, bits_b) == partition_key(1 - bits_a, 1 - bits_b)   # a round's second pick
    assert partition_key(a, b) != partition_key(np.minimum(a, 1), np.minimum(b, 1))  # a coarser split differs
    # the same values split differently between the samples are another test
    assert partition_key(np.r_[0, 0, 1], np.r_[1, 1]) != partition_key(np.r_[0, 0], np.r_[1, 1, 1])
    assert partition_key(np.full(5, 4), np.full(3, 4)) is None                     # constant: cannot reject


def test_distribution_checks_count_each_distinct_test_once() -> None:
    """Review 3.12: team-draft's document test per position repeated a team test (the same p-value in every run)."""
    td = validate_interleaver(reference_candidate("team_draft"), "team_draft", n=1400, seed=2)
    rows = {c.name: c for c in td.checks}
    assert rows["document_distribution"].status == "SKIPPED" and rows["document_distribution"].rule == "implied"
    # 41 positions x scenarios of lists shown whole: 2 constant, 19 second picks of a round, 20 distinct; the three
    # lists of 12-20 documents on a 10-slot page add 30 positions: 5 round coins each, 15 distinct
    assert rows["team_distribution"].statistic.endswith("Bonferroni over 35")
    assert sum(c.rule in ("null", "power") for c in td.checks) == 6      # coin_no_preference is the sixth
    assert rows["team_distribution"].level == pytest.approx(0.01 / 6)
    bal = {c.name: c for c in validate_interleaver(reference_candidate("balanced"), "balanced", n=1400).checks}
    assert bal["team_distribution"].statistic.endswith("Bonferroni over 10")     # one coin per impression (7 + 3)
    assert bal["document_distribution"].rule == "implied"
    # probabilistic interleaving draws documents from a softmax: every document test is its own
    pr = {c.name: c for c in validate_interleaver(reference_candidate("probabilistic"), "probabilistic",
                                                  n=1400).checks}
    # 41 positions of lists shown whole, 30 of the three lists of 12 on a 10-slot page
    assert pr["document_distribution"].statistic.endswith("Bonferroni over 71") and pr["document_distribution"].level
