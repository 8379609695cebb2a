r"""The direct method (DM): a click model fitted on the log predicts the target's reward.

Estimand: the target's online value :math:`V(\pi)` of a per-slot reward (see
:mod:`onlineeval.estimators.base`). The *reward model* is a click model from
:mod:`clickmodels` fitted by MLE / EM on the log itself (query, shown list, clicks) or
given ready-made. For every logged impression the model's expected reward of the
*target's* list for that query is averaged:

.. math::

    \hat V_{\mathrm{DM}} = c_0 + \frac1n \sum_{i=1}^n \sum_{j=0}^{k-1} \hat q_j(q_i, \mathbf t(q_i)),

with :math:`\mathbf t(q)` the target's list and the model's expected slot rewards

.. math::

    \hat q_j(q, \mathbf t) = w_j\, \hat P(C_j = 1 \mid q, \mathbf t)
        \quad\text{(additive)}, \qquad
    \hat q_j(q, \mathbf t) = w_j\, \hat h_j \prod_{l<j} (1 - \hat h_l),\ \
    \hat h_j = \hat P(C_j = 1 \mid C_{<j} = 0, q, \mathbf t) \quad\text{(first click)}.

The first-click form is exact for every click model: the first click is at ``j`` iff
no slot above is clicked and ``j`` is, and the chain rule over the conditional click
probabilities given no click above gives that probability.

Assumption: the click model is right (its family holds and its parameters are the
truth); a fitted model is consistent when its family holds and every target document
was shown often enough for its query (documents never logged for a query get the
fitted model's default for unseen pairs; their number, and the share of target slots
whose pair was shown fewer than :data:`RARE_SHOWS` times, are in the diagnostics'
notes). Models are fitted by maximum likelihood (pseudo-count 0; DCM and SDBN by EM, whose
last-click closed forms, not the maximum likelihood, are used only with ``method="closed_form"``:
on the 200 logs of 2,500 impressions of the DCM check world DM with the closed form was 0.18 low
in clicks per query, 190 SE, and with EM within 1.5 SE of the exact values,
``tests/test_dm_dcm_world.py``; the estimate's ``assumption`` and ``notes["fit"]`` say which fit
was used). Beta(1, 1)
pseudo-counts pull rarely shown pairs towards relevance 1/2 and biased V(B) - V(A) on
the 400,000-impression log of ``configs/counterfactual.yaml`` by +0.0044 to +0.0076
(8 seeds; truth 0.0233, SE 0.0013).

Interval: for a PBM fitted on the whole log (the default) and additive rewards the
per-impression terms are linearised in the fitted relevances (see
:func:`_pbm_correction`), so the CLT interval carries their fitting error (the
examination is treated as known); over 8 such logs the estimates spread by 0.0012
where the former plug-in SE said 0.00013. Its SE is right, but on sparse logs the
maximum-likelihood relevances of rarely shown pairs bias the value: over 400 logs of
4,000 impressions of 200 Zipf-distributed queries (PBM users) it was 0.71 SE off and
covered 350 of 400 (band 368-390), in band at 20,000 impressions (the coverage audit of
2026-12-02). For other models, first-click rewards or
cross-fitting it is a CLT interval *given the fitted model*, which excludes the fitting
error; ``notes["warnings"]`` says so (a cascade model fitted on each of 100 logs of 2,000
impressions of the cascade check world, reciprocal rank: 22 covered for 95 nominal). The
bootstrap interval (``estimate(n_boot=...)``, the CLI's ``--bootstrap``, a simulation's
``bootstrap``) fits the model again on every resample of the users
(:meth:`DirectMethod.bootstrap_estimates`), so it carries the fitting error whatever the
model (96 of those 100; ``tests/test_dm_bootstrap.py``); a model object given ready-made
is held fixed, as it should be.

Targets must be deterministic rankers (``target.rankings``); lists longer than the
logged ``k`` slots are cut to ``k``, shorter ones padded with empty slots.

Cost: one O(n k) pass indexes the log's (query, document) pairs and counts the fitted
model's sufficient statistics (shows and clicks per (pair, rank), per (pair, rank,
previous click) for UBM, per pair down to the first / last click for CM / DCM's closed form); EM
then costs O(distinct keys) per iteration instead of O(n k) (see
:mod:`onlineeval.estimators.model_fit`; DBN, CCM, and DCM and SDBN by EM, their default, are
fitted per session by :mod:`clickmodels.estimation`). The target's expected reward is computed
once per (distinct query, target list) and weighted by the query's frequency; the
linearised PBM terms take one more O(n k) pass. On 10^6 logged top-10 impressions
(``benchmarks/bench_dm.py``, one core) the PBM direct method takes 0.4 s of CPU (3x plain
IPS on the same log); the former per-slot fit took 8.2 s on 10^5 impressions (25x the
aggregated path there) and about a minute on 10^6. DCM and SDBN by EM (their default, per
session) cost far more than DCM's aggregated closed form: on that 10^6 log dm with dcm took 74.5 s
of CPU against 0.40 s, with sdbn 110 s; on a 27,848-impression top-5 log 1.06 s (dcm, 69
iterations) and 2.1 s (sdbn, 116) against 14 ms, so a bootstrap that refits dcm on 400 resamples
costs about 7 minutes per log. A warm start from the closed form did not cut the iterations (see
``benchmarks/bench_dm.py``).

This module also holds :class:`ClickModelEstimator`, the shared base of the
model-based estimators (:mod:`~onlineeval.estimators.dr`,
:mod:`~onlineeval.estimators.cascade_dr`): model options, fitting (optionally
cross-fitted over ``folds``) and the expected slot rewards.

References
----------
M. Dudík, J. Langford, L. Li, "Doubly robust policy evaluation and learning", ICML 2011
(the direct method as the regression baseline). A. Chuklin, I. Markov, M. de Rijke,
*Click Models for Web Search*, 2015 (the click models and their estimation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from onlineeval.errors import ConfigError, InputError, finite_number, must_be_one_of
from onlineeval.estimators.base import (
    BOOTSTRAP_PROGRESS,
    BoolArray,
    Estimator,
    FloatArray,
    IntArray,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)

__all__ = ["FITTABLE", "ClickModelEstimator", "DirectMethod", "expected_slot_rewards", "target_lists"]

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


def _fold_ids(data: LoggedData, folds: int) -> IntArray:
    """Fold of each impression: by user (clusters stay whole) when the log has users."""
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
            fold = _fold_ids(data, self.folds)
            if np.unique(fold).size < self.folds:
                raise InputError(f"{self.name}: {self.folds} folds (cross-fitting) need at least {self.folds} "
                                 "users/impressions; set the option folds to 1 to fit on the whole log",
                                 data.source)
            parts = [self.fitted(data.take(fold != f)) for f in range(self.folds)]
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


@register_estimator
@dataclass(frozen=True)
class DirectMethod(ClickModelEstimator):
    """The direct method: the mean of the reward model's expected reward of the target's
    list (see the module docstring). Options as in :class:`ClickModelEstimator`
    (default: a PBM fitted by EM on the log)."""

    name = "dm"
    assumption = (
        "the click model is right (fitted: its family holds; consistent, by maximum likelihood, when every target "
        "(query, document) pair is shown often; see notes rare_slot_share); deterministic target"
    )
    needs = ()
    support_level = "any"
    unbiased_under = (("pbm", "additive"), ("pbm", "first_click"))
    biased_under = (("cascade", "additive"), ("cascade", "first_click"))

    def linearised(self, reward: Reward) -> bool:
        """Whether the CLT interval carries the fit's error to first order (a PBM fitted on the whole log, additive
        rewards: :func:`_pbm_correction`, the examination treated as known); otherwise it holds the fitted model
        fixed."""
        return self.model_name == "pbm" and isinstance(self.model, str) and self.folds == 1 \
            and reward.kind == "additive"

    def clt_holds_fixed(self, reward: Reward) -> str | None:
        """The click model fitted on the log, unless the CLT interval is the linearised PBM's (:meth:`linearised`)."""
        return "the click model fitted on the log" if self.refits_in_bootstrap and not self.linearised(reward) \
            else None

    @property
    def refits_in_bootstrap(self) -> bool:
        """True when the model is fitted on the log (given by name): :meth:`bootstrap_estimates` then fits it again
        on every resample (:meth:`resampled_values`), so the bootstrap interval carries the fitting error, which
        the CLT interval of a model held fixed leaves out."""
        return isinstance(self.model, str)

    def resampled_values(self, data: LoggedData, targets: list[Target], reward: Reward | str,
                         multiplicity: IntArray) -> FloatArray:
        """``(len(targets),)`` values (without the reward's offset) on the log whose row ``i`` appears
        ``multiplicity[i]`` times, the model fitted again on it: one resample of the whole pipeline (the rows of a
        cluster drawn twice appear twice and stay one user, so cross-fitting's folds keep them together)."""
        rw = self._reward(reward, data.k)
        rows = np.repeat(np.arange(data.n), np.asarray(multiplicity, dtype=np.int64))
        if rows.size == 0:
            raise InputError(f"{self.name}: an empty bootstrap resample", data.source)
        sub = LoggedData(data.query[rows], data.shown[rows], data.clicks[rows],
                         user=None if data.user is None else data.user[rows], source=data.source, lists_checked=True)
        return np.array([float(self.predictions(sub, t, rw).target_sums().mean()) for t in targets])

    def bootstrap_estimates(self, data: LoggedData, targets: list[Target], reward: Reward | str, n_boot: int,
                            rng: np.random.Generator) -> FloatArray | None:
        """With the model fitted on the log (:attr:`refits_in_bootstrap`): ``(n_boot, len(targets))`` estimates of
        cluster resamples (``data.user``; rows without it) of the log, the model fitted again on each
        (:meth:`resampled_values`; the same resample for every target); ``None`` with a given model (its terms are
        fixed per row and the plain cluster bootstrap of their sums is the same).

        Holding the fitted model fixed, as a bootstrap of the per-user sums does, left its error out: over 200 logs
        of 4,000 impressions of the cascade world of :mod:`onlineeval.estimators.checks` (a cascade model fitted,
        reciprocal rank), that interval and the CLT one covered the exact value 25 times for 190 nominal. Cost: one
        fit per resample: about 1.5 ms for a cascade model in closed form on 4,000 impressions, 70-95 ms for a
        PBM by EM (pseudo-count 0, about 316 iterations, compiled step) on one replicate's 27,848-impression log
        of ``configs/counterfactual.yaml``, so 400 resamples add about 30-40 s to each replicate of a simulation
        (its progress is reported through :data:`~onlineeval.estimators.base.BOOTSTRAP_PROGRESS`)."""
        if not self.refits_in_bootstrap:
            return None
        from onlineeval.stats import cluster_resample_counts

        inv, g = data.user_groups
        out = np.empty((int(n_boot), len(targets)))
        report = BOOTSTRAP_PROGRESS.get()
        names = ", ".join(str(getattr(t, "name", "target")) for t in targets)
        what = f"{self.name} ({self.model_name} fitted again on every resample) of {names}"
        for start, _, counts in cluster_resample_counts(rng, g, int(n_boot)):
            for i, c in enumerate(counts):
                out[start + i] = self.resampled_values(data, targets, reward, c.astype(np.int64)[inv])
                if report is not None:
                    report(what, start + i + 1, int(n_boot))
        return out

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        linearise = self.linearised(reward)
        pred = self.predictions(data, target, reward)
        notes: dict[str, Any] = {**self.model_notes(data, pred), **_rare_notes(data, pred.t_uq)}
        num = pred.target_sums()
        if linearise:
            corr = _pbm_correction(self.fit_model(data), data, target, reward)
            notes["correction_mean"] = float(corr.mean())
            num = num + corr - corr.mean()
            notes["se"] = ("linearised: includes the fitted relevances' error (the examination treated as known), "
                           "the value is the model's")
        else:
            notes["se"] = "given the fitted model: excludes its fitting error"
            if isinstance(self.model, str):
                notes.setdefault("warnings", []).append((
                    f"dm ({self.model_name}): the CLT interval treats the fitted click model as known and excludes "
                    "its fitting error, which can be many times larger; a bootstrap interval (estimate --bootstrap N, "
                    "n_boot=N in the library) fits the model again in every resample and carries it"))
        return Terms(num=num, weights=None, notes=notes)


