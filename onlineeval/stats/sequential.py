r"""Sequential tests: what daily peeking costs, and tests that may be looked at every day.

Estimand and assumption
-----------------------
Every test here is about one difference :math:`\Delta` (``B - A``, or an interleaving
preference) estimated at looks :math:`k = 1, \dots, K` (e.g. daily checkpoints) by
:math:`\hat\Delta_k` with standard error :math:`\mathrm{se}_k`. The z-statistics
:math:`Z_k = \hat\Delta_k/\mathrm{se}_k` are assumed to behave like a Brownian motion observed at
the information :math:`I_k = \mathrm{se}_k^{-2}` (the canonical joint distribution of
Jennison and Turnbull 2000, *Group Sequential Methods with Applications to Clinical
Trials*, sec. 3.1):

.. math::

    Z_k \sim N(\theta\sqrt{I_k}, 1),\qquad
    \operatorname{Cov}(Z_j, Z_k) = \sqrt{I_j/I_k}\quad(j \le k),

which holds asymptotically for cumulative means and delta-method ratios of independent
users. Information is reported as fractions :math:`t_k = I_k/I_K` of the planned maximum, and
the drift :math:`\delta = \theta\sqrt{I_K}` is the expected z-statistic at the horizon.

Three families
--------------
* **Naive peeking** (:func:`peeking_test`, :func:`peeking_boundaries`): reject at the first
  look with a fixed-horizon p-value below ``alpha``. Its false-positive rate grows with the
  number of looks (:func:`peeking_fpr`, exact by numerical integration).
* **Always-valid tests** from the normal mixture martingale: the mixture sequential
  probability ratio test (mSPRT, Johari, Pekelis and Walsh 2017, "Always valid inference",
  arXiv:1512.04922; Johari et al. 2022, *Operations Research* 70:1806-1821) with always-valid
  p-values (:func:`msprt`), and its dual, the two-sided normal-mixture confidence sequence
  (Howard, Ramdas, McAuliffe and Sekhon 2021, *Ann. Statist.* 49:1055-1080, eq. (14); used
  with an estimated standard error it is the asymptotic confidence sequence of Waudby-Smith,
  Arbour, Sinha, Kennedy and Ramdas 2023, "Time-uniform central limit theory and asymptotic
  confidence sequences", arXiv:2103.06476, Thm. 2.2 — the one GrowthBook uses)
  (:func:`confidence_sequence`). Both are valid at any data-dependent stopping time
  (Ville's inequality), asymptotically when the standard error is estimated.
* **Group-sequential boundaries** (:func:`spending_boundaries`, :func:`classic_boundaries`,
  :func:`group_sequential_test`): the Lan and DeMets (1983, *Biometrika* 70:659-663) alpha
  spending functions of O'Brien-Fleming and Pocock type, and the classic constant designs of
  Pocock (1977) and O'Brien and Fleming (1979). Boundaries, crossing probabilities, power and
  sample-size inflation are computed by recursive numerical integration of the joint density
  above (Armitage, McPherson and Rowe 1969; Jennison and Turnbull 2000, ch. 19) with
  Simpson's rule on an adaptive grid.

All data-level functions take arrays with **looks on the last axis** and any leading shape
(replicates, designs, ...), and never modify the caller's arrays. This module imports only
numpy and the standard library (no scipy), so the power calculator that uses it starts fast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from onlineeval.errors import InputError, must_be_one_of
from onlineeval.stats._recursion import _Recursion, _sf
from onlineeval.stats._roots import root_from_guess, root_increasing

__all__ = [
    "SEQUENTIAL_DESIGNS",
    "SPENDING_FUNCTIONS",
    "Boundaries",
    "Crossing",
    "SequentialResult",
    "classic_boundaries",
    "confidence_sequence",
    "crossing_probabilities",
    "drift_for_power",
    "equal_fractions",
    "group_sequential_test",
    "inflation_factor",
    "mixture_boundaries",
    "mixture_tau",
    "msprt",
    "peeking_boundaries",
    "peeking_fpr",
    "peeking_test",
    "sequential_test",
    "spending",
    "spending_boundaries",
    "z_equivalent",
]

SPENDING_FUNCTIONS = ("obrien_fleming", "pocock")
SEQUENTIAL_DESIGNS = ("none", "peeking", "msprt", "confidence_sequence", "obrien_fleming", "pocock")
_ALTERNATIVES = ("two-sided", "larger", "smaller")
_STD = NormalDist()


# ----------------------------------------------------------------------------- small numerics


def _z(q: float) -> float:
    """Standard normal quantile ``Phi^{-1}(q)``."""
    return _STD.inv_cdf(q)


def _check_alpha(alpha: float) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")
    return a


def _check_alternative(alternative: str) -> str:
    if alternative not in _ALTERNATIVES:
        raise InputError(must_be_one_of(_ALTERNATIVES, alternative, "alternative"))
    return alternative


#: smallest step between two looks' information fractions, relative to the earlier one: the recursion's grid
#: step is a sixth of the next increment's SD, so a step ``r`` needs about ``144 / sqrt(r)`` points (14,400 at
#: ``1e-4``, its kernel computed in blocks of rows: :data:`onlineeval.stats._recursion.KERNEL_CELLS`)
MIN_FRACTION_STEP = 1e-4


def _check_fractions(fractions: ArrayLike) -> NDArray[np.float64]:
    try:
        t = np.array(fractions, dtype=np.float64, copy=True).ravel()
    except (TypeError, ValueError):
        raise InputError("fractions: expected a sequence of information fractions") from None
    if t.size == 0:
        raise InputError("fractions: needs at least one look")
    if not np.isfinite(t).all() or (t <= 0).any() or (t > 1.0 + 1e-12).any():
        raise InputError(f"fractions: information fractions must lie in (0, 1]; got {t.tolist()}")
    if (np.diff(t) <= 0).any():
        raise InputError(f"fractions: information fractions must be strictly increasing; got {t.tolist()}")
    close = np.diff(t) < MIN_FRACTION_STEP * t[:-1]
    if close.any():
        k = int(np.argmax(close))
        raise InputError(
            f"fractions: looks {k + 1} and {k + 2} are at information fractions {float(t[k]):.8g} and "
            f"{float(t[k + 1]):.8g}, less "
            f"than {MIN_FRACTION_STEP:g} of the first apart: for the boundaries' numerical integration that is the "
            "same look twice (its grid would need tens of thousands of points); merge the two looks"
        )
    t.flags.writeable = False
    return t


def equal_fractions(n_looks: int) -> NDArray[np.float64]:
    """Information fractions ``k/K`` of ``K`` equally spaced looks (e.g. daily looks, steady traffic)."""
    k = int(n_looks)
    if k != n_looks or k < 1:
        raise InputError(f"looks must be a positive integer, got {n_looks!r}")
    return np.arange(1, k + 1, dtype=np.float64) / k


# ----------------------------------------------------------------------------- boundaries


@dataclass(frozen=True)
class Boundaries:
    r"""Critical values of a sequential design on the z scale, one per look.

    Attributes
    ----------
    fractions:
        Information fractions :math:`t_k` of the looks (increasing, the last usually 1).
    upper, lower:
        Reject :math:`H_0` at the first look with :math:`Z_k \ge` ``upper[k]`` or
        :math:`Z_k \le` ``lower[k]`` (``inf`` / ``-inf`` where a side never rejects).
    alpha:
        Nominal level of the design.
    alternative:
        ``"two-sided"``, ``"larger"`` or ``"smaller"``.
    kind:
        ``"obrien_fleming"``, ``"pocock"`` (spending), ``"classic_obrien_fleming"``,
        ``"classic_pocock"``, ``"msprt"`` or ``"peeking"``.
    """

    fractions: NDArray[np.float64]
    upper: NDArray[np.float64]
    lower: NDArray[np.float64]
    alpha: float
    alternative: str
    kind: str

    @property
    def n_looks(self) -> int:
        """Number of looks ``K``."""
        return int(self.fractions.size)

    def to_dict(self) -> dict[str, object]:
        """Plain-Python dict (JSON-ready; infinite boundaries as ``None``)."""

        def vals(a: NDArray[np.float64]) -> list[float | None]:
            return [float(v) if np.isfinite(v) else None for v in a]

        return {
            "kind": self.kind,
            "alpha": self.alpha,
            "alternative": self.alternative,
            "fractions": [float(v) for v in self.fractions],
            "upper": vals(self.upper),
            "lower": vals(self.lower),
        }


def _sided(b: NDArray[np.float64], alternative: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(upper, lower) from the magnitudes ``b`` of the rejecting side(s)."""
    inf = np.full(b.shape, np.inf)
    if alternative == "two-sided":
        return b, -b
    if alternative == "larger":
        return b, -inf
    return inf, -b


