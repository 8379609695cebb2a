"""A rate-limited progress line on stderr, shared by long computations of the commands.

:class:`ProgressLines` writes a task's progress as whole lines (for logs and pipes, where a live bar
would be noise): at most one every ``every`` seconds, then the last one, and nothing at all for a task
shorter than ``every`` seconds. ``estimate``'s :class:`~onlineeval.cli.estimate.BootstrapProgress` and
``clicks``' :class:`~onlineeval.cli.clicks.FitProgress` (off a terminal) are built on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ProgressLines", "duration"]


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


def duration(seconds: float) -> str:
    """``14s``, ``1m43s``: seconds rounded, minutes from 60 s."""
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
