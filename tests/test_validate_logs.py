"""validate --log: pages shorter than the rankings (page length = shown length), and the vectorised invariants.

The invariants are checked against a plain per-impression reference written here (sets and
loops, the textbook definitions) on random well-formed and corrupted impressions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.interleaving import get_interleaver
from onlineeval.interleaving.validation import read_log, validate_log
from onlineeval.interleaving.validation.invariants import (
    prefix_violations,
    structure_violations,
)


def write_log(path: Path, method: str, n: int, width: int, page: int, seed: int, *, queries: int | None = None,
              corrupt: str = "") -> None:
    """A log of ``method`` showing the top ``page`` of two rankings of ``width`` documents."""
    rng = np.random.default_rng(seed)
    il = get_interleaver(method)
    if queries:                    # few distinct queries (optimized solves one LP per input pair)
        pool = [np.argsort(rng.random((queries, width + 3)), axis=1)[:, :width] for _ in range(2)]
        q = rng.integers(0, queries, n)
        a, b = pool[0][q], pool[1][q]
    else:
        a = np.argsort(rng.random((n, width + 5)), axis=1)[:, :width]
        b = np.argsort(rng.random((n, width + 5)), axis=1)[:, :width]
    res = il.interleave([a, b], rng, length=page)
    clicks = rng.random(res.ranking.shape) < 0.3
    out = il.outcome(res, clicks)
    with path.open("w") as fh:
        for r in range(n):
            shown, teams = res.ranking[r].tolist(), res.team[r].tolist()
            if corrupt == "duplicate" and r == 7:
                shown[-1] = shown[0]
            if corrupt == "foreign" and r == 9:
                shown[-1] = 10_000
            fh.write(json.dumps({"rankings": [a[r].tolist(), b[r].tolist()], "shown": shown, "teams": teams,
                                 "clicks": clicks[r].tolist(), "outcome": int(out[r])}) + "\n")


@pytest.mark.parametrize("method, width, page, queries", [
    ("team_draft", 20, 10, None),
    ("probabilistic", 20, 10, None),
    ("balanced", 20, 10, None),
    ("optimized", 5, 3, 15),
])
def test_short_pages_are_accepted(tmp_path: Path, method: str, width: int, page: int, queries: int | None) -> None:
    p = tmp_path / "log.jsonl"
    write_log(p, method, 2000, width, page, 0, queries=queries)
    rep = validate_log(read_log(p), method)
    assert rep.passed, rep.format()
    status = {c.name: c for c in rep.checks}
    assert status["structure"].counts == {"violations": 0, "total": 2000}
    assert status["credit_agreement"].counts["total"] == 2000
    assert f"page lengths {page}..{page}" in dict(rep.conventions)["size"]


def test_optimized_reference_runs_at_the_page_length(tmp_path: Path) -> None:
    """Optimized interleaving's distribution depends on the page length: the reference must use the log's.

    For A = (4, 3, 0, 5, 6), B = (7, 0, 4, 3, 5) the LP for a 3-slot page puts a different
    distribution on the top three slots than the 5-slot solution does (by 0.15), so the log
    of 3-slot pages passes only because the reference is run at the page length.
    """
    a, b = [4, 3, 0, 5, 6], [7, 0, 4, 3, 5]
    il = get_interleaver("optimized")

    def top3(length: int) -> dict[tuple[tuple[int, ...], tuple[int, ...]], float]:
        d = il.distribution([a, b], length)
        out: dict[tuple[tuple[int, ...], tuple[int, ...]], float] = {}
        for lst, team, prob in zip(d.lists, d.teams, d.probabilities):
            key = (tuple(lst[:3].tolist()), tuple(team[:3].tolist()))
            out[key] = out.get(key, 0.0) + float(prob)
        return out

    short, full = top3(3), top3(5)
    assert max(abs(short.get(key, 0.0) - full.get(key, 0.0)) for key in set(short) | set(full)) > 0.1
    rng = np.random.default_rng(4)
    n = 4000
    res = il.interleave([np.tile(a, (n, 1)), np.tile(b, (n, 1))], rng, length=3)
    p = tmp_path / "log.jsonl"
    with p.open("w") as fh:
        for r in range(n):
            fh.write(json.dumps({"rankings": [a, b], "shown": res.ranking[r].tolist(), "teams": res.team[r].tolist(),
                                 "clicks": [False, False, False]}) + "\n")
    rep = validate_log(read_log(p), "optimized")
    assert rep.passed, rep.format()


@pytest.mark.parametrize("corrupt, message", [("duplicate", "duplicate"), ("foreign", "in no input list")])
def test_structure_is_checked_against_the_page(tmp_path: Path, corrupt: str, message: str) -> None:
    p = tmp_path / "log.jsonl"
    write_log(p, "team_draft", 500, 20, 10, 2, corrupt=corrupt)
    rep = validate_log(read_log(p), "team_draft")
    s = next(c for c in rep.checks if c.name == "structure")
    assert s.status == "FAIL" and s.counts["violations"] == 1 and message in s.message and "line " in s.message


def test_cli_log_with_short_pages_and_json(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    write_log(p, "team_draft", 1500, 20, 10, 3)
    res = CliRunner().invoke(app, ["validate", "--log", str(p), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["mode"] == "log" and doc["verdict"] == "PASS"
    assert [c["name"] for c in doc["checks"]] == ["structure", "prefix_balance", "team_distribution",
                                                  "credit_agreement"]


# ------------------------------------------------------------------ invariants vs a plain reference
def structure_reference(lists: Sequence[Sequence[int]], shown: Sequence[int], teams: Sequence[int], page: int,
                        team_holds_doc: bool) -> bool:
    """True when the impression keeps every structural invariant (textbook definitions)."""
    if len(shown) != len(teams) or len(set(shown)) != len(shown) or len(shown) != page:
        return False
    union = set().union(*map(set, lists))
    for d, t in zip(shown, teams):
        if d not in union or not 0 <= t < len(lists):
            return False
        if team_holds_doc and d not in lists[t]:
            return False
    return True


def prefix_reference(lists: Sequence[Sequence[int]], shown: Sequence[int], teams: Sequence[int]) -> bool:
    counts = [0] * len(lists)
    for j, t in enumerate(teams):
        if not all(set(lst) - set(shown[:j]) for lst in lists):
            return True
        if not 0 <= t < len(lists):
            return False
        counts[t] += 1
        if max(counts) - min(counts) > 1:
            return False
    return True


@pytest.mark.parametrize("m", [2, 3])
def test_invariants_agree_with_the_plain_reference(m: int) -> None:
    rng = np.random.default_rng(m)
    il = get_interleaver("team_draft")
    n, width = 3000, 6
    mats = [np.argsort(rng.random((n, 9)), axis=1)[:, :width] for _ in range(m)]
    mats[-1][: n // 5, 4:] = -1                                      # shorter lists
    res = il.interleave(mats, rng)
    shown = res.ranking.astype(np.int64)
    teams = np.where(shown >= 0, res.team, -1).astype(np.int64)
    # corrupt a third of the rows: swap labels, duplicate, foreign document, bad label
    kind = rng.integers(0, 6, n)
    rows = np.arange(n)
    j = rng.integers(0, 3, n)
    teams[kind == 1, 0] = (teams[kind == 1, 0] + 1) % m
    shown[kind == 2, 1] = shown[kind == 2, 0]
    shown[(kind == 3), 2] = 99
    teams[(kind == 4), 0] = m + 1
    sel = kind == 5
    teams[rows[sel], j[sel]], teams[rows[sel], j[sel] + 1] = teams[rows[sel], j[sel] + 1], teams[rows[sel], j[sel]]
    rk = np.stack([np.asarray(x, dtype=np.int64) for x in mats])
    page = (shown >= 0).sum(axis=1)
    got_s = structure_violations(rk, shown, teams, page, True)
    got_p = prefix_violations(rk, shown, teams)
    n_bad = 0
    for r in range(n):
        lists = [[int(d) for d in x[r] if d >= 0] for x in mats]
        keep = shown[r] >= 0
        sh, tm = shown[r][keep].tolist(), teams[r][keep].tolist()
        ok_s = structure_reference(lists, sh, tm, int(page[r]), True)
        assert (got_s[r] == "") == ok_s, (r, lists, sh, tm, got_s[r])
        assert (got_p[r] == "") == prefix_reference(lists, sh, tm), (r, lists, sh, tm, got_p[r])
        n_bad += not ok_s
    assert n_bad > n // 4                                             # the corruptions were seen


def test_page_length_mismatch_is_reported() -> None:
    rk = np.array([[[1, 2, 3]], [[3, 2, 1]]], dtype=np.int64)
    shown = np.array([[1, 3, -1]])
    teams = np.array([[0, 1, -1]])
    assert structure_violations(rk, shown, teams, np.array([2]), True) == [""]
    assert structure_violations(rk, shown, teams, np.array([3]), True) == ["shown 2 documents, expected 3"]
    gap = structure_violations(rk, np.array([[1, -1, 3]]), np.array([[0, -1, 1]]), np.array([2]), True)
    assert "empty slot before a document" in gap[0]


def _as_strings(src: Path, dst: Path, clicked_docs: bool = False) -> None:
    """The log with every document id written as a string (a URL), the same id the same string; with
    ``clicked_docs`` the clicks as the clicked documents' ids."""
    url = "https://example.org/doc/{}".format
    with src.open() as fin, dst.open("w") as fout:
        for raw in fin:
            obj = json.loads(raw)
            obj["rankings"] = [[url(d) for d in r] for r in obj["rankings"]]
            if clicked_docs:
                obj["clicked_docs"] = [url(d) for d, c in zip(obj["shown"], obj.pop("clicks")) if c]
            obj["shown"] = [url(d) for d in obj["shown"]]
            fout.write(json.dumps(obj) + "\n")


