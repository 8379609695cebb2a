"""A trec collection's truths are over query samples, not drawn worlds (review 7, F3).

A trec collection's queries, judgments and runs are files: the seed only re-permutes the Zipf popularity over the
queries (nothing with collection.frequencies; simulations/world.py, _trec). So the simulate run's true-effect line
and report.html's legend speak of query samples (as the Offline line), without the seed-sweep advice, and a sweep
over seed on a trec base says its spread is not over worlds. Checked here against the worlds themselves: the
queries and judgments of two seeds' trec worlds are identical, their popularity a permutation (or identical with a
frequencies file), and the A/B truths across the seeds equal (frequencies) or not.
"""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_sweep_trec import _base, _collection  # a small trec collection (qrels, a baseline and 3 runs)

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.report import _truth_world_lines, terminal_summary
from simulations.runner import world_seed
from simulations.sweep import run_sweep, sweep_from_mapping
from simulations.sweep_outputs import terminal_table, world_spread
from simulations.world import build_world

QUERY_SAMPLE = "this collection's queries regarded as a sample from its query population"


def _trec(root: Path, frequencies: bool = False, **extra: Any) -> dict[str, Any]:
    _collection(root, n_queries=30)
    base = _base(root)
    base["collection"]["runs"]["B"] = str(root / "runs" / "cand0.run")  # a better run than the baseline
    if frequencies:
        counts = np.random.default_rng(9).integers(1, 50, size=30)
        (root / "freq.txt").write_text("".join(f"q{q} {c}\n" for q, c in enumerate(counts)))
        base["collection"]["frequencies"] = str(root / "freq.txt")
    return {**base, **extra}


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_a_seed_redraws_only_a_trec_collections_popularity(tmp_path: Path) -> None:
    """The premise, on the worlds: two seeds give the same queries and judgments, popularity permuted; with a
    frequencies file nothing differs."""
    for frequencies in (False, True):
        root = tmp_path / str(frequencies)
        root.mkdir()
        cfg = _trec(root, frequencies)
        w1, w2 = (build_world(config_from_mapping({**cfg, "seed": s}), world_seed(s)) for s in (1, 2))
        assert w1.query_ids == w2.query_ids and np.array_equal(w1.labels, w2.labels)
        assert np.allclose(np.sort(w1.frequency), np.sort(w2.frequency), rtol=0, atol=1e-15)
        assert np.array_equal(w1.frequency, w2.frequency) is frequencies


