"""Classic click models: hand-computed probabilities and likelihoods, stop semantics, specs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import clickmodels
from clickmodels import ByGrade, ByQueryDoc, Impressions
from clickmodels.cascade import cascade_preset
from onlineeval.errors import ConfigError, InputError

CLICK = [0.1, 0.3, 0.5, 0.7, 0.9]
LAB = np.array([[4, 0, 2]])  # attractiveness .9, .1, .5


def test_dcm_hand_computed() -> None:
    m = clickmodels.build({"name": "dcm", "click": CLICK, "continuation": [0.6, 0.5, 0.4]})
    e2 = 0.9 * 0.6 + 0.1
    e3 = e2 * (0.1 * 0.5 + 0.9)
    np.testing.assert_allclose(m.click_probabilities(LAB)[0], [0.9, e2 * 0.1, e3 * 0.5], rtol=1e-14)
    # clicks (1, 0, 1): click .9, continue .6, skip .9, (always continue), click .5
    ll = m.log_likelihood(LAB, np.array([[1, 0, 1]]))
    np.testing.assert_allclose(ll, [np.log(0.9 * 0.6 * 0.9 * 0.5)], rtol=1e-14)


def test_dbn_and_sdbn_hand_computed() -> None:
    sat = [0.0, 0.2, 0.4, 0.6, 0.8]
    dbn = clickmodels.build({"name": "dbn", "click": CLICK, "satisfaction": sat, "gamma": 0.7})
    e2 = 0.7 * (0.9 * (1 - 0.8) + 0.1)
    e3 = e2 * 0.7 * (0.1 * (1 - 0.0) + 0.9)
    np.testing.assert_allclose(dbn.click_probabilities(LAB)[0], [0.9, e2 * 0.1, e3 * 0.5], rtol=1e-14)
    # no clicks at all: the user may have left at any point
    # P = (1-.9) * [ (1-g) + g * ( (1-.1) * [ (1-g) + g * (1 - .5) ] ) ]
    g = 0.7
    want = 0.1 * ((1 - g) + g * 0.9 * ((1 - g) + g * 0.5))
    np.testing.assert_allclose(np.exp(dbn.log_likelihood(LAB, np.zeros((1, 3)))), [want], rtol=1e-13)
    sdbn = clickmodels.build({"name": "sdbn", "click": CLICK, "satisfaction": sat})
    e2 = 0.9 * 0.2 + 0.1
    np.testing.assert_allclose(sdbn.click_probabilities(LAB)[0], [0.9, e2 * 0.1, e2 * 0.5], rtol=1e-14)


def test_ccm_hand_computed() -> None:
    m = clickmodels.build({"name": "ccm", "click": CLICK, "tau1": 0.8, "tau2": 0.6, "tau3": 0.2})
    c1 = 0.6 * (1 - 0.9) + 0.2 * 0.9
    e2 = 0.9 * c1 + 0.1 * 0.8
    c1b = 0.6 * (1 - 0.1) + 0.2 * 0.1
    e3 = e2 * (0.1 * c1b + 0.9 * 0.8)
    np.testing.assert_allclose(m.click_probabilities(LAB)[0], [0.9, e2 * 0.1, e3 * 0.5], rtol=1e-14)


def test_ubm_hand_computed() -> None:
    gamma = [[0.9], [0.5, 0.8], [0.3, 0.4, 0.7]]
    m = clickmodels.build({"name": "ubm", "click": CLICK, "examination": gamma})
    # rank 2: clicked at 1 (.9*.9) -> gamma[1][1] = .8; not (1-.81) -> gamma[1][0] = .5
    p1 = 0.9 * 0.9
    e2 = p1 * 0.8 + (1 - p1) * 0.5
    # rank 3: last click at 2 (any), at 1 only, or none
    p_c2_given_c1 = 0.8 * 0.1
    p_c2_given_none = 0.5 * 0.1
    last2 = p1 * p_c2_given_c1 + (1 - p1) * p_c2_given_none
    last1 = p1 * (1 - p_c2_given_c1)
    none = (1 - p1) * (1 - p_c2_given_none)
    e3 = last2 * 0.7 + last1 * 0.4 + none * 0.3
    np.testing.assert_allclose(m.examination_probabilities(LAB)[0], [0.9, e2, e3], rtol=1e-14)
    np.testing.assert_allclose(m.click_probabilities(LAB)[0], [p1, e2 * 0.1, e3 * 0.5], rtol=1e-14)
    ll = m.log_likelihood(LAB, np.array([[1, 0, 1]]))
    np.testing.assert_allclose(ll, [np.log(p1 * (1 - 0.8 * 0.1) * 0.4 * 0.5)], rtol=1e-14)


def test_pbm_and_baselines_hand_computed() -> None:
    pbm = clickmodels.build({"name": "pbm", "examination": [1.0, 0.5, 0.25], "click": CLICK})
    ll = pbm.log_likelihood(LAB, np.array([[1, 0, 0]]))
    np.testing.assert_allclose(ll, [np.log(0.9 * (1 - 0.05) * (1 - 0.125))], rtol=1e-14)
    rnd = clickmodels.build({"name": "random"})
    np.testing.assert_allclose(rnd.click_probabilities(np.array([[0, 3, -1]])), [[0.5, 0.5, 0.0]])
    rctr = clickmodels.build({"name": "rctr", "p": [0.4, 0.2, 0.1]})
    np.testing.assert_allclose(rctr.click_probabilities(LAB), [[0.4, 0.2, 0.1]])
    dctr = clickmodels.build({"name": "dctr", "click": CLICK})
    np.testing.assert_allclose(dctr.click_probabilities(LAB), [[0.9, 0.1, 0.5]])
    np.testing.assert_allclose(dctr.examination_probabilities(np.array([[1, -1]])), [[1.0, 0.0]])


def _enumerated_clicks_per_impression(labels: list[int], click: tuple, stop: tuple, mode: str) -> float:
    """Expected clicks by enumerating every (click, stop) path of the cascade user."""
    total = 0.0
    k = len(labels)
    for clicks in itertools.product((0, 1), repeat=k):
        for stops in itertools.product((0, 1), repeat=k):
            p, alive = 1.0, True
            for r, g in enumerate(labels):
                if not alive:
                    if clicks[r] or stops[r]:
                        p = 0.0
                    continue
                c, s = clicks[r], stops[r]
                p *= click[g] if c else 1 - click[g]
                can_stop = c or mode == "every_rank"
                if can_stop:
                    p *= stop[g] if s else 1 - stop[g]
                elif s:
                    p = 0.0
                alive = not s
            total += p * sum(clicks)
    return total


@pytest.mark.parametrize("preset", ["navigational", "informational", "almost_random"])
def test_stop_semantics_exact_clicks_per_impression(preset: str) -> None:
    click, stop = cascade_preset(preset, 5)
    labels = [0, 2, 1, 4, 0, 3]
    after = clickmodels.build({"name": "cascade", "preset": preset})
    every = clickmodels.build({"name": "cascade", "preset": preset, "stop_mode": "every_rank"})
    a = after.click_probabilities(np.array([labels])).sum()
    e = every.click_probabilities(np.array([labels])).sum()
    assert a == pytest.approx(_enumerated_clicks_per_impression(labels, click, stop, "after_click"), rel=1e-12)
    assert e == pytest.approx(_enumerated_clicks_per_impression(labels, click, stop, "every_rank"), rel=1e-12)
    # stopping at every examined rank always yields fewer clicks (when stop > 0 for a skipped grade)
    assert e < a


def test_stop_semantics_changes_clicks_per_impression_substantially() -> None:
    # top-10 lists from a web-like grade distribution: the semantics alone roughly halve CTR
    rng = np.random.default_rng(0)
    labels = rng.choice(5, size=(20000, 10), p=[0.5, 0.25, 0.15, 0.07, 0.03])
    after = clickmodels.build({"name": "cascade", "preset": "navigational"})
    every = clickmodels.build({"name": "cascade", "preset": "navigational", "stop_mode": "every_rank"})
    a = after.click_probabilities(labels).sum(axis=1).mean()
    e = every.click_probabilities(labels).sum(axis=1).mean()
    assert a > 1.4 and e < 0.8  # exact values 1.49 and 0.76 for this draw
    # Monte Carlo confirms both exact values
    for model, exact in ((after, a), (every, e)):
        out = model.sample(np.tile(labels, (5, 1)), np.random.default_rng(1)).clicks.sum(axis=1)
        assert abs(out.mean() - exact) <= 4 * out.std(ddof=1) / np.sqrt(out.size)


def test_conditional_probabilities_define_the_likelihood() -> None:
    m = clickmodels.model_class("dbn").example()
    labels = np.random.default_rng(2).integers(0, 5, size=(50, 8))
    clicks = m.sample(labels, np.random.default_rng(3)).clicks
    cond = m.conditional_click_probabilities(labels, clicks)
    np.testing.assert_allclose(m.log_likelihood(labels, clicks), np.log(np.where(clicks, cond, 1 - cond)).sum(axis=1))
    # before any click, the conditional equals the marginal at rank 1
    np.testing.assert_allclose(cond[:, 0], m.click_probabilities(labels)[:, 0])


def test_query_document_parameters_lookup() -> None:
    alpha = ByQueryDoc(np.array([0, 0, 1]), np.array([10, 11, 10]), np.array([0.2, 0.4, 0.6]), default=0.05)
    m = clickmodels.PBM(np.array([1.0, 0.5, 0.5]), alpha)
    imp = Impressions(query=np.array([0, 1]), docs=np.array([[10, 11, 12], [10, 11, -1]]))
    np.testing.assert_allclose(m.click_probabilities(imp), [[0.2, 0.2, 0.025], [0.6, 0.025, 0.0]])
    with pytest.raises(InputError, match="query and docs"):
        m.click_probabilities(np.array([[0, 1, 2]]))
    with pytest.raises(ValueError, match="twice"):
        ByQueryDoc(np.array([0, 0]), np.array([1, 1]), np.array([0.1, 0.2]))


def test_fit_returns_new_model_of_same_class() -> None:
    from clickmodels.logs import from_arrays

    rng = np.random.default_rng(4)
    n, k = 20000, 5
    query = rng.integers(0, 3, size=n)
    docs = np.stack([rng.permutation(8)[:k] for _ in range(3)])[query]
    true = ByQueryDoc(np.repeat(np.arange(3), 8), np.tile(np.arange(8), 3), rng.uniform(0.1, 0.9, 24), default=0.5)
    model = clickmodels.DocumentCTR(true)
    clicks = model.sample(Impressions(query=query, docs=docs), rng).clicks
    log = from_arrays(query, docs, clicks)
    before = model.attractiveness.values.copy()
    fitted = model.fit(log)
    assert type(fitted) is type(model) and fitted is not model
    np.testing.assert_array_equal(model.attractiveness.values, before)
    # the fitted per-(query, doc) CTRs are the generating ones within 4 binomial SEs: each query's 5 documents are
    # shown at every impression of the query, so a CTR is a proportion over that query's impressions
    # (SE sqrt(p (1 - p) / n_q) <= 0.0061 here; the 15 cells' largest |z| exceeds 4 with probability < 1e-3)
    imp = Impressions(query=np.arange(3), docs=docs[[np.flatnonzero(query == q)[0] for q in range(3)]])
    got = fitted.click_probabilities(imp)
    want = model.click_probabilities(imp)
    n_q = np.bincount(query, minlength=3)[:, None]
    z = (got - want) / np.sqrt(want * (1 - want) / n_q)
    assert np.abs(z).max() < 4, z


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"name": "dcm", "click": CLICK}, ("continuation",)),
        ({"name": "dbn", "click": CLICK, "satisfaction": CLICK}, ("gamma",)),
        ({"name": "dbn", "click": CLICK, "satisfaction": [0.1], "gamma": 0.5}, ("satisfaction",)),
        ({"name": "ccm", "click": CLICK, "tau1": 0.5, "tau2": 2, "tau3": 0.1}, ("tau2",)),
        ({"name": "ubm", "click": CLICK, "examination": [[0.9], [0.5]]}, ("examination", 1)),
        ({"name": "ubm", "click": CLICK, "examination": [[0.9], [0.5, 1.5]]}, ("examination", 1, 1)),
        ({"name": "ubm", "click": CLICK}, ("examination",)),
        ({"name": "rctr", "p": []}, ("p",)),
        ({"name": "random", "p": -0.1}, ("p",)),
        ({"name": "gctr"}, ("p",)),
        ({"name": "metric", "metric": "AP", "click": CLICK}, ("metric",)),
        ({"name": "metric", "metric": "nope@3", "click": CLICK}, ("metric",)),
    ],
)
def test_bad_specs(spec: dict, path: tuple) -> None:
    with pytest.raises(ConfigError) as info:
        clickmodels.build(spec)
    assert info.value.key_path == path


def test_depth_errors() -> None:
    m = clickmodels.build({"name": "dcm", "click": CLICK, "continuation": [0.5, 0.5]})
    with pytest.raises(InputError, match="dcm.continuation covers only 2 ranks"):
        m.click_probabilities(np.zeros((1, 3), dtype=int))
    u = clickmodels.build({"name": "ubm", "click": CLICK, "examination": [[0.9], [0.5, 0.6]]})
    with pytest.raises(InputError, match="ubm.examination covers only 2 ranks"):
        u.click_probabilities(np.zeros((1, 3), dtype=int))
    p = clickmodels.build({"name": "pbm", "preset": "ai2018"})
    with pytest.raises(InputError, match="covers only 10 ranks"):
        p.sample(np.zeros((1, 11), dtype=int), np.random.default_rng(0))


def test_models_are_immutable_values() -> None:
    m = clickmodels.build({"name": "pbm", "preset": "ai2018"})
    with pytest.raises(ValueError):
        m.examination[0] = 0.0
    with pytest.raises(AttributeError):
        m.attractiveness = ByGrade((0.5,))  # type: ignore[misc]


def test_fitted_parameters_file_as_simulation_user(tmp_path) -> None:
    from clickmodels.estimation import fit_log
    from clickmodels.logs import from_arrays

    rng = np.random.default_rng(6)
    n, k = 20000, 4
    query = rng.integers(0, 4, size=n)
    docs = np.stack([rng.permutation(9)[:k] for _ in range(4)])[query]
    true = clickmodels.build({"name": "dcm", "click": [0.2, 0.8], "continuation": [0.5, 0.6, 0.7, 0.8]})
    clicks = true.sample(docs % 2, rng).clicks
    fit = fit_log("dcm", from_arrays(query, docs, clicks))
    path = tmp_path / "dcm.json"
    fit.save(path)
    model = clickmodels.build({"name": "dcm", "fitted": str(path), "click": [0.2, 0.8]})
    assert isinstance(model, clickmodels.DCM)
    np.testing.assert_array_equal(model.continuation, fit.continuation)
    with pytest.raises(ConfigError) as info:
        clickmodels.build({"name": "dcm", "fitted": str(path)})
    assert info.value.key_path == ("click",)
    with pytest.raises(ConfigError) as info:
        clickmodels.build({"name": "pbm", "fitted": str(path), "click": [0.2, 0.8]})
    assert info.value.key_path == ("name",)
    with pytest.raises(ConfigError) as info:
        clickmodels.build({"name": "dcm", "fitted": str(tmp_path / "missing.json"), "click": [0.2, 0.8]})
    assert info.value.key_path == ("fitted",)
    with pytest.raises(ConfigError) as info:
        clickmodels.build({"name": "dcm", "fitted": str(path), "click": [0.2, 0.8], "stop": [0.1]})
    assert info.value.key_path == ("stop",)


def test_cascade_fit_is_sdbn_fit() -> None:
    from clickmodels.estimation import fit_log
    from clickmodels.logs import from_arrays

    rng = np.random.default_rng(8)
    query = rng.integers(0, 3, size=5000)
    docs = np.stack([rng.permutation(7)[:5] for _ in range(3)])[query]
    model = clickmodels.build({"name": "cascade", "preset": "informational"})
    clicks = model.sample(docs % 5, rng).clicks
    log = from_arrays(query, docs, clicks)
    fitted = model.fit(log)
    assert isinstance(fitted, clickmodels.Cascade) and fitted.stop_mode == "after_click"
    sdbn = fit_log("sdbn", log).to_model(log.query_vocab, log.doc_vocab)
    imp = Impressions(query=query[:50], docs=docs[:50])
    np.testing.assert_array_equal(fitted.click_probabilities(imp), sdbn.click_probabilities(imp))
    with pytest.raises(ConfigError):
        clickmodels.build({"name": "cascade", "preset": "informational", "stop_mode": "every_rank"}).fit(log)


def test_parameters_stay_read_only_after_pickling() -> None:
    import pickle

    pbm = pickle.loads(pickle.dumps(clickmodels.build({"name": "pbm", "preset": "ai2018"})))
    with pytest.raises(ValueError):
        pbm.examination[0] = 0.0
    table = ByQueryDoc(np.array([0]), np.array([1]), np.array([0.5]))
    copy = pickle.loads(pickle.dumps(table))
    with pytest.raises(ValueError):
        copy.values[0] = 0.1
    assert copy.lookup(Impressions(query=np.array([0]), docs=np.array([[1, 2]])))[0, 0] == 0.5


@pytest.mark.parametrize("name", clickmodels.available())
@pytest.mark.parametrize("shape", [(0, 5), (3, 0), (0, 0)])
def test_empty_batches(name: str, shape: tuple[int, int]) -> None:
    model = clickmodels.model_class(name).example()
    labels = np.zeros(shape, dtype=int)
    out = model.sample(labels, np.random.default_rng(0))
    assert out.clicks.shape == out.propensity.shape == out.examined.shape == shape
    assert model.click_probabilities(labels).shape == shape
    np.testing.assert_array_equal(model.log_likelihood(labels, np.zeros(shape, dtype=bool)), np.zeros(shape[0]))


def test_build_dispatches_params_file_to_the_fitted_model(tmp_path) -> None:
    from clickmodels.estimation import fit_log
    from clickmodels.logs import from_arrays

    rng = np.random.default_rng(9)
    query = rng.integers(0, 3, size=3000)
    docs = np.stack([rng.permutation(6)[:4] for _ in range(3)])[query]
    clicks = clickmodels.build({"name": "pbm", "examination": [1, 0.6, 0.4, 0.3], "click": [0.2, 0.8]}).sample(
        docs % 2, rng
    ).clicks
    fit = fit_log("pbm", from_arrays(query, docs, clicks))
    fit.save(tmp_path / "pbm.json")
    model = clickmodels.build({"name": "pbm", "params_file": str(tmp_path / "pbm.json")})
    assert isinstance(model, clickmodels.PBM) and isinstance(model.attractiveness, ByQueryDoc)
    imp = Impressions(query=query[:5], docs=docs[:5])
    assert model.click_probabilities(imp).shape == (5, 4)


@pytest.mark.parametrize("name", ["gctr", "rctr", "dctr", "cm", "dcm", "sdbn", "pbm", "ubm", "dbn", "ccm"])
def test_fitted_form_serves_the_simulator(name: str, tmp_path) -> None:
    """Every fit, saved as the CLI does and built with the ``fitted`` form, works as the
    simulator's user model: it is handed plain (n, k) int grade arrays (what simulations
    passes to sample / click_probabilities / conditional_click_probabilities) and passes
    the whole conformance suite on them; the fitted structural parameters are kept."""
    from clickmodels.checks import check_click_model
    from clickmodels.estimation import fit_log
    from clickmodels.logs import from_arrays

    rng = np.random.default_rng(12)
    n, k = 3000, 10
    query = rng.integers(0, 5, size=n)
    docs = np.stack([rng.permutation(30)[:k] for _ in range(5)])[query]
    truth = clickmodels.build({"name": "dbn", "click": [0.1, 0.4, 0.8], "satisfaction": [0.1, 0.5, 0.9], "gamma": 0.9})
    clicks = truth.sample(docs % 3, rng).clicks
    options = {"max_iter": 15} if name in ("pbm", "ubm", "dbn", "ccm") else {}
    fit = fit_log(name, from_arrays(query, docs, clicks), **options)
    path = tmp_path / f"{name}.json"
    fit.save(path)
    spec: dict = {"name": name, "fitted": str(path)}
    if "attractiveness" in fit.pair_fields:
        spec["click"] = [0.05, 0.2, 0.4, 0.7, 0.9]
    if "satisfaction" in fit.pair_fields:
        spec["satisfaction"] = [0.0, 0.1, 0.3, 0.5, 0.8]
    model = clickmodels.build(spec)
    for f in (*fit.array_fields, *fit.float_fields):
        kept = np.asarray(getattr(fit, f))
        if f in fit.scale_free:  # PBM's and UBM's examination: the largest is 1 (identified up to a factor only)
            kept = kept / kept.max()
        np.testing.assert_array_equal(getattr(model, f), kept)
    labels = rng.integers(0, 5, size=(200, k))  # int64 grades, as the simulator's shown_labels
    labels[:20, -3:] = -1
    assert model.sample(labels, np.random.default_rng(0)).clicks.shape == (200, k)
    p = model.click_probabilities(labels)
    pc = model.conditional_click_probabilities(labels, np.zeros(labels.shape, dtype=bool))
    assert p.shape == pc.shape == (200, k) and np.all(pc[:, 0] == p[:, 0])
    check_click_model(model, clickmodels.Impressions(labels=labels[:48]))


@pytest.mark.parametrize("name", ["pbm", "ubm"])
def test_fitted_examination_scale_does_not_change_the_simulated_users(name: str, tmp_path) -> None:
    """PBM's and UBM's examination is identified only up to a factor (EM reached 0.86 at rank 1 on the Yandex
    sample): two fits that differ by that factor alone are the same model of the log, and with the attractiveness
    given by grade they must simulate the same users. The fitted form used the file's scale, so the factor
    multiplied every click probability; now the largest examination is 1."""
    import dataclasses

    from clickmodels.estimation import fit_log, load_fit
    from clickmodels.logs import from_arrays

    rng = np.random.default_rng(3)
    n, k = 2000, 6
    query = rng.integers(0, 4, size=n)
    docs = np.stack([rng.permutation(20)[:k] for _ in range(4)])[query]
    truth = clickmodels.build({"name": "pbm", "examination": [0.9, 0.6, 0.4, 0.3, 0.2, 0.1],
                               "click": [0.1, 0.5, 0.9]})
    fit = fit_log(name, from_arrays(query, docs, truth.sample(docs % 3, rng).clicks), max_iter=20)
    other = dataclasses.replace(fit, examination=np.asarray(fit.examination) * 0.5)
    labels = rng.integers(0, 3, size=(50, k))
    probs = []
    for i, f in enumerate((fit, other)):
        path = tmp_path / f"{i}.json"
        f.save(path)
        assert load_fit(path).examination.max() == pytest.approx(np.asarray(f.examination).max(), rel=1e-15)
        model = clickmodels.build({"name": name, "fitted": str(path), "click": [0.1, 0.5, 0.9]})
        assert model.examination.max() == 1.0
        probs.append(model.click_probabilities(labels))
    np.testing.assert_allclose(probs[0], probs[1], rtol=1e-14, atol=0)
    # the file's relative examination is kept: the model's rank-1 click rate is the top grade's `click` value
    assert probs[0][labels[:, 0] == 2, 0] == pytest.approx(0.9 * np.asarray(fit.examination).flat[0]
                                                           / np.asarray(fit.examination).max(), rel=1e-12)


def test_params_file_model_cannot_serve_grade_labels_and_says_what_to_use(tmp_path) -> None:
    """A params_file model keeps the per-(query, document) tables of the log; the simulator
    hands over grade labels only, so it must refuse them and point to the 'fitted' form."""
    from clickmodels.estimation import fit_log
    from clickmodels.logs import from_arrays

    fit = fit_log("pbm", from_arrays([0, 0], [[0, 1], [1, 0]], [[1, 0], [0, 0]]), max_iter=3)
    fit.save(tmp_path / "pbm.json")
    model = clickmodels.build({"name": "pbm", "params_file": str(tmp_path / "pbm.json")})
    with pytest.raises(InputError, match="per \\(query, document\\).*'fitted'"):
        model.click_probabilities(np.zeros((3, 2), dtype=int))


@pytest.mark.parametrize("form", ["fitted", "params_file"])
def test_unreadable_fitted_files_are_config_errors(form: str, tmp_path) -> None:
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xf6\xff\x00")
    for bad in (tmp_path, binary, tmp_path / "missing.json"):
        spec = {"name": "pbm", form: str(bad)}
        if form == "fitted":
            spec["click"] = [0.1, 0.5]
        with pytest.raises(ConfigError) as info:
            clickmodels.build(spec)
        assert info.value.key_path == (form,) and str(bad) in info.value.message
