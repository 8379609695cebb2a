"""Sequential decisions, review 6.

F4: 'saves N days' compared a rule at much lower power with the fixed horizon's last day. The block now leads with
the plan at equal (target) power and, at the simulated length, gives the share of replicates that decided, their
mean day, and the day from which the fixed horizon's simulated power (the curves) reaches the rule's power.
Recomputed here: the mSPRT by its mixture likelihood ratio written out (Johari et al. 2017), O'Brien-Fleming's
decisions from the summary's own crossings, the fixed horizon's power from curves.csv (the p-value column).
"""

from __future__ import annotations

import numpy as np
import pytest

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.sequential import sequential_lines

ALPHA, DAYS = 0.05, 7
AB = {
    "seed": 7, "replicates": 120,
    "collection": {"n_queries": 60, "candidates": 8}, "rankers": {"depth": 3, "B": {"noise": 0.7}},
    "users": {"population": 1500, "activity": {"sigma": 0.5}},
    "traffic": {"days": DAYS, "queries_per_day": 500, "batch_hours": 24},
    "designs": [
        {"name": "seq", "type": "ab", "metric": "clicks_per_query", "analysis": {"sequential": "msprt"}},
        {"name": "gs", "type": "ab", "metric": "clicks_per_query", "analysis": {"sequential": "obrien_fleming"}},
    ],
    "analysis": {"alpha": ALPHA, "truth_impressions": 20000, "null": False, "aa": False},
}


@pytest.fixture(scope="module")
def run():
    return simulate(config_from_mapping(AB), workers=1)


def _pivot(rows, design: str, column: str) -> np.ndarray:
    sub = rows[(rows["design"] == design) & (rows["metric"] == "clicks_per_query") & (~rows["aa"])]
    return sub.pivot(index="replicate", columns="day", values=column).sort_index(axis=1).to_numpy(dtype=float)


def _msprt_first_rejection(est: np.ndarray, se: np.ndarray, tau: float) -> np.ndarray:
    """First day (1-based) at which the normal-mixture likelihood ratio
    sqrt(v / (v + tau^2)) exp(d^2 tau^2 / (2 v (v + tau^2))) reaches 1/alpha; 0 when never."""
    v = se**2
    log_lr = 0.5 * np.log(v / (v + tau**2)) + est**2 * tau**2 / (2 * v * (v + tau**2))
    hit = log_lr >= np.log(1 / ALPHA)
    return np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)


def _first_day_staying(power: np.ndarray, target: float) -> float | None:
    days = np.arange(1, power.size + 1)
    for k in range(power.size):
        if np.all(power[k:] >= target):
            return float(days[k])
    return None


