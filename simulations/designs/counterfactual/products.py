r"""The degrees of freedom of the counterfactual design's paired differences: Bell and McCaffrey's, as ``onlineeval
estimate`` computes them for the same log (:func:`onlineeval.estimators.intervals.difference_df`), from per-user sums
the design adds up impression by impression.

The degrees of freedom of :math:`\hat R_B - \hat R_A` depend on the log only through each cluster's (user's) sums of
the two estimates' denominators and of the products of the two sides' importance weights at each reward,
:math:`\sum_{i \in u} w_{A,i}^2`, :math:`\sum_{i \in u} w_{A,i} w_{B,i}` and :math:`\sum_{i \in u} w_{B,i}^2` (over
the shown slots for slot weights; :func:`~onlineeval.estimators.intervals.clustered_df`). The design keeps these three
sums per user for every estimator it accumulates, as rows of its sums matrix after the numerators and denominators
(:class:`ProductLayout`: one row per distinct product, so ``ips`` and ``snips``, which share the list weight, share
their rows), and for adaptive IPS the products of every pair of its behaviours' weights (the choice, made on the
whole log, may give the two targets different behaviours for a user type: :math:`w^{(b)}_A w^{(b')}_B`). Estimators
that fit a model on the whole log take them from the whole log's weights when they are computed.

Weights are those of each estimator's ``Terms.weights`` (0 at empty slots): the list weight
:math:`\pi / \mu` (``ips``, ``snips``), the clipped list weight (``clipped_ips``), the prefix and item weights
(``rips``, ``iips``; adaptive IPS's ``cascade`` and ``independent``), the list weight at every shown slot (adaptive
IPS's ``standard``), any other estimator's own ``Terms.weights``; none (``dm``): ``G - 1``, as ``estimate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ProductLayout", "adaptive_df", "adaptive_rows", "add_products", "batch_weights",
           "choice_codes", "difference_df_of_sums", "products_of", "user_products"]

#: adaptive IPS's behaviours and the fused weights each takes
BEHAVIOUR_KINDS = {"independent": "item", "cascade": "prefix", "standard": "std"}


def _fused_kind(kind: str, est: Any) -> str:
    """The weights' kind of a fused estimator (:class:`~simulations.designs.counterfactual.fused.FusedTerms`)."""
    if kind in ("ips", "snips"):
        return "list"
    if kind == "clipped_ips":
        return f"clipped:{float(est.cap)!r}"
    return "prefix" if kind == "rips" else "item"


