"""Aggregated click-model fits of the model-based estimators (onlineeval.estimators.model_fit).

References, independent of the aggregation:

* the fits of :mod:`clickmodels.estimation` on the same log (the per-slot EM and closed
  forms the estimators used before), parameter by parameter;
* the estimators' former path: the model fitted by :mod:`clickmodels.estimation` and its
  predictions for every impression's lists (``aggregated`` switched off);
* brute force over impressions (Python loops) for the linearised PBM terms, the pair
  index and the unseen / rare target-pair notes.

Tolerance: both EM implementations run the same iterations in exact arithmetic; they
differ by floating-point summation order only. The iteration counts must be equal and the
log-likelihood traces within ``tol`` (1e-9) relative. SQUAREM's extrapolation
(:func:`clickmodels.estimation._em.run_em`) carries those last-bit differences far along a
flat likelihood (PBM without pseudo-counts can trade attractiveness against examination):
the parameters, estimates, SEs and interval ends agree within :data:`EM_TOL` (1e-6)
relative (1e-9 absolute), not to ``tol`` (measured: up to 2.5e-7 relative, 7e-10
absolute on these logs, against SEs of 6e-4 and more); a formula error moves them by far
more. Closed forms: 1e-12.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from click_patterns import pattern_value, ubm_chance
from clickmodels.base import Impressions
from clickmodels.estimation import EMOptions, fit_log
from clickmodels.logs import from_arrays
from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators import (
    DeterministicTarget,
    LoggedData,
    Reward,
    get_estimator,
    get_reward,
)
from onlineeval.estimators.checks import check_world, sample_log
from onlineeval.estimators.dm import (
    RARE_SHOWS,
    ClickModelEstimator,
    DirectMethod,
    _pbm_correction,
)
from onlineeval.estimators.model_fit import (
    FAST_MODELS,
    aggregated_fit,
    cells,
    pair_index,
)

EM_TOL = 1e-6  # see the module docstring
CLOSED_TOL = 1e-12


def ragged_log(n: int, seed: int, n_docs: int = 12, k: int = 5, queries: int = 6, doc_scale: int = 1) -> LoggedData:
    """A log with trailing empty slots, documents shown at several ranks, PBM-like clicks
    and exact uniform propensities (every list of distinct documents equally likely)."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, queries, size=n)
    shown = np.argsort(rng.random((n, n_docs)), axis=1)[:, :k] * doc_scale
    depth = rng.integers(2, k + 1, size=n)  # some lists shorter than k
    shown = np.where(np.arange(k)[None, :] < depth[:, None], shown, -1)
    attract = rng.uniform(0.05, 0.9, size=(queries, n_docs))
    a = np.where(shown >= 0, attract[q[:, None], np.maximum(shown, 0) // doc_scale], 0.0)
    clicks = (rng.random((n, k)) < a / np.arange(1, k + 1)[None, :]) & (shown >= 0)
    prefix = np.where(shown >= 0, np.cumprod(1.0 / (n_docs - np.arange(k)))[None, :], 1.0)
    prefix = np.where(shown >= 0, prefix, prefix[np.arange(n), np.maximum(depth - 1, 0)][:, None])
    p_list = prefix[:, -1].copy()
    item = np.where(shown >= 0, 1.0 / n_docs, 1.0)
    return LoggedData(q, shown, clicks, p_list=p_list, p_prefix=prefix, p_item=item,
                      user=rng.integers(0, n // 2, size=n), source="ragged")


def ragged_target(queries: int = 6, k: int = 5, doc_scale: int = 1) -> DeterministicTarget:
    lists = np.array([[(3 * qq + j) % 12 for j in range(k)] for qq in range(queries)]) * doc_scale
    lists[1, 3:] = -1  # a short target list
    return DeterministicTarget(lists, "T")


def old_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch the aggregated fits off: clickmodels.estimation fits, per-impression predictions."""
    monkeypatch.setattr(ClickModelEstimator, "aggregated", property(lambda self: False))


def _logs() -> dict[str, LoggedData]:
    return {
        "pbm": sample_log(check_world("pbm"), 3000, np.random.default_rng(5)),
        "dcm": sample_log(check_world("dcm"), 3000, np.random.default_rng(6), users=False),
        "ragged": ragged_log(3000, 7),
    }


LOGS = _logs()


# ------------------------------------------------------------------------------ the fits
@pytest.mark.parametrize("log_name", ["pbm", "ragged"])
@pytest.mark.parametrize("name", FAST_MODELS)
@pytest.mark.parametrize("pseudo", [0.0, 1.0])
def test_aggregated_fit_equals_the_clickmodels_fit(log_name, name, pseudo):
    data = LOGS[log_name]
    ours = aggregated_fit(data, name, pseudo=pseudo)
    log = from_arrays(data.query, data.shown, data.clicks)
    # the aggregated dcm fit is the last-click closed form, no longer fit_log's default (EM, review 15 F5)
    ref = fit_log(name, log, pseudo=pseudo, **({"method": "closed_form"} if name == "dcm" else {}))
    em = name in ("pbm", "ubm")
    tol = EM_TOL if em else CLOSED_TOL
    if em:  # the same iterations and log-likelihoods
        assert ours.trace.iterations == ref.trace.iterations
        np.testing.assert_allclose(ours.trace.log_likelihood, ref.trace.log_likelihood, rtol=EMOptions().tol)
    mdl = ours.model
    assert type(mdl) is type(ref.to_model(log.query_vocab, log.doc_vocab))
    if ours.attraction is not None:
        table = ref.attractiveness
        got = dict(zip(zip(ours.query.tolist(), ours.doc.tolist()), ours.attraction.tolist()))
        want = dict(zip(zip(table.query.astype(int).tolist(), table.doc.astype(int).tolist()), table.value.tolist()))
        assert got.keys() == want.keys()
        np.testing.assert_allclose([got[key] for key in want], list(want.values()), rtol=tol, atol=tol)
        assert ours.default == pytest.approx(table.default, rel=tol, abs=tol)
    for key, value in ours.params.items():
        np.testing.assert_allclose(value, getattr(ref, key), rtol=tol, atol=tol)


def test_dense_and_listed_cells_give_the_same_pbm_fit():
    # few shows per (pair, rank): less than half of the (pair, rank) grid is filled, so EM
    # runs over the listed cells; the filled check-world log runs on the dense grid
    sparse = ragged_log(120, 8, n_docs=60, k=5, queries=3)
    assert cells(sparse).grid is None and cells(LOGS["pbm"]).grid is not None
    for data in (sparse, LOGS["pbm"]):
        ours = aggregated_fit(data, "pbm", pseudo=0.0)
        ref = fit_log("pbm", from_arrays(data.query, data.shown, data.clicks), pseudo=0.0)
        assert ours.trace.iterations == ref.trace.iterations
        np.testing.assert_allclose(ours.params["examination"], ref.examination, rtol=EM_TOL)


def test_pair_index_against_counting_and_both_code_paths():
    for scale in (1, 2**27):  # compact ids: lookup table; ids up to 2**31: one sort of the keys
        data = ragged_log(500, 9, doc_scale=scale)
        idx = pair_index(data)
        counts = Counter((int(q), int(d)) for q, row in zip(data.query, data.shown) for d in row if d >= 0)
        assert idx.n_pairs == len(counts)
        for i in range(data.n):
            for j in range(data.k):
                d = int(data.shown[i, j])
                c = int(idx.code[i, j])
                assert (c == -1) if d < 0 else (int(idx.query[c]), int(idx.doc[c])) == (int(data.query[i]), d)
        assert {(int(q), int(d)): int(s) for q, d, s in zip(idx.query, idx.doc, idx.shows)} == dict(counts)
        assert list(zip(idx.query.tolist(), idx.doc.tolist())) == sorted(counts)


# ------------------------------------------------------------------------------ estimates
CASES = [
    ("dm", {}, "clicks_per_query"),
    ("dm", {}, "reciprocal_rank"),
    ("dm", {"model": "cm"}, "reciprocal_rank"),
    ("dm", {"model": "ubm"}, "clicks_per_query"),
    ("dm", {"pseudo": 1.0}, "clicks_per_query"),
    ("dm", {"folds": 2}, "clicks_per_query"),
    ("dr", {}, "clicks_per_query"),
    ("dr", {"model": "rctr", "folds": 2}, "clicks_per_query"),
    ("dr_list", {"model": "dcm", "method": "closed_form"}, "reciprocal_rank"),  # the aggregated dcm fit
    ("dr_list", {"model": "gctr"}, "clicks_per_query"),
    ("dr_list", {"folds": 3}, "clicks_per_query"),
    ("cascade_dr", {"model": "cm"}, "abandonment"),
    ("cascade_dr", {"model": "dcm", "folds": 2, "method": "closed_form"}, "clicks_per_query"),
    ("cascade_dr", {"model": "dctr"}, "reciprocal_rank"),
]


def _targets(log_name: str) -> list:
    return [ragged_target()] if log_name == "ragged" else list(check_world(log_name).targets[:2])


@pytest.mark.parametrize("case", range(len(CASES)))
def test_estimates_equal_the_former_path(case, monkeypatch):
    name, opts, reward = CASES[case]
    new, old = [], []
    for log_name, data in LOGS.items():
        for target in _targets(log_name):
            new.append(get_estimator(name, **opts).estimate(data, target, reward))
    with monkeypatch.context() as mp:
        old_path(mp)
        for log_name, data in LOGS.items():
            fresh = data.take(np.arange(data.n))  # no cached fits
            for target in _targets(log_name):
                old.append(get_estimator(name, **opts).estimate(fresh, target, reward))
    for a, b in zip(new, old):
        for field in ("value", "se", "ci_low", "ci_high"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=EM_TOL, abs=EM_TOL * 1e-3), field
        assert a.diagnostics.notes.keys() == b.diagnostics.notes.keys()
        for key, value in a.diagnostics.notes.items():
            other = b.diagnostics.notes[key]
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(other), key
            elif isinstance(value, float):
                assert value == pytest.approx(other, rel=EM_TOL, abs=EM_TOL * 1e-3), key
            else:
                assert value == other, key


def _brute_value(mdl, data: LoggedData, target: DeterministicTarget, reward: Reward, gamma: np.ndarray,
                 alpha: dict[tuple[int, int], float]) -> float:
    """The model's value of the target's lists by enumerating every click pattern of each impression's list: a
    slot clicked with probability ``gamma[s, j] alpha_qd`` given its state ``j`` (0: no click above, else 1 + the
    previous click's rank; a PBM's ``gamma`` has one state), ``alpha`` for the log's pairs, the model's default
    for the others; every click weighted (additive) or the first (first click)."""
    from clickmodels.base import Impressions

    k = data.k
    total = 0.0
    for q, n_q in Counter(int(q) for q in data.query).items():
        a = []
        for d in target.lists[q][:k]:
            d = int(d)
            if (q, d) not in alpha:
                alpha[(q, d)] = float(mdl.attractiveness.lookup(Impressions(query=np.array([q]),
                                                                            docs=np.array([[d]])))[0, 0])
            a.append(alpha[(q, d)])
        total += n_q * pattern_value(k, reward, ubm_chance(a, gamma))
    return total / data.n


def dense_correction(mdl, data: LoggedData, target: DeterministicTarget, reward: Reward) -> np.ndarray:
    """The linearised PBM / UBM terms by brute force: every examination parameter (a PBM's per rank, a UBM's per
    rank and previous click) and every (query, document) pair's relevance a parameter, the expected information of
    the log's clicks ``sum grad p grad p^T / (p (1 - p))`` built position by position, the models' scale fixed by
    holding rank 0's examination (the information is singular along the scale), the value's gradient by central
    finite differences of :func:`_brute_value`; impression ``i``'s term ``n grad V^T A^-1 s_i``, centred. Pairs
    never clicked or clicked surely (fitted chance within 1e-9 of 1) are held fixed (left out), the rule of the code
    under test.
    """
    from clickmodels.base import Impressions

    k = data.k
    gamma = np.asarray(mdl.examination, dtype=np.float64)
    gamma = gamma[:k, :k].copy() if gamma.ndim == 2 else gamma[:k, None].copy()
    a_all = mdl.attractiveness.lookup(Impressions(query=data.query, docs=np.maximum(data.shown, 0)))
    alpha: dict[tuple[int, int], float] = {}
    positions = []  # (row, pair, examination parameter, click)
    for i in range(data.n):
        state = 0
        for j, d in enumerate(data.shown[i]):
            if d < 0:
                continue
            key = (int(data.query[i]), int(d))
            alpha[key] = float(a_all[i, j])
            e = (j, state if gamma.shape[1] > 1 else 0)
            positions.append((i, key, e, float(data.clicks[i, j])))
            state = j + 1 if data.clicks[i, j] else state
    max_p: dict[tuple[int, int], float] = defaultdict(float)
    for _, key, e, _ in positions:
        max_p[key] = max(max_p[key], gamma[e] * alpha[key])
    free = sorted(key for key, a in alpha.items() if a > 0 and max_p[key] < 1 - 1e-9)
    exams = sorted({e for _, _, e, _ in positions})
    col = {("a", key): c for c, key in enumerate(free)}
    col.update({("g", e): len(free) + c for c, e in enumerate(exams)})
    n_par = len(col)
    info = np.zeros((n_par, n_par))
    score = np.zeros((data.n, n_par))
    for i, key, e, c in positions:
        if ("a", key) not in col:
            continue
        p = gamma[e] * alpha[key]
        grad = np.zeros(n_par)
        grad[col[("g", e)]], grad[col[("a", key)]] = alpha[key], gamma[e]
        info += np.outer(grad, grad) / (p * (1 - p))
        score[i] += grad * (c - p) / (p * (1 - p))
    g = np.zeros(n_par)
    h = 1e-6
    for (kind, what), c in col.items():
        up_g, down_g, up_a, down_a = gamma.copy(), gamma.copy(), dict(alpha), dict(alpha)
        if kind == "g":
            up_g[what] += h
            down_g[what] -= h
        else:
            up_a[what] += h
            down_a[what] -= h
        g[c] = (_brute_value(mdl, data, target, reward, up_g, up_a)
                - _brute_value(mdl, data, target, reward, down_g, down_a)) / (2 * h)
    # the scale: rank 0's examination (without a click above) held at its fit, as the code normalises (the value is
    # scale-free only while no pair it uses is held fixed: a pair clicked surely at rank 0 is not)
    keep = np.array([c for key, c in col.items() if key != ("g", (0, 0))])
    want = data.n * score[:, keep] @ np.linalg.solve(info[np.ix_(keep, keep)], g[keep])
    return want - want.mean()


@pytest.mark.parametrize("model", ["pbm", "ubm"])
@pytest.mark.parametrize("log_name", ["pbm", "ragged"])
def test_linearised_pbm_terms_against_the_dense_information(log_name, model):
    # the relevances' and the examination's error together (before 2026-12-06 a PBM's examination was held fixed:
    # those terms were up to 3.1 and 5.9 off here, the bound is 1e-6 of the largest term: the finite differences;
    # a UBM had no terms at all)
    data = LOGS[log_name].take(np.arange(1500))
    target = _targets(log_name)[0]
    mdl = DirectMethod(model=model).fit_model(data)
    for rw in (get_reward("clicks_per_query", data.k),
               Reward("dcg_clicks", "additive", 1.0 / np.log2(np.arange(2, data.k + 2))),
               get_reward("reciprocal_rank", data.k)):
        got = _pbm_correction(mdl, data, target, rw)
        want = dense_correction(mdl, data, target, rw)
        np.testing.assert_allclose(got - got.mean(), want, rtol=0, atol=1e-6 * np.abs(want).max())


def test_unseen_and_rare_notes_against_counting():
    data = LOGS["ragged"]
    keep = ~((data.query == 0) & (data.shown == 3).any(axis=1))  # document 3 never shown for query 0
    data = data.take(np.flatnonzero(keep)[:700])
    target = ragged_target()
    notes = DirectMethod().terms(data, target, "clicks_per_query").notes
    shows = Counter((int(q), int(d)) for q, row in zip(data.query, data.shown) for d in row if d >= 0)
    slots = [(int(q), int(d)) for q in data.query for d in target.lists[q] if d >= 0]
    pairs = set(slots)
    assert notes["target_pairs"] == len(pairs)
    assert notes["unseen_target_pairs"] == sum(1 for p in pairs if shows[p] == 0) >= 1
    assert notes["unseen_slot_share"] == sum(shows[p] == 0 for p in slots) / len(slots)
    assert notes["rare_slot_share"] == sum(shows[p] < RARE_SHOWS for p in slots) / len(slots)


# ------------------------------------------------------------------------------ caching, errors
def test_one_fit_per_log_and_options():
    data = LOGS["pbm"].take(np.arange(2000))
    first = DirectMethod().fitted(data)
    assert get_estimator("dr").fitted(data) is first  # same model, same options: reused
    assert DirectMethod(pseudo=1.0).fitted(data) is not first
    target = check_world("pbm").targets[0]
    a = DirectMethod().estimate(data, target)
    b = DirectMethod().estimate(data.take(np.arange(data.n)), target)  # a new log object: fitted afresh
    assert a.value == b.value and a.se == b.se


def test_logs_a_click_model_cannot_be_fitted_on_are_refused():
    base = LOGS["ragged"].take(np.arange(50))
    gap = base.shown.copy()
    gap[0, :] = [1, -1, 2, 3, 4]
    with pytest.raises(InputError, match="impression 0 has an empty slot .* before document 2 at slot 3"):
        LoggedData(base.query, gap, base.clicks & (gap >= 0), p_list=base.p_list)  # the log refuses it itself
    bad = [  # the models' own check of the gap, for rows passed as checked
        (LoggedData(base.query, gap, base.clicks & (gap >= 0), p_list=base.p_list, lists_checked=True), "at the end"),
        (LoggedData(base.query - 1, base.shown, base.clicks, p_list=base.p_list), ">= 0"),
        (LoggedData(base.query, np.where(base.shown >= 0, base.shown + 2**31, -1), base.clicks,
                    p_list=base.p_list), "below 2\\*\\*31"),
    ]
    for data, match in bad:
        for model in ("cm", "pbm"):
            with pytest.raises(InputError, match=match):
                DirectMethod(model=model).fit_model(data)
    with pytest.raises(InputError, match="at the end"):
        DirectMethod(model="cm").terms(bad[0][0], ragged_target(), "clicks_per_query")


def test_fitting_options_out_of_range_are_config_errors():
    # a negative or NaN pseudo-count used to give the closed forms a silently wrong number (dm with
    # dctr on 300 impressions of the PBM check world: 1.077 with pseudo 0, 1.020 with -2, 1.5 with NaN)
    for opts in ({"model": "cm", "pseudo": -0.5}, {"model": "dctr", "pseudo": float("nan")},
                 {"pseudo": -1.0}, {"max_iter": 0}, {"max_iter": 2.5}, {"tol": float("nan")}, {"tol": -1e-3},
                 {"pseudo": True}):
        for name in ("dm", "dr_list", "cascade_dr"):
            with pytest.raises(ConfigError, match=next(iter(k for k in opts if k != "model"))):
                get_estimator(name, **opts)
    assert get_estimator("dm", model="cm", pseudo=0).pseudo == 0  # the boundary is allowed


# ------------------------------------------------------------------------------ dcm / sdbn: EM by default
def _clickmodels_fit(data: LoggedData, name: str, **opts):
    log = from_arrays(data.query, data.shown, data.clicks)
    return log, fit_log(name, log, pseudo=0.0, **opts)


@pytest.mark.parametrize("name", ["dcm", "sdbn"])
def test_dcm_and_sdbn_are_fitted_by_em_with_the_estimators_cap(name):
    # review 15 F5 follow-up: dcm used the aggregated last-click closed form by default, sdbn fit_log's EM with its
    # own 200-iteration cap; now both are clickmodels' EM (the MLE) with EM_MAX_ITER, like PBM / UBM / DBN / CCM
    from clickmodels.estimation import EM_MODELS, EM_OPTIONAL
    from onlineeval.estimators.dm import EM_BY_DEFAULT, EM_MAX_ITER, EM_OR_CLOSED_FORM

    assert EM_BY_DEFAULT == EM_MODELS | EM_OPTIONAL and EM_OR_CLOSED_FORM == EM_OPTIONAL
    data = LOGS["dcm"]
    log, ref = _clickmodels_fit(data, name, method="em", max_iter=EM_MAX_ITER)
    assert ref.trace.method == "em" and ref.trace.converged
    for est_name in ("dm", "dr_list", "cascade_dr"):
        est = get_estimator(est_name, model=name, folds=1)
        assert not est.aggregated and est.fits_by_em
        fitted = est.fitted(data.take(np.arange(data.n)))
        assert fitted.trace.method == "em" and fitted.trace.max_iter == EM_MAX_ITER
        assert fitted.trace.iterations == ref.trace.iterations
        mdl, want = fitted.model, ref.to_model(log.query_vocab, log.doc_vocab)
        imp = Impressions(query=data.query, docs=data.shown)  # the same fit: the same probabilities, to the bit
        np.testing.assert_array_equal(mdl.click_probabilities(imp), want.click_probabilities(imp))
        no_click = np.zeros(data.shown.shape, dtype=bool)
        np.testing.assert_array_equal(mdl.conditional_click_probabilities(imp, no_click),
                                      want.conditional_click_probabilities(imp, no_click))
        res = est.estimate(data, check_world("dcm").targets[0], "clicks_per_query")
        text = f"{name} fitted on the log by EM (maximum likelihood; max_iter {EM_MAX_ITER}, tol 1e-09)"
        assert res.assumption.endswith("; reward model: " + text) and res.diagnostics.notes["fit"] == text
        assert res.diagnostics.notes["em_iterations"] == [ref.trace.iterations]
        assert res.diagnostics.notes["em_converged"] is True


def test_dcm_closed_form_only_on_request_and_said_to_be_biased():
    data = LOGS["dcm"]
    est = get_estimator("dm", model="dcm", method="closed_form")
    assert est.aggregated and not est.fits_by_em  # the aggregated closed form (equal to clickmodels', above)
    fitted = est.fitted(data)
    assert fitted.trace.method == "closed_form"
    _, ref = _clickmodels_fit(data, "dcm", method="closed_form")
    np.testing.assert_allclose(fitted.params["continuation"], ref.continuation, rtol=CLOSED_TOL, atol=CLOSED_TOL)
    res = est.estimate(data, check_world("dcm").targets[0], "clicks_per_query")
    for text in (res.assumption, res.diagnostics.notes["fit"]):
        assert "last-click closed form" in text and "biased" in text and "not the maximum likelihood" in text
    # EM options with the closed form are refused (clickmodels' message, under the estimator's key)
    with pytest.raises(ConfigError, match="no EM options"):
        get_estimator("dm", model="sdbn", method="closed_form", max_iter=50).fitted(data)
    # max_iter / tol without a method: EM (the default, no longer a silent switch) with that cap, said so
    capped = get_estimator("dm", model="dcm", max_iter=3)
    assert capped.fits_by_em and not capped.aggregated
    res = capped.estimate(data, check_world("dcm").targets[0], "clicks_per_query")
    assert res.diagnostics.notes["em_iterations"] == [3] and "max_iter 3," in res.assumption
    assert any("EM stopped at max_iter 3" in w for w in res.diagnostics.notes["warnings"])
    # cm and the CTR models: closed form, the maximum likelihood
    assert get_estimator("dm", model="cm").fit_text() == "cm fitted on the log in closed form (maximum likelihood)"
