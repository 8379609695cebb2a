"""``onlineeval sweep``: points, validation, backends, resume, outputs.

References: each sweep point equals a standalone :func:`simulations.job.simulate` run of
the same config (byte-identical ``replicates.csv`` and equal summary numbers); the
numbers do not depend on the number of local workers or the chunking (byte-identical
``points.csv``); a resumed sweep equals an uninterrupted one byte for byte.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from onlineeval.errors import ConfigError
from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.sweep import SweepProgress, run_sweep, sweep_from_mapping

BASE: dict[str, Any] = {
    "seed": 11,
    "replicates": 4,
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 60, "candidates": 12},
    "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.8}},
    "users": {"population": 300, "click_model": {"name": "cascade", "preset": "navigational"}},
    "traffic": {"days": 2, "queries_per_day": 300, "batch_hours": 12},
    "designs": [
        {"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
        {"name": "td", "type": "interleaving", "method": "team_draft"},
    ],
    "analysis": {"aa": False, "truth_impressions": 5000},
}

POINTS = [
    {"rankers.B.noise": 0.7},
    {"rankers.B.noise": 0.9, "users.click_model.preset": "informational"},
    {"traffic.queries_per_day": 200},
]


def make_sweep(out: Path, chunk: int | None = None, **extra: Any):
    data = {"base": BASE, "points": POINTS, "output": str(out), **extra}
    if chunk is not None:
        data["chunk"] = chunk
    return sweep_from_mapping(data)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep run in-process (1 worker, chunks of 4 replicates)."""
    out = tmp_path_factory.mktemp("sweep") / "ref"
    run_sweep(make_sweep(out, chunk=4), workers=1)
    return out


def test_outputs(reference: Path) -> None:
    rows = pd.read_csv(reference / "points.csv")
    assert len(rows) == 3 * 2  # points x designs
    assert list(rows["design"]) == ["ab", "td"] * 3
    assert rows.loc[rows["point"] == 1, "users.click_model.preset"].eq("informational").all()
    assert rows.loc[rows["point"] == 0, "rankers.B.noise"].eq(0.7).all()
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["axes"] == ["rankers.B.noise", "users.click_model.preset", "traffic.queries_per_day"]
    assert [p["folder"] for p in summary["points"]] == [f"points/point-00{i}" for i in range(3)]
    assert (reference / "effect.png").stat().st_size > 1000
    for i in range(3):
        folder = reference / "points" / f"point-00{i}"
        assert {"summary.json", "replicates.csv", "curves.csv"} <= {p.name for p in folder.iterdir()}
        assert not (folder / "replicates.partial.jsonl").exists()


def test_point_equals_standalone_simulate(reference: Path, tmp_path: Path) -> None:
    """Point 1 of the sweep is exactly a simulate run of the base config with its overrides."""
    data = json.loads(json.dumps(BASE))
    data["rankers"]["B"]["noise"] = 0.9
    data["users"]["click_model"]["preset"] = "informational"
    alone = simulate(config_from_mapping(data), tmp_path / "alone", workers=1)
    point = reference / "points" / "point-001"
    assert (point / "replicates.csv").read_bytes() == (tmp_path / "alone" / "replicates.csv").read_bytes()
    assert (point / "curves.csv").read_bytes() == (tmp_path / "alone" / "curves.csv").read_bytes()
    rows = pd.read_csv(reference / "points.csv").set_index(["point", "design"])
    td = alone.summary["designs"]["td"]["delta_ab"]
    assert rows.loc[(1, "td"), "true_effect"] == pytest.approx(td["true_effect"], rel=1e-15)
    assert rows.loc[(1, "td"), "mean_estimate"] == pytest.approx(td["final_day"]["mean_estimate"], rel=1e-15)
    assert rows.loc[(1, "ab"), "offline_delta"] == pytest.approx(alone.summary["offline"]["delta"]["weighted"],
                                                               rel=1e-15)


def test_two_workers_and_other_chunks_identical(reference: Path, tmp_path: Path) -> None:
    result = run_sweep(make_sweep(tmp_path / "w2", chunk=1), workers=2)
    assert result.computed == [0, 1, 2]
    assert (tmp_path / "w2" / "points.csv").read_bytes() == (reference / "points.csv").read_bytes()
    for i in range(3):
        name = f"points/point-00{i}/replicates.csv"
        assert (tmp_path / "w2" / name).read_bytes() == (reference / name).read_bytes()


