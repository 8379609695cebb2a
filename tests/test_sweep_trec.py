"""Sweeps over a folder of TREC runs: every run as B against one baseline run.

References: the points are exactly the folder's files matching the pattern, less the
baseline (listed by hand); each point equals a sweep point whose B names that file
directly (same fingerprint and numbers); a broken run file is reported at the axis with
its file and line before anything runs; the fingerprints cover the run files' contents
(a changed file recomputes its point only, and changes the sweep's fingerprint).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from onlineeval.errors import ConfigError
from simulations.job import config_fingerprint
from simulations.sweep import run_sweep, sweep_from_mapping

AXIS = "collection.runs.B"


def _collection(root: Path, n_queries: int = 8, docs: int = 12) -> None:
    """qrels, a baseline run and a folder of 3 runs of increasing quality (noisier scores),
    plus the baseline itself and a file the pattern leaves out."""
    rng = np.random.default_rng(4)
    grades = rng.choice(3, size=(n_queries, docs), p=[0.6, 0.3, 0.1])
    with open(root / "qrels.txt", "w") as fh:
        for q in range(n_queries):
            fh.writelines(f"q{q} 0 d{d} {grades[q, d]}\n" for d in range(docs))
    runs = root / "runs"
    runs.mkdir()

    def write_run(path: Path, noise: float, seed: int) -> None:
        r = np.random.default_rng(seed)
        with open(path, "w") as fh:
            for q in range(n_queries):
                scores = grades[q] + noise * r.standard_normal(docs)
                order = np.argsort(-scores)
                fh.writelines(f"q{q} Q0 d{d} {rank + 1} {scores[d]:.6f} run{seed}\n" for rank, d in enumerate(order))

    write_run(runs / "base.run", 2.0, 1)
    for i, noise in enumerate((0.5, 1.0, 3.0)):
        write_run(runs / f"cand{i}.run", noise, 10 + i)
    (runs / "README.txt").write_text("not a run\n")


def _base(root: Path) -> dict[str, Any]:
    return {
        "seed": 3, "replicates": 2, "workers": 1,
        "collection": {"type": "trec", "qrels": str(root / "qrels.txt"),
                       "runs": {"A": str(root / "runs" / "base.run"), "B": str(root / "runs" / "base.run")}},
        "rankers": {"depth": 5},
        "users": {"population": 100, "click_model": {"name": "cascade", "preset": "navigational"}},
        "traffic": {"days": 2, "queries_per_day": 100, "batch_hours": 12},
        "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
                    {"name": "td", "type": "interleaving", "method": "team_draft"}],
        "analysis": {"aa": False, "truth_impressions": 2000},
    }


def _sweep(root: Path, **grid_extra: Any):
    spec = {"folder": "runs", "pattern": "*.run", **grid_extra}
    return sweep_from_mapping({"base": _base(root), "output": str(root / "out"), "grid": {AXIS: spec}},
                              base_dir=root)


def test_folder_axis_is_every_run_but_the_baseline(tmp_path: Path) -> None:
    _collection(tmp_path)
    sweep = _sweep(tmp_path)
    assert sweep.axes == [AXIS]
    assert [p.label(AXIS) for p in sweep.points] == ["cand0.run", "cand1.run", "cand2.run"]
    assert [p.config.collection.runs["B"] for p in sweep.points] == [
        (tmp_path / "runs" / f"cand{i}.run").resolve() for i in range(3)]
    assert all(p.config.collection.runs["A"] == tmp_path / "runs" / "base.run" for p in sweep.points)


def test_folder_axis_errors_name_axis_value_and_key_path(tmp_path: Path) -> None:
    _collection(tmp_path)
    with pytest.raises(ConfigError) as info:  # README.txt is not a run: named before anything runs
        _sweep(tmp_path, pattern="*")
    assert info.value.key_path == ("grid", AXIS)
    assert "collection.runs.B = 'README.txt'" in info.value.message and "README.txt:1" in info.value.message
    (tmp_path / "runs" / "cand1.run").write_text("q0 Q0 d1 1 0.5 r\nq0 Q0 d2 2\n")
    with pytest.raises(ConfigError) as info:
        _sweep(tmp_path)
    assert info.value.key_path == ("grid", AXIS)
    assert "'cand1.run' (point 1)" in info.value.message and "cand1.run:2" in info.value.message
    (tmp_path / "runs" / "cand1.run").write_text("zz Q0 d1 1 0.5 r\n")
    with pytest.raises(ConfigError, match="retrieves no query judged"):
        _sweep(tmp_path)
    with pytest.raises(ConfigError) as info:
        _sweep(tmp_path, pattern="*.nothing")
    assert info.value.key_path == ("grid", AXIS, "folder") and "no files matching '*.nothing'" in info.value.message
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": _base(tmp_path), "grid": {AXIS: {"folder": "nope"}}}, base_dir=tmp_path)
    assert info.value.key_path == ("grid", AXIS, "folder") and "folder not found" in info.value.message
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": _base(tmp_path), "grid": {AXIS: {"folder": "runs", "glob": "*"}}},
                           base_dir=tmp_path)
    assert info.value.key_path == ("grid", AXIS, "glob")
    synthetic = {**_base(tmp_path), "collection": {"type": "synthetic", "n_queries": 20, "candidates": 8}}
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": synthetic, "grid": {AXIS: {"folder": "runs", "pattern": "cand0.run"}}},
                           base_dir=tmp_path)
    assert info.value.key_path == ("grid", AXIS)


def test_runs_folder_sweep_and_fingerprint_over_file_contents(tmp_path: Path) -> None:
    _collection(tmp_path)
    result = run_sweep(_sweep(tmp_path), workers=1)
    out = tmp_path / "out"
    rows = pd.read_csv(out / "points.csv")
    assert list(rows[AXIS]) == ["cand0.run", "cand0.run", "cand1.run", "cand1.run", "cand2.run", "cand2.run"]
    summary = json.loads((out / "summary.json").read_text())
    assert [p["labels"][AXIS] for p in summary["points"]] == ["cand0.run", "cand1.run", "cand2.run"]
    rel = summary["shrinkage"]["groups"][0]["relations"][0]
    assert rel["n_systems"] == 3 and rel["through_origin"] is not None
    # a point of the folder is the simulation of a point naming its file directly
    direct = sweep_from_mapping({"base": _base(tmp_path), "points": [{AXIS: str(tmp_path / "runs" / "cand1.run")}]})
    assert config_fingerprint(direct.points[0].config) == summary["points"][1]["fingerprint"]
    # same config, changed contents of one run file: only its point is recomputed
    shutil.copy(tmp_path / "runs" / "cand0.run", tmp_path / "runs" / "cand2.run")
    again = run_sweep(_sweep(tmp_path), workers=1)
    assert result.computed == [0, 1, 2] and again.computed == [2]
    after = json.loads((out / "summary.json").read_text())
    assert after["sweep_fingerprint"] != summary["sweep_fingerprint"]
    assert [p["fingerprint"] for p in after["points"]][:2] == [p["fingerprint"] for p in summary["points"]][:2]
    # and the baseline's contents are in every point's fingerprint
    with open(tmp_path / "runs" / "base.run", "a") as fh:
        fh.write("q0 Q0 dx 99 -9.0 run1\n")
    changed = [config_fingerprint(p.config) for p in _sweep(tmp_path).points]
    assert all(a != b["fingerprint"] for a, b in zip(changed, after["points"]))


def test_shared_trec_eval_runs_as_a_folder(shared_data: Path, tmp_path: Path) -> None:
    """trec_eval's own test collection: results.test as the baseline, results.trunc (the
    same topics, fewer documents, text after the sixth column) as the one candidate."""
    src = shared_data / "trec_eval"
    if not (src / "qrels.test").is_file():
        pytest.skip("../shared/data/trec_eval/qrels.test is absent")
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("results.test", "results.trunc"):
        shutil.copy(src / name, runs / name)
    base = _base(tmp_path)
    base["collection"] = {"type": "trec", "qrels": str(src / "qrels.test"),
                          "runs": {"A": str(runs / "results.test"), "B": str(runs / "results.test")}}
    base["replicates"] = 1
    sweep = sweep_from_mapping({"base": base, "output": str(tmp_path / "out"),
                                "grid": {AXIS: {"folder": str(runs)}}})
    assert [p.label(AXIS) for p in sweep.points] == ["results.trunc"]
    run_sweep(sweep, workers=1)
    rows = pd.read_csv(tmp_path / "out" / "points.csv")
    assert list(rows[AXIS]) == ["results.trunc", "results.trunc"]
    assert rows["offline_delta"].notna().all()
