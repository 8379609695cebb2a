"""SQUAREM-accelerated EM (:func:`clickmodels.estimation._em.run_em`, ``EMOptions.accelerate``).

References: plain EM run to a relative log-likelihood change of 1e-13 (the maximum, independent of the
acceleration), EM's own map (a converged fit is its fixed point), and the objective EM's M-step maximises (the
log-likelihood plus the pseudo-counts' Beta log-density), which SQUAREM must never lower from one cycle's start to
the next.
"""

from __future__ import annotations

import numpy as np
import pytest

import clickmodels.estimation.ccm as ccm_mod
import clickmodels.estimation.dbn as dbn_mod
import clickmodels.estimation.dcm as dcm_mod
import clickmodels.estimation.pbm as pbm_mod
import clickmodels.estimation.ubm as ubm_mod
from clickmodels.estimation import EMOptions, fit_log, load_fit
from clickmodels.estimation._em import _objective, run_em
from clickmodels.logs import from_arrays

MODULES = {"pbm": pbm_mod, "ubm": ubm_mod, "dbn": dbn_mod, "sdbn": dbn_mod, "ccm": ccm_mod, "dcm": dcm_mod}


def pbm_log(n: int, seed: int = 5, queries: int = 20, m: int = 8, k: int = 5):
    """Position-based clicks (examination 1 / (j + 1)) on half production, half uniformly random lists: every
    chain model fits it poorly, so plain EM crawls along a flat likelihood (the case the acceleration is for)."""
    rng = np.random.default_rng(seed)
    production = np.argsort(rng.random((queries, m)), axis=1)[:, :k]
    alpha = rng.uniform(0.0, 0.6, size=(queries, m))
    query = rng.integers(0, queries, size=n)
    shown = production[query].copy()
    rand = rng.random(n) < 0.5
    shown[rand] = np.argsort(rng.random((int(rand.sum()), m)), axis=1)[:, :k]
    clicks = rng.random((n, k)) < alpha[query[:, None], shown] / np.arange(1, k + 1)[None, :]
    return from_arrays(query, shown, clicks)


@pytest.fixture(scope="module")
def log():
    return pbm_log(6000)


def fit(name: str, log, **kw):
    return fit_log(name, log, method="em" if name in ("dcm", "sdbn") else None, **kw)


def capture(monkeypatch, name: str) -> list:
    """Record every ``(state, ll)`` the fit's EM map is called with and returns, and the map itself."""
    module = MODULES[name]
    seen: list = []

    def recording(n_sessions, options, state, step):
        def wrapped(s):
            new, ll = step(s)
            seen.append((s, ll, new))
            return new, ll
        seen.append(step)  # first entry: the map
        return run_em(n_sessions, options, state, wrapped)

    monkeypatch.setattr(module, "run_em", recording)
    return seen


@pytest.mark.parametrize("name", list(MODULES))
def test_accelerated_em_reaches_the_maximum(name, log):
    """At the default tolerance SQUAREM's fit gives each session the click probabilities of plain EM run to
    1e-13 (the maximum) within 2e-5, and in fewer E-steps than plain EM at the default tolerance (or the cap)."""
    ref = fit(name, log, tol=1e-13, max_iter=20000, accelerate=False)
    assert ref.trace.converged
    fast = fit(name, log)
    slow = fit(name, log, accelerate=False)
    assert fast.trace.accelerated and fast.trace.converged and not slow.trace.accelerated
    want = ref.click_probs(log)
    err_fast = float(np.abs(fast.click_probs(log) - want).max())
    assert err_fast < 2e-5, err_fast
    assert fast.trace.iterations < slow.trace.iterations, (fast.trace.iterations, slow.trace.iterations)


