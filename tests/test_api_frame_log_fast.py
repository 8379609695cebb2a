"""A DataFrame log in the Python API is converted by pyarrow and checked on whole columns
(onlineeval.io.logged_fast.frame_table / read_frame_fast) instead of row by row: the same LoggedLog to the bit as the
records read from its rows (the reference, logged_from_records), the same estimates, and the same error (message and
row) on a frame the reference refuses; where it cannot say the same it declines to the reference. Its digest is the
table's and moves with the content, not with a column the reader ignores."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_io_logged_fast import _assert_same, _records

import onlineeval.io.logged_fast as logged_fast
import simulations.policies
from onlineeval.api._estimate import _logged
from onlineeval.errors import InputError

FORMS = {"list": "p_list", "prefix": "p_prefix", "item": "p_item"}


def _frame(records: list[dict[str, Any]], style: str) -> pd.DataFrame:
    """The records as a DataFrame: ``columns`` (p_list / p_prefix / p_item), ``dicts`` (a propensities column) or
    ``numpy`` (p_* columns, every list a numpy array)."""
    rows = []
    for rec in records:
        row = {k: v for k, v in rec.items() if k != "propensities"}
        if style == "dicts":
            row["propensities"] = rec["propensities"]
        else:
            row |= {FORMS[f]: v for f, v in rec["propensities"].items()}
        if style == "numpy":
            row = {k: np.asarray(v) if isinstance(v, list) else v for k, v in row.items()}
        rows.append(row)
    return pd.DataFrame(rows)


def _reference(frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(logged_fast, "frame_table", lambda frame: None)
        return _logged(frame, simulations.policies)


def _fast(frame: pd.DataFrame) -> Any:
    table = logged_fast.frame_table(frame)
    assert table is not None
    assert logged_fast.read_frame_fast(table, "DataFrame", simulations.policies) is not None  # not declined
    return _logged(frame, simulations.policies)


@pytest.mark.parametrize(("clicks", "users", "user_type", "forms", "int_queries"), [
    ("ids", "some", False, ("list", "prefix", "item"), False),
    ("flags", "none", True, ("prefix",), True),
    ("bools", "int", False, ("item", "list"), False),
    ("ids", "int", True, ("list",), True),
])
@pytest.mark.parametrize("style", ["columns", "dicts", "numpy"])
def test_the_fast_path_equals_the_records_read_row_by_row(monkeypatch, clicks, users, user_type, forms, int_queries,
                                                          style):
    records = _records(11, 500, clicks, users, user_type, forms, int_queries)
    if clicks == "flags":  # (an empty 0/1 list is "no clicks"; numpy makes it a float array: keep them full)
        for rec in records:
            rec["clicks"] = rec["clicks"] or [0] * len(rec["shown"])
    frame = _frame(records, style)
    fast, fast_digest = _fast(frame)
    reference, _ = _reference(frame, monkeypatch)
    _assert_same(fast, reference)
    assert fast_digest["records"] == len(frame) and fast_digest["in_memory"] == "DataFrame"


def test_the_same_estimates_and_a_digest_of_the_content(monkeypatch):
    import onlineeval.api as api

    frame = _frame(_records(3, 800, "ids", "some", False, ("list", "prefix", "item"), False), "columns")
    target = {"B": {f"q{q}": [f"d{q + j}" for j in range(5)] for q in range(30)}}
    fast = api.estimate(frame, target, "ips,snips,rips,iips", allow_unseen=True)
    with monkeypatch.context() as m:
        m.setattr(logged_fast, "frame_table", lambda frame: None)
        reference = api.estimate(frame, target, "ips,snips,rips,iips", allow_unseen=True)
    pd.testing.assert_frame_equal(fast.results, reference.results)
    assert fast.warnings == reference.warnings
    assert api.estimate(frame.copy(), target, "ips").fingerprint == api.estimate(frame, target, "ips").fingerprint
    assert (api.estimate(frame.assign(note="x"), target, "ips").fingerprint
            == api.estimate(frame, target, "ips").fingerprint)  # a column the reader ignores
    bumped = frame.copy()
    bumped.at[5, "p_list"] = float(np.nextafter(bumped.at[5, "p_list"], 0.0))
    assert api.estimate(bumped, target, "ips").fingerprint != api.estimate(frame, target, "ips").fingerprint


GOOD = {"query": "q1", "shown": ["a", "b"], "clicks": ["b"], "p_list": 0.25, "p_prefix": [0.5, 0.25]}


@pytest.mark.parametrize("bad", [
    {"p_list": 1.5, "p_prefix": [1.5, 1.5]},  # outside (0, 1]
    {"p_list": 0.0, "p_prefix": [0.5, 0.0]},
    {"p_prefix": [0.25, 0.5], "p_list": 0.5},  # a prefix that increases
    {"p_list": 0.2},  # list differs from the last prefix
    {"clicks": ["c"]},  # a click on a document not shown
    {"shown": ["a", "a"]},
    {"shown": []},
    {"query": ""},
    {"p_list": math.nan},  # missing on one row: forms differ
    {"p_prefix": [0.5]},  # of another length than shown
    {"user_type": 1},  # on one row only
    {"p_prefix": [0.5, math.inf], "p_list": math.inf},
])
def test_a_bad_row_gets_the_records_error_naming_the_row(monkeypatch, bad):
    frame = pd.DataFrame([GOOD, GOOD, {**GOOD, **bad}, GOOD])
    with pytest.raises(InputError) as reference:
        _reference(frame, monkeypatch)
    with pytest.raises(InputError) as fast:
        _logged(frame, simulations.policies)
    assert (fast.value.message, fast.value.path, fast.value.line) == (reference.value.message, reference.value.path,
                                                                     reference.value.line)
    assert reference.value.line == 3


@pytest.mark.parametrize("frame", [
    pd.DataFrame([{**GOOD, "logger": {"policy": "deterministic", "scores": {"a": 1.0, "b": 0.5}}}]),
    pd.DataFrame([{**GOOD, "propensities": {"list": 0.25}}]),  # both forms of columns: p_* win, row by row
    pd.DataFrame([{"query": "q1", "shown": ["a"], "clicks": []}]),  # no propensities
    pd.DataFrame([{**GOOD, "query": 1.5}]),
    pd.DataFrame([{**GOOD, "user": object()}]),
])
def test_what_it_cannot_read_the_same_way_is_declined(frame):
    table = logged_fast.frame_table(frame)
    assert table is None or logged_fast.read_frame_fast(table, "DataFrame", simulations.policies) is None


def _mutated(rng: np.random.Generator) -> pd.DataFrame:
    """A small valid frame with one of 16 kinds of change (bad values, other types, missing values)."""
    n = int(rng.integers(1, 8))
    rows = []
    for _ in range(n):
        k = int(rng.integers(1, 4))
        docs = [f"d{x}" for x in rng.choice(6, size=k, replace=False)]
        pre = np.cumprod(rng.uniform(0.2, 1.0, k))
        item = np.maximum(pre, rng.uniform(0.2, 1.0, k))
        item[0] = pre[0]
        row = {"query": f"q{int(rng.integers(0, 3))}", "shown": docs,
               "clicks": [d for d in docs if rng.random() < 0.4],
               "p_list": float(pre[-1]), "p_prefix": pre.tolist(), "p_item": item.tolist()}
        if rng.random() < 0.5:
            row["user"] = f"u{int(rng.integers(0, 4))}"
        rows.append(row)
    frame = pd.DataFrame(rows)
    kind, r = int(rng.integers(0, 16)), int(rng.integers(0, n))
    if kind == 0:
        frame.at[r, "p_list"] = float(rng.choice([0.0, 1.5, -0.1, math.nan, math.inf, 1.0]))
    elif kind == 1:
        frame.at[r, "shown"] = tuple(frame.at[r, "shown"])
    elif kind == 2:
        frame.at[r, "clicks"] = [1] * len(frame.at[r, "shown"])
    elif kind == 3:
        frame["clicks"] = [np.asarray([d in c for d in s]) for s, c in zip(frame["shown"], frame["clicks"])]
    elif kind == 4:
        frame["query"] = frame["query"].astype(object)
        frame.at[r, "query"] = int(rng.integers(0, 3))
    elif kind == 5:
        frame["query"] = [int(q[1:]) for q in frame["query"]]
    elif kind == 6:
        frame["user_type"] = rng.integers(0, 3, n)
    elif kind == 7:
        frame["user_type"] = rng.integers(0, 3, n).astype(np.int32)
    elif kind == 8:
        frame.at[r, "p_prefix"] = list(frame.at[r, "p_prefix"])[::-1]
    elif kind == 9:
        frame = frame.drop(columns=["p_item"])
    elif kind == 10:
        frame["p_list"] = frame["p_list"].astype(object)
        frame.at[r, "p_list"] = None
    elif kind == 11:
        frame.at[r, "clicks"] = []
    elif kind == 12:
        frame["user"] = [None] * n
    elif kind == 13:
        frame.at[r, "shown"] = list(frame.at[r, "shown"]) + [frame.at[r, "shown"][0]]
    elif kind == 14:
        frame["p_prefix"] = [np.asarray(p, dtype=np.float32) for p in frame["p_prefix"]]
    else:
        frame["user"] = [int(rng.integers(0, 3)) for _ in range(n)]
    return frame


def test_mutated_frames_read_the_same_by_both_paths(monkeypatch):
    """300 small frames, each with one change of 16 kinds: both paths give the same log or the same error (message,
    row), and the whole-column path reads most of them (it declines to the reference only where it must)."""
    rng = np.random.default_rng(20261204)
    read_on_columns = 0
    for _ in range(300):
        frame = _mutated(rng)
        table = logged_fast.frame_table(frame)
        try:
            read_on_columns += table is not None and logged_fast.read_frame_fast(
                table, "DataFrame", simulations.policies) is not None
        except InputError:
            read_on_columns += 1  # (refused by the column checks: the reference's error, compared below)
        outcomes = []
        for reference in (False, True):
            try:
                outcomes.append(("log", _reference(frame, monkeypatch)[0] if reference
                                 else _logged(frame, simulations.policies)[0]))
            except InputError as exc:
                outcomes.append(("error", (exc.message, exc.path, exc.line)))
        (kind, fast), (kind_ref, ref) = outcomes
        assert kind == kind_ref, (fast, ref)
        if kind == "log":
            _assert_same(fast, ref)
        else:
            assert fast == ref
    assert read_on_columns > 150


def test_an_error_names_the_other_row_as_a_row():
    """The readers name another line of the log (``line 1``); for a DataFrame it is a row, as the error's own."""
    good = {"query": "q1", "shown": ["a", "b"], "clicks": ["b"], "propensities": {"list": 0.25, "prefix": [0.5, 0.25]}}
    frame = pd.DataFrame([good, good, {**good, "propensities": {"list": 0.25}}, good])
    with pytest.raises(InputError) as exc:
        _logged(frame, simulations.policies)
    assert str(exc.value).startswith("row 3: carries propensities list but row 1 carries propensities list, prefix")
    assert "line 1" not in exc.value.message


