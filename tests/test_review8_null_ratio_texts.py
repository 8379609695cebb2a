"""Review 8, F2 / F4 / F5: the printed evidence of a null-replicates bias, the 'not distinguishable' rule on the log
ratio difference, and the '?' / '*' marks of a multileaving ratio range.

References: scipy.stats.ttest_1samp and scipy.stats.t (the null replicates' mean test and its critical t), the
normal test of a log-ratio difference computed by hand here.
"""

from __future__ import annotations

import json
import math
from html import unescape

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulations.analysis import design_ratios, null_check
from simulations.runner import Truth


def _balanced_null(r: int = 100) -> tuple[dict, np.ndarray]:
    """A balanced-like null check (review 8, bal100.yaml): null Delta -0.000736 +- 0.0017 (z 0.4) while the null
    replicates' last-day mean is -0.00557 +- 0.00032 (t about -17)."""
    z = np.random.default_rng(88).standard_normal(r)
    z = (z - z.mean()) / z.std(ddof=1)
    x = -0.00557 + 0.0032 * z  # mean -0.00557, SE 0.00032 exactly
    rows = pd.DataFrame([{"day": 1, "pvalue": 0.5 if i % 3 else 0.001, "estimate": v} for i, v in enumerate(x)])
    c = pd.DataFrame({"day": [1], "mean_se": [0.003]})
    n = null_check(Truth("balanced", "null:delta_ab", -0.000736, 0.0017, "mc"), c, 0.05, r, rows)
    return n, x


def test_biased_verdict_quotes_the_null_replicates_mean_test():
    from simulations.report import null_biased_verdict, null_detectable_text

    n, x = _balanced_null()
    ref = stats.ttest_1samp(x, 0.0)
    assert n["biased"] and n["biased_null_replicates"] and n["bias_rules"] == ["null_replicates_mean"]
    assert ref.statistic == pytest.approx(-0.00557 / 0.00032, rel=1e-9)  # -17.4
    p = float(ref.pvalue)
    mant, exp = f"{p:.0e}".split("e")
    verdict = null_biased_verdict(n, "delta_ab")
    assert verdict == f"BIASED (null replicates' mean -0.00557 +- 0.00032, t -17, p {mant}e{int(exp)} < 0.01 (the " \
                      "run's one null-checked pair); favours A when no ranker is better)"
    assert "z 0.4" not in verdict and "-0.000736" not in verdict  # the Delta did not fire
    # the detectable bias of each rule, named, at 80% power (review 9, F4): (4 + z_0.8) x 0.0017 = 0.00823;
    # the noncentral t's nc x 0.00032 (about (t_crit(0.01, 99 df) + t_0.8,99)); the 50% values stay in detectable_bias
    crit = stats.t.ppf(1 - 0.01 / 2, 99)
    assert n["null_mean_test"]["detectable_bias"] == pytest.approx(crit * 0.00032, rel=1e-9)
    text = null_detectable_text(n, 0.0092)
    assert (4 + stats.norm.ppf(0.8)) * 0.0017 == pytest.approx(0.0082307, rel=1e-4)
    assert text.startswith("0.00823 (89% of the effect) with 80% power by the 4-SE rule on the null Delta "
                           "((4 + z_0.8 0.84) x its SE); >= ")
    nc = n["null_mean_test"]["noncentrality_80"]  # P(|T| > t_crit) = 0.8, T noncentral t (99 df, nc): by scipy
    assert stats.nct.sf(crit, 99, nc) + stats.nct.cdf(-crit, 99, nc) == pytest.approx(0.8, abs=1e-9)
    assert nc == pytest.approx(crit + stats.t.ppf(0.8, 99), rel=2e-3)  # near its normal-theory approximation
    m = nc * 0.00032
    assert f">= {m:.3g} ({m / 0.0092:.0%} of the effect) with 80% power by the null replicates' mean test " \
           f"({nc:.2f} x its SE, noncentral t; t_crit 2.6, 99 df)" in text


