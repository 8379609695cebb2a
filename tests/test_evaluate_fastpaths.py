"""Fast paths of ``onlineeval evaluate``'s whole process against the general code they skip.

* :func:`onlineeval.io.trec_bytes._fields`: the one-pass layout check
  (``_single_separators``) against the general separator code, on random and mutated bytes;
* :func:`onlineeval.io.trec_bytes._ids`: the id words against the bytes themselves;
* :func:`onlineeval.io.ranking.layout_arrays`: the reshaped row matrix of equally long
  queries against the padded scatter (the path taken with the tie groups);
* the direct command-line path's process settings (numpy's huge-page advice) change no
  output: the table of a run is byte-identical with and without them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onlineeval.io import ranking, trec_bytes

SETTINGS = settings(max_examples=150, deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _buffer(text: bytes) -> tuple[bytearray, np.ndarray]:
    raw = bytearray(text) + bytearray(trec_bytes._PAD)
    return raw, np.frombuffer(raw, dtype=np.uint8)


def _fields_both(text: bytes, ncols: int, monkeypatch: pytest.MonkeyPatch):
    """``_fields`` of ``text`` (placed after a line of other bytes: offsets are from its
    start) with the one-pass check and with the general code alone; separator ends filled in."""
    before = b"x y\n"
    raw, buf = _buffer(before + text)
    fast = trec_bytes._fields(raw, buf, len(before), len(before) + len(text), ncols)
    with monkeypatch.context() as m:
        m.setattr(trec_bytes, "_single_separators", lambda data, ncols: None)
        general = trec_bytes._fields(raw, buf, len(before), len(before) + len(text), ncols)
    if fast is not None and fast[3] is None:
        fast = (*fast[:3], fast[2] + 1)
    return fast, general


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return all(np.array_equal(x, y) for x, y in zip(a, b))


_FIELD = st.text(alphabet="aq0123.-", min_size=0, max_size=4)
_SEP = st.sampled_from([" ", "\t", "  ", " \t", "\r", ""])


@SETTINGS
@given(st.data(), st.sampled_from(["\n", "", "\n\n", "\r\n"]), st.sampled_from([4, 6]))
def test_one_pass_fields_equal_the_general_code(monkeypatch, data, end: str, ncols: int) -> None:
    """Any layout (single and repeated separators, empty fields and lines, other control
    bytes, a missing last newline): the fast path gives the general code's answer. Most
    lines hold ``ncols`` fields, so that the separator counts often agree."""
    width = st.sampled_from([ncols] * 4 + [ncols - 1, ncols + 1])
    lines = data.draw(st.lists(width.flatmap(lambda k: st.lists(st.tuples(_FIELD, _SEP), min_size=k, max_size=k)),
                               min_size=1, max_size=6))
    text = "\n".join("".join(f + s for f, s in line[:-1]) + line[-1][0] for line in lines) + end
    if not text:
        return
    fast, general = _fields_both(text.encode(), ncols, monkeypatch)
    assert _same(fast, general), text


@pytest.mark.parametrize(
    "text",
    [
        b"q1 0 d1 1\nq1 0 d2 0\n",
        b"q1 0 d1 1\nq1 0 d2 0",
        b"q1\t0\td1\t1\nq1 0 d2\t0\n",
        b"q1 0  d1 1\nq1 0 d2 0\n",  # a double space: general code
        b"q1 0 d1 1\n\nq1 0 d2 0\n",  # an empty line: refused
        b" q1 0 d1 1\n",  # a leading space: refused
        b"q1 0 d1 1 \n",  # a trailing space: refused
        b"q1 0 d1 1\r\n",  # a carriage return: refused
        b"q1 0 d1\n",  # a field short: refused
        b"q1  d1 1\n",  # an empty field, the separator count right: refused
        b"q1 0 d1 1\nq2 0  1\n",  # the same on the last line
        b"q1 0 d1 1\nq2\t\td2 1",  # and with tabs, no last newline
    ],
)
def test_one_pass_fields_on_layouts(monkeypatch, text: bytes) -> None:
    fast, general = _fields_both(text, 4, monkeypatch)
    assert _same(fast, general)


@SETTINGS
@given(st.lists(st.text(alphabet="abcXYZ0189-_.", min_size=1, max_size=30), min_size=1, max_size=30))
def test_id_words_hold_the_bytes(ids: list) -> None:
    """Each id's words are its bytes, big-endian, zero-padded (decoded back exactly)."""
    text = b" ".join(i.encode() for i in ids)
    raw, buf = _buffer(text)
    starts = np.cumsum([0] + [len(i) + 1 for i in ids[:-1]]).astype(np.int64)
    ends = starts + np.array([len(i) for i in ids], dtype=np.int64)
    got = trec_bytes._ids(buf, starts, ends)
    assert got is not None
    assert list(got.decode()) == ids
    k = got.words.shape[1]
    expected = [int.from_bytes(i.encode().ljust(8 * k, b"\0"), "big") for i in ids]
    assert [int.from_bytes(row.astype(">u8").tobytes(), "big") for row in got.words] == expected


