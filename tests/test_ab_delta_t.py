"""A/B designs with ``test: delta_t``: the delta method's difference with the bias-reduced (CR2) variance and
Student's t with Bell and McCaffrey's degrees of freedom (:func:`onlineeval.stats.ratio_diff_cr2`), for few users.

References: the library's ``ratio_diff_cr2`` on the design's own per-user sums (tests/test_ratio_cr2.py checks it
against the dense impression-level computation), and the A/A false-positive rate against its 99% binomial band
where the delta method's z is above it (a Monte Carlo with a fixed seed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from simulations.config import config_from_mapping


def few_users_mapping(population: int, designs: list[dict], replicates: int = 1, days: int = 3,
                      batch_hours: int = 12) -> dict:
    return {
        "seed": 5, "replicates": replicates, "workers": 1,
        "collection": {"n_queries": 60, "candidates": 10},
        "rankers": {"depth": 5, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.3}},
        "offline_metric": "nDCG@5",
        "users": {"population": population, "activity": {"sigma": 1.0}, "types": [
            {"name": "nav", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
            {"name": "inf", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]},
        "traffic": {"days": days, "queries_per_day": 300, "batch_hours": batch_hours},
        "designs": designs,
        "analysis": {"aa": True},
    }


def each_checkpoint(config, check) -> None:  # noqa: ANN001
    """One replicate of ``config`` batch by batch; after each day's checkpoint of each design,
    ``check(design, day)``."""
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world
    from tests.test_simulation_point_speed import drive_batches

    world = build_world(config, world_seed(config.seed))
    traffic, designs = build_replicate(config, world, UserModels.from_config(config.users),
                                       replicate_seeds(config.seed, 1)[0])

    def on_day_end(day: int) -> None:
        for d in designs:
            d.checkpoint(day)
            check(d, day)

    drive_batches(traffic, designs, on_day_end)


def same_row(row, want) -> None:  # noqa: ANN001
    """A checkpoint row's five numbers and df are the library estimate's (to rounding)."""
    got = (row.estimate, row.se, row.ci_low, row.ci_high, row.pvalue, row.df)
    assert got == pytest.approx((want.estimate, want.se, want.ci_low, want.ci_high, want.pvalue, want.df),
                                rel=1e-12, abs=1e-15)
    assert math.isfinite(row.df)


def test_every_days_rows_are_ratio_diff_cr2_on_the_designs_own_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every day's rows: ratio_diff_cr2 on the design's per-user sums with the df at the intra-user correlation of
    the per-impression values (onlineeval.stats.intra_user_correlation, the arms as groups), whose sums of squares
    the test adds up itself from the values the design computes impression by impression (recorded), not from the
    design's own squares."""
    import simulations.designs.ab as ab
    from onlineeval.stats import intra_user_correlation, ratio_diff_cr2

    mine: dict[int, dict[str, np.ndarray]] = {}  # id(design) -> the test's own sums of squares
    seen: list = []

    def process(self, batch):  # noqa: ANN001, ANN202
        seen[:] = [self, batch.user]
        return original_process(self, batch)

    def click_values(clicks, by_pattern):  # noqa: ANN001, ANN202
        out = original_values(clicks, by_pattern)
        design, user = seen
        own = mine.setdefault(id(design), {k: np.zeros(design.population) for k in ("clicks", "rr", "utility")})
        np.add.at(own["clicks"], user, out[0] ** 2)
        np.add.at(own["rr"], user, out[2] ** 2)
        return out

    def utility(clicks, weights):  # noqa: ANN001, ANN202
        out = original_utility(clicks, weights)
        design, user = seen
        np.add.at(mine[id(design)]["utility"], user, out ** 2)
        return out

    original_process, original_values, original_utility = ab.ABDesign._process, ab._click_values, ab.utility_values
    monkeypatch.setattr(ab.ABDesign, "_process", process)
    monkeypatch.setattr(ab, "_click_values", click_values)
    monkeypatch.setattr(ab, "utility_values", utility)
    # the NumPy batch step, whose per-impression values the test records (the compiled step adds the same squares bit
    # for bit: tests/test_simulation_kernels.py)
    monkeypatch.setattr(ab.ABDesign, "_kernel_inputs", lambda self: None)
    checked = 0

    def check(d, day: int) -> None:  # noqa: ANN001
        nonlocal checked
        if d.kind != "ab":
            return
        imp = d.sums["impressions"]
        active = imp > 0
        a, b = active & ~d.in_b, active & d.in_b
        rows = {r.metric: r for r in d.rows if r.day == day and r.metric in ab.METRICS}
        own = mine[id(d)]
        for metric, key in ab.METRICS.items():
            if metric in rows:
                square = d.sums[key] if key == "abandoned" else own[key]  # 0/1: its own square
                if key != "abandoned":
                    np.testing.assert_allclose(d.squares[key], square, rtol=1e-12, atol=1e-12)
                users = np.concatenate([np.flatnonzero(a), np.flatnonzero(b)])
                icc = intra_user_correlation(d.sums[key][users], imp[users], square[users],
                                             groups=np.r_[np.zeros(a.sum()), np.ones(b.sum())])
                want = ratio_diff_cr2(d.sums[key][a], imp[a], d.sums[key][b], imp[b], d.alpha, icc=icc)
                same_row(rows[metric], want)
                checked += 1
                rhos.append(icc)

    rhos: list[float] = []
    config = config_from_mapping(few_users_mapping(60, [{"name": "abt", "type": "ab", "test": "delta_t"},
                                                        {"name": "abu", "type": "ab", "test": "delta_t",
                                                         "metric": "utility"}]))
    each_checkpoint(config, check)
    assert checked == 2 * 3 * 3 + 2 * 4 * 3  # each design and its A/A variant, their metrics, three days
    assert max(rhos) > 0.05  # the two user types' impressions are correlated: the df differ from rho 0's


