"""``onlineeval power`` against statsmodels (NormalIndPower, power_proportions_2indep), the delta-method
SE of the data, and Monte Carlo of the sequential designs (4 SE); errors are one clear line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.stats import sequential as sq
from onlineeval.stats.online import ratio_mean
from onlineeval.stats.power import required_n_two_sample

import statsmodels.stats.power as smp
import statsmodels.stats.proportion as spr

runner = CliRunner()


def run_json(*args: str) -> dict:
    res = runner.invoke(app, ["power", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def run_error(*args: str) -> str:
    res = runner.invoke(app, ["power", *args])
    assert res.exit_code == 2, res.output
    return res.output


# ----------------------------------------------------------------------------- proportions


def test_issue_example_57756_per_arm_is_statsmodels_normalindpower_with_cohens_h() -> None:
    doc = run_json("proportion", "--baseline", "0.10", "--target", "0.105")
    es = spr.proportion_effectsize(0.105, 0.10)
    ref = smp.NormalIndPower().solve_power(effect_size=es, alpha=0.05, power=0.8, ratio=1.0)
    assert math.ceil(ref) == 57_756
    assert doc["required"]["users_per_arm"] == {"A": 57_756, "B": 57_756}
    assert doc["required"]["unrounded_total"] / 2 == pytest.approx(ref, rel=1e-9)
    text = runner.invoke(app, ["power", "proportion", "--baseline", "0.10", "--target", "0.105"]).output
    assert "A 57,756, B 57,756" in text


@pytest.mark.parametrize("base", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("d", [1e-8, 1e-10, 1e-15, -1e-15])
def test_arcsine_effect_of_a_tiny_difference_is_exact(base: float, d: float) -> None:
    """Cohen's h of a tiny difference: 2 asin(sqrt(p + d)) - 2 asin(sqrt(p)) loses about 1e-16 / |d| of itself when
    the two arcsines are subtracted (statsmodels' proportion_effectsize does; 8e-8 at d = 1e-10, 3% at d = -1e-15).
    Reference: the Taylor series to second order, d / s + d^2 (2p - 1) / (4 s^3) with s = sqrt(p (1 - p)), whose
    next term is below float64's resolution for |d| <= 1e-8 (about 1e-11 of it at 1e-6)."""
    from onlineeval.cli.power_calc import Settings, proportion_metric

    m = proportion_metric(base, "arcsine", Settings(alpha=0.05, power=0.8, alternative="two-sided", share_b=0.5))
    s = math.sqrt(base * (1 - base))
    ref = d / s + d * d * (2 * base - 1) / (4 * s ** 3)
    assert m.w(d) == pytest.approx(ref, rel=1e-12, abs=0)


def test_arcsine_size_of_an_effect_below_the_baselines_resolution() -> None:
    """--relative-mde 1e-17 on 0.1: baseline + effect rounds to the baseline, and the two arcsines' difference was
    0 ("the effect is 0"); the effect is 1e-18, and its size is (z_0.975 + z_0.8)^2 / h^2 per arm. Sizes beyond
    10^15 are printed to 4 significant digits (their other digits are float64's noise)."""
    doc = run_json("proportion", "--baseline", "0.1", "--relative-mde", "1e-17")
    h = 1e-18 / math.sqrt(0.09)  # the effect 0.1 x 1e-17 (the Taylor series' next term is 1e-34 of it)
    # the size scales as 1 / h^2 at a fixed drift: statsmodels' size for h = 0.01, scaled
    ref = smp.NormalIndPower().solve_power(effect_size=0.01, alpha=0.05, power=0.8, ratio=1.0) * (0.01 / h) ** 2
    assert doc["required"]["unrounded_total"] / 2 == pytest.approx(ref, rel=1e-9)
    text = runner.invoke(app, ["power", "proportion", "--baseline", "0.1", "--relative-mde", "1e-17"]).output
    assert "required users per arm: A 1.413e+36, B 1.413e+36 (total 2.826e+36)" in text


@pytest.mark.parametrize("alternative", ["two-sided", "larger", "smaller"])
@pytest.mark.parametrize("share_b", [0.5, 0.3])
def test_arcsine_size_power_and_mde_match_statsmodels(alternative: str, share_b: float) -> None:
    base, target = 0.2, (0.212 if alternative != "smaller" else 0.188)
    args = ["proportion", "--baseline", str(base), "--target", str(target), "--alternative", alternative]
    args += ["--share-b", str(share_b), "--users", "40000"]
    doc = run_json(*args)
    es = spr.proportion_effectsize(target, base)
    ratio = share_b / (1 - share_b)  # statsmodels: nobs1 = A (control), nobs2 = ratio * nobs1 = B
    n_a = smp.NormalIndPower().solve_power(effect_size=es, alpha=0.05, power=0.8, ratio=ratio, alternative=alternative)
    assert doc["required"]["unrounded_total"] * (1 - share_b) == pytest.approx(n_a, rel=1e-8)
    assert doc["required"]["users_per_arm"]["A"] == math.ceil(n_a)
    pw = smp.NormalIndPower().power(es, 40000 * (1 - share_b), 0.05, ratio=ratio, alternative=alternative)
    assert doc["at_size"]["power"] == pytest.approx(pw, rel=1e-9)
    mde = doc["at_size"]["mde_absolute"]
    es_mde = spr.proportion_effectsize(base + mde, base)
    assert smp.NormalIndPower().power(es_mde, 40000 * (1 - share_b), 0.05, ratio=ratio, alternative=alternative) == (
        pytest.approx(0.8, abs=1e-8)
    )


@pytest.mark.parametrize("alternative", ["two-sided", "larger"])
def test_pooled_method_matches_statsmodels_power_proportions_2indep(alternative: str) -> None:
    doc = run_json("proportion", "--baseline", "0.10", "--target", "0.105", "--method", "pooled",
                   "--alternative", alternative, "--users", "100000", "--share-b", "0.4")  # fmt: skip
    n = doc["required"]["unrounded_total"]
    # statsmodels: nobs1 is the arm with p1 = prop2 + diff (our B), nobs2 = ratio * nobs1 (our A)
    pw = spr.power_proportions_2indep(0.005, 0.10, 0.4 * n, ratio=0.6 / 0.4, alpha=0.05, alternative=alternative,
                                      return_results=False)  # fmt: skip
    assert pw == pytest.approx(0.8, abs=1e-9)
    at = spr.power_proportions_2indep(0.005, 0.10, 40000, ratio=1.5, alternative=alternative, return_results=False)
    assert doc["at_size"]["power"] == pytest.approx(at, rel=1e-9)
    if alternative == "two-sided":
        eq = run_json("proportion", "--baseline", "0.10", "--target", "0.105", "--method", "pooled")
        ref = spr.samplesize_proportions_2indep_onetail(0.005, 0.10, 0.8, alpha=0.05, alternative="two-sided")
        assert eq["required"]["users_per_arm"]["A"] == math.ceil(ref) == 57_763


def test_unpooled_method_matches_normalindpower_with_the_unpooled_sd() -> None:
    doc = run_json("proportion", "--baseline", "0.10", "--target", "0.105", "--method", "unpooled")
    sd = math.sqrt((0.1 * 0.9 + 0.105 * 0.895) / 2)
    ref = smp.NormalIndPower().solve_power(effect_size=0.005 / sd, alpha=0.05, power=0.8)
    assert doc["required"]["users_per_arm"]["A"] == math.ceil(ref) == 57_760


def test_relative_mde_and_peeking_rate() -> None:
    a = run_json("proportion", "--baseline", "0.10", "--relative-mde", "0.05", "--looks", "5")
    b = run_json("proportion", "--baseline", "0.10", "--mde", "0.005")
    # 0.05 x 0.10 is 0.005000000000000001, one ulp above 0.005: the unrounded sizes differ in their last digits
    assert a["required"].pop("unrounded_total") == pytest.approx(b["required"].pop("unrounded_total"), rel=1e-13)
    assert a["required"] == b["required"]
    peeking = float(sq.peeking_fpr(sq.equal_fractions(5))[-1])
    assert a["peeking_false_positive_rate"] == pytest.approx(peeking, rel=1e-12)
    assert a["peeking_false_positive_rate"] == pytest.approx(0.1417, abs=5e-4)


@pytest.mark.parametrize("effect", [("--target", "0.1"), ("--relative-mde", "0.1"), ("--mde", "0.1")])
def test_a_baseline_of_zero_is_refused_as_the_baseline(effect: tuple[str, str]) -> None:
    """--baseline 0 --target 0.1 said "--target: a relative effect or a target value needs a non-zero baseline":
    a target needs no baseline other than 0; the baseline is what is wrong."""
    out = run_error("proportion", "--baseline", "0", *effect)
    assert " ".join(out.split()) == "error: --baseline: must be a proportion in (0, 1), got 0.0"


# ----------------------------------------------------------------------------- ratio metric


def _users_csv(tmp_path: Path, n: int = 4000) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9)
    q = rng.poisson(rng.gamma(2.0, 2.0, n)) + 1
    c = rng.binomial(q, rng.beta(2.0, 6.0, n))
    path = tmp_path / "users.csv"
    path.write_text("user,clicks,queries\n" + "".join(f"u{i},{c[i]},{q[i]}\n" for i in range(n)), encoding="utf-8")
    return path, c.astype(float), q.astype(float)


