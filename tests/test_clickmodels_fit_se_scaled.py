"""Per-session bootstrap standard errors of PBM and UBM fits on the rank-1 scale
(clickmodels.estimation.bootstrap, ``clicks fit --bootstrap``), checked against the exact SEs of the expected Fisher
information at the truth.

Only the products examination x attractiveness are identified, so the parameters are taken on the rank-1 scale:
``a_qd = alpha_qd gamma_first`` and ``g = gamma / gamma_first`` (``gamma_first``: examination at rank 1, for UBM with
no click above), the reference ``g`` being 1. Logs are simulated here by an independent numpy PBM / UBM (5 ranks;
2 queries of 7 documents, each query with 6 fixed lists, so that every document is seen at several ranks); the
information is written from the models' definitions: each slot's click is a Bernoulli of ``p = a g`` given the clicks
above, so a session's expected information is the sum over slots of ``E[grad p grad p^T / (p (1 - p))]``, PBM's
at every slot, UBM's over the 2^5 click patterns of a list (the closest click above picks the ``g``).

One 20,000-session log per model, 100 replicates; the statistic of tests/test_clickmodels_fit_se.py: the mean over
the p parameters of s_j^2 / sigma_j^2 within 4 of its SE (sqrt(2 tr(R^2) / (B - 1)) / p) of 1, each within
4 sqrt(2 / (B - 1)). The fit itself must recover the truth within 4 Fisher SEs on that scale.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from clickmodels.estimation import fit_log
from test_clickmodels_fit_se import check_against_fisher
from clickmodels.estimation.bootstrap import REASONS, bootstrap_se, rank1_scale
from clickmodels.logs import ClickLog, from_arrays
from onlineeval.cli import app
from onlineeval.errors import ConfigError

K, Q, D, L = 5, 2, 7, 6
N_LOG, B = 20_000, 100
_rng = np.random.default_rng(20261205)
ALPHA = _rng.uniform(0.2, 0.75, (Q, D))
LISTS = np.array([[_rng.permutation(D)[:K] for _ in range(L)] for _ in range(Q)])  # (Q, L, K)
GAMMA_PBM = np.array([0.9, 0.65, 0.5, 0.4, 0.3])
# UBM: gamma[r, j], j = 1 + the rank index of the closest click above (0: none); j <= r
GAMMA_UBM = np.tril(0.3 + 0.6 * _rng.uniform(0.2, 1.0, (K, K)))
GAMMA_UBM[0, 0] = 0.85
PATTERNS = np.array(list(itertools.product([False, True], repeat=K)))  # (32, K)


def _gamma(model: str) -> np.ndarray:
    return GAMMA_PBM if model == "pbm" else GAMMA_UBM


def _columns(clicks: np.ndarray) -> np.ndarray:
    """UBM's column of every slot: 1 + the rank index of the closest click above (0: none)."""
    ranks = np.arange(1, K + 1)
    last = np.maximum.accumulate(np.where(clicks, ranks, 0), axis=-1)
    col = np.zeros(clicks.shape, dtype=np.int64)
    col[..., 1:] = last[..., :-1]
    return col


def simulate(model: str, seed: int) -> ClickLog:
    """``N_LOG`` sessions, query and list uniform; PBM: click at rank r w.p. gamma_r alpha; UBM: w.p.
    gamma[r, j] alpha, j from the clicks drawn above."""
    rng = np.random.default_rng(seed)
    q, li = rng.integers(0, Q, N_LOG), rng.integers(0, L, N_LOG)
    docs = LISTS[q, li]
    a = ALPHA[q[:, None], docs]
    u = rng.random((N_LOG, K))
    clicks = np.zeros((N_LOG, K), dtype=bool)
    last = np.zeros(N_LOG, dtype=np.int64)  # 1 + rank index of the last click so far (0: none)
    for r in range(K):
        g = GAMMA_PBM[r] if model == "pbm" else GAMMA_UBM[r, last]
        clicks[:, r] = u[:, r] < g * a[:, r]
        last = np.where(clicks[:, r], r + 1, last)
    return from_arrays(q, q[:, None] * D + docs, clicks)


