"""`onlineeval estimate --bootstrap`: a failed bootstrap keeps the estimate, adaptive_ips and dm resample
their choice / model fit again (equal to their bootstrap_estimates with the command's generators), and the
bootstrap's progress lines."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.estimators import get_estimator, get_reward

from estimate_cli_world import (  # noqa: F401  (world: the module-scoped fixture)
    K,
    json_out,
    lib_data,
    lib_target,
    world,
)


def test_failed_bootstrap_keeps_the_estimate(tmp_path: Path) -> None:
    """Only one of five users ever sees the target's list: SNIPS is defined, but its weight sits in one cluster:
    no standard error, CLT or bootstrap interval (review 11 F4: undefined, with the reason); nor has the paired
    difference (its bootstrap was tried and reported missing before; its standard error and p-value are undefined
    for the same reason as the estimates')."""
    recs = []
    for i in range(10):
        user = i % 5
        shown = ["a", "b"] if user == 0 else ["b", "a"]
        recs.append(json.dumps({"query": "q", "user": f"u{user}", "shown": shown, "clicks": [i % 2, 0],
                                "propensities": {"list": 0.5}}))
    log = tmp_path / "few.jsonl"
    log.write_text("\n".join(recs) + "\n")
    run = tmp_path / "T.run"
    run.write_text("q Q0 a 1 2 T\nq Q0 b 2 1 T\n")
    base = tmp_path / "S.run"
    base.write_text("q Q0 a 1 2 S\nq Q0 b 2 1 S\n")
    doc = json_out("--log", str(log), "--target", str(run), "--baseline", str(base), "--estimator", "snips",
                   "--bootstrap", "200")
    r = doc["results"][0]
    assert r["estimate"] == pytest.approx(0.5) and r["boot_low"] is None
    assert r["se"] is None and r["ci_low"] is None
    assert any(w.startswith("standard error and intervals undefined") for w in r["warnings"])
    d = doc["differences"][0]
    assert d["estimate"] == 0.0 and d["se"] is None and d["pvalue"] is None and d["boot_low"] is None
    assert any(w.startswith("snips T - S: standard error, interval and p-value undefined: the weights of T and S")
               for w in doc["warnings"])


def test_adaptive_ips_bootstrap_makes_its_choice_again(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """adaptive_ips's bootstrap intervals, of each estimate and of the difference, are its reselecting bootstrap's
    (AdaptiveIPS.bootstrap_estimates from the estimator's generator, target by target on the same resamples), not
    the plain bootstrap of the chosen terms; the difference's resamples are the targets' own: two passes of the
    choice for a target and a baseline (three before, the difference drawing its own)."""
    from onlineeval.estimators.adaptive_ips import AdaptiveIPS

    passes = []
    original = AdaptiveIPS.bootstrap_estimates
    monkeypatch.setattr(AdaptiveIPS, "bootstrap_estimates",
                        lambda self, data, targets, *a, **k: passes.append(len(targets)) or original(self, data,
                                                                                                      targets, *a, **k))
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--estimator", "adaptive_ips", "--metric", "clicks_per_query", "--bootstrap", "200", "--seed", "4")
    assert passes == [1, 1]
    monkeypatch.undo()
    sim = world["sim"]
    data = lib_data(sim)
    tb, ta = lib_target(sim, world["best"], "B"), lib_target(sim, world["worst"], "A")
    reward = get_reward("clicks_per_query", K)
    est = get_estimator("adaptive_ips")
    pair = est.bootstrap_estimates(data, [tb, ta], reward, 200, np.random.default_rng([4, zlib.crc32(b"adaptive_ips")]))
    for name, column in (("B", 0), ("A", 1)):
        row = next(r for r in doc["results"] if r["target"] == name)
        lo, hi = np.quantile(pair[:, column], [0.025, 0.975]) + reward.offset
        assert (row["boot_low"], row["boot_high"]) == pytest.approx((lo, hi), rel=1e-12)
    diff = doc["differences"][0]
    assert (diff["boot_low"], diff["boot_high"]) == pytest.approx(
        tuple(np.quantile(pair[:, 0] - pair[:, 1], [0.025, 0.975])), rel=1e-12)
    assert "adaptive_ips's data-driven choice" in doc["conventions"]["bootstrap_interval"]


def test_adaptive_ips_without_bootstrap_warns_of_its_fixed_choice(world: dict[str, Any]) -> None:
    base = ("--log", str(world["log"]), "--target", str(world["B"]), "--metric", "clicks_per_query")
    warned = ("its standard error, CLT interval and p-values hold the data-driven choice of behaviours fixed and "
              "are too small")
    doc = json_out(*base, "--estimator", "adaptive_ips,ips")
    ada, ips = doc["results"]
    assert any(w.startswith(warned) for w in ada["warnings"]) and not any(warned in w for w in ips["warnings"])
    booted = json_out(*base, "--estimator", "adaptive_ips", "--bootstrap", "100")["results"][0]
    assert not any(warned in w for w in booted["warnings"])
    fixed = json_out(*base, "--estimator", "adaptive_ips", "--option", "adaptive_ips.behaviours=cascade")
    assert not any(warned in w for w in fixed["results"][0]["warnings"])


def _count_fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``[fits]``: the calls of DirectMethod.resampled_values (one click-model fit of one resample) from now on."""
    from onlineeval.estimators.dm import DirectMethod

    fits = [0]
    original = DirectMethod.resampled_values

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        fits[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(DirectMethod, "resampled_values", counted)
    return fits


def test_dm_bootstrap_fits_its_model_again(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """dm's bootstrap intervals (a cascade model cross-fitted on the log, whose CLT interval holds the fitted models
    fixed), of each estimate and of the difference, are DirectMethod.bootstrap_estimates' of the target and the
    baseline together, from the estimator's generator (the model fitted again on every resample, once for both
    targets and their difference: 150 fits for 150 resamples, where each target and the difference drew and fitted
    their own, 450); its CLT interval's warning names the bootstrap."""
    fits = _count_fits(monkeypatch)
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--estimator", "dm", "--option", "dm.model=cascade", "--option", "dm.folds=2",
                   "--metric", "reciprocal_rank",
                   "--bootstrap", "150", "--seed", "4")
    assert fits[0] == 150
    monkeypatch.undo()
    sim = world["sim"]
    data = lib_data(sim)
    tb, ta = lib_target(sim, world["best"], "B"), lib_target(sim, world["worst"], "A")
    reward = get_reward("reciprocal_rank", K)
    est = get_estimator("dm", model="cascade", folds=2)
    pair = est.bootstrap_estimates(data, [tb, ta], reward, 150, np.random.default_rng([4, zlib.crc32(b"dm")]))
    row, row_a = (next(r for r in doc["results"] if r["target"] == t) for t in ("B", "A"))
    lo, hi = np.quantile(pair[:, 0], [0.025, 0.975]) + reward.offset
    assert (row["boot_low"], row["boot_high"]) == pytest.approx((lo, hi), rel=1e-12)
    assert (row_a["boot_low"], row_a["boot_high"]) == pytest.approx(
        tuple(np.quantile(pair[:, 1], [0.025, 0.975]) + reward.offset), rel=1e-12)
    # the refitted model's spread is far wider than the delta method's interval that holds it fixed, so the se,
    # interval and p-values are the bootstrap's (review 3, F-A)
    fixed_se = est.estimate(data, tb, reward).se
    assert hi - lo > 3 * 2 * 1.96 * fixed_se
    sd = float(np.std(pair[:, 0], ddof=1))
    assert row["se"] == pytest.approx(sd, rel=1e-12) and row["se_source"].startswith("bootstrap SD")
    assert row["ci_high"] - row["ci_low"] == pytest.approx(2 * scipy.stats.t.ppf(0.975, 299) * sd, rel=1e-9)
    assert any(w.startswith("se, interval and p-values are its bootstrap's") and f"{fixed_se:.4g}" in w
               for w in row["warnings"])
    # the se is the refitting bootstrap's: no warning says the interval excludes the fitting error (one did)
    assert not any("excludes its fitting error" in w or "are too small" in w for w in row["warnings"])
    diff = doc["differences"][0]
    assert (diff["boot_low"], diff["boot_high"]) == pytest.approx(
        tuple(np.quantile(pair[:, 0] - pair[:, 1], [0.025, 0.975])), rel=1e-12)
    assert "dm's click model" in doc["conventions"]["bootstrap_interval"]
    pair_sd = float(np.std(pair[:, 0] - pair[:, 1], ddof=1))
    assert diff["se"] == pytest.approx(pair_sd, rel=1e-12) and diff["se_source"].startswith("bootstrap SD")
    assert diff["pvalue"] == pytest.approx(2 * scipy.stats.t.sf(abs(diff["estimate"]) / pair_sd, 299), rel=1e-9)
    assert any(w.startswith("dm: the differences' delta-method standard error holds the click model fitted on the "
                            "log fixed") and "their se, interval and p-value are the paired bootstrap's" in w
               for w in doc["warnings"])


