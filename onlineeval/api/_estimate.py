"""Off-policy estimation in the Python API: :func:`estimate` and its :class:`Estimates`.

The estimates of ``onlineeval estimate`` on a logged DataFrame (``query, shown, clicks`` and propensity
columns) or a JSON-lines log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from onlineeval.api._inputs import PathLike, _frame, _is_path, check_unique_columns, index_hint
from onlineeval.errors import ConfigError, InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass(frozen=True)
class Estimates:
    """Off-policy estimates of targets' online metric (:func:`estimate`).

    Attributes
    ----------
    results:
        One row per estimator and target (the baseline included): ``estimator, target, estimate, se, ci_low,
        ci_high, ...`` (the fields of ``onlineeval estimate --format json``'s results, the
        diagnostics flattened with a ``diag_`` prefix) and ``error`` when undefined.
    differences:
        With a baseline: one row per estimator and target, the target minus the baseline
        paired on the same impressions.
    warnings:
        Every warning ``onlineeval estimate`` prints for the same call, with the same text: the log's and the
        targets', each estimate's prefixed ``"<estimator> <target>: "`` (also in the ``warnings`` column of
        ``results``; a difference's in that of ``differences``) and each undefined difference's error.
    conventions:
        The metric and its reward, the level, the cluster unit, where the propensities come
        from, the tie rule of the runs and the bootstrap (keys of the CLI's ``conventions``).
    inputs, fingerprint:
        Each input's digest (``{"log": ..., "targets": {name: ...}, "baseline": {name: ...}}``) and the
        fingerprint of those with the options (:mod:`onlineeval.io.digest`): a file's path, size and SHA-256 (for
        files only, the CLI's fingerprint for the same files, names and options); an input in memory its type and
        the SHA-256 of its canonical JSON (``in_memory``; a DataFrame log: of the Arrow table of the columns the
        reader takes, :func:`~onlineeval.io.digest.table_entry`, or where that path declines of the impressions
        read from its rows, :class:`~onlineeval.io.digest.RecordsDigest`), so the same content and options give
        the same fingerprint; ``None`` when an input has no such form.
    """

    results: pd.DataFrame
    differences: pd.DataFrame
    warnings: tuple[str, ...]
    conventions: Mapping[str, Any] = field(default_factory=dict)
    inputs: Mapping[str, Any] | None = None
    fingerprint: str | None = None

    def value(self, estimator: str, target: str) -> float:
        """The estimate of ``target`` by ``estimator``."""
        r = self.results[(self.results["estimator"] == estimator) & (self.results["target"] == target)]
        if r.empty:
            raise ConfigError(("target",), f"no estimate of {target!r} by {estimator!r}")
        return float(r["estimate"].iloc[0])


#: the JSON reader's scalar types, taken as they are by :func:`_plain` (exact types: not numpy's subclasses)
_JSON_SCALARS = frozenset((str, int, float, bool, type(None)))


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as Python values (the JSON reader's types)."""
    if type(value) in _JSON_SCALARS:
        return value
    if hasattr(value, "tolist"):  # numpy arrays and scalars (np.str_, np.float64, ...)
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _plain_once() -> Any:
    """:func:`_plain` converting each mapping object once: a DataFrame's ``logger`` column typically holds one dict
    per query, shared by that query's rows, which were converted (their scores value by value) on every row. The same
    values; the rows of one object then share its converted object, as the JSON reader's records share their query's
    first logger (nothing downstream changes a record's values)."""
    seen: dict[int, tuple[Any, Any]] = {}

    def plain(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return _plain(value)
        hit = seen.get(id(value))
        if hit is not None and hit[0] is value:  # (the object itself: held by the frame, its id not reused)
            return hit[1]
        out = _plain(value)
        seen[id(value)] = (value, out)
        return out

    return plain


def _logged(log: Any, policies: Any) -> tuple[Any, dict[str, Any] | None]:
    """A :class:`onlineeval.io.logged.LoggedLog` from a DataFrame of impressions or a JSON-lines file, and the
    log's digest: the file's (:func:`onlineeval.io.digest.input_entry`); a DataFrame with written propensities is
    converted by pyarrow and checked on whole columns (:func:`onlineeval.io.logged_fast.read_frame_fast`, the same
    log and errors as its records: 10^5 impressions in about 0.4 s against 3.1 s) and digested as that table
    (:func:`onlineeval.io.digest.table_entry`), as is one with a ``logger`` column of dicts
    (:func:`~onlineeval.io.logged_fast.read_logger_objects_fast`: 10^5 Plackett-Luce rows in about 1.0-1.4 s
    against 4.4-4.9 s; the digest's ``logger`` column each query's logger as canonical JSON,
    :func:`_logger_table_entry`); where those decline, the records read from its rows are the reference and are
    digested as they are read (:class:`onlineeval.io.digest.RecordsDigest`)."""
    import pandas as pd

    from onlineeval.io.digest import RecordsDigest, input_entry, table_entry
    from onlineeval.io.logged import logged_from_records, read_logged
    from onlineeval.io.logged_fast import (
        FRAME_FORMS,
        frame_table,
        logger_frame_table,
        read_frame_fast,
        read_logger_objects_fast,
        row_records,
    )

    if _is_path(log):
        return read_logged(log, policies=policies), input_entry(log)
    if not isinstance(log, pd.DataFrame):
        raise InputError(f"log: expected a DataFrame (query, shown, clicks, p_list / p_prefix / p_item or "
                         f"propensities or logger) or a JSON-lines or Parquet file; got {type(log).__name__}")
    check_unique_columns(log, "log")
    hint = index_hint(log, [c for c in ("query", "user", "shown", "clicks") if c not in log.columns], {})
    if hint:  # (the reader said "row 1: missing key 'query'", and an index of users was not read: no clusters)
        raise InputError(f"log: {hint[2:]}")
    table = frame_table(log)
    if table is not None:
        try:
            fast = read_frame_fast(table, "DataFrame", policies)
        except InputError as exc:  # (its rows are numbered as the records' are; no file)
            raise _in_columns(InputError(exc.message, None, exc.line), log) from None
        if fast is not None:
            return fast, table_entry(table, "DataFrame")
    table = logger_frame_table(log)
    if table is not None:  # loggers as dicts: each query's first decoded once, the other rows compared with it
        objects, plain = log["logger"].tolist(), _plain_once()
        try:
            fast = read_logger_objects_fast(table, "DataFrame", policies, objects, plain)
        except InputError as exc:
            raise _in_columns(InputError(exc.message, None, exc.line), log) from None
        digest = None if fast is None else _logger_table_entry(table, objects, plain)
        if digest is not None:
            return fast, digest
    p_columns = [c for c in FRAME_FORMS if c in log.columns]

    records = row_records(log.to_dict("records"), p_columns, plain=_plain_once())
    digest = RecordsDigest()
    try:
        return logged_from_records(digest.through(records), policies, "DataFrame"), digest.entry("DataFrame")
    except InputError as exc:
        raise _in_columns(exc, log) from None


def _logger_table_entry(table: Any, objects: list[Any], plain: Any) -> dict[str, Any] | None:
    """The digest of a DataFrame log read with its loggers as objects (:func:`onlineeval.io.digest.table_entry`): its
    table with the ``logger`` column holding each row's logger as the canonical JSON of its query's first row's (a
    dictionary array: each logger's text once; every row's was checked equal to it), or ``None`` where a logger
    has no JSON form (the records are then read and digested one by one)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from onlineeval.io.digest import canonical_json, table_entry

    codes, _ = pd.factorize(np.asarray(table.column("query").to_numpy(zero_copy_only=False), dtype=object))
    _, first = np.unique(codes, return_index=True)  # (codes in order of first row)
    try:
        texts = pa.array([canonical_json(plain(objects[row])) for row in first.tolist()], type=pa.string())
    except (TypeError, ValueError):
        return None
    loggers = pa.DictionaryArray.from_arrays(pa.array(codes, type=pa.int32()), texts)
    return table_entry(table.set_column(table.schema.get_field_index("logger"), "logger", loggers), "DataFrame")


def _in_columns(exc: InputError, log: Any) -> InputError:
    """``exc`` naming the DataFrame columns ``p_list``, ``p_prefix``, ``p_item`` where the log reader names the
    JSON-lines keys ``propensities.list`` ... (review 2, E.4; not for a ``propensities`` column) and other rows as
    rows (``row 4`` where the reader says ``line 4``); unchanged for a file."""
    import pandas as pd

    from onlineeval.io.logged_fast import FRAME_FORMS
    from onlineeval.io.logged_parquet import as_rows

    if not isinstance(log, pd.DataFrame):
        return exc
    message = as_rows(exc.message)  # other rows named as rows, as the error's own
    if "propensities" not in log.columns and any(c in log.columns for c in FRAME_FORMS):
        message = re.sub(r"propensities\.(list|prefix|item)\b", r"p_\1", message)
    return InputError(message, exc.path, exc.line)


def _target_lists(run: Any, ties: str, name: str) -> dict[str, list[str]]:
    """``{query: ranked doc ids}`` of a target: a run (DataFrame, dict of dicts, file) or ready lists."""
    from onlineeval.io import ranked_doc_lists

    if isinstance(run, Mapping) and run and all(isinstance(v, (list, tuple)) for v in run.values()):
        return {str(q): _ready_list(q, docs, name) for q, docs in run.items()}
    return ranked_doc_lists(_frame(run, "run", "score", f"target {name!r}"), ties)


def _ready_list(query: Any, docs: Sequence[Any], name: str) -> list[str]:
    """A target's ready ranked list of ``query`` as text ids, refusing what a run file cannot hold: an id that is
    neither a string nor an integer (None or NaN was read as the document 'None' or 'nan') and a document listed twice
    (its second slot was estimated as if another document stood there)."""
    import numbers

    out = []
    for d in docs:
        if isinstance(d, bool) or not isinstance(d, (str, numbers.Integral)):
            raise InputError(f"target {name!r}: query {query!r}: document ids must be strings or integers, got {d!r}")
        out.append(str(d))
    if len(set(out)) != len(out):
        twice = next(d for i, d in enumerate(out) if d in out[:i])
        raise InputError(f"target {name!r}: query {query!r} lists document {twice!r} twice (a ranking shows each "
                         "document once)")
    return out


def estimate(
    log: pd.DataFrame | PathLike,
    targets: Mapping[str, Any],
    estimators: str | Sequence[str] = ("ips", "snips"),
    *,
    metric: str = "clicks_per_query",
    baseline: tuple[str, Any] | None = None,
    alpha: float = 0.05,
    bootstrap: int = 0,
    seed: int = 0,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    ties: str = "docno_desc",
    allow_unseen: bool = False,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> Estimates:
    """Off-policy estimates of targets' online metric from a logged click log, as ``onlineeval estimate``.

    Estimates :math:`V(\\pi) = \\mathbb E_q\\,\\mathbb E_{\\mathbf s\\sim\\pi(q)}\\,\\mathbb E[R \\mid q,
    \\mathbf s]` for each target ranker with each estimator (:mod:`onlineeval.estimators`),
    under the estimator's stated assumption.

    Parameters
    ----------
    log:
        A DataFrame with one impression per row: ``query``, ``shown`` (list of doc ids),
        ``clicks`` (clicked ids or 0/1), optional ``user`` and ``user_type``, and the
        logging propensities as columns ``p_list`` / ``p_prefix`` / ``p_item`` (or a
        ``propensities`` dict, or a ``logger`` spec); or a JSON-lines file, plain or gzipped
        (:mod:`onlineeval.io.logged`; e.g. a simulated log of ``designs[i].export_log``), or a Parquet file
        (:mod:`onlineeval.io.logged_parquet`).
    targets:
        ``{name: run}``: a run DataFrame / dict of dicts / TREC file (ranked by score with
        ``ties``), or ``{query: [doc ids in rank order]}``.
    estimators:
        Names (``"ips,snips"`` or a list; :func:`onlineeval.estimators.catalogue`).
    metric:
        ``clicks_per_query``, ``reciprocal_rank``, ``abandonment``, or ``utility:<metric>`` (clicks weighted by
        an offline metric's C/W/L weights, :func:`onlineeval.estimators.rewards.utility_reward`).
    baseline:
        ``(name, run)``: each target minus it, paired on the same impressions.
    alpha, bootstrap, seed, options, ties:
        Interval level, cluster-bootstrap replicates (0 or >= 100) and their seed,
        ``{estimator: {option: value}}``, the score-tie rule of the runs.
    allow_unseen:
        For a log with a ``logger``: targets may rank documents the logging policy cannot show
        (support violations, the estimates biased there); default: refused with an
        :class:`InputError`. Logs with written propensities never need it: documents never
        logged for a query get weight 0 and a warning (whether the policy could show them is
        unknown from written propensities).
    on_progress:
        Called ``(what, done, total)`` as long computations go on, as ``onlineeval estimate``'s progress lines
        report them: a ``logger``'s Plackett-Luce item propensities query by query (``what`` e.g.
        ``"Plackett-Luce item propensities of 10000 queries"``) and a bootstrap that fits a model again on every
        resample (``what`` e.g. ``"dm (cm fitted again on every resample) of B"``); ``None`` (default): silent.
        It changes no number.

    Returns
    -------
    Estimates
    """
    import pandas as pd

    import simulations.policies
    from onlineeval.estimators import get_estimator, get_reward
    from onlineeval.estimators.log_estimates import (
        check_needs,
        check_rewards,
        check_settings,
        estimate_conventions,
        estimate_targets,
        parse_estimators,
    )
    from onlineeval.estimators.target_support import unseen_refused, unseen_text

    check_settings(metric, alpha, bootstrap, ties, prefix="")
    if not targets:
        raise ConfigError(("targets",), "give at least one target")
    if not isinstance(estimators, str) and not (isinstance(estimators, (list, tuple))
                                                and all(isinstance(e, str) for e in estimators)):
        raise ConfigError(("estimators",), "must be estimator names: a comma-separated string ('ips,snips') or a "
                          f"list of names, got {type(estimators).__name__}")
    names = parse_estimators(estimators if isinstance(estimators, str) else ",".join(estimators), key="estimators")
    opts = {k: dict(v) for k, v in (options or {}).items()}
    unknown = [k for k in opts if k not in names]
    if unknown:
        raise ConfigError(("options", unknown[0]), f"is not one of the estimators ({', '.join(names)})")
    ests = [get_estimator(n, **opts.get(n, {})) for n in names]
    check_rewards(ests, get_reward(metric, 1), key="metric")
    import os

    from simulations.policies.settings import propensity_settings

    # as the CLI: a logger's Plackett-Luce quadrature tables (computed while the log is read) side by side on the
    # machine's cores, the same numbers for any count (progress to on_progress, if given)
    with propensity_settings(os.cpu_count() or 1, on_progress):
        lg, log_entry = _logged(log, simulations.policies)
    reward = get_reward(metric, lg.data.k)
    try:
        check_needs(lg, ests)
    except InputError as exc:
        raise _in_columns(exc, log) from None
    if baseline is not None and baseline[0] in targets:
        raise ConfigError(("baseline",), f"{baseline[0]!r} is also a target")
    maps = {}
    for name, run in [*targets.items(), *([baseline] if baseline is not None else [])]:
        tmap = lg.target(_target_lists(run, ties, name), name)
        if not tmap.ranked.any():
            raise InputError(f"target {name!r}: no query in common with the log (log ids e.g. {lg.queries[0]!r})")
        if tmap.unseen and not allow_unseen and unseen_refused(lg):
            first, path, line = tmap.unseen[0], None, None
            if _is_path(run):  # a run file: name the line of the first such document, as the CLI does
                from onlineeval.io.logged import locate_run_lines

                found = locate_run_lines(run, {(u.query, u.doc) for u in tmap.unseen})
                line, first = min(((found.get((u.query, u.doc), 0), u) for u in tmap.unseen), key=lambda t: t[0])
                path, line = str(run), line or None
            raise InputError(f"target {name!r} {unseen_text(tmap, lg, first)} (allow_unseen=True estimates it "
                             "anyway, counting them as support violations)", path, line)
        maps[name] = tmap
    base = maps.pop(baseline[0]) if baseline is not None else None
    from onlineeval.estimators.base import BOOTSTRAP_PROGRESS

    token = BOOTSTRAP_PROGRESS.set(on_progress)
    try:
        out = estimate_targets(lg, list(maps.values()), ests, reward, alpha=alpha, bootstrap=bootstrap, seed=seed,
                               baseline=base, sources={name: f"target {name!r}" for name in [*maps, *(
                                   [baseline[0]] if baseline is not None else [])]}, bootstrap_option="bootstrap=N")
    finally:
        BOOTSTRAP_PROGRESS.reset(token)
    flat = []
    for r in out.results:
        row = {k: v for k, v in r.items() if k not in ("diagnostics", "warnings")}
        row |= {f"diag_{k}": v for k, v in (r.get("diagnostics") or {}).items()}
        row["warnings"] = tuple(r.get("warnings") or ())
        flat.append(row)
    conventions = estimate_conventions(lg, metric, reward, alpha, ties, bootstrap, seed, ests)
    diffs = [{**d, "warnings": tuple(d.get("warnings") or ())} for d in out.differences]  # as the results' rows
    from onlineeval.estimators.results import warning_lines

    warns = tuple(warning_lines(out.warnings, out.results, out.differences))
    from onlineeval.io.digest import estimate_settings, fingerprint, input_entry, memory_entry

    def entry(x: Any) -> dict[str, Any] | None:  # what determines the numbers, as the CLI's for files
        return input_entry(x) if _is_path(x) else memory_entry(x)

    inputs: dict[str, Any] | None = {"log": log_entry, "targets": {name: entry(run) for name, run in targets.items()}}
    if baseline is not None:
        inputs["baseline"] = {baseline[0]: entry(baseline[1])}
    fp = None
    if log_entry is None or any(e is None for part in list(inputs.values())[1:] for e in part.values()):
        inputs = None  # an input without a canonical form (no digest)
    else:
        fp = fingerprint(inputs, estimate_settings(metric, ests, opts, alpha, bootstrap, seed, ties, allow_unseen))
    return Estimates(pd.DataFrame(flat), pd.DataFrame(diffs), warns, conventions, inputs, fp)
