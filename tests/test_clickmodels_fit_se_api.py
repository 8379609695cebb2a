"""``onlineeval.fit_clicks(..., bootstrap=N, seed=S)``: the Python API's per-session bootstrap standard errors, the
same as ``onlineeval clicks fit --bootstrap N --seed S`` (the saved JSON byte for byte, with the fit's provenance
and fingerprint) and as the library's :func:`clickmodels.estimation.bootstrap.bootstrap_se`; a saved fit reads its
standard errors back; the CLI's own checks of the two options, as ConfigErrors naming the keyword."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import onlineeval
import test_clickmodels_em_default as world
from clickmodels.estimation import fit_log, load_fit
from clickmodels.estimation.bootstrap import bootstrap_se
from onlineeval.cli import app
from onlineeval.errors import ConfigError, InputError


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from clickmodels.logs import write_tsv

    path = tmp_path_factory.mktemp("fit_se_api") / "log.tsv"
    write_tsv(world.simulate("dcm", 2).take(np.arange(1500)), path)
    return path


@pytest.mark.parametrize("model", ["dcm", "pbm"])
def test_the_api_saves_what_the_cli_writes(log_file: Path, tmp_path: Path, model: str) -> None:
    """The same file, model, replicates and seed: the API's ``save`` and ``clicks fit --out`` write the same JSON
    (standard errors, provenance and fingerprint included; PBM's on the rank-1 scale with their values)."""
    out = tmp_path / "cli.json"
    res = CliRunner().invoke(app, ["clicks", "fit", "--log", str(log_file), "--model", model, "--out", str(out),
                                   "-q", "--bootstrap", "12", "--seed", "5"])
    assert res.exit_code == 0, res.output
    seen: list[tuple[str, int, int]] = []
    fit = onlineeval.fit_clicks(log_file, model, bootstrap=12, seed=5,
                                on_progress=lambda what, done, total: seen.append((what, done, total)))
    fit.save(tmp_path / "api.json")
    assert (tmp_path / "api.json").read_text() == out.read_text()
    doc = json.loads(out.read_text())
    assert doc["standard_errors"]["n_boot"] == 12 and doc["options"]["bootstrap"] == 12
    assert ("values" in doc["standard_errors"]) == (model == "pbm")
    assert [d for _, d, _ in seen] == list(range(1, 13)) and {t for _, _, t in seen} == {12}
    # the library's call on the same sessions: the same replicates
    from clickmodels.logs import read_click_log

    data = read_click_log(log_file, None)
    lib = bootstrap_se(model, data, fit_log(model, data), n_boot=12, seed=5)
    for key, se in lib.se.items():
        np.testing.assert_allclose(fit.standard_errors.se[key], se, rtol=1e-12, equal_nan=True)


def test_a_saved_fit_reads_its_standard_errors_back(log_file: Path, tmp_path: Path) -> None:
    """load_fit gives back the SEs (null as NaN), their reasons and, on the rank-1 scale, the values; saving the
    loaded fit again writes the same file; a fit without a bootstrap has none."""
    for model in ("sdbn", "ubm"):
        fit = onlineeval.fit_clicks(log_file, model, bootstrap=5, seed=1)
        path = tmp_path / f"{model}.json"
        fit.save(path)
        back = load_fit(path)
        assert back.standard_errors is not None and back.standard_errors.n_boot == 5
        for key, se in fit.standard_errors.se.items():
            np.testing.assert_array_equal(back.standard_errors.se[key], se)
        assert back.standard_errors.reason == json.loads(json.dumps(fit.standard_errors.reason))
        assert back.standard_errors.summary() == fit.standard_errors.summary()
        back.save(tmp_path / "again.json")
        assert (tmp_path / "again.json").read_text() == path.read_text()
    plain = onlineeval.fit_clicks(log_file, "dcm")
    assert plain.standard_errors is None and "standard_errors" not in plain.to_dict()
    doc = json.loads(path.read_text())
    doc["standard_errors"]["se"] = {"examination": [0.1]}
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="standard_errors: se and undefined_reason name different"):
        load_fit(path)


def test_the_options_are_checked_as_the_cli_checks_them(log_file: Path) -> None:
    for kwargs, message in (
        ({"bootstrap": 10, "model": "rctr"}, "bootstrap: standard errors are available for dcm, sdbn, dbn, ccm, "
                                             "pbm, ubm, not rctr"),
        ({"bootstrap": 1}, r"bootstrap: must be an integer in \[2, 100,000\]"),
        ({"bootstrap": True}, "bootstrap: must be an integer"),
        ({"bootstrap": 2.5}, "bootstrap: must be an integer"),
        ({"seed": 3}, "seed: applies to bootstrap only"),
        ({"bootstrap": 5, "seed": -1}, "seed: must be a non-negative integer"),
    ):
        model = kwargs.pop("model", "dcm")
        with pytest.raises(ConfigError, match=message):
            onlineeval.fit_clicks(log_file, model, **kwargs)
