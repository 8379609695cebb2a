"""Per-session bootstrap standard errors of DBN and CCM fits (clickmodels.estimation.bootstrap, ``clicks fit
--bootstrap``), checked against the exact SEs of the expected Fisher information at the truth.

Both are cascade chains: at an examined slot the user clicks with probability alpha_qd, then goes on with
probability c1 after a click (DBN: gamma (1 - sigma_qd); CCM: tau2 (1 - alpha_qd) + tau3 alpha_qd) and c0 after none
(DBN: gamma; CCM: tau1). Logs are simulated here by an independent numpy chain (5 ranks; 2 queries of 7 documents,
each query with 6 fixed lists), and a list's 2^5 click patterns get their probabilities from the chain's definition
(everything above the last click l was examined; below it the user stopped, or went on and clicked nothing); the
information is sum over patterns of P score score^T, scores by central differences.

One 20,000-session log per model, 100 replicates; the statistic of tests/test_clickmodels_fit_se.py: the mean over
the p parameters of s_j^2 / sigma_j^2 within 4 of its SE (sqrt(2 tr(R^2) / (B - 1)) / p) of 1, each within
4 sqrt(2 / (B - 1)). The fit itself must recover the truth within 4 Fisher SEs.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from clickmodels.estimation import fit_log
from test_clickmodels_em_default import pattern_information
from test_clickmodels_fit_se import check_against_fisher
from clickmodels.estimation.bootstrap import bootstrap_se
from clickmodels.logs import ClickLog, from_arrays
from onlineeval.cli import app

K, Q, D, L = 5, 2, 7, 6
N_LOG, B = 20_000, 100
_rng = np.random.default_rng(20261206)
ALPHA = _rng.uniform(0.2, 0.75, (Q, D))
SIGMA = _rng.uniform(0.2, 0.7, (Q, D))
LISTS = np.array([[_rng.permutation(D)[:K] for _ in range(L)] for _ in range(Q)])  # (Q, L, K)
GAMMA = 0.8
TAUS = (0.75, 0.85, 0.4)
PATTERNS = np.array(list(itertools.product([False, True], repeat=K)))  # (32, K)


def _continuations(model: str, theta: np.ndarray, q: int, docs: np.ndarray) -> tuple[np.ndarray, ...]:
    """(alpha, c0, c1) per slot of one list from the parameter vector."""
    alpha = theta[: Q * D].reshape(Q, D)[q, docs]
    if model == "dbn":
        sigma, gamma = theta[Q * D: 2 * Q * D].reshape(Q, D)[q, docs], theta[-1]
        return alpha, np.full(K, gamma), gamma * (1 - sigma)
    t1, t2, t3 = theta[-3:]
    return alpha, np.full(K, t1), t2 * (1 - alpha) + t3 * alpha


def truth(model: str) -> np.ndarray:
    if model == "dbn":
        return np.concatenate([ALPHA.ravel(), SIGMA.ravel(), [GAMMA]])
    return np.concatenate([ALPHA.ravel(), TAUS])


def simulate(model: str, seed: int) -> ClickLog:
    rng = np.random.default_rng(seed)
    q, li = rng.integers(0, Q, N_LOG), rng.integers(0, L, N_LOG)
    docs = LISTS[q, li]
    theta = truth(model)
    parts = [np.stack(_continuations(model, theta, qq, LISTS[qq, ll])) for qq, ll in itertools.product(range(Q),
                                                                                                          range(L))]
    table = np.array(parts).reshape(Q, L, 3, K)[q, li]  # (N, 3, K)
    alpha, c0, c1 = table[:, 0], table[:, 1], table[:, 2]
    click_u, go_u = rng.random((N_LOG, K)), rng.random((N_LOG, K))
    clicks = np.zeros((N_LOG, K), dtype=bool)
    examined = np.ones(N_LOG, dtype=bool)
    for r in range(K):
        clicks[:, r] = examined & (click_u[:, r] < alpha[:, r])
        examined &= go_u[:, r] < np.where(clicks[:, r], c1[:, r], c0[:, r])
    return from_arrays(q, q[:, None] * D + docs, clicks)


def pattern_log_probs(alpha: np.ndarray, c0: np.ndarray, c1: np.ndarray) -> np.ndarray:
    """log P(clicks) of every pattern of one list (module docstring): above the last click l every slot examined;
    after it stop (1 - c1_l) or go on and click nothing, T(r) = (1 - alpha_r)(1 - c0_r + c0_r T(r + 1)), T(K) = 1."""
    tail = np.ones(K + 1)
    for r in range(K - 1, -1, -1):
        tail[r] = (1 - alpha[r]) * (1 - c0[r] + c0[r] * tail[r + 1])
    out = np.empty(len(PATTERNS))
    for i, c in enumerate(PATTERNS):
        if not c.any():
            out[i] = np.log(tail[0])
            continue
        last = int(np.flatnonzero(c)[-1])
        p = np.prod(np.where(c[:last], alpha[:last] * c1[:last], (1 - alpha[:last]) * c0[:last]))
        p *= alpha[last] * (1 - c1[last] + c1[last] * tail[last + 1])
        out[i] = np.log(p)
    return out


def fisher_covariance(model: str) -> np.ndarray:
    """Inverse expected information of ``N_LOG`` sessions at the truth (lists uniform)."""
    def logp_of(q: int, docs: np.ndarray):  # type: ignore[no-untyped-def]
        return lambda theta: pattern_log_probs(*_continuations(model, theta, q, docs))

    logps = [logp_of(q, LISTS[q, li]) for q, li in itertools.product(range(Q), range(L))]
    return np.linalg.inv(N_LOG * pattern_information(truth(model), logps))


def values(model: str, tables: dict, scalars: dict) -> np.ndarray:  # type: ignore[type-arg]
    """Parameter vector from per-field pair values (aligned with the fit's tables) and scalars."""
    def table(f: str) -> np.ndarray:
        t = tables[f][0]
        out = np.full((Q, D), np.nan)
        qq, dd = np.asarray(t.query).astype(int), np.asarray(t.doc).astype(int)
        out[qq, dd - qq * D] = tables[f][1]
        return out.ravel()

    if model == "dbn":
        return np.concatenate([table("attractiveness"), table("satisfaction"), [float(scalars["gamma"])]])
    return np.concatenate([table("attractiveness"), [float(scalars[t]) for t in ("tau1", "tau2", "tau3")]])


@pytest.fixture(scope="module", params=["dbn", "ccm"])
def fitted(request):  # type: ignore[no-untyped-def]
    model = request.param
    log = simulate(model, 13)
    fit = fit_log(model, log)
    return model, log, fit, bootstrap_se(model, log, fit, n_boot=B, seed=8), fisher_covariance(model)


def _pairs(fit) -> list[str]:  # type: ignore[no-untyped-def]
    return [f for f in type(fit).pair_fields]


def test_the_fit_recovers_the_truth_within_4_fisher_se(fitted) -> None:  # type: ignore[no-untyped-def]
    model, _, fit, _, cov = fitted
    sigma = np.sqrt(np.diag(cov))
    assert np.isfinite(sigma).all() and sigma.max() < 0.1, sigma  # every parameter identified in this design
    got = values(model, {f: (getattr(fit, f), getattr(fit, f).value) for f in _pairs(fit)},
                 {f: getattr(fit, f) for f in type(fit).float_fields})
    z = (got - truth(model)) / sigma
    assert np.abs(z).max() < 4, np.round(z, 1)


def test_bootstrap_se_matches_the_fisher_se(fitted) -> None:  # type: ignore[no-untyped-def]
    model, _, fit, boot, cov = fitted
    assert all(boot.se[f].shape == () for f in type(fit).float_fields)
    got = values(model, {f: (getattr(fit, f), boot.se[f]) for f in _pairs(fit)},
                 {f: boot.se[f] for f in type(fit).float_fields})
    check_against_fisher(got, cov, B)
    assert boot.undefined == {} and boot.values is None


def test_cli_fit_bootstrap_dbn_saves_scalar_ses(tmp_path: Path) -> None:
    from clickmodels.logs import read_click_log, write_tsv

    write_tsv(simulate("dbn", 5).take(np.arange(3000)), tmp_path / "log.tsv")
    out = tmp_path / "dbn.json"
    res = CliRunner().invoke(app, ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--model", "dbn",
                                   "--out", str(out), "-q", "--bootstrap", "20", "--seed", "2"])
    assert res.exit_code == 0, res.output
    se = json.loads(out.read_text())["standard_errors"]
    data = read_click_log(tmp_path / "log.tsv", None)
    lib = bootstrap_se("dbn", data, fit_log("dbn", data), n_boot=20, seed=2)
    assert isinstance(se["se"]["gamma"], float) and se["se"]["gamma"] == pytest.approx(float(lib.se["gamma"]),
                                                                                       rel=1e-12)
    assert se["undefined_reason"]["gamma"] is None and "scale" not in se
    assert f"gamma {float(lib.se['gamma']):.4f}" in res.stdout
