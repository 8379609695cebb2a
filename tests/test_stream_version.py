"""Change detector for the numbers a seed gives (:data:`simulations.job.STREAM_VERSION`).

A resumed run keeps the replicates of its partial file when the fingerprint matches, and the fingerprint covers the
code only through ``STREAM_VERSION``: a change that makes a seed give other numbers (another sampler for the same
distribution, another order of draws) without bumping it would let a resumed run mix the replicates of two
versions. This test runs one replicate of a small config holding every design type (A/B; every interleaving and
multileaving method; counterfactual with every logging policy), with its A/A and null variants, through the
real :func:`simulations.runner.run_replicate`, and hashes, per design, the **integer** draws it can see after each
batch (never floats, whose last bits may differ across CPUs and NumPy builds):

- the world (grades, rankers' lists) and the traffic (each batch's queries, users, user types);
- A/B: the arm of every user, the per-user counts of impressions, clicks and abandoned impressions, and the
  reciprocal-rank sums times lcm(1..depth) (exact integers, rounded);
- interleaving: the coins of the table-drawn methods (team-draft, balanced: their team assignments), the shown
  lists, teams and clicks of the others (read where the design hands them to ``pair_outcomes``), the per-user
  counts of impressions and of impressions with a click, and the win/loss sums times 2 where they are halves;
- counterfactual: the logger's shown lists and the clicks of each batch (the design's own log), the per-user
  counts of impressions, clicks and abandoned impressions, and the reciprocal-rank sums times lcm(1..depth); and
  (``cf_mixture``, ``bootstrap: 100``) the last day's bootstrap resamples, as counts of each user's draws;
- clicks (``clicks:<model>``): the clicks :meth:`UserModels.sample` draws for one fixed batch under every registered
  click model alone, and under all of them (and all the chain models) as one population of user types, so that
  each model's sampler and both of the simulator's click paths are covered, not only the replicate's two models.

The hooks wrap functions the designs call (``run_traffic``, ``pair_outcomes``, ``DrawTable.draw_coin_rows``) and
read the designs' state; they change no number (the replicate's rows are checked against an unhooked run). A
digest differs from the stored one when that design's stream changed: bump ``STREAM_VERSION`` and update it
(``python tests/test_stream_version.py`` prints this checkout's digests; a failure names the new one).

The draws do not see a change of a formula that draws nothing (an estimator's terms, an SE, an interval, a
p-value: STREAM_VERSION 4, 5 and 6 were such changes, bumped by hand), so the test also compares **every number the
replicate reports** (its rows: per design, A/A variant and checkpoint, each metric's estimate, SE, interval,
p-value and counts, the null variants' ``null:`` rows, SRM, CUPED and per-batch rows) with the numbers stored in
``tests/data/stream_version_numbers.json`` (:data:`NUMBERS_FILE`), floats within a relative 1e-9 (absolute
1e-12; p-values relatively only) rather than hashed: last-bit differences between CPUs, NumPy and BLAS builds
pass (the designs' NumPy paths, other summation orders, differ from the compiled kernels by at most 4e-13 and
pass), a changed formula does not (a term times 1 + 1e-6 fails; both are tested). CONFIG's last four designs are
there for these numbers: every estimator on every reward kind it takes, Welch's test, CUPED, per-batch looks and an
injected broken split.

**When a test here fails** because a change is meant to change numbers (another estimator formula, interval,
sampler): bump ``STREAM_VERSION`` in ``simulations/stream.py`` (a resumed run or sweep would otherwise mix replicates
of both versions), then regenerate the stored numbers with ``python tests/test_stream_version.py --write-numbers``
(it refuses while the stored numbers are of the same STREAM_VERSION and differ: bump first; ``--same-version``
overrides it, for a change of this test's CONFIG only) and, if a digest failed, paste the digests
``python tests/test_stream_version.py`` prints into :data:`DIGESTS`. Commit the regenerated file with the change
(its diff shows which rows moved). The digests and numbers stored are those of the code at the STREAM_VERSION they
go with; one replicate of this config runs in about 0.6 s of CPU once the compiled kernels are cached.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import simulations.designs.interleaving as interleaving_module
import simulations.runner as runner_module
from simulations.config import Config, config_from_mapping
from simulations.designs.base import Design
from simulations.designs.counterfactual import CounterfactualDesign
from simulations.designs.interleaving import DrawTable
from simulations.job import STREAM_VERSION, prepare_world
from simulations.runner import replicate_seeds, run_replicate
from simulations.users import UserModels
from stream_numbers import (  # the stored numbers' file, comparison and writer
    NUMBERS_FILE,
    NUMBERS_MESSAGE,
    REGENERATE,
    compare_numbers,
    load_numbers,
    replicate_numbers,
    write_numbers,
)

_EG = {"policy": "epsilon_greedy", "epsilon": 0.2}
CONFIG: dict[str, Any] = {
    "seed": 20261201,
    "replicates": 1,
    "collection": {"type": "synthetic", "n_queries": 40, "candidates": 10},
    "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.8}, "others": {"C": {"noise": 0.9}}},
    "users": {"population": 300, "types": [
        {"name": "nav", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}},
        {"name": "pbm", "share": 0.5, "click_model": {"name": "pbm", "preset": "ai2018"}},
    ]},
    "traffic": {"days": 2, "queries_per_day": 400, "batch_hours": 12},
    "analysis": {"aa": True, "null": True, "truth_impressions": 2000},
    "designs": [
        {"name": "ab", "type": "ab", "metric": "reciprocal_rank"},
        {"name": "team_draft", "type": "interleaving", "method": "team_draft"},
        {"name": "balanced", "type": "interleaving", "method": "balanced"},
        {"name": "probabilistic", "type": "interleaving", "method": "probabilistic"},
        {"name": "optimized", "type": "interleaving", "method": "optimized"},
        {"name": "team_draft_multileave", "type": "interleaving", "method": "team_draft_multileave",
         "rankers": ["A", "B", "C"]},
        {"name": "probabilistic_multileave", "type": "interleaving", "method": "probabilistic_multileave",
         "rankers": ["A", "B", "C"]},
        {"name": "cf_deterministic", "type": "counterfactual", "logger": {"policy": "deterministic", "ranker": "A"}},
        {"name": "cf_plackett_luce", "type": "counterfactual", "logger": {"policy": "plackett_luce", "ranker": "A"}},
        {"name": "cf_epsilon_greedy", "type": "counterfactual", "logger": {**_EG, "ranker": "A"}},
        {"name": "cf_randtop", "type": "counterfactual", "logger": {"policy": "randtop", "ranker": "A"}},
        {"name": "cf_randpair", "type": "counterfactual", "logger": {"policy": "randpair", "ranker": "A"}},
        {"name": "cf_swap", "type": "counterfactual", "logger": {"policy": "swap", "ranker": "A"}},
        {"name": "cf_mixture", "type": "counterfactual", "bootstrap": 100, "logger": {
            "policy": "mixture", "ranker": "A",
            "components": [{**_EG, "n": 10, "weight": 0.8}, {**_EG, "n": 10, "scores": "B", "weight": 0.2}]}},
        # for the reported numbers (NUMBERS_FILE): the A/B options that add rows (Welch's test, CUPED, per-batch
        # looks, an injected broken split) and every estimator on each kind of reward (additive; first-click with
        # an offset, abandonment, with the bootstrap; first-click without) through both serving paths
        {"name": "ab_options", "type": "ab", "metric": "clicks_per_query", "test": "welch", "share_b": 0.4,
         "analysis": {"cuped": {"pre_days": 1}, "monitoring": "batch",
                      "srm": {"inject": {"user_type": "nav", "share": 0.2}}}},
        {"name": "cf_additive", "type": "counterfactual", "metric": "clicks_per_query", "logger": {
            "policy": "mixture", "ranker": "A",
            "components": [{**_EG, "n": 10, "weight": 0.8}, {**_EG, "n": 10, "scores": "B", "weight": 0.2}]},
         "estimators": ["ips", "snips", {"name": "clipped_ips", "cap": 5}, "rips", "iips", "adaptive_ips", "pbm_ips",
                        "pseudoinverse", "dm", "dr", "dr_list", "cascade_dr"]},
        {"name": "cf_abandonment", "type": "counterfactual", "metric": "abandonment", "bootstrap": 100,
         "logger": {"policy": "plackett_luce", "ranker": "A"},
         "estimators": ["ips", "snips", "snrips", {"name": "clipped_ips", "cap": 5}, "rips", "iips", "adaptive_ips",
                        "pseudoinverse"]},
        {"name": "cf_first_click_models", "type": "counterfactual", "metric": "reciprocal_rank",
         "logger": {"policy": "plackett_luce", "ranker": "A"}, "estimators": ["dm", "dr_list", "cascade_dr"]},
        # test: delta_t (the CR2 SE and t with the df at the intra-user correlation): A/B with per-batch looks,
        # two-ranker team-draft (its table's path) and a multileaving pair set
        {"name": "ab_delta_t", "type": "ab", "test": "delta_t", "analysis": {"monitoring": "batch"}},
        {"name": "team_draft_delta_t", "type": "interleaving", "method": "team_draft", "test": "delta_t"},
        {"name": "multileave_delta_t", "type": "interleaving", "method": "team_draft_multileave",
         "rankers": ["A", "B", "C"], "test": "delta_t"},
    ],
}

#: interleaving methods whose per-impression outcomes are -1, 0, +1 (sums of halves: exact after times 2)
_HALVES = {"team_draft", "balanced", "team_draft_multileave"}

#: the stored digests (the first 16 hex digits of each stream's SHA-256): see the module docstring
DIGESTS = {
    "ab": "14e6cf3ded5b87fd",
    "ab (A/A)": "35e8221e6a360a92",
    "balanced": "950d3d520a4528ba",
    "balanced (A/A)": "f760870253438a4e",
    "balanced (null)": "64aa97da1b300f18",
    "ab_options": "6ed95236a58951b5",
    "ab_options (A/A)": "03bf77e105edc2f0",
    "cf_abandonment": "3feab78be9c21064",
    "cf_additive": "fd229a3d7f3fe512",
    "cf_deterministic": "ad63f3da32682da9",
    "cf_first_click_models": "444fe8d5a09c255b",
    "cf_epsilon_greedy": "1cd2df7dbfe242e6",
    "cf_mixture": "30eceb894d3cf6c7",
    "cf_plackett_luce": "9751f043109f46cc",
    "cf_randpair": "9c378e4288a07d0d",
    "cf_randtop": "63cb90428ec3e128",
    "cf_swap": "e147ad91d070c020",
    "clicks:cascade": "093344261419b481",
    "clicks:ccm": "7e769d18040d9709",
    "clicks:cm": "5077f434478faa65",
    "clicks:dbn": "748ef2a0d1583a06",
    "clicks:dcm": "9f271bea067e1ccf",
    "clicks:dctr": "ac55c9a4dfe5b8bf",
    "clicks:every chain model": "15b8861062c0df24",
    "clicks:every model": "091e27441313c060",
    "clicks:gctr": "caa68e4cfce48612",
    "clicks:metric": "858c78b7f23131a6",
    "clicks:pbm": "93707adf15948e4c",
    "clicks:random": "f0f99ab4fa3777f5",
    "clicks:rbp": "0c3aaf880eb5a805",
    "clicks:rctr": "50d8c64e934d23bf",
    "clicks:sdbn": "1c650f4150f04e6d",
    "clicks:ubm": "05ec73cc33c7f622",
    "optimized": "33c009963c6e9952",
    "optimized (A/A)": "ac6409ee6dbc0ef9",
    "optimized (null)": "480604cc44908d76",
    "probabilistic": "8d1ee61a975169c2",
    "probabilistic (A/A)": "bc9d022dac0611cf",
    "probabilistic (null)": "5f6d9068c4ef1a7b",
    "probabilistic_multileave": "0873cab3c95006c6",
    "probabilistic_multileave (A/A)": "be92c68b42f3a69e",
    "probabilistic_multileave (null)": "fb92efbc81966271",
    "team_draft": "aeb9957d4b143f6a",
    "team_draft (A/A)": "a2e06174e80d7549",
    "team_draft (null)": "15ae06a57d43faa7",
    "team_draft_multileave": "5ebee3ca36c780a8",
    "team_draft_multileave (A/A)": "6ba1b64e1cd66f32",
    "team_draft_multileave (null)": "fcd3190d745798ce",
    "ab_delta_t": "1126eb6634e74fb2",
    "ab_delta_t (A/A)": "752b57791658d9fe",
    "multileave_delta_t": "3792a48ee4a73e0e",
    "multileave_delta_t (A/A)": "6c44770acd4eef1f",
    "multileave_delta_t (null)": "aae6808188274406",
    "team_draft_delta_t": "d1c13e28e5d2a0ae",
    "team_draft_delta_t (A/A)": "1f95f20901bd73b8",
    "team_draft_delta_t (null)": "24e58bde87a4d33f",
    "traffic": "8ed84aa7eb616183",
    "world": "754f2d02a6365707",
}

MESSAGE = ("the numbers a seed gives changed for {name}: bump STREAM_VERSION in simulations/stream.py "
           "(resumed runs must "
           "not mix versions) and update the digest here")


def _label(design: Design) -> str:
    if getattr(design, "null_labels", None) is not None:
        return f"{design.name} (null)"
    return f"{design.name} (A/A)" if design.aa else design.name


class Recorder:
    """SHA-256 per stream of the integer arrays it is given, and how many arrays each got."""

    def __init__(self) -> None:
        self.hashes: dict[str, Any] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.current: str | None = None  # the design processing a batch

    def add(self, stream: str, what: str, array: Any) -> None:
        a = np.asarray(array)
        if a.dtype.kind not in "biu":
            raise TypeError(f"{stream}: {what} is not an integer array ({a.dtype}); only integer draws are hashed")
        h = self.hashes.setdefault(stream, hashlib.sha256())
        h.update(f"{what}{a.shape}".encode())
        h.update(np.ascontiguousarray(a, dtype="<i8").tobytes())
        counts = self.counts.setdefault(stream, {})
        counts[what] = counts.get(what, 0) + 1

    def add_scaled(self, stream: str, what: str, values: np.ndarray, scale: int) -> None:
        """Per-user sums that are exact multiples of ``1 / scale``, as the integers ``values * scale``."""
        scaled = np.asarray(values, dtype=np.float64) * scale
        ints = np.rint(scaled)
        worst = float(np.max(np.abs(scaled - ints))) if scaled.size else 0.0
        assert worst < 1e-6, f"{stream}: {what} times {scale} is not an integer (off by {worst})"
        self.add(stream, what, ints.astype(np.int64))

    def digests(self) -> dict[str, str]:
        return {k: h.hexdigest()[:16] for k, h in sorted(self.hashes.items())}


def _record_design(rec: Recorder, design: Design, batch: Any, log_length: int) -> None:
    """The integer draws of ``design`` visible after it processed ``batch``."""
    label = _label(design)
    depth = design.world.depth
    rr_scale = math.lcm(*range(1, depth + 1))  # 1 / (rank + 1) for ranks 0 .. depth - 1
    sums = design.sums
    kind = design.kind
    if kind == "counterfactual" and design.aa:  # an A/A counterfactual design serves nothing (draws nothing)
        return
    rec.add_scaled(label, "impressions", sums["impressions"], 1)
    if kind == "ab":
        rec.add(label, "in_b", design.in_b)  # type: ignore[attr-defined]
        for key in ("clicks", "abandoned"):
            rec.add_scaled(label, key, sums[key], 1)
        rec.add_scaled(label, "rr", sums["rr"], rr_scale)
    elif kind == "interleaving":
        rec.add_scaled(label, "compared", sums["compared"], 1)
        if design.config.method in _HALVES:
            for key in sorted(k for k in sums if k.startswith("num:")):
                rec.add_scaled(label, key, sums[key], 2)
    elif kind == "counterfactual":
        for key in ("obs:clicks", "obs:abandoned"):
            rec.add_scaled(label, key, sums[key], 1)
        rec.add_scaled(label, "obs:rr", sums["obs:rr"], rr_scale)
        log = design._log  # type: ignore[attr-defined]
        assert len(log) == log_length + 1, f"{label}: the design logged no batch"
        entry = log[-1]
        assert entry["shown"].shape[0] == len(batch)
        rec.add(label, "shown", entry["shown"])
        rec.add(label, "clicks", entry["clicks"])
    else:  # a new design type: give it its draws here
        raise AssertionError(f"design type {kind!r} has no recorded draws in {__file__}")


class _Recording:
    """A batch consumer around a design: records its draws after each batch."""

    def __init__(self, rec: Recorder, design: Design) -> None:
        self.rec, self.design = rec, design

    def process(self, batch: Any) -> None:
        log_length = len(getattr(self.design, "_log", ()))
        self.rec.current = _label(self.design)
        try:
            self.design.process(batch)
        finally:
            self.rec.current = None
        if len(batch):
            _record_design(self.rec, self.design, batch, log_length)


@contextmanager
def recording(rec: Recorder, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Hooks on ``run_traffic`` (each design's batches), ``pair_outcomes`` (an interleaving's shown lists, teams and
    clicks), ``DrawTable.draw_coin_rows`` (a table-drawn interleaving's coins) and
    ``CounterfactualDesign._resamples`` (the bootstrap's counts); they pass every value through."""
    real_traffic = runner_module.run_traffic
    real_outcomes = interleaving_module.pair_outcomes
    real_coins = DrawTable.draw_coin_rows

    def run_traffic(model: Any, consumers: Sequence[Any], on_day_end: Callable[[int], None]) -> Any:
        class Traffic:
            def process(self, batch: Any) -> None:
                for what in ("query", "user", "user_type"):
                    rec.add("traffic", what, getattr(batch, what))

        wrapped = [_Recording(rec, c) if isinstance(c, Design) else c for c in consumers]
        return real_traffic(model, [Traffic(), *wrapped], on_day_end)

    def pair_outcomes(interleaver: Any, shown: Any, clicks: np.ndarray, n_rankers: int) -> np.ndarray:
        if rec.current is not None:
            rec.add(rec.current, "ranking", shown.ranking)
            rec.add(rec.current, "team", shown.team)
            rec.add(rec.current, "clicks", clicks)
        return real_outcomes(interleaver, shown, clicks, n_rankers)

    def draw_coin_rows(self: DrawTable, n: int, rng: np.random.Generator) -> np.ndarray:
        coins = real_coins(self, n, rng)
        if rec.current is not None:
            rec.add(rec.current, "coins", coins)
        return coins

    real_resamples = CounterfactualDesign._resamples

    def resamples(self: Any, n: int) -> list[tuple[int, int, np.ndarray]]:
        blocks = list(real_resamples(self, n))
        for _, _, counts in blocks:
            rec.add(_label(self), "bootstrap", counts.astype(np.int64))
        return blocks

    with monkeypatch.context() as m:
        m.setattr(CounterfactualDesign, "_resamples", resamples)
        m.setattr(runner_module, "run_traffic", run_traffic)
        m.setattr(interleaving_module, "pair_outcomes", pair_outcomes)
        m.setattr(DrawTable, "draw_coin_rows", draw_coin_rows)
        yield


