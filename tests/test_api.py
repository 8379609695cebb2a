"""The Python API (:mod:`onlineeval.api`) against the CLI and the file readers.

References: the CLI's own JSON output on the same inputs (``onlineeval evaluate``, ``simulate``,
``clicks evaluate``, ``validate``, ``estimate``), trec_eval's printed values for the bundled
test files, and direct computations (brute-force IPS on a hand-made log).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import onlineeval
from onlineeval import api
from onlineeval.cli import app
from onlineeval.errors import ConfigError, InputError

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()

SMALL = {
    "seed": 3,
    "replicates": 4,
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 200, "candidates": 15},
    "users": {"population": 400},
    "traffic": {"days": 3, "queries_per_day": 500, "batch_hours": 6},
    "analysis": {"truth_impressions": 20000},
}

QRELS = "q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq2 0 d 1\nq2 0 e 0\nq3 0 f 0\n"
RUN_A = "q1 Q0 a 1 3.0 A\nq1 Q0 b 2 2.0 A\nq1 Q0 c 3 1.0 A\nq2 Q0 e 1 2.0 A\nq2 Q0 d 2 2.0 A\nq3 Q0 f 1 1 A\n"
RUN_B = "q1 Q0 c 1 3.0 B\nq1 Q0 a 2 2.0 B\nq2 Q0 d 1 5.0 B\nq2 Q0 x 2 4.0 B\nq3 Q0 f 1 1 B\n"


def cli_json(*args: str) -> dict:
    res = runner.invoke(app, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (("qrels.txt", QRELS), ("A.txt", RUN_A), ("B.txt", RUN_B)):
        out[name] = tmp_path / name
        out[name].write_text(text)
    return out


def assert_same_as_cli(res: api.Evaluation, doc: dict) -> None:
    """Means, counts and every paired comparison field equal the CLI's JSON."""
    assert res.conventions.describe() == doc["conventions"]
    for entry in doc["systems"]:
        for metric, rec in entry["metrics"].items():
            ours = res.mean(entry["name"], metric)
            assert (rec["mean"] is None and np.isnan(ours)) or ours == rec["mean"], (entry["name"], metric)
        counts = res.aggregate[res.aggregate["system"] == entry["name"]].iloc[0]
        for k, v in entry["counts"].items():
            assert counts[f"queries_{k}"] == v
    frame = res.comparisons_frame()
    assert len(frame) == len(doc.get("comparisons", []))
    for ours, theirs in zip(frame.to_dict("records"), doc.get("comparisons", [])):
        for k, v in theirs.items():
            x = ours[k]
            if v is None:
                assert x is None or (isinstance(x, float) and np.isnan(x)), k
            else:
                assert x == v, k


def test_evaluate_same_numbers_as_the_cli_on_the_trec_eval_files(shared_data: Path) -> None:
    d = shared_data / "trec_eval"
    metrics = "AP,P@10,RPrec,nDCG@10,RBP(p=0.8),ERR@20,bpref"
    for preset in ("trec_eval", "default"):
        doc = cli_json("evaluate", "--qrels", str(d / "qrels.test"), "--run", str(d / "results.test"),
                       "--run", str(d / "results.trunc"), "--metrics", metrics, "--preset", preset,
                       "--missing", "zero", "--permutations", "500", "--bootstrap", "500", "--seed", "4")
        res = onlineeval.evaluate(d / "qrels.test", [d / "results.test", d / "results.trunc"], metrics,
                                  preset=preset, missing="zero", permutations=500, bootstrap=500, seed=4)
        assert res.systems == ["results.test", "results.trunc"]  # the CLI's names for these files
        assert_same_as_cli(res, doc)
        for entry in doc["systems"]:  # RBP's residual as the CLI reports it
            assert res.aggregate.set_index(["system", "metric"]).loc[(entry["name"], "RBP(p=0.8)"), "residual"] == \
                entry["metrics"]["RBP(p=0.8)"]["residual"]
    # and trec_eval's own printed values
    printed = {}
    for line in (d / "out.test").read_text().splitlines():
        name, qid, value = line.split()
        if qid == "all" and name in ("map", "P_10", "Rprec"):
            printed[name] = float(value)
    res = onlineeval.evaluate(d / "qrels.test", d / "results.test", "map,P_10,Rprec", preset="trec_eval")
    assert res.systems == ["results"]  # one file: its stem, as the CLI names it
    assert res.mean("results", "map") == res.mean("results", "AP")  # trec_eval's name reads too
    assert [str(t.given) for t in res.translations] == ["map", "P_10", "Rprec"]
    for ours, theirs in (("AP", "map"), ("P@10", "P_10"), ("RPrec", "Rprec")):
        assert abs(res.mean("results", ours) - printed[theirs]) <= 0.5e-4


