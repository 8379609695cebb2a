"""The main job: config -> world -> replicates -> analysis -> results directory.

Finished replicates are appended to ``<output>/replicates.partial.jsonl`` as they
complete, one self-checking record per line (the record carries the SHA-256 of its own
content, so a line cut short by a kill or a full disk is recognised and dropped, and the
file is repaired before anything is appended). If a run is interrupted, running the same
config again resumes from there. The file's header holds the fingerprint of everything
that determines a replicate's numbers: the effective config (without ``output``,
``workers`` and ``replicates``: replicate ``r`` uses the ``r``-th spawned seed whatever
the number of replicates, so a changed ``--replicates`` keeps the finished ones it needs)
and the contents of every input file the config names (qrels, runs, query frequencies,
fitted click models), and the code's :data:`STREAM_VERSION` (the version of the numbers a
seed gives: a partial file written by an onlineeval whose draws differ is not mixed with
this one's replicates). A different fingerprint discards the partial file, and says why
(another config or input files, or only another stream version of the code). Once the
results are written the partial file's records are kept, sorted and gzipped, in
``<output>/replicates.finished.jsonl.gz`` (:data:`FINISHED`; about 0.4 times the size of
``replicates.csv``): running the folder again with more replicates (or fewer, or the same)
and the same fingerprint reuses its records, as replicates ``0 .. R-1`` of any number of
replicates are the same numbers, and computes only the replicates it lacks; the results
equal a fresh run's byte for byte. A folder holding the finished results of another config
(summary.json or the finished file of another fingerprint: another ``--seed``, a ``--set``
typo, an edited input file) is refused with nothing touched, the message naming both
fingerprints and the keys that differ (review 15, F2), unless ``fresh``: the old outputs
(:data:`RESULT_FILES`, figures, finished file) are then deleted before the new run's first
record, so that the folder never holds one config's report beside another's records. The
same config computed by an onlineeval of another stream version is recomputed (its outputs
deleted the same way) without ``fresh``. Those rules live in :mod:`simulations.resume_guard` (and the folder lock
below in :mod:`simulations.folder_lock`); this module re-exports their public names.

One run at a time per results folder: the folder is locked (``.onlineeval.lock``, an
``fcntl`` lock held for the run's lifetime, released by the OS if the process dies; the
worker processes it forks let go of it, and end when it dies: review 15, F1); a
second run into it stops with an error naming the folder and the running process (or, when
that process is dead, the processes still holding the lock).
SIGINT and SIGTERM stop the run promptly: pending replicates are cancelled, worker
processes are ended, finished replicates stay in the partial file, and the exit code is
130 or 143.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pandas as pd

from onlineeval.errors import ConfigError, OutputError

from simulations.analysis import analyse
from simulations.config import Config
from simulations.export_log import export_logs  # (imports nothing of simulations: the writers have it at hand)
from simulations.folder_lock import LOCK, _drop_locks_in_child, folder_lock, lock_holders  # noqa: F401 (re-exported)
from simulations.resume_guard import (  # noqa: F401 (re-exported: OtherResults, INPUTS_ONLY, RESULT_FILES)
    INPUTS_ONLY,
    RESULT_FILES,
    OtherResults,
    _remove,
    analysis_version,
    other_results,
    refuse_other_results,
    remove_results,
    write_error,
)
from simulations.runner import (
    Truth,
    compute_truth,
    resolve_workers,
    run_replicates,
    truth_by_segment,
    world_seed,
)
from simulations.users import UserModels

# re-exported: they live below both this module and simulations.report (no import circle)
from simulations.stream import FINISHED, STREAM_VERSION
from simulations.world import World, build_world

__all__ = [
    "FINISHED",
    "PARTIAL",
    "analysis_version",
    "PARTIAL_FORMAT",
    "Interrupted",
    "STREAM_VERSION",
    "SimulationResult",
    "config_fingerprint",
    "finish",
    "folder_lock",
    "input_files",
    "count_partial",
    "load_partial",
    "parse_partial_record",
    "partial_header",
    "partial_record",
    "prepare",
    "prepare_world",
    "keep_finished",
    "other_results",
    "refuse_other_results",
    "remove_results",
    "reopen_records",
    "replicate_ranges",
    "resume_message",
    "signals_interrupt",
    "simulate",
    "write_error",
]

PARTIAL = "replicates.partial.jsonl"
#: version of the partial-file record format (records without a checksum are not trusted)
PARTIAL_FORMAT = 2
# STREAM_VERSION (bump it whenever a change makes a seed give other numbers) and FINISHED are defined in
# simulations/stream.py, with the version's history, and imported above.


@dataclass(frozen=True)
class SimulationResult:
    config: Config
    world: World
    truths: list[Truth]
    rows: pd.DataFrame  # one row per replicate x design x day x metric
    curves: pd.DataFrame  # per design x day summary over replicates
    summary: dict[str, Any]
    output: Path | None


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; ``exit_code`` is 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        # args stay (signum,): SimPy re-raises an exception as type(exc)(*exc.args)
        super().__init__(int(signum))
        self.signum = int(signum)
        self.exit_code = 128 + self.signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


def input_files(config: Config) -> list[tuple[str, Path]]:
    """``(key path, file)`` of every input file the config names: the collection's qrels,
    runs and frequency file, and fitted click-model parameters."""
    out: list[tuple[str, Path]] = []
    coll = config.effective().get("collection", {})
    for key in ("qrels", "frequencies"):
        if coll.get(key):
            out.append((f"collection.{key}", Path(coll[key])))
    for name, path in sorted((coll.get("runs") or {}).items()):
        out.append((f"collection.runs.{name}", Path(path)))
    users = config.effective().get("users", {})
    specs = [("users.click_model", users.get("click_model"))]
    specs += [(f"users.types[{i}].click_model", t.get("click_model")) for i, t in enumerate(users.get("types") or [])]
    for key, spec in specs:
        if isinstance(spec, dict):
            for fk in ("fitted", "params_file"):
                if spec.get(fk):
                    out.append((f"{key}.{fk}", Path(spec[fk])))
    return out


def _file_digest(path: Path) -> str:
    from onlineeval.errors import InputError
    from onlineeval.io.digest import file_sha256

    try:
        return file_sha256(path)
    except InputError as exc:  # (an output error here, as it always was: the run cannot fingerprint its inputs)
        raise OutputError(exc.message, str(path)) from None


def config_fingerprint(config: Config) -> str:
    """Hash of everything that determines a replicate's numbers: the effective config
    (not the output folder, the workers or the number of replicates), the contents of
    every input file it names (:func:`input_files`) and the code's :data:`STREAM_VERSION`."""
    return _fingerprint(config, STREAM_VERSION)


