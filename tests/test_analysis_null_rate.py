"""Review 6, F2: the null check's bias flag comes from the null Delta (4 Monte Carlo SEs), not from an excess null
rejection rate; an excess rate is a 'bias or SE miscalibration?' note, one-sided exact binomial at 0.01 / pairs.

References: scipy.stats.binom (the one-sided p-value and the Bonferroni boundary computed by brute force here).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulations.analysis import NULL_RATE_FAMILY_LEVEL, is_biased_entry, null_check
from simulations.runner import Truth


def _rows(k_last: int, r: int = 100, days: int = 3) -> pd.DataFrame:
    """Null replicates rejecting (p 0.001) k_last times on the last day, 5 times on earlier days."""
    out = []
    for day in range(1, days + 1):
        k = k_last if day == days else 5
        for i in range(r):
            out.append({"day": day, "pvalue": 0.001 if i < k else 0.5, "estimate": 0.001 * ((-1) ** i)})
    return pd.DataFrame(out)


def _c(days: int = 3) -> pd.DataFrame:
    return pd.DataFrame({"day": list(range(1, days + 1)), "mean_se": [0.002, 0.0015, 0.0012]})


def _boundary(r: int, alpha: float, level: float) -> int:
    """Smallest rejection count whose one-sided binomial p-value is below ``level`` (brute force)."""
    return next(k for k in range(r + 1) if stats.binom.sf(k - 1, r, alpha) < level)


def test_review6_tdm_pair_is_not_biased_at_z_0_9_with_12_of_100_rejections():
    # review 6's tdm delta_C_vs_A on multileaving.yaml: -0.000618 +- 0.00069 (z 0.9), 12/100 null rejections
    n = null_check(Truth("tdm", "null:delta_C_vs_A", -0.000618, 0.00069, "mc"), _c(), 0.05, 100, _rows(12), pairs=6)
    assert not n["biased"] and not is_biased_entry({"null": n})
    x = n["rate_excess"]
    assert x["rejections"] == 12 and x["replicates"] == 100 and x["pairs"] == 6
    assert x["pvalue"] == pytest.approx(stats.binom.sf(11, 100, 0.05), rel=1e-12)
    assert x["threshold"] == pytest.approx(NULL_RATE_FAMILY_LEVEL / 6)
    assert not n["se_miscalibrated"]  # p 0.0043 > 0.01 / 6
    # the same count with a single pair is below 0.01: a note, still no bias
    one = null_check(Truth("tdm", "null:delta_ab", -0.000618, 0.00069, "mc"), _c(), 0.05, 100, _rows(12))
    assert one["se_miscalibrated"] and not one["biased"]


@pytest.mark.parametrize("pairs", [1, 6, 12])
def test_note_fires_exactly_at_the_bonferroni_boundary(pairs: int):
    k = _boundary(100, 0.05, NULL_RATE_FAMILY_LEVEL / pairs)
    t = Truth("d", "null:delta_B_vs_A", 0.0, 0.001, "mc")
    below = null_check(t, _c(), 0.05, 100, _rows(k - 1), pairs=pairs)
    at = null_check(t, _c(), 0.05, 100, _rows(k), pairs=pairs)
    assert not below["se_miscalibrated"] and at["se_miscalibrated"]
    assert not below["biased"] and not at["biased"]


def test_bias_flag_is_the_four_se_rule_on_the_null_delta():
    n = null_check(Truth("b", "null:delta_ab", -0.0055, 0.0005, "mc"), _c(), 0.05, 100, _rows(5))
    assert n["biased"] and is_biased_entry({"null": n}) and not n["se_miscalibrated"]
    n = null_check(Truth("b", "null:delta_ab", -0.0019, 0.0005, "mc"), _c(), 0.05, 100, _rows(30))
    assert not n["biased"] and n["se_miscalibrated"]  # z 3.8: below the flag whatever the rate


def test_verdicts_name_no_bias_and_give_a_direction_only_beyond_z_2():
    from simulations.report import null_direction, null_rate_note

    t = Truth("tdm", "null:delta_C_vs_A", -0.000618, 0.00069, "mc")
    n = null_check(t, _c(), 0.05, 100, _rows(30), pairs=6)
    assert null_direction(n, "delta_C_vs_A") is None
    note = null_rate_note(n, "delta_C_vs_A")
    assert note.startswith("bias or SE miscalibration? 30/100 null replicates reject (one-sided p = ")
    assert "0.0017 = 0.01 / 6 null-checked pairs of the run" in note and "favours" not in note and "BIASED" not in note
    n2 = null_check(Truth("tdm", "null:delta_C_vs_A", -0.0018, 0.0006, "mc"), _c(), 0.05, 100, _rows(30), pairs=6)
    assert null_direction(n2, "delta_C_vs_A") == "the earlier ranker"
    assert null_rate_note(n2, "delta_C_vs_A").endswith(", Delta favours the earlier ranker")
    assert null_direction(n2, "delta_ab") == "A"
    assert null_rate_note(null_check(t, _c(), 0.05, 100, _rows(5), pairs=6), "delta_C_vs_A") == ""


def test_html_calibration_shows_the_note_not_biased():
    from simulations.html_report.simulate import calibration_section

    t = Truth("tdm", "null:delta_C_vs_A", -0.000618, 0.00069, "mc")
    n = null_check(t, _c(), 0.05, 100, _rows(30), pairs=6)
    html = str(calibration_section({"designs": {"tdm": {"delta_C_vs_A": {"null": n, "true_effect": 0.01}}}}))
    assert "bias or SE miscalibration? 30/100" in html and "BIASED" not in html and "no bias detected (z = 0.9)" in html


def test_null_replicates_mean_off_zero_is_a_bias_with_its_direction():
    # the null replicates' mean is the estimate's own mean under the null: the bias t-test (estimate_is_biased)
    from simulations.analysis import estimate_is_biased
    from simulations.report import null_direction

    rows = _rows(5)
    last = rows["day"] == rows["day"].max()
    rows.loc[last, "estimate"] = rows.loc[last, "estimate"] + 0.0005  # mean 0.0005, SD 0.001, 100 replicates: t 5
    x = rows.loc[last, "estimate"].to_numpy()
    assert estimate_is_biased(float(x.mean()), float(x.std(ddof=1)), x.size)
    n = null_check(Truth("b", "null:delta_ab", 0.0001, 0.0005, "mc"), _c(), 0.05, 100, rows)
    assert n["biased"] and n["biased_null_replicates"] and null_direction(n, "delta_ab") == "B"
    rows.loc[last, "estimate"] = x - 0.0005 + 0.0002  # t 2: p 0.048, above 0.01: not flagged
    n = null_check(Truth("b", "null:delta_ab", 0.0001, 0.0005, "mc"), _c(), 0.05, 100, rows)
    assert not n["biased"] and not n["biased_null_replicates"] and null_direction(n, "delta_ab") is None
    rows.loc[last, "estimate"] = x - 0.0005 + 0.0003  # t 3: p 0.0034 < 0.01 (the null truth is exactly 0)
    n = null_check(Truth("b", "null:delta_ab", 0.0001, 0.0005, "mc"), _c(), 0.05, 100, rows)
    ref = stats.ttest_1samp(rows.loc[last, "estimate"].to_numpy(), 0.0).pvalue
    assert n["biased"] and n["null_mean_test"]["pvalue"] == pytest.approx(ref, rel=1e-9) and ref < 0.01
    # with 6 pairs the level is 0.01 / 6 = 0.00167: t 3 (p 0.0034) is not flagged there
    n = null_check(Truth("b", "null:delta_ab", 0.0001, 0.0005, "mc"), _c(), 0.05, 100, rows, pairs=6)
    assert not n["biased"] and n["null_mean_test"]["level"] == pytest.approx(0.01 / 6)


def test_few_biased_null_replicates_are_flagged_review8():
    """Review 8, F1: 10 null replicates of a biased (balanced) design at t = -3.57 and -6.82 passed as unbiased under
    the 6.3e-5 level (critical t 7.0 at 9 df); at 0.01 (the null truth is exactly 0) both are flagged, and the
    p-value is scipy's one-sample t-test."""
    from simulations.analysis import null_mean_test

    rng = np.random.default_rng(8)
    for t_target in (-3.57, -6.82):
        z = rng.standard_normal(10)
        z = (z - z.mean()) / z.std(ddof=1)  # mean 0, SD 1 exactly
        x = 0.002 * z + t_target * 0.002 / np.sqrt(10)
        res = null_mean_test(x, 0.01)
        ref = stats.ttest_1samp(x, 0.0)
        assert res["t"] == pytest.approx(t_target, rel=1e-9) and res["pvalue"] == pytest.approx(ref.pvalue, rel=1e-9)
        assert res["biased"]
        rows = pd.DataFrame([{"day": 1, "pvalue": 0.5, "estimate": v} for v in x])
        c1 = pd.DataFrame({"day": [1], "mean_se": [0.002]})
        n = null_check(Truth("bal", "null:delta_ab", -0.0007, 0.0017, "mc"), c1, 0.05, 10, rows)
        assert n["biased"] and n["biased_null_replicates"] and is_biased_entry({"null": n})
    assert null_mean_test(np.array([0.0, 0.0, 0.0]), 0.01)["biased"] is False
    assert null_mean_test(np.array([1e-3, 1e-3]), 0.01)["biased"] is True
    assert null_mean_test(np.array([1e-3, np.nan]), 0.01) is None


def test_unbiased_null_replicates_are_flagged_at_the_stated_level():
    """Under no bias the mean test flags a design at its level (0.01 / pairs): 4,000 worlds of 10 normal null
    replicates, flag rate within the 99.9% binomial band of 0.01 (and of 0.01 / 6 with six pairs)."""
    from simulations.analysis import null_mean_test

    rng = np.random.default_rng(2024)
    x = rng.standard_normal((4000, 10)) * 0.003
    for level in (0.01, 0.01 / 6):
        k = sum(null_mean_test(row, level)["biased"] for row in x)
        lo, hi = stats.binom.ppf([0.0005, 0.9995], 4000, level)
        assert lo <= k <= hi, (level, k, lo, hi)
