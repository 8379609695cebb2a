"""Evaluation on logs (clickmodels.evaluation): formulas on hand-computed examples, the
ClickModel adapter, and the Yandex train -> test comparison."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clickmodels import Impressions
from clickmodels.estimation import fit, fit_log
from clickmodels.evaluation import compare, evaluate, perplexity_by_rank
from clickmodels.logs import ClickLog, from_arrays, read_yandex
from onlineeval.errors import InputError

LOG = from_arrays([0, 0], [[0, 1], [1, 0]], [[1, 0], [0, 1]])


class Fixed:
    """A predictor with given probability arrays."""

    name = "fixed"

    def __init__(self, p: np.ndarray, pc: np.ndarray) -> None:
        self.p, self.pc = p, pc

    def click_probs(self, log: ClickLog) -> np.ndarray:
        return self.p

    def conditional_click_probs(self, log: ClickLog) -> np.ndarray:
        return self.pc


def test_formulas_on_a_hand_computed_example() -> None:
    p = np.array([[0.5, 0.25], [0.5, 0.25]])
    pc = np.array([[0.5, 0.1], [0.5, 0.4]])
    ev = evaluate(Fixed(p, pc), LOG)
    # rank 1: both 0.5 -> 2; rank 2: no click at 0.25 and a click at 0.25
    want_r = [2.0, 2 ** (-(np.log2(0.75) + np.log2(0.25)) / 2)]
    np.testing.assert_allclose(ev.perplexity_by_rank, want_r, rtol=1e-12)
    assert ev.perplexity == pytest.approx(np.mean(want_r))
    want_c = [2.0, 2 ** (-(np.log2(0.9) + np.log2(0.4)) / 2)]
    np.testing.assert_allclose(ev.conditional_perplexity_by_rank, want_c, rtol=1e-12)
    assert ev.log_likelihood == pytest.approx((np.log(0.5 * 0.9) + np.log(0.5 * 0.4)) / 2)
    assert ev.n_sessions == 2 and ev.model == "fixed"


def test_empty_slots_are_left_out_and_impossible_events_are_finite() -> None:
    log = from_arrays([0, 0], [[0, 1], [1, -1]], [[1, 0], [0, 0]])
    p = np.array([[1.0, 0.5], [0.0, 0.0]])
    pr = perplexity_by_rank(p, log.clicks, log.shown)
    assert pr[0] == pytest.approx(1.0, abs=1e-9)  # both rank-1 outcomes predicted with certainty
    assert pr[1] == pytest.approx(2.0)  # only session 1 shows rank 2
    wrong = np.array([[0.0, 0.5], [1.0, 0.0]])  # certain of the opposite at rank 1
    ev = evaluate(Fixed(wrong, wrong), log)
    # clipped at PROB_EPS = 1e-10: each session pays log(1e-10) once (plus log 0.5 for session 1)
    assert ev.log_likelihood == pytest.approx((2 * np.log(1e-10) + np.log(0.5)) / 2, rel=1e-6)
    assert ev.perplexity_by_rank[0] == pytest.approx(1e10, rel=1e-6)


def test_bad_probabilities_are_reported() -> None:
    with pytest.raises(InputError, match="outside"):
        evaluate(Fixed(np.full((2, 2), 1.5), np.full((2, 2), 0.5)), LOG)
    with pytest.raises(InputError, match="shape"):
        evaluate(Fixed(np.full((3, 2), 0.5), np.full((2, 2), 0.5)), LOG)


def test_rank_ctr_on_a_tiny_log() -> None:
    tiny = from_arrays([0] * 4, [[0, 1]] * 4, [[1, 0], [1, 1], [0, 0], [0, 0]])
    ev = evaluate(fit_log("rctr", tiny), tiny)
    # rank 1: ctr 1/2 -> perplexity 2; rank 2: ctr 1/4, one click in four
    want2 = 2 ** (-(np.log2(0.25) + 3 * np.log2(0.75)) / 4)
    np.testing.assert_allclose(ev.perplexity_by_rank, [2.0, want2])
    assert ev.log_likelihood == pytest.approx(np.log(0.5) + (np.log(0.25) + 3 * np.log(0.75)) / 4)


@pytest.fixture(scope="module")
def yandex(shared_data: Path) -> tuple[ClickLog, ClickLog]:
    folder = shared_data / "clicklogs" / "yandex_wscd_pyclick_sample"
    return read_yandex(folder / "trainSample"), read_yandex(folder / "testSample")


@pytest.fixture(scope="module")
def yandex_table(yandex: tuple[ClickLog, ClickLog]) -> pd.DataFrame:
    train, test = yandex
    names = ["gctr", "rctr", "dctr", "cm", "dcm", "sdbn", "pbm", "ubm", "dbn", "ccm"]
    fits = {n: fit_log(n, train, **({"tol": 1e-5} if n in ("pbm", "ubm", "dbn", "ccm") else {})) for n in names}
    return compare(fits, test)


def test_yandex_structured_models_beat_rank_ctr(yandex_table: pd.DataFrame) -> None:
    t = yandex_table
    assert list(t.columns[:4]) == ["log_likelihood", "perplexity", "conditional_perplexity", "n_sessions"]
    assert (t["n_sessions"] == 21413).all()
    assert [c for c in t.columns if c.startswith("perplexity@")] == [f"perplexity@{r}" for r in range(1, 11)]
    rctr = t.loc["rctr"]
    # CM is left out on purpose: it cannot explain any click after the first (about a
    # quarter of these sessions have two or more), and loses to rank CTR here
    for name in ("pbm", "ubm", "dbn", "ccm", "dcm", "sdbn"):
        assert t.loc[name, "perplexity"] < rctr["perplexity"], name
        assert t.loc[name, "log_likelihood"] > rctr["log_likelihood"], name
    for name in ("ubm", "dbn", "ccm"):
        assert t.loc[name, "conditional_perplexity"] < rctr["conditional_perplexity"], name
    # the baselines order as in the literature: global < rank < document CTR
    assert t.loc["gctr", "perplexity"] > rctr["perplexity"] > t.loc["dctr", "perplexity"]
    # models whose clicks are independent have equal marginal and conditional perplexity
    for name in ("gctr", "rctr", "dctr", "pbm"):
        assert t.loc[name, "perplexity"] == pytest.approx(t.loc[name, "conditional_perplexity"])
    # perplexity is above 1 (perfect prediction) everywhere; the structured models also
    # beat a coin flip (2) at every rank
    ranks = t[[f"perplexity@{r}" for r in range(1, 11)]]
    assert np.all(ranks.to_numpy() > 1)
    assert np.all(ranks.loc[["pbm", "ubm", "dbn", "ccm", "dcm", "sdbn"]].to_numpy() < 2)


def test_clickmodel_adapter_gives_the_same_numbers(yandex: tuple[ClickLog, ClickLog]) -> None:
    """A fitted clickmodels.PBM (kernels of clickmodels.base) evaluated on the recoded
    test log equals the fit record's own evaluation."""
    train, test = yandex
    rec = fit_log("pbm", train, tol=1e-4)
    model = rec.to_model(train.query_vocab, train.doc_vocab)
    test_rec = test.recode_like(train)
    a = evaluate(rec, test)
    b = evaluate(model, test_rec)
    assert b.log_likelihood == pytest.approx(a.log_likelihood, rel=1e-12)
    np.testing.assert_allclose(b.perplexity_by_rank, a.perplexity_by_rank, rtol=1e-12)
    # and the estimation entry point used by ClickModel.fit returns the model class
    fitted = fit(model, train, tol=1e-4)
    assert type(fitted) is type(model)
    imp = Impressions(query=test_rec.query, docs=test_rec.docs)
    np.testing.assert_allclose(fitted.click_probabilities(imp), model.click_probabilities(imp), rtol=1e-12)


