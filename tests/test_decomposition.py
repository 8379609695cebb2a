"""The shrinkage decomposition (simulations.decomposition) against independent references.

References: every stage's per-query value recomputed by enumerating all click vectors of
k = 5 lists under the modified model, built here from the presets' published numbers
(Oosterhuis & de Rijke 2018 cascade presets; Ai et al. 2018 PBM), the DCG discount and
the exponential gain written out; the A/B truth of simulations.runner.compute_truth; the
report's offline numbers and shrinkage; clickmodels' own exact probabilities.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import clickmodels
from simulations.config import config_from_mapping, load_config
from simulations.decomposition import (
    CAUSES,
    FREQ_LABEL,
    ONLINE_METRICS,
    PRODUCT_TOLERANCE,
    STAGES,
    TOTAL_LABEL,
    decompose,
    decomposition_lines,
    decomposition_summary,
    online_metrics,
    order_averaged_factors,
)
from simulations.report import SHRINK_HEADER
from simulations.runner import (
    compute_truth,
    exact_ab_metrics,
    exact_ab_metrics_of,
    world_seed,
)
from simulations.users import UserModels
from simulations.world import build_world

ROOT = Path(__file__).resolve().parents[1]

NAV = ([0.05, 0.3, 0.5, 0.7, 0.95], [0.2, 0.3, 0.5, 0.7, 0.9])  # (click, stop) by grade 0..4
INF = ([0.4, 0.6, 0.7, 0.8, 0.9], [0.1, 0.2, 0.3, 0.4, 0.5])
PBM_EXAM = [0.68, 0.61, 0.48, 0.34, 0.28]
PBM_CLICK = [0.1 + 0.9 * (2.0**g - 1) / 15.0 for g in range(5)]
GAIN = [(2.0**g - 1) / 15.0 for g in range(5)]  # nDCG's exponential gain over the top grade's
DCG_C = [math.log2(r + 1) / math.log2(r + 2) for r in range(1, 5)] + [0.0]  # nDCG@5 continuation


def _config(types, depth=5, metric="nDCG@5", n_queries=40, **over):
    base = {
        "seed": 11,
        "replicates": 2,
        "workers": 1,
        "collection": {"type": "synthetic", "n_queries": n_queries, "candidates": 12,
                       "label_distribution": [0.5, 0.2, 0.15, 0.1, 0.05], "zipf_exponent": 1.0},
        "rankers": {"depth": depth, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.6}},
        "offline_metric": metric,
        "users": {"population": 300, "activity": {"sigma": 1.0}, "types": types},
        "traffic": {"days": 1, "queries_per_day": 300, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"}],
        "analysis": {"aa": False},
    }
    base.update(over)
    return config_from_mapping(base)


def _cascade_types():
    return [{"name": "navigational", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
            {"name": "informational", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]


def _world(config):
    return build_world(config, world_seed(config.seed)), UserModels.from_config(config.users)


# ---------------------------------------------------------------------------- brute force
def _enumerate_chain(a, c1, c0):
    """{click vector: probability} of one list by recursion over each rank's outcomes."""
    k = len(a)
    out: dict[tuple[int, ...], float] = {}

    def walk(r, clicks, prob):
        if r == k:
            out[clicks] = out.get(clicks, 0.0) + prob
            return
        for click, p_click in ((1, a[r]), (0, 1.0 - a[r])):
            p = prob * p_click
            if p == 0:
                continue
            go = c1[r] if click else c0[r]
            rest = (0,) * (k - r - 1)
            if go < 1:  # stop here: nothing below is clicked
                key = (*clicks, click, *rest)
                out[key] = out.get(key, 0.0) + p * (1.0 - go)
            if go > 0:
                walk(r + 1, (*clicks, click), p * go)

    walk(0, (), 1.0)
    return out


def _enumerate_independent(p):
    out = {}
    for clicks in itertools.product((0, 1), repeat=len(p)):
        out[clicks] = math.prod(pi if c else 1.0 - pi for pi, c in zip(p, clicks))
    return out


