"""The counterfactual designs' bias check: each estimator against the exact truth on one large direct log.

The replicates' t-test finds a bias only beyond about 4 SE of the replicates' mean: a run of 30 replicates of three
days of configs/counterfactual.yaml left IIPS (item-position independence, broken by the half of the users who
click like a cascade) unflagged at +0.0144 +- 0.0041 (63% of the effect) and gave it a sample size half of IPS's.
The check flags it from one direct log of 10^6 impressions, leaves the estimators whose assumption holds alone, and
does not read one log's z where heavy-tailed weights make it non-normal (Plackett-Luce logger at temperature 0.5:
whole-list IPS at z -7.4 on an unbiased estimate).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from test_simulation_counterfactual import CASCADE, PBM, _config, _run

from onlineeval.errors import ConfigError
from simulations.analysis import is_biased_entry
from simulations.config import config_from_mapping, load_config
from simulations.designs.counterfactual.bias_check import MAX_SKEW, MIN_ESS, _skewness, check_design
from simulations.report import conventions, terminal_summary
from simulations.runner import world_seed
from simulations.users import UserModels
from simulations.world import build_world

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "counterfactual.yaml"
Z_POWER = float(stats.norm.ppf(0.8))


def _check(overrides, n, seed):
    cfg = load_config(CONFIG, overrides)
    world = build_world(cfg, world_seed(cfg.seed))
    design = next(d for d in cfg.designs if d.type == "counterfactual")
    return check_design(design, world, UserModels.from_config(cfg.users), n, np.random.default_rng(seed), 0.05,
                        4.0, 0.8)


def test_the_check_flags_the_estimators_whose_assumption_the_users_break_and_no_other():
    # the bundled config: half PBM, half cascade users; RIPS, IPS, SNIPS and adaptive IPS hold there, IIPS does not
    # and clipped IPS (cap 5) is biased by construction
    out = _check(None, 1_000_000, [0, 9])
    assert set(out) == {"snips", "ips", "rips", "iips", "adaptive_ips", "clipped_ips(cap=5)"}
    for label, c in out.items():
        assert c["reliable"], (label, c)  # epsilon-greedy weights are bounded: the z is read
        assert c["impressions"] == 1_000_000
        assert c["z"] == pytest.approx((c["estimate"] - c["truth"]) / c["se"])
        assert c["detects"] == pytest.approx((4.0 + Z_POWER) * c["se"])
    flagged = {label for label, c in out.items() if c["biased"]}
    assert flagged == {"iips", "clipped_ips(cap=5)"}
    # IIPS over-estimates B's gain: its cascade users' clicks on lower slots depend on the slots above
    assert out["iips"]["z"] > 4 and out["iips"]["bias"] > 0.4 * out["iips"]["truth"]
    # the truth is the design's exact V(B) - V(A) (configs/counterfactual.yaml's README: +0.0228)
    assert out["ips"]["truth"] == pytest.approx(0.0228, abs=5e-5)


def test_under_the_null_the_check_flags_no_unbiased_estimator_over_seeds():
    # the check's behaviour under its null at the size users run (10^6 impressions), not one log: over 12 seeds of
    # the bundled config IPS, SNIPS and RIPS (unbiased there) are never flagged (each flag has probability 6.3e-5
    # under a normal z; 36 checks: 0.002), their z's behave like N(0, 1) (mean within 4 SE of 0, variance in the
    # 99.99% chi-square band), and IIPS (biased) is flagged in every one (measured: z 4.2-7.9 over 40 seeds)
    overrides = {"designs[2].estimators": ["ips", "snips", "rips", "iips"]}
    seeds = 12
    z = {label: [] for label in ("ips", "snips", "rips")}
    flagged_iips = 0
    for s in range(seeds):
        out = _check(overrides, 1_000_000, [s, 123])
        for label in z:
            assert out[label]["reliable"] and not out[label]["biased"], (s, label, out[label])
            z[label].append(out[label]["z"])
        flagged_iips += out["iips"]["biased"]
    allz = np.concatenate([np.asarray(v) for v in z.values()])
    # the three estimators' z's on one log are correlated, so the mean's SE is taken from one estimator's count
    assert abs(allz.mean()) <= 4 / math.sqrt(seeds)
    for v in z.values():
        var = float(np.var(v, ddof=1))
        lo, hi = stats.chi2.ppf([5e-5, 1 - 5e-5], seeds - 1) / (seeds - 1)
        assert lo <= var <= hi, (var, lo, hi)
    assert flagged_iips == seeds


def test_heavy_tailed_weights_make_the_check_inconclusive_not_biased():
    # Plackett-Luce over 20 candidates at temperature 0.5, depth 5: the target B's lists are rare, whole-list IPS's
    # weights heavy-tailed; this log has not drawn B's largest weights, so unbiased IPS sits at z -7.4 with a small SE
    overrides = {"designs[2].logger": {"policy": "plackett_luce", "ranker": "A", "temperature": 0.5},
                 "designs[2].estimators": ["ips", "snips", "rips", "iips"]}
    out = _check(overrides, 1_000_000, [4, 11])
    ips = out["ips"]
    assert ips["z"] < -4  # what a plain 4-SE rule would call a bias
    assert ips["skewness"] > MAX_SKEW and not ips["reliable"] and not ips["biased"]
    assert ips["detects"] is None and "inconclusive" in ips["note"]
    # why: B's whole-list weights rest on a few impressions (effective sample size 78); IIPS's item weights are
    # drawn enough, its estimate heavy-tailed
    assert ips["inconclusive"] == "not drawn" and "effective sample size of 78 " in ips["not_drawn"][0]
    assert out["iips"]["inconclusive"] == "heavy tail" and out["iips"]["not_drawn"] == []
    # no unbiased estimator is flagged on this log, whatever its z
    assert not any(out[label]["biased"] for label in ("ips", "snips", "rips"))


def test_a_log_that_never_draws_the_targets_weights_is_inconclusive_not_biased():
    # one epsilon-greedy logger around A over 20 candidates: B's whole list has probability about 0.2 / (20 x 19 x
    # 18 x 17 x 16), so 10^6 impressions hardly ever show it; whole-list IPS of B is then near 0 with a tiny SE (z
    # about -1000 on an unbiased estimator) and light-tailed in what the log holds (skewness below 0.001): the mean
    # weight, 1 in expectation, says the log has not drawn B's weights
    overrides = {"designs[2].logger": {"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.2, "n": 20},
                 "designs[2].estimators": ["ips", "snips"]}
    out = _check(overrides, 1_000_000, [0, 9])
    ips = out["ips"]
    assert ips["z"] < -100 and abs(ips["skewness"]) <= MAX_SKEW
    assert not ips["reliable"] and not ips["biased"] and "not drawn enough of the target's weights" in ips["note"]
    assert "B's mean weight" in ips["note"]
    assert ips["inconclusive"] == "not drawn" and [t[:15] for t in ips["not_drawn"]] == ["B's mean weight"]
    # another log draws B's list a few times: IPS is then heavy-tailed (skewness about 1), while SNIPS of B is the
    # mean reward of those few impressions, with a delta-method SE from them alone (z -91, skewness small): the
    # weights' effective sample size says so
    out = _check(overrides, 1_000_000, [1, 2])
    assert out["ips"]["skewness"] > MAX_SKEW and not out["ips"]["biased"]
    snips = out["snips"]
    assert snips["z"] < -50 and abs(snips["skewness"]) <= MAX_SKEW
    assert not snips["biased"] and f"(< {MIN_ESS:,})" in snips["note"]
    assert snips["inconclusive"] == "not drawn" and f"(< {MIN_ESS:,})" in snips["not_drawn"][0]


def test_skewness_is_the_estimates_sampling_skewness_of_the_linearised_contributions():
    rng = np.random.default_rng(3)
    n = 5000
    den_a, den_b = rng.exponential(1.0, n), rng.exponential(2.0, n) ** 2
    num_a, num_b = den_a * rng.random(n), den_b * rng.random(n)
    r_a, r_b = num_a.sum() / den_a.sum(), num_b.sum() / den_b.sum()
    d = (num_b - r_b * den_b) / den_b.mean() - (num_a - r_a * den_a) / den_a.mean()
    assert _skewness([num_a, den_a, num_b, den_b]) == pytest.approx(stats.skew(d) / math.sqrt(n), rel=1e-9)
    # a difference without spread has no skewness
    ones = np.ones(n)
    assert math.isnan(_skewness([ones, ones, ones, ones]))


def test_a_short_run_that_the_replicates_cannot_judge_still_marks_iips_biased(tmp_path: Path):
    # half cascade users (IIPS's independence broken), 8 replicates of 2 days: the replicates' t-test cannot see
    # IIPS's bias, the check does, and the main table withholds its sizes
    types = [{"name": "pbm", "share": 0.5, "click_model": PBM}, {"name": "nav", "share": 0.5, "click_model": CASCADE}]
    res = _run(_config(types=types, estimators=("iips", "ips", "rips"), replicates=8, days=2), output=tmp_path / "r")
    entries = res.summary["designs"]["cf"]
    iips = entries["iips"]
    assert not iips["biased_estimate"]  # the replicates' test alone would not flag it
    assert iips["bias_check"]["biased"] and is_biased_entry(iips)
    assert iips["analytic_required_impressions"] is None and "bias check" in iips["analytic_withheld"]
    for label in ("ips", "rips"):
        assert entries[label]["bias_check"]["reliable"] and not is_biased_entry(entries[label])
    assert res.summary["counterfactual"]["cf"]["estimators"]["iips"]["bias_check"] == iips["bias_check"]
    text = terminal_summary(res)
    assert "z +" in text and "errors of the biased: iips" in text
    assert "bias_check = 1,000,000 impressions" in conventions(res)["counterfactual_bias_check"]
    # report.html's estimator table: the check column, IIPS's z with its '!'
    html = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="counterfactual">'):]
    assert "<th>check</th>" in section or '<th class="text">check</th>' in section
    assert f"z {iips['bias_check']['z']:+.1f}!" in section
    # analysis.bias_check: 0 switches it off (the replicates' test alone)
    off = _run(_config(types=types, estimators=("iips",), replicates=8, days=2, analysis={"bias_check": 0}))
    assert "bias_check" not in off.summary["designs"]["cf"]["iips"]
    assert not is_biased_entry(off.summary["designs"]["cf"]["iips"])


@pytest.mark.parametrize("value", [1, 9_999, -1, 50_000_001])
def test_bias_check_sizes_outside_the_allowed_range_are_config_errors(value):
    with pytest.raises(ConfigError) as exc:
        config_from_mapping({"analysis": {"bias_check": value}})
    assert "analysis.bias_check" in str(exc.value)


def test_the_default_check_keeps_the_effective_config_and_another_size_is_in_it():
    assert "bias_check" not in config_from_mapping({}).effective()["analysis"]
    assert config_from_mapping({"analysis": {"bias_check": 20_000}}).effective()["analysis"]["bias_check"] == 20_000



def test_the_check_column_says_why_a_check_is_inconclusive():
    """The terminal and HTML check column: 'heavy tail' or 'not drawn' instead of one 'inconclusive' for both; the
    legend lists what each 'not drawn' target lacks and says why such an estimator is marked biased in the main table
    (its replicates' mean) although its check concluded nothing: a log that never draws the target's large weights
    (IPS at -1.08 with B's list shown with probability about 1e-7) looked like a biased estimator."""
    from simulations.report_designs import check_cell, check_lines

    base = {"impressions": 1_000_000, "reliable": False, "biased": False, "detects": None, "detects_power": 0.8,
            "bias": -1.07, "se": 0.0008, "z": -1336.0, "skewness": 0.0}
    unseen = {**base, "inconclusive": "not drawn", "not_drawn": ["B's mean weight 0.000543 (se 2.4e-05), expected 1"],
              "note": "inconclusive: the log has not drawn enough of the target's weights (...)"}
    tail = {**base, "inconclusive": "heavy tail", "not_drawn": [], "note": "inconclusive: the estimate's skewness"}
    assert check_cell(unseen) == "not drawn" and check_cell(tail) == "heavy tail"
    assert check_cell({**base, "inconclusive": "undefined", "note": "undefined: no positive weight"}) == "undefined"
    # a summary.json written before the reasons were kept
    assert check_cell({k: v for k, v in tail.items() if k not in ("inconclusive", "not_drawn")}) == "inconclusive"
    assert check_cell({**base, "reliable": True, "biased": True, "z": 6.41}) == "z +6.4!"
    [text] = check_lines({"ips": {"bias_check": unseen, "biased_in_main_table": True},
                          "snips": {"bias_check": unseen, "biased_in_main_table": False},
                          "rips": {"bias_check": tail, "biased_in_main_table": False}})
    assert "not drawn: ips (B's mean weight 0.000543 (se 2.4e-05), expected 1), snips (B's mean" in text
    assert "; ips is marked biased in the main table by the replicates' test" in text
    assert "rips (" not in text and "snips is marked" not in text
    [text] = check_lines({"rips": {"bias_check": tail, "biased_in_main_table": True}})
    assert "not drawn:" not in text and "marked biased in the main table by" not in text


def test_a_target_outside_the_loggers_support_is_said_so_not_not_drawn():
    """RandTop-3 around A cannot show B's lists (B differs from A below the top 3): the check's log has B's weights
    0 on almost every impression; 'not drawn' said the log had hardly drawn them, where no log can: the check says
    'no support' with the count (and the main table marks the estimator biased by its support count)."""
    from simulations.report_designs import check_cell

    overrides = {"designs[2].logger": {"policy": "randtop", "ranker": "A", "n": 3},
                 "designs[2].estimators": ["ips", "snips"]}
    n = 50_000
    out = _check(overrides, n, [0, 5])
    # independently: RandTop-3 around A shows B's list only where B is A with its top 3 permuted; the check's log
    # draws queries by their frequency, so its count is Binomial(n, p) with p the frequency of the other queries
    cfg = load_config(CONFIG, overrides)
    world = build_world(cfg, world_seed(cfg.seed))
    a, b = np.asarray(world.rankings["A"]), np.asarray(world.rankings["B"])
    reachable = (np.sort(a[:, :3], axis=1) == np.sort(b[:, :3], axis=1)).all(axis=1) & (a[:, 3:] == b[:, 3:]).all(1)
    p = float(world.frequency @ ~reachable)
    assert 0.9 < p < 1.0
    for label in ("ips", "snips"):
        c = out[label]
        assert not c["reliable"] and not c["biased"] and c["inconclusive"] == "no support", (label, c)
        [text] = c["no_support"]
        assert text.startswith("B's list leaves the logger's support on ") and text.endswith(" of 50,000 impressions")
        count = int(text.split(" on ")[1].split(" of ")[0].replace(",", ""))
        assert abs(count - n * p) <= 4 * math.sqrt(n * p * (1 - p)), (count, n * p)
        assert c["note"].startswith("no support: B's list leaves") and check_cell(c) == "no support"


def test_an_estimator_marked_biased_because_its_log_never_draws_the_targets_list_is_explained(tmp_path: Path):
    """End to end: an epsilon-greedy logger around A (epsilon 0.05 over 12 candidates) shows B's whole list with
    probability about 5e-7, so whole-list IPS of B is 0 on every replicate's log and on the check's: the replicates'
    test marks IPS biased (its mean is -V(A)), the check is inconclusive ('not drawn': B's mean weight far below 1),
    and the terminal legend says why the unbiased estimator is marked so."""
    logger = {"policy": "epsilon_greedy", "ranker": "A", "epsilon": 0.05, "n": 12}
    res = _run(_config(estimators=("ips",), logger=logger, replicates=8, days=2,
                       analysis={"bias_check": 50_000}))
    ips = res.summary["designs"]["cf"]["ips"]
    assert ips["biased_estimate"] and is_biased_entry(ips) and not ips.get("no_support")
    check = ips["bias_check"]
    assert check["inconclusive"] == "not drawn" and not check["biased"]
    assert [t[:15] for t in check["not_drawn"]] == ["B's mean weight"]
    assert res.summary["counterfactual"]["cf"]["estimators"]["ips"]["biased_in_main_table"]
    text = terminal_summary(res)
    row = next(line for line in text.splitlines() if line.startswith("  ips ") and "not drawn" in line)
    assert row.split()[0] == "ips"
    assert "; not drawn: ips (B's mean weight " in text
    assert "; ips is marked biased in the main table by the replicates' test: with logs of this size" in text
