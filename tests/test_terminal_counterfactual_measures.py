"""Review 3, F-A, F-E, M5, M6 in the terminal output of ``onlineeval simulate`` (report.html had them at 0df9676).

One small CLI run: a counterfactual design whose adaptive IPS is sized from the replicates' SD and tested by the
last day's bootstrap (se_measure / power_measure), a second one whose logger shows only A's top 6 documents (its
estimates leave the support: 'no support'), an assumption sweep, daily monitoring and a sequential rule on the
identically-0 off-policy A/A. Every expected text is checked against the run's own summary.json.
"""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from test_simulation_counterfactual import CASCADE, LOGGER, PBM


NARROW = {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 6, "ranker": "A"}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    from onlineeval.cli import app

    tmp = tmp_path_factory.mktemp("terminal_cf")
    config = {
        "seed": 11, "replicates": 4, "workers": 1,
        "collection": {"n_queries": 150, "candidates": 12},
        "rankers": {"depth": 5, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.3}},
        "offline_metric": "nDCG@5",
        "users": {"population": 1500, "activity": {"sigma": 0.5},
                  "types": [{"name": "pbm", "share": 0.5, "click_model": PBM},
                            {"name": "nav", "share": 0.5, "click_model": CASCADE}]},
        "traffic": {"days": 2, "queries_per_day": 3000, "batch_hours": 24},
        "designs": [
            {"name": "cf", "type": "counterfactual", "metric": "clicks_per_query", "logger": LOGGER,
             "estimators": ["rips", "adaptive_ips"], "bootstrap": 100,
             "analysis": {"sequential": "obrien_fleming"}},
            {"name": "cfns", "type": "counterfactual", "metric": "clicks_per_query", "logger": NARROW,
             "estimators": ["snips"]},
        ],
        "analysis": {"aa": True, "truth_impressions": 10_000, "assumption_sweep": {
            "parameter": "users.types[1].share", "values": [0.0, 1.0], "impressions": 20_000}},
    }
    path = tmp / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp / "res"
    result = CliRunner().invoke(app, ["simulate", "--config", str(path), "--output", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return result.output, json.loads((out / "summary.json").read_text())


def _main_table(text):
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Online (alpha"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].strip())
    return lines[start:end]


def test_a_row_sized_from_another_measure_is_marked_and_names_it(cli_run):
    text, summary = cli_run
    e = summary["designs"]["cf"]["adaptive_ips"]
    assert e["se_measure"].startswith("replicates' SD of the estimates")
    assert e["power_measure"].startswith("last day's bootstrap test (100 resamples")
    table = _main_table(text)
    row = next(ln for ln in table if ln.split()[:1] == ["adaptive_ips"])
    power = f"{e['final_day']['power']:.3f}^"
    assert power in row.split()
    if e["final_day"]["analytic_power"] is not None:
        assert f"{e['final_day']['analytic_power']:.3f}^" in row.split()
    # the row's measures are named, word for word, under the table; RIPS's (the mean SE) are not
    assert (f"  '^' cf/adaptive_ips: analytic power, days and sizes from the {e['se_measure']}; power@end: "
            f"{e['power_measure']}") in table
    rips = next(ln for ln in table if ln.split()[:2] == ["cf", "rips"])
    assert "^" not in rips and summary["designs"]["cf"]["rips"]["se_measure"] == "mean reported SE over the replicates"
    # no '^' note names RIPS (other notes may: the '?' line's "se^2" names it in this 2-day run, whose sizes assume
    # an unfitted floor)
    assert not any(ln.lstrip().startswith("'^'") and "cf/rips" in ln for ln in table)
    # the estimation-error table marks the same power
    err = text.split("Estimation error on the last day")[1].split("\n\n")[0].splitlines()
    assert power in next(ln for ln in err if ln.split()[:1] == ["adaptive_ips"]).split()
    assert "^" not in next(ln for ln in err if ln.split()[:2] == ["cf", "rips"])


def test_an_estimate_outside_the_support_prints_no_support_with_its_share(cli_run):
    text, summary = cli_run
    e = summary["designs"]["cfns"]["snips"]
    share = e["no_support"]["B"]["share"]
    assert share > 0.05 and e["analytic_withheld"].startswith("no support: B: ")
    assert e["analytic_required_impressions"] is None
    table = _main_table(text)
    row = next(ln for ln in table if ln.split()[:2] == ["cfns", "snips"])
    assert "no support" in row and "biased" not in row
    assert any(ln.startswith(f"  'no support': cfns/snips (B: {share:.0%}) of the last day's impressions have a "
                             "target list with an event of logging probability 0") for ln in table)
    err = text.split("Estimation error on the last day")[1].split("\n\n")[0].splitlines()
    assert "no support" in next(ln for ln in err if ln.split()[:2] == ["cfns", "snips"])
    # a supported estimate keeps its size
    assert summary["designs"]["cf"]["rips"].get("no_support") is None
    assert "no support" not in next(ln for ln in table if ln.split()[:2] == ["cf", "rips"])


def test_the_sweep_heading_is_its_error_label(cli_run):
    text, summary = cli_run
    sweep = summary["assumption_sweep"]
    assert sweep["error_label"].startswith("estimate - exact truth of one 20,000-impression log per value")
    heading = next(ln for ln in text.splitlines() if ln.startswith("Assumption sweep ("))
    assert heading.endswith(": " + sweep["error_label"])
    assert "bias +- SE" not in text


def test_the_identically_zero_off_policy_aa_prints_the_rate_at_the_truth(cli_run):
    # the A/A is identically 0: in its place each rule's rate on the replicates tested at their exact truth
    # (tests/test_counterfactual_truth_null.py recomputes it); it printed '-' with an unmeasured claim before
    text, summary = cli_run
    mon = summary["monitoring"]["cf"]["rules"]
    assert mon["peeking"]["aa_degenerate"] and mon["fixed"]["aa_degenerate"]
    assert summary["sequential"]["cf"]["decision"]["aa_degenerate"]
    block = text.split("Daily monitoring")[1].split("\n\n")[0].splitlines()
    assert not any("0 (ties)" in ln for ln in block)
    row = next(ln for ln in block if ln.split()[:1] == ["cf"])
    assert row.split().count("truth") == 4 and "A/A" not in row.split()
    assert any(ln.startswith("  truth (cf, cfns): the design's A/A compares A with itself") for ln in block)
    # cfns leaves the logger's support ('no support'): its rate counts that bias
    assert any(ln.endswith("cfns biased (see the main table): its truth rate counts its bias as well, not only false "
                           "positives") for ln in block)
    assert not any(ln.startswith("  A/A '-'") for ln in block)
    seq = text.split("Sequential decisions")[1].split("\n\n")[0].splitlines()
    assert not any("0 (ties)" in ln for ln in seq)
    row = next(ln for ln in seq if ln.split()[:1] == ["cf"])
    assert row.split()[4] == "truth"  # design, rule, looks (2 words), then the rate
    assert any(ln.startswith("  truth (cf): ") for ln in seq)


def test_the_conventions_say_the_bootstrap_gives_adaptive_ips_its_se_and_p_value(cli_run):
    _, summary = cli_run
    text = summary["conventions"]["counterfactual_effect"]
    assert ("takes its last-day SE (the resamples' SD) and p-value (percentile bootstrap, min(1, 2 min(1 + #(<= 0), "
            "1 + #(>= 0)) / (B + 1))) from the resamples") in text
    assert "adaptive IPS's behaviours, a DM whose click model is fitted on the log" in text
    # t with Bell and McCaffrey's df on every day, as estimate gives them (tests/test_counterfactual_df.py checks the
    # numbers), and how the daily monitoring rules take it: said
    assert ("interval estimate +- t_df(1-alpha/2) x se and two-sided t-test, df Bell and McCaffrey's degrees of "
            "freedom of the difference") in text
    assert ("the daily monitoring's fixed-horizon and peeking rules take the same t, its mSPRT and O'Brien-Fleming "
            "rules each look's t as the normal deviate of the same tail probability") in text
    assert "z, not t" not in text


def test_the_cost_of_logging_carries_its_monte_carlo_error(cli_run):
    # the logger's observed metrics are means over the replicates: the relative cost is printed with its SE
    text, summary = cli_run
    cost = summary["counterfactual"]["cf"]["logging_cost"]
    r = summary["config"]["replicates"]
    line = next(ln for ln in text.splitlines() if ln.startswith("  cost of logging ("))
    assert "+-: the mean's SE over the replicates" in line
    for metric, c in cost.items():
        assert c["cost_se"] == pytest.approx(c["logger_observed_sd"] / r ** 0.5, rel=1e-12)
        rel_se = 100 * c["cost_se"] / abs(c["ranker_A_exact"])
        shown = f"{rel_se:.1f}%" if rel_se >= 0.05 else f"{rel_se:.1g}%"
        assert f"{metric} " in line and f"{100 * c['relative']:+.1f}% +- {shown}" in line
