"""The A/B daily checkpoint in one pass (issue 12, round 4) against the implementations it replaced.

- ``onlineeval.stats.cuped._cuped_ratio_stacked`` / ``_ratio_diff_stacked`` (the three metrics of a checkpoint
  in one pass over each arm's users): the unadjusted estimates equal ``ratio_diff_values`` bit for bit; the
  CUPED estimates agree with ``cuped_ratio(...).adjusted`` and the pooled cross-products' correlations with
  ``simulations.cuped.pooled_correlations`` to 1e-12 relative (1e-15 absolute near zero, in the data's units),
  on random data and ill-conditioned cases: constant pre-period ratios, no / every user with a pre-period, an
  arm without pre-period data, one and two users per arm, values scaled by 1e60 and 1e-60, an experiment
  value equal or close to its pre-period value (R^2 -> 1: the adjusted sum of squares from the residuals);
- an A/B design's checkpoint rows (``test: delta``): the estimates and SRM rows equal those of
  ``Design.checkpoint`` and the stats functions bit for bit, the CUPED rows the previous code's
  (``cuped_rows_ref`` of ``test_simulation_checkpoint_fastpaths.py``) to 1e-12, on simulated replicates.
"""

from __future__ import annotations

import copy
import math
import warnings
import zlib

import numpy as np
import pytest

from onlineeval.stats.cuped import _cuped_ratio_stacked, _ratio_diff_stacked, cuped_ratio, cuped_ratio_adjusted
from onlineeval.stats.online import ratio_diff, ratio_diff_values
from simulations.cuped import CUPED_PREFIX, _correlations_many, pooled_correlations
from test_simulation_checkpoint_fastpaths import BASE, _checkpoints, _influence_ref, cuped_rows_ref

RTOL, ATOL = 1e-12, 1e-15
FIELDS = ("estimate", "se", "ci_low", "ci_high", "pvalue")
CASES = ["typical", "no_pre_period", "all_pre_period", "constant_pre", "constant_pre_inexact", "arm_without_pre",
         "two_users", "one_user", "huge", "tiny", "pre_equals_experiment", "pre_almost_experiment", "empty_arm_den",
         "integers"]


def _close(got, want, scale, what):
    """``got`` within RTOL of ``want`` or within ATOL x ``scale`` (NaN only where ``want`` is NaN)."""
    if math.isnan(want):
        assert math.isnan(got), (what, got, want)
        return
    if math.isinf(want):  # (a z row's degrees of freedom)
        assert got == want, (what, got, want)
        return
    assert abs(got - want) <= RTOL * abs(want) + ATOL * scale, (what, got, want, abs(got - want))


def _bits(x):
    return np.float64(x).tobytes()


def _arm(rng, n, case, k=3):
    """``(num (k, n), den, pre_num (k, n), pre_den)`` of one arm, and the factor the numerators were scaled by."""
    den = rng.poisson(2.0, n).astype(np.float64) + 1.0
    pre_den = rng.poisson(1.5, n).astype(np.float64)
    if case == "no_pre_period":
        pre_den[:] = 0.0
    elif case in ("all_pre_period", "pre_equals_experiment", "pre_almost_experiment"):
        pre_den += 1.0
    num = np.stack([rng.binomial(den.astype(np.int64), p) * (1.0 if j % 2 == 0 else rng.random(n))
                    for j, p in enumerate((0.4, 0.3, 0.6, 0.2)[:k])])
    pre_num = np.stack([rng.binomial(pre_den.astype(np.int64), p) * (1.0 if j % 2 == 0 else rng.random(n))
                        for j, p in enumerate((0.5, 0.25, 0.7, 0.3)[:k])])
    scale = 1.0
    if case == "constant_pre":
        pre_num = np.stack([pre_den * c for c in (0.25, 0.5, 0.125)[:k]])  # dyadic: f exactly 0
    elif case == "constant_pre_inexact":
        pre_num = np.stack([pre_den * c for c in (0.3, 0.7, 0.1)[:k]])  # f = rounding noise in both implementations
    elif case == "pre_equals_experiment":
        pre_num, pre_den = num.copy(), den.copy()  # e == f: the adjusted residual is 0 up to rounding
    elif case == "pre_almost_experiment":
        pre_num, pre_den = num + 0.1 * rng.random((k, n)), den.copy()  # R^2 ~ 0.995: the residuals path
    elif case == "integers":
        num, pre_num = np.floor(num * 3), np.floor(pre_num * 3)
    elif case in ("huge", "tiny"):
        scale = 1e60 if case == "huge" else 1e-60  # squares and products of squares stay finite and normal
        num, pre_num = num * scale, pre_num * scale
    if case == "empty_arm_den":
        den[:] = 0.0
        num[:] = 0.0
    return np.ascontiguousarray(num), den, np.ascontiguousarray(pre_num), pre_den, scale


