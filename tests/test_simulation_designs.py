"""Designs and replicates: A/A false positives, power against the analytic formula,
estimator bias against the ground truth, and reproducibility across workers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from onlineeval.stats import binomial_band
from simulations.analysis import side_row_mask
from simulations.config import config_from_mapping
from simulations.designs.ab import hash_unit
from simulations.runner import compute_truth, run_replicates, world_seed
from simulations.users import UserModels
from simulations.world import build_world, segment_queries, shown_labels

# users differ persistently (two types), so clustering by user matters for the tests
MIXTURE = {
    "population": 1500,
    "activity": {"sigma": 1.5},
    "types": [
        {"name": "navigational", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}},
        {"name": "informational", "share": 0.5, "click_model": {"name": "cascade", "preset": "informational"}},
    ],
}


def small(**over):
    base = {
        "seed": 11,
        "replicates": 20,
        "workers": 1,
        "collection": {"type": "synthetic", "n_queries": 300, "candidates": 20},
        "rankers": {"depth": 10, "A": {"noise": 1.0}, "B": {"noise": 0.8}, "others": {"C": {"noise": 1.3}}},
        "users": MIXTURE,
        "traffic": {"days": 2, "queries_per_day": 1500, "batch_hours": 24},
        "designs": [
            {"name": "ab", "type": "ab"},
            {"name": "ab_welch", "type": "ab", "test": "welch"},
            {"name": "team_draft", "type": "interleaving", "method": "team_draft"},
            {"name": "balanced", "type": "interleaving", "method": "balanced"},
            {"name": "tdm", "type": "interleaving", "method": "team_draft_multileave", "rankers": ["A", "B", "C"]},
        ],
    }
    base.update(over)
    return config_from_mapping(base)


def run(cfg, workers=1):
    world = build_world(cfg, world_seed(cfg.seed))
    res = run_replicates(cfg, world, workers=workers)
    return world, pd.DataFrame([r for i in sorted(res) for r in res[i]])


def test_hash_split_is_uniform_and_salted():
    u = hash_unit(np.arange(200_000), 12345)
    assert u.min() >= 0 and u.max() < 1
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    assert sps.chisquare(counts).pvalue > 1e-4
    share = np.mean(u < 0.3)
    assert abs(share - 0.3) < 4 * np.sqrt(0.3 * 0.7 / u.size)
    v = hash_unit(np.arange(200_000), 999)
    both = np.mean((u < 0.5) & (v < 0.5))  # independent salts give independent splits
    assert abs(both - 0.25) < 4 * np.sqrt(0.25 * 0.75 / u.size)
    assert np.array_equal(hash_unit(np.arange(10), 5), hash_unit(np.arange(10), 5))


def test_same_seed_same_results_whatever_the_number_of_workers():
    cfg = small(replicates=4)
    _, one = run(cfg, workers=1)
    _, two = run(cfg, workers=2)
    pd.testing.assert_frame_equal(one, two)
    _, other = run(small(replicates=4, seed=12))
    assert not np.allclose(one["estimate"], other["estimate"])


def test_aa_false_positive_rate_within_binomial_band():
    """>= 500 A/A replicates: rejections at alpha lie in the exact 99% binomial band."""
    cfg = small(replicates=500)
    _, rows = run(cfg)
    # side rows (metric "<kind>:<name>", e.g. the SRM checks srm:*) are not effect estimates
    last = rows[(rows["aa"]) & (rows["day"] == cfg.traffic.days) & ~side_row_mask(rows)]
    band = binomial_band(500, cfg.analysis.alpha, 0.99)
    for (design, metric), g in last.groupby(["design", "metric"]):
        assert len(g) == 500
        rejections = int((g["pvalue"] < cfg.analysis.alpha).sum())
        if design == "balanced":
            # interleaving a list with itself: every click credits both teams alike, so
            # every comparison is a tie and the A/A outcome is exactly 0 (documented)
            assert rejections == 0 and np.all(g["estimate"] == 0.0)
            continue
        assert band.contains(rejections), (design, metric, rejections, band)


def test_ab_power_matches_analytic_power_on_a_bernoulli_metric():
    """Abandonment is Bernoulli per query; with one cascade user model its exact rate is
    the frequency-weighted product of (1 - P(click | grade)) over the shown ranks."""
    click = [0.02, 0.08, 0.15, 0.3, 0.5]
    cfg = small(
        replicates=400,
        users={"population": 50_000, "activity": {"sigma": 0.0},
               "click_model": {"name": "cascade", "click": click, "stop": [0.5] * 5}},
        traffic={"days": 1, "queries_per_day": 6000, "batch_hours": 24},
        designs=[{"name": "ab", "type": "ab", "metric": "abandonment"}],
        analysis={"aa": False},
        rankers={"depth": 10, "A": {"noise": 1.0}, "B": {"noise": 0.6}},
    )
    world, rows = run(cfg)
    p = {}
    for r in ("A", "B"):
        shown = world.ranked_labels(r)
        no_click = np.where(shown >= 0, 1 - np.asarray(click)[np.maximum(shown, 0)], 1.0).prod(axis=1)
        p[r] = float(world.frequency @ no_click)
    n = cfg.traffic.queries_per_day / 2  # per arm, in expectation
    se = np.sqrt(p["A"] * (1 - p["A"]) / n + p["B"] * (1 - p["B"]) / n)
    z = sps.norm.ppf(1 - cfg.analysis.alpha / 2)
    delta = p["B"] - p["A"]
    analytic = sps.norm.cdf(abs(delta) / se - z)  # rejections in the effect's direction
    g = rows[rows["metric"] == "abandonment"]
    simulated = np.mean((g["pvalue"] < cfg.analysis.alpha) & (np.sign(g["estimate"]) == np.sign(delta)))
    assert 0.2 < analytic < 0.9  # the test has power to discriminate
    assert abs(simulated - analytic) < 4 * np.sqrt(analytic * (1 - analytic) / len(g))
    # the estimates are unbiased for the exact effect
    assert abs(g["estimate"].mean() - delta) < 4 * g["estimate"].std(ddof=1) / np.sqrt(len(g))


def test_estimates_are_unbiased_for_the_ground_truth():
    cfg = small(replicates=150, analysis={"aa": False, "truth_impressions": 400_000})
    world, rows = run(cfg)
    truth = {(t.design, t.metric): t for t in compute_truth(cfg, world, UserModels.from_config(cfg.users))}
    # side rows (metric "<kind>:<name>", e.g. the SRM checks srm:*) are not effect estimates
    last = rows[(rows["day"] == cfg.traffic.days) & ~side_row_mask(rows)]
    for (design, metric), g in last.groupby(["design", "metric"]):
        # user types are independent of activity here, so the user-weighted (Welch) and the
        # query-weighted (delta) estimands coincide
        t = truth[(design, metric)]
        se = np.hypot(g["estimate"].std(ddof=1) / np.sqrt(len(g)), t.se)
        assert abs(g["estimate"].mean() - t.value) < 4 * se, (design, metric)
        # the delta-method standard errors describe the spread across replicates: ln(mean SE / SD) within 4 SE,
        # the SD's from the estimates' own fourth moment (kurtosis 2.6-4.0 here: up to 22% above the normal
        # 1/sqrt(2(R-1))), the mean SE's from the SEs' spread (0.3-1.5%). Measured z -1.1 to 1.8
        est, ses = g["estimate"].to_numpy(), g["se"].to_numpy()
        r, sd = est.size, est.std(ddof=1)
        m4 = float(np.mean((est - est.mean()) ** 4))
        se_log_sd = np.sqrt(max(m4 - sd**4 * (r - 3) / (r - 1), 0.0) / r) / (2 * sd**2)
        se_log_mean = ses.std(ddof=1) / np.sqrt(r) / ses.mean()
        ratio = ses.mean() / sd
        assert abs(np.log(ratio)) <= 4 * np.hypot(se_log_sd, se_log_mean), (design, metric, ratio)


def test_truth_is_exact_or_within_its_standard_error():
    cfg = small(users={"population": 100, "click_model": {"name": "cascade", "preset": "navigational"}},
                analysis={"truth_impressions": 200_000})
    world = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    truths = {(t.design, t.metric): t for t in compute_truth(cfg, world, users)}
    model = users.models[0]
    vals = {}
    for r in ("A", "B"):
        shown = world.ranked_labels(r)
        vals[r] = float(world.frequency @ np.asarray(model.click_probabilities(shown)).sum(axis=1))
        # the cascade abandons exactly when no examined document attracts
        attract = np.array([0.05, 0.3, 0.5, 0.7, 0.95])
        not_attracted = np.where(shown >= 0, 1 - attract[np.maximum(shown, 0)], 1)
        vals[r + "_abandon"] = float(world.frequency @ not_attracted.prod(1))
    t = truths[("ab", "clicks_per_query")]
    assert t.method == "exact" and t.value == pytest.approx(vals["B"] - vals["A"], abs=1e-12)
    t = truths[("ab", "abandonment")]
    assert t.method == "exact" and t.value == pytest.approx(vals["B_abandon"] - vals["A_abandon"], abs=1e-12)
    # the exact reciprocal rank of the first click agrees with Monte Carlo within 4 SE
    q = np.random.default_rng(0).choice(world.n_queries, size=200_000, p=world.frequency)
    rr = {}
    for r in ("A", "B"):
        labels = shown_labels(world.labels, q, world.rankings[r][q])
        clicks = np.asarray(model.sample(labels, np.random.default_rng(1)).clicks)
        rr[r] = np.where(clicks.any(1), 1.0 / (clicks.argmax(1) + 1), 0.0)
    diff = rr["B"] - rr["A"]  # common random numbers: paired differences
    t = truths[("ab", "reciprocal_rank")]
    assert abs(diff.mean() - t.value) < 4 * diff.std(ddof=1) / np.sqrt(diff.size)


def test_world_segments_and_shown_labels():
    freq = np.array([0.4, 0.05, 0.2, 0.1, 0.1, 0.15])
    seg = segment_queries(freq)
    # sorted: .4 (head), .2 (cum .4 -> head), .15 (cum .6 torso), .1 (.75 torso), .1 (.85 tail), .05 tail
    assert seg.tolist() == [0, 2, 0, 1, 2, 1]
    labels = np.array([[0, 3, 1], [2, 0, 4]], dtype=np.int8)
    ranking = np.array([[1, 2, -1], [2, 0, 1]])
    assert shown_labels(labels, np.array([0, 1]), ranking).tolist() == [[3, 1, -1], [4, 2, 0]]
    cfg = small()
    world = build_world(cfg, world_seed(cfg.seed))
    assert world.frequency.sum() == pytest.approx(1.0)
    assert world.offline.weighted["B"] > world.offline.weighted["A"]  # less noise, better ranking
    # rankings are permutations of candidates, no duplicates within a list
    r = world.rankings["A"]
    assert all(len(set(row)) == len(row) for row in r.tolist())


def test_shown_labels_flat_take_equals_the_fancy_index():
    """The flat-take path (int8 grades, lists without empty slots) gives the fancy index's values; lists with
    empty slots, other grade dtypes and out-of-range documents take the general path (IndexError)."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 5, size=(300, 40)).astype(np.int8)
    for dtype in (np.int32, np.int64):
        query = rng.integers(0, 300, size=1000).astype(dtype)
        ranking = rng.integers(0, 40, size=(1000, 10)).astype(dtype)
        want = labels[query[:, None], ranking]  # the definition, no empty slots
        got = shown_labels(labels, query, ranking)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(shown_labels(labels.astype(np.int64), query, ranking), want)
        padded = ranking.copy()
        padded[::3, 4:] = -1
        np.testing.assert_array_equal(shown_labels(labels, query, padded), np.where(padded >= 0, want, -1))
        bad = ranking.copy()
        bad[0, 0] = 40  # would be another query's document in the flat array
        with pytest.raises(IndexError):
            shown_labels(labels, query, bad)


