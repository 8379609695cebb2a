"""A doubly robust estimator fitted on the log it corrects (``folds: 1``) checks itself against its cross-fitted value
(:meth:`onlineeval.estimators.model_based.ClickModelEstimator.value_checks`).

Fitted and evaluated on the same log, ``dr``, ``dr_list`` and ``cascade_dr`` are biased by about (pairs with data) /
n, which their intervals leave out; cross-fitted (the default, 2 folds of the users) they are not. Before the check,
``estimate --option dr.folds=1`` printed such a value without a word. Now the estimate records the cross-fitted value
and the shift (folds-1 value - cross-fitted value) / se, and warns from 0.5 SE either way. The world: 200
Zipf-distributed queries of 6 candidates, 3 slots, PBM users, 80% uniform logging (``test_dm_bootstrap``'s, where
``cascade_dr`` with a cascade model fitted on the log is -1.16 +- 0.13 SE off the exact value at 4,000 impressions,
cross-fitted -0.00 +- 0.12). Measured shifts (mean, SD per log, 40 logs): 4,000 impressions, ``cascade_dr`` -1.19
(0.35), ``dr`` -0.65 (0.34), ``dr_list`` -0.61 (0.57); 40,000: -0.32 (0.10), +0.03 (0.09), +0.01 (0.11).
A difference against a baseline is checked against the cross-fitted difference the same way.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.estimators import LoggedData, get_estimator
from onlineeval.estimators.checks import sample_log
from onlineeval.estimators.model_based import CROSS_FIT_SHIFT

from test_dm_bootstrap import _zipf_pbm_world

WARNED = "fitted on the log it corrects, folds 1"


def _logs(n: int, logs: int, seed: int) -> tuple[list[LoggedData], object]:
    world, logger = _zipf_pbm_world()
    big = sample_log(world, logs * n, np.random.default_rng(seed), logger=logger)
    return [big.take(np.arange(r * n, (r + 1) * n)) for r in range(logs)], world


def _check(log: LoggedData, world, name: str, model: str, reward: str) -> tuple[float, bool]:
    """The folds-1 estimate's shift and whether it warned, after checking the recorded cross-fitted value against the
    cross-fitted estimator's own and the shift against its definition."""
    target = world.targets[0]
    one = get_estimator(name, model=model, folds=1).estimate(log, target, reward)
    cross = get_estimator(name, model=model).estimate(log, target, reward)
    notes = one.diagnostics.notes
    assert notes["cross_fitted_value"] == pytest.approx(cross.value, rel=1e-12, abs=1e-15)
    shift = notes["cross_fit_shift_se"]
    assert shift == pytest.approx((one.value - cross.value) / one.se, rel=1e-9, abs=1e-12)
    warned = [w for w in one.warnings() if WARNED in w]
    assert len(warned) == (abs(shift) >= CROSS_FIT_SHIFT)
    if warned:
        side = "below" if shift < 0 else "above"
        assert f"the value is {abs(shift):.2f} standard errors {side} its cross-fitted value" in warned[0]
        assert f"{cross.value:.6g}" in warned[0] and "leave folds at 2" in warned[0]
    assert not any(WARNED in w for w in cross.warnings()) and "cross_fit_shift_se" not in cross.diagnostics.notes
    return shift, bool(warned)


def test_the_check_warns_where_fitting_on_the_log_biases_the_value():
    # 4,000 impressions, cascade_dr with a cascade model: shifts measured -1.19, SD 0.35 per log; here their mean is
    # below the warning's -0.5 by more than 4 of its SEs and the warning fires on most logs (a check left out, or a
    # threshold of 2, fails)
    logs, world = _logs(4000, 12, 41)
    shifts, warned = zip(*(_check(log, world, "cascade_dr", "cm", "reciprocal_rank") for log in logs))
    shifts = np.array(shifts)
    sem = shifts.std(ddof=1) / math.sqrt(shifts.size)
    assert shifts.mean() + CROSS_FIT_SHIFT < -4 * sem, (shifts.mean(), sem)
    assert np.mean(warned) >= 0.75, shifts


def test_the_check_is_silent_where_the_value_is_not_biased():
    # 40,000 impressions, dr with a PBM (folds 1 unbiased there: shift +0.03, SD 0.09 per log): no warning on any log,
    # and the mean shift below the warning's threshold by more than 4 of its SEs (a threshold of 0.05 fails)
    logs, world = _logs(40_000, 4, 42)
    shifts, warned = zip(*(_check(log, world, "dr", "pbm", "clicks_per_query") for log in logs))
    shifts = np.array(shifts)
    assert not any(warned), shifts
    assert abs(shifts.mean()) + 4 * shifts.std(ddof=1) / math.sqrt(shifts.size) < CROSS_FIT_SHIFT, shifts


