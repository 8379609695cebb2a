r"""The exact null-user Delta of a two-ranker team-draft or balanced interleaving design (prefix credit) whose
users' click models are chains (metric users too), independent-click tables or UBMs, by grade: no Monte Carlo.

The null user (:func:`simulations.truth_interleaving.null_interleaving_truth`) clicks like the config's users on
ranker A's list for *another* query :math:`q'`, drawn independently by frequency, at the slots the interleaved list
fills. Its clicks therefore do not depend on the impression's query or coins, only on which slots are filled (the
row's mask :math:`M`): their pattern :math:`c \in \{0, 1\}^k` has the distribution

.. math::

    P_M(c) = \sum_{q'} f_{q'} \sum_t \pi_t\, P_t(c \mid \text{A's grades of } q' \text{ at the slots of } M),

each :math:`P_t` the chain's probability of the pattern (:func:`pattern_probabilities`: the clicks' and skips'
probabilities down to the last click, the continuations between, and no click below it; a UBM's,
:func:`ubm_pattern_probabilities`, each slot's click or skip at the examination its last click above gives it). A
row's expected outcome is then :math:`\sum_c P_M(c)\, o(\text{row}, c)` with the design's own outcome of the pattern
(:meth:`simulations.designs.interleaving.DrawTable.outcome_bits`: team-draft's teams, balanced interleaving's
:math:`\kappa` of the lowest click), computed once per distinct row (team-draft: its teams' slots; balanced: its
filled slots and :math:`\kappa` masks), and :math:`P(\text{a click}) = 1 - P_M(0)`. The Delta is the ratio of their
frequency- and coin-weighted means, with the queries whose two lists are the same at 0 (as the Monte Carlo sets
them). Lists of up to :data:`MAX_SLOTS` slots (:math:`2^k` patterns).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from simulations.config import Config, DesignConfig
    from simulations.runner import Truth
    from simulations.users import UserModels
    from simulations.world import World

__all__ = ["EXACT_NULL_METHOD", "MAX_SLOTS", "exact_null_parts", "exact_null_truth", "pattern_probabilities",
           "ubm_pattern_probabilities"]

#: the null truth's ``method``
EXACT_NULL_METHOD = ("exact (click patterns of the null user: clicks on ranker A's list for an independent query, "
                     "mixed over the queries)")

#: the longest list whose 2^k click patterns are enumerated (4,096 patterns)
MAX_SLOTS = 12

#: pattern probabilities computed for this many (other query, pattern) pairs at a time
_BLOCK = 1 << 22


def pattern_probabilities(a: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``(rows, 2**k)`` probability of each click pattern (bit ``r`` = slot ``r``) along the chains ``a, c, s``
    (``(rows, k)`` each: click given examined, go on after a click, after a skip; the first slot examined), by a
    programme over the slots: after slot ``r``, each prefix pattern's probability of still examining and of having
    stopped (no click below then), the patterns doubling with each slot."""
    rows, k = a.shape
    alive = np.ones((rows, 1))
    stopped = np.zeros((rows, 1))
    for r in range(k):
        ar, cr, sr = a[:, r : r + 1], c[:, r : r + 1], s[:, r : r + 1]
        skip, click = alive * (1.0 - ar), alive * ar
        # bit r = 0: the skips that go on, and the stopped prefixes (no click below them); bit r = 1: the clicks
        alive = np.concatenate([skip * sr, click * cr], axis=1)
        stopped = np.concatenate([stopped + skip * (1.0 - sr), click * (1.0 - cr)], axis=1)
    return alive + stopped


def ubm_pattern_probabilities(a: np.ndarray, exam: np.ndarray) -> np.ndarray:
    r"""``(rows, 2**k)`` probability of each click pattern (bit ``r`` = slot ``r``) of UBM users: ``a`` ``(rows, k)``
    the attractiveness at the slots (0 at empty ones), ``exam`` ``(k, k)`` :math:`\gamma_{r j}` (``j`` one past the
    last click's slot above ``r``, 0: none; :class:`simulations.user_tables.UbmTables`). Slot by slot,
    each prefix pattern (whose last click fixes ``j``) is clicked with :math:`a_r \gamma_{r j}`, else skipped."""
    rows, k = a.shape
    p = np.ones((rows, 1))
    last = np.zeros(1, dtype=np.intp)  # j of each prefix pattern
    for r in range(k):
        click = a[:, r : r + 1] * exam[r][last][None, :]
        p = np.concatenate([p * (1.0 - click), p * click], axis=1)
        last = np.concatenate([last, np.full(last.size, r + 1, dtype=np.intp)])
    return p


