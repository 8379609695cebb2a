"""Resume safety of a results folder: whether it holds the finished results of another config
(:func:`other_results`, :class:`OtherResults`, :func:`_config_differences`), the refusal that names them
(:func:`refuse_other_results`), the removal of a finished run's outputs before another run's first record
(:func:`remove_results`, :data:`RESULT_FILES`), and the version of the analysis code a summary is stamped with
(:func:`analysis_version`), so that a resumed sweep does not reuse points analysed by other code. Moved from
:mod:`simulations.job` (see its docstring for the whole resume protocol), which re-exports the public names; the
fingerprint and :data:`simulations.job.STREAM_VERSION` are read from there."""

from __future__ import annotations

import errno
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onlineeval.errors import OutputError

from simulations.config import Config
from simulations.export_log import remove_logs
from simulations.stream import FINISHED

__all__ = [
    "INPUTS_ONLY",
    "OtherResults",
    "RESULT_FILES",
    "analysis_version",
    "other_results",
    "refuse_other_results",
    "remove_results",
    "write_error",
]


#: the packages whose sources make up :func:`analysis_version` (their ``cli`` subpackages left out) and the
#: libraries whose versions it includes
#: (clickmodels too: the truths, the decomposition and the model-based estimators run its code; numba and llvmlite:
#: the compiled kernels)
_ANALYSIS_PACKAGES = ("simulations", "onlineeval", "clickmodels")


_ANALYSIS_LIBRARIES = ("numpy", "scipy", "pandas", "statsmodels", "numba", "llvmlite")


