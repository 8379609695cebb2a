"""Digests of inputs given in memory (onlineeval.io.digest.memory_entry, RecordsDigest): the SHA-256 of the
content's canonical JSON (checked against hashlib on the JSON written out independently) or, for a DataFrame pyarrow
converts, of its Arrow table; the same content gives the same digest, any change of a value (one ulp of a float),
a name or a type another, a DataFrame's index none."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

from onlineeval.io.digest import RecordsDigest, memory_entry


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_dict_is_the_sha256_of_its_compact_json_with_exact_floats():
    run = {"q1": {"d1": 0.1, "d2": 1 / 3}, "q2": {"d3": -2.5e-300}}
    assert memory_entry(run) == {"in_memory": "dict", "sha256": _sha(json.dumps(run, separators=(",", ":")))}
    bumped = {"q1": {"d1": float(np.nextafter(0.1, 1.0)), "d2": 1 / 3}, "q2": {"d3": -2.5e-300}}
    assert memory_entry(bumped)["sha256"] != memory_entry(run)["sha256"]
    assert memory_entry({"q2": run["q2"], "q1": run["q1"]})["sha256"] != memory_entry(run)["sha256"]  # order given


def test_a_dataframe_is_its_arrow_table_and_not_its_index():
    frame = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "b", "c"],
                          "score": np.array([0.5, 0.25, 1e-17])})
    entry = memory_entry(frame)
    assert entry["in_memory"] == "DataFrame" and len(entry["sha256"]) == 64
    assert memory_entry(frame.copy()) == entry  # the same content, another object
    assert memory_entry(frame.set_index(pd.Index([7, 8, 9]))) == entry
    changed = frame.copy()
    changed.loc[2, "score"] = float(np.nextafter(1e-17, 1.0))
    assert memory_entry(changed) != entry
    assert memory_entry(frame.rename(columns={"score": "grade"})) != entry
    assert memory_entry(frame.astype({"score": np.float32})) != entry  # another type: other numbers
    big = pd.DataFrame({"x": np.arange(70_000, dtype=np.float64)})
    again = big.copy()
    again.loc[69_999, "x"] = 0.0
    assert memory_entry(big) == memory_entry(big.copy()) != memory_entry(again)


def test_a_dataframe_pyarrow_cannot_convert_is_its_columns_json_in_blocks():
    frame = pd.DataFrame({"query": ["q1", 2, "q3"], "score": [0.5, 0.25, 1e-17]})  # mixed ids: no Arrow column
    header = json.dumps({"columns": ["query", "score"], "rows": 3}, separators=(",", ":"))
    body = "".join(json.dumps(frame[c].tolist(), separators=(",", ":")) for c in frame.columns)
    assert memory_entry(frame) == {"in_memory": "DataFrame", "sha256": _sha(header + body)}


def test_numpy_values_are_their_python_values_and_other_objects_have_no_digest():
    assert memory_entry({"q": np.array([1.5, 2.0])}) == memory_entry({"q": [1.5, 2.0]})
    assert memory_entry({"q": np.float64(0.3)}) == memory_entry({"q": 0.3})
    assert memory_entry({"q": object()}) is None
    assert memory_entry(pd.DataFrame({"t": [object()]})) is None


def test_records_pass_through_unchanged_and_are_hashed_in_blocks():
    records = [{"query": f"q{i % 7}", "shown": ["a", "b"], "clicks": [i % 2, 0], "p": i / 3} for i in range(10_000)]
    digest = RecordsDigest()
    assert list(digest.through(iter(records))) == records
    block = RecordsDigest.BLOCK
    text = "".join(json.dumps(records[at: at + block], separators=(",", ":")) for at in range(0, len(records), block))
    assert digest.entry("DataFrame") == {"in_memory": "DataFrame", "records": 10_000, "sha256": _sha(text)}
    other = RecordsDigest()
    list(other.through(iter(records[:-1] + [{**records[-1], "p": float(np.nextafter(records[-1]["p"], 0.0))}])))
    assert other.entry("DataFrame")["sha256"] != digest.entry("DataFrame")["sha256"]
    odd = RecordsDigest()
    assert len(list(odd.through(iter([{"query": object()}])))) == 1 and odd.entry("DataFrame") is None
