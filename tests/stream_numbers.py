"""The stored numbers of tests/test_stream_version.py: every number replicate 0 of its CONFIG reports (each row's
estimate, SE, interval, p-value, counts), written to :data:`NUMBERS_FILE` by :data:`REGENERATE` and compared within
:data:`RTOL` / :data:`ATOL` (:func:`compare_numbers`). Split from that module (the digests of the draws stay there):
the file's format, its comparison rules and its writer, which refuses a change of stored numbers at the same
STREAM_VERSION."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from simulations.job import STREAM_VERSION

#: the numbers replicate 0 of CONFIG reports (its rows), written by :data:`REGENERATE`
NUMBERS_FILE = Path(__file__).with_name("data") / "stream_version_numbers.json"
#: a stored float and a new one agree within RTOL of the larger or ATOL: last-bit differences of other CPUs, NumPy and
#: BLAS builds pass (other summation orders: 4e-13 at most, see the tests below), a changed formula does not (one term
#: times 1 + 1e-6 moves the estimates it enters by 1e-6 to 1e-5 of themselves)
RTOL, ATOL = 1e-9, 1e-12
#: the fields compared relatively only (no ATOL): p-values, whose small values carry the decision
P_FIELDS = ("pvalue",)
#: the keys of a row that say which number it is (the rest are the numbers compared)
ROW_KEYS = ("replicate", "design", "aa", "day", "metric")
REGENERATE = "python tests/test_stream_version.py --write-numbers"
NUMBERS_MESSAGE = ("if the change is intended, bump STREAM_VERSION in simulations/stream.py (a resumed run or sweep "
                   "would otherwise mix replicates computed before and after it) and regenerate the stored numbers: "
                   + REGENERATE)


def _row_label(row: dict[str, Any]) -> str:
    """The design of a row as the digests name it (``ab (A/A)``; a null variant's rows are its design's, ``null:``)."""
    return f"{row['design']} (A/A)" if row["aa"] else str(row["design"])


def _encode(value: Any) -> Any:
    """A row's value as JSON: floats as they are (``repr`` round-trips), NaN as null, infinities as strings."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        x = float(value)
        return None if math.isnan(x) else x if math.isfinite(x) else ("inf" if x > 0 else "-inf")
    if isinstance(value, str):
        return value
    raise TypeError(f"a row holds {value!r} ({type(value).__name__}): give it an encoding in {__file__}")


def _decode(value: Any) -> Any:
    if value is None:
        return math.nan
    return float(value) if value in ("inf", "-inf") else value


def replicate_numbers(rows: list[dict[str, Any]]) -> tuple[list[str], dict[str, dict[str, list[Any]]]]:
    """``(fields, {design: {"day D metric": [the row's values of fields]}})``: every number the rows report."""
    fields = [k for k in rows[0] if k not in ROW_KEYS]
    out: dict[str, dict[str, list[Any]]] = {}
    for row in rows:
        assert [k for k in row if k not in ROW_KEYS] == fields, f"rows with other fields: {list(row)}"
        entries = out.setdefault(_row_label(row), {})
        key = f"day {row['day']} {row['metric']}"
        assert key not in entries, f"{_row_label(row)}: two rows {key!r}"
        entries[key] = [_encode(row[k]) for k in fields]
    return fields, out


def _same(old: Any, new: Any, field: str = "") -> bool:
    """Whether a stored value and a new one agree: floats within RTOL of the larger or ATOL, except p-values, which
    are compared relatively only (an absolute 1e-12 would let a p-value of 1e-22 become 1e-14 unnoticed)."""
    old, new = _decode(old), _decode(new)
    if isinstance(old, bool) or isinstance(new, bool) or isinstance(old, str) or isinstance(new, str):
        return type(old) is type(new) and old == new
    if isinstance(old, int) and isinstance(new, int):
        return old == new
    if math.isnan(old) or math.isnan(new):
        return math.isnan(old) and math.isnan(new)
    return math.isclose(old, new, rel_tol=RTOL, abs_tol=0.0 if field in P_FIELDS else ATOL)


