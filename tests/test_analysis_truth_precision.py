"""Review 4, F3: a Monte Carlo (interleaving) truth whose 4 SE exceed 10% of its effect says so next to the truth,
naming analysis.truth_impressions and a number of impressions that would suffice (the SE scales as 1 / sqrt(n)).

Checked on hand values and by recomputing the truth at the suggested number of impressions: its 4 SE then lie
within 10% of the effect, up to the first truth's own error in |effect| (4 of its SEs)."""
from __future__ import annotations

import math
import re
from html import unescape

import matplotlib
import pytest

from simulations.analysis import TRUTH_MC_SE, TRUTH_MC_SHARE, _round_up, truth_precision
from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.report import terminal_summary, truth_precision_text
from simulations.runner import compute_truth, world_seed
from simulations.users import UserModels
from simulations.world import build_world
from test_report_review4 import BASE

matplotlib.use("Agg")

CONFIG = {**BASE, "replicates": 4, "analysis": {"truth_impressions": 2_000}}  # test_report_review4's world


def test_hand_values():
    # configs/ab.yaml's team_draft effect and SE (+0.0062649 +- 0.00044893; there over its 1,000,000 impressions,
    # suggesting 8,300,000), here as if over 200,000: 4 SE = 28.66% of the effect; 200,000 x 2.866^2 = 1,643,200
    # -> 1,700,000
    p = truth_precision(0.0062649, 0.00044893, 200_000)
    assert p["four_se_share"] == pytest.approx(4 * 0.00044893 / 0.0062649, rel=1e-12) and not p["adequate"]
    assert p["suggested_truth_impressions"] == 1_700_000 and p["key"] == "analysis.truth_impressions"
    assert truth_precision(-0.01, 0.0002, 100_000) == {
        "key": "analysis.truth_impressions", "truth_impressions": 100_000, "four_se_share": pytest.approx(0.08),
        "adequate": True, "suggested_truth_impressions": None}
    assert truth_precision(0.01, 0.0, 100_000) is None and truth_precision(0.0, 0.001, 100_000) is None
    assert [_round_up(x) for x in (1_643_900, 999, 1_000, 12, 100_001)] == [1_700_000, 1_000, 1_000, 12, 110_000]
    text = truth_precision_text({"true_effect": 0.0062649, "true_effect_se": 0.00044893, "truth_precision": p})
    assert truth_precision(0.0062649, 0.00044893, 1_000_000)["suggested_truth_impressions"] == 8_300_000
    assert text == ("+0.00626 +- 0.00045 (4 SE = 29% of it > 10%!: set analysis.truth_impressions to about 1,700,000, "
                    "now 200,000; its SE scales as 1 / sqrt(n))")


def test_the_suggested_impressions_suffice():
    """The truth recomputed over the suggested impressions (another Monte Carlo sample size, same world) has 4 SE
    within 10% of its effect, up to the first estimate's error in |effect| (share / 4 relative SE, 4 of them)."""
    cfg = config_from_mapping({**CONFIG, "analysis": {"truth_impressions": 20_000}})
    world = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    first = next(t for t in compute_truth(cfg, world, users) if t.design == "team_draft" and t.metric == "delta_ab")
    p = truth_precision(first.value, first.se, 20_000)
    assert not p["adequate"] and 0.1 < p["four_se_share"] < 0.5, p
    n2 = p["suggested_truth_impressions"]
    cfg2 = config_from_mapping({**CONFIG, "analysis": {"truth_impressions": n2}})
    second = next(t for t in compute_truth(cfg2, world, users) if t.design == "team_draft" and t.metric == "delta_ab")
    share2 = TRUTH_MC_SE * second.se / abs(second.value)
    assert share2 <= TRUTH_MC_SHARE * (1 + p["four_se_share"]), (share2, p)
    assert share2 > 0.5 * TRUTH_MC_SHARE  # not wastefully many either
    # the SE itself scales as 1 / sqrt(n) (the per-impression SD estimated twice, within 15%)
    assert second.se * math.sqrt(n2) == pytest.approx(first.se * math.sqrt(20_000), rel=0.15)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("f3")
    result = simulate(config_from_mapping(CONFIG), output=out, workers=1)
    return result, terminal_summary(result), (out / "report.html").read_text(encoding="utf-8")


def test_an_imprecise_truth_says_so_in_summary_terminal_and_html(run):
    result, text, html = run
    e = result.summary["designs"]["team_draft"]["delta_ab"]
    p = e["truth_precision"]
    assert p == truth_precision(e["true_effect"], e["true_effect_se"], 2_000)  # the run's own numbers
    assert not p["adequate"] and p["suggested_truth_impressions"] > 2_000
    assert "truth_precision" not in result.summary["designs"]["ab"]["reciprocal_rank"]  # exact truth
    flat = " ".join(text.split())
    assert f"true effect's Monte Carlo: team_draft/delta_ab {truth_precision_text(e)}" in flat
    html_flat = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    assert f"MC 4 SE {100 * p['four_se_share']:.0f}%!" in html_flat
    assert f"team_draft / delta_ab {truth_precision_text(e)}" in html_flat
