"""Shared pieces of click-model estimation: fitted-parameter records and their contract.

Every estimator takes a :class:`~clickmodels.logs.ClickLog` and returns a
:class:`ClickModelFit`: a frozen record of the fitted parameters that can compute, for any
log (the training log or a held-out one),

* :meth:`ClickModelFit.click_probs` -- the marginal click probability
  :math:`P(C_r = 1)` of every slot (exact, closed form or a forward recursion),
* :meth:`ClickModelFit.conditional_click_probs` -- :math:`P(C_r = 1 \\mid C_{<r})`
  given the observed clicks above,
* :meth:`ClickModelFit.log_likelihood` -- :math:`\\log P(C_1, \\dots, C_k)` per session,
  by the chain rule :math:`\\sum_r \\log P(C_r = c_r \\mid C_{<r})`.

Per-(query, document) parameters are kept in :class:`PairTable` records keyed by the
original ids, so a fit can be applied to another log or to simulated impressions;
pairs the table has not seen get the table's ``default`` (the impression-weighted mean of
the fitted values, see :meth:`PairTable.from_codes`).

Conventions (also written into saved JSON): ranks are 0-based array indices (index 0 is
rank 1); probabilities in log-likelihoods are clipped to ``[PROB_EPS, 1 - PROB_EPS]`` so a
model that gives an observed event probability 0 (e.g. the cascade model on a session with
two clicks) is charged ``log(PROB_EPS)`` instead of minus infinity.

Estimates use pseudo-counts: a probability estimated from ``num`` successes in ``den``
trials (or expected counts in EM) is :math:`(num + a)/(den + 2a)` with ``a = pseudo``,
the posterior mean under a Beta(a, a) prior; ``pseudo=0`` gives the plain MLE.

Reference: A. Chuklin, I. Markov, M. de Rijke, *Click Models for Web Search*, Morgan &
Claypool, 2015 (chapters 3-4), cited as [CMR15] in the estimators.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from clickmodels.depth import too_deep
from clickmodels.logs import ClickLog
from onlineeval.errors import InputError

__all__ = [
    "PROB_EPS",
    "FORMAT_VERSION",
    "PairTable",
    "FitTrace",
    "ClickModelFit",
    "EMOptions",
    "smoothed",
    "slot_values",
    "bernoulli_log_likelihood",
    "ordered_dot",
    "by_rank",
    "FIT_TYPES",
    "register_fit",
    "scale_note",
    "with_closed_form_trace",
    "interim_trace",
    "fit_from_dict",
    "load_fit",
    "load_model",
    "CONVENTIONS",
]

PROB_EPS = 1e-10
FORMAT_VERSION = 1


def smoothed(num: np.ndarray | float, den: np.ndarray | float, pseudo: float) -> np.ndarray:
    """Probability estimate with pseudo-counts.

    .. math:: \\hat p = \\frac{num + a}{den + 2a}

    with ``a = pseudo``; where ``den + 2a == 0`` the estimate is 0.5.
    """
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    total = den + 2.0 * pseudo
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(total > 0, (num + pseudo) / np.where(total > 0, total, 1.0), 0.5)
    return np.clip(out, 0.0, 1.0)


def _index_of(vocab_sorted: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position of each id in the sorted vocabulary, ``-1`` where absent."""
    if vocab_sorted.size == 0:
        return np.full(ids.shape, -1, dtype=np.int64)
    pos = np.searchsorted(vocab_sorted, ids)
    pos = np.minimum(pos, vocab_sorted.size - 1)
    return np.where(vocab_sorted[pos] == ids, pos, -1).astype(np.int64)


