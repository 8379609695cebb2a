"""Validation harness: check a team's own interleaving implementation (or its logs) before production.

The protocol a candidate implements (a class with a no-argument constructor, or a
module with two functions)::

    interleave(lists, rng) -> (shown, teams)
        lists: list of input rankings (lists of int document ids; lists[0] = A, lists[1] = B)
        rng:   numpy.random.Generator (use it for every random choice)
        shown: list of shown document ids; teams: the ranker index credited for each slot
    credit(shown, teams, clicks[, lists=lists]) -> outcome
        clicks: list of bool, one per shown slot
        outcome: a number whose sign says who wins (> 0: B = lists[1], < 0: A, 0: tie),
                 or a pair (credit_A, credit_B)
        methods whose credit needs the input rankings (probabilistic, optimized, balanced)
        declare a ``lists`` keyword parameter and receive the input lists;
        optimized interleaving returns the pair (credit_A, credit_B): its guarantee (zero
        expected credit difference under random clicks) is checked on that scale.

:func:`validate_interleaver` runs a battery of checks against onlineeval's reference
implementation of the declared method, each with a p-value (exact checks report 1 when
they hold and 0 when violated); :func:`validate_log` checks production logs (one JSON
object per line with ``rankings``, ``shown``, ``teams``, ``clicks`` and optionally
``outcome``). Known properties of a method (e.g. balanced interleaving's bias under
random clicks) are reported as ``documented`` and never fail the run.

Checks (``validate_interleaver``):

* ``structure``: every shown document comes from an input list, no duplicates, team
  labels are valid rankers (and, where the method says so, the team's list holds the document);
* ``prefix_balance`` (team-draft): every prefix has team counts differing by at most one
  while both lists have unused documents;
* ``aa_no_preference``: identical rankers, random clicks: the sign test of wins against
  losses; methods whose A/A outcome is always a tie must report only ties (this catches
  float-tie bugs);
* ``random_clicks_no_preference`` (fidelity, Hofmann et al. 2011): clicks independent
  of documents and positions give no preference (sign test);
* ``random_clicks_zero_credit`` (optimized): clicks blind to the documents with probability
  0.9 / rank give a mean credit difference of zero (one-sample t-test per scenario,
  Bonferroni), Radlinski & Craswell's guarantee;
* ``better_ranker_wins`` (fidelity): a ranker that puts the clicked documents higher
  wins (one-sided sign test);
* ``team_distribution`` and ``document_distribution``: per position, the distribution of
  team labels and of shown documents agrees with the reference (chi-square tests of
  homogeneity, Bonferroni-combined over positions and scenarios);
* ``credit_agreement``: on identical (shown, teams, clicks) the candidate's outcome
  equals the reference's (exact);
* ``outcome_distribution``: end to end, the distribution of win/loss/tie agrees with
  the reference (chi-square);
* ``documented: ...``: the method's known counter-example, measured.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from onlineeval.errors import ConfigError, InputError
from onlineeval.interleaving.base import Interleaver, InterleavingResult, stack_rankings
from onlineeval.interleaving.checks import TEAM_HOLDS_DOCUMENT
from onlineeval.interleaving.registry import get_interleaver

__all__ = [
    "Candidate",
    "CheckResult",
    "LogRecord",
    "ValidationReport",
    "load_candidate",
    "read_log",
    "reference_candidate",
    "validate_interleaver",
    "validate_log",
]

PASS, FAIL, DOCUMENTED, SKIPPED = "pass", "fail", "documented", "skipped"

#: input pairs used for structure and equivalence checks (duplicates, shared prefix, disjoint, unequal lengths)
EQUIVALENCE_SCENARIOS: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((1, 2, 3, 4, 5, 6), (2, 1, 4, 3, 6, 5)),
    ((1, 2, 3, 4, 5, 6), (6, 5, 4, 3, 2, 1)),
    ((1, 2, 3, 4, 5, 6), (7, 1, 8, 2, 9, 3)),
    ((1, 2, 3, 4, 5, 6), (1, 2, 6, 5, 4, 3)),
    ((1, 2, 3, 4, 5, 6), (7, 8, 9, 10, 11, 12)),
    ((1, 2, 3, 4), (2, 3, 4, 5, 6, 7)),
    ((1, 2, 3, 4, 5), (1, 2, 3, 5, 4)),       # long shared prefix: many exact ties
)
#: equal-length pairs for the fidelity checks
FIDELITY_SCENARIOS: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = (
    ((1, 2, 3, 4, 5, 6), (6, 5, 4, 3, 2, 1)),
    ((1, 2, 3, 4, 5, 6), (2, 3, 4, 5, 6, 7)),
    ((1, 2, 3, 4, 5, 6), (7, 1, 8, 2, 9, 3)),
)
#: (A, B, relevant documents): B lifts the relevant documents to the top
BETTER_SCENARIOS: tuple[tuple[tuple[int, ...], tuple[int, ...], frozenset[int]], ...] = (
    ((1, 2, 3, 4, 5, 6, 7, 8), (5, 7, 1, 2, 3, 4, 6, 8), frozenset({5, 7})),
    ((1, 2, 3, 4, 5, 6), (3, 1, 2, 4, 5, 6), frozenset({3})),
)

#: methods whose outcome on identical rankers is always a tie
_AA_ALWAYS_TIE = frozenset({"balanced", "probabilistic", "probabilistic_multileave", "optimized"})
_PREFIX_BALANCED = frozenset({"team_draft", "team_draft_multileave"})
#: relative tolerance under which a returned pair (credit_A, credit_B) counts as a tie
PAIR_TIE_TOLERANCE = 1e-9
#: methods whose unbiasedness is on the credit scale: the candidate's credit pair is tested directly
_CREDIT_SCALE = frozenset({"optimized"})
#: methods whose win/loss outcome is biased under random clicks by design (reported as documented)
_RANDOM_CLICK_BIASED = {
    "balanced": "balanced interleaving is known to be biased under random clicks",
    "optimized": "optimized interleaving is unbiased on the credit scale (onlineeval's expected_outcome); "
                 "the sign of the credit difference is not constrained",
}


# --------------------------------------------------------------------------- records
@dataclass(frozen=True)
class CheckResult:
    """One check: its status (``pass``, ``fail``, ``documented``, ``skipped``), p-value and detail."""

    name: str
    status: str
    p_value: float | None
    detail: str

    @property
    def failed(self) -> bool:
        """True when the check failed."""
        return self.status == FAIL


@dataclass(frozen=True)
class ValidationReport:
    """All checks of one validation run."""

    subject: str
    method: str
    checks: tuple[CheckResult, ...]
    alpha: float
    conventions: str = ""

    @property
    def passed(self) -> bool:
        """True when no check failed (documented behaviour does not count as failure)."""
        return not any(c.failed for c in self.checks)

    def format(self) -> str:
        """A readable plain-text report."""
        lines = [f"validation of {self.subject} against onlineeval's {self.method!r} (alpha = {self.alpha:g})"]
        if self.conventions:
            lines.append("conventions: " + self.conventions)
        lines.append("")
        width = max(len(c.name) for c in self.checks) if self.checks else 10
        lines.append(f"{'check':<{width}}  {'status':<10}  {'p-value':>9}  detail")
        for c in self.checks:
            p = "-" if c.p_value is None else f"{c.p_value:9.3g}"
            lines.append(f"{c.name:<{width}}  {c.status.upper():<10}  {p:>9}  {c.detail}")
        n_fail = sum(c.failed for c in self.checks)
        lines.append("")
        lines.append("RESULT: " + ("PASS" if self.passed else f"FAIL ({n_fail} check{'s' if n_fail != 1 else ''} failed)"))
        return "\n".join(lines)


@dataclass
class Candidate:
    """An implementation under test, adapted to the protocol in the module docstring."""

    name: str
    interleave_fn: Callable[..., Any]
    credit_fn: Callable[..., Any]
    wants_lists: bool = field(default=False)

    def interleave(self, lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        try:
            out = self.interleave_fn([list(x) for x in lists], rng)
        except Exception as exc:  # noqa: BLE001 - user code: report it in one line
            raise InputError(f"{self.name}: interleave({lists}) raised {type(exc).__name__}: {exc}") from None
        try:
            shown, teams = out
            return [int(d) for d in shown], [int(t) for t in teams]
        except (TypeError, ValueError):
            raise InputError(f"{self.name}: interleave() must return (shown, teams) lists of ints, got {out!r}") \
                from None

    def outcome(self, lists: list[list[int]], shown: list[int], teams: list[int], clicks: list[bool]) -> int:
        """The sign of :meth:`score`: ``+1`` B wins, ``-1`` A wins, ``0`` tie."""
        return int(np.sign(self.score(lists, shown, teams, clicks)))

    def score(self, lists: list[list[int]], shown: list[int], teams: list[int], clicks: list[bool]) -> float:
        """What ``credit`` returned, as one number: ``credit_B - credit_A`` for a pair, else the number itself."""
        try:
            if self.wants_lists:
                out = self.credit_fn(list(shown), list(teams), list(clicks), lists=[list(x) for x in lists])
            else:
                out = self.credit_fn(list(shown), list(teams), list(clicks))
        except Exception as exc:  # noqa: BLE001 - user code: report it in one line
            raise InputError(f"{self.name}: credit({shown}, {teams}, {clicks}) raised "
                             f"{type(exc).__name__}: {exc}") from None
        if isinstance(out, (tuple, list, np.ndarray)) and len(out) == 2:
            ca, cb = float(out[0]), float(out[1])
            val = cb - ca
            # the harness takes this difference, so it owns its rounding: equal sums in another order tie
            if abs(val) <= PAIR_TIE_TOLERANCE * max(1.0, abs(ca), abs(cb)):
                val = 0.0
        else:
            try:
                val = float(out)
            except (TypeError, ValueError):
                raise InputError(f"{self.name}: credit() must return a number or (credit_A, credit_B), "
                                 f"got {out!r}") from None
        if not np.isfinite(val):
            raise InputError(f"{self.name}: credit() returned a non-finite value {out!r}")
        return val


def _wants_lists(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "lists" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _from_object(name: str, obj: Any) -> Candidate:
    interleave = getattr(obj, "interleave", None)
    credit = getattr(obj, "credit", None)
    if not callable(interleave) or not callable(credit):
        raise ConfigError(("interleaver",), f"{name} must provide interleave(lists, rng) and "
                          "credit(shown, teams, clicks); see onlineeval.interleaving.validation")
    return Candidate(name, interleave, credit, _wants_lists(credit))


def load_candidate(spec: str) -> Candidate:
    """Load ``package.module:Name`` (a class, built without arguments, or an object) or ``package.module``.

    ``path/to/file.py:Name`` loads a file that is not on the import path.
    """
    module_part, _, attr = spec.partition(":")
    if not module_part:
        raise ConfigError(("interleaver",), f"expected 'package.module:Name', got {spec!r}")
    try:
        if module_part.endswith(".py"):
            path = Path(module_part)
            if not path.is_file():
                raise ConfigError(("interleaver",), f"file {module_part!r} not found")
            mod_spec = importlib.util.spec_from_file_location(path.stem, path)
            if mod_spec is None or mod_spec.loader is None:
                raise ConfigError(("interleaver",), f"cannot load {module_part!r}")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules.setdefault(path.stem, module)
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_part)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - any import failure of user code is reported as one line
        raise ConfigError(("interleaver",), f"cannot import {module_part!r}: {type(exc).__name__}: {exc}") from None
    if not attr:
        return _from_object(spec, module)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(("interleaver",), f"{module_part!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if inspect.isclass(obj):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(("interleaver",), f"cannot construct {spec} without arguments: {exc}") from None
    return _from_object(spec, obj)


def reference_candidate(method: str, **options: Any) -> Candidate:
    """onlineeval's own implementation of ``method`` behind the per-impression protocol."""
    il = get_interleaver(method, **options)

    def interleave(lists: list[list[int]], rng: np.random.Generator) -> tuple[list[int], list[int]]:
        one = il.interleave_one(lists, rng)
        return list(one.ranking), list(one.team)

    def credit(shown: list[int], teams: list[int], clicks: list[bool],
               lists: list[list[int]]) -> int | tuple[float, float]:
        res = _single_result(lists, shown, teams)
        c = np.asarray([clicks], dtype=bool).reshape(1, len(shown))
        if method in _CREDIT_SCALE:      # the credit pair, whose difference the method keeps unbiased
            ca, cb = il.credit(res, c)[0]
            return float(ca), float(cb)
        return int(il.outcome(res, c)[0])

    return Candidate(f"onlineeval:{method}", interleave, credit, wants_lists=True)