def _fingerprint(config: Config, stream_version: int | None) -> str:
    """:func:`config_fingerprint` under ``stream_version``; ``None``: as computed before the version was part of
    it (no ``stream_version`` key in the hashed data: the fingerprint of a partial file of those versions)."""
    data = config.effective()
    for key in ("output", "workers", "replicates"):
        data.pop(key, None)
    data["input_file_sha256"] = {key: _file_digest(path) for key, path in input_files(config)}
    if stream_version is not None:
        data["stream_version"] = stream_version
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def partial_header(fingerprint: str) -> str:
    """The first line of a partial file: the fingerprint, the record format and the :data:`STREAM_VERSION`."""
    return json.dumps({"fingerprint": fingerprint, "format": PARTIAL_FORMAT, "stream_version": STREAM_VERSION}) + "\n"


def _discard_reason(header: Any, config: Config | None) -> str:
    """Why a partial file whose ``header`` does not match this run is discarded (what follows "computed ...").
    With the run's ``config``, a header whose fingerprint is this config's under the header's own stream version
    (``None`` when it has none: the versions before it was recorded) is named as a change of the code's numbers."""
    old = header.get("fingerprint") if isinstance(header, dict) else None
    if isinstance(header, dict) and header.get("format") != PARTIAL_FORMAT and old is not None:
        return "by an older onlineeval"
    why = f"for a different config or different input files (fingerprint {old})"
    if not isinstance(header, dict) or header.get("format") != PARTIAL_FORMAT:
        return why
    version = header.get("stream_version")
    known = version is None or (isinstance(version, int) and not isinstance(version, bool))  # (not true, "1")
    if known and version == STREAM_VERSION:
        return why
    if config is not None and known and _fingerprint(config, version) == old:
        if version is None:
            return ("for the same config by an earlier onlineeval, from before the stream version was recorded: "
                    f"the numbers a seed gives may differ from this onlineeval's (stream version {STREAM_VERSION}), "
                    "so they are recomputed rather than mixed")
        return (f"for the same config by an onlineeval whose numbers for a seed differ from this one's (stream "
                f"version {version}, this one {STREAM_VERSION}), so they are recomputed rather than mixed")
    shown = "not recorded" if version is None else repr(version)
    return f"{why} by an onlineeval of another stream version ({shown}, this one {STREAM_VERSION})"


