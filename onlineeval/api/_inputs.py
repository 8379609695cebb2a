"""Inputs of the Python API: qrels and runs as DataFrames, pytrec_eval dicts or TREC files, and run names.

:func:`_frame` turns any accepted qrels or run into the frame the evaluators read; :func:`_named_runs` names
runs as the CLI does. Used by :mod:`onlineeval.api._evaluate` and :mod:`onlineeval.api._estimate`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from onlineeval.errors import ConfigError, InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

PathLike = Union[str, "os.PathLike[str]"]
#: a qrels or run: a DataFrame, a pytrec_eval dict of dicts, or a TREC file (a run also a query doc score file)
TableLike = Union["pd.DataFrame", Mapping[str, Mapping[str, float]], PathLike]

#: ir_measures' column names -> onlineeval's (qrels: relevance, runs: score)
IR_MEASURES_COLUMNS = {"query_id": "query", "doc_id": "doc", "relevance": "grade"}


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


def _frame(table: Any, kind: str, value: str, name: str) -> pd.DataFrame:
    """A qrels (``value`` = grade) or run (``value`` = score) frame from any accepted form."""
    import pandas as pd

    from onlineeval.io import qrels_from_frame, read_qrels, read_ranking, run_from_frame

    if _is_path(table):  # a run file: a TREC run or a query doc score file (read_ranking tells them apart)
        path = Path(table)
        return read_qrels(path, check_unique=False) if kind == "qrels" else read_ranking(path, check_unique=False)
    if isinstance(table, pd.DataFrame):
        frame = table.rename(columns={k: v for k, v in IR_MEASURES_COLUMNS.items() if k in table.columns})
        if kind == "run" and "grade" in frame.columns and "score" not in frame.columns:
            frame = frame.rename(columns={"grade": "score"})
        # named as this caller's DataFrame may spell them (the readers name only onlineeval's own columns)
        spelled = {"query": "query_id (or query)", "doc": "doc_id (or doc)",
                   "grade": "relevance (or grade)", "score": "score"}
        needed = ("query", "doc", "grade" if kind == "qrels" else "score")
        lacking = [spelled[c] for c in needed if c not in frame.columns]
        if lacking:
            raise InputError(f"{name}: the DataFrame lacks column(s) {', '.join(lacking)}; it needs "
                             f"{', '.join(spelled[c] for c in needed)} (has {', '.join(map(str, table.columns))})"
                             + index_hint(table, [c for c in needed if c not in frame.columns],
                                          {v: k for k, v in IR_MEASURES_COLUMNS.items()}))
        twice = [c for c in needed if int((frame.columns == c).sum()) > 1]
        if twice:  # (pandas' own error: "Per-column arrays must each be 1-dimensional")
            raise InputError(f"{name}: the DataFrame has more than one {spelled[twice[0]]} column (has "
                             f"{', '.join(map(str, table.columns))}); keep one")
        check_unique_columns(table, name)
    elif isinstance(table, Mapping):
        q: list[str] = []
        d: list[str] = []
        v: list[Any] = []
        for qid, docs in table.items():
            if not isinstance(docs, Mapping):
                raise InputError(f"{name}: query {qid!r} maps to {type(docs).__name__}, expected a dict "
                                 f"{{doc_id: {value}}} (pytrec_eval form)")
            for doc, x in docs.items():
                q.append(str(qid))
                d.append(str(doc))
                v.append(x)
        frame = pd.DataFrame({"query": q, "doc": d, "grade" if kind == "qrels" else "score": v})
    else:
        raise InputError(f"{name}: expected a pandas DataFrame (columns query_id, doc_id, {value}), a dict of dicts "
                         f"{{query_id: {{doc_id: {value}}}}} or a file path; got {type(table).__name__}")
    try:
        return qrels_from_frame(frame) if kind == "qrels" else run_from_frame(frame)
    except InputError as exc:
        message = exc.message if name == kind else f"{name}: {exc.message}"
        line = exc.line
        if isinstance(table, Mapping) and line is not None:  # a dict has no rows: name the entry
            message += f" (query {frame['query'].iloc[line - 1]!r}, document {frame['doc'].iloc[line - 1]!r})"
            line = None
        raise InputError(message, exc.path, line) from None


def check_unique_columns(frame: Any, name: str) -> None:
    """Refuse a DataFrame with a column name more than once (``pd.concat(..., axis=1)`` of overlapping frames, or
    ``query`` beside ``query_id``, which the API reads as ``query``), naming it: pandas then hands out a frame for
    the name, and the readers failed with ``KeyError: 0`` or read the pairs of values as tuples."""
    columns = frame.columns
    dup = columns[columns.duplicated()]
    if len(dup):
        raise InputError(f"{name}: the DataFrame has the column {str(dup[0])!r} more than once (has "
                         f"{', '.join(map(str, columns))}); keep one")


def index_hint(table: Any, lacking: list[str], aliases: Mapping[str, str]) -> str:
    """``"; query is the DataFrame's index, not a column (only columns are read): pass df.reset_index()"`` when a
    lacking column (or its ``aliases`` spelling) names a level of ``table``'s index (``df.set_index("query")``),
    else ``""``."""
    names = [n for n in getattr(table.index, "names", []) if n is not None]
    found = [str(n) for n in names if n in lacking or n in {aliases.get(c) for c in lacking}]
    if not found:
        return ""
    are = "is" if len(found) == 1 else "are"
    return (f"; {' and '.join(found)} {are} the DataFrame's index, not a column (only columns are read): pass "
            "df.reset_index()")


def _is_single_table(x: Any) -> bool:
    """A run itself (not a dict of named runs): a frame, a path, or ``{qid: {docid: score}}``."""
    import pandas as pd

    if _is_path(x) or isinstance(x, pd.DataFrame):
        return True
    if isinstance(x, Mapping):
        first = next(iter(x.values()), None)
        return isinstance(first, Mapping) and all(not isinstance(v, Mapping) for v in first.values())
    return False


def _named_runs(runs: Any) -> dict[str, Any]:
    """``{name: run}``: a dict of runs as given; a sequence of files named as the CLI names them
    (stem, else file name, else the shortest distinguishing path tail); one run is ``run``
    (a file: its name as the CLI gives it)."""
    if isinstance(runs, Mapping) and not _is_single_table(runs):
        if not runs:
            raise ConfigError(("runs",), "give at least one run")
        return {str(k): v for k, v in runs.items()}
    items = [runs] if _is_single_table(runs) else list(runs) if isinstance(runs, Iterable) else [runs]
    if not items:
        raise ConfigError(("runs",), "give at least one run")
    if all(_is_path(r) for r in items):
        from onlineeval.io.trec import system_names

        return dict(zip(system_names([Path(r) for r in items]), items))
    if len(items) == 1:
        return {"run": items[0]}
    return {f"run{i + 1}": r for i, r in enumerate(items)}


def check_number(value: Any, key: str) -> float:
    """``value`` as a number (not a bool, not text), else a :class:`~onlineeval.errors.ConfigError` naming ``key``."""
    import numbers

    from onlineeval.errors import ConfigError

    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError((key,), f"must be a number, got {value!r}")
    return value  # type: ignore[return-value]


def names_text(value: Any, key: str, what: str) -> str:
    """Names given as a comma-separated string or a sequence (each item as its text: e.g. ir_measures' measure
    objects), as one comma-separated string; anything else a :class:`~onlineeval.errors.ConfigError` naming ``key``."""
    from collections.abc import Mapping, Sequence

    from onlineeval.errors import ConfigError

    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, (bytes, Mapping)):
        return ",".join(str(v) for v in value)
    raise ConfigError((key,), f"must be {what}: a comma-separated string or a list of names, got "
                      f"{type(value).__name__}")