def _logger_frame(records: list[dict[str, Any]], shared: bool) -> pd.DataFrame:
    """The records as a DataFrame whose logger column holds dicts: one object per query shared by its rows
    (``shared``) or a copy on every row; the first row's first score a numpy float."""
    import copy

    objects: dict[str, Any] = {}
    rows = []
    for r in records:
        logger = objects.setdefault(r["query"], copy.deepcopy(r["logger"])) if shared else copy.deepcopy(r["logger"])
        rows.append({**r, "logger": logger})
    frame = pd.DataFrame(rows)
    first = next(iter(frame.at[0, "logger"]["scores"]))
    frame.at[0, "logger"]["scores"][first] = np.float64(frame.at[0, "logger"]["scores"][first])
    return frame


@pytest.mark.parametrize("shared", [True, False])
def test_a_frame_of_loggers_reads_as_the_json_lines_log_both_ways(monkeypatch, shared):
    """A DataFrame whose logger column holds dicts (one object per query shared by its rows, or a copy on every row;
    numpy scalars among the scores; a mixture's components) is the JSON-lines log of the same records: read on whole
    columns (onlineeval.io.logged_fast.read_logger_objects_fast: each query's first logger decoded once, the other
    rows compared with it) and row by row (the reference, each logger object converted once by
    onlineeval.api._estimate._plain_once), whose digest is that of the records as every row converted on its own
    gives it. A row whose logger differs from its query's first declines, and is refused naming both rows."""
    import json

    from test_io_logged_fast_logger import LOGGERS
    from test_io_logged_fast_logger import _assert_same as same_logger_log
    from test_io_logged_fast_logger import _records as logger_records

    from onlineeval.api._estimate import _plain
    from onlineeval.io.digest import RecordsDigest
    from onlineeval.io.logged import logged_from_records

    real = logged_fast.read_logger_objects_fast
    for spec in (LOGGERS[0], LOGGERS[4]):
        records = logger_records(5, 300, spec)
        lines = [json.dumps(r) for r in records]  # (the JSON lines' records, read under the frame's name)
        expected = logged_from_records((json.loads(line) for line in lines), simulations.policies, "DataFrame")
        frame = _logger_frame(records, shared)
        seen: list[Any] = []
        with monkeypatch.context() as m:
            m.setattr(logged_fast, "read_logger_objects_fast", lambda *a: seen.append(real(*a)) or seen[-1])
            got, digest = _logged(frame, simulations.policies)
        assert seen and seen[0] is not None  # on whole columns
        same_logger_log(got, expected)
        with monkeypatch.context() as m:
            m.setattr(logged_fast, "logger_frame_table", lambda frame: None)
            got, records_digest = _logged(frame, simulations.policies)
        same_logger_log(got, expected)
        reference = RecordsDigest()
        list(reference.through(logged_fast.row_records(frame.to_dict("records"), [], plain=_plain)))
        assert records_digest == reference.entry("DataFrame") and records_digest is not None
        assert digest != records_digest and digest["records"] == len(frame)
    q = frame.at[0, "query"]
    later = int(np.flatnonzero(frame["query"].to_numpy() == q)[1])
    frame.at[later, "logger"] = {**frame.at[later, "logger"], "policy": "randtop", "n": 2}
    seen.clear()
    with monkeypatch.context() as m, pytest.raises(InputError) as exc:
        m.setattr(logged_fast, "read_logger_objects_fast", lambda *a: seen.append(real(*a)) or seen[-1])
        _logged(frame, simulations.policies)
    assert seen == [None]
    assert exc.value.line == later + 1 and "differs from row 1 " in exc.value.message


