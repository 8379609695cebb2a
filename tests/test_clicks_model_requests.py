"""One resolver of click-model lists (cli.clicks.resolve_models) for ``clicks evaluate --models`` and
``onlineeval.evaluate_clicks(models=...)``: the same names, the same refusals, checked before a log is read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import onlineeval
from onlineeval.cli import app
from onlineeval.cli.clicks import ModelRequest, resolve_models
from onlineeval.errors import ConfigError

runner = CliRunner()


@pytest.fixture()
def tsv_log(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    lines = ["# session\tquery\tdocs\tclicks"]
    for s in range(200):
        docs = list(rng.permutation(["a", "b", "c"]))
        clicked = [d for r, d in enumerate(docs) if rng.random() < 0.5 / (r + 1)]
        lines.append(f"s{s}\tq\t{','.join(docs)}\t{','.join(clicked)}")
    path = tmp_path / "log.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_resolve_models() -> None:
    got = resolve_models(" cascade , dcm:em,, saved/pbm.json", "--models")
    assert got == [ModelRequest("cascade", "cm"), ModelRequest("dcm:em", "dcm", "em"),
                   ModelRequest("saved/pbm.json", path=Path("saved/pbm.json"))]
    assert got[1].base == "dcm" and resolve_models(["pbm", "", Path("x.json")], "models")[1].path == Path("x.json")


@pytest.mark.parametrize(
    ("models", "message"),
    [(",", "give at least one model name"), ("pbm,nosuch", "no estimator for click model 'nosuch'"),
     ("pbm:xx", "pbm:xx: the suffixes are ':closed_form' (dcm, sdbn: the last-click closed form) and ':em'"),
     ("pbm:closed_form", "pbm has no closed form; it is fitted by EM"),
     ("cm:em", "cm is fitted in closed form only"),
     ("pbm,dbn,pbm", "pbm is given twice; give each model once")],
)
def test_cli_and_api_refuse_alike(tsv_log: Path, tmp_path: Path, models: str, message: str) -> None:
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--models", models])
    assert res.exit_code == 2 and f"--models: {message}" in res.output
    # the API refuses before reading the sessions: a missing file is not what it reports
    with pytest.raises(ConfigError) as info:
        onlineeval.evaluate_clicks(tmp_path / "absent.tsv", models)
    assert str(info.value).startswith(f"models: {message}")


def test_api_sequence_skips_empty_names_like_the_string(tsv_log: Path) -> None:
    table = onlineeval.evaluate_clicks(tsv_log, ["rctr", "", " pbm "], seed=1)
    assert list(table.index) == ["rctr", "pbm"]
    assert table.equals(onlineeval.evaluate_clicks(tsv_log, "rctr,,pbm", seed=1))


def test_cli_and_api_give_the_same_table(tsv_log: Path, tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--models", "cascade,pbm",
                              "--csv", str(csv), "--quiet"])
    assert res.exit_code == 0, res.output
    import pandas as pd

    cli = pd.read_csv(csv, index_col=0)
    api = onlineeval.evaluate_clicks(tsv_log, "cascade,pbm")
    assert list(cli.index) == list(api.index) == ["cascade", "pbm"]
    np.testing.assert_allclose(cli["perplexity"].to_numpy(), api["perplexity"].to_numpy(), rtol=1e-12)
