"""``onlineeval evaluate``'s work on two threads against the same work on one.

* :func:`onlineeval.io.trec_bytes._parse_in_order`: chunks parsed by helper threads are put
  in order, and a chunk out of the format (``None``), a refused ``put`` or an exception in
  any thread ends the reading exactly as on one thread;
* :func:`onlineeval.io.trec_bytes.scan_run` / ``scan_qrels``: identical arrays on one and
  on two threads, for files of many chunks (well-formed, and malformed in a late chunk);
* :func:`onlineeval.io.trec_bytes.threads`: a helper thread only where a processor is idle;
* the coded evaluation of files read on two threads against the pandas path.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from onlineeval.io import trec_bytes
from onlineeval.io.trec_bytes import scan_qrels, scan_run


def _run_parse(n: int, threads: int, bad: int | None = None, refuse: int | None = None,
               raise_at: int | None = None, seed: int = 0) -> tuple[bool, list[int], set[str]]:
    """``_parse_in_order`` over ``n`` chunks whose parse sleeps a random few microseconds;
    the chunks put (in the order put) and the threads that parsed."""
    rng = np.random.default_rng(seed)
    delays = rng.random(n) * 2e-4
    names: set[str] = set()
    put_order: list[int] = []

    def parse(i: int) -> int | None:
        names.add(threading.current_thread().name)
        time.sleep(float(delays[i]))
        if i == raise_at:
            raise ValueError(f"chunk {i}")
        return None if i == bad else i

    def put(part: int) -> bool:
        assert threading.current_thread() is threading.main_thread()
        put_order.append(part)
        return part != refuse

    ok = trec_bytes._parse_in_order(parse, put, n, threads)
    return ok, put_order, names


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("threads", [2, 3])
def test_parse_in_order_puts_in_order_as_on_one_thread(seed: int, threads: int) -> None:
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 7, int(rng.integers(20, 200))):
        ok, put_order, _ = _run_parse(n, threads, seed=seed)
        assert ok and put_order == list(range(n))
        for i in {0, n // 2, n - 1} if n else set():
            # a chunk out of the format, or a put refused: False, with the chunks before it put
            one = _run_parse(n, 1, bad=i, seed=seed)
            got = _run_parse(n, threads, bad=i, seed=seed)
            assert one[:2] == got[:2] == (False, list(range(i)))
            one = _run_parse(n, 1, refuse=i, seed=seed)
            got = _run_parse(n, threads, refuse=i, seed=seed)
            assert one[:2] == got[:2] == (False, list(range(i + 1)))
            with pytest.raises(ValueError, match=f"chunk {i}$"):
                _run_parse(n, threads, raise_at=i, seed=seed)


def test_helper_threads_parse_and_leave_no_thread_behind() -> None:
    before = threading.active_count()
    _, _, names = _run_parse(300, 2)
    assert len(names) == 2  # (each parse sleeps: the helper gets chunks)
    assert threading.active_count() == before
    with pytest.raises(ValueError):
        _run_parse(300, 2, raise_at=150)
    assert threading.active_count() == before


def _write(tmp_path: Path, n_q: int, n_d: int, seed: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    run, qrels = [], []
    for q in rng.permutation(n_q):
        for d in range(n_d):
            doc = f"d{q}x{int(rng.integers(0, 10**int(rng.integers(1, 14))))}_{d}"
            run.append(f"q{q} Q0 {doc} {d + 1} {rng.normal():.4f} tag{seed}")
            if rng.random() < 0.3:
                qrels.append(f"q{q} 0 {doc} {int(rng.integers(0, 4))}")
    rp, qp = tmp_path / "run.txt", tmp_path / "qrels.txt"
    rp.write_text("\n".join(run) + "\n")
    qp.write_text("\n".join(qrels) + "\n")
    return qp, rp


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    fields = ("query", "doc", "score") if hasattr(a, "score") else ("query", "doc", "grade")
    for f in fields:
        x, y = getattr(a, f), getattr(b, f)
        x, y = (x.words, y.words) if f != fields[-1] else (x, y)
        if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
            return False
    return getattr(a, "run_id", None) == getattr(b, "run_id", None)


@pytest.mark.parametrize("chunk", [97, 512, 4096])
@pytest.mark.parametrize("seed", range(3))
def test_scan_on_two_threads_reads_as_on_one(tmp_path: Path, monkeypatch, chunk: int, seed: int) -> None:
    monkeypatch.setattr(trec_bytes, "CHUNK_BYTES", chunk)
    qp, rp = _write(tmp_path, 40, 30, seed)
    assert rp.stat().st_size > 8 * chunk  # many chunks: the threaded path
    got = {}
    for threads in (1, 2):
        monkeypatch.setattr(trec_bytes, "threads", lambda n=threads: n)  # (whatever the machine's load)
        got[threads] = scan_qrels(qp), scan_run(rp)
    assert got[1][0] is not None and got[1][1] is not None
    assert _same(got[1][0], got[2][0]) and _same(got[1][1], got[2][1])
    # a malformed line in a late chunk: both return None (the general reader then reports it)
    lines = rp.read_text().splitlines()
    lines[-3] = lines[-3].replace(" Q0 ", " Q0  x ")
    rp.write_text("\n".join(lines) + "\n")
    for threads in (1, 2):
        monkeypatch.setattr(trec_bytes, "threads", lambda n=threads: n)
        assert scan_run(rp) is None


def _write_lists(tmp_path: Path, seed: int, equal: bool, twice: str | None = None,
                 shuffled: bool = False) -> tuple[Path, Path]:
    """Lists with ties (scores in quarters), qrels with negative grades, a judged query not in
    the run, an unjudged query in the run; ``twice``: a (query, doc) pair twice in that file;
    ``shuffled``: the run's lines in random order (a query's lines in many blocks, some
    between lines of the unjudged query)."""
    rng = np.random.default_rng(seed)
    run_lines, qrels_lines = [], []
    for q in rng.permutation(30):
        n = 20 if equal else int(rng.integers(1, 21))
        for d in range(n):
            run_lines.append(f"q{q:02d} Q0 d{d} {d + 1} {rng.integers(0, 6) / 4:.2f} t")
        for d in rng.choice(25, size=8, replace=False):
            qrels_lines.append(f"q{q:02d} 0 d{d} {int(rng.integers(-1, 4))}")
    qrels_lines += [f"q99 0 d{d} 1" for d in range(3)]
    run_lines += [f"q77 Q0 d{d} {d + 1} 1.00 t" for d in range(20 if equal else 3)]
    if twice == "run":
        run_lines.insert(int(rng.integers(0, len(run_lines))), run_lines[5])
    elif twice == "qrels":
        qrels_lines.append(qrels_lines[3])
    if shuffled:
        run_lines = [run_lines[i] for i in rng.permutation(len(run_lines))]
    qp, rp = tmp_path / "qrels", tmp_path / "run"
    qp.write_text("\n".join(qrels_lines) + "\n")
    rp.write_text("\n".join(run_lines) + "\n")
    return qp, rp


@pytest.mark.parametrize("equal", [True, False])
@pytest.mark.parametrize("ties", ["docno_desc", "input_order", "optimistic", "expected"])
@pytest.mark.parametrize("seed", range(4))
def test_coded_evaluation_by_query_blocks_equals_the_pandas_path(
    tmp_path: Path, monkeypatch, equal: bool, ties: str, seed: int
) -> None:
    """``label_batch_coded`` (judged, ignored and present queries found per block of the
    run's rows; files read on two threads): the same values and counts as the pandas path,
    the same ``None`` (a pair twice) and the same error (a judged query missing); runs
    grouped by query and shuffled (a query in many blocks, unjudged ones between them)."""
    from onlineeval.conventions import preset
    from onlineeval.errors import InputError
    from onlineeval.io import read_qrels, read_run
    from onlineeval.metrics.batch import evaluate_coded
    from onlineeval.metrics.evaluate import evaluate_run

    monkeypatch.setattr(trec_bytes, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(trec_bytes, "threads", lambda: 2)
    metrics = "nDCG@10,AP,RR,P@10"
    for twice in (None, "run", "qrels"):
        qp, rp = _write_lists(tmp_path, seed, equal, twice, shuffled=seed == 3)
        cq, cr = scan_qrels(qp), scan_run(rp)
        assert cq is not None and cr is not None
        for missing, depth in (("zero", None), ("drop", 10), ("error", None)):
            conv = preset("trec_eval").with_(ties=ties, missing=missing, depth=None if ties == "expected" else depth)
            if missing == "error" and twice is None:
                with pytest.raises(InputError) as info:
                    evaluate_coded(cq, cr, metrics, conv)
                with pytest.raises(InputError) as ref_info:
                    evaluate_run(read_qrels(qp), read_run(rp), metrics, conv)
                assert str(info.value) == str(ref_info.value)
                continue
            got = evaluate_coded(cq, cr, metrics, conv)
            if twice is not None:
                assert got is None
                continue
            ref = evaluate_run(read_qrels(qp), read_run(rp), metrics, conv)
            assert got is not None and list(got.queries) == list(ref.queries) and got.counts == ref.counts
            for m in ref.metrics:
                assert np.array_equal(got.values[m], ref.values[m], equal_nan=True), (m, missing)


def test_threads_leave_a_busy_machine_to_one_thread(monkeypatch) -> None:
    """A helper thread only where a processor is idle: no other task running on it now."""
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    for busy, want in ((0.0, 2), (0.5, 1), (1.0, 1), (3.0, 1)):
        monkeypatch.setattr(trec_bytes, "_busy", lambda busy=busy: busy)
        assert trec_bytes.threads() == want, busy
    monkeypatch.setattr(trec_bytes, "_busy", lambda: 0.0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert trec_bytes.threads() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert trec_bytes.threads() == 2  # (at most THREADS)
    monkeypatch.setattr(trec_bytes, "_busy", lambda: 5.0)
    assert trec_bytes.threads() == 2  # (8 processors, 5 busy)
    monkeypatch.setattr(trec_bytes, "_busy", lambda: 7.0)
    assert trec_bytes.threads() == 1
    monkeypatch.setattr(trec_bytes, "THREADS", 1)
    monkeypatch.setattr(trec_bytes, "_busy", lambda: 0.0)
    assert trec_bytes.threads() == 1


def test_busy_counts_the_other_running_tasks(monkeypatch) -> None:
    """``_busy`` reads Linux's count of runnable tasks (this one among them), else the
    1-minute load average, else 0."""
    import io
    import os

    def fake(text: bytes | None):
        def opener(path, mode="r"):
            assert path == "/proc/loadavg" and mode == "rb"
            if text is None:
                raise FileNotFoundError(path)
            return io.BytesIO(text)
        return opener

    monkeypatch.setattr(os, "getloadavg", lambda: (1.25, 0.0, 0.0))
    for text, want in ((b"0.50 0.40 0.30 3/200 1234\n", 2.0), (b"4.1 3.9 3.5 1/99 7\n", 0.0),
                       (b"garbage\n", 1.25), (None, 1.25)):
        monkeypatch.setattr(trec_bytes, "open", fake(text), raising=False)
        assert trec_bytes._busy() == want, text
    monkeypatch.delattr(os, "getloadavg")
    assert trec_bytes._busy() == 0.0
