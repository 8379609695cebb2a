r"""Logged impressions (JSON lines) for off-policy estimation, and targets in their id space.

One JSON object per line, one impression each (the file plain or gzipped)::

    {"query": "q7", "user": "u3", "user_type": 0, "shown": ["d3", "d9", "d1"], "clicks": ["d9"],
     "propensities": {"list": 0.0167, "prefix": [0.2, 0.05, 0.0167], "item": [0.2, 0.2, 0.2]}}

or, instead of ``propensities``, the logging policy and its scores of the candidates::

    {"query": "q7", "shown": ["d3", "d9", "d1"], "clicks": [0, 1, 0],
     "logger": {"policy": "plackett_luce", "temperature": 1.0, "scores": {"d3": 2.1, "d9": 1.4, ...}}}

Fields
------
``query`` (string or integer, required)
    The query id (matched against the query ids of TREC run files).
``shown`` (list of strings, required)
    Document ids in rank order, no repeats.
``clicks`` (required)
    The clicked document ids (a subset of ``shown``, in any order, each listed once) or a
    0/1 list aligned with ``shown``.
``user`` (string or integer, optional)
    The cluster of the intervals (the randomisation unit); an impression without one is
    a cluster of its own.
``user_type`` (integer >= 0, optional)
    The user's behaviour type (adaptive estimators); on every line or on none.
``propensities`` (object)
    Logging probabilities of what was shown, each form optional but the same forms on
    every line: ``list`` :math:`\mu(\mathbf s \mid q)` of the whole list, ``prefix``
    :math:`\mu(s_{0..j} \mid q)` of its top ``j+1`` slots and ``item``
    :math:`\mu(s_j \text{ at } j \mid q)` of each document at its slot; all in (0, 1],
    ``prefix`` non-increasing, ``list`` equal to the last prefix and ``item[j] >=
    prefix[j]`` with ``item[0] = prefix[0]`` (relative tolerance 1e-6).
``logger`` (object)
    ``policy`` (a name of :func:`simulations.policies.available_policies`), its options
    (e.g. ``temperature``) and ``scores`` of the candidate documents (every shown
    document among them); the propensities are computed with
    :func:`simulations.policies.build_policy` (the caller passes the policies package:
    ``read_logged(path, policies=simulations.policies)``, so this core module does not
    import the simulator). A ``mixture``'s component may carry its own ``scores`` of the
    same candidates (a component randomising around another ranker; without them it uses the
    logger's). One logger per query: every impression of
    a query carries the same spec and scores (give per-impression ``propensities``
    otherwise). The log's :class:`LogPolicy` (these policies in the log's id space) is in
    :mod:`onlineeval.io.logged_policy`.

Other keys are ignored. Every problem raises :class:`~onlineeval.errors.InputError`
naming the file and line.

Ids become integer indexes in a :class:`LoggedLog`: queries in sorted order, documents
*per query*, as in the simulator (:mod:`simulations.policies`): with a logger, a
document's index is its column among the logger's scored candidates of the query (so the
policy's marginals, e.g. the pseudoinverse estimator's pair marginals, line up with the
shown lists); with written propensities, its order of first appearance among the
query's shown documents. :meth:`LoggedLog.target` maps a ranker's lists (e.g. from a TREC
run) into the same space as an :class:`~onlineeval.estimators.DeterministicTarget`,
truncated per query to the length of the log's lists for that query; a document the log
does not know for the query gets a fresh index of its own.
"""

from __future__ import annotations

import gc
import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import InputError
from onlineeval.estimators.base import DeterministicTarget, LoggedData
from onlineeval.io.logged_json import DuplicateKey, LoggerTexts, json_value_error
from onlineeval.io.logged_policy import _NUMBER_TYPES, LogPolicy, _is_number, _logger_policy, _logger_spec

__all__ = ["FORMS", "LogPolicy", "LoggedLog", "TargetMap", "UnseenSlot", "locate_run_lines", "read_logged"]

#: JSON key of each propensity form -> the :class:`LoggedData` field it fills
FORMS: dict[str, str] = {"list": "p_list", "prefix": "p_prefix", "item": "p_item"}
#: relative tolerance of the consistency checks between propensity forms
RTOL = 1e-6


