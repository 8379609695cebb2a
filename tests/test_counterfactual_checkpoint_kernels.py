"""The counterfactual design's compiled checkpoint (simulations.designs.counterfactual.checkpoint: cf_checkpoint,
cf_paired, aips_chunk_stats, aips_user_sums, compiled_checkpoint) against its NumPy path
(stat_kernels.COMPILED off: paired_differences, ratio_means, AdaptiveIPS.select / pick and np.bincount):

- whole replicates of configs/counterfactual.yaml-like small configs (all its estimators, a whole-log ``dm``,
  both targets, the logger's metrics, support rows, the A/A design, refit_days, the bootstrap on the last day)
  row by row to 1e-12 relative (1e-15 absolute), identical decisions (p < alpha), counts and support rows exact;
- adaptive IPS's choice per user type identical to AdaptiveIPS.choose (replicates, one-row types, gaps in the
  type codes, ties, near-equal behaviours), its per-user sums np.bincount's bits;
- adversarial sums (2 users, all-zero numerators, 1e9 offsets, NaN / inf, negative and all-zero denominators):
  what the NumPy path gives (its rows, its errors);
- NUMBA_DISABLE_JIT=1 gives the compiled run's bits.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from simulations import stat_kernels as sk
from simulations.designs.counterfactual import checkpoint as ck
from simulations.config import config_from_mapping

RTOL, ATOL = 1e-12, 1e-15
VALUES = ("estimate", "se", "ci_low", "ci_high", "pvalue")

LOGGER = {"policy": "mixture", "ranker": "A", "components": [
    {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 10, "weight": 0.8},
    {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 10, "scores": "B", "weight": 0.2}]}
ESTIMATORS = ["snips", "ips", "rips", "iips", "adaptive_ips", {"name": "clipped_ips", "cap": 5}]


def _config(*, estimators=ESTIMATORS, days=4, aa=False, logger=None, population=900, seed=5, **extra):
    """configs/counterfactual.yaml, small: PBM and cascade users, a mixture logger around A and B, team-draft too."""
    cf = {"name": "counterfactual", "type": "counterfactual", "metric": "clicks_per_query",
          "logger": logger or LOGGER, "targets": ["A", "B"], "estimators": list(estimators), **extra}
    return config_from_mapping({
        "seed": seed, "replicates": 2, "workers": 1,
        "collection": {"n_queries": 150, "candidates": 12},
        "rankers": {"depth": 5, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.8}},
        "offline_metric": "nDCG@5",
        "users": {"population": population, "activity": {"distribution": "lognormal", "sigma": 1.0}, "types": [
            {"name": "pbm", "share": 0.5, "click_model": {"name": "pbm", "preset": "ai2018"}},
            {"name": "cascade", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}}]},
        "traffic": {"days": days, "queries_per_day": 700, "batch_hours": 12},
        "designs": [{"name": "team_draft", "type": "interleaving", "method": "team_draft"}, cf],
        "analysis": {"aa": aa, "truth_impressions": 1000, "alpha": 0.05},
    })


def _replicate(cfg, rep: int, compiled: bool, monkeypatch, keep: list | None = None):
    """The counterfactual designs' checkpoint rows of replicate ``rep`` (driven as the runner does, without SimPy)
    with the compiled checkpoint on or off; ``keep`` receives the designs after the last checkpoint."""
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world
    from test_simulation_point_speed import drive_batches

    monkeypatch.setattr(sk, "COMPILED", compiled)
    world = build_world(cfg, world_seed(cfg.seed))
    traffic, designs = build_replicate(cfg, world, UserModels.from_config(cfg.users),
                                       replicate_seeds(cfg.seed, rep + 1)[rep])
    designs = [d for d in designs if d.kind == "counterfactual"]
    drive_batches(traffic, designs)
    if keep is not None:
        keep.extend(designs)
    return [row for d in designs for row in d.rows]


def _group_stats(order, starts, ind, cas, std, reference, out):
    """:func:`ck.aips_chunk_stats` of one chunk (the rows grouped by type: ``order``, ``starts``)."""
    return ck.aips_chunk_stats([(order, starts)], [[ind, cas, std]], np.diff(starts).astype(np.int64), reference, out)


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= max(RTOL * max(abs(a), abs(b)), ATOL)


def _same_rows(ref, new, alpha=0.05) -> int:
    """Row by row: the same design, day, metric, counts; values to 1e-12; the same decision. Returns the number
    of rows with a finite estimate."""
    assert len(ref) == len(new) and len(ref) > 0
    finite = 0
    for a, b in zip(ref, new, strict=True):
        assert (a.design, a.aa, a.day, a.metric, a.primary, a.n_users, a.n_impressions) == \
            (b.design, b.aa, b.day, b.metric, b.primary, b.n_users, b.n_impressions)
        for f in VALUES:
            assert _close(getattr(a, f), getattr(b, f)), (a, b, f)
        if a.metric.startswith("support:") and not math.isnan(a.estimate):
            assert a.estimate == b.estimate
        assert (a.pvalue < alpha) == (b.pvalue < alpha), (a, b)
        finite += math.isfinite(a.estimate)
    return finite


# ----------------------------------------------------------------------------- whole replicates
@pytest.mark.parametrize(("extra", "rep"), [
    ({}, 0),
    ({}, 1),
    ({"refit_days": 2}, 0),
    ({"bootstrap": 200, "refit_days": 3}, 0),
    ({"aa": True}, 1),
    ({"estimators": ["ips", "dm", {"name": "adaptive_ips", "reference": "cascade"}], "refit_days": 2}, 0),
    ({"estimators": ["snips", {"name": "adaptive_ips", "behaviours": {0: "independent", 1: "cascade"}}]}, 0),
    ({"logger": {"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.3, "n": 8}, "days": 2}, 1),
])
def test_replicates_row_by_row_as_the_numpy_path(extra, rep, monkeypatch):
    cfg = _config(**extra)
    ref = _replicate(cfg, rep, False, monkeypatch)
    new = _replicate(cfg, rep, True, monkeypatch)
    assert _same_rows(ref, new) >= (0 if extra.get("aa") else len(ref) // 3)
    metrics = {row.metric for row in new}
    assert {"logging:clicks_per_query", "logging:abandonment", "logging:reciprocal_rank"} <= metrics
    if "bootstrap" in extra:  # the bootstrap's intervals replace the delta method's on the last day: same draws
        last = [(a, b) for a, b in zip(ref, new, strict=True) if a.day == cfg.traffic.days and a.metric in
                ("ips", "adaptive_ips")]
        assert last and all(a.ci_low == b.ci_low and a.ci_high == b.ci_high for a, b in last)


@pytest.mark.parametrize("max_chunks", [1, 3])
def test_many_chunks_concatenated_first(max_chunks, monkeypatch):
    """More batches than CounterfactualDesign.max_chunks: adaptive IPS's statistics concatenated first (kept as
    one chunk, the later batches chunks again), the same rows."""
    from simulations.designs.counterfactual.design import CounterfactualDesign

    monkeypatch.setattr(CounterfactualDesign, "max_chunks", max_chunks)
    cfg = _config(refit_days=1, days=3)
    ref = _replicate(cfg, 0, False, monkeypatch)
    new = _replicate(cfg, 0, True, monkeypatch)
    assert _same_rows(ref, new) > 0
    assert all(math.isfinite(r.estimate) for r in new if r.metric == "adaptive_ips" and r.day > 1)


@pytest.mark.parametrize("fused_step", [True, False])
def test_count_rows_hold_the_impressions(fused_step, monkeypatch):
    """The kernel reads the denominator rows of all-ones terms (CounterfactualDesign._count_rows) as the
    impressions row: after replicates (the compiled step or the general path) they equal it bit for bit; ips's
    are among them, snips's not."""
    from simulations.designs.counterfactual.design import CounterfactualDesign

    monkeypatch.setattr(CounterfactualDesign, "fused_step", fused_step)
    for extra in ({}, {"estimators": ["ips", "dm", "rips", "snips"], "refit_days": 1}):
        designs: list = []
        _replicate(_config(days=2, **extra), 0, True, monkeypatch, keep=designs)
        (d,) = designs
        counts = d._count_rows()
        for label in d._acc_labels:
            for t in d.target_names:
                row = d._rows[f"den:{label}:{t}"]
                assert (row in counts) == (label != "snips")
                if row in counts:
                    assert d._acc[row].tobytes() == d._acc[0].tobytes()
        kernel_rows = ck._kernel_rows(d).tolist()
        for i, label in enumerate(d._acc_labels):
            want = [d._rows[f"{part}:{label}:{t}"] for t in d.target_names for part in ("num", "den")]
            assert kernel_rows[i] == [0 if j % 2 and r in counts else r for j, r in enumerate(want)]


