"""Click-log files: the readers and writers of :class:`clickmodels.logs.ClickLog` (three text formats and Parquet),
and :func:`read_click_log`, which picks the reader. Every name here is importable from :mod:`clickmodels.logs` too.

File formats
------------
``tsv`` (one session per line, tab-separated, UTF-8)::

    # session<TAB>query<TAB>shown documents<TAB>clicked documents in click order
    s1<TAB>q7<TAB>d3,d9,d1<TAB>d9,d3
    s2<TAB>q7<TAB>d3,d9,d1<TAB>

  * Lines starting with ``#`` and blank lines are skipped.
  * Shown documents: comma-separated ids in display order (rank 1 first), no duplicates.
  * Clicks: comma-separated ids of clicked documents in time order (may repeat a document);
    the field may be empty (no click) but not absent: a line with three fields is refused,
    so a truncated line is never read as a session without clicks. Every clicked id must be
    on the page. A byte-order mark at the start of the file is ignored (in every format).

``jsonl`` (one JSON object per line)::

    {"session": "s1", "query": "q7", "docs": ["d3", "d9", "d1"], "clicks": ["d9", "d3"]}

  Same rules; ``session`` is optional (the line number is used), ids may be strings or
  integers (stored as strings), ``clicks`` may be omitted. ``clicks`` may instead be one
  ``true``/``false`` per shown document (``"clicks": [false, true, false]``; click order
  top to bottom); integers in ``clicks`` are always ids, so ``[0, 1, 0]`` means documents
  ``0`` and ``1`` were clicked, and is refused when those ids are not on the page.

``yandex`` (the Yandex WSCD sample shipped with PyClick; see the README in
``shared/data/clicklogs/yandex_wscd_pyclick_sample``): sessions separated by ``;`` or new
lines, each ``<query>\\t<doc1>,...,<docK> : <click>, <click>, ...``, whitespace around
separators irregular. As documented for that data, clicks on documents not on the page
are ignored (their number is kept in :attr:`ClickLog.n_dropped_clicks`); session ids are
``<line>:<index>``.

``parquet`` (a Parquet file, or a directory of them as Spark writes one; told by its magic bytes): one row per
session with the ``jsonl`` format's keys as columns (``query``, ``docs`` a list of ids, optional ``session`` and
``clicks``: ids, or one boolean per shown document); other columns are ignored and a null is a key left out;
errors name the row.

Clicks are reduced as :class:`~clickmodels.logs.ClickLog` keeps them: the per-slot indicator (a document clicked
twice counts once) and the 1-based rank of the slot's first click (repeated clicks are dropped).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np

from clickmodels.logs import ClickLog, from_sessions
from onlineeval.errors import InputError

__all__ = [
    "LogFormat",
    "read_click_log",
    "read_tsv",
    "read_jsonl",
    "read_parquet",
    "read_yandex",
    "write_tsv",
    "write_jsonl",
]

LogFormat = Literal["tsv", "jsonl", "yandex", "parquet"]


def _split_ids(text: str) -> list[str]:
    text = text.strip()
    return [t.strip() for t in text.split(",")] if text else []


def _numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line)`` of a UTF-8 text file; bytes that are not UTF-8 raise
    :class:`InputError` naming the file and the line."""
    src = str(path)
    lineno = 0
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"not UTF-8 text (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                    "click logs must be UTF-8",
                    src,
                    lineno,
                ) from None
            # a byte-order mark is accepted alike in every format
            yield lineno, (text.removeprefix("\ufeff") if lineno == 1 else text)


def read_tsv(path: str | Path) -> ClickLog:
    """Read the documented TSV format (see the module docstring): parsed by pyarrow and read on whole columns
    (:func:`clickmodels.logs_columns.tsv_sessions`) or, where that declines, line by line (the reference, whose errors
    name the line)."""
    from clickmodels.logs_columns import tsv_sessions

    fast = tsv_sessions(path)
    if fast is not None:
        return fast
    src = str(path)
    sessions: list[tuple[str, str, list[str], list[str]]] = []
    lines: list[int] = []
    for lineno, raw in _numbered_lines(path):
        text = raw.rstrip("\r\n")
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        parts = text.split("\t")
        if len(parts) != 4:
            raise InputError(
                f"expected 4 tab-separated fields (session, query, docs, clicks), got {len(parts)}; a session "
                "without clicks ends with a tab and an empty clicks field",
                src,
                lineno,
            )
        sid, q = parts[0].strip(), parts[1].strip()
        if not sid or not q:
            raise InputError("session and query ids must not be empty", src, lineno)
        shown = _split_ids(parts[2])
        clicked = _split_ids(parts[3])
        if any(c == "" for c in clicked):
            raise InputError("empty id in the click list", src, lineno)
        sessions.append((sid, q, shown, clicked))
        lines.append(lineno)
    return from_sessions(sessions, source=src, lines=lines)


