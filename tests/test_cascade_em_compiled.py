"""The cascade-family EM's compiled step (clickmodels.estimation._cascade_compiled) against the NumPy step it
replaces on large logs (cascade_posterior and the models' own steps, ``_cascade.COMPILED = False``): DCM, SDBN,
DBN and CCM fitted both ways on the same logs give the same iterations, log-likelihoods and parameters to rounding (the
sums run in another order; the compiled step counts the terms above the last clicks once, the NumPy step per
session), on small and medium logs with empty slots, sessions without clicks and clicks at the last rank."""

from __future__ import annotations

import numpy as np
import pytest

from clickmodels.estimation import _cascade, fit_log
from clickmodels.logs import from_arrays


def _log(seed: int, n: int = 4000, k: int = 6, docs: int = 12, queries: int = 5, empty: bool = True):
    """Randomised lists (many distinct sessions), DBN-like clicks with stops, and (``empty``) some lists cut
    short: their lower slots empty."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, queries, n)
    order = np.argsort(rng.random((n, docs)), axis=1)[:, :k]
    ids = q[:, None] * docs + order
    alpha = rng.uniform(0.05, 0.8, queries * docs)
    sigma = rng.uniform(0.1, 0.8, queries * docs)
    clicks = np.zeros((n, k), dtype=bool)
    going = np.ones(n, dtype=bool)
    for r in range(k):
        clicks[:, r] = going & (rng.random(n) < alpha[ids[:, r]])
        going &= ~(clicks[:, r] & (rng.random(n) < sigma[ids[:, r]])) & (rng.random(n) < 0.95)
    if empty:
        depth = rng.integers(2, k + 1, n)
        cut = np.arange(k)[None, :] >= depth[:, None]
        ids = np.where(cut, -1, ids)
        clicks &= ~cut
    return from_arrays(q, ids, clicks)


def _fit(name: str, log, compiled: bool, monkeypatch, accelerate: bool = False):
    """Plain EM by default: the two E-steps compared iteration by iteration (SQUAREM's extrapolation would carry
    their last-bit differences further; compared at a looser tolerance below)."""
    monkeypatch.setattr(_cascade, "COMPILED", compiled)
    return fit_log(name, log, method="em", accelerate=accelerate)


@pytest.mark.parametrize("name", ["dcm", "sdbn", "dbn", "ccm"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compiled_em_equals_numpy_em(name, seed, monkeypatch):
    """Seed 3: a medium log (40,000 sessions of 10 slots, 50 queries of 20 documents)."""
    log = _log(seed, empty=seed == 2) if seed < 3 else _log(seed, n=40_000, k=10, docs=20, queries=50)
    ref = _fit(name, log, False, monkeypatch)
    fast = _fit(name, log, True, monkeypatch)
    assert fast.trace.iterations == ref.trace.iterations > 2
    np.testing.assert_allclose(fast.trace.log_likelihood, ref.trace.log_likelihood, rtol=1e-12)
    np.testing.assert_allclose(fast.attractiveness.value, ref.attractiveness.value, rtol=1e-9, atol=1e-12)
    if name == "dcm":
        np.testing.assert_allclose(fast.continuation, ref.continuation, rtol=1e-9, atol=1e-12)
    elif name == "ccm":
        for t in ("tau1", "tau2", "tau3"):
            assert getattr(fast, t) == pytest.approx(getattr(ref, t), rel=1e-9)
    else:
        np.testing.assert_allclose(fast.satisfaction.value, ref.satisfaction.value, rtol=1e-9, atol=1e-12)
    if name == "dbn":
        assert fast.gamma == pytest.approx(ref.gamma, rel=1e-9)
    # SQUAREM-accelerated (the default): the same maximum, the E-steps' rounding carried by the extrapolation
    fast, ref = _fit(name, log, True, monkeypatch, True), _fit(name, log, False, monkeypatch, True)
    assert fast.trace.accelerated and abs(fast.trace.iterations - ref.trace.iterations) <= 3
    np.testing.assert_allclose(fast.attractiveness.value, ref.attractiveness.value, rtol=1e-6, atol=1e-9)


def test_default_switches_to_compiled_on_large_logs(monkeypatch):
    """``COMPILED=None``: the compiled step from COMPILE_SLOTS distinct-session slots (or numba loaded), NumPy
    below; either way the same fit."""
    log = _log(3, n=2000)
    d = _cascade.chain_em_data(log)
    monkeypatch.setattr(_cascade, "COMPILED", None)
    monkeypatch.setattr(_cascade, "COMPILE_SLOTS", d.log.docs.size)
    assert _cascade.compiled_em_sums(d)
    monkeypatch.setattr(_cascade, "COMPILE_SLOTS", d.log.docs.size + 1)
    monkeypatch.delitem(__import__("sys").modules, "numba", raising=False)
    assert not _cascade.compiled_em_sums(d)