@dataclass
class ProductLayout:
    """The product rows of a design's sums matrix.

    ``specs``: the distinct products ``(kind_a, side_a, kind_b, side_b)`` (side 0 the first target, the baseline;
    ``side_a <= side_b``), row ``first + i`` of the sums matrix holding spec ``i``'s per-user sums. ``pairs[label]``:
    an accumulated estimator's specs ``(A A, A B, B B)``; ``behaviours[label][(b_a, b_b)]``: adaptive IPS's spec of
    behaviour ``b_a`` on side 0 times ``b_b`` on side 1 (``AB``), ``behaviours[label][(b,)]`` the pair ``(A A, B B)``
    of behaviour ``b`` with itself."""

    specs: list[tuple[str, int, str, int]] = field(default_factory=list)
    first: int = 0
    pairs: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    behaviours: dict[str, dict[tuple[str, ...], tuple[int, ...]]] = field(default_factory=dict)
    #: each accumulated estimator's kind of weights, and each adaptive IPS's behaviours' (a fused kind, or
    #: ``own:<label>`` / ``beh:<label>:<behaviour>`` for weights only the estimator's own terms give)
    kind_of: dict[str, str] = field(default_factory=dict)
    behaviour_kind: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def build(cls, estimators: list[tuple[str, Any]], whole_log: dict[str, bool], fused: Any,
              row_stats: set[str]) -> ProductLayout:
        """The layout of a design's ``estimators`` (``(label, estimator)``; ``whole_log`` marks those computed from
        the whole log, ``row_stats`` those of them kept row by row, adaptive IPS; ``fused`` the design's
        :class:`~simulations.designs.counterfactual.fused.FusedTerms` or None)."""
        from onlineeval.estimators.adaptive_ips import BEHAVIOURS

        out = cls()
        index: dict[tuple[str, int, str, int], int] = {}

        def spec(ka: str, sa: int, kb: str, sb: int) -> int:
            key = (ka, sa, kb, sb)
            if key not in index:
                index[key] = len(out.specs)
                out.specs.append(key)
            return index[key]

        fused_kinds = {} if fused is None else fused.fused
        behaviour_labels = set() if fused is None else set(fused.behaviour_labels)
        for label, est in estimators:
            if not whole_log[label]:
                kind = (_fused_kind(fused_kinds[label][0], est) if label in fused_kinds else f"own:{label}")
                out.kind_of[label] = kind
                out.pairs[label] = (spec(kind, 0, kind, 0), spec(kind, 0, kind, 1), spec(kind, 1, kind, 1))
            elif label in row_stats:
                kinds = {b: (BEHAVIOUR_KINDS[b] if label in behaviour_labels else f"beh:{label}:{b}")
                         for b in BEHAVIOURS}
                out.behaviour_kind[label] = kinds
                table: dict[tuple[str, ...], tuple[int, ...]] = {}
                for b in BEHAVIOURS:
                    table[(b,)] = (spec(kinds[b], 0, kinds[b], 0), spec(kinds[b], 1, kinds[b], 1))
                for ba in BEHAVIOURS:
                    for bb in BEHAVIOURS:
                        table[(ba, bb)] = (spec(kinds[ba], 0, kinds[bb], 1),)
                out.behaviours[label] = table
        return out

    def keys(self) -> list[str]:
        """The sums matrix's keys of the product rows, in order."""
        return [f"w2:{ka}@{sa}*{kb}@{sb}" for ka, sa, kb, sb in self.specs]


def batch_weights(data: Any, target_p: Any, kinds: set[str]) -> dict[tuple[str, int], np.ndarray]:
    """The fused kinds' weights of a batch for each side (``(kind, side)``: ``(n,)`` list weights, ``(n, k)`` slot
    weights, 0 at empty slots), from the targets' propensities ``target_p`` stacked over the sides and the logging
    propensities of ``data``: the operations of :class:`~simulations.designs.counterfactual.fused.FusedTerms` (and of
    the compiled step: the same bits)."""
    out: dict[tuple[str, int], np.ndarray] = {}
    if not kinds:
        return out
    valid = None if data.all_valid else data.valid

    def on_shown(x: np.ndarray) -> np.ndarray:
        return x if valid is None else np.where(valid, x, 0.0)

    w_list = target_p.list / data.p_list if kinds - {"prefix", "item"} else None
    for kind in kinds:
        if kind == "list":
            w = w_list
        elif kind == "prefix":
            w = on_shown(target_p.prefix / data.p_prefix)
        elif kind == "item":
            w = on_shown(target_p.item / data.p_item)
        elif kind == "std":
            w = (np.repeat(w_list[:, :, None], data.k, axis=2) if valid is None else
                 np.where(valid, w_list[:, :, None], 0.0))
        else:  # clipped:<cap>
            cap = float(kind.split(":", 1)[1])
            w = w_list - np.maximum(w_list - cap, 0.0)
        for side in range(w.shape[0]):
            out[(kind, side)] = w[side]
    return out


