"""Estimators (clickmodels.estimation): hand-computed closed forms, EM properties, and
cross-checks of the fitted probabilities against the independent kernels of
clickmodels.kernels."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from test_clickmodels_kernels import chain_joint  # the path-enumeration reference

from clickmodels import kernels
from clickmodels.estimation import (
    ESTIMATORS,
    EMOptions,
    fit_from_dict,
    fit_log,
    load_fit,
)
from clickmodels.estimation.base import smoothed
from clickmodels.estimation.dbn import fit_dbn
from clickmodels.estimation.pbm import fit_pbm
from clickmodels.estimation.ubm import fit_ubm
from clickmodels.logs import ClickLog, from_arrays
from onlineeval.errors import ConfigError, InputError

# one query, documents a=0, b=1, c=2
TINY = from_arrays(
    [0, 0, 0, 0],
    [[0, 1, 2], [0, 1, 2], [1, 0, 2], [1, 0, 2]],
    [[1, 0, 1], [0, 1, 0], [0, 0, 0], [1, 0, 0]],
    doc_vocab=["a", "b", "c"],
)


def _table(fit, field: str = "attractiveness") -> dict[str, float]:
    t = getattr(fit, field)
    return dict(zip(t.doc.tolist(), t.value.tolist()))


def test_ctr_baselines_by_hand() -> None:
    assert fit_log("gctr", TINY).p == pytest.approx(4 / 12)
    np.testing.assert_allclose(fit_log("rctr", TINY).p, [2 / 4, 1 / 4, 1 / 4])
    dctr = _table(fit_log("dctr", TINY, pseudo=0.0))
    assert dctr == pytest.approx({"a": 1 / 4, "b": 2 / 4, "c": 1 / 4})
    # pseudo-counts: (clicks + 1) / (views + 2)
    assert _table(fit_log("dctr", TINY)) == pytest.approx({"a": 2 / 6, "b": 3 / 6, "c": 2 / 6})


def test_cascade_model_by_hand() -> None:
    # examined down to the first click: s1 {a}, s2 {a, b}, s3 {b, a, c}, s4 {b}
    cm = fit_log("cm", TINY, pseudo=0.0)
    assert _table(cm) == pytest.approx({"a": 1 / 3, "b": 2 / 3, "c": 0.0})
    assert dict(zip(cm.attractiveness.doc, cm.attractiveness.count)) == {"a": 3, "b": 3, "c": 1}


def test_dcm_and_sdbn_by_hand() -> None:
    # examined down to the last click: s1 {a, b, c}, s2 {a, b}, s3 all, s4 {b}
    dcm = fit_log("dcm", TINY, pseudo=0.0, method="closed_form")
    assert _table(dcm) == pytest.approx({"a": 1 / 3, "b": 2 / 4, "c": 1 / 2})
    # clicks at rank 1: s1, s4 (s4 last) -> 1 - 1/2; rank 2: s2 (last) -> 0; rank 3: s1 (last) -> 0
    np.testing.assert_allclose(dcm.continuation, [1 / 2, 0.0, 0.0])
    sdbn = fit_log("sdbn", TINY, pseudo=0.0, method="closed_form")
    assert _table(sdbn) == pytest.approx({"a": 1 / 3, "b": 2 / 4, "c": 1 / 2})
    assert _table(sdbn, "satisfaction") == pytest.approx({"a": 0.0, "b": 1.0, "c": 1.0})
    # SDBN session 1 by hand: a clicked & not satisfied, b skipped, c clicked (bottom)
    p1 = (1 / 3) * 1.0 * (1 - 1 / 2) * (1 / 2)
    assert sdbn.log_likelihood(TINY)[0] == pytest.approx(np.log(p1))


def test_smoothed_is_beta_posterior_mean() -> None:
    assert smoothed(3, 10, 1.0) == pytest.approx(4 / 12)
    assert smoothed(0, 0, 0.0) == 0.5


# ----------------------------------------------------------------------- simulation


def _perm_log(n: int, n_docs: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """(n, k) rankings: the top k of a uniform random permutation of n_docs documents."""
    return np.argsort(rng.random((n, n_docs)), axis=1)[:, :k]


def _sim_chain(alpha: np.ndarray, c1_doc: np.ndarray, c0: float, n: int, seed: int) -> ClickLog:
    rng = np.random.default_rng(seed)
    docs = _perm_log(n, alpha.size, 4, rng)
    clicks, _ = kernels.chain_sample(alpha[docs], c1_doc[docs], np.full(docs.shape, c0), rng, docs.shape)
    return from_arrays(np.zeros(n, dtype=int), docs, clicks)


ALPHA = np.array([0.8, 0.6, 0.4, 0.25])
SIGMA = np.array([0.7, 0.5, 0.3, 0.6])


@pytest.fixture(scope="module")
def dbn_log() -> ClickLog:
    return _sim_chain(ALPHA, 0.8 * (1 - SIGMA), 0.8, 4000, seed=11)


@pytest.mark.parametrize("accelerate", [False, True])
@pytest.mark.parametrize("name", ["pbm", "ubm", "dbn", "ccm", "dcm:em", "sdbn:em"])
def test_em_log_likelihood_never_decreases(name: str, accelerate: bool, dbn_log: ClickLog) -> None:
    """Without pseudo-counts EM's objective is the log-likelihood: it never decreases (plain EM from one iteration
    to the next, SQUAREM from one cycle's start to the next); tol 0 runs the whole budget of E-steps unless two
    entries are equal (SQUAREM can reach the fixed point to the last bit within 25)."""
    base, _, method = name.partition(":")
    fit = fit_log(base, dbn_log, pseudo=0.0, tol=0.0, max_iter=25, method=method or None, accelerate=accelerate)
    ll = np.array(fit.trace.log_likelihood)
    assert fit.trace.accelerated is accelerate
    if accelerate:
        assert fit.trace.iterations <= 25 and len(ll) <= fit.trace.iterations
        assert fit.trace.converged == (fit.trace.iterations < 25 or ll[-1] == ll[-2])
        assert not fit.trace.converged or ll[-1] == ll[-2]
    else:
        assert fit.trace.iterations == 25 and not fit.trace.converged
    assert np.all(np.diff(ll) >= -1e-7 * np.abs(ll[:-1]))
    assert ll[-1] > ll[0]


@pytest.mark.parametrize("accelerate", [False, True])
def test_em_stops_on_relative_tolerance(dbn_log: ClickLog, accelerate: bool) -> None:
    fit = fit_pbm(dbn_log, EMOptions(tol=1e-4, max_iter=500, accelerate=accelerate))
    ll = fit.trace.log_likelihood
    assert fit.trace.converged and fit.trace.iterations < 500
    # plain EM: one entry per iteration; SQUAREM: one per cycle of up to three E-steps, the last cycle's first
    assert fit.trace.iterations == (3 * len(ll) - 2 if accelerate else len(ll))
    assert abs(ll[-1] - ll[-2]) <= 1e-4 * abs(ll[-2])
    assert abs(ll[-2] - ll[-3]) > 1e-4 * abs(ll[-3])


def _chain_ll(alpha: np.ndarray, sigma: np.ndarray, gamma: float, log: ClickLog) -> float:
    """DBN log-likelihood by the independent forward filter of clickmodels.kernels."""
    a = alpha[log.docs]
    p = kernels.chain_conditional(a, gamma * (1 - sigma[log.docs]), np.full(a.shape, gamma), log.clicks)
    return float(np.where(log.clicks, np.log(p), np.log1p(-p)).sum())


def test_dbn_em_reaches_a_local_maximum_of_the_kernel_likelihood(dbn_log: ClickLog) -> None:
    fit = fit_dbn(dbn_log, EMOptions(pseudo=0.0, tol=1e-12, max_iter=3000))
    order = np.argsort(fit.attractiveness.doc.astype(int))
    alpha, sigma = fit.attractiveness.value[order], fit.satisfaction.value[order]
    gamma = fit.gamma
    best = _chain_ll(alpha, sigma, gamma, dbn_log)
    assert best == pytest.approx(float(fit.log_likelihood(dbn_log).sum()), rel=1e-12)
    h = 2e-3
    for vec in ("alpha", "sigma", "gamma"):
        for i in range(4 if vec != "gamma" else 1):
            for sign in (-1, 1):
                a, s, g = alpha.copy(), sigma.copy(), gamma
                if vec == "alpha":
                    a[i] += sign * h
                elif vec == "sigma":
                    s[i] += sign * h
                else:
                    g += sign * h
                assert _chain_ll(a, s, g, dbn_log) < best + 1e-6, (vec, i, sign)


def test_pbm_and_ubm_em_reach_local_maxima(dbn_log: ClickLog) -> None:
    pbm = fit_pbm(dbn_log, EMOptions(pseudo=0.0, tol=1e-13, max_iter=5000))
    order = np.argsort(pbm.attractiveness.doc.astype(int))
    alpha, gamma = pbm.attractiveness.value[order], pbm.examination.copy()

    def ll(a: np.ndarray, g: np.ndarray) -> float:
        p = a[dbn_log.docs] * g[None, :]
        return float(np.where(dbn_log.clicks, np.log(p), np.log1p(-p)).sum())

    best = ll(alpha, gamma)
    for i in range(4):
        for sign in (-1, 1):
            a, g = alpha.copy(), gamma.copy()
            a[i] += sign * 1e-3
            g[i] += sign * 1e-3 if g[i] + sign * 1e-3 <= 1 else 0.0
            assert ll(a, gamma) < best + 1e-6 and ll(alpha, g) < best + 1e-6

    ubm = fit_ubm(dbn_log, EMOptions(pseudo=0.0, tol=1e-13, max_iter=5000))
    a = ubm.attractiveness.value[np.argsort(ubm.attractiveness.doc.astype(int))]

    def ll_u(a: np.ndarray, g: np.ndarray) -> float:
        p = kernels.ubm_conditional(a[dbn_log.docs], g, dbn_log.clicks)
        return float(np.where(dbn_log.clicks, np.log(p), np.log1p(-p)).sum())

    best = ll_u(a, ubm.examination)
    assert best == pytest.approx(float(ubm.log_likelihood(dbn_log).sum()), rel=1e-12)
    for r in range(4):
        for j in range(r + 1):
            g = ubm.examination.copy()
            if g[r, j] + 1e-3 <= 1:
                g[r, j] += 1e-3
                assert ll_u(a, g) < best + 1e-6
            g = ubm.examination.copy()
            g[r, j] -= 1e-3
            assert ll_u(a, g) < best + 1e-6


def _ubm_joint(a: np.ndarray, gamma: np.ndarray, clicks: tuple[int, ...]) -> float:
    p, last = 1.0, 0
    for r, c in enumerate(clicks):
        q = a[r] * gamma[r, last]
        p *= q if c else 1 - q
        last = r + 1 if c else last
    return p


def _reference_probs(name: str, fit, log: ClickLog) -> tuple[np.ndarray, np.ndarray]:
    """Marginal and conditional click probabilities by summing the joint over all 2^k
    click patterns, with each model's parameters mapped to per-slot values here (not by
    the fit record's own hooks)."""
    n, k = log.docs.shape
    shown = log.shown
    if name in ("gctr", "rctr", "dctr", "pbm"):
        if name == "gctr":
            p = np.full((n, k), fit.p)
        elif name == "rctr":
            p = np.broadcast_to(fit.p[:k], (n, k))
        elif name == "dctr":
            p = fit.attractiveness.for_log(log)
        else:
            p = fit.attractiveness.for_log(log) * fit.examination[None, :k]
        p = np.where(shown, p, 0.0)
        return p, p
    a = np.where(shown, fit.attractiveness.for_log(log), 0.0)
    one = np.ones((n, k))
    if name == "cm":
        c1, c0 = 0 * one, one
    elif name == "dcm":
        c1, c0 = np.broadcast_to(fit.continuation[:k], (n, k)), one
    elif name == "sdbn":
        c1, c0 = 1 - fit.satisfaction.for_log(log), one
    elif name == "dbn":
        c1, c0 = fit.gamma * (1 - fit.satisfaction.for_log(log)), fit.gamma * one
    elif name == "ccm":
        c1, c0 = fit.tau2 * (1 - a) + fit.tau3 * a, fit.tau1 * one
    marg = np.zeros((n, k))
    cond = np.zeros((n, k))
    patterns = list(itertools.product((0, 1), repeat=k))
    for i in range(n):
        if name == "ubm":
            joint = {c: _ubm_joint(a[i], fit.examination, c) for c in patterns}
        else:
            c1_i, c0_i = np.where(shown[i], c1[i], 1.0), np.where(shown[i], c0[i], 1.0)
            joint = {c: chain_joint(a[i], c1_i, c0_i, c) for c in patterns}
        marg[i] = sum(pr * np.array(c) for c, pr in joint.items())
        obs = tuple(int(x) for x in log.clicks[i])
        for r in range(k):
            prefix = [pr for c, pr in joint.items() if c[:r] == obs[:r]]
            hit = [pr for c, pr in joint.items() if c[:r] == obs[:r] and c[r] == 1]
            cond[i, r] = sum(hit) / sum(prefix) if sum(prefix) > 0 else 0.0
    return np.where(shown, marg, 0.0), np.where(shown, cond, 0.0)


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_fitted_probabilities_match_enumeration(name: str, dbn_log: ClickLog) -> None:
    """Marginal and conditional click probabilities of every fit record (which delegates to
    clickmodels.kernels) equal a brute-force sum over all click patterns and hidden paths,
    on full and on ragged lists; the chain rule gives the LL."""
    fit = fit_log(name, dbn_log, **({"max_iter": 30} if name in ("pbm", "ubm", "dbn", "ccm") else {}))
    sub = dbn_log.take(np.arange(40))
    ragged = from_arrays(
        [0, 0, 0, 0], [[0, 1, 2, -1], [3, 2, -1, -1], [1, 0, 3, 2], [2, -1, -1, -1]],
        [[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0]],
    )
    for log in (sub, ragged):
        p, pc = fit.click_probs(log), fit.conditional_click_probs(log)
        want_p, want_c = _reference_probs(name, fit, log)
        np.testing.assert_allclose(p, want_p, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(pc, want_c, rtol=1e-12, atol=1e-15)
        q = np.clip(want_c, 1e-10, 1 - 1e-10)
        ll = np.where(log.shown, np.where(log.clicks, np.log(q), np.log1p(-q)), 0.0).sum(axis=1)
        np.testing.assert_allclose(fit.log_likelihood(log), ll, rtol=1e-12)
        assert np.all((p >= 0) & (p <= 1)) and np.all((pc >= 0) & (pc <= 1))


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_fit_roundtrips_through_json(name: str, dbn_log: ClickLog, tmp_path: Path) -> None:
    fit = fit_log(name, dbn_log, **({"max_iter": 5} if name in ("pbm", "ubm", "dbn", "ccm") else {}))
    path = tmp_path / "p.json"
    fit.save(path)
    back = load_fit(path)
    assert type(back) is type(fit) and back.trace == fit.trace
    np.testing.assert_allclose(back.click_probs(dbn_log), fit.click_probs(dbn_log), rtol=1e-15)
    np.testing.assert_allclose(back.log_likelihood(dbn_log), fit.log_likelihood(dbn_log), rtol=1e-15)


def test_fit_leaves_log_untouched_and_is_deterministic(dbn_log: ClickLog) -> None:
    before = (dbn_log.docs.copy(), dbn_log.clicks.copy())
    a = fit_log("dbn", dbn_log, max_iter=20)
    b = fit_log("dbn", dbn_log, max_iter=20)
    np.testing.assert_array_equal(dbn_log.docs, before[0])
    np.testing.assert_array_equal(dbn_log.clicks, before[1])
    np.testing.assert_array_equal(a.attractiveness.value, b.attractiveness.value)


def test_bad_options_and_params() -> None:
    with pytest.raises(ConfigError, match="allowed: gctr"):
        fit_log("nosuch", TINY)
    with pytest.raises(ConfigError, match="closed form"):
        fit_log("cm", TINY, max_iter=3)
    with pytest.raises(ConfigError, match="closed form only"):
        fit_log("cm", TINY, method="em")
    with pytest.raises(ConfigError, match="no closed form"):
        fit_log("pbm", TINY, method="closed_form")
    with pytest.raises(ConfigError, match="^method: must be one of closed_form, em; got 'mle'$"):
        fit_log("dcm", TINY, method="mle")
    with pytest.raises(InputError, match="max_iter"):
        EMOptions(max_iter=0)
    good = fit_log("pbm", TINY, max_iter=2).to_dict()
    good["params"]["examination"] = [0.5, 1.5, 0.2]
    with pytest.raises(InputError, match="params.examination: values must be probabilities"):
        fit_from_dict(good)
    good["params"].pop("examination")
    with pytest.raises(InputError, match="params.examination: missing"):
        fit_from_dict(good)
    with pytest.raises(InputError, match="unknown 'xyz'"):
        fit_from_dict({"model": "xyz"})


def test_unseen_pairs_get_the_weighted_default() -> None:
    fit = fit_log("dctr", TINY, pseudo=0.0)
    assert fit.attractiveness.default == pytest.approx(4 / 12)  # impression-weighted mean
    other = from_arrays([0, 1], [[0, 3], [0, 1]], [[0, 0], [0, 0]], query_vocab=["0", "q9"],
                        doc_vocab=["a", "b", "c", "z"])
    got = fit.attractiveness.for_log(other)
    np.testing.assert_allclose(got, [[1 / 4, 4 / 12], [4 / 12, 4 / 12]])
    np.testing.assert_allclose(fit.attractiveness.lookup(np.array(["0"]), np.array([["b", "zz"]])), [[2 / 4, 4 / 12]])


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_fits_become_clickmodels_with_the_same_probabilities(name: str, dbn_log: ClickLog) -> None:
    """fit.to_model() builds the registered clickmodels class; its own implementation
    (clickmodels/<model>.py, over clickmodels.kernels) gives the fit record's probabilities
    to the bit (the record delegates to the same kernels) and its log-likelihood."""
    import clickmodels
    from clickmodels.estimation import fit

    rec = fit_log(name, dbn_log, **({"max_iter": 30} if name in ("pbm", "ubm", "dbn", "ccm") else {}))
    model = rec.to_model(dbn_log.query_vocab, dbn_log.doc_vocab)
    assert type(model) is clickmodels.model_class(name)
    imp = clickmodels.Impressions(query=dbn_log.query, docs=dbn_log.docs)
    # the record delegates to the same kernels as the model class: identical numbers
    np.testing.assert_array_equal(model.click_probabilities(imp), rec.click_probs(dbn_log))
    np.testing.assert_array_equal(
        model.conditional_click_probabilities(imp, dbn_log.clicks), rec.conditional_click_probs(dbn_log)
    )
    ll = model.log_likelihood(imp, dbn_log.clicks)
    finite = np.isfinite(ll)
    # the fit clips probabilities to [1e-10, 1 - 1e-10]: at most 1e-10 per slot
    np.testing.assert_allclose(ll[finite], rec.log_likelihood(dbn_log)[finite], atol=dbn_log.depth * 1e-10)
    # ClickModel.fit: a new model of the same class, the original untouched
    again = model.fit(dbn_log, **({"max_iter": 30} if name in ("pbm", "ubm", "dbn", "ccm") else {}))
    assert type(again) is type(model) and again is not model
    np.testing.assert_allclose(again.click_probabilities(imp), model.click_probabilities(imp), rtol=1e-12)
    if name == "gctr":
        rnd = fit(clickmodels.build({"name": "random", "p": 0.5}), dbn_log)
        assert type(rnd).__name__ == "RandomClicks" and rnd.p == pytest.approx(rec.p)


def test_load_model_with_integer_ids(dbn_log: ClickLog, tmp_path: Path) -> None:
    from clickmodels import Impressions
    from clickmodels.estimation import load_model

    rec = fit_log("ubm", dbn_log, max_iter=10)
    rec.save(tmp_path / "u.json")
    model = load_model(tmp_path / "u.json")  # ids "0".."3" parse as integers
    # doc vocab of dbn_log is "0".."3" with codes equal to the ids, query "0"
    imp = Impressions(query=dbn_log.query, docs=dbn_log.docs)
    np.testing.assert_allclose(model.click_probabilities(imp), rec.click_probs(dbn_log), rtol=1e-12)
    named = from_arrays([0], [[0, 1]], [[0, 0]], doc_vocab=["a", "b"])
    fit_log("dctr", named).save(tmp_path / "d.json")
    with pytest.raises(InputError, match="not an integer"):
        load_model(tmp_path / "d.json")


def _naive_em(log: ClickLog, model: str, iters: int) -> tuple[dict, dict]:
    """Reference: per-session, per-slot Python EM for PBM/UBM (Beta(1, 1) pseudo-counts)."""
    alpha: dict = {}
    gamma: dict = {}
    for _ in range(iters):
        an, ad, gn, gd = {}, {}, {}, {}
        for i in range(log.n_sessions):
            q, prev = int(log.query[i]), 0
            for r in range(log.depth):
                d = int(log.docs[i, r])
                if d < 0:
                    break
                key = (r, prev if model == "ubm" else 0)
                a, g = alpha.get((q, d), 0.5), gamma.get(key, 0.5)
                if log.clicks[i, r]:
                    pa = pe = 1.0
                    prev = r + 1
                else:
                    pa, pe = a * (1 - g) / (1 - a * g), g * (1 - a) / (1 - a * g)
                an[(q, d)] = an.get((q, d), 0.0) + pa
                ad[(q, d)] = ad.get((q, d), 0.0) + 1
                gn[key] = gn.get(key, 0.0) + pe
                gd[key] = gd.get(key, 0.0) + 1
        alpha = {k: (an[k] + 1) / (ad[k] + 2) for k in ad}
        gamma = {k: (gn[k] + 1) / (gd[k] + 2) for k in gd}
    return alpha, gamma


@pytest.mark.parametrize("model", ["pbm", "ubm"])
def test_vectorised_em_equals_per_session_reference(model: str) -> None:
    rng = np.random.default_rng(8)
    n = 300
    docs = np.argsort(rng.random((n, 5)), axis=1)[:, :4]
    docs[rng.random(n) < 0.2, 3] = -1  # some shorter lists
    query = rng.integers(0, 2, n)
    clicks = (rng.random(docs.shape) < 0.3) & (docs >= 0)
    log = from_arrays(query, docs, clicks)
    fitted = fit_log(model, log, max_iter=7, tol=0.0, accelerate=False)  # the reference's plain EM iterations
    alpha, gamma = _naive_em(log, model, 7)
    t = fitted.attractiveness
    for q, d, v in zip(t.query, t.doc, t.value):
        assert v == pytest.approx(alpha[(int(q), int(d))], rel=1e-12)
    for (r, j), g in gamma.items():
        got = fitted.examination[r] if model == "pbm" else fitted.examination[r, j]
        assert got == pytest.approx(g, rel=1e-12)


def test_fits_pickle_and_log_gives_impressions(dbn_log: ClickLog) -> None:
    import pickle

    rec = fit_log("dbn", dbn_log, max_iter=5)
    back = pickle.loads(pickle.dumps(rec))
    np.testing.assert_array_equal(back.click_probs(dbn_log), rec.click_probs(dbn_log))
    imp = dbn_log.impressions()
    np.testing.assert_array_equal(imp.docs, dbn_log.docs)
    np.testing.assert_array_equal(imp.query, dbn_log.query)


def test_build_fitted_from_params_file(dbn_log: ClickLog, tmp_path: Path) -> None:
    from clickmodels.estimation import build_fitted

    path = tmp_path / "dbn.json"
    fit_log("dbn", dbn_log, max_iter=10).save(path)
    model = build_fitted({"name": "dbn", "params_file": str(path)})
    assert type(model).__name__ == "DBN"
    np.testing.assert_allclose(
        model.click_probabilities(dbn_log.impressions()), load_fit(path).click_probs(dbn_log), rtol=1e-12
    )
    with pytest.raises(ConfigError, match="^name: 'ubm' does not match"):
        build_fitted({"name": "ubm", "params_file": str(path)})
    with pytest.raises(ConfigError, match="^params_file: .*missing.json"):
        build_fitted({"name": "dbn", "params_file": str(tmp_path / "missing.json")})
    with pytest.raises(ConfigError, match="^gamma: not allowed"):
        build_fitted({"name": "dbn", "params_file": str(path), "gamma": 0.5})
    (tmp_path / "bad.json").write_text("{\n  \"model\": \"dbn\",\n  oops\n}")
    with pytest.raises(ConfigError, match="^params_file: .*bad.json:3: invalid JSON"):
        build_fitted({"name": "dbn", "params_file": str(tmp_path / "bad.json")})


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("ubm", [0.5, 0.3], "2-d array"),
        ("ubm", [[0.5, 0.3], [0.2, 0.1]], "must be 0"),
        ("ubm", [[0.5, 0.0, 0.0], [0.2, 0.1, 0.0]], "square"),
        ("pbm", [[0.5, 0.3]], "1-d array"),
        ("pbm", [], "non-empty"),
    ],
)
def test_malformed_examination_in_a_params_file(name: str, value: list, fragment: str, tmp_path: Path) -> None:
    """Shape errors are caught when the file is read (naming file and key), not at first use,
    and reach a simulate config as ConfigError."""
    import json

    import clickmodels

    data = fit_log(name, TINY, max_iter=2).to_dict()
    data["params"]["examination"] = value
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=fragment) as info:
        load_fit(path)
    assert info.value.path == str(path) and "params.examination" in info.value.message
    for form in ({"params_file": str(path)}, {"fitted": str(path), "click": [0.2, 0.8]}):
        with pytest.raises(ConfigError, match=fragment):
            clickmodels.build({"name": name, **form})