def _single_result(lists: Sequence[Sequence[int]], shown: Sequence[int], teams: Sequence[int]) -> InterleavingResult:
    width = max(max(len(x) for x in lists), 1)
    mats = [np.array([list(x) + [-1] * (width - len(x))], dtype=np.int64) for x in lists]
    k = len(shown)
    return InterleavingResult(np.asarray(shown, dtype=np.int32).reshape(1, k),
                              np.asarray(teams, dtype=np.int8).reshape(1, k),
                              stack_rankings(mats, min_rankers=len(lists), max_rankers=len(lists)))


# --------------------------------------------------------------------------- statistics helpers
def _sign_test(outcomes: np.ndarray, alternative: str = "two-sided") -> tuple[float, int, int, int]:
    wins, losses = int((outcomes > 0).sum()), int((outcomes < 0).sum())
    ties = int(outcomes.size - wins - losses)
    if wins + losses == 0:
        return 1.0, wins, losses, ties
    return float(stats.binomtest(wins, wins + losses, 0.5, alternative=alternative).pvalue), wins, losses, ties


def _homogeneity(a: Iterable[Any], b: Iterable[Any]) -> float:
    """Chi-square test that two samples of categories come from one distribution (1.0 if degenerate)."""
    la, lb = list(a), list(b)
    cats = sorted(set(la) | set(lb), key=repr)
    if len(cats) < 2 or not la or not lb:
        return 1.0
    idx = {c: i for i, c in enumerate(cats)}
    table = np.zeros((2, len(cats)))
    np.add.at(table[0], [idx[x] for x in la], 1)
    np.add.at(table[1], [idx[x] for x in lb], 1)
    return float(stats.chi2_contingency(table, correction=False)[1])


