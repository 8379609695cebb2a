"""Property tests: agreement with pytrec_eval on random qrels/runs, invariants, tie expectation."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onlineeval.conventions import preset
from onlineeval.metrics import LabelBatch, parse_metric
from onlineeval.metrics.base import EvalContext
from onlineeval.metrics.evaluate import evaluate_run

try:  # a test dependency (pip install -e '.[test]'), needed by the agreement test alone
    import pytrec_eval
except ImportError:
    pytrec_eval = None

# trec_eval measure -> our metric (trec_eval preset: linear gain, docno-descending ties)
SHARED = {
    "map": "AP",
    "map_cut_5": "AP@5",
    "P_5": "P@5",
    "P_10": "P@10",
    "recall_5": "Recall@5",
    "recip_rank": "RR",
    "Rprec": "RPrec",
    "ndcg": "nDCG",
    "ndcg_cut_5": "nDCG@5",
    "ndcg_cut_10": "nDCG@10",
    "bpref": "bpref",
    "success_1": "Success@1",
    "success_5": "Success@5",
    "num_rel_ret": "NumRelRet",
    "num_ret": "NumRet",
    "num_rel": "NumRel",
    "num_nonrel_judged_ret": "NumNonRelJudgedRet",
    "num_q": "NumQ",
    "infAP": "infAP",
    "set_P": "P",
}
MEASURES = {"map", "map_cut", "P", "recall", "recip_rank", "Rprec", "ndcg", "ndcg_cut", "bpref", "success",
            "num_rel_ret", "num_ret", "num_rel", "num_nonrel_judged_ret", "num_q", "infAP", "set_P"}

DOCS = [f"d{i:02d}" for i in range(12)]


@st.composite
def collections(draw):
    nq = draw(st.integers(1, 4))
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(nq):
        qid = f"q{q}"
        judged = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=10, unique=True))
        qrels[qid] = {d: draw(st.integers(0, 3)) for d in judged}
        retrieved = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=12, unique=True))
        run[qid] = {d: float(draw(st.integers(0, 4))) for d in retrieved}  # few values: many ties
    return qrels, run


def frames(qrels, run):
    q = pd.DataFrame([(qid, d, g) for qid, ds in qrels.items() for d, g in ds.items()],
                     columns=["query", "doc", "grade"])
    r = pd.DataFrame([(qid, d, s) for qid, ds in run.items() for d, s in ds.items()], columns=["query", "doc", "score"])
    return q, r


@pytest.mark.skipif(pytrec_eval is None, reason="pytrec_eval (pytrec-eval-terrier, a test dependency) is not installed")
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collections())
def test_agrees_with_pytrec_eval(data) -> None:
    qrels, run = data
    ref = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(run)
    q, r = frames(qrels, run)
    ev = evaluate_run(q, r, list(SHARED.values()), preset("trec_eval"))
    index = {qid: i for i, qid in enumerate(ev.queries)}
    assert set(index) == set(ref)
    for trec_name, ours in SHARED.items():
        values = ev.values[parse_metric(ours)]
        for qid, res in ref.items():
            assert values[index[qid]] == pytest.approx(res[trec_name], abs=1e-9), (trec_name, qid)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=15),
    st.sampled_from(["exponential", "linear", "0=0.5,1=2,3=1"]),
    st.integers(1, 20),
)
def test_ideal_ranking_scores_ndcg_one(grades, gain, k) -> None:
    ideal_order = sorted(grades, reverse=True)
    m = parse_metric(f"nDCG(gain={gain!r})@{k}")
    if gain == "0=0.5,1=2,3=1":  # non-monotone table: ideal order is by gain, not by grade
        table = {0: 0.5, 1: 2.0, 2: 2.0, 3: 1.0, 4: 4.0}
        ideal_order = sorted(grades, key=lambda g: -table[g])
    value = m.evaluate_labels(np.array([ideal_order]), np.array([grades]))[0]
    has_gain = any((2**g - 1 if gain == "exponential" else g if gain == "linear" else 1) > 0 for g in grades)
    assert value == pytest.approx(1.0 if has_gain else 0.0, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 2), min_size=0, max_size=12),
    st.integers(0, 12),
    st.integers(1, 15),
    st.integers(1, 3),
)
def test_adding_a_relevant_document_never_lowers_recall(ranked, pos, k, extra_unretrieved) -> None:
    grades = list(ranked)
    judged = grades + [1] * extra_unretrieved  # relevant documents not yet retrieved
    new = grades[: min(pos, len(grades))] + [1] + grades[min(pos, len(grades)) :]
    m = parse_metric(f"Recall@{k}")
    pad = lambda x: np.array([x + [-1] * (14 - len(x))])
    before = m.evaluate_labels(pad(grades), np.array([judged]))[0]
    after = m.evaluate_labels(pad(new), np.array([judged]))[0]
    assert after >= before - 1e-15


# ------------------------------------------------------------------ exact expectation over ties

TIE_METRICS = [
    "P@3", "Recall@2", "nDCG@3", "DCG@4", "RBP(p=0.6)", "RPrec", "NumRelRet@2", "NumNonRelJudgedRet@2", "INSQ(T=1)",
    "RR", "RR@2", "AP", "AP@3", "Success@2", "Success@1",
]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=7))
def test_expected_ties_equal_the_mean_over_all_orders(rows) -> None:
    docs = [f"d{i}" for i in range(len(rows))]
    scores = [float(s) for s, _ in rows]
    qrels = pd.DataFrame({"query": "q", "doc": docs, "grade": [g for _, g in rows]})
    run = pd.DataFrame({"query": "q", "doc": docs, "score": scores})
    base = preset("trec_eval").with_(empty="zero")
    expected = evaluate_run(qrels, run, TIE_METRICS, base.with_(ties="expected"))
    # brute force: every order of the tied documents, all equally likely; one batch row
    # per permutation of the input, ranked by score with ties in (permuted) input order
    grades = np.array([g for _, g in rows])
    sc = np.array(scores)
    perms = np.array(list(itertools.permutations(range(len(rows)))))
    ranked = np.empty_like(perms)
    for i, perm in enumerate(perms):  # test-side reference only
        order = perm[np.argsort(-sc[perm], kind="stable")]
        ranked[i] = grades[order]
    judged = np.broadcast_to(grades, perms.shape)
    batch = LabelBatch(ranked, -np.sort(-judged, axis=1))
    ctx = EvalContext(base.rel_min, base.gain)
    for m in TIE_METRICS:
        brute = parse_metric(m).compute(batch, ctx).mean()
        assert expected.values[parse_metric(m)][0] == pytest.approx(brute, abs=1e-12), m
    pess = evaluate_run(qrels, run, TIE_METRICS, base.with_(ties="pessimistic"))
    opt = evaluate_run(qrels, run, TIE_METRICS, base.with_(ties="optimistic"))
    for m in ["P@3", "nDCG@3", "DCG@4", "RBP(p=0.6)"]:
        key = parse_metric(m)
        assert pess.values[key][0] - 1e-12 <= expected.values[key][0] <= opt.values[key][0] + 1e-12


def test_expected_ties_refused_for_non_additive_metrics() -> None:
    from onlineeval.errors import ConfigError

    qrels = pd.DataFrame({"query": ["q"], "doc": ["a"], "grade": [1]})
    run = pd.DataFrame({"query": ["q", "q"], "doc": ["a", "b"], "score": [1.0, 1.0]})
    for name in ["bpref", "infAP", "ERR@5", "IPrec(recall=0.5)"]:
        with pytest.raises(ConfigError, match="expectation over tie orders is not available"):
            evaluate_run(qrels, run, [name], preset("trec_eval").with_(ties="expected"))


def test_tie_rules_change_ndcg_as_in_the_issue() -> None:
    # one query, the relevant document tied with four non-relevant ones at the top
    qrels = pd.DataFrame({"query": ["q"] * 2, "doc": ["a", "z"], "grade": [1, 0]})
    run = pd.DataFrame({"query": "q", "doc": list("abcde"), "score": [1.0] * 5})
    conv = preset("trec_eval")
    vals = {
        t: evaluate_run(qrels, run, ["nDCG@5"], conv.with_(ties=t)).mean("nDCG@5")
        for t in ["docno_desc", "input_order", "pessimistic", "optimistic", "expected"]
    }
    disc = 1 / np.log2(np.arange(2, 7))
    assert vals["input_order"] == pytest.approx(1.0)
    assert vals["optimistic"] == pytest.approx(1.0)
    assert vals["docno_desc"] == pytest.approx(disc[4])
    assert vals["pessimistic"] == pytest.approx(disc[4])
    assert vals["expected"] == pytest.approx(disc.mean())
