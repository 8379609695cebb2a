"""Interleaving and multileaving: compare rankers from the clicks on one mixed list.

One file per method, one registry::

    from onlineeval.interleaving import get_interleaver
    il = get_interleaver("team_draft")
    res = il.interleave([ranking_a, ranking_b], rng)   # (n, k) matrices, -1 = empty
    out = il.outcome(res, clicks)                      # +1 B wins, -1 A wins, 0 tie

See :mod:`onlineeval.interleaving.base` for the array conventions,
:mod:`~onlineeval.interleaving.analysis` for Delta_AB and its clustered tests,
:mod:`~onlineeval.interleaving.validation` for the validation harness and
:mod:`~onlineeval.interleaving.checks` for the conformance suite.

Registered methods: ``balanced``, ``team_draft`` (also multileaving),
``team_draft_multileave``, ``probabilistic`` (also multileaving),
``probabilistic_multileave`` and ``optimized``.
"""

from __future__ import annotations

# importing the method modules registers them
from onlineeval.interleaving import balanced as _balanced  # noqa: F401
from onlineeval.interleaving import optimized as _optimized  # noqa: F401
from onlineeval.interleaving import probabilistic as _probabilistic  # noqa: F401
from onlineeval.interleaving import (
    probabilistic_multileave as _probabilistic_multileave,  # noqa: F401
)
from onlineeval.interleaving import team_draft as _team_draft  # noqa: F401
from onlineeval.interleaving import team_draft_multileave as _team_draft_multileave  # noqa: F401
from onlineeval.interleaving.analysis import (
    DeltaEstimate,
    PreferenceMatrix,
    delta_ab,
    delta_ab_test,
    preference_matrix,
    sign_test,
)
from onlineeval.interleaving.base import (
    Interleaver,
    InterleavingResult,
    SingleInterleaving,
    rankings_from_scores,
    stack_rankings,
)
from onlineeval.interleaving.registry import (
    available_interleavers,
    get_interleaver,
    interleaver_class,
    register_interleaver,
)

__all__ = [
    "DeltaEstimate",
    "Interleaver",
    "InterleavingResult",
    "PreferenceMatrix",
    "SingleInterleaving",
    "available_interleavers",
    "delta_ab",
    "delta_ab_test",
    "get_interleaver",
    "interleaver_class",
    "preference_matrix",
    "rankings_from_scores",
    "register_interleaver",
    "sign_test",
    "stack_rankings",
]
