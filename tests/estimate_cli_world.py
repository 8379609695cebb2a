"""Shared set-up of the `onlineeval estimate` CLI tests (tests/test_estimate_cli*.py): a simulated log
(uniformly random ordered K of M candidates, PBM clicks) written as the command reads it and built directly as
the library's LoggedData, TREC runs, the CLI runner, and the module-scoped ``world`` fixture (import it into a
test module to use it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.estimators import DeterministicTarget, LoggedData, available_estimators, get_reward

runner = CliRunner()

K = 3
M = 5  # candidates per query
EXAM = np.array([1.0, 0.6, 0.3])  # PBM examination by slot


@dataclass
class Sim:
    """A simulated log (uniformly random ordered K of M candidates) and its arrays."""

    query: np.ndarray  # (n,) query number
    user: np.ndarray  # (n,) user number (first appearances in increasing order)
    shown: np.ndarray  # (n, K) candidate number
    clicks: np.ndarray  # (n, K) bool
    attract: np.ndarray  # (Q, m) attractiveness
    m: int = M
    k: int = K

    def doc(self, q: int, c: int) -> str:
        return f"q{q}d{c}"


def simulate(n: int, n_queries: int, n_users: int, seed: int, m: int = M, k: int = K) -> Sim:
    rng = np.random.default_rng(seed)
    attract = rng.uniform(0.05, 0.9, size=(n_queries, m))
    query = rng.integers(0, n_queries, n)
    user = np.concatenate([np.arange(min(n, n_users)), rng.integers(0, n_users, max(0, n - n_users))])
    shown = np.argsort(rng.random((n, m)), axis=1)[:, :k]  # a uniformly random ordered k of m
    clicks = rng.random((n, k)) < EXAM[None, :k] * attract[query[:, None], shown]
    return Sim(query, user, shown, clicks, attract, m, k)


def uniform_propensities(m: int, k: int) -> dict[str, Any]:
    """A uniformly random ordered k of m: prefix j has probability 1 / (m (m-1) ... (m-j)),
    each document 1/m at its slot."""
    prefix = [float(1 / np.prod(np.arange(m - j, m + 1))) for j in range(k)]
    return {"list": prefix[-1], "prefix": prefix, "item": [1 / m] * k}


def write_log(sim: Sim, path: Path, forms: tuple[str, ...] = ("list", "prefix", "item"), logger: bool = False,
              users: bool = True) -> Path:
    props = uniform_propensities(sim.m, sim.k)
    assert sim.m != 5 or sim.k != 3 or props == {"list": 1 / 60, "prefix": [1 / 5, 1 / 20, 1 / 60], "item": [0.2] * 3}
    lines = []
    for i in range(sim.query.size):
        q = int(sim.query[i])
        shown = [sim.doc(q, int(c)) for c in sim.shown[i]]
        rec: dict[str, Any] = {"query": f"q{q}", "shown": shown}
        if users:
            rec["user"] = f"u{int(sim.user[i])}"
        rec["clicks"] = [d for d, c in zip(shown, sim.clicks[i]) if c] if i % 2 else sim.clicks[i].astype(int).tolist()
        if logger:
            rec["logger"] = {"policy": "randtop", "n": sim.m,
                             "scores": {sim.doc(q, c): float(sim.m - c) for c in range(sim.m)}}
        else:
            rec["propensities"] = {f: props[f] for f in forms}
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_run(path: Path, lists: dict[int, list[int]], tag: str) -> Path:
    """A TREC run ranking candidate numbers of each query (scores descending)."""
    rows = [f"q{q} Q0 q{q}d{c} {r + 1} {10 - r} {tag}" for q, cs in lists.items() for r, c in enumerate(cs)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def lib_data(sim: Sim, users: bool = True) -> LoggedData:
    """The same log built directly (sorted query ids; own document numbering q * M + c; the users numbered in the
    sorted order of their ids, as the reader numbers them)."""
    ids = sorted({f"q{q}" for q in sim.query})
    user = np.unique(np.array([f"u{u}" for u in sim.user]), return_inverse=True)[1] if users else None
    qidx = np.array([ids.index(f"q{q}") for q in sim.query])
    n = sim.query.size
    return LoggedData(
        qidx, sim.query[:, None] * M + sim.shown, sim.clicks,
        p_list=np.full(n, 1 / 60), p_prefix=np.tile([1 / 5, 1 / 20, 1 / 60], (n, 1)), p_item=np.full((n, K), 0.2),
        user=user,
    )


def lib_target(sim: Sim, lists: dict[int, list[int]], name: str) -> DeterministicTarget:
    ids = sorted({int(q) for q in sim.query}, key=lambda q: f"q{q}")
    return DeterministicTarget(np.array([[q * M + c for c in lists[q][:K]] for q in ids]), name)


def invoke(*args: str) -> Any:
    return runner.invoke(app, ["estimate", *args])


def json_out(*args: str) -> dict[str, Any]:
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("estimate")
    sim = simulate(3000, 4, 300, seed=11)
    best = {q: list(np.argsort(-sim.attract[q])) for q in range(4)}
    worst = {q: list(np.argsort(sim.attract[q])) for q in range(4)}
    return {
        "sim": sim, "tmp": tmp, "best": best, "worst": worst,
        "log": write_log(sim, tmp / "log.jsonl"),
        "B": write_run(tmp / "B.run", best, "B"),
        "A": write_run(tmp / "A.run", worst, "A"),
    }


def some_estimators(metric: str = "reciprocal_rank") -> list[str]:
    """IPS and SNIPS, plus the slot-level estimators when they are registered, each only where
    it can estimate ``metric`` (snrips: first-click rewards only)."""
    from onlineeval.estimators import estimator_class

    kind = get_reward(metric, K).kind
    return [e for e in ("ips", "snips", "iips", "rips", "snrips")
            if e in available_estimators() and kind in estimator_class(e).rewards]


def one_line_error(result: Any, *needles: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in result.output, result.output
    for needle in needles:
        assert needle in err, (needle, err)
    return err
