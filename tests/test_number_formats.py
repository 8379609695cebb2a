"""One rule per kind of number in simulate's terminal summary and report.html (simulations.report):

metric values, effects, deltas, biases and ratios to 3 significant figures with their trailing zeros (an effect
'+0.0220' next to an offline delta '+0.0228', where '.3g' printed '+0.022' next to '.4f''s '+0.0228'), their SEs
to 2, counts as whole numbers, rates over replicates to 3 decimals, relative changes as percentages to 0.1%,
analytic and planned days to 1 decimal.

The run is a real one through the CLI (``onlineeval simulate --config``): every cell is read back from its stdout
and its report.html and compared with summary.json's value, rounded here by an independent route (scientific
notation for significant figures, ``round`` for decimals), and its number of significant figures is counted.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_html_report import caution_mark, parse

from simulations.report import (
    SHRINK_HEADER,
    analytic_days_text,
    count_text,
    days_text,
    percent_text,
    rate_text,
    se_text,
    significant,
    value_text,
)

CONFIG: dict[str, Any] = {
    "seed": 5,
    "replicates": 8,
    "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 200, "candidates": 25},
    "rankers": {"depth": 10, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.7}},
    "users": {"population": 800, "activity": {"sigma": 1.0}, "types": [
        {"name": "navigational", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
        {"name": "informational", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]},
    "traffic": {"days": 3, "queries_per_day": 800, "batch_hours": 24},
    "designs": [
        {"name": "ab", "type": "ab", "metric": "reciprocal_rank", "analysis": {"cuped": {"pre_days": 2}}},
        {"name": "team_draft", "type": "interleaving", "method": "team_draft",
         "analysis": {"sequential": "obrien_fleming"}},
        {"name": "balanced", "type": "interleaving", "method": "balanced"},
    ],
    "analysis": {"truth_impressions": 200_000},
}


def sig_figs(token: str) -> int:
    """Significant figures written in a number token ('+0.0220' -> 3, '1.50e-05' -> 3, '250' -> 3)."""
    mantissa = token.lstrip("+-").split("e")[0]
    return len(mantissa.replace(".", "").lstrip("0"))


def round_sig(x: float, digits: int) -> float:
    """``x`` rounded to ``digits`` significant figures by way of scientific notation."""
    return float(f"{x:.{digits - 1}e}")


def assert_value(token: str, x: float, digits: int = 3) -> None:
    assert sig_figs(token) == digits, (token, x)
    assert float(token) == pytest.approx(round_sig(x, digits), rel=1e-12, abs=1e-300), (token, x)


def assert_rate(token: str, x: float) -> None:
    assert re.fullmatch(r"[+-]?\d\.\d{3}", token), token
    assert float(token) == pytest.approx(round(x, 3), abs=1e-12), (token, x)


def assert_percent(token: str, fraction: float) -> None:
    assert re.fullmatch(r"[+-]\d+\.\d%", token), token
    assert float(token[:-1]) == pytest.approx(round(100 * fraction, 1), abs=1e-9), (token, fraction)


# ------------------------------------------------------------------ the rules on their own
def test_each_kind_of_number() -> None:
    assert value_text(0.022, signed=True) == "+0.0220" and value_text(0.0228, signed=True) == "+0.0228"
    assert value_text(-0.00235, signed=True) == "-0.00235" and value_text(1.5e-5) == "1.50e-05"
    assert value_text(250.0) == "250" and value_text(0.9999) == "1.00" and value_text(7.071) == "7.07"
    assert value_text(0.0) == "0.00" and value_text(None) == "-" and value_text(math.nan) == "-"
    assert value_text(math.inf) == "-" and value_text(True) == "-"
    assert se_text(0.000891) == "0.00089" and se_text(0.1) == "0.10" and significant(123.4, 1) == "1e+02"
    assert rate_text(0.75) == "0.750" and rate_text(0.0, signed=True) == "+0.000" and rate_text(None) == "-"
    assert percent_text(0.047) == "+4.7%" and percent_text(-0.2778) == "-27.8%" and percent_text(None) == "-"
    # a change below 0.05% is not written +0.0% (one significant digit); exactly 0 is
    assert percent_text(0.00004) == "+0.004%" and percent_text(-3.1e-5) == "-0.003%" and percent_text(0.0) == "+0.0%"
    assert count_text(2274.6) == "2,275" and count_text(math.inf) == "not reachable" and count_text(None) == (
        "not reachable")
    assert days_text(2.84) == "2.8" and days_text(None) == "-" and days_text(math.inf) == "-"


def test_analytic_days_cell() -> None:
    """The '> 1 year' / 'never' rule of simulate's days->pwr cell (and the sweep's analytic days)."""
    assert analytic_days_text(52.39) == "52.4" and analytic_days_text(52.39, True) == "52.4?"
    assert analytic_days_text(365.0) == "365.0" and analytic_days_text(365.04) == "> 1 year"
    assert analytic_days_text(139_382.0, True) == "> 1 year?"
    for none in (None, math.inf, math.nan):
        assert analytic_days_text(none) == "never" and analytic_days_text(none, True) == "never?"
    assert analytic_days_text(2.84, number=lambda d: f"~{days_text(d)}*") == "~2.8*"


# ------------------------------------------------------------------ a real run through the CLI
@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any], Path]:
    root = tmp_path_factory.mktemp("formats")
    (root / "c.yaml").write_text(yaml.safe_dump(CONFIG))
    proc = subprocess.run([sys.executable, "-m", "onlineeval.cli", "simulate", "--config", str(root / "c.yaml"),
                           "--output", str(root / "out"), "--quiet"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads((root / "out" / "summary.json").read_text()), root / "out"


MAIN_COLUMNS = ("design", "metric", "true effect", "rel", SHRINK_HEADER, "power@end", "analytic", "days->pwr",
                "impr. needed", "users needed", "A/A FPR", "null Delta")


def _main_table(text: str) -> list[dict[str, str]]:
    """The main table's rows as {column: cell}, cut at the header's right-aligned column ends."""
    lines = text.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("design") and SHRINK_HEADER in ln)
    header = lines[k]
    ends, pos = [], 0
    for label in MAIN_COLUMNS[2:]:
        pos = header.index(f" {label}", pos) + 1 + len(label)
        ends.append(pos)
    rows = []
    for ln in lines[k + 1:]:
        if not ln.startswith("  ") or ln.startswith(("  '", "  true effect over worlds:")) or not ln.strip():
            break  # the notes under the table
        design, metric = ln[:17].strip(), ln[17:36].strip()
        cells = {"design": design, "metric": metric}
        start = 36
        for label, end in zip(MAIN_COLUMNS[2:], ends, strict=True):
            cells[label] = ln[start:end].strip()
            start = end
        rows.append(cells)
    return rows


def test_terminal_writes_each_kind_by_its_rule(run: tuple[str, dict[str, Any], Path]) -> None:
    text, s, _ = run
    off = s["offline"]
    m = re.search(r"Offline \S+: A (\S+)  B (\S+)  delta (\S+) \((\S+)\) frequency-weighted; uniform over queries: "
                  r"delta (\S+)\n", text)
    assert m, text
    assert_value(m[1], off["A"]["weighted"])
    assert_value(m[2], off["B"]["weighted"])
    assert_value(m[3], off["delta"]["weighted"])
    assert_percent(m[4], off["relative_gain_weighted"])
    assert_value(m[5], off["delta"]["uniform"])
    for seg, v in off["by_segment"].items():  # the offline delta and the online one: the same rule
        m = re.search(rf"  {seg} +\(.*\): delta (\S+) \((\S+)\); online reciprocal_rank (\S+) \((\S+), exact\)", text)
        assert m, seg
        online = s["truth_by_segment"][seg]["reciprocal_rank"]
        assert_value(m[1], v["B"] - v["A"])
        assert_percent(m[2], (v["B"] - v["A"]) / v["A"])
        assert_value(m[3], online["delta"])
        assert_percent(m[4], online["delta"] / online["A"])

    rows = _main_table(text)
    entries = [(d, mt, e) for d, ms in s["designs"].items() for mt, e in ms.items()]
    assert len(rows) == len(entries)
    kinds = set()
    for row, (design, metric, e) in zip(rows, entries, strict=True):
        assert row["metric"] == metric and row["design"] in ("", design)
        assert_value(row["true effect"], e["true_effect"])
        if e.get("relative_effect") is not None:
            assert_percent(row["rel"], e["relative_effect"])
        if e.get("shrinkage_vs_offline") is not None:
            assert_value(row[SHRINK_HEADER], e["shrinkage_vs_offline"])
        assert_rate(row["power@end"], e["final_day"]["power"])
        if e["final_day"]["analytic_power"] is None:  # a biased design's (balanced: its exact null Delta): '-'
            assert row["analytic"] == "-" and e.get("analytic_withheld")
            kinds.add("withheld")
            continue
        assert_rate(row["analytic"], e["final_day"]["analytic_power"])
        mark = "?" if e["analytic_required_impressions_unstable"] else ""
        # '~' (review 12, F2; family-wise): after the days and the impressions
        caution = "~" if caution_mark(e) else ""
        if caution:
            kinds.add("caution")
        days = row["days->pwr"]
        if e["days_to_target_power"] is not None:
            assert days == str(e["days_to_target_power"]) + caution
            kinds.add("simulated")
        elif e["analytic_required_days"] is None:
            assert days == "never" + mark + caution
            kinds.add("never")
        else:
            assert re.fullmatch(r"~\d+\.\d\*\??" + caution, days), days
            assert float(days[1:].rstrip("*?~")) == pytest.approx(round(e["analytic_required_days"], 1), abs=1e-9)
            kinds.add("analytic")
        n = e["analytic_required_impressions"]
        if n is None:
            assert row["impr. needed"] == "not reachable" + mark + caution
        else:
            assert re.fullmatch(r"\d{1,3}(,\d{3})*\??" + caution, row["impr. needed"]), row["impr. needed"]
            assert int(row["impr. needed"].rstrip("?~").replace(",", "")) == round(n)
        if e.get("null", {}).get("exact") and e["null"]["delta"] == 0:  # an exact 0: '0', no figures to count
            assert row["null Delta"] == "0"
        elif e.get("null"):
            assert_value(row["null Delta"], e["null"]["delta"])
        if e.get("aa") and not e["aa"]["degenerate"]:
            assert_rate(row["A/A FPR"].rstrip("!"), e["aa"]["false_positive_rate"])
    assert kinds - {"caution", "withheld"} == {"simulated", "never", "analytic"}  # every kind of days cell

    null_rows = [ln.split() for ln in text.split("  design         metric             null Delta")[1]
                 .split("\n  information")[0].splitlines()[1:]]
    for cells in null_rows:
        n = s["designs"][cells[0]][cells[1]]["null"]
        if n.get("exact"):  # the exact null Delta: its value (an exact 0 as '0'), 'exact' for its SE
            assert cells[3] == "exact" and (cells[2] == "0" if n["delta"] == 0 else cells[2] == f"{n['delta']:+#.3g}")
            continue
        assert_value(cells[2], n["delta"])
        assert_value(cells[3], n["se"], digits=2)
    ratios = s["required_impressions_ratio"]
    for d, r in ratios["ratios"].items():
        if r is None:  # a biased design's ratio is not printed: its evidence instead
            assert f"{d} biased (" in text and d in ratios["biased"]
        elif d != ratios["reference"]:
            m = re.search(rf"relative to ab: .*{d} (\S+)x \+-(\d+)%\??", text)
            assert_value(m[1], ratios["equal_traffic_efficiency"][d])
            # review 6, F1: each ratio's delta-method relative SE, as a whole percent
            assert int(m[2]) == round(100 * ratios["equal_traffic_efficiency_rel_se"][d])
            m = re.search(rf"power relative to ab: .*{d} (\S+)x \+-(\d+)%\??\*? \((\S+)x fewer\)", text)
            assert_value(m[1], r)
            assert int(m[2]) == round(100 * ratios["ratios_rel_se"][d])
            assert_value(m[3], 1 / r)

    # daily monitoring, the sequential decision and CUPED's days: rates to 3 decimals, days to 1
    for design, e in s["monitoring"].items():
        line = next(ln for ln in text.splitlines() if ln.startswith(f"  {design} ") and " pw " in ln)
        got = re.findall(r" pw (\S+) d +(\S+)", line)
        want = [(r["power"], r["mean_decision_day"]) for r in e["rules"].values()]
        assert len(got) == len(want) == 4
        for (power, day), (p, dd) in zip(got, want, strict=True):
            assert_rate(power, p)
            assert day == f"{round(dd, 1):.1f}"
    seq = s["sequential"]["team_draft"]["decision"]
    line = next(ln for ln in text.splitlines() if ln.startswith("  team_draft ") and "obrien_fleming" in ln)
    assert_rate(line.split()[5], seq["power"])
    # review 6, F4 (sequential.py): the fixed horizon's power on the last simulated day, after the equal-power plan
    assert re.search(rf"{round(s['sequential']['team_draft']['rules']['fixed']['power'], 3):.3f} on day \d+\.\d\b",
                     line), line
    m = re.search(r"planned for the target power: (\d+\.\d)\?? days expected \(max (\d+\.\d)", line)
    assert float(m[1]) == round(seq["planned"]["expected_days_effect"], 1)
    assert float(m[2]) == round(seq["planned"]["max_days"], 1)
    for metric, c in s["cuped"]["ab"]["metrics"].items():
        line = next(ln for ln in text.splitlines() if re.match(rf"  ab +{metric} +2d", ln))
        days = line.rsplit("  ", 1)[1]
        req = c["required"]
        if req.get("days") is not None:
            # review 6, F6 (cuped.py): '*' beyond the simulated days with the factor, '!' beyond the flag
            assert re.fullmatch(r"\d+\.\d\*?\??(?: \S+x!?)? \((?:\d+\.\d\*?\??(?: \S+x!?)?|-)\)", days), days
            assert float(re.match(r"\d+\.\d", days)[0]) == round(req["days"], 1)


def test_report_html_writes_the_terminals_cells(run: tuple[str, dict[str, Any], Path]) -> None:
    """report.html's answer table: the very cells of the terminal's main table (same rules, same numbers)."""
    text, s, out = run
    page = parse(out / "report.html")
    header, *rows = page.tables["answer-table"]
    col = {h: k for k, h in enumerate(header)}
    pairs = {"true effect": "true effect", "rel.": "rel", "shrinkage (freq-wtd)": SHRINK_HEADER,
             "power at end": "power@end", "analytic power": "analytic", "days to 80% power": "days->pwr",
             "impressions needed": "impr. needed", "users needed": "users needed", "null Delta": "null Delta"}
    terminal = _main_table(text)
    assert len(rows) == len(terminal)
    for row, t in zip(rows, terminal, strict=True):
        assert row[col["metric"]] == t["metric"]
        for html_col, term_col in pairs.items():
            cell = row[col[html_col]].removesuffix(" biased")
            if html_col == "true effect":  # review 4, F1: the exact truth's SE over worlds under it
                cell = cell.split("+- ")[0].split("MC 4 SE")[0]  # and F3: an imprecise Monte Carlo truth's mark
            assert cell == t[term_col], (html_col, row, t)
    lead = page.text("answer")
    off = s["offline"]
    assert (f"A {value_text(off['A']['weighted'])}, B {value_text(off['B']['weighted'])}, "
            f"delta {value_text(off['delta']['weighted'], True)} ({percent_text(off['relative_gain_weighted'])})"
            in lead)
    # the segment table's offline delta and online delta: the same significant figures
    untitled = page.tables[""]
    seg_header = next(r for r in untitled if r and r[0] == "segment")
    seg_rows = [r for r in untitled if r and r[0] in off["by_segment"]]
    assert len(seg_rows) == len(off["by_segment"])
    for r in seg_rows:
        v = off["by_segment"][r[0]]
        assert_value(r[seg_header.index("delta")], v["B"] - v["A"])
        assert_percent(r[seg_header.index("rel.")], (v["B"] - v["A"]) / v["A"])
        for metric, online in s["truth_by_segment"][r[0]].items():
            assert_value(r[seg_header.index(f"online {metric} B - A (exact)")], online["delta"])
