"""Second review, section A (onlineeval clicks / clickmodels): reading of click lists, labels of the estimators,
reporting of clipped probabilities, dropped clicks and refused models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import onlineeval
from clickmodels.logs import read_click_log
from onlineeval.errors import InputError


# -- A.5b / A.5: clicked ids vs 0/1 flags ------------------------------------------------------------------------------
def _int_doc_sessions() -> pd.DataFrame:
    """The review's frame: integer document ids, clicked ids 0/1 (meant: both documents / document 0 clicked)."""
    s = pd.DataFrame({"session": ["s1", "s2"], "query": ["q", "q"], "docs": [[0, 1], [0]], "clicks": [[0, 1], [0]]})
    return pd.concat([s] * 20, ignore_index=True)


def test_integer_ids_that_look_like_flags_are_refused_not_guessed() -> None:
    frame = _int_doc_sessions()
    with pytest.raises(InputError, match="could be the clicked documents' ids or 0/1 flags") as err:
        onlineeval.fit_clicks(frame, "dctr", pseudo=0)
    assert err.value.line == 1 and "clicks_as='ids'" in str(err.value) and "bools" in str(err.value)
    # said explicitly, each reading gives its own (exact) CTRs: clicked ids -> docs 0 and 1 always clicked
    as_ids = onlineeval.fit_clicks(frame, "dctr", pseudo=0, clicks_as="ids").attractiveness
    assert dict(zip(as_ids.doc, as_ids.value)) == {"0": 1.0, "1": 1.0}
    as_flags = onlineeval.fit_clicks(frame, "dctr", pseudo=0, clicks_as="flags").attractiveness
    assert dict(zip(as_flags.doc, as_flags.value)) == {"0": 0.0, "1": 1.0}
    # bools are flags without asking (lists of Python bools or numpy bool arrays)
    bools = frame.assign(clicks=[[False, True] if len(d) == 2 else np.array([False]) for d in frame["docs"]])
    by_bools = onlineeval.fit_clicks(bools, "dctr", pseudo=0).attractiveness
    assert dict(zip(by_bools.doc, by_bools.value)) == {"0": 0.0, "1": 1.0}
    # numpy integer ids are ids (not 'np.int64(1)' strings)
    arrays = frame.assign(docs=[np.array(d, dtype=np.int64) for d in frame["docs"]],
                          clicks=[np.array([1], dtype=np.int64) if len(d) == 2 else np.array([], dtype=np.int64)
                                  for d in frame["docs"]])
    by_arrays = onlineeval.fit_clicks(arrays, "dctr", pseudo=0).attractiveness
    assert dict(zip(by_arrays.doc, by_arrays.value)) == {"0": 0.0, "1": 1.0}
    with pytest.raises(InputError, match="evaluat|could be"):
        onlineeval.evaluate_clicks(frame, "dctr", test=frame)
    table = onlineeval.evaluate_clicks(frame, "dctr", test=frame, clicks_as="ids")
    fit = onlineeval.fit_clicks(frame, "dctr", clicks_as="ids")  # same training data, same LL per session
    assert table.loc["dctr", "log_likelihood"] == pytest.approx(fit.trace.log_likelihood[-1] / len(frame), rel=1e-12)


def test_integer_flags_with_string_ids_are_flags() -> None:
    """0/1 integers, one per shown document, that cannot be clicked ids (the documents are strings) are flags, as
    estimate()'s logged DataFrame reads them: the same CTRs as bools and as the clicked ids."""
    frame = pd.DataFrame({"query": ["q"] * 3, "docs": [["a", "b"], ["b", "a"], ["a", "b"]],
                          "clicks": [[1, 0], [0, 0], [1, 1]]})
    ints = onlineeval.fit_clicks(frame, "dctr", pseudo=0)
    flags = onlineeval.fit_clicks(frame.assign(clicks=[[True, False], [False, False], [True, True]]), "dctr",
                                  pseudo=0)
    ids = onlineeval.fit_clicks(frame.assign(clicks=[["a"], [], ["a", "b"]]), "dctr", pseudo=0)
    assert dict(zip(ints.attractiveness.doc, ints.attractiveness.value)) == {"a": 2 / 3, "b": 1 / 3}
    np.testing.assert_array_equal(flags.attractiveness.value, ids.attractiveness.value)
    np.testing.assert_array_equal(ints.attractiveness.value, ids.attractiveness.value)
    # a wrong length is not a flag list: read as ids, it names the unknown document
    with pytest.raises(InputError, match="not among the shown documents"):
        onlineeval.fit_clicks(frame.assign(clicks=[[1, 0, 1], [0, 0], [1, 1]]), "dctr")
    with pytest.raises(InputError, match="one bool per shown document"):
        onlineeval.fit_clicks(frame.assign(clicks=[[True], [False, True], []]), "dctr")
    with pytest.raises(InputError, match="mix bools and ids"):
        onlineeval.fit_clicks(frame.assign(clicks=[[True, "a"], ["b"], []]), "dctr")


