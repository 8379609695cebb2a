"""Milestone click models (cascade, PBM, RBP user): exact values, Monte Carlo, errors."""

from __future__ import annotations

import numpy as np
import pytest

import clickmodels
from clickmodels import ByGrade, Cascade, Impressions
from clickmodels.cascade import cascade_preset
from onlineeval.errors import ConfigError, InputError

NAV = {"name": "cascade", "preset": "navigational"}


def test_available_and_build() -> None:
    names = clickmodels.available()
    assert {"cascade", "cm", "pbm", "rbp"} <= set(names)
    assert names == sorted(names)
    m = clickmodels.build(NAV)
    assert isinstance(m, Cascade)
    assert m.attractiveness == ByGrade((0.05, 0.3, 0.5, 0.7, 0.95))
    assert m.stop == ByGrade((0.2, 0.3, 0.5, 0.7, 0.9))


@pytest.mark.parametrize(
    ("name", "click", "stop"),
    [
        ("perfect", [0.0, 0.2, 0.4, 0.8, 1.0], [0.0] * 5),
        ("navigational", [0.05, 0.3, 0.5, 0.7, 0.95], [0.2, 0.3, 0.5, 0.7, 0.9]),
        ("informational", [0.4, 0.6, 0.7, 0.8, 0.9], [0.1, 0.2, 0.3, 0.4, 0.5]),
        ("almost_random", [0.4, 0.45, 0.5, 0.55, 0.6], [0.5] * 5),
    ],
)
def test_cascade_presets_issue2_values(name: str, click: list[float], stop: list[float]) -> None:
    assert cascade_preset(name, 5) == (tuple(click), tuple(stop))
    for grades in (2, 3):
        c, s = cascade_preset(name, grades)
        assert len(c) == len(s) == grades
        assert c[0] == click[0] and c[-1] == click[-1]  # lowest and highest grade as in the 5-grade table


def test_cascade_exact_hand_computed() -> None:
    # navigational, labels (4, 0, 2): click .95 / .05 / .5, stop .9 / .2 / .5
    m = clickmodels.build(NAV)
    p = m.click_probabilities(np.array([[4, 0, 2]]))[0]
    e2 = 1 - 0.95 * 0.9
    e3 = e2 * (1 - 0.05 * 0.2)
    np.testing.assert_allclose(p, [0.95, e2 * 0.05, e3 * 0.5], rtol=1e-14)
    np.testing.assert_allclose(m.examination_probabilities(np.array([[4, 0, 2]]))[0], [1, e2, e3], rtol=1e-14)
    # every_rank: stop with probability s after every examined rank
    m2 = clickmodels.build({**NAV, "stop_mode": "every_rank"})
    q = m2.click_probabilities(np.array([[4, 0, 2]]))[0]
    np.testing.assert_allclose(q, [0.95, (1 - 0.9) * 0.05, (1 - 0.9) * (1 - 0.2) * 0.5], rtol=1e-14)


def test_cascade_log_likelihood_hand_computed() -> None:
    m = clickmodels.build(NAV)
    labels = np.array([[4, 0, 2], [4, 0, 2]])
    clicks = np.array([[True, False, True], [False, False, False]])
    ll = m.log_likelihood(labels, clicks)
    # click at 1, continue (1-.9), skip at 2 (.95), no stop after skip, click at 3
    want0 = np.log(0.95 * 0.1 * 0.95 * 0.5)
    # no clicks: skip 1 (.05), skip 2 (.95), skip 3 (.5)
    want1 = np.log(0.05 * 0.95 * 0.5)
    np.testing.assert_allclose(ll, [want0, want1], rtol=1e-13)


def test_pbm_and_rbp_exact_hand_computed() -> None:
    pbm = clickmodels.build({"name": "pbm", "examination": [0.9, 0.5, 0.2], "click": [0.1, 0.8]})
    np.testing.assert_allclose(pbm.click_probabilities(np.array([[1, 0, 1]])), [[0.9 * 0.8, 0.5 * 0.1, 0.2 * 0.8]])
    rbp = clickmodels.build({"name": "rbp", "p": 0.6, "click": [0.1, 0.8]})
    np.testing.assert_allclose(rbp.click_probabilities(np.array([[1, 0, 1]])), [[0.8, 0.6 * 0.1, 0.36 * 0.8]])
    np.testing.assert_allclose(rbp.examination_probabilities(np.array([[1, 0, -1]])), [[1, 0.6, 0.0]])


