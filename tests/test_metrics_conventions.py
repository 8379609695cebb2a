"""Conventions as named, recorded objects; the empty / missing rules and counts."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from onlineeval.conventions import EXPONENTIAL, LINEAR, PRESETS, TREC_EVAL_REFERENCE, Conventions, Gain, preset
from onlineeval.errors import ConfigError, InputError
from onlineeval.metrics.evaluate import evaluate_run

QRELS = pd.DataFrame(
    {
        "query": ["1", "1", "2", "3", "4"],
        "doc": ["a", "b", "a", "c", "z"],
        "grade": [2, 0, 0, 1, 1],
    }
)
RUN = pd.DataFrame(
    {
        "query": ["1", "1", "2", "4", "9"],
        "doc": ["b", "a", "a", "z", "x"],
        "score": [2.0, 1.0, 1.0, 1.0, 1.0],
    }
)


def test_presets_are_named_and_recorded() -> None:
    assert set(PRESETS) >= {"trec_eval", "lightgbm", "xgboost"}
    t = preset("trec_eval")
    assert t.describe() == {
        "name": "trec_eval", "gain": "linear", "empty": "zero", "missing": "error",
        "ties": "docno_desc", "rel_min": 1, "depth": None, "reference": TREC_EVAL_REFERENCE,
    }
    assert preset("lightgbm").ties == "input_order" and preset("lightgbm").empty == "one"
    assert preset("xgboost").gain == EXPONENTIAL
    changed = t.with_(missing="zero")
    assert changed.name == "trec_eval+missing=zero" and changed.missing == "zero"
    assert t.with_(missing=None) is t
    with pytest.raises(ConfigError, match="unknown preset"):
        preset("sklearn")


def test_trec_eval_preset_says_which_trec_eval_it_reproduces() -> None:
    """Review 2, F.1: the preset follows trec_eval 10.0, whose iprec_at_recall rounds rho R to nearest;
    pytrec_eval / ir_measures (trec_eval 9.x) take (long)(rho R + 0.9). The conventions say so, and the value is
    10.0's: R = 2, relevant at ranks 1 and 9 of 10, recall 0.6: lround(1.2) = 1 relevant -> precision 1 (9.x:
    (long)(2.1) = 2 -> 2/9)."""
    t = preset("trec_eval")
    for conv in (t, t.with_(missing="zero")):
        assert conv.describe()["reference"].startswith("trec_eval 10.0; pytrec_eval and ir_measures embed")
    assert "reference" not in preset("lightgbm").describe() and "reference" not in Conventions().describe()
    assert "(long)(rho R + 0.9)" in TREC_EVAL_REFERENCE and "rounded to nearest" in TREC_EVAL_REFERENCE
    # the note comes with the preset's definition, not its name: conventions merely named trec_eval (here
    # exponential gain and excluded empty queries, not trec_eval's) claim no reference; a renamed preset keeps it
    assert t.reference == TREC_EVAL_REFERENCE and t.with_(gain=EXPONENTIAL).reference == TREC_EVAL_REFERENCE
    assert "reference" not in Conventions(name="trec_eval").describe()
    assert "reference" not in Conventions(name="trec_eval+missing=zero").describe()
    assert dataclasses.replace(t, name="mine").describe()["reference"] == TREC_EVAL_REFERENCE
    assert t == Conventions(gain=LINEAR, empty="zero", name="trec_eval")  # compared by values, as the name
    docs = [f"d{i}" for i in range(1, 11)]
    qrels = pd.DataFrame({"query": ["q"] * 10, "doc": docs, "grade": [1 if d in ("d1", "d9") else 0 for d in docs]})
    run = pd.DataFrame({"query": ["q"] * 10, "doc": docs, "score": [10.0 - i for i in range(10)]})
    ev = evaluate_run(qrels, run, ["iprec_at_recall_0.60", "iprec_at_recall_1.00"], t)
    assert ev.mean(ev.metrics[0]) == 1.0 and ev.mean(ev.metrics[1]) == pytest.approx(2 / 9, rel=1e-15)


@pytest.mark.parametrize(
    "kwargs, key",
    [({"ties": "random"}, "ties"), ({"empty": "skip"}, "empty"), ({"missing": "ignore"}, "missing"),
     ({"rel_min": 1.5}, "rel_min"), ({"rel_min": -1}, "rel_min"), ({"depth": 0}, "depth")],
)
def test_bad_conventions(kwargs, key) -> None:
    with pytest.raises(ConfigError, match=key):
        Conventions(**kwargs)


def test_gain_functions() -> None:
    g = np.array([-3, -1, 0, 1, 2, 3])
    np.testing.assert_array_equal(EXPONENTIAL(g), [0, 0, 0, 1, 3, 7])
    np.testing.assert_array_equal(LINEAR(g), [0, 0, 0, 1, 2, 3])
    table = Gain.parse("0=0.5,2=9")
    np.testing.assert_array_equal(table(g), [0, 0, 0.5, 1, 9, 3])  # unlisted grades keep their value
    assert str(table) == "0=0.5,2=9" and Gain.parse(str(table)) == table
    with pytest.raises(ConfigError, match="gain"):
        Gain.parse("2=x")
    with pytest.raises(ConfigError, match="distinct"):
        Gain("table", ((1, 1.0), (1, 2.0)))


def test_empty_rule_and_counts() -> None:
    base = Conventions(missing="zero")
    ex = evaluate_run(QRELS, RUN, ["AP", "NumRet"], base)  # exclude (default)
    assert ex.counts.as_dict() == {
        "counted": 3, "excluded_empty": 1, "scored_empty": 0,
        "filled_missing": 1, "dropped_missing": 0, "ignored_unjudged": 1,
    }
    assert ex.mean("AP") == pytest.approx((0.5 + 0.0 + 1.0) / 3)  # q1 0.5, q3 filled 0, q4 1
    one = evaluate_run(QRELS, RUN, ["AP", "NumRet"], base.with_(empty="one"))
    assert one.counts.counted == 4 and one.counts.scored_empty == 1
    assert one.mean("AP") == pytest.approx((0.5 + 1.0 + 0.0 + 1.0) / 4)
    assert one.values[one.metrics[1]].tolist() == [2.0, 1.0, 0.0, 1.0]  # counts ignore the rule
    zero = evaluate_run(QRELS, RUN, ["AP"], base.with_(empty="zero"))
    assert zero.mean("AP") == pytest.approx((0.5 + 0.0 + 0.0 + 1.0) / 4)


def test_missing_rules() -> None:
    with pytest.raises(InputError, match=r"1 qrels queries are not in the run \(3\)"):
        evaluate_run(QRELS, RUN, ["AP"])
    drop = evaluate_run(QRELS, RUN, ["AP"], Conventions(missing="drop"))
    assert drop.counts.dropped_missing == 1 and list(drop.queries) == ["1", "2", "4"]
    per_query = drop.per_query()
    assert list(per_query.columns) == ["query", "AP"] and list(per_query["query"]) == ["1", "4"]


def test_negative_rel_min_is_refused_not_counting_unjudged_slots() -> None:
    """A threshold below 0 would make unretrieved (-1 padded) and unjudged slots relevant."""
    with pytest.raises(ConfigError, match=r"rel_min.*>= 0"):
        Conventions(rel_min=-1)
    # rel_min = 0 (trec_eval -l0): judged grade-0 documents count, unjudged ones never do
    qrels = pd.DataFrame({"query": ["q"] * 2, "doc": ["a", "b"], "grade": [0, 1]})
    run = pd.DataFrame({"query": ["q"] * 3, "doc": ["x", "a", "b"], "score": [3.0, 2.0, 1.0]})
    ev = evaluate_run(qrels, run, ["P@3", "NumRel"], Conventions(rel_min=0))
    assert [float(v[0]) for v in ev.values.values()] == [2 / 3, 2.0]


def test_rel_min_and_depth() -> None:
    conv = Conventions(missing="drop", empty="zero")
    assert evaluate_run(QRELS, RUN, ["RR"], conv.with_(rel_min=2)).values[
        evaluate_run(QRELS, RUN, ["RR"], conv).metrics[0]
    ].tolist() == [0.5, 0.0, 0.0]
    shallow = evaluate_run(QRELS, RUN, ["RR", "NumRet"], conv.with_(depth=1))
    assert shallow.values[shallow.metrics[0]].tolist() == [0.0, 0.0, 1.0]
    assert shallow.values[shallow.metrics[1]].tolist() == [1.0, 1.0, 1.0]


def test_numeric_ids_in_frames_match_text_ids() -> None:
    qrels = pd.DataFrame({"query": [1, 1], "doc": [10, 11], "grade": [1, 0]})
    run = pd.DataFrame({"query": ["1", "1"], "doc": ["11", "10"], "score": [2.0, 1.0]})
    assert evaluate_run(qrels, run, ["RR"]).mean("RR") == 0.5
    with pytest.raises(InputError, match="lacks column"):
        evaluate_run(qrels.drop(columns="grade"), run, ["RR"])


def test_expected_ties_refuse_a_group_cut_by_the_depth() -> None:
    qrels = pd.DataFrame({"query": ["q"], "doc": ["a"], "grade": [1]})
    run = pd.DataFrame({"query": "q", "doc": ["a", "b", "c"], "score": [2.0, 1.0, 1.0]})
    conv = Conventions(ties="expected")
    assert evaluate_run(qrels, run, ["P@2"], conv.with_(depth=1)).mean("P@2") == 0.5
    assert evaluate_run(qrels, run, ["P@2"], conv.with_(depth=3)).mean("P@2") == 0.5
    with pytest.raises(ConfigError, match="cut in two"):
        evaluate_run(qrels, run, ["P@2"], conv.with_(depth=2))


def test_err_scale_comes_from_the_qrels_not_from_the_queries_a_run_answers() -> None:
    """ERR's gmax is the top grade of the qrels: a query ranked identically scores the same
    in two runs even when one run drops the query that holds the top grade."""
    qrels = pd.DataFrame({"query": ["q1", "q1", "q2"], "doc": ["a", "b", "c"], "grade": [1, 0, 3]})
    both = pd.DataFrame({"query": ["q1", "q2"], "doc": ["a", "c"], "score": [1.0, 1.0]})
    only_q1 = pd.DataFrame({"query": ["q1"], "doc": ["a"], "score": [1.0]})
    conv = Conventions(missing="drop")
    a = evaluate_run(qrels, both, ["ERR@5"], conv)
    b = evaluate_run(qrels, only_q1, ["ERR@5"], conv)
    r1 = (2**1 - 1) / 2**3  # R_i = (2^g - 1) / 2^gmax with gmax = 3 from the qrels
    assert a.values[a.metrics[0]].tolist() == [r1, (2**3 - 1) / 2**3]
    assert b.values[b.metrics[0]].tolist() == [r1]
    # an explicit gmax still wins
    c = evaluate_run(qrels, only_q1, ["ERR(gmax=4)@5"], conv)
    assert c.values[c.metrics[0]].tolist() == [1 / 16]


def test_untyped_frames_are_validated_by_evaluate_run() -> None:
    """Raw DataFrames go through the frame validators: numeric text is read as numbers,
    anything else is an InputError naming the row (never a numpy TypeError)."""
    run = pd.DataFrame({"query": ["q1", "q1"], "doc": ["a", "b"], "score": [2.0, 1.0]})
    text_grades = pd.DataFrame({"query": ["q1", "q1"], "doc": ["a", "b"], "grade": ["0", "2"]})
    ev = evaluate_run(text_grades, run, ["RR", "ERR@2"])
    assert [float(v[0]) for v in ev.values.values()] == [0.5, 0.5 * 3 / 4]
    with pytest.raises(InputError, match="row 2: grade must be an integer, got 'x'"):
        evaluate_run(pd.DataFrame({"query": ["q1", "q1"], "doc": ["a", "b"], "grade": [1, "x"]}), run, ["RR"])
    with pytest.raises(InputError, match="row 1: score must be a finite number"):
        evaluate_run(text_grades, run.assign(score=[np.nan, 1.0]), ["RR"])
    with pytest.raises(InputError, match="row 2: score must be a finite number, got 'high'"):
        evaluate_run(text_grades, run.assign(score=[1.0, "high"]), ["RR"])