@functools.lru_cache(maxsize=1)
def analysis_version() -> str:
    """The version of the code that turns replicates into results, stamped in every summary.json
    (``"analysis_version"``; review 15, F3): a hash of the source of every module of :data:`_ANALYSIS_PACKAGES`
    (the command-line layer excepted) and of the versions of :data:`_ANALYSIS_LIBRARIES`.

    :data:`STREAM_VERSION` covers only the numbers a seed gives, and ``onlineeval_version`` is not bumped during
    development, so a resumed sweep used to reuse points analysed by other code (1301495's size-refit correction
    applied only to the points computed after it). A hand-bumped constant fails the same way the day someone
    forgets it; the hash cannot. It changes more often than the analysis does (a comment, a help text), which costs
    only a re-analysis of the finished points (their replicates are reused, their truths recomputed), never a
    mix. Computed once per process (the first caller is the run's main process, before its workers fork)."""
    import importlib.metadata
    import importlib.util

    h = hashlib.sha256()
    for package in _ANALYSIS_PACKAGES:
        spec = importlib.util.find_spec(package)
        roots = list(spec.submodule_search_locations or []) if spec is not None else []
        for root in map(Path, roots):
            for path in sorted(root.rglob("*.py")):
                rel = path.relative_to(root)
                if rel.parts[0] in ("cli", "__pycache__"):
                    continue
                h.update(f"{package}/{rel.as_posix()}\0".encode())
                h.update(path.read_bytes())
    for lib in _ANALYSIS_LIBRARIES:
        try:
            h.update(f"{lib}=={importlib.metadata.version(lib)}\0".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{lib} missing\0".encode())
    return h.hexdigest()[:16]


#: the files a finished run writes into its folder, besides its figures (every ``*.png``) and :data:`FINISHED`
RESULT_FILES = ("summary.json", "report.html", "config.effective.yaml", "replicates.csv", "curves.csv")


@dataclass(frozen=True)
class OtherResults:
    """Finished results in a folder that are not a run's (:func:`other_results`)."""

    fingerprint: str  # theirs
    same_config: bool  # the same config and input files, computed by an onlineeval of another stream version
    differences: str  # what differs, for a message
    inputs_only: bool = False  # the same config keys, only the contents of input files differ


def _finished_header(path: Path) -> dict[str, Any]:
    import gzip
    import zlib

    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            header = json.loads(fh.readline())
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return header if isinstance(header, dict) else {}


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    if isinstance(data, list) and data and any(isinstance(v, (dict, list)) for v in data):
        out = {}
        for i, value in enumerate(data):
            out.update(_flat(value, f"{prefix}[{i}]"))
        return out
    return {prefix: data}


#: :func:`_config_differences` when only the contents of input files differ
INPUTS_ONLY = "the same config keys; the contents of its input files differ"


def _config_differences(old: Any, config: Config) -> str:
    """The key paths whose values differ between a recorded effective config ``old`` and ``config`` (not the
    output folder, the workers or the number of replicates), e.g. ``seed 20261202 -> 5``."""
    if not isinstance(old, dict):
        return "its config is not recorded"
    new = json.loads(json.dumps(config.effective(), default=str))
    old = json.loads(json.dumps(old, default=str))
    for data in (old, new):
        for key in ("output", "workers", "replicates"):
            data.pop(key, None)
    a, b = _flat(old), _flat(new)
    keys = [k for k in list(a) + [k for k in b if k not in a] if a.get(k, "(unset)") != b.get(k, "(unset)")]
    if not keys:
        return INPUTS_ONLY
    shown = [f"{k} {json.dumps(a.get(k, '(unset)'))} -> {json.dumps(b.get(k, '(unset)'))}" for k in keys[:6]]
    more = f" and {len(keys) - 6} more key(s)" if len(keys) > 6 else ""
    return "; ".join(shown) + more


def other_results(folder: Path, config: Config, fingerprint: str) -> OtherResults | None:
    """The finished results in ``folder`` (its ``summary.json``, or the records of :data:`FINISHED`) when they are
    another fingerprint's than ``fingerprint`` (``config``'s); ``None`` when there are none or they are this
    fingerprint's."""
    # read from simulations.job at each call: the stream version a run stamps and fingerprints with is job's
    # (tests stand in another version by patching it there), and the fingerprint is computed there
    from simulations.job import STREAM_VERSION, _fingerprint

    summary, finished = folder / "summary.json", folder / FINISHED
    recorded: dict[str, Any] = {}
    if summary.is_file():
        try:
            data = json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            data = None
        if not isinstance(data, dict):
            return OtherResults("unknown", False, f"{summary} cannot be read")
        recorded = {"fingerprint": data.get("config_fingerprint"), "stream_version": data.get("stream_version"),
                    "config": data.get("config")}
    if finished.is_file():
        header = _finished_header(finished)
        if not recorded or header.get("fingerprint") != fingerprint:
            recorded = {"fingerprint": header.get("fingerprint"), "stream_version": header.get("stream_version"),
                        "config": recorded.get("config")}
    if not recorded or recorded["fingerprint"] == fingerprint:
        return None
    old = str(recorded["fingerprint"])
    version = recorded["stream_version"]
    known = version is None or (isinstance(version, int) and not isinstance(version, bool))
    if not known:  # review 17: never 'input files differ' for a version this code cannot read
        return OtherResults(old, False, f"its recorded stream version {json.dumps(version, default=str)} is not "
                            f"one this onlineeval knows (an integer; this one {STREAM_VERSION})")
    if version != STREAM_VERSION and _fingerprint(config, version) == old:
        return OtherResults(old, True, f"the same config, computed by an onlineeval of stream version {version} "
                            f"(this one {STREAM_VERSION}), whose numbers for a seed differ")
    differences = _config_differences(recorded["config"], config)
    return OtherResults(old, False, differences, differences == INPUTS_ONLY)


def refuse_other_results(folder: Path, found: OtherResults, fingerprint: str, what: str = "the folder ") -> OutputError:
    """The error of a run refused because ``folder`` holds ``found``, another config's finished results."""
    return OutputError(
        f"{what}holds the finished results of another config (fingerprint {found.fingerprint}; this run's "
        f"{fingerprint}): {found.differences}. Nothing was changed. Run with --fresh to replace them (they are "
        "deleted), or choose another --output", str(folder))


def remove_results(folder: Path) -> None:
    """Delete a finished run's outputs from ``folder`` (:data:`RESULT_FILES`, its ``*.png`` figures,
    :data:`FINISHED` and the exported logs, :func:`simulations.export_log.remove_logs`): a run of another
    fingerprint (or ``fresh``) does this before it writes its first record, so that the folder never holds one
    config's results beside another's records."""
    for name in (*RESULT_FILES, FINISHED):
        _remove(folder / name)
    for png in sorted(folder.glob("*.png")):
        _remove(png)
    try:
        remove_logs(folder)  # the exported logs of designs[i].export_log
    except OSError as exc:
        raise write_error(exc, folder, "nothing was run") from None


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise write_error(exc, path, "nothing was run") from None


def write_error(exc: OSError, path: Path, kept: str) -> OutputError:
    """A failed write as one clear :class:`OutputError` (a full disk says so; ``kept`` says what is kept)."""
    reason = "the disk is full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
    return OutputError(f"cannot write: {reason}; {kept}", str(getattr(exc, "filename", None) or path))
