"""Paired significance tests checked against scipy, statsmodels and exact enumerations."""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats as st
from statsmodels.stats import multitest

from onlineeval.errors import InputError
from onlineeval.stats.compare import comparison_seeds
from onlineeval.stats import (
    MISSING_SEGMENT,
    by_segment,
    compare_segments,
    compare_systems,
    holm,
    paired_bootstrap,
    paired_t_test,
    randomization_test,
    read_segments,
    results_to_frame,
    worst_losses_to_frame,
)
from scipy_seed import seeded  # rng= from scipy 1.15, random_state= before

# statsmodels' Holm calls gc.collect() on every call (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("no_gc_collect")


def _mean_stat(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def _exact_p(d_signed: np.ndarray) -> float:
    """Exact two-sided sign-flip p-value of integer differences, counting sign vectors per
    attainable sum with a convolution recursion (independent of the implementation's
    enumeration and sampling)."""
    d = np.abs(d_signed.astype(np.int64))
    offset = int(d.sum())
    counts = [0] * (2 * offset + 1)
    counts[offset] = 1
    for v in d.tolist():
        new = [0] * len(counts)
        for s, c in enumerate(counts):
            if c:
                new[s + v] += c
                new[s - v] += c
        counts = new
    obs = abs(int(d_signed.sum()))
    extreme = sum(c for s, c in enumerate(counts) if abs(s - offset) >= obs)
    return extreme / 2 ** len(d)


# ----------------------------------------------------------------------------- t-test


@pytest.mark.parametrize("seed", [0, 1])
def test_paired_t_matches_scipy_ttest_rel(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.random(40)
    b = a + rng.normal(0.03, 0.1, 40)
    ours = paired_t_test(b - a, alpha=0.1)
    ref = st.ttest_rel(b, a)
    ci = ref.confidence_interval(confidence_level=0.9)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    assert ours.df == ref.df
    assert (ours.ci_low, ours.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)


# ----------------------------------------------------------------------------- randomisation


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_randomization_exact_matches_scipy_exact(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = rng.normal(0.3, 1.0, 11)
    ours = randomization_test(d, np.random.default_rng(0), n_permutations=10_000)
    assert ours.exact and ours.n_permutations == 2**11
    ref = st.permutation_test(
        (d,), _mean_stat, permutation_type="samples", vectorized=True, n_resamples=np.inf, alternative="two-sided"
    )
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-12)


def test_randomization_exact_with_tied_magnitudes() -> None:
    """Integer differences make many arrangements tie the observed statistic exactly."""
    d = np.array([1, -1, 2, 0, 3, -2, 1, 1, 2, 1], dtype=float) / 7.0  # rounding in the sums
    ours = randomization_test(d, np.random.default_rng(0), 2048)
    assert ours.exact
    assert ours.pvalue == pytest.approx(_exact_p(np.round(d * 7).astype(int)), rel=1e-12)
    ref = st.permutation_test((d,), _mean_stat, permutation_type="samples", vectorized=True, n_resamples=np.inf)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-12)


def test_randomization_monte_carlo_within_error_of_exact_value() -> None:
    rng = np.random.default_rng(5)
    d_int = rng.integers(-4, 7, size=60)  # slightly positive on average (exact p ~ 0.09)
    exact = _exact_p(d_int)
    assert 0.005 < exact < 0.5  # an informative case
    B = 10_000
    ours = randomization_test(d_int / 10.0, np.random.default_rng(6), B)
    assert not ours.exact and ours.n_permutations == B
    se = math.sqrt(exact * (1 - exact) / B)
    assert ours.pvalue == pytest.approx(exact, abs=4 * se + 1 / (B + 1))
    ref = st.permutation_test(
        (d_int / 10.0,), _mean_stat, permutation_type="samples", vectorized=True, n_resamples=B,
        **seeded(7),
    )  # fmt: skip
    assert ours.pvalue == pytest.approx(ref.pvalue, abs=4 * math.sqrt(2) * se + 2 / (B + 1))


def test_randomization_p_is_b_plus_one_over_B_plus_one() -> None:
    d = np.linspace(0.5, 1.5, 40)  # every flip lowers |sum|: b = 0
    res = randomization_test(d, np.random.default_rng(0), 999)
    assert res.pvalue == pytest.approx(1 / 1000)
    zero = randomization_test(np.zeros(30), np.random.default_rng(0), 999)
    assert zero.pvalue == 1.0  # every arrangement ties: (999 + 1)/(999 + 1)


def test_randomization_blocks_are_one_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    from onlineeval.stats import paired

    d = np.random.default_rng(8).normal(0.1, 1, 50)
    one = randomization_test(d, np.random.default_rng(1), 3000)
    monkeypatch.setattr(paired, "_BLOCK_CELLS", 50 * 7)
    many = randomization_test(d, np.random.default_rng(1), 3000)
    assert one == many
    boot_one = paired_bootstrap(d[:47], np.random.default_rng(2), 300)
    monkeypatch.setattr(paired, "_BLOCK_CELLS", 47 * 5)
    assert paired_bootstrap(d[:47], np.random.default_rng(2), 300) == boot_one


def _exact_p_single_block(d: np.ndarray) -> float:
    """The exact p-value as the code computed it before review 10 (every sign vector in one 2^n x n matrix)."""
    n, total = d.size, float(d.sum())
    codes = np.arange(1 << n, dtype=np.int64)
    bits = ((codes[:, None] >> np.arange(n, dtype=np.int64)) & 1).astype(np.float64)
    threshold = abs(total) - 1e-10 * float(np.abs(d).sum())
    return int(np.count_nonzero(np.abs(2.0 * (bits @ d) - total) >= threshold)) / (1 << n)


@pytest.mark.parametrize("cells", [13 * 3, 13 * 64, 13 * 1000])
def test_randomization_exact_enumeration_in_blocks_gives_identical_p(monkeypatch: pytest.MonkeyPatch,
                                                                     cells: int) -> None:
    """Review 10, F5: the exact branch enumerates the sign vectors in blocks; the p-value is identical to the
    one-matrix enumeration (and to brute force) whatever the block size, ties included."""
    from onlineeval.stats import paired

    monkeypatch.setattr(paired, "_BLOCK_CELLS", cells)
    for seed in range(4):
        d_int = np.random.default_rng(seed).integers(-3, 5, size=13)
        d = d_int / 7.0
        ours = randomization_test(d, np.random.default_rng(0), 1 << 13)
        assert ours.exact and ours.n_permutations == 1 << 13
        assert ours.pvalue == _exact_p_single_block(d) == _exact_p(d_int)


def test_randomization_exact_enumeration_memory_is_bounded() -> None:
    """n = 20 exact: the single matrix held 2^20 x 20 int64 plus a float64 copy (335 MB); in blocks of
    _BLOCK_CELLS / n vectors the peak is about 9 x _BLOCK_CELLS bytes (38 MB)."""
    import tracemalloc

    from onlineeval.stats import paired

    d = np.random.default_rng(3).normal(0.05, 1.0, 20)
    tracemalloc.start()
    try:
        res = randomization_test(d, np.random.default_rng(0), 1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.exact
    assert peak < 12 * paired._BLOCK_CELLS + (8 << 20), peak  # 59 MB; before: 335 MB
    ref = st.permutation_test((d,), _mean_stat, permutation_type="samples", vectorized=True,
                              n_resamples=np.inf, batch=1 << 16)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-12)


def test_cli_out_of_memory_in_paired_tests_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import onlineeval.stats as stats
    from onlineeval.cli import app

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(stats, "compare_systems", no_memory)
    (tmp_path / "q").write_text("q1 0 a 1\nq2 0 b 1\n")
    (tmp_path / "A").write_text("q1 Q0 a 1 2 A\nq2 Q0 b 1 2 A\n")
    (tmp_path / "B").write_text("q1 Q0 x 1 2 B\nq2 Q0 b 1 2 B\n")
    res = CliRunner().invoke(app, ["evaluate", "--qrels", str(tmp_path / "q"), "--run", str(tmp_path / "A"),
                                   "--run", str(tmp_path / "B"), "--permutations", "10000000"])
    assert res.exit_code == 2
    assert "not enough memory for the paired tests (10000000 permutations" in res.output
    assert "lower --permutations or --bootstrap" in res.output and "Traceback" not in res.output


# ----------------------------------------------------------------------------- bootstrap


def test_bca_and_percentile_agree_with_scipy_within_mc_error() -> None:
    rng = np.random.default_rng(9)
    d = rng.lognormal(0.0, 1.0, 60) - 1.2  # skewed, so BCa differs from percentile
    B = 20_000
    ours = paired_bootstrap(d, np.random.default_rng(10), B, level=0.95)
    refs = {
        m: st.bootstrap((d,), _mean_stat, vectorized=True, n_resamples=B, method=m, **seeded(11))
        for m in ("percentile", "BCa")
    }
    # MC SE of a quantile q of the replicate distribution ~ se * sqrt(q(1-q)/B) / phi(z_q),
    # taken at the most extreme level used (q = 0.01 covers the BCa shift here); two runs.
    q = 0.01
    tol = 4 * math.sqrt(2) * ours.se * math.sqrt(q * (1 - q) / B) / st.norm.pdf(st.norm.ppf(q))
    assert ours.percentile_low == pytest.approx(refs["percentile"].confidence_interval.low, abs=tol)
    assert ours.percentile_high == pytest.approx(refs["percentile"].confidence_interval.high, abs=tol)
    assert ours.bca_low == pytest.approx(refs["BCa"].confidence_interval.low, abs=tol)
    assert ours.bca_high == pytest.approx(refs["BCa"].confidence_interval.high, abs=tol)
    # the skew moves BCa to the right of the percentile interval by more than the MC noise
    assert ours.bca_high - ours.percentile_high > tol / 2
    assert ours.se == pytest.approx(d.std(ddof=0) / math.sqrt(d.size), rel=4 / math.sqrt(2 * B))


def test_bca_acceleration_equals_explicit_jackknife() -> None:
    d = np.random.default_rng(12).gamma(2.0, 1.0, 25)
    ours = paired_bootstrap(d, np.random.default_rng(0), 1000)
    loo = np.array([np.delete(d, i).mean() for i in range(d.size)])  # leave-one-out means
    u = loo.mean() - loo
    a = (u**3).sum() / (6 * ((u**2).sum()) ** 1.5)  # Efron & Tibshirani (1993) eq. 14.15
    assert ours.acceleration == pytest.approx(a, rel=1e-10)


def test_bootstrap_degenerate_and_seeded() -> None:
    flat = paired_bootstrap(np.full(10, 0.25), np.random.default_rng(0), 500)
    assert (flat.percentile_low, flat.bca_high, flat.se) == (0.25, 0.25, 0.0)
    d = np.random.default_rng(13).normal(size=30)
    assert paired_bootstrap(d, np.random.default_rng(3), 500) == paired_bootstrap(d, np.random.default_rng(3), 500)


# ----------------------------------------------------------------------------- Holm


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_holm_equals_statsmodels_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(0, 0.05, 5), rng.uniform(0, 1, 10), [0.01, 0.01, 1.0, 0.0]])
    rng.shuffle(p)
    ref = multitest.multipletests(p, method="holm")[1]
    np.testing.assert_array_equal(holm(p), ref)


