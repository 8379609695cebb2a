"""Adaptive IPS's data-driven choice under resampling (moved from :mod:`onlineeval.estimators.adaptive_ips`, which
re-exports every name): per user type and cluster the sums the choice and the estimate read
(:class:`ChoiceFeatures`, :func:`choice_features`; cross-fitted: :class:`CrossFitFeatures`), and the choice made
again in every resample of the clusters from them (:func:`resampled_values`), for the cluster bootstrap of
``onlineeval estimate`` and the simulator's last-day bootstrap."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["DENSE_CELLS", "ChoiceFeatures", "CrossFitFeatures", "choice_features", "resampled_values"]


@dataclass(frozen=True)
class ChoiceFeatures:
    r"""Per user type, per cluster the sums that adaptive IPS's data-driven choice and estimate read, so that
    a cluster bootstrap can run the choice again in every resample (:func:`resampled_values`).

    ``clusters[t]`` are the clusters (indices ``< n_clusters``) holding rows of the ``t``-th type and
    ``sums[t]`` their ``(g_t, 13)`` sums over those rows: the row count; for each behaviour ``b`` of
    :data:`BEHAVIOURS` the terms :math:`x_b`; the squares of :math:`x_b - c_b`; the differences
    :math:`d_b = x_b - x_{\mathrm{ref}}` less :math:`e_b`; and their squares. ``centres[t]`` (2, 3) holds
    :math:`c` and :math:`e`, the type's whole-log means: the variances are shift-invariant, and the sums of
    centred values keep them from cancelling (:math:`s^2 = (\sum (x - c)^2 - n (\bar x - c)^2) / (n - 1)`)."""

    clusters: tuple[np.ndarray, ...]
    sums: tuple[np.ndarray, ...]
    centres: tuple[np.ndarray, ...]
    n_clusters: int
    reference: int
    #: ``(n_clusters, 13 T)``: the types' sums side by side, zero where a cluster has no row of the type, when it
    #: holds at most :data:`DENSE_CELLS` values (one product with the resamples' counts instead of a gather of
    #: their columns per type: 3x faster at 400 resamples of 5,900 users); ``None`` beyond. A log of one type
    #: (or without types) whose every cluster holds rows has its sums as this layout (the same array, any size)
    dense: np.ndarray | None = None
    #: the behaviours (indices into :data:`BEHAVIOURS`) the choice may take (:func:`candidate_behaviours`)
    allowed: tuple[int, ...] = (0, 1, 2)
    #: the user type of each entry of :attr:`sums` (the sorted distinct types of the rows)
    types: tuple[int, ...] = ()


@dataclass(frozen=True)
class CrossFitFeatures:
    """The cross-fitted choice's :class:`ChoiceFeatures`: ``whole`` those of every row; per fold holding rows,
    ``own`` those of its rows (whose terms the estimate sums), centred on the whole log's means of each type and
    laid out over the fold's clusters only, the columns ``cols`` of the resamples' counts. Every cluster lies in one
    fold, so in a resample the other folds' rows' sums, on which a fold's behaviours are chosen, are the whole's
    less the fold's own: the features hold about two logs' worth of sums whatever the number of folds (one table
    for the own rows of each fold and one for the other rows of each fold before: 1.5 GB per target at 300,000
    users and 10 folds, 0.19 GB now). ``reference`` the reference behaviour's index, which a type the other folds'
    resampled rows do not hold takes."""

    whole: ChoiceFeatures
    own: tuple[ChoiceFeatures, ...]
    cols: tuple[np.ndarray, ...]
    reference: int


#: the largest :attr:`ChoiceFeatures.dense` (values; 128 MB)
DENSE_CELLS = 1 << 24


def choice_features(types: np.ndarray, terms: Mapping[str, np.ndarray], cluster: np.ndarray, n_clusters: int,
                    reference: str = "standard", candidates: tuple[str, ...] | None = None,
                    centred_on: Mapping[int, np.ndarray] | None = None) -> ChoiceFeatures:
    """:class:`ChoiceFeatures` of a log: ``types`` (n,) each row's user type, ``terms`` each behaviour's (n,)
    terms (:meth:`AdaptiveIPS.behaviour_terms`), ``cluster`` (n,) each row's cluster in ``0..n_clusters - 1``
    (the interval's resampling unit), ``reference`` the behaviour the bias is measured against, ``candidates`` the
    behaviours the choice may take (default: those in ``terms``; a behaviour not in ``terms`` gets zero terms,
    never chosen); ``centred_on`` per type the ``(2, 3)`` centres to use instead of its rows' means (a fold's rows
    centred as the whole log's, so that their sums can be taken from the whole's: :class:`CrossFitFeatures`)."""
    from onlineeval.estimators.adaptive_ips import BEHAVIOURS, _type_codes

    ref = BEHAVIOURS.index(reference)
    allowed = tuple(i for i, b in enumerate(BEHAVIOURS) if (b in terms if candidates is None else b in candidates))
    if ref not in allowed or any(BEHAVIOURS[i] not in terms for i in allowed):
        raise ValueError(f"choice_features: candidates {candidates} must hold the reference {reference!r} and have "
                         "terms")
    n_rows = np.asarray(types).shape[0]
    x = np.stack([np.asarray(terms[b], dtype=np.float64) if b in terms else np.zeros(n_rows)
                  for b in BEHAVIOURS], axis=1)  # (n, 3)
    clusters, sums, centres = [], [], []
    codes = _type_codes(types).tolist()
    for t in codes:
        rows = np.flatnonzero(types == t)
        xt = x[rows]
        dt = xt - xt[:, ref:ref + 1]
        c, e = (xt.mean(axis=0), dt.mean(axis=0)) if centred_on is None else centred_on[int(t)]
        cols = np.concatenate([np.ones((rows.size, 1)), xt, (xt - c) ** 2, dt - e, (dt - e) ** 2], axis=1)
        used, inv = np.unique(cluster[rows], return_inverse=True)
        per = np.stack([np.bincount(inv, cols[:, j], used.size) for j in range(cols.shape[1])], axis=1)
        clusters.append(used.astype(np.int64))
        sums.append(per)
        centres.append(np.stack([c, e]))
    dense = None
    if len(sums) == 1 and clusters[0].size == int(n_clusters):  # one type in every cluster: its sums, no copy
        dense = sums[0]
    elif int(n_clusters) * 13 * len(sums) <= DENSE_CELLS:
        dense = np.zeros((int(n_clusters), 13 * len(sums)))
        for i, (used, per) in enumerate(zip(clusters, sums, strict=True)):
            dense[used, 13 * i:13 * (i + 1)] = per
    return ChoiceFeatures(tuple(clusters), tuple(sums), tuple(centres), int(n_clusters), ref, dense, allowed,
                          tuple(int(t) for t in codes))


def resampled_values(features: ChoiceFeatures | CrossFitFeatures, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Adaptive IPS's numerator and denominator in each resample: ``counts`` (m, n_clusters) how often each
    cluster is drawn; per resample and user type the behaviour of least estimated MSE (:func:`mse_score`,
    vectorised: the scores of :meth:`AdaptiveIPS.choose` to rounding, ties to the finer behaviour) on the
    resampled rows, and the sum of the chosen behaviours' terms over them (numerator) and their count
    (denominator): the estimate is ``num / den``. The variances come from sums of centred values (one pass)
    where ``choose`` makes two passes, so an exact tie of two scores (equal in exact arithmetic: contrived
    logs of evenly spaced values) may be broken the other way by rounding (64 of 12,000 resamples of 3,000
    such logs); with continuous weights the choices agree. A type without resampled rows adds nothing; one
    with a single row has infinite scores and takes the finest behaviour, as ``choose``.

    Cross-fitted (:class:`CrossFitFeatures`): per fold the behaviours chosen on the other folds' resampled rows
    (the reference where they hold no row of a type), summed over the fold's own resampled rows, as
    :meth:`AdaptiveIPS.cross_select` on the resampled log."""
    m = counts.shape[0]
    pick = np.arange(m)
    if isinstance(features, CrossFitFeatures):
        whole = features.whole
        every = _resampled_parts(whole, counts)
        at = {t: i for i, t in enumerate(whole.types)}
        num, total = np.zeros(m), np.zeros(m)
        for own, cols in zip(features.own, features.cols, strict=True):
            own_parts = _resampled_parts(own, counts[:, cols])
            other = list(every)  # the other folds' rows: the whole's less this fold's (row counts exactly)
            for t, p in zip(own.types, own_parts, strict=True):
                other[at[t]] = every[at[t]] - p
            chosen = _resampled_choices(whole, other, _row_total(other, m))
            for t, p in zip(own.types, own_parts, strict=True):
                choice = np.where(other[at[t]][:, 0] > 0, chosen[at[t]], features.reference)
                num += np.where(p[:, 0] > 0, p[pick, 1 + choice], 0.0)
            total += _row_total(own_parts, m)
        return num, total
    parts = _resampled_parts(features, counts)
    total = _row_total(parts, m)
    num = np.zeros(m)
    for p, choice in zip(parts, _resampled_choices(features, parts, total), strict=True):
        num += np.where(p[:, 0] > 0, p[pick, 1 + choice], 0.0)
    return num, total


