"""`onlineeval estimate`'s refusals: bad log lines, runs, options and estimator names, and estimators whose
propensities or logger the log lacks, each as one line (with file:line where there is one) and exit 2; unseen
documents never logged (a log with propensities: a warning) or that the logger cannot show (refused, or with
--allow-unseen counted as support violations)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from onlineeval.estimators import available_estimators, get_estimator

from estimate_cli_world import (  # noqa: F401  (world: the module-scoped fixture)
    invoke,
    json_out,
    one_line_error,
    world,
    write_log,
    write_run,
)


def test_bad_log_lines_exit_2_with_file_and_line(world: dict[str, Any], tmp_path: Path) -> None:
    good = world["log"].read_text().splitlines()[:2]
    cases = [
        ('{"query": "q1", "shown": ["a"]', "malformed JSON"),
        ('{"query": "q0", "clicks": [], "propensities": {"list": 0.5}}', "missing key 'shown'"),
        ('{"query": "q0", "shown": ["a", 1], "clicks": [], "propensities": {"list": 0.5}}', "list of document id"),
        ('{"query": "q0", "shown": ["a", "a"], "clicks": [], "propensities": {"list": 0.5}}', "shown twice"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": ["x"], '
         '"propensities": {"list": 0.0167, "prefix": [0.2, 0.05, 0.0167], "item": [0.2, 0.2, 0.2]}}'), "not shown"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": [], '
         '"propensities": {"list": 0.0, "prefix": [0.2, 0.05, 0.0167], "item": [0.2, 0.2, 0.2]}}'), "(0, 1]"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": [], '
         '"propensities": {"list": 0.01, "prefix": [0.2, 0.05, 0.0167], "item": [0.2, 0.2, 0.2]}}'), "last prefix"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": [], '
         '"propensities": {"list": 0.0167, "prefix": [0.2, 0.5, 0.0167], "item": [0.2, 0.2, 0.2]}}'), "non-increasing"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": [], '
         '"propensities": {"list": 0.0167, "prefix": [0.2, 0.05], "item": [0.2, 0.2, 0.2]}}'), "has 2 values"),
        ('{"query": "q0", "shown": ["a"], "clicks": [], "logger": {"policy": "nope", "scores": {"a": 1}}}',
         "a logger but line 1"),
    ]
    for bad, needle in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join([*good, bad]) + "\n", encoding="utf-8")
        one_line_error(invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips"),
                       f"{path}:3: ", needle)
    path.write_bytes(("\n".join(good) + "\n").encode() + b'{"query": "\xe9"}\n')
    one_line_error(invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips"),
                   f"{path}:3: not valid UTF-8")
    path.write_text("\n\n")
    one_line_error(invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips"),
                   f"{path}: the log is empty")
    one_line_error(invoke("--log", str(tmp_path / "missing.jsonl"), "--target", str(world["B"]), "--estimator", "ips"),
                   "missing.jsonl")
    path.write_text('{"query": "q0", "shown": ["a"], "clicks": [], "logger": {"policy": "nope", "scores": {"a": 1}}}\n')
    one_line_error(invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips"),
                   f"{path}:1: unknown logging policy 'nope'; allowed: ")


def test_run_errors(world: dict[str, Any]) -> None:
    tmp = world["tmp"]
    other = write_run(tmp / "O.run", {9: [0, 1, 2]}, "O")
    one_line_error(invoke("--log", str(world["log"]), "--target", str(other), "--estimator", "ips"),
                   f"{other}: no query in common with the log")
    bad = tmp / "bad.run"
    bad.write_text("q0 Q0 q0d1 1 3.0 X\nq0 Q0 q0d2 2 abc X\n")
    one_line_error(invoke("--log", str(world["log"]), "--target", str(bad), "--estimator", "ips"), f"{bad}:2: ")


def test_option_errors(world: dict[str, Any]) -> None:
    base = ["--log", str(world["log"]), "--target", str(world["B"])]
    allowed = ", ".join(available_estimators())
    one_line_error(invoke(*base, "--estimator", "ips,nope"), f"--estimator: must be one of {allowed}; got 'nope'")
    one_line_error(invoke(*base, "--estimator", "ips,ips"), "named twice")
    one_line_error(invoke(*base, "--estimator", "ips", "--metric", "ndcg"),
                   "--metric: must be one of clicks_per_query, "
                   "reciprocal_rank, abandonment or utility:<metric> (clicks weighted by an offline metric's C/W/L "
                   "weights, e.g. utility:RBP(p=0.8), utility:nDCG@10); got 'ndcg'")
    one_line_error(invoke(*base, "--estimator", "ips", "--metric", "utility:RR"), "--metric: utility:RR: RR's C/W/L "
                   "weights depend on the grades")
    one_line_error(invoke(*base, "--estimator", "ips", "--bootstrap", "50"), "--bootstrap: must be 0")
    one_line_error(invoke(*base, "--estimator", "ips", "--alpha", "1.5"), "--alpha: must be in (0, 1)")
    one_line_error(invoke(*base, "--estimator", "ips", "--format", "xml"), "--format: must be one of table, json")
    one_line_error(invoke(*base, "--estimator", "ips", "--ties", "optimistic"), "--ties: must be one of")
    one_line_error(invoke(*base, "--estimator", "ips", "--option", "ips"), "expected estimator.key=value")
    one_line_error(invoke(*base, "--estimator", "ips", "--option", "snips.x=1"), "'snips' is not one of the estimators")
    one_line_error(invoke(*base, "--estimator", "ips", "--option", "ips.bogus=1"),
                   "--option ips.bogus: unknown option")
    # the baseline given as a target too (it said "--target: the same run file is given twice"), also spelled otherwise
    for spelling in (str(world["B"]), str(world["B"].parent / "." / world["B"].name)):
        one_line_error(invoke(*base, "--estimator", "ips", "--baseline", spelling),
                       f"--baseline: {Path(spelling)} is also given as a --target: the baseline is compared with the "
                       "targets, so give it once, as --baseline")
    # one run file twice as a target, spelled otherwise (B.run and ./B.run): estimated twice before, named apart
    one_line_error(invoke(*base, "--target", str(world["B"].parent / "." / world["B"].name), "--estimator", "ips"),
                   "--target: the same run file is given twice")
    # one option twice: the later one would silently win
    one_line_error(invoke(*base, "--estimator", "clipped_ips", "--option", "clipped_ips.cap=5", "--option",
                          "clipped_ips.cap=10"),
                   "--option: 'clipped_ips.cap' is given twice (5 and 10); give each option once")


def test_option_errors_name_what_the_user_typed(world: dict[str, Any]) -> None:
    base = ["--log", str(world["log"]), "--target", str(world["B"])]
    one_line_error(invoke(*base, "--estimator", "clipped_ips", "--option", "clipped_ips.cap=-1"),
                   "error: --option clipped_ips.cap: must be")
    # the library's own message keeps its key
    from onlineeval.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        get_estimator("clipped_ips", cap=-1)
    assert str(info.value).startswith("estimator.cap: must be")


@pytest.mark.parametrize("text", ["ips,,snips", ",ips", "ips,", "ips, ,snips"])
def test_empty_estimator_names_are_refused(world: dict[str, Any], text: str) -> None:
    one_line_error(invoke("--log", str(world["log"]), "--target", str(world["B"]), "--estimator", text),
                   f"--estimator: {text!r} has an empty estimator name")


def test_estimator_needing_missing_propensities(world: dict[str, Any]) -> None:
    log = write_log(world["sim"], world["tmp"] / "item_only.jsonl", forms=("item",))
    err = one_line_error(invoke("--log", str(log), "--target", str(world["B"]), "--estimator", "snips,ips"),
                         f"{log}: estimator 'snips' needs propensities.list; the log carries propensities.item; "
                         "estimators that could run on it: ")
    runnable = err.rsplit("could run on it: ", 1)[1].split(", ")
    from onlineeval.estimators import estimator_class

    # the pseudoinverse reads the logging policy itself, which the log does not carry
    assert runnable == [e for e in available_estimators() if set(estimator_class(e).needs) <= {"p_item"}
                        and e != "pseudoinverse"]
    assert "ips" not in runnable and "snips" not in runnable


def test_pseudoinverse_needs_the_logger_up_front(world: dict[str, Any]) -> None:
    """Without a logger in the log the pseudoinverse (and pbm_ips with click_propensity=logger) stops before
    anything runs, exit 2, naming what is missing and what could run; no list of runnable estimators names it."""
    sim, tmp = world["sim"], world["tmp"]
    listonly = write_log(sim, tmp / "listonly.jsonl", forms=("list",))
    err = one_line_error(invoke("--log", str(listonly), "--target", str(world["B"]), "--estimator",
                                "ips,pseudoinverse"),
                         f"{listonly}: estimator 'pseudoinverse' needs the logging policy (a 'logger' on every line",
                         "pair_marginals", "the log carries propensities.list; estimators that could run on it: ")
    runnable = err.rsplit("could run on it: ", 1)[1].split(", ")
    assert "ips" in runnable and "pseudoinverse" not in runnable and "rips" not in runnable
    one_line_error(invoke("--log", str(listonly), "--target", str(world["B"]), "--estimator", "pbm_ips",
                          "--option", "pbm_ips.click_propensity=logger"),
                   "estimator 'pbm_ips' needs the logging policy", "item_position_marginals")
    err = one_line_error(invoke("--log", str(listonly), "--target", str(world["B"]), "--estimator", "rips"),
                         "estimator 'rips' needs propensities.prefix; the log carries propensities.list; ")
    assert "pseudoinverse" not in err and "p_prefix" not in err and "p_list" not in err
    logged = write_log(sim, tmp / "withlogger.jsonl", logger=True)
    doc = json_out("--log", str(logged), "--target", str(world["B"]), "--estimator", "pseudoinverse")
    assert doc["results"][0]["estimate"] is not None


def test_unseen_documents_are_never_logged_or_support_violations(world: dict[str, Any]) -> None:
    """Review 3, F-B: with written propensities a document the log never shows for a query is 'never logged' (weight
    0 there, a warning, no claim of bias, not a support violation), with or without --allow-unseen; with a 'logger'
    it is one the policy cannot show: refused with the run's file:line, and with --allow-unseen counted as a support
    violation of the logging policy."""
    sim, tmp = world["sim"], world["tmp"]
    lists = {q: list(world["best"][q]) for q in range(4)}
    run = tmp / "U.run"
    write_run(run, lists, "U")
    text = run.read_text().splitlines()
    # query q2 ranks a document the log never shows for it (line 12 = q2's 2nd document)
    assert text[11].startswith("q2 Q0 ")
    text[11] = text[11].replace(text[11].split()[2], "zz")
    run.write_text("\n".join(text) + "\n")
    n_q2 = int((sim.query == 2).sum())
    for extra in ((), ("--allow-unseen",)):
        doc = json_out("--log", str(world["log"]), "--target", str(run), "--estimator", "ips,snips", *extra)
        for r in doc["results"]:
            assert r["diagnostics"]["support_violations"] is None and r["diagnostics"]["never_logged"] == n_q2
            assert not any("support violated" in w or "biased" in w for w in r["warnings"])
        (w,) = [w for w in doc["warnings"] if w.startswith("U: ranks 1 documents never logged for their query")]
        assert f"(1 queries, {n_q2} impressions)" in w and "the weights there are 0" in w
    table = invoke("--log", str(world["log"]), "--target", str(run), "--estimator", "ips")
    assert table.exit_code == 0 and "never logged" in table.stdout and f"{n_q2}/3000" in table.stdout
    # the same log given by its logger (randtop over the 5 candidates): 'zz' is not a candidate, probability 0
    logged = write_log(sim, tmp / "logger_unseen.jsonl", logger=True)
    err = one_line_error(invoke("--log", str(logged), "--target", str(run), "--estimator", "ips"),
                         f"{run}:12: the target ranks document 'zz' at rank 2 for query 'q2', which the log's "
                         "logging policy cannot show", "--allow-unseen")
    assert "(not one of its candidates for that query; 1 such slots in 1 queries" in err
    doc = json_out("--log", str(logged), "--target", str(run), "--estimator", "ips,snips", "--allow-unseen")
    for r in doc["results"]:
        assert r["diagnostics"]["support_violations"] == n_q2 and r["diagnostics"]["never_logged"] is None
        assert any(w.startswith(f"support violated on {n_q2} of 3000 impressions") for w in r["warnings"])
    assert any("ranks 1 documents the logging policy cannot show" in w and f"{n_q2} impressions" in w
               for w in doc["warnings"])
