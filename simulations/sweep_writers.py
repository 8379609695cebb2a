"""Writing a sweep's finished points off the client's main thread.

When a point's truth and last chunk of replicates are in, its folder is written by
:func:`simulations.job.finish`: the analysis of its replicates, ``summary.json``, the CSV
tables, the two figures and ``report.html``. That is about 1 s of CPU per point
(``configs/sweep.yaml``: 0.3 s of analysis, 0.5 s of figures), and the sweep's client did
it for every point, one after the other, in the thread that receives the tasks' results:
with 2 replicates per point on 2 cores the client then used more CPU than all the tasks
together (19-21 s against 12-14 s), and next to the 2 task workers its thread got a third of
the CPU, so its backlog of points ran on for 14-22 s after the last task.

:class:`PointWriters` hands each finished point (its config, world, user models, truths and
replicates' rows, about 1 MB pickled) to a small pool of writer processes, which run the
same :func:`~simulations.job.finish`, so the folders are byte for byte what the client wrote
(PNG and HTML included). ``processes=0`` writes in the calling thread, as before.

Measured (``benchmarks/bench_sweep_client.py``, 20 points x 2 replicates, 2 task processes
and 2 writers on 2 cores shared with other jobs, against ``writers=0`` in the same run): at
load average 3-4 the wall time 0.75-0.93 times (one repeat 1.71, other jobs using 4 times the
CPU then), the time after the last task 8 s instead of 15 s; the CPU is not smaller (the
writers 1.09-1.17 times the client thread's before, the tasks 5-12% more next to them), so on
a saturated machine (load 7-10) the wall time was 1.03-1.13 times. The writers pay off where
the client has cores the tasks do not use.

The pool is started when it is created, after the parent imported :data:`WRITER_MODULES`:
with the ``fork`` start method (Linux's default before Python 3.14) the writers inherit
those modules and start in milliseconds; otherwise each imports them once (about 0.7 s of
CPU). Writers ignore SIGINT and die on SIGTERM (the client handles both and ends them);
an interrupted point keeps its partial file, which the client removes only after its
writer has finished, so the point is written again on resume.
"""

from __future__ import annotations

import gc
import importlib
import os
import pickle
import signal
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from onlineeval.errors import OnlineEvalError, OutputError

__all__ = ["WRITER_MODULES", "PointWriters", "default_writers", "import_writer_modules", "write_point"]

#: what :func:`simulations.job.finish` imports lazily (the analysis's sequential, multiple-comparison,
#: SRM and CUPED summaries, the decomposition, the plots, matplotlib's Agg canvas, the HTML
#: report, and the exact interleaving truths' draw tables and programmes, whose per-query values
#: the truths' SE over worlds reads): imported by the client before it starts the writers, which then inherit them
#: (``tests/test_sweep_writers.py`` checks that a point's folder then imports nothing more).
WRITER_MODULES: tuple[str, ...] = (
    "matplotlib.backends.backend_agg",
    "matplotlib.figure",
    "onlineeval.stats.multiple",
    "onlineeval.stats.sequential",
    "onlineeval.interleaving",
    "onlineeval.stats.sequential_tests",
    "simulations.cuped",
    "simulations.decomposition",
    "simulations.designs.interleaving",
    "simulations.html_report",
    "simulations.html_report.simulate",
    "simulations.job",
    "simulations.multiple",
    "simulations.plots",
    "simulations.report",
    "simulations.sequential",
    "simulations.srm",
    "simulations.truth_interleaving_exact",
)
#: pandas's own modules that writing the CSV tables and pivoting the curves load lazily (names
#: of pandas 2; skipped when a pandas version has none of that name)
_PANDAS_LAZY: tuple[str, ...] = ("pandas.core.reshape.reshape", "pandas.io.formats.csvs")


def import_writer_modules() -> None:
    """Import :data:`WRITER_MODULES` in this process (and Pillow's image plugins, which
    saving the first PNG would load)."""
    for name in WRITER_MODULES:
        importlib.import_module(name)
    for name in _PANDAS_LAZY:
        try:
            importlib.import_module(name)
        except ImportError:  # pragma: no cover - another pandas layout: imported on first use instead
            pass
    from PIL import Image

    Image.preinit()


def _died(index: int) -> OutputError:
    """The error of a writer process that ended abruptly, found when point ``index`` was collected or handed
    over (the pool breaks as a whole: which point's writer died is not known)."""
    return OutputError(f"a process writing the sweep's point folders ended abruptly (killed, or out of memory?) "
                       f"while point {index} was written or handed over; the points' finished replicates are kept "
                       "in their partial files: run again to resume")


def default_writers() -> int:
    """Writer processes by default: 2, or none on a single core (where one writer would take
    the same share of the CPU as the client's thread)."""
    return 2 if (os.cpu_count() or 1) >= 2 else 0