def test_trec_world_uses_real_judgments_and_rankings(tmp_path):
    (tmp_path / "qrels").write_text("q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 1\nq2 0 e1 1\nq2 0 e2 0\nq3 0 f1 3\n")
    (tmp_path / "a.run").write_text("q1 Q0 d1 1 3.0 A\nq1 Q0 d9 2 2.0 A\nq1 Q0 d3 3 1.0 A\n"
                                    "q2 Q0 e2 1 5 A\nq2 Q0 e1 2 4 A\nq4 Q0 z 1 1 A\n")
    # q1: d3 and d1 tie at 3.0; trec_eval's rule (docno descending) puts d3 first
    (tmp_path / "b.run").write_text("q1 Q0 d3 1 3.0 B\nq1 Q0 d1 2 3.0 B\nq2 Q0 e1 1 5 B\nq3 Q0 f1 1 1 B\n")
    coll = {"type": "trec", "qrels": str(tmp_path / "qrels"),
            "runs": {"A": str(tmp_path / "a.run"), "B": str(tmp_path / "b.run")}}
    cfg = small(collection=coll, users={"population": 10}, designs=[{"name": "ab", "type": "ab"}])
    world = build_world(cfg, world_seed(cfg.seed))
    assert world.query_ids == ("q1", "q2", "q3")
    d = 1 / np.log2(np.arange(2, 12))
    ideal_q1 = 3 + d[1]  # grades 2, 1 at ranks 1, 2 (exponential gain)
    expected_a = [(3 + 0 + d[2]) / ideal_q1, d[1], 0.0]  # d9 unjudged -> 0; q3 missing from A -> empty list
    expected_b = [(1 + 3 * d[1]) / ideal_q1, 1.0, 1.0]
    np.testing.assert_allclose(world.offline.per_query["A"], expected_a, rtol=1e-12)
    np.testing.assert_allclose(world.offline.per_query["B"], expected_b, rtol=1e-12)
    assert world.notes["unjudged_shown_A"] == 1 and world.notes["queries_only_in_run_A"] == 1
    assert world.notes["queries_missing_from_run_A"] == 1
    assert world.ranked_labels("B")[0, :3].tolist() == [1, 2, -1]


