"""A SIGTERM during numba's compilation ends the run as an interruption (review 15, F4).

Before: ``signals_interrupt``'s handler raised from any bytecode, including llvmlite's ctypes callback inside numba's
first compilation; ctypes swallowed the exception ("Exception ignored on calling ctypes callback function") and left
numba broken, so a sweep ended with ``RuntimeError: no compiled object yet`` and a traceback instead of "interrupted
(stopped by SIGTERM)". Now the signal is deferred while numba's compiler lock is held (and raised right after), and a
signal whose exception was swallowed anyway turns the error that follows (or the block's normal end) into the
:class:`Interrupted` it was.
"""

from __future__ import annotations

import ctypes
import signal
import time

import pytest

from simulations.job import Interrupted, signals_interrupt


def test_a_signal_while_numba_compiles_is_raised_after_the_compilation() -> None:
    from numba.core.compiler_lock import global_compiler_lock

    steps: list[str] = []
    with pytest.raises(Interrupted) as err, signals_interrupt():
        with global_compiler_lock:  # as while numba compiles or loads a kernel in this thread
            signal.raise_signal(signal.SIGTERM)
            steps.append("compiled")  # not interrupted inside the compilation
        end = time.monotonic() + 5
        while time.monotonic() < end:  # raised promptly once the lock is free
            time.sleep(0.01)
        steps.append("not interrupted")
    assert steps == ["compiled"] and err.value.exit_code == 128 + signal.SIGTERM


def test_a_real_compilation_interrupted_then_runs_again() -> None:
    import numba

    @numba.njit(cache=False)
    def f(x: int) -> int:
        return x + 1

    real_compile = f.compile
    compiled: list[object] = []

    def compile_with_signal(sig: object) -> object:  # the signal lands in the middle of the compilation
        from numba.core.compiler_lock import global_compiler_lock

        with global_compiler_lock:
            signal.raise_signal(signal.SIGTERM)
            compiled.append(real_compile(sig))
            return compiled[-1]

    f.compile = compile_with_signal  # type: ignore[method-assign]
    with pytest.raises(Interrupted), signals_interrupt():
        f(1)
        time.sleep(5)
    assert len(compiled) == 1  # the compilation finished before the interruption
    assert f(2) == 3  # numba is not broken


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # ctypes reports what it swallows
def test_a_swallowed_signal_turns_the_error_that_follows_into_the_interruption() -> None:
    callback = ctypes.CFUNCTYPE(None)(lambda: signal.raise_signal(signal.SIGTERM))
    with pytest.raises(Interrupted) as err, signals_interrupt():
        callback()  # the handler's exception is swallowed by ctypes, as in llvmlite's cache callback
        raise RuntimeError("no compiled object yet")
    assert isinstance(err.value.__cause__, RuntimeError) and err.value.exit_code == 128 + signal.SIGTERM


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_swallowed_signal_still_stops_the_run_at_the_end_of_the_block() -> None:
    callback = ctypes.CFUNCTYPE(None)(lambda: signal.raise_signal(signal.SIGINT))
    with pytest.raises(Interrupted) as err, signals_interrupt():
        callback()
    assert err.value.exit_code == 128 + signal.SIGINT


def test_without_a_signal_errors_pass_unchanged() -> None:
    with pytest.raises(RuntimeError, match="other"), signals_interrupt():
        raise RuntimeError("other")
    with signals_interrupt():
        pass
