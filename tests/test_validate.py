"""The validation harness: broken interleavers fail, correct ones pass; the CLI and log mode."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import ConfigError, InputError
from onlineeval.interleaving import get_interleaver
from onlineeval.interleaving.validation import (
    _from_object,
    load_candidate,
    read_log,
    validate_interleaver,
    validate_log,
)

sys.path.insert(0, str(Path(__file__).parent))
import broken_interleavers as bi

N_TD = 3000      # team-draft style candidates are cheap
N_PROB = 1400    # the brute-force probabilistic candidates enumerate 2^k assignments per credit


def run(name: str, method: str, n: int) -> dict[str, str]:
    rep = validate_interleaver(_from_object(name, getattr(bi, name)()), method, n=n, seed=1)
    return {c.name: c.status for c in rep.checks} | {"__passed__": str(rep.passed)}


@pytest.mark.parametrize("name, method, n, must_fail", [
    ("BiasedCoinTeamDraft", "team_draft", N_TD, {"team_distribution"}),
    ("NoAlternationTeamDraft", "team_draft", N_TD, {"prefix_balance", "document_distribution"}),
    ("TieCreditTeamDraft", "team_draft", N_TD, {"aa_no_preference", "credit_agreement"}),
    ("OffByOnePrefixTeamDraft", "team_draft", N_TD, {"credit_agreement"}),
    ("FloatTieProbabilistic", "probabilistic", N_PROB, {"credit_agreement"}),
    ("UniformOptimized", "optimized", N_TD, {"random_clicks_zero_credit", "team_distribution"}),
    ("FixedOrderTeamDraftMultileave", "team_draft_multileave", N_TD, {"team_distribution"}),
])
def test_broken_interleavers_fail(name: str, method: str, n: int, must_fail: set[str]) -> None:
    status = run(name, method, n)
    assert status["__passed__"] == "False"
    for check in must_fail:
        assert status[check] == "FAIL", (check, status)


@pytest.mark.parametrize("name, method, n", [
    ("TeamDraft", "team_draft", N_TD),
    ("Balanced", "balanced", N_TD),
    ("Probabilistic", "probabilistic", N_PROB),
    ("TeamDraftMultileave", "team_draft_multileave", N_TD),
])
def test_correct_implementations_pass(name: str, method: str, n: int) -> None:
    status = run(name, method, n)
    assert status["__passed__"] == "True", status
    if method == "balanced":
        assert status["random_clicks_no_preference"] == "DOCUMENTED"
        assert status["documented: balanced bias"] == "DOCUMENTED"
    if method == "probabilistic":      # its guarantee is on the expected outcome, which credit() returns
        assert status["random_clicks_no_preference"] == "DOCUMENTED"
        assert status["random_clicks_zero_expected_outcome"] == "PASS"




def test_report_names_the_failure() -> None:
    rep = validate_interleaver(_from_object("x", bi.OffByOnePrefixTeamDraft()), "team_draft", n=N_TD)
    text = rep.format()
    assert "credit_agreement" in text and "FAIL" in text and "candidate" in text


def test_load_candidate_class_module_and_file(tmp_path: Path) -> None:
    mod = tmp_path / "my_il.py"
    mod.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from broken_interleavers import TeamDraft\n"
        "_td = TeamDraft()\n"
        "def interleave(lists, rng):\n    return _td.interleave(lists, rng)\n"
        "def credit(shown, teams, clicks):\n    return _td.credit(shown, teams, clicks)\n"
    )
    c1 = load_candidate(f"{mod}:TeamDraft")
    assert c1.interleave([[1, 2], [2, 1]], np.random.default_rng(0))[0]
    c2 = load_candidate(str(mod))
    assert not c2.wants_lists
    assert c2.credit([[1, 2], [2, 1]], [1, 2], [0, 1], [True, False])[1, 0] == -1
    with pytest.raises(ConfigError, match="cannot import"):
        load_candidate("no_such_module_xyz:Thing")
    with pytest.raises(ConfigError, match="no attribute"):
        load_candidate(f"{mod}:Missing")
    with pytest.raises(ConfigError, match="interleave"):
        load_candidate(f"{mod}:_td.credit")


# ---------------------------------------------------------------- logs
def write_log(path: Path, n: int, rng: np.random.Generator, *, flip_team: bool = False,
              wrong_outcome: bool = False) -> None:
    il = get_interleaver("team_draft")
    a = np.argsort(rng.random((n, 8)), axis=1)[:, :5]
    b = np.argsort(rng.random((n, 8)), axis=1)[:, :5]
    res = il.interleave([a, b], rng)
    clicks = rng.random(res.ranking.shape) < 0.3
    out = il.outcome(res, clicks)
    with path.open("w") as fh:
        for r in range(n):
            team = res.team[r].tolist()
            if flip_team and rng.random() < 0.3 and team[0] == 1:
                # a logger that sometimes records the wrong team for the first slot
                team = [1 - t for t in team]
            o = int(out[r])
            if wrong_outcome and o == 0 and clicks[r].any():
                o = 1
            fh.write(json.dumps({"rankings": [a[r].tolist(), b[r].tolist()], "shown": res.ranking[r].tolist(),
                                 "teams": team, "clicks": clicks[r].tolist(), "outcome": o}) + "\n")


def test_log_mode(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    write_log(good, 3000, np.random.default_rng(0))
    rep = validate_log(read_log(good), "team_draft")
    assert rep.passed, rep.format()
    bad = tmp_path / "bad.jsonl"
    write_log(bad, 3000, np.random.default_rng(0), flip_team=True, wrong_outcome=True)
    rep2 = validate_log(read_log(bad), "team_draft")
    failed = {c.name for c in rep2.checks if c.failed}
    assert {"structure", "team_distribution", "credit_agreement"} <= failed


def test_log_errors_name_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [true,false]}\n{oops\n')
    with pytest.raises(InputError) as exc:
        read_log(p)
    assert str(exc.value).startswith(f"{p}:2")
    p.write_text('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1]}\n')
    with pytest.raises(InputError, match="clicks"):
        read_log(p)


# ---------------------------------------------------------------- CLI
def test_cli_pass_fail_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    monkeypatch.chdir(Path(__file__).parent)
    ok = runner.invoke(app, ["validate", "--interleaver", "broken_interleavers:TeamDraft", "--n", "1500"])
    assert ok.exit_code == 0, ok.output
    assert "RESULT: PASS" in ok.output and "p-value" in ok.output
    bad = runner.invoke(app, ["validate", "--interleaver", "broken_interleavers:BiasedCoinTeamDraft",
                              "--n", "3000"])
    assert bad.exit_code == 1 and "RESULT: FAIL" in bad.output
    both = runner.invoke(app, ["validate"])
    assert both.exit_code == 2 and "exactly one" in both.output
    unknown = runner.invoke(app, ["validate", "--interleaver", "broken_interleavers:TeamDraft", "--method", "x"])
    assert unknown.exit_code == 2 and "team_draft" in unknown.output
    opt = runner.invoke(app, ["validate", "--interleaver", "broken_interleavers:TeamDraft", "--option", "tau"])
    assert opt.exit_code == 2 and "key=value" in opt.output
    log = tmp_path / "log.jsonl"
    write_log(log, 1000, np.random.default_rng(3))
    res = runner.invoke(app, ["validate", "--log", str(log)])
    assert res.exit_code == 0, res.output
    missing = runner.invoke(app, ["validate", "--log", str(tmp_path / "none.jsonl")])
    assert missing.exit_code == 2


def test_candidate_exceptions_become_one_line_errors() -> None:
    class Crashes:
        def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
            raise ZeroDivisionError("boom")

        def credit(self, shown, teams, clicks):  # type: ignore[no-untyped-def]
            return 0

    with pytest.raises(InputError, match="ZeroDivisionError: boom"):
        validate_interleaver(_from_object("crash", Crashes()), "team_draft", n=200)


def test_log_with_clicked_docs_and_probabilistic_method(tmp_path: Path) -> None:
    il = get_interleaver("probabilistic")
    rng = np.random.default_rng(5)
    n = 1500
    a = np.argsort(rng.random((n, 7)), axis=1)[:, :5]
    b = np.argsort(rng.random((n, 7)), axis=1)[:, :5]
    res = il.interleave([a, b], rng)
    clicks = rng.random(res.ranking.shape) < 0.3
    out = il.outcome(res, clicks)
    p = tmp_path / "prob.jsonl"
    with p.open("w") as fh:
        for r in range(n):
            fh.write(json.dumps({"rankings": [a[r].tolist(), b[r].tolist()], "shown": res.ranking[r].tolist(),
                                 "teams": res.team[r].tolist(),
                                 "clicked_docs": res.ranking[r][clicks[r]].tolist(),
                                 "outcome": int(out[r])}) + "\n")
    records = read_log(p)
    assert records[0].clicks == tuple(clicks[0].tolist())
    rep = validate_log(records, "probabilistic")
    assert rep.passed, rep.format()
    assert {c.name for c in rep.checks} == {"structure", "team_distribution", "credit_agreement"}
    assert rep.mode == "log"


_LINE = '{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [true,false]}\n'


@pytest.mark.parametrize("bad, line, match", [
    ('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,7], "clicks": [1,0]}', 2, "'teams': 7 is out of range"),
    ('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [1,0], "outcome": NaN}', 2,
     "finite number"),
    ('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [1,0], "outcome": 1e999}', 2,
     "finite number"),
    ('{"rankings": [[1,2],[2,1]], "shown": [3000000000000,2], "teams": [0,1], "clicks": [1,0]}', 2,
     "out of range"),
    ('{"rankings": [[1,-1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [1,0]}', 2, "out of range"),
    ('{"rankings": [[1,2],[2,1]], "shown": [], "teams": [], "clicks": []}', 2, "'shown' is empty"),
    ('{"rankings": [[],[]], "shown": [1], "teams": [0], "clicks": [true]}', 2, "every input ranking is empty"),
    ('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0,1], "clicks": [2,0]}', 2, "booleans"),
    ('{"rankings": [[1,2],[2,1]], "shown": [1,2], "teams": [0], "clicks": [1,0]}', 2, "one per shown slot"),
    ('{"rankings": [[1,2],[2,1],[1,3]], "shown": [1,2], "teams": [0,1], "clicks": [1,0]}', 2, "3 rankings"),
])
def test_malformed_log_lines_name_file_and_line(tmp_path: Path, bad: str, line: int, match: str) -> None:
    p = tmp_path / "log.jsonl"
    p.write_text(_LINE + bad + "\n")
    with pytest.raises(InputError, match=match) as exc:
        read_log(p)
    assert str(exc.value).startswith(f"{p}:{line}:")


def test_log_not_utf8_and_wrong_ranker_count(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_bytes((_LINE * 2).encode() + b"\xff\xfe\n")
    with pytest.raises(InputError, match="UTF-8") as exc:
        read_log(p)
    assert str(exc.value).startswith(f"{p}:3:")
    p.write_text('{"rankings": [[1,2],[2,1],[1,3]], "shown": [1,2], "teams": [0,1], "clicks": [1,0], "outcome": 1}\n')
    with pytest.raises(InputError, match="two-ranker"):
        read_log(p)
    p.write_text('{"rankings": [[1,2],[2,1],[1,3]], "shown": [1,2], "teams": [0,2], "clicks": [1,0]}\n')
    with pytest.raises(InputError, match="'balanced' compares 2 rankers") as exc:
        validate_log(read_log(p), "balanced", subject=str(p))
    assert str(exc.value).startswith(f"{p}:1:")


def test_invalid_team_labels_fail_the_checks_without_crashing() -> None:
    class BadTeams:
        def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
            return list(lists[0]), [7] * len(lists[0])

        def credit(self, shown, teams, clicks):  # type: ignore[no-untyped-def]
            return 0

    rep = validate_interleaver(_from_object("bad-teams", BadTeams()), "team_draft", n=200)
    failed = {c.name for c in rep.checks if c.failed}
    assert {"structure", "prefix_balance"} <= failed


def test_cli_file_path_conventions_and_method_option(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    path = Path(__file__).parent / "broken_interleavers.py"
    ok = runner.invoke(app, ["validate", "--interleaver", f"{path}:TeamDraft", "--n", "1500"])
    assert ok.exit_code == 0, ok.output
    assert "outcome: > 0: B = lists[1] preferred" in ok.output and "statistic" in ok.output
    unknown = runner.invoke(app, ["validate", "--interleaver", f"{path}:TeamDraft", "--method", "x"])
    assert unknown.exit_code == 2 and "--method: unknown interleaving method 'x'" in unknown.output
    assert "Traceback" not in unknown.output
