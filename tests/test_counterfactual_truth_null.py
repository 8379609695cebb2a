"""A counterfactual design's A/A is identically 0 (both targets A: the paired difference is 0), so daily monitoring
printed '-' for its false-positive rate under every rule, with a note *claiming* that peeking inflates it "like the
other designs'" without measuring it. Its truth is exact (from the click models), so H0: B - A = the truth holds in
every replicate: each rule applied to estimate - truth with the replicates' own SEs measures its false-positive rate
there ('truth 0.195', summary.json sequential[design].null_monitoring with kind 'truth').

The fixed horizon's and peeking's rates are recomputed here by hand from replicates.csv (|estimate - truth| / se
against the normal quantile, on the last day / on any day); the mSPRT's and O'Brien-Fleming's with
onlineeval.stats.sequential_test's own ``null`` argument (those rules are checked against the literature in
tests/test_stats_sequential.py). The terminal's monitoring and sequential tables and report.html print them; an
estimator found biased is named in the note (its rate counts its bias); an interleaving design keeps its
null-variant rate.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from test_simulation_counterfactual import CASCADE, LOGGER, PBM
from typer.testing import CliRunner

from onlineeval.stats.sequential import sequential_test

ALPHA = 0.05
RULES = ("fixed", "peeking", "msprt", "obrien_fleming")
RUN_DIR: dict = {}  # the fixture's results folder (the power figure is drawn again from its files)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from onlineeval.cli import app

    tmp = tmp_path_factory.mktemp("truth_null")
    config = {
        "seed": 5, "replicates": 60, "workers": 1,
        "collection": {"n_queries": 150, "candidates": 12},
        "rankers": {"depth": 5, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.6}},
        "offline_metric": "nDCG@5",
        "users": {"population": 1500, "activity": {"sigma": 0.5},
                  "types": [{"name": "pbm", "share": 0.2, "click_model": PBM},
                            {"name": "nav", "share": 0.8, "click_model": CASCADE}]},
        "traffic": {"days": 4, "queries_per_day": 4000, "batch_hours": 24},
        "designs": [
            {"name": "cf", "type": "counterfactual", "metric": "clicks_per_query", "logger": LOGGER,
             "estimators": ["snips", "ips"], "analysis": {"sequential": "msprt"}},
            # IIPS under cascade users: biased (the note names it)
            {"name": "cfi", "type": "counterfactual", "metric": "clicks_per_query", "logger": LOGGER,
             "estimators": ["iips"]},
            {"name": "td", "type": "interleaving", "method": "team_draft"},
        ],
        "analysis": {"aa": True, "truth_impressions": 20_000},
    }
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp / "res"
    result = CliRunner().invoke(app, ["simulate", "--config", str(path), "--output", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    rows = pd.read_csv(out / "replicates.csv")
    RUN_DIR["out"] = out
    return result.stdout, summary, rows, (out / "report.html").read_text()


def _series(rows: pd.DataFrame, design: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    mine = rows[(rows["design"] == design) & (rows["metric"] == metric) & ~rows["aa"].astype(bool)]
    est = mine.pivot(index="replicate", columns="day", values="estimate").sort_index(axis=1).to_numpy()
    se = mine.pivot(index="replicate", columns="day", values="se").sort_index(axis=1).to_numpy()
    return est, se


def test_the_rates_at_the_truth_are_recomputed_by_hand(run):
    _, summary, rows, _ = run
    truth = summary["designs"]["cf"]["snips"]["true_effect"]
    assert summary["designs"]["cf"]["snips"]["truth_method"] == "exact"
    nm = summary["sequential"]["cf"]["null_monitoring"]
    assert nm["kind"] == "truth" and nm["metric"] == "snips" and nm["replicates"] == 60
    est, se = _series(rows, "cf", "snips")
    assert est.shape == (60, 4)
    z = np.abs(est - truth) / se
    crit = stats.norm.ppf(1 - ALPHA / 2)
    fixed = float(np.mean(z[:, -1] >= crit))
    peeking = float(np.mean((z >= crit).any(axis=1)))
    assert nm["rules"]["fixed"]["false_positive_rate"] == pytest.approx(fixed, abs=1e-12)
    assert nm["rules"]["peeking"]["false_positive_rate"] == pytest.approx(peeking, abs=1e-12)
    # the test can see a difference: some replicate rejects its truth on some day
    assert peeking > 0
    mon = summary["monitoring"]["cf"]
    for rule in ("msprt", "obrien_fleming"):
        res = sequential_test(est, se, rule, alpha=ALPHA, null=truth,
                              tau=mon["tau"] if rule == "msprt" else None,
                              fractions=mon["fractions"] if rule == "obrien_fleming" else None)
        assert nm["rules"][rule]["false_positive_rate"] == pytest.approx(float(np.mean(res.reject)), abs=1e-12)
    band = stats.binom.ppf([0.005, 0.995], 60, ALPHA) / 60
    for rule in RULES:
        r = nm["rules"][rule]
        assert r["kind"] == "truth"
        assert r["binomial_99_band"][1] >= band[1] - 1 / 60
        assert r["within_band_or_below"] == (round(r["false_positive_rate"] * 60) <= round(r["binomial_99_band"][1]
                                                                                           * 60))


def test_the_design_s_own_sequential_rule_gets_its_rate_at_the_truth(run):
    _, summary, rows, _ = run
    seq = summary["sequential"]["cf"]
    d = seq["decision"]
    assert d["aa_degenerate"] and d["null_kind"] == "truth"
    truth = summary["designs"]["cf"]["snips"]["true_effect"]
    est, se = _series(rows, "cf", "snips")
    res = sequential_test(est, se, "msprt", alpha=ALPHA, null=truth, tau=seq["tau"])
    assert d["null_false_positive_rate"] == pytest.approx(float(np.mean(res.reject)), abs=1e-12)
    assert seq["rules"]["peeking"]["null_false_positive_rate"] == summary["sequential"]["cf"]["null_monitoring"][
        "rules"]["peeking"]["false_positive_rate"]


def test_an_estimate_found_biased_is_named_and_interleaving_keeps_its_null_variant(run):
    _, summary, _, _ = run
    assert summary["designs"]["cfi"]["iips"]["biased_estimate"]
    assert summary["sequential"]["cfi"]["null_monitoring"]["biased"]
    assert not summary["sequential"]["cf"]["null_monitoring"]["biased"]
    assert summary["sequential"]["td"]["null_monitoring"]["kind"] == "null"
    assert summary["sequential"]["td"]["null_monitoring"]["metric"] == "null:delta_ab"
    assert not summary["monitoring"]["td"]["rules"]["fixed"]["aa_degenerate"]


def _rate(r: dict) -> str:
    return f"{r['false_positive_rate']:.3f}" + ("" if r["within_band_or_below"] else "!")


def test_the_terminal_tables_print_the_rates_and_say_what_they_are(run):
    text, summary, _, _ = run
    block = text.split("Daily monitoring")[1].split("\n\n")[0].splitlines()
    row = next(ln for ln in block if ln.split()[:1] == ["cf"])
    rules = summary["sequential"]["cf"]["null_monitoring"]["rules"]
    words = row.split()
    assert words.count("truth") == 4 and "A/A" not in words
    assert [words[i + 1] for i, w in enumerate(words) if w == "truth"] == [_rate(rules[r]) for r in RULES]
    td = next(ln for ln in block if ln.split()[:1] == ["td"])
    assert td.split().count("A/A") == 4
    note = next(ln for ln in block if ln.startswith("  truth (cf, cfi): "))
    assert "H0: B - A = the truth from the click models" in note
    assert note.endswith("cfi biased (see the main table): its truth rate counts its bias as well, not only false "
                         "positives")
    # the unmeasured claim is gone
    assert not any("like the other designs'" in ln for ln in block)
    seq = text.split("Sequential decisions")[1].split("\n\n")[0].splitlines()
    row = next(ln for ln in seq if ln.split()[:1] == ["cf"])
    d = summary["sequential"]["cf"]["decision"]
    rate = f"{d['null_false_positive_rate']:.3f}" + ("" if d["null_within_band_or_below"] else "!")
    words = row.split()  # design, rule (tau), looks (2 words), then the rate
    assert words[words.index("daily") + 1:words.index("daily") + 3] == ["truth", rate]
    assert any(ln.startswith("  truth (cf): ") for ln in seq)


def test_report_html_says_the_same(run):
    _, summary, _, page = run
    rules = summary["sequential"]["cf"]["null_monitoring"]["rules"]
    assert f"truth {rules['fixed']['false_positive_rate']:.3f}" in page
    assert "truth (cf, cfi): the design&#x27;s A/A compares A with itself" in page or \
        "truth (cf, cfi): the design's A/A compares A with itself" in page


def test_the_power_figure_draws_the_rate_at_the_truth_by_day(run):
    """The figure's right panel said 'A/A of cf not drawn ...: no calibration check' although the design's rate at
    its exact truth is measured: it draws that rate by day (each day as the horizon; by hand: |estimate - truth| / se
    against the normal quantile), the last day's equal to the monitoring table's fixed-horizon rate."""
    from types import SimpleNamespace

    from simulations.config.loading import load_config
    from simulations.plots import aa_ties_note, power_figure
    from simulations.sequential import truth_rejection_by_day

    _, summary, rows, page = run
    out = RUN_DIR["out"]
    assert ("For cf, cfi, whose A/A is identically 0: the rate of rejecting the exact truth (H0: B - A = truth, true "
            "in every replicate) with each day as the horizon.") in page
    entry = summary["designs"]["cf"]["snips"]
    days, rates = truth_rejection_by_day(rows, "cf", "snips", entry, ALPHA)
    est, se = _series(rows, "cf", "snips")
    by_hand = np.mean(np.abs(est - entry["true_effect"]) / se >= stats.norm.ppf(1 - ALPHA / 2), axis=0)
    np.testing.assert_allclose(rates, by_hand, atol=1e-12)
    assert list(days) == [1, 2, 3, 4] and rates.max() > 0
    assert rates[-1] == pytest.approx(summary["sequential"]["cf"]["null_monitoring"]["rules"]["fixed"]
                                      ["false_positive_rate"], abs=1e-12)
    # an interleaving design (Monte Carlo truth, A/A measured) has none
    assert truth_rejection_by_day(rows, "td", "delta_ab", summary["designs"]["td"]["delta_ab"], ALPHA) is None
    result = SimpleNamespace(config=load_config(out / "config.effective.yaml"), summary=summary, rows=rows,
                             curves=pd.read_csv(out / "curves.csv"))
    fig = power_figure(result)
    ax = fig.axes[1]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    drawn = lines["cf at its exact truth (simulated; H0: B - A = truth)"]
    np.testing.assert_allclose(drawn.get_ydata(), by_hand, atol=1e-12)
    assert "cfi at its exact truth [biased] (simulated; H0: B - A = truth)" in lines  # IIPS: its rate counts its bias
    label = ax.get_xlabel().replace("\n", " ")
    assert ("drawn instead for cf, cfi: the test of H0: B - A = the exact truth (true in every replicate), the "
            "false-positive rate by day") in label
    assert "no calibration check" not in label and ax.get_title().startswith("True nulls")
    assert aa_ties_note(["x", "y"], ["y"]).endswith("; x: no calibration check")
