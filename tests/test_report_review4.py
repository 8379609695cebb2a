"""Review 4's report findings (/work/notes/review4.md): what the sizes, the offline line, the null check's verdict
and the extrapolation of the analytic days say about themselves."""
from __future__ import annotations

import re
from html import unescape

import matplotlib
import pytest

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.report import terminal_summary

matplotlib.use("Agg")


#: a small A/B + team-draft world (also the base of tests/test_analysis_truth_precision.py)
BASE = {
    "seed": 5,
    "replicates": 12,
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 200, "candidates": 25},
    "rankers": {"depth": 10, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.7}},
    "users": {"population": 800, "activity": {"sigma": 1.0}, "types": [
        {"name": "n", "share": 1.0, "click_model": {"name": "cascade", "preset": "navigational"}}]},
    "traffic": {"days": 2, "queries_per_day": 600, "batch_hours": 24},
    "designs": [
        {"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
        {"name": "team_draft", "type": "interleaving", "method": "team_draft"},
    ],
    "analysis": {"truth_impressions": 100_000},
}


def _config(**over):
    return config_from_mapping({**BASE, **over})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("r4")
    result = simulate(_config(), output=out, workers=1)
    return result, terminal_summary(result), (out / "report.html").read_text(encoding="utf-8")


def test_sizes_legend_says_ab_sizes_are_totals_over_both_arms(run):
    _, text, html = run
    flat = " ".join(text.split())
    assert "impr./users needed: analytic for the target power, for A/B designs totals over both arms" in flat
    html_flat = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "needed: analytic for the target power, for A/B designs totals over both arms" in html_flat


def test_offline_line_names_gain_and_cutoff(run):
    _, text, html = run
    assert "\n  nDCG@10: gain 2^g - 1 (exponential; trec_eval's nDCG uses linear g), cut-off 10\n" in text
    assert "frequency-weighted; uniform over queries: delta" in html
    assert "gain 2^g - 1 (exponential; trec_eval&#x27;s nDCG uses linear g), cut-off 10)" in html or \
        "gain 2^g - 1 (exponential; trec_eval's nDCG uses linear g), cut-off 10)" in html


def test_offline_conventions_follow_the_metric():
    from simulations.report import offline_conventions_text

    assert offline_conventions_text("nDCG@10") == ("gain 2^g - 1 (exponential; trec_eval's nDCG uses linear g), "
                                                   "cut-off 10")
    assert offline_conventions_text("nDCG(gain='linear')@5") == "gain g (linear, as trec_eval), cut-off 5"
    assert offline_conventions_text("nDCG", 20) == ("gain 2^g - 1 (exponential; trec_eval's nDCG uses linear g), "
                                                    "no cut-off: the shown lists' 20 documents")
    assert offline_conventions_text("ERR@10") == "cut-off 10"  # ERR's gain is its own, not a convention


def test_the_named_default_gain_is_the_one_the_world_scores_with():
    from onlineeval.conventions import Conventions
    from onlineeval.metrics.base import EvalContext

    assert str(EvalContext().gain) == str(Conventions().gain) == "exponential"


def test_null_check_gives_its_detectable_bias_and_p_value():
    import math

    import pandas as pd
    from scipy import stats

    from simulations.analysis import NULL_BIAS_SE, null_check
    from simulations.runner import Truth

    c = pd.DataFrame({"day": [1, 2], "mean_se": [0.004, 0.003]})
    n = null_check(Truth("b", "delta_ab", -0.00118, 0.00033, "mc"), c, 0.05, 60)
    assert not n["biased"] and n["z"] == pytest.approx(0.00118 / 0.00033)
    assert n["detectable_bias"] == pytest.approx(NULL_BIAS_SE * 0.00033, rel=1e-12)
    assert n["pvalue"] == pytest.approx(2 * stats.norm.sf(0.00118 / 0.00033), rel=1e-9)
    assert math.isclose(null_check(Truth("b", "delta_ab", 0.0, 0.001, "mc"), c, 0.05, 60)["pvalue"], 1.0)


