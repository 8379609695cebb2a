"""Importance weights and terms beyond what float64's variance can hold, and tables of very large numbers.

A log whose propensity for the target's list is 1e-160 used to print IPS's estimate as a 160-digit number with its
standard error undefined "because fewer than two clusters carry weight" (the squares had overflowed); at 5e-324 the
weight was infinite, NumPy's RuntimeWarnings went to the terminal and the reason given was "a propensity of 0?".
Weights above MAX_WEIGHT are now refused naming the impression, per-cluster sums beyond MAX_CLUSTER_SUM likewise,
and tables print numbers from 1e6 in scientific notation (an IPS estimate of 3.35e89, a DCG of exponential gains
of grade 900)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.cli._common import FIXED_LIMIT, fixed
from onlineeval.errors import InputError
from onlineeval.estimators import DeterministicTarget, LoggedData, get_estimator
from onlineeval.estimators.base import MAX_CLUSTER_SUM, Terms
from onlineeval.estimators.ips import IPS
from onlineeval.estimators.log_estimates import paired_difference
from onlineeval.estimators.logs import MAX_WEIGHT
from onlineeval.estimators.rewards import get_reward

runner = CliRunner()
#: NumPy's overflow and invalid-value warnings used to reach the terminal: any RuntimeWarning fails a test here
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")
N = 200


def _write_log(path: Path, p: float) -> None:
    """200 impressions of one query, two documents: odd rows show d1, d2 (the target B's list) with list, prefix and
    item propensity ``p``, even rows d2, d1 with 0.5; a click on the top document unless the row is a multiple of 3;
    20 users."""
    with path.open("w") as f:
        for i in range(N):
            shown = ["d1", "d2"] if i % 2 else ["d2", "d1"]
            q = p if i % 2 else 0.5
            f.write(json.dumps({"query": "q1", "user": f"u{i % 20}", "shown": shown,
                                "clicks": [shown[0]] if i % 3 else [],
                                "propensities": {"list": q, "prefix": [q, q], "item": [q, q]}}) + "\n")


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "B.run").write_text("q1 Q0 d1 1 2 B\nq1 Q0 d2 2 1 B\n")
    (tmp_path / "A.run").write_text("q1 Q0 d2 1 2 A\nq1 Q0 d1 2 1 A\n")
    return tmp_path


def _estimate(tmp: Path, *extra: str) -> Any:
    return runner.invoke(app, ["estimate", "--log", str(tmp / "log.jsonl"), "--target", str(tmp / "B.run"),
                               "--estimator", "ips,snips,rips,iips", *extra])


@pytest.mark.parametrize("p", [5e-324, 1e-300, 1e-160, 1e-101])
def test_weights_beyond_the_limit_are_refused_naming_the_impression(files: Path, p: float) -> None:
    _write_log(files / "log.jsonl", p)
    result = _estimate(files, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    w = 1.0 / p
    shown_w = "inf" if np.isinf(w) else f"{w:.3g}"
    for r in doc["results"]:
        assert r["estimate"] is None, r
        level = {"ips": "list", "snips": "list", "rips": "prefix", "iips": "item"}[r["estimator"]]
        slot = "" if level == "list" else ", slot 1"
        assert f"impression 1{slot}: importance weight {shown_w} at the {level} level" in r["error"]
        assert f"logging propensity {p:.3g}" in r["error"]
        assert "weights above 1e+100 are refused" in r["error"]


def test_weights_at_the_limit_are_estimated_and_printed_in_scientific_notation(files: Path) -> None:
    p = 1e-90
    _write_log(files / "log.jsonl", p)
    doc = json.loads(_estimate(files, "--format", "json").stdout)
    by = {r["estimator"]: r for r in doc["results"]}
    # IPS's exact value: the mean over impressions of w R, w = 1/p on the odd rows (B's list), R = their clicks
    rows = np.arange(N)
    terms = np.where(rows % 2 == 1, (1.0 / p) * (rows % 3 != 0), 0.0)
    assert by["ips"]["estimate"] == pytest.approx(terms.mean(), rel=1e-12)
    assert np.isfinite(by["ips"]["se"]) and by["ips"]["se"] > 0  # the squares (1e180) are within float64's range
    assert by["snips"]["estimate"] == pytest.approx(terms[rows % 2 == 1].mean() * p, rel=1e-12)
    table = _estimate(files).stdout
    line = next(x for x in table.splitlines() if x.strip().startswith("ips "))
    assert fixed(by["ips"]["estimate"]) in line and "e+89" in line
    rows_of_table = [x for x in table.splitlines()
                     if x.split()[:2] in (["ips", "B"], ["snips", "B"], ["rips", "B"], ["iips", "B"])]
    assert len(rows_of_table) == 4 and max(map(len, rows_of_table)) < 160  # no 90-digit columns


def test_differences_print_large_ones_compactly(files: Path) -> None:
    _write_log(files / "log.jsonl", 1e-90)
    out = _estimate(files, "--baseline", str(files / "A.run")).stdout
    below = out.split("differences target - baseline")[1]
    line = next(x for x in below.splitlines() if x.split()[:3] == ["ips", "B", "A"])
    assert "+3.3500e+89" in line


def test_the_weight_limit_is_the_documented_one() -> None:
    assert MAX_WEIGHT == 1e100 and MAX_CLUSTER_SUM == 1e140
    # a weight at the limit squares and sums within float64 for 10^8 impressions; one a little above it is refused
    assert np.isfinite(np.float64(MAX_WEIGHT) ** 2 * 1e8)
    shown = np.array([[0, 1], [1, 0]])
    clicks = np.array([[True, False], [False, True]])
    target = DeterministicTarget(np.array([[0, 1]]), "T")
    ok = LoggedData(np.zeros(2, dtype=np.int64), shown, clicks, p_list=np.array([1e-100, 0.5]))
    assert get_estimator("ips").estimate(ok, target).value == pytest.approx(0.5e100)
    bad = LoggedData(np.zeros(2, dtype=np.int64), shown, clicks, p_list=np.array([0.5, 9e-101]), source="frame")
    with pytest.raises(InputError, match=r"frame: impression 1: importance weight 1\.11e\+100 at the list level"):
        get_estimator("ips").estimate(bad, DeterministicTarget(np.array([[1, 0]]), "T"))


class _HugeTerms(IPS):
    """IPS whose terms are multiplied by ``factor``: an estimator's own terms beyond what the variance can hold."""

    name = "huge_terms_test"
    factor: float = 1e150

    def _terms(self, data: LoggedData, target: Any, reward: Any) -> Terms:
        t = super()._terms(data, target, reward)
        return Terms(num=t.num * self.factor, den=t.den, weights=t.weights, notes=t.notes)


@pytest.mark.parametrize("factor, text", [(1e150, r"per cluster reach [0-9.]+e\+151, beyond 1e\+140"),
                                          (np.inf, "per cluster are not finite")])
def test_cluster_sums_beyond_the_limit_are_refused(factor: float, text: str) -> None:
    rng = np.random.default_rng(3)
    n = 400
    shown = np.where(rng.random(n)[:, None] < 0.5, [[0, 1]], [[1, 0]])
    clicks = rng.random((n, 2)) < 0.4
    data = LoggedData(np.zeros(n, dtype=np.int64), shown, clicks, p_list=np.full(n, 0.5),
                      user=np.arange(n) % 40, source="frame")
    target, other = DeterministicTarget(np.array([[0, 1]]), "B"), DeterministicTarget(np.array([[1, 0]]), "A")
    est = _HugeTerms()
    est.factor = factor
    with np.errstate(over="ignore", invalid="ignore"):  # (the test's own terms: 0 x inf)
        with pytest.raises(InputError, match=f"estimator 'huge_terms_test': undefined: .*{text}"):
            est.estimate(data, target)
        with pytest.raises(InputError, match=f"undefined for 'B': .*{text}"):
            paired_difference(est, data, target, other, get_reward("clicks_per_query", 2))
    est.factor = 1e130  # within the limit: estimated, with a finite standard error (the squares are within range)
    r = est.estimate(data, target)
    plain = IPS().estimate(data, target)
    assert r.value == pytest.approx(plain.value * 1e130, rel=1e-12)
    assert r.se == pytest.approx(plain.se * 1e130, rel=1e-9)


@pytest.mark.parametrize("x, digits, signed, text", [
    (0.67, 4, False, "0.6700"), (999999.99994, 4, False, "999999.9999"), (FIXED_LIMIT, 4, False, "1.0000e+06"),
    (-3.35e89, 4, False, "-3.3500e+89"), (3.35e89, 4, True, "+3.3500e+89"), (0.01, 4, True, "+0.0100"),
    (float("inf"), 4, False, "inf"), (float("nan"), 4, False, "nan"), (2.0 ** 900, 4, False, "8.4527e+270"),
])
def test_fixed(x: float, digits: int, signed: bool, text: str) -> None:
    assert fixed(x, digits, signed=signed) == text


def test_evaluate_prints_a_dcg_of_exponential_gains_of_grade_900_compactly(tmp_path: Path) -> None:
    (tmp_path / "qrels").write_text("q1 0 d1 900\nq1 0 d2 0\n")
    (tmp_path / "run").write_text("q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\n")
    result = runner.invoke(app, ["evaluate", "-q", str(tmp_path / "qrels"), "-r", str(tmp_path / "run"),
                                 "-m", "DCG@10,nDCG@10"])
    assert result.exit_code == 0, result.output
    row = result.stdout.splitlines()[-1].split()
    assert row == ["run", f"{2.0 ** 900 - 1:.4e}", "1.0000"]  # (2^900 - 1) / log2(2) at rank 1, grade 0 below
