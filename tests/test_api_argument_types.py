"""Arguments of the wrong type to the Python API are clear errors naming the argument, not tracebacks from inside
(found by feeding odd values to every argument): fit_clicks' model, estimate's estimators."""

from __future__ import annotations

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
