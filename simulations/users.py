"""The users' click behaviour: one click model, or a mixture of user types.

Every user belongs to one type for the whole replicate (drawn by the traffic model), so
users differ persistently; that is why designs analyse per-user sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simulations.config import UsersConfig
from simulations.sampling import draw_from_cdf

__all__ = ["UserModels"]


class UserModels:
    """Click models of the user types, with their population shares."""

    def __init__(self, names: Sequence[str], shares: Sequence[float], models: Sequence[Any]) -> None:
        self.names = tuple(names)
        self.shares = np.asarray(shares, dtype=np.float64)
        self.models = tuple(models)

    @classmethod
    def from_config(cls, users: UsersConfig) -> UserModels:
        import clickmodels

        mixture = users.mixture()
        return cls([m[0] for m in mixture], [m[1] for m in mixture], [clickmodels.build(m[2]) for m in mixture])

    def check_world(self, n_grades: int, example: np.ndarray) -> None:
        """Refuse a click model that cannot serve the collection: grades it does not know,
        or lists longer than it has parameters for (``example``: some shown grade lists)."""
        from onlineeval.errors import ConfigError, InputError

        for i, (name, model) in enumerate(zip(self.names, self.models, strict=True)):
            key = ("users", "click_model") if len(self.models) == 1 else ("users", "types", i, "click_model")
            known = getattr(model, "n_grades", None)
            if known is not None and n_grades > known:
                raise ConfigError(
                    key,
                    f"the collection has grades 0..{n_grades - 1} but this click model "
                    f"({name}) defines {known} grades; give parameters for every grade",
                )
            try:
                model.click_probabilities(example)
            except InputError as exc:
                raise ConfigError(key, f"cannot simulate this collection's lists: {exc.message}") from None

    def sample(self, labels: np.ndarray, user_type: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Clicks ``(n, k)`` for shown ``labels``, each row by its user's type's model."""
        if len(self.models) == 1:
            return np.asarray(self.models[0].sample(labels, rng).clicks, dtype=bool)
        clicks = np.zeros(labels.shape, dtype=bool)
        for t, model in enumerate(self.models):
            rows = np.flatnonzero(user_type == t)
            if rows.size:
                clicks[rows] = np.asarray(model.sample(labels[rows], rng).clicks, dtype=bool)
        return clicks

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

    def draw_types(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Types of ``n`` users drawn by share."""
        if len(self.models) == 1:
            return np.zeros(n, dtype=np.int8)
        return draw_from_cdf(np.cumsum(self.shares), rng.random(n)).astype(np.int8)
