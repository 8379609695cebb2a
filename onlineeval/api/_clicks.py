"""Click models in the Python API: :func:`fit_clicks`, :func:`evaluate_clicks` and :func:`sample_clicks`.

The jobs of ``onlineeval clicks fit`` / ``clicks evaluate`` on a DataFrame of sessions (``session, query,
docs, clicks``), a :class:`clickmodels.logs.ClickLog` or a click-log file, and sampling from a click model.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from onlineeval.api._inputs import PathLike, _is_path, check_number, check_unique_columns, index_hint, names_text
from onlineeval.errors import ConfigError, InputError, check_seed, must_be_one_of

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

    from clickmodels.base import ClickModel, ClickSample
    from clickmodels.estimation.base import ClickModelFit
    from clickmodels.logs import ClickLog

SessionsLike = Union["pd.DataFrame", "ClickLog", PathLike]


def _id_list(value: Any, row: int, column: str) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",")] if value.strip() else []
    if _missing(value):
        return []
    try:
        return _ids(value, row, column)
    except TypeError:
        raise InputError(f"column {column!r}: expected a list of ids or a comma-separated string, got "
                         f"{type(value).__name__}", None, row) from None


@functools.cache
def _na_singletons() -> tuple[Any, Any]:
    import pandas as pd

    return pd.NA, pd.NaT


def _missing(value: Any) -> bool:
    """None, a float NaN or pandas' NA / NaT (a missing cell)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    na, nat = _na_singletons()
    return value is na or value is nat


#: the texts of the missing values (str(None), str(nan), str(pd.NA), str(pd.NaT)): an id list holding none of them
#: holds no missing value, so the values are checked one by one only when one shows up
_MISSING_TEXTS = frozenset(("None", "nan", "<NA>", "NaT"))


def _ids(values: Any, row: int, column: str) -> list[str]:
    """The ids of a list cell; a missing one (None, NaN) an error naming the row, as the click-log files refuse
    ``null`` ids (it was read as the id 'None')."""
    out = [_id_text(v) for v in values]
    if not _MISSING_TEXTS.isdisjoint(out) and any(_missing(v) for v in values):
        raise InputError(f"column {column!r}: an id is missing (None or NaN) in {list(values)!r}", None, row)
    return out


def _id_text(value: Any) -> str:
    """A document id as the logs store it (numpy integers as plain integers)."""
    import numpy as np

    return str(int(value)) if isinstance(value, np.integer) else str(value)


def _is_bool(value: Any) -> bool:
    import numpy as np

    return isinstance(value, (bool, np.bool_))


def _is_01_int(value: Any) -> bool:
    import numpy as np

    return isinstance(value, (int, np.integer)) and not _is_bool(value) and value in (0, 1)


def _clicked(clicks: Any, shown: list[str], row: int, clicks_as: str) -> list[str]:
    """The clicked ids of one DataFrame row (rule: see :func:`fit_clicks`, parameter ``clicks_as``)."""
    if isinstance(clicks, str):
        if clicks_as == "flags":
            raise InputError(f"clicks {clicks!r}: clicks_as='flags' needs a list of bools (or 0/1) aligned with "
                             "docs, not a string", None, row)
        return _id_list(clicks, row, "clicks")
    if clicks is None or (isinstance(clicks, float) and math.isnan(clicks)):
        return []
    try:
        values = list(clicks)
    except TypeError:
        raise InputError(f"column 'clicks': expected a list of clicked ids, a list of bools aligned with docs or a "
                         f"comma-separated string, got {type(clicks).__name__}", None, row) from None
    flags = clicks_as == "flags" or (clicks_as == "auto" and bool(values) and all(_is_bool(v) for v in values))
    if flags:
        if len(values) != len(shown) or not all(_is_bool(v) or _is_01_int(v) for v in values):
            raise InputError(f"clicks {values!r} as flags: expected one bool per shown document ({len(shown)}: "
                             f"{shown!r})", None, row)
        return [d for d, c in zip(shown, values) if c]
    if clicks_as == "auto" and any(_is_bool(v) for v in values):
        raise InputError(f"clicks {values!r} mix bools and ids: give the clicked ids, or one bool per shown "
                         "document", None, row)
    ids = _ids(values, row, "clicks")
    if clicks_as == "auto" and values and len(values) == len(shown) and all(_is_01_int(v) for v in values):
        shown_set = set(shown)
        if all(d in shown_set for d in ids):  # both readings are possible: refuse to guess
            raise InputError(
                f"clicks {values!r} with docs {shown!r} could be the clicked documents' ids or 0/1 flags per "
                "shown document; integers are read as ids, so pass bools for flags ([True, False, ...]) or say "
                "which with clicks_as='ids' / clicks_as='flags'", None, row)
        # not every value is a shown id, so they cannot be clicked ids: one flag per shown document, as the
        # logged DataFrame of estimate() reads them (the documents are not the integers 0 and 1)
        return [d for d, c in zip(shown, values) if c]
    return ids


