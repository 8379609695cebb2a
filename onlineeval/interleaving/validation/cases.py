"""The validation battery's cases: the rankers' lists each check runs on (short lists shown whole, long lists on a
:data:`PAGE_LENGTH`-slot page, multileaving's three and four rankers), what they cover (:func:`coverage`, the
report's ``size`` line) and the report's conventions (:func:`conventions`). Moved from
:mod:`~onlineeval.interleaving.validation.battery`, which imports (and re-exports) these names."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from onlineeval.interleaving.validation.candidates import CREDIT, EXPECTED, SIGN
from onlineeval.interleaving.validation.methods import MethodSpec

Lists = tuple[tuple[int, ...], ...]

#: input pairs for the structure and equivalence checks (duplicates, shared prefix, disjoint, unequal lengths)
EQUIVALENCE_SCENARIOS: tuple[Lists, ...] = (
    ((1, 2, 3, 4, 5, 6), (2, 1, 4, 3, 6, 5)),
    ((1, 2, 3, 4, 5, 6), (6, 5, 4, 3, 2, 1)),
    ((1, 2, 3, 4, 5, 6), (7, 1, 8, 2, 9, 3)),
    ((1, 2, 3, 4, 5, 6), (1, 2, 6, 5, 4, 3)),
    ((1, 2, 3, 4, 5, 6), (7, 8, 9, 10, 11, 12)),
    ((1, 2, 3, 4), (2, 3, 4, 5, 6, 7)),
    ((1, 2, 3, 4, 5), (1, 2, 3, 5, 4)),       # long shared prefix: many exact ties
)
#: equal-length pairs for the fidelity checks
FIDELITY_SCENARIOS: tuple[Lists, ...] = (
    ((1, 2, 3, 4, 5, 6), (6, 5, 4, 3, 2, 1)),
    ((1, 2, 3, 4, 5, 6), (2, 3, 4, 5, 6, 7)),
    ((1, 2, 3, 4, 5, 6), (7, 1, 8, 2, 9, 3)),
)
#: (lists, relevant documents): each later list lifts the relevant documents higher
BETTER_SCENARIOS: tuple[tuple[Lists, frozenset[int]], ...] = (
    (((1, 2, 3, 4, 5, 6, 7, 8), (5, 7, 1, 2, 3, 4, 6, 8)), frozenset({5, 7})),
    (((1, 2, 3, 4, 5, 6), (3, 1, 2, 4, 5, 6)), frozenset({3})),
)

#: multileaving: three and four rankers (shared prefixes, unequal lengths, disjoint lists)
ML_EQUIVALENCE_SCENARIOS: tuple[Lists, ...] = (
    ((1, 2, 3, 4, 5, 6), (2, 1, 4, 3, 6, 5), (6, 5, 4, 3, 2, 1)),
    ((1, 2, 3, 4, 5, 6), (7, 1, 8, 2, 9, 3), (1, 2, 6, 5, 4, 3)),
    ((1, 2, 3, 4), (2, 3, 4, 5, 6, 7), (8, 9, 10, 11)),
    ((1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 6, 5), (1, 2, 5, 3, 4, 6), (6, 5, 4, 3, 2, 1)),
)
ML_FIDELITY_SCENARIOS: tuple[Lists, ...] = (
    ((1, 2, 3, 4, 5, 6), (6, 5, 4, 3, 2, 1), (2, 3, 4, 5, 6, 7)),
    ((1, 2, 3, 4, 5, 6), (7, 1, 8, 2, 9, 3), (3, 6, 9, 1, 4, 7), (5, 4, 6, 3, 7, 2)),
)
ML_BETTER_SCENARIOS: tuple[tuple[Lists, frozenset[int]], ...] = (
    (((1, 2, 3, 4, 5, 6, 7, 8), (5, 1, 2, 3, 4, 6, 7, 8), (5, 7, 1, 2, 3, 4, 6, 8)), frozenset({5, 7})),
)

#: page length of the long-list scenarios: the usual 10-result page, shorter than their lists
PAGE_LENGTH = 10
_SWAPPED = tuple(d + 1 if d % 2 else d - 1 for d in range(1, 21))      # 2, 1, 4, 3, ..., 20, 19
#: rankings longer than the page (12-20 documents), shown on :data:`PAGE_LENGTH` slots: team-draft's round 5 and
#: its 2^5 pick orders (exact), balanced's slots 9-10; added to the equivalence and fidelity scenarios of
#: team-draft and balanced (probabilistic: :data:`PROB_LONG_SCENARIOS`; optimized: none, its draw is not the
#: first slots of a longer one and its linear programme on such lists is not solved here)
LONG_SCENARIOS: tuple[Lists, ...] = (
    (tuple(range(1, 21)), _SWAPPED),                                                 # 20 each, pairs swapped
    (tuple(range(1, 13)), tuple(range(13, 25))),                                     # 12 each, disjoint
    (tuple(range(1, 13)), tuple(range(12, 0, -1))),                                  # 12 each, reversed
)
#: multileaving on a 10-slot page: three rankers (four rounds, the last of one slot) and four (three rounds)
ML_LONG_SCENARIOS: tuple[Lists, ...] = (
    (tuple(range(1, 16)), tuple(range(15, 0, -1)), _SWAPPED[:15]),
    (tuple(range(1, 13)), tuple(range(12, 0, -1)), tuple(range(13, 25)),
     tuple(x for pair in zip(range(1, 7), range(13, 19)) for x in pair)),
)


#: probabilistic methods: lists of 12 documents (one pool of 12, so the exact programme of :mod:`.exact` runs over
#: 2^12 sets of shown documents) on the 10-slot page
PROB_LONG_SCENARIOS: tuple[Lists, ...] = (
    (tuple(range(1, 13)), _SWAPPED[:12]),
    (tuple(range(1, 13)), tuple(range(12, 0, -1))),
    (tuple(range(1, 13)), tuple(range(7, 13)) + tuple(range(1, 7))),
)
ML_PROB_LONG_SCENARIOS: tuple[Lists, ...] = (
    (tuple(range(1, 13)), tuple(range(12, 0, -1)), _SWAPPED[:12]),
    (tuple(range(1, 13)), tuple(range(12, 0, -1)), tuple(range(7, 13)) + tuple(range(1, 7)), _SWAPPED[:12]),
)


def page_length(lists: Lists) -> int | None:
    """The page of a scenario: :data:`PAGE_LENGTH` slots when a list is longer, else ``None`` (the longest list)."""
    return PAGE_LENGTH if max(len(x) for x in lists) > PAGE_LENGTH else None


def _long_scenarios(spec: MethodSpec) -> tuple[Lists, ...]:
    if spec.name == "optimized":
        return ()
    if spec.name.startswith("probabilistic"):
        return ML_PROB_LONG_SCENARIOS if spec.multileave else PROB_LONG_SCENARIOS
    return ML_LONG_SCENARIOS if spec.multileave else LONG_SCENARIOS



def _span(values: Sequence[int]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def coverage(spec: MethodSpec, told: bool | None = None) -> str:
    """What the battery's cases cover, computed from its scenario tuples: list lengths, pages, rankers, coins."""
    if spec.multileave:
        base = ML_EQUIVALENCE_SCENARIOS + ML_FIDELITY_SCENARIOS + tuple(sc for sc, _ in ML_BETTER_SCENARIOS)
    else:
        base = EQUIVALENCE_SCENARIOS + FIDELITY_SCENARIOS + tuple(sc for sc, _ in BETTER_SCENARIOS)
    long = _long_scenarios(spec)
    short_pages = [min(max(len(x) for x in sc), len(set().union(*sc))) for sc in base]
    cut = told is not None and spec.name != "optimized"  # a per-impression candidate's longer draw is cut to the page
    parts = [f"lists of {_span([len(x) for sc in base for x in sc])} documents shown whole "
             f"(pages of {_span(short_pages)} slots" + ("; a longer draw is cut to its first page slots" if cut
                                                        else "") + ")"]
    if long:
        parts.append(f"lists of {_span([len(x) for sc in long for x in sc])} documents on a {PAGE_LENGTH}-slot page")
    else:
        parts.append(f"no page shorter than the lists ({spec.name}'s draw depends on the page length; slots beyond "
                     f"{max(short_pages)} not examined)")
    rankers = sorted({len(sc) for sc in base + long})
    parts.append(" and ".join(str(m) for m in rankers) + " rankers")
    if spec.prefix_balanced:
        top = max(PAGE_LENGTH if long else 0, *short_pages)
        rounds = ", ".join(f"{-(-top // m)} with {m}" for m in rankers)
        coins = "" if spec.multileave else "; coin_no_preference isolates the round-1 and round-2 coins"
        parts.append(f"team-draft rounds drawn: up to {rounds} rankers (every round's pick order in the distribution "
                     "checks)" + coins)
    if long:
        if told is None:
            parts.append(f"the batch interleave() is called with length={PAGE_LENGTH} on the long lists")
        elif told:
            parts.append(f"interleave() declares length: it is called with length={PAGE_LENGTH} on the long lists")
        else:
            parts.append(f"interleave() takes no length: its whole draw on the long lists is cut to its first "
                         f"{PAGE_LENGTH} slots")
    return "; ".join(parts)