def test_holm_ignores_nan() -> None:
    out = holm([0.01, np.nan, 0.04])
    np.testing.assert_array_equal(np.isnan(out), [False, True, False])
    np.testing.assert_array_equal(out[[0, 2]], multitest.multipletests([0.01, 0.04], method="holm")[1])


# ----------------------------------------------------------------------------- compare_systems


def _frame(seed: int = 0, n: int = 80) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for metric in ("nDCG@10", "AP"):
        base = rng.random(n)
        for system, shift in (("A", 0.0), ("B", 0.05), ("C", -0.01)):
            vals = np.clip(base + shift + rng.normal(0, 0.1, n), 0, 1)
            vals[:3] = base[:3]  # guaranteed ties (B == A == C on three queries)
            rows += [{"query": f"q{i:03d}", "system": system, "metric": metric, "value": v} for i, v in enumerate(vals)]
    return pd.DataFrame(rows)


def test_compare_systems_consistent_with_references() -> None:
    df = _frame()
    before = df.copy()
    res = compare_systems(df, "A", seed=42, n_permutations=2000, n_bootstrap=1000)
    pd.testing.assert_frame_equal(df, before)  # caller's frame untouched
    assert [(r.metric, r.system) for r in res] == [("nDCG@10", "B"), ("nDCG@10", "C"), ("AP", "B"), ("AP", "C")]
    for r in res:
        sub = df[df.metric == r.metric].pivot(index="query", columns="system", values="value")
        d = (sub[r.system] - sub["A"]).to_numpy()
        ref = st.ttest_rel(sub[r.system], sub["A"])
        assert r.n == 80 and r.mean_diff == pytest.approx(d.mean())
        assert r.p_t == pytest.approx(ref.pvalue, rel=1e-9)
        assert r.effect_size == pytest.approx(d.mean() / d.std(ddof=1))
        assert (r.wins, r.losses, r.ties) == (int((d > 0).sum()), int((d < 0).sum()), int((d == 0).sum()))
        assert r.ties >= 3
        worst = np.sort(d)[:5]
        assert [w.diff for w in r.worst] == pytest.approx(worst.tolist())
        assert all(w.diff == pytest.approx(w.system - w.baseline) for w in r.worst)
        assert r.ci_percentile_low < r.mean_diff < r.ci_percentile_high
    p_r = [r.p_randomization for r in res]
    np.testing.assert_array_equal([r.p_randomization_holm for r in res], multitest.multipletests(p_r, method="holm")[1])
    np.testing.assert_array_equal(
        [r.p_t_holm for r in res], multitest.multipletests([r.p_t for r in res], method="holm")[1]
    )
    assert res[0].significant  # B is clearly better on nDCG@10