def write_point(config: Any, world: Any, users: Any, truths: list[Any], done: dict[int, list[dict[str, Any]]],
                folder: Path, fingerprint: str) -> None:
    """Write one finished point's folder (:func:`simulations.job.finish`; ``config.output`` is ``folder``)."""
    from simulations.job import finish

    finish(config, world, users, truths, done, folder, fingerprint)


def _write_in_process(*args: Any) -> None:
    """:func:`write_point` in a writer process: an error whose type cannot be rebuilt from its
    pickle (a :class:`ConfigError` needs its key path) reaches the client as an
    :class:`OutputError` with the same message."""
    try:
        write_point(*args)
    except OnlineEvalError as exc:
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:  # noqa: BLE001 - any failure to rebuild it
            raise OutputError(str(exc)) from None
        raise


def _init_writer() -> None:
    # the client handles Ctrl-C and SIGTERM (a forked writer would inherit its handler, which raises)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from simulations.runner import die_with_parent

    die_with_parent()  # a killed client's writers end (review 15, F1)
    import_writer_modules()  # inherited with fork: nothing to do
    gc.freeze()  # the objects inherited from the client are never collected here: no pass over them


class PointWriters:
    """Writes finished points' folders in ``processes`` writer processes (0: in this thread).

    :meth:`submit` a point, then collect the points whose folders are written with
    :meth:`finished` (in this thread; it raises a writer's error); :meth:`close` ends the
    writers (after an error, pending points are cancelled and the writers terminated).
    ``on_written(point)`` is called as soon as a point's folder is written, from the pool's
    thread (for a progress display; the caller's thread may be waiting for a task)."""

    def __init__(self, processes: int, on_written: Callable[[int], None] | None = None) -> None:
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 0:
            raise ValueError(f"writer processes must be a whole number >= 0, got {processes!r}")
        self.processes = processes
        self._on_written = on_written  # called with a point as soon as its folder is written (any thread)
        self._pending: dict[Future[None], int] = {}
        self._written: list[int] = []  # written in this thread (processes=0), not collected yet
        self._pool: ProcessPoolExecutor | None = None
        if processes:
            import_writer_modules()
            self._pool = ProcessPoolExecutor(max_workers=processes, initializer=_init_writer)
            self._pool.submit(int).result()  # start the writers now (forked before any other thread exists)

    def submit(self, index: int, config: Any, world: Any, users: Any, truths: list[Any],
               done: dict[int, list[dict[str, Any]]], folder: Path, fingerprint: str) -> None:
        """Write point ``index``'s folder (in a writer, or now in this thread with ``processes=0``)."""
        args = (config, world, users, truths, done, folder, fingerprint)
        if self._pool is None:
            write_point(*args)
            self._written.append(index)
            if self._on_written is not None:
                self._on_written(index)
            return
        from concurrent.futures.process import BrokenProcessPool

        try:
            fut = self._pool.submit(_write_in_process, *args)
        except BrokenProcessPool:  # a writer died (an earlier point's) before this point was handed over
            raise _died(index) from None
        self._pending[fut] = index
        if self._on_written is not None:
            fut.add_done_callback(self._done_callback(index))

    def _done_callback(self, index: int) -> Callable[[Future[None]], None]:
        def done(fut: Future[None]) -> None:  # in the pool's thread; an error is raised by finished()
            if not fut.cancelled() and fut.exception() is None and self._on_written is not None:
                self._on_written(index)

        return done

    @property
    def pids(self) -> list[int]:
        """Process ids of the writers (empty with ``processes=0`` or once closed)."""
        return list(getattr(self._pool, "_processes", None) or {})

    @property
    def pending(self) -> int:
        """Points submitted and not collected yet."""
        return len(self._pending) + len(self._written)

    def finished(self, wait: bool = False) -> list[int]:
        """The points written since the last call, in the order they finished; with ``wait``,
        every pending point. Raises the first writer's error."""
        out, self._written = self._written, []
        if wait and self._pending:
            from concurrent.futures import as_completed

            for fut in as_completed(list(self._pending)):
                out.append(self._collect(fut))
        else:
            out += [self._collect(fut) for fut in [f for f in self._pending if f.done()]]
        return out

    def _collect(self, fut: Future[None]) -> int:
        from concurrent.futures.process import BrokenProcessPool

        index = self._pending.pop(fut)
        try:
            fut.result()  # a writer's error, raised here
        except BrokenProcessPool:
            raise _died(index) from None
        return index

    def close(self) -> None:
        """End the writers: wait for them when nothing is pending, otherwise cancel the
        pending points and terminate the writers (after an error or an interrupt)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if self._pending:
            from simulations.runner import _stop_pool

            self._pending.clear()
            _stop_pool(pool)
        else:
            pool.shutdown(wait=True)

    def __enter__(self) -> PointWriters:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
