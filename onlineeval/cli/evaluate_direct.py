"""The direct path of ``onlineeval evaluate``: plain options parsed without typer's app.

:func:`run_direct` (called by :func:`onlineeval.cli.main`) hands :func:`evaluate_cmd` the
parameters typer would, for the common case of plain options, and skips building the whole
typer app; anything unusual goes through typer, which then parses and reports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["direct_params", "run_direct"]


#: option -> (parameter, kind, bounds) of :func:`evaluate_cmd`, for :func:`run_direct`
#: (tests check this table against typer's own parameters)
_DIRECT_OPTIONS: dict[str, tuple[str, str, tuple[float | None, float | None]]] = {}
for _names, _param, _kind, _bounds in (
    (("--qrels", "-q"), "qrels", "path", (None, None)),
    (("--run", "-r"), "run", "paths", (None, None)),
    (("--letor",), "letor", "path", (None, None)),
    (("--scores",), "scores", "paths", (None, None)),
    (("--score-feature",), "score_feature", "ints", (0, None)),
    (("--query-file",), "query_file", "path", (None, None)),
    (("--metrics", "-m"), "metrics", "str", (None, None)),
    (("--baseline", "-b"), "baseline", "str", (None, None)),
    (("--preset",), "preset_name", "str", (None, None)),
    (("--gain",), "gain", "str", (None, None)),
    (("--ties",), "ties", "str", (None, None)),
    (("--empty",), "empty", "str", (None, None)),
    (("--missing",), "missing", "str", (None, None)),
    (("--rel-min",), "rel_min", "int", (None, None)),
    (("--depth",), "depth", "int", (1, None)),
    (("--per-query",), "per_query", "path", (None, None)),
    (("--with-per-query",), "with_per_query", "flag", (None, None)),
    (("--segments",), "segments", "path", (None, None)),
    (("--format", "-f"), "output_format", "str", (None, None)),
    (("--comparisons",), "comparisons_file", "path", (None, None)),
    (("--seed",), "seed", "int", (0, None)),
    (("--permutations",), "permutations", "int", (1, None)),
    (("--bootstrap",), "bootstrap", "int", (100, None)),
    (("--alpha",), "alpha", "float", (0.0, 1.0)),
):
    for _name in _names:
        _DIRECT_OPTIONS[_name] = (_param, _kind, _bounds)


def _direct_value(kind: str, text: str, bounds: tuple[float | None, float | None]) -> Any:
    """The option value typer would pass, or ``None`` when the text is not plainly valid."""
    import re

    if not text or text.startswith("-"):
        return None
    if kind in ("path", "paths"):
        return Path(text)
    if kind == "str":
        return text
    if kind in ("int", "ints"):
        if not re.fullmatch(r"0|[1-9][0-9]{0,17}", text):
            return None
        value: float = int(text)
    else:  # float
        if not re.fullmatch(r"(0|[1-9][0-9]{0,8})(\.[0-9]{1,15})?|\.[0-9]{1,15}", text):
            return None
        value = float(text)
    low, high = bounds
    if (low is not None and value < low) or (high is not None and value > high):
        return None
    return value


def direct_params(args: list[str]) -> dict[str, Any] | None:
    """Parameters of :func:`evaluate_cmd` from plain ``evaluate`` arguments, exactly as typer
    would pass them, or ``None`` for anything else (help, an unknown, repeated, attached or
    malformed option, a value out of range): typer then parses, and reports errors, itself."""
    params: dict[str, Any] = {}
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, attached = token.partition("=") if token.startswith("--") else (token, "", "")
        spec = _DIRECT_OPTIONS.get(name)
        if spec is None:
            return None
        param, kind, bounds = spec
        if kind == "flag":
            if eq or param in params:
                return None
            params[param] = True
            i += 1
            continue
        if eq:
            text = attached
            i += 1
        elif i + 1 < len(args):
            text = args[i + 1]
            i += 2
        else:
            return None
        value = _direct_value(kind, text, bounds)
        if value is None:
            return None
        if kind in ("paths", "ints"):
            params.setdefault(param, []).append(value)
        elif param in params:
            return None
        else:
            params[param] = value
    defaults = {
        "qrels": None, "run": (), "letor": None, "scores": (), "score_feature": (), "query_file": None,
        "metrics": "nDCG@10,AP,RR,P@10", "baseline": None, "preset_name": "default", "gain": None,
        "ties": None, "empty": None, "missing": None, "rel_min": None, "depth": None, "per_query": None,
        "with_per_query": False, "segments": None, "output_format": "table", "comparisons_file": None,
        "seed": 0, "permutations": 10_000, "bootstrap": 10_000, "alpha": 0.05,
    }
    return defaults | params


def run_direct(args: list[str]) -> bool:
    """Run ``evaluate`` without building the typer app when :func:`direct_params` can parse
    ``args``; ``False`` (nothing done) otherwise. Exits like typer: 0, or the error's code."""
    import sys

    params = direct_params(args)
    if params is None:
        return False
    from onlineeval.cli.evaluate import evaluate_cmd

    _keep_freed_memory()
    _no_huge_page_advice()
    try:
        evaluate_cmd(**params)
    except Exception as exc:
        typer = sys.modules.get("typer")  # a typer.Exit means typer is imported (see _common.fail)
        if typer is not None and isinstance(exc, typer.Exit):
            sys.exit(exc.exit_code)
        raise
    return True


