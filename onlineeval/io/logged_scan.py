"""Byte scans of a logger log for the fast reader (:func:`onlineeval.io.logged_fast._read_fast`).

A log that names its logging policy repeats its query's ``"logger"`` object (the policy and the scores of every
candidate) on each line: most of its bytes. pyarrow's JSON reader would turn the scores into one struct field per
distinct document id (thousands of fields on a real log), so the fast reader hands pyarrow the log with each line's
top-level logger *value* replaced by ``null`` (:func:`null_loggers`: the lines stay, each as short as it is without
its logger), reads the rest as for a log with written propensities, and decodes each query's logger
text once with the reader's own decoder after checking that every line of the query holds the very same bytes
(:func:`first_differing`).

:func:`logger_spans` finds, line by line, the value of the top-level ``"logger"`` key: a JSON scan that follows
strings (with their escapes) and nesting, so braces, brackets and ``"logger"`` keys inside strings or nested objects
are not taken for it. Its verdicts are deliberately narrow: a line is *accepted* only with exactly one top-level
``"logger"`` key (written without escapes) whose value is an object of at least four bytes; anything else (no
logger, two, a value of another type, a line that ends inside a string or an object) makes the fast reader decline,
and the line-by-line reader, the reference, reads the log and names the line of any error. Whether the rest of a
line is valid JSON is pyarrow's verdict on that log, whether the logger text is is the decoder's.

Compiled by numba on first use (``njit(cache=True, nogil=True)``, as :mod:`onlineeval.estimators.model_fit`'s fit;
``NUMBA_DISABLE_JIT=1`` runs the same functions as plain Python, slowly).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["MAX_DEPTH", "deeper_than", "first_differing", "logger_spans", "null_loggers"]

#: the deepest nesting of JSON values (objects and arrays, outside strings) a fast reader hands to pyarrow: its JSON
#: parser recurses per level and overflows its thread's stack (the process dies of a segmentation fault) at some
#: 10^4 levels, where the line-by-line readers report "nested too deeply" on the line. The formats need at most 3
#: (a propensities object's list) outside a logger.
MAX_DEPTH = 64

_KEY = np.frombuffer(b"logger", dtype=np.uint8)

# bytes of the scan
_NL, _QUOTE, _BACKSLASH, _COLON, _COMMA = 10, 34, 92, 58, 44
_OPEN_OBJ, _CLOSE_OBJ, _OPEN_ARR, _CLOSE_ARR = 123, 125, 91, 93
_SPACE, _TAB, _CR = 32, 9, 13
#: a line's count when its logger cannot be taken (a value that is not an object, a line that ends open)
BAD = 1 << 30


def _logger_spans(buf: NDArray[np.uint8], key: NDArray[np.uint8], starts: NDArray[np.int64],
                  ends: NDArray[np.int64], counts: NDArray[np.int64]) -> None:
    """Per line (``\\n``-separated; arrays of ``buf.count(b"\\n") + 1`` entries, zeroed by the caller): ``starts``
    / ``ends`` the byte span of the top-level ``"logger"`` key's object value, ``counts`` how many top-level
    ``"logger"`` keys the line has (``BAD`` or more when one's value is not an object or the line ends inside a
    string or an object)."""
    line = 0
    depth = 0
    in_str = False
    esc = False
    key_str = False  # the string being read is a key of the top-level object
    key_start = 0
    expect_key = False  # at depth 1, the next string is a key
    pending = False  # a top-level "logger" key was read; its ':' comes next
    await_value = False  # its ':' was read; the value comes next
    in_logger = False  # inside the logger's object value
    klen = key.size
    for i in range(buf.size):
        c = buf[i]
        if in_str:
            if esc:
                esc = False
            elif c == _BACKSLASH:
                esc = True
            elif c == _QUOTE:
                in_str = False
                if key_str:
                    key_str = False
                    if i - key_start - 1 == klen:
                        same = True
                        for j in range(klen):
                            if buf[key_start + 1 + j] != key[j]:
                                same = False
                                break
                        pending = same
            elif c == _NL:  # a line that ends inside a string
                counts[line] += BAD
                in_str = False
                key_str = False
                depth = 0
                expect_key = pending = await_value = in_logger = False
                line += 1
            continue
        if c == _NL:
            if depth != 0 or await_value or in_logger:
                counts[line] += BAD
            depth = 0
            expect_key = pending = await_value = in_logger = False
            line += 1
            continue
        if c == _SPACE or c == _TAB or c == _CR:
            continue
        if await_value:
            await_value = False
            if c == _OPEN_OBJ and depth == 1:
                starts[line] = i
                in_logger = True
            else:  # a logger that is not an object: the line-by-line reader says so
                counts[line] += BAD
        if c == _QUOTE:
            in_str = True
            if depth == 1 and expect_key:
                key_str = True
                key_start = i
                expect_key = False
            continue
        if c == _OPEN_OBJ or c == _OPEN_ARR:
            depth += 1
            if depth == 1:
                expect_key = c == _OPEN_OBJ
            continue
        if c == _CLOSE_OBJ or c == _CLOSE_ARR:
            depth -= 1
            if in_logger and depth == 1:
                ends[line] = i + 1
                counts[line] += 1
                in_logger = False
            continue
        if depth == 1:
            if c == _COLON:
                if pending:
                    pending = False
                    await_value = True
            elif c == _COMMA:
                expect_key = True
                pending = False
            else:
                pending = False
    if depth != 0 or in_str or await_value or in_logger:
        counts[line] += BAD


def _first_differing(buf: NDArray[np.uint8], starts: NDArray[np.int64], ends: NDArray[np.int64],
                     ref: NDArray[np.int64]) -> int:
    """The first row whose span's bytes differ from those of row ``ref[row]``, or -1."""
    for i in range(starts.size):
        r = ref[i]
        if r == i:
            continue
        a, b, length = starts[i], starts[r], ends[i] - starts[i]
        if length != ends[r] - b:
            return i
        for j in range(length):
            if buf[a + j] != buf[b + j]:
                return i
    return -1


