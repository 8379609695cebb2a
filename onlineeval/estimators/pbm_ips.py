r"""PBM-IPS: the counterfactual learning-to-rank estimator under the position-based model
(Wang, Bendersky, Metzler and Najork, SIGIR 2016; Joachims, Swaminathan and Schnabel,
WSDM 2017), in its policy-aware form for top-``k`` lists (Oosterhuis and de Rijke,
CIKM 2020).

Estimand and assumption
-----------------------
Clicks follow the position-based model: a document ``d`` shown at slot ``j`` for query
``q`` is clicked with probability :math:`\theta_j\alpha_{qd}`, independently of the other
slots. The target (a deterministic ranker with list :math:`t_q`) then has the value of an
*additive* reward :math:`R = c_0 + \sum_s w_s c_s`

.. math::

    V = c_0 + \mathbb E_q \sum_{s<k} w_s\,\theta_s\,\alpha_{q,t_q(s)}.

A click on ``d`` is evidence of :math:`\alpha_{qd}` discounted by how often ``d`` was
examined under the logger, :math:`\rho_{qd} = \sum_j \mu(d \text{ at } j \mid q)\,\theta_j`,
so each click on a document the target shows at slot :math:`s = t^{-1}(d)` counts

.. math::

    \hat V = c_0 + \frac1n \sum_{i=1}^n \sum_{j:\,c_{ij}=1,\ d_{ij}\in t_{q_i}}
        \frac{w_{s}\,\theta_{s}}{\rho_{q_i d_{ij}}}, \qquad s = t_{q_i}^{-1}(d_{ij}),

and 0 for clicked documents the target does not show in its top ``k``. Three choices of
:math:`\rho` (option ``click_propensity``):

``"auto"`` (default)
    ``"logger"`` when the log carries its logging policy with item-position marginals
    (exact), else ``"empirical"``. ``Terms.notes["click_propensity"]`` says which.
``"empirical"``
    :math:`\hat\rho_{qd} = \frac1{n_q}\sum_{i: q_i = q}\theta_{\mathrm{slot}_i(d)}` (0
    where ``d`` was not shown): the logger's position distribution replaced by its
    frequency in the log. With a deterministic logger it is exactly :math:`\theta_j` of
    the slot ``d`` always has, so the estimate is the classic
    :math:`\sum w_s\theta_s/\theta_j`. With a randomised logger it is *not* exactly
    unbiased: given the slots at which the log shows ``d`` for ``q``, the clicks on it
    sum to :math:`\alpha_{qd}\sum_i\theta_{\mathrm{slot}_i(d)}`, so the pair contributes
    exactly its true value :math:`n_q w_s\theta_s\alpha_{qd}` whenever the log shows it
    at least once, and 0 when it never does:

    .. math::

        \mathbb E[\hat V] - V = -\,\mathbb E_q \sum_s w_s\,\theta_s\,\alpha_{q,t_q(s)}\,
            P\big(t_q(s) \text{ never shown in the } n_q \text{ impressions of } q\big).

    The bias is not :math:`O(1/n_q)` but the (exponentially small in :math:`n_q`) chance
    of never showing a target document; it stays for tail queries at any log size when
    the logger rarely shows the target's documents. Its observable part,
    ``Terms.notes["target_mass_unseen"]`` (the target's examination mass, in reward
    units, on pairs this log never shows), bounds it in expectation (:math:`\alpha\le
    1`); a warning is added to ``notes["warnings"]`` when it exceeds half the standard
    error. Tested by enumerating every two-impression log of a query. Its interval is the
    delta-method one (below, "Interval of the empirical propensity").
``"logger"``
    The exact :math:`\rho_{qd} = \sum_j M_{qdj}\theta_j` from the logging policy's
    item-position marginals :math:`M_{qdj} = P(\text{slot } j \text{ shows } d \mid q)`
    (``data.logger.item_position_marginals(query) -> (n, m, k)``, document ids
    ``0..m-1``, as the policies of :mod:`simulations.policies` give): exactly unbiased
    under support level ``"any"`` (Oosterhuis and de Rijke 2020) with given
    examination probabilities, whatever the log size.
``"logged"``
    :math:`\rho = \theta_j` of the slot the click was logged at (Joachims et al. 2017's
    weight :math:`\theta_s/\theta_j`): exactly unbiased when the logger shows every
    document of the target's top ``k`` on *every* impression (in any order); when it
    shows one only sometimes, the estimate is scaled down by that probability.

Not defined for first-click rewards (the reciprocal rank or abandonment depend on the
documents above, which PBM-IPS does not reweight). Under cascade clicks the examination
of a slot depends on the documents above it, so the estimate is biased (declared).

The examination probabilities :math:`\theta` are given (option ``examination``, only
their ratios matter) or estimated from the log itself
(:mod:`onlineeval.estimators.position_bias`, option ``estimate_with``); an estimated
:math:`\hat\theta` makes the estimate consistent, not unbiased.

Interval of the empirical propensity: with :math:`E_{qd} = \sum_{i:\,q_i=q}\theta_{\mathrm{slot}_i(d)}
= n_q\hat\rho_{qd}` and :math:`C_{qd}` the clicks on ``d`` for ``q``, the estimate sums per query to
:math:`\sum_{i:\,q_i=q}\mathrm{num}_i = n_q\sum_s w_s\theta_s\hat\alpha_{q,t_q(s)}`,
:math:`\hat\alpha_{qd} = C_{qd}/E_{qd}` (0 for pairs never shown): a ratio whose error given
the slots is the click noise :math:`\hat\alpha_{qd}-\alpha_{qd} = \sum_{i:\,q_i=q}
(c_{id}-\alpha_{qd}\theta_{\mathrm{slot}_i(d)})/E_{qd}` only. The plug-in terms
:math:`\sum_{j:\,c_{ij}=1} r_{q_i d_{ij}}`, :math:`r_{qd} = w_s\theta_s/\hat\rho_{qd}`, treat
:math:`\hat\rho` as known and also carry the variation of :math:`\alpha_{qd}\theta_{\mathrm{slot}_i(d)}`
from where the logger happened to put ``d``, which the ratio cancels: their standard error
was 15-40% too large (over-coverage). The terms are therefore the linearised (delta-method)
ones, the influence of each impression on :math:`\hat\alpha` and on the query mean,

.. math::

    \mathrm{num}_i = \sum_{j:\,c_{ij}=1} r_{q_i d_{ij}}
        - \sum_{j\ \mathrm{shown}} r_{q_i d_{ij}}\,\hat\alpha_{q_i d_{ij}}\,\theta_j + a_{q_i},
    \qquad a_q = \sum_{s:\,E_{q,t_q(s)}>0} w_s\,\theta_s\,\hat\alpha_{q,t_q(s)},

(:math:`r = 0` for documents the target does not show). Per pair
:math:`\sum_{i:\,q_i=q}(c_{id}-\hat\alpha_{qd}\theta_{\mathrm{slot}_i(d)}) = C_{qd}-\hat\alpha_{qd}E_{qd} = 0`,
so :math:`\sum_i\mathrm{num}_i` and the estimate are exactly unchanged; the variance is the
clustered variance of these terms like every interval (the bootstrap resamples them too).
With estimated examination the sandwich term :math:`\psi_i` below is added to them
(:math:`\hat V(\hat\theta)-V \approx [\hat V(\theta)-V] + \nabla_\theta\hat V^\top(\hat\theta-\theta)`,
the two linearisations stacked). Measured (95% CLT interval, PBM users, the check world's 4
queries x 5 candidates x 3 slots and a 200-query Zipf(1) world of 6 candidates, logger uniform
with probability 0.8, else one of two target lists; 400 logs of 4,000 impressions, clicks per
query, band 368-390; before -> after, coverage and sd of the estimates / mean SE):

=============================  ===========================  ===========================
examination                    check world                  Zipf world
=============================  ===========================  ===========================
given                          396 -> 376 (0.81 -> 1.04)    395 -> 383 (0.78 -> 0.98)
``harvest``, sandwich          396 -> 380 (0.76 -> 1.00)    396 -> 382 (0.78 -> 0.99)
``em``, sandwich               396 -> 380 (0.76 -> 1.00)    394 -> 377 (0.78 -> 0.99)
``harvest``, ``ignore``        399 -> 389 (0.73 -> 0.93)    396 -> 385 (0.76 -> 0.95)
=============================  ===========================  ===========================

and on 200 logs of 20,000 impressions (band 181-197): given 199 -> 191 (0.72 -> 0.92; 187,
sd/SE 1.04, on a second log set), ``harvest``/``em`` with the sandwich 200 -> 194 (0.68 ->
0.90; 188, 1.03) in the check world, 197 -> 194 (0.83 -> 1.02) and 197 -> 193 (0.81 ->
1.01) in the Zipf world. (In the Zipf world at 4,000 impressions the estimates are 0.23-0.36
of their sd low: the never-shown pairs above.) ``tests/test_pbm_ips_empirical_interval.py``
checks the terms against the infinitesimal jackknife of the estimate and the coverage on the
check world's own logger (397 -> 380 of 400 given, 200 -> 189 of 200 with ``em``).
``"logger"`` and ``"logged"`` keep the plain terms (their propensity is not estimated).

Interval with estimated examination (option ``examination_error``): by default
(``"sandwich"``) each impression's term is :math:`\mathrm{num}_i + \psi_i` with
:math:`\psi_i = \nabla_\theta\hat V^\top\mathrm{IF}_i` the linearised error of
:math:`\hat\theta` (:mod:`onlineeval.estimators.position_bias.influence`;
:func:`value_gradient`): the stacked estimating equations of :math:`\hat\theta` and
:math:`\hat V` (M-estimation sandwich), clustered by user like every interval. The
estimate is unchanged (:math:`\sum_i\psi_i = 0`). ``"ignore"`` keeps the plug-in
interval that treats :math:`\hat\theta` as known. Measured
(``tests/test_pbm_ips_sandwich.py``): on logs whose examination rests on 10% swapped
impressions the 95% plug-in interval covered the exact value 197 times in 300 (203 before
the empirical propensity's terms were linearised), the sandwich 279 (band 275-294; known
examination 288); with ``em`` on 10% shuffled
impressions and users of 4 impressions, 176 and 190 of 200 (band 181-197). With given
examination nothing changes. ``Terms.notes["variance"]`` says which variance was used;
:func:`~onlineeval.estimators.position_bias.pipeline_bootstrap` is the resampling
alternative.
``Terms.notes`` records the examination used and whether it was estimated.

What is unbiased: given examination probabilities with ``"logger"`` (or ``"auto"`` on a
log with its logger), exactly; with ``"empirical"``, up to the never-shown mass above;
with estimated examination, consistent only. On the 400,000-impression direct log of
``configs/counterfactual.yaml`` with PBM users, the former default (``"auto"``
examination picking ``swap`` from about 50 incidental swap pairs per slot, each list seen
about once) was 8 standard errors off (3 to 43 on eight other seeds); ``auto`` now needs swap pairs to hold half
the log and otherwise harvests (``tests/test_estimators_at_scale.py``).

Cost: under ``"empirical"`` and ``"logger"`` every factor of a slot's weight depends on
its (query, document) pair only, so it is computed once per pair and read once per
logged slot; the numerator adds the clicked slots only. On the 10^6-impression top-10
log of ``benchmarks/bench_estimators.py`` (1,000 queries, 20 candidates) one estimate
took 0.25 s of CPU with given examination and 0.9-1.3 s with ``estimate_with="em"``
(sandwich included), against 2.5 s and 47 s before (per-impression EM), on a shared
2-core machine (measured in a separate run per version at about the same load). The
empirical propensity's linearised terms add one read per logged slot: on a 10^6-impression
top-10 log (1,000 queries, 20 candidates, given examination) an estimate took 0.55 s of CPU
against 0.45-0.50 s with the plug-in terms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.estimators.base import (
    Estimator,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)
from onlineeval.estimators.position_bias import (
    METHODS,
    PositionBiasEstimate,
    _groups,
    estimate_examination,
)
from onlineeval.estimators.position_bias._core import log_cache

__all__ = ["EXAMINATION_ERRORS", "PBMIPS", "RARE_SHOWS", "click_propensities", "target_pair_shows", "target_slots",
           "value_gradient"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

CLICK_PROPENSITIES = ("auto", "empirical", "logger", "logged")
#: how an estimated examination's error enters the interval (option ``examination_error``)
EXAMINATION_ERRORS = ("sandwich", "ignore")

#: a (query, document) pair the log shows fewer times than this is "rare" in the notes
RARE_SHOWS = 10


@dataclass(frozen=True, eq=False)
class _Pairs:
    """The (query, document) pairs of a log and a target under one code.

    ``inv``: ``(n,)`` distinct-query index of each impression; ``t``: ``(queries, k)`` the
    target lists (``-1``: empty); ``code_t``: ``(queries, k)`` pair codes of ``t`` (``-1`` on
    empty slots); ``code_log``: pair codes of the log's valid slots (``np.nonzero(data.valid)``
    order; with every slot valid, the ``(n, k)`` code matrix flattened); ``n_codes``: the code
    range; ``pair_query``, ``pair_doc``: ``(n_codes,)`` the distinct-query index and the
    document of each code."""

    inv: IntArray
    t: IntArray
    code_t: IntArray
    code_log: IntArray
    n_codes: int
    pair_query: IntArray
    pair_doc: IntArray

    def code_matrix(self, data: LoggedData) -> IntArray | None:
        """``(n, k)`` codes when every slot is valid (a view), else ``None``."""
        return self.code_log.reshape(data.shown.shape) if self.code_log.size == data.shown.size else None

    def slot_counts(self, data: LoggedData) -> FloatArray:
        """``(n_codes, k)`` how often the log shows each pair at each slot (computed once)."""
        cache = self.__dict__.get("_slot_counts")
        if cache is None:
            k, nc = data.k, self.n_codes
            mat = self.code_matrix(data)
            if mat is not None:  # one pass per column, no (pair, slot) code array
                cache = np.stack([np.bincount(mat[:, j], minlength=nc) for j in range(k)], axis=1).astype(np.float64)
            else:
                _, cols = _valid_positions(data)
                cache = np.bincount(self.code_log * k + cols, minlength=nc * k).reshape(nc, k).astype(np.float64)
            self.__dict__["_slot_counts"] = cache
        return cache  # type: ignore[no-any-return]

    def slot_of(self, k: int) -> IntArray:
        """``(n_codes,)`` the target's slot of each pair (its first, if repeated; ``-1``: not in
        the target's top ``k``)."""
        slot_of = np.full(self.n_codes, k, dtype=np.int64)
        tq, ts = np.nonzero(self.code_t >= 0)
        np.minimum.at(slot_of, self.code_t[tq, ts], ts)
        slot_of[slot_of == k] = -1
        return slot_of

    def codes_at(self, data: LoggedData, rows: IntArray, cols: IntArray) -> IntArray:
        """The pair codes of the valid slots ``(rows, cols)``."""
        mat = self.code_matrix(data)
        if mat is not None:
            return mat[rows, cols]
        out = np.full(data.shown.shape, -1, dtype=np.int64)
        vr, vc = _valid_positions(data)
        out[vr, vc] = self.code_log
        return out[rows, cols]

    def per_position(self, data: LoggedData, per_code: NDArray[Any], empty: Any) -> NDArray[Any]:
        """``(n, k)`` ``per_code`` at each logged slot's pair, ``empty`` on empty slots."""
        mat = self.code_matrix(data)
        if mat is not None:
            return per_code[mat]
        out = np.full(data.shown.shape, empty, dtype=per_code.dtype)
        rows, cols = _valid_positions(data)
        out[rows, cols] = per_code[self.code_log]
        return out


