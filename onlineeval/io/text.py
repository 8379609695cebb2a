"""Line-oriented reading of text inputs, shared by the readers: strict UTF-8 and no NUL
bytes, each refused with the file and line (a NUL would silently cut or merge an id)."""

from __future__ import annotations

from collections.abc import Iterator
from os import PathLike
from pathlib import Path

from onlineeval.errors import InputError

__all__ = ["text_lines"]


def text_lines(path: str | PathLike[str], data: bytes | None = None) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for every line of ``path`` (or of ``data``, read from it).

    A byte-order mark on the first line is dropped; a trailing ``\\r`` is kept (callers
    strip). Raises :class:`InputError` naming the line for non-UTF-8 bytes or a NUL byte.
    """
    name = str(path)
    if data is None:
        data = Path(path).read_bytes()
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
