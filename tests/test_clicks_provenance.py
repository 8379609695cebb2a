"""`clicks fit` and `clicks evaluate` name what determined their numbers: each input file's SHA-256 (the logs, the
saved fits given to evaluate) and a fingerprint of those with the options and the version, as `evaluate` and
`estimate` do. The fitted-parameters file keeps them (it is itself an input of simulate and clicks evaluate)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from clickmodels.estimation import load_fit
from onlineeval.cli import app

runner = CliRunner()


def _write_log(path: Path, seed: int = 3, sessions: int = 400) -> Path:
    rng = np.random.default_rng(seed)
    lines = ["# session\tquery\tdocs\tclicks"]
    attr = {"a": 0.7, "b": 0.4, "c": 0.2, "x": 0.5, "y": 0.3, "z": 0.1}
    for s in range(sessions):
        q, docs = ("q1", ["a", "b", "c"]) if s % 2 else ("q2", ["x", "y", "z"])
        docs = list(rng.permutation(docs))
        clicked = [d for r, d in enumerate(docs) if rng.random() < attr[d] * (1.0, 0.6, 0.3)[r]]
        lines.append(f"s{s}\t{q}\t{','.join(docs)}\t{','.join(clicked)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fit(log: Path, out: Path, *extra: str) -> tuple[dict, str]:
    res = runner.invoke(app, ["clicks", "fit", "--log", str(log), "--model", "pbm", "--out", str(out), "-q", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text(encoding="utf-8")), res.output


def test_fit_records_the_log_digest_the_options_and_a_fingerprint(tmp_path: Path) -> None:
    log = _write_log(tmp_path / "log.tsv")
    doc, out = _fit(log, tmp_path / "a.json")
    assert doc["inputs"]["log"]["sha256"] == _sha(log) and doc["inputs"]["log"]["bytes"] == log.stat().st_size
    assert doc["options"]["model"] == "pbm" and doc["options"]["command"] == "clicks fit"
    assert f"log {_sha(log)[:12]}; fingerprint: {doc['fingerprint']}" in out
    load_fit(tmp_path / "a.json")  # still a fitted-parameters file
    # the same bytes elsewhere: the same fingerprint; one option or one session more: another
    copy = tmp_path / "sub"
    copy.mkdir()
    (copy / "log.tsv").write_bytes(log.read_bytes())
    assert _fit(copy / "log.tsv", tmp_path / "b.json")[0]["fingerprint"] == doc["fingerprint"]
    assert _fit(log, tmp_path / "c.json", "--pseudo", "2")[0]["fingerprint"] != doc["fingerprint"]
    other = _write_log(tmp_path / "other.tsv", sessions=401)
    assert _fit(other, tmp_path / "d.json")[0]["fingerprint"] != doc["fingerprint"]


def test_evaluate_names_its_logs_and_saved_fits(tmp_path: Path) -> None:
    train = _write_log(tmp_path / "train.tsv")
    test = _write_log(tmp_path / "test.tsv", seed=4)
    _fit(train, tmp_path / "pbm.json")
    saved = tmp_path / "pbm.json"
    csv = tmp_path / "t.csv"
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(train), "--test-log", str(test), "--models",
                              f"{saved},cm", "-q", "--csv", str(csv)])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(csv, index_col=0, keep_default_na=False)
    assert set(table["log_sha256"]) == {_sha(train)} and set(table["test_log_sha256"]) == {_sha(test)}
    assert table.loc["pbm (pbm.json)", "model_sha256"] == _sha(saved) and table.loc["cm", "model_sha256"] == ""
    (fp,) = set(table["fingerprint"])
    line = next(t for t in res.output.splitlines() if t.startswith("inputs (SHA-256"))
    assert line.startswith(f"inputs (SHA-256, first 12 hex digits; --csv: in full): log {_sha(train)[:12]}, "
                           f"test log {_sha(test)[:12]}, model {saved} {_sha(saved)[:12]}; fingerprint: {fp} ")
    # a random split records its seed: another seed, another fingerprint
    fps = set()
    for seed in ("0", "1"):
        res = runner.invoke(app, ["clicks", "evaluate", "--log", str(train), "--models", "cm", "-q", "--seed", seed,
                                  "--csv", str(csv)])
        assert res.exit_code == 0, res.output
        (fp,) = set(pd.read_csv(csv, keep_default_na=False)["fingerprint"])
        fps.add(fp)
        assert set(pd.read_csv(csv, keep_default_na=False)["test_log_sha256"]) == {""}
    assert len(fps) == 2


def test_a_saved_fit_with_its_provenance_still_loads(tmp_path: Path) -> None:
    """load_fit (what simulate's fitted users and clicks evaluate read) takes the file: the provenance keys are
    extra, not an error."""
    log = _write_log(tmp_path / "log.tsv")
    _fit(log, tmp_path / "f.json")
    fit = load_fit(tmp_path / "f.json")
    assert fit.name == "pbm" and np.all(np.asarray(fit.examination) > 0)


def test_the_api_gives_the_cli_s_fingerprint_and_digests_frames_and_fitted_models(tmp_path: Path) -> None:
    import onlineeval

    train = _write_log(tmp_path / "train.tsv")
    test = _write_log(tmp_path / "test.tsv", seed=4)
    for extra, kwargs in (([], {"seed": 3}), (["--test-log", str(test)], {"test": str(test)})):
        api = onlineeval.evaluate_clicks(str(train), "cm,pbm", **kwargs)
        cli = runner.invoke(app, ["clicks", "evaluate", "--log", str(train), "--models", "cm,pbm", "-q", *extra,
                                  *(["--seed", "3"] if "seed" in kwargs else [])])
        assert f"; fingerprint: {api.attrs['fingerprint']} (" in cli.output
        assert api.attrs["inputs"]["log"]["sha256"] == _sha(train)
    frame = pd.DataFrame({"session": ["s1", "s2", "s3", "s4"], "query": ["q"] * 4, "docs": [["a", "b"]] * 4,
                          "clicks": [["a"], [], ["b"], ["a"]]})
    fitted = onlineeval.fit_clicks(frame, "pbm")
    one = onlineeval.evaluate_clicks(frame, {"pbm": fitted}, test=frame)
    assert one.attrs["inputs"]["log"]["in_memory"] == "sessions" and one.attrs["inputs"]["model pbm"]["sha256"]
    changed = frame.assign(clicks=[["a"], [], ["b"], ["b"]])
    two = onlineeval.evaluate_clicks(frame, {"pbm": onlineeval.fit_clicks(changed, "pbm")}, test=frame)
    assert two.attrs["inputs"]["log"] == one.attrs["inputs"]["log"]
    assert two.attrs["inputs"]["model pbm"] != one.attrs["inputs"]["model pbm"]
    assert two.attrs["fingerprint"] != one.attrs["fingerprint"]


def test_fit_clicks_carries_the_cli_s_provenance_and_save_keeps_it(tmp_path: Path) -> None:
    import onlineeval

    log = _write_log(tmp_path / "log.tsv")
    doc, _ = _fit(log, tmp_path / "cli.json")
    api = onlineeval.fit_clicks(str(log), "pbm")
    assert api.provenance["fingerprint"] == doc["fingerprint"]
    assert api.provenance["inputs"]["log"]["sha256"] == _sha(log)
    api.save(tmp_path / "api.json")
    saved = json.loads((tmp_path / "api.json").read_text(encoding="utf-8"))
    assert saved["fingerprint"] == doc["fingerprint"] and saved["options"] == doc["options"]
    back = load_fit(tmp_path / "api.json")
    assert back.provenance["fingerprint"] == doc["fingerprint"]
    frame = pd.DataFrame({"session": ["s1", "s2", "s3"], "query": ["q"] * 3, "docs": [["a", "b"]] * 3,
                          "clicks": [["a"], [], ["b"]]})
    one = onlineeval.fit_clicks(frame, "pbm").provenance
    two = onlineeval.fit_clicks(frame.assign(clicks=[["a"], [], ["a"]]), "pbm").provenance
    assert one["inputs"]["log"]["in_memory"] == "sessions" and one["fingerprint"] != two["fingerprint"]
    # digested as read: a column the reader ignores, or a missing clicks cell as None or [], changes nothing
    extra = onlineeval.fit_clicks(frame.assign(timestamp=[1, 2, 3]), "pbm").provenance
    missing = frame.astype({"clicks": object})
    missing.at[1, "clicks"] = None
    assert extra["fingerprint"] == one["fingerprint"] == onlineeval.fit_clicks(missing, "pbm").provenance["fingerprint"]
