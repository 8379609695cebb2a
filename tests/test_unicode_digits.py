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
