"""The simulator's lean checkpoint paths against the previous implementations, kept here as references.

- ``simulations.cuped.cuped_rows`` (arms gathered once per checkpoint by index, influence values and
  pooled correlations arm by arm) gives bit-identical rows to the mask-based version it replaced for
  ``test: welch``, on every daily checkpoint of simulated replicates (users without pre-period activity,
  unequal split, checkpoints still undefined); ``test: delta`` (one pass for the three metrics since round 4)
  is compared with the same reference to 1e-12 in ``test_simulation_ab_checkpoint.py``;
- ``onlineeval.stats.cuped.cuped_ratio_adjusted`` (the lean path) equals ``cuped_ratio(...).adjusted``
  bit for bit (typical data, no / all users with a pre-period, an arm without denominators, two users,
  a constant pre-period ratio);
- the designs' per-user sums added in place (``Design._add`` of counts, ``Design._add_exact`` of halves and
  counts) equal the previous bincount sums bit for bit;
- ``ratio_mean_values`` and ``ratio_diff_values`` (the lean paths of the A/B and interleaving checkpoints and
  per-batch looks) equal ``ratio_mean`` and ``ratio_diff`` bit for bit (halves, ratios, zero variance, two
  users, a non-zero null);
- ``DrawTable.outcome`` (the table-drawn interleaving designs' outcome without the InterleavingResult) equals
  the interleaver's outcome on lists with empty slots; whole replicates with the table path on and off are
  compared in ``test_simulation_point_speed.py``.
"""

from __future__ import annotations

import copy
import math
import zlib

import numpy as np
import pytest

from simulations.config import config_from_mapping
from simulations.cuped import CUPED_PREFIX, R_PREFIX, RHO_PREFIX, cuped_rows, pooled_correlations
from simulations.runner import build_replicate, replicate_seeds, world_seed
from simulations.users import UserModels
from simulations.world import build_world
from tests.test_simulation_point_speed import drive_batches

TYPES = [{"name": "navigational", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
         {"name": "informational", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]
BASE = {
    "seed": 5, "replicates": 2,
    "collection": {"n_queries": 80, "candidates": 10}, "rankers": {"depth": 4},
    "users": {"population": 900, "activity": {"sigma": 1.2}, "types": TYPES},
    "traffic": {"days": 4, "queries_per_day": 600, "batch_hours": 6},
    "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank", "share_b": 0.3,
                 "analysis": {"cuped": {"pre_days": 2}}}],
    "analysis": {"alpha": 0.05, "truth_impressions": 5000, "null": False, "aa": True},
}


# ----------------------------------------------------------------------------- references
def _influence_ref(num, den, in_b):
    out = np.zeros_like(num)
    for arm in (in_b, ~in_b):
        sy = den[arm].sum()
        if sy > 0:
            out[arm] = (num[arm] - num[arm].sum() / sy * den[arm]) / (sy / arm.sum())
    return out


def cuped_rows_ref(design, day):
    """simulations.cuped.cuped_rows before the lean path (commit 2f790da)."""
    pre = getattr(design, "pre_period", None)
    if pre is None:
        return []
    from onlineeval.stats.cuped import cuped_mean, cuped_ratio
    from simulations.designs.ab import METRICS
    from simulations.designs.base import CheckpointRow

    users = np.flatnonzero(design.sums["impressions"] > 0)
    sums = {k: v[users] for k, v in design.sums.items()}
    n_users, n_impr = int(users.size), int(design.sums["impressions"].sum())
    pre_den = pre.sums["impressions"][users]
    active = pre_den > 0
    n_pre = int(active.sum())
    defined = design._has_data(users, sums)
    rows = []
    for metric in design.metric_names():
        key = METRICS[metric]
        primary = metric == design.metric_names()[0]
        nan5 = (math.nan,) * 5
        if not defined:
            vals, r, rho = nan5, math.nan, math.nan
            df = math.nan if design.config.test == "welch" else math.inf
        else:
            b = design.in_b[users]
            a = ~b
            den, num = sums["impressions"], sums[key]
            pnum = pre.sums[key][users]
            if design.config.test == "welch":
                y = num / den
                x = np.where(active, pnum / np.where(active, pre_den, 1.0), 0.0)
                res = cuped_mean(y[a], x[a], y[b], x[b], pre_active_a=active[a], pre_active_b=active[b],
                                 alpha=design.alpha)
            else:
                res = cuped_ratio(num[a], den[a], num[b], den[b], pnum[a], pre_den[a], pnum[b], pre_den[b],
                                  alpha=design.alpha)
                y, x = _influence_ref(num, den, b), _influence_ref(pnum, pre_den, b)
            e = res.adjusted
            vals = (float(e.estimate), float(e.se), float(e.ci_low), float(e.ci_high), float(e.pvalue))
            df = float(e.df)  # welch: the Welch-type t's; delta: inf
            r, rho = pooled_correlations(y, x, active, b)
        rows.append(CheckpointRow(design.name, design.aa, day, CUPED_PREFIX + metric, primary, *vals, n_users, n_impr,
                                  df))
        rows.append(CheckpointRow(design.name, design.aa, day, R_PREFIX + metric, False, r, *nan5[:4], n_pre, n_impr))
        rows.append(CheckpointRow(design.name, design.aa, day, RHO_PREFIX + metric, False, rho, *nan5[:4], n_users,
                                  n_impr))
    return rows


