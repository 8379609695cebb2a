"""TREC qrels and run files.

qrels: ``query iteration doc grade`` (4 whitespace-separated columns; grades are
integers and may be negative: trec_eval treats a negative grade as "pooled but not
judged"). Runs: ``query Q0 doc rank score tag`` (6 columns; text after the sixth column is
ignored, as trec_eval does); the rank column is ignored, scores decide. Lines whose first non-blank character is
``#`` are comments (a ``#``
inside a document id is part of the id); blank lines are skipped.

Malformed input raises :class:`~onlineeval.errors.InputError` naming the file, the line
and the problem. Well-formed files are parsed by pandas' C reader; when that reader
reports any problem the file is re-scanned line by line to locate it exactly.
"""

from __future__ import annotations

import codecs
import io
import math
import warnings
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from onlineeval.errors import InputError
from onlineeval.io.text import check_not_compressed, plain_float, plain_whole, text_lines

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["qrels_from_frame", "read_qrels", "read_run", "run_from_frame", "system_names"]

QRELS_COLUMNS = ("query", "doc", "grade")
RUN_COLUMNS = ("query", "doc", "score")


def _obj(values: object) -> pd.Series:
    """A string column kept as an object array (no per-value conversion)."""
    import pandas as pd

    return pd.Series(np.asarray(values, dtype=object), dtype=object, copy=False)


def _has_duplicate_pairs(queries: np.ndarray, docs: np.ndarray) -> bool:
    """Whether some (query, doc) pair occurs twice (hashing two integer codes)."""
    import pandas as pd

    qc, _ = pd.factorize(queries)
    dc, du = pd.factorize(docs)
    key = qc.astype(np.int64) * max(len(du), 1) + dc
    return not pd.Index(key).is_unique


#: grades are stored as int64; a grade beyond +-2**31 is a broken file, not a judgment
_GRADE_MIN, _GRADE_MAX = -(2**31), 2**31 - 1


def _read_bytes(path: str | PathLike[str]) -> tuple[str, bytes]:
    p = Path(path)
    data = p.read_bytes()
    if not data or data.isspace():
        raise InputError("the file is empty (no data lines)", str(p), None)
    check_not_compressed(data, str(p))
    return str(p), data


def _strip_comments(data: bytes) -> bytes:
    if not (data.lstrip().startswith(b"#") or b"#" in data and _has_comment_line(data)):
        return data
    lines = data.split(b"\n")
    return b"\n".join(line for line in lines if not line.lstrip().startswith(b"#"))


def _has_comment_line(data: bytes) -> bool:
    return any(line.lstrip().startswith(b"#") for line in data.split(b"\n") if b"#" in line)


def _fast_table(
    data: bytes, ncols: int, dtypes: dict[int, object], usecols: list[int] | None = None
) -> pd.DataFrame | None:
    """Parse with the C reader; ``None`` on any irregularity (then scan line by line)."""
    import pandas as pd

    body = _strip_comments(data)
    if not body or body.isspace():
        return None
    try:
        with warnings.catch_warnings():
            # an integer column's 1e999 or 9.3e18 is cast from a float with a RuntimeWarning; the value it gives
            # (INT64_MIN) is outside the grades' range, so the caller sends the file to the line scan, which names it
            warnings.simplefilter("ignore", RuntimeWarning)
            df = pd.read_csv(
                io.BytesIO(body),
                sep=r"\s+",
                header=None,
                dtype=dtypes,  # type: ignore[arg-type]
                engine="c",
                na_filter=False,
                skip_blank_lines=True,
                usecols=usecols,
            )
    except Exception:  # noqa: BLE001 - any irregularity (e.g. pandas' KeyError on a short first line):
        return None  # the line scan then names the file and line
    if list(df.columns) != (list(range(ncols)) if usecols is None else list(usecols)):
        return None  # fewer columns than expected (e.g. a short first line)
    return df


def _data_lines(path: str, data: bytes):
    """``(line number, fields)`` of the data lines (strict UTF-8, no NUL: :func:`text_lines`)."""
    for number, line in text_lines(path, data):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        yield number, stripped.split()


