"""The battery's distribution checks: the candidate's draws and outcomes against the reference's distribution.

* ``team_distribution``, ``document_distribution`` (:func:`_distributions`): per position, the
  candidate's team labels and documents against the reference's exact probabilities
  (:mod:`.exact`; goodness of fit), or a sampled reference where none is enumerated (chi-square
  homogeneity); each distinct test counted once;
* ``outcome_distribution`` (:func:`_outcome_distribution`): the win / loss / tie of every pair under
  random clicks, against the reference's exact outcome probabilities (:func:`exact_outcomes`) or its
  sampled outcomes.

Moved out of :mod:`.battery` unchanged (which runs them and documents the whole battery).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.interleaving.probabilistic import Probabilistic, pairwise_win_difference, slot_posteriors
from onlineeval.interleaving.validation.candidates import EXPECTED, BatchCandidate, Candidate, Sample, pad_lists
from onlineeval.interleaving.validation.exact import ExactDraws
from onlineeval.interleaving.validation.methods import MethodSpec
from onlineeval.interleaving.validation.report import PENDING, SKIPPED, CheckResult
from onlineeval.interleaving.validation.stattests import (
    MIN_EXPECTED,
    bonferroni,
    gof_key,
    goodness_of_fit,
    homogeneity,
    partition_key,
    reference_statistic,
)

__all__ = ["exact_outcomes"]

Lists = tuple[tuple[int, ...], ...]


#: largest number of (draw, click vector) rows :func:`exact_outcomes` credits for one scenario (draws x 2^k);
#: above it (a multileaving page of 10 slots: 648 draws x 1024 click vectors) the outcome check samples the reference
MAX_OUTCOME_ROWS = 1 << 16


def outcomes_exact(ex: ExactDraws | None) -> bool:
    """The reference's outcome probabilities are computed exactly from ``ex`` (whole draws known, few enough)."""
    return ex is not None and ex.probs is not None and len(ex.probs) * 2 ** ex.length <= MAX_OUTCOME_ROWS


def _pairs(m: int) -> list[tuple[int, int]]:
    """``(j, i)`` with ``j > i``: the value ``pref[j, i]`` says ranker ``j`` beats ranker ``i``."""
    return [(j, i) for i in range(m) for j in range(i + 1, m)]


def _clicks(sample: Sample, prob: NDArray[np.float64] | float, rng: np.random.Generator) -> NDArray[np.bool_]:
    k = sample.shown.shape[1]
    p = np.broadcast_to(np.asarray(prob, dtype=np.float64), (k,)) if np.ndim(prob) else prob
    return (rng.random(sample.shown.shape) < p) & (sample.shown >= 0)


def _column(a: NDArray[np.int64], j: int) -> NDArray[np.int64]:
    return a[:, j] if j < a.shape[1] else np.full(a.shape[0], -1, dtype=np.int64)


