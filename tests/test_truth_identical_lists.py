"""The interleaving truth counts the impressions of queries on which every ranker of the design shows the same list at
their exact expected outcome, 0 (:func:`simulations.truth_interleaving.identical_lists`).

Before, team-draft's Monte Carlo truth carried those impressions' coin-flip noise: with B identical to A on every
query (a team checking the tool on a null) the truth was -0.0083 +- 0.0032 on one seed, 2.6 SEs from 0, and the
report sized an experiment for that noise (79.6 days needed) where it should say there is no effect to detect.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import simulations.truth_interleaving as truth_interleaving
from simulations.config import config_from_mapping
from simulations.runner import NULL_PREFIX, compute_truth, world_seed
from simulations.truth_interleaving import identical_lists
from simulations.users import UserModels
from simulations.world import build_world


def _config(rankers: dict[str, Any], candidates: int, n: int) -> Any:
    return config_from_mapping({
        "seed": 5,
        "collection": {"type": "synthetic", "n_queries": 200, "candidates": candidates},
        "rankers": rankers,
        "users": {"population": 800, "types": [
            {"name": "nav", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
            {"name": "pbm", "share": 0.4, "click_model": {"name": "pbm", "preset": "ai2018"}}]},
        "designs": [{"name": "team_draft", "type": "interleaving", "method": "team_draft"},
                    {"name": "multi", "type": "interleaving", "method": "team_draft_multileave",
                     "rankers": ["A", "B", "C"]}],
        "analysis": {"truth_impressions": n},
    })


def _truths(cfg: Any) -> dict[tuple[str, str], Any]:
    world = build_world(cfg, world_seed(cfg.seed))
    return {(t.design, t.metric): t for t in compute_truth(cfg, world, UserModels.from_config(cfg.users))}


def test_identical_lists_marks_the_queries_where_every_list_agrees() -> None:
    a = np.array([[0, 1, 2], [0, 1, 2], [2, 1, -1], [3, 4, 5]])
    b = np.array([[0, 1, 2], [1, 0, 2], [2, 1, -1], [3, 4, 5]])
    c = np.array([[0, 1, 2], [0, 1, 2], [2, 1, -1], [3, 5, 4]])
    assert identical_lists([a, b]).tolist() == [True, False, True, True]
    assert identical_lists([a, b, c]).tolist() == [True, False, True, False]


def test_rankers_that_agree_on_every_query_have_a_truth_of_exactly_zero() -> None:
    # B and C are A (the same noise, fully correlated): every pair's truth and null Delta are 0 with SE 0
    same = {"noise": 1.0}
    cfg = _config({"depth": 10, "noise_correlation": 1.0, "A": same, "B": same, "others": {"C": same}}, 25, 50_000)
    world = build_world(cfg, world_seed(cfg.seed))
    assert identical_lists([world.rankings[r] for r in ("A", "B", "C")]).all()
    truths = _truths(cfg)
    assert len(truths) == 8  # team-draft's pair and the multileave's three, each with its null row
    for (design, metric), t in truths.items():
        assert (t.value, t.se) == (0.0, 0.0), (design, metric, t)


def test_counting_agreeing_queries_at_zero_removes_only_zero_mean_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    # short lists of 4 of 4 candidates with correlated noise: A and B agree on 56% of the queries (47% of the
    # traffic). The same stream with those impressions counted as drawn: the truths differ by the agreeing
    # impressions' outcomes alone, whose mean is 0: within 4 SEs of that difference, sqrt(old se^2 - new se^2) (the
    # dropped rows are disjoint from the kept ones, so their variances add); and the SE shrinks (by 0.68 for
    # team-draft, 0.87 for the multileave's pairs, whose agreeing rows are fewer)
    rankers = {"depth": 4, "noise_correlation": 0.9, "A": {"noise": 1.0}, "B": {"noise": 0.9},
               "others": {"C": {"noise": 0.95}}}
    cfg = _config(rankers, 4, 400_000)
    new = _truths(cfg)
    monkeypatch.setattr(truth_interleaving, "identical_lists", lambda lists: np.zeros(lists[0].shape[0], dtype=bool))
    import simulations.truth_interleaving_exact as tie

    monkeypatch.setattr(tie, "_PARTS", {})  # the exact truth computed again without the zero
    old = _truths(cfg)
    # team-draft's preference is exact (tests/test_truth_interleaving_exact.py): the agreeing queries' expected
    # outcome is exactly 0 with or without the zero, so the two are the same number
    key = ("team_draft", "delta_ab")
    assert new[key].se == old[key].se == 0.0 and new[key].value == old[key].value != 0.0
    key = ("team_draft", NULL_PREFIX + "delta_ab")  # its null Delta is exact too (simulations.truth_null_exact)
    assert new[key].se == old[key].se == 0.0 and new[key].value == 0.0 and abs(old[key].value) < 1e-15, key
    # the multileave's pairs: each pair's rows where its two lists agree; the SE shrinks as well
    for key in [k for k in new if k[0] == "multi"]:
        assert abs(new[key].value - old[key].value) < 4 * np.sqrt(old[key].se ** 2 - new[key].se ** 2), key
        assert new[key].se < old[key].se, key


def test_a_multileave_pair_of_identical_rankers_has_a_truth_of_exactly_zero() -> None:
    # C is B (the same noise, fully correlated with it) while A differs: the pair C vs B is exactly 0, the others not
    rankers = {"depth": 10, "noise_correlation": 1.0, "A": {"noise": 0.5}, "B": {"noise": 1.0},
               "others": {"C": {"noise": 1.0}}}
    cfg = _config(rankers, 25, 50_000)
    world = build_world(cfg, world_seed(cfg.seed))
    assert identical_lists([world.rankings["B"], world.rankings["C"]]).all()
    assert not identical_lists([world.rankings["A"], world.rankings["B"]]).all()
    truths = _truths(cfg)
    for metric in ("delta_C_vs_B", NULL_PREFIX + "delta_C_vs_B"):
        assert (truths[("multi", metric)].value, truths[("multi", metric)].se) == (0.0, 0.0)
    for metric in ("delta_B_vs_A", "delta_C_vs_A"):
        assert truths[("multi", metric)].se > 0 and truths[("multi", metric)].value != 0.0


def test_the_conformance_check_of_an_identical_pair_fails_a_method_that_favours_one_of_them() -> None:
    from onlineeval.interleaving import get_interleaver
    from onlineeval.interleaving.checks import ConformanceError, check_multileave_identical_pair

    class Favouring(type(get_interleaver("team_draft_multileave"))):  # type: ignore[misc]
        def preferences(self, result, clicks):  # type: ignore[no-untyped-def]
            pref = np.array(super().preferences(result, clicks), dtype=np.int8)
            tied = (pref[:, 1, 2] == 0) & clicks.any(axis=1)
            pref[tied, 1, 2], pref[tied, 2, 1] = -1, 1  # ranker 2 wins its ties with ranker 1 where there are clicks
            return pref

    check_multileave_identical_pair(get_interleaver("team_draft_multileave"))
    with pytest.raises(ConformanceError, match="two identical rankers of three"):
        check_multileave_identical_pair(Favouring())