def test_expected_distinct_users_matches_monte_carlo():
    from simulations.analysis import expected_distinct_users

    rng = np.random.default_rng(4)
    pop, sigma, n = 5000, 1.2, 12000
    seen = []
    for _ in range(300):  # new population each time: the formula averages over populations
        a = rng.lognormal(0, sigma, pop)
        users = np.searchsorted(np.cumsum(a / a.sum()), rng.random(rng.poisson(n)))
        seen.append(np.unique(users).size)
    se = np.std(seen, ddof=1) / np.sqrt(len(seen))
    assert abs(np.mean(seen) - expected_distinct_users(n, pop, sigma)) < 4 * se
    assert expected_distinct_users(1e12, pop, sigma) == pytest.approx(pop)  # everybody, eventually
    assert expected_distinct_users(10, pop, 0.0) == pytest.approx(pop * -np.expm1(-10 / pop))


def test_probabilistic_designs_use_the_expected_outcome():
    """Probabilistic methods contribute the expectation over hidden assignments (the
    papers' estimator), not its per-impression sign; other methods win / loss / tie."""
    from onlineeval.interleaving import get_interleaver
    from simulations.designs.interleaving import pair_metrics, pair_outcomes

    rng = np.random.default_rng(0)
    lists = [np.stack([rng.permutation(8)[:5] for _ in range(500)]) for _ in range(3)]
    clicks = rng.random((500, 5)) < 0.3
    pm = get_interleaver("probabilistic_multileave")
    shown = pm.interleave(lists, rng, length=5)
    out = pair_outcomes(pm, shown, clicks, 3)
    exp = pm.expected_preferences(shown, clicks)
    for p, (_, i, j) in enumerate(pair_metrics(["A", "B", "C"])):
        np.testing.assert_array_equal(out[:, p], exp[:, j, i])
    assert np.any((out != np.round(out)))  # real-valued expectations, not signs
    td = get_interleaver("team_draft")
    shown = td.interleave(lists[:2], rng, length=5)
    np.testing.assert_array_equal(pair_outcomes(td, shown, clicks, 2)[:, 0], td.outcome(shown, clicks))