def test_null_verdict_is_worded_by_z():
    from simulations.report import null_detectable_text, null_unflagged_verdict

    # review 4's balanced row on interleaving.yaml: -0.00118 +- 0.00033, z = 3.6, p = 3.2e-4 (scipy 2 sf(3.6))
    assert null_unflagged_verdict({"z": 3.6, "pvalue": 3.18e-4}) == (
        "z = 3.6: below the 4-SE flag, but unlikely under no bias (p = 3e-4)")
    assert null_unflagged_verdict({"z": 3.6}).endswith("(p = 3e-4)")  # an older summary without pvalue
    assert null_unflagged_verdict({"z": 2.5, "pvalue": 0.0124}) == (
        "z = 2.5: below the 4-SE flag, but unlikely under no bias (p = 0.012)")
    assert null_unflagged_verdict({"z": 1.2, "pvalue": 0.23}) == "no bias detected (z = 1.2)"
    # review 4: team_draft's null SE 0.00045 on ab.yaml; review 9 F4: quoted at 80% power, (4 + z_0.8) x SE =
    # 0.00045 x (4 + scipy norm.ppf(0.8) 0.8416) = 0.002179, 34.8% of the effect +0.00626
    assert null_detectable_text({"se": 0.00045}, 0.00626) == (
        "0.00218 (35% of the effect) with 80% power by the 4-SE rule on the null Delta ((4 + z_0.8 0.84) x its SE)")
    assert null_detectable_text({"se": 0.00045, "detectable_bias": 0.0018}, None) == (
        "0.00218 with 80% power by the 4-SE rule on the null Delta ((4 + z_0.8 0.84) x its SE)")


def test_null_table_prints_what_the_check_detects(run):
    result, text, html = run
    n = result.summary["designs"]["team_draft"]["delta_ab"]["null"]
    row = next(line for line in text.splitlines() if line.lstrip().startswith("team_draft") and "detects" in line)
    # two-ranker team-draft under cascade users: the null Delta is exact (0 by symmetry) and sees any bias
    assert n["exact"] and n["delta"] == 0.0 and not n["biased"]
    assert "no bias (exact null Delta 0); detects any |bias| (the null Delta is exact)" in row
    assert row.split()[3:5] == ["exact", "-"]  # its '+- SE' and z cells
    assert "detects any |bias| (the null Delta is exact)" in html


def test_extrapolated_sizes_print_their_factor_and_are_flagged_beyond_3x(run):
    from simulations.report import EXTRAPOLATION_FLAG, extrapolated_days_text, extrapolated_entries

    result, text, html = run
    cfg = result.config
    flat = " ".join(text.split())
    html_flat = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    seen = 0
    for design, metrics in result.summary["designs"].items():
        for metric, e in metrics.items():
            n_req = e.get("analytic_required_impressions")
            if n_req is None or e.get("days_to_target_power") is not None or e.get("biased_estimate"):
                continue
            # independent: impressions needed / impressions the run simulated
            factor = n_req / (cfg.traffic.queries_per_day * cfg.traffic.days)
            assert e["analytic_required_days_extrapolation"] == pytest.approx(factor, rel=1e-9)
            cell = (f"{design}/{metric} {extrapolated_days_text(e['analytic_required_days'])} = {factor:.1f}x"
                    + ("!" if factor > EXTRAPOLATION_FLAG else ""))
            assert cell in flat
            assert cell.replace("/", " / ", 1) in html_flat
            seen += 1
    assert seen >= 2  # this run has a '*' size below 3x and one above (abandonment, ~21x)
    assert any(f > EXTRAPOLATION_FLAG for *_, f in extrapolated_entries(result.summary))
    assert "'!' beyond 3x: se^2 = a/N + b fitted to the simulated days is used far past them" in flat
    assert "the 2 simulated days" in flat and "the 2 simulated days" in html_flat


