"""The ground truth's precision: its Monte Carlo error and its spread over drawn worlds.

:func:`truth_precision` (is the truth's Monte Carlo SE small enough next to the effect, and how many impressions
would make it so), :func:`exact_truth_per_query` (the exact per-query values of the metrics with a closed form) and
:func:`truth_world_se` (the true effect's SE over worlds drawn from the config). Re-exported by
:mod:`simulations.analysis`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulations.config import Config
from simulations.runner import Truth
from simulations.world import World, world_sampling


#: summary.json ``true_effect_world_note`` of a Monte Carlo (interleaving) truth: why it has no SE over worlds
MONTE_CARLO_WORLD_NOTE = (
    "no SE over worlds: this truth is a Monte Carlo over impressions, not an exact per-query value, so the "
    "per-query spread the exact truths' SE comes from is not available; it rests on the same drawn world as the "
    "A/B truths (a sweep over seed shows its spread across worlds)")


#: a Monte Carlo truth is precise enough when TRUTH_MC_SE x its SE is at most TRUTH_MC_SHARE of |effect| (review 4, F3)
TRUTH_MC_SE = 4.0


TRUTH_MC_SHARE = 0.10


def _round_up(x: float, digits: int = 2) -> int:
    """``x`` rounded up to ``digits`` significant figures (1,646,311 -> 1,700,000)."""
    if x <= 0 or not math.isfinite(x):
        return int(x) if math.isfinite(x) else 0
    step = 10 ** max(int(math.floor(math.log10(x))) - digits + 1, 0)
    return int(math.ceil(x / step) * step)


def truth_precision(effect: float, se: float, impressions: int) -> dict[str, Any] | None:
    """Whether a Monte Carlo truth's SE is small against its effect (review 4, F3): ``four_se_share`` =
    :data:`TRUTH_MC_SE` x se / |effect|, ``adequate`` when it is at most :data:`TRUTH_MC_SHARE`, and otherwise
    ``suggested_truth_impressions``: the number of truth impressions that would bring it there, as the SE scales
    with 1 / sqrt(n): ``n (share / TRUTH_MC_SHARE)^2`` rounded up to 2 significant figures. ``None`` for an exact
    truth (se 0) or a 0 effect."""
    if not se or not effect or not math.isfinite(se) or not math.isfinite(effect):
        return None
    share = TRUTH_MC_SE * se / abs(effect)
    adequate = share <= TRUTH_MC_SHARE
    return {"key": "analysis.truth_impressions", "truth_impressions": int(impressions), "four_se_share": share,
            "adequate": adequate,
            "suggested_truth_impressions": None if adequate else _round_up(impressions * (share / TRUTH_MC_SHARE) ** 2)}


def exact_truth_per_query(config: Config, world: World, users: Any = None) -> dict[tuple[str, str], np.ndarray]:
    """Per-query B - A values whose query-frequency-weighted mean is an exact truth of
    :func:`simulations.runner.compute_truth` (review 4, F1): an A/B design's metrics (``test: welch``: the per-user
    means' per-query expectation, user types by share, as :func:`~simulations.runner.per_user_mean_metrics`) and a
    counterfactual design's estimator rows (its metric, targets' difference) and an exact interleaving truth's
    ratio, linearised (:func:`simulations.truth_interleaving_exact.exact_interleaving_per_query`). Monte Carlo
    interleaving truths: not here."""
    from simulations.runner import exact_ab_metrics_of
    from simulations.users import UserModels

    users = users if users is not None else UserModels.from_config(config.users)
    pooled: dict[str, dict[str, np.ndarray]] = {}
    by_type: dict[str, dict[str, np.ndarray]] = {}
    weights = None  # the utility metric's rank weights, where an A/B design has metric: utility
    if any(d.type == "ab" and d.metric == "utility" for d in config.designs):
        from simulations.designs.ab import utility_weights

        weights = utility_weights(world, world.ranked_labels("A").shape[1])

    def pool(ranker: str) -> dict[str, np.ndarray]:
        if ranker not in pooled:
            pooled[ranker] = exact_ab_metrics_of(users, world.ranked_labels(ranker), weights)
        return pooled[ranker]

    def per_user(ranker: str) -> dict[str, np.ndarray]:
        if ranker not in by_type:
            shown = world.ranked_labels(ranker)
            acc: dict[str, np.ndarray] = {}
            for share, name, model in zip(users.shares, users.names, users.models, strict=True):
                for metric, v in exact_ab_metrics_of(UserModels([name], [1.0], [model]), shown, weights).items():
                    acc[metric] = acc.get(metric, 0.0) + float(share) * v
            by_type[ranker] = acc
        return by_type[ranker]

    out: dict[tuple[str, str], np.ndarray] = {}
    for design in config.designs:
        if design.type == "ab":
            get = per_user if design.test == "welch" else pool
            for metric, vb in get("B").items():
                out[(design.name, metric)] = vb - get("A")[metric]
        elif design.type == "counterfactual":
            from simulations.designs.counterfactual.metric import exact_values

            base, cand = design.targets
            d = (exact_values(world, users, cand, design.metric, pool(cand))
                 - exact_values(world, users, base, design.metric, pool(base)))
            for spec in design.estimators:
                out[(design.name, spec.label)] = d
        elif design.type == "interleaving":
            from simulations.designs.interleaving import pair_metrics
            from simulations.truth_interleaving_exact import exact_interleaving_per_query

            values = exact_interleaving_per_query(config, design, world, users)
            if values is not None:  # an exact interleaving truth: the ratio's linearisation per query
                ((metric, _, _),) = pair_metrics(design.rankers)
                out[(design.name, metric)] = values
    return out


def truth_world_se(config: Config, world: World, truths: list[Truth], users: Any = None) -> dict[tuple[str, str],
                                                                                                  float]:
    """The SE over independently drawn worlds of every exact truth (review 4, F1): :func:`world_sampling` of its
    per-query values (:func:`exact_truth_per_query`), as the Offline line's frequency-weighted delta. Only truths
    that are exact (Monte Carlo SE 0) and equal their per-query values' weighted mean (to 1e-9) get one; NaN when one
    query carries every weight."""
    truth = {(t.design, t.metric): t for t in truths}
    out: dict[tuple[str, str], float] = {}
    for key, d in exact_truth_per_query(config, world, users).items():
        t = truth.get(key)
        if t is None or t.se != 0.0:
            continue
        if not math.isclose(float(world.frequency @ d), t.value, rel_tol=1e-9, abs_tol=1e-12):
            continue  # not the per-query form of this truth: no SE rather than a wrong one
        out[key] = world_sampling(world.frequency, d)[1]
    return out
