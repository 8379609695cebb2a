"""`onlineeval estimate`'s legend of the se column follows the run's settings: 'b' (the bootstrap's SD) is
explained with what each marked estimator's delta method holds fixed only when a row carries it, and an adaptive_ips
whose behaviours the user fixed is worded as the user's setting (its se is the delta method's), not as a
data-driven choice."""

from __future__ import annotations

from typing import Any

from estimate_cli_world import invoke, json_out, world  # noqa: F401  (world: the module-scoped fixture)

MARK = ("se 'b' = the bootstrap's SD, which makes again in every resample what the estimator's delta method holds "
        "fixed (adaptive_ips: the data-driven choice of behaviours)")
USER = ("adaptive_ips's behaviours are fixed by the user's setting (behaviours=cascade), not chosen on this log, so "
        "its se is the delta method's and holds no data-driven choice fixed")


def _run(world: dict[str, Any], *extra: str) -> tuple[str, dict[str, Any]]:
    args = ["--log", str(world["log"]), "--target", str(world["B"]), "--baseline", str(world["A"]),
            "--estimator", "ips,adaptive_ips", "--seed", "3", *extra]
    text = invoke(*args)
    assert text.exit_code == 0, text.output
    return text.stdout, json_out(*args)


def _se_cells(table: str, estimator: str) -> list[str]:
    """The se cells of an estimator's rows (its estimates' and its difference's)."""
    cells = []
    for line in table.splitlines():
        words = line.split()
        if words and words[0] == estimator and "[" in line:
            cells.append(words[3] if words[3][0] not in "+-" else words[4])  # a difference: target, baseline, value
    return cells


def test_the_data_driven_choice_with_a_bootstrap_is_marked_and_explained(world: dict[str, Any]) -> None:
    table, doc = _run(world, "--bootstrap", "100")
    legend = next(line for line in table.splitlines() if line.startswith("diagnostics: "))
    assert legend.endswith("; " + MARK) and "fixed by the user" not in table
    assert len(_se_cells(table, "adaptive_ips")) == 3 and all(c.endswith("b") for c in _se_cells(table, "adaptive_ips"))
    assert not any(c.endswith("b") for c in _se_cells(table, "ips"))
    assert {r["se_source"] != "delta method" for r in doc["results"] if r["estimator"] == "adaptive_ips"} == {True}


def test_a_user_fixed_behaviour_is_worded_as_the_users_setting(world: dict[str, Any]) -> None:
    """With --option adaptive_ips.behaviours=cascade and the same bootstrap nothing is chosen on the log: no 'b' on
    its rows, no 'b' legend (the old legend named a data-driven choice whatever the setting), and the user's
    setting named."""
    table, doc = _run(world, "--bootstrap", "100", "--option", "adaptive_ips.behaviours=cascade")
    legend = next(line for line in table.splitlines() if line.startswith("diagnostics: "))
    assert legend.endswith("; " + USER) and "se 'b'" not in table
    assert len(_se_cells(table, "adaptive_ips")) == 3
    assert not any(c.endswith("b") for c in _se_cells(table, "adaptive_ips"))
    assert {r["se_source"] for r in doc["results"] + doc["differences"]} == {"delta method"}
    # without the bootstrap the setting is still named; a data-driven adaptive_ips without one has neither line
    plain, _ = _run(world, "--option", "adaptive_ips.behaviours=cascade")
    assert USER in plain and "se 'b'" not in plain
    free, _ = _run(world)
    assert "se 'b'" not in free and "fixed by the user" not in free
    assert next(line for line in free.splitlines() if line.startswith("diagnostics: ")).endswith(
        "weight 0 there; not known support violations: the log has no logging policy)")
