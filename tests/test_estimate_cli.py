"""`onlineeval estimate` through typer's CliRunner: numbers equal the library call on the
same data, paired differences equal an independent delta-method computation, JSON keys,
every refusal as one line with file:line and exit 2, and a simulated round trip whose IPS
estimate lands within 4 standard errors of the exact truth."""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.estimators import (
    DeterministicTarget,
    LoggedData,
    available_estimators,
    get_estimator,
    get_reward,
)

runner = CliRunner()

K = 3
M = 5  # candidates per query
EXAM = np.array([1.0, 0.6, 0.3])  # PBM examination by slot


@dataclass
class Sim:
    """A simulated log (uniformly random ordered K of M candidates) and its arrays."""

    query: np.ndarray  # (n,) query number
    user: np.ndarray  # (n,) user number (first appearances in increasing order)
    shown: np.ndarray  # (n, K) candidate number
    clicks: np.ndarray  # (n, K) bool
    attract: np.ndarray  # (Q, m) attractiveness
    m: int = M
    k: int = K

    def doc(self, q: int, c: int) -> str:
        return f"q{q}d{c}"


def simulate(n: int, n_queries: int, n_users: int, seed: int, m: int = M, k: int = K) -> Sim:
    rng = np.random.default_rng(seed)
    attract = rng.uniform(0.05, 0.9, size=(n_queries, m))
    query = rng.integers(0, n_queries, n)
    user = np.concatenate([np.arange(min(n, n_users)), rng.integers(0, n_users, max(0, n - n_users))])
    shown = np.argsort(rng.random((n, m)), axis=1)[:, :k]  # a uniformly random ordered k of m
    clicks = rng.random((n, k)) < EXAM[None, :k] * attract[query[:, None], shown]
    return Sim(query, user, shown, clicks, attract, m, k)


def uniform_propensities(m: int, k: int) -> dict[str, Any]:
    """A uniformly random ordered k of m: prefix j has probability 1 / (m (m-1) ... (m-j)),
    each document 1/m at its slot."""
    prefix = [float(1 / np.prod(np.arange(m - j, m + 1))) for j in range(k)]
    return {"list": prefix[-1], "prefix": prefix, "item": [1 / m] * k}


