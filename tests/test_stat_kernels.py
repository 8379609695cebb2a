"""The compiled checkpoint statistics (simulations.stat_kernels, issue 12) against the NumPy path they replace.

- the kernels' sums against math.fsum: within their error bound and no less accurate than NumPy's sums;
- ratio_active (an interleaving design's checkpoint and per-batch look) against ratio_mean_values of the active
  users' sums: estimate, SE, interval ends and p-value to 1e-12 relative (1e-15 absolute near 0, in the data's
  units) on realistic and adversarial inputs (two users, all-zero numerators, huge offsets, integer sums, 100k
  users, a zero denominator sum -> NaN), and where float64 cannot give 1e-12 (huge offsets with varying
  denominators) no further from the exact value (fractions) than NumPy;
- ab_arms (the A/B checkpoint) against _cuped_ratio_stacked / _ratio_diff_stacked of each arm's users, on the
  cases of test_simulation_ab_checkpoint.py spread over a population with inactive users;
- whole replicates of an ab.yaml-like config (A/B with CUPED, Holm, mSPRT looked at per batch; team-draft per
  batch; balanced; a multileaving matrix) row by row to 1e-12 with identical decisions against the NumPy path
  (COMPILED off by a monkeypatch);
- NUMBA_DISABLE_JIT=1 gives the compiled run's bits; the module is a task module.
"""

from __future__ import annotations

import math
import warnings
import zlib
from fractions import Fraction

import numpy as np
import pytest

from onlineeval.stats.cuped import _cuped_from_arms, _cuped_ratio_stacked, _ratio_diff_from_arms, _ratio_diff_stacked
from onlineeval.stats.online import _z_values, ratio_mean_values
from simulations import stat_kernels as sk
from simulations.cuped import _correlations_many
from test_simulation_ab_checkpoint import CASES, FIELDS, _close, _data

RTOL, ATOL = 1e-12, 1e-15
EPS = np.finfo(np.float64).eps


# ----------------------------------------------------------------------------- sums
@pytest.mark.parametrize("kind", ["uniform", "cancelling", "wide_range", "offset"])
def test_sums_within_their_bound_and_no_worse_than_numpy(kind):
    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    worse = 0
    for n in (1, 2, 15, 16, 17, 33, 1000, 20011):
        for _ in range(5):
            if kind == "uniform":
                x = rng.random(n)
            elif kind == "cancelling":
                x = rng.standard_normal(n) * 1e6
                x = np.concatenate([x, -x[::-1] * (1 + 1e-9)])[:n]
            elif kind == "wide_range":
                x = rng.standard_normal(n) * 10.0 ** rng.integers(-12, 12, n)
            else:
                x = 1e9 + rng.random(n)
            exact = math.fsum(x)
            users = np.arange(n)
            got = sk._gather(x, users, np.empty(n), n)
            bound = 16 * EPS * np.abs(x).sum() + 2 * EPS * abs(exact)
            assert abs(got - exact) <= bound, (n, got, exact)
            worse += abs(got - exact) > abs(float(x.sum()) - exact) + 2 * EPS * abs(exact)
            sq = sk._residual_ss(x, n)
            exact_sq = math.fsum(x * x)  # of the rounded products: the summation's error
            assert abs(sq - exact_sq) <= 18 * EPS * exact_sq, (n, sq, exact_sq)
    assert worse <= 2  # compensated sums of the blocks: as accurate as NumPy's pairwise sums or better


# ----------------------------------------------------------------------------- interleaving: ratio_active
def _population(rng, num, den, inactive):
    """The active users' ``num``, ``den`` spread over a population with ``inactive`` users (all sums 0) in
    between; returns ``(num, den, impressions, positions)``."""
    n = num.size
    pos = np.sort(rng.choice(n + inactive, size=n, replace=False))
    pnum, pden, imp = (np.zeros(n + inactive) for _ in range(3))
    pnum[pos], pden[pos] = num, den
    imp[pos] = den + rng.integers(1, 3, n)  # impressions >= the compared ones, >= 1
    return pnum, pden, imp, pos


