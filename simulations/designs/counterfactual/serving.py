"""What the counterfactual design shares per process and per batch: the logging policy,
the estimators, the targets' lists with their logging propensities, support masks, and
the per-batch target indicators and slot rewards every estimator of a batch reads."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from simulations.config import DesignConfig, LoggerConfig
from simulations.policies.base import running_and
from simulations.world import World

__all__ = [
    "EarlyRefit",
    "WHOLE_LOG_ESTIMATORS",
    "build_estimators",
    "distinct_propensities",
    "estimator_error",
    "known_list_propensities",
    "refits_on_whole_log",
    "shared_policy",
    "shared_target",
    "stack_known",
    "support_mask",
]


class EarlyRefit(Exception):
    """A whole-log estimator's refit before the last day met a log it cannot use
    (:meth:`~simulations.designs.counterfactual.CounterfactualDesign._whole_log_sums`): that day's estimate is
    undefined."""


def estimator_error(design: Any, est: Any, n: int, exc: Exception) -> Exception:
    """The ``ConfigError`` of an estimator of ``design`` (a
    :class:`~simulations.designs.counterfactual.CounterfactualDesign`) that cannot estimate from a replicate's log or
    a batch of it (``n`` impressions; PBM-IPS whose examination the log does not identify, or the pseudoinverse
    beyond a Plackett-Luce logger's ``pair_max_states``): it names the design's estimator (its key in the config)
    and the log, then the error ``exc`` it met (a logger's key path included). Keyed ``designs.<name>``:
    :func:`simulations.runner.run_replicate` re-keys it by the design's index (``designs[2]``)."""
    from onlineeval.errors import ConfigError

    j, label = next((j, label) for j, (label, e) in enumerate(design.estimators) if e is est)
    what = str(exc) if isinstance(exc, ConfigError) else str(getattr(exc, "message", exc))
    if design.whole_log[label]:
        log = f"a replicate's whole log (days 1-{getattr(design, '_day', None)}, {n:,} impressions)"
    else:
        log = f"a batch of a replicate's log ({n:,} impressions)"
    return ConfigError(("designs", design.config.name, "estimators", j),
                       f"{label} cannot estimate from {log}: {what}. A log it cannot use stops the run (a refit "
                       "before the last day on such a log is undefined instead): give it the options that make it "
                       "usable, or a logger and traffic whose logs it can use")


#: estimators whose per-impression terms depend on the whole log (they fit a model on it)
WHOLE_LOG_ESTIMATORS = ("dm", "dr", "dr_list", "cascade_dr", "adaptive_ips")


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


#: (id(world), ranker) -> (world, its DeterministicTarget); the entry holds the world, so its id is not reused
_TARGETS: dict[tuple[int, str], tuple[World, Any]] = {}


def shared_target(world: World, ranker: str) -> Any:
    """One :class:`~onlineeval.estimators.DeterministicTarget` per (world, ranker) in this process (the last few
    are kept): targets are immutable, and estimators keep what they compute per query for a (logger, target) pair
    (the pseudoinverse's weights, whose logger's pair marginals cost about 8 ms a query for a Plackett-Luce logger of
    20 candidates), so every replicate a process runs reuses them instead of computing them again."""
    from onlineeval.estimators import DeterministicTarget

    key = (id(world), ranker)
    entry = _TARGETS.get(key)
    if entry is None or entry[0] is not world:
        entry = (world, DeterministicTarget(world.rankings[ranker], ranker))
        _remember(_TARGETS, key, entry)
    return entry[1]


def build_estimators(config: DesignConfig) -> list[tuple[str, Any]]:
    """``(row name, estimator)`` for each configured estimator, the primary one first."""
    from onlineeval.estimators import get_estimator

    return [(spec.label, get_estimator(spec.name, **spec.options)) for spec in config.estimators]


def interval_warnings(config: Any) -> list[str]:
    """One line per counterfactual design of ``config`` (a :class:`~simulations.config.Config`) whose adaptive IPS
    makes its data-driven choice without the last day's bootstrap: its delta-method interval holds the choice
    fixed and covers below the nominal level (0.875-0.904 for 0.95 over 1,000 replicates of
    ``configs/counterfactual.yaml`` under each of three seeds; :mod:`onlineeval.estimators.adaptive_ips`); and one
    per design whose direct method fits its click model on the log without the bootstrap and without a linearised
    interval (a PBM, UBM, cascade model, CTR model, or DCM, SDBN, DBN or CCM by EM, fitted on
    the whole log:
    :meth:`~onlineeval.estimators.DirectMethod.linearised`):
    its interval holds the fitted model fixed (20 of 100 covered for 95 in ``tests/test_dm_bootstrap.py``)."""
    from simulations.designs.counterfactual.metric import design_reward

    out = []
    for i, design in enumerate(config.designs):
        if design.type != "counterfactual" or design.bootstrap:
            continue
        estimators = build_estimators(design)
        labels = [label for label, est in estimators if est.chooses_from_log]
        if labels:
            out.append(f"warning: design {design.name!r}: {', '.join(labels)} chooses its behaviours from the log "
                       f"and designs[{i}].bootstrap is 0: its delta-method interval holds the choice fixed and "
                       f"covers below the nominal level; designs[{i}].bootstrap: 400 gives an interval that makes the "
                       "choice again in every resample")
        reward = design_reward(design.metric, config.offline_metric, config.rankers.depth)
        fitted = [label for label, est in estimators if not est.chooses_from_log and est.clt_holds_fixed(reward)]
        if fitted:
            out.append(f"warning: design {design.name!r}: {', '.join(fitted)} fits its click model on the log and "
                       f"designs[{i}].bootstrap is 0: its interval holds the fitted model fixed and covers far below "
                       f"the nominal level; designs[{i}].bootstrap: 400 gives an interval that fits the model again "
                       "in every resample")
    return out


def held_fixed(config: Any) -> dict[tuple[str, str], str]:
    """``{(design name, estimator label): what its delta-method SE holds fixed}`` for the counterfactual designs of
    ``config`` (a :class:`~simulations.config.Config`) whose estimator takes a data-driven choice from the log that
    its SE ignores (``clt_holds_fixed``: adaptive IPS's behaviours, a direct method's click model fitted on the
    log): such an SE is too small (adaptive IPS's 0.70 of its replicates' SD on ``configs/counterfactual.yaml``),
    so the analysis sizes these estimators from the replicates' SD of their estimates and counts their power only
    from the last day's bootstrap test (:func:`simulations.analysis.analyse`)."""
    from simulations.designs.counterfactual.metric import design_reward

    out: dict[tuple[str, str], str] = {}
    for design in config.designs:
        if design.type != "counterfactual":
            continue
        reward = design_reward(design.metric, config.offline_metric, config.rankers.depth)
        for label, est in build_estimators(design):
            reason = est.clt_holds_fixed(reward)
            if reason:
                out[(design.name, label)] = str(reason)
    return out


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
                            table: Any = None, sampled: bool = False) -> Any:
    """``policy.propensities(query, shown)`` with the rows that show a known list looked up.

    ``known`` holds ``(lists, p)``: ``(Q, k)`` lists, one per query (the rankers' top
    ``k``, which an epsilon-greedy or mixture logger around them shows most of the time),
    and their propensities ``p`` computed once for all queries. A row whose list equals
    its query's known list takes that row of ``p``; the others are computed by the policy
    (they are mostly randomised lists, rarely repeated). Propensities are a function of
    the query and the list, so the numbers are the same. ``match[i]`` may give the
    ``(n,)`` rows whose list is ``lists_i[query]``, and ``table`` the known propensities
    stacked (:func:`stack_known`), when the caller has them. ``sampled``: ``shown`` are the
    policy's own draws for ``query`` (int64 ids of the world's queries), so the policy's
    ``sampled_propensities`` (no validation, no search for repeated documents) may serve
    the other rows when it has one."""
    from onlineeval.estimators import Propensities

    n_queries = known[0][0].shape[0]
    which = np.full(query.shape[0], -1, dtype=np.int64)
    for i in range(len(known) - 1, -1, -1):  # the first known list a row shows wins
        eq = match[i] if match is not None else (known[i][0][query] == shown).all(axis=1)
        which = np.where(eq, i, which)
    rest = np.flatnonzero(which < 0)
    own = getattr(policy, "sampled_propensities", None) if sampled and query.dtype == np.int64 else None
    if rest.size == query.shape[0]:
        return policy.propensities(query, shown) if own is None else own(query, shown)
    t = stack_known(known) if table is None else table
    rows = np.maximum(which, 0) * n_queries + query  # the row of the stacked table (rest: overwritten)
    # take along the first axis: the same rows as t.prefix[rows], without fancy indexing's overhead
    p_list, p_prefix, p_item = t.list.take(rows), t.prefix.take(rows, axis=0), t.item.take(rows, axis=0)
    if rest.size:  # mostly randomised lists, rarely repeated: no de-duplication
        p = (policy.propensities if own is None else own)(query.take(rest), shown.take(rest, axis=0))
        p_list[rest], p_prefix[rest], p_item[rest] = p.list, p.prefix, p.item
    return Propensities(p_list, p_prefix, p_item)


def stack_known(known: list[tuple[np.ndarray, Any]]) -> Any:
    """The known lists' propensities stacked: row ``i Q + q`` is list ``i`` of query ``q``."""
    from onlineeval.estimators import Propensities

    return Propensities(*(np.concatenate([np.asarray(getattr(p, f)) for _, p in known])
                          for f in ("list", "prefix", "item")))


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
        # what estimators key their per-target caches by: the wrapped (immutable, shared) target, not this
        # per-replicate wrapper (onlineeval.estimators.pseudoinverse)
        self.cache_key = target
        # the arrays themselves are held, so an identity match cannot be a recycled id
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self._value: Any = None
        self._primed: tuple[np.ndarray, np.ndarray] | None = None

    def rankings(self, query: np.ndarray) -> np.ndarray:
        return self.target.rankings(query)

    def propensities(self, query: np.ndarray, rankings: np.ndarray) -> Any:
        if self._arrays is None or self._arrays[0] is not query or self._arrays[1] is not rankings:
            self._value = self._indicators(query, rankings)
            self._arrays, self._primed = (query, rankings), None
        elif self._value is None and self._primed is not None:  # primed: made on first use
            from onlineeval.estimators import Propensities

            same, run = self._primed
            prefix = run.astype(np.float64)
            self._value = Propensities(prefix[:, -1].copy(), prefix, same.astype(np.float64))
        return self._value

    def prime(self, query: np.ndarray, rankings: np.ndarray, same: np.ndarray, run: np.ndarray) -> None:
        """Remember the propensities of ``rankings`` from ``same = lists[query] == rankings``
        and its running AND over the slots ``run`` (the caller computed them once for the
        logging propensities too); the float arrays are made when first asked for (the
        design's fused terms do not ask)."""
        self._value = None
        self._primed = (same, run)
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
        same = lists.take(query, axis=0) == r  # lists[query], rows taken
        prefix = running_and(same).astype(np.float64)
        return Propensities(prefix[:, -1].copy(), prefix, same.astype(np.float64))

    def forget(self) -> None:
        self._arrays = self._value = self._primed = None


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
        # only reached for names the wrapper lacks; before __init__ has run (copy, pickle) there is no reward to
        # ask, and asking for it would recurse
        if name == "reward":
            raise AttributeError(name)
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

