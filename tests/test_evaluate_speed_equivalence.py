"""Issue 9 (speed): the faster paths of ``onlineeval evaluate`` give identical results.

References are the previous implementations, kept verbatim below (``_old_*``): the
sort-merge join of run rows to qrels (``_join_codes``) must return the same labels and
raise the same errors as the hash-index join, and evaluations must agree to the bit, per
query, with those through the old join, judged-grade matrix and per-query sort, on trec_eval's
test data and on random synthetic files. The direct
``evaluate`` path must print what typer's app prints (its argument parser against typer's:
tests/test_evaluate_direct.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import onlineeval.metrics.evaluate as evaluate_module
from onlineeval.conventions import preset
from onlineeval.errors import InputError
from onlineeval.io import ranking, read_qrels, read_run
from onlineeval.metrics.evaluate import evaluate_run

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_eval"
METRICS = "nDCG@10,nDCG,AP,RR,P@10,R@100,ERR@20,RBP(p=0.8),RPrec,bpref"
EXPECTED_METRICS = "nDCG@10,nDCG,AP,RR,P@10,R@100"  # those with an exact expectation over tie orders


# --- the previous join, verbatim (reference) -------------------------------------------


def _old_join_codes(run_q, qrels_q, run_docs, qrels_docs, qrels_grades, run_path=None, qrels_path=None):
    rd, qd, uniq = ranking._joint_codes(run_docs, qrels_docs, sort=False)
    nd = max(len(uniq), 1)
    qrels_index = pd.Index(qrels_q * nd + qd)
    if not qrels_index.is_unique:
        ranking._duplicate_error(qrels_index.duplicated(), qrels_path, "qrels", "judged twice")
    run_index = pd.Index(run_q * nd + rd)
    if not run_index.is_unique:
        ranking._duplicate_error(run_index.duplicated(), run_path, "run", "listed twice")
    hit = qrels_index.get_indexer(run_index)
    g = np.asarray(qrels_grades, dtype=np.int64)
    out = np.where(hit >= 0, g[np.maximum(hit, 0)], -1)
    return np.where((hit >= 0) & (out < 0), -2, out).astype(np.int64)


def _old_judged_matrix(qrels, queries, *_unused):
    g = qrels["grade"].to_numpy(dtype=np.int64)
    qi = pd.Index(queries).get_indexer(evaluate_module._ids(qrels["query"]))
    keep = (qi >= 0) & (g >= 0)
    qi, g = qi[keep], g[keep]
    nq = len(queries)
    counts = np.bincount(qi, minlength=nq)
    width = max(int(counts.max(initial=0)), 1)
    order = np.argsort(qi, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    qs = qi[order]
    pos = np.arange(qi.size) - starts[qs]
    out = np.full((nq, width), -1, dtype=np.int64)
    out[qs, pos] = g[order]
    return -np.sort(-out, axis=1)


def _old_segment_sort(qcodes, scores, nq, stable=True):
    n = qcodes.size
    counts = np.bincount(qcodes, minlength=nq)
    width = int(counts.max(initial=0))
    if n == 0 or nq * width > 4 * n + 1024:
        order = np.lexsort((-scores, qcodes))
        return order, qcodes[order]
    change = np.flatnonzero(qcodes[1:] != qcodes[:-1]) + 1
    if change.size == np.count_nonzero(counts) - 1:
        by_query = np.arange(n)
        qs = qcodes
        block_start = np.zeros(n, dtype=np.int64)
        block_start[change] = change
        pos = np.arange(n) - np.maximum.accumulate(block_start)
    else:
        by_query = np.argsort(qcodes, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        qs = qcodes[by_query]
        pos = np.arange(n) - starts[qs]
    keys = np.full((nq, width), np.inf)
    keys[qs, pos] = -scores[by_query]
    rows = np.full((nq, width), -1, dtype=np.int64)
    rows[qs, pos] = by_query
    perm = np.argsort(keys, axis=1, kind="stable" if stable else None)
    sorted_rows = np.take_along_axis(rows, perm, axis=1)
    valid = np.arange(width)[None, :] < counts[:, None]
    return sorted_rows[valid], np.repeat(np.arange(nq), counts)


@pytest.mark.parametrize("seed", range(30))
def test_segment_sort_equals_old(seed: int) -> None:
    """Equal-length contiguous lists (the new block path) and every other layout."""
    rng = np.random.default_rng(seed)
    nq, width = int(rng.integers(1, 12)), int(rng.integers(1, 15))
    layout = seed % 3
    if layout == 0:  # contiguous, equally long, blocks in shuffled query order, some codes unused
        codes = rng.choice(nq + 3, size=nq, replace=False)
        qcodes = np.repeat(codes, width)
        n_codes = nq + 3
    elif layout == 1:  # contiguous, unequal lengths
        qcodes = np.repeat(rng.permutation(nq), rng.integers(1, width + 1, nq))
        n_codes = nq
    else:  # interleaved
        qcodes = rng.integers(0, nq, nq * width)
        n_codes = nq
    qcodes = qcodes.astype(np.int64)
    scores = np.round(rng.normal(size=qcodes.size), 1)  # ties
    for stable in (True, False):
        old = _old_segment_sort(qcodes, scores, n_codes, stable)
        new = ranking._segment_sort(qcodes, scores, n_codes, stable)
        for a, b in zip(old, new):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except InputError as exc:
        return "error", str(exc)


@pytest.mark.parametrize("seed", range(40))
def test_join_codes_equals_old_join(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_q, n_docs = int(rng.integers(1, 8)), int(rng.integers(1, 30))
    n_run, n_qrels = int(rng.integers(0, 60)), int(rng.integers(0, 60))
    run_q = rng.integers(0, n_q, n_run)
    qrels_q = rng.integers(0, n_q, n_qrels)
    if seed % 3 == 0:  # grouped by query, as files usually are
        run_q, qrels_q = np.sort(run_q), np.sort(qrels_q)
    run_docs = np.array([f"d{i}" for i in rng.integers(0, n_docs, n_run)], dtype=object)
    qrels_docs = np.array([f"d{i}" for i in rng.integers(0, n_docs, n_qrels)], dtype=object)
    if seed % 2 == 0:  # no repeated pairs: the labels themselves are compared
        run_q, run_docs = _distinct(run_q, run_docs)
        qrels_q, qrels_docs = _distinct(qrels_q, qrels_docs)
    grades = rng.integers(-2, 4, len(qrels_q))
    args = (run_q.astype(np.int64), qrels_q.astype(np.int64), run_docs, qrels_docs, grades)
    old, new = _outcome(_old_join_codes, *args), _outcome(ranking._join_codes, *args)
    assert old[0] == new[0]
    if old[0] == "ok":
        assert old[1].dtype == new[1].dtype == np.int64
        np.testing.assert_array_equal(old[1], new[1])
    else:
        assert old[1] == new[1]


def _distinct(q: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    seen: set[tuple[int, str]] = set()
    keep = [i for i, key in enumerate(zip(q.tolist(), d.tolist())) if not (key in seen or seen.add(key))]
    return q[keep], d[keep]


# --- whole evaluations: new path vs old join, to the bit -------------------------------


def _both(qrels: pd.DataFrame, run: pd.DataFrame, conv, monkeypatch) -> tuple:
    metrics = EXPECTED_METRICS if conv.ties == "expected" else METRICS
    new = evaluate_run(qrels, run, metrics, conv)
    with monkeypatch.context() as m:
        m.setattr(evaluate_module, "_join_codes", _old_join_codes)
        m.setattr(evaluate_module, "_judged_matrix", _old_judged_matrix)
        m.setattr(ranking, "_segment_sort", _old_segment_sort)
        old = evaluate_run(qrels, run, metrics, conv)
    return old, new


def _assert_same(old, new) -> None:
    np.testing.assert_array_equal(old.queries, new.queries)
    np.testing.assert_array_equal(old.counted, new.counted)
    assert old.counts == new.counts
    for m in old.metrics:
        a, b = old.values[m], new.values[m]
        assert a.tobytes() == b.tobytes(), m  # bit for bit, NaN included


TREC_PAIRS = [
    ("qrels.test", "results.test"),
    ("qrels.test", "results.trunc"),
    ("qrels.rel_level", "results.test"),
    ("qrels.comment.test", "results.comment.test"),
    ("qrels-302.test", "results-302.test"),
    ("edge_cases/qrels.edge", "edge_cases/run.edge"),
    ("edge_cases/qrels.tie100", "edge_cases/run.tie100"),
]


@pytest.mark.parametrize(("qrels_name", "run_name"), TREC_PAIRS)
@pytest.mark.parametrize("ties", ["docno_desc", "input_order", "pessimistic", "expected"])
def test_trec_eval_data_bit_identical(qrels_name: str, run_name: str, ties: str, monkeypatch) -> None:
    if not (DATA / qrels_name).exists() or not (DATA / run_name).exists():
        pytest.skip(f"trec_eval test data absent ({DATA / qrels_name}, {DATA / run_name})")
    qrels, run = read_qrels(DATA / qrels_name), read_run(DATA / run_name)
    conv = preset("trec_eval").with_(missing="zero", ties=ties)
    _assert_same(*_both(qrels, run, conv, monkeypatch))


def _synthetic(folder: Path, seed: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    n_q, n_d = int(rng.integers(5, 60)), int(rng.integers(5, 80))
    lines_r, lines_q = [], []
    queries = [f"q{i}" for i in rng.permutation(n_q)]
    for q in queries:
        docs = rng.choice(n_d * 2, size=int(rng.integers(1, n_d + 1)), replace=False)
        scores = np.round(rng.normal(size=docs.size), 1)  # ties
        for d, s in zip(docs, scores):
            lines_r.append(f"{q} Q0 D{d} 0 {s} sys")
        judged = rng.choice(n_d * 2, size=int(rng.integers(0, n_d)), replace=False)
        for d in judged:
            lines_q.append(f"{q} 0 D{d} {int(rng.integers(-1, 4))}")
    lines_q.append("extra_q 0 D1 2")  # a qrels query absent from the run
    order = rng.permutation(len(lines_r)) if seed % 2 else np.arange(len(lines_r))  # shuffled lines too
    qrels_path, run_path = folder / f"qrels{seed}", folder / f"run{seed}"
    qrels_path.write_text("\n".join(lines_q) + "\n")
    run_path.write_text("\n".join(lines_r[i] for i in order) + "\n")
    return qrels_path, run_path


@pytest.mark.parametrize("seed", range(12))
def test_synthetic_files_bit_identical(seed: int, tmp_path: Path, monkeypatch) -> None:
    qrels_path, run_path = _synthetic(tmp_path, seed)
    qrels, run = read_qrels(qrels_path), read_run(run_path)
    for ties in ("docno_desc", "input_order", "optimistic"):
        conv = preset("trec_eval").with_(missing="zero", ties=ties, depth=None if seed % 3 else 10)
        _assert_same(*_both(qrels, run, conv, monkeypatch))


def test_repeated_pair_errors_unchanged(tmp_path: Path, monkeypatch) -> None:
    """A repeated pair read with ``check_unique=False`` is still located by evaluate_run."""
    q = tmp_path / "qrels"
    q.write_text("q1 0 a 1\nq1 0 b 0\nq1 0 a 2\n")
    r = tmp_path / "run"
    r.write_text("q1 Q0 a 1 2.0 s\nq1 Q0 b 2 1.0 s\nq1 Q0 b 3 0.5 s\n")
    good_q = tmp_path / "good_qrels"
    good_q.write_text("q1 0 a 1\n")
    for qrels_path in (q, good_q):
        qrels, run = read_qrels(qrels_path, check_unique=False), read_run(r, check_unique=False)
        messages = []
        for join in (_old_join_codes, ranking._join_codes):
            with monkeypatch.context() as m:
                m.setattr(evaluate_module, "_join_codes", join)
                with pytest.raises(InputError) as info:
                    evaluate_run(qrels, run, "AP", preset("trec_eval"))
                messages.append(str(info.value))
        assert messages[0] == messages[1]
        assert ("judged twice" if qrels_path == q else "appears twice") in messages[1]


# --- the direct path's output vs typer's (its parser: tests/test_evaluate_direct.py) ---------


def test_direct_path_output_equals_typer_output(tmp_path: Path) -> None:
    """The same command through the console entry point (direct) and through typer's app."""
    from typer.testing import CliRunner

    from onlineeval.cli import app

    qrels_path, run_path = _synthetic(tmp_path, 3)
    for extra in (["--format", "json"], ["--format", "csv", "--with-per-query"], ["--depth", "5"]):
        args = ["evaluate", "--qrels", str(qrels_path), "--run", str(run_path), "--missing", "zero",
                "--preset", "trec_eval", *extra]
        via_typer = CliRunner().invoke(app, args)
        direct = subprocess.run([sys.executable, "-m", "onlineeval.cli", *args], capture_output=True, text=True,
                                check=False)
        assert direct.returncode == via_typer.exit_code == 0
        assert direct.stdout == via_typer.stdout
    bad = ["evaluate", "--qrels", str(qrels_path), "--run", str(run_path)]  # a query missing: exit 2
    via_typer = CliRunner().invoke(app, bad)
    direct = subprocess.run([sys.executable, "-m", "onlineeval.cli", *bad], capture_output=True, text=True, check=False)
    assert direct.returncode == via_typer.exit_code == 2
    assert direct.stderr.strip() == via_typer.output.strip()