def test_resume_recomputes_only_the_deleted_point(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(reference, out)
    shutil.rmtree(out / "points" / "point-002")
    kept = (out / "points" / "point-000" / "summary.json").stat().st_mtime_ns
    log: list[str] = []
    result = run_sweep(make_sweep(out, chunk=3), workers=1, log=log.append)
    assert result.computed == [2]
    assert (out / "points" / "point-000" / "summary.json").stat().st_mtime_ns == kept
    assert (out / "points.csv").read_bytes() == (reference / "points.csv").read_bytes()
    assert any("point 2" in m for m in log) and not any("point 0" in m for m in log)


def test_resume_inside_a_point_from_its_partial_file(reference: Path, tmp_path: Path) -> None:
    """A point interrupted after some replicates keeps them (the simulate partial file)."""
    from simulations.job import _PARTIAL_FORMAT, PARTIAL, _record, config_fingerprint

    out = tmp_path / "partial"
    shutil.copytree(reference, out)
    folder = out / "points" / "point-000"
    rows = pd.read_csv(folder / "replicates.csv")
    sweep = make_sweep(out)
    config = sweep.points[0].config.model_copy(update={"output": folder})
    shutil.rmtree(folder)
    folder.mkdir()
    from simulations.job import _prepare
    from simulations.runner import replicate_seeds, run_replicate

    world, users, _ = _prepare(config, lambda _m: None)
    seqs = replicate_seeds(config.seed, config.replicates)
    with open(folder / PARTIAL, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"fingerprint": config_fingerprint(config), "format": _PARTIAL_FORMAT}) + "\n")
        fh.writelines(_record(i, run_replicate(config, world, users, seqs[i], i)) for i in (0, 2))
    log: list[str] = []
    result = run_sweep(make_sweep(out), workers=1, log=log.append)
    assert result.computed == [0]
    assert (out / "points.csv").read_bytes() == (reference / "points.csv").read_bytes()
    assert len(pd.read_csv(folder / "replicates.csv")) == len(rows)
    assert any(m.startswith("resuming: point 0: 2 of 4 replicates") for m in log)


def test_grid_is_every_combination(tmp_path: Path) -> None:
    sweep = sweep_from_mapping({"base": BASE, "output": str(tmp_path),
                                "grid": {"rankers.B.noise": [0.7, 0.8, 0.9],
                                         "users.click_model.preset": ["navigational", "informational"]}})
    got = [(p.overrides["rankers.B.noise"], p.overrides["users.click_model.preset"]) for p in sweep.points]
    assert got == [(n, c) for n in (0.7, 0.8, 0.9) for c in ("navigational", "informational")]
    assert [p.config.rankers.B.noise for p in sweep.points] == [0.7, 0.7, 0.8, 0.8, 0.9, 0.9]
    assert not tmp_path.joinpath("points").exists()  # validating runs nothing