def test_jsonl_flags_are_true_false_and_01_lists_get_the_hint(tmp_path: Path) -> None:
    bits = tmp_path / "bits.jsonl"
    bits.write_text(json.dumps({"session": "s1", "query": "q", "docs": ["a", "b"], "clicks": [1, 0]}) + "\n")
    with pytest.raises(InputError, match="not among the shown documents; clicks are the clicked documents' ids, "
                                         r"not 0/1 flags \(for one flag per shown document write true/false\)"):
        read_click_log(bits)
    tsv = tmp_path / "bits.tsv"
    tsv.write_text("s1\tq\ta,b\t1,0\n")
    with pytest.raises(InputError, match="clicks are the clicked documents' ids, not 0/1 flags"):
        read_click_log(tsv)
    flags = tmp_path / "flags.jsonl"
    flags.write_text(json.dumps({"query": "q", "docs": ["a", "b", "c"], "clicks": [False, True, True]}) + "\n")
    ids = tmp_path / "ids.jsonl"
    ids.write_text(json.dumps({"query": "q", "docs": ["a", "b", "c"], "clicks": ["b", "c"]}) + "\n")
    a, b = read_click_log(flags), read_click_log(ids)
    np.testing.assert_array_equal(a.clicks, b.clicks)
    np.testing.assert_array_equal(a.click_order, b.click_order)
    short = tmp_path / "short.jsonl"
    short.write_text(json.dumps({"query": "q", "docs": ["a", "b"], "clicks": [True]}) + "\n")
    with pytest.raises(InputError, match="one per shown document: 1 flags for 2 documents"):
        read_click_log(short)
    # integers stay ids in the file format: documents 0 and 1 clicked
    ints = tmp_path / "ints.jsonl"
    ints.write_text(json.dumps({"query": "q", "docs": [0, 1], "clicks": [0, 1]}) + "\n")
    assert read_click_log(ints).clicks.tolist() == [[True, True]]


# -- A.1: the DCM / SDBN closed forms are labelled as the approximations they are --------------------------------------
def _simulate_sdbn(alpha: np.ndarray, sigma: np.ndarray, n: int, k: int, rng: np.random.Generator):  # noqa: ANN202
    """SDBN sessions (DBN with gamma = 1), one query, every session a random permutation of the documents: click
    with alpha, after a click stop with sigma, otherwise examine the next slot. Written here from the model's
    definition, independently of clickmodels' samplers."""
    from clickmodels.logs import from_arrays

    docs = np.argsort(rng.random((n, alpha.size)), axis=1)[:, :k]
    u, v = rng.random((n, k)), rng.random((n, k))
    clicks = np.zeros((n, k), dtype=bool)
    going = np.ones(n, dtype=bool)
    for r in range(k):
        clicks[:, r] = going & (u[:, r] < alpha[docs[:, r]])
        going &= ~(clicks[:, r] & (v[:, r] < sigma[docs[:, r]]))
    return from_arrays(np.zeros(n, dtype=np.int64), docs, clicks)