def _frame_sessions(sessions: Any, clicks_as: str) -> ClickLog | None:
    """The :class:`~clickmodels.logs.ClickLog` of a DataFrame of sessions converted by pyarrow and read on whole
    columns (:func:`clickmodels.logs_columns.sessions_from_columns`), as the rows read one by one below (the
    reference) make it, or ``None`` (declined: the rows are read one by one, whose errors name the row). Taken:
    ``query`` strings or integers; ``docs`` lists of string or integer ids; ``clicks`` lists of clicked string ids
    (``clicks_as`` auto or ids) or of booleans, one per shown document (auto or flags; with flags, on every row),
    or of 0/1 integers, one per shown document (flags only, on every row), missing or empty for no click (not with
    flags); ``session`` without a missing value (its strings, as the rows' ``astype(str)``; absent: the row's index
    from 0). Anything else declines (comma-separated strings, integer clicks with auto or ids, whose reading
    depends on the documents, floats, ...)."""
    import numpy as np
    import pyarrow as pa

    from clickmodels.logs_columns import sessions_from_columns

    n = len(sessions)
    if not n:
        return None
    try:
        arrays = {c: pa.array(sessions[c], from_pandas=True) for c in ("query", "docs", "clicks")}
        if "session" in sessions.columns:
            if sessions["session"].isna().any():
                return None
            arrays["session"] = pa.array(sessions["session"].astype(str).tolist(), type=pa.string())
        else:
            arrays["session"] = pa.array(np.arange(n).astype(str).tolist(), type=pa.string())
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    if arrays["query"].null_count:  # a missing query or id: the rows' error
        return None
    for c in ("docs", "clicks"):
        a = arrays[c]
        if (pa.types.is_list(a.type) or pa.types.is_large_list(a.type)) and a.flatten().null_count:
            return None
    clicks = arrays["clicks"]
    if not (pa.types.is_list(clicks.type) or pa.types.is_large_list(clicks.type)):
        return None
    kind = clicks.type.value_type
    if clicks_as == "flags" and pa.types.is_integer(kind):  # 0/1 flags (the common integer column): as bools
        clicks = _int_flags(clicks)
        if clicks is None:  # a missing list or value, or a value other than 0 and 1: the rows' error
            return None
        arrays["clicks"], kind = clicks, clicks.type.value_type
    if pa.types.is_boolean(kind):
        if clicks_as == "ids":  # (booleans as ids: the rows' error)
            return None
        if clicks_as == "flags":  # one flag per shown document on every row
            docs = arrays["docs"]
            if clicks.null_count or not (pa.types.is_list(docs.type) or pa.types.is_large_list(docs.type)) \
                    or not np.array_equal(np.diff(clicks.offsets.to_numpy()), np.diff(docs.offsets.to_numpy())):
                return None
    elif not ((pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind))
              and clicks_as != "flags"):
        return None
    try:
        return sessions_from_columns(pa.table(arrays), None)
    except (pa.ArrowException, OverflowError):  # e.g. more than 2**31 document ids (32-bit list offsets)
        return None