def partial_record(index: int, rows: list[dict[str, Any]]) -> str:
    """One line of the partial file: replicate ``index``'s rows with the SHA-256 of their JSON."""
    body = json.dumps({"replicate": index, "rows": rows})  # key order kept: it is the CSV column order
    digest = hashlib.sha256(body.encode()).hexdigest()
    return json.dumps({"sha256": digest, "record": body}) + "\n"


def parse_partial_record(line: str) -> tuple[int, list[dict[str, Any]]] | None:
    """A record's (replicate, rows), or ``None`` for a torn or altered line."""
    if not line.endswith("\n"):
        return None
    try:
        outer = json.loads(line)
        body = outer["record"]
        if hashlib.sha256(body.encode()).hexdigest() != outer["sha256"]:
            return None
        item = json.loads(body)
        return int(item["replicate"]), list(item["rows"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def count_partial(path: Path) -> int | None:
    """How many replicates the partial file at ``path`` holds whole, or ``None`` where it cannot be read: its
    newline-ended lines after the header. The run reading the file at its start (:func:`load_partial`) left only
    whole records, one per replicate, and appends each as one line, flushed, so only a last line without its
    newline can be torn (an interrupted write), and it is not counted. Counted in blocks of bytes (about a second
    per GB; parsing every record and checking its checksum took 9 ms per MB, 12 s for a run of 10,000 replicates
    with per-batch looks). An interrupted run's message counts them here rather than taking the progress count,
    which is reported after each record is written and flushed (a signal between the two left the message one short
    of the file)."""
    newlines = 0
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 22):
                newlines += block.count(b"\n")
    except OSError:
        return None
    return max(newlines - 1, 0)


def load_partial(
    path: Path, fingerprint: str, say: Callable[[str], None] = lambda _msg: None, config: Config | None = None,
    finished_run: Path | None = None,
) -> dict[int, list[dict[str, Any]]]:
    """Finished replicates of an earlier run with the same fingerprint; rewrites the file
    without torn or invalid records so that appending continues after the last good one.
    A file of another fingerprint is discarded with a warning saying why; with the run's
    ``config`` it tells a change of the code's numbers (:data:`STREAM_VERSION`) from a
    change of the config or input files. ``finished_run``: ``path`` holds the records of this
    finished run's file (:data:`FINISHED`, unpacked), which the warning names, saying they are not reused."""
    if not path.is_file():
        return {}
    done: dict[int, list[dict[str, Any]]] = {}
    dropped = 0
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        lines = fh.readlines()
    try:
        header = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        header = {}
    same = isinstance(header, dict) and header.get("format") == PARTIAL_FORMAT
    if not same or header.get("fingerprint") != fingerprint:
        n = max(len(lines) - 1, 0)
        what = (f"not reusing the {n} replicate record(s) of the finished run in {finished_run}" if finished_run
                else f"discarding {n} finished replicate record(s) in {path}")
        say(f"warning: {what}: they were computed " + _discard_reason(header, config))
        return {}
    for line in lines[1:]:
        parsed = parse_partial_record(line)
        if parsed is None:
            dropped += 1
            continue
        done[parsed[0]] = parsed[1]
    if dropped:
        say(f"warning: {path}: dropped {dropped} torn or damaged record(s) (an interrupted write); they are recomputed")
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(lines[0] if lines[0].endswith("\n") else lines[0] + "\n")
            for index in sorted(done):
                out.write(partial_record(index, done[index]))
        os.replace(tmp, path)
    return done


def reopen_records(
    folder: Path, fingerprint: str, say: Callable[[str], None] = lambda _msg: None, config: Config | None = None,
    fresh: bool = False,
) -> tuple[dict[int, list[dict[str, Any]]], str]:
    """The replicate records of ``folder`` that a run of ``fingerprint`` reuses, and where they came from:
    ``"partial"`` (an interrupted run's :data:`PARTIAL` file), ``"finished"`` (a finished run's :data:`FINISHED`
    file, which is then unpacked into the partial file: this run appends to it and packs it again when its results
    are written) or ``""`` (none). Every record is returned, also those of replicates beyond this run's number.
    A finished file of another fingerprint (or that cannot be read) is not reused (a warning says why) and is
    removed, as it is when ``fresh``; a partial file of another fingerprint is left to be overwritten
    (:func:`load_partial`)."""
    import gzip
    import shutil
    import zlib

    partial, finished = folder / PARTIAL, folder / FINISHED
    if fresh:
        _remove(finished)
        return {}, ""
    done = load_partial(partial, fingerprint, say, config)
    if done:
        return done, "partial"
    if not finished.is_file():
        return {}, ""
    unpacked = folder / (PARTIAL + ".unpacked")
    try:
        with gzip.open(finished, "rb") as src, open(unpacked, "wb") as dst:
            shutil.copyfileobj(src, dst)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        say(f"warning: not reusing the replicates of the finished run in {finished}: the file is damaged ({exc})")
        _remove(unpacked)
        _remove(finished)
        return {}, ""
    except OSError as exc:
        _remove(unpacked)
        raise write_error(exc, finished, "nothing was run") from None
    done = load_partial(unpacked, fingerprint, say, config, finished_run=finished)
    try:
        if done:
            os.replace(unpacked, partial)
        else:
            unpacked.unlink()
        finished.unlink()
    except OSError as exc:
        raise write_error(exc, finished, "nothing was run") from None
    return done, ("finished" if done else "")


def keep_finished(folder: Path) -> None:
    """Keep the records of the partial file of a run whose results are written in :data:`FINISHED` (reused by a
    later run of the same fingerprint with another number of replicates), sorted by replicate so that the file
    does not depend on the order in which the workers finished them, and gzipped (level 1, no time stamp: the
    same records give the same bytes); the partial file goes. Nothing when there is none. A failed write (a full
    disk) leaves the partial file, which a later run reuses the same way."""
    import gzip

    partial, tmp = folder / PARTIAL, folder / (FINISHED + ".tmp")
    try:
        with open(partial, encoding="utf-8", errors="replace", newline="") as fh:
            lines = fh.readlines()
        if lines:
            records = sorted((parsed[0], line) for line in lines[1:]
                             if (parsed := parse_partial_record(line)) is not None)
            with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1,
                                                       mtime=0) as out:
                out.write((lines[0] if lines[0].endswith("\n") else lines[0] + "\n").encode())
                for _index, line in records:
                    out.write(line.encode())
            os.replace(tmp, folder / FINISHED)
        partial.unlink()
    except FileNotFoundError:
        return
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def replicate_ranges(indices: Iterable[int]) -> str:
    """Replicate numbers as ranges: ``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    spans: list[list[int]] = []
    for k in sorted(indices):
        if spans and spans[-1][1] == k - 1:
            spans[-1][1] = k
        else:
            spans.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def resume_message(kept: Mapping[int, Any], total: int, source: str, path: Path, extra: int = 0) -> str:
    """What a resumed run reuses: how many of its ``total`` replicates, which ones, from where, and how many it
    computes; ``extra``: records kept for a larger number of replicates."""
    where = (f"reused from the finished run in {path}" if source == "finished"
             else f"already finished in {path}")
    more = f"; {extra} more kept for a larger number of replicates" if extra else ""
    return (f"{len(kept)} of {total} replicates {where} (replicate(s) {replicate_ranges(kept)}); "
            f"computing {total - len(kept)}{more}")


def _numba_compiling() -> Any:
    """numba's compiler lock when this thread holds it (numba is compiling or loading a kernel here), else
    ``None``; numba is not imported for this."""
    import sys

    module = sys.modules.get("numba.core.compiler_lock")
    lock = getattr(module, "global_compiler_lock", None)
    try:
        return lock if lock is not None and lock.is_locked() else None
    except Exception:  # noqa: BLE001 - another numba: do not defer
        return None


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Turn SIGTERM (and SIGINT) into :class:`Interrupted` in the main thread.

    Robust against numba's compilation (review 15, F4): an exception raised by the handler inside numba's JIT,
    e.g. in llvmlite's ctypes callback (``ExecutionEngine._raw_object_cache_notify``), was swallowed there ("Exception
    ignored on calling ctypes callback function") and left numba broken, so the run ended with ``RuntimeError: no
    compiled object yet`` instead of the interruption. So:

    - while this thread holds numba's compiler lock, the signal is recorded and not raised; a helper thread waits
      for the lock and sends the signal again, which then raises at the first bytecode after the compilation;
    - a signal whose exception was swallowed anyway (by any C callback) is not lost: an exception of another type
      leaving the block after a signal is raised as that :class:`Interrupted` (chained to it), and a block ending
      normally after a swallowed signal raises it at its end."""
    import threading

    got: list[int] = []  # signals received, in order
    state = {"active": True, "raised": 0, "resending": False}

    def resend(lock: Any, signum: int) -> None:
        with lock:  # numba's RLock: free once the main thread's compilation is over
            pass
        state["resending"] = False
        if state["active"]:
            os.kill(os.getpid(), signum)

    def handler(signum: int, _frame: Any) -> None:
        got.append(signum)
        lock = _numba_compiling()
        if lock is not None:
            if not state["resending"]:
                state["resending"] = True
                threading.Thread(target=resend, args=(lock, signum), name="onlineeval-signal-resend",
                                 daemon=True).start()
            return
        state["raised"] += 1
        raise Interrupted(signum)

    try:
        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: leave signal handling to the caller
        yield
        return
    try:
        yield
    except Interrupted:
        raise
    except BaseException as exc:
        if got:  # the signal's exception was swallowed (a C callback) and this is what followed it
            raise Interrupted(got[-1]) from exc
        raise
    else:
        if got:  # received, never raised here (swallowed, or deferred past the end of the block)
            raise Interrupted(got[-1])
    finally:
        state["active"] = False
        for s, h in previous.items():
            signal.signal(s, h)