def _bonferroni(pvals: list[float]) -> float:
    return 1.0 if not pvals else float(min(1.0, min(pvals) * len(pvals)))


def _exact(name: str, violations: int, total: int, what: str, example: str = "") -> CheckResult:
    if violations:
        return CheckResult(name, FAIL, 0.0, f"{violations}/{total} {what}" + (f"; e.g. {example}" if example else ""))
    return CheckResult(name, PASS, 1.0, f"0/{total} {what}")


def _invariant_checks(method: str, items: Sequence[tuple[str, Sequence[Sequence[int]], Sequence[int], Sequence[int]]],
                      unit: str) -> list[CheckResult]:
    """``structure`` (and, for team-draft, ``prefix_balance``) over ``(label, lists, shown, teams)`` items."""
    rules: list[tuple[str, Callable[[Sequence[Sequence[int]], Sequence[int], Sequence[int]], str], str]] = [
        ("structure", lambda lists, shown, teams: _structure_violation(lists, shown, teams,
                                                                       method in TEAM_HOLDS_DOCUMENT),
         "violate the invariants")]
    if method in _PREFIX_BALANCED:
        rules.append(("prefix_balance", _prefix_violation, "have an unbalanced prefix"))
    out = []
    for name, rule, what in rules:
        viol = 0
        example = ""
        for label, lists, shown, teams in items:
            msg = rule(lists, shown, teams)
            if msg:
                viol += 1
                example = example or f"{label}: {msg}"
        out.append(_exact(name, viol, len(items), f"{unit} {what}", example))
    return out


