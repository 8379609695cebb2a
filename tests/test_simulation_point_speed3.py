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
from tests.test_simulation_point_speed import drive_batches


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


# ----------------------------------------------------------------------------- A/B batch step
def _same_rows(new, ref):
    """Row by row, every field equal (floats bit for bit, NaN equal to NaN)."""
    assert len(new) == len(ref) and len(ref) > 0
    for x, y in zip(new, ref, strict=True):
        for field in x.__dataclass_fields__:
            u, v = getattr(x, field), getattr(y, field)
            if isinstance(v, float):
                assert np.float64(u).tobytes() == np.float64(v).tobytes() or (u != u and v != v), (field, u, v)
            else:
                assert u == v, (field, u, v)


def _ab_process_ref(self, batch):
    """ABDesign._process before round 3 (commit ddd362e)."""
    if self.injection is not None:
        self.injection.apply(self.in_b, batch)
    arm_b = self.in_b[batch.user]
    q = batch.query
    labels = np.where(arm_b[:, None], self.grades_b.take(q, axis=0), self.grades_a.take(q, axis=0))
    clicks = self.users.sample(labels, batch.user_type, self.rng)
    n_clicks = clicks.sum(axis=1)
    first = np.argmax(clicks, axis=1)
    rr = np.where(n_clicks > 0, 1.0 / (first + 1.0), 0.0)
    self._add_exact("clicks", batch.user, n_clicks.astype(np.float64))
    self._add_exact("abandoned", batch.user, (n_clicks == 0).astype(np.float64))
    self._add("rr", batch.user, rr)


def _ab_config(depth, inject):
    from simulations.config import config_from_mapping

    types = [{"name": "nav", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
             {"name": "inf", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]
    srm = {"inject": {"user_type": "inf", "arm": "B", "share": 0.3}} if inject else {}
    return config_from_mapping({
        "seed": 9, "replicates": 1,
        "collection": {"n_queries": 150, "candidates": max(12, depth + 2)}, "rankers": {"depth": depth},
        "users": {"population": 700, "activity": {"sigma": 1.2}, "types": types},
        "traffic": {"days": 3, "queries_per_day": 900, "batch_hours": 6},
        "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank", "share_b": 0.4,
                     "analysis": {"srm": srm, "cuped": {"pre_days": 1}}}],
        "analysis": {"alpha": 0.05, "truth_impressions": 2000, "null": False, "aa": True},
    })


def ab_designs_both_ways(config, reference_process):
    """One replicate of ``config``'s two A/B designs (the design and its A/A variant) run batch by batch twice, with
    their own batch step and with ``reference_process`` in its place: ``(new designs, reference designs)``."""
    import types

    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    world = build_world(config, world_seed(config.seed))
    users = UserModels.from_config(config.users)
    seq = replicate_seeds(config.seed, 1)[0]
    runs = []
    for reference in (False, True):
        traffic, designs = build_replicate(config, world, users, seq)
        designs = [d for d in designs if d.kind == "ab"]
        assert len(designs) == 2
        if reference:
            for d in designs:
                d._process = types.MethodType(reference_process, d)
        drive_batches(traffic, designs)
        runs.append(designs)
    return runs[0], runs[1]


@pytest.mark.parametrize(("depth", "inject"), [(10, False), (10, True), (3, False), (17, False)])
def test_ab_batch_step_equals_the_reference(depth, inject):
    """The A/B batch step (one gather from the stacked arms' grades, per-pattern clicks, abandonment and
    reciprocal ranks) gives the per-user sums and checkpoint rows of the previous code, bit for bit, and
    the same draws (A/A variant, an injected split, lists of 3 and of 17 ranks: the per-row path)."""
    runs = ab_designs_both_ways(_ab_config(depth, inject), _ab_process_ref)
    assert all((d.by_pattern is None) == (depth > 16) for designs in runs for d in designs)
    for new, ref in zip(*runs, strict=True):
        assert new.sums.keys() == ref.sums.keys()
        for k in new.sums:
            assert new.sums[k].tobytes() == ref.sums[k].tobytes(), k
        assert new.rng.bit_generator.state == ref.rng.bit_generator.state
        _same_rows(new.rows, ref.rows)
        assert len(new.rows) > 20 and new.sums["rr"].sum() > 0


