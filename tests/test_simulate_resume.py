"""Resume, interruption and concurrency of ``onlineeval simulate`` as real subprocesses.

Each case interrupts (or disturbs) a real run and compares its final results with an
uninterrupted run of the same config byte for byte: ``replicates.csv``, ``curves.csv``
and ``summary.json`` (without the results folder's own path, which differs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CONFIG = """
seed: 7
replicates: {replicates}
workers: {workers}
collection: {collection}
rankers: {{depth: 5, A: {{noise: 1.0}}, B: {{noise: 0.8}}}}
users: {{population: 400, click_model: {{name: cascade, preset: informational}}}}
traffic: {{days: 3, queries_per_day: {qpd}, batch_hours: 6}}
designs:
  - {{name: ab, type: ab, metric: reciprocal_rank}}
  - {{name: td, type: interleaving, method: team_draft}}
analysis: {{aa: false, truth_impressions: 20000}}
"""

SYNTHETIC = "{type: synthetic, n_queries: 60, candidates: 12}"


def _write_config(folder: Path, replicates: int = 200, workers: int = 1, qpd: int = 3000,
                  collection: str = SYNTHETIC) -> Path:
    path = folder / "cfg.yaml"
    path.write_text(CONFIG.format(replicates=replicates, workers=workers, qpd=qpd, collection=collection))
    return path


def _cmd(config: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "onlineeval.cli", "simulate", "--config", str(config), "--output", str(out),
            "--quiet", *extra]


def _run(config: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cmd(config, out, *extra), capture_output=True, text=True, timeout=300)


def _results(out: Path) -> dict[str, str]:
    summary = json.loads((out / "summary.json").read_text())
    for key in ("output", "workers"):  # the folder's own path; workers never change a number
        summary["config"].pop(key, None)
    return {
        "replicates.csv": (out / "replicates.csv").read_text(),
        "curves.csv": (out / "curves.csv").read_text(),
        "summary.json": json.dumps(summary, sort_keys=True),
    }


def _records(out: Path) -> int:
    partial = out / "replicates.partial.jsonl"
    if not partial.is_file():
        return 0
    return max(partial.read_text().count("\n") - 1, 0)


def _start_and_wait(config: Path, out: Path, records: int, *extra: str) -> subprocess.Popen[str]:
    """Start a run and return once ``records`` replicates are in its partial file."""
    proc = subprocess.Popen(_cmd(config, out, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while _records(out) < records:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {records} replicates were recorded: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("timed out waiting for finished replicates")
        time.sleep(0.05)
    return proc


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("reference")
    config = _write_config(folder)
    done = _run(config, folder / "out")
    assert done.returncode == 0, done.stderr
    return _results(folder / "out")


#: replicates of the signal test's runs: enough that finishing them all between the signal and its handling would
#: take seconds of ignoring it (two workers record about 130 a second)
SIGNAL_REPLICATES = 1000


@pytest.fixture(scope="module")
def reference_long(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("reference_long")
    config = _write_config(folder, replicates=SIGNAL_REPLICATES, workers=2)
    done = _run(config, folder / "out")
    assert done.returncode == 0, done.stderr
    return _results(folder / "out")


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("workers", [1, 2])
def test_signal_stops_promptly_keeps_work_and_resumes_identically(
    tmp_path: Path, reference_long: dict[str, str], sig: int, code: int, workers: int
) -> None:
    config = _write_config(tmp_path, replicates=SIGNAL_REPLICATES, workers=workers)
    out = tmp_path / "out"
    proc = _start_and_wait(config, out, 2)
    workers_before = _children(proc.pid)
    os.kill(proc.pid, sig)  # the parent alone, not the process group
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the run did not stop within 20 s of the signal")
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert "interrupted" in err
    kept = _records(out)
    assert kept >= 2
    # it stopped before finishing (a run that ignored the signal records them all, writes its results and exits 0);
    # how promptly is bounded by the 20 s above, not by a count: two workers finish about 130 of these replicates a
    # second, so a busy machine (CI runs two test processes on two cores) records dozens between the signal and its
    # handling, 70 once and 168 once (a fresh clone's CI, 2026-12-04), and once all 200 of the 200 this test ran
    # before (the full suite beside other work, 2026-12-07): hence SIGNAL_REPLICATES
    assert kept < SIGNAL_REPLICATES, f"the run recorded all {kept} replicates: it ran on after the signal"
    assert not (out / "summary.json").exists(), "the interrupted run wrote its results as if it had finished"
    time.sleep(0.5)
    assert not [p for p in workers_before if _alive(p)], "worker processes were left running"
    resumed = _run(config, out)
    assert resumed.returncode == 0, resumed.stderr
    got = _results(out)
    for name, text in reference_long.items():
        diff = [(a, b) for a, b in zip(text.splitlines(), got[name].splitlines()) if a != b][:1]
        assert got[name] == text, f"{name} differs: {diff}"


@pytest.mark.slow
def test_sigkill_then_resume_is_identical(tmp_path: Path, reference: dict[str, str]) -> None:
    config = _write_config(tmp_path)
    out = tmp_path / "out"
    proc = _start_and_wait(config, out, 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    resumed = _run(config, out)
    assert resumed.returncode == 0, resumed.stderr
    assert _results(out) == reference


def test_torn_last_line_is_repaired(tmp_path: Path, reference: dict[str, str]) -> None:
    config = _write_config(tmp_path)
    out = tmp_path / "out"
    proc = _start_and_wait(config, out, 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    partial = out / "replicates.partial.jsonl"
    text = partial.read_text()
    lines = text.splitlines(keepends=True)
    # cut the last record in half, as a kill during a write or a full disk would
    partial.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    resumed = _run(config, out)
    assert resumed.returncode == 0, resumed.stderr
    assert "torn or damaged" in resumed.stderr or _records(out) == 0
    assert _results(out) == reference


def test_changed_input_file_discards_partial(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.txt"
    run_a, run_b = tmp_path / "a.run", tmp_path / "b.run"
    qrels.write_text("".join(f"q{q} 0 d{d} {int(d % 3 == 0) + int(d == q % 7)}\n" for q in range(30) for d in range(8)))
    run_a.write_text("".join(f"q{q} Q0 d{d} {d + 1} {10 - d} A\n" for q in range(30) for d in range(8)))
    run_b.write_text("".join(f"q{q} Q0 d{(d + 3) % 8} {d + 1} {10 - d} B\n" for q in range(30) for d in range(8)))
    coll = f"{{type: trec, qrels: {qrels}, runs: {{A: {run_a}, B: {run_b}}}}}"
    config = _write_config(tmp_path, collection=coll)
    out = tmp_path / "out"
    proc = _start_and_wait(config, out, 2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    # a different world: B's run changes
    run_b.write_text("".join(f"q{q} Q0 d{(d + 5) % 8} {d + 1} {10 - d} B\n" for q in range(30) for d in range(8)))
    resumed = _run(config, out)
    assert resumed.returncode == 0, resumed.stderr
    assert "warning: discarding" in resumed.stderr and "different config or different input files" in resumed.stderr
    fresh_out = tmp_path / "fresh"
    assert _run(config, fresh_out).returncode == 0
    assert _results(out) == _results(fresh_out)


def test_changed_replicate_count_keeps_finished_replicates(tmp_path: Path) -> None:
    # replicates of ~0.1 s (60,000 queries a day): the kill comes after 3 of the 8, not after the last
    config = _write_config(tmp_path, replicates=8, qpd=60_000)
    out = tmp_path / "out"
    proc = _start_and_wait(config, out, 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    kept = _records(out)
    assert kept < 8
    resumed = _run(config, out, "--replicates", "10")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {kept} of 10" in resumed.stderr
    reference = tmp_path / "reference"
    assert _run(config, reference, "--replicates", "10").returncode == 0
    assert _results(out)["replicates.csv"] == _results(reference)["replicates.csv"]


def test_second_run_into_the_same_folder_is_refused(tmp_path: Path) -> None:
    config = _write_config(tmp_path, replicates=100_000)  # runs until killed: never done before the second run starts
    out = tmp_path / "out"
    proc = _start_and_wait(config, out, 1)
    try:
        second = _run(config, out)
        assert second.returncode == 2
        assert "in use by another onlineeval run" in second.stderr
        assert f"pid {proc.pid}" in second.stderr
        assert str(out) in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


@pytest.mark.skipif(os.geteuid() == 0,
                    reason="root ignores file permissions; see test_read_only_file_system_is_a_clear_error "
                           "(EROFS injected)")
def test_read_only_folder_is_a_clear_error(tmp_path: Path) -> None:  # pragma: no cover - non-root only
    config = _write_config(tmp_path)
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        done = _run(config, out)
    finally:
        out.chmod(0o700)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_full_disk_is_a_clear_error_and_keeps_partial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write failing with ENOSPC half-way: one clear error; earlier replicates stay on disk."""
    import errno

    from simulations import job
    from simulations.config import load_config

    config = load_config(_write_config(tmp_path, replicates=4))
    out = tmp_path / "out"
    real_record = job.partial_record
    calls = {"n": 0}

    def failing_record(index: int, rows: list) -> str:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_record(index, rows)

    monkeypatch.setattr(job, "partial_record", failing_record)
    from onlineeval.errors import OutputError

    with pytest.raises(OutputError, match="disk is full") as info:
        job.simulate(config, out, workers=1)
    assert "kept in" in str(info.value)
    assert _records(out) == 2


