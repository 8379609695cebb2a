"""The logged-impressions reader (onlineeval.io.logged): arrays, id maps, targets, and every
refusal naming file and line. Every test runs twice: line by line, and with the pyarrow reader first
(``FAST_MIN_BYTES`` 0: it reads what it accepts and declines the rest, so the refusals are the same)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from onlineeval.errors import InputError
from onlineeval.io.logged import read_logged

@pytest.fixture(autouse=True, params=["lines", "fast"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    import onlineeval.io.logged as logged

    monkeypatch.setattr(logged, "FAST_MIN_BYTES", 0 if request.param == "fast" else 1 << 62)
    return str(request.param)


P3 = {"list": 1 / 60, "prefix": [1 / 5, 1 / 20, 1 / 60], "item": [0.2, 0.2, 0.2]}


def line(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"query": "q1", "shown": ["a", "b", "c"], "clicks": [], "propensities": dict(P3)}
    base.update(kw)
    return base


def pp(**kw: Any) -> dict[str, Any]:
    """A line whose propensities are P3 with some forms replaced."""
    return line(propensities={**P3, **kw})


def write(tmp_path: Path, records: list[Any], name: str = "log.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def test_reads_arrays_and_id_maps(tmp_path: Path) -> None:
    recs = [
        line(query="q2", user="u1", shown=["a", "b", "c"], clicks=["b"]),
        "",  # blank lines are skipped (line numbers keep counting)
        line(query="q1", user="u2", shown=["c", "d"], clicks=[1, 0],
             propensities={"list": 0.1, "prefix": [0.5, 0.1], "item": [0.5, 0.25]}),
        line(query=7, shown=["d", "a", "b"], clicks=["b", "d"]),
    ]
    log = read_logged(write(tmp_path, recs))
    d = log.data
    assert log.queries == ("7", "q1", "q2")  # sorted ids
    assert log.docs == (("d", "a", "b"), ("c", "d"), ("a", "b", "c"))  # per query, first appearance
    np.testing.assert_array_equal(d.query, [2, 1, 0])
    np.testing.assert_array_equal(d.shown, [[0, 1, 2], [0, 1, -1], [0, 1, 2]])
    np.testing.assert_array_equal(d.clicks, [[0, 1, 0], [1, 0, 0], [1, 0, 1]])
    np.testing.assert_array_equal(log.lines, [1, 3, 4])
    np.testing.assert_allclose(d.p_list, [1 / 60, 0.1, 1 / 60])
    # an empty slot leaves the prefix probability unchanged and carries item propensity 1
    np.testing.assert_allclose(d.p_prefix[1], [0.5, 0.1, 0.1])
    np.testing.assert_allclose(d.p_item[1], [0.5, 0.25, 1.0])
    # users u1, u2; the third line has none: a cluster of its own
    assert len(set(d.user.tolist())) == 3 and log.no_user == 1
    assert d.user_type is None
    np.testing.assert_array_equal(log.query_k, [3, 2, 3])
    assert log.short == 0 and log.forms == ("p_list", "p_prefix", "p_item") and log.source == "log"


def test_partial_forms_user_type_and_short_lists(tmp_path: Path) -> None:
    recs = [
        line(user_type=1, propensities={"item": [0.2, 0.2, 0.2]}),
        line(user_type=0, shown=["a", "b"], propensities={"item": [0.2, 0.2]}),
    ]
    log = read_logged(write(tmp_path, recs))
    assert log.forms == ("p_item",) and log.data.p_list is None and log.data.p_prefix is None
    np.testing.assert_array_equal(log.data.user_type, [1, 0])
    assert log.data.user is None and log.short == 1


def test_target_map_top_k_unseen_and_missing_queries(tmp_path: Path) -> None:
    recs = [
        line(query="q1", shown=["a", "b", "c"]),
        line(query="q1", shown=["b", "d", "a"]),
        line(query="q2", shown=["x", "y"], propensities={"list": 0.5, "prefix": [0.5, 0.5], "item": [0.5, 0.5]}),
        line(query="q3", shown=["a", "y"], propensities={"list": 0.5, "prefix": [0.5, 0.5], "item": [0.5, 0.5]}),
    ]
    log = read_logged(write(tmp_path, recs))
    assert log.docs == (("a", "b", "c", "d"), ("x", "y"), ("a", "y"))
    np.testing.assert_array_equal(log.data.shown, [[0, 1, 2], [1, 3, 0], [0, 1, -1], [0, 1, -1]])
    tm = log.target({"q1": ["d", "c", "b", "zz"], "q2": ["x", "a", "y"], "other": ["a"]}, "B")
    # q1: its top 3 (the log shows 3 there); q2: top 2, 'a' is never shown for q2 -> a fresh index 2
    assert tm.target.lists.shape == (3, 3)
    np.testing.assert_array_equal(tm.target.lists, [[3, 2, 1], [0, 2, -1], [-1, -1, -1]])  # q3 is not ranked
    np.testing.assert_array_equal(tm.ranked, [True, True, False])
    # 'a' is a known document, but not one the log shows for q2; 'zz' is below q1's depth
    assert [(u.query, u.rank, u.doc) for u in tm.unseen] == [("q2", 2, "a")]
    np.testing.assert_array_equal(tm.unseen_query, [False, True, False])
    tm2 = log.target({"q2": ["new", "other", "x"], "q1": ["zz", "a", "yy"]}, "C")
    np.testing.assert_array_equal(tm2.target.lists[:2], [[4, 0, 5], [2, 3, -1]])  # fresh, distinct indexes
    assert [(u.query, u.rank, u.doc) for u in tm2.unseen] == [("q1", 1, "zz"), ("q1", 3, "yy"), ("q2", 1, "new"),
                                                              ("q2", 2, "other")]


BAD_LINES: list[tuple[str, Any, str]] = [
    ("json", '{"query": "q1", "shown": ["a"', "malformed JSON"),
    ("not_object", "[1, 2]", "expected a JSON object"),
    ("missing_query", {"shown": ["a"], "clicks": [], "propensities": {"list": 1}}, "missing key 'query'"),
    ("missing_clicks", {"query": "q", "shown": ["a"], "propensities": {"list": 1}}, "missing key 'clicks'"),
    ("neither", {"query": "q", "shown": ["a"], "clicks": []}, "found neither"),
    ("both", line(logger={"policy": "randtop", "scores": {"a": 1}}), "not both"),
    ("query_type", line(query=[1]), "'query' must be"),
    ("shown_strings", line(shown=["a", 3, "c"]), "'shown' must be a non-empty list of document id strings"),
    ("shown_empty", line(shown=[]), "'shown' must be a non-empty list"),
    ("shown_not_list", line(shown="a b c"), "'shown' must be"),
    ("duplicate", line(shown=["a", "b", "a"]), "document 'a' is shown twice"),
    ("click_not_shown", line(clicks=["z"]), "click on document 'z', which is not shown"),
    ("click_flags_length", line(clicks=[0, 1]), "has 2 values but shown has 3"),
    ("click_mixed", line(clicks=["a", 1]), "'clicks' must be"),
    ("click_value", line(clicks=[0, 2, 0]), "'clicks' must be"),
    ("click_twice", line(clicks=["b", "b"]), "click on document 'b' listed twice"),
    ("key_twice", '{"query": "q1", "shown": ["a"], "clicks": [], "propensities": {"list": 1}, "query": "q9"}',
     "key 'query' appears twice in one object"),
    ("key_twice_nested", '{"query": "q1", "shown": ["a"], "clicks": [], "propensities": {"list": 1, "list": 0.5}}',
     "key 'list' appears twice in one object"),
    ("list_zero", pp(list=0.0), "propensities.list must be in (0, 1], got 0.0"),
    ("list_big", pp(list=1.5), "propensities.list must be in (0, 1], got 1.5"),
    ("list_nan", pp(list=float("nan")), "propensities.list must be a finite number"),
    ("list_bool", pp(list=True), "propensities.list must be a finite number"),
    ("prefix_inf", pp(prefix=[0.2, float("inf"), 0.1]), "finite numbers"),
    ("prefix_len", pp(prefix=[0.2, 0.1]), "has 2 values but shown has 3"),
    ("item_len", pp(item=[0.2, 0.2, 0.2, 0.2]), "has 4 values but shown has 3"),
    ("item_range", pp(item=[0.2, -0.1, 0.2]), "propensities.item must be in (0, 1], got -0.1 at item[1] (slot 2)"),
    ("prefix_range", pp(prefix=[0.2, 0.05, 1.5]), "propensities.prefix must be in (0, 1], got 1.5 at prefix[2] "
                                                  "(slot 3)"),
    ("item_not_list", pp(item=0.2), "propensities.item must be a list of 3 numbers"),
    ("prefix_up", pp(prefix=[0.2, 0.3, 1 / 60]), "prefix must be non-increasing"),
    ("list_vs_prefix", pp(list=0.05), "must equal the last prefix"),
    ("item_vs_prefix", pp(list=0.05, prefix=[0.2, 0.1, 0.05], item=[0.2, 0.05, 0.2]), "must be >= "),
    ("item0", pp(list=0.05, prefix=[0.2, 0.1, 0.05], item=[0.3, 0.2, 0.2]), "item[0] must equal"),
    ("form_unknown", line(propensities={"list": 0.1, "lst": 0.1}), "unknown propensity form 'lst'"),
    ("form_empty", line(propensities={}), "'propensities' must be an object"),
    ("user_type", line(user_type=-1), "'user_type' must be an integer >= 0"),
    ("user_bad", line(user=1.5), "'user' must be"),
]


@pytest.mark.parametrize("case, bad, message", BAD_LINES, ids=[c[0] for c in BAD_LINES])
def test_bad_line_names_file_and_line(tmp_path: Path, case: str, bad: Any, message: str) -> None:
    path = write(tmp_path, [line(), line(query="q2"), bad])
    with pytest.raises(InputError) as err:
        read_logged(path)
    assert message in err.value.message, err.value.message
    assert err.value.path == str(path) and err.value.line == 3
    assert str(err.value).startswith(f"{path}:3: ")


def test_inconsistent_lines(tmp_path: Path) -> None:
    path = write(tmp_path, [line(), line(propensities={"list": 1 / 60})])
    with pytest.raises(InputError, match=r":2: carries propensities list but line 1 carries propensities list, "
                                         r"prefix, item; every line must carry the same"):
        read_logged(path)
    path = write(tmp_path, [line(user_type=0), line()])
    with pytest.raises(InputError, match=r":2: 'user_type' is missing here but given on line 1"):
        read_logged(path)


def test_unknown_logging_policy_lists_the_allowed(tmp_path: Path) -> None:
    policies = _policies()
    path = write(tmp_path, [{"query": "q", "shown": ["a"], "clicks": [],
                             "logger": {"policy": "nope", "scores": {"a": 1}}}])
    with pytest.raises(InputError, match=r":1: unknown logging policy 'nope'; allowed: "
                                         + ", ".join(policies.available_policies())):
        read_logged(path, policies=policies)
    # without the policies package a logger log is refused, not misread
    with pytest.raises(InputError, match=r":1: this log names its logging policy \('logger'\); reading it needs"):
        read_logged(path)


def test_bom_and_crlf_read_alike(tmp_path: Path) -> None:
    recs = [line(clicks=["b"]), line(query="q2", user="u1")]
    plain = read_logged(write(tmp_path, recs))
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(json.dumps(r) for r in recs).encode() + b"\r\n")
    other = read_logged(path)
    for name in ("query", "shown", "clicks", "p_list", "p_prefix", "p_item", "user"):
        np.testing.assert_array_equal(getattr(plain.data, name), getattr(other.data, name))
    assert other.queries == plain.queries and other.docs == plain.docs


def test_non_utf8_and_empty(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps(line()).encode()
    path.write_bytes(good + b"\n" + good + b"\n" + b'{"query": "q\xff1"}\n')
    with pytest.raises(InputError) as err:
        read_logged(path)
    assert err.value.line == 3 and "not valid UTF-8 (byte 0xff at column 13)" in err.value.message
    for text in ("", "\n  \n"):
        path.write_text(text)
        with pytest.raises(InputError, match="the log is empty"):
            read_logged(path)


# ------------------------------------------------------------------------ logger path
def _policies() -> Any:
    from simulations import policies

    return policies


def test_logger_propensities_match_enumeration(tmp_path: Path) -> None:
    """RandTop-5 over 5 candidates shows a uniformly random ordered 3 of them: every list
    has probability 1/60, prefixes 1/5, 1/20, 1/60, items 1/5 (by enumeration of the 120
    permutations); a second query with 4 candidates and k = 2: 1/12, 1/4, 1/4."""
    policies = _policies()
    rng = np.random.default_rng(0)
    cands = {"q1": ["a", "b", "c", "d", "e"], "q2": ["v", "w", "x", "y"]}
    scores = {q: {d: float(5 - i) for i, d in enumerate(c)} for q, c in cands.items()}
    recs = []
    for i in range(40):
        q = "q1" if i % 2 else "q2"
        k = 3 if q == "q1" else 2
        shown = list(rng.permutation(cands[q])[:k])
        recs.append({"query": q, "shown": shown, "clicks": [],
                     "logger": {"policy": "randtop", "n": len(cands[q]), "scores": scores[q]}})
    log = read_logged(write(tmp_path, recs), policies=policies)
    assert log.source == "logger:randtop" and log.forms == ("p_list", "p_prefix", "p_item")

    def enumerate_probs(c: list[str], shown: list[str]) -> tuple[float, list[float], list[float]]:
        perms = list(itertools.permutations(c))
        pre = [sum(p[: j + 1] == tuple(shown[: j + 1]) for p in perms) / len(perms) for j in range(len(shown))]
        item = [sum(p[j] == shown[j] for p in perms) / len(perms) for j in range(len(shown))]
        return pre[-1], pre, item

    d = log.data
    for i, rec in enumerate(recs):
        plist, pre, item = enumerate_probs(cands[rec["query"]], rec["shown"])
        k = len(rec["shown"])
        assert d.p_list[i] == pytest.approx(plist, rel=1e-12)
        np.testing.assert_allclose(d.p_prefix[i, :k], pre, rtol=1e-12)
        np.testing.assert_allclose(d.p_item[i, :k], item, rtol=1e-12)
    # documents are the logger's candidate columns
    assert log.docs == (tuple(cands["q1"]), tuple(cands["q2"]))
    for i, rec in enumerate(recs):
        assert [cands[rec["query"]][c] for c in d.shown[i, : len(rec["shown"])]] == rec["shown"]
    # the logger as a PropensityModel in the log's id space: a non-candidate (index >= 5) has probability 0
    idx = {doc: i for i, doc in enumerate(cands["q1"]) } | {"v": 7}
    q1 = log.queries.index("q1")
    p = d.logger.propensities(np.array([q1, q1]), np.array([[idx["a"], idx["b"], idx["c"]],
                                                            [idx["a"], idx["v"], idx["c"]]]))
    np.testing.assert_allclose(p.list, [1 / 60, 0.0])
    np.testing.assert_allclose(p.item[1], [0.2, 0.0, 0.2])
    np.testing.assert_allclose(p.prefix[1], [0.2, 0.0, 0.0])
    # marginals by enumeration: each candidate 1/5 at each slot; two slots 1/20 for distinct documents
    np.testing.assert_allclose(d.logger.item_position_marginals(np.array([q1]))[0, :5, :3], np.full((5, 3), 0.2))
    pairs = d.logger.pair_marginals(q1)[:3, :5, :3, :5]
    j, a, l, b = np.meshgrid(*(np.arange(x) for x in pairs.shape), indexing="ij")
    expected = np.where(j == l, np.where(a == b, 0.2, 0.0), np.where(a == b, 0.0, 1 / 20))
    np.testing.assert_allclose(pairs, expected, atol=1e-12)
    # shown anywhere in the top 3 of 5: 3/5
    np.testing.assert_allclose(d.logger.shown_probability(np.array([q1]), np.array([[idx["e"], idx["v"], -1]])),
                               [[0.6, 0.0, 1.0]])


def test_logger_refusals(tmp_path: Path) -> None:
    policies = _policies()
    sc = {"a": 2.0, "b": 1.0, "c": 0.5}
    base = {"query": "q1", "shown": ["a", "b"], "clicks": []}
    cases = [
        ({"policy": "randtop", "n": 3, "scores": {"a": 1.0}}, "shown document 'b' is not among the logger's"),
        ({"policy": "randtop", "scores": {"a": 1.0, "b": "x"}}, "logger.scores['b'] must be a finite number"),
        ({"policy": "randtop", "n": 3, "bogus": 1, "scores": sc}, "logger: "),
        ({"scores": sc}, "'logger' needs 'policy' and 'scores'"),
    ]
    for spec, message in cases:
        path = write(tmp_path, [base | {"logger": {"policy": "randtop", "n": 3, "scores": sc}}, base | {"logger": spec}]
                     if "bogus" not in spec else [base | {"logger": spec}])
        with pytest.raises(InputError) as err:
            read_logged(path, policies=policies)
        assert message in err.value.message and err.value.line in (1, 2), err.value
    # another logger for the same query
    path = write(tmp_path, [base | {"logger": {"policy": "randtop", "n": 3, "scores": sc}},
                            base | {"logger": {"policy": "randtop", "n": 2, "scores": sc}}])
    with pytest.raises(InputError, match=r":2: the logger \(spec or scores\) differs from line 1"):
        read_logged(path, policies=policies)
    # a deterministic logger cannot have shown a list other than its own ranking
    path = write(tmp_path, [base | {"shown": ["b", "a"], "logger": {"policy": "deterministic", "scores": sc}}])
    with pytest.raises(InputError, match=r":1: the logging policy gives the shown list probability 0"):
        read_logged(path, policies=policies)


def test_estimated_zero_item_marginal_refuses_only_item_estimators(tmp_path: Path) -> None:
    """A Plackett-Luce logger's Monte Carlo item marginal of 0 is an estimate, not an impossibility: 'a' (score 12)
    is first in both sampled prefixes, so its slot-2 estimate is 0 while the list (b, a) has a positive exact
    probability. The log is read (list and prefix propensities are exact); the estimators that read item
    propensities are refused with the line and what to raise, the others run."""
    import simulations.policies as policies
    from onlineeval.estimators import get_estimator
    from onlineeval.estimators.log_estimates import check_needs

    base = {"query": "q", "clicks": []}
    pl = {"policy": "plackett_luce", "dp_max_states": 0, "item_method": "monte_carlo", "mc_samples": 2,
          "scores": {"a": 12.0, "b": 0.0, "c": 0.0}}
    path = write(tmp_path, [base | {"shown": ["a", "b"], "logger": pl}, base | {"shown": ["b", "a"], "logger": pl}])
    lg = read_logged(path, policies=policies)
    assert lg.data.p_item is None and "p_item" not in lg.forms
    assert lg.data.p_list is not None and lg.data.p_prefix is not None and lg.item_refusal is not None
    check_needs(lg, [get_estimator(n) for n in ("ips", "snips", "rips")])
    with pytest.raises(InputError, match=r":2: estimator 'iips' needs item propensities, withheld: the logging "
                                         r"policy's item propensity of a shown document is 0 in its Monte Carlo "
                                         r"estimate .* drop the logger's item_method: monte_carlo \(the default "
                                         r"quadrature is exact\) or raise its mc_samples"):
        check_needs(lg, [get_estimator("ips"), get_estimator("iips")])
    # an exact item marginal (the dynamic programme) is positive: nothing is withheld
    path = write(tmp_path, [base | {"shown": ["b", "a"], "logger": pl | {"dp_max_states": 10 ** 6}}], "exact.jsonl")
    exact = read_logged(path, policies=policies)
    assert exact.item_refusal is None and exact.data.p_item is not None and float(exact.data.p_item[0, 1]) > 0
    # the default above dp_max_states, the exponential race's quadrature, is exact too: the same value
    quad = {k: v for k, v in pl.items() if k not in ("item_method", "mc_samples")}
    path = write(tmp_path, [base | {"shown": ["b", "a"], "logger": quad}], "quadrature.jsonl")
    by_quad = read_logged(path, policies=policies)
    assert by_quad.item_refusal is None and by_quad.data.p_item is not None
    np.testing.assert_allclose(by_quad.data.p_item, exact.data.p_item, rtol=1e-11)


@pytest.mark.parametrize("text", ['{"a": 1, "b": [1, 2]}', "\ufeff{}", "{bad", "[1, 2]", '"x"', " 3 ", "{} x",
                                  '{"n": ' + "9" * 5000 + "}", "[" * 100_000 + "]" * 100_000])
def test_loads_unique_is_json_loads(text: str) -> None:
    """The line readers' decoder (one shared JSONDecoder, not one built per call) gives json.loads's objects and
    errors, a byte-order mark and the integer-digit limit included."""
    import json

    from onlineeval.io.logged_json import loads_unique

    def outcome(f: Any) -> Any:
        try:
            return ("value", f(text))
        except (ValueError, RecursionError) as exc:
            return (type(exc).__name__, str(exc))

    assert outcome(loads_unique) == outcome(json.loads)


def test_loads_unique_refuses_a_key_twice() -> None:
    from onlineeval.io.logged_json import DuplicateKey, loads_unique

    with pytest.raises(DuplicateKey) as exc:
        loads_unique('{"a": {"b": 1, "b": 2}}')
    assert exc.value.text().startswith("key 'b' appears twice in one object")