def test_ab_click_patterns():
    from simulations.designs.ab import _click_patterns

    assert _click_patterns(17) is None
    weights, n_clicks, abandoned, rr = _click_patterns(10)
    clicks = np.random.default_rng(2).random((5000, 10)) < 0.2
    pattern = (clicks.view(np.uint8) @ weights).astype(np.intp)
    np.testing.assert_array_equal(pattern, slot_bits(clicks))
    n = clicks.sum(axis=1)
    np.testing.assert_array_equal(n_clicks[pattern], n)
    np.testing.assert_array_equal(abandoned[pattern], n == 0)
    want = np.where(n > 0, 1.0 / (np.argmax(clicks, axis=1) + 1.0), 0.0)
    assert rr[pattern].tobytes() == want.tobytes()


def test_click_values_by_pattern_equal_the_row_by_row_values():
    """_click_values (the A/B batch step's and the CUPED pre-period's per-impression clicks, abandonment and
    reciprocal rank): the per-pattern lookup gives the row-by-row path's float64 values, bit for bit."""
    from simulations.designs.ab import _click_patterns, _click_values

    rng = np.random.default_rng(6)
    for depth in (1, 3, 10, 16):
        clicks = rng.random((4000, depth)) < 0.3
        fast, slow = _click_values(clicks, _click_patterns(depth)), _click_values(clicks, None)
        for got, want in zip(fast, slow, strict=True):
            assert got.dtype == want.dtype == np.float64 and got.tobytes() == want.tobytes()
        assert (slow[1] == 1.0).any() and (slow[0] > 0).any()  # rows without and with clicks


# ----------------------------------------------------------------------------- lean z values
def test_z_values_bit_identical_to_tests():
    """online._z_values (Python floats) against online._tests with df = inf (0-d arrays), the previous
    body of _z_values: every field bit for bit, edge cases included."""
    import itertools
    import math

    from onlineeval.stats.online import _tests, _z_values

    rng = np.random.default_rng(6)
    ests = [0.0, -0.0, 1e-300, -3.2, 0.05, math.inf, -math.inf, math.nan, *rng.normal(0, 0.1, 30)]
    ses = [0.0, -0.0, 1e-300, 1e-17, 0.02, 3.0, math.inf, math.nan, *np.abs(rng.normal(0, 0.05, 30))]
    for est, se, null, alpha in itertools.product(ests, ses, [0.0, 0.05], [0.05, 0.1, 1e-3]):
        with np.errstate(all="ignore"):
            stat, p, lo, hi = _tests(np.asarray(est), np.asarray(se), null, alpha, np.full((), np.inf))
            got = _z_values(np.asarray(est), np.asarray(se), null, alpha)
        want = (float(est), float(se), float(lo), float(hi), float(p))
        assert [np.float64(v).tobytes() for v in got] == [np.float64(v).tobytes() for v in want] or all(
            (a != a and b != b) or np.float64(a).tobytes() == np.float64(b).tobytes() for a, b in zip(got, want)
        ), (est, se, null, alpha, got, want)


def test_delta_1d_bit_identical_to_the_kernel():
    from onlineeval.stats.online import _delta_1d, _delta_kernel

    rng = np.random.default_rng(12)
    for trial in range(300):
        n = int(rng.integers(2, 20_000)) if trial % 3 else int(rng.integers(2, 12))
        den = rng.poisson(1.3, n).astype(np.float64)
        if trial % 17 == 0:
            den[:] = 0.0  # no denominator: NaN
        num = rng.integers(-1, 2, n) * np.minimum(den, 1.0) / 2.0 if trial % 2 else den * rng.random(n)
        with np.errstate(all="ignore"):
            want = _delta_kernel(num, den)
        got = _delta_1d(num, den)
        for g, w in zip(got, want, strict=True):
            assert np.float64(g).tobytes() == np.float64(w).tobytes() or (np.isnan(g) and np.isnan(w)), (trial, g, w)


