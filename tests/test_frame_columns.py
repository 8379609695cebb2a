"""API DataFrames with a column twice, or with a needed column as their index.

A column twice (``pd.concat([df, df[["query"]]], axis=1)``, or ``query`` beside ``query_id``, which the API reads as
``query``) failed inside pandas ("Per-column arrays must each be 1-dimensional" for qrels), as ``KeyError: 0`` for
logs and sessions, and a segments frame's two query columns were read as tuples ("none of its 2 queries is an
evaluated query (ids e.g. "('q1', 'q1')")"). A log whose users were its index was estimated with every impression
its own cluster (the index is not read), and one whose queries were its index was refused as "row 1: missing key
'query'". Each is now one InputError naming the column."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import onlineeval
from onlineeval.errors import InputError

QRELS = pd.DataFrame({"query": ["q1", "q1", "q2"], "doc": ["d1", "d2", "d1"], "grade": [2, 0, 1]})
RUN = pd.DataFrame({"query": ["q1", "q1", "q2"], "doc": ["d1", "d2", "d1"], "score": [3.0, 2.0, 1.0]})
LOG = pd.DataFrame({"query": ["q1", "q1", "q2", "q2"], "user": ["u1", "u2", "u1", "u2"],
                    "shown": [["d1", "d2"], ["d2", "d1"], ["d1", "d2"], ["d1", "d2"]],
                    "clicks": [["d1"], [], ["d2"], []], "p_list": [0.5, 0.5, 0.5, 0.5]})
SESSIONS = LOG[["query", "shown", "clicks"]].rename(columns={"shown": "docs"})
TWICE = "the DataFrame has the column '{}' more than once"


def test_qrels_and_runs_with_a_column_twice() -> None:
    with pytest.raises(InputError, match="qrels: the DataFrame has more than one relevance \\(or grade\\) column"):
        onlineeval.evaluate(pd.concat([QRELS, QRELS[["grade"]]], axis=1), {"r": RUN})
    both = QRELS.assign(query_id=QRELS["query"])  # read as query: two query columns
    with pytest.raises(InputError, match="qrels: the DataFrame has more than one query_id \\(or query\\) column"):
        onlineeval.evaluate(both, {"r": RUN})
    with pytest.raises(InputError, match="run 'r': " + TWICE.format("x")):  # a column the evaluation does not read
        onlineeval.evaluate(QRELS, {"r": pd.concat([RUN.assign(x=1), RUN[["score"]].rename(columns={"score": "x"})],
                                                   axis=1)})


def test_qrels_and_runs_with_their_ids_as_the_index() -> None:
    with pytest.raises(InputError, match="query is the DataFrame's index, not a column .*df.reset_index\\(\\)"):
        onlineeval.evaluate(QRELS.set_index("query"), {"r": RUN})
    run = RUN.rename(columns={"query": "query_id", "doc": "doc_id"}).set_index(["query_id", "doc_id"])
    with pytest.raises(InputError, match="query_id and doc_id are the DataFrame's index, not a column"):
        onlineeval.evaluate(QRELS, {"r": run})


def _targets(tmp_path: Path) -> dict[str, Path]:
    path = tmp_path / "B.run"
    path.write_text("q1 Q0 d1 1 2 B\nq1 Q0 d2 2 1 B\nq2 Q0 d1 1 2 B\nq2 Q0 d2 2 1 B\n")
    return {"B": path}


def test_logs_with_a_column_twice_or_as_the_index(tmp_path: Path) -> None:
    targets = _targets(tmp_path)
    onlineeval.estimate(LOG, targets, "ips")  # the frame itself is fine
    with pytest.raises(InputError, match="log: " + TWICE.format("query")):
        onlineeval.estimate(pd.concat([LOG, LOG[["query"]]], axis=1), targets, "ips")
    with pytest.raises(InputError, match="log: query is the DataFrame's index, not a column"):
        onlineeval.estimate(LOG.set_index("query"), targets, "ips")
    # the users as the index: read without them, every impression was its own cluster
    with pytest.raises(InputError, match="log: user is the DataFrame's index, not a column"):
        onlineeval.estimate(LOG.set_index("user"), targets, "ips")


def test_sessions_with_a_column_twice_or_as_the_index() -> None:
    onlineeval.fit_clicks(SESSIONS, "pbm")
    with pytest.raises(InputError, match="sessions: " + TWICE.format("docs")):
        onlineeval.fit_clicks(pd.concat([SESSIONS, SESSIONS[["docs"]]], axis=1), "pbm")
    with pytest.raises(InputError, match="sessions lacks column\\(s\\) query; .*query is the DataFrame's index"):
        onlineeval.fit_clicks(SESSIONS.set_index("query"), "pbm")


def test_segments_with_a_column_twice() -> None:
    segments = pd.DataFrame({"query": ["q1", "q2"], "kind": ["a", "b"]})
    assert onlineeval.evaluate(QRELS, {"r": RUN}, segments=segments).systems == ["r"]
    with pytest.raises(InputError, match="segments: " + TWICE.format("query")):
        onlineeval.evaluate(QRELS, {"r": RUN}, segments=pd.concat([segments, segments[["query"]]], axis=1))
    with pytest.raises(InputError, match="segments: " + TWICE.format("kind")):
        onlineeval.evaluate(QRELS, {"r": RUN}, segments=pd.concat([segments, segments[["kind"]]], axis=1))


def test_ready_target_lists_refuse_a_document_twice_or_a_missing_id(tmp_path: Path) -> None:
    """A target given as ready lists ({query: [doc, ...]}) with a document twice was estimated as if another
    document stood in its second slot (IIPS 1.28 instead of 1.18 on the README's log), and a None id was read as
    the document 'None'. Both are refused naming the target and query; DeterministicTarget refuses the same."""
    import numpy as np

    from onlineeval.estimators import DeterministicTarget

    good = {"q1": ["d1", "d2"], "q2": ["d2", "d1"]}
    onlineeval.estimate(LOG, {"B": good}, "ips")
    with pytest.raises(InputError, match="target 'B': query 'q2' lists document 'd2' twice"):
        onlineeval.estimate(LOG, {"B": {"q1": ["d1", "d2"], "q2": ["d2", "d2"]}}, "ips")
    with pytest.raises(InputError, match="target 'B': query 'q1': document ids must be strings or integers, got None"):
        onlineeval.estimate(LOG, {"B": {"q1": [None, "d2"], "q2": ["d2", "d1"]}}, "ips")
    with pytest.raises(InputError, match="target 'T': the list of query index 1 holds document 3 twice"):
        DeterministicTarget(np.array([[0, 1, 2], [3, 1, 3]]), "T")
    assert DeterministicTarget(np.array([[0, 1, -1, -1]]), "T").lists.tolist() == [[0, 1, -1, -1]]  # empty slots