def write_log(sim: Sim, path: Path, forms: tuple[str, ...] = ("list", "prefix", "item"), logger: bool = False,
              users: bool = True) -> Path:
    props = uniform_propensities(sim.m, sim.k)
    assert sim.m != 5 or sim.k != 3 or props == {"list": 1 / 60, "prefix": [1 / 5, 1 / 20, 1 / 60], "item": [0.2] * 3}
    lines = []
    for i in range(sim.query.size):
        q = int(sim.query[i])
        shown = [sim.doc(q, int(c)) for c in sim.shown[i]]
        rec: dict[str, Any] = {"query": f"q{q}", "shown": shown}
        if users:
            rec["user"] = f"u{int(sim.user[i])}"
        rec["clicks"] = [d for d, c in zip(shown, sim.clicks[i]) if c] if i % 2 else sim.clicks[i].astype(int).tolist()
        if logger:
            rec["logger"] = {"policy": "randtop", "n": sim.m,
                             "scores": {sim.doc(q, c): float(sim.m - c) for c in range(sim.m)}}
        else:
            rec["propensities"] = {f: props[f] for f in forms}
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_run(path: Path, lists: dict[int, list[int]], tag: str) -> Path:
    """A TREC run ranking candidate numbers of each query (scores descending)."""
    rows = [f"q{q} Q0 q{q}d{c} {r + 1} {10 - r} {tag}" for q, cs in lists.items() for r, c in enumerate(cs)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def lib_data(sim: Sim, users: bool = True) -> LoggedData:
    """The same log built directly (sorted query ids; own document numbering q * M + c)."""
    ids = sorted({f"q{q}" for q in sim.query})
    qidx = np.array([ids.index(f"q{q}") for q in sim.query])
    n = sim.query.size
    return LoggedData(
        qidx, sim.query[:, None] * M + sim.shown, sim.clicks,
        p_list=np.full(n, 1 / 60), p_prefix=np.tile([1 / 5, 1 / 20, 1 / 60], (n, 1)), p_item=np.full((n, K), 0.2),
        user=sim.user if users else None,
    )


def lib_target(sim: Sim, lists: dict[int, list[int]], name: str) -> DeterministicTarget:
    ids = sorted({int(q) for q in sim.query}, key=lambda q: f"q{q}")
    return DeterministicTarget(np.array([[q * M + c for c in lists[q][:K]] for q in ids]), name)


def invoke(*args: str) -> Any:
    return runner.invoke(app, ["estimate", *args])


def json_out(*args: str) -> dict[str, Any]:
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("estimate")
    sim = simulate(3000, 4, 300, seed=11)
    best = {q: list(np.argsort(-sim.attract[q])) for q in range(4)}
    worst = {q: list(np.argsort(sim.attract[q])) for q in range(4)}
    return {
        "sim": sim, "tmp": tmp, "best": best, "worst": worst,
        "log": write_log(sim, tmp / "log.jsonl"),
        "B": write_run(tmp / "B.run", best, "B"),
        "A": write_run(tmp / "A.run", worst, "A"),
    }


def some_estimators(metric: str = "reciprocal_rank") -> list[str]:
    """IPS and SNIPS, plus the slot-level estimators when they are registered, each only where
    it can estimate ``metric`` (snrips: first-click rewards only)."""
    from onlineeval.estimators import estimator_class

    kind = get_reward(metric, K).kind
    return [e for e in ("ips", "snips", "iips", "rips", "snrips")
            if e in available_estimators() and kind in estimator_class(e).rewards]


# ------------------------------------------------------------------------ numbers
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
        for key, value in (("estimate", lib.value), ("se", lib.se), ("ci_low", lib.ci_low), ("ci_high", lib.ci_high),
                           ("boot_low", lib.boot_low), ("boot_high", lib.boot_high)):
            assert r[key] == pytest.approx(value, rel=1e-12, abs=1e-15), (r["estimator"], key)
        assert r["n"] == 3000 and r["clusters"] == 300 == lib.clusters
        d, ld = r["diagnostics"], lib.diagnostics
        for key in ("ess", "max_weight", "top1_share", "zero_weight_share"):
            assert d[key] == pytest.approx(getattr(ld, key), rel=1e-12), (r["estimator"], key)
        # no logging policy in the log: support counts documents never shown (none here)
        assert d["support_violations"] == 0 and d["support_checked"] == 3000


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
        cols = []
        for t in (tb, ta):
            terms = est.terms(data, t, reward)
            den = np.ones(data.n) if terms.den is None else terms.den
            cols += [np.bincount(sim.user, terms.num), np.bincount(sim.user, den)]
        z = np.column_stack(cols)  # (G, 4)
        g = z.shape[0]
        mean = z.mean(axis=0)
        rb, ra = mean[0] / mean[1], mean[2] / mean[3]
        grad = np.array([1 / mean[1], -rb / mean[1], -1 / mean[3], ra / mean[3]])
        se = float(np.sqrt(grad @ np.cov(z, rowvar=False, ddof=1) @ grad / g))
        assert r["estimate"] == pytest.approx(rb - ra, rel=1e-12)
        assert r["se"] == pytest.approx(se, rel=1e-9)
        assert r["ci_high"] - r["ci_low"] == pytest.approx(2 * 1.959963984540054 * se, rel=1e-9)
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


def test_json_keys_and_table(world: dict[str, Any]) -> None:
    args = ["--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
            "--estimator", "ips,snips", "--metric", "abandonment", "--seed", "9"]
    doc = json_out(*args)
    assert set(doc) == {"log", "metric", "estimators", "assumptions", "results", "differences", "warnings",
                        "conventions"}
    assert doc["log"] == {"path": str(world["log"]), "impressions": 3000, "queries": 4, "clusters": 300, "k": 3,
                          "propensities": ["p_list", "p_prefix", "p_item"], "propensity_source": "log"}
    assert set(doc["results"][0]) == {"estimator", "target", "estimate", "se", "ci_low", "ci_high", "boot_low",
                                      "boot_high", "n", "clusters", "assumption", "diagnostics", "warnings", "error"}
    assert set(doc["results"][0]["diagnostics"]) == {
        "ess", "max_weight", "top1_share", "zero_weight_share", "support_violations", "support_checked", "notes",
        "weight_level", "weights_per_impression", "ess_impressions", "mean_weight", "mean_weight_se",
        "mean_weight_expected", "mean_weight_off"}
    assert set(doc["differences"][0]) == {"estimator", "target", "baseline", "estimate", "se", "ci_low", "ci_high",
                                          "pvalue", "boot_low", "boot_high", "n", "clusters", "warnings"}
    assert doc["results"][0]["boot_low"] is None  # no bootstrap asked: null, not NaN
    conv = doc["conventions"]
    for key in ("metric", "reward", "alpha", "cluster_unit", "propensity_source", "logging_policy", "ties", "seed",
                "bootstrap", "bootstrap_interval", "target_depth", "support", "interval"):
        assert key in conv
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


def test_options_reach_the_estimator(world: dict[str, Any]) -> None:
    if "clipped_ips" not in available_estimators():
        pytest.skip("clipped_ips is not registered")
    from dataclasses import fields

    from onlineeval.estimators import estimator_class

    opts = [f.name for f in fields(estimator_class("clipped_ips"))]
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--estimator", "clipped_ips",
                   "--option", f"clipped_ips.{opts[0]}=10")
    lib = get_estimator("clipped_ips", **{opts[0]: 10}).estimate(
        lib_data(world["sim"]), lib_target(world["sim"], world["best"], "B"))
    assert doc["estimators"]["clipped_ips"]["options"] == {opts[0]: 10}
    assert doc["results"][0]["estimate"] == pytest.approx(lib.value, rel=1e-12)


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