def _g_index(model: str) -> list[tuple[int, ...]]:
    """The free entries of g on the rank-1 scale (the reference left out), in parameter order."""
    if model == "pbm":
        return [(r,) for r in range(1, K)]
    return [(r, j) for r in range(K) for j in range(r + 1) if (r, j) != (0, 0)]


def truth(model: str) -> np.ndarray:
    gamma = _gamma(model)
    first = gamma.flat[0]
    g = gamma / first
    return np.concatenate([(ALPHA * first).ravel(), [g[i] for i in _g_index(model)]])


def fisher_covariance(model: str) -> np.ndarray:
    """Inverse expected information of ``N_LOG`` sessions at the truth (module docstring)."""
    theta = truth(model)
    a = theta[: Q * D].reshape(Q, D)
    g = _gamma(model) / _gamma(model).flat[0]
    where = {idx: Q * D + i for i, idx in enumerate(_g_index(model))}
    info = np.zeros((theta.size, theta.size))
    for q, li in itertools.product(range(Q), range(L)):
        docs = LISTS[q, li]
        if model == "pbm":
            states = [(1.0, [(r,) for r in range(K)])]
        else:
            states = []
            for c in PATTERNS:
                col = _columns(c)
                pr = np.prod([g[r, col[r]] * a[q, docs[r]] if c[r] else 1 - g[r, col[r]] * a[q, docs[r]]
                              for r in range(K)])
                states.append((pr, [(r, int(col[r])) for r in range(K)]))
            assert abs(sum(s[0] for s in states) - 1) < 1e-12
        for pr, idx in states:
            for r, gi in enumerate(idx):
                p = g[gi] * a[q, docs[r]]
                grad = np.zeros(theta.size)
                grad[q * D + docs[r]] = g[gi]
                if gi in where:
                    grad[where[gi]] = a[q, docs[r]]
                info += pr * np.outer(grad, grad) / (p * (1 - p)) / (Q * L)
    return np.linalg.inv(N_LOG * info)


def estimates(model: str, att, gamma) -> np.ndarray:  # type: ignore[no-untyped-def]
    """A fit's (or its SEs') values in parameter order: attractiveness per (query, doc), then the free g."""
    out = np.full((Q, D), np.nan)
    qq, dd = np.asarray(att.query).astype(int), np.asarray(att.doc).astype(int)
    out[qq, dd - qq * D] = att.value
    gamma = np.asarray(gamma, dtype=float)
    return np.concatenate([out.ravel(), [gamma[i] for i in _g_index(model)]])


@pytest.fixture(scope="module", params=["pbm", "ubm"])
def fitted(request):  # type: ignore[no-untyped-def]
    model = request.param
    log = simulate(model, 7)
    fit = fit_log(model, log)
    return model, log, fit, bootstrap_se(model, log, fit, n_boot=B, seed=5), fisher_covariance(model)


def test_the_fit_on_the_rank1_scale_recovers_the_truth(fitted) -> None:  # type: ignore[no-untyped-def]
    model, _, fit, boot, cov = fitted
    sigma = np.sqrt(np.diag(cov))
    assert np.isfinite(sigma).all() and sigma.max() < 0.05, sigma  # every parameter identified in this design
    scaled = rank1_scale(fit)
    got = estimates(model, scaled.attractiveness, scaled.examination)
    z = (got - truth(model)) / sigma
    assert np.abs(z).max() < 4, np.round(z, 1)
    # the values saved beside the SEs are these
    np.testing.assert_array_equal(boot.values["examination"], scaled.examination)
    np.testing.assert_array_equal(boot.values["attractiveness"], scaled.attractiveness.value)


def test_bootstrap_se_matches_the_fisher_se(fitted) -> None:  # type: ignore[no-untyped-def]
    model, _, fit, boot, cov = fitted
    att = rank1_scale(fit).attractiveness
    from dataclasses import replace

    got = estimates(model, replace(att, value=boot.se["attractiveness"]), boot.se["examination"])
    check_against_fisher(got, cov, B)


