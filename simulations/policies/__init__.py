"""Randomised logging policies with exact propensities (one module per policy, one registry).

Build one with :func:`build_policy` from a spec such as ``{"policy": "epsilon_greedy",
"epsilon": 0.1, "n": 10}``, a ``(Q, m)`` score matrix (``-inf`` = not a candidate) and the
number of slots ``k``. The policies: ``deterministic``, ``plackett_luce``,
``epsilon_greedy``, ``randtop``, ``swap``, ``randpair``, ``mixture`` (see each module).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from onlineeval.errors import ConfigError
from simulations.policies.base import (
    POLICIES,
    LoggingPolicy,
    MarginalTable,
    RankPolicy,
    available_policies,
    policy_class,
    register_policy,
)
from simulations.policies.deterministic import DeterministicPolicy
from simulations.policies.epsilon_greedy import EpsilonGreedyPolicy
from simulations.policies.mc_error import MarginalErrorEffect, marginal_error_effect
from simulations.policies.mixture import MixturePolicy
from simulations.policies.plackett_luce import PlackettLucePolicy
from simulations.policies.randpair import RandPairPolicy
from simulations.policies.randtop import RandTopPolicy
from simulations.policies.swap import SwapPolicy

__all__ = [
    "POLICIES",
    "DeterministicPolicy",
    "EpsilonGreedyPolicy",
    "LoggingPolicy",
    "MarginalErrorEffect",
    "MarginalTable",
    "MixturePolicy",
    "PlackettLucePolicy",
    "RandPairPolicy",
    "RandTopPolicy",
    "RankPolicy",
    "SwapPolicy",
    "available_policies",
    "build_policy",
    "marginal_error_effect",
    "policy_class",
    "register_policy",
]


def build_policy(spec: Mapping[str, Any] | str, scores: Any, k: int,
                 path: Sequence[str | int] = ()) -> LoggingPolicy:
    """The one entry point: build the logging policy ``spec`` over ``scores`` with ``k`` slots.

    Parameters
    ----------
    spec:
        ``{"policy": <name>, <options>}`` (or just the name for the defaults).
    scores:
        ``(Q, m)`` float scores, ``-inf`` = not a candidate; or a mapping of named score
        matrices (rankers ``{"A": ..., "B": ...}``) that specs pick with ``"scores": "A"``.
    k:
        Slots shown, ``1 <= k <= m``.
    path:
        Key path of ``spec`` in its configuration, put in front of error key paths.

    Raises
    ------
    ConfigError
        Unknown policy or option, or an option outside its allowed values (key path named).
    InputError
        Bad scores (NaN, +inf, not a matrix).
    """
    if isinstance(spec, str):
        spec = {"policy": spec}
    if not isinstance(spec, Mapping):
        raise ConfigError(tuple(path),
                          f"a policy spec must be a mapping with a 'policy' key, got {type(spec).__name__}")
    cls = policy_class(spec.get("policy"), path)
    for matrix in (scores.values() if isinstance(scores, Mapping) else (scores,)):
        m = np.shape(matrix)[1] if np.ndim(matrix) == 2 else None
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 or (m is not None and k > m):
            raise ConfigError(("k",), f"must be an integer in 1..{m} (the number of candidate columns), got {k!r}")
    try:
        return cls.from_spec(spec, scores, k, tuple(path))  # type: ignore[attr-defined, no-any-return]
    except ConfigError as exc:
        if exc.key_path not in ((), ("k",)) and exc.key_path[: len(path)] != tuple(path):
            raise exc.prefixed(*path) from None
        raise
