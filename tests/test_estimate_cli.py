"""`onlineeval estimate` through typer's CliRunner: the JSON keys and the table, and the README's example
reproduced line for line (examples/make_logged_example.py writes its log and runs).

The other tests of the command, by topic: test_estimate_cli_numbers.py (numbers equal the library call, a
simulated round trip within 4 standard errors of the exact truth), test_estimate_cli_differences.py (paired
differences), test_estimate_cli_bootstrap.py, test_estimate_cli_diagnostics.py (weight diagnostics and their
warnings), test_estimate_cli_errors.py (every refusal as one line with file:line and exit 2); their shared
set-up is in estimate_cli_world.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from onlineeval.estimators import get_estimator

from estimate_cli_world import invoke, json_out, world  # noqa: F401  (world: the module-scoped fixture)


def test_json_keys_and_table(world: dict[str, Any]) -> None:
    args = ["--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
            "--estimator", "ips,snips", "--metric", "abandonment", "--seed", "9"]
    doc = json_out(*args)
    assert set(doc) == {"fingerprint", "inputs", "log", "metric", "estimators", "assumptions", "results",
                        "differences", "warnings", "conventions"}
    assert doc["log"] == {"path": str(world["log"]), "impressions": 3000, "queries": 4, "clusters": 300, "k": 3,
                          "propensities": ["p_list", "p_prefix", "p_item"], "propensity_source": "log"}
    assert set(doc["results"][0]) == {"estimator", "target", "estimate", "se", "ci_low", "ci_high", "boot_low",
                                      "boot_high", "n", "clusters", "df", "skewness", "se_source", "assumption",
                                      "diagnostics", "warnings", "error"}
    assert set(doc["results"][0]["diagnostics"]) == {
        "ess", "max_weight", "top1_share", "zero_weight_share", "support_violations", "support_checked", "notes",
        "weight_level", "weights_per_impression", "ess_clusters", "ess_impressions", "mean_weight", "mean_weight_se",
        "mean_weight_expected", "mean_weight_off", "never_logged"}
    assert set(doc["differences"][0]) == {"estimator", "target", "baseline", "estimate", "se", "ci_low", "ci_high",
                                          "pvalue", "boot_low", "boot_high", "n", "clusters", "df", "skewness",
                                          "se_source",
                                          "warnings", "error"}
    assert doc["results"][0]["boot_low"] is None  # no bootstrap asked: null, not NaN
    conv = doc["conventions"]
    for key in ("metric", "reward", "alpha", "cluster_unit", "propensity_source", "logging_policy", "ties", "seed",
                "bootstrap", "bootstrap_interval", "target_depth", "support", "interval", "item_propensities"):
        assert key in conv
    assert conv["item_propensities"] == "as written in the log"
    assert conv["metric"] == "abandonment" and conv["reward"].startswith("abandonment: 1 + sum_j")
    assert conv["seed"] == 9 and conv["cluster_unit"] == "user" and conv["ties"].startswith("docno_desc")
    assert doc["assumptions"]["ips"] == get_estimator("ips").assumption
    assert doc["estimators"]["snips"]["needs"] == ["p_list"]
    table = invoke(*args)
    assert table.exit_code == 0, table.output
    for text in ("estimator", "ips", "snips", "differences target - baseline", "assumptions", "conventions:",
                 "cluster_unit: user", "propensity_source: the log (p_list, p_prefix, p_item)", "seed: 9"):
        assert text in table.stdout, text
    est = f"{doc['results'][0]['estimate']:.4f}"
    assert est in table.stdout


REPO = Path(__file__).resolve().parents[1]


def readme_estimate_block() -> tuple[list[str], list[list[str]]]:
    """The README's ``$ onlineeval estimate --log logged.jsonl ...`` block: the command's arguments and the output
    lines shown, as segments split at the ``  ...`` lines that mark left-out output."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```text\n\$ onlineeval estimate (--log logged\.jsonl[^\n]*)\n(.*?)```", text, re.S)
    assert match, "no '$ onlineeval estimate --log logged.jsonl' block in README.md"
    segments: list[list[str]] = [[]]
    for line in match.group(2).splitlines():
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(line)
    return match.group(1).split(), segments


def test_readme_estimate_example_reproduces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/make_logged_example.py writes the README's logged.jsonl, A.run and B.run; the README's command
    prints every line the README shows, in order (each run of lines between '...' marks contiguous, the first from
    the first line), and the README states the example's exact values."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_logged_example", REPO / "examples" / "make_logged_example.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    truth = example.make(tmp_path)
    args, segments = readme_estimate_block()
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    at = 0
    for i, segment in enumerate(segments):
        if not segment:
            continue
        starts = [s for s in range(at, len(out) - len(segment) + 1) if out[s:s + len(segment)] == segment]
        assert starts and (i > 0 or starts[0] == 0), ("README line not printed (or not in order)", segment, out)
        at = starts[0] + len(segment)
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert (f"the true values are {truth['B']:.4f} clicks per query for B and {truth['A']:.4f} for A" in readme)
    # the assumption check's verdict at the end of IIPS's catalogue warnings, as the README quotes it
    for who, where, bias in (("B", "on slots 1-2 (deeper slots not compared) ", "0.14"), ("A", "", "0.003")):
        (line,) = [w for w in out if w.startswith(f"  iips {who}: iips is biased for clicks_per_query")]
        assert f"finds no sign of it for this target: the value {where}is" in line, line
        assert f"(a bias beyond about {bias} there would show)" in line, line
    assert "here about 0.14 for IIPS's B, whose slots 1-2 only are compared, and 0.003 for A" in readme
    # the set-up's largest weights, as the README describes them: 1 / (0.3 / (8*7*6*5)) and 1 / (0.3 / 8)
    assert "5600" in out[3] and "26.67" in out[6]
    # estimator notes are for people: 4 significant digits (the JSON keeps every digit), no Python dict repr
    notes = out[out.index("estimator notes:") + 1:]
    notes = notes[:notes.index("")]
    assert any(line.startswith("  pbm_ips B: examination = [1, 0.") for line in notes), notes
    assert not any(re.search(r"\d\.0*[1-9]\d{4,}|'", line) for line in notes), notes
