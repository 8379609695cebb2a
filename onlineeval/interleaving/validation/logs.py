"""Production logs: read JSON-lines impressions and check them against the reference method.

The page a log shows may be shorter than the input rankings (top 10 of 20): the shown
length is the page length. Structure is checked against it (documents from the input
lists, no duplicates, valid team labels, and for team-draft a balanced prefix), and the
reference is run on the same inputs with the same page length before the team labels
are compared position by position.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import InputError, significance_level
from onlineeval.interleaving.registry import get_interleaver
from onlineeval.interleaving.validation.candidates import BatchCandidate
from onlineeval.interleaving.validation.exact import MAX_LOG_DRAWS, team_probabilities
from onlineeval.interleaving.validation.guard import check_seed
from onlineeval.interleaving.validation.invariants import (
    prefix_violations,
    structure_violations,
)
from onlineeval.interleaving.validation.methods import method_spec
from onlineeval.interleaving.validation.report import (
    PENDING,
    SKIPPED,
    CheckResult,
    ValidationReport,
    finalize,
    stamped,
)
from onlineeval.interleaving.validation.stattests import (
    bonferroni,
    exact_check,
    homogeneity,
    partition_key,
    pooled_gof_key,
    pooled_goodness_of_fit,
    reference_statistic,
)
from onlineeval.io.logged_json import DuplicateKey, loads_unique

__all__ = ["LogRecord", "read_log", "validate_log"]


@dataclass(frozen=True)
class LogRecord:
    """One logged impression (``line``: its 1-based line in the log)."""

    line: int
    rankings: tuple[tuple[int, ...], ...]
    shown: tuple[int, ...]
    teams: tuple[int, ...]
    clicks: tuple[bool, ...]
    outcome: int | None


_ID_MAX = int(np.iinfo(np.int32).max)

#: longest input ranking (and shown list) of one logged impression: bounds the memory and time per impression
#: (the reference implementations take time quadratic in the ranking length)
MAX_RANKING_LENGTH = 1_000
#: most rankings in one impression
MAX_RANKERS = 64
#: longest line of a log, bytes (a longer line is refused before it is parsed)
MAX_LINE_BYTES = 4 * 1024 * 1024
#: cells (``rows x (m K + k)``) of one chunk of impressions checked together: bounds the memory of a check
CHUNK_CELLS = 2_000_000


def _int_list(value: Any, key: str, path: str, line: int, *, low: int = 0, high: int = _ID_MAX,
              strings: bool = False) -> tuple[int, ...]:
    if isinstance(value, list) and len(value) > MAX_RANKING_LENGTH:
        raise InputError(f"{key!r} holds {len(value)} entries; at most {MAX_RANKING_LENGTH:,} per impression",
                         path, line)
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        allowed = "integers, or of strings (document ids)" if strings else "integers"
        raise InputError(f"{key!r} must be a list of {allowed}", path, line)
    bad = next((v for v in value if not low <= v <= high), None)
    if bad is not None:
        raise InputError(f"{key!r}: {bad} is out of range; allowed {low}..{high}", path, line)
    return tuple(value)


class _DocIds:
    """The log's document ids as integers: integer ids as they are, or string ids (URLs, hashes) numbered in
    order of first appearance, the same string the same number everywhere in the log. One log uses one kind."""

    def __init__(self) -> None:
        self.kind: type | None = None
        self.codes: dict[str, int] = {}
        self.zero_team = False           # a team label 0 seen so far (1-based labels are ruled out)

    def ids(self, value: Any, key: str, path: str, line: int) -> tuple[int, ...]:
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            if len(value) > MAX_RANKING_LENGTH:
                return _int_list(value, key, path, line)  # its length error
            self._same_kind(str, key, path, line)
            codes = self.codes
            return tuple(codes.setdefault(v, len(codes)) for v in value)
        out = _int_list(value, key, path, line, strings=True)
        if out:
            self._same_kind(int, key, path, line)
        return out

    def _same_kind(self, kind: type, key: str, path: str, line: int) -> None:
        if self.kind is None:
            self.kind = kind
        elif self.kind is not kind:
            had = "strings" if self.kind is str else "integers"
            raise InputError(f"{key!r} holds {'strings' if kind is str else 'integers'} where the log's earlier "
                             f"document ids are {had}; one log uses one kind of document id", path, line)


def _parse_line(obj: Any, p: str, i: int, n_rankers: int | None, docs: _DocIds | None = None) -> LogRecord:
    docs = _DocIds() if docs is None else docs
    if not isinstance(obj, dict):
        raise InputError("each line must be a JSON object", p, i)
    for key in ("rankings", "shown", "teams"):
        if key not in obj:
            raise InputError(f"missing key {key!r} (need rankings, shown, teams, clicks)", p, i)
    rk = obj["rankings"]
    if not isinstance(rk, list) or len(rk) < 2:
        raise InputError("'rankings' must be a list of at least two rankings", p, i)
    if len(rk) > MAX_RANKERS:
        raise InputError(f"{len(rk)} rankings; at most {MAX_RANKERS} per impression", p, i)
    if n_rankers is not None and len(rk) != n_rankers:
        raise InputError(f"{len(rk)} rankings where the earlier lines have {n_rankers}; "
                         "every impression of a log compares the same rankers", p, i)
    rankings = tuple(docs.ids(r, "rankings[]", p, i) for r in rk)
    if not any(rankings):
        raise InputError("every input ranking is empty", p, i)
    shown = docs.ids(obj["shown"], "shown", p, i)
    if not shown:
        raise InputError("'shown' is empty; log only impressions that showed documents", p, i)
    teams = _int_list(obj["teams"], "teams", p, i, high=_ID_MAX)
    _check_labels(teams, len(rk), docs, p, i)
    _check_shift(rankings, shown, docs, p, i)
    if len(teams) != len(shown):
        raise InputError(f"'teams' has {len(teams)} labels for {len(shown)} shown documents; "
                         "one per shown slot", p, i)
    if "clicks" in obj:
        c = obj["clicks"]
        if not isinstance(c, list) or len(c) != len(shown) or \
                not all(isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)) for v in c):
            ranks = isinstance(c, list) and c and all(isinstance(v, int) and not isinstance(v, bool)
                                                      and 1 <= v <= len(shown) for v in c) and max(c) > 1
            raise InputError("'clicks' must be a list of booleans (or 0 / 1), one per shown slot"
                             + (f"; {c} looks like clicked ranks (1-based positions): log one boolean per "
                                "shown slot, or the clicked documents as 'clicked_docs'" if ranks else ""), p, i)
        clicks = tuple(bool(v) for v in c)
    elif "clicked_docs" in obj:
        clicked = set(docs.ids(obj["clicked_docs"], "clicked_docs", p, i))
        clicks = tuple(d in clicked for d in shown)
    else:
        raise InputError("missing key 'clicks' (or 'clicked_docs')", p, i)
    outcome = obj.get("outcome")
    if outcome is not None:
        if isinstance(outcome, bool) or not isinstance(outcome, (int, float)) or not np.isfinite(outcome):
            raise InputError("'outcome' must be a finite number (> 0: B won, < 0: A won, 0: tie)", p, i)
        if len(rk) != 2:
            raise InputError(f"'outcome' is a two-ranker result but the line has {len(rk)} rankings", p, i)
    return LogRecord(i, rankings, shown, teams, clicks, None if outcome is None else int(np.sign(outcome)))


def _check_labels(teams: tuple[int, ...], m: int, docs: _DocIds, path: str, line: int) -> None:
    """Team labels must be ranker indices ``0..m-1``; a line whose labels are ``1..m`` (``m`` among them) in a
    log with no label 0 so far is called 1-based; any other label out of range is named as such."""
    bad = next((t for t in teams if t >= m), None)
    docs.zero_team |= 0 in teams
    if bad is None:
        return
    if bad == m and not docs.zero_team and all(1 <= t <= m for t in teams):
        raise InputError(f"'teams' {list(teams)} look 1-based (every label in 1..{m}, and no line so far has "
                         f"label 0); team labels are ranker indices 0..{m - 1}: {_ranker_indices(m)}; subtract 1 "
                         "from every label", path, line)
    raise InputError(f"'teams': {bad} is out of range; allowed 0..{m - 1} (ranker indices, 0 = rankings[0])",
                     path, line)


def _ranker_indices(m: int) -> str:
    """What each team label means, every ranker named alike: A and B for two rankers (``rankings[0]`` is A,
    ``rankings[1]`` B), indices alone for more (every one up to four rankers, else the first two, '...', the last)."""
    if m == 2:
        return "0 = rankings[0] (A), 1 = rankings[1] (B)"
    parts = [f"{i} = rankings[{i}]" for i in range(m)]
    return ", ".join(parts if m <= 4 else [*parts[:2], "...", parts[-1]])


def _check_shift(rankings: tuple[tuple[int, ...], ...], shown: tuple[int, ...], docs: _DocIds, path: str,
                 line: int) -> None:
    """Integer ids: a line of three or more shown documents none of which is in a ranking while every one shifted
    by one (all in one direction) is, numbers its documents from another base in 'shown' than in 'rankings'.
    (Fewer foreign documents are ambiguous: :func:`validate_log` names a shift on the structure row.)"""
    if docs.kind is not int:
        return
    step = _shift(rankings, shown)
    if step and len(shown) >= 3 and not set(shown) & {d for r in rankings for d in r}:
        raise InputError(f"'shown' {list(shown)}: no shown document is in a ranking, but every shown id {step:+d} "
                         f"is: {_SHIFTED[step]}", path, line)


#: what a shift of the shown ids by ``step`` (the shown id plus ``step`` is in a ranking) suggests
_SHIFTED = {-1: "the document ids look 1-based in 'shown' and 0-based in 'rankings' (one numbering per log)",
            1: "the document ids look 0-based in 'shown' and 1-based in 'rankings' (one numbering per log)"}


def _shift(rankings: Sequence[Sequence[int]], shown: Sequence[int]) -> int:
    """``-1`` or ``+1`` when some shown document is in no ranking but every shown id plus it is, else 0."""
    pool = {d for r in rankings for d in r}
    if all(d in pool for d in shown):
        return 0
    return next((step for step in (-1, 1) if all(d + step in pool for d in shown)), 0)


#: lines (impressions) between two reports to a log validation's ``on_progress``
PROGRESS_EVERY = 20_000


def read_log(path: str | Path, *, on_progress: Callable[[str, int, int], None] | None = None) -> list[LogRecord]:
    """Read an impressions log (JSON lines) with ``rankings``, ``shown``, ``teams``, ``clicks`` [, ``outcome``].

    Every line is one impression, a JSON object with:

    * ``rankings``: the input rankings, a list of at least two lists of document ids
      (integers in ``0..2^31-1``, or strings such as URLs or hashes, numbered in order of
      first appearance: one kind per log; ``rankings[0]`` is A, ``rankings[1]`` is B); every
      line of a log has the same number of rankings;
    * ``shown``: the shown list (non-empty; it may be shorter than the rankings: the page
      length is the shown length), ``teams``: the ranker index credited for each shown
      slot (``0..len(rankings)-1``, 0-based: 1-based labels, ``1..len(rankings)`` on a line with
      none 0 before it, are refused as such, as are shown integer ids that are in no ranking while
      every one shifted by one is);
    * ``clicks``: one boolean (or 0 / 1) per shown slot, or ``clicked_docs``: the
      clicked document ids;
    * ``outcome`` (optional, two rankings only): the logged outcome, a finite number whose
      sign says who won (``> 0``: B, ``< 0``: A, ``0``: tie).

    Limits per impression (so memory and time per impression are bounded): at most
    :data:`MAX_RANKERS` (64) rankings of at most :data:`MAX_RANKING_LENGTH` (1,000)
    documents, a shown list of at most 1,000, a line of at most :data:`MAX_LINE_BYTES`
    (4 MiB, refused before parsing); JSON nested too deeply for the parser is refused too.

    ``on_progress(what, done, total)``, if given, is called every :data:`PROGRESS_EVERY` lines and at the end
    with ``what`` ``"reading"`` and the bytes read of the file's size.

    Raises
    ------
    InputError
        Naming the file and line of the first malformed impression.
    """
    p = str(path)
    records: list[LogRecord] = []
    n_rankers: int | None = None
    docs = _DocIds()
    with open(p, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        i = 0
        while True:
            raw_bytes = fh.readline(MAX_LINE_BYTES + 1)
            if not raw_bytes:
                break
            i += 1
            if on_progress is not None and i % PROGRESS_EVERY == 0:
                on_progress("reading", min(fh.tell(), size - 1), size)
            if len(raw_bytes) > MAX_LINE_BYTES:
                raise InputError(f"line longer than {MAX_LINE_BYTES:,} bytes; one impression per line, at most "
                                 f"{MAX_RANKING_LENGTH:,} documents per ranking", p, i)
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError("not UTF-8 text (a JSON-lines log is expected)", p, i) from None
            if not raw.strip():
                continue
            try:
                obj = loads_unique(raw)  # (plain json.loads keeps a repeated key's last value)
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg})", p, i) from None
            except DuplicateKey as exc:
                raise InputError(exc.text(), p, i) from None
            except RecursionError:
                raise InputError("JSON nested too deeply (an impression is one flat object of lists)", p, i) \
                    from None
            except ValueError as exc:   # e.g. an integer of more than 4300 digits
                raise InputError(f"not valid JSON ({str(exc)[:120]})", p, i) from None
            rec = _parse_line(obj, p, i, n_rankers, docs)
            n_rankers = len(rec.rankings)
            records.append(rec)
    if not records:
        raise InputError("the log holds no impressions", p)
    if on_progress is not None:
        on_progress("reading", size, size)
    return records


def _arrays(records: Sequence[LogRecord]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(m, n, K)`` rankings, ``(n, k)`` shown, teams (``-1`` padded) and clicks of the records."""
    m = len(records[0].rankings)
    n = len(records)
    width = max(max(len(r) for r in rec.rankings) for rec in records)
    k = max(len(rec.shown) for rec in records)
    rk = np.full((m, n, max(width, 1)), -1, dtype=np.int64)
    shown = np.full((n, k), -1, dtype=np.int64)
    teams = np.full((n, k), -1, dtype=np.int64)
    clicks = np.zeros((n, k), dtype=bool)
    for r, rec in enumerate(records):
        for i, lst in enumerate(rec.rankings):
            rk[i, r, : len(lst)] = lst
        shown[r, : len(rec.shown)] = rec.shown
        teams[r, : len(rec.teams)] = rec.teams
        clicks[r, : len(rec.clicks)] = rec.clicks
    return rk, shown, teams, clicks


