"""Numbers written in configs, --set and --option values, metric names and gain tables.

PyYAML reads YAML 1.1: ``days: 010`` was 8 days (octal), ``population: 1:30`` 90 users (base 60) and ``1e6`` the
text '1e6' (refused as "must be an integer, got '1e6'"; a probability written 1e-3 as "must be a number"). YAML 1.2
and every reader of the config take 010 as 10 and 1e6 as a million. The two forms whose value YAML 1.1 and YAML
1.2 read differently are refused naming the file and line; 1e3 is a number. Metric names (nDCG@1_0 was nDCG@10,
a fullwidth 10 too) and gain tables (1_0=3 was grade 10) take plain decimal numbers only, as the files do.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from onlineeval.errors import ConfigError
from simulations.yaml_safe import load_yaml, load_yaml_text

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize(("written", "value"), [
    ("10", 10), ("-3", -3), ("+5", 5), ("0", 0), ("1_000", 1000), ("0x1f", 31), ("0o17", 15), ("0b11", 3),
    ("1e3", 1000.0), ("1.0e3", 1000.0), ("2E-3", 0.002), ("-1e-3", -0.001), (".5", 0.5), ("1.", 1.0),
    ("010.5", 10.5), ("'010'", "010"), ('"1:30"', "1:30"), ("09", "09"), ("1e", "1e"),
])
def test_numbers_read_as_written(written: str, value: object) -> None:
    got = load_yaml_text(f"a: {written}\n", "x.yaml")["a"]
    assert got == value and type(got) is type(value)


def test_infinities_and_nan_keep_their_yaml_spelling() -> None:
    got = load_yaml_text("a: [.inf, -.inf, +.inf, .nan, .NaN]\n", "x.yaml")["a"]
    assert got[:3] == [math.inf, -math.inf, math.inf] and all(math.isnan(v) for v in got[3:])


@pytest.mark.parametrize(("written", "says"), [
    ("010", r"010: a leading 0 makes it octal in YAML 1.1 \(8\) and decimal in YAML 1.2; write 10 \(or 0o10 for "
            r"octal\), or quote it \('010'\) if text is meant"),
    ("-010", r"-010: a leading 0 makes it octal in YAML 1.1 \(-8\) and decimal in YAML 1.2; write -10,"),
    ("00", r"00: a leading 0 makes it octal in YAML 1.1 \(0\) and decimal in YAML 1.2; write 0 "),
    ("1:30", r"1:30 is a base-60 number in YAML 1.1 \(1:30 is 90\); write the number in decimal, or quote it"),
    ("190:20:30.15", r"190:20:30.15 is a base-60 number in YAML 1.1"),
])
def test_numbers_yaml_1_1_and_1_2_read_differently_are_refused_naming_the_line(written: str, says: str) -> None:
    with pytest.raises(ConfigError, match=rf"^cfg.yaml:3: {says}"):
        load_yaml_text(f"a: 1\nb:\n  c: {written}\n", "cfg.yaml")


def test_a_key_written_010_is_refused_too() -> None:
    with pytest.raises(ConfigError, match=r"^cfg.yaml:2: 010: a leading 0"):
        load_yaml_text("a:\n  010: x\n", "cfg.yaml")


def test_the_bundled_configs_hold_no_refused_number() -> None:
    for path in sorted(CONFIGS.glob("*.yaml")):
        assert isinstance(load_yaml(path), dict), path


def _ab_config(tmp_path: Path, old: str, new: str) -> Path:
    text = (CONFIGS / "ab.yaml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "ab.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def test_a_config_value_written_010_names_file_and_line(tmp_path: Path) -> None:
    from simulations.config import load_config

    path = _ab_config(tmp_path, "days: 14", "days: 014")
    line = path.read_text(encoding="utf-8").splitlines().index("  days: 014") + 1
    with pytest.raises(ConfigError, match=rf"{path.name}:{line}: 014: a leading 0 makes it octal in YAML 1.1 \(12\)"):
        load_config(path)


def test_a_config_float_written_with_an_exponent_is_the_number(tmp_path: Path) -> None:
    from simulations.config import load_config

    written = load_config(_ab_config(tmp_path, "B: {noise: 0.92}", "B: {noise: 92e-2}"))
    assert written.rankers.B.noise == 0.92
    assert written == load_config(CONFIGS / "ab.yaml")


def test_set_values_are_read_the_same_way_and_named_by_their_option() -> None:
    from onlineeval.cli.simulate import parse_sets  # the --set reader

    assert parse_sets(["traffic.days=1e1", "users.population=2_000"]) == {"traffic.days": 10.0,
                                                                          "users.population": 2000}
    with pytest.raises(ConfigError, match=r"^--set users.population: 010: a leading 0"):
        parse_sets(["users.population=010"])


def test_estimate_and_validate_options_are_read_the_same_way() -> None:
    from onlineeval.cli.estimate import parse_options
    from onlineeval.cli.validate import _parse_options

    assert parse_options(["clipped_ips.cap=1e3", "clipped_ips.note=[a"], ["clipped_ips"]) == {
        "clipped_ips": {"cap": 1000.0, "note": "[a"}}  # text that is not YAML stays the text given
    assert _parse_options(["depth=1e1", "mode=x"]) == {"depth": 10.0, "mode": "x"}
    with pytest.raises(ConfigError, match=r"^--option clipped_ips.cap: 010: a leading 0"):
        parse_options(["clipped_ips.cap=010"], ["clipped_ips"])
    with pytest.raises(ConfigError, match=r"^--option depth: 1:30 is a base-60 number"):
        _parse_options(["depth=1:30"])


@pytest.mark.parametrize("name", ["nDCG@1_0", "nDCG@\uff11\uff10", "P.1_0", "ndcg_cut.1_0", "P_1\uff10",
                                  "ERR(gmax=1_0)", "RBP(p=0x1)", "iprec_at_recall.nan"])
def test_metric_names_take_plain_decimal_numbers(name: str) -> None:
    from onlineeval.metrics import parse_metrics

    with pytest.raises(ConfigError, match="integer|not a number|not a plain decimal number|unknown metric"):
        parse_metrics(name)


@pytest.mark.parametrize(("name", "same_as"), [("nDCG@+10", "nDCG@10"), ("nDCG@ 10", "nDCG@10"),
                                               ("RBP(p=8e-1)", "RBP(p=0.8)"), ("RBP(p=.8)", "RBP(p=0.8)"),
                                               ("P.5,10", "P@5,P@10"), ("P_5.0", "P@5")])
def test_metric_names_with_plain_numbers_still_read(name: str, same_as: str) -> None:
    from onlineeval.metrics import parse_metrics

    assert parse_metrics(name) == parse_metrics(same_as)


def test_gain_tables_take_plain_decimal_numbers() -> None:
    from onlineeval.conventions import Gain

    assert Gain.parse(" 1 = 3 , 2=9.5") == Gain.from_table({1: 3.0, 2: 9.5})
    assert Gain.parse("1=3e0") == Gain.from_table({1: 3.0})
    for text in ("1_0=3", "1=1_0", "\uff11=3", "1.5=3", "0x1=3"):
        with pytest.raises(ConfigError, match=r"expected exponential, linear or 'grade=gain,...'"):
            Gain.parse(text)
