"""A Parquet file, or a directory of them (a dataset, as Spark writes one), read as one table, and where each of its
rows came from, so that an error names the file and the row in it (the readers of :mod:`onlineeval.io.logged_parquet`
and :mod:`clickmodels.logs_parquet` number the table's rows across the dataset's files)."""

from __future__ import annotations

import bisect
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onlineeval.errors import InputError

__all__ = ["ParquetRows", "read_parquet_table"]

_ROW = re.compile(r"\brow (\d+)\b")


@dataclass(frozen=True)
class ParquetRows:
    """The files a table was read from, in the order their rows stand in it.

    ``path`` is what the user gave (a file or a directory); ``files`` each file's name (for a directory: the
    directory joined with the file's path below it, as pyarrow lists them) and ``starts`` the table's 0-based row at
    which each file's rows begin."""

    path: str
    files: tuple[str, ...]
    starts: tuple[int, ...]

    def locate(self, row: int) -> tuple[str, int]:
        """The file holding the table's ``row`` (1-based) and the row's 1-based number in that file."""
        i = bisect.bisect_right(self.starts, row - 1) - 1
        return self.files[i], row - self.starts[i]

    def _relative(self, file: str) -> str:
        return os.path.relpath(file, self.path) if file != self.path else os.path.basename(file)

    def cite(self, message: str, file: str | None) -> str:
        """``message`` with the table's rows it names (``row 12``) named in their files: ``row 3`` where the row is
        in ``file``, ``row 3 of part-00001.parquet`` (its path below the directory) where it is in another."""
        if len(self.files) == 1:
            return message

        def one(m: re.Match[str]) -> str:
            where, local = self.locate(int(m.group(1)))
            return f"row {local}" if where == file else f"row {local} of {self._relative(where)}"
        return _ROW.sub(one, message)

    def error(self, exc: InputError, rows_message: str) -> InputError:
        """``exc`` (whose ``line`` is the table's row) naming its file and, as ``row N: ...``, its row in that file;
        ``rows_message`` is its message with the other rows it names written as rows (``row 4``, not ``line 4``)."""
        if exc.line is None:
            return InputError(self.cite(rows_message, None), self.path)
        file, local = self.locate(exc.line)
        return InputError(f"row {local}: {self.cite(rows_message, file)}", file)


def _unique_names(schema: Any, path: str) -> None:
    """Refuse a Parquet schema naming a column twice (Parquet allows it; pyarrow then fails on the name with a
    dump of the schema), naming the column and the file."""
    names = list(schema.names)
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise InputError(f"the column {twice!r} appears {names.count(twice)} times in the file's schema "
                         f"({', '.join(names)}); keep one", path)


def read_parquet_table(path: str) -> tuple[Any, ParquetRows]:
    """The table of a Parquet file or of a directory of them (pyarrow's dataset: files in sorted order, names
    starting with ``_`` or ``.`` skipped, ``key=value`` folders' keys as columns; files of different columns or
    struct fields read with the union of their schemas), and its rows' files. Raises
    :class:`~onlineeval.errors.InputError` (naming ``path``) where pyarrow cannot read it (e.g. a column of other
    types in two files)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if not os.path.isdir(path):
            _unique_names(pq.read_schema(path), path)
            table = pq.read_table(path)
            return table, ParquetRows(path, (path,), (0,))
        dataset = pq.ParquetDataset(path)
        schemas = [fragment.physical_schema for fragment in dataset.fragments]
        if any(not schema.equals(schemas[0], check_metadata=False) for schema in schemas[1:]):
            # pyarrow reads every file with the first file's schema: a column only later files have is dropped, and
            # a struct's fields only they have (a logger's scores of other documents) are silently nulled. Read with
            # the union of the files' schemas instead (the partition keys' dictionaries as their values' type).
            unified = pa.unify_schemas([dataset.schema, *schemas], promote_options="permissive")
            unified = pa.schema([pa.field(f.name, f.type.value_type) if pa.types.is_dictionary(f.type) else f
                                 for f in unified])
            dataset = pq.ParquetDataset(path, schema=unified)
        table = dataset.read()
        counts = [fragment.count_rows() for fragment in dataset.fragments]
    except (pa.ArrowException, OSError) as exc:
        if os.path.isdir(path):  # a file naming a column twice: pyarrow's "Can't unify schema with duplicate ..."
            for file in sorted(Path(path).rglob("*.parquet")):
                try:
                    schema = pq.read_schema(file)
                except (pa.ArrowException, OSError):
                    continue
                _unique_names(schema, str(file))
        raise InputError(f"cannot read it as Parquet: {exc}", path) from None
    files = tuple(str(f) for f in dataset.files)
    if len(files) != len(counts) or sum(counts) != table.num_rows:  # (not seen: then rows are numbered across files)
        return table, ParquetRows(path, (path,), (0,))
    starts = tuple(itertools.accumulate(counts[:-1], initial=0))
    return table, ParquetRows(path, files, starts)
