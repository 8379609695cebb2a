r"""The shared base of the model-based estimators (:mod:`~onlineeval.estimators.dm`,
:mod:`~onlineeval.estimators.dr`, :mod:`~onlineeval.estimators.cascade_dr`): :class:`ClickModelEstimator`, with
the model options, the fit on the log (optionally cross-fitted over ``folds``), the target's expected slot rewards
(:func:`expected_slot_rewards`) and the notes on unseen and rarely shown (query, document) pairs. What the fitted
models assume, how they are fitted and what they cost: :mod:`onlineeval.estimators.dm`'s docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from onlineeval.errors import ConfigError, InputError, finite_number, must_be_one_of
from onlineeval.estimators.base import (
    BoolArray,
    Estimator,
    FloatArray,
    IntArray,
    LoggedData,
    Reward,
    Target,
    Terms,
)

__all__ = ["CLOSED_FORM_NOTE", "EM_BY_DEFAULT", "EM_MAX_ITER", "EM_OR_CLOSED_FORM", "FITTABLE", "RARE_SHOWS",
           "ClickModelEstimator", "Predictions", "expected_slot_rewards", "fold_ids", "slot_rewards_from",
           "target_lists", "target_slot_values"]

#: Click-model names the estimators fit on the log (``cascade`` is an alias of ``cm``).
FITTABLE: tuple[str, ...] = ("pbm", "ubm", "dbn", "sdbn", "cm", "cascade", "dcm", "ccm", "dctr", "rctr", "gctr")
_ALIAS = {"cascade": "cm"}

#: the EM iteration cap of PBM and UBM fitted on the log when ``max_iter`` is not given (EM stops at its tolerance
#: first). clickmodels' own default, 200, stopped a PBM with pseudo-count 0 before its tolerance on the
#: 27,848-impression log of one replicate of ``configs/counterfactual.yaml`` (316 iterations needed: V(B) - V(A)
#: 0.04124 at 200, 0.04104 converged, SE 0.006), and more iterations are needed as the log grows (the tolerance is
#: relative to the log-likelihood); a fit that still stops at the cap says so in its warnings.
EM_MAX_ITER = 1000
#: models fitted by EM when ``method`` is not given (clickmodels' defaults: ``EM_MODELS`` and, since review 15 F5,
#: DCM and SDBN, whose last-click closed forms are biased)
EM_BY_DEFAULT: frozenset[str] = frozenset({"pbm", "ubm", "dbn", "ccm", "dcm", "sdbn"})
#: models with both fits (EM by default, the last-click closed form with ``method="closed_form"``)
EM_OR_CLOSED_FORM: frozenset[str] = frozenset({"dcm", "sdbn"})
#: what the estimators say of the last-click closed form of DCM / SDBN when it is asked for
CLOSED_FORM_NOTE = ("last-click closed form (method='closed_form'): not the maximum likelihood, biased on data from "
                    "the model itself (DM's clicks per query 0.18 low, 190 SE, on 200 logs of the DCM check world); "
                    "EM, the default, is the maximum likelihood")


def expected_slot_rewards(model: Any, query: IntArray, lists: IntArray, reward: Reward) -> FloatArray:
    r"""``(n, k)`` the model's expected per-slot rewards :math:`\hat q_j` of ``lists`` for ``query``.

    ``model`` is any object with ``click_probabilities(Impressions)`` and
    ``conditional_click_probabilities(Impressions, clicks)`` (a :class:`clickmodels.ClickModel`);
    empty slots (``-1``) give 0. See the module docstring for the formulas.
    """
    from clickmodels.base import (
        Impressions,  # lazy: the core does not import clickmodels
    )

    docs = np.asarray(lists, dtype=np.int64)
    n, k = docs.shape
    if n == 0:
        return np.zeros((0, k))
    imp = Impressions(query=np.asarray(query, dtype=np.int64), docs=docs)
    if reward.kind == "additive":
        p = np.asarray(model.click_probabilities(imp), dtype=np.float64)
    else:
        p = np.asarray(model.conditional_click_probabilities(imp, np.zeros((n, k), dtype=bool)), dtype=np.float64)
    return slot_rewards_from(p, docs >= 0, reward, type(model).__name__)


def slot_rewards_from(p: FloatArray, valid: BoolArray | None, reward: Reward, who: str, *,
                      check: bool = True) -> FloatArray:
    r"""Expected slot rewards from a model's click probabilities ``p`` ``(n, k)``: the
    marginals :math:`\hat P(C_j = 1)` for additive rewards, the click probabilities given
    no click above :math:`\hat h_j` for first-click rewards (see the module docstring);
    0 where ``valid`` is false (``None``: ``p`` is 0 at empty slots already). ``check``:
    refuse a wrong shape or non-finite values (a model object's output). Returns a new
    array (``p`` is not modified)."""
    n, k = p.shape if valid is None else valid.shape
    if reward.kind != "additive" and p.shape == (n, k):
        survive = np.cumprod(1.0 - p, axis=1)
        above = np.concatenate([np.ones((n, 1)), survive[:, :-1]], axis=1)
        p = p * above
    if check and (p.shape != (n, k) or not np.all(np.isfinite(p))):
        raise InputError(f"reward model {who}: click probabilities of shape {p.shape} "
                         f"(expected {(n, k)}) or not finite")
    w = reward.position_weights(k)
    weighted = bool(np.any(w != 1.0))
    if valid is None:
        return p * w[None, :] if weighted else np.array(p, dtype=np.float64)
    out = np.where(valid, p, 0.0)
    if weighted:
        out *= w[None, :]
    return out


def target_slot_values(tables: Any, idx: Any, target: Target, k: int) -> tuple[Any, ...]:
    """The target's list for each of the log's distinct queries (``idx``: its pair index), cut or padded to ``k``,
    its slots' pair codes (``-1``: empty, or a pair the log never shows) and, per click-model table in ``tables``
    (e.g. ``attractiveness``), its values at those slots: the model's (its default for a pair the log never shows),
    0 at empty slots. ``(t_uq, t_code, *values)``, each ``(U, k)``: what the linearised intervals of
    :mod:`~onlineeval.estimators.dm` and :mod:`~onlineeval.estimators.dcm_linearisation` read."""
    from clickmodels.base import Impressions  # lazy

    t_uq = target_lists(target, idx.uq, k)
    t_code = idx.lookup(np.arange(idx.uq.size), t_uq)
    slots = Impressions(query=idx.uq, docs=np.maximum(t_uq, 0))
    values = [np.where(t_uq >= 0, np.asarray(t.lookup(slots), dtype=np.float64).reshape(t_uq.shape), 0.0)
              for t in tables]
    return (t_uq, t_code, *values)


def target_lists(target: Target, query: IntArray, k: int) -> IntArray:
    """The deterministic target's lists for ``query``, cut or padded (``-1``) to ``k`` slots.

    Raises :class:`InputError` when the target has no ``rankings`` or is not deterministic
    (its own lists must have probability 1).
    """
    if not hasattr(target, "rankings"):
        raise InputError(f"target {getattr(target, 'name', 'target')!r} gives no rankings; model-based "
                         "estimators need a deterministic ranker")
    t = np.asarray(target.rankings(query), dtype=np.int64)
    if t.ndim != 2 or t.shape[0] != np.asarray(query).shape[0]:
        raise InputError(f"target {getattr(target, 'name', 'target')!r}: rankings of shape {t.shape} for "
                         f"{np.asarray(query).shape[0]} queries")
    if t.shape[1] < k:
        t = np.concatenate([t, np.full((t.shape[0], k - t.shape[1]), -1, dtype=np.int64)], axis=1)
    t = t[:, :k]
    p = target.propensities(np.asarray(query, dtype=np.int64), t).list
    if np.any(np.asarray(p) < 1.0 - 1e-9):
        raise InputError(f"target {getattr(target, 'name', 'target')!r} is not deterministic (its own lists have "
                         "probability < 1); model-based estimators need a deterministic ranker")
    return t


def fold_ids(data: LoggedData, folds: int) -> IntArray:
    """Fold of each impression for cross-fitting over ``folds`` folds: by user (clusters stay whole) when the log
    has users, the users' rank among the log's sorted user ids modulo ``folds`` (the direct and doubly robust
    methods' model fits, adaptive IPS's cross-fitted choice; the simulator's counterfactual design assigns its active
    users the same way); the impression's index modulo ``folds`` without users."""
    if data.user is None:
        return np.arange(data.n, dtype=np.int64) % folds
    inv, _ = data.user_groups  # np.unique's inverse, computed once per log
    return inv.astype(np.int64) % folds


@dataclass(frozen=True, eq=False)
class Predictions:
    """The reward model's predictions for one log and target.

    Attributes
    ----------
    qinv:
        ``(n,)`` each impression's index among the log's distinct queries.
    t_uq:
        ``(U, k)`` the target's list for each distinct query (cut or padded to ``k``).
    q_uq:
        ``(F, U, k)`` expected slot rewards of those lists under the model of each fold
        (``F = 1`` without cross-fitting): computed once per (query, target list).
    fold:
        ``(n,)`` each impression's fold, ``None`` without cross-fitting.
    q_s:
        ``(n, k)`` expected slot rewards of the logged lists (when asked for), each
        impression's from its fold's model.
    traces:
        The fit trace (:class:`clickmodels.estimation.FitTrace`) of each fold's model fitted on the
        log (empty for a given model object).
    """

    qinv: IntArray
    t_uq: IntArray
    q_uq: FloatArray
    fold: IntArray | None
    q_s: FloatArray | None
    traces: tuple[Any, ...] = ()

    def target_rows(self) -> FloatArray:
        """``(n, k)`` expected slot rewards of the target's list of each impression."""
        return self.q_uq[0][self.qinv] if self.fold is None else self.q_uq[self.fold, self.qinv]

    def target_sums(self) -> FloatArray:
        """``(n,)`` expected reward of the target's list of each impression (the DM term)."""
        sums = self.q_uq.sum(axis=2)
        return sums[0][self.qinv] if self.fold is None else sums[self.fold, self.qinv]

    def t_rows(self) -> IntArray:
        """``(n, k)`` the target's list of each impression."""
        return self.t_uq[self.qinv]


@dataclass(frozen=True)
class ClickModelEstimator(Estimator):
    """Shared base of the estimators with a click-model reward model (not registered).

    Parameters
    ----------
    model:
        A click-model name fitted on the log by :mod:`clickmodels.estimation` (one of
        :data:`FITTABLE`; ``cascade`` = ``cm``), or a ready model object (duck-typed:
        ``click_probabilities`` and ``conditional_click_probabilities`` on
        ``clickmodels.Impressions(query=..., docs=...)`` with the log's integer ids).
    method, max_iter, tol:
        Fitting options passed to :func:`clickmodels.estimation.fit_log` (``None``: its defaults: EM, the maximum
        likelihood, for PBM, UBM, DBN, CCM, DCM and SDBN, the closed form, also the maximum likelihood, for CM and
        the CTR models; every EM fit with ``max_iter`` :data:`EM_MAX_ITER` and clickmodels' ``tol``, 1e-9).
        ``method="closed_form"`` fits DCM or SDBN by the last-click closed form instead (on request only: it is
        not the maximum likelihood and is biased on data from the model itself, see :data:`CLOSED_FORM_NOTE`).
        The estimate's ``assumption`` and ``notes["fit"]`` say which fit was used (:meth:`fit_text`). Only with a
        model name.
    pseudo:
        Beta pseudo-count of the fit (default ``None``: 0, the maximum likelihood; only
        with a model name). Not clickmodels' own default of 1: a pseudo-count pulls the
        relevance of every rarely shown (query, document) pair towards 1/2, a bias that
        does not shrink with the log for tail pairs (on the 400,000-impression log of
        ``configs/counterfactual.yaml``, PBM users, pseudo 1 put DM's V(B) - V(A) at 0.0309
        for 0.0233; pseudo 0 at 0.0243).
    folds:
        ``1``: fit on the whole log. ``F > 1``: cross-fitting, the predictions for the
        impressions of fold ``f`` come from a model fitted on the other folds (folds by
        user when the log has users, else by row), so the model never sees the clicks it
        is used to correct. Only with a model name. ``None`` (default): the class's
        :attr:`default_folds` with a model name (the direct method 1, the doubly robust
        estimators 2), 1 with a model object.
    """

    model: Any = "pbm"
    method: str | None = None
    max_iter: int | None = None
    tol: float | None = None
    pseudo: float | None = None
    folds: int | None = None

    #: names allowed for ``model`` (subclasses may restrict)
    allowed_models: ClassVar[tuple[str, ...]] = FITTABLE
    #: ``folds`` when not given and the model is fitted by name
    default_folds: ClassVar[int] = 1

    def __post_init__(self) -> None:
        if self.folds is None:  # frozen: set once, here
            object.__setattr__(self, "folds", self.default_folds if isinstance(self.model, str) else 1)
        if isinstance(self.model, str):
            if self.model.lower() not in self.allowed_models:
                raise ConfigError(("estimator", "model"), f"{self.name}: " + must_be_one_of(
                    self.allowed_models, self.model, note=" (or a fitted model object)"))
        else:
            for meth in ("click_probabilities", "conditional_click_probabilities"):
                if not callable(getattr(self.model, meth, None)):
                    raise ConfigError(("estimator", "model"), f"{self.name}: a model object needs a {meth} method "
                                      f"(a clickmodels.ClickModel), got {type(self.model).__name__}")
            given = [k for k in ("method", "max_iter", "tol", "pseudo") if getattr(self, k) is not None]
            if given or self.folds != 1:
                raise ConfigError(("estimator", (given or ["folds"])[0]),
                                  f"{self.name}: fitting options only apply when the model is given by name")
        if isinstance(self.folds, bool) or not isinstance(self.folds, (int, np.integer)) or self.folds < 1:
            raise ConfigError(("estimator", "folds"), f"must be an integer >= 1, got {self.folds!r}")
        if self.method not in (None, "closed_form", "em"):
            raise ConfigError(("estimator", "method"), f"must be 'closed_form' or 'em', got {self.method!r}")
        # a negative or NaN pseudo-count gave the closed forms silently wrong relevances (clipped ratios)
        for key, low, kinds in (("pseudo", 0.0, (int, float, np.integer, np.floating)),
                                ("tol", 0.0, (int, float, np.integer, np.floating)),
                                ("max_iter", 1, (int, np.integer))):
            value = getattr(self, key)
            if value is None:
                continue
            if not isinstance(value, kinds) or finite_number(value) is None or value < low:
                what = "an integer" if key == "max_iter" else "a finite number"
                raise ConfigError(("estimator", key), f"{self.name}: must be {what} >= {low}, got {value!r}")
        # the instance's assumption names the fit (the class's text, listed by `estimators`, stays general)
        object.__setattr__(self, "assumption", f"{type(self).assumption}; reward model: {self.fit_text()}")

    # ---- the reward model ---------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return _ALIAS.get(self.model.lower(), self.model.lower()) if isinstance(self.model, str) \
            else type(self.model).__name__

    @property
    def aggregated(self) -> bool:
        """Whether the model is fitted from aggregated counts
        (:mod:`onlineeval.estimators.model_fit`): a named model of
        :data:`~onlineeval.estimators.model_fit.FAST_MODELS` with options its fit takes
        (anything else goes to :mod:`clickmodels.estimation`, which also reports bad options)."""
        from onlineeval.estimators.model_fit import FAST_MODELS

        if not isinstance(self.model, str) or self.model_name not in FAST_MODELS:
            return False
        if self.model_name in ("pbm", "ubm"):
            return self.method in (None, "em")
        if self.model_name in EM_OR_CLOSED_FORM:  # dcm: EM (clickmodels, per session) unless the closed form is asked
            return self.method == "closed_form" and self.max_iter is None and self.tol is None
        return self.method in (None, "closed_form") and self.max_iter is None and self.tol is None

    @property
    def fits_by_em(self) -> bool:
        """Whether the model given by name is fitted by EM (the maximum likelihood): :data:`EM_BY_DEFAULT` unless
        ``method="closed_form"``, or ``method="em"``."""
        if not isinstance(self.model, str):
            return False
        return self.method == "em" or (self.method is None and self.model_name in EM_BY_DEFAULT)

    def fit_text(self) -> str:
        """How the reward model is obtained, for the assumption and ``notes["fit"]``: fitted by EM (the maximum
        likelihood, with its iteration cap and tolerance), in closed form (the maximum likelihood for CM and the CTR
        models; for DCM / SDBN the biased last-click approximation, :data:`CLOSED_FORM_NOTE`), or given."""
        if not isinstance(self.model, str):
            return f"a given {self.model_name} model, held fixed"
        pseudo = 0.0 if self.pseudo is None else float(self.pseudo)
        smoothing = "" if pseudo == 0 else f", pseudo-count {pseudo:g}"
        if self.fits_by_em:
            from clickmodels.estimation.base import EMOptions

            cap = EM_MAX_ITER if self.max_iter is None else int(self.max_iter)
            tol = EMOptions().tol if self.tol is None else float(self.tol)  # clickmodels' default
            return (f"{self.model_name} fitted on the log by EM (maximum likelihood; max_iter {cap}, tol {tol:g}"
                    f"{smoothing})")
        if self.model_name in EM_OR_CLOSED_FORM:
            return f"{self.model_name} fitted on the log by the {CLOSED_FORM_NOTE}{smoothing}"
        return f"{self.model_name} fitted on the log in closed form (maximum likelihood{smoothing})"

    def fitted(self, data: LoggedData) -> Any:
        """The reward model for ``data``: an :class:`~onlineeval.estimators.model_fit.AggregatedFit`, a
        :class:`clickmodels.ClickModel` fitted by :mod:`clickmodels.estimation` with its trace (both cached per log
        and options), or the given model."""
        if not isinstance(self.model, str):
            return self.model
        if data.query.size and data.query.min() < 0:
            raise InputError("model-based estimators need query indices >= 0", data.source)
        opts = {k: getattr(self, k) for k in ("method", "max_iter", "tol", "pseudo") if getattr(self, k) is not None}
        opts.setdefault("pseudo", 0.0)  # the maximum likelihood (see the class docstring)
        if self.aggregated:
            from onlineeval.estimators.model_fit import aggregated_fit, check_fittable

            check_fittable(data)
            max_iter = EM_MAX_ITER if self.max_iter is None and self.model_name in ("pbm", "ubm") else self.max_iter
            return aggregated_fit(data, self.model_name, pseudo=float(opts["pseudo"]), max_iter=max_iter,
                                  tol=self.tol)
        from clickmodels.estimation import fit_log  # lazy
        from clickmodels.logs import from_arrays

        if self.max_iter is None and self.fits_by_em:  # every EM fit the same cap (fit_log's own is 200)
            opts["max_iter"] = EM_MAX_ITER

        def compute() -> _Fitted:
            log = from_arrays(data.query, data.shown, data.clicks)
            try:
                res = fit_log(self.model_name, log, **opts)
            except ConfigError as exc:
                raise ConfigError(("estimator", *exc.key_path), f"{self.name}: {exc.message}") from None
            # the model :func:`clickmodels.estimation.fit` returns, with the fit's trace (EM's iterations)
            return _Fitted(res.to_model(log.query_vocab, log.doc_vocab), res.trace)

        return data.cached(("model_fit", "clickmodels", self.model_name, tuple(sorted(opts.items()))), compute)

    def fit_model(self, data: LoggedData) -> Any:
        """The click model fitted on ``data`` (or the given model object): the
        :class:`clickmodels.ClickModel` :func:`clickmodels.estimation.fit` returns."""
        return _as_model(self.fitted(data))

    def predictions(self, data: LoggedData, target: Target, reward: Reward, *,
                    logged: bool | IntArray = False) -> Predictions:
        """The model's expected slot rewards of the target's list per distinct query (and
        fold) and, with ``logged``, of the logged lists (``True``: every impression; an
        index array: those impressions only, in that order); see :class:`Predictions`."""
        from onlineeval.estimators.model_fit import (
            AggregatedFit,
            check_fittable,
            logged_probabilities,
        )

        if self.aggregated and self.folds > 1:
            check_fittable(data)  # the folds' fits are mapped onto the whole log's pairs
        uq, inv = data.query_groups
        t_uq = target_lists(target, uq, data.k)
        if self.folds == 1:
            fold = None
            parts = [self.fitted(data)]
        else:
            fold = fold_ids(data, self.folds)
            if np.unique(fold).size < self.folds:
                raise InputError(f"{self.name}: {self.folds} folds (cross-fitting) need at least {self.folds} "
                                 "users/impressions; set the option folds to 1 to fit on the whole log",
                                 data.source)
            # each fold's training log once per log (cached with its fits): every target, difference and estimator
            # with the same model and options shares the fits
            parts = [self.fitted(data.cached(("model_fit", "fold_log", self.folds, f),
                                             lambda f=f: data.take(fold != f))) for f in range(self.folds)]
        q_uq = np.stack([expected_slot_rewards(_as_model(mdl), uq, t_uq, reward) for mdl in parts])
        q_s = None
        if logged is not False:
            want = None if logged is True else np.asarray(logged, dtype=np.int64)
            q_s = np.zeros((data.n if want is None else want.size, data.k))
            for f, mdl in enumerate(parts):
                if fold is None:
                    pos, rows = None, want
                else:
                    pos = np.flatnonzero(fold == f) if want is None else np.flatnonzero(fold[want] == f)
                    rows = pos if want is None else want[pos]
                p = logged_probabilities(mdl, data, rows, reward) if isinstance(mdl, AggregatedFit) else None
                docs = data.shown if rows is None else data.shown[rows]
                if p is None:
                    part = expected_slot_rewards(_as_model(mdl), data.query if rows is None else data.query[rows],
                                                 docs, reward)
                else:  # a fitted model's probabilities: finite, 0 at empty slots
                    part = slot_rewards_from(p, None, reward, mdl.name, check=False)
                if pos is None:
                    q_s = part
                else:
                    q_s[pos] = part
        traces = tuple(getattr(mdl, "trace", None) for mdl in parts) if isinstance(self.model, str) else ()
        return Predictions(inv, t_uq, q_uq, fold, q_s, tuple(t for t in traces if t is not None))

    def model_notes(self, data: LoggedData, pred: Predictions) -> dict[str, Any]:
        """The notes every model-based estimator reports: the model, how it was fitted (``fit``, :meth:`fit_text`),
        the folds, the target pairs the log never
        shows (:meth:`unseen_notes`) and, for a model fitted by EM, its iterations (per fold) and whether EM
        converged, with a warning where it stopped at ``max_iter`` before its tolerance (the fitted model is then
        not the maximum-likelihood one; PBM with pseudo-count 0 on sparse logs converges slowly)."""
        notes: dict[str, Any] = {"model": self.model_name, "fit": self.fit_text(), "folds": int(self.folds),
                                 **self.unseen_notes(data, pred.t_uq)}
        em = [t for t in pred.traces if getattr(t, "method", "") == "em"]
        if em:
            notes["em_iterations"] = [int(t.iterations) for t in em]
            notes["em_converged"] = all(bool(t.converged) for t in em)
            stopped = [t for t in em if not t.converged]
            if stopped:
                t = stopped[0]
                ll = t.log_likelihood
                change = (f"last relative log-likelihood change {abs(ll[-1] - ll[-2]) / abs(ll[-2]):.1e} > tol "
                          f"{t.tol:g}" if len(ll) >= 2 and ll[-2] else f"no log-likelihood change measured yet, tol "
                          f"{t.tol:g}")  # (SQUAREM records one log-likelihood per cycle of three E-steps)
                notes.setdefault("warnings", []).append(
                    f"{self.name} ({self.model_name}): EM stopped at max_iter {t.max_iter} before its tolerance "
                    f"({change}): the fitted model is not the maximum-likelihood one; raise the option max_iter")
        return notes

    def value_checks(self, data: LoggedData, target: Target, reward: Reward, value: float,
                     se: float, terms: Terms) -> dict[str, Any]:
        r"""A doubly robust estimator (``default_folds`` > 1) whose model is fitted by name on the log it corrects
        (``folds`` 1) computes its cross-fitted value too (``default_folds`` folds of the users) and records it
        (``cross_fitted_value``) with the shift :math:`(\hat V_1 - \hat V_{cf}) / se` (``cross_fit_shift_se``),
        warning where that reaches :data:`CROSS_FIT_SHIFT`; for any other estimator, or where the folds cannot be
        made (too few users, a fold's fit refused), no check (``cross_fit_check`` says why).

        The model then has seen the clicks it corrects, a bias of order (pairs with data) / n that the interval
        leaves out, while the cross-fitted value has none. Measured (mean shift over 40 logs, its SD per log): on
        200 Zipf-distributed queries of 6 candidates, 3 slots, PBM users, 80% uniform logging, 4,000 impressions:
        ``cascade_dr`` with a cascade model -1.19 (SD 0.35; against the exact value -1.16 +- 0.13 SE, cross-fitted
        -0.00), ``dr`` -0.65 (0.34), ``dr_list`` -0.61 (0.57); 40,000: -0.32 (0.10), +0.03 (0.09), +0.01 (0.11); on
        20,000 Zipf-distributed queries of 10 candidates, 5 slots, 30% uniform logging, 10^6 impressions: ``dr``
        -1.30 (0.31, 8 logs), 2.5 million about -0.5 (6 logs). So one log's shift measures the bias to about
        0.1-0.35 SE and the warning fires where it is material, not on every log fitted so
        (``tests/test_dr_cross_fit_check.py``)."""
        if not fitted_on_its_log(self):
            return {}
        try:
            other = cross_fitted_value(self, data, target, reward)
        except InputError as exc:  # e.g. fewer users than folds, or a fold's log the model cannot be fitted on
            return {"cross_fit_check": f"not made: {exc.message}"}
        if math.isnan(other):
            return {"cross_fit_check": "not made: the cross-fitted value is undefined"}
        shift = (value - other) / se
        notes: dict[str, Any] = {"cross_fitted_value": other + reward.offset, "cross_fit_shift_se": shift}
        if abs(shift) >= CROSS_FIT_SHIFT:
            notes["warnings"] = [cross_fit_text(self, "value", shift, f"{other + reward.offset:.6g}")]
        return notes

    @staticmethod
    def unseen_notes(data: LoggedData, t_uq: IntArray) -> dict[str, Any]:
        """How many target (query, document) pairs were never shown for that query in the
        log (``t_uq``: the target's list per distinct query of ``data``), and the share of
        the target's slots over impressions that hold one."""
        from onlineeval.estimators.model_fit import pair_index

        idx = pair_index(data)
        valid_t = t_uq >= 0
        codes = idx.lookup(np.arange(idx.uq.size), t_uq)
        unseen = valid_t & (codes < 0)
        weight = idx.n_q[:, None]
        total = int((weight * valid_t).sum())
        return {
            "target_pairs": _distinct_pairs(t_uq, valid_t),
            "unseen_target_pairs": _distinct_pairs(t_uq, unseen),
            "unseen_slot_share": float(int((weight * unseen).sum()) / total) if total else math.nan,
        }


@dataclass(frozen=True, eq=False)
class _Fitted:
    """A click model fitted by :mod:`clickmodels.estimation` on a log, with its fit trace."""

    model: Any
    trace: Any


def _as_model(fitted: Any) -> Any:
    """The click-model object behind a :meth:`ClickModelEstimator.fitted` result."""
    from onlineeval.estimators.model_fit import AggregatedFit

    return fitted.model if isinstance(fitted, (AggregatedFit, _Fitted)) else fitted


def _distinct_pairs(t_uq: IntArray, mask: BoolArray) -> int:
    """Distinct (query, document) pairs among the ``mask``-ed slots of ``t_uq`` (one row per query)."""
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        return 0
    return int(np.unique(np.stack([rows, t_uq[rows, cols]], axis=1), axis=0).shape[0])


#: a target (query, document) pair the log shows fewer times than this is "rare"
RARE_SHOWS = 10

#: a doubly robust estimator fitted on the log it corrects (folds 1) warns where its cross-fitted value is this many
#: of its standard errors away (:meth:`ClickModelEstimator.value_checks`)
CROSS_FIT_SHIFT = 0.5


def fitted_on_its_log(est: Estimator) -> bool:
    """Whether ``est`` is a doubly robust estimator (cross-fitted by default) told to fit its model by name on the
    whole log it corrects (``folds`` 1)."""
    return (isinstance(est, ClickModelEstimator) and est.folds == 1 and est.default_folds > 1
            and isinstance(est.model, str))


def cross_fitted_value(est: ClickModelEstimator, data: LoggedData, target: Target, reward: Reward) -> float:
    """``est``'s value of ``target`` (without the reward's offset) with its model cross-fitted over its
    ``default_folds`` folds of the users, NaN where undefined (no positive weight); an :class:`InputError` where the
    folds cannot be made or fitted."""
    cross = replace(est, folds=est.default_folds)
    num_u, den_u, _ = cross._cluster_sums(data, cross.terms(data, target, reward))
    return float(num_u.sum() / den_u.sum()) if den_u.sum() > 0 else math.nan


def cross_fit_text(est: ClickModelEstimator, what: str, shift: float, other: str) -> str:
    """The warning of a doubly robust ``est`` fitted on the log it corrects whose ``what`` ("value", "difference") is
    ``shift`` standard errors from its cross-fitted one, ``other`` (formatted)."""
    return (f"{est.name} ({est.model_name} fitted on the log it corrects, folds 1): the {what} is {abs(shift):.2f} "
            f"standard errors {'below' if shift < 0 else 'above'} its cross-fitted {what} {other} (each impression's "
            f"model fitted on the other folds of {est.default_folds} folds of the users, the default; warned from "
            f"{CROSS_FIT_SHIFT:g} SE either way). A model that has seen the clicks it corrects biases a doubly robust "
            "value by about (pairs with data) / n, which the interval leaves out (measured on sparse logs: 0.2-1.3 "
            f"standard errors low); the cross-fitted {what} has no such bias: leave folds at {est.default_folds}")


def cross_fit_difference(est: Estimator, data: LoggedData, target: Target, baseline: Target, reward: Reward,
                         diff: dict[str, Any], pair: str, warnings: list[str]) -> None:
    """The paired difference's own check (``onlineeval estimate --baseline``; record ``diff`` of
    :func:`~onlineeval.estimators.log_estimates.paired_difference`, prefix ``pair``): for a doubly robust ``est``
    fitted on the log it corrects (as :meth:`ClickModelEstimator.value_checks`), the cross-fitted difference, and a
    warning added to ``warnings`` and the record's own where the difference is :data:`CROSS_FIT_SHIFT` of its
    standard errors or more from it (each side's bias need not cancel in the difference); nothing otherwise, nor
    where the difference or its standard error is undefined or the cross-fit cannot be made."""
    value, se = diff.get("estimate"), diff.get("se")
    if not fitted_on_its_log(est) or value is None or se is None or not (math.isfinite(se) and se > 0):
        return
    try:  # (as value_checks: where a cross-fit cannot be made there is no check; each estimate's notes say why)
        other = cross_fitted_value(est, data, target, reward) - cross_fitted_value(est, data, baseline, reward)
    except InputError:
        return
    if math.isnan(other):
        return
    shift = (value - other) / se
    if abs(shift) >= CROSS_FIT_SHIFT:
        warnings.append(f"{pair}: {cross_fit_text(est, 'difference', shift, f'{other:+.6g}')}")
        diff.setdefault("warnings", []).append(warnings[-1])


def _rare_notes(data: LoggedData, t_uq: IntArray) -> dict[str, Any]:
    """Share of the target's slots (over impressions) whose (query, document) pair the
    log shows fewer than :data:`RARE_SHOWS` times: there a fitted model's relevance rests
    on a handful of impressions."""
    from onlineeval.estimators.model_fit import pair_index

    idx = pair_index(data)
    valid_t = t_uq >= 0
    codes = idx.lookup(np.arange(idx.uq.size), t_uq)
    shows = np.where(codes >= 0, idx.shows[np.maximum(codes, 0)], 0)
    rare = valid_t & (shows < RARE_SHOWS)
    weight = idx.n_q[:, None]
    total = int((weight * valid_t).sum())
    return {"rare_shows": RARE_SHOWS,
            "rare_slot_share": float(int((weight * rare).sum()) / total) if total else math.nan}