def test_decision_gives_decided_share_mean_day_and_the_fixed_horizons_day_at_equal_power(run) -> None:
    curves = run.curves
    truth = run.summary["designs"]["seq"]["clicks_per_query"]["true_effect"]
    for design in ("seq", "gs"):
        e = run.summary["sequential"][design]
        d = e["decision"]
        est, se = _pivot(run.rows, design, "estimate"), _pivot(run.rows, design, "se")
        if design == "seq":
            first = _msprt_first_rejection(est, se, e["tau"])
            decided = first > 0
            right = decided & (np.sign(est[np.arange(est.shape[0]), np.maximum(first - 1, 0)]) == np.sign(truth))
            assert d["power"] == pytest.approx(right.mean())
            assert d["no_decision"] == pytest.approx(1 - decided.mean())
            assert d["mean_decision_day"] == pytest.approx(np.where(decided, first, DAYS).mean())
            assert d["mean_decision_day_decided"] == pytest.approx(first[decided].mean())
        # the fixed horizon's power with each day as the horizon is the curves' power (p < alpha, right sign)
        c = curves[(curves["design"] == design) & (curves["metric"] == "clicks_per_query") & (~curves["aa"])]
        power = c.sort_values("day")["power"].to_numpy(dtype=float)
        np.testing.assert_allclose(e["fixed_power_by_look"], power, rtol=0, atol=1e-12)
        at = _first_day_staying(power, d["power"])
        assert at is not None  # both rules here have less power than the fixed horizon on its last day
        assert d["fixed_day_at_power"] == at
        assert d["days_saved_at_equal_power"] == pytest.approx(at - d["mean_decision_day"])
        # the printed line: the plan at equal power first, then the simulation at equal power, no 'saves' vs day 7
        line = next(ln for ln in sequential_lines(run.summary, 24) if ln.split()[:1] == [design])
        verdict = line[line.index(" planned for the target power: ") + 1:]
        assert line[:line.index(verdict)].split()[-1] == f"{d['mean_decision_day']:.1f}"  # right after the day column
        assert "(fixed: day" not in verdict
        saved = at - d["mean_decision_day"]
        assert (f"simulated {DAYS}.0 days: decided in {1 - d['no_decision']:.3f} on day "
                f"{d['mean_decision_day_decided']:.1f} on average; the fixed horizon's power is at least "
                f"{d['power']:.3f} from day {at:.1f}") in verdict
        assert verdict.endswith(f"at equal power the rule's mean {d['mean_decision_day']:.1f} days "
                                f"{'save' if saved >= 0 else 'cost'} {abs(saved):.1f}")
    # this world has both outcomes: the mSPRT costs days at equal power, O'Brien-Fleming does not
    assert run.summary["sequential"]["seq"]["decision"]["days_saved_at_equal_power"] < 0
    assert run.summary["sequential"]["gs"]["decision"]["days_saved_at_equal_power"] > 0


# ------------------------------------------------------------------------------------------------------------ F3
# Review 6, F3: a design whose A/A is identically 0 (probabilistic interleaving: every A/A comparison a tie) gets
# each rule's false-positive rate on its null-variant replicates (the null user: every true effect 0) instead.
NULL_DAYS = 4
PROB = {
    "seed": 7, "replicates": 100,
    "collection": {"n_queries": 200, "candidates": 20}, "rankers": {"depth": 10, "B": {"noise": 0.9}},
    "users": {"population": 2000, "activity": {"sigma": 0.5}},
    "traffic": {"days": NULL_DAYS, "queries_per_day": 1000, "batch_hours": 24},
    "designs": [{"name": "prob", "type": "interleaving", "method": "probabilistic",
                 "analysis": {"sequential": "msprt"}}],
    "analysis": {"alpha": ALPHA, "truth_impressions": 50000},
}


@pytest.fixture(scope="module")
def prob():
    return simulate(config_from_mapping(PROB), workers=1)


def _band_hi(n: int, p: float, level: float = 0.99) -> int:
    from scipy import stats as sps

    k = np.arange(n + 1)
    return int(k[np.searchsorted(sps.binom.cdf(k, n, p), 1 - (1 - level) / 2 - 1e-12)])


