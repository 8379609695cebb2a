"""Property-based checks of every reader: odd but valid spellings (CRLF, a BOM, tabs,
trailing blanks) give the same result as the clean file; malformed bytes give the
reader's one located error (:class:`InputError` / :class:`ConfigError` naming the file)
and nothing else: no other exception type, no hang (hypothesis' deadline), no huge
allocation (inputs are small and every reader is linear in its input).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clickmodels.logs import read_jsonl, read_tsv, read_yandex
from onlineeval.errors import ConfigError, InputError
from onlineeval.io import read_letor, read_qrels, read_run

SETTINGS = settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])

QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n2 0 d4 1\n"
RUN = "1 Q0 d1 1 2.0 r\n1 Q0 d2 2 1.0 r\n2 Q0 d3 1 1.5 r\n2 Q0 d4 2 0.5 r\n"
LETOR = "2 qid:1 1:0.5 2:0.1 # docid = a\n0 qid:1 1:0.2 2:0.3 # docid = b\n1 qid:2 1:0.9 # docid = c\n"
TSV = "s1\tq1\td1,d2,d3\td2\ns2\tq2\td3,d1\t\n"
JSONL = ('{"session": "s1", "query": "q1", "docs": ["d1", "d2", "d3"], "clicks": ["d2"]}\n'
         '{"session": "s2", "query": "q2", "docs": ["d3", "d1"]}\n')
CONFIG = "seed: 3\nreplicates: 2\ncollection: {type: synthetic, n_queries: 20, candidates: 12}\n"


def _frame_reader(fn: Callable[[Path], Any]) -> Callable[[Path], Any]:
    def read(path: Path) -> Any:
        out = fn(path)
        return out.reset_index(drop=True).to_dict("list")
    return read


def _letor(path: Path) -> Any:
    data = read_letor(path, score_feature=1)
    return data.qrels.to_dict("list"), data.run.to_dict("list") if data.run is not None else None


def _clicklog(fn: Callable[[Path], Any]) -> Callable[[Path], Any]:
    def read(path: Path) -> Any:
        log = fn(path)
        return log.session_ids.tolist(), log.doc_ids().tolist(), log.clicks.tolist()
    return read


def _config(path: Path) -> Any:
    from simulations.config import load_config

    return load_config(path).effective()


READERS: dict[str, tuple[Callable[[Path], Any], str, tuple[type[Exception], ...]]] = {
    "qrels": (_frame_reader(read_qrels), QRELS, (InputError,)),
    "run": (_frame_reader(read_run), RUN, (InputError,)),
    "letor": (_letor, LETOR, (InputError,)),
    "tsv": (_clicklog(read_tsv), TSV, (InputError,)),
    "jsonl": (_clicklog(read_jsonl), JSONL, (InputError,)),
    "config": (_config, CONFIG, (ConfigError,)),
}


def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def _bom(text: str) -> str:
    return "\ufeff" + text


def _trailing_blank_lines(text: str) -> str:
    return text + "\n\n"


SPELLINGS: dict[str, list[Callable[[str], str]]] = {
    "qrels": [_crlf, _bom, _trailing_blank_lines, lambda t: t.replace(" ", "\t")],
    "run": [_crlf, _bom, _trailing_blank_lines, lambda t: t.replace(" ", "\t")],
    "letor": [_crlf, _bom, _trailing_blank_lines],
    "tsv": [_crlf, _bom, _trailing_blank_lines],
    "jsonl": [_crlf, _bom, _trailing_blank_lines],
    "config": [_crlf, _bom, _trailing_blank_lines],
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_equivalent_spellings_read_alike(tmp_path: Path, reader: str) -> None:
    fn, clean, _ = READERS[reader]
    path = tmp_path / "clean"
    path.write_text(clean, encoding="utf-8", newline="")
    expected = fn(path)
    for i, spell in enumerate(SPELLINGS[reader]):
        odd = tmp_path / f"odd{i}"
        odd.write_text(spell(clean), encoding="utf-8", newline="")
        assert fn(odd) == expected, f"{reader}: spelling {i} reads differently"


def _mutations() -> st.SearchStrategy[tuple[str, int, bytes]]:
    """(operation, position, bytes): insert, delete or replace bytes at a position."""
    junk = st.one_of(
        st.binary(min_size=1, max_size=6),
        st.sampled_from([b"\x00", b"\xff", b"\t", b"\n", b"\r", b" ", b"#", b":", b",", b"[", b"{", b"\"",
                         b"1e999", b"-1", b"nan", b"inf", b"99999999999999999999", b"\xef\xbb\xbf"]),
    )
    return st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.integers(0, 10_000), junk)


def _mutate(data: bytes, ops: list[tuple[str, int, bytes]]) -> bytes:
    for op, pos, junk in ops:
        pos = pos % (len(data) + 1)
        if op == "insert":
            data = data[:pos] + junk + data[pos:]
        elif op == "delete":
            data = data[:pos] + data[pos + len(junk):]
        else:
            data = data[:pos] + junk + data[pos + len(junk):]
    return data


@pytest.mark.parametrize("reader", sorted(READERS))
def test_malformed_bytes_give_the_located_error_or_a_result(tmp_path: Path, reader: str) -> None:
    fn, clean, allowed = READERS[reader]

    @SETTINGS
    @given(st.lists(_mutations(), min_size=1, max_size=4))
    def check(ops: list[tuple[str, int, bytes]]) -> None:
        path = tmp_path / f"in.{reader}"
        path.write_bytes(_mutate(clean.encode(), ops))
        try:
            fn(path)
        except allowed as exc:
            text = str(exc)
            assert str(path) in text, f"the error does not name the file: {text}"
            assert "\n" not in text and len(text) < 600, f"not one short line: {text!r}"

    check()


def test_interleaving_log_reader_errors_are_located(tmp_path: Path) -> None:
    from onlineeval.interleaving.validation import read_log

    clean = ('{"rankings": [[1, 2, 3], [3, 2, 1]], "shown": [1, 3, 2], "teams": [0, 1, 0], '
             '"clicks": [false, true, false]}\n')

    @SETTINGS
    @given(st.lists(_mutations(), min_size=1, max_size=4))
    def check(ops: list[tuple[str, int, bytes]]) -> None:
        path = tmp_path / "log.jsonl"
        path.write_bytes(_mutate(clean.encode(), ops))
        try:
            read_log(path)
        except InputError as exc:
            assert str(path) in str(exc) and "\n" not in str(exc)

    check()


def test_yandex_reader_errors_are_located(tmp_path: Path) -> None:
    clean = "1\t0\tQ\t1\t10\t1\t2\t3\n"

    @SETTINGS
    @given(st.lists(_mutations(), min_size=1, max_size=3))
    def check(ops: list[tuple[str, int, bytes]]) -> None:
        path = tmp_path / "y.txt"
        path.write_bytes(_mutate(clean.encode(), ops))
        try:
            read_yandex(path)
        except InputError as exc:
            assert str(path) in str(exc) and "\n" not in str(exc)

    check()
