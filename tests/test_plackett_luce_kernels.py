"""The Plackett-Luce logger's compiled paths (:mod:`simulations.policies.pl_kernels`, the dense table lookups of
:class:`~simulations.policies.plackett_luce.PlackettLucePolicy`) against their references: a plain-Python sampler
(below) on the same uniforms, the NumPy prefix path, the per-query tables, and the exact list probabilities (within
4 SE) where the sampler's weights underflow."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.policies import build_policy


def sample_reference(pol, q: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``pol._sample``'s lists from its uniforms ``u`` ``(n, k)``, in plain Python: the operations
    :func:`simulations.policies.pl_kernels.pl_sample` documents, in the same order."""
    weights, order, totals = pol._sampler_tables()
    logits = pol.logits
    out = np.full((q.size, pol.k), -1, dtype=np.int64)
    for i, qq in enumerate(q.tolist()):
        cands = [int(c) for c in order[qq] if c >= 0]
        w = {c: float(weights[qq, c]) for c in cands}
        total = first = float(totals[qq])
        placed: set[int] = set()
        for j in range(pol.k):
            if j >= len(cands):
                break
            if not total > 1e-6 * first:
                total = 0.0
                for c in cands:
                    if c not in placed:
                        total += w[c]
                if not total > 1e-290:
                    top = max(float(logits[qq, c]) for c in cands if c not in placed)
                    total = 0.0
                    for c in cands:
                        w[c] = 0.0 if c in placed else float(np.exp(logits[qq, c] - top))
                        total += w[c]
                first = total
            x = float(u[i, j]) * total
            run, pick, last = 0.0, -1, -1
            for c in cands:
                if c not in placed and w[c] > 0.0:
                    run += w[c]
                    last = c
                    if run > x:
                        pick = c
                        break
            pick = last if pick < 0 else pick
            out[i, j] = pick
            placed.add(pick)
            total -= w[pick]
    return out


def _hard_scores(rng: np.random.Generator, n_q: int, m: int) -> np.ndarray:
    """Scores of every scale (0.1 to 2000 per query), query 0 with half its columns non-candidates, query 1 with
    one candidate."""
    scores = rng.normal(size=(n_q, m)) * rng.choice([0.1, 1.0, 50.0, 2000.0], size=(n_q, 1))
    scores[0, m // 2:] = -np.inf
    scores[1, :] = -np.inf
    scores[1, 0] = 3.0
    return scores


def test_plackett_luce_sampler_equals_its_reference() -> None:
    """The compiled slot-by-slot sampler draws the lists of its plain-Python reference from the same uniforms (one
    per slot), on scores of every scale (logits thousands apart: the weights left underflow and are rescaled),
    ties, queries with fewer candidates than slots and a query with one candidate; it takes ``k`` uniforms an
    impression from the generator."""
    from simulations.policies.plackett_luce import PlackettLucePolicy

    rng = np.random.default_rng(11)
    for n_q, m, k in ((50, 9, 4), (30, 20, 5), (10, 100, 10), (20, 6, 6)):
        scores = _hard_scores(rng, n_q, m)
        scores[2, :3] = 1e4  # ties
        pol = PlackettLucePolicy(scores, k, 0.5)
        q = rng.integers(0, n_q, 3000)
        r1, r2 = np.random.default_rng(7), np.random.default_rng(7)
        got = pol.sample(q, r1)
        np.testing.assert_array_equal(got, sample_reference(pol, q, r2.random((q.size, k))))
        assert r1.random() == r2.random()  # the same number of uniforms taken
        assert ((got >= 0).sum(axis=1) == np.minimum(k, np.isfinite(scores[q]).sum(axis=1))).all()


def test_plackett_luce_compiled_prefix_equals_numpy() -> None:
    """The compiled fast path of the prefix propensities (``compiled_prefix``) gives NumPy's numbers bit for bit,
    on the policy's own lists and on lists with empty slots, repeats and non-candidates, at every score scale (rows
    the fast path cannot hold to 1e-9 go to the log-space path in both)."""
    from simulations.policies.plackett_luce import PlackettLucePolicy

    rng = np.random.default_rng(12)
    for n_q, m, k in ((50, 9, 4), (30, 20, 5), (10, 100, 10), (300, 40, 3)):
        pol = PlackettLucePolicy(_hard_scores(rng, n_q, m), k, 0.5)
        q = rng.integers(0, n_q, 4000)
        lists = pol.sample(q, np.random.default_rng(1))
        lists[:400] = rng.integers(-1, m, (400, k))
        fast = pol.propensities(q, lists)
        pol.compiled_prefix = False
        ref = pol.propensities(q, lists)
        for form in ("list", "prefix", "item"):
            np.testing.assert_array_equal(getattr(fast, form), getattr(ref, form), err_msg=form)


def test_plackett_luce_sampler_draws_exact_softmax_below_underflow() -> None:
    """Logits 1000 and 1, 0, -2 apart: after the first slot the weights left are below 1e-290 of the first and are
    rescaled; slot 2 must still show document 1 with probability e / (e + 1 + e^-2) (the exact propensities, in log
    space), within 4 SE over 20,000 draws."""
    pol = build_policy("plackett_luce", np.array([[1000.0, 1.0, 0.0, -2.0, -np.inf]]), 3)
    shown = pol.sample(np.zeros(20_000, dtype=np.int64), np.random.default_rng(3))
    assert (shown[:, 0] == 0).all()
    uniq, counts = np.unique(shown, axis=0, return_counts=True)
    p = pol.propensities(np.zeros(len(uniq), dtype=np.int64), uniq).list
    assert p.sum() == pytest.approx(1.0, abs=1e-12) and len(uniq) == 6
    se = np.sqrt(p * (1 - p) / 20_000)
    assert np.all(np.abs(counts / 20_000 - p) <= 4 * se), (counts / 20_000, p)


@pytest.mark.parametrize("dp_max_states", [50_000, 0])  # exact tables, Monte Carlo ones
def test_plackett_luce_dense_lookups_equal_the_per_query_tables(dp_max_states: int) -> None:
    """The item propensities and shown probabilities gathered from the dense copy of the tables equal the per-query
    lookups (``DENSE_MAX_BYTES`` 0 turns the copy off) bit for bit, on the policy's own lists and on lists with empty
    slots, repeats and non-candidates; a pickled policy carries no dense copy."""
    import pickle

    from simulations.policies.plackett_luce import PlackettLucePolicy

    rng = np.random.default_rng(4)
    scores = rng.normal(size=(40, 9))
    scores[3, 6:] = -np.inf  # a query with 6 candidates
    dense = PlackettLucePolicy(scores, 4, 0.7, dp_max_states=dp_max_states, item_method="monte_carlo")
    loop = PlackettLucePolicy(scores, 4, 0.7, dp_max_states=dp_max_states, item_method="monte_carlo")
    loop.DENSE_MAX_BYTES = 0
    q = rng.integers(0, 40, 3000)
    lists = dense.sample(q, np.random.default_rng(5))
    lists[:300] = rng.integers(-1, 9, (300, 4))  # empty slots, repeats, non-candidates of query 3
    for a, b in ((dense.propensities(q, lists), loop.propensities(q, lists)),):
        for form in ("list", "prefix", "item"):
            np.testing.assert_array_equal(getattr(a, form), getattr(b, form), err_msg=form)
    np.testing.assert_array_equal(dense.shown_probability(q, lists), loop.shown_probability(q, lists))
    assert loop._dense_mean is None and dense._dense_mean is not None
    assert pickle.loads(pickle.dumps(dense))._dense_mean is None