def simulate(
    config: Config,
    output: Path | None = None,
    workers: int | None = None,
    fresh: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> SimulationResult:
    """Run the whole job; write the results directory when ``output`` is given.

    Parameters
    ----------
    config:
        The validated config.
    output:
        Results directory (created); ``None`` keeps everything in memory.
    workers:
        Processes for replicates (default ``config.workers``; 0 = all cores). The numbers do
        not depend on it.
    fresh:
        Ignore finished replicates of an earlier run of the same config in ``output``, interrupted
        (:data:`PARTIAL`) or finished (:data:`FINISHED`, whose records a run with another number of
        replicates otherwise reuses).
    on_progress:
        Called with (finished replicates, total) as replicates complete.
    log:
        Receives one-line progress messages.
    """
    say = log or (lambda _msg: None)
    analysis_version()  # the code this run analyses with, hashed before anything (a worker) forks
    n_workers = resolve_workers(config.workers if workers is None else workers)
    if output is None:
        with signals_interrupt():
            world, users, truths = prepare(config, say)
            done: dict[int, list[dict[str, Any]]] = {}
            _run(config, world, done, n_workers, None, on_progress, say)
        return finish(config, world, users, truths, done, None, "")
    if output.exists() and not output.is_dir():
        raise ConfigError(("output",), f"{output} exists and is not a directory; give a results directory")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, output, "nothing was run") from None
    with folder_lock(output), signals_interrupt():
        fingerprint = config_fingerprint(config)
        found = other_results(output, config, fingerprint)
        if found is not None and not found.same_config and not fresh:
            # a --seed or --set typo must not cost an earlier run's results: refused before anything is touched
            raise refuse_other_results(output, found, fingerprint)
        world, users, truths = prepare(config, say)
        if found is not None or fresh:
            # the old outputs go before the first record of this run is written: an interrupted run leaves only
            # its own records, never another config's report beside them
            if found is not None:
                say(f"warning: replacing the finished results in {output} (fingerprint {found.fingerprint}): "
                    f"{found.differences}; they are deleted now")
            remove_results(output)
        partial = output / PARTIAL
        total = config.replicates
        done, source = reopen_records(output, fingerprint, say, config, fresh)
        kept = {i: r for i, r in done.items() if i < total}
        if kept:
            shown = output / FINISHED if source == "finished" else partial
            say("resuming: " + resume_message(kept, total, source, shown, len(done) - len(kept)))
        try:
            if done:
                partial_fh = open(partial, "a", encoding="utf-8")
            else:
                partial_fh = open(partial, "w", encoding="utf-8")
                partial_fh.write(partial_header(fingerprint))
                partial_fh.flush()
        except OSError as exc:
            raise write_error(exc, partial, "nothing was run") from None
        try:
            _run(config, world, kept, n_workers, partial_fh, on_progress, say)
        finally:
            with contextlib.suppress(OSError):
                partial_fh.close()
        result = finish(config, world, users, truths, kept, output, fingerprint)
        keep_finished(output)  # the records stay for a later run with more replicates
    return result