def test_sizes_extrapolated_beyond_3x_are_unstable(run):
    """Review 4, F2: '?' also when the analytic days are more than 3x the simulated days (model-dependent), whatever
    the refits say; the unstable line names the factor and the legends say the range leaves out the model's error."""
    from simulations.analysis import EXTRAPOLATION_FLAG, SIZE_BOOTSTRAP
    from simulations.report import sample_size_cells

    result, text, html = run
    cfg = result.config
    flat = " ".join(text.split())
    html_flat = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    flags = {True: 0, False: 0}
    for design, metrics in result.summary["designs"].items():
        for metric, e in metrics.items():
            n_req = e.get("analytic_required_impressions")
            if n_req is None:
                continue
            far = n_req / (cfg.traffic.queries_per_day * cfg.traffic.days) > EXTRAPOLATION_FLAG  # independent
            assert e["analytic_required_impressions_extrapolated"] is far
            if far:
                assert e["analytic_required_impressions_unstable"] is True
                assert sample_size_cells(e, cfg.users.population)["impressions"].endswith("?")
                factor = e["analytic_required_days_extrapolation"]
                assert f"{design}/{metric}: " in flat
                assert f"[extrapolated {factor:.1f}x the simulated days: model-dependent]" in flat
            flags[far] += 1
    assert flags[True] >= 1 and flags[False] >= 1  # abandonment ~21x; reciprocal_rank within the horizon
    assert (f"'?' unstable impressions needed (90% range of the a/N + b fit on {SIZE_BOOTSTRAP} bootstrap resamples "
            "of the replicates; it leaves out the a/N + b model's own error)") in flat
    assert "or the analytic days are extrapolated beyond 3x the simulated days (model-dependent): ranges below " \
        "the table, which leave out the a/N + b model's own error;" in flat
    assert "extrapolated beyond 3x the simulated days (model-dependent); summary.json" in html_flat
    assert "which leaves out the a/N + b model's own error" in html_flat


def test_exact_truths_print_their_se_over_worlds(run):
    """Review 4, F1: each exact A/B truth's SE over drawn worlds (world_sampling of its per-query values) is in
    summary.json, under the terminal's main table with its '!' and size factors, and in report.html's answer table;
    so does the exact team-draft truth (its ratio linearised per query); a Monte Carlo truth has none and says why
    (tests/test_truth_interleaving_exact.py)."""
    from simulations.analysis import MONTE_CARLO_WORLD_NOTE, exact_truth_per_query
    from simulations.report import truth_world_cell, truth_world_text
    from simulations.world import world_sampling

    result, text, html = run
    designs = result.summary["designs"]
    per_query = exact_truth_per_query(result.config, result.world)
    for metric, e in designs["ab"].items():
        expected = world_sampling(result.world.frequency, per_query[("ab", metric)])[1]
        assert e["true_effect_world_se"] == pytest.approx(expected, rel=1e-12)
        assert "true_effect_world_note" not in e
        shown = truth_world_text(e["true_effect"], e["true_effect_world_se"])
        assert f"ab/{metric} {shown}" in " ".join(text.split())
        assert f"<small>{truth_world_cell(e['true_effect'], e['true_effect_world_se'])}</small>" in unescape(html)
        assert unescape(f"ab / {metric} {shown}") in unescape(html)
    td = designs["team_draft"]["delta_ab"]
    assert td["true_effect_se"] == 0.0 and "true_effect_world_note" not in td
    expected = world_sampling(result.world.frequency, per_query[("team_draft", "delta_ab")])[1]
    assert td["true_effect_world_se"] == pytest.approx(expected, rel=1e-12) and expected > 0
    flat = " ".join(text.split())
    assert "true effect over worlds: ab/" in flat
    assert f"team_draft/delta_ab {truth_world_text(td['true_effect'], td['true_effect_world_se'])}" in flat
    assert MONTE_CARLO_WORLD_NOTE not in flat
    assert "so 'sizes xL to xH' is how far impressions, users and days move" in flat
    assert "+- under a true effect, over worlds: ab / " in " ".join(
        unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_sweep_legends_use_the_same_extrapolation_flag():
    from simulations.analysis import EXTRAPOLATION_FLAG
    from simulations.sweep_outputs import TERMINAL_LEGEND

    assert f"or extrapolated beyond {EXTRAPOLATION_FLAG:g}x the simulated days (model-dependent" in TERMINAL_LEGEND
