"""The counterfactual design's metric: an A/B metric (clicks per query, reciprocal rank of the first click,
abandonment) or ``utility``, the offline metric's metric-user utility (the clicks weighted by the offline metric's
static C/W/L weights, :func:`onlineeval.estimators.rewards.utility_reward`; ``offline_metric: RBP(p=0.8)`` gives
:math:`\\sum_j 0.2 \\cdot 0.8^{j-1} c_j`). :func:`design_reward` is the estimators' reward, :func:`exact_values` the
exact per-query expectation of a ranker's list (the truth), from the click models' exact click probabilities."""

from __future__ import annotations

from typing import Any

import numpy as np

#: the design metric naming the offline metric's metric-user utility
UTILITY = "utility"


def reward_name(metric: str, offline_metric: str) -> str:
    """The reward's name: ``utility:<offline metric>`` for ``utility``, else the metric itself."""
    return f"utility:{offline_metric}" if metric == UTILITY else metric


def design_reward(metric: str, offline_metric: str, depth: int) -> Any:
    """The :class:`~onlineeval.estimators.Reward` the design's estimators estimate, for lists of ``depth``."""
    from onlineeval.estimators import get_reward

    return get_reward(reward_name(metric, offline_metric), depth)


def exact_values(world: Any, users: Any, ranker: str, metric: str,
                 ab_metrics: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """``(Q,)`` exact expectation of ``metric`` per query when ``ranker``'s list is shown (user types by share):
    the A/B metrics of :func:`simulations.runner.exact_ab_metrics` (``ab_metrics``, when the caller has them
    already); ``utility``: the click probabilities of the shown slots times the reward's weights."""
    from simulations.runner import exact_ab_metrics

    if metric != UTILITY:
        return (ab_metrics if ab_metrics is not None else exact_ab_metrics(world, users, ranker))[metric]
    shown = world.ranked_labels(ranker)
    reward = design_reward(metric, world.offline.metric, shown.shape[1])
    return np.asarray(users.click_probabilities(shown)) @ reward.position_weights(shown.shape[1])
