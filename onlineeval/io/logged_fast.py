"""The fast reader of logged impressions (:func:`_read_fast`): pyarrow's JSON reader and whole-column checks,
declining to :func:`onlineeval.io.logged.read_logged`'s line-by-line reader wherever that could refuse a line or read
it otherwise. Moved out of :mod:`onlineeval.io.logged`, which calls it for logs of at least ``FAST_MIN_BYTES``.

A log that names its ``logger`` is read the same way with each line's logger object replaced by ``null``
(:mod:`onlineeval.io.logged_scan`) and decoded once per query: 10^5 Plackett-Luce lines of 20 candidates
(``benchmarks/bench_read_logger_log.py``) 1.5-1.7 s in a fresh process against 3.6 s line by line, most of the rest
the logger's own propensities (at 100 candidates and 1,000 queries: 8.0-8.4 s against 10.7 s, of which 4.1 s the
quadrature of the item marginals).

The same column checks (:func:`_from_table`) read a table that is not JSON text: the Python API's DataFrame of
impressions (:func:`frame_table`, :func:`read_frame_fast`) and a Parquet log (:mod:`onlineeval.io.logged_parquet`),
each declining to its own row-by-row reference."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.io.logged import (  # (logged imports this module only when reading)
    _KEYS_PROP,
    LoggedLog,
    _build,
    cluster_codes,
)

#: the top-level keys :func:`_read_fast` reads (a log with other keys is read line by line)
_FAST_KEYS = frozenset(("query", "user", "user_type", "shown", "clicks", "propensities", "logger"))
_BOM = b"\xef\xbb\xbf"


def _first_line_mode(path: str, data: bytes | None) -> str | None:
    """``"logger"`` when the first line is an object naming its ``logger`` (and no ``propensities``; or a line that
    does not parse in its first 1 MB and holds ``"logger"``: the scan's verdict), ``"plain"`` when it is one with
    keys of :data:`_FAST_KEYS` only (or does not parse: pyarrow's verdict), ``None`` (declined
    before pyarrow parses the whole log) when it has other keys or both forms."""
    import json

    if data is None:
        with open(path, "rb") as fh:
            head = fh.readline(1 << 20)
    else:
        head = data[: data.find(b"\n")] if b"\n" in data[: 1 << 20] else data[: 1 << 20]
    try:
        obj = json.loads(head.removeprefix(_BOM))
    except RecursionError:  # nested too deeply: the line-by-line reader says so, naming the line
        return None
    except ValueError:  # malformed, or a first line longer than 1 MB (cut): one naming a logger goes to the scan
        return "logger" if b'"logger"' in head else "plain"
    if not isinstance(obj, dict):
        return "plain"
    if not set(obj) <= _FAST_KEYS or ("logger" in obj and "propensities" in obj):
        return None
    return "logger" if "logger" in obj else "plain"


def _mapped(path: str) -> Any:
    """The file's bytes memory-mapped (not read into memory), empty for an empty file or one that cannot be mapped
    (pyarrow then says what is wrong with it)."""
    try:
        return np.memmap(path, dtype=np.uint8, mode="r")
    except (ValueError, OSError):
        return np.zeros(0, dtype=np.uint8)


def _read_fast(path: str, policies: Any, data: bytes | None = None) -> LoggedLog | None:
    """The log read by pyarrow's JSON reader and checked on whole columns, or ``None`` where it declines: then the
    line-by-line reader (the reference, whose errors name the line) reads it.

    It reads only logs with written ``propensities`` or a ``logger`` on every line and the keys of
    :data:`_FAST_KEYS`, one impression per line
    (no blank lines: the line numbers are the row numbers), and declines wherever the line-by-line reader could
    refuse a line or read it differently: malformed JSON, a key twice in one object, a column whose type changes
    between lines (pyarrow refuses those), a value of another type than the format's, a missing or null required
    value, an empty or repeated ``shown`` document, a click on a document not shown or listed twice, a 0/1 click
    list of another length, a ``user_type`` below 0 or not on every line, propensity forms that differ between
    lines, a propensity list of another length than ``shown`` or with a non-finite value; and for a logger log
    (:func:`_logger_spans`, :func:`_logger_rows`) wherever a line's logger is not one top-level object, its bytes
    differ from those of its query's first line (the line-by-line reader compares values), it does not decode or
    is refused, or a shown document is not among its scores. What it accepts becomes
    the same arrays as the line-by-line reader's, checked and assembled by the same code (:func:`_build`); tested
    equal on every log of ``tests/test_io_logged.py`` and on random logs. 10^6 top-5 impressions (360 MB): read
    in about 6 s (1.5 GB at most) against about 38 s (2.8 GB) line by line. ``data``: the log's bytes, read from
    them instead of the file (a gzipped log, decompressed by :func:`~onlineeval.io.logged.read_logged`)."""
    mode = _first_line_mode(path, data)
    if mode is None or (mode == "logger" and policies is None):
        return None
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    from onlineeval.io.logged_scan import deeper_than

    spans = None
    if mode == "logger":
        spans = _logger_spans(path, data)
        if spans is None:
            return None
        data, buf, starts, ends, nulled = spans  # (the line ends are counted below from these bytes)
        if deeper_than(nulled):  # pyarrow's parser would overflow its stack: the reference names the line
            return None
        source: Any = pa.BufferReader(pa.py_buffer(nulled))
    else:
        if deeper_than(data if data is not None else _mapped(path)):
            return None  # (as above)
        source = path if data is None else pa.BufferReader(data)
    try:
        table = pj.read_json(source)
        table.validate(full=True)  # the strings' UTF-8 (the reader does not check it)
    except (pa.ArrowException, OSError, ValueError):
        return None
    n = table.num_rows
    names = set(table.column_names)
    form = "logger" if mode == "logger" else "propensities"
    if n == 0 or not names <= _FAST_KEYS or not {"query", "shown", "clicks", form} <= names \
            or ({"logger", "propensities"} - {form}) & names:
        return None
    if data is not None:
        newlines, ends_with_newline = data.count(b"\n"), data.endswith(b"\n")
    else:
        with open(path, "rb") as fh:  # one impression per line: as many line ends as rows (the last may lack one)
            newlines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 24), b""))
            fh.seek(-1, 2)
            ends_with_newline = fh.read(1) == b"\n"
    if newlines != (n if ends_with_newline else n - 1):
        return None
    return _from_table(table, path, policies, None if spans is None else TextLoggers(buf, starts, ends))


def _from_table(table: Any, path: str, policies: Any, loggers: LoggerSource | None) -> LoggedLog | None:
    """The log of ``table`` (pyarrow's, one impression per row; rows numbered from 1 as lines) checked on whole
    columns, or ``None`` where the line-by-line reader could refuse a row or read it otherwise (:func:`_read_fast`);
    ``loggers``: a logger log's loggers (the table's ``logger`` column all null), :class:`TextLoggers`,
    :class:`StructLoggers` or :class:`ObjectLoggers`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    names = set(table.column_names)

    def column(key: str) -> Any:
        return table.column(key).combine_chunks()

    def ids(col: Any) -> NDArray[Any] | None:  # query / user ids: non-empty strings or integers, as _id reads them
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            if pc.any(pc.equal(col, "")).as_py():
                return None
            return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)
        if pa.types.is_int64(col.type):
            return np.asarray([None if v is None else str(v) for v in col.to_pylist()], dtype=object)
        return None

    query = column("query")
    if query.null_count:
        return None
    query_ids = ids(query)
    shown = column("shown")
    if shown.null_count or not pa.types.is_list(shown.type) or not pa.types.is_string(shown.type.value_type):
        return None
    offsets = shown.offsets.to_numpy().astype(np.int64)
    lengths = np.diff(offsets)
    values = shown.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if query_ids is None or lengths.min() < 1 or values.null_count or pc.any(pc.equal(values, "")).as_py():
        return None
    encoded = pc.dictionary_encode(values)
    dcodes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    duniq = np.asarray(encoded.dictionary.to_numpy(zero_copy_only=False), dtype=object)
    k = int(lengths.max())
    valid = np.arange(k)[None, :] < lengths[:, None]
    codes = np.full((n, k), -1, dtype=np.int64)
    codes[valid] = dcodes
    ordered = np.sort(np.where(valid, codes, -1 - np.arange(k)[None, :]), axis=1)  # padding never equal
    if (ordered[:, 1:] == ordered[:, :-1]).any():  # a document shown twice in one list
        return None
    clicks = _fast_clicks(column("clicks"), codes, lengths, encoded.dictionary, pa, pc)
    if clicks is None:
        return None
    user, no_user = None, n
    if "user" in names:
        col = column("user")
        if col.null_count < n:
            labels = ids(col)
            if labels is None:
                return None
            user, no_user = cluster_codes(labels), int(col.null_count)
    user_type = None
    if "user_type" in names:
        col = column("user_type")
        if col.null_count == 0 and pa.types.is_int64(col.type):
            user_type = col.to_numpy().astype(np.int64)
            if (user_type < 0).any():
                return None
        elif col.null_count != n:  # on some lines only, or not integers: the line-by-line reader says which
            return None
    lines = np.arange(1, n + 1, dtype=np.int64)
    if loggers is not None:
        if table.column("logger").null_count != n:  # (every line's logger was replaced)
            return None
        logger_rows = _logger_rows(path, policies, loggers, n, query_ids, offsets, lengths, dcodes, duniq)
        if logger_rows is None:
            return None
        return _build(path, policies, lines, query_ids, lengths, dcodes, duniq, clicks, user, no_user, user_type,
                      None, None, None, logger_rows, query_ids)
    props = column("propensities")
    if props.null_count or not pa.types.is_struct(props.type):
        return None
    forms = {props.type.field(i).name for i in range(props.type.num_fields)}
    if not forms or not forms <= _KEYS_PROP:
        return None
    p: dict[str, NDArray[np.float64] | None] = {"list": None, "prefix": None, "item": None}
    for form in forms:
        col = props.field(form)
        if col.null_count:  # on some lines only, or written as null
            return None
        if form == "list":
            if not (pa.types.is_floating(col.type) or pa.types.is_int64(col.type)):
                return None
            p["list"] = col.to_numpy(zero_copy_only=False).astype(np.float64)
            continue
        if not pa.types.is_list(col.type) or not (pa.types.is_floating(col.type.value_type)
                                                  or pa.types.is_int64(col.type.value_type)):
            return None
        off = col.offsets.to_numpy().astype(np.int64)
        if not np.array_equal(np.diff(off), lengths) or col.values.null_count:
            return None
        flat = col.values.slice(int(off[0]), int(off[-1] - off[0])).to_numpy(zero_copy_only=False)
        m = np.full((n, k), 1.0)
        m[valid] = flat.astype(np.float64)
        p[form] = m
    if any(v is not None and not np.isfinite(v).all() for v in p.values()):
        return None
    return _build(path, policies, lines, query_ids, lengths, dcodes, duniq, clicks, user, no_user, user_type,
                  p["list"], p["prefix"], p["item"], [], [])