def validate_log(records: Sequence[LogRecord], method: str = "team_draft", *, alpha: float = 0.01,
                 seed: int = 0, options: dict[str, Any] | None = None, subject: str = "log",
                 source: dict[str, Any] | None = None,
                 on_progress: Callable[[str, int, int], None] | None = None) -> ValidationReport:
    """Check logged impressions: structure, prefix balance, team distribution against the reference, outcomes.

    The page length of an impression is its shown length; the reference is run on the
    logged inputs with that page length (impressions grouped by page length). Impressions
    are checked in consecutive chunks of at most :data:`CHUNK_CELLS` padded cells, so memory
    is bounded per chunk whatever the widths in the rest of the log.

    ``on_progress(what, done, total)``, if given, is called every :data:`PROGRESS_EVERY` impressions and at the end
    of each pass with the impressions done of all: ``what`` ``"reference"`` (the reference's exact team
    probabilities of each impression's inputs) and ``"checking"`` (the checks, chunk by chunk).

    ``source``: the log file's digest (:func:`onlineeval.io.digest.input_entry`, as ``onlineeval validate --log``
    gives it); without it the report's ``inputs`` hold the SHA-256 of the records' content (rankings, shown, teams,
    clicks, outcome; :func:`_records_entry`).
    """
    if not records:
        raise InputError("no impressions to validate")
    check_seed(seed)
    significance_level(alpha)  # (unchecked, --alpha 5 failed every correct log: each p-value is below 5)
    spec = method_spec(method)
    ref_il = get_interleaver(method, **(options or {}))
    m = len(records[0].rankings)
    if m < ref_il.min_rankers or (ref_il.max_rankers is not None and m > ref_il.max_rankers):
        allowed = f"{ref_il.min_rankers}" if ref_il.max_rankers == ref_il.min_rankers \
            else f"at least {ref_il.min_rankers}"
        raise InputError(f"{method!r} compares {allowed} rankers; the log's impressions have {m}",
                         subject, records[0].line)
    rng = np.random.default_rng(seed)
    page = np.asarray([len(rec.shown) for rec in records])
    lines = [rec.line for rec in records]
    struct: list[str] = []
    prefix: list[str] = []
    slots_pos, slots_log, slots_ref = [], [], []        # per shown slot: position, logged and reference team
    out_line: list[int] = []
    out_logged: list[int] = []
    out_ref: list[int] = []
    out_ok: list[bool] = []
    ref = BatchCandidate(f"onlineeval:{method}", ref_il, trusted=True)
    # the reference's exact team probabilities per impression where they can be enumerated (exact.py)
    table: dict[tuple[float, ...], int] = {}
    cache: dict[tuple[tuple[tuple[int, ...], ...], int], NDArray[np.int64] | None] = {}
    exact_ids: list[NDArray[np.int64] | None] = []
    n_records = len(records)
    for done, rec in enumerate(records, 1):
        if on_progress is not None and (done % PROGRESS_EVERY == 0 or done == n_records):
            on_progress("reference", done, n_records)
        key = (rec.rankings, len(rec.shown))
        if key not in cache:
            probs = team_probabilities(ref_il, rec.rankings, len(rec.shown))
            cache[key] = None if probs is None else np.asarray(
                [table.setdefault(row, len(table)) for row in map(tuple, np.round(probs, 12).tolist())],
                dtype=np.int64)
        exact_ids.append(cache[key])
    del cache
    is_exact = np.asarray([ids is not None for ids in exact_ids], dtype=bool)
    slots_id = []                                       # per shown slot: its exact distribution (-1: sampled)
    checked = 0
    for chunk in _chunks(records, m):
        if on_progress is not None:
            on_progress("checking", checked, n_records)
        checked += chunk.size
        recs = [records[r] for r in chunk]
        rk, shown, teams, clicks = _arrays(recs)
        pg = page[chunk]
        bad = structure_violations(rk, shown, teams, pg, spec.team_holds_doc)
        struct += bad
        if spec.prefix_balanced:
            prefix += prefix_violations(rk, shown, teams)
        # the reference's team labels on the same inputs and page lengths
        ref_team = np.full(teams.shape, -1, dtype=np.int64)
        ex = is_exact[chunk]
        for length in np.unique(pg[~ex]):            # a sample only where no exact distribution is enumerated
            rows = np.flatnonzero((pg == length) & ~ex)
            res = ref_il.interleave(list(rk[:, rows]), rng, length=int(length))
            ref_team[rows, : int(length)] = res.team
        on_page = np.arange(teams.shape[1])[None, :] < pg[:, None]
        ids = np.full(teams.shape, -1, dtype=np.int64)
        for r, rid in enumerate(chunk.tolist()):
            if exact_ids[rid] is not None:
                ids[r, : pg[r]] = exact_ids[rid]
        slots_pos.append(np.nonzero(on_page)[1])
        slots_log.append(teams[on_page])
        slots_ref.append(ref_team[on_page])
        slots_id.append(ids[on_page])
        # logged outcomes against the reference credit (defined on well-formed impressions only)
        idx = np.asarray([r for r, rec in enumerate(recs) if rec.outcome is not None], dtype=np.int64)
        if idx.size:
            ok = np.asarray([not bad[r] for r in idx], dtype=bool)
            use = idx[ok]
            exp = np.zeros(idx.size, dtype=np.int64)
            if use.size:
                vals = ref.values_on(rk[:, use], shown[use], teams[use], clicks[use], spec.scale)
                exp[ok] = np.sign(vals[:, 1, 0]).astype(np.int64)
            out_line += [recs[int(r)].line for r in idx]
            out_logged += [int(recs[int(r)].outcome or 0) for r in idx]
            out_ref += exp.tolist()
            out_ok += ok.tolist()
    if on_progress is not None:
        on_progress("checking", n_records, n_records)
    checks = [_exact_lines("structure", struct, lines, "impressions violate the invariants")]
    if any(struct):
        foreign = [rec for rec, msg in zip(records, struct) if "is in no input list" in msg]
        steps = {_shift(rec.rankings, rec.shown) for rec in foreign}
        if foreign and len(steps) == 1 and 0 not in steps:     # every such line explained by one shift
            step = steps.pop()
            checks[0] = replace(checks[0], message=(
                f"warning: on all {len(foreign)} lines with a document in no ranking (first: line "
                f"{foreign[0].line}), every shown id {step:+d} is in the rankings: {_SHIFTED[step]}?; "
                + checks[0].message))
    zero = any(0 in rec.teams for rec in records)
    if not zero and all(rec.teams for rec in records):
        checks[0] = replace(checks[0], message=(
            f"warning: no team label is 0 anywhere in the log (0 = rankings[0]): if the labels are 1-based, "
            f"they must be ranker indices 0..{m - 1}; " + checks[0].message))
    if spec.prefix_balanced:
        checks.append(_exact_lines("prefix_balance", prefix, lines, "impressions have an unbalanced prefix"))

    # team label per position against the reference
    checks.append(_team_distribution(slots_pos, slots_log, slots_ref, slots_id, table, page, m, len(records),
                                     int(is_exact.sum()), method))

    if out_line:
        ok_a = np.asarray(out_ok, dtype=bool)
        logged = np.asarray(out_logged, dtype=np.int64)
        exp_a = np.asarray(out_ref, dtype=np.int64)
        wrong = ok_a & (exp_a != logged)
        example = ""
        if wrong.any():
            b = int(np.flatnonzero(wrong)[0])
            example = f"line {out_line[b]}: logged {int(logged[b]):+d}, reference {int(exp_a[b]):+d}"
        checks.append(exact_check("credit_agreement", int(wrong.sum()), int(ok_a.sum()),
                                  "logged outcomes differ from the reference credit (structurally valid "
                                  "impressions)", example))
    else:
        checks.append(CheckResult("credit_agreement", SKIPPED, "violations/total", None,
                                  "no 'outcome' in the log", rule="skipped"))
    conv = (
        ("outcome", "> 0: B = rankings[1] preferred, < 0: A = rankings[0], 0: tie"),
        ("size", (f"{len(records)} logged impressions; page lengths {int(page.min())}..{int(page.max())} "
                 f"(the page length of an impression is its shown length); reference options "
                 f"{ref_il.options or 'default'}; seed {seed} for the reference draws")),
        ("statistics", ("exact checks print violations/total and fail on any violation; a test's p-values are "
                       "Bonferroni-combined over positions and fail when below the level")),
    )
    settings = {"mode": "log", "method": method, "options": dict(ref_il.options), "alpha": alpha, "seed": int(seed)}
    return stamped(ValidationReport(subject, method, finalize(checks, alpha), alpha, conv, "log"),
                   {"log": source if source is not None else _records_entry(records)}, settings)


