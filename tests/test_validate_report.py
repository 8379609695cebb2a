"""The validation report: every number says what it is; one JSON document for CI gates; exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.interleaving.validation import _from_object, validate_interleaver
from onlineeval.interleaving.validation.report import (
    EXIT_CODES,
    CheckResult,
    ValidationReport,
    finalize,
)
from onlineeval.interleaving.validation.stattests import exact_check

sys.path.insert(0, str(Path(__file__).parent))
import broken_interleavers as bi

STATUSES = {"PASS", "FAIL", "DOCUMENTED", "SKIPPED"}


def test_finalize_splits_alpha_over_the_statistical_checks() -> None:
    checks = [
        CheckResult("null_ok", "PENDING", "sign test p-value", 0.003, "", rule="null"),
        CheckResult("null_bad", "PENDING", "sign test p-value", 0.0019, "", rule="null"),
        CheckResult("power_ok", "PENDING", "one-sided sign test p-value", 0.0019, "", rule="power"),
        CheckResult("power_bad", "PENDING", "one-sided sign test p-value", 0.003, "", rule="power"),
        CheckResult("doc", "DOCUMENTED", "sign test p-value", 1e-9, "", rule="documented"),
        exact_check("exact", 0, 10, "x"),
    ]
    out = {c.name: c for c in finalize(checks, 0.008)}          # four statistical checks: level 0.002
    assert [out[n].status for n in ("null_ok", "null_bad", "power_ok", "power_bad", "doc", "exact")] == \
        ["PASS", "FAIL", "PASS", "FAIL", "DOCUMENTED", "PASS"]
    assert out["null_ok"].level == pytest.approx(0.002) and out["exact"].level is None
    rep = ValidationReport("x", "team_draft", tuple(out.values()), 0.008)
    assert not rep.passed and rep.exit_code == 1 and rep.verdict == "FAIL"
    assert "each of the 4 statistical checks is tested at alpha / 4 = 0.002" in rep.format()


def test_exact_checks_print_violations_over_total() -> None:
    bad = exact_check("credit_agreement", 3, 70, "outcomes differ", "e.g.")
    assert bad.status == "FAIL" and bad.shown_value() == "3/70" and bad.p_value == "exact"
    assert bad.as_dict()["value"] == 3 and bad.as_dict()["counts"] == {"violations": 3, "total": 70}
    ok = exact_check("structure", 0, 70, "x")
    assert ok.status == "PASS" and ok.shown_value() == "0/70"


@pytest.fixture(scope="module")
def failing_report() -> ValidationReport:
    return validate_interleaver(_from_object("off-by-one", bi.OffByOnePrefixTeamDraft()), "team_draft", n=3000)


def test_text_table_names_every_statistic(failing_report: ValidationReport) -> None:
    text = failing_report.format()
    header = next(line for line in text.splitlines() if line.startswith("check "))
    assert header.split()[:5] == ["check", "status", "statistic", "value", "detail"]
    rows = {c.name: line for c in failing_report.checks for line in text.splitlines() if line.startswith(c.name + " ")}
    assert "one-sided sign test p-value" in rows["better_ranker_wins"]
    assert "violations/total" in rows["structure"] and f"0/{failing_report.checks[0].counts['total']}" \
        in rows["structure"]
    assert "violations/total" in rows["credit_agreement"] and "FAIL" in rows["credit_agreement"]
    for c in failing_report.checks:
        assert c.statistic and (c.exact or "p-value" in c.statistic or c.rule == "implied"), c
    # team-draft's documents are functions of its team labels: the row says so and takes no share of the level
    doc = next(c for c in failing_report.checks if c.name == "document_distribution")
    assert (doc.status, doc.rule, doc.value, doc.level) == ("SKIPPED", "implied", None, None)
    assert "implied by team_distribution" in rows["document_distribution"]
    assert "RESULT: FAIL" in text


def test_json_document(failing_report: ValidationReport) -> None:
    doc = json.loads(failing_report.to_json())
    assert set(doc) == {"subject", "method", "mode", "fingerprint", "inputs", "settings", "alpha", "level", "checks",
                        "conventions", "verdict", "exit_code", "exit_codes"}
    assert doc["verdict"] == "FAIL" and doc["exit_code"] == 1
    assert doc["exit_codes"] == {str(k): v for k, v in EXIT_CODES.items()}
    assert {"outcome", "scale", "statistics", "fidelity scale"} <= set(doc["conventions"])
    for c in doc["checks"]:
        assert set(c) == {"name", "status", "statistic", "value", "p_value", "rule", "level", "counts", "message"}
        assert c["status"] in STATUSES
        if c["statistic"] == "violations/total":
            assert c["p_value"] == "exact" and c["value"] == c["counts"]["violations"] <= c["counts"]["total"]
        elif c["rule"] == "implied":
            assert c["status"] == "SKIPPED" and c["value"] is None and c["p_value"] is None and c["level"] is None
        else:
            assert 0.0 <= c["p_value"] <= 1.0 and c["p_value"] == c["value"]
    failed = [c["name"] for c in doc["checks"] if c["status"] == "FAIL"]
    assert "credit_agreement" in failed


def test_cli_json_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    monkeypatch.chdir(Path(__file__).parent)
    bad = runner.invoke(app, ["validate", "--interleaver", "broken_interleavers:OffByOnePrefixTeamDraft",
                              "--n", "3000", "--format", "json"])
    assert bad.exit_code == 1
    doc = json.loads(bad.stdout)                       # exactly one JSON document on stdout
    assert doc["exit_code"] == 1 and doc["verdict"] == "FAIL"
    fmt = runner.invoke(app, ["validate", "--interleaver", "broken_interleavers:TeamDraft", "--format", "xml"])
    assert fmt.exit_code == 2 and "--format" in fmt.output and "text, json" in fmt.output
    crash = runner.invoke(app, ["validate", "--interleaver", "broken_interleavers:TeamDraft", "--n", "10"])
    assert crash.exit_code == 2 and "at least 100" in crash.output and "Traceback" not in crash.output
