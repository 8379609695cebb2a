"""`onlineeval estimate` / `onlineeval.estimate` after review 3 (/work/notes/review3.md): undefined estimates keep
every JSON key (F-H), estimators biased for the metric's reward kind are warned per estimate and estimates outside
the metric's range are noted (F-D), CLT intervals use t_(G-1) quantiles and few clusters are warned (F-G; the
library's interval and its coverage with 4 clusters: tests/test_estimators_intervals.py), and with a bootstrap the se
and p-values of estimators whose delta method holds a data-driven choice fixed are the bootstrap's (F-A); the API's
warnings spell its own argument (M2)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats

from onlineeval.estimators import LoggedData, get_estimator, get_reward

from estimate_cli_world import (  # noqa: F401  (world: the module-scoped fixture)
    K,
    invoke,
    json_out,
    lib_data,
    lib_target,
    world,
    write_log,
    write_run,
)


# ------------------------------------------------------------------------------------------------ F-H
def test_undefined_estimate_keeps_every_key(world: dict[str, Any]) -> None:
    """A target first-ranking a document the log never shows: SNIPS is 0/0 for it; its record (and its difference's)
    has every key, null where undefined, as a defined one has (was: only estimator, target, estimate, error,
    assumption, warnings)."""
    from onlineeval.estimators.log_estimates import DIAGNOSTIC_KEYS, DIFFERENCE_KEYS, RESULT_KEYS

    lists = {q: [c + 100 for c in world["best"][q]] for q in range(4)}
    run = write_run(world["tmp"] / "Z.run", lists, "Z")
    doc = json_out("--log", str(world["log"]), "--target", str(run), "--baseline", str(world["A"]), "--estimator",
                   "ips,snips")
    by = {(r["estimator"], r["target"]): r for r in doc["results"]}
    bad, good = by[("snips", "Z")], by[("snips", "A")]
    assert list(bad) == list(good) == list(RESULT_KEYS)
    assert set(bad["diagnostics"]) == set(good["diagnostics"]) == set(DIAGNOSTIC_KEYS)
    assert bad["estimate"] is None and "undefined" in bad["error"]
    for key in ("se", "ci_low", "ci_high", "boot_low", "boot_high", "se_source"):
        assert bad[key] is None, key
    assert (bad["n"], bad["clusters"]) == (3000, 300)
    assert all(v is None for k, v in bad["diagnostics"].items() if k != "notes") and bad["diagnostics"]["notes"] == {}
    diffs = {d["estimator"]: d for d in doc["differences"]}
    assert list(diffs["snips"]) == list(DIFFERENCE_KEYS) == list(diffs["ips"])
    assert diffs["snips"]["estimate"] is None and diffs["snips"]["pvalue"] is None and diffs["snips"]["n"] == 3000
    # IPS of the all-zero-weight target: 0 with standard error 0, and the warning says so
    ips = by[("ips", "Z")]
    assert ips["estimate"] == 0.0 and ips["se"] is None and ips["ci_low"] is None  # review 11, F4: no 0-width CI
    assert any(w.startswith("standard error and intervals undefined") for w in ips["warnings"])
    assert any("(and its standard error) says nothing" in w for w in ips["warnings"])


# ------------------------------------------------------------------------------------------------ F-D
def test_estimators_biased_for_the_metric_are_warned(world: dict[str, Any]) -> None:
    """IIPS is biased for first-click rewards under every click model and for additive ones off PBM: each estimate
    says so, with the estimators unbiased there that run on the log; IPS, RIPS and clipped IPS (its bias has its
    own estimate) get no such warning."""
    args = ["--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"])]
    doc = json_out(*args, "--estimator", "iips,ips,rips", "--metric", "reciprocal_rank")
    for r in doc["results"]:
        biased = [w for w in r["warnings"] if " is biased for " in w]
        if r["estimator"] != "iips":
            assert not biased
            continue
        (w,) = biased
        assert w.startswith("iips is biased for reciprocal_rank (a first-click reward) under every click model "
                            "(pbm, cascade, dcm)")
        named = w.split("that run on this log: ")[1].split("; ")[0].split(", ")  # then the assumption check's verdict
        assert {"ips", "snips", "rips", "snrips"} <= set(named) and "iips" not in named and "adaptive_ips" not in named
    diff = next(d for d in doc["differences"] if d["estimator"] == "iips")
    assert any(w.startswith("iips B: iips is biased for reciprocal_rank") for w in diff["warnings"])
    doc = json_out(*args, "--estimator", "iips,clipped_ips", "--option", "clipped_ips.cap=5", "--metric",
                   "clicks_per_query")
    (w,) = [w for w in doc["results"][0]["warnings"] if " is biased for " in w]
    assert w.startswith("iips is biased for clicks_per_query (an additive reward) when clicks follow cascade, dcm "
                        "(unbiased only under pbm clicks): its interval then covers")
    assert not any(" is biased for " in w for w in doc["results"][1]["warnings"])


def test_metric_range_and_note() -> None:
    """The metric's range from its definition (c0 + sum_j r_j), and the note outside it only."""
    from onlineeval.estimators.log_estimates import metric_range, range_note

    k = 4
    assert metric_range(get_reward("clicks_per_query", k), k) == (0.0, 4.0)
    assert metric_range(get_reward("reciprocal_rank", k), k) == (0.0, 1.0)
    assert metric_range(get_reward("abandonment", k), k) == (0.0, 1.0)
    ab = get_reward("abandonment", k)
    assert range_note(0.0, ab, k) is None and range_note(1.0, ab, k) is None and range_note(0.37, ab, k) is None
    assert range_note(-0.0196, ab, k).startswith("the estimate -0.0196 lies outside the range of abandonment, [0, 1]")
    assert range_note(4.2, get_reward("clicks_per_query", k), k) is not None


def test_iips_abandonment_outside_its_range_is_noted(tmp_path: Path) -> None:
    """Two documents shown in either order with item propensity 0.4 written for each slot (their true 0.5: IIPS's
    weights 2.5 sum to 1.25 per impression), every first slot clicked: IIPS's abandonment is 1 - 1.25 = -0.25,
    outside [0, 1], and noted; IPS (list propensity 0.5) stays at 0."""
    recs = []
    for i in range(400):
        shown = ["a", "b"] if i % 2 else ["b", "a"]
        recs.append(json.dumps({"query": "q", "user": f"u{i % 40}", "shown": shown, "clicks": [1, 0],
                                "propensities": {"list": 0.5, "item": [0.4, 0.4]}}))
    log = tmp_path / "two.jsonl"
    log.write_text("\n".join(recs) + "\n")
    run = tmp_path / "T.run"
    run.write_text("q Q0 a 1 2 T\nq Q0 b 2 1 T\n")
    doc = json_out("--log", str(log), "--target", str(run), "--estimator", "iips,ips", "--metric", "abandonment")
    iips, ips = doc["results"]
    assert iips["estimate"] == pytest.approx(-0.25, abs=1e-12) and ips["estimate"] == pytest.approx(0.0, abs=1e-12)
    assert any(w.startswith("the estimate -0.25 lies outside the range of abandonment, [0, 1]")
               for w in iips["warnings"])
    assert not any("outside the range" in w for w in ips["warnings"])


# ------------------------------------------------------------------------------------------------ F-G
def test_few_clusters_warned_and_t_quantile_used(world: dict[str, Any], tmp_path: Path) -> None:
    """The world's log with its 300 users folded into 4: the interval is estimate -+ t_df x se (df at most 3) and the
    log is
    warned of its 4 clusters; with 300 users, one holding 2,700 of 3,000 impressions (effective number 1.2), the
    warning names the effective number; the world's log itself (300 similar users) is not warned."""
    recs = [json.loads(x) for x in world["log"].read_text().splitlines()]
    for variant, users in (("few", [f"u{i % 4}" for i in range(3000)]),
                           ("heavy", ["u0" if i % 10 else f"u{i // 10}" for i in range(3000)])):
        for i, rec in enumerate(recs):
            rec["user"] = users[i]
        path = tmp_path / f"{variant}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
        doc = json_out("--log", str(path), "--target", str(world["B"]), "--estimator", "snips")
        r = doc["results"][0]
        (w,) = [w for w in doc["warnings"] if "fewer than 30" in w]
        if variant == "few":
            assert r["clusters"] == 4 and w.startswith("the CLT intervals and p-values rest on 4 clusters, fewer")
            # t with Bell and McCaffrey's df: at most G - 1 = 3 (the world's weights vary between the 4 users)
            assert 1 <= r["df"] <= 3
            q = scipy.stats.t.ppf(0.975, r["df"])
            assert (r["ci_low"], r["ci_high"]) == pytest.approx((r["estimate"] - q * r["se"],
                                                                 r["estimate"] + q * r["se"]), rel=1e-12)
        else:
            assert r["clusters"] == 300 and "(effective number by impressions 1.2:" in w
    assert not any("fewer than 30" in w for w in json_out("--log", str(world["log"]), "--target", str(world["B"]),
                                                          "--estimator", "snips")["warnings"])


def test_effective_clusters_definition() -> None:
    from onlineeval.estimators.log_estimates import effective_clusters

    user = np.array([0, 0, 0, 1, 2, 2])
    data = LoggedData(np.zeros(6, dtype=np.int64), np.zeros((6, 1), dtype=np.int64), np.zeros((6, 1), dtype=bool),
                      p_list=np.ones(6), user=user)
    assert effective_clusters(data) == (3, pytest.approx(36 / (9 + 1 + 4), rel=1e-15))


# ------------------------------------------------------------------------------------------------ F-A, M2
def test_adaptive_ips_se_and_p_from_its_bootstrap(world: dict[str, Any]) -> None:
    """With --bootstrap, adaptive_ips's se is the SD of its reselecting bootstrap (AdaptiveIPS.bootstrap_estimates
    from the estimator's generator, whose resamples the targets and the difference share), its interval
    estimate -+ t_df x that SD, the difference's se and p-value the paired bootstrap's, each marked (se_source, a
    warning, 'b' in the table); IPS keeps the delta method's."""
    args = ["--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]), "--estimator",
            "adaptive_ips,ips", "--metric", "clicks_per_query", "--bootstrap", "200", "--seed", "4"]
    doc = json_out(*args)
    sim = world["sim"]
    data = lib_data(sim)
    tb, ta = lib_target(sim, world["best"], "B"), lib_target(sim, world["worst"], "A")
    reward = get_reward("clicks_per_query", K)
    est = get_estimator("adaptive_ips")
    pair = est.bootstrap_estimates(data, [tb, ta], reward, 200, np.random.default_rng([4, zlib.crc32(b"adaptive_ips")]))
    reps = pair[:, 0]
    row = next(r for r in doc["results"] if r["target"] == "B" and r["estimator"] == "adaptive_ips")
    sd, q = float(np.std(reps, ddof=1)), scipy.stats.t.ppf(0.975, row["df"])  # the df of its weights (below 299)
    assert 1 <= row["df"] <= 299
    assert row["se"] == pytest.approx(sd, rel=1e-12) and row["se_source"].startswith("bootstrap SD")
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((row["estimate"] - q * sd, row["estimate"] + q * sd))
    delta = est.estimate(data, tb, reward).se
    assert any(w.startswith("se, interval and p-values are its bootstrap's") and f"{delta:.4g}" in w
               for w in row["warnings"])
    # the CLT-only warning (no bootstrap asked) is not repeated next to the bootstrap's se, nor in the notes
    assert not any("covers below the nominal level" in w or "too small; --bootstrap" in w for w in row["warnings"])
    assert "warnings" not in row["diagnostics"]["notes"]
    diff = next(d for d in doc["differences"] if d["estimator"] == "adaptive_ips")
    psd = float(np.std(pair[:, 0] - pair[:, 1], ddof=1))
    assert diff["se"] == pytest.approx(psd, rel=1e-12)
    assert 1 <= diff["df"] <= 299
    assert diff["pvalue"] == pytest.approx(2 * scipy.stats.t.sf(abs(diff["estimate"]) / psd, diff["df"]), rel=1e-9)
    ips = next(r for r in doc["results"] if r["target"] == "B" and r["estimator"] == "ips")
    assert ips["se_source"] == "delta method"
    assert ips["se"] == pytest.approx(get_estimator("ips").estimate(data, tb, reward).se, rel=1e-12)
    table = invoke(*args)
    assert table.exit_code == 0 and f"{sd:.4f}b" in table.stdout


def test_adaptive_ips_without_bootstrap_says_its_se_is_too_small_in_the_callers_spelling(
        world: dict[str, Any]) -> None:
    """Without a bootstrap the warning says the se is too small and how to get a valid one: '--bootstrap N' in the
    CLI, 'bootstrap=N' in the API (was '--bootstrap N' in both; review 3, M2)."""
    import onlineeval

    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--estimator", "adaptive_ips")
    text = "its standard error, CLT interval and p-values hold the data-driven choice of behaviours fixed and are " \
           "too small"
    (w,) = [w for w in doc["results"][0]["warnings"] if w.startswith(text)]
    assert "--bootstrap N (e.g. 1000)" in w
    api = onlineeval.estimate(world["log"], {"B": world["B"]}, "adaptive_ips", baseline=("A", world["A"]))
    mine = [w for w in api.warnings if text in w or "delta-method standard error holds" in w]
    assert len(mine) >= 2 and all("bootstrap=N (e.g. 1000)" in w and "--bootstrap" not in w for w in mine)



def test_api_unseen_error_names_the_run_file_and_line(world: dict[str, Any]) -> None:
    """On a log with a logger, a run file ranking a document the policy cannot show: the API's error names the run
    file and line as the CLI's does (review 3, M2; was no file and line); a dict target names none."""
    import onlineeval
    from onlineeval.errors import InputError

    sim, tmp = world["sim"], world["tmp"]
    logged = write_log(sim, tmp / "api_logger.jsonl", logger=True)
    lists = {q: list(world["best"][q]) for q in range(4)}
    run = write_run(tmp / "V.run", lists, "V")
    text = run.read_text().splitlines()
    text[11] = text[11].replace(text[11].split()[2], "zz")  # q2's 2nd document
    run.write_text("\n".join(text) + "\n")
    with pytest.raises(InputError) as err:
        onlineeval.estimate(logged, {"V": run}, "ips")
    assert (err.value.path, err.value.line) == (str(run), 12)
    assert ("ranks document 'zz' at rank 2 for query 'q2', which the log's logging policy cannot show"
            in err.value.message)
    with pytest.raises(InputError) as err:
        onlineeval.estimate(logged, {"V": {"q2": ["q2d0", "zz", "q2d1"]}}, "ips")
    assert err.value.path is None and err.value.line is None
