"""The shrinkage study counts systems by ranker pair and prints the MDE's interval (review 2026-12-02, C.4).

A sweep that varies only the click model (one ranker pair, two user populations) was "2 systems" of one
offline-to-online relation with a slope whose CI spanned 0, and its MDE table printed a bare number. Here:
systems are the distinct (A, B, collection) pairs (the ``system`` column); a group mixing populations is
warned about, naming the axis for ``shrinkage_by``; the MDE table prints the interval carried over from the
slope's CI (z se / slope at the CI's ends, recomputed here), 'unbounded' and the MDE flagged '!' when that
CI includes 0. References: statsmodels OLS for the pooled fit, the power formula for the MDE's ends.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps

from simulations.html_report.sweep import _mde_table, shrinkage_headline
from simulations.shrinkage import format_shrinkage, shrinkage_study
from simulations.sweep_outputs import system_key

import statsmodels.api as sm

AXIS = "users.click_model.preset"
BASE = {"design": "ab", "metric": "reciprocal_rank", "primary": True, "improvement_sign": 1, "alpha": 0.05,
        "power": 0.8, "var_a": 2.0, "var_b": 0.0, "online_effect_se": 0.0, "queries_per_day": 1000.0, "days": 3,
        "impressions": 3000.0}


def _study(pts: list[tuple[int, str, float, float, str]], by: list[str]) -> dict:
    """pts: (point, pair, offline delta, online effect, preset); every point with 6 replicates of estimates."""
    obs = pd.DataFrame([{**BASE, "point": p, "system": pair, "offline_delta": x, "online_effect": y}
                        for p, pair, x, y, _ in pts])
    rng = np.random.default_rng(1)
    est = pd.DataFrame([{"point": p, "design": "ab", "metric": "reciprocal_rank", "replicate": r,
                         "estimate": y + rng.normal(0, 0.02), "pvalue": 0.5}
                        for p, _, _, y, _ in pts for r in range(6)])
    labels = {p: {"rankers.B.noise": pair, AXIS: preset} for p, pair, _, _, preset in pts}
    groups = {p: {a: labels[p][a] for a in by} for p in labels}
    return shrinkage_study(obs, est, groups, by, "nDCG@10", labels=labels)


def test_one_pair_under_two_click_models_is_one_system_and_warned() -> None:
    """The reviewer's cat.yaml: one pair, offline delta 0.005573 at both points, truths 0.0118 and 0.0069."""
    study = _study([(0, "p", 0.005573, 0.0118, "navigational"), (1, "p", 0.005573, 0.0069, "informational")], [])
    (group,) = study["groups"]
    (rel,) = group["relations"]
    assert rel["n_systems"] == 1 and rel["pairs_with_several_truths"] == 1
    assert rel["through_origin"] is None and rel["with_intercept"] is None and rel["sentence"] is None
    assert group["mixed_axes"] == [AXIS]
    (warning,) = group["warnings"]
    assert f"mixes {AXIS} values" in warning and f"set shrinkage_by: [{AXIS}]" in warning
    (mde,) = group["mde"]
    assert mde["offline_mde"] == [] and mde["note"] == "no fitted relation (too few systems)"
    text = format_shrinkage(study)
    assert f"  warning: {warning}" in text
    assert "ab/reciprocal_rank: 1 system(s) (distinct ranker pairs): too few to fit a relation" in text
    assert "slope" not in text.split("MDE:")[0].split("too few")[1]  # no slope printed for it
    html = str(shrinkage_headline(study)[0]) + str(shrinkage_headline(study)[1])
    assert "too few systems" in html and "warning" in html and f"shrinkage_by: [{AXIS}]" in html


def test_pooled_populations_count_pairs_and_split_groups_do_not_warn() -> None:
    xs = [0.02, 0.04, 0.06]
    nav, inf = [0.011, 0.019, 0.031], [0.004, 0.009, 0.012]
    pts = [(i, f"p{i}", x, y, "navigational") for i, (x, y) in enumerate(zip(xs, nav))]
    pts += [(3 + i, f"p{i}", x, y, "informational") for i, (x, y) in enumerate(zip(xs, inf))]
    (group,) = _study(pts, [])["groups"]
    rel = group["relations"][0]
    assert rel["n_systems"] == 3 and rel["pairs_with_several_truths"] == 3 and group["mixed_axes"] == [AXIS]
    # no relation: fitted on the 6 distinct truths, 3 pairs would count as 6 systems (too narrow intervals)
    assert rel["through_origin"] is None and rel["with_intercept"] is None
    assert group["mde"][0]["note"] == "no fitted relation (systems seen with several true effects)"
    assert "3 of 3 system(s) seen with several true effects (user populations): no relation fitted" in \
        format_shrinkage(_study(pts, []))
    split = _study(pts, [AXIS])["groups"]
    assert [g["warnings"] for g in split] == [[], []] and [g["mixed_axes"] for g in split] == [[], []]
    for g, ys in zip(split, (nav, inf), strict=True):
        r = g["relations"][0]
        assert r["n_systems"] == 3 and r["pairs_with_several_truths"] == 0
        ols = sm.OLS(np.array(ys), np.array(xs)[:, None]).fit()
        assert r["through_origin"]["slope"] == pytest.approx(ols.params[0], rel=1e-10)