def prepare_world(config: Config, say: Callable[[str], None] = lambda _msg: None) -> tuple[World, UserModels]:
    """The world (from the config's world seed) and the users' click models, checked
    against each other (the click models take the world's grades)."""
    world = build_world(config, world_seed(config.seed))
    users = UserModels.from_config(config.users)
    users.check_world(world.n_grades, world.ranked_labels("A")[:8])
    say(f"world: {world.n_queries} queries, rankers A and B at depth {world.depth}")
    from simulations.designs.counterfactual.serving import interval_warnings

    for line in interval_warnings(config):
        say(line)
    return world, users


def prepare(config: Config, say: Callable[[str], None] = lambda _msg: None) -> tuple[World, UserModels, list[Truth]]:
    """The world, the users' click models and the ground truth (fixed across replicates):
    :func:`prepare_world` then :func:`simulations.runner.compute_truth`."""
    world, users = prepare_world(config, say)
    return world, users, compute_truth(config, world, users)


def _run(
    config: Config,
    world: World,
    done: dict[int, list[dict[str, Any]]],
    n_workers: int,
    partial_fh: IO[str] | None,
    on_progress: Callable[[int, int], None] | None,
    say: Callable[[str], None],
) -> None:
    """Run the replicates not in ``done``, appending each finished one to ``partial_fh``."""
    total = config.replicates
    todo = [i for i in range(total) if i not in done]
    used, cores = min(n_workers, max(len(todo), 1)), os.cpu_count() or 1
    over = (f" (more processes than this machine's {cores} cores: each adds memory, none adds speed)"
            if used > cores else "")
    say(f"running {len(todo)} replicates on {used} worker(s){over}")
    if on_progress is not None:
        on_progress(len(done), total)

    def on_done(index: int, rows: list[dict[str, Any]]) -> None:
        done[index] = rows
        if partial_fh is not None:
            try:
                partial_fh.write(partial_record(index, rows))
                partial_fh.flush()
            except OSError as exc:
                raise write_error(
                    exc, Path(partial_fh.name),
                    f"the replicates finished before this one are kept in {partial_fh.name}; free space "
                    "and run again to resume",
                ) from None
        if on_progress is not None:
            on_progress(len(done), total)

    run_replicates(config, world, todo, n_workers, on_done)


