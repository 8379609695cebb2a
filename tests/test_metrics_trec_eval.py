"""trec_eval conformance: every implemented measure against trec_eval's own expected outputs.

The expected outputs in ``../shared/data/trec_eval`` were produced by trec_eval 10.0
(see that folder's README for each command). Values are compared to the printed
precision (4 decimals: |ours - printed| <= 0.5e-4).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from onlineeval.conventions import Gain, preset
from onlineeval.errors import InputError
from onlineeval.io import read_qrels, read_run
from onlineeval.metrics import Metric, parse_metric
from onlineeval.metrics.evaluate import evaluate_run

TOL = 0.5e-4 + 1e-9

SUMMED = {"num_q", "num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"}
NOT_IMPLEMENTED = re.compile(
    r"^(runid|relstring.*|utility.*|set_F|set_relative_P|set_map|relative_P_\d+|binG|G|Rndcg|ndcg_rel|"
    r"gm_bpref)$"
)


def trec_measure(name: str) -> Metric | None:
    """Our metric for a trec_eval measure name (``None`` for those not implemented)."""
    fixed = {
        "num_q": "NumQ",
        "num_ret": "NumRet",
        "num_rel": "NumRel",
        "num_rel_ret": "NumRelRet",
        "num_nonrel_judged_ret": "NumNonRelJudgedRet",
        "map": "AP",
        "gm_map": "AP",
        "Rprec": "RPrec",
        "bpref": "bpref",
        "recip_rank": "RR",
        "infAP": "infAP",
        "11pt_avg": "IPrecAvg",
        "ndcg": "nDCG",
        "rbp": "RBP(p=0.9,graded=True)",
        "rbp_resid": "RBPResidual(p=0.9,form='trec_eval')",
        "set_P": "P",
        "set_recall": "Recall",
    }
    if name in fixed:
        return parse_metric(fixed[name])
    patterns = [
        (r"^P_(\d+)$", "P@{}"),
        (r"^recall_(\d+)$", "Recall@{}"),
        (r"^success_(\d+)$", "Success@{}"),
        (r"^ndcg_cut_(\d+)$", "nDCG@{}"),
        (r"^map_cut_(\d+)$", "AP@{}"),
        (r"^unj_(\d+)$", "Unjudged@{}"),
        (r"^iprec_at_recall_([\d.]+)$", "IPrec(recall={})"),
        (r"^Rprec_mult_([\d.]+)$", "RPrecMult(mult={})"),
    ]
    for pattern, template in patterns:
        m = re.match(pattern, name)
        if m:
            return parse_metric(template.format(m.group(1)))
    m = re.match(r"^11pt_avg_([\d.,]+)$", name)
    if m:
        levels = tuple(float(x) for x in m.group(1).split(","))
        return parse_metric(f"IPrecAvg(levels={levels!r})")
    m = re.match(r"^ndcg_((?:\d+=[\d.]+,?)+)$", name)
    if m:
        return parse_metric(f"nDCG(gain={m.group(1)!r})")
    return None


def read_expected(path: Path) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[0] == "runid" or parts[0].startswith("relstring"):
            continue
        out[(parts[0], parts[1])] = float(parts[2])
    return out


def check(expected: dict[tuple[str, str], float], qrels_path: Path, run_path: Path, conv) -> int:
    qrels, run = read_qrels(qrels_path), read_run(run_path)
    names = sorted({m for m, _ in expected if not NOT_IMPLEMENTED.match(m)})
    metrics = {n: trec_measure(n) for n in names}
    unknown = [n for n, m in metrics.items() if m is None]
    assert not unknown, f"unmapped trec_eval measures: {unknown}"
    ev = evaluate_run(qrels, run, list({m for m in metrics.values() if m is not None}), conv)
    index = {q: i for i, q in enumerate(ev.queries)}
    checked = 0
    failures = []
    for (name, qid), value in expected.items():
        if name not in metrics:
            continue
        if name == "num_q" and qid == "all":
            assert ev.counts.counted == int(value)
        values = ev.values[metrics[name]]  # type: ignore[index]
        if qid == "all":
            if name in SUMMED:
                ours = float(np.nansum(values))
            elif name == "gm_map":
                ours = math.exp(np.mean(np.log(np.maximum(values, 1e-5))))
            else:
                ours = float(np.nanmean(values))
        else:
            ours = float(values[index[qid]])
        if not abs(ours - value) <= TOL * max(1.0, abs(value) if name in SUMMED else 1.0):
            failures.append((name, qid, value, round(ours, 6)))
        checked += 1
    assert not failures, f"{len(failures)} mismatches, e.g. {failures[:10]}"
    return checked


TRE = preset("trec_eval")


def test_out_test_official(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    assert check(read_expected(d / "out.test"), d / "qrels.test", d / "results.test", TRE) > 20


def test_out_test_with_comment_lines(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    assert check(read_expected(d / "out.test"), d / "qrels.test.with-comments", d / "results.test", TRE) > 20


def test_out_comment_test(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    assert check(read_expected(d / "out.comment.test"), d / "qrels.comment.test", d / "results.comment.test", TRE) > 20


def test_out_test_aq_per_query(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    assert check(read_expected(d / "out.test.aq"), d / "qrels.test", d / "results.test", TRE) > 300


def test_out_test_aqc_fill_missing(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    conv = TRE.with_(missing="zero")
    assert check(read_expected(d / "out.test.aqc"), d / "qrels.test", d / "results.trunc", conv) > 300


def test_out_test_aqcm_depth(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    conv = TRE.with_(missing="zero", depth=100)
    assert check(read_expected(d / "out.test.aqcM"), d / "qrels.test", d / "results.trunc", conv) > 300


def test_out_test_aql_graded(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    conv = TRE.with_(rel_min=2)
    assert check(read_expected(d / "out.test.aql"), d / "qrels.rel_level", d / "results.test", conv) > 300


def test_out_test_meas_params(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    assert check(read_expected(d / "out.test.meas_params"), d / "qrels.test", d / "results.test", TRE) > 60


def test_edge_noq3(shared_data: Path) -> None:
    d = shared_data / "trec_eval" / "edge_cases"
    exp = read_expected(d / "out.edge.noq3.q")
    n = check(exp, d / "qrels.edge.noq3", d / "run.edge", TRE)
    assert n > 30
    ev = evaluate_run(read_qrels(d / "qrels.edge.noq3"), read_run(d / "run.edge"), "RR", TRE)
    assert ev.counts.ignored_unjudged == 1  # q4 is only in the run
    assert ev.counts.scored_empty == 1  # q2: judged, nothing relevant, counted with 0


def test_edge_fill_missing(shared_data: Path) -> None:
    d = shared_data / "trec_eval" / "edge_cases"
    exp = read_expected(d / "out.edge.c.q")
    assert check(exp, d / "qrels.edge", d / "run.edge", TRE.with_(missing="zero")) > 30
    ev = evaluate_run(read_qrels(d / "qrels.edge"), read_run(d / "run.edge"), "RR", TRE.with_(missing="zero"))
    assert ev.counts.filled_missing == 1 and ev.counts.counted == 3


def test_edge_missing_is_an_error_like_trec_eval_10(shared_data: Path) -> None:
    d = shared_data / "trec_eval" / "edge_cases"
    with pytest.raises(InputError, match="q3"):
        evaluate_run(read_qrels(d / "qrels.edge"), read_run(d / "run.edge"), "RR", TRE)


def test_edge_tie100_docno_descending(shared_data: Path) -> None:
    d = shared_data / "trec_eval" / "edge_cases"
    assert check(read_expected(d / "out.tie100.q"), d / "qrels.tie100", d / "run.tie100", TRE) == 8


def test_gain_table_matches_trec_eval_parameters() -> None:
    assert str(Gain.parse("1=3,2=9,4=4.5")) == "1=3,2=9,4=4.5"


def test_row_order_of_files_does_not_matter(shared_data: Path) -> None:
    """Shuffled run and qrels lines (queries no longer in blocks) give the same values."""
    d = shared_data / "trec_eval"
    qrels, run = read_qrels(d / "qrels.test"), read_run(d / "results.test")
    names = ["AP", "nDCG@10", "P@5", "RR", "bpref", "infAP", "IPrecAvg"]
    ev = evaluate_run(qrels, run, names, TRE)
    rng = np.random.default_rng(7)
    shuffled = evaluate_run(
        qrels.iloc[rng.permutation(len(qrels))].reset_index(drop=True),
        run.iloc[rng.permutation(len(run))].reset_index(drop=True),
        names,
        TRE,
    )
    assert list(shuffled.queries) == list(ev.queries)
    for m in ev.metrics:
        np.testing.assert_array_equal(shuffled.values[m], ev.values[m])