def test_who_is_checked_and_when_the_check_cannot_be_made():
    logs, world = _logs(2000, 1, 43)
    log, target = logs[0], world.targets[0]
    # dr_list fitted on the log is checked too; the direct method (no correction to bias), a cross-fitted estimator
    # and a model given ready-made (fitted on no fold of this log) are not
    assert "cross_fit_shift_se" in get_estimator("dr_list", folds=1).estimate(
        log, target, "reciprocal_rank").diagnostics.notes
    fitted = get_estimator("dm", model="pbm").fit_model(log)
    for est in (get_estimator("dm"), get_estimator("dr", folds=2), get_estimator("dr", model=fitted)):
        notes = est.estimate(log, target, "clicks_per_query").diagnostics.notes
        assert not any(k.startswith("cross_fit") for k in notes), (est, notes)
    # a log of one user: no standard error, so no shift to measure (nor folds of users to cross-fit over)
    one_user = LoggedData(log.query, log.shown, log.clicks, user=np.zeros(log.n, dtype=np.int64), p_item=log.p_item)
    e = get_estimator("dr", folds=1).estimate(one_user, target, "clicks_per_query")
    assert math.isnan(e.se) and not any(k.startswith("cross_fit") for k in e.diagnostics.notes)


def test_a_cross_fit_the_log_refuses_leaves_the_estimate_with_the_reason(monkeypatch):
    from onlineeval.errors import InputError
    from onlineeval.estimators.dr import DR

    logs, world = _logs(2000, 1, 43)
    plain = DR._terms

    def refuse(self, data, target, reward):
        if self.folds > 1:
            raise InputError("dr: a fold's log cannot be fitted (planted)", "log.jsonl", 7)
        return plain(self, data, target, reward)

    monkeypatch.setattr(DR, "_terms", refuse)
    e = get_estimator("dr", folds=1).estimate(logs[0], world.targets[0], "clicks_per_query")
    assert e.diagnostics.notes["cross_fit_check"] == "not made: dr: a fold's log cannot be fitted (planted)"
    assert math.isfinite(e.value) and not any(WARNED in w for w in e.warnings())


