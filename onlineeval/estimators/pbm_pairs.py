"""PBM-IPS (:mod:`onlineeval.estimators.pbm_ips`): the (query, document) pairs of a log and a target under
one code, where the log shows them, and how far the log is from the conditions of the chosen click
propensity (the notes ``target_mass_unseen``, ``target_mass_rare_share``, ``target_slots_not_logged_share``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from onlineeval.errors import InputError
from onlineeval.estimators.base import LoggedData, Target
from onlineeval.estimators.position_bias import _groups
from onlineeval.estimators.position_bias._core import log_cache

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: a (query, document) pair the log shows fewer times than this is "rare" in the notes
RARE_SHOWS = 10


@dataclass(frozen=True, eq=False)
class _Pairs:
    """The (query, document) pairs of a log and a target under one code.

    ``inv``: ``(n,)`` distinct-query index of each impression; ``t``: ``(queries, k)`` the
    target lists (``-1``: empty); ``code_t``: ``(queries, k)`` pair codes of ``t`` (``-1`` on
    empty slots); ``code_log``: pair codes of the log's valid slots (``np.nonzero(data.valid)``
    order; with every slot valid, the ``(n, k)`` code matrix flattened); ``n_codes``: the code
    range; ``pair_query``, ``pair_doc``: ``(n_codes,)`` the distinct-query index and the
    document of each code."""

    inv: IntArray
    t: IntArray
    code_t: IntArray
    code_log: IntArray
    n_codes: int
    pair_query: IntArray
    pair_doc: IntArray

    def code_matrix(self, data: LoggedData) -> IntArray | None:
        """``(n, k)`` codes when every slot is valid (a view), else ``None``."""
        return self.code_log.reshape(data.shown.shape) if self.code_log.size == data.shown.size else None

    def slot_counts(self, data: LoggedData) -> FloatArray:
        """``(n_codes, k)`` how often the log shows each pair at each slot (computed once)."""
        cache = self.__dict__.get("_slot_counts")
        if cache is None:
            k, nc = data.k, self.n_codes
            mat = self.code_matrix(data)
            if mat is not None:  # one pass per column, no (pair, slot) code array
                cache = np.stack([np.bincount(mat[:, j], minlength=nc) for j in range(k)], axis=1).astype(np.float64)
            else:
                _, cols = _valid_positions(data)
                cache = np.bincount(self.code_log * k + cols, minlength=nc * k).reshape(nc, k).astype(np.float64)
            self.__dict__["_slot_counts"] = cache
        return cache  # type: ignore[no-any-return]

    def slot_of(self, k: int) -> IntArray:
        """``(n_codes,)`` the target's slot of each pair (its first, if repeated; ``-1``: not in
        the target's top ``k``)."""
        slot_of = np.full(self.n_codes, k, dtype=np.int64)
        tq, ts = np.nonzero(self.code_t >= 0)
        np.minimum.at(slot_of, self.code_t[tq, ts], ts)
        slot_of[slot_of == k] = -1
        return slot_of

    def codes_at(self, data: LoggedData, rows: IntArray, cols: IntArray) -> IntArray:
        """The pair codes of the valid slots ``(rows, cols)``."""
        mat = self.code_matrix(data)
        if mat is not None:
            return mat[rows, cols]
        out = np.full(data.shown.shape, -1, dtype=np.int64)
        vr, vc = _valid_positions(data)
        out[vr, vc] = self.code_log
        return out[rows, cols]

    def per_position(self, data: LoggedData, per_code: NDArray[Any], empty: Any) -> NDArray[Any]:
        """``(n, k)`` ``per_code`` at each logged slot's pair, ``empty`` on empty slots."""
        mat = self.code_matrix(data)
        if mat is not None:
            return per_code[mat]
        out = np.full(data.shown.shape, empty, dtype=per_code.dtype)
        rows, cols = _valid_positions(data)
        out[rows, cols] = per_code[self.code_log]
        return out


