"""Progress across a whole sweep (points and replicates done, ETA) on a terminal or a log stream:
:class:`SweepProgress`, used by :func:`simulations.sweep.run_sweep`."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["SweepProgress"]


class SweepProgress:
    """Progress across the whole sweep on a stream: points done, replicates done, ETA.

    On a terminal, rich's live bars (points and replicates, elapsed and ETA) redrawn in place;
    otherwise plain lines, at most one every ``every`` seconds (and the first and the last), e.g.
    ``sweep: points 2/4, replicates 20/40, 10s elapsed, ETA 20s`` (``..., writing the last 2 point(s)`` once
    every replicate is computed and points are still being analysed and written). The ETA is the replicates left
    divided by the rate of replicates computed by this run since its first finished task (so the workers' start-up,
    imports and first worlds are not in the rate: review 2, C.2, a Dask sweep said ETA 135s at 17 s and was done
    at 25 s);
    replicates resumed from an earlier run and those of the first task count as done, not in the rate, and the
    ETA is unknown until a second task finishes.
    """

    def __init__(self, points: int, replicates: int, stream: TextIO | None = None, every: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        import sys

        self.points, self.replicates = points, replicates
        self.points_done = self.replicates_done = self._start_reps = 0
        self._rate_t0: float | None = None  # the rate's clock: when the first task finished
        self._stream = stream if stream is not None else sys.stderr
        self._every, self._clock = every, clock
        self._t0 = clock()
        self._last = -math.inf
        self._bars: Any = None  # rich Progress on a terminal
        self._lock = threading.RLock()
        isatty = getattr(self._stream, "isatty", None)
        self._tty = bool(isatty()) if callable(isatty) else False

    def start(self, points_done: int, replicates_done: int) -> None:
        self.points_done, self.replicates_done, self._start_reps = points_done, replicates_done, replicates_done
        self._t0 = self._clock()
        self._rate_t0 = None
        if self._tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bars = Progress(
                TextColumn("sweep {task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("{task.fields[eta]}"),
                console=Console(file=self._stream), get_time=self._clock,
            )
            self._bars.add_task("points", total=self.points, completed=points_done, eta="")
            self._bars.add_task("replicates", total=self.replicates, completed=replicates_done, eta="")
            self._bars.start()
        self.show(force=True)

    def add(self, replicates: int = 0, points: int = 0) -> None:
        """Count finished replicates and points (safe from any thread: a point is counted by the
        thread that sees its writer finish)."""
        with self._lock:
            self.replicates_done += replicates
            self.points_done += points
            if replicates and self._rate_t0 is None:  # the first finished task starts the rate's clock
                self._rate_t0, self._start_reps = self._clock(), self.replicates_done
            self.show(force=self.points_done >= self.points)
            if self.points_done >= self.points:
                self.close()

    def eta(self) -> float | None:
        ran = self.replicates_done - self._start_reps
        if ran <= 0 or self._rate_t0 is None:
            return None
        return (self._clock() - self._rate_t0) / ran * (self.replicates - self.replicates_done)

    def _eta_text(self) -> str:
        """``ETA 20s``, ``ETA unknown``, ``ETA done``, or, once every replicate is computed but points are still
        being analysed and written, ``writing the last 3 point(s)`` (not "done": review 12, finding 1)."""
        eta = self.eta()
        if self.replicates_done >= self.replicates:
            left = self.points - self.points_done
            return "ETA done" if left <= 0 else f"writing the last {left} point(s)"
        return "ETA unknown" if eta is None else f"ETA {eta:.0f}s"

    def show(self, force: bool = False) -> None:
        now = self._clock()
        if self._bars is not None:
            points, reps = self._bars.task_ids
            self._bars.update(points, completed=self.points_done)
            self._bars.update(reps, completed=self.replicates_done, eta=self._eta_text())
            return
        if self._tty:
            return  # closed
        if not force and now - self._last < self._every:
            return
        self._last = now
        self._stream.write(
            f"sweep: points {self.points_done}/{self.points}, replicates {self.replicates_done}/{self.replicates}, "
            f"{now - self._t0:.0f}s elapsed, {self._eta_text()}\n"
        )
        self._stream.flush()

    def close(self) -> None:
        """Stop the live bars (a no-op off a terminal or when already stopped)."""
        if self._bars is not None:
            self._bars.stop()
            self._bars = None