# ----------------------------------------------------------------------------- CUPED pooled correlations
def test_pooled_arms_bit_identical_to_pooled_correlations():
    """simulations.cuped._pooled_arms (column means from running sums, columns written one by one) against
    pooled_correlations (stacked columns, mean over axis 0), bit for bit, on large arms and edge sizes."""
    from simulations.cuped import _pooled_arms, pooled_correlations

    rng = np.random.default_rng(21)
    sizes = [4, 5, 9, 17, 130, 1000, 8191, 8193, 16_385, 40_000]
    for trial, n in enumerate(sizes * 2):
        in_b = rng.random(n) < (0.5 if trial % 3 else 0.2)
        in_b[:2], in_b[2:4] = True, False
        y = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4) + rng.random(n)
        x = np.where(rng.random(n) < 0.7, rng.lognormal(0, 2, n), 0.0)
        active = x > 0
        ib, ia = np.flatnonzero(in_b), np.flatnonzero(~in_b)
        arms = [(idx, [y[idx], x[idx], active[idx].astype(np.float64)]) for idx in (ib, ia)]
        got, want = _pooled_arms(arms, n), pooled_correlations(y, x, active, in_b)
        assert [np.float64(v).tobytes() for v in got] == [np.float64(v).tobytes() for v in want], (n, got, want)


def _pre_period_ref(traffic, world, users, days, rng):
    """simulations.cuped.simulate_pre_period before round 3 (commit ddd362e)."""
    import copy

    from simulations.world import shown_labels

    model = copy.copy(traffic)
    model.rng = rng
    population = traffic.population
    sums = {k: np.zeros(population, dtype=np.float64) for k in ("impressions", "clicks", "abandoned", "rr")}
    ranking_a = world.rankings["A"]
    step = traffic.batch_hours
    for hour in range(-24 * days, 0, step):
        batch = model.batch(hour, step)
        if len(batch) == 0:
            continue
        clicks = users.sample(shown_labels(world.labels, batch.query, ranking_a[batch.query]), batch.user_type, rng)
        n_clicks = clicks.sum(axis=1)
        rr = np.where(n_clicks > 0, 1.0 / (np.argmax(clicks, axis=1) + 1.0), 0.0)
        for key, w in (("impressions", None), ("clicks", n_clicks.astype(np.float64)),
                       ("abandoned", (n_clicks == 0).astype(np.float64)), ("rr", rr)):
            sums[key] += np.bincount(batch.user, weights=w, minlength=population)
    return sums


@pytest.mark.parametrize("depth", [10, 17])
def test_pre_period_equals_the_reference(depth, monkeypatch):
    """The pre-period (the A/B batch step's compiled loop up to 16 ranks, the NumPy path beyond) equals the
    reference: the same sums bit for bit and the same generator state after."""
    from simulations import kernels
    from simulations.cuped import simulate_pre_period
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    config = _ab_config(depth, False)
    world = build_world(config, world_seed(config.seed))
    users = UserModels.from_config(config.users)
    traffic, _ = build_replicate(config, world, users, replicate_seeds(config.seed, 1)[0])
    g1, g2 = np.random.default_rng(4), np.random.default_rng(4)
    calls = []
    step = kernels.ab_step
    monkeypatch.setattr(kernels, "ab_step", lambda *args: calls.append(1) or step(*args))
    new = simulate_pre_period(traffic, world, users, 3, g1).sums
    assert len(calls) == (12 if depth <= 16 else 0)  # 3 days of 6-hour batches through the compiled step
    ref = _pre_period_ref(traffic, world, users, 3, g2)
    assert g1.bit_generator.state == g2.bit_generator.state
    assert new.keys() == ref.keys()
    for k in ref:
        assert new[k].tobytes() == ref[k].tobytes(), k
    assert ref["rr"].sum() > 0 and ref["impressions"].max() > 3


