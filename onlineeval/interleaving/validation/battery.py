"""The battery: a candidate's draws and credits checked against onlineeval's reference implementation.

Two rankers (interleaving) or three and more (multileaving: every pair ``j > i``, value
``pref[j, i]``, "ranker j beats ranker i"). Each statistical check pools the scenarios
and combines its tests (pairs, positions, scenarios, click models) with Bonferroni.

* ``structure``, ``prefix_balance`` (team-draft): exact invariants of every draw
  (:mod:`~onlineeval.interleaving.validation.invariants`);
* ``aa_no_preference``: identical rankers, clicks blind to the documents: sign test
  per pair; for methods whose A/A outcome is always a tie, any win or loss is an exact
  violation (a float-tie or tie-credit bug);
* ``random_clicks_no_preference``: different rankers, each shown slot clicked with
  probability ``click_prob``: sign test per pair. ``DOCUMENTED`` where the method's sign
  is not unbiased (balanced, probabilistic, optimized; see
  :mod:`~onlineeval.interleaving.validation.methods`);
* ``random_clicks_zero_expected_outcome`` (probabilistic) / ``random_clicks_zero_credit``
  (optimized): the method's own guarantee on its own scale, a one-sample t-test of
  the mean value per scenario, pair and click model (``click_prob`` per slot, and
  ``0.9 / rank``);
* ``better_ranker_wins``: a ranker that lifts the clicked documents wins (one-sided
  sign test on the win / loss scale, one-sided t-test on a real-valued scale); the
  statistic is the largest p-value over the pairs (every pair must reject);
* ``team_distribution``, ``document_distribution``: per position, the candidate's team labels
  and documents against the reference's *exact* probabilities (:mod:`.exact`: enumerated for
  all six methods on the battery's lists; goodness of fit, :func:`goodness_of_fit`: exact
  binomial test for two cells, Pearson chi-square for more, cells expecting fewer than 5
  merged, a category the reference never shows gives p = 0); a chi-square test of
  homogeneity against a sampled reference only where no exact distribution exists (the
  statistic column says which). Each distinct test counted once (a column that splits the
  impressions as one already tested, with the same probabilities, gives its p-value: a
  team-draft round's second pick is the complement of its first, a balanced impression is
  one coin). Team-draft's and balanced's documents are functions of their team labels, so
  for them (and any candidate that keeps that structure) ``document_distribution`` is
  ``SKIPPED`` as implied and not counted in ``s``;
* ``credit_agreement``: the candidate's value equals the reference's on identical
  ``(shown, teams, clicks)``, on the method's scale (exact);
* ``outcome_distribution``: end to end, the win / loss / tie distribution of every pair
  agrees with the reference: goodness of fit to its exact probabilities (every enumerated draw
  under every click vector, :func:`exact_outcomes`) where the draws number at most
  :data:`~.exact.MAX_LISTS` (every scenario but for probabilistic's lists of 7, 9 and 12
  documents and probabilistic multileaving's of 9 and 11), else chi-square homogeneity
  against a sampled reference;
* ``coin_no_preference`` (team-draft, two rankers): the round-1 coin (``A=(1,2,3,4)``, ``B=(2,1,4,3)``,
  only slot 1 clicked: the outcome is slot 1's team) and the round-2 coin (``A=(1,2,3)``, ``B=(2,3,4)``,
  only document 3 clicked), each a sign test of the exact null 0 on ``n`` impressions of its own, the two
  Bonferroni-combined (each at ``alpha / 12``: critical ``z`` 3.34). A 0.52 coin in round 1 alone, or in
  round 2 alone, gives ``z = 0.04 sqrt(n)``: exact binomial power 0.990 at ``n = 20000`` (0.30 at 5000,
  above 0.9999 at 60000); a 0.52 coin in every round is seen by both tests;
* ``documented: balanced bias``: balanced interleaving's known counter-example, measured.

Cases: besides the lists of 4-8 documents shown whole, every method but optimized is also run on lists
of 12-20 documents shown on a :data:`PAGE_LENGTH`-slot page (:data:`LONG_SCENARIOS`,
:data:`ML_LONG_SCENARIOS`: team-draft's rounds 1-5, team-draft multileaving's rounds 1-4 with three
rankers and 1-3 with four), in the structure, prefix, distribution, credit, outcome and random-click
checks, each with as many impressions as a short scenario of its check (on top of ``n``, so the sizes and
powers below hold for the short lists unchanged; the DOCUMENTED sign test of a method whose sign is biased
pools the short lists only, where that bias is measured); the page length is passed to the batch API's
``interleave(..., length)`` and to a per-impression
``interleave(lists, rng, length=...)`` that declares it (else the candidate's whole draw is cut to the
page). The report's ``size`` convention lists the cases (:func:`coverage`).

Level: ``alpha`` holds for the whole battery; each of its ``s`` statistical checks
(``s`` = 3 for balanced, 5 for optimized and the probabilistic methods, 6 for team-draft and
team-draft multileaving; ``better_ranker_wins`` is one) is tested at ``alpha / s`` (Bonferroni), so a correct
implementation fails a run with probability at most ``alpha``.

Size and power (defaults ``n = 60000``, ``alpha = 0.01``): the random-click checks see
``n`` impressions per click model (``n / 3`` per scenario). A bias ``b`` in the mean of
the guarantee's statistic gives ``z = b sqrt(n) / sd`` on the pooled t-test, against a
critical ``z`` of 3.66 (level 0.002 split over 8 tests, probabilistic): with the
expected outcome's ``sd`` of about 0.55 under uniform clicks, ``b = 0.01`` is detected
with power about 0.79 and ``b = 0.02`` with power above 0.999 (``sd = 1``, the worst
case: 0.11 and 0.89). The equivalence checks see ``n / 7`` impressions per scenario, tested
against exact probabilities: a 4-point shift in one position's team share of 1/2 gives
``z = 0.04 sqrt(n / 7) / 0.5 = 7.41``, detected with power above 0.999 by every two-ranker
method (critical ``z`` 3.93 for team-draft: 20 distinct team tests, 6 checks; 3.49 balanced,
3.84 optimized, 4.06 probabilistic); power 0.9 is reached at ``n`` of about 30000 for
team-draft. Against a sampled reference of the same size the same shift gave ``z = 5.24``
(power 0.90 team-draft, 0.96 balanced, 0.92 optimized, 0.88 probabilistic): the exact
reference needs half the impressions for the same power.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from onlineeval.errors import ConfigError, significance_level
from onlineeval.interleaving.registry import get_interleaver
from onlineeval.interleaving.validation.candidates import (
    CREDIT,
    EXPECTED,
    SIGN,
    BatchCandidate,
    Candidate,
    ProtocolCandidate,
    Sample,
    pad_lists,
)
from onlineeval.interleaving.validation.cases import (  # noqa: F401  (re-exported)
    BETTER_SCENARIOS,
    EQUIVALENCE_SCENARIOS,
    FIDELITY_SCENARIOS,
    LONG_SCENARIOS,
    Lists,
    ML_BETTER_SCENARIOS,
    ML_EQUIVALENCE_SCENARIOS,
    ML_FIDELITY_SCENARIOS,
    ML_LONG_SCENARIOS,
    ML_PROB_LONG_SCENARIOS,
    PAGE_LENGTH,
    PROB_LONG_SCENARIOS,
    _long_scenarios,
    conventions,
    coverage,
    page_length,
)
from onlineeval.interleaving.validation.distributions import (
    _clicks,
    _distributions,
    _outcome_distribution,
    _pairs,
    outcomes_exact,
    exact_outcomes,    # noqa: F401  (re-exported: onlineeval.interleaving.validation.battery.exact_outcomes)
)
from onlineeval.interleaving.validation.exact import exact_draws
from onlineeval.interleaving.validation.guard import (
    DEFAULT_TIMEOUT,
    CandidateError,
    check_seed,
    check_timeout,
    watchdog,
)
from onlineeval.interleaving.validation.invariants import (
    prefix_violations,
    structure_violations,
    union_sizes,
)
from onlineeval.interleaving.validation.methods import MethodSpec, method_spec
from onlineeval.interleaving.validation.progress import plan as progress_plan
from onlineeval.interleaving.validation.progress import planned_calls
from onlineeval.interleaving.validation.progress import stage as progress_stage
from onlineeval.interleaving.validation.report import (
    DOCUMENTED,
    FAIL,
    PENDING,
    SKIPPED,
    CheckResult,
    ValidationReport,
    finalize,
    stamped,
)
from onlineeval.interleaving.validation.stattests import (
    bonferroni,
    exact_check,
    sign_test,
    t_test,
)

__all__ = ["MAX_N", "validate_interleaver"]


#: largest ``n`` (impressions per statistical check): bounds the memory of the samples
MAX_N = 10_000_000
#: at most this many impressions per scenario are credited by both candidate and reference (exact check)
CREDIT_AGREEMENT_ROWS = 1000
#: absolute tolerance of the credit agreement on real-valued scales
VALUE_TOLERANCE = 1e-9
#: probability that the user of ``better_ranker_wins`` clicks a relevant shown document
BETTER_CLICK_PROB = 0.7
#: at least this many impressions per scenario in ``better_ranker_wins``, whatever ``n``: the check must reject,
#: so its failure is a false failure of a correct implementation. With ``n // 4`` alone a correct team-draft
#: multileaver failed it in 11.9% of 2000 runs at n = 100 (50 per scenario) and 1.3% at n = 300 (75), above the
#: battery's alpha; at 250: 0 of 2000, largest p 1.1e-9 (level 0.00167)
BETTER_MIN_PER_SCENARIO = 250


def _pair_name(m: int, j: int, i: int) -> str:
    return "B over A" if m == 2 else f"ranker {j} over ranker {i}"


def _position_clicks(k: int) -> NDArray[np.float64]:
    return 0.9 / np.arange(1, k + 1)


def _pooled(values: Sequence[NDArray[np.float64]]) -> dict[tuple[int, int], NDArray[np.float64]]:
    """Per pair ``(j, i)``, the values ``pref[:, j, i]`` pooled over the scenarios that have both rankers."""
    out: dict[tuple[int, int], list[NDArray[np.float64]]] = {}
    for v in values:
        for j, i in _pairs(v.shape[1]):
            out.setdefault((j, i), []).append(v[:, j, i])
    return {key: np.concatenate(parts) for key, parts in out.items()}


def _value_test(v: NDArray[np.float64], scale: str, alternative: str = "two-sided") -> float:
    if scale == SIGN:
        return sign_test(np.sign(v), alternative)[0]
    return t_test(v, alternative)


def validate_interleaver(candidate: Candidate, method: str = "team_draft", *, n: int = 60_000,
                         alpha: float = 0.01, seed: int = 0, options: dict[str, Any] | None = None,
                         click_prob: float = 0.3, timeout: float | None = DEFAULT_TIMEOUT) -> ValidationReport:
    """Run the battery on ``candidate`` against onlineeval's ``method``.

    Parameters
    ----------
    candidate:
        From :func:`~onlineeval.interleaving.validation.load_candidate` or
        :func:`~onlineeval.interleaving.validation.reference_candidate`.
    method:
        The method the candidate claims to implement (a registry name);
        ``team_draft_multileave`` and ``probabilistic_multileave`` run the multileaving
        battery (three and four rankers).
    n:
        Impressions per statistical check, split over the scenarios (default 60000: a
        2% bias in probabilistic interleaving's mean expected outcome under random clicks
        is detected with power above 0.999, a 1% bias with power about 0.8, a 4-point
        shift of one position's team share with power above 0.999 (exact reference); see the
        module docstring). A per-impression candidate's
        interleave() is called about ``4 n`` to ``6 n`` times (``2 n`` more for team-draft's
        ``coin_no_preference``, on lists of three and four; the long-list scenarios take their share of
        ``n``, on lists of 12-20 documents); lower ``n`` for slow
        implementations (``better_ranker_wins`` draws at least
        :data:`BETTER_MIN_PER_SCENARIO` impressions per scenario whatever ``n``).
    alpha:
        Level of the whole battery (default 0.01), split over its statistical checks.
    seed:
        Seed of all randomness (candidate and reference use independent streams).
    options:
        Options of the reference method.
    click_prob:
        Per-slot click probability of the document-blind user (default 0.3).
    timeout:
        Seconds one candidate call may take (default 10; ``None`` or 0: no limit). POSIX
        main thread only; see :mod:`~onlineeval.interleaving.validation.guard`.

    Raises
    ------
    ConfigError
        For ``alpha`` outside [1e-12, 1), ``n`` outside ``100..10^7``, a negative ``seed``,
        ``click_prob`` outside (0, 1), a negative ``timeout``, an unknown method or option.
    CandidateError
        When a candidate call raises, exits, times out or returns malformed output; its
        ``report`` holds the checks completed before, the failing row
        (``candidate_exception``, ``candidate_exit``, ``candidate_timeout`` or
        ``candidate_output``) and the checks not run (exit code 1).
    """
    # [1e-12, 1): below it better_ranker_wins, which must reject at alpha / checks, fails a correct implementation
    # (at alpha 1e-300 and n 100 its p of 1e-125 is above the level)
    significance_level(alpha)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 100 <= n <= MAX_N:
        raise ConfigError(("n",), f"must be an integer of at least 100 and at most {MAX_N:,}, got {n!r}")
    check_seed(seed)
    if not 0 < click_prob < 1:
        raise ConfigError(("click_prob",), f"must be in (0, 1), got {click_prob!r}")
    timeout = check_timeout(timeout)
    spec = method_spec(method)
    ref_il = get_interleaver(method, **(options or {}))
    ref = BatchCandidate(f"onlineeval:{method}", ref_il, trusted=True)
    seeds = np.random.SeedSequence(seed).spawn(4)
    rng_c, rng_r, rng_clk, rng_x = (np.random.default_rng(s) for s in seeds)
    if spec.multileave:
        equiv, fidelity, better = ML_EQUIVALENCE_SCENARIOS, ML_FIDELITY_SCENARIOS, ML_BETTER_SCENARIOS
    else:
        equiv, fidelity, better = EQUIVALENCE_SCENARIOS, FIDELITY_SCENARIOS, BETTER_SCENARIOS
    # the long-list scenarios are added, each with as many impressions as a short one: the short ones keep
    # n / len(short scenarios) each (the sizes and powers of the module docstring)
    long = _long_scenarios(spec)
    per = max(50, n // len(equiv))
    per_fid = max(50, n // len(fidelity))
    per_better = max(BETTER_MIN_PER_SCENARIO, n // (4 * len(better)))
    n_short_fid = len(fidelity)
    equiv, fidelity = equiv + long, fidelity + long
    planned = planned_calls(spec, n, per, per_fid, per_better, len(equiv), len(fidelity), len(better),
                            min(per, CREDIT_AGREEMENT_ROWS))
    checks: list[CheckResult] = []
    mode = "multileaving" if spec.multileave else "interleaving"
    conv = conventions(spec, n=n, click_prob=click_prob, seed=seed, options=ref_il.options, timeout=timeout,
                       told=getattr(candidate, "takes_length", None))
    stages = _stage_names(spec)
    stage = 0
    if isinstance(candidate, ProtocolCandidate):  # lists shown whole: a longer draw is cut to the page, as documented
        candidate.cut_whole = spec.name != "optimized"
    inputs = {"candidate": candidate.sources()}
    settings = {"mode": mode, "method": method, "options": dict(ref_il.options), "n": int(n), "alpha": alpha,
                "seed": int(seed), "click_prob": click_prob, "timeout": timeout}
    try:
        with watchdog(timeout):
            progress_plan(sum(planned))
            progress_stage(stages[0], 0, len(stages))
            cand = [candidate.sample(sc, per, rng_c, page_length(sc)) for sc in equiv]
            exact = [exact_draws(ref_il, sc, page_length(sc)) for sc in equiv]
            # a reference sample is needed for credit_agreement's rows, and in full where no exact one exists
            refs = [ref.sample(sc, per if ex is None or not outcomes_exact(ex) else min(per, CREDIT_AGREEMENT_ROWS),
                               rng_r, page_length(sc)) for sc, ex in zip(equiv, exact)]
            one_based = _one_based(equiv, cand)
            if one_based:  # credit_agreement is skipped
                progress_plan(sum(planned) - planned[5])
            checks.extend(_invariants(spec, equiv, cand, one_based))
            stage += 1
            progress_stage(stages[stage], stage, len(stages))
            checks.append(_aa(candidate, spec, fidelity, per_fid, click_prob, alpha, rng_c, rng_clk))
            stage += 1
            progress_stage(stages[stage], stage, len(stages))
            checks.extend(_random_clicks(candidate, spec, fidelity, per_fid, click_prob, alpha, rng_c, rng_clk,
                                         n_short_fid))
            stage += 1
            progress_stage(stages[stage], stage, len(stages))
            checks.append(_better(candidate, spec, better, per_better, alpha, rng_c, rng_clk))
            stage += 1
            progress_stage(stages[stage], stage, len(stages))
            dist = _distributions(equiv, cand, refs, ref_il.options.get("tau"), exact)
            checks.extend(_label_skipped(c.name) if one_based and c.name == "team_distribution" else c
                          for c in dist)
            stage += 1
            progress_stage(stages[stage], stage, len(stages))
            checks.append(_label_skipped("credit_agreement") if one_based else
                          _credit_agreement(candidate, ref, spec, equiv, refs, click_prob, rng_x))
            stage += 1
            progress_stage(stages[stage], stage, len(stages))
            checks.append(_outcome_distribution(candidate, ref, spec, equiv, cand, refs, click_prob, rng_clk,
                                                rng_x, exact))
            stage += 1
            progress_stage(stages[stage], stage, len(stages))
            if not spec.multileave:
                checks.extend(_documented(candidate, spec, per, rng_c, rng_clk))
                if spec.prefix_balanced:
                    checks.append(_coin(candidate, spec, n, rng_c))
    except CandidateError as exc:
        exc.report = stamped(ValidationReport(candidate.name, method, _failed(checks, exc, stages, stage, alpha),
                                              alpha, conv, mode), inputs, settings)
        raise
    return stamped(ValidationReport(candidate.name, method, finalize(checks, alpha), alpha, conv, mode), inputs,
                   settings)


def _stage_names(spec: MethodSpec) -> list[tuple[str, ...]]:
    """The check names of each stage of the battery, in order."""
    rc = ("random_clicks_no_preference",) + ((spec.zero_mean_check,) if spec.zero_mean_check else ())
    documented: tuple[str, ...] = ()
    if not spec.multileave:
        documented = (("documented: balanced bias",) if spec.name == "balanced" else ()) + \
            (("coin_no_preference",) if spec.prefix_balanced else ())
    return [("structure",) + (("prefix_balance",) if spec.prefix_balanced else ()), ("aa_no_preference",), rc,
            ("better_ranker_wins",), ("team_distribution", "document_distribution"), ("credit_agreement",),
            ("outcome_distribution",), documented]


def _failed(checks: list[CheckResult], exc: CandidateError, stages: list[tuple[str, ...]], stage: int,
            alpha: float) -> tuple[CheckResult, ...]:
    """The report rows of a run stopped by a failed candidate call: checks done, the failure, checks not run."""
    during = ", ".join(stages[stage]) if stage < len(stages) and stages[stage] else "the battery"
    row = CheckResult(exc.check, FAIL, "failed call", None, f"during {during}: {exc.call} {exc.detail}",
                      rule="exact")
    skipped = [CheckResult(name, SKIPPED, "not run", None, f"not run: the candidate failed ({exc.check})",
                           rule="skipped") for names in stages[stage:] for name in names]
    return finalize(checks, alpha) + (row,) + tuple(skipped)


# ----------------------------------------------------------------------------- checks
#: the structure row's lead when the candidate's team labels are 1-based
ONE_BASED = "team labels look 1-based (every label in 1..{m}); they must be ranker indices 0..{m1} (0 = lists[0])"


def _one_based(scenarios: Sequence[Lists], samples: Sequence[Sample]) -> bool:
    """Every team label of every shown slot lies in ``1..m`` and some label is ``m``: a 1-based convention."""
    top = False
    for sc, s in zip(scenarios, samples):
        t = s.teams[(s.shown >= 0) & (s.teams != -1)]
        if t.size and (int(t.min()) < 1 or int(t.max()) > len(sc)):
            return False
        top |= bool((t == len(sc)).any())
    return top


def _label_skipped(name: str) -> CheckResult:
    """A check that depends on the team labels, not run when they look 1-based (``structure`` says so)."""
    return CheckResult(name, SKIPPED, "not run", None, "not run: it depends on the team labels, which look 1-based "
                       "(see structure)", rule="skipped")


def _invariants(spec: MethodSpec, scenarios: Sequence[Lists], samples: Sequence[Sample],
                one_based: bool = False) -> list[CheckResult]:
    struct: list[str] = []
    prefix: list[str] = []
    for sc, s in zip(scenarios, samples):
        rk = pad_lists(sc, s.n)
        page = np.full(s.n, min(page_length(sc) or max(len(x) for x in sc), int(union_sizes(rk[:, :1])[0])))
        label = f"lists {[list(x) for x in sc]}"
        struct += [f"{label}: {msg}" if msg else "" for msg in
                   structure_violations(rk, s.shown, s.teams, page, spec.team_holds_doc, s.bad_length)]
        if spec.prefix_balanced:
            prefix += [f"{label}: {msg}" if msg else "" for msg in prefix_violations(rk, s.shown, s.teams)]
    out = [_exact_from("structure", struct, "interleavings violate the invariants")]
    if one_based:
        m = max(len(sc) for sc in scenarios)
        out[0] = replace(out[0], message=ONE_BASED.format(m=m, m1=m - 1) + ": " + out[0].message)
    if spec.prefix_balanced:
        out.append(_label_skipped("prefix_balance") if one_based else
                   _exact_from("prefix_balance", prefix, "interleavings have an unbalanced prefix"))
    return out


def _exact_from(name: str, messages: Sequence[str], what: str) -> CheckResult:
    bad = [m for m in messages if m]
    return exact_check(name, len(bad), len(messages), what, bad[0] if bad else "")


def _values(candidate: Candidate, spec: MethodSpec, lists: Lists, sample: Sample,
            clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
    return candidate.values(lists, sample.shown, sample.teams, clicks, spec.scale)


def _aa(candidate: Candidate, spec: MethodSpec, scenarios: Sequence[Lists], per: int, click_prob: float,
        alpha: float, rng: np.random.Generator, rng_clk: np.random.Generator) -> CheckResult:
    m = max(len(sc) for sc in scenarios)
    vals = []
    for sc in scenarios:
        lists = (sc[0],) * len(sc)
        s = candidate.sample(lists, per, rng, page_length(lists))
        vals.append(_values(candidate, spec, lists, s, _clicks(s, click_prob, rng_clk)))
    if spec.aa_always_tie:
        decided = np.concatenate([(np.sign(v) != 0).any(axis=(1, 2)) for v in vals])
        return exact_check("aa_no_preference", int(decided.sum()), int(decided.size),
                           f"impressions of identical rankers are not a tie (every impression must tie under "
                           f"{spec.name}; a float-comparison or tie-credit bug?)")
    pvals, parts, counts = [], [], {"wins": 0, "losses": 0, "ties": 0}
    for (j, i), v in _pooled(vals).items():
        p, c = sign_test(np.sign(v))
        pvals.append(p)
        counts = {k: counts[k] + c[k] for k in counts}
        parts.append(f"{_pair_name(m, j, i)}: wins {c['wins']}, losses {c['losses']}, ties {c['ties']}")
    pb = bonferroni(pvals)
    stat = "sign test p-value" + (f", Bonferroni over {len(pvals)} pairs" if len(pvals) > 1 else "")
    return CheckResult("aa_no_preference", PENDING, stat, pb,
                       "identical rankers, random clicks: " + "; ".join(parts), counts=counts, rule="null")


def _random_clicks(candidate: Candidate, spec: MethodSpec, scenarios: Sequence[Lists], per: int,
                   click_prob: float, alpha: float, rng: np.random.Generator,
                   rng_clk: np.random.Generator, n_short: int | None = None) -> list[CheckResult]:
    """The random-click checks; a DOCUMENTED sign test (a method whose sign is biased) pools the first ``n_short``
    scenarios only (the lists shown whole, where the documented bias is measured), a null one all of them."""
    m = max(len(sc) for sc in scenarios)
    uniform: list[NDArray[np.float64]] = []
    for sc in scenarios:
        s = candidate.sample(sc, per, rng, page_length(sc))
        uniform.append(_values(candidate, spec, sc, s, _clicks(s, click_prob, rng_clk)))
    pvals, parts, counts = [], [], {"wins": 0, "losses": 0, "ties": 0}
    signed = uniform if spec.sign_bias is None or n_short is None else uniform[:n_short]
    for (j, i), v in _pooled(signed).items():
        p, c = sign_test(np.sign(v))
        pvals.append(p)
        counts = {k: counts[k] + c[k] for k in counts}
        share = (c["wins"] - c["losses"]) / max(1, v.size)
        parts.append(f"{_pair_name(m, j, i)}: wins {c['wins']}, losses {c['losses']}, ties {c['ties']} "
                     f"(mean sign {share:+.4f})")
    pb = bonferroni(pvals)
    stat = "sign test p-value" + (f", Bonferroni over {len(pvals)} pairs" if len(pvals) > 1 else "")
    detail = f"random clicks (p = {click_prob:g} per slot): " + "; ".join(parts)
    if len(signed) < len(uniform):
        detail += f" (the {len(signed)} scenarios of lists shown whole)"
    out = []
    if spec.sign_bias is None:
        out.append(CheckResult("random_clicks_no_preference", PENDING, stat, pb, detail, counts=counts,
                               rule="null"))
    else:
        out.append(CheckResult("random_clicks_no_preference", DOCUMENTED, stat, pb,
                               detail + "; " + spec.sign_bias, counts=counts, rule="documented"))
    if spec.zero_mean_check:
        tests: list[float] = []
        means: list[str] = []
        by_model = [(f"p = {click_prob:g}", uniform)]
        pos_vals = []
        for sc in scenarios:
            s = candidate.sample(sc, per, rng, page_length(sc))
            pos_vals.append(_values(candidate, spec, sc, s, _clicks(s, _position_clicks(s.shown.shape[1]), rng_clk)))
        by_model.append(("0.9/rank", pos_vals))
        worst = ("", 1.0)
        for model, per_scenario in by_model:
            for si, vals in enumerate(per_scenario):
                for j, i in _pairs(vals.shape[1]):
                    x = vals[:, j, i]
                    p = t_test(x)
                    tests.append(p)
                    if p < worst[1]:
                        worst = ((f"scenario {si + 1}, {model}, {_pair_name(m, j, i)}: mean {float(x.mean()):+.5f} "
                                 f"(SE {float(x.std(ddof=1)) / np.sqrt(x.size):.5f})"), p)
            pooled = _pooled(per_scenario)
            for (j, i), x in pooled.items():           # the scenarios together: most power for a common bias
                p = t_test(x)
                tests.append(p)
                if p < worst[1]:
                    worst = ((f"all scenarios, {model}, {_pair_name(m, j, i)}: mean {float(x.mean()):+.5f} "
                             f"(SE {float(x.std(ddof=1)) / np.sqrt(x.size):.5f})"), p)
            means.append(f"{model}: mean " + ", ".join(f"{float(x.mean()):+.5f}" for x in pooled.values()))
        pz = bonferroni(tests)
        what = "credit_B - credit_A" if spec.scale == CREDIT else "P(B wins) - P(A wins)"
        if m > 2:
            what = "pairwise " + spec.scale
        out.append(CheckResult(
            spec.zero_mean_check, PENDING,
            f"t-test p-value, Bonferroni over {len(tests)}", pz,
            f"clicks blind to the documents; {what} per impression, " + "; ".join(means)
            + f" ({len(scenarios)} scenarios x {per} impressions per click model); informational, on every row: "
            f"the smallest of its p-values at {worst[0]}",
            counts={"impressions": int(sum(len(x) for _, xs in by_model for x in xs)), "tests": len(tests)},
            rule="null"))
    return out


def _better(candidate: Candidate, spec: MethodSpec, scenarios: Sequence[tuple[Lists, frozenset[int]]], per: int,
            alpha: float, rng: np.random.Generator, rng_clk: np.random.Generator) -> CheckResult:
    m = len(scenarios[0][0])
    vals = []
    for lists, relevant in scenarios:
        s = candidate.sample(lists, per, rng)
        rel = np.isin(s.shown, np.asarray(sorted(relevant)))
        clicks = rel & (rng_clk.random(s.shown.shape) < BETTER_CLICK_PROB)
        vals.append(_values(candidate, spec, lists, s, clicks))
    v = np.concatenate(vals)
    pvals, parts = [], []
    counts = {"wins": 0, "losses": 0, "ties": 0}
    for j, i in _pairs(m):
        p = _value_test(v[:, j, i], spec.scale, "greater")
        _, c = sign_test(np.sign(v[:, j, i]))
        counts = {k: counts[k] + c[k] for k in counts}
        pvals.append(p)
        extra = "" if spec.scale == SIGN else f", mean {spec.scale} {float(v[:, j, i].mean()):+.4f}"
        parts.append(f"{_pair_name(m, j, i)}: wins {c['wins']}, losses {c['losses']}, ties {c['ties']}{extra}")
    pmax = max(pvals)
    test = "sign test" if spec.scale == SIGN else "t-test"
    stat = f"one-sided {test} p-value" + (f" (largest of {len(pvals)} pairs)" if len(pvals) > 1 else "")
    lead = ("B lifts the clicked documents" if m == 2
            else "each later ranker lifts the clicked documents higher")
    return CheckResult("better_ranker_wins", PENDING, stat, pmax,
                       f"{lead}: " + "; ".join(parts) + " (passes when p < level)", counts=counts, rule="power")


def _credit_agreement(candidate: Candidate, ref: BatchCandidate, spec: MethodSpec, scenarios: Sequence[Lists],
                      refs: Sequence[Sample], click_prob: float, rng: np.random.Generator) -> CheckResult:
    total = viol = 0
    example = ""
    seen: list[tuple[Lists, Sample, NDArray[np.bool_], NDArray[np.float64]]] = []
    for sc, rs in zip(scenarios, refs):
        rows = min(rs.n, CREDIT_AGREEMENT_ROWS)
        s = Sample(rs.shown[:rows], rs.teams[:rows], rs.bad_length[:rows])
        clicks = _clicks(s, click_prob, rng)
        want = ref.values(sc, s.shown, s.teams, clicks, spec.scale)
        got = candidate.values(sc, s.shown, s.teams, clicks, spec.scale)
        bad = (np.sign(got) != np.sign(want)).any(axis=(1, 2))
        if spec.scale != SIGN:
            bad |= (np.abs(got - want) > VALUE_TOLERANCE * np.maximum(1.0, np.abs(want))).any(axis=(1, 2))
        total += rows
        viol += int(bad.sum())
        seen.append((sc, s, clicks, got))
        if bad.any() and not example:
            r = int(np.flatnonzero(bad)[0])
            keep = s.shown[r] >= 0
            m = len(sc)
            pair = [(j, i) for j, i in _pairs(m) if got[r, j, i] != want[r, j, i]] or _pairs(m)
            j, i = pair[0]
            example = (f"lists {[list(x) for x in sc]}, shown {s.shown[r][keep].tolist()}, teams "
                       f"{s.teams[r][keep].tolist()}, clicks {clicks[r][keep].astype(int).tolist()}: "
                       f"{_pair_name(m, j, i)} candidate {got[r, j, i]:+.6g}, reference {want[r, j, i]:+.6g}")
    hint = {SIGN: "outcomes (signs)", EXPECTED: "expected outcomes (credit() must return P(B wins) - P(A wins), "
            "not its sign)", CREDIT: "credit differences (credit() must return the credits per ranker)"}
    what = f"{hint[spec.scale]} differ from the reference on the same input"
    tau = ref.interleaver.options.get("tau") if viol else None
    if isinstance(tau, (int, float)) and spec.scale == EXPECTED:
        values = np.concatenate([g.ravel() for *_, g in seen])
        if not np.all(np.isin(values, (-1.0, 0.0, 1.0))):    # not only signs: the sign hint is not the cause
            what = "expected outcomes differ from the reference on the same input"
            fit = _fit_tau(ref, spec, seen)
            if fit is not None:
                what += (f"; they equal the reference's with tau = {fit[0]:.4g} on every row (largest difference "
                         f"{fit[1]:.1g}): the candidate's softmax uses tau {fit[0]:.4g}, the reference's {tau:g}; "
                         f"pass --option tau={fit[0]:.4g} if that is intended")
            else:
                what += (f" (values on the expected-outcome scale, but no reference tau in {TAU_GRID[0]:g}..."
                         f"{TAU_GRID[-1]:g} reproduces them: not a softmax temperature (reference {tau:g}) alone)")
    return exact_check("credit_agreement", viol, total, what, example)


#: tau values tried first by :func:`_fit_tau` (then refined around the best)
TAU_GRID = tuple(np.round(np.arange(0.25, 8.01, 0.25), 2))


def _fit_tau(ref: BatchCandidate, spec: MethodSpec, seen: Sequence[tuple[Lists, Sample, NDArray[np.bool_],
                                                                            NDArray[np.float64]]]
             ) -> tuple[float, float] | None:
    """The reference's ``tau`` whose expected outcomes equal the candidate's on every row, if there is one.

    A grid, then a bounded scalar minimisation of the largest absolute difference around the
    best grid point; ``(tau, largest difference)`` when that difference is below 1e-6, else ``None``.
    """
    from scipy.optimize import minimize_scalar

    opts = dict(ref.interleaver.options)

    def gap(t: float) -> float:
        other = BatchCandidate("tau", get_interleaver(spec.name, **{**opts, "tau": float(t)}), trusted=True)
        return max(float(np.max(np.abs(other.values(sc, s.shown, s.teams, c, spec.scale) - g)))
                   for sc, s, c, g in seen)

    grid = [(gap(t), float(t)) for t in TAU_GRID]
    best_gap, best = min(grid)
    if best_gap > 1e-6:
        step = TAU_GRID[1] - TAU_GRID[0]
        res = minimize_scalar(gap, bounds=(max(1e-3, best - step), best + step), method="bounded",
                              options={"xatol": 1e-10})
        best_gap, best = float(res.fun), float(res.x)
    return (best, best_gap) if best_gap < 1e-6 else None


def _documented(candidate: Candidate, spec: MethodSpec, n: int, rng: np.random.Generator,
                rng_clk: np.random.Generator) -> list[CheckResult]:
    """Known counter-examples of the declared method, measured on the candidate."""
    out: list[CheckResult] = []
    lists: Lists = ((1, 2, 3), (2, 3, 4))
    if spec.name == "balanced":
        s = candidate.sample(lists, n, rng)
        shown_n = (s.shown >= 0).sum(axis=1)
        ok = shown_n > 0
        pos = (rng_clk.random(s.n) * np.maximum(shown_n, 1)).astype(np.int64)
        clicks = (np.arange(s.shown.shape[1])[None, :] == pos[:, None]) & ok[:, None]
        o = np.sign(_values(candidate, spec, lists, s, clicks)[:, 1, 0])[ok]
        wins = int((o > 0).sum())
        p = float(stats.binomtest(wins, o.size, 2 / 3).pvalue) if o.size else 1.0
        out.append(CheckResult("documented: balanced bias", DOCUMENTED, "binomial test p-value (B share = 2/3)", p,
                               f"A=(1,2,3), B=(2,3,4), one uniformly random click: B wins "
                               f"{wins / max(o.size, 1):.3f} of impressions (2/3 on the three shown documents; "
                               "3/4 when k = 4)", counts={"wins": wins, "total": int(o.size)},
                               rule="documented"))
    return out


#: the scenarios of :func:`_coin`: round 1's coin (only slot 1 clicked; the lists' first documents differ) and
#: round 2's (``A=(1,2,3)``, ``B=(2,3,4)``, only document 3 clicked)
COIN1_LISTS: Lists = ((1, 2, 3, 4), (2, 1, 4, 3))
COIN_LISTS: Lists = ((1, 2, 3), (2, 3, 4))


def _coin(candidate: Candidate, spec: MethodSpec, n: int, rng: np.random.Generator) -> CheckResult:
    """Team-draft's round coins, seen where nothing else decides: sign tests of the mean outcome 0.

    Round 1: on ``A=(1,2,3,4)``, ``B=(2,1,4,3)`` with only slot 1 clicked, the outcome is the team of
    slot 1, the round-1 coin (who takes the top slot, the one most users click). Round 2: on
    ``A=(1,2,3)``, ``B=(2,3,4)`` with only document 3 clicked (B ranks it higher, which team-draft
    cannot see), round 1 shows 1 and 2 and document 3 goes to the team that picks first in round 2.
    For a correct team-draft each outcome is a fair coin (exact null, no approximation at any ``n``);
    ``n`` impressions each, the two sign tests Bonferroni-combined. A biased coin shifts the mean by
    twice the bias on every impression, the most sensitive view of it.
    """
    parts, pvals = [], []
    counts = {"wins": 0, "losses": 0, "ties": 0}
    per_round: dict[str, int] = {}
    for rnd, lists in ((1, COIN1_LISTS), (2, COIN_LISTS)):
        s = candidate.sample(lists, n, rng)
        clicks = np.zeros(s.shown.shape, dtype=bool)
        if rnd == 1:
            clicks[:, 0] = s.shown[:, 0] >= 0
            what = "A=(1,2,3,4), B=(2,1,4,3), only slot 1 clicked (its team is the round-1 coin)"
        else:
            clicks = s.shown == 3
            what = ("A=(1,2,3), B=(2,3,4), only document 3 clicked (B ranks it higher; team-draft cannot see it, "
                    "so the outcome is the round-2 coin)")
        o = np.sign(_values(candidate, spec, lists, s, clicks)[:, 1, 0])
        p, c = sign_test(o)
        pvals.append(p)
        counts = {k: counts[k] + c[k] for k in counts}
        per_round.update({f"{k}_round{rnd}": v for k, v in c.items()})
        parts.append(f"round {rnd}: {what}: mean outcome {o.mean():+.4f} over {o.size} impressions (expected 0), "
                     f"wins {c['wins']}, losses {c['losses']}, ties {c['ties']}, p {p:.3g}")
    return CheckResult("coin_no_preference", PENDING, "sign test p-value, Bonferroni over 2 rounds' coins",
                       bonferroni(pvals), "; ".join(parts), counts={**counts, **per_round}, rule="null")
