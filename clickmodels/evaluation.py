"""Evaluating click models on (held-out) click logs.

For a test log of sessions :math:`S` and a model giving each slot a click probability
:math:`q^{(s)}_r`, with clicks :math:`c^{(s)}_r` [CMR15, Sec. 5.1; Grotov et al. 2015]:

* **Log-likelihood** (natural log, mean per session):

  .. math:: LL = \\frac{1}{|S|}\\sum_{s \\in S} \\log P(C^{(s)}_1, \\dots, C^{(s)}_k)
            = \\frac{1}{|S|}\\sum_s \\sum_r \\log P(C_r = c^{(s)}_r \\mid C_{<r} = c^{(s)}_{<r})

* **Perplexity** at rank ``r`` with the marginal click probability
  :math:`q_r = P(C_r = 1)` (no knowledge of other clicks), over the :math:`S_r` sessions
  that show a document at rank ``r``:

  .. math:: p_r = 2^{-\\frac{1}{|S_r|}\\sum_{s \\in S_r}
            \\left(c^{(s)}_r \\log_2 q^{(s)}_r + (1 - c^{(s)}_r)\\log_2(1 - q^{(s)}_r)\\right)}

  and the overall perplexity is the mean :math:`\\frac{1}{k}\\sum_r p_r` over ranks.
  Perplexity is 1 for a perfect model and 2 for a coin flip; lower is better.
* **Conditional perplexity**: the same with :math:`q_r = P(C_r = 1 \\mid C_{<r})`
  given the session's observed clicks above ``r``.

Probabilities are clipped to ``[PROB_EPS, 1 - PROB_EPS]`` (see
:mod:`clickmodels.estimation.base`) so an impossible event costs a finite amount.

Unseen (query, document) pairs of the test log get each fitted table's ``default``: the
impression-weighted mean of the fitted parameter over the training pairs
(:meth:`~clickmodels.estimation.base.PairTable.from_codes`); rank parameters fitted on
shorter lists extend with their last value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from clickmodels.estimation.base import PROB_EPS, bernoulli_log_likelihood
from clickmodels.logs import ClickLog
from onlineeval.errors import InputError, must_be_one_of

__all__ = [
    "ClickPredictor",
    "Evaluation",
    "perplexity_by_rank",
    "log_likelihood",
    "evaluate",
    "compare",
    "clipped_sessions",
    "ModelOnLog",
]


class ClickPredictor(Protocol):
    """Anything that gives per-slot click probabilities for a log (e.g. a ``ClickModelFit``)."""

    def click_probs(self, log: ClickLog) -> np.ndarray: ...

    def conditional_click_probs(self, log: ClickLog) -> np.ndarray: ...


@dataclass(frozen=True)
class ModelOnLog:
    """Adapter: a :class:`clickmodels.ClickModel` evaluated on logs by their integer codes.

    The model's :class:`~clickmodels.ByQueryDoc` tables must use the log's codes (fit with
    :func:`clickmodels.estimation.fit` on the training log and pass
    ``test.recode_like(train)``).
    """

    model: Any

    def _imp(self, log: ClickLog) -> Any:
        return log.impressions()

    def click_probs(self, log: ClickLog) -> np.ndarray:
        return np.asarray(self.model.click_probabilities(self._imp(log)), dtype=float)

    def conditional_click_probs(self, log: ClickLog) -> np.ndarray:
        return np.asarray(self.model.conditional_click_probabilities(self._imp(log), log.clicks), dtype=float)


@dataclass(frozen=True)
class Evaluation:
    """Quality of one model on one log.

    Attributes
    ----------
    model:
        The model's label.
    n_sessions:
        Sessions evaluated.
    log_likelihood:
        Mean :math:`\\log P(C)` per session (natural log).
    perplexity, conditional_perplexity:
        Mean over ranks of the per-rank values.
    perplexity_by_rank, conditional_perplexity_by_rank:
        ``(k,)`` per-rank values (NaN at a rank no session shows).
    n_clipped:
        Sessions with an observed click or skip to which the model gives a conditional
        probability below ``PROB_EPS`` (e.g. a second click under the cascade model): their
        log-likelihood is charged ``log(PROB_EPS)`` = -23.03 per such slot, not minus infinity.
    """

    model: str
    n_sessions: int
    log_likelihood: float
    perplexity: float
    conditional_perplexity: float
    perplexity_by_rank: np.ndarray
    conditional_perplexity_by_rank: np.ndarray
    n_clipped: int = 0


def _check_probs(p: np.ndarray, log: ClickLog, what: str) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    if p.shape != log.docs.shape:
        raise InputError(f"{what}: expected shape {log.docs.shape}, got {p.shape}", log.source)
    if np.any(~np.isfinite(p[log.shown])) or np.any((p < 0) | (p > 1)):
        raise InputError(f"{what}: probabilities outside [0, 1]", log.source)
    return p


def _bits(p: np.ndarray, clicks: np.ndarray) -> np.ndarray:
    q = np.clip(p, PROB_EPS, 1.0 - PROB_EPS)
    return np.where(clicks, np.log2(q), np.log2(1.0 - q))


def perplexity_by_rank(p: np.ndarray, clicks: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """``(k,)`` :math:`p_r = 2^{-\\text{mean}_s[c\\log_2 q + (1-c)\\log_2(1-q)]}` over shown slots."""
    bits = np.where(shown, _bits(p, clicks), 0.0).sum(axis=0)
    count = shown.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.exp2(-bits / np.maximum(count, 1)), np.nan)


def log_likelihood(p_conditional: np.ndarray, clicks: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """``(n,)`` :math:`\\sum_r \\log P(C_r = c_r \\mid C_{<r})` (natural log) per session.

    The same definition (and clipping) as a fitted record's
    :meth:`~clickmodels.estimation.base.ClickModelFit.log_likelihood`:
    :func:`~clickmodels.estimation.base.bernoulli_log_likelihood`.
    """
    return bernoulli_log_likelihood(p_conditional, clicks, shown)


def clipped_sessions(p_conditional: np.ndarray, clicks: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: sessions with a shown slot whose observed outcome has probability below ``PROB_EPS``
    (clipped up to it in :func:`log_likelihood`)."""
    observed = np.where(clicks, p_conditional, 1.0 - p_conditional)
    return np.any(shown & (observed < PROB_EPS), axis=1)


