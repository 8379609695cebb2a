"""Probabilistic multileaving (Schuth et al. 2015) under its own registry name.

The same method as :class:`~onlineeval.interleaving.probabilistic.Probabilistic`,
which accepts any number of rankers: each slot is drawn by a uniformly chosen ranker
from its softmax over ranks (``tau = 3`` by default, configurable, not hard-coded),
credit per ranker is the expected number of clicks assigned to it given the shown
list, and pairwise preferences are marginalised exactly over the assignments.

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
    """Probabilistic multileaving; options as :class:`Probabilistic` (``tau`` = 3, ``tie_tolerance`` = 1e-9)."""

    name = "probabilistic_multileave"
