"""Click-log readers, the ClickLog record and splits (clickmodels.logs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clickmodels.logs import (
    from_arrays,
    read_click_log,
    read_jsonl,
    read_tsv,
    read_yandex,
    train_test_split,
)
from onlineeval.errors import InputError

TSV = (
    "# session\tquery\tdocs\tclicks\n"
    "s1\tq1\td1,d2,d3\td2,d1,d2\n"
    "\n"
    "s2\tq2\td3,d1\t\n"
    "s3\tq1\td2,d1,d3\t\n"
)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_tsv_reader_arrays(tmp_path: Path) -> None:
    log = read_tsv(_write(tmp_path, "log.tsv", TSV))
    assert log.n_sessions == 3 and log.depth == 3
    assert log.session_ids.tolist() == ["s1", "s2", "s3"]
    assert log.query_vocab[log.query].tolist() == ["q1", "q2", "q1"]
    assert log.doc_ids().tolist() == [["d1", "d2", "d3"], ["d3", "d1", ""], ["d2", "d1", "d3"]]
    assert log.clicks.tolist() == [[True, True, False], [False, False, False], [False, False, False]]
    # d2 clicked first, then d1, then d2 again: first-click order per slot
    assert log.click_order.tolist() == [[2, 1, 0], [0, 0, 0], [0, 0, 0]]
    assert log.shown.tolist() == [[True] * 3, [True, True, False], [True] * 3]
    assert log.last_click.tolist() == [1, -1, -1]
    assert log.first_click.tolist() == [0, -1, -1]


def test_jsonl_reader_matches_tsv(tmp_path: Path) -> None:
    rows = [
        {"session": "s1", "query": "q1", "docs": ["d1", "d2", "d3"], "clicks": ["d2", "d1", "d2"]},
        {"session": "s2", "query": "q2", "docs": ["d3", "d1"], "clicks": []},
        {"session": "s3", "query": "q1", "docs": ["d2", "d1", "d3"]},
    ]
    a = read_jsonl(_write(tmp_path, "log.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n"))
    b = read_tsv(_write(tmp_path, "log.tsv", TSV))
    for name in ("query", "docs", "clicks", "click_order", "session_ids", "query_vocab", "doc_vocab"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    # format detection by suffix
    assert read_click_log(tmp_path / "log.jsonl").n_sessions == 3
    assert read_click_log(tmp_path / "log.tsv").n_sessions == 3


def test_integer_ids_in_jsonl_become_strings(tmp_path: Path) -> None:
    log = read_jsonl(_write(tmp_path, "l.jsonl", '{"query": 7, "docs": [1, 2], "clicks": [2]}\n'))
    assert log.query_vocab.tolist() == ["7"] and log.doc_vocab.tolist() == ["1", "2"]
    assert log.session_ids.tolist() == ["1"]  # line number
    assert log.clicks.tolist() == [[False, True]]


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("s1\tq1\n", 1, "expected 4 tab-separated"),
        ("s1\tq1\td1\n", 1, "empty clicks field"),  # a missing clicks column is not read as no click
        ("s1\tq1\td1\t\n# c\ns2\tq1\td1,d1\t\n", 3, "shown twice"),
        ("s1\tq1\td1,d2\td9\n", 1, "not among the shown"),
        ("s1\t\td1\t\n", 1, "must not be empty"),
        ("s1\tq1\td1,,d2\t\n", 1, "empty document id"),
    ],
)
def test_tsv_errors_name_file_and_line(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = _write(tmp_path, "bad.tsv", text)
    with pytest.raises(InputError) as info:
        read_tsv(path)
    assert info.value.path == str(path) and info.value.line == line
    assert fragment in info.value.message
    assert str(info.value).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ('{"query": "q", "docs": ["a"]}\n{"query": "q", "docs": ["a"\n', 2, "invalid JSON"),
        ('[1, 2]\n', 1, "JSON object"),
        ('{"query": "q", "docs": ["a"], "clicked": []}\n', 1, "unknown key"),
        ('{"docs": ["a"]}\n', 1, "required"),
        ('{"query": "q", "docs": "a"}\n', 1, "must be lists"),
        ('{"query": "q", "docs": [1.5]}\n', 1, "string or an integer"),
        ('{"query": "q", "docs": []}\n', 1, "at least one document"),
    ],
)
def test_jsonl_errors(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = _write(tmp_path, "bad.jsonl", text)
    with pytest.raises(InputError) as info:
        read_jsonl(path)
    assert info.value.line == line and fragment in info.value.message


def test_empty_log_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no session"):
        read_tsv(_write(tmp_path, "e.tsv", "# nothing\n"))
    with pytest.raises(InputError, match="allowed: tsv, jsonl, yandex"):
        read_click_log(tmp_path / "e.tsv", format="csv")  # type: ignore[arg-type]


def test_yandex_format_parsing(tmp_path: Path) -> None:
    text = (
        "9_0\t1,2,3 : 2 , 1 , 2 , 77; 9_0\t1,2,3 :;  8_1\t3,1,2 : 2  ;\n"
        "9_0\t2,1,3 : 3\n"
    )
    log = read_yandex(_write(tmp_path, "y", text))
    assert log.n_sessions == 4
    assert log.session_ids.tolist() == ["1:0", "1:1", "1:2", "2:0"]
    assert log.query_vocab[log.query].tolist() == ["9_0", "9_0", "8_1", "9_0"]
    assert log.clicks.astype(int).tolist() == [[1, 1, 0], [0, 0, 0], [0, 0, 1], [0, 0, 1]]
    assert log.click_order[0].tolist() == [2, 1, 0]
    assert log.n_dropped_clicks == 1  # doc 77 is not on the page (documented: ignored)
    with pytest.raises(InputError) as info:
        read_yandex(_write(tmp_path, "bad", "9_0\t1,2,3 : 1\n9_0\t1,2,3 2\n"))
    assert info.value.line == 2 and "missing ':'" in info.value.message


def test_yandex_sample_matches_readme_statistics(shared_data: Path) -> None:
    folder = shared_data / "clicklogs" / "yandex_wscd_pyclick_sample"
    train = read_yandex(folder / "trainSample")
    assert train.n_sessions == 35064
    assert len(train.query_vocab) == 20
    assert train.pairs.n_pairs == 1024
    assert train.depth == 10 and train.shown.all()
    distinct = train.clicks.sum(axis=1)
    assert [(distinct == 0).sum(), (distinct == 1).sum(), (distinct >= 2).sum()] == [11847, 14279, 8938]
    readme_ctr = [0.257, 0.249, 0.170, 0.154, 0.106, 0.073, 0.069, 0.047, 0.050, 0.045]
    np.testing.assert_allclose(train.clicks.mean(axis=0), readme_ctr, atol=5e-4)
    test = read_yandex(folder / "testSample")
    assert test.n_sessions == 21413 and test.pairs.n_pairs == 1031
    assert set(test.query_vocab) <= set(train.query_vocab)
    one = read_yandex(folder / "oneQueryTrain")
    assert one.n_sessions == 244 and one.query_vocab.tolist() == ["98435_1"] and one.pairs.n_pairs == 34


def test_recode_like_shares_codes_and_appends_unseen() -> None:
    train = from_arrays([0, 1], [[0, 1], [2, 0]], [[1, 0], [0, 0]], query_vocab=["qa", "qb"], doc_vocab=["a", "b", "c"])
    other = from_arrays([0], [[0, 1]], [[0, 1]], query_vocab=["qb"], doc_vocab=["c", "z"])
    rec = other.recode_like(train)
    assert rec.query_vocab.tolist() == ["qa", "qb"]
    assert rec.doc_vocab.tolist() == ["a", "b", "c", "z"]
    assert rec.query.tolist() == [1] and rec.docs.tolist() == [[2, 3]]
    np.testing.assert_array_equal(rec.doc_ids(), other.doc_ids())
    assert other.docs.tolist() == [[0, 1]]  # original untouched


def test_pairs_previous_click_and_take() -> None:
    log = from_arrays([0, 1, 0], [[0, 1, 2], [2, 1, -1], [1, 0, 2]], [[1, 0, 1], [0, 1, 0], [0, 0, 0]])
    pairs = log.pairs
    assert pairs.n_pairs == 5
    # same (query, doc) -> same code, across rows
    assert pairs.codes[0, 1] == pairs.codes[2, 0] and pairs.codes[0, 0] == pairs.codes[2, 1]
    assert pairs.codes[1, 2] == -1
    assert log.previous_click.tolist() == [[-1, 0, 0], [-1, -1, 1], [-1, -1, -1]]
    sub = log.take(np.array([2, 0]))
    assert sub.docs.tolist() == [[1, 0, 2], [0, 1, 2]] and sub.clicks[1].tolist() == [True, False, True]


def test_constructor_rejects_inconsistent_arrays() -> None:
    with pytest.raises(InputError, match="empty slot"):
        from_arrays([0], [[0, -1]], [[0, 1]])
    with pytest.raises(InputError, match="at the end"):
        from_arrays([0], [[-1, 0]], [[0, 0]])
    with pytest.raises(InputError, match="need query"):
        from_arrays([0, 1], [[0, 1]], [[0, 1]])


def test_train_test_split_is_a_seeded_partition() -> None:
    n = 101
    log = from_arrays(np.zeros(n, dtype=int), np.tile([0, 1], (n, 1)), np.zeros((n, 2), dtype=bool))
    tr, te = train_test_split(log, 0.3, np.random.default_rng(5))
    assert te.n_sessions == 30 and tr.n_sessions == 71
    assert set(tr.session_ids) | set(te.session_ids) == set(log.session_ids)
    assert not set(tr.session_ids) & set(te.session_ids)
    tr2, _ = train_test_split(log, 0.3, np.random.default_rng(5))
    np.testing.assert_array_equal(tr.session_ids, tr2.session_ids)
    with pytest.raises(InputError, match="test_fraction"):
        train_test_split(log, 1.0, np.random.default_rng(0))


from hypothesis import given, settings
from hypothesis import strategies as st

from clickmodels.logs import from_sessions, write_jsonl, write_tsv

_ID = st.text(alphabet="abcdefgh0123456789_-", min_size=1, max_size=4)


@st.composite
def _sessions(draw: st.DrawFn) -> list[tuple[str, str, list[str], list[str]]]:
    n = draw(st.integers(1, 6))
    out = []
    for i in range(n):
        docs = draw(st.lists(_ID, min_size=1, max_size=5, unique=True))
        clicks = draw(st.lists(st.sampled_from(docs), max_size=4))
        out.append((f"s{i}", draw(_ID), docs, clicks))
    return out


@settings(max_examples=40, deadline=None)
@given(_sessions())
def test_write_read_round_trip(tmp_path_factory: pytest.TempPathFactory,
                               sessions: list) -> None:  # type: ignore[type-arg]
    log = from_sessions(sessions)
    folder = tmp_path_factory.mktemp("rt")
    write_tsv(log, folder / "l.tsv")
    write_jsonl(log, folder / "l.jsonl")
    for back in (read_tsv(folder / "l.tsv"), read_jsonl(folder / "l.jsonl")):
        np.testing.assert_array_equal(back.doc_ids(), log.doc_ids())
        np.testing.assert_array_equal(back.query_ids(), log.query_ids())
        np.testing.assert_array_equal(back.clicks, log.clicks)
        np.testing.assert_array_equal(back.click_order, log.click_order)
        np.testing.assert_array_equal(back.session_ids, log.session_ids)
    # the reduced click order: first clicks of distinct documents, ranked 1, 2, ...
    for i, (_, _, docs, clicks) in enumerate(sessions):
        for pos, d in enumerate(dict.fromkeys(clicks), start=1):
            assert log.click_order[i, docs.index(d)] == pos
        assert log.click_order[i].max(initial=0) == len(set(clicks))


def test_writer_rejects_unwritable_ids(tmp_path: Path) -> None:
    log = from_sessions([("s", "q", ["a,b"], [])])
    with pytest.raises(InputError, match="comma"):
        write_tsv(log, tmp_path / "x.tsv")


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "yandex"])
def test_non_utf8_bytes_name_file_and_line(tmp_path: Path, fmt: str) -> None:
    good = {"tsv": "s1\tq\ta,b\ta\n", "jsonl": '{"query": "q", "docs": ["a"]}\n', "yandex": "q\t1,2 : 1 ;\n"}[fmt]
    path = tmp_path / f"log.{fmt}"
    path.write_bytes(good.encode() + b"\xf6\xff garbage\n")
    with pytest.raises(InputError) as info:
        read_click_log(path, fmt)  # type: ignore[arg-type]
    assert info.value.path == str(path) and info.value.line == 2 and "UTF-8" in info.value.message


def test_inferred_yandex_format_says_so_on_error(tmp_path: Path) -> None:
    path = tmp_path / "log.csv"
    path.write_text("s1\tq\ta,b\tb\n")
    with pytest.raises(InputError, match="read as 'yandex'.*--format|format="):
        read_click_log(path)


def test_bom_and_deep_nesting_alike_in_every_format(tmp_path: Path) -> None:
    """A byte-order mark is accepted by TSV and JSONL alike; deeply nested JSON is one
    located error, not a RecursionError."""
    tsv = read_tsv(_write(tmp_path, "b.tsv", "\ufeffs1\tq\ta,b\ta\n"))
    jsonl = read_jsonl(_write(tmp_path, "b.jsonl", '\ufeff{"session": "s1", "query": "q", "docs": ["a", "b"], '
                                                  '"clicks": ["a"]}\n'))
    assert tsv.session_ids.tolist() == jsonl.session_ids.tolist() == ["s1"]
    assert tsv.clicks.tolist() == jsonl.clicks.tolist() == [[True, False]]
    deep = '{"query": "q", "docs": ' + "[" * 100000 + "]" * 100000 + "}\n"
    with pytest.raises(InputError, match="nested too deeply") as info:
        read_jsonl(_write(tmp_path, "d.jsonl", deep))
    assert info.value.line == 1