@pytest.mark.parametrize("clicked_docs", [False, True])
def test_string_document_ids_give_the_integer_logs_report(tmp_path: Path, clicked_docs: bool) -> None:
    """Production logs carry string ids (URLs, hashes): numbered in order of first appearance, the same string the
    same number in every line, so the battery sees the same impressions and prints the same statistics."""
    ints, strs = tmp_path / "int.jsonl", tmp_path / "str.jsonl"
    write_log(ints, "team_draft", 3000, 20, 10, 3)
    _as_strings(ints, strs, clicked_docs)
    a, b = read_log(ints), read_log(strs)
    # the same structure: equal ids within and across lines map to equal codes
    for ra, rb in zip(a, b):
        assert ra.teams == rb.teams and ra.clicks == rb.clicks
        pairs = set(zip(sum(ra.rankings, ()) + ra.shown, sum(rb.rankings, ()) + rb.shown))
        assert len({x for x, _ in pairs}) == len(pairs) == len({y for _, y in pairs})
    codes = {}
    for ra, rb in zip(a, b):
        for x, y in zip(sum(ra.rankings, ()), sum(rb.rankings, ())):
            assert codes.setdefault(x, y) == y  # one code per id over the whole log
    ra_rep, rb_rep = validate_log(a, "team_draft"), validate_log(b, "team_draft")
    assert ra_rep.passed and rb_rep.passed
    assert [(c.name, c.counts, c.statistic) for c in ra_rep.checks] == \
        [(c.name, c.counts, c.statistic) for c in rb_rep.checks]


