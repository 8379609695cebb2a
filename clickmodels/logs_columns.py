"""A click log's sessions read on whole columns (a Parquet table, :mod:`clickmodels.logs_parquet`; a ``jsonl`` or
``tsv`` log parsed by pyarrow, :func:`jsonl_sessions`, :func:`tsv_sessions`): the
:class:`~clickmodels.logs.ClickLog` the row-by-row reader builds (each row checked by
:func:`clickmodels.logs_files._json_session`, then :func:`clickmodels.logs.from_sessions`), to the bit, computed with
pyarrow and NumPy; ``None`` (declined) wherever the row-by-row reader could refuse a row or the columns are not of the
types handled here, so that the reference reads it and names the row of its error.

Handled: ``query`` and ``session`` (optional) as strings or integers; ``docs`` a list of strings or integers; ``clicks``
(optional) a list of clicked ids (of the documents' type) or of booleans, one per shown document; nulls as the keys
left out (a null ``session``: the row number, as the reference). Ids are compared as the strings the reference makes
of them (``str`` of an integer), vocabularies in order of first appearance (row by row, rank by rank)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["jsonl_sessions", "sessions_from_columns", "tsv_sessions"]

#: the keys of the ``jsonl`` format (another key is an error of the reference)
KEYS = frozenset({"session", "query", "docs", "clicks"})


def _ids(array: Any, pa: Any) -> bool:
    """Whether ``array``'s type is one the reference takes as ids (strings or integers, not booleans)."""
    return pa.types.is_string(array.type) or pa.types.is_integer(array.type)


def _strings(array: Any) -> np.ndarray:
    """The values of an Arrow array of strings or integers as a NumPy ``str`` array (``str`` of each integer)."""
    return np.asarray(array.to_numpy(zero_copy_only=False)).astype(str)


def _codes(array: Any, pc: Any) -> tuple[np.ndarray, Any]:
    """``(codes, dictionary)``: ``array`` dictionary-encoded, codes in order of first appearance."""
    encoded = pc.dictionary_encode(array)
    return np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64), encoded.dictionary


