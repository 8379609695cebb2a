"""What determines a command's numbers, fingerprinted: the SHA-256 of every input file's bytes (as stored: a gzipped
log's compressed bytes) and a short fingerprint of those digests with the options in force and the package version,
which ``onlineeval estimate`` and ``onlineeval evaluate`` print (their JSON lists every digest), so two outputs with
the same fingerprint come from the same files and settings."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from onlineeval.errors import InputError

__all__ = ["InputDigests", "RecordsDigest", "click_log_entry", "estimate_settings", "evaluate_settings", "file_sha256",
           "fingerprint", "input_entry", "inputs_line", "memory_entry", "table_entry"]


def file_sha256(path: str | PathLike[str]) -> str:
    """The hex SHA-256 of the file's bytes, read in 1 MB blocks; an unreadable file is an
    :class:`~onlineeval.errors.InputError` naming it."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise InputError(f"cannot read input file: {exc.strerror or exc}", str(path)) from None
    return h.hexdigest()


def input_entry(path: str | PathLike[str]) -> dict[str, Any]:
    """``{"path", "bytes", "sha256"}`` of one input file; of a directory (a Parquet dataset, as Spark writes one)
    ``{"path", "files", "bytes", "sha256"}``: the SHA-256 of each file's path relative to it and SHA-256, one line
    per file in sorted order, over every file below it (so a byte of any file, a file added, removed or renamed
    changes it)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file())
        h = hashlib.sha256()
        for f in files:
            h.update(f"{f.relative_to(p).as_posix()}\0{file_sha256(f)}\n".encode())
        return {"path": str(p), "files": len(files), "bytes": sum(f.stat().st_size for f in files),
                "sha256": h.hexdigest()}
    digest = file_sha256(p)
    return {"path": str(p), "bytes": p.stat().st_size, "sha256": digest}


def _canonical(x: Any) -> Any:
    """JSON's ``default`` for :func:`memory_entry`: a DataFrame as its column names and columns' values (its index
    left out: the commands read rows, not labels), a Series or numpy value as its values, another mapping as a
    dict; anything else is a ``TypeError`` (no canonical form: no digest)."""
    import numpy as np
    import pandas as pd

    if isinstance(x, pd.DataFrame):
        return {"columns": [str(c) for c in x.columns], "data": [x[c].tolist() for c in x.columns]}
    if isinstance(x, (pd.Series, pd.Index, np.ndarray, np.generic)):
        return x.tolist()
    if isinstance(x, Mapping):
        return {str(k): v for k, v in x.items()}
    raise TypeError(type(x).__name__)


#: the canonical JSON text of a value (:func:`_canonical` for DataFrames, numpy values and mappings; floats written
#: exactly; compact): what the in-memory digests hash. ``TypeError`` / ``ValueError`` for a value without one.
canonical_json = json.JSONEncoder(default=_canonical, allow_nan=True, separators=(",", ":")).encode


def memory_entry(obj: Any) -> dict[str, Any] | None:
    """``{"in_memory", "sha256"}`` of an input given in memory to the Python API (a DataFrame, a dict of dicts,
    lists of ids): a DataFrame's the SHA-256 of the Arrow table of its columns (:func:`table_entry`, its index left
    out: the commands read rows, not labels; where pyarrow cannot convert a column, of its columns' canonical JSON
    in blocks of rows), anything else's of its canonical JSON (keys and rows in the order given, floats written
    exactly, :func:`_canonical`), so the same content gives the same digest; ``None`` for an object without such a
    form. It is not the digest of any file holding the same content (that one is of the file's bytes)."""
    import pandas as pd

    h = hashlib.sha256()
    encode = canonical_json
    try:
        if isinstance(obj, pd.DataFrame):
            import pyarrow as pa

            try:
                table = pa.Table.from_pandas(obj, preserve_index=False)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                pass
            else:
                return {"in_memory": "DataFrame", "sha256": table_entry(table, "DataFrame")["sha256"]}
            h.update(encode({"columns": [str(c) for c in obj.columns], "rows": len(obj)}).encode())
            block = 1 << 16
            for c in obj.columns:
                values = obj[c].tolist()
                for at in range(0, len(values), block):
                    h.update(encode(values[at: at + block]).encode("utf-8", "surrogatepass"))
        else:
            h.update(encode(obj).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError):
        return None
    return {"in_memory": type(obj).__name__, "sha256": h.hexdigest()}


def table_entry(table: Any, kind: str) -> dict[str, Any]:
    """``{"in_memory": kind, "records", "sha256"}`` of a pyarrow table (a DataFrame log as
    :func:`onlineeval.io.logged_fast.frame_table` converts it): the SHA-256 of its Arrow IPC stream, one chunk per
    column, the schema's metadata left out, so the same content gives the same digest (with the same pyarrow: another
    version may write other bytes, which changes the fingerprint and never makes two contents agree)."""
    import pyarrow as pa

    table = table.combine_chunks().replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    digest = hashlib.sha256(memoryview(sink.getvalue())).hexdigest()
    return {"in_memory": kind, "records": table.num_rows, "sha256": digest}


def click_log_entry(log: Any) -> dict[str, Any]:
    """``{"in_memory": "sessions", "sessions", "sha256"}`` of a :class:`~clickmodels.logs.ClickLog` as read: its
    sessions' ids, queries, shown documents, clicks and click order, and the vocabularies the codes index."""
    import numpy as np

    h = hashlib.sha256()
    for name in ("query", "docs", "clicks", "click_order"):
        arr = np.ascontiguousarray(getattr(log, name))
        h.update(f"{name}\0{arr.dtype.str}\0{arr.shape}\0".encode())
        h.update(memoryview(arr).cast("B"))
    for name in ("session_ids", "query_vocab", "doc_vocab"):
        h.update(f"{name}\0".encode())
        text = canonical_json([str(v) for v in np.asarray(getattr(log, name)).tolist()])
        h.update(text.encode("utf-8", "surrogatepass"))
    return {"in_memory": "sessions", "sessions": int(log.n_sessions), "sha256": h.hexdigest()}


class RecordsDigest:
    """The SHA-256 of records (a log's impressions as the JSON reader's dicts) as they pass through
    :meth:`through`, encoded as JSON lists of :data:`BLOCK` records (floats written exactly): the digest of a
    DataFrame log as the Python API reads it (only what the reader takes from each row, so a column it ignores
    does not move it). :meth:`entry` is ``None`` when a record has no JSON form."""

    BLOCK = 4096

    def __init__(self) -> None:
        self._h: Any = hashlib.sha256()
        self._block: list[Any] = []
        self._encode = canonical_json
        self.count = 0

    def _flush(self) -> None:
        if self._h is not None and self._block:
            try:
                self._h.update(self._encode(self._block).encode("utf-8", "surrogatepass"))
            except (TypeError, ValueError):
                self._h = None
        self.count += len(self._block)
        self._block.clear()

    def through(self, records: Any) -> Any:
        """``records``, each passed on as it comes and hashed."""
        for rec in records:
            self._block.append(rec)
            if len(self._block) >= self.BLOCK:
                self._flush()
            yield rec
        self._flush()

    def entry(self, kind: str) -> dict[str, Any] | None:
        """``{"in_memory": kind, "records", "sha256"}`` of the records seen, or ``None``."""
        if self._h is None:
            return None
        return {"in_memory": kind, "records": self.count, "sha256": self._h.hexdigest()}


def fingerprint(inputs: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    """16 hex digits of the SHA-256 of the inputs' digests (their paths left out: a moved file keeps its
    fingerprint), the options and the package version, as canonical JSON."""
    from onlineeval import __version__

    def digests(x: Any) -> Any:
        if isinstance(x, Mapping):
            if "sha256" in x:
                return x["sha256"]
            return {str(k): digests(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [digests(v) for v in x]
        return x

    body = {"inputs": digests(inputs), "options": options, "version": __version__}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


class InputDigests:
    """:func:`input_entry` of each file, computed in a background thread from the moment this is made, while the
    command reads and computes (hashlib releases the GIL while it hashes, the reads while they wait: on a machine
    with a core to spare the digests cost no wall time; evaluate's 400 MB run at 100k queries x 100 documents takes
    about 0.25 s to hash). :meth:`entries` waits for them, raising the first file's error."""

    def __init__(self, paths: Mapping[str, str | PathLike[str]]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="onlineeval-digest")
        self._futures = {key: self._pool.submit(input_entry, path) for key, path in paths.items()}
        self._pool.shutdown(wait=False)

    def entries(self) -> dict[str, dict[str, Any]]:
        """``{key: {"path", "bytes", "sha256"}}`` in the order the paths were given."""
        return {key: f.result() for key, f in self._futures.items()}


def estimate_settings(metric: str, estimators: Any, options: Mapping[str, Mapping[str, Any]], alpha: float,
                      bootstrap: int, seed: int, ties: str, allow_unseen: bool) -> dict[str, Any]:
    """The options that determine ``estimate``'s numbers, as its fingerprint hashes them (the CLI and the Python
    API build them here, so the same files and options give the same fingerprint); ``estimators``: the estimator
    objects in order."""
    return {"metric": metric, "estimators": [[e.name, dict(options.get(e.name, {}))] for e in estimators],
            "alpha": alpha, "bootstrap": bootstrap, "seed": seed, "ties": ties, "allow_unseen": allow_unseen}


def evaluate_settings(metrics: Any, conventions: Mapping[str, Any], features: Any, baseline: str, seed: int,
                      permutations: int, bootstrap: int, alpha: float) -> dict[str, Any]:
    """The options that determine ``evaluate``'s numbers, as its fingerprint hashes them (CLI and Python API)."""
    return {"metrics": [str(m) for m in metrics], "conventions": dict(conventions), "features": list(features),
            "baseline": baseline, "seed": seed, "permutations": permutations, "bootstrap": bootstrap, "alpha": alpha}


def inputs_line(files: Any) -> str:
    """``inputs (SHA-256, first 12 hex digits; --format json: in full): label abc..., ...`` of ``(label, entry)``
    pairs, as ``estimate`` and ``evaluate`` print them."""
    return ("inputs (SHA-256, first 12 hex digits; --format json: in full): "
            + ", ".join(f"{label} {e['sha256'][:12]}" for label, e in files))