# ------------------------------------------------------------------------ refusals
def one_line_error(result: Any, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in result.output, result.output
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def test_bad_log_lines_exit_2_with_file_and_line(world: dict[str, Any], tmp_path: Path) -> None:
    good = world["log"].read_text().splitlines()[:2]
    cases = [
        ('{"query": "q1", "shown": ["a"]', "malformed JSON"),
        ('{"query": "q0", "clicks": [], "propensities": {"list": 0.5}}', "missing key 'shown'"),
        ('{"query": "q0", "shown": ["a", 1], "clicks": [], "propensities": {"list": 0.5}}', "list of document id"),
        ('{"query": "q0", "shown": ["a", "a"], "clicks": [], "propensities": {"list": 0.5}}', "shown twice"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": ["x"], '
         '"propensities": {"list": 0.0167, "prefix": [0.2, 0.05, 0.0167], "item": [0.2, 0.2, 0.2]}}'), "not shown"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": [], '
         '"propensities": {"list": 0.0, "prefix": [0.2, 0.05, 0.0167], "item": [0.2, 0.2, 0.2]}}'), "(0, 1]"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": [], '
         '"propensities": {"list": 0.01, "prefix": [0.2, 0.05, 0.0167], "item": [0.2, 0.2, 0.2]}}'), "last prefix"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": [], '
         '"propensities": {"list": 0.0167, "prefix": [0.2, 0.5, 0.0167], "item": [0.2, 0.2, 0.2]}}'), "non-increasing"),
        (('{"query": "q0", "shown": ["a", "b", "c"], "clicks": [], '
         '"propensities": {"list": 0.0167, "prefix": [0.2, 0.05], "item": [0.2, 0.2, 0.2]}}'), "has 2 values"),
        ('{"query": "q0", "shown": ["a"], "clicks": [], "logger": {"policy": "nope", "scores": {"a": 1}}}',
         "a logger but line 1"),
    ]
    for bad, needle in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join([*good, bad]) + "\n", encoding="utf-8")
        one_line_error(invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips"),
                       f"{path}:3: ", needle)
    path.write_bytes(("\n".join(good) + "\n").encode() + b'{"query": "\xe9"}\n')
    one_line_error(invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips"),
                   f"{path}:3: not valid UTF-8")
    path.write_text("\n\n")
    one_line_error(invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips"),
                   f"{path}: the log is empty")
    one_line_error(invoke("--log", str(tmp_path / "missing.jsonl"), "--target", str(world["B"]), "--estimator", "ips"),
                   "missing.jsonl")
    path.write_text('{"query": "q0", "shown": ["a"], "clicks": [], "logger": {"policy": "nope", "scores": {"a": 1}}}\n')
    one_line_error(invoke("--log", str(path), "--target", str(world["B"]), "--estimator", "ips"),
                   f"{path}:1: unknown logging policy 'nope'; allowed: ")


