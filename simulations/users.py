"""The users' click behaviour: one click model, or a mixture of user types.

Every user belongs to one type for the whole replicate (drawn by the traffic model), so
users differ persistently; that is why designs analyse per-user sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simulations.config import UsersConfig

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

    def check_grades(self, n_grades: int) -> None:
        """Refuse a collection whose grades exceed what a user type's click model knows."""
        from onlineeval.errors import ConfigError

        for i, (name, model) in enumerate(zip(self.names, self.models)):
            known = getattr(model, "n_grades", None)
            if known is not None and n_grades > known:
                key = ("users", "click_model") if len(self.models) == 1 else ("users", "types", i, "click_model")
                raise ConfigError(
                    key,
                    f"the collection has grades 0..{n_grades - 1} but this click model "
                    f"({name}) defines {known} grades; give parameters for every grade",
                )

    def __len__(self) -> int:
        return len(self.models)

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
        return sum(s * np.asarray(m.click_probabilities(labels)) for s, m in zip(self.shares, self.models))

    def draw_types(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Types of ``n`` users drawn by share."""
        if len(self.models) == 1:
            return np.zeros(n, dtype=np.int8)
        cdf = np.cumsum(self.shares)
        return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(cdf) - 1).astype(np.int8)
