"""validate --log: team_distribution against the reference's EXACT per-impression probabilities.

Every logged impression has its own input lists, so the exact reference is a per-impression distribution
(onlineeval/interleaving/validation/exact.py: team_probabilities) and a position's counts are tested against
their sum (stattests.pooled_goodness_of_fit). Checked here: the per-impression probabilities against Monte
Carlo of the reference kernels, the pooled test against hand statistics and its level by simulation, the
p-value of a whole log against scipy's binomial test, the size limit (sampled beyond it, said in the row).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from broken_interleavers import _BiasedCoin
from onlineeval.interleaving import get_interleaver
from onlineeval.interleaving.team_draft import TeamDraft
from onlineeval.interleaving.validation import read_log, validate_log
from onlineeval.interleaving.validation.candidates import pad_lists
from onlineeval.interleaving.validation.exact import MAX_LOG_DRAWS, team_probabilities
from onlineeval.interleaving.validation.stattests import pooled_gof_key, pooled_goodness_of_fit


@pytest.mark.parametrize("method, m", [("team_draft", 2), ("balanced", 2), ("probabilistic", 2), ("optimized", 2),
                                       ("team_draft_multileave", 3), ("probabilistic_multileave", 3)])
def test_team_probabilities_equal_a_monte_carlo_of_the_kernel(method: str, m: int) -> None:
    """Random inputs with lists shorter and longer than the page (6 inputs x 20000 kernel draws, seed 21): every
    slot's team shares within 4 SE of the exact probabilities, labels of probability 0 never drawn."""
    il = get_interleaver(method)
    rng = np.random.default_rng(21)
    n = 20_000
    zs: list[float] = []
    for _ in range(6):
        lists = [rng.permutation(9)[: int(rng.integers(2, 7))].tolist() for _ in range(m)]
        k = int(rng.integers(3, 6))
        probs = team_probabilities(il, lists, k)
        assert probs is not None and np.allclose(probs.sum(axis=1), 1.0)
        team = il.interleave(list(pad_lists(tuple(map(tuple, lists)), n)), rng, length=k).team.astype(np.int64)
        for j in range(k):
            col = np.where(team[:, j] < 0, m, team[:, j])
            for t in range(m + 1):
                p, f = probs[j, t], float(np.mean(col == t))
                if p in (0.0, 1.0):
                    assert f == p, (lists, k, j, t)
                else:
                    zs.append(abs(f - p) / np.sqrt(p * (1 - p) / n))
    # the largest of the family's |z|: below the two-sided 1% Bonferroni bound over the family (a bound on the
    # maximum, not one z's 4-SE band), and below 4 as before
    assert max(zs) < min(4.0, stats.norm.isf(0.01 / (2 * len(zs)))), (max(zs), len(zs))


def test_the_size_limit_of_the_enumeration() -> None:
    td = get_interleaver("team_draft_multileave")
    short = [[1, 2], [3, 4, 5, 6, 7, 8, 9, 10, 11], [4, 5, 6, 7, 8, 9, 10, 11, 12], [1, 6, 7, 8, 9, 10, 11, 12]]
    assert team_probabilities(td, short, 8) is not None           # 24^2 = 576 pick orders
    assert 24 ** 3 > MAX_LOG_DRAWS and team_probabilities(td, short, 9) is None
    full = [list(range(i, i + 12)) for i in range(4)]               # no list runs out: uniform, no enumeration
    assert np.array_equal(team_probabilities(td, full, 12), np.c_[np.full((12, 4), 0.25), np.zeros(12)])


def test_pooled_goodness_of_fit_by_hand() -> None:
    # two cells, two distributions: z^2 = (O - E)^2 / sum p (1 - p), one degree of freedom
    table = np.asarray([[0.5, 0.5], [0.8, 0.2]])
    rows = np.asarray([0] * 40 + [1] * 60)
    labels = np.asarray([0] * 25 + [1] * 15 + [0] * 40 + [1] * 20)
    e0 = 40 * 0.5 + 60 * 0.8
    var = 40 * 0.25 + 60 * 0.16
    want = stats.chi2.sf((65 - e0) ** 2 / var, 1)
    assert pooled_goodness_of_fit(labels, rows, table) == pytest.approx(want, rel=1e-10)
    # one distribution (under two ids): scipy's Pearson chi-square, and the exact binomial test for two cells
    rng = np.random.default_rng(5)
    x = rng.choice(3, 300, p=[0.5, 0.3, 0.2])
    same = np.asarray([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]])
    pearson = stats.chisquare(np.bincount(x, minlength=3), 300 * same[0]).pvalue
    assert pooled_goodness_of_fit(x, rng.integers(0, 2, 300), same) == pytest.approx(pearson, rel=1e-12)
    # nearly one distribution: the covariance form is Pearson's statistic
    near = same + np.asarray([[0, 0, 0], [1e-9, -1e-9, 0]])
    assert pooled_goodness_of_fit(x, rng.integers(0, 2, 300), near) == pytest.approx(pearson, rel=1e-6)
    y = (rng.random(200) < 0.6).astype(int)
    assert pooled_goodness_of_fit(y, np.zeros(200, int), np.asarray([[0.5, 0.5]])) == pytest.approx(
        stats.binomtest(int((y == 0).sum()), 200, 0.5).pvalue, rel=1e-12)
    # a label of probability 0 for its own draw: exact rejection
    assert pooled_goodness_of_fit(np.asarray([0, 1, 1]), np.asarray([0, 1, 1]), np.asarray([[1.0, 0], [1.0, 0]])) == 0
    # every draw certain and drawn: cannot reject, no key
    assert pooled_gof_key(np.asarray([0, 0]), np.asarray([0, 1]), np.asarray([[1.0, 0.0], [1.0, 0.0]])) is None


