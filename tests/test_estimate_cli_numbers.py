"""`onlineeval estimate`'s numbers equal the library call on the same data (every metric, estimator options,
impressions as clusters without users, queries missing from a run), and a simulated round trip whose estimates
land within 4 standard errors of the exact truth."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import scipy.stats
import pytest

from onlineeval.estimators import DeterministicTarget, get_estimator, get_reward

from dense_df import dense_df
from estimate_cli_world import (  # noqa: F401  (world: the module-scoped fixture)
    EXAM,
    K,
    M,
    json_out,
    lib_data,
    lib_target,
    simulate,
    some_estimators,
    world,
    write_log,
    write_run,
)


@pytest.mark.parametrize("metric", ["clicks_per_query", "reciprocal_rank", "abandonment"])
def test_numbers_equal_the_library_call(world: dict[str, Any], metric: str) -> None:
    names = some_estimators(metric)
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--estimator", ",".join(names),
                   "--metric", metric, "--bootstrap", "200", "--seed", "5", "--alpha", "0.1")
    data = lib_data(world["sim"])
    target = lib_target(world["sim"], world["best"], "B")
    reward = get_reward(metric, K)
    assert [r["estimator"] for r in doc["results"]] == names
    for r in doc["results"]:
        rng = np.random.default_rng([5, zlib.crc32(r["estimator"].encode()), zlib.crc32(b"B")])
        lib = get_estimator(r["estimator"]).estimate(data, target, reward, alpha=0.1, n_boot=200, rng=rng)
        # the CLT interval with the t quantile of Bell and McCaffrey's degrees of freedom (the dense reference of
        # the estimate's weights; 299 = G - 1 for an estimator without weights)
        terms = get_estimator(r["estimator"]).terms(data, target, reward)
        df = 299 if terms.weights is None else dense_df(data.user, [terms.weights], [
            np.ones(data.n) if terms.den is None else terms.den], valid=data.valid)
        assert 1 <= df <= 299 and r["df"] == pytest.approx(df, rel=1e-9) and lib.df == r["df"]
        q = scipy.stats.t.ppf(0.95, df)
        for key, value in (("estimate", lib.value), ("se", lib.se), ("ci_low", lib.value - q * lib.se),
                           ("ci_high", lib.value + q * lib.se), ("boot_low", lib.boot_low),
                           ("boot_high", lib.boot_high)):
            assert r[key] == pytest.approx(value, rel=1e-12, abs=1e-15), (r["estimator"], key)
        assert r["n"] == 3000 and r["clusters"] == 300 == lib.clusters
        d, ld = r["diagnostics"], lib.diagnostics
        for key in ("ess", "max_weight", "top1_share", "zero_weight_share"):
            assert d[key] == pytest.approx(getattr(ld, key), rel=1e-12), (r["estimator"], key)
        # no logging policy in the log: support unknown; documents never logged for the query counted (none here)
        assert d["support_violations"] is None and d["never_logged"] == 0


def test_options_reach_the_estimator(world: dict[str, Any]) -> None:
    from dataclasses import fields

    from onlineeval.estimators import estimator_class

    opts = [f.name for f in fields(estimator_class("clipped_ips"))]
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--estimator", "clipped_ips",
                   "--option", f"clipped_ips.{opts[0]}=10")
    lib = get_estimator("clipped_ips", **{opts[0]: 10}).estimate(
        lib_data(world["sim"]), lib_target(world["sim"], world["best"], "B"))
    assert doc["estimators"]["clipped_ips"]["options"] == {opts[0]: 10}
    assert doc["results"][0]["estimate"] == pytest.approx(lib.value, rel=1e-12)


def test_an_option_written_1e9_is_a_number(world: dict[str, Any]) -> None:
    """YAML 1.1 reads 1e9 (no dot) as a string; --option takes it as the number it means (as 1.5 or 1000)."""
    base = ("--log", str(world["log"]), "--target", str(world["B"]), "--metric", "clicks_per_query",
            "--estimator", "clipped_ips")
    a = json_out(*base, "--option", "clipped_ips.cap=1e9")["results"][0]
    b = json_out(*base, "--option", "clipped_ips.cap=1000000000.0")["results"][0]
    assert a["estimate"] == b["estimate"] and a["diagnostics"]["notes"] == b["diagnostics"]["notes"]


def test_no_users_clusters_are_impressions(world: dict[str, Any]) -> None:
    sim = world["sim"]
    log = write_log(sim, world["tmp"] / "nouser.jsonl", users=False)
    doc = json_out("--log", str(log), "--target", str(world["B"]), "--estimator", "ips")
    lib = get_estimator("ips").estimate(lib_data(sim, users=False), lib_target(sim, world["best"], "B"))
    r = doc["results"][0]
    assert r["clusters"] == 3000 and r["se"] == pytest.approx(lib.se, rel=1e-12)
    assert doc["conventions"]["cluster_unit"].startswith("impression")


def test_queries_missing_from_a_run_are_left_out_with_a_warning(world: dict[str, Any]) -> None:
    part = write_run(world["tmp"] / "P.run", {q: world["best"][q] for q in (0, 1)}, "P")
    doc = json_out("--log", str(world["log"]), "--target", str(part), "--estimator", "ips")
    sim = world["sim"]
    keep = np.isin(sim.query, [0, 1])
    data = lib_data(sim).take(keep)
    lib = get_estimator("ips").estimate(data, lib_target(sim, world["best"], "P"))
    assert doc["results"][0]["n"] == int(keep.sum())
    assert doc["results"][0]["estimate"] == pytest.approx(lib.value, rel=1e-12)
    assert any("2 of 4 log queries are not in" in w for w in doc["warnings"])


def test_a_run_shorter_than_the_logs_page_is_estimated_as_that_page_with_a_warning(world: dict[str, Any]) -> None:
    """A run ranking fewer documents for a query than the log shows (a run cut at a smaller depth): its page there
    has empty slots, which earn no reward; the estimate is that shorter page's (the library's with the slots
    empty), and a warning names the queries, their depths and impressions (it was silent)."""
    sim = world["sim"]
    lists = {q: list(world["best"][q]) for q in world["best"]}
    lists[0] = lists[0][:1]
    lists[2] = lists[2][:2]
    run = write_run(world["tmp"] / "S.run", lists, "S")
    doc = json_out("--log", str(world["log"]), "--target", str(run), "--estimator", "iips,rips,ips")
    ids = sorted({int(q) for q in sim.query}, key=lambda q: f"q{q}")
    mat = np.full((len(ids), K), -1)
    for i, q in enumerate(ids):
        mat[i, : len(lists[q][:K])] = [q * M + c for c in lists[q][:K]]
    for r in doc["results"]:
        lib = get_estimator(r["estimator"]).estimate(lib_data(sim), DeterministicTarget(mat, "S"))
        assert r["estimate"] == pytest.approx(lib.value, rel=1e-12), r["estimator"]
    rows = int(np.isin(sim.query, [0, 2]).sum())
    text = [w for w in doc["warnings"] if "ranks fewer documents than the log's lists show" in w]
    assert len(text) == 1, doc["warnings"]
    assert f"for 2 of 4 queries it ranks (q0: 1 of {K}, q2: 2 of {K} documents; {rows} impressions)" in text[0]
    assert "empty slots earn no reward" in text[0] and str(run) in text[0]
    # whole-list IPS never matches the shorter list where every logged list is longer: weight 0 on those rows
    assert text[0].endswith("; ips weigh by the whole list, which no logged list of those queries equals where all "
                            "are longer: weight 0 there (no support for the shorter page, biased)")
    terms = get_estimator("ips").terms(lib_data(sim), DeterministicTarget(mat, "S"), get_reward("clicks_per_query", K))
    rows_short = np.isin(sim.query, [0, 2])
    assert rows_short.any() and np.all(terms.num[rows_short] == 0)
    full = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--estimator", "iips")
    assert not any("ranks fewer documents" in w for w in full["warnings"])


def truth(attract: np.ndarray, lists: dict[int, list[int]], weights: np.ndarray, metric: str, k: int) -> float:
    """Exact value under PBM clicks for uniformly drawn queries (the simulator's), by formula:
    clicks sum_j e_j a_j; reciprocal rank sum_j e_j a_j / (j + 1) prod_{i<j} (1 - e_i a_i)."""
    vals = []
    for q, cs in lists.items():
        c = EXAM[:k] * attract[q, cs[:k]]
        if metric == "clicks_per_query":
            vals.append(c.sum())
        else:
            none_above = np.concatenate([[1.0], np.cumprod(1 - c)[:-1]])
            vals.append((c * none_above / np.arange(1, k + 1)).sum())
    return float(np.dot(weights, vals))


@pytest.mark.slow
@pytest.mark.parametrize("logger", [False, True], ids=["propensities", "logger"])
def test_round_trip_ips_within_4_se_of_truth(tmp_path: Path, logger: bool) -> None:
    """A uniformly random logger over 4 documents showing 2 (list propensity 1/12), PBM
    clicks: IPS (any reward), and the slot-level estimators unbiased there
    (IIPS and, given the logger, the pseudoinverse for clicks; RIPS for both), within 4 SE
    of the exact value; the band is narrow enough that the reversed ranker's value lies
    outside it."""
    sim = simulate(20000, 3, 2000, seed=2026, m=4, k=2)
    log = write_log(sim, tmp_path / "rt.jsonl", logger=logger)
    lists = {q: [int(c) for c in np.argsort(-sim.attract[q])] for q in range(3)}  # most attractive first
    run = write_run(tmp_path / "T.run", lists, "T")
    extra = {"clicks_per_query": ["iips", "rips"] + (["pseudoinverse"] if logger else []), "reciprocal_rank": ["rips"]}
    for metric in ("clicks_per_query", "reciprocal_rank"):
        names = ["ips"] + extra[metric]
        doc = json_out("--log", str(log), "--target", str(run), "--estimator", ",".join(names), "--metric", metric)
        exact = truth(sim.attract, lists, np.full(3, 1 / 3), metric, 2)
        reversed_value = truth(sim.attract, {q: c[::-1] for q, c in lists.items()}, np.full(3, 1 / 3), metric, 2)
        for r in doc["results"]:
            assert abs(r["estimate"] - exact) <= 4 * r["se"], (metric, r["estimator"], r["estimate"], exact, r["se"])
            assert abs(reversed_value - exact) > 8 * r["se"], (metric, r["estimator"], r["se"])  # the check has power
            if logger:
                assert r["diagnostics"]["support_violations"] == 0 and r["diagnostics"]["support_checked"] == 20000
        if logger:
            assert doc["log"]["propensity_source"] == "logger:randtop"
            assert doc["conventions"]["item_propensities"] == "randtop: exact P(slot j shows list[j])"