def _int_flags(clicks: Any) -> Any:
    """The list array ``clicks`` of 0/1 integers as the same lists of booleans, or ``None`` when a list or a value
    is missing or a value is neither 0 nor 1 (the rows' reading, :func:`_clicked`, then names the row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    flat = clicks.flatten()
    if clicks.null_count or flat.null_count:
        return None
    if len(flat):
        lo_hi = pc.min_max(flat)
        if lo_hi["min"].as_py() < 0 or lo_hi["max"].as_py() > 1:
            return None
    return clicks.cast(pa.large_list(pa.bool_()) if pa.types.is_large_list(clicks.type) else pa.list_(pa.bool_()))


def _click_log(sessions: Any, fmt: str | None = None, name: str = "sessions", clicks_as: str = "auto") -> ClickLog:
    """A :class:`clickmodels.logs.ClickLog` from a DataFrame of sessions, a ClickLog or a file."""
    import pandas as pd

    from clickmodels.logs import ClickLog, from_sessions, read_click_log

    if clicks_as not in ("auto", "ids", "flags"):
        raise ConfigError(("clicks_as",), must_be_one_of(("auto", "ids", "flags"), clicks_as))
    if isinstance(sessions, ClickLog):
        return sessions
    if _is_path(sessions):
        log = read_click_log(sessions, fmt)  # type: ignore[arg-type]
        dropped = log.dropped_note(sessions)  # what clicks fit / evaluate print
        if dropped:
            import warnings

            warnings.warn(dropped, UserWarning, stacklevel=3)
        return log
    if not isinstance(sessions, pd.DataFrame):
        raise InputError(f"{name}: expected a DataFrame (session, query, docs, clicks), a ClickLog or a click-log "
                         f"file; got {type(sessions).__name__}")
    need = ("query", "docs", "clicks")
    lacking = [c for c in need if c not in sessions.columns]
    if lacking:
        raise InputError(f"{name} lacks column(s) {', '.join(lacking)}; needs session (optional), query, docs "
                         "(shown ids in rank order), clicks (clicked ids, or one bool per shown document)"
                         + index_hint(sessions, lacking + ["session"], {}))
    check_unique_columns(sessions, name)
    fast = _frame_sessions(sessions, clicks_as)
    if fast is not None:
        return fast
    if "session" in sessions.columns and sessions["session"].isna().any():  # (pandas 3 keeps it missing)
        row = int(sessions["session"].isna().to_numpy().argmax()) + 1
        raise InputError("column 'session': the session id is missing (None or NaN)", None, row)
    sids = sessions["session"].astype(str).tolist() if "session" in sessions.columns else \
        [str(i) for i in range(len(sessions))]
    out = []
    for i, (sid, query, docs, clicks) in enumerate(zip(sids, sessions["query"], sessions["docs"],
                                                       sessions["clicks"]), start=1):
        if _missing(query):  # (it was read as the query 'None' or 'nan')
            raise InputError("column 'query': the query is missing (None or NaN)", None, i)
        shown = _id_list(docs, i, "docs")
        out.append((sid, str(query), shown, _clicked(clicks, shown, i, clicks_as)))
    return from_sessions(out, lines=list(range(1, len(out) + 1)))


def fit_clicks(
    sessions: SessionsLike,
    model: str = "pbm",
    *,
    method: str | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    pseudo: float | None = None,
    format: str | None = None,
    clicks_as: str = "auto",
    bootstrap: int | None = None,
    seed: int | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> ClickModelFit:
    """Fit a click model to sessions, as ``onlineeval clicks fit``.

    Parameters
    ----------
    sessions:
        A DataFrame with columns ``query``, ``docs`` (shown document ids in rank order: a
        list or a comma-separated string), ``clicks`` (the clicked ids, or one bool per
        shown document: see ``clicks_as``) and optionally ``session``; a
        :class:`clickmodels.logs.ClickLog`; or a click-log file (tsv, jsonl, yandex, parquet).
    model:
        A model name of ``onlineeval clicks`` (gctr, rctr, dctr, cm, dcm, sdbn, pbm, ubm,
        dbn, ccm, or an alias such as ``cascade``).
    method, max_iter, tol, pseudo:
        ``closed_form`` or ``em`` (default: EM for pbm, ubm, dbn, ccm, dcm and sdbn, the closed form for
        the CTR models and cm; ``closed_form`` gives dcm's and sdbn's last-click approximations, biased on
        data from the model itself); EM's stopping rule; the Beta(a, a) pseudo-count.
    format:
        The file's format (default from its suffix).
    clicks_as:
        How a DataFrame's ``clicks`` lists are read. ``"auto"`` (default): a list of bools
        (``[True, False, True]``, or a bool numpy array) is one flag per shown document;
        any other list (strings, integers) holds the clicked documents' ids, as in the
        JSONL format, except a 0/1 list with one value per shown document that cannot be
        ids (a value is not a shown id, e.g. the documents are strings): those are flags,
        as :func:`estimate`'s logged DataFrame reads them. An integer list that could be
        either (0/1 values, one per shown document, and the documents include ids 0 / 1)
        is refused rather than guessed. ``"ids"``: every list is clicked ids; ``"flags"``:
        every list is one bool or 0/1 per shown document.
    bootstrap, seed:
        As ``clicks fit --bootstrap N --seed S`` (dcm, sdbn, dbn, ccm, pbm, ubm): per-session bootstrap standard
        errors from ``bootstrap`` refits (2 to 100,000) on resamples drawn with ``numpy.random.default_rng(seed)``
        (default seed 0), in the fit's ``standard_errors``
        (:class:`clickmodels.estimation.bootstrap.BootstrapSE`: ``se``, ``summary()``; PBM's and UBM's of the
        values on the rank-1 scale, ``values``).
    on_progress:
        ``f(what, done, total)`` after each bootstrap refit (where the CLI prints its progress lines); it changes
        no number.

    Returns
    -------
    clickmodels.estimation.base.ClickModelFit
        Its ``save(path)`` writes the JSON of ``clicks fit --out`` (with ``bootstrap``: of ``clicks fit --bootstrap
        N``, the standard errors included). ``provenance``: the sessions' SHA-256 (a file's
        bytes; sessions in memory as read; ``inputs``), the ``options`` and their ``fingerprint``, the CLI's for the
        same file and options; saved with the parameters.

    Example
    -------
    >>> import pandas as pd
    >>> sessions = pd.DataFrame({"query": ["q"] * 4, "docs": [["a", "b"]] * 4,
    ...                          "clicks": [["a"], [], ["a", "b"], ["b"]]})
    >>> fit = fit_clicks(sessions, "rctr")
    >>> [round(float(p), 2) for p in fit.p]
    [0.5, 0.5]
    """
    from clickmodels.estimation import fit_log
    from onlineeval.click_fits import fit_name

    key = fit_name(model, "model")
    opts = {k: v for k, v in {"method": method, "max_iter": max_iter, "tol": tol, "pseudo": pseudo}.items()
            if v is not None}
    for name, value in opts.items():  # (their ranges are the estimators' to check)
        if name == "method" and not isinstance(value, str):
            raise ConfigError(("method",), f"must be 'em' or 'closed_form', got {value!r}")
        if name != "method":
            check_number(value, name)
    from onlineeval.click_fits import check_bootstrap

    check_bootstrap(key, bootstrap, seed, "bootstrap", "seed")
    log = _click_log(sessions, format, clicks_as=clicks_as)
    fit = fit_log(key, log, **opts)
    from dataclasses import replace

    from onlineeval.click_fits import fit_options
    from onlineeval.io.digest import fingerprint

    inputs = _inputs({"log": sessions if _is_path(sessions) else log})
    options = fit_options(key, format, max_iter, tol, pseudo, method, bootstrap=bootstrap, seed=seed)
    fit = replace(fit, provenance={"inputs": inputs, "options": options, "fingerprint": fingerprint(inputs, options)})
    if bootstrap is not None:
        from clickmodels.estimation.bootstrap import bootstrap_se

        fit = replace(fit, standard_errors=bootstrap_se(key, log, fit, n_boot=int(bootstrap), seed=int(seed or 0),
                                                        progress=on_progress, **opts))
    return fit


def evaluate_clicks(
    sessions: SessionsLike,
    models: str | Sequence[str] | Mapping[str, Any] = ("rctr", "pbm", "ubm", "dbn"),
    *,
    test: SessionsLike | None = None,
    test_fraction: float = 0.25,
    seed: int = 0,
    format: str | None = None,
    clicks_as: str = "auto",
) -> pd.DataFrame:
    """Fit click models on sessions and compare them on held-out sessions, as ``onlineeval clicks evaluate``.

    Parameters
    ----------
    sessions:
        Training sessions (see :func:`fit_clicks`, also for ``format`` and ``clicks_as``,
        which apply to ``test`` too).
    models:
        Model names (dcm and sdbn are fitted by EM, the maximum likelihood, by default;
        ``dcm:closed_form`` / ``sdbn:closed_form`` for their last-click closed forms, biased on
        data from the model itself) and fitted-parameter ``.json`` files (labelled ``model (file name)`` as by the
        CLI), each once, checked before any
        sessions are read (:func:`onlineeval.click_fits.resolve_models`, as the CLI checks them); or
        ``{label: fitted model}``.
    test:
        Held-out sessions; default a random split of ``sessions`` with ``test_fraction``
        held out, drawn with ``numpy.random.default_rng(seed)`` (the CLI's split).

    Returns
    -------
    pandas.DataFrame
        One row per model: ``log_likelihood``, ``perplexity``, ``conditional_perplexity``,
        ``n_sessions``, ``n_clipped`` (test sessions whose log-likelihood hit the 1e-10 floor)
        and ``perplexity@r`` per rank (:func:`clickmodels.evaluation.compare`). A model that
        cannot score the test sessions (e.g. fitted on shorter lists) gets a row of NaN and
        its reason in a last column ``refused`` (present only then); if no model can, an
        :class:`~onlineeval.errors.InputError`; refused models also raise a ``UserWarning``
        (the CLI's warning line). ``attrs["conventions"]``: what the numbers mean (the definitions ``clicks evaluate``
        prints, each model's smoothing and estimator, the split), a dict of strings. ``attrs["inputs"]``: the
        SHA-256 of each input (``log``, ``test_log``, ``model <label>``): a file's bytes (the CLI's), sessions in
        memory as read (columns the reader ignores leave it unchanged) or a fitted model's parameters;
        ``attrs["fingerprint"]``: of those with the options and the version, the CLI's for the same files and
        options.
    """
    import numpy as np
    import pandas as pd

    from clickmodels.evaluation import compare
    from clickmodels.logs import train_test_split
    from onlineeval.click_fits import evaluate_conventions, fit_models, resolve_models

    if isinstance(models, Mapping):
        if not models:
            raise ConfigError(("models",), "give at least one model (a name, or a name -> fitted model mapping)")
        requests = None
    else:  # before any reading
        requests = resolve_models(names_text(models, "models", "click-model names"), "models")
    in_sample = False  # the training sessions as their own test: in-sample figures for the models fitted on them
    if test is not None and requests is not None and any(r.path is None for r in requests):
        from pathlib import Path

        from onlineeval.click_fits import same_file

        in_sample = test is sessions or (_is_path(test) and _is_path(sessions) and same_file(Path(sessions),
                                                                                               Path(test)))
        if in_sample:
            import warnings

            warnings.warn("test holds the training sessions: the figures of the models fitted on them are in-sample, "
                          "not held out (conventions['split'] says so)", UserWarning, stacklevel=2)
    train = _click_log(sessions, format, clicks_as=clicks_as)
    given: dict[str, Any] = {"log": sessions if _is_path(sessions) else train}  # a file's bytes, else as read
    if test is None:
        if not 0 < check_number(test_fraction, "test_fraction") < 1:
            raise ConfigError(("test_fraction",), f"must be in (0, 1), got {test_fraction}")
        train, held = train_test_split(train, test_fraction, np.random.default_rng(check_seed(seed)))
    else:
        held = _click_log(test, format, "test", clicks_as)
        given["test_log"] = test if _is_path(test) else held
    fits = dict(models) if requests is None else fit_models(requests, train)
    table = compare(fits, held, on_error="row")
    if "refused" in table.columns and (table["refused"] != "").all():
        raise InputError("no model could score the test sessions: "
                         + "; ".join(f"{m}: {w}" for m, w in table["refused"].items()))
    refused = {m: why for m, why in table.get("refused", pd.Series(dtype=str)).items() if why}
    if refused:  # what clicks evaluate prints as its warning
        import warnings

        warnings.warn(f"{len(refused)} of {len(table)} models not scored (NaN rows, reason in the 'refused' column): "
                      + "; ".join(f"{m}: {w}" for m, w in refused.items()), UserWarning, stacklevel=2)
    conventions = evaluate_conventions(fits)
    conventions["split"] = ("in-sample: test holds the training sessions" if in_sample else
                            "held-out sessions given as test") if test is not None else (
        f"random split, {test_fraction:.0%} of sessions held out (numpy.random.default_rng({seed}))")
    table.attrs["conventions"] = conventions
    if requests is None:  # {label: fitted model}: its parameters
        given.update({f"model {label}": fit for label, fit in models.items()})  # type: ignore[union-attr]
    else:  # the saved fits' files
        given.update({f"model {r.given}": r.path for r in requests if r.path is not None})
    table.attrs["inputs"] = _inputs(given)
    from onlineeval.click_fits import evaluate_options
    from onlineeval.io.digest import fingerprint

    labels = [r.given for r in requests] if requests is not None else list(models)  # type: ignore[arg-type]
    table.attrs["fingerprint"] = fingerprint(table.attrs["inputs"], evaluate_options(
        labels, format, format, test is not None, test_fraction, seed))
    return table


def _inputs(objects: Mapping[str, Any]) -> dict[str, Any]:
    """Each input's digest for :func:`fit_clicks`' ``provenance`` and :func:`evaluate_clicks`' ``attrs["inputs"]``:
    a file's (its bytes, as the CLI's), sessions given in memory as read
    (:func:`onlineeval.io.digest.click_log_entry`: a column the
    reader ignores, or a missing clicks cell written as ``None`` or ``[]``, leaves it unchanged), a fitted model's
    parameters (its :meth:`to_dict` without its own provenance)."""
    from clickmodels.estimation.base import PROVENANCE_KEYS
    from clickmodels.logs import ClickLog
    from onlineeval.io.digest import click_log_entry, input_entry, memory_entry

    out: dict[str, Any] = {}
    for key, obj in objects.items():
        if _is_path(obj):
            out[key] = input_entry(obj)
        elif isinstance(obj, ClickLog):
            out[key] = click_log_entry(obj)
        else:  # a fitted model
            out[key] = memory_entry({k: v for k, v in obj.to_dict().items() if k not in PROVENANCE_KEYS})
    return out



def sample_clicks(
    model: str | Mapping[str, Any] | ClickModel, labels: Any, rng: np.random.Generator
) -> ClickSample:
    """Sample clicks of a click model for a label matrix.

    Parameters
    ----------
    model:
        A click model, a spec such as ``{"name": "cascade", "preset": "navigational"}``
        (:func:`clickmodels.build`) or a name whose model needs no parameters.
    labels:
        ``(n, k)`` relevance grades of the shown lists, ``-1`` for empty slots.
    rng:
        The random generator (the same state gives the same clicks).

    Returns
    -------
    clickmodels.base.ClickSample
        ``clicks`` (n, k), the exact ``propensity`` of each slot and ``examined``.

    Example
    -------
    >>> import numpy as np
    >>> s = sample_clicks({"name": "cascade", "preset": "perfect"}, [[0, 4, 0], [0, 0, 0]],
    ...                   np.random.default_rng(0))
    >>> s.clicks.astype(int).tolist()
    [[0, 1, 0], [0, 0, 0]]
    """
    import clickmodels

    m = clickmodels.build({"name": model} if isinstance(model, str) else model) if isinstance(
        model, (str, Mapping)) else model
    if not callable(getattr(m, "sample", None)):
        raise ConfigError(("model",), "must be a click model, a spec such as {'name': 'cascade', 'preset': "
                          f"'navigational'}} or a model name, got {type(model).__name__}")
    return m.sample(labels, rng)
