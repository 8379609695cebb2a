"""A sweep point whose design or estimate is biased: its analytic days are withheld, and the sweep says so.

``simulate`` withholds a biased entry's analytic power, days and sizes (summary.json keeps them under
``analytic_if_unbiased``, reason in ``analytic_withheld``). The sweep's points.csv / points.parquet carry the
flag as a boolean column ``analytic_withheld`` (NaN days next to it); the terminal prints 'biased' (never a bare
NaN) with a legend; the shrinkage study neither gives an MDE nor normal-theory shares from a biased point's
variance model. Reference: clipped IPS with cap 2 on an epsilon-greedy log, whose clipping bias is several
times its standard error, so each point's own analysis finds it biased (checked from the point's summary.json).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simulations.shrinkage import BIASED_NOTE, format_shrinkage, point_columns, shrinkage_study
from simulations.sweep import run_sweep, sweep_from_mapping
from simulations.sweep_outputs import TERMINAL_LEGEND, days_cell, terminal_table

BASE: dict[str, Any] = {
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 100, "candidates": 20,
                   "label_distribution": [0.60, 0.22, 0.11, 0.05, 0.02]},
    "rankers": {"depth": 5, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.8}},
    "offline_metric": "nDCG@5",
    "users": {"population": 3000, "types": [
        {"name": "pbm", "share": 0.5, "click_model": {"name": "pbm", "preset": "ai2018"}},
        {"name": "cascade", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}}]},
    "traffic": {"days": 2, "queries_per_day": 1000, "batch_hours": 24},
    "designs": [
        {"name": "ab", "type": "ab", "share_b": 0.5, "metric": "clicks_per_query"},
        {"name": "cf", "type": "counterfactual", "metric": "clicks_per_query",
         "logger": {"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.3, "n": 20},
         "targets": ["A", "B"], "estimators": [{"name": "clipped_ips", "cap": 2}, "ips"]},
    ],
    "analysis": {"aa": False, "truth_impressions": 20000},
}


def _sweep(out: Path):
    return sweep_from_mapping({"base": BASE, "grid": {"rankers.B.noise": [0.6, 0.9]}, "output": str(out),
                               "seed": 20261201, "replicates": 8})


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("withheld") / "sweep"
    run_sweep(_sweep(out), workers=1)
    return out


def test_points_table_flags_the_withheld_rows(done: Path) -> None:
    rows = pd.read_csv(done / "points.csv")
    parquet = pd.read_parquet(done / "points.parquet")
    assert rows["analytic_withheld"].dtype == bool and parquet["analytic_withheld"].dtype == bool
    assert list(parquet["analytic_withheld"]) == list(rows["analytic_withheld"])
    for r in rows.itertuples():
        entry = json.loads((done / r.folder / "summary.json").read_text())["designs"][r.design][r.metric]
        withheld = entry.get("analytic_withheld") is not None
        assert r.analytic_withheld == withheld
        if withheld:  # the number exists (as if unbiased) and was withheld: NaN here
            assert entry["analytic_if_unbiased"]["analytic_required_days"] > 0
            assert math.isnan(r.analytic_required_days) and math.isnan(r.analytic_required_impressions)
            assert math.isnan(r.offline_mde_at_days)
        else:
            assert r.analytic_required_days == pytest.approx(entry["analytic_required_days"], rel=1e-12)
    # the reference world: clipped IPS biased at both points, the A/B test not
    assert list(rows["design"]) == ["ab", "cf"] * 2
    assert list(rows["analytic_withheld"]) == [False, True] * 2


def test_terminal_prints_biased_not_nan(done: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    out = tmp_path / "again"
    shutil.copytree(done, out)  # every point finished: the CLI reads them back
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(json.dumps({"base": BASE, "grid": {"rankers.B.noise": [0.6, 0.9]}, "output": str(out),
                               "seed": 20261201, "replicates": 8}))
    res = CliRunner().invoke(app, ["sweep", "--config", str(cfg), "--quiet"])
    assert res.exit_code == 0, res.output
    table = res.output.split("(offline_delta")[0].splitlines()
    assert "NaN" not in "\n".join(table) and "nan" not in "\n".join(table)
    cf = [line for line in table if " cf " in line]
    ab = [line for line in table if " ab " in line]
    assert len(cf) == 2 and all(line.split()[-1] == "biased" for line in cf)
    assert len(ab) == 2 and all(float(line.split()[-1].rstrip("?")) > 0 for line in ab)
    assert TERMINAL_LEGEND in res.output
    # the MDE table: no curve for the design biased on every point, with the note
    mde = [line for line in res.output.splitlines() if line.strip().startswith("all points") and " cf " in line]
    assert len(mde) == 1 and BIASED_NOTE in mde[0] and mde[0].split()[4:8] == ["-"] * 4


def test_days_cell_every_case() -> None:
    assert days_cell({"analytic_withheld": True, "analytic_required_days": math.nan, "detectable": True}) == "biased"
    assert days_cell({"analytic_withheld": np.bool_(True), "analytic_required_days": math.nan}) == "biased"
    assert days_cell({"analytic_withheld": False, "detectable": False, "analytic_required_days": math.nan}) \
        == "no effect"
    assert days_cell({"analytic_withheld": False, "detectable": True, "analytic_required_days": math.nan}) == "never"
    assert days_cell({"analytic_withheld": False, "detectable": True, "analytic_required_days": 12.345678,
                      "analytic_required_impressions_unstable": True}) == "12.3?"
    assert days_cell({"analytic_withheld": False, "detectable": True, "analytic_required_days": 12.345678,
                      "analytic_required_impressions_unstable": False}) == "12.3"
    # beyond a year, as simulate's table and the point's report say it (not 3.563e+04)
    assert days_cell({"analytic_withheld": False, "detectable": True, "analytic_required_days": 35625.0,
                      "analytic_required_impressions_unstable": True}) == "> 1 year?"
    assert days_cell({"analytic_withheld": False, "detectable": True, "analytic_required_days": 365.0}) == "365.0"
    rows = pd.DataFrame({"design": ["ab", "cf"], "analytic_required_days": [3.0, math.nan],
                         "analytic_withheld": [False, True], "detectable": [True, True],
                         "analytic_required_impressions_unstable": [False, False]})
    text = terminal_table(rows, ["design", "analytic_required_days"])
    assert text.splitlines()[1].split() == ["ab", "3.0"] and text.splitlines()[2].split() == ["cf", "biased"]


def _obs(withheld: list[bool] | None) -> tuple[pd.DataFrame, pd.DataFrame, dict[int, dict[str, str]]]:
    """Three points of one design with an exact truth; optionally the analytic_withheld column."""
    rows = [{"point": p, "design": "cf", "metric": "clicks_per_query", "primary": True, "improvement_sign": 1,
             "offline_delta": x, "online_effect": 0.4 * x + e, "online_effect_se": 0.0, "queries_per_day": 1000.0,
             "days": 2, "impressions": 2000.0, "alpha": 0.05, "power": 0.8, "var_a": 2.0, "var_b": 0.0}
            for p, x, e in ((0, 0.05, 0.001), (1, 0.1, -0.002), (2, 0.15, 0.0005))]
    obs = pd.DataFrame(rows)
    if withheld is not None:
        obs["analytic_withheld"] = withheld
    rng = np.random.default_rng(3)
    est = pd.DataFrame([{"point": p, "design": "cf", "metric": "clicks_per_query", "replicate": r,
                         "estimate": float(rng.normal(-0.1, 0.01)), "pvalue": 0.001}
                        for p in range(3) for r in range(10)])
    return obs, est, {p: {} for p in range(3)}


def test_shrinkage_study_leaves_out_biased_points() -> None:
    plain = shrinkage_study(*_obs(None), [], "nDCG@5")
    unflagged = shrinkage_study(*_obs([False, False, False]), [], "nDCG@5")
    assert json.dumps(plain, sort_keys=True) == json.dumps(unflagged, sort_keys=True)  # the column's default
    m = plain["groups"][0]["mde"][0]
    assert m["note"] is None and m["offline_mde_at_simulated_days"] > 0

    obs, est, groups = _obs([True, True, True])
    study = shrinkage_study(obs, est, groups, [], "nDCG@5")
    rel, m = study["groups"][0]["relations"][0], study["groups"][0]["mde"][0]
    assert rel["biased_points"] == 3
    assert m["note"] == BIASED_NOTE and m["offline_mde"] == [] and m["variance_model"] is None
    assert all(d["analytic_opposite_sign"] is None for d in rel["sign_agreement"]["decision"])
    # the simulated shares stay: every replicate's estimate has the opposite sign
    assert rel["sign_agreement"]["decision_mean"]["share_opposite_sign"] == 1.0
    # the relation itself is about the truth and does not change
    assert rel["through_origin"] == plain["groups"][0]["relations"][0]["through_origin"]
    assert point_columns(study, obs)["offline_mde_at_days"].isna().all()
    assert "biased on 3 of 3 points" in format_shrinkage(study)

    # one biased point of three: the MDE from the other two's variance model, none at the biased point
    obs, est, groups = _obs([False, True, False])
    obs.loc[obs["point"] == 1, "var_a"] = 50.0  # would move the median if it were used
    study = shrinkage_study(obs, est, groups, [], "nDCG@5")
    m = study["groups"][0]["mde"][0]
    assert m["variance_model"] == {"a": 2.0, "b": 0.0}
    cols = point_columns(study, obs).set_index("point")["offline_mde_at_days"]
    assert math.isnan(cols[1]) and cols[0] == pytest.approx(m["offline_mde_at_simulated_days"], rel=1e-12)