def test_a_frame_of_loggers_has_a_digest_of_what_the_reader_takes():
    """The digest of a logger DataFrame read on whole columns: the same for the same content (a copy; loggers shared
    by a query's rows or one copy per row), not moved by a column the reader ignores, moved by one score of one
    query's logger (by one ulp) and by a click."""
    import copy

    from test_io_logged_fast_logger import LOGGERS
    from test_io_logged_fast_logger import _records as logger_records

    records = logger_records(7, 200, LOGGERS[0])
    frame = _logger_frame(records, shared=True)

    def digest(f: pd.DataFrame) -> Any:
        return _logged(f, simulations.policies)[1]

    base = digest(frame)
    assert digest(frame.copy()) == base == digest(_logger_frame(records, shared=False))
    assert digest(frame.assign(note="x")) == base
    bumped = frame.copy()
    bumped["logger"] = [copy.deepcopy(x) for x in frame["logger"]]
    q = bumped.at[3, "query"]
    for i in np.flatnonzero(bumped["query"].to_numpy() == q):
        doc = next(iter(bumped.at[i, "logger"]["scores"]))
        bumped.at[i, "logger"]["scores"][doc] = float(np.nextafter(bumped.at[i, "logger"]["scores"][doc], 9.0))
    assert digest(bumped) != base
    clicked = frame.copy()
    clicked.at[0, "clicks"] = [] if frame.at[0, "clicks"] else [frame.at[0, "shown"][0]]
    assert digest(clicked) != base




