"""The direct method checks its value against the doubly robust ``dr`` on the same log
(:mod:`onlineeval.estimators.dm_dr_check`).

A click model fitted on a sparse log is biased for a target that moves rarely shown pairs to other slots, while its
interval measures the fit's spread only; the rare-pairs warning (``tests/test_dm_rare_pairs.py``) says 'may' from
the log's shape, alike for a target that is biased and for one that is not (production's own list). ``dr``'s
correction, the item-weighted residuals of a cross-fitted model, has expectation (true value - dm's value) whatever
the model where the item propensities are right and a slot's clicks depend on its document only, so the paired
difference dm - dr measures dm's bias on the log itself. The world: ``test_dm_rare_pairs``'s (Zipf-distributed
queries of 10 candidates, PBM users, production's top 5 with 30% uniformly random lists, item propensities).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.estimators import DeterministicTarget, LoggedData, get_estimator
from onlineeval.estimators.dm_dr_check import DR_CHECK_Z

from test_dm_rare_pairs import _logs, _world

WARNED = "standard errors of the paired difference"


def _targets(queries: int = 200) -> dict[str, DeterministicTarget]:
    """The ideal list (rare pairs moved up from production's slots), production's own and production's reversed."""
    _, order, _, _ = _world(queries)
    production = order[:, [3, 1, 0, 2, 4]]
    return {"ideal": DeterministicTarget(order[:, :5], "ideal"), "production": DeterministicTarget(production, "A"),
            "reversed": DeterministicTarget(production[:, ::-1], "R")}


def _cr1_mean(log: LoggedData, values: np.ndarray) -> tuple[float, float]:
    """The mean of per-impression ``values`` and its cluster-robust (CR1, users) standard error, written out."""
    _, u = np.unique(log.user, return_inverse=True)
    sums, sizes = np.bincount(u, values), np.bincount(u)
    g, m = sums.size, values.mean()
    return float(m), float(math.sqrt(g / (g - 1) * ((sums - sizes * m) ** 2).sum()) / log.n)


def test_the_notes_are_dr_s_value_and_the_paired_difference_with_its_clustered_se():
    (log,), _, _ = _logs(4000, 1, 11)
    target = _targets()["ideal"]
    dm = get_estimator("dm").estimate(log, target, "clicks_per_query")
    dr = get_estimator("dr").estimate(log, target, "clicks_per_query")
    notes = dm.diagnostics.notes
    assert notes["dr_check"] == "dr (pbm, cross-fitted over 2 folds of the users)"
    assert notes["dr_check_value"] == pytest.approx(dr.value, rel=1e-12)
    assert notes["dr_check_difference"] == pytest.approx(dm.value - dr.value, abs=1e-12)
    paired = (get_estimator("dm").terms(log, target, "clicks_per_query").num
              - get_estimator("dr").terms(log, target, "clicks_per_query").num)
    mean, se = _cr1_mean(log, paired)
    assert notes["dr_check_difference"] == pytest.approx(mean, abs=1e-12)
    assert notes["dr_check_se"] == pytest.approx(se, rel=1e-9)
    assert notes["dr_check_z"] == pytest.approx(mean / se, rel=1e-9)
    # the difference's SE is not either side's: the paired terms share the log's noise
    assert notes["dr_check_se"] < dr.se


def test_a_model_the_users_do_not_follow_is_caught():
    # a rank click-through-rate model (rctr: ignores the document) fitted on PBM users' log, declared biased there:
    # the check concludes on one log of 4,000 impressions (z -5.8; -4.4 and -3.9 on two other logs) and the warning
    # quotes dr's value and the difference; a planted threshold of 100 fails here
    (log,), _, _ = _logs(4000, 1, 12)
    target = _targets()["ideal"]
    e = get_estimator("dm", model="rctr").estimate(log, target, "clicks_per_query")
    notes = e.diagnostics.notes
    assert notes["dr_check"] == "dr (rctr, cross-fitted over 2 folds of the users)"
    z = notes["dr_check_z"]
    assert z <= -DR_CHECK_Z, z
    (warned,) = [w for w in e.warnings() if WARNED in w]
    assert f"its value is {abs(z):.1f} standard errors of the paired difference below that of the doubly robust" \
           in warned
    assert f"{notes['dr_check_value']:.6g}" in warned and f"{notes['dr_check_difference']:+.4g}" in warned


def test_a_model_that_is_not_independent_is_not_held_to_dr():
    # dr assumes a slot's clicks depend on its document only; a cascade model on cascade users is right, yet dr
    # (a PBM) is biased there: against it, dm (cm) on the cascade check world crossed 3 SE on 30 of 30 logs of 4,000
    # impressions (z -20.5), and against cascade_dr (prefix weights, skewness about -19) on 3 of 100. So no check
    (log,), _, _ = _logs(2000, 1, 15)
    notes = get_estimator("dm", model="cm").estimate(log, _targets()["ideal"], "clicks_per_query").diagnostics.notes
    assert notes["dr_check"].startswith("not made: dr, the reference, assumes a slot's clicks depend on its "
                                        "document only, which a cm model does not"), notes["dr_check"]
    assert "the assumption check against rips (notes assumption_check) tests this model" in notes["dr_check"]
    assert "dr_check_z" not in notes and "assumption_check" in notes  # that check is made (its z, or why not)
    # a UBM declares no bias for a first-click reward: neither check, and the note does not point to one
    notes = get_estimator("dm", model="ubm").estimate(log, _targets()["ideal"], "reciprocal_rank").diagnostics.notes
    assert notes["dr_check"].endswith("which a ubm model does not (a right model would be held to a biased "
                                      "reference)") and "assumption_check" not in notes, notes["dr_check"]


def test_silent_on_average_where_the_direct_method_is_unbiased():
    # production's own list: dm within chance of the exact value (measured +0.27 +- 0.18 SE at 4,000 impressions),
    # so the check's z centres on 0 (within 4 of its SEs over 24 logs) and the warning (normal tail 0.3%) fires on
    # at most one log; a planted threshold of 0.5 fails here
    logs, _, _ = _logs(4000, 24, 13)
    target = _targets()["production"]
    z, warned = [], 0
    for log in logs:
        e = get_estimator("dm").estimate(log, target, "clicks_per_query")
        z.append(e.diagnostics.notes["dr_check_z"])
        warned += any(WARNED in w for w in e.warnings())
    z = np.array(z)
    assert abs(z.mean()) < 4 * z.std(ddof=1) / math.sqrt(z.size), z
    assert warned <= 1, (warned, z)


def test_where_the_check_is_not_made_the_notes_say_why():
    (log,), _, _ = _logs(2000, 1, 14)
    target = _targets()["ideal"]
    first = get_estimator("dm").estimate(log, target, "reciprocal_rank").diagnostics.notes
    assert first["dr_check"] == "not made: dr, the reference, takes additive rewards only"
    no_items = LoggedData(log.query, log.shown, log.clicks, user=log.user)
    plain = get_estimator("dm").estimate(no_items, target, "clicks_per_query").diagnostics.notes
    assert plain["dr_check"] == "not made: the log has no item propensities (dr, the reference, needs them)"
    from clickmodels import PBM, ByQueryDoc

    given = PBM(np.array([1.0, 0.7, 0.5, 0.35, 0.25]), ByQueryDoc(np.zeros(1, int), np.zeros(1, int),
                                                                     np.full(1, 0.3), default=0.3))
    notes = get_estimator("dm", model=given).estimate(log, target, "clicks_per_query").diagnostics.notes
    assert notes["dr_check"] == "not made: a model given ready-made"
    for n in (first, plain, notes):
        assert "dr_check_z" not in n


def _write(log: LoggedData, targets: dict[str, DeterministicTarget], folder: Path) -> tuple[Path, dict[str, Path]]:
    """The log as `onlineeval estimate` reads it (item propensities) and the targets as TREC runs."""
    lines = []
    for i in range(log.n):
        q = int(log.query[i])
        lines.append(json.dumps({"query": f"q{q:03d}", "user": f"u{int(log.user[i]):06d}",
                                 "shown": [f"d{int(d)}" for d in log.shown[i]],
                                 "clicks": log.clicks[i].astype(int).tolist(),
                                 "propensities": {"item": log.p_item[i].tolist()}}))
    path = folder / "log.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    runs = {}
    for name, t in targets.items():
        runs[name] = folder / f"{name}.run"
        runs[name].write_text("".join(f"q{q:03d} Q0 d{int(d)} {r + 1} {10 - r} {name}\n"
                                      for q in np.unique(log.query) for r, d in enumerate(t.lists[q])),
                              encoding="utf-8")
    return path, runs


def test_the_command_checks_each_value_and_the_difference_against_a_baseline(tmp_path: Path):
    # `estimate --baseline` with dm (a rank CTR model, PBM users): each target's notes carry the check, and the
    # difference ideal - production is checked against dr's difference on the same impressions (each side's bias
    # need not cancel), in the difference's warnings and the printed ones
    (log,), _, _ = _logs(4000, 1, 12)
    targets = _targets()
    path, runs = _write(log, {k: targets[k] for k in ("ideal", "production")}, tmp_path)
    args = ["estimate", "--log", str(path), "--target", str(runs["ideal"]), "--baseline", str(runs["production"]),
            "--estimator", "dm,dr", "--option", "dm.model=rctr", "--option", "dr.model=rctr"]
    runner = CliRunner()
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    row = next(r for r in doc["results"] if r["estimator"] == "dm" and r["target"] == "ideal")
    dr_row = next(r for r in doc["results"] if r["estimator"] == "dr" and r["target"] == "ideal")
    assert row["diagnostics"]["notes"]["dr_check_value"] == pytest.approx(dr_row["estimate"], rel=1e-12)
    d_dm, d_dr = (next(d for d in doc["differences"] if d["estimator"] == e) for e in ("dm", "dr"))
    (own,) = [w for w in d_dm["warnings"] if w.startswith("dm ideal - production: ") and WARNED in w]
    assert "its difference is" in own and f"{d_dr['estimate']:+.6g}" in own
    assert f"{d_dm['estimate'] - d_dr['estimate']:+.4g}" in own
    assert own in doc["warnings"] and not any(WARNED in w for w in d_dr["warnings"])
    text = runner.invoke(app, args)
    assert text.exit_code == 0, text.output
    assert "dr_check = dr (rctr, cross-fitted over 2 folds of the users)" in text.stdout
    assert text.stdout.count("dm ideal - production: dm (rctr fitted on the log): its difference is") == 1


def test_at_a_users_size_the_check_tells_the_biased_target_from_the_unbiased_one():
    # 20,000 queries, 10^6 impressions: 7.3% of either target's slots hold rarely shown pairs, so the rare-pairs
    # warning flags both alike; dm is 18 SE low for the ideal list (its rare pairs moved to other slots) and within
    # chance for production's own. Measured over 16 logs: the check's z -6.1 (SD 1.1; every log warned) and +0.85
    # (SD 0.92; none warned). This log's (the first of them): -7.4 and -0.0
    (log,), _, _ = _logs(1_000_000, 1, 600, queries=20_000)
    targets = _targets(20_000)
    z = {}
    for name in ("ideal", "production"):
        e = get_estimator("dm").estimate(log, targets[name], "clicks_per_query")
        # the rare-pairs warning: alike, pointing to the check
        assert any("fewer than 10 times" in w and "the notes' dr_check measures this bias" in w for w in e.warnings())
        z[name] = e.diagnostics.notes["dr_check_z"]
        assert any(WARNED in w for w in e.warnings()) == (name == "ideal"), (name, z)
    assert z["ideal"] <= -DR_CHECK_Z < z["production"] < DR_CHECK_Z, z


def test_a_lopsided_check_concludes_nothing(monkeypatch, tmp_path: Path):
    # the first Edgeworth term of the check's heavy side, written out with scipy: 1 at no skewness, about 1.3 on the
    # 10,000-impression logs above (skewness -1.4, 3,300 users), above the limit at the cascade world's -19 over
    # 3,950 users (where 3 of 100 right models crossed 3 SE); a planted skewness of 50 turns the rctr log's warning
    # into an inconclusive note (both the value's and, through the command, the difference's)
    from scipy.stats import norm

    import onlineeval.estimators.intervals as intervals
    from onlineeval.estimators.dm_dr_check import LOPSIDED_LIMIT, lopsided_check

    def edgeworth(skew, g):
        z = DR_CHECK_Z
        return 1 + abs(skew) * (2 * z * z + 1) * norm.pdf(z) / (6 * math.sqrt(g)) / norm.cdf(-z)

    assert lopsided_check(0.0, 5000) == 1.0 and lopsided_check(math.nan, 5000) == 1.0
    for skew, g in ((-1.4, 3300), (-19.1, 3950), (5.0, 100_000)):
        assert lopsided_check(skew, g) == pytest.approx(edgeworth(skew, g), rel=1e-6)
    assert lopsided_check(-1.4, 3300) < LOPSIDED_LIMIT < lopsided_check(-19.1, 3950)
    (log,), _, _ = _logs(4000, 1, 12)
    monkeypatch.setattr(intervals, "influence_skewness", lambda values: 50.0)
    e = get_estimator("dm", model="rctr").estimate(log, _targets()["ideal"], "clicks_per_query")
    notes = e.diagnostics.notes
    assert notes["dr_check_z"] <= -DR_CHECK_Z and notes["dr_check_skewness"] == 50.0
    assert "; inconclusive: its users' influence values have skewness +50" in notes["dr_check"]
    assert not any(WARNED in w for w in e.warnings())
    targets = _targets()
    with_baseline = _write(log, {k: targets[k] for k in ("ideal", "production")}, tmp_path)
    path, runs = with_baseline
    res = CliRunner().invoke(app, ["estimate", "--log", str(path), "--target", str(runs["ideal"]), "--baseline",
                                   str(runs["production"]), "--estimator", "dm", "--option", "dm.model=rctr",
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    assert not any(WARNED in w for w in json.loads(res.stdout)["warnings"])


def test_the_difference_check_is_silent_on_average_where_dm_is_unbiased():
    # the difference's check under a null: the PBM check world (dm with a PBM right, every pair shown often), the
    # ideal list minus the other target over 30 logs of 4,000 impressions: the paired difference-of-differences' z
    # centres on 0 (within 4 of its SEs) and crosses 3 SE on at most one log (normal tail 0.3%; measured over 100
    # logs: mean -0.11, SD 0.83, none crossed, the skewness gate at most 1.13); a planted threshold of 0.5 fails here
    from onlineeval.estimators.dm_dr_check import _num, dr_check_difference, dr_reference
    from onlineeval.estimators.exact_worlds import check_world, sample_log
    from onlineeval.estimators.intervals import paired_mean
    from onlineeval.estimators.rewards import get_reward

    world = check_world("pbm")
    n, logs = 4000, 30
    big = sample_log(world, n * logs, np.random.default_rng(9))
    b, a = world.targets[0], world.targets[1]
    reward = get_reward("clicks_per_query", big.k)
    z, warned = [], 0
    for r in range(logs):
        log = big.take(np.arange(r * n, (r + 1) * n))
        est = get_estimator("dm")
        ref = dr_reference(est, log, reward)
        own = _num(est, log, b, reward) - _num(est, log, a, reward)
        other = _num(ref, log, b, reward) - _num(ref, log, a, reward)
        mean, se, _, _ = paired_mean(log, own - other)
        z.append(mean / se)
        warnings: list[str] = []
        dr_check_difference(est, log, b, a, reward, {"se": 1.0}, "dm b - a", warnings)
        warned += bool(warnings)
    z = np.array(z)
    assert abs(z.mean()) < 4 * z.std(ddof=1) / math.sqrt(z.size), z
    assert warned <= 1, (warned, z)
