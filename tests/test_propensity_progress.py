"""Long propensity computations report their progress: a Plackett-Luce logger's item marginals, query by query, to
simulations.policies.settings.PROPENSITY_PROGRESS when set (each query once, cached ones not again), which
`onlineeval estimate` sets to rate-limited lines on stderr (a computation shorter than 5 s prints nothing)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from onlineeval.cli import app
from simulations.policies import build_policy
from simulations.policies.settings import PROPENSITY_PROGRESS


def test_plackett_luce_reports_each_query_once():
    rng = np.random.default_rng(4)
    scores = rng.normal(size=(7, 30))
    policy = build_policy({"policy": "plackett_luce", "temperature": 1.0, "dp_max_states": 0}, scores, 4)
    calls: list[tuple[str, int, int]] = []
    token = PROPENSITY_PROGRESS.set(lambda what, done, total: calls.append((what, done, total)))
    try:
        q = np.array([3, 1, 3, 5, 1])
        shown = policy.sample(q, rng)
        p1 = policy.propensities(q, shown)
        assert calls == [("Plackett-Luce item propensities of 3 queries", i, 3) for i in (1, 2, 3)]
        calls.clear()
        q2 = np.arange(7)
        policy.propensities(q2, policy.sample(q2, rng))  # 3 cached, 4 new
        assert calls == [("Plackett-Luce item propensities of 4 queries", i, 4) for i in (1, 2, 3, 4)]
    finally:
        PROPENSITY_PROGRESS.reset(token)
    calls.clear()
    # without a reporter: silent, the same numbers (a fresh policy)
    again = build_policy({"policy": "plackett_luce", "temperature": 1.0, "dp_max_states": 0}, scores, 4)
    np.testing.assert_array_equal(again.propensities(q, shown).item, p1.item)
    assert calls == []


def test_propensity_progress_lines():
    from onlineeval.cli.estimate import PropensityProgress

    t = [0.0]
    out = io.StringIO()
    p = PropensityProgress(out, every=5.0, clock=lambda: t[0])
    for done in range(1, 4):  # 3 queries in 2 s: nothing
        t[0] = done - 1.0
        p("Plackett-Luce item propensities of 3 queries", done, 3)
    assert out.getvalue() == ""
    what = "Plackett-Luce item propensities of 100 queries"
    for done in range(1, 101):  # 1 s each after the first
        t[0] = 10.0 + (done - 1)
        p(what, done, 100)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"{what}: 6/100, 5s, about 1m18s left"
    assert lines[-1] == f"{what}: 100/100, 1m39s"


def test_estimate_prints_the_progress_of_a_loggers_propensities(tmp_path: Path, monkeypatch):
    from onlineeval.cli import estimate as cli_estimate

    original = cli_estimate.PropensityProgress.__init__
    monkeypatch.setattr(cli_estimate.PropensityProgress, "__init__",
                        lambda self, stream=None, every=5.0, clock=None: original(self, stream, 0.0, clock))
    rng = np.random.default_rng(5)
    lines, run = [], []
    for q in range(6):
        scores = {f"d{j}": float(s) for j, s in enumerate(rng.normal(size=25))}
        spec = {"policy": "plackett_luce", "temperature": 1.0, "dp_max_states": 10, "scores": scores}
        docs = sorted(scores, key=scores.__getitem__, reverse=True)
        run += [f"q{q} Q0 {d} {r + 1} {25 - r} B" for r, d in enumerate(docs)]
        for i in range(20):
            shown = list(rng.permutation(docs)[:3])
            lines.append(json.dumps({"query": f"q{q}", "user": f"u{i}", "shown": shown, "clicks": shown[:1],
                                     "logger": spec}))
    (tmp_path / "log.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "B.run").write_text("\n".join(run) + "\n")
    result = CliRunner().invoke(app, ["estimate", "--log", str(tmp_path / "log.jsonl"), "--target",
                                      str(tmp_path / "B.run"), "--estimator", "iips"])
    assert result.exit_code == 0, result.output
    progress = [ln for ln in result.stderr.splitlines() if ln.startswith("Plackett-Luce item propensities")]
    assert progress and re.fullmatch(r"Plackett-Luce item propensities of 6 queries: 6/6, \d+s", progress[-1]), \
        progress


def test_quadrature_tables_side_by_side_give_the_same_bits(monkeypatch):
    """With PROPENSITY_THREADS above 1 the quadrature tables are computed in threads (its compiled kernel releases
    the GIL): the same marginals to the bit as one thread, progress still reported once per query in order."""
    import threading

    from simulations.policies.plackett_luce import PlackettLucePolicy
    from simulations.policies.settings import propensity_settings

    names: list[str] = []
    real = PlackettLucePolicy._quad_table
    monkeypatch.setattr(PlackettLucePolicy, "_quad_table",
                        lambda self, q: names.append(threading.current_thread().name) or real(self, q))
    rng = np.random.default_rng(6)
    scores = rng.normal(size=(9, 40))
    out = {}
    for threads in (1, 3):
        names.clear()
        calls: list[tuple[int, int]] = []
        policy = build_policy({"policy": "plackett_luce", "temperature": 0.8, "dp_max_states": 0}, scores, 5)
        with propensity_settings(threads, lambda w, d, n: calls.append((d, n))):
            out[threads] = policy.item_position_marginals(np.arange(9))
        assert calls == [(d, 9) for d in range(1, 10)]
        on_main = [n == threading.main_thread().name for n in names]
        assert len(names) == 9 and (all(on_main) if threads == 1 else not any(on_main)), names
    np.testing.assert_array_equal(out[1], out[3])


def test_the_python_apis_estimate_reads_a_logger_log_with_the_machines_threads(tmp_path: Path, monkeypatch):
    """onlineeval.api.estimate computes a logger's quadrature tables as the CLI does: PROPENSITY_THREADS is the
    machine's cores while the log is read (and 1 again after)."""
    import os

    import onlineeval.api as api
    from simulations.policies.settings import PROPENSITY_THREADS
    from simulations.policies.plackett_luce import PlackettLucePolicy

    monkeypatch.setattr(os, "cpu_count", lambda: 7)  # (distinct from the default 1 on any machine)
    seen: list[int] = []
    real = PlackettLucePolicy._ensure_tables
    monkeypatch.setattr(PlackettLucePolicy, "_ensure_tables",
                        lambda self, q: seen.append(PROPENSITY_THREADS.get()) or real(self, q))
    rng = np.random.default_rng(8)
    lines = []
    lists = {}
    for q in range(3):
        scores = {f"d{j}": float(s) for j, s in enumerate(rng.normal(size=12))}
        lists[f"q{q}"] = sorted(scores, key=scores.__getitem__, reverse=True)
        for i in range(10):
            shown = list(rng.permutation(lists[f"q{q}"])[:3])
            lines.append(json.dumps({"query": f"q{q}", "shown": shown, "clicks": shown[:1], "logger": {
                "policy": "plackett_luce", "temperature": 1.0, "dp_max_states": 5, "scores": scores}}))
    (tmp_path / "log.jsonl").write_text("\n".join(lines) + "\n")
    out = api.estimate(tmp_path / "log.jsonl", {"B": lists}, "iips")
    assert np.isfinite(out.value("iips", "B"))
    assert seen and set(seen) == {7}
    assert PROPENSITY_THREADS.get() == 1
    calls: list[tuple[str, int, int]] = []  # on_progress: the CLI's progress calls, query by query
    again = api.estimate(tmp_path / "log.jsonl", {"B": lists}, "iips", on_progress=lambda *c: calls.append(c))
    assert calls == [("Plackett-Luce item propensities of 3 queries", i, 3) for i in (1, 2, 3)]
    assert again.value("iips", "B") == out.value("iips", "B")