#: nDCG@5's C/W/L weights (the discounts over their sum): the utility metric's clicks weights
UTILITY_W = [1 / math.log2(r + 1) / sum(1 / math.log2(j + 1) for j in range(1, 6)) for r in range(1, 6)]


def _metrics_of(dist):
    clicks = sum(prob * sum(c) for c, prob in dist.items())
    rr = sum(prob * (1.0 / (c.index(1) + 1)) for c, prob in dist.items() if 1 in c)
    aband = sum(prob for c, prob in dist.items() if 1 not in c)
    utility = sum(prob * sum(w for w, ci in zip(UTILITY_W, c) if ci) for c, prob in dist.items())
    return {"clicks_per_query": clicks, "reciprocal_rank": rr, "abandonment": aband, "utility": utility}


def _brute(labels, per_slot, weights):
    """Weighted metrics; ``per_slot(grades) -> [(share, ('chain', a, c1, c0) | ('ind', p))]``."""
    acc = {m: 0.0 for m in (*ONLINE_METRICS, "utility")}
    for q in range(labels.shape[0]):
        grades = [int(g) for g in labels[q]]
        for share, spec in per_slot(grades):
            dist = _enumerate_chain(*spec[1:]) if spec[0] == "chain" else _enumerate_independent(spec[1])
            for m, v in _metrics_of(dist).items():
                acc[m] += weights[q] * share * v
    return acc


def _cascade(tables, grades, *, click=None, cont=None, sat=True):
    """Cascade (after_click) slots; ``click`` replaces the attractiveness, ``cont`` the examination
    (then the stop after a click multiplies it), ``sat=False`` removes the stop after a click."""
    a = [(click or tables[0])[g] for g in grades]
    c0 = [1.0] * len(grades) if cont is None else list(cont)
    c1 = [c0[r] * ((1.0 - tables[1][g]) if sat else 1.0) for r, g in enumerate(grades)]
    return ("chain", a, c1, c0)


@pytest.fixture(scope="module")
def cascade_world():
    config = _config(_cascade_types())
    world, users = _world(config)
    return config, world, users, decompose(world, users, config.offline_metric)


@pytest.mark.parametrize("utility", [False, True])
def test_every_stage_equals_brute_force_enumeration(cascade_world, utility):
    """Every stage and variant of every metric (with ``utility``: also the utility metric's, nDCG@5's weights on the
    clicks; the other metrics' values unchanged by it)."""
    config, world, users, dec = cascade_world
    metrics = ONLINE_METRICS
    if utility:
        from simulations.designs.ab import utility_weights

        np.testing.assert_allclose(utility_weights(world, 5), UTILITY_W, rtol=1e-14)
        dec = decompose(world, users, config.offline_metric, utility_weights(world, 5))
        metrics = (*ONLINE_METRICS, "utility")
    f = world.frequency
    uniform = np.full(world.n_queries, 1.0 / world.n_queries)
    stages = {
        "W2": (lambda g: [(1.0, ("chain", [GAIN[x] for x in g], DCG_C, DCG_C))], f),
        "W3": (lambda g: [(1.0, ("chain", [NAV[0][x] for x in g], DCG_C, DCG_C))], f),
        "W4": (lambda g: [(1.0, _cascade(NAV, g, sat=False))], f),
        "W5": (lambda g: [(1.0, _cascade(NAV, g))], f),
        "W6": (lambda g: [(0.6, _cascade(NAV, g)), (0.4, _cascade(INF, g))], f),
        "-frequency": (lambda g: [(0.6, _cascade(NAV, g)), (0.4, _cascade(INF, g))], uniform),
        "-attractiveness": (lambda g: [(0.6, _cascade(NAV, g, click=GAIN)), (0.4, _cascade(INF, g, click=GAIN))], f),
        "-examination": (lambda g: [(0.6, _cascade(NAV, g, cont=DCG_C)), (0.4, _cascade(INF, g, cont=DCG_C))], f),
        "-satisfaction": (lambda g: [(0.6, _cascade(NAV, g, sat=False)), (0.4, _cascade(INF, g, sat=False))], f),
        "-mixture": (lambda g: [(1.0, _cascade(NAV, g))], f),
    }
    for ranker in ("A", "B"):
        labels = world.ranked_labels(ranker)
        assert (labels >= 0).all()
        for key, (per_slot, w) in stages.items():
            ref = _brute(labels, per_slot, w)
            assert set(dec.values[key][ranker]) == set(metrics)
            for m in metrics:
                assert dec.values[key][ranker][m] == pytest.approx(ref[m], rel=1e-12, abs=1e-14), (key, ranker, m)


