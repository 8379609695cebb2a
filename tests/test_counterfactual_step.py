"""The counterfactual design's one-pass batch step (:mod:`simulations.designs.counterfactual.step`) gives the
general path's numbers bit for bit: per-user sums, impressions per query, the log with its propensities, adaptive
IPS's per-row behaviour terms, every checkpoint row and the generator's state, on whole replicates of several
designs (estimator sets, metrics, list lengths, loggers). The general path is the reference (itself tested against
the estimators' own terms and the policies' own propensities in test_counterfactual_fastpaths.py and
test_policy_kernels.py)."""

from __future__ import annotations


import numpy as np
import pytest


ALL = ["snips", "ips", "rips", "iips", "adaptive_ips", {"name": "clipped_ips", "cap": 5}]
TWO = [{"policy": "epsilon_greedy", "epsilon": 0.3, "n": 8, "weight": 0.7},
       {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 8, "scores": "B", "weight": 0.3}]
THREE = [{"policy": "epsilon_greedy", "epsilon": 0.5, "n": 6, "weight": 0.5},
         {"policy": "epsilon_greedy", "epsilon": 0.1, "n": 10, "scores": "B", "weight": 0.3},
         {"policy": "epsilon_greedy", "epsilon": 0.9, "n": 4, "weight": 0.2}]


def _config(estimators: list, metric: str = "clicks_per_query", depth: int = 4, components: list = TWO,
            bootstrap: int = 0, candidates: int = 10, logger: dict | None = None, aa: bool = False) -> object:
    from simulations.config import config_from_mapping

    return config_from_mapping({
        "seed": 11, "replicates": 1, "workers": 1,
        "collection": {"n_queries": 120, "candidates": candidates},
        "rankers": {"depth": depth, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.5}},
        "offline_metric": f"nDCG@{depth}",
        "users": {"population": 400, "activity": {"sigma": 0.5}, "types": [
            {"name": "pbm", "share": 0.5, "click_model": {"name": "pbm", "preset": "ai2018"}},
            {"name": "cascade", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}}]},
        "traffic": {"days": 3, "queries_per_day": 1500, "batch_hours": 12},
        "designs": [{"name": "cf", "type": "counterfactual", "metric": metric, "bootstrap": bootstrap,
                     "logger": logger or {"policy": "mixture", "components": components},
                     "estimators": estimators}],
        "analysis": {"aa": aa, "truth_impressions": 1000},
    })