def _ratio_case(case, rng):
    n = {"two_users": 2, "hundred_k": 100_000}.get(case, int(rng.integers(3, 20000)))
    den = rng.poisson(1.5, n).astype(np.float64)
    num = (rng.integers(-2, 3, n) / 2.0) * np.minimum(den, 1.0)
    if case == "zero_numerators":
        num[:] = 0.0
    elif case == "zero_denominators":
        num[:] = 0.0
        den[:] = 0.0
    elif case == "offset":  # 1e9 + small noise per unit of a constant denominator
        den[:] = 1.0
        num = 1e9 + rng.random(n)
    elif case == "integers":
        num = rng.integers(-50, 50, n).astype(np.float64)
        den = rng.integers(0, 60, n).astype(np.float64)
    elif case == "continuous":
        num, den = rng.random(n) * 3.7, rng.random(n) * 2.1
    return num, den


def _values(r, var):
    return _z_values(r, math.sqrt(var) if not math.isnan(var) else math.nan, 0.0, 0.05)


@pytest.mark.parametrize("case", ["realistic", "two_users", "zero_numerators", "zero_denominators", "offset",
                                  "integers", "continuous", "hundred_k"])
def test_ratio_active_agrees_with_ratio_mean_values(case):
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    for trial in range(6 if case != "hundred_k" else 2):
        num, den = _ratio_case(case, rng)
        pnum, pden, imp, pos = _population(rng, num, den, int(rng.integers(0, 3 * num.size + 1)))
        scratch = sk.Scratch(pnum.size)
        n_users, n_impr, sy, r, var = sk.ratio_mean_population(pnum, pden, imp, scratch)
        assert (n_users, n_impr) == (num.size, int(imp.sum()))
        np.testing.assert_array_equal(scratch.idx[0, :n_users], pos)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the zero denominators' 0 / 0
            want = ratio_mean_values(num.copy(), den.copy())
        got = _values(r, var)
        if case == "zero_denominators":
            assert sy == 0.0 and all(math.isnan(v) for v in got) and all(math.isnan(v) for v in want)
            continue
        scale = 1e9 if case == "offset" else 1.0
        for f, g, w in zip(FIELDS, got, want, strict=True):
            _close(g, w, 1.0 if f == "pvalue" else scale, (case, trial, f))


def _exact_delta(num, den):
    """``(R, variance)`` of the delta method in exact rational arithmetic (then rounded)."""
    x, y = [Fraction(v) for v in num], [Fraction(v) for v in den]
    n = len(x)
    r = sum(x) / sum(y)
    e = [a - r * b for a, b in zip(x, y, strict=True)]
    m = sum(e) / n
    ybar = sum(y) / n
    return float(r), float(sum((v - m) ** 2 for v in e) / ((n - 1) * n * ybar * ybar))


def test_ill_conditioned_ratio_no_further_from_the_exact_value_than_numpy():
    """Numerators 1e9 x the denominator + noise with varying denominators: an ulp of R moves every linearised
    value by ulp x (y - ybar), so float64 gets the variance only to about 1e-8 whatever the summation; the
    kernel's ratio and variance are then no further from the exact ones than NumPy's."""
    rng = np.random.default_rng(11)
    seen_hard = 0
    for _ in range(6):
        n = int(rng.integers(200, 1500))
        den = rng.integers(1, 6, n).astype(np.float64)
        num = 1e9 * den + rng.random(n)
        pnum, pden, imp, _ = _population(rng, num, den, n)
        _, _, _, r, var = sk.ratio_mean_population(pnum, pden, imp, sk.Scratch(pnum.size))
        from onlineeval.stats.online import _delta_1d

        r_np, var_np = _delta_1d(num, den)
        r_ex, var_ex = _exact_delta(num, den)
        assert abs(r - r_ex) <= max(abs(r_np - r_ex), 2 * EPS * abs(r_ex))
        assert abs(var - var_ex) <= max(abs(var_np - var_ex), 1e-12 * var_ex)
        seen_hard += abs(var_np - var_ex) > 1e-12 * var_ex
    assert seen_hard > 0  # the case is one where 1e-12 agreement is out of reach of float64


