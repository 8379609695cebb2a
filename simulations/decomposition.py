r"""Why the online effect shrinks: the offline-to-online shrinkage of one pair split into causes.

Everything here is exact (no Monte Carlo): expectations of the A/B metrics from per-slot
click-model arrays, weighted by query frequency, for rankers A and B of the world.

The quantity decomposed
-----------------------
For a stage :math:`i` with per-query values :math:`m_i(X, q)` of ranker :math:`X` and
query weights :math:`w_q`, the *relative improvement* of B over A is

.. math::

    G_i = \sigma \, \frac{V_i(B) - V_i(A)}{V_i(A)}, \qquad V_i(X) = \sum_q w_q\, m_i(X, q),

with :math:`\sigma` = +1 for the offline metric and ``IMPROVEMENT_SIGN`` of
:mod:`simulations.analysis` for an online metric (-1 for abandonment). The report's
``shrinkage_vs_offline`` is :math:`G_6 / G_1`; the total shrinkage from what teams report
(the offline gain averaged uniformly over queries) is :math:`G_6 / G_0`.

Stages (sequential construction)
--------------------------------
Each stage changes one thing of the one before; ``d`` is the dominant user type (largest
share, the first on ties) and :math:`C(r)` the offline metric's own C/W/L continuation
(:class:`clickmodels.cwl.MetricUser`; ERR: :math:`1 - R_r`).

- ``W0`` offline metric, uniform over queries (what teams report);
- ``W1`` the same weighted by query frequency (head / torso / tail);
- ``W2`` the online metric under the metric's own user: continuation :math:`C(r)` after a
  click or not, click probability = the metric's gain normalised to [0, 1] (the gain of the
  grade over the gain of the top grade, e.g. :math:`(2^g - 1)/(2^{g_{max}} - 1)` for nDCG's
  default exponential gain);
- ``W3`` the same user, clicking with the attractiveness of type ``d``'s click model;
- ``W4`` type ``d``'s examination: its chain with no extra stopping after a click
  (``cont_click := cont_skip``); a position-based (independent-click) model is used as it
  is (it has no stopping after a click);
- ``W5`` type ``d``'s full click model (satisfaction and stopping after a good click);
- ``W6`` every user type by share: the exact online truth of the report
  (:func:`simulations.runner.compute_truth`).

The sequential factors :math:`f_i = G_i / G_{i-1}` multiply back to :math:`G_6 / G_0`
exactly, *by construction* (a telescoping product): that they do is no evidence of
anything, and their values depend on the order in which the causes are switched on.
The factor ``W1 -> W2`` is the change of scale from the offline metric (a utility,
nDCG normalised per query by its ideal DCG) to the online metric (clicks, the first
click's reciprocal rank, abandonment) under the metric's own user.

One-at-a-time factors
---------------------
To see how much the order matters, every cause is also switched off *alone* from the full
online model ``W6`` (all types by share, frequency-weighted), and
:math:`\phi_c = G_6 / G_6^{(-c)}`:

- ``frequency``: queries weighted uniformly;
- ``attractiveness``: every type clicks an examined document with the normalised gain
  (continuations that depend on the attractiveness, as CCM's after a click, keep the
  model's own values);
- ``examination``: every chain type continues after a skip with the metric's :math:`C(r)`
  and after a click with :math:`C(r)\,c^1_r/c^0_r` (its extra stopping after a click kept
  as a ratio); an independent-click type becomes the metric's chain user with its own
  attractiveness (independent examination is part of its examination);
- ``satisfaction``: every chain type has ``cont_click := cont_skip``;
- ``mixture``: the dominant type only (that is ``W5``).

If the causes acted multiplicatively and independently, :math:`f_2 \prod_c \phi_c` (the
scale factor times the one-at-a-time factors) would equal the total :math:`G_6/G_0`; the
``residual`` :math:`(G_6/G_0) / (f_2 \prod_c \phi_c)` measures their interactions. It is
*not* close to 1 on the bundled configs: on ``configs/ab.yaml`` (navigational and
informational cascade users, nDCG@10) the residual is 2.65 for ``reciprocal_rank`` and
0.365 for ``abandonment``, and ``clicks_per_query`` changes sign (B gets *fewer* clicks: its
better results satisfy navigational users sooner), so no multiplicative split exists; on
``configs/counterfactual.yaml`` (PBM and cascade users, nDCG@5) it is 2.18, 1.25 and 0.561.
The causes interact strongly (e.g. the non-dominant type's stopping after a click counts
under ``mixture`` in the sequential order and under ``satisfaction`` one at a time). A
stage or variant whose improvement has the other sign than the offline gain is listed in
``sign_changes`` (a factor below 0 there means "reverses the effect", not a shrinkage).

Order-averaged factors
----------------------
Every variant is a subset :math:`S` of the five online causes switched on (the others off
as above; ``mixture`` off = the dominant type; :math:`G(\emptyset)` is the metric's own user
under uniform weights, :math:`G(N) = G_6`). The order-averaged factor of a cause is
:math:`e^{\varphi_c}` with :math:`\varphi_c` the Shapley value (Shapley 1953) of
:math:`\log G` (:func:`order_averaged_factors`): its log factor averaged over all
:math:`5! = 120` orders of switching the causes on, so no order is privileged and the
interactions are shared evenly. With the uniform-weights scale factor
:math:`G(\emptyset)/G_0` they multiply back to :math:`G_6/G_0` -- again by construction
(efficiency of the Shapley value), and only when every :math:`G(S)` has the sign of
:math:`G_6` (otherwise ``None`` with the reason).

Tolerances: the sequential and order-averaged products equal the total to 1e-12
(floating point; both by construction), checked on both bundled configs; for the
one-at-a-time product no tolerance holds (the residuals above), so none is claimed.

Which click models decompose
----------------------------
Every cascade-family model (:class:`clickmodels.cascade.ChainModel`: CM, cascade, DCM,
CCM, DBN, SDBN, RBP and metric users) reduces to per-slot chain arrays
``(attract, cont_click, cont_skip)`` (Chuklin, Markov & de Rijke 2015, ch. 3); an
independent-click model (PBM, CTR baselines) to ``(examination, attract)``. Both need
parameters by grade (and rank), since the world has grades, not documents.

A position-based model is *not* turned into a chain: the chain with
:math:`c^1 = c^0 = e_{r+1}/e_r` has PBM's click marginals but not its first-click
distribution, because examination in a chain is persistent (a user who did not examine
rank :math:`r` examines nothing below). With attractiveness :math:`a` everywhere,
:math:`P(\text{first} = 3)` is :math:`e_3 a (1-a)^2` in the chain but
:math:`e_3 a (1 - e_1 a)(1 - e_2 a)` in PBM (different unless :math:`e_1 = e_2 = 1`).

UBM (examination depends on the distance to the last click) and models with parameters
per (query, document) do not reduce to either form: their decomposition is refused with
a ``not decomposable for <model>: <why>`` reason, never computed wrongly.

``summary.json`` key ``decomposition``
--------------------------------------
``status``
    ``"ok"`` or ``"not_decomposable"`` (then only ``reason`` and ``conventions`` follow).
``reason``
    ``None`` or the sentence saying why.
``conventions``
    strings: the offline metric, the gain normalisation, the weighting, the dominant type,
    the definition of :math:`G` and of the factors.
``dominant_type``, ``types``
    the dominant type's name; ``[{"name", "share", "model", "form"}]`` (form ``chain`` or
    ``independent``).
``stages``
    ``[{"key": "W0", "cause": None | str, "description": str}, ...]`` in order.
``metrics``
    per A/B metric (``clicks_per_query``, ``reciprocal_rank``, ``abandonment``):
    ``improvement_sign``; ``stages``: ``{"W0": {"A", "B", "relative_improvement"}, ...}``;
    ``sequential``: ``[{"cause", "from", "to", "factor"}]`` (``factor`` ``None`` when the
    stage before has no improvement); ``total`` (:math:`G_6/G_0`); ``product_sequential``;
    ``shrinkage_vs_offline`` (:math:`G_6/G_1`, as in the designs' entries);
    ``one_at_a_time``: ``{cause: {"factor", "without", "reason"}}`` (``without`` is
    :math:`G_6^{(-c)}`; ``reason`` says why a factor is ``None``); ``scale_factor``
    (:math:`f_2`); ``one_at_a_time_product`` (:math:`f_2 \prod_c \phi_c`); ``residual``;
    ``order_averaged``: ``{"factors": {cause: factor} | None, "scale_uniform", "product",
    "reason"}``; ``sign_changes``: the stages (and ``-<cause>`` variants) whose improvement
    has the opposite sign of ``W0``'s.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from clickmodels import kernels
from clickmodels.base import ByGrade, ClickModel
from clickmodels.cascade import Chain, ChainModel
from clickmodels.cwl import MetricUser
from clickmodels.pbm import IndependentModel
from onlineeval.metrics import ERR, Metric, parse_metric
from simulations.analysis import IMPROVEMENT_SIGN
from simulations.report import VALUE_DIGITS, percent_text, significant, value_text
from simulations.users import UserModels
from simulations.world import World

__all__ = [
    "CAUSES",
    "ONLINE_METRICS",
    "PRODUCT_TOLERANCE",
    "STAGES",
    "Decomposition",
    "Independent",
    "NotDecomposable",
    "decompose",
    "decomposition_lines",
    "decomposition_summary",
    "gain_table",
    "metric_user",
    "online_metrics",
    "order_averaged_factors",
    "user_form",
]

#: the A/B metrics decomposed (those of :func:`simulations.runner.exact_ab_metrics_of`); and ``utility`` where an A/B
#: design has it (:func:`decompose`'s ``utility_weights``)
ONLINE_METRICS = ("clicks_per_query", "reciprocal_rank", "abandonment")
UTILITY = "utility"

#: the stages in order: key, the cause switched on to reach it, description
STAGES: tuple[tuple[str, str | None, str], ...] = (
    ("W0", None, "offline metric, uniform over queries"),
    ("W1", "frequency", "offline metric, weighted by query frequency"),
    ("W2", "scale", "online metric under the metric's own user, click = normalised gain"),
    ("W3", "attractiveness", "the metric's user clicking with the dominant type's attractiveness"),
    ("W4", "examination", "the dominant type's examination, no extra stopping after a click"),
    ("W5", "satisfaction", "the dominant type's full click model (stopping after a click)"),
    ("W6", "mixture", "every user type by share: the exact online truth"),
)

#: causes switched off one at a time from W6
CAUSES = ("frequency", "attractiveness", "examination", "satisfaction", "mixture")

#: the sequential factors multiply back to the total within this relative error (floating point only)
PRODUCT_TOLERANCE = 1e-12


class NotDecomposable(Exception):
    """A world or click model the decomposition cannot handle; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Independent(NamedTuple):
    """Per-slot arrays of an independent-click model: examined with ``exam``, clicked with
    ``exam * attract``, each slot independently of the others."""

    exam: np.ndarray
    attract: np.ndarray


