"""`onlineeval clicks fit|evaluate` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from clickmodels.estimation import load_fit
from clickmodels.logs import read_tsv
from onlineeval.cli import app

runner = CliRunner()


@pytest.fixture()
def tsv_log(tmp_path: Path) -> Path:
    """A small simulated TSV log: 2 queries, 3 docs each, PBM-like clicks."""
    rng = np.random.default_rng(3)
    lines = ["# session\tquery\tdocs\tclicks"]
    attr = {"a": 0.7, "b": 0.4, "c": 0.2, "x": 0.5, "y": 0.3, "z": 0.1}
    exam = [1.0, 0.6, 0.3]
    for s in range(600):
        q, docs = ("q1", ["a", "b", "c"]) if s % 2 else ("q2", ["x", "y", "z"])
        docs = list(rng.permutation(docs))
        clicked = [d for r, d in enumerate(docs) if rng.random() < attr[d] * exam[r]]
        lines.append(f"s{s}\t{q}\t{','.join(docs)}\t{','.join(clicked)}")
    path = tmp_path / "log.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_help_lists_commands() -> None:
    result = runner.invoke(app, ["clicks", "--help"])
    assert result.exit_code == 0
    assert "fit" in result.output and "evaluate" in result.output


def test_fit_writes_loadable_params(tsv_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "ubm.json"
    result = runner.invoke(app, ["clicks", "fit", "--log", str(tsv_log), "--model", "ubm", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "ubm: fitted on 600 sessions (EM" in result.output and str(out) in result.output
    data = json.loads(out.read_text())
    assert data["model"] == "ubm" and data["format_version"] == 1
    assert set(data["params"]) == {"attractiveness", "examination"}
    assert "ranks" in data["conventions"] and data["fit"]["method"] == "em"
    fit = load_fit(out)
    log = read_tsv(tsv_log)
    assert float(fit.log_likelihood(log).sum()) == pytest.approx(data["fit"]["log_likelihood"][-1], rel=1e-6)
    # same options -> same parameters as the library call
    from clickmodels.estimation import fit_log

    direct = fit_log("ubm", log)
    np.testing.assert_allclose(fit.examination, direct.examination)


def test_fit_closed_form_and_em_options(tsv_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "sdbn.json"
    result = runner.invoke(app, ["clicks", "fit", "--log", str(tsv_log), "--model", "sdbn", "--out", str(out),
                                 "--method", "closed_form"])
    assert result.exit_code == 0 and "closed form: last-click approximation" in result.output
    out2 = tmp_path / "dbn.json"
    result = runner.invoke(
        app, ["clicks", "fit", "--log", str(tsv_log), "--model", "dbn", "--out", str(out2), "--max-iter", "3"]
    )
    assert result.exit_code == 0 and "SQUAREM-accelerated, 3 E-steps" in result.output
    assert "NOT converged" in result.output
    assert json.loads(out2.read_text())["fit"]["accelerated"] is True
    result = runner.invoke(
        app, ["clicks", "fit", "--log", str(tsv_log), "--model", "dbn", "--out", str(out2), "--max-iter", "3",
              "--plain-em"]
    )
    assert result.exit_code == 0 and "EM, the maximum likelihood, 3 iterations, NOT converged" in result.output
    assert json.loads(out2.read_text())["fit"]["accelerated"] is False
    result = runner.invoke(
        app, ["clicks", "fit", "--log", str(tsv_log), "--model", "dcm", "--out", str(out2), "--method", "em"]
    )
    assert result.exit_code == 0 and "dcm: fitted on 600 sessions (EM" in result.output
    result = runner.invoke(
        app, ["clicks", "fit", "--log", str(tsv_log), "--model", "cm", "--out", str(out2), "--method", "em"]
    )
    assert result.exit_code == 2 and "closed form only" in result.output


def test_evaluate_with_split_prints_table(tsv_log: Path, tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    result = runner.invoke(
        app,
        ["clicks", "evaluate", "--log", str(tsv_log), "--models", "rctr,pbm,dbn,sdbn:em", "--by-rank",
         "--csv", str(csv)],
    )
    assert result.exit_code == 0, result.output
    assert "train: 450 sessions, test: 150 sessions" in result.output
    for token in ("rctr", "pbm", "dbn", "conditional_perplexity", "perplexity@3"):
        assert token in result.output
    table = pd.read_csv(csv, index_col=0)
    assert list(table.index) == ["rctr", "pbm", "dbn", "sdbn:em"] and (table["n_sessions"] == 150).all()


def test_evaluate_on_yandex_with_saved_params(shared_data: Path, tmp_path: Path) -> None:
    folder = shared_data / "clicklogs" / "yandex_wscd_pyclick_sample"
    out = tmp_path / "pbm.json"
    fit = runner.invoke(
        app, ["clicks", "fit", "--log", str(folder / "oneQueryTrain"), "--model", "pbm", "--out", str(out)]
    )
    assert fit.exit_code == 0, fit.output
    result = runner.invoke(
        app,
        [
            "clicks", "evaluate", "--log", str(folder / "oneQueryTrain"), "--test-log", str(folder / "oneQueryTest"),
            "--format", "yandex", "--models", f"pbm,{out}",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines() if line.startswith("pbm")]
    assert len(rows) == 2 and rows[0][-3:] == rows[1][-3:]  # refit == saved fit


def test_errors_are_one_line_and_exit_2(tsv_log: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("s1\tq\ta,b\ta\ns2\tq\ta,b\tc\n")
    result = runner.invoke(app, ["clicks", "fit", "--log", str(bad), "--model", "pbm", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert f"{bad}:2:" in result.output and "not among the shown" in result.output
    result = runner.invoke(app, ["clicks", "fit", "--log", str(tsv_log), "--model", "nope", "--out", "o.json"])
    assert result.exit_code == 2 and "allowed: gctr" in result.output
    result = runner.invoke(app, ["clicks", "evaluate", "--log", str(tmp_path / "missing.tsv")])
    assert result.exit_code == 2 and "missing.tsv" in result.output
    result = runner.invoke(app, ["clicks", "fit", "--log", str(tsv_log), "--model", "pbm", "--out", "o.json",
                                 "--format", "csv"])
    assert result.exit_code == 2 and "allowed: tsv, jsonl, yandex" in result.output
    result = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--models", ","])
    assert result.exit_code == 2 and "at least one model" in result.output


def test_em_options_for_a_closed_form_fit_are_refused(tsv_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "cm.json"
    for opt in (["--max-iter", "3"], ["--tol", "1e-3"], ["--plain-em"]):
        result = runner.invoke(app, ["clicks", "fit", "--log", str(tsv_log), "--model", "cm", "--out", str(out), *opt])
        assert result.exit_code == 2, result.output
        assert opt[0] in result.output and "closed form" in result.output and not out.exists()


def test_unwritable_csv_is_one_line_exit_2(tsv_log: Path, tmp_path: Path) -> None:
    target = tmp_path / "no_such_dir" / "t.csv"
    result = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--models", "rctr", "--csv", str(target)])
    assert result.exit_code == 2, result.output
    assert "--csv" in result.output and str(target) in result.output and "Traceback" not in result.output


def test_printed_numbers_state_their_conventions(tsv_log: Path, tmp_path: Path) -> None:
    """The smoothing stated per model is what the estimators use (gctr/rctr: plain MLE,
    a = 0; the others Beta(1, 1)); the fit line says the LL is a natural-log sum."""
    import inspect

    from clickmodels.estimation import ESTIMATORS, EMOptions

    result = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--models", "gctr,rctr,dctr,pbm,sdbn:em"])
    assert result.exit_code == 0, result.output
    a0 = inspect.signature(ESTIMATORS["rctr"]).parameters["pseudo"].default
    a1 = inspect.signature(ESTIMATORS["dctr"]).parameters["pseudo"].default
    assert a0 == 0 and a1 == EMOptions().pseudo == 1
    assert "a = 0 (plain MLE): gctr, rctr" in result.output
    assert "a = 1: dctr, pbm, sdbn:em" in result.output
    out = tmp_path / "p.json"
    result = runner.invoke(app, ["clicks", "fit", "--log", str(tsv_log), "--model", "rctr", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "sum over 600 sessions, natural log" in result.output and "a = 0" in result.output
    # a saved fit is reported with the smoothing recorded in its file
    result = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--models", f"dctr,{out}"])
    assert result.exit_code == 0, result.output
    assert "a = 0 (plain MLE): rctr (p.json); a = 1: dctr" in result.output


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["fit", "--model", "pbm", "--out", "o.json", "--max-iter", "0"], "--max-iter"),
        (["fit", "--model", "pbm", "--out", "o.json", "--tol", "-1"], "--tol"),
        (["fit", "--model", "dctr", "--out", "o.json", "--pseudo", "-0.5"], "--pseudo"),
        (["fit", "--model", "nosuch", "--out", "o.json"], "--model"),
        (["fit", "--model", "cm", "--out", "o.json", "--method", "em"], "--method"),
        (["fit", "--model", "pbm", "--out", "o.json", "--method", "closed_form"], "--method"),
        (["fit", "--model", "dcm", "--out", "o.json", "--method", "mle"], "--method"),
        (["fit", "--model", "dcm", "--out", "/no/such/dir/o.json"], "--out"),
        (["evaluate", "--test-fraction", "1.5"], "--test-fraction"),
        (["evaluate", "--models", "rctr,cm", "--max-iter", "5"], "--max-iter"),
        (["evaluate", "--models", "rctr,nosuch"], "--models"),
        (["evaluate", "--models", "pbm:xx"], "--models"),
    ],
)
def test_bad_options_name_the_option_before_reading_the_log(args: list[str], option: str, tmp_path: Path) -> None:
    missing = tmp_path / "not_read.tsv"  # options are checked first: the missing log is not reached
    result = runner.invoke(app, ["clicks", args[0], "--log", str(missing), *args[1:]])
    assert result.exit_code == 2, result.output
    assert f"{option}:" in result.output and "not_read" not in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["--tol", "1e999"], "--tol: must be a finite number >= 0"),
    (["--pseudo", "1e999"], "--pseudo: must be a finite number >= 0"),  # was 'pair table values must be ...'
    (["--model", "dcm", "--bootstrap", "99999999999999999999"], "--bootstrap: must be an integer in [2, 100,000]"),
    (["--model", "dcm", "--bootstrap", "3", "--seed", "-1"], "--seed: must be at least 0, got -1"),  # a traceback
])  # fmt: skip
def test_fit_refuses_options_out_of_range(tsv_log: Path, tmp_path: Path, args: list[str], message: str) -> None:
    argv = ["clicks", "fit", "--log", str(tsv_log), "--out", str(tmp_path / "m.json")]
    argv += args if "--model" in args else ["--model", "pbm", *args]
    result = runner.invoke(app, argv)
    assert result.exit_code != 0 and message in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert not (tmp_path / "m.json").exists()


def test_evaluate_refuses_a_negative_seed(tsv_log: Path) -> None:
    result = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--models", "pbm", "--seed", "-1"])
    assert result.exit_code != 0 and "--seed: must be at least 0, got -1" in result.output, result.output


@pytest.mark.parametrize("key", ["tol", "pseudo"])
def test_api_fit_refuses_non_finite_options(tsv_log: Path, key: str) -> None:
    import onlineeval
    from onlineeval.errors import InputError

    with pytest.raises(InputError, match=f"{key} must be a finite number >= 0, got inf"):
        onlineeval.fit_clicks(tsv_log, "pbm", **{key: float("inf")})


def test_evaluate_says_when_its_test_log_is_the_training_log(tsv_log: Path, tmp_path: Path) -> None:
    """--test-log the same file as --log (or a copy of it) printed in-sample figures under 'held-out log'; the split
    line and a warning say they are in-sample (a model given as a fitted file is not trained on --log: no warning)."""
    import shutil

    copy = tmp_path / "copy.tsv"
    shutil.copy(tsv_log, copy)
    for test in (tsv_log, tsv_log.parent / "." / tsv_log.name, copy):
        res = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--test-log", str(test),
                                  "--models", "pbm"])
        assert res.exit_code == 0, res.output
        text = " ".join(res.output.split())
        assert f"(test log {test}: the training log --log {tsv_log} itself, so the figures of the models fitted on " \
               "it are in-sample, not held out" in text and "held-out log" not in text
        assert f"warning: --test-log {test} is the training log: the figures of the models fitted on it are " \
               "in-sample, not held out" in " ".join(res.stderr.split())
    other = tmp_path / "other.tsv"
    other.write_text("\n".join(tsv_log.read_text().splitlines()[:-1]) + "\n")  # one session fewer
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--test-log", str(other), "--models", "pbm"])
    assert res.exit_code == 0 and f"held-out log {other}" in res.output and "in-sample" not in res.output
    fit = tmp_path / "pbm.json"
    fitted = runner.invoke(app, ["clicks", "fit", "--log", str(other), "--model", "pbm", "--out", str(fit)])
    assert fitted.exit_code == 0, fitted.output
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(tsv_log), "--test-log", str(copy), "--models",
                              str(fit)])
    assert res.exit_code == 0 and "in-sample" not in res.output, res.output


def test_api_evaluate_clicks_says_when_test_holds_the_training_sessions(tsv_log: Path, tmp_path: Path) -> None:
    import shutil

    import onlineeval

    copy = tmp_path / "copy.tsv"
    shutil.copy(tsv_log, copy)
    frame = pd.read_csv(tsv_log, sep="\t", comment="#", header=None, names=["session", "query", "docs", "clicks"],
                        keep_default_na=False, dtype=str)
    for sessions, test in ((tsv_log, tsv_log), (tsv_log, str(copy)), (frame, frame)):
        with pytest.warns(UserWarning, match="test holds the training sessions: the figures of the models fitted on "
                                             "them are in-sample"):
            table = onlineeval.evaluate_clicks(sessions, "pbm", test=test)
        assert table.attrs["conventions"]["split"] == "in-sample: test holds the training sessions"


def test_evaluate_on_a_log_too_small_to_split_names_the_file(tmp_path: Path) -> None:
    log = tmp_path / "tiny.tsv"
    log.write_text("s1\tq1\td1,d2\td1\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["clicks", "evaluate", "--log", str(log), "--models", "pbm"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert f"{log}: cannot split 1 session with test_fraction=0.25: 0 would be held out" in text
    assert "--test-log" in text