def _pbm_correction(mdl: Any, data: LoggedData, target: Target, reward: Reward) -> FloatArray:
    r"""Per-impression linearisation of a fitted PBM's DM value in the relevances.

    With :math:`\hat\theta` fixed, the relevance of a pair is (to first order) the
    ratio :math:`\hat\alpha_{qd} = C_{qd}/E_{qd}` of its clicks to its examination
    mass :math:`E_{qd} = \sum_{i: q_i = q}\hat\theta_{\mathrm{slot}_i(d)}`, so the
    influence of impression ``i`` on :math:`\hat V` adds

    .. math::

        \sum_{j:\, s = t_{q_i}^{-1}(d_{ij}) \ge 0} w_s\hat\theta_s\,\frac{n_{q_i}}{E_{q_i d_{ij}}}
            \big(c_{ij} - \hat\theta_j\hat\alpha_{q_i d_{ij}}\big)

    (the PBM-IPS weight with the empirical propensity times the model's residual).
    Its mean is 0 at the moment estimate and near 0 at the MLE (recorded as
    ``notes["correction_mean"]`` and removed, so the value stays the model's); it
    adds the variance of the fitted relevances to the CLT interval.

    ``mdl`` is a PBM (``examination`` and an ``attractiveness`` table). Every factor but
    the click and the slot's examination depends on the (query, document) pair only, so
    they are computed once per pair of the log; one O(n k) pass gathers them.
    """
    from clickmodels.base import Impressions  # lazy
    from onlineeval.estimators.model_fit import cells, pair_index

    idx = pair_index(data)
    k, m = data.k, idx.n_pairs
    theta = np.asarray(mdl.examination, dtype=np.float64)[:k]
    cl = cells(data, "rank")
    exam_mass = np.bincount(cl.pair, cl.shows * theta[cl.exam], minlength=m)  # E_qd
    rho = exam_mass / idx.n_q[idx.qi]
    alpha = np.asarray(mdl.attractiveness.lookup(Impressions(query=idx.query, docs=idx.doc[:, None])),
                       dtype=np.float64)[:, 0]
    # the target's slot of each pair (a repeated target document keeps its first slot)
    t_uq = target_lists(target, idx.uq, k)
    t_code = idx.lookup(np.arange(idx.uq.size), t_uq)
    slot_of = np.full(m, k, dtype=np.int64)
    tq, ts = np.nonzero(t_code >= 0)
    np.minimum.at(slot_of, t_code[tq, ts], ts)
    s = np.minimum(slot_of, k - 1)
    w = reward.position_weights(k)
    ratio = np.where(slot_of < k, w[s] * theta[s] / rho, 0.0)
    # sum_j ratio (c_ij - theta_j alpha): the clicked slots' ratios minus the model's part
    rows, cols = np.nonzero(data.clicks)
    clicked = np.bincount(rows, ratio[idx.code[rows, cols]], minlength=data.n)
    # code -1 (empty slot): the appended 0; einsum, not a (threaded) BLAS product
    expected = np.einsum("ij,j->i", np.append(ratio * alpha, 0.0)[idx.code], theta)
    return clicked - expected
