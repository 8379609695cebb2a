"""The counterfactual design's targets are shared by every replicate a process runs, so what an estimator keeps per
(logger, target) outlives a replicate. The pseudoinverse on a Plackett-Luce logger asks the logger for each query's
pair marginals (a dynamic programme, about 8 ms a query at 20 candidates) and keeps the resulting weights per
(logger, target); with a new target object per replicate it asked again in every replicate (40 replicates of
configs/counterfactual.yaml with that logger: 2 min 57 s, now 22 s, the same numbers). Checked here: the second
replicate asks for no query the first one asked for, and its rows are bit for bit those of the same replicate run
with every cache emptied."""

from __future__ import annotations

import numpy as np
import pytest
from test_simulation_counterfactual import _config

from simulations.runner import replicate_seeds, run_replicate, world_seed
from simulations.users import UserModels
from simulations.world import build_world

PL = {"policy": "plackett_luce", "ranker": "A", "temperature": 0.5}


def _setup():
    cfg = _config(logger=PL, estimators=("snips", "pseudoinverse"), replicates=2)
    world = build_world(cfg, world_seed(cfg.seed))
    return cfg, world, UserModels.from_config(cfg.users), replicate_seeds(cfg.seed, cfg.replicates)


def _empty_caches() -> None:
    from onlineeval.estimators import pseudoinverse
    from simulations.designs.counterfactual import serving

    pseudoinverse._CACHE.clear()
    pseudoinverse._STORES.clear()
    serving._TARGETS.clear()
    serving._POLICIES.clear()


def _count_pairs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from simulations.policies.plackett_luce import PlackettLucePolicy

    asked: list[int] = []
    original = PlackettLucePolicy.pair_marginals

    def counted(self, query_one):
        asked.append(int(query_one))
        return original(self, query_one)

    monkeypatch.setattr(PlackettLucePolicy, "pair_marginals", counted)
    return asked


def test_a_later_replicate_reuses_the_pair_marginals_of_the_queries_seen_before(monkeypatch) -> None:
    from onlineeval.estimators import pseudoinverse
    from simulations.designs.counterfactual.serving import shared_target

    _empty_caches()
    asked = _count_pairs(monkeypatch)
    # the logger's decompositions do not fit the pseudoinverse's store (1,000 Plackett-Luce queries of 20
    # candidates and 5 slots need about 240 MB against its 64 MB): only the weights cache can spare a query
    monkeypatch.setattr(pseudoinverse, "STORE_BYTES", 0)
    cfg, world, users, seqs = _setup()
    run_replicate(cfg, world, users, seqs[0], 0)
    first = set(asked)
    assert first  # the pseudoinverse asked for the queries of the first replicate's log
    n_first = len(asked)
    run_replicate(cfg, world, users, seqs[1], 1)
    again = set(asked[n_first:])
    assert not again & first, sorted(again & first)[:5]
    assert shared_target(world, "B") is shared_target(world, "B")
    assert shared_target(world, "B") is not shared_target(world, "A")


def test_the_rows_do_not_depend_on_what_the_caches_hold() -> None:
    cfg, world, users, seqs = _setup()
    _empty_caches()
    run_replicate(cfg, world, users, seqs[0], 0)
    warm = run_replicate(cfg, world, users, seqs[1], 1)
    _empty_caches()
    cold = run_replicate(cfg, world, users, seqs[1], 1)
    assert len(warm) == len(cold) > 0
    pi = [r for r in warm if r["metric"] == "pseudoinverse"]
    assert pi and all(np.isfinite(r["estimate"]) for r in pi)
    for w, c in zip(warm, cold):
        assert w.keys() == c.keys()
        for key in w:
            a, b = w[key], c[key]
            if isinstance(a, float) and np.isnan(a):
                assert isinstance(b, float) and np.isnan(b), key
            else:
                assert a == b, (key, a, b)