def _records_entry(records: Sequence[LogRecord]) -> dict[str, Any]:
    """``{"in_memory": "records", "records", "sha256"}`` of logged impressions given in memory: their content as
    JSON lists (their line numbers left out)."""
    from onlineeval.io.digest import RecordsDigest

    digest = RecordsDigest()
    for _ in digest.through([[list(map(list, r.rankings)), list(r.shown), list(r.teams), list(r.clicks), r.outcome]
                             for r in records]):
        pass
    entry = digest.entry("records")
    assert entry is not None  # ints, bools and None always have a JSON form
    return entry


def _chunks(records: Sequence[LogRecord], m: int) -> Iterator[NDArray[np.int64]]:
    """Consecutive runs of record indices whose padded arrays hold at most :data:`CHUNK_CELLS` cells."""
    start = rows = width = k = 0
    for r, rec in enumerate(records):
        w = max(width, max(len(x) for x in rec.rankings), 1)
        kk = max(k, len(rec.shown))
        if rows and (rows + 1) * (m * w + kk) > CHUNK_CELLS:
            yield np.arange(start, r)
            start, rows = r, 0
            w, kk = max(max(len(x) for x in rec.rankings), 1), len(rec.shown)
        width, k, rows = w, kk, rows + 1
    yield np.arange(start, len(records))


