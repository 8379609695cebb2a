"""One depth message (clickmodels.base.too_deep) for every per-rank parameter that is too short: the models
sampling clicks on shown lists (pbm, rctr, ubm, dcm) and the fits scoring a log (pbm, rctr, dcm, ubm)."""

from __future__ import annotations

import numpy as np
import pytest

from clickmodels.base import Impressions, too_deep
from clickmodels.estimation import fit_log
from clickmodels.logs import from_arrays
from onlineeval.errors import InputError

HINT = "(a fitted model covers the longest lists of its training log: fit it on logs with lists of at least {}"


def _log(k: int, n: int = 200, seed: int = 1):
    rng = np.random.default_rng(seed)
    docs = np.array([rng.permutation(6)[:k] for _ in range(n)])
    clicks = (rng.random((n, k)) < 0.4 / np.arange(1, k + 1)).astype(int)
    return from_arrays(np.zeros(n, dtype=int), docs, clicks, doc_vocab=[str(i) for i in range(6)])


def test_wording() -> None:
    assert too_deep("pbm.examination", 3, 5) == (
        "the lists have 5 slots but pbm.examination covers only 3 ranks " + HINT.format(5)
        + ", or show at most 3 documents)")
    assert too_deep("pbm examination", 3, 5, fitted=True) == (
        "pbm examination was fitted for 3 ranks but the log has lists of 5 " + HINT.format(5) + ")")


@pytest.mark.parametrize(("model", "what"), [("pbm", "pbm.examination"), ("rctr", "rctr.p"),
                                              ("ubm", "ubm.examination"), ("dcm", "dcm.continuation")])
def test_models_on_longer_lists(model: str, what: str) -> None:
    fitted = fit_log(model, _log(3)).to_model()
    imp = Impressions(query=np.zeros(2, dtype=np.int64), docs=np.tile(np.arange(5, dtype=np.int64), (2, 1)))
    with pytest.raises(InputError) as info:
        fitted.click_probabilities(imp)
    assert str(info.value) == too_deep(what, 3, 5)


@pytest.mark.parametrize(("model", "what"), [("pbm", "pbm examination"), ("rctr", "rctr p"),
                                              ("ubm", "ubm examination"), ("dcm", "dcm continuation")])
def test_fits_scoring_a_deeper_log(model: str, what: str) -> None:
    fitted = fit_log(model, _log(3))
    with pytest.raises(InputError) as info:
        fitted.log_likelihood(_log(5, seed=2))
    assert too_deep(what, 3, 5, fitted=True) in str(info.value)
