"""The interleaving designs' Monte Carlo truth drawn through the design's draw table and compiled batch step
(:func:`simulations.truth_interleaving._table_step`) against the interleaver's own draw and the click models' sampler
(the path every other design takes): the same impressions, so the same truth and standard error to the bit, for
team-draft and balanced interleaving, with and without the null user, on synthetic lists and on TREC runs whose short
lists leave slots empty, under chain and independent-click user types; the designs the table does not serve
(probabilistic interleaving, users whose click model has no grade tables) keep the interleaver's path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import simulations.truth_interleaving as ti
from simulations.config import config_from_mapping
from simulations.runner import world_seed
from simulations.users import UserModels
from simulations.world import build_world

TYPES = {
    "nav": {"name": "cascade", "preset": "navigational"},
    "inf": {"name": "cascade", "preset": "informational"},
    "pbm": {"name": "pbm", "examination": [1.0, 0.7, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1, 0.1],
            "click": [0.05, 0.3, 0.5, 0.7, 0.95]},
    "dbn": {"name": "dbn", "click": [0.1, 0.3, 0.5, 0.7, 0.9], "satisfaction": [0.05, 0.2, 0.4, 0.6, 0.8],
            "gamma": 0.8},
}


def _mapping(method: str, types: tuple[str, ...], depth: int = 10) -> dict:
    return {
        "seed": 11, "replicates": 1,
        "collection": {"n_queries": 200, "candidates": depth + 5},
        "rankers": {"depth": depth, "A": {"noise": 1.0}, "B": {"noise": 0.7}},
        "users": {"population": 100, "types": [{"name": t, "share": 1 / len(types), "click_model": TYPES[t]}
                                               for t in types]},
        "traffic": {"days": 1, "queries_per_day": 100},
        "designs": [{"name": "il", "type": "interleaving", "method": method}],
        "analysis": {"truth_impressions": 450_001},  # three chunks, the last a short one
    }


def _trec_mapping(tmp_path: Path, method: str) -> dict:
    """Two TREC runs over 40 queries, B's list shorter than the depth on every third query and A's on every fifth:
    the interleaved lists there leave slots empty."""
    rng = np.random.default_rng(3)
    qrels, runs = [], {"A": [], "B": []}
    for q in range(40):
        docs = [f"q{q}d{d}" for d in range(12)]
        qrels += [f"q{q} 0 {d} {int(g)}\n" for d, g in zip(docs, rng.integers(0, 3, 12), strict=True)]
        for name, short in (("A", q % 5 == 0), ("B", q % 3 == 0)):
            order = rng.permutation(12)[: 3 if short else 12]
            runs[name] += [f"q{q} Q0 {docs[i]} {r + 1} {20 - r} {name}\n" for r, i in enumerate(order)]
    (tmp_path / "qrels").write_text("".join(qrels))
    for name, lines in runs.items():
        (tmp_path / name).write_text("".join(lines))
    mapping = _mapping(method, ("nav", "pbm"), depth=6)
    mapping["collection"] = {"type": "trec", "qrels": str(tmp_path / "qrels"),
                             "runs": {"A": str(tmp_path / "A"), "B": str(tmp_path / "B")}}
    mapping["offline_metric"] = "nDCG@6"
    mapping["users"]["types"][1]["click_model"] = {"name": "pbm", "examination": [1.0, 0.7, 0.5, 0.4, 0.3, 0.25],
                                                   "click": [0.05, 0.5, 0.9]}
    mapping["users"]["types"][0]["click_model"] = {"name": "cascade", "preset": "navigational", "grades": 3}
    return mapping


def _both_ways(mapping: dict, monkeypatch: pytest.MonkeyPatch) -> tuple[list, list, int]:
    """Each of the design's truths (preferences and null user) through the table and through the interleaver:
    ``(table truths, interleaver truths, compiled steps run)``."""
    from simulations import kernels

    config = config_from_mapping(mapping)
    world = build_world(config, world_seed(config.seed))
    users = UserModels.from_config(config.users)
    design = config.designs[0]
    calls = []
    step = kernels.interleaving_step
    monkeypatch.setattr(kernels, "interleaving_step", lambda *a: calls.append(1) or step(*a))
    fast = [t for null in (False, True) for t in ti.interleaving_truth(config, design, world, users, null)]
    ran = len(calls)
    original = ti._table_step
    monkeypatch.setattr(ti, "_table_step", lambda *a: None)
    slow = [t for null in (False, True) for t in ti.interleaving_truth(config, design, world, users, null)]
    monkeypatch.setattr(ti, "_table_step", original)
    assert len(calls) == ran  # the reference drew through the interleaver
    return fast, slow, ran


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("types", [("nav", "inf"), ("nav", "pbm", "dbn")])
def test_the_table_draw_gives_the_interleavers_truth(method: str, types: tuple[str, ...],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow, ran = _both_ways(_mapping(method, types), monkeypatch)
    assert ran == 2 * 3  # three chunks, preferences and null user
    assert [(t.metric, t.value, t.se, t.method) for t in fast] == [(t.metric, t.value, t.se, t.method) for t in slow]
    assert fast[0].se > 0 and abs(fast[0].value) > 4 * fast[0].se  # B is better: a preference, drawn


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_the_table_draw_with_empty_slots(method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mapping = _trec_mapping(tmp_path, method)
    config = config_from_mapping(mapping)
    from simulations.designs.interleaving import draw_table, shared_interleaver

    world = build_world(config, world_seed(config.seed))
    table = draw_table(shared_interleaver(method, {}), [world.rankings["A"], world.rankings["B"]], world.labels,
                       world.depth)
    assert table is not None and table.valid is not None and not table.valid.all()  # empty slots are drawn
    fast, slow, ran = _both_ways(mapping, monkeypatch)
    assert ran == 2 * 3
    assert [(t.metric, t.value, t.se) for t in fast] == [(t.metric, t.value, t.se) for t in slow]


@pytest.mark.parametrize(("method", "ubm"), [("probabilistic", False), ("team_draft", True), ("balanced", True)])
def test_other_designs_keep_the_interleavers_draw(method: str, ubm: bool) -> None:
    """Probabilistic interleaving has no draw table; UBM users (the second type) no grade tables: no table step."""
    import clickmodels
    from simulations.designs.interleaving import shared_interleaver

    mapping = _mapping(method, ("nav", "inf"), depth=6)
    if ubm:
        mapping["users"]["types"][1]["click_model"] = clickmodels.UBM.example_spec
    config = config_from_mapping(mapping)
    world = build_world(config, world_seed(config.seed))
    users = UserModels.from_config(config.users)
    il = shared_interleaver(method, {})
    lists = [world.rankings["A"], world.rankings["B"]]
    assert ti._table_step(il, lists, world, users, None) is None
    assert ti._table_step(il, lists, world, users, world.ranked_labels("A")) is None
    if ubm:  # the same world with grade-table users: the table step
        plain = UserModels.from_config(config_from_mapping(_mapping(method, ("nav", "inf"), depth=6)).users)
        assert ti._table_step(il, lists, world, plain, None) is not None