def test_compare_systems_reproducible_and_row_order_free() -> None:
    df = _frame(1)
    kw = dict(seed=7, n_permutations=500, n_bootstrap=300)
    a = compare_systems(df, "A", **kw)
    b = compare_systems(df.sample(frac=1.0, random_state=3), "A", **kw)
    assert a == b
    c = compare_systems(df, "A", **(kw | {"seed": 8}))
    assert [r.p_randomization for r in a] != [r.p_randomization for r in c]
    ss = np.random.SeedSequence(7)
    assert compare_systems(df, "A", **(kw | {"seed": ss})) == a == compare_systems(df, "A", **(kw | {"seed": ss}))


def test_a_comparisons_draws_do_not_depend_on_what_else_is_compared() -> None:
    """Each comparison's randomisation test and bootstrap draw from streams keyed by its names: B vs A on nDCG@10
    gives the same p-value and interval alone, beside AP, beside system C and with the metrics in another order
    (its streams were the k-th spawned child of the sorted (metric, system) pairs: adding AP moved them). Only
    Holm's adjustment, over the whole family, changes. The draws are the documented children of the seed."""
    df = _frame(2)
    kw = dict(seed=11, n_permutations=500, n_bootstrap=300)
    keys = ("p_randomization", "n_permutations", "ci_percentile_low", "ci_percentile_high", "ci_bca_low",
            "ci_bca_high", "p_t")

    def b_ndcg(frame: pd.DataFrame) -> tuple[float, ...]:
        (r,) = [r for r in compare_systems(frame, "A", **kw) if (r.metric, r.system) == ("nDCG@10", "B")]
        return tuple(getattr(r, k) for k in keys)

    alone = b_ndcg(df[(df.metric == "nDCG@10") & (df.system != "C")])
    assert alone[1] == 500  # drawn, not exact (2^80 sign vectors)
    assert b_ndcg(df) == alone
    assert b_ndcg(df[df.system != "C"]) == alone
    assert b_ndcg(df[df.metric == "nDCG@10"]) == alone
    assert b_ndcg(pd.concat([df[df.metric == "AP"], df[df.metric == "nDCG@10"]])) == alone
    sub = df[df.metric == "nDCG@10"].pivot(index="query", columns="system", values="value")
    d = (sub["B"] - sub["A"]).to_numpy()
    perm_seed, boot_seed = comparison_seeds(np.random.SeedSequence(11), "nDCG@10", "B", "A")
    assert alone[0] == randomization_test(d, np.random.default_rng(perm_seed), 500).pvalue
    boot = paired_bootstrap(d, np.random.default_rng(boot_seed), 300, 0.95)
    assert alone[2:6] == (boot.percentile_low, boot.percentile_high, boot.bca_low, boot.bca_high)
    assert perm_seed.spawn_key == (*[zlib.crc32(x.encode()) for x in ("nDCG@10", "B", "A")], 0)


