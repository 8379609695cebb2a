"""The sweep's prediction sentence says which offline gain it is at, and a prediction at a gain of one's own
comes from the stored relation (review 12, finding 7).

"an offline gain of +0.037 nDCG@10 predicts ..." did not say that +0.037 is the median |offline delta| of the
group's systems (rounded to 2 significant digits): the sentence now says so, checked against the median computed
here from the table's deltas. :func:`simulations.shrinkage.prediction_at` predicts from ``through_origin``'s
stored numbers alone; reference: the fitted :class:`~simulations.shrinkage_stats.RelationFit`'s own ``predict``
(and the study's ``predictions``) at the same gains, and statsmodels' OLS prediction through the origin.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_shrinkage import _table

from simulations.shrinkage import CONVENTIONS, fit_relation, format_shrinkage, prediction_at, shrinkage_study

import statsmodels.api as sm


def _study() -> dict:
    obs, est, groups = _table()
    return shrinkage_study(obs, est, groups, ["users.click_model.preset"], "nDCG@10")


def test_sentence_names_the_median_offline_gain() -> None:
    study = _study()
    g1 = study["groups"][0]
    rel = g1["relations"][0]
    gains = np.abs([0.05, -0.01, 0.03])  # group g1's three systems
    median = float(f"{np.median(gains):.2g}")
    assert median == 0.03
    want = f"an offline gain of {median:+.3g} nDCG@10 (the median |offline delta| of the group's 3 systems, rounded)"
    assert rel["sentence"].startswith(want + " predicts an online effect of ")
    assert want in format_shrinkage(study)  # the terminal prints the sentence as stored
    assert "median |offline delta|" in CONVENTIONS["prediction"]


@pytest.mark.parametrize("gain", [0.001, 0.037, -0.02, 0.2])
def test_prediction_at_a_gain_of_ones_own(gain: float) -> None:
    study = _study()
    for group in study["groups"]:
        rel = group["relations"][0]
        fit = rel["through_origin"]
        xs = np.array([s["offline_delta"] for s in rel["systems"]])
        ys = np.array([s["online_effect"] for s in rel["systems"]])
        ref = fit_relation(xs, ys, intercept=False, level=study["level"]).predict(gain)
        got = prediction_at(fit, gain, study["level"])
        assert got["offline_gain"] == gain
        assert got["online_effect"] == pytest.approx(ref["online_effect"], rel=1e-12)
        assert got["ci"] == pytest.approx(ref["ci"], rel=1e-12)
        assert got["prediction_interval"] == pytest.approx(ref["prediction_interval"], rel=1e-12)
        # exact truths: ordinary least squares through the origin (statsmodels' mean CI at x0)
        ols = sm.OLS(ys, xs[:, None]).fit().get_prediction(np.array([[gain]]))
        lo, hi = ols.conf_int(alpha=1 - study["level"])[0]
        assert got["ci"] == pytest.approx([lo, hi], rel=1e-9)
        for p in rel["predictions"]:  # the study's own predictions, from the same numbers
            again = prediction_at(fit, p["offline_gain"], study["level"])
            assert again["ci"] == pytest.approx(p["ci"], rel=1e-12)
            assert again["prediction_interval"] == pytest.approx(p["prediction_interval"], rel=1e-12)


def test_a_counterfactual_estimators_sentence_names_the_metric_it_estimates() -> None:
    """A counterfactual design's rows are estimators (metric 'snips') of an online metric (the sweep's observations'
    ``unit``): the sentence predicts an effect of that metric, named with the estimator, not 'of snips'."""
    obs, est, groups = _table()
    plain = shrinkage_study(obs, est, groups, ["users.click_model.preset"], "nDCG@10")["groups"][0]["relations"][0]
    metric = plain["metric"]
    obs = obs.assign(unit="clicks_per_query")
    rel = shrinkage_study(obs, est, groups, ["users.click_model.preset"], "nDCG@10")["groups"][0]["relations"][0]
    assert f" predicts an online effect of {plain['sentence'].split(' predicts an online effect of ')[1].split()[0]} "\
           f"clicks_per_query (what {metric} estimates) [" in rel["sentence"]
    same = shrinkage_study(obs.assign(unit=obs["metric"]), est, groups, ["users.click_model.preset"], "nDCG@10")
    assert same["groups"][0]["relations"][0]["sentence"] == plain["sentence"]  # a metric's own unit: as before