def test_configs_counterfactual_yaml_first_replicate(monkeypatch):
    """configs/counterfactual.yaml itself (6,000 users, 28,000 impressions, support rows), first replicate."""
    from simulations.config import load_config

    cfg = load_config("configs/counterfactual.yaml")
    ref = _replicate(cfg, 0, False, monkeypatch)
    new = _replicate(cfg, 0, True, monkeypatch)
    assert _same_rows(ref, new) > 0
    assert any(row.metric.startswith("support:") for row in new)


def test_adaptive_choices_identical_on_replicates(monkeypatch):
    """After the last checkpoint of replicates: each target's per-type behaviours of the compiled choice are
    AdaptiveIPS.select's, and the chosen terms' per-user sums are np.bincount's bits."""
    from onlineeval.estimators.adaptive_ips import BEHAVIOURS
    from simulations.designs.counterfactual.checkpoint import _choose_behaviours
    from simulations.designs.counterfactual.serving import _one_chunk

    checked = set()
    for seed in (5, 6, 7):
        designs: list = []
        _replicate(_config(seed=seed, days=3), 0, True, monkeypatch, keep=designs)
        (d,) = designs
        est = dict(d.estimators)["adaptive_ips"]
        meta = _one_chunk(d._row_meta)
        types = meta["user_type"]
        for t in d.target_names:
            stats = _one_chunk(d._row_stats[("adaptive_ips", t)])
            choice, _ = est.select(types, stats)
            terms = [np.ascontiguousarray(stats[b]) for b in BEHAVIOURS]
            counts, order, starts = _grouped(types)
            assert counts.tolist() == np.bincount(types).tolist()
            group = np.empty((int(types.max()) + 1, 3, 4))
            assert _group_stats(order, starts, *terms, BEHAVIOURS.index(est.reference), group)
            table = _choose_behaviours(group, counts, BEHAVIOURS.index(est.reference))
            want = np.full(types.size, BEHAVIOURS.index(choice)) if isinstance(choice, str) else choice
            assert np.array_equal(table[types], want)
            sums = np.zeros(d.population)
            ck.aips_user_sums(types, table, *terms, meta["user"], sums)
            assert np.array_equal(sums, np.bincount(meta["user"], est.pick(choice, stats), d.population))
            checked.add(tuple(table.tolist()))
    assert checked  # the choices seen (both behaviours, one for all types: whatever the data gave)