#: DataFrame columns of the propensity forms (the Python API's spelling) -> the log's keys
FRAME_FORMS = {"p_list": "list", "p_prefix": "prefix", "p_item": "item"}
_FRAME_IDS = ("query", "user", "user_type", "shown", "clicks")


#: the keys of a logged impression a table's row gives (its other columns are ignored)
ROW_KEYS = (*_FRAME_IDS, "propensities", "logger")


def row_records(rows: Any, p_columns: Any, plain: Any = None, logger: Any = None) -> Any:
    """Each row (a mapping of column to value) as the JSON reader's record, the reference reading of a table's
    rows: the keys of :data:`ROW_KEYS`, a null (``None``, NaN) left out as a key missing from a line, the
    ``p_columns`` (of :data:`FRAME_FORMS`) as one ``propensities`` object with their values as they are (a null
    there is a missing form, which the reader names); ``plain(value)`` converts every value taken (numpy to
    Python), ``logger(value, row)`` a logger (the row numbered from 1)."""
    for number, row in enumerate(rows, start=1):
        obj: dict[str, Any] = {}
        for key in ROW_KEYS:
            value = row.get(key)
            if value is None or (isinstance(value, float) and value != value):  # (NaN)
                continue
            value = plain(value) if plain is not None else value
            obj[key] = logger(value, number) if logger is not None and key == "logger" else value
        if p_columns:
            obj["propensities"] = {FRAME_FORMS[c]: plain(row[c]) if plain is not None else row[c] for c in p_columns}
        yield obj


