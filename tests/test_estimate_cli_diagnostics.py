"""`onlineeval estimate`'s weight diagnostics and their warnings: all-zero weights, the mean weight that flags
wrong propensities, slot-level ESS in impressions, and clipped_ips's clipping bias."""

from __future__ import annotations

import json
from typing import Any

import pytest

from estimate_cli_world import (  # noqa: F401  (world: the module-scoped fixture)
    invoke,
    json_out,
    lib_data,
    lib_target,
    world,
    write_run,
)


def test_all_zero_weights_are_flagged(world: dict[str, Any]) -> None:
    """A target that ranks, first for every query, a document the log never shows: no
    logged list agrees with it, IPS is 0 with standard error 0, and the output says why."""
    lists = {q: [c + 100 for c in world["best"][q]] for q in range(4)}
    run = write_run(world["tmp"] / "Z.run", lists, "Z")
    doc = json_out("--log", str(world["log"]), "--target", str(run), "--estimator", "ips", "--allow-unseen")
    (r,) = doc["results"]
    assert r["estimate"] == 0.0 and r["diagnostics"]["zero_weight_share"] == 1.0
    # no zero-width interval (review 11 F4): se and interval undefined, with the reason
    assert r["se"] is None and r["ci_low"] is None and r["ci_high"] is None
    assert any(w.startswith("standard error and intervals undefined") for w in r["warnings"])
    assert r["diagnostics"]["support_violations"] is None and r["diagnostics"]["never_logged"] == 3000
    assert any(w.startswith("every weight is 0") for w in r["warnings"])
    # SNIPS is undefined there (0/0): reported per result and per difference, the rest still runs
    args = ["--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(run), "--estimator",
            "ips,snips", "--allow-unseen"]
    doc = json_out(*args)
    by = {(x["estimator"], x["target"]): x for x in doc["results"]}
    assert by[("snips", "Z")]["estimate"] is None and "undefined" in by[("snips", "Z")]["error"]
    assert by[("snips", "B")]["estimate"] is not None and by[("ips", "Z")]["estimate"] == 0.0
    diffs = {x["estimator"]: x for x in doc["differences"]}
    assert diffs["snips"]["estimate"] is None and "undefined for 'Z'" in diffs["snips"]["error"]
    # IPS's 0 with standard error 0 is no estimate of Z: the difference is undefined too, not B's value with p ~ 0
    assert diffs["ips"]["estimate"] is None and "undefined for 'Z': every weight is 0" in diffs["ips"]["error"]
    assert "ips Z: every weight is 0" in " | ".join(diffs["ips"]["warnings"])
    table = invoke(*args)
    assert table.exit_code == 0 and "undefined" in table.stdout


def test_mean_weight_flags_wrong_propensities(world: dict[str, Any]) -> None:
    """A log whose list propensities are written at half their value (1/120 for 1/60): every weight doubles, the
    mean weight is near 2 (within 4 SE), marked in the table and warned about; the true log's is within 4 SE of 1."""
    lines = [json.loads(x) for x in world["log"].read_text().splitlines()]
    for rec in lines:
        rec["propensities"] = {"list": 1 / 120}
    wrong = world["tmp"] / "half.jsonl"
    wrong.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    sim = world["sim"]
    for path, factor in ((world["log"], 1.0), (wrong, 2.0)):
        doc = json_out("--log", str(path), "--target", str(world["B"]), "--estimator", "ips")
        d = doc["results"][0]["diagnostics"]
        target = lib_target(sim, world["best"], "B")
        w = factor * 60.0 * (lib_data(sim).shown == target.lists[lib_data(sim).query]).all(axis=1)
        assert d["mean_weight"] == pytest.approx(w.mean(), rel=1e-12)
        assert abs(d["mean_weight"] - factor) <= 4 * d["mean_weight_se"]
        assert d["mean_weight_off"] is (factor == 2.0)
        table = invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips")
        assert (f"{d['mean_weight']:.4g}*" in table.stdout) is (factor == 2.0)
        assert ("ips B: mean importance weight" in table.stdout) is (factor == 2.0)


def test_slot_level_ess_in_impressions(world: dict[str, Any]) -> None:
    """iips's ESS counts its 9,000 slot weights (it can exceed the 3,000 impressions); the table prints it per
    impression (ess / 3 shown slots), the JSON keeps both."""
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--estimator", "iips,ips")
    iips, ips = (r["diagnostics"] for r in doc["results"])
    assert iips["weight_level"] == "slot" and iips["weights_per_impression"] == 3.0
    assert iips["ess_impressions"] == pytest.approx(iips["ess"] / 3, rel=1e-12) and iips["ess_impressions"] <= 3000
    assert ips["weight_level"] == "list" and ips["ess_impressions"] == ips["ess"]
    table = invoke("--log", str(world["log"]), "--target", str(world["B"]), "--estimator", "iips,ips").stdout
    row = next(line for line in table.splitlines() if line.split()[:2] == ["iips", "B"])
    assert f"{iips['ess_impressions']:.4g}" in row.split() and f"{iips['ess']:.4g}" not in row.split()


def test_clipped_ips_warns_when_its_clipping_bias_is_large(world: dict[str, Any]) -> None:
    """A cap far below the weights: the estimated clipping bias (notes) is many standard errors and the row says so;
    a cap above every weight: no bias, no warning."""
    base = ("--log", str(world["log"]), "--target", str(world["B"]), "--metric", "clicks_per_query",
            "--estimator", "clipped_ips")
    low = json_out(*base, "--option", "clipped_ips.cap=1.5")["results"][0]
    bias = low["diagnostics"]["notes"]["clipping_bias_estimate"]
    assert abs(bias) > 0.5 * low["se"] > 0
    (line,) = [w for w in low["warnings"] if w.startswith("clipping bias estimated at")]
    assert f"{bias:+.4g} ({abs(bias) / low['se']:.1f} standard errors)" in line
    high = json_out(*base, "--option", "clipped_ips.cap=1e9")["results"][0]
    assert high["diagnostics"]["notes"]["clipping_bias_estimate"] == 0
    assert not any(w.startswith("clipping bias") for w in high["warnings"])
