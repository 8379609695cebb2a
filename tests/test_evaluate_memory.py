"""The coded evaluation's lower-memory steps against the code they replaced (kept here as
the reference) and against the pandas path:

* :func:`onlineeval.metrics.batch._hash` in place, the keys hashed on row blocks, and the keys and grades of
  :func:`onlineeval.metrics.batch._join` (block-wise equality test, no full-size gather);
* :func:`onlineeval.io.ranking._segment_sort` sorting equally long lists on row blocks;
* :func:`onlineeval.io.trec_bytes.scan_run` writing each chunk's rows straight into the
  result (ids that widen or narrow from chunk to chunk);
* :func:`onlineeval.metrics.batch.label_batch_coded` taking the grades in one gather when
  no list is padded, and freeing its arrays early: the same evaluation as
  :func:`onlineeval.metrics.evaluate.evaluate_run`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from onlineeval.conventions import preset
from onlineeval.io import ranking, read_qrels, read_run, trec_bytes
from onlineeval.io.trec_bytes import scan_qrels, scan_run
from onlineeval.metrics import batch
from onlineeval.metrics.batch import evaluate_coded
from onlineeval.metrics.evaluate import evaluate_run

_U = np.uint64


def _old_hash(words: np.ndarray) -> np.ndarray:
    """The whole-array hash this change replaced (reference)."""
    m1, m2 = _U(0xBF58476D1CE4E5B9), _U(0x94D049BB133111EB)
    with np.errstate(over="ignore"):
        h = np.full(words.shape[0], 0x9E3779B97F4A7C15, dtype=np.uint64)
        for j in range(words.shape[1]):
            h ^= words[:, j]
            h ^= h >> _U(30)
            h *= m1
            h ^= h >> _U(27)
            h *= m2
            h ^= h >> _U(31)
    return h


def _old_join(run_q, run_docs, qrels_q, qrels_docs, grades, hash_fn=_old_hash):
    """The join this change replaced (reference), with numpy's searchsorted over the whole
    array for the block-wise one (tested equal to it in test_evaluate_fastpaths)."""
    k = max(run_docs.shape[1], qrels_docs.shape[1])
    run_docs, qrels_docs = batch._pad_words(run_docs, k), batch._pad_words(qrels_docs, k)
    n_codes = int(max(qrels_q.max(initial=-1), run_q.max(initial=-1))) + 1
    q_bits = max(1, (n_codes - 1).bit_length())
    change = np.ones(run_q.size, dtype=bool)
    change[1:] = run_q[1:] != run_q[:-1]
    block_codes = run_q[change]
    _, first_block = np.unique(block_codes, return_index=True)
    firsts = block_codes[np.sort(first_block)]
    rank = np.full(n_codes, -1, dtype=np.int64)
    rank[firsts] = np.arange(firsts.size)
    rest = rank < 0
    rank[rest] = firsts.size + np.arange(int(rest.sum()))
    shift = _U(64 - q_bits)
    run_keys = (rank[run_q].astype(np.uint64) << shift) | (hash_fn(run_docs) >> _U(q_bits))
    qrels_keys = (rank[qrels_q].astype(np.uint64) << shift) | (hash_fn(qrels_docs) >> _U(q_bits))
    order = np.argsort(qrels_keys, kind="stable")
    ordered = qrels_keys[order]
    if ordered.size > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        return None
    out = np.full(run_q.size, -1, dtype=np.int64)
    if ordered.size == 0 or run_q.size == 0:
        return out, run_keys
    pos = np.minimum(np.searchsorted(ordered, run_keys), ordered.size - 1)
    hit = np.flatnonzero(ordered[pos] == run_keys)
    match = order[pos[hit]]
    if not ((qrels_q[match] == run_q[hit]).all() and (qrels_docs[match] == run_docs[hit]).all()):
        return None
    g = grades[match]
    out[hit] = np.where(g < 0, -2, g)
    return out, run_keys


@pytest.mark.parametrize("block", [1, 7, 1 << 16])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_block_hash_equals_whole_array_hash(monkeypatch, block: int, k: int) -> None:
    monkeypatch.setattr(batch, "HASH_ROWS", block)
    rng = np.random.default_rng(k * 100 + block)
    for n in (0, 1, 5, 1000):
        words = rng.integers(0, 2**64 - 1, size=(n, k), dtype=np.uint64, endpoint=True)
        if n:
            words[0] = 0
            words[-1] = 2**64 - 1
        got = batch._hash(words)
        assert got.dtype == np.uint64 and np.array_equal(got, _old_hash(words))
        # the (query, doc hash) keys, hashed on blocks of HASH_ROWS rows
        q = rng.integers(0, 7, size=n)
        rank = rng.permutation(7).astype(np.int64)
        for q_bits in (3, 40):
            want = (rank[q].astype(np.uint64) << _U(64 - q_bits)) | (_old_hash(words) >> _U(q_bits))
            assert np.array_equal(batch._keys(rank, q, words, q_bits), want)
    # a strided (non-contiguous) column block, as the padded doc words can be
    wide = rng.integers(0, 2**64 - 1, size=(300, k + 2), dtype=np.uint64, endpoint=True)
    assert np.array_equal(batch._hash(wide[:, 1 : k + 1]), _old_hash(wide[:, 1 : k + 1]))


@pytest.mark.parametrize("seed", range(12))
def test_join_equals_the_replaced_join(monkeypatch, seed: int) -> None:
    """Grades and keys, or ``None`` (a pair judged twice, keys shared by two pairs), exactly
    as before: queries in file order, some only in the qrels, docs of 1 to 3 words."""
    rng = np.random.default_rng(seed)
    monkeypatch.setattr(batch, "SLOTS_PER_KEY", int(rng.choice([1, 2, 4])))  # 1: many crowded slots
    monkeypatch.setattr(batch, "HASH_ROWS", int(rng.choice([3, 1 << 16])))
    nq, n_docs = int(rng.integers(1, 30)), int(rng.integers(1, 60))
    kd, kq = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    doc_pool = rng.integers(1, 50, size=(n_docs, kd), dtype=np.uint64)
    run_q, run_docs = [], []
    for q in rng.permutation(nq):
        take = rng.choice(n_docs, size=int(rng.integers(0, n_docs + 1)), replace=False)
        run_q += [q] * take.size
        run_docs.append(doc_pool[take])
    qrels_q, qrels_docs = [], []
    for q in rng.permutation(nq + 3):  # three queries only in the qrels
        take = rng.choice(n_docs, size=int(rng.integers(0, n_docs + 1)), replace=False)
        qrels_q += [q] * take.size
        qrels_docs.append(batch._pad_words(doc_pool[take], kq) if kq > kd else doc_pool[take])
    args = [
        np.array(run_q, dtype=np.int64),
        np.concatenate(run_docs) if run_docs else np.zeros((0, kd), dtype=np.uint64),
        np.array(qrels_q, dtype=np.int64),
        np.concatenate(qrels_docs),
    ]
    grades = rng.integers(-1, 4, size=args[2].size)
    cases = [args]
    if args[2].size:  # a pair judged twice
        cases.append([args[0], args[1], np.append(args[2], args[2][:1]), np.concatenate([args[3], args[3][:1]])])
    for a in cases:
        g = grades if a[2].size == grades.size else np.append(grades, 1)
        old, new = _old_join(*a, g), batch._join(*a, g)
        assert (old is None) == (new is None)
        if old is not None:
            for x, y in zip(old, new):
                assert x.dtype == y.dtype and np.array_equal(x, y)
    # a degenerate hash (distinct docs share keys): the same outcome (mostly None)
    def degenerate(words: np.ndarray) -> np.ndarray:
        return (words[:, -1] & _U(1)) << _U(40)

    monkeypatch.setattr(batch, "_hash", degenerate)
    old, new = _old_join(*args, grades, hash_fn=degenerate), batch._join(*args, grades)
    assert (old is None) == (new is None)
    if old is not None:
        assert all(np.array_equal(x, y) for x, y in zip(old, new))


@pytest.mark.parametrize("rows", [1, 5, 64, 1 << 16])
@pytest.mark.parametrize("seed", range(6))
def test_block_sort_of_equal_lists(monkeypatch, rows: int, seed: int) -> None:
    """Equally long contiguous lists sorted on row blocks: the same order as one sort of
    the whole (lists x length) matrix, for blocks in query order and shuffled."""
    monkeypatch.setattr(ranking, "SORT_ROWS", rows)
    rng = np.random.default_rng(seed)
    nq, width = int(rng.integers(1, 40)), int(rng.integers(1, 20))
    codes = np.arange(nq + 2)[: nq] if seed % 2 else rng.choice(nq + 2, size=nq, replace=False)
    qcodes = np.repeat(codes, width).astype(np.int64)
    scores = np.round(rng.normal(size=qcodes.size), 1)  # ties
    for stable in (True, False):
        order, qs = ranking._segment_sort(qcodes, scores, nq + 2, stable)
        perm = np.argsort(-scores.reshape(nq, width), axis=1, kind="stable" if stable else None)
        perm += (np.arange(nq) * width)[:, None]
        by_q = np.argsort(codes, kind="stable")
        assert np.array_equal(order, perm[by_q].ravel())
        assert qs.dtype == np.int64 and np.array_equal(qs, np.repeat(codes[by_q], width))
        if stable:  # and what the rows mean: (query, score descending), ties in input order
            assert np.array_equal(order, np.lexsort((-scores, qcodes)))


@pytest.mark.parametrize("first_long", [True, False])
def test_chunks_with_ids_of_different_widths(tmp_path: Path, monkeypatch, first_long: bool) -> None:
    """Rows written straight into the result: a later chunk with longer ids widens the rows
    written before it (zero words), a later shorter one is padded; the same as the pandas reader."""
    monkeypatch.setattr(trec_bytes, "CHUNK_BYTES", 256)
    long_q, long_d = "q" + "x" * 20, "d" + "y" * 30
    lines = []
    for i in range(120):
        late = i >= 60
        long = late != first_long
        q = f"{long_q}{i // 10}" if long else f"q{i // 10}"
        d = f"{long_d}{i}" if long else f"d{i}"
        lines.append(f"{q} Q0 {d} {i % 10 + 1} {(i * 37) % 101 / 7:.4f} tag")
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines) + "\n")
    coded, ref = scan_run(path), read_run(path)
    assert coded is not None
    assert list(coded.query.decode()) == list(ref["query"]) and list(coded.doc.decode()) == list(ref["doc"])
    assert np.array_equal(coded.score, ref["score"].to_numpy())
    assert coded.query.words.shape == (120, 3) and coded.doc.words.shape == (120, 5)
    short_rows = slice(60, 120) if first_long else slice(0, 60)
    assert (coded.doc.words[short_rows, 1:] == 0).all()
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("\n".join(f"{ln.split()[0]} 0 {ln.split()[2]} {i % 3}" for i, ln in enumerate(lines)) + "\n")
    cq = scan_qrels(qrels)
    assert cq is not None and np.array_equal(cq.grade, read_qrels(qrels)["grade"].to_numpy())


def _write(tmp_path: Path, rng: np.random.Generator, equal: bool) -> tuple[Path, Path]:
    nq, width = 40, 25
    run_lines, qrels_lines = [], []
    for q in range(nq):
        n = width if equal else int(rng.integers(1, width + 1))
        for d in range(n):
            run_lines.append(f"q{q:02d} Q0 d{d} {d + 1} {rng.integers(0, 6) / 4:.2f} t")
        for d in rng.choice(width + 5, size=8, replace=False):
            qrels_lines.append(f"q{q:02d} 0 d{d} {int(rng.integers(-1, 4))}")
    qrels_lines += [f"q99 0 d{d} 1" for d in range(3)]  # judged, not in the run
    qp, rp = tmp_path / "qrels", tmp_path / "run"
    qp.write_text("\n".join(qrels_lines) + "\n")
    rp.write_text("\n".join(run_lines) + "\n")
    return qp, rp


@pytest.mark.parametrize("equal", [True, False])
@pytest.mark.parametrize("ties", ["docno_desc", "input_order", "pessimistic", "expected"])
@pytest.mark.parametrize("depth", [None, 10])
def test_coded_evaluation_equals_the_pandas_path(tmp_path: Path, equal: bool, ties: str, depth: int | None) -> None:
    """Equally long lists (grades in one gather) and unequal ones (padded), every tie rule,
    a depth cut, a judged query missing from the run (zero and drop)."""
    rng = np.random.default_rng(7 + equal)
    qp, rp = _write(tmp_path, rng, equal)
    metrics = "nDCG@10,AP,RR,P@10" if ties == "expected" else "nDCG@10,AP,RR,P@10,ERR@10,bpref"
    for missing in ("zero", "drop"):
        conv = preset("trec_eval").with_(ties=ties, depth=depth if ties != "expected" else None, missing=missing)
        got = evaluate_coded(scan_qrels(qp), scan_run(rp), metrics, conv)
        ref = evaluate_run(read_qrels(qp), read_run(rp), metrics, conv)
        assert got is not None
        assert list(got.queries) == list(ref.queries) and got.counts == ref.counts
        for m in ref.metrics:
            assert np.array_equal(got.values[m], ref.values[m], equal_nan=True), (m, missing)


@pytest.mark.parametrize("seed", range(40))
def test_word_parser_of_fixed_decimals(seed: int) -> None:
    """Scores of at most 8 bytes read on one word per field: every field of the form
    ``-?D+.D{F}`` (F from the first field) gives ``float(text)`` bit for bit (-0.0 too);
    any other field makes the whole chunk ``None`` (the general parser decides)."""
    import re

    rng = np.random.default_rng(seed)
    frac = int(rng.integers(1, 6))
    fields = []
    for _ in range(int(rng.integers(1, 60))):
        int_digits = int(rng.integers(1, max(2, 8 - frac)))
        text = ("-" if rng.random() < 0.4 else "") + "".join(rng.choice(list("0123456789"), int_digits))
        text += "." + "".join(rng.choice(list("0123456789"), frac))
        fields.append(text[-8:] if len(text) > 8 else text)
    if seed % 2:  # one malformed field (or a valid one: a mutation may leave the grammar intact)
        i = int(rng.integers(0, len(fields)))
        chars = list(fields[i])
        chars[int(rng.integers(0, len(chars)))] = str(rng.choice(list("-.+eEx0")))
        fields[i] = "".join(chars)
    # fields after a previous field holding '-' and '.' (the bytes before a field are ignored)
    line_heads = [f"q-{i}.5 Q0 d-{i} -{i} " for i in range(len(fields))]
    text = "".join(h + f + " t\n" for h, f in zip(line_heads, fields))
    raw = bytearray(text.encode()) + bytearray(32)
    buf = np.frombuffer(raw, dtype=np.uint8)
    starts, ends, sep, _ = trec_bytes._fields(raw, buf, 0, len(text), 6)
    got = trec_bytes._fixed_decimals(buf, sep[:, 3] + 1, sep[:, 4])
    grammar = re.compile(r"-?[0-9]+\.[0-9]{%d}" % (len(fields[0]) - 1 - fields[0].find(".")))
    valid = "." in fields[0] and fields[0].find(".") < len(fields[0]) - 1 and all(grammar.fullmatch(f) for f in fields)
    assert max(map(len, fields)) <= 8  # (one word per field)
    if not valid:
        assert got is None
        return
    assert got is not None
    want = np.array([float(f) for f in fields])
    assert np.array_equal(got.view(np.int64), want.view(np.int64)), (fields, got)


@pytest.mark.parametrize(
    "bad", [".5000", "-.5000", "--1.5000", "1.5000-", "+1.5000", "1.50.00", "1e.5000", "1.500e", "12345678", "-0.50x0"]
)
def test_word_parser_refuses_what_the_grammar_refuses(bad: str) -> None:
    for fields in (["0.2500", bad], [bad, "0.2500"]):
        text = "".join(f"q Q0 d{i} {i} {f} t\n" for i, f in enumerate(fields))
        raw = bytearray(text.encode()) + bytearray(32)
        buf = np.frombuffer(raw, dtype=np.uint8)
        _, _, sep, _ = trec_bytes._fields(raw, buf, 0, len(text), 6)
        assert trec_bytes._fixed_decimals(buf, sep[:, 3] + 1, sep[:, 4]) is None, fields
    good = ["-0.0000", "0.0000", "-1234.5678"[-8:], "7.0001"]
    text = "".join(f"q Q0 d{i} {i} {f} t\n" for i, f in enumerate(good))
    raw = bytearray(text.encode()) + bytearray(32)
    buf = np.frombuffer(raw, dtype=np.uint8)
    _, _, sep, _ = trec_bytes._fields(raw, buf, 0, len(text), 6)
    got = trec_bytes._fixed_decimals(buf, sep[:, 3] + 1, sep[:, 4])
    assert got is not None and np.array_equal(got.view(np.int64), np.array([float(f) for f in good]).view(np.int64))


@pytest.mark.parametrize(
    "text",
    [
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25 t\n",
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25 t",  # no final newline
        "q1\tQ0\td1\t1\t0.5\tt\nq1 Q0\td2 2 0.25 t\n",
        "q1 Q0 d1 1 0.5 t\r\nq1 Q0 d2 2 0.25 t\r\n",
        "q1 Q0 d1 1 0.5 t\n\nq1 Q0 d2 2 0.25 t\n",  # an empty line
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2\x0b0.25 t\n",  # a control byte as a separator
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25\nt\n",  # a newline where a separator belongs
        "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.25 t ",  # a trailing space, no newline
        "q1 Q0 d1 1 0.5 t\nq1  Q0 d2 2 0.25 t\n",  # two spaces
        "q1 Q0 d1 1 0.5 t \nq1 Q0 d2 2 0.25 t\n",  # a space before the newline
        "q1 Q0 d1 1 0.5 t x\nq1 Q0 d2 2 0.25\n",  # 7 fields then 5: the right counts, wrong places
        "q1 Q0 d1 1 0.5\nq1 Q0 d2 2 0.25 t x\nq1 Q0 d3 3 0.1 t",
    ],
)
def test_one_pass_separators_agree_with_the_general_code(monkeypatch, text: str) -> None:
    """The one-pass layout check accepts exactly the files it describes, with the same
    offsets as the general code of ``_fields`` (which decides alone when it is switched off)."""
    raw = bytearray(text.encode()) + bytearray(32)
    buf = np.frombuffer(raw, dtype=np.uint8)
    single = trec_bytes._single_separators(buf[: len(text)], 6)
    monkeypatch.setattr(trec_bytes, "_single_separators", lambda data, ncols: None)
    general = trec_bytes._fields(raw, buf, 0, len(text), 6)
    if general is None:
        assert single is None
    single_layout = general is not None and bool((general[3] == general[2] + 1).all())
    assert (single is not None) == single_layout  # one-byte separators: the one-pass check takes the file
    if single is not None:
        starts, nl, sep, _ = general
        assert np.array_equal(single[0], starts) and np.array_equal(single[1], nl) and np.array_equal(single[2], sep)


@pytest.mark.parametrize("seed", range(20))
def test_repeated_keys_in_equal_blocks_against_brute_force(seed: int) -> None:
    """Equal contiguous blocks: whether some query holds a key twice, as a set count says;
    any other layout: ``None`` (the check on the ranked lists decides)."""
    rng = np.random.default_rng(seed)
    nq, width = int(rng.integers(1, 20)), int(rng.integers(1, 12))
    codes = rng.choice(nq + 5, size=nq, replace=False)
    q = np.repeat(codes, width).astype(np.int64)
    keys = (q.astype(np.uint64) << _U(40)) | rng.integers(0, 3 * width, size=q.size).astype(np.uint64)
    want = any(len(set(keys[i * width : (i + 1) * width].tolist())) < width for i in range(nq))
    assert batch._repeated_keys_in_equal_blocks(keys.copy(), q) is want
    if nq > 1:
        if width > 1:
            assert batch._repeated_keys_in_equal_blocks(keys[:-1].copy(), q[:-1]) is None  # unequal
        twice = np.concatenate([q, q[:width]])  # a query in two blocks
        assert batch._repeated_keys_in_equal_blocks(np.concatenate([keys, keys[:width]]), twice) is None


@pytest.mark.parametrize("equal", [True, False])
def test_a_document_twice_in_a_query_leaves_it_to_the_pandas_path(tmp_path: Path, equal: bool) -> None:
    rng = np.random.default_rng(3)
    qp, rp = _write(tmp_path, rng, equal)
    conv = preset("trec_eval").with_(missing="zero")
    assert evaluate_coded(scan_qrels(qp), scan_run(rp), "AP", conv) is not None
    lines = rp.read_text().splitlines()
    first = lines[0].split()
    i = next(j for j in range(1, len(lines)) if lines[j].split()[0] == first[0])
    fields = lines[i].split()
    fields[2] = first[2]  # the query's first document again, in place of another one
    lines[i] = " ".join(fields)
    rp.write_text("\n".join(lines) + "\n")
    assert evaluate_coded(scan_qrels(qp), scan_run(rp), "AP", conv) is None
