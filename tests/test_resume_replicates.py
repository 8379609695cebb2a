"""A finished run (simulate, or a sweep's point) run again with another number of replicates reuses its replicates.

Replicate ``r`` is seeded by ``SeedSequence(seed).spawn(R)[r]``, the same child whatever ``R``, so the replicates
of an R-replicate run are the first R of an R'-replicate run of the same config and inputs. References: a run with
R = 3 then R = 5 into the same folder gives byte for byte the files of a fresh R = 5 run, and computes exactly
replicates 3 and 4 (counted at ``run_replicate``); fewer replicates reuse the first R' (compute none) and keep the
others for later; another config key, an edited input file or ``fresh`` reuse nothing (every replicate counted).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import simulations.executors as executors
import simulations.runner as runner
from onlineeval.errors import OutputError
from simulations.config import config_from_mapping
from simulations.job import FINISHED, PARTIAL, replicate_ranges, simulate
from simulations.sweep import run_sweep
from tests.test_sweep import BASE, make_sweep


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The replicate indices that ``run_replicate`` computed in this process (simulate and the sweep's
    in-process executor both call it)."""
    calls: list[int] = []
    real = runner.run_replicate

    def counting(config: Any, world: Any, users: Any, seq: Any, index: int) -> Any:
        calls.append(index)
        return real(config, world, users, seq, index)

    monkeypatch.setattr(runner, "run_replicate", counting)
    monkeypatch.setattr(executors, "run_replicate", counting)
    return calls


def _config(replicates: int, **changes: Any):
    data = json.loads(json.dumps(BASE))
    data["replicates"] = replicates
    for key, value in changes.items():
        data[key] = value
    return config_from_mapping(data)


def _files(out: Path) -> dict[str, str]:
    summary = json.loads((out / "summary.json").read_text())
    for key in ("output", "workers"):  # the folder's own path; workers never change a number
        summary["config"].pop(key, None)
    return {"replicates.csv": (out / "replicates.csv").read_text(), "curves.csv": (out / "curves.csv").read_text(),
            "summary.json": json.dumps(summary, sort_keys=True)}


@pytest.fixture(scope="module")
def fresh5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fresh5") / "out"
    simulate(_config(5), out, workers=1)
    return out


def test_replicate_ranges() -> None:
    assert replicate_ranges([5, 0, 2, 1]) == "0-2, 5"
    assert replicate_ranges([3]) == "3" and replicate_ranges([]) == ""
    assert replicate_ranges(range(4, 8)) == "4-7"


def test_more_replicates_compute_only_the_new_ones(tmp_path: Path, fresh5: Path, ran: list[int]) -> None:
    out = tmp_path / "out"
    simulate(_config(3), out, workers=1)
    assert sorted(ran) == [0, 1, 2]
    assert (out / FINISHED).is_file() and not (out / PARTIAL).exists()
    ran.clear()
    log: list[str] = []
    simulate(_config(5), out, workers=1, log=log.append)
    assert sorted(ran) == [3, 4]
    assert _files(out) == _files(fresh5)
    assert f"resuming: 3 of 5 replicates reused from the finished run in {out / FINISHED} (replicate(s) 0-2); " \
           "computing 2" in log
    # the same again: nothing to compute, the same files
    ran.clear()
    simulate(_config(5), out, workers=1)
    assert ran == [] and _files(out) == _files(fresh5)


def test_fewer_replicates_reuse_the_first_ones_and_keep_the_rest(tmp_path: Path, fresh5: Path,
                                                                 ran: list[int]) -> None:
    fresh3 = tmp_path / "fresh3"
    simulate(_config(3), fresh3, workers=1)
    out = tmp_path / "out"
    shutil.copytree(fresh5, out)
    ran.clear()
    log: list[str] = []
    simulate(_config(3), out, workers=1, log=log.append)
    assert ran == []
    assert _files(out) == _files(fresh3)
    assert any("3 of 3 replicates reused" in m and "computing 0; 2 more kept for a larger number" in m for m in log)
    simulate(_config(5), out, workers=1)  # replicates 3 and 4 were kept in the finished file
    assert ran == [] and _files(out) == _files(fresh5)