def _target_pairs(data: LoggedData, target: Target) -> _Pairs:
    """The pairs of ``data`` and ``target`` under one code (see :class:`_Pairs`): raw
    ``query * span + document`` codes when that range is small (no sort, no ranking), else
    the ranks of :func:`~onlineeval.estimators.position_bias._groups`."""
    rankings = getattr(target, "rankings", None)
    if rankings is None:
        raise InputError(f"pbm_ips needs a deterministic target with rankings(query); "
                         f"{getattr(target, 'name', 'target')!r} has none", data.source)
    uq, inv = data.query_groups
    k = data.k
    t = np.asarray(rankings(uq), dtype=np.int64)
    if t.ndim != 2 or t.shape[0] != uq.size:
        raise InputError(f"target {getattr(target, 'name', 'target')!r}: rankings must be a (queries, k) matrix",
                         data.source)
    t = t[:, :k]
    if t.shape[1] < k:
        t = np.concatenate([t, np.full((t.shape[0], k - t.shape[1]), -1, dtype=np.int64)], axis=1)
    tq, ts = np.nonzero(t >= 0)
    t_docs = t[tq, ts]
    all_valid = _all_valid(data)
    rows, cols = (None, None) if all_valid else _valid_positions(data)
    log_docs = data.shown if all_valid else data.shown[rows, cols]
    lo = int(min(t_docs.min(initial=0), log_docs.min(initial=0)))
    span = int(max(t_docs.max(initial=0), log_docs.max(initial=0))) - lo + 1
    code_t = np.full(t.shape, -1, dtype=np.int64)
    if uq.size * span <= max(data.shown.size // 2, 1 << 22):
        # dense (query, document) range: the raw code is the pair id
        base = np.arange(uq.size, dtype=np.int64) * span - lo
        code_log = (base[inv][:, None] + data.shown).reshape(-1) if all_valid else base[inv[rows]] + log_docs
        code_t[tq, ts] = base[tq] + t_docs
        n_codes = uq.size * span
        return _Pairs(inv, t, code_t, code_log, n_codes, np.repeat(np.arange(uq.size, dtype=np.int64), span),
                      np.tile(np.arange(lo, lo + span, dtype=np.int64), uq.size))
    # codes of (query, document) over the target's and the log's pairs together
    q_all = np.concatenate([tq, np.repeat(inv, k) if all_valid else inv[rows]])
    keys, code = _groups(np.stack([q_all, np.concatenate([t_docs, log_docs.reshape(-1)])], axis=1))
    code_t[tq, ts] = code[: tq.size]
    return _Pairs(inv, t, code_t, code[tq.size:], int(keys.shape[0]), keys[:, 0].astype(np.int64),
                  keys[:, 1].astype(np.int64))


def _all_valid(data: LoggedData) -> bool:
    """Whether every slot of the log shows a document (computed once per log)."""
    cache = log_cache(data, "pbm_ips")
    if "all_valid" not in cache:
        cache["all_valid"] = bool((data.shown >= 0).all())
    return cache["all_valid"]  # type: ignore[no-any-return]


def _clicked_positions(data: LoggedData) -> tuple[IntArray, IntArray]:
    """``np.nonzero(data.clicks)``, computed once per log (cached)."""
    cache = log_cache(data, "pbm_ips")
    if "clicked" not in cache:
        cache["clicked"] = np.nonzero(data.clicks)
    return cache["clicked"]  # type: ignore[no-any-return]


def _valid_positions(data: LoggedData) -> tuple[IntArray, IntArray]:
    """``np.nonzero(data.valid)``, computed once per log (cached)."""
    cache = log_cache(data, "pbm_ips")
    if "valid" not in cache:
        valid = data.valid
        if valid.all():
            n, k = valid.shape
            cache["valid"] = (np.repeat(np.arange(n, dtype=np.int64), k), np.tile(np.arange(k, dtype=np.int64), n))
        else:
            rows, cols = np.nonzero(valid)
            cache["valid"] = (rows.astype(np.int64), cols.astype(np.int64))
    return cache["valid"]  # type: ignore[no-any-return]


def target_slots(data: LoggedData, target: Target) -> IntArray:
    """``(n, k)`` the slot at which ``target`` shows each logged document in its top ``k``
    for the impression's query (``-1``: not in the target's top ``k``, or an empty slot)."""
    return _slots_from_pairs(data, _target_pairs(data, target))


def _slots_from_pairs(data: LoggedData, pairs: _Pairs) -> IntArray:
    return pairs.per_position(data, pairs.slot_of(data.k), -1)


def target_pair_shows(data: LoggedData, target: Target) -> IntArray:
    """``(n, k)`` how often the log shows (anywhere in its top ``k``) the document the
    target puts at each slot, for the impression's query (``-1`` on the target's empty
    slots). A 0 is a (query, document) pair the ``"empirical"`` propensity counts as 0."""
    pairs = _target_pairs(data, target)
    return _query_shows(data, pairs)[pairs.inv]


def _query_shows(data: LoggedData, pairs: _Pairs) -> IntArray:
    """``(queries, k)`` how often the log shows the target's document at each slot (``-1``:
    empty target slot)."""
    shows = pairs.slot_counts(data).sum(axis=1)
    return np.where(pairs.code_t >= 0, shows[np.maximum(pairs.code_t, 0)], -1).astype(np.int64)


def _condition_notes(data: LoggedData, pairs: _Pairs, theta: FloatArray, w: FloatArray, kind: str,
                     slots: IntArray | None, num: FloatArray) -> dict[str, Any]:
    r"""How far the log is from the conditions of the chosen propensity (see the
    :mod:`~onlineeval.estimators.pbm_ips` docstring), and warnings where they fail.

    ``target_mass_unseen``: :math:`\frac1n\sum_i\sum_s w_s\,\theta_s/\max\theta\,
    [\text{pair } (q_i, t_{q_i}(s)) \text{ never shown}]`; under ``"empirical"`` its
    expectation bounds the absolute bias (the estimate is conditionally unbiased for
    every pair shown at least once and counts 0 for the others, whose click
    probability is at most :math:`\theta_s/\max\theta`). ``target_mass_rare_share``:
    the share of the target's examination mass on pairs shown fewer than
    :data:`RARE_SHOWS` times. ``target_slots_not_logged_share`` (``"logged"``): share of
    the target's slots whose document the impression did not show. Sums over impressions
    are taken per distinct query, weighted by its impressions."""
    shows = _query_shows(data, pairs)  # (queries, k)
    n_q = np.bincount(pairs.inv, minlength=int(shows.shape[0])).astype(np.float64)
    has = shows >= 0
    mass = np.where(has, (w * theta / theta.max())[None, :], 0.0)
    total = float(n_q @ mass.sum(axis=1))
    n = max(data.n, 1)
    unseen = float(n_q @ (mass * (shows == 0)).sum(axis=1)) / n
    out: dict[str, Any] = {
        "target_mass_unseen": unseen,
        "target_mass_unseen_share": unseen * n / total if total > 0 else 0.0,
        "target_mass_rare_share": float(n_q @ (mass * (has & (shows < RARE_SHOWS))).sum(axis=1)) / total
        if total > 0 else 0.0,
        "rare_shows": RARE_SHOWS,
    }
    warnings: list[str] = []
    se = float(np.std(num) / math.sqrt(n)) if data.n > 1 else math.inf
    if kind == "empirical" and unseen > 0.5 * se:
        warnings.append(
            f"pbm_ips (empirical click propensity): {out['target_mass_unseen_share']:.1%} of the target's "
            f"examination mass is on (query, document) pairs this log never shows; they count 0, so the estimate "
            f"may be too low by up to {unseen:.3g} (standard error {se:.3g}); {out['target_mass_rare_share']:.1%} "
            f"is on pairs shown fewer than {RARE_SHOWS} times. Use click_propensity 'logger' (exact) with the "
            "logging policy, or a longer log")
    if kind == "logged" and slots is not None:
        n_target = int(n_q @ has.sum(axis=1))
        missing = (n_target - int(np.count_nonzero(slots >= 0))) / n_target if n_target else 0.0
        out["target_slots_not_logged_share"] = missing
        if missing > 0:
            warnings.append(
                f"pbm_ips (logged click propensity): {missing:.1%} of the target's slots show a document the "
                "impression did not; the 'logged' propensity is unbiased only when every impression shows every "
                "document of the target's top k, otherwise the estimate is scaled down (use 'logger' or "
                "'empirical')")
    if warnings:
        out["warnings"] = warnings
    return out