def test_bootstrap_progress_lines() -> None:
    """A line at most every `every` seconds with the resamples done, time spent and left, and the last line; a
    bootstrap shorter than `every` prints nothing."""
    import io

    from onlineeval.cli.estimate import BootstrapProgress

    t = [0.0]
    out = io.StringIO()
    p = BootstrapProgress(out, every=5.0, clock=lambda: t[0])
    for done in range(1, 5):  # 4 resamples in 3 s: nothing
        t[0] = done - 1.0
        p("dm of B", done, 4)
    assert out.getvalue() == ""
    for done in range(1, 201):  # 1 s each after the first
        t[0] = 10.0 + (done - 1)
        p("dm of A", done, 200)
    lines = out.getvalue().splitlines()
    assert lines[0] == "bootstrap of dm of A: 6/200 resamples, 5s, about 2m42s left"
    assert lines[-1] == "bootstrap of dm of A: 200/200 resamples, 3m19s"
    assert len(lines) == 1 + 199 // 5


def test_dm_bootstrap_reports_its_progress(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from onlineeval.cli import estimate as cli_estimate

    original = cli_estimate.BootstrapProgress.__init__
    monkeypatch.setattr(cli_estimate.BootstrapProgress, "__init__",
                        lambda self, stream=None, every=5.0, clock=None: original(self, stream, 0.0, clock))
    result = CliRunner().invoke(app, ["estimate", "--log", str(world["log"]), "--target", str(world["B"]),
                                      "--estimator", "dm,ips", "--option", "dm.model=cascade", "--metric",
                                      "reciprocal_rank", "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("bootstrap of")]
    assert re.fullmatch(r"bootstrap of dm \(cm fitted again on every resample\) of B: 100/100 resamples, \d+s",
                        lines[-1]), lines[-1]
    assert re.fullmatch(r"bootstrap of dm .* of B: 1/100 resamples, \d+s, about \S+ left", lines[0]), lines[0]
    assert len(lines) == 100  # dm's resamples only (ips's bootstrap fits nothing)


def test_the_python_apis_estimate_reports_progress_to_on_progress(world: dict[str, Any]) -> None:
    """onlineeval.api.estimate(on_progress=...) gets the CLI's progress calls (a dm bootstrap's resamples; a
    logger's Plackett-Luce propensities: tests/test_propensity_progress.py); the same numbers as without it."""
    from onlineeval.api import estimate

    calls: list[tuple[str, int, int]] = []
    kwargs = dict(estimators="dm,ips", metric="reciprocal_rank", bootstrap=100, options={"dm": {"model": "cascade"}})
    got = estimate(world["log"], {"B": world["B"]}, on_progress=lambda *c: calls.append(c), **kwargs)
    assert calls == [("dm (cm fitted again on every resample) of B", i, 100) for i in range(1, 101)]
    plain = estimate(world["log"], {"B": world["B"]}, **kwargs)
    assert got.results.equals(plain.results)


def test_dm_bootstrap_of_a_target_ranking_some_queries_resamples_its_own_impressions(
        world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A target ranking two of the four queries is estimated on their impressions: its refitting bootstrap (and its
    difference's, on the same impressions) draws from the estimator's generator keyed by those impressions' crc32,
    every target ranking them evaluated on each fit; the whole log's resamples serve the others. Two passes of fits
    for three targets and two differences (five before)."""
    from estimate_cli_world import write_run

    best = world["best"]
    swapped = {q: [best[q][1], best[q][0], *best[q][2:]] for q in best}
    c_run = write_run(world["tmp"] / "C.run", {q: swapped[q] for q in (0, 1)}, "C")
    fits = _count_fits(monkeypatch)
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--target", str(c_run), "--baseline",
                   str(world["A"]), "--estimator", "dm", "--option", "dm.model=cascade", "--metric", "reciprocal_rank",
                   "--bootstrap", "120", "--seed", "4")
    assert fits[0] == 240
    monkeypatch.undo()
    sim = world["sim"]
    data = lib_data(sim)
    rows = np.flatnonzero(np.isin(sim.query, [0, 1]))
    tb, ta = lib_target(sim, best, "B"), lib_target(sim, world["worst"], "A")
    tc = lib_target(sim, swapped, "C")
    reward = get_reward("reciprocal_rank", K)
    est = get_estimator("dm", model="cascade")
    key = [4, zlib.crc32(b"dm"), zlib.crc32(rows.astype(np.int64).tobytes())]
    reps = est.bootstrap_estimates(data.take(rows), [tb, tc, ta], reward, 120, np.random.default_rng(key))
    row = next(r for r in doc["results"] if r["target"] == "C")
    assert row["n"] == rows.size
    assert (row["boot_low"], row["boot_high"]) == pytest.approx(
        tuple(np.quantile(reps[:, 1], [0.025, 0.975]) + reward.offset), rel=1e-12)
    diff = next(d for d in doc["differences"] if d["target"] == "C")
    assert (diff["boot_low"], diff["boot_high"]) == pytest.approx(
        tuple(np.quantile(reps[:, 1] - reps[:, 2], [0.025, 0.975])), rel=1e-12)
