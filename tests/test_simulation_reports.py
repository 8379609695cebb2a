"""Reports that cannot mislead: each estimand its own truth, biased designs marked, every
pair plotted, comparable quantities, every written file named.

Expected values are recomputed independently: the welch truth from the cascade presets
type by type (Oosterhuis & de Rijke 2018's parameters as the issue states them), ratios
and rates from the replicate rows and curves with scipy's normal distribution.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import matplotlib
import numpy as np
import pytest
import yaml
from scipy import stats as sps

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.plots import plotted_series as _plotted_series
from simulations.report import conventions, se_text, terminal_summary, value_text, written_files

matplotlib.use("Agg")

PRESETS = {
    "navigational": ([0.05, 0.3, 0.5, 0.7, 0.95], [0.2, 0.3, 0.5, 0.7, 0.9]),
    "informational": ([0.4, 0.6, 0.7, 0.8, 0.9], [0.1, 0.2, 0.3, 0.4, 0.5]),
}
SHARES = {"navigational": 0.6, "informational": 0.4}


def _config(**over):
    base = {
        "seed": 5,
        "replicates": 24,
        "workers": 1,
        "collection": {"type": "synthetic", "n_queries": 200, "candidates": 25},
        "rankers": {"depth": 10, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.7}},
        "users": {"population": 800, "activity": {"sigma": 1.0}, "types": [
            {"name": n, "share": s, "click_model": {"name": "cascade", "preset": n}} for n, s in SHARES.items()]},
        "traffic": {"days": 3, "queries_per_day": 800, "batch_hours": 24},
        "designs": [
            {"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
            {"name": "ab_welch", "type": "ab", "metric": "reciprocal_rank", "test": "welch"},
            {"name": "team_draft", "type": "interleaving", "method": "team_draft"},
            {"name": "balanced", "type": "interleaving", "method": "balanced"},
        ],
        "analysis": {"truth_impressions": 500_000},  # balanced's null Delta about 5 SE from 0
    }
    base.update(over)
    return config_from_mapping(base)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ab")
    return simulate(_config(), output=out, workers=1), out


def _per_type_means(shown: np.ndarray, click: list[float], stop: list[float]) -> dict[str, np.ndarray]:
    """Per-query expected clicks, abandonment and reciprocal rank of one cascade user type."""
    c, s = np.asarray(click)[shown], np.asarray(stop)[shown]
    examine = np.cumprod(np.hstack([np.ones((len(shown), 1)), 1 - c * s]), axis=1)[:, :-1]
    no_click_before = np.cumprod(np.hstack([np.ones((len(shown), 1)), 1 - c]), axis=1)
    first = c * no_click_before[:, :-1]
    return {"clicks_per_query": (c * examine).sum(1), "abandonment": no_click_before[:, -1],
            "reciprocal_rank": (first / np.arange(1, shown.shape[1] + 1)).sum(1)}


def test_welch_truth_is_the_user_weighted_mean_of_per_type_expectations(run):
    """Users weighted equally: a user's expected per-user ratio is their type's per-query
    expectation, so the estimand is the share-weighted mean over types."""
    result, _ = run
    w = result.world
    truth = {(t.design, t.metric): t for t in result.truths}
    for metric in ("clicks_per_query", "abandonment", "reciprocal_rank"):
        per_ranker = {}
        for r in ("A", "B"):
            shown = w.labels[np.arange(w.n_queries)[:, None], w.rankings[r]]
            per_ranker[r] = sum(share * float(w.frequency @ _per_type_means(shown, *PRESETS[name])[metric])
                                for name, share in SHARES.items())
        t = truth[("ab_welch", metric)]
        assert t.value == pytest.approx(per_ranker["B"] - per_ranker["A"], abs=1e-12)
        assert t.baseline == pytest.approx(per_ranker["A"], abs=1e-12)
        assert t.se == 0.0 and "per-user means" in t.method
    conv = yaml.safe_load((run[1] / "summary.json").read_text())["conventions"]["ab_effect"]
    assert "Welch" in conv["ab_welch"] and "users weighted equally" in conv["ab_welch"]
    assert "delta-method" in conv["ab"] and "Welch" not in conv["ab"]


def test_welch_estimates_are_unbiased_for_their_truth(run):
    result, _ = run
    rows = result.rows
    for metric, e in result.summary["designs"]["ab_welch"].items():
        last = rows[(rows.design == "ab_welch") & (~rows.aa) & (rows.metric == metric)
                    & (rows.day == result.config.traffic.days)]
        est = last.estimate.to_numpy()
        assert abs(est.mean() - e["true_effect"]) <= 4 * est.std(ddof=1) / math.sqrt(est.size), metric


def test_biased_design_is_marked_and_its_ratio_is_not_shown_bare(run):
    result, _ = run
    s = result.summary
    bal, td = s["designs"]["balanced"]["delta_ab"], s["designs"]["team_draft"]["delta_ab"]
    assert bal["null"]["biased"] and not td["null"]["biased"]
    ratios = s["required_impressions_ratio"]
    assert set(ratios["biased"]) == {"balanced"}
    text = terminal_summary(result)
    ratio_lines = [ln for ln in text.splitlines() if "relative to ab:" in ln]
    assert len(ratio_lines) == 2  # efficiency at equal traffic, impressions at target power
    # review 8, F2: the evidence of the rule(s) that fired, from summary.json's own fields
    n = bal["null"]
    evidence = []
    if n["biased_null_replicates"]:
        t = n["null_mean_test"]
        evidence.append(f"null replicates' mean {value_text(t['mean'], True)} +- {se_text(t['se'])}, t ")
    if n["z"] > 4:  # the exact null Delta (two-ranker balanced under cascade users): no SE, no z
        evidence.append(f"exact null Delta {value_text(n['delta'], True)}" if n["exact"] else
                        f"null Delta {value_text(n['delta'], True)} +- {se_text(n['se'])}, z ")
    assert evidence and n["bias_rules"] == [r for r, on in (("null_replicates_mean", n["biased_null_replicates"]),
                                                            ("null_delta", n["z"] > 4)) if on]
    for ln in ratio_lines:
        assert "balanced biased (" + evidence[0] in ln and all(x in ln for x in evidence)
        assert "team_draft" in ln and "balanced 0." not in ln
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("balanced ") and "delta_ab" in ln)
    # the row says biased once: no '!' (that marks an A/A rate outside its band), and no analytic power, days,
    # impressions or users computed as if the design were unbiased (summary.json: under analytic_if_unbiased)
    assert "biased" in row and value_text(bal['null']['delta'], True) in row and "!" not in row
    assert row.split()[6:10] == ["-", "-", "biased", "-"]  # analytic, days->pwr, impr., users
    assert bal["analytic_required_impressions"] is None and bal["final_day"]["analytic_power"] is None
    assert bal["analytic_if_unbiased"]["analytic_required_impressions"] > 0 and "biased" in bal["analytic_withheld"]
    assert ratios["ratios"]["balanced"] is None
    assert "BIASED (" + evidence[0] in text and "; favours B when no ranker is better)" in text
    null_conv = conventions(result)["null_check"]
    assert "not a bias" not in null_conv and "se_miscalibrated (bias or SE miscalibration?)" in null_conv
    assert "at the level of 4 normal SEs" not in null_conv
    assert "0.01 / the run's number of null-checked pairs" in null_conv


def test_null_rates_and_efficiency_recomputed_from_the_curves(run):
    result, _ = run
    cfg, curves, s = result.config, result.curves, result.summary
    z = sps.norm.isf(cfg.analysis.alpha / 2)
    info = {}
    for design in ("ab", "ab_welch", "team_draft", "balanced"):
        e = next(v for v in s["designs"][design].values() if v["primary"])
        c = curves[(curves.design == design) & (~curves.aa) & (curves.metric == e["metric"])].sort_values("day")
        info[design] = (e["true_effect"] / c["mean_se"].iloc[-1]) ** 2
        if "null" in e:
            b = e["null"]["delta"]
            expected = sps.norm.cdf(b / c["mean_se"] - z) + sps.norm.cdf(-b / c["mean_se"] - z)
            np.testing.assert_allclose(e["null"]["rejection_rate_analytic"], expected, rtol=1e-10)
            rows = result.rows[(result.rows.design == design) & (result.rows.metric == "null:" + e["metric"])]
            by_day = rows.groupby("day")["pvalue"].apply(lambda p: np.mean(p < cfg.analysis.alpha))
            assert len(rows) == cfg.replicates * cfg.traffic.days
            np.testing.assert_allclose(e["null"]["rejection_rate"], by_day.to_numpy(), rtol=1e-12)
            # the null replicates estimate what the null truth says they estimate
            last = rows[rows.day == cfg.traffic.days].estimate.to_numpy()
            assert abs(last.mean() - b) <= 4 * math.hypot(last.std(ddof=1) / math.sqrt(last.size), e["null"]["se"])
    eff = s["required_impressions_ratio"]["equal_traffic_efficiency"]
    for design, value in info.items():
        assert eff[design] == pytest.approx(value / info["ab"], rel=1e-10)


def test_results_line_names_every_file_written(run):
    result, out = run
    text = terminal_summary(result)
    line = next(ln for ln in text.splitlines() if "results in" in ln)
    listed = line.split(": ", 1)[1].split(", ")
    assert listed == written_files(result)
    written = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert sorted(listed) == written
    assert all((out / name).stat().st_size > 0 for name in listed)


def test_effective_config_is_design_type_specific(run):
    result, out = run
    text = (out / "config.effective.yaml").read_text()
    assert "test: null" not in text
    eff = yaml.safe_load(text)
    by_name = {d["name"]: d for d in eff["designs"]}
    assert by_name["ab"]["test"] == "delta" and by_name["ab_welch"]["test"] == "welch"
    for name in ("team_draft", "balanced"):
        assert not {"share_b", "metric", "test", "logger", "estimators"} & set(by_name[name])
    assert not {"method", "options", "rankers"} & set(by_name["ab"])
    assert config_from_mapping(eff) == result.config  # round trip


def test_segment_lines_use_singular_and_explain_a_missing_relative_change(run):
    result, _ = run
    summary = copy.deepcopy(result.summary)
    seg = next(iter(summary["offline"]["by_segment"]))
    summary["offline"]["by_segment"][seg].update(queries=1, A=0.0)
    text = terminal_summary(dataclasses.replace(result, summary=summary))
    line = next(ln for ln in text.splitlines() if ln.strip().startswith(seg))
    assert "1 query)" in line and "1 queries" not in line
    assert "no relative change: A's nDCG@10 is 0 here" in line


def test_no_detectable_effect_instead_of_a_size(tmp_path):
    """Identical rankers: every truth is 0 (exactly for A/B and balanced, Monte Carlo noise
    for team-draft): no required size is given where |truth| <= 2 SE."""
    cfg = _config(rankers={"depth": 10, "noise_correlation": 1.0, "A": {"noise": 1.0}, "B": {"noise": 1.0}},
                  replicates=4, analysis={"truth_impressions": 20_000, "null": False},
                  traffic={"days": 2, "queries_per_day": 400, "batch_hours": 24})
    result = simulate(cfg, output=None, workers=1)
    text = terminal_summary(result)
    assert not result.rows["metric"].str.startswith("null:").any()  # analysis.null: false
    null = result.summary["designs"]["team_draft"]["delta_ab"]["null"]
    assert null["rejection_rate"] == null["rejection_rate_analytic"] and "replicates" not in null
    for design, metrics in result.summary["designs"].items():
        for metric, e in metrics.items():
            undetectable = abs(e["true_effect"]) <= 2 * e["true_effect_se"]
            assert e["detectable"] is (not undetectable), (design, metric)
            if undetectable:
                assert e["analytic_required_impressions"] is None and e["analytic_required_users"] is None
    assert not result.summary["designs"]["ab"]["reciprocal_rank"]["detectable"]
    assert not result.summary["designs"]["balanced"]["delta_ab"]["detectable"]
    assert text.count("no detectable effect") >= 1 + sum(
        1 for ms in result.summary["designs"].values() for e in ms.values() if not e["detectable"])


def test_multileaving_plots_show_every_pair_and_a_non_empty_online_panel(tmp_path, monkeypatch):
    cfg = _config(
        rankers={"depth": 10, "A": {"noise": 1.0}, "B": {"noise": 0.8}, "others": {"C": {"noise": 0.6}}},
        designs=[{"name": "tdm", "type": "interleaving", "method": "team_draft_multileave",
                  "rankers": ["A", "B", "C"]}],
        replicates=4, analysis={"truth_impressions": 20_000},
        traffic={"days": 2, "queries_per_day": 400, "batch_hours": 24},
    )
    import simulations.plots as plots

    saved = {}
    original = plots.save_png  # how write_results saves each figure

    def capture(fig, fname, *args, **kwargs):
        saved[str(fname).rsplit("/", 1)[-1]] = fig
        return original(fig, fname, *args, **kwargs)

    monkeypatch.setattr(plots, "save_png", capture)
    result = simulate(cfg, output=tmp_path, workers=1)
    pairs = ["delta_B_vs_A", "delta_C_vs_A", "delta_C_vs_B"]
    assert _plotted_series(result) == [("tdm", p) for p in pairs]
    power_ax = saved["power_vs_days.png"].axes[0]
    labels = [ln.get_label() for ln in power_ax.get_lines() if not ln.get_label().startswith("_")]
    assert labels == [f"tdm: {p}" for p in pairs]
    online_ax = saved["offline_vs_online.png"].axes[1]
    ticks = [t.get_text() for t in online_ax.get_yticklabels()]
    assert ticks == [f"tdm: {p}" for p in pairs]
    assert len(online_ax.patches) == len(pairs)  # one bar per statistic
    offline_ticks = [t.get_text() for t in saved["offline_vs_online.png"].axes[0].get_yticklabels()]
    assert any("C vs A" in t for t in offline_ticks)
    for name in written_files(result):
        assert (tmp_path / name).stat().st_size > 0


def test_one_replicate_has_no_bias_se_and_the_report_says_what_its_rates_are(tmp_path):
    # with one replicate the bias's SE was the truth's SE alone (0 for an exact truth): a single replicate's miss
    # printed as a bias measured to +- 0.0 (the estimation-error and counterfactual tables)
    from pathlib import Path

    mapping = yaml.safe_load((Path(__file__).parents[1] / "configs" / "counterfactual.yaml").read_text())
    mapping["traffic"].update(days=2, queries_per_day=300)
    mapping["analysis"].update(truth_impressions=10_000, assumption_sweep=None)
    mapping["users"]["population"] = 500
    for d in mapping["designs"]:
        d.pop("bootstrap", None)
    results = {}
    for r in (1, 2):
        cfg = config_from_mapping({**mapping, "replicates": r, "workers": 1})
        results[r] = simulate(cfg, output=tmp_path / str(r), workers=1)
    one, two = results[1], results[2]
    assert list(_entries(one.summary)) and all(e["estimator_bias_se"] is None for e in _entries(one.summary))
    assert all(e["estimator_bias_se"] > 0 for e in _entries(two.summary))
    text = terminal_summary(one)
    assert "(one replicate: power, coverage and false-positive rates below are one outcome each (0 or 1)" in text
    assert ", 1 replicate x 2 days x " in text
    table = text.split("Estimation error on the last day")[1].splitlines()
    row = next(line.split() for line in table if line.startswith("  ab "))
    assert row[:2] == ["ab", "clicks_per_query"] and row[4:6] == ["-", "-"], row  # bias's SE and the SD: undefined
    cf = text.split("Counterfactual design counterfactual")[1].splitlines()
    snips = next(line.split() for line in cf if line.startswith("  snips "))
    assert snips[2] == "-", snips
    assert "(one replicate:" not in terminal_summary(two)


def _entries(summary):
    stack = [summary]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "estimator_bias_se" in x:
                yield x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def test_one_replicate_note_in_report_html(tmp_path):
    from html import unescape

    from simulations.html_report.answer import answer_section
    from simulations.report import ONE_REPLICATE_NOTE

    for r, shown in ((1, True), (2, False), (None, False)):
        summary = {"conventions": {"alpha": 0.05, "target_power": 0.8}, "designs": {},
                   "config": {} if r is None else {"replicates": r}}
        page = unescape(str(answer_section(summary)))
        assert ("One replicate: power, coverage and false-positive rates" in page) is shown
    assert ONE_REPLICATE_NOTE.startswith("one replicate:")


def test_a_zero_effect_has_no_negative_zero_shrinkage(tmp_path):
    """One query whose two rankers show the same documents: abandonment (which cascade users' order does not
    change) has an exact effect of 0, and its shrinkage is 0 (it was -0.0, the improvement's sign -1 times 0 over
    B's positive offline gain at seed 7, printed '-0.00')."""
    cfg = _config(seed=7, collection={"type": "synthetic", "n_queries": 1, "candidates": 10}, replicates=3,
                  designs=[{"name": "ab", "type": "ab", "metric": "abandonment"}],
                  analysis={"truth_impressions": 10_000})
    result = simulate(cfg, output=tmp_path / "run", workers=1)
    entry = result.summary["designs"]["ab"]["abandonment"]
    assert entry["true_effect"] == 0.0 and entry["improvement_sign"] == -1
    shrink = entry["shrinkage_vs_offline"]
    assert shrink == 0.0 and math.copysign(1.0, shrink) == 1.0
    row = next(line for line in terminal_summary(result).splitlines() if line.lstrip().startswith("ab ")
               and "abandonment" in line)
    assert "-0.00" not in row, row
