"""Input readers: TREC qrels / runs, LETOR, DataFrames, and ranking under tie rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from onlineeval.errors import ConfigError, InputError
from onlineeval.io import (
    join_grades,
    qrels_from_frame,
    rank_run,
    ranked_doc_lists,
    read_letor,
    read_qrels,
    read_run,
    run_from_frame,
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_read_qrels_with_comments_and_negative_grades(tmp_path: Path) -> None:
    p = write(tmp_path, "q.txt", "# header\n1 0 d1 2\n\n1 0 d#2 -1\n  # indented comment\n2 0 d1 0\n")
    q = read_qrels(p)
    assert q["query"].tolist() == ["1", "1", "2"]
    assert q["doc"].tolist() == ["d1", "d#2", "d1"]
    assert q["grade"].tolist() == [2, -1, 0]
    assert q["grade"].dtype == np.int64


def test_read_run_ignores_rank_column_and_keeps_order(tmp_path: Path) -> None:
    p = write(tmp_path, "r.txt", "1 Q0 a 9 0.5 tag\n1 Q0 b 1 2.0 tag\n2 Q0 a 1 -1e3 tag\n")
    r = read_run(p)
    assert r["doc"].tolist() == ["a", "b", "a"]
    assert r["score"].tolist() == [0.5, 2.0, -1000.0]
    assert r.attrs["run_id"] == "tag"
    assert ranked_doc_lists(r) == {"1": ["b", "a"], "2": ["a"]}


def test_read_run_text_after_sixth_column_is_ignored_like_trec_eval(tmp_path: Path) -> None:
    p = write(tmp_path, "r.txt", "1 Q0 a 1 0.5 tag more junk\n1 Q0 b 2 0.4 tag\n")
    assert read_run(p)["doc"].tolist() == ["a", "b"]


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("1 0 d1 1\n1 0 d2\n", 2, "expected 4 columns"),
        ("1 0 d1 1\n1 0\n", 2, "expected 4 columns"),
        ("1 0 d1 1\n1 0 d2 1 extra\n", 2, "expected 4 columns"),
        ("1 0 d1 1\n1 0 d2 high\n", 2, "grade must be an integer"),
        ("1 0 d1 1\n1 0 d2 1.5\n", 2, "grade must be an integer"),
        ("# c\n1 0 d1 1\n1 0 d1 0\n", 3, "judged twice"),
    ],
)
def test_qrels_errors_name_file_and_line(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    p = write(tmp_path, "q.txt", text)
    with pytest.raises(InputError, match=fragment) as info:
        read_qrels(p)
    assert info.value.line == line and info.value.path == str(p)
    assert str(info.value).startswith(f"{p}:{line}: ")


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("1 Q0 a 1 0.5 t\n1 Q0 b 2 t\n", 2, "expected 6 columns"),
        ("1 Q0 a 1 0.5 t\n1 Q0 b 2 0.4\n", 2, "expected 6 columns"),
        ("1 Q0 a 1 0.5 t\n1 Q0 b 2 0.4 t\n1 Q0 c\n", 3, "expected 6 columns"),
        ("1 Q0 a 1 0.5 t\n1 Q0 b 2 high t\n", 2, "score must be a number"),
        ("1 Q0 a 1 0.5 t\n1 Q0 b 2 nan t\n", 2, "finite"),
        ("1 Q0 a 1 0.5 t\n# x\n1 Q0 a 2 0.4 t\n", 3, "appears twice"),
    ],
)
def test_run_errors_name_file_and_line(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    p = write(tmp_path, "r.txt", text)
    with pytest.raises(InputError, match=fragment) as info:
        read_run(p)
    assert info.value.line == line


@pytest.mark.parametrize("text", ["", "  \n\n", "# only a comment\n"])
def test_empty_files(tmp_path: Path, text: str) -> None:
    with pytest.raises(InputError, match="empty|no data"):
        read_qrels(write(tmp_path, "q.txt", text))
    with pytest.raises(InputError, match="empty|no data"):
        read_run(write(tmp_path, "r.txt", text))


def test_frames_are_validated() -> None:
    q = qrels_from_frame(pd.DataFrame({"query": [1, 1], "doc": ["a", "b"], "grade": [1.0, 0]}))
    assert q["query"].tolist() == ["1", "1"] and q["grade"].dtype == np.int64
    with pytest.raises(InputError, match="row 2: grade must be an integer"):
        qrels_from_frame(pd.DataFrame({"query": [1, 1], "doc": ["a", "b"], "grade": [1, 0.5]}))
    with pytest.raises(InputError, match="lacks column"):
        run_from_frame(pd.DataFrame({"query": [1], "doc": ["a"]}))
    with pytest.raises(InputError, match="row 2: .*twice"):
        run_from_frame(pd.DataFrame({"query": [1, 1], "doc": ["a", "a"], "score": [1, 2]}))
    with pytest.raises(InputError, match="row 1: score"):
        run_from_frame(pd.DataFrame({"query": [1], "doc": ["a"], "score": [np.inf]}))
    with pytest.raises(InputError, match="no rows"):
        run_from_frame(pd.DataFrame({"query": [], "doc": [], "score": []}))


# ----------------------------------------------------------------------------- ties


def tie_run() -> tuple[pd.DataFrame, pd.DataFrame]:
    run = pd.DataFrame(
        {"query": ["q"] * 5, "doc": ["b", "c", "a", "e", "d"], "score": [1.0, 1.0, 2.0, 1.0, 0.5]}
    )
    qrels = pd.DataFrame({"query": ["q", "q", "q"], "doc": ["b", "e", "c"], "grade": [2, 1, 0]})
    return run, qrels


@pytest.mark.parametrize(
    "rule, expected",
    [
        ("docno_desc", ["a", "e", "c", "b", "d"]),
        ("input_order", ["a", "b", "c", "e", "d"]),
        ("pessimistic", ["a", "c", "e", "b", "d"]),
        ("optimistic", ["a", "b", "e", "c", "d"]),
    ],
)
def test_tie_rules(rule: str, expected: list[str]) -> None:
    run, qrels = tie_run()
    assert ranked_doc_lists(run, rule, qrels) == {"q": expected}


def test_pessimistic_puts_unjudged_first() -> None:
    run = pd.DataFrame({"query": ["q"] * 3, "doc": ["x", "y", "z"], "score": [1.0, 1.0, 1.0]})
    qrels = pd.DataFrame({"query": ["q", "q"], "doc": ["x", "y"], "grade": [0, 1]})
    assert ranked_doc_lists(run, "pessimistic", qrels) == {"q": ["z", "x", "y"]}
    assert ranked_doc_lists(run, "optimistic", qrels) == {"q": ["y", "x", "z"]}


def test_rank_run_groups_depth_and_caller_frame_untouched() -> None:
    run, qrels = tie_run()
    before = run.copy()
    r = rank_run(run, "expected")
    assert r.groups[0].tolist() == [0, 1, 1, 1, 2]
    assert r.lengths.tolist() == [5]
    r3 = rank_run(run, "input_order", depth=3)
    assert r3.docs.shape == (1, 3) and r3.to_lists() == {"q": ["a", "b", "c"]}
    pd.testing.assert_frame_equal(run, before)
    assert join_grades(run, qrels).tolist() == [2, 0, -1, 1, -1]


def test_tie_rule_errors() -> None:
    run, qrels = tie_run()
    with pytest.raises(ConfigError, match="needs qrels"):
        ranked_doc_lists(run, "pessimistic")
    with pytest.raises(ConfigError, match="one of"):
        ranked_doc_lists(run, "random")
    with pytest.raises(ConfigError, match="no single ranked list"):
        ranked_doc_lists(run, "expected")


# ----------------------------------------------------------------------------- LETOR


def test_letor_with_qid_docids_and_score_file(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "l.txt",
        "2 qid:10 1:0.5 3:1.0 #docid = GX1 inc = 1\n0 qid:10 1:0.1 # GX2\n1 qid:11 3:0.7\n",
    )
    s = write(tmp_path, "s.txt", "0.1\n0.9\n0.3\n")
    data = read_letor(p, scores=s)
    assert data.qrels["doc"].tolist() == ["GX1", "GX2", "L3"]
    assert data.qrels["grade"].tolist() == [2, 0, 1]
    assert data.run is not None and data.run["score"].tolist() == [0.1, 0.9, 0.3]
    feat = read_letor(p, score_feature=3)
    assert feat.run is not None and feat.run["score"].tolist() == [1.0, 0.0, 0.7]
    assert read_letor(p).run is None


def test_letor_group_file(tmp_path: Path) -> None:
    p = write(tmp_path, "l.txt", "1 1:0.5\n0 1:0.1\n2 2:3\n")
    g = write(tmp_path, "l.query", "2\n1\n")
    data = read_letor(p, scores=[0.3, 0.2, 0.1], query_file=g)
    assert data.qrels["query"].tolist() == ["0", "0", "1"]


@pytest.mark.parametrize(
    "text, fragment, line",
    [
        ("1 qid:1 1:0.5\nx qid:1 1:0.1\n", "label must be an integer", 2),
        ("1 qid:1 1:0.5\n1.5 qid:1 1:0.1\n", "label must be an integer", 2),
        ("1 qid:1 1:0.5\n1 qid:1 bad\n", "idx:value", 2),
        ("1 1:0.5\n", "no qid", 1),
        ("1 qid:1 1:0.5 # d1\n# c\n0 qid:2 1:0.1 # d1\n0 qid:1 1:0.1 # d1\n",
         "'d1' appears twice for query '1'.*first on line 1", 4),
    ],
)
def test_letor_errors(tmp_path: Path, text: str, fragment: str, line: int) -> None:
    with pytest.raises(InputError, match=fragment) as info:
        read_letor(write(tmp_path, "l.txt", text))
    assert info.value.line == line


def test_letor_score_and_group_mismatch(tmp_path: Path) -> None:
    p = write(tmp_path, "l.txt", "1 qid:1 1:0.5\n0 qid:1 1:0.1\n")
    with pytest.raises(InputError, match="1 scores"):
        read_letor(p, scores=write(tmp_path, "s.txt", "0.5\n"))
    with pytest.raises(InputError, match=r"s2.txt:2: score must be a number"):
        read_letor(p, scores=write(tmp_path, "s2.txt", "0.5\nabc\n"))
    with pytest.raises(InputError, match="add up to 3"):
        read_letor(p, query_file=write(tmp_path, "g.query", "3\n"))


def test_trec_files_from_shared_data(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    q = read_qrels(d / "qrels.test")
    assert len(q) == 3681 and set(q["query"]) == {"301", "302", "303"}
    r = read_run(d / "results.test")
    assert len(r) == 1500
    assert len(read_run(d / "results.trunc")) == 584
    rel = read_qrels(d / "qrels.rel_level")
    assert sorted(rel["grade"].unique().tolist()) == [-1, 0, 1, 2, 3, 4]


def test_evaluate_run_rejects_duplicates_even_unchecked(tmp_path: Path) -> None:
    from onlineeval.metrics.evaluate import evaluate_run

    qrels = read_qrels(write(tmp_path, "q.txt", "1 0 a 1\n"))
    run_file = write(tmp_path, "r.txt", "1 Q0 a 1 0.5 t\n1 Q0 b 2 0.4 t\n1 Q0 a 3 0.3 t\n")
    run = read_run(run_file, check_unique=False)
    with pytest.raises(InputError, match="appears twice") as info:
        evaluate_run(qrels, run, ["AP"])
    assert info.value.line == 3 and info.value.path == str(run_file)
    frame = pd.DataFrame({"query": ["1", "1"], "doc": ["a", "a"], "score": [1.0, 2.0]})
    with pytest.raises(InputError, match=r"listed twice.*\(row 2\)"):
        evaluate_run(qrels, frame, ["AP"])
    dup_qrels = pd.DataFrame({"query": ["1", "1"], "doc": ["a", "a"], "grade": [1, 0]})
    with pytest.raises(InputError, match="judged twice"):
        evaluate_run(dup_qrels, run.iloc[:2], ["AP"])


# ------------------------------------------------------------- review 10, F6: non-finite scores, message reprs


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "NaN"])
def test_letor_non_finite_score_feature_names_file_and_line(tmp_path: Path, bad: str) -> None:
    """The NaN was reported as 'row 500 ... np.float64(nan)' without the file; now file:line of the bad value
    (comment lines counted), and only the score feature must be finite (LightGBM reads NaN features)."""
    text = f"# header\n# more\n1 qid:1 1:0.5 2:nan\n0 qid:1 1:{bad} 2:0.1\n"
    p = write(tmp_path, "l.letor", text)
    with pytest.raises(InputError) as info:
        read_letor(p, score_feature=1)
    assert (info.value.path, info.value.line) == (str(p), 4)
    assert f"feature 1 is a system's score (--score-feature) and must be finite, got {bad}" in str(info.value)
    assert "np." not in str(info.value)
    with pytest.raises(InputError, match="l.letor:3: feature 2"):  # feature 2's NaN on line 3
        read_letor(p, score_feature=2)
    assert len(read_letor(p).qrels) == 2  # no score feature: NaN features are not read


def test_letor_nan_feature_cli_message(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    p = write(tmp_path, "l.letor", "# c\n1 qid:1 1:0.5\n0 qid:1 1:nan\n")
    res = CliRunner().invoke(app, ["evaluate", "--letor", str(p), "--score-feature", "1"])
    assert res.exit_code != 0
    assert f"{p}:3: feature 1 is a system's score (--score-feature) and must be finite, got nan" in res.output
    assert "np.float64" not in res.output and "row " not in res.output


def test_frame_and_parameter_messages_show_python_values_not_numpy_reprs() -> None:
    from onlineeval.metrics import ERR, INST, P
    from onlineeval.stats import randomization_test

    with pytest.raises(InputError, match=r"^row 2: grade must be an integer, got 1\.5$"):
        qrels_from_frame(pd.DataFrame({"query": ["1", "1"], "doc": ["a", "b"], "grade": [1.0, 1.5]}))
    with pytest.raises(InputError, match=r"^row 2: score must be a finite number, got nan$"):
        run_from_frame(pd.DataFrame({"query": ["1", "1"], "doc": ["a", "b"], "score": [1.0, np.nan]}))
    for make, text in ((lambda: ERR(gmax=np.int64(-1)), "got -1"), (lambda: P(k=np.int64(0)), "got 0"),
                       (lambda: INST(T=np.float64(-1.0)), "got -1.0")):
        with pytest.raises(ConfigError) as info:
            make()
        assert str(info.value).endswith(text) and "np." not in str(info.value)
    with pytest.raises(ValueError, match=r"got 0$"):
        randomization_test([1.0, 2.0], np.random.default_rng(0), np.int64(0))
