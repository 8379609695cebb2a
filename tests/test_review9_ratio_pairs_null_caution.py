"""Review 9, F2 / F3: two multileaving designs' medians from different reference pairs keep both references'
errors in the 'not distinguishable' test, and an unflagged null check quotes a notable null replicates' mean test.

References: the medians, the pairs they come from and the z of the log-ratio difference computed by hand here (the
reviewer's synthetic reproduction, /tmp/r9/ml_shared.py); scipy.stats.ttest_1samp for the quoted mean test.
"""

from __future__ import annotations

import math
from html import unescape
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulations.analysis import design_ratios, null_check
from simulations.runner import Truth

PAIRS = ["delta_B_vs_A", "delta_C_vs_A", "delta_C_vs_B"]


def _design(sizes: tuple[float, ...], rel: float) -> dict:
    return {m: {"metric": m, "primary": m == PAIRS[0], "analytic_required_impressions": n,
                "analytic_required_impressions_rel_se": rel, "information_last_day": 1.0 / n,
                "information_last_day_rel_se": rel} for m, n in zip(PAIRS, sizes)}


def test_medians_from_different_reference_pairs_keep_both_reference_errors():
    # reference tdm: each pair's size with a 30% relative SE (Monte Carlo truths); own designs at 5%
    designs = {"tdm": _design((1000.0, 1000.0, 1000.0), 0.30), "pa": _design((500.0, 700.0, 900.0), 0.05),
               "pb": _design((1000.0, 400.0, 1100.0), 0.05), "pc": _design((400.0, 900.0, 1000.0), 0.05)}
    r = design_ratios(designs, "tdm")
    # by hand: pa's pair ratios 0.5 / 0.7 / 0.9 -> median 0.7 from C_vs_A; pb's 1.0 / 0.4 / 1.1 -> 1.0 from B_vs_A;
    # pc's 0.4 / 0.9 / 1.0 -> 0.9 from C_vs_A
    assert r["ratios"] == {"tdm": 1.0, "pa": pytest.approx(0.7), "pb": pytest.approx(1.0), "pc": pytest.approx(0.9)}
    parts = r["rel_se_parts"]["ratios"]
    assert [parts[d]["reference_metrics"] for d in ("pa", "pb", "pc")] == [["delta_C_vs_A"], ["delta_B_vs_A"],
                                                                          ["delta_C_vs_A"]]
    same = r["indistinguishable"]["ratios"]
    # pa vs pb: different reference pairs, so both references' errors enter: z = ln(1 / 0.7) / 0.430 = 0.83 < 2
    # (cancelling them gave ln(1 / 0.7) / 0.0707 = 5.0 -> wrongly distinguishable)
    z_ab = math.log(1.0 / 0.7) / math.sqrt(2 * 0.05 ** 2 + 2 * 0.30 ** 2)
    assert z_ab == pytest.approx(0.83, abs=0.005) and ["pa", "pb"] in same
    # pa vs pc: the same pair C_vs_A, so the reference cancels: z = ln(0.9 / 0.7) / hypot(0.05, 0.05) = 3.55 > 2
    # (with both references' errors it would be 0.58 -> indistinguishable)
    z_ac = math.log(0.9 / 0.7) / math.hypot(0.05, 0.05)
    assert z_ac == pytest.approx(3.55, abs=0.005) and ["pa", "pc"] not in same
    # pb vs pc: different pairs, z = ln(1 / 0.9) / 0.430 = 0.25 -> not distinguishable; each against tdm:
    # |ln r| / hypot(0.05, 0.30) = 1.17 (pa), 0 (pb), 0.35 (pc) -> all not distinguishable
    assert ["pb", "pc"] in same and all(["tdm", d] in same for d in ("pa", "pb", "pc"))
    assert len(same) == 5


def test_an_even_count_median_uses_its_middle_two_pairs():
    pairs4 = PAIRS + ["delta_D_vs_A"]
    designs = {d: {m: {"metric": m, "primary": m == pairs4[0], "analytic_required_impressions": n,
                       "analytic_required_impressions_rel_se": 0.1, "information_last_day": 1.0 / n,
                       "information_last_day_rel_se": 0.1} for m, n in zip(pairs4, sizes)}
               for d, sizes in {"ref": (1000.0,) * 4, "x": (300.0, 900.0, 500.0, 2000.0)}.items()}
    r = design_ratios(designs, "ref")
    # by hand: 0.3 (B_vs_A), 0.5 (C_vs_B), 0.9 (C_vs_A), 2.0 (D_vs_A): median (0.5 + 0.9) / 2 from C_vs_B and C_vs_A
    assert r["ratios"]["x"] == pytest.approx(0.7)
    assert r["rel_se_parts"]["ratios"]["x"]["reference_metrics"] == ["delta_C_vs_A", "delta_C_vs_B"]


