r"""The counterfactual design: a randomised logging policy serves the traffic, and
off-policy estimators read its log to compare two rankers that were never shown.

Estimand: the difference of the two targets' online values (``targets``, baseline
first; by default B and A) of the design's ``metric`` under the simulated users,

.. math::

    \Delta = V(B) - V(A), \qquad V(\pi) = \mathbb E_q\, \mathbb E[R \mid q, \pi(q)],

the same quantity an A/B test of ``metric`` estimates, so the run's A/B test,
interleaving and off-policy rows stand side by side on the same traffic (every design
sees the same batches; the A/B and interleaving designs keep their own arms).

Per impression the logger (:mod:`simulations.policies`, randomising over the full
candidate list of ``logger.ranker``) draws the shown list, the users' click models click,
and each estimator's per-impression terms :math:`(\mathrm{num}_i, \mathrm{den}_i)`
(:meth:`onlineeval.estimators.Estimator.terms`) for each target are added to per-user
sums. At a checkpoint the estimate of each estimator is the *paired* difference of the
two ratio estimates from the same log,

.. math::

    \hat\Delta = \hat R_B - \hat R_A, \quad \hat R_t = \frac{\sum_u x_{tu}}{\sum_u y_{tu}},

(the reward's constant offset cancels), with the delta-method standard error over users
from the per-user influence values :math:`e_{tu} = (x_{tu} - \hat R_t y_{tu}) / \bar y_t`
(:func:`onlineeval.stats.ratio_linearization`): :math:`\widehat{\mathrm{se}}^2 =
\sum_u (d_u - \bar d)^2 / (n(n-1))` with :math:`d_u = e_{Bu} - e_{Au}`, a two-sided z-test
and interval. Users are the clusters because they persist (Deng, Knoblich and Lu 2018).

Cost: the per-impression work is one draw from the logger, the logging propensities (rows
that show a target's list take them from a per-query table computed once, the others are
computed by the policy, :func:`known_list_propensities`),
the clicks and each estimator's terms for two targets on the new rows (the targets'
indicators and the slot rewards are computed once per batch and shared); a checkpoint
costs :math:`O(\text{users})` per estimator. Measured with
``benchmarks/bench_counterfactual.py`` on ``configs/counterfactual.yaml`` (CPU time of one
process, the same batches for every design, 3 replicates, each batch's best of 5 rounds):
team-draft 0.60 us per impression; this design 1.42 (1.01 serving: the logger's sampling
0.21, its propensities 0.20, clicks 0.16, terms 0.005-0.08 per estimator for both
targets; 0.41 checkpoints, 0.12 of them adaptive IPS's whole-log choice), 2.4 times
team-draft (4.9 before the fast paths). With one estimator 0.81-0.98 (1.35-1.6 times), with
an epsilon-greedy logger and IPS 0.69 (1.14 times). What remains is mostly the policy's
sampling and propensities, the clicks, and numpy's per-call overhead on batches of 4,000.
Estimators that fit a model on
the whole log (their terms depend on the other impressions: ``dm``, ``dr``, ``dr_list``,
``cascade_dr``, ``adaptive_ips``, ``pbm_ips`` unless it has given examination
probabilities and ``click_propensity`` other than ``empirical``, or any estimator
declaring ``whole_log = True``) are recomputed from the
accumulated log on the last day and every ``refit_days`` days (rows of other days are
undefined). Adaptive IPS keeps its three behaviours' per-row terms batch by batch (each
row's terms depend on that row alone) and only makes its whole-log choice among them
there, with the same numbers as recomputing it on the whole log.

A/A variant: both targets are the baseline, so the paired difference is identically 0
at every checkpoint (no test can reject); the rows say so (estimate 0, SE 0) without
computing it.

Also recorded per checkpoint (not estimates of :math:`\Delta`; the analysis reports
them apart): ``logging:<metric>``, the logger's own online metrics observed on the
traffic it served (the cost of logging, against the production ranker A's exact value),
and ``support:<estimator>:<target>``, the logged impressions whose query's target list
has an event of logging probability 0 at the estimator's support level (such an
estimator cannot evaluate that target there).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from scipy import special as _spc

from simulations.config import DesignConfig, LoggerConfig
from simulations.designs.base import Design, register_design
from simulations.policies.base import running_and
from simulations.traffic import Batch
from simulations.world import World

__all__ = [
    "LOGGING_METRICS",
    "WHOLE_LOG_ESTIMATORS",
    "CounterfactualDesign",
    "PairedEstimate",
    "build_estimators",
    "distinct_propensities",
    "known_list_propensities",
    "paired_difference",
    "refits_on_whole_log",
    "shared_policy",
    "stack_known",
    "support_mask",
]

#: the logger's own online metrics recorded as ``logging:<metric>`` rows
LOGGING_METRICS = ("clicks_per_query", "abandonment", "reciprocal_rank")
#: estimators whose per-impression terms depend on the whole log (they fit a model on it)
WHOLE_LOG_ESTIMATORS = ("dm", "dr", "dr_list", "cascade_dr", "adaptive_ips")


class PairedEstimate:
    """An estimate with its interval and two-sided z-test (what a checkpoint row holds)."""

    __slots__ = ("ci_high", "ci_low", "estimate", "pvalue", "se")

    def __init__(self, estimate: float, se: float, alpha: float) -> None:
        self.estimate, self.se = float(estimate), float(se)
        if not (math.isfinite(self.estimate) and math.isfinite(self.se)):
            self.ci_low = self.ci_high = self.pvalue = math.nan
            self.estimate = self.se = math.nan
        elif self.se > 0:
            z = float(-_spc.ndtri(alpha / 2.0))
            self.ci_low, self.ci_high = self.estimate - z * self.se, self.estimate + z * self.se
            self.pvalue = float(min(1.0, 2.0 * _spc.ndtr(-abs(self.estimate) / self.se)))
        else:  # no spread: the interval is the point, the test rejects unless it is 0
            self.ci_low = self.ci_high = self.estimate
            self.pvalue = 1.0 if self.estimate == 0 else 0.0


def paired_difference(
    num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray, alpha: float
) -> PairedEstimate:
    r"""``R_B - R_A`` of two ratio estimates from the *same* users, with the delta-method
    SE of the paired difference (see the module docstring). Undefined (NaN) with fewer
    than two users or a denominator summing to 0."""
    from onlineeval.stats import ratio_linearization

    n = num_a.shape[0]
    if n < 2 or not den_a.sum() > 0 or not den_b.sum() > 0:
        return PairedEstimate(math.nan, math.nan, alpha)
    if not (np.isfinite(num_a).all() and np.isfinite(num_b).all()):
        return PairedEstimate(math.nan, math.nan, alpha)
    r_a, e_a = _linearization(num_a, den_a, ratio_linearization)
    r_b, e_b = _linearization(num_b, den_b, ratio_linearization)
    d = e_b - e_a
    d = d - d.mean()
    return PairedEstimate(r_b - r_a, math.sqrt(float(d @ d) / (n * (n - 1))), alpha)


def _linearization(num: np.ndarray, den: np.ndarray, checked: Any) -> tuple[float, np.ndarray]:
    """``ratio_linearization(num, den)`` (the same expressions) without its input copies
    when the inputs are plain float vectors (``num`` is checked finite by the caller);
    anything else goes to ``checked``, which raises its errors."""
    if (num.dtype == np.float64 and den.dtype == np.float64 and num.ndim == den.ndim == 1
            and num.size == den.size and num.size >= 2 and np.isfinite(den).all() and not (den < 0).any()):
        r = float(num.sum() / den.sum())
        return r, (num - r * den) / den.mean()
    return checked(num, den)  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------ shared objects
#: (spec, id(world)) -> (world, policy); the entry holds the world, so its id is not reused
_POLICIES: dict[tuple[str, int], tuple[World, Any]] = {}
_CACHE_SIZE = 16


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _CACHE_SIZE:
        cache.pop(next(iter(cache)))
    cache[key] = value


def shared_policy(logger: LoggerConfig, world: World) -> Any:
    """One logging policy per (spec, world) in this process (the last few are kept); its
    random draws always come from the generator passed to ``sample``."""
    from simulations.policies import build_policy

    key = (json.dumps({"ranker": logger.ranker, **logger.spec()}, sort_keys=True, default=str), id(world))
    entry = _POLICIES.get(key)
    if entry is None or entry[0] is not world:
        entry = (world, build_policy(logger.spec(), world.scores, world.depth))
        _remember(_POLICIES, key, entry)
    return entry[1]


def build_estimators(config: DesignConfig) -> list[tuple[str, Any]]:
    """``(row name, estimator)`` for each configured estimator, the primary one first."""
    from onlineeval.estimators import get_estimator

    return [(spec.label, get_estimator(spec.name, **spec.options)) for spec in config.estimators]


def refits_on_whole_log(estimator: Any) -> bool:
    """Whether ``estimator``'s per-impression terms depend on the rest of the log (it fits
    a model on it), so its per-user sums cannot be accumulated batch by batch."""
    declared = getattr(type(estimator), "whole_log", None)
    if isinstance(declared, bool):
        return declared
    if estimator.name in WHOLE_LOG_ESTIMATORS:
        return True
    # PBM-IPS estimates the examination probabilities from the log unless they are given,
    # and its default empirical click propensity is a per-query average over the log
    return estimator.name == "pbm_ips" and (
        getattr(estimator, "examination", None) is None or getattr(estimator, "click_propensity", "") == "empirical"
    )


def _one_chunk(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The batches' arrays concatenated, kept as one chunk (the concatenation cost is
    amortised over the checkpoints)."""
    if len(parts) > 1:
        parts[:] = [{key: np.concatenate([p[key] for p in parts]) for key in parts[0]}]
    return parts[0]