def _run(cfg: object, fused_step: bool, reward: object = None, types: object = None, world_change=None):
    """One replicate of the design of ``cfg`` with the step on or off (``fused_step``), a checkpoint a day; the
    design's reward replaced (``reward``: the design's and the general path's batch reward), the batches' user types
    changed (``types(batch) -> user_type``) or the world changed before the replicate is built
    (``world_change(world)``) when given."""
    import dataclasses

    from simulations.designs.counterfactual import CounterfactualDesign
    from simulations.designs.counterfactual.serving import _BatchReward
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    world = build_world(cfg, world_seed(cfg.seed))
    if world_change is not None:
        world = world_change(world)
    old = CounterfactualDesign.fused_step
    CounterfactualDesign.fused_step = fused_step
    try:
        traffic, designs = build_replicate(cfg, world, UserModels.from_config(cfg.users),
                                           replicate_seeds(cfg.seed, 1)[0])
        (design,) = designs
        if reward is not None:
            design.reward = reward
            design._batch_reward = _BatchReward(reward)
        design.last_day = traffic.days
        step = traffic.batch_hours
        for hour in range(0, traffic.days * 24, step):
            batch = traffic.batch(hour, step)
            if types is not None:
                batch = dataclasses.replace(batch, user_type=types(batch))
            design.process(batch)
            if (hour + step) % 24 == 0:
                design.checkpoint((hour + step) // 24)
        return design
    finally:
        CounterfactualDesign.fused_step = old


def _assert_same(new, ref) -> None:
    assert new._acc.tobytes() == ref._acc.tobytes()  # bit for bit (signs of zeros included)
    assert np.array_equal(new._query_count, ref._query_count)
    a, b = new.log(), ref.log()
    for f in ("query", "shown", "clicks", "p_list", "p_prefix", "p_item", "user", "user_type"):
        x, y = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
        assert x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f
        if x.dtype.kind == "f":
            assert x.tobytes() == y.tobytes(), f
    assert new._row_stats.keys() == ref._row_stats.keys()
    for key in ref._row_stats:
        assert len(new._row_stats[key]) == len(ref._row_stats[key])
        for x, y in zip(new._row_stats[key], ref._row_stats[key], strict=True):
            assert x.keys() == y.keys() and all(x[k].tobytes() == y[k].tobytes() for k in x), key
    for x, y in zip(new._row_meta, ref._row_meta, strict=True):
        assert all(np.array_equal(x[k], y[k]) for k in ("user", "user_type"))
    assert len(new.rows) == len(ref.rows) > 0
    for x, y in zip(new.rows, ref.rows, strict=True):
        assert repr(x) == repr(y)
    assert new.rng.bit_generator.state == ref.rng.bit_generator.state


@pytest.mark.parametrize(("estimators", "metric", "depth", "components"), [
    (ALL, "clicks_per_query", 4, TWO),
    (ALL, "reciprocal_rank", 4, TWO),
    (ALL, "abandonment", 4, TWO),
    (["ips"], "clicks_per_query", 1, TWO),
    (["snips", {"name": "clipped_ips", "cap": 2}, {"name": "clipped_ips", "cap": 20}, "rips"], "clicks_per_query",
     9, THREE),
    (["adaptive_ips", "iips"], "reciprocal_rank", 6, THREE),
])
def test_step_equals_the_general_path(estimators, metric, depth, components):
    from simulations.designs.counterfactual.step import CompiledStep

    cfg = _config(estimators, metric, depth, components)
    new, ref = _run(cfg, True), _run(cfg, False)
    assert isinstance(new._step, CompiledStep) and ref._step is None
    _assert_same(new, ref)


def _eps(epsilon: float, n: int) -> dict:
    return {"policy": "epsilon_greedy", "ranker": "A", "epsilon": epsilon, "n": n}


@pytest.mark.parametrize(("estimators", "metric", "depth", "logger"), [
    (ALL, "clicks_per_query", 4, _eps(0.2, 8)),
    (ALL, "reciprocal_rank", 5, _eps(0.5, 10)),
    (ALL, "abandonment", 3, _eps(0.05, 4)),
    (["ips", "rips"], "clicks_per_query", 1, _eps(0.3, 2)),
    (["snips", {"name": "clipped_ips", "cap": 2}, "iips", "adaptive_ips"], "reciprocal_rank", 9, _eps(0.9, 6)),
    (["rips", "iips", "ips"], "abandonment", 8, _eps(0.999, 10)),
])
def test_step_equals_the_general_path_with_one_epsilon_greedy_logger(estimators, metric, depth, logger):
    """A single epsilon-greedy logger: the step's propensity tables from a one-component StackedEpsilonGreedy
    (weights [1.0]), the logger's own draws; the general path's numbers (its _full_propensities) bit for bit."""
    from simulations.designs.counterfactual.step import CompiledStep

    cfg = _config(estimators, metric, depth, logger=logger)
    new, ref = _run(cfg, True), _run(cfg, False)
    assert isinstance(new._step, CompiledStep) and ref._step is None
    assert new._step.stacked._weights.tolist() == [1.0]
    assert new.policy._stacked() is None  # the logger samples by its own code
    _assert_same(new, ref)


@pytest.mark.parametrize(("epsilon", "n", "depth"), [(0.2, 8, 4), (0.6, 3, 7), (0.1, 10, 1), (0.4, 10, 9)])
def test_one_component_tables_give_the_loggers_propensities(epsilon, n, depth):
    """The one-component tables in :func:`kernels.logged_propensities` (the step's per-row arithmetic) against the
    logger's own ``sampled_propensities`` on its own draws (the rows showing a target's list included), bit for
    bit."""
    from simulations.designs.counterfactual.serving import known_list_propensities
    from simulations.designs.counterfactual.step import _single
    from simulations.policies import kernels
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    cfg = _config(["ips"], depth=depth, logger=_eps(epsilon, n))
    world = build_world(cfg, world_seed(cfg.seed))
    _, (design,) = build_replicate(cfg, world, UserModels.from_config(cfg.users), replicate_seeds(cfg.seed, 1)[0])
    policy = design.policy
    s = _single(policy)
    assert s is not None and s is policy.own_stack()  # the tables the policy's compiled sampler draws by
    rng = np.random.default_rng(5)
    query = rng.integers(0, policy.Q, 3000).astype(np.int64)
    shown = np.asarray(policy.sample(query, rng), dtype=np.int64)
    t = design._known_table
    got = kernels.logged_propensities(query, shown, np.ascontiguousarray(design._known_lists, dtype=np.int64),
                                      t.list, t.prefix, t.item, s.rank_of.astype(np.int64),
                                      s.n_eff.astype(np.int64), s._w_det, s._w_rt, s.det_tab, s.rt_tab,
                                      s._weights, s.m, s.Q)
    own = policy.sampled_propensities(query, shown)
    ref = known_list_propensities(policy, query, shown, world.labels.shape[1], design._known, table=t, sampled=True)
    shows_target = got[1][:, :, -1].any(axis=0)
    assert 0 < shows_target.sum() < query.size  # both kinds of rows
    for x, y, z in zip(got[2:5], (own.list, own.prefix, own.item), (ref.list, ref.prefix, ref.item), strict=True):
        assert x.tobytes() == np.ascontiguousarray(y).tobytes() == np.ascontiguousarray(z).tobytes()


def test_step_equals_the_general_path_on_the_bundled_config():
    """configs/counterfactual.yaml at its own size (6,000 users, 4,000 impressions a day, a week, six estimators,
    the mixture logger): the step's sums, log, rows and generator state are the general path's bit for bit."""
    from simulations.designs.counterfactual.step import CompiledStep
    from test_policy_kernels import _design_run

    new, ref = _design_run(True, batches=7, fused_step=True), _design_run(True, batches=7)
    assert isinstance(new._step, CompiledStep) and ref._step is None
    assert new.population == 6000 and sum(c["query"].size for c in new._log) > 20_000  # the sizes users run
    _assert_same(new, ref)


def test_step_equals_the_general_path_with_the_bootstrap():
    cfg = _config(ALL, bootstrap=200)
    _assert_same(_run(cfg, True), _run(cfg, False))


@pytest.mark.parametrize("change", ["plackett_luce", "dm", "pbm_ips", "aa", "compiled_off", "epsilon_one",
                                    "epsilon_zero"])
def test_step_is_not_used_where_it_does_not_apply(change):
    """A logger other than a mixture of epsilon-greedy policies or a single epsilon-greedy policy of epsilon in
    (0, 1) filling the slots (epsilon 1 or 0: one component, its own arithmetic), an estimator the step does not
    compute, the A/A design, the compiled paths switched off: the general path serves (and the numbers are its
    own)."""
    from simulations.designs.counterfactual import CounterfactualDesign
    from simulations.designs.counterfactual.step import CompiledStep
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    estimators = {"dm": ["ips", "dm"], "pbm_ips": ["ips", "pbm_ips"]}.get(change, ["ips"])
    logger = {"plackett_luce": {"policy": "plackett_luce", "ranker": "A", "temperature": 1.0},
              "epsilon_one": _eps(1.0, 6), "epsilon_zero": _eps(0.0, 6)}.get(change)
    cfg = _config(estimators, logger=logger, aa=change == "aa")
    world = build_world(cfg, world_seed(cfg.seed))
    old = CounterfactualDesign.compiled
    CounterfactualDesign.compiled = change != "compiled_off"
    try:
        traffic, designs = build_replicate(cfg, world, UserModels.from_config(cfg.users),
                                           replicate_seeds(cfg.seed, 1)[0])
        design = designs[-1] if change == "aa" else designs[0]
        assert design.aa == (change == "aa")
        design.process(traffic.batch(0, 12))
    finally:
        CounterfactualDesign.compiled = old
    assert design._step is None
    if change != "aa":  # the general path ran: its per-batch state is there
        assert design._decided
    if change != "compiled_off":  # (switched on again now)
        assert CompiledStep.build(design) is None


def test_step_as_plain_python_gives_the_same_numbers():
    """``NUMBA_DISABLE_JIT=1`` runs the kernel as plain Python: the same bits as the compiled run."""
    from test_simulation_kernels import compiled_and_plain

    compiled, plain = compiled_and_plain("""
import hashlib, json, sys
import numba
sys.path.insert(0, {tests!r})
from test_counterfactual_step import ALL, _config, _run
d = _run(_config(ALL), True)
log = d.log()
digests = [hashlib.sha256(x.tobytes()).hexdigest() for x in (d._acc, log.p_prefix, log.p_item, log.clicks)]
print(json.dumps({{"jit": not numba.config.DISABLE_JIT, "digests": digests}}))
""")
    assert compiled == plain


def _users(cfg_mapping_types: list) -> object:
    return {"population": 400, "activity": {"sigma": 0.5}, "types": cfg_mapping_types}


def _with_users(cfg: object, types: list) -> object:
    from simulations.config import config_from_mapping

    mapping = cfg.effective()
    mapping["users"] = _users(types)
    return config_from_mapping(mapping)


PBM = {"name": "pbm", "share": 1.0, "click_model": {"name": "pbm", "preset": "ai2018"}}
CASCADE = {"name": "cascade", "click_model": {"name": "cascade", "preset": "navigational"}}
DBN = {"name": "dbn", "click_model": {"name": "dbn", "click": [0.1, 0.3, 0.5, 0.7, 0.9],
                                       "satisfaction": [0.05, 0.2, 0.4, 0.6, 0.8], "gamma": 0.8}}


@pytest.mark.parametrize(("metric", "depth", "types", "logger"), [
    ("clicks_per_query", 4, None, None),
    ("reciprocal_rank", 9, None, _eps(0.3, 10)),
    ("abandonment", 5, None, None),
    ("clicks_per_query", 6, [PBM], None),
    ("reciprocal_rank", 3, [{**CASCADE, "share": 1.0}], _eps(0.5, 5)),
    ("abandonment", 7, [{**CASCADE, "share": 0.3}, {**PBM, "share": 0.3}, {**DBN, "share": 0.4}], None),
])
def test_step_samples_the_clicks_and_rewards(metric, depth, types, logger):
    """The step gathers the shown grades, samples the clicks (the users' uniforms drawn by the same calls) and
    computes the slot rewards in the kernel: the general path's clicks, sums and generator state bit for bit (one
    type, independent clicks, chains, three types; additive, first-click with positive and negative weights)."""
    cfg = _config(ALL, metric, depth, logger=logger)
    if types is not None:
        cfg = _with_users(cfg, types)
    new, ref = _run(cfg, True), _run(cfg, False)
    assert new._step.chains is not None and new._step.reward_kind == (0 if metric == "clicks_per_query" else 1)
    _assert_same(new, ref)


@pytest.mark.parametrize("weights", [None, [2.0, -1.0, 0.5, 0.25, 3.0], [0.0, -0.0, 1.5, -2.0, 1.0]])
@pytest.mark.parametrize("kind", ["additive", "first_click"])
def test_step_rewards_with_position_weights(kind, weights):
    """Rewards with position weights (negative and zero weights: 0.0 * w is -0.0 for w < 0) of both kinds, the
    slot rewards computed in the kernel: the general path's bits."""
    from onlineeval.estimators.rewards import Reward

    reward = Reward("custom", kind, None if weights is None else np.array(weights), offset=0.5)
    cfg = _config(ALL, depth=5)
    new, ref = _run(cfg, True, reward=reward), _run(cfg, False, reward=reward)
    assert new._step.chains is not None and new._step.reward_kind == (kind == "first_click")
    _assert_same(new, ref)


def test_step_takes_the_general_clicks_where_the_kernel_cannot_sample():
    """The clicks of ``design._clicks`` (nothing drawn before): a user model without grade chains (UBM: no chains
    at all), batches with rows of unknown user types (those rows are sampled by no model: no clicks), a reward the
    kernel does not compute (another type than Reward); the numbers are the general path's."""
    from onlineeval.estimators.rewards import Reward

    ubm = {"name": "ubm", "share": 0.5, "click_model": {
        "name": "ubm", "click": [0.1, 0.3, 0.5, 0.7, 0.9],
        "examination": [[0.95], [0.7, 0.9], [0.5, 0.6, 0.85], [0.4, 0.45, 0.6, 0.8]]}}
    cfg = _with_users(_config(ALL), [{**PBM, "share": 0.5}, ubm])
    new, ref = _run(cfg, True), _run(cfg, False)
    assert new._step is not None and new._step.chains is None
    _assert_same(new, ref)

    def unknown(batch):
        t = batch.user_type.copy()
        t[::7] = 5  # two types configured
        return t

    cfg = _config(ALL)
    new, ref = _run(cfg, True, types=unknown), _run(cfg, False, types=unknown)
    assert new._step.chains is not None  # the batches fell back one by one
    _assert_same(new, ref)

    class Other(Reward):
        pass

    other = Other("other", "first_click", np.array([1.0, 0.5, 0.25, 0.125]))
    new, ref = _run(cfg, True, reward=other), _run(cfg, False, reward=other)
    assert new._step.reward_kind == -1 and new._step.chains is None
    _assert_same(new, ref)


def test_step_with_grades_the_click_models_do_not_know():
    """World grades outside the click models' grades: the step leaves the clicks to ``design._clicks``, which raises
    the models' own error, as the general path does."""
    import dataclasses

    def change(world):
        labels = world.labels.copy()
        labels[:, 0] = 9  # the presets know grades 0-4
        return dataclasses.replace(world, labels=labels)

    cfg = _config(["ips"])
    from simulations.designs.counterfactual.step import _click_tables
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    world = change(build_world(cfg, world_seed(cfg.seed)))
    _, (design,) = build_replicate(cfg, world, UserModels.from_config(cfg.users), replicate_seeds(cfg.seed, 1)[0])
    assert _click_tables(design, design.policy.k) is None
    errors = []
    for fused in (True, False):
        with pytest.raises(Exception) as info:  # noqa: PT011 (the models' error, whatever it is)
            _run(cfg, fused, world_change=change)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1]


