"""Inputs that used to end in a traceback or a silently wrong number: each is now one
clear error naming the file and line (exit code 2 through the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import ConfigError, InputError
from onlineeval.io import read_letor, read_qrels, read_run
from onlineeval.metrics import parse_metric

QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n"
RUN = "1 Q0 d1 1 2.0 r\n1 Q0 d2 2 1.0 r\n2 Q0 d3 1 1.0 r\n"


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def test_absurd_cutoff_is_a_config_error_not_a_numpy_error() -> None:
    with pytest.raises(ConfigError, match="cut-off must be at most 10,000"):
        parse_metric("P@99999999999999999999999")
    assert parse_metric("P@10000").k == 10000


@pytest.mark.parametrize(
    ("data", "line", "fragment"),
    [
        (b"1 0 d1 1\n1 0 d2 99999999999999999999\n", 2, "out of range"),
        (b"1 0 d1 1\n1\x00x 0 d2 1\n", 2, "NUL byte"),
        (b"1 0 d1 1\ncaf\xe9 0 d2 1\n", 2, r"not UTF-8 text \(byte 0xe9\)"),
    ],
)
def test_qrels_problems_name_the_line(tmp_path: Path, data: bytes, line: int, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment) as info:
        read_qrels(_write(tmp_path, "q.txt", data))
    assert info.value.line == line


def test_nul_byte_in_a_run_is_refused_not_merged(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="NUL byte") as info:
        read_run(_write(tmp_path, "r.txt", b"1 Q0 d1 1 2.0 r\n1 Q0 d1\x00 2 1.0 r\n"))
    assert info.value.line == 2


def test_bom_is_read_like_a_clean_file(tmp_path: Path) -> None:
    clean = read_qrels(_write(tmp_path, "a.txt", QRELS))
    bom = read_qrels(_write(tmp_path, "b.txt", "\ufeff" + QRELS))
    assert clean.equals(bom)


def test_binary_letor_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not UTF-8") as info:
        read_letor(_write(tmp_path, "x.letor", b"1 qid:1 1:0.5\n\xd0\xcf\x11\xe0\x00\x01"), score_feature=1)
    assert info.value.line == 2


def test_score_feature_absent_from_the_file_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "l.txt", "1 qid:1 1:0.5 2:0.1\n0 qid:1 1:0.2 2:0.3\n")
    with pytest.raises(InputError, match="score feature 7 occurs on no line .*up to 2"):
        read_letor(path, score_feature=7)
    data = read_letor(path, score_feature=2)
    assert data.run is not None and data.run["score"].tolist() == [0.1, 0.3]


def test_infinite_letor_label_is_located(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="integer grade") as info:
        read_letor(_write(tmp_path, "l.txt", "1 qid:1 1:0.5\n1e400 qid:1 1:0.5\n"), score_feature=1)
    assert info.value.line == 2


def test_cli_reports_them_in_one_line_with_exit_2(tmp_path: Path) -> None:
    run = _write(tmp_path, "r.txt", RUN)
    bad = _write(tmp_path, "q.txt", b"caf\xe9 0 d1 1\n")
    result = CliRunner().invoke(app, ["evaluate", "--qrels", str(bad), "--run", str(run), "--metrics", "P@1"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and f"{bad}:1: not UTF-8" in result.output
    result = CliRunner().invoke(app, ["evaluate", "--qrels", str(_write(tmp_path, "g.txt", QRELS)), "--run", str(run),
                                      "--metrics", "P@99999999999999999999999"])
    assert result.exit_code == 2 and "cut-off must be at most" in result.output


def test_stats_messages_show_numbers_not_numpy_reprs():
    """numpy 2 prints a scalar's repr as ``np.float64(nan)``: the messages show the number itself."""
    import numpy as np

    from onlineeval.stats import power
    from onlineeval.stats._checks import as_values, check_alpha

    with pytest.raises(InputError, match=r"x: value at index 1 is nan; only finite") as e:
        as_values([1.0, np.nan], "x")
    with pytest.raises(ValueError, match=r"got 1\.5$") as a:
        check_alpha(np.float64(1.5))
    with pytest.raises(ValueError, match=r"se must be finite and > 0; got -1\.0$") as s:
        power._positive(np.array([2.0, -1.0]), "se")
    with pytest.raises(ValueError, match=r"got 2\.5$") as p:
        power.binomial_band(10, np.float64(2.5))
    assert not any("np." in str(x.value) for x in (e, a, s, p))
