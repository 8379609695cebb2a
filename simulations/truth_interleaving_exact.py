r"""The exact truth of a two-ranker team-draft or balanced interleaving design (prefix credit) whose users' click
models are chains (metric users of adaptive metrics too), independent-click tables or user browsing models (UBM), by
grade: no Monte Carlo.

Both methods draw their interleaved list from a few fair coins (:class:`~simulations.designs.interleaving.DrawTable`
holds every list they can show, with its teams, per query and coin pattern), and the users click along a chain:
at slot :math:`r`, examined, the user clicks with probability :math:`a_r` (the grade's attractiveness), goes on
after a click with :math:`c_r` and after a skip with :math:`s_r` (:class:`clickmodels.cascade.Chain`; an
independent-click model is the chain :math:`a_r = e_r \alpha_g`, :math:`c_r = s_r = 1`). The design's Delta is
the ratio :math:`E[o/2] / P(\text{a click})` of the impression's outcome :math:`o \in \{-1, 0, 1\}` and whether it
has a click (:func:`simulations.truth_interleaving.interleaving_truth`), each an expectation over the query
(frequencies), the coins (uniform over the table's patterns), the user type (shares) and the clicks, computed here
by dynamic programmes over the slots:

- team-draft: the outcome is the sign of B's clicked slots minus A's, :math:`\sum_r w_r C_r` with
  :math:`w_r = \pm 1` by team (0 at empty slots); the programme carries, for every partial difference
  :math:`d`, the probability of being at slot :math:`r` still examining with difference :math:`d` and of having
  stopped with it (:func:`team_draft_outcome`);
- balanced interleaving: each list's credit counts the clicks on documents it ranks at :math:`\kappa` or above,
  :math:`\kappa` from the lowest clicked slot :math:`l`, so the weights :math:`w^{(l)}_r = [\text{rank}_B(r) \le
  \kappa_l] - [\text{rank}_A(r) \le \kappa_l]` depend on :math:`l`: one programme per :math:`l` over the slots
  above it, the click at :math:`l` and no click below it (:func:`balanced_outcome`).

A UBM user (:class:`~simulations.user_tables.UbmTables`) examines slot :math:`r` with :math:`\gamma_{r j}`,
:math:`j` one past the slot of the last click above (0: none), and never stops: its programmes carry :math:`j`
beside :math:`d` (:func:`ubm_team_draft_outcome`, :func:`ubm_balanced_outcome`; below the lowest click, no click has
probability :math:`\prod_{r > l} (1 - a_r \gamma_{r, l + 1})`).

A metric user of an adaptive metric (RR, INST, INSQ, ERR: :class:`~simulations.user_tables.RowChain`) is a chain
whose continuation is its metric's on the row's whole list: each row's chain is the model's own, and the programmes
take it as they take a grade chain's.

A query on which the two rankers show the same list has the exact 0 the Monte Carlo gives it
(:func:`simulations.truth_interleaving.identical_lists`); its impressions stay in the denominator. Tested against
the enumeration of every click pattern with the models' own likelihoods and against the Monte Carlo truth.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from simulations.user_tables import RowChain, UbmTables, chain_tables, slot_chain, slot_values
from simulations.world import World

if TYPE_CHECKING:
    from simulations.config import Config, DesignConfig
    from simulations.runner import Truth
    from simulations.users import UserModels

__all__ = ["EXACT_METHOD", "balanced_outcome", "exact_inputs", "exact_interleaving_parts", "exact_interleaving_truth",
           "no_click_below", "team_draft_outcome", "truth_of_parts", "ubm_balanced_outcome", "ubm_no_click",
           "ubm_team_draft_outcome"]

#: the truth's ``method`` (summary.json ``truth_method``; the conventions' ``truth`` says what it is)
EXACT_METHOD = "exact (dynamic programme over the clicks)"



def no_click_below(a: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``(rows, k + 1)``: ``Z[:, r]`` the probability of no click at slots ``r, r + 1, ...`` given the slot ``r`` is
    examined (``Z[:, k] = 1``): :math:`Z_r = (1 - a_r)(1 - s_r + s_r Z_{r+1})` (the continuation after a click does
    not enter). ``1 - Z[:, 0]`` is the probability of a click."""
    rows, k = a.shape
    z = np.ones((rows, k + 1))
    for r in range(k - 1, -1, -1):
        z[:, r] = (1.0 - a[:, r]) * (1.0 - s[:, r] + s[:, r] * z[:, r + 1])
    return z