def _replace(buf: NDArray[np.uint8], starts: NDArray[np.int64], ends: NDArray[np.int64],
             out: NDArray[np.uint8]) -> None:
    """``buf`` with each span (in order, not overlapping) replaced by ``null``, into ``out`` (its size)."""
    at = 0
    src = 0
    for i in range(starts.size):
        s = starts[i]
        for j in range(src, s):
            out[at] = buf[j]
            at += 1
        out[at] = 110  # n
        out[at + 1] = 117  # u
        out[at + 2] = 108  # l
        out[at + 3] = 108  # l
        at += 4
        src = ends[i]
    for j in range(src, buf.size):
        out[at] = buf[j]
        at += 1


def _deeper_than(buf: NDArray[np.uint8], limit: int) -> bool:
    """Whether some line (``\n``-separated) nests objects and arrays more than ``limit`` levels deep, strings (with
    their escapes) skipped; a line is scanned afresh (a line ending inside a string or an open value too)."""
    depth = 0
    in_str = False
    esc = False
    for i in range(buf.size):
        c = buf[i]
        if c == _NL:
            depth = 0
            in_str = False
            esc = False
        elif in_str:
            if esc:
                esc = False
            elif c == _BACKSLASH:
                esc = True
            elif c == _QUOTE:
                in_str = False
        elif c == _QUOTE:
            in_str = True
        elif c == _OPEN_OBJ or c == _OPEN_ARR:
            depth += 1
            if depth > limit:
                return True
        elif (c == _CLOSE_OBJ or c == _CLOSE_ARR) and depth > 0:
            depth -= 1
    return False


@functools.cache
def _kernels() -> tuple[Callable[..., None], Callable[..., int], Callable[..., None], Callable[..., bool]]:
    import numba

    jit = numba.njit(cache=True, nogil=True)
    return jit(_logger_spans), jit(_first_differing), jit(_replace), jit(_deeper_than)


def deeper_than(buf: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether some line of the JSON-lines bytes ``buf`` (``bytes``, a buffer or a ``uint8`` array, e.g. a memory
    map) nests values more than ``limit`` levels deep (:data:`MAX_DEPTH`): a fast reader then declines before pyarrow
    parses it. About 1.5 ns per byte (366 MB in 0.55 s on the 2-core machine; a tenth of the fast reader's time)."""
    array = buf if isinstance(buf, np.ndarray) else np.frombuffer(buf, dtype=np.uint8)
    return bool(_kernels()[3](array, int(limit)))


def logger_spans(raw: bytes) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """``(starts, ends, counts)`` per line of the bytes ``raw`` (see :func:`_logger_spans`): a line's logger is taken
    only where its count is exactly 1."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    lines = raw.count(b"\n") + 1
    starts = np.zeros(lines, dtype=np.int64)
    ends = np.zeros(lines, dtype=np.int64)
    counts = np.zeros(lines, dtype=np.int64)
    _kernels()[0](buf, _KEY, starts, ends, counts)
    return starts, ends, counts


def first_differing(buf: NDArray[np.uint8], starts: NDArray[np.int64], ends: NDArray[np.int64],
                    ref: NDArray[np.int64]) -> int:
    """The first row whose logger bytes differ from those of its reference row ``ref[row]`` (its query's first
    line), or -1 when every row's equal its reference's."""
    return int(_kernels()[1](buf, starts, ends, ref))


def null_loggers(buf: NDArray[np.uint8], starts: NDArray[np.int64], ends: NDArray[np.int64]) -> NDArray[np.uint8]:
    """A copy of ``buf`` with every span (ordered, each at least four bytes) replaced by ``null``: the lines keep
    their order and line ends (a span holds none), and shrink to what pyarrow must read (a line longer than its
    block size, a logger of some 30,000 scores, would make it refuse the log)."""
    out = np.empty(buf.size - int((ends - starts).sum()) + 4 * starts.size, dtype=np.uint8)
    _kernels()[2](buf, starts, ends, out)
    return out