def _target_pairs(data: LoggedData, target: Target) -> _Pairs:
    """The pairs of ``data`` and ``target`` under one code (see :class:`_Pairs`): raw
    ``query * span + document`` codes when that range is small (no sort, no ranking), else
    the ranks of :func:`~onlineeval.estimators.position_bias._groups`."""
    rankings = getattr(target, "rankings", None)
    if rankings is None:
        raise InputError(f"pbm_ips needs a deterministic target with rankings(query); "
                         f"{getattr(target, 'name', 'target')!r} has none", data.source)
    uq, inv = data.query_groups
    k = data.k
    t = np.asarray(rankings(uq), dtype=np.int64)
    if t.ndim != 2 or t.shape[0] != uq.size:
        raise InputError(f"target {getattr(target, 'name', 'target')!r}: rankings must be a (queries, k) matrix",
                         data.source)
    t = t[:, :k]
    if t.shape[1] < k:
        t = np.concatenate([t, np.full((t.shape[0], k - t.shape[1]), -1, dtype=np.int64)], axis=1)
    tq, ts = np.nonzero(t >= 0)
    t_docs = t[tq, ts]
    all_valid = _all_valid(data)
    rows, cols = (None, None) if all_valid else _valid_positions(data)
    log_docs = data.shown if all_valid else data.shown[rows, cols]
    lo = int(min(t_docs.min(initial=0), log_docs.min(initial=0)))
    span = int(max(t_docs.max(initial=0), log_docs.max(initial=0))) - lo + 1
    code_t = np.full(t.shape, -1, dtype=np.int64)
    if uq.size * span <= max(data.shown.size // 2, 1 << 22):
        # dense (query, document) range: the raw code is the pair id
        base = np.arange(uq.size, dtype=np.int64) * span - lo
        code_log = (base[inv][:, None] + data.shown).reshape(-1) if all_valid else base[inv[rows]] + log_docs
        code_t[tq, ts] = base[tq] + t_docs
        n_codes = uq.size * span
        return _Pairs(inv, t, code_t, code_log, n_codes, np.repeat(np.arange(uq.size, dtype=np.int64), span),
                      np.tile(np.arange(lo, lo + span, dtype=np.int64), uq.size))
    # codes of (query, document) over the target's and the log's pairs together
    q_all = np.concatenate([tq, np.repeat(inv, k) if all_valid else inv[rows]])
    keys, code = _groups(np.stack([q_all, np.concatenate([t_docs, log_docs.reshape(-1)])], axis=1))
    code_t[tq, ts] = code[: tq.size]
    return _Pairs(inv, t, code_t, code[tq.size:], int(keys.shape[0]), keys[:, 0].astype(np.int64),
                  keys[:, 1].astype(np.int64))


def _all_valid(data: LoggedData) -> bool:
    """Whether every slot of the log shows a document (computed once per log)."""
    cache = log_cache(data, "pbm_ips")
    if "all_valid" not in cache:
        cache["all_valid"] = bool((data.shown >= 0).all())
    return cache["all_valid"]  # type: ignore[no-any-return]


def _clicked_positions(data: LoggedData) -> tuple[IntArray, IntArray]:
    """``np.nonzero(data.clicks)``, computed once per log (cached)."""
    cache = log_cache(data, "pbm_ips")
    if "clicked" not in cache:
        cache["clicked"] = np.nonzero(data.clicks)
    return cache["clicked"]  # type: ignore[no-any-return]


def _valid_positions(data: LoggedData) -> tuple[IntArray, IntArray]:
    """``np.nonzero(data.valid)``, computed once per log (cached)."""
    cache = log_cache(data, "pbm_ips")
    if "valid" not in cache:
        valid = data.valid
        if valid.all():
            n, k = valid.shape
            cache["valid"] = (np.repeat(np.arange(n, dtype=np.int64), k), np.tile(np.arange(k, dtype=np.int64), n))
        else:
            rows, cols = np.nonzero(valid)
            cache["valid"] = (rows.astype(np.int64), cols.astype(np.int64))
    return cache["valid"]  # type: ignore[no-any-return]


def target_slots(data: LoggedData, target: Target) -> IntArray:
    """``(n, k)`` the slot at which ``target`` shows each logged document in its top ``k``
    for the impression's query (``-1``: not in the target's top ``k``, or an empty slot)."""
    return _slots_from_pairs(data, _target_pairs(data, target))


def _slots_from_pairs(data: LoggedData, pairs: _Pairs) -> IntArray:
    return pairs.per_position(data, pairs.slot_of(data.k), -1)


def target_pair_shows(data: LoggedData, target: Target) -> IntArray:
    """``(n, k)`` how often the log shows (anywhere in its top ``k``) the document the
    target puts at each slot, for the impression's query (``-1`` on the target's empty
    slots). A 0 is a (query, document) pair the ``"empirical"`` propensity counts as 0."""
    pairs = _target_pairs(data, target)
    return _query_shows(data, pairs)[pairs.inv]


def _query_shows(data: LoggedData, pairs: _Pairs) -> IntArray:
    """``(queries, k)`` how often the log shows the target's document at each slot (``-1``:
    empty target slot)."""
    shows = pairs.slot_counts(data).sum(axis=1)
    return np.where(pairs.code_t >= 0, shows[np.maximum(pairs.code_t, 0)], -1).astype(np.int64)


def value_gradient(data: LoggedData, theta: FloatArray, kind: str, w: FloatArray, pairs: _Pairs,
                   rho_pair: FloatArray | None = None) -> FloatArray:
    r"""``(k,)`` :math:`\partial\hat V/\partial\theta_l` of the PBM-IPS value at ``theta``.

    With :math:`\rho = F^\top\theta` linear in :math:`\theta` (``"empirical"``:
    :math:`F_l` = share of the query's impressions showing the document at slot ``l``;
    ``"logger"``: the marginals :math:`M_{qdl}`; ``"logged"``: the indicator of the
    logged slot),

    .. math::

        \frac{\partial\hat V}{\partial\theta_l} = \frac1n\sum_{i, j:\,c_{ij}=1}
            w_s\Big(\frac{[s = l]}{\rho_{ij}} - \frac{\theta_s F_{ij,l}}{\rho_{ij}^2}\Big),

    which satisfies :math:`\nabla\hat V\cdot\theta = 0` (the value depends on ratios only).
    ``pairs``: the codes of :func:`_target_pairs`; ``rho_pair``: the per-pair propensities
    (``"empirical"``, ``"logger"``). Reads only the clicked slots."""
    k = data.k
    theta = np.asarray(theta, dtype=np.float64)[:k]
    rows, cols = _clicked_positions(data)
    code = pairs.codes_at(data, rows, cols)
    s = pairs.slot_of(k)[code]
    keep = s >= 0
    rows, cols, code, s = rows[keep], cols[keep], code[keep], s[keep]
    if kind == "logged":
        r = theta[cols]
    else:
        if rho_pair is None:
            raise ValueError(f"value_gradient: kind {kind!r} needs rho_pair")
        r = rho_pair[code]
    grad = np.bincount(s, w[s] / r, k)
    coef = w[s] * theta[s] / (r * r)
    if kind == "logged":
        grad -= np.bincount(cols, coef, k)
    elif kind == "logger":
        uq, inv = data.query_groups
        m_all = np.asarray(data.logger.item_position_marginals(uq), dtype=np.float64)  # type: ignore[union-attr]
        grad -= coef @ m_all[inv[rows], data.shown[rows, cols], :k]
    else:
        n_q = np.bincount(pairs.inv, minlength=int(pairs.t.shape[0])).astype(np.float64)
        grad -= (coef / n_q[pairs.inv[rows]]) @ pairs.slot_counts(data)[code]
    return grad / data.n


def resolve_click_propensity(data: LoggedData, kind: str) -> str:
    """``"auto"``: ``"logger"`` when ``data.logger`` gives item-position marginals, else
    ``"empirical"``; any other kind is returned as is."""
    if kind != "auto":
        return kind
    return "logger" if callable(getattr(data.logger, "item_position_marginals", None)) else "empirical"


def click_propensities(data: LoggedData, theta: FloatArray, kind: str = "empirical") -> FloatArray:
    r"""``(n, k)`` examination propensity :math:`\rho` of each shown slot (1 on empty slots).

    ``"auto"``: ``"logger"`` when ``data.logger`` has item-position marginals, else
    ``"empirical"``; ``"empirical"``: :math:`\hat\rho_{qd} = \frac1{n_q}\sum_{i:q_i=q}\theta_{\mathrm{slot}_i(d)}`;
    ``"logger"``: :math:`\rho_{qd} = \sum_j M_{qdj}\theta_j` from ``data.logger``'s
    item-position marginals; ``"logged"``: :math:`\theta_j` of the slot itself (see the
    module docstring).
    """
    kind = resolve_click_propensity(data, kind)
    valid = data.valid
    slot_theta = np.where(valid, np.asarray(theta, dtype=np.float64)[None, : data.k], 1.0)
    if kind == "logged":
        return slot_theta
    if kind == "logger":
        return _logger_propensities(data, np.asarray(theta, dtype=np.float64)[: data.k])
    if kind != "empirical":
        raise ConfigError(("click_propensity",), must_be_one_of(CLICK_PROPENSITIES, kind))
    _, qinv, n_q = np.unique(data.query, return_inverse=True, return_counts=True)
    qinv = qinv.reshape(-1)
    rows, cols = np.nonzero(valid)
    _, pair = _groups(np.stack([qinv[rows], data.shown[rows, cols]], axis=1))
    total = np.bincount(pair, slot_theta[rows, cols])
    out = np.ones(data.shown.shape)
    out[rows, cols] = total[pair] / n_q[qinv[rows]]
    return out


def _rho_pairs(data: LoggedData, theta: FloatArray, pairs: _Pairs) -> FloatArray:
    r"""``(n_codes,)`` the ``"empirical"`` propensity of every pair:
    :math:`\frac1{n_q}\sum_j N_{qdj}\theta_j` (0 for pairs the log never shows)."""
    n_q = np.bincount(pairs.inv, minlength=int(pairs.t.shape[0])).astype(np.float64)
    total = np.einsum("cj,j->c", pairs.slot_counts(data), np.asarray(theta, dtype=np.float64)[: data.k])
    return total / n_q[pairs.pair_query]


def _empirical_influence(data: LoggedData, theta: FloatArray, w: FloatArray, pairs: _Pairs, r_pair: FloatArray,
                         c_codes: IntArray, num: FloatArray) -> FloatArray:
    r"""``(n,)`` the ``"empirical"`` PBM-IPS terms linearised in :math:`\hat\rho` (module docstring,
    "Interval of the empirical propensity"): ``num`` (the plug-in terms) minus
    :math:`\sum_{j\,\text{shown}} r_{qd}\hat\alpha_{qd}\theta_j` plus :math:`a_q`, with
    ``r_pair`` :math:`= w_s\theta_s/\hat\rho_{qd}` (0 off the target), ``c_codes`` the pair codes
    of the clicked slots (:func:`_clicked_positions` order). Their sum per query equals the
    plug-in terms' exactly."""
    k = data.k
    e_pair = pairs.slot_counts(data) @ theta[:k]  # E_qd = sum_i theta_slot_i(d)
    c_pair = np.bincount(c_codes, minlength=pairs.n_codes).astype(np.float64)
    shown = e_pair > 0
    alpha = np.where(shown, c_pair / np.where(shown, e_pair, 1.0), 0.0)  # C_qd / E_qd
    b_pair = r_pair * alpha  # 0 off the target's pairs and on pairs never shown
    expected = pairs.per_position(data, b_pair, 0.0) @ theta[:k]
    # a_q = sum over the target's shown pairs of w_s theta_s alpha_hat = (1/n_q) sum_d r_qd C_qd
    n_q = np.bincount(pairs.inv, minlength=int(pairs.t.shape[0])).astype(np.float64)
    a_q = np.bincount(pairs.pair_query, r_pair * c_pair, int(pairs.t.shape[0])) / np.maximum(n_q, 1.0)
    return num - expected + a_q[pairs.inv]


def _empirical_rho(data: LoggedData, theta: FloatArray, pairs: _Pairs) -> FloatArray:
    """The ``"empirical"`` propensities of :func:`click_propensities` from the pair codes of
    :func:`_target_pairs` (no second grouping of the log)."""
    return pairs.per_position(data, _rho_pairs(data, theta, pairs), 1.0)


def _logger_rho_pairs(data: LoggedData, theta: FloatArray, pairs: _Pairs) -> FloatArray:
    """``(n_codes,)`` the ``"logger"`` propensity :math:`\\sum_j M_{qdj}\\theta_j` of every pair
    (errors as :func:`click_propensities`)."""
    marginals = getattr(data.logger, "item_position_marginals", None)
    if marginals is None:
        raise InputError("pbm_ips with click_propensity 'logger' needs the logging policy (data.logger) with "
                         "item_position_marginals(query); use 'empirical' for a log without one", data.source)
    uq, _ = data.query_groups
    m_all = np.asarray(marginals(uq), dtype=np.float64)
    if m_all.ndim != 3 or m_all.shape[0] != uq.size or m_all.shape[2] < data.k:
        raise InputError(f"item_position_marginals: expected ({uq.size}, m, >= {data.k}), got {m_all.shape}",
                         data.source)
    rho_qd = np.einsum("qmj,j->qm", m_all[:, :, : data.k], np.asarray(theta, dtype=np.float64)[: data.k])
    inside = (pairs.pair_doc >= 0) & (pairs.pair_doc < rho_qd.shape[1])
    rho = np.where(inside, rho_qd[pairs.pair_query, np.where(inside, pairs.pair_doc, 0)], 0.0)
    bad = (pairs.slot_counts(data).sum(axis=1) > 0) & ~(rho > 0)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(pairs.per_position(data, bad, False))[0])
        raise InputError(f"pbm_ips: the logger's marginals give logged document {int(data.shown[i, j])} of query "
                         f"{int(data.query[i])} probability 0 of being shown (impression {i})", data.source)
    return rho


