"""The precision of the mean-SE / SD ratio the simulator prints for an estimate sized from its replicates' SD
(review 11, F5): :func:`simulations.analysis.se_sd_ratio` against an explicit leave-one-out loop and a Monte Carlo
of its spread (normal and heavy-tailed replicates, SEs with and without a link to the estimates' deviations)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulations.analysis import se_sd_ratio, se_sd_ratio_text


def _jackknife_by_loop(x: np.ndarray, se: np.ndarray) -> float:
    r = x.size
    theta = np.array([np.mean(np.delete(se, i)) / np.std(np.delete(x, i), ddof=1) for i in range(r)])
    return math.sqrt((r - 1) / r * float(np.sum((theta - theta.mean()) ** 2)))


def _fourth_moment_se(x: np.ndarray, se: np.ndarray) -> float:
    """The delta-method SE se_sd_ratio carried before (58ea3a4): the SD's error from the estimates' fourth moment
    and the mean SE's, combined as if independent."""
    r, s, m = x.size, float(x.std(ddof=1)), float(se.mean())
    m4 = float(np.mean((x - x.mean()) ** 4))
    rel_s = math.sqrt(max((m4 - s ** 4 * (r - 3) / (r - 1)) / r, 0.0)) / (2 * s * s)
    rel_m = float(se.std(ddof=1)) / math.sqrt(r) / m
    return m / s * math.hypot(rel_s, rel_m)


def test_the_ratio_and_its_jackknife_se_by_hand():
    x = np.array([1.0, 2.0, 4.0, 7.0, 11.0])
    se = np.array([2.0, 3.0, 3.0, 4.0, 3.0])
    q = se_sd_ratio(x, se)
    s = math.sqrt(66 / 4)  # mean 5, squares 16+9+1+4+36 = 66
    assert q["ratio"] == pytest.approx(3.0 / s, rel=1e-12) and q["replicates"] == 5
    # replicate 0 left out: se mean 13/4, x 2,4,7,11 (mean 6, squares 16+4+1+25 = 46, s^2 = 46/3)
    theta0 = 13 / 4 / math.sqrt(46 / 3)
    assert np.mean(np.delete(se, 0)) / np.std(np.delete(x, 0), ddof=1) == pytest.approx(theta0, rel=1e-12)
    assert q["se"] == pytest.approx(_jackknife_by_loop(x, se), rel=1e-12)
    rng = np.random.default_rng(5)
    for r in (4, 9, 60):
        xr, ser = rng.standard_t(5, r) * 1e3 + 7e3, rng.uniform(500, 1500, r)
        assert se_sd_ratio(xr, ser)["se"] == pytest.approx(_jackknife_by_loop(xr, ser), rel=1e-9)
    # NaN pairs are left out; too few replicates give no SE; no spread gives no ratio
    assert se_sd_ratio(np.append(x, np.nan), np.append(se, 1.0))["ratio"] == pytest.approx(q["ratio"], rel=1e-12)
    assert se_sd_ratio(x[:3], se[:3])["se"] is None and se_sd_ratio(x[:1], se[:1]) is None
    assert se_sd_ratio(np.ones(5), se) is None and se_sd_ratio_text(None) == "undefined"
    # one replicate holds all the spread: leaving it out divides by an SD of 0, so the jackknife is undefined
    lone = se_sd_ratio(np.array([0.0, 0.0, 0.0, 0.0, 5.0]), se)
    assert lone["se"] is None and lone["ratio"] == pytest.approx(3.0 / math.sqrt(25 * 4 / 5 / 4), rel=1e-12)
    assert se_sd_ratio_text(lone).endswith("(its SE undefined: one replicate holds all the spread)")


def test_the_text_flags_a_ratio_below_one_beyond_two_se():
    assert se_sd_ratio_text({"ratio": 0.93, "se": 0.05, "replicates": 200}) == "0.93 +- 0.05 over 200 replicates"
    assert se_sd_ratio_text({"ratio": 0.83, "se": 0.05, "replicates": 100}).endswith(
        "; below 1 by more than 2 SE: the se column runs small")
    assert se_sd_ratio_text({"ratio": 0.91, "se": 0.05, "replicates": 100}) == "0.91 +- 0.05 over 100 replicates"
    assert "too few" in se_sd_ratio_text({"ratio": 0.8, "se": None, "replicates": 3})