def test_shown_row_counts_against_row_counts_of_the_shown_labels():
    """:func:`simulations.kernels.shown_row_counts` = ``row_counts(shown_labels(...))`` for grades the chains know
    (one type: every row type 0; unknown types counted), and a document past the last column flagged."""
    from simulations import kernels
    from simulations.world import shown_labels

    rng = np.random.default_rng(3)
    labels = rng.integers(-1, 5, (50, 12)).astype(np.int8)
    query = rng.integers(0, 50, 700).astype(np.int64)
    shown = rng.integers(-1, 12, (700, 6)).astype(np.int64)
    types = rng.integers(0, 3, 700).astype(np.int8)
    for n_types in (3, 2, 1):
        counts = kernels.shown_row_counts(shown, 12, types, n_types)
        ref = kernels.row_counts(shown_labels(labels, query, shown), types, 700, n_types, 5)
        assert np.array_equal(counts, ref)
        assert (counts[-1] > 0) == (n_types == 2)
    for col in (12, 40):
        past = shown.copy()
        past[5, 2] = col
        assert kernels.shown_row_counts(past, 12, types, 3)[-1] > 0


def _run_batches(cfg: object, fused_step: bool, make_batches) -> object:
    """A replicate's design of ``cfg`` served the batches ``make_batches(traffic, design)`` (one day, then a
    checkpoint), the step on or off; after each batch the step's user map is all -1 again."""
    from simulations.designs.counterfactual import CounterfactualDesign
    from simulations.runner import build_replicate, replicate_seeds, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    world = build_world(cfg, world_seed(cfg.seed))
    old = CounterfactualDesign.fused_step
    CounterfactualDesign.fused_step = fused_step
    try:
        traffic, (design,) = build_replicate(cfg, world, UserModels.from_config(cfg.users),
                                             replicate_seeds(cfg.seed, 1)[0])
        design.last_day = 1
        for batch in make_batches(traffic, design):
            design.process(batch)
            if fused_step:
                assert (design._step.slot == -1).all()
        design.checkpoint(1)
        return design
    finally:
        CounterfactualDesign.fused_step = old


