"""Estimation of click models from logs: closed forms and EM, vectorised over sessions.

Use :func:`fit_log` to get a typed record of fitted parameters (a
:class:`~clickmodels.estimation.base.ClickModelFit`) for a model name, or
:func:`fit` (what :meth:`clickmodels.ClickModel.fit` calls) to get a fitted
:class:`~clickmodels.ClickModel` of the same class as a given model.

==========  =====================================  ==========================
name        model                                  method
==========  =====================================  ==========================
``gctr``    global CTR (= random click model)      closed form
``rctr``    CTR by rank                            closed form
``dctr``    CTR by (query, document)               closed form
``cm``      cascade model                          closed form
``dcm``     dependent click model                  EM (or closed form*)
``sdbn``    simplified DBN                         EM (or closed form*)
``pbm``     position-based model                   EM
``ubm``     user browsing model                    EM
``dbn``     dynamic Bayesian network model         EM
``ccm``     click chain model                      EM
==========  =====================================  ==========================

The closed forms of the CTR baselines and CM are maximum-likelihood estimates; those marked *
(DCM, SDBN) are the last-click approximations of the literature (PyClick's default), not
the MLE, and biased on data from the model itself, by many standard errors at usual log sizes:
they take the last click as where the user stopped, while under the model a user may go on
past it without clicking again. On 1e5 sessions simulated from DCM (6 ranks, lambda 0.85 to
0.55) the closed form's lambda is 0.12 too low on average over ranks 1-5 (0.30 for 0.61 at
rank 5) and its attractiveness 0.056 too high, a median of 21 standard errors per parameter;
on SDBN its satisfaction is 0.14 and its attractiveness 0.05 too high (5 seeds each,
``tests/test_clickmodels_em_default.py``). So DCM and SDBN are fitted by EM, the maximum
likelihood, by default; ``method="closed_form"`` gives the approximation on request (for
comparison with PyClick and the literature). Every fit records which in
``ClickModelFit.estimator`` (saved as ``fit.estimator``).

Standard errors: :func:`clickmodels.estimation.bootstrap.bootstrap_se` (per-session bootstrap; DCM
and SDBN, whose parameters are identified; ``clicks fit --bootstrap N``).

Adding an estimator is one module: a fit record decorated with
:func:`~clickmodels.estimation.base.register_fit` and a ``fit_<name>(log, ...)`` function
listed in :data:`ESTIMATORS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clickmodels.estimation.base import (
    CONVENTIONS,
    FIT_TYPES,
    ClickModelFit,
    EMOptions,
    FitTrace,
    PairTable,
    fit_from_dict,
    load_fit,
    load_model,
)
from clickmodels.estimation.cascade import CascadeFit, fit_cm
from clickmodels.estimation.ccm import CCMFit, fit_ccm
from clickmodels.estimation.ctr import (
    DocCTRFit,
    GlobalCTRFit,
    RankCTRFit,
    fit_dctr,
    fit_gctr,
    fit_rctr,
)
from clickmodels.estimation.dbn import DBNFit, fit_dbn
from clickmodels.estimation.dcm import DCMFit, fit_dcm
from clickmodels.estimation.pbm import PBMFit, fit_pbm
from clickmodels.estimation.sdbn import SDBNFit, fit_sdbn
from clickmodels.estimation.ubm import UBMFit, fit_ubm
from clickmodels.logs import ClickLog
from onlineeval.errors import ConfigError, InputError, must_be_one_of

__all__ = [
    "ESTIMATORS",
    "EM_MODELS",
    "EM_OPTIONAL",
    "ALIASES",
    "fit_log",
    "fit",
    "build_fitted",
    "load_fit",
    "load_model",
    "fit_from_dict",
    "canonical_name",
    "ClickModelFit",
    "FitTrace",
    "PairTable",
    "EMOptions",
    "CONVENTIONS",
    "FIT_TYPES",
    "GlobalCTRFit",
    "RankCTRFit",
    "DocCTRFit",
    "CascadeFit",
    "DCMFit",
    "SDBNFit",
    "PBMFit",
    "UBMFit",
    "DBNFit",
    "CCMFit",
]

ESTIMATORS: dict[str, Callable[..., ClickModelFit]] = {
    "gctr": fit_gctr,
    "rctr": fit_rctr,
    "dctr": fit_dctr,
    "cm": fit_cm,
    "dcm": fit_dcm,
    "sdbn": fit_sdbn,
    "pbm": fit_pbm,
    "ubm": fit_ubm,
    "dbn": fit_dbn,
    "ccm": fit_ccm,
}
EM_MODELS = frozenset({"pbm", "ubm", "dbn", "ccm"})
#: EM (the MLE) by default, the biased last-click closed form with ``method="closed_form"``
EM_OPTIONAL = frozenset({"dcm", "sdbn"})
ALIASES = {"random": "gctr", "rcm": "gctr", "cascade_model": "cm"}


def canonical_name(name: str) -> str:
    """The estimator name for ``name`` (aliases resolved); ``ConfigError`` if unknown."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in ESTIMATORS:
        allowed = ", ".join([*ESTIMATORS, *ALIASES])
        raise ConfigError(("model",), f"no estimator for click model {name!r}; allowed: {allowed}")
    return key


