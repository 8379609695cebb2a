"""Sample sizes and analytic power of t rows (the counterfactual design's differences, ``test: welch`` and
``delta_t``): the t-test's, at the days' degrees of freedom along the impressions
(:class:`simulations.analysis_sizes.DfModel`), instead of z's.

References: statsmodels' one-sample t power (``TTestPower``; its one-sided test at ``alpha / 2`` is the
two-sided test's rejections with the effect's sign, which the simulator counts), scipy's noncentral t, and the z
sizes' closed form where the df grow without bound."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulations.analysis_sizes import (
    DfModel,
    SizeRefits,
    VarianceModel,
    df_model,
    refit_sizes,
    required_impressions,
    size_uncertainty,
    t_power,
    target_variance,
)

ALPHA, POWER = 0.05, 0.8


def test_t_power_is_statsmodels_one_sided_power_at_half_alpha() -> None:
    from statsmodels.stats.power import TTestPower

    for d, n in ((0.3, 20), (0.1, 500), (0.8, 5), (1.5, 3)):
        want = TTestPower().power(effect_size=d, nobs=n, alpha=ALPHA / 2, alternative="larger")
        assert t_power(d * math.sqrt(n), n - 1, ALPHA) == pytest.approx(want, rel=1e-10)
    # elementwise over arrays, and z's power at infinite df
    nc = np.array([0.5, 2.0, 3.5])
    assert np.allclose(t_power(nc, np.inf, ALPHA), stats.norm.cdf(nc - stats.norm.ppf(1 - ALPHA / 2)), rtol=1e-12)


@pytest.mark.parametrize("effect,sd", [(0.2, 1.0), (0.05, 0.3), (1.0, 1.0), (0.01, 0.5)])
def test_the_size_with_df_n_minus_1_is_statsmodels_t_test_size(effect: float, sd: float) -> None:
    """se^2 = sd^2 / N and df = N - 1 (a DfModel through (2, 1) and (1e12, 1e12 - 1): linear, so exact between):
    the size is statsmodels' solve_power for the one-sided test at alpha / 2 (its root finder's tolerance)."""
    from statsmodels.stats.power import TTestPower

    dfm = DfModel((2.0, 1e12), (1.0, 1e12 - 1.0))
    got = required_impressions(VarianceModel(sd * sd, 0.0, 5), effect, ALPHA, POWER, dfm)
    want = TTestPower().solve_power(effect_size=effect / sd, nobs=None, alpha=ALPHA / 2, power=POWER,
                                    alternative="larger")
    assert got == pytest.approx(want, rel=1e-6)
    z_size = required_impressions(VarianceModel(sd * sd, 0.0, 5), effect, ALPHA, POWER)
    assert got > z_size  # the t-test needs more
    # at the size the power is the target (to the bisection's precision)
    assert t_power(effect / math.sqrt(sd * sd / got), dfm.at(got), ALPHA) == pytest.approx(POWER, abs=1e-12)


def test_a_large_df_gives_the_z_size_and_no_df_model_the_z_formula_itself() -> None:
    fit = VarianceModel(4.0, 1e-6, 5)
    z = required_impressions(fit, 0.02, ALPHA, POWER)
    assert z == fit.a / (target_variance(0.02, ALPHA, POWER) - fit.b)
    huge = DfModel((100.0, 1000.0), (1e12, 1e12))
    assert required_impressions(fit, 0.02, ALPHA, POWER, huge) == pytest.approx(z, rel=1e-8)
    assert required_impressions(fit, -0.02, ALPHA, POWER, huge) == pytest.approx(z, rel=1e-8)  # either sign
    assert required_impressions(fit, 0.0, ALPHA, POWER, huge) == math.inf
    assert required_impressions(VarianceModel(math.nan, math.nan, 0), 0.02, ALPHA, POWER, huge) == math.inf


def test_the_floor_the_z_test_reaches_can_be_out_of_the_t_tests_reach() -> None:
    """se^2 -> b: the z test reaches 80% power where b < T_z; the t-test at 5 df needs a smaller floor."""
    t_z = target_variance(0.02, ALPHA, POWER)
    t_5 = target_variance(0.02, ALPHA, POWER, df=5.0)
    assert t_5 < t_z
    assert t_power(0.02 / math.sqrt(t_5), 5.0, ALPHA) == pytest.approx(POWER, abs=1e-10)
    fit = VarianceModel(1.0, (t_5 + t_z) / 2, 5)
    dfm = DfModel((100.0, 200.0), (5.0, 5.0))
    assert math.isfinite(required_impressions(fit, 0.02, ALPHA, POWER))
    assert required_impressions(fit, 0.02, ALPHA, POWER, dfm) == math.inf
    just = VarianceModel(1.0, 0.99 * t_5, 5)
    n = required_impressions(just, 0.02, ALPHA, POWER, dfm)
    assert math.isfinite(n)
    assert t_power(0.02 / math.sqrt(just.a / n + just.b), 5.0, ALPHA) == pytest.approx(POWER, abs=1e-10)


def test_the_df_model_interpolates_holds_scales_and_never_rises_above_a_later_day() -> None:
    dfm = df_model([100.0, 200.0, 400.0], [10.0, 30.0, 50.0])
    assert dfm == DfModel((100.0, 200.0, 400.0), (10.0, 30.0, 50.0))
    assert dfm.at(150.0) == pytest.approx(20.0) and dfm.at(300.0) == pytest.approx(40.0)
    assert dfm.at(4000.0) == 50.0 and dfm.limit == 50.0  # held beyond the last day
    assert dfm.at(50.0) == pytest.approx(5.0)  # in proportion below the first
    assert dfm.at(1.0) == 1.0  # never below 1
    assert np.allclose(dfm.at(np.array([150.0, 50.0])), [20.0, 5.0])
    # a fixed population's falling df: each day at most a later day's (conservative), days sorted by impressions
    assert df_model([400.0, 100.0, 200.0], [8.0, 12.0, 10.0]).df == (8.0, 8.0, 8.0)
    assert df_model([100.0, 200.0, 300.0], [12.0, 9.0, 11.0]).df == (9.0, 9.0, 11.0)
    # z rows (inf), undefined days and df below 1
    assert df_model([100.0, 200.0], [math.inf, math.inf]) is None
    assert df_model([100.0, 200.0, 300.0], [math.nan, 20.0, math.inf]) == DfModel((200.0,), (20.0,))
    assert df_model([100.0, 200.0], [0.5, 3.0]).df == (1.0, 3.0)


def test_refit_sizes_are_each_refits_size_and_the_floor_ratio_is_the_t_tests() -> None:
    rng = np.random.default_rng(7)
    refits = SizeRefits(rng.uniform(1.0, 3.0, 50), rng.uniform(0.0, 2e-5, 50), rng.normal(0.02, 0.004, 50))
    refits.b[:3] = 1.0  # far above the target: not reachable
    refits.a[3] = np.nan
    dfm = DfModel((500.0, 5000.0), (20.0, 60.0))
    got = refit_sizes(refits, ALPHA, POWER, dfm)
    want = [required_impressions(VarianceModel(a, b, 5), e, ALPHA, POWER, dfm)
            for a, b, e in zip(refits.a, refits.b, refits.effect)]
    assert np.array_equal(np.isinf(got), np.isinf(want)) and np.isinf(got[:4]).all()
    assert np.allclose(got[np.isfinite(got)], np.asarray(want)[np.isfinite(want)], rtol=1e-12)
    z = refit_sizes(refits, ALPHA, POWER)
    assert (got[4:] >= z[4:]).all() and (got[4:] > z[4:]).sum() >= 40  # more than z's (or both not reachable)
    fit = VarianceModel(2.0, 1e-5, 5)
    unc = size_uncertainty(fit, refits, 0.02, ALPHA, POWER, dfm)
    assert unc["floor_ratio"] == pytest.approx(1e-5 / target_variance(0.02, ALPHA, POWER, df=60.0), rel=1e-12)
    assert unc["resamples"] == 50


def test_the_curves_analytic_power_of_t_rows_is_the_noncentral_t_at_the_median_df() -> None:
    from statsmodels.stats.power import TTestPower

    from simulations.analysis_curves import curves
    from simulations.runner import Truth

    se = np.array([0.10, 0.12, 0.11, 0.09, 0.13])
    est = np.array([0.3, 0.1, 0.25, 0.2, 0.15])
    rows = pd.DataFrame({"design": "d", "aa": False, "metric": "m", "day": 1, "primary": True, "estimate": est,
                         "se": se, "ci_low": est - 2 * se, "ci_high": est + 2 * se, "pvalue": 0.01,
                         "n_users": 10, "n_impressions": 20, "df": [4.0, 6.0, 5.0, np.inf, 8.0]})
    truth = {("d", "m"): Truth("d", "m", 0.2, 0.0, "exact")}
    row = curves(rows, truth, ALPHA).iloc[0]
    assert row["df"] == 5.5  # the median of 4, 5, 6, 8 (the inf row, as a bootstrap-tested one, left out)
    # statsmodels' power at an effect size d and n units is the noncentral t's at nc = d sqrt(n), df n - 1: one
    # unit more than the df, and the effect size that gives the rows' noncentrality
    n = 6.5
    want = TTestPower().power(effect_size=0.2 / se.mean() / math.sqrt(n), nobs=n, alpha=ALPHA / 2,
                              alternative="larger")
    assert row["analytic_power"] == pytest.approx(want, rel=1e-10)
    rows["df"] = np.inf
    z_row = curves(rows, truth, ALPHA).iloc[0]
    assert z_row["df"] == math.inf
    assert z_row["analytic_power"] == pytest.approx(stats.norm.cdf(0.2 / se.mean() - stats.norm.ppf(0.975)),
                                                    rel=1e-12)


def test_a_delta_t_designs_size_is_the_t_tests_at_its_df_model_and_delta_keeps_z(tmp_path) -> None:  # noqa: ANN001
    """300 returning users over 7 days (the few-users world of tests/test_ab_delta_t.py), the same A/B test
    with ``delta`` (z) and ``delta_t``: delta_t's size is where the t power at its summary's df model reaches the
    target (more than the z size of its own variance model), its analytic power the noncentral t's at each day's
    median df; delta's rows keep z (no df model, z sizes to the bit)."""
    import json

    import yaml
    from typer.testing import CliRunner

    from onlineeval.cli import app
    from tests.test_ab_delta_t import few_users_mapping

    m = few_users_mapping(300, [{"name": "z", "type": "ab"}, {"name": "t", "type": "ab", "test": "delta_t"}],
                          replicates=40, days=7)
    m.update(workers=1, output=str(tmp_path / "out"))
    m["analysis"]["aa"] = False
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(m), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--config", str(tmp_path / "c.yaml"), "--quiet"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    curves = pd.read_csv(tmp_path / "out" / "curves.csv")
    z, t = summary["designs"]["z"]["reciprocal_rank"], summary["designs"]["t"]["reciprocal_rank"]
    assert z["df_model"] is None and t["df_model"] is not None
    fit_z, fit_t = VarianceModel(**z["variance_model"]), VarianceModel(**t["variance_model"])
    assert z["analytic_required_impressions"] == required_impressions(fit_z, z["true_effect"], ALPHA, POWER)
    dfm = DfModel(tuple(t["df_model"]["impressions"]), tuple(t["df_model"]["df"]))
    n = t["analytic_required_impressions"]
    assert math.isfinite(n) and n > required_impressions(fit_t, t["true_effect"], ALPHA, POWER)
    se = math.sqrt(fit_t.a / n + fit_t.b)
    assert t_power(abs(t["true_effect"]) / se, dfm.at(n), ALPHA) == pytest.approx(POWER, abs=1e-9)
    days = curves[(curves["design"] == "t") & (curves["metric"] == "reciprocal_rank") & ~curves["aa"]]
    assert np.isfinite(days["df"]).all() and (days["df"] < 200).all()
    want = t_power(abs(t["true_effect"]) / days["mean_se"].to_numpy(), days["df"].to_numpy(), ALPHA)
    assert np.allclose(days["analytic_power"].to_numpy(), want, rtol=1e-12)
    assert np.isinf(curves[curves["design"] == "z"]["df"]).all()
