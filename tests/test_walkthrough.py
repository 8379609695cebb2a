"""examples/walkthrough.py runs end to end on a tiny trec config, simulates the runs it evaluates, and what it
prints is what the API returns (offline deltas under both conventions, shrinkage)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = ["--set", "traffic.days=3", "--set", "traffic.queries_per_day=150", "--set", "users.population=400",
        "--set", "analysis.truth_impressions=4000", "--set", "workers=1"]


def load_walkthrough():
    spec = importlib.util.spec_from_file_location("walkthrough", REPO / "examples" / "walkthrough.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_walkthrough_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the shipped config and its files, copied (its paths are relative to it)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "trec.yaml").write_bytes((REPO / "configs" / "trec.yaml").read_bytes())
    subprocess.run([sys.executable, str(REPO / "examples" / "make_trec_example.py"),
                    str(tmp_path / "examples" / "trec_example")], check=True, capture_output=True)
    walk = load_walkthrough()
    out = walk.main(["--config", str(tmp_path / "configs" / "trec.yaml"), "--replicates", "3",
                     "--out", str(tmp_path / "walk"), *TINY])
    printed = capsys.readouterr().out
    for key in ("plot", "shrinkage"):
        assert out[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    offline, as_simulated, sim = out["offline"], out["as_simulated"], out["simulation"]
    # the paired difference is the mean of the per-query differences (computed here from the per-query table)
    pq = offline.per_query[offline.per_query["metric"] == "nDCG@10"].pivot(index="query", columns="system",
                                                                           values="value")
    diff = offline.comparison("B", "nDCG@10")
    assert diff.mean_diff == pytest.approx(float((pq["B"] - pq["A"]).mean()), abs=1e-12)
    assert f"{diff.mean_diff:+.4f}" in printed
    # step 2 simulates the runs of step 1: the same files, and under simulate's conventions the same nDCG@10
    assert {k: v.resolve() for k, v in sim.config.collection.runs.items()} == {
        name: tmp_path / "examples" / "trec_example" / f"{name}.run" for name in ("A", "B")}
    off = sim.summary["offline"]
    for name in ("A", "B"):
        assert as_simulated.mean(name, "nDCG@10") == off[name]["uniform"]
    assert str(offline.conventions.gain) == "linear" and str(as_simulated.conventions.gain) == "exponential"
    assert (f"evaluate --preset trec_eval (gain linear) {diff.mean_diff:+.4f}; with --gain exponential --depth 10 "
            f"--missing zero (simulate's conventions) {off['delta']['uniform']:+.4f}, simulate's uniform delta "
            f"{off['delta']['uniform']:+.4f}") in printed
    assert f"{diff.mean_diff:+.4f}" != f"{off['delta']['uniform']:+.4f}"
    # the shrinkage printed is the summary's
    for row in sim.shrinkage.itertuples():
        assert row.shrinkage == sim.summary["designs"][row.design][row.metric]["shrinkage_vs_offline"]
    assert sim.config.replicates == 3 and sim.rows["replicate"].nunique() == 3
    assert sim.config.traffic.days == 3
    assert np.isfinite(sim.curves["power"]).all()


def test_walkthrough_refuses_a_synthetic_config(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        load_walkthrough().main(["--config", str(REPO / "configs" / "ab.yaml"), "--replicates", "1"])
    assert "it needs collection.type trec" in capsys.readouterr().err