def test_compare_systems_frames() -> None:
    res = compare_systems(_frame(2), "A", seed=0, n_permutations=200, n_bootstrap=200, n_worst=2)
    table = results_to_frame(res)
    assert len(table) == 4 and {"p_randomization_holm", "ci_bca_low", "significant"} <= set(table.columns)
    worst = worst_losses_to_frame(res)
    assert len(worst) == 8 and worst["rank"].tolist()[:2] == [1, 2]
    assert res[0].to_dict()["worst"][0]["query"] == res[0].worst[0].query


def test_single_query_gives_nan_tests() -> None:
    df = pd.DataFrame({"query": ["q1", "q1"], "system": ["A", "B"], "metric": ["P@5", "P@5"], "value": [0.2, 0.4]})
    (r,) = compare_systems(df, "A", seed=0)
    assert r.n == 1 and r.wins == 1 and math.isnan(r.p_t) and math.isnan(r.p_randomization_holm)


@pytest.mark.parametrize(
    ("mutate", "fragment", "line"),
    [
        (lambda f: f.drop(columns="metric"), "missing column", None),
        (lambda f: f.assign(value=f["value"].astype(object).where(f.index != 5, "abc")), "not a finite number", 6),
        (lambda f: pd.concat([f, f.iloc[[3]]], ignore_index=True), "duplicate value", None),
        (lambda f: f[~((f.system == "C") & (f["query"] == "q010") & (f.metric == "AP"))],
         "no value for query 'q010'", None),
    ],
)
def test_compare_systems_bad_frames(mutate, fragment: str, line: int | None) -> None:
    with pytest.raises(InputError, match=fragment) as info:
        compare_systems(mutate(_frame()), "A", seed=0, n_permutations=100, n_bootstrap=100)
    if line is not None:
        assert info.value.line == line


