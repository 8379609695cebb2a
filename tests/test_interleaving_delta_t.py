"""Interleaving designs with ``test: delta_t``: each pair's preference with the bias-reduced (CR2) SE clustered by
user and Student's t with Bell and McCaffrey's degrees of freedom (:func:`onlineeval.stats.ratio_mean_cr2`), for few
users, where the delta method's z rejects a true null too often.

References: the library's ``ratio_mean_cr2`` on the design's own per-user sums (tests/test_ratio_cr2.py checks it
against the dense impression-level computation); the A/A false-positive rate against its 99% binomial band (a Monte
Carlo with a fixed seed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from onlineeval.errors import ConfigError
from simulations.config import config_from_mapping
from tests.test_ab_delta_t import few_users_mapping, each_checkpoint, same_row, simulate


def test_every_days_rows_are_ratio_mean_cr2_on_the_designs_own_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every day's rows: ratio_mean_cr2 on the design's per-user sums with the df at the intra-user correlation of
    the halved outcomes, whose sums of squares the test adds up itself from the outcomes the design adds to its
    numerators (recorded), for a three-ranker multileaving design (the general path) and two-ranker team-draft (the
    table's path)."""
    import numpy as np

    from onlineeval.stats import intra_user_correlation, ratio_mean_cr2
    from simulations.designs.interleaving import InterleavingDesign

    mine: dict[tuple[int, str], np.ndarray] = {}  # (id(design), pair) -> the test's own sums of squares

    def recorder(original):  # noqa: ANN001, ANN202
        def add(self, key, user, weights):  # noqa: ANN001, ANN202
            if key.startswith("num:"):
                own = mine.setdefault((id(self), key[4:]), np.zeros(self.population))
                np.add.at(own, user, np.asarray(weights, dtype=np.float64) ** 2)
            return original(self, key, user, weights)
        return add

    monkeypatch.setattr(InterleavingDesign, "_add", recorder(InterleavingDesign._add))
    monkeypatch.setattr(InterleavingDesign, "_add_exact", recorder(InterleavingDesign._add_exact))
    # the NumPy batch step, whose outcomes the test records (the compiled table step adds the same squares bit for
    # bit: tests/test_simulation_kernels.py)
    monkeypatch.setattr(InterleavingDesign, "_kernel_inputs", lambda self: None)
    mapping = few_users_mapping(60, [{"name": "ml", "type": "interleaving", "method": "team_draft_multileave",
                                      "rankers": ["A", "B", "C"], "test": "delta_t"},
                                     {"name": "td", "type": "interleaving", "method": "team_draft",
                                      "test": "delta_t"}])
    mapping["rankers"]["others"] = {"C": {"noise": 0.6}}
    checked, rhos = 0, []

    def check(d, day: int) -> None:  # noqa: ANN001
        nonlocal checked
        if d.kind != "interleaving" or d.aa:
            return
        active = d.sums["impressions"] > 0
        rows = {r.metric: r for r in d.rows if r.day == day}
        for name, (metric, _, _) in zip(d.metric_names(), d.pairs, strict=True):
            num, compared, own = d.sums[f"num:{metric}"], d.sums["compared"], mine[(id(d), metric)]
            np.testing.assert_allclose(d.sums[f"sq:{metric}"], own, rtol=1e-12, atol=1e-12)
            icc = intra_user_correlation(num[active], compared[active], own[active])
            same_row(rows[name], ratio_mean_cr2(num[active], compared[active], d.alpha, icc=icc))
            rhos.append(icc)
            checked += 1

    each_checkpoint(config_from_mapping(mapping), check)
    assert checked == 2 * 3 * 3 + 2 * 1 * 3  # each design and its null variant (clicks blind to relevance), pairs
    assert max(rhos) > 0.0  # the df differ from independent impressions' somewhere


def test_the_config_takes_delta_t_for_interleaving_and_refuses_welch() -> None:
    base = {"name": "td", "type": "interleaving", "method": "team_draft"}
    with pytest.raises(ConfigError, match="test 'welch' .* applies to A/B designs"):
        config_from_mapping(few_users_mapping(60, [{**base, "test": "welch"}]))
    plain = config_from_mapping(few_users_mapping(60, [base])).effective()["designs"][0]
    explicit = config_from_mapping(few_users_mapping(60, [{**base, "test": "delta"}])).effective()["designs"][0]
    small = config_from_mapping(few_users_mapping(60, [{**base, "test": "delta_t"}])).effective()["designs"][0]
    assert "test" not in plain and explicit == plain  # the default keeps the former effective config
    assert small["test"] == "delta_t"


def test_few_users_team_drafts_aa_rate_is_in_its_band_with_delta_t(tmp_path: Path) -> None:
    """40 users of lognormal activity (sigma 1), two user types, 200 replicates: team-draft's A/A false-positive
    rate with the delta method's z is above its 99% band (0.105), with delta_t inside it (0.040)."""
    mapping = few_users_mapping(40, [{"name": "td", "type": "interleaving", "method": "team_draft"},
                            {"name": "tdt", "type": "interleaving", "method": "team_draft", "test": "delta_t"}],
                       replicates=200, batch_hours=24)
    summary, _, output = simulate(tmp_path, mapping)
    z_aa, t_aa = (summary["designs"][d]["delta_ab"]["aa"] for d in ("td", "tdt"))
    assert z_aa["within_band"] is False and t_aa["within_band"] is True
    flagged = [line for line in output.splitlines() if line.startswith("  A/A FPR above its band: ")]
    assert [line.split(": ")[1].split(" ")[0] for line in flagged] == ["td/delta_ab"]
    assert "test: delta_t (the bias-reduced SE" in flagged[0]
    assert "Bell and McCaffrey" in summary["conventions"]["interleaving_effect"]["tdt"]
    assert "Bell and McCaffrey" not in summary["conventions"]["interleaving_effect"]["td"]