def _choose_ref(types, terms, reference):
    from onlineeval.estimators.adaptive_ips import AdaptiveIPS

    est = AdaptiveIPS(reference=reference)
    mapping, _ = est.choose(types, terms)
    return mapping


@pytest.mark.parametrize("case", ["random", "one_row_types", "gaps", "ties", "near_equal", "big_offset"])
@pytest.mark.parametrize("reference", ["standard", "cascade"])
def test_adaptive_choice_as_choose(case, reference):
    from onlineeval.estimators.adaptive_ips import BEHAVIOURS
    from simulations.designs.counterfactual.checkpoint import _choose_behaviours

    rng = np.random.default_rng(zlib.crc32(repr((case, reference)).encode()))
    for _ in range(20):
        n = int(rng.integers(2, 400))
        types = rng.integers(0, 3, n).astype(np.int8)
        base = rng.exponential(1.0, n) * (rng.random(n) < 0.3)
        terms = {"independent": base * rng.uniform(0.5, 1.5, n), "cascade": base * rng.uniform(0.7, 1.3, n),
                 "standard": base * rng.uniform(0.0, 3.0, n)}
        if case == "one_row_types":
            types[:] = 0
            types[rng.integers(0, n)] = 1
            types[rng.integers(0, n)] = 3
        elif case == "gaps":
            types = (types * 3).astype(np.int16)
        elif case == "ties":  # identical behaviours for every row: the finer one
            terms = {b: base.copy() for b in BEHAVIOURS}
        elif case == "near_equal":
            terms["cascade"] = terms["standard"] * (1 + 1e-3 * rng.standard_normal(n))
            terms["independent"] = terms["standard"].copy()
        elif case == "big_offset":
            terms = {b: v + 1e9 for b, v in terms.items()}
        want = _choose_ref(types, terms, reference)
        group = np.empty((int(types.max()) + 1, 3, 4))
        arrays = [np.ascontiguousarray(terms[b]) for b in BEHAVIOURS]
        counts, order, starts = _grouped(types)
        assert _group_stats(order, starts, *arrays, BEHAVIOURS.index(reference), group)
        table = _choose_behaviours(group, counts, BEHAVIOURS.index(reference))
        assert {t: BEHAVIOURS[table[t]] for t in want} == want


