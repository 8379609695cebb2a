"""LETOR / SVMlight ranking files: ``label qid:Q f:v ... # docid``.

Labels become qrels grades and each line a document of its query; the scores of a
ranker come from a score file (one number per line, e.g. a LightGBM prediction file),
an array, or one feature column. LightGBM-style files without ``qid:`` take their
query boundaries from a ``.query`` file (one group size per line).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from onlineeval.errors import InputError
from onlineeval.io.text import plain_float, plain_int, plain_whole, text_lines

__all__ = ["LetorData", "read_letor", "read_letor_features", "read_scores"]

_DOCID = re.compile(r"docid\s*=\s*(\S+)")
#: every byte but the space and the colon: deleted from a line's tokens, it leaves their skeleton (``b": : :"`` when
#: each token holds one colon), which tells at C speed whether every token holds one (:func:`_fast_tokens`)
_NOT_SEP = bytes(b for b in range(256) if b not in b" :")


class LetorData(NamedTuple):
    """Qrels and (when scores are given) a run read from one LETOR file.

    ``qrels`` has columns query, doc, grade; ``run`` has query, doc, score in file order
    (``None`` without scores).
    """

    qrels: pd.DataFrame
    run: pd.DataFrame | None


def read_scores(path: str | PathLike[str], n: int) -> np.ndarray:
    """Read a score file (one number per line, e.g. a LightGBM prediction file) for the
    ``n`` documents of a LETOR file, in file order.

    Raises
    ------
    InputError
        With file and line: a non-numeric or non-finite score, a line of more than one field; without a
        line: a count other than ``n``.
    """
    path = str(path)
    values: list[float] = []
    for number, line in text_lines(path):
        text = line.strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) > 1:  # (the first field was taken silently: a multi-column prediction file's first column)
            raise InputError(f"expected one score per line, got {len(fields)} fields ({text[:60]!r}); write the "
                             "score column alone", path, number)
        v = plain_float(fields[0])
        if v is None:
            raise InputError(f"score must be a number, got {fields[0]!r}", path, number)
        if not math.isfinite(v):
            raise InputError(f"score must be finite, got {text!r}", path, number)
        values.append(v)
    if len(values) != n:
        raise InputError(f"has {len(values)} scores but the LETOR file has {n} documents", path, None)
    return np.asarray(values, dtype=np.float64)


def _read_groups(path: str, n: int) -> np.ndarray:
    sizes: list[int] = []
    for number, line in text_lines(path):
        text = line.strip()
        if not text:
            continue
        size = plain_int(text)
        if size is None:
            raise InputError(f"group size must be an integer, got {text!r}", path, number)
        if size < 1:
            raise InputError(f"group size must be positive, got {size}", path, number)
        sizes.append(size)
    if sum(sizes) != n:
        raise InputError(f"group sizes add up to {sum(sizes)} but the LETOR file has {n} rows", path, None)
    return np.repeat(np.arange(len(sizes)), sizes)


def _check_qids_agree(qids: list[str | None], groups: np.ndarray, lines: list[int], name: str, query_file: str) -> None:
    """Refuse a LETOR file whose ``qid:`` groups disagree with the query file's group sizes (one of the two would
    silently win); agreeing ones are accepted (the query file's numbering is used)."""
    for i in range(len(qids)):
        new_qid = i == 0 or qids[i] != qids[i - 1] or qids[i] is None
        new_group = i == 0 or groups[i] != groups[i - 1]
        if qids[i] is None or new_qid != new_group:
            what = ("has no qid: while other lines have one" if qids[i] is None else
                    f"{'starts' if new_qid else 'continues'} qid:{qids[i]} where {query_file} "
                    f"{'continues' if new_qid else 'starts'} a group")
            raise InputError(
                f"the line {what}: its qid: groups disagree with the group sizes of {query_file}; "
                "give one of the two (drop --query-file, or the qid: fields)", name, lines[i],
            )


def _feature_value(val: str, feature: int, name: str, number: int) -> float:
    """The score feature's value ``val`` as a finite float, else an error naming the line."""
    value = plain_float(val)
    if value is None:
        raise InputError(f"feature value must be a number, got {f'{feature}:{val}'!r}", name, number)
    if not math.isfinite(value):
        raise InputError(
            f"feature {feature} is a system's score (--score-feature) and must be finite, got {val}", name, number,
        )
    return value


def _tokens(tokens: list[str], features: tuple[int, ...], name: str,
            number: int) -> tuple[str | None, list[float | None], int]:
    """``(qid, each score feature's value or None where it does not occur, largest feature index)`` of a line's
    tokens after its label, one token at a time (the reference of :func:`_fast_tokens`); a token that is not
    ``key:value`` is an error naming the line. The last ``qid:`` and a feature's last occurrence count."""
    keys = [f"{f}:" for f in features]
    qid = None
    values: list[float | None] = [None] * len(features)
    max_feature = 0
    for tok in tokens:
        key, sep, val = tok.partition(":")
        if not sep or not key or not val:
            raise InputError(f"expected idx:value or qid:Q, got {tok!r}", name, number)
        if key == "qid":
            qid = val
            continue
        if key.isdecimal():  # (not isdigit: "²" is a digit int() refuses)
            max_feature = max(max_feature, int(key))
        for i, feature_key in enumerate(keys):
            if tok.startswith(feature_key):
                values[i] = _feature_value(val, features[i], name, number)
    return qid, values, max_feature


def _fast_tokens(tokens: list[str], keys: tuple[str, ...]) -> tuple[str | None, list[str | None]] | None:
    """``(qid, the text of each score feature's value, None where it does not occur)`` of a line's tokens after its
    label (``keys``: the features' ``"<index>:"``), as :func:`_tokens` reads them, by string operations on the whole
    line instead of a Python step per token (200,000 lines of 136 features, 280 MB: 4.2 s against the loop's 13.2 s,
    ``benchmarks/bench_letor.py``, 2026-12-04; 10.4 s before this path); ``None`` where they do not decide (a
    token without a colon, or starting or ending with one, ``qid:`` anywhere but alone in the first token, a score
    feature twice, non-ASCII text): :func:`_tokens` then reads the line."""
    line = " ".join(tokens)
    if not line:
        return None, [None] * len(keys)
    if not line.isascii() or line[0] == ":" or line[-1] == ":" or " :" in line or ": " in line:
        return None
    skeleton = line.encode().translate(None, _NOT_SEP)  # each token's colons, the tokens one space apart
    if not skeleton or b"  " in skeleton or skeleton[0] == 32 or skeleton[-1] == 32:  # a token without a colon
        return None
    qid = None
    if "qid:" in line:
        if not tokens[0].startswith("qid:") or line.count("qid:") != 1:
            return None
        qid = tokens[0][4:]
    values: list[str | None] = []
    spaced = " " + line
    for feature_key in keys:
        at = spaced.find(" " + feature_key)
        if at < 0:
            values.append(None)
            continue
        if spaced.find(" " + feature_key, at + 1) >= 0:
            return None
        start = at + 1 + len(feature_key)
        end = spaced.find(" ", start)
        values.append(spaced[start:] if end < 0 else spaced[start:end])
    return qid, values


def _max_feature(path: str | PathLike[str]) -> int:
    """The largest feature index of a LETOR file (for the message of a score feature on no line): a second pass,
    made only then."""
    out = 0
    for _, line in text_lines(path):
        text = line.strip()
        if text and not text.startswith("#"):
            out = max(out, _tokens(text.partition("#")[0].split()[1:], (), str(path), 0)[2])
    return out


def _feature_index(feature: object, name: str) -> int:
    if isinstance(feature, bool) or not isinstance(feature, (int, np.integer)) or int(feature) < 1:
        raise InputError(f"score_feature must be a feature index >= 1, got {feature!r}", name, None)
    return int(feature)


def _read(path: str | PathLike[str], features: tuple[int, ...],
          query_file: str | PathLike[str] | None) -> tuple[pd.DataFrame, np.ndarray]:
    """The qrels of a LETOR file and its score features' values, ``(n, len(features))`` (0 where a line lacks one),
    in one pass over the file (see :func:`read_letor`)."""
    name = str(path)
    labels: list[int] = []
    qids: list[str | None] = []
    docs: list[str] = []
    feats: list[list[float]] = []
    line_numbers: list[int] = []
    keys = tuple(f"{f}:" for f in features)
    seen = [False] * len(features)
    for number, line in text_lines(path):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        body, _, comment = text.partition("#")
        body = body.strip()
        label, *after = body.split(maxsplit=1)
        rest = after[0] if after else ""
        grade = plain_whole(label)
        if grade is None or abs(grade) > 2**31:
            raise InputError(f"label must be an integer grade, got {label!r}", name, number)
        tokens = rest.split()
        fast = _fast_tokens(tokens, keys)
        if fast is not None:
            qid, texts = fast
            values = [None if t is None else _feature_value(t, f, name, number) for t, f in zip(texts, features)]
        else:  # the per-token loop (the reference; it names a token that is wrong)
            qid, values, _ = _tokens(tokens, features, name, number)
        if qid is None and query_file is None:
            raise InputError("no qid:Q on the line (give query_file for LightGBM-style files)", name, number)
        m = _DOCID.search(comment)
        doc = m.group(1) if m else (comment.split()[0] if comment.split() else f"L{number}")
        labels.append(grade)
        qids.append(qid)
        docs.append(doc)
        if features:
            for i, v in enumerate(values):
                seen[i] |= v is not None
            feats.append([0.0 if v is None else v for v in values])
        line_numbers.append(number)
    n = len(labels)
    if n == 0:
        raise InputError("the file has no data lines", name, None)
    for f, was in zip(features, seen):
        if not was:
            raise InputError(
                f"score feature {f} occurs on no line (the file's features go up to {_max_feature(path)}); "
                "scoring by it would give every document 0", name, None,
            )
    if query_file is not None:
        groups = _read_groups(str(query_file), n)
        if any(q is not None for q in qids):
            _check_qids_agree(qids, groups, line_numbers, name, str(query_file))
        queries = groups.astype(str).astype(object)
    else:
        queries = np.asarray(qids, dtype=object)
    qrels = pd.DataFrame({"query": queries, "doc": np.asarray(docs, dtype=object),
                          "grade": np.asarray(labels, dtype=np.int64)})
    dup = qrels.duplicated(["query", "doc"]).to_numpy()
    if dup.any():
        i = int(np.argmax(dup))
        first = int(np.argmax((qrels["query"] == queries[i]).to_numpy() & (qrels["doc"] == docs[i]).to_numpy()))
        raise InputError(
            f"document {docs[i]!r} appears twice for query {queries[i]!r} (first on line {line_numbers[first]})",
            name,
            line_numbers[i],
        )
    qrels.attrs["path"] = name
    return qrels, np.asarray(feats, dtype=np.float64).reshape(n, len(features))


def _run(qrels: pd.DataFrame, scores: np.ndarray, name: str) -> pd.DataFrame:
    run = pd.DataFrame({"query": qrels["query"].to_numpy(), "doc": qrels["doc"].to_numpy(), "score": scores})
    run.attrs["path"] = name
    run.attrs["run_id"] = Path(name).stem
    return run


def read_letor_features(path: str | PathLike[str], features: Sequence[int],
                        query_file: str | PathLike[str] | None = None) -> tuple[pd.DataFrame, dict[int, pd.DataFrame]]:
    """The qrels of a LETOR file and one run per score feature (``{feature: run}``, each as
    ``read_letor(path, score_feature=feature).run``), in one pass over the file instead of one per feature."""
    name = str(path)
    index = tuple(dict.fromkeys(_feature_index(f, name) for f in features))
    qrels, values = _read(path, index, query_file)
    return qrels, {f: _run(qrels, values[:, i].copy(), name) for i, f in enumerate(index)}


def read_letor(
    path: str | PathLike[str],
    scores: str | PathLike[str] | Sequence[float] | np.ndarray | None = None,
    score_feature: int | None = None,
    query_file: str | PathLike[str] | None = None,
) -> LetorData:
    """Read a LETOR / SVMlight file (and optionally the scores of a ranker).

    Parameters
    ----------
    path:
        Lines ``label [qid:Q] idx:value ... [# docid = D ...]``; ``#`` lines are comments.
    scores:
        A score file (one number per line) or an array with one score per document.
    score_feature:
        Use feature ``score_feature`` as the score instead (missing -> 0, SVMlight's
        sparse convention).
    query_file:
        Group sizes when the file has no ``qid:`` (LightGBM's ``.query`` files); queries
        are then named ``"0"``, ``"1"``, ... in file order.

    Document ids come from ``docid = D`` (LETOR 4.0) or the first token of the comment,
    otherwise ``"L<line>"``.
    """
    name = str(path)
    if scores is not None and score_feature is not None:
        raise InputError("give scores or score_feature, not both", name, None)
    features = () if score_feature is None else (_feature_index(score_feature, name),)
    qrels, values = _read(path, features, query_file)
    n = len(qrels)
    if score_feature is not None:
        return LetorData(qrels, _run(qrels, values[:, 0].copy(), name))
    if scores is None:
        return LetorData(qrels, None)
    if isinstance(scores, (str, PathLike)):
        s = read_scores(scores, n)
    else:
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != (n,):
            raise InputError(f"{s.size} scores given for {n} documents", name, None)
        if not np.isfinite(s).all():
            raise InputError("scores must be finite", name, None)
    return LetorData(qrels, _run(qrels, s, name))
