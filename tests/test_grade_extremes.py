"""Grades at the edges of the scale: ERR's satisfaction probabilities exactly rounded for every top grade (no
overflow of 2^gmax from 1024 on), an ERR gmax below a ranked grade refused (its probabilities would exceed 1 and ERR
leave [0, 1]), exponential gains refused where they overflow (nDCG was NaN), and gain tables without a dense table
up to the largest grade (a grade of 2^31 - 1 allocated 16 GiB)."""

from __future__ import annotations

import json
import tracemalloc
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.conventions import EXPONENTIAL, LINEAR, Gain
from onlineeval.errors import ConfigError
from onlineeval.metrics.err import ERR

TOPS = [*range(1, 70), 500, 1000, 1022, 1023, 1024, 1060, 1074, 1075, 1100, 2000, 5000]


def _exact(g: int, gmax: int) -> float:
    """(2^g - 1) / 2^gmax rounded once to the nearest float64 (Fraction's conversion is correctly rounded)."""
    return float(Fraction(2**g - 1, 2**gmax)) if g > 0 else 0.0


@pytest.mark.parametrize("gmax", TOPS)
def test_err_satisfaction_is_the_exactly_rounded_probability(gmax: int) -> None:
    grades = np.arange(-1, gmax + 1)  # -1: an empty slot
    sat = ERR(k=10)._cascade(grades[None, :], gmax).satisfaction[0]
    want = np.array([_exact(int(g), gmax) for g in grades])
    assert np.all(np.isfinite(sat))
    if gmax <= 1074:  # 2^-gmax a float: the same bits
        assert np.array_equal(sat.view(np.int64), want.view(np.int64))
    else:  # 2^-gmax below the smallest subnormal: within one subnormal of the exactly rounded value
        assert np.max(np.abs(sat - want)) <= 5e-324


def _write(tmp_path: Path, qrels: str, run: str) -> tuple[str, str]:
    q, r = tmp_path / "qrels", tmp_path / "run"
    q.write_text(qrels)
    r.write_text(run)
    return str(q), str(r)


def _evaluate(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["evaluate", *args], prog_name="onlineeval")
    return res.exit_code, res.output


def _mean(out: str, metric: str) -> float:
    """The first system's mean of ``metric`` in ``evaluate --format json``'s output."""
    return float(json.loads(out)["systems"][0]["metrics"][metric]["mean"])


def test_err_of_grades_past_1023_is_the_exact_value(tmp_path: Path) -> None:
    """A grade-1 document above a grade-2000 one: ERR = R1 + (1 - R1) R2 / 2 with the exact probabilities (it was
    an OverflowError traceback)."""
    q, r = _write(tmp_path, "1 0 d1 2000\n1 0 d2 1\n", "1 Q0 d2 1 2.0 r\n1 Q0 d1 2 1.0 r\n")
    code, out = _evaluate("--qrels", q, "--run", r, "-m", "ERR@10", "--format", "json")
    assert code == 0, out
    r1, r2 = Fraction(1, 2**2000), Fraction(2**2000 - 1, 2**2000)
    assert _mean(out, "ERR@10") == pytest.approx(float(r1 + (1 - r1) * r2 / 2), rel=1e-15, abs=0)


def test_err_gmax_below_a_ranked_grade_is_refused(tmp_path: Path) -> None:
    q, r = _write(tmp_path, "1 0 d1 3\n1 0 d2 1\n", "1 Q0 d2 1 3.0 r\n1 Q0 d1 2 2.0 r\n")
    code, out = _evaluate("--qrels", q, "--run", r, "-m", "ERR(gmax=1)@10")
    assert code != 0
    assert "metrics.ERR.gmax: ERR(gmax=1)@10: a ranked document has grade 3, above gmax=1" in out, out
    assert "set gmax to at least 3" in out
    # at the top grade or above: in [0, 1], and gmax=3 is the default here (the qrels' top grade)
    code, out = _evaluate("--qrels", q, "--run", r, "-m", "ERR(gmax=3)@10,ERR(gmax=4)@10,ERR@10", "--format", "json")
    assert code == 0, out
    assert _mean(out, "ERR(gmax=3)@10") == _mean(out, "ERR@10") == 1 / 8 + (7 / 8) * (7 / 8) / 2
    assert _mean(out, "ERR(gmax=4)@10") == 1 / 16 + (15 / 16) * (7 / 16) / 2
    with pytest.raises(ConfigError, match="above gmax=2"):
        ERR(k=5, gmax=2).cascade(np.array([[3, 1]]))


