"""Metric definitions against hand-worked values (worked examples, closed forms)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import polygamma

from onlineeval.errors import ConfigError, InputError
from onlineeval.metrics import (
    AP,
    ERR,
    NDCG,
    RBP,
    REGISTRY,
    LabelBatch,
    Metric,
    parse_metric,
    parse_metrics,
)
from onlineeval.metrics.base import EvalContext

L2 = math.log2

# ---------------------------------------------------------------- the golden set
# rel {d025: 2, d031: 1}; A = (d031, d012, d025, d040, d007), B = (d025, d031, ...),
# C = (d012, d040, d025, d031, d007); grades in rank order below.
GOLD_RANKED = np.array([[1, 0, 2, 0, 0], [2, 1, 0, 0, 0], [0, 0, 2, 1, 0]])
GOLD_JUDGED = np.array([[2, 1]] * 3)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("Recall@5", [1.0, 1.0, 1.0]),
        ("P@5", [0.4, 0.4, 0.4]),
        ("RR", [1.0, 1.0, 1 / 3]),
        ("AP", [(1 + 2 / 3) / 2, 1.0, (1 / 3 + 2 / 4) / 2]),
        (
            "nDCG@5",
            [
                (1 + 3 / L2(4)) / (3 + 1 / L2(3)),
                1.0,
                (3 / L2(4) + 1 / L2(5)) / (3 + 1 / L2(3)),
            ],
        ),
    ],
)
def test_golden_set(name: str, expected: list[float]) -> None:
    got = parse_metric(name).evaluate_labels(GOLD_RANKED, GOLD_JUDGED)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


def test_golden_set_printed_values() -> None:
    table = {
        "Recall@5": [1.000, 1.000, 1.000],
        "P@5": [0.400, 0.400, 0.400],
        "RR": [1.000, 1.000, 0.333],
        "AP": [0.833, 1.000, 0.417],
        "nDCG@5": [0.689, 1.000, 0.532],
    }
    for name, printed in table.items():
        got = parse_metric(name).evaluate_labels(GOLD_RANKED, GOLD_JUDGED)
        np.testing.assert_array_equal(np.round(got, 3), printed)


def test_dcg_gain_examples() -> None:
    ranked = np.array([[2, -1], [1, 1]])
    exp = parse_metric("DCG@5").evaluate_labels(ranked, ranked)
    lin = parse_metric("DCG(gain='linear')@5").evaluate_labels(ranked, ranked)
    np.testing.assert_allclose(exp, [3.0, 1 + 1 / L2(3)], atol=1e-12)
    np.testing.assert_allclose(lin, [2.0, 1 + 1 / L2(3)], atol=1e-12)
    assert round(float(exp[1]), 3) == 1.631


def test_gain_table_and_context() -> None:
    m = parse_metric("DCG(gain='1=3,2=9')@2")
    got = m.evaluate_labels(np.array([[2, 1]]), np.array([[2, 1]]))
    np.testing.assert_allclose(got, [9 + 3 / L2(3)])
    batch = LabelBatch.from_labels(np.array([[2, 1]]), np.array([[2, 1]]))
    from onlineeval.conventions import LINEAR

    np.testing.assert_allclose(parse_metric("DCG@2").compute(batch, EvalContext(1, LINEAR)), [2 + 1 / L2(3)])


def test_ndcg_ideal_from_judged_cut_at_k_not_r() -> None:
    # three relevant judged docs, k = 2: ideal uses the best two gains
    ranked = np.array([[0, 1]])
    judged = np.array([[1, 1, 1, 0]])
    got = parse_metric("nDCG(gain='linear')@2").evaluate_labels(ranked, judged)
    np.testing.assert_allclose(got, [(1 / L2(3)) / (1 + 1 / L2(3))])


def test_err_rbp_hand_values() -> None:
    ranked = np.array([[2, 0, 1, -1]])
    judged = np.array([[2, 1, 0]])
    r1, r3 = 3 / 4, 1 / 4
    err = r1 + (1 - r1) * r3 / 3
    np.testing.assert_allclose(parse_metric("ERR@5").evaluate_labels(ranked, judged), [err])
    np.testing.assert_allclose(parse_metric("ERR@2").evaluate_labels(ranked, judged), [r1])
    rbp = 0.2 * (1 + 0.8**2)
    np.testing.assert_allclose(parse_metric("RBP(p=0.8)").evaluate_labels(ranked, judged), [rbp])
    casc = ERR().cascade(ranked, judged)
    np.testing.assert_allclose(casc.satisfaction[0], [r1, 0, r3, 0])
    np.testing.assert_allclose(casc.examination[0], [1, 1 - r1, 1 - r1, (1 - r1) * (1 - r3)])
    np.testing.assert_allclose((casc.stop / np.arange(1, 5)).sum(axis=1), [err])


def test_success_recall_rprec_unjudged() -> None:
    ranked = np.array([[0, 1, 0, 1], [0, 0, 0, 0]])
    judged = np.array([[1, 1, 1, 0], [1, 0, -1, -1]])
    assert parse_metric("Success@1").evaluate_labels(ranked, judged).tolist() == [0.0, 0.0]
    assert parse_metric("Success@2").evaluate_labels(ranked, judged).tolist() == [1.0, 0.0]
    np.testing.assert_allclose(parse_metric("Recall@2").evaluate_labels(ranked, judged), [1 / 3, 0])
    np.testing.assert_allclose(parse_metric("RPrec").evaluate_labels(ranked, judged), [1 / 3, 0])
    np.testing.assert_allclose(parse_metric("P@10").evaluate_labels(ranked, judged), [0.2, 0])


def test_bpref_infap_with_codes() -> None:
    # codes: rel, nonpool, judged-nonrel, rel, pooled-unjudged, rel ; R = 4, N = 2
    codes = np.array([[1, -1, 0, 1, -2, 1]])
    judged = np.array([[1, 1, 1, 1, 0, 0]])
    batch = LabelBatch(codes, judged)
    bpref = parse_metric("bpref").compute(batch)
    np.testing.assert_allclose(bpref, [(1 + (1 - 1 / 2) + (1 - 1 / 2)) / 4])
    eps = 1e-5
    # positions j (0-based): 0 -> 1; j=3: r=1, n=1, u=0; j=5: r=2, n=1, u=1
    t3 = 1 / 4 + (3 / 4) * ((1 + 1 + 0) / 3) * ((1 + eps) / (1 + 1 + 2 * eps))
    t5 = 1 / 6 + (5 / 6) * ((2 + 1 + 1) / 5) * ((2 + eps) / (2 + 1 + 2 * eps))
    np.testing.assert_allclose(parse_metric("infAP").compute(batch), [(1 + t3 + t5) / 4])
    np.testing.assert_allclose(parse_metric("unj@4").compute(batch), [1 / 4])
    np.testing.assert_allclose(parse_metric("Unjudged@10").compute(batch), [2 / 10])


def test_interpolated_precision() -> None:
    ranked = np.array([[1, 0, 1, 0, 0, 1]])
    judged = np.array([[1, 1, 1, 1]])  # R = 4, three retrieved
    p = [1.0, 2 / 3, 3 / 6]
    # level 0.5 -> 2 relevant: max precision at or after rank 3 = max(2/3, 1/2)
    np.testing.assert_allclose(parse_metric("IPrec(recall=0.5)").evaluate_labels(ranked, judged), [2 / 3])
    np.testing.assert_allclose(parse_metric("IPrec(recall=0.0)").evaluate_labels(ranked, judged), [1.0])
    np.testing.assert_allclose(parse_metric("IPrec(recall=1.0)").evaluate_labels(ranked, judged), [0.0])
    # round(level * 4) relevant docs: 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4 (0 -> as for 1)
    levels = [1.0, 1.0, 1.0, 1.0, p[1], p[1], p[1], p[2], p[2], 0.0, 0.0]
    np.testing.assert_allclose(parse_metric("11pt").evaluate_labels(ranked, judged), [np.mean(levels)])


def test_ap_cutoff_denominators() -> None:
    ranked = np.array([[1, 0, 1]])
    judged = np.array([[1, 1, 1, 1]])
    np.testing.assert_allclose(parse_metric("AP@2").evaluate_labels(ranked, judged), [1 / 4])
    np.testing.assert_allclose(
        parse_metric("AP(denominator='min_r_k')@2").evaluate_labels(ranked, judged), [1 / 2]
    )


def test_empty_queries_score_zero() -> None:
    ranked = np.array([[0, 0, -1]])
    judged = np.array([[0, 0, -1]])
    for name in ["P@5", "RR", "AP", "nDCG@5", "ERR@5", "RBP(p=0.5)", "bpref", "Recall@3", "RPrec"]:
        assert parse_metric(name).evaluate_labels(ranked, judged).tolist() == [0.0], name


def test_caller_arrays_untouched() -> None:
    ranked = GOLD_RANKED.copy()
    judged = GOLD_JUDGED.copy()
    for name in REGISTRY:
        m = parse_metric(name + ("@3" if REGISTRY[name].cutoff == "required" else ""))
        m.evaluate_labels(ranked, judged)
    np.testing.assert_array_equal(ranked, GOLD_RANKED)
    np.testing.assert_array_equal(judged, GOLD_JUDGED)


# ---------------------------------------------------------------- C/W/L profiles

R = np.array([[0, 1, 0, 1], [0, 0, 0, 0]])


def test_cwl_precision() -> None:
    c = parse_metric("P@3").cwl(R)
    np.testing.assert_allclose(c.continuation, [[1, 1, 0, 0]] * 2)
    np.testing.assert_allclose(c.weight, [[1 / 3, 1 / 3, 1 / 3, 0]] * 2)
    np.testing.assert_allclose(c.last, [[0, 0, 1, 0]] * 2)
    c6 = parse_metric("P@6").cwl(R)  # horizon beyond the window
    np.testing.assert_allclose(c6.weight, [[1 / 6] * 4] * 2)


def test_cwl_rr() -> None:
    c = parse_metric("RR").cwl(R)
    np.testing.assert_allclose(c.continuation, [[1, 0, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_allclose(c.weight, [[0.5, 0.5, 0, 0], [0, 0, 0, 0]])
    np.testing.assert_allclose(c.last, [[0, 1, 0, 0], [0, 0, 0, 0]])
    c3 = parse_metric("RR@3").cwl(R)
    np.testing.assert_allclose(c3.weight[1], [1 / 3, 1 / 3, 1 / 3, 0])
    np.testing.assert_allclose(c3.last[1], [0, 0, 1, 0])


def test_cwl_rbp() -> None:
    c = parse_metric("RBP(p=0.5)").cwl(R)
    np.testing.assert_allclose(c.continuation, np.full((2, 4), 0.5))
    np.testing.assert_allclose(c.weight[0], [0.5, 0.25, 0.125, 0.0625])
    np.testing.assert_allclose(c.last[0], [0.5, 0.25, 0.125, 0.0625])


def test_cwl_dcg() -> None:
    c = parse_metric("DCG@3").cwl(R)
    z = 1 + 1 / L2(3) + 1 / L2(4)
    np.testing.assert_allclose(c.continuation[0], [1 / L2(3), L2(3) / L2(4), 0, 0])
    np.testing.assert_allclose(c.weight[0], [1 / z, 1 / (z * L2(3)), 1 / (z * L2(4)), 0])
    np.testing.assert_allclose(c.last[0], [1 - 1 / L2(3), 1 / L2(3) - 1 / L2(4), 1 / L2(4), 0])


def test_cwl_insq_closed_form() -> None:
    T = 1.5
    c = parse_metric(f"INSQ(T={T})").cwl(R)
    i = np.arange(1, 5)
    np.testing.assert_allclose(c.continuation[0], ((i + 2 * T - 1) / (i + 2 * T)) ** 2)
    np.testing.assert_allclose(c.weight[0], 1 / ((i + 2 * T - 1) ** 2 * polygamma(1, 2 * T)))


def test_cwl_inst_hand_values() -> None:
    # T = 1, gains (1, 0): T_1 = 0, T_2 = 0; C(1) = ((1+1+0-1)/(1+1+0))^2 = 1/4,
    # C(2) = (2/3)^2; after the window C(i) = ((i)/(i+1))^2, a = 1.
    c = parse_metric("INST(T=1)").cwl(np.array([[1, 0]]))
    np.testing.assert_allclose(c.continuation[0], [1 / 4, 4 / 9])
    reach = np.array([1.0, 1 / 4])
    tail = (1 / 4) * (4 / 9) * 9 * polygamma(1, 3)  # reach(3) (d+a)^2 psi1(d+a), d=2, a=1
    total = reach.sum() + tail
    np.testing.assert_allclose(c.weight[0], reach / total)
    inst = parse_metric("INST(T=1)").evaluate_labels(np.array([[1, 0]]), np.array([[1]]))
    np.testing.assert_allclose(inst, [1 / total])


@pytest.mark.parametrize("name", ["P@3", "RR", "RR@2", "RBP(p=0.7)", "RBP(p=0.7)@3", "INSQ(T=2)", "INST(T=2)"])
def test_cwl_expected_rate_of_gain_is_the_metric(name: str) -> None:
    rng = np.random.default_rng(5)
    ranked = rng.integers(-1, 3, size=(50, 8))
    judged = np.concatenate([np.maximum(ranked, 0), rng.integers(0, 3, size=(50, 4))], axis=1)
    m = parse_metric(name)
    c = m.cwl(ranked)
    np.testing.assert_allclose((c.weight * m.cwl_gains(ranked)).sum(axis=1), m.evaluate_labels(ranked, judged),
                               atol=1e-12)
    # W is a probability profile over infinite ranks: never more than 1 in a window
    assert np.all(c.weight.sum(axis=1) <= 1 + 1e-12)
    assert np.all((c.continuation >= 0) & (c.continuation <= 1))


@pytest.mark.parametrize("name", ["DCG@5", "nDCG@5", "DCG@12", "nDCG"])
def test_cwl_dcg_scale(name: str) -> None:
    rng = np.random.default_rng(6)
    ranked = rng.integers(-1, 4, size=(40, 8))
    judged = np.concatenate([np.maximum(ranked, 0), rng.integers(0, 4, size=(40, 3))], axis=1)
    m = parse_metric(name)
    c = m.cwl(ranked)
    erg = (c.weight * m.cwl_gains(ranked)).sum(axis=1)
    np.testing.assert_allclose(erg * m.cwl_scale(ranked, judged), m.evaluate_labels(ranked, judged), atol=1e-12)


@pytest.mark.parametrize("name", ["AP", "RPrec", "bpref", "infAP", "Recall@5", "ERR@5", "P"])
def test_no_static_cwl(name: str) -> None:
    with pytest.raises(TypeError, match="C/W/L"):
        parse_metric(name).cwl(R)


def test_err_cwl_points_to_cascade() -> None:
    with pytest.raises(TypeError, match="cascade"):
        ERR(k=5).cwl(R)


# ---------------------------------------------------------------- parsing and value objects


def test_parse_round_trip_and_hash() -> None:
    names = ["nDCG@10", "RBP(p=0.8)", "ERR@20", "P@5", "RR", "AP", "AP(denominator='min_r_k')@10", "INST(T=2)"]
    for name in names:
        m = parse_metric(name)
        assert str(m) == name.replace("AP(denominator='min_r_k')@10", "AP(denominator='min_r_k')@10")
        assert parse_metric(str(m)) == m
        assert hash(parse_metric(str(m))) == hash(m)
    assert parse_metric("ndcg@10") == NDCG(k=10)
    assert parse_metric("MAP") == AP()
    assert parse_metric("rbp(p=0.5)") == RBP(p=0.5)
    assert len({parse_metric("P@5"), parse_metric("p@5"), parse_metric("P @ 5")}) == 1
    with pytest.raises(dataclasses_frozen_error()):
        parse_metric("P@5").k = 3  # type: ignore[misc]


def dataclasses_frozen_error() -> type[Exception]:
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_parse_list_keeps_commas_inside_parentheses() -> None:
    ms = parse_metrics("nDCG@10,ERR@10,RBP(p=0.8),AP,IPrecAvg(levels=(0.25,0.5))")
    assert [str(m) for m in ms] == ["nDCG@10", "ERR@10", "RBP(p=0.8)", "AP", "IPrecAvg(levels=(0.25, 0.5))"]


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("nDCG@ten", "cut-off"),
        ("nDCG@0", "positive"),
        ("Foo@3", "unknown metric"),
        ("RBP(p=1.5)", "(0, 1)"),
        ("RBP(q=0.5)", "unknown parameter"),
        ("RBP(0.5)", "by name"),
        ("RBP(p=__import__('os'))", "literal"),
        ("unj", "needs a cut-off"),
        ("RPrec@5", "no @k"),
        ("AP(denominator='x')", "denominator"),
        ("", "not a metric"),
    ],
)
def test_parse_errors(bad: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_metric(bad)


def test_bad_label_arrays() -> None:
    with pytest.raises(InputError, match="2-d"):
        parse_metric("P@5").evaluate_labels(np.array([1, 0]), np.array([[1]]))
    with pytest.raises(InputError, match="queries"):
        parse_metric("P@5").evaluate_labels(np.array([[1, 0]]), np.array([[1], [0]]))
    with pytest.raises(InputError, match="integer"):
        parse_metric("P@5").evaluate_labels(np.array([[0.5]]), np.array([[1]]))


@pytest.mark.parametrize("shape_r, shape_j", [((3, 0), (3, 2)), ((0, 5), (0, 2)), ((2, 4), (2, 0))])
def test_degenerate_shapes(shape_r: tuple[int, int], shape_j: tuple[int, int]) -> None:
    for name, cls in REGISTRY.items():
        m = parse_metric(name + ("@3" if cls.cutoff == "required" else ""))
        out = m.evaluate_labels(np.zeros(shape_r, dtype=int), np.ones(shape_j, dtype=int))
        assert out.shape == (shape_r[0],) and np.all(np.isfinite(out)), name


def test_every_registered_metric_is_a_value_object() -> None:
    for name, cls in REGISTRY.items():
        assert issubclass(cls, Metric)
        m = parse_metric(name + ("@3" if cls.cutoff == "required" else ""))
        assert parse_metric(str(m)) == m
        out = m.evaluate_labels(GOLD_RANKED, GOLD_JUDGED)
        assert out.shape == (3,) and out.dtype == np.float64


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("AP,MAP", "'MAP' is AP again"),
        ("nDCG@10, ndcg@10", "'ndcg@10' is nDCG@10 again"),
        ("P@5,,AP", "empty item 2"),
        ("P@5,", "empty item 2"),
    ],
)
def test_parse_list_refuses_repeats_and_empty_items(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(")):
        parse_metrics(text)


def test_golden_set_from_document_ids_through_evaluate_run() -> None:
    """The same worked example from qrels/run frames with the issue's document ids."""
    import pandas as pd

    from onlineeval.conventions import Conventions
    from onlineeval.metrics.evaluate import evaluate_run

    rankings = {
        "A": ["d031", "d012", "d025", "d040", "d007"],
        "B": ["d025", "d031", "d012", "d040", "d007"],
        "C": ["d012", "d040", "d025", "d031", "d007"],
    }
    qrels = pd.DataFrame({"query": ["g", "g"], "doc": ["d025", "d031"], "grade": [2, 1]})
    printed = {"Recall@5": (1.000, 1.000, 1.000), "P@5": (0.400, 0.400, 0.400), "RR": (1.000, 1.000, 0.333),
               "AP": (0.833, 1.000, 0.417), "nDCG@5": (0.689, 1.000, 0.532)}
    for i, docs in enumerate(rankings.values()):
        run = pd.DataFrame({"query": "g", "doc": docs, "score": [5.0, 4.0, 3.0, 2.0, 1.0]})
        ev = evaluate_run(qrels, run, list(printed), Conventions())  # exponential gain
        for name, values in printed.items():
            assert round(ev.mean(name), 3) == values[i], (name, i)