def test_the_reference_and_impossible_entries_have_no_se(fitted) -> None:  # type: ignore[no-untyped-def]
    model, _, _, boot, _ = fitted
    why = np.asarray(boot.reason["examination"], dtype=object)
    se = boot.se["examination"]
    assert why.flat[0] == "scale reference" and np.isnan(se.flat[0]) and boot.values["examination"].flat[0] == 1.0
    if model == "ubm":
        upper = np.triu(np.ones((K, K), dtype=bool), 1)
        assert (why[upper] == "cannot occur").all() and np.isnan(se[upper]).all()
        assert np.isfinite(se[~upper].ravel()[1:]).all()
        assert boot.parameters("examination") == K * (K + 1) // 2
    # only the reference is undefined; the impossible entries are not parameters, so not counted
    assert boot.undefined == {"examination": {"scale reference": 1}}
    assert "examination 1 of" in boot.undefined_note()


def test_raw_scales_differ_between_fits_but_the_scaled_values_do_not_move_the_clicks() -> None:
    """The raw examination scale is wherever EM stopped (another start, another scale); the rank-1 scale keeps every
    click probability (so the SEs are of the model the fit is, on a scale every fit shares)."""
    log = simulate("pbm", 3).take(np.arange(4000))
    fit = fit_log("pbm", log)
    scaled = rank1_scale(fit)
    np.testing.assert_allclose(scaled._click_probs(log), fit._click_probs(log), rtol=1e-12)
    assert scaled.examination[0] == 1.0
    ubm = fit_log("ubm", simulate("ubm", 3).take(np.arange(4000)))
    sub = simulate("ubm", 4).take(np.arange(500))
    np.testing.assert_allclose(rank1_scale(ubm)._conditional_click_probs(sub), ubm._conditional_click_probs(sub),
                               rtol=1e-12)


def test_a_fit_without_a_scale_is_refused() -> None:
    from dataclasses import replace

    log = simulate("pbm", 2).take(np.arange(500))
    fit = fit_log("pbm", log)
    broken = replace(fit, examination=np.r_[0.0, fit.examination[1:]])
    assert rank1_scale(broken) is None
    with pytest.raises(ConfigError, match="examination at rank 1 is 0.0, not > 0"):
        bootstrap_se("pbm", log, broken, n_boot=3)


def test_cli_fit_bootstrap_pbm_writes_values_and_ses(tmp_path: Path) -> None:
    from clickmodels.logs import read_click_log, write_tsv

    write_tsv(simulate("pbm", 9).take(np.arange(3000)), tmp_path / "log.tsv")
    out = tmp_path / "pbm.json"
    res = CliRunner().invoke(app, ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--model", "pbm",
                                   "--out", str(out), "-q", "--bootstrap", "20", "--seed", "4"])
    assert res.exit_code == 0, res.output
    se = json.loads(out.read_text())["standard_errors"]
    assert se["scale"].startswith("rank-1 scale: examination / its value at rank 1")
    assert se["values"]["examination"][0] == 1.0 and se["se"]["examination"][0] is None
    assert se["undefined_reason"]["examination"][0] == "scale reference"
    assert se["undefined_rule"]["scale reference"] == REASONS["scale reference"]
    data = read_click_log(tmp_path / "log.tsv", None)
    lib = bootstrap_se("pbm", data, fit_log("pbm", data), n_boot=20, seed=4)
    np.testing.assert_allclose(se["values"]["examination"], lib.values["examination"], rtol=1e-12)
    np.testing.assert_allclose(se["se"]["examination"][1:], lib.se["examination"][1:], rtol=1e-12)
    line = next(x for x in res.stdout.splitlines() if x.startswith("standard errors"))
    assert "on the rank-1 scale (value +- SE): attractiveness median" in line
    v, e = lib.values["examination"], lib.se["examination"]
    assert f"examination 1.0000 (reference) {v[1]:.4f} +- {e[1]:.4f} {v[2]:.4f} +- {e[2]:.4f}" in line


def test_the_scale_note_points_at_the_bootstrap_values() -> None:
    fit = fit_log("pbm", simulate("pbm", 4).take(np.arange(500)))
    note = fit.notes()["pbm_scale"]
    assert "compare examination[r] / examination[0] across fits" in note
    assert note.endswith("clicks fit --bootstrap saves the values on that rank-1 scale with standard errors, under "
                         "standard_errors.values)")