def _row_separable(estimator: Any) -> bool:
    """Whether a whole-log estimator splits into per-row statistics (``behaviour_terms``)
    and a whole-log step on them (``select`` and ``pick``), as adaptive IPS does."""
    return all(callable(getattr(estimator, name, None)) for name in ("behaviour_terms", "select", "pick"))


def support_mask(policy: Any, lists: np.ndarray, level: str) -> np.ndarray | None:
    """``(Q,)`` bool: the query's target list has an event of logging probability 0 at
    ``level`` (as :func:`onlineeval.estimators.base.support_violations` checks it);
    ``None`` when the policy cannot say (level ``any`` without ``shown_probability``)."""
    q = np.arange(lists.shape[0], dtype=np.int64)
    t = np.asarray(lists, dtype=np.int64)
    valid = t >= 0
    if level == "any":
        shown = getattr(policy, "shown_probability", None)
        if shown is None:
            return None
        return (np.where(valid, np.asarray(shown(q, t)), 1.0) <= 0).any(axis=1)
    p = policy.propensities(q, t)
    if level == "list":
        return np.asarray(p.list) <= 0
    table = p.prefix if level == "prefix" else p.item
    return (np.where(valid, np.asarray(table), 1.0) <= 0).any(axis=1)


def distinct_propensities(policy: Any, query: np.ndarray, shown: np.ndarray, m: int) -> Any:
    """``policy.propensities(query, shown)`` computed once per distinct (query, list) of
    the batch (head queries repeat their lists) and expanded to every row; the rows are
    keyed by one integer ``((q (m+1) + s_0 + 1) (m+1) + s_1 + 1) ...`` when that fits in
    63 bits, else computed row by row as given. Propensities are a function of the query
    and the list, so the result is the same either way."""
    from onlineeval.estimators import Propensities

    n, k = shown.shape
    base = m + 1
    if n < 64 or (int(query.max()) + 1) * float(base) ** k >= 2.0**62:
        return policy.propensities(query, shown)
    key = query.astype(np.int64)
    for j in range(k):
        key = key * base + (shown[:, j] + 1)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    if first.size > 0.8 * n:  # few repeats: not worth the gather
        return policy.propensities(query, shown)
    p = policy.propensities(query[first], shown[first])
    return Propensities(np.asarray(p.list)[inv], np.asarray(p.prefix)[inv], np.asarray(p.item)[inv])