def test_option_errors(world: dict[str, Any]) -> None:
    base = ["--log", str(world["log"]), "--target", str(world["B"])]
    allowed = ", ".join(available_estimators())
    one_line_error(invoke(*base, "--estimator", "ips,nope"), "--estimator: unknown estimator 'nope'; allowed: "
                   + allowed)
    one_line_error(invoke(*base, "--estimator", "ips,ips"), "named twice")
    one_line_error(invoke(*base, "--estimator", "ips", "--metric", "ndcg"), "--metric: unknown metric 'ndcg'")
    one_line_error(invoke(*base, "--estimator", "ips", "--bootstrap", "50"), "--bootstrap: must be 0")
    one_line_error(invoke(*base, "--estimator", "ips", "--alpha", "1.5"), "--alpha: must be in (0, 1)")
    one_line_error(invoke(*base, "--estimator", "ips", "--format", "xml"), "--format: must be one of table, json")
    one_line_error(invoke(*base, "--estimator", "ips", "--ties", "optimistic"), "--ties: must be one of")
    one_line_error(invoke(*base, "--estimator", "ips", "--option", "ips"), "expected estimator.key=value")
    one_line_error(invoke(*base, "--estimator", "ips", "--option", "snips.x=1"), "'snips' is not one of the estimators")
    one_line_error(invoke(*base, "--estimator", "ips", "--option", "ips.bogus=1"),
                   "--option ips.bogus: unknown option")
    one_line_error(invoke(*base, "--estimator", "ips", "--baseline", str(world["B"])), "given twice")


def test_estimator_needing_missing_propensities(world: dict[str, Any]) -> None:
    log = write_log(world["sim"], world["tmp"] / "item_only.jsonl", forms=("item",))
    err = one_line_error(invoke("--log", str(log), "--target", str(world["B"]), "--estimator", "snips,ips"),
                         f"{log}: estimator 'snips' needs propensities.list; the log carries propensities.item; "
                         "estimators that could run on it: ")
    runnable = err.rsplit("could run on it: ", 1)[1].split(", ")
    from onlineeval.estimators import estimator_class

    # the pseudoinverse reads the logging policy itself, which the log does not carry
    assert runnable == [e for e in available_estimators() if set(estimator_class(e).needs) <= {"p_item"}
                        and e != "pseudoinverse"]
    assert "ips" not in runnable and "snips" not in runnable


def test_unseen_documents_error_names_run_line_or_count_as_violations(world: dict[str, Any]) -> None:
    sim, tmp = world["sim"], world["tmp"]
    lists = {q: list(world["best"][q]) for q in range(4)}
    run = tmp / "U.run"
    write_run(run, lists, "U")
    text = run.read_text().splitlines()
    # query q2 ranks a document the log never shows for it (line 12 = q2's 2nd document)
    assert text[11].startswith("q2 Q0 ")
    text[11] = text[11].replace(text[11].split()[2], "zz")
    run.write_text("\n".join(text) + "\n")
    err = one_line_error(invoke("--log", str(world["log"]), "--target", str(run), "--estimator", "ips"),
                         f"{run}:12: the target ranks document 'zz' at rank 2 for query 'q2', which the log never "
                         "shows", "--allow-unseen")
    assert "(1 such slots in 1 queries" in err
    doc = json_out("--log", str(world["log"]), "--target", str(run), "--estimator", "ips,snips", "--allow-unseen")
    n_q2 = int((sim.query == 2).sum())
    for r in doc["results"]:
        assert r["diagnostics"]["support_violations"] == n_q2 and r["diagnostics"]["support_checked"] == 3000
        assert any(w.startswith(f"support violated on {n_q2} of 3000 impressions") for w in r["warnings"])
    assert any("ranks 1 documents the log never shows" in w and f"{n_q2} impressions" in w for w in doc["warnings"])


def test_all_zero_weights_are_flagged(world: dict[str, Any]) -> None:
    """A target that ranks, first for every query, a document the log never shows: no
    logged list agrees with it, IPS is 0 with standard error 0, and the output says why."""
    lists = {q: [c + 100 for c in world["best"][q]] for q in range(4)}
    run = write_run(world["tmp"] / "Z.run", lists, "Z")
    doc = json_out("--log", str(world["log"]), "--target", str(run), "--estimator", "ips", "--allow-unseen")
    (r,) = doc["results"]
    assert r["estimate"] == 0.0 and r["se"] == 0.0 and r["diagnostics"]["zero_weight_share"] == 1.0
    assert r["diagnostics"]["support_violations"] == 3000
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