def spending(kind: str, fractions: ArrayLike, alpha: float) -> NDArray[np.float64]:
    r"""Cumulative type-I error :math:`\alpha(t)` spent by information fraction ``t``.

    Lan and DeMets (1983) spending functions:

    .. math::

        \alpha_{OF}(t) = 2 - 2\,\Phi\!\left(\frac{z_{1-\alpha/2}}{\sqrt t}\right),\qquad
        \alpha_{P}(t) = \alpha \log\bigl(1 + (e - 1)\,t\bigr),

    both equal to :math:`\alpha` at :math:`t = 1` (``kind`` ``"obrien_fleming"`` or
    ``"pocock"``). ``alpha`` is the total level of the design (two-sided or one-sided).
    """
    if kind not in SPENDING_FUNCTIONS:
        raise InputError(f"spending: {must_be_one_of(SPENDING_FUNCTIONS, kind, 'kind')}")
    a = _check_alpha(alpha)
    t = np.minimum(np.asarray(fractions, dtype=np.float64), 1.0)
    if kind == "obrien_fleming":
        return 2.0 * _sf(_z(1.0 - a / 2.0) / np.sqrt(t))
    return a * np.log1p((math.e - 1.0) * t)


@dataclass(frozen=True)
class Crossing:
    r"""Per-look probabilities of stopping a sequential design (at a given drift).

    ``upper[k]`` (``lower[k]``) is the probability of continuing to look ``k`` and crossing
    the upper (lower) boundary there. ``drift`` is :math:`\delta = E[Z]` at information 1.
    """

    fractions: NDArray[np.float64]
    upper: NDArray[np.float64]
    lower: NDArray[np.float64]
    drift: float

    @property
    def reject(self) -> float:
        """Probability of rejecting :math:`H_0` at some look (either side)."""
        return float(self.upper.sum() + self.lower.sum())

    @property
    def by_look(self) -> NDArray[np.float64]:
        """Cumulative probability of having rejected by each look."""
        return np.cumsum(self.upper + self.lower)

    @property
    def expected_fraction(self) -> float:
        r"""Expected information at stopping, as a fraction of the maximum:
        :math:`\sum_k t_k P(\text{stop at } k) + t_K P(\text{no stop})`."""
        stop = self.upper + self.lower
        return float((self.fractions * stop).sum() + self.fractions[-1] * (1.0 - stop.sum()))


