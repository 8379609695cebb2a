"""Compiled batch kernels (:mod:`simulations.kernels`, numba) against the NumPy code they replace, bit for bit.

- :meth:`simulations.users.UserModels.sample` (:func:`~simulations.kernels.grade_clicks`) against the previous
  one-pass NumPy sampler (``_GradeChains.sample`` / ``_block`` before the kernels, kept here as reference): the same
  clicks and the same generator state after, on mixtures of chain and independent-click types, empty slots, one
  type, several blocks of rows (BLOCK made small, and the real BLOCK), depths 1, 5, 10, 16, 17 and label dtypes;
- the interleaving design's batch step (:func:`~simulations.kernels.interleaving_step`) against the previous NumPy
  ``_process_table`` (kept here, with the reference sampler): team-draft and balanced tables with empty slots,
  lengths 1, 5, 10 and 16, the null variant, A/A lists; the per-user sums and the generator's state;
- whole replicates are compared with the fast paths switched off in ``test_simulation_point_speed.py``;
- the A/B design's batch step (:func:`~simulations.kernels.ab_step`) against the previous NumPy ``_process``
  (kept here): A/A, an injected split, mixtures with independent-click types, depths 1, 5, 10, 16 and 17;
- ``NUMBA_DISABLE_JIT=1`` (the kernels as plain Python) gives the same numbers, in a subprocess;
- ``onlineeval power --help`` and ``import onlineeval`` do not import numba.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import clickmodels
from onlineeval.errors import InputError
from simulations.designs import interleaving as il
from simulations.designs.interleaving import DrawTable, InterleavingDesign
from simulations.users import UserModels
from tests.test_simulation_point_speed import reference_sample as models_own_sample

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the NumPy references
def reference_sample(users: UserModels, labels: np.ndarray, user_type: np.ndarray, rng: np.random.Generator):
    """UserModels.sample before the kernels (commit 13b2dd8): the one-pass NumPy sampler on the models' tables,
    type by type and block by block; the models' own samplers otherwise."""
    from clickmodels.kernels import BLOCK

    labels = np.asarray(labels)
    k = labels.shape[1] if labels.ndim == 2 else -1
    chains = users.chains(k) if k >= 0 else None
    if chains is not None and labels.size and chains.accepts(labels):
        n_types = chains.t2.size // (chains.k * chains.width)
        by_type = [] if n_types == 1 else [np.flatnonzero(user_type == t) for t in range(n_types)]
        if n_types == 1 or sum(r.size for r in by_type) == labels.shape[0]:
            n = labels.shape[0]
            out = np.empty((n, k), dtype=bool)
            for t, rows in enumerate(by_type or [None]):
                size = n if rows is None else rows.size
                for lo in range(0, size, BLOCK):
                    hi = min(size, lo + BLOCK)
                    part = slice(lo, hi) if rows is None else rows[lo:hi]
                    grades = labels[part] if rows is None else labels.take(part, axis=0)
                    out[part] = _reference_block(chains, grades.T, rng, t).T
            return out
    return models_own_sample(users, labels, user_type, rng)  # each type's model on its own rows


def _reference_block(chains, grade, rng, t):
    """_GradeChains._block before the kernels: rank-major (k, b) clicks of b rows of type t (rng.random((k, b)))."""
    k, b = grade.shape
    idx = np.ascontiguousarray(grade, dtype=np.intp)
    idx += (np.arange(k, dtype=np.intp) * chains.width + 1)[:, None] + t * k * chains.width
    u = rng.random((k, b))
    click = u < chains.t2.take(idx)
    if chains.independent[t]:
        return click
    go = ~click
    if chains.use_t1:
        go |= u < chains.t1.take(idx)
    if chains.use_t3:
        go &= click | (u < chains.t3.take(idx))
    for r in range(1, k - 1):
        go[r] &= go[r - 1]
    if k > 1:
        click[1:] &= go[:-1]
    return click


