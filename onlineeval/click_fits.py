"""Click-model fits as ``onlineeval clicks`` and the Python API (:func:`onlineeval.fit_clicks`,
:func:`onlineeval.evaluate_clicks`) both run them: the one list of fitted models and their names
(:data:`FIT_MODELS`), the requests of ``--models`` (:func:`resolve_models`, :func:`fit_models`), the checks made
before a log is read (:func:`check_method`, :func:`check_bootstrap`), the options each fingerprint hashes
(:func:`fit_options`, :func:`evaluate_options`) and what ``clicks evaluate``'s numbers mean
(:func:`evaluate_conventions`). The command line (:mod:`onlineeval.cli.clicks`) and the API import them from
here, so the two cannot drift apart and the API does not depend on the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FIT_MODELS", "MAX_REFITS", "MODEL_LIST", "NOT_FITTED", "PRINTED_CONVENTIONS", "ModelRequest",
           "check_bootstrap", "check_method", "em_lists", "evaluate_conventions", "evaluate_options", "fit_models",
           "fit_name", "fit_options", "resolve_models", "same_file"]

#: the most bootstrap replicates `clicks fit --bootstrap` takes (each refits the model on a resample of the sessions)
MAX_REFITS = 100_000

#: The one list of click models ``clicks fit`` / ``clicks evaluate`` fit: estimator name ->
#: (what it is, the other names accepted for it: clickmodels' aliases and the ``simulate``
#: model names that denote the same model). Help, errors and the README list come from it;
#: ``tests/test_clicks_names.py`` checks it against ``clickmodels.estimation.ESTIMATORS``,
#: ``ALIASES`` and ``clickmodels.available()``.
FIT_MODELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "gctr": ("global CTR, the random click model", ("random", "rcm")),
    "rctr": ("CTR by rank", ()),
    "dctr": ("CTR by (query, document)", ()),
    "cm": ("cascade model: the user stops after the first click", ("cascade", "cascade_model")),
    "dcm": ("dependent click model: continues after a click with probability lambda_r", ()),
    "sdbn": ("simplified DBN", ()),
    "pbm": ("position-based model", ()),
    "ubm": ("user browsing model", ()),
    "dbn": ("dynamic Bayesian network model", ()),
    "ccm": ("click chain model", ()),
}

#: ``simulate`` click models without an estimator, and why
NOT_FITTED: dict[str, str] = {
    "rbp": "the RBP user's persistence p is a setting, not fitted; fit pbm for position bias",
    "metric": "a metric-derived user's C/W/L weights come from the metric, not from a log",
}

#: the list as help and errors print it
MODEL_LIST = ", ".join(f"{k}" + (f" (= {', '.join(a)})" if a else "") for k, (_, a) in FIT_MODELS.items())


def fit_name(name: str, option: str) -> str:
    """The estimator for a model name (estimator name, alias or ``simulate`` name).

    Raises
    ------
    ConfigError
        Naming ``option``, with the list of names, for a name without an estimator.
    """
    from onlineeval.errors import ConfigError

    if not isinstance(name, str):  # (the Python API: anything may be passed)
        raise ConfigError((option,), f"must be a click-model name (text), got {type(name).__name__}; allowed: "
                          f"{MODEL_LIST}")
    key = name.strip().lower()
    for estimator, (_, others) in FIT_MODELS.items():
        if key == estimator or key in others:
            return estimator
    why = f" ({NOT_FITTED[key]})" if key in NOT_FITTED else ""  # simulate-only models say why
    raise ConfigError((option,), f"no estimator for click model {name!r}{why}; allowed: {MODEL_LIST}")


@dataclass(frozen=True)
class ModelRequest:
    """One entry of ``clicks evaluate --models`` / ``onlineeval.evaluate_clicks(models=...)``: a model to fit
    (``name``, ``name:em`` or ``name:closed_form``) or the parameters a fit saved (a ``.json`` file)."""

    given: str  # as written: the label of a refitted model's row
    estimator: str | None = None  # the estimator's name (fit_name); None for a saved fit
    method: str | None = None  # "em" / "closed_form" for name:em / name:closed_form, else None
    path: Path | None = None  # the saved fit, else None

    @property
    def base(self) -> str:
        """The model name as written, without its ``:em`` / ``:closed_form``."""
        return self.given.partition(":")[0]


def resolve_models(models: str | Sequence[str], option: str) -> list[ModelRequest]:
    """The models of a comma-separated list or a sequence of names, all checked before any log is read.

    Empty names are skipped (``"pbm,dbn,"``); a name ending in ``.json`` is a saved fit; any other is a model
    name (:func:`fit_name`) with an optional ``:closed_form`` (dcm, sdbn: their last-click closed form, biased
    on data from the model itself, instead of the default EM fit) or ``:em`` (the default; accepted for dcm, sdbn
    and the models always fitted by EM).

    Raises
    ------
    ConfigError
        Naming ``option``: no model, an unknown name, another suffix than ``:em`` / ``:closed_form``, a suffix
        the model does not take, or a name given twice
        (one row per name: the second would silently replace the first).
    """
    from onlineeval.errors import ConfigError

    items = models.split(",") if isinstance(models, str) else [str(m) for m in models]
    names = [m.strip() for m in items if m.strip()]
    if not names:
        raise ConfigError((option,), "give at least one model name")
    out: list[ModelRequest] = []
    for name in names:
        if name in (r.given for r in out):
            raise ConfigError((option,), f"{name} is given twice; give each model once")
        if name.endswith(".json"):  # parameters saved by clicks fit --out / fit_clicks(...).save
            out.append(ModelRequest(name, path=Path(name)))
            continue
        base, _, method = name.partition(":")
        estimator = fit_name(base, option)
        if method not in ("", "em", "closed_form"):
            raise ConfigError((option,), f"{name}: the suffixes are ':closed_form' (dcm, sdbn: the last-click "
                              "closed form) and ':em' (the default EM fit)")
        check_method(estimator, method or None, option)
        out.append(ModelRequest(name, estimator, method or None))
    return out


def fit_models(requests: Sequence[ModelRequest], train: Any,
               options: Callable[[ModelRequest], dict] | None = None) -> dict[str, Any]:
    """``{label: fitted model}`` for :func:`resolve_models`' requests: each model fitted on ``train`` with
    ``fit_log``'s keyword ``options(request)`` (default: the request's ``method``), each saved fit loaded
    and labelled ``model (file name)``."""
    from clickmodels.estimation import fit_log, load_fit

    fits: dict[str, Any] = {}
    for r in requests:
        if r.path is not None:
            fitted = load_fit(r.path)
            fits[f"{fitted.name} ({r.path.name})"] = fitted
        else:
            opts = options(r) if options is not None else ({"method": r.method} if r.method else {})
            fits[r.given] = fit_log(r.estimator, train, **opts)
    return fits



def em_lists() -> tuple[str, str]:
    """The models fitted by EM only, and those fitted by EM unless ``--method closed_form``, in
    :data:`FIT_MODELS` order."""
    from clickmodels.estimation import EM_MODELS, EM_OPTIONAL

    return (", ".join(k for k in FIT_MODELS if k in EM_MODELS), ", ".join(k for k in FIT_MODELS if k in EM_OPTIONAL))



def check_method(key: str, method: str | None, option: str) -> None:
    """``method`` (``None``, ``"em"``, ``"closed_form"``) is one the estimator ``key`` has."""
    from clickmodels.estimation import EM_MODELS, EM_OPTIONAL
    from onlineeval.errors import ConfigError

    if method == "em" and key not in EM_MODELS | EM_OPTIONAL:
        always, optional = em_lists()
        raise ConfigError((option,), f"{key} is fitted in closed form only (em: {always}, {optional})")
    if method == "closed_form" and key in EM_MODELS:
        raise ConfigError((option,), f"{key} has no closed form; it is fitted by EM")



def _smoothing_text(groups: dict[float, list[str]]) -> str:
    parts = [f"a = {a:g}{' (plain MLE)' if a == 0 else ''}: {', '.join(names)}" for a, names in sorted(groups.items())]
    return "; ".join(parts)


#: the keys of :func:`evaluate_conventions` the ``conventions:`` line of ``clicks evaluate`` joins
PRINTED_CONVENTIONS = ("log_likelihood", "perplexity", "clipping", "smoothing", "unseen_pairs")


def evaluate_conventions(fits: dict[str, Any]) -> dict[str, str]:
    """What the numbers of ``clicks evaluate`` / ``evaluate_clicks`` mean, for fitted models ``{label: fit}``.

    The CLI prints the :data:`PRINTED_CONVENTIONS` joined by ``; ``; ``evaluate_clicks`` returns all of
    them in ``DataFrame.attrs["conventions"]``.
    """
    from clickmodels.estimation.base import PROB_EPS

    smoothing: dict[float, list[str]] = {}
    unrecorded = []
    for label, fitted in fits.items():
        pseudo = getattr(getattr(fitted, "trace", None), "pseudo", None)
        if pseudo is None:
            unrecorded.append(label)
        else:
            smoothing.setdefault(pseudo, []).append(label)
    return {
        "log_likelihood": "log-likelihood = mean natural-log probability of a session's clicks",
        "perplexity": "perplexity = mean over ranks of 2^(-mean log2 likelihood of the click at that rank) from "
        "marginal click probabilities, conditional perplexity the same given the clicks above",
        "clipping": f"probabilities clipped to [{PROB_EPS:g}, 1 - {PROB_EPS:g}]",
        "smoothing": "estimates smoothed with Beta(a, a) pseudo-counts, "
        f"{_smoothing_text(smoothing) or 'none recorded'}"
        f"{'; not recorded in the file: ' + ', '.join(unrecorded) if unrecorded else ''}",
        "unseen_pairs": "(query, document) pairs unseen in training get the impression-weighted mean of the fitted "
        "values",
        "n_clipped": f"n_clipped = test sessions with a click or skip the model gives probability below {PROB_EPS:g} "
        f"(each such slot costs log({PROB_EPS:g}) = {math.log(PROB_EPS):.2f} in the log-likelihood)",
        "refused": "refused (only when a model cannot score the test log): the reason; that model's numbers are NaN",
        "estimators": "; ".join(f"{label}: {getattr(f, 'estimator', 'not a fitted record')}"
                                for label, f in fits.items()),
    }



def check_bootstrap(key: str, bootstrap: Any, seed: Any, bootstrap_key: str, seed_key: str) -> None:
    """``clicks fit --bootstrap N --seed S``'s and :func:`onlineeval.fit_clicks`'s ``bootstrap=N, seed=S`` checks
    (before the log is read), the errors naming ``bootstrap_key`` / ``seed_key`` as the caller spells them: a model
    with standard errors, an integer in [2, :data:`MAX_REFITS`], a seed only with a bootstrap, a non-negative one."""
    import numbers

    from clickmodels.estimation.bootstrap import SE_MODELS
    from onlineeval.errors import ConfigError, check_seed

    if bootstrap is None:
        if seed is not None:
            raise ConfigError((seed_key,), f"applies to {bootstrap_key} only")
        return
    if key not in SE_MODELS:
        raise ConfigError((bootstrap_key,), f"standard errors are available for {', '.join(SE_MODELS)}, not {key}")
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, numbers.Integral) or not 2 <= bootstrap <= MAX_REFITS:
        raise ConfigError((bootstrap_key,), f"must be an integer in [2, {MAX_REFITS:,}] (replicates, one refit of "
                          f"the model each), got {bootstrap!r}")
    if seed is not None:
        check_seed(seed, seed_key)


def fit_options(model: str, format: str | None, max_iter: int | None = None, tol: float | None = None,
                pseudo: float | None = None, method: str | None = None, plain_em: bool = False,
                bootstrap: int | None = None, seed: int | None = None) -> dict[str, Any]:
    """The options that determine ``clicks fit``'s numbers, as its fingerprint hashes them (the CLI and
    :func:`onlineeval.fit_clicks` build them here, so the same file and options give the same fingerprint)."""
    return {"command": "clicks fit", "model": model, "format": format, "max_iter": max_iter, "tol": tol,
            "plain_em": plain_em, "pseudo": pseudo, "method": method, "bootstrap": bootstrap, "seed": seed}


def evaluate_options(models: list[str], format: str | None, test_format: str | None, has_test: bool,
                     test_fraction: float, seed: int, max_iter: int | None = None, tol: float | None = None,
                     plain_em: bool = False) -> dict[str, Any]:
    """The options that determine ``clicks evaluate``'s numbers, as its fingerprint hashes them (the CLI and
    :func:`onlineeval.evaluate_clicks` build them here, so the same files and options give the same fingerprint):
    the models as given, the formats, the split (the fraction and seed of a random one) and the EM options."""
    return {"command": "clicks evaluate", "models": models, "format": format,
            "test_format": (test_format or format) if has_test else None,
            "test_fraction": None if has_test else test_fraction, "seed": None if has_test else seed,
            "max_iter": max_iter, "tol": tol, "plain_em": plain_em}



def same_file(a: Path, b: Path) -> bool:
    """Whether two log paths are one file, or two files of the same bytes (a copy)."""
    if a.resolve() == b.resolve():
        return True
    if not (a.is_file() and b.is_file()) or a.stat().st_size != b.stat().st_size:
        return False
    from onlineeval.io.digest import file_sha256

    return file_sha256(a) == file_sha256(b)