def _simulate(draw, r: int, sets: int, seed: int):
    """Simulated sets of r replicates: their ratios, jackknife SEs (se_sd_ratio's) and fourth-moment SEs."""
    rng = np.random.default_rng(seed)
    ratio, jack, old = np.empty(sets), np.empty(sets), np.empty(sets)
    for k in range(sets):
        x, se = draw(rng, r)
        q = se_sd_ratio(x, se)
        ratio[k], jack[k], old[k] = q["ratio"], q["se"], _fourth_moment_se(x, se)
    return ratio, jack, old


def _gap(ratio: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """Mean of the SEs v minus the SD of the ratios, and that gap's SE from its influence terms
    (v_i - mean v) - ((ratio_i - mean)^2 - SD^2) / 2 SD, which carry the correlation of the two over the same sets."""
    sd = float(ratio.std(ddof=1))
    infl = v - v.mean() - ((ratio - ratio.mean()) ** 2 - sd * sd) / (2 * sd)
    return float(v.mean()) - sd, float(np.std(infl)) / math.sqrt(v.size)


def _normal(rng, r):
    return rng.standard_normal(r), 0.9 * rng.uniform(0.9, 1.1, r)


def _t5(rng, r):
    return rng.standard_t(5, r), 0.9 * rng.uniform(0.9, 1.1, r)


def _normal_linked(rng, r):
    """SEs that grow with the estimate's distance from the mean (as the bootstrap's do in a far-off replicate)."""
    x = rng.standard_normal(r)
    return x, 0.9 * rng.uniform(0.9, 1.1, r) * (0.75 + 0.25 * np.abs(x))


@pytest.mark.parametrize("draw, r, old_passes", [(_normal, 200, True), (_t5, 60, False), (_normal_linked, 200, False)],
                         ids=["normal-R200", "t5-R60", "normal-linked-R200"])
def test_its_mean_matches_the_ratios_spread(draw, r, old_passes):
    """2,000 simulated sets each: the jackknife SE's mean against the SD of the 2,000 ratios within 4 SE of that
    gap (its SE from the influence terms of _gap: 4 SE is about 7% of the SD in each case).
    Measured on more sets (this file's helpers): normal R = 200 (10,000 sets) +0.5% +- 0.7%, linked +0.6% +- 0.7%,
    t5 R = 60 (20,000 sets, seed 5) SD 0.1042, jackknife mean 0.1006: -3.5% +- 0.5% (Jensen's shortfall of an SE
    whose square is unbiased-to-conservative: its root mean square is 0.1077; this check cannot see it).
    The fourth-moment SE fails at t5 (-19%: heavy tails) and with linked SEs (+26%: the independence it assumes),
    and 1.2 x or 0.8 x the jackknife fails all three."""
    ratio, jack, old = _simulate(draw, r, 2000, seed=11 + r)
    gap, se_gap = _gap(ratio, jack)
    assert abs(gap) < 4 * se_gap, (gap, se_gap)
    gap_old, se_old = _gap(ratio, old)
    assert (abs(gap_old) < 4 * se_old) is old_passes, (gap_old, se_old)
    for scale in (1.2, 0.8):  # a 20% error in the SE would not pass
        gap_scaled, se_scaled = _gap(ratio, scale * jack)
        assert abs(gap_scaled) > 4 * se_scaled, (scale, gap_scaled, se_scaled)


def test_a_leave_one_out_without_spread_gives_no_se_despite_rounding():
    """Review 16, F4: five values of 1/3 and one of 0.9. Leaving 0.9 out leaves five equal values (the loop's SD is
    exactly 0, so its jackknife is undefined), but the closed form SS - R/(R-1) d_i^2 kept ~1e-17 of rounding and
    gave an SE of 2.2e7. Near-degenerate and random sets against the explicit loop."""
    x, se = np.array([1 / 3] * 5 + [0.9]), np.full(6, 0.1)
    assert np.std(np.delete(x, 5), ddof=1) == 0.0
    q = se_sd_ratio(x, se)
    assert q["se"] is None and q["replicates"] == 6
    assert q["ratio"] == pytest.approx(0.1 / np.std(x, ddof=1), rel=1e-12)
    assert se_sd_ratio_text(q).endswith("(its SE undefined: one replicate holds all the spread)")
    rng = np.random.default_rng(16)
    for r in (4, 6, 30):
        for tiny in (1e-9, 1e-6, 1e-3, 1e-2):  # the rest's SS from ~1e-18 to ~1e-4 of the whole's
            xr = np.append(1 / 3 + tiny * rng.standard_normal(r - 1), 0.9)
            ser = rng.uniform(0.05, 0.15, r)
            assert se_sd_ratio(xr, ser)["se"] == pytest.approx(_jackknife_by_loop(xr, ser), rel=1e-9), (r, tiny)
        for _ in range(20):
            xr, ser = rng.standard_normal(r) * rng.uniform(1e-3, 1e3), rng.uniform(0.5, 1.5, r)
            assert se_sd_ratio(xr, ser)["se"] == pytest.approx(_jackknife_by_loop(xr, ser), rel=1e-9)


@pytest.mark.parametrize("replicates", [2, 3, 10, 20, 200])
def test_sd_relative_se_is_the_spread_of_simulated_sds(replicates: int) -> None:
    """The precision note of a held-fixed estimate's sizes (sd_precision_text) rests on the relative SE of the SD of
    R normal values: checked against 200,000 simulated SDs, within 4 SE from 50 batch estimates' spread."""
    from simulations.analysis_held import sd_relative_se

    rng = np.random.default_rng(replicates)
    s = rng.normal(size=(50, 4000, replicates)).std(axis=2, ddof=1)  # 50 batches of 4,000 SDs
    ratios = s.std(axis=1, ddof=1) / s.mean(axis=1)
    se = ratios.std(ddof=1) / np.sqrt(ratios.size)
    assert abs(ratios.mean() - sd_relative_se(replicates)) < 4 * se, (ratios.mean(), se)
    # many replicates: about 1 / sqrt(2 (R - 1))
    if replicates >= 200:
        assert sd_relative_se(replicates) == pytest.approx(1 / np.sqrt(2 * (replicates - 1)), rel=0.005)


def test_sd_jackknife_rel_se_against_its_loop_and_the_kurtosis_formula() -> None:
    """The jackknife relative SE of an SD (sd_precision_text's value for heavy tails): equal to the leave-one-out loop;
    over many values about sqrt((kappa - 1) / (4 R)) (kappa the kurtosis): 1 / sqrt(2 R) for normal values, sqrt(5 /
    (4 R)) for Laplace ones (kappa 6), each mean over 40 samples within 4 SE of it."""
    from simulations.analysis_held import sd_jackknife_rel_se

    rng = np.random.default_rng(11)
    x = rng.standard_t(3, size=57)
    loo = np.array([np.delete(x, i).std(ddof=1) for i in range(x.size)])
    jack = np.sqrt((x.size - 1) / x.size * np.sum((loo - loo.mean()) ** 2)) / x.std(ddof=1)
    assert sd_jackknife_rel_se(x) == pytest.approx(jack, rel=1e-9)
    assert sd_jackknife_rel_se(x[:3]) is None and sd_jackknife_rel_se(np.ones(10)) is None
    # one value holding all the spread (the closed form's cancellation): the loop's value, not rounding noise
    y = np.array([1 / 3] * 5 + [0.9])
    loo = np.array([np.delete(y, i).std(ddof=1) for i in range(y.size)])
    jack = np.sqrt((y.size - 1) / y.size * np.sum((loo - loo.mean()) ** 2)) / y.std(ddof=1)
    assert sd_jackknife_rel_se(y) == pytest.approx(jack, rel=1e-9, abs=1e-12)
    r = 4000
    for draw, kappa in ((lambda n: rng.standard_normal(n), 3.0), (lambda n: rng.laplace(size=n), 6.0)):
        vals = np.array([sd_jackknife_rel_se(draw(r)) for _ in range(40)])
        assert abs(vals.mean() - np.sqrt((kappa - 1) / (4 * r))) < 4 * vals.std(ddof=1) / np.sqrt(vals.size), kappa


def test_sd_precision_text_takes_the_jackknife_only_for_heavy_tails() -> None:
    from simulations.analysis_held import sd_precision_text

    rng = np.random.default_rng(12)
    normal = rng.standard_normal(200)
    assert sd_precision_text(200, normal) == sd_precision_text(200)  # near-normal: the normal value, 5%
    assert "(normal estimates)" in sd_precision_text(200)
    heavy = np.concatenate([rng.standard_normal(199), [60.0]])  # one replicate holds most of the spread
    text = sd_precision_text(200, heavy)
    assert "by the jackknife of its replicates (5% were they normal)" in text
    assert text.endswith(": too few replicates to read the analytic power and sizes")