@dataclass(frozen=True)
class UnseenSlot:
    """A target slot whose document the log never shows (or cannot show) for its query."""

    query: str
    rank: int  # 1-based
    doc: str


@dataclass(frozen=True, eq=False)
class TargetMap:
    """A ranker mapped into a log's id space.

    Attributes
    ----------
    target:
        The :class:`DeterministicTarget` (one row per log query; ``-1`` pads short
        lists and queries the ranker does not rank).
    ranked:
        ``(Q,)`` bool: whether the ranker has a list for each log query.
    unseen:
        Target slots (within the log's list length of their query) holding a document
        the log never shows for that query (logger path: that is not a candidate).
    unseen_query:
        ``(Q,)`` bool: queries with at least one unseen slot.
    """

    target: DeterministicTarget
    ranked: NDArray[np.bool_]
    unseen: tuple[UnseenSlot, ...]
    unseen_query: NDArray[np.bool_]

    @property
    def depth(self) -> NDArray[np.int64]:
        """``(Q,)`` how many documents the ranker's list holds for each log query (at most the log's list length of
        the query, ``query_k``; 0 where it does not rank the query): below ``query_k`` the target's page is shorter
        than the log's (empty slots, no reward there)."""
        return (np.asarray(self.target.lists) >= 0).sum(axis=1).astype(np.int64)


@dataclass(frozen=True, eq=False)
class LoggedLog:
    """A read log: the :class:`LoggedData` and its id maps.

    Attributes
    ----------
    data:
        The impressions (query and document indexes as below).
    queries:
        Query id of each query index (sorted).
    docs:
        Per query index, the document id of each of its document indexes: the logger's
        candidates in score-column order, or the shown documents in order of first
        appearance.
    lines:
        ``(n,)`` 1-based line of each impression in the file.
    query_k:
        ``(Q,)`` length of the longest shown list of each query (the depth a target is
        read to).
    forms:
        The propensity forms the log carries (``p_list``, ``p_prefix``, ``p_item``).
    source:
        ``"log"`` (propensities written in the file) or ``"logger:<policy>"``.
    no_user:
        Impressions without a ``user`` (each its own cluster).
    short:
        Impressions shorter than the longest list of their query.
    item_refusal:
        Why the item propensities are withheld (``p_item`` None though the log names its logger) and the
        first line concerned: a Plackett-Luce logger's Monte Carlo item marginal of a shown document was 0.
        Only estimators that read item propensities are refused (:func:`check_needs` raises this).
    """

    data: LoggedData
    queries: tuple[str, ...]
    docs: tuple[tuple[str, ...], ...]
    lines: NDArray[np.int64]
    query_k: NDArray[np.int64]
    forms: tuple[str, ...]
    source: str
    no_user: int
    short: int
    item_refusal: tuple[str, int] | None = None

    @property
    def path(self) -> str | None:
        return self.data.source

    def target(self, lists: Mapping[str, Sequence[str]], name: str) -> TargetMap:
        """Map ``{query id: [doc id, ...]}`` (rank order) into this log's id space.

        Each log query's list is the ranker's top ``query_k[q]`` documents; documents the
        log does not know get fresh indexes (so they never match a shown document) and are
        reported in :attr:`TargetMap.unseen` when they fall in those top slots.
        """
        kmax = self.data.k
        mat = np.full((len(self.queries), kmax), -1, dtype=np.int64)
        ranked = np.zeros(len(self.queries), dtype=bool)
        unseen: list[UnseenSlot] = []
        unseen_query = np.zeros(len(self.queries), dtype=bool)
        for qi, qid in enumerate(self.queries):  # a loop over distinct queries
            docs = lists.get(qid)
            if docs is None:
                continue
            ranked[qi] = True
            known = self.docs[qi]
            index = {d: i for i, d in enumerate(known)}
            extra: dict[str, int] = {}
            for j, d in enumerate(list(docs[: int(self.query_k[qi])])):
                if d in index:
                    mat[qi, j] = index[d]
                else:
                    mat[qi, j] = extra.setdefault(d, len(known) + len(extra))
                    unseen.append(UnseenSlot(qid, j + 1, str(d)))
                    unseen_query[qi] = True
        return TargetMap(DeterministicTarget(mat, name), ranked, tuple(unseen), unseen_query)


