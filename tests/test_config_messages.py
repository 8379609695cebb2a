"""Config errors from pydantic's validation are in the tool's words: the key path, then lower-case 'must be'
with the allowed values or keys and the value given, never pydantic's 'Input should be' or a class name."""

from __future__ import annotations

import re

import pytest

from onlineeval.errors import ConfigError
from simulations.config import config_from_mapping


@pytest.mark.parametrize(
    ("data", "line"),
    [
        # review 3.7's example: was "traffic: Input should be a valid dictionary or instance of TrafficConfig"
        ({"traffic": 5}, "traffic: must be a mapping of keys (keys: batch_hours, days, diurnal, queries_per_day, "
                         "weekly), got 5"),
        ({"rankers": {"A": 3}}, "rankers.A: must be a mapping of keys (keys: noise), got 3"),
        ({"collection": 3}, "collection: must be a mapping of keys, got 3"),
        ({"traffic": {"batch_hours": 5}}, "traffic.batch_hours: must be one of 1, 2, 3, 4, 6, 8, 12 or 24, got 5"),
        ({"users": {"activity": {"distribution": "x"}}}, "users.activity.distribution: must be 'lognormal', got 'x'"),
        ({"traffic": {"days": 0}}, "traffic.days: must be at least 1, got 0"),
        ({"users": {"population": -1}}, "users.population: must be greater than 0, got -1"),
        ({"traffic": {"days": 1.5}}, "traffic.days: must be an integer, got 1.5"),
        # 1e4 in a YAML file or --set is the number 10000.0: the message says how to write it
        ({"traffic": {"queries_per_day": 1e4}}, "traffic.queries_per_day: must be an integer, got 10000.0 (write "
                                                "10000: an integer key takes a whole number without a point or "
                                                "exponent)"),
        ({"users": {"types": [{"name": "a", "share": "x"}]}},
         "users.types[0].share: must be a number, got 'x' (and 1 more problem)"),
        ({"analysis": {"aa": "maybe"}}, "analysis.aa: must be true or false, got 'maybe'"),
        ({"designs": {"a": 1}}, "designs: must be a list, got {'a': 1}"),
        ({"output": 3}, "output: must be a path (text), got 3"),
        ({"collection": {"type": "zz"}}, "collection.type: must be one of 'synthetic', 'trec', got 'zz'"),
    ],
)  # fmt: skip
def test_pydantic_errors_in_the_tools_words(data: dict, line: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(data, source="c.yaml")
    text = str(info.value)
    assert text == f"c.yaml: {line}"
    message = text.split(": ", 2)[2]
    assert message[:1].islower()
    assert not re.search(r"[Ii]nput should|Config\b|Spec\b|Options\b|<class", message)
