"""EM progress of long click-model fits (``clicks fit`` / ``clicks evaluate`` on stderr).

References: the fit's own trace (the progress callback sees every iteration's
log-likelihood the trace records) and a fake clock and stream for the display.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from typer.testing import CliRunner

from clickmodels.estimation import fit_log
from clickmodels.logs import from_sessions
from onlineeval.cli import app
from onlineeval.cli.clicks import FitProgress


def small_log(n: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    sessions = []
    for i in range(n):
        docs = [f"d{j}" for j in rng.permutation(6)[:4]]
        clicked = [d for r, d in enumerate(docs) if rng.random() < 0.5 / (r + 1)]
        sessions.append((f"s{i}", "q", docs, clicked))
    return from_sessions(sessions, lines=list(range(1, n + 1)))


@pytest.mark.parametrize("accelerate", [False, True])
def test_callback_sees_every_iteration_of_the_trace(accelerate: bool) -> None:
    """Plain EM calls back after every iteration; SQUAREM after each cycle's first E-step (its E-steps so far,
    1, 4, 7, ...: a cycle is three), with the log-likelihood the trace records."""
    seen: list[tuple[int, int, float, float | None]] = []
    fit = fit_log("pbm", small_log(), on_iteration=lambda *a: seen.append(a), accelerate=accelerate)
    tr = fit.trace
    assert tr.accelerated is accelerate
    if accelerate:
        assert [s[0] for s in seen] == list(range(1, tr.iterations + 1, 3)) and len(seen) >= 3
    else:
        assert [s[0] for s in seen] == list(range(1, tr.iterations + 1))
    assert [s[2] for s in seen] == list(tr.log_likelihood)
    assert all(s[1] == tr.max_iter for s in seen) and seen[0][3] is None
    lls = tr.log_likelihood
    for (_, _, _, change), prev, cur in zip(seen[1:], lls[:-1], lls[1:], strict=True):
        assert change == abs(cur - prev) / abs(prev)
    again = fit_log("pbm", small_log(), accelerate=accelerate)  # the callback does not change the fit
    assert again.trace.log_likelihood == tr.log_likelihood


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_plain_lines_at_most_every_five_seconds_and_the_last() -> None:
    clock, out = Clock(), io.StringIO()
    show = FitProgress("dbn", 1e-7, stream=out, every=5.0, clock=clock)
    for it in range(1, 13):  # one iteration every 2 s; converges at iteration 12
        clock.t = 2.0 * it
        show(it, 200, -1000.0 + it, None if it == 1 else (1e-3 if it < 12 else 1e-8))
    lines = out.getvalue().splitlines()
    # t = 6 (>= 5 s after the start), 12, 18 and the converged last line at t = 24
    assert [line.split("iteration ")[1].split(",")[0] for line in lines] == ["3/200", "6/200", "9/200", "12/200"]
    assert lines[-1].startswith("fitting dbn: EM iteration 12/200, log-likelihood -988.0000, relative change 1.0e-08")


def test_a_short_fit_prints_nothing_off_a_terminal() -> None:
    clock, out = Clock(), io.StringIO()
    show = FitProgress("pbm", 1e-7, stream=out, clock=clock)
    for it in range(1, 4):
        clock.t = 0.1 * it
        show(it, 3, -10.0, None)
    assert out.getvalue() == ""


def test_terminal_shows_a_live_bar_until_em_stops() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    clock, out = Clock(), Tty()
    show = FitProgress("ubm", 1e-7, stream=out, clock=clock)
    for it in range(1, 4):
        clock.t = float(it)
        show(it, 200, -10.0 - it, None if it == 1 else (0.5 if it < 3 else 1e-9))
        if it < 3:
            assert show._bar is not None and show._bar.tasks[0].completed == it
    assert show._bar is None  # converged: the live bar is stopped
    text = out.getvalue()
    assert "fitting ubm" in text and "3/200" in text and "LL -13.0000 change 1.0e-09" in text
    assert "ETA <=" in text and "…" not in text  # fits 80 columns


def test_cli_quiet_and_short_fits_keep_stderr_clean(tmp_path) -> None:
    log = tmp_path / "log.tsv"
    log.write_text("".join(f"s{i}\tq\td0,d1,d2\t{'d0' if i % 3 == 0 else ''}\n" for i in range(60)))
    for extra in ([], ["--quiet"]):
        res = CliRunner().invoke(app, ["clicks", "fit", "--log", str(log), "--model", "pbm",
                                       "--out", str(tmp_path / "pbm.json"), *extra])
        assert res.exit_code == 0, res.output
        assert "fitting pbm" not in res.stderr
