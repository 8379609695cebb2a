"""Small sampling helpers shared by the simulation modules.

- :func:`child_seed`: a child stream of a :class:`numpy.random.SeedSequence` keyed by
  integers or names, so a component's stream depends on its key only (adding a design
  or a ranker changes nothing else).
- :func:`draw_from_cdf`: inverse-transform sampling of category indices from a CDF.
"""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["child_seed", "draw_from_cdf"]


def child_seed(parent: np.random.SeedSequence, *key: int | str) -> np.random.SeedSequence:
    """``parent``'s child stream for ``key``; a name counts as its CRC-32 (stable across
    runs and Python versions)."""
    codes = tuple(zlib.crc32(k.encode("utf-8")) if isinstance(k, str) else int(k) for k in key)
    return np.random.SeedSequence(parent.entropy, spawn_key=(*parent.spawn_key, *codes))


def draw_from_cdf(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Category index of each uniform in ``u`` for the cumulative distribution ``cdf``
    (clipped to the last category where rounding leaves ``cdf[-1]`` just below 1)."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), cdf.size - 1)