def _scan_qrels(path: str, data: bytes) -> None:
    seen: set[tuple[str, str]] = set()
    count = 0
    for number, fields in _data_lines(path, data):
        count += 1
        if len(fields) != 4:
            raise InputError(
                f"expected 4 columns (query iteration doc grade), found {len(fields)}", path, number
            )
        grade = plain_whole(fields[3])
        if grade is None:
            raise InputError(f"grade must be an integer, got {fields[3]!r}", path, number)
        if not _GRADE_MIN <= grade <= _GRADE_MAX:
            raise InputError(f"grade {fields[3]} is out of range [{_GRADE_MIN}, {_GRADE_MAX}]", path, number)
        key = (fields[0], fields[2])
        if key in seen:
            raise InputError(f"document {fields[2]!r} is judged twice for query {fields[0]!r}", path, number)
        seen.add(key)
    if count == 0:
        raise InputError("the file has no data lines (only comments or blank lines)", path, None)


def locate_run_problem(path: str) -> None:
    """Re-scan a run file and raise the located :class:`InputError` for its first problem."""
    _scan_run(path, Path(path).read_bytes())


def locate_qrels_problem(path: str) -> None:
    """Re-scan a qrels file and raise the located :class:`InputError` for its first problem."""
    _scan_qrels(path, Path(path).read_bytes())


def _scored_rows(path: str, data: bytes, columns: int, exact: bool, layout: str, doc: int,
                 score: int) -> tuple[list[tuple[str, str, float]], list[str]]:
    """The ``(query, doc, score)`` rows of a run or score file's data lines (document in column ``doc``, score in
    ``score``; ``columns`` of them, exactly or at least) and the first line's fields; a located
    :class:`InputError` for a short line, a non-numeric or non-finite score, a document listed twice for a
    query, or no data line."""
    seen: set[tuple[str, str]] = set()
    rows: list[tuple[str, str, float]] = []
    first: list[str] = []
    for number, fields in _data_lines(path, data):
        if len(fields) < columns or exact and len(fields) != columns:
            raise InputError(f"expected {columns} columns ({layout}), found {len(fields)}", path, number)
        value = plain_float(fields[score])
        if value is None:
            raise InputError(f"score must be a number, got {fields[score]!r}", path, number)
        if not math.isfinite(value):
            raise InputError(f"score must be finite, got {fields[score]!r}", path, number)
        key = (fields[0], fields[doc])
        if key in seen:
            raise InputError(f"document {fields[doc]!r} appears twice for query {fields[0]!r}", path, number)
        seen.add(key)
        rows.append((fields[0], fields[doc], value))
        first = first or fields
    if not rows:
        raise InputError("the file has no data lines (only comments or blank lines)", path, None)
    return rows, first


def _scan_run(path: str, data: bytes) -> pd.DataFrame:
    import pandas as pd

    rows, first = _scored_rows(path, data, 6, False, "query Q0 doc rank score tag", 2, 4)
    out = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    out.attrs["run_id"] = first[5]
    return out


def read_qrels(path: str | PathLike[str], check_unique: bool = True) -> pd.DataFrame:
    """Read a TREC qrels file.

    ``check_unique=False`` skips the check for a document judged twice for one query
    (:func:`onlineeval.metrics.evaluate.evaluate_run` repeats it on its input).

    Returns
    -------
    pandas.DataFrame
        Columns ``query`` (str), ``doc`` (str), ``grade`` (int64), in file order.

    Raises
    ------
    onlineeval.errors.InputError
        Empty file, a line without 4 columns, a non-integer grade, or a document judged
        twice for one query; the message names the file and line.
    """
    import pandas as pd

    name, data = _read_bytes(path)
    # a short line leaves the grade empty and fails the integer parse, a long one fails
    # the C reader: both go to the line scan, which names the line
    df = None if b"\x00" in data else _fast_table(data, 4, {0: object, 1: object, 2: object, 3: np.int64})
    if df is not None and len(df) and not ((df[3] >= _GRADE_MIN) & (df[3] <= _GRADE_MAX)).all():
        df = None
    if df is None:
        _scan_qrels(name, data)
        raise InputError("could not parse the file", name, None)  # pragma: no cover - scan raises
    grades = df[3].to_numpy(dtype=np.int64)
    out = pd.DataFrame({"query": _obj(df[0]), "doc": _obj(df[2]), "grade": grades})
    if check_unique and _has_duplicate_pairs(out["query"].to_numpy(), out["doc"].to_numpy()):
        _scan_qrels(name, data)
    out.attrs["path"] = name
    return out