def test_step_sums_when_every_user_or_few_users_are_touched():
    """The per-user sums added to ``acc`` user by user over the touched users in ascending order: a batch in which
    every user has exactly one impression (as many touched users as rows, the work space's last entry written), one
    in which every user has one to four, one of only the first and last users, and an ordinary batch: the general
    path's sums (its ``np.bincount`` per row of ``acc``), log and rows bit for bit."""
    from simulations.traffic import Batch

    cfg = _config(ALL)

    def batches(traffic, design):
        rng = np.random.default_rng(17)
        population, n_types, n_q = design.population, len(cfg.users.types), design.policy.Q

        def batch(user, hour):
            n = user.size
            return Batch(user=user.astype(np.int64), query=rng.integers(0, n_q, n).astype(np.int64),
                         user_type=rng.integers(0, n_types, n).astype(np.int8), hour=hour)

        every = rng.permutation(population)
        repeated = rng.permutation(np.repeat(np.arange(population), rng.integers(1, 5, population)))
        ends = rng.permutation(np.array([0, population - 1] * 5))
        return [batch(every, 0), batch(repeated, 6), traffic.batch(12, 6), batch(ends, 18)]

    new, ref = _run_batches(cfg, True, batches), _run_batches(cfg, False, batches)
    assert new.population == 400 and sum(c["query"].size for c in new._log) > 1400
    assert (new._acc[new._rows["impressions"]] >= 1).all()  # every user served
    _assert_same(new, ref)


