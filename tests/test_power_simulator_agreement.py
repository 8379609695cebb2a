r"""``onlineeval power`` against the simulator's analytic column on configs/ab.yaml.

The simulator plans the A/B design from its daily checkpoints: the mean delta-method SE
``se_d`` over replicates on day ``d``, ``N_d`` impressions from ``U_d`` distinct users, the
analytic power :math:`\Phi(|\delta|/se_d - z_{1-\alpha/2})`, and the required impressions
:math:`N^* = a / (T - b)` from the variance model :math:`se^2(N) = a/N + b` fitted to the days,
:math:`T = (|\delta|/(z_{1-\alpha/2} + z_{power}))^2`.

The power calculator (``power ratio``) takes per-user moments. Given the per-user quantities the
simulator uses - a user of ``m = N_d/U_d`` queries and a per-user linearised variance
:math:`\sigma^2` with :math:`\sigma^2\kappa/U_d = se_d^2` (:math:`\kappa = 4` for an even split),
i.e. ``--den-mean m --den-var 0 --cov 0 --num-var sigma^2 m^2`` - it must return:

* at ``U_d`` users, the simulator's analytic power plus exactly the second tail
  :math:`\Phi(-|\delta|/se_d - z_{1-\alpha/2})` the simulator leaves out (the calculator's power
  is two-sided);
* for the target power, with the per-impression variance ``a`` of the variance model
  (:math:`\sigma^2\kappa m = a`), the impressions :math:`(\delta^*/\delta)^2 a`, where
  :math:`\delta^*` solves the two-sided :math:`\Phi(\delta^* - z) + \Phi(-\delta^* - z) = power`
  (the simulator uses :math:`z_{1-\alpha/2} + z_{power}`, larger by a relative ~1e-6): so
  :math:`N^* = \text{calculator} \times (z_{1-\alpha/2} + z_{power})^2/\delta^{*2} \times T/(T - b)`,
  the last factor being the floor ``b`` of returning users that independent new users (the
  calculator's model) do not have. Users per arm are rounded up, so the calculator's impressions
  exceed the unrounded value by less than ``2m``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import optimize
from scipy import stats as sps
from typer.testing import CliRunner

from onlineeval.cli import app
from simulations.config import config_from_mapping, load_config
from simulations.job import simulate

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "ab.yaml"
KAPPA = 4.0  # 1/(1-s) + 1/s for share_b 0.5


@pytest.fixture(scope="module")
def run():
    eff = load_config(CONFIG).effective()
    eff["designs"] = [d for d in eff["designs"] if d["type"] == "ab"]
    eff["replicates"] = 6  # the relation is an identity of the formulas; a few replicates give its inputs
    eff["analysis"].update(aa=False, null=False)
    cfg = config_from_mapping(eff)
    assert cfg.designs[0].share_b == 0.5 and cfg.designs[0].test == "delta"
    return simulate(cfg, workers=1)


def power_json(*args: str) -> dict:
    res = CliRunner().invoke(app, ["power", "ratio", *[str(a) for a in args], "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def moments(m: float, sigma2: float, baseline: float) -> list[str]:
    return ["--num-mean", repr(float(baseline * m)), "--num-var", repr(float(sigma2 * m * m)),
            "--den-mean", repr(float(m)), "--den-var", "0", "--cov", "0"]


def test_power_at_the_simulated_size_is_the_analytic_column(run) -> None:
    cfg = run.config
    alpha = cfg.analysis.alpha
    metric = cfg.designs[0].metric
    entry = run.summary["designs"]["ab"][metric]
    delta = entry["true_effect"]
    baseline = delta / entry["relative_effect"]
    z = sps.norm.ppf(1 - alpha / 2)
    curve = run.curves[(run.curves["design"] == "ab") & (run.curves["metric"] == metric)].sort_values("day")
    for day in (3, cfg.traffic.days):
        row = curve[curve["day"] == day].iloc[0]
        users = round(row["mean_users"])
        m = row["mean_impressions"] / row["mean_users"]
        sigma2 = row["mean_se"] ** 2 * users / KAPPA
        doc = power_json(*moments(m, sigma2, baseline), "--mde", repr(float(delta)), "--users", users,
                         "--alpha", alpha)
        other_tail = sps.norm.cdf(-abs(delta) / row["mean_se"] - z)
        assert doc["at_size"]["power"] - row["analytic_power"] == pytest.approx(other_tail, abs=1e-9)


def test_required_impressions_are_the_simulators_analytic_column(run) -> None:
    cfg = run.config
    alpha, power = cfg.analysis.alpha, cfg.analysis.power
    metric = cfg.designs[0].metric
    entry = run.summary["designs"]["ab"][metric]
    delta = entry["true_effect"]
    baseline = delta / entry["relative_effect"]
    a, b = entry["variance_model"]["a"], entry["variance_model"]["b"]
    fd = entry["final_day"]
    m = fd["mean_impressions"] / fd["mean_users"]
    sigma2 = a / (KAPPA * m)  # the per-impression variance a, carried by users of m queries
    doc = power_json(*moments(m, sigma2, baseline), "--mde", repr(float(delta)), "--alpha", alpha, "--power", power)
    req = doc["required"]
    z_a, z_p = sps.norm.ppf(1 - alpha / 2), sps.norm.ppf(power)
    d_star = optimize.brentq(lambda d: sps.norm.cdf(d - z_a) + sps.norm.cdf(-d - z_a) - power, 0.1, 20, xtol=1e-14)
    unrounded = req["unrounded_total"] * m
    assert unrounded == pytest.approx((d_star / delta) ** 2 * a, rel=1e-8)
    impressions = req["impressions_per_arm"]["A"] + req["impressions_per_arm"]["B"]
    assert 0 <= impressions - unrounded < 2 * m
    target = (abs(delta) / (z_a + z_p)) ** 2
    simulator = entry["analytic_required_impressions"]
    if math.isfinite(b) and target > b:
        assert simulator == pytest.approx(unrounded * ((z_a + z_p) / d_star) ** 2 * target / (target - b), rel=1e-8)
    else:  # the floor is above the target: the simulator says "not reachable", the calculator gives a size
        assert simulator is None or not math.isfinite(simulator)