def products_of(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's product of two sides' weights: ``x y`` of list weights ``(n,)``, the row sums of ``x y`` of slot
    weights ``(n, k)`` (:func:`onlineeval.estimators.derived.weighted_row_sum`: numpy's order, as the compiled step
    adds them)."""
    from onlineeval.estimators.derived import weighted_row_sum

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"the two sides' weights differ in shape: {x.shape} and {y.shape}")
    if x.ndim == 1:
        return x * y
    return weighted_row_sum(np.ascontiguousarray(x), np.ascontiguousarray(y))


def add_products(acc: np.ndarray, layout: ProductLayout, weights: dict[tuple[str, int], np.ndarray],
                 user: np.ndarray) -> None:
    """Add a batch's products of the two sides' weights (``weights[(kind, side)]``, :func:`batch_weights` and the
    estimators' own) to the product rows of the sums matrix ``acc`` (``(V, population)``; rows ``layout.first +
    i``), per user of the batch's rows ``user``: each spec's :func:`products_of` summed per user in row order
    (``np.bincount``). A spec whose side has no weights (an estimator without them) adds nothing. (All specs in one
    multiplication, slot sum and bincount measured 5x slower: their large temporaries are fresh memory each
    batch.)"""
    pop = acc.shape[1]
    for i, (ka, sa, kb, sb) in enumerate(layout.specs):
        x, y = weights.get((ka, sa)), weights.get((kb, sb))
        if x is not None and y is not None:
            acc[layout.first + i] += np.bincount(user, products_of(x, y), pop)


def user_products(weights: list[np.ndarray], user: np.ndarray, population: int) -> list[np.ndarray]:
    """Per user (``population``) the sums of ``w_A w_A``, ``w_A w_B``, ``w_B w_B`` of the two sides' ``weights``
    over the rows of ``user``."""
    a, b = weights
    return [np.bincount(user, products_of(x, y), population) for x, y in ((a, a), (a, b), (b, b))]


def difference_df_of_sums(den_a: np.ndarray, den_b: np.ndarray, aa: np.ndarray, ab: np.ndarray,
                          bb: np.ndarray) -> float:
    """The degrees of freedom of ``R_B - R_A`` from the active users' sums of the two denominators and the weights'
    products (:func:`~onlineeval.estimators.intervals.clustered_df` with the target B first, as ``estimate``'s
    difference)."""
    from onlineeval.estimators.intervals import clustered_df

    return clustered_df([den_b, den_a], [[bb, ab], [None, aa]])


def adaptive_rows(layout: ProductLayout, label: str, codes: list[np.ndarray]) -> list[np.ndarray] | None:
    """Per active user the rows of the sums matrix holding adaptive IPS's products A A, A B, B B of the behaviours
    the whole-log choice gave its rows for each side (``codes[side]`` over the active users, index into
    :data:`~onlineeval.estimators.adaptive_ips.BEHAVIOURS`); ``None`` for a code out of range."""
    from onlineeval.estimators.adaptive_ips import BEHAVIOURS

    table, first, nb = layout.behaviours[label], layout.first, len(BEHAVIOURS)
    ca, cb = (np.asarray(c, dtype=np.int64) for c in codes)
    if ca.size and (min(int(ca.min()), int(cb.min())) < 0 or max(int(ca.max()), int(cb.max())) >= nb):
        return None
    same = np.array([[first + i for i in table[(b,)]] for b in BEHAVIOURS], dtype=np.int64)  # (behaviour, side)
    cross = np.array([first + table[(b1, b2)][0] for b1 in BEHAVIOURS for b2 in BEHAVIOURS], dtype=np.int64)
    return [same[ca, 0], cross[ca * nb + cb], same[cb, 1]]


def adaptive_df(layout: ProductLayout, label: str, gathered: np.ndarray, codes: list[np.ndarray],
                den: np.ndarray) -> float:
    """The degrees of freedom of adaptive IPS's difference (:func:`adaptive_rows`) from the sums matrix gathered over
    the active users (``gathered`` (V, n)), the denominators the users' impressions ``den``."""
    rows = adaptive_rows(layout, label, codes)
    if rows is None:
        return math.nan
    at = np.arange(den.size)
    aa, ab, bb = (gathered[r, at] for r in rows)
    return difference_df_of_sums(den, den, aa, ab, bb)


def choice_codes(choice: Any, user: np.ndarray, population: int) -> np.ndarray:
    """Per user (``population``) the index into :data:`~onlineeval.estimators.adaptive_ips.BEHAVIOURS` of the
    behaviour adaptive IPS's ``choice`` (``select``'s: one name, or each row's index) gives the user's rows (a
    user's rows share a type and a fold, so a behaviour); -1 for users without rows."""
    from onlineeval.estimators.adaptive_ips import BEHAVIOURS

    out = np.full(population, -1, dtype=np.int64)
    out[user] = BEHAVIOURS.index(choice) if isinstance(choice, str) else np.asarray(choice)
    return out