def _distributions(scenarios: Sequence[Lists], cand: Sequence[Sample], refs: Sequence[Sample],
                   tau: Any = None, exact: Sequence[ExactDraws | None] | None = None) -> list[CheckResult]:
    """Per position, the team labels, then the documents, of the candidate against the reference.

    Where the reference's distribution is known exactly (``exact[s]``, :mod:`.exact`), the
    candidate's column is tested against its exact probabilities (:func:`goodness_of_fit`);
    otherwise against the sampled reference (chi-square homogeneity, :func:`homogeneity`), which
    has the power of a one-sample test on half as many impressions.

    Each distinct test is counted once (:func:`gof_key`, :func:`partition_key`): a column that
    splits the impressions into the same groups as a column tested before, with the same
    reference probabilities, gives the same p-value (the second pick of a team-draft round is
    the first's complement; a team-draft or balanced document is a function of the team labels),
    and a constant column cannot reject. A ``document_distribution`` with no test of its own is
    ``SKIPPED`` (rule ``"implied"``) and takes no share of the level. ``tau``: the reference's softmax
    temperature (probabilistic methods), named in the hint of a failing row.
    """
    exact = list(exact) if exact is not None else [None] * len(scenarios)
    tests: dict[str, list[float]] = {"team": [], "doc": []}
    dup = {"team": 0, "doc": 0}
    kinds_used: dict[str, set[str]] = {"team": set(), "doc": set()}
    worst = {"team": ("", 1.0), "doc": ("", 1.0)}
    positions = 0
    for sc, cs, rs, ex in zip(scenarios, cand, refs, exact):
        k = max(cs.shown.shape[1], rs.shown.shape[1] if ex is None else ex.length)
        positions += k
        seen: set[bytes] = set()
        for kind, c_arr, r_arr in (("team", cs.teams, rs.teams), ("doc", cs.shown, rs.shown)):
            for j in range(k):
                c = _column(c_arr, j)
                if ex is not None:
                    probs = ex.marginal(kind, j)
                    key = gof_key(c, probs)
                else:
                    r = _column(r_arr, j)
                    key = partition_key(c, r)
                if key is None or key in seen:      # constant (p = 1), or a test already counted
                    dup[kind] += key is not None
                    continue
                seen.add(key)
                kinds_used[kind].add("exact" if ex is not None else "sampled")
                p = goodness_of_fit(c, probs) if ex is not None else homogeneity(c, r)
                tests[kind].append(p)
                if p < worst[kind][1]:
                    where = f"lists {[list(x) for x in sc]} position {j + 1}"
                    vs = "exact reference" if ex is not None else "reference"
                    if ex is not None:
                        ref_docs, share = np.asarray(list(probs), dtype=np.int64), probs.get
                    else:
                        ref_docs, share = r, (lambda t, _d=0.0, r=r: float(np.mean(r == t)))
                    if kind == "team":
                        where += f": candidate vs {vs} " + ", ".join(
                            f"team {t}: {np.mean(c == t):.3f} vs {share(t, 0.0):.3f}" for t in range(len(sc)))
                    else:
                        where += f": candidate vs {vs}, largest differences " + _doc_shares(c, ref_docs, share)
                    worst[kind] = (where, p)
    n_exact = sum(ex is not None for ex in exact)
    counts = {"candidate": int(sum(s.n for s in cand)),
              "reference": int(sum(r.n for r, ex in zip(refs, exact) if ex is None))}
    out = []
    for name, kind, what in (("team_distribution", "team", "team labels"),
                             ("document_distribution", "doc", "documents")):
        pv = tests[kind]
        used = kinds_used[kind] or ({"exact"} if n_exact == len(scenarios) else {"sampled"})
        stat = reference_statistic(used)
        ref_text = _reference_text(exact, scenarios)
        det = (f"{what} per position, candidate vs reference: {len(pv)} distinct tests over {positions} positions "
               f"x scenarios ({dup[kind]} split the impressions as a test already counted and give its p-value"
               + (", team_distribution's included" if kind == "doc" else "") + "; constant columns cannot fail); "
               + ref_text)
        if kind == "doc" and not pv:
            out.append(CheckResult(name, SKIPPED, "implied by team_distribution", None,
                                   f"implied: every position's documents split the impressions as a team label "
                                   f"does ({dup[kind]} of {positions} positions x scenarios; the others show one "
                                   "document), so its tests are team_distribution's; not counted in the level",
                                   counts=counts, rule="implied"))
            continue
        pb = bonferroni(pv)
        hint = f"worst: {worst[kind][0]}" if worst[kind][0] else ""     # shown where the check fails (finalize)
        if isinstance(tau, (int, float)) and kind == "doc":     # tau moves documents, not teams
            hint += (f"; a softmax with another tau than the reference's {tau:g} shifts these: if yours differs, "
                     "pass --option tau=<yours> (credit_agreement names the tau its credits fit)")
        out.append(CheckResult(name, PENDING, f"{stat}, Bonferroni over {len(pv)}", pb, det,
                               counts=counts, rule="null", hint=hint.lstrip("; ")))
    return out


def _reference_text(exact: Sequence[ExactDraws | None], scenarios: Sequence[Lists], outcome: bool = False) -> str:
    """Which reference the tests used: exact probabilities (how obtained) or a sample of the reference."""
    n_ex = sum(ex is not None and (not outcome or outcomes_exact(ex)) for ex in exact)
    gof = ("exact reference probabilities (" + next(ex.how for ex in exact if ex is not None)
           + "); goodness of fit: exact binomial test for two cells, else Pearson chi-square, cells expecting "
           f"fewer than {MIN_EXPECTED:g} merged, an impossible category gives p = 0") if n_ex else ""
    if n_ex == len(scenarios):
        return gof
    sampled = ("a sampled reference (chi-square test of homogeneity" + (": too many shown lists to enumerate"
               if n_ex else "") + ")")
    if not n_ex:
        return sampled
    return f"{gof} on {n_ex} of {len(scenarios)} scenarios; {sampled} on the others"


def _doc_shares(c: NDArray[np.int64], ref_docs: NDArray[np.int64], ref_share: Callable[[int, float], float],
                top: int = 3) -> str:
    """The ``top`` documents whose shares differ most between candidate and reference (``-1``: no document)."""
    docs = np.unique(np.concatenate([c, ref_docs]))
    cs = np.asarray([np.mean(c == d) for d in docs])
    rs = np.asarray([ref_share(int(d), 0.0) for d in docs])
    order = np.argsort(-np.abs(cs - rs), kind="stable")[:top]
    return ", ".join(f"{'no document' if docs[i] < 0 else f'doc {int(docs[i])}'}: {cs[i]:.3f} vs {rs[i]:.3f}"
                     for i in order)