def _config() -> Config:
    return config_from_mapping(CONFIG)


def _record_clicks(rec: Recorder, seed: int) -> None:
    """The clicks the simulator draws (:meth:`UserModels.sample`) for one fixed batch of shown grade lists (some
    shorter, ending in empty slots) under every registered click model alone (each model's example parameters:
    the compiled chain and independent-click path, or the model's own sampler), all of them as one population of
    user types (some type has no chain table: each type's model samples its rows), and the models with chain
    tables as one (the one-pass chain path over many types). The replicate above uses two models only. A changed
    ``example_spec`` changes its model's digest without changing any run's numbers: update the digest, no bump."""
    import clickmodels

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, size=(600, 6))
    labels[:100, 4:] = -1
    names = sorted(clickmodels.available())
    models = [clickmodels.build(clickmodels.model_class(n).example_spec) for n in names]
    for name, model in zip(names, models, strict=True):
        users = UserModels([name], [1.0], [model])
        rec.add(f"clicks:{name}", "clicks", users.sample(labels, np.zeros(len(labels), dtype=np.int8),
                                                            np.random.default_rng(seed + 1)))
    chained = [i for i, m in enumerate(models) if UserModels([names[i]], [1.0], [m]).chains(6) is not None]
    for label, picked in (("clicks:every model", range(len(names))), ("clicks:every chain model", chained)):
        users = UserModels([names[i] for i in picked], [1.0] * len(picked), [models[i] for i in picked])
        assert (users.chains(6) is None) == (label == "clicks:every model"), label  # the two paths, as said
        types = rng.integers(0, len(picked), len(labels)).astype(np.int8)
        rec.add(label, "user_type", types)
        rec.add(label, "clicks", users.sample(labels, types, np.random.default_rng(seed + 2)))