def test_exponential_gain_is_refused_where_it_overflows(tmp_path: Path) -> None:
    assert np.isfinite(EXPONENTIAL(np.array([999, 3, -1]))).all()
    with pytest.raises(ConfigError) as err:
        EXPONENTIAL(np.array([0, 1000]))
    assert err.value.key_path == ("gain",) and "grade 1000" in err.value.message
    q, r = _write(tmp_path, "1 0 d1 2000\n1 0 d2 1\n", "1 Q0 d2 1 2.0 r\n1 Q0 d1 2 1.0 r\n")
    code, out = _evaluate("--qrels", q, "--run", r, "-m", "nDCG@10")
    assert code != 0 and "gain: exponential gains 2^g - 1 of grades of 1000 and more overflow" in out, out
    assert "nan" not in out
    # linear gains of the same file: d1 (2000) at rank 2, d2 (1) at rank 1
    code, out = _evaluate("--qrels", q, "--run", r, "-m", "nDCG@10", "--gain", "linear", "--format", "json")
    assert code == 0, out
    dcg = 1 + 2000 / np.log2(3)
    idcg = 2000 + 1 / np.log2(3)
    assert _mean(out, "nDCG@10") == pytest.approx(dcg / idcg, rel=1e-12)


def test_gain_table_of_a_huge_grade_allocates_nothing_dense() -> None:
    gain = Gain.from_table({1: 3.0, 2: 9.0})
    grades = np.array([2**31 - 1, 2, 1, 0, -1, 7])
    tracemalloc.start()
    try:
        out = gain(grades)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # was a 16 GiB table up to the largest grade
    assert out.tolist() == [2**31 - 1, 9.0, 3.0, 0.0, 0.0, 7.0]
    assert LINEAR(grades).tolist() == [2**31 - 1, 2.0, 1.0, 0.0, 0.0, 7.0]


GRADE_TEXTS = ["1", "+1", "-1", "01", "-0", "1.0", "1.", ".0", "-1.0", "1e2", "1E2", "1e0", "2.0000000000000001",
               "1.5", "nan", "inf", "-inf", "1e999", "1e10", "9.3e18", "99999999999999999999", "2147483647",
               "2147483648", "-2147483648", "-2147483649", "1_0", "0x1", "\u0661", "\u00b2", "1e", "e1", "--1", "+"]


@pytest.mark.parametrize("text", GRADE_TEXTS)
def test_a_grade_reads_the_same_on_both_paths_or_is_refused_at_its_line(tmp_path: Path, text: str) -> None:
    """The C reader's integer column takes whole-valued decimals (``1.0``, ``1e2``); the line scan (which names a bad
    line, and which a repeated pair sends the file to) now reads a grade the same way: the same grade both ways, or
    both refuse naming line 1 (``1.0`` with a repeated pair was refused as not an integer; ``1_0`` and Arabic-Indic
    digits, which Python's int takes, gave 'could not parse the file' without a line)."""
    from onlineeval.errors import InputError
    from onlineeval.io import read_qrels

    plain = tmp_path / "plain"
    plain.write_text(f"1 0 d1 {text}\n1 0 d2 0\n")
    twice = tmp_path / "twice"
    twice.write_text(f"1 0 d1 {text}\n1 0 d2 0\n1 0 d2 1\n")  # a document judged twice: the line scan reads it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # pandas' cast of 1e999 to an integer column is the reader's business
            got = read_qrels(plain)
    except InputError as exc:
        assert exc.line == 1 and exc.path == str(plain), exc
        with pytest.raises(InputError) as again:
            read_qrels(twice)
        assert again.value.line == 1 and again.value.message == exc.message
        return
    grade = int(got["grade"].iloc[0])
    want = int(float(text)) if text.lstrip("+-").isascii() else None
    assert grade == want
    with pytest.raises(InputError) as err:  # the scan read line 1's grade and reached the repeated pair
        read_qrels(twice)
    assert err.value.line == 3 and "judged twice" in err.value.message


@pytest.mark.parametrize("table", ["1=1e999", "1=nan,2=3", "2=-inf"])
def test_gain_tables_of_non_finite_gains_are_refused(tmp_path: Path, table: str) -> None:
    """A gain of inf or nan made every DCG it entered NaN (nDCG printed nan)."""
    with pytest.raises(ConfigError, match="table gains must be finite numbers"):
        Gain.parse(table)
    q, r = _write(tmp_path, "1 0 d1 1\n1 0 d2 2\n", "1 Q0 d2 1 2.0 r\n1 Q0 d1 2 1.0 r\n")
    code, out = _evaluate("--qrels", q, "--run", r, "-m", "nDCG@10", "--gain", table)
    assert code != 0 and "gain: table gains must be finite numbers" in out and "nDCG" not in out, out
