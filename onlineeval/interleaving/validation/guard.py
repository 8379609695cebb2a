"""Calling untrusted candidate code: exceptions, exits, hangs and malformed output become named failures.

Every call into an implementation under test (its import, its constructor, each
``interleave`` and ``credit`` call, each batch call of the batch API) runs through
:func:`call_candidate`. A failure there is a :class:`CandidateError` naming the call and
what went wrong; the battery turns it into a ``FAIL`` row (``candidate_exception``,
``candidate_exit``, ``candidate_timeout`` or ``candidate_output``) and exit code 1, so a
candidate can never make ``onlineeval validate`` exit 0 without a report.

* ``SystemExit`` (``sys.exit(0)``, ``raise SystemExit``) is caught like any exception;
  ``os._exit`` is replaced while candidate code runs (in this process only: a process the
  candidate forks keeps the real one), so ``os._exit(0)`` is caught too.
* Timeout (:class:`Watchdog`): ``signal.setitimer(ITIMER_REAL)`` and a ``SIGALRM`` handler
  installed for the duration of the validation and restored afterwards (the previous
  handler, and a previous timer with the time it had left). The alarm re-fires every
  second after the limit, so a candidate that swallows the first interrupt is interrupted
  again; one that swallows :data:`STUBBORN_ALARMS` of them (``except BaseException`` in a
  loop) cannot be unwound, and the process then prints a one-line error naming the call
  and exits with status 1 (no report: nothing else can run in its stack).

Platform limits (documented, not checked): the timeout needs POSIX ``setitimer`` and the
main thread; on Windows, or when validation runs in another thread, calls are not timed.
Python delivers the alarm between bytecodes, so a call blocked inside C code that never
returns to the interpreter is interrupted only when it does. A candidate that kills its
own process (``os.kill(os.getpid(), SIGKILL)``, ``os.abort()``), calls ``posix._exit``
captured before it was imported, or replaces the ``SIGALRM`` handler is out of scope: the
process then ends with a non-zero status, never a silent 0 after ``os.abort`` or a signal.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar


from onlineeval.errors import ConfigError, InputError, check_seed, finite_number

__all__ = ["CHECK_OF_KIND", "DEFAULT_TIMEOUT", "CandidateError", "Watchdog", "call_candidate", "check_seed",
           "check_timeout", "short"]

T = TypeVar("T")

#: default limit of one candidate call, seconds (``--timeout``)
DEFAULT_TIMEOUT = 10.0

#: alarms (one at the limit, then one a second) a candidate call may swallow before the process exits with 1
STUBBORN_ALARMS = 3

#: the report row a failure of each kind becomes
CHECK_OF_KIND = {
    "exception": "candidate_exception",
    "exit": "candidate_exit",
    "timeout": "candidate_timeout",
    "output": "candidate_output",
}

_EXCERPT = 200


def short(value: Any, limit: int = _EXCERPT) -> str:
    """``repr(value)`` cut to ``limit`` characters (a message never echoes a huge value)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a user object whose repr fails
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class CandidateError(InputError):
    """The implementation under test failed a call: an exception, an exit, a timeout or malformed output.

    Exit code 1 (a failed validation, not bad input). ``report`` holds the validation report
    built around the failure (the checks completed before it, the failing row, the checks
    not run) once the battery has caught it.

    Parameters
    ----------
    kind:
        ``"exception"``, ``"exit"``, ``"timeout"`` or ``"output"`` (see :data:`CHECK_OF_KIND`).
    name:
        The candidate's name.
    call:
        The call, e.g. ``interleave([[1, 2], [2, 1]])``.
    detail:
        What went wrong, e.g. ``called sys.exit(0)``.
    """

    exit_code = 1

    def __init__(self, kind: str, name: str, call: str, detail: str) -> None:
        self.kind = kind
        self.name = name
        self.call = call
        self.detail = detail
        self.report: Any = None
        super().__init__(f"{name}: {call} {detail}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str, str]]:
        # rebuilt from its own fields across a process boundary (InputError's fields are not this constructor's);
        # the report is not carried
        return type(self), (self.kind, self.name, self.call, self.detail)

    @property
    def check(self) -> str:
        """The name of the report row this failure becomes."""
        return CHECK_OF_KIND[self.kind]


class _Timeout(BaseException):
    """Raised by the alarm handler inside a candidate call (a BaseException: ``except Exception`` misses it)."""


class _OsExit(BaseException):
    """Raised by the replaced ``os._exit`` inside a candidate call."""

    def __init__(self, code: Any) -> None:
        super().__init__(code)
        self.code = code


def _exit_text(code: Any) -> str:
    return "sys.exit()" if code is None else f"sys.exit({short(code, 60)})"


class Watchdog:
    """Per-call time limit and exit interception for candidate calls (a context manager).

    Parameters
    ----------
    timeout:
        Seconds one call may take; ``None`` (or 0) for no limit. Exits are intercepted
        either way.
    """

    def __init__(self, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout if timeout else None
        self.timed = False
        self._active = False
        self._old_handler: Any = None
        self._old_timer: tuple[float, float] = (0.0, 0.0)
        self._real_exit: Callable[[int], Any] | None = None
        self._pid = os.getpid()
        self._fired = 0
        self._current = ("", "")

    # -------------------------------------------------------------- setup / teardown
    def __enter__(self) -> Watchdog:  # noqa: PYI034 - Python 3.10 has no typing.Self
        self.timed = (self.timeout is not None and hasattr(signal, "setitimer")
                      and threading.current_thread() is threading.main_thread())
        if self.timed:
            self._old_timer = signal.setitimer(signal.ITIMER_REAL, 0)
            self._old_handler = signal.signal(signal.SIGALRM, self._on_alarm)
        self._real_exit = os._exit
        os._exit = self._fake_exit  # type: ignore[assignment]
        _STACK.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _STACK.remove(self)
        if self._real_exit is not None:
            os._exit = self._real_exit  # type: ignore[assignment]
        if self.timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._old_handler if self._old_handler is not None else signal.SIG_DFL)
            if self._old_timer[0] > 0:
                signal.setitimer(signal.ITIMER_REAL, *self._old_timer)

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if not self._active:
            return
        self._fired += 1
        if self._fired > STUBBORN_ALARMS:   # the candidate swallowed every interrupt: stop the process, loudly
            sys.stderr.write(f"error: {self._current[0]}: {self._current[1]} did not return within "
                             f"{self.timeout:g} s and ignored {STUBBORN_ALARMS} interrupts; validation FAILED "
                             "(candidate_timeout)\n")
            sys.stderr.flush()
            (self._real_exit or os._exit)(1)
        raise _Timeout()

    def _fake_exit(self, code: int) -> Any:
        if os.getpid() != self._pid or not self._active or self._real_exit is None:
            return (self._real_exit or os._exit)(code)   # a forked child, or the harness itself
        raise _OsExit(code)

    # -------------------------------------------------------------- calls
    def call(self, name: str, call: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` under the time limit; any failure becomes a :class:`CandidateError`."""
        if self._active:      # a nested call (the candidate calls back into guarded code): one limit
            return fn(*args, **kwargs)
        self._active = True
        self._fired = 0
        self._current = (name, call)
        if self.timed:
            limit = float(self.timeout or 0.0)
            signal.setitimer(signal.ITIMER_REAL, limit, min(limit, 1.0))
        try:
            return fn(*args, **kwargs)
        except _Timeout:
            raise CandidateError("timeout", name, call, f"did not return within {self.timeout:g} s "
                                 "(--timeout)") from None
        except _OsExit as exc:
            raise CandidateError("exit", name, call, f"called os._exit({short(exc.code, 60)})") from None
        except SystemExit as exc:
            raise CandidateError("exit", name, call, f"called {_exit_text(exc.code)}") from None
        except KeyboardInterrupt:
            raise
        except CandidateError:
            raise
        except Exception as exc:  # noqa: BLE001 - user code: report it in one line
            text = str(exc)
            text = text if len(text) <= 300 else text[:297] + "..."
            raise CandidateError("exception", name, call, f"raised {type(exc).__name__}: {text}") from None
        finally:
            if self.timed:
                signal.setitimer(signal.ITIMER_REAL, 0)
            self._active = False


_STACK: list[Watchdog] = []


def call_candidate(name: str, call: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call candidate code under the innermost active :class:`Watchdog` (exits caught, no limit outside one)."""
    if _STACK:
        return _STACK[-1].call(name, call, fn, *args, **kwargs)
    with Watchdog(None) as dog:
        return dog.call(name, call, fn, *args, **kwargs)


@contextmanager
def watchdog(timeout: float | None) -> Iterator[Watchdog]:
    """``with watchdog(10.0):`` candidate calls inside are timed (see :class:`Watchdog`)."""
    with Watchdog(timeout) as dog:
        yield dog


#: The longest timeout per call, in seconds (about 31 years): ``setitimer`` takes no more than the platform's time_t
#: (10^20 seconds raised an OverflowError when the first call was timed); 0 asks for no limit.
MAX_TIMEOUT = 1e9


def check_timeout(timeout: object) -> float | None:
    """Seconds per candidate call: a positive finite number up to :data:`MAX_TIMEOUT`, or ``None`` / ``0`` for no
    limit."""
    if timeout is None:
        return None
    seconds = finite_number(timeout)
    if seconds is None or not 0 <= seconds <= MAX_TIMEOUT:
        raise ConfigError(("timeout",), f"must be a number of seconds from 0 to {MAX_TIMEOUT:.0e} (0: no limit), "
                                        f"got {timeout!r:.40}")
    return seconds or None