def _change(old: Any, new: Any) -> str:
    old, new = _decode(old), _decode(new)
    text = f"stored {old!r}, now {new!r}"
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (old, new))
    if numbers and math.isfinite(old) and math.isfinite(new) and old != 0:
        text += f" (relative change {(new - old) / abs(old):.3g})"
    return text


def compare_numbers(fields: list[str], stored: dict[str, list[Any]], got: dict[str, list[Any]],
                    stored_fields: list[str]) -> list[str]:
    """The differences between one design's stored numbers and a run's, one line each (empty: the same). Every field
    is compared, p-values too: a p-value of rounding noise over rounding noise (probabilistic multileaving's A/A rows
    were -8.8e-19 +- 3.7e-19, p = 0.016, before STREAM_VERSION 6 made them exact ties) is a defect to see, not skip."""
    if stored_fields != fields:
        return [f"the rows' fields changed: stored {stored_fields}, now {fields}"]
    lines = [f"{key}: a row no longer reported" for key in stored if key not in got]
    lines += [f"{key}: a new row" for key in got if key not in stored]
    for key in (k for k in stored if k in got):
        lines += [f"{key}, {field}: {_change(a, b)}" for field, a, b in zip(fields, stored[key], got[key], strict=True)
                  if not _same(a, b, field)]
    return lines


def load_numbers() -> dict[str, Any]:
    return json.loads(NUMBERS_FILE.read_text())


def numbers_text(rows: list[dict[str, Any]]) -> str:
    """The stored file's text: one line per row, so that a regeneration's diff shows which rows changed."""
    fields, designs = replicate_numbers(rows)
    about = f"the numbers replicate 0 of CONFIG in tests/test_stream_version.py reports: regenerate with {REGENERATE}"
    lines = ["{",
             f'  "about": {json.dumps(about)},',
             f'  "stream_version": {STREAM_VERSION},',
             f'  "fields": {json.dumps(fields)},',
             '  "designs": {']
    for i, (label, entries) in enumerate(sorted(designs.items())):
        lines.append(f"    {json.dumps(label)}: {{")
        lines += [f"      {json.dumps(key)}: {json.dumps(values, allow_nan=False)}"
                  + ("," if j < len(entries) - 1 else "") for j, (key, values) in enumerate(entries.items())]
        lines.append("    }" + ("," if i < len(designs) - 1 else ""))
    lines += ["  }", "}", ""]
    text = "\n".join(lines)
    assert json.loads(text)["designs"] == designs
    return text


def write_numbers(rows: list[dict[str, Any]], same_version: bool = False) -> str:
    """Write the stored numbers of ``rows``; refuses (at the stored STREAM_VERSION, unless ``same_version``) when a
    number stored for a design changed, i.e. when STREAM_VERSION needs the bump first."""
    if NUMBERS_FILE.exists() and not same_version:
        stored = load_numbers()
        if stored["stream_version"] == STREAM_VERSION:
            fields, got = replicate_numbers(rows)
            changed = {label: compare_numbers(fields, {k: v for k, v in entries.items() if k in got.get(label, {})},
                                              {k: v for k, v in got.get(label, {}).items() if k in entries},
                                              stored["fields"])
                       for label, entries in stored["designs"].items()}
            changed = {label: lines for label, lines in changed.items() if lines}
            if changed:
                first = next(iter(changed.items()))
                raise SystemExit(f"numbers changed for {', '.join(changed)} (e.g. {first[0]}: {first[1][0]}) at "
                                 f"the stored STREAM_VERSION {STREAM_VERSION}: bump it in simulations/stream.py first, "
                                 "or pass --same-version if only this test's CONFIG changed them")
    NUMBERS_FILE.parent.mkdir(exist_ok=True)
    NUMBERS_FILE.write_text(numbers_text(rows))
    return str(NUMBERS_FILE)
