"""An estimate whose importance weight sits on a few users' impressions: the impressions' effective sample size
(hundreds) said nothing was wrong, while the clustered standard error averaged over about five independent units
(the users). The weights' effective number of users, (sum W_u)^2 / sum W_u^2 with W_u a user's total absolute weight,
is reported (JSON diagnostics ``ess_clusters``) and below 30 warned about.

The log: one slot, document 'a' shown with probability 0.9 and 'b' with 0.1 (propensities written); the target
shows 'b', so only impressions showing 'b' carry weight (10 each). 'b' impressions all belong to 5 heavy users
(100 each, clicks at 0.4): ESS 500 impressions, 5 users. Spread over 500 users instead: no warning.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from onlineeval.cli import app


def _write(tmp: Path, heavy: bool) -> tuple[Path, Path]:
    rng = np.random.default_rng(7)
    lines = []
    for i in range(5000):
        doc = "b" if i < 500 else "a"
        user = (f"h{i % 5}" if heavy else f"b{i}") if doc == "b" else f"u{i % 1000}"
        click = int(rng.random() < (0.4 if doc == "b" else 0.2))
        p = 0.1 if doc == "b" else 0.9
        lines.append({"query": "q1", "user": user, "shown": [doc], "clicks": [click],
                      "propensities": {"list": p, "prefix": [p], "item": [p]}})
    log = tmp / ("heavy.jsonl" if heavy else "spread.jsonl")
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = tmp / "B.run"
    run.write_text("q1 Q0 b 1 2.0 B\nq1 Q0 a 2 1.0 B\n")
    return log, run


def _estimate(log: Path, run: Path) -> dict:  # type: ignore[type-arg]
    res = CliRunner().invoke(app, ["estimate", "--log", str(log), "--target", str(run), "--estimator", "ips,snips",
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_weights_on_five_users_warn(tmp_path: Path) -> None:
    doc = _estimate(*_write(tmp_path, heavy=True))
    for r in doc["results"]:
        d = r["diagnostics"]
        assert d["ess_impressions"] == 500.0 or abs(d["ess_impressions"] - 500) < 1e-9
        # every heavy user holds 100 'b' impressions of weight 10: (5 x 1000)^2 / (5 x 1000^2) = 5
        assert abs(d["ess_clusters"] - 5.0) < 1e-9
        hit = [w for w in r["warnings"] if "effective users" in w]
        assert len(hit) == 1 and hit[0].startswith("the weights rest on 5.0 effective users")
        assert "500 effective impressions carry them" in hit[0]
        assert not any(w.startswith("effective sample size") for w in r["warnings"])


def test_weights_spread_over_users_do_not(tmp_path: Path) -> None:
    doc = _estimate(*_write(tmp_path, heavy=False))
    for r in doc["results"]:
        assert abs(r["diagnostics"]["ess_clusters"] - 500.0) < 1e-6
        assert not any("effective users" in w for w in r["warnings"])
