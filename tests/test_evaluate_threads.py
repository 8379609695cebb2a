"""``onlineeval evaluate``'s work on two threads against the same work on one.

* :func:`onlineeval.io.trec_bytes._parse_in_order`: chunks parsed by helper threads are put
  in order, and a chunk out of the format (``None``), a refused ``put`` or an exception in
  any thread ends the reading exactly as on one thread;
* :func:`onlineeval.io.trec_bytes.scan_run` / ``scan_qrels``: identical arrays on one and
  on two threads, for files of many chunks (well-formed, and malformed in a late chunk).
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
        monkeypatch.setattr(trec_bytes, "THREADS", threads)
        got[threads] = scan_qrels(qp), scan_run(rp)
    assert got[1][0] is not None and got[1][1] is not None
    assert _same(got[1][0], got[2][0]) and _same(got[1][1], got[2][1])
    # a malformed line in a late chunk: both return None (the general reader then reports it)
    lines = rp.read_text().splitlines()
    lines[-3] = lines[-3].replace(" Q0 ", " Q0  x ")
    rp.write_text("\n".join(lines) + "\n")
    for threads in (1, 2):
        monkeypatch.setattr(trec_bytes, "THREADS", threads)
        assert scan_run(rp) is None
