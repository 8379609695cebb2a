"""A rate-limited progress line on stderr, shared by long computations of the commands.

:class:`ProgressLines` writes a task's progress as whole lines (for logs and pipes, where a live bar
would be noise): at most one every ``every`` seconds, then the last one, and nothing at all for a task
shorter than ``every`` seconds. ``estimate``'s :class:`~onlineeval.cli.estimate.BootstrapProgress` and
:class:`~onlineeval.cli.estimate.PropensityProgress` (:class:`CountProgress`) and ``clicks``'
:class:`~onlineeval.cli.clicks.FitProgress` (off a terminal) and :class:`~onlineeval.cli.clicks.RefitProgress`
(``fit --bootstrap``) are built on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["CountProgress", "ProgressLines", "duration"]


class ProgressLines:
    """Progress lines of one task at a time on ``stream`` (stderr by default).

    :meth:`start` begins a task (its time counts from then; the constructor starts the first);
    :meth:`update` writes ``text(seconds spent)`` when at least ``every`` seconds have passed since the
    task's start or its previous line, and always for the task's last update, unless it showed nothing
    before (a short task stays silent). ``clock`` (seconds, ``time.monotonic`` by default) is for tests.
    """

    def __init__(self, stream: Any = None, every: float = 5.0, clock: Callable[[], float] | None = None) -> None:
        import sys
        import time

        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock if clock is not None else time.monotonic
        self._every = every
        self.start()

    def start(self) -> None:
        """A new task: its time counts from now, and it has shown no line yet."""
        self._t0 = self._last = self._clock()
        self._shown = False

    def update(self, last: bool, text: Callable[[float], str]) -> None:
        """Write ``text(seconds since start)`` as a line if one is due (``last``: the task's final update)."""
        now = self._clock()
        if (last and not self._shown) or (not last and now - self._last < self._every):
            return
        self._last = now
        self._stream.write(f"{text(now - self._t0)}\n")
        self._stream.flush()
        self._shown = True

    @property
    def clock(self) -> Callable[[], float]:
        """The clock the lines are timed by (for a caller that times its own parts, such as a pass's rate)."""
        return self._clock


class CountProgress(ProgressLines):
    """Progress lines of counted tasks reported as ``(what, done, total)`` calls: ``{prefix}{what}: {done}/{total}
    {unit}, {time spent}, about {time left} left`` (the last line without the time left); a call with another
    ``what``, or ``done`` 1, starts a new task. Subclasses set :attr:`prefix` and :attr:`unit`."""

    prefix = ""
    unit = ""

    def __init__(self, stream: Any = None, every: float = 5.0, clock: Callable[[], float] | None = None) -> None:
        super().__init__(stream, every, clock)
        self._what: str | None = None

    def __call__(self, what: str, done: int, total: int) -> None:
        if what != self._what or done == 1:  # a new task
            self._what = what
            self.start()

        def text(spent: float) -> str:
            left = "" if done >= total else f", about {duration(spent / done * (total - done))} left"
            return f"{self.prefix}{what}: {done}/{total}{self.unit}, {duration(spent)}{left}"

        self.update(done >= total, text)


def duration(seconds: float) -> str:
    """``14s``, ``1m43s``: seconds rounded, minutes from 60 s."""
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