def test_a_null_delta_verdict_quotes_the_delta_and_both_when_both_fire():
    from simulations.report import null_bias_evidence

    c = pd.DataFrame({"day": [1], "mean_se": [0.003]})
    rows = pd.DataFrame([{"day": 1, "pvalue": 0.5, "estimate": 0.001 * (-1) ** i} for i in range(20)])
    n = null_check(Truth("b", "null:delta_ab", -0.0012, 0.0002, "mc"), c, 0.05, 20, rows)
    assert n["bias_rules"] == ["null_delta"]
    assert null_bias_evidence(n) == "null Delta -0.00120 +- 0.00020, z 6.0"
    n2, _ = _balanced_null()
    both = null_check(Truth("b", "null:delta_ab", -0.0012, 0.0002, "mc"), c, 0.05, 100,
                      pd.DataFrame([{"day": 1, "pvalue": 0.5, "estimate": v}
                                    for v in -0.00557 + 0.0032 * np.linspace(-1.7, 1.7, 100)]))
    assert both["bias_rules"] == ["null_replicates_mean", "null_delta"]
    assert null_bias_evidence(both).startswith("null replicates' mean -0.00557 +- ")
    assert null_bias_evidence(both).endswith("; null Delta -0.00120 +- 0.00020, z 6.0")


def test_ratio_lines_html_and_sweep_quote_the_evidence_that_fired(tmp_path):
    from simulations.html_report.simulate import _ratios, calibration_section
    from simulations.html_report.sweep import calibration_section as sweep_calibration
    from simulations.report import _ratio_lines

    n, x = _balanced_null()
    ref = stats.ttest_1samp(x, 0.0)
    want = "null replicates' mean -0.00557 +- 0.00032, t -17"
    e = {"metric": "delta_ab", "primary": True, "information_last_day": 9.0, "information_last_day_rel_se": 0.1,
         "analytic_required_impressions": 1e5, "analytic_required_impressions_rel_se": 0.1, "null": n,
         "true_effect": 0.0092}
    designs = {"ab": {"rr": {"metric": "rr", "primary": True, "information_last_day": 1.0,
                             "information_last_day_rel_se": 0.05, "analytic_required_impressions": 1e6,
                             "analytic_required_impressions_rel_se": 0.05}},
               "balanced": {"delta_ab": e}}
    r = {"reference": "ab", "last_day": 14, **design_ratios(designs, "ab")}
    b = r["biased"]["balanced"]
    assert b["rules"] == ["null_replicates_mean"]
    assert b["null_mean_test"]["t"] == pytest.approx(ref.statistic, rel=1e-9)
    json.dumps(r)  # summary.json can hold it
    lines = _ratio_lines(r, 0.8, True)
    assert any(f"balanced biased ({want}, p " in ln for ln in lines)
    assert not any("null Delta" in ln for ln in lines)
    ratios_html = unescape(str(_ratios({"required_impressions_ratio": r, "conventions": {"target_power": 0.8}})))
    assert f"({want}, p " in ratios_html and "null Delta" not in ratios_html
    html = unescape(str(calibration_section({"designs": {"balanced": {"delta_ab": e}}})))
    assert f"BIASED</span> ({want}, p " in html and "; favours A when no ranker is better)" in html
    assert "with 80% power by the null replicates' mean test (3.48 x its SE, noncentral t; t_crit 2.6, 99 df)" in html
    point = {"designs": {"balanced": {"delta_ab": e}}, "conventions": {"null_check": "x"}}
    sweep = unescape(str(sweep_calibration({"rows": [{"point": 0, "design": "balanced", "metric": "delta_ab"}]},
                                           {0: point})))
    assert f"BIASED</span> ({want}, p " in sweep and "z 0.4" not in sweep


