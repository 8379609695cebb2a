"""The counterfactual design's fused terms (``simulations/designs/counterfactual/fused.py``)
are each estimator's own ``terms`` (and adaptive IPS's ``behaviour_terms``), bit for bit.

References: the estimators' own methods on a plain :class:`~onlineeval.estimators.LoggedData`
with plain :class:`~onlineeval.estimators.DeterministicTarget` targets and plain rewards, and,
for the whole design, the same replicate run with the fusion switched off (each estimator's
``terms`` called per target, the previous code path). Logs include empty slots (queries with
fewer candidates than slots), repeated lists, rows showing the targets' lists, first-click
rewards and a cap below the weights.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulations.policies import build_policy
from simulations.policies.base import running_and

NEG = -np.inf


def _exactly(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, dtypes and signs of zeros."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b) and \
        np.array_equal(np.signbit(a), np.signbit(b))


def _log(seed: int, k: int, padding: bool, n: int = 2500, m: int = 12, n_queries: int = 30):
    """A logged batch of a mixture of epsilon-greedy loggers, with the two targets (A's and B's
    base top-k lists): ``(data, targets, lists)``."""
    from onlineeval.estimators import DeterministicTarget, LoggedData

    rng = np.random.default_rng(seed)
    scores = {}
    for name in ("A", "B"):
        s = rng.normal(size=(n_queries, m))
        if padding:  # queries with fewer candidates than slots: empty trailing slots
            s[rng.random((n_queries, m)) < 0.5] = NEG
            s[:, 0] = rng.normal(size=n_queries)
        scores[name] = s
    if padding:  # both rankers know the same candidates (a query's lists are equally long)
        scores["B"] = np.where(np.isfinite(scores["A"]), scores["B"], NEG)
    policy = build_policy({"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.4, "n": 5, "scores": "A", "weight": 0.6},
        {"policy": "epsilon_greedy", "epsilon": 0.4, "n": 5, "scores": "B", "weight": 0.4}]}, scores, k)
    q = rng.integers(0, n_queries, size=n)
    shown = policy.sample(q, rng)
    clicks = (rng.random((n, k)) < 0.35) & (shown >= 0)
    p = policy.propensities(q, shown)
    data = LoggedData(q, shown, clicks, p_list=p.list, p_prefix=p.prefix, p_item=p.item,
                      user=rng.integers(0, 200, size=n), user_type=rng.integers(0, 2, size=n), logger=policy)
    lists = [build_policy({"policy": "deterministic"}, scores[key], k).order[:, :k].copy() for key in ("A", "B")]
    return data, [DeterministicTarget(lists[0], "A"), DeterministicTarget(lists[1], "B")], lists


def _estimators():
    from onlineeval.estimators import get_estimator
    from onlineeval.estimators.ips import IPS

    class MyIPS(IPS):  # a subclass may change the arithmetic: not fused
        def _terms(self, data, target, reward):
            t = super()._terms(data, target, reward)
            return type(t)(num=2.0 * t.num, weights=t.weights)

    return [("snips", get_estimator("snips")), ("ips", get_estimator("ips")), ("rips", get_estimator("rips")),
            ("iips", get_estimator("iips")), ("clipped", get_estimator("clipped_ips", cap=1.5)),
            ("clipped_high", get_estimator("clipped_ips", cap=1e6)), ("adaptive", get_estimator("adaptive_ips")),
            ("snrips", get_estimator("snrips")), ("mine", MyIPS())]


@pytest.mark.parametrize("k", [1, 3, 5, 8, 10])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("metric", ["clicks_per_query", "reciprocal_rank", "abandonment"])
def test_fused_terms_are_each_estimators_own_terms(k, padding, metric):
    from onlineeval.estimators import get_reward
    from simulations.designs.counterfactual import _BatchReward, refits_on_whole_log
    from simulations.designs.counterfactual.fused import FusedTerms, stack_propensities, stacked_indicators

    data, targets, lists = _log(10 * k + padding, k, padding)
    assert data.all_valid == (not padding or k == 1)  # k = 1: every query has a candidate
    reward = get_reward(metric, k)
    estimators = _estimators()
    whole = {label: refits_on_whole_log(est) for label, est in estimators}
    fused = FusedTerms.build(estimators, reward, whole, {"adaptive"})
    assert fused is not None
    supported = {label for label, est in estimators if reward.kind in est.rewards}
    want = {"snips", "ips", "rips", "iips", "clipped", "clipped_high"} & supported
    assert set(fused.fused) == want  # not snrips (not fused), not the subclass, not unsupported rewards
    assert fused.behaviour_labels == (["adaptive"] if "adaptive" in supported else [])
    same = [lst[data.query] == data.shown for lst in lists]
    assert any(s.all(axis=1).any() for s in same)  # rows showing a target's list: non-zero weights
    stacks = [stacked_indicators(same, [running_and(s) for s in same]),
              stack_propensities([t.propensities(data.query, data.shown) for t in targets])]
    est_of = dict(estimators)
    for target_p in stacks:
        terms, behaviours = fused.compute(data, target_p, _BatchReward(reward))
        for i, target in enumerate(targets):
            for label, (num, den) in terms.items():
                own = est_of[label].terms(data, target, reward)
                assert _exactly(num[i], own.num), (label, i)
                assert (den is None) == (own.den is None), label
                if den is not None:
                    assert _exactly(den[i], own.den), (label, i)
            for label, by in behaviours.items():
                own = est_of[label].behaviour_terms(data, target, reward)
                assert list(by) == list(own)
                for b in own:
                    assert _exactly(by[b][i], own[b]), (label, b, i)


def test_clipped_ips_cap_clips_in_the_test_logs():
    """The cap of 1.5 above is below many list weights (the fused clipping is exercised)."""
    from onlineeval.estimators import get_reward

    data, targets, _ = _log(3, 5, False)
    w = data.importance_weights(targets[0], "list")
    assert (w > 1.5).sum() > 100 and (w > 1e6).sum() == 0
    assert get_reward("clicks_per_query", 5).kind == "additive"


def _design_config(estimators, logger=None):
    from simulations.config import config_from_mapping

    return config_from_mapping({
        "seed": 5, "replicates": 1, "workers": 1,
        "collection": {"n_queries": 150, "candidates": 10},
        "rankers": {"depth": 5, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.5}},
        "offline_metric": "nDCG@5",
        "users": {"population": 500, "activity": {"sigma": 0.8}, "types": [
            {"name": "pbm", "share": 0.5, "click_model": {"name": "pbm", "preset": "ai2018"}},
            {"name": "cascade", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}}]},
        "traffic": {"days": 3, "queries_per_day": 1500, "batch_hours": 12},
        "designs": [{"name": "cf", "type": "counterfactual", "metric": "clicks_per_query",
                     "logger": logger or {"policy": "mixture", "components": [
                         {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 8, "weight": 0.7},
                         {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 8, "scores": "B", "weight": 0.3}]},
                     "estimators": estimators}],
        "analysis": {"aa": False, "truth_impressions": 1000},
    })


@pytest.mark.parametrize("logger", [None, {"policy": "randtop", "n": 6}])
def test_design_with_fused_terms_equals_the_design_without(logger):
    """One replicate with the fused terms and the same replicate with each estimator's
    ``terms`` per target (the previous path): the same per-user sums, kept rows and
    checkpoint rows, exactly."""
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    cfg = _design_config(["snips", "ips", "rips", "iips", "adaptive_ips", {"name": "clipped_ips", "cap": 5},
                          "dm"], logger)
    world = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    runs = []
    for fuse in (True, False):
        traffic, (design,) = build_replicate(cfg, world, users, replicate_seeds(cfg.seed, 1)[0])
        assert design._fused is not None
        if not fuse:
            design._fused = None
        for hour in range(0, traffic.days * 24, traffic.batch_hours):
            design.process(traffic.batch(hour, traffic.batch_hours))
            if (hour + traffic.batch_hours) % 24 == 0:
                design.checkpoint((hour + traffic.batch_hours) // 24)
        runs.append(design)
    a, b = runs
    assert _exactly(a._acc, b._acc)
    assert a._row_stats.keys() == b._row_stats.keys() and a._row_stats
    for key in a._row_stats:
        for x, y in zip(a._row_stats[key], b._row_stats[key], strict=True):
            assert list(x) == list(y) and all(_exactly(x[c], y[c]) for c in x)
    assert len(a.rows) == len(b.rows) > 0
    for x, y in zip(a.rows, b.rows, strict=True):
        assert x.metric == y.metric
        for field in ("estimate", "se", "ci_low", "ci_high", "pvalue"):
            u, v = getattr(x, field), getattr(y, field)
            assert u == v or (np.isnan(u) and np.isnan(v)), (x.metric, x.day, field)