def _logger_propensities(data: LoggedData, theta: FloatArray) -> FloatArray:
    marginals = getattr(data.logger, "item_position_marginals", None)
    if marginals is None:
        raise InputError("pbm_ips with click_propensity 'logger' needs the logging policy (data.logger) with "
                         "item_position_marginals(query); use 'empirical' for a log without one", data.source)
    uq, inv = np.unique(data.query, return_inverse=True)
    m_all = np.asarray(marginals(uq), dtype=np.float64)
    if m_all.ndim != 3 or m_all.shape[0] != uq.size or m_all.shape[2] < data.k:
        raise InputError(f"item_position_marginals: expected ({uq.size}, m, >= {data.k}), got {m_all.shape}",
                         data.source)
    rho_qd = m_all[:, :, : data.k] @ theta  # (queries, m)
    valid = data.valid
    inside = valid & (data.shown < rho_qd.shape[1])
    rho = np.where(inside, rho_qd[inv.reshape(-1)[:, None], np.where(inside, data.shown, 0)], 0.0)
    bad = valid & ~(rho > 0)
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise InputError(f"pbm_ips: the logger's marginals give logged document {int(data.shown[i, j])} of query "
                         f"{int(data.query[i])} probability 0 of being shown (impression {i})", data.source)
    return np.where(valid, rho, 1.0)


