"""Click logs in Parquet (clickmodels.logs.read_parquet, and read_click_log by the file's first bytes): the same
ClickLog as the jsonl format's file of the same sessions (ids or boolean clicks, optional session and clicks, integer
ids, other columns ignored, a directory of files as one log), and the jsonl reader's errors naming the row."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clickmodels.logs import read_click_log, read_jsonl, read_parquet
from onlineeval.errors import InputError

ROWS = [
    {"session": "s1", "query": "q1", "docs": ["d1", "d2", "d3"], "clicks": ["d2", "d1", "d2"]},
    {"session": "s2", "query": "q2", "docs": ["d3", "d1"], "clicks": []},
    {"session": "s3", "query": "q1", "docs": ["d2", "d1", "d3"]},
    {"session": "s4", "query": "q3", "docs": ["d4", "d2"], "clicks": ["d4"]},
]
FIELDS = ("query", "docs", "clicks", "click_order", "session_ids", "query_vocab", "doc_vocab", "n_dropped_clicks")

def _table(rows: list[dict]) -> pa.Table:
    """The rows as a table with a column per key of any row (a row without it: null), which
    ``pa.Table.from_pylist`` does not give (it takes the first row's keys)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return pa.table({k: [r.get(k) for r in rows] for k in keys})



def _jsonl(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _assert_same(a, b) -> None:
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("variant", ["ids", "booleans", "no session", "integer ids", "other columns"])
def test_a_parquet_click_log_equals_the_jsonl_file(tmp_path, variant):
    rows = [dict(r) for r in ROWS]
    if variant == "booleans":
        for r in rows:
            r["clicks"] = [d in r.get("clicks", []) for d in r["docs"]]
    elif variant == "no session":
        for r in rows:
            r.pop("session")
    elif variant == "integer ids":
        rows = [{**r, "docs": [int(d[1:]) for d in r["docs"]], "clicks": [int(d[1:]) for d in r.get("clicks", [])],
                 "query": int(r["query"][1:])} for r in rows]
    expected = read_jsonl(_jsonl(tmp_path, rows))
    table = _table(rows)
    if variant == "other columns":
        table = table.append_column("ts", pa.array(np.arange(len(rows)), pa.int64()))
    path = tmp_path / "sessions.bin"  # no suffix to go by: told by its first bytes
    pq.write_table(table, path)
    _assert_same(read_parquet(path), expected)
    _assert_same(read_click_log(path), expected)


def test_a_directory_of_parquet_files_is_one_click_log(tmp_path):
    expected = read_jsonl(_jsonl(tmp_path, ROWS))
    root = tmp_path / "sessions"
    root.mkdir()
    pq.write_table(_table(ROWS[:2]), root / "part-0.parquet")
    pq.write_table(_table(ROWS[2:]), root / "part-1.parquet")
    (root / "_SUCCESS").write_bytes(b"")
    _assert_same(read_click_log(root), expected)


@pytest.mark.parametrize(("bad", "fragment"), [
    ({"docs": []}, "at least one document"),
    ({"clicks": ["d9"]}, ""),
    ({"clicks": [True]}, "one per shown document"),
])
def test_errors_are_the_jsonl_readers_naming_the_row(tmp_path, bad, fragment):
    rows = [dict(r) for r in ROWS]
    if bad.get("clicks") == [True]:  # (one type per column: every row's clicks as booleans)
        rows = [{**r, "clicks": [d in r.get("clicks", []) for d in r["docs"]]} for r in rows]
    rows[2] = {**rows[2], **bad}
    with pytest.raises(InputError) as expected:
        read_jsonl(_jsonl(tmp_path, rows))
    path = tmp_path / "bad.parquet"
    pq.write_table(_table(rows), path)
    with pytest.raises(InputError) as got:
        read_click_log(path)
    assert expected.value.line == 3 and fragment in expected.value.message
    assert (got.value.path, got.value.line, got.value.message) == (str(path), None,
                                                                    f"row 3: {expected.value.message}")


def test_missing_columns_and_a_broken_file_are_clear_errors(tmp_path):
    path = tmp_path / "no_docs.parquet"
    pq.write_table(_table([{"query": "q1"}]), path)
    with pytest.raises(InputError, match="needs the columns query and docs"):
        read_click_log(path)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1" + b"\x00" * 32)
    with pytest.raises(InputError, match="cannot read it as Parquet"):
        read_click_log(broken)


def test_an_error_in_a_directory_names_the_file_holding_the_row_and_the_row_in_it(tmp_path):
    rows = [{**ROWS[i % 4], "session": f"s{i}"} for i in range(9)]
    rows[6] = {**rows[6], "docs": []}
    with pytest.raises(InputError) as expected:
        read_jsonl(_jsonl(tmp_path, rows[6:7]))
    root = tmp_path / "sessions"
    for i, (lo, hi) in enumerate([(0, 4), (4, 5), (5, 9)]):
        (root / f"day={i}").mkdir(parents=True)
        pq.write_table(_table(rows[lo:hi]), root / f"day={i}" / "part-0.parquet")
    with pytest.raises(InputError) as got:
        read_click_log(root)
    assert (got.value.path, got.value.line) == (str(root / "day=2" / "part-0.parquet"), None)
    assert got.value.message == f"row 2: {expected.value.message}"


def _reference(path, monkeypatch):
    """The rows read one by one (the whole-column reader switched off)."""
    import clickmodels.logs_columns as logs_columns

    with monkeypatch.context() as m:
        m.setattr(logs_columns, "sessions_from_columns", lambda table, source: None)
        return read_click_log(path)


def _random_rows(rng, n, ids, clicks, sessions):
    """n sessions of 1-6 documents out of 15 per query, clicks as ids (repeats, any order) or booleans."""
    rows = []
    for i in range(n):
        q = int(rng.integers(0, 9))
        docs = [f"d{q}-{j}" for j in rng.permutation(15)[: rng.integers(1, 7)]]
        clicked = [d for d in rng.permutation(docs) if rng.random() < 0.4]
        clicked += clicked[:1] if rng.random() < 0.3 else []  # a repeated click
        row = {"query": f"q{q}", "docs": docs}
        if clicks == "ids":
            row["clicks"] = None if rng.random() < 0.1 else clicked
        elif clicks == "booleans":
            row["clicks"] = [] if rng.random() < 0.1 else [d in clicked for d in docs]
        if sessions == "strings":
            row["session"] = f"s{i}"
        elif sessions == "some null":
            row["session"] = None if rng.random() < 0.3 else f"session-{i * 7}"
        if ids == "integers":
            row = {k: (v if k in ("session", "clicks") and not isinstance(v, list) else
                       [int(x.replace("d", "").replace("-", "")) if isinstance(x, str) else x for x in v]
                       if isinstance(v, list) else int(v[1:]) if k == "query" else v) for k, v in row.items()}
        rows.append(row)
    return rows


@pytest.mark.parametrize("ids", ["strings", "integers"])
@pytest.mark.parametrize("clicks", ["ids", "booleans", "none"])
@pytest.mark.parametrize("sessions", ["strings", "some null", "none"])
@pytest.mark.parametrize("types", ["plain", "spark"])
def test_whole_columns_give_the_row_by_row_log_to_the_bit(tmp_path, monkeypatch, ids, clicks, sessions, types):
    """The whole-column reader (clickmodels.logs_columns) and the rows one by one (the reference) give the same
    ClickLog, every field; 'spark': int32 integers and large strings / lists, as Spark and pandas write them."""
    import clickmodels.logs_columns as logs_columns

    rng = np.random.default_rng(zlib.crc32(repr((ids, clicks, sessions, types)).encode()))
    rows = _random_rows(rng, 300, ids, clicks, sessions)
    table = _table(rows).append_column("position", pa.array(np.arange(300), pa.int64()))
    if types == "spark":
        def cast(t):
            if pa.types.is_integer(t):
                return pa.int32()
            if pa.types.is_string(t):
                return pa.large_string()
            if pa.types.is_list(t):
                return pa.large_list(cast(t.value_type))
            return t
        table = table.cast(pa.schema([pa.field(f.name, cast(f.type)) for f in table.schema]))
    path = tmp_path / "sessions.parquet"
    pq.write_table(table, path)
    seen = []
    real = logs_columns.sessions_from_columns
    monkeypatch.setattr(logs_columns, "sessions_from_columns", lambda t, s: seen.append(real(t, s)) or seen[-1])
    got = read_click_log(path)
    assert seen and seen[0] is not None  # read on whole columns
    monkeypatch.undo()
    _assert_same(got, _reference(path, monkeypatch))
    if clicks != "none":
        assert got.click_order.max() >= 2 and got.clicks.any() and not got.clicks.all()


@pytest.mark.parametrize("bad", [
    {"docs": ["d1", "d1"]}, {"docs": ["d1", ""]}, {"docs": []}, {"clicks": ["d9"]}, {"query": None},
    {"docs": None}, {"clicks": ["d1", None]},
])
def test_what_the_reference_refuses_is_declined_and_refused_with_its_row(tmp_path, bad):
    rows = [dict(r) for r in ROWS]
    rows[1] = {**rows[1], **bad}
    path = tmp_path / "bad.parquet"
    pq.write_table(_table(rows), path)
    from clickmodels.logs_columns import sessions_from_columns

    assert sessions_from_columns(pq.read_table(path), str(path)) is None
    with pytest.raises(InputError) as got:
        read_click_log(path)
    assert got.value.path == str(path) and got.value.message.startswith("row 2: ")