def test_mixed_axes_name_what_tells_the_truths_apart_not_the_traffic() -> None:
    """One pair under two presets x two traffic levels: points of one preset share a truth whatever the
    traffic, so the warning names the preset only."""
    pts = [(p, "pair", 0.03, 0.015 if p < 2 else 0.006, "navigational" if p < 2 else "informational")
           for p in range(4)]
    obs = pd.DataFrame([{**BASE, "point": p, "system": pair, "offline_delta": x, "online_effect": y,
                         "queries_per_day": 1000.0 * (1 + p % 2)} for p, pair, x, y, _ in pts])
    est = pd.DataFrame(columns=["point", "design", "metric", "replicate", "estimate", "pvalue"])
    labels = {p: {AXIS: preset, "traffic.queries_per_day": 1000 * (1 + p % 2)} for p, *_, preset in pts}
    (group,) = shrinkage_study(obs, est, {p: {} for p in labels}, [], "nDCG@10", labels=labels)["groups"]
    assert group["mixed_axes"] == [AXIS] and f"set shrinkage_by: [{AXIS}] for" in group["warnings"][0]
    assert group["relations"][0]["n_systems"] == 1


def _ends(m: dict, day: int) -> tuple[float, float | None]:
    """The MDE at the ends of the slope's CI, from the power formula: z se(D) / hi and z se(D) / lo."""
    z = sps.norm.ppf(1 - m["alpha"] / 2) + sps.norm.ppf(m["power"])
    se = math.sqrt(2.0 / (day * 1000.0))
    lo, hi = m["slope_ci"]
    return z * se / hi, (z * se / lo if lo > 0 else None)


def test_mde_interval_is_printed_and_unbounded_when_the_slope_ci_includes_zero() -> None:
    tight = _study([(0, "a", 0.02, 0.01, "n"), (1, "b", 0.04, 0.021, "n"), (2, "c", 0.06, 0.029, "n")], [])
    loose = _study([(0, "a", 0.02, 0.015, "n"), (1, "b", 0.04, -0.005, "n")], [])
    for study, includes_zero in ((tight, False), (loose, True)):
        (m,) = study["groups"][0]["mde"]
        lo, hi = m["slope_ci"]
        assert (lo <= 0) == includes_zero and m["slope_ci_includes_zero"] == includes_zero
        text = format_shrinkage(study).splitlines()
        k = next(i for i, line in enumerate(text) if line.startswith("  all points "))
        flag = "!" if includes_zero else ""
        shown = [1, 3, 7, 14]
        assert text[k].split("  (")[0].split()[-4:] == [f"{m['offline_mde'][d - 1]:.3g}{flag}" for d in shown]
        ends = [_ends(m, d) for d in shown]
        assert text[k + 1].split() == ["CI", "low", *(f"{low:.3g}" for low, _ in ends)]
        highs = ["unbounded" if high is None else f"{high:.3g}" for _, high in ends]
        assert text[k + 2].split() == ["CI", "high", *highs]
        assert ("the slope's 95% CI includes 0: the MDE is not bounded above" in text[k]) == includes_zero
        low, high = _ends(m, 7)
        html = str(_mde_table(study))
        cell = (f"{m['offline_mde'][6]:.3g}{flag} [{low:.3g}, " + ("unbounded]" if high is None else f"{high:.3g}]"))
        assert cell in html


def test_system_key_is_the_pair_not_the_users() -> None:
    config = {"seed": 3, "collection": {"n_queries": 150}, "rankers": {"A": {"noise": 1.0}, "B": {"noise": 0.9}},
              "offline_metric": {"name": "nDCG@10"}, "users": {"click_model": {"preset": "navigational"}},
              "traffic": {"days": 2}}
    other_users = {**config, "users": {"click_model": {"preset": "informational"}}, "traffic": {"days": 5}}
    other_b = {**config, "rankers": {"A": {"noise": 1.0}, "B": {"noise": 0.8}}}
    other_collection = {**config, "collection": {"n_queries": 200}}
    key = system_key({"config": config})
    assert system_key({"config": other_users}) == key
    assert len({key, system_key({"config": other_b}), system_key({"config": other_collection}),
                system_key({"config": {**config, "seed": 4}})}) == 4