def test_failed_bootstrap_keeps_the_estimate(tmp_path: Path) -> None:
    """Only one of five users ever sees the target's list: SNIPS is defined, but most
    bootstrap resamples have no weight; the CLT numbers stay, the bootstrap is reported
    missing with the reason."""
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
    assert any(w.startswith("no bootstrap interval: cluster bootstrap") for w in r["warnings"])
    assert doc["differences"][0]["estimate"] == 0.0
    assert any("snips T - S: no bootstrap interval: paired cluster bootstrap" in w for w in doc["warnings"])


def test_run_errors(world: dict[str, Any]) -> None:
    tmp = world["tmp"]
    other = write_run(tmp / "O.run", {9: [0, 1, 2]}, "O")
    one_line_error(invoke("--log", str(world["log"]), "--target", str(other), "--estimator", "ips"),
                   f"{other}: no query in common with the log")
    bad = tmp / "bad.run"
    bad.write_text("q0 Q0 q0d1 1 3.0 X\nq0 Q0 q0d2 2 abc X\n")
    one_line_error(invoke("--log", str(world["log"]), "--target", str(bad), "--estimator", "ips"), f"{bad}:2: ")


# ------------------------------------------------------------------------ round trip
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
    clicks: IPS (any reward), and the slot-level estimators where registered and unbiased
    (IIPS and, given the logger, the pseudoinverse for clicks; RIPS for both), within 4 SE
    of the exact value; the band is narrow enough that the reversed ranker's value lies
    outside it."""
    if logger:
        try:
            from simulations.policies import build_policy  # noqa: F401
        except ImportError:
            pytest.skip("simulations.policies.build_policy is not available yet")
    sim = simulate(20000, 3, 2000, seed=2026, m=4, k=2)
    log = write_log(sim, tmp_path / "rt.jsonl", logger=logger)
    lists = {q: [int(c) for c in np.argsort(-sim.attract[q])] for q in range(3)}  # most attractive first
    run = write_run(tmp_path / "T.run", lists, "T")
    extra = {"clicks_per_query": ["iips", "rips"] + (["pseudoinverse"] if logger else []), "reciprocal_rank": ["rips"]}
    for metric in ("clicks_per_query", "reciprocal_rank"):
        names = ["ips"] + [e for e in extra[metric] if e in available_estimators()]
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


def test_adaptive_ips_bootstrap_makes_its_choice_again(world: dict[str, Any]) -> None:
    """adaptive_ips's bootstrap intervals, of each estimate and of the difference, are its reselecting bootstrap's
    (AdaptiveIPS.bootstrap_estimates with the command's generators), not the plain bootstrap of the chosen terms."""
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--estimator", "adaptive_ips", "--metric", "clicks_per_query", "--bootstrap", "200", "--seed", "4")
    sim = world["sim"]
    data = lib_data(sim)
    tb, ta = lib_target(sim, world["best"], "B"), lib_target(sim, world["worst"], "A")
    reward = get_reward("clicks_per_query", K)
    est = get_estimator("adaptive_ips")
    crc = [zlib.crc32(x) for x in (b"adaptive_ips", b"B", b"A")]
    reps = est.bootstrap_estimates(data, [tb], reward, 200, np.random.default_rng([4, crc[0], crc[1]]))
    row = next(r for r in doc["results"] if r["target"] == "B")
    lo, hi = np.quantile(reps[:, 0], [0.025, 0.975]) + reward.offset
    assert (row["boot_low"], row["boot_high"]) == pytest.approx((lo, hi), rel=1e-12)
    pair = est.bootstrap_estimates(data, [tb, ta], reward, 200, np.random.default_rng([4, *crc]))
    diff = doc["differences"][0]
    assert (diff["boot_low"], diff["boot_high"]) == pytest.approx(
        tuple(np.quantile(pair[:, 0] - pair[:, 1], [0.025, 0.975])), rel=1e-12)
    assert "adaptive_ips's data-driven choice" in doc["conventions"]["bootstrap_interval"]


def test_adaptive_ips_without_bootstrap_warns_of_its_fixed_choice(world: dict[str, Any]) -> None:
    base = ("--log", str(world["log"]), "--target", str(world["B"]), "--metric", "clicks_per_query")
    warned = "the CLT interval holds the data-driven choice"
    doc = json_out(*base, "--estimator", "adaptive_ips,ips")
    ada, ips = doc["results"]
    assert any(w.startswith(warned) for w in ada["warnings"]) and not any(warned in w for w in ips["warnings"])
    booted = json_out(*base, "--estimator", "adaptive_ips", "--bootstrap", "100")["results"][0]
    assert not any(warned in w for w in booted["warnings"])
    fixed = json_out(*base, "--estimator", "adaptive_ips", "--option", "adaptive_ips.behaviours=cascade")
    assert not any(warned in w for w in fixed["results"][0]["warnings"])


def test_dm_bootstrap_fits_its_model_again(world: dict[str, Any]) -> None:
    """dm's bootstrap intervals (a cascade model fitted on the log), of the estimate and of the difference, are
    DirectMethod.bootstrap_estimates' with the command's generators (the model fitted again on every resample); its
    CLT interval's warning names the bootstrap."""
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--estimator", "dm", "--option", "dm.model=cascade", "--metric", "reciprocal_rank",
                   "--bootstrap", "150", "--seed", "4")
    sim = world["sim"]
    data = lib_data(sim)
    tb, ta = lib_target(sim, world["best"], "B"), lib_target(sim, world["worst"], "A")
    reward = get_reward("reciprocal_rank", K)
    est = get_estimator("dm", model="cascade")
    crc = [zlib.crc32(x) for x in (b"dm", b"B", b"A")]
    reps = est.bootstrap_estimates(data, [tb], reward, 150, np.random.default_rng([4, crc[0], crc[1]]))
    row = next(r for r in doc["results"] if r["target"] == "B")
    lo, hi = np.quantile(reps[:, 0], [0.025, 0.975]) + reward.offset
    assert (row["boot_low"], row["boot_high"]) == pytest.approx((lo, hi), rel=1e-12)
    # the refitted model's spread is far wider than the CLT interval that holds it fixed
    assert hi - lo > 3 * (row["ci_high"] - row["ci_low"])
    assert any("fits the model again in every resample" in w for w in row["warnings"])
    pair = est.bootstrap_estimates(data, [tb, ta], reward, 150, np.random.default_rng([4, *crc]))
    diff = doc["differences"][0]
    assert (diff["boot_low"], diff["boot_high"]) == pytest.approx(
        tuple(np.quantile(pair[:, 0] - pair[:, 1], [0.025, 0.975])), rel=1e-12)
    assert "dm's click model" in doc["conventions"]["bootstrap_interval"]
    assert any(w.startswith("dm: the differences' CLT interval and p-value hold the click model fitted on the log "
                            "fixed") and w.endswith("its bootstrap interval does it again in every resample")
               for w in doc["warnings"])


