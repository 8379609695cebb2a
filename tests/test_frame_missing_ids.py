"""A missing id (None, NaN, pandas' NA) in a DataFrame given to the Python API is refused naming the row, as the
files' readers refuse a missing field or a JSON null id. Under pandas 3 a qrels row with a NaN query stayed missing
through astype(str) and was grouped with another query (query 2's nDCG@5 came out 0.83 instead of 1); in a frame
of sessions a None query, document or clicked id was read as the id 'None' (or 'nan')."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import onlineeval
from onlineeval.errors import InputError

QRELS = pd.DataFrame({"query_id": ["1", "1", "2"], "doc_id": ["a", "b", "c"], "relevance": [1, 0, 2]})
RUN = pd.DataFrame({"query_id": ["1", "1", "2"], "doc_id": ["a", "b", "c"], "score": [2.0, 1.0, 1.0]})
MISSING = [None, np.nan, pd.NA]


def test_the_frames_evaluate_to_the_exact_values() -> None:
    ev = onlineeval.evaluate(QRELS, {"r": RUN}, metrics="nDCG@5")
    assert ev.per_query["value"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("missing", MISSING, ids=repr)
@pytest.mark.parametrize(("table", "column", "row"), [("qrels", "query_id", 0), ("qrels", "doc_id", 2),
                                                      ("run", "query_id", 1), ("run", "doc_id", 2)])
def test_a_missing_id_in_qrels_or_a_run_is_refused(missing: Any, table: str, column: str, row: int) -> None:
    qrels, run = QRELS.copy(), RUN.copy()
    frame = qrels if table == "qrels" else run
    frame[column] = frame[column].astype(object)
    frame.loc[row, column] = missing
    with pytest.raises(InputError) as err:
        onlineeval.evaluate(qrels, {"r": run}, metrics="nDCG@5")
    kind = "query" if column == "query_id" else "doc"
    assert err.value.line == row + 1 and f"the {kind} id is missing (None, NaN or NA)" in err.value.message


SESSIONS = pd.DataFrame({"query": ["q", "q", "r", "r"] * 25, "docs": [["a", "b"]] * 100,
                         "clicks": [["a"], [], ["b"], ["a", "b"]] * 25})


@pytest.mark.parametrize(("column", "value", "message"), [
    ("query", None, "column 'query': the query is missing (None or NaN)"),
    ("query", np.nan, "column 'query': the query is missing (None or NaN)"),
    ("query", pd.NA, "column 'query': the query is missing (None or NaN)"),
    ("docs", ["a", None], "column 'docs': an id is missing (None or NaN) in ['a', None]"),
    ("clicks", [None], "column 'clicks': an id is missing (None or NaN) in [None]"),
    ("clicks", ["a", np.nan], "column 'clicks': an id is missing (None or NaN) in ['a', nan]"),
])  # fmt: skip
def test_a_missing_id_in_a_frame_of_sessions_is_refused(column: str, value: Any, message: str) -> None:
    sessions = SESSIONS.copy()
    sessions[column] = sessions[column].astype(object)
    sessions.at[2, column] = value
    with pytest.raises(InputError) as err:
        onlineeval.fit_clicks(sessions, "pbm")
    assert err.value.line == 3 and err.value.message == message


def test_missing_clicks_are_still_no_click() -> None:
    """(A missing clicks cell is a session without a click, as documented: not an id.)"""
    sessions = SESSIONS.copy()
    sessions["clicks"] = sessions["clicks"].astype(object)
    sessions.at[0, "clicks"] = None
    same = SESSIONS.copy()
    same.at[0, "clicks"] = []
    assert onlineeval.fit_clicks(sessions, "pbm").to_dict() == onlineeval.fit_clicks(same, "pbm").to_dict()


def test_a_missing_session_id_is_refused() -> None:
    sessions = SESSIONS.copy()
    sessions["session"] = [f"s{i}" for i in range(len(sessions))]
    sessions["session"] = sessions["session"].astype(object)
    sessions.at[1, "session"] = None
    with pytest.raises(InputError) as err:
        onlineeval.fit_clicks(sessions, "pbm")
    assert err.value.line == 2 and err.value.message == "column 'session': the session id is missing (None or NaN)"


def _segment_frames() -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    ids = [str(i) for i in range(30) for _ in range(2)]
    qrels = pd.DataFrame({"query_id": ids, "doc_id": ["a", "b"] * 30, "relevance": [1, 0] * 30})
    runs = {name: pd.DataFrame({"query_id": ids, "doc_id": ["a", "b"] * 30, "score": scores * 30})
            for name, scores in (("a", [2.0, 1.0]), ("b", [1.0, 2.0]))}
    return qrels, runs


@pytest.mark.parametrize("missing", MISSING, ids=repr)
def test_a_missing_segment_value_or_query_is_refused(missing: Any) -> None:
    """As the segments file refuses an empty value (a TypeError from the segments' sort before)."""
    qrels, runs = _segment_frames()
    values = ["nav"] * 10 + ["x"] * 5 + ["inf"] * 15
    seg = pd.DataFrame({"query": [str(i) for i in range(30)], "type": values})
    assert len(onlineeval.evaluate(qrels, runs, metrics="P@1", segments=seg).segment_means) == 6
    bad = seg.astype(object)
    bad.loc[10, "type"] = missing
    with pytest.raises(InputError) as err:
        onlineeval.evaluate(qrels, runs, metrics="P@1", segments=bad)
    assert err.value.line == 11 and "the value of 'type' is missing (None or NaN) for query '10'" in err.value.message
    bad = seg.astype(object)
    bad.loc[29, "query"] = missing
    with pytest.raises(InputError) as err:
        onlineeval.evaluate(qrels, runs, metrics="P@1", segments=bad)
    assert err.value.line == 30 and "segments: a query id is missing (None or NaN)" in err.value.message
