"""The counterfactual design's last-day bootstrap (CounterfactualDesign._bootstrap, _resamples, _reselect) against
references computed from the design's own log and the resamples' counts it drew:

- adaptive IPS's interval: per resample the log written out row by row (each active user's rows repeated as often
  as the user is drawn), :meth:`AdaptiveIPS.choose` run on it per target, the chosen behaviours' terms averaged,
  B - A, and the percentile interval of those differences;
- IPS's interval: the per-user sums of its terms resampled by the same counts (the estimators' intervals are paired:
  every estimator of the checkpoint reads the same resamples);
- the direct method's interval: its click model fitted again on every resampled log written out (a fresh estimator
  per resample).
"""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.estimators import LoggedData, get_estimator
from onlineeval.estimators.adaptive_ips import BEHAVIOURS
from simulations.designs.counterfactual.design import CounterfactualDesign
from tests.test_counterfactual_checkpoint_kernels import _config, _replicate


def _expanded(inv: np.ndarray, g: int, counts: np.ndarray) -> np.ndarray:
    order = np.argsort(inv, kind="stable")
    starts = np.searchsorted(inv[order], np.arange(g + 1))
    return np.concatenate([np.tile(order[starts[c]:starts[c + 1]], int(k)) for c, k in enumerate(counts) if k])


@pytest.mark.parametrize(("compiled", "kept"), [(False, True), (True, True), (False, False)])
def test_the_last_days_intervals_against_the_log_resampled_by_hand(compiled, kept, monkeypatch):
    """``kept=False``: more counts than ``max_kept_counts``, each estimator draws them again from the seed."""
    drawn: list[tuple[int, np.ndarray]] = []
    original = CounterfactualDesign._resamples

    def recording(self, n):
        blocks = list(original(self, n))
        drawn.append((self._day, np.concatenate([c for _, _, c in blocks])))
        return blocks

    monkeypatch.setattr(CounterfactualDesign, "_resamples", recording)
    if not kept:
        monkeypatch.setattr(CounterfactualDesign, "max_kept_counts", 0)
    cfg = _config(estimators=["ips", "adaptive_ips", "dm"], bootstrap=200, days=2)
    keep: list = []
    rows = _replicate(cfg, 0, compiled, monkeypatch, keep)
    design = keep[0]
    last = {r.metric: r for r in rows if r.day == cfg.traffic.days}
    days = {d for d, _ in drawn}
    assert days == {cfg.traffic.days} and len(drawn) == 3  # the last day only, one call per estimator
    counts = drawn[0][1]
    assert all(np.array_equal(c, counts) for _, c in drawn)  # the same resamples for every estimator
    log = design.log()
    users, inv = np.unique(log.user, return_inverse=True)
    g = users.size
    assert counts.shape == (200, g)
    alpha = design.alpha
    # IPS: per-user sums of its terms, resampled
    ips = dict(design.estimators)["ips"]
    x = [np.bincount(inv, ips.terms(log, t.target, design.reward).num, g) for t in design.targets]
    den = np.bincount(inv, minlength=g).astype(np.float64)
    diffs = counts @ x[1] / (counts @ den) - counts @ x[0] / (counts @ den)
    np.testing.assert_allclose((last["ips"].ci_low, last["ips"].ci_high),
                               np.quantile(diffs, [alpha / 2, 1 - alpha / 2]), rtol=1e-10, atol=1e-13)
    # adaptive IPS: the choice run again on every resampled log written out
    ada = dict(design.estimators)["adaptive_ips"]
    terms = [{b: np.asarray(v) for b, v in ada.behaviour_terms(log, t.target, design.reward).items()}
             for t in design.targets]
    ref = np.empty(counts.shape[0])
    chosen = set()
    for i, c in enumerate(counts):
        rows_i = _expanded(inv, g, c)
        types = log.user_type[rows_i]
        values = []
        for tt in terms:
            sub = {b: v[rows_i] for b, v in tt.items()}
            mapping, _ = ada.choose(types, sub)
            chosen.add(tuple(sorted(mapping.items())))
            values.append(ada.pick(np.array([BEHAVIOURS.index(mapping[int(t)]) for t in types]), sub).sum()
                          / rows_i.size)
        ref[i] = values[1] - values[0]
    assert len(chosen) >= 2
    np.testing.assert_allclose((last["adaptive_ips"].ci_low, last["adaptive_ips"].ci_high),
                               np.quantile(ref, [alpha / 2, 1 - alpha / 2]), rtol=1e-10, atol=1e-13)
    # the direct method: its click model fitted again on every resampled log written out, by a fresh estimator
    dm_ref = np.empty(counts.shape[0])
    for i, c in enumerate(counts):
        rows_i = _expanded(inv, g, c)
        sub = LoggedData(log.query[rows_i], log.shown[rows_i], log.clicks[rows_i], user=log.user[rows_i])
        a, b = (get_estimator("dm").estimate(sub, t.target, design.reward).value for t in design.targets)
        dm_ref[i] = b - a
    dm_lo, dm_hi = np.quantile(dm_ref, [alpha / 2, 1 - alpha / 2])
    np.testing.assert_allclose((last["dm"].ci_low, last["dm"].ci_high), (dm_lo, dm_hi), rtol=1e-9, atol=1e-12)
