"""The stages of ``onlineeval simulate`` on stderr (review 12, finding 1): the ground truth's Monte Carlo with its
size, knob and progress, a note when numba's cache is cold, the replicates, the analysis and the results folder,
in that order, nothing of it with ``--quiet``; the Monte Carlo on workers gives the same truths as in one process;
an interrupted run says how many replicates it kept and that the same command resumes (finding 10)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onlineeval.cli.simulate import _Stages
from simulations.sweep_progress import SweepProgress

# td without prefix credit: a Monte Carlo truth (with it, two-ranker team-draft's truth is exact and only its null
# user runs a Monte Carlo: tests/test_truth_interleaving_exact.py)
CONFIG = """
seed: 7
replicates: {replicates}
workers: {workers}
collection: {{type: synthetic, n_queries: 40, candidates: 10}}
rankers: {{depth: 5, A: {{noise: 1.0}}, B: {{noise: 0.8}}}}
users: {{population: 300, click_model: {{name: cascade, preset: informational}}}}
traffic: {{days: 2, queries_per_day: {qpd}, batch_hours: 12}}
designs:
  - {{name: ab, type: ab, metric: reciprocal_rank}}
  - {{name: td, type: interleaving, method: team_draft, options: {{prefix_credit: false}}}}
analysis: {{aa: false, truth_impressions: {truth}}}
"""


class _Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def _stages(quiet: bool = False, cold: bool = False) -> tuple[_Stages, io.StringIO, _Clock]:
    stream, clock = io.StringIO(), _Clock()
    return _Stages(Path("out"), 4, 1000, workers=2, quiet=quiet, cold=cold, stream=stream, clock=clock), stream, clock


def _drive(stages: _Stages, clock: _Clock) -> None:
    stages.truth(0, 2000, "td")
    clock.now += 6
    stages.truth(1000, 2000, "td")
    clock.now += 6
    stages.truth(2000, 2000, "td (null user)")
    stages.replicates(0, 4)
    clock.now += 10
    stages.replicates(4, 4)
    clock.now += 3
    stages.finished()


def test_one_monte_carlo_run_is_said_in_the_singular() -> None:
    """A run whose only Monte Carlo is one design's null user (e.g. a probabilistic design's, or a list too long
    for the exact null)."""
    stages, stream, clock = _stages()
    stages.truth(0, 1000, "td (null user)")
    clock.now += 1
    stages.truth(1000, 1000, "td (null user)")
    assert stream.getvalue().splitlines()[0].startswith(
        "ground truth: 1 Monte Carlo run (the interleaving designs' preferences and null users where not "
        "exact) x 1,000 impressions")


def test_stage_lines_in_order_with_sizes_knob_and_times() -> None:
    stages, stream, clock = _stages(cold=True)
    _drive(stages, clock)
    assert stream.getvalue().splitlines() == [
        "compiling the simulator's kernels as they are first used (first run on this machine; cached afterwards; "
        "about 10-30 s of CPU)",
        "ground truth: 2 Monte Carlo runs (the interleaving designs' preferences and null users where not "
        "exact) x 1,000 impressions (analysis.truth_impressions) on 2 worker(s) ...",
        "ground truth [------------------------------] 0/2 runs, td  0s elapsed, ETA unknown",
        "ground truth [###############---------------] 1/2 runs, td  6s elapsed, ETA unknown",
        "ground truth [##############################] 2/2 runs  12s elapsed, ETA done",
        "ground truth: done in 12s",
        "the first replicates compile the designs' and statistics' kernels (first run on this machine; cached "
        "afterwards)",
        "replicates [------------------------------] 0/4  0s elapsed, ETA unknown",
        "replicates [##############################] 4/4  10s elapsed, ETA done",
        "analysing 4 replicates and writing the results folder out (summary.json, CSVs, plots, report.html) ...",
        "done in 25s (ground truth 12s, replicates 10s, analysis and results 3s)",
    ]


def test_warm_cache_no_compiling_line_and_quiet_prints_nothing() -> None:
    stages, stream, clock = _stages(cold=False)
    _drive(stages, clock)
    assert "compiling" not in stream.getvalue() and "ground truth: done in 12s" in stream.getvalue()
    stages, stream, clock = _stages(quiet=True, cold=True)
    _drive(stages, clock)
    assert stream.getvalue() == ""
    assert stages.done == 4  # counted for the message of an interruption all the same


def test_designs_of_many_looks_are_announced_before_their_long_analysis() -> None:
    """simulations.sequential.many_looks: the designs with a sequential rule at MANY_LOOKS scheduled looks or more
    (every batch, a number of looks, a list of days), told on the line after "analysing"; none for fewer looks."""
    from simulations.config import config_from_mapping
    from simulations.sequential import MANY_LOOKS, many_looks
    from simulations.yaml_safe import load_yaml_text

    base = load_yaml_text(CONFIG.format(replicates=2, workers=1, qpd=100, truth=1000), "test")
    base["traffic"] |= {"days": 30, "batch_hours": 1}
    base["designs"] = [
        {"name": "hourly", "type": "ab", "analysis": {"sequential": "obrien_fleming", "monitoring": "batch"}},
        {"name": "daily", "type": "ab", "analysis": {"sequential": "msprt"}},
        {"name": "fewer", "type": "interleaving", "method": "team_draft",
         "analysis": {"sequential": "msprt", "monitoring": "batch", "looks": MANY_LOOKS - 1}},
        {"name": "enough", "type": "interleaving", "method": "team_draft",
         "analysis": {"sequential": "pocock", "monitoring": "batch", "looks": MANY_LOOKS}},
        {"name": "fixed", "type": "ab", "analysis": {"monitoring": "batch"}},
    ]
    assert many_looks(config_from_mapping(base)) == [("hourly", 720), ("enough", MANY_LOOKS)]
    stream, clock = io.StringIO(), _Clock()
    stages = _Stages(Path("out"), 4, 1000, stream=stream, clock=clock, many_looks=[("hourly", 720), ("b", 4320)])
    stages.replicates(4, 4)
    lines = stream.getvalue().splitlines()
    assert lines[-2].startswith("analysing 4 replicates")
    assert lines[-1].startswith("  the sequential analysis of hourly (720 looks), b (4,320 looks) integrates")
    stream, clock = io.StringIO(), _Clock()
    _Stages(Path("out"), 4, 1000, stream=stream, clock=clock, many_looks=[]).replicates(4, 4)
    assert stream.getvalue().splitlines()[-1].startswith("analysing 4 replicates")


def test_every_replicate_resumed_no_compiling_line() -> None:
    stages, stream, clock = _stages(cold=True)
    stages.replicates(4, 4)  # nothing left to run (and no Monte Carlo truth): nothing compiles
    assert "compil" not in stream.getvalue()
    assert stream.getvalue().splitlines()[-1].startswith("analysing 4 replicates")


def test_cold_cache_without_monte_carlo_truth_one_note_before_the_replicates() -> None:
    stages, stream, clock = _stages(cold=True)
    stages.replicates(1, 4)  # an A/B-only config: the replicates are the first to run the simulator
    stages.replicates(2, 4)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("compiling the simulator's kernels as they are first used")
    assert sum("compil" in line for line in lines) == 1


def test_interrupted_message_says_what_is_kept_and_how_to_resume() -> None:
    stages, _, _ = _stages()
    assert stages.kept_text().startswith("stopped before the replicates started;")
    stages.replicates(1, 4)
    stages.replicates(3, 4)
    partial = Path("out") / "replicates.partial.jsonl"
    assert stages.kept_text() == (f"3 of 4 replicates are kept in {partial}; run the same command again to resume "
                                  "(only the missing ones are computed)")
    stages.replicates(4, 4)
    assert stages.kept_text().startswith(f"all 4 replicates are kept in {partial}; run the same command again")


def test_sweep_progress_says_writing_not_done_while_points_are_written() -> None:
    now, stream = [0.0], io.StringIO()
    p = SweepProgress(points=3, replicates=30, stream=stream, every=0.0, clock=lambda: now[0])
    p.start(points_done=0, replicates_done=0)
    now[0] = 10.0
    p.add(replicates=30, points=1)
    now[0] = 12.0
    p.add(points=2)
    assert stream.getvalue().splitlines()[-2:] == [
        "sweep: points 1/3, replicates 30/30, 10s elapsed, writing the last 2 point(s)",
        "sweep: points 3/3, replicates 30/30, 12s elapsed, ETA done",
    ]


def test_truths_on_workers_are_the_numbers_of_one_process(tmp_path: Path) -> None:
    """compute_truth's Monte Carlo in 2 worker processes (what the command line does) gives exactly the truths of
    the plain call, in the same order; the progress reaches every impression."""
    from simulations.config import load_config
    from simulations.job import prepare_world
    from simulations.runner import compute_truth, monte_carlo_truths, truth_reporting

    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(replicates=2, workers=2, qpd=200, truth=30_000))
    cfg = load_config(path)
    world, users = prepare_world(cfg)
    plain = compute_truth(cfg, world, users)
    seen: list[tuple[int, int, str]] = []
    with truth_reporting(lambda d, t, label: seen.append((d, t, label)), workers=2):
        parallel = compute_truth(cfg, world, users)
    assert parallel == plain
    assert [r.label for r in monte_carlo_truths(cfg)] == ["td", "td (null user)"]
    assert seen[0] == (0, 60_000, "td") and seen[-1][:2] == (60_000, 60_000) and len(seen) == 3
    serial: list[tuple[int, int, str]] = []
    with truth_reporting(lambda d, t, label: serial.append((d, t, label)), workers=1):
        assert compute_truth(cfg, world, users) == plain
    assert [d for d, _, _ in serial] == [0, 30_000, 60_000]  # one line per chunk of 200,000 impressions or fewer


def _cli(config: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> list[str]:
    return [sys.executable, "-m", "onlineeval.cli", "simulate", "--config", str(config), "--output", str(out),
            *extra]


def _summary(out: Path) -> str:
    summary = json.loads((out / "summary.json").read_text())
    for key in ("output", "workers"):
        summary["config"].pop(key, None)
    return json.dumps(summary, sort_keys=True)


def test_cli_stage_lines_in_order_absent_with_quiet_and_the_same_numbers(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(replicates=3, workers=2, qpd=200, truth=20_000))
    loud = subprocess.run(_cli(path, tmp_path / "loud"), capture_output=True, text=True, timeout=300)
    assert loud.returncode == 0, loud.stderr
    order = ["world: ", "ground truth: 2 Monte Carlo runs", "ground truth [", "ground truth: done in ",
             "running 3 replicates on 2 worker(s)", "replicates [", "analysing 3 replicates and writing the results",
             "done in "]
    lines = loud.stderr.splitlines()
    at = [next((i for i, line in enumerate(lines) if line.startswith(text)), -1) for text in order]
    assert -1 not in at and at == sorted(at), loud.stderr
    assert "x 20,000 impressions (analysis.truth_impressions) on 2 worker(s)" in lines[at[1]]
    quiet = subprocess.run(_cli(path, tmp_path / "quiet", "--quiet", "--workers", "1"), capture_output=True,
                           text=True, timeout=300)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    # the truths on 2 workers (loud) and in one process (quiet, --workers 1): the same summary and terminal text
    assert _summary(tmp_path / "loud") == _summary(tmp_path / "quiet")
    assert loud.stdout.replace(str(tmp_path / "loud"), "X") == quiet.stdout.replace(str(tmp_path / "quiet"), "X")


def test_kernels_cached_reads_the_cache_index(tmp_path: Path) -> None:
    """An empty numba cache says False (nothing compiled by asking), after one kernel's compilation True."""
    code = ("from simulations.runner import kernels_cached; import sys; a = kernels_cached(); "
            "import numpy as np; from simulations.kernels import add_ones; "
            "add_ones(np.zeros(2), np.zeros(1, np.int64)) if 'compile' in sys.argv else None; "
            "print(a, kernels_cached())")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", code, "compile"], capture_output=True, text=True, env=env,
                           timeout=300)
    assert first.stdout.split() == ["False", "True"], first.stderr
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert second.stdout.split() == ["True", "True"], second.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_says_how_many_replicates_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(CONFIG.format(replicates=400, workers=1, qpd=400, truth=1000))
    out = tmp_path / "out"
    proc = subprocess.Popen(_cli(path, out, "--quiet"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = out / "replicates.partial.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.is_file() and len(partial.read_text().splitlines()) >= 3:  # header and 2 records
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    kept = len(partial.read_text().splitlines()) - 1
    assert err.splitlines()[-1] == (f"interrupted (stopped by SIGINT); {kept} of 400 replicates are kept in {partial}; "
                                    "run the same command again to resume (only the missing ones are computed)"), err


def test_the_interrupt_message_counts_the_partial_file_not_the_progress(tmp_path: Path) -> None:
    # a finished replicate is written and flushed before its count reaches the progress: a SIGINT between the two
    # said "55 of 400 replicates are kept" while the file held 56 (seen in CI); the message counts the file
    from simulations.job import PARTIAL, partial_header, partial_record

    stages = _Stages(tmp_path, 10, 1000, quiet=True, stream=io.StringIO())
    stages.replicates(2, 10)  # the progress heard of two
    records = [partial_record(i, [{"design": "ab", "replicate": i}]) for i in (4, 0, 7)]
    torn = partial_record(9, [{"design": "ab"}])[:-5]  # an interrupted write: not kept, recomputed by a resume
    (tmp_path / PARTIAL).write_text(partial_header("f" * 64) + "".join(records) + torn)
    assert stages.kept_text().startswith(f"3 of 10 replicates are kept in {tmp_path / PARTIAL}; ")
    # what a resume reuses: the same three
    from simulations.job import load_partial

    assert sorted(load_partial(tmp_path / PARTIAL, "f" * 64)) == [0, 4, 7]
    (tmp_path / PARTIAL).write_text(partial_header("f" * 64) + "".join(partial_record(i, []) for i in range(10)))
    assert stages.kept_text().startswith("all 10 replicates are kept in ")
    (tmp_path / PARTIAL).unlink()  # unreadable: the progress count stands
    assert stages.kept_text().startswith("2 of 10 replicates are kept in ")


def test_more_workers_than_cores_are_said_to_add_memory_not_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    # --workers 64 on a 2-core machine started 64 processes without a word (each imports the package)
    import simulations.job as job

    class Config:
        replicates = 10

    said: list[str] = []
    monkeypatch.setattr(job, "run_replicates", lambda config, world, todo, n, on_done: None)
    monkeypatch.setattr(job.os, "cpu_count", lambda: 2)
    for workers, todo_done, note in ((64, {}, True), (2, {}, False), (64, {i: [] for i in range(9)}, False)):
        said.clear()
        job._run(Config(), None, dict(todo_done), workers, None, None, said.append)  # type: ignore[arg-type]
        used = min(workers, 10 - len(todo_done))
        assert said[0].startswith(f"running {10 - len(todo_done)} replicates on {used} worker(s)")
        assert ("more processes than this machine's 2 cores: each adds memory, none adds speed" in said[0]) is note