def _unflagged_null(t: float, r: int = 20) -> tuple[dict, np.ndarray]:
    """The reviewer's /tmp/r9/unflag.py: 20 null replicates whose last-day mean is at t exactly, null Delta at
    z 0.4 (0.0007 +- 0.0017)."""
    z = np.random.default_rng(3).standard_normal(r)
    z = (z - z.mean()) / z.std(ddof=1)
    x = 0.003 * z + t * 0.003 / math.sqrt(r)
    rows = pd.DataFrame([{"day": 7, "pvalue": 0.5, "estimate": v} for v in x])
    c = pd.DataFrame({"day": [7], "mean_se": [0.003]})
    return null_check(Truth("team_draft", "null:delta_ab", 0.0007, 0.0017, "mc"), c, 0.05, r, rows), x


def test_unflagged_verdict_quotes_a_notable_null_replicates_mean_test():
    from simulations.html_report.simulate import calibration_section
    from simulations.html_report.sweep import calibration_section as sweep_calibration
    from simulations.report import _null_lines, null_unflagged_verdict

    n, x = _unflagged_null(2.6)
    ref = stats.ttest_1samp(x, 0.0)
    assert ref.statistic == pytest.approx(2.6, rel=1e-9) and 0.01 < ref.pvalue < 0.05  # p 0.0176
    assert not n["biased"] and n["z"] == pytest.approx(0.0007 / 0.0017)
    mean, se = float(np.mean(x)), float(stats.sem(x))
    caution = f"null replicates' mean {mean:+#.3g} +- {se:#.2g}, t 2.6, p {ref.pvalue:.2g}: bias not excluded"
    assert caution == "null replicates' mean +0.00174 +- 0.00067, t 2.6, p 0.018: bias not excluded"
    want = f"no bias flagged (z = 0.4); {caution}"
    assert null_unflagged_verdict(n) == want
    e = {"metric": "delta_ab", "primary": True, "null": n, "true_effect": 0.0092}
    result = SimpleNamespace(summary={"designs": {"team_draft": {"delta_ab": e}}},
                             config=SimpleNamespace(traffic=SimpleNamespace(days=7)))
    assert sum(want in ln for ln in _null_lines(result)) == 1
    html = unescape(str(calibration_section({"designs": {"team_draft": {"delta_ab": e}}})))
    assert f'no bias flagged (z = 0.4); <span class="flag">{caution}</span>' in html
    point = {"designs": {"team_draft": {"delta_ab": e}}, "conventions": {"null_check": "x"}}
    sweep = unescape(str(sweep_calibration({"rows": [{"point": 0, "design": "team_draft", "metric": "delta_ab"}]},
                                           {0: point})))
    assert f'no bias flagged (null Delta +0.00070, z 0.4); <span class="flag">{caution}</span>' in sweep
    assert "no bias detected" not in html + sweep


def test_unflagged_verdict_keeps_its_wording_without_a_notable_mean_test():
    from simulations.html_report.sweep import calibration_section as sweep_calibration
    from simulations.report import null_unflagged_verdict

    n, x = _unflagged_null(1.5)
    assert stats.ttest_1samp(x, 0.0).pvalue > 0.05  # 0.15
    assert null_unflagged_verdict(n) == "no bias detected (z = 0.4)"
    e = {"metric": "delta_ab", "primary": True, "null": n}
    point = {"designs": {"team_draft": {"delta_ab": e}}, "conventions": {"null_check": "x"}}
    sweep = unescape(str(sweep_calibration({"rows": [{"point": 0, "design": "team_draft", "metric": "delta_ab"}]},
                                           {0: point})))
    assert "no bias detected (null Delta +0.00070, z 0.4)" in sweep and "bias not excluded" not in sweep
    # a z above 2 keeps its own wording, with the mean test after it when notable
    n2, _ = _unflagged_null(2.6)
    n2 = {**n2, "z": 2.5, "pvalue": 0.0124}
    assert null_unflagged_verdict(n2).startswith(
        "z = 2.5: below the 4-SE flag, but unlikely under no bias (p = 0.012); null replicates' mean +0.00174")
    # a flagged mean test (p below its level 0.01) is the BIASED verdict's, not a caution
    n3, x3 = _unflagged_null(4.0)
    assert n3["biased"] and stats.ttest_1samp(x3, 0.0).pvalue < 0.01