def known_list_propensities(policy: Any, query: np.ndarray, shown: np.ndarray, m: int,
                            known: list[tuple[np.ndarray, Any]], match: list[np.ndarray] | None = None,
                            table: Any = None) -> Any:
    """``policy.propensities(query, shown)`` with the rows that show a known list looked up.

    ``known`` holds ``(lists, p)``: ``(Q, k)`` lists, one per query (the rankers' top
    ``k``, which an epsilon-greedy or mixture logger around them shows most of the time),
    and their propensities ``p`` computed once for all queries. A row whose list equals
    its query's known list takes that row of ``p``; the others are computed by the policy
    (they are mostly randomised lists, rarely repeated). Propensities are a function of
    the query and the list, so the numbers are the same. ``match[i]`` may give the
    ``(n,)`` rows whose list is ``lists_i[query]``, and ``table`` the known propensities
    stacked (:func:`stack_known`), when the caller has them."""
    from onlineeval.estimators import Propensities

    n_queries = known[0][0].shape[0]
    which = np.full(query.shape[0], -1, dtype=np.int64)
    for i in range(len(known) - 1, -1, -1):  # the first known list a row shows wins
        eq = match[i] if match is not None else (known[i][0][query] == shown).all(axis=1)
        which = np.where(eq, i, which)
    rest = np.flatnonzero(which < 0)
    if rest.size == query.shape[0]:
        return policy.propensities(query, shown)
    t = stack_known(known) if table is None else table
    rows = np.maximum(which, 0) * n_queries + query  # the row of the stacked table (rest: overwritten)
    p_list, p_prefix, p_item = t.list[rows], t.prefix[rows], t.item[rows]
    if rest.size:  # mostly randomised lists, rarely repeated: no de-duplication
        p = policy.propensities(query[rest], shown[rest])
        p_list[rest], p_prefix[rest], p_item[rest] = p.list, p.prefix, p.item
    return Propensities(p_list, p_prefix, p_item)


