"""A sweep's points written by writer processes (:mod:`simulations.sweep_writers`).

Reference: the same sweep with ``writers=0``, every point written in the client's thread
(the previous implementation): every file of the sweep folder is byte-identical, PNG and
HTML included. A writer's error reaches the client with its message; an interrupt ends the
writers at once and the sweep resumes from the points' partial files to the same files;
progress counts a point only once its folder is written. ``save_png`` is ``savefig`` byte
for byte.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import simulations.sweep_writers as sweep_writers
from onlineeval.errors import ConfigError, OnlineEvalError, OutputError
from simulations.executors import Executor, LocalExecutor, Task, TaskResult, run_task
from simulations.job import PARTIAL, Interrupted
from simulations.sweep import SweepProgress, run_sweep
from simulations.world import World
from tests.test_sweep import make_sweep

REPO = Path(__file__).resolve().parents[1]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".onlineeval.lock"}


def _run_into(out: Path, keep: Path, **kw: Any) -> Any:
    """Run the test sweep into ``out`` (the points' configs name it) and move it to ``keep``."""
    result = run_sweep(make_sweep(out, chunk=3), **kw)
    shutil.move(str(out), str(keep))
    return result


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sweep written by the client's thread (writers=0), in-process tasks."""
    base = tmp_path_factory.mktemp("writers")
    result = _run_into(base / "sweep", base / "ref", workers=1, writers=0)
    assert result.computed == [0, 1, 2]
    return base / "ref"


def _out(reference: Path) -> Path:
    """The sweep folder of a test run: the reference's path (the points' configs name it),
    cleared of what a failed test may have left."""
    out = reference.parent / "sweep"
    shutil.rmtree(out, ignore_errors=True)
    return out


def _no_writer_left() -> None:
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert multiprocessing.active_children() == []


def _resumes_to_the_reference(reference: Path, out: Path, tmp_path: Path, point: int, **kw: Any) -> Any:
    """After a stopped sweep: no writer is left, ``point`` has its partial file and no summary; resumed (``kw``:
    run_sweep's workers and writers), it resumes that point from its 4 finished replicates and the sweep folder
    equals the reference file by file. Returns the resumed run's result."""
    _no_writer_left()
    folder = out / "points" / f"point-{point:03d}"
    assert (folder / PARTIAL).is_file()
    assert not (folder / "summary.json").exists()
    log: list[str] = []
    result = run_sweep(make_sweep(out, chunk=3), log=log.append, **kw)
    assert any(m.startswith(f"resuming: point {point}: 4 of 4 replicates") for m in log)
    shutil.move(str(out), str(tmp_path / "got"))
    want = _files(reference)
    assert [name for name, data in _files(tmp_path / "got").items() if data != want[name]] == []
    return result


@pytest.mark.parametrize(("workers", "writers"), [(1, 1), (2, 2)])
def test_writers_write_the_same_files_as_the_client(reference: Path, tmp_path: Path, workers: int,
                                                    writers: int) -> None:
    keep = tmp_path / "got"
    result = _run_into(_out(reference), keep, workers=workers, writers=writers)
    assert result.computed == [0, 1, 2]
    got, want = _files(keep), _files(reference)
    assert sorted(got) == sorted(want)
    assert any(name.endswith(".png") for name in want) and any(name.endswith("report.html") for name in want)
    assert [name for name in want if got[name] != want[name]] == []
    _no_writer_left()


def _failing_write(error: Exception, point: str) -> Callable[..., None]:
    real = sweep_writers.write_point

    def write(*args: Any) -> None:
        if Path(args[5]).name == point:
            raise error
        real(*args)

    return write


@pytest.mark.parametrize("error", [
    OutputError("cannot write: the disk is full; the finished replicates are kept", "/x/point-001"),
    ConfigError(("designs", 0), "something the writer found wrong"),
], ids=["output-error", "config-error"])
def test_a_writers_error_reaches_the_client_and_the_sweep_resumes(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    out = _out(reference)
    monkeypatch.setattr(sweep_writers, "write_point", _failing_write(error, "point-001"))  # inherited by the fork
    # with its own type, or as an OutputError where its pickle cannot rebuild it (a ConfigError,
    # unless a library such as Dask's tblib taught pickle to): the same message either way
    with pytest.raises(OnlineEvalError, match=re.escape(str(error))) as caught:
        run_sweep(make_sweep(out, chunk=3), workers=1, writers=1)
    assert type(caught.value) in (type(error), OutputError)
    monkeypatch.undo()
    result = _resumes_to_the_reference(reference, out, tmp_path, 1, workers=1, writers=1)
    assert 1 in result.computed


def _die(*_args: Any) -> None:
    os._exit(3)  # as a killed writer


def test_a_writer_that_dies_is_a_clear_error(reference: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _out(reference)
    monkeypatch.setattr(sweep_writers, "write_point", _die)
    with pytest.raises(OutputError, match="ended abruptly .* run again to resume"):
        run_sweep(make_sweep(out, chunk=3), workers=1, writers=1)
    _no_writer_left()
    assert (out / "points" / "point-000" / PARTIAL).is_file()


class _InterruptAfterPoint0(Executor):
    """Runs tasks in this thread; once point 0's tasks are all in, stops as SIGINT would."""

    name = "test"
    workers = 1  # type: ignore[assignment]

    def run(self, tasks: Sequence[Task], worlds: Mapping[str, World],
            on_done: Callable[[Task, TaskResult], None]) -> None:
        first = tasks[0].point
        for task in tasks:
            if task.point != first:
                raise Interrupted(signal.SIGINT)
            on_done(task, run_task(task.config, worlds[task.point], task.indices, task.kind))


def _slow_write(*_args: Any) -> None:
    time.sleep(60)  # ended by the interrupt long before


def test_an_interrupt_ends_the_writers_and_the_point_is_written_on_resume(
    reference: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _out(reference)
    monkeypatch.setattr(sweep_writers, "write_point", _slow_write)
    t0 = time.monotonic()
    with pytest.raises(Interrupted):
        run_sweep(make_sweep(out, chunk=3), executor=_InterruptAfterPoint0(), writers=1)
    assert time.monotonic() - t0 < 30  # the writer busy with point 0 was ended, not waited for
    monkeypatch.undo()
    result = _resumes_to_the_reference(reference, out, tmp_path, 0, workers=2, writers=2)
    assert result.computed == [0, 1, 2]


class _Watched(io.StringIO):
    """Progress lines, each checked against the folders on disk when it is written."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root, self.lines = root, []

    def write(self, text: str) -> int:
        m = re.match(r"sweep: points (\d+)/3, replicates (\d+)/12", text)
        if m:
            written = [p for p in (self.root / "points").iterdir() if (p / "report.html").is_file()]  # its last file
            self.lines.append((int(m.group(1)), int(m.group(2)), len(written), text))
        return super().write(text)


def test_progress_counts_a_point_once_its_folder_is_written(reference: Path, tmp_path: Path) -> None:
    out = _out(reference)
    stream = _Watched(out)
    meter = SweepProgress(points=3, replicates=12, stream=stream, every=0.0)
    run_sweep(make_sweep(out, chunk=1), workers=2, writers=2, progress=meter)
    shutil.move(str(out), str(tmp_path / "got"))
    assert stream.lines, "no progress line"
    assert all(points <= written for points, _, written, _ in stream.lines), stream.lines
    points = [p for p, *_ in stream.lines]
    reps = [r for _, r, *_ in stream.lines]
    assert points == sorted(points) and reps == sorted(reps)
    assert stream.lines[-1][:2] == (3, 12) and stream.lines[-1][3].rstrip().endswith("ETA done")
    assert sum(1 for p, r, *_ in stream.lines if (p, r) == (3, 12)) == 1  # the last line, once


CHILD = """
import json, pickle, sys
from pathlib import Path
import simulations.sweep, simulations.job  # what the client has imported when it starts the writers
import simulations.sweep_writers as sw
if sys.argv[2] == "warm":
    sw.import_writer_modules()
args = pickle.loads(open(sys.argv[1], "rb").read())
before = set(sys.modules)
sw.write_point(*args)
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in %r)))
""" % (("onlineeval", "simulations", "clickmodels", "scipy", "pandas", "matplotlib", "PIL"),)


def test_writer_modules_are_what_writing_a_point_imports(tmp_path: Path) -> None:
    """A writer forked after :func:`import_writer_modules` imports nothing more for a point
    (checked in a fresh interpreter; without the warm-up it does, so the check can fail)."""
    from simulations.job import config_fingerprint, prepare
    from simulations.runner import replicate_seeds, run_replicate

    sweep = make_sweep(tmp_path / "s")
    new: dict[str, list[str]] = {}
    for mode in ("warm", "cold"):
        folder = tmp_path / mode
        folder.mkdir()
        config = sweep.points[1].config.model_copy(update={"output": folder, "replicates": 2})
        world, users, truths = prepare(config)
        seqs = replicate_seeds(config.seed, 2)
        done = {i: run_replicate(config, world, users, seqs[i], i) for i in range(2)}
        path = tmp_path / f"{mode}.pkl"
        path.write_bytes(pickle.dumps((config, world, users, truths, done, folder, config_fingerprint(config))))
        out = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], cwd=REPO, capture_output=True,
                             text=True, timeout=600, check=False)
        assert out.returncode == 0, out.stderr[-3000:]
        new[mode] = json.loads(out.stdout.splitlines()[-1])
        assert (folder / "report.html").is_file()
    assert new["warm"] == [], " ".join(new["warm"])
    assert new["cold"], "the check cannot fail: writing a point imported nothing even without the warm-up"


def test_writers_argument_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    for cores, writers in ((1, 0), (2, 2), (64, 2)):
        monkeypatch.setattr(sweep_writers.os, "cpu_count", lambda cores=cores: cores)
        assert sweep_writers.default_writers() == writers
    monkeypatch.undo()
    with pytest.raises(ValueError, match="whole number >= 0"):
        sweep_writers.PointWriters(-1)
    with sweep_writers.PointWriters(0) as w:
        assert w.pids == [] and w.finished(wait=True) == []


def test_cli_writers_option_reaches_run_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    """``onlineeval sweep --writers N`` hands N to run_sweep (None when not given: the default); a negative
    number is refused by the option parser with the option named."""
    from typer.testing import CliRunner

    import simulations.sweep as sweep_module
    from onlineeval.cli import app

    seen: list[Any] = []

    class Stop(Exception):
        pass

    def fake_run_sweep(sweep: Any, **kw: Any) -> Any:
        seen.append(kw.get("writers", "missing"))
        raise Stop

    monkeypatch.setattr(sweep_module, "run_sweep", fake_run_sweep)
    config = str(REPO / "configs" / "sweep.yaml")
    for extra, want in (([], None), (["--writers", "0"], 0), (["--writers", "3"], 3)):
        res = CliRunner().invoke(app, ["sweep", "--config", config, "--quiet", *extra])
        assert isinstance(res.exception, Stop), res.output
        assert seen[-1] == want
    res = CliRunner().invoke(app, ["sweep", "--config", config, "--writers", "-1"])
    assert res.exit_code == 2 and "--writers" in res.output and len(seen) == 3


# ------------------------------------------------------------------------------ save_png
def _all_figures(tmp_path: Path) -> Callable[[], dict[str, Any]]:
    """Every kind of report figure, built afresh at each call: a point of the test sweep's, and
    a counterfactual run's (its RMSE plot and its assumption sweep)."""
    from simulations.config import config_from_mapping
    from simulations.job import simulate
    from simulations.plots import figures
    from tests.test_simulation_counterfactual import CASCADE, LOGGER, PBM, _config

    point = simulate(make_sweep(tmp_path / "s").points[1].config, workers=1)
    cf = config_from_mapping({
        **_config(replicates=2, days=1, estimators=("rips", "iips")).effective(),
        "users": {"population": 600, "activity": {"sigma": 0.5},
                  "types": [{"name": "pbm", "share": 0.5, "click_model": PBM},
                            {"name": "nav", "share": 0.5, "click_model": CASCADE}]},
        "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query"},
                    {"name": "cf", "type": "counterfactual", "metric": "clicks_per_query", "logger": LOGGER,
                     "estimators": ["rips", "iips"]}],
        "analysis": {"aa": True, "truth_impressions": 4000, "assumption_sweep": {
            "parameter": "users.types[1].share", "values": [0.0, 1.0], "impressions": 20_000}},
    })
    counterfactual = simulate(cf, workers=1)

    def build() -> dict[str, Any]:
        figs = {f"point/{k}": f for k, f in figures(point).items()}
        figs.update({f"cf/{k}": f for k, f in figures(counterfactual).items()})
        return figs

    return build


