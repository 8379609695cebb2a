"""A byte-level reader of TREC qrels and run files that returns ids as integer words.

:func:`scan_qrels` and :func:`scan_run` read the file as bytes and split it with numpy,
without a Python string per line: every id becomes a row of big-endian ``uint64`` words
(its ASCII bytes, zero-padded), so ids compare, sort and hash as integers, and only the
distinct query ids are ever decoded. They take the files that every TREC tool writes:

* ASCII text, fields separated by exactly one space or tab, one line per entry
  (``\\n`` line ends; the last one may be missing), no blank or comment lines, no ``"``;
* qrels: 4 fields, the grade an integer ``-?[0-9]{1,9}``;
* runs: 6 fields, the score a decimal ``-?D+(.D+)?([eE][+-]?D{1,3})?`` with at most 15
  digits and a decimal exponent within +-22 once the fraction is counted in.

Such a score is parsed exactly: an integer mantissa below ``10**15`` is a float64 exactly,
and so are ``10**0 .. 10**22``; one multiplication or division is correctly rounded
(Clinger's fast path, W. D. Clinger, "How to read floating point numbers accurately",
PLDI 1990), so the value equals Python's ``float(text)`` and pandas' (which takes the same
path for these inputs). Any other file, including every malformed one, makes them return
``None``: the caller then reads it with :func:`onlineeval.io.read_qrels` /
:func:`onlineeval.io.read_run`, which accept the rest of the format and name the file,
line and problem of a malformed file. So the two readers agree by construction on what
is accepted and on every error message; tests check that they give identical values.
A (query, doc) pair listed twice is not looked for here (as with ``check_unique=False``):
:func:`onlineeval.metrics.batch.evaluate_coded` finds it and hands over to the pandas path,
which names its line.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

#: the file's bytes: a bytearray (small files, with zero padding) or a read-only memory map
Buffer = bytearray | mmap.mmap

__all__ = ["ByteIds", "CodedQrels", "CodedRun", "scan_qrels", "scan_run"]

#: longest id (bytes) and numeric field the byte reader takes; longer ones go to the general reader
MAX_ID_BYTES = 256
MAX_NUMBER_BYTES = 32
#: exact powers of ten as float64 (10**22 is the largest one that is exact)
_POW10 = np.array([float(f"1e{k}") for k in range(23)])
#: bytes per chunk: the arrays of one chunk stay in the processor's cache
CHUNK_BYTES = 1 << 20
_PAD = MAX_NUMBER_BYTES  # zero bytes after the data: a load at any field start stays inside


@dataclass(frozen=True)
class ByteIds:
    """Ids as ``(n, k)`` uint64 words: the id's bytes big-endian, zero-padded.

    Word rows compare (lexicographically, word by word) exactly as the ids compare as
    strings, since ASCII ids hold no zero byte; equal rows are equal ids.
    """

    words: np.ndarray

    def __len__(self) -> int:
        return int(self.words.shape[0])

    def decode(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The ids (of ``rows``, default all) as an object array of ``str``."""
        w = self.words if rows is None else self.words[rows]
        raw = np.ascontiguousarray(w.astype(">u8")).view(f"S{8 * w.shape[1]}").ravel()
        # ASCII bytes (no zero byte inside an id): numpy's bytes -> str cast is exact here
        return raw.astype(f"U{8 * w.shape[1]}").astype(object)


@dataclass(frozen=True)
class CodedQrels:
    """A qrels file read by :func:`scan_qrels`: ``query``, ``doc`` ids and ``grade`` per line."""

    path: str
    query: ByteIds
    doc: ByteIds
    grade: np.ndarray


@dataclass(frozen=True)
class CodedRun:
    """A run file read by :func:`scan_run`: ids and ``score`` per line, tag of the first line."""

    path: str
    query: ByteIds
    doc: ByteIds
    score: np.ndarray
    run_id: str


def _chunks(raw: Buffer, size: int) -> list[tuple[int, int]]:
    """Byte ranges of about :data:`CHUNK_BYTES` each, every one ending after a newline
    (the last one at the end of the file): arrays of a chunk stay in the processor's cache."""
    out = []
    a = 0
    while a < size:
        b = min(a + CHUNK_BYTES, size)
        if b < size:
            nl = raw.find(b"\n", b - 1)
            b = size if nl < 0 else nl + 1
        out.append((a, b))
        a = b
    return out


