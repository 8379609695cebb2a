"""Sweeps on Dask distributed: bit-identical to local processes; worlds shipped once.

Reference: the same sweep run in-process (``workers=1``); the Dask run on a LocalCluster
of 2 single-threaded worker processes must give byte-identical ``points.csv`` and
per-point ``replicates.csv``, whatever the chunking.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onlineeval.errors import ConfigError
from simulations.executor_check import parse_scheduler
from simulations.executors import (
    TASK_MODULES,
    DaskExecutor,
    LocalExecutor,
    make_executor,
    worker_stream_version,
)
from simulations.sweep import run_sweep
from tests.test_sweep import make_sweep

import distributed


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskExecutor]:
    ex = DaskExecutor("local:2")
    try:
        yield ex
    finally:
        ex.close()


def test_local_cluster_is_bit_identical_and_ships_worlds_once(cluster: DaskExecutor, tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    run_sweep(make_sweep(ref, chunk=4), workers=1)

    client = cluster._client
    scattered: list[tuple[Any, dict[str, Any]]] = []
    submitted: list[tuple[Any, ...]] = []
    events: list[str] = []  # the order of scatters and submits
    holders: list[int] = []  # workers holding each scattered world
    real_scatter, real_submit = client.scatter, client.submit

    def scatter(data: Any, **kw: Any) -> Any:
        fut = real_scatter(data, **kw)
        scattered.append((fut, kw))
        events.append("scatter")
        # the scheduler learns of the broadcast's replicas asynchronously: wait (up to 10 s) until it knows of one
        # on every worker instead of reading who_has once (read at once it showed 1 of 2 under load)
        deadline = time.monotonic() + 10.0
        while (held := len(client.who_has([fut])[fut.key])) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        holders.append(held)
        return fut

    def submit(fn: Any, *args: Any, **kw: Any) -> Any:
        submitted.append(args)
        events.append("submit")
        return real_submit(fn, *args, **kw)

    client.scatter, client.submit = scatter, submit
    try:
        log: list[str] = []
        result = run_sweep(make_sweep(tmp_path / "dask", chunk=1), executor=cluster, log=log.append)
    finally:
        client.scatter, client.submit = real_scatter, real_submit
    assert result.computed == [0, 1, 2]
    assert any("on dask (2 worker(s))" in m for m in log)
    assert (tmp_path / "dask" / "points.csv").read_bytes() == (ref / "points.csv").read_bytes()
    for i in range(3):
        name = f"points/point-00{i}/replicates.csv"
        assert (tmp_path / "dask" / name).read_bytes() == (ref / name).read_bytes()
    # one scatter per point, broadcast to every worker; per point one truth task and 4
    # replicate tasks (chunk 1), each given the scattered future, never the world itself
    assert len(scattered) == 3 and all(kw.get("broadcast") is True for _, kw in scattered)
    assert holders == [2, 2, 2]
    assert len(submitted) == 15
    assert sorted(args[3] for args in submitted) == ["replicates"] * 12 + ["truth"] * 3
    futures = {id(f) for f, _ in scattered}
    assert all(isinstance(args[1], distributed.Future) and id(args[1]) in futures for args in submitted)
    # each world is scattered right before its point's tasks (the first tasks do not wait for every world)
    assert events == (["scatter"] + ["submit"] * 5) * 3


def test_local_cluster_settings_and_warm_workers(cluster: DaskExecutor) -> None:
    """``local:N`` starts its workers with LOCAL_CLUSTER_CONFIG and the task code imported."""
    import os
    import sys

    def probe(dask_worker: Any) -> dict[str, Any]:
        return {
            "trim": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
            "imported": "simulations.executors" in sys.modules,
            "task_modules": [m for m in TASK_MODULES if m not in sys.modules],  # imported when the executor started
            "profile": "profile" in dask_worker.periodic_callbacks,
            "tick_ms": dask_worker.periodic_callbacks["tick"].callback_time,
            "monitor_ms": dask_worker.periodic_callbacks["monitor"].callback_time,
            "memory_ms": dask_worker.periodic_callbacks["memory_monitor"].callback_time,  # limits still enforced
        }

    seen = cluster._client.run(probe)
    assert len(seen) == 2
    trim = os.environ.get("MALLOC_TRIM_THRESHOLD_")  # inherited when this process sets it; Dask's default is 65536
    for info in seen.values():
        assert info == {"trim": trim, "imported": True, "task_modules": [], "profile": False, "tick_ms": 1000,
                        "monitor_ms": 5000, "memory_ms": 1000}
    assert cluster._cluster.scheduler.periodic_callbacks["tick"].callback_time == 1000
    nannies = list(cluster._cluster.workers.values())
    assert len(nannies) == 2 and all(n.periodic_callbacks["memory_monitor"].callback_time == 1000 for n in nannies)


@pytest.mark.filterwarnings("ignore:Port 8787 is already in use")  # the module's cluster holds it
def test_local_cluster_leaves_this_process_environment_alone(tmp_path: Path) -> None:
    """Dask's nannies write their workers' environment into the client's os.environ; a
    MALLOC_TRIM_THRESHOLD_ left there would reach every later cluster's workers."""
    import os

    import dask

    import simulations.executors as executors

    before = dict(os.environ)
    saved = executors.LOCAL_CLUSTER_CONFIG
    executors.LOCAL_CLUSTER_CONFIG = {}  # Dask's defaults: the nannies set MALLOC_TRIM_THRESHOLD_=65536
    try:
        with DaskExecutor("local:1") as ex:
            trim = ex._client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    finally:
        executors.LOCAL_CLUSTER_CONFIG = saved
    expected = before.get("MALLOC_TRIM_THRESHOLD_") or str(
        dask.config.get("distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"))
    assert list(trim.values()) == [expected]  # the worker did get Dask's setting
    assert dict(os.environ) == before