# --------------------------------------------------------------------------- structural checks
def _structure_violation(lists: Sequence[Sequence[int]], shown: Sequence[int], teams: Sequence[int],
                         team_holds_doc: bool) -> str:
    union = {d for lst in lists for d in lst}
    if len(shown) != len(teams):
        return f"{len(shown)} shown documents but {len(teams)} team labels"
    if len(set(shown)) != len(shown):
        return f"duplicate in {list(shown)}"
    for d, t in zip(shown, teams):
        if d not in union:
            return f"document {d} is in no input list"
        if not 0 <= t < len(lists):
            return f"team label {t} is not a ranker index"
        if team_holds_doc and d not in lists[t]:
            return f"document {d} credited to ranker {t} whose list does not hold it"
    expected = min(max(len(x) for x in lists), len(union))
    if len(shown) != expected:
        return f"shown {len(shown)} documents, expected {expected}"
    return ""


def _prefix_violation(lists: Sequence[Sequence[int]], shown: Sequence[int], teams: Sequence[int]) -> str:
    counts = [0] * len(lists)
    for j, t in enumerate(teams):
        if not 0 <= t < len(lists):
            return f"team label {t} at position {j + 1} is not a ranker index"
        seen = set(shown[:j])
        if not all(any(d not in seen for d in lst) for lst in lists):
            break
        counts[t] += 1
        if max(counts) - min(counts) > 1:
            return f"prefix {list(shown[: j + 1])} has team counts {counts}"
    return ""


# --------------------------------------------------------------------------- the battery
def _run(candidate: Candidate, scenario: tuple[Sequence[int], ...], n: int,
         rng: np.random.Generator) -> list[tuple[list[int], list[int]]]:
    lists = [list(x) for x in scenario]
    return [candidate.interleave(lists, rng) for _ in range(n)]


def _reference_batch(il: Interleaver, scenario: tuple[Sequence[int], ...], n: int,
                     rng: np.random.Generator) -> InterleavingResult:
    width = max(len(x) for x in scenario)
    mats = [np.tile(np.array(list(x) + [-1] * (width - len(x))), (n, 1)) for x in scenario]
    return il.interleave(mats, rng)


def _rows(res: InterleavingResult) -> list[tuple[list[int], list[int]]]:
    out = []
    for r in range(res.n):
        keep = res.ranking[r] >= 0
        out.append((res.ranking[r][keep].tolist(), res.team[r][keep].tolist()))
    return out


