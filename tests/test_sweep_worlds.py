"""Replicated worlds as a sweep over ``seed`` (review 4, F1): every seed draws its own world, and the sweep shows the
spread across those worlds of the true effect and of the impressions / days needed (median and range per design),
in the terminal, its summary.json and report.html. Checked against the points' own summaries and against worlds
built independently from each point's config."""
from __future__ import annotations

import json
import math
import re
from html import unescape

import numpy as np
import pandas as pd
import pytest

from simulations.runner import world_seed
from simulations.sweep import run_sweep, sweep_from_mapping
from simulations.sweep_outputs import WORLD_AXIS, terminal_table, world_spread, world_spread_text
from simulations.world import build_world

BASE = {
    "seed": 1,
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 200, "candidates": 25},
    "rankers": {"depth": 10, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.8}},
    "users": {"population": 800, "types": [
        {"name": "n", "share": 1.0, "click_model": {"name": "cascade", "preset": "navigational"}}]},
    "traffic": {"days": 2, "queries_per_day": 600, "batch_hours": 24},
    "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
                {"name": "team_draft", "type": "interleaving", "method": "team_draft"}],
    "analysis": {"truth_impressions": 20_000},
}


@pytest.fixture(scope="module")
def seed_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("worlds")
    sweep = sweep_from_mapping({"base": BASE, "grid": {"seed": [1, 2, 3]}, "replicates": 3, "output": str(out)})
    return sweep, run_sweep(sweep, workers=1, writers=0), out


def test_each_seed_is_its_own_world(seed_sweep):
    sweep, result, out = seed_sweep
    assert sweep.axes == [WORLD_AXIS] and [p.config.seed for p in sweep.points] == [1, 2, 3]
    deltas = []
    for p in sweep.points:
        point = json.loads((out / "points" / p.folder_name / "summary.json").read_text())
        world = build_world(p.config, world_seed(p.config.seed))  # built here, independently of the sweep
        assert point["offline"]["delta"]["weighted"] == pytest.approx(world.offline.delta("weighted"), rel=1e-12)
        deltas.append(world.offline.delta("weighted"))
    assert len(set(deltas)) == 3  # three different worlds


def test_spread_across_worlds_matches_the_points(seed_sweep):
    sweep, result, out = seed_sweep
    rows = result.rows
    spread = world_spread(rows, sweep.axes)
    assert list(spread["design"]) == ["ab", "team_draft"] and list(spread["worlds"]) == [3, 3]
    for _, s in spread.iterrows():
        g = rows[rows["design"] == s["design"]]
        assert s["no_size"] == 0 and g["analytic_required_impressions"].notna().all()
        for name, col in (("true_effect", "true_effect"), ("offline_delta", "offline_delta"),
                          ("impressions", "analytic_required_impressions"), ("days", "analytic_required_days")):
            v = g[col].to_numpy(dtype=float)
            assert (s[f"{name}_median"], s[f"{name}_min"], s[f"{name}_max"]) == pytest.approx(
                (float(np.median(v)), float(v.min()), float(v.max())), rel=1e-12)
    saved = json.loads((out / "summary.json").read_text())["worlds"]
    assert saved["axis"] == "seed" and len(saved["spread"]) == 2
    assert saved["spread"][0]["true_effect_max"] == pytest.approx(spread["true_effect_max"].iloc[0], rel=1e-12)
    # points.csv carries each exact truth's SE over worlds (review 4, F1): the A/B truths' and the exact team-draft
    # truth's (its ratio linearised per query); a Monte Carlo truth's is empty (tests/test_truth_interleaving_exact.py)
    csv = pd.read_csv(out / "points.csv")
    assert csv.loc[csv["design"] == "ab", "true_effect_world_se"].gt(0).all()
    assert csv.loc[csv["design"] == "team_draft", "true_effect_world_se"].gt(0).all()


def test_spread_is_printed_and_in_the_report(seed_sweep):
    sweep, result, out = seed_sweep
    cols = ["point", *sweep.axes, "design", "metric", "offline_delta", "true_effect", "power_last_day",
            "analytic_required_days"]
    text = terminal_table(result.rows, cols)  # as `onlineeval sweep` prints it
    assert "across worlds (the seed axis: each seed draws its own world; median [min, max] over the seeds):" in text
    s = world_spread(result.rows, sweep.axes).iloc[0]
    cell = f"{s['impressions_median']:,.0f} [{s['impressions_min']:,.0f}, {s['impressions_max']:,.0f}]"
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("ab reciprocal_rank"))
    assert cell in line and f"{s['days_median']:.1f} [{s['days_min']:.1f}, {s['days_max']:.1f}]" in line
    html = unescape(re.sub(r"<[^>]+>", " ", (out / "report.html").read_text(encoding="utf-8")))
    assert "Across worlds (the seed axis" in html and cell in html
    # a sweep without a seed axis prints no such block
    assert "across worlds" not in terminal_table(result.rows.drop(columns=["seed"]).assign(x=1),
                                                 ["point", "x", "design", "metric", "true_effect"])


def test_world_spread_by_hand():
    """Two worlds per noise value; 'never' (no finite size) counts as infinite, a biased or no-effect world is left
    out of the sizes and counted in no_size."""
    nan = math.nan
    rows = pd.DataFrame({
        "seed": [1, 2, 1, 2, 3], "noise": [0.8, 0.8, 0.9, 0.9, 0.9], "design": ["ab"] * 5, "metric": ["rr"] * 5,
        "offline_delta": [0.02, 0.04, 0.01, 0.03, 0.02], "true_effect": [0.001, 0.003, -0.001, 0.002, 0.0],
        "analytic_required_impressions": [4000.0, 1000.0, nan, 2000.0, nan],
        "analytic_required_days": [4.0, 1.0, nan, 2.0, nan],
        "analytic_withheld": [False, False, False, False, False], "detectable": [True, True, True, True, False],
    })
    spread = world_spread(rows, ["seed", "noise"]).set_index("noise")
    a, b = spread.loc[0.8], spread.loc[0.9]
    assert (a["worlds"], a["no_size"], a["impressions_median"], a["impressions_min"], a["impressions_max"]) == \
        (2, 0, 2500.0, 1000.0, 4000.0)
    assert (b["worlds"], b["no_size"], b["impressions_min"], b["days_max"]) == (3, 1, 2000.0, math.inf)
    assert b["impressions_median"] == math.inf  # median of (inf, 2000): numpy/pandas give inf
    assert b["true_effect_median"] == pytest.approx(0.0) and b["offline_delta_max"] == pytest.approx(0.03)
    text = world_spread_text(world_spread(rows, ["seed", "noise"]))
    assert "2,500 [1,000, 4,000]" in text and "never [2,000, never]" in text
    assert world_spread(rows, ["noise"]) is None
