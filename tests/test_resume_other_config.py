"""Another config run into a finished results folder (review 15, F2).

Before: the run deleted the old run's replicates.finished.jsonl.gz before computing anything, and an interrupted run
left the old config's summary.json, report.html and figures beside the new config's partial records. Now the run is
refused with nothing touched (the message names both fingerprints and the keys that differ) unless ``fresh``, which
deletes the old outputs before the new run's first record; a change of the code's stream version alone (the same
config) is recomputed the same way without ``fresh``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import simulations.job as job
from onlineeval.errors import OutputError
from simulations.config import config_from_mapping
from tests.test_sweep import BASE


def _config(**changes: Any):
    data = json.loads(json.dumps(BASE))
    data["replicates"] = 2
    data.update(changes)
    return config_from_mapping(data)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != ".onlineeval.lock"}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "out"
    job.simulate(_config(), out, workers=1)
    return out


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_another_config_is_refused_and_nothing_is_touched(finished: Path, tmp_path: Path) -> None:
    out = _copy(finished, tmp_path / "out")
    before = _snapshot(out)
    assert job.FINISHED in before and "report.html" in before and "summary.json" in before
    other = _config(seed=5)
    with pytest.raises(OutputError) as err:
        job.simulate(other, out, workers=1)
    old_fp = json.loads(before["summary.json"])["config_fingerprint"]
    message = str(err.value)
    assert f"fingerprint {old_fp}; this run's {job.config_fingerprint(other)}" in message
    assert "seed 11 -> 5" in message and "--fresh" in message
    assert _snapshot(out) == before  # the old run's records, summary and report are all there, byte for byte


def test_fresh_removes_the_old_outputs_before_the_first_record(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _copy(finished, tmp_path / "out")
    other = _config(seed=5)
    real = job.run_replicates

    def interrupted(config, world, todo, n_workers, on_done):  # one replicate, then a Ctrl-C
        real(config, world, todo[:1], n_workers, on_done)
        raise KeyboardInterrupt

    monkeypatch.setattr(job, "run_replicates", interrupted)
    log: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        job.simulate(other, out, workers=1, fresh=True, log=log.append)
    left = sorted(p.name for p in out.iterdir() if p.name != ".onlineeval.lock")
    assert left == [job.PARTIAL]  # no summary, report, figures or finished records of the seed-11 run
    lines = (out / job.PARTIAL).read_text().splitlines()
    assert json.loads(lines[0])["fingerprint"] == job.config_fingerprint(other) and len(lines) == 2
    # the resume (no --fresh needed: the folder is the seed-5 run's now) equals a fresh seed-5 run
    monkeypatch.setattr(job, "run_replicates", real)
    resumed = job.simulate(other, out, workers=1)
    ref = job.simulate(other, tmp_path / "ref", workers=1)
    assert resumed.rows.equals(ref.rows)
    assert (out / "replicates.csv").read_bytes() == (tmp_path / "ref" / "replicates.csv").read_bytes()


def test_same_config_of_another_stream_version_is_recomputed_without_fresh(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _copy(finished, tmp_path / "out")
    monkeypatch.setattr(job, "STREAM_VERSION", job.STREAM_VERSION + 1)
    real = job.run_replicates
    ran: list[int] = []

    def counting(config, world, todo, n_workers, on_done):
        ran.extend(todo)
        return real(config, world, todo, n_workers, on_done)

    monkeypatch.setattr(job, "run_replicates", counting)
    log: list[str] = []
    job.simulate(_config(), out, workers=1, log=log.append)
    assert ran == [0, 1]
    assert any(m.startswith("warning: replacing the finished results") and "stream version" in m for m in log), log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config_fingerprint"] == job.config_fingerprint(_config())


def test_the_same_config_is_still_reused(finished: Path, tmp_path: Path) -> None:
    out = _copy(finished, tmp_path / "out")
    log: list[str] = []
    job.simulate(_config(replicates=3), out, workers=1, log=log.append)  # more replicates: not another config
    assert any(m.startswith("resuming: 2 of 3 replicates reused") for m in log), log


@pytest.mark.parametrize("version", ["7", 2.5, True, [1]])
def test_a_recorded_stream_version_that_is_not_an_integer_is_named_not_called_input_files(
    finished: Path, tmp_path: Path, version: Any
) -> None:
    """Review 17: a finished folder whose recorded stream version is not an integer, with the same config keys, was
    taken for 'the same config keys; the contents of its input files differ' (inputs_only, which a sweep recomputes
    as an edited input file): now its own reason, and not inputs_only."""
    out = _copy(finished, tmp_path / "out")
    summary = json.loads((out / "summary.json").read_text())
    summary.update({"stream_version": version, "config_fingerprint": "0" * 16})
    (out / "summary.json").write_text(json.dumps(summary))
    found = job.other_results(out, _config(), job.config_fingerprint(_config()))
    assert found is not None and not found.inputs_only and not found.same_config
    assert found.differences != job.INPUTS_ONLY and "stream version" in found.differences
    assert f"this one {job.STREAM_VERSION}" in found.differences and json.dumps(version) in found.differences
    with pytest.raises(OutputError) as err:  # simulate refuses it (nothing touched) with that reason
        job.simulate(_config(), out, workers=1)
    assert "stream version" in str(err.value) and "input files differ" not in str(err.value)