def test_trec_truth_line_and_legend_speak_of_query_samples(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = simulate(config_from_mapping(_trec(tmp_path)), output=out, workers=1)
    assert result.world.notes.get("collection") == "trec"
    assert result.summary["designs"]["ab"]["reciprocal_rank"]["true_effect_world_se"] > 0
    text = terminal_summary(result)
    flat = " ".join(text.split())
    assert "one query sample:" in flat  # the Offline line already did (world_sampling_text(off, synthetic=False))
    assert "true effect over query samples: ab/reciprocal_rank +" in flat
    assert f"(SE over query samples of the exact truths ({QUERY_SAMPLE}" in flat
    for wrong in ("true effect over worlds", "independently drawn worlds", "sweep over seed", "across worlds"):
        assert wrong not in flat, wrong
    page = _text((out / "report.html").read_text(encoding="utf-8"))
    assert "+- under a true effect, over query samples: ab / reciprocal_rank +" in page
    assert QUERY_SAMPLE in page and "one query sample:" in page.lower()
    for wrong in ("over worlds", "independently drawn worlds", "sweep over seed"):
        assert wrong not in page, wrong


def test_truth_line_variants() -> None:
    """The same summary entry: the synthetic line keeps its worlds and seed-sweep advice, the trec one does not."""
    s = {"designs": {"ab": {"rr": {"true_effect": 0.02, "true_effect_world_se": 0.004}}}}
    synthetic, trec = (" ".join(" ".join(_truth_world_lines(s, syn)).split()) for syn in (True, False))
    assert synthetic.startswith("true effect over worlds: ab/rr +0.0200 +- 0.0040 (20%;")
    assert "independently drawn worlds" in synthetic and "see a sweep over seed" in synthetic
    assert trec.startswith("true effect over query samples: ab/rr +0.0200 +- 0.0040 (20%;")
    assert QUERY_SAMPLE in trec and "sweep over seed" not in trec and "worlds" not in trec


@pytest.mark.parametrize("frequencies", [False, True])
def test_a_seed_sweep_on_a_trec_base_says_its_spread_is_not_over_worlds(tmp_path: Path, frequencies: bool) -> None:
    base = _trec(tmp_path, frequencies)
    out = tmp_path / "out"
    sweep = sweep_from_mapping({"base": base, "grid": {"seed": [1, 2, 3]}, "output": str(out)})
    result = run_sweep(sweep, workers=1, writers=0)
    kind = "nothing" if frequencies else "popularity"
    rows = result.rows
    assert list(rows["seed_draws"]) == [kind] * len(rows)
    csv = pd.read_csv(out / "points.csv")
    assert list(csv["seed_draws"]) == [kind] * len(csv)
    # the premise in the numbers: with a frequencies file the exact A/B truth and the offline delta are the same at
    # every seed; permuted popularity moves them
    ab = rows[rows["design"] == "ab"]
    same = ab["true_effect"].nunique() == 1 and ab["offline_delta"].nunique() == 1
    assert same is frequencies
    cols = ["point", *sweep.axes, "design", "metric", "offline_delta", "true_effect", "power_last_day",
            "analytic_required_days"]
    printed = terminal_table(rows, cols)  # as `onlineeval sweep` prints it
    assert re.search(r"design +metric +seeds +true_effect", printed)  # a column of seeds, not of worlds
    text = " ".join(printed.split())
    heading = ("across seeds (the seed axis on a trec collection with collection.frequencies: a seed redraws "
               "nothing of the world" if frequencies else "across seeds (the seed axis on a trec collection: its "
               "queries, judgments and runs are the same at every seed, which only re-permutes the query popularity")
    assert heading in text
    assert "so this spread is not over worlds or query samples" in text and "each point's SE over query samples" in text
    assert "across worlds" not in text and "draws its own world" not in text
    assert world_spread(rows, sweep.axes)["seed_draws"].tolist() == [kind, kind]
    saved = json.loads((out / "summary.json").read_text())["worlds"]
    assert "so this spread is not over worlds" in saved["legend"] and "draws the world it" not in saved["legend"]
    page = _text((out / "report.html").read_text(encoding="utf-8"))
    assert heading[0].upper() + heading[1:] in page and "so this spread is not over worlds" in page
    assert "Across worlds" not in page and "each seed draws its own world" not in page


def test_spread_by_hand_with_synthetic_and_trec_rows() -> None:
    """A sweep whose rows are on both kinds of collection (collection.type an axis next to seed) shows what each
    row's seed redraws, and both legends."""
    from simulations.sweep_outputs import TREC_SPREAD_LEGEND, WORLD_SPREAD_LEGEND, world_spread_text

    rows = pd.DataFrame({
        "seed": [1, 2, 1, 2], "kind": ["s", "s", "t", "t"], "design": ["ab"] * 4, "metric": ["rr"] * 4,
        "offline_delta": [0.02, 0.04, 0.01, 0.01], "true_effect": [0.001, 0.003, 0.002, 0.002],
        "analytic_required_impressions": [4000.0, 1000.0, 2000.0, 2000.0],
        "analytic_required_days": [4.0, 1.0, 2.0, 2.0], "analytic_withheld": [False] * 4, "detectable": [True] * 4,
        "seed_draws": ["world", "world", "nothing", "nothing"],
    })
    spread = world_spread(rows, ["seed", "kind"])
    assert spread["seed_draws"].tolist() == ["world", "nothing"]
    text = world_spread_text(spread)
    lines = text.splitlines()
    assert lines[0].startswith("across seeds (the seed axis; seed_draws: what a seed redraws of each row's world, "
                               "world: the world (queries, labels, rankers' noise, popularity); nothing: nothing")
    assert lines[1].split() == ["design", "metric", "kind", "seed_draws", "seeds", "true_effect", "offline_delta",
                                "impressions_needed", "days_needed", "no_size"]
    assert lines[2].split()[:5] == ["ab", "rr", "s", "world", "2"]
    assert lines[3].split()[:5] == ["ab", "rr", "t", "nothing", "2"]
    assert lines[-1] == WORLD_SPREAD_LEGEND + " " + TREC_SPREAD_LEGEND
    # rows from before review 7 (no seed_draws) are synthetic worlds
    old = world_spread_text(world_spread(rows.drop(columns=["seed_draws"]), ["seed", "kind"]))
    assert old.startswith("across worlds (the seed axis: each seed draws its own world;")
    assert old.endswith(WORLD_SPREAD_LEGEND) and "seed_draws" not in old


def test_a_frequencies_file_says_how_it_met_the_judged_queries(tmp_path: Path) -> None:
    # a file keyed otherwise ("1" against the qrels' "q1") matched a few queries silently, and those took all the
    # traffic; the world's notes (summary.json) and the report's run lines now count what it matched
    cfg = _trec(tmp_path, frequencies=True)
    freq = tmp_path / "freq.txt"
    lines = freq.read_text().splitlines()
    # 3 of the judged queries keep their line, the others are keyed without the 'q', plus a query not judged
    freq.write_text("\n".join(lines[:3] + [line[1:] for line in lines[3:]] + ["zz 7", "q5 0"]) + "\n")
    world = build_world(config_from_mapping(cfg), world_seed(0))
    notes = world.notes
    assert notes["frequencies_queries_counted"] == 3 == int((world.frequency > 0).sum())
    assert notes["frequencies_queries_without_count"] == world.n_queries - 3
    assert notes["frequencies_lines_not_judged"] == 27 + 1  # the 27 unprefixed lines and zz (q5 0 is judged)
    result = simulate(config_from_mapping({**cfg, "replicates": 2}), output=tmp_path / "run", workers=1)
    text = " ".join(terminal_summary(result).split())
    assert (f"query frequencies (collection.frequencies): 3 judged queries counted, {world.n_queries - 3} without a "
            "positive count (never drawn!), 28 lines for queries not judged (left out)") in text
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["world"]["frequencies_lines_not_judged"] == 28


def test_every_run_of_a_trec_collection_gets_its_line(tmp_path: Path) -> None:
    # the report's run lines (unjudged shown documents, judged queries missing from the run, run queries without
    # judgments) named A and B only; a third ranker's run (multileaving) was accounted in summary.json alone
    cfg = _trec(tmp_path)
    lines = (tmp_path / "runs" / "cand2.run").read_text().splitlines()
    short = tmp_path / "runs" / "short.run"
    short.write_text("\n".join(line for line in lines if not line.startswith("q0 ")) + "\n")
    cfg["collection"]["runs"]["C"] = str(short)
    cfg["designs"] = [{"name": "ml", "type": "interleaving", "method": "team_draft_multileave",
                       "rankers": ["A", "B", "C"]}]
    result = simulate(config_from_mapping(cfg), output=tmp_path / "run", workers=1)
    text = terminal_summary(result)
    runs = [line.split(":")[0].strip() for line in text.splitlines() if line.startswith("  run ")]
    assert runs == ["run A", "run B", "run C"]
    line_c = next(line for line in text.splitlines() if line.startswith("  run C:"))
    assert "1 judged queries missing from the run" in line_c
    assert "0 judged queries ranked to fewer than" in line_c


def test_a_run_shorter_than_the_page_for_a_query_is_counted(tmp_path: Path) -> None:
    """A run ranking fewer documents than rankers.depth for a judged query shows a shorter page there: the run's
    line counts those queries (it said only that fewer documents were shown in all)."""
    cfg = _trec(tmp_path)
    depth = cfg["rankers"]["depth"]
    lines = Path(cfg["collection"]["runs"]["B"]).read_text().splitlines()
    cut = tmp_path / "runs" / "cut.run"
    kept, seen = [], {}
    for line in lines:
        q = line.split()[0]
        seen[q] = seen.get(q, 0) + 1
        if q not in ("q0", "q1") or seen[q] <= 2:
            kept.append(line)
    cut.write_text("\n".join(kept) + "\n")
    cfg["collection"]["runs"]["B"] = str(cut)
    cfg["replicates"] = 2
    result = simulate(config_from_mapping(cfg), output=tmp_path / "run", workers=1)
    text = terminal_summary(result)
    line_b = next(line for line in text.splitlines() if line.startswith("  run B:"))
    line_a = next(line for line in text.splitlines() if line.startswith("  run A:"))
    assert f"2 judged queries ranked to fewer than {depth} documents (a shorter page there)" in line_b
    assert f"0 judged queries ranked to fewer than {depth} documents" in line_a
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["world"]["queries_short_in_run_B"] == 2


def test_a_frequencies_file_that_is_not_plain_text_is_refused_naming_it(tmp_path: Path) -> None:
    """collection.frequencies gzipped or not UTF-8 raised a bare UnicodeDecodeError; it is read as the other text
    inputs are (onlineeval.io.text.text_lines): the file and line, and what to do."""
    import gzip

    from onlineeval.errors import InputError
    from simulations.world import _read_frequencies

    packed = tmp_path / "freq.txt.gz"
    packed.write_bytes(gzip.compress(b"q1 5\n"))
    with pytest.raises(InputError, match=r"gzip-compressed .*decompress it first"):
        _read_frequencies(packed, {"q1": 0})
    latin = tmp_path / "freq.txt"
    latin.write_bytes(b"q1 5\nq\xe9 2\n")
    with pytest.raises(InputError, match=r"freq.txt:2: not UTF-8 text \(byte 0xe9\)"):
        _read_frequencies(latin, {"q1": 0})
    latin.write_bytes(b"q1 5\r\nq2 3\nq9 1\n")  # CRLF lines and a query not judged, as before
    freq, ignored = _read_frequencies(latin, {"q1": 0, "q2": 1})
    assert freq.tolist() == [5 / 8, 3 / 8] and ignored == 1
