"""JSON nested deeper than pyarrow's JSON parser survives (it recurses per level and dies of a segmentation fault at
some 10^4 levels) is declined by the fast readers before pyarrow parses it (onlineeval.io.logged_scan.deeper_than),
so the line-by-line readers name the line ("nested too deeply"): estimate's log reader and the click-log reader."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from onlineeval.io.logged_scan import deeper_than


def _depth(value) -> int:
    """Levels of objects and arrays of a decoded JSON value (the independent reference)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def test_the_depth_scan_equals_the_decoded_values_depth():
    """deeper_than on random JSON lines (strings full of brackets, quotes and escapes) against the depth of what
    json decodes, at every limit around it."""
    rng = np.random.default_rng(9)
    alphabet = ['[', ']', '{', '}', '"', '\\', 'a', ' ', ',', ':']

    def value(level):
        kind = rng.integers(0, 4 if level < 7 else 2)
        if kind == 0:
            return "".join(rng.choice(alphabet, size=rng.integers(0, 6)))
        if kind == 1:
            return int(rng.integers(-5, 5))
        if kind == 2:
            return [value(level + 1) for _ in range(rng.integers(0, 3))]
        return {f"k{i}]": value(level + 1) for i in range(rng.integers(0, 3))}

    lines = [json.dumps(value(0)) for _ in range(400)]
    assert max(_depth(json.loads(x)) for x in lines) >= 6
    for text in lines:
        d = _depth(json.loads(text))
        for limit in range(max(d - 2, 0), d + 2):
            assert deeper_than(text.encode(), limit) == (d > limit), (text, limit)
    joined = "\n".join(lines).encode()  # lines scanned afresh: the deepest line decides
    assert deeper_than(joined, max(_depth(json.loads(x)) for x in lines) - 1)


_SCRIPT = """
import sys
from onlineeval.io.logged import read_logged
from onlineeval.errors import InputError
try:
    read_logged(sys.argv[1])
except InputError as exc:
    print(exc.line, exc.message)
"""


@pytest.mark.parametrize("where", ["propensities", "clicks"])
def test_estimates_fast_reader_declines_deep_nesting_instead_of_crashing(tmp_path, where):
    """A log over the fast reader's size with a value nested 30,000 deep on line 2: pyarrow's parser used to die of
    a segmentation fault; now the line-by-line reader names the line (run in a child process: a crash would kill
    the test runner's worker)."""
    good = json.dumps({"query": "q1", "shown": ["a", "b"], "clicks": ["a"], "propensities": {"list": 0.5}})
    deep = "[" * 30000 + "]" * 30000
    bad = (good.replace('"list": 0.5', f'"list": 0.5, "x": {deep}') if where == "propensities"
           else good.replace('"clicks": ["a"]', f'"clicks": {deep}'))
    path = tmp_path / "log.jsonl"
    path.write_text(good + "\n" + bad + "\n" + (good + "\n") * 20000)
    assert path.stat().st_size > 1 << 20  # (the fast reader's minimum)
    res = subprocess.run([sys.executable, "-c", _SCRIPT, str(path)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, (res.returncode, res.stderr[-2000:])
    assert res.stdout.strip() == "2 malformed JSON: nested too deeply"


def test_a_parquet_loggers_json_text_nested_too_deeply_is_a_clear_error(tmp_path):
    """(It was a RecursionError traceback.)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from onlineeval.errors import InputError
    from onlineeval.io.logged import read_logged
    from simulations import policies

    deep = '{"policy": "plackett_luce", "x": ' + "[" * 30000 + "]" * 30000 + "}"
    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({"query": ["q1"], "shown": [["a"]], "clicks": [[]], "logger": [deep]}), path)
    with pytest.raises(InputError) as exc:
        read_logged(path, policies=policies)
    assert (exc.value.path, exc.value.message) == (str(path), "row 1: logger is not valid JSON text (nested too "
                                                              "deeply)")


def test_an_integer_too_long_for_python_is_a_clear_error_naming_the_line(tmp_path):
    """json refuses integers of more than 4300 digits with a ValueError that is not a JSONDecodeError (it was a
    traceback in estimate's and the click-log reader, and in a Parquet logger's text)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clickmodels.logs import read_jsonl
    from onlineeval.errors import InputError
    from onlineeval.io.logged import read_logged
    from simulations import policies

    big = "9" * 5000
    good = '{"query": "q1", "shown": ["a"], "clicks": [], "propensities": {"list": 0.5}}'
    log = tmp_path / "log.jsonl"
    log.write_text(f'{good}\n{{"query": "q1", "shown": ["a"], "clicks": [], "user": {big}, '
                   '"propensities": {"list": 0.5}}\n')
    with pytest.raises(InputError) as exc:
        read_logged(log)
    assert (exc.value.line, exc.value.message) == (2, "malformed JSON: an integer of more than 4300 digits")
    clicks = tmp_path / "clicks.jsonl"
    clicks.write_text(f'{{"query": "q1", "docs": ["a"]}}\n{{"query": "q1", "docs": ["a"], "session": {big}}}\n')
    with pytest.raises(InputError) as exc:
        read_jsonl(clicks)
    assert (exc.value.line, exc.value.message) == (2, "invalid JSON: an integer of more than 4300 digits")
    path = tmp_path / "log.parquet"
    pq.write_table(pa.table({"query": ["q1"], "shown": [["a"]], "clicks": [[]], "logger": [f'{{"x": {big}}}']}), path)
    with pytest.raises(InputError, match=r"row 1: logger is not valid JSON text \(an integer of more than 4300"):
        read_logged(path, policies=policies)


def test_a_fitted_parameters_file_nested_too_deeply_or_with_a_huge_integer_is_a_clear_error(tmp_path):
    from clickmodels.estimation.base import load_fit
    from onlineeval.errors import InputError

    for text, message in [('{"model": ' + "[" * 30000 + "]" * 30000 + "}", "nested too deeply"),
                          ('{"model": ' + "9" * 5000 + "}", "an integer of more than 4300 digits")]:
        path = tmp_path / "fit.json"
        path.write_text(text)
        with pytest.raises(InputError, match=message) as exc:
            load_fit(path)
        assert exc.value.path == str(path)