def test_segment_truths_add_up_to_the_overall_truth():
    from simulations.runner import truth_by_segment
    from simulations.world import SEGMENT_NAMES

    cfg = small(analysis={"truth_impressions": 1000})
    world = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    overall = {(t.design, t.metric): t.value for t in compute_truth(cfg, world, users)}
    by_seg = truth_by_segment(world, users)
    for metric in ("clicks_per_query", "abandonment", "reciprocal_rank"):
        total = sum(world.frequency[world.segment == s].sum() * by_seg[name][metric]["delta"]
                    for s, name in enumerate(SEGMENT_NAMES) if name in by_seg)
        assert total == pytest.approx(overall[("ab", metric)], abs=1e-12)


def test_standard_error_floor_model_predicts_later_days():
    """Returning users give the A/B standard error a floor: se^2(N) = a/N + b fitted to the
    first week predicts the fourth week's standard error, where 1/sqrt(N) scaling does not."""
    from simulations.analysis import variance_model

    cfg = small(replicates=40, users={**MIXTURE, "population": 800, "activity": {"sigma": 1.2}},
                traffic={"days": 28, "queries_per_day": 800, "batch_hours": 24},
                designs=[{"name": "ab", "type": "ab"}], analysis={"aa": False})
    _, rows = run(cfg)
    g = rows[rows["metric"] == "reciprocal_rank"].groupby("day")[["se", "n_impressions"]].mean()
    fit = variance_model(g["n_impressions"].to_numpy()[:7], g["se"].to_numpy()[:7])
    n28, se28 = g["n_impressions"].iloc[-1], g["se"].iloc[-1]
    floor_pred = np.sqrt(fit.a / n28 + fit.b)
    naive_pred = g["se"].iloc[6] * np.sqrt(g["n_impressions"].iloc[6] / n28)
    assert fit.b > 0
    # a model-adequacy bound, not Monte Carlo error: the mean SE over 40 replicates varies by
    # well under 1%, so 5% leaves room only for the model's own misfit
    assert abs(floor_pred / se28 - 1) < 0.05
    assert abs(naive_pred / se28 - 1) > 2 * abs(floor_pred / se28 - 1)