# ----------------------------------------------------------------------------- helpers
def _same_rows(new, ref):
    """Row by row, every field equal (NaN equal to NaN, floats bit for bit)."""
    assert len(new) == len(ref) and len(ref) > 0
    for x, y in zip(new, ref, strict=True):
        for field in x.__dataclass_fields__:
            u, v = getattr(x, field), getattr(y, field)
            if isinstance(v, float):
                assert np.float64(u).tobytes() == np.float64(v).tobytes() or (math.isnan(u) and math.isnan(v)), \
                    (field, u, v)
            else:
                assert u == v, (field, u, v)


def _checkpoints(mapping, check, replicates=2):
    """Run ``replicates`` replicates batch by batch and call ``check(design, day)`` for every design at
    every day's end (before the design's own checkpoint); returns the number of checks."""
    config = config_from_mapping(mapping)
    world = build_world(config, world_seed(config.seed))
    users = UserModels.from_config(config.users)
    n = 0
    for seq in replicate_seeds(config.seed, replicates):
        traffic, designs = build_replicate(config, world, users, seq)

        def day_end(day, designs=designs):
            nonlocal n
            for d in designs:
                n += check(d, day)

        drive_batches(traffic, designs, day_end)
    return n


# ----------------------------------------------------------------------------- tests
@pytest.mark.parametrize("test", ["welch"])  # delta: test_simulation_ab_checkpoint.py (to 1e-12)
def test_cuped_rows_bit_identical_to_the_reference(test):
    cfg = copy.deepcopy(BASE)
    cfg["designs"][0]["test"] = test
    seen = {"defined": 0, "undefined": 0, "missing_pre": 0}

    def check(design, day):
        if design.kind != "ab":
            return 0
        new, ref = cuped_rows(design, day), cuped_rows_ref(design, day)
        _same_rows(new, ref)
        seen["defined" if math.isfinite(ref[0].estimate) else "undefined"] += 1
        seen["missing_pre"] += ref[1].n_users < ref[0].n_users
        return 1

    assert _checkpoints(cfg, check) == 2 * 2 * 4  # replicates x (experiment, A/A) x days
    assert seen["defined"] > 0 and seen["missing_pre"] > 0
    # a sparse start: the first checkpoints are undefined (fewer than two users in an arm)
    sparse = copy.deepcopy(cfg)
    sparse["traffic"] = {"days": 2, "queries_per_day": 3, "batch_hours": 24}
    assert _checkpoints(sparse, check) == 2 * 2 * 2
    assert seen["undefined"] > 0


def _bits(x):
    return np.float64(x).tobytes()


@pytest.mark.parametrize("case", ["typical", "no_pre_period", "all_pre_period", "empty_arm_den", "two_users",
                                  "constant_pre"])
def test_cuped_ratio_adjusted_bit_identical_to_cuped_ratio(case):
    from onlineeval.stats.cuped import cuped_ratio, cuped_ratio_adjusted

    rng = np.random.default_rng(zlib.crc32(case.encode()))
    for _ in range(20):
        na, nb = (2, 2) if case == "two_users" else tuple(int(v) for v in rng.integers(3, 3000, size=2))
        arrays = []
        for n in (na, nb):
            den = rng.poisson(2.0, n).astype(np.float64) + (0.0 if case == "empty_arm_den" else 1.0)
            if case == "empty_arm_den" and n == nb:
                den[:] = 0.0
            num = rng.binomial(den.astype(np.int64), 0.3) * rng.random(n)  # non-integer numerators, like rr
            pre_den = rng.poisson(1.0, n).astype(np.float64)
            if case == "no_pre_period":
                pre_den[:] = 0.0
            elif case == "all_pre_period":
                pre_den += 1.0
            pre_num = rng.binomial(pre_den.astype(np.int64), 0.4).astype(np.float64)
            if case == "constant_pre":
                pre_num = pre_den * 0.25
            arrays.append((num, den, pre_num, pre_den))
        (xa, ya, pxa, pya), (xb, yb, pxb, pyb) = arrays
        args = (xa, ya, xb, yb, pxa, pya, pxb, pyb)
        ref = cuped_ratio(*args, alpha=0.1).adjusted
        new = cuped_ratio_adjusted(*args, alpha=0.1)
        want = [float(getattr(ref, k)) for k in ("estimate", "se", "ci_low", "ci_high", "pvalue")]
        assert [_bits(v) for v in new] == [_bits(v) for v in want], (case, new, want)
        if case == "empty_arm_den":
            assert all(math.isnan(v) for v in new)


