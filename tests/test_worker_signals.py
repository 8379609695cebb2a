"""Pool workers end silently when the parent terminates them.

The parent turns SIGINT and SIGTERM into an exception while it runs (``signals_interrupt``) and, when
interrupted, cancels the queue and ``terminate()``s its workers. A forked worker inherits that handler;
left in place, a worker terminated in the middle of a task raised there and printed a traceback next to
the run's one-line "interrupted" message (seen in CI, 1 run in ~50). Both worker initializers therefore
ignore SIGINT and restore SIGTERM's default action (end the process).
"""

from __future__ import annotations

import multiprocessing
import signal
from concurrent.futures import ProcessPoolExecutor

import pytest

from simulations import executors, runner
from simulations.job import signals_interrupt


def _handlers() -> tuple[object, object]:
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method")
def test_workers_do_not_keep_the_parents_raising_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.UserModels, "from_config", staticmethod(lambda users: None))
    ctx = multiprocessing.get_context("fork")
    with signals_interrupt():
        assert callable(signal.getsignal(signal.SIGTERM))  # the parent's handler raises
        config = type("Config", (), {"users": None})()
        for init, args in ((executors._init_local_worker, ()), (runner._init_worker, (config, None))):
            with ProcessPoolExecutor(1, mp_context=ctx, initializer=init, initargs=args) as pool:
                assert pool.submit(_handlers).result() == (signal.SIG_IGN, signal.SIG_DFL)