def test_degenerate_aa_gets_each_rules_rate_on_the_null_variant(prob) -> None:
    from scipy import stats as sps

    from onlineeval.stats.sequential import spending_boundaries

    rows = prob.rows
    aa = rows[(rows["design"] == "prob") & (rows["metric"] == "delta_ab") & rows["aa"]]
    assert len(aa) and (aa["estimate"].fillna(0) == 0).all()  # the A/A is identically 0
    mon = prob.summary["monitoring"]["prob"]
    assert mon["rules"]["fixed"]["aa_degenerate"] is True
    seq = prob.summary["sequential"]["prob"]
    nm = seq["null_monitoring"]
    assert nm["metric"] == "null:delta_ab" and nm["tau"] == pytest.approx(mon["tau"], rel=1e-12)
    null = rows[(rows["design"] == "prob") & (rows["metric"] == "null:delta_ab") & (~rows["aa"])]
    est = null.pivot(index="replicate", columns="day", values="estimate").sort_index(axis=1).to_numpy(dtype=float)
    se = null.pivot(index="replicate", columns="day", values="se").sort_index(axis=1).to_numpy(dtype=float)
    assert est.shape == (PROB["replicates"], NULL_DAYS)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.abs(est / se)
    crit = sps.norm.ppf(1 - ALPHA / 2)
    bounds = spending_boundaries(np.asarray(mon["fractions"]), ALPHA, "obrien_fleming").upper
    first_msprt = _msprt_first_rejection(est, se, mon["tau"])
    expected = {
        "fixed": np.nan_to_num(z[:, -1]) >= crit,
        "peeking": (np.nan_to_num(z) >= crit).any(axis=1),
        "msprt": first_msprt > 0,
        "obrien_fleming": (np.nan_to_num(z) >= np.asarray(bounds)[None, :]).any(axis=1),
    }
    r = PROB["replicates"]
    hi = _band_hi(r, ALPHA)
    for rule, rejected in expected.items():
        rec = nm["rules"][rule]
        assert rec["false_positive_rate"] == pytest.approx(rejected.mean()), rule
        assert rec["within_band_or_below"] is bool(rejected.sum() <= hi), rule
        assert rec["binomial_99_band"][1] == pytest.approx(hi / r)
    # peeking inflates the null rate (as on the A/B designs); the fixed horizon and mSPRT hold it
    assert nm["rules"]["peeking"]["false_positive_rate"] > nm["rules"]["fixed"]["false_positive_rate"]
    # the configured rule's record (its looks are the days here) and its printed cell
    dec = seq["decision"]
    assert dec["null_false_positive_rate"] == pytest.approx(expected["msprt"].mean())
    assert seq["rules"]["peeking"]["null_false_positive_rate"] == pytest.approx(expected["peeking"].mean())
    lines = sequential_lines(prob.summary, 24)
    line = next(ln for ln in lines if ln.split()[:1] == ["prob"])
    mark = "" if expected["msprt"].sum() <= hi else "!"
    assert f" null {expected['msprt'].mean():.3f}{mark} " in line
    note = next(ln for ln in lines if ln.startswith("  null (prob)"))
    assert f"band of alpha {0:.3f}-{hi / r:.3f}" in note and "A/A '-'" not in "\n".join(lines)


def test_null_rate_note_marks_a_biased_design() -> None:
    from simulations.sequential import null_rate_note, null_rate_text

    rec = {"null_false_positive_rate": 0.21, "null_within_band_or_below": False, "null_binomial_99_band": [0.0, 0.11]}
    assert null_rate_text(rec) == "null 0.210!"
    assert null_rate_text({"false_positive_rate": 0.05, "within_band_or_below": True}) == "null 0.050"
    assert null_rate_text({}) == ""
    note = null_rate_note({"bal": rec, "prob": rec}, ["bal"])
    assert note.startswith("  null (bal, prob): ") and "0.000-0.110" in note
    assert note.endswith("bal biased (null check): its null rate counts its bias as well, not only false positives")
    assert "biased" not in null_rate_note({"prob": rec})


def test_monitoring_table_prints_the_null_rates_in_place_of_a_degenerate_aa(prob) -> None:
    """The daily monitoring table (simulations.report) shows 'null <rate>' for each rule of a design whose A/A is
    identically 0, read from sequential[design].null_monitoring (recomputed above), and the note says what it is."""
    from simulations.report import terminal_summary

    nm = prob.summary["sequential"]["prob"]["null_monitoring"]["rules"]
    text = terminal_summary(prob)
    block = text[text.index("Daily monitoring"):]
    line = next(ln for ln in block.splitlines() if ln.split()[:1] == ["prob"])
    rates = [f"{nm[r]['false_positive_rate']:.3f}" + ("" if nm[r]["within_band_or_below"] else "!")
             for r in ("fixed", "peeking", "msprt", "obrien_fleming")]
    assert [f"null {x:>7s} pw " in line for x in rates] == [True] * 4, line
    assert "A/A" not in line
    assert "  null (prob): the design's A/A compares A with itself" in block
    assert "A/A '-' (prob)" not in block
