r"""The CLT interval of an off-policy estimate and its warnings: one rule for :meth:`Estimator.estimate
<onlineeval.estimators.base.Estimator.estimate>` (library callers) and ``onlineeval estimate`` /
:func:`onlineeval.estimate` (:mod:`onlineeval.estimators.log_estimates`, which reads its numbers from it).

- Interval: ``estimate -+ t_df(1 - alpha/2) x se`` (:func:`clt_quantile`, :func:`clt_interval`), not ``z``, with
  ``df`` Bell and McCaffrey's degrees of freedom of the clustered variance (:func:`working_df`): ``G - 1`` for ``G``
  clusters (users; impressions without user ids) of equal weight, fewer where a few clusters hold the weight.
- Few clusters: fewer than :data:`FEW_CLUSTERS` effective clusters by impressions (:func:`effective_clusters`)
  make a warning (:func:`few_clusters_text`).
- Skewed influence values: where the first Edgeworth term puts one tail's miss rate above twice its nominal
  ``alpha / 2`` the interval is lopsided, and a warning says on which side (:func:`influence_skewness`,
  :func:`lopsided_excess`, :func:`lopsided_text`).
- A standard error that holds a data-driven choice fixed (adaptive IPS's behaviours, the direct method's fitted
  click model: ``Estimator.clt_holds_fixed``): without a bootstrap a warning (:func:`held_fixed_text`); with one,
  the SD of the estimator's own bootstrap (the choice made again in every resample) is the standard error
  (:data:`BOOTSTRAP_SE`, :func:`bootstrap_se_text`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from onlineeval.estimators._arrays import FloatArray, IntArray
    from onlineeval.estimators.logs import LoggedData

__all__ = [
    "BOOTSTRAP_SE",
    "CHOICE_HELD",
    "DELTA_SE",
    "FEW_CLUSTERS",
    "MODEL_HELD",
    "again_text",
    "bootstrap_se_text",
    "clt_interval",
    "clt_quantile",
    "clustered_df",
    "difference_df",
    "differences_held_text",
    "effective_clusters",
    "estimate_df",
    "few_clusters_text",
    "held_fixed_text",
    "influence_skewness",
    "lopsided_difference",
    "lopsided_excess",
    "lopsided_text",
    "measured_text",
    "paired_mean",
    "refused_paired_text",
    "working_df",
]

#: what a delta-method standard error holds fixed (``Estimator.clt_holds_fixed``): adaptive IPS's choice ...
CHOICE_HELD = "the data-driven choice of behaviours"
#: ... and the direct method's click model fitted on the log
MODEL_HELD = "the click model fitted on the log"
#: what the estimator's bootstrap does in every resample
_AGAIN = {CHOICE_HELD: "makes the choice again", MODEL_HELD: "fits the model again"}
#: how far off the held-fixed standard error was where it was measured (each estimator its own figure)
_MEASURED = {
    CHOICE_HELD: "adaptive_ips: about 0.7 of its estimates' SD over 200 replicates of configs/counterfactual.yaml; "
                 "4.4x too small on simulated 50,000-impression logs",
    MODEL_HELD: "dm: its 95% intervals held the exact reciprocal rank in 69 of 400 simulated 2,000-impression logs "
                "of PBM clicks, a PBM cross-fitted over two folds of the users on each",
}


def again_text(fixed: str) -> str:
    """What the bootstrap of an estimator holding ``fixed`` does in every resample (``fits the model again``)."""
    return _AGAIN.get(fixed, "makes it again")


def measured_text(fixed: str) -> str:
    """`` (how far off the held-fixed standard error was, where measured)`` for ``fixed``, else ``""``."""
    return f" ({_MEASURED[fixed]})" if fixed in _MEASURED else ""

#: fewer effective clusters than this make the CLT interval's warning (:func:`few_clusters_text`)
FEW_CLUSTERS = 30

#: ``se_source`` of a delta-method standard error
DELTA_SE = "delta method"
#: ``se_source`` of an estimate or difference whose standard error is its bootstrap's SD (the choice held fixed by
#: the delta method made again in every resample)
BOOTSTRAP_SE = "bootstrap SD (the data-driven choice or model fit made again in every resample)"


def clt_quantile(alpha: float, *, df: float) -> float:
    r"""The CLT intervals' quantile :math:`t_{\nu}(1-\alpha/2)` with ``df`` :math:`\nu` degrees of freedom
    (:func:`working_df`; ``G - 1`` for ``G`` clusters of equal weight: the reference distribution of a mean over
    ``G`` clusters with the CR1 standard error, :math:`G/(G-1)` times the sum of squared cluster deviations; Cameron
    and Miller 2015), not :math:`z`: with 4 clusters :math:`z` = 1.96 covers about 86%, :math:`t_3` = 3.18 95%
    (tests/test_estimate_review3.py measures both); at 300 clusters they differ by 0.4%. NaN when ``df`` is below 1
    or NaN (fewer than 2 clusters). ``df`` is keyword-only: the second argument was the number of clusters ``G``
    before, and a call written for that now fails instead of taking ``G`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(1 - alpha / 2, df)) if df >= 1 else math.nan


def clt_interval(value: float, se: float, *, df: float, alpha: float) -> tuple[float, float]:
    """``value -+ t_df(1 - alpha/2) x se`` (:func:`clt_quantile`; keyword-only ``df``, which replaced the number of
    clusters, and ``alpha``)."""
    q = clt_quantile(alpha, df=df)
    return value - q * se, value + q * se


def influence_skewness(values: FloatArray) -> float:
    r"""The skewness :math:`m_3 / m_2^{3/2}` (central sample moments, divisor ``G``: scipy's ``skew(bias=True)``) of
    the ``G`` clusters' influence values (:math:`x_g - \hat\theta\, y_g` for a ratio estimate, the difference of two
    for a paired difference). NaN with fewer than 3 clusters or values that do not vary (beyond rounding: a spread
    below 1e-9 of their largest size)."""
    import numpy as np

    v = np.asarray(values, dtype=np.float64)
    size = float(np.max(np.abs(v))) if v.size >= 3 else math.nan
    if not (size > 0 and math.isfinite(size)):
        return math.nan
    w = v / size  # the moments of values near the float range's end (1e130: a cube overflows) on a unit scale
    c = w - w.mean()
    m2 = float(np.mean(c * c))
    if not math.sqrt(m2) > 1e-9:
        return math.nan
    return float(np.mean(c * c * c)) / m2 ** 1.5


def lopsided_excess(skewness: float, g: int, *, df: float, alpha: float) -> float:
    r"""How much more often than :math:`\alpha/2` the value falls on the heavy side of the CLT interval, by the first
    term of the Edgeworth expansion of a studentized mean of ``g`` clusters with skewness :math:`\gamma`
    (Hall 1992, *The Bootstrap and Edgeworth Expansion*, section 2.6):

    .. math::

        P(T \le x) = \Phi(x) + \frac{\gamma}{6\sqrt g}\,(2x^2 + 1)\,\phi(x) + O(g^{-1}),
        \qquad T = \sqrt g\,(\bar X - \mu) / S,

    so the interval :math:`\bar X \mp q\,S/\sqrt g` (``q`` :func:`clt_quantile`) has the value above it with
    probability :math:`\alpha/2 + \gamma (2q^2 + 1)\phi(q) / (6\sqrt g)` and below it with :math:`\alpha/2` minus that
    (to this order: the next term, :math:`g^{-1} q_2(x)\phi(x)` with :math:`q_2` odd, adds the same to both tails, so
    half the tails' difference is this term up to :math:`O(g^{-3/2})`). Returns
    :math:`|\gamma| (2q^2+1)\phi(q)/(6\sqrt g)`; NaN where the skewness or ``q`` is undefined. Under heavy tails the
    rate can be higher still: a log that misses the rare large weights also shows a smaller skewness
    (tests/test_lopsided_intervals.py measures both)."""
    q = clt_quantile(alpha, df=df)
    if not (math.isfinite(skewness) and math.isfinite(q) and g >= 3):
        return math.nan
    return abs(skewness) * (2 * q * q + 1) * math.exp(-q * q / 2) / math.sqrt(2 * math.pi) / (6 * math.sqrt(g))


def lopsided_text(skewness: float, g: int, *, df: float, alpha: float, difference: bool = False) -> str | None:
    """The warning of a CLT interval whose heavy side's miss rate :func:`lopsided_excess` puts above twice its nominal
    ``alpha / 2`` (``None`` otherwise): on which side the value falls, how often, and for a paired difference
    (``difference``) what that does to its test under no difference."""
    x = lopsided_excess(skewness, g, df=df, alpha=alpha)
    if not x > alpha / 2:
        return None
    heavy, light = ("above", "below") if skewness > 0 else ("below", "above")
    rate, nominal = alpha / 2 + x, alpha / 2
    what = "the difference's interval and p-value are" if difference else "the interval is"
    text = (f"{what} lopsided: the {g:,} clusters' influence values have skewness {skewness:+.3g}, so the true "
            f"{'difference' if difference else 'value'} falls {heavy} such a {1 - alpha:.0%} interval about "
            f"{rate:.1%} of the time rather than {nominal:.1%}, and {light} it less (the first Edgeworth term; it can "
            "be more where the log has not yet seen the rare large weights)")
    if difference:
        sign = "negative" if skewness > 0 else "positive"
        text += (f"; with no true difference a significantly {sign} difference comes up about that often, not "
                 f"{nominal:.1%}")
    return text + ": a longer log narrows the gap"


def lopsided_difference(diff: dict, pair: str, alpha: float, warnings: list[str]) -> None:
    """Add the lopsided-interval warning (:func:`lopsided_text`) of a paired difference's record ``diff`` (its
    ``skewness``, ``clusters`` and ``df``; ``onlineeval estimate --baseline``), prefixed ``pair``, to ``warnings``
    and to the record's own ``warnings``; nothing where its interval is not lopsided."""
    if diff.get("skewness") is None:  # an undefined difference's record
        return
    text = lopsided_text(diff["skewness"], diff["clusters"], df=diff["df"], alpha=alpha, difference=True)
    if text:
        warnings.append(f"{pair}: {text}")
        diff.setdefault("warnings", []).append(warnings[-1])


def working_df(inv: IntArray, g: int, sides: Sequence[tuple[FloatArray, FloatArray, float]]) -> float:
    r"""Bell and McCaffrey's (2002) degrees of freedom of the clustered (CR1) variance of a sum of ratio estimates
    :math:`\sum_s \sigma_s \hat R_s`, :math:`\hat R_s = \sum_i w_{s,i} y_i / \sum_i d_{s,i}`, under the working model
    in which the rewards :math:`y` (per impression, or per slot for slot weights) are independent with equal variance
    (Imbens and Kolesar 2016; Pustejovsky and Tipton 2018).

    ``inv`` (n,): each impression's cluster in ``0..g-1``; ``sides``: ``(w, dc, sign)`` per estimate, ``w`` its
    weights (n,) or (n, k) (0 at empty slots), ``dc`` (g,) the clusters' sums of its denominators, ``sign`` +1 or -1
    (a difference is two sides). Each reward's coefficient in cluster ``c``'s deviation :math:`x_c - \hat R y_c` is
    :math:`w (1[i \in c] - q_c) / D` with :math:`q_c = D_c / D` the cluster's share of the denominators; the variance
    is the quadratic form :math:`y' C' C y`, and its Satterthwaite degrees of freedom
    :math:`\operatorname{tr}(CC')^2 / \operatorname{tr}((CC')^2)` are computed from the ``g x g`` matrix
    :math:`CC'` = a diagonal plus a rank-``2 x sides`` term, without forming it (O(n + g); tests/dense_df.py forms it).

    ``g - 1`` when the clusters carry equal weight (equal sizes and weights), near 1 when one or two clusters hold it;
    never above ``g - 1``. ``g - 1`` where nothing carries weight (the standard error is then undefined anyway).
    The realised weights are the design: where a few impressions per cluster carry weight (whole-list IPS) the
    degrees of freedom fall below ``g - 1`` even for clusters of equal size, as the variance then rests on those few
    impressions (tests/test_estimators_intervals.py measures the coverage with a few heavy users).
    """
    import numpy as np

    m = len(sides)
    q = np.empty((g, m))
    ws, f = [], []
    for s, (w, dc, sign) in enumerate(sides):
        total = float(dc.sum())
        if not total > 0:
            return float(g - 1)
        q[:, s] = dc / total
        ws.append(np.asarray(w, dtype=np.float64))
        f.append(float(sign) / total)
    rows = _row_products(ws, f)
    if rows is None:  # weights whose squares overflow or underflow (1e200, 1e-200): each side to a largest of 1
        big = [max(float(w.max()), -float(w.min())) if w.size else 0.0 for w in ws]
        if not all(b > 0 and math.isfinite(b) for b in big):
            return float(g - 1)
        rows = _row_products([w / b for w, b in zip(ws, big, strict=True)],
                             [a * b for a, b in zip(f, big, strict=True)])
        if rows is None:
            return float(g - 1)
    # per cluster: the sums over its rewards of the products of the sides' coefficients
    pc = [[np.bincount(inv, rows[s][t], g) if t >= s else None for t in range(m)] for s in range(m)]
    return _df_of_cluster_sums(pc, q, g)


def clustered_df(dens: Sequence[FloatArray], products: Sequence[Sequence[FloatArray]],
                 signs: Sequence[float] = (1.0, -1.0)) -> float:
    r""":func:`working_df` from the clusters' sums alone: ``dens[s]`` (g,) each cluster's sum of side ``s``'s
    denominators, ``products[s][t]`` (g,) for ``t >= s`` each cluster's sum over its rewards (impressions, or shown
    slots for slot weights) of :math:`w_{s} w_{t}` (the sides' weights at the same reward), ``signs`` the sides'
    (+1 the target, -1 the baseline of a difference). Every term of :math:`CC'` is linear in these sums, so a
    design that adds them up impression by impression per user has the degrees of freedom ``onlineeval estimate``
    computes for its log without keeping the weights (the same number to rounding: ``working_df`` forms the
    products per reward, scaled, then sums them per cluster). ``g - 1`` where a side's denominators do not sum to a
    positive number or a sum is not finite; NaN with fewer than 2 clusters."""
    import numpy as np

    m = len(dens)
    if not 1 <= m <= len(signs):
        raise ValueError(f"clustered_df: one or two sides expected, got {m}")
    g = int(np.shape(dens[0])[0])
    if g < 2:
        return math.nan
    q = np.empty((g, m))
    f = []
    for s in range(m):
        dc = np.asarray(dens[s], dtype=np.float64)
        total = float(dc.sum())
        if not (total > 0 and math.isfinite(total)):
            return float(g - 1)
        q[:, s] = dc / total
        f.append(float(signs[s]) / total)
    raw = [[np.asarray(products[s][t], dtype=np.float64) if t >= s else None for t in range(m)] for s in range(m)]
    top = max(float(raw[s][s].max()) * f[s] * f[s] for s in range(m))  # a common scale: the df do not depend on it
    if not (top > 0 and math.isfinite(top)):
        return float(g - 1)
    pc = [[raw[s][t] * (f[s] * f[t] / top) if t >= s else None for t in range(m)] for s in range(m)]
    return _df_of_cluster_sums(pc, q, g)


def _df_of_cluster_sums(pc: list[list[FloatArray | None]], q: FloatArray, g: int) -> float:
    """The Satterthwaite degrees of freedom of :func:`working_df` from ``pc[s][t]`` (g,) (``t >= s``), the clusters'
    sums of the products of sides ``s`` and ``t``'s coefficients (any common scale), and ``q`` (g, m), the clusters'
    shares of each side's denominators."""
    import numpy as np

    m = q.shape[1]

    def sums(s: int, t: int) -> FloatArray:
        x = pc[min(s, t)][max(s, t)]
        assert x is not None
        return x

    diag = sums(0, 0) if m == 1 else sum(sums(s, t) for s in range(m) for t in range(m))
    cross = np.stack([-sum(sums(s, r) for s in range(m)) for r in range(m)], axis=1)
    a = np.array([[float(sums(s, t).sum()) for t in range(m)] for s in range(m)])
    # CC' = diag + cross q' + q cross' + q a q' = diag + P W P', P = [cross, q], W = [[0, I], [I, a]]
    p = np.hstack([cross, q])
    w_mat = np.block([[np.zeros((m, m)), np.eye(m)], [np.eye(m), a]])
    wptp = w_mat @ (p.T @ p)
    tr1 = float(diag.sum() + np.trace(wptp))
    tr2 = float(diag @ diag + 2 * np.trace(w_mat @ (p.T @ (diag[:, None] * p))) + np.trace(wptp @ wptp))
    if not (tr1 > 0 and tr2 > 0 and math.isfinite(tr1) and math.isfinite(tr2)):
        return float(g - 1)
    return float(min(max(tr1 * tr1 / tr2, 1.0), g - 1))


def _row_products(ws: list[FloatArray], f: list[float]) -> list[list[FloatArray]] | None:
    """Per impression, the sum over its slots of the products of sides ``s`` and ``t``'s coefficients ``f_s w_s``,
    all divided by the largest of the squares (the degrees of freedom do not depend on a common scale); ``None``
    where a square overflows or every one is 0 (the caller rescales the weights)."""
    import numpy as np

    m = len(ws)
    raw = [[None] * m for _ in range(m)]
    with np.errstate(over="ignore", invalid="ignore"):
        for s in range(m):
            for t in range(s, m):
                prod = ws[s] * ws[t] if ws[s].ndim == 1 else np.einsum("ij,ij->i", ws[s], ws[t])
                raw[s][t] = raw[t][s] = prod
        tops = [float(raw[s][s].max()) * f[s] * f[s] if raw[s][s].size else 0.0 for s in range(m)]
    top = max(tops)
    if not (top > 0 and math.isfinite(top)) or any(not math.isfinite(x) for x in tops):
        return None
    return [[raw[s][t] * (f[s] * f[t] / top) for t in range(m)] for s in range(m)]


def estimate_df(data: LoggedData, weights: FloatArray | None, den_sums: FloatArray) -> float:
    """:func:`working_df` of one estimate of ``data`` with these ``weights`` (list (n,) or slot (n, k); an estimator
    without weights, the direct method: ``G - 1``) and its clusters' sums of denominators ``den_sums`` (g,); NaN
    with fewer than 2 clusters."""
    return difference_df(data, [(weights, den_sums)])


def difference_df(data: LoggedData, sides: Sequence[tuple[FloatArray | None, FloatArray]]) -> float:
    """:func:`working_df` of the difference of two estimates of ``data`` (``(weights, clusters' sums of
    denominators)`` of the target's, then the baseline's; one side: that estimate's); ``G - 1`` when a side has no
    weights (or the sides' weights differ in shape); NaN with fewer than 2 clusters."""
    import numpy as np

    if not 1 <= len(sides) <= 2:  # the signs are +1 for the first side, -1 for the second: a third would be cut
        raise ValueError(f"difference_df: one or two sides expected, got {len(sides)}")
    inv, g = data.user_groups
    if g < 2:
        return math.nan
    if any(w is None for w, _ in sides) or len({np.shape(w) for w, _ in sides}) != 1:
        return float(g - 1)
    signs = (1.0, -1.0)[:len(sides)]
    return working_df(inv, g, [(_shown(data, w), dc, sign) for (w, dc), sign in zip(sides, signs, strict=True)])


def _shown(data: LoggedData, w: FloatArray) -> FloatArray:
    import numpy as np

    w = np.asarray(w, dtype=np.float64)
    return w if w.ndim == 1 or data.all_valid else np.where(data.valid, w, 0.0)


def effective_clusters(data: LoggedData) -> tuple[int, float]:
    """``(G, (sum n_g)^2 / sum n_g^2)``: the clusters of ``data`` (users; impressions without user ids) and their
    effective number by impressions (``G`` for equal clusters, near 1 when one dominates). Computed once per log
    (kept by :meth:`LoggedData.cached <onlineeval.estimators.logs.LoggedData.cached>`): every estimate of a log, its
    undefined records and its few-clusters warning read the same value."""
    return data.cached("effective_clusters", lambda: _effective_clusters(data))


def _effective_clusters(data: LoggedData) -> tuple[int, float]:
    import numpy as np

    if data.user is None:
        return data.n, float(data.n)
    inv, g = data.user_groups
    sizes = np.bincount(inv, minlength=g).astype(np.float64)
    return int(g), float(sizes.sum() ** 2 / (sizes ** 2).sum())


def few_clusters_text(data: LoggedData | None = None, *, clusters: int = 0, effective: float = math.nan) -> str | None:
    """The warning of a CLT interval resting on few clusters: fewer than :data:`FEW_CLUSTERS` effective clusters
    (:func:`effective_clusters` of ``data``, or the given ``clusters`` and ``effective`` number); ``None``
    otherwise."""
    g, eff = effective_clusters(data) if data is not None else (clusters, effective)
    if not eff < FEW_CLUSTERS:
        return None
    size = (f" (effective number by impressions {eff:.1f}: a few clusters hold most impressions)"
            if eff < 0.8 * g else "")
    return (f"the CLT intervals and p-values rest on {g} clusters{size}, fewer than {FEW_CLUSTERS}: their t "
            "quantiles' degrees of freedom (df: G - 1 for clusters of equal weight, fewer for a few dominant ones) "
            "correct for that only approximately, so they may cover less than their level; treat them as "
            "approximate (more users, or the cluster bootstrap as a check)")


def held_fixed_text(fixed: str, bootstrap_option: str = "n_boot=N") -> str:
    """The warning of an estimate whose CLT standard error holds ``fixed`` (a data-driven choice, a fitted model)
    fixed, without a bootstrap: the standard error is too small, by how much where it was measured, and how to get
    a valid one (``bootstrap_option`` as the caller spells it: the library's ``n_boot=N``, the CLI's
    ``--bootstrap N``, the API's ``bootstrap=N``)."""
    return (f"its standard error, CLT interval and p-values hold {fixed} fixed and are too small"
            f"{measured_text(fixed)}; "
            f"{bootstrap_option} (e.g. 1000) {again_text(fixed)} in every resample and reports that bootstrap's SD "
            "as se, with the interval and p-values from it")


def differences_held_text(fixed: str, bootstrap: int, bootstrap_option: str = "n_boot=N") -> str:
    """The warning of the paired differences of an estimator whose delta method holds ``fixed``: with a bootstrap
    (``bootstrap`` resamples) their se is the paired bootstrap's; without one, too small, and how to get one."""
    return (f"the differences' delta-method standard error holds {fixed} fixed and understates the uncertainty; " + (
        f"their se, interval and p-value are the paired bootstrap's (SD of the resamples' differences; it "
        f"{again_text(fixed)} in every resample; se_source)" if bootstrap else
        f"their se, CLT interval and p-value are too small; {bootstrap_option} (e.g. 1000) takes them from a "
        f"bootstrap that {again_text(fixed)} in every resample"))


def refused_paired_text(fixed: str, n_boot: int, se_finite: bool) -> str:
    """The warning of a paired difference whose bootstrap of ``n_boot`` resamples (asked for, to redo ``fixed``)
    could not run on the log: no advice to ask for one; its delta-method se, when it has one, holds ``fixed``."""
    text = (f"the paired bootstrap asked for ({n_boot} resamples; it {again_text(fixed)} in each) could not be run "
            "on this log (see 'no bootstrap interval' above)")
    if se_finite:
        text += (f", so its se, CLT interval and p-value are the delta method's: they hold {fixed} fixed and "
                 "understate the uncertainty")
    return text


def bootstrap_se_text(fixed: str, n_boot: int, se: float, delta_se: float) -> str:
    """The note of an estimate whose standard error ``se`` is the SD of its ``n_boot`` bootstrap estimates (``fixed``
    made again in each) instead of the delta method's ``delta_se``."""
    return (f"se, interval and p-values are its bootstrap's: se = the SD of the {n_boot} resamples' estimates "
            f"({fixed} redone in each), {se:.4g}; the delta method's {delta_se:.4g} holds it fixed and is too small")


def paired_mean(data: LoggedData, num: FloatArray) -> tuple[float, float, float, int] | None:
    """The mean of per-impression differences ``num`` of two estimators' terms on ``data`` (the checks of
    :mod:`~onlineeval.estimators.dm_dr_check` and :mod:`~onlineeval.estimators.assumption_check`), its standard
    error over the log's clusters (the delta method's, as every estimate's), the skewness of the clusters' influence
    values and their number; ``None`` where it has no standard error (fewer than two clusters, or constant)."""
    from onlineeval.estimators.base import Estimator
    from onlineeval.estimators.results import Terms
    from onlineeval.stats import ratio_mean

    num_u, den_u, clusters = Estimator._cluster_sums(data, Terms(num=num))
    if clusters < 2:
        return None
    r = ratio_mean(num_u, den_u)
    if not (math.isfinite(r.se) and r.se > 0):
        return None
    return float(r.estimate), float(r.se), influence_skewness(num_u - r.estimate * den_u), int(clusters)
