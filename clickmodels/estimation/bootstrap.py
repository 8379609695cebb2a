"""Standard errors of a fit by the per-session bootstrap (DCM and SDBN).

Sessions are the independent units: each of ``n_boot`` replicates draws ``n`` sessions with
replacement from the ``n`` of the log, refits the model with the same estimator and options
(EM from its usual starting point, so a replicate converges as the fit itself did), and a
parameter's standard error is the standard deviation (``ddof=1``) of its replicate values.
A (query, document) pair missing from a replicate (none of its sessions drawn) has no value
there; its SE is over the replicates that have it (``NaN`` with fewer than 2).

The SEs describe sampling variability only: for the last-click closed form
(``method="closed_form"``) they say nothing of its bias. Parameters that are not identified
get ``NaN``: DCM's deepest continuation (no document below it). Only DCM and SDBN are
covered (:data:`SE_MODELS`): their parameters are identified and the SEs are checked there
against the exact Fisher information and the spread over independent logs
(``tests/test_clickmodels_fit_se.py``); PBM's and UBM's examination scale is not identified, so
their raw parameters have no meaningful SE, and the other models are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from clickmodels.estimation.base import ClickModelFit, PairTable
from clickmodels.logs import ClickLog
from onlineeval.errors import ConfigError

__all__ = ["SE_MODELS", "BootstrapSE", "bootstrap_se"]

#: the models :func:`bootstrap_se` covers
SE_MODELS = ("dcm", "sdbn")


@dataclass(frozen=True)
class BootstrapSE:
    """Bootstrap standard errors of a fit's parameters.

    Attributes
    ----------
    n_boot, seed:
        Replicates and the seed of ``numpy.random.default_rng`` that drew them.
    se:
        Per parameter field: an array aligned with the fit's field (a pair table's rows, an array's entries).
    """

    n_boot: int
    seed: int
    se: dict[str, np.ndarray]

    def to_dict(self) -> dict[str, Any]:
        """JSON form, saved by ``clicks fit --bootstrap`` under ``standard_errors``."""
        return {
            "method": "per-session bootstrap: sessions drawn with replacement, refitted with the same estimator; "
            "SE = standard deviation of the replicates (ddof 1); null = not identified or fewer than 2 replicates",
            "n_boot": self.n_boot,
            "seed": self.seed,
            "se": {k: [None if not np.isfinite(x) else float(x) for x in v] for k, v in self.se.items()},
        }

    def summary(self) -> str:
        """One line: per field, the median SE (pair tables) or every SE (arrays)."""
        parts = []
        for key, v in self.se.items():
            ok = v[np.isfinite(v)]
            if v.shape[0] > 12:
                parts.append(f"{key} median {np.median(ok):.4f} (max {ok.max():.4f}, {ok.size} values)"
                             if ok.size else f"{key} none")
            else:
                parts.append(f"{key} " + " ".join("-" if not np.isfinite(x) else f"{x:.4f}" for x in v))
        return "; ".join(parts)


def _pair_keys(table: PairTable) -> np.ndarray:
    return np.char.add(np.char.add(table.query.astype(str), "\x1f"), table.doc.astype(str))


class _Moments:
    """Sums of deviations from the full fit's values (numerically stable variance)."""

    def __init__(self, center: np.ndarray) -> None:
        self.center = np.asarray(center, dtype=float)
        self.n = np.zeros(self.center.shape)
        self.s1 = np.zeros(self.center.shape)
        self.s2 = np.zeros(self.center.shape)

    def add(self, where: np.ndarray | slice, values: np.ndarray) -> None:
        d = values - self.center[where]
        self.n[where] += 1
        self.s1[where] += d
        self.s2[where] += d * d

    def sd(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            var = (self.s2 - self.s1**2 / self.n) / (self.n - 1)
        return np.where(self.n >= 2, np.sqrt(np.maximum(var, 0.0)), np.nan)


def bootstrap_se(
    name: str, log: ClickLog, fit: ClickModelFit, *, n_boot: int = 100, seed: int = 0, **options: Any
) -> BootstrapSE:
    """Per-session bootstrap SEs of ``fit`` = ``fit_log(name, log, **options)`` (see the module docstring).

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
    pair_fields = [f for f in type(fit).pair_fields]
    array_fields = [f for f in type(fit).array_fields]
    keys = {f: _pair_keys(getattr(fit, f)) for f in pair_fields}
    order = {f: np.argsort(k) for f, k in keys.items()}
    moments = {f: _Moments(getattr(fit, f).value) for f in pair_fields}
    moments.update({f: _Moments(np.asarray(getattr(fit, f), dtype=float)) for f in array_fields})
    rng = np.random.default_rng(seed)
    n = log.n_sessions
    for _ in range(int(n_boot)):
        rep = fit_log(key, log.take(rng.integers(0, n, n)), **options)
        for f in pair_fields:
            table = getattr(rep, f)
            k, srt = keys[f], order[f]
            pos = srt[np.minimum(np.searchsorted(k, _pair_keys(table), sorter=srt), len(k) - 1)]
            if not np.array_equal(k[pos], _pair_keys(table)):  # a replicate's pairs are a subset of the log's
                raise AssertionError("bootstrap replicate has a pair the full log lacks")
            moments[f].add(pos, table.value)
        for f in array_fields:
            moments[f].add(slice(None), np.asarray(getattr(rep, f), dtype=float))
    se = {f: m.sd() for f, m in moments.items()}
    if key == "dcm":
        se["continuation"][-1] = np.nan  # not identified: no document below the deepest rank
    return BootstrapSE(int(n_boot), int(seed), se)
