"""Score files (``query doc score`` lines) as rankings: :func:`onlineeval.io.read_doc_scores`, the format sniffing
of :func:`onlineeval.io.read_ranking`, and ``onlineeval estimate`` targets given as score files (the issue's "the
targets are TREC runs or score files"), ``evaluate --run``, the Python API and a trec collection's runs: the same
numbers as the same rankings written as TREC runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from estimate_cli_world import invoke, json_out, world  # noqa: F401  (world: the module-scoped fixture)
from onlineeval.errors import InputError
from onlineeval.io import read_ranking, read_run, read_doc_scores


def _as_scores(run: Path, out: Path) -> Path:
    """The TREC run's (query, doc, score) columns as a score file, in reversed line order (the order of a
    score file's lines must not matter: the scores rank)."""
    lines = [ln.split() for ln in run.read_text().splitlines() if ln.strip()]
    out.write_text("# query doc score\n" + "".join(f"{f[0]}\t{f[2]}  {f[4]}\n" for f in reversed(lines)))
    return out


def test_read_scores_matches_read_run_and_sniffing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "A.run"
    run.write_text("q1 Q0 d1 1 2.5 A\nq1 Q0 d2 2 1.0 A\nq2 Q0 d1 1 -3e-2 A\n")
    scores = _as_scores(run, tmp_path / "A.scores")
    a, b = read_run(run), read_doc_scores(scores)
    key = ["query", "doc"]
    pa, pb = a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True)
    assert pa[key].equals(pb[key]) and np.array_equal(pa["score"], pb["score"])
    assert b.attrs["run_id"] == "A" and b.attrs["path"] == str(scores)
    assert read_ranking(scores).equals(b) and read_ranking(run).equals(a)
    # the line scan (where the C reader declines a file) gives the same frame as the fast path
    import onlineeval.io.trec as trec

    fast = read_doc_scores(scores)
    monkeypatch.setattr(trec, "_fast_table", lambda *a, **k: None)
    scanned = read_doc_scores(scores)
    assert scanned.to_dict("list") == fast.to_dict("list") and scanned.attrs == fast.attrs


@pytest.mark.parametrize("text, message, line", [
    ("q1 d1\n", r"expected a TREC run \(6 columns: query Q0 doc rank score tag\) or a score file \(3 columns", 1),
    ("q1 d1 1\nq1 d2 x\n", r"score must be a number, got 'x'", 2),
    ("q1 d1 1\nq1 d2 nan\n", r"score must be finite, got 'nan'", 2),
    ("q1 d1 1\nq1 d2 1 2\n", r"expected 3 columns \(query doc score, as on the first line\), found 4", 2),
    ("q1 d1 1\nq2 d1 2\nq1 d1 3\n", r"document 'd1' appears twice for query 'q1'", 3),
    ("# only a comment\n", r"no data lines", None),
])
def test_bad_score_files_name_the_file_and_line(tmp_path: Path, text: str, message: str, line: int | None) -> None:
    path = tmp_path / "bad.scores"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as err:
        read_ranking(path)
    assert str(path) in str(err.value)
    if line is not None:
        assert f"{path}:{line}:" in str(err.value)


def test_estimate_takes_score_files_as_targets(world: dict, tmp_path: Path) -> None:  # noqa: F811
    """The same estimates (bit for bit) with the target and the baseline given as score files as with the TREC
    runs; a run's label is its file's stem."""
    by_run = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                      "--estimator", "ips,snips,rips")
    b = _as_scores(world["B"], tmp_path / "B.scores")
    a = _as_scores(world["A"], tmp_path / "A.scores")
    by_scores = json_out("--log", str(world["log"]), "--target", str(b), "--baseline", str(a),
                         "--estimator", "ips,snips,rips")
    for key in ("results", "differences"):
        got = [(r["estimator"], r["target"], r["estimate"], r["se"]) for r in by_scores[key]]
        want = [(r["estimator"], r["target"], r["estimate"], r["se"]) for r in by_run[key]]
        assert got == want and len(got) >= 3
    bad = tmp_path / "short.scores"
    bad.write_text("q0 d0\n")
    result = invoke("--log", str(world["log"]), "--target", str(bad), "--estimator", "ips")
    assert result.exit_code == 2 and f"{bad}:1:" in result.output


