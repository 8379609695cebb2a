"""Logged impressions in a Parquet file (``onlineeval estimate --log logs.parquet``), one impression per row.

The columns are the JSON-lines log's keys (:mod:`onlineeval.io.logged`): ``query``, ``shown`` (a list of document
ids), ``clicks`` (clicked ids, or 0/1 or booleans aligned with ``shown``), optional ``user`` and ``user_type``, and
the propensities either as a ``propensities`` struct (fields ``list``, ``prefix``, ``item``) or as the columns
``p_list``, ``p_prefix``, ``p_item`` (the Python API's spelling), or a ``logger`` column holding each row's logger
(as JSON text, or a struct whose null fields are left out, its ``scores`` a struct or a map). Other columns
(timestamps, positions, features) are ignored; a null is a value left out, as a key missing from a JSON line. A
directory of Parquet files (a dataset, as Spark writes one) is read as one table (pyarrow's dataset: files in
sorted order, names starting with ``_`` or ``.`` skipped, ``key=value`` folders' keys as columns, ignored); an
error names the file of the row concerned and the row in it (:mod:`onlineeval.io.parquet_rows`).

A table with written propensities, or with loggers as JSON text or structs, is checked on whole columns by the JSON
log's own column checks (:func:`onlineeval.io.logged_fast.read_frame_fast`; ``read_logger_table_fast`` and
``read_logger_struct_fast``: each query's first logger decoded once, the others compared with it byte for byte, or
value for value with floats bit for bit). Where those decline (loggers of one query written differently, a map of
scores in another order, dictionary-encoded or unsigned 64-bit columns, anything the checks could refuse;
narrower integers and large strings are cast to the JSON reader's types first,
:func:`~onlineeval.io.logged_fast.normalised`) its rows are read one by one as the JSON reader's records
(:func:`onlineeval.io.logged.logged_from_records`, the reference): the same numbers either way (tested), and an
error names the file and the row (1-based)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from os import PathLike
from pathlib import Path
from typing import Any

from onlineeval.errors import InputError
from onlineeval.io.logged import LoggedLog, logged_from_records
from onlineeval.io.logged_json import DuplicateKey, json_value_error, loads_unique
from onlineeval.io.logged_fast import (
    _FRAME_IDS,
    FRAME_FORMS,
    normalised,
    propensity_table,
    read_frame_fast,
    read_logger_struct_fast,
    read_logger_table_fast,
    row_records,
    ROW_KEYS,
)
from onlineeval.io.parquet_rows import read_parquet_table

__all__ = ["is_parquet", "read_parquet_log"]

#: the first (and last) four bytes of every Parquet file
MAGIC = b"PAR1"


def _magic(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == MAGIC
    except OSError:
        return False


def is_parquet(path: str | PathLike[str]) -> bool:
    """Whether ``path`` is a Parquet file (its first four bytes are ``PAR1``) or a directory holding one (a
    dataset, as Spark writes one: ``part-*.parquet`` files, maybe in ``key=value`` folders, beside ``_SUCCESS``)."""
    p = Path(path)
    if p.is_dir():
        return any(_magic(f) for f in p.rglob("*") if f.is_file() and not f.name.startswith(("_", ".")))
    return _magic(p)


def as_rows(message: str) -> str:
    """A reader's message with the other lines it names (``line 4``) named as rows (``row 4``): the readers number
    a table's rows as a file's lines."""
    return re.sub(r"\b(on )?line (\d+)\b", lambda m: f"{'in ' if m.group(1) else ''}row {m.group(2)}", message)


def _logger_table(table: Any) -> tuple[Any, Any] | None:
    """``(table, loggers)`` for :func:`~onlineeval.io.logged_fast.read_logger_table_fast` when every row's logger is
    JSON text, or for :func:`~onlineeval.io.logged_fast.read_logger_struct_fast` when every row's is a struct (no
    propensity columns): the log's columns with ``logger`` all null, and the loggers' column; else ``None``."""
    import pyarrow as pa

    names = set(table.column_names)
    if "propensities" in names or any(c in names for c in FRAME_FORMS):
        return None
    texts = normalised(table.column("logger").combine_chunks())
    if not (pa.types.is_string(texts.type) or pa.types.is_struct(texts.type)) or texts.null_count:
        return None
    arrays = {c: normalised(table.column(c).combine_chunks()) for c in _FRAME_IDS if c in names}
    arrays["logger"] = pa.nulls(table.num_rows)
    return pa.table(arrays), texts


def _table(table: Any) -> Any:
    """The log's columns as :func:`~onlineeval.io.logged_fast.read_frame_fast` reads them
    (:func:`~onlineeval.io.logged_fast.propensity_table`), or ``None`` where the rows are read one by one instead (a
    ``logger`` column with a value, both or neither form of propensities, no rows)."""
    names = table.column_names
    if "logger" in names and table.column("logger").null_count < table.num_rows:
        return None
    return propensity_table(names, lambda c: table.column(c).combine_chunks(), table.num_rows)


def _logger(value: Any, number: int) -> Any:
    """A row's logger as the JSON log's object: JSON text decoded; a struct (a dict) without its null fields, which
    are those other rows' loggers have (pyarrow writes a column of dicts as one struct of every key seen: a
    document scored for another query is a null score here), and its ``scores`` given as a map (key-value pairs)
    as an object."""
    if isinstance(value, str):
        try:
            return loads_unique(value)  # a key twice is refused, as in a JSON-lines log
        except json.JSONDecodeError as exc:
            raise InputError(f"logger is not valid JSON text ({exc.msg}, at character {exc.pos})", None,
                             number) from None
        except DuplicateKey as exc:
            raise InputError(f"logger: {exc.text()}", None, number) from None
        except RecursionError:
            raise InputError("logger is not valid JSON text (nested too deeply)", None, number) from None
        except ValueError as exc:  # e.g. an integer of more than 4300 digits
            raise InputError(f"logger is not valid JSON text ({json_value_error(exc)})", None, number) from None
    if not isinstance(value, dict):
        return value
    out = {k: v for k, v in value.items() if v is not None}
    scores = out.get("scores")
    if isinstance(scores, list) and all(isinstance(p, tuple) and len(p) == 2 for p in scores):
        out["scores"] = dict(scores)
    elif isinstance(scores, dict):
        out["scores"] = {d: v for d, v in scores.items() if v is not None}
    if isinstance(out.get("components"), list):
        out["components"] = [_logger(c, number) for c in out["components"]]
    return out


def _records(table: Any) -> Iterator[dict[str, Any]]:
    """Each row as the JSON reader's record (:func:`~onlineeval.io.logged_fast.row_records`), a ``logger`` given
    as JSON text decoded or as a struct without its null fields (:func:`_logger`)."""
    names = table.column_names
    p_columns = [c for c in FRAME_FORMS if c in names]
    keep = [c for c in (*ROW_KEYS, *p_columns) if c in names]
    return row_records(table.select(keep).to_pylist(), p_columns, logger=_logger)


def read_parquet_log(path: str | PathLike[str], policies: Any = None) -> LoggedLog:
    """The log of a Parquet file (see the module docstring); what :func:`onlineeval.io.logged.read_logged` returns
    for a JSON-lines log of the same impressions. Errors (:class:`~onlineeval.errors.InputError`) name the file and
    the row."""
    import pyarrow as pa

    name = str(path)
    if not Path(name).exists():
        raise InputError("no such file or directory", name)
    table, places = read_parquet_table(name)  # a directory: its files as one dataset (partition keys ignored)
    if not table.num_rows:
        raise InputError("the log is empty (no impressions)", name)
    lacking = [c for c in ("query", "shown", "clicks") if c not in table.column_names]
    if lacking:
        raise InputError(f"the Parquet log lacks the column(s) {', '.join(lacking)}; it needs query, shown, clicks "
                         "and the propensities (a propensities struct or p_list / p_prefix / p_item columns) or a "
                         f"logger column (has {', '.join(table.column_names)})", name)
    fast_table = _table(table)
    logger_table = _logger_table(table) if fast_table is None and "logger" in table.column_names else None
    try:
        if fast_table is not None:
            fast = read_frame_fast(fast_table, name, policies)
            if fast is not None:
                return fast
        if logger_table is not None:  # loggers as JSON text or structs: decoded once per query
            without_loggers, loggers = logger_table
            if pa.types.is_struct(loggers.type):
                fast = read_logger_struct_fast(without_loggers, name, policies, loggers, _logger)
            else:  # (as a JSON-lines log's)
                fast = read_logger_table_fast(without_loggers, name, policies, loggers)
            if fast is not None:
                return fast
        return logged_from_records(_records(table), policies, name)
    except InputError as exc:  # the readers number the rows as lines, across a dataset's files
        raise places.error(exc, as_rows(exc.message)) from None

