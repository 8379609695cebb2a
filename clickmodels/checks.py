"""Conformance suite for click models: ``check_click_model(model)``.

Every registered model must pass these checks (run in tests via pytest parametrize):

- shapes and ranges: probabilities in [0, 1], zero in empty slots, clicks only in
  examined slots, ``P(click) <= P(examined)``;
- same seed, same clicks; the propensity of a sample equals the exact examination
  probability;
- parameters are unchanged by use, and the model pickles (same outputs after a round trip);
- the log-likelihood defines a distribution: summed over all :math:`2^k` click patterns of
  a short list, :math:`\\sum_c P(c) = 1`, and the marginals of that distribution equal
  :meth:`~clickmodels.base.ClickModel.click_probabilities` (exact, no Monte Carlo);
- exact click and examination probabilities agree with Monte Carlo within 4 standard errors;
- the log-likelihood of data sampled from the model is higher at the generating
  parameters than at perturbed parameters.

Each check raises :class:`CheckFailed` (an ``AssertionError``) naming the model and what
failed.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from typing import Any

import numpy as np

from clickmodels.base import ByGrade, ByQueryDoc, ClickModel, Impressions, as_impressions

__all__ = ["CheckFailed", "check_click_model", "click_model_checks", "default_batch", "perturbations"]

Check = Callable[[ClickModel, Impressions], None]


class CheckFailed(AssertionError):
    """A click model failed a conformance check."""


def _fail(model: ClickModel, check: str, message: str) -> CheckFailed:
    return CheckFailed(f"{type(model).__name__} ({model.name}) failed {check}: {message}")


def default_batch(model: ClickModel, n: int = 64, k: int = 6, seed: int = 0) -> Impressions:
    """A small labelled batch (grades within the model's range, some empty tail slots)."""
    rng = np.random.default_rng(seed)
    grades = model.n_grades or 5
    labels = rng.integers(0, grades, size=(n, k))
    lengths = rng.integers(max(1, k - 2), k + 1, size=n)
    labels[np.arange(k)[None, :] >= lengths[:, None]] = -1
    return as_impressions(labels)


def _tile(imp: Impressions, reps: int) -> Impressions:
    return Impressions(
        labels=None if imp.labels is None else np.tile(imp.labels, (reps, 1)),
        query=None if imp.query is None else np.tile(imp.query, reps),
        docs=None if imp.docs is None else np.tile(imp.docs, (reps, 1)),
    )


def _rows(imp: Impressions, rows: np.ndarray) -> Impressions:
    return Impressions(
        labels=None if imp.labels is None else imp.labels[rows],
        query=None if imp.query is None else imp.query[rows],
        docs=None if imp.docs is None else imp.docs[rows],
    )


def check_ranges(model: ClickModel, imp: Impressions) -> None:
    """Probabilities in [0, 1], zero in empty slots, P(click) <= P(examined)."""
    click = model.click_probabilities(imp)
    exam = model.examination_probabilities(imp)
    for name, arr in (("click_probabilities", click), ("examination_probabilities", exam)):
        if arr.shape != imp.shape:
            raise _fail(model, "check_ranges", f"{name} has shape {arr.shape}, expected {imp.shape}")
        if not np.all((arr >= 0) & (arr <= 1)):
            raise _fail(model, "check_ranges", f"{name} outside [0, 1]")
        if np.any(arr[~imp.valid] != 0):
            raise _fail(model, "check_ranges", f"{name} non-zero in an empty slot")
    if np.any(click > exam + 1e-12):
        raise _fail(model, "check_ranges", "P(click) > P(examined) somewhere")
    out = model.sample(imp, np.random.default_rng(1))
    if out.clicks.dtype != np.bool_ or out.clicks.shape != imp.shape:
        raise _fail(model, "check_ranges", "clicks must be a bool array of the batch's shape")
    if np.any(out.clicks & ~out.examined) or np.any(out.examined & ~imp.valid):
        raise _fail(model, "check_ranges", "a click in an unexamined slot, or an examined empty slot")
    if not np.allclose(out.propensity, exam, rtol=1e-12, atol=1e-15):
        raise _fail(model, "check_ranges", "sample propensity differs from examination_probabilities")


def check_seed(model: ClickModel, imp: Impressions) -> None:
    """Same generator seed, same clicks; different seeds, (almost surely) different clicks."""
    big = _tile(imp, 8)
    a = model.sample(big, np.random.default_rng(123))
    b = model.sample(big, np.random.default_rng(123))
    if not (np.array_equal(a.clicks, b.clicks) and np.array_equal(a.examined, b.examined)):
        raise _fail(model, "check_seed", "the same seed gave different clicks")
    c = model.sample(big, np.random.default_rng(124))
    p = model.click_probabilities(big)
    if np.any((p > 0) & (p < 1)) and np.array_equal(a.examined, c.examined) and np.array_equal(a.clicks, c.clicks):
        raise _fail(model, "check_seed", "different seeds gave identical random clicks")


def _fingerprint(model: ClickModel) -> bytes:
    return pickle.dumps(model)


def check_unchanged_and_pickle(model: ClickModel, imp: Impressions) -> None:
    """Parameters unchanged by use; a pickled copy gives identical outputs; inputs not mutated."""
    before = _fingerprint(model)
    labels_before = None if imp.labels is None else imp.labels.copy()
    clicks = model.sample(imp, np.random.default_rng(5)).clicks
    model.click_probabilities(imp)
    model.examination_probabilities(imp)
    model.log_likelihood(imp, clicks)
    model.conditional_click_probabilities(imp, clicks)
    if _fingerprint(model) != before:
        raise _fail(model, "check_unchanged_and_pickle", "parameters changed by use")
    if labels_before is not None and not np.array_equal(labels_before, imp.labels):
        raise _fail(model, "check_unchanged_and_pickle", "the caller's labels were mutated")
    copy = pickle.loads(before)
    if type(copy) is not type(model):
        raise _fail(model, "check_unchanged_and_pickle", "unpickled to a different class")
    same = np.array_equal(copy.click_probabilities(imp), model.click_probabilities(imp)) and np.array_equal(
        copy.sample(imp, np.random.default_rng(5)).clicks, clicks
    )
    if not same:
        raise _fail(model, "check_unchanged_and_pickle", "a pickled copy gives different outputs")


def check_likelihood_is_distribution(model: ClickModel, imp: Impressions) -> None:
    """Summed over all click patterns, P(c) = 1, and its marginals are the click probabilities."""
    k = min(imp.shape[1], 6)
    rows = np.arange(min(imp.shape[0], 12))
    small = _rows(imp, rows)
    small = Impressions(
        labels=None if small.labels is None else np.ascontiguousarray(small.labels[:, :k]),
        query=small.query,
        docs=None if small.docs is None else np.ascontiguousarray(small.docs[:, :k]),
    )
    valid = small.valid
    patterns = np.array(list(itertools.product((False, True), repeat=k)), dtype=bool)  # (2^k, k)
    m = len(rows)
    rep = _rows(small, np.repeat(np.arange(m), len(patterns)))
    clicks = np.tile(patterns, (m, 1)) & rep.valid
    # patterns with clicks in empty slots are impossible; count each feasible pattern once
    feasible = ~np.any(np.tile(patterns, (m, 1)) & ~rep.valid, axis=1)
    ll = model.log_likelihood(rep, clicks)
    prob = np.where(feasible, np.exp(ll), 0.0).reshape(m, len(patterns))
    total = prob.sum(axis=1)
    if not np.allclose(total, 1.0, atol=1e-9):
        raise _fail(model, "check_likelihood_is_distribution", f"sum over click patterns of P(c) is {total}")
    marg = prob @ patterns.astype(np.float64)
    exact = model.click_probabilities(small)
    if not np.allclose(marg, exact, atol=1e-9):
        raise _fail(
            model, "check_likelihood_is_distribution", f"marginals of P(c) {marg[0]} != click_probabilities {exact[0]}"
        )
    if np.any(exact[~valid] != 0):
        raise _fail(model, "check_likelihood_is_distribution", "non-zero click probability in an empty slot")


#: copies of the batch :func:`check_monte_carlo` samples: the default batch's 64 impressions x 8000 = 512,000, so the
#: per-rank tolerance (4 SE) is about 0.0026 at a click rate of 0.3, under 1% of it (400 copies let a bias of a few
#: percent through; the simulator samples millions of impressions)
MONTE_CARLO_REPS = 8000


def check_monte_carlo(model: ClickModel, imp: Impressions, reps: int = MONTE_CARLO_REPS, z: float = 4.0) -> None:
    """Exact click and examination probabilities agree with Monte Carlo, per rank and per slot.

    The batch is tiled ``reps`` times (:data:`MONTE_CARLO_REPS`) and sampled once.

    * Per rank (:math:`2k` comparisons, click and examination rate averaged over the
      batch): the standard error is :math:`\\sqrt{\\sum_i p_i(1-p_i)}/n` and the tolerance
      ``z`` = 4 SE for each comparison.
    * Per slot (every impression and rank of ``imp``, over its ``reps`` copies): the SE is
      :math:`\\sqrt{p(1-p)/reps}`; with :math:`m = 2nk` comparisons the tolerance is the
      Bonferroni-adjusted ``z`` (a family-wise false-failure chance of one 4-SE test, about
      6e-5), and a slot with :math:`p \\in \\{0, 1\\}` must match exactly. This catches a
      sampler that is right on average over the batch but wrong for individual impressions.
    """
    from scipy.stats import norm

    big = _tile(imp, reps)
    out = model.sample(big, np.random.default_rng(2024))
    n0, k = imp.shape
    z_slot = float(norm.isf(norm.sf(z) / max(2 * n0 * k, 1)))
    for what, exact, got in (
        ("click", model.click_probabilities(big), out.clicks),
        ("examination", model.examination_probabilities(big), out.examined),
    ):
        n = exact.shape[0]
        mean_exact = exact.mean(axis=0)
        se = np.sqrt((exact * (1.0 - exact)).sum(axis=0)) / n
        diff = np.abs(got.mean(axis=0) - mean_exact)
        bad = diff > z * se + 1e-12
        if np.any(bad):
            r = int(np.argmax(bad))
            raise _fail(
                model,
                "check_monte_carlo",
                f"{what} rate at rank {r + 1}: Monte Carlo {got.mean(axis=0)[r]:.5f} vs exact "
                f"{mean_exact[r]:.5f} (SE {se[r]:.2g}, tolerance {z:.2f} SE)",
            )
        cell_exact = exact.reshape(reps, n0, k).mean(axis=0)
        cell_got = got.reshape(reps, n0, k).mean(axis=0)
        cell_se = np.sqrt(cell_exact * (1.0 - cell_exact) / reps)
        bad = np.abs(cell_got - cell_exact) > z_slot * cell_se + 1e-12
        if np.any(bad):
            i, r = (int(x) for x in np.argwhere(bad)[0])
            raise _fail(
                model,
                "check_monte_carlo",
                f"{what} rate of impression {i} at rank {r + 1}: Monte Carlo {cell_got[i, r]:.5f} vs exact "
                f"{cell_exact[i, r]:.5f} over {reps} copies (SE {cell_se[i, r]:.2g}, tolerance {z_slot:.2f} SE, "
                f"Bonferroni over {2 * n0 * k} slots)",
            )


def perturbations(model: ClickModel, delta: float = 0.15) -> Iterator[tuple[str, ClickModel]]:
    """Models with one probability parameter moved by ``delta`` (kept inside [0, 1]).

    Covers :class:`ByGrade` and :class:`ByQueryDoc` tables, float fields and small float
    arrays; a move the model rejects (e.g. a structurally zero UBM entry) is skipped.
    """

    def moved(v: float) -> list[float]:
        return [x for x in (v - delta, v + delta) if 0.0 <= x <= 1.0]

    def attempt(label: str, **change: Any) -> Iterator[tuple[str, ClickModel]]:
        try:
            yield label, replace(model, **change)
        except ValueError:
            return

    for f in fields(model):
        value = getattr(model, f.name)
        if isinstance(value, ByGrade):
            for g, v in enumerate(value.values):
                for x in moved(v):
                    vals = list(value.values)
                    vals[g] = x
                    yield from attempt(f"{f.name}[{g}]={x:.3f}", **{f.name: ByGrade(tuple(vals))})
        elif isinstance(value, ByQueryDoc):
            for i, v in enumerate(value.values[:8]):
                for x in moved(float(v)):
                    vals = value.values.copy()
                    vals[i] = x
                    new = ByQueryDoc(value.query, value.doc, vals, value.default)
                    yield from attempt(f"{f.name}[pair {i}]={x:.3f}", **{f.name: new})
        elif isinstance(value, float) and 0.0 <= value <= 1.0:
            for x in moved(value):
                yield from attempt(f"{f.name}={x:.3f}", **{f.name: x})
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f" and 0 < value.size <= 100:
            flat = value.ravel()
            for i in range(flat.size):
                for x in moved(float(flat[i])):
                    arr = flat.copy()
                    arr[i] = x
                    yield from attempt(f"{f.name}[{i}]={x:.3f}", **{f.name: arr.reshape(value.shape)})


def check_likelihood_maximised(model: ClickModel, imp: Impressions, reps: int = 600, z: float = 4.0) -> None:
    """LL of data sampled from the model is highest at the generating parameters.

    For every one-parameter perturbation (:func:`perturbations`) the per-impression LL
    difference ``LL(true) - LL(perturbed)`` on the same sampled clicks has a positive
    expectation (a KL divergence). The check fails when some perturbation fits the data
    significantly *better* (mean difference below ``-z`` SE), or when no perturbation fits
    significantly worse (mean above ``z`` SE; the data would not identify the maximum).
    Perturbations that leave every click probability of the batch unchanged (e.g. a grade
    that does not occur) are skipped.
    """
    big = _tile(imp, reps)
    clicks = model.sample(big, np.random.default_rng(77)).clicks
    ll_true = model.log_likelihood(big, clicks)
    probe_clicks = model.sample(imp, np.random.default_rng(3)).clicks
    base_pattern = model.log_likelihood(imp, probe_clicks)
    decisive = 0
    tested = 0
    for label, other in perturbations(model):
        probe = other.log_likelihood(imp, probe_clicks)
        if np.allclose(probe, base_pattern) and np.allclose(
            other.click_probabilities(imp), model.click_probabilities(imp)
        ):
            continue
        tested += 1
        with np.errstate(invalid="ignore"):  # -inf - -inf: a broken model, reported below
            diff = ll_true - other.log_likelihood(big, clicks)
        mean = float(diff.mean())
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if np.all(np.isfinite(diff)) else 0.0
        if not mean >= -z * se:
            raise _fail(
                model,
                "check_likelihood_maximised",
                f"mean LL at generating parameters not above perturbed {label} "
                f"(difference {mean:.3g}, SE {se:.2g})",
            )
        if mean > z * se:
            decisive += 1
    if tested and not decisive:
        raise _fail(model, "check_likelihood_maximised", "no perturbation lowers the LL significantly")


CHECKS: tuple[Check, ...] = (
    check_ranges,
    check_seed,
    check_unchanged_and_pickle,
    check_likelihood_is_distribution,
    check_monte_carlo,
    check_likelihood_maximised,
)


def click_model_checks(model: ClickModel, batch: Impressions | None = None) -> Iterator[tuple[str, Callable[[], None]]]:
    """Yield ``(check_name, run)`` pairs for ``model`` (for pytest parametrization)."""
    imp = batch if batch is not None else default_batch(model)
    for check in CHECKS:
        yield check.__name__, (lambda c=check: c(model, imp))


def check_click_model(model: ClickModel, batch: Any = None) -> list[str]:
    """Run every conformance check on ``model``; returns the names of the checks passed.

    Parameters
    ----------
    model:
        The model to check.
    batch:
        :class:`~clickmodels.base.Impressions` (or a label matrix) the model can score;
        default: :func:`default_batch`.

    Raises
    ------
    CheckFailed
        On the first failing check, naming the model and the problem.
    """
    imp = None if batch is None else as_impressions(batch)
    passed = []
    for name, run in click_model_checks(model, imp):
        run()
        passed.append(name)
    return passed