def _keep_freed_memory() -> None:
    """Let glibc's allocator keep freed memory for reuse (this process only).

    Reading and ranking millions of rows allocate and free many arrays of tens of MB; by
    default glibc gives each back to the system (``munmap`` / heap trimming) and the next
    one is page-faulted in afresh, which costs more system time than the numpy work. Larger
    mmap and trim thresholds keep that memory in the process until it exits. Measured on
    the whole ``evaluate`` process at 100k queries x 100 documents (10M run lines, paired
    runs): system time 3.4 s -> 1.4 s, CPU time x0.73, wall time x0.75, peak memory +1%.
    One arena for all threads (``M_ARENA_MAX``): the reader's helper thread
    (:func:`onlineeval.io.trec_bytes.threads`) then reuses the memory the calling thread
    freed instead of faulting in a heap of its own (measured: peak memory 850 -> 840 MB,
    minor page faults 221k -> 218k at 10M run lines). Safe because it is set only here, on the
    direct command-line path, in a short-lived process that exits when the command ends (never
    by the library, whose host process may live long); it changes no result. A C library
    without ``mallopt`` (not glibc) is left alone.
    """
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_ARENA_MAX
    for option, value in ((-1, 2**31 - 1), (-2, 1 << 30), (-3, 1 << 30), (-8, 1)):
        mallopt(option, value)


def _no_huge_page_advice() -> None:
    """Stop numpy from asking the kernel for transparent huge pages (this process only).

    numpy advises ``MADV_HUGEPAGE`` on every array of 4 MiB or more. Where the kernel's
    transparent huge pages are ``madvise`` for both ``enabled`` and ``defrag`` (common
    defaults), each fault on such an array may compact memory synchronously to find a
    free 2 MiB page, and that system time outweighs the fewer TLB misses for arrays that
    are written once and read a few times. Measured on the whole ``evaluate`` process at
    100k queries x 100 documents (one run, 4 pairs alternated, loaded 2-core machine):
    CPU time x0.89 (system 2.2 s -> 1.2 s, user +2%), wall time x0.90. Set only on the
    direct command-line path, for a short-lived process (the library leaves numpy's
    setting alone); it changes no result. A numpy without the switch is left alone.
    """
    import numpy as np

    switch = getattr(getattr(np, "_core", None), "multiarray", None)
    switch = getattr(switch, "_set_madvise_hugepage", None)
    if switch is None:  # numpy 1.x keeps it in numpy.core.multiarray
        switch = getattr(getattr(getattr(np, "core", None), "multiarray", None), "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)