def test_save_png_is_savefig_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As write_results uses them: each figure saved once, freshly built (a figure drawn
    before is laid out again from where its last layout left it)."""
    from matplotlib import rcParams

    from simulations.plots import save_png

    build = _all_figures(tmp_path)
    old, new = build(), build()
    assert {name.split("/")[1] for name in old} == {"power_vs_days", "offline_vs_online", "counterfactual_rmse",
                                                    "assumption_sweep"}
    for name, fig in new.items():
        want, got = io.BytesIO(), io.BytesIO()
        old[name].savefig(want, format="png", dpi=110)
        canvas, dpi = fig.canvas, fig.dpi
        save_png(fig, got, dpi=110)
        assert got.getvalue() == want.getvalue(), name
        assert (fig.canvas, fig.dpi) == (canvas, dpi), name
    # under other savefig settings it is savefig itself (a transparent background changes the pixels)
    default = io.BytesIO()
    save_png(build()["point/power_vs_days"], default, dpi=110)
    monkeypatch.setitem(rcParams, "savefig.transparent", True)
    want, got = io.BytesIO(), io.BytesIO()
    build()["point/power_vs_days"].savefig(want, format="png", dpi=110)
    save_png(build()["point/power_vs_days"], got, dpi=110)
    assert got.getvalue() == want.getvalue() != default.getvalue()


def test_writers_next_to_a_running_local_executor(reference: Path, tmp_path: Path) -> None:
    """An executor given by the caller whose processes (and their threads in this process)
    are already running when the writers start."""
    ex = LocalExecutor(2)
    try:
        run_sweep(make_sweep(tmp_path / "first", chunk=2), executor=ex, writers=2)
        out = _out(reference)
        run_sweep(make_sweep(out, chunk=2), executor=ex, writers=2)
    finally:
        ex.close()
    shutil.move(str(out), str(tmp_path / "got"))
    want = _files(reference)
    assert [name for name, data in _files(tmp_path / "got").items() if data != want[name]] == []


def test_a_point_handed_to_a_broken_pool_is_the_same_clear_error(tmp_path: Path) -> None:
    """A writer killed before the next point is handed over breaks the whole pool: ``submit`` then gets the
    same OutputError as collecting the dead writer's point (seen on a busy CI machine as a BrokenProcessPool
    traceback from ``submit``)."""
    writers = sweep_writers.PointWriters(1)
    try:
        (pid,) = writers.pids
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not getattr(writers._pool, "_broken", False) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert writers._pool is not None and writers._pool._broken  # the pool noticed the death
        with pytest.raises(OutputError, match="ended abruptly .* point 7 .* run again to resume"):
            writers.submit(7, None, None, None, [], {}, tmp_path / "point-007", "fp")
    finally:
        writers.close()
