"""An A/A false-positive rate above its 99% band is explained where the run measures why: the A/A replicates' mean SE
over their estimates' SD (with its jackknife SE), the users the estimate rests on, and the rate a two-sided z test
would have with normal estimates and an SE at that ratio of their spread. Before, a design with few users printed
'0.155!' in the A/A column and nothing said why (40 users of heavy-tailed activity: the A/A replicates' mean SE was
0.83 of their SD, which with normal estimates rejects 0.106; the rest is the SE's spread and the tails).
"""

from __future__ import annotations

from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from onlineeval.cli import app
from simulations.report_sizes import aa_excess_text

REPO = Path(__file__).resolve().parents[1]


def _aa(rate: float, ratio: float | None = 0.77, se: float | None = 0.05, **over: Any) -> dict[str, Any]:
    aa = {"false_positive_rate": rate, "replicates": 100, "binomial_99_band": [0.0, 0.11], "degenerate": False,
          "within_band": 0.0 <= rate <= 0.11, "mean_users": 29.4,
          "se_sd_ratio": None if ratio is None else {"ratio": ratio, "se": se, "replicates": 100}}
    aa.update(over)
    return aa


def _normal_rate(ratio: float, alpha: float) -> float:
    nd = NormalDist()
    return 2.0 * (1.0 - nd.cdf(nd.inv_cdf(1.0 - alpha / 2.0) * ratio))


@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_a_small_se_is_named_with_the_rate_it_explains(alpha: float) -> None:
    text = aa_excess_text("ab", "clicks_per_query", _aa(0.15), alpha)
    assert text is not None
    assert text.startswith("ab/clicks_per_query 0.150 (band 0.000-0.110): the A/A replicates' mean SE is 0.77 of "
                           "their estimates' SD (+- 0.05, 100 replicates), on 29 users")
    assert "the SE runs small" in text
    assert f"would reject {_normal_rate(0.77, alpha):.3f}," in text  # 0.131 at alpha 0.05


def test_an_se_that_matches_the_spread_leaves_the_tails() -> None:
    text = aa_excess_text("ab", "reciprocal_rank", _aa(0.15, ratio=0.95, se=0.05), 0.05)
    assert text is not None and "not measurably small" in text and "would reject" not in text


def test_no_note_within_or_below_the_band_or_for_ties() -> None:
    assert aa_excess_text("ab", "m", _aa(0.08), 0.05) is None
    assert aa_excess_text("ab", "m", _aa(0.0, binomial_99_band=[0.01, 0.11], within_band=False), 0.05) is None
    assert aa_excess_text("ab", "m", _aa(0.0, degenerate=True, within_band=None), 0.05) is None
    assert aa_excess_text("ab", "m", None, 0.05) is None
    undefined = aa_excess_text("ab", "m", _aa(0.2, ratio=None), 0.05)
    assert undefined is not None and "undefined" in undefined


def test_a_run_with_few_users_explains_its_flagged_rate(tmp_path: Path) -> None:
    mapping = yaml.safe_load((REPO / "configs" / "ab.yaml").read_text(encoding="utf-8"))
    mapping.update(replicates=100, workers=1, output=str(tmp_path / "out"))
    mapping["users"]["population"] = 30
    mapping["traffic"].update(days=3, queries_per_day=300)
    mapping["designs"] = [{"name": "ab", "type": "ab", "share_b": 0.5, "metric": "reciprocal_rank"}]
    mapping["analysis"].update(truth_impressions=20000)
    mapping["collection"]["n_queries"] = 200
    (tmp_path / "few.yaml").write_text(yaml.safe_dump(mapping), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--config", str(tmp_path / "few.yaml"), "--quiet"])
    assert res.exit_code == 0, res.output
    flagged = [line for line in res.output.splitlines() if line.startswith("  A/A FPR above its band: ")]
    assert flagged, res.output  # clicks per query: 0.150 where the band ends at 0.110
    summary = pd.read_json(tmp_path / "out" / "summary.json", typ="series")
    rows = pd.read_csv(tmp_path / "out" / "replicates.csv")
    for line in flagged:
        design, metric = line.split(": ", 1)[1].split(" ", 1)[0].split("/")
        aa = summary["designs"][design][metric]["aa"]
        last = rows[rows["aa"] & (rows["design"] == design) & (rows["metric"] == metric)
                    & (rows["day"] == rows["day"].max())]
        # the ratio recomputed from the replicates' own rows: mean SE over the SD of the estimates
        assert aa["se_sd_ratio"]["ratio"] == pytest.approx(last["se"].mean() / np.std(last["estimate"], ddof=1),
                                                           rel=1e-9)
        assert aa["mean_users"] == pytest.approx(last["n_users"].mean())
        assert f"{metric} {aa['false_positive_rate']:.3f} (band" in line
        assert aa["false_positive_rate"] > aa["binomial_99_band"][1]
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert html.count("A/A FPR above its band: ") == len(flagged)