def frames_from_files(files: dict[str, Path]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """ir_measures-style frames built by splitting the text files by hand (not with onlineeval's readers)."""
    q = pd.DataFrame([ln.split() for ln in QRELS.splitlines()], columns=["query_id", "it", "doc_id", "relevance"])
    q["relevance"] = q["relevance"].astype(int)
    runs = {}
    for name, text in (("A", RUN_A), ("B", RUN_B)):
        r = pd.DataFrame([ln.split() for ln in text.splitlines()],
                         columns=["query_id", "Q0", "doc_id", "rank", "score", "tag"])
        r["score"] = r["score"].astype(float)
        runs[name] = r[["query_id", "doc_id", "score"]]
    return q[["query_id", "doc_id", "relevance"]], runs


@pytest.mark.parametrize("preset", ["trec_eval", "default", "lightgbm"])
def test_ir_measures_and_pytrec_eval_inputs_equal_the_file_readers(files, preset) -> None:
    metrics = "nDCG@10,AP,RR,P@2,ERR@10,RBP(p=0.5)"
    opts = {"preset": preset, "permutations": 300, "bootstrap": 300, "missing": "zero"}
    from_files = onlineeval.evaluate(files["qrels.txt"], {"A": files["A.txt"], "B": files["B.txt"]}, metrics, **opts)
    qf, runs = frames_from_files(files)
    from_frames = onlineeval.evaluate(qf, runs, metrics, **opts)
    qd = {q: dict(zip(g["doc_id"], g["relevance"])) for q, g in qf.groupby("query_id", sort=False)}
    rd = {n: {q: dict(zip(g["doc_id"], g["score"])) for q, g in r.groupby("query_id", sort=False)}
          for n, r in runs.items()}
    from_dicts = onlineeval.evaluate(qd, rd, metrics, **opts)
    for other in (from_frames, from_dicts):
        pd.testing.assert_frame_equal(other.aggregate, from_files.aggregate)
        pd.testing.assert_frame_equal(other.per_query.reset_index(drop=True),
                                      from_files.per_query.reset_index(drop=True))
        pd.testing.assert_frame_equal(other.comparisons_frame(), from_files.comparisons_frame())
    # the CLI on the same files
    doc = cli_json("evaluate", "--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run",
                   str(files["B.txt"]), "--metrics", metrics, "--preset", preset, "--missing", "zero",
                   "--permutations", "300", "--bootstrap", "300")
    assert_same_as_cli(from_files, doc)


def test_evaluate_segments_same_as_the_cli(files, tmp_path: Path) -> None:
    seg_file = tmp_path / "attrs.tsv"
    seg_file.write_text("query\tkind\nq1\thead\nq2\ttail\nq3\ttail\n")
    opts = {"permutations": 300, "bootstrap": 300, "missing": "zero"}
    runs = {"A": files["A.txt"], "B": files["B.txt"]}
    by_file = onlineeval.evaluate(files["qrels.txt"], runs, "AP,RR", segments=seg_file, **opts)
    frame = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "kind": ["head", "tail", "tail"]})
    by_frame = onlineeval.evaluate(files["qrels.txt"], runs, "AP,RR", segments=frame, **opts)
    pd.testing.assert_frame_equal(by_file.comparisons_frame(), by_frame.comparisons_frame())
    pd.testing.assert_frame_equal(by_file.segment_means, by_frame.segment_means)
    doc = cli_json("evaluate", "--qrels", str(files["qrels.txt"]), "--run", str(files["A.txt"]), "--run",
                   str(files["B.txt"]), "--metrics", "AP,RR", "--missing", "zero", "--segments", str(seg_file),
                   "--permutations", "300", "--bootstrap", "300")
    assert_same_as_cli(by_file, doc)
    assert len(doc["comparisons"]) > 2  # the segment rows are there
    ours = by_file.segment_means.to_dict("records")
    assert len(ours) == len(doc["segment_means"])
    for a, b in zip(ours, doc["segment_means"]):
        assert {k: a[k] for k in b} == b
    with pytest.raises(InputError, match="evaluated"):
        onlineeval.evaluate(files["qrels.txt"], runs, "AP", segments=frame.assign(query_id=["x", "y", "z"]), **opts)


def test_evaluate_single_run_and_the_tie_rule_follows_row_order() -> None:
    qrels = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "relevance": [0, 1]})
    run = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0, 1.0]})
    res = onlineeval.evaluate(qrels, run, "RR", ties="input_order")
    assert res.systems == ["run"] and res.comparisons == () and res.paired_queries is None
    assert res.mean("run", "RR") == 0.5  # a first, as given
    assert onlineeval.evaluate(qrels, run.iloc[::-1], "RR", ties="input_order").mean("run", "RR") == 1.0
    assert onlineeval.evaluate(qrels, run, "RR", preset="trec_eval").mean("run", "RR") == 1.0  # docno desc