def test_evaluation_log_likelihood_is_the_fit_records_own() -> None:
    """One definition of the session log-likelihood (clipping included): the evaluation's
    equals the fitted record's, to the bit."""
    rng = np.random.default_rng(2)
    docs = np.argsort(rng.random((500, 6)), axis=1)[:, :4]
    clicks = rng.random(docs.shape) < 0.3
    log = from_arrays(np.zeros(500, dtype=int), docs, clicks)
    for name in ("dbn", "ubm", "cm"):
        rec = fit_log(name, log, **({"max_iter": 5} if name != "cm" else {}))
        assert evaluate(rec, log).log_likelihood == float(rec.log_likelihood(log).mean())


def test_fit_records_and_model_classes_agree_to_the_bit_on_yandex(yandex: tuple[ClickLog, ClickLog]) -> None:
    """Every fit record evaluated on the held-out Yandex log gives the same marginal and
    conditional click probabilities, to the bit, as the simulator's model class built from
    it (both go through clickmodels.kernels)."""
    train, test = yandex
    rec_test = test.recode_like(train)
    imp = Impressions(query=rec_test.query, docs=rec_test.docs)
    for name in ("gctr", "rctr", "dctr", "cm", "dcm", "sdbn", "pbm", "ubm", "dbn", "ccm"):
        rec = fit_log(name, train, **({"max_iter": 5} if name in ("pbm", "ubm", "dbn", "ccm") else {}))
        model = rec.to_model(train.query_vocab, train.doc_vocab)
        np.testing.assert_array_equal(model.click_probabilities(imp), rec.click_probs(test), err_msg=name)
        np.testing.assert_array_equal(
            model.conditional_click_probabilities(imp, rec_test.clicks), rec.conditional_click_probs(test), err_msg=name
        )
