"""Click logs in Parquet (clickmodels.logs.read_parquet, and read_click_log by the file's first bytes): the same
ClickLog as the jsonl format's file of the same sessions (ids or boolean clicks, optional session and clicks, integer
ids, other columns ignored, a directory of files as one log), and the jsonl reader's errors naming the row."""

from __future__ import annotations

import json
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