def propensity_table(names: Any, column: Any, rows: int) -> Any:
    """The pyarrow table :func:`read_frame_fast` reads, from a table-like source's column ``names`` and ``column``
    (a name -> pyarrow array): the columns ``query``, ``user``, ``user_type``, ``shown``, ``clicks`` (those present,
    :func:`normalised`) and ``propensities``, a struct of the ``p_list`` / ``p_prefix`` / ``p_item`` columns or the
    source's own ``propensities`` column; ``None`` where the source has another form (both forms of propensities or
    neither, no rows) or a column does not convert. A DataFrame (:func:`frame_table`) and a Parquet table
    (:mod:`onlineeval.io.logged_parquet`) are made by it."""
    import pyarrow as pa

    names = set(names)
    p_columns = [c for c in FRAME_FORMS if c in names]
    if bool(p_columns) == ("propensities" in names) or not rows:
        return None
    try:
        arrays = {c: normalised(column(c)) for c in _FRAME_IDS if c in names}
        if p_columns:
            parts = [normalised(column(c)) for c in p_columns]
            arrays["propensities"] = pa.StructArray.from_arrays(parts, names=[FRAME_FORMS[c] for c in p_columns])
        else:
            arrays["propensities"] = normalised(column("propensities"))
        table = pa.table(arrays)
        table.validate(full=True)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    return table


