"""A counterfactual design's simulated log exported for ``onlineeval estimate`` (``designs[i].export_log``,
:mod:`simulations.export_log`), and gzipped logs read by :func:`onlineeval.io.logged.read_logged`."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import onlineeval.io.logged as logged
from onlineeval.errors import InputError


# ----------------------------------------------------------------------------- gzipped logs
def _records(n: int, seed: int = 3) -> list[dict[str, Any]]:
    """``n`` impressions of 3 slots over 20 queries of 8 documents, with all three propensity forms."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = int(rng.integers(20))
        shown = [f"d{d}" for d in rng.permutation(8)[:3]]
        item = rng.uniform(0.05, 1.0, 3)
        prefix = item.copy()  # non-increasing, each at most its slot's item propensity
        for j in (1, 2):
            prefix[j] = min(prefix[j - 1] * rng.uniform(0.1, 1.0), item[j])
        out.append({"query": f"q{q}", "user": f"u{int(rng.integers(300))}", "user_type": int(rng.integers(2)),
                    "shown": shown, "clicks": [int(c) for c in rng.random(3) < 0.3],
                    "propensities": {"list": float(prefix[-1]), "prefix": prefix.tolist(), "item": item.tolist()}})
    return out


def _same(a: logged.LoggedLog, b: logged.LoggedLog) -> None:
    """The two reads hold the same impressions (everything but the file name)."""
    for f in dataclasses.fields(a.data):
        u, v = getattr(a.data, f.name), getattr(b.data, f.name)
        if f.name == "source":
            continue
        if isinstance(u, np.ndarray) or isinstance(v, np.ndarray):
            assert u.dtype == v.dtype, f.name
            np.testing.assert_array_equal(u, v, err_msg=f.name)
        else:
            assert u == v, f.name
    for name in ("queries", "docs", "forms", "source", "no_user", "short"):
        assert getattr(a, name) == getattr(b, name), name
    np.testing.assert_array_equal(a.lines, b.lines)
    np.testing.assert_array_equal(a.query_k, b.query_k)


@pytest.mark.parametrize("n", [200, 9000])  # 9000 impressions: over 1 MB, read by the pyarrow reader
def test_read_logged_reads_a_gzipped_log_as_the_plain_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          n: int) -> None:
    text = "".join(json.dumps(r) + "\n" for r in _records(n)).encode()
    plain, packed = tmp_path / "log.jsonl", tmp_path / "log.jsonl.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    assert (len(text) >= logged.FAST_MIN_BYTES) == (n == 9000)
    fast_calls: list[tuple[Any, Any]] = []
    import onlineeval.io.logged_fast as fast

    original = fast._read_fast

    def recorded(*args: Any) -> Any:
        out = original(*args)
        fast_calls.append((args, out))
        return out

    monkeypatch.setattr(fast, "_read_fast", recorded)
    a, b = logged.read_logged(plain), logged.read_logged(packed)
    assert b.data.n == n and b.data.source == str(packed)
    _same(a, b)
    if n == 9000:  # both read by the pyarrow reader (it accepted them), the gzipped one from its bytes
        assert len(fast_calls) == 2 and fast_calls[1][0][2] == text
        assert all(out is not None for _, out in fast_calls)
        monkeypatch.setattr(logged, "FAST_MIN_BYTES", 1 << 40)  # and line by line: the same
        _same(a, logged.read_logged(packed))
    else:
        assert not fast_calls


def test_a_gzipped_log_with_a_bad_line_names_its_line_and_a_damaged_one_the_file(tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in _records(5)]
    lines[3] = lines[3].replace('"shown"', '"shwn"')
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(InputError) as info:
        logged.read_logged(bad)
    assert info.value.path == str(bad) and info.value.line == 4
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode())[:-12])
    with pytest.raises(InputError, match="damaged gzip file") as info:
        logged.read_logged(cut)
    assert info.value.path == str(cut)


# ----------------------------------------------------------------------------- the exported simulated log
ESTIMATORS = ("ips", "snips", "rips", "iips")
#: and two more the design runs: adaptive IPS (its behaviours chosen per user type on the whole log) and clipped IPS
#: (an option, given to estimate by --option)
MORE = {"adaptive_ips": {}, "clipped_ips": {"cap": 5}}
#: the design's metric: a first-click reward, whose position weights depend on the list length k
METRIC = "reciprocal_rank"


