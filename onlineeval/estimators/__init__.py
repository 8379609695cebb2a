"""Off-policy (counterfactual) estimators of a ranker's online value from logged clicks.

One file per estimator, one registry (like :mod:`onlineeval.interleaving`)::

    from onlineeval.estimators import LoggedData, DeterministicTarget, get_estimator
    log = LoggedData(query, shown, clicks, p_list=..., p_prefix=..., p_item=...)
    est = get_estimator("rips").estimate(log, DeterministicTarget(lists_b, "B"), "reciprocal_rank")

See :mod:`onlineeval.estimators.base` for the contract (rewards, propensities, targets,
diagnostics) and :mod:`onlineeval.estimators.checks` for the conformance suite that runs
on every registered estimator. :func:`catalogue` lists each estimator's assumption.
"""

from __future__ import annotations

# importing the estimator modules registers them
from onlineeval.estimators import adaptive_ips as _adaptive_ips  # noqa: F401
from onlineeval.estimators import cascade_dr as _cascade_dr  # noqa: F401
from onlineeval.estimators import clipped_ips as _clipped_ips  # noqa: F401
from onlineeval.estimators import dm as _dm  # noqa: F401
from onlineeval.estimators import dr as _dr  # noqa: F401
from onlineeval.estimators import iips as _iips  # noqa: F401
from onlineeval.estimators import ips as _ips  # noqa: F401
from onlineeval.estimators import pbm_ips as _pbm_ips  # noqa: F401
from onlineeval.estimators import pseudoinverse as _pseudoinverse  # noqa: F401
from onlineeval.estimators import rips as _rips  # noqa: F401
from onlineeval.estimators import snips as _snips  # noqa: F401
from onlineeval.estimators.base import (
    REWARDS,
    DeterministicTarget,
    Diagnostics,
    Estimator,
    LoggedData,
    OffPolicyEstimate,
    Propensities,
    PropensityModel,
    Reward,
    Target,
    Terms,
    available_estimators,
    estimator_class,
    first_click,
    get_estimator,
    get_reward,
    register_estimator,
)
from onlineeval.estimators.position_bias import (
    PipelineInterval,
    PositionBiasEstimate,
    estimate_em,
    estimate_examination,
    estimate_harvest,
    estimate_randtop,
    estimate_swap,
    pipeline_bootstrap,
)

__all__ = [
    "REWARDS",
    "DeterministicTarget",
    "Diagnostics",
    "Estimator",
    "LoggedData",
    "OffPolicyEstimate",
    "PipelineInterval",
    "PositionBiasEstimate",
    "Propensities",
    "PropensityModel",
    "Reward",
    "Target",
    "Terms",
    "available_estimators",
    "catalogue",
    "estimate_em",
    "estimate_examination",
    "estimate_harvest",
    "estimate_randtop",
    "estimate_swap",
    "estimator_class",
    "first_click",
    "get_estimator",
    "get_reward",
    "pipeline_bootstrap",
    "register_estimator",
]


def catalogue() -> dict[str, dict[str, object]]:
    """Every registered estimator's assumption, needed propensities and supported rewards."""
    out: dict[str, dict[str, object]] = {}
    for name in available_estimators():
        cls = estimator_class(name)
        out[name] = {
            "assumption": cls.assumption,
            "needs": list(cls.needs),
            "rewards": list(cls.rewards),
            "self_normalised": cls.self_normalised,
        }
    return out
