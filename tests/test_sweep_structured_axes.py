"""A sweep axis whose values are lists or mappings (estimator lists, logger specs): the natural way to compare
loggers or estimator sets. Every point ran, then writing the sweep's outputs ended in a pandas traceback
('unhashable type: list' in the effect plot's grouping by the other axes). Such a value is now shown as its compact
JSON text in points.csv / points.parquet, the terminal table, the plot's legend and the shrinkage study's groups;
summary.json keeps the point's overrides as given."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from test_sweep_withheld import BASE

from simulations.sweep import run_sweep, sweep_from_mapping

LOGGERS = [{"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.3, "n": 20},
           {"policy": "randtop", "ranker": "A", "n": 5}]
ESTIMATORS = [["ips", "snips"], ["snips"]]


def test_list_and_mapping_axes_run_and_are_shown_as_json_text(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    sweep = sweep_from_mapping({
        "base": {**BASE, "analysis": {**BASE["analysis"], "bias_check": 20_000}},
        "grid": {"designs[1].logger": LOGGERS, "designs[1].estimators": ESTIMATORS},
        "output": str(out), "seed": 7, "replicates": 3, "shrinkage_by": ["designs[1].logger"]})
    run_sweep(sweep, workers=1)
    rows = pd.read_csv(out / "points.csv")
    assert len(set(rows["point"])) == 4
    shown = {json.dumps(v, separators=(", ", ": "), sort_keys=True) for v in LOGGERS}
    assert set(rows["designs[1].logger"]) == shown
    assert set(rows["designs[1].estimators"]) == {'["ips", "snips"]', '["snips"]'}
    assert set(pd.read_parquet(out / "points.parquet")["designs[1].logger"]) == shown
    summary = json.loads((out / "summary.json").read_text())
    assert [p["overrides"]["designs[1].logger"] for p in summary["points"]] == [LOGGERS[0]] * 2 + [LOGGERS[1]] * 2
    assert (out / "effect.png").stat().st_size > 0 and (out / "report.html").is_file()
    # the shrinkage study's groups are the loggers' texts
    assert {g["key"]["designs[1].logger"] for g in summary["shrinkage"]["groups"]} == shown


def test_two_spellings_of_one_mapping_are_one_label(tmp_path: Path) -> None:
    """Two listed points writing one logger spec with its keys in another order: one label, one shrinkage group
    (json.dumps in the user's key order made them two)."""
    spec = LOGGERS[1]
    reordered = dict(reversed(list(spec.items())))
    assert list(reordered) != list(spec) and reordered == spec
    sweep = sweep_from_mapping({
        "base": BASE, "points": [{"designs[1].logger": spec}, {"designs[1].logger": reordered}],
        "output": str(tmp_path / "sweep"), "seed": 7, "replicates": 2})
    labels = {p.label("designs[1].logger") for p in sweep.points}
    assert labels == {'{"n": 5, "policy": "randtop", "ranker": "A"}'}
