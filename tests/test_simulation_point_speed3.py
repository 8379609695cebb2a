"""Speed of one point, round 3 (issue 12): the lean per-batch and checkpoint paths against references.

- ``DrawTable.outcome_bits`` (outcomes from the rows' click bit masks) equals ``DrawTable.outcome`` (and so
  the interleaver's outcome, tested in ``test_simulation_checkpoint_fastpaths.py``) on lists with empty
  slots, clicks on empty slots included; ``click_bits`` equals the bits of the click matrix;
- ``DrawTable.draw_keys`` (team-draft's even-slot coins shifted into the key) equals the previous
  ``packbits`` construction (kept here as the reference) and draws the same coins;
- whole replicates with the table path switched off (the interleavers' kernels) are compared in
  ``test_simulation_point_speed.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulations.designs.interleaving import MASK_SLOTS, DrawTable, slot_bits


def _keys_ref(table: DrawTable, query: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """DrawTable.draw_keys before round 3 (commit ddd362e)."""
    n = query.shape[0]
    if table.method == "balanced":
        key = rng.integers(0, 2, size=n, dtype=np.int8).astype(np.intp)
    else:
        coins = rng.integers(0, 2, size=(table.length, n), dtype=np.int8)
        packed = np.packbits(coins[0::2], axis=0, bitorder="little")
        key = packed[0].astype(np.intp)
        for byte in range(1, packed.shape[0]):
            key |= packed[byte].astype(np.intp) << (8 * byte)
    key += query * table.combos
    return key


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("length", [10, 7, 1, 16, 17, 18])
def test_outcome_bits_and_keys_equal_the_references(method, length):
    from test_simulation_point_speed import lists_with_edge_cases

    rng = np.random.default_rng(11)
    a, b, labels = lists_with_edge_cases(rng, n_queries=60 if length > 12 else 400, depth=max(10, length + 2),
                                         docs=max(14, length + 6))
    table = DrawTable(method, np.stack([a, b]), labels, length)
    assert (table.bits is not None) == (length <= MASK_SLOTS)
    for seed, n in [(1, 1), (2, 1500), (5, 20_000)]:
        q = np.random.default_rng(seed + 100).integers(0, a.shape[0], n)
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        key = table.draw_keys(q, g1)
        np.testing.assert_array_equal(key, _keys_ref(table, q, g2))
        assert g1.bit_generator.state == g2.bit_generator.state
        if table.bits is None:
            continue
        seen = set()
        for rate in (0.0, 0.05, 0.3, 0.9, 1.0):
            clicks = np.random.default_rng(seed).random((n, length)) < rate
            clicked = table.click_bits(clicks)
            assert clicked.dtype == np.uint16
            np.testing.assert_array_equal(clicked, slot_bits(clicks))
            np.testing.assert_array_equal((clicked >> 3) & 1 if length > 3 else clicked & 1,
                                          clicks[:, 3] if length > 3 else clicks[:, 0])
            expected = table.outcome(key, clicks)
            got = table.outcome_bits(key, clicked)
            assert got.dtype == expected.dtype == np.int8
            np.testing.assert_array_equal(got, expected)
            seen.update(np.unique(got).tolist())
        if n > 100 and length > 1:
            assert seen == {-1, 0, 1}


def test_slot_bits():
    rng = np.random.default_rng(4)
    mask = rng.random((500, 16)) < 0.5
    want = (mask * (1 << np.arange(16))).sum(axis=1)
    np.testing.assert_array_equal(slot_bits(mask), want)