@pytest.mark.parametrize("ties", ["docno_desc", "input_order", "pessimistic", "optimistic"])
@pytest.mark.parametrize("depth", [None, 3, 7, 50])
@pytest.mark.parametrize("seed", [0, 1])
def test_equal_lists_reshape_like_the_padded_scatter(ties: str, depth: int | None, seed: int) -> None:
    rng = np.random.default_rng(seed)
    nq, width = 40, 7
    qcodes = np.repeat(rng.permutation(nq), width)  # blocks, not in code order
    scores = rng.integers(0, 4, size=nq * width).astype(np.float64)  # many ties
    scores[rng.random(scores.size) < 0.1] = -0.0
    grades = rng.integers(-1, 3, size=scores.size)
    docs = rng.integers(0, 10, size=scores.size)

    def key(rows: np.ndarray) -> np.ndarray:
        return -docs[rows]

    names = np.array([f"q{i}" for i in range(nq)], dtype=object)
    fast = ranking.layout_arrays(scores, key, ties, grades, depth, qcodes, names, with_groups=False)
    padded = ranking.layout_arrays(scores, key, ties, grades, depth, qcodes, names, with_groups=True)
    assert np.array_equal(fast.rows, padded.rows) and np.array_equal(fast.lengths, padded.lengths)
    assert fast.rows.dtype == padded.rows.dtype == np.int64
    # and unequal lists (the padded scatter for both)
    keep = rng.random(scores.size) < 0.8
    a = ranking.layout_arrays(scores[keep], lambda r: -docs[keep][r], ties, grades[keep], depth, qcodes[keep], names,
                              with_groups=False)
    b = ranking.layout_arrays(scores[keep], lambda r: -docs[keep][r], ties, grades[keep], depth, qcodes[keep], names)
    assert np.array_equal(a.rows, b.rows) and np.array_equal(a.lengths, b.lengths)
    # the scatter against the rows themselves: each query lists its own rows by descending score,
    # as many as the depth keeps, then padding (input_order: exactly the ties in file order)
    kq, ks = qcodes[keep], scores[keep]
    for i in range(nq):
        mine = np.flatnonzero(kq == i)
        n = int(a.lengths[i])
        assert n == (mine.size if depth is None else min(depth, mine.size))
        listed = a.rows[i, :n]
        assert (a.rows[i, n:] == -1).all() and np.isin(listed, mine).all() and (np.diff(ks[listed]) <= 0).all()
        if ties == "input_order":
            assert np.array_equal(listed, mine[np.lexsort((mine, -ks[mine]))][:n])


def test_process_settings_change_no_output(tmp_path: Path) -> None:
    """The direct path (allocator and huge-page settings) and the typer path print the same bytes."""
    rng = np.random.default_rng(3)
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    n_q, n_d = 300, 60
    q = np.repeat(np.arange(n_q), n_d)
    d = np.tile(np.arange(n_d), n_q)
    judged = rng.random(q.size) < 0.4
    qrels.write_text("".join(f"q{a} 0 d{b} {g}\n" for a, b, g in zip(q[judged], d[judged], rng.integers(0, 4, q.size))))
    run.write_text("".join(f"q{a} Q0 d{b} 0 {s:.3f} t\n" for a, b, s in zip(q, d, rng.normal(size=q.size))))
    args = ["evaluate", "--qrels", str(qrels), "--run", str(run), "--preset", "trec_eval", "--format", "json",
            "--metrics", "nDCG@10,AP,RR,P@10,ERR@10,RBP(p=0.8)"]
    direct = subprocess.run([sys.executable, "-m", "onlineeval.cli", *args], capture_output=True, check=True)
    via_typer = subprocess.run(
        [sys.executable, "-c", "import sys; from onlineeval.cli import app; sys.argv[0] = 'onlineeval'; app()", *args],
        capture_output=True, check=False,
    )
    assert via_typer.returncode == 0, via_typer.stderr.decode()
    assert direct.stdout == via_typer.stdout and direct.stdout


