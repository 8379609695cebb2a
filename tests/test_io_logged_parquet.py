"""Logged impressions in a Parquet file (onlineeval.io.logged_parquet, read by read_logged and so by `onlineeval
estimate --log x.parquet`): the same LoggedLog to the bit as the JSON-lines log of the same impressions, whether its
columns are the JSON keys (a propensities struct) or the Python API's (p_list / p_prefix / p_item, other columns
beside), whether the whole-column checks read it or its rows are read one by one (the reference); a logger column
of JSON text as the JSON log's logger lines; bad rows refused with the JSON reader's message, naming the file and the
row."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_io_logged_fast import _assert_same, _records

import onlineeval.io.logged as logged
import onlineeval.io.logged_parquet as logged_parquet
from onlineeval.errors import InputError
from simulations import policies

def _table(rows: list[dict]) -> pa.Table:
    """The rows as a table with a column per key of any row (a row without it: null), which
    ``pa.Table.from_pylist`` does not give (it takes the first row's keys)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return pa.table({k: [r.get(k) for r in rows] for k in keys})



def _jsonl(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _struct_parquet(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "log.parquet"
    pq.write_table(_table(records), path)
    return path


def _columns_parquet(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    """The API's spelling (p_* columns) written by pandas, with a timestamp and a position column beside."""
    rows = [{**{k: v for k, v in r.items() if k != "propensities"},
             **{f"p_{f}": v for f, v in r["propensities"].items()}} for r in records]
    frame = pd.DataFrame(rows).assign(ts=pd.Timestamp("2026-12-04"), position=np.arange(len(rows)))
    path = tmp_path / "log_columns.parquet"
    frame.to_parquet(path)
    return path


def _same(got: logged.LoggedLog, expected: logged.LoggedLog) -> None:
    """Every field equal but the data's ``source`` (the file's name)."""
    assert got.data.source != expected.data.source  # (the Parquet file's or directory's name)
    _assert_same(dataclasses.replace(got, data=dataclasses.replace(got.data, source=expected.data.source)), expected)


def _reference(path: Path, monkeypatch: pytest.MonkeyPatch) -> logged.LoggedLog:
    """The rows read one by one (the whole-column checks switched off)."""
    with monkeypatch.context() as m:
        m.setattr(logged_parquet, "_table", lambda table: None)
        return logged.read_logged(path)


def _read_watching(path: Path, reader: str, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> tuple[Any, list]:
    """``read_logged(path)`` and what the whole-column ``reader`` of logged_parquet returned (None: declined)."""
    seen: list[Any] = []
    real = getattr(logged_parquet, reader)
    with monkeypatch.context() as m:
        m.setattr(logged_parquet, reader, lambda *a: seen.append(real(*a)) or seen[-1])
        return logged.read_logged(path, **kwargs), seen


def _same_both_ways(path: Path, expected: logged.LoggedLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read on whole columns (not declined) and row by row, both equal to ``expected``."""
    got, seen = _read_watching(path, "read_frame_fast", monkeypatch)
    _same(got, expected)
    assert seen and seen[0] is not None  # read on whole columns
    _same(_reference(path, monkeypatch), expected)


@pytest.mark.parametrize(("clicks", "users", "user_type", "forms", "int_queries"), [
    ("ids", "some", False, ("list", "prefix", "item"), False),
    ("flags", "none", True, ("prefix",), True),
    ("bools", "int", False, ("item", "list"), False),
    ("ids", "int", True, ("list",), True),
])
@pytest.mark.parametrize("layout", [_struct_parquet, _columns_parquet])
def test_a_parquet_log_equals_the_json_lines_log(tmp_path, monkeypatch, clicks, users, user_type, forms,
                                                 int_queries, layout):
    records = _records(5, 700, clicks, users, user_type, forms, int_queries)
    if clicks == "flags":  # (pandas makes an all-empty 0/1 list column null-typed: keep them full)
        for rec in records:
            rec["clicks"] = rec["clicks"] or [0] * len(rec["shown"])
    expected = logged.read_logged(_jsonl(tmp_path, records))
    path = layout(tmp_path, records)
    _same_both_ways(path, expected, monkeypatch)


def _map_table(records: list[dict[str, Any]]) -> pa.Table:
    """The records as a table whose loggers are structs with their scores as a map (in each record's key order)."""
    rows = [{**r, "logger": {**r["logger"], "scores": list(r["logger"]["scores"].items())}} for r in records]
    plain = _table(records)  # (its types, the scores then made a map)
    logger_type = plain.schema.field("logger").type
    fields = [pa.field("scores", pa.map_(pa.string(), pa.float64())) if f.name == "scores" else f
              for f in logger_type]
    return pa.Table.from_pylist(rows, schema=plain.schema.set(plain.schema.get_field_index("logger"),
                                                               pa.field("logger", pa.struct(fields))))


@pytest.mark.parametrize("encoding", ["json text", "struct", "map"])
@pytest.mark.parametrize("spec", range(5))
def test_a_logger_column_is_read_as_the_logger_lines(tmp_path, monkeypatch, encoding, spec):
    """A logger column as JSON text, as the struct pyarrow writes of dicts (every key seen on any row: the documents
    of other queries' scores are null here) or with its scores as a map: the JSON log's logger lines, read on whole
    columns (each query's first logger decoded once)."""
    from test_io_logged_fast_logger import LOGGERS
    from test_io_logged_fast_logger import _records as logger_records

    records = logger_records(3, 300, LOGGERS[spec])
    expected = logged.read_logged(_jsonl(tmp_path, records), policies=policies)
    path = tmp_path / "logger.parquet"
    if encoding == "json text":
        table = _table([{**r, "logger": json.dumps(r["logger"])} for r in records])
    elif encoding == "struct":
        table = _table(records)
    else:
        table = _map_table(records)
    pq.write_table(table, path)
    reader = "read_logger_table_fast" if encoding == "json text" else "read_logger_struct_fast"
    got, seen = _read_watching(path, reader, monkeypatch, policies=policies)
    assert seen and seen[0] is not None  # decoded once per query on whole columns
    _same(dataclasses.replace(got, data=dataclasses.replace(got.data, logger=None)),
          dataclasses.replace(expected, data=dataclasses.replace(expected.data, logger=None)))
    every = np.arange(len(got.queries))
    np.testing.assert_array_equal(got.data.logger.item_position_marginals(every),
                                  expected.data.logger.item_position_marginals(every))
    assert got.source == expected.source and got.data.logger.describe() == expected.data.logger.describe()


GOOD = {"query": "q1", "shown": ["a", "b"], "clicks": ["b"], "propensities": {"list": 0.25, "prefix": [0.5, 0.25]}}


@pytest.mark.parametrize("bad", [
    {"propensities": {"list": 1.5, "prefix": [1.5, 1.5]}},
    {"propensities": {"list": 0.5, "prefix": [0.25, 0.5]}},  # a prefix that increases
    {"clicks": ["c"]},  # a click on a document not shown
    {"shown": ["a", "a"]},
    {"query": ""},
])
@pytest.mark.parametrize("rows", ["whole columns", "one by one"])
def test_a_bad_row_is_refused_with_the_json_readers_message_naming_file_and_row(tmp_path, monkeypatch, bad, rows):
    records = [GOOD, GOOD, {**GOOD, **bad}, GOOD]
    with pytest.raises(InputError) as expected:
        logged.read_logged(_jsonl(tmp_path, records))
    path = _struct_parquet(tmp_path, records)
    with pytest.raises(InputError) as got:
        if rows == "one by one":
            _reference(path, monkeypatch)
        else:
            logged.read_logged(path)
    assert expected.value.line == 3
    assert (got.value.path, got.value.line) == (str(path), None)
    assert got.value.message == f"row 3: {expected.value.message}"
    assert str(got.value).startswith(f"{path}: row 3: ")


def test_missing_columns_a_broken_file_and_bad_logger_text_are_clear_errors(tmp_path):
    path = tmp_path / "no_clicks.parquet"
    pq.write_table(_table([{"query": "q1", "shown": ["a"]}]), path)
    with pytest.raises(InputError, match="lacks the column.s. clicks; it needs query, shown, clicks"):
        logged.read_logged(path)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1" + b"\x00" * 64)
    with pytest.raises(InputError, match="cannot read it as Parquet") as exc:
        logged.read_logged(broken)
    assert exc.value.path == str(broken)
    bad_logger = tmp_path / "bad_logger.parquet"
    pq.write_table(_table([{"query": "q1", "shown": ["a"], "clicks": [], "logger": "{oops"}]),
                   bad_logger)
    with pytest.raises(InputError, match=r"row 1: logger is not valid JSON text") as exc:
        logged.read_logged(bad_logger, policies=policies)
    assert exc.value.path == str(bad_logger)
    # a column twice in a file (Parquet allows it): pyarrow failed on the name with a dump of the schema
    dup = pa.Table.from_arrays([pa.array(["q1"]), pa.array([["a"]]), pa.array([[]], pa.list_(pa.string())),
                                pa.array([0.5]), pa.array(["q2"])],
                               names=["query", "shown", "clicks", "p_list", "query"])
    pq.write_table(dup, tmp_path / "dup.parquet")
    folder = tmp_path / "dataset"
    folder.mkdir()
    pq.write_table(dup, folder / "part-0.parquet")
    for where, named in ((tmp_path / "dup.parquet", tmp_path / "dup.parquet"), (folder, folder / "part-0.parquet")):
        with pytest.raises(InputError) as exc:
            logged.read_logged(where)
        assert (exc.value.path, exc.value.message) == (
            str(named), "the column 'query' appears 2 times in the file's schema (query, shown, clicks, p_list, "
                        "query); keep one")
    # a score named twice in a logger's JSON text was read with its last value; the JSON-lines reader refuses it
    twice = tmp_path / "twice.parquet"
    text = '{"policy": "plackett_luce", "temperature": 1.0, "scores": {"a": 1.0, "a": 2.0, "b": 0.5}}'
    pq.write_table(_table([{"query": "q1", "shown": ["a"], "clicks": [], "logger": text}]), twice)
    with pytest.raises(InputError, match=r"row 1: logger: key 'a' appears twice in one object") as exc:
        logged.read_logged(twice, policies=policies)
    assert exc.value.path == str(twice)


def test_estimate_reads_a_parquet_log_and_fingerprints_its_bytes(tmp_path):
    import hashlib

    from typer.testing import CliRunner

    from onlineeval.cli import app

    records = _records(9, 400, "ids", "some", False, ("list", "prefix", "item"), False)
    run = tmp_path / "B.run"
    run.write_text("".join(f"q{q} Q0 d{q + j} {j + 1} {10 - j} B\n" for q in range(30) for j in range(5)))
    outs = []
    for path in (_jsonl(tmp_path, records), _struct_parquet(tmp_path, records)):
        res = CliRunner().invoke(app, ["estimate", "--log", str(path), "--target", str(run), "--estimator",
                                       "ips,rips,iips", "--allow-unseen", "--format", "json"])
        assert res.exit_code == 0, res.output
        outs.append(json.loads(res.stdout))
    assert [r["estimate"] for r in outs[0]["results"]] == [r["estimate"] for r in outs[1]["results"]]
    parquet = _struct_parquet(tmp_path, records)
    assert outs[1]["inputs"]["log"]["sha256"] == hashlib.sha256(parquet.read_bytes()).hexdigest()


def test_a_directory_of_parquet_files_is_one_log_and_its_digest_covers_every_file(tmp_path):
    """A dataset as Spark writes one (part files in key=value folders, a _SUCCESS marker): the log of its rows,
    equal to the JSON-lines log of the same impressions; its digest moves with a byte of any file and with a file
    added, not with the directory's place."""
    import shutil

    from onlineeval.io.digest import input_entry

    records = _records(8, 900, "ids", "some", True, ("list", "prefix"), False)
    expected = logged.read_logged(_jsonl(tmp_path, records))
    root = tmp_path / "dataset"
    for i, (lo, hi) in enumerate([(0, 400), (400, 900)]):
        folder = root / f"date=2026-12-0{i + 1}"
        folder.mkdir(parents=True)
        pq.write_table(_table(records[lo:hi]), folder / "part-00000.snappy.parquet")
    (root / "_SUCCESS").write_bytes(b"")
    assert logged_parquet.is_parquet(root)
    _same(logged.read_logged(root), expected)
    entry = input_entry(root)
    assert (entry["files"], entry["bytes"]) == (3, sum(f.stat().st_size for f in root.rglob("*") if f.is_file()))
    moved = Path(shutil.copytree(root, tmp_path / "elsewhere"))
    assert input_entry(moved)["sha256"] == entry["sha256"]
    (moved / "_SUCCESS").write_bytes(b"\n")
    assert input_entry(moved)["sha256"] != entry["sha256"]
    (moved / "_SUCCESS").write_bytes(b"")
    (moved / "extra.txt").write_bytes(b"")
    assert input_entry(moved)["sha256"] != entry["sha256"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="a directory holding no Parquet file") as exc:
        logged.read_logged(empty)
    assert exc.value.path == str(empty)


def test_spark_types_are_read_on_whole_columns_with_the_same_numbers(tmp_path, monkeypatch):
    """int32 user types and 0/1 clicks, float32 propensities (their values exact in float64) and large strings, as
    Spark and pandas write them: cast to the JSON reader's types (the same values) and read on whole columns."""
    records = _records(12, 500, "flags", "some", True, ("list", "prefix", "item"), False)
    for rec in records:
        rec["clicks"] = rec["clicks"] or [0] * len(rec["shown"])
        rec["propensities"] = {f: (float(np.float32(v)) if f == "list" else [float(np.float32(x)) for x in v])
                               for f, v in rec["propensities"].items()}
    expected = logged.read_logged(_jsonl(tmp_path, records))
    schema = pa.schema([("query", pa.large_string()), ("shown", pa.list_(pa.large_string())),
                        ("clicks", pa.list_(pa.int32())), ("user", pa.large_string()), ("user_type", pa.int32()),
                        ("propensities", pa.struct([("list", pa.float32()), ("prefix", pa.list_(pa.float32())),
                                                    ("item", pa.list_(pa.float32()))]))])
    path = tmp_path / "spark.parquet"
    pq.write_table(pa.Table.from_pylist(records, schema=schema), path)
    _same_both_ways(path, expected, monkeypatch)


def test_loggers_of_one_query_written_differently_go_row_by_row(tmp_path):
    """The same logger in other bytes (key order) on a later row of its query: the whole-column path declines and the
    rows are read as records, which compare values (the same log); a different logger there is refused naming the
    rows, as the JSON reader names the lines."""
    from test_io_logged_fast_logger import LOGGERS
    from test_io_logged_fast_logger import _records as logger_records

    records = logger_records(4, 200, LOGGERS[0])
    expected = logged.read_logged(_jsonl(tmp_path, records), policies=policies)
    q = records[0]["query"]
    later = next(i for i, r in enumerate(records) if i > 0 and r["query"] == q)
    texts = [json.dumps(r["logger"]) for r in records]
    texts[later] = json.dumps(dict(reversed(list(records[later]["logger"].items()))))  # the same value, other bytes
    path = tmp_path / "reordered.parquet"
    pq.write_table(_table([{**r, "logger": t} for r, t in zip(records, texts)]), path)
    got = logged.read_logged(path, policies=policies)
    _same(dataclasses.replace(got, data=dataclasses.replace(got.data, logger=None)),
          dataclasses.replace(expected, data=dataclasses.replace(expected.data, logger=None)))
    changed = [dict(r) for r in records]
    changed[later] = {**records[later], "logger": {**records[later]["logger"], "temperature": 0.5}}
    with pytest.raises(InputError) as json_error:
        logged.read_logged(_jsonl(tmp_path, changed), policies=policies)
    path = tmp_path / "changed.parquet"
    pq.write_table(_table([{**r, "logger": json.dumps(r["logger"])} for r in changed]), path)
    with pytest.raises(InputError) as parquet_error:
        logged.read_logged(path, policies=policies)
    assert json_error.value.line == later + 1 and "differs from line 1 " in json_error.value.message
    assert parquet_error.value.message == (f"row {later + 1}: "
                                           + json_error.value.message.replace("from line 1 ", "from row 1 "))


@pytest.mark.parametrize("change", ["temperature", "score", "negative zero", "extra key", "scores reordered",
                                    "first row changed"])
@pytest.mark.parametrize("encoding", ["struct", "map"])
def test_struct_loggers_of_one_query_that_differ_are_read_as_the_json_lines_log(tmp_path, monkeypatch, change,
                                                                                  encoding):
    """A row of a query whose struct logger is not its first row's (another temperature or score, -0.0 for 0.0, a key
    only that row has) or holds the same scores in another order: the whole-column reader declines (it compares
    floats bit for bit, maps in order) and the rows read one by one give what the JSON-lines log of the same records
    gives: the same log, or the same error naming the row."""
    from test_io_logged_fast_logger import LOGGERS
    from test_io_logged_fast_logger import _records as logger_records

    records = logger_records(6, 200, LOGGERS[0])
    q = records[0]["query"]
    doc = next(iter(records[0]["logger"]["scores"]))
    for r in records:  # (a score of exactly 0.0 for the negative zero)
        if r["query"] == q:
            r["logger"] = {**r["logger"], "scores": {**r["logger"]["scores"], doc: 0.0}}
    later = next(i for i, r in enumerate(records) if i > 0 and r["query"] == q)
    at = 0 if change == "first row changed" else later
    logger = records[at]["logger"]
    scores = dict(logger["scores"])
    if change in ("temperature", "first row changed"):
        logger = {**logger, "temperature": 0.5}
    elif change == "score":
        scores[doc] = 0.25
    elif change == "negative zero":
        scores[doc] = -0.0
    elif change == "extra key":
        logger = {**logger, "pair_max_states": 5000}
    else:
        scores = dict(reversed(list(scores.items())))
    records[at] = {**records[at], "logger": {**logger, "scores": scores}}
    table = _table(records) if encoding == "struct" else _map_table(records)
    path = tmp_path / "changed.parquet"
    pq.write_table(table, path)
    try:
        expected: Any = logged.read_logged(_jsonl(tmp_path, records), policies=policies)
    except InputError as exc:
        expected = exc
    if encoding == "struct" and change == "scores reordered":  # (a struct's fields have one order: the same value)
        got, seen = _read_watching(path, "read_logger_struct_fast", monkeypatch, policies=policies)
        assert seen[0] is not None
        _same(dataclasses.replace(got, data=dataclasses.replace(got.data, logger=None)),
              dataclasses.replace(expected, data=dataclasses.replace(expected.data, logger=None)))
        return
    seen: list[Any] = []
    real = logged_parquet.read_logger_struct_fast
    monkeypatch.setattr(logged_parquet, "read_logger_struct_fast", lambda *a: seen.append(real(*a)) or seen[-1])
    if isinstance(expected, InputError):
        assert change in ("temperature", "score", "extra key", "first row changed")
        assert "differs from line" in expected.message
        with pytest.raises(InputError) as got_error:
            logged.read_logged(path, policies=policies)
        assert expected.line == later + 1
        assert got_error.value.message == f"row {later + 1}: " + logged_parquet.as_rows(expected.message)
    else:
        assert change in ("scores reordered", "negative zero")  # the same value (the reader's ==: -0.0 == 0.0)
        got = logged.read_logged(path, policies=policies)
        _same(dataclasses.replace(got, data=dataclasses.replace(got.data, logger=None)),
              dataclasses.replace(expected, data=dataclasses.replace(expected.data, logger=None)))
    assert seen == [None]  # declined: the rows were read one by one


@pytest.mark.parametrize("rows", ["whole columns", "one by one"])
@pytest.mark.parametrize("at", [0, 7, 29])
def test_an_error_in_a_dataset_names_the_file_holding_the_row_and_the_row_in_it(tmp_path, monkeypatch, rows, at):
    """Twelve part files (part-0 ... part-11, so that name order and number order differ; one of them empty) in
    key=value folders: a bad row is named in its own file, which read alone holds the bad row at that row."""
    records = [{**GOOD, "query": f"q{i}"} for i in range(30)]
    records[at] = {**records[at], "propensities": {"list": 1.5, "prefix": [1.5, 1.5]}}
    root = tmp_path / "dataset"
    sizes = [3, 0, 4, 2, 1, 5, 2, 3, 1, 4, 3, 2]
    starts = np.cumsum([0, *sizes])
    for i, size in enumerate(sizes):
        folder = root / f"day={i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        part = records[starts[i]:starts[i] + size] or records[:1]
        pq.write_table(_table(part).slice(0, size), folder / f"part-{i}.parquet")
    (root / "_SUCCESS").write_bytes(b"")
    with pytest.raises(InputError) as expected:
        logged.read_logged(_jsonl(tmp_path, [records[at]]))
    with pytest.raises(InputError) as got:
        _reference(root, monkeypatch) if rows == "one by one" else logged.read_logged(root)
    file = Path(got.value.path)
    assert file.parent.parent == root and file.name.startswith("part-") and got.value.line is None
    local = int(got.value.message.split(":")[0].removeprefix("row "))
    assert pq.read_table(file).to_pylist()[local - 1]["query"] == f"q{at}"
    assert got.value.message == f"row {local}: {expected.value.message}"
    assert str(got.value).startswith(f"{file}: row {local}: ")


def test_an_error_citing_a_row_of_another_file_names_that_file(tmp_path, monkeypatch):
    """The first file's rows carry user_type, the second's do not: the second file's first row is refused citing
    the first file's first row by its path below the directory."""
    records = [{**GOOD, "user_type": 1}, {**GOOD, "user_type": 0}, GOOD, GOOD]
    with pytest.raises(InputError) as expected:
        logged.read_logged(_jsonl(tmp_path, records))
    assert expected.value.line == 3 and "on line 1" in expected.value.message
    root = tmp_path / "dataset"
    for i, (lo, hi) in enumerate([(0, 2), (2, 4)]):
        (root / f"day={i}").mkdir(parents=True)
        pq.write_table(_table(records[lo:hi]), root / f"day={i}" / "part-0.parquet")
    for read in (lambda: logged.read_logged(root), lambda: _reference(root, monkeypatch)):
        with pytest.raises(InputError) as got:
            read()
        assert got.value.path == str(root / "day=1" / "part-0.parquet")
        assert got.value.message == "row 1: " + expected.value.message.replace(
            "on line 1", f"in row 1 of {Path('day=0', 'part-0.parquet')}")


def _py_same(x: Any, y: Any) -> bool:
    """The reference of same_rows on Python values (``as_py``): nulls only equal nulls, floats bit for bit, dicts
    key by key, lists and a map's (key, value) pairs element by element in order."""
    import struct

    if x is None or y is None:
        return x is None and y is None
    if isinstance(x, float):
        return isinstance(y, float) and struct.pack("<d", x) == struct.pack("<d", y)
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(_py_same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return isinstance(y, (list, tuple)) and len(x) == len(y) and all(_py_same(u, v) for u, v in zip(x, y))
    return type(x) is type(y) and x == y


@pytest.mark.parametrize("seed", range(4))
def test_same_rows_compares_nested_values_as_python_does_on_their_values(seed):
    """same_rows (the whole-column comparison of struct loggers) against a comparison of the rows' Python values, on
    random nested structs of few distinct values (so that many pairs are equal): nulls at every level, -0.0 and NaN,
    float32, int32, booleans, a null-typed field, lists, maps, a list of structs, large strings; the array sliced
    (an offset into its buffers); a type it does not compare gives None."""
    from onlineeval.io.logged_fast import same_rows

    rng = np.random.default_rng(seed)
    kind = pa.struct([
        ("s", pa.string()), ("f", pa.float64()), ("g", pa.float32()), ("i", pa.int32()), ("b", pa.bool_()),
        ("n", pa.null()), ("l", pa.list_(pa.float64())), ("m", pa.map_(pa.string(), pa.int64())),
        ("t", pa.struct([("x", pa.large_string()), ("y", pa.list_(pa.struct([("z", pa.float64())])))])),
    ])

    def pick(values: list[Any]) -> Any:
        return values[int(rng.integers(len(values)))]

    def floats() -> list[Any]:
        return [pick([0.0, -0.0, 1.5, float("nan"), None]) for _ in range(int(rng.integers(3)))]

    def row() -> Any:
        if rng.random() < 0.05:
            return None
        return {"s": pick(["a", "b", None]), "f": pick([0.0, -0.0, 2.0, float("nan"), None]),
                "g": pick([0.5, -0.0, None]), "i": pick([0, 1, None]), "b": pick([True, False, None]), "n": None,
                "l": pick([None, floats()]),
                "m": pick([None, [], [("a", 1)], [("a", 1), ("b", 2)], [("b", 2), ("a", 1)], [("a", None)]]),
                "t": pick([None, {"x": pick(["u", None]), "y": pick([None, [{"z": pick([1.0, None])}],
                                                                     [None], [{"z": 1.0}, {"z": -0.0}]])}])}

    whole = pa.array([row() for _ in range(400)], type=kind)
    arr = whole.slice(7, 380)
    values = arr.to_pylist()
    a = rng.integers(len(arr), size=3000)
    b = np.where(rng.random(3000) < 0.1, a, rng.integers(len(arr), size=3000))
    got = same_rows(arr, a, b)
    expected = np.array([_py_same(values[i], values[j]) for i, j in zip(a, b)])
    np.testing.assert_array_equal(got, expected)
    assert 0.05 < expected.mean() < 0.95  # (both answers are common)
    for name in ("l", "m", "t"):  # each field alone too (its own nulls, not the struct's)
        field = arr.field(name)
        np.testing.assert_array_equal(same_rows(field, a, b),
                                      [_py_same(field[int(i)].as_py(), field[int(j)].as_py()) for i, j in zip(a, b)])
    assert same_rows(pa.array([1, 2], type=pa.timestamp("s")), np.array([0]), np.array([1])) is None


def test_a_dataset_whose_files_differ_in_columns_is_read_with_the_union_of_their_schemas(tmp_path, monkeypatch):
    """pyarrow reads a directory with its first file's schema: a struct's fields only later files have (the second
    day's loggers score other documents) were nulled silently. Read with the union of the files' schemas: the
    JSON-lines log of the same records, on whole columns and row by row; a column of other types in two files is a
    clear error naming the directory."""
    from test_io_logged_fast_logger import LOGGERS
    from test_io_logged_fast_logger import _records as logger_records

    records = logger_records(11, 120, LOGGERS[0])
    queries = sorted({r["query"] for r in records})
    later = set(queries[6:])

    def renamed(d: str) -> str:
        return "e" + d[1:]

    for r in records:  # the second day's queries score documents e0, e1, ... (fields the first file lacks)
        if r["query"] in later:
            r["shown"] = [renamed(d) for d in r["shown"]]
            r["clicks"] = [renamed(d) for d in r["clicks"]]
            r["logger"] = {**r["logger"], "scores": {renamed(d): v for d, v in r["logger"]["scores"].items()}}
    order = [r for r in records if r["query"] not in later] + [r for r in records if r["query"] in later]
    expected = logged.read_logged(_jsonl(tmp_path, order), policies=policies)
    root = tmp_path / "dataset"
    for day, part in enumerate((order[: len(records) - sum(r["query"] in later for r in records)],
                                [r for r in order if r["query"] in later])):
        (root / f"day={day}").mkdir(parents=True)
        pq.write_table(_table(part), root / f"day={day}" / "part-0.parquet")
    schemas = [pq.read_schema(f) for f in sorted(root.rglob("*.parquet"))]
    assert not schemas[0].equals(schemas[1])  # (the scores' fields differ)

    def same(got: logged.LoggedLog) -> None:
        _same(dataclasses.replace(got, data=dataclasses.replace(got.data, logger=None)),
              dataclasses.replace(expected, data=dataclasses.replace(expected.data, logger=None)))
        every = np.arange(len(got.queries))
        np.testing.assert_array_equal(got.data.logger.item_position_marginals(every),
                                      expected.data.logger.item_position_marginals(every))

    same(logged.read_logged(root, policies=policies))
    with monkeypatch.context() as m:  # the rows one by one too
        m.setattr(logged_parquet, "read_logger_struct_fast", lambda *a: None)
        same(logged.read_logged(root, policies=policies))
    bad = tmp_path / "bad"
    for day, query in enumerate(("q1", 7)):  # the query as text in one file, as an integer in the other
        (bad / f"day={day}").mkdir(parents=True)
        pq.write_table(_table([{**GOOD, "query": query}]), bad / f"day={day}" / "part-0.parquet")
    with pytest.raises(InputError, match="cannot read it as Parquet") as exc:
        logged.read_logged(bad)
    assert exc.value.path == str(bad)


def test_a_column_only_later_files_have_is_read(tmp_path):
    """A user type given by the second file only: read (it was dropped with the first file's schema), and refused
    where rows lack it, as the JSON-lines reader refuses the same records."""
    records = [{**GOOD, "query": f"q{i}"} for i in range(4)]
    for r in records[2:]:
        r["user_type"] = 1
    with pytest.raises(InputError) as expected:
        logged.read_logged(_jsonl(tmp_path, records))
    root = tmp_path / "dataset"
    for day, part in enumerate((records[:2], records[2:])):
        (root / f"day={day}").mkdir(parents=True)
        pq.write_table(_table(part), root / f"day={day}" / "part-0.parquet")
    with pytest.raises(InputError) as got:
        logged.read_logged(root)
    assert expected.value.line == 3  # (the first row giving it; row 1 of the second file)
    assert got.value.path == str(root / "day=1" / "part-0.parquet")
    assert got.value.message == "row 1: " + expected.value.message.replace(
        "on line 1", f"in row 1 of {Path('day=0', 'part-0.parquet')}")
