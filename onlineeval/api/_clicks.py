"""Click models in the Python API: :func:`fit_clicks`, :func:`evaluate_clicks` and :func:`sample_clicks`.

The jobs of ``onlineeval clicks fit`` / ``clicks evaluate`` on a DataFrame of sessions (``session, query,
docs, clicks``), a :class:`clickmodels.logs.ClickLog` or a click-log file, and sampling from a click model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from onlineeval.api._inputs import PathLike, _is_path
from onlineeval.errors import ConfigError, InputError

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
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    try:
        return [str(v) for v in value]
    except TypeError:
        raise InputError(f"column {column!r}: expected a list of ids or a comma-separated string, got "
                         f"{type(value).__name__}", None, row) from None


def _click_log(sessions: Any, fmt: str | None = None, name: str = "sessions") -> ClickLog:
    """A :class:`clickmodels.logs.ClickLog` from a DataFrame of sessions, a ClickLog or a file."""
    import pandas as pd

    from clickmodels.logs import ClickLog, from_sessions, read_click_log

    if isinstance(sessions, ClickLog):
        return sessions
    if _is_path(sessions):
        return read_click_log(sessions, fmt)  # type: ignore[arg-type]
    if not isinstance(sessions, pd.DataFrame):
        raise InputError(f"{name}: expected a DataFrame (session, query, docs, clicks), a ClickLog or a click-log "
                         f"file; got {type(sessions).__name__}")
    need = ("query", "docs", "clicks")
    lacking = [c for c in need if c not in sessions.columns]
    if lacking:
        raise InputError(f"{name} lacks column(s) {', '.join(lacking)}; needs session (optional), query, docs "
                         "(shown ids in rank order), clicks (clicked ids, or 0/1 aligned with docs)")
    sids = sessions["session"].astype(str).tolist() if "session" in sessions.columns else \
        [str(i) for i in range(len(sessions))]
    out = []
    for i, (sid, query, docs, clicks) in enumerate(zip(sids, sessions["query"], sessions["docs"],
                                                       sessions["clicks"]), start=1):
        shown = _id_list(docs, i, "docs")
        if isinstance(clicks, str):
            clicked = _id_list(clicks, i, "clicks")
        else:
            values = list(clicks) if clicks is not None and not isinstance(clicks, float) else []
            binary = len(values) == len(shown) and all(isinstance(v, (bool, int)) and v in (0, 1) for v in values)
            clicked = [d for d, c in zip(shown, values) if c] if binary and values else [str(v) for v in values]
        out.append((sid, str(query), shown, clicked))
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
) -> ClickModelFit:
    """Fit a click model to sessions, as ``onlineeval clicks fit``.

    Parameters
    ----------
    sessions:
        A DataFrame with columns ``query``, ``docs`` (shown document ids in rank order: a
        list or a comma-separated string), ``clicks`` (the clicked ids, or 0/1 aligned with
        ``docs``) and optionally ``session``; a :class:`clickmodels.logs.ClickLog`; or a
        click-log file (tsv, jsonl, yandex).
    model:
        A model name of ``onlineeval clicks`` (gctr, rctr, dctr, cm, dcm, sdbn, pbm, ubm,
        dbn, ccm, or an alias such as ``cascade``).
    method, max_iter, tol, pseudo:
        ``closed_form`` or ``em``; EM's stopping rule; the Beta(a, a) pseudo-count.
    format:
        The file's format (default from its suffix).

    Returns
    -------
    clickmodels.estimation.base.ClickModelFit
        Its ``save(path)`` writes the JSON of ``clicks fit --out``.

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
    from onlineeval.cli.clicks import fit_name

    key = fit_name(model, "model")
    opts = {k: v for k, v in {"method": method, "max_iter": max_iter, "tol": tol, "pseudo": pseudo}.items()
            if v is not None}
    return fit_log(key, _click_log(sessions, format), **opts)


def evaluate_clicks(
    sessions: SessionsLike,
    models: str | Sequence[str] | Mapping[str, Any] = ("rctr", "pbm", "ubm", "dbn"),
    *,
    test: SessionsLike | None = None,
    test_fraction: float = 0.25,
    seed: int = 0,
    format: str | None = None,
) -> pd.DataFrame:
    """Fit click models on sessions and compare them on held-out sessions, as ``onlineeval clicks evaluate``.

    Parameters
    ----------
    sessions:
        Training sessions (see :func:`fit_clicks`).
    models:
        Model names (``name:em`` for the EM fit of dcm / sdbn) and fitted-parameter ``.json``
        files (labelled ``model (file name)`` as by the CLI), or ``{label: fitted model}``.
    test:
        Held-out sessions; default a random split of ``sessions`` with ``test_fraction``
        held out, drawn with ``numpy.random.default_rng(seed)`` (the CLI's split).

    Returns
    -------
    pandas.DataFrame
        One row per model: ``log_likelihood``, ``perplexity``, ``conditional_perplexity``
        and ``perplexity@r`` per rank (:func:`clickmodels.evaluation.compare`).
    """
    import numpy as np

    from clickmodels.estimation import fit_log
    from clickmodels.evaluation import compare
    from clickmodels.logs import train_test_split
    from onlineeval.cli.clicks import fit_name

    train = _click_log(sessions, format)
    if test is None:
        if not 0 < test_fraction < 1:
            raise ConfigError(("test_fraction",), f"must be in (0, 1), got {test_fraction}")
        train, held = train_test_split(train, test_fraction, np.random.default_rng(seed))
    else:
        held = _click_log(test, format, "test")
    if isinstance(models, Mapping):
        fits = dict(models)
    else:
        names = [m.strip() for m in models.split(",")] if isinstance(models, str) else list(models)
        if not names:
            raise ConfigError(("models",), "give at least one model name")
        fits = {}
        for name in names:
            if str(name).endswith(".json"):  # parameters saved by fit_clicks(...).save / clicks fit --out
                from clickmodels.estimation import load_fit

                fitted = load_fit(name)
                fits[f"{fitted.name} ({Path(name).name})"] = fitted
                continue
            base, _, method = name.partition(":")
            if method not in ("", "em"):
                raise ConfigError(("models",), f"{name}: the only suffix is ':em' (EM fit of dcm, sdbn)")
            fits[name] = fit_log(fit_name(base, "models"), train, **({"method": "em"} if method else {}))
    return compare(fits, held)


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
    return m.sample(labels, rng)