def reference_process_table(design, batch) -> None:
    """InterleavingDesign._process_table before the kernels (commit 13b2dd8), with the reference sampler."""
    table = design.table
    key = table.draw_keys(batch.query, design.rng)
    if design.null_labels is None:
        labels = table.grades.take(key, axis=0)
    else:
        other = design._null_queries(len(batch))
        labels = design.null_labels.take(other, axis=0)
        if table.valid is not None:
            labels = np.where(table.valid.take(key, axis=0), labels, -1).astype(np.int8)
    clicks = reference_sample(design.users, labels, batch.user_type, design.rng)
    if table.bits is None:
        half = table.outcome(key, clicks).astype(np.float64) / 2.0
        compared = clicks.any(axis=1)
    else:
        clicked = table.click_bits(clicks)
        half = table.outcome_bits(key, clicked) * 0.5
        compared = clicked != 0
    np.add.at(design.sums[f"num:{design.pairs[0][0]}"], batch.user, half)
    if design.squares:  # test: delta_t (after the kernels: the NumPy step's squares)
        np.add.at(design.sums[f"sq:{design.pairs[0][0]}"], batch.user, half * half)
    np.add.at(design.sums["compared"], batch.user, compared.astype(np.float64))


# ----------------------------------------------------------------------------- click sampling
SPECS = {
    "nav": {"name": "cascade", "preset": "navigational"},
    "inf": {"name": "cascade", "preset": "informational"},
    "cm": {"name": "cm", "click": [0.05, 0.3, 0.5, 0.7, 0.95]},
    "dcm": clickmodels.DCM.example_spec,
    "ccm": clickmodels.CCM.example_spec,
    "dbn": clickmodels.DBN.example_spec,
    "sdbn": clickmodels.SDBN.example_spec,
    "pbm": {"name": "pbm", "preset": "ai2018"},
    "random": {"name": "random", "p": 0.3},
}


def _users(names):
    models = [clickmodels.build(SPECS[n]) for n in names]
    return UserModels(list(names), np.full(len(models), 1 / len(models)), models)


