"""A per-impression candidate without ``length`` returns its whole interleaving, and the battery keeps its page
(the protocol of :mod:`onlineeval.interleaving.validation.candidates`). On the long lists it did; on the lists
shown whole it did not: a textbook team-draft that interleaves until every document is placed (nine slots for
A = 1..6, B = 7,1,8,2,9,3, whose page is six) failed ``structure`` on 30% of its draws, and with it
``team_distribution``, ``outcome_distribution`` and ``random_clicks_no_preference``, for slots no user sees. Its
first page slots are team-draft's page, so a correct implementation failed validate. Its draw is now cut to the
page there too (every method but optimized, whose draw depends on the page length)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from onlineeval.interleaving.validation import _from_object, validate_interleaver

sys.path.insert(0, str(Path(__file__).parent))
from broken_interleavers import TeamDraft as PagedTextbook  # noqa: E402


class UntilPlaced(PagedTextbook):
    """Textbook team-draft run until every document of either list is placed (no page length)."""

    def _page(self, a: list[int], b: list[int]) -> int:
        return len(set(a) | set(b))


class TailDuplicates(PagedTextbook):
    """Team-draft's page, then a duplicate of its first document beyond the page (no user sees it)."""

    def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
        shown, teams = super().interleave(lists, rng)
        return shown + [shown[0]], teams + [teams[0]]


def test_a_whole_draw_longer_than_the_page_is_checked_on_its_page() -> None:
    long_draw = UntilPlaced().interleave([[1, 2, 3, 4, 5, 6], [7, 1, 8, 2, 9, 3]], np.random.default_rng(0))[0]
    assert len(long_draw) == 9  # its whole draw: every document of the two lists
    for seed in (0, 1):
        rep = validate_interleaver(_from_object("until placed", UntilPlaced()), "team_draft", n=3000, seed=seed)
        rows = {c.name: c for c in rep.checks}
        assert rep.passed, rep.format()
        assert rows["structure"].value == 0
        assert "a longer draw is cut to its first page slots" in dict(rep.conventions)["size"]
    rep = validate_interleaver(_from_object("tail", TailDuplicates()), "team_draft", n=3000, seed=3)
    assert rep.passed, rep.format()


def test_optimized_candidates_are_not_cut() -> None:
    """Optimized interleaving's draw depends on the page length: a longer draw is not its page, and stays a
    structure failure."""

    class Longer:
        def interleave(self, lists, rng):  # type: ignore[no-untyped-def]
            docs = list(dict.fromkeys(d for x in lists for d in x))
            return docs, [0 if d in lists[0] else 1 for d in docs]

        def credit(self, shown, teams, clicks, lists=None):  # type: ignore[no-untyped-def]
            return [0.0, 0.0]

    rep = validate_interleaver(_from_object("longer", Longer()), "optimized", n=300, seed=0)
    rows = {c.name: c for c in rep.checks}
    assert rows["structure"].status == "FAIL" and "expected" in rows["structure"].message
    assert "a longer draw is cut" not in dict(rep.conventions)["size"]
