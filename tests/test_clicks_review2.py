"""Second review, section A (onlineeval clicks / clickmodels): reading of click lists, labels of the estimators,
reporting of clipped probabilities, dropped clicks and refused models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import onlineeval
from clickmodels.logs import read_click_log
from onlineeval.errors import InputError


# -- A.5b / A.5: clicked ids vs 0/1 flags ------------------------------------------------------------------------------
def _int_doc_sessions() -> pd.DataFrame:
    """The review's frame: integer document ids, clicked ids 0/1 (meant: both documents / document 0 clicked)."""
    s = pd.DataFrame({"session": ["s1", "s2"], "query": ["q", "q"], "docs": [[0, 1], [0]], "clicks": [[0, 1], [0]]})
    return pd.concat([s] * 20, ignore_index=True)


def test_integer_ids_that_look_like_flags_are_refused_not_guessed() -> None:
    frame = _int_doc_sessions()
    with pytest.raises(InputError, match="could be the clicked documents' ids or 0/1 flags") as err:
        onlineeval.fit_clicks(frame, "dctr", pseudo=0)
    assert err.value.line == 1 and "clicks_as='ids'" in str(err.value) and "bools" in str(err.value)
    # said explicitly, each reading gives its own (exact) CTRs: clicked ids -> docs 0 and 1 always clicked
    as_ids = onlineeval.fit_clicks(frame, "dctr", pseudo=0, clicks_as="ids").attractiveness
    assert dict(zip(as_ids.doc, as_ids.value)) == {"0": 1.0, "1": 1.0}
    as_flags = onlineeval.fit_clicks(frame, "dctr", pseudo=0, clicks_as="flags").attractiveness
    assert dict(zip(as_flags.doc, as_flags.value)) == {"0": 0.0, "1": 1.0}
    # bools are flags without asking (lists of Python bools or numpy bool arrays)
    bools = frame.assign(clicks=[[False, True] if len(d) == 2 else np.array([False]) for d in frame["docs"]])
    by_bools = onlineeval.fit_clicks(bools, "dctr", pseudo=0).attractiveness
    assert dict(zip(by_bools.doc, by_bools.value)) == {"0": 0.0, "1": 1.0}
    # numpy integer ids are ids (not 'np.int64(1)' strings)
    arrays = frame.assign(docs=[np.array(d, dtype=np.int64) for d in frame["docs"]],
                          clicks=[np.array([1], dtype=np.int64) if len(d) == 2 else np.array([], dtype=np.int64)
                                  for d in frame["docs"]])
    by_arrays = onlineeval.fit_clicks(arrays, "dctr", pseudo=0).attractiveness
    assert dict(zip(by_arrays.doc, by_arrays.value)) == {"0": 0.0, "1": 1.0}
    with pytest.raises(InputError, match="evaluat|could be"):
        onlineeval.evaluate_clicks(frame, "dctr", test=frame)
    table = onlineeval.evaluate_clicks(frame, "dctr", test=frame, clicks_as="ids")
    fit = onlineeval.fit_clicks(frame, "dctr", clicks_as="ids")  # same training data, same LL per session
    assert table.loc["dctr", "log_likelihood"] == pytest.approx(fit.trace.log_likelihood[-1] / len(frame), rel=1e-12)


def test_integer_flags_with_string_ids_name_the_rule() -> None:
    frame = pd.DataFrame({"query": ["q"] * 2, "docs": [["a", "b"]] * 2, "clicks": [[1, 0], [0, 1]]})
    with pytest.raises(InputError, match="clicks are the clicked documents' ids, not 0/1 flags") as err:
        onlineeval.fit_clicks(frame, "dctr")
    assert err.value.line == 1 and "bools" in str(err.value)
    flags = onlineeval.fit_clicks(frame.assign(clicks=[[True, False], [False, True]]), "dctr", pseudo=0)
    ids = onlineeval.fit_clicks(frame.assign(clicks=[["a"], ["b"]]), "dctr", pseudo=0)
    np.testing.assert_array_equal(flags.attractiveness.value, ids.attractiveness.value)
    with pytest.raises(InputError, match="one bool per shown document"):
        onlineeval.fit_clicks(frame.assign(clicks=[[True], [False, True]]), "dctr")
    with pytest.raises(InputError, match="mix bools and ids"):
        onlineeval.fit_clicks(frame.assign(clicks=[[True, "a"], ["b"]]), "dctr")


def test_jsonl_flags_are_true_false_and_01_lists_get_the_hint(tmp_path: Path) -> None:
    bits = tmp_path / "bits.jsonl"
    bits.write_text(json.dumps({"session": "s1", "query": "q", "docs": ["a", "b"], "clicks": [1, 0]}) + "\n")
    with pytest.raises(InputError, match="not among the shown documents; clicks are the clicked documents' ids, "
                                         r"not 0/1 flags \(for one flag per shown document write true/false\)"):
        read_click_log(bits)
    tsv = tmp_path / "bits.tsv"
    tsv.write_text("s1\tq\ta,b\t1,0\n")
    with pytest.raises(InputError, match="clicks are the clicked documents' ids, not 0/1 flags"):
        read_click_log(tsv)
    flags = tmp_path / "flags.jsonl"
    flags.write_text(json.dumps({"query": "q", "docs": ["a", "b", "c"], "clicks": [False, True, True]}) + "\n")
    ids = tmp_path / "ids.jsonl"
    ids.write_text(json.dumps({"query": "q", "docs": ["a", "b", "c"], "clicks": ["b", "c"]}) + "\n")
    a, b = read_click_log(flags), read_click_log(ids)
    np.testing.assert_array_equal(a.clicks, b.clicks)
    np.testing.assert_array_equal(a.click_order, b.click_order)
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps({"query": "q", "docs": ["a", "b"], "clicks": [True]}) + "\n")
    with pytest.raises(InputError, match="one per shown document: 1 flags for 2 documents"):
        read_click_log(short)
    # integers stay ids in the file format: documents 0 and 1 clicked
    ints = tmp_path / "ints.jsonl"
    ints.write_text(json.dumps({"query": "q", "docs": [0, 1], "clicks": [0, 1]}) + "\n")
    assert read_click_log(ints).clicks.tolist() == [[True, True]]
