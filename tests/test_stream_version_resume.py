"""The code's stream version in the resume fingerprint (:data:`simulations.job.STREAM_VERSION`).

A partial file (or a sweep's finished or half-done point) computed by an onlineeval whose numbers for a seed
differ must be recomputed, never mixed with this version's replicates. The partial files below hold *altered* rows
(an estimate no run gives), so a resumed run that kept them would show them: the control cases (same version) show
that they are kept when they should be, so the checks can fail. The fingerprint as computed before the version
was part of it is recomputed here independently (the code of commit dc7c58c) for the files of those versions.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simulations import job
from simulations.config import Config, config_from_mapping
from simulations.sweep import run_sweep, sweep_from_mapping

SMALL: dict[str, Any] = {
    "seed": 5,
    "replicates": 3,
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 40, "candidates": 10},
    "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.8}},
    "users": {"population": 200, "click_model": {"name": "cascade", "preset": "navigational"}},
    "traffic": {"days": 2, "queries_per_day": 200, "batch_hours": 12},
    "designs": [
        {"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
        {"name": "td", "type": "interleaving", "method": "team_draft"},
    ],
    "analysis": {"aa": False, "truth_impressions": 2000},
}

ALTERED = 12345.0  # an estimate no replicate gives


def _legacy_fingerprint(config: Config) -> str:
    """The fingerprint as the versions before STREAM_VERSION computed it (their config_fingerprint, rewritten)."""
    data = config.effective()
    for key in ("output", "workers", "replicates"):
        data.pop(key, None)
    data["input_file_sha256"] = {key: hashlib.sha256(path.read_bytes()).hexdigest()
                                 for key, path in job.input_files(config)}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _altered(rows: pd.DataFrame, index: int) -> list[dict[str, Any]]:
    out = rows[rows["replicate"] == index].to_dict("records")
    for row in out:
        row["estimate"] = ALTERED
    return out


def _write_partial(path: Path, header: dict[str, Any], reference: pd.DataFrame, indices: tuple[int, ...]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(header) + "\n")
        fh.writelines(job.partial_record(i, _altered(reference, i)) for i in indices)


def _header_of_version(config: Config, version: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The header a run of ``config`` writes under stream version ``version``."""
    with monkeypatch.context() as m:
        m.setattr(job, "STREAM_VERSION", version)
        return json.loads(job.partial_header(job.config_fingerprint(config)))


@pytest.fixture(scope="module")
def config() -> Config:
    return config_from_mapping(SMALL)


@pytest.fixture(scope="module")
def reference(config: Config) -> pd.DataFrame:
    """The rows of an uninterrupted run, in memory."""
    return job.simulate(config).rows