def _resampled_parts(features: ChoiceFeatures, counts: np.ndarray) -> list[np.ndarray]:
    """Per user type of ``features`` its ``(m, 13)`` sums over each resample's rows (:func:`resampled_values`)."""
    if features.dense is not None:
        both = counts @ features.dense
        return [both[:, 13 * i:13 * (i + 1)] for i in range(len(features.sums))]  # (m, 13) each
    return [counts[:, idx] @ s for idx, s in zip(features.clusters, features.sums, strict=True)]


def _row_total(parts: list[np.ndarray], m: int) -> np.ndarray:
    """``(m,)`` the resamples' rows: the types' counts summed."""
    return np.sum([p[:, 0] for p in parts], axis=0) if parts else np.zeros(m)


def _resampled_choices(features: ChoiceFeatures, parts: list[np.ndarray], total: np.ndarray) -> list[np.ndarray]:
    """Per user type the ``(m,)`` behaviour (index into :data:`BEHAVIOURS`) of least estimated MSE in each resample
    (:func:`resampled_values`; a type without resampled rows gets a value that is not read)."""
    ref = features.reference
    allowed = np.asarray(features.allowed, dtype=np.intp)
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for p, (c, e) in zip(parts, features.centres, strict=True):
            n = p[:, :1]
            mean_x = p[:, 1:4] / n
            mean_d = p[:, 7:10] / n + e
            many = n > 1
            var_x = np.where(many, (p[:, 4:7] - n * (mean_x - c) ** 2) / (n - 1), np.inf)
            var_d = np.where(many, (p[:, 10:13] - n * (mean_d - e) ** 2) / (n - 1), np.inf)
            vx, vd = var_x / n, var_d / n
            bias2 = np.where(np.isfinite(vd), np.maximum(0.0, mean_d ** 2 - vd), 0.0)
            bias2[:, ref] = 0.0
            share = n / total[:, None]
            scores = share * share * (bias2 + vx)
            # the first of equal scores among the candidates: the finer behaviour
            out.append(allowed[np.argmin(scores[:, allowed], axis=1)])
    return out

