"""An entry with no measured standard error on any day (every replicate's SE undefined; or, sized from the
replicates' SD, a single replicate: adaptive IPS in a one-replicate run of configs/counterfactual.yaml) has nothing to
size from. Its days, impressions and users needed printed 'never' / 'not reachable' / 'not reachable' and
summary.json said 100% of the size's refits were not reachable: the claim that the SE floor is above the target,
which nothing measured. They now say 'no SE' (summary.json ``no_se``), with a line naming the entries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from simulations.analysis_sizes import VarianceModel, size_uncertainty, variance_model
from simulations.report_sizes import NO_SE, analytic_days_text, sample_size_cells
from simulations.sweep_outputs import days_cell

REPO = Path(__file__).resolve().parents[1]


def test_a_fit_without_points_has_no_refit_spread_and_no_unreachable_share() -> None:
    fit = variance_model(np.array([1000.0, 2000.0]), np.array([np.nan, np.nan]))
    assert fit.points == 0
    out = size_uncertainty(fit, None, 0.02, 0.05, 0.8)
    assert out["unreachable_share"] is None and out["range"] is None and out["unstable"] is False
    # one measured day is a fit (a/N assumed): the size is computed, not 'no SE'
    one = variance_model(np.array([1000.0, 2000.0]), np.array([np.nan, 0.01]))
    assert one.points == 1 and size_uncertainty(one, None, 0.02, 0.05, 0.8)["unstable"] is True


def _entry(**kw: object) -> dict[str, object]:
    e: dict[str, object] = {"final_day": {"analytic_power": None}, "detectable": True, "biased_estimate": False,
                            "variance_model": VarianceModel(float("nan"), float("nan"), 0)._asdict(),
                            "analytic_required_impressions": None, "analytic_required_days": None,
                            "analytic_required_users": None, "days_to_target_power": None}
    e.update(kw)
    return e


def test_the_cells_say_no_se_not_never_or_not_reachable() -> None:
    before = sample_size_cells(_entry(), 6000)  # the same entry without the flag: what it printed
    assert (before["days"], before["impressions"], before["users"]) == ("never", "not reachable", "not reachable")
    cells = sample_size_cells(_entry(no_se=True), 6000)
    assert cells == {"analytic": "-", "days": "-", "impressions": NO_SE, "users": "-"}
    assert analytic_days_text(None) == "never"  # the floor's text stays for a fitted model without a reachable size
    assert days_cell({"no_se": True, "analytic_required_days": float("nan")}) == "no SE"
    assert days_cell({"no_se": False, "analytic_required_days": float("nan")}) == "never"
    assert days_cell({"analytic_required_days": 3.0}) == "3.0"  # points.csv files written before the column


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """configs/counterfactual.yaml at one replicate (2 days of 300 queries): adaptive IPS is sized from the
    replicates' SD (its delta-method SE holds its choice fixed), which one replicate does not have."""
    from typer.testing import CliRunner

    from onlineeval.cli import app

    tmp = tmp_path_factory.mktemp("no_se")
    mapping = yaml.safe_load((REPO / "configs" / "counterfactual.yaml").read_text(encoding="utf-8"))
    mapping.update(replicates=1, workers=1, output=str(tmp / "out"))
    mapping["traffic"].update(days=2, queries_per_day=300)
    cf = next(d for d in mapping["designs"] if d["type"] == "counterfactual")
    cf.pop("bootstrap", None)
    cf["estimators"] = ["snips", "adaptive_ips"]
    mapping["designs"] = [cf]
    mapping["analysis"].update(assumption_sweep=None, bias_check=0, aa=False, truth_impressions=20000)
    (tmp / "cf.yaml").write_text(yaml.safe_dump(mapping), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--config", str(tmp / "cf.yaml"), "--quiet"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp / "out" / "summary.json").read_text(encoding="utf-8"))
    return {"summary": summary, "output": res.output, "html": (tmp / "out" / "report.html").read_text("utf-8")}


def test_one_replicate_sized_from_the_sd_says_no_se(run: dict[str, object]) -> None:
    designs = run["summary"]["designs"]["counterfactual"]  # type: ignore[index]
    aips, snips = designs["adaptive_ips"], designs["snips"]
    assert aips["variance_model"]["points"] == 0 and aips["no_se"] is True
    assert aips["analytic_required_impressions"] is None
    assert aips["analytic_required_impressions_unreachable_share"] is None  # it was 1.0
    assert snips["no_se"] is False and snips["analytic_required_impressions"] is not None  # its own SE sizes it
    lines = str(run["output"]).splitlines()
    row = next(line for line in lines if " adaptive_ips " in line and "+2.2%" in line)
    assert f" {NO_SE} " in row and "never" not in row and "not reachable" not in row
    note = next(line for line in lines if line.startswith(f"  '{NO_SE}' "))
    assert "counterfactual/adaptive_ips" in note and "snips" not in note
    assert f"{NO_SE}: counterfactual/adaptive_ips" in str(run["html"])
