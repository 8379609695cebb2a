r"""Adaptive IPS (AIPS; Kiyohara, Uehara, Narita, Shimizu, Yamamoto, Saito, KDD 2023).

Users differ in how they read a ranking, so the right importance weight differs per
user. A *behaviour* says which slots' documents slot ``j``'s reward depends on, and so
which logging propensity its weight divides by:

- ``independent``: slot ``j``'s reward depends on the document at ``j`` only; item
  weight :math:`w_{ij} = \pi(s_{ij} \text{ at } j)/\mu(s_{ij} \text{ at } j)` (``p_item``);
- ``cascade``: on the documents at ``0..j``; prefix weight
  :math:`w_{ij} = \pi(\mathbf s_{i,0:j})/\mu(\mathbf s_{i,0:j})` (``p_prefix``);
- ``standard``: on the whole list; list weight
  :math:`w_{ij} = \pi(\mathbf s_i)/\mu(\mathbf s_i)` for every slot (``p_list``).

With the user context :math:`u_i` (``data.user_type``, the simulator's user mixture)
and a behaviour :math:`c(u)` per context,

.. math::

    \hat V_{\mathrm{AIPS}} = c_0 + \frac1n \sum_{i=1}^n \sum_{j=0}^{k-1}
        w^{(c(u_i))}_{ij}\, r_{ij}.

It is unbiased whenever each context's true behaviour is *covered* by its chosen one
(independent is covered by cascade and standard, cascade by standard), given support;
the coarser the chosen behaviour, the higher the variance as a rule (item < prefix < list
weights). The standard behaviour is always unbiased. For a reward with an offset :math:`c_0` (abandonment:
:math:`c_0 = 1`, slot rewards :math:`-1` at the first click) every behaviour weights the slot rewards only, as the
formula above says, so the standard behaviour is :math:`c_0 + \frac1n\sum_i w_i \sum_j r_{ij}`, not the
Horvitz-Thompson form :math:`\frac1n\sum_i w_i (c_0 + \sum_j r_{ij})` of the ``ips`` estimator: both are unbiased
given support, but on abandonment they differ in value and variance (the slot form weights the common event,
a click), so ``behaviours="standard"`` is not ``ips`` there.

Choosing the behaviours
-----------------------
``behaviours`` is either one behaviour for every impression (a string), a fixed
mapping ``{user_type: behaviour}`` (every type in the log must be mapped), or ``None``
(default): the data-driven choice. For each context ``u`` (each user type; the whole
log when it has no types) and each candidate behaviour ``b`` with per-impression terms
:math:`T^{(b)}_i = \sum_j w^{(b)}_{ij} r_{ij}`, the estimated MSE of the context's
contribution is

.. math::

    \widehat{\mathrm{MSE}}_u(b) = \max\!\Big(0,\ (\bar T^{(b)}_u - \bar T^{\mathrm{ref}}_u)^2
        - \widehat{\mathrm{Var}}(\bar T^{(b)}_u - \bar T^{\mathrm{ref}}_u)\Big)
        + \widehat{\mathrm{Var}}(\bar T^{(b)}_u),

with the sample means :math:`\bar T_u` over the context's impressions, the variances of
means :math:`\widehat{\mathrm{Var}}(\bar X) = s^2_X / n_u`, and the reference
``reference`` (default ``"standard"``, the unbiased whole-list IPS; the bias of each
candidate is estimated against it, as in the paper). The first term is an unbiased
estimate of the squared bias before the clipping at 0 (the plain squared difference
would add the reference's variance to every candidate). The behaviour of least
estimated MSE is chosen per context (ties: the finer one). Since the choice uses the
same data, the data-driven estimate is not exactly unbiased: over 1,000 replicates of
``configs/counterfactual.yaml`` its bias was +0.0025 +- 0.0006 at the bundled seed (11% of the
effect, RIPS +0.0011 +- 0.0005 on the same replicates) and +0.0007, -0.0002 and +0.0006
(+- 0.0006) under three other seeds. On small logs with a noisy reference the selection bias is large: in the
conformance suite's worlds (4 queries, 5 candidates, 3 slots, a Plackett-Luce logger) at 2,500 impressions, 800
logs each, the first-click estimates of the ideal list were off by -2.8% to -5.5% (reciprocal rank; 3.5 to 7.7
SE) and +34% to +95% of the value (abandonment, whose value there is 0.03-0.08), while the fixed cascade
behaviour on the same logs is unbiased (exactly, by the suite's enumeration); at 10,000 impressions -0.7% to
-0.8% and +13% to +31% (1.2-1.9 SE at 400 logs). The standard reference's terms and their estimated variance move
together (a log that happens to hold a large weight has a high estimate and a high variance), so the choice
keeps the cascade behaviour when the reference is high and may switch when it is low
(``tests/test_adaptive_ips_selection_bias.py``). The conformance suite therefore checks fixed behaviours for
unbiasedness (:meth:`AdaptiveIPS.check_instances`), not the choice. The chosen behaviours and their estimated
MSEs are in the diagnostics' notes.

Intervals. The CLT interval holds the choice fixed: it leaves out how the choice itself
varies from log to log, and covers less than the nominal level where the choice is close
(``configs/counterfactual.yaml``, 1,000 replicates under each of three seeds: 0.875-0.904
for a nominal 0.95, where IPS, SNIPS and RIPS covered 0.94-0.96; the whole-list reference
is too noisy there to reveal the independent behaviour's bias for the cascade users, which
12-27% of the choices take, by seed). The cluster bootstrap (``n_boot``; the ``estimate``
command's ``--bootstrap``; the simulator's ``bootstrap``) runs the choice again in every
resample (:meth:`AdaptiveIPS.bootstrap_estimates`, :func:`resampled_values`), and its
percentile interval covers at the nominal level: 0.949-0.958 over the same replicates; in
the check world of mixed PBM and cascade users 285 of 300 logs, where the plain bootstrap of
the chosen terms covered 268 and the CLT interval 274 (``tests/test_adaptive_ips_bootstrap.py``).
Where every user type is top-down (PBM, cascade, DCM), ``reference="cascade"`` measures the
bias against RIPS, far less noisy: there the choice is right nine times in ten, the CLT
interval covered 0.934-0.955 (four seeds) and the RMSE was at or below RIPS's (0.0158 against
0.0161 at the bundled seed); it is biased for a user type that is not top-down.

Cross-fitting
-------------
With ``folds=F`` (> 1) the users are split into ``F`` folds (:func:`~onlineeval.estimators.model_based.fold_ids`:
the rank of a user's id among the log's sorted ids modulo ``F``, as the model-based estimators cross-fit) and the
rows of fold ``f`` take the behaviours :meth:`AdaptiveIPS.choose` picks on the other folds' rows (a user type those
rows do not hold: the reference behaviour); the estimate is the mean of every row's term as before. The choice then
does not depend on the rows it weights, which removes the selection bias above: in the conformance suite's mixture
world at 2,500 impressions (800 logs, reciprocal rank, where both candidates, cascade and standard, are unbiased)
the cross-fitted estimate was 0.3% from the exact value (+0.6 SE) where the whole-log choice was 5.5% low (-7.7 SE),
and its spread 25% smaller (SD 0.136 against 0.180; tests/test_adaptive_ips_selection_bias.py). The price: each
choice sees ``(F - 1) / F`` of the log, so where a candidate behaviour is biased (independent for cascade users) it
is picked more often: on ``configs/counterfactual.yaml`` (400 replicates, clicks per query, the standard reference)
the cross-fitted difference was off by +0.0041 +- 0.0010 against +0.0005 +- 0.0011 for the whole-log choice, at an
SD 5% smaller (5 folds: +0.0024, 10 folds: +0.0020 +- 0.0010, each choice on more of the log; SD and RMSE 0.020
against 0.022); with ``reference="cascade"`` two folds and one were unbiased (+0.0002 +- 0.0009) at the same SD. The
CLT interval still holds the folds' choices fixed (the check world at 4,000 impressions: 0.928 for a nominal 0.95,
0.912 for the whole-log choice; 0.953 at 16,000, 0.917); the reselecting bootstrap runs the cross-fitted choice
again in every resample (:class:`CrossFitFeatures`). The simulator's design computes it as ``estimate`` does on its
exported log (whose user ids sort as the simulator's users, so the folds are the same).

Candidate behaviours by reward kind
-----------------------------------
The data-driven choice only takes behaviours under which the metric's estimate *can* be unbiased
(:func:`candidate_behaviours`). For an additive reward (clicks, DCG of clicks) slot ``j``'s reward is its click,
which under the position-based model depends on the document at ``j`` alone, so all three behaviours are
candidates. For a first-click reward (``reward.kind == "first_click"``: reciprocal rank of the first click,
abandonment) slot ``j``'s reward is :math:`r_{ij} = f_j\,\mathbb 1[c_{ij} = 1,\ c_{il} = 0\ \forall l < j]`: it
depends on the clicks at every slot above ``j``, hence on the documents at ``0..j``, under *every* click model,
the position-based one included (the probability of no click above ``j`` is
:math:`\prod_{l<j}(1 - \theta_l\,\alpha(s_{il}))`). Its expectation given the document at ``j`` alone is not a
function of that document, so the item weight of the ``independent`` behaviour (IIPS) is biased for it whatever
the users' click model (Kiyohara et al. 2023, Section 3: a behaviour gives an unbiased estimate when the reward's
dependence is *covered* by the behaviour's action set; the first-click indicator's is the prefix ``0..j``). The
``cascade`` behaviour's prefix weight covers it under the top-down models (PBM, cascade, DCM: the clicks at
``0..j`` depend on the documents at ``0..j`` only) and ``standard`` covers it always. The candidates for a
first-click reward are therefore ``cascade`` and ``standard``; the choice, the bootstrap's resamples and the
simulator's whole-log choice (``simulations/designs/counterfactual``) all use this set. (Before this restriction the
choice took ``independent`` on logs with small list propensities, and its abandonment estimate was IIPS's,
outside [0, 1].) A fixed ``behaviours`` is used as given; ``independent`` on a first-click metric is then warned
as IIPS is.

(The paper optimises the behaviour over a partition of a continuous context space learned by a tree; with the discrete
user types of our logs the partition is given, and the per-context choice is exact
enumeration over the three candidates.)

References
----------
H. Kiyohara, M. Uehara, Y. Narita, N. Shimizu, Y. Yamamoto, Y. Saito, "Off-policy
evaluation of ranking policies under diverse user behavior", KDD 2023.
H. Kiyohara et al., "Doubly robust off-policy evaluation for ranking policies under the
cascade behavior model", WSDM 2022 (independent, cascade and standard IPS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.estimators.base import (
    Estimator,
    LoggedData,
    Reward,
    Target,
    Terms,
    register_estimator,
)
from onlineeval.estimators.derived import weighted_row_sum
from onlineeval.estimators.adaptive_resampling import (  # re-exported: their home was this module
    ChoiceFeatures,
    CrossFitFeatures,
    choice_features,
    resampled_values,
)

__all__ = ["BEHAVIOURS", "AdaptiveIPS", "ChoiceFeatures", "CrossFitFeatures", "candidate_behaviours",
           "choice_features", "mse_score", "resampled_values"]

#: behaviours from finest (lowest variance) to coarsest (least assumption)
BEHAVIOURS: tuple[str, ...] = ("independent", "cascade", "standard")
_LEVEL = {"independent": "item", "cascade": "prefix", "standard": "list"}
#: each behaviour's slot weights (LoggedData.importance_weights levels)
_WEIGHTS = {"independent": "item", "cascade": "prefix", "standard": "list_slots"}


def candidate_behaviours(kind: str) -> tuple[str, ...]:
    """The behaviours the data-driven choice may take for a reward of ``kind`` (module docstring, "Candidate
    behaviours by reward kind"): all three for additive rewards; ``cascade`` and ``standard`` for first-click
    rewards, whose slot reward depends on every slot above it, so that the item weight (``independent``) is biased
    under every click model."""
    return BEHAVIOURS[1:] if kind == "first_click" else BEHAVIOURS


def _check_behaviour(value: Any, path: tuple[str | int, ...]) -> str:
    if value not in BEHAVIOURS:
        raise ConfigError(path, must_be_one_of(BEHAVIOURS, value))
    return str(value)


def _type_codes(types: np.ndarray) -> np.ndarray:
    """``np.unique(types)``; for small non-negative integer codes (the simulator's user
    types) from ``np.bincount`` (one counting pass instead of a sort: the same sorted
    values, as int64)."""
    if types.size and np.issubdtype(types.dtype, np.integer) and types.dtype.itemsize <= 8:
        lo, hi = int(types.min()), int(types.max())
        if lo >= 0 and hi < 1 << 16 and (types.dtype.kind == "i" or types.dtype.itemsize < 8):
            return np.flatnonzero(np.bincount(types, minlength=hi + 1)).astype(np.int64)
    return np.unique(types)


def mse_score(share: float, n_u: int, var_x: float, var_d: float | None = None, mean_d: float = 0.0) -> float:
    """A behaviour's estimated MSE contribution for one user type (:meth:`AdaptiveIPS.choose`): ``share`` the
    type's share of the rows, ``n_u`` its rows, ``var_x`` the sample variance (ddof 1) of the behaviour's terms
    over them, and, for a behaviour other than the reference (``var_d`` given), ``var_d`` and ``mean_d`` those of
    its differences with the reference's terms. ``share^2 (bias^2 + var_x / n_u)`` with the squared bias
    ``max(0, mean_d^2 - var_d / n_u)`` (0 for the reference; infinite variances with a single row). The one place
    of this formula: the simulator's compiled checkpoint calls it too."""
    vx = var_x / n_u if n_u > 1 else np.inf
    if var_d is None:  # the reference: d = x - x, its bias term is 0 whatever the values
        return share * share * (0.0 + vx)
    vd = var_d / n_u if n_u > 1 else np.inf
    bias2 = max(0.0, mean_d ** 2 - vd) if np.isfinite(vd) else 0.0
    # the contribution of context u to the overall estimate is share * mean
    return share * share * (bias2 + vx)


@register_estimator
@dataclass(frozen=True)
class AdaptiveIPS(Estimator):
    """Adaptive IPS: per-user-context importance weights (see the module docstring).

    Parameters
    ----------
    behaviours:
        ``None`` (default): chosen per user type by estimated MSE; a behaviour name for
        all impressions; or a mapping ``{user_type: behaviour}`` (integer types; digit
        strings such as JSON keys are read as integers).
    reference:
        The estimate the data-driven choice measures bias against: ``"standard"``
        (default, whole-list IPS, unbiased under any behaviour) or ``"cascade"`` (RIPS,
        unbiased under top-down behaviours, lower variance).
    folds:
        ``1`` (default): the choice is made on the whole log, as in the paper; ``F > 1``: cross-fitted, the
        behaviours of the rows of each of ``F`` folds of the users (:func:`~onlineeval.estimators.model_based.
        fold_ids`) chosen on the other folds' rows (module docstring, "Cross-fitting"). Only for the data-driven
        choice.
    """

    behaviours: Any = None
    reference: str = "standard"
    folds: int = 1

    name = "adaptive_ips"
    assumption = ("each user type's behaviour is covered by its chosen one (independent < cascade < standard); "
                  "data-driven choice: by estimated MSE per user type, on the same log (a selection bias that "
                  "shrinks as the log grows)")
    needs = ("p_item", "p_prefix", "p_list")
    weights_expectation = 1.0  # each behaviour's slot weights are pi/mu (Diagnostics.mean_weight)
    unbiased_under = (
        ("pbm", "additive"),
        ("cascade", "additive"), ("cascade", "first_click"),
        ("dcm", "additive"), ("dcm", "first_click"),
        # the estimator's own setting: PBM users (type 0) and cascade users (type 1) mixed,
        # each type's behaviour covered by its own mapping (see check_instances)
        ("mixture", "additive"),
        # first-click rewards: the cascade behaviour, which covers every top-down user (check_instances with kind
        # "first_click"); the data-driven choice among cascade and standard is not unbiased on logs of the suite's
        # size (its selection bias: module docstring, tests/test_adaptive_ips_selection_bias.py)
        ("pbm", "first_click"), ("mixture", "first_click"),
    )

    def __post_init__(self) -> None:
        b = self.behaviours
        if isinstance(b, Mapping):
            items = []
            for key, value in b.items():
                if isinstance(key, str) and key.strip().isdecimal():  # JSON object keys are strings
                    key = int(key)
                if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
                    raise ConfigError(("estimator", "behaviours", str(key)),
                                      "user types must be integers >= 0 (the log's user_type)")
                items.append((int(key), _check_behaviour(value, ("estimator", "behaviours", int(key)))))
            if not items:
                raise ConfigError(("estimator", "behaviours"), "must map at least one user type to a behaviour")
            object.__setattr__(self, "behaviours", tuple(sorted(items)))
        elif isinstance(b, tuple) and all(isinstance(x, tuple) and len(x) == 2 for x in b) and b:
            object.__setattr__(self, "behaviours", tuple(sorted((int(t), _check_behaviour(v, ("estimator",
                               "behaviours", int(t)))) for t, v in b)))
        elif b is not None:
            _check_behaviour(b, ("estimator", "behaviours"))
        if self.reference not in ("standard", "cascade"):
            raise ConfigError(("estimator", "reference"), f"must be 'standard' or 'cascade', got {self.reference!r}")
        if isinstance(self.folds, bool) or not isinstance(self.folds, (int, np.integer)) or self.folds < 1:
            raise ConfigError(("estimator", "folds"), f"must be an integer >= 1, got {self.folds!r}")
        object.__setattr__(self, "folds", int(self.folds))
        if self.folds > 1 and self.behaviours is not None:
            raise ConfigError(("estimator", "folds"), "cross-fits the data-driven choice (behaviours unset); with "
                              "fixed behaviours nothing is chosen on the log: leave folds at 1")
        if self.folds > 1:
            object.__setattr__(self, "assumption", self.assumption.split("; data-driven")[0] + (
                f"; data-driven choice: by estimated MSE per user type, cross-fitted over {self.folds} folds of the "
                "users (each fold's behaviours chosen on the other folds: no selection bias from choosing on the rows "
                "it weights; a biased behaviour chosen still biases)"))
        if self.behaviours is not None:  # the user's setting: nothing is chosen on the log
            setting = (self.behaviours if isinstance(self.behaviours, str)
                       else "{" + ", ".join(f"{t}: {v}" for t, v in self.behaviours) + "}")
            object.__setattr__(self, "assumption", "each user type's behaviour is covered by the one the user fixed "
                               f"(independent < cascade < standard); fixed by the user: behaviours={setting}")

    @classmethod
    def check_instances(cls, world: Any, kind: str | None = None) -> list[Estimator]:
        """A fixed behaviour covering the world's users for the reward ``kind``: for first-click rewards cascade
        (its prefix weights cover every top-down user, the PBM's included); for additive rewards independent for
        position-based worlds, cascade for cascade and DCM worlds, and per user type in the mixture world
        (independent for its PBM users, cascade for its cascade users). Not the data-driven choice: choosing on the
        same log biases it on logs of the suite's size (module docstring), which the suite's checks of
        unbiasedness would (rightly) fail."""
        if kind == "first_click":
            return [cls(behaviours="cascade")]
        family = getattr(world, "family", "")
        if family == "mixture":
            # the check worlds' mixture: user type 0 clicks by the PBM, type 1 by the cascade
            types = tuple(getattr(world, "type_families", ()) or ("pbm", "cascade"))
            return [cls(behaviours={t: ("independent" if f == "pbm" else "cascade") for t, f in enumerate(types)})]
        return [cls(behaviours="independent" if family == "pbm" else "cascade")]

    @property
    def support_level(self) -> str:  # type: ignore[override]
        """The coarsest propensity the fixed behaviours use (``list`` for the data-driven choice)."""
        b = self.behaviours
        used = [b] if isinstance(b, str) else ([v for _, v in b] if b is not None else ["standard"])
        return _LEVEL[max(used, key=BEHAVIOURS.index)]

    @property
    def chooses_from_log(self) -> bool:
        """True for the data-driven choice (``behaviours`` None)."""
        return self.behaviours is None

    @staticmethod
    def candidates(reward: Any) -> tuple[str, ...]:
        """The behaviours the data-driven choice takes for ``reward`` (:func:`candidate_behaviours` of its kind)."""
        return candidate_behaviours(getattr(reward, "kind", "additive"))

    # ------------------------------------------------------------------------------
    def slot_weights(self, data: LoggedData, target: Target,
                     behaviours: tuple[str, ...] = BEHAVIOURS) -> dict[str, np.ndarray]:
        """``(n, k)`` slot weights of each behaviour of ``behaviours`` (default: all; list
        weights repeated over slots); read-only, computed once per log and target."""
        return {b: data.importance_weights(target, _WEIGHTS[b]) for b in behaviours}

    def behaviour_terms(self, data: LoggedData, target: Target, reward: Reward) -> dict[str, np.ndarray]:
        """``(n,)`` per-impression terms :math:`T^{(b)}_i = \\sum_j w^{(b)}_{ij} r_{ij}` of each
        behaviour. Each row's terms depend on that row alone, so a log's terms are the
        concatenation of its parts' (a simulation accumulates them batch by batch and
        applies :meth:`select` to the whole log at the end)."""
        return self._behaviour_terms(self.slot_weights(data, target), data.slot_rewards(reward))

    @staticmethod
    def _behaviour_terms(weights: Mapping[str, np.ndarray], r: np.ndarray) -> dict[str, np.ndarray]:
        return {b: weighted_row_sum(w, r) for b, w in weights.items()}

    def select(self, types: np.ndarray | None, terms: Mapping[str, np.ndarray],
               source: str | None = None,
               candidates: tuple[str, ...] | None = None,
               fold: np.ndarray | None = None) -> tuple[str | np.ndarray, dict[str, Any]]:
        """The behaviour of each row: one name for every row, or an ``(n,)`` index into
        :data:`BEHAVIOURS` when the types' behaviours differ; and the notes (the chosen
        behaviours, the estimated MSEs of the data-driven choice). ``types`` is the log's
        ``user_type`` (``None``: unknown); ``candidates`` those the data-driven choice takes (:meth:`candidates` of
        the reward; default: the behaviours in ``terms``); ``fold`` (``folds > 1``) each row's fold in
        ``0..folds-1`` (:func:`~onlineeval.estimators.model_based.fold_ids`): each fold's rows take the behaviours
        chosen on the other folds' rows (:meth:`cross_select`)."""
        notes: dict[str, Any] = {}
        if isinstance(self.behaviours, str):
            notes["behaviours"] = self.behaviours
            return self.behaviours, notes
        if types is None:
            if self.behaviours is not None:
                raise InputError("adaptive_ips: a per-type mapping needs the log's user_type (the log has none); give "
                                 f"one behaviour for all impressions instead ({', '.join(BEHAVIOURS)})", source)
            types = np.zeros(next(iter(terms.values())).shape[0], dtype=np.int64)  # one context: the whole log
        if self.behaviours is None and self.folds > 1:
            if fold is None:
                raise ValueError(f"adaptive_ips: folds={self.folds} (cross-fitting) needs each row's fold")
            return self.cross_select(types, terms, fold, candidates)
        uniq = _type_codes(types)
        if self.behaviours is None:
            mapping, mse = self.choose(types, terms, uniq, candidates)
            notes["estimated_mse"] = mse
        else:
            mapping = dict(self.behaviours)
            missing = sorted(set(uniq.tolist()) - set(mapping))
            if missing:
                raise InputError(f"adaptive_ips: user types {missing} have no behaviour in 'behaviours' (mapped: "
                                 f"{sorted(mapping)}); allowed behaviours: {', '.join(BEHAVIOURS)}", source)
        notes["behaviours"] = {str(int(t)): mapping[int(t)] for t in uniq}
        choice = np.array([BEHAVIOURS.index(mapping[int(t)]) for t in uniq], dtype=np.int64)
        if np.unique(choice).size == 1:
            return BEHAVIOURS[int(choice[0])], notes
        if uniq[0] >= 0 and uniq[-1] < 1 << 16:  # small type codes: a lookup table instead of a sort
            table = np.zeros(int(uniq[-1]) + 1, dtype=np.int64)
            table[uniq] = choice
            return table[types], notes
        return choice[np.searchsorted(uniq, types)], notes

    def cross_select(self, types: np.ndarray, terms: Mapping[str, np.ndarray], fold: np.ndarray,
                     candidates: tuple[str, ...] | None = None) -> tuple[str | np.ndarray, dict[str, Any]]:
        """:meth:`select` cross-fitted: the rows of fold ``f`` take the behaviours :meth:`choose` picks on the rows
        of the other folds; a user type those rows do not hold takes the reference behaviour (the choice's own
        yardstick). Notes: ``behaviours`` ``{type: behaviour}`` where every fold took the same, ``"type (fold f)"``
        keys where they differ; ``behaviours_by_fold`` and ``estimated_mse`` per fold (``"0"``, ``"1"``, ...)."""
        choice = np.empty(types.shape[0], dtype=np.int64)
        by_fold: dict[str, dict[str, str]] = {}
        mses: dict[str, Any] = {}
        for f in range(self.folds):
            rows = np.flatnonzero(fold == f)
            if rows.size == 0:
                continue
            other = np.flatnonzero(fold != f)
            mapping, mse = (self.choose(types[other], {b: v.take(other, axis=0) for b, v in terms.items()}, None,
                                        candidates) if other.size else ({}, {}))
            own = _type_codes(types[rows])
            names = [mapping.get(int(t), self.reference) for t in own.tolist()]
            index = np.array([BEHAVIOURS.index(b) for b in names], dtype=np.int64)
            choice[rows] = index[np.searchsorted(own, types[rows])]
            by_fold[str(f)] = {str(int(t)): b for t, b in zip(own.tolist(), names, strict=True)}
            mses[str(f)] = mse
        merged: dict[str, str] = {}
        for t in sorted({t for m in by_fold.values() for t in m}, key=int):
            seen = {f: m[t] for f, m in by_fold.items() if t in m}
            if len(set(seen.values())) == 1:
                merged[t] = next(iter(seen.values()))
            else:
                merged.update({f"{t} (fold {f})": b for f, b in seen.items()})
        notes = {"behaviours": merged, "behaviours_by_fold": by_fold, "estimated_mse": mses, "folds": self.folds}
        if np.unique(choice).size == 1:
            return BEHAVIOURS[int(choice[0])], notes
        return choice, notes

    @staticmethod
    def pick(choice: str | np.ndarray, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """Each row's value of its behaviour (``choice`` from :meth:`select`): the
        behaviour's array itself when one behaviour serves every row."""
        if isinstance(choice, str):
            return values[choice]
        present = [(i, b) for i, b in enumerate(BEHAVIOURS) if b in values]  # a first-click choice has no independent
        c = choice if values[present[0][1]].ndim == 1 else choice[:, None]
        out = values[present[-1][1]]
        for i, b in reversed(present[:-1]):
            out = np.where(c == i, values[b], out)
        return out

    def bootstrap_estimates(self, data: LoggedData, targets: list[Target], reward: Reward | str, n_boot: int,
                            rng: np.random.Generator) -> np.ndarray | None:
        """The data-driven choice's cluster bootstrap: ``(n_boot, len(targets))`` estimates (without the
        reward's offset) of resamples of the log's clusters (``data.user``; rows without it), the same
        resample for every target, each running the choice per user type again on its rows
        (:func:`choice_features`, :func:`resampled_values`), so the interval carries the choice's own
        variability; ``None`` for fixed behaviours (their terms' plain cluster bootstrap is the same)."""
        if not self.chooses_from_log:
            return None
        rw = self._reward(reward, data.k)
        data.require(*self.needs, estimator=self.name)
        inv, g = data.user_groups
        types = data.user_type if data.user_type is not None else np.zeros(data.n, dtype=np.int64)
        names = self.candidates(rw)
        fold = self._folds_of(data)
        features = [self.resampling_features(types, {b: data.slot_weighted_rewards(t, _WEIGHTS[b], rw) for b in names},
                                             inv, g, names, fold) for t in targets]
        out = np.empty((int(n_boot), len(targets)))
        from onlineeval.stats import cluster_resample_counts

        for start, stop, counts in cluster_resample_counts(rng, g, int(n_boot)):
            for j, f in enumerate(features):
                num, den = resampled_values(f, counts)
                out[start:stop, j] = num / den
        return out

    def resampling_features(self, types: np.ndarray, terms: Mapping[str, np.ndarray], cluster: np.ndarray,
                            n_clusters: int, candidates: tuple[str, ...], fold: np.ndarray | None = None,
                            ) -> ChoiceFeatures | CrossFitFeatures:
        """What :func:`resampled_values` reads to run this estimator's choice again in a resample of the clusters:
        :func:`choice_features` of the rows, or cross-fitted (``fold`` each row's fold, ``folds > 1``: every
        cluster's rows in one fold) those of every row plus, per fold, those of its own rows over its own clusters
        (:class:`CrossFitFeatures`: the other folds' sums are the whole's less the fold's own)."""
        whole = choice_features(types, terms, cluster, n_clusters, self.reference, candidates)
        if fold is None:
            return whole
        g = int(n_clusters)
        fold = np.asarray(fold, dtype=np.int64)
        fold_of = np.full(g, -1, dtype=np.int64)
        fold_of[cluster] = fold
        if not np.array_equal(fold_of[cluster], fold):
            raise ValueError("resampling_features: a cluster's rows lie in more than one fold (the folds are the "
                             "clusters')")
        local = np.empty(g, dtype=np.int64)  # each cluster's column among its fold's clusters
        own, cols = [], []
        centres = dict(zip(whole.types, whole.centres, strict=True))
        for f in range(self.folds):
            rows = np.flatnonzero(fold == f)
            if rows.size == 0:
                continue
            used = np.flatnonzero(fold_of == f)
            local[used] = np.arange(used.size)
            own.append(choice_features(types[rows], {b: np.asarray(v).take(rows, axis=0) for b, v in terms.items()},
                                       local[cluster[rows]], used.size, self.reference, candidates, centres))
            cols.append(used)
        return CrossFitFeatures(whole, tuple(own), tuple(cols), BEHAVIOURS.index(self.reference))

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        # one behaviour for every row: its weights and terms alone
        # the data-driven choice: the reward's candidates only (a first-click reward has no independent behaviour)
        names = ((self.behaviours,) if isinstance(self.behaviours, str) else
                 self.candidates(reward) if self.behaviours is None else BEHAVIOURS)
        weights = self.slot_weights(data, target, names)
        terms = {b: data.slot_weighted_rewards(target, _WEIGHTS[b], reward) for b in names}
        choice, notes = self.select(data.user_type, terms, data.source, fold=self._folds_of(data))
        return Terms(num=self.pick(choice, terms), weights=self.pick(choice, weights), notes=notes)

    def _folds_of(self, data: LoggedData) -> np.ndarray | None:
        """Each row's fold of the cross-fitted choice (``None`` unless it is cross-fitted); a clear error when the
        log has fewer users (impressions without users) than folds."""
        if self.behaviours is not None or self.folds == 1:
            return None
        from onlineeval.estimators.model_based import fold_ids

        fold = fold_ids(data, self.folds)
        if np.unique(fold).size < self.folds:
            raise InputError(f"adaptive_ips: {self.folds} folds (cross-fitting) need at least {self.folds} "
                             "users/impressions; set the option folds to 1 to choose on the whole log", data.source)
        return fold

    def choose(
        self, types: np.ndarray, terms: Mapping[str, np.ndarray], uniq: np.ndarray | None = None,
        candidates: tuple[str, ...] | None = None,
    ) -> tuple[dict[int, str], dict[str, dict[str, float | None]]]:
        """The behaviour of least estimated MSE per type among ``candidates`` (default: the behaviours in
        ``terms``; :meth:`candidates` of the reward) (module docstring) and the MSEs
        (``uniq``: the sorted distinct types, when the caller has them)."""
        names = tuple(b for b in BEHAVIOURS if (b in terms if candidates is None else b in candidates))
        if self.reference not in names:
            raise ValueError(f"adaptive_ips: the reference {self.reference!r} is not a candidate ({names})")
        n = types.size
        mapping: dict[int, str] = {}
        report: dict[str, dict[str, float | None]] = {}
        ref = terms[self.reference]
        for t in (_type_codes(types) if uniq is None else uniq).tolist():
            rows = np.flatnonzero(types == t)
            n_u = int(rows.size)
            share = n_u / n
            ref_u = ref.take(rows, axis=0)  # ref[rows] (the same values), without fancy indexing's overhead
            scores: dict[str, float] = {}
            for b in names:
                if b == self.reference:  # d = x - x: its bias term is 0 whatever the values (below)
                    scores[b] = mse_score(share, n_u, float(ref_u.var(ddof=1)) if n_u > 1 else np.nan)
                    continue
                x = terms[b].take(rows, axis=0)
                d = x - ref_u
                if n_u > 1:
                    scores[b] = mse_score(share, n_u, float(x.var(ddof=1)), float(d.var(ddof=1)), float(d.mean()))
                else:
                    scores[b] = mse_score(share, n_u, np.nan, np.nan, float(d.mean()))
            best = min(names, key=lambda b: (scores[b], BEHAVIOURS.index(b)))
            mapping[int(t)] = best
            report[str(int(t))] = {b: (v if np.isfinite(v) else None) for b, v in scores.items()}  # JSON-able
        return mapping, report