def test_workers_that_cannot_import_the_package_are_a_config_error() -> None:
    class Client:
        closed = False

        def run(self, *_args: Any) -> None:
            raise ModuleNotFoundError("No module named 'simulations'")

        def close(self) -> None:
            self.closed = True

    ex = DaskExecutor.__new__(DaskExecutor)
    ex.address, ex._cluster, ex._client = "tcp://10.0.0.5:8786", None, Client()
    client = ex._client
    with pytest.raises(ConfigError) as info:
        ex._warm_workers()
    assert info.value.key_path == ("executor", "address")
    assert "tcp://10.0.0.5:8786" in info.value.message and "install the same onlineeval version" in info.value.message
    assert client.closed


@pytest.mark.parametrize("spec", ["local:0", "local:x", "local:2x", "local", ""])
def test_bad_scheduler_spec(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_scheduler(spec)
    assert info.value.key_path == ("executor", "address")
    with pytest.raises(ConfigError) as info:
        parse_scheduler(spec, ("scheduler",))
    assert info.value.key_path == ("scheduler",)


def test_make_executor_choices() -> None:
    assert parse_scheduler("tcp://10.0.0.5:8786") == ("tcp://10.0.0.5:8786", None)
    assert parse_scheduler("local:3") == ("local", 3)
    assert parse_scheduler("localhost:8786") == ("localhost:8786", None)  # an address, not 8786 local workers
    assert isinstance(make_executor(None, 2, None), LocalExecutor)
    assert make_executor(None, None, {"type": "local", "workers": 3}).workers == 3
    assert make_executor(None, 1, {"type": "local", "workers": 3}).workers == 1  # --workers wins
    with pytest.raises(ConfigError) as info:
        make_executor(None, None, {"type": "dask"})
    assert info.value.key_path == ("executor", "address")
    with pytest.raises(ConfigError) as info:
        make_executor(None, None, {"type": "ray"})
    assert info.value.key_path == ("executor", "type") and "local, dask" in info.value.message
    with pytest.raises(ConfigError) as info:
        make_executor("local:0", None, {"type": "local"})  # --scheduler wins over the config
    assert info.value.key_path == ("scheduler",)  # the argument, not the config's executor keys


def test_workers_of_another_stream_version_are_a_config_error(cluster: DaskExecutor) -> None:
    """Workers whose onlineeval gives other numbers for a seed are refused by name (a sweep would mix two versions'
    replicates); the cluster's own workers, of this version, pass."""
    import simulations.job as job

    ex = DaskExecutor.__new__(DaskExecutor)
    ex.address, ex._cluster = "tcp://10.0.0.5:8786", None
    seen = cluster._client.run(worker_stream_version)
    assert len(seen) == 2 and set(seen.values()) == {job.STREAM_VERSION}
    ex._client = None
    ex._check_stream_versions(seen)  # the same version: no error

    class Client:
        closed = False

        def close(self) -> None:
            self.closed = True

    ex._client = client = Client()
    first = sorted(seen)[0]
    with pytest.raises(ConfigError) as info:
        ex._check_stream_versions({**seen, first: job.STREAM_VERSION - 1})
    assert info.value.key_path == ("executor", "address")
    message = info.value.message
    assert f"{first} ({job.STREAM_VERSION - 1})" in message and f"stream version {job.STREAM_VERSION} here" in message
    assert sorted(seen)[1] not in message and "install the same onlineeval version" in message
    assert client.closed


def test_workers_from_before_the_stream_version_are_a_config_error(cluster: DaskExecutor) -> None:
    """A worker whose onlineeval predates the stream version (its simulations.executors has no
    worker_stream_version, as every onlineeval of stream version 1) cannot answer the version query: it is refused
    by name as the start's ConfigError, not an unhandled error from the worker, and the executor is closed."""
    client = cluster._client
    old = sorted(client.scheduler_info()["workers"])[0]

    def forget() -> bool:  # nested: shipped by value, run on the worker
        import simulations.executors as m

        m._saved_worker_stream_version = m.__dict__.pop("worker_stream_version")
        return True

    def restore() -> bool:
        import simulations.executors as m

        m.worker_stream_version = m.__dict__.pop("_saved_worker_stream_version")
        return True

    class Client:  # the cluster's client; closing it is only recorded (the cluster serves the other tests)
        closed = False

        def run(self, *args: Any, **kwargs: Any) -> Any:
            return client.run(*args, **kwargs)

        def close(self) -> None:
            self.closed = True

    ex = DaskExecutor.__new__(DaskExecutor)
    ex.address, ex._cluster, ex._client = "tcp://10.0.0.5:8786", None, (fake := Client())
    assert client.run(forget, workers=[old]) == {old: True}
    try:
        with pytest.raises(ConfigError) as info:
            ex._warm_workers()
    finally:
        assert client.run(restore, workers=[old]) == {old: True}
    assert info.value.key_path == ("executor", "address")
    message = info.value.message
    assert f"{old} (none:" in message and "before the stream version" in message, message
    assert sorted(client.scheduler_info()["workers"])[1] not in message
    assert fake.closed
    ex._client = Client()
    ex._warm_workers()  # restored: the same version everywhere, no error


def test_tasks_carry_the_clients_stream_version(cluster: DaskExecutor, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Every task carries the client's stream version, so a worker that joined after the start's check and runs
    another version refuses the task with a ConfigError naming it, instead of returning another stream's numbers
    (here the client's version is altered after the start; the workers keep theirs)."""
    import simulations.job as job

    real = job.STREAM_VERSION
    monkeypatch.setattr(job, "STREAM_VERSION", real + 1)
    with pytest.raises(ConfigError) as info:
        run_sweep(make_sweep(tmp_path / "dask", chunk=4), executor=cluster)
    message = info.value.message
    assert info.value.key_path == ("executor", "address") and "the Dask worker at tcp://" in message
    assert f"stream version {real} there, {real + 1} on the client" in message


def test_more_replicates_on_dask_compute_only_the_new_ones(cluster: DaskExecutor, tmp_path: Path) -> None:
    """A sweep finished with 3 replicates (local processes), run again with 5 on the cluster: the tasks sent to
    the workers hold replicates 3 and 4 of each point and nothing else (and one truth task per point), and the
    folder equals a fresh 5-replicate run's byte for byte."""
    from collections import Counter

    from simulations.executors import TRUTH

    ref = tmp_path / "ref"
    run_sweep(make_sweep(ref, replicates=5), workers=1)
    out = tmp_path / "out"
    run_sweep(make_sweep(out, replicates=3), workers=1)
    client = cluster._client
    sent: list[tuple[Any, ...]] = []
    real_submit = client.submit

    def submit(fn: Any, *args: Any, **kw: Any) -> Any:
        sent.append(args)
        return real_submit(fn, *args, **kw)

    client.submit = submit
    try:
        log: list[str] = []
        result = run_sweep(make_sweep(out, replicates=5, chunk=1), executor=cluster, log=log.append)
    finally:
        client.submit = real_submit
    assert result.computed == [0, 1, 2]
    replicates = Counter(i for args in sent if args[3] != TRUTH for i in args[2])
    assert replicates == {3: 3, 4: 3}
    assert sum(args[3] == TRUTH for args in sent) == 3
    assert sum("3 of 5 replicates reused from the finished run" in m for m in log) == 3
    assert (out / "points.csv").read_bytes() == (ref / "points.csv").read_bytes()
    for i in range(3):
        name = f"points/point-00{i}/replicates.csv"
        assert (out / name).read_bytes() == (ref / name).read_bytes()


def test_run_task_refuses_another_stream_version_in_process() -> None:
    import simulations.job as job
    from simulations.executors import run_task

    with pytest.raises(ConfigError, match=f"a Dask worker runs .*stream version {job.STREAM_VERSION} there, 0 on"):
        run_task(None, None, (), "replicates", stream_version=0)  # type: ignore[arg-type]


def test_local_cluster_from_a_script_without_a_main_guard_is_one_clear_error(tmp_path: Path) -> None:
    """Review 2, E.3: a script that starts ``local:N`` at its top level made every spawned worker re-import it and
    start a cluster of its own (495 lines of tracebacks, exit 1). Now the workers exit quietly and the script gets
    one ConfigError naming the ``__main__`` guard; the same lines under the guard start the cluster (control)."""
    import subprocess
    import sys

    body = 'ex = DaskExecutor("local:1")\nex.close()\nprint("started")\n'
    bare = tmp_path / "bare.py"
    bare.write_text("from simulations.executors import DaskExecutor\n" + body)
    guarded = tmp_path / "guarded.py"
    guarded.write_text("from simulations.executors import DaskExecutor\nif __name__ == '__main__':\n"
                       + "".join(f"    {line}\n" for line in body.splitlines()))
    out = subprocess.run([sys.executable, str(bare)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 1 and "started" not in out.stdout
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("onlineeval.errors.ConfigError: executor.address: local:1: ")
    assert 'if __name__ == "__main__":' in last
    assert "bootstrapping" not in out.stderr and "Nanny failed to start worker process" not in out.stderr
    assert len(out.stderr.splitlines()) < 30, out.stderr  # one traceback, the script's (was 495 lines)
    ok = subprocess.run([sys.executable, str(guarded)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.strip() == "started", ok.stderr


class _Records(list):
    """A logging handler's target: the records it got."""


def _capture(name: str) -> tuple[Any, _Records]:
    import logging

    got = _Records()
    handler = logging.Handler()
    handler.emit = got.append  # type: ignore[method-assign]
    logging.getLogger(name).addHandler(handler)
    return handler, got


def test_closing_a_cluster_it_started_silences_dask_loggers() -> None:
    """Review 2, C.2: a Ctrl-C left 'distributed.scheduler - ERROR - broadcast to ... failed: CommClosedError' lines
    after 'interrupted ...'. While the executor closes a cluster it started, Dask's loggers say nothing; their
    levels are restored after; a cluster given by address (not closed by the executor) keeps its client's logs."""
    import logging

    class Closing:
        def close(self) -> None:
            logging.getLogger("distributed.scheduler").error("broadcast to tcp://127.0.0.1:1 failed: CommClosedError")
            logging.getLogger("distributed").warning("closing")

    scheduler = logging.getLogger("distributed.scheduler")
    before = (scheduler.level, logging.getLogger("distributed").level)
    handler, got = _capture("distributed")
    try:
        ex = DaskExecutor.__new__(DaskExecutor)
        ex._client, ex._cluster = Closing(), Closing()
        ex.close()
        assert got == [] and ex._cluster is None and ex._client is None
        assert (scheduler.level, logging.getLogger("distributed").level) == before
        ex.close()  # idempotent
        remote = DaskExecutor.__new__(DaskExecutor)
        remote._client, remote._cluster = Closing(), None
        remote.close()
        assert [r.getMessage() for r in got][:1] == ["broadcast to tcp://127.0.0.1:1 failed: CommClosedError"]
    finally:
        logging.getLogger("distributed").removeHandler(handler)


def test_an_interrupt_while_the_workers_warm_up_closes_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C during the start (the workers' imports) closes the LocalCluster there and then, quietly, instead
    of leaving it to the interpreter's exit (where the review's ERROR lines came from)."""
    closed: list[Any] = []
    original = DaskExecutor.close

    def warm(self: DaskExecutor) -> None:
        raise KeyboardInterrupt

    def close(self: DaskExecutor) -> None:
        closed.append(self._cluster)
        original(self)

    monkeypatch.setattr(DaskExecutor, "_warm_workers", warm)
    monkeypatch.setattr(DaskExecutor, "close", close)
    with pytest.raises(KeyboardInterrupt):
        DaskExecutor("local:1")
    assert len(closed) == 1 and closed[0] is not None
    assert closed[0].status.name == "closed"


def _blocked(status: str) -> set[int]:
    """The signals blocked per a /proc/.../status text (its SigBlk mask)."""
    mask = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def test_local_cluster_workers_leave_sigint_to_the_client(cluster: DaskExecutor) -> None:
    """The workers of ``local:N`` start with SIGINT blocked (a terminal's Ctrl-C reaches the whole foreground
    group: it stopped workers in their first imports, each printing a traceback); they still end on SIGTERM, which
    their nannies send when the executor closes (the module's cluster closes at its end)."""
    import signal

    def masks() -> set[int]:
        with open("/proc/self/status", encoding="ascii") as fh:
            return _blocked(fh.read())

    seen = cluster._client.run(masks)
    assert len(seen) == 2
    for blocked in seen.values():
        assert signal.SIGINT in blocked and signal.SIGTERM not in blocked


def test_interrupts_deferred_records_blocks_and_restores() -> None:
    """Inside the block a SIGINT or SIGTERM is recorded (not raised) and a second one raises Interrupted; threads
    started inside, and processes they start, have SIGINT (not SIGTERM) blocked; the handlers and this thread's
    mask are restored after, and a SIGINT pending at the end is recorded, not lost."""
    import signal
    import subprocess
    import sys
    import threading

    from simulations.executors import interrupts_deferred
    from simulations.job import Interrupted

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    child: dict[str, str] = {}

    def spawn() -> None:
        child["status"] = subprocess.run([sys.executable, "-c", "print(open('/proc/self/status').read())"],
                                         capture_output=True, text=True, check=True).stdout
        with open(f"/proc/self/task/{threading.get_native_id()}/status", encoding="ascii") as fh:
            child["thread"] = fh.read()

    main = threading.main_thread().ident
    assert main is not None
    with interrupts_deferred() as stopped:
        signal.pthread_kill(main, signal.SIGINT)  # to this thread, which blocks it: pending until the block ends
        assert stopped == []
        thread = threading.Thread(target=spawn)
        thread.start()
        thread.join()
    assert stopped == [signal.SIGINT]  # recorded when the block ended, not lost
    assert signal.SIGINT in _blocked(child["thread"]) and signal.SIGINT in _blocked(child["status"])
    assert signal.SIGTERM not in _blocked(child["status"])
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask
    with pytest.raises(Interrupted) as second, interrupts_deferred() as stopped:
        signal.raise_signal(signal.SIGTERM)  # not blocked: handled (recorded) at once
        assert stopped == [signal.SIGTERM]
        signal.raise_signal(signal.SIGTERM)  # a second signal: raised at once
        pytest.fail("the second signal did not raise")
    assert second.value.exit_code == 143
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask


class _StartingCluster:
    """A LocalCluster stand-in whose start is interrupted: it signals this process (as a Ctrl-C would) and then
    finishes starting, or fails as Dask's does when its workers die (``fail``)."""

    fail = False
    made: list[_StartingCluster] = []

    def __init__(self, **_kw: Any) -> None:
        import signal

        self.closed = False
        _StartingCluster.made.append(self)
        signal.raise_signal(signal.SIGINT)  # to this thread (os.kill may go to one of Dask's threads)
        if self.fail:
            raise RuntimeError("Nanny failed to start.")

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("fail", [False, True])
def test_a_signal_while_the_cluster_starts_stops_after_closing_it(monkeypatch: pytest.MonkeyPatch,
                                                                  fail: bool) -> None:
    """A signal during LocalCluster's start is raised as Interrupted once the start returns, after closing the
    started cluster (before: Dask's exit hook closed the half-started one, printing 'AssertionError: Status.init'
    and 'Nanny failed to start'); a start that fails because of it is an interruption, not the ConfigError about
    a script without a ``__main__`` guard. The client is never made."""
    from simulations.job import Interrupted

    monkeypatch.setattr(distributed, "LocalCluster", _StartingCluster)
    monkeypatch.setattr(distributed, "Client", lambda *_a, **_k: pytest.fail("no client after an interrupt"))
    monkeypatch.setattr(_StartingCluster, "fail", fail)
    _StartingCluster.made.clear()
    with pytest.raises(Interrupted) as stopped:
        DaskExecutor("local:1")
    assert stopped.value.exit_code == 130
    assert len(_StartingCluster.made) == 1 and _StartingCluster.made[0].closed is (not fail)


def test_ctrl_c_during_the_cluster_start_is_one_line(tmp_path: Path) -> None:
    """``onlineeval sweep --scheduler local:2``, SIGINT to its whole process group (as a terminal's Ctrl-C) while
    the cluster's workers start: exit 130 and one 'interrupted' line, no traceback (was distributed's
    'AssertionError: Status.init' from its exit hook, 'Nanny failed to start' and every worker's
    KeyboardInterrupt in its imports); the sweep never got to run ('running ... task(s)' is not printed); no
    process of the run is left."""
    import json
    import os
    import signal
    import subprocess
    import sys

    from tests.test_sweep import BASE

    config = tmp_path / "sweep.json"
    config.write_text(json.dumps({"base": BASE, "points": [{"rankers.B.noise": 0.7}], "output": str(tmp_path / "out")}))
    proc = subprocess.Popen([sys.executable, "-m", "onlineeval.cli", "sweep", "--config", str(config), "--scheduler",
                             "local:2", "--writers", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,  # this module's cluster holds Dask's dashboard port:
                            env={**os.environ, "PYTHONWARNINGS": "ignore:Port 8787 is already in use"})

    def workers() -> list[str]:  # Dask's worker processes: spawned by the nannies
        out = subprocess.run(["ps", "-ww", "-o", "args=", "--ppid", str(proc.pid)], capture_output=True, text=True)
        return [line for line in out.stdout.splitlines() if "spawn_main" in line]

    deadline = time.monotonic() + 120
    while not workers():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the cluster's workers were not seen starting: {proc.communicate()[1]}")
        time.sleep(0.01)
    time.sleep(0.3)  # the workers are importing (seconds); the cluster has not started
    os.killpg(proc.pid, signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "interrupted (stopped by SIGINT); finished work is kept", err
    assert "Traceback" not in err and "Error" not in err and "task(s)" not in err, err
    assert len(err.splitlines()) == 3, err  # preparing the world, the progress line, interrupted
    time.sleep(0.5)
    left = subprocess.run(["ps", "-o", "stat=", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert [s for s in left if not s.startswith("Z")] == []  # (an orphan's zombie waits for the system's init)