@pytest.mark.parametrize(
    ("extra", "key_path", "needles"),
    [
        ({"grid": {"rankers.B.noise": [0.8, -0.5]}}, ("grid", "rankers.B.noise"),
         ["rankers.B.noise = -0.5", "makes rankers.B.noise invalid", "point 1"]),
        ({"points": [{"rankers.B.noise": 0.8}, {"users.click_model.preset": "nosuch"}]},
         ("points", 1, "users.click_model.preset"), ["'nosuch'", "users.click_model", "point 1"]),
        ({"grid": {"traffic.queries_per_day": [100, "many"]}}, ("grid", "traffic.queries_per_day"),
         ["traffic.queries_per_day = 'many'", "makes traffic.queries_per_day invalid"]),
        ({"grid": {"rankers.C.noise": [0.5]}}, ("grid", "rankers.C.noise"), ["rankers.C.noise = 0.5", "rankers.C"]),
        ({"grid": {"designs[5].share_b": [0.3]}}, ("grid", "designs[5].share_b"),
         ["designs[5].share_b = 0.3", "designs[5] is not a key"]),
        ({"grid": {"rankers..B": [0.3]}}, ("grid", "rankers..B"), ["not a key path"]),
        ({"grid": {"rankers.B.noise": []}}, ("grid", "rankers.B.noise"), ["non-empty list"]),
        ({"grid": {"rankers.B.noise": [0.8]}, "points": [{"seed": 1}]}, ("grid",), ["exactly one"]),
        ({"grid": {"rankers.B.noise": [0.8]}, "chunk": 0}, ("chunk",), [">= 1"]),
        ({"grid": {"rankers.B.noise": [0.8]}, "executor": {"type": "dask", "adress": "x"}},
         ("executor", "adress"), ["allowed keys"]),
        ({"grid": {"rankers.B.noise": [0.8]}, "plot_x": "seed"}, ("plot_x",), ["not an axis"]),
    ],
)
def test_point_validation_names_axis_value_and_key_path(
    tmp_path: Path, extra: dict[str, Any], key_path: tuple[Any, ...], needles: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": BASE, "output": str(tmp_path / "out"), **extra})
    assert info.value.key_path == key_path
    for needle in needles:
        assert needle in info.value.message, info.value.message
    assert not (tmp_path / "out").exists()


def test_cli_validates_every_point_before_running(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(json.dumps({"base": BASE, "output": str(tmp_path / "out"),
                               "grid": {"rankers.B.noise": [0.8, 0.9, 7.0e9, "x"]}}))
    res = CliRunner().invoke(app, ["sweep", "--config", str(cfg), "--quiet"])
    assert res.exit_code == 2
    assert "grid.rankers.B.noise: rankers.B.noise = 'x'" in res.output
    assert not (tmp_path / "out").exists()


def test_progress_lines() -> None:
    now = [0.0]
    stream = io.StringIO()
    p = SweepProgress(points=4, replicates=40, stream=stream, every=5.0, clock=lambda: now[0])
    p.start(points_done=1, replicates_done=10)
    now[0] = 10.0
    p.add(replicates=10, points=1)  # the first task: starts the rate's clock (its 10 s include the start-up)
    now[0] = 11.0
    p.add(replicates=1)  # within 5 s of the last line: not shown
    now[0] = 20.0
    p.add(replicates=4)  # 5 replicates in the 10 s since the first task: 15 left -> ETA 30 s (from the start: 20 s)
    now[0] = 30.0
    p.add(replicates=15, points=2)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "sweep: points 1/4, replicates 10/40, 0s elapsed, ETA unknown",
        "sweep: points 2/4, replicates 20/40, 10s elapsed, ETA unknown",
        "sweep: points 2/4, replicates 25/40, 20s elapsed, ETA 30s",
        "sweep: points 4/4, replicates 40/40, 30s elapsed, ETA done",
    ]


def test_shrinkage_study_in_the_outputs(reference: Path) -> None:
    """summary.json carries the study; its slope is statsmodels' OLS of the points.csv
    columns (exact A/B truths); points.parquet holds the same table as points.csv."""
    import statsmodels.api as sm
    rows = pd.read_csv(reference / "points.csv")
    parquet = pd.read_parquet(reference / "points.parquet")
    pd.testing.assert_frame_equal(parquet.astype(object).where(parquet.notna(), None),
                                  rows.astype(object).where(rows.notna(), None))
    study = json.loads((reference / "summary.json").read_text())["shrinkage"]
    assert study["by"] == [] and [g["label"] for g in study["groups"]] == ["all points"]
    rel = {r["design"] + "/" + r["metric"]: r for r in study["groups"][0]["relations"]}
    assert set(rel) == {"ab/reciprocal_rank", "ab/clicks_per_query", "ab/abandonment", "td/delta_ab"}
    ab = rows[rows["design"] == "ab"].drop_duplicates(["offline_delta", "online_improvement"])
    ols = sm.OLS(ab["online_improvement"].to_numpy(), ab[["offline_delta"]].to_numpy()).fit()
    fit = rel["ab/reciprocal_rank"]["through_origin"]
    assert fit["slope"] == pytest.approx(ols.params[0], rel=1e-9)
    assert fit["slope_ci"] == pytest.approx(list(ols.conf_int()[0]), rel=1e-7)
    assert rows["predicted_online"].to_numpy() == pytest.approx(
        [rel[f"{d}/{m}"]["through_origin"]["slope"] * x for d, m, x in
         zip(rows["design"], rows["metric"], rows["offline_delta"])], rel=1e-12)
    # abandonment is "lower is better": its online values are sign-flipped
    assert rel["ab/abandonment"]["improvement_sign"] == -1
    assert rel["td/delta_ab"]["truth"] == "exact"  # two-ranker team-draft (tests/test_truth_interleaving_exact.py)
    assert {m["design"] for m in study["groups"][0]["mde"]} == {"ab", "td"}
    for name in ("shrinkage.png", "mde.png"):
        assert (reference / name).stat().st_size > 1000


def test_truth_is_a_task_not_client_work(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client builds worlds only; each point's truth runs once, as an executor task."""
    from simulations import executors, job

    def no_truth_here(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the sweep's client computed a truth")

    calls: list[int] = []
    real = executors.run_truth

    def counted(config: Any, world: Any) -> Any:
        calls.append(1)
        return real(config, world)

    monkeypatch.setattr(job, "compute_truth", no_truth_here)
    monkeypatch.setattr(executors, "run_truth", counted)
    out = tmp_path / "t"
    run_sweep(sweep_from_mapping({"base": BASE, "points": POINTS[::2], "replicates": 1, "output": str(out)}),
              workers=1)
    assert len(calls) == 2
    # the same truth as the reference's (whose replicates differ in number, not in truth)
    got = pd.read_csv(out / "points.csv").set_index(["point", "design"])
    ref = pd.read_csv(reference / "points.csv").set_index(["point", "design"])
    assert got.loc[(1, "td"), "true_effect"] == ref.loc[(2, "td"), "true_effect"]
    assert got.loc[(0, "ab"), "true_effect"] == ref.loc[(0, "ab"), "true_effect"]


def test_cli_prints_relation_sign_agreement_and_mde(reference: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    out = tmp_path / "done"
    shutil.copytree(reference, out)  # every point finished: the CLI reads them back
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(json.dumps({"base": BASE, "points": POINTS, "output": str(out)}))
    res = CliRunner().invoke(app, ["sweep", "--config", str(cfg), "--quiet"])
    assert res.exit_code == 0, res.output
    for needle in ("shrinkage: offline nDCG@10 delta -> true online effect", "predicts an online effect of",
                   "sign: the true online effect disagrees", "Kendall tau", "MDE: smallest offline nDCG@10 gain",
                   "3 points (0 computed, 3 finished before)"):
        assert needle in res.output, res.output
    assert (out / "points.csv").read_bytes() == (reference / "points.csv").read_bytes()


def test_shrinkage_by_must_name_axes(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": BASE, "output": str(tmp_path), "grid": {"rankers.B.noise": [0.8]},
                            "shrinkage_by": ["users.click_model.preset"]})
    assert info.value.key_path == ("shrinkage_by",) and "axes: rankers.B.noise" in info.value.message
    sweep = sweep_from_mapping({"base": BASE, "output": str(tmp_path), "shrinkage_by": "users.click_model.preset",
                                "grid": {"rankers.B.noise": [0.8], "users.click_model.preset": ["navigational"]}})
    assert sweep.shrinkage_by == ["users.click_model.preset"]


def test_progress_bars_on_a_terminal() -> None:
    """On a terminal the progress is rich's live bars (points and replicates, elapsed, ETA),
    stopped when the sweep ends (the cursor is shown again)."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    now = [0.0]
    stream = Terminal()
    p = SweepProgress(points=2, replicates=40, stream=stream, clock=lambda: now[0])
    p.start(points_done=0, replicates_done=0)
    now[0] = 10.0
    p.add(replicates=10)  # the first task starts the rate's clock
    assert p._bars is not None
    bars = p._bars
    assert bars.tasks[1].fields["eta"] == "ETA unknown"
    now[0] = 20.0
    p.add(replicates=10)
    assert [t.completed for t in bars.tasks] == [0, 20]
    assert bars.tasks[1].fields["eta"] == "ETA 20s"  # 10 replicates in the 10 s since the first task, 20 left
    now[0] = 40.0
    p.add(replicates=20, points=2)
    assert p._bars is None and not bars.live.is_started
    text = stream.getvalue()
    assert "sweep points" in text and "40/40" in text and "ETA done" in text
    assert "sweep: points" not in text  # no plain lines on a terminal
    p.close()  # idempotent


def test_two_points_of_one_simulation_are_refused(tmp_path: Path) -> None:
    """Two points with the same fingerprint (the same config twice) are refused before anything runs, naming both
    (run_sweep's per-point plan, simulations.sweep._point_plan); a different value is not."""
    sweep = sweep_from_mapping({"base": BASE, "points": [POINTS[0], dict(POINTS[0])], "output": str(tmp_path / "s")})
    with pytest.raises(ConfigError, match="points 0 and 1 are the same simulation"):
        run_sweep(sweep, workers=1)
    for partial in (tmp_path / "s").rglob("replicates.partial.jsonl"):  # no replicate ran: headers only
        assert len(partial.read_text(encoding="utf-8").splitlines()) <= 1, partial
    assert not list((tmp_path / "s").rglob("summary.json"))