def test_trace_records_smoothing_and_stopping_rule(tmp_path: Path) -> None:
    """A params file says how its numbers were estimated: the pseudo-count (and the EM
    stopping rule), as given or by default, and keeps them through JSON."""
    import json

    cases = {
        "rctr": ({}, 0.0, None),
        "dctr": ({"pseudo": 2.5}, 2.5, None),
        "sdbn": ({"method": "closed_form"}, 1.0, None),
        "pbm": ({"max_iter": 4, "tol": 1e-3}, EMOptions().pseudo, (1e-3, 4)),
        "dcm": ({"method": "em", "pseudo": 0.0, "max_iter": 3}, 0.0, (EMOptions().tol, 3)),
    }
    for name, (opts, pseudo, em) in cases.items():
        rec = fit_log(name, TINY, **opts)
        assert rec.trace.pseudo == pseudo, name
        assert (rec.trace.tol, rec.trace.max_iter) == (em if em else (None, None)), name
        path = tmp_path / f"{name}.json"
        rec.save(path)
        assert json.loads(path.read_text())["fit"]["pseudo"] == pseudo
        assert load_fit(path).trace == rec.trace
    # a file written without these keys still loads; the smoothing is then unknown
    data = fit_log("rctr", TINY).to_dict()
    del data["fit"]["pseudo"]
    assert fit_from_dict(data).trace.pseudo is None


@pytest.mark.parametrize("name", ["rctr", "dcm", "pbm", "ubm"])
def test_a_log_deeper_than_the_fit_is_refused(name: str) -> None:
    """Per-rank parameters exist only for the training depth; a deeper log is an error
    (as for the model classes), not a silent extrapolation."""
    shallow = from_arrays([0, 0], [[0, 1], [1, 0]], [[1, 0], [0, 1]])
    deep = from_arrays([0], [[0, 1, 2]], [[0, 0, 1]])
    rec = fit_log(name, shallow, **({"max_iter": 2} if name in ("pbm", "ubm") else {}))
    for method in (rec.click_probs, rec.conditional_click_probs, rec.log_likelihood):
        with pytest.raises(InputError, match="2 ranks"):
            method(deep)
    assert rec.click_probs(from_arrays([0], [[1, -1]], [[0, 0]])).shape == (1, 2)  # shorter lists are fine
