"""Finished points analysed by other code are re-analysed, not reused (review 15, F3).

Before: a resumed sweep reused a point's summary.json whenever its fingerprint and replicates matched, but the
fingerprint's version covers only the replicate stream, so points analysed before an analysis change (e.g. 1301495's
size-refit correction) stayed beside points analysed after it. Now every summary.json carries
``analysis_version`` (simulations.job.analysis_version: a hash of the analysis code's sources), and a point whose
stamp differs is re-analysed from its kept records: no replicate is simulated again.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import simulations.job as job
import simulations.resume_guard as resume_guard
from simulations.sweep import run_sweep
from tests.test_resume_replicates import ran  # noqa: F401  (the fixture: replicates computed here)
from tests.test_sweep import make_sweep


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "ref"
    run_sweep(make_sweep(out, replicates=2), workers=1, writers=0)
    return out


def _summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text())


def test_every_point_is_stamped(swept: Path) -> None:
    for i in range(3):
        assert _summary(swept / "points" / f"point-00{i}")["analysis_version"] == job.analysis_version()


def test_a_point_analysed_by_other_code_is_reanalysed_from_its_records(swept: Path, tmp_path: Path,
                                                                     ran: list[int]) -> None:
    out = tmp_path / "out"
    shutil.copytree(swept, out)
    point = out / "points" / "point-001"
    old = _summary(point)
    # what an older analysis wrote: another stamp and other numbers
    old["analysis_version"] = "0123456789abcdef"
    old["designs"] = {"stale": True}
    (point / "summary.json").write_text(json.dumps(old))
    log: list[str] = []
    result = run_sweep(make_sweep(out, replicates=2), workers=1, writers=0, log=log.append)
    assert result.computed == [1] and ran == []  # re-analysed, nothing re-simulated
    assert any(m.startswith("point 1: re-analysing: its results were analysed by other code (analysis version "
                            "0123456789abcdef") for m in log), log
    ref = swept / "points" / "point-001"
    for name in ("replicates.csv", "curves.csv"):
        assert (point / name).read_bytes() == (ref / name).read_bytes(), name
    got, want = _summary(point), _summary(ref)
    assert got["config"].pop("output") != want["config"].pop("output")
    assert got == want  # the analysis of this code, as the uninterrupted sweep wrote it
    assert (point / job.FINISHED).read_bytes() == (ref / job.FINISHED).read_bytes()
    assert not (point / job.PARTIAL).exists()
    # the same stamp: read back, as before
    assert run_sweep(make_sweep(out, replicates=2), workers=1, writers=0).computed == []


def test_a_point_without_a_stamp_is_reanalysed(swept: Path, tmp_path: Path, ran: list[int]) -> None:
    out = tmp_path / "out"
    shutil.copytree(swept, out)
    point = out / "points" / "point-000"
    old = _summary(point)
    del old["analysis_version"]  # written before the stamp existed
    (point / "summary.json").write_text(json.dumps(old))
    assert run_sweep(make_sweep(out, replicates=2), workers=1, writers=0).computed == [0] and ran == []
    assert _summary(point)["analysis_version"] == job.analysis_version()


def test_the_version_follows_the_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "fake_analysis_pkg"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "stats.py").write_text("X = 1\n")
    (pkg / "cli" / "main.py").write_text("HELP = 'a'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(resume_guard, "_ANALYSIS_PACKAGES", ("fake_analysis_pkg",))
    job.analysis_version.cache_clear()
    try:
        first = job.analysis_version()
        job.analysis_version.cache_clear()
        (pkg / "cli" / "main.py").write_text("HELP = 'b'\n")  # the command-line layer: not the analysis
        assert job.analysis_version() == first
        job.analysis_version.cache_clear()
        (pkg / "stats.py").write_text("X = 2\n")
        assert job.analysis_version() != first
        job.analysis_version.cache_clear()
        (pkg / "sizes.py").write_text("")  # a new module too
        second = job.analysis_version()
        (pkg / "sizes.py").unlink()
        job.analysis_version.cache_clear()
        assert job.analysis_version() != second
    finally:
        monkeypatch.undo()
        sys.modules.pop("fake_analysis_pkg", None)
        job.analysis_version.cache_clear()


def test_every_first_party_package_is_hashed() -> None:
    """Review 17, F1: clickmodels (the truths, the decomposition and the model-based estimators run its code) was
    left out, so a clickmodels fix left the version unchanged and a resumed sweep mixed analyses. Every package of
    the repository (a top-level folder with an __init__.py, tests and benchmarks aside) is hashed, and so are the
    versions of the compiled kernels' libraries."""
    root = Path(job.__file__).resolve().parents[1]
    packages = {p.parent.name for p in root.glob("*/__init__.py")} - {"tests", "benchmarks", "examples"}
    assert packages and packages <= set(resume_guard._ANALYSIS_PACKAGES), packages
    assert {"numba", "llvmlite"} <= set(resume_guard._ANALYSIS_LIBRARIES)