@dataclass(frozen=True, eq=False)
class PairTable:
    """A fitted probability per (query, document) pair, with a fallback for unseen pairs.

    Attributes
    ----------
    query, doc:
        ``(m,)`` str, the original ids of each pair.
    value:
        ``(m,)`` float in [0, 1], the fitted parameter.
    count:
        ``(m,)`` float, the number of observations behind each value (impressions, or
        clicks for satisfaction parameters).
    default:
        Value used for a pair not in the table.
    """

    query: np.ndarray
    doc: np.ndarray
    value: np.ndarray
    count: np.ndarray
    default: float

    def __post_init__(self) -> None:
        m = self.value.shape
        if self.query.shape != m or self.doc.shape != m or self.count.shape != m or len(m) != 1:
            raise InputError("pair table columns query, doc, value, count must have one equal length")
        if np.any(~np.isfinite(self.value)) or np.any((self.value < 0) | (self.value > 1)):
            raise InputError("pair table values must be probabilities in [0, 1]")
        if not 0.0 <= self.default <= 1.0:
            raise InputError(f"pair table default must be in [0, 1], got {self.default}")

    @classmethod
    def from_codes(
        cls, log: ClickLog, value: np.ndarray, count: np.ndarray, default: float | None = None
    ) -> PairTable:
        """Table for the pairs of ``log.pairs`` (value and count indexed by pair code).

        ``default`` defaults to the count-weighted mean
        :math:`\\sum_j v_j n_j / \\sum_j n_j` (0.5 when all counts are 0).
        """
        count = np.asarray(count, dtype=float)
        value = np.asarray(value, dtype=float)
        if default is None:
            total = count.sum()
            default = ordered_dot(value, count) / total if total > 0 else 0.5
        pairs = log.pairs
        return cls(
            query=log.query_vocab[pairs.query].astype(str),
            doc=log.doc_vocab[pairs.doc].astype(str),
            value=value.copy(),
            count=count.copy(),
            default=float(default),
        )

    @property
    def n_pairs(self) -> int:
        """Number of pairs in the table."""
        return int(self.value.shape[0])

    @cached_property
    def _index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Sorted query and document ids, sorted pair keys and their order (built once)."""
        uq, qi = np.unique(self.query, return_inverse=True)
        ud, di = np.unique(self.doc, return_inverse=True)
        key = qi.astype(np.int64) * max(ud.size, 1) + di
        order = np.argsort(key)
        return uq, ud, key[order], order

    def lookup(self, query_ids: np.ndarray, doc_ids: np.ndarray) -> np.ndarray:
        """Values for ``(n,)`` query ids and ``(n, k)`` document ids (any dtype, compared as str).

        Unseen pairs get :attr:`default`.
        """
        q = np.asarray(query_ids).astype(str)
        d = np.asarray(doc_ids).astype(str)
        if d.ndim != 2 or q.shape != (d.shape[0],):
            raise InputError(f"lookup needs (n,) queries and (n, k) documents, got {q.shape} and {d.shape}")
        uq, ud, keys, order = self._index
        qi = _index_of(uq, q)[:, None]
        di = _index_of(ud, d)
        return self._finish(qi, di, ud.size, keys, order)

    def for_log(self, log: ClickLog) -> np.ndarray:
        """``(n, k)`` values for every slot of ``log`` (``0`` on empty slots)."""
        uq, ud, keys, order = self._index
        qmap = _index_of(uq, log.query_vocab.astype(str))
        dmap = _index_of(ud, log.doc_vocab.astype(str))
        qi = qmap[log.query][:, None]
        di = np.where(log.docs >= 0, dmap[np.maximum(log.docs, 0)], -1)
        out = self._finish(qi, di, ud.size, keys, order)
        return np.where(log.docs >= 0, out, 0.0)

    def _finish(
        self, qi: np.ndarray, di: np.ndarray, n_docs: int, keys: np.ndarray, order: np.ndarray
    ) -> np.ndarray:
        key = qi * max(n_docs, 1) + di
        known = (qi >= 0) & (di >= 0)
        out = np.full(np.broadcast(qi, di).shape, self.default, dtype=float)
        if keys.size:
            pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
            hit = known & (keys[pos] == key)
            out[hit] = self.value[order[pos[hit]]]
        return out

    def to_param(self, query_vocab: np.ndarray | None = None, doc_vocab: np.ndarray | None = None) -> Any:
        """This table as a :class:`clickmodels.ByQueryDoc` over integer ids.

        With vocabularies, a pair's ids become their positions in ``query_vocab`` /
        ``doc_vocab`` (pairs with an id outside them are dropped); without, the ids must
        be decimal integers (e.g. a collection's document numbers) and are parsed.
        """
        from clickmodels.docparams import ByQueryDoc

        q = _to_int_ids(self.query, query_vocab, "query")
        d = _to_int_ids(self.doc, doc_vocab, "doc")
        keep = (q >= 0) & (d >= 0)
        return ByQueryDoc(q[keep], d[keep], self.value[keep], default=self.default)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready columns."""
        return {
            "default": self.default,
            "query": self.query.tolist(),
            "doc": self.doc.tolist(),
            "value": self.value.tolist(),
            "count": self.count.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str, source: str | None = None) -> PairTable:
        """Inverse of :meth:`to_dict`; ``where`` names the key in messages."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected an object with default, query, doc, value, count", source)
        try:
            return cls(
                query=np.asarray(data["query"], dtype=str).reshape(-1),
                doc=np.asarray(data["doc"], dtype=str).reshape(-1),
                value=np.asarray(data["value"], dtype=float).reshape(-1),
                count=np.asarray(data["count"], dtype=float).reshape(-1),
                default=float(data["default"]),
            )
        except KeyError as exc:
            raise InputError(f"{where}: missing key {exc.args[0]!r}", source) from None
        except (TypeError, ValueError) as exc:
            msg = exc.message if isinstance(exc, InputError) else str(exc)
            raise InputError(f"{where}: {msg}", source) from None


def _is_int_text(text: str) -> bool:
    """Whether ``int(text)`` reads ``text`` (the id that a list of ids fails on is named)."""
    try:
        int(text)
    except ValueError:
        return False
    return True


def _to_int_ids(ids: np.ndarray, vocab: np.ndarray | None, what: str) -> np.ndarray:
    if vocab is not None:
        vocab = np.asarray(vocab).astype(str)
        order = np.argsort(vocab)
        return np.where((pos := _index_of(vocab[order], ids)) >= 0, order[np.maximum(pos, 0)], -1)
    try:
        out = np.array([int(x) for x in ids], dtype=np.int64)
    except ValueError:
        bad = next(x for x in ids if not _is_int_text(x))
        raise InputError(
            f"{what} id {str(bad)!r} is not an integer; pass the vocabulary that maps ids to integer codes"
        ) from None
    if out.size and (out.min() < 0 or out.max() >= 2**31):
        raise InputError(f"{what} ids must be integers in [0, 2**31)")
    return out


@dataclass(frozen=True)
class FitTrace:
    """How a fit went.

    Attributes
    ----------
    method:
        ``"closed_form"`` or ``"em"``.
    iterations:
        EM iterations run (0 for closed form).
    log_likelihood:
        Training log-likelihood (sum over sessions) after each iteration (one entry for
        closed form).
    converged:
        Whether the relative change of the log-likelihood fell below the tolerance
        (always true for closed form).
    n_sessions:
        Sessions in the training log.
    pseudo:
        The Beta(a, a) pseudo-count ``a`` of the estimates (0: plain MLE); ``None`` when
        unknown (a file written before it was recorded).
    tol, max_iter:
        EM stopping rule (``None`` for closed form).
    accelerated:
        Whether EM was accelerated (SQUAREM, :func:`clickmodels.estimation._em.run_em`; then
        ``iterations`` counts E-steps and ``log_likelihood`` holds one entry per three-step
        cycle); ``None`` for closed form and files written before it was recorded.
    """

    method: str
    iterations: int
    log_likelihood: tuple[float, ...]
    converged: bool
    n_sessions: int
    pseudo: float | None = None
    tol: float | None = None
    max_iter: int | None = None
    accelerated: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "method": self.method,
            "iterations": self.iterations,
            "log_likelihood": list(self.log_likelihood),
            "converged": self.converged,
            "n_sessions": self.n_sessions,
        }
        for key in ("pseudo", "tol", "max_iter", "accelerated"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class EMOptions:
    """Stopping rule and smoothing of EM estimators.

    Attributes
    ----------
    max_iter:
        Maximum number of E-steps (default 1000; a fit that converges stops earlier: SQUAREM at tol 1e-9
        took up to about 265 for DBN without pseudo-counts on 2,000-session logs, where 200 stopped it short).
    tol:
        Stop when :math:`|LL_t - LL_{t-1}| \\le tol \\cdot |LL_{t-1}|` (default 1e-9; with
        ``accelerate``, between the starts of consecutive three-step cycles).
    pseudo:
        Beta(a, a) pseudo-count ``a`` of every M-step (default 1.0; see :func:`smoothed`).
    accelerate:
        SQUAREM-accelerated EM (default True; the same maximum, reached in fewer E-steps and
        far closer where the likelihood is flat; :func:`clickmodels.estimation._em.run_em`);
        False runs plain EM.
    on_iteration:
        Called after every iteration with ``(iteration, max_iter, log_likelihood,
        relative_change)`` (``relative_change`` is ``None`` after the first): a progress
        display for long fits. Not part of the options' identity (not compared, not saved).
    """

    max_iter: int = 1000
    tol: float = 1e-9
    pseudo: float = 1.0
    accelerate: bool = True
    on_iteration: Callable[[int, int, float, float | None], None] | None = field(
        default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_iter < 1:
            raise InputError(f"max_iter must be >= 1, got {self.max_iter}")
        if not (self.tol >= 0 and math.isfinite(self.tol)):
            raise InputError(f"tol must be a finite number >= 0, got {self.tol}")
        if not (self.pseudo >= 0 and math.isfinite(self.pseudo)):  # (inf made every estimate 0/0)
            raise InputError(f"pseudo must be a finite number >= 0, got {self.pseudo}")


def slot_values(per_pair: np.ndarray, log: ClickLog, fill: float = 0.0) -> np.ndarray:
    """Spread a per-pair-code array onto the ``(n, k)`` slots of ``log`` (``fill`` on empty)."""
    codes = log.pairs.codes
    return np.where(codes >= 0, per_pair[np.maximum(codes, 0)], fill)


def by_rank(values: np.ndarray, log: ClickLog, what: str) -> np.ndarray:
    """``values[:k]`` for the ``k`` ranks of ``log``.

    A fit holds a per-rank parameter only for the ranks of its training log; a deeper log
    raises :class:`InputError` (as the model classes do) instead of extrapolating.
    """
    if values.shape[0] < log.depth:
        raise InputError(too_deep(what, values.shape[0], log.depth, fitted=True), log.source)
    return values[: log.depth]


def ordered_dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a @ b`` of two 1-d arrays, summed in NumPy's own order (``np.einsum``), not by BLAS.

    A BLAS dot's last bits depend on the kernel the library picks for the CPU (OpenBLAS's Haswell, SkylakeX,
    Sandybridge ...), and in EM those bits steer discrete choices: SQUAREM's step length and whether its jump is
    kept, and the iteration at which the log-likelihood's change meets the tolerance. On the small log of
    ``tests/test_stream_version.py`` (a PBM fitted for the direct method, default tolerance) the BLAS kernels of
    two machines led EM to stopping points 0.2% apart in the estimate; ``np.einsum`` sums the same way on every
    x86-64 CPU (tests/test_em_blas_independent.py)."""
    return float(np.einsum("i,i->", np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()))


def bernoulli_log_likelihood(p: np.ndarray, clicks: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """``(n,)`` :math:`\\sum_r [c_r \\log p_r + (1-c_r)\\log(1-p_r)]` over shown slots.

    ``p`` is clipped to ``[PROB_EPS, 1 - PROB_EPS]``.
    """
    q = np.clip(p, PROB_EPS, 1.0 - PROB_EPS)
    terms = np.where(clicks, np.log(q), np.log1p(-q))
    return np.where(shown, terms, 0.0).sum(axis=1)


F = TypeVar("F", bound="ClickModelFit")

FIT_TYPES: dict[str, type[ClickModelFit]] = {}


def register_fit(cls: type[F]) -> type[F]:
    """Class decorator: make a fit type loadable from JSON by its ``name``."""
    FIT_TYPES[cls.name] = cls
    return cls


def _as_prob_array(value: Any, shape: tuple[int, ...] | None, where: str, source: str | None) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{where}: expected numbers, got {value!r:.60}", source) from None
    if shape is not None and arr.shape != shape:
        raise InputError(f"{where}: expected shape {shape}, got {arr.shape}", source)
    if np.any(~np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
        raise InputError(f"{where}: values must be probabilities in [0, 1]", source)
    return arr


@dataclass(frozen=True, eq=False)
class ClickModelFit(ABC):
    """Fitted parameters of one click model; subclasses add typed parameter fields.

    Public methods validate the log once and call the private hooks
    :meth:`_click_probs` and :meth:`_conditional_click_probs`.
    """

    name: ClassVar[str]
    pair_fields: ClassVar[tuple[str, ...]] = ()
    array_fields: ClassVar[tuple[str, ...]] = ()
    float_fields: ClassVar[tuple[str, ...]] = ()

    #: number of dimensions of each array field (default 1)
    array_ndim: ClassVar[Mapping[str, int]] = {}
    #: array fields identified only up to a common factor, through their product with a pair field (PBM's and UBM's
    #: examination times attractiveness): the ``fitted`` form of :func:`clickmodels.build`, which takes the pair
    #: field by grade from the spec, scales them so that their largest value is 1
    scale_free: ClassVar[tuple[str, ...]] = ()

    #: what the closed form is (the CTR baselines' and CM's are the maximum-likelihood estimates; DCM's and
    #: SDBN's are approximations and override this)
    closed_form_estimator: ClassVar[str] = "closed form: the maximum-likelihood estimate (a = 0) or its Beta(a, a) " \
        "posterior mean"
    #: whether that closed form is the maximum-likelihood estimate (False: DCM's and SDBN's approximation)
    closed_form_is_mle: ClassVar[bool] = True

    @property
    def is_mle(self) -> bool:
        """The fit is a maximum-likelihood estimate: EM, or a closed form that is one."""
        return self.trace.method != "closed_form" or self.closed_form_is_mle

    trace: FitTrace = field(kw_only=True)
    #: what determined the numbers, when the fit was made from a log by ``onlineeval clicks fit`` or
    #: :func:`onlineeval.fit_clicks`: ``{"inputs": {"log": {..., "sha256"}}, "options": {...}, "fingerprint": ...}``
    #: (:mod:`onlineeval.io.digest`); saved with the parameters and read back; ``None`` otherwise
    provenance: Mapping[str, Any] | None = field(default=None, kw_only=True, compare=False)
    #: per-session bootstrap standard errors of the parameters
    #: (:class:`clickmodels.estimation.bootstrap.BootstrapSE`), when the fit was made with them (``clicks fit
    #: --bootstrap N``, :func:`onlineeval.fit_clicks` with ``bootstrap=N``); saved under ``standard_errors`` and read
    #: back; ``None`` otherwise
    standard_errors: Any = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        for f in self.array_fields:
            arr = np.asarray(getattr(self, f))
            ndim = self.array_ndim.get(f, 1)
            if arr.ndim != ndim or arr.size == 0:
                raise InputError(f"params.{f}: expected a non-empty {ndim}-d array, got shape {arr.shape}")
        self._check()

    def _check(self) -> None:
        """Hook: further checks of the parameters (raise :class:`InputError`)."""

    def click_probs(self, log: ClickLog) -> np.ndarray:
        """``(n, k)`` marginal :math:`P(C_r = 1)` per slot (0 on empty slots)."""
        return np.where(log.shown, self._click_probs(log), 0.0)

    def conditional_click_probs(self, log: ClickLog) -> np.ndarray:
        """``(n, k)`` :math:`P(C_r = 1 \\mid C_1..C_{r-1})` given the observed clicks (0 on empty)."""
        return np.where(log.shown, self._conditional_click_probs(log), 0.0)

    def log_likelihood(self, log: ClickLog) -> np.ndarray:
        """``(n,)`` :math:`\\log P(C_1, \\dots, C_k)` of each session's observed clicks.

        .. math:: \\log P(C) = \\sum_r \\log P(C_r = c_r \\mid C_{<r} = c_{<r})
        """
        return bernoulli_log_likelihood(self.conditional_click_probs(log), log.clicks, log.shown)

    def to_model(
        self, query_vocab: np.ndarray | None = None, doc_vocab: np.ndarray | None = None, cls: type | None = None
    ) -> Any:
        """The fitted parameters as a :class:`clickmodels.ClickModel`.

        Parameters
        ----------
        query_vocab, doc_vocab:
            Map the string ids of the pair tables to integer ids (positions in these
            arrays, e.g. the training log's vocabularies); ``None``: the ids must be
            decimal integers (see :meth:`PairTable.to_param`).
        cls:
            Model class to build (default ``clickmodels.model_class(self.name)``); its
            constructor takes this fit's parameter fields by name.
        """
        from clickmodels.registry import model_class

        def conv(table: PairTable) -> Any:
            return table.to_param(query_vocab, doc_vocab)

        target = model_class(self.name) if cls is None else cls
        return target(**self._model_kwargs(conv))

    def _model_kwargs(self, conv: Callable[[PairTable], Any]) -> dict[str, Any]:
        """Constructor arguments of the matching model class (fields of the same names)."""
        out: dict[str, Any] = {f: conv(getattr(self, f)) for f in self.pair_fields}
        out.update({f: getattr(self, f) for f in (*self.array_fields, *self.float_fields)})
        return out

    @abstractmethod
    def _click_probs(self, log: ClickLog) -> np.ndarray: ...

    @abstractmethod
    def _conditional_click_probs(self, log: ClickLog) -> np.ndarray: ...

    # -- serialisation -------------------------------------------------------------------
    def params_dict(self) -> dict[str, Any]:
        """The parameters as JSON-ready values."""
        out: dict[str, Any] = {}
        for f in self.pair_fields:
            out[f] = getattr(self, f).to_dict()
        for f in self.array_fields:
            out[f] = np.asarray(getattr(self, f)).tolist()
        for f in self.float_fields:
            out[f] = float(getattr(self, f))
        return out

    @property
    def estimator(self) -> str:
        """What the fitted numbers are: the estimator and how it relates to the maximum-likelihood estimate."""
        if self.trace.method == "em":
            return "EM: the maximum-likelihood estimate (a = 0), with Beta(a, a) pseudo-counts in every M-step " \
                "otherwise; a local maximum, reached when converged"
        if self.trace.method == "closed_form":
            return self.closed_form_estimator
        return f"{self.trace.method} (not recorded)"

    def notes(self) -> dict[str, str]:
        """Model-specific conventions of these parameters (saved with :data:`CONVENTIONS`, printed by the CLI)."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        """JSON document: model name, format version, conventions (with this model's notes), parameters, fit trace
        (with ``estimator``: what the numbers are)."""
        return {
            "model": self.name,
            "format_version": FORMAT_VERSION,
            "conventions": {**CONVENTIONS, **self.notes()},
            "params": self.params_dict(),
            "fit": {**self.trace.to_dict(), "estimator": self.estimator},
            **(dict(self.provenance) if self.provenance else {}),
            **({"standard_errors": self.standard_errors.to_dict()} if self.standard_errors is not None else {}),
        }

    def save(self, path: str | Path) -> None:
        """Write :meth:`to_dict` as JSON to ``path``."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def _from_params(cls: type[F], params: Mapping[str, Any], trace: FitTrace, source: str | None) -> F:
        kwargs: dict[str, Any] = {}
        for f in (*cls.pair_fields, *cls.array_fields, *cls.float_fields):
            if f not in params:
                raise InputError(f"params.{f}: missing for model {cls.name!r}", source)
        for f in cls.pair_fields:
            kwargs[f] = PairTable.from_dict(params[f], f"params.{f}", source)
        for f in cls.array_fields:
            kwargs[f] = _as_prob_array(params[f], None, f"params.{f}", source)
        for f in cls.float_fields:
            kwargs[f] = float(_as_prob_array(params[f], (), f"params.{f}", source))
        try:
            return cls(trace=trace, **kwargs)
        except InputError as exc:
            raise InputError(exc.message, source) from None


CONVENTIONS: dict[str, str] = {
    "ranks": "array index r is rank r+1 (rank 1 first)",
    "pair_tables": "columns query, doc, value, count (observations behind value); "
    "'default' applies to (query, doc) pairs not in the table",
    "ubm_examination": "examination[r][p+1] = P(E at rank index r | previous click at rank index p), "
    "column 0 = no click above",
    "dcm_continuation": "continuation[r] = P(examine rank index r+1 | click at rank index r)",
    "probabilities": "all parameters are probabilities in [0, 1]",
}


def scale_note(product: str, ratio: str, first: float) -> str:
    """The note of a model whose examination and attractiveness are identified only through their product."""
    return (f"only {product} is identified (every examination times c and every attractiveness divided by c give "
            f"the same clicks): examination is on the arbitrary scale EM reached (here {first:.4g} at rank 1), "
            f"attractiveness on its inverse; compare {ratio} across fits, not the values (simulate's "
            "{name: ..., fitted: <this file>, click: [...]} scales examination so that its largest value is 1; "
            "clicks fit --bootstrap saves the values on that rank-1 scale with standard errors, under "
            "standard_errors.values)")


def fit_from_dict(data: Any, source: str | None = None) -> ClickModelFit:
    """Rebuild a fit from :meth:`ClickModelFit.to_dict` output (as read from JSON)."""
    if not isinstance(data, dict):
        raise InputError("a fitted-parameters file must hold a JSON object", source)
    name = data.get("model")
    if name not in FIT_TYPES:
        raise InputError(f"model: unknown {name!r}; allowed: {', '.join(sorted(FIT_TYPES))}", source)
    if data.get("format_version") != FORMAT_VERSION:
        raise InputError(f"format_version: expected {FORMAT_VERSION}, got {data.get('format_version')!r}", source)
    params = data.get("params")
    if not isinstance(params, dict):
        raise InputError("params: expected an object", source)
    raw = data.get("fit", {})
    try:
        trace = FitTrace(
            method=str(raw.get("method", "loaded")),
            iterations=int(raw.get("iterations", 0)),
            log_likelihood=tuple(float(x) for x in raw.get("log_likelihood", ())),
            converged=bool(raw.get("converged", True)),
            n_sessions=int(raw.get("n_sessions", 0)),
            pseudo=None if raw.get("pseudo") is None else float(raw["pseudo"]),
            tol=None if raw.get("tol") is None else float(raw["tol"]),
            max_iter=None if raw.get("max_iter") is None else int(raw["max_iter"]),
            accelerated=None if raw.get("accelerated") is None else bool(raw["accelerated"]),
        )
    except (TypeError, ValueError, AttributeError):
        raise InputError("fit: malformed fit trace", source) from None
    fit = FIT_TYPES[name]._from_params(params, trace, source)
    provenance = {k: data[k] for k in PROVENANCE_KEYS if k in data}
    if provenance:
        fit = replace(fit, provenance=provenance)
    if data.get("standard_errors") is not None:
        from clickmodels.estimation.bootstrap import BootstrapSE

        fit = replace(fit, standard_errors=BootstrapSE.from_dict(data["standard_errors"], source))
    return fit


#: the keys of a saved fit that say what determined it (:attr:`ClickModelFit.provenance`)
PROVENANCE_KEYS = ("inputs", "options", "fingerprint")


def load_model(
    path: str | Path, query_vocab: np.ndarray | None = None, doc_vocab: np.ndarray | None = None
) -> Any:
    """A :class:`clickmodels.ClickModel` from a fitted-parameters JSON file.

    ``load_fit(path).to_model(query_vocab, doc_vocab)``; without vocabularies the
    query and document ids in the file must be integers (the simulator's ids).
    """
    return load_fit(path).to_model(query_vocab, doc_vocab)


def load_fit(path: str | Path) -> ClickModelFit:
    """Read fitted parameters written by :meth:`ClickModelFit.save` (or the CLI)."""
    src = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", src, exc.lineno) from None
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text; expected a fitted-parameters JSON file", src) from None
    except RecursionError:
        raise InputError("invalid JSON: nested too deeply; expected a fitted-parameters JSON file", src) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        from onlineeval.io.logged_json import json_value_error

        raise InputError(f"invalid JSON: {json_value_error(exc)}", src) from None
    return fit_from_dict(data, src)


Estimator = Callable[..., ClickModelFit]


def with_closed_form_trace(fit: F, log: ClickLog, pseudo: float) -> F:
    """Return a copy of ``fit`` whose trace records a closed-form fit with pseudo-count
    ``pseudo`` and its training LL."""
    ll = float(fit.log_likelihood(log).sum())
    return replace(fit, trace=FitTrace("closed_form", 0, (ll,), True, log.n_sessions, pseudo=float(pseudo)))


def interim_trace(log: ClickLog) -> FitTrace:
    """Trace used while a fit is being assembled (replaced before it is returned)."""
    return FitTrace("closed_form", 0, (), True, log.n_sessions)
