"""Interleaving and multileaving designs: every impression shows one list made from
the rankers' lists (``rankers``, baseline first; two for interleaving, more for
multileaving).

For a pair of rankers ``(i, j)`` an impression's outcome is +1 (``j`` preferred), -1
(``i`` preferred) or 0 (for probabilistic and optimized methods: the expected outcome
they define, in [-1, 1]; see :func:`pair_outcomes`). Impressions without a click are not comparisons and are left
out; with ``w``, ``l``, ``t`` the wins, losses and ties of ``j`` over the impressions
with at least one click,

.. math::

    \\Delta_{ji} = \\frac{w + t/2}{w + l + t} - \\frac12 = \\frac{(w - l)/2}{w + l + t},

positive when ``j`` is preferred (Chapelle, Joachims, Radlinski, Yue 2012; with two
rankers this is :math:`\\Delta_{AB}` with B as the candidate, reported as ``delta_ab``).
The test is clustered by user: per user ``num = (w_u - l_u) / 2`` and
``den = w_u + l_u + t_u``, and :math:`\\Delta = \\sum num / \\sum den` with its
delta-method standard error over users. A multileaving design reports every pair
``delta_<j>_vs_<i>`` (its preference matrix), the first pair being its primary metric.

Every interleaving design also runs as a *null variant* (:meth:`InterleavingDesign.use_null_user`):
the same rankers and traffic, but clicks that do not depend on the shown documents, so
every true effect is 0; its rows ``null:<pair>`` measure the method's bias and the false
positives it causes on these rankers (balanced interleaving is biased: Hofmann, Whiteson
and de Rijke 2011).
"""

from __future__ import annotations

import json
import math
import sys
import weakref
from itertools import combinations
from typing import Any

import numpy as np

from simulations.designs.base import Design, register_design
from simulations.traffic import Batch

__all__ = ["NULL_PREFIX", "InterleavingDesign", "DrawTable", "draw_table", "shared_interleaver", "pair_metrics",
           "pair_outcomes"]

#: prefix of a pair's metric under the null user (``null:delta_ab``): its truth, and the
#: rows of a design's null variant
NULL_PREFIX = "null:"

_INTERLEAVERS: dict[tuple[str, str], Any] = {}


def shared_interleaver(method: str, options: dict[str, Any]) -> Any:
    """One interleaver instance per (method, options) in this process, so state that only
    depends on the input lists (optimized interleaving's solved distributions) is
    computed once for all replicates a process runs. Random draws always come from the
    generator passed to ``interleave``."""
    from onlineeval.interleaving import get_interleaver

    key = (method, json.dumps(options, sort_keys=True, default=str))
    if key not in _INTERLEAVERS:
        _INTERLEAVERS[key] = get_interleaver(method, **options)
    return _INTERLEAVERS[key]


#: largest draw table kept (bytes of shown documents, teams and grades); above it the kernel runs per batch
DRAW_TABLE_BYTES = 64 * 2**20

_TABLES: dict[tuple[Any, ...], tuple[list[weakref.ref[np.ndarray]], DrawTable]] = {}

#: the compiled batch step's empty arguments (no null user's queries, labels or filled-slot mask)
_NO_QUERIES = np.zeros(0, dtype=np.intp)
_NO_LABELS = np.zeros((0, 0), dtype=np.int8)
_NO_SQUARES = np.zeros(0, dtype=np.float64)  # the compiled step's sums of squares without test: delta_t
_NO_VALID = np.zeros((0, 0), dtype=np.bool_)

#: longest list whose click patterns a :class:`DrawTable` handles as uint16 bit masks
MASK_SLOTS = 16
_BIT_TABLES: dict[str, np.ndarray] = {}
_COINS: dict[str, bool] = {}
_WORD = 2**32