def team_draft_outcome(a: np.ndarray, c: np.ndarray, s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``(rows,)`` expected sign of :math:`\\sum_r w_r C_r` (``w``: ``(rows, k)`` in -1, 0, 1) for clicks along the
    chains ``a, c, s`` (``(rows, k)`` each; the first slot examined). The programme's state: the probability of
    examining slot ``r`` with partial difference ``d`` (``d + k`` the column) and, apart, of having stopped with
    ``d``; the outcome's expectation sums ``sign(d)`` over both at the end."""
    rows, k = a.shape
    width = 2 * k + 1
    go = np.zeros((rows, width))
    go[:, k] = 1.0
    stopped = np.zeros((rows, width))
    for r in range(k):
        click = go * a[:, r : r + 1]
        skip = go - click
        shifted = _shift(click, w[:, r])  # the clicked mass moves by the slot's weight
        go_on = shifted * c[:, r : r + 1] + skip * s[:, r : r + 1]
        stopped += shifted + skip - go_on
        go = go_on
    return (go + stopped) @ np.sign(np.arange(width) - k).astype(np.float64)


def balanced_outcome(a: np.ndarray, c: np.ndarray, s: np.ndarray, rank_a: np.ndarray, rank_b: np.ndarray,
                     valid: np.ndarray | None = None) -> np.ndarray:
    """``(rows,)`` expected outcome of balanced interleaving with prefix credit (the sign of B's credit minus A's,
    :meth:`simulations.designs.interleaving.DrawTable.balanced_outcome`) for clicks along the chains ``a, c, s``
    (``(rows, k)``; the first slot examined), ``rank_a`` / ``rank_b`` the ``(rows, k)`` ranks of the shown
    documents in A and B, ``valid`` the filled slots (``None``: all; clicks elsewhere are not counted, and the
    chains give them probability 0 anyway). Conditioned on the lowest clicked slot ``l``: a programme over the
    slots above it with the weights of ``kappa_l``, the click at ``l``, then no click below it
    (:func:`no_click_below`)."""
    rows, k = a.shape
    if valid is not None:
        a = np.where(valid, a, 0.0)
    z = no_click_below(a, s)
    width = 2 * k + 1
    sign = np.sign(np.arange(width) - k).astype(np.float64)
    out = np.zeros(rows)
    idx = np.arange(rows)
    for last in range(k):
        kappa = np.minimum(rank_a[idx, last], rank_b[idx, last])[:, None]
        w = (rank_b <= kappa).astype(np.int8) - (rank_a <= kappa).astype(np.int8)
        go = np.zeros((rows, width))
        go[:, k] = 1.0
        for r in range(last):  # examining slot r + 1 with difference d, having clicked or skipped slot r
            click = go * a[:, r : r + 1]
            skip = (go - click) * s[:, r : r + 1]
            click = click * c[:, r : r + 1]
            go = skip + _shift(click, w[:, r])
        # the click at the lowest clicked slot, then none below it
        end = go * (a[:, last] * (1.0 - c[:, last] + c[:, last] * z[:, last + 1]))[:, None]
        out += _shift(end, w[:, last]) @ sign
    return out


def _ubm_step(go: np.ndarray, a_r: np.ndarray, exam_r: np.ndarray, w_r: np.ndarray, r: int) -> np.ndarray:
    r"""One slot ``r`` of a UBM programme: ``go`` ``(rows, 2k + 1, k + 1)`` the probability of each partial difference
    and ``j`` (one past the last click's slot, 0: none); a click (probability :math:`a_r \gamma_{r j}`) moves the
    mass by the slot's weight ``w_r`` into ``j = r + 1``, a skip leaves it."""
    g = np.zeros(go.shape[2])
    g[: r + 1] = exam_r[: r + 1]
    click = go * (a_r[:, None, None] * g[None, None, :])
    go = go - click
    go[:, :, r + 1] += _shift(click.sum(axis=2), w_r)
    return go


def ubm_no_click(a: np.ndarray, exam: np.ndarray, j: int, start: int) -> np.ndarray:
    r"""``(rows,)`` probability of no UBM click at slots ``start, start + 1, ...`` with ``j`` fixed (no click there
    moves it): :math:`\prod_{r \ge start} (1 - a_r \gamma_{r j})` (1 from ``start = k``)."""
    if start >= a.shape[1]:
        return np.ones(a.shape[0])
    return np.prod(1.0 - a[:, start:] * exam[start:, j][None, :], axis=1)


def ubm_team_draft_outcome(a: np.ndarray, exam: np.ndarray, w: np.ndarray) -> np.ndarray:
    """:func:`team_draft_outcome` for UBM clicks (``a`` ``(rows, k)`` the attractiveness at the slots, 0 at empty
    ones; ``exam`` :class:`UbmTables`' ``(k, k)``): the programme's state is the partial difference and ``j``."""
    rows, k = a.shape
    go = np.zeros((rows, 2 * k + 1, k + 1))
    go[:, k, 0] = 1.0
    for r in range(k):
        go = _ubm_step(go, a[:, r], exam[r], w[:, r], r)
    return go.sum(axis=2) @ np.sign(np.arange(2 * k + 1) - k).astype(np.float64)


def ubm_balanced_outcome(a: np.ndarray, exam: np.ndarray, rank_a: np.ndarray, rank_b: np.ndarray) -> np.ndarray:
    r""":func:`balanced_outcome` for UBM clicks (arguments as :func:`ubm_team_draft_outcome`'s and
    :func:`balanced_outcome`'s): for each lowest clicked slot ``l``, the programme over the slots above it with
    ``kappa_l``'s weights, the click at ``l`` (:math:`a_l \gamma_{l j}`), then no click below it
    (:func:`ubm_no_click` at ``j = l + 1``)."""
    rows, k = a.shape
    sign = np.sign(np.arange(2 * k + 1) - k).astype(np.float64)
    idx = np.arange(rows)
    out = np.zeros(rows)
    for last in range(k):
        kappa = np.minimum(rank_a[idx, last], rank_b[idx, last])[:, None]
        w = (rank_b <= kappa).astype(np.int8) - (rank_a <= kappa).astype(np.int8)
        go = np.zeros((rows, 2 * k + 1, k + 1))
        go[:, k, 0] = 1.0
        for r in range(last):
            go = _ubm_step(go, a[:, r], exam[r], w[:, r], r)
        g = np.zeros(k + 1)
        g[: last + 1] = exam[last, : last + 1]
        click = (go * g[None, None, :]).sum(axis=2) * a[:, last : last + 1]
        end = click * ubm_no_click(a, exam, last + 1, last + 1)[:, None]
        out += _shift(end, w[:, last]) @ sign
    return out


def _shift(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Rows of ``x`` (probabilities by difference ``d``, column ``d + k``) moved by ``w`` (-1, 0 or +1 per row)."""
    out = np.where((w == 0)[:, None], x, 0.0)
    up, down = (w == 1)[:, None], (w == -1)[:, None]
    out[:, 1:] += np.where(up, x[:, :-1], 0.0)
    out[:, :-1] += np.where(down, x[:, 1:], 0.0)
    return out


#: :func:`exact_interleaving_parts` already computed: (id of the table, the users' tables' digest) -> (a weak
#: reference to the table, the parts)
_PARTS: dict[tuple[int, str], tuple[Any, np.ndarray, np.ndarray]] = {}

#: rows of a table the programmes take at a time (their (rows, 2k + 1) states and the rows' chain tables stay in
#: the cache, and a large table's truth needs no more memory than a block's)
CHUNK_ROWS = 4096


def _row_parts(table: Any, types: list[Any], shares: np.ndarray,
               lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``(E[o / 2], P(a click))`` of the table's rows ``lo:hi``, user types mixed by ``shares``."""
    grades = table.grades[lo:hi].astype(np.intp)
    valid = None if table.valid is None else table.valid[lo:hi]
    num, den = np.zeros(hi - lo), np.zeros(hi - lo)
    for share, tables in zip(shares, types, strict=True):
        if isinstance(tables, UbmTables):
            a = slot_values(tables.attract, grades)
            if valid is not None:
                a = np.where(valid, a, 0.0)
            if table.signed is not None:
                outcome = ubm_team_draft_outcome(a, tables.exam, table.signed[lo:hi])
            else:
                outcome = ubm_balanced_outcome(a, tables.exam, table.ranks[0][lo:hi], table.ranks[1][lo:hi])
            num += share * outcome / 2.0
            den += share * (1.0 - ubm_no_click(a, tables.exam, 0, 0))
            continue
        a, c, s = slot_chain(tables, grades)
        if valid is not None:
            a = np.where(valid, a, 0.0)
        if table.signed is not None:
            outcome = team_draft_outcome(a, c, s, table.signed[lo:hi])
        else:
            outcome = balanced_outcome(a, c, s, table.ranks[0][lo:hi], table.ranks[1][lo:hi], valid)
        num += share * outcome / 2.0
        den += share * (1.0 - no_click_below(a, s)[:, 0])
    return num, den


def exact_inputs(design: DesignConfig, world: World, users: UserModels
                 ) -> tuple[list[np.ndarray], Any, list[Any]] | None:
    """``(the two rankers' lists, the design's draw table, the user types' tables)`` where an exact truth applies (a
    two-ranker team-draft or balanced design with prefix credit, a table within its size limit, every type's model a
    grade chain, an independent-click table, a UBM or a row chain, by grade:
    :func:`~simulations.user_tables.chain_tables`), or ``None``: the Monte Carlo then."""
    from simulations.designs.interleaving import draw_table, shared_interleaver

    il = shared_interleaver(design.method or "", design.options)
    if len(design.rankers) != 2 or not getattr(il, "prefix_credit", False):
        return None
    lists = [world.rankings[r] for r in design.rankers]
    table = draw_table(il, lists, world.labels, world.depth)
    if table is None:
        return None
    types = chain_tables(users, table.length)
    if types is None or table.grades.dtype != np.int8 or table.grades.shape[1] != table.length:
        return None
    return lists, table, types


def exact_interleaving_parts(config: Config, design: DesignConfig, world: World, users: UserModels
                             ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per query, ``(E[o / 2], P(a click))`` of ``design``'s impressions (coins, user types and clicks averaged
    out; ``E[o / 2]`` 0 on the queries whose two lists are the same), or ``None`` where the exact truth does not
    apply (not a two-ranker team-draft or balanced design with prefix credit, a table beyond its size limit, or a
    type whose model :func:`~simulations.user_tables.chain_tables` does not take): the Monte Carlo then."""
    from simulations.truth_interleaving import identical_lists

    inputs = exact_inputs(design, world, users)
    if inputs is None:
        return None
    lists, table, types = inputs
    # the truth and the analysis's SE over worlds ask for the same parts in one process: computed once per table
    # (the process's, by identity) and users' click tables and shares (by content)
    digest = hashlib.sha1(np.asarray(users.shares, dtype=np.float64).tobytes())
    for tables in types:
        digest.update(type(tables).__name__.encode())
        for t in tables:  # a row chain's model by its content (repr: its metric and tables)
            digest.update(repr(t).encode() if isinstance(tables, RowChain) else np.ascontiguousarray(t).tobytes())
    key = (id(table), digest.hexdigest())
    hit = _PARTS.get(key)
    if hit is not None and hit[0]() is table:
        return hit[1], hit[2]
    rows = table.grades.shape[0]
    num, den = np.zeros(rows), np.zeros(rows)
    for lo in range(0, rows, CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, rows)
        num[lo:hi], den[lo:hi] = _row_parts(table, types, users.shares, lo, hi)
    n_queries = lists[0].shape[0]
    num_q = num.reshape(n_queries, table.combos).mean(axis=1)
    den_q = den.reshape(n_queries, table.combos).mean(axis=1)
    num_q[identical_lists(lists)] = 0.0
    num_q.setflags(write=False)
    den_q.setflags(write=False)
    for stale in [k_ for k_, (ref, _, _) in _PARTS.items() if ref() is None]:
        del _PARTS[stale]  # tables of worlds that are gone
    _PARTS[key] = (weakref.ref(table), num_q, den_q)
    return num_q, den_q


def exact_interleaving_truth(config: Config, design: DesignConfig, world: World, users: UserModels
                             ) -> list[Truth] | None:
    """The design's one pair's exact Delta (:func:`exact_interleaving_parts`; SE 0), or ``None``."""
    return truth_of_parts(design, world, exact_interleaving_parts(config, design, world, users), "", EXACT_METHOD)


def truth_of_parts(design: DesignConfig, world: World, parts: tuple[np.ndarray, np.ndarray] | None, prefix: str,
                   method: str) -> list[Truth] | None:
    """The design's one pair's Delta (metric ``prefix`` + the pair's name, SE 0) from per-query ``parts``
    (``E[o / 2]``, ``P(a click)``) weighted by query frequency, or ``None`` without parts or without a click
    anywhere (the ratio is undefined; the Monte Carlo says so its own way)."""
    from simulations.designs.interleaving import pair_metrics
    from simulations.runner import Truth

    if parts is None:
        return None
    num_q, den_q = parts
    f = np.asarray(world.frequency, dtype=np.float64)
    den = float(f @ den_q)
    if not den > 0:
        return None
    ((metric, _, _),) = pair_metrics(design.rankers)
    return [Truth(design.name, prefix + metric, float(f @ num_q) / den, 0.0, method, None)]


def exact_interleaving_per_query(config: Config, design: DesignConfig, world: World, users: Any
                                 ) -> np.ndarray | None:
    """Per-query values whose frequency-weighted mean is :func:`exact_interleaving_truth`'s Delta (the ratio's
    linearisation :math:`\\Delta + (n_q - \\Delta d_q) / \\bar d`), for its SE over drawn worlds
    (:func:`simulations.world.world_sampling`), or ``None``."""
    parts = exact_interleaving_parts(config, design, world, users)
    if parts is None:
        return None
    num_q, den_q = parts
    f = np.asarray(world.frequency, dtype=np.float64)
    f = f / f.sum()
    d_bar = float(f @ den_q)
    if not d_bar > 0:
        return None
    value = float(f @ num_q) / d_bar
    return value + (num_q - value * den_q) / d_bar
