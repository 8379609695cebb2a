"""``onlineeval evaluate --format csv``: one tidy table that pandas reads, comparisons in
their own file (``--comparisons``), checked against :func:`evaluate_run` directly."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.conventions import preset
from onlineeval.io import read_qrels, read_run
from onlineeval.metrics.evaluate import evaluate_run

runner = CliRunner()

QRELS = "q1 0 a 2\nq1 0 b 1\nq1 0 c 0\nq2 0 a 1\nq2 0 d 0\nq3 0 e 0\nq4 0 f 1\nq5 0 h 2\n"
RUN_A = "q1 Q0 a 1 3 A\nq1 Q0 b 2 2 A\nq1 Q0 c 3 1 A\nq2 Q0 d 1 2 A\nq2 Q0 a 2 1 A\nq3 Q0 e 1 1 A\nq4 Q0 f 1 1 A\n" \
        "q5 Q0 x 1 2 A\nq5 Q0 h 2 1 A\n"
RUN_B = "q1 Q0 c 1 3 B\nq1 Q0 b 2 2 B\nq1 Q0 a 3 1 B\nq2 Q0 a 1 2 B\nq2 Q0 d 2 1 B\nq3 Q0 e 1 1 B\nq4 Q0 g 1 1 B\n" \
        "q5 Q0 h 1 1 B\n"
SEGMENTS = "query\tbucket\nq1\thead\nq2\thead\nq4\ttail\nq5\ttail\n"
METRICS = "AP,RBP(p=0.8),ERR@5,P@2"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in [("qrels.txt", QRELS), ("A.txt", RUN_A), ("B.txt", RUN_B), ("seg.tsv", SEGMENTS)]:
        out[name] = tmp_path / name
        out[name].write_text(text)
    return out


def run(files: dict[str, Path], *extra: str):
    args = ["evaluate", "--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run",
            str(files["B.txt"]), "--metrics", METRICS, "--permutations", "100", "--bootstrap", "200", *extra]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return res


def test_csv_is_one_tidy_table_with_means_per_query_and_segments(files) -> None:
    res = run(files, "--format", "csv", "--segments", str(files["seg.tsv"]), "--with-per-query")
    table = pd.read_csv(io.StringIO(res.stdout))
    assert list(table.columns[:8]) == ["system", "query", "metric", "value", "n", "residual", "err_gmax", "sum"]
    assert all(c.startswith(("queries_", "convention_")) for c in table.columns[8:-2])
    assert list(table.columns[-2:]) == ["system_sha256", "fingerprint"]  # (tests/test_evaluate_cli_fingerprint.py)
    assert (table["convention_name"] == "default").all()
    assert "--comparisons" in res.stderr  # says where the comparisons went
    qrels = read_qrels(files["qrels.txt"])
    metrics = METRICS.split(",")
    for name in ("A", "B"):
        ev = evaluate_run(qrels, read_run(files[f"{name}.txt"]), metrics, preset("default"))
        resid = evaluate_run(qrels, read_run(files[f"{name}.txt"]), ["RBPResidual(p=0.8)"], preset("default"))
        counted = ev.queries[ev.counted].astype(str)
        rows = table[table["system"] == name]
        for m in ev.metrics:
            mine = rows[rows["metric"] == str(m)]
            agg = mine[mine["query"] == "all"]
            assert len(agg) == 1
            assert agg["value"].iloc[0] == pytest.approx(ev.mean(m)) and agg["n"].iloc[0] == ev.counted.sum()
            per_q = mine[~mine["query"].str.startswith(("all", "segment:"))].set_index("query")
            assert sorted(per_q.index) == sorted(counted)
            np.testing.assert_allclose(per_q.loc[counted, "value"], ev.values[m][ev.counted])
            assert (per_q["n"] == 1).all()
            # segments: the mean of the per-query values of the segment's queries
            for seg_name, queries in (("head", ["q1", "q2"]), ("tail", ["q4", "q5"])):
                seg = mine[mine["query"] == f"segment:bucket={seg_name}"]
                in_seg = [q for q in queries if q in set(counted)]
                assert seg["n"].iloc[0] == len(in_seg)
                assert seg["value"].iloc[0] == pytest.approx(per_q.loc[in_seg, "value"].mean())
            if str(m) == "RBP(p=0.8)":
                # RBP's interval takes the residual on RBP's queries (q3, no relevant document, is excluded from
                # RBP's mean, though RBPResidual alone is relevance-free and counts it)
                res_pq = resid.values[resid.metrics[0]][resid.counted]
                assert agg["residual"].iloc[0] == pytest.approx(res_pq.mean())
                assert resid.mean("RBPResidual(p=0.8)") == pytest.approx(resid.values[resid.metrics[0]].mean())
                assert resid.n("RBPResidual(p=0.8)") == len(resid.queries) == ev.counts.counted + 1
                np.testing.assert_allclose(per_q.loc[counted, "residual"], res_pq)
            else:
                assert mine["residual"].isna().all()
            gmax = mine["err_gmax"]
            assert (gmax == 2).all() if str(m) == "ERR@5" else gmax.isna().all()
        assert rows.loc[rows["query"] == "all", "queries_counted"].eq(ev.counts.counted).all()


def test_comparisons_file_with_every_format_and_the_same_numbers(files, tmp_path: Path) -> None:
    frames = {}
    for fmt in ("csv", "json", "table"):
        path = tmp_path / f"cmp_{fmt}.csv"
        res = run(files, "--format", fmt, "--comparisons", str(path), "--seed", "4")
        frames[fmt] = pd.read_csv(path)
        if fmt == "json":
            doc = json.loads(res.stdout)
            from_json = pd.DataFrame(doc["comparisons"])
    cmp_csv = frames["csv"]
    assert len(cmp_csv) == 4 and set(cmp_csv["metric"]) == set(METRICS.split(","))
    assert (cmp_csv["system"] == "B").all() and (cmp_csv["baseline"] == "A").all()
    assert (cmp_csv["convention_name"] == "default").all()
    for fmt in ("json", "table"):
        pd.testing.assert_frame_equal(frames[fmt], cmp_csv)
    np.testing.assert_allclose(from_json["mean_diff"], cmp_csv["mean_diff"])
    np.testing.assert_allclose(from_json["p_randomization"], cmp_csv["p_randomization"])


def test_comparisons_file_for_a_single_system_is_a_header(files, tmp_path: Path) -> None:
    path = tmp_path / "cmp.csv"
    res = runner.invoke(app, ["evaluate", "--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]),
                              "--format", "csv", "--comparisons", str(path)])
    assert res.exit_code == 0, res.output
    frame = pd.read_csv(path)
    assert len(frame) == 0 and "metric" in frame.columns and "convention_name" in frame.columns
    bad = runner.invoke(app, ["evaluate", "--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]),
                              "--comparisons", str(tmp_path / "no" / "cmp.csv")])
    assert bad.exit_code == 2 and "comparisons: the folder" in bad.output


def test_a_query_named_like_a_summary_row_is_refused_in_the_per_query_csv(tmp_path: Path) -> None:
    qrels, run_file = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels.write_text("all 0 a 1\nq2 0 b 1\n")
    run_file.write_text("all Q0 a 1 1 r\nq2 Q0 b 1 1 r\n")
    base = ["evaluate", "--qrels", str(qrels), "--run", str(run_file), "--format", "csv"]
    res = runner.invoke(app, [*base, "--with-per-query"])
    assert res.exit_code == 2 and "query id 'all' reads as a summary row" in res.output
    res = runner.invoke(app, base)  # without per-query rows there is nothing to confuse
    assert res.exit_code == 0 and pd.read_csv(io.StringIO(res.stdout))["query"].tolist() == ["all"] * 4