def test_another_key_or_fresh_reuses_nothing(tmp_path: Path, ran: list[int]) -> None:
    out = tmp_path / "out"
    simulate(_config(3), out, workers=1)
    other = json.loads(json.dumps(BASE["rankers"]))
    other["B"]["noise"] = 0.7
    before = _files(out)
    ran.clear()
    # another config into a finished folder is refused (review 15, F2), nothing touched; --fresh replaces it
    with pytest.raises(OutputError, match=r"holds the finished results of another config .*rankers\.B\.noise 0\.8 "
                       r"-> 0\.7\. Nothing was changed\. Run with --fresh"):
        simulate(_config(5, rankers=other), out, workers=1)
    assert ran == [] and _files(out) == before
    log: list[str] = []
    simulate(_config(5, rankers=other), out, workers=1, fresh=True, log=log.append)
    assert sorted(ran) == [0, 1, 2, 3, 4]
    assert not any(m.startswith("resuming:") for m in log)
    ref = tmp_path / "ref"
    simulate(_config(5, rankers=other), ref, workers=1)
    assert _files(out) == _files(ref)
    ran.clear()
    simulate(_config(5, rankers=other), out, workers=1, fresh=True)
    assert sorted(ran) == [0, 1, 2, 3, 4] and _files(out) == _files(ref)
    ran.clear()
    with pytest.raises(OutputError, match=r"seed 11 -> 12"):  # the seed is part of the fingerprint too
        simulate(_config(5, seed=12), out, workers=1)
    simulate(_config(5, seed=12), out, workers=1, fresh=True)
    assert sorted(ran) == [0, 1, 2, 3, 4]


def _trec(folder: Path, shift: int) -> dict[str, Any]:
    qrels, run_a, run_b = folder / "qrels.txt", folder / "a.run", folder / "b.run"
    qrels.write_text("".join(f"q{q} 0 d{d} {int(d % 3 == 0) + int(d == q % 7)}\n" for q in range(30) for d in range(8)))
    run_a.write_text("".join(f"q{q} Q0 d{d} {d + 1} {10 - d} A\n" for q in range(30) for d in range(8)))
    run_b.write_text("".join(f"q{q} Q0 d{(d + shift) % 8} {d + 1} {10 - d} B\n" for q in range(30) for d in range(8)))
    return {"type": "trec", "qrels": str(qrels), "runs": {"A": str(run_a), "B": str(run_b)}}


def test_an_edited_input_file_reuses_nothing(tmp_path: Path, ran: list[int]) -> None:
    files = tmp_path / "files"
    files.mkdir()
    coll = _trec(files, 3)
    out = tmp_path / "out"
    simulate(_config(3, collection=coll), out, workers=1)
    _trec(files, 5)  # the same config, B's run file changed
    ran.clear()
    with pytest.raises(OutputError, match="the same config keys; the contents of its input files differ"):
        simulate(_config(5, collection=coll), out, workers=1)
    assert ran == []
    simulate(_config(5, collection=coll), out, workers=1, fresh=True)
    assert sorted(ran) == [0, 1, 2, 3, 4]
    ref = tmp_path / "ref"
    simulate(_config(5, collection=coll), ref, workers=1)
    assert _files(out) == _files(ref)