def test_evaluate_typed_errors(files) -> None:
    with pytest.raises(ConfigError, match="ties"):
        onlineeval.evaluate(files["qrels.txt"], files["A.txt"], "AP", ties="random")
    with pytest.raises(ConfigError, match="baseline"):
        onlineeval.evaluate(files["qrels.txt"], {"A": files["A.txt"]}, "AP", baseline="Z")
    with pytest.raises(ConfigError):
        onlineeval.evaluate(files["qrels.txt"], files["A.txt"], "nDCG@ten")
    bad = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0, float("inf")]})
    with pytest.raises(InputError) as err:
        onlineeval.evaluate(files["qrels.txt"], {"X": bad}, "AP")
    assert err.value.line == 2 and "run 'X'" in str(err.value) and "row 2" in str(err.value)
    files["A.txt"].write_text(RUN_A + "q4 Q0 z 1 one A\n")
    with pytest.raises(InputError) as err:
        onlineeval.evaluate(files["qrels.txt"], files["A.txt"], "AP")
    assert err.value.path == str(files["A.txt"]) and err.value.line == 7
    with pytest.raises(InputError) as err:
        onlineeval.evaluate(files["qrels.txt"], {"q1": {"a": 1.0, "b": float("nan")}}, "AP")
    assert err.value.line is None and "query 'q1', document 'b'" in str(err.value)
    with pytest.raises(InputError, match="pytrec_eval"):
        onlineeval.evaluate({"q1": ["a"]}, files["A.txt"], "AP")


def test_simulate_same_numbers_as_the_cli_and_writes_only_when_asked(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(SMALL | {"replicates": 50}))
    out = tmp_path / "cli"
    res = runner.invoke(app, ["simulate", "--config", str(cfg), "--output", str(out), "--quiet", "--replicates", "4"])
    assert res.exit_code == 0, res.output
    cli_summary = json.loads((out / "summary.json").read_text())
    cli_rows = pd.read_csv(out / "replicates.csv")
    sim = onlineeval.simulate(cfg, replicates=4)
    assert sim.output is None and sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "cli"]
    seen: list[tuple[int, int]] = []
    by_dict = onlineeval.simulate(SMALL, on_progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (4, 4)
    pd.testing.assert_frame_equal(by_dict.rows, sim.rows)
    for design, metrics in cli_summary["designs"].items():
        for metric, entry in metrics.items():
            ours = sim.summary["designs"][design][metric]
            assert ours["true_effect"] == pytest.approx(entry["true_effect"], rel=1e-12, abs=1e-15)
            assert ours["final_day"]["power"] == entry["final_day"]["power"]
            assert ours["final_day"]["mean_estimate"] == pytest.approx(entry["final_day"]["mean_estimate"], rel=1e-9)
    assert len(cli_rows) == len(sim.rows)
    np.testing.assert_allclose(cli_rows["estimate"].to_numpy(), sim.rows["estimate"].to_numpy(), rtol=1e-9)
    table = sim.designs()
    ab = table[(table["design"] == "ab") & (table["metric"] == "reciprocal_rank")].iloc[0]
    assert ab["shrinkage"] == cli_summary["designs"]["ab"]["reciprocal_rank"]["shrinkage_vs_offline"]
    # the flags behind the report's '?' and 'biased' cells, and the conventions, travel with the table
    for _, row in table.iterrows():
        entry = cli_summary["designs"][row["design"]][row["metric"]]
        assert row["analytic_withheld"] == bool(entry.get("analytic_withheld"))
        assert row["required_impressions_unstable"] == bool(entry.get("analytic_required_impressions_unstable"))
    assert json.loads(json.dumps(table.attrs["conventions"])) == cli_summary["conventions"]
    assert table.attrs["conventions"] == sim.conventions and sim.conventions["alpha"] == 0.05
    assert set(sim.shrinkage["design"]) == {"ab"}
    bars = sim.shrinkage_figure().axes[0].patches
    assert [b.get_width() for b in bars] == pytest.approx(
        [100 * sim.summary["offline"]["relative_gain_weighted"]] + list(100 * sim.shrinkage["relative_effect"]))
    figs = sim.figures()  # the report's figures, one per PNG the CLI wrote
    assert set(figs) == {p.stem for p in out.glob("*.png")}
    for name, f in figs.items():
        f.savefig(tmp_path / f"{name}.png", dpi=110)
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [a.get_title() for a in figs["power_vs_days"].axes][0].startswith("Power vs days")
    fig = sim.power_figure()
    assert len(fig.axes) == 1 and len(fig.axes[0].lines) >= 2 * len(sim.config.designs)
    written = onlineeval.simulate(sim.config, output=tmp_path / "api", traffic__days=2)  # a Config, overridden
    assert (tmp_path / "api" / "summary.json").is_file() and written.config.traffic.days == 2
    assert written.config.collection == sim.config.collection
    day2 = sim.rows[sim.rows["day"] <= 2].reset_index(drop=True)  # the first days do not depend on later ones
    pd.testing.assert_frame_equal(written.rows.reset_index(drop=True), day2)
    assert "Online" in sim.text()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ab", "counterfactual"])
def test_bundled_configs_same_numbers_through_the_api_and_the_cli(name: str, tmp_path: Path) -> None:
    """The bundled configs (2 days, 2 replicates: the same world, users, designs and truths)."""
    data = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
    data.update(replicates=2, workers=1)
    data["traffic"]["days"] = 2
    data.pop("output", None)
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump(data))
    res = runner.invoke(app, ["simulate", "--config", str(cfg), "--output", str(tmp_path / "cli"), "--quiet"])
    assert res.exit_code == 0, res.output
    cli = json.loads((tmp_path / "cli" / "summary.json").read_text())
    sim = onlineeval.simulate(cfg)
    ours = json.loads(json.dumps(sim.summary, default=float))
    assert ours["designs"].keys() == cli["designs"].keys()
    for design, metrics in cli["designs"].items():
        for metric, entry in metrics.items():
            mine = ours["designs"][design][metric]
            assert mine["true_effect"] == pytest.approx(entry["true_effect"], rel=1e-12, abs=1e-15)
            assert mine["final_day"]["mean_estimate"] == pytest.approx(entry["final_day"]["mean_estimate"],
                                                                       rel=1e-12, abs=1e-15)
            assert mine["final_day"]["power"] == entry["final_day"]["power"]
    rows = pd.read_csv(tmp_path / "cli" / "replicates.csv")
    np.testing.assert_allclose(rows["estimate"].to_numpy(), sim.rows["estimate"].to_numpy(), rtol=1e-12)