def test_the_utility_metric_in_the_summary_and_its_w6_equal_the_ab_designs_truth():
    """With an A/B design of metric utility: the decomposition's utility column, whose W6 is that design's exact
    truth (simulations.runner.compute_truth), on a PBM + cascade population (an independent-click type too)."""
    types = [*_cascade_types()[:1], {"name": "pbm", "share": 0.4, "click_model": {"name": "pbm", "preset": "ai2018"}}]
    config = _config(types, designs=[{"name": "ab", "type": "ab", "metric": "utility"}])
    world, users = _world(config)
    s = decomposition_summary(world, users, config.offline_metric, utility=True)
    assert set(s["metrics"]) == {*ONLINE_METRICS, "utility"}
    assert set(decomposition_summary(world, users, config.offline_metric)["metrics"]) == set(ONLINE_METRICS)
    truth = {t.metric: t for t in compute_truth(config, world, users) if t.design == "ab"}["utility"]
    e = s["metrics"]["utility"]
    assert e["stages"]["W6"]["B"] - e["stages"]["W6"]["A"] == pytest.approx(truth.value, rel=1e-12, abs=1e-15)
    assert e["stages"]["W6"]["A"] == pytest.approx(truth.baseline, rel=1e-12)
    assert math.prod(x["factor"] for x in e["sequential"]) == pytest.approx(e["total"], rel=PRODUCT_TOLERANCE)


def test_offline_stages_and_w6_match_the_report(cascade_world):
    config, world, users, _dec = cascade_world
    off = world.offline
    s = decomposition_summary(world, users, config.offline_metric)
    truths = {t.metric: t for t in compute_truth(config, world, users) if t.design == "ab"}
    for m in ONLINE_METRICS:
        e = s["metrics"][m]
        g0 = (off.uniform["B"] - off.uniform["A"]) / off.uniform["A"]
        g1 = (off.weighted["B"] - off.weighted["A"]) / off.weighted["A"]
        assert e["stages"]["W0"]["relative_improvement"] == pytest.approx(g0, rel=1e-13)
        assert e["stages"]["W1"]["relative_improvement"] == pytest.approx(g1, rel=1e-13)
        t = truths[m]
        assert e["stages"]["W6"]["B"] - e["stages"]["W6"]["A"] == pytest.approx(t.value, rel=1e-12, abs=1e-15)
        assert e["stages"]["W6"]["A"] == pytest.approx(t.baseline, rel=1e-12)
        sign = -1 if m == "abandonment" else 1
        assert e["shrinkage_vs_offline"] == pytest.approx(sign * t.value / t.baseline / g1, rel=1e-11)


def test_dominant_type_stages_match_clickmodels_own_exact_values(cascade_world):
    _, world, _users, dec = cascade_world
    nav = UserModels(["nav"], [1.0], [clickmodels.build({"name": "cascade", "preset": "navigational"})])
    own = UserModels(["metric"], [1.0], [clickmodels.build({"name": "metric", "metric": "nDCG@5", "click": GAIN})])
    for ranker in ("A", "B"):
        shown = world.ranked_labels(ranker)
        for key, model in (("W5", nav), ("W2", own)):
            ref = exact_ab_metrics_of(model, shown)
            for m in ONLINE_METRICS:
                assert dec.values[key][ranker][m] == pytest.approx(float(world.frequency @ ref[m]), rel=1e-12)


