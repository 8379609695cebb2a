"""The weight diagnostics' linear-time top-1% sum equals a full partition, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.estimators.base import _top_k_sum


@pytest.mark.parametrize("kind", ["uniform", "few_values", "rare_large", "pareto", "constant"])
@pytest.mark.parametrize("n", [10, 1000, 500_000, 1_200_000])
def test_top_k_sum_equals_partition(kind: str, n: int) -> None:
    rng = np.random.default_rng(n + len(kind))
    v = {
        "uniform": lambda: rng.random(n),
        "few_values": lambda: np.round(rng.random(n) * 5) + 1,
        "rare_large": lambda: np.where(rng.random(n) < 0.005, 100.0, 1.0),
        "pareto": lambda: rng.pareto(1.5, n) + 1e-3,
        "constant": lambda: np.full(n, 2.5),
    }[kind]()
    k = max(1, int(np.ceil(0.01 * n)))
    reference = float(np.partition(v, n - k)[n - k:].sum())
    assert _top_k_sum(v, k) == pytest.approx(reference, rel=1e-12)


# ------------------------------------------------------------------ mean importance weight
def _uniform_log(n: int, m: int, k: int, users: int, seed: int, scale: float = 1.0):
    """A uniformly random ordered k of m candidates (one query), its exact propensities times ``scale`` (1: the
    true ones), and a target showing candidates 0..k-1."""
    from onlineeval.estimators import DeterministicTarget, LoggedData

    rng = np.random.default_rng(seed)
    shown = np.argsort(rng.random((n, m)), axis=1)[:, :k]
    prefix = np.array([1 / np.prod(np.arange(m - j, m + 1)) for j in range(k)])
    data = LoggedData(np.zeros(n, dtype=np.int64), shown, rng.random((n, k)) < 0.3,
                      p_list=np.full(n, prefix[-1] * scale), p_prefix=np.tile(prefix * scale, (n, 1)),
                      p_item=np.full((n, k), scale / m), user=rng.integers(0, users, n))
    return data, DeterministicTarget(np.arange(k)[None, :], "T")


def _cluster_ratio(x: np.ndarray, y: np.ndarray, user: np.ndarray) -> tuple[float, float]:
    """sum x / sum y over clusters with the delta-method SE written from the covariance of the per-user sums."""
    sx, sy = np.bincount(user, x), np.bincount(user, y)
    keep = sy > 0
    sx, sy = sx[keep], sy[keep]
    g = sx.size
    r = sx.sum() / sy.sum()
    grad = np.array([1 / sy.mean(), -r / sy.mean()])
    return float(r), float(np.sqrt(grad @ np.cov(np.vstack([sx, sy]), ddof=1) @ grad / g))


@pytest.mark.parametrize("name", ["ips", "snips", "iips", "rips"])
def test_mean_weight_against_its_definition_and_expectation(name: str) -> None:
    """The mean weight (list: per impression; slot-level: per shown slot) and its clustered SE equal the formula
    written out; under the true propensities its expectation is exactly 1 (sum over lists of the target's
    probability) and it lies within 4 SE of 1 for every estimator (fixed seed); propensities written half their
    true value (scale 0.5) make every weight twice too large: the mean is near 2 and the warning says so."""
    from onlineeval.estimators import get_estimator

    for scale in (1.0, 0.5):
        data, target = _uniform_log(20_000, 5, 3, 2_000, seed=7, scale=scale)
        d = get_estimator(name).estimate(data, target, "clicks_per_query").diagnostics
        user = np.asarray(data.user)
        if name in ("ips", "snips"):  # w = 1{list == target} / p_list
            w = np.all(data.shown == np.arange(3), axis=1) / data.p_list
            mean, se = _cluster_ratio(w, np.ones(data.n), user)
            assert d.weight_level == "list" and d.weights_per_impression == 1.0
        else:  # slot weights of the shown slots: item (iips) or prefix (rips) agreement / its propensity
            same = data.shown == np.arange(3)
            agree = same if name == "iips" else np.logical_and.accumulate(same, axis=1)
            w = agree / (data.p_item if name == "iips" else data.p_prefix)
            mean, se = _cluster_ratio(w.sum(axis=1), np.full(data.n, 3.0), user)
            assert d.weight_level == "slot" and d.weights_per_impression == 3.0
            assert d.ess_impressions == pytest.approx(d.ess / 3, rel=1e-12)
        assert d.mean_weight == pytest.approx(mean, rel=1e-12) and d.mean_weight_se == pytest.approx(se, rel=1e-9)
        assert d.mean_weight_expected == 1.0
        warned = [x for x in d.warnings() if x.startswith("mean importance weight")]
        if scale == 1.0:
            assert abs(d.mean_weight - 1) <= 4 * d.mean_weight_se and not warned and not d.mean_weight_off()
        else:
            assert abs(d.mean_weight - 2) <= 4 * d.mean_weight_se and d.mean_weight_off() and len(warned) == 1


def test_mean_weight_without_a_known_expectation_is_not_checked() -> None:
    """Clipped weights have no expectation of 1 (clipping removes mass): reported, never warned about; the direct
    method has no weights at all."""
    from onlineeval.estimators import get_estimator

    data, target = _uniform_log(5_000, 5, 3, 500, seed=3)
    d = get_estimator("clipped_ips", cap=10).estimate(data, target).diagnostics
    assert d.mean_weight_expected is None and not d.mean_weight_off() and d.mean_weight < 1
    w = np.minimum(np.all(data.shown == np.arange(3), axis=1) * 60.0, 10.0)
    assert d.mean_weight == pytest.approx(w.mean(), rel=1e-12)
    assert np.isnan(get_estimator("dm").estimate(data, target).diagnostics.mean_weight)


def test_ess_warning_reads_impressions_for_slot_weights() -> None:
    """Slot-level ESS counts slots (it can exceed the impressions): the '< 100' rule reads it per impression."""
    from onlineeval.estimators.base import Diagnostics

    slot = Diagnostics(240.0, 5.0, 0.1, 0.0, 0, 100, {}, "slot", 3.0)
    assert slot.ess_impressions == 80.0
    assert [w for w in slot.warnings() if w.startswith("effective sample size 80.0 impressions (< 100; 240.0 slots")]
    listed = Diagnostics(240.0, 5.0, 0.1, 0.0, 0, 100, {}, "list", 1.0)
    assert listed.ess_impressions == 240.0 and not listed.warnings()
    assert Diagnostics(99.0, 5.0, 0.1, 0.0, 0, 100, {}, "list", 1.0).warnings()[0].startswith(
        "effective sample size 99.0 (< 100)")


@pytest.mark.parametrize("users", [True, False])
def test_mean_weight_over_shown_slots_of_short_lists(users: bool) -> None:
    """Lists with an empty last slot: the slot-level mean weight divides by the shown slots only (per cluster, and
    per impression without users), as written out here."""
    from onlineeval.estimators import DeterministicTarget, LoggedData, get_estimator

    rng = np.random.default_rng(5)
    n, m, k = 4_000, 5, 3
    shown = np.argsort(rng.random((n, m)), axis=1)[:, :k]
    short = rng.random(n) < 0.4
    shown[short, 2] = -1
    p_item = np.where(shown >= 0, 1 / m, 1.0)
    user = rng.integers(0, 300, n) if users else None
    data = LoggedData(np.zeros(n, dtype=np.int64), shown, (rng.random((n, k)) < 0.3) & (shown >= 0),
                      p_item=p_item, user=user)
    d = get_estimator("iips").estimate(data, DeterministicTarget(np.arange(k)[None, :], "T")).diagnostics
    w = np.where(shown >= 0, (shown == np.arange(k)) / p_item, 0.0)
    slots = (shown >= 0).sum(axis=1).astype(float)
    mean, se = _cluster_ratio(w.sum(axis=1), slots, user if users else np.arange(n))
    assert d.weights_per_impression == pytest.approx(slots.mean(), rel=1e-12)
    assert d.mean_weight == pytest.approx(mean, rel=1e-12) and d.mean_weight_se == pytest.approx(se, rel=1e-9)


@pytest.mark.parametrize("ess, warned", [(100.0, False), (99.99999999999, False), (99.9999, True), (99.0, True)])
def test_ess_warning_ignores_rounding_at_the_threshold(ess: float, warned: bool) -> None:
    """An ESS of exactly 100 computed as 99.99999999999 (the rounding of (sum w)^2 / sum w^2: 100 of 200
    impressions with equal weights of 1e90) was warned as "effective sample size 100.0 (< 100)"."""
    from onlineeval.estimators.diagnostics import Diagnostics

    d = Diagnostics(ess, 2.0, 0.01, 0.5, 0, 200, weight_level="list", weights_per_impression=1.0)
    assert d.ess_impressions == ess
    assert any(w.startswith("effective sample size") for w in d.warnings()) is warned
