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