def frame_table(frame: Any) -> Any:
    """The pyarrow table of a DataFrame of impressions with written propensities, as the JSON reader would give
    it for the same impressions written as a log (:func:`propensity_table`); a missing value (``None``, NaN) is
    null, as a key left out of a line. ``None`` where the frame has another form (a ``logger`` column with a value,
    both ``propensities`` and ``p_*`` columns, no propensities) or pyarrow cannot convert a column: then the records
    read from its rows are the reference (:func:`onlineeval.io.logged.logged_from_records`)."""
    if "logger" in frame.columns and frame["logger"].notna().any():
        return None
    return propensity_table(frame.columns, lambda c: _frame_array(frame, c), len(frame))


def _frame_array(frame: Any, c: str) -> Any:
    """The DataFrame's column ``c`` as a pyarrow array (a missing value null)."""
    import pyarrow as pa

    try:
        return pa.array(frame[c], from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError):  # e.g. numpy cells of two types (an empty float array
        return pa.array(frame[c].map(_listed), from_pandas=True)  # beside string ones): as lists, as records


def logger_frame_table(frame: Any) -> Any:
    """The pyarrow table of a DataFrame of impressions whose ``logger`` column holds each row's logger (no
    propensity columns): its columns as :func:`frame_table` converts them, ``logger`` all null (the loggers are read
    from the frame's objects, :class:`ObjectLoggers`); ``None`` where it has another form or a column does not
    convert."""
    import pyarrow as pa

    names = set(frame.columns)
    if "logger" not in names or "propensities" in names or any(c in names for c in FRAME_FORMS) or not len(frame):
        return None
    try:
        arrays = {c: normalised(_frame_array(frame, c)) for c in _FRAME_IDS if c in names}
        arrays["logger"] = pa.nulls(len(frame))
        table = pa.table(arrays)
        table.validate(full=True)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    return table


def normalised(array: Any) -> Any:
    """``array`` with the types the JSON reader gives (what :func:`_from_table` reads): narrower integers as int64,
    large strings and lists as strings and lists, also inside lists and structs (the same values: a Parquet file
    from Spark writes int32 flags and user types, pandas large strings); left as it is where a cast fails (then
    the column checks decline)."""
    import pyarrow as pa

    def target(t: Any) -> Any:
        if pa.types.is_integer(t):
            return pa.int64()
        if pa.types.is_large_string(t):
            return pa.string()
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return pa.list_(target(t.value_type))
        if pa.types.is_struct(t):
            return pa.struct([pa.field(t.field(i).name, target(t.field(i).type)) for i in range(t.num_fields)])
        return t

    want = target(array.type)
    if want == array.type:
        return array
    try:
        return array.cast(want)
    except (pa.ArrowException, ValueError):
        return array


def _listed(value: Any) -> Any:
    """A numpy array cell as a list of Python values (as the Python API's records carry it)."""
    return value.tolist() if isinstance(value, np.ndarray) else value


def read_frame_fast(table: Any, name: str, policies: Any) -> LoggedLog | None:
    """The log of :func:`frame_table`'s ``table`` checked on whole columns (rows numbered from 1, as
    :func:`onlineeval.io.logged.logged_from_records` numbers them), or ``None`` (declined) where the records read
    from its rows could be refused or read otherwise (:func:`_from_table`); ``name`` labels it in errors."""
    names = set(table.column_names)
    if not {"query", "shown", "clicks", "propensities"} <= names or not names <= _FAST_KEYS:
        return None
    return _from_table(table, name, policies, None)