def _outcome_distribution(candidate: Candidate, ref: BatchCandidate, spec: MethodSpec, scenarios: Sequence[Lists],
                          cand: Sequence[Sample], refs: Sequence[Sample], click_prob: float,
                          rng_clk: np.random.Generator, rng_x: np.random.Generator,
                          exact: Sequence[ExactDraws | None] | None = None) -> CheckResult:
    """End to end: the win / loss / tie of every pair under random clicks, candidate against reference.

    Where the reference's whole draws are enumerated (``exact[s].probs``), the reference's outcome
    probabilities are exact (every draw under every click vector, :func:`exact_outcomes`) and the
    candidate's outcomes are tested against them (:func:`goodness_of_fit`); otherwise against the
    reference's sampled outcomes (chi-square homogeneity).
    """
    exact = list(exact) if exact is not None else [None] * len(scenarios)
    pvals = []
    for sc, cs, rs, ex in zip(scenarios, cand, refs, exact):
        cv = np.sign(candidate.values(sc, cs.shown, cs.teams, _clicks(cs, click_prob, rng_clk), spec.scale))
        if outcomes_exact(ex):
            assert ex is not None
            probs = exact_outcomes(ref, spec.scale, sc, ex, click_prob)
            for j, i in _pairs(len(sc)):
                pvals.append(goodness_of_fit(cv[:, j, i].astype(np.int64), probs[(j, i)]))
            continue
        rv = np.sign(ref.values(sc, rs.shown, rs.teams, _clicks(rs, click_prob, rng_x), spec.scale))
        for j, i in _pairs(len(sc)):
            pvals.append(homogeneity(cv[:, j, i].astype(np.int64), rv[:, j, i].astype(np.int64)))
    pb = bonferroni(pvals)
    n_ex = sum(outcomes_exact(ex) for ex in exact)
    stat = reference_statistic({"exact"} if n_ex == len(scenarios) else {"sampled"} if not n_ex else
                               {"exact", "sampled"})
    return CheckResult("outcome_distribution", PENDING,
                       f"{stat}, Bonferroni over {len(pvals)}", pb,
                       "win/loss/tie of every pair, candidate vs reference end to end (random clicks); "
                       + _reference_text(exact, scenarios, outcome=True)
                       + ("; the reference's outcome probabilities sum every enumerated draw under every click "
                          "vector" if n_ex else ""), rule="null")


#: cache of :func:`exact_outcomes` (the reference's outcome probabilities per scenario and click probability)
_OUTCOME_CACHE: dict[tuple[Any, ...], dict[tuple[int, int], dict[int, float]]] = {}


def exact_outcomes(ref: BatchCandidate, scale: str, lists: Lists, ex: ExactDraws,
                   click_prob: float) -> dict[tuple[int, int], dict[int, float]]:
    """Per pair ``(j, i)``, the exact probabilities of the reference's outcome sign ``-1, 0, +1``.

    Every enumerated draw is credited by the reference under all ``2^k`` click vectors (each slot
    clicked with probability ``click_prob``, independently), weighted by the draw's probability
    times the click vector's.
    """
    assert ex.shown is not None and ex.teams is not None and ex.probs is not None
    il = ref.interleaver
    key = (type(il), repr(sorted(il.options.items())), lists, float(click_prob), scale)
    hit = _OUTCOME_CACHE.get(key)
    if hit is not None:
        return hit
    n_draws, k = ex.shown.shape
    bits = ((np.arange(2 ** k)[:, None] >> np.arange(k)[None, :]) & 1).astype(bool)     # (2^k, k)
    w_click = np.prod(np.where(bits, click_prob, 1.0 - click_prob), axis=1)
    shown = np.repeat(ex.shown, bits.shape[0], axis=0)
    teams = np.repeat(ex.teams, bits.shape[0], axis=0)
    clicks = np.tile(bits, (n_draws, 1))
    weight = np.repeat(ex.probs, bits.shape[0]) * np.tile(w_click, n_draws)
    rankings = pad_lists(lists, shown.shape[0])
    out: dict[tuple[int, int], dict[int, float]] = {}
    if isinstance(il, Probabilistic) and scale == EXPECTED:
        # expected_preferences() row by row, its slot posteriors (a function of the shown list alone)
        # computed once per draw instead of once per draw and click vector
        q = slot_posteriors(ref.result(pad_lists(lists, n_draws), ex.shown, np.where(ex.shown >= 0, 0, -1)), il.tau)
        q = np.repeat(q, bits.shape[0], axis=0)
        counted = il._counted(ref.result(rankings, shown, teams), clicks & (shown >= 0))
        for j, i in _pairs(len(lists)):
            e = pairwise_win_difference(q[:, :, j], q[:, :, i], counted)
            sign_ji = np.where(np.abs(e) <= il.tie_tolerance, 0.0, np.sign(e))
            out[(j, i)] = {o: float(weight[sign_ji == o].sum()) for o in (-1, 0, 1) if (sign_ji == o).any()}
    else:
        sign = np.sign(ref.values_on(rankings, shown, teams, clicks, scale))
        for j, i in _pairs(len(lists)):
            out[(j, i)] = {o: float(weight[sign[:, j, i] == o].sum()) for o in (-1, 0, 1) if (sign[:, j, i] == o).any()}
    _OUTCOME_CACHE[key] = out
    return out
