"""Arguments of the wrong type to the Python API are clear errors naming the argument, not tracebacks from inside
(found by feeding odd values to every argument): fit_clicks' model, estimate's estimators."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import onlineeval
from onlineeval.errors import ConfigError

SESSIONS = pd.DataFrame({"session": ["s1", "s2"], "query": ["q", "q"], "docs": [["a", "b"]] * 2,
                         "clicks": [["a"], []]})
LOG = pd.DataFrame({"query": ["q1", "q1"], "shown": [["a", "b"], ["b", "a"]], "clicks": [["a"], []],
                    "p_list": [0.5, 0.5], "p_prefix": [[0.5, 0.5]] * 2})


@pytest.mark.parametrize("model", [None, 3, ["pbm"]])
def test_a_model_that_is_not_text_is_refused_naming_it(model):
    with pytest.raises(ConfigError, match=r"must be a click-model name \(text\)") as exc:
        onlineeval.fit_clicks(SESSIONS, model)
    assert exc.value.key_path == ("model",)


@pytest.mark.parametrize("estimators", [None, 3, ["ips", 3]])
def test_estimators_that_are_not_names_are_refused_naming_them(estimators):
    with pytest.raises(ConfigError, match="must be estimator names") as exc:
        onlineeval.estimate(LOG, {"B": {"q1": ["a", "b"]}}, estimators)
    assert exc.value.key_path == ("estimators",)


def test_names_as_a_string_a_list_or_a_tuple_give_the_same_estimates():
    target = {"B": {"q1": ["a", "b"]}}
    results = [onlineeval.estimate(LOG, target, e).results for e in ("ips,snips", ["ips", "snips"], ("ips", "snips"))]
    for other in results[1:]:
        pd.testing.assert_frame_equal(other, results[0])


QRELS = pd.DataFrame({"query": ["q1", "q1", "q2", "q2"], "doc": ["a", "b", "a", "b"], "grade": [1, 0, 0, 1]})
RUNS = {name: pd.DataFrame({"query": ["q1", "q1", "q2", "q2"], "doc": ["a", "b", "a", "b"], "score": s})
        for name, s in (("A", [2.0, 1.0, 2.0, 1.0]), ("B", [1.0, 2.0, 1.0, 2.0]))}


@pytest.mark.parametrize(("call", "key"), [
    (lambda: onlineeval.evaluate(QRELS, RUNS, None), "metrics"),
    (lambda: onlineeval.evaluate(QRELS, RUNS, "nDCG@10", seed=-1), "seed"),
    (lambda: onlineeval.evaluate(QRELS, RUNS, "nDCG@10", seed=None), "seed"),
    (lambda: onlineeval.evaluate(QRELS, RUNS, "nDCG@10", bootstrap="x"), "bootstrap"),
    (lambda: onlineeval.evaluate(QRELS, RUNS, "nDCG@10", permutations=0), "permutations"),
    (lambda: onlineeval.evaluate(QRELS, RUNS, "nDCG@10", alpha=None), "alpha"),
    (lambda: onlineeval.estimate(LOG, {"B": {"q1": ["a", "b"]}}, "ips", bootstrap="x"), "bootstrap"),
    (lambda: onlineeval.estimate(LOG, {"B": {"q1": ["a", "b"]}}, "ips", alpha="0.1"), "alpha"),
    (lambda: onlineeval.evaluate_clicks(SESSIONS, None), "models"),
    (lambda: onlineeval.evaluate_clicks(SESSIONS, {}), "models"),
    (lambda: onlineeval.evaluate_clicks(SESSIONS, "rctr", test_fraction=None), "test_fraction"),
    (lambda: onlineeval.evaluate_clicks(SESSIONS, "rctr", seed=-1), "seed"),
    (lambda: onlineeval.fit_clicks(SESSIONS, "pbm", max_iter=""), "max_iter"),
    (lambda: onlineeval.fit_clicks(SESSIONS, "pbm", tol="small"), "tol"),
    (lambda: onlineeval.fit_clicks(SESSIONS, "pbm", method=1), "method"),
    (lambda: onlineeval.sample_clicks(None, [[1, 0]], np.random.default_rng(0)), "model"),
    (lambda: onlineeval.validate("onlineeval.interleaving.team_draft:TeamDraft", ["team_draft"]), "method"),
])
def test_odd_arguments_are_config_errors_naming_the_argument(call, key):
    """None, text for numbers, a negative seed, an empty mapping...: TypeError, KeyError, AttributeError or NumPy's
    ValueError from inside before."""
    with pytest.raises(ConfigError) as exc:
        call()
    assert exc.value.key_path[-1] == key


def test_metric_names_may_be_any_sequence_of_named_things():
    class Measure:  # as ir_measures' measure objects: their text is the name
        def __str__(self) -> str:
            return "nDCG@10"

    a = onlineeval.evaluate(QRELS, RUNS, [Measure(), "AP"])
    b = onlineeval.evaluate(QRELS, RUNS, "nDCG@10,AP")
    assert a.metrics == b.metrics == ["nDCG@10", "AP"]
    assert [a.mean("B", m) for m in a.metrics] == [b.mean("B", m) for m in b.metrics]


CONFIG = {"seed": 1, "replicates": 2, "workers": 1,
          "collection": {"type": "synthetic", "n_queries": 30, "candidates": 8},
          "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.9}}, "users": {"population": 200},
          "traffic": {"days": 2, "queries_per_day": 100}, "designs": [{"name": "ab", "type": "ab"}],
          "analysis": {"aa": False}}


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"workers": ""}, "workers"), ({"workers": -1}, "workers"), ({"workers": True}, "workers"),
    ({"overrides": "traffic.days=3"}, "overrides"), ({"overrides": ["x"]}, "overrides"),
])
def test_simulate_arguments_of_the_wrong_kind_are_refused_before_running(tmp_path, kwargs, key):
    with pytest.raises(ConfigError) as exc:
        onlineeval.simulate(CONFIG, output=tmp_path / "out", **kwargs)
    assert exc.value.key_path == (key,)
    assert not (tmp_path / "out").exists()  # (nothing ran)


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"scores": None}, "scores"), ({"scores": "A.txt"}, "scores"), ({"scores": [1.5]}, "scores"),
    ({"features": None}, "features"), ({"features": "1"}, "features"), ({"preset": []}, "preset"),
])
def test_evaluate_letor_arguments_of_the_wrong_kind_are_refused(tmp_path, kwargs, key):
    letor = tmp_path / "x.letor"
    letor.write_text("1 qid:1 1:0.5 2:0.1 # a\n0 qid:1 1:0.2 2:0.3 # b\n")
    with pytest.raises(ConfigError) as exc:
        onlineeval.evaluate_letor(letor, **({"features": [1]} | kwargs))
    assert exc.value.key_path == (key,)
    assert onlineeval.evaluate_letor(letor, features=[1, 2]).metrics  # (the same call, well-formed, reads)


def test_an_empty_output_path_is_refused_everywhere(tmp_path, monkeypatch):
    """An empty output (Path("") is the current folder) in a config, `--output ''` of simulate and sweep, a sweep
    file's `output: ''` and the API's output="" wrote the results into the current folder (the sweep file's: the
    default folder, silently): refused naming where it was given."""
    import yaml
    from typer.testing import CliRunner

    from onlineeval.cli import app

    monkeypatch.chdir(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**CONFIG, "output": ""}))
    runner = CliRunner()
    result = runner.invoke(app, ["simulate", "--config", str(config)])
    assert result.exit_code != 0 and "output: an empty path would write the results into the current folder" in \
        result.output
    config.write_text(yaml.safe_dump({**CONFIG, "output": "out"}))
    result = runner.invoke(app, ["simulate", "--config", str(config), "--output", " "])
    assert result.exit_code != 0 and "--output: an empty path" in result.output
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"base: {config}\ngrid: {{seed: [1, 2]}}\nreplicates: 2\n")
    result = runner.invoke(app, ["sweep", "--config", str(sweep), "--output", ""])
    assert result.exit_code != 0 and "--output: an empty path" in result.output
    sweep.write_text(f"base: {config}\ngrid: {{seed: [1, 2]}}\nreplicates: 2\noutput: ''\n")
    result = runner.invoke(app, ["sweep", "--config", str(sweep)])
    assert result.exit_code != 0 and "output: an empty path" in result.output
    for run in (lambda: onlineeval.simulate(CONFIG, output=""), lambda: onlineeval.sweep(str(sweep), output=" ")):
        with pytest.raises(ConfigError, match="an empty path would write"):
            run()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "s.yaml"]  # nothing written