@pytest.mark.parametrize("path", ["configs/ab.yaml", "configs/counterfactual.yaml"])
def test_sequential_factors_multiply_back_on_the_bundled_configs(path):
    config = load_config(ROOT / path)
    world, users = _world(config)
    s = decomposition_summary(world, users, config.offline_metric)
    assert s["status"] == "ok"
    for m, e in s["metrics"].items():
        g = {k: v["relative_improvement"] for k, v in e["stages"].items()}
        assert e["total"] == pytest.approx(g["W6"] / g["W0"], rel=1e-15)
        assert math.prod(x["factor"] for x in e["sequential"]) == pytest.approx(e["total"], rel=PRODUCT_TOLERANCE)
        assert e["product_sequential"] == pytest.approx(e["total"], rel=PRODUCT_TOLERANCE)
        phis = [e["one_at_a_time"][c]["factor"] for c in CAUSES]
        assert e["residual"] == pytest.approx(e["total"] / (e["scale_factor"] * math.prod(phis)), rel=1e-12)
        # W6 is the exact online truth (what compute_truth gives an A/B design)
        truth = {r: float(world.frequency @ exact_ab_metrics(world, users, r)[m]) for r in ("A", "B")}
        assert e["stages"]["W6"]["A"] == pytest.approx(truth["A"], rel=1e-12)
        assert e["stages"]["W6"]["B"] == pytest.approx(truth["B"], rel=1e-12)
        avg = e["order_averaged"]
        if avg["factors"] is not None:
            assert avg["product"] == pytest.approx(e["total"], rel=PRODUCT_TOLERANCE)
        else:
            assert "changes sign" in avg["reason"] and e["sign_changes"]
        # a sign change is listed exactly where the improvement has the other sign than the offline gain
        flips = [k for k, v in g.items() if v * g["W0"] < 0]
        assert [k for k in e["sign_changes"] if not k.startswith("-")] == flips


def test_first_click_metrics_do_not_see_stopping_after_a_click(cascade_world):
    # RR and abandonment depend only on P(C_r | no click above), which cont_click never enters
    config, world, users, _dec = cascade_world
    s = decomposition_summary(world, users, config.offline_metric)
    for m in ("reciprocal_rank", "abandonment"):
        e = s["metrics"][m]
        assert e["sequential"][4]["cause"] == "satisfaction"
        assert e["sequential"][4]["factor"] == pytest.approx(1.0, abs=1e-12)
        assert e["one_at_a_time"]["satisfaction"]["factor"] == pytest.approx(1.0, abs=1e-12)
    assert s["metrics"]["clicks_per_query"]["sequential"][4]["factor"] != pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("click", [GAIN, [0.1, 0.2, 0.4, 0.6, 0.8]])
def test_the_metrics_own_user_gives_factors_of_one(click):
    config = _config([{"name": "metric", "share": 1.0,
                       "click_model": {"name": "metric", "metric": "nDCG@5", "click": click}}])
    world, users = _world(config)
    s = decomposition_summary(world, users, config.offline_metric)
    for e in s["metrics"].values():
        f = {x["cause"]: x["factor"] for x in e["sequential"]}
        for cause in ("examination", "satisfaction", "mixture"):
            assert f[cause] == pytest.approx(1.0, abs=1e-12), cause
        for cause in ("examination", "satisfaction", "mixture"):
            assert e["one_at_a_time"][cause]["factor"] == pytest.approx(1.0, abs=1e-12), cause
        if click is GAIN:
            assert f["attractiveness"] == pytest.approx(1.0, abs=1e-12)
            assert e["one_at_a_time"]["attractiveness"]["factor"] == pytest.approx(1.0, abs=1e-12)
        else:
            assert f["attractiveness"] != pytest.approx(1.0, abs=1e-6)