def _data(case, rng, k=3):
    if case == "one_user":
        na, nb = 1, 1
    elif case == "two_users":
        na, nb = 2, 2
    else:
        na, nb = (int(v) for v in rng.integers(3, 4000, size=2))
    a = _arm(rng, na, case, k)
    b = _arm(rng, nb, "typical" if case == "empty_arm_den" else case, k)
    if case == "arm_without_pre":
        b = (b[0], b[1], np.zeros_like(b[2]), np.zeros_like(b[3]), b[4])
    return a, b


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("k", [1, 3])
def test_unadjusted_bit_identical_to_ratio_diff_values(case, k):
    rng = np.random.default_rng(zlib.crc32(f"{case}:{k}".encode()))
    for _ in range(15):
        (xa, ya, pa, qa, _), (xb, yb, pb, qb, _) = _data(case, rng, k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # one user: 0 / 0, as ratio_diff_values
            got = _ratio_diff_stacked(xa, ya, xb, yb, alpha=0.1)
            stacked, _, _, _ = _cuped_ratio_stacked(xa, ya, xb, yb, pa, qa, pb, qb, alpha=0.1)
            want = [ratio_diff_values(xa[m].copy(), ya, xb[m].copy(), yb, alpha=0.1) for m in range(k)]
        for m in range(k):
            assert [_bits(v) for v in got[m]] == [_bits(v) for v in want[m]], (case, m, got[m], want[m])
            assert [_bits(v) for v in stacked[m]] == [_bits(v) for v in want[m]], (case, m)
        if case not in ("one_user", "empty_arm_den"):  # and the public function's numbers
            ref = ratio_diff(xa[0], ya, xb[0], yb, alpha=0.1)
            assert [_bits(v) for v in got[0]] == [_bits(float(getattr(ref, f))) for f in FIELDS]


@pytest.mark.parametrize("case", CASES)
def test_cuped_and_correlations_agree_with_the_previous_functions(case):
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    seen_fallback = 0
    for trial in range(15):
        (xa, ya, pa, qa, sa), (xb, yb, pb, qb, sb) = _data(case, rng)
        scale = max(sa, sb)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            _, adjusted, pooled, n_active = _cuped_ratio_stacked(xa, ya, xb, yb, pa, qa, pb, qb, alpha=0.05)
            corr = _correlations_many(pooled)
            for m in range(3):
                args = (xa[m], ya, xb[m], yb, pa[m], qa, pb[m], qb)
                if case == "one_user":  # cuped_ratio needs two users; its lean path has its arithmetic (tested)
                    ref = cuped_ratio_adjusted(*args, alpha=0.05)
                else:
                    ref = cuped_ratio(*args, alpha=0.05).adjusted
                for f, got in zip(FIELDS, adjusted[m], strict=True):
                    want = float(getattr(ref, f))
                    _close(got, want, 1.0 if f == "pvalue" else scale, (case, trial, m, f))
                if case in ("one_user", "empty_arm_den"):
                    assert math.isnan(adjusted[m][1])  # no variance (and no estimate without denominators)
                    continue
                # the correlations of the influence values, as cuped_rows computed them before
                num, den = np.concatenate([xa[m], xb[m]]), np.concatenate([ya, yb])
                pnum, pden = np.concatenate([pa[m], pb[m]]), np.concatenate([qa, qb])
                in_b = np.arange(den.size) >= xa.shape[1]
                if case == "constant_pre_inexact":  # f is rounding noise: it drops out (as f = 0 would)
                    pnum = 0 * pnum
                r, rho = pooled_correlations(_influence_ref(num, den, in_b), _influence_ref(pnum, pden, in_b),
                                             pden > 0, in_b)
                _close(corr[m][0], r, 1.0, (case, trial, m, "R"))
                _close(corr[m][1], rho, 1.0, (case, trial, m, "rho"))
                seen_fallback += pooled[m][0][0] > 0 and r > math.sqrt(0.9)
        assert n_active == int((qa > 0).sum() + (qb > 0).sum())
    if case in ("pre_equals_experiment", "pre_almost_experiment"):
        assert seen_fallback > 0  # the residuals path (R^2 > 0.9) was taken


def _rows_close(new, ref):
    """Row by row: the same labels and counts, the numbers within RTOL / ATOL (NaN where NaN)."""
    assert len(new) == len(ref) and len(ref) > 0
    for x, y in zip(new, ref, strict=True):
        for field in x.__dataclass_fields__:
            u, v = getattr(x, field), getattr(y, field)
            if isinstance(v, float):
                _close(u, v, 1.0, (x.metric, field))
            else:
                assert u == v, (field, u, v)


@pytest.mark.parametrize("share_b", [0.5, 0.3])
def test_checkpoint_rows_against_the_previous_code(share_b, monkeypatch):
    from simulations import stat_kernels
    from simulations.designs.base import Design
    from simulations.srm import SRM_CHECKS, _srm_values

    # the NumPy path, bit for bit (the compiled kernels agree with it to 1e-12: tests/test_stat_kernels.py)
    monkeypatch.setattr(stat_kernels, "COMPILED", False)

    cfg = copy.deepcopy(BASE)
    cfg["designs"][0]["share_b"] = share_b
    seen = {"defined": 0, "undefined": 0}

    def check(design, day):
        if design.kind != "ab":
            return 0
        before = len(design.rows)
        design.checkpoint(day)
        new = design.rows[before:]
        del design.rows[before:]
        # the previous code: Design.checkpoint (ratio_diff_values per metric), the SRM values of the arms'
        # impressions taken one by one, cuped_rows before the lean paths
        Design.checkpoint(design, day)
        ref = design.rows[before:]
        del design.rows[before:]
        n_names = len(design.metric_names())
        for x, y in zip(new[:n_names], ref, strict=True):
            assert x.metric == y.metric and x.primary == y.primary and (x.n_users, x.n_impressions) == \
                (y.n_users, y.n_impressions)
            assert [_bits(getattr(x, f)) for f in FIELDS] == [_bits(getattr(y, f)) for f in FIELDS], x.metric
        users = np.flatnonzero(design.sums["impressions"] > 0)
        b = design.in_b[users]
        imp = design.sums["impressions"][users]
        tests = _srm_values(int((~b).sum()), int(b.sum()), imp[~b], imp[b], design.config.share_b)
        srm = new[n_names:n_names + len(SRM_CHECKS)]
        assert [(r.estimate, r.pvalue) for r in srm] == [tests[name] for name in SRM_CHECKS]
        cup = new[n_names + len(SRM_CHECKS):]
        assert cup[0].metric == CUPED_PREFIX + design.metric_names()[0]
        _rows_close(cup, cuped_rows_ref(design, day))
        seen["defined" if math.isfinite(ref[0].estimate) else "undefined"] += 1
        return 1

    assert _checkpoints(cfg, check) == 2 * 2 * 4
    sparse = copy.deepcopy(cfg)
    sparse["traffic"] = {"days": 2, "queries_per_day": 3, "batch_hours": 24}
    assert _checkpoints(sparse, check) == 2 * 2 * 2
    assert seen["defined"] > 0 and seen["undefined"] > 0


def _cuped_extended(xa, ya, xb, yb, pa, qa, pb, qb):
    """``(estimate, se, unadjusted se)`` of ``cuped_ratio`` computed in extended precision (np.longdouble, 64-bit
    significand on x86), every user with pre-period activity (no indicator term)."""
    ext = np.longdouble
    arms = []
    for x, y, p, q in ((xa, ya, pa, qa), (xb, yb, pb, qb)):
        x, y, p, q = (np.asarray(v, dtype=ext) for v in (x, y, p, q))
        n = x.size
        r, pr = x.sum() / y.sum(), p.sum() / q.sum()
        e, f = (x - r * y) / (y.sum() / n), (p - pr * q) / (q.sum() / n)
        arms.append((n, r, pr, e - e.mean(), f - f.mean()))
    theta = sum((f * e).sum() for *_, e, f in arms) / sum((f * f).sum() for *_, e, f in arms)
    (_, ra, pra, _, _), (_, rb, prb, _, _) = arms
    est = (rb - ra) - theta * (prb - pra)
    var = sum(((e - theta * f) ** 2).sum() / ((n - 1) * n) for n, _, _, e, f in arms)
    raw = sum((e * e).sum() / ((n - 1) * n) for n, _, _, e, _ in arms)
    return float(est), float(np.sqrt(var)), float(np.sqrt(raw))


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs an extended-precision long double")
@pytest.mark.parametrize("noise", [1e-3, 1e-5])
def test_near_collinear_cuped_as_accurate_as_the_previous_function(noise):
    """An experiment value within ``noise`` of its pre-period value: 1 - R^2 ~ 1e-6 / 1e-10, so the adjusted SE is
    1e3 / 1e5 times smaller than the unadjusted one (kappa) and any float64 computation of it loses about
    log10(kappa) digits; the previous function and the one-pass path are then both within 1e-15 kappa of the
    extended-precision value (and the estimates within 1e-13 unadjusted SE), rather than 1e-12 of each other."""
    rng = np.random.default_rng(int(-math.log10(noise)))
    for _ in range(8):
        arms = []
        for n in (int(v) for v in rng.integers(50, 4000, size=2)):
            den = rng.poisson(2.0, n) + 1.0
            num = rng.binomial(den.astype(np.int64), 0.3) * rng.random(n)
            arms.append((num, den, num + noise * rng.random(n), den.copy()))
        (xa, ya, pa, qa), (xb, yb, pb, qb) = arms
        old = cuped_ratio(xa, ya, xb, yb, pa, qa, pb, qb).adjusted
        _, new, _, _ = _cuped_ratio_stacked(xa[None], ya, xb[None], yb, pa[None], qa, pb[None], qb)
        est, se, raw = _cuped_extended(xa, ya, xb, yb, pa, qa, pb, qb)
        kappa = raw / se
        assert kappa > 0.3 / noise
        for got_est, got_se in ((new[0][0], new[0][1]), (float(old.estimate), float(old.se))):
            assert abs(got_est - est) <= 1e-13 * raw
            assert abs(got_se - se) <= 1e-15 * kappa * se


def test_checkpoint_stats_read_the_sums_when_they_are_not_the_blocks_rows():
    """A design whose per-user sums were replaced (or deep-copied: the views lose their block) stacks them."""
    from simulations.cuped import PrePeriod

    cfg = copy.deepcopy(BASE)
    rows = {}

    def check(design, day):
        if design.kind != "ab" or design.aa or day != 2:
            return 0
        design._arms = design._stats = None
        rows["block"] = design.checkpoint_stats()
        twin = copy.deepcopy(design)
        assert twin.sums["clicks"].base is not twin._block
        twin._block[:] = 0.0  # stale: must not be read
        twin.pre_period = PrePeriod(design.pre_period.days, dict(design.pre_period.sums))  # no block either
        twin._arms = twin._stats = None
        rows["copy"] = twin.checkpoint_stats()
        return 1

    assert _checkpoints(cfg, check, replicates=1) == 1
    a, b = rows["block"], rows["copy"]
    assert (a.n_a, a.n_b, a.n_impressions, a.n_pre) == (b.n_a, b.n_b, b.n_impressions, b.n_pre) and a.n_pre > 0
    assert a.unadjusted == b.unadjusted and a.adjusted == b.adjusted and a.pooled == b.pooled
    np.testing.assert_array_equal(a.impressions_a, b.impressions_a)
