"""`onlineeval estimate` does not depend on the order of the log's lines: the users are numbered in the sorted
order of their ids (:func:`onlineeval.io.logged.cluster_codes`), so the bootstrap's resamples of the user clusters
and the cross-fitted estimators' folds are the same for the log with its lines shuffled. Before, users were numbered
in order of first appearance: the shuffled log gave other bootstrap intervals and other cross-fitted estimates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from estimate_cli_world import json_out, world  # noqa: F401  (world: the module-scoped fixture)
from onlineeval.io.logged import cluster_codes

ARGS = ("--estimator", "ips,snips,rips,dr,cascade_dr", "--metric", "clicks_per_query", "--bootstrap", "200",
        "--seed", "5")


def _shuffled(path: Path, out: Path, seed: int) -> Path:
    lines = path.read_text().splitlines(keepends=True)
    order = np.random.default_rng(seed).permutation(len(lines))
    out.write_text("".join(lines[i] for i in order))
    return out


def _numbers(doc: dict[str, Any]) -> list[Any]:
    keep = ("estimate", "se", "ci_low", "ci_high", "boot_low", "boot_high", "pvalue")
    return [[r.get(key) for key in keep] for part in ("results", "differences") for r in doc[part]]


def test_shuffled_lines_give_the_same_numbers(world: dict[str, Any]) -> None:  # noqa: F811
    log = world["log"]
    shuffled = _shuffled(log, world["tmp"] / "shuffled.jsonl", seed=2)
    assert shuffled.read_text() != log.read_text()
    a = json_out("--log", str(log), "--target", str(world["B"]), "--baseline", str(world["A"]), *ARGS)
    b = json_out("--log", str(shuffled), "--target", str(world["B"]), "--baseline", str(world["A"]), *ARGS)
    got_a, got_b = _numbers(a), _numbers(b)
    # every estimator ran, with a bootstrap interval; the folds of dr and cascade_dr are cross-fitted (2 by default)
    assert len(got_a) == 15 and all(row[4] is not None for row in got_a)
    # the same numbers up to the order of floating-point sums over the shuffled impressions
    assert np.array(got_b, dtype=float) == pytest.approx(np.array(got_a, dtype=float), rel=1e-9, abs=1e-12, nan_ok=True)


def test_cluster_codes_follow_sorted_ids() -> None:
    users = np.array(["u2", None, "u10", "u2", "a", None], dtype=object)
    # sorted ids: "a" < "u10" < "u2"; impressions without a user each a cluster of their own after them, in line order
    assert cluster_codes(users).tolist() == [2, 3, 1, 2, 0, 4]
    assert cluster_codes(np.array([None, None], dtype=object)).tolist() == [0, 1]
    assert json.dumps(cluster_codes(np.array(["x"], dtype=object)).tolist()) == "[0]"
