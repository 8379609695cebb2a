r"""The deterministic policy: always the base ranking's top ``k`` (the no-randomisation
reference).

.. math::

    P(\text{slot } j \text{ shows base rank } r) = 1[r = j], \qquad
    p_{\mathrm{list}}(\mathbf s) = 1[\mathbf s = \text{base top } k].

Off-policy estimators have no support outside this one list: it is the reference that
shows what randomisation buys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simulations.policies.base import (
    FloatArray,
    IntArray,
    RankPolicy,
    SpecReader,
    identity_ranks,
    register_policy,
)

__all__ = ["DeterministicPolicy"]


@register_policy
class DeterministicPolicy(RankPolicy):
    """Show the base ranking's top ``k`` (spec ``{"policy": "deterministic"}``)."""

    name = "deterministic"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], scores: Any, k: int,
                  path: Sequence[str | int] = ()) -> DeterministicPolicy:
        rd = SpecReader(spec, path)
        s = rd.scores(scores)
        rd.finish()
        return cls(s, k)

    def describe(self) -> str:
        return f"deterministic: the base ranking's top {self.k} (no randomisation)"

    def _sample(self, q: IntArray, rng: np.random.Generator) -> IntArray:
        # the base ranking's top k; ``order`` is already -1 past the candidates (rows of one
        # contiguous (Q, k) table taken along the first axis: the same as order[q, :k])
        top = getattr(self, "_top_k", None)
        if top is None:
            top = self._top_k = np.ascontiguousarray(self.order[:, : self.k])
            top.setflags(write=False)
        return top.take(q, axis=0)

    def _sample_ranks(self, c: IntArray, rng: np.random.Generator) -> IntArray:
        return identity_ranks(c.size, self.k)

    def _prefix_ranks(self, ranks: IntArray, c: IntArray) -> FloatArray:
        return np.cumprod(ranks == np.arange(self.k)[None, :], axis=1).astype(np.float64)

    def _rank_marginals(self, c: int) -> FloatArray:
        return np.eye(c, self.k)

    def _rank_support(self, c: int) -> tuple[IntArray, FloatArray]:
        return identity_ranks(1, self.k), np.ones(1)