def test_compare_systems_bad_baseline() -> None:
    with pytest.raises(InputError, match="baseline 'Z'"):
        compare_systems(_frame(), "Z", seed=0)
    only_a = _frame()
    with pytest.raises(InputError, match="at least two systems"):
        compare_systems(only_a[only_a.system == "A"], "A", seed=0)


# ----------------------------------------------------------------------------- segments


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "attrs.tsv"
    p.write_text(text, encoding="utf-8")
    return p


def test_read_segments(tmp_path: Path) -> None:
    seg = read_segments(_write(tmp_path, "# attributes\nQID\tbucket\ttype\nq001\thead\tnav\n\nq002\ttail\tinfo\n"))
    assert seg.index.tolist() == ["q001", "q002"] and seg.columns.tolist() == ["bucket", "type"]
    assert seg.loc["q002", "type"] == "info"


@pytest.mark.parametrize(
    ("text", "fragment", "line"),
    [
        ("", "empty file", None),
        ("query\tbucket\n", "no query lines", 1),
        ("query\n", "header", 1),
        ("query\tbucket\nq1\thead\nq2\n", "expected 2 tab-separated fields", 3),
        ("query\tbucket\nq1\thead\nq1\ttail\n", "listed twice \\(first on line 2\\)", 3),
        ("query\tbucket\tbucket\n", "repeats", 1),
        ("q1\thead\nq2\ttail\n", "first column is 'query'", 1),
        ("query\tbucket\nq1\t\n", "empty value for attribute 'bucket'", 2),
    ],
)
def test_read_segments_errors(tmp_path: Path, text: str, fragment: str, line: int | None) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=fragment) as info:
        read_segments(path)
    assert info.value.path == str(path) and info.value.line == line
    if line is not None:
        assert f"{path}:{line}:" in str(info.value)


