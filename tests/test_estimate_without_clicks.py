"""`onlineeval estimate` on logs without a click (none at all, or none on a target's documents): every estimator
that can estimate the metric answers 0 (or says why its estimate is undefined) and none crashes. PBM-IPS with its
examination estimated from the log raised numpy's UFuncOutputCastingError there: ``np.bincount`` of no values
returns int64 zeros even with float weights, and its value gradient was then updated in place with floats."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from estimate_cli_world import K, json_out, simulate, write_log, write_run
from onlineeval.estimators import available_estimators, estimator_class, get_reward


def _estimators(metric: str, logger: bool) -> list[str]:
    kind = get_reward(metric, K).kind
    return [e for e in available_estimators() if kind in estimator_class(e).rewards
            and (logger or e != "pseudoinverse")]  # the pseudoinverse reads the logging policy's pair marginals


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("no_clicks")
    sim = simulate(1500, 4, 200, seed=5, m=8)  # 8 candidates: two of each query in neither top 3
    best = {q: list(np.argsort(-sim.attract[q])) for q in range(4)}
    worst = {q: list(np.argsort(sim.attract[q])) for q in range(4)}
    none = dataclasses.replace(sim, clicks=np.zeros_like(sim.clicks))
    # clicks only on documents no target ranks in its top K: the targets' pairs see none
    ranked = {(q, c) for lists in (best, worst) for q, cs in lists.items() for c in cs[:K]}
    off = np.array([[(int(q), int(c)) not in ranked for c in row] for q, row in zip(sim.query, sim.shown)])
    elsewhere = dataclasses.replace(sim, clicks=sim.clicks & off)
    assert elsewhere.clicks.any() and not (elsewhere.clicks & ~off).any()
    return {
        "none": {form: write_log(none, tmp / f"none_{form}.jsonl", logger=form == "logger")
                 for form in ("propensities", "logger")},
        "elsewhere": {form: write_log(elsewhere, tmp / f"elsewhere_{form}.jsonl", logger=form == "logger")
                      for form in ("propensities", "logger")},
        "B": write_run(tmp / "B.run", best, "B"), "A": write_run(tmp / "A.run", worst, "A"),
    }


@pytest.mark.parametrize("clicks", ["none", "elsewhere"])
@pytest.mark.parametrize("form", ["propensities", "logger"])
@pytest.mark.parametrize("metric", ["clicks_per_query", "reciprocal_rank"])
def test_every_estimator_answers_zero_without_a_click_on_the_targets(logs: dict[str, Any], clicks: str, form: str,
                                                                    metric: str) -> None:
    names = _estimators(metric, form == "logger")
    assert "pbm_ips" in names or metric != "clicks_per_query"
    out = json_out("--log", str(logs[clicks][form]), "--target", str(logs["B"]), "--baseline", str(logs["A"]),
                   "--estimator", ",".join(names), "--metric", metric, "--option", "clipped_ips.cap=5")
    seen = set()
    for r in out["results"]:
        seen.add(r["estimator"])
        if r["estimate"] is not None and clicks == "elsewhere" and r["estimator"] == "pseudoinverse":
            # it reads the whole list's reward with the pseudoinverse's coefficients, negative ones included, so
            # clicks on other documents move it (unbiased for 0 all the same); here: only that it answers
            assert np.isfinite(r["estimate"]), r
        elif r["estimate"] is not None:
            # no click on any document a target ranks: every slot reward the estimate reads is 0 (a fitted click
            # model's to EM's tolerance: its attractiveness tends to 0, 6e-12 for cascade_dr here)
            assert r["estimate"] == pytest.approx(0.0, abs=1e-9), r
        else:
            assert r.get("error"), r  # undefined says why
    assert seen == set(names)