@pytest.mark.parametrize("slots", [1, 2, 4])
@pytest.mark.parametrize("rows", [1, 3, 64, 1 << 16])
@pytest.mark.parametrize("seed", range(6))
def test_key_table_finds_what_a_dict_and_searchsorted_find(monkeypatch, slots: int, rows: int, seed: int) -> None:
    """The qrels join's hash table (:class:`onlineeval.metrics.batch._KeyTable`) against a
    dict of the keys and against the binary search it replaced (numpy's searchsorted into
    the sorted keys): keys of queries with 0 to 300 rows, low bits that collide often (few
    distinct doc hashes: many crowded slots), probes equal to keys and not, extremes; and
    ``None`` exactly when two keys are equal."""
    from onlineeval.metrics import batch

    monkeypatch.setattr(batch, "SLOTS_PER_KEY", slots)
    monkeypatch.setattr(batch, "HASH_ROWS", rows)
    rng = np.random.default_rng(seed)
    n_ranks = int(rng.integers(1, 50))
    q_bits = max(1, (n_ranks - 1).bit_length()) if seed % 2 else 40
    shift = np.uint64(64 - q_bits)
    per = rng.integers(0, 300, size=n_ranks) * (rng.random(n_ranks) < 0.8)
    rank = np.repeat(np.arange(n_ranks), per).astype(np.uint64)
    top = 2 ** (64 - q_bits) - 1

    def low_parts(size: int) -> np.ndarray:
        lows = rng.integers(0, top, size=size, dtype=np.uint64, endpoint=True)
        if seed % 3 == 0:  # only three values of the low 6 bits: many keys share a slot
            lows = (lows & ~np.uint64(63)) | rng.integers(0, 3, size=size).astype(np.uint64)
        return lows

    keys = (rank << shift) | low_parts(rank.size)
    if seed % 2:
        keys = keys[rng.permutation(keys.size)]
    if np.unique(keys).size != keys.size:  # (random 64-bit low parts: practically never)
        return
    table = batch._KeyTable.build(keys, q_bits, n_ranks)
    assert table is not None
    if seed % 3 == 0 and per.max() > 3:
        assert table.aside_keys.size  # (rows kept aside: the crowded slots' search is tested)
    m = int(rng.integers(0, 3000))
    probes = np.concatenate([
        keys[rng.integers(0, keys.size, size=m)] if keys.size else np.zeros(0, dtype=np.uint64),
        (rng.integers(0, n_ranks, size=m).astype(np.uint64) << shift) | low_parts(m),
        np.array([0, ((n_ranks - 1) << (64 - q_bits)) | top], dtype=np.uint64),
    ])
    where = {int(k): i for i, k in enumerate(keys)}
    expected = np.array([where.get(int(k), -1) for k in probes], dtype=np.int64)
    got = table.find(probes)
    assert got.dtype == np.int64 and np.array_equal(got, expected)
    if keys.size:  # the replaced search: order[i] where ordered[i] equals the key, else -1
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        pos = np.minimum(np.searchsorted(ordered, probes), ordered.size - 1)
        assert np.array_equal(got, np.where(ordered[pos] == probes, order[pos], -1))
        # a key twice, as the slot's kept row or as another row kept aside: None
        for i in (0, keys.size - 1, int(rng.integers(0, keys.size))):
            twice = np.insert(keys, int(rng.integers(0, keys.size + 1)), keys[i])
            assert batch._KeyTable.build(twice, q_bits, n_ranks) is None