def read_logger_table_fast(table: Any, name: str, policies: Any, texts: Any) -> LoggedLog | None:
    """The log of a table whose loggers are JSON text (``texts``: a pyarrow string array, one per row; the table's
    ``logger`` column all null) checked on whole columns as a JSON-lines logger log is (each query's first row's
    logger decoded once, every other row's compared with it byte for byte: :func:`_logger_rows`), or ``None``
    (declined) where the records read from its rows could be refused or read otherwise."""
    import pyarrow as pa

    names = set(table.column_names)
    if policies is None or not {"query", "shown", "clicks", "logger"} <= names or "propensities" in names \
            or not names <= _FAST_KEYS or not pa.types.is_string(texts.type) or texts.null_count:
        return None
    offsets_buf, data_buf = texts.buffers()[1], texts.buffers()[2]
    if data_buf is None or len(texts) != table.num_rows:
        return None
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[texts.offset: texts.offset + len(texts) + 1].astype(np.int64)
    buf = np.frombuffer(data_buf, dtype=np.uint8)
    return _from_table(table, name, policies, TextLoggers(buf, offsets[:-1].copy(), offsets[1:].copy()))


def read_logger_objects_fast(table: Any, name: str, policies: Any, objects: list[Any], plain: Any) -> LoggedLog | None:
    """The log of a DataFrame's table (:func:`logger_frame_table`) whose loggers are the Python ``objects`` (one per
    row), checked on whole columns as :func:`read_logger_table_fast` checks JSON text: each query's first row's
    logger made the reader's object by ``plain`` once, every other row's compared with it (:class:`ObjectLoggers`),
    or ``None`` (declined) where the records read from its rows could be refused or read otherwise."""
    names = set(table.column_names)
    if policies is None or not {"query", "shown", "clicks", "logger"} <= names or "propensities" in names \
            or not names <= _FAST_KEYS or len(objects) != table.num_rows:
        return None
    return _from_table(table, name, policies, ObjectLoggers(objects, plain))


def read_logger_struct_fast(table: Any, name: str, policies: Any, column: Any, decode: Any) -> LoggedLog | None:
    """The log of a table whose loggers are Arrow structs (``column``: one per row, no nulls; the table's ``logger``
    column all null) checked on whole columns as :func:`read_logger_table_fast` checks JSON text: each query's first
    row's logger made the reader's object by ``decode(value, row)`` (its ``as_py()``; the row from 1) once, every
    other row's compared with it value for value (:func:`same_rows`), or ``None`` (declined) where the records read
    from its rows could be refused or read otherwise."""
    import pyarrow as pa

    names = set(table.column_names)
    if policies is None or not {"query", "shown", "clicks", "logger"} <= names or "propensities" in names \
            or not names <= _FAST_KEYS or not pa.types.is_struct(column.type) or column.null_count \
            or len(column) != table.num_rows:
        return None
    return _from_table(table, name, policies, StructLoggers(column, decode))


def _logger_spans(path: str, data: bytes | None) -> tuple[bytes, Any, Any, Any, Any] | None:
    """``(raw, buf, starts, ends, nulled)`` of a logger log: its bytes (and as a uint8 array), each line's logger
    value span (:func:`~onlineeval.io.logged_scan.logger_spans`) and the bytes with the spans replaced by ``null``,
    or ``None`` (declined) unless every line has exactly one top-level logger object of at least four bytes (the
    last line may be empty)."""
    from pathlib import Path

    from onlineeval.io.logged_scan import logger_spans, null_loggers

    raw = Path(path).read_bytes() if data is None else data
    buf = np.frombuffer(raw, dtype=np.uint8)
    starts, ends, counts = logger_spans(raw)
    rows = counts.size - 1 if raw.endswith(b"\n") else counts.size  # an empty last line after the last line end
    if rows < 1 or (rows < counts.size and counts[rows] != 0):
        return None
    starts, ends = starts[:rows], ends[:rows]
    if (counts[:rows] != 1).any() or (ends - starts < 4).any():
        return None
    return raw, buf, starts, ends, null_loggers(buf, starts, ends)