def run_recorded(monkeypatch: pytest.MonkeyPatch, config: Config | None = None) -> tuple[Recorder, list[Any]]:
    """One recorded replicate (replicate 0) of ``config``: the recorder and the replicate's rows."""
    config = config or _config()
    world, _ = prepare_world(config)
    rec = Recorder()
    rec.add("world", "labels", world.labels)
    for name in sorted(world.rankings):
        rec.add("world", f"ranking:{name}", world.rankings[name])
    with recording(rec, monkeypatch):
        rows = run_replicate(config, world, UserModels.from_config(config.users), replicate_seeds(config.seed, 1)[0], 0)
    _record_clicks(rec, config.seed)
    return rec, rows


@pytest.fixture(scope="module")
def recorded() -> tuple[Recorder, list[Any]]:
    with pytest.MonkeyPatch.context() as m:
        return run_recorded(m)


def test_every_design_type_and_policy_is_covered(recorded: tuple[Recorder, list[Any]]) -> None:
    from onlineeval.interleaving import available_interleavers
    from simulations.designs.base import DESIGNS
    from simulations.policies import available_policies

    designs = CONFIG["designs"]
    assert {d["type"] for d in designs} == set(DESIGNS)
    assert {d["method"] for d in designs if d["type"] == "interleaving"} == set(available_interleavers())
    assert {d["logger"]["policy"] for d in designs if d["type"] == "counterfactual"} == set(available_policies())
    # every estimator on every kind of reward it takes (its numbers are in NUMBERS_FILE)
    from onlineeval.estimators import available_estimators, estimator_class, get_reward

    config = _config()
    used = {(spec.name, get_reward(d.metric, config.rankers.depth).kind)
            for d in config.designs if d.type == "counterfactual" for spec in d.estimators}
    assert used == {(n, kind) for n in available_estimators() for kind in estimator_class(n).rewards}
    import clickmodels

    assert {k.removeprefix("clicks:") for k in DIGESTS if k.startswith("clicks:")} >= set(clickmodels.available())
    rec, _ = recorded
    assert set(rec.digests()) == set(DIGESTS), "a stream without a stored digest, or a stored one not run"