def test_cuped_rows_are_cuped_ratio_cr2_on_the_designs_own_sums() -> None:
    """CUPED with test: delta_t: every day's cuped: row is onlineeval.stats.cuped_ratio_cr2 on the design's per-user
    sums and pre-period sums, at the intra-user correlation of its own rows (the arms as groups); R and rho are the
    shares of the users' residual sums of squares the covariates (the pre-period ratio alone) remove."""
    from onlineeval.stats import intra_user_correlation
    from onlineeval.stats.cuped_cr2 import covariates, cuped_ratio_cr2, cuped_ratio_cr2_values, explained_share
    from simulations.cuped import CUPED_PREFIX, R_PREFIX, RHO_PREFIX, cuped_rows
    from simulations.designs.ab import METRICS

    checked = 0

    def check(d, day: int) -> None:  # noqa: ANN001
        nonlocal checked
        if d.kind != "ab":
            return
        rows = {r.metric: r for r in cuped_rows(d, day)}
        imp, pre = d.sums["impressions"], d.pre_period.sums
        active = imp > 0
        a, b = active & ~d.in_b, active & d.in_b
        for metric in d.metric_names():
            key = METRICS[metric]
            users = np.concatenate([np.flatnonzero(a), np.flatnonzero(b)])
            square = d.sums[key] if key == "abandoned" else d.squares[key]
            icc = intra_user_correlation(d.sums[key][users], imp[users], square[users],
                                         groups=np.r_[np.zeros(a.sum()), np.ones(b.sum())])
            want = cuped_ratio_cr2(d.sums[key][a], imp[a], d.sums[key][b], imp[b], pre[key][a],
                                   pre["impressions"][a], pre[key][b], pre["impressions"][b], d.alpha, icc=icc)
            same_row(rows[CUPED_PREFIX + metric], want)
            x = d.sums[key][active]
            z = covariates(pre[key][active], pre["impressions"][active])
            explained = cuped_ratio_cr2_values(x, imp[active], d.in_b[active], z, icc=icc)[3]
            assert rows[R_PREFIX + metric].estimate == pytest.approx(math.sqrt(max(explained, 0.0)), rel=1e-12)
            share, theta1 = explained_share(x, imp[active], d.in_b[active], z[:, :1])  # (tested against OLS)
            assert rows[RHO_PREFIX + metric].estimate == pytest.approx(
                math.copysign(math.sqrt(max(share, 0.0)), theta1[0]), rel=1e-12, abs=1e-15)
            assert abs(rows[RHO_PREFIX + metric].estimate) <= rows[R_PREFIX + metric].estimate + 1e-12
            checked += 1

    design = {"name": "abt", "type": "ab", "test": "delta_t", "analysis": {"cuped": {"pre_days": 2}}}
    each_checkpoint(config_from_mapping(few_users_mapping(60, [design])), check)
    assert checked == 2 * 3 * 3  # the design and its A/A variant, three metrics, three days


def simulate(tmp_path: Path, mapping: dict) -> tuple[dict, pd.DataFrame, str]:
    import yaml

    mapping["output"] = str(tmp_path / "out")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(mapping), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--config", str(path)])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    return summary, pd.read_csv(tmp_path / "out" / "replicates.csv"), res.output


