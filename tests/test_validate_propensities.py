"""`onlineeval validate --propensity-log`: a team's recorded logging propensities against its logging policy
(:mod:`onlineeval.estimators.propensity_check`).

The logs are written here with propensities by brute-force enumeration of the policy's top-k lists (the independent
reference: Plackett-Luce's probability of every ordered top-k list from its definition, epsilon-greedy's mixture
written out), then spoilt the ways production loggers go wrong: item propensities logged as the conditional
probability of the slot given the documents above, a temperature the logger forgot, values rounded to four decimals.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval import validate_propensities  # the Python API's (the command's)
from onlineeval.cli import app
from onlineeval.errors import ConfigError
from onlineeval.estimators.propensity_check import check_form

REPO = Path(__file__).resolve().parents[1]
M, K = 5, 3


def _pl_lists(scores: np.ndarray, temperature: float) -> dict[tuple[int, ...], float]:
    """Every ordered top-K list of a Plackett-Luce draw over ``scores`` and its probability, from the definition."""
    out = {}
    for perm in itertools.permutations(range(scores.size), K):
        p, left = 1.0, list(range(scores.size))
        for d in perm:
            w = np.exp(scores[left] / temperature)
            p *= float(np.exp(scores[d] / temperature) / w.sum())
            left.remove(d)
        out[perm] = p
    return out


def _eg_lists(scores: np.ndarray, epsilon: float, n: int) -> dict[tuple[int, ...], float]:
    """Epsilon-greedy: the scores' top K with probability 1 - epsilon, else the top K of a uniformly random order
    of the top n."""
    order = tuple(int(d) for d in np.argsort(-scores, kind="stable"))
    out = {perm: epsilon / np.prod(np.arange(n, n - K, -1)) for perm in itertools.permutations(order[:n], K)}
    out[order[:K]] = out.get(order[:K], 0.0) + 1 - epsilon
    return out


def _write(path: Path, *, policy: str = "plackett_luce", n: int = 600, bug: str | None = None, blank: bool = False,
           forms: tuple[str, ...] = ("list", "prefix", "item"), seed: int = 0,
           options: dict | None = None) -> list[dict]:
    """A log of ``n`` impressions over 30 queries of M candidates, top K shown, with its policy's propensities by
    enumeration (spoilt by ``bug``); blank lines between impressions where ``blank``."""
    rng = np.random.default_rng(seed)
    docs = [f"d{j}" for j in range(M)]
    spec = {"plackett_luce": {"policy": "plackett_luce", "temperature": 0.5},
            "epsilon_greedy": {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 4}}[policy] | (options or {})
    records = []
    for i in range(n):
        q = int(rng.integers(30))
        scores = np.random.default_rng(100 + q).normal(size=M)
        lists = (_pl_lists(scores, 1.0 if bug == "temperature" else 0.5) if policy == "plackett_luce"
                 else _eg_lists(scores, 0.3, 4))
        perms = list(lists)
        probs = np.array([lists[p] for p in perms])
        shown = perms[int(rng.choice(len(perms), p=probs / probs.sum()))]
        if bug == "temperature":  # the logger samples at 0.5 as its spec says but records the lists of 1.0
            true = _pl_lists(scores, 0.5)
            perms = list(true)
            probs = np.array([true[p] for p in perms])
            shown = perms[int(rng.choice(len(perms), p=probs / probs.sum()))]
        prefix = [sum(v for p, v in lists.items() if p[:j + 1] == shown[:j + 1]) for j in range(K)]
        item = [sum(v for p, v in lists.items() if p[j] == shown[j]) for j in range(K)]
        if bug == "conditional":
            item = [prefix[0]] + [prefix[j] / prefix[j - 1] for j in range(1, K)]
        recorded = {"list": prefix[-1], "prefix": prefix, "item": item}
        if bug == "rounded":
            recorded = {"list": round(prefix[-1], 4), "prefix": [round(v, 4) for v in prefix],
                        "item": [round(v, 4) for v in item]}
        records.append({"query": f"q{q}", "user": f"u{i % 40}", "shown": [docs[d] for d in shown], "clicks": [],
                        "propensities": {f: recorded[f] for f in forms},
                        "logger": {**spec, "scores": {d: float(s) for d, s in zip(docs, scores)}}})
    sep = "\n\n" if blank else "\n"
    text = sep.join(json.dumps(r) for r in records) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return records


def _run(*args: str):
    return CliRunner().invoke(app, ["validate", *args])


@pytest.mark.parametrize("policy", ["plackett_luce", "epsilon_greedy"])
def test_a_right_logger_passes(tmp_path: Path, policy: str):
    path = tmp_path / "logged.jsonl.gz"  # gzipped, as simulate's export_log writes logs
    _write(path, policy=policy)
    res = _run("--propensity-log", str(path), "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["verdict"] == "PASS" and doc["mode"] == "propensities" and doc["settings"]["rtol"] == 1e-6
    assert [c["name"] for c in doc["checks"]] == ["list_propensities", "prefix_propensities", "item_propensities"]
    for c in doc["checks"]:
        total = 600 if c["name"] == "list_propensities" else 600 * K
        assert c["status"] == "PASS" and c["counts"]["violations"] == 0 and c["counts"]["total"] == total, c
        err = float(re.search(r"\(largest ([0-9.e+-]+) at", c["message"]).group(1))
        assert err < 1e-12 and "weight factor policy / recorded: mean 1, range 1 to 1" in c["message"], c["message"]


def test_item_propensities_logged_as_conditionals_fail_on_slots_2_and_3(tmp_path: Path):
    path = tmp_path / "logged.jsonl"
    records = _write(path, bug="conditional", blank=True)
    report = validate_propensities(path)
    assert report.exit_code == 1
    rows = {c.name: c for c in report.checks}
    assert rows["list_propensities"].status == "PASS" and rows["prefix_propensities"].status == "PASS"
    item = rows["item_propensities"]
    assert item.status == "FAIL" and item.counts["violations"] == 600 * (K - 1) and item.counts["impressions"] == 600
    assert "first lines off: 1, 3, 5, 7, 9" in item.message  # the file's lines (blank lines between impressions)
    assert "off per slot: 2: 600, 3: 600" in item.message
    # the weight factor policy / recorded over the shown slots, written out from the records and the enumeration
    exact = []
    for r in records:
        scores = np.array([r["logger"]["scores"][f"d{j}"] for j in range(M)])
        lists = _pl_lists(scores, 0.5)
        shown = tuple(int(d[1:]) for d in r["shown"])
        exact.append([sum(v for p, v in lists.items() if p[j] == shown[j]) for j in range(K)])
    factor = np.array(exact) / np.array([r["propensities"]["item"] for r in records])
    assert f"mean {factor.mean():.6g}, range {factor.min():.6g} to {factor.max():.6g}" in item.message, item.message


def test_a_forgotten_temperature_fails_every_form(tmp_path: Path):
    path = tmp_path / "logged.jsonl"
    _write(path, bug="temperature")
    report = validate_propensities(path)
    assert [c.status for c in report.checks] == ["FAIL"] * 3
    assert all(c.counts["violations"] > 0.9 * c.counts["total"] for c in report.checks)


def test_rounded_values_fail_at_the_default_tolerance_and_the_option_sets_it(tmp_path: Path):
    path = tmp_path / "logged.jsonl"
    records = _write(path, bug="rounded")
    assert validate_propensities(path).exit_code == 1
    loose = validate_propensities(path, rtol=1e-2)
    lists = np.array([r["propensities"]["list"] for r in records])
    # four decimals put a list propensity below 0.005 off by up to 1%: those lines, and only such, can fail at 1e-2
    row = loose.checks[0]
    assert row.counts["violations"] <= int((lists < 0.005).sum()) and row.counts["violations"] > 0
    assert validate_propensities(path, rtol=0.2).exit_code == 0  # 0.00005 / 0.0003: at most 17%
    res = _run("--propensity-log", str(path), "--rtol", "0.2")
    assert res.exit_code == 0 and "RESULT: PASS" in res.stdout, res.output


def test_forms_the_log_does_not_record_are_skipped(tmp_path: Path):
    path = tmp_path / "logged.jsonl"
    _write(path, forms=("list",))
    report = validate_propensities(path)
    assert [c.status for c in report.checks] == ["PASS", "SKIPPED", "SKIPPED"] and report.exit_code == 0
    assert report.checks[1].message == "the log records no prefix propensities"
    # a Plackett-Luce logger's Monte Carlo item marginals (beyond its exact budget, here 0 states) are no reference
    _write(path, n=60, options={"item_method": "monte_carlo", "dp_max_states": 0})
    item = validate_propensities(path).checks[2]
    assert item.status == "SKIPPED" and item.counts["unchecked"] == 60, item
    assert item.message.startswith("not checked: 60 impressions unchecked: their queries' item marginals are a Monte "
                                   "Carlo estimate"), item.message


def test_the_check_of_one_form_written_out():
    recorded = np.array([[0.5, 0.25], [0.2, 0.9]])  # the empty slot's padding differs and is not compared
    exact = np.array([[0.5, 0.2], [0.2, 0.1]])
    shown = np.array([[True, True], [True, False]])
    res = check_form("item", recorded, exact, shown, np.array([3, 7]), 1e-6)
    assert res["violations"] == 1 and res["total"] == 3 and res["violations_by_slot"] == [0, 1]
    assert res["worst"] == {"line": 3, "slot": 2, "recorded": 0.25, "exact": 0.2, "relative_error": pytest.approx(0.25)}
    assert res["weight_factor"] == pytest.approx((np.mean([1, 0.8, 1]), 0.8, 1.0))
    assert check_form("item", recorded, exact, shown, np.array([3, 7]), 0.3)["violations"] == 0


def test_estimate_points_a_log_carrying_both_to_the_check(tmp_path: Path):
    path = tmp_path / "logged.jsonl"
    _write(path, n=5)
    (tmp_path / "B.run").write_text("q0 Q0 d0 1 1 B\n", encoding="utf-8")
    res = CliRunner().invoke(app, ["estimate", "--log", str(path), "--target", str(tmp_path / "B.run"),
                                   "--estimator", "ips"])
    assert res.exit_code == 2 and "logged.jsonl:1: give either 'propensities' or 'logger'" in res.output
    assert "not both (onlineeval validate --propensity-log checks a log carrying both" in res.output, res.output


def test_bad_input_is_a_clear_error(tmp_path: Path):
    path = tmp_path / "logged.jsonl"
    records = _write(path, n=5)
    del records[2]["logger"]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    res = _run("--propensity-log", str(path))
    assert res.exit_code == 2 and "logged.jsonl:3: missing 'logger'" in res.output, res.output
    # a deterministic logger cannot have shown lists other than its own ranking: the lines are counted and named
    records = _write(path, n=8)
    for r in records:
        r["logger"] = {"policy": "deterministic", "scores": r["logger"]["scores"]}
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    bad = [i + 1 for i, r in enumerate(records)
           if sorted(r["logger"]["scores"], key=lambda d: -r["logger"]["scores"][d])[:K] != r["shown"]]
    assert len(bad) >= 2, bad
    res = _run("--propensity-log", str(path))
    assert res.exit_code == 2, res.output
    assert f"logged.jsonl:{bad[0]}: the logging policy gives the shown list probability 0" in res.output, res.output
    assert f"; {len(bad)} of the log's 8 impressions are so (lines {', '.join(map(str, bad[:5]))}" in res.output
    text = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([text[0], text[1].replace('{"query"', '{"clicks": [], "query"', 1), "{"]) + "\n",
                    encoding="utf-8")
    res = _run("--propensity-log", str(path))
    assert res.exit_code == 2 and "logged.jsonl:2: key 'clicks' appears twice" in res.output, res.output
    path.write_text("\n".join([text[0], "{"]) + "\n", encoding="utf-8")
    res = _run("--propensity-log", str(path))
    assert res.exit_code == 2 and "logged.jsonl:2: malformed JSON" in res.output, res.output
    res = _run("--propensity-log", str(path), "--rtol", "-1")
    assert res.exit_code == 2 and "--rtol: must be a finite number >= 0" in res.output, res.output
    with pytest.raises(ConfigError, match="must be a finite number >= 0"):
        validate_propensities(path, rtol=float("nan"))
    res = _run("--propensity-log", str(path), "--log", str(path))
    assert res.exit_code == 2 and "exactly one of --interleaver, --log or --propensity-log" in res.output
    res = _run("--interleaver", "onlineeval.interleaving.team_draft:TeamDraft", "--rtol", "0.1")
    assert res.exit_code == 2 and "--rtol" in res.output and "--propensity-log only" in res.output


def test_readme_example_reproduces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The README's example: the command and every report row it shows, as printed."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n\$ onlineeval validate --propensity-log logged\.jsonl\n(.*?)```", text, re.S)
    assert block, "no '$ onlineeval validate --propensity-log logged.jsonl' block in README.md"
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "logged.jsonl", bug="conditional")
    res = _run("--propensity-log", "logged.jsonl")
    assert res.exit_code == 1
    out = res.stdout.splitlines()
    for line in block.group(1).splitlines():
        if line.strip() not in ("", "..."):  # '...': the inputs' digests and the rows that pass
            assert line in out, (line, out)


def test_progress_is_reported_for_each_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import simulations.policies
    from onlineeval.estimators import propensity_check

    path = tmp_path / "logged.jsonl"
    _write(path, n=50, blank=True)
    monkeypatch.setattr(propensity_check, "PROGRESS_EVERY", 20)
    calls: list[tuple[str, int, int]] = []
    propensity_check.validate_propensities(path, simulations.policies, on_progress=lambda *a: calls.append(a))
    size = len(path.read_text(encoding="utf-8"))
    assert [c for c in calls if c[0] == "reading"][-1] == ("reading", size, size)
    for what in ("the recorded propensities", "the policy's propensities"):
        passes = [c[1:] for c in calls if c[0] == what]
        assert passes == [(0, 50), (20, 50), (40, 50), (50, 50)], (what, passes)
    res = CliRunner().invoke(app, ["validate", "--propensity-log", str(path)])  # a run under 5 s prints none
    assert res.exit_code == 0 and "validate:" not in res.stderr, res.stderr


def test_a_right_logger_passes_at_a_users_size(tmp_path: Path):
    # 20 candidates, 10 slots (no enumeration: the policy's item marginals by quadrature), 20,000 lines; the recorded
    # list and prefix propensities are the softmax products over the documents left, written out here. Measured on
    # 10^5 such lines: largest relative error 8.9e-14
    rng = np.random.default_rng(1)
    q_n, m, k, temp = 200, 20, 10, 0.7
    scores = rng.normal(size=(q_n, m))
    docs = [f"d{j}" for j in range(m)]
    lines = []
    for i, q in enumerate(rng.integers(q_n, size=20_000)):
        s = scores[q] / temp
        order = np.argsort(-(s + rng.gumbel(size=m)))[:k]  # Gumbel top-k: a Plackett-Luce draw
        left, p, prefix = np.ones(m, dtype=bool), 1.0, []
        for d in order:
            p *= float(np.exp(s[d] - s[left].max()) / np.exp(s[left] - s[left].max()).sum())
            left[d] = False
            prefix.append(p)
        lines.append(json.dumps({"query": f"q{q}", "shown": [docs[d] for d in order], "clicks": [],
                                 "propensities": {"list": prefix[-1], "prefix": prefix},
                                 "logger": {"policy": "plackett_luce", "temperature": temp,
                                            "scores": dict(zip(docs, scores[q].tolist()))}}))
    path = tmp_path / "logged.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = validate_propensities(path)
    assert [c.status for c in report.checks] == ["PASS", "PASS", "SKIPPED"], report.format()
    for c in report.checks[:2]:
        assert float(re.search(r"\(largest ([0-9.e+-]+) at", c.message).group(1)) < 1e-12, c.message