@pytest.mark.parametrize(("options", "metric", "warned"), [
    (("--estimator", "dm", "--option", "dm.model=cascade"), "reciprocal_rank", True),
    (("--estimator", "dm"), "clicks_per_query", False),  # a PBM, additive: the linearised interval
    (("--estimator", "adaptive_ips"), "clicks_per_query", True),
    (("--estimator", "ips,rips"), "clicks_per_query", False),
])
def test_differences_warn_where_the_clt_interval_holds_a_fit_fixed(world: dict[str, Any], options, metric,
                                                                    warned) -> None:
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--metric", metric, *options)
    lines = [w for w in doc["warnings"] if "the differences' CLT interval and p-value hold" in w]
    assert len(lines) == warned
    if warned:
        assert lines[0].endswith("--bootstrap N (e.g. 1000) gives an interval that does it again in every resample")


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


# ------------------------------------------------------------------------ differences: undefined and warned
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
    assert row.split()[3:] == ["undefined", "-", "-", "-", "-", "-", str(len(ips["warnings"]))]
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


def test_differences_carry_their_estimates_warnings(world: dict[str, Any]) -> None:
    """Each difference lists the warnings of its two estimates (prefixed with estimator and side) and its
    estimator's differences' warning (adaptive_ips's CLT interval holding its choice fixed)."""
    doc = json_out("--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
                   "--estimator", "ips,iips,adaptive_ips", "--metric", "clicks_per_query")
    by = {(r["estimator"], r["target"]): r["warnings"] for r in doc["results"]}
    fixed = [w for w in doc["warnings"] if w.startswith("adaptive_ips: the differences' CLT interval")]
    assert len(fixed) == 1
    for diff in doc["differences"]:
        e = diff["estimator"]
        expected = [f"{e} B: {w}" for w in by[(e, "B")]] + [f"{e} A: {w}" for w in by[(e, "A")]]
        assert diff["warnings"] == expected + (fixed if e == "adaptive_ips" else [])
    # IPS of 3,000 impressions with weights 60: ESS about 50 on each side, so its difference carries both
    ips = doc["differences"][0]
    assert any(w.startswith("ips B: effective sample size") for w in ips["warnings"])
    assert any(w.startswith("ips A: effective sample size") for w in ips["warnings"])


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