# ---------------------------------------------------------------------------- reading
_KEYS_PROP = frozenset(FORMS)


_STR = {str}
_FLAG_TYPES = frozenset((int, bool))
_FLAGS = frozenset((0, 1))
_FORM_ORDER = {frozenset(c): c for r in (1, 2, 3) for c in itertools.combinations(FORMS, r)}


def _number_list(value: Any, what: str, length: int, path: str, line: int) -> list[float]:
    if not isinstance(value, list):
        raise InputError(f"{what} must be a list of {length} numbers, got {type(value).__name__}", path, line)
    if len(value) != length:
        raise InputError(f"{what} has {len(value)} values but shown has {length} documents", path, line)
    if not set(map(type, value)) <= _NUMBER_TYPES:  # finiteness is checked on the whole array
        bad = next(x for x in value if type(x) not in _NUMBER_TYPES)
        raise InputError(f"{what} must hold finite numbers, got {bad!r}", path, line)
    return value


def _id(value: Any, key: str, path: str, line: int) -> str:
    if isinstance(value, str) and value:
        return value
    if type(value) is int:
        return str(value)
    raise InputError(f"{key!r} must be a non-empty string or an integer, got {value!r}", path, line)


def cluster_codes(users: NDArray[Any]) -> NDArray[np.int64]:
    """The cluster code of each impression from its user id (``None``: no user): the users numbered in the sorted
    order of their ids (``0 .. U - 1``), then each impression without a user a cluster of its own, in line order.

    The codes of a user do not depend on the order of the lines, so neither do the bootstrap's resamples of the
    clusters nor the cross-fitting folds of the model-based estimators (fold ``f`` holds the users whose code is
    ``f`` modulo the folds): a log read with its lines shuffled gives the same numbers."""
    import pandas as pd

    none = np.fromiter((u is None for u in users), dtype=bool, count=users.size)
    codes = np.empty(users.size, dtype=np.int64)
    named = users[~none]
    if named.size:
        found, uniq = pd.factorize(named, sort=True)
        codes[~none] = found
    else:
        uniq = ()
    codes[none] = len(uniq) + np.arange(int(none.sum()), dtype=np.int64)
    return codes


@dataclass
class _Rows:
    """Per-line values collected while reading (lists, turned into arrays at the end)."""

    lines: list[int]
    query: list[str]
    user: list[str | None]
    user_type: list[int | None]
    shown: list[list[str]]
    clicks: list[list[bool]]
    p_list: list[float]
    p_prefix: list[list[float]]
    p_item: list[list[float]]
    logger: list[tuple[dict[str, Any], dict[str, float]]]