def test_dcm_continuation_no_longer_stops_far_from_the_maximum(log):
    """The defect the acceleration mends: plain EM at the former default tolerance (1e-7) left DCM's continuation
    1e-3 from the maximum on a log DCM fits poorly (at 1e-9, the default now, 2.5e-5); SQUAREM at either is within
    1e-5 of it, in fewer E-steps than plain EM at the same tolerance."""
    ref = np.asarray(fit("dcm", log, tol=1e-13, max_iter=20000, accelerate=False).continuation)
    for tol, far in ((1e-7, 1e-3), (1e-9, 1e-5)):
        plain = fit("dcm", log, tol=tol, accelerate=False)
        fast = fit("dcm", log, tol=tol)
        off_plain = np.abs(np.asarray(plain.continuation) - ref).max()
        off_fast = np.abs(np.asarray(fast.continuation) - ref).max()
        assert off_plain > far and off_fast < 1e-5, (tol, off_plain, off_fast)
        assert fast.trace.iterations < plain.trace.iterations


@pytest.mark.parametrize("name", ["pbm", "dcm", "dbn", "ccm"])
def test_a_converged_fit_is_a_fixed_point_of_em(name, log, monkeypatch):
    """One more plain EM step from the accelerated fit's last start moves no parameter by more than 1e-6."""
    seen = capture(monkeypatch, name)
    fit(name, log)
    step = seen[0]
    state = seen[-1][0]  # the last E-step's parameters (the converged cycle's start)
    again, _ = step(state)
    moved = max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(again, seen[-1][2], strict=True))
    assert moved == 0.0  # the same map on the same parameters
    for a, b in zip(again, state, strict=True):
        assert float(np.abs(np.asarray(a) - np.asarray(b)).max()) < 1e-6


@pytest.mark.parametrize("pseudo", [0.0, 1.0])
@pytest.mark.parametrize("name", ["pbm", "ubm", "dcm", "sdbn", "ccm"])
def test_objective_never_decreases_between_cycle_starts(name, pseudo, log, monkeypatch):
    """The objective EM's M-step maximises (with the pseudo-counts' Beta term) at each cycle's start (E-steps
    1, 4, 7, ...) never falls, to rounding; the log-likelihoods recorded are those of these starts."""
    seen = capture(monkeypatch, name)
    fitted = fit(name, log, pseudo=pseudo, tol=1e-10, max_iter=300)
    calls = seen[1:]
    starts = calls[::3][: len(fitted.trace.log_likelihood)]
    assert [ll for _, ll, _ in starts] == list(fitted.trace.log_likelihood)
    obj = np.array([_objective(s, ll, pseudo) for s, ll, _ in starts])
    assert len(obj) >= 3
    assert np.all(np.diff(obj) >= -1e-10 * np.abs(obj[:-1])), np.diff(obj).min()


@pytest.mark.parametrize("max_iter", [1, 2, 3, 4, 5, 7])
def test_max_iter_bounds_the_e_steps(max_iter, log):
    """At most max_iter E-steps; the progress callback hears of each cycle's start and, when the budget ends within
    a cycle, of the last E-step too (a progress display then shows the fit's end)."""
    seen: list = []
    f = fit("dcm", log, max_iter=max_iter, tol=0.0, on_iteration=lambda *a: seen.append(a))
    assert f.trace.iterations == max_iter and not f.trace.converged
    assert len(f.trace.log_likelihood) == (max_iter + 2) // 3
    starts = list(range(1, max_iter + 1, 3))
    assert [a[0] for a in seen] == starts + ([max_iter] if starts[-1] != max_iter else [])
    assert seen[-1][2] == f.trace.log_likelihood[-1]


def test_the_trace_says_whether_em_was_accelerated(log, tmp_path):
    for accelerate in (True, False):
        f = fit("pbm", log, accelerate=accelerate)
        f.save(tmp_path / "f.json")
        assert load_fit(tmp_path / "f.json").trace.accelerated is accelerate
        assert f.trace.to_dict()["accelerated"] is accelerate


def test_options_refuse_acceleration_for_closed_forms(log):
    from onlineeval.errors import ConfigError

    with pytest.raises(ConfigError, match="accelerate"):
        fit_log("dcm", log, method="closed_form", accelerate=True)
    assert EMOptions().accelerate is True