def test_per_user_sums_in_place_equal_the_bincount():
    """Design._add without weights and Design._add_exact (in place, impression by impression) give the
    bits of the previous ``sums += bincount(user, weights, minlength)``, batch after batch."""
    from types import SimpleNamespace

    from simulations.designs.base import Design

    rng = np.random.default_rng(3)
    population = 500
    obj = SimpleNamespace(population=population, sums={k: np.zeros(population) for k in ("n", "half", "count")})
    ref = {k: np.zeros(population) for k in obj.sums}
    for _ in range(200):
        n = int(rng.integers(0, 3000))
        user = rng.zipf(1.3, n) % population  # heavy users: long running sums
        half = rng.integers(-1, 2, n) / 2.0
        count = rng.integers(0, 11, n).astype(np.float64)
        Design._add(obj, "n", user, None)
        Design._add_exact(obj, "half", user, half)
        Design._add_exact(obj, "count", user, count)
        ref["n"] += np.bincount(user, minlength=population)
        ref["half"] += np.bincount(user, weights=half, minlength=population)
        ref["count"] += np.bincount(user, weights=count, minlength=population)
    for k, v in ref.items():
        assert obj.sums[k].tobytes() == v.tobytes(), k
    assert ref["n"].max() > 1000 and (ref["half"] != 0).any()


@pytest.mark.parametrize("case", ["halves", "ratios", "zero_variance", "two_users", "null_shift"])
def test_ratio_values_bit_identical_to_ratio_mean_and_diff(case):
    from onlineeval.stats.online import ratio_diff, ratio_diff_values, ratio_mean, ratio_mean_values

    rng = np.random.default_rng(zlib.crc32(case.encode()))
    null = 0.05 if case == "null_shift" else 0.0
    fields = ("estimate", "se", "ci_low", "ci_high", "pvalue")
    for _ in range(30):
        n_a, n_b = (2, 2) if case == "two_users" else tuple(int(v) for v in rng.integers(3, 5000, size=2))
        arms = []
        for n in (n_a, n_b):
            den = rng.poisson(1.5, n).astype(np.float64)
            den[0] += 1.0  # a positive sum
            if case == "halves":
                num = rng.integers(-1, 2, n) * np.minimum(den, 1.0) / 2.0  # interleaving's (w - l) / 2
            elif case == "zero_variance":
                num = 0.25 * den  # every user has the same ratio: se 0
            else:
                num = rng.binomial(den.astype(np.int64), 0.4) * rng.random(n)
            arms.append((num, den))
        (xa, ya), (xb, yb) = arms
        pairs = [(ratio_mean_values(xa, ya, 0.1, null=null), ratio_mean(xa, ya, 0.1, null=null)),
                 (ratio_diff_values(xa, ya, xb, yb, 0.1, null=null), ratio_diff(xa, ya, xb, yb, 0.1, null=null))]
        for new, ref in pairs:
            want = [float(getattr(ref, k)) for k in fields]
            assert [_bits(v) for v in new] == [_bits(v) for v in want], (case, new, want)


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("length", [10, 7, 1, 18])
def test_table_outcome_equals_the_interleaver(method, length):
    """DrawTable.outcome (team-draft: the signed team table; balanced: the ranks, filled slots from the table)
    equals interleaver.outcome on the drawn lists, short lists and clicks on empty slots included; draw_keys
    makes the draws of draw()."""
    from test_simulation_point_speed import lists_with_edge_cases

    from onlineeval.interleaving import get_interleaver
    from simulations.designs.interleaving import DrawTable

    rng = np.random.default_rng(8)
    a, b, labels = lists_with_edge_cases(rng, depth=max(10, length + 2), docs=max(14, length + 6))
    interleaver = get_interleaver(method)
    table = DrawTable(method, np.stack([a, b]), labels, length)
    assert length == 1 or table.valid is not None  # the edge cases have empty slots (beyond slot 1)
    for seed, n in [(1, 1), (2, 1500), (5, 20_000)]:
        q = np.random.default_rng(seed + 100).integers(0, a.shape[0], n)
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        shown, _, key = table.draw(q, g1)
        np.testing.assert_array_equal(table.draw_keys(q, g2), key)
        assert g1.bit_generator.state == g2.bit_generator.state
        for rate in (0.05, 0.3, 0.9):
            clicks = np.random.default_rng(seed).random(shown.ranking.shape) < rate
            expected = interleaver.outcome(shown, clicks)
            got = table.outcome(key, clicks)
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)
            assert n < 100 or 0 < np.count_nonzero(got) < n