@register_estimator
@dataclass(frozen=True)
class PBMIPS(Estimator):
    """PBM-IPS (see the module docstring).

    Parameters
    ----------
    examination:
        ``k`` examination probabilities :math:`\\theta_0, \\dots, \\theta_{k-1}` (any
        positive multiple: only ratios matter; longer tuples are cut to the log's ``k``),
        or ``None`` (default) to estimate them from the log being evaluated.
    estimate_with:
        How to estimate them when ``examination`` is ``None``: ``"swap"``, ``"randtop"``,
        ``"harvest"`` (each distinct list of a query as its own ranker), ``"em"`` or
        ``"auto"`` (default; see
        :func:`~onlineeval.estimators.position_bias.estimate_examination`).
    click_propensity:
        ``"auto"`` (default: ``"logger"`` when the log has its logging policy, else
        ``"empirical"``), ``"empirical"``, ``"logger"`` or ``"logged"`` (see the module
        docstring).
    examination_error:
        With estimated examination: ``"sandwich"`` (default; its estimation error is in the
        interval, see the module docstring) or ``"ignore"`` (plug-in, treated as known).
        No effect with given ``examination``.
    """

    name = "pbm_ips"
    assumption = (
        "position-based clicks (examination depends on the slot only), additive rewards; support: every document "
        "the target shows in its top k can be shown somewhere in the logger's top k; exactly unbiased with known "
        "examination and the logger's propensities ('logger'); the 'empirical' propensity counts 0 for target "
        "documents the log never showed for a query (see notes target_mass_unseen); estimated examination: "
        "consistent only, its error in the interval by a sandwich (option examination_error)"
    )
    needs = ()
    rewards = ("additive",)
    support_level = "any"
    unbiased_under = (("pbm", "additive"),)
    biased_under = (("cascade", "additive"),)

    examination: tuple[float, ...] | None = None
    estimate_with: str = "auto"
    click_propensity: str = "auto"
    examination_error: str = "sandwich"

    def __post_init__(self) -> None:
        if self.examination is not None:
            try:
                theta = tuple(float(x) for x in np.asarray(self.examination, dtype=np.float64).reshape(-1))
            except (TypeError, ValueError):
                raise ConfigError(("estimator", "examination"), "must be a list of positive numbers") from None
            if not theta or not all(math.isfinite(x) and x > 0 for x in theta):
                raise ConfigError(("estimator", "examination"),
                                  f"must be positive finite examination probabilities, got {list(theta)}")
            object.__setattr__(self, "examination", theta)
        if self.estimate_with not in ("auto", *METHODS):
            raise ConfigError(("estimator", "estimate_with"), must_be_one_of(("auto", *METHODS), self.estimate_with))
        if self.click_propensity not in CLICK_PROPENSITIES:
            raise ConfigError(("estimator", "click_propensity"),
                              must_be_one_of(CLICK_PROPENSITIES, self.click_propensity))
        if self.examination_error not in EXAMINATION_ERRORS:
            raise ConfigError(("estimator", "examination_error"),
                              must_be_one_of(EXAMINATION_ERRORS, self.examination_error))

    def logger_needs(self) -> tuple[str, ...]:
        """``click_propensity="logger"`` reads the logging policy's item-position marginals."""
        return ("item_position_marginals",) if self.click_propensity == "logger" else ()

    @classmethod
    def check_instances(cls, world: Any) -> list[Estimator]:
        """In a world with known examination probabilities (PBM): one instance with them
        and the ``"empirical"`` propensity, one that estimates them from the log by
        ``harvest`` (consistent, not unbiased; at the suite's size, 24 logs of 2,500
        impressions, its bias is far below 4 SE) and, when the world's logger gives
        item-position marginals, one with them and the exact ``"logger"`` propensities.
        Otherwise one instance estimating them (``"auto"``)."""
        exam = getattr(world, "examination", None)
        if exam is not None:
            k = int(getattr(world, "k", len(exam)))
            theta = tuple(float(x) for x in np.asarray(exam, dtype=np.float64)[:k])
            out: list[Estimator] = [cls(examination=theta, click_propensity="empirical"),
                                    cls(estimate_with="harvest", click_propensity="empirical")]
            if hasattr(getattr(world, "logger", None), "item_position_marginals"):
                out.append(cls(examination=theta, click_propensity="logger"))
            return out
        return [cls()]

    def resolve_examination(self, data: LoggedData) -> tuple[FloatArray, dict[str, Any]]:
        """The ``(k,)`` examination used on ``data`` and the notes describing it."""
        if self.examination is not None:
            if len(self.examination) < data.k:
                raise InputError(f"pbm_ips: {len(self.examination)} examination probabilities given, "
                                 f"lists have {data.k} slots", data.source)
            theta = np.asarray(self.examination[: data.k], dtype=np.float64)
            return theta, {"examination": [float(x) for x in theta], "examination_estimated": False}
        est = self._estimated(data)
        theta = np.asarray(est.examination, dtype=np.float64)
        if not (np.isfinite(theta).all() and (theta > 0).all()):
            raise InputError(
                f"pbm_ips: the examination estimated by {est.method} is not positive at every slot "
                f"({[float(x) for x in theta]}); pass known examination probabilities", data.source)
        info = est.to_dict()
        info.pop("examination")
        return theta, {"examination": [float(x) for x in theta], "examination_estimated": True,
                       "examination_method": est.method, "estimation": info}

    def _estimated(self, data: LoggedData) -> PositionBiasEstimate:
        """The examination estimated from ``data`` by ``estimate_with``: estimated once per log
        and method (every target, and the two sides of a difference, read the same log), kept
        on the log object, which never changes."""
        cache = log_cache(data, "examination")
        if self.estimate_with not in cache:
            cache[self.estimate_with] = estimate_examination(data, self.estimate_with)
        return cache[self.estimate_with]  # type: ignore[no-any-return]

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        theta, notes = self.resolve_examination(data)
        kind = resolve_click_propensity(data, self.click_propensity)
        pairs = _target_pairs(data, target)
        w = reward.position_weights(data.k)
        slot_of = pairs.slot_of(data.k)
        sandwich = self.examination is None and self.examination_error == "sandwich"
        slots = None
        if kind in ("empirical", "logger"):
            # every factor of a slot's weight is a function of its (query, document) pair: computed
            # per pair, then read once per logged slot
            rho_pair = _rho_pairs(data, theta, pairs) if kind == "empirical" else _logger_rho_pairs(data, theta, pairs)
            s_pair = np.maximum(slot_of, 0)
            use = (slot_of >= 0) & (rho_pair > 0)
            ratio_pair = np.where(use, theta[s_pair] / np.where(use, rho_pair, 1.0), 0.0)
            ratio = pairs.per_position(data, ratio_pair, 0.0)
            # the numerator adds the clicked slots only (clicks are sparse)
            c_rows, c_cols = _clicked_positions(data)
            c_codes = pairs.codes_at(data, c_rows, c_cols)
            num = np.bincount(c_rows, (ratio_pair * w[s_pair])[c_codes], data.n)
            if kind == "empirical":
                num = _empirical_influence(data, theta, w, pairs, ratio_pair * w[s_pair], c_codes, num)
        else:
            rho_pair = None
            slots = pairs.per_position(data, slot_of, -1)
            rho = click_propensities(data, theta, kind)
            s = np.maximum(slots, 0)
            ratio = np.where(slots >= 0, theta[s] / rho, 0.0)
            num = (data.clicks * ratio * w[s]).sum(axis=1)
        notes["click_propensity"] = kind
        if self.examination is not None:
            notes["variance"] = "plug-in: the PBM-IPS terms with the given examination (no estimation error)"
        elif not sandwich:
            notes["variance"] = ("plug-in: the PBM-IPS terms with the estimated examination treated as known "
                                 "(its estimation error ignored; examination_error 'ignore')")
        else:
            est = self._estimated(data)
            if est.linearisation is None:
                raise InputError(f"pbm_ips: the examination estimate ({est.method}) carries no linearisation; "
                                 "use examination_error 'ignore' or pipeline_bootstrap", data.source)
            grad = value_gradient(data, theta, kind, w, pairs, rho_pair)
            num = num + est.linearisation(grad)
            notes["variance"] = (f"sandwich: the PBM-IPS terms plus the linearised examination estimate "
                                 f"({est.method}; stacked estimating equations, clustered like the terms)")
            notes["value_gradient"] = [float(x) for x in grad]
        if kind == "empirical":
            notes["variance"] += "; the terms linearised in the empirical propensity (delta method)"
        notes.update(self._condition_notes(data, pairs, theta, w, kind, slots, num))
        return Terms(num=num, weights=ratio, notes=notes)

    @staticmethod
    def _condition_notes(data: LoggedData, pairs: _Pairs, theta: FloatArray, w: FloatArray, kind: str,
                         slots: IntArray | None, num: FloatArray) -> dict[str, Any]:
        r"""How far the log is from the conditions of the chosen propensity (see the module
        docstring), and warnings where they fail.

        ``target_mass_unseen``: :math:`\frac1n\sum_i\sum_s w_s\,\theta_s/\max\theta\,
        [\text{pair } (q_i, t_{q_i}(s)) \text{ never shown}]`; under ``"empirical"`` its
        expectation bounds the absolute bias (the estimate is conditionally unbiased for
        every pair shown at least once and counts 0 for the others, whose click
        probability is at most :math:`\theta_s/\max\theta`). ``target_mass_rare_share``:
        the share of the target's examination mass on pairs shown fewer than
        :data:`RARE_SHOWS` times. ``target_slots_not_logged_share`` (``"logged"``): share of
        the target's slots whose document the impression did not show. Sums over impressions
        are taken per distinct query, weighted by its impressions."""
        shows = _query_shows(data, pairs)  # (queries, k)
        n_q = np.bincount(pairs.inv, minlength=int(shows.shape[0])).astype(np.float64)
        has = shows >= 0
        mass = np.where(has, (w * theta / theta.max())[None, :], 0.0)
        total = float(n_q @ mass.sum(axis=1))
        n = max(data.n, 1)
        unseen = float(n_q @ (mass * (shows == 0)).sum(axis=1)) / n
        out: dict[str, Any] = {
            "target_mass_unseen": unseen,
            "target_mass_unseen_share": unseen * n / total if total > 0 else 0.0,
            "target_mass_rare_share": float(n_q @ (mass * (has & (shows < RARE_SHOWS))).sum(axis=1)) / total
            if total > 0 else 0.0,
            "rare_shows": RARE_SHOWS,
        }
        warnings: list[str] = []
        se = float(np.std(num) / math.sqrt(n)) if data.n > 1 else math.inf
        if kind == "empirical" and unseen > 0.5 * se:
            warnings.append(
                f"pbm_ips (empirical click propensity): {out['target_mass_unseen_share']:.1%} of the target's "
                f"examination mass is on (query, document) pairs this log never shows; they count 0, so the estimate "
                f"may be too low by up to {unseen:.3g} (standard error {se:.3g}); {out['target_mass_rare_share']:.1%} "
                f"is on pairs shown fewer than {RARE_SHOWS} times. Use click_propensity 'logger' (exact) with the "
                "logging policy, or a longer log")
        if kind == "logged" and slots is not None:
            n_target = int(n_q @ has.sum(axis=1))
            missing = (n_target - int(np.count_nonzero(slots >= 0))) / n_target if n_target else 0.0
            out["target_slots_not_logged_share"] = missing
            if missing > 0:
                warnings.append(
                    f"pbm_ips (logged click propensity): {missing:.1%} of the target's slots show a document the "
                    "impression did not; the 'logged' propensity is unbiased only when every impression shows every "
                    "document of the target's top k, otherwise the estimate is scaled down (use 'logger' or "
                    "'empirical')")
        if warnings:
            out["warnings"] = warnings
        return out