def test_sdbn_closed_form_is_biased_and_em_recovers_the_truth() -> None:
    """Review 2 A.1: 20 independent logs of 2,000 SDBN sessions; the mean over documents of (fitted - true)
    satisfaction, averaged over the logs, with its SE from the spread over the logs (t, 19 df). The closed form
    (last click taken as satisfying) is far above the truth; EM (the MLE) is within 4 SE, as is its attractiveness."""
    from clickmodels.estimation import fit_log

    rng = np.random.default_rng(20261202)
    alpha = np.array([0.8, 0.65, 0.5, 0.4, 0.3, 0.2])
    sigma = np.array([0.3, 0.6, 0.4, 0.7, 0.5, 0.35])
    errors: dict[str, list[float]] = {"closed_form": [], "em": []}
    alpha_em: list[float] = []
    for _ in range(20):
        log = _simulate_sdbn(alpha, sigma, 2000, 5, rng)
        for method in errors:
            fit = fit_log("sdbn", log, method=method)
            idx = fit.satisfaction.doc.astype(int)
            errors[method].append(float(np.mean(fit.satisfaction.value - sigma[idx])))
            if method == "em":
                alpha_em.append(float(np.mean(fit.attractiveness.value - alpha[fit.attractiveness.doc.astype(int)])))
    t = {m: np.mean(e) / (np.std(e, ddof=1) / np.sqrt(len(e))) for m, e in errors.items()}
    assert np.mean(errors["closed_form"]) > 0.05 and t["closed_form"] > 4, (errors, t)
    assert abs(t["em"]) < 4, (errors, t)
    assert abs(np.mean(alpha_em) / (np.std(alpha_em, ddof=1) / np.sqrt(len(alpha_em)))) < 4
    closed, em = fit_log("sdbn", log, method="closed_form"), fit_log("sdbn", log)  # EM is the default (review 15)
    assert "last-click approximation" in closed.estimator and "not the maximum-likelihood" in closed.estimator
    assert "the default EM fit" in closed.estimator and em.estimator.startswith("EM: the maximum-likelihood")
    assert em.trace == fit_log("sdbn", log, method="em").trace
    assert closed.to_dict()["fit"]["estimator"] == closed.estimator
    assert "last-click" not in fit_log("cm", log).estimator  # CM's closed form is its MLE


def test_cli_fit_says_approximation_and_dcm_last_rank_is_not_identified(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    log = _simulate_sdbn(np.array([0.7, 0.5, 0.3, 0.4]), np.array([0.5, 0.4, 0.6, 0.3]), 400, 3,
                         np.random.default_rng(1))
    from clickmodels.logs import write_tsv

    write_tsv(log, tmp_path / "log.tsv")
    runner = CliRunner()
    closed = ["--method", "closed_form"]
    for model, extra, words in (("sdbn", closed, "closed form: last-click approximation, not the MLE, biased on "
                                 "data from the model itself; without --method closed_form the fit is EM"),
                                ("dcm", closed, "closed form: last-click approximation"),
                                ("dcm", [], "(EM, the maximum likelihood, "), ("cm", [], "(closed form; Beta")):
        out = tmp_path / f"{model}.json"
        res = runner.invoke(app, ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--model", model,
                                  "--out", str(out), "-q", *extra])
        assert res.exit_code == 0, res.output
        assert words in res.stdout, res.stdout
        doc = json.loads(out.read_text())
        assert ("approximation" in doc["fit"]["estimator"]) == (model != "cm" and bool(extra))
        if model == "dcm":
            assert "continuation[2] (after a click at rank 3" in doc["conventions"]["dcm_last_rank"]
            assert "note (dcm_last_rank): continuation[2]" in res.stdout
            assert "not identified" in doc["conventions"]["dcm_last_rank"]
            # and the value it describes: the prior's 0.5 (EM), the pseudo-count's 1 / (n + 2) (closed form)
            last = doc["params"]["continuation"][2]
            n3 = int(log.clicks[:, 2].sum())
            assert last == (0.5 if not extra else pytest.approx(1 / (n3 + 2), rel=1e-12))
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(tmp_path / "log.tsv"), "--models",
                              "sdbn:closed_form,sdbn,sdbn:em,cm", "-q"])
    assert res.exit_code == 0, res.output
    assert "estimators: sdbn:closed_form: closed form, the last-click approximation (not the MLE" in res.stdout
    rows = {line.split()[0]: line.split()[1:] for line in res.stdout.splitlines() if line.startswith(("sdbn", "cm"))}
    assert rows["sdbn"] == rows["sdbn:em"] != rows["sdbn:closed_form"], rows  # sdbn is the EM fit


