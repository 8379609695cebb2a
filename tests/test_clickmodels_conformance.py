"""The conformance suite on every registered click model, and proof that it can fail."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import clickmodels
from clickmodels import ByGrade, ByQueryDoc, Impressions
from clickmodels.base import ClickModel, ClickSample
from clickmodels.cascade import Cascade
from clickmodels.checks import (
    CHECKS,
    CheckFailed,
    check_click_model,
    check_likelihood_is_distribution,
    check_likelihood_maximised,
    check_monte_carlo,
    check_seed,
    check_unchanged_and_pickle,
    click_model_checks,
)

NAMES = clickmodels.available()


def test_every_registered_model_has_an_example() -> None:
    assert len(NAMES) >= 14
    for name in NAMES:
        cls = clickmodels.model_class(name)
        assert cls.example_spec is not None and cls.example_spec["name"] == name
        assert isinstance(cls.example(), cls)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_conformance_by_grade(name: str, check: Any) -> None:
    model = clickmodels.model_class(name).example()
    dict(click_model_checks(model))[check.__name__]()


def _fitted_like(model: ClickModel, imp: Impressions, rng: np.random.Generator) -> ClickModel:
    """The same model with every ByGrade table replaced by a (query, doc) table."""
    pairs = np.unique(np.stack([np.repeat(imp.query, imp.shape[1]), imp.docs.ravel()], axis=1), axis=0)
    pairs = pairs[pairs[:, 1] >= 0]
    changes = {}
    for field, param in model.doc_params().items():
        if isinstance(param, ByGrade):
            values = rng.uniform(0.05, 0.95, size=len(pairs))
            changes[field] = ByQueryDoc(pairs[:, 0], pairs[:, 1], values, default=0.3)
    from dataclasses import replace

    return replace(model, **changes)


def _log_batch(rng: np.random.Generator, n: int = 48, k: int = 6) -> Impressions:
    query = rng.integers(0, 5, size=n)
    docs = rng.integers(0, 12, size=(n, k))
    docs[rng.random(n) < 0.2, -1] = -1
    return Impressions(query=query, docs=docs)


FITTABLE = [n for n in NAMES if clickmodels.model_class(n).example().doc_params() and n != "metric"]


@pytest.mark.parametrize("name", FITTABLE)
def test_conformance_with_query_document_parameters(name: str) -> None:
    rng = np.random.default_rng(5)
    imp = _log_batch(rng)
    model = _fitted_like(clickmodels.model_class(name).example(), imp, rng)
    assert all(isinstance(p, ByQueryDoc) for p in model.doc_params().values())
    assert len(check_click_model(model, imp)) == len(CHECKS)


# ------------------------------------------------------------------ the suite can fail


@dataclass(frozen=True, eq=False)
class _WrongProbabilities(Cascade):
    def _click_probabilities(self, imp: Impressions) -> np.ndarray:
        return np.minimum(super()._click_probabilities(imp) * 1.03, 1.0)


@dataclass(frozen=True, eq=False)
class _GlobalRandom(Cascade):
    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample:
        return super()._sample(imp, np.random.default_rng())  # ignores the caller's seed


@dataclass(frozen=True, eq=False)
class _Mutating(Cascade):
    counter: np.ndarray = None  # type: ignore[assignment]

    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample:
        self.counter[0] += 1
        return super()._sample(imp, rng)


@dataclass(frozen=True, eq=False)
class _BiasedSampler(Cascade):
    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample:
        out = super()._sample(imp, rng)
        extra = (rng.random(out.clicks.shape) < 0.05) & out.examined
        return ClickSample(out.clicks | extra, out.propensity, out.examined)


@dataclass(frozen=True, eq=False)
class _RowShuffledSampler(Cascade):
    """Right click rate per rank on average over the batch, wrong per impression: every
    row gets the clicks sampled for another row of the batch."""

    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample:
        out = super()._sample(imp, rng)
        perm = np.random.default_rng(1).permutation(imp.shape[0])
        return ClickSample(out.clicks[perm], out.propensity, out.examined[perm] | out.clicks[perm])


@dataclass(frozen=True, eq=False)
class _ConstantLikelihood(Cascade):
    def _conditional_click_probabilities(self, imp: Impressions, clicks: np.ndarray) -> np.ndarray:
        return np.full(imp.shape, 0.5) * imp.valid


def _base() -> dict[str, Any]:
    m = clickmodels.build({"name": "cascade", "preset": "informational"})
    return {"attractiveness": m.attractiveness, "stop": m.stop}


@pytest.mark.parametrize(
    ("model", "check", "fragment"),
    [
        (_WrongProbabilities(**_base()), check_likelihood_is_distribution, "marginals"),
        (_GlobalRandom(**_base()), check_seed, "same seed"),
        (_Mutating(**_base(), counter=np.zeros(1)), check_unchanged_and_pickle, "changed by use"),
        (_BiasedSampler(**_base()), check_monte_carlo, "Monte Carlo"),
        (_RowShuffledSampler(**_base()), check_monte_carlo, "impression"),
        (_ConstantLikelihood(**_base()), check_likelihood_is_distribution, "marginals"),
    ],
)
def test_suite_detects_broken_models(model: ClickModel, check: Any, fragment: str) -> None:
    from clickmodels.checks import default_batch

    with pytest.raises(CheckFailed, match=fragment):
        check(model, default_batch(model))


def test_likelihood_check_detects_a_model_whose_likelihood_prefers_other_parameters() -> None:
    @dataclass(frozen=True, eq=False)
    class _Shifted(Cascade):
        # likelihood computed with attractiveness shifted by 0.2: the maximum moves away
        def _conditional_click_probabilities(self, imp: Impressions, clicks: np.ndarray) -> np.ndarray:
            vals = tuple(min(1.0, v + 0.2) for v in self.attractiveness.values)
            return Cascade(ByGrade(vals), self.stop)._conditional_click_probabilities(imp, clicks)

    from clickmodels.checks import default_batch

    model = _Shifted(**_base())
    with pytest.raises(CheckFailed, match="not above perturbed"):
        check_likelihood_maximised(model, default_batch(model))


@pytest.mark.parametrize("metric", ["RBP(p=0.8)", "P@5", "RR", "DCG@10", "nDCG@10", "ERR", "INST(T=2)", "INSQ(T=1)"])
def test_conformance_of_every_metric_user(metric: str) -> None:
    """The registered 'metric' model is one class over many C/W/L profiles (rank-only,
    adaptive, goal-sensitive): the whole suite runs on each, not only on its example."""
    model = clickmodels.build({"name": "metric", "metric": metric, "click": [0.2, 0.4, 0.6, 0.8, 0.95]})
    assert check_click_model(model) == [c.__name__ for c in CHECKS]


@dataclass(frozen=True, eq=False)
class _SlightlyBiasedSampler(Cascade):
    """Clicks about 1% more often than its exact probabilities say at the top ranks (a share of the examined, not
    clicked documents gets a click)."""

    def _sample(self, imp: Impressions, rng: np.random.Generator) -> ClickSample:
        out = super()._sample(imp, rng)
        extra = (rng.random(out.clicks.shape) < 0.02) & out.examined & ~out.clicks
        return ClickSample(out.clicks | extra, out.propensity, out.examined)


#: the former default size of check_monte_carlo: 64 x 400 = 25,600 impressions
FORMER_REPS = 400


@pytest.mark.parametrize("name", NAMES)
def test_every_model_samples_its_exact_probabilities_at_the_simulators_size(name: str) -> None:
    """Our models through their own Monte Carlo check at its default size, half a million impressions (the simulator
    samples millions; MONTE_CARLO_REPS copies of the default batch)."""
    from clickmodels.checks import MONTE_CARLO_REPS, default_batch

    model = clickmodels.model_class(name).example()
    assert default_batch(model).shape[0] * MONTE_CARLO_REPS >= 500_000
    check_monte_carlo(model, default_batch(model))


def test_a_one_percent_bias_passed_the_former_default_size_and_fails_at_the_default() -> None:
    from clickmodels.checks import MONTE_CARLO_REPS, default_batch

    model = _SlightlyBiasedSampler(**_base())
    imp = default_batch(model)
    exact = model.click_probabilities(imp).mean(axis=0)
    big = Impressions(labels=np.tile(imp.labels, (MONTE_CARLO_REPS, 1)))
    sampled = model.sample(big, np.random.default_rng(0)).clicks.mean(axis=0)
    assert 0.005 < sampled[0] / exact[0] - 1 < 0.02  # the bias it is meant to have at rank 1
    check_monte_carlo(model, imp, reps=FORMER_REPS)  # (400 copies did not see it)
    with pytest.raises(CheckFailed, match="Monte Carlo"):
        check_monte_carlo(model, imp)