def _grouped(types):
    """:func:`group_rows` of ``types``, checked against a stable argsort: ``(counts, order, starts)``."""
    nt = int(types.max()) + 1
    buffer, starts = np.full(types.size + 1, -7, dtype=np.intp), np.empty(nt + 1, dtype=np.int64)
    order = buffer[:types.size]
    counts = ck.group_rows(types, order, starts)
    assert buffer[-1] == -7  # nothing written past the rows
    assert counts.tolist() == np.bincount(types, minlength=nt).tolist()
    assert starts.tolist() == [0, *np.cumsum(counts).tolist()]
    assert np.array_equal(order, np.argsort(types, kind="stable"))
    return counts, order, starts


@pytest.mark.parametrize("n_types", [1, 2, 5, 16, 17, 300])
def test_group_rows_both_ways(n_types):
    """The rows grouped by type: branch-free passes up to 16 types, a counting sort beyond (type codes with
    gaps, types without rows)."""
    rng = np.random.default_rng(n_types)
    for n in (1, 2, 33, 1000):
        types = rng.integers(0, n_types, n)
        types[types % 3 == 1] = 0  # gaps
        for dtype in (np.int8, np.int64, np.uint16):
            if n_types < np.iinfo(dtype).max:
                _grouped(types.astype(dtype))


def test_adaptive_non_finite_terms_go_to_the_numpy_path(monkeypatch):
    types = np.array([0, 1, 0, 1, 0], dtype=np.int8)
    terms = [np.arange(5.0), np.arange(5.0), np.array([0.0, 1.0, np.inf, 2.0, 1.0])]
    _, order, starts = _grouped(types)
    assert not _group_stats(order, starts, *terms, 2, np.empty((2, 3, 4)))
    # in a design: the NumPy path's row (select / choose on the terms as they are)
    d = _design_after(days=2, population=300, refit_days=1)
    stats = d._row_stats[("adaptive_ips", "B")]
    stats[0]["cascade"] = stats[0]["cascade"].copy()
    stats[0]["cascade"][1] = np.nan
    _same_outcome(*_both_ways(d, 2, monkeypatch))


# ----------------------------------------------------------------------------- adversarial sums
def _design_after(days: int = 2, population: int = 300, **extra):
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    cfg = _config(days=days, population=population, **extra)
    world = build_world(cfg, world_seed(cfg.seed))
    traffic, designs = build_replicate(cfg, world, UserModels.from_config(cfg.users), replicate_seeds(cfg.seed, 1)[0])
    d = next(x for x in designs if x.kind == "counterfactual")
    for hour in range(0, traffic.days * 24, traffic.batch_hours):
        d.process(traffic.batch(hour, traffic.batch_hours))
    return d


def _both_ways(d, day, monkeypatch):
    """The checkpoint's rows, or its error ``(type, message)``, by the NumPy path and by the compiled one."""
    out = []
    for compiled in (False, True):
        monkeypatch.setattr(sk, "COMPILED", compiled)
        before = len(d.rows)
        try:
            with np.errstate(all="ignore"):
                d.checkpoint(day)
            out.append(d.rows[before:])
        except Exception as exc:  # noqa: BLE001  (the NumPy path's error: the compiled path must raise it too)
            out.append((type(exc), str(exc)))
    return out


def _same_outcome(ref, new) -> None:
    if isinstance(ref, tuple) or isinstance(new, tuple):
        assert ref == new
    else:
        _same_rows(ref, new)


def _rows_of(d, label):
    e, lo = len(d._acc_labels), d._block
    i = d._acc_labels.index(label)
    return lo + i, lo + e + i, lo + 2 * e + i, lo + 3 * e + i  # num A, num B, den A, den B


@pytest.mark.parametrize("case", ["two_users", "zero_numerators", "offset_1e9", "nan", "inf", "neg_inf_num",
                                  "zero_denominators", "one_user", "no_user", "huge"])