# -- A.2: PBM / UBM examination is on an arbitrary scale ---------------------------------------------------------------
@pytest.mark.parametrize("model", ["pbm", "ubm"])
def test_position_models_say_their_examination_scale_is_arbitrary(model: str, tmp_path: Path) -> None:
    from dataclasses import replace

    from typer.testing import CliRunner

    from clickmodels.estimation import fit_log
    from clickmodels.logs import write_tsv
    from onlineeval.cli import app

    log = _simulate_sdbn(np.array([0.7, 0.5, 0.3, 0.4]), np.array([0.5, 0.4, 0.6, 0.3]), 400, 3,
                         np.random.default_rng(2))
    fit = fit_log(model, log)
    # the fact the note states: examination x c and attractiveness / c give the same likelihood
    exam, attr = np.asarray(fit.examination), fit.attractiveness
    c = 0.5 * (max(attr.value.max(), attr.default) + 1 / exam.max())  # keeps both within [0, 1]
    assert abs(c - 1) > 0.02
    scaled = replace(fit, examination=fit.examination * c,
                     attractiveness=replace(fit.attractiveness, value=fit.attractiveness.value / c,
                                            default=fit.attractiveness.default / c))
    np.testing.assert_allclose(scaled.log_likelihood(log), fit.log_likelihood(log), rtol=1e-12)
    note = fit.to_dict()["conventions"][f"{model}_scale"]
    first = float(np.asarray(fit.examination).flat[0])
    assert "arbitrary scale" in note and f"here {first:.4g} at rank 1" in note and "across fits" in note
    write_tsv(log, tmp_path / "log.tsv")
    res = CliRunner().invoke(app, ["clicks", "fit", "--log", str(tmp_path / "log.tsv"), "--model", model,
                                   "--out", str(tmp_path / "f.json"), "-q"])
    assert res.exit_code == 0, res.output
    assert f"note ({model}_scale): only examination" in res.stdout
    assert json.loads((tmp_path / "f.json").read_text())["conventions"][f"{model}_scale"] == note


# -- A.3: sessions whose log-likelihood hit the 1e-10 floor are counted ------------------------------------------------
def test_evaluate_counts_sessions_clipped_at_the_floor(tmp_path: Path) -> None:
    """cm gives a second click probability 0: the clipped sessions are exactly the test sessions with >= 2 distinct
    clicked documents (counted here from the file); rctr clips none."""
    from typer.testing import CliRunner

    from onlineeval.cli import app

    rng = np.random.default_rng(3)
    rows = []
    for i in range(300):
        shown = list(rng.permutation(["a", "b", "c", "d"]))
        rows.append(f"s{i}\tq\t{','.join(shown)}\t{','.join(d for d in shown if rng.random() < 0.3)}\n")
    (tmp_path / "log.tsv").write_text("".join(rows))
    test_rows = rows[200:]
    (tmp_path / "test.tsv").write_text("".join(test_rows))
    (tmp_path / "train.tsv").write_text("".join(rows[:200]))
    multi = sum(len(set(filter(None, r.rstrip("\n").split("\t")[3].split(",")))) >= 2 for r in test_rows)
    assert 0 < multi < 100
    csv = tmp_path / "t.csv"
    res = CliRunner().invoke(app, ["clicks", "evaluate", "--log", str(tmp_path / "train.tsv"), "--test-log",
                                   str(tmp_path / "test.tsv"), "--models", "cm,rctr", "--csv", str(csv)])
    assert res.exit_code == 0, res.output
    assert (f"cm: {multi} of 100 test sessions have clicks the model gives probability 0 (clipped at 1e-10"
            in res.stdout), res.stdout
    assert "rctr:" not in res.stdout.split("conditional_perplexity")[-1]
    table = pd.read_csv(csv, index_col=0)
    assert table.loc["cm", "n_clipped"] == multi and table.loc["rctr", "n_clipped"] == 0
    api = onlineeval.evaluate_clicks(tmp_path / "train.tsv", "cm,rctr", test=tmp_path / "test.tsv")
    assert api.loc["cm", "n_clipped"] == multi
    assert read_click_log(tmp_path / "test.tsv").n_sessions == 100


