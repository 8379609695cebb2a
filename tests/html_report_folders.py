"""The results folders the HTML report's tests read (``tests/test_html_report.py`` without a browser,
``tests/test_html_layout.py`` in headless chromium): a real simulate run (:data:`SIM`: three designs, A/A and the
null check on) and a real three-point sweep (:data:`SWEEP_BASE`, B's noise), each built once per test run and
shared by the pytest-xdist workers; and a small run of the bundled ``configs/counterfactual.yaml``
(:func:`counterfactual_folder`: every counterfactual table and plot, the assumption sweep). The ``sim`` and
``sweep`` fixtures of ``tests/conftest.py`` hand them to the tests, which only read them (they copy a folder to
edit it).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.sweep import run_sweep, sweep_from_mapping

SHARES = {"navigational": 0.6, "informational": 0.4}
SIM: dict[str, Any] = {
    "seed": 5,
    "replicates": 8,
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 200, "candidates": 25},
    "rankers": {"depth": 10, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.7}},
    "users": {"population": 800, "activity": {"sigma": 1.0}, "types": [
        {"name": n, "share": s, "click_model": {"name": "cascade", "preset": n}} for n, s in SHARES.items()]},
    "traffic": {"days": 3, "queries_per_day": 800, "batch_hours": 24},
    "designs": [
        {"name": "ab", "type": "ab", "metric": "reciprocal_rank",
         "analysis": {"multiple": "holm", "cuped": {"pre_days": 2}, "srm": {}}},
        {"name": "team_draft", "type": "interleaving", "method": "team_draft",
         "analysis": {"sequential": "obrien_fleming"}},
        {"name": "balanced", "type": "interleaving", "method": "balanced"},
    ],
    "analysis": {"truth_impressions": 200_000},
}
SWEEP_BASE: dict[str, Any] = {
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
    "analysis": {"truth_impressions": 5000},
}


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Any]) -> Path:
    """``build(folder)`` once per test run, shared by the pytest-xdist workers (their common
    base temp folder, a lock file); the tests only read the folder (they copy it to edit)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder, done = root / f"html_report_{name}", root / f"html_report_{name}.done"
    with open(root / f"html_report_{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder)
            done.touch()
    return folder


def sim_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real simulate results folder (three designs, A/A and the null check on)."""
    return built_once(tmp_path_factory, "sim",
                      lambda out: simulate(config_from_mapping(SIM), output=out, workers=1))  # writes report.html


def sweep_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep folder: three points (B's noise), each point with its own report."""
    grid = {"rankers.B.noise": [0.6, 0.75, 0.9]}
    return built_once(tmp_path_factory, "sweep", lambda out: run_sweep(
        sweep_from_mapping({"base": SWEEP_BASE, "grid": grid, "output": str(out)}), workers=1))


def counterfactual_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real simulate results folder of the bundled configs/counterfactual.yaml, made small (6 replicates of 2
    days, 150 queries, 100 bootstrap resamples, a two-value assumption sweep): its estimators, labels and flags
    are the bundled config's, so its tables are as wide as a user's."""
    import yaml

    m = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "counterfactual.yaml").read_text())
    m.update(replicates=6, workers=1)
    m["collection"]["n_queries"] = 150
    m["users"]["population"] = 800
    m["traffic"].update(days=2, queries_per_day=800)
    (cf,) = [d for d in m["designs"] if d["type"] == "counterfactual"]
    cf["bootstrap"] = 100
    m["analysis"]["truth_impressions"] = 20_000
    m["analysis"]["assumption_sweep"].update(impressions=20_000, values=[0, 1])
    return built_once(tmp_path_factory, "counterfactual",
                      lambda out: simulate(config_from_mapping(m), output=out, workers=1))
