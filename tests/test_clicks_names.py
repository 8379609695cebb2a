"""One list of click-model names for ``clicks fit`` / ``clicks evaluate``: help, errors and
the README print :data:`onlineeval.cli.clicks.MODEL_LIST`, which must agree with the
estimators (``clickmodels.estimation``) and the simulate models (``clickmodels.available()``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import clickmodels
from clickmodels.estimation import ALIASES, ESTIMATORS
from onlineeval.cli import app
from onlineeval.cli.clicks import FIT_MODELS, MODEL_LIST, NOT_FITTED, fit_name
from onlineeval.errors import ConfigError

runner = CliRunner()
README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_list_agrees_with_the_estimators_and_the_simulate_models() -> None:
    assert list(FIT_MODELS) == list(ESTIMATORS)  # every estimator, in the library's order
    for alias, target in ALIASES.items():  # every library alias accepted, for the same estimator
        assert fit_name(alias, "--model") == target
    for name in clickmodels.available():  # every simulate name: fitted, or said why not
        if name in NOT_FITTED:
            with pytest.raises(ConfigError, match=re.escape(NOT_FITTED[name])):
                fit_name(name, "--model")
        else:
            key = fit_name(name, "--model")
            assert key == name or name in FIT_MODELS[key][1]
    assert set(NOT_FITTED) <= set(clickmodels.available())
    assert fit_name("cascade", "--model") == "cm" and fit_name("Random", "--model") == "gctr"


def _flat(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_help_errors_and_readme_print_the_same_list(tmp_path: Path) -> None:
    for command in ("fit", "evaluate"):
        res = runner.invoke(app, ["clicks", command, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0 and MODEL_LIST in _flat(res.output), (command, _flat(res.output))
    res = runner.invoke(app, ["clicks", "fit", "--log", str(tmp_path / "x.tsv"), "--model", "nope", "--out", "o.json"])
    assert res.exit_code == 2 and f"allowed: {MODEL_LIST}" in res.output
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(tmp_path / "x.tsv"), "--models", "pbm,rbp"])
    assert res.exit_code == 2 and "--models: no estimator for click model 'rbp'" in res.output
    assert NOT_FITTED["rbp"] in res.output
    if README.is_file():
        assert MODEL_LIST in " ".join(README.read_text().split())


@pytest.fixture()
def cascade_log(tmp_path: Path) -> Path:
    """Clicks of the simulate ``cascade`` user that stops after its first click."""
    rng = np.random.default_rng(5)
    attr = {"a": 0.6, "b": 0.3, "c": 0.2}
    lines = []
    for s in range(300):
        docs = list(rng.permutation(list(attr)))
        clicked = []
        for d in docs:
            if rng.random() < attr[d]:
                clicked.append(d)
                break
        lines.append(f"s{s}\tq\t{','.join(docs)}\t{','.join(clicked)}")
    path = tmp_path / "log.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_simulate_name_cascade_fits_the_cascade_model_and_says_so(cascade_log: Path, tmp_path: Path) -> None:
    outs = {}
    for name in ("cascade", "cm"):
        outs[name] = tmp_path / f"{name}.json"
        res = runner.invoke(app, ["clicks", "fit", "--log", str(cascade_log), "--model", name,
                                  "--out", str(outs[name])])
        assert res.exit_code == 0, res.output
        noted = "model: cascade -> cm (cascade model: the user stops after the first click)" in res.output
        assert noted == (name == "cascade")
    assert json.loads(outs["cascade"].read_text()) == json.loads(outs["cm"].read_text())
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(cascade_log), "--models", "cascade,cm,random"])
    assert res.exit_code == 0, res.output
    assert "models: cascade -> cm (cascade model: the user stops after the first click); random -> gctr" in res.output
    rows = {line.split()[0]: line.split()[1:] for line in res.output.splitlines()
            if line.startswith(("cascade", "cm "))}
    assert rows["cascade"] == rows["cm"]


def test_em_model_lists_in_messages_come_from_the_estimators() -> None:
    from clickmodels.estimation import EM_MODELS, EM_OPTIONAL
    from onlineeval.click_fits import em_lists as _em_lists

    always, optional = _em_lists()
    assert set(always.split(", ")) == set(EM_MODELS) and set(optional.split(", ")) == set(EM_OPTIONAL)
    res = runner.invoke(app, ["clicks", "fit", "--log", "x.tsv", "--model", "cascade", "--out", "o.json",
                              "--method", "em"])
    assert res.exit_code == 2 and f"cm is fitted in closed form only (em: {always}, {optional})" in res.output