# ----------------------------------------------------------------------------- traffic
def test_replicate_rows_equal_asdict():
    import math
    from dataclasses import asdict

    from simulations.designs.base import CheckpointRow
    from simulations.runner import replicate_rows

    rows = [CheckpointRow("ab", False, 3, "cuped:x", True, 0.1, math.nan, -1.0, 2.0, 0.5, 10, 20),
            CheckpointRow("td", True, 1, "delta_ab", False, -0.0, 0.2, math.inf, 1e-300, 1.0, 0, 0)]
    designs = [type("D", (), {"rows": rows[:1]})(), type("D", (), {"rows": rows[1:]})()]
    got = replicate_rows(designs, 7)
    want = [{"replicate": 7, **asdict(r)} for r in rows]
    assert [list(g.items()) for g in got] == [list(w.items()) for w in want] or all(
        list(g) == list(w) and all(a == b or (a != a and b != b) for a, b in zip(g.values(), w.values()))
        for g, w in zip(got, want))
    assert [list(g) for g in got] == [list(w) for w in want]


def test_checkpoint_row_init_takes_the_fields_in_order():
    """CheckpointRow's hand-written __init__ (faster than the frozen dataclass's) takes exactly the declared fields
    in their order, keeps them in that order, and the row stays frozen, comparable, hashable and picklable."""
    import dataclasses
    import inspect
    import math
    import pickle

    from simulations.designs.base import CheckpointRow

    names = [f.name for f in dataclasses.fields(CheckpointRow)]
    params = list(inspect.signature(CheckpointRow.__init__).parameters)[1:]
    assert params == names
    values = ("ab", False, 3, "cuped:x", True, 0.1, 0.02, -1.0, 2.0, 0.5, 10, 20, 7.5)
    row = CheckpointRow(*values)
    assert list(row.__dict__) == names and tuple(row.__dict__.values()) == values
    assert dataclasses.astuple(row) == values
    assert CheckpointRow(**dict(zip(names, values))) == row and hash(CheckpointRow(*values)) == hash(row)
    assert row != CheckpointRow(*values[:-2], 21, 7.5)
    assert CheckpointRow(*values[:-1]).df == math.inf  # z's (every design but the counterfactual's differences)
    assert pickle.loads(pickle.dumps(row)) == row
    assert repr(row).startswith("CheckpointRow(design='ab', aa=False, day=3,")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.day = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        CheckpointRow(*values[:-2])  # a field without a default missing
    assert math.isnan(CheckpointRow(*values[:6], math.nan, *values[7:]).se)


@pytest.mark.parametrize("words", [True, False])
def test_draw_coins_equal_integers(words, monkeypatch):
    """draw_coins (from 32-bit words when the once-per-process check passes, else by integers) gives
    rng.integers(0, 2, dtype=int8)'s coins and leaves the generator in the same state."""
    from simulations.designs import interleaving as il

    il.draw_coins(np.random.default_rng(0), (1,))
    assert il._COINS["words"]  # this NumPy: the fast path is taken
    monkeypatch.setitem(il._COINS, "words", words)
    for seed, shape in [(1, (0,)), (2, (1,)), (3, (10, 1)), (4, (10, 1501)), (5, (3, 7)), (6, (40_001,))]:
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        g1.random(seed), g2.random(seed)
        want = g1.integers(0, 2, size=shape, dtype=np.int8)
        got = il.draw_coins(g2, shape)
        assert got.shape == want.shape and got.dtype == np.uint8
        np.testing.assert_array_equal(got, want)
        assert g1.bit_generator.state == g2.bit_generator.state
        assert g1.random() == g2.random()