def _json_id(value: object, what: str, src: str, lineno: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{what} must be a string or an integer, got {value!r}", src, lineno)
    return str(value)


def read_jsonl(path: str | Path) -> ClickLog:
    """Read the documented JSON-lines format (see the module docstring): parsed by pyarrow and read on whole columns
    (:func:`clickmodels.logs_columns.jsonl_sessions`) or, where that declines, line by line (the reference, whose
    errors name the line)."""
    from clickmodels.logs_columns import jsonl_sessions
    from onlineeval.io.logged_json import DuplicateKey, loads_unique

    fast = jsonl_sessions(path)
    if fast is not None:
        return fast
    src = str(path)
    sessions: list[tuple[str, str, list[str], list[str]]] = []
    lines: list[int] = []
    for lineno, raw in _numbered_lines(path):
        if not raw.strip():
            continue
        try:
            obj = loads_unique(raw)  # (plain json.loads keeps a repeated key's last value)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", src, lineno) from None
        except DuplicateKey as exc:
            raise InputError(exc.text(), src, lineno) from None
        except RecursionError:
            raise InputError("JSON nested too deeply; a line is one flat object", src, lineno) from None
        except ValueError as exc:  # e.g. an integer of more than 4300 digits (Python's limit)
            from onlineeval.io.logged_json import json_value_error

            raise InputError(f"invalid JSON: {json_value_error(exc)}", src, lineno) from None
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", src, lineno)
        unknown = set(obj) - {"session", "query", "docs", "clicks"}
        if unknown:
            raise InputError(
                f"unknown key(s) {sorted(unknown)}; allowed: session, query, docs, clicks", src, lineno
            )
        sessions.append(_json_session(obj, src, lineno))
        lines.append(lineno)
    return from_sessions(sessions, source=src, lines=lines,
                         flags_hint=" (for one flag per shown document write true/false)")


def _json_session(obj: dict[str, Any], src: str, lineno: int) -> tuple[str, str, list[str], list[str]]:
    """``(session, query, shown, clicked)`` of one JSON object of the ``jsonl`` format (or a Parquet row as one)."""
    if "query" not in obj or "docs" not in obj:
        raise InputError("'query' and 'docs' are required", src, lineno)
    docs = obj["docs"]
    clicks = obj.get("clicks", [])
    if not isinstance(docs, list) or not isinstance(clicks, list):
        raise InputError("'docs' and 'clicks' must be lists", src, lineno)
    sid = _json_id(obj.get("session", str(lineno)), "'session'", src, lineno)
    q = _json_id(obj["query"], "'query'", src, lineno)
    shown = [_json_id(d, "a document id", src, lineno) for d in docs]
    if clicks and all(isinstance(c, bool) for c in clicks):  # one true/false per shown document
        if len(clicks) != len(shown):
            raise InputError(f"'clicks' as true/false flags needs one per shown document: {len(clicks)} flags "
                             f"for {len(shown)} documents", src, lineno)
        clicked = [d for d, c in zip(shown, clicks) if c]
    elif any(isinstance(c, bool) for c in clicks):
        raise InputError("'clicks' mixes true/false and ids: give the clicked ids, or true/false for every "
                         "shown document", src, lineno)
    else:
        clicked = [_json_id(d, "a clicked id", src, lineno) for d in clicks]
    return sid, q, shown, clicked


def read_parquet(path: str | Path) -> ClickLog:
    """Read a Parquet file (or a directory of them) of sessions (:mod:`clickmodels.logs_parquet`)."""
    from clickmodels.logs_parquet import read_parquet_sessions

    return read_parquet_sessions(path)


def read_yandex(path: str | Path) -> ClickLog:
    """Read the Yandex WSCD / PyClick sample format (see the module docstring)."""
    src = str(path)
    sessions: list[tuple[str, str, list[str], list[str]]] = []
    lines: list[int] = []
    for lineno, raw in _numbered_lines(path):
        for j, chunk in enumerate(raw.split(";")):
            if not chunk.strip():
                continue
            head, sep, clicks = chunk.partition(":")
            if not sep:
                raise InputError(f"session {j + 1}: missing ':' between documents and clicks", src, lineno)
            q, tab, docs = head.strip().partition("\t")
            if not tab:
                parts = head.split(None, 1)
                if len(parts) != 2:
                    raise InputError(f"session {j + 1}: expected '<query>\\t<docs>'", src, lineno)
                q, docs = parts
            shown = _split_ids(docs)
            clicked = _split_ids(clicks)
            if not q.strip() or not shown or any(d == "" for d in shown + clicked):
                raise InputError(f"session {j + 1}: empty query, document or click id", src, lineno)
            sessions.append((f"{lineno}:{j}", q.strip(), shown, clicked))
            lines.append(lineno)
    return from_sessions(sessions, source=src, lines=lines, strict_clicks=False)


def _session_rows(log: ClickLog) -> list[tuple[str, str, list[str], list[str]]]:
    """Per session: id, query id, shown ids, clicked ids in click order (first clicks)."""
    docs = log.doc_ids()
    queries = log.query_ids()
    rows = []
    for i in range(log.n_sessions):
        shown = [d for d in docs[i].tolist() if d != ""]
        order = log.click_order[i]
        clicked = [docs[i, r] for r in np.argsort(order, kind="stable") if order[r] > 0]
        rows.append((str(log.session_ids[i]), str(queries[i]), shown, [str(c) for c in clicked]))
    return rows


def _check_writable(values: list[str], what: str) -> None:
    for v in values:
        if any(ch in v for ch in ",\t\n\r") or v != v.strip() or not v:
            raise InputError(f"{what} {v!r} cannot be written as TSV (empty, or contains a comma, tab or newline)")


def write_tsv(log: ClickLog, path: str | Path) -> None:
    """Write ``log`` in the documented TSV format (clicks: first click per slot, in order)."""
    lines = ["# session\tquery\tdocs\tclicks"]
    for sid, q, shown, clicked in _session_rows(log):
        _check_writable([sid, q, *shown], "id")
        lines.append(f"{sid}\t{q}\t{','.join(shown)}\t{','.join(clicked)}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_jsonl(log: ClickLog, path: str | Path) -> None:
    """Write ``log`` in the documented JSON-lines format."""
    with open(path, "w", encoding="utf-8") as fh:
        for sid, q, shown, clicked in _session_rows(log):
            fh.write(json.dumps({"session": sid, "query": q, "docs": shown, "clicks": clicked}) + "\n")


_READERS = {"tsv": read_tsv, "jsonl": read_jsonl, "yandex": read_yandex, "parquet": read_parquet}


def read_click_log(path: str | Path, format: LogFormat | None = None) -> ClickLog:
    """Read a click log; ``format`` defaults from the suffix (``.tsv``, ``.jsonl``), Parquet from its magic bytes
    (``PAR1``; or a directory of Parquet files), else ``yandex``.

    Raises
    ------
    InputError
        Unknown format or malformed content (naming file and line).
    """
    if format is None:
        suffix = Path(path).suffix.lower()
        format = "tsv" if suffix == ".tsv" else "jsonl" if suffix in (".jsonl", ".json") else "yandex"
        if format == "yandex":
            from onlineeval.io.logged_parquet import is_parquet

            format = "parquet" if is_parquet(path) else format
        inferred = True
    else:
        inferred = False
    reader = _READERS.get(format)
    if reader is None:
        raise InputError(f"unknown click-log format {format!r}; allowed: {', '.join(_READERS)}", str(path))
    try:
        return reader(path)
    except InputError as exc:
        if not inferred or format != "yandex" or exc.line is None:
            raise
        raise InputError(
            f"{exc.message} (read as 'yandex' because the name does not end in .tsv or .jsonl; "
            "give the format: --format / format=tsv, jsonl, yandex or parquet)",
            exc.path,
            exc.line,
        ) from None