User = Chain | Independent


# --------------------------------------------------------------------------- exact online metrics
def online_metrics(user: User, shape: tuple[int, int],
                   utility_weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    r"""Per-list exact expectations of the A/B metrics for one user form.

    Chain: :math:`P(C_r) = P(E_r) a_r` (:func:`clickmodels.kernels.chain_examination`) and
    :math:`p_r = P(C_r \mid C_{<r} = 0)` by forward filtering
    (:func:`clickmodels.kernels.chain_conditional`); independent: :math:`P(C_r) = p_r = e_r a_r`.
    Then :math:`P(\text{first} = r) = p_r \prod_{j<r}(1 - p_j)`, abandonment
    :math:`\prod_r (1 - p_r)` and the first click's reciprocal rank
    :math:`\sum_r P(\text{first} = r)/r` (0 without a click). With ``utility_weights`` :math:`w` also the
    ``utility`` metric's :math:`\sum_r w_r P(C_r)`.
    """
    if isinstance(user, Independent):
        p = np.broadcast_to(user.exam * user.attract, shape).astype(np.float64)
        marginal = p
    else:
        a, c1, c0 = (np.broadcast_to(np.asarray(x, dtype=np.float64), shape) for x in user)
        marginal = kernels.chain_examination(a, c1, c0, shape) * a
        p = kernels.chain_conditional(a, c1, c0, np.zeros(shape, dtype=bool))
    clicks = marginal.sum(axis=1)
    survive = np.cumprod(1.0 - p, axis=1)
    before = np.concatenate([np.ones((shape[0], 1)), survive[:, :-1]], axis=1)
    first = p * before
    out = {
        "clicks_per_query": clicks,
        "reciprocal_rank": first @ (1.0 / np.arange(1, shape[1] + 1)),
        "abandonment": survive[:, -1] if shape[1] else np.ones(shape[0]),
    }
    if utility_weights is not None:
        out[UTILITY] = marginal @ utility_weights
    return out


def _mixture(parts: Sequence[tuple[float, User]], shape: tuple[int, int],
             utility_weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for share, user in parts:
        for m, v in online_metrics(user, shape, utility_weights).items():
            out[m] = out.get(m, np.zeros(shape[0])) + share * v
    return out


# --------------------------------------------------------------------------- user forms
def _model_name(model: ClickModel) -> str:
    return str(getattr(model, "name", type(model).__name__))


def user_form(model: ClickModel, labels: np.ndarray) -> User:
    """The chain arrays of a cascade-family model, or the ``(exam, attract)`` arrays of an
    independent-click model, on shown grades ``labels`` (``(Q, k)``, ``-1`` empty), each
    broadcast to ``(Q, k)``.

    Raises
    ------
    NotDecomposable
        For any other model (UBM), or parameters that are not by grade (fitted per
        (query, document)).
    """
    name = _model_name(model)
    per_doc = [f for f, p in model.doc_params().items() if not isinstance(p, ByGrade)]
    if per_doc:
        raise NotDecomposable(
            f"not decomposable for {name}: its {', '.join(per_doc)} is given per (query, document), but the "
            "decomposition changes parameters by grade")
    shape = labels.shape
    if isinstance(model, ChainModel):
        ch = model._chain(model._prepare(labels))
        return Chain(*(np.array(np.broadcast_to(np.asarray(x, dtype=np.float64), shape)) for x in ch))
    if isinstance(model, IndependentModel):
        e, a = model._probs(model._prepare(labels))
        return Independent(*(np.array(np.broadcast_to(np.asarray(x, dtype=np.float64), shape)) for x in (e, a)))
    raise NotDecomposable(
        f"not decomposable for {name}: it is neither a cascade chain (examination decided rank by rank from "
        "the last step) nor an independent-click model (e.g. UBM's examination depends on the distance to "
        "the last click), so examination and stopping after a click cannot be switched separately")


def gain_table(metric: Metric, n_grades: int) -> np.ndarray:
    """``(n_grades,)`` the metric's gain of each grade over the gain of the top grade (in [0, 1])."""
    grades = np.arange(n_grades)[:, None]
    if isinstance(metric, ERR):
        gain = np.asarray(metric.cascade(grades, grades).satisfaction, dtype=np.float64)[:, 0]
    else:
        gain = np.asarray(metric.cwl_gains(grades), dtype=np.float64)[:, 0]
    top = float(gain[-1])
    if not top > 0 or np.any(gain < 0):
        raise NotDecomposable(f"not decomposable for {metric}: its gains by grade {gain.tolist()} cannot be "
                              "normalised to [0, 1] by the top grade's gain")
    return gain / top


def metric_user(metric_name: str, n_grades: int) -> MetricUser:
    """The offline metric's own C/W/L user clicking with the normalised gain (stage ``W2``)."""
    metric = parse_metric(metric_name)
    if isinstance(metric, ERR) and metric.gmax is None:
        metric = replace(metric, gmax=max(1, n_grades - 1))
    try:
        return MetricUser(metric, ByGrade(tuple(gain_table(metric, n_grades))))
    except ValueError:
        raise NotDecomposable(
            f"not decomposable for the offline metric {metric}: it has no C/W/L user model (no continuation "
            "C(r)), so the online metric under the metric's own user (stage W2) does not exist") from None


# --------------------------------------------------------------------------- the decomposition
@dataclass(frozen=True)
class Decomposition:
    """The exact values of every stage and variant for rankers A and B.

    ``states[S][ranker][metric]``: the online model with the causes in ``S`` (a frozenset
    of :data:`CAUSES`) switched on and the others off (see the module docstring), weighted
    by query frequency when ``"frequency"`` is in ``S``, else uniformly; a state that cannot
    be built is missing and ``reasons`` says why. ``values[key]`` are the named stages
    ``W0``..``W6`` (``W0``/``W1`` hold the offline metric under every online metric's name)
    and ``-<cause>`` (W6 with that cause off).
    """

    states: dict[frozenset[str], dict[str, dict[str, float]]]
    values: dict[str, dict[str, dict[str, float]]]
    reasons: dict[str, str]
    dominant: str
    types: tuple[dict[str, Any], ...]
    offline_metric: str


def _weighted(per_query: dict[str, np.ndarray], w: np.ndarray) -> dict[str, float]:
    return {m: float(w @ v) for m, v in per_query.items()}


def _switch(user: User, on: frozenset[str], gain: np.ndarray, cont: np.ndarray) -> User:
    """``user`` with attractiveness, examination and satisfaction switched off unless in ``on``."""
    a = user.attract if "attractiveness" in on else gain
    if isinstance(user, Independent):
        # without its examination an independent-click user examines like the metric's user (a chain)
        return Independent(user.exam, a) if "examination" in on else Chain(a, cont, cont)
    c1, c0 = user.cont_click, user.cont_skip
    if "examination" not in on:
        if "satisfaction" in on:
            # the stop after a click kept as the ratio c1 / c0 on top of the metric's continuation
            needs = (user.attract > 0) & (c1 > 0)
            if np.any(needs & (c0 <= 0)):
                raise NotDecomposable("a user type stops surely after a skip but may go on after a click: its "
                                      "stopping after a click is not a ratio c1/c0 of the examination")
            c1 = cont * np.divide(c1, c0, out=np.zeros_like(c1), where=c0 > 0)
            if np.any(c1 > 1.0 + 1e-12):
                raise NotDecomposable("a user type goes on more often after a click than after a skip (c1 > c0, "
                                      "e.g. CCM with tau2 > tau1): with the metric's examination c1 would exceed 1")
            c1 = np.minimum(c1, 1.0)
        c0 = cont
    if "satisfaction" not in on:
        c1 = c0
    return Chain(a, c1, c0)


def decompose(world: World, users: UserModels, offline_metric: str,
              utility_weights: np.ndarray | None = None) -> Decomposition:
    """Every stage and variant of the decomposition for rankers A and B of ``world``
    (module docstring): the offline stages and the online model for every subset of causes (with
    ``utility_weights``, :func:`simulations.designs.ab.utility_weights`, also of the ``utility`` metric).

    Raises
    ------
    NotDecomposable
        When the offline metric has no C/W/L user or a user type's click model does not
        reduce to a chain or an independent-click model.
    """
    names = list(users.names)
    d = int(np.argmax(users.shares))
    muser = metric_user(offline_metric, world.n_grades)
    off = world.offline
    weights = {True: world.frequency, False: np.full(world.n_queries, 1.0 / world.n_queries)}
    subsets = [frozenset(c) for n in range(len(CAUSES) + 1) for c in itertools.combinations(CAUSES, n)]
    states: dict[frozenset[str], dict[str, dict[str, float]]] = {}
    reasons: dict[str, str] = {}
    forms: list[str] = []
    for ranker in ("A", "B"):
        labels = world.ranked_labels(ranker)
        shape = labels.shape
        own = muser._chain(muser._prepare(labels))
        cont = np.array(np.broadcast_to(own.cont_skip, shape), dtype=np.float64)
        gain = np.array(np.broadcast_to(own.attract, shape), dtype=np.float64)
        types = [user_form(m, labels) for m in users.models]
        forms = ["independent" if isinstance(t, Independent) else "chain" for t in types]
        per_query: dict[frozenset[str], dict[str, np.ndarray]] = {}
        for on in subsets:
            body = on - {"frequency"}
            if body in per_query:
                states.setdefault(on, {})[ranker] = _weighted(per_query[body], weights["frequency" in on])
                continue
            parts = list(zip(users.shares, types, strict=True)) if "mixture" in on else [(1.0, types[d])]
            try:
                switched = [(share, _switch(t, on, gain, cont)) for share, t in parts]
            except NotDecomposable as exc:
                reasons[",".join(sorted(on))] = exc.reason
                continue
            per_query[body] = _mixture(switched, shape, utility_weights)
            states.setdefault(on, {})[ranker] = _weighted(per_query[body], weights["frequency" in on])
    everything = frozenset(CAUSES)
    stage_sets = {"W2": {"frequency"}, "W3": {"frequency", "attractiveness"},
                  "W4": {"frequency", "attractiveness", "examination"},
                  "W5": {"frequency", "attractiveness", "examination", "satisfaction"}, "W6": everything}
    online = (*ONLINE_METRICS, *((UTILITY,) if utility_weights is not None else ()))
    values = {
        "W0": {r: {m: off.uniform[r] for m in online} for r in ("A", "B")},
        "W1": {r: {m: off.weighted[r] for m in online} for r in ("A", "B")},
        **{k: states[frozenset(s)] for k, s in stage_sets.items() if frozenset(s) in states},
        **{"-" + c: states[everything - {c}] for c in CAUSES if everything - {c} in states},
    }
    type_info = tuple({"name": n, "share": float(s), "model": _model_name(m), "form": form}
                      for n, s, m, form in zip(names, users.shares, users.models, forms, strict=True))
    return Decomposition(states, values, reasons, names[d], type_info, str(muser.metric))


def _relative(values: dict[str, dict[str, float]], metric: str, sign: int) -> float | None:
    a, b = values["A"][metric], values["B"][metric]
    return sign * (b - a) / a if a else None


def _ratio(x: float | None, y: float | None) -> float | None:
    return x / y if x is not None and y else None


def order_averaged_factors(g: dict[frozenset[str], float | None]) -> dict[str, float] | str:
    r"""Shapley factors :math:`\exp \varphi_c` of ``log G`` over the subsets of :data:`CAUSES`.

    .. math::

        \varphi_c = \sum_{S \subseteq N \setminus \{c\}} \frac{|S|!\,(n - |S| - 1)!}{n!}
        \bigl(\log |G(S \cup \{c\})| - \log |G(S)|\bigr),

    the log factor of cause :math:`c` averaged over the :math:`n!` orders of switching the
    causes on (Shapley 1953); :math:`\sum_c \varphi_c = \log G(N) - \log G(\emptyset)`.
    Returns the reason instead when some :math:`G(S)` is missing, zero or of another sign
    than :math:`G(N)` (then no multiplicative split exists).
    """
    n = len(CAUSES)
    full = g.get(frozenset(CAUSES))
    if any(g.get(frozenset(s)) is None for k in range(n + 1) for s in itertools.combinations(CAUSES, k)):
        return "some variant has no value (no improvement to divide by, or a model that cannot be switched)"
    assert full is not None
    if any((v or 0.0) * full <= 0 for v in g.values()):
        return "the improvement changes sign (or is 0) between variants: no multiplicative split"
    out: dict[str, float] = {}
    for c in CAUSES:
        rest = [x for x in CAUSES if x != c]
        phi = 0.0
        for k in range(n):
            weight = math.factorial(k) * math.factorial(n - k - 1) / math.factorial(n)
            for s in itertools.combinations(rest, k):
                base = frozenset(s)
                phi += weight * (math.log(abs(g[base | {c}])) - math.log(abs(g[base])))  # type: ignore[arg-type]
        out[c] = math.exp(phi)
    return out


def decomposition_summary(world: World, users: UserModels, offline_metric: str,
                          utility: bool = False) -> dict[str, Any]:
    """The ``decomposition`` entry of ``summary.json`` (structure in the module docstring); ``utility``: also of the
    ``utility`` metric (an A/B design has it)."""
    conventions = {
        "offline_metric": offline_metric,
        "relative_improvement": "G = sign * (V(B) - V(A)) / V(A); sign +1 offline, IMPROVEMENT_SIGN online "
                                "(-1 for abandonment)",
        "gain": "click probability of the metric's own user = the metric's gain of the grade / the top grade's gain",
        "weighting": "query frequency (W1 onwards); W0 and a variant with 'frequency' off: uniform",
        "sequential": "f_i = G_i / G_(i-1); their product is G6 / G0 by construction (telescoping); the order matters",
        "one_at_a_time": "phi_c = G6 / G6 with cause c switched off alone; residual = (G6 / G0) / (f_scale * prod phi)",
        "order_averaged": "exp of the Shapley value of log G over the 5 online causes (every order of switching them "
                          "on weighs the same); G6 / G0 = scale_uniform * prod by construction",
        "exact": "exact expectations (no Monte Carlo); W6 is the exact A/B truth of the report",
    }
    weights = None
    if utility:
        from simulations.designs.ab import utility_weights

        weights = utility_weights(world, world.ranked_labels("A").shape[1])
    try:
        dec = decompose(world, users, offline_metric, weights)
    except NotDecomposable as exc:
        return {"status": "not_decomposable", "reason": exc.reason, "conventions": conventions}
    conventions["dominant_type"] = f"{dec.dominant}: the type with the largest share (W3 to W5, 'mixture' off)"
    metrics: dict[str, Any] = {}
    for metric in (*ONLINE_METRICS, *((UTILITY,) if utility else ())):
        sign = IMPROVEMENT_SIGN.get(metric, 1)
        g = {key: _relative(dec.values[key], metric, 1 if key in ("W0", "W1") else sign)
             for key in dec.values}
        seq_keys = [k for k, _, _ in STAGES]
        sequential = [
            {"cause": cause, "from": seq_keys[i - 1], "to": key, "factor": _ratio(g.get(key), g.get(seq_keys[i - 1]))}
            for i, (key, cause, _) in enumerate(STAGES) if i
        ]
        factors = [s["factor"] for s in sequential]
        product = math.prod(factors) if all(x is not None for x in factors) else None
        oat: dict[str, Any] = {}
        for cause in CAUSES:
            without = g.get("-" + cause)
            factor = _ratio(g.get("W6"), without)
            reason = None
            if "-" + cause not in dec.values:
                reason = next(iter(dec.reasons.values()), "cannot be switched off")
            elif factor is None:
                reason = "no improvement with this cause switched off"
            oat[cause] = {"factor": factor, "without": without, "reason": reason}
        scale = sequential[1]["factor"]
        phis = [o["factor"] for o in oat.values()]
        oat_product = scale * math.prod(phis) if scale is not None and all(p is not None for p in phis) else None
        total = _ratio(g.get("W6"), g["W0"])
        g_states = {s: _relative(v, metric, sign) for s, v in dec.states.items()}
        shapley = order_averaged_factors(g_states)
        scale_uniform = _ratio(g_states.get(frozenset()), g["W0"])
        averaged: dict[str, Any] = {"scale_uniform": scale_uniform, "reason": None, "factors": None, "product": None}
        if isinstance(shapley, str):
            averaged["reason"] = shapley
        else:
            averaged["factors"] = shapley
            averaged["product"] = None if scale_uniform is None else scale_uniform * math.prod(shapley.values())
        metrics[metric] = {
            "improvement_sign": sign,
            "stages": {key: {"A": dec.values[key]["A"][metric], "B": dec.values[key]["B"][metric],
                             "relative_improvement": g[key]} for key in seq_keys if key in dec.values},
            "sequential": sequential,
            "total": total,
            "product_sequential": product,
            "shrinkage_vs_offline": _ratio(g.get("W6"), g["W1"]),
            "one_at_a_time": oat,
            "scale_factor": scale,
            "one_at_a_time_product": oat_product,
            "residual": _ratio(total, oat_product),
            "order_averaged": averaged,
            "sign_changes": [k for k in [*seq_keys, *("-" + c for c in CAUSES)]
                             if g.get(k) is not None and g["W0"] is not None and g[k] * g["W0"] < 0],
        }
    return {
        "status": "ok",
        "reason": None,
        "conventions": conventions,
        "dominant_type": dec.dominant,
        "types": list(dec.types),
        "stages": [{"key": k, "cause": c, "description": t} for k, c, t in STAGES],
        "metrics": metrics,
    }


# --------------------------------------------------------------------------- terminal report
def _x(v: float | None) -> str:
    """A factor (a ratio of relative improvements) as the main table writes ratios, :func:`report.value_text`
    (3 significant figures, trailing zeros kept: -0.100, not -0.1), in at most 8 characters (2 significant
    figures when 3 need more room, as -1.2e-05), so that the table's 9-character cells keep a space between
    neighbours; '-' when missing."""
    text = value_text(v)
    return text if len(text) <= 8 else significant(v, VALUE_DIGITS - 1)


def _pct(v: float | None) -> str:
    """A relative improvement as the main table writes relative changes (:func:`report.percent_text`, 0.1%)."""
    return percent_text(v)


#: the decomposition's total row: G6/G0, against the *uniform* offline gain (review 2026-12-02, 3.4)
TOTAL_LABEL = "total vs uniform W0 (G6/G0), products"
#: the row repeating the main table's shrinkage, G6/G1, against the frequency-weighted offline gain
FREQ_LABEL = "shrink(freq-wtd), main table: G6/G1"

_LABELS = {"frequency": "query frequency (head/torso/tail)", "scale": "scale: utility -> online metric",
           "attractiveness": "attractiveness vs the metric's gain", "examination": "depth and examination",
           "satisfaction": "satisfaction and stopping", "mixture": "user-type mixture"}


def decomposition_lines(summary: dict[str, Any]) -> list[str]:
    """The terminal block "Why the online effect shrinks" from the summary's ``decomposition``."""
    dec = summary.get("decomposition")
    if not dec:
        return []
    head = "Why the online effect shrinks (exact, no Monte Carlo; relative improvement G of B over A, factors x):"
    if dec["status"] != "ok":
        return ["", head, f"  {dec['reason']}"]
    metrics = dec["metrics"]
    names = list(metrics)
    cell = 9  # _x's 8 characters and a separating space
    width = 3 * cell + 2
    lines = ["", head, f"  {'':42s}" + "".join(f"{m:^{width}s}" for m in names),
             f"  {'':42s}" + "".join(f"{'seq':>{cell}s}{'alone':>{cell}s}{'avg':>{cell}s}  " for _ in names)]

    def row(label: str, cells: list[str]) -> str:
        return f"  {label:42s}" + "".join(f"{c:>{width - 2}s}  " for c in cells)

    lines.append(row(f"offline {dec['conventions']['offline_metric']}, uniform (W0)",
                     [_pct(metrics[m]["stages"]["W0"]["relative_improvement"]) for m in names]))
    for i, (key, cause, _) in enumerate(STAGES[1:]):
        assert cause is not None
        cells = []
        for m in names:
            e = metrics[m]
            seq = e["sequential"][i]["factor"]
            avg = e["order_averaged"]
            if cause == "scale":
                alone, mean = seq, avg["scale_uniform"]
            else:
                alone = e["one_at_a_time"][cause]["factor"]
                mean = None if avg["factors"] is None else avg["factors"][cause]
            cells.append(f"{_x(seq):>{cell}s}{_x(alone):>{cell}s}{_x(mean):>{cell}s}")
        lines.append(f"  {_LABELS[cause] + ' (' + key + ')':42s}" + "".join(f"{c}  " for c in cells))
    lines.append(row("online, exact truth (W6)", [_pct(metrics[m]["stages"]["W6"]["relative_improvement"])
                                                  for m in names]))
    cells = [f"{_x(metrics[m]['total']):>{cell}s}{_x(metrics[m]['one_at_a_time_product']):>{cell}s}"
             f"{_x(metrics[m]['order_averaged']['product']):>{cell}s}" for m in names]
    lines.append(f"  {TOTAL_LABEL:42s}" + "".join(f"{c}  " for c in cells))
    lines.append(row(FREQ_LABEL, [_x(metrics[m].get("shrinkage_vs_offline")) for m in names]))
    lines.append(row("residual of 'alone' (interactions)", [_x(metrics[m]["residual"]) for m in names]))
    for m in names:
        e = metrics[m]
        if e["sign_changes"]:
            lines.append(f"  {m}: the improvement has the other sign at {', '.join(e['sign_changes'])} (a factor < 0 "
                         "reverses the effect; no multiplicative split)")
        reasons = {c: o["reason"] for c, o in e["one_at_a_time"].items() if o["reason"]}
        lines += [f"  {m}, {c} alone: {r}" for c, r in reasons.items()]
    lines += [
        (f"  seq: G_i/G_(i-1), causes switched on in this order (dominant type {dec['dominant_type']} until the "
         "mixture), product = total by construction;"),
        "  alone: G6 / G6 with only this cause switched off (scale: as seq), product x scale vs total = interactions;",
        "  avg: averaged over every order of switching the online causes on (Shapley), scale at uniform weights,",
        "  product = total by construction. See summary.json 'decomposition' for the stages' values.",
        "  total vs uniform W0: G6/G0, the online improvement over the offline gain uniform over queries;",
        "  shrink(freq-wtd): G6/G1, over the frequency-weighted gain W1, the main table's: two shrinkages of one pair.",
    ]
    return lines
