"""Every config key of the README's table, written in a YAML config as the table spells it with its documented
default, loads and gives that default: `analysis: {null: true}` (the table's analysis.null) was read with YAML's null
as the key and failed with "analysis.None: keys should be strings"."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from onlineeval.errors import ConfigError
from simulations.config import config_from_mapping
from simulations.yaml_safe import load_yaml_text

README = Path(__file__).resolve().parents[1] / "README.md"
#: a table row with one plain key path and one default in backticks: | `a.b` | `value` | ...
ROW = re.compile(r"^\| `([a-z_]+(?:\.[a-z_]+)*)` \| `([^`|]+)` \|", re.M)


def _rows() -> list[tuple[str, str]]:
    start = README.read_text(encoding="utf-8").index("| `seed` |")
    table = README.read_text(encoding="utf-8")[start:].split("\n\n", 1)[0]
    return ROW.findall(table)


def test_the_table_is_read() -> None:
    keys = [k for k, _ in _rows()]
    assert {"seed", "replicates", "analysis.null", "analysis.aa", "traffic.days", "users.click_model"} <= set(keys)


@pytest.mark.parametrize(("key", "default"), _rows())
def test_each_key_loads_from_yaml_as_the_table_writes_it(key: str, default: str) -> None:
    parts = key.split(".")
    text = "".join(f"{'  ' * i}{p}:\n" for i, p in enumerate(parts[:-1]))
    text += f"{'  ' * (len(parts) - 1)}{parts[-1]}: {default}\n"
    mapping = load_yaml_text(text, "t.yaml")
    node: Any = mapping
    for p in parts:
        assert isinstance(node, dict) and p in node, (text, mapping)
        node = node[p]
    if key == "collection.ties":  # a trec collection's option: the synthetic default refuses it, naming the key
        with pytest.raises(ConfigError, match="t.yaml: collection.ties: unknown key"):
            config_from_mapping(mapping, source="t.yaml")
        return
    config = config_from_mapping(mapping, source="t.yaml")
    value: Any = config
    for p in parts:
        value = getattr(value, p)
    expected = yaml.safe_load(default)
    if key == "output":
        assert Path(value).name == expected
    elif isinstance(expected, dict):
        assert dict(value) == expected
    else:  # the config keeps YAML's float: equal exactly
        assert value == expected and type(value) is type(expected), (value, expected)
