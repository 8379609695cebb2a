"""The users' click behaviour: one click model, or a mixture of user types.

Every user belongs to one type for the whole replicate (drawn by the traffic model), so
users differ persistently; that is why designs analyse per-user sums.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simulations.config import UsersConfig
from simulations.sampling import draw_from_cdf
from simulations.user_tables import (
    RowChain,
    UbmTables,
    grade_floor,
    grade_kind,
    grade_tables,
    grade_width,
    type_tables,
)

__all__ = ["UserModels", "check_click_model_ranks", "per_rank_parameter", "ranks_error"]


class UserModels:
    """Click models of the user types, with their population shares (and the config's specs they were built
    from, for the error messages)."""

    def __init__(self, names: Sequence[str], shares: Sequence[float], models: Sequence[Any],
                 specs: Sequence[Mapping[str, Any]] | None = None) -> None:
        self.names = tuple(names)
        self.shares = np.asarray(shares, dtype=np.float64)
        self.models = tuple(models)
        self.specs = tuple(specs) if specs is not None else tuple({} for _ in self.models)
        self._chains: dict[int, _GradeChains | None] = {}  # list length k -> the fast sampler's tables
        self._by_type: dict[int, list[Any] | None] = {}  # list length k -> each type's row-uniform sampler

    @classmethod
    def from_config(cls, users: UsersConfig) -> UserModels:
        import clickmodels

        mixture = users.mixture()
        return cls([m[0] for m in mixture], [m[1] for m in mixture], [clickmodels.build(m[2]) for m in mixture],
                   [dict(m[2]) for m in mixture])

    def check_world(self, n_grades: int, example: np.ndarray, depth: int | None = None,
                    source: str | None = None) -> None:
        """Refuse a click model that cannot serve the collection: grades it does not know,
        or lists longer than it has parameters for (``example``: some shown grade lists; ``depth``: the config's
        ``rankers.depth`` and ``source`` its file, for the message: :func:`ranks_error`)."""
        from onlineeval.errors import ConfigError, InputError

        for i, (name, model, spec) in enumerate(zip(self.names, self.models, self.specs, strict=True)):
            key = ("users", "click_model") if len(self.models) == 1 else ("users", "types", i, "click_model")
            known = getattr(model, "n_grades", None)
            if known is not None and n_grades > known:
                raise ConfigError(
                    key,
                    f"the collection has grades 0..{n_grades - 1} but this click model "
                    f"({name}) defines {known} grades; give parameters for every grade",
                    source,
                )
            try:
                model.click_probabilities(example)
            except InputError as exc:
                short = ranks_error(model, spec, key, int(np.shape(example)[1]), depth, source)
                if short is not None:
                    raise short from None
                raise ConfigError(key, f"cannot simulate this collection's lists: {exc.message}", source) from None

    def sample(self, labels: np.ndarray, user_type: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Clicks ``(n, k)`` for shown ``labels``, each row by its user's type's model.

        When every type's model is a Markov-cascade chain given by grade and rank (cascade, CM, DCM,
        CCM, DBN, SDBN, C/W/L users: :func:`clickmodels.kernels.chain_sample_grades`) or an
        independent-click model given by rank and grade (PBM, DCTR, RCTR, random clicks:
        :func:`clickmodels.kernels.independent_sample_grades`), in any mixture, the rows are sampled
        here from the models' tables, built once (:class:`_GradeChains`): the same uniforms drawn in
        the same order as the models' own samplers (each type's rows in turn, block by block) and the
        same comparisons, so the same clicks (tested), without each model call's validation, table
        set-up and propensities; the comparisons run in one compiled loop
        (:func:`simulations.kernels.grade_clicks`, numba; tested bit for bit against the previous NumPy
        passes over ``(k, b)`` arrays). Measured (CPU time, best of 5 alternated rounds, 2-core machine
        at load 6): 1,500 impressions of 10 slots, two cascade types, 0.68x the NumPy passes' time
        (87 against 128 ns per impression, of which about 30 ns are NumPy's uniform draws); one cascade
        type 0.87x, PBM and cascade 0.90x; 0.96-1.06x on 200,000 impressions. (The NumPy passes were
        0.37-0.51x the time of each type's model sampling its rows.) Otherwise (or on labels outside
        the models' grades, so that their error is raised, or rows of no known type) each type's model
        samples its rows.
        """
        labels = np.asarray(labels)
        chains = self.chains(labels.shape[1]) if labels.ndim == 2 else None
        if chains is not None and labels.size and np.issubdtype(labels.dtype, np.integer):
            clicks = chains.sample(labels, user_type, rng)
            if clicks is not None:
                return clicks
        if len(self.models) == 1:
            return np.asarray(self.models[0].sample(labels, rng).clicks, dtype=bool)
        clicks = np.zeros(labels.shape, dtype=bool)
        for t, model in enumerate(self.models):
            rows = np.flatnonzero(user_type == t)
            if rows.size:
                clicks[rows] = np.asarray(model.sample(labels[rows], rng).clicks, dtype=bool)
        return clicks

    def chains(self, k: int) -> _GradeChains | None:
        """The one-pass sampler's tables for lists of ``k`` slots (built once per ``k``), or ``None`` when some
        type's model is not a grade chain or an independent-click table (:meth:`_GradeChains.build`)."""
        if k not in self._chains:
            self._chains[k] = _GradeChains.build(self.models, k)
        return self._chains[k]

    def click_probabilities(self, labels: np.ndarray) -> np.ndarray:
        """Exact marginal click probabilities, averaged over user types by share."""
        return sum(s * np.asarray(m.click_probabilities(labels)) for s, m in zip(self.shares, self.models, strict=True))

    def first_click_distribution(self, labels: np.ndarray) -> np.ndarray:
        r"""Exact ``(n, k + 1)`` distribution of the first click's rank; the last column is
        P(no click). Share-weighted over user types.

        From the models' conditional click probabilities given no click above,
        :math:`p_r = P(C_r = 1 \mid C_{<r} = 0)`: :math:`P(\text{first} = r) = p_r
        \prod_{j<r} (1 - p_j)` and :math:`P(\text{none}) = \prod_r (1 - p_r)`.
        """
        no_clicks = np.zeros(labels.shape, dtype=bool)
        out = np.zeros((labels.shape[0], labels.shape[1] + 1))
        for share, model in zip(self.shares, self.models, strict=True):
            p = np.asarray(model.conditional_click_probabilities(labels, no_clicks), dtype=np.float64)
            survive = np.cumprod(1.0 - p, axis=1)
            before = np.concatenate([np.ones((p.shape[0], 1)), survive[:, :-1]], axis=1)
            out[:, :-1] += share * p * before
            out[:, -1] += share * survive[:, -1]
        return out

    def couples(self, k: int) -> bool:
        """Whether :meth:`sample_coupled` couples rows of ``k`` slots (every type's model has grade chains,
        :meth:`chains`, or is a grade chain, an independent-click table or a UBM by grade, :meth:`_type_samplers`);
        otherwise it samples as :meth:`sample` does, each type's rows in turn."""
        return self.chains(k) is not None or self._type_samplers(k) is not None

    def _type_samplers(self, k: int) -> list[Any] | None:
        """Per type, what samples its rows from their own uniforms: a one-type :class:`_GradeChains` (on the
        population's grade width), a chain of the row's whole list (a metric user of an adaptive metric:
        :class:`simulations.user_tables.RowChain`) or a UBM's :class:`~simulations.
        user_tables.UbmTables`; ``None`` when some type's model is none of those."""
        if k not in self._by_type:
            width = grade_width(self.models)
            out: list[Any] | None = None
            if width is not None:
                out = []
                for model in self.models:
                    one = type_tables(model, k, width)
                    if one is not None and not isinstance(one, (UbmTables, RowChain)):
                        one = _GradeChains.build([model], k, width)  # grade tables' rows: a one-type stacked sampler
                    out.append(one)
                if any(one is None for one in out):
                    out = None
            self._by_type[k] = out
        return self._by_type[k]

    def _sample_by_type(self, labels: np.ndarray, user_type: np.ndarray, u_rows: np.ndarray) -> np.ndarray | None:
        r""":meth:`sample_coupled`'s clicks type by type from the rows' own uniforms (:meth:`_type_samplers`): a
        grade chain's rows through its :meth:`_GradeChains.sample_rows`, a row chain's by the one-draw sampler's
        thresholds (:func:`clickmodels.kernels.chain_sample_thresholds`, as the model's own sampler), a UBM's by its
        rule (examined iff
        :math:`u < \gamma_{r j}`, clicked iff :math:`u < \gamma_{r j} a`, ``j`` one past the last click's slot,
        as :func:`clickmodels.kernels.ubm_sample` compares); ``None`` (the caller's fallback) when the rows hold a
        type or grade the samplers do not know."""
        from clickmodels.kernels import chain_sample_thresholds, chain_thresholds

        samplers = self._type_samplers(labels.shape[1])
        if samplers is None or not np.issubdtype(labels.dtype, np.integer) or labels.ndim != 2:
            return None
        known = grade_floor(self.models)
        if labels.size and (labels.min() < -1 or labels.max() >= known):  # type: ignore[operator]
            return None
        if user_type.size and (user_type.min() < 0 or user_type.max() >= len(samplers)):
            return None
        n, k = labels.shape
        out = np.zeros((n, k), dtype=bool)
        for t, sampler in enumerate(samplers):
            rows = np.flatnonzero(user_type == t)
            if not rows.size:
                continue
            if isinstance(sampler, _GradeChains):
                clicks = sampler.sample_rows(labels[rows], np.zeros(rows.size, dtype=np.int8), u_rows[rows])
                if clicks is None:
                    return None
                out[rows] = clicks
                continue
            if isinstance(sampler, RowChain):
                out[rows] = chain_sample_thresholds(u_rows[rows], *chain_thresholds(*sampler.chains(labels[rows])))[0]
                continue
            a = sampler.attract[np.arange(k)[None, :], labels[rows]]  # grade -1: the empty column, 0
            last = np.zeros(rows.size, dtype=np.intp)
            for r in range(k):
                clicked = u_rows[rows, r] < sampler.exam[r][last] * a[:, r]
                out[rows, r] = clicked
                last[clicked] = r + 1
        return out

    def sample_coupled(self, labels: np.ndarray, user_type: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Clicks ``(n, k)`` as :meth:`sample`, from ``rng.random((n, k))`` drawn in row order, row ``i`` reading
        its own ``k`` uniforms whatever its type (:meth:`_GradeChains.sample_rows`): two mixtures of the same
        models with other shares, given the same rng, couple their clicks row by row. A population with UBM types
        (by grade) besides grade chains is coupled type by type (:meth:`_sample_by_type`); other models (or labels
        they do not take) sample as :meth:`sample` does after that draw (not coupled)."""
        labels = np.asarray(labels)
        u_rows = rng.random(labels.shape)
        chains = self.chains(labels.shape[1]) if labels.ndim == 2 else None
        if chains is not None and labels.size and np.issubdtype(labels.dtype, np.integer):
            clicks = chains.sample_rows(labels, user_type, u_rows)
            if clicks is not None:
                return clicks
        elif chains is None and labels.ndim == 2 and labels.size:
            clicks = self._sample_by_type(labels, np.asarray(user_type), u_rows)
            if clicks is not None:
                return clicks
        return self.sample(labels, user_type, rng)

    def draw_types(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Types of ``n`` users drawn by share."""
        if len(self.models) == 1:
            return np.zeros(n, dtype=np.int8)
        return draw_from_cdf(np.cumsum(self.shares), rng.random(n)).astype(np.int8)


def per_rank_parameter(model: Any) -> tuple[str, int] | None:
    """A click model's parameter given per rank with the fewest ranks, as ``(field, ranks)`` (its dataclass's
    NumPy array fields: pbm's and ubm's examination, dcm's continuation, rctr's p); ``None`` for a model
    without one (its parameters by grade, or plain numbers)."""
    import dataclasses

    if not dataclasses.is_dataclass(model):
        return None
    sizes = [(f.name, int(np.shape(v)[0])) for f in dataclasses.fields(model)
             if isinstance(v := getattr(model, f.name, None), np.ndarray) and v.ndim >= 1]
    return min(sizes, key=lambda s: s[1]) if sizes else None


def ranks_error(model: Any, spec: Mapping[str, Any], key: tuple[str | int, ...], slots: int, depth: int | None,
                source: str | None = None) -> Any:
    """The :class:`~onlineeval.errors.ConfigError` of a click model whose per-rank parameters
    (:func:`per_rank_parameter`) cover fewer ranks than the ``slots`` of the lists shown, or ``None`` when they
    cover them: at the spec's key that gives them (the list itself, or the preset, fitted or params file it
    comes from; ``key``: the model's own key path), with the number of ranks given, the slots, ``rankers.depth``
    (``depth``; None: not known here) and the config file (``source``)."""
    from onlineeval.errors import ConfigError

    found = per_rank_parameter(model)
    if found is None or found[1] >= slots:
        return None
    field, ranks = found
    name = spec.get("name", getattr(model, "name", "the click model"))
    if field in spec:
        where, given, fix = (*key, field), f"gives {ranks} ranks", f"give {field} for {slots} ranks"
    elif "preset" in spec:
        where, given = (*key, "preset"), f"preset {spec['preset']!r} gives {field} for {ranks} ranks"
        fix = f"give {field} for {slots} ranks instead of the preset"
    elif "fitted" in spec or "params_file" in spec:
        file_key = "fitted" if "fitted" in spec else "params_file"
        where = (*key, file_key)
        given = (f"the model fitted in {spec[file_key]} gives {field} for {ranks} ranks (the longest lists of its "
                 "training log)")
        fix = f"fit it on logs with lists of at least {slots}"
    else:
        where, given, fix = key, f"{name}.{field} covers {ranks} ranks", f"give {field} for {slots} ranks"
    # the lists have rankers.depth slots (the config refuses a depth above a synthetic collection's candidates; a
    # TREC run's shorter lists are padded with empty slots)
    shown = f"the lists shown have {slots} slots (rankers.depth)" if depth is None else f"rankers.depth is {depth}"
    return ConfigError(where, f"{given}, but {shown}: {fix}, or set rankers.depth to at most {ranks}", source)


def check_click_model_ranks(model: Any, spec: Mapping[str, Any], key: tuple[str | int, ...], config: Any,
                            source: str | None = None) -> None:
    """Raise :func:`ranks_error` for a user type's click model (``key``: its key path, e.g.
    ``("users", "types", 1, "click_model")``) against the lists the config shows (``rankers.depth`` slots), at
    loading, where the config's file (``source``) is known."""
    depth = int(config.rankers.depth)
    err = ranks_error(model, spec, key, depth, depth, source)
    if err is not None:
        raise err


class _GradeChains:
    """The chain tables of every type's model, stacked (see :meth:`UserModels.sample`).

    Model ``t``'s thresholds ``(t1, t2, t3)`` are laid out as in
    :func:`clickmodels.kernels.chain_sample_grades` (rank ``r``, grade ``g`` at ``r * width + g + 1``,
    empty slots at column 0), one block of ``k * width`` entries per type. An independent-click type
    (``independent[t]``) has ``t2 = e_r a_g`` as :func:`clickmodels.kernels.independent_sample_grades`
    computes it (clicked iff ``u < t2``), ``t1 = t2`` and ``t3 = 1``: as a chain it always goes on, so
    the chain's comparisons give the same clicks; its rows skip them. Uniforms: ``rng.random((k, b))``
    per block of ``b <= BLOCK`` rows of each type in turn (:func:`clickmodels.kernels.blocked_uniforms`),
    which is what each model's ``sample`` on its type's rows draws.
    """

    def __init__(self, t1: np.ndarray, t2: np.ndarray, t3: np.ndarray, k: int, width: int,
                 independent: Sequence[bool], grades: int | None = None) -> None:
        self.t1, self.t2, self.t3 = t1, t2, t3
        # grades: the labels every model knows (0 .. grades - 1; the tables may be wider, pad_grades)
        self.k, self.width, self.grades = k, width, width - 1 if grades is None else grades
        # types whose clicks are u < t2 alone (independent clicks: no chain to follow)
        self.independent = list(independent)
        self.use_t1 = bool(np.any(t1 > 0))
        self.use_t3 = bool(np.any(t3 < 1.0))
        # the kernels' arguments (simulations.kernels): the tables stacked (3, types * k * width), the flags
        self.thresholds = np.ascontiguousarray(np.stack([t1, t2, t3]), dtype=np.float64)
        self.independent_flags = np.array(self.independent, dtype=np.bool_)
        self.n_types = len(self.independent)

    @classmethod
    def build(cls, models: Sequence[Any], k: int, width: int | None = None) -> _GradeChains | None:
        """The stacked tables, or ``None`` when some model is neither a grade chain
        (:class:`~clickmodels.cascade.ChainModel` with grade tables) nor an independent-click
        model with rank and grade tables (:class:`~clickmodels.pbm.IndependentModel`: PBM,
        DCTR, RCTR, random clicks), when no model has grades, or when
        some model refuses lists of ``k`` slots (e.g. PBM with fewer ranks). ``width``: the grade tables' width
        (:func:`grade_width` of ``models`` when not given; a population's when ``models`` is one of its types); a
        model with fewer grades has its tables widened (:func:`pad_grades`) and the labels the samplers take stop at
        the fewest grades (:func:`grade_floor`)."""
        from clickmodels import kernels

        kinds = [grade_kind(model, k) for model in models]
        width = grade_width(models) if width is None else width
        if None in kinds or width is None:
            return None
        flats: list[list[np.ndarray]] = [[], [], []]
        for model, kind in zip(models, kinds, strict=True):
            tables = grade_tables(model, kind, k, width)
            if tables is None:
                return None
            if kind == "chain":
                # exactly the tables chain_sample_grades builds (same arithmetic, same layout), widened
                for i, t in enumerate(kernels.chain_thresholds(*tables)):
                    flats[i].append(np.roll(t, 1, axis=1).ravel())
                continue
            # exactly the table independent_sample_grades builds: clicked iff u < e_r a; as a chain
            # that always goes on (t1 = t2: on after a click; t3 = 1 > u: on after a skip)
            p = np.roll(tables[0], 1, axis=1).ravel()
            flats[0].append(p)
            flats[1].append(p)
            flats[2].append(np.ones_like(p))
        t1, t2, t3 = (np.concatenate(f) for f in flats)
        return cls(t1, t2, t3, k, width, [kind == "independent" for kind in kinds], grade_floor(models))

    def accepts(self, labels: np.ndarray) -> bool:
        """Labels the models take without error (grades ``0 .. G-1``, ``-1`` empty), integer dtype."""
        if not np.issubdtype(labels.dtype, np.integer) or labels.ndim != 2:
            return False
        return bool(labels.min() >= -1 and labels.max() < self.grades)

    def counts(self, labels: np.ndarray, user_type: np.ndarray, n: int) -> np.ndarray | None:
        """The number of the ``n`` rows of each type (:func:`simulations.kernels.row_counts`: every row of type 0
        when there is one type), or ``None`` when some row has no known type or ``labels`` (no rows: not checked)
        holds a grade the models do not know (the models' own path then leaves the row without clicks, or raises
        their error)."""
        from simulations import kernels

        counts = kernels.row_counts(labels, user_type, n, self.n_types, self.grades)
        return None if counts[-1] else counts

    def uniforms(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The uniforms of rows of each type ``counts`` (:meth:`counts`), as each type's model draws them for its
        rows: ``rng.random((k, b))`` for each block of ``b <= BLOCK`` rows of each type in turn, into one flat
        array (``random(out=...)``: the same doubles, one per entry, in the same order)."""
        from clickmodels.kernels import BLOCK

        k = self.k
        u = np.empty(int(counts.sum()) * k, dtype=np.float64)
        at = 0
        for size in counts[:-1].tolist():
            for lo in range(0, size, BLOCK):
                end = at + k * min(BLOCK, size - lo)
                rng.random(out=u[at:end])
                at = end
        return u

    def sample_rows(self, labels: np.ndarray, user_type: np.ndarray, u_rows: np.ndarray) -> np.ndarray | None:
        """Clicks ``(n, k)`` of integer ``labels`` of users of types ``user_type`` where row ``i`` reads the uniforms
        ``u_rows[i]`` ``(n, k)`` whatever its type (the kernel's uniforms laid out type by type and block by block
        from the rows'): common random numbers across user mixtures, as the assumption sweep needs (a row whose
        type stays gets the same clicks; one whose type changes, the other model's on the same uniforms).
        :meth:`sample` instead draws each type's uniforms in turn, so one row changing type moves the uniforms of
        every later row of both types. ``None`` (nothing read) when :meth:`counts` refuses the rows."""
        from clickmodels.kernels import BLOCK
        from simulations import kernels

        n, k = labels.shape
        counts = self.counts(labels, user_type, n)
        if counts is None:
            return None
        order = np.argsort(user_type, kind="stable") if self.n_types > 1 else np.arange(n)
        u = np.empty(n * k, dtype=np.float64)
        at = lo = 0
        for size in counts[:-1].tolist():
            for first in range(0, size, BLOCK):
                b = min(BLOCK, size - first)
                u[at:at + k * b] = u_rows[order[lo + first:lo + first + b]].T.ravel()  # (k, b): rank by rank
                at += k * b
            lo += size
        out = np.empty(labels.shape, dtype=bool)
        kernels.grade_clicks(labels, user_type, counts, u, self.thresholds, self.width, self.independent_flags,
                             self.use_t1, self.use_t3, BLOCK, out)
        return out

    def sample(self, labels: np.ndarray, user_type: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """Clicks ``(n, k)`` of integer ``labels`` of users of types ``user_type``
        (:func:`simulations.kernels.grade_clicks` on :meth:`uniforms`), or ``None`` (nothing drawn) when
        :meth:`counts` refuses them."""
        from clickmodels.kernels import BLOCK
        from simulations import kernels

        counts = self.counts(labels, user_type, labels.shape[0])
        if counts is None:
            return None
        u = self.uniforms(counts, rng)
        out = np.empty(labels.shape, dtype=bool)
        kernels.grade_clicks(labels, user_type, counts, u, self.thresholds, self.width, self.independent_flags,
                             self.use_t1, self.use_t3, BLOCK, out)
        return out
