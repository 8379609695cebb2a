"""LETOR lines read by string operations on the whole line (onlineeval.io.letor._fast_tokens) give what the per-token
loop (_tokens, the reference) gives: the same qrels, scores of a score feature and errors (message and line), on
lines built from valid and malformed tokens; and the fast path does decide the common lines (else it would be a
slower reference)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import onlineeval.io.letor as letor
from onlineeval.errors import InputError

#: tokens after the label: valid ones, odd but valid ones and malformed ones
TOKENS = ["qid:1", "qid:2", "qid:a", "1:0.5", "2:0.25", "3:-1", "7:2.5", "7:1e3", "10:0", "136:0.3", "a::", "7::",
          "5:qid:3", "qid:qid:1", "7:x", "7:nan", "7:1e400", ":a", "a:", "::", "7:", "bare", "x:y", "07:4", "3:ü",
          "ü:1", "7:١"]


def _line(rng: np.random.Generator, number: int, odd: float = 0.15) -> str:
    label = str(int(rng.integers(0, 4))) if rng.random() < 0.97 else str(rng.choice(["x", "1.5", "2.0"]))
    n = int(rng.integers(0, 7))
    common = ["qid:1", "1:0.5", "2:0.25", "7:2.5", "136:0.3"]
    tokens = [str(rng.choice(TOKENS if rng.random() < odd else common)) for _ in range(n)]
    if rng.random() < 0.8:
        tokens.insert(0, f"qid:{int(rng.integers(1, 4))}")
    sep = str(rng.choice([" ", " ", "  ", "\t"]))
    comment = f" # docid = d{number}" if rng.random() < 0.9 else ""
    return sep.join([label, *tokens]) + comment


def _read(path: Path, fast: bool, feature: int | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(letor, "_fast_tokens", lambda tokens, keys: None)
        try:
            data = letor.read_letor(path, score_feature=feature)
        except InputError as exc:
            return "error", exc.message, exc.line
    out = [data.qrels.to_dict("list")]
    if data.run is not None:
        out.append(data.run.to_dict("list"))
    return out


@pytest.mark.parametrize("case", range(40))
def test_fast_tokens_read_lines_as_the_token_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: int) -> None:
    rng = np.random.default_rng(zlib.crc32(f"letor {case}".encode()))
    lines = [_line(rng, i) for i in range(int(rng.integers(1, 12)))]
    path = tmp_path / "f.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for feature in (None, 7, 3):
        assert _read(path, True, feature, monkeypatch) == _read(path, False, feature, monkeypatch), lines


def test_fast_tokens_decide_common_lines_and_decline_the_others() -> None:
    assert letor._fast_tokens("qid:3 1:0.5 7:2 10:1".split(), ("7:",)) == ("3", ["2"])
    assert letor._fast_tokens("qid:3 1:0.5 10:1".split(), ("7:", "10:", "1:")) == ("3", [None, "1", "0.5"])
    assert letor._fast_tokens("1:0.5 10:1".split(), ()) == (None, [])
    assert letor._fast_tokens([], ("7:",)) == (None, [None])
    for tokens in ("qid:3 bare", "bare 1:2", "bare", "1:2 bare 3:4", "qid:3 :a", "qid:3 a:", "1:2 qid:3",
                   "qid:3 qid:4", "qid:3 7:1 7:2", "qid:3 1:ü", "qid:3 a::"):
        assert letor._fast_tokens(tokens.split(), ("7:",)) is None, tokens


def test_a_score_feature_on_no_line_names_the_largest_feature(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("1 qid:1 1:0.5 12:3 # docid = a\n0 qid:1 4:1 # docid = b\n", encoding="utf-8")
    with pytest.raises(InputError, match="score feature 7 occurs on no line \\(the file's features go up to 12\\)"):
        letor.read_letor(path, score_feature=7)


@pytest.mark.parametrize("case", range(24))
def test_features_read_in_one_pass_equal_one_read_each(tmp_path: Path, case: int) -> None:
    rng = np.random.default_rng(zlib.crc32(f"letor features {case}".encode()))
    lines = [_line(rng, i, odd=0.02) for i in range(int(rng.integers(1, 12)))]
    path = tmp_path / "f.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    features = [7, 2, 1, 7]  # (7 twice: one run)

    def one(f: int) -> Any:
        try:
            return letor.read_letor(path, score_feature=f)
        except InputError as exc:
            return exc.message, exc.line

    expected = {f: one(f) for f in features}
    errors = {v for v in expected.values() if not isinstance(v, letor.LetorData)}
    try:
        qrels, runs = letor.read_letor_features(path, features)
    except InputError as exc:  # one of the one-feature reads' errors (one pass meets them in line order)
        assert (exc.message, exc.line) in errors, (exc, errors, lines)
        return
    assert not errors, (errors, lines)
    assert list(runs) == [7, 2, 1]
    for f, data in expected.items():
        assert qrels.equals(data.qrels) and runs[f].equals(data.run) and runs[f].attrs == data.run.attrs