def test_read_only_file_system_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A results folder that cannot be created or written (EROFS; root ignores permission bits,
    so the failure is injected): one OutputError naming the path, no traceback."""
    import errno

    from onlineeval.errors import OutputError
    from simulations import job
    from simulations.config import load_config

    config = load_config(_write_config(tmp_path, replicates=2))

    def read_only(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(OutputError, match="Read-only file system") as info:
        job.simulate(config, tmp_path / "new" / "out", workers=1)
    assert "nothing was run" in str(info.value)


def test_folder_lock_is_released_although_a_forked_process_still_has_the_file(tmp_path: Path) -> None:
    """A process forked while the lock was held (a local pool's worker, kept for the next run) shares the lock
    file's open description: the lock must be released when the block ends, not when the last sharer exits
    (reusing one executor for two sweeps into the same folder failed with "results folder in use")."""
    import multiprocessing

    from onlineeval.errors import OutputError
    from simulations.job import folder_lock

    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    with folder_lock(tmp_path):
        child = ctx.Process(target=stop.wait, args=(60,))
        child.start()  # inherits the locked file
        with pytest.raises(OutputError, match="in use"):  # held: another open of the file cannot lock it
            with folder_lock(tmp_path):
                pass
    try:
        with folder_lock(tmp_path):  # released although the child still has the file open
            pass
    finally:
        stop.set()
        child.join(10)


def test_stop_pool_ends_the_workers_and_the_management_thread() -> None:
    """_stop_pool returns once the workers and the pool's management thread have ended: the thread has closed its
    wake-up pipe, so the interpreter's exit hook no longer races it (it wrote to the closing pipe: "Bad file
    descriptor" on stderr after an interrupt, 1 run in 6)."""
    from concurrent.futures import ProcessPoolExecutor

    from simulations.runner import _stop_pool

    pool = ProcessPoolExecutor(max_workers=2)
    futures = [pool.submit(time.sleep, 30) for _ in range(4)]
    deadline = time.monotonic() + 20
    while not any(f.running() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.02)
    manager = pool._executor_manager_thread
    workers = list(pool._processes.values())
    assert manager is not None and manager.is_alive() and workers
    started = time.monotonic()
    _stop_pool(pool)
    assert time.monotonic() - started < 10  # not the 30 s of the tasks
    assert not manager.is_alive()
    assert not any(p.is_alive() for p in workers)