def test_ratio_from_csv_uses_the_delta_method_variance_of_the_data(tmp_path: Path) -> None:
    path, c, q = _users_csv(tmp_path)
    doc = run_json("ratio", "--csv", str(path), "--num-col", "clicks", "--den-col", "queries", "--relative-mde", "0.03",
                   "--users", "50000")  # fmt: skip
    est = ratio_mean(c, q)
    sigma_e = est.se * math.sqrt(c.size)  # per-user sd of the linearised ratio, independently from stats.online
    assert doc["sd_linearized"] == pytest.approx(sigma_e, rel=1e-9)
    assert doc["ratio"] == pytest.approx(c.sum() / q.sum(), rel=1e-12)
    effect = 0.03 * doc["ratio"]
    n_total = required_n_two_sample(effect, sigma_e, 0.05, 0.8)
    assert doc["required"]["unrounded_total"] == pytest.approx(float(n_total), rel=1e-8)
    ref = smp.NormalIndPower().solve_power(effect_size=effect / sigma_e, alpha=0.05, power=0.8)
    assert doc["required"]["users_per_arm"]["A"] == math.ceil(ref)
    assert doc["required"]["impressions_per_arm"]["A"] == pytest.approx(math.ceil(ref) * q.mean())
    pw = smp.NormalIndPower().power(doc["at_size"]["mde_absolute"] / sigma_e, 25000, 0.05)
    assert pw == pytest.approx(0.8, abs=1e-9)
    # the same answer from the five moments
    cov = np.cov(c, q, ddof=1)
    mx, my, vx, vy, cxy = (repr(float(v)) for v in (c.mean(), q.mean(), cov[0, 0], cov[1, 1], cov[0, 1]))
    mom = run_json("ratio", "--num-mean", mx, "--num-var", vx, "--den-mean", my, "--den-var", vy, "--cov", cxy,
                   "--relative-mde", "0.03")  # fmt: skip
    assert mom["required"]["users_per_arm"] == doc["required"]["users_per_arm"]