def crossing_probabilities(boundaries: Boundaries, drift: float = 0.0) -> Crossing:
    r"""Exact (numerically integrated) probabilities of crossing each boundary at each look.

    Parameters
    ----------
    boundaries:
        A sequential design (any :class:`Boundaries`).
    drift:
        :math:`\delta = \theta\sqrt{I_K}`, the expected z-statistic at information fraction 1
        (0 under :math:`H_0`). Default 0.

    Notes
    -----
    With :math:`S_k = Z_k\sqrt{t_k}` a Brownian motion with drift :math:`\delta`, the
    sub-density of paths that have not stopped before look :math:`k` is

    .. math::

        f_1(s) = \tfrac{1}{\sqrt{t_1}}\,\phi\!\left(\tfrac{s - \delta t_1}{\sqrt{t_1}}\right),\qquad
        f_k(s) = \int_{C_{k-1}} f_{k-1}(u)\,\tfrac{1}{\sqrt{\Delta_k}}
            \phi\!\left(\tfrac{s - u - \delta\Delta_k}{\sqrt{\Delta_k}}\right) du,

    with :math:`\Delta_k = t_k - t_{k-1}` and :math:`C_k` the continuation interval
    :math:`(l_k\sqrt{t_k}, u_k\sqrt{t_k})`; the crossing probabilities integrate the normal tails
    against :math:`f_{k-1}` (Jennison and Turnbull 2000, ch. 19).
    """
    rec = _Recursion(boundaries.fractions, float(drift))
    up = np.zeros(boundaries.n_looks)
    lo = np.zeros(boundaries.n_looks)
    for k in range(boundaries.n_looks):
        up[k], lo[k] = rec.exit(float(boundaries.upper[k]), float(boundaries.lower[k]))
        if k + 1 < boundaries.n_looks:
            rec.advance(float(boundaries.upper[k]), float(boundaries.lower[k]))
    return Crossing(boundaries.fractions, up, lo, float(drift))