def read_run(path: str | PathLike[str], check_unique: bool = True) -> pd.DataFrame:
    """Read a TREC run file (6 columns; the rank column is ignored, scores decide).

    ``check_unique=False`` skips the check for a document listed twice for one query;
    :func:`onlineeval.metrics.evaluate.evaluate_run` repeats that check on its input
    anyway (and then names the file and line), so a pipeline need not pay for it twice.

    Returns
    -------
    pandas.DataFrame
        Columns ``query`` (str), ``doc`` (str), ``score`` (float64), in file order (which
        the ``input_order`` tie rule keeps). ``attrs["run_id"]`` holds the tag of the first
        line and ``attrs["path"]`` the file.

    Raises
    ------
    onlineeval.errors.InputError
        Empty file, a line with fewer than 6 columns, a non-numeric or non-finite score, or a
        document listed twice for one query; the message names the file and line.
    """
    name, data = _read_bytes(path)
    return _run_frame(name, data, check_unique)


def _run_frame(name: str, data: bytes, check_unique: bool) -> pd.DataFrame:
    """:func:`read_run` of the file's bytes."""
    import pandas as pd

    # columns 2 and 4 (Q0, rank) are not needed; a line with too many fields still fails
    # the C reader, and one with too few leaves column 6 empty
    df = None if b"\x00" in data else _fast_table(
        data, 6, {0: object, 2: object, 4: np.float64, 5: "category"}, usecols=[0, 2, 4, 5]
    )
    # a short line leaves its last fields empty: let the line scan report it
    if df is None or not np.isfinite(df[4].to_numpy()).all() or "" in df[5].cat.categories:
        # irregular file: the line scan either raises a located error or parses it (a
        # line may carry text after the sixth column, which trec_eval ignores too)
        out = _scan_run(name, data)
    else:
        queries, docs = df[0].to_numpy(dtype=object), df[2].to_numpy(dtype=object)
        out = pd.DataFrame({"query": _obj(queries), "doc": _obj(docs), "score": df[4].to_numpy()})
        out.attrs["run_id"] = str(df[5].iloc[0])  # category column: cheap
        if check_unique and _has_duplicate_pairs(queries, docs):
            _scan_run(name, data)
    out.attrs["path"] = name
    return out


def _scan_scores(path: str, data: bytes) -> pd.DataFrame:
    import pandas as pd

    rows, _ = _scored_rows(path, data, 3, True, "query doc score, as on the first line", 1, 2)
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def read_doc_scores(path: str | PathLike[str]) -> pd.DataFrame:
    """Read a score file: one ``query doc score`` per line (whitespace-separated; ``#`` comment lines and blank
    lines skipped), e.g. a ranker's scores of every candidate. The same frame as :func:`read_run` (columns
    ``query``, ``doc``, ``score`` in file order; ``attrs["run_id"]`` the file's stem); a line with another number
    of columns, a non-numeric or non-finite score, or a document scored twice for one query is an
    :class:`InputError` naming the file and line."""
    name, data = _read_bytes(path)
    return _doc_scores_frame(name, data)


def _doc_scores_frame(name: str, data: bytes) -> pd.DataFrame:
    """:func:`read_doc_scores` of the file's bytes."""
    import pandas as pd

    df = None if b"\x00" in data else _fast_table(data, 3, {0: object, 1: object, 2: np.float64})
    if df is None or not np.isfinite(df[2].to_numpy()).all():
        out = _scan_scores(name, data)
    else:
        queries, docs = df[0].to_numpy(dtype=object), df[1].to_numpy(dtype=object)
        out = pd.DataFrame({"query": _obj(queries), "doc": _obj(docs), "score": df[2].to_numpy()})
        if _has_duplicate_pairs(queries, docs):
            _scan_scores(name, data)
    out.attrs["run_id"] = Path(name).stem
    out.attrs["path"] = name
    return out


def _first_data_fields(data: bytes) -> tuple[int, list[bytes]] | None:
    """``(line number, fields)`` of the first line that is neither blank nor a ``#`` comment (a leading byte-order
    mark dropped), scanning only up to it; ``None`` when there is none."""
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    number = 1
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        fields = data[start:end].split()
        if fields and not fields[0].startswith(b"#"):
            return number, fields
        start, number = end + 1, number + 1
    return None