def validate_interleaver(candidate: Candidate, method: str = "team_draft", *, n: int = 60_000,
                         alpha: float = 0.01, seed: int = 0, options: dict[str, Any] | None = None,
                         click_prob: float = 0.3) -> ValidationReport:
    """Run the battery on ``candidate`` against onlineeval's ``method``.

    Parameters
    ----------
    candidate:
        From :func:`load_candidate` or :func:`reference_candidate`.
    method:
        The method the candidate claims to implement (a registry name; two rankers).
    n:
        Impressions per statistical check, split over the scenarios (default 60000,
        about 8600 per equivalence scenario: a shift of 4 percentage points in one
        position's team share is detected with power about 0.94 at ``alpha`` = 0.01
        after the Bonferroni correction over about 40 tests, 7 points with power above
        0.999; ``n = 24000`` detects 7 points with power about 0.98). The candidate's
        interleave() and credit() are each called about 3.5 n to 4.5 n times; lower ``n`` for
        slow implementations.
    alpha:
        Level of every statistical check (default 0.01).
    seed:
        Seed of all randomness (candidate and reference use independent streams).
    options:
        Options of the reference method.
    click_prob:
        Per-slot click probability of the document-blind user (default 0.3).
    """
    if not 0 < alpha < 1:
        raise ConfigError(("alpha",), f"must be in (0, 1), got {alpha!r}")
    if n < 100:
        raise ConfigError(("n",), f"must be at least 100, got {n!r}")
    ref = get_interleaver(method, **(options or {}))
    if ref.max_rankers is not None and ref.max_rankers < 2:  # pragma: no cover - no such method
        raise ConfigError(("method",), "needs a method that compares two rankers")
    seeds = np.random.SeedSequence(seed).spawn(4)
    rng_c, rng_r, rng_clk, rng_x = (np.random.default_rng(s) for s in seeds)
    checks: list[CheckResult] = []
    per = max(50, n // len(EQUIVALENCE_SCENARIOS))

    # candidate and reference samples on the equivalence scenarios
    cand_samples = [_run(candidate, sc, per, rng_c) for sc in EQUIVALENCE_SCENARIOS]
    ref_results = [_reference_batch(ref, sc, per, rng_r) for sc in EQUIVALENCE_SCENARIOS]
    ref_samples = [_rows(r) for r in ref_results]

    # structure, prefix balance
    checks.extend(_invariant_checks(method, [(f"lists {[list(x) for x in sc]}", sc, shown, teams)
                                             for sc, sample in zip(EQUIVALENCE_SCENARIOS, cand_samples)
                                             for shown, teams in sample], "interleavings"))

    # A/A
    aa_out = []
    per_aa = max(50, n // len(FIDELITY_SCENARIOS))
    for sc in FIDELITY_SCENARIOS:
        lists = [list(sc[0]), list(sc[0])]
        for _ in range(per_aa):
            shown, teams = candidate.interleave(lists, rng_c)
            clicks = (rng_clk.random(len(shown)) < click_prob).tolist()
            aa_out.append(candidate.outcome(lists, shown, teams, clicks))
    aa = np.asarray(aa_out)
    p, w, lo, t = _sign_test(aa)
    if method in _AA_ALWAYS_TIE and (w or lo):
        checks.append(CheckResult("aa_no_preference", FAIL, 0.0,
                                  f"identical rankers must always tie under {method}: {w} wins, {lo} losses "
                                  f"of {aa.size} (a float-comparison or tie-credit bug?)"))
    else:
        checks.append(CheckResult("aa_no_preference", PASS if p >= alpha else FAIL, p,
                                  f"identical rankers: wins {w}, losses {lo}, ties {t} (sign test)"))

    # fidelity 1: document- and position-blind clicks
    fid_out = []
    for sc in FIDELITY_SCENARIOS:
        lists = [list(x) for x in sc]
        for _ in range(per_aa):
            shown, teams = candidate.interleave(lists, rng_c)
            clicks = (rng_clk.random(len(shown)) < click_prob).tolist()
            fid_out.append(candidate.outcome(lists, shown, teams, clicks))
    p, w, lo, t = _sign_test(np.asarray(fid_out))
    detail = f"random clicks: wins {w}, losses {lo}, ties {t} (sign test)"
    if method in _RANDOM_CLICK_BIASED:
        checks.append(CheckResult("random_clicks_no_preference", DOCUMENTED, p,
                                  detail + "; " + _RANDOM_CLICK_BIASED[method]))
    else:
        checks.append(CheckResult("random_clicks_no_preference", PASS if p >= alpha else FAIL, p, detail))
    if method in _CREDIT_SCALE:
        # a document-blind user whose click probability falls with the position (0.9 / rank) exercises
        # every depth constraint of the LP; one t-test per scenario, Bonferroni-combined
        p_by_scenario = []
        means = []
        for sc in FIDELITY_SCENARIOS:
            lists = [list(x) for x in sc]
            vals = []
            for _ in range(per_aa):
                shown, teams = candidate.interleave(lists, rng_c)
                clicks = (rng_clk.random(len(shown)) < 0.9 / np.arange(1, len(shown) + 1)).tolist()
                vals.append(candidate.score(lists, shown, teams, clicks))
            arr = np.asarray(vals)
            means.append(arr.mean())
            p_by_scenario.append((1.0 if arr.mean() == 0 else 0.0) if arr.std() == 0
                                 else float(stats.ttest_1samp(arr, 0.0).pvalue))
        p_c = _bonferroni(p_by_scenario)
        checks.append(CheckResult("random_clicks_zero_credit", PASS if p_c >= alpha else FAIL, p_c,
                                  "clicks with probability 0.9/rank, blind to documents: mean credit_B - credit_A "
                                  + ", ".join(f"{x:+.4f}" for x in means) + f" ({len(means)} scenarios, "
                                  f"{per_aa} each; t-tests, Bonferroni; credit() must return (credit_A, credit_B))"))

    # fidelity 2: the ranker that lifts the clicked documents wins
    better = []
    per_b = max(50, n // (4 * len(BETTER_SCENARIOS)))
    for a_list, b_list, relevant in BETTER_SCENARIOS:
        lists = [list(a_list), list(b_list)]
        for _ in range(per_b):
            shown, teams = candidate.interleave(lists, rng_c)
            clicks = [(d in relevant) and bool(rng_clk.random() < 0.7) for d in shown]
            better.append(candidate.outcome(lists, shown, teams, clicks))
    p, w, lo, t = _sign_test(np.asarray(better), "greater")
    checks.append(CheckResult("better_ranker_wins", PASS if p < alpha else FAIL, p,
                              f"B lifts the clicked documents: wins {w}, losses {lo}, ties {t} (one-sided sign test)"))

    # equivalence of the interleaving distributions
    team_p: list[float] = []
    doc_p: list[float] = []
    worst_team = worst_doc = ("", 1.0)
    for sc, cs, rs in zip(EQUIVALENCE_SCENARIOS, cand_samples, ref_samples):
        k = max(len(x) for x in sc)
        for j in range(k):
            ct = [s[1][j] if j < len(s[1]) else -1 for s in cs]
            rt = [s[1][j] if j < len(s[1]) else -1 for s in rs]
            pt = _homogeneity(ct, rt)
            team_p.append(pt)
            if pt < worst_team[1]:
                worst_team = (f"lists {[list(x) for x in sc]} position {j + 1}: candidate team-A share "
                              f"{np.mean(np.asarray(ct) == 0):.3f} vs reference {np.mean(np.asarray(rt) == 0):.3f}", pt)
            cd = [s[0][j] if j < len(s[0]) else -1 for s in cs]
            rd = [s[0][j] if j < len(s[0]) else -1 for s in rs]
            pd_ = _homogeneity(cd, rd)
            doc_p.append(pd_)
            if pd_ < worst_doc[1]:
                worst_doc = (f"lists {[list(x) for x in sc]} position {j + 1}", pd_)
    for name, pv, worst in (("team_distribution", team_p, worst_team), ("document_distribution", doc_p, worst_doc)):
        pb = _bonferroni(pv)
        det = f"{len(pv)} chi-square tests over positions x scenarios, Bonferroni"
        if worst[0] and pb < alpha:
            det += f"; worst: {worst[0]}"
        checks.append(CheckResult(name, PASS if pb >= alpha else FAIL, pb, det))

    # credit agreement on identical inputs
    total = viol = 0
    example = ""
    for sc, res in zip(EQUIVALENCE_SCENARIOS, ref_results):
        lists = [list(x) for x in sc]
        clicks = rng_x.random(res.ranking.shape) < click_prob
        clicks[:, : res.k] &= res.ranking >= 0
        ref_out = ref.outcome(res, clicks)
        for r in range(min(res.n, 1000)):
            keep = res.ranking[r] >= 0
            shown, teams = res.ranking[r][keep].tolist(), res.team[r][keep].tolist()
            c = clicks[r][keep].tolist()
            got = candidate.outcome(lists, shown, teams, c)
            total += 1
            if got != int(ref_out[r]):
                viol += 1
                example = example or (f"lists {lists}, shown {shown}, teams {teams}, clicks {c}: "
                                      f"candidate {got:+d}, reference {int(ref_out[r]):+d}")
    checks.append(_exact("credit_agreement", viol, total, "outcomes differ from the reference on the same input",
                         example))

    # end-to-end outcome distribution
    out_p = []
    for sc, cs, res in zip(EQUIVALENCE_SCENARIOS, cand_samples, ref_results):
        lists = [list(x) for x in sc]
        c_out = [candidate.outcome(lists, s, t, (rng_clk.random(len(s)) < click_prob).tolist()) for s, t in cs]
        clicks = rng_x.random(res.ranking.shape) < click_prob
        r_out = ref.outcome(res, clicks).tolist()
        out_p.append(_homogeneity(c_out, r_out))
    pb = _bonferroni(out_p)
    checks.append(CheckResult("outcome_distribution", PASS if pb >= alpha else FAIL, pb,
                              f"win/loss/tie vs reference, {len(out_p)} chi-square tests, Bonferroni"))

    checks.extend(_documented(candidate, method, per, rng_c, rng_clk))
    conventions = (f"outcome > 0: B = lists[1] preferred, < 0: A = lists[0], 0: tie; random-click user clicks "
                   f"each shown slot independently with probability {click_prob:g}; {n} impressions per "
                   f"statistical check, split over the scenarios; reference options {ref.options or 'default'}; "
                   f"seed {seed}; exact checks print p = 1 (holds) or 0 (violated); chi-square p-values are "
                   "Bonferroni-combined over positions x scenarios")
    return ValidationReport(candidate.name, method, tuple(checks), alpha, conventions)


def _documented(candidate: Candidate, method: str, n: int, rng: np.random.Generator,
                rng_clk: np.random.Generator) -> list[CheckResult]:
    """Known counter-examples of the declared method, measured on the candidate."""
    out: list[CheckResult] = []
    if method == "balanced":
        lists = [[1, 2, 3], [2, 3, 4]]
        res = []
        for _ in range(n):
            shown, teams = candidate.interleave(lists, rng)
            if len(shown) < 1:
                continue
            pos = int(rng_clk.integers(0, len(shown)))
            res.append(candidate.outcome(lists, shown, teams, [i == pos for i in range(len(shown))]))
        arr = np.asarray(res)
        share = float(np.mean(arr > 0)) if arr.size else float("nan")
        p = float(stats.binomtest(int((arr > 0).sum()), arr.size, 2 / 3).pvalue) if arr.size else None
        out.append(CheckResult("documented: balanced bias", DOCUMENTED, p,
                               f"A=(1,2,3), B=(2,3,4), one uniformly random click: B wins {share:.3f} of "
                               "impressions (2/3 on the three shown documents; 3/4 when k = 4); p tests 2/3"))
    if method in _PREFIX_BALANCED:
        lists = [[1, 2, 3], [2, 3, 4]]
        res = []
        for _ in range(n):
            shown, teams = candidate.interleave(lists, rng)
            res.append(candidate.outcome(lists, shown, teams, [d == 3 for d in shown]))
        arr = np.asarray(res, dtype=float)
        p, w, lo, t = _sign_test(arr)
        out.append(CheckResult("documented: team-draft fidelity", DOCUMENTED, p,
                               f"A=(1,2,3), B=(2,3,4), only document 3 clicked (B ranks it higher): "
                               f"mean outcome {arr.mean():+.3f} (expected 0: team-draft cannot see this difference)"))
    return out


# --------------------------------------------------------------------------- logs
@dataclass(frozen=True)
class LogRecord:
    """One logged impression."""

    line: int
    rankings: tuple[tuple[int, ...], ...]
    shown: tuple[int, ...]
    teams: tuple[int, ...]
    clicks: tuple[bool, ...]
    outcome: int | None


_ID_MAX = int(np.iinfo(np.int32).max)


def _int_list(value: Any, key: str, path: str, line: int, *, low: int = 0, high: int = _ID_MAX) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise InputError(f"{key!r} must be a list of integers", path, line)
    bad = next((v for v in value if not low <= v <= high), None)
    if bad is not None:
        raise InputError(f"{key!r}: {bad} is out of range; allowed {low}..{high}", path, line)
    return tuple(value)


def read_log(path: str | Path) -> list[LogRecord]:
    """Read an impressions log (JSON lines) with ``rankings``, ``shown``, ``teams``, ``clicks`` [, ``outcome``].

    Every line is one impression, a JSON object with:

    * ``rankings``: the input rankings, a list of at least two lists of document ids
      (integers in ``0..2^31-1``; ``rankings[0]`` is A, ``rankings[1]`` is B); every line
      of a log has the same number of rankings;
    * ``shown``: the shown list (non-empty), ``teams``: the ranker index credited for each
      shown slot (``0..len(rankings)-1``);
    * ``clicks``: one boolean (or 0 / 1) per shown slot, or ``clicked_docs``: the
      clicked document ids;
    * ``outcome`` (optional, two rankings only): the logged outcome, a finite number whose
      sign says who won (``> 0``: B, ``< 0``: A, ``0``: tie).

    Raises
    ------
    InputError
        Naming the file and line of the first malformed impression.
    """
    p = str(path)
    records: list[LogRecord] = []
    n_rankers: int | None = None
    with open(p, "rb") as fh:
        for i, raw_bytes in enumerate(fh, start=1):
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError("not UTF-8 text (a JSON-lines log is expected)", p, i) from None
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg})", p, i) from None
            if not isinstance(obj, dict):
                raise InputError("each line must be a JSON object", p, i)
            for key in ("rankings", "shown", "teams"):
                if key not in obj:
                    raise InputError(f"missing key {key!r} (need rankings, shown, teams, clicks)", p, i)
            rk = obj["rankings"]
            if not isinstance(rk, list) or len(rk) < 2:
                raise InputError("'rankings' must be a list of at least two rankings", p, i)
            if n_rankers is None:
                n_rankers = len(rk)
            elif len(rk) != n_rankers:
                raise InputError(f"{len(rk)} rankings where the earlier lines have {n_rankers}; "
                                 "every impression of a log compares the same rankers", p, i)
            rankings = tuple(_int_list(r, "rankings[]", p, i) for r in rk)
            if not any(rankings):
                raise InputError("every input ranking is empty", p, i)
            shown = _int_list(obj["shown"], "shown", p, i)
            if not shown:
                raise InputError("'shown' is empty; log only impressions that showed documents", p, i)
            teams = _int_list(obj["teams"], "teams", p, i, high=len(rk) - 1)
            if len(teams) != len(shown):
                raise InputError(f"'teams' has {len(teams)} labels for {len(shown)} shown documents; "
                                 "one per shown slot", p, i)
            if "clicks" in obj:
                c = obj["clicks"]
                if not isinstance(c, list) or len(c) != len(shown) or \
                        not all(isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)) for v in c):
                    raise InputError("'clicks' must be a list of booleans (or 0 / 1), one per shown slot", p, i)
                clicks = tuple(bool(v) for v in c)
            elif "clicked_docs" in obj:
                docs = set(_int_list(obj["clicked_docs"], "clicked_docs", p, i))
                clicks = tuple(d in docs for d in shown)
            else:
                raise InputError("missing key 'clicks' (or 'clicked_docs')", p, i)
            outcome = obj.get("outcome")
            if outcome is not None:
                if isinstance(outcome, bool) or not isinstance(outcome, (int, float)) or not np.isfinite(outcome):
                    raise InputError("'outcome' must be a finite number (> 0: B won, < 0: A won, 0: tie)", p, i)
                if len(rk) != 2:
                    raise InputError(f"'outcome' is a two-ranker result but the line has {len(rk)} rankings", p, i)
            records.append(LogRecord(i, rankings, shown, teams, clicks,
                                     None if outcome is None else int(np.sign(outcome))))
    if not records:
        raise InputError("the log holds no impressions", p)
    return records