def sessions_from_columns(table: Any, source: str) -> Any:
    """The :class:`~clickmodels.logs.ClickLog` of ``table``'s rows (columns ``query``, ``docs``, optional
    ``session`` and ``clicks``; others ignored), as the row-by-row reader builds it, or ``None`` (declined: the
    reference then reads the rows and names the row of any error)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from clickmodels.logs import ClickLog
    from onlineeval.io.logged_fast import normalised

    n = table.num_rows
    names = table.column_names
    if not n or "query" not in names or "docs" not in names:
        return None
    column = {c: normalised(table.column(c).combine_chunks()) for c in ("session", "query", "docs", "clicks")
              if c in names}
    query, docs = column["query"], column["docs"]
    if query.null_count or docs.null_count or not _ids(query, pa) or not pa.types.is_list(docs.type):
        return None
    flat_docs = docs.flatten()
    lengths = np.asarray(pc.list_value_length(docs).to_numpy(zero_copy_only=False), dtype=np.int64)
    if flat_docs.null_count or not _ids(flat_docs, pa) or not lengths.size or lengths.min() < 1:
        return None
    if pa.types.is_string(flat_docs.type) and pc.any(pc.equal(flat_docs, "")).as_py():
        return None  # an empty document id: the reference names the row
    k = int(lengths.max())
    doc_codes, doc_dict = _codes(flat_docs, pc)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    ranks = np.arange(doc_codes.size, dtype=np.int64) - np.repeat(starts, lengths)
    grid = np.full((n, k), -1, dtype=np.int64)
    grid[rows, ranks] = doc_codes
    ordered = np.sort(grid, axis=1)
    if ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any():
        return None  # a document shown twice in a row
    order = np.zeros((n, k), dtype=np.int16)
    clicks = column.get("clicks")
    if clicks is not None and clicks.null_count < n:
        if not pa.types.is_list(clicks.type):
            return None
        flat_clicks = clicks.flatten()  # (a null list: no element)
        if flat_clicks.null_count:
            return None
        if not len(flat_clicks):  # no click at all (pyarrow reads `[]` in every line as a list of nulls)
            flat_clicks = flat_docs.slice(0, 0)
        counts = np.asarray(pc.fill_null(pc.list_value_length(clicks), 0).to_numpy(zero_copy_only=False),
                            dtype=np.int64)
        if pa.types.is_boolean(flat_clicks.type):  # one flag per shown document (an empty list: no click)
            if ((counts != 0) & (counts != lengths)).any():
                return None
            flags = np.asarray(flat_clicks.to_numpy(zero_copy_only=False), dtype=bool)
            flagged = np.zeros((n, k), dtype=bool)
            has = np.repeat(counts > 0, lengths)
            flagged[rows[has], ranks[has]] = flags
            order = (np.cumsum(flagged, axis=1) * flagged).astype(np.int16)
        elif flat_clicks.type == flat_docs.type:  # clicked ids, in click order
            found = np.asarray(pc.fill_null(pc.index_in(flat_clicks, value_set=doc_dict), -1)
                               .to_numpy(zero_copy_only=False), dtype=np.int64)
            click_rows = np.repeat(np.arange(n, dtype=np.int64), counts)
            at = grid[click_rows] == found[:, None]
            slot = np.argmax(at, axis=1)
            if found.size and (found < 0).any() or not at[np.arange(found.size), slot].all():
                return None  # a click on a document not shown: the reference's error (with its flags hint)
            pair = click_rows * k + slot
            _, first = np.unique(pair, return_index=True)
            first.sort()  # each (row, slot)'s first click, in click order (rows ascending)
            first_rows, first_slots = click_rows[first], slot[first]
            group_start = np.searchsorted(first_rows, first_rows, side="left")
            order[first_rows, first_slots] = (np.arange(first.size) - group_start + 1).astype(np.int16)
        else:
            return None
    query_codes, query_dict = _codes(query, pc)
    session = column.get("session")
    sids = np.arange(1, n + 1).astype(str).astype(object)  # a session without an id: its row number (the reference)
    if session is not None and not pa.types.is_null(session.type):
        if not _ids(session, pa):
            return None
        sids[session.is_valid().to_numpy(zero_copy_only=False)] = _strings(session.drop_null())
    return ClickLog(
        session_ids=sids.astype(str),  # (the longest id's width, as the reference's np.asarray of its strings)
        query=query_codes,
        docs=grid,
        clicks=order > 0,
        click_order=order,
        query_vocab=_strings(query_dict),
        doc_vocab=_strings(doc_dict),
        source=source,
        n_dropped_clicks=0,
    )


def jsonl_sessions(path: Any) -> Any:
    """The :class:`~clickmodels.logs.ClickLog` of a ``jsonl`` click log parsed by pyarrow and read on whole columns
    (:func:`sessions_from_columns`), as the line-by-line reader (:func:`clickmodels.logs_files.read_jsonl`) builds it;
    ``None`` (declined: that reader then reads it and names the line of any error) where pyarrow cannot parse it (a
    line that is not one JSON object, a key twice, an id that is neither a string nor an integer everywhere,
    invalid UTF-8, ...), the text holds ``null`` anywhere (a JSON null is refused by the reference where a key left
    out is not, and pyarrow reads both as null), a line is blank (the reference numbers lines, and a session without
    an id is named by its line), values nest deeper than :data:`onlineeval.io.logged_scan.MAX_DEPTH` (pyarrow's
    parser would overflow
    its stack), a key is not one of the format's, or :func:`sessions_from_columns` declines."""
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    from onlineeval.io.logged_scan import deeper_than

    if deeper_than(data):  # pyarrow's parser would overflow its stack (the reference: "nested too deeply")
        return None
    if b"null" in data:  # a JSON null is an error of the reference, a key left out is not: pyarrow reads both as null
        return None
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    try:
        table = pj.read_json(pa.BufferReader(data))
        table.validate(full=True)  # (UTF-8 of every string)
    except (pa.ArrowException, ValueError, UnicodeDecodeError):
        return None
    if table.num_rows != lines or not set(table.column_names) <= KEYS:
        return None
    return sessions_from_columns(table, str(path))