def test_pbm_users_stay_independent_and_match_enumeration():
    types = [{"name": "pbm", "share": 0.7, "click_model": {"name": "pbm", "preset": "ai2018"}},
             {"name": "cascade", "share": 0.3, "click_model": {"name": "cascade", "preset": "navigational"}}]
    config = _config(types, n_queries=25)
    world, users = _world(config)
    dec = decompose(world, users, config.offline_metric)
    f = world.frequency
    stages = {
        "W4": lambda g: [(1.0, ("ind", [e * PBM_CLICK[x] for e, x in zip(PBM_EXAM, g)]))],
        "W5": lambda g: [(1.0, ("ind", [e * PBM_CLICK[x] for e, x in zip(PBM_EXAM, g)]))],
        "W6": lambda g: [(0.7, ("ind", [e * PBM_CLICK[x] for e, x in zip(PBM_EXAM, g)])), (0.3, _cascade(NAV, g))],
        # without its own examination the PBM user examines like the metric's (chain) user
        "-examination": lambda g: [(0.7, ("chain", [PBM_CLICK[x] for x in g], DCG_C, DCG_C)),
                                   (0.3, _cascade(NAV, g, cont=DCG_C))],
        "W2": lambda g: [(1.0, ("chain", [GAIN[x] for x in g], DCG_C, DCG_C))],
        "W3": lambda g: [(1.0, ("chain", [PBM_CLICK[x] for x in g], DCG_C, DCG_C))],
        "-attractiveness": lambda g: [(0.7, ("ind", [e * GAIN[x] for e, x in zip(PBM_EXAM, g)])),
                                      (0.3, _cascade(NAV, g, click=GAIN))],
    }
    for ranker in ("A", "B"):
        labels = world.ranked_labels(ranker)
        for key, per_slot in stages.items():
            ref = _brute(labels, per_slot, f)
            for m in ONLINE_METRICS:
                assert dec.values[key][ranker][m] == pytest.approx(ref[m], rel=1e-12, abs=1e-14), (key, m)


def test_pbm_is_not_a_chain_with_ratio_continuation():
    # why PBM is not reduced to a chain: c = e_(r+1)/e_r keeps the click marginals but not
    # the first-click distribution (the module docstring's counter-example)
    e = np.array([1.0, 0.6, 0.5])
    a = np.full(3, 0.5)
    cont = np.append(e[1:] / e[:-1], 0.0)
    chain = _metrics_of(_enumerate_chain(list(a), list(cont), list(cont)))
    pbm = _metrics_of(_enumerate_independent(list(e * a)))
    assert chain["clicks_per_query"] == pytest.approx(pbm["clicks_per_query"], rel=1e-14)
    assert chain["abandonment"] != pytest.approx(pbm["abandonment"], rel=1e-3)
    # P(first = 3): e3 a (1-a)^2 in the chain, e3 a (1 - e1 a)(1 - e2 a) in PBM
    first3_chain = 0.5 * 0.5 * 0.5**2
    first3_pbm = 0.5 * 0.5 * (1 - 0.5) * (1 - 0.6 * 0.5)
    from clickmodels.cascade import Chain
    from simulations.decomposition import Independent

    p_chain = online_metrics(Chain(a[None], cont[None], cont[None]), (1, 3))
    p_ind = online_metrics(Independent(e[None], a[None]), (1, 3))
    assert chain["reciprocal_rank"] == pytest.approx(float(p_chain["reciprocal_rank"][0]), rel=1e-14)
    assert pbm["reciprocal_rank"] == pytest.approx(float(p_ind["reciprocal_rank"][0]), rel=1e-14)
    assert p_chain["reciprocal_rank"][0] - p_ind["reciprocal_rank"][0] == pytest.approx(
        (first3_chain - first3_pbm) / 3, rel=1e-12)


def test_not_decomposable_models_and_metrics_say_why(cascade_world):
    config, world, users, _ = cascade_world
    ubm = UserModels(["ubm"], [1.0], [clickmodels.build(dict(clickmodels.model_class("ubm").example_spec))])
    s = decomposition_summary(world, ubm, config.offline_metric)
    assert s["status"] == "not_decomposable" and "metrics" not in s
    assert s["reason"].startswith("not decomposable for ubm:")
    lines = decomposition_lines({"decomposition": s})
    assert any("not decomposable for ubm" in x for x in lines)
    s = decomposition_summary(world, users, "AP")
    assert s["status"] == "not_decomposable" and "no C/W/L user model" in s["reason"]


