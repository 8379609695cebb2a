"""Recursive numerical integration of a group-sequential z-process (Armitage, McPherson and Rowe
1969; Jennison and Turnbull 2000, sec. 19.2): the exact crossing probabilities behind
:mod:`onlineeval.stats.sequential`'s spending boundaries, power and expected sample sizes."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_SF = np.frompyfunc(lambda x: 0.5 * math.erfc(x * _INV_SQRT2), 1, 1)
_TAIL_SDS = 12.0  # the grid covers +-12 sd around the mean of S_k (mass outside < 1e-32)
#: largest transition kernel (grid points x previous grid points) built at once; larger ones by blocks of rows
KERNEL_CELLS = 1 << 22
#: integrate only the band of previous grid points within 12 sd of the increment (the normal kernel beyond is below
#: 1e-31 of its peak) where that band is under a quarter of the previous grid: many looks close in information (a
#: fine grid over a wide interval: from some 100 looks one-sided, some 400 two-sided; e.g. 720 hourly looks, the
#: analysis 2 min -> 40 s, 1,000 looks of `onlineeval power` 87 s -> 17 s). Elsewhere the dense sums are as they
#: were (bit for bit the former numbers); with the band, the same to 1e-12 relative (tested; 2e-14 on the summary of a
#: 720-look run). False: always the dense kernel (the reference).
BANDED = True


def _sf(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Upper normal tail ``1 - Phi(x)`` elementwise, accurate far into the tail (via erfc)."""
    return np.asarray(_SF(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def _banded_density(s: NDArray[np.float64], prev_s: NDArray[np.float64], prev_g: NDArray[np.float64], mu: float,
                    sd: float, lo_i: NDArray[np.intp], hi_i: NDArray[np.intp], width: int) -> NDArray[np.float64]:
    """The density at the grid ``s`` from the weighted previous density ``prev_g`` at ``prev_s``, each point summing
    only the previous points ``lo_i[i]:hi_i[i]`` (at most ``width``) within 12 sd of the increment (:data:`BANDED`);
    by blocks of rows (bounded memory)."""
    m = s.size
    dens = np.empty(m)
    rows = max(1, KERNEL_CELLS // max(width, 1))
    offsets = np.arange(width)
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        idx = lo_i[start:stop, None] + offsets
        valid = idx < hi_i[start:stop, None]
        np.minimum(idx, prev_s.size - 1, out=idx)
        z = (s[start:stop, None] - prev_s[idx] - mu) / sd
        kern = np.where(valid, np.exp(-0.5 * z * z), 0.0) / (sd * math.sqrt(2.0 * math.pi))
        dens[start:stop] = (kern * prev_g[idx]).sum(axis=1)
    return dens


class _Recursion:
    r"""Recursive numerical integration of the sub-densities of :math:`S_k = Z_k\sqrt{t_k}`.

    :math:`S` is a Brownian motion with drift :math:`\delta` in information time ``t``. Between
    looks the density of paths still running is propagated by the normal transition kernel
    (Armitage, McPherson and Rowe 1969; Jennison and Turnbull 2000, sec. 19.2), integrated
    with composite Simpson's rule on a grid over the continuation interval, truncated at
    ``+-12`` standard deviations of :math:`S_k` around its mean. The grid step is at most
    1/6 of the standard deviation of the next increment (at least 201 points).
    """

    def __init__(self, fractions: NDArray[np.float64], drift: float, grid: int = 6) -> None:
        self.t = fractions
        self.drift = float(drift)
        self.per_sd = int(grid)
        self.k = 0
        self.s: NDArray[np.float64] | None = None  # grid of S_{k-1}
        self.g: NDArray[np.float64] | None = None  # Simpson-weighted sub-density at the grid

    def _increment(self) -> tuple[float, float]:
        k = self.k
        d = self.t[k] - (self.t[k - 1] if k > 0 else 0.0)
        return self.drift * d, math.sqrt(d)

    def exit(self, upper: float, lower: float) -> tuple[float, float]:
        """Probabilities of continuing to look ``k`` and then exiting above / below there."""
        sq = math.sqrt(self.t[self.k])
        bu, bl = upper * sq, lower * sq
        mu, sd = self._increment()
        if self.k == 0:
            return float(_sf(np.asarray((bu - mu) / sd))), float(_sf(np.asarray((mu - bl) / sd)))
        if self.g is None or self.s is None or self.g.size == 0:
            return 0.0, 0.0
        up = float(self.g @ _sf((bu - self.s - mu) / sd)) if np.isfinite(bu) else 0.0
        lo = float(self.g @ _sf((self.s + mu - bl) / sd)) if np.isfinite(bl) else 0.0
        return up, lo

    def advance(self, upper: float, lower: float) -> None:
        """Condition on continuing at look ``k`` and move to look ``k + 1``."""
        k = self.k
        sq = math.sqrt(self.t[k])
        mean, sdk = self.drift * self.t[k], sq
        a = max(lower * sq, mean - _TAIL_SDS * sdk)
        b = min(upper * sq, mean + _TAIL_SDS * sdk)
        mu, sd = self._increment()
        if k + 1 < self.t.size:
            next_sd = math.sqrt(self.t[k + 1] - self.t[k])
        else:
            next_sd = sd
        if not a < b or (self.g is not None and self.g.size == 0):
            self.s, self.g = np.empty(0), np.empty(0)
            self.k += 1
            return
        m = max(201, math.ceil((b - a) / next_sd * self.per_sd))
        m += 1 - m % 2  # odd number of points for Simpson's rule
        s = np.linspace(a, b, m)
        h = (b - a) / (m - 1)
        w = np.full(m, 2.0)
        w[1::2] = 4.0
        w[0] = w[-1] = 1.0
        w *= h / 3.0
        if k == 0:
            dens = np.exp(-0.5 * ((s - mu) / sd) ** 2) / (sd * math.sqrt(2.0 * math.pi))
        else:
            prev_s, prev_g = self.s, self.g
            if prev_s is None or prev_g is None:  # look 0 always sets the grid
                raise RuntimeError("sequential recursion: no grid after look 0")
            lo_i = np.searchsorted(prev_s, s - mu - _TAIL_SDS * sd, side="left")
            hi_i = np.searchsorted(prev_s, s - mu + _TAIL_SDS * sd, side="right")
            width = int((hi_i - lo_i).max())
            if BANDED and width * 4 < prev_s.size:  # a band (see BANDED)
                dens = _banded_density(s, prev_s, prev_g, mu, sd, lo_i, hi_i, width)
            elif m * prev_s.size <= KERNEL_CELLS:
                kern = np.exp(-0.5 * ((s[:, None] - prev_s[None, :] - mu) / sd) ** 2) / (sd * math.sqrt(2.0 * math.pi))
                dens = kern @ prev_g
            else:  # a fine grid (looks close in information): the kernel by blocks of rows, bounded memory
                dens = np.empty(m)
                rows = max(1, KERNEL_CELLS // prev_s.size)
                for lo in range(0, m, rows):
                    part = s[lo:lo + rows, None]
                    kern = np.exp(-0.5 * ((part - prev_s[None, :] - mu) / sd) ** 2) / (sd * math.sqrt(2.0 * math.pi))
                    dens[lo:lo + rows] = kern @ prev_g
        self.s, self.g = s, w * dens
        self.k += 1