def _labels(rng, n, k, dtype=np.int8):
    labels = rng.integers(-1, 5, size=(n, k)).astype(dtype)
    labels[: n // 3, max(1, k - 3):] = -1  # trailing empty slots
    return labels


MIXTURES = [("nav",), ("pbm",), ("nav", "inf"), ("nav", "pbm"), ("pbm", "nav", "random"),
            ("cm", "dcm", "ccm", "dbn", "sdbn", "pbm", "inf"), ("random",), ("inf", "random", "dbn")]


@pytest.mark.parametrize("names", MIXTURES)
@pytest.mark.parametrize("k", [1, 5, 10, 16, 17])
def test_grade_clicks_equal_the_numpy_sampler(names, k, monkeypatch):
    """Small blocks (BLOCK = 7: many block boundaries per type) and many random batches."""
    import clickmodels.kernels as ck

    users = _users(names)
    if users.chains(k) is None:
        # the only two mixtures without tables: random clicks alone (no model has a number of grades for the
        # tables' width: the models' own path samples) and PBM's 10 ranks for longer lists, which the sampler
        # refuses as clearly
        if set(names) == {"random"}:
            return
        assert "pbm" in names and k > 10
        with pytest.raises(InputError, match=f"the lists have {k} slots but pbm.examination covers only 10 ranks"):
            users.sample(np.zeros((3, k), dtype=np.int8), np.full(3, names.index("pbm"), dtype=np.int8),
                         np.random.default_rng(0))
        return
    rng = np.random.default_rng(k * 100 + len(names))
    for trial, block in enumerate([7, 7, 1, 16, 16384]):
        monkeypatch.setattr(ck, "BLOCK", block)
        for n in (1, 2, 6, 7, 8, 15, 43, 500):
            labels = _labels(rng, n, k, dtype=(np.int8, np.int64)[(trial + n) % 2])
            user_type = users.draw_types(n, rng)
            g1, g2 = np.random.default_rng(trial * 1000 + n), np.random.default_rng(trial * 1000 + n)
            got = users.sample(labels, user_type, g1)
            want = reference_sample(users, labels, user_type, g2)
            assert got.dtype == np.bool_ and got.shape == (n, k)
            np.testing.assert_array_equal(got, want)
            assert g1.bit_generator.state == g2.bit_generator.state


def test_grade_clicks_across_real_blocks():
    """More rows of one type than clickmodels.kernels.BLOCK (16384): two and three blocks per type."""
    users = _users(("nav", "pbm", "inf"))
    rng = np.random.default_rng(5)
    for n in (16384 * 3 - 1, 16384 * 3, 16384 * 3 + 2, 60_000):
        labels = _labels(rng, n, 10)
        user_type = np.zeros(n, dtype=np.int8)
        user_type[n // 2:] = rng.integers(0, 3, n - n // 2)
        g1, g2 = np.random.default_rng(n), np.random.default_rng(n)
        want = reference_sample(users, labels, user_type, g2)
        np.testing.assert_array_equal(users.sample(labels, user_type, g1), want)
        assert g1.bit_generator.state == g2.bit_generator.state


def test_grade_clicks_edge_inputs():
    """Non-contiguous labels, a one-type population with any user_type, rows of unknown type and grades the models
    do not know (both: the models' own path, nothing drawn by the kernels), a user_type of another length."""
    users, one = _users(("nav", "inf")), _users(("dbn",))
    rng = np.random.default_rng(8)
    labels = _labels(rng, 300, 20)[:, ::2]
    assert not labels.flags.c_contiguous
    for model, user_type in [(users, users.draw_types(300, rng)), (one, np.full(300, 7, dtype=np.int8)),
                             (users, np.r_[users.draw_types(299, rng), np.int8(2)]),
                             (one, np.zeros(3, dtype=np.int8))]:
        g1, g2 = np.random.default_rng(1), np.random.default_rng(1)
        np.testing.assert_array_equal(model.sample(labels, user_type, g1),
                                      reference_sample(model, labels, user_type, g2))
        assert g1.bit_generator.state == g2.bit_generator.state
    chains = users.chains(10)
    assert chains.counts(labels, np.zeros(5, dtype=np.int8), 300) is None  # types of another length
    bad = labels.copy()
    bad[3, 4] = 5  # above the models' grades 0..4
    assert chains.counts(bad, users.draw_types(300, rng), 300) is None
    np.testing.assert_array_equal(chains.counts(labels[:0], np.array([0, 1, 1], dtype=np.int8), 3), [1, 2, 0])


def test_uniforms_are_the_models_draws():
    """_GradeChains.uniforms: rng.random((k, b)) block by block, type by type, into one array."""
    from clickmodels.kernels import BLOCK

    chains = _users(("nav", "inf")).chains(10)
    counts = np.array([3, BLOCK + 5, 0])
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    got = chains.uniforms(counts, g1)
    want = np.concatenate([g2.random((10, 3)).ravel(), g2.random((10, BLOCK)).ravel(), g2.random((10, 5)).ravel()])
    assert got.tobytes() == want.tobytes()
    assert g1.bit_generator.state == g2.bit_generator.state


# ----------------------------------------------------------------------------- the interleaving batch step
class _Batch:
    def __init__(self, user, query, user_type):
        self.user, self.query, self.user_type = user, query, user_type

    def __len__(self) -> int:
        return int(self.user.shape[0])


def _design(method, length, names, null, same, seed, squares=False):
    """An InterleavingDesign on edge-case lists (shared prefixes, short lists, empty slots) without a world (with
    ``squares``: test: delta_t's sums of squares)."""
    from test_simulation_point_speed import lists_with_edge_cases

    rng = np.random.default_rng(seed)
    a, b, labels = lists_with_edge_cases(rng, n_queries=80 if length > 12 else 300, depth=max(10, length + 2),
                                         docs=max(14, length + 6))
    if same:
        b = a
    d = object.__new__(InterleavingDesign)
    d.table = DrawTable(method, np.stack([a, b]), labels, length)
    d.users = _users(names)
    d.rng = np.random.default_rng(seed + 1)
    d.population = 400
    d.pairs = [("delta_ab", 0, 1)]
    d.sums = {"num:delta_ab": np.zeros(d.population), "compared": np.zeros(d.population)}
    if squares:
        d.squares = True
        d.sums["sq:delta_ab"] = np.zeros(d.population)
    d.null_labels = None
    d._kernel = None
    if null:
        from simulations.world import shown_labels

        d.null_labels = shown_labels(labels, np.arange(a.shape[0]), a[:, :length])
        freq = rng.random(a.shape[0]) ** 3
        d.query_cdf = np.cumsum(freq / freq.sum())
        d.query_draw = None
    return d


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("length", [1, 5, 10, 16])
@pytest.mark.parametrize(("null", "same", "squares"), [(False, False, False), (True, False, False),
                                                     (False, True, False), (False, False, True), (True, False, True)])
def test_interleaving_step_equals_the_numpy_batch_step(method, length, null, same, squares):
    """With ``squares`` (test: delta_t) the compiled step adds the halved outcomes' squares as the NumPy step."""
    names = ("nav", "pbm", "inf") if length <= 10 else ("nav", "inf")  # PBM (ai2018) has 10 ranks
    runs = []
    for reference in (False, True):
        d = _design(method, length, names, null, same, seed=length, squares=squares)
        assert d.table.bits is not None
        rng = np.random.default_rng(77)
        n_queries = d.table.stacked.shape[1]
        for n in (1, 3, 64, 1500, 1501, 5000):
            batch = _Batch(rng.integers(0, d.population, n), rng.integers(0, n_queries, n), d.users.draw_types(n, rng))
            if reference:
                reference_process_table(d, batch)
            else:
                d._process_table(batch)
        if not reference:
            assert d._kernel_inputs() is not None  # the compiled step ran
        runs.append(d)
    new, ref = runs
    for key in ref.sums:
        assert new.sums[key].tobytes() == ref.sums[key].tobytes(), key
    assert new.rng.bit_generator.state == ref.rng.bit_generator.state
    assert ref.sums["compared"].sum() > 100
    if length > 1 and not same:
        assert (ref.sums["num:delta_ab"] != 0).sum() > 20
    assert ("sq:delta_ab" in ref.sums) == squares
    if squares and length > 1 and not same:
        assert (ref.sums["sq:delta_ab"] != 0).sum() > 20


def test_interleaving_step_falls_back_without_grade_tables():
    """Users of a model without grade tables (UBM, 6 ranks), and lists of 17 slots (no bit masks): the NumPy step."""
    d = _design("team_draft", 5, ("nav",), False, False, seed=3)
    d.users = UserModels(["ubm"], [1.0], [clickmodels.UBM.example()])
    assert d._kernel_inputs() is None
    d17 = _design("balanced", 17, ("nav",), True, False, seed=4)
    assert d17.table.bits is None and d17._kernel_inputs() is None
    for design in (d, d17):
        ref = _design(design.table.method, design.table.length, ("nav",), design.null_labels is not None, False,
                      seed=3 if design is d else 4)
        ref.users = design.users
        batch = _Batch(np.arange(300) % 400, np.arange(300) % design.table.stacked.shape[1], np.zeros(300, np.int8))
        design._process_table(batch)
        reference_process_table(ref, batch)
        for key in ref.sums:
            assert design.sums[key].tobytes() == ref.sums[key].tobytes()


# ----------------------------------------------------------------------------- the A/B batch step
def reference_ab_process(self, batch) -> None:
    """ABDesign._process before the kernels (commit d02fd51), with the reference sampler."""
    from simulations.designs.ab import _click_values

    if self.injection is not None:
        self.injection.apply(self.in_b, batch)
    q = batch.query
    if self.grades_ab is None:
        labels = self.grades_a.take(q, axis=0)
    else:
        labels = self.grades_ab.take(q + self.in_b.take(batch.user) * self.grades_a.shape[0], axis=0)
    clicks = reference_sample(self.users, labels, batch.user_type, self.rng)
    n_clicks, abandoned, rr = _click_values(clicks, self.by_pattern)
    np.add.at(self.sums["clicks"], batch.user, n_clicks)
    np.add.at(self.sums["abandoned"], batch.user, abandoned)
    self.sums["rr"] += np.bincount(batch.user, weights=rr, minlength=self.population)


def _ab_config(depth, types, inject):
    from simulations.config import config_from_mapping

    return config_from_mapping(_ab_mapping(depth, types, inject))


def _ab_mapping(depth, types, inject):
    srm = {"inject": {"user_type": types[-1], "arm": "B", "share": 0.3}} if inject else {}
    return {
        "seed": depth, "replicates": 1,
        "collection": {"n_queries": 150, "candidates": max(12, depth + 2)}, "rankers": {"depth": depth},
        "users": {"population": 700, "activity": {"sigma": 1.2},
                  "types": [{"name": t, "share": 1 / len(types), "click_model": SPECS[t]} for t in types]},
        "traffic": {"days": 3, "queries_per_day": 900, "batch_hours": 6},
        "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank", "share_b": 0.4,
                     "analysis": {"srm": srm, "cuped": {"pre_days": 1}}}],
        "analysis": {"alpha": 0.05, "truth_impressions": 2000, "null": False, "aa": True},
    }


