"""One wording for a value outside its allowed values: ``must be one of a, b; got 'x'`` (errors.must_be_one_of).

The key is the error's key path when it has one (``--format: must be one of ...``) and leads the message when
it has none (``alternative must be one of ...``). The cases below said it otherwise before (``, got``; quoted
or tuple-printed values; ``must be 'R' or 'min_r_k'``)."""

from __future__ import annotations

import pandas as pd
import pytest

from clickmodels.base import ByGrade, SpecReader
from clickmodels.cascade import Cascade
from onlineeval.errors import ConfigError, InputError, must_be_one_of
from onlineeval.interleaving.optimized import Optimized
from onlineeval.metrics import parse_metric
from onlineeval.stats.sequential import classic_boundaries


def test_wording() -> None:
    assert must_be_one_of(("table", "json"), "xml") == "must be one of table, json; got 'xml'"
    assert must_be_one_of(["holm", "bh"], "bonf", "method") == "method must be one of holm, bh; got 'bonf'"
    assert must_be_one_of(("a",), 3, note=" (only a)") == "must be one of a (only a); got 3"


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: SpecReader({"mode": "x"}, ("mode",)).choice("mode", ("a", "b"), "a"), ConfigError,
         "mode: must be one of a, b; got 'x'"),
        (lambda: Cascade(ByGrade((0.1, 0.9)), ByGrade((0.5, 0.5)), stop_mode="never"), ValueError,
         "stop_mode must be one of after_click, every_rank; got 'never'"),
        (lambda: Optimized(credit="square"), ConfigError,
         "interleaver.credit: optimized: must be one of inverse, linear; got 'square'"),
        (lambda: parse_metric("AP(denominator='k')"), ConfigError,
         "metrics.AP.denominator: must be one of R, min_r_k; got 'k'"),
        (lambda: parse_metric("RBPResidual(form='x')"), ConfigError,
         "metrics.RBPResidual.form: must be one of full, trec_eval; got 'x'"),
        (lambda: classic_boundaries([0.5, 1.0], 0.05, kind="haybittle"), InputError,
         "classic_boundaries: kind must be one of obrien_fleming, pocock; got 'haybittle'"),
    ],
)
def test_sites_say_it_one_way(call, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_click_model_fit_method() -> None:
    from clickmodels.estimation import fit_log
    from clickmodels.estimation.dcm import fit_dcm
    from clickmodels.estimation.sdbn import fit_sdbn
    from clickmodels.logs import from_arrays

    log = from_arrays([0, 0], [[0, 1], [1, 0]], [[1, 0], [0, 1]], doc_vocab=["a", "b"])
    for fit in (lambda: fit_log("dcm", log, method="mle"), lambda: fit_dcm(log, method="mle"),
                lambda: fit_sdbn(log, method="mle")):
        with pytest.raises(ConfigError) as info:
            fit()
        assert str(info.value) == "method: must be one of closed_form, em; got 'mle'"


def test_compare_on_error() -> None:
    from clickmodels.evaluation import compare

    with pytest.raises(ValueError) as info:
        compare({}, None, on_error="skip")
    assert str(info.value) == "on_error must be one of raise, row; got 'skip'"


def test_api_clicks_as() -> None:
    from onlineeval.api import fit_clicks

    sessions = pd.DataFrame({"query": ["q"], "shown": [["a", "b"]], "clicks": [["a"]]})
    with pytest.raises(ConfigError) as info:
        fit_clicks(sessions, "pbm", clicks_as="bools")
    assert str(info.value) == "clicks_as: must be one of auto, ids, flags; got 'bools'"


def test_clicks_fit_method_option(tmp_path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    log = tmp_path / "log.tsv"
    log.write_text("query\tshown\tclicks\nq\ta,b\ta\n")
    res = CliRunner().invoke(app, ["clicks", "fit", "--log", str(log), "--model", "pbm", "--method", "mle",
                                   "--out", str(tmp_path / "fit.json")])
    assert res.exit_code == 2
    assert "--method: must be one of closed_form, em; got 'mle'" in res.output
