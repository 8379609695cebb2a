"""Click logs in Parquet (the ``parquet`` format of :mod:`clickmodels.logs_files`): one row per session, the ``jsonl``
format's keys as columns, read on whole columns (:mod:`clickmodels.logs_columns`) or, where that declines, each row
checked as that format's line is (:func:`clickmodels.logs_files._json_session`: the reference, whose errors name the
row)."""

from __future__ import annotations

from pathlib import Path

from clickmodels.logs import ClickLog, from_sessions
from clickmodels.logs_files import _json_session
from onlineeval.errors import InputError
from onlineeval.io.parquet_rows import read_parquet_table

__all__ = ["read_parquet_sessions"]


def read_parquet_sessions(path: str | Path) -> ClickLog:
    """Read a Parquet file (or a directory of them) of sessions: one row per session, the ``jsonl`` format's keys
    as columns (``query``, ``docs``, optional ``session`` and ``clicks``: ids or one boolean per shown document);
    other columns are ignored, a null is a key left out. Errors name the file and the row (in a directory: the
    file holding the row, and the row in it)."""
    src = str(path)
    table, places = read_parquet_table(src)
    keys = [c for c in ("session", "query", "docs", "clicks") if c in table.column_names]
    if "query" not in keys or "docs" not in keys:
        raise InputError(f"the Parquet click log needs the columns query and docs (optional: session, clicks); has "
                         f"{', '.join(table.column_names)}", src)
    from clickmodels.logs_columns import sessions_from_columns

    fast = sessions_from_columns(table, src)  # on whole columns; None: the rows one by one (the reference)
    if fast is not None:
        return fast
    sessions: list[tuple[str, str, list[str], list[str]]] = []
    try:
        for row, values in enumerate(table.select(keys).to_pylist(), start=1):
            sessions.append(_json_session({k: v for k, v in values.items() if v is not None}, src, row))
        return from_sessions(sessions, source=src, lines=list(range(1, len(sessions) + 1)),
                             flags_hint=" (for one flag per shown document give booleans)")
    except InputError as exc:  # rows, not lines, in the file of a dataset holding the row
        if exc.line is None:
            raise
        raise places.error(exc, exc.message) from None