@pytest.mark.parametrize(("depth", "types", "inject"), [
    (10, ("nav", "inf"), False), (10, ("nav", "pbm", "inf"), True), (1, ("nav", "random"), False),
    (5, ("dbn", "pbm"), False), (16, ("inf",), False), (17, ("nav", "inf"), False)])
def test_ab_step_equals_the_numpy_batch_step(depth, types, inject):
    """The A/B design's compiled batch step (and its A/A variant): per-user sums, generator state and checkpoint
    rows equal the NumPy step's, bit for bit (17 ranks: the NumPy step itself, no bit patterns)."""
    from tests.test_simulation_point_speed3 import ab_designs_both_ways

    runs = ab_designs_both_ways(_ab_config(depth, types, inject), reference_ab_process)
    assert all((d._kernel_inputs() is None) == (depth > 16) for d in runs[0])
    assert all(not d._kernel_inputs().scratch.any() for d in runs[0] if depth <= 16)  # scratch back to 0
    for new, ref in zip(*runs, strict=True):
        for key in ref.sums:
            assert new.sums[key].tobytes() == ref.sums[key].tobytes(), key
        assert new.rng.bit_generator.state == ref.rng.bit_generator.state
        assert len(new.rows) == len(ref.rows) > 20
        for x, y in zip(new.rows, ref.rows, strict=True):
            assert repr(x) == repr(y)
        assert ref.sums["rr"].sum() > 0 and (ref.sums["abandoned"].sum() > 0 or depth > 10)


