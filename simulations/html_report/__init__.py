"""Self-contained HTML reports of a simulate results folder and of a sweep folder.

``report.html`` is one file: the plots are embedded as base64 PNG ``data:`` URIs, the
stylesheet is inline, and there is no script, font, link or other external resource, so
it opens from disk in any browser with no server. It is a view of what the run already
wrote (``summary.json``, the CSV tables, ``config.effective.yaml``, the PNG plots) and
computes no numbers of its own; every table says under which conventions its numbers
were computed, and designs or estimates found biased keep their "biased" mark.

Simulate (:func:`write_simulate_report`, called by :func:`simulations.report.write_results`),
answer first: days, users and impressions per design at the target power with the
shrinkage of the offline gain; power versus days; the offline-to-online comparison by
query segment; A/A calibration, the null (bias) check, daily monitoring and the designs'
own sequential or multiple-comparison decisions; counterfactual estimators when present;
any other key of ``summary.json`` as it is (nothing is dropped); the conventions and the
effective config.

Sweep (:func:`write_sweep_report`, called when a sweep writes its outputs): the shrinkage
study first (the sweep summary's ``shrinkage`` key when present, structure in
:mod:`simulations.shrinkage`: per group and primary design the relation in a sentence,
the slope and its interval, sign disagreement, Kendall's tau and the offline MDE), then
days, users and impressions per point and design (each point linking its own report),
the effect plot and power by day, every relation, the MDE table and the study's plots,
A/A calibration and the null check per point, the conventions and the points' configs.

All text is escaped with :func:`html.escape`.
"""

from __future__ import annotations

from pathlib import Path

from simulations.html_report.page import page
from simulations.html_report.simulate import header, load_summary, simulate_sections, sweep_points

__all__ = ["REPORT_NAME", "simulate_report", "sweep_report", "write_simulate_report", "write_sweep_report"]

REPORT_NAME = "report.html"


def simulate_report(folder: str | Path) -> str:
    """The HTML report of a simulate results folder (``summary.json`` and the files next to it)."""
    folder = Path(folder)
    summary = load_summary(folder)
    title = f"onlineeval {summary.get('onlineeval_version', '')} simulate report".replace("  ", " ")
    return page(title, header(folder, summary, title), simulate_sections(folder, summary))


def sweep_report(folder: str | Path) -> str:
    """The HTML report of a sweep folder (its ``summary.json``, plots and points' folders)."""
    from simulations.html_report.sweep import sweep_header, sweep_sections

    folder = Path(folder)
    summary = load_summary(folder)
    title = "onlineeval sweep report"
    return page(title, sweep_header(folder, summary, title), sweep_sections(folder, summary))


def write_simulate_report(folder: str | Path) -> Path:
    """Write ``<folder>/report.html`` for a simulate results folder; returns its path."""
    path = Path(folder) / REPORT_NAME
    path.write_text(simulate_report(folder), encoding="utf-8")
    return path


def write_sweep_report(folder: str | Path) -> Path:
    """Write ``<folder>/report.html`` for a sweep folder, and again each point's own report.html (written
    when the point finished, before the sweep's summary named its axis values: now it says which point it is
    and links back here); returns the sweep page's path."""
    path = Path(folder) / REPORT_NAME
    path.write_text(sweep_report(folder), encoding="utf-8")
    for point in sweep_points(Path(folder)):
        sub = Path(folder) / str(point.get("folder"))
        if (sub / "summary.json").is_file():
            write_simulate_report(sub)
    return path