class TextLoggers:
    """Loggers as JSON text: row ``i``'s the bytes ``buf[starts[i]:ends[i]]``, compared byte for byte (the line-by-line
    reader compares values: other bytes of the same value decline) and decoded by the JSON reader's decoder."""

    def __init__(self, buf: Any, starts: Any, ends: Any) -> None:
        self.buf, self.starts, self.ends = buf, starts, ends

    def same_as(self, n: int, ref: NDArray[np.int64]) -> bool:
        """Whether each of the ``n`` rows' logger equals row ``ref[i]``'s."""
        from onlineeval.io.logged_scan import first_differing

        return self.starts.size >= n and first_differing(self.buf, self.starts[:n], self.ends[:n], ref) < 0

    def decode(self, row: int) -> Any:
        from onlineeval.io.logged_json import DECODER

        return DECODER.decode(self.buf[self.starts[row]: self.ends[row]].tobytes().decode("utf-8"))


class StructLoggers:
    """Loggers as an Arrow struct column (a Parquet log's): compared value for value, nulls as values and floats
    bit for bit (:func:`same_rows`; a map's entries in their order: the same scores in another order decline), each
    row's made the reader's object by ``decode(value.as_py(), row + 1)`` (the Parquet reader's own conversion)."""

    def __init__(self, column: Any, decode: Any) -> None:
        self.column, self._decode = column, decode

    def same_as(self, n: int, ref: NDArray[np.int64]) -> bool:
        import pyarrow as pa

        try:
            same = same_rows(self.column, np.arange(n, dtype=np.int64), ref)
        except (pa.ArrowException, TypeError, ValueError, NotImplementedError):  # (a type pyarrow cannot fill or cast)
            return False
        return same is not None and bool(same.all())

    def decode(self, row: int) -> Any:
        return self._decode(self.column[row].as_py(), row + 1)


class ObjectLoggers:
    """Loggers as Python objects (a DataFrame's ``logger`` column): a row's equals its reference row's where it is
    the same object or a dict ``==`` to it (the line-by-line reader's own comparison; anything else, such as numpy
    arrays inside, whose ``==`` has no single truth value, declines), made the reader's object by ``plain`` (numpy
    values as Python's, as the records of the rows are made)."""

    def __init__(self, objects: list[Any], plain: Any) -> None:
        self.objects, self._plain = objects, plain

    def same_as(self, n: int, ref: NDArray[np.int64]) -> bool:
        objects = self.objects
        if len(objects) != n:
            return False
        try:
            for a, r in zip(objects, ref.tolist()):
                b = objects[r]
                if a is not b and not (type(a) is dict and type(b) is dict and (a == b) is True):
                    return False
        except (TypeError, ValueError):  # (an ambiguous truth value)
            return False
        return True

    def decode(self, row: int) -> Any:
        return self._plain(self.objects[row])


LoggerSource = TextLoggers | StructLoggers | ObjectLoggers