def stack_known(known: list[tuple[np.ndarray, Any]]) -> Any:
    """The known lists' propensities stacked: row ``i Q + q`` is list ``i`` of query ``q``."""
    from onlineeval.estimators import Propensities

    return Propensities(*(np.concatenate([np.asarray(getattr(p, f)) for _, p in known]) for f in ("list", "prefix", "item")))


#: (id(policy), id(world), target) -> (policy, world, (lists, propensities)); entries hold what they are keyed by
_KNOWN: dict[tuple[int, int, str], tuple[Any, World, tuple[np.ndarray, Any]]] = {}


def _shared_known(policy: Any, world: World, target: str) -> tuple[np.ndarray, Any]:
    """The ranker ``target``'s top-``k`` lists and their logging propensities, all queries."""
    key = (id(policy), id(world), target)
    entry = _KNOWN.get(key)
    if entry is None or entry[0] is not policy or entry[1] is not world:
        lists = np.asarray(world.rankings[target], dtype=np.int64)
        entry = (policy, world, (lists, policy.propensities(np.arange(lists.shape[0]), lists)))
        _remember(_KNOWN, key, entry)
    return entry[2]


#: (id(policy), id(world), target, level) -> (policy, world, mask); entries hold what they are keyed by
_SUPPORT: dict[tuple[int, int, str, str], tuple[Any, World, np.ndarray | None]] = {}


def _shared_support(policy: Any, world: World, target: str, level: str) -> np.ndarray | None:
    key = (id(policy), id(world), target, level)
    entry = _SUPPORT.get(key)
    if entry is None or entry[0] is not policy or entry[1] is not world:
        entry = (policy, world, support_mask(policy, world.rankings[target], level))
        _remember(_SUPPORT, key, entry)
    return entry[2]