def test_the_hooks_see_the_draws(recorded: tuple[Recorder, list[Any]]) -> None:
    """Each design's digest covers its own draws, not only the traffic: lists (or coins) and clicks per batch."""
    rec, _ = recorded
    batches = rec.counts["traffic"]["query"]
    assert batches == 4  # 2 days of 2 batches
    for d in CONFIG["designs"]:
        counts = rec.counts[d["name"]]
        if d["type"] == "ab":
            assert counts["in_b"] == counts["clicks"] == batches
        elif d.get("method") in ("team_draft", "balanced"):
            assert counts["coins"] == batches, (d["name"], counts)
        elif d["type"] == "interleaving":
            assert counts["ranking"] == counts["team"] == counts["clicks"] == batches, (d["name"], counts)
        else:
            assert counts["shown"] == counts["clicks"] == batches, (d["name"], counts)
        # the last day's bootstrap: its resamples' counts, once per estimator that reads them
        assert (counts.get("bootstrap", 0) > 0) == bool(d.get("bootstrap")), (d["name"], counts)


def test_the_hooks_change_no_number(recorded: tuple[Recorder, list[Any]]) -> None:
    config = _config()
    world, users = prepare_world(config)
    rows = run_replicate(config, world, users, replicate_seeds(config.seed, 1)[0], 0)
    pd.testing.assert_frame_equal(pd.DataFrame(rows), pd.DataFrame(recorded[1]))


