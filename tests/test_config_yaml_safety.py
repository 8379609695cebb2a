"""Config files that used to end in a traceback, an out-of-memory or a silent surprise:
each gives one ConfigError naming the file (and line), never echoing a large input."""

from __future__ import annotations

from pathlib import Path

import pytest

from onlineeval.errors import ConfigError
from simulations.config import load_config
from simulations.yaml_safe import MAX_DEPTH, load_yaml

BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['x'] * 9)}]\n"
    for prev, name in zip(["", "a", "b", "c", "d", "e", "f", "g"], "abcdefgh")
)


def _write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "c.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_alias_bomb_is_refused_quickly_with_a_short_message(tmp_path: Path) -> None:
    assert len(BOMB) < 600  # expands to 9**8 = 43 million values
    with pytest.raises(ConfigError, match="alias") as info:
        load_config(_write(tmp_path, BOMB))
    assert len(str(info.value)) < 300


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"nested more than {MAX_DEPTH} levels") as info:
        load_config(_write(tmp_path, "seed: " + "[" * 5000 + "]" * 5000 + "\n"))
    assert str(info.value).startswith(f"{tmp_path / 'c.yaml'}:1:")


def test_duplicate_keys_are_refused_with_both_lines(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"c.yaml:3: duplicate key 'seed' \(first on line 1\)"):
        load_config(_write(tmp_path, "seed: 1\nreplicates: 2\nseed: 3\n"))


def test_non_utf8_bytes_name_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"c.yaml:2: not UTF-8 text \(byte 0xe9\)"):
        load_config(_write(tmp_path, b"seed: 1\noutput: caf\xe9\n"))


def test_a_bom_and_ordinary_aliases_are_fine(tmp_path: Path) -> None:
    data = load_yaml(_write(tmp_path, "\ufeffseed: 1\nx: &v {a: 1}\ny: *v\n"))
    assert data == {"seed": 1, "x": {"a": 1}, "y": {"a": 1}}


def test_large_wrong_value_is_echoed_as_a_short_excerpt(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, "seed: [" + ", ".join(["1"] * 20000) + "]\n"))
    assert str(info.value).startswith(f"{tmp_path / 'c.yaml'}: seed:")
    assert len(str(info.value)) < 300


def test_an_integer_too_long_for_python_is_refused_not_a_value_error(tmp_path: Path) -> None:
    """Python refuses to read an integer of more than 4300 digits (a ValueError; it was a traceback)."""
    path = tmp_path / "c.yaml"
    path.write_text("seed: " + "9" * 5000 + "\n")
    with pytest.raises(ConfigError, match="not valid YAML: an integer of more than 4300 digits") as exc:
        load_yaml(path)
    assert str(path) in str(exc.value)


def test_a_key_written_null_is_the_string_null_as_the_readme_names_analysis_null(tmp_path):
    # `analysis: {null: false}` (README: analysis.null) was read with YAML's null as the key and failed with
    # "analysis.None: keys should be strings, got None"
    from simulations.config import load_config
    from simulations.yaml_safe import load_yaml_text

    assert load_yaml_text("a: null\nnull: 1\nb: {null: ~}\n", "t") == {"a": None, "null": 1, "b": {"null": None}}
    assert load_yaml_text("~: 1\n", "t") == {None: 1}  # only the word null, not ~ or an empty key
    with pytest.raises(ConfigError, match="duplicate key 'null'"):
        load_yaml_text("null: 1\n'null': 2\n", "t")
    path = tmp_path / "c.yaml"
    path.write_text("replicates: 2\nanalysis:\n  null: false\n  aa: false\n")
    assert load_config(path).analysis.null is False