# ----------------------------------------------------------------------------- A/B: ab_arms
def _ab_population(rng, a, b, inactive):
    """Arms A and B (``(num (k, n), den, pre_num, pre_den)``) spread over a population with inactive users (no
    impressions, but pre-period sums: the kernel must leave them out)."""
    (xa, ya, pa, qa), (xb, yb, pb, qb) = a, b
    na, nb = ya.size, yb.size
    p = na + nb + inactive
    perm = rng.permutation(p)
    pos_a, pos_b = np.sort(perm[:na]), np.sort(perm[na:na + nb])
    k = xa.shape[0]
    den, nums = np.zeros(p), np.zeros((k, p))
    pre = np.zeros((1 + k, p))
    pre[0] = rng.poisson(1.0, p)
    pre[1:] = rng.random((k, p)) * pre[0]
    in_b = np.zeros(p, dtype=bool)
    in_b[pos_b] = True
    in_b[perm[na + nb:]] = rng.random(inactive) < 0.5
    for pos, x, y, px, py in ((pos_a, xa, ya, pa, qa), (pos_b, xb, yb, pb, qb)):
        den[pos], nums[:, pos], pre[0, pos], pre[1:, pos] = y, x, py, px
    return den, nums, pre, in_b, pos_a, pos_b


def _magnitudes(arms, m):
    """The pooled rows' uncentred magnitudes ``sqrt(sum (x / ybar)^2)``, ``sqrt(sum (p / qbar)^2)``, ``sqrt(n)`` over
    both arms: the units of the rounding noise of a cross-product of centred values (0 in exact arithmetic: the
    constant pre-period ratios' f, off-diagonal products)."""
    e = f = a = 0.0
    for x, y, p, q in arms:
        e += float(((x[m] / (y.sum() / y.size)) ** 2).sum())
        f += float(((p[m] / (q.sum() / q.size if q.sum() > 0 else 1.0)) ** 2).sum())
        a += y.size
    return [math.sqrt(e), math.sqrt(f), math.sqrt(a)]


def _pooled_close(got, want, units, what):
    """The 3 x 3 pooled cross-products: within RTOL, or 1e-12 of the rows' magnitudes (:func:`_magnitudes`; NumPy's
    einsum adds n products in one pass, an error up to n eps of them)."""
    for i in range(3):
        for j in range(3):
            assert abs(got[i][j] - want[i][j]) <= RTOL * (abs(want[i][j]) + units[i] * units[j]), (what, i, j)


@pytest.mark.parametrize("case", [c for c in CASES if c != "empty_arm_den"])
def test_ab_arms_agree_with_the_numpy_path(case):
    rng = np.random.default_rng(zlib.crc32(f"kernel:{case}".encode()))
    calls = {"residual": 0}
    noise = 0
    for trial in range(8):
        (xa, ya, pa, qa, sa), (xb, yb, pb, qb, sb) = _data(case, rng)
        scale = max(sa, sb)
        den, nums, pre, in_b, pos_a, pos_b = _ab_population(rng, (xa, ya, pa, qa), (xb, yb, pb, qb),
                                                            int(rng.integers(0, 2000)))
        scratch = sk.Scratch(den.size)
        for with_pre in (False, True):
            arms, users_a, users_b, residual = sk.ab_arm_parts(den, nums, in_b, pre if with_pre else None, scratch)
            np.testing.assert_array_equal(users_a, pos_a)
            np.testing.assert_array_equal(users_b, pos_b)
            if case == "one_user":
                assert arms == [None, None]
                continue

            def counted(*args, _residual=residual):
                calls["residual"] += 1
                return _residual(*args)

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                if not with_pre:
                    got = _ratio_diff_from_arms(arms[0], arms[1], 0.05)
                    want = _ratio_diff_stacked(xa, ya, xb, yb)
                    pairs = [(got, want)]
                else:
                    g_unadj, g_adj, g_pool, g_act = _cuped_from_arms(arms[0], arms[1], 0.05, 0.0, counted)
                    w_unadj, w_adj, w_pool, w_act = _cuped_ratio_stacked(xa, ya, xb, yb, pa, qa, pb, qb)
                    assert g_act == w_act
                    pairs = [(g_unadj, w_unadj)]
                    # f-free reference: the pre-period numerators 0 (f exactly 0, the same indicator)
                    free = _cuped_ratio_stacked(xa, ya, xb, yb, 0 * pa, qa, 0 * pb, qb)[1]
                    for m, ((gr, grho), (wr, wrho)) in enumerate(zip(_correlations_many(g_pool),
                                                                     _correlations_many(w_pool), strict=True)):
                        units = _magnitudes([(xa, ya, pa, qa), (xb, yb, pb, qb)], m)
                        _pooled_close(g_pool[m], w_pool[m], units, (case, trial, m))
                        _close(gr, wr, 1.0, (case, trial, "R"))
                        _close(grho, wrho, 1.0, (case, trial, "rho"))
                        if case == "constant_pre_inexact":
                            # f is rounding noise (constant pre-period ratios that are not dyadic): below the noise
                            # floor it drops out in both paths, which then give the f-free reference's numbers
                            assert g_pool[m][1][1] == w_pool[m][1][1] == 0.0 and grho == wrho == 0.0
                            noise += 1
                            for f, w, v in zip(FIELDS, w_adj[m], free[m], strict=True):
                                _close(w, v, 1.0 if f == "pvalue" else scale, (case, trial, "f-free", m, f))
                        for f, g, w in zip(FIELDS, g_adj[m], w_adj[m], strict=True):
                            _close(g, w, 1.0 if f == "pvalue" else scale, (case, trial, "adjusted", m, f))
            for got, want in pairs:
                for m in range(3):
                    for f, g, w in zip(FIELDS, got[m], want[m], strict=True):
                        _close(g, w, 1.0 if f == "pvalue" else scale, (case, trial, with_pre, m, f))
    if case in ("pre_equals_experiment", "pre_almost_experiment"):
        assert calls["residual"] > 0  # the cancellation branch: the residuals recomputed by the kernel
    assert (noise > 0) == (case == "constant_pre_inexact")