def validate_log(records: Sequence[LogRecord], method: str = "team_draft", *, alpha: float = 0.01,
                 seed: int = 0, options: dict[str, Any] | None = None, subject: str = "log") -> ValidationReport:
    """Check logged impressions: structure, prefix balance, team distribution against the reference, outcomes."""
    if not records:
        raise InputError("no impressions to validate")
    ref = get_interleaver(method, **(options or {}))
    m_log = len(records[0].rankings)
    if m_log < ref.min_rankers or (ref.max_rankers is not None and m_log > ref.max_rankers):
        allowed = f"{ref.min_rankers}" if ref.max_rankers == ref.min_rankers else f"at least {ref.min_rankers}"
        raise InputError(f"{method!r} compares {allowed} rankers; the log's impressions have {m_log}",
                         subject, records[0].line)
    rng = np.random.default_rng(seed)
    checks = _invariant_checks(method, [(f"line {rec.line}", rec.rankings, rec.shown, rec.teams)
                                        for rec in records], "impressions")

    # team distribution per position against the reference run on the same inputs
    m = len(records[0].rankings)
    width = max(len(r) for rec in records for r in rec.rankings)
    if all(len(rec.rankings) == m for rec in records):
        mats = [np.array([list(rec.rankings[i]) + [-1] * (width - len(rec.rankings[i])) for rec in records])
                for i in range(m)]
        k = max(len(rec.shown) for rec in records)
        res = ref.interleave(mats, rng, length=k)
        pvals = []
        for j in range(k):
            logged = [rec.teams[j] if j < len(rec.teams) else -1 for rec in records]
            pvals.append(_homogeneity(logged, res.team[:, j].tolist()))
        pb = _bonferroni(pvals)
        checks.append(CheckResult("team_distribution", PASS if pb >= alpha else FAIL, pb,
                                  f"team label per position vs the reference on the logged inputs, "
                                  f"{len(pvals)} chi-square tests, Bonferroni"))
    # logged outcomes against the reference credit
    with_outcome = [rec for rec in records if rec.outcome is not None]
    if with_outcome:
        viol = 0
        example = ""
        for rec in with_outcome:
            res1 = _single_result(rec.rankings, rec.shown, rec.teams)
            exp = int(ref.outcome(res1, np.asarray([rec.clicks], dtype=bool).reshape(1, len(rec.shown)))[0])
            if exp != rec.outcome:
                viol += 1
                example = example or f"line {rec.line}: logged {rec.outcome:+d}, reference {exp:+d}"
        checks.append(_exact("credit_agreement", viol, len(with_outcome),
                             "logged outcomes differ from the reference credit", example))
    else:
        checks.append(CheckResult("credit_agreement", SKIPPED, None, "no 'outcome' in the log"))
    conventions = (f"{len(records)} logged impressions; outcome > 0: B = rankings[1] preferred, < 0: A = rankings[0], "
                   f"0: tie; reference options {ref.options or 'default'}; seed {seed} for the reference draws; "
                   "exact checks print p = 1 (holds) or 0 (violated); chi-square p-values are Bonferroni-combined "
                   "over positions")
    return ValidationReport(subject, method, tuple(checks), alpha, conventions)