# -- A.4: clicks a Yandex-format log drops are reported ----------------------------------------------------------------
def test_dropped_yandex_clicks_are_reported(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    lines = [f"q{i % 3}\t1,2,3,4 : {(i % 4) + 1}" for i in range(40)]
    lines[5] = "q2\t1,2,3,4 : 2, 9"  # 9 is not on the page
    lines[7] = "q1\t1,2,3,4 : 7"  # a cut '7x' click
    train, test = tmp_path / "train.yandex", tmp_path / "test.yandex"
    train.write_text("\n".join(lines) + "\n")
    test.write_text("q0\t1,2,3,4 : 1\nq1\t1,2,3,4 : 5\n")
    runner = CliRunner()
    res = runner.invoke(app, ["clicks", "fit", "--log", str(train), "--model", "rctr", "--out",
                              str(tmp_path / "f.json")])
    assert res.exit_code == 0, res.output
    assert f"{train}: ignored 2 clicks on documents not on the page (Yandex format" in res.stdout
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(train), "--test-log", str(test), "--models", "rctr"])
    assert res.exit_code == 0, res.output
    assert f"{train}: ignored 2 clicks" in res.stdout and f"{test}: ignored 1 click on documents" in res.stdout
    clean = tmp_path / "clean.yandex"
    clean.write_text("q0\t1,2,3,4 : 1\n")
    res = runner.invoke(app, ["clicks", "fit", "--log", str(clean), "--model", "rctr", "--out",
                              str(tmp_path / "g.json")])
    assert res.exit_code == 0 and "ignored" not in res.stdout
    # the Python API warns with the same line (a file read by fit_clicks / evaluate_clicks)
    import warnings

    with pytest.warns(UserWarning, match=r"train\.yandex: ignored 2 clicks on documents not on the page"):
        onlineeval.fit_clicks(str(train), "rctr")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        onlineeval.fit_clicks(str(clean), "rctr")  # nothing dropped: no warning


# -- A.6: a model that cannot score the test log is a refused row, not the end of the comparison ---------------------
def test_evaluate_keeps_the_models_that_can_score(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    rng = np.random.default_rng(4)

    def lines(prefix: str, n: int, deep: int) -> str:
        out = []
        for i in range(n):
            shown = [str(d) for d in rng.permutation(6)[: 5 if i < deep else 3]]
            out.append(f"{prefix}{i}\tq\t{','.join(shown)}\t{','.join(d for d in shown if rng.random() < 0.3)}\n")
        return "".join(out)

    train, test = tmp_path / "tr.tsv", tmp_path / "te.tsv"
    train.write_text(lines("s", 300, 0))
    test.write_text(lines("t", 50, 1))  # one test list of 5
    csv = tmp_path / "t.csv"
    runner = CliRunner()
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(train), "--test-log", str(test), "--models",
                              "pbm,dbn,cm", "--csv", str(csv), "-q"])
    assert res.exit_code == 0, res.output
    assert ("pbm: refused, cannot score the test log: pbm examination was fitted for 3 ranks but the log has lists "
            "of 5 (a fitted model covers the longest lists of its training log: fit it on logs with lists of at least "
            "5)") in res.stdout
    assert "warning: 1 of 3 models not scored (pbm)" in res.stderr
    table = pd.read_csv(csv, index_col=0, keep_default_na=False, na_values=[""])
    assert table.loc["pbm", "log_likelihood"] != table.loc["pbm", "log_likelihood"]  # NaN
    assert table.loc["pbm", "refused"].startswith("pbm examination was fitted for 3 ranks")
    # the models that scored have the numbers they have alone
    alone = onlineeval.evaluate_clicks(train, "dbn,cm", test=test)
    np.testing.assert_allclose(table.loc[["dbn", "cm"], "log_likelihood"], alone["log_likelihood"], rtol=1e-12)
    assert "refused" not in alone.columns
    with pytest.warns(UserWarning, match=r"1 of 2 models not scored .*pbm: pbm examination was fitted for 3 ranks"):
        api = onlineeval.evaluate_clicks(train, "pbm,dbn,", test=test)  # a trailing comma as the CLI takes it
    assert api.loc["pbm", "refused"].startswith("pbm examination") and api.loc["dbn", "refused"] == ""
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(train), "--test-log", str(test), "--models",
                              "pbm,ubm", "-q"])
    assert res.exit_code == 2
    assert "no model could score the test log: pbm: pbm examination was fitted for 3 ranks" in res.output
    assert "ubm: ubm examination was fitted for 3 ranks" in res.output
    with pytest.raises(InputError, match="no model could score the test sessions"):
        onlineeval.evaluate_clicks(train, "pbm", test=test)