def _fields(
    raw: Buffer, buf: np.ndarray, a: int, b: int, ncols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """The lines of bytes ``[a, b)`` (which end with a newline or the file): start and end
    of each line ``(n,)``, start and end (exclusive) of each of its ``ncols - 1`` separators
    (runs of spaces and tabs) ``(n, ncols - 1)``, all offsets from ``a``; the separators'
    ends are ``None`` when every separator is one byte (each ends one after its start).
    ``None`` when the bytes are not in the byte reader's format (see the module docstring)."""
    data = buf[a:b]
    if data.max() >= 128 or raw.find(b"#", a, b) >= 0 or raw.find(b'"', a, b) >= 0:
        return None
    single = _single_separators(data, ncols)
    if single is not None:
        starts, nl, sep = single
        return starts, nl, sep, None
    nl = np.flatnonzero(data == 10)
    has_tab = raw.find(b"\t", a, b) >= 0
    n_tab = int(np.count_nonzero(data == 9)) if has_tab else 0
    if int(np.count_nonzero(data < 32)) != nl.size + n_tab:
        return None  # another control byte (\r, \f, ...)
    sp = np.flatnonzero((data == 32) | (data == 9) if has_tab else data == 32)
    if data[-1] != 10:
        nl = np.append(nl, data.size)
    n = nl.size
    if sp.size == (ncols - 1) * n:
        sep_start = sp.reshape(n, ncols - 1)
        sep_end = sep_start + 1
    else:  # runs of several spaces / tabs between fields
        if sp.size == 0:
            return None
        head = np.ones(sp.size, dtype=bool)
        head[1:] = sp[1:] != sp[:-1] + 1
        if int(np.count_nonzero(head)) != (ncols - 1) * n:
            return None
        sep_start = sp[head].reshape(n, ncols - 1)
        tail = np.ones(sp.size, dtype=bool)
        tail[:-1] = head[1:]
        sep_end = (sp[tail] + 1).reshape(n, ncols - 1)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    # every field non-empty, so each line holds exactly its ncols - 1 separators
    if not (sep_start[:, 0] > starts).all() or not (nl > sep_end[:, -1]).all():
        return None
    for j in range(ncols - 2):
        if not (sep_start[:, j + 1] > sep_end[:, j]).all():
            return None
    return starts, nl, sep_start, sep_end


def _single_separators(data: np.ndarray, ncols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_fields` for the usual layout, in one pass over the bytes: every line holds
    exactly ``ncols - 1`` single spaces or tabs between non-empty fields, and no other
    byte below 33 than its newline. Start and end of each line, and each separator's
    offset ``(n, ncols - 1)``, relative to ``data``; ``None`` for any other layout (then
    the general code of :func:`_fields` decides, and gives the same result for this one)."""
    ws = np.flatnonzero(data <= 32)  # separators, newlines and any other control byte
    open_end = data[-1] != 10
    if open_end:  # the last line has no newline: its end is the end of the bytes
        ws = np.append(ws, data.size)
    if ws.size % ncols or ws[0] == 0:
        return None
    n = ws.size // ncols
    nl = ws[ncols - 1 :: ncols]
    # newlines at every ncols-th of these bytes and nowhere else (the end of the bytes
    # stands for the last one when it is missing), spaces or tabs at all the others
    kind = data[ws[:-1] if open_end else ws]
    is_nl = kind == 10
    if not (
        int(np.count_nonzero(is_nl)) == (n - 1 if open_end else n)
        and is_nl[ncols - 1 :: ncols].all()
        and ((kind == 32) | (kind == 9) | is_nl).all()
        and (ws[1:] - ws[:-1] > 1).all()  # no empty field, no empty line
    ):
        return None
    sep = ws.reshape(n, ncols)[:, :-1]
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = nl[:-1] + 1
    return starts, nl, sep


#: ``_KEEP[k]`` keeps the first ``k`` bytes (the high ones) of a big-endian word, ``0 <= k <= 8``
_KEEP = np.array([0] + [((1 << (8 * k)) - 1) << (8 * (8 - k)) for k in range(1, 9)], dtype=np.uint64)


def _ids(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> ByteIds | None:
    """The bytes ``[start, end)`` of each row as zero-padded big-endian uint64 words (8-byte
    loads: ``buf`` holds at least 8 bytes after every field)."""
    length = end - start
    longest = int(length.max(initial=1))
    if longest > MAX_ID_BYTES:
        return None
    k = (longest + 7) // 8
    # element i of this view is the 8 bytes at offset i, read big-endian
    last = buf.size - 8
    loads = np.ndarray((last + 1,), dtype=">u8", buffer=buf, offset=0, strides=(1,))
    words = np.empty((start.size, k), dtype=np.uint64)
    for j in range(k):
        # the first word's load never leaves the buffer; later ones may past a short id
        w = loads[np.minimum(start + 8 * j, last)] if j else loads[start]
        rest = length - 8 * j if j else length
        if j == k - 1 or not (rest >= 8).all():
            np.bitwise_and(w, _KEEP[np.clip(rest, 0, 8)], out=words[:, j])
        else:
            words[:, j] = w
    return ByteIds(words)


def _byte_rows(buf: np.ndarray, pos: np.ndarray, n_words: int) -> np.ndarray:
    """``(n, 8 * n_words)`` bytes from each offset of ``pos`` (in address order), read as
    ``n_words`` 8-byte loads per row: much faster than gathering bytes one by one."""
    loads = np.ndarray((buf.size - 7,), dtype="<u8", buffer=buf, offset=0, strides=(1,))
    out = np.empty((pos.size, n_words), dtype="<u8")
    for j in range(n_words):
        out[:, j] = loads[pos + 8 * j]
    return out.view(np.uint8)


def _columns(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(W, n)`` bytes of each field by position (byte ``j`` of every field in row ``j``;
    past a field's end, whatever follows it) and the field lengths."""
    length = end - start
    width = int(length.max(initial=1))
    if width > MAX_NUMBER_BYTES:
        return None
    rows = _byte_rows(buf, start, (width + 7) // 8)
    return np.ascontiguousarray(rows[:, :width].T), length


def _plain_number(cols: np.ndarray, length: np.ndarray,
                  allow_dot: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Digits, sign and fraction of numbers ``-?D+(.D+)?`` (``-?D+`` without ``allow_dot``):
    the integer of all digits, the number of fraction digits, the sign; ``None`` when a
    number is written otherwise or has more than 15 digits. One pass over the positions;
    a field is valid when its digits, its dot and its leading minus make up its length
    (digits before the dot: ``n_digits - frac``, so ``-.5`` and ``5.`` are refused)."""
    n = length.size
    cols = cols * (np.arange(cols.shape[0])[:, None] < length)  # 0 past each field's end
    neg = cols[0] == 45
    mantissa = np.zeros(n, dtype=np.int64)
    n_digits = np.zeros(n, dtype=np.int64)
    n_dots = np.zeros(n, dtype=np.int64)
    frac = np.zeros(n, dtype=np.int64)
    for j in range(cols.shape[0]):
        digit = cols[j] - np.uint8(48)
        is_digit = digit < 10
        if allow_dot:
            n_dots += cols[j] == 46
            frac += is_digit & (n_dots > 0)
        mantissa = np.where(is_digit, mantissa * 10 + digit, mantissa)
        n_digits += is_digit
    int_digits = n_digits - frac
    ok = (n_digits + n_dots + neg == length) & (int_digits >= 1) & (n_digits <= 15)
    if allow_dot:
        ok &= (n_dots == 0) | ((n_dots == 1) & (frac >= 1))
    if not ok.all():
        return None
    return mantissa, frac, neg


def _parse_grades(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Integer grades ``-?[0-9]{1,9}``, or ``None`` when one is written otherwise."""
    got = _columns(buf, start, end)
    parsed = None if got is None or got[0].shape[0] > 10 else _plain_number(*got, allow_dot=False)
    if parsed is None:
        return None
    value, _, neg = parsed
    if (value >= 10**9).any():
        return None
    return np.where(neg, -value, value)


def _fixed_decimals(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """:func:`_parse_scores` for fields ``-?D+.D{F}`` with the same ``F`` on every line (as
    printf's ``%.Nf`` writes them): the fields right-aligned, so the dot is in one column
    for all and the digits are read by Horner's rule without a test per position. ``None``
    when the fields are written otherwise (then the general parser decides)."""
    length = end - start
    width = int(length.max(initial=1))
    n = start.size
    if n == 0 or width > 17:
        return None
    first = bytes(buf[int(start[0]) : int(end[0])])
    frac = len(first) - 1 - first.find(b".")
    if first.find(b".") < 0 or frac < 1:
        return None
    n_words = (width + 7) // 8
    width = 8 * n_words
    if int(end.min()) < width:
        return None
    if n_words == 1:
        return _fixed_decimals_word(buf, end, length, frac)
    # (W, n): row W - 1 holds each field's last byte
    cols = np.ascontiguousarray(_byte_rows(buf, end - width, n_words).T)
    dot = width - 1 - frac
    row = np.arange(width)[:, None]
    lead = width - length  # the row of each field's first byte
    minus = cols == 45
    neg = minus.any(axis=0)
    # one minus, first; digits before the dot (the sign and the bytes before the field are
    # not), and at most 15 in all
    if (
        (minus & (row != lead[None, :])).any()
        or not (cols[dot] == 46).all()
        or not ((dot - lead - neg >= 1).all() and (length - 1 - neg <= 15).all())
    ):
        return None
    digit = np.where((row >= lead[None, :]) & ~minus, cols, np.uint8(48)) - np.uint8(48)
    if not ((digit[:dot] < 10).all() and (digit[dot + 1 :] < 10).all()):
        return None
    mantissa = np.zeros(n, dtype=np.int64)
    for j in range(width):
        if j != dot:
            mantissa *= 10
            mantissa += digit[j]
    value = mantissa.astype(np.float64) / _POW10[frac]
    return np.where(neg, -value, value)


_ZEROS = np.uint64(0x3030303030303030)  # eight ASCII '0'
_ALL = np.uint64(2**64 - 1)


def _fixed_decimals_word(buf: np.ndarray, end: np.ndarray, length: np.ndarray, frac: int) -> np.ndarray | None:
    """:func:`_fixed_decimals` for fields of at most 8 bytes, on one 8-byte word per field
    (the 8 bytes that end with it, character ``i`` in bits ``8i .. 8i + 7``): the bytes
    before the field, its leading minus and its dot become ASCII zeros by word masks, then
    every byte must be a digit and Horner's rule skips the dot's column. The same values
    and the same refusals (``None``) as the byte-column code, in fewer passes."""
    n = end.size
    dot = 7 - frac
    loads = np.ndarray((buf.size - 7,), dtype="<u8", buffer=buf, offset=0, strides=(1,))
    w = loads[end - 8].astype(np.uint64, copy=False)  # native order (a copy only on a big-endian machine)
    lead = 8 - length  # the byte of each field's first character
    at_lead = (lead * 8).astype(np.uint64)
    keep = np.left_shift(_ALL, at_lead)  # the field's bytes
    np.bitwise_and(w, keep, out=w)
    np.invert(keep, out=keep)
    np.bitwise_and(keep, _ZEROS, out=keep)
    np.bitwise_or(w, keep, out=w)  # bytes before the field: '0'
    neg = (np.right_shift(w, at_lead) & np.uint64(0xFF)) == 45
    np.bitwise_xor(w, np.left_shift(neg.astype(np.uint64) * np.uint64(45 ^ 48), at_lead), out=w)  # '-' -> '0'
    at_dot = np.uint64(8 * dot)
    if not ((np.right_shift(w, at_dot) & np.uint64(0xFF)) == 46).all():
        return None
    np.bitwise_xor(w, np.uint64((46 ^ 48) << (8 * dot)), out=w)  # '.' -> '0'
    # a digit before the dot (the minus is not one), and at most 15 digits (always: <= 7)
    if not (dot - lead - neg >= 1).all():
        return None
    chars = w.astype("<u8", copy=False).view(np.uint8).reshape(n, 8)
    digit = chars - np.uint8(48)
    if not (digit < 10).all():  # any other byte (a second minus or dot, a sign, a letter)
        return None
    mantissa = np.zeros(n, dtype=np.int64)
    for j in range(8):
        if j != dot:
            mantissa *= 10
            mantissa += digit[:, j]
    value = mantissa.astype(np.float64) / _POW10[frac]
    return np.where(neg, -value, value)


def _parse_scores(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Scores in the module docstring's grammar, exactly as ``float(text)``; ``None``
    when one is written otherwise (or needs more than Clinger's fast path)."""
    fixed = _fixed_decimals(buf, start, end)
    if fixed is not None:
        return fixed
    got = _columns(buf, start, end)
    if got is None:
        return None
    cols, length = got
    if ((cols | np.uint8(32)) == 101).any():  # an e or E somewhere (maybe past a field's end)
        return _parse_exp_scores(cols.T, length)
    parsed = _plain_number(cols, length, allow_dot=True)
    if parsed is None:
        return None
    mantissa, frac, neg = parsed
    value = mantissa.astype(np.float64) / _POW10[frac]
    return np.where(neg, -value, value)


def _parse_exp_scores(win: np.ndarray, length: np.ndarray) -> np.ndarray | None:
    """:func:`_parse_scores` for fields that may carry an exponent (``1.5e-05``)."""
    pos = np.arange(win.shape[1])
    inside = pos[None, :] < length[:, None]
    win = np.where(inside, win, np.uint8(0))
    n = win.shape[0]
    digit = win - np.uint8(48)
    is_digit = digit < 10
    is_dot = win == 46
    is_exp = (win | np.uint8(32)) == 101  # e or E
    is_sign = (win == 45) | (win == 43)
    if not (is_digit | is_dot | is_exp | is_sign | ~inside).all():
        return None
    neg = win[:, 0] == 45
    n_exp = np.count_nonzero(is_exp, axis=1)
    n_dot = np.count_nonzero(is_dot, axis=1)
    if (n_exp > 1).any() or (n_dot > 1).any():
        return None
    e_pos = np.where(n_exp > 0, np.argmax(is_exp, axis=1), length)
    dot_pos = np.where(n_dot > 0, np.argmax(is_dot, axis=1), e_pos)
    # signs only at the start ('-') or right after the exponent mark
    sign_ok = (pos[None, :] == e_pos[:, None] + 1) | ((pos[None, :] == 0) & (win == 45))
    if (is_sign & ~sign_ok).any():
        return None
    int_digits = dot_pos - neg
    frac_digits = np.where(n_dot > 0, e_pos - dot_pos - 1, 0)
    after = np.minimum(e_pos + 1, win.shape[1] - 1)
    has_exp_sign = (n_exp > 0) & is_sign[np.arange(n), after]
    exp_digits = np.where(n_exp > 0, length - e_pos - 1 - has_exp_sign, 0)
    if not (
        (int_digits >= 1).all()
        and (dot_pos <= e_pos).all()
        and ((n_dot == 0) | (frac_digits >= 1)).all()
        and ((n_exp == 0) | ((exp_digits >= 1) & (exp_digits <= 3))).all()
        and (int_digits + frac_digits <= 15).all()
    ):
        return None
    mantissa = _digits_value(digit, is_digit & (pos[None, :] < e_pos[:, None]))
    e_val = _digits_value(digit, is_digit & (pos[None, :] > e_pos[:, None]))
    e_neg = has_exp_sign & (win[np.arange(n), after] == 45)
    power = np.where(e_neg, -e_val, e_val) - frac_digits
    if (np.abs(power) > 22).any():
        return None
    m = mantissa.astype(np.float64)
    value = np.where(power >= 0, m * _POW10[np.clip(power, 0, 22)], m / _POW10[np.clip(-power, 0, 22)])
    return np.where(neg, -value, value)


def _digits_value(digit: np.ndarray, take: np.ndarray) -> np.ndarray:
    """Integer value of the ``(n, W)`` digits where ``take`` (Horner's rule over the columns)."""
    value = np.zeros(digit.shape[0], dtype=np.int64)
    for j in range(digit.shape[1]):
        value = np.where(take[:, j], value * 10 + digit[:, j], value)
    return value


class _Rows:
    """The file's rows, written chunk by chunk into arrays of ``cap`` rows (a bound on the
    number of lines): no list of per-chunk arrays to join at the end, so no copy of the
    whole file's ids and numbers. Rows past the last line written are never touched, so
    the kernel never backs their pages with memory. Id words are as wide as the widest
    chunk's (narrower chunks' rows padded with zero words, as :class:`ByteIds` compare)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.n = 0
        self.query: np.ndarray | None = None
        self.doc: np.ndarray | None = None
        self.value: np.ndarray | None = None

    def _put_words(self, store: np.ndarray | None, words: np.ndarray) -> np.ndarray:
        a, b = self.n, self.n + words.shape[0]
        k = words.shape[1]
        if store is None:
            store = np.empty((self.cap, k), dtype=np.uint64)
        elif k > store.shape[1]:  # a wider chunk: widen the rows written so far
            wide = np.empty((self.cap, k), dtype=np.uint64)
            wide[:a, : store.shape[1]] = store[:a]
            wide[:a, store.shape[1] :] = 0
            store = wide
        store[a:b, :k] = words
        store[a:b, k:] = 0
        return store

    def put(self, query: ByteIds, doc: ByteIds, value: np.ndarray) -> bool:
        """Append one chunk's rows; ``False`` when they would pass ``cap`` (not a file of
        this reader's format)."""
        m = value.size
        if self.n + m > self.cap:
            return False
        self.query = self._put_words(self.query, query.words)
        self.doc = self._put_words(self.doc, doc.words)
        if self.value is None:
            self.value = np.empty(self.cap, dtype=value.dtype)
        self.value[self.n : self.n + m] = value
        self.n += m
        return True

    def ids(self) -> tuple[ByteIds, ByteIds, np.ndarray]:
        assert self.query is not None and self.doc is not None and self.value is not None
        return ByteIds(self.query[: self.n]), ByteIds(self.doc[: self.n]), self.value[: self.n]


def _scan_chunk(raw: Buffer, buf: np.ndarray, a: int, b: int,
                ncols: int) -> tuple[ByteIds, ByteIds, np.ndarray, str] | None:
    """Query ids, doc ids, the numbers (grades or scores) and the first line's tag (field 6
    of a run) of the lines in bytes ``[a, b)``; ``None`` outside the reader's format."""
    got = _fields(raw, buf, a, b, ncols)
    if got is None:
        return None
    starts, ends, sep_start, sep_end = got
    buf = buf[a:]  # the offsets are from a

    def after(j: int, rows: int | slice = slice(None)) -> Any:  # where field j + 1 starts (on ``rows``)
        return sep_start[rows, j] + 1 if sep_end is None else sep_end[rows, j]

    query = _ids(buf, starts, sep_start[:, 0])
    doc = _ids(buf, after(1), sep_start[:, 2])
    tag = ""
    if ncols == 4:
        value = _parse_grades(buf, after(2), ends)
    else:
        value = _parse_scores(buf, after(3), sep_start[:, 4])
        tag = bytes(buf[int(after(4, 0)) : int(ends[0])]).decode("ascii")
    if query is None or doc is None or value is None:
        return None
    return query, doc, value, tag


#: most threads that parse a file's chunks (the calling one and helpers; 1: no helper); see :func:`threads`
THREADS = 2


def threads() -> int:
    """Threads for the evaluation's parallel parts: :data:`THREADS`, but no more than the
    processors this process may use that no other task is running on right now (at least
    1; :func:`_busy`). A helper thread only pays where it gets a processor of its own: on
    a busy machine the threads take turns with the GIL and the other processes, and the
    helper does not pay (measured at load average 3-5 on 2 processors, whole process at 10M
    run lines, alternated with a one-thread tree: wall time x0.99 to x1.06, CPU time x0.96 to
    x1.06 with the helper; reading alone at load 4: wall x0.94, CPU x1.04)."""
    if THREADS <= 1:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        cpus = os.cpu_count() or 1
    return max(1, min(THREADS, int(cpus - _busy())))


def _busy() -> float:
    """Tasks running or runnable now besides this process: Linux's count of runnable tasks
    (``/proc/loadavg``, which counts the reading task) less one; elsewhere the 1-minute load
    average (0 where there is none)."""
    try:
        with open("/proc/loadavg", "rb") as f:
            running = f.read().split()[3].split(b"/")[0]
        return max(0.0, float(int(running) - 1))
    except (OSError, IndexError, ValueError):
        pass
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0


#: fewest chunks parsed on :data:`THREADS` threads (fewer: the calling thread alone)
THREAD_CHUNKS = 4

_Part = TypeVar("_Part")


def _parse_in_order(
    parse: Callable[[int], _Part | None], put: Callable[[_Part], bool], n: int, threads: int
) -> bool:
    """``put(parse(i))`` for ``i = 0 .. n - 1``, ``put`` always in order of ``i`` and on the
    calling thread; ``False`` at the first ``None`` from ``parse`` or ``False`` from ``put``.

    With ``threads > 1`` the chunks are parsed by a pool of that many threads
    (``ThreadPoolExecutor.map``: results in order) while the calling thread puts them; numpy
    releases the GIL in its passes over a chunk's arrays (most of a chunk's time), so the
    threads parse in parallel and the result is the same as on one thread, whatever the
    timing. At the first refusal the chunks not started are cancelled; an exception in a
    parse is raised on the calling thread.
    """
    if threads <= 1:
        for i in range(n):
            part = parse(i)
            if part is None or not put(part):
                return False
        return True
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=threads)
    try:
        for part in pool.map(parse, range(n)):
            if part is None or not put(part):
                return False
        return True
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _scan(path: str | PathLike[str], ncols: int) -> tuple[str, ByteIds, ByteIds, np.ndarray, str] | None:
    """Query ids, doc ids and the last column's numbers (grades or scores) of every line,
    with the tag (field 6) of the first line of a run.

    A large file is memory-mapped (no copy); its last chunk is copied with :data:`_PAD`
    zero bytes after it, so that the loads past a field's start never leave the buffer
    (every other chunk has the last chunk, at least ``2 * _PAD`` bytes, after it). The
    chunks' rows go straight into arrays sized for the most lines the file can hold
    (each line has at least ``2 * ncols - 1`` bytes), of which only the rows written are
    ever backed by memory (:class:`_Rows`). Files of :data:`THREAD_CHUNKS` chunks or more are
    parsed on :func:`threads` threads (:func:`_parse_in_order`: the same arrays as on one).
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= 0:
            return None
        if size < 4 * CHUNK_BYTES:
            raw: Buffer = bytearray(size + _PAD)
            if f.readinto(memoryview(raw)[:size]) != size:
                return None  # the file changed while read: leave it to the general reader
            view = memoryview(raw)
        else:
            raw = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            view = memoryview(raw)
    buf = np.frombuffer(view, dtype=np.uint8)
    chunks = _chunks(raw, size)
    if len(chunks) > 1 and chunks[-1][1] - chunks[-1][0] < 2 * _PAD:
        chunks[-2:] = [(chunks[-2][0], size)]
    rows = _Rows(size // (2 * ncols - 1) + 1)
    tags: list[str] = []

    def parse(i: int) -> tuple[ByteIds, ByteIds, np.ndarray, str] | None:
        a, b = chunks[i]
        if i == len(chunks) - 1 and isinstance(raw, mmap.mmap):
            tail = bytearray(raw[a:b]) + bytearray(_PAD)
            return _scan_chunk(tail, np.frombuffer(tail, dtype=np.uint8), 0, b - a, ncols)
        return _scan_chunk(raw, buf, a, b, ncols)

    def put(part: tuple[ByteIds, ByteIds, np.ndarray, str]) -> bool:
        if not tags:
            tags.append(part[3])
        return rows.put(*part[:3])

    if not _parse_in_order(parse, put, len(chunks), threads() if len(chunks) >= THREAD_CHUNKS else 1):
        return None
    tag = tags[0]
    query, doc, value = rows.ids()
    return str(Path(path)), query, doc, value, tag


def scan_qrels(path: str | PathLike[str]) -> CodedQrels | None:
    """Read a qrels file (``query iteration doc grade``) in the byte reader's format.

    Returns ``None`` (read it with :func:`onlineeval.io.read_qrels`) for any other file.
    """
    got = _scan(path, 4)
    if got is None:
        return None
    name, query, doc, grade, _ = got
    return CodedQrels(name, query, doc, grade)


def scan_run(path: str | PathLike[str]) -> CodedRun | None:
    """Read a run file (``query Q0 doc rank score tag``) in the byte reader's format.

    Returns ``None`` (read it with :func:`onlineeval.io.read_run`) for any other file.
    """
    got = _scan(path, 6)
    if got is None:
        return None
    name, query, doc, score, tag = got
    return CodedRun(name, query, doc, score, tag)