def test_simulate_errors_name_the_key_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        onlineeval.simulate(SMALL, overrides={"traffic.days": 0})
    assert err.value.key_path[:2] == ("traffic", "days")
    with pytest.raises(ConfigError, match="config file not found"):
        onlineeval.simulate(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError):
        onlineeval.simulate(42)  # type: ignore[arg-type]


def sessions_frame(n: int = 600, seed: int = 5) -> pd.DataFrame:
    """Sessions from a known PBM (examination 0.9, 0.6, 0.3; attractiveness by document)."""
    rng = np.random.default_rng(seed)
    docs = ["a", "b", "c", "d"]
    attract = {"a": 0.8, "b": 0.5, "c": 0.3, "d": 0.1}
    rows = []
    for i in range(n):
        shown = list(rng.permutation(docs)[:3])
        clicked = [d for d, e in zip(shown, (0.9, 0.6, 0.3)) if rng.random() < e * attract[d]]
        rows.append({"session": f"s{i}", "query": "q" if i % 2 else "r", "docs": shown, "clicks": clicked})
    return pd.DataFrame(rows)


def test_clicks_on_a_frame_equal_the_file_and_the_cli(tmp_path: Path) -> None:
    frame = sessions_frame()
    path = tmp_path / "log.tsv"
    path.write_text("".join(f"{r.session}\t{r.query}\t{','.join(r.docs)}\t{','.join(r.clicks)}\n"
                            for r in frame.itertuples()))
    fit_frame = onlineeval.fit_clicks(frame, "pbm")
    fit_file = onlineeval.fit_clicks(path, "pbm")
    np.testing.assert_array_equal(fit_frame.examination, fit_file.examination)
    # one bool per shown document and comma strings read the same
    alt = frame.assign(clicks=[[d in c for d in s] for s, c in zip(frame["docs"], frame["clicks"])],
                       docs=[",".join(s) for s in frame["docs"]])
    np.testing.assert_array_equal(onlineeval.fit_clicks(alt, "pbm").examination, fit_file.examination)
    table = onlineeval.evaluate_clicks(frame, "rctr,pbm", seed=2)
    csv = tmp_path / "t.csv"
    res = runner.invoke(app, ["clicks", "evaluate", "--log", str(path), "--models", "rctr,pbm", "--seed", "2",
                              "--csv", str(csv)])
    assert res.exit_code == 0, res.output
    cli = pd.read_csv(csv, index_col=0, keep_default_na=False)
    # the CLI's CSV also names its inputs (the logs' and saved fits' SHA-256, the fingerprint): text columns
    provenance = ["log_sha256", "test_log_sha256", "model_sha256", "fingerprint"]
    assert cli["log_sha256"].str.fullmatch("[0-9a-f]{64}").all() and cli["fingerprint"].str.len().eq(16).all()
    cli = cli.drop(columns=provenance)
    np.testing.assert_allclose(table[cli.columns].to_numpy(dtype=float), cli.to_numpy(dtype=float), rtol=1e-12)
    fit_frame.save(tmp_path / "pbm.json")
    saved = onlineeval.evaluate_clicks(frame, [str(tmp_path / "pbm.json")], test=frame)
    direct = onlineeval.evaluate_clicks(frame, {"pbm (pbm.json)": fit_frame}, test=frame)
    pd.testing.assert_frame_equal(saved, direct)
    with pytest.raises(InputError) as err:
        onlineeval.fit_clicks(frame.assign(clicks=[["zz"]] + list(frame["clicks"][1:])), "pbm")
    assert err.value.line == 1 and "row 1" in str(err.value)
    with pytest.raises(ConfigError, match="rbp"):
        onlineeval.fit_clicks(frame, "rbp")