@pytest.mark.parametrize("name", ["pbm", "ubm"])
def test_a_jump_clipped_onto_zero_is_not_accepted_with_pseudo_counts(name, monkeypatch):
    """A log without clicks: the extrapolation overshoots the small attractiveness estimates (1 / (views + 2))
    and was clipped onto 0, where the Beta log-density is -inf; leaving those parameters out of the objective
    accepted such jumps and lowered the objective between cycle starts by 1.07 (seen before the fix)."""
    rng = np.random.default_rng(0)
    n = 300
    log0 = from_arrays(rng.integers(0, 3, n), np.array([rng.permutation(6)[:4] for _ in range(n)]),
                       np.zeros((n, 4), bool))
    seen = capture(monkeypatch, name)
    fitted = fit(name, log0, pseudo=1.0, max_iter=600)
    starts = seen[1:][::3][: len(fitted.trace.log_likelihood)]
    obj = np.array([_objective(s, ll, 1.0) for s, ll, _ in starts])
    assert fitted.trace.converged and len(obj) >= 3
    assert np.all(np.diff(obj) >= -1e-10 * np.abs(obj[:-1])), np.diff(obj).min()
    # the step is shortened so that no jump leaves (0, 1): every E-step's parameters strictly inside (UBM's unused
    # gammas above the diagonal stay 0)
    for s, _, _ in seen[1:]:
        gamma = s[1][np.tril_indices(s[1].shape[0])] if name == "ubm" else s[1]
        assert np.all((s[0] > 0.0) & (s[0] < 1.0)) and np.all((gamma > 0.0) & (gamma < 1.0))
        assert name != "ubm" or np.all(np.triu(s[1], 1) == 0.0)


def test_pbm_fit_is_the_maximum_found_by_an_independent_optimiser():
    """Independent reference: scipy's L-BFGS-B on the exact PBM log-likelihood plus the pseudo-counts' Beta term
    (pseudo 1: ``log p + log(1 - p)`` for every attractiveness and examination), over logits. The accelerated EM
    fit's click probabilities agree within 1e-5 (measured 2.3e-7) and its objective is the optimiser's within 1e-6
    (measured 2.5e-10)."""
    from scipy.optimize import minimize

    from clickmodels.estimation import fit_pbm

    rng = np.random.default_rng(3)
    n, n_q, n_d, k = 400, 3, 4, 3
    q = rng.integers(0, n_q, n)
    docs = np.argsort(rng.random((n, n_d)), axis=1)[:, :k]
    clicks = rng.random((n, k)) < rng.uniform(0.2, 0.8, (n_q, n_d))[q[:, None], docs] * np.array([1.0, 0.6, 0.35])
    f = fit_pbm(from_arrays(q, docs, clicks), EMOptions())
    att = np.zeros((n_q, n_d))
    t = f.attractiveness
    att[t.query.astype(int), t.doc.astype(int)] = t.value
    gam = np.asarray(f.examination)

    def objective(a: np.ndarray, g: np.ndarray) -> float:
        p = a[q[:, None], docs] * g
        ll = np.sum(np.where(clicks, np.log(p), np.log1p(-p)))
        return float(ll + np.sum(np.log(a) + np.log1p(-a)) + np.sum(np.log(g) + np.log1p(-g)))

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return 1 / (1 + np.exp(-x[: n_q * n_d].reshape(n_q, n_d))), 1 / (1 + np.exp(-x[n_q * n_d:]))

    res = minimize(lambda x: -objective(*unpack(x)), np.zeros(n_q * n_d + k), method="L-BFGS-B",
                   options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-10})
    assert res.success
    a, g = unpack(res.x)
    assert np.abs(att[q[:, None], docs] * gam - a[q[:, None], docs] * g).max() < 1e-5
    assert objective(att, gam) >= -res.fun - 1e-6