def test_step_kernel_refuses_a_short_work_space(monkeypatch):
    """``touched`` needs ``n + 1`` entries (the branch-free collection of the touched users writes one past the
    last): the kernel refuses a shorter one before anything is written; the step makes it long enough even when it
    was left short (the numbers then the general path's)."""
    import inspect

    from simulations.policies import kernels

    cfg = _config(["ips", "snips"])
    real = kernels.counterfactual_step
    calls = []

    def record(*a):
        calls.append([x.copy() if isinstance(x, np.ndarray) else x for x in a])
        return real(*a)

    monkeypatch.setattr(kernels, "counterfactual_step", record)
    _run_batches(cfg, True, lambda traffic, design: [traffic.batch(0, 12)])
    monkeypatch.setattr(kernels, "counterfactual_step", real)
    names = list(inspect.signature(real.py_func).parameters)
    args = calls[0]
    n = args[0].shape[0]
    assert args[names.index("touched")].shape == (n + 1,)
    args[names.index("touched")] = np.zeros(n, dtype=np.int64)
    before = [x.copy() for x in args if isinstance(x, np.ndarray)]
    with pytest.raises(ValueError, match="touched needs n \\+ 1 entries"):
        real(*args)
    assert all(x.tobytes() == y.tobytes() for x, y in zip([x for x in args if isinstance(x, np.ndarray)], before))

    def short(traffic, design):
        first, second = traffic.batch(0, 24), traffic.batch(24, 12)
        assert 1 <= len(second) <= len(first)  # the scratch made for the first is big enough: not regrown
        yield first
        step = design._step  # (the general path has none)
        if step:
            scratch = step.scratch
            step.touched = np.zeros(len(second), dtype=np.int64)  # one entry short
        yield second
        if step:
            assert step.scratch is scratch and step.touched.shape[0] > len(second)

    _assert_same(_run_batches(cfg, True, short), _run_batches(cfg, False, short))


