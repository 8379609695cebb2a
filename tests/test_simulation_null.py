"""The null check of interleaving designs: expected Delta when clicks do not depend on relevance.

References: balanced interleaving's bias under random clicks (Hofmann, Whiteson and de
Rijke 2011; Chapelle, Joachims, Radlinski and Yue 2012), team-draft's fidelity
(Radlinski, Kurup and Joachims 2008). The balanced reference below is computed
exactly, by enumerating every click vector of the null user (a plain per-query
implementation of Joachims 2003 and of the cascade presets), not by the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from simulations.analysis import NULL_BIAS_SE, null_rejection_rate
from simulations.config import config_from_mapping
from simulations.runner import (
    NULL_PREFIX,
    compute_truth,
    null_interleaving_truth,
    world_seed,
)
from simulations.users import UserModels
from simulations.world import build_world

# the cascade presets (grades 0..4): click probability, stop probability after a click
PRESETS = {
    "navigational": ([0.05, 0.3, 0.5, 0.7, 0.95], [0.2, 0.3, 0.5, 0.7, 0.9]),
    "informational": ([0.4, 0.6, 0.7, 0.8, 0.9], [0.1, 0.2, 0.3, 0.4, 0.5]),
}
SHARES = {"navigational": 0.6, "informational": 0.4}
N_TRUTH = 1_000_000


def _config(**over):
    base = {
        "seed": 5,
        "collection": {"type": "synthetic", "n_queries": 200, "candidates": 25},
        "rankers": {"depth": 10, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.7}},
        "users": {"population": 800, "types": [
            {"name": n, "share": s, "click_model": {"name": "cascade", "preset": n}} for n, s in SHARES.items()]},
        "designs": [{"name": "team_draft", "type": "interleaving", "method": "team_draft"},
                    {"name": "balanced", "type": "interleaving", "method": "balanced"}],
        "analysis": {"truth_impressions": N_TRUTH},
    }
    base.update(over)
    return config_from_mapping(base)


@pytest.fixture(scope="module")
def world():
    cfg = _config()
    w = build_world(cfg, world_seed(cfg.seed))
    users = UserModels.from_config(cfg.users)
    nulls = {d.name: null_interleaving_truth(cfg, d, w, users)[0] for d in cfg.designs}
    return cfg, w, users, nulls


def _click_vector_probabilities(labels: np.ndarray, bits: np.ndarray, click: list[float], stop: list[float]):
    """P(click vector) of a cascade user on one list of grades, for every vector in ``bits``:
    examined slots up to the last click ``L`` click with ``c`` or not (``1 - c``), a click
    before ``L`` goes on (``1 - s``), and after ``L`` the user stops (``s_L``) or goes on
    without another click (``(1 - s_L) prod_{j > L} (1 - c_j)``)."""
    c = np.asarray(click)[labels]
    s = np.asarray(stop)[labels]
    k = labels.size
    ranks = np.arange(k)
    any_click = bits.any(axis=1)
    last = np.where(any_click, k - 1 - np.argmax(bits[:, ::-1], axis=1), 0)
    upto = ranks[None, :] <= last[:, None]
    examined = np.where(upto, np.where(bits, c, 1 - c), 1.0).prod(axis=1)
    went_on = np.where(bits & (ranks[None, :] < last[:, None]), 1 - s, 1.0).prod(axis=1)
    after = np.append(np.cumprod((1 - c)[::-1])[::-1][1:], 1.0)  # prod_{j > r} (1 - c_j)
    tail = s[last] + (1 - s[last]) * after[last]
    return np.where(any_click, examined * went_on * tail, np.prod(1 - c))


def _balanced_shown(a: list[int], b: list[int], a_first: bool, k: int) -> list[int]:
    """Joachims (2003): turns L1, F1, L2, F2, ... skipping documents already shown."""
    lead, follow = (a, b) if a_first else (b, a)
    shown: list[int] = []
    for i in range(max(len(a), len(b))):
        for lst in (lead, follow):
            if i < len(lst) and lst[i] not in shown and len(shown) < k:
                shown.append(lst[i])
    return shown


def test_balanced_null_delta_equals_the_exact_enumeration(world):
    """Exact expected Delta of balanced interleaving under the null user: every click vector
    of 10 slots (1,024), its probability a frequency- and share-weighted mixture of the
    cascade on ranker A's list for an independent query, the outcome by Joachims' credit."""
    _cfg, w, _users, nulls = world
    k = w.depth
    bits = ((np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1).astype(bool)
    p_vec = np.zeros(len(bits))
    for q2 in range(w.n_queries):
        grades = w.labels[q2, w.rankings["A"][q2]]
        for name, share in SHARES.items():
            p_vec += w.frequency[q2] * share * _click_vector_probabilities(grades, bits, *PRESETS[name])
    assert p_vec.sum() == pytest.approx(1.0, abs=1e-9)
    last = np.where(bits.any(axis=1), k - 1 - np.argmax(bits[:, ::-1], axis=1), -1)
    num = 0.0
    for q in range(w.n_queries):
        a, b = list(w.rankings["A"][q]), list(w.rankings["B"][q])
        for a_first in (True, False):
            shown = _balanced_shown(a, b, a_first, k)
            ra = np.array([a.index(d) + 1 if d in a else np.inf for d in shown])
            rb = np.array([b.index(d) + 1 if d in b else np.inf for d in shown])
            kappa = np.minimum(ra[last], rb[last])
            h_a = (bits & (ra[None, :] <= kappa[:, None])).sum(axis=1)
            h_b = (bits & (rb[None, :] <= kappa[:, None])).sum(axis=1)
            outcome = np.where(last >= 0, np.sign(h_b - h_a), 0.0)
            num += w.frequency[q] * 0.5 * float(p_vec @ outcome) / 2.0
    exact = num / (1.0 - p_vec[0])
    got = nulls["balanced"]
    assert abs(got.value - exact) <= 4 * got.se, (got.value, exact, got.se)
    assert abs(exact) > 4 * got.se  # the bias is real, not Monte Carlo noise


def test_balanced_bias_is_detected_and_team_draft_is_not(world):
    _cfg, _w, _users, nulls = world
    bal, td = nulls["balanced"], nulls["team_draft"]
    assert abs(bal.value) > NULL_BIAS_SE * bal.se
    assert abs(td.value) < NULL_BIAS_SE * td.se
    assert bal.metric == NULL_PREFIX + "delta_ab" and "null user" in bal.method


def test_compute_truth_adds_one_null_row_per_pair_without_changing_the_design_truth(world):
    _cfg, _w, users, _nulls = world
    small = _config(analysis={"truth_impressions": 20_000},
                    designs=[{"name": "m", "type": "interleaving", "method": "team_draft_multileave",
                              "rankers": ["A", "B", "C"]},
                             {"name": "ab", "type": "ab"}],
                    rankers={"depth": 10, "A": {"noise": 1.0}, "B": {"noise": 0.7}, "others": {"C": {"noise": 0.8}}})
    w3 = build_world(small, world_seed(small.seed))
    truths = compute_truth(small, w3, users)
    names = [(t.design, t.metric) for t in truths]
    pairs = ["delta_B_vs_A", "delta_C_vs_A", "delta_C_vs_B"]
    assert [m for d, m in names if d == "m"] == pairs + [NULL_PREFIX + p for p in pairs]
    assert not any(m.startswith(NULL_PREFIX) for d, m in names if d == "ab")
    # the design's own truth uses the same stream as before the null check existed
    only = [t for t in truths if t.design == "m" and not t.metric.startswith(NULL_PREFIX)]
    again = [t for t in compute_truth(small.model_copy(update={"designs": small.designs[:1]}), w3, users)
             if not t.metric.startswith(NULL_PREFIX)]
    assert only == again


def test_null_rejection_rate_is_the_two_sided_normal_rate():
    alpha, z = 0.05, sps.norm.isf(0.025)
    for bias, se in ((0.0, 0.01), (0.004, 0.002), (-0.01, 0.003)):
        p = sps.norm.sf(z - bias / se) + sps.norm.cdf(-z - bias / se)
        assert float(null_rejection_rate(bias, se, alpha)) == pytest.approx(p, rel=1e-12)
    assert float(null_rejection_rate(0.0, 0.01, alpha)) == pytest.approx(alpha, rel=1e-12)
