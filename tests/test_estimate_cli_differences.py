"""`onlineeval estimate --baseline`: paired differences equal an independent delta-method computation and
resampling loop, are 0 for the same ranker, undefined (with the reason) where the target has no weight, and carry
their estimates' warnings and the warning where the CLT interval holds a fit fixed."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats
import pytest

from onlineeval.estimators import get_estimator, get_reward

from dense_df import dense_df
from estimate_cli_world import (  # noqa: F401  (world: the module-scoped fixture)
    K,
    invoke,
    json_out,
    lib_data,
    lib_target,
    some_estimators,
    world,
    write_run,
)


def test_difference_equals_independent_delta_method(world: dict[str, Any]) -> None:
    """Against the delta method written with the full 4 x 4 covariance of the per-user sums
    (x_B, y_B, x_A, y_A) and the gradient of R_B - R_A; the paired bootstrap against a
    resampling loop written here."""
    names = some_estimators()
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--estimator", ",".join(names), "--metric", "reciprocal_rank", "--bootstrap", "300", "--seed", "3")
    sim = world["sim"]
    data = lib_data(sim)
    tb, ta = lib_target(sim, world["best"], "B"), lib_target(sim, world["worst"], "A")
    reward = get_reward("reciprocal_rank", K)
    assert [(r["estimator"], r["target"], r["baseline"]) for r in doc["differences"]] == [(e, "B", "A") for e in names]
    assert [r["target"] for r in doc["results"]] == ["B"] * len(names) + ["A"] * len(names)
    for r in doc["differences"]:
        est = get_estimator(r["estimator"])
        cols, ws, dens = [], [], []
        for t in (tb, ta):
            terms = est.terms(data, t, reward)
            den = np.ones(data.n) if terms.den is None else terms.den
            cols += [np.bincount(data.user, terms.num), np.bincount(data.user, den)]
            ws.append(terms.weights)
            dens.append(den)
        z = np.column_stack(cols)  # (G, 4)
        g = z.shape[0]
        mean = z.mean(axis=0)
        rb, ra = mean[0] / mean[1], mean[2] / mean[3]
        grad = np.array([1 / mean[1], -rb / mean[1], -1 / mean[3], ra / mean[3]])
        se = float(np.sqrt(grad @ np.cov(z, rowvar=False, ddof=1) @ grad / g))
        assert r["estimate"] == pytest.approx(rb - ra, rel=1e-12)
        assert r["se"] == pytest.approx(se, rel=1e-9)
        # t quantile (scipy's) with Bell and McCaffrey's degrees of freedom of the difference (the dense reference;
        # G - 1 for an estimator without weights), and the p-value from the same t
        df = g - 1 if ws[0] is None else dense_df(data.user, ws, dens, valid=data.valid)
        assert 1 <= df <= g - 1 and r["df"] == pytest.approx(df, rel=1e-9)
        assert r["ci_high"] - r["ci_low"] == pytest.approx(2 * scipy.stats.t.ppf(0.975, df) * se, rel=1e-9)
        assert r["pvalue"] == pytest.approx(2 * scipy.stats.t.sf(abs(rb - ra) / se, df), rel=1e-9)
        assert r["se_source"] == "delta method"
        # the two estimates printed above it differ by the same amount (same impressions)
        vals = {x["target"]: x["estimate"] for x in doc["results"] if x["estimator"] == r["estimator"]}
        assert vals["B"] - vals["A"] == pytest.approx(r["estimate"], rel=1e-12)
        rng = np.random.default_rng([3, zlib.crc32(r["estimator"].encode()), zlib.crc32(b"B"), zlib.crc32(b"A")])
        idx = rng.integers(0, g, size=(300, g))
        reps = [z[i, 0].sum() / z[i, 1].sum() - z[i, 2].sum() / z[i, 3].sum() for i in idx]
        lo, hi = np.quantile(reps, [0.025, 0.975])
        assert (r["boot_low"], r["boot_high"]) == pytest.approx((lo, hi), rel=1e-12)


def test_same_ranker_as_baseline_gives_zero(world: dict[str, Any]) -> None:
    b2 = write_run(world["tmp"] / "B2.run", world["best"], "B2")
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(b2),
                   "--estimator", "ips", "--bootstrap", "100")
    (r,) = doc["differences"]
    assert (r["estimate"], r["se"], r["ci_low"], r["ci_high"], r["boot_low"], r["boot_high"]) == (0.0,) * 6
    assert r["pvalue"] == 1.0


@pytest.mark.parametrize(("options", "metric", "warned"), [
    (("--estimator", "dm", "--option", "dm.model=cascade", "--option", "dm.folds=2"), "reciprocal_rank", True),
    (("--estimator", "dm", "--option", "dm.model=cascade"), "reciprocal_rank", False),  # linearised
    (("--estimator", "dm"), "reciprocal_rank", False),  # a PBM, first click: linearised
    (("--estimator", "dm"), "clicks_per_query", False),  # a PBM, additive: the linearised interval
    (("--estimator", "adaptive_ips"), "clicks_per_query", True),
    (("--estimator", "ips,rips"), "clicks_per_query", False),
])
def test_differences_warn_where_the_clt_interval_holds_a_fit_fixed(world: dict[str, Any], options, metric,
                                                                    warned) -> None:
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--metric", metric, *options)
    lines = [w for w in doc["warnings"] if "the differences' delta-method standard error holds" in w]
    assert len(lines) == warned
    if warned:  # what the bootstrap does again: dm fits its model, adaptive IPS makes its choice
        again = "fits the model again" if "dm" in options else "makes the choice again"
        assert lines[0].endswith("their se, CLT interval and p-value are too small; --bootstrap N (e.g. 1000) takes "
                                 f"them from a bootstrap that {again} in every resample")


def test_differences_carry_their_estimates_warnings(world: dict[str, Any]) -> None:
    """Each difference lists the warnings of its two estimates (prefixed with estimator and side) and its
    estimator's differences' warning (adaptive_ips's CLT interval holding its choice fixed)."""
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--estimator", "ips,iips,adaptive_ips", "--metric", "clicks_per_query")
    by = {(r["estimator"], r["target"]): r["warnings"] for r in doc["results"]}
    fixed = [w for w in doc["warnings"] if w.startswith("adaptive_ips: the differences' delta-method standard")]
    assert len(fixed) == 1
    for diff in doc["differences"]:
        e = diff["estimator"]
        expected = [f"{e} B: {w}" for w in by[(e, "B")]] + [f"{e} A: {w}" for w in by[(e, "A")]]
        assert diff["warnings"] == expected + (fixed if e == "adaptive_ips" else [])
    # IPS of 3,000 impressions with weights 60: ESS about 50 on each side, so its difference carries both
    ips = doc["differences"][0]
    assert any(w.startswith("ips B: effective sample size") for w in ips["warnings"])
    assert any(w.startswith("ips A: effective sample size") for w in ips["warnings"])


def _two_doc_log(tmp_path: Path) -> list[str]:
    """The review's reproduction: the log shows only [a, b] (list propensity 0.99), the target ranks [b, a]."""
    import random

    random.seed(0)
    lines = [json.dumps({"query": "q1", "user": f"u{i % 50}", "shown": ["a", "b"],
                         "clicks": [int(random.random() < 0.5), int(random.random() < 0.3)],
                         "propensities": {"list": 0.99}}) for i in range(200)]
    (tmp_path / "log.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "A.run").write_text("q1 Q0 a 1 2 A\nq1 Q0 b 2 1 A\n")
    (tmp_path / "B.run").write_text("q1 Q0 b 1 2 B\nq1 Q0 a 2 1 B\n")
    return ["--log", str(tmp_path / "log.jsonl"), "--target", str(tmp_path / "B.run"), "--baseline",
            str(tmp_path / "A.run")]


def test_difference_is_undefined_when_the_target_has_no_weight(tmp_path: Path) -> None:
    """Every IPS weight of B is 0 (IPS = 0, SE 0): the difference B - A is undefined (it was -0.7626 with
    p = 1.6e-60), with the reason, and carries B's warnings, in the JSON a CI gate reads and in the table."""
    args = _two_doc_log(tmp_path)
    doc = json_out(*args, "--estimator", "ips,snips")
    by = {(r["estimator"], r["target"]): r for r in doc["results"]}
    assert by[("ips", "B")]["estimate"] == 0.0 and by[("ips", "B")]["diagnostics"]["zero_weight_share"] == 1.0
    ips, snips = doc["differences"]
    for diff in (ips, snips):
        assert diff["estimate"] is None and "undefined for 'B'" in diff["error"]
    assert ips["warnings"] == [f"ips B: {w}" for w in by[("ips", "B")]["warnings"]]
    assert any(w.startswith("ips B: every weight is 0") for w in ips["warnings"])
    assert any(w.startswith("ips B: mean importance weight 0 (se 0)") for w in ips["warnings"])
    assert snips["warnings"] == [f"snips B: {w}" for w in by[("snips", "B")]["warnings"]]
    # A's weights are all 1/0.99: a mean weight 1.0101 with SE 0 stays below the 5% tolerance, no warning
    assert by[("ips", "A")]["diagnostics"]["mean_weight"] == pytest.approx(1 / 0.99, rel=1e-12)
    assert not by[("ips", "A")]["warnings"]
    table = invoke(*args, "--estimator", "ips,snips")
    assert table.exit_code == 0, table.output
    row = next(line for line in table.stdout.splitlines() if re.match(r"\s+ips\s+B\s+A\s", line))
    assert row.split()[3:] == ["undefined", "-", "-", "-", "-", "-", "-", str(len(ips["warnings"]))]
    assert "ips B - A: estimator 'ips': undefined for 'B': every weight is 0" in table.stdout


def test_a_doubly_robust_difference_with_no_weight_is_its_models_and_says_so(tmp_path: Path) -> None:
    """dr_list with every weight of B 0 is the direct method's estimate of B (its click model's alone): the
    difference stays defined (the same number as dm's), and B's row and the difference say the log corrects
    nothing."""
    args = _two_doc_log(tmp_path)
    doc = json_out(*args, "--estimator", "dr_list,dm", "--option", "dr_list.model=cm", "--option", "dm.model=cm",
                   "--option", "dm.folds=2",  # dr_list cross-fits by default: dm the same way
                   "--metric", "reciprocal_rank")
    by = {(r["estimator"], r["target"]): r for r in doc["results"]}
    assert by[("dr_list", "B")]["diagnostics"]["zero_weight_share"] == 1.0
    assert by[("dr_list", "B")]["estimate"] == pytest.approx(by[("dm", "B")]["estimate"], rel=1e-12)
    assert any(w.startswith("every weight is 0") and "its click model's alone" in w
               for w in by[("dr_list", "B")]["warnings"])
    diff = next(d for d in doc["differences"] if d["estimator"] == "dr_list")
    assert diff.get("error") is None and diff["estimate"] == pytest.approx(
        by[("dr_list", "B")]["estimate"] - by[("dr_list", "A")]["estimate"], rel=1e-9)
    assert any(w.startswith("dr_list B: every weight is 0") for w in diff["warnings"])