def test_cli_says_what_was_reused_when_quiet(tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    data = json.loads(json.dumps(BASE))
    config.write_text(json.dumps(data))  # JSON is YAML
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "onlineeval.cli", "simulate", "--config", str(config), "--output", str(out),
           "--quiet", "--replicates"]
    first = subprocess.run([*cmd, "2"], capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([*cmd, "3"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip() == (f"resuming: 2 of 3 replicates reused from the finished run in {out / FINISHED} "
                                    "(replicate(s) 0-1); computing 1")


# ------------------------------------------------------------------------------ sweeps
def _sweep_files(out: Path) -> dict[str, Any]:
    got: dict[str, Any] = {"points.csv": (out / "points.csv").read_text()}
    for i in range(3):
        got[i] = _files(out / "points" / f"point-00{i}")
    got["shrinkage"] = json.loads((out / "summary.json").read_text())["shrinkage"]
    return got


def test_sweep_with_more_replicates_computes_only_the_new_ones(tmp_path: Path, ran: list[int]) -> None:
    ref = tmp_path / "ref"
    run_sweep(make_sweep(ref, replicates=5), workers=1)
    out = tmp_path / "out"
    ran.clear()
    run_sweep(make_sweep(out, replicates=3), workers=1)
    assert Counter(ran) == {0: 3, 1: 3, 2: 3}
    ran.clear()
    log: list[str] = []
    result = run_sweep(make_sweep(out, replicates=5, chunk=1), workers=1, log=log.append)
    assert Counter(ran) == {3: 3, 4: 3}  # 2 new replicates per point
    assert result.computed == [0, 1, 2] and result.replicates_reused == 9
    assert _sweep_files(out) == _sweep_files(ref)
    for i in range(3):
        folder = out / "points" / f"point-00{i}"
        assert (f"resuming: point {i}: 3 of 5 replicates reused from the finished run in {folder / FINISHED} "
                "(replicate(s) 0-2); computing 2") in log
        assert (folder / FINISHED).is_file() and not (folder / PARTIAL).exists()
    # fewer: nothing computed, the first 3 reused (equal to the 3-replicate sweep), 3 and 4 kept for later
    ref3 = tmp_path / "ref3"
    run_sweep(make_sweep(ref3, replicates=3), workers=1)
    ran.clear()
    run_sweep(make_sweep(out, replicates=3), workers=1)
    assert ran == [] and _sweep_files(out) == _sweep_files(ref3)
    run_sweep(make_sweep(out, replicates=5), workers=1)
    assert ran == [] and _sweep_files(out) == _sweep_files(ref)


def test_sweep_point_changed_otherwise_reuses_nothing(tmp_path: Path, ran: list[int]) -> None:
    out = tmp_path / "out"
    run_sweep(make_sweep(out, replicates=3), workers=1)
    changed = make_sweep(out, replicates=5, seed=12)  # every point's fingerprint changes
    ran.clear()
    with pytest.raises(OutputError, match=r"point 0 \(and 2 more point\(s\): 1, 2\) holds the finished results of "
                       r"another config .*seed 11 -> 12"):
        run_sweep(changed, workers=1)
    assert ran == []
    run_sweep(changed, workers=1, fresh=True)
    assert Counter(ran) == {i: 3 for i in range(5)}
    ref = tmp_path / "ref"
    run_sweep(make_sweep(ref, replicates=5, seed=12), workers=1)
    assert _sweep_files(out) == _sweep_files(ref)
    ran.clear()
    run_sweep(make_sweep(out, replicates=6, seed=12), workers=1, fresh=True)
    assert Counter(ran) == {i: 3 for i in range(6)}


def test_sweep_cli_says_what_was_reused(tmp_path: Path) -> None:
    config = tmp_path / "sweep.json"
    config.write_text(json.dumps({"base": BASE, "points": [{"rankers.B.noise": 0.7}], "output": str(tmp_path / "out")}))
    cmd = [sys.executable, "-m", "onlineeval.cli", "sweep", "--config", str(config), "--quiet", "--writers", "0",
           "--set"]
    first = subprocess.run([*cmd, "replicates=2"], capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([*cmd, "replicates=3"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    folder = tmp_path / "out" / "points" / "point-000"
    assert again.stderr.strip() == (f"resuming: point 0: 2 of 3 replicates reused from the finished run in "
                                    f"{folder / FINISHED} (replicate(s) 0-1); computing 1")
    assert "1 points (1 computed, 2 of their replicates reused, 0 finished before)" in again.stdout
