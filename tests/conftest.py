"""Shared test fixtures.

Reference data lives outside the repository in ``../shared/data`` (see each folder's
README there). Tests that need it use :func:`shared_data` and skip with a clear reason
where it is absent (a user's fresh clone has no ``../shared``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """The shared reference-data folder, or ``None`` when it is not there.

    ``ONLINEEVAL_SHARED_DATA`` overrides the default ``<repo>/../shared/data``.
    """
    env = os.environ.get("ONLINEEVAL_SHARED_DATA")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test when the folder is absent."""
    path = shared_data_dir()
    if path is None:
        pytest.skip("reference data ../shared/data is not present (fresh clone without shared/)")
    return path


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real simulate results folder (three designs, A/A and the null check on; :mod:`html_report_folders`),
    built once per test run: the HTML report's tests (test_html_report.py, test_html_layout.py) read it."""
    from html_report_folders import sim_folder

    return sim_folder(tmp_path_factory)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep folder: three points (B's noise), each point with its own report (:mod:`html_report_folders`),
    built once per test run: the HTML report's tests (test_html_report.py, test_html_layout.py) read it."""
    from html_report_folders import sweep_folder

    return sweep_folder(tmp_path_factory)


@pytest.fixture
def no_gc_collect(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gc.collect`` as a no-op for the test: statsmodels' ``multipletests`` (the Holm references) calls it on every
    call of its Holm method (statsmodels 0.14-0.15), 0.05-0.4 s each in a test process's heap, so the tests that
    check Holm row by row spent 2-3 minutes of the suite in garbage collection. Nothing in those tests depends on
    when garbage is collected."""
    import gc

    monkeypatch.setattr(gc, "collect", lambda *args, **kwargs: 0)
