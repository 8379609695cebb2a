"""Text that str.isdigit calls a digit but int() refuses ("²", superscript two) gave tracebacks where a number was
read from text checked by isdigit: a LETOR feature index (the file's largest feature, for a message), an adaptive
IPS behaviour's user type, `local:N` and a scheduler port, the id a fitted model's id list fails on. Now a clear error
naming the value, or the value read as text (not a numbered feature)."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.errors import ConfigError, InputError


def test_a_letor_feature_key_that_is_a_superscript_is_not_a_numbered_feature(tmp_path):
    from onlineeval.io.letor import read_letor

    path = tmp_path / "sup.letor"
    path.write_text("1 qid:1 1:0.5 \u00b2:0.3 # d1\n0 qid:1 1:0.2 # d2\n", encoding="utf-8")
    assert read_letor(path, score_feature=1).run["score"].tolist() == [0.5, 0.2]
    with pytest.raises(InputError, match=r"score feature 3 occurs on no line \(the file's features go up to 1\)"):
        read_letor(path, score_feature=3)


def test_an_adaptive_ips_user_type_that_is_a_superscript_is_refused():
    from onlineeval.estimators.adaptive_ips import AdaptiveIPS

    with pytest.raises(ConfigError, match="user types must be integers"):
        AdaptiveIPS(behaviours={"\u00b2": "cascade"})
    assert AdaptiveIPS(behaviours={" 2 ": "cascade"}).behaviours  # a number as text still reads


def test_local_workers_and_a_port_that_are_superscripts_are_refused():
    from simulations.executor_check import _tcp_host_port, parse_scheduler

    with pytest.raises(ConfigError, match="'local:N' needs a whole number"):
        parse_scheduler("local:\u00b2")
    assert parse_scheduler("local:2") == ("local", 2)
    assert _tcp_host_port("tcp://host:\u00b2") is None  # (Dask's own connection then reports it)
    assert _tcp_host_port("tcp://host:8786") == ("host", 8786)


def test_the_id_a_list_of_integer_ids_fails_on_is_named():
    from clickmodels.estimation.base import _to_int_ids

    for ids in (["\u00b2"], ["1", "\u00b2"], ["1", "x"]):
        with pytest.raises(InputError, match=f"query id '{ids[-1]}' is not an integer"):
            _to_int_ids(np.array(ids), None, "query")
    assert _to_int_ids(np.array(["3", " 1"]), None, "query").tolist() == [3, 1]


@pytest.mark.parametrize("odd", ["1_0", "\uff11", "\u0661", "0x10"])
def test_numbers_python_reads_but_trec_eval_does_not_are_refused_in_every_numeric_field(tmp_path, odd):
    # Python's float() and int() read 1_0 as 10 and digits of other scripts (fullwidth 1, Arabic-Indic 1) as
    # numbers; trec_eval's atof reads "1_0" as 1 and "\uff11" as 0, so a run or score file scored silently otherwise
    from onlineeval.cli.power import moments_from_csv
    from onlineeval.io.letor import read_letor, read_scores
    from onlineeval.io.trec import read_ranking, read_run
    from simulations.world import _read_frequencies

    def refused(match, fn, *args, line=2):
        with pytest.raises(InputError, match=match) as info:
            fn(*args)
        assert info.value.line == line, info.value

    run = tmp_path / "r.run"
    run.write_text(f"1 Q0 a 1 2.0 x\n1 Q0 b 2 {odd} x\n", encoding="utf-8")
    refused(f"score must be a number, got {odd!r}", read_run, run)
    three = tmp_path / "r.tsv"
    three.write_text(f"1 a 2.0\n1 b {odd}\n", encoding="utf-8")
    refused(f"score must be a number, got {odd!r}", read_ranking, three)
    letor = tmp_path / "l.txt"
    letor.write_text("1 qid:1 1:0.5 # a\n0 qid:1 1:0.2 # b\n", encoding="utf-8")
    scores = tmp_path / "s.txt"
    scores.write_text(f"0.5\n{odd}\n", encoding="utf-8")
    refused(f"score must be a number, got {odd!r}", read_scores, scores, 2)
    bad_feature = tmp_path / "f.txt"
    bad_feature.write_text(f"1 qid:1 1:0.5 # a\n0 qid:1 1:{odd} # b\n", encoding="utf-8")
    refused("feature value must be a number", read_letor, bad_feature, None, 1)
    bad_label = tmp_path / "g.txt"
    bad_label.write_text(f"1 qid:1 1:0.5 # a\n{odd} qid:1 1:0.2 # b\n", encoding="utf-8")
    refused(f"label must be an integer grade, got {odd!r}", read_letor, bad_label)
    groups = tmp_path / "q.query"
    groups.write_text(f"1\n{odd}\n", encoding="utf-8")
    plain = tmp_path / "p.txt"
    plain.write_text("1 1:0.5 # a\n0 1:0.2 # b\n", encoding="utf-8")
    refused(f"group size must be an integer, got {odd!r}", read_letor, plain, None, None, groups)
    users = tmp_path / "u.csv"
    users.write_text(f"clicks,queries\n1,2\n{odd},3\n3,4\n", encoding="utf-8")
    refused("expected numbers", moments_from_csv, users, "clicks", "queries", line=3)
    freq = tmp_path / "freq.txt"
    freq.write_text(f"1 5\n2 {odd}\n", encoding="utf-8")
    refused(f"count {odd!r} is not a number", _read_frequencies, freq, {"1": 0, "2": 1})


def test_plain_spellings_of_numbers_still_read(tmp_path):
    from onlineeval.cli.power import moments_from_csv
    from onlineeval.io.letor import read_scores
    from onlineeval.io.text import plain_float, plain_int

    for text, value in (("+.5", 0.5), ("1.", 1.0), ("-2E+3", -2000.0), (" 3 ", 3.0), ("1e-3", 0.001)):
        assert plain_float(text) == value
    assert plain_float("inf") == float("inf") and plain_float("NaN") != plain_float("NaN")
    assert plain_int("+07") == 7 and plain_int("1.0") is None
    from onlineeval.io.text import plain_whole

    assert [plain_whole(t) for t in ("3", "-2", "1.0", "1e2", "2.", "1.5", "nan", "inf", "1_0", "\uff11")] == [
        3, -2, 1, 100, 2, None, None, None, None, None]
    scores = tmp_path / "s.txt"
    scores.write_text("+.5\n1.\n-2E+3\n", encoding="utf-8")
    assert read_scores(scores, 3).tolist() == [0.5, 1.0, -2000.0]
    users = tmp_path / "u.csv"
    users.write_text("clicks,queries\n 1 ,2\n3,4.0\n", encoding="utf-8")
    assert moments_from_csv(users, "clicks", "queries")[-1] == 2