def read_ranking(path: str | PathLike[str], check_unique: bool = True) -> pd.DataFrame:
    """A ranker's scores from a TREC run (6 columns: query Q0 doc rank score tag; ``check_unique`` as
    :func:`read_run`'s) or a score file (3 columns: query doc score, :func:`read_doc_scores`), told apart by the first
    data line's number of columns. The file is read once, and only its first data line is looked at before the
    reader of its format parses it (a run of millions of lines is not split twice)."""
    name, data = _read_bytes(path)
    first = _first_data_fields(data)
    if first is None:
        raise InputError("the file has no data lines (only comments or blank lines)", name, None)
    number, fields = first
    if len(fields) == 3:
        return _doc_scores_frame(name, data)
    if len(fields) >= 6:
        return _run_frame(name, data, check_unique)
    raise InputError(f"expected a TREC run (6 columns: query Q0 doc rank score tag) or a score file (3 columns: "
                     f"query doc score), found {len(fields)} columns", name, number)


def _check_frame(df: pd.DataFrame, columns: tuple[str, str, str], what: str) -> pd.DataFrame:
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise InputError(f"{what} must be a pandas DataFrame with columns {', '.join(columns)}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(f"{what} lacks column(s) {', '.join(missing)}; needs {', '.join(columns)}")
    if len(df) == 0:
        raise InputError(f"{what} has no rows")
    out = pd.DataFrame({c: df[c].to_numpy() for c in columns})
    for c in ("query", "doc"):
        # a missing id (None, NaN, pd.NA) stayed missing through astype(str) under pandas 3 and was grouped with
        # another query (a qrels row with a NaN query lowered query 2's nDCG@5 from 1 to 0.83)
        na = pd.isna(out[c]).to_numpy()
        if na.any():
            row = int(np.argmax(na))
            raise InputError(f"the {c} id is missing (None, NaN or NA)", None, row + 1)
    out["query"] = out["query"].astype(str)
    out["doc"] = out["doc"].astype(str)
    dup = out.duplicated(["query", "doc"]).to_numpy()
    if dup.any():
        row = int(np.argmax(dup))
        raise InputError(
            f"document {_plain(out['doc'].iloc[row])!r} appears twice for query {_plain(out['query'].iloc[row])!r}",
            None,
            row + 1,
        )
    return out


def _plain(value: object) -> object:
    """A frame cell as Python shows it in a message: a numpy scalar as its Python value (``nan``, ``1.5``,
    ``'d1'``), never numpy 2's repr (``np.float64(nan)``)."""
    return value.item() if isinstance(value, np.generic) else value


def qrels_from_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Validate a qrels DataFrame (columns query, doc, grade; integer grades)."""
    import pandas as pd

    out = _check_frame(df, QRELS_COLUMNS, "qrels")
    g = pd.to_numeric(out["grade"], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(g) | (g != np.round(g))
    if bad.any():
        row = int(np.argmax(bad))
        raise InputError(f"grade must be an integer, got {_plain(df['grade'].iloc[row])!r}", None, row + 1)
    out["grade"] = g.astype(np.int64)
    return out


def run_from_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Validate a run DataFrame (columns query, doc, score; finite numeric scores)."""
    import pandas as pd

    out = _check_frame(df, RUN_COLUMNS, "run")
    s = pd.to_numeric(out["score"], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(s)
    if bad.any():
        row = int(np.argmax(bad))
        raise InputError(f"score must be a finite number, got {_plain(df['score'].iloc[row])!r}", None, row + 1)
    out["score"] = s
    return out


def system_names(paths: list[Path]) -> list[str]:
    """A short unique name per run file: the stem (``bm25`` for ``runs/bm25.txt``), else
    the file name (``results.test``, ``results.trunc``), else the shortest distinguishing
    tail of the path (``a/run.txt``, ``b/run.txt``): the names ``onlineeval evaluate`` and
    :func:`onlineeval.evaluate` give run files. Two paths of one file are a :class:`~onlineeval.errors.ConfigError`."""
    from onlineeval.errors import ConfigError

    resolved = [p.resolve() for p in paths]
    if len(set(resolved)) != len(resolved):
        raise ConfigError(("run",), "the same run file is given twice")
    for candidate in ([p.stem for p in paths], [p.name for p in paths]):
        if len(set(candidate)) == len(candidate):
            return candidate
    depth = 2
    while True:
        names = ["/".join(r.parts[-depth:]) for r in resolved]
        if len(set(names)) == len(names):
            return names
        depth += 1
