"""The mean estimate, its SD and so the bias are over the replicates with an estimate; the bias's SE and its t-test
divided that SD by the root of *all* replicates (too small where some estimates are undefined: configs/
counterfactual.yaml at 3 queries a day, the A/B test defined in 2 of 6 replicates, SE 0.14 where it is 0.25), the
RMSE was over the replicates with a p-value (NaN beside a defined mean where an estimate had no SE), and the
counterfactual table's undef. share counted the replicates without a p-value while its bias was over those with an
estimate (100% undefined beside a bias). All now over the replicates with an estimate; the replicates without an
interval keep their own share (``interval_undefined_share``; counted as not rejecting, outside the coverage)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from simulations.analysis_bias import estimate_is_biased
from simulations.analysis_curves import curves
from simulations.runner import Truth

REPO = Path(__file__).resolve().parents[1]


def test_curves_count_the_estimates_and_take_the_rmse_over_them() -> None:
    est = np.array([0.3, np.nan, 0.1, 0.5, np.nan, 0.2])
    se = np.array([0.1, np.nan, np.nan, 0.2, np.nan, np.nan])  # two estimates without an SE
    pvalue = np.where(np.isfinite(se), 0.5, np.nan)
    rows = pd.DataFrame({"design": "d", "aa": False, "metric": "m", "day": 1, "primary": True, "estimate": est,
                         "se": se, "ci_low": est - 2 * se, "ci_high": est + 2 * se, "pvalue": pvalue,
                         "n_users": 10, "n_impressions": 20})
    c = curves(rows, {("d", "m"): Truth("d", "m", 0.25, 0.0, "exact")}, 0.05).iloc[0]
    finite = est[np.isfinite(est)]
    assert c["replicates"] == 6 and c["estimates"] == 4 and c["undefined"] == pytest.approx(4 / 6)
    assert c["mean_estimate"] == pytest.approx(finite.mean(), rel=1e-12)
    assert c["sd_estimate"] == pytest.approx(finite.std(ddof=1), rel=1e-12)
    assert c["rmse"] == pytest.approx(math.sqrt(np.mean((finite - 0.25) ** 2)), rel=1e-12)
    # no replicate with a p-value: the RMSE is still that of the estimates (it was NaN)
    rows["pvalue"] = np.nan
    assert curves(rows, {("d", "m"): Truth("d", "m", 0.25, 0.0, "exact")}, 0.05).iloc[0]["rmse"] == pytest.approx(
        math.sqrt(np.mean((finite - 0.25) ** 2)), rel=1e-12)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """configs/counterfactual.yaml at 3 queries a day over 2 days, 6 replicates: the A/B test's estimate is
    undefined where an arm has no user yet, SNIPS's where a target's list is never drawn."""
    from typer.testing import CliRunner

    from onlineeval.cli import app

    tmp = tmp_path_factory.mktemp("defined")
    mapping = yaml.safe_load((REPO / "configs" / "counterfactual.yaml").read_text(encoding="utf-8"))
    mapping.update(replicates=6, workers=1, output=str(tmp / "out"))
    mapping["traffic"].update(days=2, queries_per_day=3)
    for d in mapping["designs"]:
        d.pop("bootstrap", None)
    mapping["analysis"].update(assumption_sweep=None, bias_check=0, aa=False, truth_impressions=20000)
    (tmp / "cf.yaml").write_text(yaml.safe_dump(mapping), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--config", str(tmp / "cf.yaml"), "--quiet"])
    assert res.exit_code == 0, res.output
    rows = pd.read_csv(tmp / "out" / "replicates.csv")
    return {"summary": json.loads((tmp / "out" / "summary.json").read_text(encoding="utf-8")), "rows": rows,
            "output": res.output}


def _last(rows: pd.DataFrame, design: str, metric: str) -> pd.DataFrame:
    g = rows[(rows["design"] == design) & (rows["metric"] == metric) & ~rows["aa"]]
    return g[g["day"] == g["day"].max()]


@pytest.mark.parametrize(("design", "metric"), [("ab", "clicks_per_query"), ("counterfactual", "snips")])
def test_the_bias_se_and_test_are_over_the_replicates_with_an_estimate(run: dict[str, object], design: str,
                                                                       metric: str) -> None:
    g = _last(run["rows"], design, metric)  # type: ignore[arg-type]
    est = g["estimate"].to_numpy(dtype=float)
    finite = est[np.isfinite(est)]
    n = finite.size
    assert 2 <= n < len(est), (design, metric, n)  # the case: some replicates without an estimate
    e = run["summary"]["designs"][design][metric]  # type: ignore[index]
    assert e["final_day"]["estimates"] == n and e["final_day"]["replicates"] == len(est)
    sd = float(finite.std(ddof=1))
    assert e["estimator_bias"] == pytest.approx(finite.mean() - e["true_effect"], rel=1e-9, abs=1e-15)
    assert e["estimator_bias_se"] == pytest.approx(sd / math.sqrt(n), rel=1e-9)  # exact truth: no MC term
    assert e["estimator_bias_se"] > sd / math.sqrt(len(est)) * 1.05  # what it was
    assert e["biased_estimate"] == estimate_is_biased(e["estimator_bias"], sd, n)


def test_the_counterfactual_tables_undefined_share_is_that_of_the_estimates(run: dict[str, object]) -> None:
    g = _last(run["rows"], "counterfactual", "snips")  # type: ignore[arg-type]
    c = run["summary"]["counterfactual"]["counterfactual"]["estimators"]["snips"]  # type: ignore[index]
    assert c["undefined_share"] == pytest.approx(float(g["estimate"].isna().mean()), rel=1e-12)
    assert c["interval_undefined_share"] == pytest.approx(float(g["pvalue"].isna().mean()), rel=1e-12)
    assert "undef.: share of replicates whose estimate is undefined" in str(run["output"])