def test_mde_plot_band_reaches_the_top_when_unbounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """mde.png: an MDE whose slope CI includes 0 keeps its band (to the top of the plot, hatched) and says
    so in the legend, where the band used to vanish (NaN upper end)."""
    import matplotlib.figure

    from simulations.shrinkage_plots import plot_mde

    saved = []
    real = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda self, *a, **k: (saved.append(self), real(self, *a, **k)))
    study = _study([(0, "a", 0.02, 0.015, "n"), (1, "b", 0.04, -0.005, "n")], [])
    plot_mde(study, tmp_path / "mde.png")
    (ax,) = saved[0].axes
    top = ax.get_ylim()[1]
    bands = [c for c in ax.collections if c.get_paths()]
    assert bands and all(np.isclose(max(p.vertices[:, 1].max() for p in c.get_paths()), top) for c in bands)
    m = study["groups"][0]["mde"][0]
    assert top > max(m["offline_mde"])  # the curve itself is inside the plot
    assert "MDE unbounded above" in ax.get_legend().get_texts()[0].get_text()


def test_points_csv_columns_carry_the_mde_interval() -> None:
    """points.csv's offline_mde_at_days comes with its ends from the slope's CI (z se / slope at the CI's ends,
    recomputed here); the upper end is inf when the CI reaches 0, so the file does not show a bare number."""
    from simulations.shrinkage import point_columns

    def obs_of(pts: list[tuple[int, str, float, float]]) -> pd.DataFrame:
        return pd.DataFrame([{**BASE, "point": p, "system": pair, "offline_delta": x, "online_effect": y}
                             for p, pair, x, y in pts])

    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    se = math.sqrt(BASE["var_a"] / (BASE["days"] * BASE["queries_per_day"]))
    for pts, includes_zero in (([(0, "a", 0.02, 0.01), (1, "b", 0.04, 0.021), (2, "c", 0.06, 0.029)], False),
                               ([(0, "a", 0.02, 0.015), (1, "b", 0.04, -0.005)], True)):
        study = _study([(*p, "n") for p in pts], [])
        fit = study["groups"][0]["relations"][0]["through_origin"]
        lo, hi = fit["slope_ci"]
        cols = point_columns(study, obs_of(pts)).set_index("point")
        for point in cols.index:
            assert cols.loc[point, "offline_mde_at_days"] == pytest.approx(z * se / fit["slope"], rel=1e-12)
            assert cols.loc[point, "offline_mde_low_at_days"] == pytest.approx(z * se / hi, rel=1e-12)
            high = cols.loc[point, "offline_mde_high_at_days"]
            assert (math.isinf(high) if includes_zero else high == pytest.approx(z * se / lo, rel=1e-12))


def test_kendall_tau_counts_ranker_pairs_like_the_relation() -> None:
    """Review: kendall_tau.n_systems counted the distinct truths (2 for one pair under two click models, where the
    relation said 1 system, and tau printed '-'). It counts ranker pairs now, n_truths the truths it ranks; one
    pair has no tau ('needs 2 systems'); pooled populations rank every truth (tau-b, ties in the offline delta:
    scipy's kendalltau) and say so; split groups rank their pairs."""
    one = _study([(0, "p", 0.005573, 0.0118, "navigational"), (1, "p", 0.005573, 0.0069, "informational")], [])
    rel = one["groups"][0]["relations"][0]
    tau = rel["kendall_tau"]
    assert (tau["n_systems"], tau["n_truths"], rel["n_systems"]) == (1, 2, 1)
    assert tau["truth"] is None and tau["truth_mc_sd"] is None and tau["experiment"] == []
    assert ("Kendall tau, offline vs true online order (2 distinct truths of 1 system): - (needs 2 systems)"
            in format_shrinkage(one))

    xs = [0.02, 0.04, 0.06]
    nav, inf = [0.011, 0.019, 0.031], [0.004, 0.009, 0.012]
    pts = [(i, f"p{i}", x, y, "navigational") for i, (x, y) in enumerate(zip(xs, nav))]
    pts += [(3 + i, f"p{i}", x, y, "informational") for i, (x, y) in enumerate(zip(xs, inf))]
    pooled = _study(pts, [])
    tau = pooled["groups"][0]["relations"][0]["kendall_tau"]
    assert (tau["n_systems"], tau["n_truths"]) == (3, 6)
    # by hand: 12 pairs untied in x, 10 concordant, 2 discordant (p0 nav - p1 inf, p1 nav - p2 inf), 3 tied in x
    assert tau["truth"] == pytest.approx(8 / math.sqrt(12 * 15), abs=1e-12)
    assert tau["truth"] == pytest.approx(sps.kendalltau(xs + xs, nav + inf, variant="b").statistic, abs=1e-12)
    (exp,) = tau["experiment"]
    assert (exp["n_systems"], exp["n_truths"], exp["replicates"]) == (3, 6, 6)
    assert "Kendall tau, offline vs true online order (6 distinct truths of 3 systems): 0.60" in \
        format_shrinkage(pooled)

    for group, ys in zip(_study(pts, [AXIS])["groups"], (nav, inf)):
        tau = group["relations"][0]["kendall_tau"]
        assert (tau["n_systems"], tau["n_truths"]) == (3, 3) and tau["experiment"][0]["n_systems"] == 3
        assert tau["truth"] == pytest.approx(sps.kendalltau(xs, ys).statistic, abs=1e-12)
    assert "Kendall tau, offline vs true online order (3 systems): 1.00" in format_shrinkage(_study(pts, [AXIS]))