def conventions(spec: MethodSpec, *, n: int, click_prob: float, seed: int,
                options: dict[str, Any], timeout: float | None = None,
                told: bool | None = None) -> tuple[tuple[str, str], ...]:
    """The report's conventions: what every number means.

    ``told``: the candidate's interleave() takes a ``length`` (``None``: a batch candidate).
    """
    if spec.multileave:
        outcome = ("pref[j][i] > 0: ranker j (lists[j]) beats ranker i; every pair j > i is tested, "
                   "p-values Bonferroni-combined over pairs")
    else:
        outcome = "> 0: B = lists[1] preferred, < 0: A = lists[0], 0: tie"
    scale = {SIGN: "win/loss/tie (the sign credit() returns)",
             EXPECTED: "expected outcome P(B wins) - P(A wins) over the hidden assignments, in [-1, 1] "
                       "(credit() returns it; its sign is the outcome)",
             CREDIT: "credit difference credit_B - credit_A (credit() returns the credits)"}[spec.scale]
    out = [
        ("outcome", outcome),
        ("scale", f"{spec.name}: {scale}"),
        ("random clicks", f"each shown slot clicked independently with probability {click_prob:g}, blind to "
                          "the documents" + ("; the zero-mean check adds 0.9 / rank" if spec.zero_mean_check
                                             else "")),
        ("fidelity scale", _fidelity_text(spec)),
        ("size", (f"{n} impressions per statistical check, split over the scenarios; seed {seed}; "
                 f"reference options {options or 'default'}; cases: {coverage(spec, told)}")),
        ("statistics", ("the statistic column names each value: a test's p-value (Bonferroni-combined over "
                        "the positions, pairs, scenarios and click models it lists) fails when below the level; "
                        "better_ranker_wins must reject (fails unless its largest p is below the level); exact "
                        "checks print violations/total and fail on any violation")),
        ("documented", "DOCUMENTED rows measure a known property of the method and never fail the run"),
        ("candidate calls", ("an exception, sys.exit / os._exit, malformed output (non-integer document ids or "
                             "team labels, non-real or non-finite credit)"
                             + (f" or a call taking longer than {timeout:g} s" if timeout else " (calls not timed)")
                             + " fails the run (candidate_exception / candidate_exit / candidate_output / "
                               "candidate_timeout, exit code 1)")),
    ]
    return tuple(out)


def _fidelity_text(spec: MethodSpec) -> str:
    if spec.scale == SIGN and spec.sign_bias is None:
        return "the win/loss sign is unbiased under random clicks: random_clicks_no_preference is a sign test"
    if spec.zero_mean_check:
        return (f"the guarantee is on the {spec.scale} scale: {spec.zero_mean_check} tests its mean is zero; "
                "the sign test (random_clicks_no_preference) is reported as DOCUMENTED: " + str(spec.sign_bias))
    return f"no unbiased scale: random_clicks_no_preference is DOCUMENTED ({spec.sign_bias})"