def test_few_users_the_aa_rate_is_in_its_band_where_the_delta_methods_z_is_above_it(tmp_path: Path) -> None:
    """40 users of lognormal activity (sigma 1), two user types: the A/A false-positive rate of the fixed-horizon test
    over 200 replicates. delta (z) is flagged above its 99% band (0.120), delta_t is inside it (0.040), and the
    report names delta_t for the flagged design."""
    summary, _, output = simulate(tmp_path, few_users_mapping(40, [{"name": "ab", "type": "ab", "test": "delta"},
                                                           {"name": "abt", "type": "ab", "test": "delta_t"}],
                                                      replicates=200, batch_hours=24))
    z_aa = summary["designs"]["ab"]["reciprocal_rank"]["aa"]
    t_aa = summary["designs"]["abt"]["reciprocal_rank"]["aa"]
    assert z_aa["within_band"] is False and z_aa["false_positive_rate"] > z_aa["binomial_99_band"][1]
    assert t_aa["within_band"] is True
    flagged = [line for line in output.splitlines() if line.startswith("  A/A FPR above its band: ")]
    assert flagged and all(line.split(": ")[1].startswith("ab/") for line in flagged)
    assert all("test: delta_t (the bias-reduced SE" in line for line in flagged)
    conv = summary["conventions"]["ab_effect"]
    assert "z-test" in conv["ab"] and "Bell and McCaffrey" in conv["abt"]


def test_the_last_batch_look_of_each_day_is_the_daily_row_df_included(tmp_path: Path) -> None:
    _, rows, _ = simulate(tmp_path, few_users_mapping(60, [{"name": "abt", "type": "ab", "test": "delta_t",
                                                    "analysis": {"monitoring": "batch"}}], replicates=3))
    mine = rows[(rows.design == "abt") & ~rows.aa]
    daily = mine[mine.metric == "reciprocal_rank"].set_index(["replicate", "day"])
    looks = mine[mine.metric == "batch:reciprocal_rank"]
    last = looks[looks.day % 2 == 0].assign(day=lambda f: f.day // 2).set_index(["replicate", "day"])
    assert len(daily) == 9 and np.isfinite(daily.df).all()
    for col in ("estimate", "se", "pvalue", "df"):
        np.testing.assert_allclose(last.loc[daily.index, col], daily[col], rtol=1e-12)


def test_cuped_block_names_each_designs_adjusted_test_where_its_aa_rate_is_above_the_band() -> None:
    """summary.json's cuped.<design>.test names the adjusted test; an A/A rate above its band gets a note naming
    the designs' tests and, for a `delta` design, the small-sample form."""
    import copy

    from simulations.cuped import ADJUSTED_TEST, cuped_lines
    from simulations.job import simulate

    designs = [{"name": "abt", "type": "ab", "test": "delta_t", "analysis": {"cuped": {"pre_days": 2}}},
               {"name": "abd", "type": "ab", "analysis": {"cuped": {"pre_days": 2}}},
               {"name": "abw", "type": "ab", "test": "welch", "analysis": {"cuped": {"pre_days": 2}}}]
    result = simulate(config_from_mapping(few_users_mapping(60, designs, replicates=6)), workers=1)
    cup = result.summary["cuped"]
    assert {d: cup[d]["test"] for d in cup} == {"abt": ADJUSTED_TEST["delta_t"], "abd": ADJUSTED_TEST["delta"],
                                                "abw": ADJUSTED_TEST["welch"]}
    summary = copy.deepcopy(result.summary)
    for e in summary["cuped"].values():  # every A/A rate inside its band: no note
        for m in e["metrics"].values():
            m["aa"] = {"false_positive_rate": 0.05, "replicates": 6, "binomial_99_band": [0.0, 0.5],
                       "within_band": True}
    assert not any(line.startswith("  '!' A/A above its band") for line in cuped_lines(summary))
    summary["cuped"]["abt"]["metrics"]["clicks_per_query"]["aa"].update(false_positive_rate=0.0, within_band=False,
                                                                         binomial_99_band=[0.01, 0.5])
    assert not any(line.startswith("  '!' A/A above its band") for line in cuped_lines(summary))  # below: no note
    for design in ("abd", "abw"):
        summary["cuped"][design]["metrics"]["clicks_per_query"]["aa"].update(false_positive_rate=0.667,
                                                                             within_band=False)
    (note,) = [line for line in cuped_lines(summary) if line.startswith("  '!' A/A above its band")]
    assert note == ("  '!' A/A above its band (abd/clicks_per_query, abw/clicks_per_query): the adjusted test (abd: "
                    f"{ADJUSTED_TEST['delta']}; abw: {ADJUSTED_TEST['welch']}) rejects too often; with few users "
                    "test: delta_t takes CUPED's CR2 form (onlineeval.stats.cuped_ratio_cr2)")