def test_fingerprint_covers_the_stream_version(config: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    now = job.config_fingerprint(config)
    assert job.config_fingerprint(config) == now  # a function of the config and the version only
    monkeypatch.setattr(job, "STREAM_VERSION", job.STREAM_VERSION + 1)
    bumped = job.config_fingerprint(config)
    assert bumped != now
    monkeypatch.undo()
    assert job.config_fingerprint(config) == now
    # the versions before it: their fingerprint, different from every versioned one
    legacy = _legacy_fingerprint(config)
    assert job._fingerprint(config, None) == legacy
    assert legacy not in (now, bumped)
    assert job._fingerprint(config, job.STREAM_VERSION) == now
    # and the partial file's header records the version
    header = json.loads(job.partial_header(now))
    assert header == {"fingerprint": now, "format": job.PARTIAL_FORMAT, "stream_version": job.STREAM_VERSION}


def test_partial_of_another_version_is_discarded_not_mixed(
    config: Config, reference: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "res"
    out.mkdir()
    old = job.STREAM_VERSION - 1
    _write_partial(out / job.PARTIAL, _header_of_version(config, old, monkeypatch), reference, (0, 1))
    log: list[str] = []
    result = job.simulate(config, out, log=log.append)
    pd.testing.assert_frame_equal(result.rows, reference)
    assert not (result.rows["estimate"] == ALTERED).any()
    warning = [m for m in log if m.startswith("warning: discarding 2 finished replicate record(s)")]
    assert len(warning) == 1, log
    assert (f"for the same config by an onlineeval whose numbers for a seed differ from this one's (stream version "
            f"{old}, this one {job.STREAM_VERSION}), so they are recomputed rather than mixed") in warning[0]
    assert not any(m.startswith("resuming") for m in log)
    assert not (out / job.PARTIAL).exists()
    assert pd.read_csv(out / "replicates.csv")["estimate"].ne(ALTERED).all()


def test_partial_of_the_same_version_is_resumed(
    config: Config, reference: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: the same altered records under this version are resumed (so the check above can fail)."""
    out = tmp_path / "res"
    out.mkdir()
    _write_partial(out / job.PARTIAL, _header_of_version(config, job.STREAM_VERSION, monkeypatch), reference, (0, 1))
    log: list[str] = []
    result = job.simulate(config, out, log=log.append)
    assert any(m.startswith("resuming: 2 of 3 replicates") for m in log), log
    assert set(result.rows.loc[result.rows["estimate"] == ALTERED, "replicate"]) == {0, 1}
    pd.testing.assert_frame_equal(result.rows[result.rows["replicate"] == 2].reset_index(drop=True),
                                  reference[reference["replicate"] == 2].reset_index(drop=True))


def test_partial_from_before_the_version_is_discarded(
    config: Config, reference: pd.DataFrame, tmp_path: Path
) -> None:
    """A partial file of the versions before STREAM_VERSION (format 2, no version): discarded, named, no crash."""
    out = tmp_path / "res"
    out.mkdir()
    header = {"fingerprint": _legacy_fingerprint(config), "format": job.PARTIAL_FORMAT}
    _write_partial(out / job.PARTIAL, header, reference, (0, 2))
    log: list[str] = []
    result = job.simulate(config, out, log=log.append)
    pd.testing.assert_frame_equal(result.rows, reference)
    warning = [m for m in log if m.startswith("warning: discarding 2 finished replicate record(s)")]
    assert len(warning) == 1, log
    assert "for the same config by an earlier onlineeval, from before the stream version was recorded" in warning[0]
    assert f"(stream version {job.STREAM_VERSION})" in warning[0]


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ({"format": 2, "stream_version": 0, "fingerprint": "0123456789abcdef"},
         "for a different config or different input files (fingerprint 0123456789abcdef) by an onlineeval of "
         "another stream version (0, this one {v})"),
        ({"format": 2, "fingerprint": "0123456789abcdef"},
         "for a different config or different input files (fingerprint 0123456789abcdef) by an onlineeval of "
         "another stream version (not recorded, this one {v})"),
        ({"format": 2, "stream_version": "x", "fingerprint": "0123456789abcdef"},
         "another stream version ('x', this one {v})"),
        ({"format": 2, "stream_version": True, "fingerprint": "0123456789abcdef"},
         "another stream version (True, this one {v})"),
        ({"format": 2, "stream_version": "CURRENT", "fingerprint": "0123456789abcdef"},
         "for a different config or different input files (fingerprint 0123456789abcdef)"),
        ({"format": 1, "fingerprint": "0123456789abcdef"}, "by an older onlineeval"),
        ([1, 2], "for a different config or different input files (fingerprint None)"),
    ],
)
def test_other_headers_are_discarded_with_their_reason(
    config: Config, reference: pd.DataFrame, tmp_path: Path, header: Any, needle: str
) -> None:
    current = isinstance(header, dict) and header.get("stream_version") == "CURRENT"
    if current:  # this version, another config
        header = {**header, "stream_version": job.STREAM_VERSION}
    path = tmp_path / job.PARTIAL
    _write_partial(path, header, reference, (0,))  # type: ignore[arg-type]
    for given in (config, None):  # with or without the config: discarded either way
        log: list[str] = []
        assert job.load_partial(path, job.config_fingerprint(config), log.append, given) == {}
        assert len(log) == 1 and log[0].startswith("warning: discarding 1 finished replicate record(s)"), log
        assert needle.format(v=job.STREAM_VERSION) in log[0]
        if current:
            assert "stream version" not in log[0]


def test_without_the_config_a_changed_version_is_still_named(
    config: Config, reference: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_partial without the config cannot tell whether the config changed too, but names the versions."""
    other = job.STREAM_VERSION + 1  # any version but this one
    path = tmp_path / job.PARTIAL
    _write_partial(path, _header_of_version(config, other, monkeypatch), reference, (0,))
    log: list[str] = []
    assert job.load_partial(path, job.config_fingerprint(config), log.append) == {}
    assert f"another stream version ({other}, this one {job.STREAM_VERSION})" in log[0]
    log.clear()
    assert job.load_partial(path, job.config_fingerprint(config), log.append, config) == {}
    assert f"(stream version {other}, this one {job.STREAM_VERSION}), so they are recomputed rather than mixed" \
        in log[0]


# ------------------------------------------------------------------------------ sweeps
def _sweep(out: Path) -> Any:
    base = {**SMALL, "replicates": 2, "designs": SMALL["designs"][:1]}
    return sweep_from_mapping({"base": base, "points": [{"rankers.B.noise": 0.7}], "output": str(out)})


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "ref"
    run_sweep(_sweep(out), workers=1, writers=0)
    return out


def test_sweep_point_finished_by_another_version_is_recomputed(
    swept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = tmp_path / "kept"
    shutil.copytree(swept, kept)
    assert run_sweep(_sweep(kept), workers=1, writers=0).computed == []  # the control: read back
    again = tmp_path / "again"
    shutil.copytree(swept, again)
    monkeypatch.setattr(job, "STREAM_VERSION", job.STREAM_VERSION + 1)
    assert run_sweep(_sweep(again), workers=1, writers=0).computed == [0]
    summary = json.loads((again / "points" / "point-000" / "summary.json").read_text())
    assert summary["config_fingerprint"] == job.config_fingerprint(_sweep(again).points[0].config)


def test_sweep_partial_of_another_version_is_discarded_not_mixed(
    swept: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "partial"
    shutil.copytree(swept, out)
    folder = out / "points" / "point-000"
    reference = pd.read_csv(folder / "replicates.csv")
    config = _sweep(out).points[0].config.model_copy(update={"output": folder})
    shutil.rmtree(folder)
    folder.mkdir()
    _write_partial(folder / job.PARTIAL, _header_of_version(config, job.STREAM_VERSION - 1, monkeypatch),
                   reference, (0,))
    log: list[str] = []
    assert run_sweep(_sweep(out), workers=1, writers=0, log=log.append).computed == [0]
    assert any(m.startswith("warning: discarding 1 finished replicate record(s)")
               and "numbers for a seed differ from this one's" in m for m in log), log
    assert not any(m.startswith("resuming") for m in log)
    assert (folder / "replicates.csv").read_bytes() == (swept / "points" / "point-000" / "replicates.csv").read_bytes()