def test_sample_clicks_matches_the_model_and_is_reproducible() -> None:
    labels = np.tile([[4, 0, 2, 1, 0]], (40_000, 1))
    spec = {"name": "cascade", "preset": "informational"}
    s1 = onlineeval.sample_clicks(spec, labels, np.random.default_rng(1))
    s2 = onlineeval.sample_clicks(spec, labels, np.random.default_rng(1))
    np.testing.assert_array_equal(s1.clicks, s2.clicks)
    import clickmodels

    p = clickmodels.build(spec).click_probabilities(labels[:1])[0]
    se = np.sqrt(p * (1 - p) / labels.shape[0])
    assert np.all(np.abs(s1.clicks.mean(axis=0) - p) <= 4 * se + 1e-12)


class SwappedTeams:
    """A broken team-draft: credits the clicks to the wrong team."""

    def interleave(self, lists, rng):
        from onlineeval.interleaving import get_interleaver

        out = get_interleaver("team_draft").interleave(np.asarray(lists)[None, ...], rng)
        return out.shown[0].tolist(), out.teams[0].tolist()

    def credit(self, shown, teams, clicks):
        a = sum(1 for t, c in zip(teams, clicks) if c and t == 1)
        b = sum(1 for t, c in zip(teams, clicks) if c and t == 0)
        return (a > b) - (a < b)


def test_validate_and_the_pytest_helper() -> None:
    report = onlineeval.validate("onlineeval.interleaving.team_draft:TeamDraft", "team_draft", n=2000, seed=1)
    assert report.passed and report.exit_code == 0
    res = runner.invoke(app, ["validate", "--interleaver", "onlineeval.interleaving.team_draft:TeamDraft",
                              "--method", "team_draft", "--n", "2000", "--seed", "1", "--format", "json"])
    assert res.exit_code == 0
    assert json.loads(res.stdout) == json.loads(report.to_json())
    assert onlineeval.assert_valid_interleaver("onlineeval.interleaving.team_draft:TeamDraft", n=2000).passed
    with pytest.raises(pytest.fail.Exception) as err:
        onlineeval.assert_valid_interleaver(SwappedTeams(), "team_draft", n=2000, seed=1)
    text = str(err.value)
    bad = onlineeval.validate(SwappedTeams(), "team_draft", n=2000, seed=1)
    assert not bad.passed and bad.format() in text
    with pytest.raises(ConfigError):
        onlineeval.validate(SwappedTeams(), "no_such_method", n=2000)


def logged_frame(n: int = 4000, seed: int = 3) -> tuple[pd.DataFrame, dict[str, dict[str, list[str]]]]:
    """Uniformly random ordered pairs of 3 documents per query (list propensity 1/6)."""
    rng = np.random.default_rng(seed)
    docs = {"q1": ["a", "b", "c"], "q2": ["d", "e", "f"]}
    attract = {"a": 0.7, "b": 0.3, "c": 0.1, "d": 0.5, "e": 0.4, "f": 0.2}
    rows = []
    for i in range(n):
        q = "q1" if rng.random() < 0.6 else "q2"
        shown = list(rng.permutation(docs[q])[:2])
        clicks = [int(rng.random() < attract[d] * e) for d, e in zip(shown, (1.0, 0.5))]
        rows.append({"query": q, "user": f"u{i % 500}", "shown": shown, "clicks": clicks,
                     "p_list": 1 / 6, "p_prefix": [1 / 3, 1 / 6], "p_item": [1 / 3, 1 / 3]})
    targets = {"B": {"q1": ["a", "b"], "q2": ["d", "e"]}, "C": {"q1": ["c", "b"], "q2": ["f", "e"]}}
    return pd.DataFrame(rows), targets


