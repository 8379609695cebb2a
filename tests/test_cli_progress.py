"""The shared rate-limited progress line (onlineeval/cli/_progress.py) behind estimate's bootstrap progress
and clicks' EM progress off a terminal: a fake clock and stream."""

from __future__ import annotations

import io

from onlineeval.cli._progress import ProgressLines, duration


def test_lines_at_most_every_interval_then_the_last() -> None:
    t, out = [0.0], io.StringIO()
    p = ProgressLines(out, every=5.0, clock=lambda: t[0])
    for step in range(1, 13):  # one step every 2 s, the 12th the last
        t[0] = 2.0 * step
        p.update(step == 12, lambda spent, step=step: f"step {step} at {spent:g}")
    # due at t = 6 (5 s after the start at 0), 12, 18, and the last at 24
    assert out.getvalue().splitlines() == ["step 3 at 6", "step 6 at 12", "step 9 at 18", "step 12 at 24"]


def test_a_short_task_is_silent_and_start_begins_a_new_one() -> None:
    t, out = [0.0], io.StringIO()
    p = ProgressLines(out, every=5.0, clock=lambda: t[0])
    t[0] = 4.0
    p.update(True, lambda spent: "short")  # done within 5 s: nothing, not even its last line
    t[0] = 100.0
    p.start()  # the time counts from 100, and the previous task's lines do not count
    t[0] = 104.0
    p.update(False, lambda spent: "early")
    t[0] = 106.0
    p.update(False, lambda spent: f"second at {spent:g}")
    t[0] = 107.0
    p.update(True, lambda spent: f"last at {spent:g}")
    assert out.getvalue() == "second at 6\nlast at 7\n"


def test_duration() -> None:
    assert [duration(s) for s in (0.4, 14.2, 59.6, 60, 103, 3600)] == ["0s", "14s", "1m00s", "1m00s", "1m43s",
                                                                          "60m00s"]