def test_ab_arms_single_metric_row_is_the_look():
    """The per-batch look's one metric (a (1, P) row of the block) equals the three-metric call's row."""
    rng = np.random.default_rng(3)
    (xa, ya, pa, qa, _), (xb, yb, pb, qb, _) = _data("typical", rng)
    den, nums, _, in_b, _, _ = _ab_population(rng, (xa, ya, pa, qa), (xb, yb, pb, qb), 500)
    scratch = sk.Scratch(den.size)
    three = _ratio_diff_from_arms(*sk.ab_arm_parts(den, nums, in_b, None, scratch)[0][:2], 0.05)
    for m in range(3):
        one = _ratio_diff_from_arms(*sk.ab_arm_parts(den, nums[m:m + 1], in_b, None, scratch)[0][:2], 0.05)
        assert one[0] == three[m]


# ----------------------------------------------------------------------------- whole replicates
CONFIG = {
    "seed": 20261201, "replicates": 6, "workers": 1,
    "collection": {"n_queries": 300, "candidates": 20},
    "rankers": {"depth": 6, "noise_correlation": 0.7, "A": {"noise": 1.0}, "B": {"noise": 0.92},
                "others": {"C": {"noise": 1.05}}},
    "users": {"population": 3000, "activity": {"sigma": 1.2},
              "types": [{"name": "nav", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
                        {"name": "inf", "share": 0.4,
                         "click_model": {"name": "cascade", "preset": "informational"}}]},
    "traffic": {"days": 4, "queries_per_day": 1500, "batch_hours": 6},
    "designs": [
        {"name": "ab", "type": "ab", "share_b": 0.5, "metric": "reciprocal_rank",
         "analysis": {"sequential": "msprt", "multiple": "holm", "cuped": {"pre_days": 2}, "monitoring": "batch"}},
        {"name": "team_draft", "type": "interleaving", "method": "team_draft",
         "analysis": {"sequential": "msprt", "monitoring": "batch"}},
        {"name": "balanced", "type": "interleaving", "method": "balanced"},
        {"name": "tdm", "type": "interleaving", "method": "team_draft_multileave", "rankers": ["A", "B", "C"],
         "analysis": {"multiple": "holm"}},
    ],
    "analysis": {"alpha": 0.05, "power": 0.8, "aa": True, "truth_impressions": 20000},
}


def _summary_close(got, want, path=""):
    """Recursively: the same keys, strings, booleans and integers; floats within 1e-12 (a decision that flips
    changes a rate by 1 / replicates)."""
    if isinstance(want, dict):
        assert got.keys() == want.keys(), path
        for key in want:
            _summary_close(got[key], want[key], f"{path}/{key}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _summary_close(g, w, f"{path}[{i}]")
    elif isinstance(want, float) and math.isinf(want):
        assert got == want, path
    elif isinstance(want, float):
        _close(float(got), want, 1.0, path)
    else:
        assert got == want, (path, got, want)


@pytest.fixture(scope="module")
def both_paths():
    from simulations.config import config_from_mapping
    from simulations.job import simulate

    out = {}
    for compiled in (True, False):
        sk.COMPILED = compiled
        try:
            out[compiled] = simulate(config_from_mapping(CONFIG), workers=1)
        finally:
            sk.COMPILED = True
    return out


def test_replicates_row_by_row_against_the_numpy_path(both_paths):
    new, ref = both_paths[True].rows, both_paths[False].rows
    assert len(new) == len(ref) > 1000
    labels = [c for c in ref.columns if ref[c].dtype.kind not in "f"]
    assert (new[labels].to_numpy() == ref[labels].to_numpy()).all()
    metrics = set(ref["metric"])
    assert {"batch:reciprocal_rank", "batch:delta_ab", "cuped:reciprocal_rank", "delta_B_vs_A",
            "delta_C_vs_B"} <= metrics
    changed = 0
    for col in [c for c in ref.columns if ref[c].dtype.kind == "f"]:
        g, w = new[col].to_numpy(), ref[col].to_numpy()
        assert (np.isnan(g) == np.isnan(w)).all(), col
        assert (np.isinf(g) == np.isinf(w)).all() and (g[np.isinf(w)] == w[np.isinf(w)]).all(), col  # (z rows' df)
        ok = np.isfinite(w)
        assert (np.abs(g[ok] - w[ok]) <= RTOL * np.abs(w[ok]) + ATOL).all(), col
        changed += int((g[ok] != w[ok]).sum())
    assert changed > 0  # the compiled sums do round differently somewhere (else the test compared one path)


def test_replicates_make_the_same_decisions(both_paths):
    from onlineeval.stats.sequential import sequential_test

    new, ref = both_paths[True], both_paths[False]
    _summary_close(new.summary, ref.summary)
    for design, metric in (("ab", "batch:reciprocal_rank"), ("team_draft", "batch:delta_ab"),
                           ("ab", "reciprocal_rank")):
        decisions = []
        for res in (new, ref):
            rows = res.rows[(res.rows["design"] == design) & (res.rows["metric"] == metric) & ~res.rows["aa"]]
            est = rows.pivot(index="replicate", columns="day", values="estimate").to_numpy()
            se = rows.pivot(index="replicate", columns="day", values="se").to_numpy()
            decisions.append(sequential_test(est, se, "msprt", alpha=0.05, tau=0.01))
        assert (decisions[0].reject == decisions[1].reject).all()
        assert (decisions[0].stop_look == decisions[1].stop_look).all()
    assert "sequential" in ref.summary and "multiple" in ref.summary


# ----------------------------------------------------------------------------- JIT off, task module
_SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, {tests!r})
from simulations import stat_kernels as sk
from test_simulation_ab_checkpoint import _data
from test_stat_kernels import _ab_population, _population
rng = np.random.default_rng(8)
out = {{}}
num, den = rng.integers(-2, 3, 700) / 2.0, rng.poisson(1.5, 700).astype(float)
pnum, pden, imp, _ = _population(rng, num, den, 300)
out["ratio"] = np.array(sk.ratio_mean_population(pnum, pden, imp, sk.Scratch(pnum.size))).tobytes().hex()
for case in ("typical", "pre_almost_experiment"):
    (xa, ya, pa, qa, _), (xb, yb, pb, qb, _) = _data(case, rng)
    d, n, p, b, _, _ = _ab_population(rng, (xa, ya, pa, qa), (xb, yb, pb, qb), 100)
    arms, _, _, residual = sk.ab_arm_parts(d, n, b, p, sk.Scratch(d.size))
    out[case] = [[np.asarray(v, dtype=float).tobytes().hex() for v in (a.ratio, a.var, a.pre_ratio, a.ybar, a.qbar,
                  a.active_mean, a.n_active, a.cross, a.aa)] for a in arms]
    out[case].append([float(residual(j, m, 0.7, 0.1)).hex() for j in (0, 1) for m in range(3)])
import numba
out["jit"] = not numba.config.DISABLE_JIT
print(json.dumps(out))
"""


def test_disable_jit_gives_the_same_numbers():
    from tests.test_simulation_kernels import compiled_and_plain

    compiled, plain = compiled_and_plain(_SCRIPT)
    assert compiled == plain


def test_stat_kernels_is_a_task_module():
    from simulations.executors import TASK_MODULES

    assert "simulations.stat_kernels" in TASK_MODULES


# ----------------------------------------------------------------------------- R^2 without LAPACK
def _correlations_many_pinv(pooled):
    """simulations.cuped._correlations_many before the closed form (commit f09142b): every R^2 by pinv."""
    from simulations.cuped import _correlations_s

    out = [(math.nan, math.nan)] * len(pooled)
    defined = [i for i, s in enumerate(pooled) if s[0][0] > 0]
    if not defined:
        return out
    s = np.array([pooled[i] for i in defined])
    if not np.isfinite(s).all():
        for i in defined:
            out[i] = _correlations_s(np.array(pooled[i]))
        return out
    r2 = np.einsum("ki,kij,kj->k", s[:, 0, 1:], np.linalg.pinv(s[:, 1:, 1:]), s[:, 1:, 0]).tolist()
    for j, i in enumerate(defined):
        (syy, sxy, _), (_, sxx, _), _ = pooled[i]
        rho = np.float64(sxy) / np.sqrt(np.float64(syy) * sxx) if sxx > 0 else 0.0
        out[i] = (math.sqrt(min(max(r2[j] / syy, 0.0), 1.0)), float(rho))
    return out


@pytest.mark.parametrize("kind", ["random", "no_indicator", "no_covariate", "nothing", "collinear", "near_collinear",
                                  "unbalanced_diagonal", "huge", "tiny", "not_defined"])
def test_r2_closed_form_agrees_with_pinv(kind):
    from simulations.cuped import _CLOSED_COND, _correlations_many, _r2_closed

    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    closed = 0
    for _ in range(200):
        n = int(rng.integers(3, 300))
        y, x = rng.standard_normal(n), rng.standard_normal(n)
        act = (rng.random(n) < rng.random()).astype(float)
        x = x + rng.random() * 3 * y
        if kind == "no_indicator":
            act[:] = 1.0
        elif kind == "no_covariate":
            x[:] = 0.0
        elif kind == "nothing":
            x[:] = 0.0
            act[:] = 0.0
        elif kind in ("collinear", "near_collinear"):
            x = act * 2.5 + (1e-9 * rng.standard_normal(n) if kind == "near_collinear" else 0.0)
        elif kind == "unbalanced_diagonal":
            x = x * 1e-6
        elif kind in ("huge", "tiny"):  # products of three cross-products stay finite and normal
            y, x, act = (v * (1e40 if kind == "huge" else 1e-40) for v in (y, x, act))
        elif kind == "not_defined":
            y[:] = 0.0
        cols = np.stack([y, x, act], axis=1)
        cols = cols - cols.mean(axis=0)
        s = cols.T @ cols
        if kind in ("no_indicator", "nothing", "unbalanced_diagonal"):
            s[1, 2] = s[2, 1] = 0.0  # an indicator without variance is centred to exactly 0: b = 0 exactly
        pooled = [s.tolist(), (s * 3.0).tolist()]
        got, want = _correlations_many(pooled), _correlations_many_pinv(pooled)
        for (gr, grho), (wr, wrho) in zip(got, want, strict=True):
            _close(gr, wr, 1.0, (kind, "R"))
            assert grho == wrho or (math.isnan(grho) and math.isnan(wrho))
        closed += _r2_closed(pooled[0]) is not None
    if kind in ("random", "no_indicator", "no_covariate", "nothing", "unbalanced_diagonal", "huge", "tiny"):
        assert closed > 100  # the closed form was taken (collinear ones: pinv)
    if kind in ("collinear", "near_collinear"):
        assert closed < 200
    assert 0 < _CLOSED_COND < 1
