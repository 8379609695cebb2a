"""Review 4's report findings (/work/notes/review4.md): what the sizes, the offline line, the null check's verdict
and the extrapolation of the analytic days say about themselves."""
from __future__ import annotations

import re

import matplotlib
import pytest

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.report import terminal_summary

matplotlib.use("Agg")


def _config(**over):
    base = {
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
    base.update(over)
    return config_from_mapping(base)


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
