"""Review 3, F-A and F-E: every number of an off-policy estimate comes from a measure that is valid for it.

F-A: adaptive IPS's delta-method SE holds its data-driven choice of behaviours fixed and is too small (0.70 of
its replicates' SD on configs/counterfactual.yaml). With the last day's bootstrap its SE and p-value come from
the bootstrap (so its power counts rejections of a valid test), and its analytic power and sizes from the
replicates' SD of its estimates (the estimator's sampling SD); without the bootstrap its simulated power is
withheld. F-E: an estimator whose target leaves the logger's support (events of logging probability 0, counted
exactly) is biased whatever the t-test of its bias says: its sizes are withheld with that reason everywhere.

Expected values come from the definitions: the percentile bootstrap p-value counted by hand, the normal power
formula with the replicates' SD computed from replicates.csv's rows by pandas, a / N of a one-point fit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from test_simulation_counterfactual import CASCADE, PBM, _config, _run


MIXED = [{"name": "pbm", "share": 0.5, "click_model": PBM}, {"name": "nav", "share": 0.5, "click_model": CASCADE}]


def test_bootstrap_test_is_the_percentile_p_value_and_the_resamples_sd():
    from simulations.designs.counterfactual.design import bootstrap_test

    stats = np.array([-0.3, -0.1, 0.0, 0.2, 0.4, 0.5, 0.6, 0.9, 1.1, 1.3])
    se, p = bootstrap_test(stats)
    assert se == pytest.approx(float(np.std(stats, ddof=1)), rel=1e-12)
    # 3 resamples <= 0, 8 >= 0: p = 2 (1 + 3) / 11
    assert p == pytest.approx(8 / 11, rel=1e-12)
    assert bootstrap_test(np.array([1.0, 2.0, 3.0]))[1] == pytest.approx(2 / 4)
    assert bootstrap_test(np.arange(1.0, 400.0))[1] == pytest.approx(2 / 400)
    assert all(math.isnan(v) for v in bootstrap_test(np.array([1.0])))
    # below 0.05 exactly when the 95% percentile interval excludes 0, up to one resample
    rng = np.random.default_rng(5)
    for shift in np.linspace(0.0, 3.5, 36):
        s = rng.standard_normal(400) + shift
        lo = np.quantile(s, 0.025)
        k = int(np.sum(s <= 0))
        if k not in (9, 10):  # the +1 of the p-value and the quantile's interpolation meet there
            assert (bootstrap_test(s)[1] < 0.05) == (lo > 0)


@pytest.fixture(scope="module")
def boot_run():
    return _run(_config(replicates=10, estimators=("rips", "adaptive_ips"), bootstrap=100, types=MIXED))


def test_adaptive_ips_tests_with_its_bootstrap_on_the_last_day(boot_run):
    rows = boot_run.rows
    last = rows[(rows["metric"] == "adaptive_ips") & (rows["day"] == rows["day"].max()) & (~rows["aa"])]
    assert len(last) == 10
    p, lo, hi = (last[k].to_numpy() for k in ("pvalue", "ci_low", "ci_high"))
    # the p-value is the bootstrap's: a multiple of 2 / (B + 1) ...
    k = p * 101 / 2
    assert np.allclose(k, np.round(k), atol=1e-9)
    # ... and rejects where the bootstrap interval excludes 0 (the delta-method p-value rejected where it held 0)
    assert np.array_equal(p < 0.05, (lo > 0) | (hi < 0))
    # no Student t on such a row: its df is inf (the CLT's df stays on the other estimators' rows, whose p-value
    # is the t's), so the monitoring and the analytic power read it with z
    assert np.isinf(last["df"]).all()
    # the SE is the resamples' SD: the 95% percentile interval's width / (2 x 1.96) over it is, for B = 100 normal
    # resamples (np.quantile's interpolation, SD ddof 1; simulated here), ln ratio ~ mean -0.041, SD 0.052 (the
    # interpolated 2.5/97.5% points of 100 draws sit inward): each row within 4 SD of that, ratio 0.78-1.18 (the
    # old 0.7-1.3 was unexplained). Measured z -1.5 to 1.8 over the 10 rows; the delta-method SE (0.70 of the SD,
    # review 3, F-A) gives 1.43 and fails; at B = 100 a 1.2x error of the SE is within the band
    sim = np.random.default_rng(0).standard_normal((20_000, 100))
    s_lo, s_hi = np.quantile(sim, [0.025, 0.975], axis=1)
    null = np.log((s_hi - s_lo) / (2 * 1.96) / sim.std(axis=1, ddof=1))
    ratio = (hi - lo) / (2 * 1.96) / last["se"].to_numpy()
    assert np.all(np.abs(np.log(ratio) - null.mean()) <= 4 * null.std(ddof=1)), (ratio, null.mean(), null.std())
    rips = rows[(rows["metric"] == "rips") & (rows["day"] == rows["day"].max()) & (~rows["aa"])]
    k = rips["pvalue"].to_numpy() * 101 / 2
    assert not np.allclose(k, np.round(k), atol=1e-9)  # RIPS's SE is valid: its delta-method test is kept


def test_adaptive_ips_is_sized_from_the_replicates_sd(boot_run):
    cfg = boot_run.config
    e = boot_run.summary["designs"]["cf"]["adaptive_ips"]
    rows = boot_run.rows
    last = rows[(rows["metric"] == "adaptive_ips") & (rows["day"] == rows["day"].max()) & (~rows["aa"])]
    sd = float(last["estimate"].std(ddof=1))
    n = float(last["n_impressions"].mean())
    t = e["true_effect"]
    z = sps.norm.ppf(1 - cfg.analysis.alpha / 2)
    assert e["final_day"]["sd_estimate"] == pytest.approx(sd, rel=1e-12)
    # only the last day is defined: a one-point fit se^2 = a / N through the SD
    assert e["variance_model"]["points"] == 1
    assert e["variance_model"]["a"] == pytest.approx(sd * sd * n, rel=1e-9)
    target = (abs(t) / (z + sps.norm.ppf(cfg.analysis.power))) ** 2
    if not e.get("analytic_withheld"):
        assert e["analytic_required_impressions"] == pytest.approx(sd * sd * n / target, rel=1e-9)
        assert e["final_day"]["analytic_power"] == pytest.approx(sps.norm.cdf(abs(t) / sd - z), rel=1e-9)
    else:
        kept = e["analytic_if_unbiased"]
        assert kept["analytic_required_impressions"] == pytest.approx(sd * sd * n / target, rel=1e-9)
    assert e["se_measure"].startswith("replicates' SD of the estimates")
    assert "the data-driven choice of behaviours" in e["se_measure"]
    assert e["power_measure"].startswith("last day's bootstrap test (100 resamples")
    # review 11, F5: the se column's ratio to the SD with its precision, from the replicates' own numbers
    q = e["se_sd_ratio"]
    assert q["replicates"] == len(last) and q["ratio"] == pytest.approx(float(last["se"].mean()) / sd, rel=1e-12)
    assert q["ratio"] == pytest.approx(e["final_day"]["mean_se"] / e["final_day"]["sd_estimate"], rel=1e-12)
    assert f"mean SE / SD = {q['ratio']:.2f}" in e["se_measure"] and "replicates" in e["se_measure"]
    # how precise that SD is (normal estimates: relative SE sqrt(1 - c4^2) / c4, the sizes twice that), and too few
    # replicates said so (this run's are few: the analytic power was printed as if measured)
    r_ = len(last)
    c4 = math.sqrt(2 / (r_ - 1)) * math.exp(special.gammaln(r_ / 2) - special.gammaln((r_ - 1) / 2))
    rel = math.sqrt(1 - c4 * c4) / c4
    assert (f"that SD over {len(last)} replicates has a relative SE of about {rel:.0%} (normal estimates), the sizes, "
            f"which scale with its square, about {2 * rel:.0%}") in e["se_measure"]
    assert ("too few replicates to read the analytic power and sizes" in e["se_measure"]) == (2 * rel > 0.25)
    # the power counts the bootstrap test's rejections with the effect's sign
    power = float(np.mean((last["pvalue"] < cfg.analysis.alpha) & (np.sign(last["estimate"]) == np.sign(t))))
    assert e["final_day"]["power"] == pytest.approx(power)
    # RIPS keeps its mean reported SE
    r = boot_run.summary["designs"]["cf"]["rips"]
    assert r["se_measure"] == "mean reported SE over the replicates" and "power_measure" not in r
    assert r["variance_model"]["a"] != pytest.approx(r["final_day"]["sd_estimate"] ** 2 * n, rel=1e-3)


def test_without_the_bootstrap_adaptive_ips_power_is_withheld():
    run = _run(_config(replicates=4, estimators=("rips", "adaptive_ips"), types=MIXED))
    e = run.summary["designs"]["cf"]["adaptive_ips"]
    assert e["final_day"]["power"] is None and e["days_to_target_power"] is None
    assert e["power_measure"].startswith("withheld: without the last day's bootstrap")
    assert "its se column is the delta-method SE" in e["se_measure"]
    assert run.summary["designs"]["cf"]["rips"]["final_day"]["power"] is not None
    c = run.curves[(run.curves["metric"] == "adaptive_ips") & (~run.curves["aa"])]
    assert c["power"].isna().all()


# ------------------------------------------------------------------------------ F-E: no support
@pytest.fixture(scope="module")
def unsupported_run(tmp_path_factory):
    # the logger shows only A's top 6 documents (epsilon-greedy over them): B's lists leave its support on part of
    # the log, so every estimator is biased for B there
    out = tmp_path_factory.mktemp("nosupport")
    cfg = _config(replicates=4, estimators=("snips", "ips", "rips"), types=MIXED,
                  logger={"policy": "epsilon_greedy", "epsilon": 0.3, "n": 6, "ranker": "A"})
    return _run(cfg, output=out), out


def test_an_estimator_outside_the_loggers_support_is_withheld_whatever_its_t_test(unsupported_run):
    from simulations.analysis import is_biased_entry

    run, _ = unsupported_run
    rows = run.rows
    for label in ("snips", "ips", "rips"):
        e = run.summary["designs"]["cf"][label]
        side = rows[(rows["metric"] == f"support:{label}:B") & (rows["day"] == rows["day"].max())]
        share = float(side["estimate"].mean() / side["n_impressions"].mean())
        assert share > 0.05
        assert e["no_support"]["B"]["share"] == pytest.approx(share, rel=1e-12)
        assert "A" not in e["no_support"]  # A's lists are the logger's own
        assert is_biased_entry(e)
        assert e["analytic_required_impressions"] is None and e["analytic_required_days"] is None
        assert e["final_day"]["analytic_power"] is None
        assert e["analytic_withheld"].startswith(f"no support: B: {share:.0%} of the last day's impressions")
        assert e["analytic_if_unbiased"]["analytic_required_impressions"] is not None
        assert "cf" in run.summary["required_impressions_ratio"]["biased"] or not e["primary"]


def test_no_support_marks_reach_the_terminal_points_and_report(unsupported_run):
    from simulations.plots import online_points
    from simulations.report import terminal_summary

    run, out = unsupported_run
    text = terminal_summary(run)
    row = next(line for line in text.splitlines() if line.lstrip().startswith("cf ") and "snips" in line)
    assert "no support" in row and "biased" not in row  # the main table names why it is withheld
    points = {p["label"]: p for p in online_points(run)}
    cf = [p for label, p in points.items() if label.startswith("cf: ")]
    assert cf and all(p["biased"] for p in cf)
    html = (out / "report.html").read_text()
    assert "no support" in html


# ------------------------------------------------------------------------------ F-I: the online plot's points
def _entry(metric, true, rel, biased_estimate=False, null=None):
    return {"true_effect": true, "relative_effect": rel, "biased_estimate": biased_estimate, "null": null,
            "final_day": {"mean_se": 0.01, "mean_estimate": true, "sd_estimate": 0.01}, "primary": True,
            "metric": metric}


def test_online_points_mark_every_biased_entry_and_say_which_way_abandonment_moved():
    from types import SimpleNamespace

    from simulations.plots import online_points

    summary = {"designs": {
        "ab": {"abandonment": _entry("abandonment", -0.01, -0.054)},
        "worse": {"abandonment": _entry("abandonment", 0.01, 0.054)},
        "cf": {"iips": _entry("clicks_per_query", 0.02, 0.022, biased_estimate=True),
               "snips": {**_entry("clicks_per_query", 0.02, 0.022), "no_support": {"B": {"share": 0.7}}},
               "rips": _entry("clicks_per_query", 0.02, 0.022)},
        "td": {"delta_ab": {**_entry("delta_ab", 0.02, None), "null": {"delta": 0.01, "biased": True}}},
    }}
    points = {p["label"]: p for p in online_points(SimpleNamespace(summary=summary))}
    assert points["ab: abandonment (-5.4%: improvement, lower is better)"]["true"] == pytest.approx(1.0)
    assert points["worse: abandonment (+5.4%: regression, lower is better)"]["true"] == pytest.approx(-1.0)
    assert points["cf: iips (+2.2%)"]["biased"] and points["cf: snips (+2.2%)"]["biased"]
    assert not points["cf: rips (+2.2%)"]["biased"]
    assert points["td: delta_ab"]["biased"]