def test_estimate_frame_equals_the_file_the_cli_and_brute_force(tmp_path: Path) -> None:
    frame, targets = logged_frame()
    path = tmp_path / "log.jsonl"
    with path.open("w") as fh:
        for r in frame.to_dict("records"):
            clicks = r["clicks"]
            fh.write(json.dumps({"query": r["query"], "user": r["user"], "shown": r["shown"], "clicks": clicks,
                                 "propensities": {"list": r["p_list"], "prefix": r["p_prefix"],
                                                  "item": r["p_item"]}}) + "\n")
    runs = {}
    for name, lists in targets.items():
        runs[name] = tmp_path / f"{name}.run"
        runs[name].write_text("".join(f"{q} Q0 {d} {i + 1} {10 - i} {name}\n" for q, ds in lists.items()
                                      for i, d in enumerate(ds)))
    est_frame = onlineeval.estimate(frame, {"B": targets["B"]}, "ips,snips", baseline=("C", targets["C"]))
    est_file = onlineeval.estimate(path, {"B": runs["B"]}, ["ips", "snips"], baseline=("C", runs["C"]))
    pd.testing.assert_frame_equal(est_frame.results.drop(columns=["warnings"]),
                                  est_file.results.drop(columns=["warnings"]))
    pd.testing.assert_frame_equal(est_frame.differences, est_file.differences)
    doc = cli_json("estimate", "--log", str(path), "--target", str(runs["B"]), "--baseline", str(runs["C"]),
                   "--estimator", "ips,snips")
    assert len(doc["results"]) == len(est_frame.results) == 4
    for r in doc["results"]:
        assert est_frame.value(r["estimator"], r["target"]) == pytest.approx(r["estimate"], rel=1e-12)
        se = est_frame.results.set_index(["estimator", "target"]).loc[(r["estimator"], r["target"]), "se"]
        assert se == pytest.approx(r["se"], rel=1e-12)
    for key in ("metric", "reward", "alpha", "interval", "cluster_unit", "propensity_source", "bootstrap", "seed"):
        assert est_frame.conventions[key] == doc["conventions"][key], key
    for ours, theirs in zip(est_frame.differences.to_dict("records"), doc["differences"]):
        assert ours["estimate"] == pytest.approx(theirs["estimate"], rel=1e-12)
    # warnings are tuples in both frames (as in the results rows)
    assert all(isinstance(w, tuple) for w in est_frame.differences["warnings"])
    assert all(isinstance(w, tuple) for w in est_frame.results["warnings"])
    # brute force: IPS = mean over impressions of 1{shown == target list} / p_list x clicks
    for name in ("B", "C"):
        match = np.array([s == targets[name][q] for q, s in zip(frame["query"], frame["shown"])])
        brute = float(np.mean(match * np.array([sum(c) for c in frame["clicks"]]) * 6.0))
        assert est_frame.value("ips", name) == pytest.approx(brute, rel=1e-12)
    with pytest.raises(InputError) as err:
        onlineeval.estimate(frame.assign(p_list=[2.0] + [1 / 6] * (len(frame) - 1)), targets, "ips")
    assert err.value.line == 1 and err.value.path is None
    with pytest.raises(ConfigError, match="metric"):
        onlineeval.estimate(frame, targets, "ips", metric="ctr")
    unseen = {"D": {"q1": ["a", "zz"], "q2": ["d", "e"]}}
    # written propensities: a document never logged for its query is a warning, not an error nor a support violation
    for allowed in (onlineeval.estimate(frame, unseen, "ips"), onlineeval.estimate(frame, unseen, "ips",
                                                                                      allow_unseen=True)):
        assert any("D: ranks 1 documents never logged for their query" in w for w in allowed.warnings)
        assert allowed.results["diag_never_logged"].iloc[0] > 0
        assert allowed.results["diag_support_violations"].isna().all()


def test_estimate_warns_as_the_cli_does(tmp_path: Path) -> None:
    """The API and the CLI share one computation: the same warnings about short lists and unranked
    queries (the API's name a target where the CLI names its run file)."""
    frame, targets = logged_frame(n=600, seed=5)
    frame.at[0, "shown"], frame.at[0, "clicks"] = frame.at[0, "shown"][:1], frame.at[0, "clicks"][:1]
    frame.at[0, "p_prefix"], frame.at[0, "p_item"] = [1 / 3], [1 / 3]
    frame.at[0, "p_list"] = 1 / 3
    path = tmp_path / "log.jsonl"
    with path.open("w") as fh:
        for r in frame.to_dict("records"):
            fh.write(json.dumps({"query": r["query"], "user": r["user"], "shown": r["shown"], "clicks": r["clicks"],
                                 "propensities": {"list": r["p_list"], "prefix": r["p_prefix"],
                                                  "item": r["p_item"]}}) + "\n")
    only_q1 = {"q1": targets["B"]["q1"]}
    run = tmp_path / "B.run"
    run.write_text("".join(f"q1 Q0 {d} {i + 1} {10 - i} B\n" for i, d in enumerate(only_q1["q1"])))
    api_warnings = onlineeval.estimate(frame, {"B": only_q1}, "ips").warnings
    doc = cli_json("estimate", "--log", str(path), "--target", str(run), "--estimator", "ips")
    from onlineeval.estimators.results import warning_lines

    printed = warning_lines(doc["warnings"], doc["results"], doc["differences"])
    assert [w.replace(str(run), "target 'B'") for w in printed] == list(api_warnings)
    assert any("fewer documents" in w for w in api_warnings)
    assert any("log queries are not in target 'B'" in w for w in api_warnings)