def fit_log(
    name: str,
    log: ClickLog,
    *,
    method: str | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    pseudo: float | None = None,
    on_iteration: Callable[[int, int, float, float | None], None] | None = None,
    accelerate: bool | None = None,
) -> ClickModelFit:
    """Fit the click model ``name`` to ``log``.

    Parameters
    ----------
    name:
        One of :data:`ESTIMATORS` (or an alias such as ``random``).
    log:
        The training log (not modified).
    method:
        ``"closed_form"`` or ``"em"``; default: EM for :data:`EM_MODELS` and for ``dcm`` and
        ``sdbn`` (:data:`EM_OPTIONAL`: EM gives their exact MLE; ``"closed_form"`` their
        book's last-click approximation, biased on data from the model itself), the closed
        form (the MLE) for the CTR baselines and ``cm``.
    max_iter, tol:
        EM stopping rule (EM fits only; defaults of :class:`EMOptions`).
    pseudo:
        Beta pseudo-count; default: :class:`EMOptions` for EM models, the estimator's
        own default (0 for ``gctr``/``rctr``, 1 otherwise) for closed forms.
    on_iteration:
        EM only: called after every iteration with ``(iteration, max_iter,
        log_likelihood, relative_change)`` (progress of a long fit); ignored by closed forms.
    accelerate:
        EM only: SQUAREM-accelerated EM (default of :class:`EMOptions`: on) or plain EM (False).
    """
    key = canonical_name(name)
    if method not in (None, "closed_form", "em"):
        raise ConfigError(("method",), must_be_one_of(("closed_form", "em"), method))
    use_em = key in EM_MODELS or method == "em" or (method is None and key in EM_OPTIONAL)
    if method == "em" and key not in EM_MODELS | EM_OPTIONAL:
        raise ConfigError(("method",), f"{key} is fitted in closed form only")
    if method == "closed_form" and key in EM_MODELS:
        raise ConfigError(("method",), f"{key} has no closed form; it is fitted by EM")
    if use_em:
        base = EMOptions()
        opt = EMOptions(
            max_iter=base.max_iter if max_iter is None else max_iter,
            tol=base.tol if tol is None else tol,
            pseudo=base.pseudo if pseudo is None else pseudo,
            accelerate=base.accelerate if accelerate is None else accelerate,
            on_iteration=on_iteration,
        )
        if key in EM_OPTIONAL:
            return ESTIMATORS[key](log, method="em", options=opt)
        return ESTIMATORS[key](log, opt)
    if max_iter is not None or tol is not None or accelerate is not None:
        why = "with method='closed_form' has" if key in EM_OPTIONAL else "has a closed form;"
        option = "max_iter" if max_iter is not None else "tol" if tol is not None else "accelerate"
        raise ConfigError((option,), f"{key} {why} no EM options")
    kwargs: dict[str, Any] = {"method": "closed_form"} if key in EM_OPTIONAL else {}
    if pseudo is not None:
        kwargs["pseudo"] = pseudo
    return ESTIMATORS[key](log, **kwargs)


def build_fitted(spec: Mapping[str, Any]) -> Any:
    """A :class:`clickmodels.ClickModel` from a spec naming a fitted-parameters file.

    ``{"name": "ubm", "params_file": "params.json"}`` (as written by
    ``onlineeval clicks fit``): the file's model must match ``name`` (aliases allowed);
    its query and document ids must be integers (the simulator's ids). Errors are
    :class:`~onlineeval.errors.ConfigError` with key paths ``name`` / ``params_file``.
    """
    for key in spec:
        if key not in ("name", "params_file"):
            raise ConfigError((str(key),), "not allowed together with 'params_file' (allowed: name, params_file)")
    path = spec.get("params_file")
    if not isinstance(path, (str, Path)):
        raise ConfigError(("params_file",), f"must be a path to a JSON file, got {path!r}")
    try:
        result = load_fit(path)
        name = spec.get("name", result.name)
        if not isinstance(name, str) or canonical_name(name) != result.name:
            raise ConfigError(("name",), f"{name!r} does not match the model {result.name!r} in {path}")
        return result.to_model()
    except ConfigError:
        raise
    except (InputError, ValueError) as exc:  # ValueError: the model class refuses the parameters
        raise ConfigError(("params_file",), str(exc)) from None
    except OSError as exc:
        raise ConfigError(("params_file",), f"{path}: {exc.strerror or exc}") from None


def fit(model: Any, log: ClickLog, **options: Any) -> Any:
    """Fit ``model`` (a :class:`clickmodels.ClickModel` or a name) to ``log``.

    Returns a new model of the same class whose per-document parameters are
    :class:`clickmodels.ByQueryDoc` tables keyed by the codes of ``log.query_vocab`` /
    ``log.doc_vocab`` (so evaluate it on ``other.recode_like(log)``); ``model`` is not
    touched. Options as in :func:`fit_log`.
    """
    if isinstance(model, str):
        return fit_log(model, log, **options).to_model(log.query_vocab, log.doc_vocab)
    result = fit_log(getattr(model, "name", ""), log, **options)
    return result.to_model(log.query_vocab, log.doc_vocab, cls=type(model))
