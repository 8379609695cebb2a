"""A Dask worker imports the task code, including what the tasks import lazily, when the
executor starts (:func:`simulations.executors.import_task_modules`): the first tasks of a
sweep then run as fast as in a local worker forked from the client.

Checked in a fresh interpreter (what a Dask worker is): after ``import_task_modules()``,
the ground truth and a chunk of replicates of every example config import no module of
the package, the click models, scipy or pandas; without it they do (so the check can
fail when a new lazy import appears that TASK_MODULES does not cover).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from simulations.config import load_config
from simulations.runner import world_seed
from simulations.world import build_world

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ["ab.yaml", "interleaving.yaml", "multileaving.yaml", "counterfactual.yaml", "methods.yaml", "sweep.yaml"]
WATCHED = ("onlineeval", "simulations", "clickmodels", "scipy", "pandas")

CHILD = """
import json, pickle, sys
import simulations.executors as ex
if sys.argv[2] == "warm":
    ex.import_task_modules()
seen = set(sys.modules)
new = {}
for name, config, world in pickle.loads(open(sys.argv[1], "rb").read()):
    before = set(sys.modules)
    ex.run_task(config, world, (), ex.TRUTH)
    ex.run_task(config, world, (0, 1))
    new[name] = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in %r)
print(json.dumps(new))
""" % (WATCHED,)


def _small(name: str) -> object:
    """The example config, small enough for a test (the same designs and click models)."""
    if name == "sweep.yaml":  # a sweep: its base config with the sweep's designs
        from simulations.sweep import load_sweep

        config = load_sweep(REPO / "configs" / name).points[0].config
        return config.model_copy(update={"replicates": 2})
    overrides = {"replicates": 2, "users.population": 300, "traffic.days": 1, "traffic.queries_per_day": 60,
                 "analysis.truth_impressions": 2000}
    return load_config(REPO / "configs" / name, overrides)


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    items = []
    for name in CONFIGS:
        config = _small(name)
        items.append((name, config, build_world(config, world_seed(config.seed))))
    path = tmp_path_factory.mktemp("worlds") / "worlds.pkl"
    path.write_bytes(pickle.dumps(items))
    return path


def _new_modules(path: Path, mode: str) -> dict[str, list[str]]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], cwd=REPO, capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_tasks_import_nothing_after_import_task_modules(worlds: Path) -> None:
    new = _new_modules(worlds, "warm")
    assert set(new) == set(CONFIGS)
    assert new == {name: [] for name in CONFIGS}


def test_without_them_the_first_task_imports_scipy_and_pandas(worlds: Path) -> None:
    new = _new_modules(worlds, "cold")
    first = new[CONFIGS[0]]
    assert {m.split(".")[0] for m in first} >= {"scipy", "pandas", "clickmodels", "onlineeval"}
