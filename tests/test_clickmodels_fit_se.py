"""Per-session bootstrap standard errors of DCM and SDBN fits (clickmodels.estimation.bootstrap, ``clicks fit
--bootstrap``), checked against the exact SEs of the expected Fisher information at the truth
(tests/test_clickmodels_em_default.py, where those are checked against the spread of fits over independent logs).

One 20,000-session log per model from that file's world, 100 replicates. For replicate SEs s_j of parameters with
true SEs sigma_j, s_j^2 / sigma_j^2 has mean 1 and, for normal replicates, Cov(s_j^2/sigma_j^2, s_k^2/sigma_k^2)
= 2 R_jk^2 / (B - 1) (R: the parameters' correlation matrix), so the mean over the p parameters has SE
sqrt(2 tr(R^2) / (B - 1)) / p; the test asks for it within 4 of those SEs of 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import test_clickmodels_em_default as world
from clickmodels.estimation import fit_log
from clickmodels.estimation.bootstrap import bootstrap_se
from onlineeval.cli import app
from onlineeval.errors import ConfigError

N_LOG, B = 20_000, 100


@pytest.mark.parametrize("model", ["dcm", "sdbn"])
def test_bootstrap_se_matches_the_fisher_se(model: str) -> None:
    log = world.simulate(model, 11).take(np.arange(N_LOG))
    fit = fit_log(model, log)
    boot = bootstrap_se(model, log, fit, n_boot=B, seed=3)
    cov = world.fisher_covariance(model) * (world.N / N_LOG)
    if model == "dcm":
        assert np.isnan(boot.se["continuation"][-1])  # the deepest rank is not identified
    check_against_fisher(world.estimates(model, _as_fit(fit, boot.se)), cov, B)


def check_against_fisher(got: np.ndarray, cov: np.ndarray, n_boot: int) -> None:
    """Bootstrap SEs ``got`` against the Fisher covariance ``cov`` (the module docstring's statistic): the mean of
    s^2 / sigma^2 over the parameters within 4 of its SE of 1, and each within 4 sqrt(2 / (B - 1)) of 1 (s^2 /
    sigma^2 ~ chi2(B - 1) / (B - 1) for normal replicates)."""
    sigma = np.sqrt(np.diag(cov))
    assert np.isfinite(got).all(), got
    ratio2 = (got / sigma) ** 2
    corr = cov / np.outer(sigma, sigma)
    sd_mean = np.sqrt(2 * np.trace(corr @ corr) / (n_boot - 1)) / len(sigma)
    assert abs(ratio2.mean() - 1) < 4 * sd_mean, (ratio2.mean(), sd_mean, np.round(np.sqrt(ratio2), 2))
    assert np.abs(ratio2 - 1).max() < 4 * np.sqrt(2 / (n_boot - 1)), np.round(ratio2, 2)


def _as_fit(fit, se: dict):  # type: ignore[no-untyped-def]
    """The fit with its parameter values replaced by their SEs (to reuse the world's readers)."""
    from dataclasses import replace

    changes = {}
    for f, v in se.items():
        old = getattr(fit, f)
        changes[f] = replace(old, value=np.nan_to_num(v)) if hasattr(old, "value") else np.nan_to_num(v)
    return replace(fit, **changes)


def test_bootstrap_se_refuses_other_models_and_one_replicate() -> None:
    log = world.simulate("dcm", 1).take(np.arange(2000))
    with pytest.raises(ConfigError, match="available for dcm, sdbn, dbn, ccm, pbm, ubm, not cm"):
        bootstrap_se("cm", log, fit_log("cm", log), n_boot=5)
    with pytest.raises(ConfigError, match="integer >= 2"):
        bootstrap_se("dcm", log, fit_log("dcm", log), n_boot=1)


def test_cli_fit_bootstrap_writes_and_prints_the_ses(tmp_path: Path) -> None:
    from clickmodels.logs import write_tsv

    log = world.simulate("dcm", 2).take(np.arange(3000))
    write_tsv(log, tmp_path / "log.tsv")
    out = tmp_path / "dcm.json"
    args = ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--model", "dcm", "--out", str(out), "-q"]
    res = CliRunner().invoke(app, [*args, "--bootstrap", "20", "--seed", "4"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    se = doc["standard_errors"]
    assert se["n_boot"] == 20 and se["seed"] == 4 and se["method"].startswith("per-session bootstrap")
    assert len(se["se"]["attractiveness"]) == len(doc["params"]["attractiveness"]["value"])
    assert se["se"]["continuation"][-1] is None and all(0 < x < 0.2 for x in se["se"]["continuation"][:-1])
    assert "standard errors (per-session bootstrap, 20 replicates, seed 4): attractiveness median" in res.stdout
    # the same replicates as the library call
    from clickmodels.logs import read_click_log

    data = read_click_log(tmp_path / "log.tsv", None)
    lib = bootstrap_se("dcm", data, fit_log("dcm", data), n_boot=20, seed=4)
    np.testing.assert_allclose([np.nan if x is None else x for x in se["se"]["continuation"]],
                               lib.se["continuation"], rtol=1e-12)
    res = CliRunner().invoke(app, ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--model", "rctr",
                                   "--out", str(out), "--bootstrap", "20"])
    assert res.exit_code == 2
    assert "--bootstrap: standard errors are available for dcm, sdbn, dbn, ccm, pbm, ubm, not rctr" in res.output
    res = CliRunner().invoke(app, [*args, "--seed", "4"])
    assert res.exit_code == 2 and "--seed: applies to --bootstrap" in res.output


def _loop_se(model: str, log, n_boot: int, seed: int) -> dict:  # type: ignore[no-untyped-def]
    """The SEs recomputed by an explicit loop: the same draws, np.std(ddof=1) over the replicates informing each."""
    fit = fit_log(model, log)
    rng = np.random.default_rng(seed)
    values: dict = {}
    for _ in range(n_boot):
        rep = fit_log(model, log.take(rng.integers(0, log.n_sessions, log.n_sessions)))
        for f in type(fit).pair_fields:
            t = getattr(rep, f)
            for q, d, v, c in zip(t.query, t.doc, t.value, t.count):
                if c > 0:
                    values.setdefault((f, q, d), []).append(v)
    return {f: np.array([np.std(values.get((f, q, d), [np.nan] * 2), ddof=1)
                         for q, d in zip(getattr(fit, f).query, getattr(fit, f).doc)])
            for f in type(fit).pair_fields}


@pytest.mark.parametrize("model", ["dcm", "sdbn"])
def test_informed_parameters_keep_the_replicates_sd(model: str) -> None:
    """300 sessions: every pair is informed, and its SE is the plain SD of its replicates (as before the rule)."""
    log = world.simulate(model, 1).take(np.arange(300))
    boot = bootstrap_se(model, log, fit_log(model, log), n_boot=30, seed=0)
    expected = _loop_se(model, log, 30, 0)
    for f, se in expected.items():
        assert all(r is None for r in boot.reason[f])
        np.testing.assert_allclose(boot.se[f], se, rtol=1e-9)
    if model == "dcm":
        assert boot.reason["continuation"] == [None] * 5 + ["no observation"]
        assert boot.undefined == {"continuation": {"no observation": 1}}
    else:
        assert boot.undefined == {} and boot.undefined_note() is None


def test_a_never_clicked_pair_has_no_se() -> None:
    """SDBN, 30 sessions: pair (q 0, doc 5) is never clicked; EM keeps its satisfaction at the start 0.5 in every
    replicate (SD 0 before), its SE is now undefined; the pairs clicked once are undefined too, the others unchanged."""
    log = world.simulate("sdbn", 1).take(np.arange(30))
    fit = fit_log("sdbn", log)
    boot = bootstrap_se("sdbn", log, fit, n_boot=30, seed=0)
    t = fit.satisfaction
    (i,) = np.where((t.query == "0") & (t.doc == "5"))[0]
    assert t.count[i] == 0 and t.value[i] == 0.5
    assert np.isnan(boot.se["satisfaction"][i]) and boot.reason["satisfaction"][i] == "no observation"
    once = t.count == 1
    assert once.sum() == 3 and all(boot.reason["satisfaction"][j] == "one observation" for j in np.where(once)[0])
    assert boot.undefined == {"satisfaction": {"no observation": 1, "one observation": 3}}
    defined = t.count >= 2
    assert np.all(np.isfinite(boot.se["satisfaction"][defined])) and np.all(boot.se["satisfaction"][defined] > 0)
    np.testing.assert_allclose(boot.se["satisfaction"][defined], _loop_se("sdbn", log, 30, 0)["satisfaction"][defined],
                               rtol=1e-9)
    doc = boot.to_dict()
    assert doc["se"]["satisfaction"][i] is None and doc["undefined_reason"]["satisfaction"][i] == "no observation"
    assert "satisfaction 4 of 16 (1 no observation, 3 one observation)" in boot.undefined_note()


def test_one_session_log_has_no_zero_se(tmp_path: Path) -> None:
    from clickmodels.logs import write_tsv

    log = world.simulate("sdbn", 1).take(np.arange(1))
    write_tsv(log, tmp_path / "log.tsv")
    out = tmp_path / "sdbn.json"
    res = CliRunner().invoke(app, ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--model", "sdbn",
                                   "--out", str(out), "-q", "--bootstrap", "10"])
    assert res.exit_code == 0, res.output
    se = json.loads(out.read_text())["standard_errors"]
    assert all(x is None for v in se["se"].values() for x in v), se["se"]
    assert all(r is not None for v in se["undefined_reason"].values() for r in v)
    assert "0.0000" not in res.stdout and "attractiveness n/a n/a" in res.stdout
    assert "note (standard errors): standard errors undefined" in res.stdout
    assert "the log has 1 session, so every replicate is the log itself" in res.stdout
    for model in ("dcm", "sdbn"):
        boot = bootstrap_se(model, log, fit_log(model, log), n_boot=5)
        assert all(np.isnan(v).all() for v in boot.se.values())


def test_replicates_that_never_move_give_no_se(tmp_path: Path) -> None:
    """Three identical sessions (b then a, a clicked): every replicate is the log, so each parameter is the same in
    all of them (attractiveness 0.2 and 0.8 with the Beta(1, 1) pseudo-counts over 3 views); the previous code
    gave SE 0 for them, now 'constant' (or 'no observation': b's satisfaction, never clicked)."""
    from clickmodels.logs import read_click_log

    (tmp_path / "log.tsv").write_text("# session\tquery\tdocs\tclicks\n" + "".join(
        f"{i}\tq\tb,a\ta\n" for i in range(3)))
    log = read_click_log(tmp_path / "log.tsv", None)
    for model in ("dcm", "sdbn"):
        fit = fit_log(model, log)
        boot = bootstrap_se(model, log, fit, n_boot=20)
        assert list(fit.attractiveness.count) == [3, 3]
        assert boot.reason["attractiveness"] == ["constant", "constant"]
        assert all(np.isnan(v).all() for v in boot.se.values())
    assert boot.reason["satisfaction"] == ["no observation", "constant"]


def test_the_refits_report_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bootstrap refits the model n times (seconds each on a large log) and printed nothing while it ran:
    ``progress(what, done, total)`` after each refit; the CLI's lines on stderr with the time left (none with -q)."""
    from clickmodels.logs import write_tsv
    from onlineeval.cli.clicks import RefitProgress

    log = world.simulate("sdbn", 3).take(np.arange(400))
    calls: list = []
    bootstrap_se("sdbn", log, fit_log("sdbn", log), n_boot=4, seed=0, progress=lambda *a: calls.append(a))
    assert calls == [("sdbn fitted again on resampled sessions", i, 4) for i in (1, 2, 3, 4)]
    write_tsv(log, tmp_path / "log.tsv")
    monkeypatch.setattr(RefitProgress, "EVERY", 0.0)
    args = ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--model", "sdbn", "--out",
            str(tmp_path / "f.json"), "--bootstrap", "3"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    lines = [x for x in res.stderr.splitlines() if x.startswith("bootstrap: ")]
    assert lines[0].startswith("bootstrap: sdbn fitted again on resampled sessions: 1/3 refits, ")
    assert "left" in lines[0] and lines[-1].startswith("bootstrap: sdbn fitted again on resampled sessions: 3/3 "
                                                        "refits, ") and "left" not in lines[-1]
    res = CliRunner().invoke(app, [*args, "-q"])
    assert res.exit_code == 0 and "bootstrap: " not in res.stderr
