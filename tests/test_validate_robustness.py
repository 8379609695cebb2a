"""Issue 10, validate: a candidate's malformed output, exits and hangs fail the run; bad options and logs are errors.

Candidates are tiny modules written to ``tmp_path`` that subclass the textbook team-draft
of ``broken_interleavers`` and break one thing; exits and hangs run the real command in
a subprocess (an in-process ``sys.exit`` would end the test runner otherwise).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import ConfigError, InputError
from onlineeval.interleaving import get_interleaver
from onlineeval.interleaving.validation import (
    CandidateError,
    Watchdog,
    _from_object,
    invariants,
    load_candidate,
    logs,
    read_log,
    validate_interleaver,
    validate_log,
)

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))
import broken_interleavers as bi

N = 300   # the failures below happen on the first calls; the passing runs stay cheap


def _module(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text("from broken_interleavers import TeamDraft\nimport numpy as np\n" + textwrap.dedent(body))
    return path


def _cli(*args: str, cwd: Path | None = None, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "onlineeval.cli", "validate", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout, check=False)


def _failure(exc: pytest.ExceptionInfo[CandidateError]) -> tuple[str, str]:
    """The failing row of the report a CandidateError carries: (name, message)."""
    rep = exc.value.report
    assert rep is not None and not rep.passed and rep.exit_code == 1
    failed = [c for c in rep.checks if c.failed]
    assert len(failed) == 1
    return failed[0].name, failed[0].message


# ----------------------------------------------------------------------------- 1. candidate output
class _Ids(bi.TeamDraft):
    def __init__(self, convert: object) -> None:
        self.convert = convert

    def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
        shown, teams = super().interleave(lists, rng)
        return self.convert(shown), teams  # type: ignore[operator]


@pytest.mark.parametrize("convert, match", [
    (lambda s: s[:-1] + [float("inf")], "document id inf (float) at slot 6"),
    (lambda s: [float(d) for d in s], "document id 2.0 (float) at slot 1"),      # truncated to int: a false PASS
    (lambda s: [float(d) + 0.5 for d in s], ".5 (float) at slot 1"),
    (lambda s: [True] + s[1:], "document id True (bool)"),
    (lambda s: [str(d) for d in s], "document id '2' (str)"),
    (lambda s: [None] + s[1:], "document id None (NoneType)"),
    (lambda s: [-3] + s[1:], "document id -3 at slot 1; allowed 0.."),
    (lambda s: [2 ** 70] + s[1:], "allowed 0..9223372036854775807"),
    (lambda s: s * 10, "returned 60 document ids for input lists of 12 documents"),
    (lambda s: np.asarray(s, dtype=np.float64), "document id 2.0 (float)"),
    (lambda s: 7, "returned 7 as the document ids"),
])
def test_malformed_document_ids_fail_candidate_output(convert: object, match: str) -> None:
    with pytest.raises(CandidateError, match=re.escape(match)) as exc:
        validate_interleaver(_from_object("ids", _Ids(convert)), "team_draft", n=N)
    name, message = _failure(exc)
    assert name == "candidate_output" and "interleave([[1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 5]])" in message
    assert "during structure" in message
    skipped = [c.name for c in exc.value.report.checks if c.status == "SKIPPED"]
    assert skipped[:2] == ["structure", "prefix_balance"] and "outcome_distribution" in skipped


def test_numpy_integer_ids_and_array_credits_are_accepted() -> None:
    class NumpyTypes(bi.TeamDraft):
        def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
            shown, teams = super().interleave(lists, rng)
            return np.asarray(shown, dtype=np.int32), [np.int64(t) for t in teams]

        def credit(self, shown, teams, clicks):  # type: ignore[no-untyped-def]
            return np.float32(super().credit(shown, teams, clicks))

    rep = validate_interleaver(_from_object("numpy", NumpyTypes()), "team_draft", n=1500, seed=2)
    assert rep.passed, rep.format()


def test_an_array_of_shown_and_teams_is_accepted() -> None:
    class Stacked(bi.TeamDraft):
        def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
            return np.array(super().interleave(lists, rng), dtype=np.int64)

    rep = validate_interleaver(_from_object("stacked", Stacked()), "team_draft", n=1500, seed=2)
    assert rep.passed, rep.format()


class _Credit(bi.TeamDraft):
    def __init__(self, value: object) -> None:
        self.value = value

    def credit(self, shown, teams, clicks):  # type: ignore[no-untyped-def]
        return self.value


@pytest.mark.parametrize("value, match", [
    ("1", "returned '1': a str, not a number"),
    (None, "returned None: a NoneType, not a number"),
    (float("nan"), "not finite"),
    (float("inf"), "not finite"),
    (True, "a bool, not a number"),
    (("1", "0"), "'1' (str) is not a real number"),
    ((1.0, None), "None (NoneType) is not a real number"),
    ((0.5, float("-inf")), "not finite"),
    (np.array(["a", "b"]), "an array of dtype <U1"),
    (1 + 2j, "a complex, not a number"),
    (10 ** 400, "too large for a float"),
    ((1.0, 2.0, 3.0), "2 credits"),
    ([[0.0, 1.0], [2.0]], "ragged rows"),
])
def test_malformed_credit_fails_candidate_output(value: object, match: str) -> None:
    with pytest.raises(CandidateError, match=re.escape(match)) as exc:
        validate_interleaver(_from_object("credit", _Credit(value)), "team_draft", n=N)
    name, message = _failure(exc)
    assert name == "candidate_output" and message.startswith("during aa_no_preference: credit([")
    assert {c.name: c.status for c in exc.value.report.checks}["structure"] == "PASS"


def test_cli_reports_malformed_output_with_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _module(tmp_path, "infid", """
        class C(TeamDraft):
            def interleave(self, lists, rng):
                shown, teams = super().interleave(lists, rng)
                return shown[:-1] + [float("inf")], teams
        class S(TeamDraft):
            def credit(self, shown, teams, clicks):
                return "1"
    """)
    monkeypatch.syspath_prepend(str(TESTS))
    runner = CliRunner()
    res = runner.invoke(app, ["validate", "-i", f"{path}:C", "--n", str(N)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "candidate_output" in res.output and "document id inf (float)" in res.output
    assert "RESULT: FAIL (1 check failed)" in res.output
    res = runner.invoke(app, ["validate", "-i", f"{path}:S", "--n", str(N), "--format", "json"])
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "FAIL" and doc["exit_code"] == 1
    row = next(c for c in doc["checks"] if c["status"] == "FAIL")
    assert row["name"] == "candidate_output" and "a str, not a number" in row["message"]


def test_batch_api_candidate_output_is_checked() -> None:
    from onlineeval.interleaving.team_draft import TeamDraft

    class FloatRanking(TeamDraft):
        def interleave(self, rankings, rng, length=None):  # type: ignore[no-untyped-def]
            res = super().interleave(rankings, rng, length)
            return type(res)(res.ranking.astype(np.float64), res.team, res.rankings)

    with pytest.raises(CandidateError, match="returned a ranking of dtype float64; integers expected") as exc:
        validate_interleaver(_from_object("batch", FloatRanking()), "team_draft", n=N)
    assert _failure(exc)[0] == "candidate_output"


def test_exceptions_in_candidate_calls_fail_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _module(tmp_path, "boom", """
        class C(TeamDraft):
            def credit(self, shown, teams, clicks):
                raise ZeroDivisionError("boom")
    """)
    monkeypatch.syspath_prepend(str(TESTS))
    res = CliRunner().invoke(app, ["validate", "-i", f"{path}:C", "--n", str(N)])
    assert res.exit_code == 1 and "candidate_exception" in res.output
    assert "raised ZeroDivisionError: boom" in res.output and "Traceback" not in res.output


# ----------------------------------------------------------------------------- 2. bad options
@pytest.mark.parametrize("args, match", [
    (["--seed", "-1"], "--seed: must be a non-negative integer, got -1"),
    (["--timeout", "-1"], "--timeout: must be a number of seconds from 0 to 1e+09 (0: no limit), got -1.0"),
    (["--timeout", "nan"], "--timeout: must be a number of seconds from 0 to 1e+09 (0: no limit), got nan"),
    # setitimer's time_t: 1e20 seconds raised an OverflowError traceback at the first timed call
    (["--timeout", "1e20"], "--timeout: must be a number of seconds from 0 to 1e+09 (0: no limit), got 1e+20"),
    (["--timeout", "1e308"], "--timeout: must be a number of seconds from 0 to 1e+09 (0: no limit), got 1e+308"),
    (["--n", "100000000000"], "--n: must be an integer of at least 100 and at most 10,000,000"),
    (["--alpha", "inf"], "--alpha: must be in [1e-12, 1)"),
    (["--alpha", "1e-300"], "--alpha: must be in [1e-12, 1)"),  # a correct implementation failed better_ranker_wins
])
def test_bad_options_are_one_line_errors(args: list[str], match: str) -> None:
    res = CliRunner().invoke(app, ["validate", "-i", "onlineeval.interleaving.team_draft:TeamDraft", *args])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.output.strip().splitlines() == [f"error: {match}" + res.output.strip().split(match, 1)[1]]


@pytest.mark.parametrize("alpha", ["5", "0", "nan", "-1", "1e-300"])
def test_log_mode_refuses_a_level_outside_its_range(tmp_path: Path, alpha: str) -> None:
    """Log mode never checked --alpha: at 5 every p-value is below the level and a correct log failed."""
    p = tmp_path / "log.jsonl"
    p.write_text('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [1,0]}\n'
                 '{"rankings": [[1,2],[2,1]], "shown": [2,1], "teams": [1,0], "clicks": [0,1]}\n')
    res = CliRunner().invoke(app, ["validate", "--log", str(p), "--alpha", alpha])
    assert res.exit_code == 2 and res.output.strip() == f"error: --alpha: must be in [1e-12, 1), got {float(alpha)}"
    with pytest.raises(ConfigError, match="alpha"):
        validate_log(read_log(p), alpha=float(alpha))
    assert CliRunner().invoke(app, ["validate", "--log", str(p)]).output.strip().endswith("RESULT: PASS")


def test_negative_seed_in_log_mode(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_text('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [1,0]}\n')
    res = CliRunner().invoke(app, ["validate", "--log", str(p), "--seed", "-1"])
    assert res.exit_code == 2 and res.output.strip() == "error: --seed: must be a non-negative integer, got -1"
    with pytest.raises(ConfigError, match="seed"):
        validate_log(read_log(p), seed=-5)


# ----------------------------------------------------------------------------- 3. exits
def test_sys_exit_at_import_is_an_error_naming_the_module(tmp_path: Path) -> None:
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    res = _cli("-i", "exits.py", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert res.stderr.strip() == ("error: --interleaver: cannot import 'exits.py': the candidate called sys.exit(0) "
                                  "while being imported")
    (tmp_path / "exits2.py").write_text("import os\nos._exit(0)\n")
    with pytest.raises(ConfigError, match=r"called os._exit\(0\) while being imported"):
        load_candidate(str(tmp_path / "exits2.py"))
    (tmp_path / "ctor.py").write_text("import sys\nclass C:\n    def __init__(self):\n        sys.exit(3)\n")
    with pytest.raises(ConfigError, match=r"cannot construct .*ctor.py:C without arguments: the constructor "
                                          r"called sys.exit\(3\)"):
        load_candidate(str(tmp_path / "ctor.py") + ":C")


@pytest.mark.parametrize("body, check, during", [
    ("class C(TeamDraft):\n    def interleave(self, lists, rng):\n        import sys; sys.exit(0)\n",
     "called sys.exit(0)", "during structure"),
    ("class C(TeamDraft):\n    def credit(self, shown, teams, clicks):\n        import os; os._exit(0)\n",
     "called os._exit(0)", "during aa_no_preference"),
    ("class C(TeamDraft):\n    def interleave(self, lists, rng):\n        raise SystemExit\n",
     "called sys.exit()", "during structure"),
])
def test_exit_in_candidate_calls_fails_the_run(tmp_path: Path, body: str, check: str, during: str) -> None:
    path = _module(tmp_path, "exitcall", body)
    res = _cli("-i", f"{path}:C", "--n", str(N), "--format", "json")
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "FAIL" and doc["exit_code"] == 1
    row = next(c for c in doc["checks"] if c["status"] == "FAIL")
    assert row["name"] == "candidate_exit" and check in row["message"] and row["message"].startswith(during)


def test_forked_child_keeps_the_real_os_exit() -> None:
    if not hasattr(os, "fork"):
        pytest.skip("os.fork is POSIX only")

    class Forks(bi.TeamDraft):
        def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
            pid = os.fork()
            if pid == 0:
                os._exit(7)          # the child must really exit, not run the battery on
            _, status = os.waitpid(pid, 0)
            self.status = os.waitstatus_to_exitcode(status)
            return super().interleave(lists, rng)

    cand = Forks()
    with Watchdog(5.0) as dog:
        dog.call("forks", "interleave", cand.interleave, [[1, 2], [2, 1]], np.random.default_rng(0))
    assert cand.status == 7


# ----------------------------------------------------------------------------- 4. timeout
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the per-call timeout needs POSIX setitimer")
def test_hanging_candidate_fails_within_the_timeout(tmp_path: Path) -> None:
    path = _module(tmp_path, "hangs", """
        import time
        class C(TeamDraft):
            calls = 0
            def interleave(self, lists, rng):
                C.calls += 1
                if C.calls > 20:
                    while True:
                        pass
                return super().interleave(lists, rng)
        class Stubborn(TeamDraft):
            def credit(self, shown, teams, clicks):
                while True:
                    try:
                        time.sleep(100)
                    except BaseException:
                        pass
    """)
    t0 = time.monotonic()
    res = _cli("-i", f"{path}:C", "--n", str(N), "--timeout", "0.3", timeout=60)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "candidate_timeout" in res.stdout and "did not return within 0.3 s (--timeout)" in res.stdout
    t1 = time.monotonic()
    res = _cli("-i", f"{path}:Stubborn", "--n", str(N), "--timeout", "0.3", timeout=60)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error: ") and "ignored 3 interrupts; validation FAILED (candidate_timeout)" \
        in res.stderr
    assert time.monotonic() - t1 < 30 and t1 - t0 < 30


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="the per-call timeout needs POSIX setitimer")
def test_watchdog_times_calls_and_restores_the_previous_alarm() -> None:
    def old_handler(signum, frame):  # type: ignore[no-untyped-def]
        pass

    before = signal.signal(signal.SIGALRM, old_handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 50.0)
        with Watchdog(0.2) as dog:
            assert dog.call("x", "f()", lambda: 5) == 5
            with pytest.raises(CandidateError, match="f\\(\\) did not return within 0.2 s") as exc:
                dog.call("x", "f()", time.sleep, 5)
            assert exc.value.kind == "timeout" and exc.value.exit_code == 1
        assert signal.getsignal(signal.SIGALRM) is old_handler
        remaining = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 40.0 < remaining <= 50.0               # the earlier alarm is back, with the time it had left
        assert os._exit.__name__ == "_exit"           # the real os._exit is back
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


# ----------------------------------------------------------------------------- 5. logs
LINE = '{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [1,0]}\n'


@pytest.mark.parametrize("bad, match", [
    ('{"rankings": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "JSON nested too deeply"),
    (json.dumps({"rankings": [list(range(200_000)), [1]], "shown": [1], "teams": [1], "clicks": [0]}) + "\n",
     "'rankings\\[\\]' holds 200000 entries; at most 1,000 per impression"),
    (json.dumps({"rankings": [[1, 2], [2, 1]], "shown": list(range(1001)), "teams": [0], "clicks": [0]}) + "\n",
     "'shown' holds 1001 entries"),
    (json.dumps({"rankings": [[1]] * 65, "shown": [1], "teams": [0], "clicks": [0]}) + "\n", "65 rankings; at most 64"),
    ('{"rankings": [[' + "9" * 5000 + ", 2], [2, 1]]}\n", "not valid JSON"),
    ('{"pad": "' + "x" * (4 * 1024 * 1024) + '"}\n', "line longer than 4,194,304 bytes"),
    # a key twice was read with its last value (json.loads's default)
    ('{"rankings": [[1, 2], [2, 1]], "shown": [1, 2], "teams": [0, 1], "teams": [1, 0], "clicks": [0, 0]}\n',
     "key 'teams' appears twice in one object"),
])
def test_log_limits_and_deep_nesting_name_file_and_line(tmp_path: Path, bad: str, match: str) -> None:
    p = tmp_path / "log.jsonl"
    p.write_text(LINE + bad + LINE)
    with pytest.raises(InputError, match=match) as exc:
        read_log(p)
    assert str(exc.value).startswith(f"{p}:2: ")
    res = CliRunner().invoke(app, ["validate", "--log", str(p)])
    assert res.exit_code == 2 and res.output.startswith(f"error: {p}:2: ") and "Traceback" not in res.output
    assert len(res.output) < 400                      # a short message, never the input echoed


def _wide_log(path: Path, n: int, width: int, rng: np.random.Generator, corrupt_every: int = 0) -> None:
    """Team-draft impressions of two permutations of ``width`` documents shown in full, with outcomes."""
    il = bi.TeamDraft()
    with open(path, "w") as fh:
        for r in range(n):
            a = rng.permutation(width).tolist()
            b = rng.permutation(width).tolist()
            shown, teams = il.interleave([a, b], rng)
            clicks = (rng.random(len(shown)) < 0.3).tolist()
            outcome = il.credit(shown, teams, clicks)
            if corrupt_every and r % corrupt_every == 1:
                shown[0], teams[0] = shown[1], 1 - teams[0]     # a duplicate and a shifted label
            if corrupt_every and r % corrupt_every == 2:
                outcome = -outcome if outcome else 1
            fh.write(json.dumps({"rankings": [a, b], "shown": shown, "teams": teams, "clicks": clicks,
                                 "outcome": outcome}) + "\n")


def test_chunked_log_checks_equal_the_whole_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "log.jsonl"
    rng = np.random.default_rng(5)
    _wide_log(p, 120, 12, rng, corrupt_every=7)
    records = read_log(p)
    whole = validate_log(records, "team_draft", subject=str(p))
    assert len(list(logs._chunks(records, 2))) == 1
    monkeypatch.setattr(logs, "CHUNK_CELLS", 300)                   # about 8 impressions per chunk
    assert len(list(logs._chunks(records, 2))) > 10
    chunked = validate_log(records, "team_draft", subject=str(p))
    for a, b in zip(whole.checks, chunked.checks):
        assert a.name == b.name
        if a.name != "team_distribution":       # the reference's draws differ by chunk; the exact checks may not
            assert (a.status, a.value, a.message, a.counts) == (b.status, b.value, b.message, b.counts)
    exact = {c.name: c for c in whole.checks}
    assert exact["structure"].value == 17 and exact["credit_agreement"].value == 17   # lines 2, 9, ... and 3, 10, ...


def test_memory_per_impression_is_bounded(tmp_path: Path) -> None:
    """60 impressions of 1,000-document rankings shown in full: the old (m, n, k, K) broadcast needed 240 MB."""
    p = tmp_path / "wide.jsonl"
    rng = np.random.default_rng(1)
    rk = np.stack([np.argsort(rng.random((2, 60, 1000)), axis=2)[i] for i in range(2)])
    res = get_interleaver("team_draft").interleave(list(rk), rng)
    clicks = rng.random(res.ranking.shape) < 0.3
    with open(p, "w") as fh:
        fh.writelines(json.dumps({"rankings": rk[:, r].tolist(), "shown": res.ranking[r].tolist(),
                                 "teams": res.team[r].tolist(), "clicks": clicks[r].tolist()}) + "\n"
                      for r in range(60))
    records = read_log(p)
    assert {len(rec.shown) for rec in records} == {1000}
    tracemalloc.start()
    try:
        rep = validate_log(records, "team_draft", subject=str(p))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rep.passed, rep.format()
    assert peak < 50e6, f"peak {peak / 1e6:.0f} MB"       # measured 11 MB


def test_sorted_membership_equals_the_broadcast() -> None:
    rng = np.random.default_rng(11)
    for _ in range(100):
        m, n, big, k = (int(x) for x in (rng.integers(2, 5), rng.integers(1, 30), rng.integers(1, 12),
                                         rng.integers(1, 12)))
        rk = rng.integers(-1, 15, (m, n, big))
        shown = rng.integers(-1, 15, (n, k))
        brute = ((rk[:, :, None, :] == shown[None, :, :, None]) & (shown[None, :, :, None] >= 0)).any(axis=3)
        assert np.array_equal(invariants._in_lists_sorted(rk, shown), brute)
        earlier = np.tril(np.ones((k, k), dtype=bool), -1)
        repeat = ((shown[:, :, None] == shown[:, None, :]) & earlier[None]).any(axis=2)
        assert np.array_equal(invariants.repeated_slots(shown), repeat)


def test_team_labels_named_a_and_b_are_told_the_index_they_stand_for() -> None:
    """A team's own implementation that labels slots 'A' / 'B' fails as malformed output, and the row says which
    integer each name stands for (the ranker's index in the lists given)."""

    class Named(bi.TeamDraft):
        def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
            shown, teams = super().interleave(lists, rng)
            return shown, ["AB"[t] for t in teams]

    with pytest.raises(CandidateError) as info:
        validate_interleaver(_from_object("named", Named()), "team_draft", n=200)
    assert info.value.report is not None
    row = next(c for c in info.value.report.checks if c.name == "candidate_output")
    assert row.failed and re.search(r"team label '[AB]' \(str\)", row.message)
    assert "0 for lists[0] (A), 1 for lists[1] (B)" in row.message


def test_a_winner_named_as_text_is_told_the_sign_it_stands_for() -> None:
    class Winner(bi.TeamDraft):
        def credit(self, shown, teams, clicks):  # type: ignore[no-untyped-def]
            return {1: "B", -1: "A", 0: "tie"}[super().credit(shown, teams, clicks)]

    with pytest.raises(CandidateError) as info:
        validate_interleaver(_from_object("winner", Winner()), "team_draft", n=200)
    row = next(c for c in info.value.report.checks if c.name == "candidate_output")
    assert "a str, not a number" in row.message
    assert "a winner named as text is the sign: > 0 when B (lists[1]) wins, < 0 for A, 0 for a tie" in row.message