#: the ``tsv`` format's four fields
TSV_FIELDS = ("session", "query", "docs", "clicks")


def _stripped(array: Any, pa: Any, pc: Any) -> Any:
    """An Arrow string array with every value stripped as Python strips it (``str.strip``: Unicode whitespace), the
    distinct values stripped once each."""
    encoded = pc.dictionary_encode(array)
    uniques = [value.strip() for value in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(uniques, type=pa.string()), encoded.indices)


def tsv_sessions(path: Any) -> Any:
    """The :class:`~clickmodels.logs.ClickLog` of a ``tsv`` click log parsed by pyarrow's CSV reader (tab-separated,
    no quoting, every field a string) and read on whole columns (:func:`sessions_from_columns`), as the line-by-line
    reader (:func:`clickmodels.logs_files.read_tsv`) builds it: ids stripped as it strips them (``str.strip`` of each
    distinct value), the shown and clicked lists split on commas, a clicks field that is empty or blank no click.
    ``None`` (declined: that reader then reads it and names the line of any error) where a line does not have four
    fields, is blank or a comment (skipped by the reference: the line numbers would differ) or has an empty session or
    query id, the text holds a carriage return other than a line end's ``\\r\\n`` or is not UTF-8, a click list
    holds an empty id, or :func:`sessions_from_columns` declines."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pv

    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    data = data.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark (the reference drops it from the first line)
    if b"\r" in data:  # CRLF line ends are stripped by the reference; a carriage return elsewhere is kept
        data = data.replace(b"\r\n", b"\n")
        if b"\r" in data:
            return None
    if not data:
        return None
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    try:
        table = pv.read_csv(
            pa.BufferReader(data),
            read_options=pv.ReadOptions(column_names=list(TSV_FIELDS)),
            parse_options=pv.ParseOptions(delimiter="\t", quote_char=False, escape_char=False, double_quote=False,
                                          newlines_in_values=False, ignore_empty_lines=False),
            convert_options=pv.ConvertOptions(column_types={c: pa.string() for c in TSV_FIELDS},
                                              strings_can_be_null=False, quoted_strings_can_be_null=False,
                                              check_utf8=True))
        table.validate(full=True)
    except (pa.ArrowException, ValueError):  # a line of another number of fields, invalid UTF-8
        return None
    if table.num_rows != lines:
        return None
    try:
        return _tsv_columns(table, str(path), pa, pc)
    except (pa.ArrowException, OverflowError):  # e.g. more than 2**31 bytes of one column (32-bit offsets)
        return None


def _tsv_columns(table: Any, source: str, pa: Any, pc: Any) -> Any:
    """:func:`tsv_sessions`' ClickLog of the CSV reader's table of strings (or ``None``: declined)."""
    session = _stripped(table.column("session").combine_chunks(), pa, pc)
    query = _stripped(table.column("query").combine_chunks(), pa, pc)
    if pc.any(pc.equal(session, "")).as_py() or pc.any(pc.equal(query, "")).as_py() \
            or pc.any(pc.starts_with(session, "#")).as_py():
        return None  # an empty id (or a blank line), a comment: the reference skips or refuses the line
    lists = {}
    for field in ("docs", "clicks"):
        pieces = pc.split_pattern(table.column(field).combine_chunks(), ",")
        flat = _stripped(pieces.flatten(), pa, pc)
        offsets = np.asarray(pieces.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        if field == "clicks":  # an empty (or blank) field: no click; an empty id in a list: refused by the reference
            empty = np.asarray(pc.equal(flat, "").to_numpy(zero_copy_only=False), dtype=bool)
            lengths = np.diff(offsets)
            none = (lengths == 1) & empty[np.minimum(offsets[:-1], max(len(flat) - 1, 0))] if len(flat) else \
                np.zeros(lengths.size, dtype=bool)
            if empty.sum() != none.sum():
                return None
            flat = flat.filter(pa.array(~empty))
            offsets = np.concatenate([[0], np.cumsum(np.where(none, 0, lengths))])
        lists[field] = pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), flat)
    return sessions_from_columns(pa.table({"session": session, "query": query, **lists}), source)