# ----------------------------------------------------------------------------- SRM
def test_srm_values_bit_identical_to_the_stats_functions():
    from onlineeval.stats.srm import srm_chisquare, srm_impressions
    from simulations.srm import _srm_values

    rng = np.random.default_rng(17)
    for trial in range(400):
        pb = [0.5, 0.3, 0.1, 0.77, float(rng.uniform(0.01, 0.99))][trial % 5]
        n_a, n_b = (int(v) for v in rng.integers(0, 3000, 2))
        if trial % 11 == 0:
            n_b = 0
        m_a = rng.zipf(1.6, n_a).astype(np.float64)
        m_b = rng.zipf(1.6, n_b).astype(np.float64)
        got = _srm_values(n_a, n_b, m_a, m_b, pb)
        ref = {"users": srm_chisquare([n_a, n_b], [1 - pb, pb], alpha=0.001),
               "impressions": srm_impressions(m_a, m_b, pb, alpha=0.001),
               "impressions_naive": srm_chisquare([m_a.sum(), m_b.sum()], [1 - pb, pb], alpha=0.001)}
        for name, res in ref.items():
            want = (float(res.observed_share[..., 1]), float(res.pvalue))
            for g, w in zip(got[name], want, strict=True):
                assert type(g) is float
                assert np.float64(g).tobytes() == np.float64(w).tobytes() or (g != g and w != w), (trial, name, g, w)


def test_cdf_draw_equals_draw_from_cdf():
    """CdfDraw (bucket tables, compiled) gives draw_from_cdf's indices: Zipf and lognormal CDFs, zero-weight categories
    (repeated CDF values, at the start too), CDF values on bucket edges, one category, uniforms on the CDF's
    entries, on bucket edges, 0, 1 and above; its tables equal the binary searches' counts."""
    from simulations.sampling import draw_from_cdf
    from simulations.traffic import CdfDraw

    rng = np.random.default_rng(41)
    weights = [1.0 / np.arange(1, 3001), rng.lognormal(0, 1.2, 20_000), rng.lognormal(0, 3.0, 5000),
               np.array([0.0, 0.2, 0, 0.3, 0, 0.5, 0.0]), np.array([0.25, 0.25, 0, 0.125, 0.125, 0.25]),
               np.array([1.0]), np.where(rng.random(400) < 0.3, 0.0, rng.random(400))]
    for w in weights:
        cdf = np.cumsum(w / w.sum())
        draw = CdfDraw(cdf)
        m = int(draw.scale)
        edges = np.arange(m + 1) / draw.scale
        lo = np.searchsorted(cdf, edges[:-1], side="right")
        np.testing.assert_array_equal(draw.lo[:m], lo)
        np.testing.assert_array_equal(draw.width[:m], np.minimum(np.searchsorted(cdf, edges[1:], side="left") - lo, 2))
        u = rng.random(100_000)
        u[: min(cdf.size, 1000)] = cdf[:1000]
        u[1000:1100] = edges[rng.integers(0, m + 1, 100)]
        u[1100:1104] = 0.0, 1.0, 1.5, np.nextafter(1.0, 0.0)
        got = draw(u)  # the compiled loop
        assert got.dtype == np.intp
        np.testing.assert_array_equal(got, draw_from_cdf(cdf, u))
        assert draw(u[:0]).size == 0
        big = np.array([2.0, 1e300, np.inf])  # not drawn by rng.random: the last category, as draw_from_cdf
        np.testing.assert_array_equal(draw(big), draw_from_cdf(cdf, big))


def test_replicate_pauses_the_cyclic_collector_and_restores_it(monkeypatch):
    """run_replicate runs with the cyclic garbage collector paused and restores the caller's setting: on again
    after a replicate (also one that raises), still off when the caller had turned it off."""
    import gc

    from simulations import runner

    seen = []

    def fake_build(*args):
        seen.append(gc.isenabled())
        raise RuntimeError("stop")

    monkeypatch.setattr(runner, "build_replicate", fake_build)
    was = gc.isenabled()
    try:
        gc.enable()
        with pytest.raises(RuntimeError, match="stop"):
            runner.run_replicate(None, None, None, None, 0)
        assert seen == [False] and gc.isenabled()
        gc.disable()
        with pytest.raises(RuntimeError, match="stop"):
            runner.run_replicate(None, None, None, None, 0)
        assert seen == [False, False] and not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
