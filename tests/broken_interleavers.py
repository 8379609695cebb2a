"""Per-impression interleavers written the way teams write them, for the validation harness tests.

Correct ones (``TeamDraft``, ``Balanced``, ``Probabilistic``, ``TeamDraftMultileave``) must pass
``onlineeval validate``; each broken one carries one classic bug and must fail:

* ``BiasedCoinTeamDraft``: the coin favours A (60/40);
* ``NoAlternationTeamDraft``: a fresh coin per slot instead of alternating teams;
* ``TieCreditTeamDraft``: a tie with clicks is credited to B;
* ``OffByOnePrefixTeamDraft``: the credit loop starts at slot 1, ignoring the top slot;
* ``FloatTieProbabilistic``: brute-force marginalisation without a tie tolerance, so
  exact ties become wins or losses through rounding;
* ``SlightlyBiasedProbabilistic`` (batch API): the per-slot ranker coin picks B with
  probability 0.51, a 1% bias in the expected outcome under random clicks;
* ``FixedOrderTeamDraftMultileave``: team-draft multileaving whose rankers always pick in
  the order 0, 1, 2 in every round (``TeamDraftMultileave`` is the correct one);
* ``UniformOptimized``: optimized interleaving's allowed lists drawn uniformly instead of
  from the LP solution, so random clicks favour one ranker on the credit scale.

They follow the protocol of :mod:`onlineeval.interleaving.validation`.
"""

from __future__ import annotations

import itertools

import numpy as np

from onlineeval.interleaving.probabilistic import Probabilistic as Probabilistic_