def _exact_lines(name: str, messages: Sequence[str], lines: Sequence[int], what: str) -> CheckResult:
    bad = [(line, msg) for line, msg in zip(lines, messages) if msg]
    example = f"line {bad[0][0]}: {bad[0][1]}" if bad else ""
    return exact_check(name, len(bad), len(messages), what, example)


def _team_distribution(slots_pos: Sequence[NDArray[np.int64]], slots_log: Sequence[NDArray[np.int64]],
                       slots_ref: Sequence[NDArray[np.int64]], slots_id: Sequence[NDArray[np.int64]],
                       table: dict[tuple[float, ...], int], page: NDArray[np.int64], m: int, n_records: int,
                       n_exact: int, method: str) -> CheckResult:
    """Team label per position: against the exact probabilities of each impression where they are enumerated
    (:func:`~.stattests.pooled_goodness_of_fit`), against a sample of the reference elsewhere (chi-square
    homogeneity); each distinct test counted once."""
    probs = np.asarray(list(table), dtype=np.float64).reshape(len(table), m + 1)
    pos = np.concatenate(slots_pos)
    order = np.argsort(pos, kind="stable")
    cuts = np.cumsum(np.bincount(pos, minlength=int(page.max())))[:-1]
    per_log = np.split(np.concatenate(slots_log)[order], cuts)
    per_ref = np.split(np.concatenate(slots_ref)[order], cuts)
    per_id = np.split(np.concatenate(slots_id)[order], cuts)
    pvals: list[float] = []
    kinds: set[str] = set()
    seen: set[bytes] = set()
    worst = ("", 1.0)
    for j, (a, b, ids) in enumerate(zip(per_log, per_ref, per_id)):
        ex = ids >= 0
        for kind, lab in (("exact", a[ex]), ("sampled", a[~ex])):
            if not lab.size:
                continue
            if kind == "exact":
                key = pooled_gof_key(lab, ids[ex], probs)
            else:
                key = partition_key(lab, b[~ex])   # a position splitting the slots as one tested before is that test
            if key is None or key in seen:
                continue
            seen.add(key)
            kinds.add(kind)
            if kind == "exact":
                pvals.append(pooled_goodness_of_fit(lab, ids[ex], probs))
                share = probs[ids[ex]].mean(axis=0)
                vs = "exact reference"
            else:
                pvals.append(homogeneity(lab, b[~ex]))
                share = np.asarray([np.mean(b[~ex] == t) for t in range(m)])
                vs = "a sampled reference"
            if pvals[-1] < worst[1]:
                worst = (f"position {j + 1} ({lab.size} logged slots): log vs {vs} "
                         + ", ".join(f"team {t}: {np.mean(lab == t):.3f} vs {share[t]:.3f}" for t in range(m)),
                         pvals[-1])
    pb = bonferroni(pvals)
    stat = reference_statistic(kinds)
    n_sampled = n_records - n_exact
    if n_exact:
        ref_text = (f"exact reference probabilities for {n_exact} of {n_records} impressions (each impression's "
                    "own per-slot team probabilities, enumerated from the method's definition on its logged lists "
                    "and page length; per position the logged counts against their sum, with the covariance of "
                    "independent draws: Pearson's chi-square when every impression has the same probabilities, "
                    "exact binomial test for two cells then, cells expecting fewer than 5 merged, a label the "
                    "reference never gives there p = 0)")
        if n_sampled:
            ref_text += (f"; a sampled reference (chi-square test of homogeneity) for the other {n_sampled}: "
                         f"more than {MAX_LOG_DRAWS:,} pick orders to enumerate")
    else:
        ref_text = ("a sampled reference (chi-square test of homogeneity: "
                    + (f"more than {MAX_LOG_DRAWS:,} pick orders to enumerate per impression)"
                       if method_spec(method).prefix_balanced or "team_draft" in method
                       else "no exact distribution for this method)"))
    return CheckResult("team_distribution", PENDING, f"{stat}, Bonferroni over {len(pvals)}", pb,
                       f"team label per position, log vs reference on the logged inputs and page lengths: "
                       f"{len(pvals)} distinct tests over {len(per_log)} positions (a position whose labels split "
                       "the impressions as an earlier one does, e.g. team-draft's second pick, gives the same "
                       "p-value and is counted once; a constant one cannot fail); " + ref_text,
                       counts={"impressions": n_records, "positions": len(per_log), "exact": n_exact,
                               "sampled": n_sampled}, rule="null", hint=f"worst: {worst[0]}" if worst[0] else "")