def _write(log: LoggedData, target, path: Path) -> tuple[Path, Path]:
    """The log as `onlineeval estimate` reads it (zero-padded user ids, so the reader's sorted users, and with them
    the folds, are the library's) and the target as a TREC run."""
    lines = []
    for i in range(log.n):
        q = int(log.query[i])
        shown = [f"q{q}d{int(d)}" for d in log.shown[i]]
        lines.append(json.dumps({"query": f"q{q:03d}", "user": f"u{int(log.user[i]):06d}", "shown": shown,
                                 "clicks": log.clicks[i].astype(int).tolist(),
                                 "propensities": {"prefix": log.p_prefix[i].tolist()}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = path.with_suffix(".run")
    run.write_text("".join(f"q{q:03d} Q0 q{q}d{int(d)} {r + 1} {10 - r} B\n" for q in np.unique(log.query)
                           for r, d in enumerate(target.lists[q])), encoding="utf-8")
    return path, run


def test_the_command_prints_the_warning_and_the_json_keeps_the_cross_fitted_value(tmp_path: Path):
    logs, world = _logs(4000, 1, 41)
    log_path, run = _write(logs[0], world.targets[0], tmp_path / "log.jsonl")
    args = ["estimate", "--log", str(log_path), "--target", str(run), "--estimator", "cascade_dr",
            "--option", "cascade_dr.model=cm", "--metric", "reciprocal_rank"]
    runner = CliRunner()
    one = runner.invoke(app, [*args, "--option", "cascade_dr.folds=1", "--format", "json"])
    cross = runner.invoke(app, [*args, "--format", "json"])
    assert one.exit_code == 0 and cross.exit_code == 0, (one.output, cross.output)
    (row,), (row_cross,) = json.loads(one.stdout)["results"], json.loads(cross.stdout)["results"]
    notes = row["diagnostics"]["notes"]
    assert notes["cross_fitted_value"] == pytest.approx(row_cross["estimate"], rel=1e-12)
    assert notes["cross_fit_shift_se"] <= -CROSS_FIT_SHIFT  # this log's shift: -1.24
    assert any(WARNED in w for w in row["warnings"]) and not any(WARNED in w for w in row_cross["warnings"])
    # as people read it: the warning once, under warnings:, and the notes line with the cross-fitted value
    text = runner.invoke(app, [*args, "--option", "cascade_dr.folds=1"])
    assert text.exit_code == 0, text.output
    out = text.stdout
    assert out.count(WARNED) == 1 and out.index("warnings:") < out.index(WARNED), out
    assert f"cross_fitted_value = {notes['cross_fitted_value']:.4g}" in out


def test_the_difference_against_a_baseline_is_checked_too(tmp_path: Path):
    # the decision's number: B - A with folds 1 against B - A cross-fitted (this log: 0.96 SE below; each side's bias
    # need not cancel), in the difference's own warnings and the printed ones, with the cross-fitted difference quoted
    logs, world = _logs(4000, 1, 41)
    log_path, run = _write(logs[0], world.targets[0], tmp_path / "log.jsonl")
    _, base = _write(logs[0], world.targets[1], tmp_path / "base.jsonl")
    args = ["estimate", "--log", str(log_path), "--target", str(run), "--baseline", str(base), "--estimator",
            "cascade_dr,rips", "--option", "cascade_dr.model=cm", "--metric", "reciprocal_rank", "--format", "json"]
    runner = CliRunner()
    one = json.loads(runner.invoke(app, [*args, "--option", "cascade_dr.folds=1"]).stdout)
    cross = json.loads(runner.invoke(app, args).stdout)
    d1, d2 = (next(d for d in doc["differences"] if d["estimator"] == "cascade_dr") for doc in (one, cross))
    shift = (d1["estimate"] - d2["estimate"]) / d1["se"]
    assert shift <= -CROSS_FIT_SHIFT, shift
    pair = f"cascade_dr {Path(run).stem} - {Path(base).stem}: "
    (own,) = [w for w in d1["warnings"] if w.startswith(pair + "cascade_dr (cm fitted on the log it corrects")]
    assert f"the difference is {abs(shift):.2f} standard errors below its cross-fitted difference " \
           f"{d2['estimate']:+.6g}" in own
    assert own in one["warnings"]  # printed once, under warnings:
    assert not any("fitted on the log it corrects" in w for d in cross["differences"] for w in d["warnings"])
    rips = next(d for d in one["differences"] if d["estimator"] == "rips")  # no model: nothing to check
    assert not any("fitted on the log it corrects" in w for w in rips["warnings"])


def test_each_folds_model_is_fitted_once_per_log(monkeypatch):
    # the folds' training logs are kept with the log (with their fits): the cross-fitted dr, dr_list and cascade_dr
    # with the same model (pbm) for two targets, and dr with folds 1 and its check, fit the whole log once and each
    # fold once (they fitted every fold again for every target, difference and estimator before)
    import onlineeval.estimators.model_fit as model_fit
    from onlineeval.estimators.log_estimates import paired_difference
    from onlineeval.estimators.rewards import get_reward

    from onlineeval.estimators.model_based import fold_ids

    calls = []
    plain = model_fit._fit_examination_em  # a PBM's fit (EM on the aggregated counts)

    def counted(data, *args, **kwargs):
        calls.append(data.n)
        return plain(data, *args, **kwargs)

    monkeypatch.setattr(model_fit, "_fit_examination_em", counted)
    logs, world = _logs(2000, 1, 44)
    log, (b, a) = logs[0], world.targets[:2]
    values = {}
    for name in ("dr", "dr_list", "cascade_dr"):
        for t in (b, a):
            values[name, t.name] = get_estimator(name, model="pbm").estimate(log, t, "clicks_per_query").value
        paired_difference(get_estimator(name, model="pbm"), log, b, a, get_reward("clicks_per_query", log.k))
    one = get_estimator("dr", model="pbm", folds=1).estimate(log, b, "clicks_per_query")
    fold = fold_ids(log, 2)
    assert sorted(calls) == sorted([log.n, int(np.sum(fold != 0)), int(np.sum(fold != 1))]), calls
    assert one.diagnostics.notes["cross_fitted_value"] == pytest.approx(values["dr", b.name], rel=1e-12)
    # and the shared fits give the numbers of fits made afresh
    fresh = LoggedData(log.query, log.shown, log.clicks, user=log.user, p_list=log.p_list, p_prefix=log.p_prefix,
                       p_item=log.p_item)
    assert get_estimator("cascade_dr", model="pbm").estimate(fresh, a, "clicks_per_query").value == \
        values["cascade_dr", a.name]
