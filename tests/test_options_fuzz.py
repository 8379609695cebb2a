"""Every option of every registered component, and every key of the bundled simulate configs, given an odd value:
accepted, or refused by a ConfigError / InputError naming it; never a TypeError, OverflowError or NumPy error from
inside. Found by this pass (each a traceback before): an integer beyond float64's range (10**400) as a click model's
number, a metric's parameter, an interleaver's or estimator's number or a mixture component's weight; a list or a
mapping as a click model's preset or a logging policy's scores; a synthetic collection of 10**30 candidates with a
counterfactual design (its logger was checked on a stand-in table of that width before the memory check)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import clickmodels
from onlineeval.errors import ConfigError, InputError
from simulations.config import config_from_mapping

REPO = Path(__file__).resolve().parents[1]
ODD: list[Any] = [None, -1, 0, "x", [], {}, 1e308, True, 0.5, float("nan"), float("inf"), "", [1], {"a": 1},
                  10**30, 10**400, -(10**400), ["a"], [[1]], 2**63]


def _refused_clearly(call: Any) -> None:
    try:
        call()
    except (ConfigError, InputError):
        pass


def _fields(obj: Any) -> list[str]:
    cls = obj if isinstance(obj, type) else type(obj)
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    return [p for p in inspect.signature(cls).parameters if p not in ("self", "args", "kwargs")]


def _interleavers() -> list[str]:
    from onlineeval.interleaving import available_interleavers

    return sorted(available_interleavers())


def _estimators() -> list[str]:
    from onlineeval.estimators import available_estimators

    return sorted(available_estimators())


@pytest.mark.parametrize("method", _interleavers())
def test_interleaver_options(method: str) -> None:
    from onlineeval.interleaving import get_interleaver

    for key in [*_fields(get_interleaver(method)), "bogus"]:
        for value in ODD:
            _refused_clearly(lambda: get_interleaver(method, **{key: value}))


@pytest.mark.parametrize("name", _estimators())
def test_estimator_options(name: str) -> None:
    from onlineeval.estimators import estimator_class, get_estimator

    for key in [*_fields(estimator_class(name)), "bogus"]:
        for value in ODD:
            _refused_clearly(lambda: get_estimator(name, **{key: value}))


POLICY_KEYS = ["ranker", "epsilon", "n", "temperature", "k", "scores", "swap", "rank", "components", "weight", "seed",
               "samples", "position", "positions", "pair_max_states", "bogus"]


def _policies() -> list[str]:
    from simulations.policies import available_policies

    return sorted(available_policies())


@pytest.mark.parametrize("policy", _policies())
def test_logging_policy_options(policy: str) -> None:
    from simulations.policies import build_policy

    rng = np.random.default_rng(0)
    scores = {"A": rng.random((3, 10)).astype(np.float32), "B": rng.random((3, 10)).astype(np.float32)}
    for key in POLICY_KEYS:
        for value in ODD:
            spec: dict[str, Any] = {"policy": policy, "ranker": "A", key: value}
            if policy == "mixture" and key != "components":
                spec["components"] = [{"policy": "plackett_luce"}]
            _refused_clearly(lambda: build_policy(spec, scores, 5))
        if policy == "mixture":  # a component's weight
            for value in ODD:
                spec = {"policy": "mixture", "ranker": "A",
                        "components": [{"policy": "plackett_luce", "weight": value}, {"policy": "randtop", "n": 5}]}
                _refused_clearly(lambda: build_policy(spec, scores, 5))


CLICK_KEYS = ["preset", "click", "stop", "examination", "eta", "noise", "grades", "p", "gamma", "alpha", "sigma",
              "continuation", "fitted", "attract", "satisfy"]


@pytest.mark.parametrize("name", sorted(clickmodels.available()))
def test_click_model_options(name: str) -> None:
    example = getattr(clickmodels.model_class(name), "example_spec", None)
    for base in [{"name": name}] + ([dict(example)] if isinstance(example, dict) else []):
        for key in sorted(set(CLICK_KEYS) | set(base) - {"name"}):
            for value in ODD:
                _refused_clearly(lambda: clickmodels.build({**base, key: value}))


def test_metric_parameters() -> None:
    from onlineeval.metrics import parse_metric

    huge = "1" + "0" * 400
    for text in (f"RBP(p={huge})", f"ERR(gmax={huge})@5", f"nDCG@{huge}", "RBP(p=1e999)", f"P(rel={huge})@5"):
        _refused_clearly(lambda: parse_metric(text))


def _leaves(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _leaves(value, (*path, i))
    if path:
        yield path


@pytest.mark.parametrize("config", sorted(p.name for p in (REPO / "configs").glob("*.yaml")))
def test_every_key_of_the_bundled_configs(config: str) -> None:
    """(A sweep's ``output: 0`` or ``false`` fell back to results/sweep silently: now refused too.)"""
    from simulations.sweep_config import sweep_from_mapping

    base = yaml.safe_load((REPO / "configs" / config).read_text(encoding="utf-8"))
    load = sweep_from_mapping if "base" in base else config_from_mapping
    tried = 0
    for path in sorted(set(_leaves(base)), key=repr):
        for value in ODD:
            mapping = copy.deepcopy(base)
            node = mapping
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            _refused_clearly(lambda: load(mapping))
            tried += 1
    assert tried > 200


@pytest.mark.parametrize(("override", "key"), [({"collection": {"n_queries": 10**400}}, "collection.n_queries"),
                                               ({"users": {"population": 10**400}}, "users.population"),
                                               ({"collection": {"candidates": 10**30}}, "collection.n_queries")])
def test_sizes_beyond_float64_are_refused_by_the_memory_check(override: dict[str, Any], key: str) -> None:
    """The sizes are unbounded integers: the memory estimate counts one beyond float64's range as infinite (it was an
    OverflowError) and refuses it like any config that cannot fit, naming the size."""
    with pytest.raises(ConfigError) as err:
        config_from_mapping(override)
    assert str(err.value).startswith(f"{key}: this config needs about ")
    assert "of memory" in err.value.message


@pytest.mark.parametrize("value", [0, False, -1, [1]])
def test_a_sweep_output_that_is_not_text_is_refused(value: Any) -> None:
    from simulations.sweep_config import sweep_from_mapping

    base = yaml.safe_load((REPO / "configs" / "sweep.yaml").read_text(encoding="utf-8"))
    with pytest.raises(ConfigError, match=r"^output: must be a folder path \(text\), got "):
        sweep_from_mapping({**base, "output": value})