def _parse_line(obj: Any, rows: _Rows, path: str, line: int, first: dict[str, Any]) -> None:
    if not isinstance(obj, dict):
        raise InputError(f"expected a JSON object (one impression), got {type(obj).__name__}", path, line)
    for key in ("query", "shown", "clicks"):
        if key not in obj:
            raise InputError(f"missing key {key!r} (every impression has query, shown, clicks and "
                             "propensities or logger)", path, line)
    query = _id(obj["query"], "query", path, line)
    shown = obj["shown"]
    if type(shown) is not list or not shown or set(map(type, shown)) != _STR or "" in shown:
        raise InputError(f"'shown' must be a non-empty list of document id strings, got {shown!r}", path, line)
    k = len(shown)
    if len(set(shown)) != k:
        dup = next(d for i, d in enumerate(shown) if d in shown[:i])
        raise InputError(f"document {dup!r} is shown twice", path, line)
    clicks = obj["clicks"]
    if not isinstance(clicks, list):
        raise InputError(f"'clicks' must be a list of clicked document ids or a 0/1 list, got {clicks!r}",
                         path, line)
    ctypes = set(map(type, clicks))
    if ctypes == _STR:
        cset = set(clicks)
        if len(cset) != len(clicks):
            dup = next(c for i, c in enumerate(clicks) if c in clicks[:i])
            raise InputError(f"click on document {dup!r} listed twice (list each clicked document once)", path, line)
        if not cset <= set(shown):
            bad = next(c for c in clicks if c not in shown)
            raise InputError(f"click on document {bad!r}, which is not shown", path, line)
        flags = [d in cset for d in shown]
    elif ctypes <= _FLAG_TYPES and set(clicks) <= _FLAGS:
        if clicks and len(clicks) != k:
            raise InputError(f"'clicks' as a 0/1 list has {len(clicks)} values but shown has {k} documents",
                             path, line)
        flags = [bool(c) for c in clicks] if clicks else [False] * k
    else:
        raise InputError("'clicks' must be clicked document ids (strings) or a 0/1 list aligned with shown, "
                         f"got {clicks!r}", path, line)
    user = obj.get("user")
    user = None if user is None else _id(user, "user", path, line)
    utype = obj.get("user_type")
    if utype is not None and (type(utype) is not int or utype < 0):
        raise InputError(f"'user_type' must be an integer >= 0, got {utype!r}", path, line)
    has_p, has_l = "propensities" in obj, "logger" in obj
    if has_p == has_l:
        raise InputError("give either 'propensities' or 'logger' (the logging policy), "
                         + ("not both (onlineeval validate --propensity-log checks a log carrying both: the recorded "
                            "propensities against the policy's exact ones)" if has_p else "found neither"), path, line)
    if has_p:
        props = obj["propensities"]
        if not isinstance(props, dict) or not props:
            raise InputError("'propensities' must be an object with some of list, prefix, item", path, line)
        unknown = set(props) - _KEYS_PROP
        if unknown:
            raise InputError(f"unknown propensity form {min(unknown)!r}; allowed: list, prefix, item",
                             path, line)
        forms = _FORM_ORDER.get(frozenset(props)) or tuple(f for f in FORMS if f in props)
    else:
        forms = ("logger",)
    signature = (forms, utype is not None)
    if "signature" not in first:
        first.update(signature=signature, line=line)
    elif first["signature"] != signature:
        was_forms, was_type = first["signature"]
        if was_forms != forms:
            def name(f: tuple[str, ...]) -> str:
                return "a logger" if f == ("logger",) else "propensities " + ", ".join(f)
            raise InputError(f"carries {name(forms)} but line {first['line']} carries {name(was_forms)}; "
                             "every line must carry the same", path, line)
        raise InputError(f"'user_type' is {'given' if utype is not None else 'missing'} here but "
                         f"{'given' if was_type else 'missing'} on line {first['line']}; give it on every "
                         "line or on none", path, line)
    if has_p:
        if "list" in props:
            p = props["list"]
            if not _is_number(p):
                raise InputError(f"propensities.list must be a finite number, got {p!r}", path, line)
            rows.p_list.append(float(p))
        if "prefix" in props:
            rows.p_prefix.append(_number_list(props["prefix"], "propensities.prefix", k, path, line))
        if "item" in props:
            rows.p_item.append(_number_list(props["item"], "propensities.item", k, path, line))
    else:
        if first["policies"] is None:
            raise InputError("this log names its logging policy ('logger'); reading it needs the policies "
                             "package: read_logged(path, policies=simulations.policies)", path, line)
        # one logger per query: a line whose logger equals its query's first one keeps that one's objects, so the
        # log holds one scores dict per query, not one per line (review 18: 10^6 lines of 30 scores took 9 GB); a
        # differing one is checked, kept as read and refused by _logger_policy with both lines (deep ==, no
        # canonical JSON per line: equal JSON means equal values, and numerically equal values, 1 and 1.0, are the
        # same policy). An equal logger was checked on the query's first line: only its shown documents are.
        raw = obj["logger"]
        known = first.setdefault("logger_of_query", {}).get(query)
        if known is not None and (known[0] is raw or known[0] == raw):
            spec = known[1]
            if not spec[1].keys() >= set(shown):
                missing = next(d for d in shown if d not in spec[1])
                raise InputError(f"shown document {missing!r} is not among the logger's scored candidates", path, line)
        else:
            spec = _logger_spec(raw, shown, path, line, first["allowed"])
            if known is None:
                first["logger_of_query"][query] = (raw, spec)
        rows.logger.append(spec)
    rows.lines.append(line)
    rows.query.append(query)
    rows.user.append(user)
    rows.user_type.append(utype)
    rows.shown.append(shown)
    rows.clicks.append(flags)


