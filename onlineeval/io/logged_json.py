"""Decoding the JSON lines of a logged click log (:func:`onlineeval.io.logged.read_logged`): one decoder that
refuses a key named twice in an object (:class:`DuplicateKey`; plain ``json.loads`` keeps the last value silently),
and :class:`LoggerTexts`, which decodes a query's ``"logger"`` object once and hands it back to the lines that
repeat its text."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DECODER", "DuplicateKey", "LoggerTexts", "json_value_error", "loads_unique"]


class DuplicateKey(ValueError):
    """A JSON object of a log line names a key twice (its ``args[0]``)."""

    def text(self) -> str:
        """The readers' message for it (each adds the file and line)."""
        return (f"key {self.args[0]!r} appears twice in one object (JSON keys must be unique; the reader would "
                "otherwise keep one of the values silently)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object as a dict, or :class:`DuplicateKey` when a key repeats
    (plain ``json.loads`` keeps the last value silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        raise DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return out


#: one decoder for every line: ``json.loads`` with a hook builds a new ``JSONDecoder`` per call (a line of
#: bench_read_logger_log's logger log: 24 -> 19 us, collector paused); ``decode`` is what ``loads`` calls, so the
#: same objects and errors (a byte-order mark is dropped before, by the utf-8-sig decoding)
DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


def loads_unique(text: str) -> Any:
    """``json.loads(text)`` refusing a key twice (:class:`DuplicateKey`), by :data:`DECODER`: the same objects and
    errors, a leading byte-order mark too, without a decoder built per call (a validate log line: 7.1 -> 4.3 us,
    plain ``json.loads`` 4.2). For the readers that decode line by line: the click logs' JSON lines, validate's
    production logs, a Parquet log's logger texts."""
    if text.startswith("\ufeff"):  # (json.loads's own check on str input)
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return DECODER.decode(text)


class LoggerTexts:
    """Decodes log lines, parsing a ``"logger"`` object once per distinct text.

    A log that names its logging policy repeats its query's logger, scores and all, on every line: most of each
    line's bytes, and most of the time ``json`` spends on it (17 -> 3.6 us a line of bench_read_logger_log's log).
    After a line is decoded whole, its logger's exact text (from the top-level ``"logger":`` key to the end of its
    value, checked to decode to the very value the line holds) is kept, keyed by its first :attr:`KEY` characters;
    a later line holding that text at its ``"logger":`` key is decoded with the text replaced by a sentinel string,
    and gets the kept object back in its place (the same object: equal text, equal value). A line where the
    sentinel does not come back as the top-level ``logger`` value is decoded whole, as are lines whose logger was
    not seen before (each then kept). Duplicate keys and malformed JSON are found as before: a kept text was
    decoded whole once, the rest of the line is decoded every time, and a line that fails is decoded whole again,
    so its error names its own column."""

    KEY = 96
    PER_KEY = 8
    _SENTINEL = '"logger":"\\u0000onlineeval kept logger"'
    _SENTINEL_VALUE = "\x00onlineeval kept logger"

    def __init__(self) -> None:
        self.kept: dict[str, list[tuple[str, Any]]] = {}

    def decode(self, line: str) -> Any:
        at = line.find('"logger":')
        if at >= 0 and self.kept:
            for text, value in self.kept.get(line[at: at + self.KEY], ()):
                if line.startswith(text, at):
                    try:
                        obj = DECODER.decode(line[:at] + self._SENTINEL + line[at + len(text):])
                    except (ValueError, RecursionError):  # decoded whole below: its error's column is the line's
                        break
                    if isinstance(obj, dict) and obj.get("logger") == self._SENTINEL_VALUE:
                        obj["logger"] = value
                        return obj
                    break
        obj = DECODER.decode(line)
        if at >= 0 and isinstance(obj, dict) and isinstance(obj.get("logger"), dict):
            self._keep(line, at, obj["logger"])
        return obj

    def _keep(self, line: str, at: int, value: Any) -> None:
        start = at + len('"logger":')
        while start < len(line) and line[start] in " \t\r":
            start += 1
        try:
            parsed, end = DECODER.raw_decode(line, start)
        except (ValueError, RecursionError):
            return
        if parsed != value:  # a "logger" key nested before the top-level one: nothing kept
            return
        bucket = self.kept.setdefault(line[at: at + self.KEY], [])
        if len(bucket) < self.PER_KEY:
            bucket.append((line[at:end], value))


def json_value_error(exc: ValueError) -> str:
    """What a ``ValueError`` of the JSON decoder other than a syntax error means, in words (Python refuses to read an
    integer of more than 4300 digits: ``sys.get_int_max_str_digits()``)."""
    import sys

    text = str(exc)
    if "integer string conversion" in text:
        return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    return text[:200]