def evaluate(model: ClickPredictor | Any, log: ClickLog, label: str | None = None) -> Evaluation:
    """Log-likelihood, perplexity and conditional perplexity of ``model`` on ``log``.

    Parameters
    ----------
    model:
        A fitted-parameter record (:class:`~clickmodels.estimation.ClickModelFit`), any
        :class:`ClickPredictor`, or a :class:`clickmodels.ClickModel` (wrapped in
        :class:`ModelOnLog`).
    log:
        The evaluation log (not modified).
    label:
        Name in the result (default: the model's ``name``).
    """
    predictor: ClickPredictor = model if hasattr(model, "click_probs") else ModelOnLog(model)
    name = label or str(getattr(model, "name", type(model).__name__))
    shown, clicks = log.shown, log.clicks
    p = _check_probs(predictor.click_probs(log), log, f"{name} click probabilities")
    pc = _check_probs(predictor.conditional_click_probs(log), log, f"{name} conditional click probabilities")
    per_rank = perplexity_by_rank(p, clicks, shown)
    cond_rank = perplexity_by_rank(pc, clicks, shown)
    return Evaluation(
        model=name,
        n_sessions=log.n_sessions,
        log_likelihood=float(log_likelihood(pc, clicks, shown).mean()),
        perplexity=float(np.nanmean(per_rank)),
        conditional_perplexity=float(np.nanmean(cond_rank)),
        perplexity_by_rank=per_rank,
        conditional_perplexity_by_rank=cond_rank,
        n_clipped=int(clipped_sessions(pc, clicks, shown).sum()),
    )


def compare(
    models: Mapping[str, ClickPredictor | Any] | Sequence[Any], log: ClickLog, *, on_error: str = "raise"
) -> pd.DataFrame:
    """A table with one row per model: LL, perplexity, conditional perplexity, per-rank perplexity.

    With ``on_error="row"`` a model that cannot score ``log`` (it raises :class:`InputError`, e.g.
    a position model fitted on shorter lists) gets a row of NaN with the reason in a last column
    ``refused`` (``""`` for the models that scored; the column is there only when a model was
    refused) instead of stopping the comparison.

    Columns: ``log_likelihood``, ``perplexity``, ``conditional_perplexity``, ``n_sessions``,
    ``n_clipped`` (sessions whose log-likelihood hit the ``PROB_EPS`` floor, see
    :class:`Evaluation`), then ``perplexity@1 .. perplexity@k``. Index: the model labels (mapping keys, or each
    model's ``name``), in the given order.
    """
    if on_error not in ("raise", "row"):
        raise ValueError(must_be_one_of(("raise", "row"), on_error, "on_error"))
    items = list(models.items()) if isinstance(models, Mapping) else [(None, m) for m in models]
    rows = []
    for label, model in items:
        try:
            ev = evaluate(model, log, label)
        except InputError as exc:
            if on_error == "raise":
                raise
            name = label or str(getattr(model, "name", type(model).__name__))
            rows.append({"model": name, "log_likelihood": np.nan, "perplexity": np.nan,
                         "conditional_perplexity": np.nan, "n_sessions": log.n_sessions, "n_clipped": np.nan,
                         "refused": exc.message})
            continue
        row: dict[str, Any] = {
            "model": ev.model,
            "log_likelihood": ev.log_likelihood,
            "perplexity": ev.perplexity,
            "conditional_perplexity": ev.conditional_perplexity,
            "n_sessions": ev.n_sessions,
            "n_clipped": ev.n_clipped,
        }
        row.update({f"perplexity@{r + 1}": v for r, v in enumerate(ev.perplexity_by_rank)})
        rows.append(row)
    table = pd.DataFrame(rows).set_index("model")
    if "refused" in table.columns:  # the reason last, after the per-rank columns
        table = table[[c for c in table.columns if c != "refused"] + ["refused"]]
        table["refused"] = table["refused"].fillna("")
    return table