def _decode(path: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")  # a leading byte-order mark is dropped
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {column}); "
                         "the log must be UTF-8 JSON lines", path, line) from None


def read_logged(path: str | PathLike[str], policies: Any = None) -> LoggedLog:
    """Read a JSON-lines log of impressions (format in the module docstring), or a Parquet file of them
    (:mod:`onlineeval.io.logged_parquet`: told by its magic bytes; errors name the row).

    Parameters
    ----------
    path:
        The log file, plain or gzipped (gzip's magic bytes; e.g. ``.jsonl.gz``), or Parquet.
    policies:
        The logging-policy package for logs with ``logger`` lines: anything with
        ``available_policies()`` and ``build_policy(spec, scores, k)``, i.e.
        :mod:`simulations.policies` (``None``: such a log is refused).

    Returns
    -------
    LoggedLog
        The :class:`~onlineeval.estimators.LoggedData` (queries sorted by id, lists padded
        with ``-1`` to the longest) and the id maps. Logger lines get the propensities of
        their shown lists computed by the logging policy (all three forms) and
        ``data.logger`` set, for the support diagnostics.

    Raises
    ------
    onlineeval.errors.InputError
        Naming the file and line: malformed JSON, missing keys, ``shown`` not a list of
        distinct strings, clicks on documents not shown, propensities outside (0, 1] or
        non-finite or of the wrong length, a prefix that increases, ``list`` different
        from the last prefix, lines with different propensity forms, an unknown logging
        policy, non-UTF-8 bytes, an empty log.
    """
    name = str(path)
    from onlineeval.io.logged_parquet import is_parquet, read_parquet_log  # it imports this module

    if is_parquet(name):  # one impression per row of a Parquet file (or of a directory of them)
        return read_parquet_log(name, policies)
    if Path(name).is_dir():
        raise InputError("a directory holding no Parquet file; the log is a JSON-lines file (plain or gzipped), a "
                         "Parquet file or a directory of Parquet files", name)
    raw = _gunzipped(name)  # None: not gzipped
    size = len(raw) if raw is not None else (Path(path).stat().st_size if Path(path).is_file() else 0)
    if size >= FAST_MIN_BYTES:
        from onlineeval.io.logged_fast import _read_fast  # it imports this module

        fast = _read_fast(name, policies, raw)
        if fast is not None:
            return fast
    if raw is None:
        raw = Path(path).read_bytes()
    text = _decode(name, raw)
    rows = _Rows([], [], [], [], [], [], [], [], [], [])
    first: dict[str, Any] = {"policies": policies,
                             "allowed": tuple(policies.available_policies()) if policies is not None else ()}
    # the parsed lines are kept until the arrays are built: pausing the cyclic garbage
    # collector meanwhile spares it rescanning them (reading 100,000 lines: ~2x faster)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for number, obj in decoded_lines(name, text):
            _parse_line(obj, rows, name, number, first)
    finally:
        if was_enabled:
            gc.enable()
    if not rows.lines:
        raise InputError("the log is empty (no impressions)", name)
    return _assemble(rows, name, policies)


def decoded_lines(name: str, text: str) -> Iterator[tuple[int, Any]]:
    """``(line, object)`` of each non-blank line of a JSON-lines log's ``text`` (file ``name``), decoded as the
    readers decode them (:class:`~onlineeval.io.logged_json.LoggerTexts`: a query's logger parsed once, duplicate
    keys refused); malformed JSON is an :class:`InputError` naming the file and line."""
    loggers = LoggerTexts()
    for number, line in enumerate(text.split("\n"), start=1):  # reading JSON is one call per line
        if not line.strip():
            continue
        try:
            obj = loggers.decode(line)
        except DuplicateKey as exc:
            raise InputError(exc.text(), name, number) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"malformed JSON: {exc.msg} (column {exc.colno})", name, number) from None
        except RecursionError:
            raise InputError("malformed JSON: nested too deeply", name, number) from None
        except ValueError as exc:  # e.g. an integer of more than 4300 digits (Python's limit)
            raise InputError(f"malformed JSON: {json_value_error(exc)}", name, number) from None
        yield number, obj