class _BatchTarget:
    """A deterministic target that remembers the propensities of the last lists asked for,
    so the estimators of one batch share one computation (the same query and shown arrays
    are passed to every estimator)."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.name = target.name
        # the arrays themselves are held, so an identity match cannot be a recycled id
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._value: Any = None

    def rankings(self, query: np.ndarray) -> np.ndarray:
        return self.target.rankings(query)

    def propensities(self, query: np.ndarray, rankings: np.ndarray) -> Any:
        if self._arrays is None or self._arrays[0] is not query or self._arrays[1] is not rankings:
            self._value = self._indicators(query, rankings)
            self._arrays = (query, rankings)
        return self._value

    def prime(self, query: np.ndarray, rankings: np.ndarray, same: np.ndarray, run: np.ndarray) -> None:
        """Remember the propensities of ``rankings`` from ``same = lists[query] == rankings``
        and its running AND over the slots ``run`` (the caller computed them once for the
        logging propensities too)."""
        from onlineeval.estimators import Propensities

        prefix = run.astype(np.float64)
        self._value = Propensities(prefix[:, -1].copy(), prefix, same.astype(np.float64))
        self._arrays = (query, rankings)

    def _indicators(self, query: np.ndarray, rankings: np.ndarray) -> Any:
        """``DeterministicTarget.propensities`` (the same arithmetic) without its query
        check when the log's queries are the world's (valid by construction)."""
        from onlineeval.estimators import Propensities

        lists = self.target.lists
        r = rankings
        if not (query.dtype == np.int64 and r.dtype == np.int64 and r.ndim == 2 and lists.shape[1] == r.shape[1]
                and query.size and 0 <= query.min() and query.max() < lists.shape[0]):
            return self.target.propensities(query, rankings)
        same = lists[query] == r
        prefix = running_and(same).astype(np.float64)
        return Propensities(prefix[:, -1].copy(), prefix, same.astype(np.float64))

    def forget(self) -> None:
        self._arrays = self._value = None


class _BatchReward:
    """The design's reward with ``slot_rewards`` remembered for the last clicks array (the
    estimators of one batch pass the same ``data.clicks``); read-only, so no estimator
    can change what the next one reads. Everything else is the wrapped reward's."""

    def __init__(self, reward: Any) -> None:
        self.reward = reward
        self._clicks: np.ndarray | None = None
        self._value: np.ndarray | None = None
        self._sums: np.ndarray | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reward, name)

    def slot_rewards(self, clicks: Any) -> np.ndarray:
        if self._clicks is not clicks or self._value is None:
            value = self.reward.slot_rewards(clicks)
            value.setflags(write=False)
            self._clicks, self._value, self._sums = clicks, value, None
        return self._value

    def list_rewards(self, clicks: Any) -> np.ndarray:
        """``slot_rewards(clicks).sum(axis=1)``, remembered like the slot rewards."""
        from onlineeval.estimators.ips import row_sum

        value = self.slot_rewards(clicks)
        if self._sums is None:
            self._sums = row_sum(value)
            self._sums.setflags(write=False)
        return self._sums

    def value(self, clicks: Any) -> np.ndarray:
        return self.reward.offset + self.list_rewards(clicks)

    def forget(self) -> None:
        self._clicks = self._value = self._sums = None