def spending_boundaries(
    fractions: ArrayLike,
    alpha: float = 0.05,
    kind: str = "obrien_fleming",
    alternative: str = "two-sided",
) -> Boundaries:
    r"""Group-sequential boundaries from a Lan-DeMets alpha spending function.

    Parameters
    ----------
    fractions:
        Information fractions of the looks, increasing in (0, 1] (they need not be equally
        spaced; with a final fraction below 1 the design stops early having spent
        :math:`\alpha(t_K) < \alpha`).
    alpha:
        Total level: for ``alternative="two-sided"`` each boundary spends ``alpha/2`` with
        the spending function at level ``alpha/2`` (symmetric bounds as in Reboussin, DeMets,
        Kim and Lan 2000, *Controlled Clinical Trials* 21:190-207, and R's ``ldbounds``); the
        one-sided level otherwise. Default 0.05.
    kind:
        ``"obrien_fleming"`` (default) or ``"pocock"``; see :func:`spending`.
    alternative:
        ``"two-sided"`` (default, symmetric boundaries), ``"larger"`` or ``"smaller"``
        (one-sided, no futility boundary).

    Returns
    -------
    Boundaries
        ``b_k`` solving, look by look,

        .. math::

            P_0(\text{continue to } k,\ \text{cross at } k) = \alpha(t_k) - \alpha(t_{k-1}),

        by numerical integration (:func:`crossing_probabilities`) and root finding; a look
        with nothing to spend gets ``inf``.
    """
    t = _check_fractions(fractions)
    a = _check_alpha(alpha)
    alternative = _check_alternative(alternative)
    cum = 2.0 * spending(kind, t, a / 2.0) if alternative == "two-sided" else spending(kind, t, a)
    incr = np.diff(np.concatenate([[0.0], cum]))
    rec = _Recursion(t, 0.0)
    b = np.empty(t.size)
    for k in range(t.size):
        target = float(incr[k])

        def log_spent(x: float) -> float:
            u, lo = _sided(np.asarray([x]), alternative)
            pu, pl = rec.exit(float(u[0]), float(lo[0]))
            return -math.log(max(pu + pl, 1e-320))  # increasing in x

        if target <= 1e-300:
            b[k] = np.inf
        else:
            # the exit probability at look k is at most the unconditional tail sides * (1 - Phi(x)),
            # so the boundary lies in [0, Phi^{-1}(1 - target/sides)]; solved on the log scale
            sides = 2.0 if alternative == "two-sided" else 1.0
            hi = -_z(target / sides) if target / sides < 0.5 else 1.0
            b[k] = root_increasing(log_spent, -math.log(target), 0.0, hi, tol=1e-13)
        u, lo = _sided(b[k : k + 1], alternative)
        if k + 1 < t.size:
            rec.advance(float(u[0]), float(lo[0]))
    upper, lower = _sided(b, alternative)
    return Boundaries(t, upper, lower, a, alternative, kind)