def _gunzipped(name: str) -> bytes | None:
    """The decompressed bytes of a gzipped log (one that starts with gzip's magic bytes ``1f 8b``, whatever its
    name; ``onlineeval simulate``'s ``export_log`` writes ``.jsonl.gz``), or ``None`` for any other file (read as
    it is). A damaged gzip stream is an :class:`InputError` naming the file."""
    import gzip
    import zlib

    try:
        with open(name, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                return None
    except OSError:
        return None  # (the reader below reports a missing or unreadable file as it always did)
    try:
        with gzip.open(name, "rb") as fh:
            return fh.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"a damaged gzip file ({exc}); the log must be UTF-8 JSON lines, plain or gzipped",
                         name) from None


#: logs of at least this many bytes are read first by :func:`~onlineeval.io.logged_fast._read_fast` (pyarrow's
#: JSON reader); smaller ones, and any log it declines, line by line
FAST_MIN_BYTES = 1 << 20

def logged_from_records(records: Iterable[Mapping[str, Any]], policies: Any = None, name: str = "records") -> LoggedLog:
    """A log from impression records already parsed (the JSON objects of :func:`read_logged`'s lines).

    The same checks and errors as :func:`read_logged`, with ``line`` the record's 1-based
    position and no file (``name`` only labels the log). Used by :func:`onlineeval.api.estimate`
    for a DataFrame of impressions.
    """
    rows = _Rows([], [], [], [], [], [], [], [], [], [])
    first: dict[str, Any] = {"policies": policies,
                             "allowed": tuple(policies.available_policies()) if policies is not None else ()}
    try:
        for number, obj in enumerate(records, start=1):
            _parse_line(obj, rows, name, number, first)
        if not rows.lines:
            raise InputError("the log is empty (no impressions)")
        return _assemble(rows, name, policies)
    except InputError as exc:  # records have positions, not a file
        raise InputError(exc.message, None, exc.line) from None


def _padded(values: list[list[Any]], lengths: NDArray[np.int64], k: int, fill: Any, dtype: Any) -> NDArray[Any]:
    flat = np.fromiter((x for row in values for x in row), dtype=dtype, count=int(lengths.sum()))
    out = np.full((len(values), k), fill, dtype=dtype)
    out[np.arange(k)[None, :] < lengths[:, None]] = flat
    return out


def _assemble(rows: _Rows, path: str, policies: Any) -> LoggedLog:
    """The :class:`LoggedLog` of the parsed lines ``rows`` (their arrays, then :func:`_build`)."""
    import pandas as pd

    lines = np.asarray(rows.lines, dtype=np.int64)
    n = lines.size
    lengths = np.fromiter((len(s) for s in rows.shown), dtype=np.int64, count=n)
    k = int(lengths.max())
    flat_docs = np.fromiter((d for s in rows.shown for d in s), dtype=object, count=int(lengths.sum()))
    dcodes, duniq = pd.factorize(flat_docs)
    user = None
    no_user = sum(u is None for u in rows.user)
    if no_user < n:
        user = cluster_codes(np.asarray(rows.user, dtype=object))
    return _build(
        path, policies, lines, np.asarray(rows.query, dtype=object), lengths, dcodes, np.asarray(duniq, dtype=object),
        _padded(rows.clicks, lengths, k, False, bool), user, int(no_user),
        np.asarray(rows.user_type, dtype=np.int64) if rows.user_type[0] is not None else None,
        np.asarray(rows.p_list, dtype=np.float64) if rows.p_list else None,
        _padded(rows.p_prefix, lengths, k, 1.0, np.float64) if rows.p_prefix else None,
        _padded(rows.p_item, lengths, k, 1.0, np.float64) if rows.p_item else None,
        rows.logger, rows.query)