def test_an_excess_rate_note_says_bias_or_se_miscalibration():
    from simulations.html_report.simulate import calibration_section
    from simulations.report import null_rate_note

    c = pd.DataFrame({"day": [1], "mean_se": [0.002]})
    rows = pd.DataFrame([{"day": 1, "pvalue": 0.001 if i < 30 else 0.5, "estimate": 0.001 * (-1) ** i}
                         for i in range(100)])
    n = null_check(Truth("tdm", "null:delta_ab", -0.0006, 0.0007, "mc"), c, 0.05, 100, rows)
    assert not n["biased"] and n["se_miscalibrated"]
    assert null_rate_note(n, "delta_ab").startswith("bias or SE miscalibration? 30/100 null replicates reject")
    assert "bias or SE miscalibration? 30/100" in str(calibration_section(
        {"designs": {"tdm": {"delta_ab": {"null": n, "true_effect": 0.01}}}}))


def _entry(metric: str, info: float, info_rel: float, n: float, n_rel: float, primary: bool = True, **kw) -> dict:
    return {"metric": metric, "primary": primary, "information_last_day": info, "information_last_day_rel_se": info_rel,
            "analytic_required_impressions": n, "analytic_required_impressions_rel_se": n_rel, **kw}


def _z_diff(a: float, b: float, sa: float, sb: float) -> float:
    return abs(math.log(a / b)) / math.hypot(sa, sb)


def test_not_distinguishable_tests_the_log_ratio_difference():
    from simulations.analysis import indistinguishable

    # review 8's reproduction: 10 vs 13 at 7% each, p = 0.008: distinguishable now (the intervals overlap)
    z = _z_diff(10.0, 13.0, 0.07, 0.07)
    assert z == pytest.approx(2.65, abs=0.01) and 2 * stats.norm.sf(z) == pytest.approx(0.008, abs=0.0005)
    assert indistinguishable({"ab": 1, "x": 10.0, "y": 13.0}, {"ab": 0, "x": 0.07, "y": 0.07},
                             {"ab": 0, "x": 0, "y": 0}, "ab") == []
    # at 12% each: z = ln 1.3 / (0.12 sqrt 2) = 1.55 < 2, not distinguishable
    assert indistinguishable({"ab": 1, "x": 10.0, "y": 13.0}, {"ab": 0, "x": 0.12, "y": 0.12},
                             {"ab": 0, "x": 0, "y": 0}, "ab") == [["x", "y"]]
    # a shared reference's 20% cancels: own 5% each, ln 1.3 / (0.05 sqrt 2) = 3.7 -> distinguishable; through
    # design_ratios the reference's error is in each ratio's rel SE (hypot) but not in the difference
    designs = {"ref": {"m": _entry("m", 1.0, 0.2, 1e6, 0.2)},
               "x": {"m": _entry("m", 10.0, 0.05, 1e5, 0.05)},
               "y": {"m": _entry("m", 13.0, 0.05, 1.3e5, 0.05)}}
    r = design_ratios(designs, "ref")
    assert r["ratios_rel_se"]["x"] == pytest.approx(math.hypot(0.05, 0.2), rel=1e-12)
    # the old overlap rule: exp(+-2 x 0.206) intervals of 10 and 13 overlap
    s = math.hypot(0.05, 0.2)
    assert 10 * math.exp(2 * s) > 13 * math.exp(-2 * s)
    assert r["indistinguishable"]["equal_traffic_efficiency"] == []
    assert r["indistinguishable"]["ratios"] == []
    # against the reference: |ln 10| / hypot(0.05, 0.2) = 11 -> distinguishable; a design at 1.3x with 10% own:
    # ln 1.3 / hypot(0.1, 0.2) = 1.17 -> not
    designs["w"] = {"m": _entry("m", 1.3, 0.1, 1.3e6, 0.1)}
    r = design_ratios(designs, "ref")
    assert r["indistinguishable"]["ratios"] == [["ref", "w"]]
    assert r["rel_se_parts"]["ratios"]["x"] == {"own": 0.05, "reference": 0.2, "reference_metrics": ["m"]}
    assert "|ln r_a - ln r_b| < 2 SE of the difference" in r["indistinguishable"]["rule"]
    # either side of the 2-SE threshold of 10 vs 13 (own SEs equal, no reference term): s = ln 1.3 / (2 sqrt 2)
    s_edge = math.log(1.3) / (2 * math.sqrt(2))
    assert s_edge == pytest.approx(0.09276, abs=1e-5)
    for sd, expected in ((0.0920, []), (0.0935, [["x", "y"]])):  # z = 2.017, 1.984
        assert indistinguishable({"ab": 1, "x": 10.0, "y": 13.0}, {"ab": 0, "x": sd, "y": sd},
                                 {"ab": 0, "x": 0, "y": 0}, "ab") == expected, sd


