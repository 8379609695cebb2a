"""The main job end to end: CLI, results directory, resume after interruption, README command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import simulations.job as job
from onlineeval.cli import app
from simulations.analysis import side_row_mask
from simulations.config import config_from_mapping

REPO = Path(__file__).resolve().parents[1]

SMALL = {
    "seed": 3,
    "replicates": 6,
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 200, "candidates": 15},
    "users": {"population": 400},
    "traffic": {"days": 3, "queries_per_day": 600, "batch_hours": 6},
    "analysis": {"truth_impressions": 20000},
}


def test_cli_writes_the_results_directory(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(SMALL))
    out = tmp_path / "res"
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "--output", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    for name in ("summary.json", "config.effective.yaml", "replicates.csv", "curves.csv",
                 "power_vs_days.png", "offline_vs_online.png"):
        assert (out / name).is_file(), name
    assert not (out / job.PARTIAL).exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["replicates"] == 6 and summary["conventions"]["seed"] == 3
    assert summary["onlineeval_version"] and summary["stream_version"] == job.STREAM_VERSION
    assert set(summary["designs"]) == {"ab", "team_draft", "balanced"}
    e = summary["designs"]["team_draft"]["delta_ab"]
    assert {"true_effect", "days_to_target_power", "analytic_required_impressions", "aa"} <= set(e)
    rows = pd.read_csv(out / "replicates.csv")
    # 6 replicates x 3 days x ((ab: 3 metrics + 2 interleaving designs: 1) x (B and A/A)
    # + each interleaving design's null variant: 1 + ab's SRM checks: 3 x (B and A/A))
    assert len(rows) == 6 * 3 * (5 * 2 + 2 + 3 * 2)
    assert (rows["metric"] == "null:delta_ab").sum() == 6 * 3 * 2
    assert rows["metric"].str.startswith("srm:").sum() == 6 * 3 * 3 * 2
    # the effective config reloads to the same config
    eff = yaml.safe_load((out / "config.effective.yaml").read_text())
    assert config_from_mapping(eff) == config_from_mapping({**SMALL, "output": str(out)})
    # the terminal summary states the conventions it used
    for text in ("Offline nDCG@10", "frequency-weighted", "click model", "seed 3", "A/A FPR"):
        assert text in result.output


def test_interrupted_run_resumes_without_losing_work(tmp_path, monkeypatch):
    cfg = config_from_mapping(SMALL)
    reference = job.simulate(cfg)  # in memory, uninterrupted
    out = tmp_path / "res"
    real = job.run_replicates

    def interrupted(config, world, indices, workers, on_done):
        seen = []

        def stop_after_two(i, rows):
            on_done(i, rows)
            seen.append(i)
            if len(seen) == 2:
                raise KeyboardInterrupt

        return real(config, world, indices, workers, stop_after_two)

    monkeypatch.setattr(job, "run_replicates", interrupted)
    with pytest.raises(KeyboardInterrupt):
        job.simulate(cfg, out)
    assert len((out / job.PARTIAL).read_text().splitlines()) == 3  # header + 2 replicates
    monkeypatch.setattr(job, "run_replicates", real)
    ran = []
    resumed = job.simulate(cfg, out, log=ran.append)
    assert any("resuming: 2 of 6" in m for m in ran)
    pd.testing.assert_frame_equal(resumed.rows, reference.rows)
    # a different config does not reuse the partial results
    (out / job.PARTIAL).write_text(json.dumps({"fingerprint": "other"}) + "\n")
    assert job._load_partial(out / job.PARTIAL, job.config_fingerprint(cfg)) == {}


def test_bad_input_file_is_reported_with_file_and_line(tmp_path):
    (tmp_path / "q").write_text("1 0 d1 1\n1 0 d2 x\n")
    (tmp_path / "a").write_text("1 Q0 d1 1 1.0 x\n")
    (tmp_path / "b").write_text("1 Q0 d1 1 1.0 x\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"collection": {"type": "trec", "qrels": "q", "runs": {"A": "a", "B": "b"}}}))
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "-o", str(tmp_path / "o"), "-q"])
    assert result.exit_code == 2
    assert f"{tmp_path / 'q'}:2" in result.output
    assert "Traceback" not in result.output


def test_readme_command_runs_in_a_subprocess(tmp_path):
    """`onlineeval simulate --config configs/ab.yaml` (fewer replicates to stay quick)."""
    out = tmp_path / "ab"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "onlineeval.cli", "simulate", "--config", "configs/ab.yaml",
         "--replicates", "4", "--output", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Online (alpha 0.05" in proc.stdout
    assert "replicates [" in proc.stderr  # progress is shown
    assert json.loads((out / "summary.json").read_text())["config"]["replicates"] == 4


def test_click_model_fitted_on_a_log_drives_a_simulation(tmp_path):
    """clicks fit -> params JSON -> users.click_model {fitted: ...} (path relative to the config)."""
    import numpy as np

    rng = np.random.default_rng(0)
    lines = []
    for s in range(3000):  # position-biased clicks on 10 documents per page
        docs = rng.permutation(20)[:10]
        clicked = [str(d) for r, d in enumerate(docs) if rng.random() < 0.6 / (r + 1)]
        lines.append(f"s{s}\t{s % 7}\t{','.join(str(d) for d in docs)}\t{','.join(clicked)}")
    (tmp_path / "log.tsv").write_text("\n".join(lines) + "\n")
    sub = tmp_path / "cfg"
    sub.mkdir()
    fit = CliRunner().invoke(app, ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--format", "tsv",
                                   "--model", "pbm", "--out", str(sub / "pbm.json")])
    assert fit.exit_code == 0, fit.output
    cfg = sub / "c.yaml"
    cfg.write_text(yaml.safe_dump({
        **SMALL, "analysis": {"truth_impressions": 5000},
        "users": {"population": 300, "click_model": {"name": "pbm", "fitted": "pbm.json",
                                                    "click": [0.05, 0.2, 0.4, 0.7, 0.9]}},
    }))
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "-o", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["conventions"]["user_types"][0]["click_model"]["fitted"] == str(sub / "pbm.json")
    # the whole fitted model (per query-document tables) cannot click on graded documents
    whole = yaml.safe_load(cfg.read_text())
    whole["users"]["click_model"] = {"name": "pbm", "params_file": "pbm.json"}
    cfg.write_text(yaml.safe_dump(whole))
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "-o", str(tmp_path / "out3"), "-q"])
    assert result.exit_code == 2
    assert "users.click_model.params_file: a model with parameters per (query, document)" in result.output
    # a model fitted on shorter pages than the simulated lists is refused up front, by key
    short = yaml.safe_load(cfg.read_text())
    short["users"]["click_model"] = {"name": "pbm", "fitted": "pbm.json", "click": [0.05, 0.2, 0.4, 0.7, 0.9]}
    short["rankers"] = {"depth": 12}
    cfg.write_text(yaml.safe_dump(short))
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "-o", str(tmp_path / "out2"), "-q"])
    assert result.exit_code == 2
    # at loading (simulations.config.checks), naming the file, the fitted model's ranks and rankers.depth
    assert f"{cfg}: users.click_model.fitted: the model fitted in " in result.output
    assert "but rankers.depth is 12: fit it on logs with lists of at least 12, or set rankers.depth to at most 10" \
        in result.output


def test_too_little_traffic_gives_undefined_checkpoints_not_a_crash(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump({
        "replicates": 2, "workers": 1, "collection": {"n_queries": 20, "candidates": 10},
        "users": {"population": 100}, "traffic": {"days": 1, "queries_per_day": 1, "batch_hours": 24},
        "analysis": {"truth_impressions": 2000},
    }))
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "-o", str(tmp_path / "o"), "-q"])
    assert result.exit_code == 0, result.output
    rows = pd.read_csv(tmp_path / "o" / "replicates.csv")
    ab = rows[(rows["design"] == "ab") & ~side_row_mask(rows)]  # effects, not srm:*
    # about one query a day (Poisson): too few to fill two arms with two users each (a population that small
    # is refused: users.population must give each arm two users)
    assert len(ab) and ab["pvalue"].isna().all()
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["designs"]["ab"]["reciprocal_rank"]["final_day"]["undefined"] == 1.0
    assert summary["designs"]["ab"]["reciprocal_rank"]["final_day"]["power"] == 0.0
    assert "undefined on the last day" in result.output


def test_output_that_is_a_file_and_runs_without_judged_queries_are_refused(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(SMALL))
    (tmp_path / "taken").write_text("x")
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "-o", str(tmp_path / "taken"), "-q"])
    assert result.exit_code == 2 and "output:" in result.output and "not a directory" in result.output
    (tmp_path / "q").write_text("1 0 d1 1\n1 0 d2 0\n")
    (tmp_path / "a").write_text("1 Q0 d1 1 1.0 x\n")
    (tmp_path / "b").write_text("9 Q0 d1 1 1.0 x\n")  # a query nobody judged
    trec = {"type": "trec", "qrels": "q", "runs": {"A": "a", "B": "b"}}
    cfg.write_text(yaml.safe_dump({**SMALL, "collection": trec}))
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg), "-o", str(tmp_path / "o"), "-q"])
    assert result.exit_code == 2
    assert f"{tmp_path / 'b'}: run B shows no document for any query judged" in result.output