def finish(
    config: Config,
    world: World,
    users: UserModels,
    truths: list[Truth],
    done: dict[int, list[dict[str, Any]]],
    output: Path | None,
    fingerprint: str,
) -> SimulationResult:
    """Analyse the finished replicates ``done`` (replicate -> rows) against the truths and
    write the results folder when ``output`` is given (``fingerprint`` goes in summary.json)."""
    rows = pd.DataFrame([row for i in sorted(done) for row in done[i]])
    summary, curves = analyse(rows, truths, world, config)
    summary["analysis_version"] = analysis_version()  # a sweep re-analyses a point stamped by other code
    utility = any(d.type == "ab" and d.metric == "utility" for d in config.designs)  # an A/B design carries it
    summary["truth_by_segment"] = truth_by_segment(world, users, utility)
    if any(d.type == "ab" for d in config.designs):
        from simulations.decomposition import decomposition_summary

        # the shrinkage of the pair split into its causes, on the exact A/B truth
        summary["decomposition"] = decomposition_summary(world, users, config.offline_metric, utility)
    result = SimulationResult(config, world, truths, rows, curves, summary, output)
    if output is not None:
        from simulations.report import write_results

        try:
            # designs[i].export_log: the simulated logs, before summary.json (a finished run has all of them)
            export_logs(config, world, users, output, fingerprint)
            write_results(result, fingerprint)
        except OSError as exc:
            raise write_error(exc, output, f"the finished replicates are kept in {output / PARTIAL}") from None
    return result


# the earlier private names of the helpers above (kept for callers written against them)
_PARTIAL_FORMAT = PARTIAL_FORMAT
_record = partial_record
_parse_record = parse_partial_record
_load_partial = load_partial
_folder_lock = folder_lock
_signals_interrupt = signals_interrupt
_write_error = write_error
_prepare = prepare
_finish = finish
