r"""A user type's click model as tables over (rank, grade): what the compiled click sampler
(:class:`simulations.users.UserModels`), the assumption sweep's coupled clicks and the exact interleaving truths
(:mod:`simulations.truth_interleaving_exact`, :mod:`simulations.truth_null_exact`) all read.

- a grade chain's or an independent-click model's ``(attract, cont_click, cont_skip)`` tables (:func:`grade_kind`,
  :func:`grade_tables`), widened to the population's width (:func:`grade_width`, :func:`pad_grades`; labels beyond
  :func:`grade_floor` go to the models' own path);
- a UBM by grade: :class:`UbmTables` (:func:`ubm_tables`);
- a chain whose continuation depends on the whole list's grades (a metric user of an adaptive metric):
  :class:`RowChain` (:func:`row_chain`);
- one type's, whichever it is: :func:`type_tables`; every type of a population at once: :func:`chain_tables`;
- a table's values at rows of slot grades: :func:`slot_values`, a chain type's three: :func:`slot_chain`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from simulations.users import UserModels

__all__ = ["RowChain", "UbmTables", "chain_tables", "grade_floor", "grade_kind", "grade_tables", "grade_width",
           "pad_grades", "row_chain", "slot_chain", "slot_values", "type_tables", "ubm_tables"]


def grade_kind(model: Any, k: int) -> str | None:
    """``"chain"`` for a grade chain (:class:`~clickmodels.cascade.ChainModel` sampled by its own chain),
    ``"independent"`` for an independent-click model with rank and grade tables (:class:`~clickmodels.pbm.
    IndependentModel`: PBM, DCTR, RCTR, random clicks), ``None`` for any other model or one that refuses lists of
    ``k`` slots (its own check, e.g. PBM with fewer ranks: its error is raised on its own path)."""
    from clickmodels.base import Impressions
    from clickmodels.cascade import ChainModel
    from clickmodels.pbm import IndependentModel
    from onlineeval.errors import InputError

    if isinstance(model, ChainModel) and type(model)._sample is ChainModel._sample:
        kind = "chain"
    elif isinstance(model, IndependentModel) and type(model)._sample is IndependentModel._sample:
        kind = "independent"
    else:
        return None
    try:
        model._check(Impressions(labels=np.zeros((1, k), dtype=np.int64)))
    except InputError:
        return None
    return kind


def _grade_counts(models: Sequence[Any]) -> set[int]:
    """The numbers of grades of the models that have a grade limit (random clicks and RCTR have none)."""
    return {model.n_grades for model in models} - {None}


def grade_width(models: Sequence[Any]) -> int | None:
    """The models' grade tables' width: one column per grade of the model with the most grades and one for empty
    slots (a model with fewer grades has its tables widened, :func:`pad_grades`; models without grade limits, random
    clicks and RCTR, take the others' width), or ``None`` when none has grades."""
    grades = _grade_counts(models)
    return max(grades) + 1 if grades else None


def grade_floor(models: Sequence[Any]) -> int | None:
    """The number of grades every model with grades knows (the fewest): labels from 0 to it minus 1 are the ones the
    widened tables (:func:`pad_grades`) may serve; ``None`` when none has grades."""
    grades = _grade_counts(models)
    return min(grades) if grades else None


def pad_grades(table: Any, k: int, width: int) -> np.ndarray | None:
    """A grade table broadcastable to ``(k, w)`` (grades ``0 .. w - 2``, the empty slot's column last) as a ``(k,
    width)`` array: columns for grades ``w - 1 .. width - 2`` inserted before the empty one, copies of it (labels the
    model does not know never reach them: the samplers refuse labels from :func:`grade_floor` on); ``None`` when ``w``
    exceeds ``width``."""
    t = np.asarray(table, dtype=np.float64)
    w = t.shape[-1] if t.ndim else 1
    if w > width:
        return None
    t = np.broadcast_to(t, (k, w))
    if w == width:
        return np.array(t)
    return np.concatenate([t[:, :-1], np.repeat(t[:, -1:], width - w + 1, axis=1)], axis=1)


def grade_tables(model: Any, kind: str | None, k: int, width: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A model's ``(attract, cont_click, cont_skip)`` tables for lists of ``k`` slots, each ``(k, width)`` (rank,
    grade; the empty slot's column last), widened to ``width`` (:func:`pad_grades`): a grade chain's
    (``kind`` ``"chain"``, :func:`grade_kind`) its ``_grade_chain``, an independent-click model's (``"independent"``)
    the chain :math:`a_r = e_r \\alpha_g`, :math:`c_r = s_r = 1`; ``None`` for a chain whose parameters depend on
    more than the grade and rank, tables wider than ``width``, or another kind. What the compiled sampler
    (:class:`_GradeChains`) and the exact interleaving truths (:func:`simulations.truth_interleaving_exact.
    chain_tables`) both read."""
    if kind == "chain":
        chain = model._grade_chain(k)
        if chain is None:
            return None
        w = np.shape(chain.attract)[-1]
        padded = [pad_grades(np.broadcast_to(np.asarray(t, dtype=np.float64), (k, w)), k, width) for t in chain]
        if any(t is None for t in padded):
            return None
        return padded[0], padded[1], padded[2]  # type: ignore[return-value]
    if kind != "independent":
        return None
    tables = model._grade_tables(k, width)
    if tables is None:
        return None
    e, a = np.asarray(tables[0], dtype=np.float64)[:k], pad_grades(tables[1], k, width)
    if e.shape != (k,) or a is None:
        return None
    return np.array(np.broadcast_to(e[:, None] * a, (k, width))), np.ones((k, width)), np.ones((k, width))


class UbmTables(NamedTuple):
    r"""A UBM user type's tables for lists of ``k`` slots: ``attract`` ``(k, width)`` (rank, grade; the last column
    the empty slot's, 0) and ``exam`` ``(k, k)``, :math:`\gamma_{r j}` with ``j`` one past the last click's slot above
    ``r`` (0: none; :class:`clickmodels.ubm.UBM`'s ``examination``)."""

    attract: np.ndarray
    exam: np.ndarray


class RowChain(NamedTuple):
    """A chain user type whose chain depends on the whole list's grades, not on each slot's alone (a metric user of an
    adaptive metric, RR, INST, INSQ or ERR: its continuation is the metric's, computed from the list), every
    per-document parameter by grade: each row's ``(attract, cont_click, cont_skip)`` is the model's own chain of the
    row's grades (:meth:`chains`), as its sampler computes it."""

    model: Any

    def chains(self, grades: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(rows, k)`` each: the model's chain of the rows' ``grades`` (``-1`` empty)."""
        from clickmodels.base import Impressions

        labels = np.asarray(grades, dtype=np.int64)
        chain = self.model._chain(Impressions(labels=labels))
        a, c, s = (np.array(np.broadcast_to(np.asarray(t, dtype=np.float64), labels.shape)) for t in chain)
        return a, c, s


def row_chain(model: Any, width: int) -> RowChain | None:
    """A :class:`RowChain` of a chain model (its own chain sampler) whose per-document parameters are all by grade
    with at most ``width - 1`` grades, else ``None``."""
    import dataclasses

    from clickmodels.cascade import ChainModel
    from clickmodels.docparams import ByGrade, DocParam

    if not (isinstance(model, ChainModel) and type(model)._sample is ChainModel._sample):
        return None
    params = [getattr(model, f.name) for f in dataclasses.fields(model)]
    if any(isinstance(p, DocParam) and not (isinstance(p, ByGrade) and p.n_grades <= width - 1) for p in params):
        return None
    return RowChain(model)


def type_tables(model: Any, k: int, width: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | UbmTables | RowChain | None:
    """One user type's tables for lists of ``k`` slots on a population's grade ``width``: a grade chain's or an
    independent-click model's ``(attract, cont_click, cont_skip)`` (:func:`grade_tables`), a chain that depends on the
    whole list's grades a :class:`RowChain`, a UBM's :class:`UbmTables`; ``None`` for any other model (or one with a
    parameter not by grade)."""
    kind = grade_kind(model, k)
    if kind is None:
        return ubm_tables(model, k, width)
    if kind == "chain" and model._grade_chain(k) is None:
        return row_chain(model, width)
    return grade_tables(model, kind, k, width)


def chain_tables(users: UserModels, k: int) -> list[Any] | None:
    r"""Every user type's tables for lists of ``k`` slots (:func:`type_tables`): a grade chain's or an
    independent-click model's ``(attract, cont_click, cont_skip)``, each ``(k, width)`` (rank, grade; the last column
    the empty slot's: attract 0, cont_skip 1; an independent-click model is the chain :math:`a_r = e_r \alpha_g`,
    :math:`c_r = s_r = 1`), a UBM's :class:`UbmTables`, a chain that depends on the whole list's grades (a metric user
    of an adaptive metric) a :class:`RowChain`; or ``None`` when some type's model is none of those (or a UBM or a
    row chain with a parameter not by grade), or none has grades (:func:`grade_kind`, :func:`grade_width`: the
    compiled sampler's conditions, so the exact truth covers what the table path of the Monte Carlo covers, and UBM
    users besides; a model with fewer grades than the widest has its tables widened, :func:`pad_grades`, whose extra
    columns no label of the world reaches)."""
    width = grade_width(users.models)
    if width is None:
        return None
    out = [type_tables(model, k, width) for model in users.models]
    return None if any(t is None for t in out) else out


def slot_values(table: np.ndarray, grades: np.ndarray) -> np.ndarray:
    """``(rows, k)`` values of a ``(k, width)`` table at each row's slot grades (``-1``, empty: the last column)."""
    k = grades.shape[1]
    return table[np.arange(k)[None, :], grades]


def slot_chain(tables: tuple[np.ndarray, np.ndarray, np.ndarray] | RowChain, grades: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(attract, cont_click, cont_skip)``, each ``(rows, k)``, of a chain type (a grade chain's or an
    independent-click model's tables, or a :class:`RowChain`) on rows of slot ``grades`` (``-1`` empty)."""
    if isinstance(tables, RowChain):
        return tables.chains(grades)
    attract, cont_click, cont_skip = tables
    return slot_values(attract, grades), slot_values(cont_click, grades), slot_values(cont_skip, grades)


def ubm_tables(model: Any, k: int, width: int) -> UbmTables | None:
    """A UBM's :class:`UbmTables` (its own sampler, attractiveness by grade with at most ``width - 1`` grades,
    widened to ``width``: :func:`pad_grades`; examination at least ``k`` ranks deep), else
    ``None``."""
    from clickmodels.docparams import ByGrade
    from clickmodels.ubm import UBM

    if not (isinstance(model, UBM) and type(model)._sample is UBM._sample):
        return None
    attract = model.attractiveness
    if not isinstance(attract, ByGrade) or attract.n_grades > width - 1 or model.depth < k:
        return None
    return UbmTables(pad_grades(attract.table(0.0), k, width), np.array(model.examination[:k, :k], dtype=np.float64))