# ------------------------------------------------------------------------ needs, named as the user typed them
def test_pseudoinverse_needs_the_logger_up_front(world: dict[str, Any]) -> None:
    """Without a logger in the log the pseudoinverse (and pbm_ips with click_propensity=logger) stops before
    anything runs, exit 2, naming what is missing and what could run; no list of runnable estimators names it."""
    sim, tmp = world["sim"], world["tmp"]
    listonly = write_log(sim, tmp / "listonly.jsonl", forms=("list",))
    err = one_line_error(invoke("--log", str(listonly), "--target", str(world["B"]), "--estimator",
                                "ips,pseudoinverse"),
                         f"{listonly}: estimator 'pseudoinverse' needs the logging policy (a 'logger' on every line",
                         "pair_marginals", "the log carries propensities.list; estimators that could run on it: ")
    runnable = err.rsplit("could run on it: ", 1)[1].split(", ")
    assert "ips" in runnable and "pseudoinverse" not in runnable and "rips" not in runnable
    one_line_error(invoke("--log", str(listonly), "--target", str(world["B"]), "--estimator", "pbm_ips",
                          "--option", "pbm_ips.click_propensity=logger"),
                   "estimator 'pbm_ips' needs the logging policy", "item_position_marginals")
    err = one_line_error(invoke("--log", str(listonly), "--target", str(world["B"]), "--estimator", "rips"),
                         "estimator 'rips' needs propensities.prefix; the log carries propensities.list; ")
    assert "pseudoinverse" not in err and "p_prefix" not in err and "p_list" not in err
    logged = write_log(sim, tmp / "withlogger.jsonl", logger=True)
    doc = json_out("--log", str(logged), "--target", str(world["B"]), "--estimator", "pseudoinverse")
    assert doc["results"][0]["estimate"] is not None


def test_option_errors_name_what_the_user_typed(world: dict[str, Any]) -> None:
    base = ["--log", str(world["log"]), "--target", str(world["B"])]
    one_line_error(invoke(*base, "--estimator", "clipped_ips", "--option", "clipped_ips.cap=-1"),
                   "error: --option clipped_ips.cap: must be")
    # the library's own message keeps its key
    from onlineeval.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        get_estimator("clipped_ips", cap=-1)
    assert str(info.value).startswith("estimator.cap: must be")


@pytest.mark.parametrize("text", ["ips,,snips", ",ips", "ips,", "ips, ,snips"])
def test_empty_estimator_names_are_refused(world: dict[str, Any], text: str) -> None:
    one_line_error(invoke("--log", str(world["log"]), "--target", str(world["B"]), "--estimator", text),
                   f"--estimator: {text!r} has an empty estimator name")



# ------------------------------------------------------------------------ the README's example
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
    # the set-up's largest weights, as the README describes them: 1 / (0.3 / (8*7*6*5)) and 1 / (0.3 / 8)
    assert "5600" in out[3] and "26.67" in out[6]


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


def test_an_option_written_1e9_is_a_number(world: dict[str, Any]) -> None:
    """YAML 1.1 reads 1e9 (no dot) as a string; --option takes it as the number it means (as 1.5 or 1000)."""
    base = ("--log", str(world["log"]), "--target", str(world["B"]), "--metric", "clicks_per_query",
            "--estimator", "clipped_ips")
    a = json_out(*base, "--option", "clipped_ips.cap=1e9")["results"][0]
    b = json_out(*base, "--option", "clipped_ips.cap=1000000000.0")["results"][0]
    assert a["estimate"] == b["estimate"] and a["diagnostics"]["notes"] == b["diagnostics"]["notes"]