def test_a_log_mixing_string_and_integer_ids_is_refused(tmp_path: Path) -> None:
    from onlineeval.errors import InputError

    p = tmp_path / "mixed.jsonl"
    line = {"rankings": [["a", "b"], ["b", "a"]], "shown": ["a", "b"], "teams": [0, 1], "clicks": [1, 0]}
    p.write_text(json.dumps(line) + "\n" + json.dumps({**line, "rankings": [[1, 2], [2, 1]], "shown": [1, 2]}) + "\n")
    with pytest.raises(InputError, match=r"mixed.jsonl:2: 'rankings\[\]' holds integers where the log's earlier "
                                         "document ids are strings"):
        read_log(p)
    p.write_text(json.dumps({**line, "shown": ["a", 2]}) + "\n")
    with pytest.raises(InputError, match="must be a list of integers, or of strings"):
        read_log(p)


def test_log_team_distribution_counts_each_distinct_test_once(tmp_path: Path) -> None:
    """A team-draft log's second pick of a round repeats the first's test; probabilistic slots are all distinct."""
    p = tmp_path / "td.jsonl"
    write_log(p, "team_draft", 2000, 20, 7, 1)
    team = {c.name: c for c in validate_log(read_log(p), "team_draft").checks}["team_distribution"]
    assert team.statistic.endswith("Bonferroni over 4") and team.counts["positions"] == 7     # 1=2, 3=4, 5=6, 7
    write_log(p, "probabilistic", 2000, 20, 7, 1)
    team = {c.name: c for c in validate_log(read_log(p), "probabilistic").checks}["team_distribution"]
    assert team.statistic.endswith("Bonferroni over 7")
