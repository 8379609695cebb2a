"""The byte-level TREC reader (:mod:`onlineeval.io.trec_bytes`) and the integer-coded
evaluation (:mod:`onlineeval.metrics.batch`) against the pandas readers and
:func:`evaluate_run` (the reference), and against pytrec_eval (independent).

The byte reader either returns exactly what ``read_qrels`` / ``read_run`` return (ids,
values bit for bit, dtypes, tag) or ``None`` (the caller then uses those readers, which
report malformed input): checked on trec_eval's test files, on random valid files and on
random byte mutations. Scores must equal Python's ``float(text)`` bit for bit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_readers_fuzz import (
    _mutate,  # the same byte mutations as the other readers' fuzz test
)

from onlineeval.conventions import preset
from onlineeval.errors import InputError
from onlineeval.io import read_qrels, read_run
from onlineeval.io.trec_bytes import scan_qrels, scan_run
from onlineeval.metrics import batch
from onlineeval.metrics.batch import evaluate_coded
from onlineeval.metrics.evaluate import evaluate_run

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_eval"
SETTINGS = settings(max_examples=80, deadline=3000, suppress_health_check=[HealthCheck.function_scoped_fixture])
METRICS = "nDCG@10,nDCG,AP,RR,P@10,R@100,ERR@20,RBP(p=0.8),RPrec,bpref,infAP,P@5"
EXPECTED_METRICS = "nDCG@10,nDCG,AP,RR,P@10,R@100"


def _read(reader, path: Path):
    try:
        return reader(path)
    except InputError as exc:
        return exc


def _same_qrels(coded, ref) -> bool:
    return (
        list(coded.query.decode()) == list(ref["query"])
        and list(coded.doc.decode()) == list(ref["doc"])
        and coded.grade.dtype == ref["grade"].to_numpy().dtype
        and np.array_equal(coded.grade, ref["grade"].to_numpy())
        and coded.path == ref.attrs["path"]
    )


def _same_run(coded, ref) -> bool:
    s = ref["score"].to_numpy()
    return (
        list(coded.query.decode()) == list(ref["query"])
        and list(coded.doc.decode()) == list(ref["doc"])
        and coded.score.dtype == s.dtype
        and np.array_equal(coded.score.view(np.int64), s.view(np.int64))  # bit for bit (-0.0 too)
        and coded.run_id == ref.attrs["run_id"]
        and coded.path == ref.attrs["path"]
    )


def _check_file(path: Path) -> tuple[bool, bool]:
    """Both readers on one file: (qrels read by bytes, run read by bytes). Repeated pairs
    are the evaluation's check (as with ``check_unique=False``, the CLI's setting)."""
    out = []
    for scan, reader, same in ((scan_qrels, read_qrels, _same_qrels), (scan_run, read_run, _same_run)):
        coded = scan(path)
        ref = _read(lambda p, reader=reader: reader(p, check_unique=False), path)
        if coded is not None:
            assert not isinstance(ref, Exception), f"{path}: byte reader accepts what {reader.__name__} refuses: {ref}"
            assert isinstance(_read(reader, path), Exception) or same(coded, reader(path))
            assert same(coded, ref), f"{path}: {scan.__name__} differs from {reader.__name__}"
        out.append(coded is not None)
    return out[0], out[1]


def _data_files() -> list[Path]:
    if not DATA.is_dir():
        return []
    return sorted(p for p in DATA.rglob("*") if p.is_file())


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/trec_eval (trec_eval's test files) is absent")
def test_byte_reader_equals_the_readers_on_trec_eval_files() -> None:
    accepted = {p.name: _check_file(p) for p in _data_files()}
    # the plain files are taken by the byte reader (tab + padded scores included) ...
    assert accepted["qrels.test"][0] and accepted["results.test"][1] and accepted["qrels.rel_level"][0]
    # ... and those with comment lines are left to the general reader
    assert not accepted["qrels.test.with-comments"][0] and not accepted["results.comment.test"][1]


def test_byte_reader_equals_the_readers_on_the_test_files() -> None:
    here = Path(__file__).resolve().parent
    for path in sorted(here.rglob("*")):
        if path.is_file() and path.suffix in ("", ".txt", ".qrels", ".run", ".trec") and path.stat().st_size < 10**7:
            _check_file(path)


# --- scores: exactly float(text) -------------------------------------------------------

EXACT = [
    "0", "-0", "-0.0", "0.0", "1", "-1", "2.129133", "  ", "123456789012345", "1234567890123456",
    "0.1", "0.3", "-0.3805", "1e5", "1E-5", "1.5e-05", "-2.5E+03", "9.999999999999999e22", "1e22", "1e23",
    "123456.789012345", "0.000000000000001", "1e-22", "4.35e-7", "7e+0", "00012.50", "1.", ".5", "-.5", "+1",
    "1e", "1e+", "1e1000", "nan", "inf", "-inf", "1_0", "0x10", "1.2.3", "1e5e3", "--1", "1-", "5e-324",
]


@pytest.mark.parametrize("text", EXACT)
def test_scores_are_exactly_float_of_the_text_or_left_to_the_reader(tmp_path: Path, text: str) -> None:
    path = tmp_path / "run"
    token = text.strip() or "1"
    path.write_text(f"q1 Q0 d1 1 {token} tag\nq1 Q0 d2 2 0.5 tag\n")
    coded = scan_run(path)
    ref = _read(read_run, path)
    if coded is None:
        return
    assert not isinstance(ref, Exception)
    assert coded.score[0] == float(token) and np.signbit(coded.score[0]) == np.signbit(float(token))
    assert _same_run(coded, ref)


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 10**9),
            st.integers(0, 10**7),
            st.integers(0, 8),
            st.one_of(st.none(), st.integers(-30, 30)),
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_random_decimal_scores_parse_exactly(tmp_path: Path, specs: list) -> None:
    lines, texts = [], []
    for i, (neg, whole, frac, frac_digits, exp, upper) in enumerate(specs):
        text = ("-" if neg else "") + str(whole)
        if frac_digits:
            text += "." + str(frac).zfill(frac_digits)[:frac_digits]
        if exp is not None:
            text += ("E" if upper else "e") + str(exp)
        texts.append(text)
        lines.append(f"q{i % 3} Q0 d{i} {i} {text} run")
    path = tmp_path / "run"
    path.write_text("\n".join(lines) + "\n")
    coded = scan_run(path)
    if coded is None:  # outside the fast path's range: the general reader's job
        return
    expected = np.array([float(t) for t in texts])
    assert np.array_equal(coded.score.view(np.int64), expected.view(np.int64))
    assert _same_run(coded, read_run(path))


# --- random files: valid ones and byte mutations ---------------------------------------

_ID = st.text(alphabet="abcxyzQ0123456789-_.:/ABC", min_size=1, max_size=30)
_SEP = st.sampled_from([" ", "\t", "  ", " \t ", "\t\t"])


@SETTINGS
@given(
    st.lists(st.tuples(_ID, _ID, st.integers(-3, 4)), min_size=1, max_size=25),
    _SEP,
    st.booleans(),
)
def test_random_valid_qrels_read_alike(tmp_path: Path, rows: list, sep: str, final_newline: bool) -> None:
    text = "\n".join(sep.join([q, "0", d, str(g)]) for q, d, g in rows) + ("\n" if final_newline else "")
    path = tmp_path / "qrels"
    path.write_text(text)
    assert _check_file(path)[0], "a plain qrels file is the byte reader's"


@SETTINGS
@given(
    st.lists(st.tuples(_ID, _ID, st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: round(x, 4))), min_size=1,
             max_size=25),
    _SEP,
)
def test_random_valid_runs_read_alike(tmp_path: Path, rows: list, sep: str) -> None:
    text = "".join(sep.join([q, "Q0", d, str(i), repr(s), "tag"]) + "\n" for i, (q, d, s) in enumerate(rows))
    path = tmp_path / "run"
    path.write_text(text)
    assert _check_file(path)[1], "a plain run file is the byte reader's"


def _mutations() -> st.SearchStrategy[tuple[str, int, bytes]]:
    junk = st.one_of(
        st.binary(min_size=1, max_size=6),
        st.sampled_from([b"\x00", b"\xff", b"\t", b"\n", b"\r", b" ", b"#", b"\"", b"1e999", b"-1", b"nan", b"inf",
                         b"99999999999999999999", b"\xef\xbb\xbf", b"1e5", b".", b"-", b"\x0b", b"\x7f"]),
    )
    return st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.integers(0, 10_000), junk)


QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n2 0 d4 -1\n"
RUN = "1 Q0 d1 1 2.0 r\n1 Q0 d2 2 -1.25 r\n2 Q0 d3 1 1.5e-3 r\n2 Q0 d4 2 0.5 r\n"


@pytest.mark.parametrize("clean", [QRELS, RUN], ids=["qrels", "run"])
def test_mutated_bytes_read_alike_or_go_to_the_general_reader(tmp_path: Path, clean: str) -> None:
    @SETTINGS
    @given(st.lists(_mutations(), min_size=1, max_size=4))
    def check(ops: list[tuple[str, int, bytes]]) -> None:
        path = tmp_path / "in"
        path.write_bytes(_mutate(clean.encode(), ops))
        _check_file(path)

    check()


# --- the coded evaluation vs evaluate_run ------------------------------------------------


def _write_random(folder: Path, seed: int, id_len: int = 0, shuffle: bool = False) -> tuple[Path, Path]:
    """Random qrels and run: ties (scores on a coarse grid), negative grades, run-only and
    qrels-only queries, ids of several widths; ``shuffle`` splits queries into blocks."""
    rng = np.random.default_rng(seed)
    n_q = int(rng.integers(3, 25))
    pad = "x" * id_len
    qrels_lines, run_lines = [], []
    for q in range(n_q):
        qid = f"{pad}q{q}" if q % 4 else f"{q}"
        docs = [f"{pad}d{int(d)}" + ("z" * int(rng.integers(0, 12))) * (d % 2) for d in rng.permutation(80)[:40]]
        docs = list(dict.fromkeys(docs))
        judged = [d for d in docs if rng.random() < 0.5] + [f"only{q}_{i}" for i in range(int(rng.integers(0, 3)))]
        if q != 1:  # query 1: in the run only
            for d in judged:
                qrels_lines.append(f"{qid} 0 {d} {int(rng.integers(-1, 4))}")
        if q != 2:  # query 2: in the qrels only
            for i, d in enumerate(docs[: int(rng.integers(1, len(docs) + 1))]):
                run_lines.append(f"{qid} Q0 {d} {i} {round(float(rng.normal()), 1)} run{seed}")
    if shuffle:
        rng.shuffle(run_lines)
        rng.shuffle(qrels_lines)
    qp, rp = folder / f"qrels{seed}", folder / f"run{seed}"
    qp.write_text("\n".join(qrels_lines) + "\n")
    rp.write_text("\n".join(run_lines) + "\n")
    return qp, rp


def _outcome(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return exc


def _assert_same(a, b) -> None:
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b), (a, b)
        return
    assert b is not None
    assert list(a.queries) == list(b.queries) and a.counts == b.counts and a.run_id == b.run_id
    assert np.array_equal(a.counted, b.counted)
    for m in a.metrics:
        assert np.array_equal(a.values[m], b.values[m], equal_nan=True), m


CONVENTIONS = [
    ("trec_eval", {}),
    ("default", {}),
    ("default", {"ties": "input_order", "missing": "drop"}),
    ("trec_eval", {"ties": "pessimistic", "depth": 7}),
    ("default", {"ties": "optimistic", "empty": "one", "rel_min": 2}),
    ("trec_eval", {"missing": "error"}),
    ("lightgbm", {"missing": "zero"}),
]


@pytest.mark.parametrize("seed", range(6))
def test_coded_evaluation_equals_evaluate_run(tmp_path: Path, seed: int) -> None:
    qp, rp = _write_random(tmp_path, seed, id_len=(0, 3, 9, 17)[seed % 4], shuffle=seed >= 4)
    cq, cr = scan_qrels(qp), scan_run(rp)
    assert cq is not None and cr is not None
    q, r = read_qrels(qp), read_run(rp)
    for name, options in CONVENTIONS:
        conv = preset(name).with_(**{"missing": "zero", **options})
        _assert_same(_outcome(evaluate_run, q, r, METRICS, conv), _outcome(evaluate_coded, cq, cr, METRICS, conv))
    for depth in (None, 3, 30):
        conv = preset("trec_eval").with_(ties="expected", missing="zero", depth=depth)
        a = _outcome(evaluate_run, q, r, EXPECTED_METRICS, conv)
        _assert_same(a, _outcome(evaluate_coded, cq, cr, EXPECTED_METRICS, conv))


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/trec_eval (trec_eval's test files) is absent")
@pytest.mark.parametrize(
    "qrels, run",
    [("qrels.test", "results.test"), ("qrels.rel_level", "results.test"), ("qrels-302.test", "results-302.test"),
     ("edge_cases/qrels.edge", "edge_cases/run.edge"), ("edge_cases/qrels.tie100", "edge_cases/run.tie100"),
     ("edge_cases/qrels.edge.noq3", "edge_cases/run.edge")],
)
def test_coded_evaluation_equals_evaluate_run_on_trec_eval_files(qrels: str, run: str) -> None:
    cq, cr = scan_qrels(DATA / qrels), scan_run(DATA / run)
    assert cq is not None and cr is not None
    q, r = read_qrels(DATA / qrels), read_run(DATA / run)
    for name, options in CONVENTIONS:
        conv = preset(name).with_(**{"missing": "zero", **options})
        _assert_same(_outcome(evaluate_run, q, r, METRICS, conv), _outcome(evaluate_coded, cq, cr, METRICS, conv))


def test_repeated_pairs_and_key_collisions_leave_it_to_the_pandas_path(tmp_path: Path, monkeypatch) -> None:
    qp, rp = _write_random(tmp_path, 11)
    conv = preset("trec_eval").with_(missing="zero")
    cq, cr = scan_qrels(qp), scan_run(rp)
    # a document listed twice for a query (run) or judged twice (qrels): None, no result
    text = rp.read_text().splitlines()
    dup = tmp_path / "dup_run"
    dup.write_text("\n".join([*text, text[0]]) + "\n")
    assert evaluate_coded(cq, scan_run(dup), "AP", conv) is None
    qtext = qp.read_text().splitlines()
    qdup = tmp_path / "dup_qrels"
    qdup.write_text("\n".join([*qtext, qtext[-1]]) + "\n")
    assert evaluate_coded(scan_qrels(qdup), cr, "AP", conv) is None
    # distinct documents sharing a key (a degenerate hash): never a wrong grade
    monkeypatch.setattr(batch, "_hash", lambda words: (words[:, -1] & np.uint64(1)) << np.uint64(40))
    assert evaluate_coded(cq, cr, "AP", conv) is None


def test_the_cli_reports_a_repeated_pair_with_its_line(tmp_path: Path) -> None:
    qp, rp = _write_random(tmp_path, 12)
    text = rp.read_text().splitlines()
    dup = tmp_path / "dup_run"
    dup.write_text("\n".join([*text, text[0]]) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "onlineeval.cli", "evaluate", "--qrels", str(qp), "--run", str(dup),
         "--missing", "zero"],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 2
    assert f"{dup}:{len(text) + 1}: document" in done.stderr and "appears twice" in done.stderr, done.stderr


def test_evaluate_of_one_run_imports_neither_pandas_nor_scipy(tmp_path: Path) -> None:
    qp, rp = _write_random(tmp_path, 13)
    code = (
        "import sys\n"
        f"sys.argv = ['onlineeval', 'evaluate', '--qrels', {str(qp)!r}, '--run', {str(rp)!r}, '--missing', 'zero',"
        " '--format', 'json']\n"
        "from onlineeval.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'scipy', 'pyarrow')), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
    assert '"systems"' in done.stdout


def test_coded_evaluation_agrees_with_pytrec_eval(tmp_path: Path) -> None:
    import pytrec_eval
    qp, rp = _write_random(tmp_path, 14, id_len=9)
    cq, cr = scan_qrels(qp), scan_run(rp)
    ev = evaluate_coded(cq, cr, "nDCG@10,AP,RR,P@10", preset("trec_eval").with_(missing="zero"))
    assert ev is not None
    with open(qp) as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(rp) as f:
        run = pytrec_eval.parse_run(f)
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map", "recip_rank", "P.10"}).evaluate(run)
    names = {"nDCG@10": "ndcg_cut_10", "AP": "map", "RR": "recip_rank", "P@10": "P_10"}
    for m in ev.metrics:
        got = dict(zip(ev.queries, ev.values[m]))
        for q, values in ref.items():
            assert got[q] == pytest.approx(values[names[str(m)]], abs=1e-12), (m, q)


@pytest.mark.parametrize("chunk", [64, 200, 4096])
@pytest.mark.parametrize("final_newline", [True, False])
def test_chunked_and_memory_mapped_reading_reads_alike(
    tmp_path: Path, monkeypatch, chunk: int, final_newline: bool
) -> None:
    """Small chunks send these files through the memory-mapped path (several chunks, the
    last one copied with padding, a tiny last chunk merged into the one before)."""
    from onlineeval.io import trec_bytes

    monkeypatch.setattr(trec_bytes, "CHUNK_BYTES", chunk)
    qp, rp = _write_random(tmp_path, 21, id_len=13)
    for path in (qp, rp):
        text = path.read_text()
        path.write_text(text if final_newline else text.rstrip("\n"))
    assert _check_file(qp)[0] and _check_file(rp)[1]
    # a last line shorter than the padding after a long one
    short = tmp_path / "short"
    short.write_text("q1 Q0 " + "d" * 200 + " 1 0.5 t\nq Q0 d 1 1 t" + ("\n" if final_newline else ""))
    assert _check_file(short)[1]


@SETTINGS
@given(
    st.lists(st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False), min_size=1, max_size=40),
    st.integers(1, 6),
    st.sampled_from([" ", "\t", "\t  "]),
)
def test_fixed_decimal_scores_parse_exactly(tmp_path: Path, values: list, decimals: int, sep: str) -> None:
    """Scores written as printf's %.Nf (one dot column: the right-aligned fast path)."""
    texts = [f"{v:.{decimals}f}" for v in values]
    path = tmp_path / "run"
    path.write_text("".join(f"q{i % 4} Q0 d{i} {i}{sep}{t} run\n" for i, t in enumerate(texts)))
    coded = scan_run(path)
    if max(sum(c.isdigit() for c in t) for t in texts) > 15:
        return  # more digits than the exact fast path takes
    assert coded is not None
    expected = np.array([float(t) for t in texts])
    assert np.array_equal(coded.score.view(np.int64), expected.view(np.int64))
    assert _same_run(coded, read_run(path))


def test_the_first_problem_is_reported_as_before(tmp_path: Path) -> None:
    """A malformed first run and a missing second one: the first run's located error (the
    byte reader stops at the first file it leaves to the general reader)."""
    qp, rp = _write_random(tmp_path, 15)
    bad = tmp_path / "bad_run"
    bad.write_text(rp.read_text() + "q1 Q0 dx 1 not-a-number run\n")
    missing = tmp_path / "missing_run"
    done = subprocess.run(
        [sys.executable, "-m", "onlineeval.cli", "evaluate", "--qrels", str(qp), "--run", str(bad), "--run",
         str(missing), "--missing", "zero"],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 2
    assert "score must be a number, got 'not-a-number'" in done.stderr and str(bad) in done.stderr, done.stderr
