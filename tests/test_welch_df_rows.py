"""An A/B design with ``test: welch`` records its Welch t's degrees of freedom on its daily rows (replicates.csv's
``df``), as its per-batch looks did: its intervals and p-values are Welch's t, so the daily monitoring's
rules take that t too (:func:`onlineeval.stats.sequential_test` with ``df``: fixed-horizon and peeking by its
p-values, the mSPRT and O'Brien-Fleming as normal deviates of its tails) and the fixed rule's power is the main
table's power@end. Before, the daily rows said ``inf`` (z) and the monitoring
rejected with z where the table's test was t."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from onlineeval.cli import app


def _config(tmp_path: Path) -> Path:
    import yaml

    mapping = {
        "seed": 5, "replicates": 80, "workers": 1, "output": str(tmp_path / "out"),
        "collection": {"n_queries": 60, "candidates": 10},
        "rankers": {"depth": 5, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.3}},
        "offline_metric": "nDCG@5",
        "users": {"population": 16, "activity": {"sigma": 1.0}, "types": [
            {"name": "nav", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
            {"name": "inf", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]},
        "traffic": {"days": 3, "queries_per_day": 60, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank", "test": "welch",
                     "analysis": {"monitoring": "daily"}},
                    {"name": "ab_of", "type": "ab", "metric": "reciprocal_rank", "test": "welch",
                     "analysis": {"sequential": "obrien_fleming"}}],
        "analysis": {"aa": True},
    }
    path = tmp_path / "welch.yaml"
    path.write_text(yaml.safe_dump(mapping), encoding="utf-8")
    return path


def test_welch_rows_carry_their_df_and_the_fixed_rule_is_the_tables_test(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["simulate", "--config", str(_config(tmp_path))])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rows, curves = pd.read_csv(out / "replicates.csv"), pd.read_csv(out / "curves.csv")
    mine = rows[(rows.design == "ab") & rows.primary & (~rows.aa)]
    last_day = int(mine.day.max())
    end = mine[(mine.day == last_day) & mine.pvalue.notna()]  # (an arm of fewer than 2 users: undefined, inf)
    assert len(end) >= 70
    # the rows' df are Welch's: finite, at most the users less 2 (Welch-Satterthwaite's bound), and their t
    # gives the rows' p-values
    assert np.isfinite(end.df).all() and (end.df <= end.n_users - 2 + 1e-9).all() and end.df.min() < 10
    t_p = 2 * stats.t.sf(np.abs(end.estimate / end.se), end.df)
    assert np.allclose(t_p, end.pvalue, rtol=1e-9, atol=1e-12)
    curve = curves[(curves.design == "ab") & (~curves.aa) & (curves.metric == "reciprocal_rank")].iloc[-1]
    fixed = summary["monitoring"]["ab"]["rules"]["fixed"]
    assert fixed["power"] == pytest.approx(curve["power"], abs=1e-12)
    # z's power (what the fixed rule gave before) differs here, so the comparison can fail
    truth = curve["true_effect"]
    z = stats.norm.ppf(0.975)
    every = mine[mine.day == last_day]  # (undefined rows are not rejections)
    z_power = np.mean((np.abs(every.estimate / every.se) >= z) & (np.sign(every.estimate) == np.sign(truth)))
    assert z_power != pytest.approx(curve["power"], abs=1e-12)
    # the mSPRT and O'Brien-Fleming rules take the same t (each look's t as the normal deviate of its tail
    # probability): their A/A rates are sequential_test's on the rows' (estimate, se, df), not z's
    from onlineeval.stats import sequential_test

    mon = summary["monitoring"]["ab"]

    def looks(design: str, col: str) -> np.ndarray:
        aa_rows = rows[(rows.design == design) & rows.primary & rows.aa]
        return aa_rows.pivot_table(index="replicate", columns="day", values=col, dropna=False).sort_index(
            axis=1).to_numpy(dtype=float)

    differs = 0
    # the design's own O'Brien-Fleming test (designs[i].analysis.sequential) as well
    own = summary["sequential"]["ab_of"]
    kw_own = {"fractions": np.array(own["fractions"])}
    with_t = sequential_test(looks("ab_of", "estimate"), looks("ab_of", "se"), "obrien_fleming",
                             df=looks("ab_of", "df"), **kw_own)
    assert own["rules"]["obrien_fleming"]["aa_false_positive_rate"] == pytest.approx(with_t.reject.mean(), abs=1e-12)
    differs += with_t.reject.mean() != sequential_test(looks("ab_of", "estimate"), looks("ab_of", "se"),
                                                       "obrien_fleming", **kw_own).reject.mean()
    for rule in ("msprt", "obrien_fleming"):
        kw = {"tau": mon["tau"]} if rule == "msprt" else {"fractions": np.array(mon["fractions"])}
        est, se = looks("ab", "estimate"), looks("ab", "se")
        with_t = sequential_test(est, se, rule, df=looks("ab", "df"), **kw).reject.mean()
        with_z = sequential_test(est, se, rule, **kw).reject.mean()
        assert mon["rules"][rule]["aa_false_positive_rate"] == pytest.approx(with_t, abs=1e-12), rule
        differs += with_t != with_z
    assert differs >= 2  # z's rates differ here, so the comparisons can fail
