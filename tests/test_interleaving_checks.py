"""Conformance suite on every registered interleaving method, and that it catches a broken one."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.interleaving import available_interleavers, get_interleaver
from onlineeval.interleaving.checks import (
    ConformanceError,
    check_interleaver,
    iter_checks,
)
from onlineeval.interleaving.team_draft import TeamDraft

CASES = [(name, check) for name in available_interleavers() for check, _ in iter_checks(get_interleaver(name))]


@pytest.mark.parametrize("name, check", CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_conformance(name: str, check: str) -> None:
    il = get_interleaver(name)
    dict(iter_checks(il))[check]()


def test_every_method_is_covered() -> None:
    assert {"balanced", "team_draft", "probabilistic", "optimized", "team_draft_multileave",
            "probabilistic_multileave"} <= set(available_interleavers())


class _Lopsided(TeamDraft):
    """Credits every click to B: the conformance suite must reject it."""

    name = "lopsided_test_only"

    def _credit(self, result, clicks):  # type: ignore[no-untyped-def]
        out = np.zeros((result.n, result.m))
        out[:, 1] = clicks.sum(axis=1)
        return out

    def _outcome(self, result, clicks):  # type: ignore[no-untyped-def]
        return np.sign(clicks.sum(axis=1)).astype(np.int8)


def test_suite_catches_a_broken_method() -> None:
    with pytest.raises(ConformanceError, match="identical rankers"):
        check_interleaver(_Lopsided())
    assert "check_output_structure" in check_interleaver("team_draft")