class TeamDraft:
    """Textbook team-draft interleaving (Radlinski et al. 2008)."""

    p_a_first = 0.5

    def interleave(self, lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        a, b = lists
        k = self._page(a, b)
        shown: list[int] = []
        teams: list[int] = []
        na = nb = 0
        while len(shown) < k:
            rest_a = [d for d in a if d not in shown]
            rest_b = [d for d in b if d not in shown]
            if not rest_a and not rest_b:
                break
            a_turn = self._a_turn(na, nb, rng)
            if rest_a and (not rest_b or a_turn):
                shown.append(rest_a[0])
                teams.append(0)
                na += 1
            else:
                shown.append(rest_b[0])
                teams.append(1)
                nb += 1
        return shown, teams

    def _a_turn(self, na: int, nb: int, rng: np.random.Generator) -> bool:
        return na < nb or (na == nb and rng.random() < self.p_a_first)

    def _page(self, a: list[int], b: list[int]) -> int:
        """The slots it fills: the longest list's length."""
        return max(len(a), len(b))

    def credit(self, shown: list[int], teams: list[int], clicks: list[bool]) -> int:
        ca = sum(1 for t, c in zip(teams, clicks) if c and t == 0)
        cb = sum(1 for t, c in zip(teams, clicks) if c and t == 1)
        return (cb > ca) - (cb < ca)


class BiasedCoinTeamDraft(TeamDraft):
    p_a_first = 0.6


class NoAlternationTeamDraft(TeamDraft):
    def _a_turn(self, na: int, nb: int, rng: np.random.Generator) -> bool:
        return bool(rng.random() < 0.5)


class TieCreditTeamDraft(TeamDraft):
    def credit(self, shown: list[int], teams: list[int], clicks: list[bool]) -> int:
        ca = sum(1 for t, c in zip(teams, clicks) if c and t == 0)
        cb = sum(1 for t, c in zip(teams, clicks) if c and t == 1)
        if cb >= ca and cb > 0:
            return 1
        return -1 if ca > cb else 0


class OffByOnePrefixTeamDraft(TeamDraft):
    def credit(self, shown: list[int], teams: list[int], clicks: list[bool]) -> int:
        ca = cb = 0
        for i in range(1, len(shown)):
            if clicks[i]:
                if teams[i] == 0:
                    ca += 1
                else:
                    cb += 1
        return (cb > ca) - (cb < ca)


class Balanced:
    """Balanced interleaving (Joachims 2003), continuing with the longer list."""

    def interleave(self, lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        a, b = lists
        k = max(len(a), len(b))
        a_first = rng.random() < 0.5
        first, second = (a, b) if a_first else (b, a)
        t1, t2 = (0, 1) if a_first else (1, 0)
        shown: list[int] = []
        teams: list[int] = []
        for i in range(max(len(a), len(b))):
            for lst, t in ((first, t1), (second, t2)):
                if i < len(lst) and lst[i] not in shown and len(shown) < k:
                    shown.append(lst[i])
                    teams.append(t)
        return shown, teams

    def credit(self, shown: list[int], teams: list[int], clicks: list[bool], lists: list[list[int]]) -> int:
        a, b = lists
        clicked = [d for d, c in zip(shown, clicks) if c]
        if not clicked:
            return 0
        low = clicked[-1]
        ra = a.index(low) + 1 if low in a else 10**9
        rb = b.index(low) + 1 if low in b else 10**9
        kappa = min(ra, rb)
        ha = sum(1 for d in clicked if d in a[:kappa])
        hb = sum(1 for d in clicked if d in b[:kappa])
        return (hb > ha) - (hb < ha)


class Probabilistic:
    """Probabilistic interleaving; credit() returns the expected outcome P(B wins) - P(A wins) over the
    assignments, by brute-force enumeration, with a tie tolerance."""

    tau = 3.0
    tolerance: float | None = 1e-9

    def _weights(self, lst: list[int], docs: list[int]) -> dict[int, float]:
        return {d: (lst.index(d) + 1 if d in lst else len(lst) + 1) ** -self.tau for d in docs}

    def interleave(self, lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        docs = list(dict.fromkeys(lists[0] + lists[1]))
        w = [self._weights(lst, docs) for lst in lists]
        k = max(len(x) for x in lists)
        remaining = list(docs)
        shown: list[int] = []
        teams: list[int] = []
        while remaining and len(shown) < k:
            t = int(rng.integers(0, 2))
            probs = np.array([w[t][d] for d in remaining])
            d = remaining[int(rng.choice(len(remaining), p=probs / probs.sum()))]
            shown.append(d)
            teams.append(t)
            remaining.remove(d)
        return shown, teams

    def credit(self, shown: list[int], teams: list[int], clicks: list[bool], lists: list[list[int]]) -> int:
        docs = list(dict.fromkeys(lists[0] + lists[1]))
        w = [self._weights(lst, docs) for lst in lists]
        totals = [sum(wi.values()) for wi in w]           # running totals, updated by subtraction
        p_win = p_loss = 0.0
        total = 0.0
        for assign in itertools.product(range(2), repeat=len(shown)):
            rem = list(totals)
            p = 1.0
            for d, t in zip(shown, assign):
                p *= w[t][d] / rem[t]
                rem[0] -= w[0][d]
                rem[1] -= w[1][d]
            total += p
            cb = sum(1 for t, c in zip(assign, clicks) if c and t == 1)
            ca = sum(1 for t, c in zip(assign, clicks) if c and t == 0)
            if cb > ca:
                p_win += p
            elif ca > cb:
                p_loss += p
        diff = (p_win - p_loss) / total
        if self.tolerance is None:
            return diff
        return 0.0 if abs(diff) <= self.tolerance else diff


class FloatTieProbabilistic(Probabilistic):
    tolerance = None


class UniformOptimized:
    """Optimized interleaving without its linear programme: uniform over the prefix-constrained lists.

    Credit ``1/rank`` per ranker (Radlinski & Craswell 2013) returned as a pair; without the
    LP's constraints the expected credit difference under random clicks is not zero.
    """

    def _allowed(self, lists: list[list[int]], k: int) -> list[tuple[list[int], list[int]]]:
        out: list[tuple[list[int], list[int]]] = []
        stack: list[tuple[list[int], list[int]]] = [([], [])]
        while stack:
            shown, teams = stack.pop()
            tops: dict[int, int] = {}
            if len(shown) < k:
                for t, lst in enumerate(lists):
                    top = next((d for d in lst if d not in shown), None)
                    if top is not None:
                        tops.setdefault(top, t)
            if not tops:
                out.append((shown, teams))
            for d, t in tops.items():
                stack.append((shown + [d], teams + [t]))
        return out

    def interleave(self, lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        allowed = self._allowed(lists, max(len(x) for x in lists))
        return allowed[int(rng.integers(0, len(allowed)))]

    def credit(self, shown: list[int], teams: list[int], clicks: list[bool],
               lists: list[list[int]]) -> tuple[float, float]:
        def f(d: int, lst: list[int]) -> float:
            return 1.0 / (lst.index(d) + 1 if d in lst else len(lst) + 1)

        clicked = [d for d, c in zip(shown, clicks) if c]
        return sum(f(d, lists[0]) for d in clicked), sum(f(d, lists[1]) for d in clicked)


class _BiasedCoin:
    """Wraps a Generator so that ``integers(0, 2, ...)`` draws 1 with probability ``p_one``."""

    def __init__(self, rng: np.random.Generator, p_one: float) -> None:
        self._rng = rng
        self._p_one = p_one

    def integers(self, low: int, high: int, size: tuple[int, ...], dtype: type = np.int64) -> np.ndarray:
        if (low, high) != (0, 2):
            return self._rng.integers(low, high, size=size, dtype=dtype)
        return (self._rng.random(size) < self._p_one).astype(dtype)

    def random(self, size: tuple[int, ...]) -> np.ndarray:
        return self._rng.random(size)


class SlightlyBiasedProbabilistic(Probabilistic_):
    """onlineeval's batch probabilistic interleaver whose per-slot ranker coin picks B with probability 0.51.

    The credit still assumes a fair coin, so under random clicks the expected outcome has a
    mean of about +0.02 (measured in tests/test_validate_fidelity.py): a 1-2% bias.
    """

    p_b = 0.51

    def _interleave(self, rankings, rng, length):  # type: ignore[no-untyped-def]
        return super()._interleave(rankings, _BiasedCoin(rng, self.p_b), length)


class TeamDraftMultileave:
    """Team-draft multileaving (Schuth et al. 2014): each round the rankers pick in a random order."""

    def _order(self, m: int, rng: np.random.Generator) -> list[int]:
        return [int(i) for i in rng.permutation(m)]

    def interleave(self, lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        k = max(len(x) for x in lists)
        shown: list[int] = []
        teams: list[int] = []
        while len(shown) < k:
            progressed = False
            for t in self._order(len(lists), rng):
                rest = [d for d in lists[t] if d not in shown]
                if rest and len(shown) < k:
                    shown.append(rest[0])
                    teams.append(t)
                    progressed = True
            if not progressed:
                break
        return shown, teams

    def credit(self, shown: list[int], teams: list[int], clicks: list[bool], lists: list[list[int]]) -> list[int]:
        out = [0] * len(lists)
        for t, c in zip(teams, clicks):
            out[t] += int(c)
        return out


class FixedOrderTeamDraftMultileave(TeamDraftMultileave):
    def _order(self, m: int, rng: np.random.Generator) -> list[int]:
        return list(range(m))
