"""Review 6, F1: the method-efficiency ratios carry a delta-method relative SE, a '?' above 25%, a 'not
distinguishable' note, and multileaving designs are compared over every pair (median and range).

References: Monte Carlo of the ratio itself (fixed seeds; the formula within 4 SEs of an SD), numpy medians.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulations.analysis import (
    RATIO_UNCERTAIN_REL_SE,
    design_ratios,
    information_rel_se,
    ratio_interval,
    ratio_rel_se,
)


def _sd_band(x: np.ndarray) -> tuple[float, float]:
    """The relative SD of draws and the SE of that SD from the draws' own fourth moment (the information and the
    ratio are squares and quotients, skewed; the normal SD / sqrt(2 (M - 1)) assumes a kurtosis of 3): the
    sample variance has var (m4 - sd^4 (M - 3) / (M - 1)) / M, and SE(sd) = SE(sd^2) / (2 sd) (delta method)."""
    m = x.size
    sd = float(x.std(ddof=1))
    m4 = float(np.mean((x - x.mean()) ** 4))
    return sd, math.sqrt(max(m4 - sd**4 * (m - 3) / (m - 1), 0.0) / m) / (2 * sd)


def _mean_band(x: list[float]) -> tuple[float, float]:
    """The mean of the formula over replicate days (each from its own noisy SEs) and its Monte Carlo SE."""
    a = np.asarray(x, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=1) / math.sqrt(a.size))


def test_information_rel_se_matches_the_monte_carlo_spread_of_the_mean_se_form():
    rng = np.random.default_rng(20261202)
    m, n, t0, se_t = 40_000, 200, 0.01, 0.0003  # truth: 3% relative Monte Carlo SE
    t = rng.normal(t0, se_t, m)
    s = rng.lognormal(np.log(0.004), 0.3, (m, n))  # the replicates' SEs of the day: ~2.2% rel SE of their mean
    s0 = 0.004 * math.exp(0.3**2 / 2)  # population mean of the lognormal
    info = (t / s.mean(axis=1)) ** 2
    sd, sd_se = _sd_band(info / (t0 / s0) ** 2)
    formula, formula_se = _mean_band([information_rel_se(t0, se_t, s[i]) for i in range(0, m, 40)])
    assert abs(formula - sd) <= 4 * math.hypot(sd_se, formula_se), (formula, sd, sd_se, formula_se)


def test_information_rel_se_matches_the_monte_carlo_spread_of_the_sd_form():
    rng = np.random.default_rng(20261203)
    m, n, t0, se_t = 40_000, 400, 0.02, 0.0004
    t = rng.normal(t0, se_t, m)
    est = rng.normal(t0, 0.01, (m, n))  # the day's SE is the replicates' SD (spread)
    info = (t / est.std(axis=1, ddof=1)) ** 2
    sd, sd_se = _sd_band(info / (t0 / 0.01) ** 2)
    formula = information_rel_se(t0, se_t, est[0], spread=True)
    assert formula == pytest.approx(2 * math.hypot(0.02, 1 / math.sqrt(2 * 399)), rel=1e-12)
    assert abs(formula - sd) <= 4 * sd_se, (formula, sd, sd_se)


def test_efficiency_ratio_spread_is_the_hypot_of_the_two_informations():
    # two designs, independent Monte Carlo truths and replicate SEs: perturb everything by its SE
    rng = np.random.default_rng(20261204)
    m, n = 40_000, 150
    t1, se1, t2, se2 = 0.012, 0.00024, 0.0055, 0.000165  # 2% and 3% relative
    a = rng.normal(t1, se1, m) / rng.lognormal(np.log(0.003), 0.15, (m, n)).mean(axis=1)
    b = rng.normal(t2, se2, m) / rng.lognormal(np.log(0.004), 0.15, (m, n)).mean(axis=1)
    ratio = (a / b) ** 2
    s1, s2 = 0.003 * math.exp(0.15**2 / 2), 0.004 * math.exp(0.15**2 / 2)
    r0 = ((t1 / s1) / (t2 / s2)) ** 2
    sd, sd_se = _sd_band(ratio / r0)
    v1 = rng.lognormal(np.log(0.003), 0.15, (50, n))
    v2 = rng.lognormal(np.log(0.004), 0.15, (50, n))
    formula, formula_se = _mean_band([ratio_rel_se(information_rel_se(t1, se1, v1[i]),
                                                   information_rel_se(t2, se2, v2[i])) for i in range(50)])
    assert abs(formula - sd) <= 4 * math.hypot(sd_se, formula_se), (formula, sd, sd_se, formula_se)


def _entry(metric: str, info: float, info_rel: float, n: float | None, n_rel: float | None,
           primary: bool = False) -> dict:
    return {"metric": metric, "primary": primary, "information_last_day": info, "information_last_day_rel_se": info_rel,
            "analytic_required_impressions": n, "analytic_required_impressions_rel_se": n_rel}


def test_single_metric_designs_get_hypot_rel_se_and_overlap_pairs():
    designs = {
        "ab": {"rr": _entry("rr", 0.05, 0.01, 1e6, 0.05, True)},
        "td": {"delta_ab": _entry("delta_ab", 0.51, 0.074, 9.8e4, 0.064, True)},
        "pr": {"delta_ab": _entry("delta_ab", 0.54, 0.072, 9.3e4, 0.077, True)},
        "wide": {"delta_ab": _entry("delta_ab", 0.06, 0.40, 9e5, 0.5, True)},
    }
    r = design_ratios(designs, "ab")
    assert r["equal_traffic_efficiency"]["td"] == pytest.approx(0.51 / 0.05, rel=1e-12)
    assert r["equal_traffic_efficiency_rel_se"]["td"] == pytest.approx(math.sqrt(0.074**2 + 0.01**2), rel=1e-12)
    assert r["ratios"]["pr"] == pytest.approx(9.3e4 / 1e6, rel=1e-12)
    assert r["ratios_rel_se"]["pr"] == pytest.approx(math.sqrt(0.077**2 + 0.05**2), rel=1e-12)
    assert r["ratios_rel_se"]["ab"] == 0.0 and r["ratios"]["ab"] == 1.0
    # independent check of review 8, F4's rule: |ln a - ln b| < 2 SE of the difference; the shared reference's
    # 0.01 cancels between two designs, against the reference the ratio's full rel SE
    own = {"td": 0.074, "pr": 0.072, "wide": 0.40}
    eff = r["equal_traffic_efficiency"]
    want = [["ab", d] for d in own if abs(math.log(eff[d])) < 2 * math.hypot(own[d], 0.01)]
    want += [[a, b] for i, a in enumerate(own) for b in list(own)[i + 1:]
             if abs(math.log(eff[a] / eff[b])) < 2 * math.hypot(own[a], own[b])]
    assert r["indistinguishable"]["equal_traffic_efficiency"] == want == [["ab", "wide"], ["td", "pr"]]
    assert ratio_interval(10.0, 0.1) == pytest.approx([10 * math.exp(-0.2), 10 * math.exp(0.2)])


def test_multileaving_is_compared_over_every_pair_not_the_first():
    pairs = ["delta_B_vs_A", "delta_C_vs_A", "delta_D_vs_A", "delta_C_vs_B"]
    rng = np.random.default_rng(5)
    ref = {p: _entry(p, float(x), 0.1, float(n), 0.2, p == pairs[0])
           for p, x, n in zip(pairs, rng.uniform(0.1, 1, 4), rng.uniform(1e5, 1e6, 4), strict=True)}
    pm = {p: _entry(p, float(x), 0.3 if p == pairs[0] else 0.05, float(n), 0.1, p == pairs[0])
          for p, x, n in zip(pairs, rng.uniform(0.1, 1, 4), rng.uniform(1e5, 1e6, 4), strict=True)}
    r = design_ratios({"tdm": ref, "pm": pm}, "tdm")
    eff = [pm[p]["information_last_day"] / ref[p]["information_last_day"] for p in pairs]
    need = [pm[p]["analytic_required_impressions"] / ref[p]["analytic_required_impressions"] for p in pairs]
    assert r["equal_traffic_efficiency"]["pm"] == pytest.approx(float(np.median(eff)), rel=1e-12)
    assert r["ratios"]["pm"] == pytest.approx(float(np.median(need)), rel=1e-12)
    assert r["equal_traffic_efficiency_rel_se"]["pm"] == pytest.approx(
        float(np.median([math.hypot(0.3, 0.1)] + [math.hypot(0.05, 0.1)] * 3)), rel=1e-12)
    assert [r["by_pair"]["pm"][p]["efficiency"] for p in pairs] == pytest.approx(eff, rel=1e-12)


def test_report_prints_the_uncertainty_the_mark_and_the_note():
    from simulations.report import _ratio_lines, pair_range_text, ratio_uncertainty_text

    assert ratio_uncertainty_text(0.074) == " +-7%"
    assert ratio_uncertainty_text(RATIO_UNCERTAIN_REL_SE + 0.01) == " +-26%?"
    assert ratio_uncertainty_text(None) == " +-?"
    # below 1% one significant digit: the bundled counterfactual config's 0.0046 printed '+-0%', as if exact
    assert ratio_uncertainty_text(0.0046) == " +-0.5%" and ratio_uncertainty_text(0.0) == " +-0%"
    designs = {
        "ab": {"rr": _entry("rr", 0.05, 0.01, 1e6, 0.05, True)},
        "td": {"delta_ab": _entry("delta_ab", 0.51, 0.074, 9.8e4, 0.064, True)},
        "pr": {"delta_ab": _entry("delta_ab", 0.54, 0.40, 9.3e4, 0.077, True)},
    }
    r = {"reference": "ab", "last_day": 7, **design_ratios(designs, "ab")}
    lines = _ratio_lines(r, 0.8, True)
    assert "relative to ab: td 10.2x +-7%, pr 10.8x +-40%?" in lines[0]
    assert "td 0.0980x +-8% (10.2x fewer)" in lines[1]
    assert any(ln.startswith("  not distinguishable (information per impression") and "td ~ pr" in ln
               for ln in lines)
    assert pair_range_text({"x": {"ratio": 0.5}, "y": {"ratio": 2.0}, "z": {"ratio": None}}, "ratio") == (
        " [0.500-2.00 over 2 pairs]")


def test_a_ratio_from_an_extrapolated_size_is_starred():
    from simulations.report import _ratio_lines

    designs = {
        "ab": {"rr": _entry("rr", 0.05, 0.01, 1e6, 0.05, True)},
        "td": {"delta_ab": _entry("delta_ab", 0.51, 0.074, 9.8e4, 0.064, True)},
    }
    r = {"reference": "ab", "last_day": 7, **design_ratios(designs, "ab")}
    assert "td 0.0980x +-8% (10.2x fewer)" in _ratio_lines(r, 0.8, True)[1]
    line = _ratio_lines(r, 0.8, True, extrapolated={"ab"})[1]
    assert "td 0.0980x +-8%* (10.2x fewer) ('*': from a size extrapolated beyond 3x the simulated days" in line
