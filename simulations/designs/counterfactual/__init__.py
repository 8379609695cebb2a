"""The ``counterfactual`` design (a randomised logging policy serves the traffic; off-policy
estimators read its log), split by job: :mod:`.design` (the design and its estimand),
:mod:`.paired` (the paired difference a checkpoint reports), :mod:`.serving` (what the
batches share: policy, target indicators, rewards, known-list propensities) and
:mod:`.sweep` (the assumption sweep) and :mod:`.bias_check` (each estimator against the exact truth on one large
direct log)."""

from __future__ import annotations

from simulations.designs.counterfactual.design import (
    LOGGING_METRICS,
    CounterfactualDesign,
)
from simulations.designs.counterfactual.paired import PairedEstimate, paired_difference
from simulations.designs.counterfactual.serving import (
    WHOLE_LOG_ESTIMATORS,
    _BatchReward,
    _BatchTarget,
    build_estimators,
    distinct_propensities,
    known_list_propensities,
    refits_on_whole_log,
    shared_policy,
    stack_known,
    support_mask,
)
from simulations.designs.counterfactual.sweep import (
    assumption_sweep,
    direct_log,
    sweep_point,
)

__all__ = [
    "LOGGING_METRICS",
    "WHOLE_LOG_ESTIMATORS",
    "CounterfactualDesign",
    "PairedEstimate",
    "_BatchReward",
    "_BatchTarget",
    "assumption_sweep",
    "build_estimators",
    "direct_log",
    "distinct_propensities",
    "known_list_propensities",
    "paired_difference",
    "refits_on_whole_log",
    "shared_policy",
    "stack_known",
    "support_mask",
    "sweep_point",
]
