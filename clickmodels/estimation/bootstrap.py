"""Standard errors of a fit by the per-session bootstrap (DCM, SDBN, DBN, CCM, PBM and UBM).

Sessions are the independent units: each of ``n_boot`` replicates draws ``n`` sessions with
replacement from the ``n`` of the log, refits the model with the same estimator and options
(EM from its usual starting point, so a replicate converges as the fit itself did), and a
parameter's standard error is the standard deviation (``ddof=1``) of its replicate values.
A parameter that a replicate does not inform (a pair none of whose sessions were drawn, or
whose drawn sessions have no observation of it: count 0 in the replicate's fit, where EM leaves
it at its start value 0.5) has no value there; its SE is over the replicates that inform it.

The SEs describe sampling variability only: for the last-click closed form
(``method="closed_form"``) they say nothing of its bias. A parameter's SE is undefined
(``NaN``, ``null`` in JSON, ``n/a`` in print; :attr:`BootstrapSE.undefined` counts them by
reason) when the bootstrap cannot measure its spread:

- ``no observation``: no observation informs it (its count is 0: a pair never examined, a
  satisfaction never clicked; a DCM rank never clicked with a slot below it). EM leaves such a
  parameter at its starting value 0.5 in every replicate, so the replicates' SD is 0 although
  the data say nothing about it; DCM's deepest continuation is always of this kind;
- ``one observation``: informed by fewer than 2 observations. The plug-in distribution of one
  observation is a point mass, so the bootstrap sees no spread (a proportion's bootstrap SE is
  sqrt(p(1-p)/k) with the plug-in p, 0 when k = 1) while the true SE is large;
- ``constant``: the same value in every replicate that has it (range <= 1e-12): the likelihood is
  flat in it or every observation agrees (an estimate at 0 or 1), and SD 0 would read as a
  parameter known exactly. A 1-session log is the extreme case: every replicate is the log;
- ``few replicates``: informed in fewer than half of the replicates (or fewer than 2); a
  parameter with k observations in distinct sessions is informed in about 1 - e^-k of them
  (0.86 at k = 2), so this only guards against an SE over a small conditional subsample.

The first applicable reason is recorded.

PBM's and UBM's examination is identified only up to a factor (every examination times ``c`` and
every attractiveness divided by ``c`` give the same clicks; EM stops on whichever scale its path
reaches, another one in each replicate), so their raw parameters have no meaningful SE. Their SEs
are of the identified values on the *rank-1 scale* (:func:`rank1_scale`): examination divided by
its value at rank 1 (for UBM: rank 1, no click above), the counterfactual learning-to-rank
propensities relative to the top, and attractiveness times it, the click probability of the
document at rank 1. The full fit's values on that scale are saved beside the SEs
(:attr:`BootstrapSE.values`); the reference entry is 1 by definition (reason ``scale reference``).

Covered (:data:`SE_MODELS`): DCM, SDBN, DBN, CCM, PBM and UBM, whose parameters (PBM's and UBM's on that scale)
are identified; the SEs are checked against the exact Fisher information (``tests/test_clickmodels_fit_se.py``,
``tests/test_clickmodels_fit_se_scaled.py``, ``tests/test_clickmodels_fit_se_chains.py``). Scalars (DBN's gamma,
CCM's taus) are 0-d arrays here and numbers in JSON. The CTR baselines and CM have closed forms and none.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from clickmodels.estimation.base import ClickModelFit, PairTable
from clickmodels.logs import ClickLog
from onlineeval.errors import ConfigError

__all__ = ["SE_MODELS", "REASONS", "BootstrapSE", "bootstrap_se"]

#: the models :func:`bootstrap_se` covers
SE_MODELS = ("dcm", "sdbn", "dbn", "ccm", "pbm", "ubm")
#: the models whose SEs are of the values on the rank-1 scale (:func:`rank1_scale`; the module docstring)
SCALED_MODELS = ("pbm", "ubm")

#: what the rank-1 scale is (saved with the SEs)
RANK1_SCALE = ("rank-1 scale: examination / its value at rank 1 (UBM: rank 1, no click above), attractiveness x "
               "that value (the click probability at rank 1); only these products are identified, the raw values' "
               "scale is wherever EM stopped")

#: why an SE is undefined (module docstring), in the order they are checked
REASONS = {
    "scale reference": "1 by definition (the unit of the rank-1 scale: examination at rank 1, no click above)",
    "cannot occur": "not a parameter: UBM's examination[r][j] with j > r (the closest click above rank r is above "
    "it), always 0",
    "no observation": "no observation informs it (count 0: never examined, or never clicked)",
    "one observation": "a single observation informs it (the bootstrap of one value has no spread)",
    "constant": "the same value in every replicate (flat likelihood, or an estimate at 0 or 1)",
    "few replicates": "informed in fewer than half of the replicates",
}


@dataclass(frozen=True)
class BootstrapSE:
    """Bootstrap standard errors of a fit's parameters.

    Attributes
    ----------
    n_boot, seed:
        Replicates and the seed of ``numpy.random.default_rng`` that drew them.
    se:
        Per parameter field: an array aligned with the fit's field (a pair table's rows, an array's entries);
        ``NaN`` where the SE is undefined.
    reason:
        Per parameter field: ``None`` where the SE is defined, else why not (one of :data:`REASONS`); nested as
        the field (UBM's examination: rows of ranks).
    values:
        PBM, UBM: the fit's values on the rank-1 scale (:func:`rank1_scale`), which the SEs are of; else None.
    """

    n_boot: int
    seed: int
    se: dict[str, np.ndarray]
    reason: dict[str, list[Any]]
    #: PBM, UBM: the full fit's values on the rank-1 scale, per field (what the SEs are of); None for the others
    values: dict[str, np.ndarray] | None = None

    @property
    def undefined(self) -> dict[str, dict[str, int]]:
        """Per field, the number of undefined SEs by reason (fields without any left out; entries that cannot
        occur are not parameters and not counted)."""
        out: dict[str, dict[str, int]] = {}
        for key, why in self.reason.items():
            flat = np.asarray(why, dtype=object).ravel().tolist()
            counts = {r: sum(1 for w in flat if w == r) for r in REASONS if r != "cannot occur"}
            counts = {r: c for r, c in counts.items() if c}
            if counts:
                out[key] = counts
        return out

    def parameters(self, key: str) -> int:
        """How many parameters field ``key`` holds (its entries but those that cannot occur)."""
        return sum(1 for w in np.asarray(self.reason[key], dtype=object).ravel().tolist() if w != "cannot occur")

    def undefined_note(self) -> str | None:
        """One sentence on the undefined SEs (how many, why), or None when every SE is defined."""
        parts = [f"{key} {sum(by.values())} of {self.parameters(key)} ("
                 + ", ".join(f"{c} {r}" for r, c in by.items()) + ")"
                 for key, by in self.undefined.items()]
        if not parts:
            return None
        return ("standard errors undefined (n/a; null in JSON), the bootstrap cannot measure their spread: "
                + "; ".join(parts))

    def to_dict(self) -> dict[str, Any]:
        """JSON form, saved by ``clicks fit --bootstrap`` under ``standard_errors``."""
        out = {
            "method": "per-session bootstrap: sessions drawn with replacement, refitted with the same estimator; "
            "SE = standard deviation of the replicates (ddof 1); null = undefined, see undefined_reason",
            "n_boot": self.n_boot,
            "seed": self.seed,
            "se": {k: _nullable(v) for k, v in self.se.items()},
            "undefined": self.undefined,
            "undefined_reason": {k: (list(v) if isinstance(v, list) else v) for k, v in self.reason.items()},
            "undefined_rule": {r: text for r, text in REASONS.items()},
        }
        if self.values is not None:  # the SEs are of these, not of params' raw values
            out["scale"] = RANK1_SCALE
            out["values"] = {k: _nullable(v) for k, v in self.values.items()}
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str | None = None) -> BootstrapSE:
        """Inverse of :meth:`to_dict` (a saved fit's ``standard_errors``; ``null`` SEs read as NaN); a malformed
        entry raises :class:`~onlineeval.errors.InputError` naming its key."""
        from onlineeval.errors import InputError

        if not isinstance(data, dict):
            raise InputError("standard_errors: expected an object (n_boot, seed, se, undefined_reason)", source)
        try:
            se = {str(k): _from_nullable(v) for k, v in data["se"].items()}
            reason = {str(k): v for k, v in data["undefined_reason"].items()}
            values = (None if data.get("values") is None else
                      {str(k): _from_nullable(v) for k, v in data["values"].items()})
            out = cls(n_boot=int(data["n_boot"]), seed=int(data["seed"]), se=se, reason=reason, values=values)
        except KeyError as exc:
            raise InputError(f"standard_errors: missing key {exc.args[0]!r}", source) from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"standard_errors: malformed ({exc})", source) from None
        if set(out.reason) != set(out.se):
            raise InputError("standard_errors: se and undefined_reason name different fields", source)
        return out

    def summary(self) -> str:
        """One line: per field, the median SE (pair tables) or every SE (arrays; on the rank-1 scale each value
        with its SE, the reference entry marked)."""
        parts = []
        for key, v in self.se.items():
            ok = v[np.isfinite(v)]
            if v.size > 12:
                total = self.parameters(key)
                na = f", {total - ok.size} n/a" if ok.size < total else ""
                parts.append(f"{key} median {np.median(ok):.4f} (max {ok.max():.4f}, {ok.size} values{na})"
                             if ok.size else f"{key} all {total} n/a")
            elif self.values is None:
                parts.append(f"{key} " + " ".join("n/a" if not np.isfinite(x) else f"{x:.4f}" for x in v.ravel()))
            else:
                why = np.asarray(self.reason[key], dtype=object).ravel()
                parts.append(f"{key} " + " ".join(
                    f"{x:.4f} (reference)" if w == "scale reference" else
                    f"{x:.4f} +- " + ("n/a" if not np.isfinite(e) else f"{e:.4f}")
                    for x, e, w in zip(self.values[key].ravel(), v.ravel(), why, strict=True)))
        text = "; ".join(parts)
        return text if self.values is None else f"on the rank-1 scale (value +- SE): {text}"


def _from_nullable(v: Any) -> np.ndarray:
    """:func:`_nullable`'s inverse: a nested list with ``None`` where undefined, as a float array with NaN."""
    return np.asarray(_none_to_nan(v), dtype=float)


def _none_to_nan(v: Any) -> Any:
    if isinstance(v, list):
        return [_none_to_nan(x) for x in v]
    return math.nan if v is None else v


def _nullable(v: np.ndarray) -> list[Any]:
    """JSON form of an array (nested as it is), None where not finite."""
    return np.where(np.isfinite(v), np.asarray(v, dtype=float), None).tolist()  # type: ignore[no-any-return]


def rank1_scale(fit: ClickModelFit) -> ClickModelFit | None:
    """A PBM or UBM fit on the rank-1 scale: examination divided by its first entry (rank 1; UBM: rank 1, no click
    above), attractiveness multiplied by it, so the click probabilities are unchanged (module docstring); None when
    that entry is not > 0 (no scale to refer to)."""
    from dataclasses import replace

    gamma = np.asarray(fit.examination, dtype=float)  # type: ignore[attr-defined]
    c = float(gamma.flat[0])
    if not (math.isfinite(c) and c > 0):
        return None
    att = fit.attractiveness  # type: ignore[attr-defined]
    return replace(fit, examination=gamma / c, attractiveness=replace(att, value=np.asarray(att.value) * c))


def _pair_keys(table: PairTable) -> np.ndarray:
    return np.char.add(np.char.add(table.query.astype(str), "\x1f"), table.doc.astype(str))


class _Moments:
    """Sums of deviations from the full fit's values (numerically stable variance)."""

    def __init__(self, center: np.ndarray) -> None:
        self.center = np.asarray(center, dtype=float)
        self.n = np.zeros(self.center.shape)
        self.s1 = np.zeros(self.center.shape)
        self.s2 = np.zeros(self.center.shape)
        self.lo = np.full(self.center.shape, np.inf)
        self.hi = np.full(self.center.shape, -np.inf)

    def add(self, where: np.ndarray | slice, values: np.ndarray) -> None:
        d = values - self.center[where]
        self.n[where] += 1
        self.s1[where] += d
        self.s2[where] += d * d
        self.lo[where] = np.minimum(self.lo[where], values)
        self.hi[where] = np.maximum(self.hi[where], values)

    def sd(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (self.s2 - self.s1**2 / self.n) / (self.n - 1)
        return np.where(self.n >= 2, np.sqrt(np.maximum(var, 0.0)), np.nan)


def _array_count(key: str, field: str, log: ClickLog) -> np.ndarray:
    """Observations informing an array parameter: DCM's continuation at rank r, clicks at r with a slot below;
    PBM's examination at rank r, the sessions showing a slot there; UBM's ``examination[r, p + 1]``, the slots
    shown at rank r whose closest click above is at rank p (-1: none); DBN's gamma and CCM's tau1, the moves into a
    shown slot; CCM's tau2 and tau3, the clicks with a slot below (0-d arrays for the scalars)."""
    if (key, field) in (("dcm", "continuation"), ("ccm", "tau2"), ("ccm", "tau3")):
        below = np.zeros(log.clicks.shape, dtype=bool)
        below[:, :-1] = log.shown[:, 1:]
        per_rank = (log.clicks & below).sum(axis=0).astype(float)
        return per_rank if key == "dcm" else np.asarray(per_rank.sum())
    if (key, field) in (("dbn", "gamma"), ("ccm", "tau1")):  # every move into a shown slot
        return np.asarray(float(np.asarray(log.shown, dtype=bool)[:, 1:].sum()))
    if (key, field) == ("pbm", "examination"):
        return np.asarray(log.shown, dtype=bool).sum(axis=0).astype(float)
    if (key, field) == ("ubm", "examination"):
        shown, clicks = np.asarray(log.shown, dtype=bool), np.asarray(log.clicks, dtype=bool)
        k = shown.shape[1]
        ranks = np.arange(1, k + 1)
        # column of each slot: 1 + the rank of the closest click above it (0: none)
        last = np.maximum.accumulate(np.where(clicks & shown, ranks[None, :], 0), axis=1)
        col = np.zeros(shown.shape, dtype=np.int64)
        col[:, 1:] = last[:, :-1]
        rows = np.broadcast_to(np.arange(k)[None, :], shown.shape)
        out = np.zeros((k, k))
        np.add.at(out, (rows[shown], col[shown]), 1.0)
        return out
    raise AssertionError(f"no observation count for {key}.{field}")


def bootstrap_se(
    name: str, log: ClickLog, fit: ClickModelFit, *, n_boot: int = 100, seed: int = 0,
    progress: Callable[[str, int, int], None] | None = None, **options: Any
) -> BootstrapSE:
    """Per-session bootstrap SEs of ``fit`` = ``fit_log(name, log, **options)`` (see the module docstring).

    ``progress(what, done, n_boot)`` is called after each refit (``clicks fit --bootstrap`` prints a line at most
    every few seconds with the time left: a refit of a large log takes seconds).

    Raises
    ------
    ConfigError
        ``name`` is not one of :data:`SE_MODELS`, or ``n_boot < 2``.
    """
    from clickmodels.estimation import canonical_name, fit_log

    key = canonical_name(name)
    if key not in SE_MODELS:
        raise ConfigError(("bootstrap",), f"standard errors are available for {', '.join(SE_MODELS)}, not {key}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ConfigError(("bootstrap",), f"must be an integer >= 2 (replicates), got {n_boot!r}")
    scaled = key in SCALED_MODELS
    if scaled:
        fit_scaled = rank1_scale(fit)
        if fit_scaled is None:
            first = float(np.asarray(fit.examination).flat[0])  # type: ignore[attr-defined]
            raise ConfigError(("bootstrap",), f"{key}: the fit's examination at rank 1 is {first!r}, not > 0, so "
                              "its rank-1 scale, on which the standard errors are measured, is undefined")
        fit = fit_scaled
    pair_fields = [f for f in type(fit).pair_fields]
    array_fields = [*type(fit).array_fields, *type(fit).float_fields]  # scalars as 0-d arrays
    keys = {f: _pair_keys(getattr(fit, f)) for f in pair_fields}
    order = {f: np.argsort(k) for f, k in keys.items()}
    moments = {f: _Moments(getattr(fit, f).value) for f in pair_fields}
    moments.update({f: _Moments(np.asarray(getattr(fit, f), dtype=float)) for f in array_fields})
    rng = np.random.default_rng(seed)
    n = log.n_sessions
    for b in range(int(n_boot)):
        sample = log.take(rng.integers(0, n, n))
        rep = fit_log(key, sample, **options)
        if scaled:
            rep = rank1_scale(rep)
            if rep is None:  # no scale in this replicate (examination 0 at rank 1): it informs nothing
                if progress is not None:
                    progress(f"{key} fitted again on resampled sessions", b + 1, int(n_boot))
                continue
        for f in pair_fields:
            table = getattr(rep, f)
            k, srt = keys[f], order[f]
            pos = srt[np.minimum(np.searchsorted(k, _pair_keys(table), sorter=srt), len(k) - 1)]
            if not np.array_equal(k[pos], _pair_keys(table)):  # a replicate's pairs are a subset of the log's
                raise AssertionError("bootstrap replicate has a pair the full log lacks")
            informed = table.count > 0  # else the replicate's value is EM's start, not an estimate
            moments[f].add(pos[informed], table.value[informed])
        for f in array_fields:
            informed = _array_count(key, f, sample) > 0
            moments[f].add(informed, np.asarray(getattr(rep, f), dtype=float)[informed])
        if progress is not None:
            progress(f"{key} fitted again on resampled sessions", b + 1, int(n_boot))
    counts = {f: np.asarray(getattr(fit, f).count, dtype=float) for f in pair_fields}
    counts.update({f: _array_count(key, f, log) for f in array_fields})
    se, reason = {}, {}
    for f, m in moments.items():
        count = counts.get(f, np.full(m.n.shape, np.inf))
        reference = np.zeros(m.n.shape, dtype=bool)
        impossible = np.zeros(m.n.shape, dtype=bool)
        if scaled and f == "examination":
            reference.flat[0] = True
            if m.n.ndim == 2:  # UBM
                impossible = np.triu(np.ones(m.n.shape, dtype=bool), 1)
        why = np.select(
            [reference, impossible, count == 0, count < 2, (m.n >= 1) & (m.hi - m.lo <= 1e-12),
             (m.n < 2) | (m.n < n_boot / 2)],
            list(REASONS), default="")
        se[f] = np.where(why == "", m.sd(), np.nan)
        reason[f] = np.where(why == "", None, why).tolist()
    values = None
    if scaled:
        values = {f: np.asarray(getattr(fit, f).value if f in pair_fields else getattr(fit, f), dtype=float)
                  for f in moments}
    return BootstrapSE(int(n_boot), int(seed), se, reason, values)