def test_one_experiment_per_system_does_not_share_a_replicate_s_draws() -> None:
    """The sweep's points share their seed, so replicate r of every point sees the same traffic and click draws:
    estimates that move together (here the same noise added to every point's truth). Ranked replicate by replicate
    they would order the systems as their truths do every time (tau 1.00 +- 0.00, what the sweep printed for
    configs/sweep.yaml's A/B test, whose adjacent systems one week of traffic misorders about a quarter of the
    time). Each system takes another replicate; too few replicates for the systems gives no tau, with a note."""
    xs = [0.01, 0.02, 0.03, 0.04, 0.05]
    ys = [0.004, 0.008, 0.012, 0.016, 0.020]
    obs = pd.DataFrame([{**BASE, "point": p, "system": f"p{p}", "offline_delta": x, "online_effect": y}
                        for p, (x, y) in enumerate(zip(xs, ys))])
    rng = np.random.default_rng(3)
    common = rng.normal(0, 0.01, 400)  # one draw per replicate index, shared by every point
    est = pd.DataFrame([{"point": p, "design": "ab", "metric": "reciprocal_rank", "replicate": r,
                         "estimate": y + common[r], "pvalue": 0.5}
                        for p, y in enumerate(ys) for r in range(400)])
    labels = {p: {"rankers.B.noise": f"p{p}"} for p in range(5)}
    study = shrinkage_study(obs, est, {p: {} for p in labels}, [], "nDCG@10", labels=labels)
    (exp,) = study["groups"][0]["relations"][0]["kendall_tau"]["experiment"]
    # separate experiments: the estimates are independent N(y, 0.01^2), adjacent truths 0.004 apart
    draws = np.array(ys)[None, :] + rng.normal(0, 0.01, (20000, 5))
    taus = np.array([sps.kendalltau(xs, d).statistic for d in draws])
    independent = taus.mean()
    assert 0.3 < independent < 0.8

    def rotated_mean(noise: np.ndarray) -> np.ndarray:
        """The study's statistic for each row of replicate noises (M, 400): the mean over the 400 sets (the j-th
        system's estimate from replicate r + j) of tau against the increasing offline deltas, (C - D) / 10."""
        idx = (np.arange(400)[:, None] + np.arange(5)[None, :]) % 400
        y = np.asarray(ys)[None, None, :] + noise[:, idx]  # (M, 400, 5)
        i, j = np.triu_indices(5, 1)
        return np.sign(y[..., j] - y[..., i]).sum(axis=-1).mean(axis=-1) / 10

    # the 400 sets share their noises (set r and r + 1 use four of the same), so the mean's SE is not sd / sqrt(400):
    # measured over 2,000 redraws of the noises, with the independent reference's own Monte Carlo error
    assert rotated_mean(common[None, :])[0] == pytest.approx(exp["mean"], abs=1e-12)  # the statistic as computed
    se = math.hypot(rotated_mean(np.random.default_rng(5).normal(0, 0.01, (2000, 400))).std(ddof=1),
                    taus.std(ddof=1) / math.sqrt(taus.size))
    assert abs(exp["mean"] - independent) <= 4 * se, (exp["mean"], independent, se)
    assert exp["mean"] < 0.9 and exp["sd"] > 0.1  # not 1.00 +- 0.00
    few = est[est["replicate"] < 4]
    study = shrinkage_study(obs, few, {p: {} for p in labels}, [], "nDCG@10", labels=labels)
    (exp,) = study["groups"][0]["relations"][0]["kendall_tau"]["experiment"]
    assert exp["mean"] is None and exp["note"] == "4 replicates for 5 systems: too few to give every system its own"
    assert "one experiment per system of 3 d at 1000 queries/day: - (4 replicates for 5 systems" in \
        format_shrinkage(study)