def test_simulate_prints_and_saves_the_decomposition(tmp_path):
    import json

    from simulations.job import simulate
    from simulations.report import terminal_summary

    config = _config(_cascade_types())
    result = simulate(config, output=tmp_path / "out", workers=1)
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    dec = saved["decomposition"]
    assert dec["status"] == "ok" and [s["key"] for s in dec["stages"]] == [k for k, _, _ in STAGES]
    for m, e in dec["metrics"].items():
        report = saved["designs"]["ab"][m]["shrinkage_vs_offline"]
        assert e["shrinkage_vs_offline"] == pytest.approx(report, rel=1e-12)
    text = terminal_summary(result)
    assert "Why the online effect shrinks" in text
    assert "user-type mixture (W6)" in text
    # the numbers as the main table writes them (report.py): factors 3 significant figures with their trailing
    # zeros, relative improvements to 0.1%, read back against summary.json rounded here
    lines = text.splitlines()
    names = list(dec["metrics"])
    freq = next(ln for ln in lines if ln.startswith("  " + FREQ_LABEL))[len("  " + FREQ_LABEL):].split()
    total = next(ln for ln in lines if ln.startswith("  " + TOTAL_LABEL))[len("  " + TOTAL_LABEL):].split()
    w0 = next(ln for ln in lines if ln.startswith("  offline ") and "(W0)" in ln).split()[-len(names):]
    w6 = next(ln for ln in lines if ln.startswith("  online, exact truth (W6)")).split()[-len(names):]
    header = next(ln for ln in lines if ln.strip().startswith("design") and SHRINK_HEADER in ln)
    start = header.index(SHRINK_HEADER)
    for i, m in enumerate(names):
        e = dec["metrics"][m]
        assert freq[i] == _three_significant(e["shrinkage_vs_offline"])
        assert total[3 * i] == _three_significant(e["total"])
        for cells, stage in ((w0, "W0"), (w6, "W6")):
            g = e["stages"][stage]["relative_improvement"]
            assert cells[i].endswith("%") and len(cells[i].split(".")[1]) == 2  # one decimal and '%'
            assert float(cells[i][:-1]) == pytest.approx(100 * g, abs=0.05 + 1e-9), (m, stage)
        # the main table's shrink cell, under its header, is the same text
        row = next(ln for ln in lines if ln.startswith("  ") and ln[:40].split()[-1:] == [m])
        assert row[start:start + len(SHRINK_HEADER)].strip() == freq[i], m


def _three_significant(x: float) -> str:
    """``x`` to 3 significant figures with trailing zeros, by counting digits (not the code's format)."""
    exponent = math.floor(math.log10(abs(x)))
    assert -4 <= exponent < 3  # plain decimals in this range
    decimals = max(0, 2 - exponent)
    text = f"{round(x, decimals):.{decimals}f}"
    assert len(text.lstrip("-").replace(".", "").lstrip("0")) == 3
    return text


@pytest.mark.parametrize(("value", "text"), [
    (-0.1, "-0.100"), (0.25, "0.250"), (1.0, "1.00"), (0.0929, "0.0929"), (123.4, "123"), (-12.34, "-12.3"),
    (7.17e-05, "7.17e-05"), (-7.17e-05, "-7.2e-05"), (-123456.0, "-1.2e+05"), (None, "-"),
])
def test_factor_cells_as_the_main_table_writes_ratios(value, text):
    """The factors' cells: 3 significant figures with trailing zeros (the main table's -0.100, was .3g's -0.1),
    2 only where 3 would not fit the 8 characters of a cell."""
    causes = [c for _, c, _ in STAGES[1:]]
    metric = {"stages": {"W0": {"relative_improvement": 0.0449}, "W6": {"relative_improvement": -0.0164}},
              "sequential": [{"factor": value} for _ in causes],
              "order_averaged": {"scale_uniform": value, "factors": {c: value for c in causes}, "product": value},
              "one_at_a_time": {c: {"factor": value, "reason": None} for c in causes},
              "total": value, "one_at_a_time_product": value, "residual": value, "sign_changes": [],
              "shrinkage_vs_offline": value}
    lines = decomposition_lines({"decomposition": {
        "status": "ok", "metrics": {"reciprocal_rank": metric}, "conventions": {"offline_metric": "nDCG@10"},
        "dominant_type": "all"}})
    for label in (TOTAL_LABEL, FREQ_LABEL):
        assert set(next(ln for ln in lines if ln.startswith("  " + label))[len("  " + label):].split()) == {text}
    assert next(ln for ln in lines if "(W0)" in ln).split()[-1] == "+4.5%"
    assert next(ln for ln in lines if "(W6)" in ln and ln.startswith("  online")).split()[-1] == "-1.6%"