def same_rows(arr: Any, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.bool_] | None:
    """Whether row ``a[i]`` of the Arrow array ``arr`` holds the same value as row ``b[i]``: the same nulls, strings,
    integers and booleans equal, floats bit for bit (stricter than the line-by-line reader's ``==``, to which the
    caller declines: ``-0.0`` is not ``0.0`` here, and NaN is NaN), structs field by field, lists and maps of the
    same length element by element in order; ``None`` for a type it does not compare (dictionaries, timestamps,
    ...: the caller declines)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    same = valid[a] == valid[b]
    both = valid[a] & valid[b]
    if pa.types.is_null(t):
        return same
    if pa.types.is_struct(t):
        for child in arr.flatten():  # (the struct's nulls merged into each field)
            part = same_rows(child, a, b)
            if part is None:
                return None
            same &= part
        return same
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        off = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)  # (into the whole values: not sliced)
        length = np.where(valid, np.diff(off), 0)
        same &= length[a] == length[b]
        pick = np.flatnonzero(same & both & (length[a] > 0))
        if pick.size:
            la = length[a[pick]]
            first = np.cumsum(la) - la
            within = np.arange(int(la.sum()), dtype=np.int64) - np.repeat(first, la)
            elements = same_rows(arr.values, np.repeat(off[a[pick]], la) + within,
                                 np.repeat(off[b[pick]], la) + within)
            if elements is None:
                return None
            same[pick] &= np.logical_and.reduceat(elements, first)
        return same
    if pa.types.is_floating(t):
        values = np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64).view(np.int64)
    elif pa.types.is_integer(t) or pa.types.is_boolean(t):
        values = np.asarray(arr.fill_null(False if pa.types.is_boolean(t) else 0).to_numpy(zero_copy_only=False))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        values = pc.dictionary_encode(arr).indices.fill_null(-1).to_numpy(zero_copy_only=False)
    else:
        return None
    return same & ((values[a] == values[b]) | ~both)


def _logger_rows(path: str, policies: Any, loggers: LoggerSource, n: int, query_ids: Any, offsets: Any,
                 lengths: Any, dcodes: Any, duniq: Any) -> list[Any] | None:
    """Each row's ``(options, scores)`` as the line-by-line reader makes them (one object per query, from its first
    line's logger, decoded by ``loggers.decode`` and checked by the same
    :func:`~onlineeval.io.logged_policy._logger_spec`),
    or ``None`` (declined) where a line's logger differs from its query's first line's (``loggers.same_as``: the
    line-by-line reader compares their values, and refuses different ones naming both lines), a logger does not
    decode or is refused, or a shown document is not among its query's scored candidates."""
    import pandas as pd

    from onlineeval.errors import InputError
    from onlineeval.io.logged_policy import _logger_spec

    qcodes, _ = pd.factorize(query_ids)
    qcodes = qcodes.astype(np.int64)
    _, first_row = np.unique(qcodes, return_index=True)  # (codes 0..Q-1 in order of first line)
    if not loggers.same_as(n, first_row[qcodes].astype(np.int64)):
        return None
    allowed = tuple(policies.available_policies())
    base = int(offsets[0])
    specs = []
    for row in first_row.tolist():
        shown = [str(d) for d in duniq[dcodes[int(offsets[row]) - base: int(offsets[row + 1]) - base]]]
        try:
            specs.append(_logger_spec(loggers.decode(row), shown, path, row + 1, allowed))
        except (ValueError, RecursionError, InputError):
            return None
    width = max(len(duniq), 1)
    for pair in np.unique(np.repeat(qcodes, lengths) * width + np.asarray(dcodes, dtype=np.int64)).tolist():
        if duniq[pair % width] not in specs[pair // width][1]:  # a loop over distinct (query, document) pairs
            return None
    return [specs[q] for q in qcodes.tolist()]


def _fast_clicks(col: Any, codes: NDArray[np.int64], lengths: NDArray[np.int64], dictionary: Any, pa: Any,
                 pc: Any) -> NDArray[np.bool_] | None:
    """:func:`_read_fast`'s ``(n, k)`` clicks from the ``clicks`` column (clicked ids, or 0/1 lists of the shown
    list's length or empty), or ``None`` where the line-by-line reader could refuse a line."""
    n, k = codes.shape
    if col.null_count or not pa.types.is_list(col.type):
        return None
    off = col.offsets.to_numpy().astype(np.int64)
    counts = np.diff(off)
    values = col.values.slice(int(off[0]), int(off[-1] - off[0]))
    if values.null_count:
        return None
    kind = col.type.value_type
    out = np.zeros((n, k), dtype=bool)
    if pa.types.is_null(kind):
        return out if not counts.any() else None
    if pa.types.is_int64(kind) or pa.types.is_boolean(kind):
        flags = values.to_numpy(zero_copy_only=False).astype(np.int64)
        if ((flags != 0) & (flags != 1)).any() or ((counts != 0) & (counts != lengths)).any():
            return None
        full = counts == lengths  # the others are empty lists: no clicks
        slot_flags = np.zeros(int(lengths.sum()), dtype=bool)
        slot_flags[np.repeat(full, lengths)] = flags == 1  # the values run row by row, slot by slot
        out[np.arange(k)[None, :] < lengths[:, None]] = slot_flags
        return out
    if not pa.types.is_string(kind):
        return None
    doc = pc.index_in(values, value_set=dictionary).to_numpy(zero_copy_only=False)
    if doc.dtype == object or np.isnan(doc.astype(np.float64)).any():  # a click on a document never shown
        return None
    doc = doc.astype(np.int64)
    row = np.repeat(np.arange(n), counts)
    match = codes[row] == doc[:, None]
    hit = match.any(axis=1)
    if not hit.all():  # a click on a document not shown in its own list
        return None
    slot = match.argmax(axis=1)
    taken = np.zeros((n, k), dtype=np.int64)
    np.add.at(taken, (row, slot), 1)
    if (taken > 1).any():  # a click listed twice
        return None
    return taken == 1
