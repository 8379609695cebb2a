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
from simulations.executors import (
    TASK_MODULES,
    DaskExecutor,
    LocalExecutor,
    make_executor,
    parse_scheduler,
    worker_stream_version,
)
from simulations.sweep import run_sweep
from tests.test_sweep import make_sweep

distributed = pytest.importorskip("distributed", reason="dask[distributed] is not installed")


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


@pytest.mark.parametrize("spec", ["local:0", "local:x", "local", ""])
def test_bad_scheduler_spec(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_scheduler(spec)
    assert info.value.key_path == ("executor", "address")


def test_make_executor_choices() -> None:
    assert parse_scheduler("tcp://10.0.0.5:8786") == ("tcp://10.0.0.5:8786", None)
    assert parse_scheduler("local:3") == ("local", 3)
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
    assert info.value.key_path == ("executor", "address")


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