def test_compact_tables_keep_the_values():
    """The step's own copies of the integer tables (:func:`step._compact`): the smallest signed type that holds
    every value, the values unchanged."""
    from simulations.designs.counterfactual.step import _compact

    for values, dtype in (([-1, 0, 127], np.int8), ([-128, 5], np.int8), ([-1, 128], np.int16),
                          ([-129, 0], np.int16), ([0, 40_000], np.int32), ([-1, 2**40], np.int64), ([], np.int8)):
        a = np.array(values, dtype=np.int64)
        got = _compact(a)
        assert got.dtype == dtype and got.flags.c_contiguous and np.array_equal(got, a)


@pytest.mark.parametrize(("candidates", "dtype"), [(10, np.int8), (300, np.int16)])
def test_step_with_compact_tables(candidates, dtype):
    """The targets' lists and the logger's base ranks passed to the kernel as int8 (documents below 128) or int16
    (a collection of 300 candidates per query, the RandTop component drawing from the top 150): the general path's
    numbers bit for bit."""
    components = [{"policy": "epsilon_greedy", "epsilon": 0.3, "n": min(candidates, 150), "weight": 0.7},
                  {"policy": "epsilon_greedy", "epsilon": 0.5, "n": 8, "scores": "B", "weight": 0.3}]
    cfg = _config(ALL, depth=5, components=components, candidates=candidates)
    new, ref = _run(cfg, True), _run(cfg, False)
    step = new._step
    assert step.lists.dtype == dtype and step.rank_of.dtype == dtype and step.slot.dtype == np.int32
    assert (int(step.lists.max()) > 127) == (dtype == np.int16)  # documents past int8's range in the int16 case
    _assert_same(new, ref)