@pytest.mark.parametrize("name", sorted(DIGESTS))
def test_stream_digest(recorded: tuple[Recorder, list[Any]], name: str) -> None:
    got = recorded[0].digests().get(name)
    if got != DIGESTS[name]:
        pytest.fail(f"{MESSAGE.format(name=name)} (stored {DIGESTS[name]!r}, now {got!r})", pytrace=False)


def test_a_changed_stream_is_detected_and_named(recorded: tuple[Recorder, list[Any]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Another seed for one design's stream (as a new sampler would give) changes that design's digest only (run on
    a few designs of CONFIG, whose other streams keep the whole config's digests)."""
    real = runner_module.child_seed

    def child_seed(parent: np.random.SeedSequence, *key: int | str) -> np.random.SeedSequence:
        if key[1:2] == ("cf_randtop",):
            key = (*key, 1)
        return real(parent, *key)

    monkeypatch.setattr(runner_module, "child_seed", child_seed)
    rec, _ = run_recorded(monkeypatch, _subset(["ab", "team_draft", "cf_randtop", "cf_randpair", "cf_swap"]))
    before = recorded[0].digests()
    assert {"world", "traffic", "ab", "team_draft (null)", "cf_swap"} <= set(rec.digests())
    assert sorted(k for k, v in rec.digests().items() if v != before[k]) == ["cf_randtop"]


def _subset(names: Sequence[str]) -> Config:
    """CONFIG with only the designs ``names``: each design's numbers are those of the whole config (a design's
    generator is seeded by its name, the traffic's by its own key), which the tests below rely on and check."""
    return config_from_mapping({**CONFIG, "designs": [d for d in CONFIG["designs"] if d["name"] in names]})


def _numbers_differences(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per design of ``rows``, its differences from the stored numbers (designs without any left out)."""
    stored = load_numbers()
    fields, got = replicate_numbers(rows)
    out = {label: compare_numbers(fields, stored["designs"].get(label, {}), entries, stored["fields"])
           for label, entries in got.items()}
    return {label: lines for label, lines in out.items() if lines}


def test_stored_numbers_are_of_this_stream_version(recorded: tuple[Recorder, list[Any]]) -> None:
    stored = load_numbers()
    if stored["stream_version"] != STREAM_VERSION:
        pytest.fail(f"{NUMBERS_FILE.name} holds the numbers of stream version {stored['stream_version']}, the code is "
                    f"at {STREAM_VERSION}: regenerate them ({REGENERATE})", pytrace=False)
    _, got = replicate_numbers(recorded[1])
    assert sorted(got) == sorted(stored["designs"]), f"designs run and stored differ: regenerate ({REGENERATE})"
    assert {label.removesuffix(" (A/A)") for label in got} == {d["name"] for d in CONFIG["designs"]}


@pytest.mark.parametrize("label", sorted(load_numbers()["designs"]) if NUMBERS_FILE.exists() else [])
def test_reported_numbers(recorded: tuple[Recorder, list[Any]], label: str) -> None:
    """Every number the replicate reports for this design (each checkpoint's estimate, SE, interval, p-value and
    counts) equals the stored one within stream_numbers' RTOL / ATOL: catches a change of a formula that draws
    nothing."""
    stored = load_numbers()
    fields, got = replicate_numbers(recorded[1])
    lines = compare_numbers(fields, stored["designs"][label], got.get(label, {}), stored["fields"])
    if lines:
        shown = "\n  ".join(lines[:12]) + (f"\n  ... and {len(lines) - 12} more" if len(lines) > 12 else "")
        pytest.fail(f"the numbers design {label!r} reports changed ({len(lines)} differences; a formula's change "
                    f"leaves the draws' digests as they are):\n  {shown}\n{NUMBERS_MESSAGE}", pytrace=False)


def test_the_comparison_rules(recorded: tuple[Recorder, list[Any]], tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Floats within stream_numbers' RTOL / ATOL are the same, NaN only as NaN, counts and flags exactly; rows gone
    or new and other
    fields are named; the file's text gives back the numbers; the writer refuses changed numbers at the same
    STREAM_VERSION unless told the change is the config's."""
    fields = ["primary", "estimate", "n_users"]
    stored = {"day 1 x": [True, 0.25, 10], "day 1 y": [False, None, 3], "day 1 z": [False, 0.0, 1]}
    assert compare_numbers(fields, stored, {"day 1 x": [True, 0.25 * (1 + 5e-10), 10], "day 1 y": [False, None, 3],
                                            "day 1 z": [False, 1e-13, 1]}, fields) == []
    lines = compare_numbers(fields, stored, {"day 1 x": [False, 0.25 * (1 + 1e-8), 11], "day 1 y": [False, 0.5, 3],
                                             "day 1 w": [False, 0.0, 1]}, fields)
    assert lines == ["day 1 z: a row no longer reported", "day 1 w: a new row",
                     "day 1 x, primary: stored True, now False",
                     "day 1 x, estimate: stored 0.25, now 0.2500000025 (relative change 1e-08)",
                     "day 1 x, n_users: stored 10, now 11 (relative change 0.1)",
                     "day 1 y, estimate: stored nan, now 0.5"], lines
    assert compare_numbers(fields, stored, stored, ["estimate"])[0].startswith("the rows' fields changed")
    noise = ["estimate", "se", "pvalue"]  # a p-value of rounding noise over rounding noise is compared too
    assert compare_numbers(noise, {"r": [-8.8e-19, 3.7e-19, 0.016]}, {"r": [2e-19, 4e-19, 0.6]}, noise) == [
        "r, pvalue: stored 0.016, now 0.6 (relative change 36.5)"]
    # p-values relatively only: 1.05e-22 -> 1e-14 is a change (within ATOL it passed), 1e-120 (1 + 4e-13) is not
    assert compare_numbers(noise, {"r": [0.5, 0.01, 1.05e-22]}, {"r": [0.5, 0.01, 1e-14]}, noise) == [
        "r, pvalue: stored 1.05e-22, now 1e-14 (relative change 9.52e+07)"]
    assert compare_numbers(noise, {"r": [0.5, 0.01, 1e-120]}, {"r": [0.5, 0.01, 1e-120 * (1 + 4e-13)]}, noise) == []
    assert compare_numbers(noise, {"r": [0.5, 0.01, 0.0]}, {"r": [0.5, 0.01, 0.0]}, noise) == []
    assert compare_numbers(noise, {"r": [0.0, 0.0, 1.0]}, {"r": [1e-9, 1e-9, 0.3]}, noise) == [
        "r, estimate: stored 0.0, now 1e-09", "r, se: stored 0.0, now 1e-09", "r, pvalue: stored 1.0, now 0.3 "
        "(relative change -0.7)"]

    rows = recorded[1]
    import stream_numbers

    monkeypatch.setattr(stream_numbers, "NUMBERS_FILE", tmp_path / "numbers.json")
    write_numbers(rows)
    assert replicate_numbers(rows)[1] == load_numbers()["designs"]
    assert _numbers_differences(rows) == {}
    moved = [{**row, "se": row["se"] * (1 + 1e-6)} if (row["design"], row["aa"], row["day"]) == ("ab", False, 2)
             else row for row in rows]
    with pytest.raises(SystemExit, match="numbers changed for ab .* bump it"):
        write_numbers(moved)
    write_numbers(moved, same_version=True)
    assert _numbers_differences(rows).keys() == {"ab"}


def test_an_estimate_only_change_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector itself: a change of an estimator's formula alone (the direct method's per-impression terms
    times 1 + 1e-6, as a reworked formula would give) leaves every digest of the draws as stored but changes that
    design's reported numbers, and the comparison names the design, the row, the field and both values. (The
    subset config first reproduces the stored numbers as they are, so the difference is the patch's.)"""
    from onlineeval.estimators import estimator_class

    config = _subset(["cf_first_click_models"])
    assert _numbers_differences(run_replicate(config, *prepare_world(config), replicate_seeds(config.seed, 1)[0],
                                              0)) == {}
    dm = estimator_class("dm")
    real = dm._terms

    def terms(self: Any, data: Any, target: Any, reward: Any) -> Any:
        out = real(self, data, target, reward)
        return dataclasses.replace(out, num=out.num * (1.0 + 1e-6))

    monkeypatch.setattr(dm, "_terms", terms)
    rec, rows = run_recorded(monkeypatch, config)
    digests = rec.digests()
    assert all(digests[k] == DIGESTS[k] for k in ("world", "traffic", "cf_first_click_models")), digests
    differences = _numbers_differences(rows)
    assert sorted(differences) == ["cf_first_click_models"], differences
    lines = differences["cf_first_click_models"]
    assert any(line.startswith("day 2 dm, estimate: stored ") and "now" in line for line in lines), lines
    assert not any(" dr_list," in line or " cascade_dr," in line for line in lines), lines  # their own terms


def test_the_tolerance_passes_other_summation_orders(monkeypatch: pytest.MonkeyPatch) -> None:
    """stream_numbers' RTOL / ATOL are wide enough for the last bits another CPU, NumPy or BLAS build changes: the
    designs' NumPy
    paths (``stat_kernels.COMPILED`` off: other summation orders than the compiled kernels, relative differences up
    to 4e-13 measured, on p-values of 1e-120) give the stored numbers."""
    from simulations import stat_kernels

    monkeypatch.setattr(stat_kernels, "COMPILED", False)
    config = _subset(["ab", "ab_options", "balanced", "team_draft_multileave", "cf_epsilon_greedy", "cf_mixture"])
    rows = run_replicate(config, *prepare_world(config), replicate_seeds(config.seed, 1)[0], 0)
    assert _numbers_differences(rows) == {}


if __name__ == "__main__":
    # python tests/test_stream_version.py: the digests of this checkout, to paste into DIGESTS after bumping
    # STREAM_VERSION; --write-numbers [--same-version]: rewrite NUMBERS_FILE from this checkout
    with pytest.MonkeyPatch.context() as patch:
        recorder, replicate_rows = run_recorded(patch)
    if "--write-numbers" in sys.argv[1:]:
        print("wrote", write_numbers(replicate_rows, same_version="--same-version" in sys.argv[1:]))
    else:
        for key, value in recorder.digests().items():
            print(f'    "{key}": "{value}",')