def test_pbm_preset_eta_and_noise() -> None:
    m = clickmodels.build({"name": "pbm", "preset": "ai2018", "eta": 2.0})
    exam = np.array([0.68, 0.61, 0.48, 0.34, 0.28, 0.20, 0.11, 0.10, 0.08, 0.06])
    np.testing.assert_allclose(m.examination, exam**2)
    # noise 0.1: 0.1 + 0.9 * (2^g - 1) / 15
    np.testing.assert_allclose(m.attractiveness.values, [0.1 + 0.9 * (2**g - 1) / 15 for g in range(5)])
    m3 = clickmodels.build({"name": "pbm", "preset": "ai2018", "noise": 0.0, "grades": 3})
    np.testing.assert_allclose(m3.attractiveness.values, [0.0, 1 / 3, 1.0])


def _plain_cascade(labels: np.ndarray, click: list[float], stop: list[float], rng: np.random.Generator) -> np.ndarray:
    """Independent per-impression reference implementation of the cascade user."""
    out = np.zeros(labels.shape, dtype=bool)
    for i, row in enumerate(labels):
        for r, g in enumerate(row):
            if g < 0:
                continue
            if rng.random() < click[g]:
                out[i, r] = True
                if rng.random() < stop[g]:
                    break
    return out


def test_exact_matches_independent_python_simulation() -> None:
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 5, size=(40, 10))
    reps = 500
    big = np.tile(labels, (reps, 1))
    click, stop = cascade_preset("informational", 5)
    sim = _plain_cascade(big, list(click), list(stop), rng)
    exact = clickmodels.build({"name": "cascade", "preset": "informational"}).click_probabilities(big)
    se = np.sqrt((exact * (1 - exact)).sum(axis=0)) / big.shape[0]
    assert np.all(np.abs(sim.mean(axis=0) - exact.mean(axis=0)) <= 4 * se)


SPECS = [
    *({"name": "cascade", "preset": p, "grades": g}
      for p in ("perfect", "navigational", "informational", "almost_random") for g in (2, 3, 5)),
    {"name": "cascade", "preset": "navigational", "stop_mode": "every_rank"},
    {"name": "cascade", "click": [0.05, 0.3, 0.5, 0.7, 0.95], "stop": [0.2, 0.3, 0.5, 0.7, 0.9]},
    {"name": "pbm", "examination": [0.68, 0.61, 0.48, 0.34, 0.28, 0.20, 0.11, 0.10, 0.08, 0.06],
     "click": [0.1, 0.3, 0.5, 0.7, 0.9]},
    {"name": "pbm", "preset": "ai2018", "eta": 0.5},
    {"name": "rbp", "p": 0.8, "click": [0.05, 0.3, 0.5, 0.7, 0.95]},
    {"name": "cm", "click": [0.05, 0.3, 0.5, 0.7, 0.95]},
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: "-".join(str(v) for v in s.values())[:40])
def test_exact_click_probabilities_match_monte_carlo_top10(spec: dict) -> None:
    model = clickmodels.build(spec)
    grades = model.n_grades or 5
    rng = np.random.default_rng(11)
    labels = rng.integers(0, grades, size=(200_000, 10))
    labels[:1000, 7:] = -1  # some short lists
    out = model.sample(labels, rng)
    for exact, got in ((model.click_probabilities(labels), out.clicks), (out.propensity, out.examined)):
        n = labels.shape[0]
        se = np.sqrt((exact * (1 - exact)).sum(axis=0)) / n
        assert np.all(np.abs(got.mean(axis=0) - exact.mean(axis=0)) <= 4 * se + 1e-12)
    assert not out.clicks[:1000, 7:].any()


def test_fast_path_equals_generic_path() -> None:
    rng = np.random.default_rng(3)
    labels = rng.integers(-1, 5, size=(500, 10))
    extra = [clickmodels.model_class(n).example_spec for n in ("dbn", "sdbn", "dcm", "ccm")]
    extra += [{"name": "metric", "metric": m, "click": [0.1, 0.3, 0.5, 0.7, 0.9]}
              for m in ("RBP(p=0.7)", "P@4", "nDCG@5", "INSQ(T=2)")]
    for spec in [*SPECS[-6:], *extra]:
        model = clickmodels.build(spec)
        fast = model.sample(labels, np.random.default_rng(9))
        generic = model.sample(Impressions(labels=labels, docs=np.where(labels >= 0, 0, -1)), np.random.default_rng(9))
        assert np.array_equal(fast.clicks, generic.clicks)
        assert np.array_equal(fast.examined, generic.examined)
        np.testing.assert_allclose(fast.propensity, generic.propensity, rtol=1e-12)


