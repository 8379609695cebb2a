"""Segment analysis: any per-query table repeated for every value of every attribute of a per-query
attribute file (:func:`read_segments`, :func:`iter_segments`, :func:`by_segment`), and
:func:`~onlineeval.stats.compare.compare_systems` on every segment (:func:`compare_segments`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from onlineeval.errors import InputError
from onlineeval.stats.compare import PairedResult, _validate_frame, compare_systems

__all__ = [
    "SegmentView",
    "read_segments",
    "iter_segments",
    "by_segment",
    "compare_segments",
    "MISSING_SEGMENT",
]

#: Accepted names of the first (query id) column of a segment file.
_QUERY_HEADERS = frozenset({"query", "qid", "query_id"})
#: Segment value given to queries that are absent from the attribute file.
MISSING_SEGMENT = "<missing>"


def read_segments(path: str | Path) -> pd.DataFrame:
    """Read a per-query attribute file (tab-separated) for segment analysis.

    Format: a header line ``query<TAB>attr1<TAB>attr2 ...`` (first column named ``query``,
    ``qid`` or ``query_id``, any case), then one line per query with a value for every
    attribute, e.g. ``q17<TAB>head<TAB>navigational``. Blank lines and lines starting
    with ``#`` are ignored. Values are kept as strings (bucket numeric attributes such as
    the number of candidates before writing the file).

    Returns
    -------
    pandas.DataFrame
        Index ``query`` (str), one string column per attribute.

    Raises
    ------
    InputError
        With file and line: an empty file, a missing header (first column not named
        ``query``), a header with fewer than 2 columns or repeated or empty names, a row
        with the wrong number of fields, an empty query id or value, a query listed twice,
        undecodable text.
    """
    p = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", p) from None
    header: list[str] | None = None
    header_line = 0
    ids: list[str] = []
    rows: list[list[str]] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [f.strip() for f in line.split("\t")]
        if header is None:
            if len(parts) < 2:
                raise InputError(
                    "header must be 'query<TAB>attribute[<TAB>attribute...]' (tab-separated, at least 2 columns)",
                    p, lineno,
                )  # fmt: skip
            if parts[0].lower() not in _QUERY_HEADERS:
                raise InputError(
                    f"the first line must be a header whose first column is 'query' (or 'qid'), got {parts[0]!r}; "
                    "expected 'query<TAB>attribute[<TAB>attribute...]'",
                    p, lineno,
                )  # fmt: skip
            names = parts[1:]
            if any(not nm for nm in names):
                raise InputError("header has an empty attribute name", p, lineno)
            if len(set(names)) != len(names):
                raise InputError("header repeats an attribute name", p, lineno)
            header, header_line = parts, lineno
            continue
        if len(parts) != len(header):
            raise InputError(
                f"expected {len(header)} tab-separated fields (query + {len(header) - 1} attribute(s)), "
                f"got {len(parts)}",
                p, lineno,
            )  # fmt: skip
        if not parts[0]:
            raise InputError("empty query id", p, lineno)
        empty = [header[i] for i in range(1, len(parts)) if not parts[i]]
        if empty:
            raise InputError(f"empty value for attribute {empty[0]!r}", p, lineno)
        if parts[0] in seen:
            raise InputError(f"query {parts[0]!r} listed twice (first on line {seen[parts[0]]})", p, lineno)
        seen[parts[0]] = lineno
        ids.append(parts[0])
        rows.append(parts[1:])
    if header is None:
        raise InputError("empty file: expected a header 'query<TAB>attribute...' and one line per query", p)
    if not rows:
        raise InputError("no query lines after the header", p, header_line)
    table = pd.DataFrame(rows, columns=header[1:], index=pd.Index(ids, name="query"), dtype=str)
    return table


class SegmentView(NamedTuple):
    """One segment: an attribute, one of its values, and the queries in it (sorted)."""

    attribute: str
    value: str
    queries: tuple[str, ...]


def iter_segments(segments: pd.DataFrame, queries: Sequence[Hashable]) -> Iterator[SegmentView]:
    """Every (attribute, value) segment of ``queries``, attributes in column order and
    values sorted; queries absent from ``segments`` form the value :data:`MISSING_SEGMENT`.
    Segments with no query are not produced."""
    qs = sorted({str(q) for q in queries})
    for attribute in segments.columns:
        col = segments[attribute]
        mapping = dict(zip(col.index.astype(str), col.astype(str)))
        labels = np.array([mapping.get(q, MISSING_SEGMENT) for q in qs], dtype=object)
        qarr = np.array(qs, dtype=object)
        for value in sorted(set(labels.tolist())):
            yield SegmentView(str(attribute), value, tuple(qarr[labels == value].tolist()))


def by_segment(
    per_query: pd.DataFrame,
    segments: pd.DataFrame,
    table: Callable[[pd.DataFrame], pd.DataFrame],
) -> pd.DataFrame:
    """Apply ``table`` to the rows of every segment and stack the results.

    Parameters
    ----------
    per_query:
        Any frame with a ``query`` column (e.g. the long per-query values).
    segments:
        Attribute table from :func:`read_segments`.
    table:
        Function from a subset of ``per_query`` to a table (e.g. mean per system and
        metric, or ``lambda f: results_to_frame(compare_systems(f, ...))``).

    Returns
    -------
    pandas.DataFrame
        The stacked tables with leading columns ``segment_attribute``,
        ``segment_value`` and ``segment_queries`` (number of queries in the segment).
    """
    if "query" not in per_query.columns:
        raise InputError("per_query: missing column query")
    keys = per_query["query"].astype(str)
    parts = []
    for view in iter_segments(segments, keys.unique()):
        sub = per_query[keys.isin(view.queries).to_numpy()]
        out = table(sub).reset_index(drop=True)
        out.insert(0, "segment_queries", len(view.queries))
        out.insert(0, "segment_value", view.value)
        out.insert(0, "segment_attribute", view.attribute)
        parts.append(out)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def compare_segments(
    per_query: pd.DataFrame,
    segments: pd.DataFrame,
    baseline: str,
    *,
    seed: int | np.random.SeedSequence,
    **options: Any,
) -> list[PairedResult]:
    """:func:`compare_systems` on every segment; records carry their segment.

    Each segment is its own family for the Holm correction (a segment table reads like a
    separate evaluation). The same ``seed`` is used for every segment. ``options`` are
    passed to :func:`compare_systems` (``n_permutations``, ``n_bootstrap``, ``alpha``,
    ``n_worst``, ``tie_tolerance``).
    """
    frame = _validate_frame(per_query)
    out: list[PairedResult] = []
    for view in iter_segments(segments, frame["query"].unique()):
        sub = frame[frame["query"].isin(view.queries).to_numpy()]
        for r in compare_systems(sub, baseline, seed=seed, **options):
            out.append(replace(r, segment_attribute=view.attribute, segment_value=view.value))
    return out
