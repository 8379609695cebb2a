"""validate --log: 1-based labels and shifted document ids are named (file, line, what looks wrong).

Team labels are ranker indices 0..m-1. A log written with 1..m got "'teams': 2 is out of range" at its first B pick
(no word about the convention) or, when no label m appeared, a silent team_distribution failure; shown ids numbered
from another base than the rankings' ids got only "document 21 is in no input list".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import InputError
from onlineeval.interleaving import get_interleaver
from onlineeval.interleaving.validation import read_log, validate_log


def _lines(n: int = 40, seed: int = 0, ids: int = 25, width: int = 20, page: int = 6) -> list[dict]:
    rng = np.random.default_rng(seed)
    a = np.argsort(rng.random((n, ids)), axis=1)[:, :width]
    b = np.argsort(rng.random((n, ids)), axis=1)[:, :width]
    res = get_interleaver("team_draft").interleave([a, b], rng, length=page)
    return [{"rankings": [a[r].tolist(), b[r].tolist()], "shown": res.ranking[r].tolist(),
             "teams": res.team[r].tolist(), "clicks": [0] * page} for r in range(n)]


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_one_based_team_labels_are_an_error_naming_file_and_line(tmp_path: Path) -> None:
    p = _write(tmp_path / "one.jsonl", [{**x, "teams": [t + 1 for t in x["teams"]]} for x in _lines()])
    with pytest.raises(InputError, match=r"'teams' \[\d(, \d)+\] look 1-based \(every label in 1\.\.2, and no line "
                                         r"so far has label 0\); team labels are ranker indices 0\.\.1") as exc:
        read_log(p)
    assert exc.value.path == str(p) and exc.value.line == 1        # a team-draft page of 6 has a B pick: label 2
    out = CliRunner().invoke(app, ["validate", "--log", str(p)])
    assert out.exit_code == 2 and "one.jsonl" in out.output and "1-based" in out.output


@pytest.mark.parametrize("m", [2, 3, 5])
def test_the_1_based_error_names_every_ranker_alike(tmp_path: Path, m: int) -> None:
    """The 1-based label error says what each label means: A and B for two rankers; for more, indices alone for
    every one (m = 3 read '0 = rankings[0] (A), 1 = rankings[1]' before, review 7 F5: an A with no B and no
    third ranker), the first two, '...' and the last past four."""
    rng = np.random.default_rng(m)
    rs = [np.argsort(rng.random((30, 25)), axis=1)[:, :20] for _ in range(m)]
    res = get_interleaver("team_draft").interleave(rs, rng, length=6)
    lines = [{"rankings": [r[i].tolist() for r in rs], "shown": res.ranking[i].tolist(),
              "teams": [t + 1 for t in res.team[i].tolist()], "clicks": [0] * 6} for i in range(30)]
    line = next(i for i, x in enumerate(lines) if m in x["teams"]) + 1  # the first line with label m
    meaning = {2: "0 = rankings[0] (A), 1 = rankings[1] (B)",
               3: "0 = rankings[0], 1 = rankings[1], 2 = rankings[2]",
               5: "0 = rankings[0], 1 = rankings[1], ..., 4 = rankings[4]"}[m]
    with pytest.raises(InputError) as exc:
        read_log(_write(tmp_path / f"m{m}.jsonl", lines))
    assert exc.value.line == line
    assert exc.value.message.endswith(f"team labels are ranker indices 0..{m - 1}: {meaning}; subtract 1 from every "
                                      "label"), exc.value.message


def test_an_out_of_range_label_after_label_0_is_not_called_1_based(tmp_path: Path) -> None:
    lines = _lines()
    lines[3]["teams"] = [1, 2, 1, 2, 1, 2]
    with pytest.raises(InputError, match=r"'teams': 2 is out of range; allowed 0\.\.1") as exc:
        read_log(_write(tmp_path / "bad.jsonl", lines))
    assert exc.value.line == 4 and "1-based" not in str(exc.value)


def test_a_log_without_label_0_gets_a_warning(tmp_path: Path) -> None:
    """Pages of one slot labelled 1 (B) throughout: 1-based A picks, or a log of B's picks only; ambiguous, so a
    warning on the structure row, and team_distribution fails (every slot is a fair coin)."""
    lines = [{**x, "shown": x["shown"][:1], "teams": [1], "clicks": [0]} for x in _lines(60)]
    for x in lines:
        x["rankings"][1][0] = x["shown"][0] if x["shown"][0] in x["rankings"][1] else x["rankings"][1][0]
        x["shown"] = [x["rankings"][1][0]]
    rep = validate_log(read_log(_write(tmp_path / "b.jsonl", lines)), "team_draft")
    rows = {c.name: c for c in rep.checks}
    assert rows["structure"].message.startswith("warning: no team label is 0 anywhere in the log")
    assert rows["team_distribution"].failed
    ok = validate_log(read_log(_write(tmp_path / "ok.jsonl", _lines())), "team_draft")
    assert "warning" not in ok.checks[0].message


def test_clicked_ranks_instead_of_booleans_are_named(tmp_path: Path) -> None:
    lines = _lines()
    lines[2]["clicks"] = [1, 3]
    with pytest.raises(InputError, match=r"looks like clicked ranks \(1-based positions\)") as exc:
        read_log(_write(tmp_path / "c.jsonl", lines))
    assert exc.value.line == 3


def test_shown_ids_shifted_by_one_are_an_error_when_unambiguous(tmp_path: Path) -> None:
    """Sparse ids (10 d + 10): no shown id 10 d + 11 is in a ranking, so a whole shifted line is unambiguous."""
    lines = []
    for x in _lines():
        lines.append({**x, "rankings": [[10 * d + 10 for d in r] for r in x["rankings"]],
                      "shown": [10 * d + 11 for d in x["shown"]]})
    with pytest.raises(InputError, match=r"no shown document is in a ranking, but every shown id -1 is: the "
                                         r"document ids look 1-based in 'shown' and 0-based in 'rankings'") as exc:
        read_log(_write(tmp_path / "s.jsonl", lines))
    assert exc.value.line == 1
    back = [{**x, "shown": [d - 2 for d in x["shown"]]} for x in lines]       # 10 d + 9: shown + 1 is in a ranking
    with pytest.raises(InputError, match="look 0-based in 'shown' and 1-based in 'rankings'"):
        read_log(_write(tmp_path / "s2.jsonl", back))


def test_shown_ids_shifted_by_one_among_dense_ids_are_a_warning(tmp_path: Path) -> None:
    """Ids 0..24 (rankings of 20): shown + 1 mostly lands in a ranking too, so it is not refused; the structure
    row says that every line with a document in no ranking is explained by the shift."""
    lines = [{**x, "shown": [d + 1 for d in x["shown"]]} for x in _lines(ids=21)]
    rep = validate_log(read_log(_write(tmp_path / "d.jsonl", lines)), "team_draft")
    st = rep.checks[0]
    assert st.failed and "every shown id -1 is in the rankings: the document ids look 1-based in 'shown'" \
        in st.message, st.message
    fine = validate_log(read_log(_write(tmp_path / "f.jsonl", _lines(ids=21))), "team_draft")
    assert fine.passed and "warning" not in fine.checks[0].message


def test_the_log_help_states_the_label_convention_and_the_exact_reference() -> None:
    out = CliRunner().invoke(app, ["validate", "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"}).output
    text = " ".join(out.replace("│", " ").split())
    assert "teams are 0-based ranker indices (1-based labels are refused naming the line)" in text
    assert "tested against each impression's exact reference probabilities (sampled where there are too many" in text