def _numpy_step(self, batch) -> None:
    """ABDesign._process's NumPy step (the compiled step switched off)."""
    self._kernel = (None,)
    type(self)._process(self, batch)


@pytest.mark.parametrize(("depth", "types", "inject"), [
    (10, ("nav", "inf"), False), (10, ("nav", "pbm", "inf"), True), (1, ("nav", "random"), False),
    (16, ("dbn", "inf"), False), (17, ("nav", "inf"), False)])
def test_ab_step_adds_the_squares_as_the_numpy_step(depth, types, inject):
    """test: delta_t: the compiled step adds the clicks' and reciprocal ranks' squares (rows 0 and 1 of the design's
    squares) as the NumPy step's bincounts, bit for bit, and leaves its scratch rows at 0; sums, draws and rows (with
    their df at the squares' intra-user correlation) equal too (17 ranks: both the NumPy step)."""
    from simulations.config import config_from_mapping
    from tests.test_simulation_point_speed3 import ab_designs_both_ways

    mapping = _ab_mapping(depth, types, inject)
    for d in mapping["designs"]:
        d["test"] = "delta_t"
    runs = ab_designs_both_ways(config_from_mapping(mapping), _numpy_step)
    for new, ref in zip(*runs, strict=True):
        assert (new._kernel_inputs() is None) == (depth > 16) and ref._kernel_inputs() is None
        assert new._square_rows.shape == (2, new.population) and list(new.squares) == ["clicks", "rr"]
        if depth <= 16:
            assert not new._kernel_inputs().scratch_squares.any()
        assert new._square_rows.tobytes() == ref._square_rows.tobytes()
        assert new.squares["rr"] is not None and new.squares["rr"].base is new._square_rows  # views of the rows
        for key in ref.sums:
            assert new.sums[key].tobytes() == ref.sums[key].tobytes(), key
        assert new.rng.bit_generator.state == ref.rng.bit_generator.state
        assert len(new.rows) == len(ref.rows) >= 18  # 3 days x 3 metrics, with SRM rows
        assert [repr(x) for x in new.rows] == [repr(y) for y in ref.rows]
        assert any(0 < r.df < 1e6 for r in new.rows)
        assert (ref.squares["rr"] > ref.sums["rr"] ** 2 / np.maximum(ref.sums["impressions"], 1) - 1e-12).all()
        assert ref.squares["clicks"].sum() >= ref.sums["clicks"].sum() > 0