def _coins_from_words(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """0/1 uint8 coins of ``shape`` from ``ceil(size / 4)`` full-range uint32 draws: coin ``k`` is the top bit
    of byte ``k % 4`` (least significant first) of word ``k // 4``, which is how NumPy's
    ``integers(0, 2, dtype=np.int8)`` maps its 32-bit draws to coins (Lemire's method on buffered bytes:
    ``(byte * 2) >> 8``), with the same number of draws. Checked once per process (:func:`draw_coins`)."""
    size = math.prod(shape)
    words = rng.integers(0, _WORD, size=(size + 3) // 4, dtype=np.uint32)
    if sys.byteorder != "little":
        words = words.astype("<u4")
    coins = words.view(np.uint8)[:size]
    coins >>= 7
    return coins.reshape(shape)


def draw_coins(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """The coins ``rng.integers(0, 2, size=shape, dtype=np.int8)`` (as 0/1 uint8) and the same generator state
    after: from 32-bit words (:func:`_coins_from_words`, 5x faster) when this NumPy draws its int8 coins that way
    (checked once per process on a fixed stream, sizes 1 to 4099, values and states), else by ``integers``."""
    if "words" not in _COINS:
        ok = True
        for size in (1, 2, 3, 4, 5, 7, 8, 4099):
            g1, g2 = np.random.default_rng(size), np.random.default_rng(size)
            g1.random(3), g2.random(3)  # a stream that does not start at a word boundary of the generator
            want = g1.integers(0, 2, size=size, dtype=np.int8)
            got = _coins_from_words(g2, (size,))
            ok &= bool(np.array_equal(want, got)) and g1.bit_generator.state == g2.bit_generator.state
            ok &= bool(g1.random() == g2.random())
        _COINS["words"] = ok
    if _COINS["words"]:
        return _coins_from_words(rng, shape)
    return rng.integers(0, 2, size=shape, dtype=np.int8).view(np.uint8)


def slot_bits(mask: np.ndarray) -> np.ndarray:
    """``(rows,)`` uint16 bit masks of a ``(rows, k)`` bool array, ``k <= 16`` (bit ``s`` = column ``s``)."""
    out = np.zeros(mask.shape[0], dtype=np.uint16)
    for s in range(mask.shape[1]):
        out |= mask[:, s].astype(np.uint16) << np.uint16(s)
    return out


def _set_bits() -> np.ndarray:
    """int8 number of set bits of every uint16 (a lookup table, built once)."""
    if "count" not in _BIT_TABLES:
        v = np.arange(2**16)
        _BIT_TABLES["count"] = sum((v >> s) & 1 for s in range(16)).astype(np.int8)
    return _BIT_TABLES["count"]


def _highest_bit() -> np.ndarray:
    """intp index of the highest set bit of every uint16 (0 for 0; a lookup table, built once)."""
    if "high" not in _BIT_TABLES:
        v = np.arange(2**16)
        _BIT_TABLES["high"] = np.maximum(np.floor(np.log2(np.maximum(v, 1))), 0).astype(np.intp)
    return _BIT_TABLES["high"]


class DrawTable:
    """Every draw a two-ranker team-draft or balanced interleaver can make on the world's queries.

    Both methods are deterministic functions of the query's two lists and a few coins: balanced
    interleaving of one coin per impression (which list leads); two-ranker team-draft of the coins
    of the even slots ``0, 2, 4, ...`` only (a pick order is drawn at the start of each round, when
    both rankers have picked equally often; at odd slots the ranker behind picks, so those coins
    are drawn but never read). The table holds, for every query ``q`` and coin pattern ``c``
    (``2`` for balanced, ``2 ** ceil(length / 2)`` for team-draft), the shown list, its teams and
    its grades, computed once by the method's own kernel. A batch then draws exactly the coins
    the interleaver draws (same generator calls, so the design's stream is unchanged) and looks
    its rows up: the same shown lists and teams as ``interleaver.interleave`` on that generator
    (tested), without the per-slot passes. Built once per process and (method, lists, length);
    cost ``Q * C`` rows of the kernel (3000 queries, 32 patterns, 10 slots: 96000 rows, about
    0.1 s, 6.7 MB with team-draft's signed teams).
    """

    def __init__(self, method: str, stacked: np.ndarray, labels: np.ndarray, length: int) -> None:
        from simulations.world import shown_labels

        self.method = method
        self.length = length
        self.stacked = stacked  # (2, Q, K) validated int32 lists (the InterleavingResult's rankings)
        _, n_queries, width = stacked.shape
        self.half = (length + 1) // 2
        self.combos = 2 if method == "balanced" else 2**self.half
        rows = n_queries * self.combos
        query = np.repeat(np.arange(n_queries), self.combos)
        combo = np.tile(np.arange(self.combos), n_queries)
        lists = stacked[:, query]
        if method == "balanced":
            from onlineeval.interleaving.balanced import _balanced_block

            shown, team = _balanced_block(lists, combo.astype(bool), length)
        else:
            from onlineeval.interleaving.team_draft import _team_draft_block

            coins = np.zeros((length, rows), dtype=bool)
            for i in range(self.half):
                coins[2 * i] = (combo >> i) & 1
            shown, team = _team_draft_block(lists, None, length, coins)  # type: ignore[arg-type]
        self.shown = np.ascontiguousarray(shown, dtype=np.int32)
        self.team = np.ascontiguousarray(team, dtype=np.int8)
        self.grades = shown_labels(labels, query, self.shown)
        valid = self.shown >= 0
        # (rows, length) bool of the filled slots; None when every slot is filled (clicks need no mask)
        self.valid: np.ndarray | None = None if valid.all() else valid
        # team-draft: (rows, length) int8 +1 where B's document is shown, -1 where A's, 0 at empty slots
        self.signed: np.ndarray | None = None
        if method == "team_draft":
            by_team = np.where(self.team == 1, 1, np.where(self.team == 0, -1, 0))
            self.signed = np.where(valid, by_team, 0).astype(np.int8)
        self.ranks: np.ndarray | None = None
        if method == "balanced":
            from onlineeval.interleaving._kernels import rank_in_lists

            # (2, rows, length) first-occurrence rank of each shown document in A and in B (K if absent)
            self.ranks = rank_in_lists(self.shown, lists).astype(np.int16 if width < 2**15 else np.intp)
        # click patterns as bit masks (bit s = slot s), up to MASK_SLOTS slots: the outcome from a few (n,)
        # lookups (:meth:`outcome_bits`) instead of passes over (n, length) arrays
        self.bits: dict[str, np.ndarray] | None = None
        self._kernel_tables: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if length <= MASK_SLOTS:
            self.bits = {"weights": 2.0 ** np.arange(length)}
            if valid is not None:
                self.bits["valid"] = slot_bits(valid)
            if self.signed is not None:  # team-draft: the slots of B's and of A's documents
                self.bits["b"], self.bits["a"] = slot_bits(self.signed == 1), slot_bits(self.signed == -1)
            else:  # balanced: for each row and lowest clicked slot l, the slots each list ranks at kappa or above
                assert self.ranks is not None
                rank_a, rank_b = self.ranks
                kappa_a = np.empty((rows, length), dtype=np.uint16)
                kappa_b = np.empty((rows, length), dtype=np.uint16)
                for last in range(length):
                    kappa = np.minimum(rank_a[:, last], rank_b[:, last])[:, None]
                    kappa_a[:, last], kappa_b[:, last] = slot_bits(rank_a <= kappa), slot_bits(rank_b <= kappa)
                self.bits["kappa_a"], self.bits["kappa_b"] = kappa_a.ravel(), kappa_b.ravel()

    @staticmethod
    def nbytes(method: str, n_queries: int, length: int) -> int:
        # both: int32 documents, int8 teams, int8 grades and (with empty slots) the bool filled-slot mask;
        # up to MASK_SLOTS slots the uint16 bit masks (filled slots; team-draft: B's and A's slots;
        # balanced: two per row and slot)
        masks = length <= MASK_SLOTS
        if method == "balanced":  # + 2 x int16 ranks
            return n_queries * 2 * (length * 11 + masks * (2 + 4 * length))
        return n_queries * 2 ** ((length + 1) // 2) * (length * 8 + masks * 6)  # + the int8 signed teams

    def draw(self, query: np.ndarray, rng: np.random.Generator) -> tuple[Any, np.ndarray, np.ndarray]:
        """``(InterleavingResult, shown grades, table rows)`` of a batch of queries, drawing the
        interleaver's coins from ``rng`` exactly as :meth:`Interleaver.interleave` does."""
        from onlineeval.interleaving.base import InterleavingResult

        key = self.draw_keys(query, rng)
        result = InterleavingResult(self.shown.take(key, axis=0), self.team.take(key, axis=0),
                                    self.stacked.take(query, axis=1))
        return result, self.grades.take(key, axis=0), key

    def draw_keys(self, query: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The table rows of a batch of queries (:meth:`draw` without gathering the rows): the coins are
        drawn from ``rng`` exactly as :meth:`Interleaver.interleave` draws them."""
        return self.keys(self.draw_coin_rows(query.shape[0], rng), query)

    def draw_coin_rows(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The interleaver's coins of ``n`` impressions as ``(rows, n)`` 0/1 uint8, drawn from ``rng`` exactly as
        :meth:`Interleaver.interleave` draws them: balanced interleaving one per impression (one row; A leads
        when it is 1), two-ranker team-draft one per slot and impression (``length`` rows, all drawn first)."""
        if self.method == "balanced":  # (few coins: no gain from words)
            return rng.integers(0, 2, size=n, dtype=np.int8).view(np.uint8).reshape(1, n)
        return draw_coins(rng, (self.length, n))

    def keys(self, coins: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The table rows of impressions of ``query`` with ``coins`` (:meth:`draw_coin_rows`): the coin pattern
        (balanced: the coin; team-draft: bit ``i`` = the coin of slot ``2i``) plus ``query * combos``."""
        if self.method == "balanced":
            key = coins[0].astype(np.intp)
        elif self.half <= 8:  # bit i of key = coin of slot 2i, shifted in from the last even slot
            bits = coins[2 * (self.half - 1)].copy()
            for i in range(self.half - 2, -1, -1):
                bits <<= 1
                bits |= coins[2 * i]
            key = bits.astype(np.intp)
        else:
            packed = np.packbits(coins[0::2], axis=0, bitorder="little")
            key = packed[0].astype(np.intp)
            for byte in range(1, packed.shape[0]):
                key |= packed[byte].astype(np.intp) << (8 * byte)
        key += query * self.combos
        return key

    def kernel_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(team_bits, valid_bits, kappa)``, :func:`simulations.kernels.interleaving_step`'s view of :attr:`bits`
        (built once): team-draft's ``(rows, 2)`` slots of A's and of B's documents; balanced interleaving's
        filled slots (no entries when every slot is filled) and ``(rows * length, 2)`` slots ranked at kappa or
        above by A and by B (side by side: one cache line per lookup); the other method's arrays have no
        entries."""
        if self._kernel_tables is None:
            bits = self.bits
            assert bits is not None
            none = np.zeros(0, dtype=np.uint16)
            if self.signed is not None:
                team = np.stack([bits["a"], bits["b"]], axis=1)
                self._kernel_tables = (team, none, none.reshape(0, 2))
            else:
                kappa = np.stack([bits["kappa_a"], bits["kappa_b"]], axis=1)
                self._kernel_tables = (none.reshape(0, 2), bits.get("valid", none), kappa)
        return self._kernel_tables

    def outcome(self, key: np.ndarray, clicks: np.ndarray) -> np.ndarray:
        """The method's ``(n,)`` int8 outcome (``prefix_credit`` on) of the rows ``key`` with ``clicks``:
        team-draft's sign of B's minus A's clicked slots from the signed team table (the definition of
        :meth:`TeamDraft._outcome`, tested equal), balanced interleaving's :meth:`balanced_outcome`."""
        if self.signed is None:
            return self.balanced_outcome(key, None, clicks)
        c = clicks if self.valid is None else clicks & self.valid.take(key, axis=0)
        return np.sign(np.where(c, self.signed.take(key, axis=0), 0).sum(axis=1)).astype(np.int8)

    def click_bits(self, clicks: np.ndarray) -> np.ndarray:
        """``(n,)`` uint16 bit masks of the clicked slots of ``(n, length)`` bool ``clicks`` (bit ``s`` = slot ``s``;
        exact: a product of 0/1 with powers of two summed below 2**16); needs :attr:`bits` (up to MASK_SLOTS slots)."""
        assert self.bits is not None
        return (clicks.view(np.uint8) @ self.bits["weights"]).astype(np.uint16)

    def outcome_bits(self, key: np.ndarray, clicked: np.ndarray) -> np.ndarray:
        """:meth:`outcome` from the rows' click masks ``clicked`` (:meth:`click_bits`): team-draft's sign of
        the clicked slots of B's minus A's documents, balanced interleaving's sign of the clicks on documents
        B and A rank at ``kappa`` or above (``kappa`` from the lowest clicked slot, :meth:`balanced_outcome`),
        each a count of set bits (exact; tested equal to :meth:`outcome`)."""
        bits = self.bits
        assert bits is not None
        count = _set_bits()
        if self.signed is not None:
            won = count.take(clicked & bits["b"].take(key))
            lost = count.take(clicked & bits["a"].take(key))
        else:
            c = clicked if self.valid is None else clicked & bits["valid"].take(key)
            row = key * self.length
            row += _highest_bit().take(c)  # lowest clicked slot (0 without a click: no credit either way)
            won = count.take(c & bits["kappa_b"].take(row))
            lost = count.take(c & bits["kappa_a"].take(row))
        return np.sign(won - lost)

    def balanced_outcome(self, key: np.ndarray, ranking: np.ndarray | None, clicks: np.ndarray) -> np.ndarray:
        """Balanced interleaving's ``(n,)`` outcome (``prefix_credit`` on) from the table's ranks of the
        shown documents: ``kappa`` is the smaller rank in A and B of the lowest clicked slot, and each
        list's credit the clicks on documents it ranks at ``kappa`` or above (the definition of
        :class:`onlineeval.interleaving.Balanced`, computed on whole rows; tested equal). ``ranking``
        (the shown rows) may be None: the table's own filled slots are used."""
        assert self.ranks is not None
        if ranking is not None:
            c = clicks & (ranking >= 0)  # as the interleaver's click check
        else:
            c = clicks if self.valid is None else clicks & self.valid.take(key, axis=0)
        n, k = c.shape
        rank_a, rank_b = self.ranks[0].take(key, axis=0), self.ranks[1].take(key, axis=0)
        last = (k - 1) - np.argmax(c[:, ::-1], axis=1)  # lowest clicked slot (any slot when none)
        rows = np.arange(n)
        kappa = np.minimum(rank_a[rows, last], rank_b[rows, last])[:, None]
        h_a = np.count_nonzero(c & (rank_a <= kappa), axis=1)
        h_b = np.count_nonzero(c & (rank_b <= kappa), axis=1)
        return np.sign(h_b - h_a).astype(np.int8)  # no click: 0 - 0


def draw_table(interleaver: Any, lists: list[np.ndarray], labels: np.ndarray, length: int) -> DrawTable | None:
    """The process's :class:`DrawTable` of ``interleaver`` on the world's ``lists`` (one ``(Q, K)``
    array per ranker), or ``None`` when the method's draw is not a table lookup (other methods,
    more than two rankers) or the table would exceed :data:`DRAW_TABLE_BYTES`."""
    from onlineeval.interleaving.balanced import Balanced
    from onlineeval.interleaving.base import stack_rankings
    from onlineeval.interleaving.team_draft import TeamDraft

    method = {Balanced: "balanced", TeamDraft: "team_draft"}.get(type(interleaver))
    if method is None or len(lists) != 2 or DrawTable.nbytes(method, lists[0].shape[0], length) > DRAW_TABLE_BYTES:
        return None
    arrays = [*lists, labels]
    key = (method, length, *(id(a) for a in arrays))
    hit = _TABLES.get(key)
    if hit is not None and all(ref() is a for ref, a in zip(hit[0], arrays, strict=True)):
        return hit[1]
    table = DrawTable(method, stack_rankings(lists, min_rankers=2, max_rankers=2), labels, length)
    for k in [k for k, (refs, _) in _TABLES.items() if any(r() is None for r in refs)]:
        del _TABLES[k]  # tables of worlds that are gone
    _TABLES[key] = ([weakref.ref(a) for a in arrays], table)
    return table


def table_kernel_inputs(table: DrawTable, users: Any, null_labels: np.ndarray | None) -> tuple[Any, ...] | None:
    """``(chains, team_bits, valid_bits, kappa, valid, null_labels)``, what the compiled batch step of ``table``
    (:func:`table_step`) reads besides a batch, or ``None`` when it does not apply: lists longer than MASK_SLOTS,
    click models without grade tables (:meth:`simulations.users.UserModels.chains`), or shown (int8) grades (the
    table's, or the null user's ``null_labels``) that the models do not know (their own path raises the error)."""
    chains = users.chains(table.length) if table.bits is not None else None
    labels = table.grades if null_labels is None else null_labels
    if (chains is None or labels.dtype != np.int8 or not labels.size or not chains.accepts(labels)
            or labels.shape[1] != table.length):
        return None
    valid = _NO_VALID if table.valid is None or null_labels is None else table.valid
    null_table = _NO_LABELS if null_labels is None else np.ascontiguousarray(null_labels)
    return (chains, *table.kernel_tables(), valid, null_table)


def table_step(table: DrawTable, fused: tuple[Any, ...], coins: np.ndarray, query: np.ndarray,
               other: np.ndarray | None, user_type: np.ndarray, rng: np.random.Generator, user: np.ndarray,
               num: np.ndarray, compared: np.ndarray, square: np.ndarray | None = None) -> bool:
    """One compiled batch step on ``table`` (:func:`simulations.kernels.interleaving_step`): the impressions of
    ``query`` with the interleaver's ``coins`` (:meth:`DrawTable.draw_coin_rows`), under the null user the grades
    of A's list for the ``other`` queries, their clicks (the uniforms drawn from ``rng`` here, as the models'
    sampler draws them for ``user_type``), the halved outcomes added to ``num[user]``, 1 to ``compared[user]`` for an
    impression with a click and (``test: delta_t``) the halved outcomes' squares to ``square[user]``. ``fused``:
    :func:`table_kernel_inputs`. ``False``, nothing drawn, where some row's type is one the kernels cannot sample."""
    chains, team_bits, valid_bits, kappa, valid, null_labels = fused
    n = query.shape[0]
    counts = chains.counts(_NO_LABELS, user_type, n)
    if counts is None:
        return False
    from clickmodels.kernels import BLOCK
    from simulations import kernels

    balanced = table.method == "balanced"
    kernels.interleaving_step(
        coins, 1 if balanced else 2, 1 if balanced else table.half, table.combos, query, table.grades,
        _NO_QUERIES if other is None else other, null_labels, valid, user_type, counts, chains.uniforms(counts, rng),
        chains.thresholds, chains.width, chains.independent_flags, chains.use_t1, chains.use_t3, BLOCK, balanced,
        team_bits, valid_bits, kappa, _set_bits(), _highest_bit(), user, num, compared,
        _NO_SQUARES if square is None else square)
    return True


def pair_metrics(rankers: list[str]) -> list[tuple[str, int, int]]:
    """``(metric name, i, j)`` for every pair, ``j`` compared against ``i`` (baseline first)."""
    if len(rankers) == 2:
        return [("delta_ab", 0, 1)]
    pairs = sorted(combinations(range(len(rankers)), 2), key=lambda p: (p[0] != 0, p[0], p[1]))
    return [(f"delta_{rankers[j]}_vs_{rankers[i]}", i, j) for i, j in pairs]


def pair_outcomes(interleaver: Any, shown: Any, clicks: np.ndarray, n_rankers: int) -> np.ndarray:
    """``(n, pairs)`` outcomes in [-1, 1] (+1: the later ranker of the pair preferred),
    pairs as in :func:`pair_metrics`.

    Methods that define an expected outcome (``expected_preferences``) contribute it:
    probabilistic interleaving and multileaving their expectation over the hidden
    assignment of slots to rankers given the shown list and the clicks, as the papers
    define it (Hofmann, Whiteson and de Rijke 2011; Schuth et al. 2015); optimized
    interleaving its normalised credit difference, the quantity its LP makes unbiased
    (Radlinski and Craswell 2013). Averaging per-impression *signs* instead is a
    different statistic, biased for these methods (under random clicks for optimized;
    with several rankers it can reverse a probabilistic-multileaving preference). Other
    methods contribute win / loss / tie.
    """
    expected = getattr(interleaver, "expected_preferences", None)
    if expected is not None:
        prefs = np.asarray(expected(shown, clicks), dtype=np.float64)
    elif n_rankers == 2:
        return np.asarray(interleaver.outcome(shown, clicks), dtype=np.float64)[:, None]
    else:
        prefs = np.asarray(interleaver.preferences(shown, clicks), dtype=np.float64)
    pairs = sorted(combinations(range(n_rankers), 2), key=lambda p: (p[0] != 0, p[0], p[1]))
    return np.stack([prefs[:, j, i] for i, j in pairs], axis=1)


@register_design("interleaving")
class InterleavingDesign(Design):
    #: test: delta_t: the per-user sums of the halved credits' squares are kept (``sq:<pair>``), set in __init__
    squares: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.interleaver = shared_interleaver(self.config.method or "", self.config.options)
        names = self.config.rankers
        # A/A: every ranker replaced by the baseline
        self.ranker_lists = [self.world.rankings[names[0] if self.aa else r] for r in names]
        self.pairs = pair_metrics(names)
        for metric, _, _ in self.pairs:
            self.sums[f"num:{metric}"] = np.zeros(self.population)
        self.sums["compared"] = np.zeros(self.population)
        # test: delta_t: each pair's per-user sum of its halved outcomes' squares, for the intra-user correlation
        # its df take (onlineeval.stats.intra_user_correlation)
        self.squares = self.config.test == "delta_t"
        if self.squares:
            for metric, _, _ in self.pairs:
                self.sums[f"sq:{metric}"] = np.zeros(self.population)
        self.null_labels: np.ndarray | None = None
        # two-ranker team-draft and balanced: the draw is a lookup in a per-process table
        self.table = draw_table(self.interleaver, self.ranker_lists, self.world.labels, self.world.depth)
        self._kernel: tuple[Any, ...] | None = None  # the compiled batch step's inputs (_kernel_inputs)

    def use_null_user(self) -> None:
        """Run as the design's null variant: the real rankers, but every impression's clicks
        are the user's clicks on ranker A's list for another query drawn by frequency (clicks
        that do not depend on the shown documents, so every true effect is 0); its rows are
        named ``null:<pair>``. Draws come from the design's own stream."""
        self.null_labels = self.world.ranked_labels("A")
        self.query_cdf = np.cumsum(self.world.frequency)
        self.query_draw: Any = None  # the CdfDraw of query_cdf (_null_queries), built on first use
        self._kernel = None  # the compiled batch step reads the null user's grades

    def _process(self, batch: Batch) -> None:
        if self.table is not None and self.interleaver.prefix_credit:
            self._process_table(batch)
            return
        q = batch.query
        grades = key = None
        if self.table is not None:
            shown, grades, key = self.table.draw(q, self.rng)
        else:
            shown = self.interleaver.interleave([r[q] for r in self.ranker_lists], self.rng, length=self.world.depth)
        ranking = np.asarray(shown.ranking)
        if self.null_labels is None:
            if grades is None:
                clicks = self._clicks(batch, ranking)
            else:
                clicks = self.users.sample(grades, batch.user_type, self.rng)
        else:
            other = self._null_queries(len(batch))
            labels = np.where(ranking >= 0, self.null_labels[other], -1).astype(np.int8)
            clicks = self.users.sample(labels, batch.user_type, self.rng)
        outcomes = pair_outcomes(self.interleaver, shown, clicks, len(self.ranker_lists))
        # table draws (team-draft, balanced) have outcomes -1, 0, +1: exact halves
        add = self._add if key is None else self._add_exact
        for p, (metric, _, _) in enumerate(self.pairs):
            add(f"num:{metric}", batch.user, outcomes[:, p] / 2.0)
            if self.squares:
                self._add(f"sq:{metric}", batch.user, (outcomes[:, p] / 2.0) ** 2)
        self._add_exact("compared", batch.user, clicks.any(axis=1).astype(np.float64))

    def _process_table(self, batch: Batch) -> None:
        """:meth:`_process` of a table-drawn method with prefix credit: the same random draws in the same
        order (coins, then the null user's queries, then clicks) and the same outcomes, from the table's
        rows without building the :class:`InterleavingResult` (no gather of the input lists, no click
        validation); outcomes -1, 0, +1 and comparisons are added in place (exact halves). Up to MASK_SLOTS
        slots and with click models of grade tables (:meth:`_kernel_inputs`), everything after the draws is
        one compiled loop (:func:`simulations.kernels.interleaving_step`; the same numbers, tested)."""
        table = self.table
        n = len(batch)
        coins = table.draw_coin_rows(n, self.rng)
        other = None if self.null_labels is None else self._null_queries(n)
        fused = self._kernel_inputs()
        square = self.sums[f"sq:{self.pairs[0][0]}"] if self.squares else None
        if fused is not None and table_step(table, fused, coins, batch.query, other, batch.user_type, self.rng,
                                            batch.user, self.sums[f"num:{self.pairs[0][0]}"], self.sums["compared"],
                                            square):
            return
        key = table.keys(coins, batch.query)
        if other is None:
            clicks = self.users.sample(table.grades.take(key, axis=0), batch.user_type, self.rng)
        else:
            labels = self.null_labels.take(other, axis=0)  # int8 grades (shown_labels)
            if table.valid is not None:  # empty slots of the shown lists stay empty
                labels = np.where(table.valid.take(key, axis=0), labels, -1).astype(np.int8)
            clicks = self.users.sample(labels, batch.user_type, self.rng)
        if table.bits is None:
            half = table.outcome(key, clicks).astype(np.float64) / 2.0
            compared = clicks.any(axis=1)
        else:  # the rows' click masks: outcome and comparison from (n,) lookups
            clicked = table.click_bits(clicks)
            half = table.outcome_bits(key, clicked) * 0.5
            compared = clicked != 0
        self._add_exact(f"num:{self.pairs[0][0]}", batch.user, half)
        if self.squares:
            self._add_exact(f"sq:{self.pairs[0][0]}", batch.user, half * half)
        self._add_exact("compared", batch.user, compared.astype(np.float64))

    def _kernel_inputs(self) -> tuple[Any, ...] | None:
        """:func:`table_kernel_inputs` of the design's table and users (and null user's grades), built on first
        use."""
        if self._kernel is None:
            self._kernel = (table_kernel_inputs(self.table, self.users, self.null_labels),)
        return self._kernel[0]

    def _null_queries(self, n: int) -> np.ndarray:
        """The null user's other queries of ``n`` impressions, drawn by frequency from the design's stream
        (``draw_from_cdf`` of ``rng.random(n)``: the same indices by :class:`~simulations.traffic.CdfDraw`)."""
        if self.query_draw is None or self.query_draw.source is not self.query_cdf:
            from simulations.traffic import CdfDraw

            self.query_draw = CdfDraw(self.query_cdf)
        return self.query_draw(self.rng.random(n))  # type: ignore[no-any-return]

    def _checkpoint_values(self, primary: bool = False
                           ) -> tuple[int, int, dict[str, tuple[float, ...]]] | None:
        """The checkpoint's (or with ``primary`` the per-batch look's) numbers by the compiled kernel
        (:func:`simulations.stat_kernels.ratio_values`: the active users found and each pair's ratio and
        delta-method variance in passes over the population arrays; the NumPy path's numbers to rounding,
        tested), or None when :data:`simulations.stat_kernels.COMPILED` is off."""
        from simulations import stat_kernels

        if not stat_kernels.COMPILED or self.config.test == "delta_t":  # (delta_t: the NumPy path, with its df)
            return None
        pairs = self.pairs[:1] if primary else self.pairs
        names = self.metric_names()[:len(pairs)]
        n_users, n_impr, values = stat_kernels.ratio_values(self, [f"num:{m}" for m, _, _ in pairs], "compared",
                                                            self.alpha)
        if values is None:
            return n_users, n_impr, {m: (math.nan,) * 5 for m in names}
        return n_users, n_impr, {m: tuple(v) for m, v in zip(names, values, strict=True)}

    def _active_sums(self, users: np.ndarray) -> dict[str, np.ndarray]:
        # the estimates read the outcomes and comparisons, not the impressions
        return {k: v.take(users) for k, v in self.sums.items() if k != "impressions"}

    def _has_data(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> bool:
        return users.size >= 2 and bool(sums["compared"].sum() > 0)

    def metric_names(self) -> list[str]:
        prefix = "" if self.null_labels is None else NULL_PREFIX
        return [prefix + metric for metric, _, _ in self.pairs]

    def _estimates(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> dict[str, Any]:
        """Each pair's preference: ``ratio_mean``'s numbers (the delta method's z), or with ``test: delta_t``
        :func:`onlineeval.stats.small_sample.ratio_mean_cr2_values`' (the bias-reduced SE and Student's t, its df
        on the rows)."""
        from onlineeval.stats.online import ratio_mean_values  # ratio_mean's numbers, bit for bit

        if self.config.test == "delta_t":
            from onlineeval.stats.small_sample import ratio_mean_cr2_values
            from simulations.designs.base import TValues

            from onlineeval.stats.small_sample import intra_user_correlation_values

            out = {}
            for name, (metric, _, _) in zip(self.metric_names(), self.pairs, strict=True):
                num = sums[f"num:{metric}"]
                icc = intra_user_correlation_values(num, sums["compared"], sums[f"sq:{metric}"])
                vals, df = ratio_mean_cr2_values(num, sums["compared"], alpha=self.alpha, icc=icc)
                out[name] = TValues(*vals, df)
            return out
        return {
            name: ratio_mean_values(sums[f"num:{metric}"], sums["compared"], alpha=self.alpha)
            for name, (metric, _, _) in zip(self.metric_names(), self.pairs, strict=True)
        }