def test_order_averaged_factors_are_the_mean_over_all_orders():
    # reference: the geometric mean over all 5! orders of each cause's sequential factor
    rng = np.random.default_rng(3)
    subsets = [frozenset(c) for n in range(len(CAUSES) + 1) for c in itertools.combinations(CAUSES, n)]
    g = {s: float(rng.uniform(0.1, 2.0)) for s in subsets}
    got = order_averaged_factors(g)
    assert isinstance(got, dict)
    logs = {c: [] for c in CAUSES}
    for order in itertools.permutations(CAUSES):
        on: frozenset[str] = frozenset()
        for c in order:
            logs[c].append(math.log(g[on | {c}] / g[on]))
            on = on | {c}
    for c in CAUSES:
        assert got[c] == pytest.approx(math.exp(sum(logs[c]) / len(logs[c])), rel=1e-12)
    assert math.prod(got.values()) == pytest.approx(g[frozenset(CAUSES)] / g[frozenset()], rel=1e-12)
    g[frozenset({"mixture"})] = -0.5
    assert "changes sign" in order_averaged_factors(g)


def test_every_variant_of_the_lattice_equals_brute_force(cascade_world):
    # all 32 subsets of causes switched on, rebuilt here from the presets for ranker B
    _, world, _users, dec = cascade_world
    labels = world.ranked_labels("B")
    uniform = np.full(world.n_queries, 1.0 / world.n_queries)
    for on, value in dec.states.items():
        def per_slot(g, on=on):
            out = []
            for share, tables in ((0.6, NAV), (0.4, INF)) if "mixture" in on else ((1.0, NAV),):
                click = None if "attractiveness" in on else GAIN
                cont = None if "examination" in on else DCG_C
                out.append((share, _cascade(tables, g, click=click, cont=cont, sat="satisfaction" in on)))
            return out

        ref = _brute(labels, per_slot, world.frequency if "frequency" in on else uniform)
        for m in ONLINE_METRICS:
            assert value["B"][m] == pytest.approx(ref[m], rel=1e-12, abs=1e-14), (sorted(on), m)
    assert len(dec.states) == 32


def test_a_model_that_goes_on_more_after_a_click_cannot_lose_its_examination_alone():
    # CCM with tau2 > tau1: c1 / c0 > 1, so "the metric's examination with its stop after a click"
    # would need a continuation above 1; that variant is refused with its reason, the rest stands
    types = [{"name": "ccm", "share": 1.0,
              "click_model": {"name": "ccm", "click": NAV[0], "tau1": 0.5, "tau2": 0.9, "tau3": 0.95}}]
    config = _config(types)
    world, users = _world(config)
    s = decomposition_summary(world, users, config.offline_metric)
    assert s["status"] == "ok"
    for e in s["metrics"].values():
        ex = e["one_at_a_time"]["examination"]
        assert ex["factor"] is None and "c1 > c0" in ex["reason"]
        assert e["order_averaged"]["factors"] is None and e["order_averaged"]["reason"]
        assert e["product_sequential"] == pytest.approx(e["total"], rel=PRODUCT_TOLERANCE)
    assert "examination alone" in "\n".join(decomposition_lines({"decomposition": s}))