# -- A.7: a fitted position model on a longer page: the message in user terms ------------------------------------------
@pytest.mark.parametrize("model", ["pbm", "ubm", "dcm"])
def test_fitted_model_on_longer_lists_says_what_to_do(model: str) -> None:
    from clickmodels.estimation import fit_log

    log = _simulate_sdbn(np.array([0.7, 0.5, 0.3, 0.4, 0.6]), np.array([0.5, 0.4, 0.6, 0.3, 0.5]), 300, 4,
                         np.random.default_rng(5))
    fitted = fit_log(model, log).to_model()
    with pytest.raises(InputError) as err:
        fitted.click_probabilities(_impressions_of_depth(10))
    text = str(err.value)
    assert "the lists have 10 slots" in text and "covers" in text and "4 ranks" in text
    assert "fit it on logs with lists of at least 10, or show at most 4 documents" in text and "batch" not in text


def _impressions_of_depth(k: int):  # noqa: ANN202
    from clickmodels.base import Impressions

    return Impressions(query=np.zeros(2, dtype=np.int64), docs=np.tile(np.arange(k, dtype=np.int64), (2, 1)))


# -- E.2: evaluate_clicks carries the conventions the CLI prints -------------------------------------------------------
def test_evaluate_clicks_has_the_printed_conventions_in_attrs(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onlineeval.cli import app

    log = _simulate_sdbn(np.array([0.7, 0.5, 0.3, 0.4]), np.array([0.5, 0.4, 0.6, 0.3]), 300, 3,
                         np.random.default_rng(6))
    from clickmodels.logs import write_tsv

    write_tsv(log, tmp_path / "log.tsv")
    table = onlineeval.evaluate_clicks(tmp_path / "log.tsv", "rctr,sdbn:closed_form", seed=1)
    conv = table.attrs["conventions"]
    res = CliRunner().invoke(app, ["clicks", "evaluate", "--log", str(tmp_path / "log.tsv"), "--models",
                                   "rctr,sdbn:closed_form", "--seed", "1"])
    assert res.exit_code == 0, res.output
    printed = next(line for line in res.stdout.splitlines() if line.startswith("conventions: "))
    assert printed == "conventions: " + "; ".join(conv[k] for k in ("log_likelihood", "perplexity", "clipping",
                                                                    "smoothing", "unseen_pairs"))
    assert "a = 0 (plain MLE): rctr; a = 1: sdbn:closed_form" in conv["smoothing"]
    assert "sdbn:closed_form: closed form (last-click approximation" in conv["estimators"]
    assert conv["split"].startswith("random split, 25% of sessions held out") and "default_rng(1)" in conv["split"]
    assert "n_clipped" in conv and "1e-10" in conv["clipping"]
    assert table[["log_likelihood"]].attrs["conventions"] == conv  # pandas carries attrs through selections


@pytest.mark.parametrize("key", ["clicks", "docs", "query"])
def test_jsonl_key_twice_in_one_object_is_refused(tmp_path: Path, key: str) -> None:
    """A click log line naming a key twice was read with the last value (json.loads's default), as the logged
    (estimate) reader refuses it."""
    fields = {"session": '"s1"', "query": '"q"', "docs": '["a", "b"]', "clicks": '["a"]'}
    body = ", ".join(f'"{k}": {v}' for k, v in fields.items()) + f', "{key}": {fields[key]}'
    path = tmp_path / "twice.jsonl"
    path.write_text('{"session": "s0", "query": "q", "docs": ["a", "b"], "clicks": []}\n{' + body + "}\n")
    with pytest.raises(InputError, match=f"twice.jsonl:2: key '{key}' appears twice in one object"):
        read_click_log(path)