def test_same_seed_same_clicks_and_input_untouched() -> None:
    model = clickmodels.build(NAV)
    labels = np.random.default_rng(0).integers(0, 5, size=(100, 10)).astype(np.int8)
    copy = labels.copy()
    a = model.sample(labels, np.random.default_rng(42)).clicks
    b = model.sample(labels, np.random.default_rng(42)).clicks
    assert np.array_equal(a, b)
    assert np.array_equal(labels, copy)


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        ({"name": "cascade", "click": [0.1, 0.2, 0.3], "stop": [0.1, 0.2, 1.5]}, ("stop", 2), "[0.0, 1.0]"),
        ({"name": "cascade", "click": [0.1, 0.2, 0.3], "stop": [0.1, 0.2]}, ("stop",), "3 entries"),
        ({"name": "cascade", "preset": "nope"}, ("preset",), "navigational"),
        ({"name": "cascade", "preset": "perfect", "grades": 4}, ("grades",), "5, 3, 2"),
        ({"name": "cascade", "preset": "perfect", "click": [0.1]}, ("click",), "not both"),
        ({"name": "cascade", "click": [0.1], "stop": [0.1], "stop_mode": "sometimes"}, ("stop_mode",), "every_rank"),
        ({"name": "cascade", "click": [0.1], "stop": [0.1], "colour": 1}, ("colour",), "allowed"),
        ({"name": "nope"}, ("name",), "cascade"),
        ({}, ("name",), "required"),
        ({"name": "pbm", "click": [0.5]}, ("examination",), "required"),
        ({"name": "pbm", "examination": [0.5, "x"], "click": [0.5]}, ("examination", 1), "probability"),
        ({"name": "pbm", "preset": "ai2018", "eta": -1}, ("eta",), "power"),
        ({"name": "rbp", "p": 1.2, "click": [0.5]}, ("p",), "[0.0, 1.0]"),
        ({"name": "rbp", "p": 0.8, "click": "high"}, ("click",), "list"),
    ],
)
def test_bad_specs_raise_config_error(spec: dict, path: tuple, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        clickmodels.build(spec)
    assert info.value.key_path == path
    assert fragment in info.value.message
    # the simulator prefixes its own path
    assert str(info.value.prefixed("users", "click_model")).startswith("users.click_model")


def test_bad_labels_and_clicks_raise_input_error() -> None:
    model = clickmodels.build({"name": "cascade", "preset": "navigational", "grades": 3})
    with pytest.raises(InputError, match="label 4 is above"):
        model.sample(np.array([[0, 4]]), np.random.default_rng(0))
    with pytest.raises(InputError, match=">= -1"):
        model.click_probabilities(np.array([[0, -2]]))
    with pytest.raises(InputError, match="2-d"):
        model.click_probabilities(np.array([0, 1]))
    with pytest.raises(InputError, match="shape"):
        model.log_likelihood(np.array([[0, 1]]), np.array([[True]]))
    with pytest.raises(InputError, match="empty slots"):
        model.log_likelihood(np.array([[0, -1]]), np.array([[False, True]]))
    with pytest.raises(InputError, match="integers"):
        model.click_probabilities(np.array([[0.5, 1.0]]))


def test_preset_files_are_versioned_and_cite_a_source_for_every_entry() -> None:
    import re

    from clickmodels import presets

    for family in presets.families():
        data = presets.load(family)
        assert data["family"] == family
        assert re.fullmatch(r"\d+\.\d+", data["version"]), data["version"]
        assert data["description"].strip()
        sources = data["sources"]
        assert sources and all(isinstance(v, str) and re.search(r"\(\d{4}\)", v) for v in sources.values())
        for name, entry in data["presets"].items():
            # cascade presets are cited per grade scale, the others per preset name
            keys = list(entry) if family == "cascade" else [name]
            for key in keys:
                assert key in sources, (family, name, key)
        # a fresh copy each call: a caller's mutation does not leak into the next build
        data["presets"].clear()
        assert presets.load(family)["presets"]