def test_pooled_goodness_of_fit_holds_its_level() -> None:
    """2000 samples of 150 draws, each from one of 20 random 2- and 3-cell distributions (seed 6): the rate of
    p < 0.05 and p < 0.01 within the 99.95% binomial band of the nominal rate."""
    rng = np.random.default_rng(6)
    for cells in (2, 3):
        table = rng.dirichlet(np.full(cells, 2.0), size=20)
        pv = []
        for _ in range(2000):
            g = rng.integers(0, 20, 150)
            x = (rng.random(150)[:, None] > np.cumsum(table[g], axis=1)).sum(axis=1)
            pv.append(pooled_goodness_of_fit(np.minimum(x, cells - 1), g, table))
        for level in (0.05, 0.01):
            hits = int((np.asarray(pv) < level).sum())
            assert stats.binom.ppf(0.0005, 2000, level) <= hits <= stats.binom.ppf(0.9995, 2000, level), (cells, level)


class _Coin(TeamDraft):
    def __init__(self, p_one: float) -> None:
        super().__init__()
        self.p_one = p_one

    def _interleave(self, rankings, rng, length):  # type: ignore[no-untyped-def]
        return super()._interleave(rankings, _BiasedCoin(rng, self.p_one), length)


def _log(path: Path, il, n: int, width: int, page: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    a = np.argsort(rng.random((n, width + 5)), axis=1)[:, :width]
    b = np.argsort(rng.random((n, width + 5)), axis=1)[:, :width]
    res = il.interleave([a, b], rng, length=page)
    with path.open("w") as fh:
        for r in range(n):
            fh.write(json.dumps({"rankings": [a[r].tolist(), b[r].tolist()], "shown": res.ranking[r].tolist(),
                                 "teams": res.team[r].tolist(), "clicks": [0] * page}) + "\n")


def test_a_team_draft_log_is_tested_against_its_exact_coin(tmp_path: Path) -> None:
    """Rankings of 20, pages of 7: every slot's team is a fair coin exactly, so the row's p-value is the Bonferroni
    of scipy's binomial tests of positions 1, 3, 5, 7 (2, 4, 6 repeat them); it was a chi-square against a sample."""
    p = tmp_path / "coin.jsonl"
    _log(p, _Coin(0.56), 1500, 20, 7, 3)
    rows = {c.name: c for c in validate_log(read_log(p), "team_draft").checks}
    team = rows["team_distribution"]
    teams = np.asarray([json.loads(line)["teams"] for line in p.read_text().splitlines()])
    want = min(1.0, 4 * min(stats.binomtest(int((teams[:, j] == 0).sum()), 1500, 0.5).pvalue for j in (0, 2, 4, 6)))
    assert team.value == pytest.approx(want, rel=1e-10)
    assert team.statistic == "goodness-of-fit p-value (exact reference), Bonferroni over 4"
    assert "exact reference probabilities for 1500 of 1500 impressions" in team.message
    assert team.counts["exact"] == 1500 and team.counts["sampled"] == 0


def test_beyond_the_limit_the_row_says_sampled(tmp_path: Path) -> None:
    """Four team-draft multileaving rankings with a short list on 9-slot pages: 24^3 pick orders, above the limit,
    so those impressions are tested against a sample; the row says so and how many."""
    rng = np.random.default_rng(4)
    il = get_interleaver("team_draft_multileave")
    p = tmp_path / "ml.jsonl"
    lines = []
    for r in range(300):
        lists = [rng.permutation(30)[:12].tolist() for _ in range(4)]
        if r % 3 == 0:
            lists[0] = lists[0][:2]               # a list shorter than the page: enumerated or sampled
        page = 9 if r % 2 else 8
        res = il.interleave(list(pad_lists(tuple(map(tuple, lists)), 1)), rng, length=page)
        lines.append(json.dumps({"rankings": lists, "shown": res.ranking[0].tolist(), "teams": res.team[0].tolist(),
                                 "clicks": [0] * page}))
    p.write_text("\n".join(lines) + "\n")
    team = {c.name: c for c in validate_log(read_log(p), "team_draft_multileave").checks}["team_distribution"]
    n_sampled = sum(1 for r in range(300) if r % 3 == 0 and r % 2)
    assert team.counts["sampled"] == n_sampled and team.counts["exact"] == 300 - n_sampled
    assert team.statistic.startswith("goodness-of-fit / chi-square p-value (exact / sampled reference)")
    assert f"exact reference probabilities for {300 - n_sampled} of 300 impressions" in team.message
    assert f"a sampled reference (chi-square test of homogeneity) for the other {n_sampled}: more than 4,096" \
        in team.message
    assert team.status == "PASS"