def _build(path: str, policies: Any, lines: NDArray[np.int64], query_ids: NDArray[Any], lengths: NDArray[np.int64],
           dcodes: NDArray[Any], duniq: NDArray[Any], clicks: NDArray[np.bool_], user: NDArray[np.int64] | None,
           no_user: int, user_type: NDArray[np.int64] | None, p_list: NDArray[np.float64] | None,
           p_prefix: NDArray[np.float64] | None, p_item: NDArray[np.float64] | None,
           logger_rows: list[Any], query_list: list[str]) -> LoggedLog:
    """The :class:`LoggedLog` of a log's arrays: ``query_ids`` ``(n,)`` the query id strings, ``lengths`` the
    shown lists' lengths, ``dcodes`` the shown documents' codes (flat, row by row) into their ids ``duniq`` in
    order of first appearance, ``clicks`` ``(n, k)`` padded with False, ``user`` the cluster codes (None: no line
    names a user), ``p_*`` the written propensity forms (padded with 1.0; None: not in the log), ``logger_rows``
    the lines' logger specs (then no ``p_*``; ``query_list`` their query ids). Checks the propensities (naming
    the line: ``lines``) and builds the id maps and :class:`LoggedData`."""
    import pandas as pd

    n = lines.size
    k = int(lengths.max())
    valid = np.arange(k)[None, :] < lengths[:, None]

    qcodes, queries = pd.factorize(query_ids, sort=True)
    qcodes = qcodes.astype(np.int64)
    flat_q = np.repeat(qcodes, lengths)
    # (query, document) pairs in order of first appearance, numbered within their query
    pcodes, puniq = pd.factorize(flat_q * max(len(duniq), 1) + np.asarray(dcodes, dtype=np.int64))
    pair_q = np.asarray(puniq, dtype=np.int64) // max(len(duniq), 1)
    pair_doc = duniq[np.asarray(puniq, dtype=np.int64) % max(len(duniq), 1)]
    order = np.argsort(pair_q, kind="stable")
    sorted_q = pair_q[order]
    local = np.empty(order.size, dtype=np.int64)
    local[order] = np.arange(order.size) - np.searchsorted(sorted_q, sorted_q, side="left")
    bounds = np.searchsorted(sorted_q, np.arange(len(queries) + 1))
    docs = [[str(d) for d in pair_doc[order[bounds[q]:bounds[q + 1]]]] for q in range(len(queries))]
    shown = np.full((n, k), -1, dtype=np.int64)
    query_k = np.zeros(len(queries), dtype=np.int64)
    np.maximum.at(query_k, qcodes, lengths)

    def fail(bad_rows: NDArray[np.bool_], message: str) -> None:
        if bad_rows.any():
            raise InputError(message, path, int(lines[int(np.argmax(bad_rows))]))

    props: dict[str, Any] = {}
    source = "log"
    logger = None
    item_refusal: tuple[str, int] | None = None
    if logger_rows:
        # documents are the logger's candidate columns of their query
        logger, source, docs = _logger_policy(logger_rows, query_list, qcodes, query_k, lines, path,
                                              policies.build_policy)
        column = [{d: c for c, d in enumerate(cands)} for cands in docs]
        pair_col = np.fromiter((column[q][d] for q, d in zip(pair_q, pair_doc)), dtype=np.int64,
                               count=pair_q.size)  # a loop over distinct (query, document) pairs
        shown[valid] = pair_col[pcodes]
        p = logger.propensities(qcodes, shown)
        props = {"p_list": p.list, "p_prefix": p.prefix, "p_item": p.item}
        for form, values in (("list", p.list[:, None]), ("prefix", p.prefix), ("item", p.item)):
            zero = (np.where(valid[:, : values.shape[1]], values, 1.0) <= 0).any(axis=1)
            if form == "item" and zero.any():
                # a Monte Carlo item marginal (Plackett-Luce above dp_max_states with item_method: monte_carlo) of 0
                # is an estimate, not an impossibility: the list's exact prefix probabilities were positive. The
                # item form is withheld and only the estimators that read it are refused (check_needs), the others
                # run.
                estimated = zero & ~np.asarray(logger.marginals_exact(qcodes), dtype=bool)
                if estimated.any():
                    item_refusal = (
                        "the logging policy's item propensity of a shown document is 0 in its Monte Carlo estimate "
                        "(the exact list and prefix probabilities are positive: the document is shown at that slot "
                        "more rarely than the estimate's draws resolve); drop the logger's item_method: "
                        "monte_carlo (the default quadrature is exact) or raise its mc_samples, or use estimators "
                        "that do not read item propensities", int(lines[int(np.argmax(estimated))]))
                    del props["p_item"]
                    zero = zero & ~estimated
            count = int(zero.sum())
            first = ", ".join(str(int(v)) for v in lines[np.flatnonzero(zero)[:5]]) + (", ..." if count > 5 else "")
            many = f"; {count} of the log's {n} impressions are so (lines {first})" if count > 1 else ""
            fail(zero, f"the logging policy gives the shown list probability 0 ({form} propensity); it cannot have "
                       f"shown it (check the policy, its options and the scores){many}")
    else:
        shown[valid] = local[pcodes]
        if p_list is not None:
            bad = (p_list <= 0) | (p_list > 1)
            if bad.any():
                fail(bad, f"propensities.list must be in (0, 1], got {float(p_list[int(np.argmax(bad))])!r}")
            props["p_list"] = p_list
        for key, m in (("p_prefix", p_prefix), ("p_item", p_item)):
            if m is not None:
                form = key[2:]
                fail((~np.isfinite(m)).any(axis=1), f"propensities.{form} must hold finite numbers")
                bad = (m <= 0) | (m > 1)
                if bad.any():
                    i = int(np.argmax(bad.any(axis=1)))
                    j = int(np.argmax(bad[i]))
                    fail(bad.any(axis=1), f"propensities.{form} must be in (0, 1], got {float(m[i, j])!r} at "
                                          f"{form}[{j}] (slot {j + 1})")
                props[key] = m
        pre, item, plist = props.get("p_prefix"), props.get("p_item"), props.get("p_list")
        if pre is not None:
            # empty slots leave the prefix probability unchanged (as the logging policies do)
            last = pre[np.arange(n), lengths - 1]
            pre = np.where(valid, pre, last[:, None])
            props["p_prefix"] = pre
            fail((pre[:, 1:] > pre[:, :-1] * (1 + RTOL)).any(axis=1),
                 "propensities.prefix must be non-increasing (the top j+1 slots are a sub-event of the top j)")
            if plist is not None:
                fail(~np.isclose(plist, last, rtol=RTOL, atol=0.0),
                     "propensities.list must equal the last prefix propensity (both are the whole list's)")
            if item is not None:
                fail(~np.isclose(item[:, 0], pre[:, 0], rtol=RTOL, atol=0.0),
                     "propensities.item[0] must equal propensities.prefix[0] (both are the top document's)")
                fail((pre > item * (1 + RTOL)).any(axis=1),
                     "propensities.item[j] must be >= propensities.prefix[j] (a matching prefix puts the "
                     "document at slot j)")

    short = int((lengths < query_k[qcodes]).sum())
    data = LoggedData(qcodes, shown, clicks, user=user, user_type=user_type, logger=logger, source=path,
                      lists_checked=True, **props)  # each line's list checked above
    return LoggedLog(
        data, tuple(str(q) for q in queries), tuple(tuple(d) for d in docs), lines, query_k,
        tuple(props), source, int(no_user), short, item_refusal,
    )


def locate_run_lines(path: str | PathLike[str], pairs: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """1-based line of each ``(query, doc)`` of ``pairs`` in a TREC run file, or a ``query doc score`` file
    (lines of 3 columns; absent pairs left out)."""
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    out: dict[tuple[str, str], int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if len(fields) >= 3 and not fields[0].startswith("#"):
            key = (fields[0], fields[1] if len(fields) == 3 else fields[2])
            if key in pairs and key not in out:
                out[key] = number
    return out