def test_python_api_reads_score_files_as_runs(world: dict, tmp_path: Path) -> None:  # noqa: F811
    """onlineeval.estimate with run paths: a score file gives the TREC run's results."""
    import pandas as pd

    import onlineeval

    b = _as_scores(world["B"], tmp_path / "B.scores")
    by_run = onlineeval.estimate(world["log"], {"B": world["B"]}, "ips,rips", baseline=("A", world["A"]))
    by_scores = onlineeval.estimate(world["log"], {"B": b}, "ips,rips", baseline=("A", world["A"]))
    pd.testing.assert_frame_equal(by_run.results.drop(columns=["warnings"]),
                                  by_scores.results.drop(columns=["warnings"]))
    assert by_scores.value("rips", "B") == by_run.value("rips", "B")


def test_evaluate_and_the_simulator_read_score_files_as_runs(tmp_path: Path) -> None:
    """`onlineeval evaluate --run` and a trec collection's runs take a query doc score file too: the same means
    as the TREC run (its label the file's stem), and the same simulated world."""
    import json

    from typer.testing import CliRunner

    from onlineeval.cli import app
    from simulations.config import config_from_mapping
    from simulations.world import build_world

    rng = np.random.default_rng(2)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{q} 0 d{d} {int(rng.integers(0, 3))}\n" for q in range(6) for d in range(8)))
    run = tmp_path / "A.run"
    run.write_text("".join(f"q{q} Q0 d{d} {d + 1} {rng.normal():.6f} A\n" for q in range(6) for d in range(8)))
    scores = _as_scores(run, tmp_path / "A.scores")
    runner = CliRunner()
    docs = [json.loads(runner.invoke(app, ["evaluate", "--qrels", str(qrels), "--run", str(p), "--metrics",
                                           "nDCG@5,AP", "--format", "json"]).stdout) for p in (run, scores)]
    assert docs[0]["systems"] == docs[1]["systems"] and docs[0]["systems"][0]["name"] == "A"
    assert docs[0]["systems"][0]["metrics"]["AP"]["n"] == 6
    mapping = {"seed": 1, "collection": {"type": "trec", "qrels": str(qrels), "runs": {"A": str(run), "B": str(run)}},
               "rankers": {"depth": 5}, "users": {"population": 50}, "traffic": {"days": 1, "queries_per_day": 10},
               "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query"}]}
    by_run = build_world(config_from_mapping(mapping), np.random.default_rng(0))
    mapping["collection"]["runs"]["B"] = str(scores)
    by_scores = build_world(config_from_mapping(mapping), np.random.default_rng(0))
    assert np.array_equal(by_scores.rankings["B"], by_run.rankings["A"])
    assert np.array_equal(by_scores.ranked_labels("B"), by_run.ranked_labels("B"))


def test_read_ranking_reads_the_file_once_and_sniffs_past_comments(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The format is told from the first data line (a byte-order mark, blank and '#' lines before it skipped), and
    the file is read once: a large run is not read and split a second time to find its format."""
    import onlineeval.io.trec as trec

    path = tmp_path / "A.scores"
    path.write_bytes("\ufeff# query doc score\n\n  q1 d1 2.5\nq1 d2 1\n".encode())
    reads = []
    real = trec._read_bytes
    monkeypatch.setattr(trec, "_read_bytes", lambda p: reads.append(p) or real(p))
    frame = read_ranking(path)
    assert reads == [path] and frame.to_dict("list") == {"query": ["q1", "q1"], "doc": ["d1", "d2"],
                                                         "score": [2.5, 1.0]}
    run = tmp_path / "B.run"
    run.write_text("# comment\nq1 Q0 d1 1 2.5 B\n")
    assert read_ranking(run).attrs["run_id"] == "B" and len(reads) == 2
