"""``onlineeval validate`` shows progress on stderr: a per-impression candidate in Python takes minutes at the
default ``--n`` (2m37s for a team-draft wrapper, 2026-12-05), and the command printed nothing until its report."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.cli.validate import ValidateProgress
from onlineeval.interleaving.team_draft import TeamDraft
from onlineeval.interleaving.validation import _from_object, validate_interleaver
from onlineeval.interleaving.validation.progress import VALIDATION_PROGRESS

sys.path.insert(0, str(Path(__file__).parent))

_REF = TeamDraft()


class Counted:
    """A correct per-impression team-draft that counts its own calls."""

    def __init__(self) -> None:
        self.n = 0

    def interleave(self, lists, rng):  # noqa: ANN001, ANN201
        self.n += 1
        res = _REF.interleave([np.asarray([lists[0]]), np.asarray([lists[1]])], rng)
        keep = res.ranking[0] >= 0
        return res.ranking[0][keep].tolist(), res.team[0][keep].tolist()

    def credit(self, shown, teams, clicks):  # noqa: ANN001, ANN201
        self.n += 1
        a = sum(1 for t, c in zip(teams, clicks) if c and t == 0)
        b = sum(1 for t, c in zip(teams, clicks) if c and t == 1)
        return (b > a) - (a > b)


class Recorder:
    def __init__(self) -> None:
        self.stages: list[tuple[int, int, tuple[str, ...]]] = []
        self.calls = 0

    def stage(self, names: tuple[str, ...], index: int, total: int) -> None:
        self.stages.append((index, total, names))



def test_the_battery_reports_every_stage_and_every_candidate_call() -> None:
    rec = Recorder()

    def calls(k: int) -> None:
        rec.calls += k

    reporter = type("R", (), {"stage": rec.stage, "calls": staticmethod(calls)})()
    cand = Counted()
    token = VALIDATION_PROGRESS.set(reporter)
    try:
        report = validate_interleaver(_from_object("counted", cand), "team_draft", n=2000, seed=1)
    finally:
        VALIDATION_PROGRESS.reset(token)
    assert report.passed
    assert [i for i, _, _ in rec.stages] == list(range(8)) and {t for _, t, _ in rec.stages} == {8}
    assert rec.stages[0][2] == ("structure", "prefix_balance") and rec.stages[-1][2] == ("coin_no_preference",)
    assert rec.calls == cand.n > 2000
    # without a reporter nothing is reported (the Python API)
    assert VALIDATION_PROGRESS.get() is None


class Planned:
    """A reporter keeping the planned totals and the calls."""

    def __init__(self) -> None:
        self.plans: list[int] = []
        self.calls_seen = 0

    def plan(self, total: int) -> None:
        self.plans.append(total)

    def stage(self, names: tuple[str, ...], index: int, total: int) -> None:
        pass

    def calls(self, k: int) -> None:
        self.calls_seen += k


def _run_planned(candidate, method: str, n: int, seed: int) -> Planned:  # noqa: ANN001
    rec = Planned()
    token = VALIDATION_PROGRESS.set(rec)
    try:
        validate_interleaver(candidate, method, n=n, seed=seed)
    finally:
        VALIDATION_PROGRESS.reset(token)
    return rec


@pytest.mark.parametrize("method", ["team_draft", "team_draft_multileave", "balanced", "probabilistic",
                                    "probabilistic_multileave", "optimized"])
def test_the_planned_total_is_the_candidates_impressions_for_every_method(method: str) -> None:
    from onlineeval.interleaving.registry import get_interleaver

    # n = 700: not a multiple of the scenarios' counts, so each stage's rounding counts
    rec = _run_planned(_from_object("batch", get_interleaver(method)), method, 700, 3)
    assert len(rec.plans) == 1 and rec.plans[0] == rec.calls_seen > 700


def test_the_planned_total_counts_every_per_impression_call() -> None:
    cand = Counted()
    rec = _run_planned(_from_object("counted", cand), "team_draft", 1100, 4)
    assert rec.plans == [cand.n] and rec.calls_seen == cand.n


class OneBased(Counted):
    """Counted with 1-based team labels (credit_agreement is then skipped: the plan shrinks by its credits)."""

    def interleave(self, lists, rng):  # noqa: ANN001, ANN201
        shown, teams = super().interleave(lists, rng)
        return shown, [t + 1 for t in teams]

    def credit(self, shown, teams, clicks):  # noqa: ANN001, ANN201
        return super().credit(shown, [t - 1 for t in teams], clicks)


def test_a_skipped_check_takes_its_impressions_off_the_plan() -> None:
    cand = OneBased()
    rec = _run_planned(_from_object("one-based", cand), "team_draft", 600, 5)
    assert len(rec.plans) == 2 and rec.plans[0] > rec.plans[1] == cand.n == rec.calls_seen


def test_progress_lines_give_the_share_of_the_plan_and_the_time_left() -> None:
    now = [0.0]
    out = io.StringIO()
    p = ValidateProgress(out, every=5.0, clock=lambda: now[0])
    p.plan(10_000)
    p.stage(("structure",), 0, 8)
    now[0] = 6.0
    p.calls(2_000)
    now[0] = 12.0
    p.calls(10_000 - 2_000)
    p.done()
    assert out.getvalue().splitlines() == [
        "validate: stage 1/8 (structure): 2,000 of 10,000 impressions through the candidate's calls (20%), 6s, "
        "about 24s left",
        "validate: stage 1/8 (structure): 10,000 of 10,000 impressions through the candidate's calls (100%), 12s",
        "validate: done: 10,000 impressions through the candidate's calls, 12s",
    ]


def test_batch_candidates_count_their_impressions_and_the_reference_none() -> None:
    seen = []
    reporter = type("R", (), {"stage": lambda self, *a: None, "calls": lambda self, k: seen.append(k)})()
    token = VALIDATION_PROGRESS.set(reporter)
    try:
        validate_interleaver(_from_object("batch", TeamDraft()), "team_draft", n=400, seed=2)
    finally:
        VALIDATION_PROGRESS.reset(token)
    assert seen and all(k > 0 for k in seen)
    # the reference's own draws are not the candidate's: the batch candidate's calls alone, whose sizes are the
    # scenarios' impressions
    assert sum(seen) < 10 * 400 * 50


def test_progress_lines_are_rate_limited_and_end_with_a_total() -> None:
    now = [0.0]
    out = io.StringIO()
    p = ValidateProgress(out, every=5.0, clock=lambda: now[0])
    p.stage(("structure",), 0, 8)
    p.calls(1000)
    now[0] = 6.0
    p.calls(1000)
    now[0] = 7.0
    p.stage(("aa_no_preference",), 1, 8)  # within 5 s of the last line: nothing
    now[0] = 12.5
    p.calls(500)
    p.done()
    assert out.getvalue().splitlines() == [
        "validate: stage 1/8 (structure): 2,000 impressions through the candidate's calls, 6s",
        "validate: stage 2/8 (aa_no_preference): 2,500 impressions through the candidate's calls, 12s",
        "validate: done: 2,500 impressions through the candidate's calls, 12s",
    ]
    quiet = io.StringIO()
    q = ValidateProgress(quiet, every=5.0, clock=lambda: 1.0)
    q.calls(10)
    q.done()
    assert quiet.getvalue() == ""  # a short run prints nothing


def test_the_json_report_stays_alone_on_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ValidateProgress.__init__, "__defaults__", (None, 0.0, None))  # every line due
    res = CliRunner().invoke(app, ["validate", "-i", "onlineeval.interleaving.team_draft:TeamDraft", "--n", "200",
                                   "--format", "json"])
    assert res.exit_code == 0
    assert res.stdout.lstrip().startswith("{") and "validate: done" in res.stderr
    assert "validate: stage 1/8" in res.stderr


# ---------------------------------------------------------------- validate --log
def test_a_logs_passes_report_their_progress_to_the_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """read_log reports bytes of the file's size, validate_log the impressions of each pass, every PROGRESS_EVERY
    lines (monkeypatched small) and at each pass's end (done = total), done never decreasing."""
    from onlineeval.interleaving.validation import logs, read_log, validate_log
    from tests.test_validate import write_log

    monkeypatch.setattr(logs, "PROGRESS_EVERY", 100)
    monkeypatch.setattr(logs, "CHUNK_CELLS", 3_000)  # several chunks (15 cells a row)
    path = tmp_path / "log.jsonl"
    write_log(path, 1050, np.random.default_rng(3))
    seen: list[tuple[str, int, int]] = []
    records = read_log(path, on_progress=lambda *a: seen.append(a))
    report = validate_log(records, "team_draft", on_progress=lambda *a: seen.append(a))
    assert report.passed
    size = path.stat().st_size
    by_pass: dict[str, list[tuple[int, int]]] = {}
    for what, done, total in seen:
        by_pass.setdefault(what, []).append((done, total))
    assert list(by_pass) == ["reading", "reference", "checking"]
    assert {t for _, t in by_pass["reading"]} == {size} and len(by_pass["reading"]) == 11  # 10 reports, the end
    assert {t for _, t in by_pass["reference"]} == {t for _, t in by_pass["checking"]} == {1050}
    assert len(by_pass["reference"]) == 11 and len(by_pass["checking"]) > 3
    for steps in by_pass.values():
        done = [d for d, _ in steps]
        assert done == sorted(done) and done[-1] == steps[-1][1]


