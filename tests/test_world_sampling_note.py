"""The Offline line's one-drawn-world note (review 4, F1): the effective number of queries 1 / sum f^2 and the
world-sampling SE of the frequency-weighted offline delta, sqrt(sum f_q^2 (d_q - dbar_f)^2).

Checked on hand examples (exact values), against the equal-weights special case (numpy's SD / sqrt(n)), and by a
fixed-seed Monte Carlo over independently drawn synthetic worlds: the printed SE matches the spread of the weighted
delta across worlds within 4 SEs of an SD estimate (SD sqrt(1 / (2 (R - 1)))), where an unweighted SE would not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from simulations.config.loading import config_from_mapping
from simulations.html_report.simulate import _offline_line
from simulations.report import WORLD_SE_WARN, world_sampling_text
from simulations.runner import world_seed
from simulations.world import build_world, world_sampling

SMALL: dict[str, Any] = {
    "seed": 1,
    "replicates": 2,
    "collection": {"type": "synthetic", "n_queries": 300, "candidates": 25, "zipf_exponent": 1.0},
    "rankers": {"depth": 10, "noise_correlation": 0.7, "A": {"noise": 1.0}, "B": {"noise": 0.92}},
    "users": {"population": 500, "types": [
        {"name": "all", "share": 1.0, "click_model": {"name": "cascade", "preset": "navigational"}}]},
    "traffic": {"days": 1, "queries_per_day": 100},
    "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"}],
}


def _sd_se(x: np.ndarray) -> float:
    """The SE of the sample SD of ``x`` from its own fourth moment: var(s^2) = (m4 - s^4 (R - 3) / (R - 1)) / R,
    SE(s) = SE(s^2) / (2 s) (the normal s / sqrt(2 (R - 1)) assumes a kurtosis of 3)."""
    r, sd = x.size, float(np.std(x, ddof=1))
    m4 = float(np.mean((x - x.mean()) ** 4))
    return math.sqrt(max(m4 - sd**4 * (r - 3) / (r - 1), 0.0) / r) / (2 * sd)


def test_hand_example() -> None:
    # f = (3, 1) / 4, d = (0.1, -0.1): dbar = 0.05, residuals 0.05 and -0.15; S2 = 10/16, S3 = 28/64;
    # plug-in 0.5625 * 0.05^2 + 0.0625 * 0.15^2 = 0.0028125, scaled by S2 / (S2 - 2 S3 + S2^2) = 0.625 / 0.140625
    n_eff, se = world_sampling(np.array([3.0, 1.0]), np.array([0.1, -0.1]))
    assert n_eff == pytest.approx(1.6, rel=1e-12)
    assert se == pytest.approx(math.sqrt(0.0028125 * 0.625 / 0.140625), rel=1e-12)
    assert se == pytest.approx(0.05 * math.sqrt(5.0), rel=1e-12)
    # one query carries everything: one effective query, no spread to estimate an SE from
    n_eff, se = world_sampling(np.array([0.0, 2.0, 0.0]), np.array([5.0, 1.0, -3.0]))
    assert n_eff == 1.0 and math.isnan(se)


def test_equal_weights_is_the_se_of_a_mean() -> None:
    d = np.random.default_rng(3).normal(0.02, 0.1, 57)
    n_eff, se = world_sampling(np.full(57, 7.0), d)
    assert n_eff == pytest.approx(57.0, rel=1e-12)
    assert se == pytest.approx(np.std(d, ddof=1) / math.sqrt(57), rel=1e-12)  # the usual n - 1 correction


def test_squared_se_is_unbiased_for_fixed_zipf_weights() -> None:
    """E[se^2] = var(d) S2 (the weighted mean's variance) for values drawn independently of the weights: a fixed-seed
    Monte Carlo over 4,000 draws of d ~ N(0, 1) for Zipf(1) weights over 200 queries, within 4 Monte Carlo SEs."""
    f = 1.0 / np.arange(1, 201)
    f /= f.sum()
    rng = np.random.default_rng(11)
    sq = np.array([world_sampling(f, rng.normal(0.0, 1.0, f.size))[1] ** 2 for _ in range(4000)])
    target = float(np.sum(f**2))
    assert abs(sq.mean() - target) < 4.0 * sq.std(ddof=1) / math.sqrt(sq.size), (sq.mean(), target)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        world_sampling(np.array([1.0, 1.0]), np.array([1.0]))
    with pytest.raises(ValueError):
        world_sampling(np.array([0.0, 0.0]), np.array([1.0, 2.0]))


def test_se_matches_the_spread_over_independently_drawn_worlds() -> None:
    cfg = config_from_mapping(SMALL)
    reps = 120  # 40 left the unweighted SE only 1.03 tolerances off (1.98 now, 1.1 s)
    deltas, ses, naive, neffs = [], [], [], []
    for s in range(reps):
        w = build_world(cfg, world_seed(1000 + s))
        d = w.offline.per_query["B"] - w.offline.per_query["A"]
        n_eff, se = world_sampling(w.frequency, d)
        assert float(np.dot(w.frequency, d)) == pytest.approx(w.offline.delta("weighted"), rel=1e-9, abs=1e-15)
        deltas.append(w.offline.delta("weighted"))
        ses.append(se)
        naive.append(np.std(d, ddof=1) / math.sqrt(d.size))  # the SE as if every query weighed the same
        neffs.append(n_eff)
    # the frequencies are a permutation of the same Zipf(1) weights: one n_eff for every world
    f = 1.0 / np.arange(1, 301)
    f /= f.sum()
    assert np.allclose(neffs, 1.0 / np.sum(f**2), rtol=1e-12)
    sd = float(np.std(deltas, ddof=1))
    sq = np.square(ses)
    printed = float(np.sqrt(np.mean(sq)))
    # 4 SEs of the difference: the SD's (from the deltas' own fourth moment: kurtosis 3.9 here, so about 1.2 x the
    # normal SD / sqrt(2 (R - 1))) and the RMS's own (delta method on the mean square). Measured: the printed SE
    # off by 0.03 of the tolerance; the unweighted SE misses by 1.98 of it
    tol = 4.0 * math.hypot(_sd_se(np.asarray(deltas)), float(np.std(sq, ddof=1)) / math.sqrt(reps) / (2 * printed))
    assert abs(printed - sd) < tol, (printed, sd, tol)
    # the test can fail: the unweighted SE misses the spread by more than the tolerance
    assert abs(float(np.sqrt(np.mean(np.square(naive)))) - sd) > tol, (naive, sd, tol)


def test_note_text_and_warning() -> None:
    off = {"delta": {"weighted": 0.0154, "uniform": 0.0208}, "effective_queries": 44.8016, "delta_world_se": 0.008184}
    head, tail = world_sampling_text(off)
    assert head == ("one drawn world: 44.8 effective queries (1 / sum f^2); the frequency-weighted delta's SE over "
                    f"worlds 0.0082 (53% of it > {WORLD_SE_WARN:.0%}!):")
    assert tail == "every number below is conditional on this world; another seed draws another world"
    quiet = world_sampling_text({**off, "delta_world_se": 0.001})
    assert quiet is not None and quiet[0].endswith("(6% of it):") and "!" not in quiet[0]
    assert world_sampling_text({"delta": {"weighted": 0.0}, "effective_queries": 3.0, "delta_world_se": 0.1})[0] \
        .endswith("(the delta is 0!):")
    assert world_sampling_text({"delta": {"weighted": 0.01}}) is None  # an older summary.json: no note
    trec = world_sampling_text(off, synthetic=False)  # a trec collection's queries are not drawn from the seed
    assert trec[0].startswith("one query sample: 44.8 effective queries") and "seed" not in trec[1]
    html = str(_offline_line({"offline": {**off, "metric": "nDCG@10", "A": {"weighted": 0.842},
                                          "B": {"weighted": 0.858}, "relative_gain_weighted": 0.018}}))
    assert "One drawn world: 44.8 effective queries (1 / sum f^2)" in html
    assert "0.0082 (53% of it &gt; 25%!): every number below is conditional on this world" in html
    trec_html = str(_offline_line({"config": {"collection": {"type": "trec"}}, "offline": {
        **off, "metric": "nDCG@10", "A": {"weighted": 0.842}, "B": {"weighted": 0.858}}}))
    assert "One query sample: 44.8" in trec_html and "drawn world" not in trec_html


# ------------------------------------------------------------------ online truths (review 4, F1, the online half)
ONLINE: dict[str, Any] = {
    **SMALL,
    "users": {"population": 500, "types": [
        {"name": "nav", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
        {"name": "inf", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]},
    "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
                {"name": "welch", "type": "ab", "metric": "clicks_per_query", "test": "welch"}],
}


def test_online_truths_se_matches_their_spread_over_independently_drawn_worlds() -> None:
    """Every exact A/B truth (delta design and per-user means) is its per-query values' frequency-weighted mean, and
    the RMS of the printed SEs over 400 independently drawn worlds matches the SD of the truth across them within
    4 SEs (the SD's SE SD / sqrt(2 (R - 1)) and the RMS's own, by the delta method); the SE as if every query weighed
    the same misses by far more."""
    from simulations.analysis import exact_truth_per_query, truth_world_se
    from simulations.runner import compute_truth
    from simulations.users import UserModels

    cfg = config_from_mapping(ONLINE)
    users = UserModels.from_config(cfg.users)
    reps = 400
    values: dict[tuple[str, str], list[float]] = {}
    ses: dict[tuple[str, str], list[float]] = {}
    naive: dict[tuple[str, str], list[float]] = {}
    for s in range(reps):
        w = build_world(cfg, world_seed(5000 + s))
        truths = compute_truth(cfg, w, users)
        per_query = exact_truth_per_query(cfg, w, users)
        se = truth_world_se(cfg, w, truths, users)
        assert set(se) == {(t.design, t.metric) for t in truths} == set(per_query)
        for t in truths:
            key = (t.design, t.metric)
            assert float(w.frequency @ per_query[key]) == pytest.approx(t.value, rel=1e-9, abs=1e-12)
            values.setdefault(key, []).append(t.value)
            ses.setdefault(key, []).append(se[key])
            naive.setdefault(key, []).append(float(np.std(per_query[key], ddof=1) / math.sqrt(w.n_queries)))
    assert len(values) == 6
    for key, v in values.items():
        sd = float(np.std(v, ddof=1))
        sq = np.square(ses[key])
        rms = float(np.sqrt(sq.mean()))
        # the SD's SE from the truths' own fourth moment (kurtosis 3.5-7.7 over these worlds: up to 1.8 x the
        # normal sd / sqrt(2 (R - 1))); measured |rms - sd| <= 0.43 of the tolerance, the naive SE 1.8-3.9 beyond it
        tol = 4.0 * math.hypot(_sd_se(np.asarray(v)), float(np.std(sq, ddof=1)) / math.sqrt(reps) / (2 * rms))
        assert abs(rms - sd) < tol, (key, rms, sd, tol)
        assert abs(float(np.sqrt(np.mean(np.square(naive[key])))) - sd) > tol, (key, naive[key][:3], sd, tol)


def test_truth_world_text_and_size_factors() -> None:
    from simulations.report import truth_world_cell, truth_world_text, world_size_factors

    # configs/ab.yaml's reciprocal_rank: +0.0027530 with SE 0.0058711 over worlds (r = 2.133)
    lo, hi = world_size_factors(0.0027530, 0.0058711)
    assert lo == pytest.approx(1.0 / (1.0 + 0.0058711 / 0.0027530) ** 2, rel=1e-12) and math.isinf(hi)
    assert truth_world_text(0.0027530, 0.0058711) == "+0.00275 +- 0.0059 (213% > 25%!; sizes x0.1 to unbounded)"
    # r = 0.2: sizes x 1/1.44 = 0.694 to 1/0.64 = 1.5625
    assert world_size_factors(-0.01, 0.002) == pytest.approx((1 / 1.44, 1 / 0.64), rel=1e-12)
    assert truth_world_text(-0.01, 0.002, with_value=False) == "+- 0.0020 (20%; sizes x0.69 to x1.6)"
    assert truth_world_text(0.0, 0.001) == "+0.00 +- 0.0010 (the effect is 0!)"
    assert truth_world_text(0.01, None) is None and world_size_factors(0.0, 0.1) is None
    assert truth_world_cell(0.0027530, 0.0058711) == "+- 0.0059 (213%!)"  # report.html's cell
    assert truth_world_cell(-0.01, 0.002) == "+- 0.0020 (20%)" and truth_world_cell(0.01, None) is None


def test_estimators_sharing_one_truth_are_listed_once() -> None:
    from simulations.report import truth_world_items, truth_world_text

    e = {"true_effect": 0.0228, "true_effect_world_se": 0.0077}
    s = {"designs": {"ab": {"clicks_per_query": e,
                            "abandonment": {"true_effect": -0.011, "true_effect_world_se": None}},
                     "cf": {"snips": e, "ips": dict(e), "rips": dict(e)}}}
    text = truth_world_text(0.0228, 0.0077)
    assert truth_world_items(s) == [("ab", "clicks_per_query", text), ("cf", "snips, ips, rips", text)]


def test_counterfactual_rows_get_the_se_of_their_targets_difference() -> None:
    """configs/counterfactual.yaml on a 200-query world: every estimator row's truth is V(B) - V(A) of the design's
    metric, so its SE over worlds is world_sampling of the targets' per-query difference (recomputed here from
    runner.exact_ab_metrics), equal to the A/B design's for the same metric; logging rows and Monte Carlo truths
    get none."""
    import yaml

    from simulations.analysis import truth_world_se
    from simulations.runner import compute_truth, exact_ab_metrics
    from simulations.users import UserModels

    data = yaml.safe_load(open("configs/counterfactual.yaml", encoding="utf-8"))
    data["collection"]["n_queries"] = 200
    data["analysis"]["truth_impressions"] = 20_000
    data.pop("output", None)
    cfg = config_from_mapping(data)
    w = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    truths = compute_truth(cfg, w, users)
    se = truth_world_se(cfg, w, truths, users)
    design = next(d for d in cfg.designs if d.type == "counterfactual")
    base, cand = design.targets
    d = exact_ab_metrics(w, users, cand)[design.metric] - exact_ab_metrics(w, users, base)[design.metric]
    expected = world_sampling(w.frequency, d)[1]
    rows = [t for t in truths if t.design == design.name and not t.metric.startswith("logging:")]
    assert len(rows) == len(design.estimators) >= 2
    for t in rows:
        assert se[(t.design, t.metric)] == pytest.approx(expected, rel=1e-12)
    assert se[("ab", design.metric)] == pytest.approx(expected, rel=1e-12)
    assert not any(k[1].startswith("logging:") for k in se)
    assert not any(t.se > 0 and (t.design, t.metric) in se for t in truths)
