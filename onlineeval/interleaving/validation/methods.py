"""What each method guarantees, and on which scale the battery checks it.

Fidelity (Hofmann et al. 2013) asks that a user clicking independently of the documents
produce no preference. Which number carries that guarantee depends on the method:

* team-draft (and team-draft multileaving): the win / loss / tie itself; under clicks
  blind to the documents the team labels are exchangeable, so the sign test of wins
  against losses applies (``random_clicks_no_preference``);
* probabilistic (and probabilistic multileaving): the *expected* outcome over the hidden
  assignments, ``E[o | L, c] = P(B wins) - P(A wins)``
  (:meth:`~onlineeval.interleaving.probabilistic.Probabilistic.expected_outcome`). Under
  position-only clicks the assignments are independent of the clicks, so
  ``E[E[o | L, c]] = E[o(a, c)] = 0``: tested by a t-test of its mean
  (``random_clicks_zero_expected_outcome``). The *sign* of the expected outcome is not
  constrained (wins exceed losses by 1-2% on the battery's scenarios): documented;
* optimized: the credit difference ``credit_B - credit_A`` (Radlinski & Craswell 2013's
  linear programme makes its expectation zero for every position-dependent click model):
  t-test (``random_clicks_zero_credit``); the sign of the credit difference is not
  constrained: documented;
* balanced: no scale carries the guarantee (Hofmann et al. 2011 show its bias):
  documented, with the known counter-example measured.

References
----------
K. Hofmann, S. Whiteson, M. de Rijke. Fidelity, soundness, and efficiency of interleaved
comparison methods. ACM TOIS 31(4), 2013.
F. Radlinski, N. Craswell. Optimized interleaving for online retrieval evaluation. WSDM 2013.
"""

from __future__ import annotations

from dataclasses import dataclass

from onlineeval.errors import ConfigError
from onlineeval.interleaving.checks import TEAM_HOLDS_DOCUMENT
from onlineeval.interleaving.validation.candidates import CREDIT, EXPECTED, SIGN

__all__ = ["MULTILEAVING_METHODS", "MethodSpec", "method_spec"]


@dataclass(frozen=True)
class MethodSpec:
    """The battery's view of one method.

    Attributes
    ----------
    name:
        Registry name.
    scale:
        ``"win/loss/tie"``, ``"expected outcome"`` or ``"credit difference"``: what
        ``credit()`` returns and the credit agreement compares.
    multileave:
        Run the multileaving battery (three or more rankers, every pair).
    aa_always_tie:
        Identical rankers always give a tie (a win or loss there is an exact violation).
    prefix_balanced:
        Team counts of every prefix differ by at most one (team-draft).
    team_holds_doc:
        The team label names a ranker whose list holds the document.
    sign_bias:
        ``None`` when the win / loss sign is unbiased under random clicks; otherwise why
        it is not (the sign test is then reported as ``DOCUMENTED``).
    zero_mean_check:
        Name of the check of the method's own guarantee (zero mean on :attr:`scale` under
        position-only clicks), or ``""``.
    """

    name: str
    scale: str
    multileave: bool
    aa_always_tie: bool
    prefix_balanced: bool
    team_holds_doc: bool
    sign_bias: str | None
    zero_mean_check: str


_PROB_SIGN = ("the sign of probabilistic interleaving's expected outcome is not unbiased under random clicks; "
              "its expectation is, checked by random_clicks_zero_expected_outcome")
_SPECS: dict[str, tuple[str, bool, bool, bool, str | None, str]] = {
    # name: (scale, multileave, aa_always_tie, prefix_balanced, sign_bias, zero_mean_check)
    "team_draft": (SIGN, False, False, True, None, ""),
    "team_draft_multileave": (SIGN, True, False, True, None, ""),
    "balanced": (SIGN, False, True, False, ("balanced interleaving is known to be biased under random clicks "
                 "(Hofmann et al. 2011); see 'documented: balanced bias'"), ""),
    "probabilistic": (EXPECTED, False, True, False, _PROB_SIGN, "random_clicks_zero_expected_outcome"),
    "probabilistic_multileave": (EXPECTED, True, True, False, _PROB_SIGN, "random_clicks_zero_expected_outcome"),
    "optimized": (CREDIT, False, True, False, ("optimized interleaving is unbiased on the credit scale; the sign of "
                  "the credit difference is not constrained (checked by random_clicks_zero_credit)"),
                  "random_clicks_zero_credit"),
}

#: methods validated in multileaving mode
MULTILEAVING_METHODS = frozenset(k for k, v in _SPECS.items() if v[1])


def method_spec(method: str) -> MethodSpec:
    """The spec of a registered method (``ConfigError`` for a method the battery does not know)."""
    if method not in _SPECS:
        raise ConfigError(("method",), f"the validation battery knows {', '.join(sorted(_SPECS))}; "
                          f"got {method!r}")
    scale, ml, tie, prefix, bias, zero = _SPECS[method]
    return MethodSpec(method, scale, ml, tie, prefix, method in TEAM_HOLDS_DOCUMENT, bias, zero)