def test_not_distinguishable_legend_states_the_rule():
    from simulations.html_report.simulate import _ratios
    from simulations.report import _ratio_lines

    designs = {"ref": {"m": _entry("m", 1.0, 0.2, 1e6, 0.2)}, "w": {"m": _entry("m", 1.3, 0.1, 1.3e6, 0.1)}}
    r = {"reference": "ref", "last_day": 7, **design_ratios(designs, "ref")}
    lines = [ln for ln in _ratio_lines(r, 0.8, False) if "not distinguishable" in ln]
    assert lines and all("|log ratio difference| < 2 SE of the difference" in ln and "overlap" not in ln
                         for ln in lines)
    html = str(_ratios({"required_impressions_ratio": r}))
    assert "|log ratio difference| &lt; 2 SE of the difference" in html and "overlap" not in html


def test_multileaving_range_marks_extrapolated_and_unstable_pairs():
    from simulations.html_report.simulate import _ratios
    from simulations.report import _ratio_lines

    pairs = ["delta_B_vs_A", "delta_C_vs_A", "delta_D_vs_A", "delta_C_vs_B"]
    # review 8's multileaving: B vs A needs 93.0 / 381.4 days (13.3x and 54.5x the 7 simulated), unstable
    far = {"analytic_required_days_extrapolation": 54.5, "analytic_required_impressions_unstable": True}
    ref = {p: _entry(p, 1.0, 0.1, 1e6, 0.1, p == pairs[0], **(far if p == pairs[0] else {})) for p in pairs}
    sizes = {"delta_B_vs_A": 0.244e6, "delta_C_vs_A": 0.613e6, "delta_D_vs_A": 0.765e6, "delta_C_vs_B": 0.777e6}
    pm = {p: _entry(p, 1.2, 0.1, sizes[p], 0.1, p == pairs[0]) for p in pairs}
    r = {"reference": "tdm", "last_day": 7, **design_ratios({"tdm": ref, "pm": pm}, "tdm")}
    assert r["by_pair"]["pm"]["delta_B_vs_A"]["extrapolated"] and r["by_pair"]["pm"]["delta_B_vs_A"]["unstable"]
    assert not r["by_pair"]["pm"]["delta_C_vs_A"]["extrapolated"]
    assert r["ratios"]["pm"] == pytest.approx((0.613 + 0.765) / 2, rel=1e-12)
    need = next(ln for ln in _ratio_lines(r, 0.8, False, extrapolated={"tdm", "pm"}) if "impressions needed" in ln)
    # the median (C vs A, D vs A) is not marked; the range's low end (B vs A) is
    assert "pm 0.689x +-14% [0.244?*-0.777 over 4 pairs] (1.45x fewer)" in need
    assert "'*': from a size extrapolated beyond 3x" in need
    assert "[0.244?*-0.777 over 4 pairs]" in str(_ratios({"required_impressions_ratio": r}))
    # a median from a marked pair is marked: three pairs, the middle one extrapolated
    pm3 = {p: pm[p] for p in pairs[:3]}
    ref3 = {p: dict(ref[p], **({} if p != pairs[1] else {"analytic_required_impressions_extrapolated": True}))
            for p in pairs[:3]}
    ref3[pairs[0]] = _entry(pairs[0], 1.0, 0.1, 1e6, 0.1, True)
    r3 = {"reference": "tdm", "last_day": 7, **design_ratios({"tdm": ref3, "pm": pm3}, "tdm")}
    need3 = next(ln for ln in _ratio_lines(r3, 0.8, False) if "impressions needed" in ln)
    assert "pm 0.613x +-14%* [0.244-0.765 over 3 pairs]" in need3