def classic_boundaries(
    fractions: ArrayLike,
    alpha: float = 0.05,
    kind: str = "obrien_fleming",
    alternative: str = "two-sided",
) -> Boundaries:
    r"""The classic constant designs of Pocock (1977) and O'Brien and Fleming (1979).

    Boundaries :math:`b_k = c` (``kind="pocock"``) or :math:`b_k = c\sqrt{t_K/t_k}`
    (``kind="obrien_fleming"``), with the constant :math:`c` solving
    :math:`P_0(\text{reject at some look}) = \alpha` by numerical integration (Jennison and
    Turnbull 2000, Tables 2.1 and 2.3 list :math:`c` for equally spaced looks, e.g.
    :math:`C_P(5, 0.05) = 2.413`, :math:`C_B(5, 0.05) = 2.040`). Parameters as in
    :func:`spending_boundaries`.
    """
    t = _check_fractions(fractions)
    a = _check_alpha(alpha)
    alternative = _check_alternative(alternative)
    if kind not in ("obrien_fleming", "pocock"):
        raise InputError(f"classic_boundaries: {must_be_one_of(('obrien_fleming', 'pocock'), kind, 'kind')}")
    shape = np.sqrt(t[-1] / t) if kind == "obrien_fleming" else np.ones(t.size)

    def level(c: float) -> float:
        u, lo = _sided(c * shape, alternative)
        return -crossing_probabilities(Boundaries(t, u, lo, a, alternative, kind), 0.0).reject

    one = _z(1.0 - a / 2.0) if alternative == "two-sided" else _z(1.0 - a)
    c = root_increasing(level, -a, one * 0.5, one + 5.0, tol=1e-12)
    upper, lower = _sided(c * shape, alternative)
    return Boundaries(t, upper, lower, a, alternative, "classic_" + kind)


def peeking_boundaries(fractions: ArrayLike, alpha: float = 0.05, alternative: str = "two-sided") -> Boundaries:
    """The naive rule: the fixed-horizon critical value :math:`z_{1-\\alpha/2}` (or :math:`z_{1-\\alpha}`) at every
    look."""
    t = _check_fractions(fractions)
    a = _check_alpha(alpha)
    alternative = _check_alternative(alternative)
    c = _z(1.0 - a / 2.0) if alternative == "two-sided" else _z(1.0 - a)
    upper, lower = _sided(np.full(t.size, c), alternative)
    return Boundaries(t, upper, lower, a, alternative, "peeking")


def peeking_fpr(fractions: ArrayLike, alpha: float = 0.05, alternative: str = "two-sided") -> NDArray[np.float64]:
    r"""False-positive rate of naive peeking, by look: :math:`P_0(\exists j \le k: |Z_j| \ge z_{1-\alpha/2})`.

    Exact up to the numerical integration (about 1e-9); e.g. 5 equally spaced looks at
    ``alpha = 0.05`` give 0.142 (Armitage, McPherson and Rowe 1969, Table 2).
    """
    return crossing_probabilities(peeking_boundaries(fractions, alpha, alternative), 0.0).by_look


def _mixture_x(alpha: float) -> float:
    """Fixed point of :math:`x = 2\\log(1/\\alpha) + \\log(1 + x)`."""
    two_l = -2.0 * math.log(alpha)
    x = two_l
    for _ in range(200):
        nx = two_l + math.log1p(x)
        if abs(nx - x) < 1e-15 * nx:
            return nx
        x = nx
    return x


def mixture_tau(se_horizon: ArrayLike, alpha: float = 0.05) -> NDArray[np.float64]:
    r"""Mixture scale :math:`\tau` that makes the mSPRT / confidence sequence tightest at a planned horizon.

    The normal-mixture boundary on :math:`|\hat\Delta|` at standard error :math:`s` is
    :math:`\sqrt{2 s^2 (1 + s^2/\tau^2) \log(\sqrt{1+\tau^2/s^2}/\alpha)}`; writing
    :math:`x = \tau^2/s^2`, it is smallest when :math:`x = 2\log(1/\alpha) + \log(1+x)`,
    solved here by fixed-point iteration (the one-step value
    :math:`-2\log\alpha + \log(1 - 2\log\alpha)` is the approximation of Howard et al. 2021,
    sec. 3.5, and Waudby-Smith et al. 2023, eq. (10)). Returns
    :math:`\tau = s_H\sqrt{x}` for the standard error :math:`s_H` expected at the horizon.
    Any :math:`\tau > 0` gives a valid test; this choice only tunes where it is most powerful.
    """
    a = _check_alpha(alpha)
    s = np.asarray(se_horizon, dtype=np.float64)
    if not np.isfinite(s).all() or (s <= 0).any():
        raise InputError("se_horizon: the standard error expected at the horizon must be finite and > 0")
    return s * math.sqrt(_mixture_x(a))


