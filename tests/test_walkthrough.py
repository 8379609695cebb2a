"""examples/walkthrough.py runs end to end on a tiny config, and what it prints is what the API returns."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]

TINY = {
    "seed": 3, "replicates": 50, "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 200, "candidates": 15},
    "users": {"population": 400},
    "traffic": {"days": 3, "queries_per_day": 500, "batch_hours": 6},
    "analysis": {"truth_impressions": 20000},
}


def load_walkthrough():
    spec = importlib.util.spec_from_file_location("walkthrough", REPO / "examples" / "walkthrough.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_walkthrough_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(TINY))
    walk = load_walkthrough()
    out = walk.main(["--config", str(cfg), "--replicates", "3", "--out", str(tmp_path / "walk")])
    printed = capsys.readouterr().out
    for key in ("plot", "shrinkage"):
        assert out[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    offline, sim = out["offline"], out["simulation"]
    # the paired difference is the mean of the per-query differences (computed here from the per-query table)
    pq = offline.per_query[offline.per_query["metric"] == "nDCG@10"].pivot(index="query", columns="system",
                                                                           values="value")
    diff = offline.comparison("B", "nDCG@10")
    assert diff.mean_diff == pytest.approx(float((pq["B"] - pq["A"]).mean()), abs=1e-12)
    assert f"{diff.mean_diff:+.4f}" in printed
    # the shrinkage printed is the summary's
    for row in sim.shrinkage.itertuples():
        assert row.shrinkage == sim.summary["designs"][row.design][row.metric]["shrinkage_vs_offline"]
    assert sim.config.replicates == 3 and sim.rows["replicate"].nunique() == 3
    assert np.isfinite(sim.curves["power"]).all()
