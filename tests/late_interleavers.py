"""Per-impression interleavers that are wrong only past slot 8 or in round 1 (review 14, F1 and F3), and correct
ones told the page length: test plugins for tests/test_validate_long_pages.py.

Rewritten from the review's candidates (broken14.py) on tests/broken_interleavers.py's textbook implementations.
"""

from __future__ import annotations

import numpy as np

from broken_interleavers import TeamDraft, TeamDraftMultileave


class LateAOnly(TeamDraft):
    """From slot 9 on (a 10-slot page) only A picks: A takes every click on slots 9-10."""

    def _a_turn(self, na: int, nb: int, rng: np.random.Generator) -> bool:
        return True if na + nb >= 8 else super()._a_turn(na, nb, rng)


class LateCoin(TeamDraft):
    """Correct for rounds 1-4 (slots 1-8); from round 5 (slots 9-10) A picks first with probability 0.7."""

    def _a_turn(self, na: int, nb: int, rng: np.random.Generator) -> bool:
        if na != nb:
            return na < nb
        return bool(rng.random() < (0.5 if na < 4 else 0.7))


class FirstCoin52(TeamDraft):
    """Only round 1's coin is biased: A takes slot 1 with probability 0.52 (later rounds fair)."""

    def _a_turn(self, na: int, nb: int, rng: np.random.Generator) -> bool:
        if na != nb:
            return na < nb
        return bool(rng.random() < (0.52 if na == 0 else 0.5))


class TDMLate(TeamDraftMultileave):
    """Correct in rounds 1-2; from round 3 on ranker 0 always picks first (the others in random order)."""

    def interleave(self, lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        self._round = 0
        return super().interleave(lists, rng)

    def _order(self, m: int, rng: np.random.Generator) -> list[int]:
        self._round += 1
        o = [int(i) for i in rng.permutation(m)]
        if self._round >= 3:
            o.remove(0)
            o.insert(0, 0)
        return o


class _Paged:
    """Told the page length (``interleave(lists, rng, length=k)``): the class's own draw, cut to ``length`` slots."""

    def interleave(self, lists: list[list[int]], rng: np.random.Generator,
                   length: int | None = None) -> tuple[list[int], list[int]]:
        shown, teams = super().interleave(lists, rng)  # type: ignore[misc]
        k = len(shown) if length is None else length
        return shown[:k], teams[:k]


class PagedTeamDraft(_Paged, TeamDraft):
    """Textbook team-draft that is told the page length."""


class PagedLateAOnly(_Paged, LateAOnly):
    """LateAOnly told the page length: it fills exactly ``length`` slots, A taking slots 9-10."""


class IgnoresLength(TeamDraft):
    """Declares ``length`` but returns its whole draw: a page longer than it was told (structure must fail)."""

    def interleave(self, lists: list[list[int]], rng: np.random.Generator,
                   length: int | None = None) -> tuple[list[int], list[int]]:
        return super().interleave(lists, rng)
