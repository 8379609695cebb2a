"""The evaluate summary row is built once (metrics.tables.summary_row): the Python API's ``aggregate`` and the
``all`` rows of ``onlineeval evaluate --format csv`` are the same rows, on TREC files (the CLI's byte-level path)
and on the frame path (``--letor``)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

import onlineeval
from onlineeval.cli import app
from onlineeval.conventions import preset
from onlineeval.metrics.evaluate import evaluate_run
from onlineeval.metrics.tables import summary_row

QRELS = "q1 0 a 2\nq1 0 b 1\nq1 0 c 0\nq2 0 a 1\nq2 0 d 0\nq3 0 e 0\nq4 0 f 1\n"
RUN_A = "q1 Q0 a 1 3.0 A\nq1 Q0 b 2 2.0 A\nq1 Q0 x 3 1.0 A\nq2 Q0 d 1 2.0 A\nq2 Q0 a 2 1.0 A\nq4 Q0 f 1 1.0 A\n"
RUN_B = "q1 Q0 c 1 3.0 B\nq1 Q0 b 2 2.0 B\nq2 Q0 a 1 2.0 B\nq3 Q0 e 1 1.0 B\nq4 Q0 g 1 1.0 B\n"
METRICS = "AP,RBP(p=0.8),ERR@10,NumRet,NumRelRet,P@2"
SHARED = ["system", "metric", "value", "n", "residual", "err_gmax", "sum"]


def test_summary_row_by_hand() -> None:
    qrels = pd.read_csv(io.StringIO(QRELS), sep=" ", names=["query", "iter", "doc", "grade"])[["query", "doc", "grade"]]
    run = pd.read_csv(io.StringIO(RUN_A), sep=" ", names=["query", "q0", "doc", "rank", "score", "tag"])
    ev = evaluate_run(qrels, run[["query", "doc", "score"]], ["NumRet", "AP"], preset("trec_eval")
                      .with_(missing="zero"), run_id="A")
    num_ret, ap = ev.metrics
    row = summary_row(ev, num_ret, {}, {})
    # trec_eval preset, -c: 4 qrels queries (q3 missing, counted 0 with 0 retrieved); A retrieves 6 documents
    assert row["system"] == "A" and row["metric"] == "NumRet" and row["n"] == 4 and row["sum"] == 6.0
    assert row["value"] == 1.5 and math.isnan(row["residual"]) and row["err_gmax"] is None
    assert row["queries_counted"] == 4 and row["queries_filled_missing"] == 1
    # AP by hand: q1 (R 2) relevant at 1, 2 -> 1; q2 (R 1) at 2 -> 1/2; q3 0 (no relevant: trec_eval's 0);
    # q4 at 1 -> 1; mean over 4 = 0.625
    ap_row = summary_row(ev, ap, {}, {})
    assert ap_row["value"] == 0.625 and math.isnan(ap_row["sum"])


def test_api_aggregate_is_the_csv_all_rows(tmp_path: Path) -> None:
    files = {}
    for name, text in [("qrels", QRELS), ("A", RUN_A), ("B", RUN_B)]:
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_text(text)
    res = CliRunner().invoke(app, ["evaluate", "--qrels", str(files["qrels"]), "--run", str(files["A"]),
                                   "--run", str(files["B"]), "--metrics", METRICS, "--missing", "zero",
                                   "--format", "csv", "--permutations", "100", "--bootstrap", "200"])
    assert res.exit_code == 0, res.output
    csv = pd.read_csv(io.StringIO(res.stdout))
    csv = csv[csv["query"] == "all"].reset_index(drop=True)
    api = onlineeval.evaluate(files["qrels"], [files["A"], files["B"]], METRICS, missing="zero",
                              permutations=100, bootstrap=200).aggregate
    assert list(api["system"]) == list(csv["system"]) == ["A"] * 6 + ["B"] * 6
    counts = [c for c in api.columns if c.startswith("queries_")]
    assert counts and counts == [c for c in csv.columns if c.startswith("queries_")]
    for col in SHARED[2:] + counts:
        np.testing.assert_allclose(api[col].astype(float), csv[col].astype(float), rtol=1e-12, equal_nan=True,
                                   err_msg=col)
    rbp = api["metric"] == "RBP(p=0.8)"
    assert (api.loc[rbp, "residual"] > 0).all() and api.loc[~rbp, "residual"].isna().all()
    assert list(api.loc[api["metric"] == "ERR@10", "err_gmax"]) == [2, 2]
