"""Line-oriented reading of text inputs, shared by the readers: strict UTF-8 and no NUL
bytes, each refused with the file and line (a NUL would silently cut or merge an id)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from os import PathLike
from pathlib import Path

from onlineeval.errors import InputError

__all__ = ["check_not_compressed", "plain_float", "plain_int", "plain_whole", "text_lines"]

#: a number as C's strtod / trec_eval read it in decimal: ASCII digits, optional sign, point and exponent, and the
#: words inf, infinity and nan (the callers refuse them as not finite). Python's float() also takes 1_0 (as 10) and
#: digits of other scripts (fullwidth "\uff11" as 1), which trec_eval reads otherwise (atof: 1 and 0)
_FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?"
                    r"|[nN][aA][nN])")
_INT = re.compile(r"[+-]?[0-9]+")


def plain_float(text: str) -> float | None:
    """``float(text)`` when ``text`` (surrounding whitespace aside) is a plain decimal number (or inf / nan), else
    ``None``."""
    text = text.strip()
    return float(text) if _FLOAT.fullmatch(text) else None


def plain_int(text: str) -> int | None:
    """``int(text)`` when ``text`` is ASCII digits with an optional sign, else ``None``."""
    return int(text) if _INT.fullmatch(text) else None


def plain_whole(text: str) -> int | None:
    """A whole number's text as a C reader's integer column reads it (a qrels grade, a LETOR label): ASCII digits
    with an optional sign, or a plain decimal number whose float64 value is whole (``1.0``, ``1e2``); ``None`` for
    anything else (``1.5``, ``nan``, ``1_0``, digits of other scripts)."""
    whole = plain_int(text)
    if whole is not None:
        return whole
    value = plain_float(text)
    if value is not None and math.isfinite(value) and value == math.floor(value):
        return int(value)
    return None

#: magic bytes of compressed files people pass by mistake (runs from ir_datasets and Anserini are often .gz)
_COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip -k"), (b"BZh", "bzip2", "bunzip2 -k"),
               (b"\xfd7zXZ\x00", "xz", "unxz -k"), (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"),
               (b"PK\x03\x04", "zip", "unzip"))


def check_not_compressed(data: bytes, name: str) -> None:
    """Raise :class:`InputError` when ``data`` starts with the magic bytes of a compressed file (gzip, bzip2, xz,
    zstd, zip): the readers take plain text, and the file would otherwise fail as 'not UTF-8' on line 1."""
    for magic, kind, command in _COMPRESSED:
        if data.startswith(magic):
            shown = " ".join(f"{b:02x}" for b in magic)
            raise InputError(
                f"{kind}-compressed (it starts with the {kind} magic bytes {shown}); onlineeval reads plain text: "
                f"decompress it first ({command} {name})", name, None,
            )


def text_lines(path: str | PathLike[str], data: bytes | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every line of ``path`` (or of ``data``, read from it).

    A byte-order mark on the first line is dropped; a trailing ``\\r`` is kept (callers
    strip). Raises :class:`InputError` naming the line for non-UTF-8 bytes or a NUL byte.
    """
    name = str(path)
    if data is None:
        data = Path(path).read_bytes()
    check_not_compressed(data, name)
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"not UTF-8 text (byte 0x{raw[exc.start]:02x}); is this a text file saved as UTF-8?", name, number
            ) from None
        if "\x00" in line:
            raise InputError("the line holds a NUL byte; ids and numbers must be plain text", name, number)
        yield number, (line.removeprefix("\ufeff") if number == 1 else line)
