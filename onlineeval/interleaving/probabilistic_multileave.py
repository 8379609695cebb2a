"""Probabilistic multileaving (Schuth et al. 2015) under its own registry name.

The same method as :class:`~onlineeval.interleaving.probabilistic.Probabilistic`,
which accepts any number of rankers: each slot is drawn by a uniformly chosen ranker
from its softmax over ranks (``tau = 3`` by default, configurable, not hard-coded),
credit per ranker is the expected number of clicks assigned to it given the shown
list, and pairwise preferences are marginalised exactly over the assignments.

The per-impression preference matrix of Schuth et al. is
:meth:`~onlineeval.interleaving.probabilistic.Probabilistic.expected_preferences`,
``E[sign(X_i - X_j) | L, c]`` in [-1, 1]; average it over impressions (for instance
with :func:`~onlineeval.interleaving.analysis.preference_matrix`). ``preferences()``
returns its sign (win / loss / tie, the int8 contract of every method); averaging those
signs is a different estimator, which with three or more rankers can reverse a pairwise
preference. Both behaviours, and the fact that adding rankers (even a clone) can change a
pairwise preference of the method itself, are worked out with exact numbers in
:mod:`onlineeval.interleaving.probabilistic` and pinned in
tests/test_interleaving_multileave_fidelity.py.

References
----------
A. Schuth et al. Probabilistic multileave for online retrieval evaluation. SIGIR 2015.
"""

from __future__ import annotations

from onlineeval.interleaving.probabilistic import Probabilistic
from onlineeval.interleaving.registry import register_interleaver

__all__ = ["ProbabilisticMultileave"]


@register_interleaver
class ProbabilisticMultileave(Probabilistic):
    """Probabilistic multileaving; options as :class:`Probabilistic` (``tau`` = 3, ``tie_tolerance`` = 1e-9,
    ``prefix_credit`` = True)."""

    name = "probabilistic_multileave"