@pytest.mark.parametrize("change", ["numpy array inside", "text logger", "missing on a row", "not a dict"])
def test_logger_objects_it_cannot_compare_are_declined_to_the_rows(monkeypatch, change):
    """Logger objects whose == has no single truth value (a numpy array inside a copy), JSON text, a missing logger
    or another type on a row: the whole-column reader declines, and the read (log or error) is the rows'."""
    import copy
    import json

    from test_io_logged_fast_logger import LOGGERS
    from test_io_logged_fast_logger import _records as logger_records

    records = logger_records(9, 60, LOGGERS[4])
    frame = _logger_frame(records, shared=False)
    q = frame.at[0, "query"]
    later = int(np.flatnonzero(frame["query"].to_numpy() == q)[1])
    if change == "numpy array inside":
        for i in np.flatnonzero(frame["query"].to_numpy() == q):
            logger = copy.deepcopy(frame.at[i, "logger"])
            logger["components"] = np.array(logger["components"], dtype=object)
            frame.at[i, "logger"] = logger
    elif change == "text logger":
        frame["logger"] = [json.dumps({**x, "scores": {d: float(v) for d, v in x["scores"].items()}})
                           for x in frame["logger"]]
    elif change == "missing on a row":
        frame.at[later, "logger"] = None
    else:
        frame.at[later, "logger"] = [("policy", "randtop")]
    real = logged_fast.read_logger_objects_fast
    seen: list[Any] = []

    def read() -> Any:
        try:
            log, _ = _logged(frame, simulations.policies)
        except InputError as exc:
            return (exc.message, exc.line)
        return log

    with monkeypatch.context() as m:
        m.setattr(logged_fast, "read_logger_objects_fast", lambda *a: seen.append(real(*a)) or seen[-1])
        got = read()
    with monkeypatch.context() as m:
        m.setattr(logged_fast, "logger_frame_table", lambda frame: None)
        reference = read()
    assert seen == [None]  # declined
    if isinstance(reference, tuple):
        assert got == reference
    else:
        from test_io_logged_fast_logger import _assert_same as same_logger_log

        assert change == "numpy array inside"
        same_logger_log(got, reference)