def test_log_progress_lines_name_the_pass_its_share_and_the_time_left() -> None:
    from onlineeval.cli.validate import LogProgress

    now = [0.0]
    out = io.StringIO()
    p = LogProgress(out, every=5.0, clock=lambda: now[0])
    now[0] = 6.0
    p("reading", 20_000_000, 80_000_000)
    now[0] = 8.0
    p("reading", 80_000_000, 80_000_000)  # within 5 s of the last line: nothing
    now[0] = 9.0
    p("checking", 0, 1000)  # the checks begin (3 s after the last line: nothing)
    now[0] = 16.0
    p("checking", 250, 1000)  # (7 s into this pass: 21 s more at its rate)
    p.done()
    assert out.getvalue().splitlines() == [
        "validate: reading the log: 20.0 of 80.0 MB (25%), 6s, about 18s left in this pass",
        "validate: checking the impressions: 250 of 1,000 impressions (25%), 16s, about 21s left in this pass",
        "validate: done: 1,000 logged impressions checked, 16s",
    ]
    quiet = io.StringIO()
    q = LogProgress(quiet, every=5.0, clock=lambda: 1.0)
    q("reading", 10, 10)
    q.done()
    assert quiet.getvalue() == ""


def test_validate_log_shows_progress_and_keeps_stdout_for_the_report(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from onlineeval.cli.validate import LogProgress
    from tests.test_validate import write_log

    monkeypatch.setattr(LogProgress.__init__, "__defaults__", (None, 0.0, None))  # every line due
    path = tmp_path / "log.jsonl"
    write_log(path, 300, np.random.default_rng(4))
    res = CliRunner().invoke(app, ["validate", "--log", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert res.stdout.lstrip().startswith("{")
    assert "validate: reading the log:" in res.stderr and "validate: done: 300 logged impressions" in res.stderr