MOMENTS = ("--num-mean", "2.5", "--num-var", "9", "--den-mean", "10", "--den-var", "40", "--cov", "12")


def test_ratio_prints_its_treatment_variance_assumption() -> None:
    """Review 2, D.1: the equal-variance assumption was only in the README's formula line."""
    res = runner.invoke(app, ["power", "ratio", *MOMENTS, "--relative-mde", "0.03"])
    assert res.exit_code == 0, res.output
    assert "assumes: B's per-user sd of the linearised ratio is A's (" in res.stdout
    doc = run_json("ratio", *MOMENTS, "--relative-mde", "0.03")
    assert doc["treatment_variance"] == "same" and doc["assumption"].startswith("B's per-user sd of the")
    scaled = runner.invoke(app, ["power", "ratio", *MOMENTS, "--relative-mde", "0.03", "--treatment-variance",
                                 "scaled"])
    assert "assumes: B's per-user sd of the linearised ratio is A's x R_B/R_A" in scaled.stdout
    assert "must be one of same, scaled" in run_error("ratio", *MOMENTS, "--mde", "0.01", "--treatment-variance", "x")


@pytest.mark.parametrize(("alternative", "share_b", "rel"), [("larger", 0.2, 0.03), ("two-sided", 0.5, -0.05),
                                                             ("smaller", 0.3, -0.04)])
