"""A counterfactual design's simulated log in the format ``onlineeval estimate`` reads (``designs[i].export_log``).

With ``export_log: N`` a counterfactual design's logs of replicates ``0 .. min(N, replicates) - 1`` are written as
``<output>/logs/<design>/replicate_<r>.jsonl.gz`` (gzipped JSON lines, one impression each: ``query``, ``user``,
``user_type``, ``shown``, ``clicks`` as a 0/1 list, and the ``logger``: the design's policy spec with the scores of
the query's candidates, :func:`logger_texts`; with ``export_form: propensities``, or a policy whose propensities may
be Monte Carlo estimates, the ``propensities`` ``{list, prefix, item}`` instead; README, "onlineeval estimate"), and
the design's targets as TREC runs ``<output>/logs/<design>/<ranker>.run`` (the world's rankings, the ones the
design's estimators evaluate): ``onlineeval estimate --log replicate_0.jsonl.gz --target B.run
--baseline A.run`` then computes from the same impressions the point estimates the design computed, and the run's
``summary.json`` holds the exact truth. Ids: queries are the world's query ids (``q0``, ... in a synthetic world),
documents ``d<j>`` with ``j`` the candidate's index within its query, users ``u<i>`` (``i`` zero-padded to the log's
widest, so that the ids sort as the simulator's users: the cross-fitting folds match), user types the index of
``users.types``. A run lists each query's documents in rank order with distinct descending scores, so every tie
rule of ``estimate`` reads the same lists, and ``estimate`` cuts each to the length of the log's lists.

Where and when (:func:`export_logs`, called by :func:`simulations.job.finish` before it writes the results): the
process that writes the results folder (``onlineeval simulate``'s own process; a sweep's point writer) runs each
exported replicate once more, with only the exported designs (every design has its own random stream and sees the
same traffic, so they are the replicate's numbers: replicate ``r``'s seed is the ``r``-th spawned one whatever the
number of replicates), whatever the number of workers or the executor (a Dask worker never writes into the folder).
Cost: one replicate's time per exported replicate; nothing (one ``stat``) without the option.

Files are written atomically (a ``.tmp`` file renamed), so an interrupted run leaves whole files or none. The folder
``<output>/logs`` belongs to one config: ``logs/.fingerprint`` holds the fingerprint of the run that wrote it
(``export_log`` is part of the effective config, so of the fingerprint). A run finding another fingerprint's logs
(or none recorded) deletes them before it writes its own; a resumed run of the same fingerprint keeps the files it
finds and writes only the missing ones; :func:`simulations.resume_guard.remove_results` deletes them with a
finished run's other outputs (:func:`remove_logs`). A summary.json of a fingerprint is written after its logs, so
a finished run of an exporting config has all of them.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from simulations.config import Config, DesignConfig
    from simulations.users import UserModels
    from simulations.world import World

__all__ = ["LOGS", "MARKER", "export_hint", "export_logs", "exported", "log_path", "remove_logs", "replay_logs",
           "run_path"]

#: the folder of the exported logs inside a results folder
LOGS = "logs"
#: the file in :data:`LOGS` holding the fingerprint of the run whose logs it holds, with :data:`FORMAT`
MARKER = ".fingerprint"
#: the version of the files' form, recorded after the fingerprint in :data:`MARKER`: logs of the same config
#: written in another form (before 2: the propensities only, whatever ``export_form``; before 3: user ids unpadded,
#: which sort otherwise than the simulator's users) are written again, not mixed
FORMAT = "export-format 3"
_REPLICATE = re.compile(r"^replicate_(\d+)\.jsonl\.gz$")


def exported(config: Config) -> list[tuple[DesignConfig, int]]:
    """``(design, number of replicates whose log it exports)`` of every design with ``export_log``."""
    return [(d, min(d.export_log, config.replicates)) for d in config.designs
            if d.type == "counterfactual" and d.export_log > 0]


def export_hint(config: Config, output: Path) -> list[str]:
    """One line per exporting design for ``onlineeval simulate``'s stderr: where its logs are, and the ``onlineeval
    estimate`` command that reads the first (its estimators without options, its metric)."""
    out = []
    for design, n in exported(config):
        folder = output / LOGS / design.name
        names = ",".join(dict.fromkeys(e.name for e in design.estimators if not e.options)) or "ips"
        base, cand = design.targets
        span = "replicate 0" if n == 1 else f"replicates 0-{n - 1}"
        out.append(f"simulated log of design {design.name}, {span}: {folder}/replicate_<r>.jsonl.gz (the exact truth: "
                   f"summary.json); e.g. onlineeval estimate --log {log_path(output, design.name, 0)} --target "
                   f"{run_path(output, design.name, cand)} --baseline {run_path(output, design.name, base)} "
                   f"--estimator {names} --metric {design.metric}")
    return out


def log_path(output: Path, design: str, replicate: int) -> Path:
    return output / LOGS / design / f"replicate_{replicate}.jsonl.gz"


def run_path(output: Path, design: str, ranker: str) -> Path:
    return output / LOGS / design / f"{ranker}.run"


def remove_logs(folder: Path) -> None:
    """Delete the exported logs of ``folder`` (the files this module writes in ``folder/logs``: logs, runs,
    temporary files and, last, :data:`MARKER`; the folders when they are then empty). Nothing when there are none,
    or when ``folder/logs`` has no :data:`MARKER` (written before any log: the folder is someone else's)."""
    root = folder / LOGS
    if not (root / MARKER).is_file():
        return
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        for path in sorted([*sub.glob("replicate_*.jsonl.gz"), *sub.glob("*.run"), *sub.glob("*.tmp")]):
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty: something of the user's
            sub.rmdir()
    for name in (MARKER + ".tmp", MARKER):
        (root / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        root.rmdir()


def _recorded(marker: Path) -> str | None:
    try:
        return marker.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def export_logs(config: Config, world: World, users: UserModels, output: Path, fingerprint: str) -> list[Path]:
    """Write the logs and runs ``config``'s designs export into ``output`` (module docstring); return the files
    written now (those already there for this fingerprint are kept, not written again)."""
    wanted = exported(config)
    root = output / LOGS
    if not wanted:
        if root.is_dir():  # another config's logs (a config that exports none has another fingerprint)
            remove_logs(output)
        return []
    mark = f"{fingerprint} {FORMAT}"
    if _recorded(root / MARKER) != mark:
        remove_logs(output)
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if _recorded(root / MARKER) != mark:
        _write_atomic(root / MARKER, [(mark + "\n").encode()])  # first: every file below is this run's
    todo: dict[int, list[str]] = {}
    for design, n in wanted:
        (root / design.name).mkdir(exist_ok=True)
        for ranker in design.targets:
            path = run_path(output, design.name, ranker)
            if not path.is_file():
                _write_atomic(path, _run_lines(world, ranker))
                written.append(path)
        for path in sorted((root / design.name).glob("replicate_*.jsonl.gz")):
            match = _REPLICATE.match(path.name)
            if match and int(match.group(1)) >= n:  # kept by a run of this config with more replicates
                path.unlink()
        for r in range(n):
            if not log_path(output, design.name, r).is_file():
                todo.setdefault(r, []).append(design.name)
    if not todo:
        return written
    from simulations.runner import replicate_seeds

    seqs = replicate_seeds(config.seed, config.replicates)
    for r in sorted(todo):
        for name, data in replay_logs(config, world, users, seqs[r], set(todo[r])).items():
            path = log_path(output, name, r)
            design = next(d for d, _ in wanted if d.name == name)
            _write_atomic(path, _log_lines(world, data, logger_texts(design, world)), compress=True)
            written.append(path)
    return written


def replay_logs(config: Config, world: World, users: UserModels, seq: Any, names: set[str]) -> dict[str, Any]:
    """The whole logs (:meth:`CounterfactualDesign.log`, a :class:`onlineeval.estimators.LoggedData`) of the
    counterfactual designs ``names`` in the replicate of seed sequence ``seq``: the replicate run again
    (:func:`simulations.runner.run_replicate`'s steps, checkpoints included) with only those designs (not their
    A/A variants)."""
    from simulations.runner import build_replicate, no_cyclic_gc
    from simulations.sequential import batch_looks
    from simulations.traffic import run_traffic

    with no_cyclic_gc():
        traffic, designs = build_replicate(config, world, users, seq,
                                           only=lambda s: s.config.name in names and not s.aa and not s.null)

        def on_day_end(day: int) -> None:
            for design in designs:
                design.checkpoint(day)

        run_traffic(traffic, [*designs, *batch_looks(designs)], on_day_end)
        return {design.name: design.log() for design in designs}


def _run_lines(world: World, ranker: str) -> Iterator[bytes]:
    """The TREC run of ``ranker``'s rankings: every query in the world's order, its documents in rank order with
    scores ``depth - rank + 1`` (distinct, so no tie rule reorders them); empty slots left out."""
    rankings = world.rankings[ranker]
    depth = rankings.shape[1]
    for q, qid in enumerate(world.query_ids):
        yield "".join(f"{qid} Q0 d{doc} {r + 1} {depth - r} {ranker}\n"
                      for r, doc in enumerate(rankings[q].tolist()) if doc >= 0).encode()


def logger_texts(design: DesignConfig, world: World) -> list[str] | None:
    """With ``export_form: logger`` (the default), per query of the world, the JSON text of the design's logging
    policy as a log line's ``logger`` (README, "onlineeval estimate"): the policy's spec with ``scores`` objects of
    the query's candidates (``d<j>``: the logger's ranker's; a mixture's component around another ranker, its own)
    in place of ranker names, so that ``estimate`` computes the propensities from the policy itself, checks each
    target's support against it and can run the pseudoinverse. ``None`` (the propensities are written instead)
    with ``export_form: propensities`` and for a policy whose propensities may be Monte Carlo estimates (a
    Plackett-Luce logger with ``item_method: monte_carlo``): the reader's estimate would draw other samples than
    the design's."""
    from simulations.designs.counterfactual.serving import shared_policy

    if design.export_form != "logger" or shared_policy(design.logger, world).may_be_monte_carlo:
        return None
    logger = design.logger
    spec = logger.spec()
    scores = {name: np.asarray(m, dtype=np.float64) for name, m in world.scores.items()}

    def spec_of(q: int) -> dict[str, Any]:
        def named(name: str) -> dict[str, float]:
            row = scores[name][q]
            return {f"d{j}": float(row[j]) for j in np.flatnonzero(np.isfinite(row)).tolist()}

        def walk(part: dict[str, Any], top: bool) -> dict[str, Any]:
            # keys sorted (one text for one config however its mapping was ordered), the scores last, in column order
            out = {k: part[k] for k in sorted(part) if k != "scores"}
            name = part.get("scores", logger.ranker if top else None)
            if isinstance(out.get("components"), list):
                out["components"] = [walk(c, False) if isinstance(c, dict) else c for c in out["components"]]
            if top:
                out["scores"] = named(str(name))
            elif name is not None and name != logger.ranker:
                out["scores"] = named(str(name))
            return out

        return walk(spec, True)

    return [json.dumps(spec_of(q), separators=(",", ":")) for q in range(len(world.query_ids))]


def _log_lines(world: World, data: Any, loggers: list[str] | None = None, chunk: int = 4096) -> Iterator[bytes]:
    """The log ``data`` as JSON lines (module docstring), ``chunk`` impressions at a time: each line's ``logger``
    (the text of its query in ``loggers``, :func:`logger_texts`), or without ``loggers`` its ``propensities``,
    written as Python's shortest round-tripping decimals, so the reader gets the design's very floats."""
    qids = world.query_ids
    # users "u<i>" zero-padded to one width: their ids sort as the simulator's user numbers do, so the folds that
    # estimate's readers make from the sorted ids (cross-fitted dm / dr / cascade_dr, adaptive_ips folds) are the
    # design's
    width = len(str(int(data.user.max()))) if data.n else 1
    for lo in range(0, data.n, chunk):
        hi = min(lo + chunk, data.n)
        cols = [x[lo:hi].tolist() for x in (data.query, data.user, data.user_type, data.shown, data.clicks,
                                             data.p_list, data.p_prefix, data.p_item)]
        out = []
        for q, user, utype, shown, clicks, p_list, p_prefix, p_item in zip(*cols, strict=True):
            keep = [j for j, doc in enumerate(shown) if doc >= 0]  # (an empty slot of a short candidate list)
            obj = {"query": qids[q], "user": f"u{user:0{width}d}", "user_type": int(utype),
                   "shown": [f"d{shown[j]}" for j in keep], "clicks": [int(clicks[j]) for j in keep]}
            if loggers is None:
                obj["propensities"] = {"list": p_list, "prefix": [p_prefix[j] for j in keep],
                                       "item": [p_item[j] for j in keep]}
                out.append(json.dumps(obj, separators=(",", ":")))
            else:
                out.append(json.dumps(obj, separators=(",", ":"))[:-1] + ',"logger":' + loggers[q] + "}")
        yield ("\n".join(out) + "\n").encode()


def _write_atomic(path: Path, parts: Any, compress: bool = False) -> None:
    """Write the byte strings ``parts`` to ``path`` through ``<path>.tmp`` and a rename (``compress``: gzipped,
    no time stamp or name in the header, so the same log gives the same bytes); the temporary file is removed
    when the write fails or is interrupted."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as raw:
            if compress:
                with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as fh:
                    for part in parts:
                        fh.write(part)
            else:
                for part in parts:
                    raw.write(part)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