# ------------------------------------------------------------------------------ the design
@register_design("counterfactual")
class CounterfactualDesign(Design):
    """See the module docstring."""

    accumulators = ("obs:clicks", "obs:abandoned", "obs:rr")

    #: the replicate's last day (set by the runner): whole-log estimators are computed then
    last_day: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from onlineeval.estimators import DeterministicTarget, get_reward

        cfg = self.config
        self.reward = get_reward(cfg.metric, self.world.depth)
        self.estimators = build_estimators(cfg)
        self.support_rows: list[tuple[str, str]] = []
        self.violations: dict[tuple[str, str], int] = {}
        self._log: list[dict[str, np.ndarray]] = []
        if self.aa:
            return  # the paired difference of a target with itself is 0: nothing to serve or log
        self.policy = shared_policy(cfg.logger, self.world)  # type: ignore[arg-type]
        self.target_names = list(cfg.targets)
        self.targets = [_BatchTarget(DeterministicTarget(self.world.rankings[t], t)) for t in self.target_names]
        self._batch_reward = _BatchReward(self.reward)
        # the targets' lists with their logging propensities for every query (looked up for
        # the rows that show them); None when a target list does not fit the logger's slots
        self._known: list[tuple[np.ndarray, Any]] | None = None
        if all(np.shape(self.world.rankings[t])[1] == self.policy.k for t in self.target_names):
            self._known = [_shared_known(self.policy, self.world, t) for t in self.target_names]
            self._known_table = stack_known(self._known)
        self.whole_log = {label: refits_on_whole_log(est) for label, est in self.estimators}
        # whole-log estimators whose per-row statistics do not depend on the rest of the log
        # (adaptive IPS: each behaviour's terms; only the choice among them is whole-log):
        # the statistics are kept batch by batch and combined at a due checkpoint
        self._row_stats: dict[tuple[str, str], list[dict[str, np.ndarray]]] = {
            (label, t): [] for label, est in self.estimators if self.whole_log[label] and _row_separable(est)
            for t in self.target_names
        }
        self._row_meta: list[dict[str, np.ndarray]] = []  # the rows' users and user types, batch by batch
        for label, est in self.estimators:
            for t in self.target_names:
                self.sums[f"num:{label}:{t}"] = np.zeros(self.population)
                self.sums[f"den:{label}:{t}"] = np.zeros(self.population)
                mask = _shared_support(self.policy, self.world, t, getattr(est, "support_level", "item"))
                if mask is not None:
                    self.support_rows.append((label, t))
                    self.violations[(label, t)] = 0
        self._masks = {
            (label, t): _shared_support(self.policy, self.world, t, getattr(est, "support_level", "item"))
            for label, est in self.estimators for t in self.target_names
        }

    # -------------------------------------------------------------------------- serving
    def _logged(self, batch: Batch) -> Any:
        from onlineeval.estimators import LoggedData

        shown = np.asarray(self.policy.sample(batch.query, self.rng), dtype=np.int64)
        clicks = self._clicks(batch, shown)
        m = self.world.labels.shape[1]
        if self._known is None:
            p = distinct_propensities(self.policy, batch.query, shown, m)
            same = runs = None
        else:
            same = [lists[batch.query] == shown for lists, _ in self._known]
            runs = [running_and(eq) for eq in same]
            p = known_list_propensities(self.policy, batch.query, shown, m, self._known, [r[:, -1] for r in runs],
                                        self._known_table)
        data = LoggedData(batch.query, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item,
                          user=batch.user, user_type=batch.user_type, logger=self.policy)
        for target in self.targets:
            target.forget()  # the cache holds one batch (keyed by the arrays' identity)
        if same is not None and runs is not None:  # the targets' lists are the known lists: indicators at hand
            for target, eq, run in zip(self.targets, same, runs, strict=True):
                target.prime(data.query, data.shown, eq, run)
        return data

    def _process(self, batch: Batch) -> None:
        if self.aa:
            return
        data = self._logged(batch)
        self._log.append({
            "query": data.query, "shown": data.shown, "clicks": data.clicks, "user": batch.user,
            "user_type": batch.user_type, "p_list": data.p_list, "p_prefix": data.p_prefix, "p_item": data.p_item,
        })
        n_clicks = data.clicks[:, 0].astype(np.int64)  # clicks.sum(axis=1), slot by slot
        for j in range(1, data.k):
            n_clicks += data.clicks[:, j]
        first = np.argmax(data.clicks, axis=1)
        self._add("obs:clicks", batch.user, n_clicks.astype(np.float64))
        self._add("obs:abandoned", batch.user, (n_clicks == 0).astype(np.float64))
        self._add("obs:rr", batch.user, np.where(n_clicks > 0, 1.0 / (first + 1.0), 0.0))
        self._batch_reward.forget()
        if self._row_stats:
            self._row_meta.append({"user": data.user, "user_type": data.user_type})
        for label, est in self.estimators:
            for t, target in zip(self.target_names, self.targets, strict=True):
                mask = self._masks[(label, t)]
                if mask is not None:
                    self.violations[(label, t)] += int(mask[batch.query].sum())
                if self.whole_log[label]:
                    if (label, t) in self._row_stats:
                        data.require(*est.needs, estimator=est.name)
                        self._row_stats[(label, t)].append(est.behaviour_terms(data, target, self._batch_reward))
                    continue
                terms = est.terms(data, target, self._batch_reward)
                self._add(f"num:{label}:{t}", batch.user, terms.num)
                self._add(f"den:{label}:{t}", batch.user, None if terms.den is None else terms.den)

    def log(self) -> Any:
        """The whole log so far as one :class:`onlineeval.estimators.LoggedData`."""
        from onlineeval.estimators import LoggedData

        if not self._log:
            raise ValueError(f"design {self.name!r} has logged no impression yet")
        if len(self._log) > 1:  # keep one chunk: concatenation cost amortised over checkpoints
            self._log = [{k: np.concatenate([c[k] for c in self._log]) for k in self._log[0]}]
        c = self._log[0]
        return LoggedData(c["query"], c["shown"], c["clicks"], p_list=c["p_list"], p_prefix=c["p_prefix"],
                          p_item=c["p_item"], user=c["user"], user_type=c["user_type"], logger=self.policy)

    # -------------------------------------------------------------------------- checkpoint
    def metric_names(self) -> list[str]:
        names = [label for label, _ in self.estimators]
        if self.aa:
            return names
        names += [f"logging:{m}" for m in LOGGING_METRICS]
        return names + [f"support:{label}:{t}" for label, t in self.support_rows]

    def _has_data(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> bool:
        return users.size >= 2

    def checkpoint(self, day: int) -> None:
        self._day = day
        super().checkpoint(day)

    def _due(self, day: int) -> bool:
        every = self.config.refit_days
        return day == self.last_day or (every > 0 and day % every == 0)

    def _estimates(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> dict[str, Any]:
        from onlineeval.stats.online import ratio_mean_batch

        alpha = self.alpha
        out: dict[str, Any] = {}
        if self.aa:
            return {label: PairedEstimate(0.0, 0.0, alpha) for label, _ in self.estimators}
        day = getattr(self, "_day", None)
        whole = None
        for label, est in self.estimators:
            if self.whole_log[label]:
                if day is None or not self._due(day):
                    out[label] = PairedEstimate(math.nan, math.nan, alpha)
                    continue
                if (label, self.target_names[0]) in self._row_stats:
                    x = self._row_stat_sums(label, est, users, sums["impressions"])
                else:
                    whole = self.log() if whole is None else whole
                    x = self._whole_log_sums(est, whole, users)
            else:
                x = [sums[f"{part}:{label}:{t}"] for t in self.target_names for part in ("num", "den")]
            out[label] = paired_difference(x[0], x[1], x[2], x[3], alpha)
            if self.config.bootstrap and day is not None and day == self.last_day and math.isfinite(
                    out[label].estimate):
                out[label] = self._bootstrap(out[label], x)
        # the logger's three metrics in one batch (the same kernel row by row as ratio_mean)
        num = np.stack([sums[key] for key in ("obs:clicks", "obs:abandoned", "obs:rr")])
        logging = ratio_mean_batch(num, np.broadcast_to(sums["impressions"], num.shape), alpha=alpha)
        for i, metric in enumerate(LOGGING_METRICS):
            out[f"logging:{metric}"] = logging[i]
        for label, t in self.support_rows:
            out[f"support:{label}:{t}"] = _Count(self.violations[(label, t)])
        return out

    def _whole_log_sums(self, est: Any, data: Any, users: np.ndarray) -> list[np.ndarray]:
        out = []
        for target in self.targets:
            target.forget()
            terms = est.terms(data, target.target, self.reward)
            den = np.ones(data.n) if terms.den is None else terms.den
            out += [np.bincount(data.user, terms.num, self.population)[users],
                    np.bincount(data.user, den, self.population)[users]]
        return out

    def _row_stat_sums(self, label: str, est: Any, users: np.ndarray, impressions: np.ndarray) -> list[np.ndarray]:
        """:meth:`_whole_log_sums` from the per-row statistics kept batch by batch (the
        same rows in the same order as the whole log, so the same numbers); the
        denominators are the users' impression counts."""
        meta = _one_chunk(self._row_meta)
        out = []
        for t in self.target_names:
            stats = _one_chunk(self._row_stats[(label, t)])
            choice, _ = est.select(meta["user_type"], stats)
            out += [np.bincount(meta["user"], est.pick(choice, stats), self.population)[users], impressions]
        return out

    def _bootstrap(self, est: PairedEstimate, x: list[np.ndarray]) -> PairedEstimate:
        """Replace the interval by a cluster (user) bootstrap percentile interval."""
        n, b = x[0].shape[0], self.config.bootstrap
        stats = np.empty(b)
        block = max(1, (1 << 22) // max(n, 1))
        for lo in range(0, b, block):
            m = min(block, b - lo)
            counts = self.rng.multinomial(n, np.full(n, 1.0 / n), size=m).astype(np.float64)
            s = counts @ np.stack(x, axis=1)  # (m, 4): num_a, den_a, num_b, den_b
            with np.errstate(divide="ignore", invalid="ignore"):
                stats[lo:lo + m] = s[:, 2] / s[:, 3] - s[:, 0] / s[:, 1]
        stats = stats[np.isfinite(stats)]
        if stats.size:
            est.ci_low, est.ci_high = (float(v) for v in np.quantile(stats, [self.alpha / 2, 1 - self.alpha / 2]))
        return est


class _Count:
    """A count recorded in a checkpoint row's ``estimate`` (no standard error)."""

    __slots__ = ("ci_high", "ci_low", "estimate", "pvalue", "se")

    def __init__(self, count: int) -> None:
        self.estimate = float(count)
        self.se = self.ci_low = self.ci_high = self.pvalue = math.nan


# ------------------------------------------------------------------------------ assumption sweep
_SWEEP_TAG = 0x7377656570  # "sweep"
_SWEEP_CHUNK = 100_000


def direct_log(world: World, users: Any, policy: Any, n: int, rng: np.random.Generator) -> Any:
    """``n`` impressions served by ``policy`` without SimPy: queries by frequency, user
    types by share, clicks from the types' click models. Every impression is its own
    cluster (``user`` is ``None``)."""
    from onlineeval.estimators import LoggedData
    from simulations.sampling import draw_from_cdf
    from simulations.world import shown_labels

    cdf = np.cumsum(world.frequency)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("query", "shown", "clicks", "types", "pl", "pp", "pi")}
    for lo in range(0, n, _SWEEP_CHUNK):
        m = min(_SWEEP_CHUNK, n - lo)
        q = draw_from_cdf(cdf, rng.random(m)).astype(np.int64)
        types = users.draw_types(m, rng)
        shown = np.asarray(policy.sample(q, rng), dtype=np.int64)
        clicks = users.sample(shown_labels(world.labels, q, shown), types, rng)
        p = distinct_propensities(policy, q, shown, world.labels.shape[1])
        for key, v in zip(parts, (q, shown, clicks, types, p.list, p.prefix, p.item), strict=True):
            parts[key].append(np.asarray(v))
    c = {k: np.concatenate(v) for k, v in parts.items()}
    return LoggedData(c["query"], c["shown"], c["clicks"], p_list=c["pl"], p_prefix=c["pp"], p_item=c["pi"],
                      user_type=c["types"], logger=policy)


def sweep_point(design: DesignConfig, world: World, users: Any, n: int, rng: np.random.Generator,
                alpha: float) -> dict[str, Any]:
    """One point of an assumption sweep: the exact :math:`V(B) - V(A)` under ``users`` and,
    per estimator, its estimate from one direct log of ``n`` impressions with its SE (the
    paired difference over impressions) and bias."""
    from onlineeval.estimators import DeterministicTarget, get_reward
    from simulations.runner import exact_ab_metrics

    base, cand = design.targets
    values = {r: float(world.frequency @ exact_ab_metrics(world, users, r)[design.metric]) for r in (base, cand)}
    truth = values[cand] - values[base]
    policy = shared_policy(design.logger, world)  # type: ignore[arg-type]
    data = direct_log(world, users, policy, n, rng)
    reward = get_reward(design.metric, world.depth)
    targets = [DeterministicTarget(world.rankings[t], t) for t in (base, cand)]
    out: dict[str, Any] = {"truth": truth, "estimators": {}}
    for label, est in build_estimators(design):
        x = []
        for target in targets:
            terms = est.terms(data, target, reward)
            x += [terms.num, np.ones(data.n) if terms.den is None else terms.den]
        e = paired_difference(x[0], x[1], x[2], x[3], alpha)
        out["estimators"][label] = {"estimate": e.estimate, "se": e.se, "bias": e.estimate - truth}
    return out


def assumption_sweep(config: Any, world: World) -> dict[str, Any]:
    """Each counterfactual estimator's bias as one click-model parameter moves
    (``analysis.assumption_sweep``): per value, the config with that value
    (:func:`simulations.config.swept_mapping`), the exact truth, and one direct log of
    ``impressions`` impressions. The logs of all values use the same random stream
    (common random numbers), so the curves differ by the parameter, not by noise."""
    from simulations.config import config_from_mapping, sweep_path, swept_mapping
    from simulations.users import UserModels

    sweep = config.analysis.assumption_sweep
    design = next(d for d in config.designs if d.type == "counterfactual"
                  and (sweep.design is None or d.name == sweep.design))
    path = sweep_path(sweep.parameter)
    points = []
    for value in sweep.values:
        point_cfg = config_from_mapping(swept_mapping(config.effective(), path, value))
        users = UserModels.from_config(point_cfg.users)
        rng = np.random.default_rng(np.random.SeedSequence((config.seed, _SWEEP_TAG)))
        points.append(sweep_point(design, world, users, sweep.impressions, rng, config.analysis.alpha))
    labels = [label for label, _ in build_estimators(design)]
    return {
        "design": design.name,
        "metric": design.metric,
        "parameter": sweep.parameter,
        "values": list(sweep.values),
        "impressions": sweep.impressions,
        "truth": [p["truth"] for p in points],
        "estimators": {
            label: {key: [p["estimators"][label][key] for p in points] for key in ("estimate", "se", "bias")}
            for label in labels
        },
        "method": "one direct log per value (no SimPy, each impression its own cluster), common random numbers "
        "across values; bias = estimate - exact V(B) - V(A); se = the paired difference's delta-method SE",
    }