def test_ratio_scaled_treatment_variance_is_the_unequal_variance_z_test(alternative: str, share_b: float,
                                                                        rel: float) -> None:
    """``--treatment-variance scaled``: B's sd = A's x R_B/R_A. References: statsmodels' normal_power_het with the
    unequal-variance standard error written out, and scipy's root of power = 0.8 for the MDE."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    args = ("ratio", *MOMENTS, "--relative-mde", str(rel), "--share-b", str(share_b), "--alternative", alternative,
            "--users", "60000", "--treatment-variance", "scaled")
    doc = run_json(*args)
    r = 0.25
    sigma = math.sqrt(9 - 2 * r * 12 + r * r * 40) / 10  # delta method by hand: 0.2345
    assert doc["sd_linearized"] == pytest.approx(sigma, rel=1e-12)

    def s1(e: float) -> float:  # per unit of N total users: A's variance in A, (R_B/R_A)^2 of it in B
        return math.sqrt(sigma**2 / (1 - share_b) + (sigma * (r + e) / r) ** 2 / share_b)

    def power(e: float, n: float) -> float:
        return float(smp.normal_power_het(e, n, 0.05, std_null=s1(e), std_alternative=s1(e),
                                          alternative=alternative))

    w = rel * r
    n = doc["required"]["unrounded_total"]
    assert power(w, n) == pytest.approx(0.8, abs=1e-9)
    if alternative != "two-sided":  # one tail: the closed form
        z = norm.ppf(0.95) + norm.ppf(0.8)
        assert n == pytest.approx((z * s1(w) / w) ** 2, rel=1e-9)
    same = run_json(*args[:-2])["required"]["unrounded_total"]
    assert n / same == pytest.approx(s1(w) ** 2 / s1(0.0) ** 2, rel=1e-9)  # the size grows with B's variance
    assert doc["at_size"]["power"] == pytest.approx(power(w, 60000), abs=1e-9)
    sign = -1.0 if alternative == "smaller" else 1.0  # a two-sided MDE is reported in the positive direction
    mde = brentq(lambda e: power(sign * e, 60000) - 0.8, 1e-9, r, xtol=1e-14)
    assert doc["at_size"]["mde_absolute"] == pytest.approx(sign * mde, rel=1e-7)


def test_ratio_scaled_is_the_variance_of_a_multiplied_numerator(tmp_path: Path) -> None:
    """The scaled B sd is what the delta method gives on the same users with every numerator multiplied by
    (1 + rho) (CV kept): A's moments and B's (x 1.08) computed from one CSV, by the command itself."""
    path, c, q = _users_csv(tmp_path)
    treated = tmp_path / "treated.csv"
    treated.write_text("clicks,queries\n" + "".join(f"{float(1.08 * a)!r},{b}\n" for a, b in zip(c, q)),
                       encoding="utf-8")
    cols = ("--num-col", "clicks", "--den-col", "queries", "--relative-mde", "0.08")
    a = run_json("ratio", "--csv", str(path), *cols)
    b = run_json("ratio", "--csv", str(treated), *cols)
    assert b["ratio"] == pytest.approx(1.08 * a["ratio"], rel=1e-12)
    assert b["sd_linearized"] == pytest.approx(1.08 * a["sd_linearized"], rel=1e-9)
    scaled = run_json("ratio", "--csv", str(path), *cols, "--treatment-variance", "scaled")
    z = 1.959963984540054 + 0.8416212335729143  # two-sided 0.05 without its far tail (P = 1e-6 here), power 0.8
    hand = (z / (0.08 * a["ratio"])) ** 2 * 2 * (a["sd_linearized"] ** 2 + b["sd_linearized"] ** 2)
    assert scaled["required"]["unrounded_total"] == pytest.approx(hand, rel=2e-5)


def test_csv_errors_name_file_and_line(tmp_path: Path) -> None:
    path, _, _ = _users_csv(tmp_path, 5)
    out = run_error("ratio", "--csv", str(path), "--num-col", "click", "--den-col", "queries", "--mde", "0.01")
    assert "no column 'click'" in out and f"{path}:1" in out
    bad = tmp_path / "bad.csv"
    bad.write_text("clicks,queries\n1,3\n2,x\n", encoding="utf-8")
    out = run_error("ratio", "--csv", str(bad), "--num-col", "clicks", "--den-col", "queries", "--mde", "0.01")
    assert f"{bad}:3" in out and "expected numbers" in out
    assert "Traceback" not in out


@pytest.mark.parametrize("text, message", [
    # csv.DictReader kept the last 'clicks' column's values without a word
    ("clicks,queries,clicks\n1,2,3\n2,3,4\n5,5,5\n",
     ":1: the header names column 'clicks' (from --num-col) 2 times (clicks, queries, clicks): which one is meant?"),
    # the mean overflowed, and the error blamed --den-mean, an option not given
    ("clicks,queries\n1e308,1\n1e308,2\n1,3\n",
     ": the values of column 'clicks' (from --num-col) are too large for float64: their mean or variance overflows "
     "(largest 1e+308); give them in other units"),
    ("clicks,queries\n1,1e308\n1,1e308\n1,3\n",
     ": the values of column 'queries' (from --den-col) are too large for float64: their mean or variance overflows "
     "(largest 1e+308); give them in other units"),
    # every user with the same ratio: the error blamed --cov, an option not given
    ("clicks,queries\n1,2\n2,4\n0.5,1\n0,0\n",
     ": every user's clicks is 0.5 x their queries (the same ratio for all 4 users): the delta-method variance is 0, "
     "so there is no spread to size an experiment by"),
    ("clicks,queries\n1,3\n2,6\n0.1,0.3\n",
     ": every user's clicks is 0.333333 x their queries (the same ratio for all 3 users): the delta-method variance "
     "is 0, so there is no spread to size an experiment by"),
])
def test_csv_duplicate_columns_and_overflowing_values(tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "u.csv"
    bad.write_text(text, encoding="utf-8")
    out = run_error("ratio", "--csv", str(bad), "--num-col", "clicks", "--den-col", "queries", "--relative-mde", "0.02")
    assert " ".join(out.split()) == f"error: {bad}{message}"


# ----------------------------------------------------------------------------- interleaving


@pytest.mark.parametrize("alternative", ["two-sided", "larger"])
def test_interleaving_is_statsmodels_one_sample(alternative: str) -> None:
    doc = run_json("interleaving", "--delta", "0.02", "--sd", "0.8", "--alternative", alternative, "--users", "5000",
                   "--impressions-per-user", "3")  # fmt: skip
    ref = smp.NormalIndPower().solve_power(effect_size=0.02 / 0.8, alpha=0.05, power=0.8, ratio=0,
                                           alternative=alternative)
    assert doc["required"]["users_total"] == math.ceil(ref)
    assert doc["required"]["impressions_total"] == 3 * math.ceil(ref)
    pw = smp.NormalIndPower().power(0.02 / 0.8, 5000, 0.05, ratio=0, alternative=alternative)
    assert doc["at_size"]["power"] == pytest.approx(pw, rel=1e-9)
    by_variance = run_json("interleaving", "--delta", "0.02", "--variance", "0.64")
    assert by_variance["required"] == run_json("interleaving", "--delta", "0.02", "--sd", "0.8")["required"]


# ----------------------------------------------------------------------------- sequential designs


@pytest.mark.parametrize("design", ["obrien_fleming", "pocock", "msprt"])
def test_sequential_size_is_inflated_and_reaches_the_power_by_monte_carlo(design: str) -> None:
    looks = 5
    fixed = run_json("interleaving", "--delta", "0.03", "--sd", "1.0")
    doc = run_json("interleaving", "--delta", "0.03", "--sd", "1.0", "--sequential", design, "--looks", str(looks))
    infl = doc["design"]["inflation_factor"]
    n_fixed = fixed["required"]["users_total"]
    assert doc["required"]["users_total"] >= n_fixed
    assert doc["required"]["users_total"] == pytest.approx(infl * n_fixed, rel=2e-4)
    b = {"obrien_fleming": lambda: sq.spending_boundaries(sq.equal_fractions(looks), 0.05, "obrien_fleming"),
         "pocock": lambda: sq.spending_boundaries(sq.equal_fractions(looks), 0.05, "pocock"),
         "msprt": lambda: sq.mixture_boundaries(sq.equal_fractions(looks), 0.05)}[design]()  # fmt: skip
    np.testing.assert_allclose(doc["design"]["upper"], b.upper, rtol=1e-12)
    # Monte Carlo: per-user preferences N(0.03, 1), users arriving evenly over the looks, at the required size
    rng = np.random.default_rng(17)
    n = doc["required"]["users_total"]
    reps = 4000
    per_look = np.diff(np.round(np.linspace(0, n, looks + 1)).astype(int))
    sums = np.zeros(reps)
    z = np.empty((reps, looks))
    seen = 0
    for k, m in enumerate(per_look):
        sums += rng.normal(0.03 * m, math.sqrt(m), size=reps)  # the sum of m users' preferences (sd 1)
        seen += m
        z[:, k] = sums / math.sqrt(seen)
    res = sq.group_sequential_test(z, b)
    rate = res.reject.mean()
    assert abs(rate - 0.8) <= 4 * math.sqrt(0.8 * 0.2 / reps)
    # expected users under the effect
    stop = np.where(res.reject, res.stop_look, looks - 1)
    mean_users = np.cumsum(per_look)[stop].mean()
    sd_users = np.cumsum(per_look)[stop].std(ddof=1)
    assert abs(mean_users - doc["required"]["expected_users_alternative"]) <= 4 * sd_users / math.sqrt(reps) + n / 1000


# ----------------------------------------------------------------------------- errors and speed


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["proportion", "--baseline", "0.1", "--target", "0.105", "--alpha", "1.5"], "--alpha: must be in [1e-12, 1)"),
        (["proportion", "--baseline", "0.1", "--target", "0.105", "--sequential", "pocock"], "--looks"),
        (["proportion", "--baseline", "0.1", "--target", "0.105", "--sequential", "msprt", "--looks", "3",
          "--alternative", "larger"], "two-sided"),
        (["proportion", "--baseline", "0.1", "--target", "0.105", "--mde", "0.01"], "give one of"),
        (["proportion", "--baseline", "1.1", "--mde", "0.01"], "--baseline"),
        (["proportion", "--baseline", "0.1"], "give the effect"),
        (["proportion", "--baseline", "0.1", "--mde", "0.01", "--method", "exact"], "--method"),
        (["ratio", "--num-mean", "1", "--mde", "0.01"], "missing"),
        (["interleaving", "--delta", "0.1"], "exactly one of --sd and --variance"),
        (["proportion", "--baseline", "0.1", "--mde", "0.01", "--format", "yaml"], "--format"),
    ],
)
def test_bad_options_give_one_line(args: list[str], needle: str) -> None:
    out = run_error(*args)
    assert needle in out and out.startswith("error: ") and out.count("\n") == 1


def test_effect_in_the_untested_direction_needs_no_users() -> None:
    doc = run_json("proportion", "--baseline", "0.1", "--mde", "-0.01", "--alternative", "larger")
    assert doc["required"]["users_total"] is None


def test_answers_without_importing_scipy_or_pandas() -> None:
    """What keeps `onlineeval power` well under a second: no scipy or pandas import (the time
    itself is measured in benchmarks/bench_import.py, not asserted in a unit test)."""
    code = (
        "import sys; from onlineeval.cli import app; "
        "from typer.testing import CliRunner; r = CliRunner().invoke(app, ['power', 'proportion', '--baseline', '0.1', "
        "'--target', '0.105', '--sequential', 'obrien_fleming', '--looks', '14', '--users', '100000']); "
        "assert r.exit_code == 0, r.output; "
        "print('scipy' in sys.modules, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_confidence_sequence_is_the_msprt_design() -> None:
    a = run_json("interleaving", "--delta", "0.03", "--sd", "1.0", "--sequential", "msprt", "--looks", "7")
    b = run_json("interleaving", "--delta", "0.03", "--sd", "1.0", "--sequential", "confidence_sequence",
                 "--looks", "7")
    assert a["required"] == b["required"] and a["design"] == b["design"]


@pytest.mark.parametrize("method", ["arcsine", "pooled", "unpooled"])
@pytest.mark.parametrize("sequential", ["none", "obrien_fleming", "msprt"])
def test_mde_reaches_the_target_power_for_every_method_and_design(method: str, sequential: str) -> None:
    # the MDE solves |drift(e)| = drift* where s0/s1 is constant and power(e) = target for the
    # pooled test: either way the power at the MDE is the target (the design's own crossing
    # probability, independent of how the MDE was found), and the pooled fixed-horizon MDE is
    # statsmodels' power_proportions_2indep = 0.8
    args = ["proportion", "--baseline", "0.10", "--method", method, "--users", "60000", "--share-b", "0.4"]
    if sequential != "none":
        args += ["--sequential", sequential, "--looks", "7"]
    doc = run_json(*args)
    mde = doc["at_size"]["mde_absolute"]
    assert mde > 0
    again = run_json(*args, "--mde", repr(mde))
    assert again["at_size"]["power"] == pytest.approx(0.8, abs=1e-8)
    if method == "pooled" and sequential == "none":
        pw = spr.power_proportions_2indep(mde, 0.10, 24000, ratio=1.5, alpha=0.05, return_results=False)
        assert pw == pytest.approx(0.8, abs=1e-8)


def test_mde_outside_the_metric_range_is_reported_as_none() -> None:
    doc = run_json("proportion", "--baseline", "0.999", "--users", "10", "--method", "unpooled")
    assert doc["at_size"]["mde_absolute"] is None
    doc = run_json("proportion", "--baseline", "0.999", "--users", "10", "--method", "pooled")
    assert doc["at_size"]["mde_absolute"] is None


@pytest.mark.parametrize(("args", "message"), [
    (("proportion", "--baseline", "0.1", "--mde", "nan"), "--mde: must be a finite number, got nan"),
    (("proportion", "--baseline", "0.1", "--relative-mde", "inf"), "--relative-mde: must be a finite number, got inf"),
    (("ratio", "--num-mean", "1", "--num-var", "1", "--den-mean", "1", "--den-var", "1", "--cov", "0", "--mde", "nan"),
     "--mde: must be a finite number, got nan"),
    (("interleaving", "--delta", "nan", "--sd", "1"), "--delta: must be a finite number, got nan"),
    (("interleaving", "--delta", "inf", "--sd", "1", "--users", "100"), "--delta: must be a finite number, got inf"),
    (("proportion", "--baseline", "0.1", "--target", "0.2", "--looks", "1001"), "--looks: at most 1000 looks"),
])
def test_effects_that_are_not_finite_and_too_many_looks_are_refused(args, message):
    """(A non-finite effect printed 'effect: nan / required: -' or 'required users: 0'; 10,000 looks ran for hours
    and 20,000 named an internal 'fractions' argument.)"""
    assert message in " ".join(run_error(*args).split())


def test_close_information_fractions_are_named_as_plain_numbers():
    with pytest.raises(Exception) as exc:
        sq.spending_boundaries([0.5, 0.50001], 0.05, "obrien_fleming", "two-sided")
    assert "information fractions 0.5 and 0.50001," in str(exc.value) and "np.float64" not in str(exc.value)


def test_sequential_designs_name_their_boundary_rule() -> None:
    """The report says which family the boundaries belong to: the spending designs are Lan-DeMets alpha spending
    (gsDesign's sfLDOF values for five looks, not the classical O'Brien-Fleming constants of Jennison & Turnbull
    Table 2.3: 4.562, 3.226, ...), the mSPRT's mixture variance is tau^2 = x se^2 with mixture_tau's x."""
    doc = run_json("proportion", "--baseline", "0.10", "--target", "0.105", "--sequential", "obrien_fleming",
                "--looks", "5")
    np.testing.assert_allclose(doc["design"]["upper"], [4.877, 3.357, 2.680, 2.290, 2.031], atol=1e-3)
    assert doc["design"]["description"].startswith("Lan-DeMets alpha spending of O'Brien-Fleming type (alpha/2 "
                                                   "spent on each side), 5 equally spaced looks")
    one = run_json("interleaving", "--delta", "0.02", "--sd", "0.9", "--sequential", "pocock", "--looks", "1",
                "--alternative", "larger")
    assert "Pocock type (one-sided), 1 equally spaced look (" in one["design"]["description"]
    text = runner.invoke(app, ["power", "interleaving", "--delta", "0.02", "--sd", "0.9", "--sequential", "pocock",
                               "--looks", "1", "--alternative", "larger"]).output
    assert "design pocock with 1 look\n" in text
    ms = run_json("interleaving", "--delta", "0.02", "--sd", "0.9", "--sequential", "msprt", "--looks", "14")
    x = float(sq.mixture_tau(1.0, 0.05)) ** 2
    assert f"tau^2 = {x:.4g} x the last look's se^2" in ms["design"]["description"]
    text = runner.invoke(app, ["power", "interleaving", "--delta", "0.02", "--sd", "0.9", "--sequential", "msprt",
                               "--looks", "14"]).output
    assert "design: " + ms["design"]["description"] + "\n" in text


def test_whole_impression_counts_and_tiny_relative_effects_are_written_out() -> None:
    """Impressions equal to users (one per user) are written as the users are (22,873,223, not 2.287e+07), and a
    relative effect too small for two decimals of a percent is not printed as +0.00%."""
    text = runner.invoke(app, ["power", "proportion", "--baseline", "1e-6", "--target", "2e-6"]).output
    assert "required users per arm: A 22,873,223, B 22,873,223" in text
    assert "impressions per arm:    A 22,873,223, B 22,873,223" in text
    tiny = runner.invoke(app, ["power", "proportion", "--baseline", "0.1", "--mde", "1e-9"]).output
    assert "effect: +1.00e-09 (+1e-06%) -> 0.1" in tiny and "+0.00%" not in tiny


def test_small_expected_users_print_one_decimal() -> None:
    """A small sequential design's expected users printed six significant digits (25.7241): one decimal below
    1,000, the JSON's value rounded."""
    import json

    from typer.testing import CliRunner

    from onlineeval.cli import app

    args = ["power", "interleaving", "--delta", "0.2", "--sd", "0.5", "--sequential", "msprt", "--looks", "5"]
    text = CliRunner().invoke(app, args).stdout
    doc = json.loads(CliRunner().invoke(app, [*args, "--format", "json"]).stdout)["required"]
    alt, null = doc["expected_users_alternative"], doc["expected_users_null"]
    assert alt < 1000 and null < 1000 and alt != round(alt, 1)
    assert f"expected users: {alt:.1f} under the effect, {null:.1f} under H0" in text