def mixture_boundaries(fractions: ArrayLike, alpha: float = 0.05) -> Boundaries:
    r"""The mSPRT / confidence-sequence rejection region on the z scale at given looks.

    With :math:`\tau` from :func:`mixture_tau` at information fraction 1 (so
    :math:`\tau^2/\mathrm{se}_k^2 = x\,t_k`), :math:`\Lambda_k \ge 1/\alpha` is

    .. math:: |Z_k| \ge \sqrt{\left(1 + \frac{1}{x t_k}\right)\bigl(2\log(1/\alpha) + \log(1 + x t_k)\bigr)}.

    Two-sided only. Used by the power calculator; with finitely many looks the design's
    type-I error is below ``alpha`` (Ville's inequality holds for continuous monitoring).
    """
    t = _check_fractions(fractions)
    a = _check_alpha(alpha)
    x = _mixture_x(a) * t
    b = np.sqrt((1.0 + 1.0 / x) * (-2.0 * math.log(a) + np.log1p(x)))
    return Boundaries(t, b, -b, a, "two-sided", "msprt")


def _reject_prob(boundaries: Boundaries, drift: float) -> float:
    return crossing_probabilities(boundaries, drift).reject


def drift_for_power(boundaries: Boundaries, power: float = 0.8) -> float:
    r"""The drift :math:`\delta = \theta\sqrt{I_K}` at which the design rejects with probability ``power``.

    For ``alternative="smaller"`` the returned drift is negative. Solved by root finding on
    :func:`crossing_probabilities` (Illinois regula falsi, to 1e-10 in power), bracketed by steps of
    20% from the one-look drift :math:`z_{1-\alpha/2} + z_{\text{power}}`: 6 to 9 numerical
    integrations where the whole range ``[0, 40]`` took about 15.
    """
    pw = float(power)
    if not boundaries.alpha < pw < 1.0:
        raise InputError(f"power must be in (alpha, 1) = ({boundaries.alpha}, 1); got {power!r}")
    sign = -1.0 if boundaries.alternative == "smaller" else 1.0
    a = boundaries.alpha / (2.0 if boundaries.alternative == "two-sided" else 1.0)
    guess = _z(1.0 - a) + _z(pw)  # the one-look drift (up to the far tail's share); designs with looks need more
    d = root_from_guess(lambda x: _reject_prob(boundaries, sign * x), pw, guess, 0.0, 40.0, tol=1e-10)
    return sign * d


def inflation_factor(boundaries: Boundaries, power: float = 0.8) -> float:
    r"""Maximum sample size of the sequential design relative to the fixed-horizon test.

    .. math:: R = \left(\frac{\delta^*_{\text{seq}}}{\delta^*_{\text{fixed}}}\right)^2,

    where :math:`\delta^*` is the drift reaching ``power`` (Jennison and Turnbull 2000, sec.
    2.3, Tables 2.2 and 2.4: e.g. :math:`R_P(5, 0.05, 0.2) = 1.229` and :math:`R_B(5, 0.05, 0.2) = 1.028` for the
    classic designs).
    The fixed test is the same design with one look at :math:`t = 1`.
    """
    fixed = peeking_boundaries([1.0], boundaries.alpha, boundaries.alternative)
    return (drift_for_power(boundaries, power) / drift_for_power(fixed, power)) ** 2


# ----------------------------------------------------------------------------- data-level tests
#: the tests on data (estimates and SEs with looks on the last axis) live in :mod:`onlineeval.stats.sequential_tests`;
#: importing them from here still works (loaded on first use: that module builds on the boundaries above)
_DATA_LEVEL = frozenset(
    ("SequentialResult", "confidence_sequence", "group_sequential_test", "msprt", "peeking_test", "sequential_test",
     "z_equivalent")
)


def __getattr__(name: str) -> object:
    if name in _DATA_LEVEL:
        from onlineeval.stats import sequential_tests

        return getattr(sequential_tests, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
