"""The replicate progress of ``onlineeval simulate``: rich's bar with ETA on a terminal,
plain lines with the same ETA elsewhere, nothing with ``--quiet`` (a fake clock makes the
ETA exact: the rate of recently finished replicates)."""

from __future__ import annotations

import io

from onlineeval.cli.simulate import _Progress


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_off_a_terminal_with_eta_from_the_recent_rate() -> None:
    stream, clock = _Stream(tty=False), _Clock()
    progress = _Progress(stream, clock)
    progress.update(0, 10)
    clock.now += 10
    progress.update(2, 10)                  # one finished batch: no rate yet (start-up is not a rate)
    clock.now += 2
    progress.update(3, 10)                  # within 5 s of the last line: not printed
    clock.now += 8
    progress.update(4, 10)                  # 2 more in the 10 s since the first batch: 0.2/s, 6 left -> 30 s
    clock.now += 30
    progress.update(10, 10)                 # the last line always shows
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines == [
        "replicates [------------------------------] 0/10  0s elapsed, ETA unknown",
        "replicates [######------------------------] 2/10  10s elapsed, ETA unknown",
        "replicates [############------------------] 4/10  20s elapsed, ETA 30s",
        "replicates [##############################] 10/10  50s elapsed, ETA done",
    ]


def test_resumed_replicates_count_as_done_but_not_in_the_rate() -> None:
    stream, clock = _Stream(tty=False), _Clock()
    progress = _Progress(stream, clock)
    progress.update(6, 10)                  # 6 finished by an interrupted run
    clock.now += 10
    progress.update(8, 10)                  # the first batch of this run
    clock.now += 5
    progress.update(9, 10)                  # 1 in the 5 s since: 0.2/s, 1 left -> 5 s
    progress.close()
    assert stream.getvalue().splitlines()[-1].endswith("9/10  15s elapsed, ETA 5s")


def test_a_terminal_gets_rich_bar_with_elapsed_and_eta() -> None:
    stream, clock = _Stream(tty=True), _Clock()
    progress = _Progress(stream, clock)
    progress.update(0, 4)
    clock.now += 5
    progress.update(2, 4)
    progress.close()
    out = stream.getvalue()
    assert "replicates" in out and "2/4" in out and "ETA" in out and "0:00:05" in out
    assert out.count("\n") <= 1 and "\r" in out  # one line redrawn in place, not a scroll of lines