# ----------------------------------------------------------------------------- JIT off, imports
_SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_simulation_kernels import _Batch, _design, _labels, _users
out = {{}}
users = _users(("nav", "pbm", "inf"))  # three types: table entries above 127
rng = np.random.default_rng(2)
labels = _labels(rng, 200, 10)
out["clicks"] = users.sample(labels, users.draw_types(200, rng), np.random.default_rng(3)).tobytes().hex()
for method in ("team_draft", "balanced"):
    d = _design(method, 10, ("nav", "pbm", "inf"), True, False, seed=5)
    rng = np.random.default_rng(6)
    batch = _Batch(rng.integers(0, 400, 300), rng.integers(0, 300, 300), d.users.draw_types(300, rng))
    d._process_table(batch)
    out[method] = [v.tobytes().hex() for v in d.sums.values()]
from test_simulation_kernels import _ab_config
from simulations.runner import build_replicate, replicate_seeds, world_seed
from simulations.users import UserModels
from simulations.world import build_world
config = _ab_config(5, ("nav", "pbm", "inf"), False)
world = build_world(config, world_seed(config.seed))
traffic, designs = build_replicate(config, world, UserModels.from_config(config.users),
                                   replicate_seeds(config.seed, 1)[0])
for hour in range(0, 24, 6):
    batch = traffic.batch(hour, 6)
    for d in designs:
        if d.kind == "ab":
            d.process(batch)
            out.setdefault("ab", []).append(d.sums["rr"].tobytes().hex())
import numba
out["jit"] = not numba.config.DISABLE_JIT
print(json.dumps(out))
"""


def compiled_and_plain(script: str) -> tuple[dict, dict]:
    """The JSON that ``script`` prints last, run in a fresh interpreter compiled and with ``NUMBA_DISABLE_JIT=1``
    (its ``"jit"`` entry checked and removed: ``numba.config.DISABLE_JIT`` as each run saw it)."""
    runs = []
    for disable in ("0", "1"):
        env = {**os.environ, "NUMBA_DISABLE_JIT": disable}
        proc = subprocess.run([sys.executable, "-c", script.format(tests=str(REPO / "tests"))], env=env,
                              capture_output=True, text=True, check=True, cwd=REPO)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert runs[0].pop("jit") and not runs[1].pop("jit")
    return runs[0], runs[1]


def test_disable_jit_gives_the_same_numbers():
    """NUMBA_DISABLE_JIT=1: the kernels run as plain Python, with the same clicks and sums."""
    compiled, plain = compiled_and_plain(_SCRIPT)
    assert compiled == plain


def test_numba_not_imported_by_power_and_evaluate_paths():
    code = ("import sys; sys.argv = ['onlineeval', 'power', '--help']\n"
            "import onlineeval, onlineeval.api\nfrom onlineeval.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "onlineeval.evaluate({'q': {'a': 1}}, {'q': {'a': 1.0}}, 'nDCG@10')\n"
            "print('numba' in sys.modules, 'simulations.kernels' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert proc.stdout.strip().splitlines()[-1] == "False False"


def test_kernel_module_is_a_task_module():
    from simulations.executors import TASK_MODULES

    assert "simulations.kernels" in TASK_MODULES
    assert il.MASK_SLOTS == 16  # the kernel's bit masks fit in the int64 it builds them in


def test_add_ones_equals_numpy_add_at():
    """Every design's impression counts: the compiled loop gives np.add.at's sums (repeated users, int32 and
    int64 ids, an empty batch), and the design's count equals the number of impressions per user."""
    from simulations.kernels import add_ones

    rng = np.random.default_rng(4)
    for dtype in (np.int32, np.int64, np.intp):
        base = rng.integers(0, 50, size=300).astype(np.float64)
        for n in (0, 1, 1500):
            user = rng.integers(0, 300, size=n).astype(dtype)
            want, got = base.copy(), base.copy()
            np.add.at(want, user, 1.0)
            add_ones(got, user)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(got - base, np.bincount(user, minlength=300))