def test_adversarial_sums_as_the_numpy_path(case, monkeypatch):
    d = _design_after()
    acc = d._acc
    active = np.flatnonzero(acc[0] > 0)
    num_a, num_b, den_a, den_b = _rows_of(d, "snips")
    if case in ("two_users", "one_user", "no_user"):
        keep = {"two_users": 2, "one_user": 1, "no_user": 0}[case]
        acc[:, active[keep:]] = 0.0
    elif case == "zero_numerators":
        acc[d._block:d._block + 2 * len(d._acc_labels)] = 0.0
    elif case == "offset_1e9":
        acc[num_a, active] += 1e9
        acc[num_b, active] += 1e9 * (1 + 1e-12)
    elif case == "nan":
        acc[num_b, active[3]] = np.nan
    elif case == "inf":
        acc[den_a, active[1]] = np.inf
    elif case == "neg_inf_num":
        acc[num_a, active[0]] = -np.inf
    elif case == "zero_denominators":
        acc[den_b, :] = 0.0
    elif case == "huge":
        acc[num_a, active] *= 1e300
    ref, new = _both_ways(d, 2, monkeypatch)
    _same_outcome(ref, new)
    if case in ("nan", "zero_denominators", "neg_inf_num"):
        assert math.isnan({row.metric: row for row in new}["snips"].estimate)
    if case == "inf":  # a non-finite denominator: ratio_linearization's error
        assert isinstance(new, tuple) and "only finite numbers" in new[1]


def test_negative_denominator_as_the_numpy_path(monkeypatch):
    """A negative per-user denominator: the kernel leaves the row to paired_difference (its checked path), as
    paired_differences does: the same row, or the same error."""
    d = _design_after()
    active = np.flatnonzero(d._acc[0] > 0)
    _, _, den_a, _ = _rows_of(d, "snips")  # (a row of impression counts is read as row 0: see below)
    assert den_a not in d._count_rows()
    d._acc[den_a, active[4]] = -0.5
    _same_outcome(*_both_ways(d, 2, monkeypatch))


def test_cf_paired_against_a_direct_formula():
    """The kernel's paired difference against the module docstring's formula in exact rational arithmetic on
    small integer sums (a check of the kernel independent of paired_difference)."""
    from fractions import Fraction

    rng = np.random.default_rng(3)
    for n in (2, 3, 17, 40):
        p = n + 5
        users = np.sort(rng.choice(p, n, replace=False))
        sums = np.zeros((4, p))
        sums[:, users] = rng.integers(0, 9, (4, n))
        sums[1, users] += 1
        sums[3, users] += 1
        out = np.empty(3)
        ck.cf_paired(sums[0], sums[1], sums[2], sums[3], users, np.empty((4, p)), out)
        x = [[Fraction(int(v)) for v in row[users]] for row in sums]
        ra, rb = sum(x[0]) / sum(x[1]), sum(x[2]) / sum(x[3])
        ya, yb = sum(x[1]) / n, sum(x[3]) / n
        dd = [(x[2][u] - rb * x[3][u]) / yb - (x[0][u] - ra * x[1][u]) / ya for u in range(n)]
        mean = sum(dd) / n
        var = sum((v - mean) ** 2 for v in dd) / (n * (n - 1))
        assert out[ck.CF_OK] == 1.0
        assert math.isclose(out[ck.CF_EST], float(rb - ra), rel_tol=1e-13, abs_tol=1e-15)
        assert math.isclose(out[ck.CF_SE], math.sqrt(float(var)), rel_tol=1e-13, abs_tol=1e-15)


# ----------------------------------------------------------------------------- plain Python
_SCRIPT = r"""
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np
from test_counterfactual_checkpoint_kernels import _config
from simulations.runner import build_replicate, replicate_seeds, world_seed
from simulations.users import UserModels
from simulations.world import build_world
cfg = _config(days=2, population=300)
world = build_world(cfg, world_seed(cfg.seed))
traffic, designs = build_replicate(cfg, world, UserModels.from_config(cfg.users), replicate_seeds(cfg.seed, 1)[0])
d = next(x for x in designs if x.kind == "counterfactual")
for hour in range(0, 48, 12):
    d.process(traffic.batch(hour, 12))
    if (hour + 12) % 24 == 0:
        d.checkpoint((hour + 12) // 24)
out = {{"rows": [[r.metric] + [float(getattr(r, f)).hex() for f in ("estimate", "se", "ci_low", "ci_high", "pvalue")]
                 for r in d.rows]}}
import numba
out["jit"] = not numba.config.DISABLE_JIT
print(json.dumps(out))
"""


