"""Review 2 B.1: team-draft's round coin, checked where nothing else decides the outcome (``coin_no_preference``).

On A=(1,2,3), B=(2,3,4) with only document 3 clicked, a correct team-draft's outcome is the
round-2 coin: wins and losses are Binomial(n, 1/2) exactly. The row used to be a DOCUMENTED
measurement that never failed a run (``mean -1.000 (expected 0)``, p = 0 beside RESULT: PASS).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from broken_interleavers import _BiasedCoin
from onlineeval.interleaving.team_draft import TeamDraft
from onlineeval.interleaving.validation import BatchCandidate, reference_candidate, validate_interleaver
from onlineeval.interleaving.validation.candidates import ProtocolCandidate


class _Coin52(TeamDraft):
    """onlineeval's batch team-draft whose round coin is 1 with probability 0.52 (a 2-point bias)."""

    def _interleave(self, rankings, rng, length):  # type: ignore[no-untyped-def]
        return super()._interleave(rankings, _BiasedCoin(rng, 0.52), length)


class _AFirst:
    """Per-impression team-draft in which A always picks first in a round."""

    def interleave(self, lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        a, b = lists
        k = min(max(len(a), len(b)), len(set(a) | set(b)))
        shown: list[int] = []
        teams: list[int] = []
        while len(shown) < k:
            for t, lst in ((0, a), (1, b)):
                nxt = [d for d in lst if d not in shown]
                if nxt and len(shown) < k:
                    shown.append(nxt[0])
                    teams.append(t)
        return shown, teams

    def credit(self, shown: list[int], teams: list[int], clicks: list[bool]) -> int:
        ca = sum(c and t == 0 for t, c in zip(teams, clicks))
        cb = sum(c and t == 1 for t, c in zip(teams, clicks))
        return int(np.sign(cb - ca))


def _rows(cand, n: int, seed: int):  # type: ignore[no-untyped-def]
    return {c.name: c for c in validate_interleaver(cand, "team_draft", n=n, seed=seed).checks}


def test_correct_team_draft_passes_and_the_check_counts() -> None:
    rows = _rows(reference_candidate("team_draft"), 2000, 3)
    coin = rows["coin_no_preference"]
    assert coin.status == "PASS" and coin.rule == "null" and coin.level == pytest.approx(0.01 / 6)
    assert "documented: team-draft fidelity" not in rows
    c = coin.counts
    # slot 1 and document 3 are always shown: n decided impressions per round's coin
    assert c["wins"] + c["losses"] == 4000 and c["ties"] == 0
    assert c["wins_round1"] + c["losses_round1"] == 2000 and c["wins_round2"] + c["losses_round2"] == 2000
    # the statistic: the exact two-sided binomial tests of 1/2 of both rounds (an independent recomputation),
    # Bonferroni over the two
    p1, p2 = (stats.binomtest(c[f"wins_round{r}"], 2000, 0.5).pvalue for r in (1, 2))
    assert coin.value == pytest.approx(min(1.0, 2 * min(p1, p2)), rel=1e-12)


def test_a_two_point_coin_bias_fails_the_run_at_20000() -> None:
    """Power at n = 20000: mean outcome +0.04 (coin 1: B first) in each round's test, z = 0.04 sqrt(20000) = 5.66
    against 3.34 (level 0.01 / 6 / 2, two rounds' coins): exact binomial power 0.990 per round, 0.9999 for the
    two together (this coin is biased in every round).

    Measured over seeds 5000-5199 (/tmp/b1/pow.py): the run failed 35/200 before the check counted
    (team_distribution 34, aa_no_preference 1), 200/200 after (coin_no_preference in all).
    Seed 5003 passed before (team_distribution p 0.52).
    """
    rows = _rows(BatchCandidate("coin52", _Coin52()), 20_000, 5003)
    coin = rows["coin_no_preference"]
    assert coin.status == "FAIL" and coin.value < coin.level
    others = [c for c in rows.values() if c.name != "coin_no_preference" and c.rule in ("null", "exact")]
    # missed by the rest here (team_distribution p 0.0018 with the 10-slot pages of lists of 12-20, level 0.00167)
    assert all(c.status == "PASS" and (c.exact or c.value > c.level) for c in others)
    for r in (1, 2):                                                           # 4 SE (0.007) around +0.04
        assert 0.012 < (coin.counts[f"wins_round{r}"] - coin.counts[f"losses_round{r}"]) / 20_000 < 0.068


def test_a_first_always_fails_with_mean_minus_one() -> None:
    a_first = _AFirst()
    coin = _rows(ProtocolCandidate("a_first", a_first.interleave, a_first.credit), 700, 0)["coin_no_preference"]
    assert coin.status == "FAIL" and coin.counts["losses"] == 1400 and coin.counts["losses_round2"] == 700
    assert "mean outcome -1.0000" in coin.message
