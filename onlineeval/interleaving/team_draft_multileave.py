"""Team-draft multileaving (Schuth et al. 2014) under its own registry name.

The same draw as :class:`~onlineeval.interleaving.team_draft.TeamDraft`, which already
accepts any number of rankers: every round the rankers pick in a uniformly random
order, each taking its highest-ranked unused document; a click credits the slot's team
and the pairwise preference of rankers ``i`` and ``j`` on an impression is
``sign(c_i - c_j)``. Registered separately so a config can say what it means; it
requires at least two rankers, like ``team_draft``.

References
----------
A. Schuth, F. Sietsma, S. Whiteson, D. Lefortier, M. de Rijke. Multileaved
comparisons for fast online evaluation. CIKM 2014.
"""

from __future__ import annotations

from onlineeval.interleaving.registry import register_interleaver
from onlineeval.interleaving.team_draft import TeamDraft

__all__ = ["TeamDraftMultileave"]


@register_interleaver
class TeamDraftMultileave(TeamDraft):
    """Team-draft multileaving; options as :class:`TeamDraft` (``prefix_credit``, default ``True``)."""

    name = "team_draft_multileave"