def test_disable_jit_gives_the_same_numbers():
    from tests.test_simulation_kernels import compiled_and_plain

    compiled, plain = compiled_and_plain(_SCRIPT)
    assert compiled == plain


# ----------------------------------------------------------------------------- the support counts
def test_violation_counts_are_the_property():
    d = _design_after(days=1, population=300, logger={"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.3,
                                                      "n": 8})
    assert d.support_rows
    violations = d.violations
    assert ck.violation_counts(d) == [violations[key] for key in d.support_rows]
    d._query_count += np.arange(d._query_count.size)  # later counts: the matrix kept, the counts new
    violations = d.violations
    assert ck.violation_counts(d) == [violations[key] for key in d.support_rows]


# ----------------------------------------------------------------------------- the cheaper parts (helper 53)
@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint16])
def test_two_types_grouped_as_a_stable_sort(dtype):
    """group_rows with two types (its one-pass branch) against a stable argsort: random, all of one type (either),
    alternating, one row; nothing written past the rows."""
    rng = np.random.default_rng(11)
    cases = [rng.integers(0, 2, n) for n in (2, 15, 16, 17, 1000)]
    cases += [np.zeros(40, dtype=np.int64), np.ones(40, dtype=np.int64), np.arange(41) % 2, np.array([1]),
              np.array([0]), (rng.random(500) < 0.05).astype(np.int64)]
    for types in cases:
        types = types.astype(dtype)
        buffer, starts = np.full(types.size + 1, -7, dtype=np.intp), np.full(3, -7, dtype=np.int64)
        order = buffer[:types.size]
        counts = ck.group_rows(types, order, starts)
        assert buffer[-1] == -7
        assert counts.tolist() == np.bincount(types, minlength=2).tolist()
        assert starts.tolist() == [0, *np.cumsum(counts).tolist()]
        assert np.array_equal(order, np.argsort(types, kind="stable"))


def test_paired_counts_is_cf_paired_bit_for_bit():
    """cf_paired_counts (the impressions gathered once for both denominators) gives cf_paired's bits, including
    the rows it leaves to the NumPy path (a negative or all-zero denominator, a non-finite numerator)."""
    rng = np.random.default_rng(12)
    p = 500
    for case in range(8):
        imp = rng.integers(0, 4, p).astype(np.float64)
        num_a, num_b = rng.exponential(1.0, p) * imp, rng.exponential(1.2, p) * imp
        users = np.flatnonzero(imp > 0)
        if case == 5:
            imp[users[3]] = -1.0
        elif case == 6:
            imp[users] = 0.0
        elif case == 7:
            num_b[users[2]] = np.inf
        want, got = np.empty(3), np.empty(3)
        ck.cf_paired(num_a, imp, num_b, imp, users, np.empty((4, p)), want)
        ck.cf_paired_counts(num_a, num_b, imp, users, np.full((5, p), np.nan), got)
        assert np.array_equal(want, got, equal_nan=True), case
        assert (got[ck.CF_OK] == 1.0) == (case < 5)


def test_chunk_bounds():
    rng = np.random.default_rng(13)
    for n in (1, 7, 300):
        types, user = rng.integers(-3, 9, n).astype(np.int8), rng.integers(0, 10**6, n)
        assert ck.chunk_bounds(types, user) == (types.min(), types.max(), user.min(), user.max())


def test_kernel_rows_kept_until_the_count_rows_change():
    """The kernel's rows are made once and made again when the rows of all-ones denominators change (the general
    path decides them batch by batch) or the design's compiled step does."""
    d = _design_after(days=1, population=300)
    kept = ck._kernel_rows_of(d)
    assert np.array_equal(kept, ck._kernel_rows(d))
    assert ck._kernel_rows_of(d) is kept
    units = list(d._unit_rows)
    d._unit_rows.append(d._block + 3 * len(d._acc_labels))  # the first estimator's second denominator
    try:
        again = ck._kernel_rows_of(d)
        assert again is not kept and np.array_equal(again, ck._kernel_rows(d))
    finally:
        d._unit_rows[:] = units
    step = d._step
    d._step = None
    try:
        assert np.array_equal(ck._kernel_rows_of(d), ck._kernel_rows(d))
    finally:
        d._step = step
    assert np.array_equal(ck._kernel_rows_of(d), kept)