def _config(export_log: Any = 2, replicates: int = 3, **extra: Any) -> Any:
    from simulations.config import config_from_mapping

    return config_from_mapping(_mapping(export_log, replicates, **extra))


def _mapping(export_log: Any = 2, replicates: int = 3, **extra: Any) -> dict[str, Any]:
    cf = {"name": "cf", "type": "counterfactual", "metric": METRIC, "targets": ["A", "B"],
          "logger": {"policy": "mixture", "components": [
              {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 10, "weight": 0.7},
              {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 10, "scores": "B", "weight": 0.3}]},
          "estimators": [*ESTIMATORS, "adaptive_ips", {"name": "clipped_ips", "cap": 5},
                         {"name": "adaptive_ips", "folds": 2}],
          **({"export_log": export_log} if export_log is not None else {})}
    return {
        "seed": 5, "replicates": replicates, "workers": 1,
        "collection": {"n_queries": 60, "candidates": 10},
        "rankers": {"depth": 4, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.4}},
        "offline_metric": "nDCG@4",
        "users": {"population": 500, "activity": {"sigma": 0.5}, "types": [
            {"name": "pbm", "share": 0.5, "click_model": {"name": "pbm", "preset": "ai2018"}},
            {"name": "cascade", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}}]},
        "traffic": {"days": 2, "queries_per_day": 1200, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query"}, cf],
        "analysis": {"aa": True, "truth_impressions": 2000},
        **extra,
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``onlineeval simulate`` of the config exporting the logs of replicates 0 and 1 of 3."""
    import pandas as pd
    import yaml
    from typer.testing import CliRunner

    from onlineeval.cli import app
    from simulations.job import prepare_world

    tmp = tmp_path_factory.mktemp("export")
    out = tmp / "out"
    (tmp / "cf.yaml").write_text(yaml.safe_dump(_mapping() | {"output": str(out)}), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--config", str(tmp / "cf.yaml")])
    assert res.exit_code == 0, res.output
    config = _config()
    return {"out": out, "config": config, "rows": pd.read_csv(out / "replicates.csv"), "stderr": res.stderr,
            "world": prepare_world(config)[0]}


def _design_log(config: Any, world: Any, replicate: int) -> Any:
    """The design's whole log in replicate ``replicate`` as the job runs it (every design of the config, its A/A
    variants included: :func:`simulations.runner.run_replicate`'s steps)."""
    from simulations.runner import build_replicate, replicate_seeds
    from simulations.traffic import run_traffic
    from simulations.users import UserModels

    users = UserModels.from_config(config.users)
    traffic, designs = build_replicate(config, world, users, replicate_seeds(config.seed, config.replicates)[replicate])
    assert len(designs) == 4  # ab, cf and their A/A variants

    def on_day_end(day: int) -> None:
        for design in designs:
            design.checkpoint(day)

    run_traffic(traffic, designs, on_day_end)
    (cf,) = [d for d in designs if d.name == "cf" and not d.aa]
    return cf.log()


def test_export_log_writes_the_first_replicates_logs_and_the_targets_runs(run: dict[str, Any]) -> None:
    out: Path = run["out"]
    folder = out / "logs" / "cf"
    assert sorted(p.name for p in folder.iterdir()) == ["A.run", "B.run", "replicate_0.jsonl.gz",
                                                        "replicate_1.jsonl.gz"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (out / "logs" / ".fingerprint").read_text(encoding="utf-8").strip() == \
        f"{summary['config_fingerprint']} export-format 3"
    assert summary["config"]["designs"][1]["export_log"] == 2
    assert not list(out.rglob("*.tmp"))
    rows, world = run["rows"], run["world"]
    for r in (0, 1):
        raw = (folder / f"replicate_{r}.jsonl.gz").read_bytes()
        assert raw[4:8] == b"\0\0\0\0"  # no time stamp: the same log gives the same bytes
        lines = gzip.decompress(raw).decode().splitlines()
        last = rows[(rows.replicate == r) & (rows.design == "cf") & (~rows.aa) & (rows.day == 2)]
        assert len(lines) == int(last["n_impressions"].iloc[0])
        first = json.loads(lines[0])
        assert set(first) == {"query", "user", "user_type", "shown", "clicks", "logger"}
        assert len(first["shown"]) == 4
        # the logging policy itself: the mixture around A with its component around B carrying B's scores
        q = list(world.query_ids).index(first["query"])
        a_row, b_row = (np.asarray(world.scores[r], dtype=np.float64)[q] for r in ("A", "B"))
        assert first["logger"] == {
            "policy": "mixture", "scores": {f"d{j}": float(a_row[j]) for j in range(a_row.size)},
            "components": [{"policy": "epsilon_greedy", "epsilon": 0.3, "n": 10, "weight": 0.7},
                           {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 10, "weight": 0.3,
                            "scores": {f"d{j}": float(b_row[j]) for j in range(b_row.size)}}]}
    # the runs: every query, the world's ranking in rank order, distinct descending scores
    for ranker in ("A", "B"):
        lines = (folder / f"{ranker}.run").read_text(encoding="utf-8").splitlines()
        assert len(lines) == world.n_queries * 4
        q0 = [ln.split() for ln in lines[:4]]
        assert [f[0] for f in q0] == ["q0"] * 4 and [f[3] for f in q0] == ["1", "2", "3", "4"]
        assert [f[2] for f in q0] == [f"d{d}" for d in world.rankings[ranker][0]]
        assert [float(f[4]) for f in q0] == [4.0, 3.0, 2.0, 1.0]


def test_simulate_says_where_the_logs_are_and_the_estimate_command_it_names_runs(run: dict[str, Any]) -> None:
    from estimate_cli_world import invoke

    (line,) = [ln for ln in run["stderr"].splitlines() if ln.startswith("simulated log of design cf")]
    assert line.startswith(f"simulated log of design cf, replicates 0-1: {run['out'] / 'logs' / 'cf'}/replicate_<r>")
    command = line.split("e.g. onlineeval estimate ", 1)[1].split()
    assert command[-4:] == ["--estimator", ",".join([*ESTIMATORS, "adaptive_ips"]), "--metric", METRIC]
    res = invoke(*command)
    assert res.exit_code == 0, res.output
    assert "differences target - baseline" in res.stdout


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-10 * max(abs(a), abs(b))


@pytest.mark.parametrize("replicate", [0, 1])
def test_estimate_on_the_exported_log_gives_the_designs_estimates(run: dict[str, Any], replicate: int) -> None:
    from onlineeval.estimators import DeterministicTarget, get_estimator, get_reward

    from estimate_cli_world import json_out

    out, config, world = run["out"], run["config"], run["world"]
    folder = out / "logs" / "cf"
    doc = json_out("--log", str(folder / f"replicate_{replicate}.jsonl.gz"), "--target", str(folder / "B.run"),
                   "--baseline", str(folder / "A.run"), "--estimator", ",".join([*ESTIMATORS, *MORE]),
                   "--option", "clipped_ips.cap=5", "--metric", METRIC)
    values = {(r["estimator"], r["target"]): r["estimate"] for r in doc["results"]}
    diffs = {d["estimator"]: d["estimate"] for d in doc["differences"]}
    # from the design's own log, with the estimators directly (the design's ratio of per-impression terms)
    data = _design_log(config, world, replicate)
    reward = get_reward(METRIC, world.depth)
    for name in [*ESTIMATORS, *MORE]:
        est = get_estimator(name, **MORE.get(name, {}))
        v = {}
        for t in ("A", "B"):
            terms = est.terms(data, DeterministicTarget(world.rankings[t], t), reward)
            v[t] = float(terms.num.sum() / (data.n if terms.den is None else terms.den.sum()))
            assert _close(values[(name, t)], v[t]), (name, t, values[(name, t)], v[t])
        assert _close(diffs[name], v["B"] - v["A"]), (name, diffs[name], v["B"] - v["A"])
    # and the difference the job recorded for the replicate on its last day
    rows = run["rows"]
    last = rows[(rows.replicate == replicate) & (rows.design == "cf") & (~rows.aa) & (rows.day == 2)]
    for name, label in [*((n, n) for n in ESTIMATORS), ("adaptive_ips", "adaptive_ips"),
                        ("clipped_ips", "clipped_ips(cap=5)")]:
        recorded = float(last.loc[last.metric == label, "estimate"].iloc[0])
        assert _close(diffs[name], recorded), (name, diffs[name], recorded)
    # the log read back is the design's log: the same impressions, clicks and propensities in the same order
    from simulations import policies

    lg = logged.read_logged(folder / f"replicate_{replicate}.jsonl.gz", policies=policies)
    assert lg.data.n == data.n
    np.testing.assert_array_equal(lg.data.clicks, data.clicks)
    for form in ("p_list", "p_prefix", "p_item", "user_type"):
        np.testing.assert_array_equal(getattr(lg.data, form), getattr(data, form))
    np.testing.assert_array_equal(np.asarray(lg.queries)[lg.data.query], np.asarray(world.query_ids)[data.query])


@pytest.mark.parametrize("replicate", [0, 1])
def test_the_designs_intervals_and_tests_are_those_estimate_prints(run: dict[str, Any], replicate: int) -> None:
    """The design's last-day standard error, interval and p-value of each difference are ``estimate``'s on the
    exported log (t with Bell and McCaffrey's degrees of freedom, which the design computes from per-user sums of the
    weights' products; it used z before, so its coverage and power were not those of the intervals the command gives
    for the same log). The degrees of freedom here are well below G - 1, so z or G - 1 would not match."""
    from estimate_cli_world import json_out

    out = run["out"]
    folder = out / "logs" / "cf"
    doc = json_out("--log", str(folder / f"replicate_{replicate}.jsonl.gz"), "--target", str(folder / "B.run"),
                   "--baseline", str(folder / "A.run"), "--estimator", ",".join([*ESTIMATORS, *MORE]),
                   "--option", "clipped_ips.cap=5", "--metric", METRIC)
    diffs = {d["estimator"]: d for d in doc["differences"]}
    rows = run["rows"]
    mine = rows[(rows.replicate == replicate) & (rows.design == "cf") & (~rows.aa) & (rows.day == 2)]
    users = int(mine["n_users"].iloc[0])
    low = 0
    for name, label in [*((n, n) for n in ESTIMATORS), ("adaptive_ips", "adaptive_ips"),
                        ("clipped_ips", "clipped_ips(cap=5)")]:
        want = diffs[name]
        assert 1 <= want["df"] <= users - 1
        low += want["df"] < 0.8 * (users - 1)
        rec = mine[mine.metric == label].iloc[0]
        for key in ("se", "ci_low", "ci_high", "pvalue"):
            assert abs(rec[key] - want[key]) <= 1e-9 * max(abs(want[key]), 1e-3), (name, key, rec[key], want[key])
    assert low >= 2  # the comparison can fail: G - 1 degrees of freedom would not give these intervals


def test_the_cross_fitted_choice_makes_the_designs_folds_from_the_exported_ids(run: dict[str, Any]) -> None:
    """adaptive_ips with folds=2: ``estimate`` on the exported log (users ``u<i>`` zero-padded, so sorted as the
    simulator's numbers) gives the design's last-day difference and what the estimator computes on the design's own
    log. With the ids written unpadded (``u7`` sorts after ``u10``) the folds, and so the estimate, differ. Replicate
    0, where the folds' choices differ from the whole log's (in replicate 1 every choice is the same)."""
    replicate = 0
    from onlineeval.estimators import DeterministicTarget, get_estimator, get_reward

    from estimate_cli_world import json_out

    out, config, world = run["out"], run["config"], run["world"]
    folder = out / "logs" / "cf"
    path = folder / f"replicate_{replicate}.jsonl.gz"
    args = ("--target", str(folder / "B.run"), "--baseline", str(folder / "A.run"), "--estimator", "adaptive_ips",
            "--option", "adaptive_ips.folds=2", "--metric", METRIC)
    diff = json_out("--log", str(path), *args)["differences"][0]["estimate"]
    rows = run["rows"]
    last = rows[(rows.replicate == replicate) & (rows.design == "cf") & (~rows.aa) & (rows.day == 2)]
    recorded = float(last.loc[last.metric == "adaptive_ips(folds=2)", "estimate"].iloc[0])
    assert _close(diff, recorded), (diff, recorded)
    data = _design_log(config, world, replicate)
    est, reward = get_estimator("adaptive_ips", folds=2), get_reward(METRIC, world.depth)
    v = {t: est.estimate(data, DeterministicTarget(world.rankings[t], t), reward).value for t in ("A", "B")}
    assert _close(diff, v["B"] - v["A"]), (diff, v)
    one_fold = float(last.loc[last.metric == "adaptive_ips", "estimate"].iloc[0])
    assert not _close(diff, one_fold)  # the folds change the choice here: the comparison can fail
    unpadded = out / f"unpadded_{replicate}.jsonl.gz"
    with gzip.open(path, "rt") as src, gzip.open(unpadded, "wt") as dst:
        for line in src:
            rec = json.loads(line)
            rec["user"] = "u" + str(int(rec["user"][1:]))
            dst.write(json.dumps(rec) + "\n")
    assert not _close(json_out("--log", str(unpadded), *args)["differences"][0]["estimate"], recorded)


def test_estimate_on_the_exported_log_gives_the_model_based_estimates(run: dict[str, Any]) -> None:
    """The estimators that fit a model on the log (dm and dr_list with PBM fitted by EM, cascade_dr with CM):
    ``estimate`` on the exported log and runs gives what they compute on the design's own log, to
    1e-6 relative (the fits see the same sessions with other ids, summed in other orders; EM's SQUAREM
    extrapolation carries last-bit differences further than 1e-10). The EM fits run to a tolerance of 1e-14: at
    their default, 1e-9, where they stop moves with those orders, by 1.3e-6 relative on dm here (the converged
    value is 1.3e-5 from either), which measured when EM stops, not what the two paths compute."""
    from onlineeval.estimators import DeterministicTarget, get_estimator, get_reward

    from estimate_cli_world import json_out

    out, config, world = run["out"], run["config"], run["world"]
    folder = out / "logs" / "cf"
    names = ("dm", "dr_list", "cascade_dr")  # (reciprocal rank: dr and pbm_ips take additive rewards only)
    doc = json_out("--log", str(folder / "replicate_0.jsonl.gz"), "--target", str(folder / "B.run"),
                   "--baseline", str(folder / "A.run"), "--estimator", ",".join(names), "--metric", METRIC,
                   *(f"--option={n}.{k}" for n in ("dm", "dr_list") for k in ("tol=1e-14", "max_iter=100000")))
    values = {(r["estimator"], r["target"]): r["estimate"] for r in doc["results"]}
    data = _design_log(config, world, 0)
    reward = get_reward(METRIC, world.depth)
    for name in names:
        for t in ("A", "B"):
            # dr_list and cascade_dr cross-fitted (their default): the file's user ids sort as the design's users,
            # so the folds are the same
            em = {"tol": 1e-14, "max_iter": 100_000} if name in ("dm", "dr_list") else {}
            est = get_estimator(name, **em)
            want = est.estimate(data, DeterministicTarget(world.rankings[t], t), reward).value
            assert values[(name, t)] == pytest.approx(want, rel=1e-6), (name, t)
    assert len({values[(n, "B")] for n in names}) == 3  # three different estimators, not one number


@pytest.mark.parametrize(("value", "message"), [
    (-1, "designs[1].export_log: must be at least 0, got -1"),
    ("1", "designs[1].export_log: must be an integer, got '1'"),
    (True, "designs[1].export_log: must be an integer, got True"),
    (1.5, "designs[1].export_log: must be an integer, got 1.5"),
    (1001, "designs[1].export_log: must be at most 1000, got 1001"),
])
def test_a_bad_export_log_is_refused_naming_the_key(value: Any, message: str) -> None:
    from onlineeval.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        _config(export_log=value)
    assert message in str(info.value)


@pytest.mark.parametrize("design", [{"name": "ab", "type": "ab", "export_log": 1},
                                    {"name": "td", "type": "interleaving", "method": "team_draft", "export_log": 1}])
def test_export_log_is_refused_on_other_design_types(design: dict[str, Any]) -> None:
    from onlineeval.errors import ConfigError
    from simulations.config import config_from_mapping

    with pytest.raises(ConfigError, match=r"designs\[0\]: export_log: only for designs of type counterfactual"):
        config_from_mapping({"seed": 1, "designs": [design]})


def test_without_the_option_nothing_is_written_and_the_fingerprint_is_unchanged(tmp_path: Path) -> None:
    from simulations.job import config_fingerprint, simulate

    absent, zero = _config(export_log=None, replicates=1), _config(export_log=0, replicates=1)
    assert "export_log" not in absent.effective()["designs"][1]  # the effective config of every earlier config
    assert config_fingerprint(absent) == config_fingerprint(zero) != config_fingerprint(_config(export_log=1))
    simulate(zero, tmp_path / "out", workers=1)
    assert (tmp_path / "out" / "summary.json").is_file() and not (tmp_path / "out" / "logs").exists()


def test_a_resumed_run_keeps_the_logs_and_another_config_removes_them(tmp_path: Path) -> None:
    from simulations.export_log import export_logs
    from simulations.job import config_fingerprint, prepare_world, remove_results, simulate

    out = tmp_path / "out"
    config = _config(export_log=1, replicates=2)
    simulate(config, out, workers=1)
    log = out / "logs" / "cf" / "replicate_0.jsonl.gz"
    assert not (out / "logs" / "cf" / "replicate_1.jsonl.gz").exists()
    stat, data = log.stat(), log.read_bytes()
    # the same config again (all its replicates finished): the log is kept, not written again
    simulate(config, out, workers=1)
    assert log.stat().st_mtime_ns == stat.st_mtime_ns and log.stat().st_ino == stat.st_ino
    # a run interrupted while exporting (a temporary file, the log not yet renamed): the missing log is written
    world, users = prepare_world(config)
    fingerprint = config_fingerprint(config)
    log.unlink()
    log.with_name(log.name + ".tmp").write_bytes(b"half")
    assert export_logs(config, world, users, out, fingerprint) == [log]
    assert log.read_bytes() == data and not list(out.rglob("*.tmp"))
    # another fingerprint's logs (an interrupted run of another config left them) are replaced
    (out / "logs" / ".fingerprint").write_text("0123456789abcdef\n", encoding="utf-8")
    log.write_bytes(b"another config's log")
    (out / "logs" / "cf" / "replicate_7.jsonl.gz").write_bytes(b"another config's log")
    written = export_logs(config, world, users, out, fingerprint)
    assert sorted(p.name for p in written) == ["A.run", "B.run", "replicate_0.jsonl.gz"]
    assert log.read_bytes() == data and not (out / "logs" / "cf" / "replicate_7.jsonl.gz").exists()
    assert (out / "logs" / ".fingerprint").read_text(encoding="utf-8").strip() == f"{fingerprint} export-format 3"
    # the same config's logs in the form written before (the marker the fingerprint alone: propensities only) are
    # written again, not kept beside this form's
    (out / "logs" / ".fingerprint").write_text(fingerprint + "\n", encoding="utf-8")
    log.write_bytes(b"the former form's log")
    assert sorted(p.name for p in export_logs(config, world, users, out, fingerprint)) == \
        ["A.run", "B.run", "replicate_0.jsonl.gz"]
    assert log.read_bytes() == data
    # computed again on 2 worker processes (--fresh): the same bytes, written by this process as before
    simulate(config, out, workers=2, fresh=True)
    assert log.read_bytes() == data
    # another config replacing these results (--fresh, or the same config of another stream version): the logs go
    # with its other outputs, before its first record
    remove_results(out)
    assert not (out / "logs").exists() and not (out / "summary.json").exists()
    # a config exporting none finishing where another config's logs were left (its run interrupted): they go
    export_logs(config, world, users, out, fingerprint)
    assert log.read_bytes() == data
    other = _config(export_log=None, replicates=2)
    assert export_logs(other, world, users, out, config_fingerprint(other)) == [] and not (out / "logs").exists()
    # a logs folder without the fingerprint file is not this module's: nothing in it is deleted
    mine = out / "logs" / "cf" / "notes.run"
    mine.parent.mkdir(parents=True)
    mine.write_text("kept\n", encoding="utf-8")
    remove_results(out)
    assert export_logs(other, world, users, out, config_fingerprint(other)) == [] and mine.is_file()


@pytest.mark.parametrize("backend", ["local", pytest.param("dask", marks=pytest.mark.slow)])
def test_a_sweep_exports_the_same_logs_on_any_backend(run: dict[str, Any], tmp_path: Path, backend: str) -> None:
    """A sweep point's logs are written with its folder (by a writer process here) whatever runs its replicates:
    2 local worker processes, or a Dask cluster of 2 workers; the bytes of ``onlineeval simulate``'s 1 worker."""
    from simulations.sweep import run_sweep, sweep_from_mapping

    sweep = sweep_from_mapping({"base": _mapping(), "points": [{"seed": 5}], "output": str(tmp_path / "s")})
    if backend == "dask":
        from simulations.executors import DaskExecutor

        executor = DaskExecutor("local:2")
        try:
            run_sweep(sweep, executor=executor, writers=1)
        finally:
            executor.close()
    else:
        run_sweep(sweep, workers=2, writers=1)
    ours, theirs = tmp_path / "s" / "points" / "point-000" / "logs", run["out"] / "logs"
    names = sorted(str(p.relative_to(theirs)) for p in theirs.rglob("*") if p.is_file())
    assert names == [".fingerprint", "cf/A.run", "cf/B.run", "cf/replicate_0.jsonl.gz", "cf/replicate_1.jsonl.gz"]
    assert sorted(str(p.relative_to(ours)) for p in ours.rglob("*") if p.is_file()) == names
    for name in names:
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name


def test_another_export_log_is_another_config_and_its_run_is_refused_naming_the_key(run: dict[str, Any]) -> None:
    from onlineeval.errors import OutputError
    from simulations.job import config_fingerprint, simulate
    from simulations.resume_guard import other_results

    other = _config(export_log=1)
    found = other_results(run["out"], other, config_fingerprint(other))
    assert found is not None and not found.same_config
    assert found.differences == "designs[1].export_log 2 -> 1"
    before = sorted(p.name for p in (run["out"] / "logs" / "cf").iterdir())
    with pytest.raises(OutputError, match="designs\\[1\\].export_log 2 -> 1"):
        simulate(other, run["out"], workers=1)
    assert sorted(p.name for p in (run["out"] / "logs" / "cf").iterdir()) == before


def test_the_exported_log_names_its_logger_so_estimate_checks_support_and_runs_the_pseudoinverse(
        run: dict[str, Any]) -> None:
    """The exported log carries the logging policy (``logger``, not only the propensities of what was shown): the
    targets' support is checked against it (0 violations: the epsilon-greedy components can show every list of
    their top 10) and the pseudoinverse, which needs the policy's pair marginals, runs, giving what it computes
    on the design's own log with the design's policy."""
    from onlineeval.estimators import DeterministicTarget, get_estimator, get_reward

    from estimate_cli_world import json_out

    out, config, world = run["out"], run["config"], run["world"]
    folder = out / "logs" / "cf"
    doc = json_out("--log", str(folder / "replicate_0.jsonl.gz"), "--target", str(folder / "B.run"),
                   "--baseline", str(folder / "A.run"), "--estimator", "ips,pseudoinverse",
                   "--metric", "clicks_per_query")
    data = _design_log(config, world, 0)
    assert data.logger is not None
    reward = get_reward("clicks_per_query", world.depth)
    for r in doc["results"]:
        assert r["diagnostics"]["support_checked"] == data.n and r["diagnostics"]["support_violations"] == 0, r
        assert r["diagnostics"]["never_logged"] is None
        if r["estimator"] == "pseudoinverse":
            terms = get_estimator("pseudoinverse").terms(data, DeterministicTarget(world.rankings[r["target"]],
                                                                                   r["target"]), reward)
            want = float(terms.num.sum() / (data.n if terms.den is None else terms.den.sum()))
            assert _close(r["estimate"], want), (r["target"], r["estimate"], want)
    assert {r["estimator"] for r in doc["results"]} == {"ips", "pseudoinverse"}
    assert doc["conventions"]["propensity_source"] == "logger:mixture (propensities computed from the logged scores)"


def test_a_monte_carlo_logger_is_exported_with_its_propensities() -> None:
    """A Plackett-Luce logger whose item marginals are a Monte Carlo estimate (``item_method: monte_carlo``) is
    exported as the propensities the design used (the reader would draw other samples); with its exact default
    (subset DP, then quadrature) as its spec and scores."""
    from simulations.config import config_from_mapping
    from simulations.export_log import logger_texts
    from simulations.job import prepare_world

    for method, exported_as_logger in (("monte_carlo", False), ("quadrature", True)):
        mapping = _mapping()
        mapping["designs"][1]["logger"] = {"policy": "plackett_luce", "temperature": 1.0, "item_method": method,
                                           "dp_max_states": 10}
        config = config_from_mapping(mapping)
        world = prepare_world(config)[0]
        texts = logger_texts(config.designs[1], world)
        assert (texts is not None) is exported_as_logger, method
        if texts is not None:
            first = json.loads(texts[0])
            assert {k: v for k, v in first.items() if k != "scores"} == {
                "policy": "plackett_luce", "temperature": 1.0, "item_method": "quadrature", "dp_max_states": 10}
            assert len(first["scores"]) == 10


def test_a_plackett_luce_logger_read_back_gives_the_designs_propensities(tmp_path: Path) -> None:
    """A Plackett-Luce logger exported as its spec and scores: the reader's propensities are the design's (list
    and prefix in closed form, item marginals by the quadrature past a small DP budget) to 1e-12 relative."""
    import yaml
    from typer.testing import CliRunner

    from onlineeval.cli import app
    from simulations import policies
    from simulations.config import config_from_mapping
    from simulations.job import prepare_world

    mapping = _mapping(export_log=1, replicates=1)
    mapping["designs"][1]["logger"] = {"policy": "plackett_luce", "temperature": 0.5, "dp_max_states": 10}
    mapping["designs"][1]["estimators"] = ["ips", "rips", "iips"]
    mapping["traffic"]["days"] = 1
    (tmp_path / "pl.yaml").write_text(yaml.safe_dump(mapping | {"output": str(tmp_path / "out")}), encoding="utf-8")
    res = CliRunner().invoke(app, ["simulate", "--config", str(tmp_path / "pl.yaml"), "--quiet"])
    assert res.exit_code == 0, res.output
    path = tmp_path / "out" / "logs" / "cf" / "replicate_0.jsonl.gz"
    assert json.loads(gzip.decompress(path.read_bytes()).splitlines()[0])["logger"]["policy"] == "plackett_luce"
    config = config_from_mapping(mapping)
    data = _design_log(config, prepare_world(config)[0], 0)
    lg = logged.read_logged(path, policies=policies)
    assert lg.data.n == data.n
    for form in ("p_list", "p_prefix", "p_item"):
        np.testing.assert_allclose(getattr(lg.data, form), getattr(data, form), rtol=1e-12, atol=0)


def test_export_form_propensities_writes_the_propensities_of_what_was_shown(run: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    """``export_form: propensities``: each line carries the list, prefix and item propensities (the design's
    floats), no logger; another config than the default form's (its fingerprint differs), the same impressions."""
    from simulations import policies
    from simulations.config import config_from_mapping
    from simulations.job import config_fingerprint, simulate

    config = _config(export_log=1, replicates=1)
    mapping = _mapping(export_log=1, replicates=1)
    mapping["designs"][1]["export_form"] = "propensities"
    config_p = config_from_mapping(mapping)
    assert config_fingerprint(config_p) != config_fingerprint(config)
    assert config_p.designs[1].model_dump()["export_form"] == "propensities"
    assert "export_form" not in config.designs[1].model_dump()  # the default is left out (fingerprints kept)
    simulate(config_p, tmp_path / "out", workers=1)
    path = tmp_path / "out" / "logs" / "cf" / "replicate_0.jsonl.gz"
    first = json.loads(gzip.decompress(path.read_bytes()).splitlines()[0])
    assert set(first) == {"query", "user", "user_type", "shown", "clicks", "propensities"}
    written = logged.read_logged(path).data
    theirs = logged.read_logged(run["out"] / "logs" / "cf" / "replicate_0.jsonl.gz", policies=policies).data
    for form in ("p_list", "p_prefix", "p_item", "clicks"):
        np.testing.assert_array_equal(getattr(written, form), getattr(theirs, form))


@pytest.mark.parametrize(("design", "value", "message"), [
    (1, "csv", "designs[1].export_form: must be one of 'logger' or 'propensities', got 'csv'"),
    (0, "logger", "designs[0]: export_form: only for designs of type counterfactual"),
])
def test_a_bad_export_form_is_refused_naming_the_key(design: int, value: str, message: str) -> None:
    from onlineeval.errors import ConfigError
    from simulations.config import config_from_mapping

    mapping = _mapping()
    mapping["designs"][design]["export_form"] = value
    with pytest.raises(ConfigError) as info:
        config_from_mapping(mapping)
    assert str(info.value) == message
