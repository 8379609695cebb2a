"""The precision of the mean-SE / SD ratio the simulator prints for an estimate sized from its replicates' SD
(review 11, F5): :func:`simulations.analysis.se_sd_ratio` against hand arithmetic and a Monte Carlo of its spread."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulations.analysis import se_sd_ratio, se_sd_ratio_text


def test_the_ratio_and_its_se_by_hand():
    x = np.array([1.0, 2.0, 4.0, 7.0, 11.0])
    se = np.array([2.0, 3.0, 3.0, 4.0, 3.0])
    q = se_sd_ratio(x, se)
    s = math.sqrt(sum((v - 5.0) ** 2 for v in x) / 4)  # mean 5, squares 16+9+1+4+36 = 66, s^2 = 16.5
    m4 = sum((v - 5.0) ** 4 for v in x) / 5  # (256+81+1+16+1296)/5 = 330
    var_s2 = (m4 - s ** 4 * 2 / 4) / 5
    rel_s = math.sqrt(var_s2) / (2 * s * s)
    rel_m = float(np.std(se, ddof=1)) / math.sqrt(5) / 3.0
    assert q["ratio"] == pytest.approx(3.0 / s, rel=1e-12) and q["replicates"] == 5
    assert q["se"] == pytest.approx(3.0 / s * math.hypot(rel_s, rel_m), rel=1e-12)
    # NaN pairs are left out; too few replicates give no SE; no spread gives no ratio
    assert se_sd_ratio(np.append(x, np.nan), np.append(se, 1.0))["ratio"] == pytest.approx(q["ratio"], rel=1e-12)
    assert se_sd_ratio(x[:3], se[:3])["se"] is None and se_sd_ratio(x[:1], se[:1]) is None
    assert se_sd_ratio(np.ones(5), se) is None and se_sd_ratio_text(None) == "undefined"


def test_the_text_flags_a_ratio_below_one_beyond_two_se():
    assert se_sd_ratio_text({"ratio": 0.93, "se": 0.05, "replicates": 200}) == "0.93 +- 0.05 over 200 replicates"
    assert se_sd_ratio_text({"ratio": 0.83, "se": 0.05, "replicates": 100}).endswith(
        "; below 1 by more than 2 SE: the se column runs small")
    assert "too few" in se_sd_ratio_text({"ratio": 0.8, "se": None, "replicates": 3})


def test_its_se_matches_the_ratios_spread():
    """3,000 sets of 200 normal estimates with SEs 0.9 x U(0.9, 1.1): the ratios' SD against the mean reported SE.
    The SD of 3,000 ratios has a relative SE of about 1/sqrt(2 x 2999) = 1.3%; the reported SEs' mean is exact up to
    its own spread (SD/sqrt(3000)); 4 of each SE, plus the delta method's O(1/R) error (about 1%), bound the gap."""
    rng = np.random.default_rng(2)
    ratios, ses = [], []
    for _ in range(3000):
        q = se_sd_ratio(rng.standard_normal(200), 0.9 * rng.uniform(0.9, 1.1, 200))
        ratios.append(q["ratio"])
        ses.append(q["se"])
    sd = float(np.std(ratios, ddof=1))
    mean_se = float(np.mean(ses))
    tol = 4 * math.hypot(sd / math.sqrt(2 * 2999), float(np.std(ses)) / math.sqrt(3000)) + 0.01 * sd
    assert abs(mean_se - sd) < tol, (mean_se, sd, tol)
    # a normal-theory SE scaled by 1.2 would not pass
    assert abs(1.2 * mean_se - sd) > tol