def _null_distribution(types: list[Any], shares: np.ndarray,
                       grades: np.ndarray, freq: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``(2**k,)`` :math:`P_M(c)` of the module docstring: the other queries' grades ``grades`` (``(Q, k)``, -1
    empty) at the filled slots ``mask`` (``(k,)`` bool), mixed by ``freq`` (summing to 1) and the types' ``shares``."""
    from simulations.user_tables import UbmTables, slot_chain, slot_values

    q, k = grades.shape
    shown = np.where(mask[None, :], grades, -1).astype(np.intp)
    out = np.zeros(2**k)
    step = max(_BLOCK >> k, 1)
    for lo in range(0, q, step):
        g, f = shown[lo : lo + step], freq[lo : lo + step]
        for share, tables in zip(shares, types, strict=True):
            if isinstance(tables, UbmTables):
                p = ubm_pattern_probabilities(slot_values(tables.attract, g), tables.exam)
            else:
                p = pattern_probabilities(*slot_chain(tables, g))
            out += share * (f @ p)
    return out


def _row_keys(table: Any) -> np.ndarray:
    """``(rows, w)`` what the outcome of a row reads (the filled slots and the teams' or kappa's bit masks)."""
    bits = table.bits
    k = table.length
    valid = bits["valid"] if "valid" in bits else np.full(table.grades.shape[0], 2**k - 1, dtype=np.uint16)
    if table.signed is not None:
        return np.column_stack([valid, bits["a"], bits["b"]]).astype(np.int64)
    rows = table.grades.shape[0]
    return np.column_stack([valid, bits["kappa_a"].reshape(rows, k), bits["kappa_b"].reshape(rows, k)]
                           ).astype(np.int64)


def exact_null_parts(config: Config, design: DesignConfig, world: World, users: UserModels
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per query, the null user's ``(E[o / 2], P(a click))`` of ``design``'s impressions (coins, other queries,
    user types and clicks averaged out; ``E[o / 2]`` 0 on the queries whose two lists are the same), or ``None``
    where it does not apply (:func:`simulations.truth_interleaving_exact.exact_interleaving_parts`' conditions, a
    list longer than :data:`MAX_SLOTS`, or a table without bit masks): the Monte Carlo then."""
    from simulations.truth_interleaving import identical_lists
    from simulations.truth_interleaving_exact import exact_inputs

    inputs = exact_inputs(design, world, users)
    if inputs is None:
        return None
    lists, table, types = inputs
    k = table.length
    null_grades = world.ranked_labels("A")
    if table.bits is None or k > MAX_SLOTS or null_grades.shape[1] != k:
        return None
    freq = np.asarray(world.frequency, dtype=np.float64)
    freq = freq / freq.sum()
    shares = np.asarray(users.shares, dtype=np.float64)
    keys, inverse = np.unique(_row_keys(table), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    slots = np.arange(k)
    patterns = np.arange(2**k, dtype=np.uint16)
    num_keys, den_keys = np.empty(keys.shape[0]), np.empty(keys.shape[0])
    dist: dict[int, np.ndarray] = {}
    for mask_bits in np.unique(keys[:, 0]):
        dist[int(mask_bits)] = _null_distribution(types, shares, null_grades, freq,
                                                  ((int(mask_bits) >> slots) & 1).astype(bool))
    first = np.zeros(keys.shape[0], dtype=np.intp)
    first[inverse[::-1]] = np.arange(inverse.size)[::-1]  # a table row of each distinct key
    for mask_bits, p in dist.items():  # the keys of each mask, a block of them at a time
        of_mask = np.flatnonzero(keys[:, 0] == mask_bits)
        den_keys[of_mask] = 1.0 - float(p[0])
        step = max(_BLOCK >> k, 1)
        for lo in range(0, of_mask.size, step):
            idx = of_mask[lo : lo + step]
            outcome = table.outcome_bits(np.repeat(first[idx], patterns.size), np.tile(patterns, idx.size))
            num_keys[idx] = outcome.reshape(idx.size, patterns.size).astype(np.float64) @ p / 2.0
    n_queries = lists[0].shape[0]
    num_q = num_keys[inverse].reshape(n_queries, table.combos).mean(axis=1)
    den_q = den_keys[inverse].reshape(n_queries, table.combos).mean(axis=1)
    num_q[identical_lists(lists)] = 0.0
    return num_q, den_q


def exact_null_truth(config: Config, design: DesignConfig, world: World, users: UserModels) -> list[Truth] | None:
    """The design's exact null-user Delta (metric ``null:<pair>``, SE 0; :func:`exact_null_parts`), or ``None``."""
    from simulations.designs.interleaving import NULL_PREFIX
    from simulations.truth_interleaving_exact import truth_of_parts

    return truth_of_parts(design, world, exact_null_parts(config, design, world, users), NULL_PREFIX,
                          EXACT_NULL_METHOD)