def test_estimate_warnings_are_every_warning_the_cli_prints(tmp_path: Path) -> None:
    """Review 2 E.1: on the README's 4-impression log ``Estimates.warnings`` was () while the CLI's table printed
    four ESS warnings; it now holds every line of the table's ``warnings:`` block, same text, same order."""
    log = pd.DataFrame({"query": ["q1"] * 4, "user": ["u1", "u2", "u3", "u4"],
                        "shown": [["a", "b"], ["b", "a"], ["a", "b"], ["b", "a"]],
                        "clicks": [[1, 0], [0, 0], [0, 1], [1, 0]],
                        "p_list": [0.5] * 4, "p_prefix": [[0.5, 0.5]] * 4, "p_item": [[0.5, 0.5]] * 4})
    path = tmp_path / "log.jsonl"
    with path.open("w") as fh:
        for r in log.to_dict("records"):
            fh.write(json.dumps({"query": r["query"], "user": r["user"], "shown": r["shown"], "clicks": r["clicks"],
                                 "propensities": {"list": r["p_list"], "prefix": r["p_prefix"],
                                                  "item": r["p_item"]}}) + "\n")
    for name, order in (("AB", "a b"), ("BA", "b a")):
        (tmp_path / f"{name}.run").write_text("".join(f"q1 Q0 {d} {i + 1} {9 - i} {name}\n"
                                                      for i, d in enumerate(order.split())))
    est = onlineeval.estimate(log, {"AB": {"q1": ["a", "b"]}}, "ips,snips", metric="clicks_per_query",
                              baseline=("BA", {"q1": ["b", "a"]}))
    res = runner.invoke(app, ["estimate", "--log", str(path), "--target", str(tmp_path / "AB.run"), "--baseline",
                              str(tmp_path / "BA.run"), "--estimator", "ips,snips", "--metric", "clicks_per_query"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    start = lines.index("warnings:") + 1
    printed = lines[start:lines.index("", start)]
    assert [w.strip() for w in printed] == list(est.warnings)
    # ESS = (sum w)^2 / sum w^2 = 2 (two impressions of weight 2) for each estimator and list
    assert est.warnings[0].startswith("the CLT intervals and p-values rest on 4 clusters, fewer than 30")
    ess = tuple(f"{e} {t}: effective sample size 2.0 (< 100): the interval is unreliable"
                for t in ("AB", "BA") for e in ("ips", "snips"))
    # SNIPS of AB: both weighted impressions have reward 1, so its delta-method SE is 0: undefined, not a
    # zero-width interval (review 11, F4); BA's two rewards differ (0 and 1)
    # so the difference AB - BA of SNIPS has no standard error either (its AB side has no measured spread)
    diff = [w for w in est.warnings if w.startswith("snips AB - BA: standard error, interval and p-value undefined")]
    assert len(diff) == 1
    rest = [w for w in est.warnings if w not in diff]
    assert rest[1] == ess[0] and rest[2].startswith("snips AB: standard error and intervals undefined")
    assert tuple(rest[3:]) == ess[1:]


def test_api_errors_name_the_dataframe_columns(tmp_path: Path) -> None:
    """Review 2, E.4: DataFrame input got errors in the file/JSON-lines spelling ('qrels lacks column(s) grade',
    'propensities.list must be in (0, 1]'); they now name the columns a DataFrame caller uses. A file keeps its keys."""
    qrels = pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"]})
    run = pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "score": [1.0]})
    with pytest.raises(InputError, match=r"qrels: the DataFrame lacks column\(s\) relevance \(or grade\); it needs "
                                         r"query_id \(or query\), doc_id \(or doc\), relevance \(or grade\)"):
        onlineeval.evaluate(qrels, {"A": run})
    with pytest.raises(InputError, match=r"run 'A': the DataFrame lacks column\(s\) score;"):
        onlineeval.evaluate(qrels.assign(relevance=[1]), {"A": run.drop(columns="score")})
    frame, targets = logged_frame(n=50)
    with pytest.raises(InputError) as err:
        onlineeval.estimate(frame.assign(p_list=[1.5] + [1 / 6] * 49), targets, "ips")
    assert err.value.message == "p_list must be in (0, 1], got 1.5" and err.value.line == 1
    with pytest.raises(InputError, match="estimator 'iips' needs p_item; the log carries p_list;"):
        onlineeval.estimate(frame.drop(columns=["p_prefix", "p_item"]), targets, "iips")
    path = tmp_path / "log.jsonl"  # the same log as a file: its keys
    path.write_text(json.dumps({"query": "q1", "shown": ["a", "b"], "clicks": [1, 0],
                                "propensities": {"list": 1.5}}) + "\n")
    with pytest.raises(InputError, match=r"propensities\.list must be in \(0, 1\]"):
        onlineeval.estimate(path, targets, "ips")