def test_segments_tables(tmp_path: Path) -> None:
    df = _frame(3, n=40)
    lines = ["query\tbucket"] + [f"q{i:03d}\t{'head' if i < 15 else 'tail'}" for i in range(35)]
    seg = read_segments(_write(tmp_path, "\n".join(lines) + "\n"))
    kw = dict(seed=5, n_permutations=300, n_bootstrap=200)
    res = compare_segments(df, seg, "A", **kw)
    values = sorted({r.segment_value for r in res})
    assert values == sorted(["head", "tail", MISSING_SEGMENT])
    head_ref = compare_systems(df[df["query"] < "q015"], "A", **kw)
    head = [r for r in res if r.segment_value == "head"]
    assert [(r.mean_diff, r.p_randomization, r.p_randomization_holm) for r in head] == [
        (r.mean_diff, r.p_randomization, r.p_randomization_holm) for r in head_ref
    ]
    assert {r.n for r in res if r.segment_value == MISSING_SEGMENT} == {5}
    means = by_segment(df, seg, lambda f: f.groupby(["system", "metric"], as_index=False)["value"].mean())
    assert set(means["segment_value"]) == {"head", "tail", MISSING_SEGMENT}
    tail = means[(means.segment_value == "tail") & (means.system == "B") & (means.metric == "AP")]
    expected = df[(df.system == "B") & (df.metric == "AP") & (df["query"] >= "q015") & (df["query"] < "q035")]
    assert tail["value"].item() == pytest.approx(expected["value"].mean())
    assert tail["segment_queries"].item() == 20


# ----------------------------------------------------------------------------- properties

from hypothesis import given, settings
from hypothesis import strategies as hst


@settings(max_examples=60, deadline=None)
@given(hst.lists(hst.floats(0.0, 1.0), min_size=1, max_size=25))
def test_holm_property_against_statsmodels(pvals: list[float]) -> None:
    ours = holm(pvals)
    np.testing.assert_array_equal(ours, multitest.multipletests(pvals, method="holm")[1])
    assert (ours >= np.asarray(pvals)).all() and (ours <= 1).all()


@settings(max_examples=40, deadline=None)
@given(hst.lists(hst.integers(-6, 6), min_size=2, max_size=9))
def test_randomization_exact_property(values: list[int]) -> None:
    d = np.asarray(values, dtype=float) / 3.0
    res = randomization_test(d, np.random.default_rng(0), 10_000)
    assert res.exact
    # exact integer counting is the reference here: scipy's float tolerance can split the
    # atom of arrangements that tie the observed statistic (e.g. [1, 2, -1, -2] sums to 0)
    assert res.pvalue == pytest.approx(_exact_p(np.asarray(values)), rel=1e-12)


def test_records_serialise_to_json() -> None:
    import json

    res = compare_systems(_frame(4), "A", seed=1, n_permutations=200, n_bootstrap=200)
    text = json.dumps([r.to_dict() for r in res])
    back = json.loads(text)
    assert back[0]["worst"][0]["query"] == res[0].worst[0].query and back[0]["significant"] == res[0].significant
    est = paired_t_test(np.array([0.1, 0.3, -0.2, 0.4]))
    assert json.loads(json.dumps(est.to_dict()))["method"] == "paired-t"


def test_constant_differences_have_zero_spread_despite_float_rounding() -> None:
    """0.4 - 0.2 on every query: s_d is exactly 0 (not 1e-17 from rounding the mean), so
    the documented s_d = 0 branch applies: t = inf, p = 0, d_z = inf."""
    d = np.full(6, 0.4) - np.full(6, 0.2)
    assert np.std(d, ddof=1) > 0  # the naive formula sees rounding noise here
    t = paired_t_test(d)
    assert (t.estimate, t.se, t.statistic, t.pvalue) == (d[0], 0.0, math.inf, 0.0)
    rows = [{"query": f"q{i}", "system": s, "metric": "P@5", "value": v}
            for i in range(6) for s, v in (("A", 0.2), ("B", 0.4))]
    (r,) = compare_systems(pd.DataFrame(rows), "A", seed=0, n_permutations=100, n_bootstrap=100)
    assert (r.sd_diff, r.effect_size, r.p_t) == (0.0, math.inf, 0.0)