def test_evaluate_letor_equals_the_cli(tmp_path: Path) -> None:
    """LETOR input through the API: score files, an array and a feature column give the numbers
    of ``onlineeval evaluate --letor``, worked out by hand for nDCG@1."""
    letor = tmp_path / "test.txt"
    # feature 2 ranks q1 right and q2 wrong; feature 1 is absent on some lines (sparse: 0)
    letor.write_text("2 qid:1 2:0.9\n0 qid:1 1:0.7 2:0.1\n1 qid:2 2:0.2\n0 qid:2 1:0.4 2:0.8\n")
    a = tmp_path / "a.pred"
    a.write_text("0.9\n0.1\n0.8\n0.2\n")
    ours = onlineeval.evaluate_letor(letor, [a], "nDCG@1,AP", features=[2, 1], permutations=100, bootstrap=100)
    doc = cli_json("evaluate", "--letor", str(letor), "--scores", str(a), "--score-feature", "2",
                   "--score-feature", "1", "--metrics", "nDCG@1,AP", "--preset", "lightgbm",
                   "--permutations", "100", "--bootstrap", "100")
    for s in doc["systems"]:
        for metric, m in s["metrics"].items():
            assert ours.mean(s["name"], metric) == pytest.approx(m["mean"], rel=1e-12)
    assert {s: ours.mean(s, "nDCG@1") for s in ours.systems} == {"a": 1.0, "feature2": 0.5, "feature1": 0.0}
    assert ours.conventions.name == "lightgbm"
    by_array = onlineeval.evaluate_letor(letor, {"a": [0.9, 0.1, 0.8, 0.2]}, "nDCG@1,AP")
    pd.testing.assert_frame_equal(by_array.aggregate, onlineeval.evaluate_letor(letor, [a], "nDCG@1,AP").aggregate)
    with pytest.raises(InputError, match="3 values for 4 LETOR lines"):
        onlineeval.evaluate_letor(letor, {"a": [0.9, 0.1, 0.8]})
    with pytest.raises(ConfigError, match="features"):
        onlineeval.evaluate_letor(letor, features=[0])
    with pytest.raises(ConfigError, match="scores"):
        onlineeval.evaluate_letor(letor)


SWEEP_BASE = {
    "seed": 11, "replicates": 4, "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 60, "candidates": 12},
    "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.8}},
    "users": {"population": 300, "click_model": {"name": "cascade", "preset": "navigational"}},
    "traffic": {"days": 2, "queries_per_day": 300, "batch_hours": 12},
    "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"}],
    "analysis": {"aa": False},
}


def test_sweep_same_numbers_as_the_cli_and_writes_only_when_asked(tmp_path: Path, monkeypatch) -> None:
    spec = {"base": SWEEP_BASE, "grid": {"rankers.B.noise": [0.7, 0.85, 1.0]}}
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({**spec, "output": str(tmp_path / "cli")}))
    res = runner.invoke(app, ["sweep", "--config", str(cfg), "--quiet"])
    assert res.exit_code == 0, res.output
    kept = onlineeval.sweep(spec, output=tmp_path / "api")
    assert kept.output == tmp_path / "api" and kept.axes == ["rankers.B.noise"]
    assert (tmp_path / "api" / "points.csv").read_bytes() == (tmp_path / "cli" / "points.csv").read_bytes()
    assert kept.text() in res.output  # the study as the CLI prints it
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    memory = onlineeval.sweep(spec)
    assert memory.output is None and list((tmp_path / "tmp").iterdir()) == []  # the temporary folder is gone
    pd.testing.assert_frame_equal(memory.points, kept.points)
    assert memory.shrinkage == kept.shrinkage and len(memory.points) == 3
    assert kept.points.attrs["conventions"] == kept.shrinkage["conventions"] and kept.points.attrs["conventions"]
    with pytest.raises(ConfigError) as err:
        onlineeval.sweep({"base": SWEEP_BASE, "grid": {"rankers.B.noise": [0.7, -1]}})
    assert "rankers.B.noise" in str(err.value)


def test_import_is_cheap() -> None:
    code = ("import sys, onlineeval, onlineeval.api; "
            "print(sorted(m for m in ('scipy.stats', 'matplotlib', 'simpy', 'pandas', 'typer', 'simulations') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stdout
    # and the lazy attribute resolves to the API
    assert onlineeval.evaluate is api.evaluate and "simulate" in dir(onlineeval)
    with pytest.raises(AttributeError):
        onlineeval.no_such_function  # noqa: B018
